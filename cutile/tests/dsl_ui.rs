//! Compile-fail tests of the DSL's diagnostics (trybuild): each file under `tests/ui/` must fail to build
//! with exactly the messages recorded next to it in `*.stderr`.

#![allow(clippy::unwrap_used)]

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
