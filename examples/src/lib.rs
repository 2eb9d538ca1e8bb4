//! Shared parts of the example programs (`src/bin/*`) and of the GPU harness (`gpu-harness`):
//!
//! - [`data`]: element types chosen at run time ([`data::Dt`]), device tensors of them
//!   ([`data::DevTensor`]), seeded host data, relative L2 error and per-type tolerances;
//! - [`workload`]: one kernel launch as data ([`workload::Workload`]: kernel, parameters, grid rule,
//!   CPU reference, throughput metric) and the catalog of workloads ([`workload::suite`]);
//! - [`run`]: running a workload on a GPU — correctness against the reference, CUDA-event benchmarks
//!   with an L2 flush — and describing its launch without a GPU (for AOT planning);
//! - timing: in `cutile::runtime::timing` (events, medians, the L2 flush).
//!
//! Examples need a GPU: without a CUDA driver each prints `skipped: no CUDA driver` and exits 0
//! ([`gpu_or_skip`]). Kernels come from tileiras when it is installed, else from registered AOT bundles
//! (`CUTILE_BUNDLE`, made by `cargo xtask aot`).

pub mod data;
pub mod run;

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
