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

/// CPU reference of the RMSNorm backward over the rows (length `cols`) of row-major `x` and `dy`, in
/// f64: `(dx, dw)` for `y = x · rstd · w`, `rstd = 1 / sqrt(mean(x²) + eps)` recomputed per row:
/// `dx = rstd · (g - x̂ · mean(g · x̂))` with `g = dy · w`, `x̂ = x · rstd`, and `dw = Σ_rows dy · x̂`.
pub fn rms_norm_backward_reference(
    x: &[f32],
    w: &[f32],
    dy: &[f32],
    eps: f32,
    cols: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut dx = vec![0f32; x.len()];
    let mut dw = vec![0f64; cols];
    if cols == 0 {
        return (dx, Vec::new());
    }
    let n = cols as f64;
    for ((row, drow), out) in x.chunks(cols).zip(dy.chunks(cols)).zip(dx.chunks_mut(cols)) {
        let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
        let r = 1.0 / (ms + eps as f64).sqrt();
        let gx: f64 = (0..cols)
            .map(|c| dy_w(drow[c], w[c]) * row[c] as f64 * r)
            .sum::<f64>()
            / n;
        for c in 0..cols {
            let xh = row[c] as f64 * r;
            out[c] = (r * (dy_w(drow[c], w[c]) - xh * gx)) as f32;
            dw[c] += drow[c] as f64 * xh;
        }
    }
    (dx, dw.into_iter().map(|v| v as f32).collect())
}

fn dy_w(dy: f32, w: f32) -> f64 {
    dy as f64 * w as f64
}

/// CPU reference of the LayerNorm backward over the rows (length `cols`) of row-major `x` and `dy`,
/// given the forward's per-row `mean` and `rstd` (as `layer_norm_stats` writes them), in f64:
/// `(dx, dw, db)` with `x̂ = (x - mean) · rstd`, `g = dy · w`,
/// `dx = rstd · (g - mean(g) - x̂ · mean(g · x̂))`, `dw = Σ_rows dy · x̂`, `db = Σ_rows dy`.
pub fn layer_norm_backward_reference(
    x: &[f32],
    w: &[f32],
    dy: &[f32],
    mean: &[f32],
    rstd: &[f32],
    cols: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = vec![0f32; x.len()];
    let mut dw = vec![0f64; cols];
    let mut db = vec![0f64; cols];
    if cols == 0 {
        return (dx, Vec::new(), Vec::new());
    }
    let n = cols as f64;
    for (i, ((row, drow), out)) in x
        .chunks(cols)
        .zip(dy.chunks(cols))
        .zip(dx.chunks_mut(cols))
        .enumerate()
    {
        let (m, r) = (mean[i] as f64, rstd[i] as f64);
        let xh = |c: usize| (row[c] as f64 - m) * r;
        let g_mean = (0..cols).map(|c| dy_w(drow[c], w[c])).sum::<f64>() / n;
        let gx = (0..cols).map(|c| dy_w(drow[c], w[c]) * xh(c)).sum::<f64>() / n;
        for c in 0..cols {
            out[c] = (r * (dy_w(drow[c], w[c]) - g_mean - xh(c) * gx)) as f32;
            dw[c] += drow[c] as f64 * xh(c);
            db[c] += drow[c] as f64;
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect();
    (dx, f(dw), f(db))
}
