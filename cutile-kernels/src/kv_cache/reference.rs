//! CPU reference of the KV-cache write: it writes into caller-owned cache copies, so a test can check
//! that entries no token addresses keep their old values.

/// Where each token goes.
#[derive(Debug, Clone, Copy)]
pub enum Index<'a> {
    /// `[B, Hkv, S, D]` caches: token `t` goes to `(batch[t], :, pos[t], :)`.
    Contiguous { batch: &'a [i64], pos: &'a [i64] },
    /// `[num_blocks, block_size, Hkv, D]` caches: token `t` goes to slot `slot[t]`.
    Paged { slot: &'a [i64] },
}

/// Writes `k`, `v` (`[T, hkv, d]` row-major) into `k_cache`, `v_cache` (row-major, layout by `index`,
/// `dims` = `(B, S)` or `(num_blocks, block_size)`). Tokens whose slot is negative or past the cache, or
/// whose batch or position is outside it, are skipped.
#[allow(clippy::too_many_arguments)]
pub fn write(
    k: &[f32],
    v: &[f32],
    hkv: usize,
    d: usize,
    index: Index<'_>,
    dims: (usize, usize),
    k_cache: &mut [f32],
    v_cache: &mut [f32],
) {
    let tokens = k.len().checked_div(hkv * d).unwrap_or(0);
    let (n0, n1) = (dims.0 as i64, dims.1 as i64);
    for t in 0..tokens {
        // The element offset of (token t, head h, lane 0) in the cache, or None to skip.
        let at: Box<dyn Fn(usize) -> usize> = match index {
            Index::Contiguous { batch, pos } => {
                let (b, p) = (batch[t], pos[t]);
                if b < 0 || b >= n0 || p < 0 || p >= n1 {
                    continue;
                }
                let (b, p) = (b as usize, p as usize);
                Box::new(move |h| ((b * hkv + h) * dims.1 + p) * d)
            }
            Index::Paged { slot } => {
                let s = slot[t];
                if s < 0 || s >= n0 * n1 {
                    continue;
                }
                let s = s as usize;
                Box::new(move |h| (s * hkv + h) * d)
            }
        };
        for h in 0..hkv {
            let src = (t * hkv + h) * d;
            let dst = at(h);
            k_cache[dst..dst + d].copy_from_slice(&k[src..src + d]);
            v_cache[dst..dst + d].copy_from_slice(&v[src..src + d]);
        }
    }
}
