//! The fused QKV family without a GPU, and on one when present:
//!
//! - every launch of every representative call (every candidate) specializes, verifies and, with
//!   tileiras, compiles for sm_90 (each kernel also for sm_80, sm_100 and sm_120);
//! - bad calls are typed errors naming the cause; `T = 0` plans nothing; the schedule follows T;
//! - CPU reference properties: RoPE at position 0 is the identity, a normed head has unit RMS (weight
//!   1), a paged mapping with holes writes only the addressed slots;
//! - GPU property tests (proptest; ignored without `--include-ignored`, skipped without a GPU): random
//!   ragged calls through the host API, fused and unfused, against the reference, untouched cache
//!   entries included.

#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::fused_qkv::{
    self, CacheIndex, Path, QkvConfig, QkvOptions, QkvReference, RopeStyle, slot,
};
use cutile_kernels::op::{Operand, PlannedArg, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

/// The described operands of a call (registry switches: bias, norm, gptj, paged, unfused, i64).
fn described(dt: ScalarType, x: &[i64], heads: &[i64], sw: &[i64]) -> (Vec<Operand>, QkvOptions) {
    fused_qkv::described_call(dt, &[x.to_vec(), heads.to_vec(), sw.to_vec()]).unwrap()
}

#[test]
fn every_launch_of_every_representative_call_specializes_and_compiles() {
    // The epilogue differs by input type, so the other archs compile once per kernel and type.
    common::compile_every_launch(
        "fused_qkv compile",
        &fused_qkv::representative_calls(),
        common::OtherArchsPer::KernelAndDtype,
    );
}

#[test]
fn schedule_follows_the_token_count() {
    let t = target();
    let plan = |tokens: i64, unfused: i64| {
        let (ops, opts) = described(
            BF16,
            &[tokens, 4096],
            &[32, 8, 128, 128],
            &[0, 1, 0, 1, unfused, 1],
        );
        let ops = fused_qkv::with_scratch(&ops, &opts, &t, false).unwrap();
        fused_qkv::plan(&ops, &opts, &t, false).unwrap()
    };
    // Decode at hidden 4096, 2 splits (each keeps 32 K tiles; the H200 tuner's pick over 4, 8 and
    // 16). T ≤ 16: the split in one launch, 128-deep K steps, 8 warps (the session 18 tuner's pick).
    for tokens in [1, 8, 16] {
        let p = plan(tokens, 0);
        assert_eq!(p.len(), 1, "{tokens}");
        assert_eq!(p[0].config, "fused_qkv split2-last 16x128 w8");
        assert_eq!(p[0].kernel.name(), "qkv_split_last");
        assert_eq!(p[0].grid, Some((1, 48, 2)));
    }
    // T 17..=32: partials over whole heads, then the epilogue kernel.
    let p = plan(32, 0);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].config, "fused_qkv split2 32x64 n128 w8");
    let (x, y, z) = p[0].grid.unwrap();
    assert_eq!(x * y * z, 48 * 2, "{:?}", p[0].grid);
    // T 33..=64: one split, 64-column partial blocks over the whole of K (96 blocks), then the
    // epilogue kernel.
    let p = plan(64, 0);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].config, "fused_qkv split1 64x128 n64 w8");
    assert_eq!(p[0].kernel.name(), "qkv_partial");
    assert_eq!(p[0].grid, Some((1, 96, 1)));
    // The same split in one launch, the tuner's second candidate: whole heads, the last block of a
    // tile runs its epilogue; its last two arguments are the f32 partials [splits, T, N] and one
    // counter per (row tile, head), both written.
    let (ops, opts) = described(BF16, &[8, 4096], &[32, 8, 128, 128], &[0, 1, 0, 1, 0, 1]);
    let ops = fused_qkv::with_scratch(&ops, &opts, &t, true).unwrap();
    assert_eq!(
        ops.len(),
        16,
        "call, scratch, its projection view, counters"
    );
    assert_eq!(ops[fused_qkv::slot::COUNTERS].dtype, ScalarType::I32);
    let all = fused_qkv::plan(&ops, &opts, &t, true).unwrap();
    let last: Vec<_> = all
        .iter()
        .filter(|l| l.config == "fused_qkv split2-last 16x64 w8")
        .collect();
    assert_eq!(last.len(), 1, "one launch");
    assert_eq!(last[0].kernel.name(), "qkv_split_last");
    assert_eq!(last[0].grid, Some((1, 48, 2)));
    let tail: Vec<_> = last[0].args[last[0].args.len() - 2..]
        .iter()
        .map(|a| match a {
            PlannedArg::Tensor {
                operand,
                shape,
                output,
                ..
            } => (*operand, shape.clone(), *output),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        tail,
        vec![
            (fused_qkv::slot::SCRATCH, vec![2, 8, 48 * 128], true),
            (fused_qkv::slot::COUNTERS, vec![48], true)
        ]
    );
    // Small hidden: a split would keep too few K tiles, so decode runs the fused kernel.
    for (hidden, heads) in [(768i64, [8i64, 2, 128, 64]), (1000, [4, 1, 64, 32])] {
        let c = fused_qkv::config::choose(&t, 5, heads[0] + 2 * heads[1], heads[2], hidden);
        assert!(
            matches!(c, QkvConfig::Fused { .. }),
            "hidden {hidden}: {c:?}"
        );
    }
    // Prefill: one fused launch, 128-row tiles of two heads with 8 worker warps, one per block, head
    // pairs fastest.
    for tokens in [4096, 16384] {
        let p = plan(tokens, 0);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].config, "fused_qkv pair 128x64");
        assert_eq!(p[0].kernel.name(), "fused_qkv_pair");
        assert_eq!(p[0].grid, Some((24, (tokens / 128) as u32, 1)));
        let eight = cutile_ir::Attribute::i32(8);
        assert!(
            p[0].kernel
                .hints()
                .by_arch
                .iter()
                .any(|(arch, kv)| arch == "default"
                    && kv
                        .iter()
                        .any(|(k, v)| k == "num_worker_warps_per_cta" && *v == eight)),
            "{:?}",
            p[0].kernel.hints()
        );
    }
    // Between decode and prefill: 64-row tiles, one per block, heads fastest.
    let p = plan(200, 0);
    assert_eq!(p[0].config, "fused_qkv 64x64");
    assert_eq!(p[0].grid, Some((48, 4, 1)));
    // D = 256 never takes 128-row tiles (the accumulator would not fit in registers).
    let c = fused_qkv::config::candidates(&t, 4096, 12, 256, 4096);
    assert!(
        c.iter()
            .all(|c| !matches!(c, QkvConfig::Fused { bm: 128, .. })),
        "{c:?}"
    );
    // Unfused: the separate ops (see `unfused_path_is_the_separate_ops`).
    assert_eq!(plan(4096, 1).len(), 5);
    // The persistent candidate: one block per SM.
    let (ops, opts) = described(BF16, &[4096, 4096], &[32, 8, 128, 128], &[0, 1, 0, 1, 0, 1]);
    let ops = fused_qkv::with_scratch(&ops, &opts, &t, true).unwrap();
    let all = fused_qkv::plan(&ops, &opts, &t, true).unwrap();
    let p = all
        .iter()
        .find(|l| l.config == "fused_qkv persistent 128x64")
        .unwrap();
    assert_eq!(p.kernel.name(), "fused_qkv_persistent");
    assert_eq!(p.grid, Some((t.sm_count, 1, 1)));
    // Two heads per tile (the GEMM family's 256-wide tile at D 128), 8 worker warps: 24 head pairs.
    let p = all
        .iter()
        .find(|l| l.config == "fused_qkv pair 128x64")
        .unwrap();
    assert_eq!(p.kernel.name(), "fused_qkv_pair");
    assert_eq!(p.grid, Some((24, 4096 / 128, 1)));
    assert!(format!("{:?}", p.kernel.hints()).contains("num_worker_warps_per_cta"));
    // Only for even head counts (5 + 2·1 = 7 heads here) and D ≤ 128.
    for (heads, d) in [(7, 128), (12, 256)] {
        assert!(
            fused_qkv::config::candidates(&t, 4096, heads, d, 4096)
                .iter()
                .all(|c| !matches!(c, QkvConfig::FusedPair { .. })),
            "heads {heads} d {d}"
        );
    }
    // So an odd head count keeps one head per 128-row tile by default.
    assert_eq!(
        fused_qkv::config::choose(&t, 4096, 7, 128, 4096),
        QkvConfig::Fused {
            bm: 128,
            bk: 64,
            persistent: false
        }
    );
    // Decode's default split carries 8 worker warps; so do both launches of its two-launch form.
    let (ops, opts) = described(BF16, &[8, 4096], &[32, 8, 128, 128], &[0, 1, 0, 1, 0, 1]);
    let ops = fused_qkv::with_scratch(&ops, &opts, &t, true).unwrap();
    let all = fused_qkv::plan(&ops, &opts, &t, true).unwrap();
    let names = || all.iter().map(|l| &l.config).collect::<Vec<_>>();
    let wide: Vec<_> = all.iter().filter(|l| l.config.ends_with(" w8")).collect();
    assert_eq!(
        wide.iter()
            .filter(|l| l.config == "fused_qkv split2 16x64 n128 w8")
            .count(),
        2,
        "{:?}",
        names()
    );
    // Partial blocks narrower than a head: 6144 / 64 = 96 columns, 11 splits = 8 blocks per SM.
    let narrow = all
        .iter()
        .find(|l| l.config == "fused_qkv split11 16x128 n64")
        .unwrap_or_else(|| panic!("{:?}", names()));
    assert_eq!(narrow.kernel.name(), "qkv_partial");
    assert_eq!(narrow.grid, Some((1, 96, 11)));
    for l in wide {
        assert!(
            format!("{:?}", l.kernel.hints()).contains("num_worker_warps_per_cta"),
            "{}",
            l.config
        );
    }
    // Every candidate has its own launches.
    let c = fused_qkv::config::candidates(&t, 8, 48, 128, 4096);
    assert!(c.contains(&QkvConfig::Unfused) && c.len() >= 5, "{c:?}");
}

