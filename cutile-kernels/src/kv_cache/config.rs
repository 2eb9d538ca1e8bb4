//! The KV-cache write tile: `DP` = the power of two ≥ `D` (16..=512), `BM` tokens so a block moves
//! about 2048 lanes of k and of v (one token per block for decode-sized calls), and the grid order.

pub use crate::rope::config::{MAX_D, RopeConfig as KvConfig, TILES};

/// The configuration for `tokens` tokens of head dimension `d` (the RoPE tile rule).
pub fn choose(op: &'static str, tokens: i64, d: i64) -> Result<KvConfig, crate::op::OpError> {
    crate::rope::config::choose(op, tokens, d)
}

/// The tuner's candidates: [`choose`]'s tile in the default order (token tiles fastest), then the
/// same tile with the heads of one token tile on adjacent blocks (not for one-token tiles).
pub fn candidates(
    op: &'static str,
    tokens: i64,
    d: i64,
) -> Result<Vec<KvConfig>, crate::op::OpError> {
    crate::rope::config::candidates(op, tokens, d)
}
