//! RMSNorm and LayerNorm (whole-row and looped): IR of one specialization of each kernel pinned as an insta
//! snapshot and verified, every catalog-like specialization compiled by tileiras for sm_90 (reported as
//! skipped when tileiras is not installed), and the CPU references checked against known values.

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::norm::{self, kernels as n};
use half::bf16;

fn t(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, shape)
}

/// Arrays of an RMSNorm launch: x, w, y.
fn rms_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[rows, cols]),
        t(dtype, &[cols]),
        t(dtype, &[rows, cols]),
    ]
}

/// Arrays of a LayerNorm launch: x, w, b, y.
fn ln_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[rows, cols]),
        t(dtype, &[cols]),
        t(dtype, &[cols]),
        t(dtype, &[rows, cols]),
    ]
}

/// (name, kernel, arrays, snapshot it?)
fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>, bool)> {
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
    for (name, k, arrays, snap) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if snap {
            insta::assert_snapshot!(name, s.ir_text());
        }
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
    let tileiras = match cutile::toolchain::Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("SKIPPED: tileiras not found ({e})");
            return;
        }
    };
    let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
    for (name, k, arrays, _) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.compile(&tileiras, &req)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
    }
}

fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

#[test]
fn rms_norm_reference_known_values() {
    // Row [3, 4]: mean of squares 12.5; row [0, 0] stays 0 (eps keeps it finite).
    let x = [3.0, 4.0, 0.0, 0.0];
    let w = [1.0, 2.0];
    let got = norm::rms_norm_reference(&x, &w, 0.0, 2);
    let r = 12.5f32.sqrt();
    assert!(close(&got[..2], &[3.0 / r, 8.0 / r], 1e-6), "{got:?}");
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
    assert!(close(&got, &want, 1e-6), "{got:?}");
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
    assert!(close(&a, &c, 5e-3));
    let mean: f64 = a.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
    let var: f64 = a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
    assert!(
        mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3,
        "{mean} {var}"
    );
}
