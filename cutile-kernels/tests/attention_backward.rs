//! Attention backward (`attention_backward`) without a GPU, and on one when present:
//!
//! - the CPU reference against central finite differences of an f64 forward (`Σ O ∘ dO`) on tiny
//!   cases (plain, causal, bottom-right with more keys than queries, GQA), GQA against the same call
//!   with K/V repeated per query head, and rows that see no key (zero gradients);
//! - the planner: three launches, their grids and scratch, empty calls, and bad calls as typed errors;
//! - the catalog: few specializations; every one compiled by tileiras for sm_90 (none with a stack
//!   frame, i.e. no spills), and the small ragged call's kernels for sm_80, sm_90, sm_100 and sm_120
//!   (reported as skipped without tileiras);
//! - a GPU test (ignored without `--include-ignored`, skipped without a GPU): the forward with LSE, then
//!   the backward through the host API, against the reference.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::attention::backward::{self as bwd, BACKWARD_OP};
use cutile_kernels::attention::{AttentionOptions, BackwardGrads, attention_backward_reference};
use cutile_kernels::op::{OpError, Operand, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A case: `[b, h, sq, d]` queries, `[b, hkv, sk, d]` keys.
#[derive(Clone)]
struct Case {
    b: usize,
    h: usize,
    hkv: usize,
    sq: usize,
    sk: usize,
    d: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    d_o: Vec<f32>,
}

fn case(b: usize, h: usize, hkv: usize, sq: usize, sk: usize, d: usize, seed: u64) -> Case {
    Case {
        b,
        h,
        hkv,
        sq,
        sk,
        d,
        q: values(b * h * sq * d, seed),
        k: values(b * hkv * sk * d, seed + 1),
        v: values(b * hkv * sk * d, seed + 2),
        d_o: values(b * h * sq * d, seed + 3),
    }
}

impl Case {
    fn grads(&self, o: &AttentionOptions) -> BackwardGrads {
        attention_backward_reference(
            &self.q,
            &self.k,
            &self.v,
            &self.d_o,
            (self.b, self.h, self.hkv),
            self.sq,
            self.sk,
            self.d,
            o,
        )
    }

    /// `Σ O ∘ dO` of the f64 forward on (q, k, v) as f64.
    fn loss(&self, q: &[f64], k: &[f64], v: &[f64], o: &AttentionOptions) -> f64 {
        let (d, sq, sk) = (self.d, self.sq, self.sk);
        let scale = o.scale.map_or(1.0 / (d as f64).sqrt(), f64::from);
        let shift = if o.causal {
            o.query_offset
                + if o.bottom_right {
                    sk as i64 - sq as i64
                } else {
                    0
                }
        } else {
            0
        };
        let group = self.h / self.hkv;
        let mut total = 0.0;
        for bi in 0..self.b {
            for hi in 0..self.h {
                let kv = (bi * self.hkv + hi / group) * sk * d;
                for i in 0..sq {
                    let row = ((bi * self.h + hi) * sq + i) * d;
                    let seen = if o.causal {
                        (i as i64 + shift + 1).clamp(0, sk as i64) as usize
                    } else {
                        sk
                    };
                    if seen == 0 {
                        continue;
                    }
                    let s: Vec<f64> = (0..seen)
                        .map(|j| {
                            (0..d).map(|c| q[row + c] * k[kv + j * d + c]).sum::<f64>() * scale
                        })
                        .collect();
                    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                    for c in 0..d {
                        let out: f64 = (0..seen)
                            .map(|j| (s[j] - m).exp() / z * v[kv + j * d + c])
                            .sum();
                        total += out * self.d_o[row + c] as f64;
                    }
                }
            }
        }
        total
    }

    /// Central differences of [`Case::loss`] at every element of q, k and v.
    fn finite_differences(&self, o: &AttentionOptions) -> [Vec<f64>; 3] {
        let f = |x: &[f32]| -> Vec<f64> { x.iter().map(|&e| e as f64).collect() };
        let (q, k, v) = (f(&self.q), f(&self.k), f(&self.v));
        let eps = 1e-5;
        let mut out: [Vec<f64>; 3] = Default::default();
        for which in 0..3 {
            let base = [&q, &k, &v][which];
            out[which] = (0..base.len())
                .map(|e| {
                    let mut t = [q.clone(), k.clone(), v.clone()];
                    t[which][e] = base[e] + eps;
                    let up = self.loss(&t[0], &t[1], &t[2], o);
                    t[which][e] = base[e] - eps;
                    let down = self.loss(&t[0], &t[1], &t[2], o);
                    (up - down) / (2.0 * eps)
                })
                .collect();
        }
        out
    }
}

fn opts(causal: bool) -> AttentionOptions {
    AttentionOptions {
        causal,
        ..Default::default()
    }
}

fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn reference_matches_finite_differences() {
    let cases = [
        (case(1, 1, 1, 3, 5, 4, 1), opts(false)),
        (case(1, 1, 1, 5, 5, 4, 2), opts(true)),
        // More keys than queries, aligned bottom-right, with a custom scale.
        (
            case(1, 1, 1, 3, 6, 4, 3),
            AttentionOptions {
                bottom_right: true,
                scale: Some(0.7),
                ..opts(true)
            },
        ),
        // GQA: 4 query heads over 2 K/V heads, two batches; a negative offset leaves row 0 blind.
        (
            case(2, 4, 2, 4, 3, 4, 4),
            AttentionOptions {
                query_offset: -1,
                ..opts(true)
            },
        ),
    ];
    for (c, o) in cases {
        let g = c.grads(&o);
        let [fq, fk, fv] = c.finite_differences(&o);
        assert_close(&g.dq, &fq, 1e-5, &format!("dq {o:?}"));
        assert_close(&g.dk, &fk, 1e-5, &format!("dk {o:?}"));
        assert_close(&g.dv, &fv, 1e-5, &format!("dv {o:?}"));
        // Not vacuous: the gradients are not all zero.
        assert!(g.dq.iter().any(|&x| x.abs() > 1e-3), "dq {o:?}");
        assert!(g.dk.iter().any(|&x| x.abs() > 1e-3), "dk {o:?}");
    }
}

#[test]
fn gqa_gradients_are_the_sums_over_repeated_heads() {
    let c = case(2, 6, 2, 9, 11, 8, 7);
    let group = c.h / c.hkv;
    // K/V repeated per query head: an MHA call with the same math.
    let repeat = |t: &[f32]| -> Vec<f32> {
        let per = c.sk * c.d;
        (0..c.b * c.h)
            .flat_map(|bh| {
                let src = (bh / c.h) * c.hkv + (bh % c.h) / group;
                t[src * per..(src + 1) * per].to_vec()
            })
            .collect()
    };
    let mha = Case {
        hkv: c.h,
        k: repeat(&c.k),
        v: repeat(&c.v),
        ..c.clone()
    };
    for causal in [false, true] {
        let (g, m) = (c.grads(&opts(causal)), mha.grads(&opts(causal)));
        let close = |a: &[f32], b: &[f32], what: &str| {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                    "{what} {i}: {x} vs {y}"
                );
            }
        };
        close(&g.dq, &m.dq, "dq");
        let per = c.sk * c.d;
        let summed = |t: &[f32]| -> Vec<f32> {
            let mut out = vec![0f32; c.b * c.hkv * per];
            for bh in 0..c.b * c.h {
                let dst = (bh / c.h) * c.hkv + (bh % c.h) / group;
                for e in 0..per {
                    out[dst * per + e] += t[bh * per + e];
                }
            }
            out
        };
        close(&g.dk, &summed(&m.dk), "dk");
        close(&g.dv, &summed(&m.dv), "dv");
    }
}

