//! Attention tile sizes: 64 query rows by 128 key rows with occupancy 2, for D = 64 and 128 (cuTile's
//! 128x128 tiles spill at occupancy 2 on sm_90; 64x128 does not, 559 against 337 TF/s, anchors.md).

use crate::op::tuning::Candidate;

/// Head dimensions with a kernel.
pub const HEAD_DIMS: &[i64] = &[64, 128];

/// An attention configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionConfig {
    pub bm: i64,
    pub bn: i64,
}

impl Candidate for AttentionConfig {
    fn name(&self) -> String {
        format!("flash_attention BM={} BN={}", self.bm, self.bn)
    }
}

/// The configuration for head dimension `d`.
pub fn choose(d: i64) -> AttentionConfig {
    let _ = d;
    AttentionConfig { bm: 64, bn: 128 }
}

/// Tiles of the backward kernels (`attention_backward`): `delta_bm` query rows per block of the
/// `delta` pass; `dkdv_bm` query rows by `dkdv_bn` key rows in the dK/dV kernel (two f32 `BN x D`
/// accumulators per block, so the key tile is kept at 64); `dq_bm` by `dq_bn` in the dQ kernel. Not
/// yet tuned on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BackwardConfig {
    pub delta_bm: i64,
    pub dkdv_bm: i64,
    pub dkdv_bn: i64,
    pub dq_bm: i64,
    pub dq_bn: i64,
}

impl Candidate for BackwardConfig {
    fn name(&self) -> String {
        format!(
            "attention_backward dKdV {}x{} dQ {}x{}",
            self.dkdv_bm, self.dkdv_bn, self.dq_bm, self.dq_bn
        )
    }
}

/// The backward configuration for head dimension `d`.
pub fn choose_backward(d: i64) -> BackwardConfig {
    let _ = d;
    BackwardConfig {
        delta_bm: 64,
        dkdv_bm: 64,
        dkdv_bn: 64,
        dq_bm: 64,
        dq_bn: 64,
    }
}
