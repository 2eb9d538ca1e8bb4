//! Flash-attention forward: IR of one specialization per kernel and mode pinned as insta snapshots and
//! verified, the catalog's head dimensions and tile shapes compiled by tileiras for sm_90 (reported as
//! skipped when tileiras is not installed), the CPU reference checked against closed forms, and the
//! kernels run on the GPU against it (reported as skipped without a GPU).
//!
//! A GPU machine without tileiras runs the GPU test from cubins saved by `compile_sm90` on a machine with
//! it: set `CUTILE_KERNELS_CUBINS=<dir>` on both.

#![allow(clippy::unwrap_used)]

use crate::common;
use common::*;
use cutile::dsl::{Kernel, TensorMeta};
use cutile::runtime::{CuModule, Device, DeviceElement, KernelArgs, Stream, Tensor};
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::attention::{attention_reference, kernels as a};
use half::{bf16, f16};

/// q, k, v, o of a `[slices, seq, d]` launch.
fn arrays_3d(dtype: ScalarType, slices: i64, seq: i64, d: i64) -> Vec<TensorMeta> {
    vec![t(dtype, &[slices, seq, d]); 4]
}

/// q, k, v, o of a `[b, h, seq, d]` launch with `h_kv` K/V heads.
fn arrays_4d(dtype: ScalarType, b: i64, h: i64, h_kv: i64, seq: i64, d: i64) -> Vec<TensorMeta> {
    let q = t(dtype, &[b, h, seq, d]);
    let kv = t(dtype, &[b, h_kv, seq, d]);
    vec![q.clone(), kv.clone(), kv, q]
}

/// (name, kernel, arrays, snapshot it?)
fn cases() -> Vec<common::IrCase> {
    vec![
        (
            "fa3d_bf16_64x128_d128",
            a::flash_attention::kernel::<bf16, 64, 128, 128, false>(),
            arrays_3d(BF16, 128, 4096, 128),
            true,
        ),
        (
            "fa3d_causal_bf16_64x128_d128",
            a::flash_attention::kernel::<bf16, 64, 128, 128, true>(),
            arrays_3d(BF16, 128, 4096, 128),
            true,
        ),
        (
            "fa3d_bf16_64x64_d64_seq1000",
            a::flash_attention::kernel::<bf16, 64, 64, 64, false>(),
            arrays_3d(BF16, 8, 1000, 64),
            false,
        ),
        (
            "fa3d_causal_f16_64x128_d64",
            a::flash_attention::kernel::<f16, 64, 128, 64, true>(),
            arrays_3d(F16, 8, 1024, 64),
            false,
        ),
        (
            "fa4d_gqa_bf16_64x64_d64",
            a::flash_attention_4d::kernel::<bf16, 64, 64, 64, false>(),
            arrays_4d(BF16, 2, 16, 4, 2048, 64),
            true,
        ),
        (
            "fa4d_causal_bf16_64x128_d128",
            a::flash_attention_4d::kernel::<bf16, 64, 128, 128, true>(),
            arrays_4d(BF16, 4, 32, 32, 4096, 128),
            false,
        ),
    ]
}

#[test]
fn ir_snapshots_verify() {
    for (name, ir) in common::verified_snapshot_irs(cases()) {
        insta::assert_snapshot!(name, ir);
    }
}

/// Each kernel has an unmasked and a masked key loop; only the causal one compares keys with queries.
#[test]
fn two_key_loops_and_causal_mask_only_when_causal() {
    for (name, k, arrays, _) in cases() {
        let ir = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .ir_text();
        assert_eq!(ir.matches(" for ").count(), 2, "{name}\n{ir}");
        // `key < seq_k` in both modes, plus `key <= query` when causal.
        let cmps = ir.matches("cmpi").count();
        let expect = if name.contains("causal") { 2 } else { 1 };
        assert_eq!(cmps, expect, "{name}\n{ir}");
    }
}

