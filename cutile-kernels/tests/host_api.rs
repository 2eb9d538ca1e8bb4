//! The host API without a GPU: every op's validation (typed errors naming both values, empty tensors as
//! no-ops), the configuration choice per shape class, the registry, and that every plan specializes.
//! The planners are what the ops run before launching, so a refusal here is a refusal there.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::op::{CallSpec, OpError, Operand, Target, ops};
use cutile_kernels::{attention, gemm, norm, softmax, vector_add};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn d(name: &'static str, i: usize, dt: ScalarType, shape: &[i64]) -> Operand {
    Operand::described(name, i, dt, shape)
}

fn call(op: &str, dtype: &str, shapes: &[&[i64]]) -> CallSpec {
    CallSpec {
        op: op.into(),
        dtype: dtype.into(),
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        causal: false,
    }
}

/// What planning an op gives: its launches or the refusal.
type Planned = Result<Vec<cutile_kernels::op::PlannedLaunch>, OpError>;

/// `(what, result, expected substring of the error)`: each must fail with that text.
fn expect_errors(cases: Vec<(&str, Planned, &str)>) {
    for (what, result, needle) in cases {
        match result {
            Ok(p) => panic!(
                "{what}: expected an error containing {needle:?}, planned {} launches",
                p.len()
            ),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(needle),
                    "{what}: error {msg:?} lacks {needle:?}"
                );
            }
        }
    }
}

#[test]
fn bad_calls_are_typed_errors_naming_both_values() {
    let t = target();
    let x = d("x", 0, BF16, &[4, 100]);
    let y32 = d("y", 1, F32, &[4, 100]);
    let y_wrong = d("y", 1, BF16, &[4, 101]);
    let x_i32 = d("x", 0, I32, &[4, 100]);
    let mut x_strided = d("x", 0, BF16, &[4, 100]);
    x_strided.strides = vec![1, 4]; // a transposed view: last axis not contiguous
    let w_short = d("w", 1, BF16, &[99]);
    expect_errors(vec![
        (
            "softmax dtype mismatch",
            softmax::plan(&[x.clone(), y32], &t, false),
            "must match `x` (bf16)",
        ),
        (
            "softmax shape mismatch",
            softmax::plan(&[x.clone(), y_wrong], &t, false),
            "`y` must have `x`'s shape: [4, 101] != [4, 100]",
        ),
        (
            "softmax int input",
            softmax::plan(&[x_i32.clone(), x_i32], &t, false),
            "the op takes f32, f16, bf16",
        ),
        (
            "softmax strided last axis",
            softmax::plan(&[x_strided.clone(), x_strided], &t, false),
            "last axis must be contiguous",
        ),
        (
            "rms_norm weight length",
            norm::plan_rms_norm(&[x.clone(), w_short, d("y", 2, BF16, &[4, 100])], &t, 1e-5),
            "`w` must have the length of `x`'s last axis: 99 != 100",
        ),
        (
            "rms_norm negative eps",
            norm::plan_rms_norm(
                &[
                    x.clone(),
                    d("w", 1, BF16, &[100]),
                    d("y", 2, BF16, &[4, 100]),
                ],
                &t,
                -1.0,
            ),
            "eps must be finite",
        ),
        (
            "gemm inner extents",
            gemm::plan(
                &[
                    d("a", 0, BF16, &[64, 32]),
                    d("b", 1, BF16, &[31, 16]),
                    d("c", 2, BF16, &[64, 16]),
                ],
                &t,
                false,
            ),
            "32 != 31",
        ),
        (
            "gemm f32",
            gemm::plan(
                &[
                    d("a", 0, F32, &[64, 32]),
                    d("b", 1, F32, &[32, 16]),
                    d("c", 2, F32, &[64, 16]),
                ],
                &t,
                false,
            ),
            "the op takes bf16, f16",
        ),
        (
            "gemm rank",
            gemm::plan(
                &[
                    d("a", 0, BF16, &[2, 64, 32]),
                    d("b", 1, BF16, &[32, 16]),
                    d("c", 2, BF16, &[64, 16]),
                ],
                &t,
                false,
            ),
            "`a` must have 2 dimensions",
        ),
        (
            "attention head dim",
            attention::plan(
                &[
                    d("q", 0, BF16, &[2, 4, 8, 96]),
                    d("k", 1, BF16, &[2, 4, 8, 96]),
                    d("v", 2, BF16, &[2, 4, 8, 96]),
                    d("o", 3, BF16, &[2, 4, 8, 96]),
                ],
                &t,
                &Default::default(),
            ),
            "head dimension 96",
        ),
        (
            "attention GQA heads",
            attention::plan(
                &[
                    d("q", 0, BF16, &[2, 6, 8, 64]),
                    d("k", 1, BF16, &[2, 4, 8, 64]),
                    d("v", 2, BF16, &[2, 4, 8, 64]),
                    d("o", 3, BF16, &[2, 6, 8, 64]),
                ],
                &t,
                &Default::default(),
            ),
            "`k`'s heads must divide `q`'s heads",
        ),
        (
            "add on another device",
            vector_add::plan_add(
                &[d("a", 0, F32, &[10]), d("b", 1, F32, &[10]), {
                    let mut c = d("c", 2, F32, &[10]);
                    c.device = 1;
                    c
                }],
                &t,
            ),
            "`c` is on device 1 but the stream runs on device 0",
        ),
    ]);
}

