//! Attention decode without a GPU, and on one when present:
//!
//! - every launch of every representative call (every tuning candidate, the one-launch
//!   `decode_split_last` among them) specializes, verifies and, with tileiras, compiles for sm_90 (each
//!   kernel also for sm_80, sm_100 and sm_120);
//! - bad calls are typed errors naming the cause; an empty batch plans nothing; the split count follows
//!   the SM count and the cache capacity, one split skips the combine;
//! - the one-launch split is a tuning candidate (never the default): one launch with the per-`(b,
//!   kvh)` counters, whose atomic is acq_rel at device scope in the IR;
//! - CPU reference: equals dense attention on the gathered keys (contiguous and paged, GQA, the causal
//!   rule of speculative queries), a length of 0 gives zeros and LSE −inf, paged equals contiguous on
//!   the same data, and LSE-merging references of disjoint key ranges gives the whole (the combine's
//!   rule);
//! - GPU (ignored without `--include-ignored`, skipped without a GPU): ragged calls through the host API,
//!   both caches, split and not, two launches and one, unused cache entries and pages filled with NaN,
//!   against the reference.

#![allow(clippy::unwrap_used)]

use crate::common;

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
    let kernels = common::compile_every_launch(
        "attention_decode compile",
        &decode::representative_calls(),
        common::OtherArchsPer::Kernel,
    )
    .kernels;
    // The calls (with their tuning candidates) cover the four kernels.
    for k in [
        "decode_partial",
        "decode_combine",
        "decode_direct",
        "decode_split_last",
    ] {
        assert!(kernels.contains(k), "{k} not covered: {kernels:?}");
    }
    // The catalog (compiled for four archs in CI) gets a handful of specializations.
    let jobs = cutile_kernels::catalog::dsl_jobs(&decode::representative_calls(), false).unwrap();
    println!("attention decode catalog specializations: {}", jobs.len());
    assert!(jobs.len() <= 8, "{} catalog specializations", jobs.len());
}

/// The launches of a registry call on sm_90.
fn launches(op: &str, dt: &str, shapes: &[&[i64]]) -> Vec<cutile_kernels::op::PlannedLaunch> {
    CallSpec::new(op, dt, shapes, false)
        .plan(&target(), false)
        .unwrap_or_else(|e| panic!("{op} {shapes:?}: {e}"))
        .launches
}

#[test]
fn splits_follow_the_sm_count_and_the_capacity() {
    // B = 1, 8 KV heads, 32k keys: one wave of 132 SMs → 16 splits (128 blocks), combine after, its
    // merge of each KV head spread over D / 32 = 4 lane slices.
    let p = launches(OP, "bf16", &[&[1, 32, 1, 128], &[1, 8, 32768, 128]]);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].kernel.name(), "decode_partial");
    assert_eq!(p[0].grid, Some((1, 8, 16)));
    assert_eq!(p[1].kernel.name(), "decode_combine");
    assert_eq!(p[1].grid, Some((1, 8, 4)));
    // The chunk (an i32 argument) times the splits covers the capacity, a multiple of BN = 64.
    let chunk = p[0]
        .args
        .iter()
        .find_map(|a| match a {
            cutile_kernels::op::PlannedArg::I32(c) => Some(*c as i64),
            _ => None,
        })
        .unwrap();
    assert_eq!(chunk % 64, 0);
    assert!(chunk * 16 >= 32768 && chunk * 15 < 32768, "chunk {chunk}");
    // B = 16: 128 blocks already fill the SMs once: one split, no combine.
    let p = launches(OP, "bf16", &[&[16, 32, 1, 128], &[16, 8, 8192, 128]]);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].grid, Some((16, 8, 1)));
    // B = 4: 32 blocks → 4 splits.
    let p = launches(OP, "bf16", &[&[4, 32, 1, 128], &[4, 8, 8192, 128]]);
    assert_eq!(p[0].grid, Some((4, 8, 4)));
    // B = 64: 512 blocks: one split, no combine.
    let p = launches(OP, "bf16", &[&[64, 32, 1, 128], &[64, 8, 4096, 128]]);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "decode_direct");
    assert_eq!(p[0].grid, Some((64, 8, 1)));
    // A short cache is not split below 256 keys per split.
    let p = launches(OP, "bf16", &[&[1, 8, 1, 64], &[1, 8, 300, 64]]);
    assert_eq!(p[0].grid, Some((1, 8, 2)));
    let p = launches(OP, "bf16", &[&[1, 8, 1, 64], &[1, 8, 100, 64]]);
    assert_eq!(p.len(), 1);
    // Pages under 64 tokens: a key tile of 64 keys loaded page by page; larger pages: 64 keys of one.
    for (bs, want) in [(16, "BN=64 pages=4x16 "), (32, "BN=64 pages=2x32 ")] {
        let p = launches(
            OP_PAGED,
            "bf16",
            &[&[2, 32, 1, 128], &[100, bs, 8, 128], &[2, 50]],
        );
        assert!(p[0].config.contains(want), "{}", p[0].config);
    }
    let p = launches(
        OP_PAGED,
        "bf16",
        &[&[2, 32, 1, 128], &[100, 64, 8, 128], &[2, 50]],
    );
    assert!(!p[0].config.contains("pages"), "{}", p[0].config);
    let p = launches(
        OP_PAGED,
        "bf16",
        &[&[2, 32, 1, 128], &[100, 256, 8, 128], &[2, 50]],
    );
    assert!(p[0].config.contains("BN=64"), "{}", p[0].config);
    // Query rows: ratio · Sq padded to a power of two (at least 16).
    for (hq, hkv, sq, m) in [
        (32, 8, 1, 16),
        (32, 8, 4, 16),
        (32, 8, 8, 32),
        (64, 8, 8, 64),
        (32, 2, 8, 128),
    ] {
        let p = launches(OP, "f16", &[&[1, hq, sq, 64], &[1, hkv, 64, 64]]);
        assert!(
            p[0].config.contains(&format!("M={m} ")),
            "{hq}/{hkv}x{sq}: {}",
            p[0].config
        );
    }
    // A forced split count.
    let (ops, paged) = described(OP, BF16, &[&[1, 32, 1, 128], &[1, 8, 32768, 128]]);
    let one = DecodeOptions {
        splits: Some(1),
        ..Default::default()
    };
    let p = decode::plan(&ops, paged, &target(), &one).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "decode_direct");
}

