//! Which softmax kernel and tile a call gets: the default table (measured on an H200, sm_90; the same
//! rules serve other archs until measured there) and the candidate list the tuner may time.
//!
//! The shape class a configuration is chosen for is (element type, row-length bucket = the power-of-two
//! tile the row needs, rows ≥ 4096 or not): within a class the same configuration is best.

use cutile_ir::ScalarType;

use crate::op::tuning::Candidate;
use crate::op::{Target, row_tile};

/// Widest row a whole-row view-load tile holds.
pub const MAX_TILE: i64 = 8192;
/// Widest row the whole-row gather form takes (wider rows go chunked: on the H200 a whole-row 32768
/// gather lost to 4096-wide chunks by 1.13x, tuning run of docs/h200-results.md).
pub const MAX_GATHER: i64 = 16384;
/// Chunk width of the chunked gather form.
pub const GATHER_CHUNK: i64 = 4096;
/// Chunk width of the online (looped) form.
pub const CHUNK: i64 = 2048;
/// Narrowest row the split-row form takes (with fewer rows than SMs).
pub const SPLIT_MIN_COLS: i64 = 16384;
/// Fewest columns one split of a row takes.
pub const SPLIT_COLS: i64 = 4096;
/// Chunk width of the split-row form's default.
pub const SPLIT_CHUNK: i64 = 4096;
/// Most splits of one row (the combine pass gathers the partials as one 256-lane tile).
pub const MAX_SPLITS: i64 = 256;
/// Blocks per SM the split-row default aims at (`rows · splits ≈ 4 × SMs`; on the H200, 32 splits of
/// a 16-row 131072-wide softmax beat 16 by 1.12x).
pub const SPLIT_BLOCKS_PER_SM: i64 = 4;

/// A softmax kernel form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// `row_softmax`: one block per row, the row one `1 x BN` tile.
    WholeRow,
    /// `row_softmax_w8`: the same with 8 worker warps.
    Warps8,
    /// `row_softmax_w16`: the same with 16 worker warps.
    Warps16,
    /// `row_softmax_online`: the row in `BN`-wide chunks, two passes; grid `(rows, 1, 1)`.
    Online,
    /// `row_softmax_rows`: `TM` rows per block.
    Rows,
    /// `softmax_gather`: one block per row, the row gathered (masked only when ragged), approximate
    /// `exp` and `div` with flush-to-zero: cuTile Python's fastest form.
    Gather,
    /// `softmax_gather_online`: the gather form in `BN`-wide chunks with a running max and sum, for
    /// rows wider than a whole-row gather; grid `(rows, 1, 1)`.
    GatherOnline,
    /// `softmax_split_stats` + `softmax_split_apply`: each row split across `splits` blocks (grid
    /// `(rows, splits, 1)` for both passes), the partial max / sum passed through an f32 scratch
    /// operand; for fewer rows than SMs.
    Split,
}

/// A configuration: the variant and its tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SoftmaxConfig {
    pub variant: Variant,
    /// Tile (or chunk) width, a power of two.
    pub bn: i64,
    /// Rows per block (`Rows` only, else 1).
    pub tm: i64,
    /// Blocks per row (`Split` only, else 1).
    pub splits: i64,
}

impl Candidate for SoftmaxConfig {
    fn name(&self) -> String {
        let k = match self.variant {
            Variant::WholeRow => "row_softmax",
            Variant::Warps8 => "row_softmax_w8",
            Variant::Warps16 => "row_softmax_w16",
            Variant::Online => "row_softmax_online",
            Variant::Rows => "row_softmax_rows",
            Variant::Gather => "softmax_gather",
            Variant::GatherOnline => "softmax_gather_online",
            Variant::Split => "softmax_split",
        };
        match self.variant {
            Variant::Rows => format!("{k} TM={} BN={}", self.tm, self.bn),
            Variant::Split => format!("{k} BN={} splits={}", self.bn, self.splits),
            _ => format!("{k} BN={}", self.bn),
        }
    }
}

/// Rows per block of the `Rows` form for tile `bn`: a `TM x BN` tile of at most 4096 elements.
pub fn rows_per_block(bn: i64) -> i64 {
    (4096 / bn).clamp(1, 4)
}

fn cfg(variant: Variant, bn: i64) -> SoftmaxConfig {
    let tm = if variant == Variant::Rows {
        rows_per_block(bn)
    } else {
        1
    };
    SoftmaxConfig {
        variant,
        bn,
        tm,
        splits: 1,
    }
}

