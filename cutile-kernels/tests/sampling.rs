//! The sampling family (argmax, top-k): the CPU references (ties to the smaller index, sorted top-k),
//! the planner without a GPU (typed errors, empty calls, the splits and selection rounds, a CPU model of
//! the rounds), every representative call compiled by tileiras
//! (sm_90; argmax and top-k for sm_80/90/100/120), and a GPU test through the host API (`#[ignore]`d;
//! skipped without a GPU) with ties, −∞ and ragged vocabularies.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::op::tuning::Candidate;
use cutile_kernels::op::{OpError, Operand, PlannedLaunch, Target};
use cutile_kernels::sampling::{self, reference as r};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

#[test]
fn references_break_ties_toward_the_smaller_index() {
    let x = [
        1.0,
        3.0,
        3.0,
        -1.0,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        2.0,
        2.0,
    ];
    assert_eq!(r::argmax(&x, 4), [1, 2]);
    let (v, i) = r::topk(&x, 4, 3);
    assert_eq!(i, [1, 2, 0, 2, 3, 0]);
    assert_eq!(v[..3], [3.0, 3.0, 1.0]);
    assert_eq!(v[3..5], [2.0, 2.0]);
    assert_eq!(r::argmax(&[f32::NEG_INFINITY; 3], 3), [0]);
}

fn described(op: &str, dt: ScalarType, x: [i64; 2], k: i64) -> Vec<Operand> {
    sampling::described_call(op, dt, &[x.to_vec(), vec![k]]).unwrap()
}

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

#[test]
fn bad_calls_are_typed_errors_and_empty_calls_plan_nothing() {
    let t = target();
    let a = sampling::ARGMAX;
    let k = sampling::TOPK;
    let ok = described(a, BF16, [8, 128256], 0);
    expect_error(sampling::plan(a, &ok, &t), "scratch pair");
    let ok = sampling::with_scratch(a, &ok, &t);
    let configs: Vec<String> = sampling::plan(a, &ok, &t)
        .unwrap()
        .into_iter()
        .map(|l| l.config)
        .collect();
    assert_eq!(
        configs,
        ["argmax_chunks BN=2048 chunks=63", "argmax_merge CB=1024"]
    );
    let mut o = ok.clone();
    o[3] = Operand::described("part_i", 3, I32, &[8 * 63 - 1]);
    expect_error(sampling::plan(a, &o, &t), "at least 504 elements");
    let one = described(a, F32, [77, 1000], 0);
    assert_eq!(sampling::with_scratch(a, &one, &t).len(), 2);
    assert_eq!(
        sampling::plan(a, &one, &t).unwrap()[0].config,
        "argmax BN=1024"
    );
    let mut o = ok.clone();
    o[1] = Operand::described("out", 1, I32, &[8]);
    expect_error(sampling::plan(a, &o, &t), "i64");
    let mut o = ok.clone();
    o[1] = Operand::described("out", 1, I64, &[7]);
    expect_error(sampling::plan(a, &o, &t), "`out` must be [T]");
    let mut o = ok.clone();
    o[0].strides = vec![1, 8];
    expect_error(sampling::plan(a, &o, &t), "contiguous");
    expect_error(
        sampling::plan(a, &described(a, F32, [3, 0], 0), &t),
        "empty row",
    );
    assert!(
        sampling::plan(a, &described(a, F32, [0, 10], 0), &t)
            .unwrap()
            .is_empty()
    );
    let ok = described(k, F16, [33, 1000], 5);
    expect_error(sampling::plan(k, &ok, &t), "scratch pair");
    let ok = sampling::with_scratch(k, &ok, &t);
    let configs: Vec<String> = sampling::plan(k, &ok, &t)
        .unwrap()
        .into_iter()
        .map(|l| l.config)
        .collect();
    assert_eq!(
        configs,
        ["topk_chunks KP=8 BN=1024 chunks=1", "topk_sort KP=8"]
    );
    let mut o = ok.clone();
    o[4] = Operand::described("cand_i", 4, I32, &[33 * 8 - 1]);
    expect_error(sampling::plan(k, &o, &t), "at least 264 elements");
    let mut o = ok.clone();
    o[3].dtype = BF16;
    expect_error(sampling::plan(k, &o, &t), "f32");
    expect_error(
        sampling::plan(k, &described(k, F16, [3, 1000], 65), &t),
        "at most 64",
    );
    expect_error(
        sampling::plan(k, &described(k, F16, [3, 10], 11), &t),
        "at most V = 10",
    );
    assert!(
        sampling::plan(k, &described(k, F16, [3, 10], 0), &t)
            .unwrap()
            .is_empty()
    );
    let mut o = ok.clone();
    o[2] = Operand::described("indices", 2, I64, &[33, 4]);
    expect_error(
        sampling::plan(k, &o, &t),
        "`indices` must have `values`'s shape",
    );
    let mut o = ok.clone();
    o[1] = Operand::described("values", 1, F32, &[33, 5]);
    expect_error(sampling::plan(k, &o, &t), "must match `x`");
    expect_error(sampling::plan("sort", &ok, &t), "no op named");
}

