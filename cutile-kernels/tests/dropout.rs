//! Dropout: Philox-4x32-10 against the Random123 known-answer vectors, the mask's statistics (p = 0
//! keeps all, p = 1 none, the keep rate within 5σ of 1 - p over a million elements, offsets shift the
//! stream), the planner without a GPU (typed errors, empty calls), the tuning candidates (default first,
//! distinct, each planned with a kernel), every representative call compiled by tileiras (sm_90; one for
//! sm_80/90/100/120) and the bench call's tuning candidates (sm_90), and GPU tests comparing the
//! kernel's mask bit for bit with the CPU reference (`#[ignore]`d; skipped without a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::*;
use cutile_kernels::dropout::{self, DropoutConfig, DropoutParams, config, reference as r};
use cutile_kernels::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

#[test]
fn philox_known_answers() {
    // Random123's kat_vectors for philox4x32_10.
    assert_eq!(
        r::philox4x32_10([0; 4], [0; 2]),
        [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    );
    assert_eq!(
        r::philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
        [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
    );
    assert_eq!(
        r::philox4x32_10(
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0]
        ),
        [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    );
}

#[test]
fn mask_statistics_and_reproducibility() {
    let n = 1 << 20;
    assert!(r::mask(n, 0.0, 7, 0).iter().all(|&k| k), "p = 0 keeps all");
    assert!(
        r::mask(n, 1.0, 7, 0).iter().all(|&k| !k),
        "p = 1 keeps none"
    );
    let x: Vec<f32> = (0..1000).map(|i| i as f32 - 500.0).collect();
    assert_eq!(r::dropout(&x, 0.0, 3, 9), x, "p = 0 is the identity");
    assert!(r::dropout(&x, 1.0, 3, 9).iter().all(|&v| v == 0.0));
    for p in [0.1f32, 0.5, 0.9] {
        let kept = r::mask(n, p, 1234, 0).iter().filter(|&&k| k).count() as f64;
        let q = 1.0 - p as f64;
        let sigma = (n as f64 * q * (1.0 - q)).sqrt();
        assert!(
            (kept - n as f64 * q).abs() < 5.0 * sigma,
            "p = {p}: kept {kept} of {n}"
        );
        // Kept values are x / (1 - p), dropped ones 0.
        let y = r::dropout(&x, p, 1234, 0);
        let s = 1.0 / (1.0 - p);
        assert!(y.iter().zip(&x).all(|(&y, &x)| y == 0.0 || y == x * s));
    }
    // Deterministic; another seed or offset gives another mask; an offset shifts the stream.
    let a = r::mask(4096, 0.5, 42, 0);
    assert_eq!(a, r::mask(4096, 0.5, 42, 0));
    assert_ne!(a, r::mask(4096, 0.5, 43, 0));
    assert_ne!(a, r::mask(4096, 0.5, 42, 4096));
    assert_eq!(&a[100..], &r::mask(4096 - 100, 0.5, 42, 100)[..]);
    // Counters past 2^35 (group counters past 2^32) use the high word.
    assert_ne!(
        r::random_bits(5, 1 << 35, 0),
        r::random_bits(5, 0, 0),
        "the high counter word matters"
    );
}

/// Element `c = offset + i` takes half `c mod 2` of word `(c / 2) mod 4` of Philox of the group
/// counter `c / 8`: all eight halves are used, and the mask (which caches a group's words) agrees
/// with element-wise bits.
#[test]
fn eight_elements_share_one_philox_call() {
    let (seed, key) = (0x1234_5678_9ABC_DEF0u64, [0x9ABC_DEF0u32, 0x1234_5678]);
    for (offset, i, group, word, high) in [
        (0u64, 0u64, 0u32, 0usize, false),
        (0, 1, 0, 0, true),
        (0, 2, 0, 1, false),
        (0, 7, 0, 3, true),
        (0, 8, 1, 0, false),
        (8, 5, 1, 2, true),
        (4096, 7, 512, 3, true),
    ] {
        let w = r::philox4x32_10([group, 0, 0, 0], key)[word];
        let want = if high { w >> 16 } else { w & 0xFFFF } as u16;
        assert_eq!(
            r::random_bits(seed, offset, i),
            want,
            "offset {offset}, element {i}"
        );
    }
    for (n, p, offset) in [
        (1usize, 0.5f32, 0u64),
        (7, 0.3, 8),
        (1001, 0.5, 24),
        (4099, 0.9, 0),
    ] {
        let t = r::threshold(p);
        let each: Vec<bool> = (0..n as u64)
            .map(|i| r::random_bits(seed, offset, i) as u32 >= t)
            .collect();
        assert_eq!(r::mask(n, p, seed, offset), each, "n {n}, offset {offset}");
    }
    // The threshold is p on the 2^-16 grid, with both ends exact.
    assert_eq!(r::threshold(0.0), 0);
    assert_eq!(r::threshold(1.0), 65536);
    assert_eq!(r::threshold(0.1), 6554);
}

fn params(p: f32) -> DropoutParams {
    DropoutParams {
        p,
        seed: 1,
        offset: 0,
    }
}

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

#[test]
fn planner_errors_and_empty_calls() {
    let t = target();
    let ok = dropout::described_call(dropout::OP, BF16, &[vec![4, 100]]).unwrap();
    let l = dropout::plan(dropout::OP, &ok, &t, params(0.5)).unwrap();
    assert_eq!(l.len(), 1);
    // A multiple of 8 elements: the [n / 8, 8] row kernel (rows = Philox groups); else the flat one.
    assert_eq!(l[0].config, "dropout_rows BN=256");
    let odd = dropout::described_call(dropout::OP, BF16, &[vec![3, 1001]]).unwrap();
    let l = dropout::plan(dropout::OP, &odd, &t, params(0.5)).unwrap();
    assert_eq!(l[0].config, "dropout BN=256");
    let big = dropout::described_call(dropout::OP, BF16, &[vec![4096, 4096]]).unwrap();
    let l = dropout::plan(dropout::OP, &big, &t, params(0.5)).unwrap();
    assert_eq!(l[0].config, "dropout_rows BN=4096");
    match &l[0].args[0] {
        PlannedArg::Tensor { shape, strides, .. } => {
            assert_eq!(
                (shape.as_slice(), strides.as_slice()),
                (&[4096 * 512, 8][..], &[8, 1][..])
            );
        }
        other => panic!("x is passed as {other:?}"),
    }
    for p in [-0.1, 1.5, f32::NAN] {
        expect_error(dropout::plan(dropout::OP, &ok, &t, params(p)), "[0, 1]");
    }
    let mut o = ok.clone();
    o[1] = Operand::described("y", 1, F32, &[4, 100]);
    expect_error(dropout::plan(dropout::OP, &o, &t, params(0.5)), "y");
    let mut o = ok.clone();
    o[0].strides = vec![1, 4];
    expect_error(
        dropout::plan(dropout::OP, &o, &t, params(0.5)),
        "contiguous",
    );
    expect_error(
        dropout::plan(dropout::OP, &ok[..1], &t, params(0.5)),
        "takes 2",
    );
    expect_error(dropout::plan("relu", &ok, &t, params(0.5)), "neither");
    let unaligned = DropoutParams {
        offset: 6,
        ..params(0.5)
    };
    expect_error(
        dropout::plan(dropout::OP, &ok, &t, unaligned),
        "multiple of 8",
    );
    let empty = dropout::described_call(dropout::BACKWARD, F16, &[vec![0, 8]]).unwrap();
    assert!(
        dropout::plan(dropout::BACKWARD, &empty, &t, params(0.5))
            .unwrap()
            .is_empty()
    );
    for op in [dropout::OP, dropout::BACKWARD] {
        assert_eq!(
            cutile_kernels::op::registry::find(op).unwrap().family,
            "dropout"
        );
    }
    for c in dropout::representative_calls() {
        assert_eq!(c.plan(&t, false).unwrap().launches.len(), 1);
    }
    let jobs = cutile_kernels::catalog::dsl_jobs(&dropout::representative_calls(), false).unwrap();
    println!("dropout: {} catalog specializations", jobs.len());
    assert!(jobs.len() <= 4, "{} specializations", jobs.len());
}

/// Data-driven: (element count, candidate tiles, kernel). The row kernel past the tiny tile offers every
/// row tile from 512 to 4096, the default first; tiny inputs and the flat kernel only their default. Each candidate
/// plans (its kernel exists and specializes), and `plan_with(.., true)` lists them in order.
#[test]
fn tuning_candidates_start_with_the_default_and_plan() {
    let t = target();
    let cases: &[(i64, &[i64], &str)] = &[
        (1, &[256], "dropout"),
        (8, &[256], "dropout_rows"),
        (4096, &[256], "dropout_rows"),
        (4097, &[1024], "dropout"),
        (4104, &[1024, 512, 2048, 4096], "dropout_rows"),
        (config::LARGE - 8, &[1024, 512, 2048, 4096], "dropout_rows"),
        (config::LARGE, &[4096, 512, 1024, 2048], "dropout_rows"),
        (config::LARGE + 1, &[4096], "dropout"),
        (16384 * 4096, &[4096, 512, 1024, 2048], "dropout_rows"),
    ];
    for &(n, want, kernel) in cases {
        let c = config::candidates(n, n % 8 == 0);
        let bns: Vec<i64> = c.iter().map(|c| c.bn).collect();
        assert_eq!(bns, want, "n = {n}");
        assert_eq!(c[0], config::choose(n), "n = {n}: default first");
        let ops = dropout::described_call(dropout::OP, BF16, &[vec![n]]).unwrap();
        let all = dropout::plan_with(dropout::OP, &ops, &t, params(0.5), true).unwrap();
        assert_eq!(all.len(), c.len());
        assert_eq!(
            all[0].config,
            dropout::plan(dropout::OP, &ops, &t, params(0.5)).unwrap()[0].config
        );
        for (l, cfg) in all.iter().zip(&c) {
            assert_eq!(l.config, format!("{kernel} BN={}", cfg.bn));
            assert!(kernel == "dropout" || config::ROW_TILES.contains(&cfg.bn));
            let one = dropout::plan_config(dropout::BACKWARD, &ops, &t, params(0.5), cfg).unwrap();
            assert_eq!(one[0].config, l.config);
            // SAFETY: described operands are never launched.
            let metas = unsafe { cutile_kernels::op::describe(l, &ops) }.tensor_metas();
            let s = l.kernel.specialize(&metas);
            assert!(s.is_ok(), "n = {n} {}: {:?}", l.config, s.err());
        }
    }
    let ops = dropout::described_call(dropout::OP, F32, &[vec![64]]).unwrap();
    expect_error(
        dropout::plan_config(
            dropout::OP,
            &ops,
            &t,
            params(0.5),
            &DropoutConfig { bn: 768 },
        ),
        "BN = 768",
    );
    assert_eq!(config::class(BF16, 1 << 26, true), "bf16 rows BN=4096");
    assert_ne!(
        config::class(BF16, 1 << 26, true),
        config::class(BF16, 1000, true)
    );
}

/// The bench call's non-default tuning candidates compile (the tuning run's bundle holds them).
#[test]
fn bench_call_candidates_compile_for_sm90() {
    let ops = dropout::described_call(dropout::OP, BF16, &[vec![16384, 4096]]).unwrap();
    let cases: Vec<_> = dropout::plan_with(dropout::OP, &ops, &target(), params(0.1), true)
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
    assert_eq!(cases.len(), 3);
    common::compile_all_sm90("dropout bench_call_candidates_compile_for_sm90", cases);
}

#[test]
fn representative_calls_compile_for_sm90() {
    common::compile_all_sm90(
        "dropout representative_calls_compile_for_sm90",
        common::catalog_jobs(&dropout::representative_calls()),
    );
}

#[test]
fn compile_four_archs() {
    common::compile_four_archs(
        "dropout compile_four_archs",
        common::catalog_jobs(&dropout::representative_calls()[..1]),
    );
}

mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::bf16;

    /// The kernel's output on `x` (values of `T`) equals the reference bit for bit (the product in f32,
    /// then rounded to `T`), so its mask is the reference's.
    fn case<T: DeviceElement>(dev: &Device, s: &Stream, shape: &[i64], p: DropoutParams) {
        let n: i64 = shape.iter().product();
        let x: Vec<f32> = common::data::uniform(n as usize, 5, -2.0, 2.0)
            .iter()
            .map(|&v| T::from_f64(v as f64).to_f64() as f32)
            .collect();
        let h: Vec<T> = x.iter().map(|&v| T::from_f64(v as f64)).collect();
        let xd = Tensor::from_host(dev, &h, shape).unwrap();
        let mut y = Tensor::<T>::full(dev, shape, T::from_f64(3.0)).unwrap();
        dropout::dropout(s, &xd, p, &mut y).unwrap().wait().unwrap();
        let got: Vec<f32> = y
            .to_host()
            .unwrap()
            .into_iter()
            .map(|v| v.to_f64() as f32)
            .collect();
        let want: Vec<f32> = r::dropout(&x, p.p, p.seed, p.offset)
            .into_iter()
            .map(|v| T::from_f64(v as f64).to_f64() as f32)
            .collect();
        assert!(
            got == want,
            "{shape:?} {p:?}: output differs from the reference"
        );
        // The backward applies the same mask.
        let mut dx = Tensor::<T>::zeros(dev, shape).unwrap();
        dropout::dropout_backward(s, &xd, p, &mut dx)
            .unwrap()
            .wait()
            .unwrap();
        let back: Vec<f32> = dx
            .to_host()
            .unwrap()
            .into_iter()
            .map(|v| v.to_f64() as f32)
            .collect();
        assert!(back == got, "{shape:?}: backward mask differs");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn masks_match_reference_bit_for_bit() {
        let Some((dev, s)) = gpu_device("dropout masks_match_reference_bit_for_bit") else {
            return;
        };
        for (shape, p, seed, offset) in [
            (&[1i64][..], 0.5, 1u64, 0u64),
            (&[3, 1001], 0.1, 42, 0),
            (&[77], 0.0, 9, 0),
            (&[77], 1.0, 9, 0),
            (
                &[2, 4096, 513],
                0.3,
                0xDEAD_BEEF_0123_4567,
                // Group counters cross 2^32 inside the call.
                (1 << 35) - 1000,
            ),
            (&[4096, 4096], 0.5, 7, 128),
            (&[5, 12], 0.5, 7, 8),
        ] {
            let p = DropoutParams { p, seed, offset };
            case::<f32>(&dev, &s, shape, p);
            case::<bf16>(&dev, &s, shape, p);
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn keep_rate_on_device() {
        let Some((dev, s)) = gpu_device("dropout keep_rate_on_device") else {
            return;
        };
        let n = 1i64 << 24;
        let ones = Tensor::<f32>::full(&dev, &[n], 1.0).unwrap();
        for p in [0.1f32, 0.5] {
            let mut y = Tensor::<f32>::zeros(&dev, &[n]).unwrap();
            let prm = DropoutParams {
                p,
                seed: 99,
                offset: 0,
            };
            dropout::dropout(&s, &ones, prm, &mut y)
                .unwrap()
                .wait()
                .unwrap();
            let kept = y.to_host().unwrap().iter().filter(|&&v| v != 0.0).count() as f64;
            let q = 1.0 - p as f64;
            let sigma = (n as f64 * q * (1.0 - q)).sqrt();
            assert!((kept - n as f64 * q).abs() < 5.0 * sigma, "p = {p}: {kept}");
        }
    }
}
