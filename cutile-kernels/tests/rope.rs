//! The standalone RoPE family: the CPU reference's properties (norm preserved, position 0 is the
//! identity, NeoX and GPT-J agree up to a lane permutation, partial rotary copies the tail), the
//! planner without a GPU (typed errors, empty calls, in place vs out of place, strided q/k), the
//! full-rotary tuning candidates (default first, distinct, each with a kernel that specializes), every
//! representative call compiled by tileiras (sm_90; two kernels for sm_80/90/100/120) and the bench
//! call's tuning candidates (sm_90), and a GPU test through the host API (`#[ignore]`d; skipped without
//! a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::op::tuning::Candidate;
use cutile_kernels::op::{CallSpec, OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div};
use cutile_kernels::rope::config::{self as cfg, PairsConfig};
use cutile_kernels::rope::{self, RopeStyle, reference as r};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn data(n: usize, seed: u64) -> Vec<f32> {
    cutile_testkit::data::uniform(n, seed, -2.0, 2.0)
}

// ---------------------------------------------------------------------------------------------------------
// Reference.

#[test]
fn rotation_preserves_pair_norms_and_position_zero_is_identity() {
    let (t, h, d, rot) = (5, 3, 16, 12);
    let (c, s) = r::cos_sin_cache(64, rot, 10000.0);
    let x = data(t * h * d, 1);
    let positions = [0i64, 7, 63, 3, 0];
    for style in [RopeStyle::Neox, RopeStyle::Gptj] {
        let y = r::rope(&x, h, d, &c, &s, &positions, rot, style);
        for ti in 0..t {
            for hi in 0..h {
                let b = (ti * h + hi) * d;
                let (xv, yv) = (&x[b..b + d], &y[b..b + d]);
                let pairs: Vec<(usize, usize)> = match style {
                    RopeStyle::Neox => (0..rot / 2).map(|i| (i, i + rot / 2)).collect(),
                    RopeStyle::Gptj => (0..rot / 2).map(|i| (2 * i, 2 * i + 1)).collect(),
                };
                for (a, b2) in pairs {
                    let n0 = xv[a].hypot(xv[b2]);
                    let n1 = yv[a].hypot(yv[b2]);
                    assert!((n0 - n1).abs() < 1e-5, "{style:?} pair norm {n0} vs {n1}");
                }
                assert_eq!(&xv[rot..], &yv[rot..], "lanes past rot are copied");
                if positions[ti] == 0 {
                    for j in 0..d {
                        assert!((xv[j] - yv[j]).abs() < 1e-6, "position 0 is the identity");
                    }
                }
            }
        }
    }
}

#[test]
fn neox_and_gptj_agree_under_the_lane_permutation() {
    let (t, h, d, rot) = (4, 2, 8, 8);
    let (c, s) = r::cos_sin_cache(32, rot, 500.0);
    let x = data(t * h * d, 2);
    let positions = [31i64, 2, 9, 17];
    // GPT-J lane 2i ↔ NeoX lane i, 2i+1 ↔ i + rot/2.
    let perm = |v: &[f32]| -> Vec<f32> {
        let mut o = v.to_vec();
        for row in 0..t * h {
            for i in 0..rot / 2 {
                o[row * d + 2 * i] = v[row * d + i];
                o[row * d + 2 * i + 1] = v[row * d + i + rot / 2];
            }
        }
        o
    };
    let neox = r::rope(&x, h, d, &c, &s, &positions, rot, RopeStyle::Neox);
    let gptj = r::rope(&perm(&x), h, d, &c, &s, &positions, rot, RopeStyle::Gptj);
    for (a, b) in perm(&neox).iter().zip(&gptj) {
        assert!((a - b).abs() < 1e-6);
    }
}

#[test]
fn a_known_rotation() {
    // One pair at angle p·1 (theta irrelevant for i = 0): (1, 0) → (cos p, sin p).
    let (c, s) = r::cos_sin_cache(4, 2, 10000.0);
    let y = r::rope(&[1.0, 0.0], 1, 2, &c, &s, &[3], 2, RopeStyle::Neox);
    assert!((y[0] - 3f32.cos()).abs() < 1e-6 && (y[1] - 3f32.sin()).abs() < 1e-6);
    // Out-of-range positions zero the rotated lanes, never read past the cache.
    let y = r::rope(&[1.0, 2.0, 5.0], 1, 3, &c, &s, &[4], 2, RopeStyle::Neox);
    assert_eq!(y, vec![0.0, 0.0, 5.0]);
    let y = r::rope(&[1.0, 2.0], 1, 2, &c, &s, &[-1], 2, RopeStyle::Gptj);
    assert_eq!(y, vec![0.0, 0.0]);
}