#[test]
fn the_ops_are_in_the_registry() {
    for op in [sampling::ARGMAX, sampling::TOPK] {
        assert_eq!(
            cutile_kernels::op::registry::find(op).unwrap().family,
            "sampling"
        );
    }
    // argmax: chunks + merge past one chunk per row; top-k: chunks, one selection round per 64
    // chunk sets of 64 slots (none for one chunk), sort.
    let launches = [2, 2, 1, 3, 2, 4];
    let calls = sampling::representative_calls();
    assert_eq!(calls.len(), launches.len());
    for (c, n) in calls.iter().zip(launches) {
        assert_eq!(
            c.plan(&target(), false).unwrap().launches.len(),
            n,
            "{}",
            c.label()
        );
    }
}

/// The split argmax: whole 8192-wide chunks for many rows, halved down to 1024 columns while the grid
/// is under two blocks per SM, one chunk (the one-launch kernel) for short rows; chunks from 4096 wide
/// compare in the element type.
#[test]
fn argmax_split_fills_the_device() {
    use sampling::config::{ArgmaxSplit, ChunkForm, argmax_split};
    let s = |bn, chunks| ArgmaxSplit {
        bn,
        chunks,
        form: if bn >= 4096 {
            ChunkForm::Native
        } else {
            ChunkForm::F32
        },
    };
    assert_eq!(argmax_split(1024, 128256, 132), s(8192, 16));
    assert_eq!(argmax_split(8, 128256, 132), s(2048, 63));
    assert_eq!(argmax_split(1, 128256, 132), s(1024, 126));
    assert_eq!(argmax_split(77, 1000, 132), s(1024, 1));
    assert_eq!(argmax_split(5000, 7, 132), s(128, 1));
    assert_eq!(argmax_split(4096, 8192, 132), s(8192, 1));
    assert_eq!(argmax_split(4096, 8193, 132), s(8192, 2));
}

/// The tuner's argmax candidates: the default first, distinct, each with a chunk kernel and several
/// chunks per row, all planned on the one scratch `argmax_scratch` sizes; one-chunk rows have only
/// the default.
#[test]
fn argmax_candidates_plan_on_one_scratch() {
    use sampling::config::{ChunkForm::*, argmax_candidates, argmax_scratch, argmax_split};
    for (t, v) in [
        (1024, 128256),
        (8, 128256),
        (1, 128256),
        (64, 32000),
        (3, 20000),
    ] {
        let c = argmax_candidates(t, v, 132);
        assert_eq!(c[0], argmax_split(t, v, 132), "[{t}, {v}]");
        let names: std::collections::HashSet<_> = c.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), c.len(), "[{t}, {v}]: {names:?}");
        let ops = sampling::with_scratch(
            sampling::ARGMAX,
            &[
                Operand::described("x", 0, BF16, &[t, v]),
                Operand::described("out", 1, I64, &[t]),
            ],
            &target(),
        );
        assert_eq!(ops[2].shape, [t * argmax_scratch(t, v, 132)]);
        for s in &c {
            assert!(s.chunks > 1, "[{t}, {v}] {}", s.name());
            let l = sampling::plan_argmax_with(&ops, &target(), s).unwrap();
            assert_eq!(l.len(), 2, "[{t}, {v}] {}", s.name());
            assert!(l[0].config.contains(&s.name()), "{}", l[0].config);
            assert_eq!(l[0].grid, Some(((t * s.chunks) as u32, 1, 1)));
        }
    }
    let c = argmax_candidates(1024, 128256, 132);
    let forms: Vec<_> = c.iter().map(|c| (c.bn, c.form)).collect();
    assert_eq!(
        forms,
        [
            (8192, Native),
            (8192, F32),
            (8192, Native8),
            (16384, Native),
            (16384, Native8),
            (4096, Native)
        ]
    );
    assert_eq!(argmax_candidates(77, 1000, 132).len(), 1);
    // A split that does not tile the row is refused, not planned over part of it.
    let ops = sampling::with_scratch(
        sampling::ARGMAX,
        &[
            Operand::described("x", 0, BF16, &[1024, 128256]),
            Operand::described("out", 1, I64, &[1024]),
        ],
        &target(),
    );
    let short = sampling::config::ArgmaxSplit { chunks: 15, ..c[0] };
    expect_error(
        sampling::plan_argmax_with(&ops, &target(), &short),
        "do not tile rows of 128256",
    );
}