/// The tuner's candidates: the table's first, then more and fewer splits with at least 128 keys
/// each, for contiguous caches also the 128-key tile, then two blocks per SM (the occupancy hint) at
/// twice and four times the splits, then the one-launch twin of each that splits, and a bundle
/// planned for a tuning run holds the kernels of every candidate.
#[test]
fn tuning_candidates_vary_the_split_count_and_the_key_tile() {
    let (ops, paged) = described(OP, BF16, &[&[1, 32, 1, 128], &[1, 8, 32768, 128]]);
    let cfg = decode::config_of(&ops, paged, &target(), &DecodeOptions::default())
        .unwrap()
        .unwrap();
    // A split call: the table neither merges in one launch nor hints the occupancy.
    assert!(!cfg.one_launch && cfg.occupancy == 0, "{cfg:?}");
    // A paged cache: the split count, two blocks per SM, then the one-launch twins in the same order.
    let cands = decode::config::candidates(cfg, 32768, false);
    assert_eq!(cands[0], cfg);
    let splits: Vec<(i64, i64, bool)> = cands
        .iter()
        .map(|c| (c.splits, c.occupancy, c.one_launch))
        .collect();
    assert_eq!(
        splits,
        [
            (16, 0, false),
            (32, 0, false),
            (64, 0, false),
            (8, 0, false),
            (32, 2, false),
            (64, 2, false),
            (16, 0, true),
            (32, 0, true),
            (64, 0, true),
            (8, 0, true),
            (32, 2, true),
            (64, 2, true)
        ]
    );
    assert_eq!(cands[4].name(), "attention_decode M=16 BN=64 splits=32 o2");
    for (two, one) in cands[..6].iter().zip(&cands[6..]) {
        assert_eq!(
            decode::config::DecodeConfig {
                one_launch: false,
                ..*one
            },
            *two
        );
        assert_eq!(one.name(), format!("{} last", two.name()));
    }
    // A contiguous one: also the 128-key tile at 16 and 32 splits, before the two-per-SM ones and
    // the eight twins.
    let wide = decode::config::candidates(cfg, 32768, true);
    assert_eq!(wide.len(), 16);
    assert_eq!(wide[..4], cands[..4]);
    let tiles: Vec<(i64, i64, i64, i64, bool)> = wide[4..]
        .iter()
        .map(|c| (c.bn, c.pb, c.splits, c.occupancy, c.one_launch))
        .collect();
    assert_eq!(
        tiles,
        [
            (128, 128, 16, 0, false),
            (128, 128, 32, 0, false),
            (64, 64, 32, 2, false),
            (64, 64, 64, 2, false),
            (64, 64, 16, 0, true),
            (64, 64, 32, 0, true),
            (64, 64, 64, 0, true),
            (64, 64, 8, 0, true),
            (128, 128, 16, 0, true),
            (128, 128, 32, 0, true),
            (64, 64, 32, 2, true),
            (64, 64, 64, 2, true)
        ]
    );
    for c in &wide {
        assert_eq!(c.m, cfg.m);
        assert!(c.chunk >= 128 && c.chunk % c.bn == 0, "{c:?}");
        assert!(
            c.splits * c.chunk >= 32768 && (c.splits - 1) * c.chunk < 32768,
            "{c:?}"
        );
    }
    for c in &cands {
        assert_eq!((c.m, c.bn, c.pb), (cfg.m, cfg.bn, cfg.pb));
        assert!(c.chunk >= 128 && c.chunk % c.bn == 0, "{c:?}");
        assert!(
            c.splits * c.chunk >= 32768 && (c.splits - 1) * c.chunk < 32768,
            "{c:?}"
        );
    }
    // A short cache: no split under 128 keys.
    let short = decode::config::candidates(
        decode::config::DecodeConfig {
            m: 16,
            bn: 64,
            pb: 64,
            splits: 2,
            chunk: 256,
            one_launch: false,
            occupancy: 0,
        },
        300,
        true,
    );
    assert!(
        short.iter().all(|c| c.splits == 1 || c.chunk >= 128),
        "{short:?}"
    );
    // Pages under the key tile: every candidate keeps the page-sized loads of the table's choice.
    let paged16 = decode::config::DecodeConfig { pb: 16, ..cfg };
    let small = decode::config::candidates(paged16, 32768, false);
    assert_eq!(small.len(), 12);
    assert!(small.iter().all(|c| (c.bn, c.pb) == (64, 16)), "{small:?}");
    // Its one split gets no twin (nothing to merge); the two splits get one.
    assert!(
        short.iter().all(|c| !c.one_launch || c.splits > 1),
        "{short:?}"
    );
    assert!(short.iter().any(|c| c.one_launch), "{short:?}");
    // Tuning plans: one direct call (B = 64) also gets the split kernels of its candidates.
    let spec = cutile_kernels::op::CallSpec::new(
        OP,
        "bf16",
        &[&[64, 32, 1, 128], &[64, 8, 4096, 128]],
        false,
    );
    let names = |all: bool| -> Vec<String> {
        spec.plan(&target(), all)
            .unwrap()
            .launches
            .iter()
            .map(|l| l.kernel.name().to_string())
            .collect()
    };
    assert_eq!(names(false), ["decode_direct"]);
    let all = names(true);
    assert!(all.contains(&"decode_partial".to_string()), "{all:?}");
    assert!(all.contains(&"decode_combine".to_string()), "{all:?}");
    assert!(all.contains(&"decode_split_last".to_string()), "{all:?}");
    // An unsplit call runs two blocks per SM by default; one block per SM is its candidate.
    let configs = |all: bool| -> Vec<String> {
        spec.plan(&target(), all)
            .unwrap()
            .launches
            .iter()
            .filter(|l| l.kernel.name() == "decode_direct")
            .map(|l| l.config.clone())
            .collect()
    };
    assert_eq!(configs(false), ["attention_decode M=16 BN=64 splits=1 o2"]);
    assert!(
        configs(true).contains(&"attention_decode M=16 BN=64 splits=1".to_string()),
        "{:?}",
        configs(true)
    );
    // B 16 × Hkv 8 is 128 blocks on 132 SMs: no two share an SM, so one block per SM stays.
    let b16 = CallSpec::new(OP, "bf16", &[&[16, 32, 1, 128], &[16, 8, 4096, 128]], false);
    let l = &b16.plan(&target(), false).unwrap().launches[0];
    assert_eq!(
        (l.kernel.name(), l.config.as_str()),
        ("decode_direct", "attention_decode M=16 BN=64 splits=1")
    );
}

