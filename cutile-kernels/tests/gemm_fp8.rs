//! The fp8 GEMM (`gemm::fp8`): the planner without a GPU (typed errors, schedules, scale views, the
//! row-major copy of an M-major block-scale `sa`), the registry ops, the catalog's fp8 specializations
//! compiled by tileiras for sm_90/100/120 (and refused on sm_80, which the catalog skips; the f32 `sa`
//! copy compiles there too), the slow `b` layout compiled for sm_90, and GPU tests through the host
//! API against the CPU reference (`#[ignore]`d; skipped without a GPU).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::gemm::fp8::{self, Fp8Format, ScaleMode};
use cutile_kernels::op::{CallSpec, OpError, Operand, PlannedArg, PlannedLaunch, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn expect_error(r: Result<Vec<PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Ok(_) => panic!("expected an error containing `{needle}`"),
        Err(e) => assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`"),
    }
}

fn ops(mode: ScaleMode, m: i64, n: i64, k: i64) -> Vec<Operand> {
    fp8::described_operands(Fp8Format::E4M3, mode, BF16, m, n, k)
}

const MODES: [ScaleMode; 3] = [ScaleMode::Tensor, ScaleMode::Row, ScaleMode::Block];

#[test]
fn bad_calls_are_typed_errors_and_empty_calls_plan_nothing() {
    let t = target();
    let plan = |o: &[Operand], mode| fp8::plan_fp8(o, &t, mode, false, false);
    // Each case: (what it breaks, mode, operands edit, expected words).
    type Edit = fn(&mut Vec<Operand>);
    let cases: &[(ScaleMode, Edit, &str)] = &[
        (
            ScaleMode::Tensor,
            |o| o[0].dtype = BF16,
            "f8e4m3fn or f8e5m2",
        ),
        (ScaleMode::Row, |o| o[1].dtype = F8E5M2, "must match `a`"),
        (ScaleMode::Row, |o| o[4].dtype = F16, "`c`"),
        (ScaleMode::Row, |o| o[2].dtype = BF16, "`sa`"),
        (ScaleMode::Tensor, |o| o.truncate(4), "takes 5 tensors"),
        (
            ScaleMode::Row,
            |o| o[2] = Operand::described("sa", 2, F32, &[257]),
            "one scale per row",
        ),
        (
            ScaleMode::Row,
            |o| o[3] = Operand::described("sb", 3, F32, &[300, 1]),
            "one scale per column",
        ),
        (
            ScaleMode::Tensor,
            |o| o[3] = Operand::described("sb", 3, F32, &[2]),
            "must hold one scale",
        ),
        (
            ScaleMode::Block,
            |o| o[3] = Operand::described("sb", 3, F32, &[3, 3]),
            "[k/128, ceil(n/128)]",
        ),
        (
            ScaleMode::Block,
            |o| o[2] = Operand::described("sa", 2, F32, &[256, 3]),
            "[m, k/128]",
        ),
        (
            ScaleMode::Tensor,
            |o| o[4] = Operand::described("c", 4, BF16, &[256, 301]),
            "`c` must be",
        ),
        (
            ScaleMode::Tensor,
            |o| {
                // `a` as the first 256 columns of rows 264 elements apart: aligned; 263 is not.
                o[0].strides = vec![263, 1];
            },
            "multiple of 16 bytes",
        ),
        // The `sa_rows` scratch of a block-scale call: f32, rank 1, `m · k/128` elements.
        (
            ScaleMode::Block,
            |o| o.push(Operand::described("sa_rows", 5, BF16, &[512])),
            "`sa_rows` has element type bf16",
        ),
        (
            ScaleMode::Block,
            |o| o.push(Operand::described("sa_rows", 5, F32, &[256, 2])),
            "`sa_rows` must have 1 dimensions",
        ),
        (
            ScaleMode::Block,
            |o| {
                o[2].strides = vec![1, 256];
                o.push(Operand::described("sa_rows", 5, F32, &[511]));
            },
            "sa_rows_len",
        ),
        (ScaleMode::Block, |o| o.resize(7, o[0].clone()), "got 7"),
    ];
    for (i, (mode, edit, needle)) in cases.iter().enumerate() {
        let mut o = ops(*mode, 256, 300, 256);
        edit(&mut o);
        match plan(&o, *mode) {
            Ok(_) => panic!("case {i}: expected an error containing `{needle}`"),
            Err(e) => assert!(
                e.to_string().contains(needle),
                "case {i}: `{e}` lacks `{needle}`"
            ),
        }
    }
    // K: a multiple of 16 (128 with block scales).
    expect_error(
        plan(&ops(ScaleMode::Row, 64, 64, 40), ScaleMode::Row),
        "multiple of 16",
    );
    expect_error(
        plan(&ops(ScaleMode::Block, 64, 64, 192), ScaleMode::Block),
        "multiple of 128",
    );
    assert!(plan(&ops(ScaleMode::Row, 64, 64, 48), ScaleMode::Row).is_ok());
    // sm_80: no fp8 tensor cores.
    expect_error(
        fp8::plan_fp8(
            &ops(ScaleMode::Tensor, 64, 64, 64),
            &Target::planning(GpuArch::Sm80),
            ScaleMode::Tensor,
            false,
            false,
        ),
        "sm_80",
    );
    for mode in MODES {
        assert!(plan(&ops(mode, 0, 64, 128), mode).unwrap().is_empty());
        assert!(plan(&ops(mode, 64, 0, 128), mode).unwrap().is_empty());
    }
}

#[test]
fn plans_one_launch_with_scale_views_and_grids() {
    let t = target();
    // Ragged, fewer tiles than SMs: 64-row tiles, one block per tile (16 x 8).
    let o = ops(ScaleMode::Row, 1000, 1000, 512);
    let l = fp8::plan_fp8(&o, &t, ScaleMode::Row, false, false).unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].config, "gemm_fp8 64x128x128 w4");
    assert_eq!(l[0].grid, Some((16 * 8, 1, 1)));
    let view = |a: &PlannedArg| match a {
        PlannedArg::Tensor { shape, strides, .. } => (shape.clone(), strides.clone()),
        _ => panic!("not a tensor"),
    };
    assert_eq!(view(&l[0].args[2]), (vec![1000, 1], vec![1, 1]));
    assert_eq!(view(&l[0].args[3]), (vec![1, 1000], vec![1000, 1]));
    // b is the column-major view of an [n, k] weight.
    assert_eq!(view(&l[0].args[1]), (vec![512, 1000], vec![1, 512]));
    // 4096³: persistent, one block per SM.
    let l = fp8::plan_fp8(
        &ops(ScaleMode::Tensor, 4096, 4096, 4096),
        &t,
        ScaleMode::Tensor,
        false,
        false,
    )
    .unwrap();
    assert_eq!(l[0].config, "gemm_fp8 persistent 128x128x128 w8");
    assert_eq!(l[0].grid, Some((132, 1, 1)));
    assert_eq!(view(&l[0].args[2]), (vec![1, 1], vec![1, 1]));
    // 8192³ block scales: persistent 64x128 tiles, two blocks per SM; the scale tensors as they are.
    let l = fp8::plan_fp8(
        &ops(ScaleMode::Block, 8192, 8192, 8192),
        &t,
        ScaleMode::Block,
        false,
        false,
    )
    .unwrap();
    assert_eq!(l[0].config, "gemm_fp8 persistent 64x128x128 w4 o2 g8 sum");
    assert_eq!(l[0].grid, Some((264, 1, 1)));
    assert_eq!(view(&l[0].args[2]), (vec![8192, 64], vec![64, 1]));
    assert_eq!(view(&l[0].args[3]), (vec![64, 64], vec![64, 1]));
    // Every candidate plans, the default first.
    let all = fp8::plan_fp8(&o, &t, ScaleMode::Row, false, true).unwrap();
    assert!(all.len() >= 4);
    assert_eq!(all[0].config, "gemm_fp8 64x128x128 w4");
    // Per-tensor and per-row scales also run one warpgroup per 64x128 tile at two blocks per SM.
    for mode in [ScaleMode::Tensor, ScaleMode::Row] {
        let o = ops(mode, 8192, 8192, 8192);
        let all = fp8::plan_fp8(&o, &t, mode, false, true).unwrap();
        let o2 = all
            .iter()
            .find(|l| l.config == "gemm_fp8 persistent 64x128x128 w4 o2")
            .unwrap_or_else(|| panic!("{mode:?}: no two-blocks-per-SM candidate"));
        assert_eq!(o2.grid, Some((264, 1, 1)));
        // Tiles split over 2-CTA clusters: a persistent grid of SMs / 2 clusters.
        for config in [
            "gemm_fp8 persistent 256x128x128 w8 c2",
            "gemm_fp8 persistent 256x256x128 w8 c2",
        ] {
            let l = all
                .iter()
                .find(|l| l.config == config)
                .unwrap_or_else(|| panic!("{mode:?}: no candidate `{config}`"));
            assert_eq!(l.grid, Some((66, 1, 1)), "{mode:?} {config}");
        }
    }
    // Block scales add the grouped scale loads with both column picks, also on one-warpgroup tiles
    // at two blocks per SM (a persistent grid of two per SM).
    let o = ops(ScaleMode::Block, 8192, 8192, 8192);
    let all = fp8::plan_fp8(&o, &t, ScaleMode::Block, false, true).unwrap();
    let grid = |name: &str| {
        all.iter()
            .find(|l| l.config == name)
            .unwrap_or_else(|| panic!("no candidate `{name}`"))
            .grid
    };
    assert_eq!(
        grid("gemm_fp8 persistent 64x128x128 w4 o2 g8 sum"),
        Some((264, 1, 1))
    );
    assert_eq!(
        grid("gemm_fp8 persistent 64x128x128 w4 o2 g8 at"),
        Some((264, 1, 1))
    );
    assert_eq!(
        grid("gemm_fp8 persistent 128x128x128 w8 g8 at"),
        Some((132, 1, 1))
    );
    assert_eq!(
        grid("gemm_fp8 64x128x128 w4 o2 g8 sum"),
        Some((128 * 64, 1, 1))
    );
    // Row scales given as [m] vectors with a stride (every other element of a buffer).
    let mut o = ops(ScaleMode::Row, 100, 200, 64);
    o[2].shape = vec![100];
    o[2].strides = vec![2];
    let l = fp8::plan_fp8(&o, &t, ScaleMode::Row, false, false).unwrap();
    assert_eq!(view(&l[0].args[2]), (vec![100, 1], vec![2, 1]));
}

/// Per call spec flags (`[a, b]` and then these): the launches and operands a registry call of each
/// op plans. Block scales with `sa` M-major (`[f, 1]`) copy it into the `sa_rows` scratch first: two
/// launches, six operands; every other call is one launch on `[a, b, sa, sb, c]`. M-major `sa` is
/// refused for the other modes.
#[test]
fn registry_ops_plan_both_formats_and_refuse_16_bit_types() {
    let t = target();
    // (flags, block scales: (launches, operands), other modes: the same or `None` = refused).
    type Counts = (usize, usize);
    let table: &[(&[i64], Counts, Option<Counts>)] = &[
        (&[], (1, 5), Some((1, 5))),
        (&[1], (1, 5), Some((1, 5))),
        (&[0, 0], (1, 5), Some((1, 5))),
        (&[0, 1], (2, 6), None),
        (&[1, 1], (2, 6), None),
    ];
    for op in fp8::OPS {
        for dt in ["f8e4m3", "f8e5m2"] {
            for (flags, block, other) in table {
                let mut shapes: Vec<&[i64]> = vec![&[100, 256], &[256, 300]];
                if !flags.is_empty() {
                    shapes.push(flags);
                }
                let planned = CallSpec::new(op, dt, &shapes, false).plan(&t, false);
                let want = if *op == fp8::OP_BLOCK {
                    Some(*block)
                } else {
                    *other
                };
                let Some((launches, operands)) = want else {
                    let e = planned.unwrap_err();
                    assert!(e.to_string().contains("block scales only"), "{e}");
                    continue;
                };
                let p = planned.unwrap_or_else(|e| panic!("{op} {dt} {flags:?}: {e}"));
                assert_eq!(p.launches.len(), launches, "{op} {dt} {flags:?}");
                assert_eq!(p.operands.len(), operands, "{op} {dt} {flags:?}");
                assert_eq!(p.operands[4].dtype, BF16);
            }
        }
        let e = CallSpec::new(op, "bf16", &[&[100, 256], &[256, 300]], false)
            .plan(&t, false)
            .unwrap_err();
        assert!(e.to_string().contains("f8e4m3"), "{e}");
        assert_eq!(
            cutile_kernels::op::registry::find(op).unwrap().family,
            "gemm"
        );
    }
}

/// The catalog's fp8 specializations: sm_90, sm_100 and sm_120 compile (the block-scaled sm_90 builds
/// without a stack frame); sm_80 is skipped by the catalog (`CompileJob::supports`), and tileiras
/// refuses it with `unsupported type 'f8E4M3FN'`. The f32 copy of an M-major `sa` compiles for sm_80
/// as well.
#[test]
fn catalog_calls_compile_except_on_sm80() {
    use cutile::toolchain::{CompileRequest, Tileiras};
    let jobs = cutile_kernels::catalog::dsl_jobs(&fp8::representative_calls(), false).unwrap();
    // Three modes, three products each (ragged 64-row, aligned 128-row exact and fast accumulation;
    // 8192³ shares 4096³'s), plus the per-tensor e5m2 product; block scales' M-major calls (ragged,
    // 4096³) add their `sa` copies and share the row-major calls' products.
    let (copies, products): (Vec<_>, Vec<_>) = jobs.iter().partition(|j| j.kernel == SA_COPY);
    assert_eq!((products.len(), copies.len()), (10, 2), "{:?}", jobs);
    for j in &products {
        assert!(!j.supports(GpuArch::Sm80));
        assert!(j.supports(GpuArch::Sm90));
    }
    for j in &copies {
        assert!(j.supports(GpuArch::Sm80));
    }
    let tileiras = match Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip("gemm_fp8 catalog", &format!("tileiras not found ({e})"));
            return;
        }
    };
    for (n, j) in products.iter().chain(&copies).enumerate() {
        let (k, metas) = j.dsl_spec().unwrap();
        let s = k.specialize(metas).unwrap();
        let archs: &[GpuArch] = if j.supports(GpuArch::Sm80) {
            &[GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120]
        } else {
            &[GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120]
        };
        for &arch in archs {
            let c = common::compile_cached(&tileiras, &s, arch)
                .unwrap_or_else(|e| panic!("{} [{}] {arch}: {e}", j.kernel, j.specialization));
            assert!(!c.is_empty());
            // Block scales, per-step and grouped: no sm_90 build spills (the ragged call's 64-row
            // per-step tile on 4 worker warps had a 1408-byte stack frame; it takes 8 since session
            // 27; the grouped 128x128 tiles spill with fast accumulation, so no default uses them).
            if arch == GpuArch::Sm90 && j.kernel.starts_with("gemm_fp8_block") {
                let (regs, stack, _, _) = common::resources(&c);
                assert_eq!(
                    stack, 0,
                    "{}: {stack} B of stack at {regs} registers",
                    j.specialization
                );
            }
        }
        if n == 0 {
            let e = s
                .compile(&tileiras, &CompileRequest::new(GpuArch::Sm80))
                .err()
                .unwrap_or_else(|| panic!("sm_80 compiled fp8"));
            assert!(e.to_string().contains("unsupported type 'f8E"), "{e}");
        }
    }
}

/// The kernel that copies an M-major block-scale `sa` row-major: the GEMM family's tile copy.
const SA_COPY: &str = "copy_tiles";

/// Layout facts and cache key of a planned launch on sm_90 (what a bundle entry is found by).
fn sm90_key(l: &PlannedLaunch, operands: &[Operand]) -> cutile::cache::CacheKey {
    // SAFETY: described operands only feed specialization and keys.
    let args = unsafe { cutile_kernels::op::describe(l, operands) };
    cutile::launch::plan(
        &l.kernel,
        &args.tensor_metas(),
        GpuArch::Sm90,
        &cutile::launch::CompileOptions::default(),
        cutile::launch::NO_TOOLCHAIN,
    )
    .unwrap()
    .key
}

fn tensor_arg(a: &PlannedArg) -> (usize, bool, Vec<i64>, Vec<i64>, i64) {
    match a {
        PlannedArg::Tensor {
            operand,
            output,
            shape,
            strides,
            offset,
        } => (*operand, *output, shape.clone(), strides.clone(), *offset),
        _ => panic!("not a tensor"),
    }
}

/// Block scales with `sa` not row-major (M-major `[1, m]` as `torch._scaled_mm` takes it, padded
/// M-major, or strided both ways): [`fp8::with_scratch`] appends the `sa_rows` scratch, and the plan
/// copies `sa` into its start, row-major, before the product, which reads the copy as it reads a
/// row-major `sa` (same configuration, grid and cache key: the same cubin). Every tuning candidate
/// gets its own copy right before it. Row-major `sa`, a single K block and a single row need no copy:
/// their operands and single launch are unchanged. Without the scratch the product reads `sa` as it
/// is (one launch, as before the copy existed).
#[test]
fn m_major_sa_plans_a_row_major_copy_before_the_product() {
    let t = target();
    let block = ScaleMode::Block;
    for (m, n, k, fast) in [
        (1000, 1000, 512, false),
        (4096, 4096, 4096, false),
        (4096, 4096, 4096, true),
        (77, 300, 1024, false),
    ] {
        let kb = k / 128;
        let row = ops(block, m, n, k);
        // Row-major: no scratch, today's one launch.
        assert_eq!(fp8::with_scratch(&row, &t, block).unwrap(), row);
        let plain = fp8::plan_fp8(&row, &t, block, fast, false).unwrap();
        assert_eq!(plain.len(), 1);
        assert_eq!(
            tensor_arg(&plain[0].args[2]),
            (2, false, vec![m, kb], vec![kb, 1], 0)
        );
        for strides in [vec![1, m], vec![1, m + 8], vec![2, 2 * m]] {
            let case = format!("{m}x{n}x{k} fast {fast} sa strides {strides:?}");
            let mut o = row.clone();
            o[2].strides = strides.clone();
            // As it is without the scratch.
            let direct = fp8::plan_fp8(&o, &t, block, fast, false).unwrap();
            assert_eq!(direct.len(), 1, "{case}");
            assert_eq!(
                tensor_arg(&direct[0].args[2]),
                (2, false, vec![m, kb], strides.clone(), 0),
                "{case}"
            );
            let o = fp8::with_scratch(&o, &t, block).unwrap();
            assert_eq!(o.len(), 6, "{case}");
            assert_eq!(o[fp8::SA_ROWS].name, "sa_rows");
            assert_eq!(o[fp8::SA_ROWS].dtype, F32);
            assert_eq!(o[fp8::SA_ROWS].shape, [fp8::sa_rows_len(m, k)]);
            assert_eq!(fp8::sa_rows_len(m, k), m * kb);
            let l = fp8::plan_fp8(&o, &t, block, fast, false).unwrap();
            assert_eq!(l.len(), 2, "{case}");
            let (copy, product) = (&l[0], &l[1]);
            assert_eq!(copy.kernel.name(), SA_COPY, "{case}");
            assert_eq!(copy.config, format!("{} (sa rows)", plain[0].config));
            assert_eq!(
                copy.args.iter().map(tensor_arg).collect::<Vec<_>>(),
                [
                    (2, false, vec![m, kb], strides.clone(), 0),
                    (fp8::SA_ROWS, true, vec![m, kb], vec![kb, 1], 0),
                ],
                "{case}"
            );
            assert_eq!(
                tensor_arg(&product.args[2]),
                (fp8::SA_ROWS, false, vec![m, kb], vec![kb, 1], 0),
                "{case}"
            );
            assert_eq!(
                (&product.config, product.grid),
                (&plain[0].config, plain[0].grid),
                "{case}"
            );
            assert_eq!(sm90_key(product, &o), sm90_key(&plain[0], &row), "{case}");
            // Every candidate: its copy, then its product.
            let all = fp8::plan_fp8(&o, &t, block, fast, true).unwrap();
            let n_all = fp8::plan_fp8(&row, &t, block, fast, true).unwrap().len();
            assert_eq!(all.len(), 2 * n_all, "{case}");
            for pair in all.chunks(2) {
                assert_eq!(pair[0].kernel.name(), SA_COPY, "{case}");
                assert_eq!(pair[0].config, format!("{} (sa rows)", pair[1].config));
            }
        }
    }
    // One K block (`[m, 1]`) or one row (`[1, kb]`, strides `[1, 1]`): already row-major memory.
    for (m, k) in [(300, 128), (1, 1024)] {
        let mut o = ops(block, m, 256, k);
        o[2].strides = vec![1, m];
        assert_eq!(
            fp8::with_scratch(&o, &t, block).unwrap().len(),
            5,
            "{m}x{k}"
        );
        assert_eq!(fp8::plan_fp8(&o, &t, block, false, false).unwrap().len(), 1);
    }
    // Other modes never take one; a given scratch a row-major `sa` does not need is left unused.
    for mode in [ScaleMode::Tensor, ScaleMode::Row] {
        let o = ops(mode, 1000, 1000, 512);
        assert_eq!(fp8::with_scratch(&o, &t, mode).unwrap().len(), 5);
    }
    let mut o = ops(block, 1000, 1000, 512);
    o.push(Operand::described("sa_rows", 5, F32, &[4000]));
    let l = fp8::plan_fp8(&o, &t, block, false, false).unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(tensor_arg(&l[0].args[2]).0, 2);
}

/// Every launch of the M-major representative calls' plans compiles: the `sa` copy (f32) for sm_80,
/// sm_90, sm_100 and sm_120, the product for sm_90, sm_100 and sm_120 (tileiras refuses fp8 on sm_80,
/// which the catalog skips; the planner refuses an sm_80 target).
#[test]
fn m_major_sa_plans_compile_for_every_arch() {
    use cutile::toolchain::CompileRequest;
    let calls: Vec<CallSpec> = fp8::representative_calls()
        .into_iter()
        .filter(|c| c.shapes.get(2).is_some_and(|f| f.as_slice() == [0, 1]))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    // The plans need no tileiras: check their shape first.
    let plans: Vec<_> = calls
        .iter()
        .map(|c| (c.label(), c.plan(&target(), false).unwrap()))
        .collect();
    for (label, p) in &plans {
        let names: Vec<&str> = p.launches.iter().map(|l| l.kernel.name()).collect();
        assert_eq!(names[0], SA_COPY, "{label}");
        assert!(names[1].starts_with("gemm_fp8_block"), "{label}");
        assert_eq!(names.len(), 2, "{label}");
    }
    let Some(tileiras) = common::tileiras("gemm_fp8 M-major sa plans") else {
        return;
    };
    for (label, p) in &plans {
        for l in &p.launches {
            // SAFETY: described operands only feed specialization.
            let args = unsafe { cutile_kernels::op::describe(l, &p.operands) };
            let s = l.kernel.specialize(&args.tensor_metas()).unwrap();
            let copy = l.kernel.name() == SA_COPY;
            for arch in [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120] {
                if arch == GpuArch::Sm80 && !copy {
                    let e = s
                        .compile(&tileiras, &CompileRequest::new(arch))
                        .err()
                        .unwrap_or_else(|| panic!("{label}: sm_80 compiled fp8"));
                    assert!(e.to_string().contains("unsupported type 'f8E"), "{e}");
                    continue;
                }
                let c = common::compile_cached(&tileiras, &s, arch)
                    .unwrap_or_else(|e| panic!("{label} {} {arch}: {e}", l.config));
                assert!(!c.is_empty());
            }
        }
    }
}

/// A trailing `[1]` in a registry call asks for fast accumulation: the product carries Tile IR's
/// `fast_acc` flag, and the exact call does not; 128-row tiles take 8 worker warps, and fast
/// per-tensor and per-row calls 128x256 tiles; block scales take 64-row tiles at two blocks per SM.
#[test]
fn fast_accumulation_reaches_the_ir() {
    let t = target();
    for op in fp8::OPS {
        let ir = |shapes: &[&[i64]]| {
            let p = CallSpec::new(op, "f8e4m3", shapes, false)
                .plan(&t, false)
                .unwrap();
            // SAFETY: described operands only feed specialization.
            let args = unsafe { cutile_kernels::op::describe(&p.launches[0], &p.operands) };
            let spec = p.launches[0]
                .kernel
                .specialize(&args.tensor_metas())
                .unwrap();
            (p.launches[0].config.clone(), spec.ir_text())
        };
        let (cfg, exact) = ir(&[&[4096, 4096], &[4096, 4096]]);
        let (fast_cfg, fast) = ir(&[&[4096, 4096], &[4096, 4096], &[1]]);
        if *op == fp8::OP_BLOCK {
            // Block scales: one warpgroup per 64x128 tile, two blocks per SM, either accumulation.
            let block = "gemm_fp8 persistent 64x128x128 w4 o2 g8 sum";
            assert_eq!((cfg.as_str(), fast_cfg.as_str()), (block, block));
            assert!(exact.contains("occupancy"), "{op}");
        } else {
            assert_eq!(cfg, "gemm_fp8 persistent 128x128x128 w8", "{op}");
            assert_eq!(fast_cfg, "gemm_fp8 persistent 128x256x128 w8", "{op}");
            assert!(exact.contains("num_worker_warps_per_cta"), "{op}");
        }
        assert!(!exact.contains("fast_acc"), "{op}");
        assert!(fast.contains("fast_acc"), "{op}");
        let bad = CallSpec::new(op, "f8e4m3", &[&[64, 64], &[64, 64], &[2]], false)
            .plan(&t, false)
            .unwrap_err();
        assert!(bad.to_string().contains("[fast]"), "{bad}");
    }
}

/// `b` row-major (`[k, n]` contiguous, N-major: the layout fp8 tensor cores do not read directly),
/// `sa` M-major (`_scaled_mm`'s layout, each K step's column contiguous) and e5m2 with an f32 output
/// still compile for sm_90.
#[test]
fn row_major_b_e5m2_and_f32_output_compile_for_sm90() {
    let t = target();
    let mut cases = Vec::new();
    for (format, out) in [(Fp8Format::E4M3, BF16), (Fp8Format::E5M2, F32)] {
        let mut o = fp8::described_operands(format, ScaleMode::Block, out, 256, 256, 256);
        o[1].strides = vec![256, 1];
        o[2].strides = vec![1, 256];
        let l = fp8::plan_fp8(&o, &t, ScaleMode::Block, false, false).unwrap();
        // SAFETY: described operands only feed specialization.
        let args = unsafe { cutile_kernels::op::describe(&l[0], &o) };
        let name: &'static str = if format == Fp8Format::E4M3 {
            "fp8_block_e4m3_rowmajor_b_mmajor_sa"
        } else {
            "fp8_block_e5m2_f32_rowmajor_b_mmajor_sa"
        };
        cases.push((name, l[0].kernel.clone(), args.tensor_metas()));
    }
    common::compile_all_sm90("gemm_fp8 row-major b", cases);
}

/// Scale descriptions agree with what the host API accepts.
#[test]
fn scale_shapes_follow_the_mode() {
    assert_eq!(ScaleMode::Tensor.scale_shapes(5, 6, 128), ([1, 1], [1, 1]));
    assert_eq!(ScaleMode::Row.scale_shapes(5, 6, 128), ([5, 1], [1, 6]));
    assert_eq!(ScaleMode::Block.scale_shapes(5, 300, 256), ([5, 2], [2, 3]));
    for mode in MODES {
        assert_eq!(ScaleMode::of_op(mode.op()), Some(mode));
    }
    assert_eq!(Fp8Format::of(F8E5M2), Some(Fp8Format::E5M2));
    assert_eq!(Fp8Format::of(ScalarType::I8), None);
}

/// GPU tests through the host API: `#[ignore]`d, and skipped (not failed) without a GPU.
mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, Stream, Tensor};
    use cutile_kernels::gemm::fp8_reference::{
        HostScales, gemm_fp8_reference, quantize, scale_for,
    };
    use cutile_kernels::gemm::{Fp8Options, Fp8Scales, gemm_fp8_with};
    use half::bf16;

    /// Quantized random operands (`b` as the transposed view of an `[n, k]` weight), scales per
    /// `mode` (block scales' `sa` passed M-major with `sa_m_major`: stored `[k/128, m]`, its
    /// transposed view, which the op copies row-major first), the product against the f64 reference
    /// (relative L2 error of the bf16 output).
    fn case(
        dev: &Device,
        s: &Stream,
        options: Fp8Options,
        mode: ScaleMode,
        sa_m_major: bool,
        [m, n, k]: [i64; 3],
    ) {
        let format = options.format;
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let x = cutile_testkit::data::uniform(mu * ku, 1, -2.0, 2.0);
        let w = cutile_testkit::data::uniform(nu * ku, 2, -1.0, 1.0); // [n, k]
        let (sa_shape, sb_shape) = mode.scale_shapes(m, n, k);
        let sa_len = (sa_shape[0] * sa_shape[1]) as usize;
        let sb_len = (sb_shape[0] * sb_shape[1]) as usize;
        // Scales: a spread of values (not what a real quantizer picks, so a scale applied to the
        // wrong row or block shows up), the codes quantized with the tensor-wide scale.
        let sx = scale_for(format, 2.0);
        let sw = scale_for(format, 1.0);
        let qa = quantize(format, &x, sx);
        let qw = quantize(format, &w, sw);
        let sa: Vec<f32> = (0..sa_len)
            .map(|i| sx * (1.0 + (i % 5) as f32 * 0.25))
            .collect();
        let sb: Vec<f32> = (0..sb_len)
            .map(|i| sw * (1.0 + (i % 3) as f32 * 0.5))
            .collect();
        let host_scales = match mode {
            ScaleMode::Tensor => HostScales::Tensor { a: sa[0], b: sb[0] },
            ScaleMode::Row => HostScales::Row { a: &sa, b: &sb },
            ScaleMode::Block => HostScales::Block { a: &sa, b: &sb },
        };
        // b[p, j] = w[j, p]: strides (1, k) over w's bytes.
        let want = gemm_fp8_reference(format, &qa, &qw, (1, ku), &host_scales, mu, nu, ku);
        let ta = Tensor::from_host(dev, &qa, &[m, k]).unwrap();
        let tw = Tensor::from_host(dev, &qw, &[n, k]).unwrap();
        let tb = tw.transpose(0, 1).unwrap();
        let m_major = sa_m_major && mode == ScaleMode::Block;
        let ssa = if m_major {
            let (rows, cols) = (sa_shape[0] as usize, sa_shape[1] as usize);
            let mut t = vec![0f32; sa_len];
            for (i, &v) in sa.iter().enumerate() {
                t[(i % cols) * rows + i / cols] = v;
            }
            Tensor::from_host(dev, &t, &[sa_shape[1], sa_shape[0]]).unwrap()
        } else {
            Tensor::from_host(dev, &sa, &sa_shape).unwrap()
        };
        let tsa = if m_major {
            ssa.transpose(0, 1).unwrap()
        } else {
            ssa.view()
        };
        let ssb = Tensor::from_host(dev, &sb, &sb_shape).unwrap();
        let tsb = ssb.view();
        let scales = match mode {
            ScaleMode::Tensor => Fp8Scales::Tensor { a: &tsa, b: &tsb },
            ScaleMode::Row => Fp8Scales::Row { a: &tsa, b: &tsb },
            ScaleMode::Block => Fp8Scales::Block { a: &tsa, b: &tsb },
        };
        let mut c = Tensor::<bf16>::zeros(dev, &[m, n]).unwrap();
        gemm_fp8_with(s, &ta, &tb, &options, &scales, &mut c)
            .unwrap()
            .wait()
            .unwrap();
        let got: Vec<f32> = c.to_host().unwrap().into_iter().map(f32::from).collect();
        let num: f64 = got
            .iter()
            .zip(&want)
            .map(|(g, w)| ((g - w) as f64).powi(2))
            .sum();
        let den: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
        let rel = (num / den.max(1e-30)).sqrt();
        // The products are exact in f32 and only the sum order differs: what remains is the bf16
        // rounding of the output (2^-9 relative).
        assert!(
            rel <= 5e-3,
            "{options:?} {mode:?} (sa M-major {m_major}) {m}x{n}x{k}: rel L2 {rel:.2e}"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn scaled_products_match_reference() {
        let Some((dev, s)) = gpu_device("gemm_fp8 scaled_products_match_reference") else {
            return;
        };
        let e4m3 = Fp8Options::default();
        let e5m2 = Fp8Options {
            format: Fp8Format::E5M2,
            ..e4m3
        };
        let fast = Fp8Options {
            fast_accum: true,
            ..e4m3
        };
        for mode in MODES {
            case(&dev, &s, e4m3, mode, false, [1000, 1000, 512]);
            case(&dev, &s, e4m3, mode, false, [77, 300, 256]);
            case(&dev, &s, e5m2, mode, false, [130, 250, 384]);
            case(&dev, &s, fast, mode, false, [300, 520, 1024]);
        }
        // Block scales with `sa` M-major (copied row-major into the stream's scratch first), and
        // one K block (`[m, 1]`: read as it is).
        for (options, dims) in [
            (e4m3, [1000, 1000, 512]),
            (e5m2, [130, 250, 384]),
            (fast, [300, 520, 1024]),
            (e4m3, [2048, 2048, 1024]),
            (e4m3, [77, 300, 128]),
        ] {
            case(&dev, &s, options, ScaleMode::Block, true, dims);
        }
        case(&dev, &s, e4m3, ScaleMode::Block, false, [2048, 2048, 1024]);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn wrong_byte_types_are_refused_on_device() {
        let Some((dev, s)) = gpu_device("gemm_fp8 wrong_byte_types_are_refused_on_device") else {
            return;
        };
        let a = Tensor::<bf16>::zeros(&dev, &[64, 64]).unwrap();
        let b = Tensor::<u8>::zeros(&dev, &[64, 64]).unwrap();
        let sa = Tensor::<f32>::zeros(&dev, &[1]).unwrap();
        let mut c = Tensor::<bf16>::zeros(&dev, &[64, 64]).unwrap();
        let e = cutile_kernels::gemm::gemm_fp8(
            &s,
            &a,
            &b,
            &Fp8Scales::Tensor { a: &sa, b: &sa },
            &mut c,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("byte tensors"), "{e}");
    }
}

/// The operand-load `latency` hint (the ` l10` candidate) deepens the per-tensor and per-row 128x128
/// kernels' operand pipeline on sm_90: tileiras 13.5.37 gives the hinted tile more shared memory
/// than the same tile without it (7 stages of the 128-deep K step, about 231 KB, against 5 exact and
/// 6 fast), and the exact kernel keeps no stack frame. The 128x256 tiles get fewer stages with the
/// hint (about 67 KB exact), so they have no such candidate.
#[test]
fn operand_latency_hint_deepens_the_pipeline() {
    let t = target();
    let Some(tileiras) = common::tileiras("fp8 operand latency hint") else {
        return;
    };
    let plain = "gemm_fp8 persistent 128x128x128 w8";
    let hinted = format!("{plain} l{}", fp8::OPERAND_LATENCY);
    for op in [fp8::OP_TENSOR, fp8::OP_ROW] {
        for (shapes, fast) in [
            (&[&[4096i64, 4096][..], &[4096, 4096]][..], false),
            (&[&[4096, 4096], &[4096, 4096], &[1]], true),
        ] {
            let planned = CallSpec::new(op, "f8e4m3", shapes, false)
                .plan(&t, true)
                .unwrap();
            let configs: Vec<_> = planned.launches.iter().map(|l| l.config.as_str()).collect();
            assert!(
                !configs.iter().any(|c| c.contains("x256x128 w8 l")),
                "{configs:?}"
            );
            let compiled = |config: &str| {
                let l = planned
                    .launches
                    .iter()
                    .find(|l| l.config == config)
                    .unwrap_or_else(|| panic!("{op}: no candidate `{config}` in {configs:?}"));
                let s = common::specialize_launch(&planned, l);
                let cubin = common::compile_cached(&tileiras, &s, GpuArch::Sm90).unwrap();
                (common::resources(&cubin), s.ir_text())
            };
            let ((_, _, smem, _), plain_ir) = compiled(plain);
            let ((regs, stack, smem_l, _), ir) = compiled(&hinted);
            println!(
                "{op} fast={fast}: {plain} {smem} B smem; {hinted} {smem_l} B, {regs} registers, {stack} B stack"
            );
            assert!(
                ir.contains("latency") && !plain_ir.contains("latency"),
                "{op}"
            );
            assert!(
                smem_l > smem,
                "{op} fast={fast}: {hinted} {smem_l} B, {plain} {smem} B"
            );
            if !fast {
                assert_eq!(stack, 0, "{op}: {hinted}");
            }
        }
    }
}

/// The per-tensor kernel loads its two scales once per block, before the tile loop: in the IR both
/// `[1, 1]` loads precede the loop, and in the sm_90 SASS they are two plain `LDG`s with no
/// `LDGSTS` and no `LDGSTSBAR` arrival left in the kernel (session 43's ncu found ~9% of the exact
/// 4096³ kernel's samples in each tile's epilogue chain of those; session 44's SASS of the build
/// before: 4 `ARRIVES.LDGSTSBAR`, 108 `SYNCS`, against none and 90).
#[test]
fn per_tensor_scales_load_once_before_the_tile_loop() {
    let test = "per_tensor_scales_load_once_before_the_tile_loop";
    let t = target();
    for shapes in [
        &[&[4096i64, 4096][..], &[4096, 4096]][..],
        &[&[4096, 4096], &[4096, 4096], &[1]],
        &[&[1000, 512], &[512, 1000]],
    ] {
        let planned = CallSpec::new(fp8::OP_TENSOR, "f8e4m3", shapes, false)
            .plan(&t, false)
            .unwrap();
        let l = &planned.launches[0];
        let spec = common::specialize_launch(&planned, l);
        let ir = spec.ir_text();
        let lines: Vec<&str> = ir.lines().collect();
        let first_loop = lines.iter().position(|l| l.contains(" = for ")).unwrap();
        let scale_loads: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains("load_view") && lines[i].contains("tile=(1x1)"))
            .collect();
        assert_eq!(scale_loads.len(), 2, "{}: {ir}", l.config);
        assert!(
            scale_loads.iter().all(|&i| i < first_loop),
            "{}: {ir}",
            l.config
        );
        let Some(tileiras) = common::tileiras(test) else {
            continue;
        };
        let cubin = common::compile_cached(&tileiras, &spec, GpuArch::Sm90).unwrap();
        let Some(sass) = common::sass(test, &tileiras, &cubin) else {
            return;
        };
        let config = &l.config;
        assert_eq!(
            common::sass_instructions(&sass, "LDG.E").len(),
            2,
            "{config}"
        );
        assert!(
            common::sass_instructions(&sass, "LDGSTS").is_empty(),
            "{config}"
        );
        assert!(
            common::sass_instructions(&sass, "ARRIVES.LDGSTSBAR").is_empty(),
            "{config}"
        );
    }
}
