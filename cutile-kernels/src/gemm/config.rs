//! Which GEMM kernel and tiles a call gets: the default table (measured on an H200: the persistent
//! 128x128x64 kernel reached cuBLAS at 4096³, 749 against 747 TF/s) and the tuner's candidates.
//! Shape class: (element type, M, N and K each bucketed by powers of two).

use cutile_ir::ScalarType;

use crate::op::Target;
use crate::op::ceil_div;
use crate::op::tuning::Candidate;
use cutile::toolchain::GpuArch;

/// A GEMM configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// Persistent (grid = SM count, tile loop inside) or one output tile per block.
    pub persistent: bool,
    pub bm: i64,
    pub bn: i64,
    pub bk: i64,
    /// Tile rows per band of the grouped tile order (the plain product's kernels; 1: row-major).
    pub group: i64,
    /// Worker warps per block (`num_worker_warps_per_cta`; 4 is tileiras's default).
    pub workers: i32,
    /// Blocks per SM tileiras sizes registers and pipeline stages for (the `occupancy` hint; 0 leaves
    /// tileiras's default).
    pub occupancy: i32,
    /// CTAs per cluster (the `num_cta_in_cga` hint; 1: none). At 2 tileiras splits each tile over a
    /// pair of CTAs on neighbouring SMs, which load the operand they share once for both (TMA
    /// multicast; `.reqnctapercluster 2` and `.blocksareclusters` in the sm_90 PTX of tileiras
    /// 13.5.37), so a block of the grid is a cluster: a persistent grid is `SMs / cga` blocks.
    pub cga: i32,
}

/// Tile rows per band of the plain product's grouped tile order by default (Triton's `GROUP_M`): a
/// wave of 132 blocks then spans 8 row panels of `a` and about 17 column panels of `b` (49 MB at
/// `8192³` bf16, within the H200's 50 MB L2), instead of every row panel of `a` (the previous
/// one-tile-per-block order went down whole tile columns: 128 MB per wave at `8192³`).
pub const GROUP: i64 = 8;

impl Candidate for GemmConfig {
    fn name(&self) -> String {
        let mut name = format!(
            "{} {}x{}x{}",
            if self.persistent {
                "gemm_persistent"
            } else {
                "gemm"
            },
            self.bm,
            self.bn,
            self.bk
        );
        if self.group != GROUP {
            name += &format!(" g{}", self.group);
        }
        if self.workers != 4 {
            name += &format!(" w{}", self.workers);
        }
        if self.occupancy != 0 {
            name += &format!(" o{}", self.occupancy);
        }
        if self.cga > 1 {
            name += &format!(" c{}", self.cga);
        }
        name
    }
}

fn bucket(x: i64) -> u32 {
    64 - (x.max(1) as u64 - 1).leading_zeros()
}

/// The shape class of an `m x k` by `k x n` product.
pub fn class(dtype: ScalarType, m: i64, n: i64, k: i64) -> String {
    format!(
        "{dtype} m~2^{} n~2^{} k~2^{}",
        bucket(m),
        bucket(n),
        bucket(k)
    )
}

/// The default configuration, by the number of 128x128 output tiles per SM (H200 tuning runs,
/// docs/h200-results.md): fewer than one per SM → 64x128 tiles, one block each (more blocks: x1.5 at
/// 1000x1023x517); up to 16 per SM → persistent 128x128 (4096³: it won); more → one 128x128 tile per
/// block (8192³: x1.06 over persistent in session 2, x1.09 on 2026-12-02). f32 (tf32) operands take
/// half the K depth, so a stage holds the same bytes as a 16-bit one, and are never persistent (4096³:
/// one tile per block x1.97 over persistent, 2026-12-02).
pub fn choose(target: &Target, dtype: ScalarType, m: i64, n: i64) -> GemmConfig {
    let tiles = ceil_div(m, 128) * ceil_div(n, 128);
    let sms = target.sm_count as i64;
    let (persistent, bm) = if tiles < sms {
        (false, 64)
    } else if tiles <= 16 * sms {
        (dtype != ScalarType::F32, 128)
    } else {
        (false, 128)
    };
    GemmConfig {
        persistent,
        bm,
        bn: 128,
        bk: depth(dtype),
        group: GROUP,
        workers: 4,
        occupancy: 0,
        cga: 1,
    }
}

