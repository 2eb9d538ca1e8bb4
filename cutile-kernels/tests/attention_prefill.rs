//! The attention prefill variants without a GPU, and on one when present:
//!
//! - CPU reference properties: no variant equals the plain reference; a sink of -inf equals no sink; a
//!   window at least the sequence equals no window; bottom-right with `S_q == S_k` equals top-left; a
//!   varlen batch of one sequence equals the dense call; rows that see nothing give 0 and LSE -inf;
//!   the LSE of one key is its logit; a sink takes its softmax share;
//! - the planner: which kernel a call takes, empty and length-1 batches, and bad calls as typed errors;
//! - every representative variant call specializes, verifies and, with tileiras, compiles for sm_80,
//!   sm_90, sm_100 and sm_120 (reported as skipped without tileiras);
//! - a GPU test (ignored without `--include-ignored`, skipped without a GPU): dense and varlen variant
//!   calls through the host API against the reference.

#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_kernels::attention::{
    self, AttentionOptions, VarlenBatch, attention_reference, prefill_reference, varlen_reference,
};
use cutile_kernels::op::{OpError, Operand, Target};

fn target() -> Target {
    Target::planning(GpuArch::Sm90)
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let same = (x.is_infinite() && x == y) || (x - y).abs() <= tol * (1.0 + y.abs());
        assert!(same, "{what}: element {i}: {x} vs {y}");
    }
}

