//! CPU tests of the tensor-parallel crate: the head / FFN partition, weight slicing, that the
//! row-parallel partials sum to the full product, that the sharded CPU block equals the unsharded
//! one, the error paths (bad splits, NCCL missing, multi-rank without NCCL) and the report.

use cutile_kernels::gemm::reference::gemm_reference;
use cutile_tp::TpError;
use cutile_tp::nccl::{self, BusBw};
use cutile_tp::reference::{BlockInputs, block_reference, rel_max_err};
use cutile_tp::report::{BusBwCheck, RowStatus, TpReport, TpRow, efficiency, judge_busbw};
use cutile_tp::shard::{self, BlockConfig, ShardPlan, kv_head_of};

const TINY: BlockConfig = BlockConfig {
    tokens: 16,
    hidden: 64,
    hq: 4,
    hkv: 2,
    d: 64,
    ffn: 128,
};

fn cfg(hq: usize, hkv: usize, ffn: usize) -> BlockConfig {
    BlockConfig {
        hq,
        hkv,
        ffn,
        ..TINY
    }
}

#[test]
fn partitions_cover_heads_and_ffn_and_match_gqa() {
    // (hq, hkv, ffn, n, replicated)
    let cases = [
        (32, 8, 14336, 1, false),
        (32, 8, 14336, 2, false),
        (32, 8, 14336, 8, false),
        (32, 4, 1024, 8, true),
        (8, 2, 1024, 4, true),
        (8, 1, 64, 8, true),
        (16, 16, 64, 4, false),
    ];
    for (hq, hkv, ffn, n, rep) in cases {
        let c = cfg(hq, hkv, ffn);
        let p = ShardPlan::new(c, n).unwrap_or_else(|e| panic!("{hq}/{hkv}/{n}: {e}"));
        assert_eq!(p.n(), n);
        assert_eq!(p.kv_replicated, rep, "{hq}/{hkv}/{n}");
        let mut next_q = 0;
        let mut next_f = 0;
        for s in &p.ranks {
            assert_eq!(s.q_heads.start, next_q);
            assert_eq!(s.hq(), hq / n);
            assert_eq!(s.ffn_cols.start, next_f);
            next_q = s.q_heads.end;
            next_f = s.ffn_cols.end;
            if rep {
                assert_eq!(s.hkv(), 1);
            } else {
                assert_eq!(s.hkv(), hkv / n);
            }
            // Every q head's KV head is on its rank, at the local GQA position.
            let group_local = s.hq() / s.hkv();
            for (j, h) in s.q_heads.clone().enumerate() {
                let kv = kv_head_of(&c, h);
                assert!(s.kv_heads.contains(&kv), "{hq}/{hkv}/{n}: q {h} → kv {kv}");
                assert_eq!(kv - s.kv_heads.start, j / group_local);
            }
        }
        assert_eq!((next_q, next_f), (hq, ffn));
    }
}

#[test]
fn bad_splits_are_typed_errors() {
    let cases = [
        (cfg(6, 2, 64), 4, "q heads"),
        (cfg(12, 3, 64), 2, "KV heads"),
        (cfg(8, 2, 100), 8, "FFN"),
        (cfg(8, 3, 64), 1, "divide Hq"),
        (TINY, 0, "at least one rank"),
    ];
    for (c, n, want) in cases {
        match ShardPlan::new(c, n) {
            Err(TpError::Shard { ranks, what }) => {
                assert_eq!(ranks, n);
                assert!(what.contains(want), "{what:?} lacks {want:?}");
            }
            other => panic!("{c:?} over {n}: {other:?}"),
        }
    }
}

