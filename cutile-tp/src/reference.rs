//! The block on the CPU, in f32 from bf16-rounded inputs, built from the catalog's CPU references:
//! `h1 = x + o_proj(attention(rope(qkv(x))))`, `y = h1 + down(silu(gate(h1)) · up(h1))` (one causal
//! sequence, NeoX RoPE over the full head, no norms). It always runs through a [`ShardPlan`]: each
//! rank's row-parallel partial product, then their sum (what the all-reduce does), so the unsharded
//! block is the plan with one rank and the sharding math is checked by comparing plans.

use cutile_kernels::activation::{Activation, reference::gated_reference};
use cutile_kernels::attention::reference::attention_reference;
use cutile_kernels::fused_qkv::{CacheIndex, QkvReference, RopeStyle, fused_qkv_reference};
use cutile_kernels::gemm::reference::gemm_reference;
use rayon::prelude::*;

use crate::shard::{self, BlockConfig, RankShard, ShardPlan};

/// The unsharded weights, row-major (layouts in [`crate::shard`]).
#[derive(Debug, Clone)]
pub struct BlockWeights {
    pub w_qkv: Vec<f32>,
    pub w_o: Vec<f32>,
    pub w_gate_up: Vec<f32>,
    pub w_down: Vec<f32>,
}

/// One rank's slices.
#[derive(Debug, Clone)]
pub struct RankWeights {
    pub w_qkv: Vec<f32>,
    pub w_o: Vec<f32>,
    pub w_gate_up: Vec<f32>,
    pub w_down: Vec<f32>,
}

impl BlockWeights {
    pub fn shard(&self, c: &BlockConfig, s: &RankShard) -> RankWeights {
        RankWeights {
            w_qkv: shard::qkv_weight(c, &self.w_qkv, s),
            w_o: shard::o_weight(c, &self.w_o, s),
            w_gate_up: shard::gate_up_weight(c, &self.w_gate_up, s),
            w_down: shard::down_weight(c, &self.w_down, s),
        }
    }
}

/// The block's inputs: `x: [T, hidden]`, the weights, the RoPE tables `[T, D/2]`.
#[derive(Debug, Clone)]
pub struct BlockInputs {
    pub x: Vec<f32>,
    pub weights: BlockWeights,
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
}

/// Rounds to bf16 (what the GPU stores between ops).
pub fn bf16_round(v: &mut [f32]) {
    v.par_iter_mut()
        .for_each(|x| *x = half::bf16::from_f32(*x).to_f32());
}

fn uniform(n: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).into_par_iter().map(|_| 0.0).collect();
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(i, c)| {
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9) ^ i as u64);
        for x in c {
            *x = (rng.f32() * 2.0 - 1.0) * scale;
        }
    });
    bf16_round(&mut v);
    v
}

impl BlockInputs {
    /// Random bf16-exact inputs; weights scaled by `1/sqrt(fan_in)` so activations stay O(1).
    pub fn random(c: &BlockConfig, seed: u64) -> BlockInputs {
        let s = |fan_in: usize| 1.0 / (fan_in as f32).sqrt();
        let (cos, sin) = cutile_kernels::rope::reference::cos_sin_cache(c.tokens, c.d, 10000.0);
        BlockInputs {
            x: uniform(c.tokens * c.hidden, 1.0, seed),
            weights: BlockWeights {
                w_qkv: uniform(c.hidden * c.qkv_cols(), s(c.hidden), seed + 1),
                w_o: uniform(c.hq * c.d * c.hidden, s(c.hq * c.d), seed + 2),
                w_gate_up: uniform(c.hidden * 2 * c.ffn, s(c.hidden), seed + 3),
                w_down: uniform(c.ffn * c.hidden, s(c.ffn), seed + 4),
            },
            cos,
            sin,
        }
    }
}

/// What the reference returns (all `[T, hidden]`).
#[derive(Debug, Clone)]
pub struct BlockOutput {
    /// The all-reduced attention output projection.
    pub attn: Vec<f32>,
    pub h1: Vec<f32>,
    pub y: Vec<f32>,
}

fn maybe_round(mut v: Vec<f32>, round: bool) -> Vec<f32> {
    if round {
        bf16_round(&mut v);
    }
    v
}

