//! The activation family: the CPU references (known values, the erf against a high-precision erfc, the
//! derivatives against finite differences), the planner without a GPU (typed errors, empty calls, views),
//! every representative call compiled by tileiras for sm_90 (skipped without it), and GPU property tests
//! through the host API (`#[ignore]`d; skipped without a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::activation::{self, Activation, Form, OPS, OpSpec, math, reference as r};
use cutile_kernels::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target};

const ACTS: [Activation; 4] = [
    Activation::Silu,
    Activation::GeluErf,
    Activation::GeluTanh,
    Activation::Relu,
];

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn spec(name: &str) -> &'static OpSpec {
    activation::find(name).unwrap()
}

fn operands(op: &str, dt: ScalarType, x: &[i64]) -> Vec<Operand> {
    activation::described_operands(spec(op), dt, x).unwrap()
}

fn plan(op: &str, ops: &[Operand]) -> Result<Vec<PlannedLaunch>, OpError> {
    activation::plan(op, ops, &target(), false)
}

// ---------------------------------------------------------------------------------------------------------
// References.

#[test]
fn erfc_matches_known_values() {
    // (z, erfc(z)) to 16 digits (Python's math.erfc), both sides of the series / continued fraction
    // switch at 3.
    for (z, want) in [
        (0.0, 1.0),
        (0.5, 0.479_500_122_186_953_5),
        (1.0, 0.157_299_207_050_285_1),
        (2.0, 4.677_734_981_047_266e-3),
        (2.5, 4.069_520_174_449_589e-4),
        (2.9, 4.109_787_809_945_886e-5),
        (2.999, 2.223_016_859_983_405_8e-5),
        (3.001, 2.195_166_091_773_73e-5),
        (3.0, 2.209_049_699_858_544e-5),
        (5.0, 1.537_459_794_428_035e-12),
        (-1.0, 1.842_700_792_949_715),
    ] {
        let got = r::erfc(z);
        assert!(
            ((got - want) / want).abs() < 1e-10,
            "erfc({z}) = {got:e}, want {want:e}"
        );
    }
    assert!((r::erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-15);
}

/// The kernels' erfc (Abramowitz & Stegun 7.1.26 with the f32 coefficients `math` holds), evaluated in
/// f64 on the host, stays within 2e-7 of the high-precision erfc; the GELU built on it is then within
/// the f32 tolerance everywhere.
#[test]
fn kernel_erfc_approximation_is_within_its_bound() {
    let approx = |z: f64| {
        let t = 1.0 / (1.0 + math::ERFC_P as f64 * z);
        let poly = math::ERFC_A
            .iter()
            .rev()
            .fold(0.0, |acc, &a| acc * t + a as f64);
        poly * t * (-z * z).exp()
    };
    let mut worst: f64 = 0.0;
    for i in 0..=12_000 {
        let z = i as f64 * 6.0 / 12_000.0;
        worst = worst.max((approx(z) - r::erfc(z)).abs());
    }
    assert!(worst < 2e-7, "max |erfc error| {worst:e}");
    // GELU through it: x·Φ(x), Φ = erfc(-x/√2)/2.
    let mut rel: f64 = 0.0;
    for i in -8000..=8000 {
        let x = i as f64 / 1000.0;
        let z = x.abs() * std::f64::consts::FRAC_1_SQRT_2;
        let half = 0.5 * approx(z);
        let cdf = if x >= 0.0 { 1.0 - half } else { half };
        let want = r::forward(Activation::GeluErf, x);
        rel = rel.max((x * cdf - want).abs() / want.abs().max(1.0));
    }
    assert!(rel < 1e-6, "GELU error {rel:e}");
}

#[test]
fn activations_have_their_known_values() {
    use Activation::*;
    for (act, x, want) in [
        (GeluErf, 0.0, 0.0),
        (GeluTanh, 0.0, 0.0),
        (Silu, 0.0, 0.0),
        (Relu, 0.0, 0.0),
        (GeluErf, 1.0, 0.841_344_746_068_542_9),
        (GeluErf, -1.0, -0.158_655_253_931_457_05),
        (GeluTanh, 1.0, 0.841_191_990_608_276_8),
        (Silu, 1.0, 0.731_058_578_630_004_9),
        (Silu, -1.0, -0.268_941_421_369_995_1),
        (Relu, -2.0, 0.0),
        (Relu, 2.5, 2.5),
        (GeluErf, 10.0, 10.0),
        (Silu, -100.0, 0.0),
    ] {
        let got = r::forward(act, x);
        assert!(
            (got - want).abs() < 1e-12,
            "{act:?}({x}) = {got}, want {want}"
        );
    }
    // The tanh form stays within 5e-4 of the exact GELU (its known approximation error).
    let worst = (-6000..=6000)
        .map(|i| i as f64 / 1000.0)
        .map(|x| (r::forward(GeluTanh, x) - r::forward(GeluErf, x)).abs())
        .fold(0.0, f64::max);
    assert!(worst < 5e-4 && worst > 1e-5, "tanh vs erf GELU: {worst:e}");
}

#[test]
fn slopes_match_finite_differences() {
    let h = 1e-5;
    for act in ACTS {
        for i in -400..=400 {
            let x = i as f64 / 40.0 + 0.013; // never exactly ReLU's kink
            let fd = (r::forward(act, x + h) - r::forward(act, x - h)) / (2.0 * h);
            let got = r::slope(act, x);
            assert!(
                (got - fd).abs() < 1e-7 * fd.abs().max(1.0),
                "{act:?}'({x}) = {got}, finite difference {fd}"
            );
        }
    }
}

/// The vector references: the gated ones split each row into halves, and the backward ones are the
/// gradients of `Σ g · y` (finite differences per element).
#[test]
fn gated_references_split_rows_and_backward_references_are_gradients() {
    let n = 3;
    let x: Vec<f32> = (0..4 * 2 * n).map(|i| (i as f32 - 11.0) / 4.0).collect();
    let g: Vec<f32> = (0..4 * n).map(|i| 0.5 - i as f32 / 10.0).collect();
    for act in ACTS {
        let y = r::gated_reference(act, &x, n);
        assert_eq!(y.len(), 4 * n);
        for (i, &yi) in y.iter().enumerate() {
            let (row, col) = (i / n, i % n);
            let (a, b) = (x[row * 2 * n + col] as f64, x[row * 2 * n + n + col] as f64);
            assert!((yi as f64 - r::forward(act, a) * b).abs() < 1e-6);
        }
        let dx = r::gated_backward_reference(act, &x, &g, n);
        let loss = |x: &[f64]| -> f64 {
            (0..4 * n)
                .map(|i| {
                    let (row, col) = (i / n, i % n);
                    g[i] as f64 * r::forward(act, x[row * 2 * n + col]) * x[row * 2 * n + n + col]
                })
                .sum()
        };
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        for j in 0..x.len() {
            let (mut up, mut down) = (x64.clone(), x64.clone());
            up[j] += 1e-6;
            down[j] -= 1e-6;
            let fd = (loss(&up) - loss(&down)) / 2e-6;
            assert!(
                (dx[j] as f64 - fd).abs() < 1e-5,
                "{act:?} dx[{j}] = {}, finite difference {fd}",
                dx[j]
            );
        }
        let gx = r::act_backward_reference(act, &x[..4], &[1.0; 4]);
        for (k, &v) in gx.iter().enumerate() {
            assert!((v as f64 - r::slope(act, x[k] as f64)).abs() < 1e-6);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Planning without a GPU.

fn expect_error(what: &str, result: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match result {
        Ok(p) => panic!("{what}: expected an error containing {needle:?}, planned {p:?}"),
        Err(e) => assert!(
            e.to_string().contains(needle),
            "{what}: error {e} lacks {needle:?}"
        ),
    }
}

#[test]
fn bad_calls_are_typed_errors_naming_cause_and_fix() {
    let d = |name, i, dt, shape: &[i64]| Operand::described(name, i, dt, shape);
    let odd = [d("x", 0, BF16, &[4, 7]), d("y", 1, BF16, &[4, 3])];
    expect_error(
        "odd gated row",
        plan(activation::SILU_AND_MUL, &odd),
        "must be even",
    );
    let scalar = [d("x", 0, BF16, &[]), d("y", 1, BF16, &[])];
    expect_error(
        "rank-0 gated",
        plan(activation::GEGLU, &scalar),
        "at least 1",
    );
    let wrong_y = [d("x", 0, BF16, &[4, 8]), d("y", 1, BF16, &[4, 8])];
    expect_error(
        "gated y of x's shape",
        plan(activation::SILU_AND_MUL, &wrong_y),
        "`y` must have shape [4, 4]",
    );
    let mixed = [d("x", 0, BF16, &[4, 8]), d("y", 1, F32, &[4, 8])];
    expect_error(
        "dtype mismatch",
        plan(activation::GELU, &mixed),
        "must match `x`",
    );
    let ints = [d("x", 0, I32, &[4, 8]), d("y", 1, I32, &[4, 8])];
    expect_error(
        "integer input",
        plan(activation::RELU, &ints),
        "f32, f16, bf16",
    );
    let pair = [
        d("a", 0, F16, &[4, 8]),
        d("b", 1, F16, &[4, 9]),
        d("y", 2, F16, &[4, 8]),
    ];
    expect_error(
        "pair shapes",
        plan(activation::SWIGLU, &pair),
        "`b` must have shape [4, 8]",
    );
    expect_error(
        "operand count",
        plan(activation::SWIGLU_BACKWARD, &pair),
        "takes 5 tensors (a, b, grad_out, grad_a, grad_b), got 3",
    );
    let mut t = operands(activation::GELU, F32, &[8, 4]);
    t[0].strides = vec![1, 8];
    expect_error(
        "transposed x",
        plan(activation::GELU, &t),
        "last axis must be contiguous",
    );
    expect_error(
        "unknown op",
        plan("gelu_erf", &operands(activation::GELU, F32, &[8])),
        "no op named `gelu_erf`",
    );
    let mut other = operands(activation::RELU, F32, &[8]);
    other[1].device = 1;
    expect_error("device", plan(activation::RELU, &other), "is on device 1");
}

#[test]
fn empty_calls_plan_no_launch() {
    for o in OPS {
        for x in [&[0i64, 8][..], &[3, 0, 4], &[4, 0]] {
            let ops = operands(o.name, BF16, x);
            assert!(plan(o.name, &ops).unwrap().is_empty(), "{} {x:?}", o.name);
        }
    }
}

fn tensor_args(l: &PlannedLaunch) -> Vec<(usize, Vec<i64>, Vec<i64>, i64)> {
    l.args
        .iter()
        .filter_map(|a| match a {
            PlannedArg::Tensor {
                operand,
                shape,
                strides,
                offset,
                ..
            } => Some((*operand, shape.clone(), strides.clone(), *offset)),
            _ => None,
        })
        .collect()
}

/// Contiguous unary and pair calls become one long row; gated calls are two views of `x` `N` apart
/// (and of `grad_x`); strided rows keep their row stride; the grid covers every tile.
#[test]
fn views_and_grids_follow_the_form() {
    let l = plan(
        activation::GELU,
        &operands(activation::GELU, BF16, &[3, 5, 7]),
    )
    .unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(tensor_args(&l[0])[0], (0, vec![1, 105], vec![105, 1], 0));
    assert_eq!(l[0].grid, Some((1, 1, 1)));

    let x = [16384i64, 8192];
    let l = plan(
        activation::SILU_AND_MUL,
        &operands(activation::SILU_AND_MUL, BF16, &x),
    )
    .unwrap();
    let args = tensor_args(&l[0]);
    assert_eq!(args[0], (0, vec![16384, 4096], vec![8192, 1], 0));
    assert_eq!(args[1], (0, vec![16384, 4096], vec![8192, 1], 4096));
    assert_eq!(args[2], (1, vec![16384, 4096], vec![4096, 1], 0));
    let cfg = activation::config::choose(&target(), 16384, 4096);
    let tiles = (16384 / cfg.tm) * (4096 / cfg.bn);
    assert_eq!(l[0].grid, Some((tiles as u32, 1, 1)));

    let ops = operands(activation::GEGLU_BACKWARD, F16, &[5, 2, 10]);
    let args = tensor_args(&plan(activation::GEGLU_BACKWARD, &ops).unwrap()[0]);
    assert_eq!(args.len(), 5);
    assert_eq!(args[3], (2, vec![10, 5], vec![10, 1], 0));
    assert_eq!(args[4], (2, vec![10, 5], vec![10, 1], 5));

    // A padded row stride (a slice of a wider buffer) is kept, not flattened.
    let mut ops = operands(activation::RELU, F32, &[6, 100]);
    ops[0].strides = vec![128, 1];
    let args = tensor_args(&plan(activation::RELU, &ops).unwrap()[0]);
    assert_eq!(args[0], (0, vec![6, 100], vec![128, 1], 0));
    assert_eq!(args[1], (1, vec![6, 100], vec![100, 1], 0));
}

/// Every call runs the gather form, aligned or not; the tuner also tries each tile as views. The
/// tuning class tells aligned calls from unaligned ones (their kernels differ in layout facts).
#[test]
fn gather_form_for_every_call() {
    /// `op` on `x` (its row stride padded to `stride`, if given), aligned on 16 bytes or not.
    struct Case {
        op: &'static str,
        dt: ScalarType,
        x: &'static [i64],
        stride: Option<i64>,
        aligned: bool,
    }
    let case = |op, dt, x, stride, aligned| Case {
        op,
        dt,
        x,
        stride,
        aligned,
    };
    let cases = [
        case(activation::SILU_AND_MUL, BF16, &[1000, 1026], None, false),
        case(activation::SILU_AND_MUL, BF16, &[16384, 8192], None, true),
        case(activation::SILU_AND_MUL, F32, &[1000, 1026], None, false),
        case(activation::SILU_AND_MUL, F32, &[7, 16], None, true),
        case(
            activation::SILU_AND_MUL_BACKWARD,
            F16,
            &[3, 7, 66],
            None,
            false,
        ),
        case(activation::RELU, BF16, &[1000, 1026], None, true),
        case(activation::RELU, F32, &[6, 100], Some(128), true),
        case(activation::GELU, BF16, &[6, 90], Some(100), false),
    ];
    let t = target();
    for Case {
        op,
        dt,
        x,
        stride,
        aligned,
    } in cases
    {
        let mut ops = operands(op, dt, x);
        if let Some(s) = stride {
            ops[0].strides = vec![s, 1];
        }
        let c = plan(op, &ops).unwrap()[0].config.clone();
        assert!(c.ends_with(" gather"), "{op} {dt} {x:?}: {c}");
        let all = activation::plan(op, &ops, &t, true).unwrap();
        let gathers = all.iter().filter(|l| l.config.ends_with(" gather")).count();
        assert!(
            gathers > 0 && gathers < all.len(),
            "{op} {x:?}: {gathers} of {}",
            all.len()
        );
        let default = activation::config::choose(&t, 1, 1 << 20);
        let class = activation::config::class(&default, dt, aligned);
        assert_eq!(class.ends_with(" unaligned"), !aligned, "{class}");
    }
}

#[test]
fn tiles_follow_call_size_and_row_length() {
    let t = target();
    let tile = |rows, cols| {
        let c = activation::config::choose(&t, rows, cols);
        assert!(c.gather);
        (c.tm, c.bn)
    };
    // (rows, cols, tile): large calls one row of 2048 (as one long row or on rows of at least
    // 2048), rows of 1024 or less the one-row tile that fits them; short rows of a large call a
    // tile of several rows; calls under 2048 elements per SM one row of 1024, whatever the rows.
    let cases = [
        (1, 1 << 27, (1, 2048)),
        (16384, 4096, (1, 2048)),
        (1, 1 << 20, (1, 2048)),
        (1, 200_000, (1, 1024)),
        (4096, 2048, (1, 2048)),
        (1000, 513, (1, 1024)),
        (100_000, 64, (64, 64)),
        (100_000, 300, (64, 64)),
        (21, 33, (1, 1024)),
        (1, 1386, (1, 1024)),
        (3, 33, (1, 1024)),
    ];
    for (rows, cols, want) in cases {
        assert_eq!(tile(rows, cols), want, "{rows} x {cols}");
    }
    for (rows, cols) in [(1, 100_000), (16384, 4096), (3, 33), (1000, 513)] {
        let default = activation::config::choose(&t, rows, cols);
        let all = activation::config::candidates(default, rows, cols);
        assert_eq!(all[0], default);
        assert!(
            all.iter()
                .all(|c| c.tm <= (rows as u64).next_power_of_two() as i64)
        );
        assert!(
            all.iter().any(|c| !c.gather),
            "{rows}x{cols}: no view candidate"
        );
    }
}

/// Every representative call of the family, every tuning candidate, specializes for sm_90.
#[test]
fn every_candidate_specializes() {
    let jobs =
        cutile_kernels::catalog::dsl_jobs(&activation::representative_calls(), true).unwrap();
    assert!(jobs.len() > 30, "only {} jobs", jobs.len());
    for j in &jobs {
        j.build()
            .unwrap_or_else(|e| panic!("{} {}: {e}", j.kernel, j.specialization));
    }
}

/// Every representative call's default launch compiles with tileiras for sm_90.
#[test]
fn representative_calls_compile_for_sm90() {
    let jobs =
        cutile_kernels::catalog::dsl_jobs(&activation::representative_calls(), false).unwrap();
    let cases: Vec<_> = jobs
        .iter()
        .map(|j| {
            let (k, metas) = j.dsl_spec().unwrap();
            // Unique names (saved cubins are named after them); a test may leak.
            let name: &'static str = Box::leak(
                format!("{} {}", j.kernel, j.specialization)
                    .replace(['/', ' ', '[', ']', ','], "_")
                    .into_boxed_str(),
            );
            (name, k.clone(), metas.to_vec())
        })
        .collect();
    common::compile_all_sm90("representative_calls_compile_for_sm90", cases);
}

#[test]
fn every_op_is_in_the_registry() {
    let names: Vec<_> = cutile_kernels::op::ops().iter().map(|o| o.name).collect();
    for o in OPS {
        assert!(names.contains(&o.name), "{} missing", o.name);
        let f = o.operand_names().len();
        let shapes = o.operand_shapes(&[4, 6]).unwrap();
        assert_eq!(shapes.len(), f);
        if o.form == Form::Gated {
            assert_eq!(shapes[1], vec![4, 3]);
        }
    }
    // What the host functions ask for, each exactly once.
    use Activation::*;
    for (act, form) in [
        (Silu, Form::Gated),
        (Silu, Form::Pair),
        (GeluErf, Form::Unary),
        (GeluTanh, Form::Unary),
        (GeluErf, Form::Gated),
        (GeluTanh, Form::Gated),
        (Relu, Form::Unary),
    ] {
        for backward in [false, true] {
            let n = OPS
                .iter()
                .filter(|o| o.act == act && o.form == form && o.backward == backward)
                .count();
            assert_eq!(n, 1, "{act:?} {form:?} backward={backward}");
        }
    }
    assert_eq!(OPS.len(), 14);
}

// ---------------------------------------------------------------------------------------------------------
// GPU property tests through the host API.

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{DeviceElement, Stream, Tensor};
    use half::{bf16, f16};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    /// One case: op, element type, logical shape of the first input, row padding of the first input
    /// (0: contiguous; else a `.slice` of a wider buffer), input magnitude, data seed.
    #[derive(Debug, Clone)]
    struct Case {
        op: OpSpec,
        dtype: ScalarType,
        shape: Vec<i64>,
        pad: i64,
        scale: f32,
        seed: u64,
    }

    fn shapes() -> impl Strategy<Value = Vec<i64>> {
        // One element, tiny, ragged, rank 1-3, and large (a few million elements); even last axes so
        // the gated ops take every shape.
        prop_oneof![
            Just(vec![2]),
            (1i64..5).prop_map(|n| vec![2 * n]),
            (1i64..70, 1i64..700).prop_map(|(r, c)| vec![r, 2 * c]),
            (1i64..4, 1i64..40, 1i64..200).prop_map(|(a, r, c)| vec![a, r, 2 * c]),
            (1i64..3).prop_map(|k| vec![1000 * k + 17, 4096]),
            Just(vec![3, 1 << 20]),
        ]
    }

    fn cases() -> impl Strategy<Value = Case> {
        (
            proptest::sample::select(OPS),
            proptest::sample::select(vec![F32, F16, BF16]),
            shapes(),
            prop_oneof![Just(0i64), Just(0), 1i64..40],
            prop_oneof![Just(1.0f32), Just(6.0), Just(300.0)],
            any::<u64>(),
        )
            .prop_map(|(op, dtype, shape, pad, scale, seed)| Case {
                op,
                dtype,
                shape,
                pad,
                scale,
                seed,
            })
    }

    fn up<T: DeviceElement>(dev: &cutile::runtime::Device, v: &[f32], shape: &[i64]) -> Tensor<T> {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).unwrap()
    }

    fn down<T: DeviceElement>(t: &Tensor<T>) -> Vec<f32> {
        t.to_host()
            .unwrap()
            .into_iter()
            .map(|v| v.to_f64() as f32)
            .collect()
    }

    fn run_case<T: DeviceElement>(
        dev: &cutile::runtime::Device,
        stream: &Stream,
        c: &Case,
    ) -> Result<(), TestCaseError> {
        let shapes = c.op.operand_shapes(&c.shape).unwrap();
        let n_in = shapes.len() - c.op.outputs();
        let round = |v: Vec<f32>| -> Vec<f32> {
            v.into_iter()
                .map(|x| T::from_f64(x as f64).to_f64() as f32)
                .collect()
        };
        let inputs: Vec<Vec<f32>> = shapes[..n_in]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n = s.iter().product::<i64>() as usize;
                let lo = -c.scale;
                round(cutile_testkit::data::uniform(
                    n,
                    c.seed ^ (i as u64 + 1),
                    lo,
                    c.scale,
                ))
            })
            .collect();
        // The first input stored with `pad` extra elements per row (filled with a value that would
        // show), passed as a slice.
        let cols = *c.shape.last().unwrap();
        let mut stored_shape = c.shape.clone();
        *stored_shape.last_mut().unwrap() += c.pad;
        let stored: Vec<f32> = inputs[0]
            .chunks(cols as usize)
            .flat_map(|row| {
                row.iter()
                    .copied()
                    .chain(std::iter::repeat_n(7777.0, c.pad as usize))
            })
            .collect();
        let t0 = up::<T>(dev, &stored, &stored_shape);
        let x = t0.slice(c.shape.len() - 1, 0..cols).unwrap();
        let rest: Vec<Tensor<T>> = (1..n_in)
            .map(|i| up::<T>(dev, &inputs[i], &shapes[i]))
            .collect();
        let mut outs: Vec<Tensor<T>> = shapes[n_in..]
            .iter()
            .map(|s| Tensor::<T>::zeros(dev, s).unwrap())
            .collect();
        activation::call_op(stream, &c.op, &x, &rest, &mut outs)
            .and_then(|p| Ok(p.wait()?))
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let refs: Vec<&[f32]> = inputs.iter().map(|v| v.as_slice()).collect();
        let want = r::op_reference(&c.op, &refs, cols as usize);
        let tol = cutile_kernels::tolerance(c.dtype);
        for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
            let got = down(o);
            let err = cutile_testkit::rel_l2(&got, w);
            prop_assert!(
                err <= tol,
                "output {k}: relative L2 error {err:e} > {tol:e}"
            );
        }
        Ok(())
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
    fn host_api_matches_reference_on_random_calls() {
        let Some((dev, stream)) = gpu_device("host_api_matches_reference_on_random_calls") else {
            return;
        };
        let mut runner = TestRunner::new(Config {
            cases: 200,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&cases(), |c| match c.dtype {
                F32 => run_case::<f32>(&dev, &stream, &c),
                F16 => run_case::<f16>(&dev, &stream, &c),
                _ => run_case::<bf16>(&dev, &stream, &c),
            })
            .unwrap();
    }

    /// The named host functions (what users call) against the references, bf16, a strided ragged `x`.
    #[test]
    #[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
    fn named_host_functions_match_reference() {
        use activation::GeluApprox::{None as Erf, Tanh};
        let Some((dev, s)) = gpu_device("named_host_functions_match_reference") else {
            return;
        };
        let (rows, cols) = (37i64, 130i64);
        let stored: Vec<f32> =
            cutile_testkit::data::uniform((rows * (cols + 3)) as usize, 5, -5.0, 5.0);
        let t = up::<bf16>(&dev, &stored, &[rows, cols + 3]);
        let x = t.slice(1, 0..cols).unwrap();
        let xs: Vec<f32> = down(&t)
            .chunks((cols + 3) as usize)
            .flat_map(|r| r[..cols as usize].to_vec())
            .collect();
        let full = [rows, cols];
        let half = [rows, cols / 2];
        let gh = up::<bf16>(
            &dev,
            &cutile_testkit::data::uniform((rows * cols / 2) as usize, 6, -1.0, 1.0),
            &half,
        );
        let gf = up::<bf16>(
            &dev,
            &cutile_testkit::data::uniform((rows * cols) as usize, 7, -1.0, 1.0),
            &full,
        );
        let b = up::<bf16>(
            &dev,
            &cutile_testkit::data::uniform((rows * cols) as usize, 8, -1.0, 1.0),
            &full,
        );
        let z = |shape: &[i64]| Tensor::<bf16>::zeros(&dev, shape).unwrap();
        let tol = cutile_kernels::tolerance(BF16);
        let check = |name: &str, outs: &[&Tensor<bf16>], ins: Vec<Vec<f32>>| {
            let refs: Vec<&[f32]> = ins.iter().map(|v| v.as_slice()).collect();
            let want = r::op_reference(spec(name), &refs, cols as usize);
            for (o, w) in outs.iter().zip(&want) {
                let err = cutile_testkit::rel_l2(&down(o), w);
                assert!(err <= tol, "{name}: relative L2 error {err:e}");
            }
        };
        let (g_half, g_full, bv) = (down(&gh), down(&gf), down(&b));
        let mut y = z(&half);
        activation::silu_and_mul(&s, &x, &mut y)
            .unwrap()
            .wait()
            .unwrap();
        check(activation::SILU_AND_MUL, &[&y], vec![xs.clone()]);
        let mut dx = z(&full);
        activation::silu_and_mul_backward(&s, &x, &gh, &mut dx)
            .unwrap()
            .wait()
            .unwrap();
        check(
            activation::SILU_AND_MUL_BACKWARD,
            &[&dx],
            vec![xs.clone(), g_half.clone()],
        );
        for (approx, fwd, bwd) in [
            (Erf, activation::GEGLU, activation::GEGLU_BACKWARD),
            (
                Tanh,
                activation::GEGLU_TANH,
                activation::GEGLU_TANH_BACKWARD,
            ),
        ] {
            let mut y = z(&half);
            activation::geglu(&s, &x, &mut y, approx)
                .unwrap()
                .wait()
                .unwrap();
            check(fwd, &[&y], vec![xs.clone()]);
            let mut dx = z(&full);
            activation::geglu_backward(&s, &x, &gh, &mut dx, approx)
                .unwrap()
                .wait()
                .unwrap();
            check(bwd, &[&dx], vec![xs.clone(), g_half.clone()]);
        }
        for (approx, fwd, bwd) in [
            (Erf, activation::GELU, activation::GELU_BACKWARD),
            (Tanh, activation::GELU_TANH, activation::GELU_TANH_BACKWARD),
        ] {
            let mut y = z(&full);
            activation::gelu(&s, &x, &mut y, approx)
                .unwrap()
                .wait()
                .unwrap();
            check(fwd, &[&y], vec![xs.clone()]);
            let mut dx = z(&full);
            activation::gelu_backward(&s, &x, &gf, &mut dx, approx)
                .unwrap()
                .wait()
                .unwrap();
            check(bwd, &[&dx], vec![xs.clone(), g_full.clone()]);
        }
        let mut y = z(&full);
        activation::relu(&s, &x, &mut y).unwrap().wait().unwrap();
        check(activation::RELU, &[&y], vec![xs.clone()]);
        let mut dx = z(&full);
        activation::relu_backward(&s, &x, &gf, &mut dx)
            .unwrap()
            .wait()
            .unwrap();
        check(
            activation::RELU_BACKWARD,
            &[&dx],
            vec![xs.clone(), g_full.clone()],
        );
        let mut y = z(&full);
        activation::swiglu(&s, &x, &b, &mut y)
            .unwrap()
            .wait()
            .unwrap();
        check(activation::SWIGLU, &[&y], vec![xs.clone(), bv.clone()]);
        let (mut da, mut db) = (z(&full), z(&full));
        activation::swiglu_backward(&s, &x, &b, &gf, &mut da, &mut db)
            .unwrap()
            .wait()
            .unwrap();
        check(
            activation::SWIGLU_BACKWARD,
            &[&da, &db],
            vec![xs, bv, g_full],
        );
    }

    /// Every op on every element type at the benchmark shape and a ragged one, contiguous and strided.
    #[test]
    #[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
    fn every_op_and_dtype_matches_reference() {
        let Some((dev, stream)) = gpu_device("every_op_and_dtype_matches_reference") else {
            return;
        };
        for op in OPS {
            for dtype in [F32, F16, BF16] {
                for (shape, pad) in [
                    (vec![16384i64, 8192], 0),
                    (vec![1, 1], 0),
                    (vec![333, 1026], 5),
                ] {
                    if op.form == Form::Gated && shape[1] % 2 == 1 {
                        continue;
                    }
                    let c = Case {
                        op: *op,
                        dtype,
                        shape,
                        pad,
                        scale: 6.0,
                        seed: 1,
                    };
                    let r = match dtype {
                        F32 => run_case::<f32>(&dev, &stream, &c),
                        F16 => run_case::<f16>(&dev, &stream, &c),
                        _ => run_case::<bf16>(&dev, &stream, &c),
                    };
                    r.unwrap_or_else(|e| panic!("{c:?}: {e}"));
                }
            }
        }
    }
}

