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

use crate::common;

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
    let kernels = common::compile_every_launch(
        "mla compile",
        &mla::representative_calls(),
        common::OtherArchsPer::Kernel,
    )
    .kernels;
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
    assert!(jobs.len() <= 4, "{} catalog specializations", jobs.len());
}

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn described(op: &str, dt: ScalarType, shapes: &[&[i64]]) -> (Vec<Operand>, bool) {
    let shapes: Vec<Vec<i64>> = shapes.iter().map(|s| s.to_vec()).collect();
    mla::described_call(op, dt, &shapes).unwrap()
}

fn decode_err(ops: &[Operand], paged: bool, options: &MlaDecodeOptions) -> OpError {
    match mla::plan_decode(ops, paged, &target(), options) {
        Ok(p) => panic!("planned {} launches for a bad call", p.len()),
        Err(e) => e,
    }
}

fn prefill_ops(dt: ScalarType, q: &[i64], k: &[i64]) -> Vec<Operand> {
    mla::described_prefill(dt, &[q.to_vec(), k.to_vec()]).unwrap()
}

fn prefill_err(ops: &[Operand], causal: bool) -> OpError {
    let o = MlaPrefillOptions {
        causal,
        scale: None,
    };
    match mla::plan_prefill(ops, &target(), &o) {
        Ok(p) => panic!("planned {} launches for a bad call", p.len()),
        Err(e) => e,
    }
}

/// The launches of a registry call on sm_90.
fn launches(op: &str, shapes: &[&[i64]], causal: bool) -> Vec<cutile_kernels::op::PlannedLaunch> {
    CallSpec::new(op, "bf16", shapes, causal)
        .plan(&target(), false)
        .unwrap_or_else(|e| panic!("{op} {shapes:?}: {e}"))
        .launches
}

fn chunk_of(l: &cutile_kernels::op::PlannedLaunch) -> i64 {
    // The i32 scalars are Sq, the chunk and the grid order.
    let ints: Vec<i64> = l
        .args
        .iter()
        .filter_map(|a| match a {
            cutile_kernels::op::PlannedArg::I32(c) => Some(*c as i64),
            _ => None,
        })
        .collect();
    assert_eq!(ints.len(), 3, "{}", l.config);
    ints[1]
}

#[test]
fn decode_grid_follows_heads_queries_sms_and_capacity() {
    assert!((mla::DEFAULT_SCALE - 1.0 / 192f32.sqrt()).abs() < 1e-8);
    // B 1, H 128: two row tiles x two value parts; 32k keys split 32 ways (the cap), combine after.
    let p = launches(OP_DECODE, &[&[1, 128, 1, 576], &[1, 32768, 576]], false);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].kernel.name(), "mla_decode_partial");
    assert_eq!(p[0].grid, Some((1, 4, 32)));
    assert_eq!(p[1].kernel.name(), "mla_decode_combine");
    // The merge of each row tile and part spread over 64 x 8 element tiles (at 64 x 32, 32 blocks
    // would leave most SMs idle), as 2 rows x 256 lanes: 128 blocks.
    assert_eq!(p[1].grid, Some((1, 4, 32)));
    assert!(
        p[1].config.ends_with("splits=32 c2x256 p16 combine"),
        "{}",
        p[1].config
    );
    let chunk = chunk_of(&p[0]);
    assert!(
        chunk % 64 == 0 && chunk * 32 >= 32768 && chunk * 31 < 32768,
        "{chunk}"
    );
    // B 128 x 1k keys: 512 blocks fill the SMs: one split, direct, in the rows-first grid (the
    // four blocks of a sequence next to each other).
    let p = launches(
        OP_DECODE_PAGED,
        &[&[128, 128, 1, 576], &[2048, 64, 576], &[128, 16]],
        false,
    );
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "mla_decode_direct");
    assert_eq!(p[0].grid, Some((4, 128, 1)));
    assert_eq!(p[0].config, "mla_decode M=64 BN=64 DV=256 splits=1 rf");
    // B 32 x H 128: 128 blocks, one wave on 132 SMs: not split either. B 1 x 1k: 16 splits of one
    // key tile.
    let p = launches(OP_DECODE, &[&[32, 128, 1, 576], &[32, 1024, 576]], false);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].grid, Some((4, 32, 1)));
    let p = launches(OP_DECODE, &[&[1, 128, 1, 576], &[1, 1024, 576]], false);
    assert_eq!(p[0].grid, Some((1, 4, 16)));
    assert_eq!(chunk_of(&p[0]), 64);
    // Up to 256 keys, one block per row tile (the wide form).
    let p = launches(
        OP_DECODE_PAGED,
        &[&[128, 128, 1, 576], &[512, 64, 576], &[128, 4]],
        false,
    );
    assert_eq!(p[0].grid, Some((2, 128, 1)));
    assert_eq!(p[0].config, "mla_decode M=64 BN=32 DV=512 splits=1 w8 rf");
    // H 16 x Sq 2 = 32 rows: one row tile; H 32 x Sq 4 = 128 rows: two; H 64 x Sq 3 = 192: three
    // (B 2: rows first, Y on the grid's x axis).
    for (h, sq, y) in [(16, 1, 2), (16, 2, 2), (32, 4, 4), (64, 3, 6), (128, 2, 8)] {
        let p = launches(OP_DECODE, &[&[2, h, sq, 576], &[2, 4096, 576]], false);
        assert_eq!(p[0].grid.unwrap().0, y, "H {h} Sq {sq}");
        assert_eq!(p[0].grid.unwrap().1, 2, "H {h} Sq {sq}");
    }
    // The paged key tile is the block size up to 64; short caches are not split below 64 keys.
    let p = launches(
        OP_DECODE_PAGED,
        &[&[2, 16, 1, 576], &[100, 16, 576], &[2, 50]],
        false,
    );
    assert!(p[0].config.contains("BN=16"), "{}", p[0].config);
    let p = launches(
        OP_DECODE_PAGED,
        &[&[2, 16, 1, 576], &[8, 256, 576], &[2, 4]],
        false,
    );
    assert!(p[0].config.contains("BN=64"), "{}", p[0].config);
    let p = launches(OP_DECODE, &[&[1, 16, 1, 576], &[1, 64, 576]], false);
    assert_eq!(p.len(), 1);
    let p = launches(OP_DECODE, &[&[1, 16, 1, 576], &[1, 65, 576]], false);
    assert_eq!(p.len(), 2);
    // A forced split count.
    let (ops, paged) = described(OP_DECODE, BF16, &[&[1, 128, 1, 576], &[1, 32768, 576]]);
    let one = MlaDecodeOptions {
        splits: Some(1),
        ..Default::default()
    };
    let ops = mla::with_scratch(&ops, paged, &target(), &one).unwrap();
    let p = mla::plan_decode(&ops, paged, &target(), &one).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "mla_decode_direct");
    // Prefill: (B·H, query tiles) blocks.
    let p = launches(
        OP_PREFILL,
        &[&[2, 16, 1000, 192], &[2, 16, 1000, 192]],
        true,
    );
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].grid, Some((32, 16, 1)));
}

