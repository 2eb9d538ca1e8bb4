//! `gpu-harness`: one self-contained binary for GPU runs of the workspace's kernels.
//!
//! The GPU machine has no cargo, no tileiras and no network, so the work is split in two:
//!
//! 1. On a CPU machine with tileiras, `cargo xtask gpu prepare` builds this binary (release, stripped) and
//!    runs `gpu-harness plan --arch sm_90 --bundle .gpu/kernels.bundle`, which plans every host-API call
//!    `run` and `tune` make (`cutile_examples::workload::suite`) with the host API's own planner and
//!    every tuning candidate (`launcher_plans(.., all_candidates = true)`), compiles them into one AOT
//!    bundle ([`aot::build_bundle`], shared with `cargo xtask aot`), re-opens it and looks every launch
//!    up. Both land in the git-ignored `.gpu/` folder.
//! 2. On the GPU machine (carry `.gpu`):
//!
//!    ```text
//!    .gpu/gpu-harness run --bundle .gpu/kernels.bundle --out $OUT
//!    ```
//!
//!    registers the bundle (no tileiras needed), calls every host op on ragged, multi-dim, view and
//!    f16/bf16/f32 shapes and checks it against its CPU reference (relative L2 error within
//!    `cutile_kernels::tolerance`), benchmarks every family's representative calls with CUDA events
//!    (median of 50 after warm-up, L2 flushed before each call of memory-bound ops; the list goes to
//!    `$OUT/bench-calls.json` for `ci/gpu/peers.py`), measures
//!    host time per warm launch of a tiny kernel (median of 10k) and per kernel inside a CUDA graph, and
//!    the first launch in a new process with a warm disk cache and with a bundle (it re-runs itself as a
//!    child). It prints a table and writes `$OUT/gpu-harness.json` (rewritten after each phase, so a
//!    timeout still leaves the phases done). `--phases checks,bench,host,graph,first` selects phases.
//!
//! `tune --bundle B --out DIR [--ops ..]` makes each benchmark call once with `CUTILE_TUNE=force`
//! (see [`tune`]) and prints default, winner and speed-up per call.
//!
//! `launches --bundle B --out DIR [--ops ..]` times every launch of each benchmark call in place
//! (captured once, replayed with an event after each launch; [`launches`]).
//!
//! `tp --out DIR` runs the tensor-parallel block over the node's GPUs through NCCL ([`tp`],
//! `docs/multi-gpu.md`).
//!
//! Without a CUDA driver, `run` prints `skipped: no CUDA driver` and exits 3, or 0 with `--allow-skip`.
//! Exit status 1 means a check failed or a phase reported errors.

pub mod aot;
pub mod bench;
pub mod check;
pub mod first;
pub mod host;
pub mod launches;
pub mod merge;
pub mod plan;
pub mod progress;
pub mod report;
pub mod run;
pub mod schema;
pub mod tp;
pub mod tune;
pub mod validate;

/// Runs one workload or phase, turning a panic into an error so the remaining ones still run.
pub fn guarded<T>(f: impl FnOnce() -> Result<T, BoxError>) -> Result<T, BoxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panicked: {msg}").into())
    })
}

/// Error type of the harness: anything printable.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