#[test]
fn column_and_row_slices() {
    // 3 × 4 matrix m[i][j] = 10 i + j.
    let m: Vec<f32> = (0..3)
        .flat_map(|i| (0..4).map(move |j| (10 * i + j) as f32))
        .collect();
    assert_eq!(
        shard::columns(&m, 3, 4, &[1..2, 3..4]),
        vec![1.0, 3.0, 11.0, 13.0, 21.0, 23.0]
    );
    assert_eq!(shard::rows(&m, 4, 1..2), vec![10.0, 11.0, 12.0, 13.0]);
    // QKV: value = column index, so the slice lists the columns it kept.
    let c = cfg(4, 2, 8);
    let d = c.d;
    let cols = c.qkv_cols();
    let w: Vec<f32> = (0..c.hidden)
        .flat_map(|_| (0..cols).map(|j| j as f32))
        .collect();
    let p = ShardPlan::new(c, 2).unwrap_or_else(|e| panic!("{e}"));
    let s = &p.ranks[1];
    let got = shard::qkv_weight(&c, &w, s);
    let width = (s.hq() + 2 * s.hkv()) * d;
    assert_eq!(got.len(), c.hidden * width);
    let row0: Vec<usize> = got[..width].iter().map(|&v| v as usize).collect();
    let want: Vec<usize> = (2 * d..4 * d) // q heads 2, 3
        .chain(4 * d + d..4 * d + 2 * d) // k head 1
        .chain(6 * d + d..6 * d + 2 * d) // v head 1
        .collect();
    assert_eq!(row0, want);
    // Gate|up: rank 1 of 2 with F = 8 keeps gate 4..8 and up 12..16.
    let gu: Vec<f32> = (0..c.hidden)
        .flat_map(|_| (0..16).map(|j| j as f32))
        .collect();
    let got = shard::gate_up_weight(&c, &gu, s);
    assert_eq!(
        got[..8].to_vec(),
        vec![4.0, 5.0, 6.0, 7.0, 12.0, 13.0, 14.0, 15.0]
    );
}

#[test]
fn row_parallel_partials_sum_to_the_full_product() {
    let (m, k, n) = (7, 48, 9);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 13 % 7) as f32 - 3.0) / 2.0)
        .collect();
    let full = gemm_reference(&a, &b, m, n, k);
    for ranks in [1, 2, 3, 4, 8] {
        let part = k / ranks;
        let mut sum = vec![0f32; m * n];
        for r in 0..ranks {
            let cols = r * part..(r + 1) * part;
            let a_r = shard::columns(&a, m, k, std::slice::from_ref(&cols));
            let b_r = shard::rows(&b, n, cols.clone());
            for (s, v) in sum.iter_mut().zip(gemm_reference(&a_r, &b_r, m, n, part)) {
                *s += v;
            }
        }
        assert!(rel_max_err(&sum, &full) < 1e-6, "{ranks} ranks");
    }
}

#[test]
fn sharded_block_equals_the_unsharded_block() {
    let i = BlockInputs::random(&TINY, 3);
    let one = block_reference(
        &ShardPlan::new(TINY, 1).unwrap_or_else(|e| panic!("{e}")),
        &i,
        false,
    );
    assert!(one.y.iter().all(|v| v.is_finite()));
    assert!(one.y.iter().any(|&v| v.abs() > 0.1));
    for n in [2, 4] {
        let p = ShardPlan::new(TINY, n).unwrap_or_else(|e| panic!("{e}"));
        let got = block_reference(&p, &i, false);
        assert!(rel_max_err(&got.attn, &one.attn) < 1e-5, "{n}: attn");
        assert!(rel_max_err(&got.y, &one.y) < 1e-5, "{n}: y");
        // With bf16 between ops, as on the GPU, sharding stays inside the report's tolerance.
        let rounded = block_reference(&p, &i, true);
        let e = rel_max_err(&rounded.y, &one.y);
        assert!(e < 3e-2 && e > 0.0, "{n}: bf16 error {e}");
    }
    // A wrong slicing is caught: swap two ranks' o-projection rows.
    let p = ShardPlan::new(TINY, 2).unwrap_or_else(|e| panic!("{e}"));
    let mut bad = i.clone();
    let half = TINY.hq / 2 * TINY.d * TINY.hidden;
    let (lo, hi) = bad.weights.w_o.split_at_mut(half);
    lo.swap_with_slice(hi);
    let wrong = block_reference(&p, &bad, false);
    assert!(rel_max_err(&wrong.y, &one.y) > 1e-2);
}