/// The unfused path is the catalog's separate ops, one launch each, per switch combination
/// (bias, norm, paged): the projection, QK-norm of q and of k, RoPE, the cache write. Each step's
/// tensors are the call's operands or views into the projection scratch.
#[test]
fn unfused_path_is_the_separate_ops() {
    let t = target();
    for (bias, norm, paged, kernels) in [
        (
            0,
            1,
            1,
            &[
                "gemm",
                "rms_norm_heads",
                "rms_norm_heads",
                "rope",
                "kv_cache_write",
            ][..],
        ),
        (1, 0, 0, &["gemm_epilogue", "rope", "kv_cache_write"][..]),
        (
            1,
            1,
            0,
            &[
                "gemm_epilogue",
                "rms_norm_heads",
                "rms_norm_heads",
                "rope",
                "kv_cache_write",
            ][..],
        ),
        (0, 0, 1, &["gemm", "rope", "kv_cache_write"][..]),
    ] {
        for tokens in [1, 37, 4096] {
            let (ops, opts) = described(
                BF16,
                &[tokens, 512],
                &[4, 2, 128, 64],
                &[bias, norm, 0, paged, 1, 0],
            );
            let ops = fused_qkv::with_scratch(&ops, &opts, &t, false).unwrap();
            let p = fused_qkv::plan(&ops, &opts, &t, false).unwrap();
            let names: Vec<&str> = p.iter().map(|l| l.kernel.name()).collect();
            assert_eq!(names.len(), kernels.len(), "{names:?}");
            for (got, want) in names.iter().zip(kernels) {
                assert!(got.starts_with(want), "{names:?} vs {kernels:?}");
            }
            assert!(p.iter().all(|l| l.config.starts_with("fused_qkv unfused")));
            // The q heads of the projection start at the scratch, the k heads Hq·D in, the v heads
            // (Hq + Hkv)·D in; every tensor argument is one of the call's operands.
            let offsets: std::collections::BTreeSet<i64> = p
                .iter()
                .flat_map(|l| &l.args)
                .filter_map(|a| match a {
                    PlannedArg::Tensor {
                        operand, offset, ..
                    } if *operand == slot::SCRATCH_E => Some(*offset),
                    _ => None,
                })
                .collect();
            assert_eq!(
                offsets,
                [0, 4 * 128, 6 * 128].into_iter().collect(),
                "{names:?}"
            );
            for l in &p {
                for a in &l.args {
                    if let PlannedArg::Tensor { operand, .. } = a {
                        assert!(*operand < ops.len(), "{}: operand {operand}", l.config);
                    }
                }
            }
        }
    }
}

