//! CPU reference of the standalone RoPE (f32 from the already-rounded inputs), and the cos/sin cache
//! builder the tests, the examples and the runner share.

pub use crate::fused_qkv::reference::RopeStyle;

/// `cos`, `sin` of `[max_pos, rot/2]` for base `theta` (Llama's `10000`): angle `p · theta^(−2i/rot)`.
pub fn cos_sin_cache(max_pos: usize, rot: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    let h = rot / 2;
    let mut c = Vec::with_capacity(max_pos * h);
    let mut s = Vec::with_capacity(max_pos * h);
    for p in 0..max_pos {
        for i in 0..h {
            let inv = theta.powf(-(2.0 * i as f64) / rot as f64);
            let a = p as f64 * inv;
            c.push(a.cos() as f32);
            s.push(a.sin() as f32);
        }
    }
    (c, s)
}

/// RoPE of `x: [T, H, D]` (row-major) at `positions[T]`, lanes `0..rot` rotated, `rot..D` copied. A
/// position outside `[0, max_pos)` reads `cos = sin = 0`, so its rotated lanes become 0 (the kernel's
/// documented behaviour).
#[allow(clippy::too_many_arguments)]
pub fn rope(
    x: &[f32],
    heads: usize,
    d: usize,
    cos: &[f32],
    sin: &[f32],
    positions: &[i64],
    rot: usize,
    style: RopeStyle,
) -> Vec<f32> {
    let half = rot / 2;
    let max_pos = cos.len().checked_div(half).unwrap_or(0);
    let mut out = x.to_vec();
    for (t, &p) in positions.iter().enumerate() {
        let p_ok = p >= 0 && (p as u64) < max_pos as u64;
        for h in 0..heads {
            let base = (t * heads + h) * d;
            let v = &x[base..base + d];
            let o = &mut out[base..base + d];
            for j in 0..rot {
                let (partner, sign, ci) = match style {
                    RopeStyle::Neox if j < half => (j + half, -1.0, j),
                    RopeStyle::Neox => (j - half, 1.0, j - half),
                    RopeStyle::Gptj if j % 2 == 0 => (j + 1, -1.0, j / 2),
                    RopeStyle::Gptj => (j - 1, 1.0, j / 2),
                };
                let (c, s) = if p_ok {
                    (cos[p as usize * half + ci], sin[p as usize * half + ci])
                } else {
                    (0.0, 0.0)
                };
                o[j] = v[j] * c + sign * v[partner] * s;
            }
        }
    }
    out
}
