//! The multi-GPU report: one row per rank count (correctness against the single-GPU layer and the CPU
//! reference, time per layer, its compute / all-reduce split, the overlapped time, scaling
//! efficiency), the NCCL bus-bandwidth check, as JSON and markdown. Rows for rank counts the machine
//! cannot run say `blocked`, never passed.

use serde::{Deserialize, Serialize};

use crate::nccl::BusBw;
use crate::shard::BlockConfig;

/// Whether a row ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "why")]
pub enum RowStatus {
    Ok,
    /// Correctness beyond the tolerance.
    Failed(String),
    /// Could not run here (too few GPUs, no NCCL …).
    Blocked(String),
    /// Ran into an error.
    Error(String),
}

/// One rank count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TpRow {
    pub ranks: usize,
    pub status: RowStatus,
    /// Relative max error of `y` against the single-GPU unsharded layer (check shape).
    pub err_vs_single: Option<f64>,
    /// … and against the CPU reference (check shape).
    pub err_vs_cpu: Option<f64>,
    /// Ranks' outputs against rank 0's.
    pub rank_divergence: Option<f64>,
    /// Time per layer, timing shape, no overlap.
    pub ms_per_layer: Option<f64>,
    /// The all-reduces' share of it.
    pub comm_ms: Option<f64>,
    /// The MLP all-reduces alone.
    pub mlp_comm_ms: Option<f64>,
    /// Time per layer with the MLP in chunks, all-reduce overlapped.
    pub overlap_ms: Option<f64>,
    pub tflops: Option<f64>,
    /// `t_single / (n · t_n)` (strong scaling; the best of the plain and overlapped times).
    pub efficiency: Option<f64>,
}

impl TpRow {
    pub fn blocked(ranks: usize, why: impl Into<String>) -> TpRow {
        TpRow {
            ranks,
            status: RowStatus::Blocked(why.into()),
            err_vs_single: None,
            err_vs_cpu: None,
            rank_divergence: None,
            ms_per_layer: None,
            comm_ms: None,
            mlp_comm_ms: None,
            overlap_ms: None,
            tflops: None,
            efficiency: None,
        }
    }
}

/// Strong-scaling efficiency: `t1 / (n · tn)`; `None` without both times.
pub fn efficiency(t1: Option<f64>, n: usize, tn: Option<f64>) -> Option<f64> {
    match (t1, tn) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 && n > 0 => Some(a / (n as f64 * b)),
        _ => None,
    }
}

/// The NCCL bandwidth check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BusBwCheck {
    /// `pass`, `fail`, `skipped`, `error`, or `measured` (no NVLink figure to hold it to).
    pub state: String,
    pub why: String,
    pub measured: Option<BusBw>,
    /// Per-GPU NVLink bandwidth the machine reports (GB/s, one direction), `None`: unknown.
    pub nvlink_gbps: Option<f64>,
    /// busbw / nvlink.
    pub fraction: Option<f64>,
    pub min_fraction: f64,
}

impl BusBwCheck {
    /// The report section (the TP report's and the node report's): verdict, reason, and the
    /// measurement's row when there is one.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "\n## NCCL all-reduce bus bandwidth: {}\n\n{}\n",
            self.state, self.why
        );
        if let Some(m) = &self.measured {
            s.push_str(&format!(
                "\n| GPUs | bytes | time µs | algbw GB/s | busbw GB/s | NVLink GB/s |\n|---|---|---|---|---|---|\n| {} | {} | {:.1} | {:.1} | {:.1} | {} |\n",
                m.ranks,
                m.bytes,
                m.time_us,
                m.algbw_gbps,
                m.busbw_gbps,
                self.nvlink_gbps
                    .map_or_else(|| "unknown".to_string(), |v| format!("{v:.1}"))
            ));
        }
        s
    }
}

/// Judges a bus-bandwidth measurement: needs ≥ 2 GPUs (else skipped, not passed), and busbw ≥
/// `min_fraction` of the NVLink figure when one is known.
pub fn judge_busbw(
    gpus: usize,
    measured: Option<Result<BusBw, String>>,
    nvlink_gbps: Option<f64>,
    min_fraction: f64,
) -> BusBwCheck {
    let mut c = BusBwCheck {
        state: "skipped".into(),
        why: String::new(),
        measured: None,
        nvlink_gbps,
        fraction: None,
        min_fraction,
    };
    if gpus < 2 {
        c.why = format!("the all-reduce bandwidth check needs ≥ 2 GPUs; {gpus} visible");
        return c;
    }
    match measured {
        None => c.why = "not run".into(),
        Some(Err(e)) => {
            c.state = "error".into();
            c.why = e;
        }
        Some(Ok(m)) => {
            match nvlink_gbps {
                None => {
                    c.state = "measured".into();
                    c.why = format!(
                        "busbw {:.1} GB/s; NVLink figure unknown (no `nvidia-smi nvlink -s` links)",
                        m.busbw_gbps
                    );
                }
                Some(nv) => {
                    let f = m.busbw_gbps / nv;
                    c.fraction = Some(f);
                    let ok = f >= min_fraction;
                    c.state = if ok { "pass" } else { "fail" }.into();
                    c.why = format!(
                        "busbw {:.1} GB/s = {:.0}% of NVLink {:.1} GB/s (minimum {:.0}%)",
                        m.busbw_gbps,
                        f * 100.0,
                        nv,
                        min_fraction * 100.0
                    );
                }
            }
            c.measured = Some(m);
        }
    }
    c
}

