//! Cold specialization cost of DSL kernels: tracing the kernel body into a Tile IR module, and tracing plus
//! encoding bytecode (13.5) — everything a cache miss pays before tileiras runs. Target: under 5 ms for
//! flash attention.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::*;
use cutile_kernels::{attention, gemm, softmax, vector_add};
use half::bf16;

fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>)> {
    let qkv = TensorMeta::contiguous(BF16, &[32, 4096, 128]);
    let mat = TensorMeta::contiguous(BF16, &[4096, 4096]);
    vec![
        (
            "vadd_f32",
            vector_add::kernels::vadd::kernel::<f32, 1024>(),
            vec![TensorMeta::contiguous(F32, &[1 << 20]); 3],
        ),
        (
            "row_softmax_bf16",
            softmax::kernels::row_softmax::kernel::<bf16, 4096>(),
            vec![TensorMeta::contiguous(BF16, &[4096, 4000]); 2],
        ),
        (
            "gemm_bf16",
            gemm::kernels::gemm::kernel::<bf16, 128, 128, 64>(),
            vec![mat.clone(), mat.clone(), mat],
        ),
        (
            "flash_attention_causal_bf16",
            attention::kernels::flash_attention::kernel::<bf16, 128, 64, 128, true>(),
            vec![qkv; 4],
        ),
    ]
}

fn specialize(c: &mut Criterion) {
    let mut g = c.benchmark_group("specialize");
    for (name, k, arrays) in cases() {
        g.bench_function(format!("{name}/trace"), |b| {
            b.iter(|| black_box(k.specialize(black_box(&arrays)).expect("specializes")))
        });
        g.bench_function(format!("{name}/trace+bytecode"), |b| {
            b.iter(|| {
                let s = k.specialize(black_box(&arrays)).expect("specializes");
                black_box(s.bytecode(cutile_ir::V13_5).expect("encodes"))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, specialize);
criterion_main!(benches);