/// The plain product's configuration: [`choose`], except that a 16-bit product with more than 16
/// tiles per SM runs persistent 128x256 tiles over 8 worker warps. H200 tuner, 2026-12-03 (after the
/// persistent kernels' K-tile count moved out of the K loop): `8192³` bf16 1412 µs against 1485 one
/// 128x128 tile per block and 1442 persistent 128x128; `16384 x 4096 x 4096` 713 against 721 persistent
/// 128x128 and 764 one tile per block (earlier, without the K-loop fix, one tile per block won at
/// `8192³`). Wide products outside the plain op (the cross-entropy logits, N = V) keep [`choose`].
///
/// At most 32 rows (decode), 16-bit: 16- or 32-row tiles (the next of the two at or above `m`), 64
/// columns, 128 deep, one per block. H200 tuner, 2026-12-04: `16 x 8192 x 8192` bf16 38.4-40.7 µs
/// against 46.3-47.5 for the 64x128 tile (of which 48 rows are padding; the same kernel runs `64 x
/// 8192 x 8192` in 34.7), 38.6-41.3 for 16x64x64, 38.8-42.2 for 16x128x128; `32 x 8192 x 8192` 39.9
/// against 44.6, 40.5 for 32x64x64.
pub fn choose_product(target: &Target, dtype: ScalarType, m: i64, n: i64) -> GemmConfig {
    let mut cfg = choose_direct(target, dtype, m, n);
    if cfg.bm == 128 && !cfg.persistent && dtype != ScalarType::F32 {
        cfg.persistent = true;
        cfg.bn = 256;
        cfg.workers = 8;
    }
    cfg
}

/// The plain product's configuration (the `gemm` op): [`choose_product`], except that a 16-bit
/// product with at least a wave of 256x256 tiles over 2-CTA clusters (`ceil(m/256)·ceil(n/256) ≥
/// SMs/2`) runs them persistent, split over the cluster's CTAs (128x256 each, 8 worker warps; the
/// shared operand's loads multicast, [`GemmConfig::cga`]). H100 tuner, session 42
/// (`docs/gemm.md`, "Clusters"): 1.03–1.05x over [`choose_product`] at 4096³ and 8192³ (bf16 and
/// f16), `8192 x 4096 x 4096` and `16384 x 4096 x 4096`. Epilogue products keep [`choose_product`]:
/// their kernels take no clusters.
pub fn choose_plain(target: &Target, dtype: ScalarType, m: i64, n: i64) -> GemmConfig {
    let cfg = choose_product(target, dtype, m, n);
    let clusters = ceil_div(m, 256) * ceil_div(n, 256);
    // Measured on sm_90 only; sm_80 has no clusters (tileiras drops the hint, which would leave one
    // CTA a whole 256x256 tile and half the SMs idle).
    if target.arch == GpuArch::Sm90
        && cfg.persistent
        && dtype != ScalarType::F32
        && 2 * clusters >= target.sm_count as i64
    {
        return GemmConfig {
            bm: 256,
            bn: 256,
            workers: 8,
            cga: 2,
            ..cfg
        };
    }
    cfg
}

/// [`choose`], except that a 16-bit product of at most 32 rows (decode) runs 16- or 32-row tiles (the
/// next of the two at or above `m`), 64 columns, 128 deep, one per block (see [`choose_product`] for
/// the H200 figures). The single-launch schedule of every product with an epilogue as well.
pub fn choose_direct(target: &Target, dtype: ScalarType, m: i64, n: i64) -> GemmConfig {
    let cfg = choose(target, dtype, m, n);
    if m <= 32 && dtype != ScalarType::F32 {
        return GemmConfig {
            persistent: false,
            bm: if m <= 16 { 16 } else { 32 },
            bn: 64,
            bk: 128,
            ..cfg
        };
    }
    cfg
}

/// Where an epilogue product's residual goes (`gemm::epilogue::EpilogueSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResidualAt {
    /// No residual.
    None,
    /// The accumulator starts from it (a residual alone: `dsl::residual_in_accumulator`).
    Accumulator,
    /// Added after the product in registers of its own (after a bias or an activation).
    Apart,
}

