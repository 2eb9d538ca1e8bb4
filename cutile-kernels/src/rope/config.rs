//! The RoPE tile per head dimension: `DP` = the power of two ≥ `D` (16..=512), `BM` tokens so a block
//! holds about 2048 lanes (fewer when the call has fewer tokens); for the full-rotary pair kernels the
//! `BM × HB × HP` tile and the candidates the tuner may time.

use crate::op::tuning::Candidate;
use crate::op::{OpError, ceil_div};

/// One configuration of the per-head kernel: `BM` tokens × `DP` lanes of one head per block, and the
/// grid order: token tiles fastest (the default), or with `heads_fastest` the heads of one token tile
/// on adjacent blocks (a run-time argument of the same kernel; see [`PairsConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RopeConfig {
    pub bm: i64,
    pub dp: i64,
    #[serde(default)]
    pub heads_fastest: bool,
}

impl Candidate for RopeConfig {
    fn name(&self) -> String {
        format!(
            "BM={} DP={}{}",
            self.bm,
            self.dp,
            if self.heads_fastest {
                " heads-fastest"
            } else {
                ""
            }
        )
    }
}

/// The per-head kernel's candidates for the tuner: [`choose`]'s, then (unless the call is
/// decode-sized, one token per block) the same tile in the heads-fastest order.
pub fn candidates(op: &'static str, tokens: i64, d: i64) -> Result<Vec<RopeConfig>, OpError> {
    let default = choose(op, tokens, d)?;
    let mut all = vec![default];
    if default.bm > 1 {
        all.push(RopeConfig {
            heads_fastest: true,
            ..default
        });
    }
    Ok(all)
}

/// The tuning class of a per-head (partial-rotary) call: element type, style and default tile.
pub fn head_class(
    dtype: cutile_ir::ScalarType,
    style: super::RopeStyle,
    cfg: &RopeConfig,
) -> String {
    format!("{dtype} {style:?} per-head {}", cfg.name())
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
    Ok(RopeConfig {
        bm,
        dp,
        heads_fastest: false,
    })
}

/// The full-rotary (`rot = D`) kernels' tile: `BM` tokens × `HB` heads × `HP` pairs per block, and
/// the order of the grid: with `heads_fastest` (the default since session 26) the head groups of one
/// token tile on adjacent blocks, else token tiles fastest (a run-time argument of the same kernel).
/// In the heads-fastest order the blocks resident together read and write one contiguous stretch of
/// q (and k); token tiles fastest, they take one head group's 2 KB out of every token's 8 KB over a
/// stretch four times as long. H100 (session 26, bf16 NeoX T 16384, 32 + 8 heads, D 128): 122.6 µs
/// against 133.0 in one tuner run; the bench at 92% of the measured copy bandwidth, 85% before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PairsConfig {
    pub bm: i64,
    pub hb: i64,
    pub hp: i64,
    pub heads_fastest: bool,
}

impl PairsConfig {
    /// A tile in the default (heads-fastest) order.
    pub const fn tile(bm: i64, hb: i64, hp: i64) -> PairsConfig {
        PairsConfig {
            bm,
            hb,
            hp,
            heads_fastest: true,
        }
    }

    /// Whether the tile is one of [`PAIRS_TILES`] (so has a kernel), in either order.
    pub fn has_kernel(&self) -> bool {
        PAIRS_TILES
            .iter()
            .any(|t| (t.bm, t.hb, t.hp) == (self.bm, self.hb, self.hp))
    }
}

impl Candidate for PairsConfig {
    fn name(&self) -> String {
        format!(
            "BM={} HB={} HP={}{}",
            self.bm,
            self.hb,
            self.hp,
            if self.heads_fastest {
                ""
            } else {
                " tokens-fastest"
            }
        )
    }
}

/// Heads per full-rotary block of the default tile.
pub const PAIRS_HB: i64 = 8;

/// Pairs per block of the default full-rotary tile (prefill-sized calls): one token of 8 heads at D 64
/// and D 128. 256 since session 30 (512 before, 2048 before session 19). Smaller tiles won every time
/// they were timed: on the H200 (session 19) GPT-J D 64 T 300 ran 6.21 µs at 512 pairs, 9.06 at 1024,
/// 11.90 at 2048, and 4.78 at one token per block (256 pairs); NeoX D 128 T 16384 99.42 / 100.48 /
/// 102.51 µs at 512 / 1024 / 2048 (registers grow with the tile: 4096 pairs took 203 µs). On an H100
/// (session 30, with the one-gather GPT-J kernel) f16 GPT-J D 64 T 32768 ran 124.9 µs at 256 pairs
/// against 223.1 at 512. `docs/h200-results.md`, sessions 19 and 30.
pub const PAIRS_PER_BLOCK: i64 = 256;

/// The tuner's alternatives to the default full-rotary tile, as (pairs per block, `HB`): twice, four
/// and eight times the default's pairs at `HB` 8, and twice and four times its pairs at `HB` 4 (fewer
/// heads, more tokens per block).
pub const PAIRS_ALTERNATIVES: &[(i64, i64)] =
    &[(512, 8), (1024, 8), (2048, 8), (512, 4), (1024, 4)];