/// The argument of a planned launch as (operand, shape, output), for tensor arguments.
fn tensor_arg(a: &cutile_kernels::op::PlannedArg) -> (usize, Vec<i64>, bool) {
    match a {
        cutile_kernels::op::PlannedArg::Tensor {
            operand,
            shape,
            output,
            ..
        } => (*operand, shape.clone(), *output),
        other => panic!("not a tensor: {other:?}"),
    }
}

/// The one-launch split: planned only for the tuner (or when forced), as one `decode_split_last`
/// launch over the splits' grid whose last three arguments are the partials and one counter per `(b,
/// kvh)`; without the counters the call is a typed error.
#[test]
fn one_launch_split_is_a_tuning_candidate_with_per_head_counters() {
    let t = target();
    let (ops, paged) = described(OP, BF16, &[&[2, 32, 1, 128], &[2, 8, 4096, 128]]);
    // The default: partials then combine, and no counters described.
    let opts = DecodeOptions::default();
    let plain = decode::with_scratch(&ops, paged, &t, &opts).unwrap();
    assert_eq!(plain.len(), slot::SCRATCH + 1);
    let p = decode::plan(&plain, paged, &t, &opts).unwrap();
    let names: Vec<&str> = p.iter().map(|l| l.kernel.name()).collect();
    assert_eq!(names, ["decode_partial", "decode_combine"]);
    assert!(!p[0].config.ends_with(" last"), "{}", p[0].config);
    // A tuning bundle: the counters follow the scratch, one per (b, kvh); each one-launch twin is a
    // single launch with the two-launch twin's grid.
    let tuned = decode::with_scratch_for(&ops, paged, &t, &opts, true).unwrap();
    assert_eq!(tuned.len(), slot::COUNTERS + 1);
    assert_eq!(tuned[slot::COUNTERS].dtype, I32);
    assert_eq!(tuned[slot::COUNTERS].shape, [16]);
    let all = decode::plan_all(&tuned, paged, &t, &opts, true).unwrap();
    let last: Vec<_> = all
        .iter()
        .filter(|l| l.kernel.name() == "decode_split_last")
        .collect();
    let partials = all
        .iter()
        .filter(|l| l.kernel.name() == "decode_partial")
        .count();
    assert_eq!(last.len(), partials, "a twin per split candidate");
    for l in &last {
        assert!(l.config.ends_with(" last"), "{}", l.config);
        let twin = all
            .iter()
            .find(|p| {
                p.kernel.name() == "decode_partial" && l.config == format!("{} last", p.config)
            })
            .unwrap_or_else(|| panic!("no two-launch twin of {}", l.config));
        assert_eq!(l.grid, twin.grid);
        let (_, _, splits) = l.grid.unwrap();
        assert!(splits > 1, "{}", l.config);
        let tail: Vec<_> = l.args[l.args.len() - 3..].iter().map(tensor_arg).collect();
        let m = twin.args.len();
        let want: Vec<_> = twin.args[m - 2..].iter().map(tensor_arg).collect();
        assert_eq!(
            tail[..2],
            want[..],
            "{}: the partials as decode_partial's",
            l.config
        );
        assert_eq!(tail[2], (slot::COUNTERS, vec![16], true), "{}", l.config);
        // o and lse are written by the same launch.
        let outs: Vec<_> = l.args[l.args.len() - 5..l.args.len() - 3]
            .iter()
            .map(tensor_arg)
            .collect();
        assert_eq!(outs[0].0, slot::O);
        assert_eq!(outs[1].0, slot::LSE);
        assert!(outs.iter().all(|o| o.2));
    }
    // Forced: one launch; with one split the direct kernel (nothing to merge).
    let forced = DecodeOptions {
        one_launch: true,
        ..Default::default()
    };
    let ops1 = decode::with_scratch(&ops, paged, &t, &forced).unwrap();
    let p = decode::plan(&ops1, paged, &t, &forced).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "decode_split_last");
    assert_eq!(p[0].grid, Some((2, 8, 8)));
    assert!(p[0].config.ends_with("splits=8 last"), "{}", p[0].config);
    let one_split = DecodeOptions {
        splits: Some(1),
        one_launch: true,
        ..Default::default()
    };
    let p = decode::plan(&ops, paged, &t, &one_split).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "decode_direct");
    assert!(!p[0].config.ends_with(" last"), "{}", p[0].config);
    // Paged: the same kernel over the paged cache.
    let (pops, pp) = described(
        OP_PAGED,
        BF16,
        &[&[2, 32, 1, 128], &[600, 16, 8, 128], &[2, 256]],
    );
    let pops = decode::with_scratch(&pops, pp, &t, &forced).unwrap();
    let p = decode::plan(&pops, pp, &t, &forced).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].kernel.name(), "decode_split_last");
    assert!(p[0].config.contains("pages=4x16"), "{}", p[0].config);
    // Without the counters (the scratch alone), or too few of them: a typed error naming them.
    let no_counters = &ops1[..slot::COUNTERS];
    let e = plan_err(no_counters, paged, &forced);
    assert!(e.to_string().contains("counters"), "{e}");
    let mut few = ops1.clone();
    few[slot::COUNTERS].shape = vec![15];
    let e = plan_err(&few, paged, &forced);
    assert!(e.to_string().contains("16 i32 counters"), "{e}");
}

