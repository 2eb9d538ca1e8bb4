//! Shared parts of the example programs (`src/bin/*`) and of the GPU harness (`gpu-harness`):
//!
//! - [`data`]: element types chosen at run time ([`data::Dt`]), device tensors of them
//!   ([`data::DevTensors`]), seeded host data, axis swaps and relative L2 error;
//! - [`workload`]: one host-API call as data ([`workload::Workload`]: a `CallSpec` from the families'
//!   `representative_calls()` or built for a shape, its storage layout, inputs, CPU reference, metric
//!   and the launcher plans a bundle needs for it); the check and benchmark lists;
//! - [`run`]: calling the family's host op on device tensors ([`run::call`]), the correctness check
//!   against the reference and the CUDA-event benchmark of the call;
//! - [`launch_times`]: the in-situ time of each launch of a call (`gpu-harness launches`), and the
//!   timing of the families that own their tensors ([`launch_times::time_call`]);
//! - timing: in `cutile::runtime::timing` (events, medians, the L2 flush).
//!
//! No kernel, tile, variant or grid is chosen here: the host API chooses (each family's `config.rs`).
//!
//! Examples need a GPU: without a CUDA driver each prints `skipped: no CUDA driver` and exits 0
//! ([`gpu_or_skip`]). Kernels come from tileiras when it is installed, else from registered AOT bundles
//! (`CUTILE_BUNDLE`, made by `cargo xtask aot`).

pub mod attention_backward;
pub mod attention_variants;
pub mod data;
pub mod decode;
pub mod fp8;
pub mod fused_qkv;
pub mod launch_times;
pub mod mla;
pub mod run;
pub mod transformer;

pub mod workload;

use cutile::runtime::{Device, RuntimeError, Stream};

/// Error type of the examples: anything printable.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The first device and a stream on it, or `None` after printing `skipped: no CUDA driver` (or device).
pub fn gpu_or_skip(program: &str) -> Result<Option<(Device, Stream)>, BoxError> {
    match Device::new(0) {
        Ok(d) => {
            let s = Stream::new(&d)?;
            Ok(Some((d, s)))
        }
        Err(
            e @ (RuntimeError::NoDriver { .. }
            | RuntimeError::NoDevice { .. }
            | RuntimeError::DriverInit { .. }),
        ) => {
            println!("{program}: skipped: no CUDA driver or device ({e})");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Runs the example program of `ops`: [`workload::checks`] and [`workload::benches`] of those ops.
pub fn example_ops(program: &str, ops: &[&str]) {
    example_main(
        program,
        workload::of_ops(workload::checks(), ops),
        workload::of_ops(workload::benches(), ops),
    );
}

/// Runs `workloads` as an example program: each is checked against its CPU reference, then timed; the
/// process exits non-zero when a check fails. Without a GPU it prints `skipped` and returns.
pub fn example_main(
    program: &str,
    checks: Vec<workload::Workload>,
    benches: Vec<workload::Workload>,
) {
    let code = match example(program, checks, benches) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("{program}: error: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn example(
    program: &str,
    checks: Vec<workload::Workload>,
    benches: Vec<workload::Workload>,
) -> Result<bool, BoxError> {
    let Some((device, stream)) = gpu_or_skip(program)? else {
        return Ok(true);
    };
    println!("{program} on {} ({})", device.name(), device.arch());
    let mut ok = true;
    for w in &checks {
        let r = run::check(&device, &stream, w)?;
        println!("{}", r.line());
        ok &= r.pass;
    }
    let mut flush =
        cutile::runtime::timing::L2Flush::new(&device, cutile::runtime::timing::FLUSH_BYTES)?;
    for w in &benches {
        let r = run::bench(&device, &stream, w, 50, Some(&mut flush))?;
        println!("{}", r.line());
    }
    Ok(ok)
}
