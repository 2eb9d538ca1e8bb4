//! Which RMSNorm/LayerNorm kernel and tile a call gets: the default table (measured on an H200) and the
//! tuner's candidates. Shape class: (element type, row-length bucket).

use cutile_ir::ScalarType;

use crate::op::row_tile;
use crate::op::tuning::Candidate;

/// Widest row the whole-row form takes as one tile.
pub const MAX_TILE: i64 = 4096;
/// Chunk width of the looped form (2048 beat 1024 and 4096 on 16384x8192 bf16 rows on an H200).
pub const CHUNK: i64 = 2048;

/// A norm kernel form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One block per row, the row one `1 x BN` tile.
    WholeRow,
    /// One block per row, walked in `1 x BN` chunks (grid `(rows, 1, 1)`).
    Looped,
}

/// A configuration: the variant and its tile or chunk width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NormConfig {
    pub variant: Variant,
    pub bn: i64,
    /// The kernel's name stem (`rms_norm` or `layer_norm`), for candidate names.
    pub stem: &'static str,
}

impl Candidate for NormConfig {
    fn name(&self) -> String {
        match self.variant {
            Variant::WholeRow => format!("{} BN={}", self.stem, self.bn),
            Variant::Looped => format!("{}_looped BN={}", self.stem, self.bn),
        }
    }
}

/// The shape class of a call.
pub fn class(dtype: ScalarType, cols: i64) -> String {
    if cols > MAX_TILE {
        format!("{dtype} cols>{MAX_TILE}")
    } else {
        format!("{dtype} cols<={}", row_tile(cols))
    }
}

/// The default configuration.
pub fn choose(stem: &'static str, cols: i64) -> NormConfig {
    if cols > MAX_TILE {
        NormConfig {
            variant: Variant::Looped,
            bn: CHUNK,
            stem,
        }
    } else {
        NormConfig {
            variant: Variant::WholeRow,
            bn: row_tile(cols),
            stem,
        }
    }
}

/// Every configuration that handles `cols`, the default first.
pub fn candidates(stem: &'static str, cols: i64) -> Vec<NormConfig> {
    let mut all = vec![choose(stem, cols)];
    if cols <= 8192 {
        all.push(NormConfig {
            variant: Variant::WholeRow,
            bn: row_tile(cols),
            stem,
        });
    }
    for bn in [1024, 2048, 4096] {
        all.push(NormConfig {
            variant: Variant::Looped,
            bn: bn.min(row_tile(cols)),
            stem,
        });
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
