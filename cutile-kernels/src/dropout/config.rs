//! The dropout tile: 1024 elements per block (one Philox call, ~40 32-bit integer multiplies, per
//! eight elements; large tiles keep enough loads in flight), 256 for tiny inputs; and the tiles the
//! tuner may time.

use cutile_ir::ScalarType;

use crate::op::tuning::Candidate;

/// A tile: `bn` elements per block, `bn / 8` Philox groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DropoutConfig {
    pub bn: i64,
}

impl Candidate for DropoutConfig {
    fn name(&self) -> String {
        format!("BN={}", self.bn)
    }
}

/// The tiles the `[n / 8, 8]` row kernel is instantiated for (`mod.rs` dispatches exactly these): the
/// defaults 256 and 1024, and the tuner's 512, 2048 and 4096.
pub const ROW_TILES: &[i64] = &[256, 512, 1024, 2048, 4096];

/// The tile for `n` elements.
pub fn choose(n: i64) -> DropoutConfig {
    DropoutConfig {
        bn: if n <= 4096 { 256 } else { 1024 },
    }
}

/// The tiles the tuner may time, [`choose`]'s first: for the row kernel (`rows`: `n` a multiple of 8)
/// past the tiny tile, half, twice and four times the default's elements per block (the Philox rounds'
/// multiplies, not memory, bounded earlier forms, so the best tile is a register/occupancy trade-off
/// to measure). Tiny inputs and the flat kernel have only their default.
pub fn candidates(n: i64, rows: bool) -> Vec<DropoutConfig> {
    let default = choose(n);
    let mut all = vec![default];
    if rows && n > 4096 {
        for f in [(1, 2), (2, 1), (4, 1)] {
            all.push(DropoutConfig {
                bn: default.bn * f.0 / f.1,
            });
        }
    }
    all
}

/// The tuning class of a call: element type, kernel form and the default tile.
pub fn class(dtype: ScalarType, n: i64, rows: bool) -> String {
    let form = if rows { "rows" } else { "flat" };
    format!("{dtype} {form} {}", choose(n).name())
}
