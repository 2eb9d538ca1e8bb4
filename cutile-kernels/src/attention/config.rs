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
