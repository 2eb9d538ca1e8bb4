//! Decode configuration: the padded query rows `M` of a block, the key tile `BN` (and the rows of each of
//! its loads, a page for small pages), the split count, the split kernel's occupancy hint, and whether
//! the splits are merged in the same launch (a tuning candidate only: the table never picks it).
//!
//! Decode is bound by reading the cache, so the rule is to fill the SMs once: `B · Hkv` blocks are
//! multiplied by splits of the key range up to one wave, `⌊SMs / (B · Hkv)⌋` splits (one block per
//! SM: the kernel's key/value pipeline takes about 200 KB of shared memory on sm_90), with at least
//! [`MIN_KEYS_PER_SPLIT`] keys per split (an empty split costs a launch slot and a combine step) and at
//! most [`MAX_SPLITS`]. The H200 tuner (session 10, `docs/attention.md`) measured the earlier rule,
//! two blocks per SM, 1.11–1.41× slower at B = 1 (32 splits against 16) and 1.05–1.63× at B = 16 (3
//! splits against none). The host cannot read `seq_lens` without a sync, so the split count and the keys
//! per split follow the cache's capacity; splits past a sequence's length write an empty partial.
//! Where `B · Hkv` blocks are more than the SMs (no split), the launch runs at two blocks per SM
//! ([`OCCUPANCY`]), which tileiras sizes to fit.

use crate::op::Target;
use crate::op::tuning::Candidate;

/// Head dimensions with a kernel.
pub const HEAD_DIMS: &[i64] = &[64, 128];
/// The most queries per sequence (speculative decoding).
pub const MAX_QUERIES: i64 = 8;
/// The largest query tile (`Hq / Hkv · Sq` rows, padded to a power of two).
pub const MAX_ROWS: i64 = 128;
/// Paged block sizes with a kernel (powers of two).
pub const BLOCK_SIZES: &[i64] = &[16, 32, 64, 128, 256];
/// The most splits of one sequence's keys.
pub const MAX_SPLITS: i64 = 32;
/// The fewest keys a split gets (unless the capacity is smaller).
pub const MIN_KEYS_PER_SPLIT: i64 = 256;
/// The most splits a tuning candidate gets ([`candidates`]).
pub const MAX_TUNED_SPLITS: i64 = 128;
/// The fewest keys per split a tuning candidate gets ([`candidates`]).
pub const MIN_TUNED_KEYS_PER_SPLIT: i64 = 128;
/// The key tile of contiguous caches (and of pages at least this large).
pub const KEY_TILE: i64 = 64;

/// A decode configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeConfig {
    /// Query rows of a block (`G · Sq` padded to a power of two, at least 16).
    pub m: i64,
    /// Key rows per tile.
    pub bn: i64,
    /// Rows per load: `bn` for contiguous caches and pages of at least [`KEY_TILE`] tokens, the block
    /// size for smaller pages, whose key tile is still [`KEY_TILE`] keys, assembled from `bn / pb` page
    /// loads per step (a page-sized tile per step issues too few loads at once: 350–721 GB/s on an
    /// H200 with 16-token pages; 128-key tiles of 32-token pages spill in ptxas).
    pub pb: i64,
    /// Splits of the key range (1: no combine).
    pub splits: i64,
    /// Keys per split (a multiple of `bn`).
    pub chunk: i64,
    /// Merge the split partials in the split launch (`decode_split_last`: the last block of a `(b,
    /// kvh)` to finish merges them) instead of a second `decode_combine` launch, whose cost dominates
    /// at short caches. Only with `splits > 1`; [`choose`] never sets it, [`candidates`] times it.
    pub one_launch: bool,
    /// The split kernel's `occupancy` hint (0: none): the blocks per SM tileiras sizes registers and
    /// the key/value pipeline for. [`choose`] sets [`OCCUPANCY`] where the call does not split and
    /// its `B · Hkv` blocks are more than the SMs, and 0 elsewhere (255 registers and about 200 KB of
    /// shared memory at D 128, one block per SM); [`candidates`] times the other.
    pub occupancy: i64,
}