#[test]
fn rows_that_see_no_key_have_zero_gradients() {
    // Query 0 sits at position -2: it sees nothing; so does query 1 (position -1).
    let c = case(1, 1, 1, 4, 4, 4, 9);
    let o = AttentionOptions {
        query_offset: -2,
        ..opts(true)
    };
    let g = c.grads(&o);
    assert!(g.dq[..2 * c.d].iter().all(|&x| x == 0.0));
    assert!(g.dq[2 * c.d..].iter().any(|&x| x != 0.0));
    // Keys 2 and 3 are seen by nobody (the last query is at position 1).
    assert!(g.dk[2 * c.d..].iter().all(|&x| x == 0.0));
    assert!(g.dv[2 * c.d..].iter().all(|&x| x == 0.0));
    // dv of key 0 = Σ_i p_i0 dO_i: query 2 sees only key 0 (p = 1), query 3 keys 0 and 1, so
    // dv[0] - dO[2] = p30 · dO[3] with 0 < p30 < 1.
    let mut checked = 0;
    for e in 0..c.d {
        let o3 = c.d_o[3 * c.d + e];
        if o3.abs() > 0.1 {
            let p = (g.dv[e] - c.d_o[2 * c.d + e]) / o3;
            assert!(p > 0.0 && p < 1.0, "p30 {p}");
            checked += 1;
        }
    }
    assert!(checked > 0);
}

