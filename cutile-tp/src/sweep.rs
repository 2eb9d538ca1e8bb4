//! The whole multi-GPU run behind `gpu-harness tp`: correctness of the block for every rank count
//! (against the single-GPU unsharded layer and the CPU reference, plain and overlapped), then time
//! per layer, the compute / all-reduce split and the scaling efficiency, then the NCCL bus-bandwidth
//! check; rank counts the machine cannot run are reported blocked.

use cutile::runtime::Device;
use serde::{Deserialize, Serialize};

use crate::block::{self, RunOptions};
use crate::nccl;
use crate::reference::{BlockInputs, block_reference, rel_max_err};
use crate::report::{RowStatus, TpReport, TpRow, efficiency, judge_busbw};
use crate::shard::{BlockConfig, ShardPlan};
use crate::{Result, TpError};

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepArgs {
    pub check: BlockConfig,
    pub time: BlockConfig,
    /// Rank counts (each needs that many GPUs).
    pub ranks: Vec<usize>,
    /// MLP token chunks of the overlapped run.
    pub chunks: usize,
    pub warmup: usize,
    pub iters: usize,
    pub tolerance: f64,
    pub seed: u64,
    /// Bytes of the bus-bandwidth all-reduce.
    pub busbw_bytes: usize,
    /// busbw must reach this fraction of the NVLink figure.
    pub min_fraction: f64,
    /// Skip the timing shape (correctness only).
    pub no_timing: bool,
}

impl Default for SweepArgs {
    fn default() -> Self {
        SweepArgs {
            check: BlockConfig::SMALL,
            time: BlockConfig::LLAMA8B,
            ranks: vec![1, 2, 8],
            chunks: 4,
            warmup: 3,
            iters: 20,
            tolerance: 3e-2,
            seed: 16,
            busbw_bytes: 256 << 20,
            min_fraction: 0.5,
            no_timing: false,
        }
    }
}

fn one(iters: usize, nccl: bool, chunks: usize, warmup: usize) -> RunOptions {
    RunOptions {
        nccl,
        chunks,
        warmup,
        iters,
    }
}

/// Runs everything; [`TpError`] only when there is no GPU at all (the caller reports skipped).
pub fn sweep(a: &SweepArgs) -> Result<TpReport> {
    let gpus = Device::count()?;
    if gpus == 0 {
        return Err(TpError::NotEnoughDevices { ranks: 1, have: 0 });
    }
    let device = Device::new(0)?;
    let mut notes = Vec::new();
    let nccl_version = match nccl::version() {
        Ok(v) => Some(v),
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    };
    let mut report = TpReport {
        schema: "cutile-tp".into(),
        device: format!("{} ({})", device.name(), device.arch()),
        gpus,
        nccl_version,
        check_config: a.check,
        time_config: a.time,
        tolerance: a.tolerance,
        single_ms: None,
        single_err_vs_cpu: None,
        chunks: a.chunks,
        rows: Vec::new(),
        busbw: None,
        notes,
    };
    // Correctness inputs, the CPU reference and the single-GPU layer.
    let ci = BlockInputs::random(&a.check, a.seed);
    let cpu = block_reference(&ShardPlan::new(a.check, 1)?, &ci, true).y;
    let single = block::run(&a.check, 1, &ci, &one(1, false, 1, 1));
    let single_y = match single {
        Ok(r) => {
            report.single_err_vs_cpu = Some(rel_max_err(&r.y, &cpu));
            Some(r.y)
        }
        Err(e) => {
            report.notes.push(format!("single-GPU layer: {e}"));
            None
        }
    };
    let ti = (!a.no_timing).then(|| BlockInputs::random(&a.time, a.seed + 100));
    if let Some(ti) = &ti {
        match block::run(&a.time, 1, ti, &one(a.iters, false, 1, a.warmup)) {
            Ok(r) => report.single_ms = Some(r.times.total_ms),
            Err(e) => report.notes.push(format!("single-GPU timing: {e}")),
        }
    }
    for &n in &a.ranks {
        report.rows.push(row(
            a,
            n,
            gpus,
            &ci,
            &cpu,
            single_y.as_deref(),
            ti.as_ref(),
            &report,
        ));
    }
    // The bus bandwidth over every GPU.
    let measured = (gpus >= 2 && nccl_version.is_some()).then(|| {
        let ords: Vec<usize> = (0..gpus).collect();
        nccl::measure_all_reduce(&ords, a.busbw_bytes, 5, 20).map_err(|e| e.to_string())
    });
    report.busbw = Some(judge_busbw(
        gpus,
        measured,
        nccl::nvlink_gbps(),
        a.min_fraction,
    ));
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn row(
    a: &SweepArgs,
    n: usize,
    gpus: usize,
    ci: &BlockInputs,
    cpu: &[f32],
    single: Option<&[f32]>,
    ti: Option<&BlockInputs>,
    report: &TpReport,
) -> TpRow {
    if n > gpus {
        return TpRow::blocked(n, format!("needs {n} GPUs, {gpus} visible"));
    }
    if let Err(e) = ShardPlan::new(a.check, n) {
        return TpRow::blocked(n, e.to_string());
    }
    if report.nccl_version.is_none() {
        return TpRow::blocked(n, "NCCL not loadable (see notes)");
    }
    let mut r = TpRow::blocked(n, "");
    let mut errs = Vec::new();
    for chunks in [1, a.chunks.max(1)] {
        match block::run(&a.check, n, ci, &one(1, true, chunks, 1)) {
            Ok(out) => {
                let vs_cpu = rel_max_err(&out.y, cpu);
                let vs_single = single.map(|s| rel_max_err(&out.y, s));
                r.err_vs_cpu = Some(r.err_vs_cpu.unwrap_or(0.0).max(vs_cpu));
                if let Some(v) = vs_single {
                    r.err_vs_single = Some(r.err_vs_single.unwrap_or(0.0).max(v));
                }
                r.rank_divergence = Some(r.rank_divergence.unwrap_or(0.0).max(out.rank_divergence));
            }
            Err(e) => errs.push(format!("check (chunks {chunks}): {e}")),
        }
    }
    if let Some(ti) = ti {
        match block::run(&a.time, n, ti, &one(a.iters, true, 1, a.warmup)) {
            Ok(out) => {
                r.ms_per_layer = Some(out.times.total_ms);
                r.comm_ms = Some(out.times.comm_ms);
                r.mlp_comm_ms = Some(out.times.mlp_comm_ms);
            }
            Err(e) => errs.push(format!("timing: {e}")),
        }
        if a.chunks > 1 {
            match block::run(&a.time, n, ti, &one(a.iters, true, a.chunks, a.warmup)) {
                Ok(out) => r.overlap_ms = Some(out.times.total_ms),
                Err(e) => errs.push(format!("overlapped timing: {e}")),
            }
        }
        let best = match (r.ms_per_layer, r.overlap_ms) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        r.tflops = best.map(|t| a.time.flops() / (t * 1e-3) / 1e12);
        r.efficiency = efficiency(report.single_ms, n, best);
    }
    let bad = [r.err_vs_cpu, r.err_vs_single, r.rank_divergence]
        .iter()
        .flatten()
        .any(|&e| e > a.tolerance || e.is_nan());
    r.status = if !errs.is_empty() {
        RowStatus::Error(errs.join("; "))
    } else if bad {
        RowStatus::Failed(format!("error above {:.1e}", a.tolerance))
    } else if r.err_vs_cpu.is_none() {
        RowStatus::Error("no correctness result".into())
    } else {
        RowStatus::Ok
    };
    r
}
