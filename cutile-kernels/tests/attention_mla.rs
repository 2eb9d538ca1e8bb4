//! MLA (absorbed decode over a latent cache, prefill with D_qk 192 / D_v 128) without a GPU, and on one
//! when present:
//!
//! - every launch of every representative call specializes, verifies and, with tileiras, compiles for
//!   sm_90 (each kernel also for sm_80, sm_100 and sm_120); the catalog gets a handful of cubins;
//! - bad calls are typed errors naming the cause; an empty batch plans nothing; row tiles, value parts
//!   and splits follow the heads, queries, SM count and capacity;
//! - CPU reference: MLA decode equals dense attention on the expanded keys (`[c, k_rope]` as K, `c` as
//!   V, one KV head for all query heads), paged equals contiguous, length 0 gives zeros and LSE −inf,
//!   NaN past the lengths is never read; the prefill reference equals dense attention with the value
//!   padded to 192;
//! - GPU (ignored without `--include-ignored`, skipped without a GPU): ragged decode calls through the
//!   host API, both caches, split and not, NaN past every length; prefill causal and not, against the
//!   references.

#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
mod common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::attention::mla::{
    self, LatentCacheRef, MlaDecodeOptions, MlaPrefillOptions, OP_DECODE, OP_DECODE_PAGED,
    OP_PREFILL, mla_decode_reference, mla_prefill_reference, prefill_slot, slot,
};
use cutile_kernels::op::{CallSpec, OpError, Operand, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

#[test]
fn every_launch_of_every_representative_call_specializes_and_compiles() {
    let t = target();
    let tileiras = cutile::toolchain::Tileiras::discover();
    if let Err(e) = &tileiras {
        cutile_testkit::skip("mla compile", &format!("tileiras not found ({e})"));
    }
    let req = cutile::toolchain::CompileRequest::new(GpuArch::Sm90);
    let mut other_archs = std::collections::HashSet::new();
    let mut kernels = std::collections::HashSet::new();
    for c in mla::representative_calls() {
        let planned = c
            .plan(&t, true)
            .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
        assert!(!planned.launches.is_empty(), "{}", c.label());
        for l in &planned.launches {
            kernels.insert(l.kernel.name().to_string());
            // SAFETY: described operands are never launched.
            let args = unsafe { cutile_kernels::op::describe(l, &planned.operands) };
            let metas = args.tensor_metas();
            let s = l
                .kernel
                .specialize(&metas)
                .unwrap_or_else(|e| panic!("{} / {}: {e}", c.label(), l.config));
            cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
                .unwrap_or_else(|e| panic!("{} / {}: {e}", c.label(), l.config));
            if let Ok(tl) = &tileiras {
                s.compile(tl, &req).unwrap_or_else(|e| {
                    panic!(
                        "{} / {} / {}: {e}\n{}",
                        c.label(),
                        l.config,
                        l.kernel.name(),
                        s.ir_text()
                    )
                });
                if other_archs.insert(l.kernel.name().to_string()) {
                    for arch in [GpuArch::Sm80, GpuArch::Sm100, GpuArch::Sm120] {
                        let r = cutile::toolchain::CompileRequest::new(arch);
                        s.compile(tl, &r).unwrap_or_else(|e| {
                            panic!("{} / {} / {arch}: {e}", c.label(), l.config)
                        });
                    }
                }
            }
        }
    }
    for k in [
        "mla_decode_partial",
        "mla_decode_combine",
        "mla_decode_direct",
        "mla_prefill",
    ] {
        assert!(kernels.contains(k), "{k} not covered: {kernels:?}");
    }
    let jobs = cutile_kernels::catalog::dsl_jobs(&mla::representative_calls(), false).unwrap();
    println!("mla catalog specializations: {}", jobs.len());
    assert!(jobs.len() <= 8, "{} catalog specializations", jobs.len());
}