struct Dense {
    b: usize,
    h: usize,
    hkv: usize,
    sq: usize,
    sk: usize,
    d: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn dense(b: usize, h: usize, hkv: usize, sq: usize, sk: usize, d: usize, seed: u64) -> Dense {
    Dense {
        b,
        h,
        hkv,
        sq,
        sk,
        d,
        q: values(b * h * sq * d, seed)
            .iter()
            .map(|x| x * 2.0)
            .collect(),
        k: values(b * hkv * sk * d, seed + 1),
        v: values(b * hkv * sk * d, seed + 2),
    }
}

impl Dense {
    fn run(&self, o: &AttentionOptions, sinks: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
        prefill_reference(
            &self.q,
            &self.k,
            &self.v,
            (self.b, self.h, self.hkv),
            self.sq,
            self.sk,
            self.d,
            o,
            sinks,
        )
    }
}

fn opts(causal: bool) -> AttentionOptions {
    AttentionOptions {
        causal,
        ..Default::default()
    }
}

#[test]
fn no_variant_equals_the_plain_reference() {
    for causal in [false, true] {
        let x = dense(2, 3, 3, 19, 19, 8, 1);
        let (o, _) = x.run(&opts(causal), None);
        let plain = attention_reference(&x.q, &x.k, &x.v, 19, 19, 8, 1.0 / 8f32.sqrt(), causal);
        close(&o, &plain, 1e-5, "plain");
    }
}

#[test]
fn sink_of_minus_infinity_equals_no_sink() {
    let x = dense(1, 4, 2, 13, 21, 8, 2);
    for causal in [false, true] {
        let (a, la) = x.run(&opts(causal), None);
        let (b, lb) = x.run(&opts(causal), Some(&[f32::NEG_INFINITY; 4]));
        close(&a, &b, 1e-6, "out");
        close(&la, &lb, 1e-6, "lse");
        // A finite sink changes every row (it takes a share of the softmax).
        let (c, lc) = x.run(&opts(causal), Some(&[0.5; 4]));
        assert!(a.iter().zip(&c).any(|(p, q)| (p - q).abs() > 1e-4));
        assert!(la.iter().zip(&lc).all(|(p, q)| q > p));
    }
}

#[test]
fn a_sink_takes_its_share_of_the_softmax() {
    // One key of logit 0 (q = 0) and a sink of logit ln 3: the key gets weight 1/4, LSE = ln 4.
    let (q, k, v) = (vec![0f32; 4], vec![1f32; 4], vec![2f32; 4]);
    let (o, l) = prefill_reference(
        &q,
        &k,
        &v,
        (1, 1, 1),
        1,
        1,
        4,
        &opts(false),
        Some(&[3f32.ln()]),
    );
    close(&o, &[0.5; 4], 1e-6, "out");
    close(&l, &[4f32.ln()], 1e-6, "lse");
}

#[test]
fn window_at_least_the_sequence_equals_no_window() {
    let x = dense(2, 2, 1, 17, 17, 8, 3);
    for causal in [false, true] {
        let (a, la) = x.run(&opts(causal), None);
        let w = AttentionOptions {
            window: Some(17),
            ..opts(causal)
        };
        let (b, lb) = x.run(&w, None);
        close(&a, &b, 1e-6, "out");
        close(&la, &lb, 1e-6, "lse");
        // A window of 0 with causal sees only the query's own key: LSE is that one logit.
        if causal {
            let w0 = AttentionOptions {
                window: Some(0),
                ..opts(true)
            };
            let (o, _) = x.run(&w0, None);
            for (row, orow) in o.chunks(8).enumerate() {
                let (bh, i) = (row / 17, row % 17);
                let kv = ((bh / 2) * 17 + i) * 8;
                close(orow, &x.v[kv..kv + 8], 1e-5, "window 0");
            }
        }
    }
}

#[test]
fn bottom_right_with_equal_lengths_equals_top_left() {
    let x = dense(1, 2, 2, 23, 23, 8, 4);
    let br = AttentionOptions {
        bottom_right: true,
        ..opts(true)
    };
    close(
        &x.run(&br, None).0,
        &x.run(&opts(true), None).0,
        1e-6,
        "out",
    );
    // With fewer queries than keys, query i sees i + S_k - S_q + 1 keys: the last query sees all.
    let y = dense(1, 1, 1, 5, 12, 8, 5);
    let (o, _) = y.run(&br, None);
    let (full, _) = y.run(&opts(false), None);
    close(&o[4 * 8..], &full[4 * 8..], 1e-6, "last row");
    // And the offset form is the same thing.
    let off = AttentionOptions {
        query_offset: 7,
        ..opts(true)
    };
    close(&y.run(&off, None).0, &o, 1e-6, "query_offset");
}

#[test]
fn rows_that_see_nothing_give_zero_and_minus_infinity() {
    // Bottom-right with more queries than keys: the first S_q - S_k queries see no key.
    let x = dense(1, 1, 1, 9, 4, 8, 6);
    let br = AttentionOptions {
        bottom_right: true,
        ..opts(true)
    };
    let (o, l) = x.run(&br, None);
    assert!(o[..5 * 8].iter().all(|&v| v == 0.0));
    assert!(l[..5].iter().all(|&v| v == f32::NEG_INFINITY));
    assert!(l[5..].iter().all(|v| v.is_finite()));
    // With a sink they still give 0 output, and LSE is the sink.
    let (o, l) = x.run(&br, Some(&[0.25]));
    assert!(o[..5 * 8].iter().all(|&v| v == 0.0));
    close(&l[..5], &[0.25; 5], 1e-6, "sink-only lse");
}

#[test]
fn softcap_bounds_the_logits() {
    let x = dense(1, 1, 1, 6, 6, 8, 7);
    // A huge cap is no cap.
    let big = AttentionOptions {
        softcap: Some(1e6),
        ..opts(false)
    };
    close(
        &x.run(&big, None).0,
        &x.run(&opts(false), None).0,
        1e-4,
        "big cap",
    );
    // A tiny cap makes every logit ~0: the output is the mean of the values, LSE ~ ln S_k.
    let tiny = AttentionOptions {
        softcap: Some(1e-4),
        ..opts(false)
    };
    let (o, l) = x.run(&tiny, None);
    for (c, &got) in o.iter().enumerate().take(8) {
        let mean: f32 = (0..6).map(|j| x.v[j * 8 + c]).sum::<f32>() / 6.0;
        close(&[got], &[mean], 1e-3, "tiny cap mean");
    }
    close(&l[..1], &[6f32.ln()], 1e-3, "tiny cap lse");
}

#[test]
fn lse_of_one_key_is_its_logit() {
    let (q, k, v) = (vec![1f32, 2.0], vec![0.5f32, 0.25], vec![3f32, 4.0]);
    let o = AttentionOptions {
        scale: Some(2.0),
        ..opts(false)
    };
    let (out, l) = prefill_reference(&q, &k, &v, (1, 1, 1), 1, 1, 2, &o, None);
    close(&out, &[3.0, 4.0], 1e-6, "out");
    close(&l, &[2.0], 1e-6, "lse");
}

/// `[B, H, S, D]` rows of one batch entry as `[S, H, D]` tokens.
fn to_tokens(x: &[f32], b: usize, h: usize, s: usize, d: usize) -> Vec<f32> {
    let mut out = vec![0f32; s * h * d];
    for hi in 0..h {
        for i in 0..s {
            let src = ((b * h + hi) * s + i) * d;
            let dst = (i * h + hi) * d;
            out[dst..dst + d].copy_from_slice(&x[src..src + d]);
        }
    }
    out
}

#[test]
fn varlen_of_one_sequence_equals_dense_and_sequences_are_independent() {
    let x = dense(2, 4, 2, 11, 15, 8, 8);
    let variants = [
        opts(false),
        opts(true),
        AttentionOptions {
            bottom_right: true,
            window: Some(5),
            softcap: Some(2.0),
            ..opts(true)
        },
    ];
    let sinks = [0.1f32, -0.3, 0.7, 0.0];
    for o in &variants {
        let (dense_o, dense_l) = x.run(o, Some(&sinks));
        // Both batch entries as a two-sequence varlen batch (plus an empty one between them).
        let batch = VarlenBatch {
            seqlens_q: vec![11, 0, 11],
            seqlens_k: vec![15, 3, 15],
        };
        let q: Vec<f32> = [to_tokens(&x.q, 0, 4, 11, 8), to_tokens(&x.q, 1, 4, 11, 8)].concat();
        let mut k = to_tokens(&x.k, 0, 2, 15, 8);
        k.extend(values(3 * 2 * 8, 99));
        k.extend(to_tokens(&x.k, 1, 2, 15, 8));
        let mut v = to_tokens(&x.v, 0, 2, 15, 8);
        v.extend(values(3 * 2 * 8, 98));
        v.extend(to_tokens(&x.v, 1, 2, 15, 8));
        let (vo, vl) = varlen_reference(&q, &k, &v, &batch, 4, 2, 8, o, Some(&sinks));
        let want: Vec<f32> = [
            to_tokens(&dense_o, 0, 4, 11, 8),
            to_tokens(&dense_o, 1, 4, 11, 8),
        ]
        .concat();
        close(&vo, &want, 1e-5, "varlen out");
        for hi in 0..4 {
            for t in 0..22 {
                let (b, i) = (t / 11, t % 11);
                close(
                    &[vl[hi * 22 + t]],
                    &[dense_l[(b * 4 + hi) * 11 + i]],
                    1e-5,
                    "varlen lse",
                );
            }
        }
    }
}

#[test]
fn varlen_length_one_and_empty_sequences() {
    let batch = VarlenBatch {
        seqlens_q: vec![0, 1, 0],
        seqlens_k: vec![0, 1, 2],
    };
    let (q, k, v) = (values(2 * 4, 1), values(3 * 4, 2), values(3 * 4, 3));
    let (o, l) = varlen_reference(&q, &k, &v, &batch, 2, 1, 4, &opts(true), None);
    // The single query sees the single key of its sequence (key row 0 of the flattened keys).
    close(&o[..4], &v[..4], 1e-6, "head 0");
    close(&o[4..], &v[..4], 1e-6, "head 1");
    assert!(l.iter().all(|x| x.is_finite()));
}

// ---- planning ----------------------------------------------------------------------------------------

fn d(name: &'static str, i: usize, dt: ScalarType, s: &[i64]) -> Operand {
    Operand::described(name, i, dt, s)
}

fn dense_ops(q: &[i64], k: &[i64], sinks: Option<&[i64]>, lse: Option<&[i64]>) -> Vec<Operand> {
    let mut ops = vec![
        d("q", 0, BF16, q),
        d("k", 1, BF16, k),
        d("v", 2, BF16, k),
        d("o", 3, BF16, q),
    ];
    if let Some(s) = sinks {
        ops.push(d("sinks", ops.len(), F32, s));
    }
    if let Some(l) = lse {
        ops.push(d("lse", ops.len(), F32, l));
    }
    attention::with_unused(&ops)
}

fn varlen_ops(tq: i64, tk: i64, b: i64, h: i64, hkv: i64) -> Vec<Operand> {
    attention::with_unused(&[
        d("q", 0, BF16, &[tq, h, 128]),
        d("k", 1, BF16, &[tk, hkv, 128]),
        d("v", 2, BF16, &[tk, hkv, 128]),
        d("cu_seqlens_q", 3, I32, &[b + 1]),
        d("cu_seqlens_k", 4, I32, &[b + 1]),
        d("o", 5, BF16, &[tq, h, 128]),
    ])
}

#[test]
fn plain_calls_keep_the_dense_kernels_and_variants_take_the_variant_kernel() {
    let t = target();
    let ops = dense_ops(&[2, 8, 100, 128], &[2, 2, 100, 128], None, None);
    let plain = attention::plan_prefill(&ops, &t, &opts(true)).unwrap();
    assert_eq!(plain[0].kernel.name(), "flash_attention_4d");
    // Bottom-right with equal lengths is top-left: still the dense kernel.
    let br = AttentionOptions {
        bottom_right: true,
        ..opts(true)
    };
    assert_eq!(
        attention::plan_prefill(&ops, &t, &br).unwrap()[0]
            .kernel
            .name(),
        "flash_attention_4d"
    );
    for o in [
        AttentionOptions {
            window: Some(10),
            ..opts(true)
        },
        AttentionOptions {
            softcap: Some(30.0),
            ..opts(false)
        },
        AttentionOptions {
            query_offset: 3,
            ..opts(true)
        },
    ] {
        let p = attention::plan_prefill(&ops, &t, &o).unwrap();
        assert_eq!(p[0].kernel.name(), "attention_prefill", "{o:?}");
        assert_eq!(p[0].grid, Some((16, 2, 1)));
    }
    let with = dense_ops(
        &[2, 8, 100, 128],
        &[2, 2, 100, 128],
        Some(&[8]),
        Some(&[2, 8, 100]),
    );
    let p = attention::plan_prefill(&with, &t, &opts(false)).unwrap();
    assert_eq!(p[0].kernel.name(), "attention_prefill");
    // The plain op routes variant options to the variant kernel too (with the stand-in operand).
    let p = attention::plan(
        &ops,
        &t,
        &AttentionOptions {
            window: Some(4),
            ..opts(true)
        },
        false,
    )
    .unwrap();
    assert_eq!(p[0].kernel.name(), "attention_prefill");
}

#[test]
fn varlen_grid_follows_the_longest_sequence_and_empty_batches_plan_nothing() {
    let t = target();
    let p = attention::plan_varlen(&varlen_ops(300, 400, 3, 8, 2), &t, 130, &opts(true)).unwrap();
    assert_eq!(p[0].kernel.name(), "attention_varlen");
    assert_eq!(p[0].grid, Some((3, 8, 3)));
    // No sequences, or only empty ones.
    assert!(
        attention::plan_varlen(&varlen_ops(0, 0, 0, 8, 2), &t, 0, &opts(true))
            .unwrap()
            .is_empty()
    );
    assert!(
        attention::plan_varlen(&varlen_ops(0, 5, 2, 8, 2), &t, 0, &opts(false))
            .unwrap()
            .is_empty()
    );
    // Length-1 sequences.
    let p = attention::plan_varlen(&varlen_ops(2, 2, 2, 8, 8), &t, 1, &opts(true)).unwrap();
    assert_eq!(p[0].grid, Some((1, 8, 2)));
}

fn unsupported(r: Result<Vec<cutile_kernels::op::PlannedLaunch>, OpError>, needle: &str) {
    match r {
        Err(e) => assert!(e.to_string().contains(needle), "{e} (wanted `{needle}`)"),
        Ok(_) => panic!("planned; wanted an error with `{needle}`"),
    }
}

#[test]
fn bad_calls_are_typed_errors() {
    let t = target();
    let ops = dense_ops(&[2, 8, 100, 128], &[2, 2, 100, 128], None, None);
    unsupported(
        attention::plan_prefill(
            &ops,
            &t,
            &AttentionOptions {
                softcap: Some(0.0),
                ..opts(true)
            },
        ),
        "softcap",
    );
    unsupported(
        attention::plan_prefill(
            &ops,
            &t,
            &AttentionOptions {
                softcap: Some(f32::NAN),
                ..opts(true)
            },
        ),
        "softcap",
    );
    unsupported(
        attention::plan_prefill(
            &ops,
            &t,
            &AttentionOptions {
                window: Some(u32::MAX),
                ..opts(true)
            },
        ),
        "window",
    );
    unsupported(
        attention::plan_prefill(
            &ops,
            &t,
            &AttentionOptions {
                query_offset: 1 << 40,
                ..opts(true)
            },
        ),
        "query_offset",
    );
    // Sinks: f32 [H].
    let bad = dense_ops(&[2, 8, 100, 128], &[2, 2, 100, 128], Some(&[2]), None);
    unsupported(attention::plan_prefill(&bad, &t, &opts(true)), "sinks");
    let mut bf = dense_ops(&[2, 8, 100, 128], &[2, 2, 100, 128], Some(&[8]), None);
    bf[4].dtype = BF16;
    assert!(matches!(
        attention::plan_prefill(&bf, &t, &opts(true)),
        Err(OpError::DType { arg: "sinks", .. })
    ));
    // LSE: f32 [B, H, S_q].
    let bad = dense_ops(
        &[2, 8, 100, 128],
        &[2, 2, 100, 128],
        None,
        Some(&[2, 8, 99]),
    );
    unsupported(attention::plan_prefill(&bad, &t, &opts(true)), "lse");
    // Sinks need heads: not the 3-D layout.
    let three = dense_ops(&[16, 100, 128], &[16, 100, 128], Some(&[1]), None);
    assert!(matches!(
        attention::plan_prefill(&three, &t, &opts(true)),
        Err(OpError::Rank { .. })
    ));
    // Missing stand-in operand.
    let bare = vec![
        d("q", 0, BF16, &[1, 1, 8, 64]),
        d("k", 1, BF16, &[1, 1, 8, 64]),
        d("v", 2, BF16, &[1, 1, 8, 64]),
        d("o", 3, BF16, &[1, 1, 8, 64]),
    ];
    unsupported(
        attention::plan_prefill(
            &bare,
            &t,
            &AttentionOptions {
                window: Some(1),
                ..opts(true)
            },
        ),
        "with_unused",
    );
    // Varlen.
    let ok = varlen_ops(300, 400, 3, 8, 2);
    unsupported(
        attention::plan_varlen(&ok, &t, 301, &opts(true)),
        "max_seqlen_q",
    );
    let mut cu = ok.clone();
    cu[3].dtype = I64;
    assert!(matches!(
        attention::plan_varlen(&cu, &t, 10, &opts(true)),
        Err(OpError::DType {
            arg: "cu_seqlens_q",
            ..
        })
    ));
    let mut cu = ok.clone();
    cu[4].shape = vec![3];
    unsupported(
        attention::plan_varlen(&cu, &t, 10, &opts(true)),
        "cu_seqlens_k",
    );
    unsupported(
        attention::plan_varlen(&varlen_ops(300, 400, 3, 8, 3), &t, 10, &opts(true)),
        "divide",
    );
    let mut hd = ok.clone();
    hd[0].shape = vec![300, 8, 96];
    hd[5].shape = vec![300, 8, 96];
    unsupported(
        attention::plan_varlen(&hd, &t, 10, &opts(true)),
        "head dimension",
    );
    let mut r = ok;
    r[0].shape = vec![300, 8, 1, 128];
    assert!(matches!(
        attention::plan_varlen(&r, &t, 10, &opts(true)),
        Err(OpError::Rank { .. })
    ));
}

#[test]
fn every_representative_variant_call_specializes_and_compiles_for_four_archs() {
    let t = target();
    let calls: Vec<_> = attention::representative_calls()
        .into_iter()
        .filter(|c| c.op == attention::PREFILL_OP || c.op == attention::VARLEN_OP)
        .collect();
    assert_eq!(calls.len(), 6);
    for c in &calls {
        let planned = c.plan(&t, true).unwrap();
        assert_eq!(planned.launches.len(), 1, "{}", c.label());
    }
    let covered = common::compile_every_launch(
        "attention_prefill compile",
        &calls,
        common::OtherArchsPer::Specialization,
    );
    // The varlen calls of equal lengths (the benchmark's partner of the dense call) share the ragged
    // calls' specializations.
    assert_eq!(covered.specializations, 4, "specializations");
}

/// The memory ops of the specialized kernel of `call`'s only launch: (opcode, result element type or
/// `-`, optimization hints, padding of the partition read or written).
fn memory_ops(call: &cutile_kernels::op::CallSpec) -> Vec<(cutile_ir::Opcode, String, String)> {
    use cutile_ir::Opcode::*;
    let planned = call.plan(&target(), true).unwrap();
    let s = common::specialize_launch(&planned, &planned.launches[0]);
    let f = s.module.function(s.entry).unwrap();
    let mut out = vec![];
    f.walk(&mut |op| {
        if matches!(
            op.opcode,
            LoadViewTko | StoreViewTko | LoadPtrTko | StorePtrTko
        ) {
            let ty = op
                .results
                .first()
                .and_then(|r| f.value_type(*r))
                .map_or("-".to_string(), |t| format!("{t:?}"));
            let hints = format!("{:?}", op.attr("optimization_hints"));
            out.push((op.opcode, ty, hints));
        }
    });
    out
}

/// The varlen kernel reads `q`, `k`, `v` and writes `o` with view loads and stores through sub-views
/// of its sequence (`Tensor::narrow`), the op family and hints of the dense variant kernel; the only
/// pointer loads left are the four `cu_seqlens` reads (one i32 each), and nothing is scattered.
#[test]
fn varlen_loads_and_stores_whole_tiles_through_views_like_the_dense_kernel() {
    use cutile_ir::Opcode::*;
    let calls = attention::representative_calls();
    let dense = calls
        .iter()
        .find(|c| c.op == attention::PREFILL_OP)
        .unwrap();
    let dense_ops = memory_ops(dense);
    let dense_hints: std::collections::BTreeSet<_> = dense_ops
        .iter()
        .filter(|o| o.0 == LoadViewTko)
        .map(|o| o.2.clone())
        .collect();
    let varlen: Vec<_> = calls
        .iter()
        .filter(|c| c.op == attention::VARLEN_OP)
        .collect();
    assert_eq!(varlen.len(), 4);
    for c in varlen {
        let ops = memory_ops(c);
        let count = |k| ops.iter().filter(|o| o.0 == k).count();
        // q once, k and v in each of the three key loops (plus the sink logit, f32).
        let tiles = ops
            .iter()
            .filter(|o| o.0 == LoadViewTko && o.1.contains("BF16"))
            .count();
        assert_eq!(tiles, 7, "{}: {ops:?}", c.label());
        assert!(count(StoreViewTko) >= 1, "{}: {ops:?}", c.label());
        assert_eq!(count(StorePtrTko), 0, "{}: {ops:?}", c.label());
        let ptr_loads: Vec<_> = ops.iter().filter(|o| o.0 == LoadPtrTko).collect();
        assert_eq!(ptr_loads.len(), 4, "{}: {ops:?}", c.label());
        for o in &ptr_loads {
            assert!(
                o.1.contains("I32") && o.1.contains("[1]"),
                "{}: a pointer load of {} (only the cu_seqlens reads may remain)",
                c.label(),
                o.1
            );
        }
        let hints: std::collections::BTreeSet<_> = ops
            .iter()
            .filter(|o| o.0 == LoadViewTko)
            .map(|o| o.2.clone())
            .collect();
        assert_eq!(hints, dense_hints, "{}", c.label());
    }
}

// ---- GPU ---------------------------------------------------------------------------------------------

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        if w.is_infinite() {
            assert_eq!(g, w, "an infinite reference must be matched exactly");
            continue;
        }
        num += ((g - w) as f64).powi(2);
        den += (w as f64).powi(2);
    }
    (num / den.max(1e-30)).sqrt()
}

