//! `launches`: the in-situ device time of every launch of each benchmark call.
//!
//! The GPU machine has no Nsight Systems, and Nsight Compute times kernels one at a time (caches
//! flushed, the clocks of an otherwise idle GPU), so a multi-launch call's kernels measured there can
//! sum to less than `bench` measures for the call. Here each call's launches are captured once and
//! replayed back to back behind the same L2 flush `bench` queues (`cutile_examples::launch_times`).
//! A call through `run::instantiate` is captured here; a family that owns its tensors
//! (`run::Owned`, e.g. fused linear + cross-entropy) is run as `bench` runs it, inside
//! `launch_times::per_launch`, and its timing helper captures and replays the call while its tensors
//! are alive, after timing it whole: `bench`'s figure beside the replay's total shows work the capture
//! missed (queued other than through `op::execute`). Results go to `launches.json` and `launches.md`
//! under `--out`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cutile::bundle::{self, Bundle};
use cutile::runtime::timing::{FLUSH_BYTES, L2Flush};
use cutile::runtime::{Device, Stream};
use cutile_examples::launch_times::{self, LaunchTime, Replayed};
use cutile_examples::run::{After, Owned, call, instantiate};
use cutile_examples::workload::Workload;
use serde::Serialize;

use crate::BoxError;

/// Options of `launches`.
#[derive(Debug, Clone)]
pub struct LaunchesArgs {
    pub bundle: Option<PathBuf>,
    pub out: PathBuf,
    pub ops: Vec<String>,
    /// Replays per call (after one untimed replay).
    pub iterations: usize,
    /// Name filters: a call runs when its name contains one of them (every call when empty).
    pub calls: Vec<String>,
}

/// One call's launches, in queue order, and the median of their sum.
#[derive(Debug, Clone, Serialize)]
pub struct CallLaunches {
    pub call: String,
    pub total_median_us: f64,
    /// The same call timed whole as `bench` times it (owned families only): a total well below it
    /// means the replay misses work the call queues other than through `op::execute`.
    pub timed_median_us: Option<f64>,
    pub launches: Vec<LaunchTime>,
    /// Why the call was not measured (then `launches` is empty).
    pub error: Option<String>,
}

impl CallLaunches {
    fn of(w: &Workload, r: Replayed) -> CallLaunches {
        CallLaunches {
            call: w.name.clone(),
            total_median_us: r.total.median_us,
            timed_median_us: r.timed.map(|t| t.median_us),
            launches: r.launches,
            error: None,
        }
    }
}

/// Captures `w`'s launches and replays them `iterations` times (plus one untimed).
fn measure(
    device: &Device,
    stream: &Stream,
    w: &Workload,
    flush: &mut L2Flush,
    iterations: usize,
) -> Result<CallLaunches, BoxError> {
    if let Some(owned) = Owned::of(w) {
        let inputs = w.inputs()?;
        let (result, replayed) = launch_times::per_launch(|| {
            owned.run(device, stream, w, &inputs, Some((iterations, Some(flush))))
        });
        result?;
        let replayed = replayed.ok_or("the family's run timed nothing through time_call")??;
        return Ok(CallLaunches::of(w, replayed));
    }
    let mut inst = instantiate(device, w, false)?;
    // Loads the modules outside the measurement.
    call(stream, w, &mut inst, After::Wait)?;
    let replayed = launch_times::capture_and_replay(stream, Some(flush), iterations, || {
        call(stream, w, &mut inst, After::Detach)
    })?;
    Ok(CallLaunches::of(w, replayed))
}

fn markdown(calls: &[CallLaunches]) -> String {
    let mut s = String::from("# In-situ time per launch (median µs; `gpu-harness launches`)\n");
    for c in calls {
        s += &format!("\n## {}\n\n", c.call);
        if let Some(e) = &c.error {
            s += &format!("not measured: {e}\n");
            continue;
        }
        s += "| # | kernel | configuration | µs |\n|---|---|---|---|\n";
        for (i, l) in c.launches.iter().enumerate() {
            s += &format!(
                "| {i} | {} | {} | {:.2} |\n",
                l.kernel, l.config, l.median_us
            );
        }
        let sum: f64 = c.launches.iter().map(|l| l.median_us).sum();
        s += &format!(
            "\nsum of the medians {sum:.2} µs; median of the totals {:.2} µs",
            c.total_median_us
        );
        if let Some(t) = c.timed_median_us {
            s += &format!("; the call timed whole {t:.2} µs");
        }
        s += "\n";
    }
    s
}

