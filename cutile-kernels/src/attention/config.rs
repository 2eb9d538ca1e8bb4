//! Attention tile sizes: 64 query rows by 128 key rows with occupancy 2, for D = 64 and 128 (cuTile's
//! 128x128 tiles spill at occupancy 2 on sm_90; 64x128 does not, 559 against 337 TF/s, anchors.md),
//! and the dense kernel's tuning candidates: 128-row tiles on two warpgroups (8 worker warps, one block
//! per SM), which share each key/value tile between 128 query rows.

use crate::op::Target;
use crate::op::tuning::Candidate;

/// Head dimensions with a kernel.
pub const HEAD_DIMS: &[i64] = &[64, 128];

/// Worker warps of the wide candidates (`num_worker_warps_per_cta`): two warpgroups of 64 query rows.
pub const WIDE_WORKERS: i32 = 8;

/// An attention configuration: `bm` query rows by `bn` key rows per step; `wide` runs the tile on
/// [`WIDE_WORKERS`] worker warps at occupancy 1 (else tileiras's default warps at occupancy 2);
/// `overlap` issues the next key tile's scores before this tile's softmax (the `_overlap` kernels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionConfig {
    pub bm: i64,
    pub bn: i64,
    pub wide: bool,
    pub overlap: bool,
    /// CTAs per cluster (`num_cta_in_cga`; 1: none): tileiras splits the `BM` query rows over that
    /// many CTAs, which share each key and value tile's load (TMA multicast); a block of the grid is
    /// a cluster (as `gemm::GemmConfig::cga`).
    pub cga: i64,
}

impl Candidate for AttentionConfig {
    fn name(&self) -> String {
        let w = if self.wide { " w8" } else { "" };
        let o = if self.overlap { " overlap" } else { "" };
        let c = if self.cga > 1 {
            format!(" c{}", self.cga)
        } else {
            String::new()
        };
        format!("flash_attention BM={} BN={}{w}{o}{c}", self.bm, self.bn)
    }
}

/// The configuration for head dimension `d`.
pub fn choose(d: i64) -> AttentionConfig {
    let _ = d;
    AttentionConfig {
        bm: 64,
        bn: 128,
        wide: false,
        overlap: false,
        cga: 1,
    }
}

/// The dense kernel's tuning candidates, the default first: 128 x 128 and 128 x 64 tiles on 8 worker
/// warps at occupancy 1 (sm_90 `ptxas`, tileiras 13.5.37, bf16 D 128: 168 registers and no local
/// memory for both, against 255 registers and 582 spill instructions for 128 x 128 on the default
/// warps; FlashAttention-3's layout of two consumer warpgroups). On the H200 both lost to the default
/// on every call the tuner timed (session 18: B4 H32 S4096 D128 1752 µs against 1932 and 2103,
/// causal 1028 against 1129 and 1203), so they stay candidates for other devices. Then the overlap
/// twins of the default and of the wide 128 x 128 tile (session 22): sm_90, bf16 D 128, 128 registers
/// and no local memory for 64 x 128 at occupancy 2, with 115,816 B of shared memory (against 83,040
/// without overlap: twice that plus the 1 KB each block reserves is 208 B over the SM's 228 KB, so
/// two blocks may not fit an SM); 168 registers, no local memory and 132,200 B for the wide tile (one
/// block per SM). On the H200 (session 23's tuner) both lost at B4 H32 S4096 D128: 1880 and 1993 µs
/// against the default's 1792, causal 1088 and 1234 against 1048; at the small calls the 64 x 128
/// twin came within 1-2% either way (e.g. f16 B2 H8 777 causal 25.7 against 26.2 µs). Last, 128
/// query rows over a 2-CTA cluster (` c2`), on sm_90 and later only (sm_80 has no clusters: tileiras
/// drops the hint and the 128-row block would run as one CTA with the default's warps).
pub fn candidates(target: &Target, d: i64) -> Vec<AttentionConfig> {
    let wide = |bm, bn| AttentionConfig {
        bm,
        bn,
        wide: true,
        overlap: false,
        cga: 1,
    };
    let overlap = |c: AttentionConfig| AttentionConfig { overlap: true, ..c };
    // 128 query rows split over a 2-CTA cluster: per CTA the default's 64 x 128 tile on one
    // warpgroup, each key and value tile loaded once for both CTAs (session 42).
    let pair = AttentionConfig {
        bm: 128,
        cga: 2,
        ..choose(d)
    };
    let mut all = vec![
        choose(d),
        wide(128, 128),
        wide(128, 64),
        overlap(choose(d)),
        overlap(wide(128, 128)),
    ];
    if target.arch.has_clusters() {
        all.push(pair);
    }
    all
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