/// One rank's attention partial: `o_r · w_o_r` (`[T, hidden]`), from `x` and the rank's slices; `rc`
/// is the rank's config ([`shard::rank_config`]).
pub fn attention_partial(
    rc: &BlockConfig,
    x: &[f32],
    w: &RankWeights,
    cos: &[f32],
    sin: &[f32],
    round: bool,
) -> Vec<f32> {
    let (t, d, hq, hkv) = (rc.tokens, rc.d, rc.hq, rc.hkv);
    let positions: Vec<i64> = (0..t as i64).collect();
    let batch = vec![0i64; t];
    let r = QkvReference {
        x,
        w: &w.w_qkv,
        bias: None,
        q_norm: None,
        k_norm: None,
        eps: 0.0,
        cos,
        sin,
        positions: &positions,
        style: RopeStyle::Neox,
        rot: d,
        hidden: rc.hidden,
        hq,
        hkv,
        d,
    };
    let index = CacheIndex::Contiguous {
        batch: &batch,
        pos: &positions,
        max_seq: t,
    };
    let (mut kc, mut vc) = (vec![0f32; hkv * t * d], vec![0f32; hkv * t * d]);
    let q = maybe_round(fused_qkv_reference(&r, &index, &mut kc, &mut vc), round);
    let (kc, vc) = (maybe_round(kc, round), maybe_round(vc, round));
    // [T, hq, d] → [hq, T, d]; kv heads expanded per q head.
    let group = hq / hkv;
    let mut qh = vec![0f32; hq * t * d];
    let mut ke = vec![0f32; hq * t * d];
    let mut ve = vec![0f32; hq * t * d];
    for h in 0..hq {
        let kvh = h / group;
        for i in 0..t {
            let dst = (h * t + i) * d;
            qh[dst..dst + d].copy_from_slice(&q[(i * hq + h) * d..(i * hq + h + 1) * d]);
            let src = (kvh * t + i) * d;
            ke[dst..dst + d].copy_from_slice(&kc[src..src + d]);
            ve[dst..dst + d].copy_from_slice(&vc[src..src + d]);
        }
    }
    let scale = 1.0 / (d as f32).sqrt();
    let o = maybe_round(
        attention_reference(&qh, &ke, &ve, t, t, d, scale, true),
        round,
    );
    // [hq, T, d] → [T, hq·d].
    let mut ot = vec![0f32; t * hq * d];
    for h in 0..hq {
        for i in 0..t {
            let dst = (i * hq + h) * d;
            ot[dst..dst + d].copy_from_slice(&o[(h * t + i) * d..(h * t + i + 1) * d]);
        }
    }
    maybe_round(gemm_reference(&ot, &w.w_o, t, rc.hidden, hq * d), round)
}

/// One rank's MLP partial: `silu(h1 · gate_r) · (h1 · up_r) · w_down_r` (`[T, hidden]`).
pub fn mlp_partial(rc: &BlockConfig, h1: &[f32], w: &RankWeights, round: bool) -> Vec<f32> {
    let (t, f) = (rc.tokens, rc.ffn);
    let gu = maybe_round(gemm_reference(h1, &w.w_gate_up, t, 2 * f, rc.hidden), round);
    let a = maybe_round(gated_reference(Activation::Silu, &gu, f), round);
    maybe_round(gemm_reference(&a, &w.w_down, t, rc.hidden, f), round)
}

/// The sum of the ranks' partials (the all-reduce), rounded like the GPU's bf16 result.
pub fn all_reduce_sum(partials: &[Vec<f32>], round: bool) -> Vec<f32> {
    let mut out = partials.first().cloned().unwrap_or_default();
    for p in &partials[1.min(partials.len())..] {
        for (o, v) in out.iter_mut().zip(p) {
            *o += v;
        }
    }
    maybe_round(out, round)
}

fn add(a: &[f32], b: &[f32], round: bool) -> Vec<f32> {
    maybe_round(a.iter().zip(b).map(|(x, y)| x + y).collect(), round)
}

/// The block through `plan` (one rank: the unsharded block). `round`: bf16 after every op, as the GPU.
pub fn block_reference(plan: &ShardPlan, i: &BlockInputs, round: bool) -> BlockOutput {
    let c = &plan.config;
    let ws: Vec<RankWeights> = plan.ranks.iter().map(|s| i.weights.shard(c, s)).collect();
    let attn_parts: Vec<Vec<f32>> = plan
        .ranks
        .iter()
        .zip(&ws)
        .map(|(s, w)| attention_partial(&shard::rank_config(c, s), &i.x, w, &i.cos, &i.sin, round))
        .collect();
    let attn = all_reduce_sum(&attn_parts, round);
    let h1 = add(&i.x, &attn, round);
    let mlp_parts: Vec<Vec<f32>> = plan
        .ranks
        .iter()
        .zip(&ws)
        .map(|(s, w)| mlp_partial(&shard::rank_config(c, s), &h1, w, round))
        .collect();
    let m = all_reduce_sum(&mlp_parts, round);
    let y = add(&h1, &m, round);
    BlockOutput { attn, h1, y }
}

/// `max |a − b| / max(max |b|, 1e-6)`: the error measure of every comparison here.
pub fn rel_max_err(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let scale = b.iter().fold(0f64, |m, &x| m.max(x.abs() as f64)).max(1e-6);
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let e = (x as f64 - y as f64).abs();
            if e.is_nan() { f64::INFINITY } else { e }
        })
        .fold(0f64, f64::max)
        / scale
}
