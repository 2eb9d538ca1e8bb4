//! CPU references of the activation family, in f64 on the host (elements in parallel): what the GPU
//! tests, the examples and the runner compare against. [`erfc`] is a high-precision f64 erfc of its
//! own (series and continued fraction), since the standard library has none.

use rayon::prelude::*;

use super::Activation;

/// erfc(z) to about 1e-11 relative (the series' `1 - erf` loses a few digits just below 3): for `|z| < 3` `1 - erf(z)` by the all-positive series
/// `erf(z) = 2/√π · e^{-z²} · Σ 2ⁿ z^{2n+1} / (1·3·…·(2n+1))`; beyond, the continued fraction
/// `erfc(z) = e^{-z²}/√π · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + …))))`, evaluated backwards (and
/// `erfc(-z) = 2 - erfc(z)`).
pub fn erfc(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z < 0.0 {
        return 2.0 - erfc(-z);
    }
    let inv_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI / 2.0;
    if z < 3.0 {
        let mut term = z;
        let mut sum = z;
        let mut n = 0.0;
        while term > sum * 1e-18 {
            n += 1.0;
            term *= 2.0 * z * z / (2.0 * n + 1.0);
            sum += term;
        }
        return 1.0 - 2.0 * inv_sqrt_pi * (-z * z).exp() * sum;
    }
    let mut k = z;
    for i in (1..=120).rev() {
        k = z + (i as f64 / 2.0) / k;
    }
    (-z * z).exp() * inv_sqrt_pi / k
}

/// erf(z) = 1 - erfc(z).
pub fn erf(z: f64) -> f64 {
    1.0 - erfc(z)
}

/// `1 / (1 + e^{-x})`.
fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `(Φ(x), φ(x))` of the standard normal distribution.
fn normal(x: f64) -> (f64, f64) {
    let cdf = 0.5 * erfc(-x * std::f64::consts::FRAC_1_SQRT_2);
    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    (cdf, pdf)
}

/// `u = √(2/π)·(x + 0.044715·x³)` of the tanh GELU and `du/dx`.
fn tanh_arg(x: f64) -> (f64, f64) {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    (
        c * (x + 0.044715 * x * x * x),
        c * (1.0 + 3.0 * 0.044715 * x * x),
    )
}

/// `act(x)` in f64.
pub fn forward(act: Activation, x: f64) -> f64 {
    match act {
        Activation::Silu => x * sigmoid(x),
        Activation::GeluErf => x * normal(x).0,
        Activation::GeluTanh => 0.5 * x * (1.0 + tanh_arg(x).0.tanh()),
        Activation::Relu => x.max(0.0),
    }
}

/// `act'(x)` in f64 (ReLU's is 0 at 0, as torch's).
pub fn slope(act: Activation, x: f64) -> f64 {
    match act {
        Activation::Silu => {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        }
        Activation::GeluErf => {
            let (cdf, pdf) = normal(x);
            cdf + x * pdf
        }
        Activation::GeluTanh => {
            let (u, du) = tanh_arg(x);
            let t = u.tanh();
            0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
        }
        Activation::Relu => {
            if x > 0.0 {
                1.0
            } else {
                0.0
            }
        }
    }
}

/// `y = act(x)`.
pub fn act_reference(act: Activation, x: &[f32]) -> Vec<f32> {
    x.par_iter()
        .map(|&v| forward(act, v as f64) as f32)
        .collect()
}

/// `dx = g · act'(x)`.
pub fn act_backward_reference(act: Activation, x: &[f32], g: &[f32]) -> Vec<f32> {
    x.par_iter()
        .zip(g)
        .map(|(&v, &gv)| (gv as f64 * slope(act, v as f64)) as f32)
        .collect()
}

/// `y = act(a) · b`.
pub fn gated_pair_reference(act: Activation, a: &[f32], b: &[f32]) -> Vec<f32> {
    a.par_iter()
        .zip(b)
        .map(|(&av, &bv)| (forward(act, av as f64) * bv as f64) as f32)
        .collect()
}

/// `(da, db) = (g · b · act'(a), g · act(a))`.
pub fn gated_pair_backward_reference(
    act: Activation,
    a: &[f32],
    b: &[f32],
    g: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    a.par_iter()
        .zip(b)
        .zip(g)
        .map(|((&av, &bv), &gv)| {
            let (av, bv, gv) = (av as f64, bv as f64, gv as f64);
            (
                (gv * bv * slope(act, av)) as f32,
                (gv * forward(act, av)) as f32,
            )
        })
        .unzip()
}

/// Splits the rows (length `2n`) of `x` into their halves `x[.., :n]` and `x[.., n:]`.
fn halves(x: &[f32], n: usize) -> (Vec<f32>, Vec<f32>) {
    if n == 0 {
        return (Vec::new(), Vec::new());
    }
    x.chunks(2 * n).map(|r| (&r[..n], &r[n..])).fold(
        (Vec::new(), Vec::new()),
        |(mut a, mut b), (ra, rb)| {
            a.extend_from_slice(ra);
            b.extend_from_slice(rb);
            (a, b)
        },
    )
}

/// `y = act(x[.., :n]) · x[.., n:]` over rows of `2n` (SiLU-and-mul, GeGLU); `y` has rows of `n`.
pub fn gated_reference(act: Activation, x: &[f32], n: usize) -> Vec<f32> {
    let (a, b) = halves(x, n);
    gated_pair_reference(act, &a, &b)
}

/// `dx` of [`gated_reference`] given `g` (rows of `n`): each row of `dx` is `[da | db]`.
pub fn gated_backward_reference(act: Activation, x: &[f32], g: &[f32], n: usize) -> Vec<f32> {
    let (a, b) = halves(x, n);
    let (da, db) = gated_pair_backward_reference(act, &a, &b, g);
    if n == 0 {
        return Vec::new();
    }
    da.chunks(n)
        .zip(db.chunks(n))
        .flat_map(|(ra, rb)| ra.iter().chain(rb).copied())
        .collect()
}

/// Every output of a call of `op`, from its inputs in the op's order (`x` / `x, grad_out` / `a, b` /
/// `a, b, grad_out`, logical row-major) with `cols` the last extent of the first input: what the
/// examples, the GPU runner and the tests compare against. Missing inputs read as empty.
pub fn op_reference(op: &super::OpSpec, inputs: &[&[f32]], cols: usize) -> Vec<Vec<f32>> {
    use super::Form;
    let input = |i: usize| inputs.get(i).copied().unwrap_or(&[]);
    let act = op.act;
    match (op.form, op.backward) {
        (Form::Unary, false) => vec![act_reference(act, input(0))],
        (Form::Unary, true) => vec![act_backward_reference(act, input(0), input(1))],
        (Form::Gated, false) => vec![gated_reference(act, input(0), cols / 2)],
        (Form::Gated, true) => vec![gated_backward_reference(act, input(0), input(1), cols / 2)],
        (Form::Pair, false) => vec![gated_pair_reference(act, input(0), input(1))],
        (Form::Pair, true) => {
            let (da, db) = gated_pair_backward_reference(act, input(0), input(1), input(2));
            vec![da, db]
        }
    }
}
