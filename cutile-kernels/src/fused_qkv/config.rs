//! Which schedule a fused QKV call gets: one fused kernel (prefill: many row tiles), split-K partials
//! plus an epilogue kernel (decode: few tokens, so `ceil(T / BM)·heads` blocks would leave SMs idle
//! while the weight streams in), or the unfused path (the catalog's separate GEMM, QK-norm, RoPE and
//! cache-write kernels). Not yet
//! measured on a GPU: the rules below follow the block counts only. With `CUTILE_TUNE=on|force` the
//! host API times the candidates (fused and split-K; the unfused path only when asked for).

use crate::op::tuning::Candidate;
use crate::op::{Target, ceil_div};

/// A fused QKV schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QkvConfig {
    /// `fused_qkv<BM, BK>`: one launch.
    Fused { bm: i64, bk: i64 },
    /// `qkv_partial<BM, BK>` over `splits` K ranges into f32 scratch, then `qkv_epilogue`.
    SplitK { bm: i64, bk: i64, splits: i64 },
    /// The separate ops, one launch each (the comparison and the fallback): `gemm` (with the bias:
    /// `gemm_epilogue`) into scratch, `rms_norm_heads` of q and k, `rope`, `kv_cache_write`.
    Unfused,
}

impl Candidate for QkvConfig {
    fn name(&self) -> String {
        match self {
            QkvConfig::Fused { bm, bk } => format!("fused_qkv {bm}x{bk}"),
            QkvConfig::SplitK { bm, bk, splits } => format!("fused_qkv split{splits} {bm}x{bk}"),
            QkvConfig::Unfused => "fused_qkv unfused".into(),
        }
    }
}

fn bucket(x: i64) -> u32 {
    64 - (x.max(1) as u64 - 1).leading_zeros()
}

/// The tuning class of a call: element type, T and hidden by powers of two, heads and D.
pub fn class(dtype: cutile_ir::ScalarType, t: i64, heads: i64, d: i64, hidden: i64) -> String {
    format!(
        "{dtype} t~2^{} heads {heads} d {d} hidden~2^{}",
        bucket(t),
        bucket(hidden)
    )
}

/// Row tile of the epilogue kernel.
pub const EPILOGUE_BM: i64 = 32;
/// Row tiles the split-K kernel has.
pub const SPLIT_BMS: &[i64] = &[16, 32, 64];
/// The largest K-split.
pub const MAX_SPLITS: i64 = 16;

/// The split-K row tile for `t` tokens: the next power of two, 16..=64.
fn split_bm(t: i64) -> i64 {
    (t.max(16) as u64).next_power_of_two().min(64) as i64
}

/// The default schedule for `t` tokens, `heads = Hq + 2·Hkv` and `hidden` input features: split-K when
/// `t ≤ 64` and the fused grid would not fill every SM twice, with enough splits for two blocks per SM
/// (each split keeping at least 4 K tiles); otherwise fused, 128-row tiles once there are at least as
/// many tiles as SMs.
pub fn choose(target: &Target, t: i64, heads: i64, hidden: i64) -> QkvConfig {
    let sms = target.sm_count as i64;
    let k_tiles = ceil_div(hidden.max(1), 64);
    if t <= 64 {
        let bm = split_bm(t);
        let blocks = ceil_div(t, bm) * heads;
        if blocks < 2 * sms && k_tiles >= 8 {
            let mut splits = 1;
            while blocks * splits < 2 * sms && splits < MAX_SPLITS && k_tiles / (2 * splits) >= 4 {
                splits *= 2;
            }
            return QkvConfig::SplitK { bm, bk: 64, splits };
        }
    }
    let bm = if ceil_div(t, 128) * heads >= sms {
        128
    } else {
        64
    };
    QkvConfig::Fused { bm, bk: 64 }
}

/// Every schedule the tuner may time, the default first.
pub fn candidates(target: &Target, t: i64, heads: i64, hidden: i64) -> Vec<QkvConfig> {
    let mut all = vec![choose(target, t, heads, hidden)];
    all.push(QkvConfig::Fused { bm: 64, bk: 64 });
    all.push(QkvConfig::Fused { bm: 128, bk: 64 });
    if t <= 64 {
        let bm = split_bm(t);
        for splits in [2, 4, 8, 16] {
            all.push(QkvConfig::SplitK { bm, bk: 64, splits });
        }
    }
    all.push(QkvConfig::Unfused);
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
