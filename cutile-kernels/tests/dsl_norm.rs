//! RMSNorm and LayerNorm (whole-row and looped): IR of one specialization of each kernel pinned as an insta
//! snapshot and verified, every catalog-like specialization compiled by tileiras for sm_90 (reported as
//! skipped when tileiras is not installed), the CPU references checked against known values, and the
//! kernels run on the GPU against the references (reported as skipped without a GPU).
//!
//! A GPU machine without tileiras runs the GPU test from cubins saved by `compile_sm90` on a machine with
//! it: set `CUTILE_KERNELS_CUBINS=<dir>` on both.

#![allow(clippy::unwrap_used)]

use crate::common;
use common::*;
use cutile::dsl::{Kernel, TensorMeta};
use cutile::runtime::{CuModule, Device, DeviceElement, KernelArgs, Stream, Tensor};
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::norm::{self, kernels as n};
use half::bf16;

/// (name, kernel, arrays, snapshot it?)
fn cases() -> Vec<common::IrCase> {
    vec![
        (
            "rms_norm_bf16_1024",
            n::rms_norm::kernel::<bf16, 1024>(),
            rms_arrays(BF16, 8192, 1024),
            true,
        ),
        (
            "rms_norm_f32_4096_cols3000",
            n::rms_norm::kernel::<f32, 4096>(),
            rms_arrays(F32, 64, 3000),
            false,
        ),
        (
            "rms_norm_looped_bf16_1024",
            n::rms_norm_looped::kernel::<bf16, 1024>(),
            rms_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "rms_norm_looped_f32_2048_cols5000",
            n::rms_norm_looped::kernel::<f32, 2048>(),
            rms_arrays(F32, 64, 5000),
            false,
        ),
        (
            "layer_norm_bf16_1024",
            n::layer_norm::kernel::<bf16, 1024>(),
            ln_arrays(BF16, 8192, 1024),
            true,
        ),
        (
            "layer_norm_looped_bf16_1024",
            n::layer_norm_looped::kernel::<bf16, 1024>(),
            ln_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "layer_norm_looped_f32_2048_cols5000",
            n::layer_norm_looped::kernel::<f32, 2048>(),
            ln_arrays(F32, 64, 5000),
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

/// The looped kernels walk the row in a device loop (twice) and write through `store_at`; the whole-row
/// ones have no loop.
#[test]
fn looped_kernels_loop_over_column_tiles() {
    for (name, k, arrays, _) in cases() {
        let ir = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .ir_text();
        let loops = ir.matches(" for ").count();
        let expect = if name.contains("looped") { 2 } else { 0 };
        assert_eq!(loops, expect, "{name}: {loops} loops\n{ir}");
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

#[test]
fn rms_norm_reference_known_values() {
    // Row [3, 4]: mean of squares 12.5; row [0, 0] stays 0 (eps keeps it finite).
    let x = [3.0, 4.0, 0.0, 0.0];
    let w = [1.0, 2.0];
    let got = norm::rms_norm_reference(&x, &w, 0.0, 2);
    let r = 12.5f32.sqrt();
    assert_all_close("rms_norm", &got[..2], &[3.0 / r, 8.0 / r], 1e-6, 0.0);
    let got = norm::rms_norm_reference(&x, &w, 1e-5, 2);
    assert_eq!(&got[2..], &[0.0, 0.0]);
}

#[test]
fn layer_norm_reference_known_values() {
    // Row [1, 2, 3, 6]: mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5.
    let x = [1.0, 2.0, 3.0, 6.0];
    let got = norm::layer_norm_reference(&x, &[1.0; 4], &[0.5; 4], 0.0, 4);
    let s = 3.5f32.sqrt();
    let want = [-2.0 / s + 0.5, -1.0 / s + 0.5, 0.5, 3.0 / s + 0.5];
    assert_all_close("layer_norm", &got, &want, 1e-6, 0.0);
}

#[test]
fn layer_norm_reference_large_mean_rows() {
    // A row offset by 1e4 normalizes like the same row without the offset (f64 two-pass statistics).
    let cols = 8192;
    let base: Vec<f32> = (0..cols)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let shifted: Vec<f32> = base.iter().map(|v| v + 1e4).collect();
    let (w, b) = (vec![1.0; cols], vec![0.0; cols]);
    let a = norm::layer_norm_reference(&base, &w, &b, 1e-5, cols);
    let c = norm::layer_norm_reference(&shifted, &w, &b, 1e-5, cols);
    // f32 inputs near 1e4 keep ~1e-3 absolute precision, i.e. ~2e-3 after normalizing.
    assert_all_close("shifted rows", &a, &c, 5e-3, 0.0);
    let mean: f64 = a.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
    let var: f64 = a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
    assert!(
        mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3,
        "{mean} {var}"
    );
}

// ---------------------------------------------------------------------------------------------------------
// GPU runs against the references.

/// One GPU launch: a norm kernel on `rows x cols` arrays of `dtype`, inputs offset by `offset` (a large
/// mean stresses the LayerNorm statistics).
struct GpuCase {
    name: &'static str,
    kernel: Kernel,
    layer: bool,
    dtype: ScalarType,
    rows: i64,
    cols: i64,
    offset: f32,
}

impl GpuCase {
    fn arrays(&self) -> Vec<TensorMeta> {
        match self.layer {
            false => rms_arrays(self.dtype, self.rows, self.cols),
            true => ln_arrays(self.dtype, self.rows, self.cols),
        }
    }
}

/// Ragged shapes: rows off the grid, columns off the tile (1000 in a 1024 tile; 5000 = 4 full chunks of
/// 1024 and a partial one, or 2 of 2048 and a partial one).
fn gpu_cases() -> Vec<GpuCase> {
    let case = |name, kernel, layer, dtype, cols, offset| GpuCase {
        name,
        kernel,
        layer,
        dtype,
        rows: 37,
        cols,
        offset,
    };
    vec![
        case(
            "gpu_rms_f32",
            n::rms_norm::kernel::<f32, 1024>(),
            false,
            F32,
            1000,
            0.0,
        ),
        case(
            "gpu_rms_bf16",
            n::rms_norm::kernel::<bf16, 1024>(),
            false,
            BF16,
            1000,
            0.0,
        ),
        case(
            "gpu_rms_looped_f32",
            n::rms_norm_looped::kernel::<f32, 1024>(),
            false,
            F32,
            5000,
            0.0,
        ),
        case(
            "gpu_rms_looped_bf16",
            n::rms_norm_looped::kernel::<bf16, 2048>(),
            false,
            BF16,
            5000,
            0.0,
        ),
        case(
            "gpu_ln_f32",
            n::layer_norm::kernel::<f32, 1024>(),
            true,
            F32,
            1000,
            3.0,
        ),
        case(
            "gpu_ln_bf16",
            n::layer_norm::kernel::<bf16, 1024>(),
            true,
            BF16,
            1000,
            0.0,
        ),
        case(
            "gpu_ln_looped_f32",
            n::layer_norm_looped::kernel::<f32, 1024>(),
            true,
            F32,
            5000,
            1000.0,
        ),
        case(
            "gpu_ln_looped_bf16",
            n::layer_norm_looped::kernel::<bf16, 2048>(),
            true,
            BF16,
            5000,
            0.0,
        ),
    ]
}

/// Append a row-major `shape` array's pointer, extents and strides (i32 index type) to `args`.
fn tensor_args<'a>(args: KernelArgs<'a>, ptr: u64, shape: &[i64]) -> KernelArgs<'a> {
    let strides = TensorMeta::contiguous(F32, shape).strides;
    let args = shape.iter().fold(args.ptr(ptr), |a, &d| a.arg(d as i32));
    strides.iter().fold(args, |a, &s| a.arg(s as i32))
}

/// Run one case with elements `T`: (max abs error against the reference, tolerance), or `None` when
/// skipped.
fn run_case<T: DeviceElement>(c: &GpuCase, dev: &Device, stream: &Stream) -> Option<(f32, f32)> {
    let s = c.kernel.specialize(&c.arrays()).expect("specialize");
    let cubin = gpu_cubin(c.name, &s)?;
    let (rows, cols) = (c.rows as usize, c.cols as usize);
    // Round through T so the reference sees exactly the device's inputs.
    let round = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    };
    let x = round(data(rows * cols, 1).iter().map(|v| v + c.offset).collect());
    let w = round(data(cols, 2).iter().map(|v| 1.0 + 0.5 * v).collect());
    let b = round(data(cols, 3).iter().map(|v| 0.1 * v).collect());
    let eps = 1e-5f32;
    let up = |v: &[f32], shape: &[i64]| {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).expect("upload")
    };
    let (tx, tw, tb) = (
        up(&x, &[c.rows, c.cols]),
        up(&w, &[c.cols]),
        up(&b, &[c.cols]),
    );
    let ty = Tensor::<T>::zeros(dev, &[c.rows, c.cols]).expect("allocate");
    let mut args = tensor_args(KernelArgs::new(), tx.device_ptr(), &[c.rows, c.cols]);
    args = tensor_args(args, tw.device_ptr(), &[c.cols]);
    if c.layer {
        args = tensor_args(args, tb.device_ptr(), &[c.cols]);
    }
    args = tensor_args(args.arg(eps), ty.device_ptr(), &[c.rows, c.cols]);
    let module = CuModule::from_cubin(dev, &cubin).expect("load the cubin");
    let kernel = module.kernel(s.entry).expect("find the kernel");
    // SAFETY: every pointer is a live allocation of the shape passed next to it, and the grid has one
    // block per row, as the kernels expect.
    unsafe { kernel.launch(stream, (c.rows as u32, 1, 1), &args) }.expect("launch");
    let got: Vec<f32> = ty
        .to_host()
        .expect("download")
        .into_iter()
        .map(|v| v.to_f64() as f32)
        .collect();
    let want = match c.layer {
        false => norm::rms_norm_reference(&x, &w, eps, cols),
        true => norm::layer_norm_reference(&x, &w, &b, eps, cols),
    };
    let err = max_abs_err(&got, &want);
    // bf16 output: 8 mantissa bits on values up to ~4. f32: inputs near `offset` carry an absolute
    // rounding error ~6e-8·offset, amplified by 1/std (~1.7) and w (≤ 1.5); a naive E[x²] - mean²
    // variance would be off by ~10% at offset 1000, far above this.
    let tol = if c.dtype == BF16 {
        3e-2
    } else {
        1e-4 + 2e-6 * c.offset
    };
    Some((err, tol))
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_matches_reference() {
    let Some((dev, stream)) = gpu_device("gpu_matches_reference") else {
        return;
    };
    let mut failures = vec![];
    for c in gpu_cases() {
        let r = match c.dtype {
            F32 => run_case::<f32>(&c, &dev, &stream),
            _ => run_case::<bf16>(&c, &dev, &stream),
        };
        if let Some((err, tol)) = r {
            println!("{}: max abs error {err:e} (tolerance {tol:e})", c.name);
            if err > tol {
                failures.push(c.name);
            }
        }
    }
    assert!(failures.is_empty(), "mismatches: {failures:?}");
}
