//! Fused linear + cross-entropy without a GPU, and on one when present:
//!
//! - the f64 reference against an independent naive formula (log of the softmax probability) and its
//!   gradients against central finite differences of its own loss; all-ignored and sum reductions;
//! - bad calls are typed errors naming the cause;
//! - the planner: chunk rule, launch counts per chunk, scratch size (one chunk's logits, not `T x V`);
//! - every launch of every representative call specializes, verifies and, with tileiras, compiles for
//!   sm_90 (the family's own kernels also for sm_80, sm_100 and sm_120);
//! - a GPU test through the host API (`#[ignore]`d; skipped without a GPU): ragged shapes, several
//!   chunks, ignored targets, all ignored, both reductions, f32 and 16-bit `dw`, a strided `w` view.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::cross_entropy::{
    self, CeOptions, Reduction, config, fused_linear_cross_entropy_reference as reference, slot,
};
use cutile_kernels::op::{OpError, Operand, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn exact(v: f64) -> f64 {
    v
}

/// `x: [t, h]`, `w: [v, h]` of small deterministic values.
fn data(t: usize, h: usize, v: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    (
        cutile_testkit::data::uniform(t * h, seed, -1.0, 1.0),
        cutile_testkit::data::uniform(v * h, seed + 1, -1.0, 1.0),
    )
}

#[test]
fn reference_loss_matches_a_naive_formula() {
    let (t, h, v) = (5, 3, 7);
    let (x, w) = (data(t, h, v, 3).0, data(t, h, v, 3).1);
    let target = [2, -100, 6, 0, 7];
    // Row 4's target 7 is out of range: NaN loss. Drop it for the finite comparisons.
    let r = reference(&x, &w, &target[..4], h, v, -100, Reduction::Mean, exact);
    let mut want = 0.0;
    for (row, &g) in target[..4].iter().enumerate() {
        if g == -100 {
            continue;
        }
        let z: Vec<f64> = (0..v)
            .map(|c| {
                (0..h)
                    .map(|j| x[row * h + j] as f64 * w[c * h + j] as f64)
                    .sum()
            })
            .collect();
        let p = z[g as usize].exp() / z.iter().map(|q| q.exp()).sum::<f64>();
        want -= p.ln();
    }
    want /= 3.0;
    assert_eq!(r.count, 3);
    assert!((r.loss - want).abs() < 1e-12, "{} vs {want}", r.loss);
    let s = reference(&x, &w, &target[..4], h, v, -100, Reduction::Sum, exact);
    assert!((s.loss - 3.0 * want).abs() < 1e-12);
    let bad = reference(&x, &w, &target, h, v, -100, Reduction::Mean, exact);
    assert!(bad.loss.is_nan(), "an out-of-range target gives NaN");
}

#[test]
fn reference_gradients_match_finite_differences() {
    let (t, h, v) = (4, 3, 5);
    let (x, w) = data(t, h, v, 11);
    let target = [4, 0, -1, 2];
    for red in [Reduction::Mean, Reduction::Sum] {
        let r = reference(&x, &w, &target, h, v, -1, red, exact);
        let loss = |x: &[f32], w: &[f32]| reference(x, w, &target, h, v, -1, red, exact).loss;
        let eps = 1e-3f32;
        for i in 0..x.len() {
            let (mut a, mut b) = (x.clone(), x.clone());
            a[i] += eps;
            b[i] -= eps;
            let fd = (loss(&a, &w) - loss(&b, &w)) / (a[i] as f64 - b[i] as f64);
            assert!(
                (fd - r.dx[i]).abs() < 1e-4,
                "dx[{i}] {red:?}: {fd} vs {}",
                r.dx[i]
            );
        }
        for i in 0..w.len() {
            let (mut a, mut b) = (w.clone(), w.clone());
            a[i] += eps;
            b[i] -= eps;
            let fd = (loss(&x, &a) - loss(&x, &b)) / (a[i] as f64 - b[i] as f64);
            assert!(
                (fd - r.dw[i]).abs() < 1e-4,
                "dw[{i}] {red:?}: {fd} vs {}",
                r.dw[i]
            );
        }
        // Ignored row 2 has no gradient.
        assert!(r.dx[2 * h..3 * h].iter().all(|&d| d == 0.0));
    }
}

#[test]
fn reference_all_ignored_mean_is_nan_with_zero_gradients() {
    let (x, w) = data(3, 4, 6, 5);
    let r = reference(&x, &w, &[-100; 3], 4, 6, -100, Reduction::Mean, exact);
    assert!(r.loss.is_nan());
    assert_eq!(r.count, 0);
    assert!(r.dx.iter().chain(&r.dw).all(|&d| d == 0.0));
    let s = reference(&x, &w, &[-100; 3], 4, 6, -100, Reduction::Sum, exact);
    assert_eq!(s.loss, 0.0);
}

/// The described operands of a call: switches `[dx, dw, dw_f32, i64, sum]`.
fn described(dt: ScalarType, t: i64, h: i64, v: i64, sw: [i64; 5]) -> (Vec<Operand>, CeOptions) {
    cross_entropy::described_call(dt, &[vec![t, h], vec![v], sw.to_vec()]).unwrap()
}

fn plan(ops: &[Operand], opts: &CeOptions) -> Result<Vec<PlannedLaunch>, OpError> {
    let t = target();
    let ops = cross_entropy::with_scratch(ops, opts, &t)?;
    cross_entropy::plan(&ops, opts, &t)
}

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

#[test]
fn bad_calls_are_typed_errors() {
    let (ok, opts) = described(BF16, 300, 520, 1000, [1, 1, 1, 1, 0]);
    assert!(plan(&ok, &opts).is_ok());
    let with = |i: usize, o: Operand| {
        let mut v = ok.clone();
        v[i] = o;
        v
    };
    let d = Operand::described;
    expect_error(
        plan(&with(slot::W, d("w", 1, F16, &[1000, 520])), &opts),
        "must match",
    );
    expect_error(
        plan(&with(slot::W, d("w", 1, BF16, &[1000, 512])), &opts),
        "`w` must be [V, H]",
    );
    expect_error(
        plan(&with(slot::W, d("w", 1, BF16, &[0, 520])), &opts),
        "vocabulary V",
    );
    expect_error(
        plan(&with(slot::TARGET, d("target", 2, I64, &[299])), &opts),
        "one entry per row",
    );
    expect_error(
        plan(&with(slot::TARGET, d("target", 2, F32, &[300])), &opts),
        "i32, i64",
    );
    expect_error(
        plan(&with(slot::LOSS, d("loss", 3, F16, &[1])), &opts),
        "`loss` has element type f16",
    );
    expect_error(
        plan(&with(slot::LOSS, d("loss", 3, F32, &[2])), &opts),
        "one f32 element",
    );
    assert!(plan(&with(slot::LOSS, d("loss", 3, F32, &[])), &opts).is_ok());
    expect_error(
        plan(&with(slot::DX, d("dx", 4, BF16, &[300, 519])), &opts),
        "`dx` must be [T, H]",
    );
    expect_error(
        plan(&with(slot::DW, d("dw", 5, F16, &[1000, 520])), &opts),
        "must match",
    );
    expect_error(
        plan(&with(slot::DW, d("dw", 5, F32, &[999, 520])), &opts),
        "`dw` must be [V, H]",
    );
    let no_dx = CeOptions { dx: false, ..opts };
    assert!(
        plan(&with(slot::DX, d("dx", 4, BF16, &[1, 1])), &no_dx).is_ok(),
        "an absent dx is not checked"
    );
    let (f32ops, f32opts) = described(F32, 30, 64, 100, [1, 1, 1, 0, 0]);
    let no_tf32 = CeOptions {
        allow_tf32: false,
        ..f32opts
    };
    expect_error(plan(&f32ops, &no_tf32), "allow_tf32");
    assert!(plan(&f32ops, &f32opts).is_ok());
    expect_error(
        plan(
            &ok,
            &CeOptions {
                chunk: Some(0),
                ..opts
            },
        ),
        "at least 1 row",
    );
    expect_error(
        plan(
            &ok,
            &CeOptions {
                ignore_index: 1 << 40,
                ..opts
            },
        ),
        "does not fit i32",
    );
    let (empty, eo) = described(BF16, 0, 520, 1000, [1, 1, 1, 1, 0]);
    expect_error(plan(&empty, &eo), "T = 0");
    expect_error(plan(&ok[..5], &opts), "takes 6 tensors");
    // `plan` without `with_scratch`'s scratch.
    expect_error(cross_entropy::plan(&ok, &opts, &target()), "with_scratch");
}

fn count(l: &[PlannedLaunch], what: &str) -> usize {
    l.iter().filter(|l| l.config.contains(what)).count()
}

#[test]
fn planner_chunks_launches_and_scratch() {
    let t = target();
    // Llama-3: 1 GiB of bf16 logits per chunk = 4096 rows, 2 chunks (1 accumulating dw pass).
    assert_eq!(config::chunk_rows(8192, 128256, 2, None), 4096);
    // Balanced: 2 chunks of 2560 and 2440 rows, not 4096 and 904; 3 of 3072, 3072, 2856, not 4096,
    // 4096, 808.
    assert_eq!(config::chunk_rows(5000, 128256, 2, None), 2560);
    assert_eq!(config::chunk_rows(9000, 128256, 2, None), 3072);
    // An f32 vocabulary row is twice the bytes: 2048 rows fit.
    assert_eq!(config::chunk_rows(8192, 128256, 4, None), 2048);
    assert_eq!(config::chunk_rows(2049, 128256, 2, None), 2049);
    // Never above the budget, whatever the rounding.
    for t in [
        1i64, 127, 128, 129, 2047, 2048, 2049, 4095, 6000, 8192, 16385, 100_000,
    ] {
        for v in [1000i64, 32000, 128256, 256_000] {
            let c = config::chunk_rows(t, v, 2, None);
            assert!(c >= 1 && c <= t, "{t} {v}: {c}");
            assert!(
                c * config::logits_ld(v) * 2 <= config::DEFAULT_CHUNK_BYTES || c == 128.min(t),
                "{t} {v}: {c}"
            );
            let chunks = (t + c - 1) / c;
            let fit = (config::DEFAULT_CHUNK_BYTES / (config::logits_ld(v) * 2)) / 128 * 128;
            assert_eq!(
                chunks,
                (t + fit.max(128) - 1) / fit.max(128),
                "{t} {v}: as few chunks as fit"
            );
        }
    }
    assert_eq!(config::chunk_rows(4096, 32000, 2, None), 4096);
    assert_eq!(
        config::chunk_rows(8192, 1 << 24, 2, None),
        128,
        "at least 128 rows"
    );
    assert_eq!(config::chunk_rows(37, 128256, 2, None), 37);
    assert_eq!(config::chunk_rows(300, 1000, 2, Some(128)), 128);
    assert_eq!(config::chunk_rows(3, 1000, 2, Some(128)), 3);
    for (sw, per_chunk) in [
        ([1, 1, 1, 1, 0], 4), // logits, rows, dx, dw
        ([1, 0, 1, 1, 0], 3),
        ([0, 1, 1, 1, 0], 3),
        ([0, 0, 1, 1, 0], 2), // forward only
    ] {
        let (ops, opts) = described(BF16, 8192, 4096, 128256, sw);
        let l = plan(&ops, &opts).unwrap();
        assert_eq!(l.len(), 2 + 2 * per_chunk, "{sw:?}");
        assert_eq!(count(&l, "count"), 1);
        assert_eq!(count(&l, "reduce"), 1);
        assert_eq!(count(&l, " rows BV=2048"), 2);
        for c in 0..2 {
            assert_eq!(count(&l, &format!("chunk {c} logits")), 1);
        }
        let rows = l.iter().find(|l| l.config.contains("rows")).unwrap();
        assert_eq!(rows.grid, Some((4096, 1, 1)));
        // Scratch: one chunk's logits and the row losses, half of torch's T x V logits.
        let s = cross_entropy::scratch_len(&ops, &opts, &t).unwrap() * 4;
        let chunk_logits = 4096 * config::logits_ld(128256) * 2;
        assert!(s >= chunk_logits + 8192 * 4, "{s}");
        assert!(s < chunk_logits + (1 << 20), "{s}");
        assert!(
            s * 3 / 2 < 8192 * 128256 * 2,
            "{s}: about half of the bf16 logits"
        );
    }
    // A 16-bit dw over several chunks: the f32 accumulator in scratch, then one cast.
    let (ops, opts) = described(F16, 300, 520, 1000, [1, 1, 0, 0, 1]);
    let one = plan(&ops, &opts).unwrap();
    assert_eq!(count(&one, "dw cast"), 0, "one chunk writes dw directly");
    let opts3 = CeOptions {
        chunk: Some(128),
        ..opts
    };
    let three = plan(&ops, &opts3).unwrap();
    assert_eq!(count(&three, "dw cast"), 1);
    assert_eq!(count(&three, "rows BV=1024"), 3);
    let s1 = cross_entropy::scratch_len(&ops, &opts, &t).unwrap();
    let s3 = cross_entropy::scratch_len(&ops, &opts3, &t).unwrap();
    assert!(s3 >= 1000 * 520, "the accumulator: {s3}");
    assert!(s3 - 1000 * 520 < s1, "smaller chunks, smaller logits");
    // Every chunk's rows kernel views its own rows of `target`, its losses and the logits.
    let rows: Vec<&PlannedLaunch> = three.iter().filter(|l| l.config.contains("rows")).collect();
    let grids: Vec<_> = rows.iter().map(|l| l.grid.unwrap().0).collect();
    assert_eq!(grids, [128, 128, 44]);
}

#[test]
fn the_op_is_in_the_registry() {
    let info = cutile_kernels::op::registry::find(cross_entropy::OP).unwrap();
    assert_eq!(info.family, "cross_entropy");
    for c in cross_entropy::representative_calls()
        .into_iter()
        .chain(cross_entropy::check_calls())
    {
        assert!(c.plan(&target(), false).unwrap().launches.len() >= 4);
    }
}

/// The catalog jobs of the representative calls and the runner's ragged check calls.
fn jobs() -> Vec<(
    &'static str,
    cutile::dsl::Kernel,
    Vec<cutile::dsl::TensorMeta>,
)> {
    let mut calls = cross_entropy::representative_calls();
    calls.extend(cross_entropy::check_calls());
    common::catalog_jobs(&calls)
}

#[test]
fn the_catalog_adds_few_specializations() {
    // The two benchmark calls share every kernel but the last chunk's (7 jobs); the small ragged call
    // with an f16 `dw` (for `ce_cast`) adds 12 of its own: 19 jobs, 76 cubins over the four archs.
    let n = common::catalog_jobs(&cross_entropy::representative_calls()).len();
    assert_eq!(n, 19);
}

#[test]
fn representative_and_check_calls_compile_for_sm90() {
    let j = jobs();
    println!("{} distinct specializations", j.len());
    common::compile_all_sm90(
        "cross_entropy representative_and_check_calls_compile_for_sm90",
        j,
    );
}

#[test]
fn own_kernels_compile_for_four_archs() {
    let own: Vec<_> = jobs()
        .into_iter()
        .filter(|(_, k, _)| k.name().starts_with("ce_"))
        .collect();
    assert!(own.len() >= 4, "count, rows, reduce, cast: {}", own.len());
    common::compile_four_archs("cross_entropy own_kernels_compile_for_four_archs", own);
}

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::{bf16, f16};

    fn up<T: DeviceElement>(dev: &Device, v: &[f32], shape: &[i64]) -> Tensor<T> {
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

    struct Case {
        t: usize,
        h: usize,
        v: usize,
        /// Every `ignore_every`-th target is ignored (0: none; 1: all).
        ignore_every: usize,
        red: Reduction,
        chunk: Option<usize>,
        wide: bool,
        dw_f32: bool,
    }

    fn run<T: DeviceElement>(dev: &Device, s: &Stream, c: &Case, tol: f64) {
        let round = |v: Vec<f32>| -> Vec<f32> {
            v.into_iter()
                .map(|x| T::from_f64(x as f64).to_f64() as f32)
                .collect()
        };
        let x = round(cutile_testkit::data::uniform(c.t * c.h, 7, -1.0, 1.0));
        let w = round(cutile_testkit::data::uniform(c.v * c.h, 8, -0.5, 0.5));
        let mut rng = cutile_testkit::data::Rng::new(c.t as u64 * 31 + c.v as u64);
        let target: Vec<i64> = (0..c.t)
            .map(|i| {
                if c.ignore_every > 0 && i % c.ignore_every == 0 {
                    -100
                } else {
                    (rng.next_u64() % c.v as u64) as i64
                }
            })
            .collect();
        let fround: fn(f64) -> f64 = if T::DTYPE == cutile::runtime::DType::BF16 {
            |v| bf16::from_f64(v).to_f64()
        } else {
            |v| f16::from_f64(v).to_f64()
        };
        let want = reference(&x, &w, &target, c.h, c.v, -100, c.red, fround);
        let xd = up::<T>(dev, &x, &[c.t as i64, c.h as i64]);
        // `w` as a view: rows of a wider buffer.
        let mut wp = vec![0f32; c.v * (c.h + 8)];
        for r in 0..c.v {
            wp[r * (c.h + 8)..r * (c.h + 8) + c.h].copy_from_slice(&w[r * c.h..(r + 1) * c.h]);
        }
        let wfull = up::<T>(dev, &wp, &[c.v as i64, (c.h + 8) as i64]);
        let wd = wfull.slice(1, 0..c.h as i64).unwrap();
        let t64 = Tensor::from_host(dev, &target, &[c.t as i64]).unwrap();
        let t32v: Vec<i32> = target.iter().map(|&v| v as i32).collect();
        let t32 = Tensor::from_host(dev, &t32v, &[c.t as i64]).unwrap();
        let tg: &dyn cutile::launch::TensorArg = if c.wide { &t64 } else { &t32 };
        let mut loss = Tensor::<f32>::full(dev, &[1], 5.0).unwrap();
        let mut dx = Tensor::<T>::full(dev, &[c.t as i64, c.h as i64], T::from_f64(9.0)).unwrap();
        let mut dw32 = Tensor::<f32>::full(dev, &[c.v as i64, c.h as i64], 9.0).unwrap();
        let mut dw16 = Tensor::<T>::full(dev, &[c.v as i64, c.h as i64], T::from_f64(9.0)).unwrap();
        let opts = CeOptions {
            reduction: c.red,
            chunk: c.chunk,
            ..CeOptions::default()
        };
        let dw: &mut dyn cutile::launch::TensorArgMut =
            if c.dw_f32 { &mut dw32 } else { &mut dw16 };
        cross_entropy::fused_linear_cross_entropy(
            s,
            &xd,
            &wd,
            tg,
            &opts,
            &mut loss,
            Some(&mut dx),
            Some(dw),
        )
        .unwrap()
        .wait()
        .unwrap();
        let label = format!(
            "t={} h={} v={} ignore_every={} {:?} chunk={:?}",
            c.t, c.h, c.v, c.ignore_every, c.red, c.chunk
        );
        let got = down(&loss)[0] as f64;
        if want.loss.is_nan() {
            assert!(got.is_nan(), "{label}: loss {got}, want NaN");
        } else {
            assert!(
                (got - want.loss).abs() <= 1e-3 * want.loss.abs().max(1.0),
                "{label}: loss {got} vs {}",
                want.loss
            );
        }
        let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
        let gdx = down(&dx);
        let gdw = if c.dw_f32 { down(&dw32) } else { down(&dw16) };
        for (what, got, want) in [("dx", gdx, f(&want.dx)), ("dw", gdw, f(&want.dw))] {
            if want.iter().all(|&v| v == 0.0) {
                assert!(got.iter().all(|&v| v == 0.0), "{label}: {what} must be 0");
            } else {
                let e = cutile_testkit::compare::rel_l2(&got, &want);
                assert!(e <= tol, "{label}: {what} rel L2 {e} > {tol}");
            }
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_api_matches_reference() {
        let Some((dev, s)) = gpu_device("cross_entropy host_api_matches_reference") else {
            return;
        };
        let case = |t, h, v, ignore_every, red, chunk, wide, dw_f32| Case {
            t,
            h,
            v,
            ignore_every,
            red,
            chunk,
            wide,
            dw_f32,
        };
        use Reduction::*;
        for c in [
            case(1, 64, 10, 0, Mean, None, true, true),
            case(37, 128, 1000, 5, Mean, None, false, true),
            case(300, 256, 3001, 7, Mean, Some(128), true, true),
            case(300, 256, 3001, 7, Sum, Some(100), false, false),
            case(130, 64, 517, 1, Mean, Some(64), true, true),
            case(130, 64, 517, 1, Sum, None, true, false),
        ] {
            run::<bf16>(&dev, &s, &c, 2e-2);
            run::<f16>(&dev, &s, &c, 5e-3);
        }
    }
}