/// Calls `$m!(ARGS.. [(BM, HB, HP), ..])` with every full-rotary tile that has a kernel: the one list
/// [`PAIRS_TILES`] and `mod.rs`'s kernel dispatch are both generated from. Per `HP` (1..=256): the
/// default ([`PAIRS_PER_BLOCK`] pairs at `HB` 8), one token at `HB` 8 (decode), then
/// [`PAIRS_ALTERNATIVES`] where they give at least one token.
macro_rules! pairs_tiles {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)* [
            (32, 8, 1), (1, 8, 1), (64, 8, 1), (128, 8, 1), (256, 8, 1), (128, 4, 1), (256, 4, 1),
            (16, 8, 2), (1, 8, 2), (32, 8, 2), (64, 8, 2), (128, 8, 2), (64, 4, 2), (128, 4, 2),
            (8, 8, 4), (1, 8, 4), (16, 8, 4), (32, 8, 4), (64, 8, 4), (32, 4, 4), (64, 4, 4),
            (4, 8, 8), (1, 8, 8), (8, 8, 8), (16, 8, 8), (32, 8, 8), (16, 4, 8), (32, 4, 8),
            (2, 8, 16), (1, 8, 16), (4, 8, 16), (8, 8, 16), (16, 8, 16), (8, 4, 16), (16, 4, 16),
            (1, 8, 32), (2, 8, 32), (4, 8, 32), (8, 8, 32), (4, 4, 32), (8, 4, 32),
            (1, 8, 64), (2, 8, 64), (4, 8, 64), (2, 4, 64), (4, 4, 64),
            (1, 8, 128), (2, 8, 128), (1, 4, 128), (2, 4, 128),
            (1, 8, 256), (1, 4, 256),
        ])
    };
}
pub(crate) use pairs_tiles;

macro_rules! tile_list {
    ([$(($bm:literal, $hb:literal, $hp:literal)),* $(,)?]) => {
        &[$(PairsConfig::tile($bm, $hb, $hp)),*]
    };
}

/// Every full-rotary tile the pair kernels are instantiated for (the crate's `pairs_tiles!` list).
pub const PAIRS_TILES: &[PairsConfig] = pairs_tiles!(tile_list!());

/// `HP` (the power of two ≥ `d/2`) and the default's tokens per block, [`PAIRS_PER_BLOCK`] pairs at
/// [`PAIRS_HB`] heads.
fn pairs_shape(d: i64) -> (i64, i64) {
    let hp = ((d / 2).max(1) as u64).next_power_of_two() as i64;
    (hp, (PAIRS_PER_BLOCK / (PAIRS_HB * hp)).max(1))
}

/// Whether a call of `tokens` tokens is decode-sized for a default of `full` tokens per block: fewer
/// than eight blocks of `max(full, 4)` tokens (so fewer than 32 tokens wherever the default is one to
/// four tokens, as at D ≥ 64). It then takes one token per block (more blocks, no masked rows), is not
/// tuned, and is a tuning class of its own.
fn decode_sized(tokens: i64, full: i64) -> bool {
    tokens < full.max(4) * 8
}

/// The full-rotary tile for `tokens` tokens of head dimension `d` (even, 2..=[`MAX_D`]): `HP` the power
/// of two ≥ `d/2`, [`PAIRS_HB`] heads and `BM` tokens so a block holds about [`PAIRS_PER_BLOCK`] pairs
/// (one token per block for decode-sized calls).
pub fn choose_pairs(tokens: i64, d: i64) -> PairsConfig {
    let (hp, full) = pairs_shape(d);
    let bm = if decode_sized(tokens, full) { 1 } else { full };
    PairsConfig::tile(bm, PAIRS_HB, hp)
}

/// The full-rotary tiles the tuner may time, [`choose_pairs`]'s first: for a call that is not
/// decode-sized, the default in the tokens-fastest order, then each of [`PAIRS_ALTERNATIVES`] that
/// gives a whole number of tokens per block and leaves at least eight blocks of tokens (the default's
/// own rule). A decode-sized call has only its default.
pub fn pairs_candidates(tokens: i64, d: i64) -> Vec<PairsConfig> {
    let (hp, full) = pairs_shape(d);
    let default = choose_pairs(tokens, d);
    let mut all = vec![default];
    if decode_sized(tokens, full) {
        return all;
    }
    all.push(PairsConfig {
        heads_fastest: false,
        ..default
    });
    for &(pairs, hb) in PAIRS_ALTERNATIVES {
        let bm = pairs / (hb * hp);
        let c = PairsConfig::tile(bm, hb, hp);
        // At least eight blocks of tokens, the default's own rule.
        if bm >= 1 && bm * hb * hp == pairs && tokens >= bm * 8 && !all.contains(&c) {
            all.push(c);
        }
    }
    all
}