#[test]
fn compile_sm90() {
    let gpu = gpu_cases().into_iter().map(|c| {
        let arrays = c.arrays();
        (c.name, c.kernel, arrays)
    });
    let all = cases()
        .into_iter()
        .map(|(name, k, arrays, _)| (name, k, arrays));
    compile_all_sm90("compile_sm90", all.chain(gpu));
}

/// Values `v[s, j, c] = s + j · c / 10`, so column means have closed forms.
fn ramp_values(slices: usize, seq: usize, d: usize) -> Vec<f32> {
    (0..slices * seq * d)
        .map(|i| {
            let (s, j, c) = (i / (seq * d), (i / d) % seq, i % d);
            s as f32 + (j * c) as f32 / 10.0
        })
        .collect()
}

#[test]
fn reference_uniform_scores_average_the_values() {
    // q = 0 makes every score equal: non-causal rows are the mean of all values, causal row i the mean
    // of values 0..=i.
    let (slices, seq, d) = (2, 5, 3);
    let q = vec![0.0; slices * seq * d];
    let k = ramp_values(slices, seq, d);
    let v = ramp_values(slices, seq, d);
    let full = attention_reference(&q, &k, &v, seq, seq, d, 0.5, false);
    let causal = attention_reference(&q, &k, &v, seq, seq, d, 0.5, true);
    for s in 0..slices {
        for i in 0..seq {
            let row = (s * seq + i) * d;
            let want_full: Vec<f32> = (0..d)
                .map(|c| s as f32 + (seq - 1) as f32 / 2.0 * c as f32 / 10.0)
                .collect();
            let want_causal: Vec<f32> = (0..d)
                .map(|c| s as f32 + i as f32 / 2.0 * c as f32 / 10.0)
                .collect();
            assert_all_close(
                &format!("full {s} {i}"),
                &full[row..row + d],
                &want_full,
                1e-5,
                0.0,
            );
            assert_all_close(
                &format!("causal {s} {i}"),
                &causal[row..row + d],
                &want_causal,
                1e-5,
                0.0,
            );
        }
    }
}

#[test]
fn reference_sharp_scores_pick_the_matching_key() {
    // One-hot queries and keys with a large scale: query i attends only to key i.
    let (seq, d) = (4, 4);
    let eye: Vec<f32> = (0..seq * d)
        .map(|i| if i / d == i % d { 1.0 } else { 0.0 })
        .collect();
    let v = ramp_values(1, seq, d);
    let out = attention_reference(&eye, &eye, &v, seq, seq, d, 100.0, false);
    assert_all_close("sharp scores", &out, &v, 1e-6, 0.0);
    let out = attention_reference(&eye, &eye, &v, seq, seq, d, 100.0, true);
    assert_all_close("sharp scores", &out, &v, 1e-6, 0.0);
}

// ---------------------------------------------------------------------------------------------------------
// GPU runs against the reference.

/// One GPU launch. `rank4`: the 4-D kernel on `[b, h, seq, d]` (else 3-D on `[b·h, seq, d]`); `bshd`:
/// the 4-D arrays stored as `[b, seq, h, d]` and passed as strided views.
struct GpuCase {
    name: &'static str,
    kernel: Kernel,
    dtype: ScalarType,
    rank4: bool,
    bshd: bool,
    causal: bool,
    b: i64,
    h: i64,
    h_kv: i64,
    sq: i64,
    sk: i64,
    d: i64,
}

impl GpuCase {
    /// Logical shape and strides of q/o (`kv = false`) or k/v.
    fn layout(&self, kv: bool) -> (Vec<i64>, Vec<i64>) {
        let (h, s) = if kv {
            (self.h_kv, self.sk)
        } else {
            (self.h, self.sq)
        };
        let d = self.d;
        if !self.rank4 {
            return (vec![self.b * h, s, d], vec![s * d, d, 1]);
        }
        let strides = if self.bshd {
            vec![s * h * d, d, h * d, 1]
        } else {
            vec![h * s * d, s * d, d, 1]
        };
        (vec![self.b, h, s, d], strides)
    }

