//! Flash-attention forward: IR of one specialization per kernel and mode pinned as insta snapshots and
//! verified, the catalog's head dimensions and tile shapes compiled by tileiras for sm_90 (reported as
//! skipped when tileiras is not installed), and the CPU reference checked against closed forms.

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::attention::{attention_reference, kernels as a};
use half::{bf16, f16};

fn t(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, shape)
}

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
fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>, bool)> {
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
            assert!(close(&full[row..row + d], &want_full, 1e-5), "{s} {i}");
            assert!(close(&causal[row..row + d], &want_causal, 1e-5), "{s} {i}");
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
    assert!(close(&out, &v, 1e-6), "{out:?}");
    let out = attention_reference(&eye, &eye, &v, seq, seq, d, 100.0, true);
    assert!(close(&out, &v, 1e-6), "{out:?}");
}
