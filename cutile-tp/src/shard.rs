//! The sharding plan of the tensor-parallel block (Megatron-style) and the host-side weight slicing.
//!
//! Rank `r` of `n` owns the q heads `[r·Hq/n, (r+1)·Hq/n)`. KV heads are split the same way when `n`
//! divides `Hkv`; when `Hkv` divides `n` instead (more ranks than KV heads, as vLLM does), each rank
//! holds a replica of the one KV head its q heads read (`kv = r / (n/Hkv)`). The FFN's `F` columns are
//! split into `n` contiguous blocks. Layouts (row-major, `[in, out]` as the catalog's `gemm` takes
//! them):
//! - `w_qkv: [hidden, (Hq + 2·Hkv)·D]`, columns = q heads | k heads | v heads: column-parallel, the
//!   rank's slice is its q heads | its k heads | its v heads;
//! - `w_o: [Hq·D, hidden]`: row-parallel, the rows of the rank's q heads;
//! - `w_gate_up: [hidden, 2F]`, columns = gate | up: column-parallel, the rank's gate block | its up
//!   block (so `silu_and_mul` applies per rank);
//! - `w_down: [F, hidden]`: row-parallel, the rows of the rank's FFN block.
//!
//! A row-parallel layer's rank outputs are partial sums of the full output; their all-reduce (sum)
//! is the unsharded result.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::{Result, TpError};

/// The block's shape: `tokens` (one sequence, prefill, causal), `hidden`, `hq` / `hkv` heads of `d`
/// lanes, FFN width `ffn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockConfig {
    pub tokens: usize,
    pub hidden: usize,
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
    pub ffn: usize,
}

impl BlockConfig {
    /// A small shape whose CPU reference takes about a second (the correctness check).
    pub const SMALL: BlockConfig = BlockConfig {
        tokens: 128,
        hidden: 512,
        hq: 8,
        hkv: 2,
        d: 64,
        ffn: 1024,
    };
    /// A Llama-3-8B-like layer (the timing run).
    pub const LLAMA8B: BlockConfig = BlockConfig {
        tokens: 2048,
        hidden: 4096,
        hq: 32,
        hkv: 8,
        d: 128,
        ffn: 14336,
    };

    /// Columns of the fused QKV projection.
    pub fn qkv_cols(&self) -> usize {
        (self.hq + 2 * self.hkv) * self.d
    }

    /// Flops of one forward (matmuls and attention, causal half counted).
    pub fn flops(&self) -> f64 {
        let (t, h) = (self.tokens as f64, self.hidden as f64);
        let qkv = 2.0 * t * h * self.qkv_cols() as f64;
        let attn = 2.0 * 2.0 * t * t * (self.hq * self.d) as f64 / 2.0;
        let o = 2.0 * t * (self.hq * self.d) as f64 * h;
        let mlp = 2.0 * t * h * 3.0 * self.ffn as f64;
        qkv + attn + o + mlp
    }
}

/// What one rank owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankShard {
    pub rank: usize,
    pub q_heads: Range<usize>,
    pub kv_heads: Range<usize>,
    pub ffn_cols: Range<usize>,
}

impl RankShard {
    pub fn hq(&self) -> usize {
        self.q_heads.len()
    }
    pub fn hkv(&self) -> usize {
        self.kv_heads.len()
    }
    pub fn ffn(&self) -> usize {
        self.ffn_cols.len()
    }
}

/// The plan for `n` ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardPlan {
    pub config: BlockConfig,
    pub ranks: Vec<RankShard>,
    /// KV heads are replicated (`Hkv < n`).
    pub kv_replicated: bool,
}

