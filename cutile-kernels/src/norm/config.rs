//! Which RMSNorm/LayerNorm kernel and tile a call gets: the default table (measured on an H200) and the
//! tuner's candidates. Shape class: (element type, row-length bucket).

use cutile_ir::ScalarType;

use crate::op::row_tile;
use crate::op::tuning::Candidate;

/// Widest row the whole-row forms take as one tile.
pub const MAX_TILE: i64 = 8192;
/// Chunk width of the looped forms (2048 beat 1024 and 4096 on 16384x8192 bf16 rows on an H200).
pub const CHUNK: i64 = 2048;

/// A norm kernel form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One block per row, the row one `1 x BN` view-load tile (`rms_norm`, `layer_norm`).
    WholeRow,
    /// One block per row, walked in `1 x BN` view-load chunks; grid `(rows, 1, 1)`.
    Looped,
    /// One block per row, the row gathered (`rms_norm_gather`, `layer_norm_gather`): cuTile's fastest
    /// RMSNorm (3950 GB/s at bf16 16384x8192 on an H200).
    Gather,
    /// The gather form in `BN`-wide chunks, for rows wider than a whole-row tile; grid `(rows, 1, 1)`.
    GatherLooped,
    /// LayerNorm only: `TM` rows per step of a persistent loop, one block per SM
    /// (`layer_norm_persistent`): cuTile's fastest LayerNorm (3585 GB/s at 16384x8192).
    Persistent,
}

/// A configuration: the variant, its tile or chunk width and (persistent only) rows per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NormConfig {
    pub variant: Variant,
    pub bn: i64,
    pub tm: i64,
    /// The kernel's name stem (`rms_norm` or `layer_norm`), for candidate names.
    pub stem: &'static str,
}

impl Candidate for NormConfig {
    fn name(&self) -> String {
        let s = self.stem;
        match self.variant {
            Variant::WholeRow => format!("{s} BN={}", self.bn),
            Variant::Looped => format!("{s}_looped BN={}", self.bn),
            Variant::Gather => format!("{s}_gather BN={}", self.bn),
            Variant::GatherLooped => format!("{s}_gather_looped BN={}", self.bn),
            Variant::Persistent => format!("{s}_persistent TM={} BN={}", self.tm, self.bn),
        }
    }
}

/// Rows per step of the persistent LayerNorm for tile `bn`: a `TM x BN` tile of 16384 elements, at
/// most 16 rows (cuTile's measured choice: 2 for 8192, 4 for 4096, 16 for 1024).
pub fn rows_per_step(bn: i64) -> i64 {
    (16384 / bn).clamp(1, 16)
}

fn cfg(stem: &'static str, variant: Variant, bn: i64) -> NormConfig {
    let tm = if variant == Variant::Persistent {
        rows_per_step(bn)
    } else {
        1
    };
    NormConfig {
        variant,
        bn,
        tm,
        stem,
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

/// The default configuration: the gather form (RMSNorm) or the persistent form (LayerNorm) up to
/// 8192-wide rows, the looped gather form beyond.
pub fn choose(stem: &'static str, cols: i64) -> NormConfig {
    if cols > MAX_TILE {
        return cfg(stem, Variant::GatherLooped, CHUNK);
    }
    let bn = row_tile(cols);
    if stem == "layer_norm" && bn >= 1024 {
        cfg(stem, Variant::Persistent, bn)
    } else {
        cfg(stem, Variant::Gather, bn)
    }
}

/// Every configuration that handles `cols`, the default first.
pub fn candidates(stem: &'static str, cols: i64) -> Vec<NormConfig> {
    let mut all = vec![choose(stem, cols)];
    let bn = row_tile(cols);
    if cols <= MAX_TILE {
        all.push(cfg(stem, Variant::Gather, bn));
        if stem == "layer_norm" {
            all.push(cfg(stem, Variant::Persistent, bn));
        }
        if bn <= 4096 {
            all.push(cfg(stem, Variant::WholeRow, bn));
        }
    }
    for chunk in [1024, CHUNK, 4096] {
        if chunk < bn {
            all.push(cfg(stem, Variant::GatherLooped, chunk));
        }
    }
    all.push(cfg(stem, Variant::Looped, CHUNK.min(bn)));
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
