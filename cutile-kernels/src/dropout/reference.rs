//! CPU reference of the dropout family: Philox-4x32-10 (Salmon et al., SC'11) bit for bit as the
//! kernel computes it, the keep mask, and dropout itself in f32.

/// Philox-4x32 multipliers and Weyl key increments.
const M0: u64 = 0xD251_1F53;
const M1: u64 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox-4x32-10 of the counter `c` under the key `k`.
pub fn philox4x32_10(mut c: [u32; 4], mut k: [u32; 2]) -> [u32; 4] {
    for _ in 0..10 {
        let p0 = M0 * c[0] as u64;
        let p1 = M1 * c[2] as u64;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// The 16-bit random number of element `i` of a call with `seed` and `offset` (a multiple of 8): with
/// `c = offset + i`, half `c mod 2` (low half first) of word `(c / 2) mod 4` of Philox of the group
/// counter `c / 8` (low word, high word, 0, 0) under the key `(seed low, seed high)`. Each Philox call
/// serves eight consecutive elements.
pub fn random_bits(seed: u64, offset: u64, i: u64) -> u16 {
    let c = offset.wrapping_add(i);
    let g = c >> 3;
    let w = philox4x32_10(
        [g as u32, (g >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    )[((c >> 1) & 3) as usize];
    (w >> (16 * (c & 1))) as u16
}

/// The integer threshold of drop probability `p` (in `[0, 1]`): element `i` is kept iff its 16-bit
/// random number is `≥ round(p · 2^16)`, so `P(keep) = 1 - round(p · 2^16) / 2^16` (exactly 1 for
/// `p = 0`, 0 for `p = 1`; any other `p` within `2^-17` of the requested rate).
pub fn threshold(p: f32) -> u32 {
    ((p as f64) * 65536.0).round().clamp(0.0, 65536.0) as u32
}

/// The scale of kept elements, `1 / (1 - p)` in f32 (0 for `p = 1`, when nothing is kept).
pub fn scale(p: f32) -> f32 {
    if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) }
}

/// The keep mask of `n` elements (one Philox call per eight).
pub fn mask(n: usize, p: f32, seed: u64, offset: u64) -> Vec<bool> {
    let t = threshold(p);
    let key = [seed as u32, (seed >> 32) as u32];
    let mut words = (u64::MAX, [0u32; 4]);
    (0..n as u64)
        .map(|i| {
            let c = offset.wrapping_add(i);
            let g = c >> 3;
            if words.0 != g {
                words = (g, philox4x32_10([g as u32, (g >> 32) as u32, 0, 0], key));
            }
            let half = (words.1[((c >> 1) & 3) as usize] >> (16 * (c & 1))) & 0xFFFF;
            half >= t
        })
        .collect()
}

/// `y = x · mask / (1 - p)` elementwise (`x` in logical row-major order), the product in f32 as the
/// kernel computes it (before rounding to the storage type). The backward is the same map of `dy`.
pub fn dropout(x: &[f32], p: f32, seed: u64, offset: u64) -> Vec<f32> {
    let s = scale(p);
    x.iter()
        .zip(mask(x.len(), p, seed, offset))
        .map(|(&v, keep)| if keep { v * s } else { 0.0 })
        .collect()
}