/// The single-launch configuration of a product with an epilogue (`gemm::epilogue`): the plain
/// product's ([`choose_product`]: persistent 128x256 tiles over 8 worker warps where a 16-bit product
/// has more than 16 128x128 tiles per SM), except:
/// - a residual added apart: [`choose_direct`]'s (a 128x256 tile's f32 residual would need as many
///   registers again as its accumulator);
/// - a residual that starts the accumulator: 128x128 instead of 128x256 tiles, still persistent over
///   8 worker warps. From tileiras 13.5.37's sm_90 SASS: with the 128x256 tile and an accumulator
///   loaded before the K loop, every K step waits for its own `wgmma`s to finish (`WARPGROUP.DEPBAR.LE
///   gsb0, 0x0`) before the next is issued; at 128x128 over 8 warps the K loop keeps one step in
///   flight (`0x1`), as the zero-started 128x256 product does (`docs/toolchain-findings.md`).
pub fn choose_epilogue(
    target: &Target,
    dtype: ScalarType,
    m: i64,
    n: i64,
    residual: ResidualAt,
) -> GemmConfig {
    match residual {
        ResidualAt::Apart => choose_direct(target, dtype, m, n),
        ResidualAt::None => choose_product(target, dtype, m, n),
        ResidualAt::Accumulator => {
            let mut cfg = choose_product(target, dtype, m, n);
            if cfg.persistent && cfg.bn == 256 {
                cfg.bn = 128;
            }
            cfg
        }
    }
}

/// The K depth of a stage: 64 elements of 16 bits, 32 of f32.
fn depth(dtype: ScalarType) -> i64 {
    if dtype == ScalarType::F32 { 32 } else { 64 }
}

/// Every configuration, the plain product's default ([`choose_plain`]) first, then
/// [`choose_product`]. 64x64 tiles are for products with fewer 64x128 tiles than
/// SMs (decode shapes such as `16 x 8192 x 8192`: 64 blocks of 64x128 leave half of 132 SMs idle on a
/// bandwidth-bound product; 64x64 gives 128). Products with at least one 128x256 tile per SM also try
/// 128x256 tiles over 8 worker warps (two warpgroups share the 128x256 f32 accumulator, the form
/// cuBLAS's sm_90 bf16 kernels use, and the one fp8 won with) and 128x128 over 8 workers, and tiles
/// split over 2-CTA clusters (`cga` 2); the default's row-major order (`group` 1) is a candidate too.
pub fn candidates(target: &Target, dtype: ScalarType, m: i64, n: i64) -> Vec<GemmConfig> {
    let first = choose_plain(target, dtype, m, n);
    let mut all = vec![first, choose_product(target, dtype, m, n)];
    let narrow = ceil_div(m, 64) * ceil_div(n, 128) < target.sm_count as i64;
    let cfg = |persistent, bm, bn, workers| GemmConfig {
        persistent,
        bm,
        bn,
        bk: depth(dtype),
        group: GROUP,
        workers,
        occupancy: 0,
        cga: 1,
    };
    for persistent in [false, true] {
        for (bm, bn) in [(128, 128), (64, 128), (64, 64)] {
            if bn == 64 && !narrow {
                continue;
            }
            all.push(cfg(persistent, bm, bn, 4));
        }
    }
    let wide = ceil_div(m, 128) * ceil_div(n, 256) >= target.sm_count as i64;
    if wide && dtype != ScalarType::F32 {
        for persistent in [false, true] {
            all.push(cfg(persistent, 128, 256, 8));
            all.push(cfg(persistent, 128, 128, 8));
        }
    }
    if wide && dtype != ScalarType::F32 && target.arch.has_clusters() {
        // Tiles split over CTA pairs that share one operand's loads (cuBLAS's sm_90 kernels run
        // 2-CTA clusters; sm_80 has none): per CTA the 128x256 / 8-warp tile of the default,
        // 128x128, 64x256 and 64x128.
        let pair = |persistent, bm, bn, workers| GemmConfig {
            cga: 2,
            ..cfg(persistent, bm, bn, workers)
        };
        for persistent in [false, true] {
            all.push(pair(persistent, 256, 256, 8));
        }
        all.push(pair(true, 256, 128, 8));
        all.push(pair(true, 128, 256, 8));
        all.push(pair(true, 128, 128, 4));
    }
    // At most 32 rows: the default's 16- or 32-row tiles, 64 or 128 columns, 64 or 128 deep; at most
    // 16 rows also 32 columns (twice the blocks), and two blocks per SM (twice the loads in flight).
    if m <= 32 && dtype != ScalarType::F32 {
        let bm = first.bm;
        let small = |bn, bk, occupancy| GemmConfig {
            bk,
            occupancy,
            ..cfg(false, bm, bn, 4)
        };
        for bn in [64, 128] {
            for bk in [64, 128] {
                all.push(small(bn, bk, 0));
            }
        }
        if bm == 16 {
            all.push(small(32, 128, 0));
            for (bn, bk) in [(64, 128), (64, 64), (128, 128)] {
                all.push(small(bn, bk, 2));
            }
        }
    }
    all.push(GemmConfig { group: 1, ..first });
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
