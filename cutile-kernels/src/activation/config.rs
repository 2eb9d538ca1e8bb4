//! Which access form and `TM x BN` tile an activation call gets (the default, by the call's size
//! and row length) and the candidates the tuner may time.
//!
//! Every activation is memory-bound: a block reads one tile per input and writes one per output, so
//! the tile only has to be wide enough to keep the memory system busy (a few KiB per operand in flight
//! per block) and narrow enough not to waste loads on padding. The default ([`choose`]) is measured on
//! the H200; the candidate list lets `CUTILE_TUNE=on` find better ones per device, in both access
//! forms.

use cutile_ir::ScalarType;

use crate::op::Target;
use crate::op::tuning::Candidate;

/// A tile: `tm` rows of `bn` columns (both powers of two), moved by view loads and stores or, with
/// `gather`, by masked pointer gathers and scatters (the kernels' `GATHER`). `folded` picks the tanh
/// GELU forward's folded math (`dsl::GELU_TANH_FOLDED`: six f32 ops instead of ten, 16-bit outputs
/// only), a tuner candidate of those calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActConfig {
    pub tm: i64,
    pub bn: i64,
    pub gather: bool,
    pub folded: bool,
}

impl Candidate for ActConfig {
    fn name(&self) -> String {
        let form = if self.gather { " gather" } else { "" };
        let math = if self.folded { " folded" } else { "" };
        format!("TM={} BN={}{form}{math}", self.tm, self.bn)
    }
}

/// The tiles the kernels are instantiated for (`mod.rs` dispatches exactly these): column widths from
/// 64 to 8192, at 4096 or 8192 elements per tile, and one row of 1024 or 2048 (more blocks for a
/// mid-sized call viewed as one row).
pub const TILES: &[(i64, i64)] = &[
    (1, 1024),
    (1, 2048),
    (64, 64),
    (16, 256),
    (4, 1024),
    (8, 1024),
    (2, 2048),
    (4, 2048),
    (1, 4096),
    (2, 4096),
    (1, 8192),
];

/// Elements per tile of the default: one row of 2048 ...
pub const TILE_ELEMS: i64 = 2048;

/// ... or of 1024 for a call with fewer than [`TILE_ELEMS`] elements per SM, so that it still gives
/// every SM a block (or a tiny call two blocks instead of one).
pub const SMALL_TILE_ELEMS: i64 = 1024;

/// Useful (in-bounds) elements per tile of `(tm, bn)` on a `rows x cols` view, averaged over a row's
/// column tiles.
fn useful(rows: i64, cols: i64, (tm, bn): (i64, i64)) -> i64 {
    tm.min(rows.max(1)) * cols.max(1) / crate::op::ceil_div(cols.max(1), bn)
}

/// The listed tile of at most `elems` elements (and never more rows than the call has, rounded up to
/// a power of two) with the most useful elements per tile: wide enough to move a lot per block,
/// narrow enough not to load padding. Ties go to the smaller tile, then the wider one.
fn best(rows: i64, cols: i64, elems: i64) -> Option<(i64, i64)> {
    let max_tm = (rows.max(1) as u64).next_power_of_two() as i64;
    TILES
        .iter()
        .filter(|&&(tm, bn)| tm <= max_tm && tm * bn <= elems)
        .max_by_key(|&&(tm, bn)| (useful(rows, cols, (tm, bn)), -(tm * bn), bn))
        .copied()
}

/// The tuning/shape class of a call whose default is `default`: element type, the default tile, and
/// whether every view is aligned (which changes the kernels' layout facts and so their code).
pub fn class(default: &ActConfig, dtype: ScalarType, aligned: bool) -> String {
    let unaligned = if aligned { "" } else { " unaligned" };
    format!("{dtype} {}{unaligned}", default.name().to_lowercase())
}

/// The one-row tile of the tanh GELU forward on long rows ([`choose_long_rows`]).
pub const LONG_ROW_TILE: i64 = 8192;

/// Tiles of [`LONG_ROW_TILE`] per SM from which [`choose_long_rows`] takes them.
pub const LONG_ROW_TILES_PER_SM: i64 = 64;