/// The one-launch kernel's counter: one atomic add, acq_rel at device scope (the partial stores
/// stay before it, the last block's loads of the partials after it).
#[test]
fn one_launch_counter_is_an_acq_rel_device_atomic_over_plain_accesses() {
    let (call, paged) = described(OP, BF16, &[&[2, 32, 1, 128], &[2, 8, 4096, 128]]);
    let ir = |opts: &DecodeOptions| {
        let ops = decode::with_scratch(&call, paged, &target(), opts).unwrap();
        let p = decode::plan(&ops, paged, &target(), opts).unwrap();
        // SAFETY: described operands are never launched.
        let args = unsafe { cutile_kernels::op::describe(&p[0], &ops) };
        let s = p[0].kernel.specialize(&args.tensor_metas()).unwrap();
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5).unwrap();
        (p[0].kernel.name().to_string(), s.ir_text())
    };
    let (name, text) = ir(&DecodeOptions {
        one_launch: true,
        ..Default::default()
    });
    assert_eq!(name, "decode_split_last");
    let atomics: Vec<&str> = text.lines().filter(|l| l.contains("atomic_rmw")).collect();
    assert_eq!(atomics.len(), 1, "{text}");
    // e.g. `atomic_rmw_tko acq_rel device %p, add, %v, %mask token=%t`.
    for want in ["atomic_rmw_tko acq_rel device ", ", add, "] {
        assert!(atomics[0].contains(want), "{want}: {}", atomics[0]);
    }
    // The partials cross blocks by plain accesses only (the release/acquire does not order the TMA's
    // asynchronous proxy): their two stores and the merge's two loads say `allow_tma = false`.
    let plain = |op: &str| {
        text.lines()
            .filter(|l| l.contains(op) && l.contains("allow_tma = false"))
            .count()
    };
    assert_eq!(plain("store_view_tko"), 2, "{text}");
    assert_eq!(plain("load_view_tko"), 2, "{text}");
    // The two-launch partial kernel has none.
    let (name, text) = ir(&DecodeOptions::default());
    assert_eq!(name, "decode_partial");
    assert!(!text.contains("atomic_rmw"), "{text}");
}

