//! MLA decode configuration: the query rows `M` of a block, the key tile `BN`, the value columns `DV`
//! a block accumulates, and the split count.
//!
//! The `R = H·Sq` query rows of a sequence go into row tiles of `M` = 64 rows (H 128 is two row tiles,
//! each reading the cache once; H 16 pads 48 zero rows: decode is bound by the cache reads, not the
//! mma). Each row tile is split into two value parts of `DV` = 256 columns: two blocks that recompute
//! the same scores over the same cache tiles (the second read mostly from L2). `ptxas -v` on sm_90a
//! (tileiras 13.5): M 64 / DV 256 uses 384 threads, 168 registers, no spills; DV 512 (one block per
//! row tile) without a worker-warp hint drops to 128 threads and spills 7.5 KB; M 32 / DV 256 spills
//! 1.8 KB. sm_80 and sm_120 (no wgmma, 99 KB smem) spill 2–3.6 KB at M 64 / DV 256.
//!
//! A call that does not split and has at least one block per SM with one block per row tile takes
//! that instead ([`WIDE_VALUE_PART`] = 512, the scores computed once, each cache tile read by half as
//! many blocks), with 8 worker warps (`num_worker_warps_per_cta`) and key tiles of 32 ([`WIDE_KEY_TILE`];
//! pages under 32 tokens stay narrow): `mla_decode_direct` then takes 384 threads, 168 registers,
//! 174 KB, no spills (BN 64 spills 1.6 KB; BN 16 fits, but ran 1.26–1.36× slower than the narrow
//! form). The split kernel of the same tiles is not used: `mla_decode_partial` gets 256 threads and
//! 212 registers from tileiras with any f32 partial store (tried: two 256-column halves, rounded to
//! bf16 first, rank-3 tiles, without TMA), and ran 1.6–2.2× slower than the narrow split on an H100
//! (session 39 tuner, `docs/attention.md`). Storing the partial as bf16 gives it the direct kernel's
//! 384 threads and 168 registers (`docs/toolchain-findings.md`); not built (the combine reads f32).
//!
//! Split calls merge each row tile's part in `256 / lanes` combine blocks ([`combine_lanes`]: 32
//! lanes, narrower while the combine would have fewer blocks than SMs).
//!
//! The split count follows the decode rule (`decode::config`) with one block per SM instead of two (a
//! block takes 213 KB of shared memory on sm_90a, so one is resident per SM): at least
//! [`MIN_KEYS_PER_SPLIT`] keys per split, at most [`MAX_SPLITS`], from the capacity (the host cannot
//! read `seq_lens`).

use crate::op::Target;
use crate::op::tuning::Candidate;

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
/// Value columns per block of the one-block-per-row-tile configurations (the whole latent).
pub const WIDE_VALUE_PART: i64 = 512;
/// The `num_worker_warps_per_cta` hint of the [`WIDE_VALUE_PART`] configurations.
pub const WIDE_WORKERS: i64 = 8;
/// Value lanes per combine block of the table's split configurations (the attention decode's).
pub const MERGE_LANES: i64 = crate::attention::online::MERGE_LANES as i64;
/// The combine's lane slices the tuner times on split calls ([`combine_lanes`] picks one).
pub const TUNED_MERGE_LANES: &[i64] = &[32, 16, 8];
/// The key tile of the [`WIDE_VALUE_PART`] configurations (at most the block size of a paged cache).
pub const WIDE_KEY_TILE: i64 = 32;

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
    /// The `num_worker_warps_per_cta` hint (0: none, tileiras's choice).
    pub workers: i64,
    /// Value lanes per combine block (split calls): `dv / lanes` blocks merge a row tile's part.
    pub lanes: i64,
}

impl Candidate for MlaDecodeConfig {
    fn name(&self) -> String {
        MlaDecodeConfig::name(self)
    }
}

impl MlaDecodeConfig {
    /// The configuration in words, with ` wN` for a worker-warp hint and ` cN` for a split call's
    /// combine narrower or wider than [`MERGE_LANES`].
    pub fn name(&self) -> String {
        let workers = if self.workers > 0 {
            format!(" w{}", self.workers)
        } else {
            String::new()
        };
        let lanes = if self.splits > 1 && self.lanes != MERGE_LANES {
            format!(" c{}", self.lanes)
        } else {
            String::new()
        };
        format!(
            "mla_decode M={} BN={} DV={} splits={}{workers}{lanes}",
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
    let narrow = narrow(target, rows, b, capacity, block_size, splits);
    let row_tiles = (rows.max(1) + MAX_M - 1) / MAX_M;
    let wide = wide(capacity, block_size, WIDE_KEY_TILE);
    // Pages under 32 tokens would make the wide key tile 16, which ran slower than the narrow form
    // (module docs); those calls stay narrow unless the tuner says otherwise.
    if splits.is_none()
        && narrow.splits == 1
        && wide.bn == WIDE_KEY_TILE
        && b.max(1) * row_tiles >= i64::from(target.sm_count.max(1))
    {
        wide
    } else {
        narrow
    }
}

/// Two value parts of [`VALUE_PART`] per row tile, split by the rule of the module docs.
fn narrow(
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
        workers: 0,
        lanes: combine_lanes(target, blocks, dv),
    }
}

/// Value lanes per combine block for `row_parts` (sequence, row tile, value part) triples of `dv`
/// lanes each (the split kernel's blocks per split): [`MERGE_LANES`], or narrower slices (down to 8)
/// while the combine has fewer blocks than SMs. H100 tuner (session 39): B 1 x H 128 (32 blocks at
/// 32 lanes) 1.05–1.09x faster at 8 lanes with 32 splits; B 32 (1024 blocks) 1.03–1.40x slower at 8.
fn combine_lanes(target: &Target, row_parts: i64, dv: i64) -> i64 {
    let sms = i64::from(target.sm_count.max(1));
    let mut lanes = MERGE_LANES;
    while lanes > 8 && row_parts.max(1) * (dv / lanes) < sms {
        lanes /= 2;
    }
    lanes
}

/// One block per row tile over the whole key range, key tile `tile` (at most the page).
fn wide(capacity: i64, block_size: Option<i64>, tile: i64) -> MlaDecodeConfig {
    let bn = block_size.map_or(tile, |bs| bs.min(tile));
    MlaDecodeConfig {
        m: MAX_M,
        bn,
        dv: WIDE_VALUE_PART,
        splits: 1,
        chunk: (capacity.max(1) + bn - 1) / bn * bn,
        workers: WIDE_WORKERS,
        lanes: MERGE_LANES,
    }
}

/// What the tuner times for a call whose table choice is `default`: the default first; where the
/// narrow configuration does not split, also the narrow one and the one-block-per-row-tile ones at
/// key tiles 32 and 16 (whichever the default is not); where it splits, the combine at the other
/// [`TUNED_MERGE_LANES`] (the wide split kernel lost everywhere, module docs).
pub fn candidates(
    target: &Target,
    rows: i64,
    b: i64,
    capacity: i64,
    block_size: Option<i64>,
    default: MlaDecodeConfig,
) -> Vec<MlaDecodeConfig> {
    let mut out = vec![default];
    let narrow = narrow(target, rows, b, capacity, block_size, None);
    if default.splits > 1 {
        for &lanes in TUNED_MERGE_LANES {
            let c = MlaDecodeConfig { lanes, ..default };
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    if narrow.splits == 1 {
        for c in [
            narrow,
            wide(capacity, block_size, WIDE_KEY_TILE),
            wide(capacity, block_size, WIDE_KEY_TILE / 2),
        ] {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}