/// The table takes one block per row tile (DV 512, 8 worker warps, key tile 32) where the call does
/// not split, holds at most 256 keys, its pages (if any) hold at least 32 tokens and those blocks fill
/// the SMs; the tuner then also times the narrow configuration and the 16-key tile; split calls store
/// 16-bit partials and time f32 ones, the wide split, the combine in other tile shapes and twice,
/// four times and half the split count (at least a key tile per split; also for grids with fewer
/// blocks than SMs); calls of
/// more than one sequence take the rows-first grid and time the other order; a forced split count
/// is never tuned; only the wide kernels carry the worker-warp hint.
#[test]
fn tuning_candidates_wide_row_tiles_and_combine_lanes() {
    let t = target();
    let choose = |rows, b, cap, bs| mla::config::choose(&t, rows, b, cap, bs, None);
    let summary = |c: &mla::MlaDecodeConfig| (c.bn, c.dv, c.splits, c.workers);
    // 256 keys: B 128 x H 128: 256 wide blocks; B 66 x H 128: 132; B 65: 130 < 132 SMs stays
    // narrow (260 blocks, one split). From 257 keys, narrow.
    assert_eq!(summary(&choose(128, 128, 256, None)), (32, 512, 1, 8));
    assert_eq!(summary(&choose(128, 66, 256, None)), (32, 512, 1, 8));
    assert_eq!(summary(&choose(128, 65, 256, None)), (64, 256, 1, 0));
    assert_eq!(summary(&choose(128, 128, 257, None)), (64, 256, 1, 0));
    assert_eq!(summary(&choose(128, 128, 8192, None)), (64, 256, 1, 0));
    // 32-token pages are the wide key tile; 16-token pages stay narrow (the tuner times BN 16 wide).
    assert_eq!(summary(&choose(128, 128, 256, Some(32))), (32, 512, 1, 8));
    let paged16 = choose(128, 128, 256, Some(16));
    assert_eq!(summary(&paged16), (16, 256, 1, 0));
    let cands = mla::config::candidates(&t, 128, 128, 256, Some(16), paged16);
    let got: Vec<_> = cands.iter().map(summary).collect();
    assert_eq!(got, [(16, 256, 1, 0), (16, 512, 1, 8)].repeat(2));
    // The second half is the other grid order of the first; B > 1 defaults to rows first.
    let order: Vec<_> = cands.iter().map(|c| c.rows_fast).collect();
    assert_eq!(order, [true, true, false, false]);
    assert!(!choose(128, 1, 256, None).rows_fast);
    // Split calls stay narrow. B 32 x H 128 (128 blocks) fills one wave without splitting.
    assert_eq!(summary(&choose(128, 1, 32768, None)), (64, 256, 32, 0));
    assert_eq!(summary(&choose(128, 16, 8192, None)), (64, 256, 2, 0));
    assert_eq!(summary(&choose(128, 32, 8192, None)), (64, 256, 1, 0));
    let wide = choose(128, 128, 256, None);
    assert_eq!(wide.name(), "mla_decode M=64 BN=32 DV=512 splits=1 w8 rf");
    assert_eq!(wide.chunk, 256);
    let cands = mla::config::candidates(&t, 128, 128, 256, None, wide);
    let got: Vec<_> = cands.iter().map(summary).collect();
    assert_eq!(
        got,
        [(32, 512, 1, 8), (64, 256, 1, 0), (16, 512, 1, 8)].repeat(2)
    );
    let narrow = choose(128, 65, 8192, None);
    assert_eq!(narrow.name(), "mla_decode M=64 BN=64 DV=256 splits=1 rf");
    let cands = mla::config::candidates(&t, 128, 65, 8192, None, narrow);
    let got: Vec<_> = cands.iter().map(summary).collect();
    assert_eq!(
        got,
        [(64, 256, 1, 0), (32, 512, 1, 8), (16, 512, 1, 8)].repeat(2)
    );
    // Split calls: the combine's tile. B 1 x H 128: 32 combine blocks in 64 x 32 tiles, so the
    // table takes 64 x 8 elements per block (128 blocks) as 2 rows x 256 lanes; B 16: 512 blocks
    // at 64 x 32. The tuner times whole row tiles at each lane count, f32 partials (merged in
    // whole rows of as many elements), the wide tile at the default's split count (B 1: 2 blocks
    // per split, whose combine is narrowed to 8 lanes), twice, four times and half the splits, and
    // the default's combine elements as 8 x 64 and 4 x 128.
    let split = choose(128, 1, 32768, None);
    assert!(split.elem_partials);
    assert_eq!((split.combine_rows, split.lanes), (2, 256));
    let cands = mla::config::candidates(&t, 128, 1, 32768, None, split);
    let got: Vec<_> = cands
        .iter()
        .map(|c| (c.dv, c.splits, c.combine_rows, c.lanes, c.elem_partials))
        .collect();
    assert_eq!(
        got,
        [
            (256, 32, 2, 256, true),
            (256, 32, 64, 32, true),
            (256, 32, 64, 16, true),
            (256, 32, 64, 8, true),
            (256, 32, 64, 8, false),
            (512, 32, 64, 8, true),
            (256, 64, 2, 256, true),
            (256, 128, 2, 256, true),
            (256, 16, 2, 256, true),
            (256, 32, 8, 64, true),
            (256, 32, 4, 128, true),
        ]
    );
    let chunks: Vec<_> = cands[6..9].iter().map(|c| c.chunk).collect();
    assert_eq!(chunks, [512, 256, 2048]);
    let names: Vec<_> = cands.iter().map(|c| c.name()).collect();
    for (i, name) in [
        (0, "mla_decode M=64 BN=64 DV=256 splits=32 c2x256 p16"),
        (1, "mla_decode M=64 BN=64 DV=256 splits=32 p16"),
        (3, "mla_decode M=64 BN=64 DV=256 splits=32 c8 p16"),
        (4, "mla_decode M=64 BN=64 DV=256 splits=32 c8"),
        (5, "mla_decode M=64 BN=32 DV=512 splits=32 w8 c8 p16"),
        (10, "mla_decode M=64 BN=64 DV=256 splits=32 c4x128 p16"),
    ] {
        assert_eq!(names[i], name);
    }
    assert!(cands[..6].iter().all(|c| c.splits == split.splits));
    // B 1 x 1k keys: 16 splits of one key tile (64 blocks); the tuner also times 8 (32 and 64
    // would be less than a tile).
    let short = choose(128, 1, 1024, None);
    assert_eq!((short.splits, short.chunk), (16, 64));
    let short_cands = mla::config::candidates(&t, 128, 1, 1024, None, short);
    let resplit: Vec<_> = short_cands
        .iter()
        .filter(|c| c.dv == 256 && c.lanes == short.lanes && c.elem_partials)
        .map(|c| (c.splits, c.chunk))
        .collect();
    assert_eq!(resplit, [(16, 64), (8, 128)]);
    assert!(short_cands.iter().all(|c| c.chunk >= 64));
    // B 32 x 8k: one split (128 blocks on 132 SMs); the tuner times 2 and 4 splits and the wide
    // direct forms. B 16 x 8k: the narrow form splits 2 ways (128 blocks), the wide one too (64);
    // 16-token pages have no wide split.
    let b32 = choose(128, 32, 8192, None);
    let got: Vec<_> = mla::config::candidates(&t, 128, 32, 8192, None, b32)
        .iter()
        .filter(|c| c.rows_fast)
        .map(|c| (c.dv, c.splits))
        .collect();
    assert_eq!(got, [(256, 1), (256, 2), (256, 4), (512, 1), (512, 1)]);
    let b16 = choose(128, 16, 8192, None);
    assert_eq!((b16.combine_rows, b16.lanes), (64, 32));
    let wide_splits: Vec<_> = mla::config::candidates(&t, 128, 16, 8192, None, b16)
        .iter()
        .filter(|c| c.dv == 512)
        .map(|c| (c.splits, c.chunk, c.lanes))
        .collect();
    assert_eq!(wide_splits, [(2, 4096, 32)].repeat(2));
    let paged16 = choose(128, 1, 8192, Some(16));
    assert!(
        mla::config::candidates(&t, 128, 1, 8192, Some(16), paged16)
            .iter()
            .all(|c| c.dv == 256)
    );
    // Combine blocks = (sequence, row tile, part) triples x 64 rows x 256 lanes / the tile's
    // elements. B 4 x H 16 (8 triples): 64 at 64 x 32, 128 at 64 x 16, 256 at 64 x 8 (taken as
    // 2 x 256). B 4 x H 128 (16): 256 at 64 x 16 (4 x 256). B 8 x H 128 (32): 256 at 64 x 32.
    let tile = |c: mla::MlaDecodeConfig| (c.combine_rows, c.lanes);
    assert_eq!(tile(choose(16, 4, 8192, None)), (2, 256));
    assert_eq!(tile(choose(128, 4, 8192, None)), (4, 256));
    assert_eq!(tile(choose(128, 8, 8192, None)), (64, 32));
    let spec = CallSpec::new(
        OP_DECODE,
        "bf16",
        &[&[1, 128, 1, 576], &[1, 32768, 576]],
        false,
    );
    let grids: Vec<_> = spec
        .plan(&t, true)
        .unwrap()
        .launches
        .iter()
        .filter(|l| l.kernel.name() == "mla_decode_combine")
        .map(|l| l.grid)
        .collect();
    let mut want = vec![Some((1, 4, 32)); 11];
    want[1] = Some((1, 4, 8));
    want[2] = Some((1, 4, 16));
    want[5] = Some((1, 2, 64));
    assert_eq!(grids, want);
    // Plans: only the wide kernels carry the hint; a tuning plan holds every candidate.
    let spec = CallSpec::new(
        OP_DECODE,
        "bf16",
        &[&[128, 128, 1, 576], &[128, 1024, 576]],
        false,
    );
    let planned = |all: bool| spec.plan(&t, all).unwrap().launches;
    assert_eq!(planned(false).len(), 1);
    let all = planned(true);
    assert_eq!(all.len(), 6);
    for l in &all {
        let hinted = format!("{:?}", l.kernel.hints()).contains("num_worker_warps_per_cta");
        assert_eq!(hinted, l.config.contains(" w8"), "{}", l.config);
        // Rows-first: (Y, B, 1) instead of (B, Y, 1).
        let y = if l.config.contains("DV=512") { 2 } else { 4 };
        let want = if l.config.ends_with(" rf") {
            (y, 128, 1)
        } else {
            (128, y, 1)
        };
        assert_eq!(l.grid, Some(want), "{}", l.config);
    }
    // A forced split count is never wide, tuning or not.
    let (ops, paged) = described(OP_DECODE, BF16, &[&[128, 128, 1, 576], &[128, 1024, 576]]);
    let one = MlaDecodeOptions {
        splits: Some(1),
        ..Default::default()
    };
    let ops = mla::with_scratch_for(&ops, paged, &t, &one, true).unwrap();
    let p = mla::plan_decode_all(&ops, paged, &t, &one, true).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].config, "mla_decode M=64 BN=64 DV=256 splits=1 rf");
}