/// [`choose`] for the tanh GELU forward with 16-bit elements: where [`choose`] gives one row of
/// [`TILE_ELEMS`], the (viewed) rows have at least [`LONG_ROW_TILE`] columns (a contiguous call is
/// viewed as one row) and the call makes at least [`LONG_ROW_TILES_PER_SM`] tiles of
/// [`LONG_ROW_TILE`] per SM, one row of [`LONG_ROW_TILE`] instead. Its ten f32 ops per element make
/// it the one activation whose loads wait on the math at 2048. On the H200 (session 18 tuner and
/// the bench of its pick, bf16): `[16384, 8192]` (124 tiles of 8192 per SM) took 129.4 µs at 8192
/// against 139.7 at 2048 (session 16: 129.2 against 135.4), while `[4096, 2048]` (8 per SM) took
/// 12.10 against 11.53 and `[1000, 1026]` 5.67 against 4.82; the threshold sits between the two
/// sizes, where it is not measured. Every other activation won or tied at 2048 or 1024 (session 16,
/// `docs/activation.md`).
pub fn choose_long_rows(target: &Target, rows: i64, cols: i64) -> ActConfig {
    let c = choose(target, rows, cols);
    let sms = (target.sm_count as i64).max(1);
    let tiles = rows.max(1).saturating_mul(cols.max(1)) / LONG_ROW_TILE;
    if (c.tm, c.bn) == (1, TILE_ELEMS)
        && cols >= LONG_ROW_TILE
        && tiles >= LONG_ROW_TILES_PER_SM * sms
    {
        ActConfig {
            bn: LONG_ROW_TILE,
            ..c
        }
    } else {
        c
    }
}

/// The default for a `rows x cols` view, aligned or not: the gather form, with the listed tile of at
/// most [`TILE_ELEMS`] elements ([`SMALL_TILE_ELEMS`] for small calls) that has the most useful
/// elements; on a large call where that tile would be more than half padding (rows under 1024
/// elements, as strided row views may have), the best tile of up to 4096 elements, which has several
/// rows (not timed on the H200 in this form).
///
/// Why the gather form, from the sm_90 SASS (tileiras 13.5.37, `nvdisasm`): a view load is lowered
/// to a bounds-check branch per thread around its `LDG.E.128`, with the conversion to f32 sunk into
/// the branch, so a warp waits for one input's data before it issues the next input's load (and,
/// on rows of 2048 or more, for each of its own chunks in turn: the non-monotonic one-row timings of
/// session 15 in `docs/activation.md`). The gather form's loads are predicated instead: every 16-byte
/// load of every input (`@!P LDG.E.128`, the width coming from the layout facts) is in flight at
/// once, as in Triton's kernel. On the H200 (tuner, session 16, `docs/activation.md`) it won or tied
/// on every call timed, forward unary ops included: bf16 `[16384, 8192]` `swiglu` 183.2 µs against
/// 205.6 for the best view tile, `gelu_backward` 185.7 against 210.2, `gelu_tanh` 135.4 at 2048
/// against 139.7 (129.2 at 8192), `relu` 126.4 against 125.7; unaligned rows as before (the view
/// form lowers them to scalar loads in nested branches).
pub fn choose(target: &Target, rows: i64, cols: i64) -> ActConfig {
    let sms = (target.sm_count as i64).max(1);
    let elems = if rows.max(1).saturating_mul(cols.max(1)) < TILE_ELEMS * sms {
        SMALL_TILE_ELEMS
    } else {
        TILE_ELEMS
    };
    let mut tile = best(rows, cols, elems).unwrap_or((1, elems));
    // Small calls keep the one-row tile even on short rows: there the block count matters more
    // (`[3, 7, 66]` halves, 21 rows of 33: 4.0 µs at `1 x 1024` against 5.8 at `16 x 256`).
    if elems == TILE_ELEMS && 2 * useful(rows, cols, tile) < tile.0 * tile.1 {
        tile = best(rows, cols, 4096).unwrap_or(tile);
    }
    ActConfig {
        tm: tile.0,
        bn: tile.1,
        gather: true,
        folded: false,
    }
}

/// `default` first, then every listed tile with at least a quarter of its useful elements per tile
/// and every one-row tile of at most 2048, in both access forms.
pub fn candidates(default: ActConfig, rows: i64, cols: i64) -> Vec<ActConfig> {
    let floor = useful(rows, cols, (default.tm, default.bn)) / 4;
    let max_tm = (rows.max(1) as u64).next_power_of_two() as i64;
    let forms = [default.gather, !default.gather];
    let mut all = vec![default];
    for gather in forms {
        for &(tm, bn) in TILES {
            let c = ActConfig {
                tm,
                bn,
                gather,
                folded: false,
            };
            // One-row tiles whatever their useful share: the small tiles won on most calls measured.
            let one_row = tm == 1 && bn <= 2048;
            if c != default && tm <= max_tm && (one_row || useful(rows, cols, (tm, bn)) >= floor) {
                all.push(c);
            }
        }
    }
    all
}
