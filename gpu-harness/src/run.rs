//! `run`: the phases on the GPU machine, each recorded in the report and the JSON rewritten after it.

use std::path::Path;
use std::process::ExitCode;

use cutile::bundle::{self, Bundle};
use cutile::runtime::{Device, RuntimeError, Stream};
use cutile_examples::run::{bench, check};
use cutile_examples::timing::{FLUSH_BYTES, L2Flush};
use cutile_examples::workload::{benches, checks};

use crate::report::{self, Report};
use crate::{BoxError, first, host};

/// Launches timed per benchmark, host-time launches, kernels per graph, first-launch repetitions.
const BENCH_ITERS: usize = 50;
const HOST_LAUNCHES: usize = 10_000;
const GRAPH_KERNELS: usize = 1000;
const FIRST_LAUNCH_REPS: usize = 5;

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
    bundle::register(b);
    let on = |p: &str| phases.iter().any(|x| x == p);
    println!(
        "gpu-harness on {} ({}), {} bundle entries; phases {phases:?}",
        r.device, r.arch, r.bundle_entries
    );

    if on("checks") {
        for w in checks() {
            match check(&device, &stream, &w) {
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
        let mut flush = L2Flush::new(&device, FLUSH_BYTES)?;
        for w in benches() {
            match bench(&device, &stream, &w, BENCH_ITERS, Some(&mut flush)) {
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
        match host::host_time(&device, &stream, HOST_LAUNCHES) {
            Ok(h) => r.host = Some(h),
            Err(e) => r.errors.push(format!("host time: {e}")),
        }
        r.write(out)?;
    }
    if on("graph") {
        match host::graph_time(&device, &stream, GRAPH_KERNELS, 10) {
            Ok(g) => r.graph = Some(g),
            Err(e) => r.errors.push(format!("graph: {e}")),
        }
        r.write(out)?;
    }
    if on("first") {
        match first::measure(&device, bundle_path, FIRST_LAUNCH_REPS) {
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
