//! The grouped GEMM (`gemm::grouped`): the work table, the planner without a GPU (typed errors for
//! every bad argument, one persistent launch, empty calls), the registry op and its call encoding,
//! the CPU reference against per-group plain products, the kernel's schedule simulated on the host
//! (every output element written exactly once, by its own group), the catalog's specializations
//! compiled by tileiras for sm_80/90/100/120, and GPU tests through the host API (`#[ignore]`d;
//! skipped without a GPU).

#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::gemm::grouped::{self, Table, work_table};
use cutile_kernels::gemm::{self, GemmOptions};
use cutile_kernels::op::{CallSpec, OpError, Operand, Target};

const TF32: GemmOptions = GemmOptions { allow_tf32: true };

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

fn ops(dt: ScalarType, m: i64, k: i64, g: i64, n: i64) -> Vec<Operand> {
    vec![
        Operand::described("a", 0, dt, &[m, k]),
        Operand::described("b", 1, dt, &[g, k, n]),
        Operand::described("c", 2, dt, &[m, n]),
    ]
}

fn plan_err(operands: &[Operand], offsets: &[usize], options: &GemmOptions, needle: &str) {
    match grouped::plan(operands, offsets, &target(), options, false) {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains(needle), "error `{text}` lacks `{needle}`");
        }
        Ok((_, l)) => panic!("expected an error containing `{needle}`, planned {l:?}"),
    }
}

/// The kernel's schedule on the host: interior items store their whole tile, edge items the tile
/// merged from the products of the groups that meet it, both clipped by `c`'s bounds (the view
/// store); returns, per output element, how many items wrote it and the group whose product it holds
/// (-1 for none: an edge row no listed group owns).
fn simulate(t: &Table, m: usize, n: usize, bm: usize, bn: usize) -> (Vec<u32>, Vec<i64>) {
    let tiles_n = n.div_ceil(bn);
    assert_eq!(t.tiles_n as usize, tiles_n);
    let mut writes = vec![0u32; m * n];
    let mut owner = vec![-1i64; m * n];
    for item in 0..t.all_items() as usize {
        let tn = item % tiles_n;
        let (tile, groups) = if item < t.items as usize {
            let (g, tile) = t.row_entry(item / tiles_n);
            (tile, vec![g])
        } else {
            t.edge_tile((item - t.items as usize) / tiles_n)
        };
        for r in tile as usize * bm..((tile as usize + 1) * bm).min(m) {
            let mut value = -1i64;
            for &g in &groups {
                let (r0, r1) = t.group_rows(g as usize);
                if (r0 as usize..r1 as usize).contains(&r) {
                    value = i64::from(g);
                }
            }
            for col in tn * bn..((tn + 1) * bn).min(n) {
                writes[r * n + col] += 1;
                owner[r * n + col] = value;
            }
        }
    }
    (writes, owner)
}

/// The items block `p` of `grid` runs: interior `p, p + grid, …` below `items`, then edge items from
/// the kernel's start `(p - items) mod grid` on, in the same stride (as global item indices).
fn block_items(p: i64, grid: i64, items: i64, all: i64) -> Vec<i64> {
    let mut out: Vec<i64> = (p..items).step_by(grid as usize).collect();
    let start = (p + grid - items % grid) % grid;
    out.extend(
        (start..all - items)
            .step_by(grid as usize)
            .map(|e| items + e),
    );
    out
}

