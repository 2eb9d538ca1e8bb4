//! `launches`: the in-situ device time of every launch of each benchmark call.
//!
//! The GPU machine has no Nsight Systems, and Nsight Compute times kernels one at a time (caches
//! flushed, the clocks of an otherwise idle GPU), so a multi-launch call's kernels measured there can
//! sum to less than `bench` measures for the call. Here each call's launches are captured once
//! (`cutile_kernels::op::capture::capture`: planned by the host API, not queued), then replayed back to back on
//! one stream, one `op::execute` per launch, with a CUDA event before the first and after each, behind
//! the same L2 flush `bench` queues. Per launch: the median over the replays of the time between its
//! events (its kernel plus any gap before it), and the call's median total. Results go to
//! `launches.json` and `launches.md` under `--out`.
//!
//! Only calls whose host API queues its work through `op::execute` alone can be replayed (the others,
//! `cutile_examples::run::Owned` families, are listed as not measured).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cutile::bundle::{self, Bundle};
use cutile::runtime::timing::{FLUSH_BYTES, L2Flush, Stats};
use cutile::runtime::{Device, Event, Stream};
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
}

/// One launch of a call: its kernel, the configuration the host chose and its median time.
#[derive(Debug, Clone, Serialize)]
pub struct LaunchTime {
    pub kernel: String,
    pub config: String,
    pub median_us: f64,
}

/// One call's launches, in queue order, and the median of their sum.
#[derive(Debug, Clone, Serialize)]
pub struct CallLaunches {
    pub call: String,
    pub total_median_us: f64,
    pub launches: Vec<LaunchTime>,
    /// Why the call was not measured (then `launches` is empty).
    pub error: Option<String>,
}

/// Captures `w`'s launches and replays them `iterations` times (plus one untimed).
fn measure(
    device: &Device,
    stream: &Stream,
    w: &Workload,
    flush: &mut L2Flush,
    iterations: usize,
) -> Result<CallLaunches, BoxError> {
    if Owned::of(w).is_some() {
        return Err("its family owns its tensors and times itself (not replayable here)".into());
    }
    let mut inst = instantiate(device, w, false)?;
    // Loads the modules outside the measurement.
    call(stream, w, &mut inst, After::Wait)?;
    let (result, captured) =
        cutile_kernels::op::capture::capture(|| call(stream, w, &mut inst, After::Detach));
    result?;
    let steps: Vec<_> = captured
        .iter()
        .flat_map(|c| c.launches.iter().map(move |l| (&c.operands, l)))
        .collect();
    if steps.is_empty() {
        return Err("the call queued nothing through op::execute".into());
    }
    let events = (0..=steps.len())
        .map(|_| Event::new(device))
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_launch = vec![Vec::with_capacity(iterations); steps.len()];
    let mut totals = Vec::with_capacity(iterations);
    for it in 0..=iterations {
        flush.enqueue(stream)?;
        events[0].record(stream)?;
        for (i, (operands, launch)) in steps.iter().enumerate() {
            // SAFETY: the operands are the instance's tensors and the stream's scratch, alive until
            // the synchronization below; the guard is forgotten (its drop would wait), as `After::Detach`.
            let pending = unsafe {
                cutile_kernels::op::execute(stream, operands, std::slice::from_ref(launch))
            }?;
            std::mem::forget(pending);
            events[i + 1].record(stream)?;
        }
        stream.synchronize()?;
        if it == 0 {
            continue;
        }
        for (i, times) in per_launch.iter_mut().enumerate() {
            times.push(events[i].elapsed_ms(&events[i + 1])? as f64 * 1e3);
        }
        totals.push(events[0].elapsed_ms(&events[steps.len()])? as f64 * 1e3);
    }
    Ok(CallLaunches {
        call: w.name.clone(),
        total_median_us: Stats::of(totals).median_us,
        launches: steps
            .iter()
            .zip(per_launch)
            .map(|((_, l), times)| LaunchTime {
                kernel: l.kernel.name().to_string(),
                config: l.config.clone(),
                median_us: Stats::of(times).median_us,
            })
            .collect(),
        error: None,
    })
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
            "\nsum of the medians {sum:.2} µs; median of the totals {:.2} µs\n",
            c.total_median_us
        );
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
    let (ws, _) = crate::bench::workloads(&a.ops);
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
                    launches: Vec::new(),
                    error: Some(e.to_string()),
                }
            });
        match &c.error {
            Some(e) => println!("{}: not measured: {e}", c.call),
            None => {
                println!(
                    "{}: {:.2} µs in {} launches",
                    c.call,
                    c.total_median_us,
                    c.launches.len()
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
                launches: Vec::new(),
                error: Some("owned".into()),
            },
        ];
        let md = markdown(&calls);
        assert!(md.contains("| 1 | copy_tiles | pack | 2.00 |"), "{md}");
        assert!(
            md.contains("sum of the medians 12.00 µs; median of the totals 12.50 µs"),
            "{md}"
        );
        assert!(md.contains("## fused_qkv\n\nnot measured: owned"), "{md}");
    }
}