#[test]
fn bad_calls_are_typed_errors() {
    let opts = DecodeOptions::default();
    let base = || described(OP, BF16, &[&[2, 8, 1, 128], &[2, 2, 512, 128]]).0;
    let paged = || {
        described(
            OP_PAGED,
            BF16,
            &[&[2, 8, 1, 128], &[64, 16, 2, 128], &[2, 32]],
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
        plan_err(&o, false, &opts),
        OpError::DType { arg: "q", .. }
    ));
    let mut o = base();
    o[slot::K].dtype = F16;
    assert!(matches!(
        plan_err(&o, false, &opts),
        OpError::DType { arg: "k_cache", .. }
    ));
    let mut o = base();
    o[slot::SEQ_LENS].dtype = I64;
    assert!(matches!(
        plan_err(&o, false, &opts),
        OpError::DType {
            arg: "seq_lens",
            ..
        }
    ));
    let mut o = base();
    o[slot::LSE].dtype = BF16;
    assert!(matches!(
        plan_err(&o, false, &opts),
        OpError::DType { arg: "lse", .. }
    ));
    let mut o = paged();
    o[slot::BLOCK_TABLE].dtype = I64;
    assert!(matches!(
        plan_err(&o, true, &opts),
        OpError::DType {
            arg: "block_table",
            ..
        }
    ));
    // Shapes.
    is(
        plan_err(
            &described(OP, BF16, &[&[2, 8, 1, 96], &[2, 2, 512, 96]]).0,
            false,
            &opts,
        ),
        "head dimension 96",
    );
    is(
        plan_err(
            &described(OP, BF16, &[&[2, 8, 9, 128], &[2, 2, 512, 128]]).0,
            false,
            &opts,
        ),
        "9 queries",
    );
    is(
        plan_err(
            &described(OP, BF16, &[&[2, 6, 1, 128], &[2, 4, 512, 128]]).0,
            false,
            &opts,
        ),
        "divide",
    );
    is(
        plan_err(
            &described(OP, BF16, &[&[2, 64, 4, 128], &[2, 1, 512, 128]]).0,
            false,
            &opts,
        ),
        "256 rows",
    );
    is(
        plan_err(
            &described(OP, BF16, &[&[2, 8, 1, 128], &[3, 2, 512, 128]]).0,
            false,
            &opts,
        ),
        "batch",
    );
    is(
        plan_err(
            &described(OP, BF16, &[&[2, 8, 1, 128], &[2, 2, 512, 64]]).0,
            false,
            &opts,
        ),
        "head dimension",
    );
    let mut o = base();
    o[slot::SEQ_LENS].shape = vec![3];
    is(plan_err(&o, false, &opts), "seq_lens");
    let mut o = base();
    o[slot::LSE].shape = vec![2, 8, 2];
    is(plan_err(&o, false, &opts), "lse");
    let mut o = base();
    o[slot::O].shape = vec![2, 8, 2, 128];
    assert!(matches!(plan_err(&o, false, &opts), OpError::Shape { .. }));
    let mut o = base();
    o[slot::V].shape = vec![2, 2, 511, 128];
    assert!(matches!(plan_err(&o, false, &opts), OpError::Shape { .. }));
    let mut o = base();
    o[slot::Q].shape = vec![2, 8, 128];
    assert!(matches!(
        plan_err(&o, false, &opts),
        OpError::Rank { arg: "q", .. }
    ));
    // Paged: block size, table rows and rank.
    is(
        plan_err(
            &described(
                OP_PAGED,
                BF16,
                &[&[2, 8, 1, 128], &[64, 8, 2, 128], &[2, 32]],
            )
            .0,
            true,
            &opts,
        ),
        "block size 8",
    );
    is(
        plan_err(
            &described(
                OP_PAGED,
                BF16,
                &[&[2, 8, 1, 128], &[64, 48, 2, 128], &[2, 32]],
            )
            .0,
            true,
            &opts,
        ),
        "block size 48",
    );
    is(
        plan_err(
            &described(
                OP_PAGED,
                BF16,
                &[&[2, 8, 1, 128], &[64, 16, 2, 128], &[3, 32]],
            )
            .0,
            true,
            &opts,
        ),
        "block_table",
    );
    let mut o = paged();
    o[slot::BLOCK_TABLE].shape = vec![64];
    assert!(matches!(
        plan_err(&o, true, &opts),
        OpError::Rank {
            arg: "block_table",
            ..
        }
    ));
    // Layout: the head dimension of the cache must be contiguous.
    let mut o = base();
    o[slot::K].strides = vec![2 * 2 * 512 * 128 * 2, 512 * 128 * 2, 128 * 2, 2];
    assert!(matches!(
        plan_err(&o, false, &opts),
        OpError::Layout { arg: "k_cache", .. }
    ));
    // Scale.
    let bad_scale = DecodeOptions {
        scale: Some(-1.0),
        ..Default::default()
    };
    is(plan_err(&base(), false, &bad_scale), "scale");
    // Device.
    let mut o = base();
    o[slot::V].device = 1;
    assert!(matches!(
        plan_err(&o, false, &opts),
        OpError::Device { arg: "v_cache", .. }
    ));
    // A split call without its scratch.
    let (o, p) = described(OP, BF16, &[&[1, 8, 1, 128], &[1, 2, 8192, 128]]);
    is(plan_err(&o, p, &opts), "scratch");
    // Spec shapes that do not fit the op.
    assert!(decode::described_call(OP, BF16, &[vec![1, 8, 1, 128]]).is_err());
    assert!(
        decode::described_call(OP_PAGED, BF16, &[vec![1, 8, 1, 128], vec![4, 16, 2, 128]]).is_err()
    );
    // An empty batch, no heads or no queries plan nothing.
    for q in [[0i64, 8, 1, 128], [2, 0, 1, 128], [2, 8, 0, 128]] {
        let hkv = if q[1] == 0 { 1 } else { 2 };
        let (o, p) = described(OP, BF16, &[&q, &[q[0], hkv, 512, 128]]);
        assert!(
            decode::plan(&o, p, &target(), &opts).unwrap().is_empty(),
            "{q:?}"
        );
    }
}

