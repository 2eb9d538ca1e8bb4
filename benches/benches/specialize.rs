//! Cold specialization cost of DSL kernels: tracing the kernel body into a Tile IR module, and tracing plus
//! encoding bytecode (13.5) — everything a cache miss pays before tileiras runs. Target: under 5 ms for
//! flash attention.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use cutile::dsl::{Kernel, TensorMeta};
use cutile::toolchain::GpuArch;
use cutile_kernels::op::{CallSpec, Target, describe};
use cutile_kernels::{attention, gemm, softmax, vector_add};

/// The kernels and arrays the host API plans for a few calls (the families choose variant and tiles).
fn cases() -> Vec<(String, Kernel, Vec<TensorMeta>)> {
    let calls = [
        CallSpec::new(vector_add::ADD, "f32", &[&[1 << 20]], false),
        CallSpec::new(softmax::OP, "bf16", &[&[4096, 4000]], false),
        CallSpec::new(gemm::OP, "bf16", &[&[4096, 4096], &[4096, 4096]], false),
        CallSpec::new(
            attention::OP,
            "bf16",
            &[&[32, 4096, 128], &[32, 4096, 128]],
            true,
        ),
    ];
    let target = Target::planning(GpuArch::Sm90);
    let mut out = Vec::new();
    for call in &calls {
        let planned = call.plan(&target, false).unwrap();
        for l in &planned.launches {
            // SAFETY: described operands only feed specialization; nothing is launched.
            let metas = unsafe { describe(l, &planned.operands) }.tensor_metas();
            out.push((format!("{} {}", call.op, l.config), l.kernel.clone(), metas));
        }
    }
    out
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