#[test]
fn bad_calls_are_typed_errors() {
    let opts = MlaDecodeOptions::default();
    // A split call whose operands lack the scratch's 16-bit view.
    let (ops, paged) = described(OP_DECODE, BF16, &[&[1, 128, 1, 576], &[1, 32768, 576]]);
    let mut ops = mla::with_scratch(&ops, paged, &target(), &opts).unwrap();
    assert_eq!(ops.len(), slot::SCRATCH_ELEM + 1);
    ops.truncate(slot::SCRATCH_ELEM);
    let e = decode_err(&ops, paged, &opts).to_string();
    assert!(
        e.contains("16-bit partials") && e.contains("(use `mla::with_scratch`)"),
        "{e}"
    );
    let base = || described(OP_DECODE, BF16, &[&[2, 16, 1, 576], &[2, 512, 576]]).0;
    let paged = || {
        described(
            OP_DECODE_PAGED,
            BF16,
            &[&[2, 16, 1, 576], &[64, 16, 576], &[2, 32]],
        )
        .0
    };
    let is = |e: OpError, what: &str| {
        let s = e.to_string();
        assert!(s.contains(what), "`{s}` should mention `{what}`");
    };
    // Element types.
    let mut o = base();
    o[slot::Q].dtype = F32;
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::DType { arg: "q", .. }
    ));
    let mut o = base();
    o[slot::CACHE].dtype = F16;
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::DType { arg: "cache", .. }
    ));
    let mut o = base();
    o[slot::SEQ_LENS].dtype = I64;
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::DType {
            arg: "seq_lens",
            ..
        }
    ));
    let mut o = base();
    o[slot::LSE].dtype = BF16;
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::DType { arg: "lse", .. }
    ));
    let mut o = paged();
    o[slot::BLOCK_TABLE].dtype = I64;
    assert!(matches!(
        decode_err(&o, true, &opts),
        OpError::DType {
            arg: "block_table",
            ..
        }
    ));
    // Shapes.
    is(
        decode_err(
            &described(OP_DECODE, BF16, &[&[2, 16, 1, 512], &[2, 64, 512]]).0,
            false,
            &opts,
        ),
        "512 latent + 64 rope",
    );
    is(
        decode_err(
            &described(OP_DECODE, BF16, &[&[2, 16, 1, 576], &[2, 64, 512]]).0,
            false,
            &opts,
        ),
        "cache rows",
    );
    is(
        decode_err(
            &described(OP_DECODE, BF16, &[&[2, 16, 1, 576], &[3, 64, 576]]).0,
            false,
            &opts,
        ),
        "batch (axis 0) of the cache",
    );
    is(
        decode_err(
            &described(OP_DECODE, BF16, &[&[2, 16, 9, 576], &[2, 64, 576]]).0,
            false,
            &opts,
        ),
        "9 queries per sequence",
    );
    let mut o = base();
    o[slot::O].shape = vec![2, 16, 1, 576];
    is(decode_err(&o, false, &opts), "`o` must be [B, H, Sq, 512]");
    let mut o = base();
    o[slot::LSE].shape = vec![2, 16, 2];
    is(decode_err(&o, false, &opts), "`lse` must be");
    let mut o = base();
    o[slot::SEQ_LENS].shape = vec![3];
    is(decode_err(&o, false, &opts), "`seq_lens` length");
    let mut o = base();
    o[slot::Q].expect_rank("t", 4).unwrap();
    o[slot::Q].shape = vec![2, 16, 576];
    o[slot::Q].strides = vec![16 * 576, 576, 1];
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::Rank { arg: "q", .. }
    ));
    is(
        decode_err(
            &described(
                OP_DECODE_PAGED,
                BF16,
                &[&[2, 16, 1, 576], &[64, 48, 576], &[2, 4]],
            )
            .0,
            true,
            &opts,
        ),
        "block size 48",
    );
    let mut o = paged();
    o[slot::BLOCK_TABLE].shape = vec![3, 32];
    o[slot::BLOCK_TABLE].strides = vec![32, 1];
    is(decode_err(&o, true, &opts), "`block_table` rows");
    // Layouts: heads and queries that do not merge; a strided last axis.
    let mut o = described(OP_DECODE, BF16, &[&[2, 16, 2, 576], &[2, 64, 576]]).0;
    o[slot::Q].strides = vec![16 * 2 * 1152, 1152, 16 * 1152, 1];
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::Layout { arg: "q", .. }
    ));
    let mut o = base();
    o[slot::CACHE].strides = vec![512 * 1152, 1152, 2];
    assert!(matches!(
        decode_err(&o, false, &opts),
        OpError::Layout { arg: "cache", .. }
    ));
    // Heads strided by more than a row are fine when Sq is 1 (the merged axis is the head axis).
    let mut o = base();
    o[slot::Q].strides = vec![16 * 1024, 1024, 1024, 1];
    let o = mla::with_scratch(&o, false, &target(), &opts).unwrap();
    assert_eq!(
        mla::plan_decode(&o, false, &target(), &opts).unwrap().len(),
        2
    );
    // A split call without its scratch is refused.
    is(decode_err(&base(), false, &opts), "scratch");
    // Scale.
    for s in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let bad = MlaDecodeOptions {
            scale: Some(s),
            splits: None,
        };
        is(decode_err(&base(), false, &bad), "scale");
    }
    // Empty batch and no queries: nothing to launch.
    for (q, c) in [
        ([0i64, 16, 1, 576], [0i64, 64, 576]),
        ([2, 16, 0, 576], [2, 64, 576]),
    ] {
        let o = described(OP_DECODE, BF16, &[&q, &c]).0;
        assert!(
            mla::plan_decode(&o, false, &target(), &opts)
                .unwrap()
                .is_empty()
        );
    }
    // Registry specs of the wrong arity.
    assert!(mla::described_call(OP_DECODE, BF16, &[vec![1, 16, 1, 576]]).is_err());
    assert!(
        mla::described_call(
            OP_DECODE_PAGED,
            BF16,
            &[vec![1, 16, 1, 576], vec![4, 16, 576]]
        )
        .is_err()
    );

    // Prefill.
    let pq = [2i64, 8, 100, 192];
    is(
        prefill_err(
            &prefill_ops(BF16, &[2, 8, 100, 128], &[2, 8, 100, 128]),
            false,
        ),
        "192",
    );
    let mut o = prefill_ops(BF16, &pq, &pq);
    o[prefill_slot::V].shape = vec![2, 8, 100, 192];
    is(prefill_err(&o, false), "`v` must be [B, Hkv, S_k, 128]");
    let mut o = prefill_ops(BF16, &pq, &pq);
    o[prefill_slot::O].shape = vec![2, 8, 100, 192];
    is(prefill_err(&o, true), "`o` must be [B, H, S, 128]");
    is(
        prefill_err(&prefill_ops(BF16, &pq, &[2, 3, 100, 192]), false),
        "divide",
    );
    is(
        prefill_err(&prefill_ops(BF16, &pq, &[1, 8, 100, 192]), false),
        "batch of `k`",
    );
    let mut o = prefill_ops(BF16, &pq, &pq);
    o[prefill_slot::K].dtype = F16;
    assert!(matches!(
        prefill_err(&o, false),
        OpError::DType { arg: "k", .. }
    ));
    let mut o = prefill_ops(F32, &pq, &pq);
    o[prefill_slot::LSE].dtype = F32;
    assert!(matches!(
        prefill_err(&o, false),
        OpError::DType { arg: "q", .. }
    ));
    let mut o = prefill_ops(BF16, &pq, &pq);
    o[prefill_slot::Q].strides[3] = 2;
    assert!(matches!(
        prefill_err(&o, false),
        OpError::Layout { arg: "q", .. }
    ));
    let bad = MlaPrefillOptions {
        causal: false,
        scale: Some(0.0),
    };
    assert!(mla::plan_prefill(&prefill_ops(BF16, &pq, &pq), &target(), &bad).is_err());
    is(
        prefill_err(&prefill_ops(BF16, &pq, &[2, 8, 0, 192]), false),
        "no keys",
    );
    let empty = prefill_ops(BF16, &[0, 8, 100, 192], &[0, 8, 100, 192]);
    let d = MlaPrefillOptions::default();
    assert!(mla::plan_prefill(&empty, &target(), &d).unwrap().is_empty());
    // Strided (e.g. [B, S, H, D] storage) is accepted.
    let mut o = prefill_ops(BF16, &pq, &pq);
    o[prefill_slot::Q].strides = vec![100 * 8 * 192, 192, 8 * 192, 1];
    assert!(mla::plan_prefill(&o, &target(), &d).is_ok());
}