fn write(out: &Path, calls: &[CallLaunches]) -> Result<(), BoxError> {
    std::fs::write(
        out.join("launches.json"),
        serde_json::to_string_pretty(calls)?,
    )?;
    std::fs::write(out.join("launches.md"), markdown(calls))?;
    Ok(())
}

pub fn run(a: &LaunchesArgs) -> Result<ExitCode, BoxError> {
    let Some((device, stream)) = cutile_examples::gpu_or_skip("gpu-harness launches")? else {
        return Ok(ExitCode::from(3));
    };
    if let Some(b) = &a.bundle {
        bundle::register(Bundle::open(b)?);
    }
    std::fs::create_dir_all(&a.out)?;
    let (mut ws, _) = crate::bench::workloads(&a.ops);
    if !a.calls.is_empty() {
        ws.retain(|w| a.calls.iter().any(|c| w.name.contains(c.as_str())));
    }
    let mut flush = L2Flush::new(&device, FLUSH_BYTES)?;
    let mut calls = Vec::new();
    let mut errors = 0;
    for w in &ws {
        let c = crate::guarded(|| measure(&device, &stream, w, &mut flush, a.iterations.max(1)))
            .unwrap_or_else(|e| {
                errors += 1;
                CallLaunches {
                    call: w.name.clone(),
                    total_median_us: f64::NAN,
                    timed_median_us: None,
                    launches: Vec::new(),
                    error: Some(e.to_string()),
                }
            });
        match &c.error {
            Some(e) => println!("{}: not measured: {e}", c.call),
            None => {
                println!(
                    "{}: {:.2} µs in {} launches{}",
                    c.call,
                    c.total_median_us,
                    c.launches.len(),
                    c.timed_median_us
                        .map(|t| format!(" (timed whole: {t:.2} µs)"))
                        .unwrap_or_default()
                );
                for l in &c.launches {
                    println!("    {:>10.2} µs  {} ({})", l.median_us, l.kernel, l.config);
                }
            }
        }
        calls.push(c);
        write(&a.out, &calls)?;
    }
    println!(
        "launches: {} calls, {errors} not measured; {}",
        calls.len(),
        a.out.join("launches.md").display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_launch_and_says_why_a_call_was_not_measured() {
        let calls = [
            CallLaunches {
                call: "gemm bf16 [8, 8] [8, 8]".into(),
                total_median_us: 12.5,
                timed_median_us: None,
                launches: vec![
                    LaunchTime {
                        kernel: "gemm".into(),
                        config: "gemm 64x128x64".into(),
                        median_us: 10.0,
                    },
                    LaunchTime {
                        kernel: "copy_tiles".into(),
                        config: "pack".into(),
                        median_us: 2.0,
                    },
                ],
                error: None,
            },
            CallLaunches {
                call: "fused_qkv".into(),
                total_median_us: f64::NAN,
                timed_median_us: None,
                launches: Vec::new(),
                error: Some("owned".into()),
            },
        ];
        let mut owned = calls[0].clone();
        owned.call = "fused_linear_cross_entropy".into();
        owned.timed_median_us = Some(14.0);
        let calls = [calls[0].clone(), calls[1].clone(), owned];
        let md = markdown(&calls);
        assert!(md.contains("| 1 | copy_tiles | pack | 2.00 |"), "{md}");
        assert!(
            md.contains("sum of the medians 12.00 µs; median of the totals 12.50 µs\n"),
            "{md}"
        );
        assert!(
            md.contains("median of the totals 12.50 µs; the call timed whole 14.00 µs\n"),
            "{md}"
        );
        assert!(md.contains("## fused_qkv\n\nnot measured: owned"), "{md}");
    }
}
