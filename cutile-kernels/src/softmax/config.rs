//! Which softmax kernel and tile a call gets: the default table (measured on an H200, sm_90; the same
//! rules serve other archs until measured there) and the candidate list the tuner may time.
//!
//! The shape class a configuration is chosen for is (element type, row-length bucket = the power-of-two
//! tile the row needs, rows ≥ 4096 or not): within a class the same configuration is best.

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType;

use crate::op::tuning::Candidate;
use crate::op::{Target, row_tile};

/// Widest row a whole-row tile holds.
pub const MAX_TILE: i64 = 8192;
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
    let bucket = if cols > MAX_TILE {
        "cols>8192".to_string()
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
pub fn choose(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> SoftmaxConfig {
    let _ = (target.arch == GpuArch::Sm90, rows);
    if cols > MAX_TILE {
        return cfg(Variant::Online, CHUNK);
    }
    let bn = row_tile(cols);
    // H200 (docs/h200-results.md, run 3): bf16 8192-wide rows are fastest in the chunked online form
    // (2085 GB/s against 1427 whole-row), 4096-wide with 16 warps (1825 against 1568), 1024-wide and
    // shorter as one whole-row tile (2251); f32 rows as one tile (3753 at 8192).
    match (dtype, bn) {
        (ScalarType::F32, _) => cfg(Variant::WholeRow, bn),
        (_, 8192) => cfg(Variant::Online, CHUNK),
        (_, 4096) => cfg(Variant::Warps16, bn),
        _ => cfg(Variant::WholeRow, bn),
    }
}

/// Every configuration that handles the call, the default first.
pub fn candidates(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> Vec<SoftmaxConfig> {
    let default = choose(target, dtype, rows, cols);
    let mut all = vec![default];
    if cols <= MAX_TILE {
        let bn = row_tile(cols);
        for v in [
            Variant::WholeRow,
            Variant::Warps8,
            Variant::Warps16,
            Variant::Rows,
        ] {
            all.push(cfg(v, bn));
        }
    }
    for chunk in [1024, CHUNK] {
        all.push(cfg(Variant::Online, chunk.min(row_tile(cols))));
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
