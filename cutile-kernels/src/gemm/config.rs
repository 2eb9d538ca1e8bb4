//! Which GEMM kernel and tiles a call gets: the default table (measured on an H200: the persistent
//! 128x128x64 kernel reached cuBLAS at 4096³, 749 against 747 TF/s) and the tuner's candidates.
//! Shape class: (element type, M, N and K each bucketed by powers of two).

use cutile_ir::ScalarType;

use crate::op::Target;
use crate::op::ceil_div;
use crate::op::tuning::Candidate;

/// A GEMM configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// Persistent (grid = SM count, tile loop inside) or one output tile per block.
    pub persistent: bool,
    pub bm: i64,
    pub bn: i64,
    pub bk: i64,
}

impl Candidate for GemmConfig {
    fn name(&self) -> String {
        format!(
            "{} {}x{}x{}",
            if self.persistent {
                "gemm_persistent"
            } else {
                "gemm"
            },
            self.bm,
            self.bn,
            self.bk
        )
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
/// block (8192³: x1.06 over persistent). f32 (tf32) operands take half the K depth, so a stage holds
/// the same bytes as a 16-bit one.
pub fn choose(target: &Target, dtype: ScalarType, m: i64, n: i64) -> GemmConfig {
    let tiles = ceil_div(m, 128) * ceil_div(n, 128);
    let sms = target.sm_count as i64;
    let (persistent, bm) = if tiles < sms {
        (false, 64)
    } else if tiles <= 16 * sms {
        (true, 128)
    } else {
        (false, 128)
    };
    GemmConfig {
        persistent,
        bm,
        bn: 128,
        bk: depth(dtype),
    }
}

/// The K depth of a stage: 64 elements of 16 bits, 32 of f32.
fn depth(dtype: ScalarType) -> i64 {
    if dtype == ScalarType::F32 { 32 } else { 64 }
}

/// Every configuration, the default first.
pub fn candidates(target: &Target, dtype: ScalarType, m: i64, n: i64) -> Vec<GemmConfig> {
    let mut all = vec![choose(target, dtype, m, n)];
    for persistent in [false, true] {
        for (bm, bn) in [(128, 128), (64, 128)] {
            all.push(GemmConfig {
                persistent,
                bm,
                bn,
                bk: depth(dtype),
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}
