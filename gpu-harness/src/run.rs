//! `run`: the launch-overhead phases on the GPU machine (host time per launch, CUDA graphs, first launch
//! in a new process), each recorded in the report and the JSON rewritten after it. Correctness is
//! `check`, throughput `bench`.

use std::path::Path;
use std::process::ExitCode;

use cutile::bundle::{self, Bundle};
use cutile::runtime::{Device, RuntimeError, Stream};
use cutile_examples::workload::Workload;

use crate::report::Report;
use crate::{BoxError, first, guarded, host, plan};
use cutile::toolchain::GpuArch;

/// Host-time launches, kernels per graph, first-launch repetitions.
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
    /// The scratch bytes the host API plans for the call on an sm_90 target, for the ops whose peer
    /// reports memory beside time (`fused_linear_cross_entropy`: `peers.py` sets it against torch's
    /// peak); absent for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    scratch_bytes: Option<i64>,
}

/// [`BenchCall::scratch_bytes`] of `call`: the cross-entropy planner's scratch (f32 words × 4).
fn planned_scratch_bytes(call: &cutile_kernels::op::registry::CallSpec) -> Option<i64> {
    use cutile_kernels::cross_entropy;
    if call.op != cross_entropy::OP {
        return None;
    }
    let dt = cutile_kernels::op::registry::parse_dtype(&call.dtype)?;
    let (ops, opts) = cross_entropy::described_call(dt, &call.shapes).ok()?;
    let target = cutile_kernels::op::Target::planning(GpuArch::Sm90);
    Some(cross_entropy::scratch_len(&ops, &opts, &target).ok()? * 4)
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
            scratch_bytes: planned_scratch_bytes(&w.call),
        })
        .collect();
    std::fs::create_dir_all(dir)?;
    let path = dir.join("bench-calls.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&calls)?)?;
    Ok(path)
}