/// Blocks per SM the default full-rotary grid keeps where the call allows: below it
/// [`choose_pairs_on`] shrinks the tile. On the H200 (session 19) GPT-J D 64 T 300 (2 head groups)
/// took 4.78 µs with one token per block (600 blocks) against 6.21 with the 512-pair tile's two (300
/// blocks, 2.3 per SM).
pub const MIN_BLOCKS_PER_SM: i64 = 4;

/// NeoX's prefill tile at `HP` 64 (D 128): 4 tokens × 4 heads, where the grid keeps
/// [`MIN_BLOCKS_PER_SM`] blocks per SM. Every tuner run of the NeoX D 128 prefill class picked it, on
/// two shapes and both cards: H200 T 16384 32 + 8 heads 93.44 against 100.22 µs (87% against 81% of
/// copy; session 29: 88% against 84%), 64 + 8 heads 165.98 against 174.78; H100 1.04× (sessions 26 and
/// 30). GPT-J takes [`GPTJ_PREFILL_PAIRS`] instead.
pub const NEOX_PREFILL_TILE: PairsConfig = PairsConfig::tile(4, 4, 64);

/// Pairs per block of GPT-J's prefill tile (at [`PAIRS_HB`] heads): since session 31 the GPT-J kernel
/// reads each row's pair lanes as one contiguous run, so a block of 512 pairs gives each of its 128
/// threads one 16-byte load and store of x (one token of 8 heads at D 128, as the default; two at
/// D 64). Session 31's H100 tuner, same call: f16 D 64 T 32768 95.70 µs at 2 tokens against 117.04
/// at one (the 1024-pair tiles 94.4–94.5); at D 128 T 4096 one token stays (29.10 against 29.26 at
/// two).
pub const GPTJ_PREFILL_PAIRS: i64 = 512;

/// [`choose_pairs`] for a call of `style` with `hq` + `hk` heads on `sms` SMs: NeoX's
/// [`NEOX_PREFILL_TILE`] where it applies, GPT-J's [`GPTJ_PREFILL_PAIRS`] for a call that is not
/// decode-sized, then the tile's `BM` halved, through listed tiles only and down to one token, while
/// the grid would hold fewer than [`MIN_BLOCKS_PER_SM`] blocks per SM.
pub fn choose_pairs_on(
    tokens: i64,
    d: i64,
    hq: i64,
    hk: i64,
    sms: i64,
    style: super::RopeStyle,
) -> PairsConfig {
    let mut c = choose_pairs(tokens, d);
    let n = NEOX_PREFILL_TILE;
    let n_groups = ceil_div(hq, n.hb) + ceil_div(hk, n.hb);
    if style == super::RopeStyle::Neox
        && c.hp == n.hp
        && !decode_sized(tokens, c.bm)
        && tokens >= 8 * n.bm
        && ceil_div(tokens, n.bm) * n_groups >= MIN_BLOCKS_PER_SM * sms
    {
        return n;
    }
    if style == super::RopeStyle::Gptj && !decode_sized(tokens, c.bm) {
        let g = PairsConfig::tile((GPTJ_PREFILL_PAIRS / (c.hb * c.hp)).max(1), c.hb, c.hp);
        if g.has_kernel() {
            c = g;
        }
    }
    let groups = ceil_div(hq, c.hb) + ceil_div(hk, c.hb);
    while c.bm > 1 && ceil_div(tokens, c.bm) * groups < MIN_BLOCKS_PER_SM * sms {
        let half = PairsConfig { bm: c.bm / 2, ..c };
        if !half.has_kernel() {
            break;
        }
        c = half;
    }
    c
}

/// [`pairs_candidates`] with [`choose_pairs_on`]'s tile first ([`choose_pairs`]'s, when it differs,
/// stays a candidate).
pub fn pairs_candidates_on(
    tokens: i64,
    d: i64,
    hq: i64,
    hk: i64,
    sms: i64,
    style: super::RopeStyle,
) -> Vec<PairsConfig> {
    let mut all = pairs_candidates(tokens, d);
    let first = choose_pairs_on(tokens, d, hq, hk, sms, style);
    all.retain(|c| *c != first);
    all.insert(0, first);
    all
}

/// The tuning class of a full-rotary call: element type, style, [`choose_pairs`]'s tile (the
/// style-independent base, not [`choose_pairs_on`]'s pick, so the class names and the tuning caches
/// keyed by them stay as they were when NeoX's default became [`NEOX_PREFILL_TILE`]) and whether the
/// call is decode-sized (at `HP ≥ 64` that tile is one token either way, and decode- and
/// prefill-sized calls are still tuned apart).
pub fn pairs_class(
    dtype: cutile_ir::ScalarType,
    style: super::RopeStyle,
    tokens: i64,
    d: i64,
) -> String {
    let (_, full) = pairs_shape(d);
    let size = if decode_sized(tokens, full) {
        "decode"
    } else {
        "prefill"
    };
    format!(
        "{dtype} {style:?} {} {size}",
        choose_pairs(tokens, d).name()
    )
}