// ---- Planner ----------------------------------------------------------------------------------------

fn d(name: &'static str, i: usize, dt: ScalarType, s: &[i64]) -> Operand {
    Operand::described(name, i, dt, s)
}

fn ops(dt: ScalarType, q: &[i64], k: &[i64]) -> Vec<Operand> {
    bwd::described_call(dt, &[q.to_vec(), k.to_vec()]).unwrap()
}

fn plan(
    operands: &[Operand],
    o: &AttentionOptions,
) -> Result<Vec<cutile_kernels::op::PlannedLaunch>, OpError> {
    let all = bwd::with_scratch(operands, &target(), o)?;
    bwd::plan_backward(&all, &target(), o)
}

#[test]
fn plans_three_launches_with_their_grids_and_scratch() {
    for (q, k, causal) in [
        (vec![4i64, 32, 4096, 128], vec![4i64, 32, 4096, 128], false),
        (vec![2, 8, 777, 128], vec![2, 2, 777, 128], true),
        (vec![16, 100, 64], vec![16, 37, 64], false),
    ] {
        let o = opts(causal);
        let operands = ops(BF16, &q, &k);
        let all = bwd::with_scratch(&operands, &target(), &o).unwrap();
        assert_eq!(all.len(), 10);
        let r = q.len();
        let bh: i64 = q[..r - 2].iter().product();
        let bhk: i64 = k[..r - 2].iter().product();
        assert_eq!(all[9].name, "delta");
        assert_eq!(all[9].numel(), bh * q[r - 2]);
        let l = bwd::plan_backward(&all, &target(), &o).unwrap();
        assert_eq!(l.len(), 3);
        assert!(l[0].config.starts_with("attention_backward_delta"));
        assert!(l[1].config.starts_with("attention_backward_dkdv"));
        assert!(l[2].config.starts_with("attention_backward_dq"));
        let tiles = |s: i64| ((s + 63) / 64) as u32;
        assert_eq!(l[0].grid, Some((bh as u32, tiles(q[r - 2]), 1)));
        assert_eq!(l[1].grid, Some((bhk as u32, tiles(k[r - 2]), 1)));
        assert_eq!(l[2].grid, Some((bh as u32, tiles(q[r - 2]), 1)));
        // Without the scratch, the plan says what is missing.
        let e = bwd::plan_backward(&operands, &target(), &o).unwrap_err();
        assert!(e.to_string().contains("with_scratch"), "{e}");
    }
    // An empty batch plans nothing and needs no scratch.
    let operands = ops(BF16, &[0, 4, 10, 64], &[0, 4, 10, 64]);
    assert_eq!(
        bwd::with_scratch(&operands, &target(), &opts(true))
            .unwrap()
            .len(),
        9
    );
    assert!(plan(&operands, &opts(true)).unwrap().is_empty());
}

fn unsupported(r: Result<Vec<cutile_kernels::op::PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Err(OpError::Unsupported { op, what }) => {
            assert_eq!(op, BACKWARD_OP);
            assert!(what.contains(needle), "{what} lacks {needle}");
        }
        other => panic!("expected Unsupported({needle}), got {other:?}"),
    }
}

