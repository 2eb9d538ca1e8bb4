//! The dropout tile: 256 elements per block for tiny inputs, 1024 for mid-size ones and 4096 for large
//! ones (one Philox call, ~40 32-bit integer multiplies, per eight elements; large tiles keep enough
//! loads in flight); and the tiles the tuner may time.

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
/// defaults 256, 1024 and 4096, and the tuner's 512 and 2048.
pub const ROW_TILES: &[i64] = &[256, 512, 1024, 2048, 4096];

/// Elements from which the default tile is 4096: 1024 blocks of it, about 8 per SM on an H200.
pub const LARGE: i64 = 1 << 22;

/// The tile for `n` elements. 4096 from [`LARGE`] on: `16384 x 4096` bf16 on the H200 (2026-12-03, tuner,
/// row kernel) took 68.5 µs at 4096 and 69.3 at 2048 against 78.7 at 1024 (92% of copy bandwidth
/// against 80%). Mid-size inputs keep 1024, four times the blocks (not measured there).
pub fn choose(n: i64) -> DropoutConfig {
    let bn = if n <= 4096 {
        256
    } else if n < LARGE {
        1024
    } else {
        4096
    };
    DropoutConfig { bn }
}

/// The tiles the tuner may time, [`choose`]'s first: for the row kernel (`rows`: `n` a multiple of 8)
/// past the tiny tile, every row tile from 512 to 4096 (the Philox rounds' multiplies, not memory,
/// bounded earlier forms, so the best tile is a register/occupancy trade-off to measure). Tiny inputs
/// and the flat kernel have only their default.
pub fn candidates(n: i64, rows: bool) -> Vec<DropoutConfig> {
    let default = choose(n);
    let mut all = vec![default];
    if rows && n > 4096 {
        all.extend(
            ROW_TILES
                .iter()
                .filter(|&&bn| bn >= 512 && bn != default.bn)
                .map(|&bn| DropoutConfig { bn }),
        );
    }
    all
}

/// The tuning class of a call: element type, kernel form and the default tile.
pub fn class(dtype: ScalarType, n: i64, rows: bool) -> String {
    let form = if rows { "rows" } else { "flat" };
    format!("{dtype} {form} {}", choose(n).name())
}
