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
/// Widest row the whole-row gather form takes (wider rows go chunked).
pub const MAX_GATHER: i64 = 32768;
/// Chunk width of the chunked gather form.
pub const GATHER_CHUNK: i64 = 4096;
/// Chunk width of the online (looped) form.
pub const CHUNK: i64 = 2048;

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
}

/// A configuration: the variant and its tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SoftmaxConfig {
    pub variant: Variant,
    /// Tile (or chunk) width, a power of two.
    pub bn: i64,
    /// Rows per block (`Rows` only, else 1).
    pub tm: i64,
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
        };
        match self.variant {
            Variant::Rows => format!("{k} TM={} BN={}", self.tm, self.bn),
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
    SoftmaxConfig { variant, bn, tm }
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
pub fn choose(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> SoftmaxConfig {
    let _ = (target, dtype, rows);
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
