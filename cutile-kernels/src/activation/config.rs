//! Which `TM x BN` tile an activation call gets: the default table per (element type, row length, arch)
//! and the candidates the tuner may time.
//!
//! Every activation is memory-bound: a block reads one tile per input and writes one per output, so
//! the tile only has to be wide enough to keep the memory system busy (a few KiB per operand in flight
//! per block) and narrow enough not to waste loads on padding. The rules below are measured on the H200 only where
//! [`tile_elems`] says so; the candidate list lets `CUTILE_TUNE=on` find better ones per device.

use cutile_ir::ScalarType;

use super::{Activation, OpSpec};
use crate::op::Target;
use crate::op::tuning::Candidate;
use cutile::toolchain::GpuArch;

/// A tile: `tm` rows of `bn` columns (both powers of two), moved by view loads and stores or, with
/// `gather`, by masked pointer gathers and scatters (the kernels' `GATHER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActConfig {
    pub tm: i64,
    pub bn: i64,
    pub gather: bool,
}

impl Candidate for ActConfig {
    fn name(&self) -> String {
        let form = if self.gather { " gather" } else { "" };
        format!("TM={} BN={}{form}", self.tm, self.bn)
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

/// Elements per tile of the default for a `rows x cols` view, on every arch, from the H200 tuner
/// (sessions 14 and 15, 2026-12-04; `docs/activation.md`). Large tiles make tileiras unroll further
/// (f16 SiLU at 8192 elements: 178-222 registers against 106-127 for bf16 and for f16 GELU), small
/// ones give more blocks:
/// - Forward SiLU, 16-bit: one row of 1024 for one-row views, and in f16 for rows of at least 1024
///   (`silu_and_mul` f16 `[4096, 2048]`: 10.0 µs at `1 x 1024`, 12.4 at `1 x 2048`, 13.5 at `4 x
///   1024`, 20.4-39.0 with 8192-element tiles; `swiglu` bf16 `[16384, 8192]`: 207.5 at 1024, 227.6
///   at 8192, 232.4 at 2048; an occupancy hint of 4 did not help: 14.0 µs).
/// - Other one-row views (contiguous unary and pair calls, viewed as one long row): 2048, except the
///   16-bit backward kernels of the smooth activations, which keep the budget of other views.
///   bf16 `[16384, 8192]`: `relu_backward` 212.7 µs against 402.8 at 8192, `gelu` 160.9 against
///   173.1, `relu` 129.3 against 137.7 at 4096; f32 `[4096, 2048]` `gelu_backward` 26.2 against
///   30.1 at 4096. But `gelu_backward` bf16 `[16384, 8192]` ran 302.4 µs at 2048 against 210.5 at
///   8192, `gelu_tanh_backward` 297.5 against 254.0, `swiglu_backward` 472.9 against 358.0.
/// - Other views: 16 KiB of f16/bf16 (8192 elements) on the archs with the TMA and large shared
///   memory (sm_90, sm_100), 4096 elements elsewhere and for f32 (the same 16 KiB), and 4096 for
///   forward f16 SiLU on rows under 1024 (`[4096, 2048]`: 13.4-15.7 µs with 4096-element tiles) and
///   forward ReLU (bf16 `[16384, 8192]` as rows: 139.3 µs at `1 x 4096` against 171.2 at `1 x
///   8192`; both session 14). bf16 `silu_and_mul` keeps 8192 (`[4096, 2048]`: 10.1 µs at `8 x 1024`,
///   9.8 at `1 x 1024`; `[16384, 8192]`: 103.3 at `2 x 4096`, 106.4 at `1 x 1024`).
pub fn tile_elems(target: &Target, spec: &OpSpec, dtype: ScalarType, rows: i64, cols: i64) -> i64 {
    let big = matches!(target.arch, GpuArch::Sm90 | GpuArch::Sm100 | GpuArch::Sm103);
    let sixteen = dtype != ScalarType::F32;
    let silu_fwd = !spec.backward && spec.act == Activation::Silu;
    let silu_f16 = silu_fwd && dtype == ScalarType::F16;
    let one_row = rows <= 1;
    if silu_fwd && sixteen && (one_row || (silu_f16 && cols >= 1024)) {
        return 1024;
    }
    let smooth_grad = spec.backward && sixteen && spec.act != Activation::Relu;
    if one_row && !smooth_grad {
        return 2048;
    }
    let relu_fwd = !spec.backward && spec.act == Activation::Relu;
    if big && sixteen && !relu_fwd && !silu_f16 {
        8192
    } else {
        4096
    }
}

/// Elements per tile of the gather form's default ([`choose`]).
pub const GATHER_ELEMS: i64 = 1024;

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

/// The tuning/shape class of a call: element type, row-length bucket (the default tile width), and
/// the access form.
pub fn class(
    target: &Target,
    spec: &OpSpec,
    dtype: ScalarType,
    rows: i64,
    cols: i64,
    aligned: bool,
) -> String {
    let c = choose(target, spec, dtype, rows, cols, aligned);
    format!("{dtype} {}", c.name().to_lowercase())
}

/// The default for a `rows x cols` view: unless every view is `aligned` (rows and starts on 16-byte
/// boundaries), the gather form with the best tile of at most [`GATHER_ELEMS`] elements; else view
/// access with the best tile of at most [`tile_elems`] elements.
///
/// Both choices for unaligned views are measured on the H200 (tuner, 2026-12-04,
/// `docs/activation.md`). At an unaligned row stride tileiras lowers a view load to scalar loads in
/// nested bounds-check branches, against one guarded load per element for the gather; bf16 `[1000,
/// 1026]` (`N` = 513): `silu_and_mul` 6.1-8.2 µs gathered against 10.0-22.4 as views, its backward
/// 7.7-11.4 against 13.8-30.4. Gathered, one row of 1024 won on each of the 8 calls timed (`[1000,
/// 1026]` and `[3, 7, 66]`, bf16, f16 and f32, `silu_and_mul`, its backward and `geglu`): 3.7-6.2 µs
/// against 5.0-9.2 for the best 4096-element tile.
pub fn choose(
    target: &Target,
    spec: &OpSpec,
    dtype: ScalarType,
    rows: i64,
    cols: i64,
    aligned: bool,
) -> ActConfig {
    let elems = if aligned {
        tile_elems(target, spec, dtype, rows, cols)
    } else {
        GATHER_ELEMS
    };
    let (tm, bn) = best(rows, cols, elems).unwrap_or((1, 4096));
    ActConfig {
        tm,
        bn,
        gather: !aligned,
    }
}

/// The default first, then every listed tile with at least a quarter of its useful elements per tile
/// and every one-row tile of at most 2048; an unaligned call also tries each tile in the other access
/// form.
pub fn candidates(
    target: &Target,
    spec: &OpSpec,
    dtype: ScalarType,
    rows: i64,
    cols: i64,
    aligned: bool,
) -> Vec<ActConfig> {
    let default = choose(target, spec, dtype, rows, cols, aligned);
    let floor = useful(rows, cols, (default.tm, default.bn)) / 4;
    let max_tm = (rows.max(1) as u64).next_power_of_two() as i64;
    let forms: &[bool] = if aligned { &[false] } else { &[true, false] };
    let mut all = vec![default];
    for &gather in forms {
        for &(tm, bn) in TILES {
            let c = ActConfig { tm, bn, gather };
            // One-row tiles whatever their useful share: the small tiles won on most calls measured.
            let one_row = tm == 1 && bn <= 2048;
            if c != default && tm <= max_tm && (one_row || useful(rows, cols, (tm, bn)) >= floor) {
                all.push(c);
            }
        }
    }
    all
}
