//! Which schedule a fused QKV call gets: one fused kernel (prefill: many row tiles, one or two heads
//! per tile), split-K partials with the epilogue in the last block or in a second kernel (decode: few
//! tokens, so `ceil(T / BM)·heads` blocks would leave SMs idle while the weight streams in), or the
//! unfused path (the catalog's separate GEMM, QK-norm, RoPE and cache-write kernels). The defaults
//! ([`choose`]) come from the H200 tuner; with `CUTILE_TUNE=on|force` the host API times the candidates
//! (fused and split-K; the unfused path only when asked for).

use crate::op::tuning::Candidate;
use crate::op::{Target, ceil_div};

/// A fused QKV schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QkvConfig {
    /// `fused_qkv<BM, BK>` (one tile per block) or `fused_qkv_persistent<BM, BK>` (one block per SM,
    /// looping over tiles): one launch.
    Fused { bm: i64, bk: i64, persistent: bool },
    /// `qkv_partial<BM, BK, BN>` over `splits` K ranges into f32 scratch (`BN` columns per block, a
    /// head or less), then `qkv_epilogue`; with `wide`, both kernels carry 8 worker warps
    /// ([`WIDE_WORKERS`]).
    SplitK {
        bm: i64,
        bk: i64,
        bn: i64,
        splits: i64,
        wide: bool,
        /// The partial kernel's `occupancy` hint (blocks per SM tileiras sizes registers and pipeline
        /// stages for); 0 leaves tileiras's default (one block per SM: 255 registers, 96–127 KB).
        occupancy: i64,
    },
    /// `fused_qkv_pair<BM, BK>`: [`QkvConfig::Fused`] over two heads per tile (`2·D` columns, 8
    /// worker warps), one tile per block; even head counts and `d ≤ 128` only.
    FusedPair { bm: i64, bk: i64 },
    /// `qkv_split_last<BM, BK>`: split-K in one launch over whole heads (`BN = D`); the last block
    /// of each tile's `splits` sums the partials (f32 scratch) and runs the epilogue, told by a
    /// per-tile counter (the stream's zeroed counter pool). `wide` and `occupancy` as for
    /// [`QkvConfig::SplitK`].
    SplitLast {
        bm: i64,
        bk: i64,
        splits: i64,
        wide: bool,
        occupancy: i64,
    },
    /// The separate ops, one launch each (the comparison and the fallback): `gemm` (with the bias:
    /// `gemm_epilogue`) into scratch, `rms_norm_heads` of q and k, `rope`, `kv_cache_write`.
    Unfused,
}

impl Candidate for QkvConfig {
    fn name(&self) -> String {
        match self {
            QkvConfig::Fused {
                bm,
                bk,
                persistent: false,
            } => format!("fused_qkv {bm}x{bk}"),
            QkvConfig::Fused {
                bm,
                bk,
                persistent: true,
            } => format!("fused_qkv persistent {bm}x{bk}"),
            QkvConfig::FusedPair { bm, bk } => format!("fused_qkv pair {bm}x{bk}"),
            QkvConfig::SplitK {
                bm,
                bk,
                bn,
                splits,
                wide,
                occupancy,
            } => format!(
                "fused_qkv split{splits} {bm}x{bk} n{bn}{}",
                hints(*wide, *occupancy)
            ),
            QkvConfig::SplitLast {
                bm,
                bk,
                splits,
                wide,
                occupancy,
            } => format!(
                "fused_qkv split{splits}-last {bm}x{bk}{}",
                hints(*wide, *occupancy)
            ),
            QkvConfig::Unfused => "fused_qkv unfused".into(),
        }
    }
}