// ---------------------------------------------------------------------------------------------------------
// Planner.

fn described(dt: ScalarType, dims: [i64; 4], rot: i64, flags: [i64; 3]) -> Vec<Operand> {
    rope::described_call(dt, &[dims.to_vec(), vec![rot, 4096], flags.to_vec()])
        .unwrap()
        .0
}

fn expect_error(r: Result<Vec<cutile_kernels::op::PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

#[test]
fn bad_calls_are_typed_errors() {
    let t = target();
    let ok = described(BF16, [10, 4, 2, 128], 128, [0, 0, 0]);
    assert_eq!(rope::plan(&ok, &t, RopeStyle::Neox).unwrap().len(), 1);
    let mut o = ok.clone();
    o[1] = Operand::described("k", 1, F16, &[10, 2, 128]);
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "must match `q`");
    let mut o = ok.clone();
    o[1] = Operand::described("k", 1, BF16, &[10, 2, 64]);
    expect_error(
        rope::plan(&o, &t, RopeStyle::Neox),
        "`k` must be [T, Hk, D]",
    );
    let mut o = ok.clone();
    o[4] = Operand::described("positions", 4, I32, &[9]);
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "one entry per token");
    let mut o = ok.clone();
    o[4] = Operand::described("positions", 4, F32, &[10]);
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "i32, i64");
    let mut o = ok.clone();
    o[2] = Operand::described("cos", 2, BF16, &[4096, 64]);
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "f32");
    let o = described(BF16, [10, 4, 2, 64], 128, [0, 0, 0]);
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "rot ≤ D");
    let mut o = ok.clone();
    o[3] = Operand::described("sin", 3, F32, &[4095, 64]);
    expect_error(
        rope::plan(&o, &t, RopeStyle::Neox),
        "`sin` must have `cos`'s shape",
    );
    let mut o = ok.clone();
    o[5] = Operand::described("q_out", 5, BF16, &[10, 4, 127]);
    expect_error(
        rope::plan(&o, &t, RopeStyle::Neox),
        "`q_out` must have `q`'s shape",
    );
    expect_error(rope::plan(&ok[..6], &t, RopeStyle::Neox), "takes 7 tensors");
    let o = described(BF16, [10, 4, 2, 1024], 128, [0, 0, 0]);
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "outside 1..=512");
    let mut o = ok.clone();
    o[0].device = 1;
    expect_error(rope::plan(&o, &t, RopeStyle::Neox), "device");
}

#[test]
fn empty_calls_plan_nothing() {
    let t = target();
    for dims in [[0, 4, 2, 128], [10, 0, 0, 128]] {
        let o = described(F32, dims, 64, [0, 0, 0]);
        assert!(rope::plan(&o, &t, RopeStyle::Neox).unwrap().is_empty());
    }
}

#[test]
fn one_launch_covers_q_and_k_and_in_place_writes_the_inputs() {
    let t = target();
    // Partial rotary (rot < D): one block per (token tile, head).
    let out = described(BF16, [1000, 32, 8, 128], 64, [1, 1, 0]);
    let l = &rope::plan(&out, &t, RopeStyle::Gptj).unwrap()[0];
    assert_eq!(l.grid, Some((1000u32.div_ceil(16), 40, 1)));
    assert!(l.args.contains(&PlannedArg::I32(64)) && l.args.contains(&PlannedArg::I32(1)));
    let outs: Vec<usize> = l
        .args
        .iter()
        .filter_map(|a| match a {
            PlannedArg::Tensor {
                operand,
                output: true,
                ..
            } => Some(*operand),
            _ => None,
        })
        .collect();
    assert_eq!(outs, [rope::slot::Q_OUT, rope::slot::K_OUT]);
    // Partial rotary in place takes the pair kernels (lanes `rot..D` are left alone): `HP` from
    // `rot`, one token per block for a decode-sized call, the 4 + 1 head groups of 8 heads fastest.
    let inp = described(BF16, [4, 32, 8, 128], 64, [0, 0, 1]);
    let l = &rope::plan(&inp, &t, RopeStyle::Neox).unwrap()[0];
    assert_eq!(l.config, "rope_neox BM=1 HB=8 HP=32");
    assert_eq!(l.grid, Some((4 * 5, 1, 1)), "decode: one token per block");
    let outs: Vec<usize> = l
        .args
        .iter()
        .filter_map(|a| match a {
            PlannedArg::Tensor {
                operand,
                output: true,
                ..
            } => Some(*operand),
            _ => None,
        })
        .collect();
    assert_eq!(outs, [rope::slot::Q, rope::slot::K]);
}

