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
    CallSpec::new(op, dtype, shapes, false)
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
            "opt in with `GemmOptions { allow_tf32: true }`",
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
                false,
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
                false,
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
    // Rows wider than a whole-row gather take the chunked gather form; a whole-row gather otherwise
    // (with at least as many rows as SMs: fewer rows of 16384+ columns are split across blocks).
    assert_eq!(choose(&t, BF16, 132, 131072).variant, Variant::GatherOnline);
    assert_eq!(choose(&t, BF16, 132, 32768).variant, Variant::GatherOnline);
    assert_eq!(choose(&t, BF16, 132, 16384).variant, Variant::Gather);
    assert_eq!(choose(&t, BF16, 16, 131072).variant, Variant::Split);
    assert_eq!(choose(&t, BF16, 16, 32768).variant, Variant::Split);
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
        norm::config::choose("rms_norm", BF16, 1023).variant,
        norm::Variant::Gather
    );
    assert_eq!(
        norm::config::choose("rms_norm", BF16, 8193).variant,
        norm::Variant::GatherLooped
    );
    assert_eq!(
        norm::config::choose("layer_norm", BF16, 8192).variant,
        norm::Variant::GatherLooped
    );
    assert_eq!(
        norm::config::choose("layer_norm", F32, 8192).variant,
        norm::Variant::Gather
    );
    assert_eq!(norm::config::choose("layer_norm", BF16, 8192).bn, 2048);
    assert_eq!(
        norm::config::choose("layer_norm", BF16, 1000).variant,
        norm::Variant::Gather
    );
    // GEMM: persistent once there is a 128x128 tile per SM, one tile per block below.
    assert!(gemm::config::choose(&t, BF16, 4096, 4096).persistent);
    assert!(!gemm::config::choose(&t, BF16, 64, 4096).persistent);
    assert_eq!(gemm::config::choose(&t, BF16, 64, 4096).bm, 64);
    // The plain product: at most 32 rows in 16- or 32-row tiles, 64 wide and 128 deep (not f32); 33
    // rows and up as above.
    let p = |dt, m| {
        let c = gemm::config::choose_product(&t, dt, m, 8192);
        (c.bm, c.bn, c.bk, c.persistent)
    };
    assert_eq!(p(BF16, 1), (16, 64, 128, false));
    assert_eq!(p(F16, 16), (16, 64, 128, false));
    assert_eq!(p(BF16, 17), (32, 64, 128, false));
    assert_eq!(p(BF16, 32), (32, 64, 128, false));
    assert_eq!(p(BF16, 33), (64, 128, 64, false));
    assert_eq!(p(F32, 16), (64, 128, 32, false));
}

/// Every candidate of every representative call plans, specializes (traces) for sm_90 and has a launch
/// grid the launcher can use (explicit, or derived from an output stored through its tile partition):
/// a gathered or chunked kernel with neither fails only at launch, so this is checked here, without a
/// device.
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
            let plan = cutile::launch::Launcher::new(l.kernel.clone())
                .plan_for(&args, GpuArch::Sm90, cutile::launch::NO_TOOLCHAIN)
                .unwrap_or_else(|e| panic!("{} / {}: {e}", c.label(), l.config));
            let grid = plan
                .signature
                .grid(l.kernel.name(), &args)
                .unwrap_or_else(|e| panic!("{} / {}: {e}", c.label(), l.config));
            let Some((x, y, z)) = grid else {
                panic!("{} / {}: no launch grid", c.label(), l.config);
            };
            assert!(
                x >= 1 && y >= 1 && z >= 1,
                "{} / {}: grid {grid:?}",
                c.label(),
                l.config
            );
            n += 1;
        }
    }
    assert!(n > 50, "only {n} launches planned");
}

