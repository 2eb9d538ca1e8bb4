//! fp8 on the host: exact decoding of e4m3 (OCP E4M3FN, finite only) and e5m2 codes, quantization of f32
//! values with a scale (round to nearest, ties to even, saturating at the largest finite value), and the
//! CPU reference of the scaled fp8 GEMM ([`gemm_fp8_reference`]: products and sums in f64).

use super::fp8::Fp8Format;

/// One scale or one per row/block, on the host: what [`gemm_fp8_reference`] multiplies by.
#[derive(Debug, Clone, Copy)]
pub enum HostScales<'s> {
    /// `c = (a @ b) · a · b`.
    Tensor { a: f32, b: f32 },
    /// `c[i, j] = (a @ b)[i, j] · a[i] · b[j]` (`a`: `[m]`, `b`: `[n]`).
    Row { a: &'s [f32], b: &'s [f32] },
    /// `c[i, j] = Σ_kb (a[i, kb·128..] · b[kb·128.., j]) · a[i, kb] · b[kb, j / 128]` (`a`: row-major
    /// `[m, k/128]`, `b`: row-major `[k/128, ceil(n/128)]`).
    Block { a: &'s [f32], b: &'s [f32] },
}

/// The value of code `byte` of `format` (NaN for the NaN codes, ±inf for e5m2's infinities).
pub fn decode(format: Fp8Format, byte: u8) -> f32 {
    let sign = if byte & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let (e, m) = match format {
        Fp8Format::E4M3 => (((byte >> 3) & 0xF) as i32, (byte & 7) as f32 / 8.0),
        Fp8Format::E5M2 => (((byte >> 2) & 0x1F) as i32, (byte & 3) as f32 / 4.0),
    };
    let bias = match format {
        Fp8Format::E4M3 => 7,
        Fp8Format::E5M2 => 15,
    };
    match format {
        Fp8Format::E4M3 if e == 15 && byte & 7 == 7 => return f32::NAN,
        Fp8Format::E5M2 if e == 31 => {
            return if byte & 3 == 0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            };
        }
        _ => {}
    }
    if e == 0 {
        sign * m * 2f32.powi(1 - bias)
    } else {
        sign * (1.0 + m) * 2f32.powi(e - bias)
    }
}

/// The non-negative finite values of `format`, by code (`0 ..= max_code`; the codes are monotonic).
fn positive_values(format: Fp8Format) -> &'static [f32] {
    static E4M3: std::sync::LazyLock<Vec<f32>> =
        std::sync::LazyLock::new(|| (0..=0x7Eu8).map(|b| decode(Fp8Format::E4M3, b)).collect());
    static E5M2: std::sync::LazyLock<Vec<f32>> =
        std::sync::LazyLock::new(|| (0..=0x7Bu8).map(|b| decode(Fp8Format::E5M2, b)).collect());
    match format {
        Fp8Format::E4M3 => &E4M3,
        Fp8Format::E5M2 => &E5M2,
    }
}

/// The code of `format` nearest to `x` (ties to the even code), saturating at ±the largest finite value;
/// NaN gives the NaN code.
pub fn encode(format: Fp8Format, x: f32) -> u8 {
    if x.is_nan() {
        return 0x7F;
    }
    let values = positive_values(format);
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let ax = x.abs();
    // First code whose value is >= |x|.
    let hi = values.partition_point(|&v| v < ax);
    let code = if hi == values.len() {
        values.len() - 1
    } else if hi == 0 || values[hi] == ax {
        hi
    } else {
        let (dl, dh) = (ax - values[hi - 1], values[hi] - ax);
        if dl < dh || (dl == dh && (hi - 1) % 2 == 0) {
            hi - 1
        } else {
            hi
        }
    };
    sign | code as u8
}

/// `x / scale` as codes of `format` (what a tensor quantized with `scale` holds: `decode · scale ≈ x`).
pub fn quantize(format: Fp8Format, x: &[f32], scale: f32) -> Vec<u8> {
    let inv = 1.0 / scale;
    x.iter().map(|&v| encode(format, v * inv)).collect()
}

/// The scale that maps `amax` to `format`'s largest finite value (1 for an all-zero tensor).
pub fn scale_for(format: Fp8Format, amax: f32) -> f32 {
    if amax > 0.0 && amax.is_finite() {
        amax / format.max_finite()
    } else {
        1.0
    }
}

