//! Which norm kernel and tile a call gets: the default table (measured on an H200) and the tuner's
//! candidates. Row ops (`rms_norm`, `layer_norm`, `add_rms_norm`, `layer_norm_stats`): shape class
//! (element type, row-length bucket). Per-head RMSNorm (`rms_norm_heads`): shape class (element type,
//! head-tile width).

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

/// Whether `stem` has the view-load forms (`WholeRow`, `Looped`): only the plain RMSNorm and LayerNorm.
fn has_view_forms(stem: &str) -> bool {
    matches!(stem, "rms_norm" | "layer_norm")
}

/// Whether `stem` has a persistent form: the LayerNorms.
fn has_persistent(stem: &str) -> bool {
    matches!(stem, "layer_norm" | "layer_norm_stats")
}

/// A configuration: the variant, its tile or chunk width and (persistent only) rows per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NormConfig {
    pub variant: Variant,
    pub bn: i64,
    pub tm: i64,
    /// The kernel's name stem (`rms_norm`, `layer_norm`, `add_rms_norm` or `layer_norm_stats`), for
    /// candidate names.
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

/// The default configuration for `dtype` rows of `cols`: the whole-row gather form, except LayerNorms
/// of 8192-wide bf16/f16 rows and every row wider than 8192, which take the looped gather form.
pub fn choose(stem: &'static str, dtype: ScalarType, cols: i64) -> NormConfig {
    if cols > MAX_TILE {
        return cfg(stem, Variant::GatherLooped, CHUNK);
    }
    let bn = row_tile(cols);
    // H200 tuning run (docs/h200-results.md): for LayerNorm the looped gather form beat the persistent
    // one on 4096- and 8192-wide bf16/f16 rows (x1.25–1.40), and the persistent form lost badly when
    // there are fewer row groups than SMs (1000 rows: x1.5–5.7 slower than a one-row-per-block form).
    // The second tuning run: a whole-row gather beat the looped one on 4096-wide bf16 rows (x1.07) and
    // on 8192-wide f32 rows (x1.19); 8192-wide bf16/f16 rows stayed fastest looped.
    let looped = match dtype {
        ScalarType::F32 => bn > MAX_TILE,
        _ => bn > 4096,
    };
    if has_persistent(stem) && looped {
        cfg(stem, Variant::GatherLooped, CHUNK)
    } else {
        cfg(stem, Variant::Gather, bn)
    }
}

/// Every configuration that handles `cols`, the default first.
pub fn candidates(stem: &'static str, dtype: ScalarType, cols: i64) -> Vec<NormConfig> {
    let mut all = vec![choose(stem, dtype, cols)];
    let bn = row_tile(cols);
    if cols <= MAX_TILE {
        all.push(cfg(stem, Variant::Gather, bn));
        if has_persistent(stem) {
            all.push(cfg(stem, Variant::Persistent, bn));
        }
        if bn <= 4096 && has_view_forms(stem) {
            all.push(cfg(stem, Variant::WholeRow, bn));
        }
    }
    for chunk in [1024, CHUNK, 4096] {
        if chunk < bn {
            all.push(cfg(stem, Variant::GatherLooped, chunk));
        }
    }
    if has_view_forms(stem) {
        all.push(cfg(stem, Variant::Looped, CHUNK.min(bn)));
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}

/// Widest head vector (`D`) the per-head RMSNorm takes (one `TM x BD` tile per block).
pub const MAX_HEAD_DIM: i64 = 1024;

/// A per-head RMSNorm configuration (`rms_norm_heads`): `TM` head vectors of `BD` lanes per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeadsConfig {
    pub tm: i64,
    pub bd: i64,
}

impl Candidate for HeadsConfig {
    fn name(&self) -> String {
        format!("rms_norm_heads TM={} BD={}", self.tm, self.bd)
    }
}

/// The lanes per head vector: the next power of two ≥ `d` (at least 16).
pub fn head_tile(d: i64) -> i64 {
    (d.max(16) as u64).next_power_of_two() as i64
}

/// Head vectors per block the tuner may pick.
pub const HEADS_PER_BLOCK: [i64; 4] = [4, 8, 16, 32];

/// The default per-head configuration: about 4096 elements per block (`TM` = 32 head vectors of 64 or
/// 128, 16 of 256, 8 of 512, 4 of 1024), so short heads still give each block a few KiB to move, and a
/// decode step (`T` = 1) is still one or a few blocks.
pub fn choose_heads(d: i64) -> HeadsConfig {
    let bd = head_tile(d);
    HeadsConfig {
        tm: (4096 / bd).clamp(4, 32),
        bd,
    }
}

/// Every per-head configuration for head length `d`, the default first.
pub fn candidates_heads(d: i64) -> Vec<HeadsConfig> {
    let first = choose_heads(d);
    let mut all = vec![first];
    for tm in HEADS_PER_BLOCK {
        if tm != first.tm {
            all.push(HeadsConfig { tm, bd: first.bd });
        }
    }
    all
}

/// The shape class of a per-head call.
pub fn class_heads(dtype: ScalarType, d: i64) -> String {
    format!("{dtype} D<={}", head_tile(d))
}
