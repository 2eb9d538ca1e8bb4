//! The split-row softmax (`softmax_split_stats` + `softmax_split_apply`, few wide rows split across
//! blocks through an f32 scratch operand):
//!
//! - when the configuration table picks it, its split counts, and the plans (two launches on the grid
//!   `(rows, splits, 1)`, the scratch as operand 2, described when planning without a device);
//! - IR of both kernels pinned as insta snapshots and verified;
//! - both kernels compiled by tileiras for sm_80, sm_90, sm_100 and sm_120 (skipped without tileiras);
//! - GPU runs through the host API on ragged shapes and -inf entries, f32/f16/bf16, against the CPU
//!   reference, and every split candidate through a tuning trial (ignored without `--include-ignored`;
//!   skipped without a GPU).

#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use cutile::dsl::TensorMeta;
use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::op::{CallSpec, Operand, PlannedArg, Target, ceil_div};
use cutile_kernels::softmax::{self, SoftmaxConfig, Variant, config, kernels as sm};
use half::{bf16, f16};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn d(name: &'static str, i: usize, dt: ScalarType, shape: &[i64]) -> Operand {
    Operand::described(name, i, dt, shape)
}

fn call(dtype: &str, shape: &[i64]) -> CallSpec {
    CallSpec::new(softmax::OP, dtype, &[shape], false)
}

// ---------------------------------------------------------------------------------------------------------
// Configuration and plans (CPU).

#[test]
fn split_is_chosen_for_fewer_rows_than_sms_and_wide_rows() {
    let t = target();
    let sms = i64::from(t.sm_count);
    assert_eq!(sms, 132);
    let c = config::choose(&t, BF16, 16, 131072);
    assert_eq!(c.variant, Variant::Split);
    assert_eq!(c.bn, config::SPLIT_CHUNK);
    // 32 chunks of 4096 in 32 splits of 1: 512 blocks on 132 SMs (instead of 16).
    assert_eq!(c.splits, 32);
    assert_eq!(
        cutile_kernels::op::tuning::Candidate::name(&c),
        "softmax_split BN=4096 splits=32"
    );
    for dt in [F32, F16, BF16] {
        assert_eq!(config::choose(&t, dt, 1, 16384).variant, Variant::Split);
        assert_eq!(config::choose(&t, dt, 131, 16384).variant, Variant::Split);
        // As many rows as SMs, or rows under 16384 columns: unchanged.
        assert_eq!(config::choose(&t, dt, 132, 16384).variant, Variant::Gather);
        assert_eq!(
            config::choose(&t, dt, 132, 131072).variant,
            Variant::GatherOnline
        );
        assert_eq!(config::choose(&t, dt, 16, 16383).variant, Variant::Gather);
        assert_eq!(config::choose(&t, dt, 1, 1000).variant, Variant::Gather);
    }
    // The SM count is the target's: 100 rows split on 132 SMs, not on 84.
    assert_eq!(config::choose(&t, BF16, 100, 65536).variant, Variant::Split);
    let small = Target::planning(GpuArch::Sm120);
    assert_eq!(small.sm_count, 84);
    assert_eq!(
        config::choose(&small, BF16, 100, 65536).variant,
        Variant::GatherOnline
    );
    // Ragged and single-row shapes.
    assert_eq!(config::choose(&t, F32, 3, 70001).splits, 9);
    assert_eq!(config::choose(&t, F32, 1, 20000).splits, 3);
}

#[test]
fn split_counts_cover_the_row_without_empty_or_narrow_splits() {
    let t = target();
    let sms = i64::from(t.sm_count);
    for rows in [1i64, 2, 3, 7, 16, 33, 64, 100, 131] {
        for cols in [
            16384i64,
            20000,
            32768,
            65536,
            70001,
            131072,
            262144,
            1 << 20,
            3 << 22,
        ] {
            let c = config::choose(&t, BF16, rows, cols);
            assert_eq!(c.variant, Variant::Split, "{rows}x{cols}");
            let chunks = ceil_div(cols, c.bn);
            let per = config::chunks_per_split(cols, c.bn, c.splits);
            let what = format!("{rows}x{cols}: splits {} per {per}", c.splits);
            assert!(c.splits >= 1 && c.splits <= config::MAX_SPLITS, "{what}");
            // The kernels' `per` gives exactly `splits` non-empty splits covering every chunk.
            assert_eq!(ceil_div(chunks, per), c.splits, "{what}");
            assert!((c.splits - 1) * per < chunks, "{what}");
            // Every split but the last has at least 4096 columns.
            assert!(per * c.bn >= config::SPLIT_COLS, "{what}");
            // About 4x the SM count of blocks (the default's aim), never past 6x.
            assert!(rows * c.splits <= 6 * sms, "{what}");
            // Enough blocks whenever the row is wide enough: at least one per SM or one per 4096 columns.
            assert!(
                rows * c.splits >= (sms.min(rows * (cols / config::SPLIT_COLS))) / 2,
                "{what}"
            );
        }
    }
}