/// The traced IR of a call's default launch.
fn ir_of(op: &str, dt: ScalarType, x: &[i64]) -> String {
    let call = cutile_kernels::op::CallSpec::new(op, &dt.to_string(), &[x], false);
    let jobs = cutile_kernels::catalog::dsl_jobs(&[call], false).unwrap();
    let (k, metas) = jobs[0].dsl_spec().unwrap();
    k.specialize(metas).unwrap().ir_text()
}

/// `ir` loads and stores through `load_{form}_tko` / `store_{form}_tko`, and never through `other`'s.
fn loads_and_stores_only(ir: &str, form: &str, other: &str) -> bool {
    ir.contains(&format!("load_{form}_tko"))
        && ir.contains(&format!("store_{form}_tko"))
        && !ir.contains(&format!("load_{other}_tko"))
        && !ir.contains(&format!("store_{other}_tko"))
}

/// 16-bit outputs take the approximate exp2 (flush-to-zero) and division; f32 outputs the exact ones;
/// every default moves its tiles by pointer gathers and scatters, aligned or not (`config::choose`).
#[test]
fn fast_math_only_for_16_bit_outputs_and_gathered_access() {
    for op in [
        activation::SILU_AND_MUL,
        activation::GELU_BACKWARD,
        activation::GEGLU_TANH,
    ] {
        let half = ir_of(op, BF16, &[64, 256]);
        assert!(half.contains("flush_to_zero"), "{op} bf16:\n{half}");
        assert!(half.contains("approx"), "{op} bf16:\n{half}");
        let full = ir_of(op, F32, &[64, 256]);
        assert!(!full.contains("flush_to_zero"), "{op} f32:\n{full}");
        assert!(!full.contains("approx"), "{op} f32:\n{full}");
        for ir in [&half, &full] {
            assert!(loads_and_stores_only(ir, "ptr", "view"), "{op}:\n{ir}");
        }
    }
    // Unaligned halves (`N` = 513) too.
    let gathered = ir_of(activation::SILU_AND_MUL, BF16, &[1000, 1026]);
    assert!(
        loads_and_stores_only(&gathered, "ptr", "view"),
        "{gathered}"
    );
    let relu = ir_of(activation::RELU, BF16, &[64, 256]);
    assert!(!relu.contains("exp"), "relu:\n{relu}");
}