impl DecodeConfig {
    /// The configuration in words, e.g. `attention_decode M=16 BN=64 splits=8`, with ` oN` for an
    /// occupancy hint and ` last` when the splits are merged in the same launch.
    pub fn name(&self) -> String {
        format!(
            "attention_decode M={} BN={}{} splits={}{}{}",
            self.m,
            self.bn,
            if self.pb < self.bn {
                format!(" pages={}x{}", self.bn / self.pb, self.pb)
            } else {
                String::new()
            },
            self.splits,
            if self.occupancy > 0 {
                format!(" o{}", self.occupancy)
            } else {
                String::new()
            },
            if self.one_launch { " last" } else { "" }
        )
    }
}

/// The configuration of a call: `rows` = `G · Sq` query rows per KV head, `heads` = `B · Hkv` blocks
/// before splitting, `capacity` = keys the cache holds per sequence, `block_size` for paged caches.
pub fn choose(
    target: &Target,
    rows: i64,
    heads: i64,
    capacity: i64,
    block_size: Option<i64>,
    splits: Option<i64>,
) -> DecodeConfig {
    let m = (rows.max(16) as u64).next_power_of_two() as i64;
    let (bn, pb) = match block_size {
        Some(bs) if bs < KEY_TILE => (KEY_TILE, bs),
        _ => (KEY_TILE, KEY_TILE),
    };
    let cap = capacity.max(1);
    let wanted = splits.unwrap_or_else(|| {
        let by_sm = (i64::from(target.sm_count.max(1)) / heads.max(1)).max(1);
        let by_len = (cap + MIN_KEYS_PER_SPLIT - 1) / MIN_KEYS_PER_SPLIT;
        by_sm.min(by_len).min(MAX_SPLITS)
    });
    let wanted = wanted.clamp(1, MAX_SPLITS);
    let per = (cap + wanted - 1) / wanted;
    let chunk = (per + bn - 1) / bn * bn;
    let splits = (cap + chunk - 1) / chunk;
    // Two blocks per SM only where they can be resident together: an unsplit grid of more than one
    // block per SM.
    let two_per_sm = splits == 1 && heads > i64::from(target.sm_count.max(1));
    DecodeConfig {
        m,
        bn,
        pb,
        splits,
        chunk,
        one_launch: false,
        occupancy: if two_per_sm { OCCUPANCY } else { 0 },
    }
}

impl Candidate for DecodeConfig {
    fn name(&self) -> String {
        DecodeConfig::name(self)
    }
}

/// The occupancy hint of the configurations that run two blocks per SM: at D 128 tileiras 13.5.37
/// then gives the split kernel 128 registers (no spill) and 65–85 KB of shared memory, so two
/// resident blocks' online-softmax chains overlap (with one, each 64-key step's score reductions
/// cross the consumer warps through shared memory and named barriers, and nothing else runs
/// meanwhile). Occupancy 3 spills (80 registers). [`choose`] takes it where the call does not split
/// and has more blocks than SMs (so two can share an SM). Session 31, H100, old harness against new
/// in one call: B 64 × 1k 104.59 → 93.42 µs, B 128 × 1k 189.60 → 178.05, B 64 × 4k 354.34 → 342.40,
/// paged B 128 × 4k 3–5% faster. Where the `B · Hkv` blocks fit the SMs once (B 16 × Hkv 8 on 132
/// SMs) the hint only shrinks each block's pipeline: 16-token pages at B 16 × 8k 183.76 → 204.69, so
/// those calls keep one block per SM. At B 1 twice the splits at occupancy 2 lost to the one-block
/// default at 8k and 32k keys (tuner: 31.3 against 28.4, 65.7 against 63.3 µs) and won at 1k (14.1
/// against 16.4), so split calls keep it as a candidate.
pub const OCCUPANCY: i64 = 2;

/// The key tile of the wide tuning candidates ([`candidates`]): contiguous caches with a query tile
/// of at most 32 rows.
pub const WIDE_KEY_TILE: i64 = 128;

