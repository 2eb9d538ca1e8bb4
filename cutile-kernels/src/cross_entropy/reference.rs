//! The f64 CPU reference of fused linear + cross-entropy: the logits `x @ w^T` in full, a log-softmax
//! per row, the loss reduced as torch does, and the gradients `dx = dlogits @ w`, `dw = dlogits^T @ x`
//! with `dlogits = (softmax - onehot) · scale` (`scale = 1 / count` for the mean, 1 for the sum, 0 on
//! ignored rows). Rows in parallel (rayon).

use rayon::prelude::*;

use super::Reduction;

/// The reference's outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct CeReference {
    pub loss: f64,
    /// `[T, H]`.
    pub dx: Vec<f64>,
    /// `[V, H]`.
    pub dw: Vec<f64>,
    /// Targets that count (not `ignore_index`).
    pub count: usize,
}

/// The reference for `x: [t, h]`, `w: [v, h]` (row-major), `target: [t]`. A target outside `[0, v)`
/// that is not `ignore_index` gives a NaN loss and no one-hot term (as the kernels). `store_round`
/// rounds each logit and each `dlogits` entry as the device stores them, in the inputs' element type
/// (e.g. to bf16; identity for exact f64 values). The gradients' products then start from the stored
/// `dlogits`, as the device's (and torch's) do: in f16 a mean's `dlogits` of a wide vocabulary are
/// subnormal (`(1/V) / count` below 2^-14), and their rounding is part of the format, not an error of
/// the kernels (session 29: `[466, 1]`, V 2046, f16 missed the 2e-3 tolerance by that alone).
#[allow(clippy::too_many_arguments)]
pub fn fused_linear_cross_entropy_reference(
    x: &[f32],
    w: &[f32],
    target: &[i64],
    h: usize,
    v: usize,
    ignore_index: i64,
    reduction: Reduction,
    store_round: fn(f64) -> f64,
) -> CeReference {
    let t = target.len();
    let count = target.iter().filter(|&&g| g != ignore_index).count();
    let scale = match reduction {
        Reduction::Mean if count > 0 => 1.0 / count as f64,
        Reduction::Mean => 0.0,
        Reduction::Sum => 1.0,
    };
    // Per row: (loss, dlogits).
    let rows: Vec<(f64, Vec<f64>)> = (0..t)
        .into_par_iter()
        .map(|r| {
            let g = target[r];
            if g == ignore_index {
                return (0.0, vec![0.0; v]);
            }
            let xr = &x[r * h..(r + 1) * h];
            let logits: Vec<f64> = (0..v)
                .map(|c| {
                    let wr = &w[c * h..(c + 1) * h];
                    store_round(xr.iter().zip(wr).map(|(&a, &b)| a as f64 * b as f64).sum())
                })
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let l: f64 = logits.iter().map(|&z| (z - m).exp()).sum();
            let lse = m + l.ln();
            let inrange = g >= 0 && (g as usize) < v;
            let loss = if inrange {
                lse - logits[g as usize]
            } else {
                f64::NAN
            };
            let d = logits
                .iter()
                .enumerate()
                .map(|(c, &z)| {
                    let hot = if inrange && c == g as usize { 1.0 } else { 0.0 };
                    store_round(((z - lse).exp() - hot) * scale)
                })
                .collect();
            (loss, d)
        })
        .collect();
    let total: f64 = rows.iter().map(|r| r.0).sum();
    let loss = match reduction {
        Reduction::Mean => total / count as f64,
        Reduction::Sum => total,
    };
    let dx: Vec<f64> = (0..t)
        .into_par_iter()
        .flat_map_iter(|r| {
            let d = &rows[r].1;
            (0..h).map(move |j| (0..v).map(|c| d[c] * w[c * h + j] as f64).sum::<f64>())
        })
        .collect();
    let dw: Vec<f64> = (0..v)
        .into_par_iter()
        .flat_map_iter(|c| {
            let rows = &rows;
            (0..h).map(move |j| {
                (0..t)
                    .map(|r| rows[r].1[c] * x[r * h + j] as f64)
                    .sum::<f64>()
            })
        })
        .collect();
    CeReference {
        loss,
        dx,
        dw,
        count,
    }
}
