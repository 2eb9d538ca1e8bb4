//! CPU references of the gemm family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference: `C = A · B` for row-major `m x k` and `k x n` matrices.
pub fn gemm_reference(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    use rayon::prelude::*;
    let mut c = vec![0f32; m * n];
    c.par_chunks_mut(n.max(1)).enumerate().for_each(|(i, row)| {
        for p in 0..k {
            let aip = a[i * k + p];
            for (j, out) in row.iter_mut().enumerate() {
                *out += aip * b[p * n + j];
            }
        }
    });
    c
}