#[test]
fn nccl_missing_is_a_typed_error_with_the_recipe() {
    match nccl::version() {
        Err(TpError::NcclMissing { searched, hint }) => {
            assert!(searched.iter().any(|s| s == "libnccl.so"), "{searched:?}");
            assert!(
                hint.contains("libnccl.so.2") && hint.contains("LD_LIBRARY_PATH"),
                "{hint}"
            );
            println!("NCCL not loadable here (expected on a CPU machine): {hint}");
        }
        Ok(v) => assert!(v >= 2_00_00, "implausible NCCL version {v}"),
        Err(e) => panic!("unexpected error: {e}"),
    }
    // With the recipe applied (docs/multi-gpu.md), the library must load: no GPU is needed for that.
    if std::env::var_os("CUTILE_TP_EXPECT_NCCL").is_some() {
        let v = nccl::version().unwrap_or_else(|e| panic!("{e}"));
        println!("NCCL version code {v}");
        assert!(v >= 2_00_00);
    }
    // The pip layout (libnccl.so.2 only) is recognised and named in the hint.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("libnccl.so.2"), b"").unwrap_or_else(|e| panic!("{e}"));
    let ld = format!("/nonexistent:{}", dir.path().display());
    assert_eq!(
        nccl::versioned_only(&ld),
        vec![dir.path().display().to_string()]
    );
    let TpError::NcclMissing { hint, .. } = nccl::missing_error(&ld) else {
        panic!("not NcclMissing");
    };
    assert!(hint.contains(&dir.path().display().to_string()) && hint.contains("ln -sf"));
    std::fs::write(dir.path().join("libnccl.so"), b"").unwrap_or_else(|e| panic!("{e}"));
    assert!(nccl::versioned_only(&ld).is_empty());
}

#[test]
fn several_ranks_without_nccl_are_refused_before_any_device_work() {
    let i = BlockInputs::random(&TINY, 1);
    let o = cutile_tp::block::RunOptions {
        nccl: false,
        chunks: 1,
        warmup: 1,
        iters: 1,
    };
    match cutile_tp::block::run(&TINY, 2, &i, &o) {
        Err(TpError::Shard { ranks: 2, what }) => assert!(what.contains("NCCL")),
        other => panic!("{:?}", other.map(|r| r.ranks)),
    }
    match cutile_tp::block::run(&cfg(6, 2, 64), 4, &i, &o) {
        Err(TpError::Shard { ranks: 4, .. }) => {}
        other => panic!("{:?}", other.map(|r| r.ranks)),
    }
}

#[test]
fn bus_bandwidth_and_nvlink_parsing() {
    assert_eq!(nccl::bus_bandwidth(100.0, 1), 0.0);
    assert_eq!(nccl::bus_bandwidth(100.0, 2), 100.0);
    assert_eq!(nccl::bus_bandwidth(100.0, 8), 175.0);
    let mut text = String::new();
    for g in 0..2 {
        text.push_str(&format!("GPU {g}: NVIDIA H200 (UUID: GPU-{g})\n"));
        for l in 0..18 {
            let bw = if g == 1 && l == 0 {
                "<inactive>"
            } else {
                "26.562 GB/s"
            };
            text.push_str(&format!("\t Link {l}: {bw}\n"));
        }
    }
    let got = nccl::parse_nvlink_status(&text).unwrap_or_else(|| panic!("no figure"));
    assert!((got - 17.0 * 26.562).abs() < 1e-6, "{got}"); // the weaker GPU
    assert_eq!(
        nccl::parse_nvlink_status("GPU 0: NVIDIA H200 (UUID: x)\n"),
        None
    );
    assert_eq!(nccl::parse_nvlink_status(""), None);
}

fn bw(busbw: f64) -> BusBw {
    BusBw {
        ranks: 8,
        bytes: 1 << 28,
        time_us: 1.0,
        algbw_gbps: busbw / 1.75,
        busbw_gbps: busbw,
    }
}

#[test]
fn bus_bandwidth_judgement() {
    let one = judge_busbw(1, None, Some(478.0), 0.5);
    assert_eq!(one.state, "skipped");
    assert!(one.why.contains("≥ 2 GPUs"));
    assert_eq!(
        judge_busbw(8, Some(Ok(bw(400.0))), Some(478.0), 0.5).state,
        "pass"
    );
    let low = judge_busbw(8, Some(Ok(bw(100.0))), Some(478.0), 0.5);
    assert_eq!(low.state, "fail");
    assert!((low.fraction.unwrap_or(0.0) - 100.0 / 478.0).abs() < 1e-9);
    assert_eq!(
        judge_busbw(8, Some(Ok(bw(100.0))), None, 0.5).state,
        "measured"
    );
    assert_eq!(
        judge_busbw(8, Some(Err("boom".into())), None, 0.5).state,
        "error"
    );
}

fn report(rows: Vec<TpRow>, busbw: Option<BusBwCheck>) -> TpReport {
    TpReport {
        schema: "cutile-tp".into(),
        device: "NVIDIA H200 (sm_90)".into(),
        gpus: 1,
        nccl_version: Some(22703),
        check_config: BlockConfig::SMALL,
        time_config: BlockConfig::LLAMA8B,
        tolerance: 3e-2,
        single_ms: Some(2.0),
        single_err_vs_cpu: Some(4e-3),
        chunks: 4,
        rows,
        busbw,
        notes: vec!["a note".into()],
    }
}

