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
//! **Grid order.** With more than one sequence the grid is rows first, `(Y, B, splits)`
//! ([`MlaDecodeConfig::rows_fast`]): the row tiles and value parts of a sequence, which read the
//! same cache tiles, launch next to each other, so the later ones find the tiles in L2. In the
//! `(B, Y, splits)` order they launched `B` blocks apart, at B 128 in different waves, and each read
//! the cache from HBM. H100 tuner, session 40, same call: 1.08–1.16× at B 32 (1k–32k keys), and at
//! B 128 the narrow form went from 1560 to 935 µs at 8k keys (1.67×; 1.41× over the wide form that
//! was the table's choice there).
//!
//! **One block per row tile** ([`WIDE_VALUE_PART`] = 512, the scores computed once), with 8 worker
//! warps (`num_worker_warps_per_cta`) and key tiles of 32 ([`WIDE_KEY_TILE`]; pages under 32 tokens
//! stay narrow): `mla_decode_direct` then takes 384 threads, 168 registers, 174 KB, no spills (BN 64
//! spills 1.6 KB; BN 16 fits, but ran 1.26–1.36× slower than the narrow form). Rows first, it beats
//! the narrow form only on short caches (64 and 97 keys in session 40's checks; from 1k keys the
//! narrow one wins 1.21–1.34×), so the table takes it for a call that does not split, holds at most
//! [`WIDE_MAX_KEYS`] keys and has a block per SM with one block per row tile. The split kernel of
//! the same tiles gets 256 threads and 212 registers from tileiras with any f32 partial store
//! (session 39), and the direct kernel's 384 threads and 168 registers when it stores its partial in
//! the call's 16-bit type (`elem_partials`). Even so it lost to the narrow split at B 1 and B 32 on
//! an H100 (session 40: 1.2–1.5× at B 1, 1.15–1.25× at B 32 from 8k keys, `docs/attention.md`), so
//! it is only a tuning candidate, at the narrow form's split count.
//!
//! **16-bit partials.** Split calls store their normalized partial outputs in the call's element
//! type (`elem_partials`; the combine upcasts, one more rounding per partial, inside the bf16/f16
//! tolerance): half the scratch traffic. Rows first at B 32 they were 1–7% faster than f32 partials
//! in all six calls timed (session 40); at B 1 within ±2%. The tuner times f32 ones.
//!
//! Split calls merge each row tile's part in `64 × lanes`-element combine blocks ([`combine_lanes`]:
//! 32 lanes, narrower while the combine would have fewer blocks than SMs); a narrowed combine takes
//! its elements as whole 256-lane rows instead ([`MlaDecodeConfig::combine_rows`]).
//!
//! The split count follows the decode rule (`decode::config`) with one block per SM instead of two (a
//! block takes 213 KB of shared memory on sm_90a, so one is resident per SM): as many splits as fit
//! one wave, at least [`MIN_KEYS_PER_SPLIT`] keys per split, at most [`MAX_SPLITS`], from the capacity
//! (the host cannot read `seq_lens`). A block spends about 2.4 µs per 64-key tile (it is bound by the
//! mma, `docs/attention.md`), so short caches at B 1 split down to one tile per split; a grid that
//! already has a block on nearly every SM (B 32 x H 128: 128 blocks) does not split (session 41).
//! The tuner also times twice, four times and half the splits, and the combine's tile in other
//! shapes.

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
/// The most splits of one sequence's keys the table gives.
pub const MAX_SPLITS: i64 = 32;
/// The most splits the tuner times (twice and four times the table's count, below).
pub const MAX_TUNED_SPLITS: i64 = 128;
/// The fewest keys a split gets (unless the capacity is smaller): one key tile. H100, session 41:
/// B 1 x 1k keys at 16 splits 1.12-1.22x faster than at the 4 of 256 keys each, and 1.04-1.07x
/// faster than at 8 once the combine reads whole rows.
pub const MIN_KEYS_PER_SPLIT: i64 = KEY_TILE;
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
/// The lane slices of the combine tiles the tuner times with fewer rows than a row tile, at the
/// default's elements per block ([`MlaDecodeConfig::combine_rows`]).
pub const COMBINE_WIDE_LANES: &[i64] = &[64, 128, 256];
/// The key tile of the [`WIDE_VALUE_PART`] configurations (at most the block size of a paged cache).
pub const WIDE_KEY_TILE: i64 = 32;
/// The longest cache the table gives the [`WIDE_VALUE_PART`] direct form: it won on caches of 64 and
/// 97 keys and lost from 1k (session 40, rows-first grids); between those it is not timed.
pub const WIDE_MAX_KEYS: i64 = 256;

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
    /// Value lanes per combine block (split calls): `(m / combine_rows) · (dv / lanes)` blocks merge
    /// a row tile's part.
    pub lanes: i64,
    /// Query rows per combine block (split calls): `m` (one row tile), or a slice of it so that a
    /// block with as many elements takes wider lane slices (`combine_rows · lanes` elements).
    pub combine_rows: i64,
    /// Split calls store their partial outputs in the call's element type (bf16/f16) instead of f32:
    /// half the scratch traffic, one more rounding per partial (module docs).
    pub elem_partials: bool,
    /// The split/direct grid is `(Y, B, splits)` instead of `(B, Y, splits)`: the row tiles and
    /// parts of one sequence, which read the same cache tiles, launch next to each other.
    pub rows_fast: bool,
}