/// The chunked top-k's split: the row read by at least an SM's worth of blocks where the row allows
/// without another selection round, and selection rounds of at most `MB_MAX` candidates per block
/// until one set per row is left.
#[test]
fn topk_split_fills_the_device_and_bounds_the_selection() {
    use sampling::config::{MB_MAX, SelectRound, TopkSplit, topk_split};
    let s = |bn, chunks, kp| TopkSplit { bn, chunks, kp };
    let r = |width, groups, mb| SelectRound { width, groups, mb };
    // Decode logits: 8 rows of a Llama-3 vocabulary, k = 50.
    assert_eq!(topk_split(8, 128256, 50, 132), s(4096, 32, 64));
    assert_eq!(topk_split(8, 128256, 50, 132).rounds(), [r(2048, 1, 2048)]);
    // One row: chunks halved down to 1024 columns, or as far as one round allows.
    assert_eq!(topk_split(1, 128256, 50, 132), s(2048, 63, 64));
    assert_eq!(topk_split(1, 128256, 8, 132), s(1024, 126, 8));
    // Many rows: whole 4096-wide chunks.
    assert_eq!(topk_split(1024, 128256, 1, 132), s(4096, 32, 8));
    // Short rows: one chunk, no selection round.
    assert_eq!(topk_split(3, 7, 5, 132), s(128, 1, 8));
    assert!(topk_split(3, 7, 5, 132).rounds().is_empty());
    // More candidates than a block holds: groups of 64 chunk sets, then a round over the groups.
    let long = topk_split(2, 300_000, 64, 132);
    assert_eq!(long, s(4096, 74, 64));
    assert_eq!(long.rounds(), [r(4736, 2, 4096), r(128, 1, 128)]);
    assert_eq!(long.scratch(2), 2 * 74 * 64 + 2 * 2 * 64 + 2 * 64);
    for (t, v, k) in [
        (1, 1, 1),
        (5, 4097, 64),
        (300, 32000, 8),
        (1, 262_144, 64),
        (1, 262_145, 64),
        (1, 20_000_000, 64),
        (1, i32::MAX as i64, 64),
    ] {
        let sp = topk_split(t, v, k, 132);
        assert!(
            sp.chunks * sp.bn >= v && (sp.chunks - 1) * sp.bn < v && sp.kp >= k,
            "{sp:?}"
        );
        // Each round's groups cover its width, within one block's tile, down to one set per row.
        let mut sets = sp.chunks;
        for rd in sp.rounds() {
            assert_eq!(rd.width, sets * sp.kp, "{sp:?}");
            assert!(rd.mb <= MB_MAX && rd.groups * rd.mb >= rd.width, "{sp:?}");
            assert!((rd.groups - 1) * rd.mb < rd.width, "{sp:?}");
            sets = rd.groups;
        }
        assert_eq!(sets, 1, "{sp:?}");
    }
}