    fn meta(&self, kv: bool) -> TensorMeta {
        let (shape, strides) = self.layout(kv);
        TensorMeta::contiguous(self.dtype, &shape).with_strides(&strides)
    }

    fn arrays(&self) -> Vec<TensorMeta> {
        vec![
            self.meta(false),
            self.meta(true),
            self.meta(true),
            self.meta(false),
        ]
    }
}

/// Ragged sequence lengths (off both tile sizes), seq_q ≠ seq_k, both head dimensions, f16, GQA and a
/// strided `[b, seq, h, d]` layout.
fn gpu_cases() -> Vec<GpuCase> {
    let base = |name, kernel, causal, d| GpuCase {
        name,
        kernel,
        dtype: BF16,
        rank4: false,
        bshd: false,
        causal,
        b: 3,
        h: 1,
        h_kv: 1,
        sq: 200,
        sk: 200,
        d,
    };
    vec![
        base(
            "gpu_fa3d_64x64_d64",
            a::flash_attention::kernel::<bf16, 64, 64, 64, false>(),
            false,
            64,
        ),
        base(
            "gpu_fa3d_causal_64x128_d64",
            a::flash_attention::kernel::<bf16, 64, 128, 64, true>(),
            true,
            64,
        ),
        GpuCase {
            sq: 130,
            sk: 300,
            ..base(
                "gpu_fa3d_64x128_d128_sq130_sk300",
                a::flash_attention::kernel::<bf16, 64, 128, 128, false>(),
                false,
                128,
            )
        },
        GpuCase {
            sq: 257,
            sk: 257,
            ..base(
                "gpu_fa3d_causal_64x128_d128",
                a::flash_attention::kernel::<bf16, 64, 128, 128, true>(),
                true,
                128,
            )
        },
        GpuCase {
            dtype: F16,
            ..base(
                "gpu_fa3d_causal_f16_64x64_d64",
                a::flash_attention::kernel::<f16, 64, 64, 64, true>(),
                true,
                64,
            )
        },
        GpuCase {
            rank4: true,
            bshd: true,
            b: 2,
            h: 4,
            h_kv: 2,
            sq: 150,
            sk: 150,
            ..base(
                "gpu_fa4d_gqa_bshd_64x64_d64",
                a::flash_attention_4d::kernel::<bf16, 64, 64, 64, false>(),
                false,
                64,
            )
        },
        GpuCase {
            rank4: true,
            b: 1,
            h: 4,
            h_kv: 1,
            sq: 200,
            sk: 200,
            ..base(
                "gpu_fa4d_causal_gqa_64x128_d128",
                a::flash_attention_4d::kernel::<bf16, 64, 128, 128, true>(),
                true,
                128,
            )
        },
    ]
}

/// Append an array's pointer, extents and strides (i32 index type) to `args`.
fn tensor_args<'a>(args: KernelArgs<'a>, ptr: u64, m: &TensorMeta) -> KernelArgs<'a> {
    let args = m.shape.iter().fold(args.ptr(ptr), |a, &d| a.arg(d as i32));
    m.strides.iter().fold(args, |a, &s| a.arg(s as i32))
}

/// Element `(b, h, s, c)` of a logical `[b, h, s, d]` array stored with `strides`.
fn at(strides: &[i64], idx: [i64; 4]) -> usize {
    let s4: [i64; 4] = match strides.len() {
        // 3-D `[b·h, s, d]` with one head per slice.
        3 => [strides[0], 0, strides[1], strides[2]],
        _ => [strides[0], strides[1], strides[2], strides[3]],
    };
    idx.iter().zip(s4).map(|(i, s)| i * s).sum::<i64>() as usize
}

