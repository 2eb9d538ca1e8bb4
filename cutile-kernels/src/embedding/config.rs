//! The embedding tile: `BN` = the power of two ≥ `D` up to 1024 columns, `BM` rows so a block moves
//! about 4096 elements (fewer rows for decode-sized calls).

/// One configuration: `BM` tokens × `BN` columns per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct EmbConfig {
    pub bm: i64,
    pub bn: i64,
}

/// The `(BM, BN)` pairs the planner may pick.
pub const TILES: &[(i64, i64)] = &[
    (32, 128),
    (16, 256),
    (8, 512),
    (4, 1024),
    (1, 128),
    (1, 256),
    (1, 512),
    (1, 1024),
];

/// The configuration for `tokens` rows of `d` columns.
pub fn choose(tokens: i64, d: i64) -> EmbConfig {
    let bn = (d.clamp(128, 1024) as u64).next_power_of_two() as i64;
    let bm = if tokens < 64 { 1 } else { 4096 / bn };
    EmbConfig { bm, bn }
}
