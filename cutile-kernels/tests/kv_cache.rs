//! The KV-cache write family: the CPU reference (addressed entries written, every other entry untouched,
//! skipped slots), the planner without a GPU (typed errors, empty calls, the contiguous cache passed as
//! its `[B, S, Hkv, D]` view), every representative call compiled by tileiras (sm_90; one kernel for
//! sm_80/90/100/120), and a GPU test through the host API (`#[ignore]`d; skipped without a GPU) that
//! also checks untouched entries, in both grid orders.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::kv_cache::{self, reference as r};
use cutile_kernels::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

const SENTINEL: f32 = -7.5;

#[test]
fn paged_reference_writes_addressed_slots_only() {
    let (hkv, d, blocks, bs) = (2usize, 4usize, 3usize, 4usize);
    let slots = [5i64, -1, 11, 0, 12, 99];
    let t = slots.len();
    let k: Vec<f32> = (0..t * hkv * d).map(|i| i as f32).collect();
    let v: Vec<f32> = k.iter().map(|x| -x).collect();
    let n = blocks * bs * hkv * d;
    let (mut kc, mut vc) = (vec![SENTINEL; n], vec![SENTINEL; n]);
    r::write(
        &k,
        &v,
        hkv,
        d,
        r::Index::Paged { slot: &slots },
        (blocks, bs),
        &mut kc,
        &mut vc,
    );
    let mut written = vec![false; blocks * bs];
    for (ti, &s) in slots.iter().enumerate() {
        if !(0..(blocks * bs) as i64).contains(&s) {
            continue;
        }
        written[s as usize] = true;
        for h in 0..hkv {
            for j in 0..d {
                let at = (s as usize * hkv + h) * d + j;
                assert_eq!(kc[at], k[(ti * hkv + h) * d + j]);
                assert_eq!(vc[at], v[(ti * hkv + h) * d + j]);
            }
        }
    }
    for (s, w) in written.iter().enumerate() {
        if !w {
            let e = s * hkv * d;
            assert!(
                kc[e..e + hkv * d].iter().all(|&x| x == SENTINEL),
                "slot {s}"
            );
            assert!(
                vc[e..e + hkv * d].iter().all(|&x| x == SENTINEL),
                "slot {s}"
            );
        }
    }
}

#[test]
fn contiguous_reference_writes_batch_and_position() {
    let (hkv, d, b, s) = (2usize, 3usize, 2usize, 5usize);
    let batch = [1i64, 0, 2, 1];
    let pos = [4i64, 0, 1, 5];
    let k: Vec<f32> = (0..4 * hkv * d).map(|i| i as f32 + 1.0).collect();
    let n = b * hkv * s * d;
    let (mut kc, mut vc) = (vec![SENTINEL; n], vec![SENTINEL; n]);
    let idx = r::Index::Contiguous {
        batch: &batch,
        pos: &pos,
    };
    r::write(&k, &k, hkv, d, idx, (b, s), &mut kc, &mut vc);
    // Tokens 2 (batch 2 of 2) and 3 (position 5 of 5) are skipped.
    let written = (0..n).filter(|&i| kc[i] != SENTINEL).count();
    assert_eq!(written, 2 * hkv * d);
    for h in 0..hkv {
        for j in 0..d {
            assert_eq!(kc[((b - 1) * hkv + h) * s * d + 4 * d + j], k[h * d + j]);
            assert_eq!(kc[(h * s) * d + j], k[(hkv + h) * d + j]);
        }
    }
    assert_eq!(kc, vc);
}

fn described(op: &str, dt: ScalarType, k: [i64; 3], c: [i64; 2], i64_idx: bool) -> Vec<Operand> {
    kv_cache::described_call(op, dt, &[k.to_vec(), c.to_vec(), vec![i64_idx as i64]]).unwrap()
}

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

