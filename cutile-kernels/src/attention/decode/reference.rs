//! CPU references of decode attention, f64 math on the host: both cache layouts, gathered into the
//! keys of each sequence and attended with the same visibility rule as the kernels (query `i` of `Sq`
//! sees keys `0 ..= len − Sq + i`; a query that sees no key gives zeros and LSE −inf).

/// A KV cache in host memory (row-major, f32 values).
#[derive(Debug, Clone, Copy)]
pub enum CacheRef<'a> {
    /// `k`, `v`: `[B, Hkv, S_max, D]`.
    Contiguous {
        k: &'a [f32],
        v: &'a [f32],
        hkv: usize,
        s_max: usize,
    },
    /// `k`, `v`: `[blocks, block_size, Hkv, D]`, `block_table: [B, max_blocks]`.
    Paged {
        k: &'a [f32],
        v: &'a [f32],
        hkv: usize,
        block_size: usize,
        block_table: &'a [i32],
        max_blocks: usize,
    },
}

impl CacheRef<'_> {
    fn hkv(&self) -> usize {
        match *self {
            CacheRef::Contiguous { hkv, .. } | CacheRef::Paged { hkv, .. } => hkv,
        }
    }

    /// Keys per sequence the cache holds.
    pub fn capacity(&self) -> usize {
        match *self {
            CacheRef::Contiguous { s_max, .. } => s_max,
            CacheRef::Paged {
                block_size,
                max_blocks,
                ..
            } => block_size * max_blocks,
        }
    }

    /// Element offset of key `p` of KV head `h` of sequence `b` (row of `d` values), `None` when the
    /// block table names a block outside the cache.
    fn row(&self, b: usize, h: usize, p: usize, d: usize) -> Option<usize> {
        match *self {
            CacheRef::Contiguous { hkv, s_max, .. } => Some(((b * hkv + h) * s_max + p) * d),
            CacheRef::Paged {
                k,
                hkv,
                block_size,
                block_table,
                max_blocks,
                ..
            } => {
                let blk = usize::try_from(block_table[b * max_blocks + p / block_size]).ok()?;
                let off = ((blk * block_size + p % block_size) * hkv + h) * d;
                (off + d <= k.len()).then_some(off)
            }
        }
    }

    /// The keys and values `0..len` of KV head `h` of sequence `b`, each `[len, d]`.
    pub fn gather(&self, b: usize, h: usize, len: usize, d: usize) -> (Vec<f32>, Vec<f32>) {
        let (k, v) = match *self {
            CacheRef::Contiguous { k, v, .. } | CacheRef::Paged { k, v, .. } => (k, v),
        };
        let mut kk = Vec::with_capacity(len * d);
        let mut vv = Vec::with_capacity(len * d);
        for p in 0..len {
            match self.row(b, h, p, d) {
                Some(o) => {
                    kk.extend_from_slice(&k[o..o + d]);
                    vv.extend_from_slice(&v[o..o + d]);
                }
                None => {
                    kk.extend(std::iter::repeat_n(f32::NAN, d));
                    vv.extend(std::iter::repeat_n(f32::NAN, d));
                }
            }
        }
        (kk, vv)
    }
}

/// Decode attention on the CPU: `q: [B, Hq, Sq, D]` row-major, `seq_lens: [B]` (clamped to
/// `[0, capacity]`, as the kernels do). Returns `o: [B, Hq, Sq, D]` and the natural-log LSE of the
/// scaled scores `[B, Hq, Sq]`.
#[allow(clippy::too_many_arguments)]
pub fn decode_reference(
    q: &[f32],
    cache: &CacheRef,
    seq_lens: &[i32],
    b: usize,
    hq: usize,
    sq: usize,
    d: usize,
    scale: f32,
) -> (Vec<f32>, Vec<f32>) {
    use rayon::prelude::*;
    let hkv = cache.hkv().max(1);
    let group = (hq / hkv).max(1);
    let mut out = vec![0f32; b * hq * sq * d];
    let mut lse = vec![f32::NEG_INFINITY; b * hq * sq];
    if d == 0 || sq == 0 {
        return (out, lse);
    }
    out.par_chunks_mut(hq * sq * d)
        .zip(lse.par_chunks_mut(hq * sq))
        .enumerate()
        .for_each(|(bi, (o, l))| {
            let len = (seq_lens[bi].max(0) as usize).min(cache.capacity());
            for h in 0..hq {
                let (kk, vv) = cache.gather(bi, h / group, len, d);
                for i in 0..sq {
                    // Query i sees keys 0 ..= len − sq + i.
                    let visible = (len + i + 1).saturating_sub(sq);
                    let row = (bi * hq + h) * sq + i;
                    let qi = &q[row * d..(row + 1) * d];
                    let (oi, li) = attend_row(qi, &kk, &vv, visible, d, scale);
                    o[(h * sq + i) * d..(h * sq + i + 1) * d].copy_from_slice(&oi);
                    l[h * sq + i] = li;
                }
            }
        });
    (out, lse)
}

/// One query against the first `n` of the keys `k` / values `v` (`[.., d]`): output and LSE.
fn attend_row(q: &[f32], k: &[f32], v: &[f32], n: usize, d: usize, scale: f32) -> (Vec<f32>, f32) {
    if n == 0 {
        return (vec![0.0; d], f32::NEG_INFINITY);
    }
    let s: Vec<f64> = k
        .chunks(d)
        .take(n)
        .map(|kj| {
            q.iter()
                .zip(kj)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>()
                * scale as f64
        })
        .collect();
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = e.iter().sum();
    let mut acc = vec![0f64; d];
    for (w, vj) in e.iter().zip(v.chunks(d)) {
        for (a, &x) in acc.iter_mut().zip(vj) {
            *a += w * x as f64;
        }
    }
    (
        acc.iter().map(|a| (a / z) as f32).collect(),
        (m + z.ln()) as f32,
    )
}
