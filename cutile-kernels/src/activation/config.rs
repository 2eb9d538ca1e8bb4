//! Which `TM x BN` tile an activation call gets: the default table per (element type, row length, arch)
//! and the candidates the tuner may time.
//!
//! Every activation is memory-bound: a block reads one tile per input and writes one per output, so
//! the tile only has to be wide enough to keep the memory system busy (a few KiB per operand in flight
//! per block) and narrow enough not to waste loads on padding. The rules below are not yet measured on a
//! GPU; the candidate list lets `CUTILE_TUNE=on` find better ones per device.

use cutile_ir::ScalarType;

use crate::op::Target;
use crate::op::tuning::Candidate;
use cutile::toolchain::GpuArch;

/// A tile: `tm` rows of `bn` columns (both powers of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActConfig {
    pub tm: i64,
    pub bn: i64,
}

impl Candidate for ActConfig {
    fn name(&self) -> String {
        format!("TM={} BN={}", self.tm, self.bn)
    }
}

/// The tiles the kernels are instantiated for (`mod.rs` dispatches exactly these): column widths from
/// 64 to 8192, at 4096 or 8192 elements per tile.
pub const TILES: &[(i64, i64)] = &[
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

/// Elements per tile of the default: 16 KiB of f16/bf16 (8192 elements) on the archs with the TMA and
/// large shared memory (sm_90, sm_100), 4096 elements elsewhere and for f32 (the same 16 KiB).
pub fn tile_elems(target: &Target, dtype: ScalarType) -> i64 {
    let big = matches!(target.arch, GpuArch::Sm90 | GpuArch::Sm100 | GpuArch::Sm103);
    if big && dtype != ScalarType::F32 {
        8192
    } else {
        4096
    }
}

/// The listed tile of `elems` elements whose width is closest to `cols` from above (the narrowest one
/// holding a whole row), else the widest; never more rows than the call has (rounded up to a power of
/// two), so a single long row takes `1 x BN` tiles.
fn tile_for(rows: i64, cols: i64, elems: i64) -> Option<ActConfig> {
    let max_tm = (rows.max(1) as u64).next_power_of_two() as i64;
    let fits = |&&(tm, bn): &&(i64, i64)| tm * bn == elems && tm <= max_tm;
    TILES
        .iter()
        .filter(fits)
        .find(|&&(_, bn)| bn >= cols)
        .or_else(|| TILES.iter().rfind(fits))
        .map(|&(tm, bn)| ActConfig { tm, bn })
}

/// The tuning/shape class of a call: element type, row-length bucket (the default tile width).
pub fn class(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> String {
    let c = choose(target, dtype, rows, cols);
    format!("{dtype} tm={} bn={}", c.tm, c.bn)
}

/// The default tile for rows of `cols` columns.
pub fn choose(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> ActConfig {
    tile_for(rows, cols, tile_elems(target, dtype))
        .or_else(|| tile_for(rows, cols, 4096))
        .unwrap_or(ActConfig { tm: 1, bn: 4096 })
}

/// The default first, then every listed tile no wider than it (wider ones only pad).
pub fn candidates(target: &Target, dtype: ScalarType, rows: i64, cols: i64) -> Vec<ActConfig> {
    let default = choose(target, dtype, rows, cols);
    let max_tm = (rows.max(1) as u64).next_power_of_two() as i64;
    let mut all = vec![default];
    for &(tm, bn) in TILES {
        let c = ActConfig { tm, bn };
        if c != default && bn <= default.bn && tm <= max_tm {
            all.push(c);
        }
    }
    all
}
