//! CPU references of MLA, f64 math on the host: the absorbed decode over a contiguous or paged latent
//! cache (same visibility rule as the kernels: query `i` of `Sq` sees keys `0 ..= len − Sq + i`, a
//! query that sees no key gives zeros and LSE −inf) and the prefill (`D_qk` 192, `D_v` 128, causal
//! top-left or not).

use super::{LATENT, PREFILL_QK, PREFILL_V, ROW};

/// A latent cache in host memory (row-major, f32 values, rows of 576 = latent 512 + rope 64).
#[derive(Debug, Clone, Copy)]
pub enum LatentCacheRef<'a> {
    /// `[B, S_max, 576]`.
    Contiguous { c: &'a [f32], s_max: usize },
    /// `[blocks, block_size, 576]`, `block_table: [B, max_blocks]`.
    Paged {
        c: &'a [f32],
        block_size: usize,
        block_table: &'a [i32],
        max_blocks: usize,
    },
}

impl LatentCacheRef<'_> {
    /// Keys per sequence the cache holds.
    pub fn capacity(&self) -> usize {
        match *self {
            LatentCacheRef::Contiguous { s_max, .. } => s_max,
            LatentCacheRef::Paged {
                block_size,
                max_blocks,
                ..
            } => block_size * max_blocks,
        }
    }

    /// Row `p` of sequence `b` (576 values); NaNs when the block table names a block outside the
    /// cache.
    pub fn row(&self, b: usize, p: usize) -> Vec<f32> {
        let w = ROW as usize;
        let at = match *self {
            LatentCacheRef::Contiguous { c, s_max } => Some((c, (b * s_max + p) * w)),
            LatentCacheRef::Paged {
                c,
                block_size,
                block_table,
                max_blocks,
            } => usize::try_from(block_table[b * max_blocks + p / block_size])
                .ok()
                .map(|blk| (c, (blk * block_size + p % block_size) * w))
                .filter(|(c, o)| o + w <= c.len()),
        };
        match at {
            Some((c, o)) => c[o..o + w].to_vec(),
            None => vec![f32::NAN; w],
        }
    }
}

/// One query against `keys` (rows of `dk`), values the first `dv` columns of `vals` rows of width
/// `vw`: output `[dv]` and natural-log LSE (zeros and −inf without keys).
#[allow(clippy::too_many_arguments)]
fn attend(
    q: &[f32],
    keys: &[f32],
    dk: usize,
    vals: &[f32],
    vw: usize,
    dv: usize,
    n: usize,
    scale: f64,
) -> (Vec<f32>, f32) {
    if n == 0 {
        return (vec![0.0; dv], f32::NEG_INFINITY);
    }
    let s: Vec<f64> = (0..n)
        .map(|j| {
            q.iter()
                .zip(&keys[j * dk..(j + 1) * dk])
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>()
                * scale
        })
        .collect();
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = e.iter().sum();
    let mut acc = vec![0f64; dv];
    for (j, w) in e.iter().enumerate() {
        for (a, &x) in acc.iter_mut().zip(&vals[j * vw..j * vw + dv]) {
            *a += w * x as f64;
        }
    }
    (
        acc.iter().map(|a| (a / z) as f32).collect(),
        (m + z.ln()) as f32,
    )
}

/// Absorbed MLA decode on the CPU: `q: [B, H, Sq, 576]` row-major, `seq_lens: [B]` (clamped to `[0,
/// capacity]`). Returns `o: [B, H, Sq, 512]` (softmax-weighted latent rows) and the LSE `[B, H, Sq]`.
pub fn mla_decode_reference(
    q: &[f32],
    cache: &LatentCacheRef,
    seq_lens: &[i32],
    b: usize,
    h: usize,
    sq: usize,
    scale: f32,
) -> (Vec<f32>, Vec<f32>) {
    use rayon::prelude::*;
    let (w, dc) = (ROW as usize, LATENT as usize);
    let mut out = vec![0f32; b * h * sq * dc];
    let mut lse = vec![f32::NEG_INFINITY; b * h * sq];
    if h == 0 || sq == 0 {
        return (out, lse);
    }
    out.par_chunks_mut(h * sq * dc)
        .zip(lse.par_chunks_mut(h * sq))
        .enumerate()
        .for_each(|(bi, (o, l))| {
            let len = (seq_lens[bi].max(0) as usize).min(cache.capacity());
            let rows: Vec<f32> = (0..len).flat_map(|p| cache.row(bi, p)).collect();
            for r in 0..h * sq {
                let i = r % sq;
                let visible = (len + i + 1).saturating_sub(sq);
                let qr = &q[(bi * h * sq + r) * w..(bi * h * sq + r + 1) * w];
                let (oi, li) = attend(qr, &rows, w, &rows, w, dc, visible, scale as f64);
                o[r * dc..(r + 1) * dc].copy_from_slice(&oi);
                l[r] = li;
            }
        });
    (out, lse)
}

/// MLA prefill on the CPU: `q: [B, H, S, 192]`, `k: [B, Hkv, S_k, 192]`, `v: [B, Hkv, S_k, 128]`
/// row-major. Returns `o: [B, H, S, 128]` and the LSE `[B, H, S]`; causal is top-left.
#[allow(clippy::too_many_arguments)]
pub fn mla_prefill_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    b: usize,
    h: usize,
    hkv: usize,
    s: usize,
    sk: usize,
    causal: bool,
    scale: f32,
) -> (Vec<f32>, Vec<f32>) {
    use rayon::prelude::*;
    let (dk, dv) = (PREFILL_QK as usize, PREFILL_V as usize);
    let mut out = vec![0f32; b * h * s * dv];
    let mut lse = vec![f32::NEG_INFINITY; b * h * s];
    if s == 0 || h == 0 {
        return (out, lse);
    }
    let group = (h / hkv.max(1)).max(1);
    out.par_chunks_mut(s * dv)
        .zip(lse.par_chunks_mut(s))
        .enumerate()
        .for_each(|(bh, (o, l))| {
            let (bi, hi) = (bh / h, bh % h);
            let kv = bi * hkv + hi / group;
            let keys = &k[kv * sk * dk..(kv + 1) * sk * dk];
            let vals = &v[kv * sk * dv..(kv + 1) * sk * dv];
            for i in 0..s {
                let n = if causal { (i + 1).min(sk) } else { sk };
                let qi = &q[(bh * s + i) * dk..(bh * s + i + 1) * dk];
                let (oi, li) = attend(qi, keys, dk, vals, dv, dv, n, scale as f64);
                o[i * dv..(i + 1) * dv].copy_from_slice(&oi);
                l[i] = li;
            }
        });
    (out, lse)
}