/// Copy head `(b, h)` of a stored array into a contiguous `[s, d]` slice.
fn head(buf: &[f32], strides: &[i64], b: i64, h: i64, s: i64, d: i64) -> Vec<f32> {
    let mut out = Vec::with_capacity((s * d) as usize);
    for i in 0..s {
        for c in 0..d {
            out.push(buf[at(strides, [b, h, i, c])]);
        }
    }
    out
}

/// Run one case with elements `T`: the max abs error against the reference, or `None` when skipped.
fn run_case<T: DeviceElement>(c: &GpuCase, dev: &Device, stream: &Stream) -> Option<f32> {
    let arrays = c.arrays();
    let s = c.kernel.specialize(&arrays).expect("specialize");
    let cubin = gpu_cubin(c.name, &s)?;
    let (qm, kvm) = (c.meta(false), c.meta(true));
    let size = |m: &TensorMeta| (m.max_offset() + 1) as usize;
    let round = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    };
    let q = round(data(size(&qm), 4).iter().map(|v| 1.5 * v).collect());
    let k = round(data(size(&kvm), 5).iter().map(|v| 1.5 * v).collect());
    let v = round(data(size(&kvm), 6));
    let up = |x: &[f32]| {
        let h: Vec<T> = x.iter().map(|&e| T::from_f64(e as f64)).collect();
        Tensor::from_host(dev, &h, &[h.len() as i64]).expect("upload")
    };
    let (tq, tk, tv) = (up(&q), up(&k), up(&v));
    let to = Tensor::<T>::zeros(dev, &[size(&qm) as i64]).expect("allocate");
    let scale = 1.0 / (c.d as f32).sqrt();
    let mut args = tensor_args(KernelArgs::new(), tq.device_ptr(), &qm);
    args = tensor_args(args, tk.device_ptr(), &kvm);
    args = tensor_args(args, tv.device_ptr(), &kvm);
    args = tensor_args(args.arg(scale), to.device_ptr(), &qm);
    let module = CuModule::from_cubin(dev, &cubin).expect("load the cubin");
    let kernel = module.kernel(s.entry).expect("find the kernel");
    let grid = ((c.b * c.h) as u32, ((c.sq + 63) / 64) as u32, 1);
    // SAFETY: every pointer is a live allocation covering its array's largest offset, and the grid has
    // one block per (batch·head, query tile of 64), as the kernels expect.
    unsafe { kernel.launch(stream, grid, &args) }.expect("launch");
    let got: Vec<f32> = to
        .to_host()
        .expect("download")
        .into_iter()
        .map(|x| x.to_f64() as f32)
        .collect();
    let mut err = 0f32;
    for b in 0..c.b {
        for h in 0..c.h {
            let hk = h / (c.h / c.h_kv);
            let want = attention_reference(
                &head(&q, &qm.strides, b, h, c.sq, c.d),
                &head(&k, &kvm.strides, b, hk, c.sk, c.d),
                &head(&v, &kvm.strides, b, hk, c.sk, c.d),
                c.sq as usize,
                c.sk as usize,
                c.d as usize,
                scale,
                c.causal,
            );
            let out = head(&got, &qm.strides, b, h, c.sq, c.d);
            err = err.max(max_abs_err(&out, &want));
        }
    }
    Some(err)
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_matches_reference() {
    let Some((dev, stream)) = gpu_device("gpu_matches_reference") else {
        return;
    };
    // 16-bit outputs of values in [-1, 1], P rounded to 16 bits before the P·V mma.
    let tol = 2e-2;
    let mut failures = vec![];
    for c in gpu_cases() {
        let r = match c.dtype {
            F16 => run_case::<f16>(&c, &dev, &stream),
            _ => run_case::<bf16>(&c, &dev, &stream),
        };
        if let Some(err) = r {
            println!("{}: max abs error {err:e} (tolerance {tol:e})", c.name);
            if err > tol {
                failures.push(c.name);
            }
        }
    }
    assert!(failures.is_empty(), "mismatches: {failures:?}");
}