/// The name suffix of a split-K form's hints: ` w8` for 8 worker warps, ` oN` for an occupancy hint.
fn hints(wide: bool, occupancy: i64) -> String {
    let mut s = String::new();
    if wide {
        s.push_str(" w8");
    }
    if occupancy > 0 {
        s.push_str(&format!(" o{occupancy}"));
    }
    s
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
/// The `occupancy` hints the tuner tries on the split-K partial kernel.
pub const OCCUPANCIES: [i64; 2] = [2, 4];
/// The split counts the tuner times (1: the partial kernel over the whole of K, then the epilogue
/// kernel; with 64-column, 128-deep steps it is the plain GEMM's decode tile, `16x64x128`).
pub const SPLIT_COUNTS: [i64; 9] = [1, 2, 3, 4, 6, 8, 11, 12, 16];

/// The split-K row tile for `t` tokens: the next power of two, 16..=64.
fn split_bm(t: i64) -> i64 {
    (t.max(16) as u64).next_power_of_two().min(64) as i64
}

/// Rows of the fused kernels' epilogue slices (and of their `q` tiles): 128-row tiles run their
/// epilogue in two halves.
pub const EPILOGUE_ROWS: i64 = 64;

/// The fewest 64-wide K tiles a split of the default schedule keeps (2048 input features).
pub const MIN_SPLIT_K_TILES: i64 = 32;

/// The split-K rule: for `t ≤ 64` tokens whose fused grid would not fill every SM twice, the row tile
/// and the split count, doubled toward two blocks per SM only while each split keeps at least
/// [`MIN_SPLIT_K_TILES`] K tiles; `None` when that leaves one split (the call runs fused).
fn split_rule(target: &Target, t: i64, heads: i64, hidden: i64) -> Option<(i64, i64)> {
    if t > 64 {
        return None;
    }
    let sms = target.sm_count as i64;
    let k_tiles = ceil_div(hidden.max(1), 64);
    let bm = split_bm(t);
    let blocks = ceil_div(t, bm) * heads;
    let mut splits = 1;
    while blocks * splits < 2 * sms
        && splits < MAX_SPLITS
        && k_tiles / (2 * splits) >= MIN_SPLIT_K_TILES
    {
        splits *= 2;
    }
    (splits > 1).then_some((bm, splits))
}

/// The default schedule for `t` tokens, `heads = Hq + 2·Hkv`, head dimension `d` and `hidden` input
/// features.
///
/// Decode (`t ≤ 64` where [`split_rule`] splits K), by row tile:
/// - 16 rows (`t ≤ 16`): the split in one launch ([`QkvConfig::SplitLast`]: the last block of a tile
///   sums the partials and runs the epilogue), 128-deep K steps, 8 worker warps;
/// - 32 rows: split-K partials over whole heads, then `qkv_epilogue`, 64-deep K steps, 8 warps;
/// - 64 rows: no K split but 64-column partial blocks over the whole of K (twice the grid of whole
///   heads), 128-deep K steps, 8 warps, then `qkv_epilogue`.
///
/// Otherwise fused, one tile per block with the heads fastest: 128-row tiles once there are at least
/// as many of them as SMs and `d ≤ 128` (a 128 x 256 f32 accumulator does not fit in registers), two
/// heads per tile ([`QkvConfig::FusedPair`]) where the head count is even, else 64-row tiles.
///
/// Measured (H200 tuner and a second bench with its picks, read L2 flush; hidden 4096, Hq 32, Hkv 8,
/// D 128, bf16; `docs/fused_qkv.md`): in session 18 the one-launch split beat the two-launch one at
/// T 1 and 8 (22.2 against 23.2 µs, 22.2 against 25.9), the 64-column single split beat it at T 64
/// (25.1 against 26.7; session 16: 1.07× too), and the pair tile beat one head per tile at T 4096 and
/// 16384 (328.9 against 365.3 µs, 1275 against 1422). At T 32 no candidate gained more than 4%.
/// The 8-warp forms won or tied in session 9's tuner; the split floor is session 7's (2 splits over 8
/// at hidden 4096: 1.21–1.39×; the fused kernel over 2 and 4 splits at hidden 768 and 1000: short
/// splits cost more in partial sums than the extra blocks gain).
///
/// Why one tile per block and not persistent (`ptxas -v`, sm_90, tileiras 13.5.37): `fused_qkv`
/// 128x64 with 8 worker warps uses 168 registers, no spills; `fused_qkv_persistent` 128x64 spills 60
/// bytes with 8 warps, and the tuner timed it 3.4× slower at T 4096 (session 18).
pub fn choose(target: &Target, t: i64, heads: i64, d: i64, hidden: i64) -> QkvConfig {
    let sms = target.sm_count as i64;
    if let Some((bm, splits)) = split_rule(target, t, heads, hidden) {
        return match bm {
            16 => QkvConfig::SplitLast {
                bm,
                bk: 128,
                splits,
                wide: true,
                occupancy: 0,
            },
            64 => QkvConfig::SplitK {
                bm,
                bk: 128,
                bn: 64,
                splits: 1,
                wide: true,
                occupancy: 0,
            },
            _ => QkvConfig::SplitK {
                bm,
                bk: 64,
                bn: d,
                splits,
                wide: true,
                occupancy: 0,
            },
        };
    }
    if d <= 128 && ceil_div(t, 128) * heads >= sms {
        if heads % 2 == 0 {
            QkvConfig::FusedPair { bm: 128, bk: 64 }
        } else {
            QkvConfig::Fused {
                bm: 128,
                bk: 64,
                persistent: false,
            }
        }
    } else {
        QkvConfig::Fused {
            bm: 64,
            bk: 64,
            persistent: false,
        }
    }
}

/// Every schedule the tuner may time, the default first: 64- and 128-row fused tiles one per block,
/// and persistent 128-row tiles (128 rows only for `d ≤ 128`), split-K for `t ≤ 64` ([`SPLIT_COUNTS`]
/// splits, 64- or `d`-column partial blocks, 64- or 128-deep K steps, and a few 8-warp forms), and the
/// unfused path.
pub fn candidates(target: &Target, t: i64, heads: i64, d: i64, hidden: i64) -> Vec<QkvConfig> {
    let mut all = vec![choose(target, t, heads, d, hidden)];
    for (bm, persistent) in [(64, false), (128, false), (128, true)] {
        if bm == 128 && d > 128 {
            continue;
        }
        all.push(QkvConfig::Fused {
            bm,
            bk: 64,
            persistent,
        });
    }
    if heads % 2 == 0 && d <= 128 {
        // The GEMM family's 256-wide tile at D 128: one weight tile feeds two heads' epilogues.
        for bm in [64, 128] {
            all.push(QkvConfig::FusedPair { bm, bk: 64 });
        }
    }
    if let Some((bm, splits)) = split_rule(target, t, heads, hidden) {
        // The rule's split over whole heads in both forms (two launches, and one), 8 warps.
        all.push(QkvConfig::SplitK {
            bm,
            bk: 64,
            bn: d,
            splits,
            wide: true,
            occupancy: 0,
        });
        all.push(QkvConfig::SplitLast {
            bm,
            bk: 64,
            splits,
            wide: true,
            occupancy: 0,
        });
    }
    if t <= 64 {
        let bm = split_bm(t);
        let split = |bk, bn, splits, wide, occupancy| QkvConfig::SplitK {
            bm,
            bk,
            bn,
            splits,
            wide,
            occupancy,
        };
        // Split counts beyond powers of two balance the grid over the SMs (48 heads x 3 splits = 144
        // blocks of a head each, or 96 half-head columns x 11 = 1056 = 8 per SM); 64-column blocks
        // double the grid without shortening the K ranges; 128-deep K steps load 32 KB of a 128-column
        // weight tile at a time. All on tileiras's default 4 worker warps (the default carries 8).
        for bk in [64, 128] {
            for bn in [64, d] {
                for splits in SPLIT_COUNTS {
                    all.push(split(bk, bn, splits, false, 0));
                }
            }
        }
        for splits in [1, 4, 8] {
            all.push(split(128, 64, splits, true, 0));
        }
        // More blocks resident per SM instead of deeper pipelines in one (the H200 tuner, session 9:
        // none gained more than 3% over the default).
        for occupancy in OCCUPANCIES {
            for bn in [64, d] {
                for splits in [2, 4, 8, 11] {
                    all.push(split(64, bn, splits, false, occupancy));
                }
            }
        }
    }
    if t <= 64 {
        // One launch: the last block of a tile's splits runs the epilogue (no second launch, no
        // second pass over the partials' rows by another grid).
        let bm = split_bm(t);
        let last = |bk, splits, wide, occupancy| QkvConfig::SplitLast {
            bm,
            bk,
            splits,
            wide,
            occupancy,
        };
        for splits in [1, 2, 3, 4, 6, 8, 11] {
            all.push(last(64, splits, true, 0));
            all.push(last(64, splits, false, 2));
        }
        for splits in [2, 4] {
            all.push(last(128, splits, true, 0));
        }
    }
    all.push(QkvConfig::Unfused);
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}

/// Worker warps of the 128-row and persistent fused kernels (the `num_worker_warps_per_cta` hint): two
/// warpgroups share the f32 accumulator, as in the GEMM family's 128-row fp8 tiles (`ptxas -v`,
/// sm_90: the persistent 128x64 kernel spills 4 KB with 4 warps, 60 bytes with 8; the persistent
/// 64x64 one 120 bytes with 4, none with 8).
pub const WIDE_WORKERS: i32 = 8;
