//! Test-only helpers shared by every crate's tests (a dev-dependency; it depends on std and `approx` only, so
//! `cutile-ir`'s tests can use it too):
//! - [`skip`]: the one way a test skips because a tool (tileiras, tileirdisasm) is missing. It prints
//!   `SKIPPED {test}: {why}` and returns, except under `CUTILE_REQUIRE_TOOLS=1` (set by `cargo xtask test`,
//!   i.e. CI, which has just installed the toolchain), where it panics so the test fails instead of passing
//!   vacuously. [`skip_no_gpu`] is the GPU-absence counterpart, which never fails: GPU tests are `#[ignore]`d
//!   and run on machines chosen to have one.
//! - [`tools`]: tileiras/tileirdisasm discovery for tests that cannot use `cutile::toolchain`.
//! - [`data`]: deterministic inputs; [`compare`]: tolerance checks built on `approx`.

pub mod compare;
pub mod data;
pub mod tools;

pub use compare::{Mismatch, all_close, assert_all_close, max_abs_err, rel_l2};
pub use data::data;

/// The environment variable that turns tool-missing skips into failures.
pub const REQUIRE_TOOLS_ENV: &str = "CUTILE_REQUIRE_TOOLS";

/// Whether `CUTILE_REQUIRE_TOOLS=1`: a test that needs a tool must fail rather than skip.
pub fn tools_required() -> bool {
    std::env::var(REQUIRE_TOOLS_ENV).is_ok_and(|v| v == "1")
}

/// Skip (the rest of) `test` because a tool is missing: print `SKIPPED {test}: {why}` and return, so the
/// caller returns next. Panics instead when [`tools_required`], so CI cannot pass by skipping.
#[track_caller]
pub fn skip(test: &str, why: &str) {
    if tools_required() {
        panic!(
            "{test}: {why}, and {REQUIRE_TOOLS_ENV}=1 requires the tools (run `cargo xtask toolchain`, or unset it)"
        );
    }
    eprintln!("SKIPPED {test}: {why}");
}

/// Skip `test` because there is no usable CUDA driver or device: prints `SKIPPED {test}: {why}`. Never
/// panics, whatever `CUTILE_REQUIRE_TOOLS` says; GPU tests are `#[ignore]`d instead.
pub fn skip_no_gpu(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
}