/// A latent cache `[B, s, 576]` paged into `bs`-row blocks in a scrambled order: the blocks, the
/// table `[B, s / bs]`.
fn paginate(c: &[f32], b: usize, s: usize, bs: usize) -> (Vec<f32>, Vec<i32>, usize) {
    let per = s.div_ceil(bs);
    let n = b * per;
    // Block i of the whole cache goes to slot (i·m + 3) mod n, with m the first of a few primes that
    // is coprime with n, so the map is a permutation (at 16-token pages of 1000 keys, n = 4 · 63 is a
    // multiple of 7: the H200 run of 2026-12-02 caught a test that used 7 for every n).
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let m = [7usize, 11, 13, 17, 19, 23]
        .into_iter()
        .find(|&m| gcd(m, n) == 1)
        .expect("a multiplier coprime with the page count");
    let mut out = vec![f32::NAN; n * bs * 576];
    let mut table = vec![-1i32; b * per];
    for bi in 0..b {
        for j in 0..per {
            let slot = ((bi * per + j) * m + 3) % n;
            table[bi * per + j] = slot as i32;
            for r in 0..bs {
                let p = j * bs + r;
                if p < s {
                    let src = (bi * s + p) * 576;
                    out[(slot * bs + r) * 576..(slot * bs + r + 1) * 576]
                        .copy_from_slice(&c[src..src + 576]);
                }
            }
        }
    }
    let mut seen = table.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), table.len(), "paginate: two blocks share a slot");
    (out, table, per)
}

