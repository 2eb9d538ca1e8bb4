//! Generated Tile IR of every DSL kernel, pinned as insta snapshots, and each specialization compiled by
//! tileiras for sm_90 (reported as skipped when tileiras is not installed).

#![allow(clippy::unwrap_used)]

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::{self, *};

fn t(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, shape)
}

/// (snapshot name, kernel, arrays)
fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>)> {
    use cutile_kernels::{
        attention::kernels as a, gemm::kernels as g, norm::kernels as n, softmax::kernels as s,
        vector_add::kernels as v,
    };
    let qkv = t(BF16, &[8, 1000, 64]);
    vec![
        (
            "vadd_f32_1024",
            v::vadd::kernel::<f32, 1024>(),
            vec![t(F32, &[4096]); 3],
        ),
        (
            "saxpy_bf16_1024",
            v::saxpy::kernel::<half::bf16, 1024>(),
            vec![t(BF16, &[4096]); 2],
        ),
        (
            "row_softmax_bf16_1024",
            s::row_softmax::kernel::<half::bf16, 1024>(),
            vec![t(BF16, &[64, 1000]); 2],
        ),
        (
            "row_softmax_w8_bf16_1024",
            s::row_softmax_w8::kernel::<half::bf16, 1024>(),
            vec![t(BF16, &[64, 1000]); 2],
        ),
        (
            "row_softmax_w16_bf16_8192",
            s::row_softmax_w16::kernel::<half::bf16, 8192>(),
            vec![t(BF16, &[64, 8192]); 2],
        ),
        (
            "row_softmax_online_bf16_2048",
            s::row_softmax_online::kernel::<half::bf16, 2048>(),
            vec![t(BF16, &[64, 8191]); 2],
        ),
        (
            "row_softmax_rows_f32_4x1024",
            s::row_softmax_rows::kernel::<f32, 4, 1024>(),
            vec![t(F32, &[1001, 1000]); 2],
        ),
        (
            "gemm_bf16_128x128x64",
            g::gemm::kernel::<half::bf16, half::bf16, 128, 128, 64>(),
            vec![
                t(BF16, &[512, 256]),
                t(BF16, &[256, 384]),
                t(BF16, &[512, 384]),
            ],
        ),
        (
            "gemm_persistent_bf16_128x128x64",
            g::gemm_persistent::kernel::<half::bf16, half::bf16, 128, 128, 64>(),
            vec![
                t(BF16, &[512, 256]),
                t(BF16, &[256, 384]),
                t(BF16, &[512, 384]),
            ],
        ),
        (
            "rms_norm_bf16_1024",
            n::rms_norm::kernel::<half::bf16, 1024>(),
            vec![t(BF16, &[64, 1000]), t(BF16, &[1000]), t(BF16, &[64, 1000])],
        ),
        (
            "layer_norm_f32_1024",
            n::layer_norm::kernel::<f32, 1024>(),
            vec![
                t(F32, &[64, 1000]),
                t(F32, &[1000]),
                t(F32, &[1000]),
                t(F32, &[64, 1000]),
            ],
        ),
        (
            "flash_attention_bf16_128x64x64",
            a::flash_attention::kernel::<half::bf16, 128, 64, 64, false>(),
            vec![qkv.clone(); 4],
        ),
        (
            "flash_attention_causal_bf16_128x64x64",
            a::flash_attention::kernel::<half::bf16, 128, 64, 64, true>(),
            vec![qkv.clone(); 4],
        ),
    ]
}

#[test]
fn ir_snapshots() {
    for (name, k, arrays) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(name, s.ir_text());
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn compile_sm90() {
    let t = match cutile::toolchain::Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip("compile_sm90", &format!("tileiras not found ({e})"));
            return;
        }
    };
    let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
    for (name, k, arrays) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.compile(&t, &req)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
    }
}