/// The four kernels (the erf GELU, the longest math) in bf16 and f32 compile for sm_80, sm_90, sm_100
/// and sm_120, as `cargo xtask kernels` does for the whole catalog.
#[test]
fn compile_four_archs() {
    let calls: Vec<_> = [
        activation::GELU,
        activation::GELU_BACKWARD,
        activation::GEGLU,
        activation::GEGLU_BACKWARD,
    ]
    .iter()
    .flat_map(|op| {
        ["bf16", "f32"].map(|dt| cutile_kernels::op::CallSpec::new(op, dt, &[&[1000, 1026]], false))
    })
    .collect();
    common::compile_four_archs("compile_four_archs", common::catalog_jobs(&calls));
}

/// The tanh GELU forward with 16-bit elements takes one row of 8192 on calls of at least 64 such
/// tiles per SM with rows that long (`config::choose_long_rows`; a contiguous call is one long row);
/// smaller calls, short strided rows, f32, the gated form and the other activations keep the family's
/// tile.
#[test]
fn tanh_gelu_takes_long_row_tiles_on_long_rows_only() {
    let t = target();
    let default = |op: &str, dt: &str, shape: &[i64]| {
        let call = cutile_kernels::op::CallSpec::new(op, dt, &[shape], false);
        let config = call.plan(&t, false).unwrap().launches[0].config.clone();
        // Launch configs are named "<kernel> <tile>".
        config.split_once(' ').unwrap().1.to_string()
    };
    // (op, dtype, shape, default)
    let cases: &[(&str, &str, &[i64], &str)] = &[
        (
            activation::GELU_TANH,
            "bf16",
            &[16384, 8192],
            "TM=1 BN=8192 gather",
        ),
        (
            activation::GELU_TANH,
            "f16",
            &[8192, 16384],
            "TM=1 BN=8192 gather",
        ),
        (
            activation::GELU_TANH,
            "bf16",
            &[4096, 2048],
            "TM=1 BN=2048 gather",
        ),
        (
            activation::GELU_TANH,
            "bf16",
            &[8192, 8192],
            "TM=1 BN=2048 gather",
        ),
        (
            activation::GELU_TANH,
            "bf16",
            &[2, 8192],
            "TM=1 BN=1024 gather",
        ),
        (
            activation::GELU_TANH,
            "f32",
            &[16384, 8192],
            "TM=1 BN=2048 gather",
        ),
        (
            activation::GEGLU_TANH,
            "bf16",
            &[16384, 16384],
            "TM=1 BN=2048 gather",
        ),
        (
            activation::GELU,
            "bf16",
            &[16384, 8192],
            "TM=1 BN=2048 gather",
        ),
        (
            activation::GELU_TANH_BACKWARD,
            "bf16",
            &[16384, 8192],
            "TM=1 BN=2048 gather",
        ),
    ];
    for &(op, dt, shape, want) in cases {
        assert_eq!(default(op, dt, shape), want, "{op} {dt} {shape:?}");
    }
}