#[test]
fn the_schedule_writes_every_element_once_by_its_group() {
    let cases: &[(&[usize], usize, usize)] = &[
        (&[130, 131, 131, 500, 500, 1000], 1000, 300),
        (&[0, 0, 1, 1, 129, 256, 256, 300], 300, 128),
        (&[64, 128, 192], 192, 1),
        (&[5], 5, 77),
        (&[0, 0, 0], 0, 10),
        (&[1000, 2100, 3000, 4050, 5000, 6024, 7094, 8192], 8192, 256),
    ];
    for &(offsets, m, n) in cases {
        for (bm, bn) in [(128usize, 128usize), (64, 128)] {
            let t = work_table(offsets, bm as i64, n.div_ceil(bn) as i64).unwrap();
            assert_eq!(t.padded % 64, 0);
            let (writes, owner) = simulate(&t, m, n, bm, bn);
            assert!(
                writes.iter().all(|&w| w == 1),
                "{offsets:?} {bm}: an element written {:?} times",
                writes.iter().find(|&&w| w != 1)
            );
            let mut start = 0;
            for (g, &end) in offsets.iter().enumerate() {
                for r in start..end {
                    assert_eq!(owner[r * n], g as i64, "{offsets:?}: row {r}");
                }
                start = end;
            }
            // Products: every global row tile a group meets, once per column tile; items: every
            // row tile of `c` once per column tile; edge tiles at most one per group boundary.
            let mut want = 0;
            let mut s = 0;
            for &e in offsets {
                if e > s {
                    want += (e.div_ceil(bm) - s / bm) * n.div_ceil(bn);
                }
                s = e;
            }
            assert_eq!(t.products() as usize, want, "{offsets:?}");
            assert_eq!(
                t.all_items() as usize,
                m.div_ceil(bm) * n.div_ceil(bn),
                "{offsets:?}"
            );
            assert!(t.edges as usize <= offsets.len(), "{offsets:?}");
            // Every block's interior and edge items together are each item exactly once.
            for grid in [1i64, 3, 7, 132] {
                let mut seen: Vec<i64> = (0..grid)
                    .flat_map(|p| block_items(p, grid, t.items, t.all_items()))
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..t.all_items()).collect::<Vec<_>>(), "grid {grid}");
            }
        }
    }
    // Groups on 128-row boundaries have no edge tiles with 128-row tiles (the benchmark's groups).
    let aligned = grouped::offsets_of(&[512, 1408, 1280, 1152, 1024, 896, 768, 1152]);
    let t = work_table(&aligned, 128, 32).unwrap();
    assert_eq!((t.items, t.edges), (64 * 32, 0));
}

#[test]
fn work_table_holds_row_entries_edge_tiles_and_group_rows() {
    let offsets: Vec<usize> = (1..=70).collect();
    let t = work_table(&offsets, 128, 1).unwrap();
    assert_eq!(t.padded, 128);
    assert_eq!(t.data.len(), 8 * 128);
    // 70 one-row groups in the first 128-row tile: one edge tile met by all 70, no interior item.
    assert_eq!((t.items, t.edges, t.edge_entries), (0, 1, 70));
    assert_eq!(t.edge_tile(0), (0, (0..70).collect()));
    assert_eq!(t.group_rows(69), (69, 70));
    // A group ending `c` owns its clipped last tile: interior. Empty groups meet no tile.
    let t = work_table(&[100, 100, 300], 128, 2).unwrap();
    // Group 0: tile 0 (shared: edge); group 2: tile 0 (edge), tiles 1, 2 (2 clipped by c): interior.
    assert_eq!((t.items, t.edges, t.edge_entries), (2 * 2, 1, 2));
    assert_eq!(t.row_entry(0), (2, 1));
    assert_eq!(t.row_entry(1), (2, 2));
    assert_eq!(t.edge_tile(0), (0, vec![0, 2]));
}