/// A decode problem with NaN past every length: q, the contiguous cache, the lengths.
fn decode_problem(b: usize, h: usize, sq: usize, s: usize, lens: &[i32]) -> (Vec<f32>, Vec<f32>) {
    let q = data(b * h * sq * 576, 21);
    let mut c = data(b * s * 576, 22);
    for (bi, &l) in lens.iter().enumerate() {
        c[(bi * s + l as usize) * 576..(bi + 1) * s * 576].fill(f32::NAN);
    }
    (q, c)
}

#[test]
fn decode_reference_is_dense_attention_on_the_expanded_keys() {
    use cutile_kernels::attention::decode::{CacheRef, decode_reference};
    let (b, h, s) = (3usize, 4usize, 70usize);
    let lens = [70i32, 0, 33];
    for sq in [1usize, 2] {
        let (q, c) = decode_problem(b, h, sq, s, &lens);
        let scale = 0.07f32;
        let cache = LatentCacheRef::Contiguous { c: &c, s_max: s };
        let (o, lse) = mla_decode_reference(&q, &cache, &lens, b, h, sq, scale);
        assert!(
            o.iter().all(|x| x.is_finite()),
            "NaN past a length was read"
        );
        // Dense: one KV head, K = [c, k_rope], V = [c, 0] (576 wide), output's first 512 columns.
        let mut v = c.clone();
        for row in v.chunks_mut(576) {
            row[512..].fill(0.0);
        }
        let dense = CacheRef::Contiguous {
            k: &c,
            v: &v,
            hkv: 1,
            s_max: s,
        };
        let (od, ld) = decode_reference(&q, &dense, &lens, b, h, sq, 576, scale);
        for r in 0..b * h * sq {
            for j in 0..512 {
                assert!((o[r * 512 + j] - od[r * 576 + j]).abs() < 1e-5);
            }
            assert!(od[r * 576 + 512..(r + 1) * 576].iter().all(|&x| x == 0.0));
            assert!(lse[r] == ld[r] || (lse[r] - ld[r]).abs() < 1e-5);
        }
        // Length 0: zeros and −inf.
        let r0 = h * sq;
        assert!(o[r0 * 512..2 * r0 * 512].iter().all(|&x| x == 0.0));
        assert!(lse[r0..2 * r0].iter().all(|&x| x == f32::NEG_INFINITY));
        // Paged (16-row blocks, scrambled) equals contiguous.
        let (pc, table, per) = paginate(&c, b, s, 16);
        let paged = LatentCacheRef::Paged {
            c: &pc,
            block_size: 16,
            block_table: &table,
            max_blocks: per,
        };
        let (op, lp) = mla_decode_reference(&q, &paged, &lens, b, h, sq, scale);
        assert_eq!(op, o);
        assert_eq!(lp, lse);
        // The speculative rule: with Sq 2, query 0 of a length-1 sequence sees nothing.
        let (o1, l1) = mla_decode_reference(&q, &cache, &[1, 1, 1], b, h, sq, scale);
        if sq == 2 {
            assert_eq!(l1[0], f32::NEG_INFINITY);
            assert!(l1[1].is_finite());
            assert!(o1[..512].iter().all(|&x| x == 0.0));
        } else {
            // One key: the output is that key's latent row, the LSE its score.
            let sc: f64 = (0..576).map(|j| q[j] as f64 * c[j] as f64).sum::<f64>() * scale as f64;
            assert!((l1[0] as f64 - sc).abs() < 1e-5);
            assert!((o1[7] - c[7]).abs() < 1e-6);
        }
    }
}