/// A seeded value in [-1, 1).
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

/// A contiguous cache `[B, Hkv, S, D]` copied into pages of `bs` rows, sequence `b`'s pages in a
/// scrambled order with one spare page, unused slots and pages NaN; returns (k, v, table, max_blocks).
fn paginate(
    k: &[f32],
    v: &[f32],
    b: usize,
    hkv: usize,
    s: usize,
    d: usize,
    bs: usize,
) -> (Vec<f32>, Vec<f32>, Vec<i32>, usize) {
    let per = s.div_ceil(bs);
    let blocks = b * per + 1;
    let mut pk = vec![f32::NAN; blocks * bs * hkv * d];
    let mut pv = pk.clone();
    let mut table = vec![-1i32; b * per];
    for bi in 0..b {
        for j in 0..per {
            // Reverse order, interleaved between sequences; block 0 stays unused.
            let blk = 1 + (per - 1 - j) * b + bi;
            table[bi * per + j] = blk as i32;
            for r in 0..bs {
                let p = j * bs + r;
                if p >= s {
                    break;
                }
                for h in 0..hkv {
                    let src = ((bi * hkv + h) * s + p) * d;
                    let dst = ((blk * bs + r) * hkv + h) * d;
                    pk[dst..dst + d].copy_from_slice(&k[src..src + d]);
                    pv[dst..dst + d].copy_from_slice(&v[src..src + d]);
                }
            }
        }
    }
    (pk, pv, table, per)
}

