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

/// Elements per tile of the default. 16 KiB of f16/bf16 (8192 elements) on the archs with the TMA and
/// large shared memory (sm_90, sm_100), 4096 elements elsewhere and for f32 (the same 16 KiB), except
/// two forward kernels measured on the H200 (tuner, 2026-12-04, `docs/activation.md`) that run
/// faster at 4096:
/// - ReLU, f16 and bf16: bf16 `[16384, 8192]` 139.3 µs at `1 x 4096` against 171.2 at `1 x 8192`
///   (f16 `[4096, 2048]` 11.7 against 14.5);
/// - SiLU in f16: `silu_and_mul` `[4096, 2048]` 13.4-15.7 µs with every 4096-element tile, 20.3-39.0
///   with every 8192-element one (bf16: 10.1 at `8 x 1024`); `swiglu` 23.7 against 38.9. tileiras
///   unrolls those f16 kernels one step further (178-222 registers against 106-127 for bf16 and f16
///   GELU, which stays fastest at 8192: `geglu` 11.1 µs against 14.5); an occupancy hint of 4 did not
///   beat the 4096-element tile (14.0 against 13.5 µs).
///
/// Backward kernels were not measured that way and keep the 8192-element budget.
pub fn tile_elems(target: &Target, spec: &OpSpec, dtype: ScalarType) -> i64 {
    let big = matches!(target.arch, GpuArch::Sm90 | GpuArch::Sm100 | GpuArch::Sm103);
    let measured_smaller = !spec.backward
        && match spec.act {
            Activation::Relu => true,
            Activation::Silu => dtype == ScalarType::F16,
            Activation::GeluErf | Activation::GeluTanh => false,
        };
    if big && dtype != ScalarType::F32 && !measured_smaller {
        8192
    } else {
        4096
    }
}

/// Elements per tile of the gather form's default ([`choose`]).
pub const GATHER_ELEMS: i64 = 4096;

/// Useful (in-bounds) elements per tile of `(tm, bn)` on a `rows x cols` view, averaged over a row's
/// column tiles.
fn useful(rows: i64, cols: i64, (tm, bn): (i64, i64)) -> i64 {
    tm.min(rows.max(1)) * cols.max(1) / crate::op::ceil_div(cols.max(1), bn)
}

/// The listed tile of at most `elems` elements (and never more rows than the call has, rounded up to
/// a power of two) with the most useful elements per tile: wide enough to move a lot per block,
/// narrow enough not to load padding. Ties go to the smaller tile, then the wider one.
fn best(rows: i64, cols: i64, elems: i64) -> Option<ActConfig> {
    let max_tm = (rows.max(1) as u64).next_power_of_two() as i64;
    TILES
        .iter()
        .filter(|&&(tm, bn)| tm <= max_tm && tm * bn <= elems)
        .max_by_key(|&&(tm, bn)| (useful(rows, cols, (tm, bn)), -(tm * bn), bn))
        .map(|&(tm, bn)| ActConfig {
            tm,
            bn,
            gather: false,
        })
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
/// Both choices for unaligned views are measured on the H200 (tuner, 2026-12-04, `docs/activation.md`). At an unaligned row stride
/// tileiras lowers a view load to scalar loads in nested bounds-check branches, against one guarded
/// load per element for the gather; bf16 `[1000, 1026]` (`N` = 513): `silu_and_mul` 6.1-8.2 µs
/// gathered against 10.0-22.4 as views, its backward 7.7-11.4 against 13.8-30.4. Gathered, the
/// 4096-element tiles beat the 8192-element ones (`silu_and_mul` 6.1-6.9 µs against 7.8-8.2,
/// backward 7.7-8.6 against 10.5-11.4).
pub fn choose(
    target: &Target,
    spec: &OpSpec,
    dtype: ScalarType,
    rows: i64,
    cols: i64,
    aligned: bool,
) -> ActConfig {
    let elems = if aligned {
        tile_elems(target, spec, dtype)
    } else {
        GATHER_ELEMS
    };
    let tile = best(rows, cols, elems).unwrap_or(ActConfig {
        tm: 1,
        bn: 4096,
        gather: false,
    });
    ActConfig {
        gather: !aligned,
        ..tile
    }
}

/// The default first, then every listed tile with at least a quarter of its useful elements per tile;
/// an unaligned call also tries each tile in the other access form.
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
            if c != default && tm <= max_tm && useful(rows, cols, (tm, bn)) >= floor {
                all.push(c);
            }
        }
    }
    all
}