/// The whole report of `gpu-harness tp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TpReport {
    pub schema: String,
    pub device: String,
    pub gpus: usize,
    pub nccl_version: Option<i32>,
    pub check_config: BlockConfig,
    pub time_config: BlockConfig,
    /// Relative error allowed against the CPU reference and the single-GPU layer.
    pub tolerance: f64,
    /// The unsharded layer on GPU 0 (no NCCL): ms per layer, and its error against the CPU.
    pub single_ms: Option<f64>,
    pub single_err_vs_cpu: Option<f64>,
    pub chunks: usize,
    pub rows: Vec<TpRow>,
    pub busbw: Option<BusBwCheck>,
    pub notes: Vec<String>,
}

impl TpReport {
    /// Passed: NCCL loaded, every row that ran is `Ok`, no row errored, the single-GPU layer matched
    /// the CPU, and the bandwidth check did not fail. Rows blocked for lack of GPUs do not fail the
    /// report, but are listed.
    pub fn pass(&self) -> bool {
        if self.nccl_version.is_none() {
            return false;
        }
        let rows_ok = self
            .rows
            .iter()
            .all(|r| matches!(r.status, RowStatus::Ok | RowStatus::Blocked(_)));
        let single_ok = self.single_err_vs_cpu.is_some_and(|e| e <= self.tolerance);
        let bw_ok = self
            .busbw
            .as_ref()
            .is_none_or(|b| b.state != "fail" && b.state != "error");
        rows_ok && single_ok && bw_ok
    }

    pub fn markdown(&self) -> String {
        let f =
            |v: Option<f64>, p: usize| v.map_or_else(|| "–".to_string(), |v| format!("{v:.p$}"));
        let e = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.2e}"));
        let pct =
            |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{:.0}%", v * 100.0));
        let cfg = |c: &BlockConfig| {
            format!(
                "T={} hidden={} Hq={} Hkv={} D={} F={}",
                c.tokens, c.hidden, c.hq, c.hkv, c.d, c.ffn
            )
        };
        let mut s = format!(
            "# Tensor-parallel block: {}\n\n{} GPU(s) ({}), NCCL {}\n\n- correctness shape: {}\n- timing shape: {} (bf16, causal prefill, one sequence)\n- tolerance (relative max error): {:.1e}\n- single GPU, unsharded, no NCCL: {} ms per layer, error vs CPU {}\n- overlap: MLP in {} token chunks, chunk i's all-reduce on a second stream beside chunk i+1\n\n",
            if self.pass() { "PASS" } else { "FAIL" },
            self.gpus,
            self.device,
            self.nccl_version
                .map_or_else(|| "not loaded".to_string(), |v| v.to_string()),
            cfg(&self.check_config),
            cfg(&self.time_config),
            self.tolerance,
            f(self.single_ms, 3),
            e(self.single_err_vs_cpu),
            self.chunks,
        );
        s.push_str("| GPUs | status | err vs 1 GPU | err vs CPU | rank divergence | ms/layer | all-reduce ms | MLP all-reduce ms | compute ms | overlapped ms | TFLOP/s | scaling eff. |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let status = match &r.status {
                RowStatus::Ok => "ok".to_string(),
                RowStatus::Failed(w) => format!("FAILED: {w}"),
                RowStatus::Blocked(w) => format!("blocked: {w}"),
                RowStatus::Error(w) => format!("error: {w}"),
            };
            let compute = match (r.ms_per_layer, r.comm_ms) {
                (Some(t), Some(c)) => Some(t - c),
                _ => None,
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.ranks,
                status.replace('|', "/"),
                e(r.err_vs_single),
                e(r.err_vs_cpu),
                e(r.rank_divergence),
                f(r.ms_per_layer, 3),
                f(r.comm_ms, 3),
                f(r.mlp_comm_ms, 3),
                f(compute, 3),
                f(r.overlap_ms, 3),
                f(r.tflops, 1),
                pct(r.efficiency),
            ));
        }
        if let Some(b) = &self.busbw {
            s.push_str(&b.markdown());
        }
        if !self.notes.is_empty() {
            s.push_str("\n## Notes\n\n");
            for n in &self.notes {
                s.push_str(&format!("- {n}\n"));
            }
        }
        s
    }
}