fn ok_row() -> TpRow {
    TpRow {
        status: RowStatus::Ok,
        err_vs_single: Some(0.0),
        err_vs_cpu: Some(4e-3),
        rank_divergence: Some(0.0),
        ms_per_layer: Some(2.1),
        comm_ms: Some(0.1),
        mlp_comm_ms: Some(0.05),
        overlap_ms: Some(2.5),
        tflops: Some(400.0),
        efficiency: efficiency(Some(2.0), 1, Some(2.5)),
        ..TpRow::blocked(1, "")
    }
}

#[test]
fn report_formatting_and_verdict() {
    assert_eq!(efficiency(Some(8.0), 8, Some(1.25)), Some(0.8));
    assert_eq!(efficiency(None, 2, Some(1.0)), None);
    let r = report(
        vec![
            ok_row(),
            TpRow::blocked(2, "needs 2 GPUs, 1 visible"),
            TpRow::blocked(8, "needs 8 GPUs, 1 visible"),
        ],
        Some(judge_busbw(1, None, None, 0.5)),
    );
    assert!(
        r.pass(),
        "blocked rows and a skipped bandwidth check do not fail"
    );
    let md = r.markdown();
    for want in [
        "# Tensor-parallel block: PASS",
        "| 1 | ok | 0.00e0 | 4.00e-3 |",
        "| 2 | blocked: needs 2 GPUs, 1 visible |",
        "| 8 | blocked: needs 8 GPUs, 1 visible |",
        "2.000", // compute = 2.1 - 0.1
        "80%",   // 2.0 / 2.5
        "## NCCL all-reduce bus bandwidth: skipped",
        "needs ≥ 2 GPUs",
        "- a note",
    ] {
        assert!(md.contains(want), "markdown lacks {want:?}:\n{md}");
    }
    let json = serde_json::to_string(&r).unwrap_or_else(|e| panic!("{e}"));
    let back: TpReport = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(serde_json::to_string(&back).ok(), Some(json));
    assert_eq!(
        back.rows[1].status,
        RowStatus::Blocked("needs 2 GPUs, 1 visible".into())
    );
    // Failures fail the report.
    let mut failed = ok_row();
    failed.status = RowStatus::Failed("error above 3.0e-2".into());
    assert!(!report(vec![failed], None).pass());
    assert!(
        !report(
            vec![ok_row()],
            Some(judge_busbw(8, Some(Ok(bw(10.0))), Some(478.0), 0.5))
        )
        .pass()
    );
    let mut no_single = report(vec![ok_row()], None);
    no_single.single_err_vs_cpu = None;
    assert!(
        !no_single.pass(),
        "without the single-GPU check nothing is verified"
    );
    let mut bad_single = report(vec![ok_row()], None);
    bad_single.single_err_vs_cpu = Some(0.5);
    assert!(!bad_single.pass());
    assert!(bad_single.markdown().contains("FAIL"));
    let mut no_nccl = report(
        vec![TpRow::blocked(1, "NCCL not loadable (see notes)")],
        None,
    );
    no_nccl.nccl_version = None;
    assert!(!no_nccl.pass(), "nothing tensor-parallel ran");
    assert!(no_nccl.markdown().contains("NCCL not loaded"));
}

#[test]
fn every_rank_call_plans_on_the_cpu() {
    use cutile::toolchain::GpuArch;
    use cutile_kernels::op::Target;
    let target = Target::planning(GpuArch::Sm90);
    let mut planned = 0;
    for c in [BlockConfig::SMALL, BlockConfig::LLAMA8B] {
        for n in [1, 2, 4, 8] {
            for chunks in [1, 4] {
                let calls = cutile_tp::block::rank_calls(&c, n, chunks)
                    .unwrap_or_else(|e| panic!("{c:?} over {n}: {e}"));
                assert!(calls.len() >= 7);
                for call in calls {
                    let p = call
                        .plan(&target, false)
                        .unwrap_or_else(|e| panic!("{} ({n} ranks): {e}", call.label()));
                    assert!(!p.launches.is_empty(), "{}", call.label());
                    planned += 1;
                }
            }
        }
    }
    assert!(planned > 100);
    assert!(cutile_tp::block::rank_calls(&cfg(6, 2, 64), 4, 1).is_err());
}