#[test]
fn bad_calls_are_typed_errors_and_empty_calls_plan_nothing() {
    let good = ops(BF16, 300, 64, 3, 100);
    let offs = [100usize, 200, 300];
    // Non-monotonic offsets, last offset != rows, offset count != G.
    plan_err(&good, &[200, 100, 300], &TF32, "non-decreasing");
    plan_err(&good, &[100, 200, 299], &TF32, "last offset");
    plan_err(&good, &[100, 300], &TF32, "one offset per group");
    // Inner extents, c's shape, ranks, dtypes.
    let mut bad_k = good.clone();
    bad_k[1] = Operand::described("b", 1, BF16, &[3, 65, 100]);
    plan_err(&bad_k, &offs, &TF32, "inner extents");
    let mut bad_c = good.clone();
    bad_c[2] = Operand::described("c", 2, BF16, &[300, 101]);
    plan_err(&bad_c, &offs, &TF32, "`c` must be");
    let mut bad_rank = good.clone();
    bad_rank[1] = Operand::described("b", 1, BF16, &[64, 100]);
    assert!(matches!(
        grouped::plan(&bad_rank, &offs, &target(), &TF32, false),
        Err(OpError::Rank { .. })
    ));
    let mut mixed = good.clone();
    mixed[1] = Operand::described("b", 1, F16, &[3, 64, 100]);
    assert!(matches!(
        grouped::plan(&mixed, &offs, &target(), &TF32, false),
        Err(OpError::DType { .. })
    ));
    let f32s = ops(F32, 300, 64, 3, 100);
    plan_err(&f32s, &offs, &GemmOptions::default(), "allow_tf32");
    assert_eq!(
        grouped::plan(&f32s, &offs, &target(), &TF32, false)
            .unwrap()
            .1
            .len(),
        2
    );
    plan_err(&good[..2], &offs, &TF32, "takes 3 tensors");
    // Empty: no rows, no columns, every group empty, no groups.
    let empty = [
        (ops(BF16, 0, 64, 3, 100), vec![0usize, 0, 0]),
        (ops(BF16, 300, 64, 3, 0), offs.to_vec()),
        (ops(BF16, 0, 64, 0, 100), vec![]),
    ];
    for (o, off) in empty {
        assert!(
            grouped::plan(&o, &off, &target(), &TF32, false)
                .unwrap()
                .1
                .is_empty()
        );
    }
    // k = 0 still launches (c is zeros): interior and edge tiles.
    assert_eq!(
        grouped::plan(&ops(BF16, 300, 0, 3, 100), &offs, &target(), &TF32, false)
            .unwrap()
            .1
            .len(),
        2
    );
}

#[test]
fn plans_one_persistent_launch_with_the_table() {
    let offsets = grouped::offsets_of(&[700, 0, 1300, 1, 6191]);
    let (operands, launches) = grouped::plan(
        &ops(BF16, 8192, 4096, 5, 4096),
        &offsets,
        &target(),
        &TF32,
        false,
    )
    .unwrap();
    // An interior launch, then an edge launch.
    assert_eq!(launches.len(), 2);
    assert_eq!(launches[1].grid, Some((64, 1, 1)), "2 edge tiles x 32");
    let l = &launches[0];
    assert_eq!(l.kernel.name(), "grouped_gemm");
    assert_eq!(l.grid, Some((132, 1, 1)));
    assert_eq!(operands.len(), 4);
    assert_eq!(operands[3].dtype, I32);
    let tables = grouped::Tables::of(&offsets, 4096).unwrap();
    assert_eq!(operands[3].shape, vec![tables.len()]);
    // 128-row tiles: 62 interior row tiles, 2 edge tiles (5: groups 0, 2; 15: groups 2, 3, 4).
    assert!(
        l.config.starts_with(
            "grouped_gemm 128x128x64 2 launches G=5 items=1984 edges=2x32 edge products=5"
        ),
        "{}",
        l.config
    );
    // Few tiles: 64-row tiles and a grid of the item count.
    let (_, small) =
        grouped::plan(&ops(F16, 10, 32, 2, 64), &[3, 10], &target(), &TF32, false).unwrap();
    // (Both groups meet the one 64-row tile: one edge item, no interior launch.)
    assert_eq!(small.len(), 1);
    assert!(small[0].config.starts_with("grouped_gemm 64x128x64"));
    assert_eq!(small[0].grid, Some((1, 1, 1)));
}

#[test]
fn candidates_cover_tiles_and_split_launches() {
    let t = target();
    let cands = grouped::candidates(&t, BF16, 8192, 4096);
    assert_eq!(cands[0], grouped::choose(&t, BF16, 8192, 4096));
    assert!(cands[0].split, "two launches by default");
    let names: std::collections::HashSet<String> = cands
        .iter()
        .map(cutile_kernels::op::tuning::Candidate::name)
        .collect();
    assert_eq!(names.len(), cands.len());
    assert_eq!(cands.len(), 4);
    // Every candidate plans; a split candidate takes two launches when there are edge tiles.
    let ragged = grouped::offsets_of(&[1008, 1104, 896, 1040, 960, 1024, 1072, 1088]);
    let aligned = grouped::offsets_of(&[1024; 8]);
    let o = ops(BF16, 8192, 4096, 8, 4096);
    let (_, all) = grouped::plan(&o, &ragged, &t, &TF32, true).unwrap();
    assert_eq!(all.len(), 6, "{all:?}");
    let (_, all) = grouped::plan(&o, &aligned, &t, &TF32, true).unwrap();
    assert_eq!(all.len(), 4);
}