/// The two-stage selection, modelled on the CPU (chunk-local sorted top-k, then a merge of the
/// candidates by (value descending, column ascending)), equals the reference on rows full of ties.
#[test]
fn chunked_topk_model_matches_the_reference() {
    let x: Vec<f32> = cutile_testkit::data::uniform(7 * 5000, 5, -4.0, 4.0)
        .into_iter()
        .map(|e| (e * 2.0).round() / 2.0)
        .collect();
    for (v, k, bn) in [
        (5000usize, 50usize, 1024usize),
        (5000, 64, 128),
        (5000, 1, 4096),
    ] {
        let (wv, wi) = r::topk(&x[..7 * v], v, k);
        let mut got_v = Vec::new();
        let mut got_i = Vec::new();
        for row in x[..7 * v].chunks(v) {
            let mut cand: Vec<(f32, i64)> = Vec::new();
            for (c, chunk) in row.chunks(bn).enumerate() {
                let (cv, ci) = r::topk(chunk, chunk.len(), k.min(chunk.len()));
                cand.extend(
                    cv.into_iter()
                        .zip(ci.into_iter().map(|i| i + (c * bn) as i64)),
                );
            }
            cand.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
            got_v.extend(cand[..k].iter().map(|c| c.0));
            got_i.extend(cand[..k].iter().map(|c| c.1));
        }
        assert_eq!(
            (got_v, got_i),
            (wv.clone(), wi.clone()),
            "v={v} k={k} bn={bn}"
        );
    }
}

/// The planned selection rounds, modelled on the CPU slot for slot (each chunk's set in column order
/// in `kp` slots, then each round's groups of `mb` slots keeping their top-k set in column order),
/// equal the reference on rows full of ties, for rows that take two rounds.
#[test]
fn selection_rounds_model_matches_the_reference() {
    type Slot = Option<(f32, i64)>;
    // The top-`k` set of `slots` (value descending, then position), kept in position order and
    // padded to `kp` slots.
    fn top_set(slots: &[Slot], k: usize, kp: usize) -> Vec<Slot> {
        let mut order: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
        order.sort_by(|&a, &b| {
            let (va, vb) = (slots[a].unwrap().0, slots[b].unwrap().0);
            vb.partial_cmp(&va).unwrap().then(a.cmp(&b))
        });
        order.truncate(k);
        order.sort();
        let mut out: Vec<Slot> = order.into_iter().map(|i| slots[i]).collect();
        out.resize(kp, None);
        out
    }
    let (t, v, k) = (2usize, 300_000usize, 64usize);
    let x: Vec<f32> = cutile_testkit::data::uniform(t * v, 9, -4.0, 4.0)
        .into_iter()
        .map(|e| (e * 8.0).round() / 8.0)
        .collect();
    let split = sampling::config::topk_split(t as i64, v as i64, k as i64, 132);
    assert_eq!(split.rounds().len(), 2);
    let (bn, kp) = (split.bn as usize, split.kp as usize);
    let (wv, wi) = r::topk(&x, v, k);
    for (row, xs) in x.chunks(v).enumerate() {
        let mut cand: Vec<Slot> = Vec::new();
        for (c, chunk) in xs.chunks(bn).enumerate() {
            let slots: Vec<Slot> = chunk
                .iter()
                .enumerate()
                .map(|(i, &e)| Some((e, (c * bn + i) as i64)))
                .collect();
            cand.extend(top_set(&slots, k, kp));
        }
        for round in split.rounds() {
            assert_eq!(cand.len() as i64, round.width);
            cand = cand
                .chunks(round.mb as usize)
                .flat_map(|g| top_set(g, k, kp))
                .collect();
            assert_eq!(cand.len() as i64, round.groups * split.kp);
        }
        let mut set: Vec<(f32, i64)> = cand.into_iter().flatten().collect();
        set.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
        let got_v: Vec<f32> = set.iter().map(|e| e.0).collect();
        let got_i: Vec<i64> = set.iter().map(|e| e.1).collect();
        assert_eq!(got_v, wv[row * k..(row + 1) * k], "row {row}");
        assert_eq!(got_i, wi[row * k..(row + 1) * k], "row {row}");
    }
}

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "sampling representative_calls_compile_for_sm90",
        common::catalog_jobs(&sampling::representative_calls()),
    );
}