#[test]
fn bad_calls_are_typed_errors() {
    let t = target();
    let p = kv_cache::OP_PAGED;
    let ok = described(p, BF16, [10, 8, 128], [64, 16], false);
    assert_eq!(kv_cache::plan(p, &ok, &t).unwrap().len(), 1);
    let mut o = ok.clone();
    o[1] = Operand::described("v", 1, BF16, &[10, 8, 64]);
    expect_error(kv_cache::plan(p, &o, &t), "`v` must have `k`'s shape");
    let mut o = ok.clone();
    o[2] = Operand::described("slot_mapping", 2, I32, &[11]);
    expect_error(kv_cache::plan(p, &o, &t), "one entry per token");
    let mut o = ok.clone();
    o[2] = Operand::described("slot_mapping", 2, F32, &[10]);
    expect_error(kv_cache::plan(p, &o, &t), "i32, i64");
    let mut o = ok.clone();
    o[3] = Operand::described("k_cache", 3, BF16, &[64, 16, 4, 128]);
    expect_error(
        kv_cache::plan(p, &o, &t),
        "`v_cache` must have `k_cache`'s shape",
    );
    let mut o = ok.clone();
    o[3] = Operand::described("k_cache", 3, BF16, &[64, 16, 4, 128]);
    o[4] = Operand::described("v_cache", 4, BF16, &[64, 16, 4, 128]);
    expect_error(kv_cache::plan(p, &o, &t), "Hkv and D");
    let mut o = ok.clone();
    o[4] = Operand::described("v_cache", 4, F16, &[64, 16, 8, 128]);
    expect_error(kv_cache::plan(p, &o, &t), "must match `k`");
    expect_error(kv_cache::plan(p, &ok[..4], &t), "takes 5 tensors");
    expect_error(kv_cache::plan("kv", &ok, &t), "no op named");
    let c = described(kv_cache::OP, F32, [10, 8, 128], [4, 100], true);
    assert_eq!(kv_cache::plan(kv_cache::OP, &c, &t).unwrap().len(), 1);
    let mut o = c.clone();
    o[3] = Operand::described("pos", 3, I32, &[10]);
    expect_error(kv_cache::plan(kv_cache::OP, &o, &t), "must match `batch`");
    let o = described(p, BF16, [10, 8, 600], [64, 16], false);
    expect_error(kv_cache::plan(p, &o, &t), "outside 1..=512");
}