/// The traced IR of the grouped kernels of a call's default launches.
fn grouped_ir(rows: Vec<i64>) -> Vec<String> {
    let total = rows.iter().sum::<i64>();
    let call = CallSpec {
        op: grouped::OP.into(),
        dtype: "bf16".into(),
        shapes: vec![vec![total, 4096], vec![rows.len() as i64, 4096, 4096], rows],
        causal: false,
    };
    let jobs = cutile_kernels::catalog::dsl_jobs(&[call], false).unwrap();
    jobs.iter()
        .map(|j| {
            let (k, metas) = j.dsl_spec().unwrap();
            k.specialize(metas).unwrap().ir_text()
        })
        .collect()
}

/// The causes of the first kernel's 1.8x: a view load (the group search over the table) inside the
/// item loop and the masked scatter store each gave it a warp-specialized 384-thread schedule (168
/// registers, spills, serialized `wgmma`). Items now read the table with gathers only, the view
/// loads are `a`'s and `b`'s tiles, and every store is a view store (edge tiles merged by row).
#[test]
fn item_loops_load_operand_tiles_and_store_through_views_only() {
    // Aligned groups: one interior launch; ragged ones: the interior and the edge launch.
    let aligned = grouped_ir(vec![1024; 8]);
    let ragged = grouped_ir(vec![1008, 1104, 896, 1040, 960, 1024, 1072, 1088]);
    assert_eq!((aligned.len(), ragged.len()), (1, 2));
    for ir in aligned.iter().chain(&ragged) {
        assert_eq!(ir.matches("load_view_tko").count(), 2, "{ir}");
        assert_eq!(ir.matches("store_view_tko").count(), 1, "{ir}");
        assert_eq!(ir.matches("store_ptr_tko").count(), 0, "{ir}");
    }
}

#[test]
fn registry_op_plans_its_calls() {
    let info = cutile_kernels::op::registry::find(grouped::OP).unwrap();
    assert_eq!(info.family, "gemm");
    for call in grouped::representative_calls() {
        let planned = call.plan(&target(), false).unwrap();
        // Interior then edge launch; one when the groups sit on the 128-row grid.
        let want = if call.shapes[2] == [1008, 1104, 896, 1040, 960, 1024, 1072, 1088]
            || call.shapes[0] == [300, 200]
            || call.shapes[0] == [301, 72]
        {
            2
        } else {
            1
        };
        assert_eq!(planned.launches.len(), want, "{}", call.label());
    }
    // The transposed flag describes `b` as a view of `[G, n, k]`.
    let (o, offs) =
        grouped::described_call(BF16, &[vec![10, 8], vec![2, 8, 6], vec![4, 6], vec![1]]).unwrap();
    assert_eq!(o[1].strides, vec![48, 1, 8]);
    assert_eq!(offs, vec![4, 10]);
    // Bad specs are typed errors.
    for shapes in [
        vec![vec![10, 8], vec![2, 8, 6]],
        vec![vec![10, 8], vec![2, 8, 6], vec![-1, 11]],
        vec![vec![10, 8], vec![2, 8, 6], vec![4, 6], vec![7]],
    ] {
        let c = CallSpec {
            op: grouped::OP.into(),
            dtype: "bf16".into(),
            shapes,
            causal: false,
        };
        assert!(c.plan(&target(), false).is_err());
    }
}

#[test]
fn reference_is_the_per_group_product() {
    let (m, k, n) = (9usize, 5usize, 4usize);
    let offsets = [2usize, 2, 7, 9];
    let a = cutile_testkit::data::uniform(m * k, 1, -1.0, 1.0);
    let b = cutile_testkit::data::uniform(4 * k * n, 2, -1.0, 1.0);
    let c = gemm::grouped_gemm_reference(&a, &b, &offsets, m, n, k);
    let mut start = 0;
    for (g, &end) in offsets.iter().enumerate() {
        for i in start..end {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[g * k * n + p * n + j] as f64)
                    .sum();
                assert!((c[i * n + j] as f64 - want).abs() < 1e-5, "({i}, {j})");
            }
        }
        start = end;
    }
}