/// A tuning bundle (`plan`, every candidate) serves the default launches too: every launcher key of a
/// representative call's default plan is among its all-candidates plan's (a call without candidates
/// must still plan its default; a bundle without it fails at run time with "kernel not available").
#[test]
fn every_default_launch_is_among_the_candidates() {
    let keys = |c: &CallSpec, all: bool| -> Vec<String> {
        cutile_kernels::op::registry::launcher_plans(
            std::slice::from_ref(c),
            GpuArch::Sm90,
            cutile::launch::NO_TOOLCHAIN,
            all,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", c.label()))
        .into_iter()
        .map(|(_, p)| p.key.hex())
        .collect()
    };
    for c in cutile_kernels::catalog::representative_calls() {
        let all = keys(&c, true);
        for k in keys(&c, false) {
            assert!(
                all.contains(&k),
                "{}: default launch {k} not planned with every candidate",
                c.label()
            );
        }
    }
}

/// GEMM operands whose rows are not 16-byte aligned are packed into aligned regions of a scratch
/// operand (and the product unpacked), aligned ones are read in place, and the regions stay disjoint
/// inside the scratch.
#[test]
fn gemm_packs_exactly_the_unaligned_operands() {
    use cutile_kernels::op::PlannedArg;
    let t = target();
    /// (a shape, b shape, b passed transposed, launches: pack a, pack b, product, unpack c)
    type Case<'s> = (&'s [i64], &'s [i64], bool, [bool; 4]);
    let cases: [Case; 5] = [
        (
            &[4096, 4096],
            &[4096, 4096],
            false,
            [false, false, true, false],
        ),
        (&[1000, 517], &[517, 1023], false, [true, true, true, true]),
        (&[1000, 512], &[512, 1023], false, [false, true, true, true]),
        (
            &[1000, 517],
            &[517, 1024],
            false,
            [true, false, true, false],
        ),
        // `b` stored `[n, k]` with k = 512: its transposed view is aligned.
        (&[999, 512], &[512, 640], true, [false, false, true, false]),
    ];
    for (a, b, transposed, want) in cases {
        let c = [a[0], b[1]];
        let mut bo = d("b", 1, BF16, b);
        if transposed {
            bo.strides = vec![1, b[0]];
        }
        let ops = gemm::with_scratch(&[d("a", 0, BF16, a), bo, d("c", 2, BF16, &c)], &t).unwrap();
        let packs = want[0] || want[1] || want[3];
        assert_eq!(ops.len(), 3 + usize::from(packs), "{a:?} {b:?}");
        let launches = gemm::plan(&ops, &t, false).unwrap();
        let names: Vec<&str> = launches.iter().map(|l| l.kernel.name()).collect();
        let expect: Vec<&str> = [
            (want[0], "copy_tiles"),
            (want[1], "copy_tiles"),
            (
                true,
                names
                    .iter()
                    .find(|n| n.starts_with("gemm"))
                    .copied()
                    .unwrap_or("gemm"),
            ),
            (want[3], "copy_tiles"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect();
        assert_eq!(names, expect, "{a:?} {b:?}");
        // Regions of the scratch (operand 3): aligned pitch, disjoint, inside it.
        let mut spans = Vec::new();
        for l in &launches {
            for arg in &l.args {
                if let PlannedArg::Tensor {
                    operand: 3,
                    shape,
                    strides,
                    offset,
                    ..
                } = arg
                {
                    assert_eq!(strides[1], 1);
                    assert_eq!(strides[0] % 16, 0, "pitch {strides:?}");
                    assert_eq!(offset % 128, 0, "offset {offset}");
                    spans.push((*offset, offset + shape[0] * strides[0]));
                }
            }
        }
        spans.sort();
        spans.dedup();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlapping regions {spans:?}");
        }
        if let Some(last) = spans.last() {
            assert!(
                last.1 <= ops[3].shape[0],
                "{spans:?} past {:?}",
                ops[3].shape
            );
        }
    }
    // A scratch too small is a typed error naming the size it needs.
    let ops = [
        d("a", 0, BF16, &[10, 7]),
        d("b", 1, BF16, &[7, 9]),
        d("c", 2, BF16, &[10, 9]),
        d("packed", 3, BF16, &[16]),
    ];
    let err = gemm::plan(&ops, &t, false).unwrap_err().to_string();
    assert!(
        err.contains("scratch_len") && err.contains(&gemm::scratch_len(10, 9, 7).to_string()),
        "{err}"
    );
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
        "add_rms_norm",
        "rms_norm_heads",
        "layer_norm_stats",
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

#[test]
fn fused_and_per_head_norm_bad_calls_are_typed_errors() {
    let t = target();
    let x = d("x", 0, BF16, &[4, 100]);
    let w = d("w", 2, BF16, &[100]);
    let add = |r: Operand, w: Operand, h: Operand, y: Operand| {
        norm::plan_add_rms_norm(&[x.clone(), r, w, h, y], &t, 1e-6)
    };
    let stats = |mean: Operand, rstd: Operand| {
        norm::plan_layer_norm_stats(
            &[
                x.clone(),
                d("w", 1, BF16, &[100]),
                d("b", 2, BF16, &[100]),
                d("y", 3, BF16, &[4, 100]),
                mean,
                rstd,
            ],
            &t,
            1e-5,
        )
    };
    let heads =
        |x: Operand, w: Operand, y: Operand| norm::plan_rms_norm_heads(&[x, w, y], &t, 1e-6, false);
    let mut q_in_qkv = d("x", 0, BF16, &[16, 8, 128]);
    q_in_qkv.strides = vec![12 * 128, 128, 1];
    let mut tokens_interleaved = d("x", 0, BF16, &[2, 16, 8, 128]);
    tokens_interleaved.strides = vec![8 * 128, 2 * 8 * 128, 128, 1];
    expect_errors(vec![
        (
            "add_rms_norm residual shape",
            add(
                d("r", 1, BF16, &[4, 99]),
                w.clone(),
                d("h", 3, BF16, &[4, 100]),
                d("y", 4, BF16, &[4, 100]),
            ),
            "`r` must have `x`'s shape: [4, 99] != [4, 100]",
        ),
        (
            "add_rms_norm h dtype",
            add(
                d("r", 1, BF16, &[4, 100]),
                w.clone(),
                d("h", 3, F32, &[4, 100]),
                d("y", 4, BF16, &[4, 100]),
            ),
            "`h` has element type f32; it must match `x` (bf16)",
        ),
        (
            "add_rms_norm weight length",
            add(
                d("r", 1, BF16, &[4, 100]),
                d("w", 2, BF16, &[101]),
                d("h", 3, BF16, &[4, 100]),
                d("y", 4, BF16, &[4, 100]),
            ),
            "`w` must have the length of `x`'s last axis: 101 != 100",
        ),
        (
            "add_rms_norm operand count",
            norm::plan_add_rms_norm(
                &[x.clone(), w.clone(), d("y", 2, BF16, &[4, 100])],
                &t,
                1e-6,
            ),
            "takes 5 tensors, got 3",
        ),
        (
            "layer_norm_stats bf16 mean",
            stats(d("mean", 4, BF16, &[4]), d("rstd", 5, F32, &[4])),
            "`mean` has element type bf16; the statistics are f32",
        ),
        (
            "layer_norm_stats rstd shape",
            stats(d("mean", 4, F32, &[4]), d("rstd", 5, F32, &[4, 1])),
            "`rstd` must have `x`'s leading shape (one per row): [4, 1] != [4]",
        ),
        (
            "layer_norm_stats negative eps",
            norm::plan_layer_norm_stats(
                &[
                    x.clone(),
                    d("w", 1, BF16, &[100]),
                    d("b", 2, BF16, &[100]),
                    d("y", 3, BF16, &[4, 100]),
                    d("mean", 4, F32, &[4]),
                    d("rstd", 5, F32, &[4]),
                ],
                &t,
                f32::NAN,
            ),
            "eps must be finite",
        ),
        (
            "rms_norm_heads rank 2",
            heads(
                x.clone(),
                d("w", 1, BF16, &[100]),
                d("y", 2, BF16, &[4, 100]),
            ),
            "`x` must have 3 or more ([.., tokens, heads, head_dim]) dimensions, but it has shape [4, 100]",
        ),
        (
            "rms_norm_heads weight length",
            heads(
                d("x", 0, BF16, &[16, 8, 128]),
                d("w", 1, BF16, &[8 * 128]),
                d("y", 2, BF16, &[16, 8, 128]),
            ),
            "`w` must have the length of `x`'s last (head_dim) axis: 1024 != 128",
        ),
        (
            "rms_norm_heads y shape",
            heads(
                d("x", 0, F16, &[16, 8, 128]),
                d("w", 1, F16, &[128]),
                d("y", 2, F16, &[16, 4, 128]),
            ),
            "`y` must have `x`'s shape: [16, 4, 128] != [16, 8, 128]",
        ),
        (
            "rms_norm_heads huge heads",
            heads(
                d("x", 0, F32, &[2, 2, 2048]),
                d("w", 1, F32, &[2048]),
                d("y", 2, F32, &[2, 2, 2048]),
            ),
            "head vectors of 2048 elements exceed the per-head kernel's 1024",
        ),
        (
            "rms_norm_heads tokens not flattenable",
            heads(
                tokens_interleaved,
                d("w", 1, BF16, &[128]),
                d("y", 2, BF16, &[2, 16, 8, 128]),
            ),
            "cannot be flattened into one token axis",
        ),
    ]);
    // `q` viewed out of a fused qkv projection plans, with its strides.
    let plan = heads(
        q_in_qkv,
        d("w", 1, BF16, &[128]),
        d("y", 2, BF16, &[16, 8, 128]),
    )
    .unwrap();
    let cutile_kernels::op::PlannedArg::Tensor { shape, strides, .. } = &plan[0].args[0] else {
        panic!("first argument is not a tensor");
    };
    assert_eq!(
        (shape.as_slice(), strides.as_slice()),
        (&[16i64, 8, 128][..], &[1536i64, 128, 1][..])
    );
    assert_eq!(
        plan[0].grid,
        Some((4, 1, 1)),
        "16·8 head vectors, 32 per block"
    );
}

#[test]
fn fused_and_per_head_norms_plan() {
    let t = target();
    // Empty tensors: no launch.
    let e = [
        d("x", 0, F16, &[0, 16]),
        d("r", 1, F16, &[0, 16]),
        d("w", 2, F16, &[16]),
        d("h", 3, F16, &[0, 16]),
        d("y", 4, F16, &[0, 16]),
    ];
    assert!(norm::plan_add_rms_norm(&e, &t, 1e-6).unwrap().is_empty());
    let e = [
        d("x", 0, BF16, &[0, 8, 64]),
        d("w", 1, BF16, &[64]),
        d("y", 2, BF16, &[0, 8, 64]),
    ];
    assert!(
        norm::plan_rms_norm_heads(&e, &t, 1e-6, true)
            .unwrap()
            .is_empty()
    );
    let e = [
        d("x", 0, F32, &[3, 0, 16]),
        d("w", 1, F32, &[16]),
        d("b", 2, F32, &[16]),
        d("y", 3, F32, &[3, 0, 16]),
        d("mean", 4, F32, &[3, 0]),
        d("rstd", 5, F32, &[3, 0]),
    ];
    assert!(
        norm::plan_layer_norm_stats(&e, &t, 1e-5)
            .unwrap()
            .is_empty()
    );
    // Rank-3 statistics flatten to one row axis; the arguments follow the kernel order.
    let ops = [
        d("x", 0, BF16, &[2, 37, 513]),
        d("w", 1, BF16, &[513]),
        d("b", 2, BF16, &[513]),
        d("y", 3, BF16, &[2, 37, 513]),
        d("mean", 4, F32, &[2, 37]),
        d("rstd", 5, F32, &[2, 37]),
    ];
    let plan = norm::plan_layer_norm_stats(&ops, &t, 1e-5).unwrap();
    assert_eq!(plan[0].config, "layer_norm_stats_gather BN=1024");
    assert_eq!(plan[0].grid, Some((74, 1, 1)), "one block per row");
    let kinds: Vec<String> = plan[0]
        .args
        .iter()
        .map(|a| match a {
            cutile_kernels::op::PlannedArg::Tensor {
                operand,
                shape,
                output,
                ..
            } => format!("{operand}{shape:?}{}", if *output { "out" } else { "" }),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "0[74, 513]",
            "1[513]",
            "2[513]",
            "F32(1e-5)",
            "3[74, 513]out",
            "4[74]out",
            "5[74]out"
        ]
    );
    // Configuration: as RMSNorm / LayerNorm for the fused row ops; about 4096 elements per block for heads.
    assert_eq!(
        norm::config::choose("add_rms_norm", BF16, 8192).variant,
        norm::Variant::Gather
    );
    assert_eq!(
        norm::config::choose("add_rms_norm", BF16, 8193).variant,
        norm::Variant::GatherLooped
    );
    assert_eq!(
        norm::config::choose("layer_norm_stats", BF16, 4096).variant,
        norm::Variant::Gather
    );
    assert_eq!(
        norm::config::choose("layer_norm_stats", BF16, 512).variant,
        norm::Variant::Gather
    );
    for stem in ["add_rms_norm", "layer_norm_stats"] {
        for cols in [1, 100, 1024, 8192, 9000, 100_000] {
            let c = norm::config::candidates(stem, BF16, cols);
            assert_eq!(c[0], norm::config::choose(stem, BF16, cols));
            assert!(
                c.iter()
                    .all(|c| !matches!(c.variant, norm::Variant::WholeRow | norm::Variant::Looped))
            );
        }
    }
    let h = norm::config::choose_heads(128);
    assert_eq!((h.tm, h.bd), (32, 128));
    let h = norm::config::choose_heads(80);
    assert_eq!((h.tm, h.bd), (32, 128));
    let h = norm::config::choose_heads(256);
    assert_eq!((h.tm, h.bd), (16, 256));
    assert_eq!(norm::config::candidates_heads(64).len(), 4);
    // Registry calls of the new ops plan.
    for (op, shape) in [
        ("add_rms_norm", &[4i64, 7, 100][..]),
        ("rms_norm_heads", &[5, 3, 64]),
        ("layer_norm_stats", &[9, 4096]),
    ] {
        let p = call(op, "f16", &[shape]).plan(&t, true).unwrap();
        assert!(!p.launches.is_empty(), "{op}");
    }
}
