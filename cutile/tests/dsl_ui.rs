//! Compile-fail tests of the DSL's diagnostics (trybuild): each file under `tests/ui/` must fail to build
//! with exactly the messages recorded next to it in `*.stderr`; each file under `tests/ui-pass/` must
//! build (their presence makes trybuild run `cargo build`, so errors raised when a kernel is
//! instantiated, such as `mma_scaled`'s block-size assertion, are reached).

#![allow(clippy::unwrap_used)]

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui-pass/*.rs");
}