#[test]
fn split_candidates_are_tuning_candidates_for_split_shapes_only() {
    let t = target();
    let c = config::candidates(&t, BF16, 16, 131072);
    assert_eq!(c[0], config::choose(&t, BF16, 16, 131072));
    let splits: Vec<&SoftmaxConfig> = c.iter().filter(|c| c.variant == Variant::Split).collect();
    assert!(splits.len() >= 3, "{c:?}");
    assert!(splits.iter().any(|c| c.bn == 2048) && splits.iter().any(|c| c.bn == 8192));
    // The former default stays a candidate.
    assert!(
        c.iter()
            .any(|c| c.variant == Variant::GatherOnline && c.bn == config::GATHER_CHUNK)
    );
    let names: std::collections::HashSet<String> = c
        .iter()
        .map(cutile_kernels::op::tuning::Candidate::name)
        .collect();
    assert_eq!(names.len(), c.len(), "candidate names must be distinct");
    for (rows, cols) in [(132i64, 131072i64), (4096, 8192), (16, 8192), (1, 1)] {
        assert!(
            config::candidates(&t, BF16, rows, cols)
                .iter()
                .all(|c| c.variant != Variant::Split),
            "{rows}x{cols}"
        );
    }
}

#[test]
fn split_plans_two_launches_with_a_scratch_operand() {
    let t = target();
    let planned = call("bf16", &[16, 131072]).plan(&t, false).unwrap();
    assert_eq!(planned.operands.len(), 3);
    let stats = &planned.operands[2];
    assert_eq!((stats.name, stats.dtype), ("stats", F32));
    // 16 rows x 32 splits (a multiple of 16) x (max, sum).
    assert_eq!(stats.shape, vec![16 * 32 * 2]);
    assert_eq!(planned.launches.len(), 2);
    for l in &planned.launches {
        assert_eq!(l.grid, Some((16, 32, 1)));
        assert_eq!(l.config, "softmax_split BN=4096 splits=32");
    }
    let arg = |a: &PlannedArg| match a {
        PlannedArg::Tensor {
            operand,
            output,
            shape,
            strides,
            ..
        } => format!(
            "{operand}{shape:?}{strides:?}{}",
            if *output { "out" } else { "" }
        ),
        other => format!("{other:?}"),
    };
    let args = |i: usize| -> Vec<String> { planned.launches[i].args.iter().map(arg).collect() };
    assert_eq!(
        args(0),
        [
            "0[16, 131072][131072, 1]",
            "I32(1)",
            "2[16, 32, 2][64, 2, 1]out"
        ]
    );
    assert_eq!(
        args(1),
        [
            "0[16, 131072][131072, 1]",
            "2[16, 32, 2][64, 2, 1]",
            "I32(1)",
            "1[16, 131072][131072, 1]out"
        ]
    );
    // All candidates: the scratch covers the largest (4x the SMs in 4096-wide chunks: 32 splits).
    let all = call("bf16", &[16, 131072]).plan(&t, true).unwrap();
    assert_eq!(all.operands[2].shape, vec![16 * 32 * 2]);
    assert!(all.launches.len() > 10);

    // Without the scratch operand a split plan is a typed error naming the fix; other shapes need none.
    let xy = [
        d("x", 0, BF16, &[16, 131072]),
        d("y", 1, BF16, &[16, 131072]),
    ];
    let err = softmax::plan(&xy, &t, false).unwrap_err().to_string();
    assert!(
        err.contains("scratch operand `stats`") && err.contains("with_scratch"),
        "{err}"
    );
    let small = [
        d("x", 0, BF16, &[1000, 1023]),
        d("y", 1, BF16, &[1000, 1023]),
    ];
    assert_eq!(softmax::with_scratch(&small, &t, true).unwrap().len(), 2);
    let mut bad = softmax::with_scratch(&xy, &t, false).unwrap();
    bad[2].dtype = BF16;
    let err = softmax::plan(&bad, &t, false).unwrap_err().to_string();
    assert!(err.contains("`stats`"), "{err}");
    let mut short = softmax::with_scratch(&xy, &t, false).unwrap();
    short[2].shape = vec![100];
    let err = softmax::plan(&short, &t, false).unwrap_err().to_string();
    assert!(err.contains("at least 1024 elements"), "{err}");
}