#[test]
fn reference_is_dense_attention_on_the_gathered_keys() {
    let (b, hq, hkv, d, s) = (3usize, 8usize, 2usize, 16usize, 40usize);
    let lens = [40i32, 0, 17];
    for sq in [1usize, 3] {
        let q = data(b * hq * sq * d, 1);
        let k = data(b * hkv * s * d, 2);
        let v = data(b * hkv * s * d, 3);
        let cache = CacheRef::Contiguous {
            k: &k,
            v: &v,
            hkv,
            s_max: s,
        };
        let scale = 0.3;
        let (o, lse) = decode_reference(&q, &cache, &lens, b, hq, sq, d, scale);
        for (bi, &len) in lens.iter().enumerate() {
            let len = len as usize;
            for h in 0..hq {
                let (kk, vv) = cache.gather(bi, h / (hq / hkv), len, d);
                for i in 0..sq {
                    let row = (bi * hq + h) * sq + i;
                    let got = &o[row * d..(row + 1) * d];
                    let visible = (len + i + 1).saturating_sub(sq);
                    if visible == 0 {
                        assert!(got.iter().all(|&x| x == 0.0), "b {bi} h {h} i {i}");
                        assert_eq!(lse[row], f32::NEG_INFINITY);
                        continue;
                    }
                    let qi = &q[row * d..(row + 1) * d];
                    let want = attention_reference(
                        qi,
                        &kk[..visible * d],
                        &vv[..visible * d],
                        1,
                        visible,
                        d,
                        scale,
                        false,
                    );
                    for (a, w) in got.iter().zip(&want) {
                        assert!((a - w).abs() < 1e-5, "b {bi} h {h} i {i}: {a} vs {w}");
                    }
                    // LSE = ln Σ exp(scale · q·k).
                    let z: f64 = kk[..visible * d]
                        .chunks(d)
                        .map(|kj| {
                            let dot: f64 =
                                qi.iter().zip(kj).map(|(&x, &y)| x as f64 * y as f64).sum();
                            (dot * scale as f64).exp()
                        })
                        .sum();
                    assert!(
                        (lse[row] as f64 - z.ln()).abs() < 1e-5,
                        "{} vs {}",
                        lse[row],
                        z.ln()
                    );
                }
            }
        }
    }
}

#[test]
fn paged_reference_equals_contiguous_and_lengths_clamp() {
    let (b, hq, hkv, d, s, sq) = (3usize, 4usize, 2usize, 8usize, 50usize, 2usize);
    let q = data(b * hq * sq * d, 4);
    let k = data(b * hkv * s * d, 5);
    let v = data(b * hkv * s * d, 6);
    let lens = [50i32, 1, 33];
    let contiguous = CacheRef::Contiguous {
        k: &k,
        v: &v,
        hkv,
        s_max: s,
    };
    let want = decode_reference(&q, &contiguous, &lens, b, hq, sq, d, 0.5);
    for bs in [16usize, 32] {
        let (pk, pv, table, per) = paginate(&k, &v, b, hkv, s, d, bs);
        let paged = CacheRef::Paged {
            k: &pk,
            v: &pv,
            hkv,
            block_size: bs,
            block_table: &table,
            max_blocks: per,
        };
        let got = decode_reference(&q, &paged, &lens, b, hq, sq, d, 0.5);
        assert_eq!(got, want, "block size {bs}");
    }
    // Lengths past the capacity clamp to it; negative ones are 0.
    let over = decode_reference(&q, &contiguous, &[500, -3, 33], b, hq, sq, d, 0.5);
    let clamped = decode_reference(&q, &contiguous, &[50, 0, 33], b, hq, sq, d, 0.5);
    assert_eq!(over, clamped);
    assert!(
        clamped.1[hq * sq..2 * hq * sq]
            .iter()
            .all(|&l| l == f32::NEG_INFINITY)
    );
}

/// The combine's rule: partial results of disjoint key ranges, merged by their LSEs, give the whole.
#[test]
fn lse_weighted_merge_of_key_ranges_is_the_whole() {
    let (hq, d, s, cut) = (2usize, 8usize, 30usize, 11usize);
    let q = data(hq * d, 7);
    let k = data(hq * s * d, 8);
    let v = data(hq * s * d, 9);
    let part = |lo: usize, hi: usize| {
        let pick = |t: &[f32]| -> Vec<f32> {
            (0..hq)
                .flat_map(|h| t[(h * s + lo) * d..(h * s + hi) * d].iter().copied())
                .collect()
        };
        let (kk, vv) = (pick(&k), pick(&v));
        let c = CacheRef::Contiguous {
            k: &kk,
            v: &vv,
            hkv: hq,
            s_max: hi - lo,
        };
        decode_reference(&q, &c, &[(hi - lo) as i32], 1, hq, 1, d, 0.25)
    };
    let (o_all, l_all) = part(0, s);
    let (o1, l1) = part(0, cut);
    let (o2, l2) = part(cut, s);
    for h in 0..hq {
        let m = l1[h].max(l2[h]);
        let (w1, w2) = ((l1[h] - m).exp(), (l2[h] - m).exp());
        let lse = m + (w1 + w2).ln();
        assert!((lse - l_all[h]).abs() < 1e-5);
        for j in 0..d {
            let o = (w1 * o1[h * d + j] + w2 * o2[h * d + j]) / (w1 + w2);
            assert!((o - o_all[h * d + j]).abs() < 1e-5);
        }
    }
}

