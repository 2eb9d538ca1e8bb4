//! The RoPE tile per head dimension: `DP` = the power of two ≥ `D` (16..=512), `BM` tokens so a block
//! holds about 2048 lanes (fewer when the call has fewer tokens).

use crate::op::OpError;

/// One RoPE configuration: `BM` tokens × `DP` lanes of one head per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RopeConfig {
    pub bm: i64,
    pub dp: i64,
}

/// The `(BM, DP)` pairs the planner may pick (each one kernel instantiation per element and index type).
pub const TILES: &[(i64, i64)] = &[
    (64, 16),
    (64, 32),
    (32, 64),
    (16, 128),
    (8, 256),
    (4, 512),
    (1, 16),
    (1, 32),
    (1, 64),
    (1, 128),
    (1, 256),
    (1, 512),
];

/// The largest head dimension the kernel takes.
pub const MAX_D: i64 = 512;

/// The configuration for `tokens` tokens of head dimension `d` (1..=[`MAX_D`]).
pub fn choose(op: &'static str, tokens: i64, d: i64) -> Result<RopeConfig, OpError> {
    if !(1..=MAX_D).contains(&d) {
        return Err(OpError::Unsupported {
            op,
            what: format!("head dimension {d} is outside 1..={MAX_D}"),
        });
    }
    let dp = (d.max(16) as u64).next_power_of_two() as i64;
    let full = TILES
        .iter()
        .find(|&&(bm, p)| p == dp && bm > 1)
        .map_or(1, |&(bm, _)| bm);
    // Decode-sized calls (a handful of tokens) use one token per block: more blocks, no masked rows.
    let bm = if tokens < full * 8 { 1 } else { full };
    Ok(RopeConfig { bm, dp })
}

/// The full-rotary (`rot = D`) kernels' tile: `BM` tokens × `HB` heads × `HP` pairs per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PairsConfig {
    pub bm: i64,
    pub hb: i64,
    pub hp: i64,
}

/// Heads per full-rotary block.
pub const PAIRS_HB: i64 = 8;

/// The full-rotary tile for `tokens` tokens of head dimension `d` (even, 2..=[`MAX_D`]): `HP` the power
/// of two ≥ `d/2`, [`PAIRS_HB`] heads and `BM` tokens so a block holds about 2048 pairs (one token per
/// block for decode-sized calls).
pub fn choose_pairs(tokens: i64, d: i64) -> PairsConfig {
    let hp = ((d / 2).max(1) as u64).next_power_of_two() as i64;
    let full = (2048 / (PAIRS_HB * hp)).max(1);
    let bm = if tokens < full * 8 { 1 } else { full };
    PairsConfig {
        bm,
        hb: PAIRS_HB,
        hp,
    }
}