/// The folded tanh GELU (`ActConfig::folded`) is a tuner candidate of the tanh GELU's forward ops
/// with 16-bit outputs only, on the default tile; its kernel issues fewer f32 ops per element than the
/// default's (one `fma` for the cubic, one `exp2`, one division, no `x · sigmoid` product).
#[test]
fn folded_tanh_gelu_is_a_candidate_of_its_16_bit_forward_ops_only() {
    let t = cutile_kernels::op::Target::planning(cutile::toolchain::GpuArch::Sm90);
    let folded = |op: &str, dt: &str| -> Vec<String> {
        let call = cutile_kernels::op::CallSpec::new(op, dt, &[&[64, 256]], false);
        call.plan(&t, true)
            .unwrap()
            .launches
            .iter()
            .filter(|l| l.config.ends_with(" folded"))
            .map(|l| l.config.clone())
            .collect()
    };
    for op in [activation::GELU_TANH, activation::GEGLU_TANH] {
        for dt in ["bf16", "f16"] {
            let f = folded(op, dt);
            assert_eq!(f.len(), 1, "{op} {dt}: {f:?}");
        }
        assert!(folded(op, "f32").is_empty(), "{op} f32");
    }
    for op in [
        activation::GELU_TANH_BACKWARD,
        activation::GEGLU_TANH_BACKWARD,
        activation::GELU,
        activation::SILU_AND_MUL,
    ] {
        assert!(folded(op, "bf16").is_empty(), "{op}");
    }
    // The folded kernel against the default on the same call.
    let call =
        cutile_kernels::op::CallSpec::new(activation::GELU_TANH, "bf16", &[&[64, 256]], false);
    let planned = call.plan(&t, true).unwrap();
    let ir = |folded: bool| {
        let l = planned
            .launches
            .iter()
            .find(|l| l.config.ends_with(" folded") == folded)
            .unwrap();
        common::specialize_launch(&planned, l).ir_text()
    };
    let math = |ir: &str| {
        ["mulf", "addf", "subf", "negf", "fma", "divf", "exp2"]
            .iter()
            .map(|op| ir.matches(&format!("= {op} ")).count())
            .sum::<usize>()
    };
    let (base, fold) = (ir(false), ir(true));
    assert!(
        math(&fold) < math(&base),
        "folded {} >= default {}:\n{fold}",
        math(&fold),
        math(&base)
    );
    assert_eq!(fold.matches("= exp2 ").count(), 1, "{fold}");
    assert_eq!(fold.matches("= divf ").count(), 1, "{fold}");
    // And tileiras compiles it.
    let l = planned
        .launches
        .iter()
        .find(|l| l.config.ends_with(" folded"))
        .unwrap();
    // SAFETY: described operands are never launched.
    let args = unsafe { cutile_kernels::op::describe(l, &planned.operands) };
    common::compile_all_sm90(
        "folded_tanh_gelu",
        [("gelu_tanh_folded", l.kernel.clone(), args.tensor_metas())],
    );
}
