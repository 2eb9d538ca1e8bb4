//! CPU references of the softmax family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference: softmax of each row of a row-major `rows x cols` matrix, in f64. An f32 running
/// sum drifts by ~1e-5 relative over rows of a few thousand near-equal terms (the H200 property run of
/// 2026-12-01 failed f32 rows of 3317–63260 entries against such a reference at the f32 tolerance).
pub fn row_softmax_reference(x: &[f32], cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| (v / s) as f32));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long rows of repeating terms are where an f32 running sum drifts (about 1e-4 here); the f64
    /// reference's rows sum to one within the rounding of its f32 outputs.
    #[test]
    fn long_rows_sum_to_one() {
        for cols in [1usize, 3317, 65536] {
            let x: Vec<f32> = (0..cols).map(|j| (j % 7) as f32 * 0.37 - 1.0).collect();
            let total: f64 = row_softmax_reference(&x, cols)
                .iter()
                .map(|&v| v as f64)
                .sum();
            assert!((total - 1.0).abs() < 1e-6, "{cols}: rows sum to {total}");
        }
    }

    #[test]
    fn rows_of_only_neg_inf_are_nan_like_torch() {
        let y = row_softmax_reference(&[f32::NEG_INFINITY; 4], 2);
        assert!(y.iter().all(|v| v.is_nan()));
    }
}
