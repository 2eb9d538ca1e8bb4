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

/// CPU reference of the epilogue path: `act(a @ b + bias) + residual` for row-major `m x k`, `k x n`
/// (bias `[n]`, residual `[m, n]`), products accumulated in f64, the epilogue in f64.
#[allow(clippy::too_many_arguments)]
pub fn gemm_epilogue_reference(
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    activation: super::Activation,
    residual: Option<&[f32]>,
    m: usize,
    n: usize,
    k: usize,
) -> Vec<f32> {
    use rayon::prelude::*;
    let mut c = vec![0f32; m * n];
    c.par_chunks_mut(n.max(1)).enumerate().for_each(|(i, row)| {
        let mut acc = vec![0f64; n];
        for p in 0..k {
            let aip = a[i * k + p] as f64;
            for (j, s) in acc.iter_mut().enumerate() {
                *s += aip * b[p * n + j] as f64;
            }
        }
        for (j, out) in row.iter_mut().enumerate() {
            let mut y = acc[j] + bias.map_or(0.0, |v| v[j] as f64);
            y = activation_f64(activation, y);
            y += residual.map_or(0.0, |r| r[i * n + j] as f64);
            *out = y as f32;
        }
    });
    c
}

/// The epilogue's activation in f64.
pub fn activation_f64(activation: super::Activation, x: f64) -> f64 {
    use super::Activation as A;
    match activation {
        A::None => x,
        A::Silu => x / (1.0 + (-x).exp()),
        A::GeluErf => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        A::GeluTanh => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + u.tanh())
        }
    }
}

/// `erf(x)` to about 1e-15 (series for small |x|, continued fraction for the tail).
fn erf(x: f64) -> f64 {
    let ax = x.abs();
    let r = if ax < 2.5 {
        // Maclaurin series: erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)).
        let mut term = ax;
        let mut sum = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(x) = e^{-x²}/√π · 1/(x + 1/2/(x + 1/(x + 3/2/(x + …)))) (Lentz-free, 60 terms).
        let mut f = ax;
        for i in (1..60).rev() {
            f = ax + (i as f64 / 2.0) / f;
        }
        1.0 - (-ax * ax).exp() / (std::f64::consts::PI.sqrt() * f)
    };
    if x < 0.0 { -r } else { r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf(0.5), erf(1), erf(2), erf(3) to 1e-12.
        for (x, want) in [
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            assert!((erf(x) - want).abs() < 1e-12, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn epilogue_reference_adds_bias_activation_and_residual() {
        // a = [[1, 2]], b = [[1, 0], [0, 1]] → a@b = [1, 2]; bias [1, -3] → [2, -1].
        let (a, b) = ([1.0, 2.0], [1.0, 0.0, 0.0, 1.0]);
        let c = gemm_epilogue_reference(
            &a,
            &b,
            Some(&[1.0, -3.0]),
            super::super::Activation::Silu,
            Some(&[10.0, 20.0]),
            1,
            2,
            2,
        );
        let silu = |x: f64| x / (1.0 + (-x).exp());
        assert!((c[0] as f64 - (silu(2.0) + 10.0)).abs() < 1e-6);
        assert!((c[1] as f64 - (silu(-1.0) + 20.0)).abs() < 1e-6);
        let g = activation_f64(super::super::Activation::GeluErf, 1.0);
        assert!((g - 0.841_344_746_068_542_9).abs() < 1e-12, "{g}");
        let t = activation_f64(super::super::Activation::GeluTanh, 1.0);
        assert!((t - 0.841_191_990_607_477_4).abs() < 1e-9, "{t}");
    }
}