/// Dense and varlen calls with every option (and plain ones) through the host API against the CPU
/// reference, bf16.
#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_variants_match_the_reference() {
    use cutile::runtime::Tensor;
    use half::bf16;
    let Some((dev, stream)) = common::gpu_device("gpu_variants_match_the_reference") else {
        return;
    };
    let up = |v: &[f32], shape: &[i64]| {
        let h: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
        Tensor::from_host(&dev, &h, shape).unwrap()
    };
    let round =
        |v: Vec<f32>| -> Vec<f32> { v.into_iter().map(|x| bf16::from_f32(x).to_f32()).collect() };
    let every = AttentionOptions {
        bottom_right: true,
        window: Some(50),
        softcap: Some(20.0),
        ..opts(true)
    };
    let sinks = vec![0.3f32, -0.5, 1.0, 0.0];
    for (o, with_sinks) in [
        (opts(false), false),
        (every, true),
        (
            AttentionOptions {
                window: Some(7),
                ..opts(false)
            },
            true,
        ),
    ] {
        // Dense: B 1, H 4 over 2 K/V heads, 100 queries, 237 keys, D 64.
        let x = dense(1, 4, 2, 100, 237, 64, 11);
        let (q, k, v) = (round(x.q.clone()), round(x.k.clone()), round(x.v.clone()));
        let x = Dense { q, k, v, ..x };
        let s = with_sinks.then_some(sinks.as_slice());
        let (want_o, want_l) = x.run(&o, s);
        let (qt, kt, vt) = (
            up(&x.q, &[1, 4, 100, 64]),
            up(&x.k, &[1, 2, 237, 64]),
            up(&x.v, &[1, 2, 237, 64]),
        );
        let st = Tensor::from_host(&dev, &sinks, &[4]).unwrap();
        let mut ot = Tensor::<bf16>::zeros(&dev, &[1, 4, 100, 64]).unwrap();
        let mut lt = Tensor::<f32>::zeros(&dev, &[1, 4, 100]).unwrap();
        let extras = attention::Extras {
            sinks: with_sinks.then_some(&st as &dyn cutile::launch::TensorArg),
            lse: Some(&mut lt),
        };
        attention::attention_with(&stream, &qt, &kt, &vt, &o, extras, &mut ot)
            .unwrap()
            .wait()
            .unwrap();
        let got: Vec<f32> = ot.to_host().unwrap().iter().map(|x| x.to_f32()).collect();
        assert!(rel_l2(&got, &want_o) < 2e-2, "dense {o:?}");
        assert!(
            rel_l2(&lt.to_host().unwrap(), &want_l) < 1e-2,
            "dense lse {o:?}"
        );

        // Varlen: an empty, a length-1 and two ragged sequences; H 4 over 2, D 64.
        let batch = VarlenBatch {
            seqlens_q: vec![0, 1, 77, 200],
            seqlens_k: vec![5, 1, 60, 260],
        };
        let (tq, tk) = (batch.total_q(), batch.total_k());
        let q = round(values(tq * 4 * 64, 21));
        let k = round(values(tk * 2 * 64, 22));
        let v = round(values(tk * 2 * 64, 23));
        let (want_o, want_l) = varlen_reference(&q, &k, &v, &batch, 4, 2, 64, &o, s);
        let (qt, kt, vt) = (
            up(&q, &[tq as i64, 4, 64]),
            up(&k, &[tk as i64, 2, 64]),
            up(&v, &[tk as i64, 2, 64]),
        );
        let cq = VarlenBatch::cu(&batch.seqlens_q);
        let ck = VarlenBatch::cu(&batch.seqlens_k);
        let (cqt, ckt) = (
            Tensor::from_host(&dev, &cq, &[5]).unwrap(),
            Tensor::from_host(&dev, &ck, &[5]).unwrap(),
        );
        let mut ot = Tensor::<bf16>::zeros(&dev, &[tq as i64, 4, 64]).unwrap();
        let mut lt = Tensor::<f32>::zeros(&dev, &[4, tq as i64]).unwrap();
        let extras = attention::Extras {
            sinks: with_sinks.then_some(&st as &dyn cutile::launch::TensorArg),
            lse: Some(&mut lt),
        };
        attention::attention_varlen(
            &stream,
            &qt,
            &kt,
            &vt,
            &cqt,
            &ckt,
            batch.max_q(),
            &o,
            extras,
            &mut ot,
        )
        .unwrap()
        .wait()
        .unwrap();
        let got: Vec<f32> = ot.to_host().unwrap().iter().map(|x| x.to_f32()).collect();
        assert!(rel_l2(&got, &want_o) < 2e-2, "varlen {o:?}");
        assert!(
            rel_l2(&lt.to_host().unwrap(), &want_l) < 1e-2,
            "varlen lse {o:?}"
        );
    }
}