/// Full rotary (rot = D) takes the pair kernels: one block per (token tile, group of 8 heads), cos/sin
/// read once per token and block, the style a property of the kernel.
#[test]
fn full_rotary_takes_the_pair_kernels() {
    let t = target();
    let outs = |l: &cutile_kernels::op::PlannedLaunch| -> Vec<usize> {
        l.args
            .iter()
            .filter_map(|a| match a {
                PlannedArg::Tensor {
                    operand,
                    output: true,
                    ..
                } => Some(*operand),
                _ => None,
            })
            .collect()
    };
    // NeoX's prefill tile at D 128: 4 tokens × 4 heads (the 8 + 2 head groups of 4 heads fastest).
    let prefill = described(BF16, [16384, 32, 8, 128], 128, [0, 0, 1]);
    let l = &rope::plan(&prefill, &t, RopeStyle::Neox).unwrap()[0];
    assert_eq!(l.config, "rope_neox BM=4 HB=4 HP=64");
    assert_eq!(
        l.grid,
        Some((4096 * 10, 1, 1)),
        "heads fastest: one 1-D grid"
    );
    // GPT-J keeps one token of 8 heads.
    let l = &rope::plan(&prefill, &t, RopeStyle::Gptj).unwrap()[0];
    assert_eq!(l.config, "rope_gptj BM=1 HB=8 HP=64");
    assert_eq!(outs(l), [rope::slot::Q, rope::slot::K]);
    let gptj = described(F32, [77, 5, 3, 80], 80, [1, 1, 0]);
    let l = &rope::plan(&gptj, &t, RopeStyle::Gptj).unwrap()[0];
    assert_eq!(l.config, "rope_gptj BM=1 HB=8 HP=64");
    assert_eq!(l.grid, Some((77 * 2, 1, 1)));
    assert_eq!(outs(l), [rope::slot::Q_OUT, rope::slot::K_OUT]);
    // Every even head dimension up to 512, any token count, with or without k heads, has a kernel.
    for d in [2i64, 4, 16, 40, 64, 80, 128, 256, 512] {
        for tokens in [1i64, 7, 4096] {
            for hk in [0i64, 3] {
                let ops = described(F16, [tokens, 4, hk, d], d, [0, 1, 0]);
                for style in [RopeStyle::Neox, RopeStyle::Gptj] {
                    let l = rope::plan(&ops, &t, style).unwrap();
                    assert_eq!(l.len(), 1, "d={d} tokens={tokens}");
                    // SAFETY: described operands are never launched.
                    let metas = unsafe { cutile_kernels::op::describe(&l[0], &ops) }.tensor_metas();
                    let s = l[0].kernel.specialize(&metas);
                    assert!(s.is_ok(), "d={d} tokens={tokens} {style:?}: {:?}", s.err());
                    let groups = 1 + i64::from(hk > 0);
                    let c = cfg::choose_pairs_on(tokens, d, 4, hk, i64::from(t.sm_count), style);
                    let blocks = (ceil_div(tokens, c.bm) * groups) as u32;
                    assert_eq!(l[0].grid, Some((blocks, 1, 1)), "d={d} hk={hk}");
                }
            }
        }
    }
}

#[test]
fn strided_q_and_k_column_slices_of_a_fused_qkv_output_plan() {
    // q and k as column slices of one [T, (Hq + 2Hkv)·D] buffer viewed as [T, H, D].
    let (tt, hq, hkv, d) = (33i64, 4i64, 2i64, 64i64);
    let row = (hq + 2 * hkv) * d;
    // rot 32: the per-head kernel; rot 64 = D: the pair kernel.
    for rot in [32, 64] {
        let mut ops = described(F16, [tt, hq, hkv, d], rot, [0, 1, 1]);
        ops[0].strides = vec![row, d, 1];
        ops[1].strides = vec![row, d, 1];
        ops[1].ptr = ops[0].ptr + (hq * d * 2) as u64;
        let l = rope::plan(&ops, &target(), RopeStyle::Neox).unwrap();
        assert_eq!(l.len(), 1);
        let s = l[0]
            .kernel
            .specialize(&unsafe { cutile_kernels::op::describe(&l[0], &ops) }.tensor_metas());
        assert!(s.is_ok(), "rot {rot}: {:?}", s.err());
    }
}

#[test]
fn the_op_is_in_the_registry() {
    let info = cutile_kernels::op::registry::find(rope::OP).unwrap();
    assert_eq!(info.family, "rope");
    for c in rope::representative_calls() {
        let p = c.plan(&target(), false).unwrap();
        assert_eq!(p.launches.len(), 1, "{}", c.label());
    }
    let bad = CallSpec::new(rope::OP, "bf16", &[&[1, 2, 3]], false);
    assert!(bad.plan(&target(), false).is_err());
}

