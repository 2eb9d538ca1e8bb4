//! CPU references of the vector_add family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference of `vadd`.
pub fn vadd_reference(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// CPU reference of `saxpy`.
pub fn saxpy_reference(alpha: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| alpha * x + y).collect()
}