/// The varlen kernel scales its scores inside the softmax step's `fma` (`s · scale·log2 e − m`), as
/// the dense kernel does, instead of multiplying every score first: at D 64 (so the `64 x 128` score
/// tiles are told apart from the `64 x 64` accumulator) there is one `fma` and no `mulf` on a score
/// tile per key loop (three loops: masked, unmasked, masked).
#[test]
fn varlen_scales_scores_inside_the_step_fma() {
    for causal in [false, true] {
        let call = cutile_kernels::op::CallSpec {
            op: attention::VARLEN_OP.into(),
            dtype: "bf16".into(),
            shapes: vec![vec![8, 2, 64], vec![300, 77], vec![300, 77]],
            causal,
        };
        let planned = call.plan(&target(), false).unwrap();
        let ir = common::specialize_launch(&planned, &planned.launches[0]).ir_text();
        let on_scores = |op: &str| {
            ir.lines()
                .filter(|l| l.contains(&format!("= {op} ")) && l.contains("tile<64x128xf32>"))
                .count()
        };
        assert_eq!(on_scores("fma"), 3, "causal {causal}:\n{ir}");
        assert_eq!(on_scores("mulf"), 0, "causal {causal}:\n{ir}");
    }
}

/// Every `exp2` of the prefill softmax carries `flush_to_zero`, in the dense kernels (every tuning
/// candidate) and the varlen one: a plain `exp2` costs sm_90 a range check and two multiplies per
/// score around its `MUFU.EX2` (ncu beside cuDNN, session 43, `docs/attention.md`), and cuTile
/// Python's `fmha` asks for flush to zero too.
#[test]
fn prefill_softmax_exponentials_flush_to_zero() {
    let dense = cutile_kernels::op::CallSpec::new(
        attention::OP,
        "bf16",
        &[&[4, 32, 4096, 128], &[4, 32, 4096, 128]],
        false,
    );
    let varlen = cutile_kernels::op::CallSpec {
        op: attention::VARLEN_OP.into(),
        dtype: "bf16".into(),
        shapes: vec![vec![8, 2, 64], vec![300, 77], vec![300, 77]],
        causal: true,
    };
    for (call, all) in [(dense, true), (varlen, false)] {
        let planned = call.plan(&target(), all).unwrap();
        for l in &planned.launches {
            let ir = common::specialize_launch(&planned, l).ir_text();
            let exps: Vec<&str> = ir.lines().filter(|l| l.contains("= exp2 ")).collect();
            assert!(!exps.is_empty(), "{}: no exp2", l.config);
            assert!(
                exps.iter().all(|l| l.contains("flush_to_zero")),
                "{}: {exps:#?}",
                l.config
            );
        }
    }
}