// ---------------------------------------------------------------------------------------------------------
// Tuning candidates.

fn tile(bm: i64, hb: i64, hp: i64) -> PairsConfig {
    PairsConfig::tile(bm, hb, hp)
}

/// `tile` in the tokens-fastest grid order (the default's alternative).
fn tokens_fastest(bm: i64, hb: i64, hp: i64) -> PairsConfig {
    PairsConfig {
        heads_fastest: false,
        ..tile(bm, hb, hp)
    }
}

/// The bench call's: bf16, T 16384, 32 + 8 heads of 128, in place.
fn bench_call() -> Vec<Operand> {
    described(BF16, [16384, 32, 8, 128], 128, [0, 0, 1])
}

/// `launch`'s kernel specializes for the call's operands.
fn specializes(what: &str, launch: &PlannedLaunch, ops: &[Operand]) {
    // SAFETY: described operands are never launched.
    let metas = unsafe { cutile_kernels::op::describe(launch, ops) }.tensor_metas();
    let s = launch.kernel.specialize(&metas);
    assert!(s.is_ok(), "{what} {}: {:?}", launch.config, s.err());
}

/// Data-driven over every even head dimension and decode- to prefill-sized token counts: the
/// candidates start with the default tile, are distinct, are listed tiles (so have a kernel), keep at
/// least eight blocks of tokens, and a decode-sized call has only its default.
#[test]
fn pair_candidates_start_with_the_default_and_are_listed_tiles() {
    let listed: std::collections::HashSet<PairsConfig> = cfg::PAIRS_TILES.iter().copied().collect();
    assert_eq!(
        listed.len(),
        cfg::PAIRS_TILES.len(),
        "PAIRS_TILES has repeats"
    );
    for d in (2..=cfg::MAX_D).step_by(2) {
        for tokens in [1i64, 7, 100, 1000, 4096, 16384] {
            let c = cfg::pairs_candidates(tokens, d);
            let what = format!("d={d} tokens={tokens}");
            assert_eq!(c[0], cfg::choose_pairs(tokens, d), "{what}: default first");
            let distinct: std::collections::HashSet<_> = c.iter().collect();
            assert_eq!(distinct.len(), c.len(), "{what}: {c:?}");
            assert!(c.len() <= 7, "{what}: {} candidates", c.len());
            for t in &c {
                assert!(t.has_kernel(), "{what}: {t:?} has no kernel");
                assert!(
                    listed.contains(&tile(t.bm, t.hb, t.hp)),
                    "{what}: {t:?} is not listed"
                );
                assert_eq!(t.hp, c[0].hp, "{what}: one HP per call");
                assert!(t.bm == 1 || tokens >= 8 * t.bm, "{what}: {t:?}");
            }
            if c[0].bm == 1 && tokens < 8 * (cfg::PAIRS_PER_BLOCK / (8 * c[0].hp)).max(4) {
                assert_eq!(c.len(), 1, "{what}: decode-sized calls are not tuned");
            }
        }
    }
    // Issue 14's bench call (HP 64): one token per block by default (256 pairs would be half a token,
    // 512 is one), then 1024 and 2048 at HB 8, 512 and 1024 at HB 4.
    assert_eq!(
        cfg::pairs_candidates(16384, 128),
        [
            tile(1, 8, 64),
            tokens_fastest(1, 8, 64),
            tile(2, 8, 64),
            tile(4, 8, 64),
            tile(2, 4, 64),
            tile(4, 4, 64),
        ]
    );
    // GPT-J D 64 (HP 32): one token (256 pairs) by default, then 2, 4, 8 at HB 8, 4 and 8 at HB 4.
    assert_eq!(
        cfg::pairs_candidates(300, 64),
        [
            tile(1, 8, 32),
            tokens_fastest(1, 8, 32),
            tile(2, 8, 32),
            tile(4, 8, 32),
            tile(8, 8, 32),
            tile(4, 4, 32),
            tile(8, 4, 32),
        ]
    );
    assert_eq!(cfg::pairs_candidates(8, 128), [tile(1, 8, 64)]);
    assert_eq!(
        cfg::pairs_candidates(4096, 512),
        [tile(1, 8, 256), tokens_fastest(1, 8, 256), tile(1, 4, 256)]
    );
    // The class separates styles and decode- from prefill-sized calls.
    let class = |t, style| cfg::pairs_class(BF16, style, t, 128);
    assert_eq!(
        class(16384, RopeStyle::Neox),
        "bf16 Neox BM=1 HB=8 HP=64 prefill"
    );
    assert_ne!(class(16384, RopeStyle::Neox), class(16384, RopeStyle::Gptj));
    assert_ne!(class(16384, RopeStyle::Neox), class(8, RopeStyle::Neox));
}