#[test]
fn prefill_reference_is_dense_attention_with_the_value_padded() {
    use cutile_kernels::attention::attention_reference;
    let (b, h, s) = (2usize, 3usize, 37usize);
    let q = data(b * h * s * 192, 31);
    let k = data(b * h * s * 192, 32);
    let v = data(b * h * s * 128, 33);
    let mut vp = vec![0f32; b * h * s * 192];
    for (i, row) in v.chunks(128).enumerate() {
        vp[i * 192..i * 192 + 128].copy_from_slice(row);
    }
    for causal in [false, true] {
        let (o, lse) = mla_prefill_reference(&q, &k, &v, b, h, h, s, s, causal, 0.072);
        let dense = attention_reference(&q, &k, &vp, s, s, 192, 0.072, causal);
        for r in 0..b * h * s {
            for j in 0..128 {
                assert!((o[r * 128 + j] - dense[r * 192 + j]).abs() < 1e-5);
            }
        }
        assert!(lse.iter().all(|x| x.is_finite()));
        if causal {
            // Row 0 sees key 0 only: its output is v[0], its LSE the one score.
            assert!((o[3] - v[3]).abs() < 1e-6);
            let sc: f64 = (0..192).map(|j| q[j] as f64 * k[j] as f64).sum::<f64>() * 0.072;
            assert!((lse[0] as f64 - sc).abs() < 1e-5);
        }
    }
    // GQA: two query heads per KV head read the same keys.
    let kg = data(b * s * 192, 34);
    let vg = data(b * s * 128, 35);
    let (o, _) = mla_prefill_reference(&q[..b * 2 * s * 192], &kg, &vg, b, 2, 1, s, s, false, 0.1);
    let (o0, _) = mla_prefill_reference(
        &q[..s * 192],
        &kg[..s * 192],
        &vg[..s * 128],
        1,
        1,
        1,
        s,
        s,
        false,
        0.1,
    );
    assert_eq!(&o[..s * 128], &o0[..]);
}