/// What tileiras makes of the attention kernels' exponentials and normalizations on sm_90, for the
/// default kernel of every representative prefill, decode and MLA call: no plain-`exp2` range check
/// (`FSETP.GEU x, -126` and two predicated `FMUL`s around a `MUFU.EX2`; the plain-`exp2` build of the
/// B4 H32 S4096 D128 kernel had 132 of them) and no per-element division (each is an `FCHK` range
/// check and a slow-path branch around its `MUFU.RCP`: 64 per thread in that kernel's `acc / l`,
/// now one reciprocal per row and a multiply; 1952 SASS instructions against 3264 before both
/// changes, session 44). A scalar division of the call's parameters (the soft-cap's `scale / cap`)
/// may keep one `FCHK`.
#[test]
fn attention_sass_has_no_exp2_or_divide_range_checks() {
    let test = "attention_sass_has_no_exp2_or_divide_range_checks";
    let Some(tileiras) = common::tileiras(test) else {
        return;
    };
    let mut calls = attention::representative_calls();
    calls.extend(attention::decode::representative_calls());
    calls.extend(attention::mla::representative_calls());
    let jobs = common::catalog_jobs(&calls);
    assert!(jobs.len() >= 20, "{} jobs", jobs.len());
    for (what, k, metas) in &jobs {
        let spec = k.specialize(metas).unwrap();
        let cubin = common::compile_cached(&tileiras, &spec, GpuArch::Sm90).unwrap();
        let Some(sass) = common::sass(test, &tileiras, &cubin) else {
            return;
        };
        let checks: Vec<_> = common::sass_instructions(&sass, "FSETP.GEU")
            .into_iter()
            .filter(|i| i.contains("-126"))
            .collect();
        assert!(checks.is_empty(), "{what}: {checks:#?}");
        let divides = common::sass_instructions(&sass, "FCHK").len();
        assert!(divides <= 1, "{what}: {divides} FCHK");
        if what.starts_with("flash_attention") {
            assert!(
                common::sass_instructions(&sass, "MUFU.EX2").len() >= 64,
                "{what}"
            );
        }
    }
}