#[test]
fn empty_token_count_plans_nothing() {
    let (ops, opts) = described(BF16, &[0, 512], &[4, 2, 64, 64], &[0, 1, 0, 1, 0, 0]);
    assert!(
        fused_qkv::plan(&ops, &opts, &target(), true)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn bad_calls_are_typed_errors() {
    let t = target();
    let (base, opts) = described(BF16, &[8, 512], &[4, 2, 128, 128], &[1, 1, 0, 1, 0, 0]);
    let with = |i: usize, o: Operand| {
        let mut ops = base.clone();
        ops[i] = o;
        ops
    };
    let d = Operand::described;
    let cases: Vec<(&str, Vec<Operand>, QkvOptions, &str)> = vec![
        (
            "x rank",
            with(slot::X, d("x", 0, BF16, &[8, 512, 1])),
            opts,
            "`x` must have 2 dimensions",
        ),
        (
            "x dtype",
            with(slot::X, d("x", 0, F32, &[8, 512])),
            opts,
            "`x` has element type f32",
        ),
        (
            "w dtype",
            with(slot::W, d("weight", 1, F16, &[512, 1024])),
            opts,
            "must match `x`",
        ),
        (
            "w rows",
            with(slot::W, d("weight", 1, BF16, &[500, 1024])),
            opts,
            "rows vs `x`'s columns",
        ),
        (
            "head counts",
            with(slot::W, d("weight", 1, BF16, &[512, 1000])),
            opts,
            "(Hq + 2·Hkv)·D with Hq = 4",
        ),
        (
            "head dim",
            with(slot::Q, d("q", 10, BF16, &[8, 4, 96])),
            opts,
            "D = 96 has no kernel",
        ),
        (
            "rot",
            with(slot::COS, d("cos", 5, F32, &[8192, 16])),
            opts,
            "rot = D or D/2",
        ),
        (
            "cos dtype",
            with(slot::COS, d("cos", 5, BF16, &[8192, 64])),
            opts,
            "`cos` has element type bf16",
        ),
        (
            "sin shape",
            with(slot::SIN, d("sin", 6, F32, &[100, 64])),
            opts,
            "`sin` must have `cos`'s shape",
        ),
        (
            "positions",
            with(slot::POSITIONS, d("positions", 7, F32, &[8])),
            opts,
            "takes i32, i64",
        ),
        (
            "index dtype",
            with(slot::INDEX_A, d("index_a", 8, I64, &[8])),
            opts,
            "`index_a` has element type i64; it must match `positions` (i32)",
        ),
        (
            "index len",
            with(slot::INDEX_A, d("index_a", 8, I32, &[7])),
            opts,
            "one entry per token",
        ),
        (
            "cache rank",
            with(slot::K_CACHE, d("k_cache", 11, BF16, &[2, 16, 256])),
            opts,
            "`k_cache` must have 4",
        ),
        (
            "cache shapes",
            with(slot::V_CACHE, d("v_cache", 12, BF16, &[3, 16, 2, 128])),
            opts,
            "`v_cache` must have `k_cache`'s shape",
        ),
        (
            "cache D",
            {
                let mut o = with(slot::K_CACHE, d("k_cache", 11, BF16, &[2, 16, 2, 64]));
                o[slot::V_CACHE] = d("v_cache", 12, BF16, &[2, 16, 2, 64]);
                o
            },
            opts,
            "head dimension",
        ),
        (
            "bias",
            with(slot::BIAS, d("bias", 2, BF16, &[1000])),
            opts,
            "`bias` must have N",
        ),
        (
            "norm",
            with(slot::Q_NORM, d("q_norm", 3, BF16, &[64])),
            opts,
            "`q_norm` must have D",
        ),
        (
            "eps",
            base.clone(),
            QkvOptions {
                eps: f32::NAN,
                ..opts
            },
            "eps must be finite",
        ),
        (
            "q tokens",
            with(slot::Q, d("q", 10, BF16, &[9, 4, 128])),
            opts,
            "its tokens vs `x`'s rows",
        ),
    ];
    for (what, ops, o, needle) in cases {
        match fused_qkv::plan(&ops, &o, &t, false) {
            Ok(p) => panic!(
                "{what}: expected an error containing {needle:?}, planned {}",
                p.len()
            ),
            Err(e) => assert!(
                e.to_string().contains(needle),
                "{what}: {e} lacks {needle:?}"
            ),
        }
    }
    // A transposed weight view (PyTorch Linear's [N, hidden]) is accepted.
    let mut ops = base.clone();
    ops[slot::W].strides = vec![1, 512];
    let ops = fused_qkv::with_scratch(&ops, &opts, &t, true).unwrap();
    assert!(fused_qkv::plan(&ops, &opts, &t, true).unwrap().len() > 4);
    // The unfused path needs its scratch operands.
    let e = fused_qkv::plan(
        &base,
        &QkvOptions {
            path: Path::Unfused,
            ..opts
        },
        &t,
        false,
    )
    .unwrap_err();
    assert!(e.to_string().contains("with_scratch"), "{e}");
}

// -------------------------------------------------------------------------------------------------------
// Reference properties.

/// A small random layer: (x, w, cos, sin) for `t` tokens.
fn layer(t: usize, hidden: usize, n: usize, rot: usize, max_pos: usize) -> [Vec<f32>; 4] {
    let x = cutile_testkit::data(t * hidden, 1);
    let w: Vec<f32> = cutile_testkit::data(hidden * n, 2)
        .iter()
        .map(|v| v * 0.1)
        .collect();
    let half = rot / 2;
    let mut cos = vec![0f32; max_pos * half];
    let mut sin = vec![0f32; max_pos * half];
    for p in 0..max_pos {
        for i in 0..half {
            let a = p as f32 / 10000f32.powf(2.0 * i as f32 / rot as f32);
            cos[p * half + i] = a.cos();
            sin[p * half + i] = a.sin();
        }
    }
    [x, w, cos, sin]
}

#[test]
fn reference_rope_at_position_zero_is_the_identity_and_norm_has_unit_rms() {
    let (t, hidden, hq, hkv, d) = (3, 16, 2, 1, 8);
    let n = (hq + 2 * hkv) * d;
    for style in [RopeStyle::Neox, RopeStyle::Gptj] {
        for rot in [d, d / 2] {
            let [x, w, cos, sin] = layer(t, hidden, n, rot, 4);
            let ones = vec![1f32; d];
            let mk = |norm: bool| QkvReference {
                x: &x,
                w: &w,
                bias: None,
                q_norm: norm.then_some(&ones[..]),
                k_norm: norm.then_some(&ones[..]),
                eps: 0.0,
                cos: &cos,
                sin: &sin,
                positions: &[0, 0, 0],
                style,
                rot,
                hidden,
                hq,
                hkv,
                d,
            };
            let (mut kc, mut vc) = (vec![0f32; 3 * hkv * d], vec![0f32; 3 * hkv * d]);
            let idx = CacheIndex::Paged {
                slot: &[0, 1, 2],
                block_size: 1,
            };
            let q = fused_qkv::fused_qkv_reference(&mk(false), &idx, &mut kc, &mut vc);
            // Position 0: cos 1, sin 0, so q is the plain projection.
            let proj = cutile_kernels::gemm::gemm_reference(&x, &w, t, n, hidden);
            for tok in 0..t {
                for i in 0..hq * d {
                    assert!((q[tok * hq * d + i] - proj[tok * n + i]).abs() < 1e-5);
                }
            }
            let q = fused_qkv::fused_qkv_reference(&mk(true), &idx, &mut kc, &mut vc);
            for head in q.chunks(d).chain(kc.chunks(d)) {
                let rms = (head.iter().map(|v| v * v).sum::<f32>() / d as f32).sqrt();
                assert!((rms - 1.0).abs() < 1e-4, "{style:?} rot {rot}: rms {rms}");
            }
        }
    }
}

#[test]
fn reference_paged_mapping_with_holes_leaves_other_slots_untouched() {
    let (t, hidden, hq, hkv, d) = (4, 8, 2, 2, 4);
    let n = (hq + 2 * hkv) * d;
    let [x, w, cos, sin] = layer(t, hidden, n, d, 8);
    let r = QkvReference {
        x: &x,
        w: &w,
        bias: None,
        q_norm: None,
        k_norm: None,
        eps: 1e-6,
        cos: &cos,
        sin: &sin,
        positions: &[5, 1, 7, 0],
        style: RopeStyle::Neox,
        rot: d,
        hidden,
        hq,
        hkv,
        d,
    };
    let slots = [6i64, -1, 1, 3];
    let (blocks, bs) = (2, 4);
    let sentinel = -7.0f32;
    let (mut kc, mut vc) = (
        vec![sentinel; blocks * bs * hkv * d],
        vec![sentinel; blocks * bs * hkv * d],
    );
    fused_qkv::fused_qkv_reference(
        &r,
        &CacheIndex::Paged {
            slot: &slots,
            block_size: bs,
        },
        &mut kc,
        &mut vc,
    );
    for s in 0..blocks * bs {
        let written = [6usize, 1, 3].contains(&s);
        for c in [&kc, &vc] {
            let e = &c[s * hkv * d..(s + 1) * hkv * d];
            assert_eq!(e.iter().all(|&v| v == sentinel), !written, "slot {s}");
        }
    }
}

// -------------------------------------------------------------------------------------------------------
// GPU: the host API against the reference.

mod gpu {
    use super::*;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use cutile_kernels::fused_qkv::{KvCache, QkvLayer, Rope};
    use cutile_testkit::data::Rng;
    use half::{bf16, f16};
    use proptest::prelude::*;

    /// One call: the registry switches of [`fused_qkv::described_call`] (its operand shapes are the
    /// tensors allocated here, so an AOT bundle of the same specs serves a machine without tileiras),
    /// the path, whether the weight is PyTorch's `[N, hidden]` passed transposed, and the data seed.
    #[derive(Debug, Clone)]
    pub struct Case {
        pub dtype: ScalarType,
        pub x: [i64; 2],
        pub heads: [i64; 4],
        pub switches: [i64; 6],
        pub transposed_w: bool,
        pub seed: u64,
    }

    /// The fixed cases of [`fixed_cases_match_the_reference`]: every switch on and off at least once,
    /// decode and prefill-sized T, both paths (`docs/fused_qkv.md` has their AOT shapes file).
    pub fn fixed_cases() -> Vec<Case> {
        let c = |dtype, x, heads, switches| Case {
            dtype,
            x,
            heads,
            switches,
            transposed_w: false,
            seed: 7,
        };
        vec![
            c(BF16, [1, 4096], [32, 8, 128, 128], [0, 1, 0, 1, 0, 1]),
            c(BF16, [64, 4096], [32, 8, 128, 128], [0, 1, 0, 1, 0, 1]),
            c(BF16, [300, 512], [8, 8, 64, 64], [1, 1, 0, 0, 0, 1]),
            c(F16, [37, 1000], [4, 1, 64, 32], [1, 0, 1, 0, 0, 0]),
            c(F16, [5, 768], [8, 2, 128, 64], [1, 1, 1, 1, 0, 0]),
            c(BF16, [1000, 1024], [16, 4, 128, 64], [1, 1, 1, 1, 0, 1]),
            c(BF16, [37, 1000], [4, 1, 64, 32], [1, 1, 1, 0, 1, 0]),
            c(BF16, [64, 4096], [32, 8, 128, 128], [0, 1, 0, 1, 1, 1]),
            // 128-row tiles whose last tile's second 64-row epilogue slice has no rows (T = 2100).
            c(F16, [2100, 512], [32, 8, 128, 128], [1, 1, 0, 1, 0, 0]),
        ]
    }

    fn up<T: DeviceElement>(dev: &Device, v: &[f32], shape: &[i64]) -> Tensor<T> {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).expect("upload")
    }

    fn down<T: DeviceElement>(t: &Tensor<T>) -> Vec<f32> {
        t.to_host()
            .expect("download")
            .into_iter()
            .map(|v| v.to_f64() as f32)
            .collect()
    }

    fn round<T: DeviceElement>(v: Vec<f32>) -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    }

    fn ints(dev: &Device, v: &[i64], wide: bool) -> (Option<Tensor<i32>>, Option<Tensor<i64>>) {
        let n = [v.len() as i64];
        if wide {
            (None, Some(Tensor::from_host(dev, v, &n).expect("upload")))
        } else {
            let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            (Some(Tensor::from_host(dev, &v, &n).expect("upload")), None)
        }
    }

    fn as_arg(p: &(Option<Tensor<i32>>, Option<Tensor<i64>>)) -> &dyn cutile::launch::TensorArg {
        match p {
            (Some(t), _) => t,
            (_, Some(t)) => t,
            _ => unreachable!("one of the two is set"),
        }
    }

    /// Runs `case` through the host API and compares q and both caches (written entries within the
    /// tolerance, every other entry bit-identical to its old value) with the reference.
    pub fn run_case<T: DeviceElement>(
        dev: &Device,
        stream: &Stream,
        case: &Case,
    ) -> Result<(), String> {
        let spec = [case.x.to_vec(), case.heads.to_vec(), case.switches.to_vec()];
        let (ops, opts) =
            fused_qkv::described_call(case.dtype, &spec).map_err(|e| e.to_string())?;
        let [t, hidden] = case.x.map(|v| v as usize);
        let [hq, hkv, d, rot] = case.heads.map(|v| v as usize);
        let n = (hq + 2 * hkv) * d;
        let wide = case.switches[5] != 0;
        let mut rng = Rng::new(case.seed);
        let x = round::<T>(cutile_testkit::data(t * hidden, case.seed));
        let scale = 1.0 / (hidden as f32).sqrt();
        let w = round::<T>(
            cutile_testkit::data(hidden * n, case.seed + 1)
                .iter()
                .map(|v| v * scale)
                .collect(),
        );
        let bias = round::<T>(
            cutile_testkit::data(n, case.seed + 2)
                .iter()
                .map(|v| 0.5 * v)
                .collect(),
        );
        let qn = round::<T>(
            cutile_testkit::data(d, case.seed + 3)
                .iter()
                .map(|v| 1.0 + 0.5 * v)
                .collect(),
        );
        let kn = round::<T>(
            cutile_testkit::data(d, case.seed + 4)
                .iter()
                .map(|v| 1.0 + 0.5 * v)
                .collect(),
        );
        let max_pos = ops[slot::COS].shape[0] as usize;
        let [_, _, cos, sin] = super::layer(0, 0, 0, rot, max_pos);
        // Non-monotonic positions; distinct cache entries, with holes when paged.
        let positions: Vec<i64> = (0..t)
            .map(|_| (rng.next_u64() % max_pos as u64) as i64)
            .collect();
        let cache_shape = ops[slot::K_CACHE].shape.clone();
        let entries = if opts.paged {
            (cache_shape[0] * cache_shape[1]) as usize
        } else {
            cache_shape[2] as usize
        };
        let mut perm: Vec<i64> = (0..entries as i64).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let mut a: Vec<i64> = perm[..t].to_vec();
        let b: Vec<i64> = a.clone();
        if opts.paged {
            for s in a.iter_mut() {
                if rng.next_u64().is_multiple_of(8) {
                    *s = -1;
                }
            }
        } else {
            a = vec![0; t];
        }
        let cache_len: i64 = cache_shape.iter().product();
        let k_old = round::<T>(cutile_testkit::data(cache_len as usize, case.seed + 5));
        let v_old = round::<T>(cutile_testkit::data(cache_len as usize, case.seed + 6));
        // The reference.
        let r = QkvReference {
            x: &x,
            w: &w,
            bias: opts.bias.then_some(&bias[..]),
            q_norm: opts.norm.then_some(&qn[..]),
            k_norm: opts.norm.then_some(&kn[..]),
            eps: opts.eps,
            cos: &cos,
            sin: &sin,
            positions: &positions,
            style: opts.style,
            rot,
            hidden,
            hq,
            hkv,
            d,
        };
        let index = if opts.paged {
            CacheIndex::Paged {
                slot: &a,
                block_size: cache_shape[1] as usize,
            }
        } else {
            CacheIndex::Contiguous {
                batch: &a,
                pos: &b,
                max_seq: cache_shape[2] as usize,
            }
        };
        let (mut k_want, mut v_want) = (k_old.clone(), v_old.clone());
        let q_want = fused_qkv::fused_qkv_reference(&r, &index, &mut k_want, &mut v_want);
        // The device call.
        let tx = up::<T>(dev, &x, &[t as i64, hidden as i64]);
        let tw = if case.transposed_w {
            let mut wt = vec![0f32; n * hidden];
            for p in 0..hidden {
                for j in 0..n {
                    wt[j * hidden + p] = w[p * n + j];
                }
            }
            up::<T>(dev, &wt, &[n as i64, hidden as i64])
        } else {
            up::<T>(dev, &w, &[hidden as i64, n as i64])
        };
        let tw_view = tw.transpose(0, 1).map_err(|e| e.to_string())?;
        let (tb, tqn, tkn) = (
            up::<T>(dev, &bias, &[n as i64]),
            up::<T>(dev, &qn, &[d as i64]),
            up::<T>(dev, &kn, &[d as i64]),
        );
        let (tc, ts) = (
            up::<f32>(dev, &cos, &[max_pos as i64, rot as i64 / 2]),
            up::<f32>(dev, &sin, &[max_pos as i64, rot as i64 / 2]),
        );
        let (tp, ta, tbi) = (
            ints(dev, &positions, wide),
            ints(dev, &a, wide),
            ints(dev, &b, wide),
        );
        let mut tq =
            Tensor::<T>::zeros(dev, &[t as i64, hq as i64, d as i64]).map_err(|e| e.to_string())?;
        let mut tk = up::<T>(dev, &k_old, &cache_shape);
        let mut tv = up::<T>(dev, &v_old, &cache_shape);
        let layer = QkvLayer {
            weight: if case.transposed_w { &tw_view } else { &tw },
            bias: opts.bias.then_some(&tb as &dyn cutile::launch::TensorArg),
            q_norm: opts.norm.then_some(&tqn as &dyn cutile::launch::TensorArg),
            k_norm: opts.norm.then_some(&tkn as &dyn cutile::launch::TensorArg),
            eps: opts.eps,
        };
        let rope = Rope {
            cos: &tc,
            sin: &ts,
            style: opts.style,
        };
        let cache = if opts.paged {
            KvCache::Paged {
                k: &mut tk,
                v: &mut tv,
                slot_mapping: as_arg(&ta),
            }
        } else {
            KvCache::Contiguous {
                k: &mut tk,
                v: &mut tv,
                batch: as_arg(&ta),
                pos: as_arg(&tbi),
            }
        };
        fused_qkv::fused_qkv(
            stream,
            &tx,
            as_arg(&tp),
            &layer,
            &rope,
            &mut tq,
            cache,
            opts.path,
        )
        .map_err(|e| e.to_string())?
        .wait()
        .map_err(|e| e.to_string())?;
        let tol = cutile_kernels::tolerance(case.dtype);
        let q_err = cutile_testkit::rel_l2(&down(&tq), &q_want);
        let mut why = Vec::new();
        if q_err.is_nan() || q_err > tol {
            why.push(format!("q: relative L2 error {q_err:e} > {tol:e}"));
        }
        for (name, got, want, old) in [
            ("k", down(&tk), &k_want, &k_old),
            ("v", down(&tv), &v_want, &v_old),
        ] {
            let (mut g, mut w2) = (Vec::new(), Vec::new());
            let mut touched = 0;
            for i in 0..got.len() {
                if want[i].to_bits() == old[i].to_bits() && got[i].to_bits() == old[i].to_bits() {
                    continue;
                }
                g.push(got[i]);
                w2.push(want[i]);
                touched += 1;
            }
            let err = cutile_testkit::rel_l2(&g, &w2);
            if touched > 0 && (err.is_nan() || err > tol) {
                why.push(format!(
                    "{name} cache: relative L2 error {err:e} over {touched} changed entries"
                ));
            }
        }
        if why.is_empty() {
            Ok(())
        } else {
            Err(why.join("; "))
        }
    }

    fn run_typed(dev: &Device, stream: &Stream, c: &Case) -> Result<(), String> {
        match c.dtype {
            BF16 => run_case::<bf16>(dev, stream, c),
            _ => run_case::<f16>(dev, stream, c),
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn fixed_cases_match_the_reference() {
        let Some((dev, stream)) = common::gpu_device("fused_qkv fixed cases") else {
            return;
        };
        let mut failures = Vec::new();
        for c in fixed_cases() {
            match run_typed(&dev, &stream, &c) {
                Ok(()) => println!("ok: {c:?}"),
                Err(e) => {
                    println!("FAILED: {c:?}: {e}");
                    failures.push(format!("{c:?}: {e}"));
                }
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            prop_oneof![Just(BF16), Just(F16)],
            prop_oneof![1i64..=64, 65i64..=4096],
            prop_oneof![Just(1i64), Just(4), Just(8)],
            1i64..=4,
            prop_oneof![Just(64i64), Just(128)],
            any::<bool>(),
            proptest::collection::vec(any::<bool>(), 6),
            (1i64..=12).prop_map(|k| k * 64 + 8),
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(
                |(dtype, t, ratio, hkv, d, half_rot, sw, hidden, tw, seed)| Case {
                    dtype,
                    x: [t, hidden],
                    heads: [hkv * ratio, hkv, d, if half_rot { d / 2 } else { d }],
                    switches: [sw[0], sw[1], sw[2], sw[3], sw[4], sw[5]].map(i64::from),
                    transposed_w: tw,
                    seed,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Random ragged calls (T 1..4096, Hq/Hkv 1, 4, 8, D 64/128, rot D or D/2, every switch, both
        /// paths, transposed weights) against the reference. Needs tileiras (JIT) or a bundle with them.
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn random_calls_match_the_reference(c in case()) {
            let Some((dev, stream)) = common::gpu_device("fused_qkv random calls") else {
                return Ok(());
            };
            prop_assert_eq!(run_typed(&dev, &stream, &c), Ok(()));
        }
    }
}
