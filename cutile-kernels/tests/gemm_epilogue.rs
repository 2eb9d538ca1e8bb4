//! The GEMM epilogue and split-K path (`gemm::epilogue`): the split-K rule, the planner without a GPU
//! (typed errors, launches per schedule, the scratch), the registry ops, the catalog's specializations
//! compiled by tileiras for sm_80/90/100/120 and the other epilogues for sm_90, and GPU tests through the
//! host API (`#[ignore]`d; skipped without a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::gemm::epilogue::{self, Activation, EpilogueSpec, Schedule};
use cutile_kernels::gemm::{self, GemmOptions};
use cutile_kernels::op::{CallSpec, OpError, Operand, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

const TF32: GemmOptions = GemmOptions { allow_tf32: true };

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

/// Described `[a, b, c, bias?, residual?]` (+ split-K scratch) for `m x k` by `k x n`.
fn call(
    spec: &EpilogueSpec,
    dt: ScalarType,
    out: ScalarType,
    m: i64,
    n: i64,
    k: i64,
) -> Vec<Operand> {
    let d = Operand::described;
    let mut ops = vec![
        d("a", 0, dt, &[m, k]),
        d("b", 1, dt, &[k, n]),
        d("c", 2, out, &[m, n]),
    ];
    if spec.bias {
        ops.push(d("bias", ops.len(), dt, &[n]));
    }
    if spec.residual {
        ops.push(d("residual", ops.len(), out, &[m, n]));
    }
    epilogue::with_scratch(&ops, &target(), spec).unwrap()
}

const FULL: EpilogueSpec = EpilogueSpec {
    bias: true,
    activation: Activation::GeluErf,
    residual: true,
};

#[test]
fn split_k_rule_follows_the_documented_examples() {
    let t = target();
    assert_eq!(
        t.sm_count, 132,
        "the examples assume an H100/H200's 132 SMs"
    );
    let splits = |m, n, k| match epilogue::schedule(&t, BF16, m, n, k, &EpilogueSpec::default()) {
        Schedule::SplitK { splits, bm, bn, .. } => {
            assert_eq!((bm, bn), (64, 128));
            splits
        }
        Schedule::Direct(_) => 1,
    };
    for (m, n, k, want) in [
        // Decode shapes are bandwidth-bound (intensity 16 / 62 / 124): direct, as the H200 measured.
        (16, 8192, 8192, 1),
        (64, 8192, 8192, 1),
        (128, 8192, 8192, 1),
        // Compute-bound with 32 tiles: 16 splits.
        (512, 512, 65536, 16),
        // Intensity 127.75, just under the gate.
        (256, 256, 65536, 1),
        // Few tiles (8 tall, 72 wide: 72 > 132 / 2): direct.
        (512, 9216, 65536, 1),
        (4096, 4096, 4096, 1),
        (8192, 8192, 8192, 1),
        // Shallow K: no split (fewer than 8 K tiles).
        (16, 8192, 448, 1),
        // Enough tiles already.
        (1024, 8192, 8192, 1),
        // 9 K tiles: 2 splits keep 4 tiles each, 4 would not.
        (512, 512, 576, 2),
        (1000, 1023, 517, 1),
    ] {
        assert_eq!(splits(m, n, k), want, "{m}x{n}x{k}");
    }
    // The direct schedule is the plain GEMM's choice; decode rows (at most 32, 16-bit) take 16- or
    // 32-row tiles, 64 columns, 128 deep, one per block, as the plain product does.
    assert_eq!(
        epilogue::schedule(&t, BF16, 4096, 4096, 4096, &EpilogueSpec::default()),
        Schedule::Direct(gemm::config::choose(&t, BF16, 4096, 4096))
    );
    // More than 16 tiles per SM: the plain product's persistent 128x256 tiles over 8 workers, unless
    // a residual comes after a bias or an activation (one 128x128 tile per block); a residual alone
    // starts the accumulator, persistent over 8 workers on 128x128 tiles (the 128x256 K loop does
    // not overlap its steps when the accumulator is loaded, `config::choose_epilogue`).
    let wide = |bias, residual| {
        let spec = EpilogueSpec {
            bias,
            residual,
            ..EpilogueSpec::default()
        };
        match epilogue::schedule(&t, BF16, 8192, 8192, 8192, &spec) {
            Schedule::Direct(c) => (c.bm, c.bn, c.persistent, c.workers),
            s => panic!("8192³: {s:?}"),
        }
    };
    assert_eq!(wide(false, false), (128, 256, true, 8));
    assert_eq!(wide(true, false), (128, 256, true, 8));
    assert_eq!(wide(false, true), (128, 128, true, 8));
    assert_eq!(wide(true, true), (128, 128, false, 4));
    for (m, dt, want) in [
        (1, BF16, (16, 64, 128)),
        (16, F16, (16, 64, 128)),
        (17, BF16, (32, 64, 128)),
        (32, BF16, (32, 64, 128)),
        (64, BF16, (64, 128, 64)),
        (16, F32, (64, 128, 32)),
    ] {
        let Schedule::Direct(c) =
            epilogue::schedule(&t, dt, m, 8192, 8192, &EpilogueSpec::default())
        else {
            panic!("{m} x 8192 x 8192 {dt}: split");
        };
        assert_eq!((c.bm, c.bn, c.bk), want, "{m} {dt}");
        assert!(!c.persistent, "{m} {dt}");
    }
}

#[test]
fn plans_one_launch_direct_and_two_split() {
    let t = target();
    let ops = call(&FULL, BF16, BF16, 4096, 4096, 4096);
    assert_eq!(ops.len(), 5, "no scratch for a direct call");
    let l = epilogue::plan_epilogue(&ops, &t, &FULL, &TF32).unwrap();
    assert_eq!(l.len(), 1);
    assert!(l[0].kernel.name().starts_with("gemm_epilogue"));
    assert_eq!(l[0].grid, Some((132, 1, 1)), "persistent: one block per SM");
    assert_eq!(l[0].args.len(), 6, "a, b, bias, residual, group, c");

    let ops = call(&FULL, BF16, BF16, 512, 512, 65536);
    assert_eq!(ops.len(), 6, "split-K appends its scratch");
    assert_eq!(ops[5].dtype, F32);
    assert_eq!(ops[5].shape, [epilogue::scratch_len(16, 512, 512)]);
    let l = epilogue::plan_epilogue(&ops, &t, &FULL, &TF32).unwrap();
    assert_eq!(l.len(), 2);
    assert!(l[0].kernel.name().starts_with("gemm_partial"));
    assert_eq!(l[0].grid, Some((8, 4, 16)));
    assert!(l[1].kernel.name().starts_with("gemm_reduce"));
    assert_eq!(l[1].grid, Some((8, 4, 1)));
    // Without the scratch, split-K is a typed error naming `with_scratch`.
    expect_error(
        epilogue::plan_epilogue(&ops[..5], &t, &FULL, &TF32),
        "with_scratch",
    );
    // A too small scratch.
    let mut small = ops.clone();
    small[5] = Operand::described("partials", 5, F32, &[100]);
    expect_error(
        epilogue::plan_epilogue(&small, &t, &FULL, &TF32),
        "scratch_len",
    );
}

#[test]
fn bad_calls_are_typed_errors_and_empty_calls_plan_nothing() {
    let t = target();
    let plan = |ops: &[Operand], spec: &EpilogueSpec, o: &GemmOptions| {
        epilogue::plan_epilogue(ops, &t, spec, o)
    };
    let ok = call(&FULL, BF16, BF16, 100, 300, 64);
    assert_eq!(plan(&ok, &FULL, &TF32).unwrap().len(), 1);
    // Bias of the wrong length / type.
    let mut o = ok.clone();
    o[3] = Operand::described("bias", 3, BF16, &[299]);
    expect_error(plan(&o, &FULL, &TF32), "`bias` must be `[b.cols]`");
    let mut o = ok.clone();
    o[3] = Operand::described("bias", 3, F16, &[300]);
    expect_error(plan(&o, &FULL, &TF32), "bias");
    // Residual of the wrong shape / type.
    let mut o = ok.clone();
    o[4] = Operand::described("residual", 4, BF16, &[100, 301]);
    expect_error(plan(&o, &FULL, &TF32), "`residual` must be");
    let mut o = ok.clone();
    o[4] = Operand::described("residual", 4, F32, &[100, 300]);
    expect_error(plan(&o, &FULL, &TF32), "residual");
    // Missing tensors.
    expect_error(plan(&ok[..4], &FULL, &TF32), "takes 5 tensors");
    // f32 needs the tf32 opt-in.
    let f = call(&FULL, F32, F32, 100, 300, 64);
    expect_error(plan(&f, &FULL, &GemmOptions::default()), "allow_tf32");
    assert_eq!(plan(&f, &FULL, &TF32).unwrap().len(), 1);
    // Output types: the inputs' or f32; bf16 → f16 has no kernel.
    let none = EpilogueSpec::default();
    let x = call(&none, BF16, F32, 100, 300, 64);
    assert_eq!(plan(&x, &none, &TF32).unwrap().len(), 1);
    let x = call(&none, BF16, F16, 100, 300, 64);
    expect_error(
        plan(&x, &none, &TF32),
        "the output is the inputs' type or f32",
    );
    // Inner extents.
    let mut o = ok.clone();
    o[1] = Operand::described("b", 1, BF16, &[63, 300]);
    expect_error(plan(&o, &FULL, &TF32), "inner extents");
    // Empty output: nothing; k = 0 still runs the epilogue (bias + act of zeros).
    assert!(
        plan(&call(&FULL, BF16, BF16, 0, 300, 64), &FULL, &TF32)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        plan(&call(&FULL, BF16, BF16, 10, 300, 0), &FULL, &TF32)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn absent_tensors_are_dummies_and_bias_is_a_broadcast_row() {
    let t = target();
    let spec = EpilogueSpec {
        bias: true,
        ..Default::default()
    };
    let ops = call(&spec, F16, F16, 100, 300, 64);
    let l = epilogue::plan_epilogue(&ops, &t, &spec, &TF32).unwrap();
    use cutile_kernels::op::PlannedArg;
    match &l[0].args[2] {
        PlannedArg::Tensor {
            operand,
            shape,
            strides,
            ..
        } => {
            assert_eq!((*operand, shape.as_slice()), (3, [1, 300].as_slice()));
            assert_eq!(strides[0], 0);
        }
        other => panic!("bias arg {other:?}"),
    }
    match &l[0].args[3] {
        PlannedArg::Tensor {
            operand,
            shape,
            output,
            ..
        } => {
            assert_eq!(
                (*operand, shape.as_slice(), *output),
                (2, [1, 1].as_slice(), false)
            );
        }
        other => panic!("residual arg {other:?}"),
    }
}

#[test]
fn registry_ops_plan_every_epilogue() {
    let t = target();
    for op in epilogue::OPS {
        for (m, n, k) in [
            (4096, 4096, 4096),
            (16, 8192, 8192),
            (512, 512, 65536),
            (7, 9, 5),
        ] {
            let spec = CallSpec::new(op.name, "bf16", &[&[m, k], &[k, n]], false);
            let p = spec.plan(&t, false).unwrap();
            let split = matches!(
                epilogue::schedule(&t, BF16, m, n, k, &EpilogueSpec::default()),
                Schedule::SplitK { .. }
            );
            assert_eq!(p.launches.len(), 1 + split as usize, "{}", spec.label());
            let c = &p.operands[2];
            assert_eq!(c.dtype, if op.out_f32 { F32 } else { BF16 });
        }
    }
    assert!(cutile_kernels::op::registry::find("gemm_bias_gelu").is_ok());
}

#[test]
fn catalog_calls_compile_for_four_archs() {
    common::compile_four_archs(
        "gemm_epilogue catalog_calls_compile_for_four_archs",
        common::catalog_jobs(&epilogue::representative_calls()),
    );
}

#[test]
fn every_epilogue_compiles_for_sm90() {
    // Direct (64-row tiles: fewer tiles than SMs, shallow K) and split-K, per op, one element type
    // each (f16 for the f32-output ops, f32/tf32 for one).
    let mut calls = Vec::new();
    for op in epilogue::OPS {
        let dt = if op.out_f32 { "f16" } else { "bf16" };
        calls.push(CallSpec::new(op.name, dt, &[&[100, 64], &[64, 300]], false));
    }
    calls.push(CallSpec::new(
        "gemm_bias_silu",
        "bf16",
        &[&[512, 8192], &[8192, 512]],
        false,
    ));
    calls.push(CallSpec::new(
        "gemm_bias_gelu_tanh",
        "f32",
        &[&[100, 64], &[64, 300]],
        false,
    ));
    common::compile_all_sm90(
        "gemm_epilogue every_epilogue_compiles_for_sm90",
        common::catalog_jobs(&calls),
    );
}

/// GPU tests through the host API: `#[ignore]`d, and skipped (not failed) without a GPU.
mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use gemm::{GemmEpilogue, gemm_epilogue_reference};
    use half::bf16;

    fn host<T: DeviceElement>(v: &[f32]) -> Vec<T> {
        v.iter().map(|&x| T::from_f64(x as f64)).collect()
    }

    fn round<T: DeviceElement>(v: Vec<f32>) -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    }

    /// `c = act(a @ b + bias) + residual` with `b` passed as the transposed view of an `[n, k]`
    /// weight and the residual as a column slice of a wider buffer; compared with the f64 reference.
    #[allow(clippy::too_many_arguments)]
    fn case<T: DeviceElement, O: DeviceElement>(
        dev: &Device,
        s: &Stream,
        m: i64,
        n: i64,
        k: i64,
        act: Activation,
        bias: bool,
        residual: bool,
        tol: f64,
    ) {
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let a = round::<T>(cutile_testkit::data::uniform(mu * ku, 1, -1.0, 1.0));
        let w = round::<T>(cutile_testkit::data::uniform(nu * ku, 2, -1.0, 1.0)); // [n, k]
        let bv = round::<T>(cutile_testkit::data::uniform(nu, 3, -1.0, 1.0));
        let r = round::<O>(cutile_testkit::data::uniform(mu * (nu + 5), 4, -1.0, 1.0));
        let mut b = vec![0f32; ku * nu];
        for i in 0..nu {
            for p in 0..ku {
                b[p * nu + i] = w[i * ku + p];
            }
        }
        let r_logical: Vec<f32> = (0..mu)
            .flat_map(|i| r[i * (nu + 5)..i * (nu + 5) + nu].iter().copied())
            .collect();
        let want = gemm_epilogue_reference(
            &a,
            &b,
            bias.then_some(bv.as_slice()),
            act,
            residual.then_some(r_logical.as_slice()),
            mu,
            nu,
            ku,
        );
        let ta = Tensor::from_host(dev, &host::<T>(&a), &[m, k]).unwrap();
        let tw = Tensor::from_host(dev, &host::<T>(&w), &[n, k]).unwrap();
        let tb = tw.transpose(0, 1).unwrap();
        let tbias = Tensor::from_host(dev, &host::<T>(&bv), &[n]).unwrap();
        let tr_full = Tensor::from_host(dev, &host::<O>(&r), &[m, n + 5]).unwrap();
        let tr = tr_full.slice(1, 0..n).unwrap();
        let mut c = Tensor::<O>::zeros(dev, &[m, n]).unwrap();
        let epi = GemmEpilogue {
            bias: bias.then_some(&tbias as &dyn cutile::launch::TensorArg),
            activation: act,
            residual: residual.then_some(&tr as &dyn cutile::launch::TensorArg),
        };
        gemm::gemm_epilogue(s, &ta, &tb, &epi, &TF32, &mut c)
            .unwrap()
            .wait()
            .unwrap();
        let got: Vec<f32> = c
            .to_host()
            .unwrap()
            .into_iter()
            .map(|x| x.to_f64() as f32)
            .collect();
        let num: f64 = got
            .iter()
            .zip(&want)
            .map(|(g, w)| ((g - w) as f64).powi(2))
            .sum();
        let den: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
        let rel = (num / den.max(1e-30)).sqrt();
        assert!(
            rel <= tol,
            "{m}x{n}x{k} {act:?} bias={bias} residual={residual}: rel L2 {rel:.2e} > {tol:.0e}"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn epilogues_match_reference() {
        let Some((dev, s)) = gpu_device("gemm_epilogue epilogues_match_reference") else {
            return;
        };
        for act in [
            Activation::None,
            Activation::GeluErf,
            Activation::GeluTanh,
            Activation::Silu,
        ] {
            // Direct (ragged, and a bandwidth-bound decode shape), and split-K (long K, few tiles).
            case::<bf16, bf16>(&dev, &s, 100, 300, 77, act, true, true, 1e-2);
            case::<bf16, bf16>(&dev, &s, 16, 2048, 4096, act, true, false, 1e-2);
            case::<bf16, bf16>(&dev, &s, 512, 512, 8192, act, true, false, 1e-2);
        }
        // Output cast: bf16 inputs, f32 output (tighter), split and direct; tf32 inputs.
        case::<bf16, f32>(&dev, &s, 512, 512, 8192, Activation::Silu, true, true, 1e-4);
        case::<half::f16, f32>(
            &dev,
            &s,
            1000,
            1023,
            517,
            Activation::None,
            false,
            true,
            1e-4,
        );
        case::<f32, f32>(
            &dev,
            &s,
            130,
            250,
            96,
            Activation::GeluErf,
            true,
            false,
            2e-3,
        );
    }
}

/// Issue 14's fp8 question, asked of tileiras 13.5: the epilogue kernel with e4m3 / e5m2 operands
/// (multiplied as fp8 on tensor cores, f32 accumulation) and a bf16 output, per architecture. Prints
/// what each architecture answers (`--nocapture`) and asserts it: sm_90, sm_100 and sm_120 compile,
/// sm_80 is refused with `unsupported type 'f8E4M3FN'` / `'f8E5M2'`.
#[test]
fn fp8_operands_compile_where_tileiras_accepts_them() {
    use cutile::core::{f8e4m3fn, f8e5m2};
    use cutile::toolchain::{CompileRequest, Tileiras};
    use half::bf16;
    let tileiras = match Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip("fp8", &format!("tileiras not found ({e})"));
            return;
        }
    };
    let a = gemm::kernels::gemm_epilogue::kernel::<
        f8e4m3fn,
        f8e4m3fn,
        bf16,
        bf16,
        128,
        128,
        64,
        -1,
        0,
    >();
    let b =
        gemm::kernels::gemm_epilogue::kernel::<f8e5m2, f8e5m2, bf16, bf16, 128, 128, 64, -1, 0>();
    for (name, k, dt) in [("e4m3", a, F8E4M3FN), ("e5m2", b, F8E5M2)] {
        let metas = vec![
            common::t(dt, &[256, 512]),
            common::t(dt, &[512, 256]),
            common::t(dt, &[1, 1]),
            common::t(BF16, &[1, 1]),
            common::t(BF16, &[256, 256]),
        ];
        let s = k.specialize(&metas).unwrap();
        for arch in [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120] {
            let r = s.compile(&tileiras, &CompileRequest::new(arch));
            println!(
                "fp8 {name} {arch}: {}",
                match &r {
                    Ok(c) => format!("ok ({} bytes)", c.bytes.len()),
                    Err(e) => format!("refused: {e}"),
                }
            );
            // Tile IR 13.5 takes fp8 MMA operands from sm_89 on (Ada, Hopper, Blackwell); Ampere has
            // no fp8 type at all.
            match (arch, &r) {
                (GpuArch::Sm80, Err(e)) => {
                    let e = e.to_string();
                    assert!(e.contains("unsupported type 'f8E"), "{name} sm_80: {e}");
                }
                (GpuArch::Sm80, Ok(_)) => panic!("{name}: sm_80 compiled fp8"),
                (_, Ok(c)) => assert!(!c.bytes.is_empty()),
                (_, Err(e)) => panic!("{name} {arch}: {e}"),
            }
        }
    }
}
