//! `run`: the phases on the GPU machine, each recorded in the report and the JSON rewritten after it.

use std::path::Path;
use std::process::ExitCode;

use cutile::bundle::{self, Bundle};
use cutile::runtime::timing::{FLUSH_BYTES, L2Flush};
use cutile::runtime::{Device, RuntimeError, Stream};
use cutile_examples::run::{bench, check};
use cutile_examples::workload::{Workload, benches, checks};

use crate::report::{self, Report};
use crate::{BoxError, first, host, plan};
use cutile::toolchain::GpuArch;

/// Launches timed per benchmark, host-time launches, kernels per graph, first-launch repetitions.
const BENCH_ITERS: usize = 50;
const HOST_LAUNCHES: usize = 10_000;
const GRAPH_KERNELS: usize = 1000;
const FIRST_LAUNCH_REPS: usize = 5;

/// Runs one workload or phase, turning a panic into an error so the remaining phases still run.
fn guarded<T>(f: impl FnOnce() -> Result<T, BoxError>) -> Result<T, BoxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panicked: {msg}").into())
    })
}

pub fn run(
    bundle_path: &Path,
    out: &Path,
    allow_skip: bool,
    phases: &[String],
) -> Result<ExitCode, BoxError> {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(
            e @ (RuntimeError::NoDriver { .. }
            | RuntimeError::NoDevice { .. }
            | RuntimeError::DriverInit { .. }),
        ) => {
            println!("skipped: no CUDA driver or device ({e})");
            return Ok(if allow_skip {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            });
        }
        Err(e) => return Err(e.into()),
    };
    let stream = Stream::new(&device)?;
    let b = Bundle::open(bundle_path)?;
    std::fs::create_dir_all(out)?;
    let mut r = Report {
        device: device.name().to_string(),
        arch: device.arch(),
        sm_count: device.sm_count(),
        bundle: bundle_path.display().to_string(),
        bundle_entries: b.len(),
        ..Report::default()
    };
    if let Some(arch) = GpuArch::from_compute_capability(
        device.compute_capability().0,
        device.compute_capability().1,
    ) {
        for m in plan::missing(&b, arch, &cutile::launch::key_toolchain_version())? {
            println!("not in the bundle (will fail unless compiled here): {m}");
            r.errors.push(format!("not in the bundle: {m}"));
        }
    }
    bundle::register(b);
    let started = std::time::Instant::now();
    let on = |p: &str| {
        let yes = phases.iter().any(|x| x == p);
        if yes {
            eprintln!("-- phase {p} at {:.1} s", started.elapsed().as_secs_f64());
        }
        yes
    };
    println!(
        "gpu-harness on {} ({}), {} bundle entries; phases {phases:?}",
        r.device, r.arch, r.bundle_entries
    );

    if on("checks") {
        for w in checks() {
            match guarded(|| check(&device, &stream, &w)) {
                Ok(c) => {
                    println!("{}", c.line());
                    r.checks.push(report::Check {
                        name: c.name,
                        rel_l2: c.rel_err,
                        tolerance: c.tolerance,
                        compared: c.compared,
                        pass: c.pass,
                    });
                }
                Err(e) => {
                    println!("{}: ERROR {e}", w.name);
                    r.errors.push(format!("check {}: {e}", w.name));
                }
            }
        }
        r.write(out)?;
    }
    if on("bench") {
        let path = write_bench_calls(out, &benches())?;
        println!("benchmark calls: {}", path.display());
        let mut flush = L2Flush::new(&device, FLUSH_BYTES)?;
        for w in benches() {
            match guarded(|| bench(&device, &stream, &w, BENCH_ITERS, Some(&mut flush))) {
                Ok(b) => {
                    println!("{}", b.line());
                    r.benches.push(report::Bench {
                        name: b.name,
                        median_us: b.stats.median_us,
                        min_us: b.stats.min_us,
                        p90_us: b.stats.p90_us,
                        samples: b.stats.samples,
                        throughput: b.throughput,
                        unit: b.unit.to_string(),
                        l2_flushed: b.l2_flushed,
                    });
                }
                Err(e) => {
                    println!("{}: ERROR {e}", w.name);
                    r.errors.push(format!("bench {}: {e}", w.name));
                }
            }
        }
        r.write(out)?;
    }
    if on("host") {
        match guarded(|| host::host_time(&device, &stream, HOST_LAUNCHES)) {
            Ok(h) => r.host = Some(h),
            Err(e) => r.errors.push(format!("host time: {e}")),
        }
        r.write(out)?;
    }
    if on("graph") {
        match guarded(|| host::graph_time(&device, &stream, GRAPH_KERNELS, 10)) {
            Ok(g) => r.graph = Some(g),
            Err(e) => r.errors.push(format!("graph: {e}")),
        }
        r.write(out)?;
    }
    if on("first") {
        match guarded(|| first::measure(&device, bundle_path, FIRST_LAUNCH_REPS)) {
            Ok(f) => r.first_launch = f,
            Err(e) => r.errors.push(format!("first launch: {e}")),
        }
    }
    let path = r.write(out)?;
    r.print();
    println!("results: {}", path.display());
    Ok(if r.failed_checks() > 0 || !r.errors.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// One benchmark call as `ci/gpu/peers.py` reads it.
#[derive(Debug, serde::Serialize)]
struct BenchCall<'a> {
    name: &'a str,
    op: &'a str,
    dtype: &'a str,
    shapes: &'a [Vec<i64>],
    causal: bool,
    layout: String,
}

/// Writes the benchmark calls to `dir/bench-calls.json` (the list `peers.py --calls` times with torch
/// and Triton).
pub fn write_bench_calls(dir: &Path, ws: &[Workload]) -> Result<std::path::PathBuf, BoxError> {
    let calls: Vec<BenchCall<'_>> = ws
        .iter()
        .map(|w| BenchCall {
            name: &w.name,
            op: &w.call.op,
            dtype: &w.call.dtype,
            shapes: &w.call.shapes,
            causal: w.call.causal,
            layout: format!("{:?}", w.layout),
        })
        .collect();
    std::fs::create_dir_all(dir)?;
    let path = dir.join("bench-calls.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&calls)?)?;
    Ok(path)
}
