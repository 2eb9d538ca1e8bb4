//! MLA decode configuration: the query rows `M` of a block, the key tile `BN`, the value columns `DV`
//! a block accumulates, and the split count.
//!
//! The `R = H·Sq` query rows of a sequence go into row tiles of `M` = 64 rows (H 128 is two row tiles,
//! each reading the cache once; H 16 pads 48 zero rows: decode is bound by the cache reads, not the
//! mma). Each row tile is split into two value parts of `DV` = 256 columns: two blocks that recompute
//! the same scores over the same cache tiles (the second read mostly from L2), each taking its value
//! columns out of the latent tile it loaded for the scores. `ptxas -v` on sm_90a
//! (tileiras 13.5): M 64 / DV 256 uses 384 threads, 168 registers, no spills; DV 512 (one block per
//! row tile) drops to 128 threads and spills 7.5 KB; M 32 / DV 256 spills 1.8 KB. sm_80 and sm_120
//! (no wgmma, 99 KB smem) spill 2–3.6 KB at M 64 / DV 256.
//!
//! The split count follows the decode rule (`decode::config`) with one block per SM instead of two (a
//! block takes 213 KB of shared memory on sm_90a, so one is resident per SM): at least
//! [`MIN_KEYS_PER_SPLIT`] keys per split, at most [`MAX_SPLITS`], from the capacity (the host cannot
//! read `seq_lens`).

use crate::op::Target;

/// The most queries per sequence (MTP / speculative decoding).
pub const MAX_QUERIES: i64 = 8;
/// The largest row tile.
pub const MAX_M: i64 = 64;
/// Value columns per block.
pub const VALUE_PART: i64 = 256;
/// Paged block sizes with a kernel (powers of two).
pub const BLOCK_SIZES: &[i64] = &[16, 32, 64, 128, 256];
/// The most splits of one sequence's keys.
pub const MAX_SPLITS: i64 = 32;
/// The fewest keys a split gets (unless the capacity is smaller).
pub const MIN_KEYS_PER_SPLIT: i64 = 256;
/// The key tile of contiguous caches (and of pages at least this large).
pub const KEY_TILE: i64 = 64;

/// An MLA decode configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MlaDecodeConfig {
    /// Query rows of a block (64; fewer rows are zero-padded).
    pub m: i64,
    /// Key rows per tile.
    pub bn: i64,
    /// Value (output) columns per block; `512 / dv` blocks share a row tile.
    pub dv: i64,
    /// Splits of the key range (1: no combine).
    pub splits: i64,
    /// Keys per split (a multiple of `bn`).
    pub chunk: i64,
}

impl MlaDecodeConfig {
    /// The configuration in words.
    pub fn name(&self) -> String {
        format!(
            "mla_decode M={} BN={} DV={} splits={}",
            self.m, self.bn, self.dv, self.splits
        )
    }

    /// Blocks on the grid's y axis for `rows` query rows per sequence: row tiles × value parts.
    pub fn y_blocks(&self, rows: i64) -> i64 {
        (rows + self.m - 1) / self.m * (super::LATENT / self.dv)
    }
}

/// The configuration of a call: `rows` = `H·Sq`, `b` sequences, `capacity` keys per sequence,
/// `block_size` for paged caches, `splits` forced when given.
pub fn choose(
    target: &Target,
    rows: i64,
    b: i64,
    capacity: i64,
    block_size: Option<i64>,
    splits: Option<i64>,
) -> MlaDecodeConfig {
    let m = MAX_M;
    let bn = block_size.map_or(KEY_TILE, |bs| bs.min(KEY_TILE));
    let dv = VALUE_PART;
    let blocks = b.max(1) * ((rows.max(1) + m - 1) / m) * (super::LATENT / dv);
    let cap = capacity.max(1);
    let wanted = splits.unwrap_or_else(|| {
        let target_blocks = i64::from(target.sm_count.max(1));
        let by_sm = (target_blocks + blocks - 1) / blocks;
        let by_len = (cap + MIN_KEYS_PER_SPLIT - 1) / MIN_KEYS_PER_SPLIT;
        by_sm.min(by_len).min(MAX_SPLITS)
    });
    let wanted = wanted.clamp(1, MAX_SPLITS);
    let per = (cap + wanted - 1) / wanted;
    let chunk = (per + bn - 1) / bn * bn;
    let splits = (cap + chunk - 1) / chunk;
    MlaDecodeConfig {
        m,
        bn,
        dv,
        splits,
        chunk,
    }
}
