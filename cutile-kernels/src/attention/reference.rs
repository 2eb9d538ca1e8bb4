//! CPU references of the attention family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference of attention over `[slices, seq, d]` row-major arrays (`slices` = batch·heads), f64
/// math, slices and query rows in parallel. Causal masking aligns queries and keys at position 0.
#[allow(clippy::too_many_arguments)]
pub fn attention_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    sq: usize,
    sk: usize,
    d: usize,
    scale: f32,
    causal: bool,
) -> Vec<f32> {
    use rayon::prelude::*;
    let mut out = vec![0f32; q.len()];
    if sq == 0 || d == 0 {
        return out;
    }
    out.par_chunks_mut(d)
        .zip(q.par_chunks(d))
        .enumerate()
        .for_each(|(row, (o, qi))| {
            let (slice, i) = (row / sq, row % sq);
            let kk = &k[slice * sk * d..(slice + 1) * sk * d];
            let vv = &v[slice * sk * d..(slice + 1) * sk * d];
            let limit = if causal { (i + 1).min(sk) } else { sk };
            let scores: Vec<f64> = kk
                .chunks(d)
                .take(limit)
                .map(|kj| {
                    let dot: f64 = qi.iter().zip(kj).map(|(&a, &b)| a as f64 * b as f64).sum();
                    dot * scale as f64
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            let mut acc = vec![0f64; d];
            for (w, vj) in e.iter().zip(vv.chunks(d)) {
                for (a, &x) in acc.iter_mut().zip(vj) {
                    *a += w / z * x as f64;
                }
            }
            for (x, a) in o.iter_mut().zip(acc) {
                *x = a as f32;
            }
        });
    out
}
