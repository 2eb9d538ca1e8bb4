//! `gpu-harness`: one self-contained binary for GPU runs of the workspace's kernels.
//!
//! The GPU machine has no cargo, no tileiras and no network, so the work is split in two:
//!
//! 1. On a CPU machine with tileiras, `cargo xtask gpu prepare` builds this binary (release, stripped) and
//!    runs `gpu-harness plan --arch sm_90 --bundle .gpu/kernels.bundle`, which enumerates exactly the
//!    launches `run` will make (the same workload list, the same `Launcher::plan_for` the launches call),
//!    and compiles them into one AOT bundle. Both land in the git-ignored `.gpu/` folder.
//! 2. On the GPU machine (carry `.gpu`):
//!
//!    ```text
//!    .gpu/gpu-harness run --bundle .gpu/kernels.bundle --out $OUT
//!    ```
//!
//!    registers the bundle (no tileiras needed), checks every kernel on ragged shapes against its CPU
//!    reference (relative L2 error: f32 ≤ 1e-5, bf16 ≤ 1e-2), benchmarks the reference shapes with CUDA
//!    events (median of 50 after warm-up, L2 flushed before each launch of memory-bound kernels), measures
//!    host time per warm launch of a tiny kernel (median of 10k) and per kernel inside a CUDA graph, and
//!    the first launch in a new process with a warm disk cache and with a bundle (it re-runs itself as a
//!    child). It prints a table and writes `$OUT/gpu-harness.json` (rewritten after each phase, so a
//!    timeout still leaves the phases done). `--phases checks,bench,host,graph,first` selects phases.
//!
//! Without a CUDA driver, `run` prints `skipped: no CUDA driver` and exits 3, or 0 with `--allow-skip`.
//! Exit status 1 means a check failed or a phase reported errors.

pub mod aot;
pub mod first;
pub mod host;
pub mod plan;
pub mod report;
pub mod run;
pub mod tune;

/// Error type of the harness: anything printable.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
