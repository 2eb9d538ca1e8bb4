//! CPU references of the norm family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference of RMSNorm over the rows (length `cols`) of a row-major matrix, in f64, rows in parallel.
pub fn rms_norm_reference(x: &[f32], w: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    use rayon::prelude::*;
    let mut out = vec![0f32; x.len()];
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols)
        .zip(x.par_chunks(cols))
        .for_each(|(y, row)| {
            let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            let inv = 1.0 / (ms + eps as f64).sqrt();
            for ((o, &v), &g) in y.iter_mut().zip(row).zip(w) {
                *o = (v as f64 * inv * g as f64) as f32;
            }
        });
    out
}

/// CPU reference of LayerNorm (biased variance) over the rows (length `cols`) of a row-major matrix, in
/// f64 with a two-pass variance, rows in parallel.
pub fn layer_norm_reference(x: &[f32], w: &[f32], b: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    use rayon::prelude::*;
    let mut out = vec![0f32; x.len()];
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols)
        .zip(x.par_chunks(cols))
        .for_each(|(y, row)| {
            let n = cols as f64;
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            let inv = 1.0 / (var + eps as f64).sqrt();
            for (((o, &v), &g), &c) in y.iter_mut().zip(row).zip(w).zip(b) {
                *o = ((v as f64 - mean) * inv * g as f64 + c as f64) as f32;
            }
        });
    out
}
