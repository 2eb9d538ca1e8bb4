//! The fused and per-head norm kernels (`add_rms_norm`, `rms_norm_heads`, `layer_norm_stats`):
//!
//! - IR of each kernel form pinned as an insta snapshot (bf16 benchmark shapes) and verified; ragged
//!   specializations verified;
//! - the memory-op pattern of the gather forms (unmasked branch for exact widths, masked otherwise,
//!   `latency = 1` on every gather and scatter), as `rms_norm_gather`'s;
//! - every kernel compiled by tileiras for sm_80, sm_90, sm_100 and sm_120 (skipped without tileiras);
//! - GPU runs through the host API, every tuning candidate of each call, on ragged shapes (and a strided
//!   `[T, H, D]` view for the per-head op) against the CPU references, f32/f16/bf16 (ignored without
//!   `--include-ignored`; skipped without a GPU; a GPU machine without tileiras needs the kernels in a
//!   bundle named by `CUTILE_BUNDLE`).

#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::{self, *};
use cutile_ir::{Opcode, Operation};
use cutile_kernels::norm::{self, kernels as n};
use half::{bf16, f16};

fn add_rms_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[rows, cols]),
        t(dtype, &[rows, cols]),
        t(dtype, &[cols]),
        t(dtype, &[rows, cols]),
        t(dtype, &[rows, cols]),
    ]
}
fn stats_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[rows, cols]),
        t(dtype, &[cols]),
        t(dtype, &[cols]),
        t(dtype, &[rows, cols]),
        t(F32, &[rows]),
        t(F32, &[rows]),
    ]
}
fn heads_arrays(dtype: ScalarType, tokens: i64, heads: i64, d: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[tokens, heads, d]),
        t(dtype, &[d]),
        t(dtype, &[tokens, heads, d]),
    ]
}

/// (name, kernel, arrays, snapshot it?): one bf16 benchmark shape per kernel form (snapshotted) and ragged
/// ones in other types.
fn cases() -> Vec<common::IrCase> {
    vec![
        (
            "add_rms_norm_gather_bf16_8192",
            n::add_rms_norm_gather::kernel::<bf16, 8192>(),
            add_rms_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "add_rms_norm_gather_f16_1024_cols1000",
            n::add_rms_norm_gather::kernel::<f16, 1024>(),
            add_rms_arrays(F16, 37, 1000),
            false,
        ),
        (
            "add_rms_norm_gather_looped_bf16_2048",
            n::add_rms_norm_gather_looped::kernel::<bf16, 2048>(),
            add_rms_arrays(BF16, 64, 20000),
            true,
        ),
        (
            "add_rms_norm_gather_looped_f32_2048",
            n::add_rms_norm_gather_looped::kernel::<f32, 2048>(),
            add_rms_arrays(F32, 3, 9001),
            false,
        ),
        (
            "rms_norm_heads_bf16_32x128",
            n::rms_norm_heads::kernel::<bf16, 32, 128>(),
            heads_arrays(BF16, 4096, 32, 128),
            true,
        ),
        (
            "rms_norm_heads_f16_32x64_h6",
            n::rms_norm_heads::kernel::<f16, 32, 64>(),
            heads_arrays(F16, 1000, 6, 64),
            false,
        ),
        (
            "rms_norm_heads_f32_16x256",
            n::rms_norm_heads::kernel::<f32, 16, 256>(),
            heads_arrays(F32, 7, 3, 200),
            false,
        ),
        (
            "layer_norm_stats_gather_bf16_512",
            n::layer_norm_stats_gather::kernel::<bf16, 512>(),
            stats_arrays(BF16, 8192, 512),
            true,
        ),
        (
            "layer_norm_stats_gather_f32_1024_cols1000",
            n::layer_norm_stats_gather::kernel::<f32, 1024>(),
            stats_arrays(F32, 37, 1000),
            false,
        ),
        (
            "layer_norm_stats_persistent_bf16_2x8192",
            n::layer_norm_stats_persistent::kernel::<bf16, 2, 8192>(),
            stats_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "layer_norm_stats_persistent_f16_16x1024_cols1000",
            n::layer_norm_stats_persistent::kernel::<f16, 16, 1024>(),
            stats_arrays(F16, 37, 1000),
            false,
        ),
        (
            "layer_norm_stats_gather_looped_bf16_2048",
            n::layer_norm_stats_gather_looped::kernel::<bf16, 2048>(),
            stats_arrays(BF16, 64, 20000),
            true,
        ),
    ]
}