/// Small calls get a smaller default tile, so the grid keeps `MIN_BLOCKS_PER_SM` blocks per SM where
/// a listed tile allows it; large calls and one-token tiles keep `choose_pairs`'s. The tuning list
/// starts with that tile and keeps `choose_pairs`'s.
#[test]
fn small_calls_shrink_the_pair_tile_to_fill_the_gpu() {
    let sms = 132;
    // (tokens, d, hq, hk, BM), GPT-J's prefill tile of 512 pairs first: D 64 T 300 (2 → 1 tokens:
    // 150 blocks of 2 groups is below 4 per SM) and T 4096 (2 tokens), D 32 at T 500 (4 → 2 → 1) and T
    // 1500 (375 blocks of 4 tokens, 750 in all), D 8 (HP 4: 16 → 8 tokens; 4 is not listed, so it
    // stays), D 128 (one token).
    for (tokens, d, hq, hk, bm) in [
        (300, 64, 8, 2, 1),
        (4096, 64, 8, 2, 2),
        (500, 32, 8, 2, 1),
        (1500, 32, 8, 2, 4),
        (400, 8, 8, 0, 8),
        (300, 128, 32, 8, 1),
        (16384, 128, 32, 8, 1),
    ] {
        let c = cfg::choose_pairs_on(tokens, d, hq, hk, sms, RopeStyle::Gptj);
        assert_eq!(c.bm, bm, "{tokens} tokens, d {d}: {c:?}");
        assert!(cfg::PAIRS_TILES.contains(&c), "{c:?} has no kernel");
        let list = cfg::pairs_candidates_on(tokens, d, hq, hk, sms, RopeStyle::Gptj);
        assert_eq!(list[0], c);
        let base = cfg::choose_pairs(tokens, d);
        assert!(list.contains(&base), "{tokens} tokens, d {d}: {list:?}");
        let distinct: std::collections::HashSet<_> = list.iter().collect();
        assert_eq!(distinct.len(), list.len());
    }
    // NeoX at D 128 takes its 4 × 4 prefill tile where the grid keeps 4 blocks per SM, else the
    // one-token tile; never at other head dimensions.
    let neox = |tokens, d| cfg::choose_pairs_on(tokens, d, 32, 8, sms, RopeStyle::Neox);
    assert_eq!(neox(16384, 128), cfg::NEOX_PREFILL_TILE);
    assert_eq!(neox(100, 128), tile(1, 8, 64));
    assert_eq!(neox(16384, 64), tile(1, 8, 32));
    let list = cfg::pairs_candidates_on(16384, 128, 32, 8, sms, RopeStyle::Neox);
    assert_eq!(list[0], cfg::NEOX_PREFILL_TILE);
    assert!(list.contains(&tile(1, 8, 64)), "{list:?}");
    // GPT-J's prefill tile: 512 pairs of 8 heads (2 tokens at D 64), one token at D 128, and one
    // token for a decode-sized call.
    let gptj = |tokens, d| cfg::choose_pairs_on(tokens, d, 16, 16, sms, RopeStyle::Gptj);
    assert_eq!(gptj(32768, 64), tile(2, 8, 32));
    assert_eq!(gptj(32768, 128), tile(1, 8, 64));
    assert_eq!(gptj(8, 64), tile(1, 8, 32));
    // Through the planner: the GPT-J bench call (T 300, D 64) takes one token per block.
    let ops = described(BF16, [300, 8, 2, 64], 64, [1, 1, 0]);
    let l = &rope::plan(&ops, &target(), RopeStyle::Gptj).unwrap()[0];
    assert_eq!(l.config, "rope_gptj BM=1 HB=8 HP=32");
    assert_eq!(l.grid, Some((600, 1, 1)));
}

