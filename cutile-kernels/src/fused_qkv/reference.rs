//! CPU reference of the fused QKV projection, in f32 from the (already rounded) bf16/f16 inputs: what
//! the GPU tests, the examples and the runner compare against. It writes k and v into caller-owned
//! cache copies, so a test can check that entries no token addresses keep their old values.

use rayon::prelude::*;

/// How RoPE pairs lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RopeStyle {
    /// Half-split: lane `i` pairs with lane `i + rot/2` (GPT-NeoX, Llama).
    Neox,
    /// Interleaved: lane `2i` pairs with lane `2i + 1` (GPT-J).
    Gptj,
}

/// Where each token's k and v go, with the cache's extents (layouts as in the host API).
#[derive(Debug, Clone, Copy)]
pub enum CacheIndex<'a> {
    /// `[B, Hkv, S, D]` caches; token `t` goes to `(batch[t], :, pos[t], :)`.
    Contiguous {
        batch: &'a [i64],
        pos: &'a [i64],
        max_seq: usize,
    },
    /// `[num_blocks, block_size, Hkv, D]` caches; token `t` goes to slot `slot[t]` (−1: skipped).
    Paged { slot: &'a [i64], block_size: usize },
}

/// The inputs of one reference call, all f32 row-major.
#[derive(Debug, Clone, Copy)]
pub struct QkvReference<'a> {
    /// `[T, hidden]`.
    pub x: &'a [f32],
    /// `[hidden, N]`, `N = (hq + 2·hkv)·d`.
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub q_norm: Option<&'a [f32]>,
    pub k_norm: Option<&'a [f32]>,
    pub eps: f32,
    /// `[max_pos, rot/2]` each.
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub positions: &'a [i64],
    pub style: RopeStyle,
    pub rot: usize,
    pub hidden: usize,
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
}

/// RoPE of one head vector at `pos` (the first `rot` lanes; the rest pass through).
pub fn rope_reference(
    v: &mut [f32],
    cos: &[f32],
    sin: &[f32],
    pos: usize,
    rot: usize,
    style: RopeStyle,
) {
    let half = rot / 2;
    for i in 0..half {
        let (c, s) = (cos[pos * half + i], sin[pos * half + i]);
        let (a, b) = match style {
            RopeStyle::Neox => (i, i + half),
            RopeStyle::Gptj => (2 * i, 2 * i + 1),
        };
        let (x1, x2) = (v[a], v[b]);
        v[a] = x1 * c - x2 * s;
        v[b] = x2 * c + x1 * s;
    }
}

/// RMSNorm of one head vector with weight `w`.
pub fn rms_reference(v: &mut [f32], w: &[f32], eps: f32) {
    let ms = v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32;
    let inv = 1.0 / (ms + eps).sqrt();
    for (x, &g) in v.iter_mut().zip(w) {
        *x *= inv * g;
    }
}

/// The cache element offset of (token `t`'s entry, kv head `h`, lane 0), or `None` when the token is
/// skipped (slot −1) or addresses no entry. `entries`: batches (contiguous) or slots (paged).
pub fn cache_offset(
    index: &CacheIndex<'_>,
    t: usize,
    h: usize,
    hkv: usize,
    d: usize,
    entries: usize,
) -> Option<usize> {
    match *index {
        CacheIndex::Contiguous {
            batch,
            pos,
            max_seq,
        } => {
            let (b, p) = (
                usize::try_from(batch[t]).ok()?,
                usize::try_from(pos[t]).ok()?,
            );
            (p < max_seq && b < entries).then(|| ((b * hkv + h) * max_seq + p) * d)
        }
        CacheIndex::Paged { slot, .. } => {
            let s = usize::try_from(slot[t]).ok()?;
            (s < entries).then(|| (s * hkv + h) * d)
        }
    }
}

/// q `[T, hq, d]` of the call; k and v written into `k_cache` and `v_cache` (the cache layout of
/// `index`; entries no token addresses are left as they are).
pub fn fused_qkv_reference(
    r: &QkvReference<'_>,
    index: &CacheIndex<'_>,
    k_cache: &mut [f32],
    v_cache: &mut [f32],
) -> Vec<f32> {
    let (hq, hkv, d) = (r.hq, r.hkv, r.d);
    let n = (hq + 2 * hkv) * d;
    let t_count = r.positions.len();
    // One projected row per token, with bias, norm and RoPE applied per head.
    let rows: Vec<Vec<f32>> = (0..t_count)
        .into_par_iter()
        .map(|t| {
            let mut row = vec![0f32; n];
            let xr = &r.x[t * r.hidden..(t + 1) * r.hidden];
            for (p, &xv) in xr.iter().enumerate() {
                let wr = &r.w[p * n..(p + 1) * n];
                for (o, &wv) in row.iter_mut().zip(wr) {
                    *o += xv * wv;
                }
            }
            if let Some(b) = r.bias {
                for (o, &bv) in row.iter_mut().zip(b) {
                    *o += bv;
                }
            }
            let pos = r.positions[t] as usize;
            for h in 0..hq + hkv {
                let v = &mut row[h * d..(h + 1) * d];
                let w = if h < hq { r.q_norm } else { r.k_norm };
                if let Some(w) = w {
                    rms_reference(v, w, r.eps);
                }
                rope_reference(v, r.cos, r.sin, pos, r.rot, r.style);
            }
            row
        })
        .collect();
    let entries = match *index {
        CacheIndex::Contiguous { max_seq, .. } => k_cache.len() / (hkv * max_seq * d).max(1),
        CacheIndex::Paged { .. } => k_cache.len() / (hkv * d).max(1),
    };
    let mut q = vec![0f32; t_count * hq * d];
    for (t, row) in rows.iter().enumerate() {
        q[t * hq * d..(t + 1) * hq * d].copy_from_slice(&row[..hq * d]);
        for h in 0..hkv {
            if let Some(off) = cache_offset(index, t, h, hkv, d, entries) {
                let k = &row[(hq + h) * d..(hq + h + 1) * d];
                let v = &row[(hq + hkv + h) * d..(hq + hkv + h + 1) * d];
                k_cache[off..off + d].copy_from_slice(k);
                v_cache[off..off + d].copy_from_slice(v);
            }
        }
    }
    q
}
