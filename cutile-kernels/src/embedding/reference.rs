//! CPU reference of the embedding gather.

/// `out[t, :] = table[ids[t], :]` for `table: [V, d]` row-major; an id outside `[0, V)` gives zeros.
pub fn embedding(table: &[f32], d: usize, ids: &[i64]) -> Vec<f32> {
    let v = table.len().checked_div(d).unwrap_or(0) as i64;
    let mut out = vec![0.0f32; ids.len() * d];
    for (t, &id) in ids.iter().enumerate() {
        if (0..v).contains(&id) {
            let s = id as usize * d;
            out[t * d..(t + 1) * d].copy_from_slice(&table[s..s + d]);
        }
    }
    out
}
