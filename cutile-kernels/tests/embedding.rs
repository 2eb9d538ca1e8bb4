//! The embedding family: the CPU reference (rows copied, out-of-range ids give zeros), the planner
//! without a GPU (typed errors, empty calls, tiles), every representative call compiled by tileiras
//! (sm_90; one kernel for sm_80/90/100/120), and a GPU test through the host API (`#[ignore]`d; skipped
//! without a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used, clippy::needless_range_loop)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::embedding::{self, reference as r};
use cutile_kernels::op::{OpError, Operand, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

#[test]
fn reference_copies_rows_and_zeroes_out_of_range_ids() {
    let table: Vec<f32> = (0..12).map(|i| i as f32).collect(); // [4, 3]
    let out = r::embedding(&table, 3, &[2, -1, 0, 4, 3, i64::MAX]);
    assert_eq!(
        out,
        [
            6., 7., 8., 0., 0., 0., 0., 1., 2., 0., 0., 0., 9., 10., 11., 0., 0., 0.
        ]
    );
}

fn described(dt: ScalarType, tab: [i64; 2], t: i64, i64_ids: bool) -> Vec<Operand> {
    embedding::described_call(dt, &[tab.to_vec(), vec![t], vec![i64_ids as i64]]).unwrap()
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
    let ok = described(BF16, [1000, 4096], 10, false);
    let l = embedding::plan(&ok, &t).unwrap();
    assert_eq!(l.len(), 1);
    assert!(l[0].grid.is_none(), "the tiles of `out`");
    let mut o = ok.clone();
    o[2] = Operand::described("out", 2, BF16, &[10, 4095]);
    expect_error(embedding::plan(&o, &t), "`out` must be [T, D]");
    let mut o = ok.clone();
    o[2] = Operand::described("out", 2, F32, &[10, 4096]);
    expect_error(embedding::plan(&o, &t), "must match `table`");
    let mut o = ok.clone();
    o[1] = Operand::described("ids", 1, F32, &[10]);
    expect_error(embedding::plan(&o, &t), "i32, i64");
    let mut o = ok.clone();
    o[1] = Operand::described("ids", 1, I32, &[10, 1]);
    expect_error(embedding::plan(&o, &t), "`ids` must have 1 dimensions");
    expect_error(embedding::plan(&ok[..2], &t), "takes 3 tensors");
    assert!(
        embedding::plan(&described(F32, [10, 64], 0, true), &t)
            .unwrap()
            .is_empty()
    );
    assert!(
        embedding::plan(&described(F32, [0, 64], 5, true), &t)
            .unwrap()
            .len()
            == 1
    );
    assert!(
        embedding::plan(&described(F32, [10, 0], 5, true), &t)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn tiles_follow_tokens_and_width() {
    let t = target();
    for (tab, tokens, want) in [
        ([128256, 4096], 16384, "embedding BM=4 BN=1024"),
        ([128256, 4096], 8, "embedding BM=1 BN=1024"),
        ([1000, 100], 77, "embedding BM=32 BN=128"),
        ([1000, 300], 500, "embedding BM=8 BN=512"),
    ] {
        let l = embedding::plan(&described(F16, tab, tokens, false), &t).unwrap();
        assert_eq!(l[0].config, want);
    }
}

#[test]
fn the_op_is_in_the_registry() {
    assert_eq!(
        cutile_kernels::op::registry::find(embedding::OP)
            .unwrap()
            .family,
        "embedding"
    );
    for c in embedding::representative_calls() {
        assert_eq!(c.plan(&target(), false).unwrap().launches.len(), 1);
    }
}

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "embedding representative_calls_compile_for_sm90",
        common::catalog_jobs(&embedding::representative_calls()),
    );
}

#[test]
fn compile_four_archs() {
    common::compile_four_archs(
        "embedding compile_four_archs",
        common::catalog_jobs(&embedding::representative_calls()[..1]),
    );
}

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::bf16;

    fn case<T: DeviceElement, I: DeviceElement>(dev: &Device, s: &Stream, v: i64, d: i64, t: i64) {
        let table = cutile_testkit::data::uniform((v * d) as usize, 9, -3.0, 3.0);
        let table: Vec<f32> = table
            .iter()
            .map(|&x| T::from_f64(x as f64).to_f64() as f32)
            .collect();
        let mut rng = cutile_testkit::data::Rng::new(v as u64 ^ t as u64);
        let mut ids: Vec<i64> = (0..t).map(|_| (rng.next_u64() % v as u64) as i64).collect();
        if t > 3 {
            ids[1] = -1;
            ids[3] = v;
        }
        // A table with padded rows (row stride d + 3): a strided view.
        let mut padded = vec![0f32; (v * (d + 3)) as usize];
        for row in 0..v as usize {
            let (a, b) = (row * (d + 3) as usize, row * d as usize);
            padded[a..a + d as usize].copy_from_slice(&table[b..b + d as usize]);
        }
        let h: Vec<T> = padded.iter().map(|&x| T::from_f64(x as f64)).collect();
        let full = Tensor::from_host(dev, &h, &[v, d + 3]).unwrap();
        let tab = full.slice(1, 0..d).unwrap();
        let idh: Vec<I> = ids.iter().map(|&x| I::from_f64(x as f64)).collect();
        let idd = Tensor::from_host(dev, &idh, &[t]).unwrap();
        let mut out = Tensor::<T>::full(dev, &[t, d], T::from_f64(5.0)).unwrap();
        embedding::embedding(s, &tab, &idd, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let got: Vec<f32> = out
            .to_host()
            .unwrap()
            .into_iter()
            .map(|x| x.to_f64() as f32)
            .collect();
        assert_eq!(
            got,
            r::embedding(&table, d as usize, &ids),
            "v={v} d={d} t={t}"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_api_matches_reference() {
        let Some((dev, s)) = gpu_device("embedding host_api_matches_reference") else {
            return;
        };
        for (v, d, t) in [
            (1, 1, 1),
            (10, 7, 3),
            (1000, 100, 77),
            (5000, 4096, 300),
            (32000, 512, 9),
        ] {
            case::<bf16, i64>(&dev, &s, v, d, t);
            case::<f32, i32>(&dev, &s, v, d, t);
        }
    }
}
