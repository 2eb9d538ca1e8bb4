//! CPU references of the softmax family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference: softmax of each row of a row-major `rows x cols` matrix.
pub fn row_softmax_reference(x: &[f32], cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f32 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}