/// Ragged calls through the host API on the GPU, both caches, split and not, NaN past every length.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_decode_matches_the_reference() {
    use cutile::runtime::Tensor;
    use decode::KvCache;
    use half::bf16;
    let Some((dev, stream)) = common::gpu_device("gpu_decode_matches_the_reference") else {
        return;
    };
    let (b, hq, hkv, d, s) = (4usize, 16usize, 4usize, 128usize, 1000usize);
    let lens = [1000i32, 0, 1, 517];
    for sq in [1usize, 4] {
        let q = data(b * hq * sq * d, 10);
        let mut k = data(b * hkv * s * d, 11);
        let mut v = data(b * hkv * s * d, 12);
        let round = |x: &mut Vec<f32>| x.iter_mut().for_each(|e| *e = bf16::from_f32(*e).to_f32());
        let mut qr = q.clone();
        round(&mut qr);
        round(&mut k);
        round(&mut v);
        for bi in 0..b {
            for h in 0..hkv {
                let row = (bi * hkv + h) * s;
                k[(row + lens[bi] as usize) * d..(row + s) * d].fill(f32::NAN);
                v[(row + lens[bi] as usize) * d..(row + s) * d].fill(f32::NAN);
            }
        }
        let contiguous = CacheRef::Contiguous {
            k: &k,
            v: &v,
            hkv,
            s_max: s,
        };
        let scale = 1.0 / (d as f32).sqrt();
        let (want_o, want_l) = decode_reference(&qr, &contiguous, &lens, b, hq, sq, d, scale);
        let up = |x: &[f32], shape: &[i64]| {
            let h: Vec<bf16> = x.iter().map(|&e| bf16::from_f32(e)).collect();
            Tensor::from_host(&dev, &h, shape).unwrap()
        };
        let qshape = [b as i64, hq as i64, sq as i64, d as i64];
        let tq = up(&qr, &qshape);
        let kshape = [b as i64, hkv as i64, s as i64, d as i64];
        let (tk, tv) = (up(&k, &kshape), up(&v, &kshape));
        let tl = Tensor::from_host(&dev, &lens, &[b as i64]).unwrap();
        let (pk, pv, table, per) = paginate(&k, &v, b, hkv, s, d, 16);
        let pshape = [(pk.len() / (16 * hkv * d)) as i64, 16, hkv as i64, d as i64];
        let (tpk, tpv) = (up(&pk, &pshape), up(&pv, &pshape));
        let tt = Tensor::from_host(&dev, &table, &[b as i64, per as i64]).unwrap();
        for paged in [false, true] {
            // The one-launch runs share the stream's counters: each finds them as the previous
            // one left them (reset), so a counter left non-zero would fail a later run.
            for (splits, one_launch) in [
                (None, false),
                (Some(1), false),
                (Some(7), false),
                (Some(7), true),
                (None, true),
            ] {
                let mut o = Tensor::<bf16>::zeros(&dev, &qshape).unwrap();
                let mut l = Tensor::<f32>::zeros(&dev, &qshape[..3]).unwrap();
                let cache = if paged {
                    KvCache::Paged {
                        k: &tpk,
                        v: &tpv,
                        block_table: &tt,
                    }
                } else {
                    KvCache::Contiguous { k: &tk, v: &tv }
                };
                let opts = DecodeOptions {
                    scale: None,
                    splits,
                    one_launch,
                };
                decode::decode(&stream, &tq, &cache, &tl, &opts, &mut o, Some(&mut l))
                    .unwrap()
                    .wait()
                    .unwrap();
                let got: Vec<f32> = o.to_host().unwrap().iter().map(|x| x.to_f32()).collect();
                let err = common::max_abs_err(&got, &want_o);
                assert!(
                    err < 2e-2,
                    "sq {sq} paged {paged} splits {splits:?} one launch {one_launch}: o err {err}"
                );
                let gl = l.to_host().unwrap();
                for (g, w) in gl.iter().zip(&want_l) {
                    assert!(
                        (g == w) || (g - w).abs() < 1e-2,
                        "sq {sq} paged {paged} splits {splits:?} one launch {one_launch}: lse {g} vs {w}"
                    );
                }
            }
        }
    }
}