#[test]
fn empty_tensors_plan_no_launch() {
    let t = target();
    let e = [d("x", 0, F32, &[0, 7]), d("y", 1, F32, &[0, 7])];
    assert!(softmax::plan(&e, &t, false).unwrap().is_empty());
    let ln = [
        d("x", 0, BF16, &[3, 0, 16]),
        d("w", 1, BF16, &[16]),
        d("b", 2, BF16, &[16]),
        d("y", 3, BF16, &[3, 0, 16]),
    ];
    assert!(norm::plan_layer_norm(&ln, &t, 1e-5).unwrap().is_empty());
    let g = [
        d("a", 0, F16, &[0, 8]),
        d("b", 1, F16, &[8, 4]),
        d("c", 2, F16, &[0, 4]),
    ];
    assert!(gemm::plan(&g, &t, false).unwrap().is_empty());
    assert!(
        vector_add::plan_add(
            &[
                d("a", 0, F32, &[0]),
                d("b", 1, F32, &[0]),
                d("c", 2, F32, &[0])
            ],
            &t
        )
        .unwrap()
        .is_empty()
    );
}

#[test]
fn leading_axes_flatten_into_rows() {
    let t = target();
    let x = d("x", 0, BF16, &[4, 97, 129]);
    let plan = softmax::plan(&[x.clone(), d("y", 1, BF16, &[4, 97, 129])], &t, false).unwrap();
    let cutile_kernels::op::PlannedArg::Tensor { shape, strides, .. } = &plan[0].args[0] else {
        panic!("first argument is not a tensor");
    };
    assert_eq!(shape, &[4 * 97, 129]);
    assert_eq!(strides, &[129, 1]);
    // A row-sliced view (row stride > row length) flattens too; interleaved leading axes do not.
    let mut padded = x.clone();
    padded.strides = vec![97 * 256, 256, 1];
    assert!(padded.as_rows("softmax").is_ok());
    let mut swapped = x;
    swapped.strides = vec![129, 4 * 129, 1];
    assert!(swapped.as_rows("softmax").is_err());
}

#[test]
fn configuration_follows_the_shape_class() {
    use softmax::config::{Variant, choose};
    let t = target();
    // Rows wider than a whole-row gather take the chunked gather form; a whole-row gather otherwise.
    assert_eq!(choose(&t, BF16, 16, 131072).variant, Variant::GatherOnline);
    assert_eq!(choose(&t, BF16, 16, 32768).variant, Variant::Gather);
    assert_eq!(choose(&t, F32, 1000, 1023).variant, Variant::Gather);
    assert_eq!(choose(&t, F32, 1000, 1023).bn, 1024);
    assert_eq!(choose(&t, BF16, 3, 100).bn, 128);
    // Same class, same choice; every candidate list starts with the default and has no duplicates.
    for (rows, cols) in [
        (1i64, 1i64),
        (7, 129),
        (1000, 1023),
        (8192, 8192),
        (16, 131072),
        (5, 8193),
    ] {
        for dt in [F32, F16, BF16] {
            let c = softmax::config::candidates(&t, dt, rows, cols);
            assert_eq!(c[0], choose(&t, dt, rows, cols), "{dt} {rows}x{cols}");
            let set: std::collections::HashSet<_> = c.iter().collect();
            assert_eq!(set.len(), c.len());
        }
    }
    assert_eq!(
        norm::config::choose("rms_norm", 1023).variant,
        norm::Variant::Gather
    );
    assert_eq!(
        norm::config::choose("rms_norm", 8193).variant,
        norm::Variant::GatherLooped
    );
    assert_eq!(
        norm::config::choose("layer_norm", 8192).variant,
        norm::Variant::Persistent
    );
    assert_eq!(norm::config::choose("layer_norm", 8192).tm, 2);
    // GEMM: persistent once there is a 128x128 tile per SM, one tile per block below.
    assert!(gemm::config::choose(&t, 4096, 4096).persistent);
    assert!(!gemm::config::choose(&t, 64, 4096).persistent);
    assert_eq!(gemm::config::choose(&t, 64, 4096).bm, 64);
}

/// Every candidate of every representative call plans, and specializes (traces) for sm_90.
#[test]
fn every_candidate_of_every_representative_call_specializes() {
    let t = target();
    let mut n = 0;
    for c in cutile_kernels::catalog::representative_calls() {
        let planned = c
            .plan(&t, true)
            .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
        assert!(!planned.launches.is_empty(), "{}", c.label());
        for l in &planned.launches {
            // SAFETY: described operands are never launched.
            let args = unsafe { cutile_kernels::op::describe(l, &planned.operands) };
            cutile::launch::Launcher::new(l.kernel.clone())
                .plan_for(&args, GpuArch::Sm90, cutile::launch::NO_TOOLCHAIN)
                .unwrap_or_else(|e| panic!("{} / {}: {e}", c.label(), l.config));
            n += 1;
        }
    }
    assert!(n > 50, "only {n} launches planned");
}

#[test]
fn registry_knows_every_op_and_refuses_unknown_ones() {
    let names: Vec<_> = ops().iter().map(|o| o.name).collect();
    for op in [
        "add",
        "axpy",
        "softmax",
        "rms_norm",
        "layer_norm",
        "gemm",
        "attention",
    ] {
        assert!(names.contains(&op), "{op} missing from the registry");
    }
    let err = call("sofmax", "bf16", &[&[4, 4]])
        .plan(&target(), false)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no op named `sofmax`; known ops: add, axpy, softmax")
    );
    let err = call("softmax", "f8", &[&[4, 4]])
        .plan(&target(), false)
        .unwrap_err();
    assert!(err.to_string().contains("unknown element type `f8`"));
    let err = call("gemm", "bf16", &[&[4, 4]])
        .plan(&target(), false)
        .unwrap_err();
    assert!(err.to_string().contains("lists 2 input shape(s), got 1"));
}
