//! Attention decode without a GPU, and on one when present:
//!
//! - every launch of every representative call specializes, verifies and, with tileiras, compiles for
//!   sm_90 (each kernel also for sm_80, sm_100 and sm_120);
//! - bad calls are typed errors naming the cause; an empty batch plans nothing; the split count follows
//!   the SM count and the cache capacity, one split skips the combine;
//! - CPU reference: equals dense attention on the gathered keys (contiguous and paged, GQA, the causal
//!   rule of speculative queries), a length of 0 gives zeros and LSE −inf, paged equals contiguous on
//!   the same data, and LSE-merging references of disjoint key ranges gives the whole (the combine's
//!   rule);
//! - GPU (ignored without `--include-ignored`, skipped without a GPU): ragged calls through the host API,
//!   both caches, split and not, unused cache entries and pages filled with NaN, against the reference.

#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
mod common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::attention::attention_reference;
use cutile_kernels::attention::decode::{
    self, CacheRef, DecodeOptions, OP, OP_PAGED, decode_reference, slot,
};
use cutile_kernels::op::{CallSpec, OpError, Operand, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn described(op: &str, dt: ScalarType, shapes: &[&[i64]]) -> (Vec<Operand>, bool) {
    let shapes: Vec<Vec<i64>> = shapes.iter().map(|s| s.to_vec()).collect();
    decode::described_call(op, dt, &shapes).unwrap()
}

fn plan_err(ops: &[Operand], paged: bool, options: &DecodeOptions) -> OpError {
    match decode::plan(ops, paged, &target(), options) {
        Ok(p) => panic!("planned {} launches for a bad call", p.len()),
        Err(e) => e,
    }
}

#[test]
fn every_launch_of_every_representative_call_specializes_and_compiles() {
    let t = target();
    let tileiras = cutile::toolchain::Tileiras::discover();
    if let Err(e) = &tileiras {
        cutile_testkit::skip("attention_decode compile", &format!("tileiras not found ({e})"));
    }
    let req = cutile::toolchain::CompileRequest::new(GpuArch::Sm90);
    let mut other_archs = std::collections::HashSet::new();
    let mut kernels = std::collections::HashSet::new();
    for c in decode::representative_calls() {
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
                    panic!("{} / {} / {}: {e}\n{}", c.label(), l.config, l.kernel.name(), s.ir_text())
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
    // The calls cover the three kernels.
    for k in ["decode_partial", "decode_combine", "decode_direct"] {
        assert!(kernels.contains(k), "{k} not covered: {kernels:?}");
    }
}