#[test]
fn bad_calls_are_typed_errors() {
    let q = [1i64, 4, 100, 64];
    let k = [1i64, 2, 120, 64];
    let good = ops(BF16, &q, &k);
    assert_eq!(plan(&good, &opts(true)).unwrap().len(), 3);
    // Unsupported options.
    let w = AttentionOptions {
        window: Some(10),
        ..opts(true)
    };
    unsupported(plan(&good, &w), "window");
    let c = AttentionOptions {
        softcap: Some(30.0),
        ..opts(false)
    };
    unsupported(plan(&good, &c), "soft-cap");
    let s = AttentionOptions {
        scale: Some(-1.0),
        ..opts(false)
    };
    unsupported(plan(&good, &s), "scale");
    // Head dimension, element type, lse type and shape.
    unsupported(
        plan(&ops(BF16, &[1, 4, 10, 96], &[1, 4, 10, 96]), &opts(false)),
        "head dimension",
    );
    assert!(matches!(
        plan(&ops(F32, &q, &k), &opts(false)),
        Err(OpError::DType { .. })
    ));
    let mut bad = good.clone();
    bad[5] = d("lse", 5, BF16, &[1, 4, 100]);
    assert!(matches!(
        plan(&bad, &opts(false)),
        Err(OpError::DType { .. })
    ));
    let mut bad = good.clone();
    bad[5] = d("lse", 5, F32, &[1, 4, 101]);
    assert!(matches!(
        plan(&bad, &opts(false)),
        Err(OpError::Shape { .. })
    ));
    // dk with q's shape, dq with k's.
    let mut bad = good.clone();
    bad[7] = d("dk", 7, BF16, &q);
    assert!(matches!(
        plan(&bad, &opts(false)),
        Err(OpError::Shape { .. })
    ));
    let mut bad = good.clone();
    bad[6] = d("dq", 6, BF16, &k);
    assert!(matches!(
        plan(&bad, &opts(false)),
        Err(OpError::Shape { .. })
    ));
    // A d_o of another type.
    let mut bad = good.clone();
    bad[4] = d("d_o", 4, F16, &q);
    assert!(matches!(
        plan(&bad, &opts(false)),
        Err(OpError::DType { .. })
    ));
    // GQA heads that do not divide, mixed ranks, no keys, no queries.
    assert!(matches!(
        plan(&ops(BF16, &[1, 4, 10, 64], &[1, 3, 10, 64]), &opts(false)),
        Err(OpError::Shape { .. })
    ));
    let mut bad = good.clone();
    bad[1] = d("k", 1, BF16, &[2, 120, 64]);
    assert!(matches!(
        plan(&bad, &opts(false)),
        Err(OpError::Rank { .. })
    ));
    unsupported(
        plan(&ops(BF16, &q, &[1, 2, 0, 64]), &opts(false)),
        "no keys",
    );
    unsupported(
        plan(&ops(BF16, &[1, 4, 0, 64], &k), &opts(false)),
        "no queries",
    );
    // Nine operands, no fewer.
    unsupported(plan(&good[..8], &opts(false)), "9 tensors");
}

// ---- Catalog and compilation --------------------------------------------------------------------------

#[test]
fn representative_calls_plan_with_few_specializations() {
    let calls = bwd::representative_calls();
    for c in &calls {
        assert_eq!(c.op, BACKWARD_OP);
        let p = c.plan(&target(), false).unwrap();
        assert_eq!(p.launches.len(), 3, "{}", c.label());
    }
    // The catalog's compile time is boxed: few specializations.
    let jobs = cutile_kernels::catalog::dsl_jobs(&calls, false).unwrap();
    println!(
        "attention backward: {} catalog specializations per arch",
        jobs.len()
    );
    assert_eq!(jobs.len(), 11);
}

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "attention_backward representative_calls_compile_for_sm90",
        common::catalog_jobs(&bwd::representative_calls()),
    );
}

/// No kernel of the catalog's backward calls spills on sm_90: every cubin's stack frame is empty. The
/// causal dK/dV kernel spilled 176–248 bytes per thread while it had a second, unmasked loop (session
/// 27, `docs/attention.md`).
#[test]
fn sm90_builds_have_no_stack_frame() {
    let test = "attention_backward sm90_builds_have_no_stack_frame";
    let Some(tileiras) = common::tileiras(test) else {
        return;
    };
    let jobs = common::catalog_jobs(&bwd::representative_calls());
    assert!(
        jobs.iter()
            .any(|(n, _, _)| n.contains("dkdv") && n.contains("causal"))
    );
    for (name, k, metas) in jobs {
        let s = k.specialize(&metas).unwrap();
        let cubin = common::compile_cached(&tileiras, &s, GpuArch::Sm90).unwrap();
        let (regs, stack, _, _) = common::resources(&cubin);
        assert_eq!(
            stack, 0,
            "{name}: {stack} bytes of stack frame at {regs} registers"
        );
    }
}