#[test]
fn ir_snapshots_verify() {
    for (name, ir) in common::verified_snapshot_irs(cases()) {
        insta::assert_snapshot!(name, ir);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Memory-op pattern.

fn visit_all(op: &Operation, f: &mut impl FnMut(&Operation)) {
    f(op);
    for b in &op.regions {
        for o in &b.ops {
            visit_all(o, f);
        }
    }
}

/// The pointer memory ops of the entry in program order: `load`/`store`, `+mask` when masked, `+lat1`
/// when hinted with latency 1.
fn pointer_ops(k: Kernel, arrays: Vec<TensorMeta>) -> Vec<String> {
    let s = k.specialize(&arrays).unwrap();
    let f = s.module.functions.iter().find(|f| f.is_entry()).unwrap();
    let mut out = vec![];
    {
        for op in &f.body.as_ref().unwrap().ops {
            visit_all(op, &mut |o| {
                let name = match o.opcode {
                    Opcode::LoadPtrTko => "load",
                    Opcode::StorePtrTko => "store",
                    _ => return,
                };
                let mask = if o.operand_group("mask").is_empty() {
                    ""
                } else {
                    "+mask"
                };
                let hints = format!("{:?}", o.attr("optimization_hints"));
                let lat = if hints.contains("latency") && hints.contains('1') {
                    "+lat1"
                } else {
                    ""
                };
                out.push(format!("{name}{mask}{lat}"));
            });
        }
    }
    out
}

#[test]
fn gather_forms_branch_on_exact_width_with_latency_hints() {
    let p = |n: usize, s: &str| vec![s.to_string(); n];
    // add_rms_norm_gather: x, r gathers; h scatter; w gather; y scatter — unmasked, then masked.
    let want: Vec<String> = [
        p(2, "load+lat1"),
        p(1, "store+lat1"),
        p(1, "load+lat1"),
        p(1, "store+lat1"),
        p(2, "load+mask+lat1"),
        p(1, "store+mask+lat1"),
        p(1, "load+mask+lat1"),
        p(1, "store+mask+lat1"),
    ]
    .concat();
    assert_eq!(
        pointer_ops(
            n::add_rms_norm_gather::kernel::<bf16, 1024>(),
            add_rms_arrays(BF16, 8, 1000)
        ),
        want
    );
    // rms_norm_heads: x gather, w gather, y scatter — unmasked, then masked.
    let want: Vec<String> = [
        p(2, "load+lat1"),
        p(1, "store+lat1"),
        p(2, "load+mask+lat1"),
        p(1, "store+mask+lat1"),
    ]
    .concat();
    assert_eq!(
        pointer_ops(
            n::rms_norm_heads::kernel::<bf16, 32, 128>(),
            heads_arrays(BF16, 4096, 32, 128)
        ),
        want
    );
    // layer_norm_stats_gather: x, w, b gathers; y, mean, rstd scatters.
    let want: Vec<String> = [
        p(3, "load+lat1"),
        p(3, "store+lat1"),
        p(3, "load+mask+lat1"),
        p(3, "store+mask+lat1"),
    ]
    .concat();
    assert_eq!(
        pointer_ops(
            n::layer_norm_stats_gather::kernel::<bf16, 512>(),
            stats_arrays(BF16, 8192, 512)
        ),
        want
    );
}

// ---------------------------------------------------------------------------------------------------------
// tileiras for four architectures.

#[test]
fn compile_four_archs() {
    common::compile_four_archs(
        "compile_four_archs",
        cases().into_iter().map(|(n, k, a, _)| (n, k, a)),
    );
}

// ---------------------------------------------------------------------------------------------------------
// GPU runs through the host API against the CPU references.

mod gpu {
    use super::*;
    use cutile::launch::TensorArg;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use cutile_kernels::op::{Operand, PlannedLaunch, Target, execute};

    /// Max abs difference (NaN against a number counts as infinite; `cutile_testkit::max_abs_err`).
    fn max_err(got: &[f32], want: &[f32]) -> f32 {
        assert_eq!(got.len(), want.len());
        max_abs_err(got, want)
    }

    /// Output tolerance per element type (outputs reach ~6: |x| ≤ 4 normalized, w ≤ 1.5).
    fn tol(dt: ScalarType) -> f32 {
        match dt {
            F32 => 1e-4,
            F16 => 8e-3,
            _ => 5e-2,
        }
    }

    struct Gpu {
        dev: Device,
        stream: Stream,
        target: Target,
        failures: Vec<String>,
    }

    impl Gpu {
        fn up<T: DeviceElement>(&self, v: &[f32], shape: &[i64]) -> Tensor<T> {
            let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
            Tensor::from_host(&self.dev, &h, shape).expect("upload")
        }

        fn down<T: DeviceElement>(t: &Tensor<T>) -> Vec<f32> {
            t.to_host()
                .expect("download")
                .into_iter()
                .map(|v| v.to_f64() as f32)
                .collect()
        }

        /// Runs every launch of `plan` (one per candidate) over `operands`, calling `check` after each.
        fn each_candidate(
            &mut self,
            label: &str,
            operands: &[Operand],
            plan: Vec<PlannedLaunch>,
            mut check: impl FnMut() -> Vec<(&'static str, f32, f32)>,
        ) {
            assert!(!plan.is_empty(), "{label}: nothing planned");
            for launch in &plan {
                // SAFETY: the operands are the live tensors of the caller, which outlive the wait below.
                let p = unsafe { execute(&self.stream, operands, std::slice::from_ref(launch)) }
                    .unwrap_or_else(|e| panic!("{label} / {}: {e}", launch.config));
                p.wait().unwrap();
                for (what, err, tol) in check() {
                    println!(
                        "{label} / {}: {what} max abs error {err:e} (tolerance {tol:e})",
                        launch.config
                    );
                    if err > tol {
                        self.failures
                            .push(format!("{label} / {} / {what}", launch.config));
                    }
                }
            }
        }
    }

    fn round<T: DeviceElement>(v: Vec<f32>) -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    }

    fn inputs<T: DeviceElement>(n: usize, cols: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let x = round::<T>(data(n, 1).iter().map(|v| 4.0 * v).collect());
        let r = round::<T>(data(n, 7).iter().map(|v| 2.0 * v).collect());
        let w = round::<T>(data(cols, 2).iter().map(|v| 1.0 + 0.5 * v).collect());
        let b = round::<T>(data(cols, 3).iter().map(|v| 0.1 * v).collect());
        (x, r, w, b)
    }

    fn add_rms_norm<T: DeviceElement>(g: &mut Gpu, dt: ScalarType, shape: &[i64]) {
        let cols = *shape.last().unwrap() as usize;
        let count: i64 = shape.iter().product();
        let (x, r, w, _) = inputs::<T>(count as usize, cols);
        let eps = 1e-6;
        let (tx, tr, tw) = (
            g.up::<T>(&x, shape),
            g.up::<T>(&r, shape),
            g.up::<T>(&w, &[cols as i64]),
        );
        let th = Tensor::<T>::zeros(&g.dev, shape).unwrap();
        let ty = Tensor::<T>::zeros(&g.dev, shape).unwrap();
        let operands = [
            Operand::of("x", &tx),
            Operand::of("r", &tr),
            Operand::of("w", &tw),
            Operand::of("h", &th),
            Operand::of("y", &ty),
        ];
        let plan = norm::plan(norm::ADD_RMS_NORM, &operands, &g.target, eps, true).unwrap();
        let (want_h, want_y) = norm::add_rms_norm_reference(&x, &r, &w, eps, cols, dt);
        let label = format!("add_rms_norm {dt} {shape:?}");
        g.each_candidate(&label, &operands, plan, || {
            vec![
                ("h", max_err(&Gpu::down(&th), &want_h), 0.0),
                ("y", max_err(&Gpu::down(&ty), &want_y), tol(dt)),
            ]
        });
        // The public entry point too (default configuration).
        let (mut h2, mut y2) = (
            Tensor::<T>::zeros(&g.dev, shape).unwrap(),
            Tensor::<T>::zeros(&g.dev, shape).unwrap(),
        );
        norm::add_rms_norm(&g.stream, &tx, &tr, &tw, eps, &mut h2, &mut y2)
            .unwrap()
            .wait()
            .unwrap();
        let e = max_err(&Gpu::down(&y2), &want_y);
        if e > tol(dt) || max_err(&Gpu::down(&h2), &want_h) > 0.0 {
            g.failures.push(format!("{label} / host API"));
        }
    }

    fn layer_norm_stats<T: DeviceElement>(g: &mut Gpu, dt: ScalarType, shape: &[i64]) {
        let cols = *shape.last().unwrap() as usize;
        let lead = &shape[..shape.len() - 1];
        let count: i64 = shape.iter().product();
        let (x, _, w, b) = inputs::<T>(count as usize, cols);
        let eps = 1e-5;
        let tx = g.up::<T>(&x, shape);
        let (tw, tb) = (g.up::<T>(&w, &[cols as i64]), g.up::<T>(&b, &[cols as i64]));
        let ty = Tensor::<T>::zeros(&g.dev, shape).unwrap();
        let tm = Tensor::<f32>::zeros(&g.dev, lead).unwrap();
        let ts = Tensor::<f32>::zeros(&g.dev, lead).unwrap();
        let operands = [
            Operand::of("x", &tx),
            Operand::of("w", &tw),
            Operand::of("b", &tb),
            Operand::of("y", &ty),
            Operand::of("mean", &tm),
            Operand::of("rstd", &ts),
        ];
        let plan = norm::plan(norm::LAYER_NORM_STATS, &operands, &g.target, eps, true).unwrap();
        let (want_y, want_m, want_s) = norm::layer_norm_stats_reference(&x, &w, &b, eps, cols);
        let label = format!("layer_norm_stats {dt} {shape:?}");
        g.each_candidate(&label, &operands, plan, || {
            vec![
                ("y", max_err(&Gpu::down(&ty), &want_y), tol(dt)),
                ("mean", max_err(&tm.to_host().unwrap(), &want_m), 1e-5),
                ("rstd", max_err(&ts.to_host().unwrap(), &want_s), 1e-4),
            ]
        });
        let mut y2 = Tensor::<T>::zeros(&g.dev, shape).unwrap();
        let mut m2 = Tensor::<f32>::zeros(&g.dev, lead).unwrap();
        let mut s2 = Tensor::<f32>::zeros(&g.dev, lead).unwrap();
        norm::layer_norm_stats(&g.stream, &tx, &tw, &tb, eps, &mut y2, &mut m2, &mut s2)
            .unwrap()
            .wait()
            .unwrap();
        if max_err(&Gpu::down(&y2), &want_y) > tol(dt)
            || max_err(&m2.to_host().unwrap(), &want_m) > 1e-5
            || max_err(&s2.to_host().unwrap(), &want_s) > 1e-4
        {
            g.failures.push(format!("{label} / host API"));
        }
    }

    /// Per-head RMSNorm of heads `0..heads` of a `[tokens, all_heads, d]` tensor (a strided view when
    /// `heads < all_heads`, as `q` inside a fused `qkv`).
    fn rms_norm_heads<T: DeviceElement>(
        g: &mut Gpu,
        dt: ScalarType,
        tokens: i64,
        heads: i64,
        all_heads: i64,
        d: i64,
    ) {
        let (x_all, _, w, _) = inputs::<T>((tokens * all_heads * d) as usize, d as usize);
        let eps = 1e-6;
        let t_all = g.up::<T>(&x_all, &[tokens, all_heads, d]);
        let tx = t_all.slice(1, 0..heads).unwrap();
        let tw = g.up::<T>(&w, &[d]);
        let shape = [tokens, heads, d];
        let ty = Tensor::<T>::zeros(&g.dev, &shape).unwrap();
        let x: Vec<f32> = x_all
            .chunks((all_heads * d) as usize)
            .flat_map(|tok| tok[..(heads * d) as usize].to_vec())
            .collect();
        let want = norm::rms_norm_heads_reference(&x, &w, eps, d as usize);
        let operands = [
            Operand::of("x", &tx),
            Operand::of("w", &tw),
            Operand::of("y", &ty),
        ];
        assert_eq!(tx.tensor_ref(false).shape(), &shape);
        let plan = norm::plan_rms_norm_heads(&operands, &g.target, eps, true).unwrap();
        let label = format!("rms_norm_heads {dt} [{tokens}, {heads} of {all_heads}, {d}]");
        g.each_candidate(&label, &operands, plan, || {
            vec![("y", max_err(&Gpu::down(&ty), &want), tol(dt))]
        });
        let mut y2 = Tensor::<T>::zeros(&g.dev, &shape).unwrap();
        norm::rms_norm_heads(&g.stream, &tx, &tw, eps, &mut y2)
            .unwrap()
            .wait()
            .unwrap();
        if max_err(&Gpu::down(&y2), &want) > tol(dt) {
            g.failures.push(format!("{label} / host API"));
        }
    }

    fn all_ops<T: DeviceElement>(g: &mut Gpu, dt: ScalarType) {
        // Ragged (masked branch), exact width (unmasked branch), rank 3, wider than a whole-row tile.
        for shape in [&[37i64, 1000][..], &[5, 1024], &[2, 3, 777], &[3, 9001]] {
            add_rms_norm::<T>(g, dt, shape);
            layer_norm_stats::<T>(g, dt, shape);
        }
        layer_norm_stats::<T>(g, dt, &[41, 512]);
        // Ragged head counts and token counts, exact blocks, a decode step, a ragged head length, and
        // `q` as a strided view of `qkv`.
        for (tokens, heads, all, d) in [
            (1000, 6, 6, 64),
            (64, 8, 8, 128),
            (1, 8, 8, 128),
            (37, 5, 5, 80),
            (300, 8, 12, 128),
            (17, 2, 4, 256),
        ] {
            rms_norm_heads::<T>(g, dt, tokens, heads, all, d);
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
    fn gpu_matches_reference() {
        let Some((dev, stream)) = gpu_device("gpu_matches_reference") else {
            return;
        };
        let target = Target::of(&dev).unwrap();
        let mut g = Gpu {
            dev,
            stream,
            target,
            failures: vec![],
        };
        all_ops::<f32>(&mut g, F32);
        all_ops::<f16>(&mut g, F16);
        all_ops::<bf16>(&mut g, BF16);
        assert!(g.failures.is_empty(), "mismatches: {:?}", g.failures);
    }
}