/// The split count of a row of `cols` columns in `bn`-wide chunks aiming at `blocks` blocks over
/// `rows` rows: `ceil(blocks / rows)`, at most one split per [`SPLIT_COLS`] columns and
/// [`MAX_SPLITS`], then evened out over the chunks so that no split is empty (`splits =
/// ceil(chunks / per)` with `per` = [`chunks_per_split`]); `rows · splits` may fall short of `blocks`
/// where the chunks do not divide evenly.
pub fn split_count(blocks: i64, rows: i64, cols: i64, bn: i64) -> i64 {
    let chunks = crate::op::ceil_div(cols.max(1), bn);
    let want = crate::op::ceil_div(blocks.max(1), rows.max(1))
        .min(cols / SPLIT_COLS)
        .clamp(1, MAX_SPLITS);
    // `s -> ceil(chunks / ceil(chunks / s))` never grows; at its fixed point the kernels' `per` (from
    // the split count) gives exactly `s` non-empty splits.
    let mut s = want.min(chunks);
    loop {
        let next = crate::op::ceil_div(chunks, crate::op::ceil_div(chunks, s));
        if next == s {
            return s;
        }
        s = next;
    }
}

/// `BN`-wide chunks per split: what both split passes take as `per`.
pub fn chunks_per_split(cols: i64, bn: i64, splits: i64) -> i64 {
    crate::op::ceil_div(crate::op::ceil_div(cols.max(1), bn), splits.max(1))
}

/// Whether a call takes the split-row form by default: fewer rows than SMs, rows of at least
/// [`SPLIT_MIN_COLS`].
pub fn wants_split(target: &Target, rows: i64, cols: i64) -> bool {
    rows < i64::from(target.sm_count) && cols >= SPLIT_MIN_COLS
}

/// The split-row configuration with chunk `bn` aiming at `per_sm` blocks per SM.
pub fn split_cfg(target: &Target, rows: i64, cols: i64, bn: i64, per_sm: i64) -> SoftmaxConfig {
    SoftmaxConfig {
        variant: Variant::Split,
        bn,
        tm: 1,
        splits: split_count(per_sm * i64::from(target.sm_count), rows, cols, bn),
    }
}

/// The tuning/shape class of a call.
pub fn class(dtype: ScalarType, rows: i64, cols: i64) -> String {
    let bucket = if cols > MAX_GATHER {
        format!("cols>{MAX_GATHER}")
    } else {
        format!("cols<={}", row_tile(cols))
    };
    let many = if rows >= 4096 {
        "rows>=4096"
    } else {
        "rows<4096"
    };
    format!("{dtype} {bucket} {many}")
}

/// The default configuration (the table).
///
/// The gather forms with approximate `exp`/`div` are cuTile Python's fastest on an H200 (3801 GB/s at
/// bf16 8192², against 1396 for a whole-row view load; anchors.md): whole-row up to 32768 columns,
/// chunked beyond. The older forms stay as tuning candidates.
///
/// Fewer rows than SMs with rows of at least [`SPLIT_MIN_COLS`] take the split-row form: one block per
/// row would leave most SMs idle (16 rows of 131072 bf16: 113 GB/s on an H200 with 16 blocks, torch 234).
pub fn choose(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> SoftmaxConfig {
    let _ = dtype;
    if wants_split(target, rows, cols) {
        return split_cfg(target, rows, cols, SPLIT_CHUNK, SPLIT_BLOCKS_PER_SM);
    }
    if cols > MAX_GATHER {
        return cfg(Variant::GatherOnline, GATHER_CHUNK);
    }
    cfg(Variant::Gather, row_tile(cols))
}

/// Every configuration that handles the call, the default first.
pub fn candidates(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> Vec<SoftmaxConfig> {
    let default = choose(target, dtype, rows, cols);
    let mut all = vec![default];
    let bn = row_tile(cols);
    if wants_split(target, rows, cols) {
        for chunk in [2048, SPLIT_CHUNK, 8192] {
            for per_sm in [2, 3, SPLIT_BLOCKS_PER_SM, 6] {
                all.push(split_cfg(target, rows, cols, chunk, per_sm));
            }
        }
    }
    if cols <= MAX_GATHER {
        all.push(cfg(Variant::Gather, bn));
    }
    for chunk in [2048, GATHER_CHUNK, 8192] {
        if chunk < bn {
            all.push(cfg(Variant::GatherOnline, chunk));
        }
    }
    if cols <= MAX_TILE {
        for v in [
            Variant::WholeRow,
            Variant::Warps8,
            Variant::Warps16,
            Variant::Rows,
        ] {
            all.push(cfg(v, bn));
        }
    }
    all.push(cfg(Variant::Online, CHUNK.min(bn)));
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
