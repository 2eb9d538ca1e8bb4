//! First launch in a new process. The parent re-runs this binary as a child per repetition: once with
//! a warm disk cache (seeded with the cubins under the exact keys the child will compute) and no bundle,
//! once with the bundle registered just before the launch and the disk cache off. The child reports wall
//! clock times (µs since the Unix epoch, comparable across processes) as one JSON line.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use cutile::bundle::{self, Bundle};
use cutile::cache::{DEFAULT_MAX_DISK_BYTES, DiskCache, KernelCache};
use cutile::launch::key_toolchain_version;
use cutile::runtime::timing::Stats;
use cutile::runtime::{Device, Stream};
use cutile::toolchain::GpuArch;
use cutile_examples::run::{After, call, instantiate};
use cutile_examples::workload::{Workload, tiny};
use cutile_kernels::op::CallSpec;
use serde::{Deserialize, Serialize};

use crate::BoxError;
use crate::report::FirstLaunch;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The cases a child can run, as host-API calls (each also in the planned suite, so the bundle holds
/// it).
pub const CASES: [&str; 2] = ["vadd", "softmax"];

fn case(name: &str) -> Result<Workload, BoxError> {
    match name {
        "vadd" => Ok(tiny()),
        "softmax" => Ok(Workload::new(CallSpec::new(
            cutile_kernels::softmax::OP,
            "bf16",
            &[&[1000, 1023]],
            false,
        ))),
        other => Err(format!("unknown first-launch case {other:?}; known: {CASES:?}").into()),
    }
}

/// What a child reports.
#[derive(Debug, Serialize, Deserialize)]
struct ChildTimes {
    t0_us: u64,
    main_us: u64,
    device_us: u64,
    data_us: u64,
    done_us: u64,
    origin: String,
}

/// Child: device, test data, then the timed first launch; prints its wall-clock times as one JSON line.
pub fn child(case_name: &str, bundle_path: Option<&Path>, t0_us: u64) -> Result<(), BoxError> {
    let main_us = now_us();
    let w = case(case_name)?;
    let device = Device::new(0)?;
    let stream = Stream::new(&device)?;
    let device_us = now_us();
    let mut inst = instantiate(&device, &w, false)?;
    device.synchronize()?;
    let data_us = now_us();
    if let Some(p) = bundle_path {
        bundle::register(Bundle::open(p)?);
    }
    call(&stream, &w, &mut inst, After::Wait)?;
    let done_us = now_us();
    let s = KernelCache::global()?.stats();
    let origin = if s.bundle_hits > 0 {
        "bundle"
    } else if s.disk_hits > 0 {
        "disk cache"
    } else if s.compiles > 0 {
        "compiled"
    } else {
        "unknown"
    };
    let times = ChildTimes {
        t0_us,
        main_us,
        device_us,
        data_us,
        done_us,
        origin: origin.to_string(),
    };
    println!("{}", serde_json::to_string(&times)?);
    Ok(())
}

/// Writes the cubins of `w`'s launches from `bundle` into a disk cache at `dir`, under the keys a call
/// on this machine computes (its tileiras version, or none).
fn seed_disk(w: &Workload, arch: GpuArch, bundle: &Bundle, dir: &Path) -> Result<(), BoxError> {
    let disk = DiskCache::new(dir, DEFAULT_MAX_DISK_BYTES);
    for (label, plan) in w.plans(arch, &key_toolchain_version(), false)? {
        let cubin = bundle
            .find_key(&plan.key)
            .ok_or_else(|| format!("the bundle lacks {label}: {}", plan.key))?;
        disk.write(&plan.key, cubin)?;
    }
    Ok(())
}

fn spawn_child(
    case_name: &str,
    mode: &str,
    bundle_path: &Path,
    disk: &Path,
) -> Result<ChildTimes, BoxError> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["first-launch", "--case", case_name])
        .env_remove(bundle::ENV_VAR)
        .env_remove("CUTILE_DISABLE_CACHE");
    if mode == "bundle" {
        cmd.arg("--bundle")
            .arg(bundle_path)
            .env("CUTILE_CACHE", "off");
    } else {
        cmd.env("CUTILE_CACHE_DIR", disk).env_remove("CUTILE_CACHE");
    }
    cmd.arg("--t0-us").arg(now_us().to_string());
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!(
            "first-launch child ({case_name}, {mode}) failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let line = line.lines().last().unwrap_or_default();
    Ok(serde_json::from_str(line)
        .map_err(|e| format!("first-launch child printed {line:?}: {e}"))?)
}

/// Parent: `reps` children per case and mode.
pub fn measure(
    device: &Device,
    bundle_path: &Path,
    reps: usize,
) -> Result<Vec<FirstLaunch>, BoxError> {
    let (major, minor) = device.compute_capability();
    let arch = GpuArch::from_compute_capability(major, minor)
        .ok_or_else(|| format!("sm_{major}{minor} is not a tileiras target"))?;
    let bundle = Bundle::open(bundle_path)?;
    let disk = tempfile::tempdir()?;
    let mut out = Vec::new();
    for name in CASES {
        seed_disk(&case(name)?, arch, &bundle, disk.path())?;
        for mode in ["disk", "bundle"] {
            let mut runs = Vec::new();
            for _ in 0..reps {
                runs.push(spawn_child(name, mode, bundle_path, disk.path())?);
            }
            let ms =
                |f: &dyn Fn(&ChildTimes) -> f64| Stats::of(runs.iter().map(f).collect()).median_us;
            let launch = |t: &ChildTimes| t.done_us.saturating_sub(t.data_us) as f64 / 1e3;
            let before_data = |t: &ChildTimes| t.device_us.saturating_sub(t.t0_us) as f64 / 1e3;
            out.push(FirstLaunch {
                case: case(name)?.name,
                mode: mode.to_string(),
                repetitions: reps,
                total_ms: ms(&|t| before_data(t) + launch(t)),
                exec_ms: ms(&|t| t.main_us.saturating_sub(t.t0_us) as f64 / 1e3),
                device_init_ms: ms(&|t| t.device_us.saturating_sub(t.main_us) as f64 / 1e3),
                launch_ms: ms(&launch),
                origin: runs.last().map(|t| t.origin.clone()).unwrap_or_default(),
            });
        }
    }
    Ok(out)
}