#[test]
fn split_cubins_do_not_depend_on_the_split_count() {
    // 16 rows take 32 splits, 32 rows 16: the stats view is padded to a multiple of 16 splits, so both
    // calls share their cubins (the same launcher keys).
    let keys = |shape: &[i64]| -> Vec<String> {
        cutile_kernels::op::registry::launcher_plans(
            &[call("bf16", shape)],
            GpuArch::Sm90,
            cutile::launch::NO_TOOLCHAIN,
            false,
        )
        .unwrap()
        .into_iter()
        .map(|(_, p)| p.key.hex())
        .collect()
    };
    assert_eq!(config::choose(&target(), BF16, 16, 131072).splits, 32);
    assert_eq!(config::choose(&target(), BF16, 32, 131072).splits, 16);
    assert_eq!(keys(&[16, 131072]), keys(&[32, 131072]));
}

// ---------------------------------------------------------------------------------------------------------
// IR and tileiras.

fn split_arrays(dtype: ScalarType, rows: i64, cols: i64, sp: i64) -> [Vec<TensorMeta>; 2] {
    let x = t(dtype, &[rows, cols]);
    let stats = t(F32, &[rows, sp, 2]);
    [
        vec![x.clone(), stats.clone()],
        vec![x.clone(), stats, t(dtype, &[rows, cols])],
    ]
}

/// (name, kernel, arrays, snapshot it?).
fn cases() -> Vec<common::IrCase> {
    let [s_bf16, a_bf16] = split_arrays(BF16, 16, 131072, 16);
    let [s_f32, a_f32] = split_arrays(F32, 3, 70001, 16);
    let [s_f16, a_f16] = split_arrays(F16, 1, 20000, 16);
    vec![
        (
            "softmax_split_stats_bf16_4096",
            sm::softmax_split_stats::kernel::<bf16, 4096>(),
            s_bf16,
            true,
        ),
        (
            "softmax_split_apply_bf16_4096",
            sm::softmax_split_apply::kernel::<bf16, 4096>(),
            a_bf16,
            true,
        ),
        (
            "softmax_split_stats_f32_2048_ragged",
            sm::softmax_split_stats::kernel::<f32, 2048>(),
            s_f32,
            false,
        ),
        (
            "softmax_split_apply_f32_2048_ragged",
            sm::softmax_split_apply::kernel::<f32, 2048>(),
            a_f32,
            false,
        ),
        (
            "softmax_split_stats_f16_8192",
            sm::softmax_split_stats::kernel::<f16, 8192>(),
            s_f16,
            false,
        ),
        (
            "softmax_split_apply_f16_8192",
            sm::softmax_split_apply::kernel::<f16, 8192>(),
            a_f16,
            false,
        ),
    ]
}

#[test]
fn split_ir_snapshots_verify() {
    for (name, k, arrays, snap) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = s.ir_text();
        // Gathers and scatters only, approximate exp, one chunk loop per kernel.
        assert!(
            !text.contains("load_view_tko") && !text.contains("store_view_tko"),
            "{name}"
        );
        assert!(
            text.contains("load_ptr_tko") && text.contains("store_ptr_tko"),
            "{name}"
        );
        if snap {
            insta::assert_snapshot!(name, text);
        }
    }
}

#[test]
fn split_compile_four_archs() {
    common::compile_four_archs(
        "split_compile_four_archs",
        cases().into_iter().map(|(n, k, a, _)| (n, k, a)),
    );
}

// ---------------------------------------------------------------------------------------------------------
// GPU runs through the host API.

/// `rows x cols` inputs in [-4, 4) with -inf entries when `neg_inf`: every 7th element, the first 9000
/// columns of row 0 (so a whole split of 8192 columns is only -inf) and all of row 1 (NaN, like torch).
fn input(rows: usize, cols: usize, neg_inf: bool) -> Vec<f32> {
    let mut x: Vec<f32> = data(rows * cols, 5).iter().map(|v| 4.0 * v).collect();
    if neg_inf {
        for (i, v) in x.iter_mut().enumerate() {
            let (r, c) = (i / cols, i % cols);
            if i % 7 == 3 || (r == 0 && c < 9000) || r == 1 {
                *v = f32::NEG_INFINITY;
            }
        }
    }
    x
}