/// `splits` splits of `capacity` keys with key tile `bn`: the chunk (a multiple of `bn`) and the split
/// count it really gives; `None` past [`MAX_TUNED_SPLITS`] or under [`MIN_TUNED_KEYS_PER_SPLIT`]
/// keys per split.
fn split_into(capacity: i64, want: i64, bn: i64) -> Option<(i64, i64)> {
    if !(1..=MAX_TUNED_SPLITS).contains(&want) {
        return None;
    }
    let per = (capacity + want - 1) / want;
    let chunk = (per + bn - 1) / bn * bn;
    if chunk < MIN_TUNED_KEYS_PER_SPLIT && want > 1 {
        return None;
    }
    Some((chunk, (capacity + chunk - 1) / chunk))
}

/// What the tuner (`CUTILE_TUNE`) times for a call whose table choice is `default` over `capacity`
/// keys: `default` first, then twice, four times and half its splits, each with at least
/// [`MIN_TUNED_KEYS_PER_SPLIT`] keys per split (a multiple of the key tile) and at most
/// [`MAX_TUNED_SPLITS`] splits; with `wide` (a contiguous cache, at most 32 query rows) also the
/// [`WIDE_KEY_TILE`]-key tile at the default's and twice its splits (half the loop trips per split,
/// twice the bytes per load: B = 1 decode reads at half of copy bandwidth with the 64-key tile); then
/// an unsplit default's grid at the other occupancy, and where the default runs one block per SM the
/// [`OCCUPANCY`] hint at twice and four times its splits (two blocks per SM fill the SMs at twice the
/// split count). After
/// those, in the same order, the one-launch twin of each that splits (`one_launch`: the combine
/// launch is a large share of a short cache's time, H200 B 1 × 1k keys 15.6 µs against cuDNN's
/// 11.2). On the H200 (session 23's tuner) the twins won no call by more than 1%: the tuner's best
/// at B 1 × 1k was the 128-key tile at 8 splits with the combine launch (14.5 µs, against 15.2 for
/// the default's twin and 16.0 for the default), and at 16 or more splits the one-launch merge ran
/// slower (B 1 × 8k, 16 splits: 27.5 against 25.4 µs). Kernels are the default's, plus `decode_partial`/`decode_combine` or `decode_direct` where
/// the split count crosses 1, the wide tile's, and `decode_split_last` for the twins.
pub fn candidates(default: DecodeConfig, capacity: i64, wide: bool) -> Vec<DecodeConfig> {
    let cap = capacity.max(1);
    let mut out = vec![default];
    let mut push = |bn: i64, want: i64, occupancy: i64| {
        if let Some((chunk, splits)) = split_into(cap, want, bn) {
            let c = DecodeConfig {
                bn,
                // The default's key tile keeps its page loads (a 64-row load from a 16-token page
                // would read past the page); the wide tile only runs with whole-tile loads.
                pb: if bn == default.bn { default.pb } else { bn },
                splits,
                chunk,
                one_launch: false,
                occupancy,
                ..default
            };
            if !out.contains(&c) {
                out.push(c);
            }
        }
    };
    for want in [default.splits * 2, default.splits * 4, default.splits / 2] {
        push(default.bn, want, default.occupancy);
    }
    if wide && default.m <= 32 && default.pb == default.bn {
        for want in [default.splits, default.splits * 2] {
            push(WIDE_KEY_TILE, want, 0);
        }
    }
    // The default's grid at the other occupancy where it does not split, and two blocks per SM at
    // twice and four times the splits where the default runs one.
    let other = if default.occupancy == 0 { OCCUPANCY } else { 0 };
    if default.splits == 1 {
        push(default.bn, 1, other);
    }
    if other == OCCUPANCY {
        for want in [default.splits * 2, default.splits * 4] {
            push(default.bn, want, OCCUPANCY);
        }
    }
    let twins: Vec<DecodeConfig> = out
        .iter()
        .filter(|c| c.splits > 1)
        .map(|c| DecodeConfig {
            one_launch: true,
            ..*c
        })
        .collect();
    for t in twins {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}