/// Ragged decode calls through the host API on the GPU: both caches, split and not, H 16 and 128,
/// Sq 1 and 2, NaN past every length.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_mla_decode_matches_the_reference() {
    use cutile::runtime::Tensor;
    use half::bf16;
    use mla::LatentCache;
    let Some((dev, stream)) = common::gpu_device("gpu_mla_decode_matches_the_reference") else {
        return;
    };
    let (b, s) = (4usize, 1000usize);
    let lens = [1000i32, 0, 1, 517];
    let round = |x: &mut Vec<f32>| x.iter_mut().for_each(|e| *e = bf16::from_f32(*e).to_f32());
    for (h, sq) in [(16usize, 1usize), (128, 1), (16, 2)] {
        let (mut q, mut c) = decode_problem(b, h, sq, s, &lens);
        round(&mut q);
        round(&mut c);
        let scale = mla::DEFAULT_SCALE;
        let cache = LatentCacheRef::Contiguous { c: &c, s_max: s };
        let (want_o, want_l) = mla_decode_reference(&q, &cache, &lens, b, h, sq, scale);
        let up = |x: &[f32], shape: &[i64]| {
            let h: Vec<bf16> = x.iter().map(|&e| bf16::from_f32(e)).collect();
            Tensor::from_host(&dev, &h, shape).unwrap()
        };
        let qshape = [b as i64, h as i64, sq as i64, 576];
        let oshape = [b as i64, h as i64, sq as i64, 512];
        let tq = up(&q, &qshape);
        let tc = up(&c, &[b as i64, s as i64, 576]);
        let tl = Tensor::from_host(&dev, &lens, &[b as i64]).unwrap();
        for bs in [16usize, 64, 256] {
            let (pc, table, per) = paginate(&c, b, s, bs);
            let tpc = up(&pc, &[(pc.len() / (bs * 576)) as i64, bs as i64, 576]);
            let tt = Tensor::from_host(&dev, &table, &[b as i64, per as i64]).unwrap();
            for paged in [false, true] {
                if !paged && bs != 64 {
                    continue;
                }
                for splits in [None, Some(1), Some(5)] {
                    let mut o = Tensor::<bf16>::zeros(&dev, &oshape).unwrap();
                    let mut l = Tensor::<f32>::zeros(&dev, &qshape[..3]).unwrap();
                    let lc = if paged {
                        LatentCache::Paged {
                            cache: &tpc,
                            block_table: &tt,
                        }
                    } else {
                        LatentCache::Contiguous(&tc)
                    };
                    let opts = MlaDecodeOptions {
                        scale: None,
                        splits,
                    };
                    mla::mla_decode(&stream, &tq, &lc, &tl, &opts, &mut o, Some(&mut l))
                        .unwrap()
                        .wait()
                        .unwrap();
                    let what = format!("H {h} Sq {sq} paged {paged} bs {bs} splits {splits:?}");
                    let got: Vec<f32> = o.to_host().unwrap().iter().map(|x| x.to_f32()).collect();
                    let err = common::max_abs_err(&got, &want_o);
                    assert!(err < 2e-2, "{what}: o err {err}");
                    let gl = l.to_host().unwrap();
                    for (g, w) in gl.iter().zip(&want_l) {
                        assert!((g == w) || (g - w).abs() < 1e-2, "{what}: lse {g} vs {w}");
                    }
                }
            }
        }
    }
}