#[test]
fn compile_four_archs() {
    // The small ragged causal GQA call: its delta, dK/dV and dQ kernels.
    let calls = bwd::representative_calls();
    let ragged = calls
        .iter()
        .filter(|c| c.shapes[0][2] == 777)
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(ragged.len(), 1);
    common::compile_four_archs(
        "attention_backward compile_four_archs",
        common::catalog_jobs(&ragged),
    );
}

// ---- GPU ---------------------------------------------------------------------------------------------

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        num += ((g - w) as f64).powi(2);
        den += (w as f64).powi(2);
    }
    (num / den.max(1e-30)).sqrt()
}

/// The forward with LSE, then the backward through the host API, bf16, against the CPU reference:
/// plain 3-D, causal GQA 4-D with ragged lengths, and causal bottom-right with more keys than queries.
#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_backward_matches_the_reference() {
    use cutile::runtime::Tensor;
    use cutile_kernels::attention::{self, Extras};
    use half::bf16;
    let Some((dev, stream)) = common::gpu_device("gpu_backward_matches_the_reference") else {
        return;
    };
    let up = |v: &[f32], shape: &[i64]| {
        let h: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
        Tensor::from_host(&dev, &h, shape).unwrap()
    };
    let down = |t: &Tensor<bf16>| -> Vec<f32> {
        t.to_host().unwrap().iter().map(|x| x.to_f32()).collect()
    };
    let round =
        |v: Vec<f32>| -> Vec<f32> { v.into_iter().map(|x| bf16::from_f32(x).to_f32()).collect() };
    let cases = [
        (case(8, 1, 1, 200, 200, 64, 31), false, opts(false)),
        (case(2, 8, 2, 77, 77, 128, 32), true, opts(true)),
        (
            case(1, 4, 4, 100, 237, 64, 33),
            true,
            AttentionOptions {
                bottom_right: true,
                ..opts(true)
            },
        ),
    ];
    for (c, four, o) in cases {
        let c = Case {
            q: round(c.q.clone()),
            k: round(c.k.clone()),
            v: round(c.v.clone()),
            d_o: round(c.d_o.clone()),
            ..c
        };
        let want = c.grads(&o);
        let (b, h, hkv, sq, sk, dd) = (
            c.b as i64,
            c.h as i64,
            c.hkv as i64,
            c.sq as i64,
            c.sk as i64,
            c.d as i64,
        );
        let (qs, ks, ls): (Vec<i64>, Vec<i64>, Vec<i64>) = if four {
            (vec![b, h, sq, dd], vec![b, hkv, sk, dd], vec![b, h, sq])
        } else {
            (vec![b * h, sq, dd], vec![b * hkv, sk, dd], vec![b * h, sq])
        };
        let (qt, kt, vt, dot) = (up(&c.q, &qs), up(&c.k, &ks), up(&c.v, &ks), up(&c.d_o, &qs));
        let mut ot = Tensor::<bf16>::zeros(&dev, &qs).unwrap();
        let mut lt = Tensor::<f32>::zeros(&dev, &ls).unwrap();
        let extras = Extras {
            sinks: None,
            lse: Some(&mut lt),
        };
        attention::attention_with(&stream, &qt, &kt, &vt, &o, extras, &mut ot)
            .unwrap()
            .wait()
            .unwrap();
        let mut dq = Tensor::<bf16>::zeros(&dev, &qs).unwrap();
        let mut dk = Tensor::<bf16>::zeros(&dev, &ks).unwrap();
        let mut dv = Tensor::<bf16>::zeros(&dev, &ks).unwrap();
        attention::attention_backward(
            &stream, &qt, &kt, &vt, &ot, &dot, &lt, &o, &mut dq, &mut dk, &mut dv,
        )
        .unwrap()
        .wait()
        .unwrap();
        for (name, got, want) in [
            ("dq", down(&dq), &want.dq),
            ("dk", down(&dk), &want.dk),
            ("dv", down(&dv), &want.dv),
        ] {
            let e = rel_l2(&got, want);
            assert!(e < 3e-2, "{name} {o:?} four={four}: rel err {e}");
        }
    }
}
