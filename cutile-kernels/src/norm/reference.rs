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

/// `v` rounded to the element type `dtype` (f16 or bf16; f32 and others unchanged).
pub fn round_to(dtype: cutile_ir::ScalarType, v: f32) -> f32 {
    match dtype {
        cutile_ir::ScalarType::F16 => half::f16::from_f32(v).to_f32(),
        cutile_ir::ScalarType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// CPU reference of the fused residual add + RMSNorm: `(h, y)` with `h = x + r` rounded to `dtype` (the
/// storage type, as the kernels store it) and `y` the RMSNorm of that rounded `h` (in f64).
pub fn add_rms_norm_reference(
    x: &[f32],
    r: &[f32],
    w: &[f32],
    eps: f32,
    cols: usize,
    dtype: cutile_ir::ScalarType,
) -> (Vec<f32>, Vec<f32>) {
    let h: Vec<f32> = x
        .iter()
        .zip(r)
        .map(|(&a, &b)| round_to(dtype, a + b))
        .collect();
    let y = rms_norm_reference(&h, w, eps, cols);
    (h, y)
}

/// CPU reference of the per-head RMSNorm over contiguous `[T, H, D]` data: RMSNorm of every `d`-long
/// head vector with the shared weight `w` (`d` long) — RMSNorm over rows of length `d`.
pub fn rms_norm_heads_reference(x: &[f32], w: &[f32], eps: f32, d: usize) -> Vec<f32> {
    rms_norm_reference(x, w, eps, d)
}

/// CPU reference of LayerNorm with statistics: `(y, mean, rstd)`, `mean` and `rstd = 1 / sqrt(var +
/// eps)` (biased variance, f64 two-pass) one per row.
pub fn layer_norm_stats_reference(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    eps: f32,
    cols: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let y = layer_norm_reference(x, w, b, eps, cols);
    if cols == 0 {
        return (y, Vec::new(), Vec::new());
    }
    let (mean, rstd) = x
        .chunks(cols)
        .map(|row| {
            let n = cols as f64;
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            (mean as f32, (1.0 / (var + eps as f64).sqrt()) as f32)
        })
        .unzip();
    (y, mean, rstd)
}