#[test]
fn compile_four_archs() {
    let calls = sampling::representative_calls();
    common::compile_four_archs(
        "sampling compile_four_archs",
        common::catalog_jobs(&[calls[0].clone(), calls[3].clone()]),
    );
}

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::bf16;
    use sampling::config;

    /// Rows with planted ties at the maximum, a −∞ row, values quantized so ties are common.
    fn logits<T: DeviceElement>(t: i64, v: i64) -> Vec<f32> {
        let mut x = cutile_testkit::data::uniform((t * v) as usize, 21, -8.0, 8.0);
        for e in &mut x {
            *e = T::from_f64((*e * 4.0).round() as f64 / 4.0).to_f64() as f32;
        }
        for row in 0..t as usize {
            let b = row * v as usize;
            if row % 3 == 0 && v > 2 {
                x[b + v as usize - 1] = 9.0;
                x[b + (row % (v as usize - 1))] = 9.0;
            }
            if row == 1 {
                x[b..b + v as usize].fill(f32::NEG_INFINITY);
            }
        }
        x
    }

    /// Every tuner candidate of the argmax call (the chunk forms and widths) gives `want`.
    fn argmax_candidates<T: DeviceElement>(dev: &Device, s: &Stream, xd: &Tensor<T>, want: &[i64]) {
        let (t, v) = (xd.shape()[0], xd.shape()[1]);
        let target = Target::of(dev).unwrap();
        let n = t * config::argmax_scratch(t, v, target.sm_count);
        let scratch = Tensor::<f32>::zeros(dev, &[2 * (n + 64)]).unwrap();
        for c in config::argmax_candidates(t, v, target.sm_count) {
            let out = Tensor::<i64>::full(dev, &[t], -9).unwrap();
            let mut ops = sampling::with_scratch(
                sampling::ARGMAX,
                &[Operand::of("x", xd), Operand::of("out", &out)],
                &target,
            );
            if ops.len() == 4 {
                // The described scratch pair, placed in this test's buffer.
                // 256-byte aligned, as the host API's scratch.
                let half = (ops[2].shape[0] as u64).div_ceil(64) * 64;
                ops[2].ptr = scratch.device_ptr();
                ops[3].ptr = scratch.device_ptr() + 4 * half;
            }
            let plan = sampling::plan_argmax_with(&ops, &target, &c).unwrap();
            // SAFETY: the operands are this test's live tensors; the scratch buffer holds both arrays.
            unsafe { cutile_kernels::op::execute(s, &ops, &plan) }
                .unwrap()
                .wait()
                .unwrap();
            assert_eq!(
                out.to_host().unwrap(),
                want,
                "argmax t={t} v={v} {}",
                c.name()
            );
        }
    }

    fn case<T: DeviceElement>(dev: &Device, s: &Stream, t: i64, v: i64, k: i64) {
        let x = logits::<T>(t, v);
        let h: Vec<T> = x.iter().map(|&e| T::from_f64(e as f64)).collect();
        let xd = Tensor::from_host(dev, &h, &[t, v]).unwrap();
        let mut out = Tensor::<i64>::full(dev, &[t], -9).unwrap();
        sampling::argmax(s, &xd, &mut out).unwrap().wait().unwrap();
        let want = r::argmax(&x, v as usize);
        assert_eq!(out.to_host().unwrap(), want, "argmax t={t} v={v}");
        argmax_candidates(dev, s, &xd, &want);
        let k = k.min(v);
        let mut vals = Tensor::<T>::zeros(dev, &[t, k]).unwrap();
        let mut idx = Tensor::<i64>::full(dev, &[t, k], -9).unwrap();
        sampling::topk(s, &xd, &mut vals, &mut idx)
            .unwrap()
            .wait()
            .unwrap();
        let (wv, wi) = r::topk(&x, v as usize, k as usize);
        assert_eq!(idx.to_host().unwrap(), wi, "topk indices t={t} v={v} k={k}");
        let got: Vec<f32> = vals
            .to_host()
            .unwrap()
            .into_iter()
            .map(|e| e.to_f64() as f32)
            .collect();
        assert_eq!(got, wv, "topk values t={t} v={v} k={k}");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_api_matches_reference() {
        let Some((dev, s)) = gpu_device("sampling host_api_matches_reference") else {
            return;
        };
        for (t, v, k) in [
            (1, 1, 1),
            (3, 7, 5),
            (77, 1000, 5),
            (8, 128256, 50),
            (5, 4097, 64),
            (300, 32000, 8),
            (1, 5000, 64),
            // Two selection rounds; argmax over 126 chunks of one row.
            (2, 300_000, 64),
            (1, 128256, 1),
            // argmax: one full 8192 chunk, then 8192 + 1 columns (two chunks).
            (300, 8192, 3),
            (300, 8193, 3),
        ] {
            case::<bf16>(&dev, &s, t, v, k);
            case::<f32>(&dev, &s, t, v, k);
        }
    }
}