/// Every listed tile plans through `plan_pairs` for both styles, i32 and i64 positions (the dispatch
/// covers the list), with its grid: `ceil(T / BM)` token blocks × the q and k head groups of `HB`.
#[test]
fn every_listed_pair_tile_has_a_kernel() {
    let t = target();
    for &c in cfg::PAIRS_TILES {
        let (tokens, hq, hk) = (1000i64, 32i64, 8i64);
        for (style, flags) in [(RopeStyle::Neox, [0, 0, 1]), (RopeStyle::Gptj, [1, 1, 0])] {
            let ops = described(F16, [tokens, hq, hk, 2 * c.hp], 2 * c.hp, flags);
            let l = rope::plan_pairs(&ops, &t, style, &c).unwrap();
            assert_eq!(l.len(), 1);
            assert!(l[0].config.ends_with(&c.name()), "{}", l[0].config);
            let groups = ceil_div(hq, c.hb) + ceil_div(hk, c.hb);
            assert_eq!(
                l[0].grid,
                Some(((ceil_div(tokens, c.bm) * groups) as u32, 1, 1)),
                "{c:?}"
            );
        }
    }
    // The tokens-fastest order: the 2-D grid (token tiles, groups), same kernel.
    let ops = bench_call();
    let l = rope::plan_pairs(&ops, &t, RopeStyle::Neox, &tokens_fastest(1, 8, 64)).unwrap();
    assert_eq!(l[0].grid, Some((16384, 5, 1)));
    assert_eq!(l[0].config, "rope_neox BM=1 HB=8 HP=64 tokens-fastest");
    let default = rope::plan_pairs(&ops, &t, RopeStyle::Neox, &tile(1, 8, 64)).unwrap();
    assert_eq!(default[0].grid, Some((16384 * 5, 1, 1)));
    assert_eq!(
        l[0].kernel.name(),
        default[0].kernel.name(),
        "one kernel for both orders"
    );
    // Unlisted tiles and partial rotary are typed errors.
    let e = rope::plan_pairs(&ops, &t, RopeStyle::Neox, &tile(3, 8, 64)).unwrap_err();
    assert!(e.to_string().contains("BM = 3"), "{e}");
    let partial = described(BF16, [64, 4, 2, 128], 64, [0, 0, 0]);
    let e = rope::plan_pairs(&partial, &t, RopeStyle::Neox, &tile(4, 8, 64)).unwrap_err();
    assert!(e.to_string().contains("rotates 64 of 128"), "{e}");
}

/// `plan_with(.., all_candidates)` gives one launch per candidate, the default's first (what `plan`
/// gives), and each kernel specializes; a decode call keeps its one launch, and a partial-rotary call
/// has its tile in both grid orders (one kernel).
#[test]
fn plan_with_all_candidates_lists_every_candidate() {
    let t = target();
    for (ops, style) in [
        (bench_call(), RopeStyle::Neox),
        (
            described(F32, [300, 8, 2, 64], 64, [1, 1, 0]),
            RopeStyle::Gptj,
        ),
    ] {
        let q = &ops[0].shape;
        let all = rope::plan_with(&ops, &t, style, true).unwrap();
        let hk = ops[1].shape[1];
        let want = cfg::pairs_candidates_on(q[0], q[2], q[1], hk, i64::from(t.sm_count), style);
        assert_eq!(all.len(), want.len());
        assert!(all.len() > 1);
        assert_eq!(
            all[0].config,
            rope::plan(&ops, &t, style).unwrap()[0].config
        );
        for (l, c) in all.iter().zip(&want) {
            assert!(l.config.ends_with(&c.name()), "{} vs {c:?}", l.config);
            specializes(&format!("{style:?}"), l, &ops);
        }
    }
    assert_eq!(
        rope::plan_with(
            &described(BF16, [8, 32, 8, 128], 128, [0, 0, 1]),
            &t,
            RopeStyle::Neox,
            true
        )
        .unwrap()
        .len(),
        1
    );
    let partial = described(F16, [1000, 16, 16, 256], 64, [1, 1, 0]);
    let all = rope::plan_with(&partial, &t, RopeStyle::Gptj, true).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[0].config,
        rope::plan(&partial, &t, RopeStyle::Gptj).unwrap()[0].config
    );
    assert_eq!(all[0].config, "rope BM=8 DP=256");
    assert_eq!(all[0].grid, Some((125, 32, 1)));
    assert_eq!(all[1].config, "rope BM=8 DP=256 heads-fastest");
    assert_eq!(all[1].grid, Some((125 * 32, 1, 1)));
    assert_eq!(all[0].kernel.name(), all[1].kernel.name());
    specializes("partial heads-fastest", &all[1], &partial);
    // A decode-sized partial call (one token per block) has no alternative.
    let small = described(F16, [5, 16, 16, 256], 64, [1, 1, 0]);
    assert_eq!(
        rope::plan_with(&small, &t, RopeStyle::Gptj, true)
            .unwrap()
            .len(),
        1
    );
}

// ---------------------------------------------------------------------------------------------------------
// Compilation.

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "rope representative_calls_compile_for_sm90",
        common::catalog_jobs(&rope::representative_calls()),
    );
}