impl Candidate for MlaDecodeConfig {
    fn name(&self) -> String {
        MlaDecodeConfig::name(self)
    }
}

impl MlaDecodeConfig {
    /// The configuration in words, with ` wN` for a worker-warp hint, ` cN` for a split call's
    /// combine narrower or wider than [`MERGE_LANES`] (` cRxN` when its blocks take `R` of the row
    /// tile's rows), ` p16` for 16-bit split partials and ` rf` for the rows-first grid.
    pub fn name(&self) -> String {
        let workers = if self.workers > 0 {
            format!(" w{}", self.workers)
        } else {
            String::new()
        };
        let lanes = if self.splits > 1 && self.combine_rows != self.m {
            format!(" c{}x{}", self.combine_rows, self.lanes)
        } else if self.splits > 1 && self.lanes != MERGE_LANES {
            format!(" c{}", self.lanes)
        } else {
            String::new()
        };
        let partials = if self.splits > 1 && self.elem_partials {
            " p16"
        } else {
            ""
        };
        let order = if self.rows_fast { " rf" } else { "" };
        format!(
            "mla_decode M={} BN={} DV={} splits={}{workers}{lanes}{partials}{order}",
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
    let narrow = narrow(target, rows, b, capacity, block_size, splits, MAX_SPLITS);
    let wide = wide(b, capacity, block_size, WIDE_KEY_TILE);
    // Pages under 32 tokens would make the wide key tile 16, which ran slower than the narrow form
    // (module docs); those calls stay narrow unless the tuner says otherwise. From 1k keys the
    // narrow form in the rows-first grid is faster (session 40).
    if splits.is_none()
        && narrow.splits == 1
        && wide.bn == WIDE_KEY_TILE
        && capacity <= WIDE_MAX_KEYS
        && b.max(1) * row_tiles(rows) >= i64::from(target.sm_count.max(1))
    {
        wide
    } else {
        narrow
    }
}

/// Row tiles of [`MAX_M`] rows for `rows` query rows per sequence (at least one).
fn row_tiles(rows: i64) -> i64 {
    (rows.max(1) + MAX_M - 1) / MAX_M
}

/// Two value parts of [`VALUE_PART`] per row tile, split by the rule of the module docs (a forced
/// count clamped to `max_splits`).
fn narrow(
    target: &Target,
    rows: i64,
    b: i64,
    capacity: i64,
    block_size: Option<i64>,
    splits: Option<i64>,
    max_splits: i64,
) -> MlaDecodeConfig {
    let m = MAX_M;
    let bn = block_size.map_or(KEY_TILE, |bs| bs.min(KEY_TILE));
    let dv = VALUE_PART;
    let blocks = b.max(1) * row_tiles(rows) * (super::LATENT / dv);
    let (splits, chunk) = split_keys(target, blocks, capacity, bn, splits, max_splits);
    // A combine narrowed below [`MERGE_LANES`] (few row parts) takes as many elements per block as
    // whole `dv`-lane rows: 512-byte scratch rows per load instead of 16-32 bytes of each (H100,
    // session 41: B 1 x H 128, 1.03-1.04x at 8k and 32k keys).
    let lanes = combine_lanes(target, blocks, dv);
    let (combine_rows, lanes) = if lanes < MERGE_LANES {
        (m * lanes / dv, dv)
    } else {
        (m, lanes)
    };
    MlaDecodeConfig {
        m,
        bn,
        dv,
        splits,
        chunk,
        workers: 0,
        lanes,
        combine_rows,
        elem_partials: splits > 1,
        rows_fast: rows_first(b),
    }
}

/// The split count and keys per split (a multiple of `bn`) of `capacity` keys for a call of `blocks`
/// blocks per split: as many splits as fit one wave (`SMs / blocks`, at least one), at least
/// [`MIN_KEYS_PER_SPLIT`] keys each, at most [`MAX_SPLITS`]; `forced` overrides the count (clamped to
/// `max`). (Rounding the wave up split B 32 x H 128, 128 blocks, in two: 1.05-1.34x slower than one
/// split at 1k-8k keys on an H100, session 41.)
fn split_keys(
    target: &Target,
    blocks: i64,
    capacity: i64,
    bn: i64,
    forced: Option<i64>,
    max: i64,
) -> (i64, i64) {
    let cap = capacity.max(1);
    let wanted = forced.unwrap_or_else(|| {
        let target_blocks = i64::from(target.sm_count.max(1));
        let by_sm = (target_blocks / blocks.max(1)).max(1);
        let by_len = (cap + MIN_KEYS_PER_SPLIT - 1) / MIN_KEYS_PER_SPLIT;
        by_sm.min(by_len).min(MAX_SPLITS)
    });
    let wanted = wanted.clamp(1, max);
    let per = (cap + wanted - 1) / wanted;
    let chunk = (per + bn - 1) / bn * bn;
    ((cap + chunk - 1) / chunk, chunk)
}

/// Whether a call of `b` sequences takes the rows-first grid `(Y, B, splits)`: with more than one
/// sequence (B goes on the grid's y axis, so at most 65535). H100, session 40: 1.08–1.16x at B 32,
/// 1.53–1.67x at B 128 for the narrow form over `(B, Y, splits)` (the blocks reading one sequence's
/// cache launched `B` apart, at B 128 in different waves, so each read it from HBM).
fn rows_first(b: i64) -> bool {
    b > 1 && b <= i64::from(u16::MAX)
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
fn wide(b: i64, capacity: i64, block_size: Option<i64>, tile: i64) -> MlaDecodeConfig {
    let bn = block_size.map_or(tile, |bs| bs.min(tile));
    MlaDecodeConfig {
        m: MAX_M,
        bn,
        dv: WIDE_VALUE_PART,
        splits: 1,
        chunk: (capacity.max(1) + bn - 1) / bn * bn,
        workers: WIDE_WORKERS,
        lanes: MERGE_LANES,
        combine_rows: MAX_M,
        elem_partials: false,
        rows_fast: rows_first(b),
    }
}

/// One block per row tile ([`WIDE_VALUE_PART`], [`WIDE_KEY_TILE`]) over `splits` key ranges, with
/// 16-bit partials (`elem_partials`: the store that keeps tileiras at 384 threads). `None` for
/// pages under [`WIDE_KEY_TILE`] tokens or one split.
fn wide_split(
    target: &Target,
    rows: i64,
    b: i64,
    capacity: i64,
    block_size: Option<i64>,
    splits: i64,
) -> Option<MlaDecodeConfig> {
    let base = wide(b, capacity, block_size, WIDE_KEY_TILE);
    if base.bn != WIDE_KEY_TILE {
        return None;
    }
    let blocks = b.max(1) * row_tiles(rows);
    let (splits, chunk) = split_keys(target, blocks, capacity, base.bn, Some(splits), MAX_SPLITS);
    (splits > 1).then(|| MlaDecodeConfig {
        splits,
        chunk,
        lanes: combine_lanes(target, blocks, WIDE_VALUE_PART),
        elem_partials: true,
        ..base
    })
}

/// What the tuner times for a call whose table choice is `default`: the default first; where the
/// narrow configuration does not split, also the narrow one and the one-block-per-row-tile ones at
/// key tiles 32 and 16 (whichever the default is not); where it splits, the combine at the other
/// [`TUNED_MERGE_LANES`], the default with 16-bit partials, the wide split kernel at the
/// default's split count (module docs), and the default at twice, four times and half its split
/// count (at most [`MAX_TUNED_SPLITS`], at least one key tile per split: the table's
/// [`MIN_KEYS_PER_SPLIT`] leaves B 1 x 1k keys 16 blocks), then with 16-bit partials the default's
/// combine tile as fewer rows by [`COMBINE_WIDE_LANES`] lanes.
pub fn candidates(
    target: &Target,
    rows: i64,
    b: i64,
    capacity: i64,
    block_size: Option<i64>,
    default: MlaDecodeConfig,
) -> Vec<MlaDecodeConfig> {
    let mut out = vec![default];
    let narrow_at = |want: Option<i64>| {
        narrow(
            target,
            rows,
            b,
            capacity,
            block_size,
            want,
            MAX_TUNED_SPLITS,
        )
    };
    let narrow = narrow_at(None);
    if default.splits > 1 {
        // The combine in whole row tiles at each lane slice.
        let lanes = TUNED_MERGE_LANES.iter().map(|&lanes| MlaDecodeConfig {
            combine_rows: default.m,
            lanes,
            ..default
        });
        push_new(&mut out, lanes);
        // The default's tiles with the other partial type (f32 partials merge in whole row tiles of
        // as many elements), and the wide tile (16-bit partials) at the default's split count (the
        // only count at which it came near the default, module docs).
        let other_partials = MlaDecodeConfig {
            elem_partials: !default.elem_partials,
            combine_rows: default.m,
            lanes: default.combine_rows * default.lanes / default.m,
            ..default
        };
        let wide = wide_split(target, rows, b, capacity, block_size, default.splits);
        push_new(&mut out, std::iter::once(other_partials).chain(wide));
    }
    // Twice, four times and half the default's splits, where it splits or its grid has fewer
    // blocks than SMs (B 32 x H 128: 128 blocks; the rule that split it in two ran 1.00-1.34x slower
    // on an H100, session 41).
    let blocks = b.max(1) * default.y_blocks(rows);
    if default.dv == VALUE_PART && (default.splits > 1 || blocks < i64::from(target.sm_count)) {
        let counts = [default.splits * 2, default.splits * 4, default.splits / 2];
        let resplit = counts.into_iter().map(|want| MlaDecodeConfig {
            rows_fast: default.rows_fast,
            ..narrow_at(Some(want))
        });
        push_new(&mut out, resplit);
    }
    if default.splits > 1 && default.elem_partials {
        // The default's combine tile reshaped to other row and lane counts of the same elements
        // per block (so the same splits per merge step).
        let elems = default.combine_rows * default.lanes;
        let tiles = COMBINE_WIDE_LANES.iter().filter_map(|&lanes| {
            let rows = elems / lanes;
            (rows >= 1 && rows < default.m && lanes <= default.dv).then_some(MlaDecodeConfig {
                combine_rows: rows,
                lanes,
                ..default
            })
        });
        push_new(&mut out, tiles);
    }
    if narrow.splits == 1 {
        push_new(
            &mut out,
            [
                narrow,
                wide(b, capacity, block_size, WIDE_KEY_TILE),
                wide(b, capacity, block_size, WIDE_KEY_TILE / 2),
            ],
        );
    }
    // With more than one sequence, each of the above in the other grid order too.
    if rows_first(b) {
        let flipped: Vec<_> = out
            .iter()
            .map(|c| MlaDecodeConfig {
                rows_fast: !c.rows_fast,
                ..*c
            })
            .collect();
        push_new(&mut out, flipped);
    }
    out
}

/// Appends each of `configs` that `out` does not hold yet, in order.
fn push_new(out: &mut Vec<MlaDecodeConfig>, configs: impl IntoIterator<Item = MlaDecodeConfig>) {
    for c in configs {
        if !out.contains(&c) {
            out.push(c);
        }
    }
}
