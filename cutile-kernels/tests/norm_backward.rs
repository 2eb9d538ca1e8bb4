//! RMSNorm and LayerNorm backward: the CPU references against finite differences of the forward, the
//! planner without a GPU (typed errors, empty calls, launches and scratch), every representative call
//! compiled by tileiras (sm_90; one for sm_80/90/100/120), and GPU tests through the host API against
//! the references (`#[ignore]`d; skipped without a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::norm::backward::{self as bwd, LAYER_NORM_BACKWARD, RMS_NORM_BACKWARD};
use cutile_kernels::norm::{
    layer_norm_backward_reference, layer_norm_stats_reference, rms_norm_backward_reference,
};
use cutile_kernels::op::{OpError, Operand, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

/// f64 forward of one op over all rows: `Σ y · dy` (the loss whose gradient the backward gives).
fn loss(ln: bool, x: &[f64], w: &[f64], b: &[f64], dy: &[f64], cols: usize, eps: f64) -> f64 {
    let mut l = 0.0;
    for (row, drow) in x.chunks(cols).zip(dy.chunks(cols)) {
        let n = cols as f64;
        let mean = if ln { row.iter().sum::<f64>() / n } else { 0.0 };
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let r = 1.0 / (var + eps).sqrt();
        for c in 0..cols {
            let y = (row[c] - mean) * r * w[c] + if ln { b[c] } else { 0.0 };
            l += y * drow[c];
        }
    }
    l
}

fn data(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    common::data::uniform(n, seed, lo, hi)
}

/// Central differences of [`loss`] w.r.t. `x`, `w` and `b`.
#[allow(clippy::type_complexity)]
fn numeric(
    ln: bool,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    dy: &[f32],
    cols: usize,
    eps: f32,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let f = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let (x, w, b, dy) = (f(x), f(w), f(b), f(dy));
    let h = 1e-5;
    let grad = |which: usize| {
        let base = [&x, &w, &b][which];
        (0..base.len())
            .map(|i| {
                let mut v = [x.clone(), w.clone(), b.clone()];
                v[which][i] += h;
                let up = loss(ln, &v[0], &v[1], &v[2], &dy, cols, eps as f64);
                v[which][i] -= 2.0 * h;
                let down = loss(ln, &v[0], &v[1], &v[2], &dy, cols, eps as f64);
                (up - down) / (2.0 * h)
            })
            .collect::<Vec<f64>>()
    };
    (grad(0), grad(1), grad(2))
}

fn close(name: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * (1.0 + w.abs()),
            "{name}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn references_match_finite_differences() {
    for (rows, cols) in [(1, 1), (3, 7), (5, 33), (2, 128)] {
        let x = data(rows * cols, 1, -2.0, 2.0);
        let w = data(cols, 2, 0.5, 1.5);
        let b = data(cols, 3, -1.0, 1.0);
        let dy = data(rows * cols, 4, -1.0, 1.0);
        let eps = 1e-5;
        let (nx, nw, _) = numeric(false, &x, &w, &b, &dy, cols, eps);
        let (dx, dw) = rms_norm_backward_reference(&x, &w, &dy, eps, cols);
        close("rms dx", &dx, &nx, 1e-4);
        close("rms dw", &dw, &nw, 1e-4);
        if cols > 1 {
            let (nx, nw, nb) = numeric(true, &x, &w, &b, &dy, cols, eps);
            let (_, mean, rstd) = layer_norm_stats_reference(&x, &w, &b, eps, cols);
            let (dx, dw, db) = layer_norm_backward_reference(&x, &w, &dy, &mean, &rstd, cols);
            close("ln dx", &dx, &nx, 1e-4);
            close("ln dw", &dw, &nw, 1e-4);
            close("ln db", &db, &nb, 1e-4);
        }
    }
}

fn described(op: &str, dt: ScalarType, x: &[i64]) -> Vec<Operand> {
    bwd::with_scratch(op, &bwd::described_call(op, dt, x).unwrap(), &target()).unwrap()
}

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

#[test]
fn plans_launches_and_scratch() {
    let t = target();
    // RMSNorm: dx (+ rstd), partials, one sum; LayerNorm: dx, partials, two sums.
    for (op, n) in [(RMS_NORM_BACKWARD, 3), (LAYER_NORM_BACKWARD, 4)] {
        let ops = described(op, BF16, &[16384, 4096]);
        let l = bwd::plan(op, &ops, &t, 1e-5).unwrap();
        assert_eq!(l.len(), n, "{op}");
        assert_eq!(l[0].grid, Some((16384, 1, 1)));
        let c = bwd::choose(16384, 4096);
        assert_eq!(l[1].grid, Some((c.groups as u32, 16, 1)));
        assert!(c.groups <= bwd::MAX_GROUPS && c.groups >= 1);
        let scratch = ops.last().unwrap();
        let want = if op == RMS_NORM_BACKWARD {
            16384 + c.groups * 4096
        } else {
            2 * c.groups * 4096
        };
        assert_eq!(scratch.shape, vec![want], "{op}");
    }
    // Wide rows are walked in chunks; the chunk never exceeds MAX_DX_TILE.
    assert_eq!(bwd::choose(10, 100_000).dx_bn, bwd::MAX_DX_TILE);
    assert_eq!(bwd::choose(10, 100).dx_bn, 128);
    // Few rows: one group per row tile at most.
    assert_eq!(bwd::choose(3, 4096).groups, 1);
}

#[test]
fn empty_and_bad_calls() {
    let t = target();
    // No rows: dw (and db) are still written (zeros); no dx launch.
    for op in [RMS_NORM_BACKWARD, LAYER_NORM_BACKWARD] {
        let l = bwd::plan(op, &described(op, F32, &[0, 64]), &t, 1e-5).unwrap();
        assert!(l.iter().all(|l| !l.config.contains("_dx")), "{op}");
        assert!(!l.is_empty());
        // No columns: nothing to do.
        let ops = bwd::described_call(op, F32, &[4, 0]).unwrap();
        assert!(bwd::plan(op, &ops, &t, 1e-5).unwrap().is_empty());
    }
    let ok = described(RMS_NORM_BACKWARD, BF16, &[8, 64]);
    let mut o = ok.clone();
    o[2] = Operand::described("dy", 2, BF16, &[8, 63]);
    expect_error(bwd::plan(RMS_NORM_BACKWARD, &o, &t, 1e-5), "dy");
    let mut o = ok.clone();
    o[4] = Operand::described("dw", 4, BF16, &[63]);
    expect_error(
        bwd::plan(RMS_NORM_BACKWARD, &o, &t, 1e-5),
        "`dw` must have the length",
    );
    let mut o = ok.clone();
    o[3] = Operand::described("dx", 3, F16, &[8, 64]);
    expect_error(bwd::plan(RMS_NORM_BACKWARD, &o, &t, 1e-5), "dx");
    expect_error(bwd::plan(RMS_NORM_BACKWARD, &ok, &t, f32::NAN), "eps");
    expect_error(
        bwd::plan(RMS_NORM_BACKWARD, &ok[..5], &t, 1e-5),
        "scratch operand",
    );
    expect_error(bwd::plan(RMS_NORM_BACKWARD, &ok[..3], &t, 1e-5), "takes 5");
    let ln = described(LAYER_NORM_BACKWARD, BF16, &[8, 64]);
    let mut o = ln.clone();
    o[3] = Operand::described("mean", 3, BF16, &[8]);
    expect_error(bwd::plan(LAYER_NORM_BACKWARD, &o, &t, 0.0), "f32");
    let mut o = ln.clone();
    o[4] = Operand::described("rstd", 4, F32, &[9]);
    expect_error(bwd::plan(LAYER_NORM_BACKWARD, &o, &t, 0.0), "leading shape");
    expect_error(bwd::plan("softmax", &ln, &t, 0.0), "neither");
}

#[test]
fn ops_are_in_the_registry() {
    for op in [RMS_NORM_BACKWARD, LAYER_NORM_BACKWARD] {
        assert_eq!(
            cutile_kernels::op::registry::find(op).unwrap().family,
            "norm"
        );
    }
    for c in bwd::representative_calls() {
        let p = c.plan(&target(), false).unwrap();
        assert!(p.launches.len() >= 3, "{}", c.label());
    }
    // The catalog's compile time is boxed: few specializations.
    let jobs = cutile_kernels::catalog::dsl_jobs(&bwd::representative_calls(), false).unwrap();
    println!("norm backward: {} catalog specializations", jobs.len());
    assert!(jobs.len() <= 24, "{} specializations", jobs.len());
}

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "norm_backward representative_calls_compile_for_sm90",
        common::catalog_jobs(&bwd::representative_calls()),
    );
}