/// Prefill through the host API on the GPU, causal and not, S 1 and ragged tails, LSE.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_mla_prefill_matches_the_reference() {
    use cutile::runtime::Tensor;
    use half::bf16;
    let Some((dev, stream)) = common::gpu_device("gpu_mla_prefill_matches_the_reference") else {
        return;
    };
    let round = |x: &mut Vec<f32>| x.iter_mut().for_each(|e| *e = bf16::from_f32(*e).to_f32());
    for (b, h, s) in [(1usize, 4usize, 1usize), (2, 3, 130), (1, 2, 257)] {
        let mut q = data(b * h * s * 192, 41);
        let mut k = data(b * h * s * 192, 42);
        let mut v = data(b * h * s * 128, 43);
        round(&mut q);
        round(&mut k);
        round(&mut v);
        let up = |x: &[f32], shape: &[i64]| {
            let hv: Vec<bf16> = x.iter().map(|&e| bf16::from_f32(e)).collect();
            Tensor::from_host(&dev, &hv, shape).unwrap()
        };
        let (b_, h_, s_) = (b as i64, h as i64, s as i64);
        let tq = up(&q, &[b_, h_, s_, 192]);
        let tk = up(&k, &[b_, h_, s_, 192]);
        let tv = up(&v, &[b_, h_, s_, 128]);
        for causal in [false, true] {
            let (want_o, want_l) =
                mla_prefill_reference(&q, &k, &v, b, h, h, s, s, causal, mla::DEFAULT_SCALE);
            let mut o = Tensor::<bf16>::zeros(&dev, &[b_, h_, s_, 128]).unwrap();
            let mut l = Tensor::<f32>::zeros(&dev, &[b_, h_, s_]).unwrap();
            let opts = MlaPrefillOptions {
                causal,
                scale: None,
            };
            mla::mla_prefill(&stream, &tq, &tk, &tv, &opts, &mut o, Some(&mut l))
                .unwrap()
                .wait()
                .unwrap();
            let got: Vec<f32> = o.to_host().unwrap().iter().map(|x| x.to_f32()).collect();
            let err = common::max_abs_err(&got, &want_o);
            assert!(err < 2e-2, "B {b} H {h} S {s} causal {causal}: o err {err}");
            let gl = l.to_host().unwrap();
            let lerr = common::max_abs_err(&gl, &want_l);
            assert!(
                lerr < 1e-2,
                "B {b} H {h} S {s} causal {causal}: lse err {lerr}"
            );
        }
    }
}

/// The wide split kernel (`mla_decode_partial`, DV 512, key tile 32, 8 worker warps) keeps the direct
/// kernel's sm_90 budget only with 16-bit partials: no stack frame and at most 168 registers (384
/// threads), where its f32-partial form got 212 (256 threads, 1.6–2.2x slower on an H100, session
/// 39), which is why no candidate stores f32 at DV 512. Checked on the B 1 x 32k call's candidates.
#[test]
fn sm90_wide_split_kernel_fits_384_threads_with_16_bit_partials() {
    let test = "attention_mla sm90_wide_split_kernel_fits_384_threads_with_16_bit_partials";
    let Some(tileiras) = common::tileiras(test) else {
        return;
    };
    let t = target();
    let spec = CallSpec::new(
        OP_DECODE,
        "bf16",
        &[&[1, 128, 1, 576], &[1, 32768, 576]],
        false,
    );
    let planned = spec.plan(&t, true).unwrap();
    let wide: Vec<_> = planned
        .launches
        .iter()
        .filter(|l| l.kernel.name() == "mla_decode_partial" && l.config.contains("DV=512"))
        .collect();
    assert!(!wide.is_empty(), "no wide split candidate");
    for l in wide {
        assert!(l.config.ends_with(" p16"), "{}", l.config);
        let s = common::specialize_launch(&planned, l);
        let cubin = common::compile_cached(&tileiras, &s, GpuArch::Sm90).unwrap();
        let (regs, stack, smem, _) = common::resources(&cubin);
        println!(
            "{}: {regs} registers, {stack} B stack, {smem} B static smem",
            l.config
        );
        assert_eq!(stack, 0, "{}: {stack} bytes of stack frame", l.config);
        assert!(
            regs <= 168,
            "{}: {regs} registers (> 168: < 384 threads)",
            l.config
        );
    }
}