/// The dense kernel's tuning candidates: the default 64 x 128 tile first, then 128 x 128 and 128 x 64
/// on two warpgroups (8 worker warps, occupancy 1), then the overlap twins of the default and of the
/// wide 128 x 128 tile (the `_overlap` kernels), then 128 query rows split over a 2-CTA cluster (one
/// warpgroup per CTA, the cluster hint; not on sm_80); each specializes and compiles for sm_90,
/// where the tuner times them.
#[test]
fn dense_candidates_add_128_row_tiles_on_two_warpgroups_and_overlap_twins() {
    let t = target();
    let call = cutile_kernels::op::CallSpec::new(
        attention::OP,
        "bf16",
        &[&[4, 32, 4096, 128], &[4, 32, 4096, 128]],
        true,
    );
    let planned = call.plan(&t, true).unwrap();
    let names: Vec<_> = planned.launches.iter().map(|l| l.config.as_str()).collect();
    assert_eq!(
        names,
        [
            "flash_attention BM=64 BN=128",
            "flash_attention BM=128 BN=128 w8",
            "flash_attention BM=128 BN=64 w8",
            "flash_attention BM=64 BN=128 overlap",
            "flash_attention BM=128 BN=128 w8 overlap",
            "flash_attention BM=128 BN=128 c2"
        ]
    );
    assert_eq!(call.plan(&t, false).unwrap().launches.len(), 1);
    // sm_80 has no clusters: the same call there offers every candidate but the cluster one.
    let sm80: Vec<_> = call
        .plan(&Target::planning(GpuArch::Sm80), true)
        .unwrap()
        .launches
        .iter()
        .map(|l| l.config.clone())
        .collect();
    assert_eq!(sm80, names[..names.len() - 1]);
    let tileiras = common::tileiras("dense attention candidates");
    for l in &planned.launches {
        let hints = format!("{:?}", l.kernel.hints());
        let wide = l.config.contains(" w8");
        let overlap = l.config.ends_with(" overlap");
        assert_eq!(
            l.kernel.name().ends_with("_overlap"),
            overlap,
            "{}",
            l.config
        );
        assert_eq!(hints.contains("num_worker_warps_per_cta"), wide, "{hints}");
        assert_eq!(
            hints.contains("num_cta_in_cga"),
            l.config.ends_with(" c2"),
            "{hints}"
        );
        let occupancy = if wide { "value: 1 }" } else { "value: 2 }" };
        assert!(hints.contains(occupancy), "{hints}");
        // 128 query rows per block: half the grid's query tiles.
        let q_tiles = if l.config.contains("BM=128") { 32 } else { 64 };
        assert_eq!(l.grid, Some((128, q_tiles, 1)), "{}", l.config);
        let s = common::specialize_launch(&planned, l);
        if let Some(tl) = &tileiras {
            common::compile_cached(tl, &s, GpuArch::Sm90)
                .unwrap_or_else(|e| panic!("{}: {e}", l.config));
        }
    }
}