/// CPU reference of the scaled fp8 GEMM: `a` row-major `[m, k]` codes, `b` the `[k, n]` codes at element
/// `(p, j)` = `b[p · b_strides.0 + j · b_strides.1]`, both of `format`; products and sums in f64, the
/// result rounded once to f32.
#[allow(clippy::too_many_arguments)]
pub fn gemm_fp8_reference(
    format: Fp8Format,
    a: &[u8],
    b: &[u8],
    b_strides: (usize, usize),
    scales: &HostScales,
    m: usize,
    n: usize,
    k: usize,
) -> Vec<f32> {
    use rayon::prelude::*;
    let lut: Vec<f64> = (0..=255u8).map(|c| decode(format, c) as f64).collect();
    // `b` as `[n][k]` values: the dot products walk contiguous memory.
    let bt: Vec<f64> = (0..n * k)
        .map(|idx| {
            let (j, p) = (idx / k.max(1), idx % k.max(1));
            lut[b[p * b_strides.0 + j * b_strides.1] as usize]
        })
        .collect();
    let kb = k.div_ceil(super::fp8::BLOCK as usize);
    let nb = n.div_ceil(super::fp8::BLOCK as usize);
    let mut c = vec![0f32; m * n];
    c.par_chunks_mut(n.max(1)).enumerate().for_each(|(i, row)| {
        let ai: Vec<f64> = a[i * k..(i + 1) * k]
            .iter()
            .map(|&x| lut[x as usize])
            .collect();
        for (j, out) in row.iter_mut().enumerate() {
            let bj = &bt[j * k..(j + 1) * k];
            let dot = |lo: usize, hi: usize| -> f64 {
                ai[lo..hi].iter().zip(&bj[lo..hi]).map(|(x, y)| x * y).sum()
            };
            let v = match scales {
                HostScales::Tensor { a: sa, b: sb } => dot(0, k) * *sa as f64 * *sb as f64,
                HostScales::Row { a: sa, b: sb } => dot(0, k) * sa[i] as f64 * sb[j] as f64,
                HostScales::Block { a: sa, b: sb } => (0..kb)
                    .map(|q| {
                        let lo = q * super::fp8::BLOCK as usize;
                        let hi = (lo + super::fp8::BLOCK as usize).min(k);
                        dot(lo, hi)
                            * sa[i * kb + q] as f64
                            * sb[q * nb + j / super::fp8::BLOCK as usize] as f64
                    })
                    .sum(),
            };
            *out = v as f32;
        }
    });
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes() {
        use Fp8Format::*;
        let cases: &[(Fp8Format, u8, f32)] = &[
            (E4M3, 0x38, 1.0),
            (E4M3, 0x7E, 448.0),
            (E4M3, 0xC0, -2.0),
            (E4M3, 0x01, 2f32.powi(-9)),
            (E4M3, 0x08, 2f32.powi(-6)),
            (E5M2, 0x3C, 1.0),
            (E5M2, 0x7B, 57344.0),
            (E5M2, 0x01, 2f32.powi(-16)),
            (E5M2, 0xC0, -2.0),
        ];
        for &(f, code, v) in cases {
            assert_eq!(decode(f, code), v, "{f:?} {code:#x}");
            assert_eq!(encode(f, v), code, "{f:?} {v}");
        }
        assert!(decode(E4M3, 0x7F).is_nan());
        assert!(decode(E4M3, 0xFF).is_nan());
        assert_eq!(decode(E5M2, 0x7C), f32::INFINITY);
        assert!(decode(E5M2, 0x7D).is_nan());
    }

    #[test]
    fn encode_rounds_to_nearest_even_and_saturates() {
        use Fp8Format::*;
        // e4m3 near 1: 1.0 (0x38), 1.125 (0x39), 1.25 (0x3A). 1.0625 ties to even 0x38, 1.1875 to 0x3A.
        assert_eq!(encode(E4M3, 1.0625), 0x38);
        assert_eq!(encode(E4M3, 1.1875), 0x3A);
        assert_eq!(encode(E4M3, 1.07), 0x39);
        assert_eq!(encode(E4M3, 1e9), 0x7E);
        assert_eq!(encode(E4M3, -1e9), 0xFE);
        assert_eq!(encode(E5M2, 1e9), 0x7B);
        assert_eq!(encode(E4M3, 0.0), 0x00);
        // Every finite code round-trips.
        for f in [E4M3, E5M2] {
            for c in 0..=255u8 {
                let v = decode(f, c);
                if v.is_finite() && !(v == 0.0 && c == 0x80) {
                    assert_eq!(encode(f, v), c, "{f:?} {c:#x}");
                }
            }
        }
    }

    #[test]
    fn quantize_error_is_within_half_an_ulp() {
        let f = Fp8Format::E4M3;
        let x: Vec<f32> = (0..1000).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
        let s = scale_for(f, 3.0);
        let q = quantize(f, &x, s);
        for (v, c) in x.iter().zip(&q) {
            let back = decode(f, *c) * s;
            // 3 mantissa bits: relative error at most 2^-4, plus the subnormal step.
            assert!(
                (back - v).abs() <= v.abs() / 16.0 + s * 2f32.powi(-10),
                "{v} -> {back}"
            );
        }
    }

    #[test]
    fn block_scales_equal_to_one_scale_match_the_tensor_scale() {
        let f = Fp8Format::E4M3;
        let (m, n, k) = (3, 130, 256);
        let a: Vec<u8> = (0..m * k)
            .map(|i| encode(f, ((i % 13) as f32) - 6.0))
            .collect();
        let b: Vec<u8> = (0..k * n)
            .map(|i| encode(f, ((i % 7) as f32) * 0.5 - 1.5))
            .collect();
        let t = gemm_fp8_reference(
            f,
            &a,
            &b,
            (n, 1),
            &HostScales::Tensor { a: 0.5, b: 4.0 },
            m,
            n,
            k,
        );
        let sa = vec![0.5f32; m * 2];
        let sb = vec![4.0f32; 2 * 2];
        let blk = gemm_fp8_reference(
            f,
            &a,
            &b,
            (n, 1),
            &HostScales::Block { a: &sa, b: &sb },
            m,
            n,
            k,
        );
        assert_eq!(t, blk);
        // And the plain integer product: a[i,p] and b[p,j] are exact small values.
        let mut direct = 0f64;
        for p in 0..k {
            direct += decode(f, a[p]) as f64 * decode(f, b[p * n + 5]) as f64;
        }
        assert_eq!(t[5], (direct * 2.0) as f32);
        // Per-row scales: row 1 doubled, column 3 halved.
        let mut ra = vec![1.0f32; m];
        ra[1] = 2.0;
        let mut rb = vec![1.0f32; n];
        rb[3] = 0.5;
        let row = gemm_fp8_reference(
            f,
            &a,
            &b,
            (n, 1),
            &HostScales::Row { a: &ra, b: &rb },
            m,
            n,
            k,
        );
        assert_eq!(row[n + 3], t[n + 3] / 2.0);
        assert_eq!(row[n + 4], t[n + 4] * 2.0 / 2.0);
        assert_eq!(row[3], t[3] / 4.0);
    }
}