/// Runs `softmax` on `shape` through the host API (and, when `trial`, every split candidate through a
/// tuning trial on the same operands); `Err` names what disagreed with the reference.
fn run_shape<T: cutile::runtime::DeviceElement>(
    dev: &cutile::runtime::Device,
    stream: &cutile::runtime::Stream,
    dtype: ScalarType,
    shape: [i64; 2],
    neg_inf: bool,
    trial: bool,
) -> Result<(), String> {
    use cutile::runtime::Tensor;
    use cutile::tune::Trial;
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    let x: Vec<f32> = input(rows, cols, neg_inf)
        .into_iter()
        .map(|v| T::from_f64(v as f64).to_f64() as f32)
        .collect();
    let want = softmax::row_softmax_reference(&x, cols);
    let host: Vec<T> = x.iter().map(|&v| T::from_f64(v as f64)).collect();
    let tx = Tensor::from_host(dev, &host, &shape).unwrap();
    let mut ty = Tensor::<T>::zeros(dev, &shape).unwrap();
    softmax::softmax(stream, &tx, &mut ty)
        .unwrap()
        .wait()
        .unwrap();
    let got: Vec<f32> = ty
        .to_host()
        .unwrap()
        .into_iter()
        .map(|v| v.to_f64() as f32)
        .collect();
    let abs_tol = match dtype {
        F32 => 1e-5,
        F16 => 1e-3,
        _ => 8e-3,
    };
    let rel_tol = cutile_kernels::tolerance(dtype);
    let check = |what: &str, got: &[f32]| -> Result<(), String> {
        let abs = max_abs_err(got, &want);
        let rel = cutile_kernels::op::tuning::rel_l2(got, &want);
        println!("{what}: max abs {abs:e}, rel l2 {rel:e}");
        if abs <= abs_tol && rel <= rel_tol {
            Ok(())
        } else {
            Err(format!("{what}: max abs {abs:e}, rel l2 {rel:e}"))
        }
    };
    let label = format!("{dtype} {shape:?}{}", if neg_inf { " -inf" } else { "" });
    check(&label, &got)?;
    if !trial {
        return Ok(());
    }
    // Every split candidate through a tuning trial: the output (operand 1) goes to the trial's scratch,
    // the stats (operand 2) stay the stream's scratch buffer.
    let target = Target::of(dev).unwrap();
    let (r, c) = (shape[0], shape[1]);
    let cands: Vec<SoftmaxConfig> = config::candidates(&target, dtype, r, c)
        .into_iter()
        .filter(|c| c.variant == Variant::Split)
        .collect();
    let need = cands
        .iter()
        .map(|cfg| softmax::scratch_len(cfg, r, c))
        .max()
        .unwrap();
    let stats =
        cutile_kernels::op::scratch::scratch(stream, "stats", cutile_ir::ScalarType::F32, need)
            .unwrap();
    let operands = vec![Operand::of("x", &tx), Operand::of("y", &ty), stats];
    let mut trial = cutile_kernels::op::tuning::DeviceTrial::new(
        stream,
        &operands,
        1,
        rel_tol,
        true,
        |cfg: &SoftmaxConfig, ops: &[Operand]| softmax::plan_config(cfg, ops, &target),
    )
    .unwrap();
    for cfg in &cands {
        let got = trial
            .run(cfg)
            .map_err(|e| format!("{label} {cfg:?}: {e}"))?;
        check(
            &format!(
                "{label} {}",
                cutile_kernels::op::tuning::Candidate::name(cfg)
            ),
            &got,
        )?;
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_split_softmax_matches_reference() {
    let Some((dev, stream)) = gpu_device("gpu_split_softmax_matches_reference") else {
        return;
    };
    let mut failures = vec![];
    for dtype in [F32, F16, BF16] {
        for (shape, neg_inf, trial) in [
            ([16i64, 131072], false, true),
            ([3, 70001], false, true),
            ([1, 20000], true, false),
            ([2, 20000], true, true),
        ] {
            let r = match dtype {
                F32 => run_shape::<f32>(&dev, &stream, dtype, shape, neg_inf, trial),
                F16 => run_shape::<f16>(&dev, &stream, dtype, shape, neg_inf, trial),
                _ => run_shape::<bf16>(&dev, &stream, dtype, shape, neg_inf, trial),
            };
            if let Err(e) = r {
                failures.push(e);
            }
        }
    }
    // The scratch is per stream, grown once per size class and reused.
    assert!(cutile_kernels::op::scratch::held_bytes(&stream) > 0);
    assert!(failures.is_empty(), "mismatches: {failures:#?}");
}