#[test]
fn catalog_calls_compile_for_four_archs() {
    common::compile_four_archs(
        "grouped_gemm catalog_calls_compile_for_four_archs",
        common::catalog_jobs(&grouped::representative_calls()),
    );
}

/// GPU tests through the host API: `#[ignore]`d, and skipped (not failed) without a GPU.
mod gpu {
    use super::*;
    use common::gpu_device;
    use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
    use half::{bf16, f16};

    fn round<T: DeviceElement>(v: Vec<f32>) -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    }

    fn host<T: DeviceElement>(v: &[f32]) -> Vec<T> {
        v.iter().map(|&x| T::from_f64(x as f64)).collect()
    }

    /// Groups of `rows`, `b` passed as `[G, k, n]` or as the transposed view of `[G, n, k]`;
    /// compared with the reference (relative L2), and rows must all be written.
    fn case<T: DeviceElement>(
        dev: &Device,
        s: &Stream,
        rows: &[usize],
        k: usize,
        n: usize,
        transposed: bool,
        tol: f64,
    ) {
        let offsets = grouped::offsets_of(rows);
        let (m, g) = (offsets.last().copied().unwrap_or(0), rows.len());
        let a = round::<T>(cutile_testkit::data::uniform(m * k, 1, -1.0, 1.0));
        let b = round::<T>(cutile_testkit::data::uniform(g * k * n, 2, -1.0, 1.0));
        let want = gemm::grouped_gemm_reference(&a, &b, &offsets, m, n, k);
        let ta = Tensor::from_host(dev, &host::<T>(&a), &[m as i64, k as i64]).unwrap();
        let shape = [g as i64, k as i64, n as i64];
        let mut c = Tensor::<T>::full(dev, &[m as i64, n as i64], T::from_f64(7777.0)).unwrap();
        if transposed {
            let mut w = vec![0f32; g * n * k];
            for q in 0..g {
                for p in 0..k {
                    for j in 0..n {
                        w[q * n * k + j * k + p] = b[q * k * n + p * n + j];
                    }
                }
            }
            let tw =
                Tensor::from_host(dev, &host::<T>(&w), &[g as i64, n as i64, k as i64]).unwrap();
            let tb = tw.transpose(1, 2).unwrap();
            gemm::grouped_gemm(s, &ta, &tb, &offsets, &TF32, &mut c)
                .unwrap()
                .wait()
                .unwrap();
        } else {
            let tb = Tensor::from_host(dev, &host::<T>(&b), &shape).unwrap();
            gemm::grouped_gemm(s, &ta, &tb, &offsets, &TF32, &mut c)
                .unwrap()
                .wait()
                .unwrap();
        }
        let got: Vec<f32> = c
            .to_host()
            .unwrap()
            .into_iter()
            .map(|x| x.to_f64() as f32)
            .collect();
        let num: f64 = got
            .iter()
            .zip(&want)
            .map(|(g, w)| ((g - w) as f64).powi(2))
            .sum();
        let den: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
        let rel = (num / den.max(1e-30)).sqrt();
        assert!(
            rel <= tol,
            "{rows:?} k={k} n={n} transposed={transposed}: rel L2 {rel:.2e} > {tol:.0e}"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn grouped_matches_reference() {
        let Some((dev, s)) = gpu_device("grouped_gemm grouped_matches_reference") else {
            return;
        };
        case::<bf16>(
            &dev,
            &s,
            &[130, 0, 1, 257, 64, 0, 700],
            96,
            200,
            false,
            1e-2,
        );
        case::<bf16>(&dev, &s, &[130, 0, 1, 257, 64, 0, 700], 96, 200, true, 1e-2);
        case::<f16>(&dev, &s, &[1, 1, 1], 7, 5, false, 1e-2);
        case::<f16>(&dev, &s, &[1000, 24, 2000], 517, 1023, true, 1e-2);
        case::<f32>(&dev, &s, &[33, 0, 95], 40, 130, false, 2e-3);
        // k = 0: zeros.
        case::<bf16>(&dev, &s, &[3, 4], 0, 9, false, 0.0);
    }
}