impl ShardPlan {
    /// The plan, or [`TpError::Shard`] naming what does not divide.
    pub fn new(config: BlockConfig, n: usize) -> Result<ShardPlan> {
        let err = |what: String| TpError::Shard { ranks: n, what };
        let c = &config;
        if n == 0 {
            return Err(err("needs at least one rank".into()));
        }
        if c.hq == 0 || c.hkv == 0 || c.d == 0 || c.hidden == 0 || c.ffn == 0 {
            return Err(err(format!("every extent must be > 0: {c:?}")));
        }
        if !c.hq.is_multiple_of(c.hkv) {
            return Err(err(format!(
                "Hkv = {} must divide Hq = {} (grouped-query attention)",
                c.hkv, c.hq
            )));
        }
        if !c.hq.is_multiple_of(n) {
            return Err(err(format!("{n} rank(s) must divide the {} q heads", c.hq)));
        }
        let kv_replicated = !c.hkv.is_multiple_of(n);
        if kv_replicated && !n.is_multiple_of(c.hkv) {
            return Err(err(format!(
                "the {} KV heads must be divisible by the ranks, or divide them (replicated KV heads)",
                c.hkv
            )));
        }
        if !c.ffn.is_multiple_of(n) {
            return Err(err(format!(
                "{n} rank(s) must divide the FFN width {}",
                c.ffn
            )));
        }
        let (qn, fn_) = (c.hq / n, c.ffn / n);
        let ranks = (0..n)
            .map(|r| {
                let kv_heads = if kv_replicated {
                    let k = r / (n / c.hkv);
                    k..k + 1
                } else {
                    let kn = c.hkv / n;
                    r * kn..(r + 1) * kn
                };
                RankShard {
                    rank: r,
                    q_heads: r * qn..(r + 1) * qn,
                    kv_heads,
                    ffn_cols: r * fn_..(r + 1) * fn_,
                }
            })
            .collect();
        Ok(ShardPlan {
            config,
            ranks,
            kv_replicated,
        })
    }

    pub fn n(&self) -> usize {
        self.ranks.len()
    }
}

/// The KV head q head `h` reads (GQA).
pub fn kv_head_of(c: &BlockConfig, h: usize) -> usize {
    h / (c.hq / c.hkv)
}

/// The columns `ranges` of the row-major `[rows, cols]` matrix `m`, concatenated in order.
pub fn columns(m: &[f32], rows: usize, cols: usize, ranges: &[Range<usize>]) -> Vec<f32> {
    let width: usize = ranges.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(rows * width);
    for row in m.chunks(cols).take(rows) {
        for r in ranges {
            out.extend_from_slice(&row[r.clone()]);
        }
    }
    out
}

/// The rows `range` of the row-major matrix `m` with `cols` columns.
pub fn rows(m: &[f32], cols: usize, range: Range<usize>) -> Vec<f32> {
    m[range.start * cols..range.end * cols].to_vec()
}

fn scaled(r: &Range<usize>, by: usize, offset: usize) -> Range<usize> {
    offset + r.start * by..offset + r.end * by
}

/// The rank's column slice of `w_qkv` (`[hidden, (hq_r + 2·hkv_r)·D]`: its q | k | v heads).
pub fn qkv_weight(c: &BlockConfig, w: &[f32], s: &RankShard) -> Vec<f32> {
    let d = c.d;
    let ranges = [
        scaled(&s.q_heads, d, 0),
        scaled(&s.kv_heads, d, c.hq * d),
        scaled(&s.kv_heads, d, (c.hq + c.hkv) * d),
    ];
    columns(w, c.hidden, c.qkv_cols(), &ranges)
}

/// The rank's row slice of `w_o` (`[hq_r·D, hidden]`).
pub fn o_weight(c: &BlockConfig, w: &[f32], s: &RankShard) -> Vec<f32> {
    rows(w, c.hidden, scaled(&s.q_heads, c.d, 0))
}

/// The rank's column slice of `w_gate_up` (`[hidden, 2·F_r]`: its gate block | its up block).
pub fn gate_up_weight(c: &BlockConfig, w: &[f32], s: &RankShard) -> Vec<f32> {
    let ranges = [s.ffn_cols.clone(), scaled(&s.ffn_cols, 1, c.ffn)];
    columns(w, c.hidden, 2 * c.ffn, &ranges)
}

/// The rank's row slice of `w_down` (`[F_r, hidden]`).
pub fn down_weight(c: &BlockConfig, w: &[f32], s: &RankShard) -> Vec<f32> {
    rows(w, c.hidden, s.ffn_cols.clone())
}

/// The rank's view of the block: the same shape with its head and FFN counts.
pub fn rank_config(c: &BlockConfig, s: &RankShard) -> BlockConfig {
    BlockConfig {
        hq: s.hq(),
        hkv: s.hkv(),
        ffn: s.ffn(),
        ..*c
    }
}