#[test]
fn empty_calls_plan_nothing() {
    let t = target();
    for (k, c) in [([0, 8, 128], [64, 16]), ([5, 8, 128], [0, 16])] {
        let o = described(kv_cache::OP_PAGED, F32, k, c, false);
        assert!(
            kv_cache::plan(kv_cache::OP_PAGED, &o, &t)
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn contiguous_cache_is_viewed_as_blocks_of_positions() {
    let o = described(kv_cache::OP, BF16, [1000, 8, 128], [4, 512], false);
    let l = &kv_cache::plan(kv_cache::OP, &o, &target()).unwrap()[0];
    assert_eq!(l.grid, Some((1000u32.div_ceil(16), 8, 1)));
    // [B, Hkv, S, D] = [4, 8, 512, 128] → [4, 512, 8, 128] with strides (8·512·128, 128, 512·128, 1).
    let cache = l
        .args
        .iter()
        .find_map(|a| match a {
            PlannedArg::Tensor {
                operand: 4,
                output: true,
                shape,
                strides,
                ..
            } => Some((shape.clone(), strides.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(cache.0, [4, 512, 8, 128]);
    assert_eq!(cache.1, [8 * 512 * 128, 128, 512 * 128, 1]);
    assert!(l.args.contains(&PlannedArg::I32(0)));
    let o = described(kv_cache::OP_PAGED, BF16, [4, 8, 128], [64, 16], true);
    let l = &kv_cache::plan(kv_cache::OP_PAGED, &o, &target()).unwrap()[0];
    assert_eq!(l.grid, Some((4, 8, 1)));
    assert!(l.args.contains(&PlannedArg::I32(1)));
}

/// The tuner's candidates: the default (token tiles fastest, a `(tiles, Hkv)` grid), then the same
/// tile and kernel with the heads of one token tile on adjacent blocks (a 1-D grid, flag bit set);
/// decode-sized calls (one token per block) have nothing to choose.
#[test]
fn candidates_are_the_tile_in_both_grid_orders() {
    let (p, t) = (kv_cache::OP_PAGED, target());
    let o = described(p, BF16, [16384, 8, 128], [2048, 16], false);
    let c = kv_cache::config::candidates(p, 16384, 128).unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0], kv_cache::config::choose(p, 16384, 128).unwrap());
    assert!(!c[0].heads_fastest && c[1].heads_fastest);
    assert_eq!((c[1].bm, c[1].dp), (c[0].bm, c[0].dp));
    let [a, b] = [&c[0], &c[1]].map(|c| kv_cache::plan_with(p, &o, &t, Some(c)).unwrap());
    let default = kv_cache::plan(p, &o, &t).unwrap();
    assert_eq!(
        (&a[0].config, a[0].grid),
        (&default[0].config, default[0].grid)
    );
    assert_eq!(a[0].grid, Some((1024, 8, 1)));
    assert_eq!(b[0].grid, Some((1024 * 8, 1, 1)));
    assert_eq!(a[0].kernel.name(), b[0].kernel.name());
    let flags = |l: &PlannedLaunch| {
        l.args.iter().find_map(|a| match a {
            PlannedArg::I32(f) => Some(*f),
            _ => None,
        })
    };
    assert_eq!(flags(&a[0]), Some(kv_cache::PAGED));
    assert_eq!(
        flags(&b[0]),
        Some(kv_cache::PAGED | kv_cache::HEADS_FASTEST)
    );
    assert!(b[0].config.ends_with("heads-fastest"), "{}", b[0].config);
    assert_eq!(kv_cache::config::candidates(p, 8, 128).unwrap().len(), 1);
    // A tile narrower than the head is refused, not planned over part of it.
    let narrow = kv_cache::KvConfig { dp: 64, ..c[0] };
    match kv_cache::plan_with(p, &o, &t, Some(&narrow)) {
        Err(e) => assert!(e.to_string().contains("cannot hold heads of 128"), "{e}"),
        Ok(_) => panic!("a 64-lane tile planned heads of 128"),
    }
}

#[test]
fn the_ops_are_in_the_registry() {
    for op in [kv_cache::OP, kv_cache::OP_PAGED] {
        assert_eq!(
            cutile_kernels::op::registry::find(op).unwrap().family,
            "kv_cache"
        );
    }
    for c in kv_cache::representative_calls() {
        assert_eq!(c.plan(&target(), false).unwrap().launches.len(), 1);
    }
}

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "kv_cache representative_calls_compile_for_sm90",
        common::catalog_jobs(&kv_cache::representative_calls()),
    );
}

#[test]
fn compile_four_archs() {
    common::compile_four_archs(
        "kv_cache compile_four_archs",
        common::catalog_jobs(&kv_cache::representative_calls()[..1]),
    );
}

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::bf16;

    fn up<T: DeviceElement>(dev: &Device, v: &[f32], shape: &[i64]) -> Tensor<T> {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).unwrap()
    }

    fn down<T: DeviceElement>(t: &Tensor<T>) -> Vec<f32> {
        t.to_host()
            .unwrap()
            .into_iter()
            .map(|x| x.to_f64() as f32)
            .collect()
    }

    /// The call in the tuner's alternative grid order (heads of one token tile on adjacent blocks),
    /// the default's tile; the caller's caches written.
    fn write_heads_fastest(stream: &Stream, op: &str, ops: &[Operand]) {
        let (k, t) = (&ops[0], Target::of(stream.device()).unwrap());
        let cfg = kv_cache::KvConfig {
            heads_fastest: true,
            ..kv_cache::config::choose(kv_cache::OP, k.shape[0], k.shape[2]).unwrap()
        };
        let plan = kv_cache::plan_with(op, ops, &t, Some(&cfg)).unwrap();
        // SAFETY: the operands are the test's live tensors; the plan addresses only their elements.
        unsafe { cutile_kernels::op::execute(stream, ops, &plan) }
            .unwrap()
            .wait()
            .unwrap();
    }

    /// Paged writes with holes (−1 slots, a slot past the cache), in random order, k and v as head
    /// slices of one fused buffer; every other cache entry keeps its sentinel. `heads_fastest`: the
    /// tuner's alternative grid order instead of the host API's default.
    fn paged<T: DeviceElement, I: DeviceElement>(
        dev: &Device,
        stream: &Stream,
        (t, hkv, d): (i64, i64, i64),
        heads_fastest: bool,
    ) {
        let (blocks, bs) = (t / 4 + 3, 8i64);
        let mut rng = cutile_testkit::data::Rng::new(t as u64);
        let mut all: Vec<i64> = (0..blocks * bs).collect();
        for i in (1..all.len()).rev() {
            all.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let mut slots: Vec<i64> = all[..t as usize].to_vec();
        for (i, s) in slots.iter_mut().enumerate() {
            if i % 5 == 1 {
                *s = -1;
            }
        }
        if t > 3 {
            slots[3] = blocks * bs + 7;
        }
        let h = 2 * hkv;
        let kv = cutile_testkit::data::uniform((t * h * d) as usize, 3, -2.0, 2.0);
        let kv: Vec<f32> = kv
            .iter()
            .map(|&x| T::from_f64(x as f64).to_f64() as f32)
            .collect();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for ti in 0..t as usize {
            let row = ti * (h * d) as usize;
            let n = (hkv * d) as usize;
            k.extend_from_slice(&kv[row..row + n]);
            v.extend_from_slice(&kv[row + n..row + 2 * n]);
        }
        let buf = up::<T>(dev, &kv, &[t, h, d]);
        let kd = buf.slice(1, 0..hkv).unwrap();
        let vd = buf.slice(1, hkv..h).unwrap();
        let shape = [blocks, bs, hkv, d];
        let n = shape.iter().product::<i64>() as usize;
        let mut kc = up::<T>(dev, &vec![SENTINEL; n], &shape);
        let mut vc = up::<T>(dev, &vec![SENTINEL; n], &shape);
        let sl: Vec<I> = slots.iter().map(|&s| I::from_f64(s as f64)).collect();
        let sd = Tensor::from_host(dev, &sl, &[t]).unwrap();
        if heads_fastest {
            let ops = [
                Operand::of("k", &kd),
                Operand::of("v", &vd),
                Operand::of("slot_mapping", &sd),
                Operand::of("k_cache", &kc),
                Operand::of("v_cache", &vc),
            ];
            write_heads_fastest(stream, kv_cache::OP_PAGED, &ops);
        } else {
            kv_cache::write_kv_cache_paged(stream, &kd, &vd, &sd, &mut kc, &mut vc)
                .unwrap()
                .wait()
                .unwrap();
        }
        let (mut wk, mut wv) = (vec![SENTINEL; n], vec![SENTINEL; n]);
        let idx = r::Index::Paged { slot: &slots };
        r::write(
            &k,
            &v,
            hkv as usize,
            d as usize,
            idx,
            (blocks as usize, bs as usize),
            &mut wk,
            &mut wv,
        );
        assert_eq!(down(&kc), wk, "k cache t={t} {}", T::DTYPE);
        assert_eq!(down(&vc), wv, "v cache t={t} {}", T::DTYPE);
    }

    fn contiguous<T: DeviceElement>(
        dev: &Device,
        stream: &Stream,
        (t, hkv, d): (i64, i64, i64),
        heads_fastest: bool,
    ) {
        let (b, s) = (3i64, t + 5);
        let batch: Vec<i64> = (0..t).map(|i| if i == 2 { 3 } else { i % b }).collect();
        let pos: Vec<i64> = (0..t)
            .map(|i| if i == 4 { -1 } else { (i * 7) % s })
            .collect();
        let k = cutile_testkit::data::uniform((t * hkv * d) as usize, 5, -2.0, 2.0);
        let k: Vec<f32> = k
            .iter()
            .map(|&x| T::from_f64(x as f64).to_f64() as f32)
            .collect();
        let v: Vec<f32> = k.iter().map(|x| -x).collect();
        let shape = [b, hkv, s, d];
        let n = shape.iter().product::<i64>() as usize;
        let mut kc = up::<T>(dev, &vec![SENTINEL; n], &shape);
        let mut vc = up::<T>(dev, &vec![SENTINEL; n], &shape);
        let (kd, vd) = (
            up::<T>(dev, &k, &[t, hkv, d]),
            up::<T>(dev, &v, &[t, hkv, d]),
        );
        let bd = Tensor::from_host(
            dev,
            &batch.iter().map(|&x| x as i32).collect::<Vec<_>>(),
            &[t],
        )
        .unwrap();
        let pd = Tensor::from_host(
            dev,
            &pos.iter().map(|&x| x as i32).collect::<Vec<_>>(),
            &[t],
        )
        .unwrap();
        if heads_fastest {
            let ops = [
                Operand::of("k", &kd),
                Operand::of("v", &vd),
                Operand::of("batch", &bd),
                Operand::of("pos", &pd),
                Operand::of("k_cache", &kc),
                Operand::of("v_cache", &vc),
            ];
            write_heads_fastest(stream, kv_cache::OP, &ops);
        } else {
            kv_cache::write_kv_cache(stream, &kd, &vd, &bd, &pd, &mut kc, &mut vc)
                .unwrap()
                .wait()
                .unwrap();
        }
        let (mut wk, mut wv) = (vec![SENTINEL; n], vec![SENTINEL; n]);
        let idx = r::Index::Contiguous {
            batch: &batch,
            pos: &pos,
        };
        r::write(
            &k,
            &v,
            hkv as usize,
            d as usize,
            idx,
            (b as usize, s as usize),
            &mut wk,
            &mut wv,
        );
        assert_eq!(down(&kc), wk, "k cache t={t}");
        assert_eq!(down(&vc), wv, "v cache t={t}");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_api_matches_reference_and_leaves_other_entries() {
        let Some((dev, stream)) = gpu_device("kv_cache host_api_matches_reference") else {
            return;
        };
        for (t, hkv, d) in [
            (1, 1, 16),
            (7, 2, 64),
            (77, 3, 80),
            (1000, 8, 128),
            (33, 1, 256),
        ] {
            for hf in [false, true] {
                paged::<bf16, i64>(&dev, &stream, (t, hkv, d), hf);
                paged::<f32, i32>(&dev, &stream, (t, hkv, d), hf);
                contiguous::<bf16>(&dev, &stream, (t, hkv, d), hf);
                contiguous::<f32>(&dev, &stream, (t, hkv, d), hf);
            }
        }
    }
}