/// The bench call's non-default tuning candidates compile (the tuning run's bundle holds them).
#[test]
fn bench_call_candidates_compile_for_sm90() {
    let ops = bench_call();
    let cases: Vec<_> = rope::plan_with(&ops, &target(), RopeStyle::Neox, true)
        .unwrap()
        .into_iter()
        .skip(1)
        .map(|l| {
            // SAFETY: described operands are never launched.
            let metas = unsafe { cutile_kernels::op::describe(&l, &ops) }.tensor_metas();
            let name: &'static str = Box::leak(l.config.replace([' ', '='], "_").into_boxed_str());
            (name, l.kernel.clone(), metas)
        })
        .collect();
    // The tokens-fastest order (the same kernel as the default) and four other tiles.
    assert_eq!(cases.len(), 5);
    common::compile_all_sm90("rope bench_call_candidates_compile_for_sm90", cases);
}

#[test]
fn compile_four_archs() {
    common::compile_four_archs(
        "rope compile_four_archs",
        common::catalog_jobs(&rope::representative_calls()[..1]),
    );
}

// ---------------------------------------------------------------------------------------------------------
// GPU.

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::{bf16, f16};

    fn up<T: DeviceElement>(dev: &Device, v: &[f32], shape: &[i64]) -> Tensor<T> {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).unwrap()
    }

    fn round<T: DeviceElement>(v: &[f32]) -> Vec<f32> {
        v.iter()
            .map(|&x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    }

    fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol * (1.0 + w.abs()),
                "{what}: element {i}: {g} vs {w}"
            );
        }
    }

    /// One case: (T, Hq, Hk, D, rot, style, in place, i64 positions, q/k as slices of one qkv buffer).
    type Case = (i64, i64, i64, i64, i64, RopeStyle, bool, bool, bool);

    fn run_case<T: DeviceElement>(dev: &Device, stream: &Stream, c: Case, tol: f32) {
        let (t, hq, hk, d, rot, style, in_place, i64_pos, fused) = c;
        let max_pos = 300i64;
        let (cs, sn) = r::cos_sin_cache(max_pos as usize, rot as usize, 10000.0);
        let cos = Tensor::from_host(dev, &cs, &[max_pos, rot / 2]).unwrap();
        let sin = Tensor::from_host(dev, &sn, &[max_pos, rot / 2]).unwrap();
        // Random non-monotonic positions, one past the cache and one negative (both zero the rotation).
        let mut rng = cutile_testkit::data::Rng::new(t as u64 * 31 + d as u64);
        let mut pos: Vec<i64> = (0..t)
            .map(|_| (rng.next_u64() % max_pos as u64) as i64)
            .collect();
        if t > 3 {
            pos[1] = max_pos;
            pos[2] = -5;
        }
        let q = round::<T>(&data((t * hq * d) as usize, 11));
        let k = round::<T>(&data((t * hk * d) as usize, 12));
        let want_q = r::rope(
            &q,
            hq as usize,
            d as usize,
            &cs,
            &sn,
            &pos,
            rot as usize,
            style,
        );
        let want_k = r::rope(
            &k,
            hk as usize,
            d as usize,
            &cs,
            &sn,
            &pos,
            rot as usize,
            style,
        );
        let down = |v: Vec<T>| -> Vec<f32> { v.into_iter().map(|x| x.to_f64() as f32).collect() };
        let pos32: Vec<i32> = pos.iter().map(|&p| p as i32).collect();
        let p64 = Tensor::from_host(dev, &pos, &[t]).unwrap();
        let p32 = Tensor::from_host(dev, &pos32, &[t]).unwrap();
        let label = format!("{c:?} {}", T::DTYPE);
        macro_rules! with_pos {
            ($p:expr) => {
                if in_place {
                    let mut qd = up::<T>(dev, &q, &[t, hq, d]);
                    let mut kd = up::<T>(dev, &k, &[t, hk, d]);
                    rope::rope_(stream, &mut qd, &mut kd, &cos, &sin, $p, style)
                        .unwrap()
                        .wait()
                        .unwrap();
                    close(&format!("{label} q"), &down(qd.to_host().unwrap()), &want_q, tol);
                    close(&format!("{label} k"), &down(kd.to_host().unwrap()), &want_k, tol);
                } else if fused {
                    // q and k as head slices of one [T, Hq + 2Hk, D] buffer (row stride (Hq+2Hk)·D).
                    let h = hq + 2 * hk;
                    let mut all = vec![0f32; (t * h * d) as usize];
                    for ti in 0..t as usize {
                        let row = ti * (h * d) as usize;
                        let (qn, kn) = ((hq * d) as usize, (hk * d) as usize);
                        all[row..row + qn].copy_from_slice(&q[ti * qn..(ti + 1) * qn]);
                        all[row + qn..row + qn + kn].copy_from_slice(&k[ti * kn..(ti + 1) * kn]);
                    }
                    let qkv = up::<T>(dev, &all, &[t, h, d]);
                    let qv = qkv.slice(1, 0..hq).unwrap();
                    let kv = qkv.slice(1, hq..hq + hk).unwrap();
                    let mut qo = Tensor::<T>::zeros(dev, &[t, hq, d]).unwrap();
                    let mut ko = Tensor::<T>::zeros(dev, &[t, hk, d]).unwrap();
                    rope::rope(stream, &qv, &kv, &cos, &sin, $p, &mut qo, &mut ko, style)
                        .unwrap()
                        .wait()
                        .unwrap();
                    close(&format!("{label} q"), &down(qo.to_host().unwrap()), &want_q, tol);
                    close(&format!("{label} k"), &down(ko.to_host().unwrap()), &want_k, tol);
                } else {
                    let qd = up::<T>(dev, &q, &[t, hq, d]);
                    let kd = up::<T>(dev, &k, &[t, hk, d]);
                    let mut qo = Tensor::<T>::zeros(dev, &[t, hq, d]).unwrap();
                    let mut ko = Tensor::<T>::zeros(dev, &[t, hk, d]).unwrap();
                    rope::rope(stream, &qd, &kd, &cos, &sin, $p, &mut qo, &mut ko, style)
                        .unwrap()
                        .wait()
                        .unwrap();
                    close(&format!("{label} q"), &down(qo.to_host().unwrap()), &want_q, tol);
                    close(&format!("{label} k"), &down(ko.to_host().unwrap()), &want_k, tol);
                }
            };
        }
        if i64_pos {
            with_pos!(&p64)
        } else {
            with_pos!(&p32)
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_api_matches_reference() {
        let Some((dev, stream)) = gpu_device("rope host_api_matches_reference") else {
            return;
        };
        use RopeStyle::*;
        let cases: &[Case] = &[
            (1, 1, 1, 16, 16, Neox, false, false, false),
            (7, 4, 2, 64, 64, Gptj, true, true, false),
            (77, 5, 3, 80, 32, Neox, false, true, true),
            (300, 8, 2, 128, 64, Gptj, false, false, true),
            (1000, 32, 8, 128, 128, Neox, true, false, false),
            (33, 2, 1, 256, 256, Gptj, false, true, false),
        ];
        for &c in cases {
            run_case::<f32>(&dev, &stream, c, 1e-5);
            run_case::<bf16>(&dev, &stream, c, 1.6e-2);
            run_case::<f16>(&dev, &stream, c, 2e-3);
        }
    }
}

/// The GPT-J pair kernel moves x in vector accesses on sm_90: each row's pair lanes are one contiguous
/// gather, which tileiras 13.5.37 turns into 16-byte loads and stores at the prefill tiles (512 pairs:
/// 8 lanes per thread) and 8-byte ones at D 64 with one token per block (a decode-sized call). The
/// session-30 form (a `[.., HP, 2]` gather of
/// lanes `2i + {0, 1}`) got 4-byte accesses, and ran the H200 at 56–65% of copy; a kernel or
/// tileiras change that loses the vectors fails here.
#[test]
fn gptj_pair_kernel_moves_x_in_vectors_on_sm90() {
    let Some(tileiras) = common::tileiras("gptj_pair_kernel_moves_x_in_vectors_on_sm90") else {
        return;
    };
    let ptx = common::Sm90Ptx::new(tileiras);
    // (call, the default launch's config, the vector width of its x loads and stores)
    let cases = [
        (
            CallSpec::new(
                "rope",
                "bf16",
                &[&[4096, 32, 8, 128], &[128, 8192], &[1, 0, 1]],
                false,
            ),
            "rope_gptj BM=1 HB=8 HP=64",
            "v4",
        ),
        (
            CallSpec::new(
                "rope",
                "f16",
                &[&[32768, 16, 16, 64], &[64, 32768], &[1, 0, 0]],
                false,
            ),
            "rope_gptj BM=2 HB=8 HP=32",
            "v4",
        ),
        (
            CallSpec::new(
                "rope",
                "f16",
                &[&[8, 16, 16, 64], &[64, 4096], &[1, 0, 0]],
                false,
            ),
            "rope_gptj BM=1 HB=8 HP=32",
            "v2",
        ),
    ];
    for (call, config, width) in cases {
        let jobs = cutile_kernels::catalog::dsl_jobs(std::slice::from_ref(&call), false).unwrap();
        let job = jobs
            .iter()
            .find(|j| j.kernel == "rope_gptj" && j.specialization.contains(config))
            .unwrap_or_else(|| panic!("{}: no launch `{config}`", call.label()));
        let text = ptx.of(job, config);
        for op in ["ld.global", "st.global"] {
            assert!(
                text.contains(&format!("{op}.{width}.")),
                "{config}: no `{op}` of width {width} in the PTX"
            );
        }
    }
}