#[test]
fn compile_four_archs() {
    common::compile_four_archs(
        "norm_backward compile_four_archs",
        common::catalog_jobs(&bwd::representative_calls()[3..4]),
    );
}

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::bf16;

    fn up<T: DeviceElement>(dev: &Device, v: &[f32], shape: &[i64]) -> Tensor<T> {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).unwrap()
    }

    fn down<T: DeviceElement>(t: &Tensor<T>) -> Vec<f32> {
        t.to_host()
            .unwrap()
            .into_iter()
            .map(|x| x.to_f64() as f32)
            .collect()
    }

    fn rounded<T: DeviceElement>(v: Vec<f32>) -> Vec<f32> {
        v.iter()
            .map(|&x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    }

    fn case<T: DeviceElement>(dev: &Device, s: &Stream, rows: i64, cols: i64, tol: f32) {
        let (r, c) = (rows as usize, cols as usize);
        let x = rounded::<T>(data(r * c, 11, -2.0, 2.0));
        let w = rounded::<T>(data(c, 12, 0.5, 1.5));
        let b = rounded::<T>(data(c, 13, -1.0, 1.0));
        let dy = rounded::<T>(data(r * c, 14, -1.0, 1.0));
        let eps = 1e-5;
        let (xd, wd, dyd) = (
            up::<T>(dev, &x, &[rows, cols]),
            up::<T>(dev, &w, &[cols]),
            up::<T>(dev, &dy, &[rows, cols]),
        );
        // RMSNorm.
        let mut dx = Tensor::<T>::zeros(dev, &[rows, cols]).unwrap();
        let mut dw = Tensor::<T>::full(dev, &[cols], T::from_f64(9.0)).unwrap();
        cutile_kernels::norm::rms_norm_backward(s, &xd, &wd, &dyd, eps, &mut dx, &mut dw)
            .unwrap()
            .wait()
            .unwrap();
        let (rdx, rdw) = rms_norm_backward_reference(&x, &w, &dy, eps, c);
        // dw sums `rows` terms: its scale grows with rows.
        let wscale = (rows as f32).sqrt().max(1.0);
        common::assert_all_close("dx", &down(&dx), &rdx, tol, tol);
        common::assert_all_close("dw", &down(&dw), &rdw, tol * wscale, tol);
        // LayerNorm, from the reference statistics.
        let (_, mean, rstd) = layer_norm_stats_reference(&x, &w, &b, eps, c);
        let md = Tensor::from_host(dev, &mean, &[rows]).unwrap();
        let sd = Tensor::from_host(dev, &rstd, &[rows]).unwrap();
        let mut dx = Tensor::<T>::zeros(dev, &[rows, cols]).unwrap();
        let mut dw = Tensor::<T>::full(dev, &[cols], T::from_f64(9.0)).unwrap();
        let mut db = Tensor::<T>::full(dev, &[cols], T::from_f64(9.0)).unwrap();
        cutile_kernels::norm::layer_norm_backward(
            s, &xd, &wd, &dyd, &md, &sd, &mut dx, &mut dw, &mut db,
        )
        .unwrap()
        .wait()
        .unwrap();
        let (rdx, rdw, rdb) = layer_norm_backward_reference(&x, &w, &dy, &mean, &rstd, c);
        common::assert_all_close("dx", &down(&dx), &rdx, tol, tol);
        common::assert_all_close("dw", &down(&dw), &rdw, tol * wscale, tol);
        common::assert_all_close("db", &down(&db), &rdb, tol * wscale, tol);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_api_matches_reference() {
        let Some((dev, s)) = gpu_device("norm_backward host_api_matches_reference") else {
            return;
        };
        for (rows, cols) in [
            (1, 1),
            (3, 7),
            (37, 100),
            (300, 5000),
            (1000, 4096),
            (0, 64),
        ] {
            case::<f32>(&dev, &s, rows, cols, 2e-4);
            case::<bf16>(&dev, &s, rows, cols, 3e-2);
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn deterministic() {
        let Some((dev, s)) = gpu_device("norm_backward deterministic") else {
            return;
        };
        let (rows, cols) = (4096i64, 1024i64);
        let x = up::<bf16>(&dev, &data(4096 * 1024, 21, -2.0, 2.0), &[rows, cols]);
        let w = up::<bf16>(&dev, &data(1024, 22, 0.5, 1.5), &[cols]);
        let dy = up::<bf16>(&dev, &data(4096 * 1024, 23, -1.0, 1.0), &[rows, cols]);
        let mut first = None;
        for _ in 0..3 {
            let mut dx = Tensor::<bf16>::zeros(&dev, &[rows, cols]).unwrap();
            let mut dw = Tensor::<bf16>::zeros(&dev, &[cols]).unwrap();
            cutile_kernels::norm::rms_norm_backward(&s, &x, &w, &dy, 1e-6, &mut dx, &mut dw)
                .unwrap()
                .wait()
                .unwrap();
            let got = (down(&dx), down(&dw));
            match &first {
                None => first = Some(got),
                Some(f) => assert!(f == &got, "bitwise equal across runs"),
            }
        }
    }
}
