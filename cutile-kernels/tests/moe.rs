//! The NVFP4 MoE family without a GPU:
//!
//! - the format: every e2m1 and e4m3 code decodes to its value and re-encodes to itself, rounding at
//!   every midpoint goes to the even code, saturation, zeros and negative zero, the scales of the
//!   issue's formulas, block boundaries (each 16-element block has its own scale) and the packing;
//! - routing (softmax with and without renormalization, sigmoid with a selection-only bias), the
//!   alignment of (token, expert) pairs to GEMM row blocks, and the dense MoE reference on tiny shapes;
//! - the catalog's kernels compile for sm_80, sm_90, sm_100 and sm_120;
//! - on a GPU (ignored without `--include-ignored`, skipped without a device): quantize and dequantize
//!   bit-exact against the CPU reference (bf16, f16, ragged rows), every folded-dequantization kernel
//!   against it and bit-exact against each other, and MoE layers (W4A16 and dense)
//!   against the reference: ragged T, 4 to 128 experts, top-1/2/8, an empty expert, one expert taking
//!   every token, at every row block and in every decode-form tile, split over 16 `gpu_moe_layer_*` /
//!   `gpu_moe_decode_*` tests (one per row block and weight kind, one per decode shape) so their JIT
//!   compiles run on parallel test threads (`gpu_runs_are_split_without_loss` checks that no run is
//!   lost);
//! - a GPU property test (`gpu_moe_layer_property`, proptest, 24 cases or `PROPTEST_CASES`): T from 1
//!   to 8192, E of 8/64/128, top-1/2/8, empty experts and one expert taking every token, bf16 and f16,
//!   NVFP4 and dense weights, at the host's own row block and form.

#![allow(clippy::unwrap_used)]

use crate::common;

use cutile::runtime::{DeviceElement, Stream, Tensor};
use cutile_kernels::moe::reference::{self as r, RoutingMode};
use cutile_kernels::moe::{self, MoeElem, Routing, Weights};
use half::{bf16, f16};

#[test]
fn e2m1_codes_decode_and_roundtrip() {
    let want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for code in 0u8..16 {
        let v = r::e2m1_decode(code);
        let mag = want[usize::from(code & 7)];
        assert_eq!(v.abs(), mag, "code {code:#x}");
        assert_eq!(v.is_sign_negative(), code & 8 != 0, "code {code:#x}");
        assert_eq!(r::e2m1_encode(v), code, "code {code:#x} ({v})");
    }
    // The high nibble is ignored by decode.
    assert_eq!(r::e2m1_decode(0xF3), 1.5);
}

#[test]
fn e2m1_rounds_to_nearest_even_and_saturates() {
    let cases: &[(f32, u8)] = &[
        (0.25, 0),
        (0.2500001, 1),
        (0.7499999, 1),
        (0.75, 2),
        (1.25, 2),
        (1.2500001, 3),
        (1.75, 4),
        (2.5, 4),
        (2.5000002, 5),
        (3.5, 6),
        (5.0, 6),
        (5.0000005, 7),
        (6.0, 7),
        (7.0, 7),
        (1e30, 7),
        (f32::INFINITY, 7),
        (0.1, 0),
    ];
    for &(v, code) in cases {
        assert_eq!(r::e2m1_encode(v), code, "{v}");
        assert_eq!(r::e2m1_encode(-v), code | 8, "-{v}");
    }
    assert_eq!(r::e2m1_encode(0.0), 0);
    assert_eq!(r::e2m1_encode(-0.0), 8);
    assert_eq!(
        r::e2m1_encode(-0.1),
        8,
        "negative values rounding to zero keep the sign"
    );
    // Exhaustive: every f32 near the grid encodes to its nearest grid value.
    let mut v = -7.0f32;
    while v <= 7.0 {
        let got = r::e2m1_decode(r::e2m1_encode(v));
        let best = r::E2M1_GRID
            .iter()
            .map(|g| (v.abs().min(6.0) - g).abs())
            .fold(f32::INFINITY, f32::min);
        assert_eq!((v.abs().min(6.0) - got.abs()).abs(), best, "{v}");
        v += 1.0 / 64.0;
    }
}

/// `codec::e4m3_decode`'s ops on the host: the byte at bit 20 of an f32 (`e4m3 · 2^-120`, an f32
/// subnormal for the subnormal codes) times `2^120` is the code's value, for every finite
/// non-negative code; the sign bit is masked off.
#[test]
fn e4m3_bit_placement_decode_is_exact() {
    let decode = |c: u8| f32::from_bits((u32::from(c) << 20) & 0x07F0_0000) * 2f32.powi(120);
    for c in 0u8..=0x7E {
        assert_eq!(decode(c), r::e4m3_decode(c), "{c:#x}");
        assert_eq!(decode(c | 0x80), r::e4m3_decode(c), "{:#x}", c | 0x80);
    }
    assert!(
        f32::from_bits(1 << 20) < f32::MIN_POSITIVE,
        "code 1 goes through an f32 subnormal"
    );
}

#[test]
fn e4m3_codes_decode_and_roundtrip() {
    // Known values.
    assert_eq!(r::e4m3_decode(0x00), 0.0);
    assert_eq!(r::e4m3_decode(0x01), 2f32.powi(-9));
    assert_eq!(r::e4m3_decode(0x07), 7.0 * 2f32.powi(-9));
    assert_eq!(r::e4m3_decode(0x08), 2f32.powi(-6));
    assert_eq!(r::e4m3_decode(0x38), 1.0);
    assert_eq!(r::e4m3_decode(0x7E), 448.0);
    assert_eq!(r::e4m3_decode(0xB8), -1.0);
    assert!(r::e4m3_decode(0x7F).is_nan());
    assert!(r::e4m3_decode(0xFF).is_nan());
    // Every non-negative finite code re-encodes to itself and the values increase.
    let mut prev = -1.0;
    for c in 0u8..=0x7E {
        let v = r::e4m3_decode(c);
        assert!(v > prev, "{c:#x}");
        prev = v;
        if c > 0 {
            assert_eq!(r::e4m3_encode(v), c, "{c:#x}");
        }
        // Midpoints go to the even code.
        if c < 0x7E {
            let mid = (v + r::e4m3_decode(c + 1)) / 2.0;
            let want = if c % 2 == 0 { c } else { c + 1 };
            assert_eq!(r::e4m3_encode(mid), want, "midpoint after {c:#x}");
        }
    }
    assert_eq!(r::e4m3_encode(500.0), 0x7E, "saturates at 448");
    assert_eq!(r::e4m3_encode(1e-9), 0, "underflows to zero");
    assert_eq!(
        r::e4m3_encode(2f32.powi(-10)),
        0,
        "half the smallest subnormal ties to 0"
    );
    assert_eq!(r::e4m3_encode(2f32.powi(-10) * 1.01), 1);
}

/// A matrix with one block holding the tensor's maximum, zero blocks, negative zeros and values on
/// the e2m1 grid of their block.
fn sample(rows: usize, k: usize) -> Vec<f32> {
    (0..rows * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            let b = c / r::BLOCK;
            match (r + b) % 5 {
                0 => 0.0,
                1 => -0.0,
                2 => ((c % 7) as f32 - 3.0) * 0.37 * (r + 1) as f32,
                3 => r::E2M1_GRID[c % 8] * if c % 2 == 0 { 1.0 } else { -1.0 },
                _ => ((i * 2654435761) % 1000) as f32 / 100.0 - 5.0,
            }
        })
        .collect()
}

#[test]
fn quantize_follows_the_scale_formulas() {
    let (rows, k) = (6, 64);
    let x = sample(rows, k);
    let q = r::quantize_rows(&x, rows, k, 3).unwrap();
    assert_eq!(q.packed.len(), rows * k / 2);
    assert_eq!(q.scales.len(), rows * k / 16);
    assert_eq!(q.global.len(), 2);
    for g in 0..2 {
        let amax = x[g * 3 * k..(g + 1) * 3 * k]
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        assert_eq!(q.global[g], amax / 2688.0);
    }
    for row in 0..rows {
        let g = q.global[row / 3];
        for b in 0..k / 16 {
            let blk = &x[row * k + b * 16..row * k + b * 16 + 16];
            let bamax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let code = q.scales[row * k / 16 + b];
            assert_eq!(code, r::e4m3_encode(bamax / 6.0 / g));
            let s = r::e4m3_decode(code) * g;
            for (i, &v) in blk.iter().enumerate() {
                let c = b * 16 + i;
                let byte = q.packed[row * k / 2 + c / 2];
                let nib = if c % 2 == 0 { byte & 15 } else { byte >> 4 };
                let want = if s == 0.0 {
                    r::e2m1_encode(v * 0.0)
                } else {
                    r::e2m1_encode(v / s)
                };
                assert_eq!(nib, want, "({row}, {c})");
                // Error bound of the format: half a grid step of the block's scale, at most 1 · s
                // (between 4 and 6), plus the scale's own rounding (2^-4 relative) for clamped values.
                let d = r::dequant_at(&q, row, c);
                assert!(
                    (d - v).abs() <= s * 1.0 + bamax * 0.0625 + 1e-30,
                    "({row}, {c}): {v} → {d}"
                );
                assert_eq!(
                    d.is_sign_negative() && d == 0.0,
                    v.is_sign_negative() && d == 0.0
                );
            }
        }
    }
    // A zero block stores zero codes with the signs of its elements and a zero scale.
    let zero_rows = r::quantize_rows(&[-0.0; 32], 1, 32, 1).unwrap();
    assert_eq!(zero_rows.global, vec![0.0]);
    assert_eq!(zero_rows.scales, vec![0, 0]);
    assert!(zero_rows.packed.iter().all(|&b| b == 0x88));
    assert!(r::dequantize(&zero_rows).iter().all(|v| *v == 0.0));
}

#[test]
fn block_boundaries_get_their_own_scale() {
    // Block 0 is small, block 1 holds the maximum: without per-block scales block 0 would round to
    // zero.
    let mut x = vec![0.01f32; 32];
    x[16..].fill(100.0);
    x[31] = -100.0;
    let q = r::quantize_rows(&x, 1, 32, 1).unwrap();
    assert_ne!(q.scales[0], q.scales[1]);
    assert_eq!(q.scales[1], 0x7E, "the tensor's max block gets scale 448");
    let d = r::dequantize(&q);
    for (i, (&a, &b)) in x.iter().zip(&d).enumerate() {
        assert!((a - b).abs() <= a.abs() * 0.07, "{i}: {a} → {b}");
    }
    assert_eq!(d[31], -100.0);
    // Element 15 and 16 sit in bytes 7 (high nibble) and 8 (low nibble).
    assert_eq!(
        q.packed[8] & 0xF,
        r::e2m1_encode(100.0 / (448.0 * q.global[0]))
    );
}

#[test]
fn exact_grid_values_roundtrip() {
    // A block whose max is 6·448·global holds grid values exactly.
    let mut x = vec![0f32; 32];
    for (i, v) in x.iter_mut().enumerate() {
        *v = r::E2M1_GRID[i % 8] * if i % 3 == 0 { -1.0 } else { 1.0 } * 2.0;
    }
    x[7] = 12.0;
    x[23] = 12.0;
    let q = r::quantize_rows(&x, 1, 32, 1).unwrap();
    // Bit-exact, negative zeros included.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&r::dequantize(&q)), bits(&x));
}

#[test]
fn quantize_rejects_bad_sizes() {
    assert!(
        r::quantize_rows(&[0.0; 16], 1, 16, 1).is_none(),
        "k must be a multiple of 32"
    );
    assert!(r::quantize_rows(&[0.0; 64], 2, 32, 3).is_none());
    assert!(r::quantize_rows(&[0.0; 63], 2, 32, 1).is_none());
}

#[test]
fn routing_modes() {
    let logits = [1.0f32, 3.0, 2.0, 3.0, -1.0, 0.0, 0.5, 0.25];
    let (ids, w) = r::route(
        &logits,
        2,
        4,
        2,
        RoutingMode::SoftmaxTopK { renormalize: false },
        None,
    );
    assert_eq!(ids, vec![1, 3, 2, 3], "ties go to the lower expert");
    let p: f64 = (3f64).exp() / [1f64, 3.0, 2.0, 3.0].iter().map(|v| v.exp()).sum::<f64>();
    assert!((f64::from(w[0]) - p).abs() < 1e-6);
    let (_, w) = r::route(
        &logits,
        2,
        4,
        2,
        RoutingMode::SoftmaxTopK { renormalize: true },
        None,
    );
    assert!((w[0] + w[1] - 1.0).abs() < 1e-6 && (w[0] - 0.5).abs() < 1e-6);
    // The bias changes the selection but not the weights.
    let bias = [0.0f32, 0.0, 0.0, 10.0];
    let (ids, w) = r::route(
        &logits[..4],
        1,
        4,
        2,
        RoutingMode::SigmoidBias {
            scale: 2.5,
            group_limit: None,
        },
        Some(&bias),
    );
    assert_eq!(ids, vec![3, 1]);
    let s = |v: f64| 1.0 / (1.0 + (-v).exp());
    assert!((f64::from(w[0]) - 2.5 * s(3.0) / (2.0 * s(3.0))).abs() < 1e-6);
    let bias = [10.0f32, 0.0, 0.0, 0.0];
    let (ids, w) = r::route(
        &logits[..4],
        1,
        4,
        2,
        RoutingMode::SigmoidBias {
            scale: 1.0,
            group_limit: None,
        },
        Some(&bias),
    );
    assert_eq!(ids, vec![0, 1]);
    assert!((f64::from(w[0]) - s(1.0) / (s(1.0) + s(3.0))).abs() < 1e-6);
}

/// DeepSeek-V3's group limit, by hand: 8 experts in 4 groups of 2, keep 2, top-2.
#[test]
fn group_limit_chooses_from_the_best_groups_only() {
    let limit = r::GroupLimit { groups: 4, keep: 2 };
    let mode = RoutingMode::SigmoidBias {
        scale: 1.0,
        group_limit: Some(limit),
    };
    // Group sums of the two selection scores (the bias adds 0 here): group 0 has the single best expert
    // (3.0) but a poor partner; groups 1 and 3 win on their pairs.
    let logits = [3.0f32, -4.0, 1.5, 1.4, -1.0, -1.0, 1.2, 1.2];
    let (ids, w) = r::route(&logits, 1, 8, 2, mode, Some(&[0.0; 8]));
    assert_eq!(ids, vec![2, 3], "expert 0 is in a dropped group");
    let (free, _) = r::route(
        &logits,
        1,
        8,
        2,
        RoutingMode::SigmoidBias {
            scale: 1.0,
            group_limit: None,
        },
        None,
    );
    assert_eq!(free, vec![0, 2], "without the limit expert 0 wins");
    let s = |v: f64| 1.0 / (1.0 + (-v).exp());
    assert!((f64::from(w[0]) - s(1.5) / (s(1.5) + s(1.4))).abs() < 1e-6);
    // A negative bias does not pull in an expert of a dropped group (those are out, not scored 0).
    let bias = [-5.0f32; 8];
    let (ids, _) = r::route(&logits, 1, 8, 4, mode, Some(&bias));
    assert!(
        ids.iter()
            .all(|&i| (2..4).contains(&i) || (6..8).contains(&i)),
        "{ids:?}"
    );
    // Tied groups go to the lower group id.
    let flat = [0.0f32; 8];
    let kept = r::groups_kept(&flat.map(f64::from), limit);
    assert_eq!(kept, [true, true, true, true, false, false, false, false]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Random routers: every chosen expert is in a kept group, the kept groups are those with the best
    /// two-score sums, and keeping every group is no limit at all.
    #[test]
    fn group_limit_properties(
        seed in 0u64..1000,
        t in 1usize..6,
        (e, groups) in proptest::sample::select(vec![(8usize, 2usize), (8, 4), (64, 8), (128, 4), (256, 8), (256, 16)]),
        keep_frac in 0.0f64..1.0,
        k in 1usize..9,
    ) {
        let keep = 1 + ((groups - 1) as f64 * keep_frac) as usize;
        let size = e / groups;
        let k = k.min(keep * size).min(e);
        let logits: Vec<f32> = common::data(t * e, seed).iter().map(|v| v * 4.0).collect();
        let bias: Vec<f32> = common::data(e, seed + 1).iter().map(|v| v * 0.5).collect();
        let limit = r::GroupLimit { groups, keep };
        let (ids, _) = r::route(&logits, t, e, k, RoutingMode::SigmoidBias { scale: 1.0, group_limit: Some(limit) }, Some(&bias));
        for row in 0..t {
            let sel: Vec<f64> = (0..e)
                .map(|i| 1.0 / (1.0 + (-f64::from(logits[row * e + i])).exp()) + f64::from(bias[i]))
                .collect();
            let kept = r::groups_kept(&sel, limit);
            proptest::prop_assert_eq!(kept.iter().filter(|&&k| k).count(), keep * size);
            // No dropped group's pair beats a kept group's pair.
            let pair = r::group_scores(&sel, groups);
            let worst_kept = (0..groups).filter(|&g| kept[g * size]).map(|g| pair[g]).fold(f64::INFINITY, f64::min);
            let best_dropped = (0..groups).filter(|&g| !kept[g * size]).map(|g| pair[g]).fold(f64::NEG_INFINITY, f64::max);
            proptest::prop_assert!(worst_kept >= best_dropped);
            for &i in &ids[row * k..(row + 1) * k] {
                proptest::prop_assert!(kept[i as usize], "row {} expert {} of a dropped group", row, i);
            }
        }
        let all = r::GroupLimit { groups, keep: groups };
        let with_all = r::route(&logits, t, e, k, RoutingMode::SigmoidBias { scale: 1.0, group_limit: Some(all) }, Some(&bias));
        let none = r::route(&logits, t, e, k, RoutingMode::SigmoidBias { scale: 1.0, group_limit: None }, Some(&bias));
        proptest::prop_assert_eq!(with_all, none);
    }
}

/// The group limits the kernel takes, and typed errors naming the fix for the others.
#[test]
fn group_limit_bounds() {
    use moe::host::check_group_limit;
    let l = |groups, keep| r::GroupLimit { groups, keep };
    for (e, k, limit) in [
        (256, 8, l(8, 4)),
        (64, 6, l(8, 3)),
        (8, 2, l(4, 1)),
        (128, 8, l(16, 1)),
    ] {
        check_group_limit(e, k, limit).unwrap_or_else(|err| panic!("{e} {k} {limit:?}: {err}"));
    }
    for (e, k, limit, says) in [
        (160, 8, l(8, 4), "E of 8, 64, 128 or 256"),
        (256, 8, l(3, 1), "2, 4, 8 or 16 groups"),
        (8, 2, l(8, 1), "at least two experts"),
        (256, 8, l(8, 0), "keep 1 to 8"),
        (256, 8, l(8, 9), "keep 1 to 8"),
        (64, 8, l(16, 1), "keep at least 2 groups"),
    ] {
        let err = check_group_limit(e, k, limit)
            .expect_err("accepted")
            .to_string();
        assert!(err.contains(says), "{e} {k} {limit:?}: {err}");
    }
}

#[test]
fn align_pads_every_expert_to_the_block() {
    // 5 tokens, top-2 over 4 experts; expert 2 gets nothing, expert 0 every token.
    let ids = [0, 1, 0, 3, 0, 1, 0, 3, 0, 1];
    let a = r::align_block_size(&ids, 4, 4);
    let s = 10;
    assert_eq!(
        a.sorted_ids,
        vec![0, 2, 4, 6, 8, s, s, s, 1, 5, 9, s, 3, 7, s, s]
    );
    assert_eq!(a.expert_ids, vec![0, 0, 1, 3]);
    assert_eq!(a.total, 16);
    assert!(a.total <= r::max_padded(ids.len(), 4, 4));
    // Every pair appears exactly once; blocks hold only their expert's pairs.
    let mut seen = vec![0; ids.len()];
    for (row, &p) in a.sorted_ids.iter().enumerate() {
        if p < s {
            seen[p as usize] += 1;
            assert_eq!(ids[p as usize], a.expert_ids[row / 4]);
        }
    }
    assert!(seen.iter().all(|&n| n == 1));
    let empty = r::align_block_size(&[], 8, 16);
    assert_eq!(empty.total, 0);
}

#[test]
fn dense_moe_matches_a_hand_computed_layer() {
    // One token, two experts, top-1: out = w · W2[e] (silu(g) · u).
    let (t, h, i, k) = (1, 2, 1, 1);
    let x = [1.0f32, 2.0];
    let w13 = [1.0f32, 0.0, 0.0, 1.0, /* e1 */ 0.5, 0.5, 1.0, 1.0];
    let w2 = [1.0f32, -1.0, /* e1 */ 2.0, 3.0];
    let out = r::moe_dense(&x, &w13, &w2, &[1], &[0.5], (t, h, i, k), |v| v);
    let g = 1.5f64;
    let a = g / (1.0 + (-g).exp()) * 3.0;
    assert!((f64::from(out[0]) - 0.5 * 2.0 * a).abs() < 1e-5);
    assert!((f64::from(out[1]) - 0.5 * 3.0 * a).abs() < 1e-5);
}

#[test]
fn host_picks_small_row_blocks_for_decode_and_big_ones_for_prefill() {
    use moe::host::{gemm_tiles, row_block};
    // Mixtral (E 8, top-2): T 1 and 16 are decode, T 4096 prefill; Qwen3-30B-A3B (E 128, top-8).
    assert_eq!(row_block(2, 8), 16);
    assert_eq!(row_block(32, 8), 16);
    assert_eq!(row_block(128, 8), 32);
    assert_eq!(row_block(96, 8), 16);
    assert_eq!(row_block(104, 8), 32);
    assert_eq!(row_block(8192, 8), 128);
    assert_eq!(row_block(128, 128), 16);
    assert_eq!(row_block(32768, 128), 128);
    assert_eq!(row_block(4096, 128), 32);
    assert_eq!(row_block(0, 8), 16);
    assert_eq!(gemm_tiles(16, 4096, 14336), ((64, 128), (64, 128)));
    assert_eq!(gemm_tiles(16, 128, 64), ((64, 128), (64, 64)));
    assert_eq!(gemm_tiles(128, 4096, 14336), ((64, 64), (128, 64)));
    assert_eq!(gemm_tiles(128, 192, 192), ((64, 64), (64, 64)));
    assert_eq!(gemm_tiles(64, 4096, 14336), ((64, 64), (64, 64)));
}

#[test]
fn host_runs_the_decode_form_for_row_blocks_16_and_32_and_the_sorted_form_for_prefill() {
    use moe::host::{DECODE_TILES, Form, default_form, forms};
    assert_eq!(
        default_form(16, 4096, 14336),
        Form::Decode {
            bn: 128,
            bk: 256,
            occupancy: 0
        }
    );
    assert_eq!(
        default_form(16, 4096, 192),
        Form::Decode {
            bn: 64,
            bk: 128,
            occupancy: 0
        }
    );
    assert_eq!(
        default_form(32, 4096, 14336),
        Form::Decode {
            bn: 128,
            bk: 256,
            occupancy: 0
        }
    );
    assert_eq!(
        default_form(32, 4096, 192),
        Form::Decode {
            bn: 64,
            bk: 128,
            occupancy: 0
        }
    );
    assert_eq!(default_form(64, 4096, 14336), Form::RowsBits);
    assert_eq!(
        default_form(128, 4096, 14336),
        Form::SortedStaged { bn: 128 }
    );
    assert_eq!(default_form(128, 2048, 768), Form::SortedStaged { bn: 128 });
    assert_eq!(default_form(128, 192, 64), Form::Sorted);
    assert_eq!(
        forms(32, 4096, 14336),
        vec![
            Form::Rows,
            Form::RowsBits,
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 0
            },
            Form::Decode {
                bn: 128,
                bk: 256,
                occupancy: 0
            },
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 2
            }
        ]
    );
    assert_eq!(
        forms(32, 4096, 192),
        vec![
            Form::Rows,
            Form::RowsBits,
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 0
            },
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 2
            }
        ]
    );
    assert_eq!(
        forms(64, 4096, 14336),
        vec![Form::Rows, Form::RowsBits, Form::Sorted]
    );
    // Row block 128 also runs the staged sorted form at the tile widths dividing H, and the
    // in-kernel decode form in both K steps where 128 divides H.
    assert_eq!(
        forms(128, 4096, 14336),
        vec![
            Form::Rows,
            Form::RowsBits,
            Form::Sorted,
            Form::SortedStaged { bn: 128 },
            Form::SortedStaged { bn: 256 },
            Form::InKernel { bk: 128 },
            Form::InKernel { bk: 256 }
        ]
    );
    assert_eq!(
        forms(128, 384, 192),
        vec![
            Form::Rows,
            Form::RowsBits,
            Form::Sorted,
            Form::SortedStaged { bn: 128 },
            Form::InKernel { bk: 128 },
            Form::InKernel { bk: 256 }
        ]
    );
    assert_eq!(
        forms(128, 192, 64),
        vec![Form::Rows, Form::RowsBits, Form::Sorted]
    );
    // Mixtral: every decode tile; H or I not a multiple of 128: only the 64-row tiles.
    assert_eq!(forms(16, 4096, 14336).len(), 2 + DECODE_TILES.len());
    assert_eq!(
        forms(16, 4096, 192),
        vec![
            Form::Rows,
            Form::RowsBits,
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 0
            },
            Form::Decode {
                bn: 64,
                bk: 256,
                occupancy: 0
            },
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 2
            },
            Form::Decode {
                bn: 64,
                bk: 256,
                occupancy: 2
            },
            Form::Decode {
                bn: 64,
                bk: 128,
                occupancy: 3
            }
        ]
    );
    assert!(forms(16, 4096, 14336).contains(&default_form(16, 4096, 14336)));
    assert!(forms(16, 4096, 192).contains(&default_form(16, 4096, 192)));
}

/// The word decode (`words::e2m1_word_pair`), modelled on the host with the same shifts and masks:
/// for every e2m1 code at every nibble position of a 32-bit word (the other nibbles varied), quarter
/// `j` of the word read as two `E` values holds nibble `j` in its low half and nibble `j + 4` in its
/// high half, each `e2m1 · 2^-126` (bf16) or `e2m1 · 2^-14` (f16), i.e. element `2c + l` of the
/// quarter tile is K position `8c + j + 4l` (what `words::quarters` gives the activations).
#[test]
fn word_decode_pairs_nibbles_j_and_j_plus_4() {
    let pair = |w: u32, j: i32, at: i32| -> u32 {
        let sign = (w << (12 - 4 * j)) & 0x8000_8000;
        let ms = at - 4 * j;
        let mag = if ms >= 0 { w << ms } else { w >> -ms } & ((0x7u32 << at) * 0x1_0001);
        sign | mag
    };
    let mut filler = 0x9E37_79B9u32;
    for pos in 0..8u32 {
        for code in 0..16u32 {
            for _ in 0..4 {
                filler = filler.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let w = (filler & !(0xF << (4 * pos))) | (code << (4 * pos));
                let (j, lane) = ((pos % 4) as i32, pos / 4);
                let want = r::e2m1_decode(code as u8);
                let b = pair(w, j, 6) >> (16 * lane) & 0xFFFF;
                let got = bf16::from_bits(b as u16).to_f32() * 2f32.powi(126);
                assert_eq!(got, want, "bf16: word {w:#010x} nibble {pos} code {code}");
                let f = pair(w, j, 9) >> (16 * lane) & 0xFFFF;
                let got = f16::from_bits(f as u16).to_f32() * 2f32.powi(14);
                assert_eq!(got, want, "f16: word {w:#010x} nibble {pos} code {code}");
            }
        }
    }
}

/// The decode form's arithmetic (`codec::e2m1_bits` · `codec::e4m3_folded`), modelled on the host
/// with the same bit operations: for every e2m1 code (both nibble positions of a byte) and every
/// finite e4m3 scale, the product of the two `E` values is `e2m1 · e4m3 · 2^-7` exactly, in bf16 and
/// f16 (so the kernel's weights are the format's values up to the power of two it takes back in the
/// epilogue, with no rounding at all).
#[test]
fn bit_pattern_decode_times_folded_scale_is_exact() {
    // `codec::e4m3_folded`'s ops: the byte's bits at the low end of the exponent (bf16 `<< 4`,
    // f16 `<< 7`), then multiplications by powers of two, each exact (checked: the product is
    // representable, so rounding to the type changes nothing).
    let folded_scales = |sc: u8| -> (f32, f32) {
        let c = u16::from(sc & 0x7F);
        let mut b = bf16::from_bits(c << 4).to_f32();
        for m in [2f32.powi(120), 2f32.powi(119)] {
            b *= m;
            assert_eq!(bf16::from_f32(b).to_f32(), b, "bf16 scale {sc:#x}");
        }
        let h = f16::from_bits(c << 7).to_f32() * 2f32.powi(15);
        assert_eq!(f16::from_f32(h).to_f32(), h, "f16 scale {sc:#x}");
        (b, h)
    };
    // The DSL's ops on a sign-extended byte `b` (i16): sign to bit 15, magnitude bits to `at`.
    let bits = |b: i16, high: bool, at: i32| -> u16 {
        let (ss, ms) = if high { (8, at - 4) } else { (12, at) };
        let sign = b.wrapping_shl(ss as u32) & i16::MIN;
        let mag = if ms >= 0 {
            b.wrapping_shl(ms as u32)
        } else {
            b >> (-ms)
        } & (7i16 << at);
        (sign | mag) as u16
    };
    for byte in 0..=255u8 {
        let b = byte as i8 as i16;
        for high in [false, true] {
            let code = if high { byte >> 4 } else { byte & 15 };
            let v = r::e2m1_decode(code);
            for sc in 0..0x7Fu8 {
                let s = r::e4m3_decode(sc);
                let want = v * s / 128.0;
                let (bs, hs) = folded_scales(sc);
                let bf = bf16::from_bits(bits(b, high, 6)).to_f32() * bs;
                let hf = f16::from_bits(bits(b, high, 9)).to_f32() * hs;
                // The products are exact in f32 (at most 6 significant bits); E must hold them too.
                assert_eq!(bf, want, "bf16 byte {byte:#x} high {high} scale {sc:#x}");
                assert_eq!(bf16::from_f32(bf).to_f32(), want);
                assert_eq!(hf, want, "f16 byte {byte:#x} high {high} scale {sc:#x}");
                assert_eq!(f16::from_f32(hf).to_f32(), want);
            }
        }
    }
}

#[test]
fn gemm2_splits_k_only_when_the_grid_is_short() {
    use moe::host::k_splits;
    // H200: 132 SMs. Mixtral T = 1 (about 3 blocks x 64 column tiles, 112 K steps): 2 splits.
    assert_eq!(k_splits(132, 3 * 64, 112), 2);
    // Mixtral T = 16 (9 blocks x 64): already two waves.
    assert_eq!(k_splits(132, 9 * 64, 112), 1);
    // Tiny grids: at most 8 splits, at least 4 K steps each.
    assert_eq!(k_splits(132, 6, 112), 8);
    assert_eq!(k_splits(132, 6, 8), 2);
    assert_eq!(k_splits(132, 6, 3), 1);
    assert_eq!(k_splits(132, 0, 100), 8);
}

/// Every tile variant the host launches (W4A16 GEMMs at every row block, the alignment at the
/// largest expert tile and every block) compiles for sm_90: the catalog holds only a few of them.
#[test]
fn host_tile_variants_compile_for_sm90() {
    use common::t;
    use cutile_ir::ScalarType::{BF16, F32, I8, I32};
    let (tt, h, i, e, k) = (64i64, 256i64, 256i64, 8i64, 2i64);
    let mut cases = Vec::new();
    macro_rules! gemms {
        ($bm:tt, $bn1:tt, $bk1:tt, $bn2:tt, $bk2:tt, $dec:tt, $g1:ident, $g2:ident) => {{
            let p = r::max_padded((tt * k) as usize, e as usize, $bm) as i64;
            let ids = || vec![t(I32, &[p]), t(I32, &[p / $bm]), t(I32, &[1])];
            let mut g1 = vec![
                t(BF16, &[tt, h]),
                t(I8, &[e, 2 * i, h / 2]),
                t(I8, &[e, 2 * i, h / 16]),
                t(F32, &[e]),
            ];
            g1.extend(ids());
            g1.push(t(BF16, &[p, i]));
            let n1 = concat!(stringify!($g1), " BM=", $bm, " BK=", $bk1, " DEC=", $dec);
            let k1 = moe::kernels::$g1::kernel::<
                bf16,
                $bm,
                $bn1,
                $bk1,
                { $bk1 / 2 },
                { $bk1 / 16 },
                $dec,
            >();
            cases.push((n1, k1, g1));
            let mut g2 = vec![
                t(BF16, &[p, i]),
                t(I8, &[e, h, i / 2]),
                t(I8, &[e, h, i / 16]),
                t(F32, &[e]),
            ];
            g2.extend(ids());
            g2.push(t(F32, &[tt * k]));
            g2.push(t(F32, &[tt * k, h]));
            let n2 = concat!(
                stringify!($g2),
                " BM=",
                $bm,
                " BN=",
                $bn2,
                " BK=",
                $bk2,
                " DEC=",
                $dec
            );
            let k2 = moe::kernels::$g2::kernel::<
                bf16,
                $bm,
                $bn2,
                $bk2,
                { $bk2 / 2 },
                { $bk2 / 16 },
                $dec,
            >();
            cases.push((n2, k2, g2));
        }};
    }
    gemms!(16, 64, 128, 64, 128, 0, moe_gemm1_w4a16, moe_gemm2_w4a16);
    gemms!(32, 64, 128, 64, 128, 1, moe_gemm1_w4a16, moe_gemm2_w4a16);
    // The 128-row tiles with 8 worker warps, as the host launches them (4 warps spill).
    gemms!(
        128,
        64,
        64,
        128,
        64,
        1,
        moe_gemm1_w4a16_w8,
        moe_gemm2_w4a16_w8
    );
    gemms!(
        128,
        64,
        64,
        128,
        64,
        0,
        moe_gemm1_w4a16_w8,
        moe_gemm2_w4a16_w8
    );
    {
        let p = r::max_padded((tt * k) as usize, e as usize, 128) as i64;
        let ids = || vec![t(I32, &[p]), t(I32, &[p / 128]), t(I32, &[1])];
        let mut d1 = vec![t(BF16, &[tt, h]), t(BF16, &[e, 2 * i, h])];
        d1.extend(ids());
        d1.push(t(BF16, &[p, i]));
        cases.push((
            "moe_gemm1_dense_w8 BM=128 BN=64 BK=64",
            moe::kernels::moe_gemm1_dense_w8::kernel::<bf16, 128, 64, 64>(),
            d1,
        ));
        let mut d2 = vec![t(BF16, &[p, i]), t(BF16, &[e, h, i])];
        d2.extend(ids());
        d2.push(t(F32, &[tt * k]));
        d2.push(t(F32, &[tt * k, h]));
        cases.push((
            "moe_gemm2_dense_w8 BM=128 BN=128 BK=64",
            moe::kernels::moe_gemm2_dense_w8::kernel::<bf16, 128, 128, 64>(),
            d2,
        ));
    }
    let chunks = (tt * k + 63) / 64;
    cases.push((
        "moe_align_hist EP=256",
        moe::kernels::moe_align_hist::kernel::<64, 256>(),
        vec![t(I32, &[tt * k]), t(I32, &[chunks, 256])],
    ));
    cases.push((
        "moe_align_scatter EP=256",
        moe::kernels::moe_align_scatter::kernel::<64, 256, 16>(),
        vec![
            t(I32, &[tt * k]),
            t(I32, &[chunks, 256]),
            t(I32, &[256]),
            t(I32, &[1024]),
        ],
    ));
    macro_rules! plan {
        ($bm:literal, $ep:literal, $er:literal) => {
            cases.push((
                concat!("moe_align_plan BM=", $bm, " EP=", $ep),
                moe::kernels::moe_align_plan::kernel::<$bm, $ep, $er, 16, 64>(),
                vec![
                    t(I32, &[chunks, $ep]),
                    t(I32, &[$ep]),
                    t(I32, &[1]),
                    t(I32, &[64]),
                    t(I32, &[64 * $bm]),
                ],
            ))
        };
    }
    plan!(128, 256, 16);
    plan!(32, 64, 4);
    macro_rules! fused {
        ($bm:literal, $ep:literal, $er:literal) => {
            cases.push((
                concat!("moe_align_fused BM=", $bm, " EP=", $ep),
                moe::kernels::moe_align_fused::kernel::<64, $bm, $ep, $er, 64>(),
                vec![
                    t(I32, &[512]),
                    t(I32, &[1]),
                    t(I32, &[64]),
                    t(I32, &[64 * $bm]),
                ],
            ))
        };
    }
    fused!(128, 256, 16);
    fused!(32, 64, 4);
    common::compile_all_sm90("host_tile_variants_compile_for_sm90", cases);
}

/// The host's alignment form: one launch while chunks of 64 pairs × expert columns stay within
/// `ALIGN_FUSED_MAX_WORK`, three past it (the measured break-even, `docs/moe.md`).
#[test]
fn align_form_follows_the_work_limit() {
    use moe::host::align_in_one_launch as one;
    // (pairs, experts, one launch): every bench decode call of the Mixtral layer, the E 128 top-8
    // calls at T 1 / 16 (one launch) and T 64 (three), and each column width's edge.
    for (pairs, experts, want) in [
        (2, 8, true),
        (32, 8, true),
        (128, 8, true),
        (2048, 8, true),
        (2049, 8, false),
        (8, 128, true),
        (128, 128, true),
        (256, 128, true),
        (257, 128, false),
        (512, 128, false),
        (512, 64, true),
        (513, 64, false),
        (128, 256, true),
        (129, 256, false),
        (0, 8, true),
    ] {
        assert_eq!(
            one(pairs, experts),
            want,
            "{pairs} pairs, {experts} experts"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_align_matches_reference() {
    let Some((d, s)) = common::gpu_device("gpu_align_matches_reference") else {
        return;
    };
    let mut ws = moe::Workspace::<bf16>::default();
    // (T, E, k, ids): random routings (ragged T, many chunks of 64 pairs), one hot expert, an
    // expert that nobody picks, a single pair.
    let mut cases: Vec<(usize, usize, usize, Vec<i32>)> = Vec::new();
    for (n, &(t, e, k)) in [
        (1, 8, 2),
        (5, 8, 1),
        (129, 64, 8),
        (1000, 128, 8),
        (4096, 8, 2),
        (333, 256, 8),
    ]
    .iter()
    .enumerate()
    {
        let logits = common::data(t * e, 500 + n as u64);
        let (ids, _) = r::route(
            &logits,
            t,
            e,
            k,
            RoutingMode::SoftmaxTopK { renormalize: false },
            None,
        );
        cases.push((t, e, k, ids));
    }
    cases.push((300, 8, 1, vec![3; 300]));
    // Both sides of the host's one-launch limit (`host::align_in_one_launch`: 4 chunks of 64 pairs at
    // 128 experts), with a ragged last chunk on the one-launch side; every case also runs both forms
    // explicitly below.
    for (n, (t, e, k)) in [(32, 128, 8), (33, 128, 8), (101, 16, 5)]
        .into_iter()
        .enumerate()
    {
        let logits = common::data(t * e, 600 + n as u64);
        let mode = RoutingMode::SoftmaxTopK { renormalize: false };
        cases.push((t, e, k, r::route(&logits, t, e, k, mode, None).0));
    }
    cases.push((
        40,
        4,
        2,
        (0..80).map(|p| if p % 2 == 0 { 0 } else { 3 }).collect(),
    ));
    use moe::host::AlignForm;
    for (t, e, k, ids) in &cases {
        for bm in moe::host::ROW_BLOCKS {
            // The host's pick, and each form at every size (one launch past its limit too).
            for form in [AlignForm::Auto, AlignForm::OneLaunch, AlignForm::ThreePass] {
                let tids = Tensor::from_host(&d, ids, &[*t as i64, *k as i64]).unwrap();
                let (mut so, mut ex, mut to) =
                    moe::host::aligned_buffers(&s, (*t * *k) as i64, *e as i64, bm).unwrap();
                moe::host::moe_align_block_size_with(
                    &s, &tids, *e as i64, bm, &mut so, &mut ex, &mut to, &mut ws, form,
                )
                .unwrap();
                check_alignment(ids, *e, bm as usize, &so, &ex, &to);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn align_rejects_bad_arguments() {
    // Typed errors before any launch; no device needed for the checks that fail first.
    let Some((d, s)) = common::gpu_device("align_rejects_bad_arguments") else {
        return;
    };
    let ids = Tensor::<i32>::zeros(&d, &[4, 2]).unwrap();
    let mut ws = moe::Workspace::<bf16>::default();
    let (mut so, mut ex, mut to) = moe::host::aligned_buffers(&s, 8, 8, 16).unwrap();
    for (e, bm) in [(0, 16), (300, 16), (8, 48)] {
        assert!(
            moe::moe_align_block_size(&s, &ids, e, bm, &mut so, &mut ex, &mut to, &mut ws).is_err()
        );
    }
    // Buffers sized for another block.
    assert!(
        moe::moe_align_block_size(&s, &ids, 8, 64, &mut so, &mut ex, &mut to, &mut ws).is_err()
    );
}

/// Every catalog specialization of the family specializes, verifies, and with tileiras compiles for
/// each of sm_80, sm_90, sm_100 and sm_120 it supports (the Blackwell path's three from sm_100 on).
#[test]
fn catalog_kernels_compile_for_four_archs() {
    use cutile::toolchain::GpuArch;
    let jobs = cutile_kernels::moe::compile_jobs();
    assert_eq!(jobs.len(), 50);
    let mut specialized = Vec::new();
    for j in &jobs {
        let (k, metas) = j.dsl_spec().unwrap();
        let s = k
            .specialize(metas)
            .unwrap_or_else(|e| panic!("{} {}: {e}", j.kernel, j.specialization));
        specialized.push((j, s));
    }
    let Some(tileiras) = common::tileiras("catalog_kernels_compile_for_four_archs") else {
        return;
    };
    for arch in [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120] {
        for (j, s) in specialized.iter().filter(|(j, _)| j.supports(arch)) {
            let cubin = common::compile_cached(&tileiras, s, arch)
                .unwrap_or_else(|e| panic!("{} {arch:?}: {e}\n{}", j.kernel, s.ir_text()));
            // The half-group layout is why this kernel exists (`dsl::nvfp4_dequantize_groups`): a
            // change that brings back a shared-memory relayout fails here.
            if arch == GpuArch::Sm90 && j.kernel == "nvfp4_dequantize_groups" {
                let smem = common::resources(&cubin).2;
                assert_eq!(
                    smem, 0,
                    "{} {}: {smem} B of shared memory",
                    j.kernel, j.specialization
                );
            }
        }
    }
}

fn to_e<E: DeviceElement>(v: &[f32]) -> Vec<E> {
    v.iter().map(|&x| E::from_f64(f64::from(x))).collect()
}
fn from_e<E: DeviceElement>(v: &[E]) -> Vec<f32> {
    v.iter().map(|x| x.to_f64() as f32).collect()
}
fn bytes(v: &[u8]) -> Vec<i8> {
    v.iter().map(|&b| b as i8).collect()
}
fn unbytes(v: &[i8]) -> Vec<u8> {
    v.iter().map(|&b| b as u8).collect()
}

fn quantize_case<E: MoeElem>(s: &Stream, g: usize, rows: usize, k: usize, seed: u64) {
    let d = s.device();
    let x: Vec<f32> = from_e::<E>(&to_e::<E>(
        &common::data(g * rows * k, seed)
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i % 97 == 5 {
                    -0.0
                } else {
                    v * (1 + i % 13) as f32
                }
            })
            .collect::<Vec<_>>(),
    ));
    let want = r::quantize_rows(&x, g * rows, k, rows).unwrap();
    let (gi, ri, ki) = (g as i64, rows as i64, k as i64);
    let tx = Tensor::from_host(d, &to_e::<E>(&x), &[gi, ri, ki]).unwrap();
    let mut q = Tensor::<i8>::zeros(d, &[gi, ri, ki / 2]).unwrap();
    let mut sc = Tensor::<i8>::zeros(d, &[gi, ri, ki / 16]).unwrap();
    let mut gl = Tensor::<f32>::zeros(d, &[gi]).unwrap();
    moe::nvfp4_quantize(s, &tx, &mut q, &mut sc, &mut gl).unwrap();
    assert_eq!(gl.to_host().unwrap(), want.global, "global scales");
    assert_eq!(unbytes(&sc.to_host().unwrap()), want.scales, "block scales");
    assert_eq!(unbytes(&q.to_host().unwrap()), want.packed, "codes");
    // Dequantize the reference's data.
    let tw = Tensor::from_host(d, &bytes(&want.packed), &[gi, ri, ki / 2]).unwrap();
    let ts = Tensor::from_host(d, &bytes(&want.scales), &[gi, ri, ki / 16]).unwrap();
    let tg = Tensor::from_host(d, &want.global, &[gi]).unwrap();
    let mut y = Tensor::<E>::zeros(d, &[gi, ri, ki]).unwrap();
    moe::nvfp4_dequantize(s, &tw, &ts, &tg, &mut y).unwrap();
    let want_y = from_e::<E>(&to_e::<E>(&r::dequantize(&want)));
    let got = from_e::<E>(&y.to_host().unwrap());
    for (i, (a, b)) in got.iter().zip(&want_y).enumerate() {
        assert!(
            a.to_bits() == b.to_bits() || (*a == 0.0 && *b == 0.0),
            "element {i}: {a} != {b}"
        );
    }
    // The folded dequantization (`e2m1 · e4m3 · 2^-7`, the sorted forms' copy) by every kernel:
    // the reference's value over `global · 2^7`, and every kernel's bits those of the first.
    let mut first: Option<Vec<f32>> = None;
    for kernel in moe::host::DEQUANT_KERNELS {
        let mut yf = Tensor::<E>::zeros(d, &[gi, ri, ki]).unwrap();
        moe::host::nvfp4_dequantize_folded(s, &tw, &ts, &mut yf, kernel).unwrap();
        let got = from_e::<E>(&yf.to_host().unwrap());
        let per_group = rows * k;
        for (i, (a, b)) in got.iter().zip(&want_y).enumerate() {
            // `want_y` is rounded to `E` (half an ulp: 2^-9 relative in bf16, 2^-25 absolute among
            // f16 subnormals); the product here is not.
            let v = a * 128.0 * want.global[i / per_group];
            assert!(
                (v - b).abs() <= 2f32.powi(-8) * b.abs() + 2f32.powi(-24),
                "{kernel:?} element {i}: {v} != {b}"
            );
        }
        match &first {
            None => first = Some(got),
            Some(f) => {
                for (i, (a, b)) in got.iter().zip(f).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{kernel:?} element {i}");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_quantize_dequantize_bit_exact() {
    let Some((_d, s)) = common::gpu_device("gpu_quantize_dequantize_bit_exact") else {
        return;
    };
    quantize_case::<bf16>(&s, 1, 1, 256, 1);
    quantize_case::<bf16>(&s, 3, 37, 512, 2);
    quantize_case::<f16>(&s, 2, 50, 768, 3);
    // More scale groups than one block of `DequantKernel::Groups` holds, ragged at the end.
    quantize_case::<bf16>(&s, 2, 333, 1024, 4);
}

/// One layer case: `t` tokens, `e` experts, top-`k`, `h x i`; `force` routes every token's first
/// slot to expert 0 and never to expert 1 (an empty expert) when set.
/// The GPU alignment's result against `reference::align_block_size` (rows up to `total`; the blocks
/// past it hold the last expert).
fn check_alignment(
    ids: &[i32],
    e: usize,
    bm: usize,
    sorted: &Tensor<i32>,
    experts: &Tensor<i32>,
    total: &Tensor<i32>,
) {
    let a = r::align_block_size(ids, e, bm);
    let total = total.to_host().unwrap()[0] as usize;
    assert_eq!(total, a.total, "total, e={e} bm={bm} pairs={}", ids.len());
    let sorted = sorted.to_host().unwrap();
    let experts = experts.to_host().unwrap();
    assert_eq!(
        &sorted[..total],
        &a.sorted_ids[..],
        "sorted_ids, e={e} bm={bm}"
    );
    assert_eq!(
        &experts[..total / bm],
        &a.expert_ids[..],
        "expert_ids, e={e} bm={bm}"
    );
    assert!(experts[total / bm..].iter().all(|&x| x == e as i32 - 1));
}

#[allow(clippy::too_many_arguments)]
fn layer_case<E: MoeElem>(
    s: &Stream,
    (t, e, k, h, i): (usize, usize, usize, usize, usize),
    bm: usize,
    force: bool,
    nvfp4: bool,
    seed: u64,
) {
    layer_case_form::<E>(s, (t, e, k, h, i), bm, force, nvfp4, seed, None)
}

/// [`layer_case`] in a given form (`None`: the host's pick for the row block).
fn layer_case_form<E: MoeElem>(
    s: &Stream,
    (t, e, k, h, i): (usize, usize, usize, usize, usize),
    bm: usize,
    force: bool,
    nvfp4: bool,
    seed: u64,
    form: Option<moe::host::Form>,
) {
    let d = s.device();
    let x = from_e::<E>(&to_e::<E>(&common::data(t * h, seed)));
    let w13f: Vec<f32> = common::data(e * 2 * i * h, seed + 1)
        .iter()
        .map(|v| v * 0.2)
        .collect();
    let w2f: Vec<f32> = common::data(e * h * i, seed + 2)
        .iter()
        .map(|v| v * 0.2)
        .collect();
    let logits = common::data(t * e, seed + 3);
    let (mut ids, weights) = r::route(
        &logits,
        t,
        e,
        k,
        RoutingMode::SoftmaxTopK { renormalize: true },
        None,
    );
    if force {
        for tok in 0..t {
            let row = &mut ids[tok * k..(tok + 1) * k];
            for (j, v) in row.iter_mut().enumerate() {
                *v = if j == 0 {
                    0
                } else {
                    (2 + (tok + j) % (e - 2)) as i32
                };
            }
        }
    }
    let (ti, hi, ii, ei, ki) = (t as i64, h as i64, i as i64, e as i64, k as i64);
    // The aligned order from the GPU alignment, checked against the CPU one on its first `total` rows.
    let tids = Tensor::from_host(d, &ids, &[ti, ki]).unwrap();
    let (mut tsorted, mut texperts, mut ttotal) =
        moe::host::aligned_buffers(s, ti * ki, ei, bm as i64).unwrap();
    let mut ws = moe::Workspace::<E>::default();
    ws.form = form;
    moe::moe_align_block_size(
        s,
        &tids,
        ei,
        bm as i64,
        &mut tsorted,
        &mut texperts,
        &mut ttotal,
        &mut ws,
    )
    .unwrap();
    check_alignment(&ids, e, bm, &tsorted, &texperts, &ttotal);
    // Routed weights flat or `[T, k]` as `moe_route` writes them (both accepted; `[T, k]` at row
    // blocks 32 and 64, so the sorted form's dense runs at 64 see it too).
    let wshape: &[i64] = if bm == 32 || bm == 64 {
        &[ti, ki]
    } else {
        &[ti * ki]
    };
    let tweights = Tensor::from_host(d, &weights, wshape).unwrap();
    let tx = Tensor::from_host(d, &to_e::<E>(&x), &[ti, hi]).unwrap();
    let routing = Routing {
        sorted_ids: &tsorted,
        expert_ids: &texperts,
        total: &ttotal,
        weights: &tweights,
        topk: k as i32,
    };
    let mut out = Tensor::<E>::zeros(d, &[ti, hi]).unwrap();
    let round = |v: &[f32]| from_e::<E>(&to_e::<E>(v));
    let (w13r, w2r);
    if nvfp4 {
        let q13 = r::quantize_rows(&w13f, e * 2 * i, h, 2 * i).unwrap();
        let q2 = r::quantize_rows(&w2f, e * h, i, h).unwrap();
        w13r = round(&r::dequantize(&q13));
        w2r = round(&r::dequantize(&q2));
        let up = |b: &[u8], sh: &[i64]| Tensor::from_host(d, &bytes(b), sh).unwrap();
        let (w13, s13) = (
            up(&q13.packed, &[ei, 2 * ii, hi / 2]),
            up(&q13.scales, &[ei, 2 * ii, hi / 16]),
        );
        let (w2, s2) = (
            up(&q2.packed, &[ei, hi, ii / 2]),
            up(&q2.scales, &[ei, hi, ii / 16]),
        );
        let g13 = Tensor::from_host(d, &q13.global, &[ei]).unwrap();
        let g2 = Tensor::from_host(d, &q2.global, &[ei]).unwrap();
        let w = Weights::Nvfp4 {
            w13: &w13,
            s13: &s13,
            g13: &g13,
            w2: &w2,
            s2: &s2,
            g2: &g2,
        };
        moe::moe_layer_in(s, &tx, &w, &routing, &mut out, &mut ws).unwrap();
    } else {
        w13r = round(&w13f);
        w2r = round(&w2f);
        let w13 = Tensor::from_host(d, &to_e::<E>(&w13r), &[ei, 2 * ii, hi]).unwrap();
        let w2 = Tensor::from_host(d, &to_e::<E>(&w2r), &[ei, hi, ii]).unwrap();
        moe::moe_layer_in(
            s,
            &tx,
            &Weights::Dense { w13: &w13, w2: &w2 },
            &routing,
            &mut out,
            &mut ws,
        )
        .unwrap();
    }
    let want = r::moe_dense(&x, &w13r, &w2r, &ids, &weights, (t, h, i, k), |v| {
        from_e::<E>(&to_e::<E>(&[v]))[0]
    });
    let got = from_e::<E>(&out.to_host().unwrap());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-3);
    let tol = cutile_kernels::tolerance(<E as cutile::core::ElementType>::SCALAR) as f32;
    for (j, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= 2.0 * tol * (scale + b.abs()),
            "{} t={t} e={e} k={k} h={h} i={i} nvfp4={nvfp4} force={force} bm={bm} form={form:?}: out[{}, {}] = {a}, want {b}",
            std::any::type_name::<E>(),
            j / h,
            j % h
        );
    }
}

/// A layer shape `(T, E, k, H, I)`.
type Shape = (usize, usize, usize, usize, usize);

/// The activation type of a GPU layer run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Bf16,
    F16,
}

/// One GPU layer run ([`layer_case_form`]): the `#[test]` that runs it, the activation type, the
/// shape, the row block, `force` (expert 0 in every token's first slot, expert 1 empty), NVFP4 (else
/// dense) weights, the data seed and the form (`None`: the host's pick for the row block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    test: &'static str,
    act: Act,
    shape: Shape,
    bm: usize,
    force: bool,
    nvfp4: bool,
    seed: u64,
    form: Option<moe::host::Form>,
}

impl Run {
    fn run(&self, s: &Stream) {
        let Run {
            shape,
            bm,
            force,
            nvfp4,
            seed,
            form,
            ..
        } = *self;
        match self.act {
            Act::Bf16 => layer_case_form::<bf16>(s, shape, bm, force, nvfp4, seed, form),
            Act::F16 => layer_case_form::<f16>(s, shape, bm, force, nvfp4, seed, form),
        }
    }
}

/// The layer runs at every row block (each in the host's form), W4A16 and dense, against the
/// reference: ragged T, 4/8/64/128 experts, top-1/2/8, an expert taking every token's first slot,
/// every tile variant of both GEMMs (K 64 and 128, N 64 and 128) and split-K of GEMM 2. One test per
/// (row block, weights): `gpu_moe_layer_bm{16,32,64,128}_{w4a16,dense}`.
fn layer_runs() -> Vec<Run> {
    let test = |bm: i64, nvfp4: bool| match (bm, nvfp4) {
        (16, true) => "gpu_moe_layer_bm16_w4a16",
        (16, false) => "gpu_moe_layer_bm16_dense",
        (32, true) => "gpu_moe_layer_bm32_w4a16",
        (32, false) => "gpu_moe_layer_bm32_dense",
        (64, true) => "gpu_moe_layer_bm64_w4a16",
        (64, false) => "gpu_moe_layer_bm64_dense",
        (128, true) => "gpu_moe_layer_bm128_w4a16",
        _ => "gpu_moe_layer_bm128_dense",
    };
    let run = |act, shape, bm: i64, force, nvfp4, seed| Run {
        test: test(bm, nvfp4),
        act,
        shape,
        bm: bm as usize,
        force,
        nvfp4,
        seed,
        form: None,
    };
    // (shape, force expert 0 in every first slot).
    let cases = [
        ((1, 8, 2, 128, 64), false),
        ((37, 8, 2, 256, 128), true),
        ((100, 4, 1, 128, 128), true),
        ((200, 64, 8, 128, 64), false),
        ((129, 8, 2, 192, 192), false),
        ((300, 128, 8, 128, 128), false),
        // Few blocks and a long K: GEMM 2 splits K (2 to 4 splits, `host::k_splits`).
        ((2, 8, 2, 128, 1024), false),
        ((9, 4, 2, 128, 1024), true),
    ];
    let mut v = Vec::new();
    for (n, (shape, force)) in cases.into_iter().enumerate() {
        for bm in moe::host::ROW_BLOCKS {
            for nvfp4 in [true, false] {
                v.push(run(Act::Bf16, shape, bm, force, nvfp4, 10 + n as u64));
            }
        }
    }
    v.push(run(Act::F16, (37, 8, 2, 256, 128), 16, true, true, 40));
    v.push(run(Act::F16, (5, 8, 2, 128, 64), 128, false, false, 41));
    // The forms the host does not pick at these row blocks: the sorted form at 64 (both GEMM 2
    // tiles: H 128 takes 64 x 128, H 192 64 x 64), the scattered sorted form at 128 where H takes the
    // staged one (the default there before it), and the rows form with the bit decode at 128 (the
    // default before the sorted form), W4A16 and dense; the sorted form in f16.
    use moe::host::Form;
    let forced = [
        ((37, 8, 2, 256, 128), 64, true, Form::Sorted),
        ((129, 8, 2, 192, 192), 64, false, Form::Sorted),
        ((300, 128, 8, 128, 128), 64, false, Form::Sorted),
        ((37, 8, 2, 256, 128), 128, true, Form::Sorted),
        ((300, 128, 8, 128, 128), 128, false, Form::Sorted),
        ((37, 8, 2, 256, 128), 128, true, Form::RowsBits),
        ((300, 128, 8, 128, 128), 128, false, Form::RowsBits),
        // The in-kernel decode form in both K steps: a hot expert, 128 experts top-8, and K ragged
        // against the step in both GEMMs (H 384 over 256-deep steps, I 192 below one step).
        ((37, 8, 2, 256, 128), 128, true, Form::InKernel { bk: 256 }),
        (
            (300, 128, 8, 128, 128),
            128,
            false,
            Form::InKernel { bk: 128 },
        ),
        (
            (129, 8, 2, 384, 192),
            128,
            false,
            Form::InKernel { bk: 256 },
        ),
        (
            (129, 8, 2, 384, 192),
            128,
            false,
            Form::InKernel { bk: 128 },
        ),
        // The staged sorted form at both tile widths: a hot expert, 128 experts top-8 (the slots
        // of a token in different row blocks), and H 384 (three 128-wide tiles).
        (
            (37, 8, 2, 256, 128),
            128,
            true,
            Form::SortedStaged { bn: 256 },
        ),
        (
            (300, 128, 8, 128, 128),
            128,
            false,
            Form::SortedStaged { bn: 128 },
        ),
        (
            (129, 8, 2, 384, 192),
            128,
            false,
            Form::SortedStaged { bn: 128 },
        ),
    ];
    for (n, (shape, bm, force, form)) in forced.into_iter().enumerate() {
        for nvfp4 in [true, false] {
            v.push(Run {
                form: Some(form),
                ..run(Act::Bf16, shape, bm, force, nvfp4, 50 + n as u64)
            });
        }
    }
    v.push(Run {
        form: Some(Form::Sorted),
        ..run(Act::F16, (200, 8, 2, 128, 64), 128, true, true, 42)
    });
    v.push(Run {
        form: Some(Form::InKernel { bk: 128 }),
        ..run(Act::F16, (200, 8, 2, 128, 64), 128, true, true, 43)
    });
    v.push(Run {
        form: Some(Form::SortedStaged { bn: 128 }),
        ..run(Act::F16, (200, 8, 2, 128, 64), 128, true, true, 44)
    });
    v
}

/// The decode form (row block 16, weights on the MMA's M side, the word decode) in every `(BN, BK)`
/// tile (and at row block 32 in its two tiles), and the rows forms at row block 16, W4A16 and dense, against the reference: T = 1
/// and ragged T, an expert taking every token's first slot, empty experts (E = 64 with few tokens),
/// top-1/2/8, with and without split-K in GEMM 1 (H = 1024 and 2048: 8 to 16 K steps over few
/// blocks) and in GEMM 2 (I = 1024), bf16 and f16. One test per bf16 shape (every form, both
/// weights) and one for the f16 runs.
fn decode_runs() -> Vec<Run> {
    let run = |test, act, shape, force, nvfp4, seed, form| Run {
        test,
        act,
        shape,
        bm: 16,
        force,
        nvfp4,
        seed,
        form,
    };
    let cases = [
        ("gpu_moe_decode_t1", (1, 8, 2, 256, 128), false),
        (
            "gpu_moe_decode_ragged_hot_expert",
            (13, 8, 2, 256, 256),
            true,
        ),
        (
            "gpu_moe_decode_top8_empty_experts",
            (5, 64, 8, 128, 128),
            false,
        ),
        ("gpu_moe_decode_top1_hot_expert", (7, 4, 1, 128, 256), true),
        // Split-K of GEMM 1 (H 1024 / 2048), of GEMM 2 (I 1024).
        (
            "gpu_moe_decode_split_k_gemm1_h1024",
            (3, 8, 2, 1024, 128),
            false,
        ),
        (
            "gpu_moe_decode_split_k_gemm1_h2048",
            (2, 8, 2, 2048, 256),
            true,
        ),
        ("gpu_moe_decode_split_k_gemm2", (2, 8, 2, 128, 1024), false),
    ];
    let mut v = Vec::new();
    for (n, (test, shape, force)) in cases.into_iter().enumerate() {
        let (_, _, _, h, i) = shape;
        for form in moe::host::forms(16, h as i64, i as i64) {
            for nvfp4 in [true, false] {
                v.push(run(
                    test,
                    Act::Bf16,
                    shape,
                    force,
                    nvfp4,
                    60 + n as u64,
                    Some(form),
                ));
            }
        }
    }
    // The decode form at row block 32 (`host::DECODE_TILES_32`): ragged rows with a hot expert, and
    // split-K of GEMM 1, W4A16 and dense.
    for (n, (test, shape, force)) in [
        (
            "gpu_moe_decode_ragged_hot_expert",
            (45, 8, 2, 256, 256),
            true,
        ),
        (
            "gpu_moe_decode_split_k_gemm1_h2048",
            (5, 8, 2, 2048, 256),
            false,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let (_, _, _, h, i) = shape;
        for form in moe::host::forms(32, h as i64, i as i64) {
            if !matches!(form, moe::host::Form::Decode { .. }) {
                continue;
            }
            for nvfp4 in [true, false] {
                v.push(Run {
                    bm: 32,
                    ..run(
                        test,
                        Act::Bf16,
                        shape,
                        force,
                        nvfp4,
                        90 + n as u64,
                        Some(form),
                    )
                });
            }
        }
    }
    let f16_test = "gpu_moe_decode_f16";
    v.push(Run {
        bm: 32,
        ..run(
            f16_test,
            Act::F16,
            (21, 8, 2, 256, 256),
            true,
            true,
            85,
            Some(moe::host::Form::Decode {
                bn: 128,
                bk: 256,
                occupancy: 0,
            }),
        )
    });
    for form in moe::host::forms(16, 256, 256) {
        v.push(run(
            f16_test,
            Act::F16,
            (9, 8, 2, 256, 256),
            true,
            true,
            80,
            Some(form),
        ));
    }
    v.push(run(
        f16_test,
        Act::F16,
        (2, 8, 2, 1024, 256),
        false,
        true,
        81,
        None,
    ));
    v
}

/// Every GPU layer run of the split tests: [`layer_runs`] then [`decode_runs`].
fn gpu_runs() -> Vec<Run> {
    let mut v = layer_runs();
    v.extend(decode_runs());
    v
}

/// Runs `runs` on device 0 (skipped, after printing why, without a device), printing each run and
/// its time (`-- --nocapture` shows them: the first launch of a specialization includes its JIT
/// compile).
fn run_cases(test: &str, runs: &[Run]) {
    let Some((_d, s)) = common::gpu_device(test) else {
        return;
    };
    assert!(!runs.is_empty(), "{test} has no runs");
    for (n, r) in runs.iter().enumerate() {
        let start = std::time::Instant::now();
        r.run(&s);
        eprintln!(
            "{test} [{}/{}]: {:?} {:?} bm={} force={} nvfp4={} seed={} form={:?}: {:.2?}",
            n + 1,
            runs.len(),
            r.act,
            r.shape,
            r.bm,
            r.force,
            r.nvfp4,
            r.seed,
            r.form,
            start.elapsed()
        );
    }
}

/// The GPU layer tests, one `#[test]` per group of [`gpu_runs`] (the runs whose `test` is its name), so
/// libtest runs the groups on parallel threads and their kernels' JIT compiles overlap; and
/// `GPU_LAYER_TESTS`, their names, which `gpu_runs_are_split_without_loss` checks against the runs.
macro_rules! gpu_layer_tests {
    ($($name:ident),* $(,)?) => {
        const GPU_LAYER_TESTS: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            #[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
            fn $name() {
                let runs: Vec<Run> = gpu_runs()
                    .into_iter()
                    .filter(|r| r.test == stringify!($name))
                    .collect();
                run_cases(stringify!($name), &runs);
            }
        )*
    };
}

gpu_layer_tests!(
    gpu_moe_layer_bm16_w4a16,
    gpu_moe_layer_bm16_dense,
    gpu_moe_layer_bm32_w4a16,
    gpu_moe_layer_bm32_dense,
    gpu_moe_layer_bm64_w4a16,
    gpu_moe_layer_bm64_dense,
    gpu_moe_layer_bm128_w4a16,
    gpu_moe_layer_bm128_dense,
    gpu_moe_decode_t1,
    gpu_moe_decode_ragged_hot_expert,
    gpu_moe_decode_top8_empty_experts,
    gpu_moe_decode_top1_hot_expert,
    gpu_moe_decode_split_k_gemm1_h1024,
    gpu_moe_decode_split_k_gemm1_h2048,
    gpu_moe_decode_split_k_gemm2,
    gpu_moe_decode_f16,
);

/// The split GPU layer tests keep every run of the two tests they replace (64 + 2 layer runs, and the
/// decode-form runs: 126 + 11 since the occupancy tiles) plus the 31 layer runs in forms the host does
/// not pick and the 13 decode-form runs at row block 32, each run in exactly one test, no test without
/// runs, and every run in a form its row block can take.
#[test]
fn gpu_runs_are_split_without_loss() {
    let (layer, decode) = (layer_runs(), decode_runs());
    assert_eq!(layer.len(), 8 * 4 * 2 + 2 + 14 * 2 + 3);
    assert_eq!(decode.len(), 7 * 9 * 2 + 9 + 1 + 2 * 3 * 2 + 1);
    let all = gpu_runs();
    assert_eq!(all.len(), layer.len() + decode.len());
    for (n, r) in all.iter().enumerate() {
        assert!(
            GPU_LAYER_TESTS.contains(&r.test),
            "{r:?}: no test of that name"
        );
        assert!(!all[..n].contains(r), "{r:?} twice");
        let (_, e, k, h, i) = r.shape;
        assert!(k <= e && (!r.force || e >= 3), "{r:?}");
        if let Some(f) = r.form {
            assert!(
                moe::host::forms(r.bm as i64, h as i64, i as i64).contains(&f),
                "{r:?}"
            );
        }
    }
    let mut sizes = Vec::new();
    for name in GPU_LAYER_TESTS {
        let n = all.iter().filter(|r| r.test == *name).count();
        assert!(n > 0, "{name} has no runs");
        sizes.push((*name, n));
    }
    eprintln!("runs per test: {sizes:?}");
}

/// One case of [`gpu_moe_layer_property`].
#[derive(Debug, Clone, Copy)]
struct PropCase {
    shape: Shape,
    force: bool,
    act: Act,
    nvfp4: bool,
    seed: u64,
}

/// The property test's cases: T from 1 to 8192 (decode, mid and prefill ranges, so every row block
/// of `host::row_block` comes up), E of 8, 64 and 128, top-1/2/8, H of 128, 192 and 256, I of 64 to 256
/// (multiples of 64, as the layer requires; 128 at most past 4096 pairs, so the CPU reference's
/// T·k·3·H·I multiply-adds stay near 3·10⁹), an expert taking every token's first slot (`force`;
/// expert 1 then empty; E = 128 with few tokens leaves most experts empty anyway), bf16 and f16, NVFP4
/// and dense weights.
fn prop_cases() -> impl proptest::strategy::Strategy<Value = PropCase> {
    use proptest::prelude::*;
    use proptest::sample::select;
    (
        prop_oneof![1usize..=16, 17usize..=512, 513usize..=8192],
        select(vec![8usize, 64, 128]),
        select(vec![1usize, 2, 8]),
        select(vec![128usize, 192, 256]),
        select(vec![64usize, 128, 192, 256]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0u64..1 << 20,
    )
        .prop_map(|(t, e, k, h, i, force, f16, nvfp4, seed)| {
            let (h, i) = if t * k > 4096 {
                (h.min(128), i.min(128))
            } else {
                (h, i)
            };
            PropCase {
                shape: (t, e, k, h, i),
                force,
                act: if f16 { Act::F16 } else { Act::Bf16 },
                nvfp4,
                seed,
            }
        })
}

/// The property test's cases (drawn here without a GPU) are shapes the layer takes, keep the CPU
/// reference within about 3·10⁹ multiply-adds, and reach every row block, both activation types,
/// both weight kinds, `force`, and the ends of the T range.
#[test]
fn property_cases_are_valid_and_cover_the_row_blocks() {
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop_cases();
    let (mut bms, mut acts, mut kinds, mut forced) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let (mut t_min, mut t_max) = (usize::MAX, 0);
    for _ in 0..2000 {
        let c = strategy.new_tree(&mut runner).unwrap().current();
        let (t, e, k, h, i) = c.shape;
        assert!((1..=8192).contains(&t) && k <= e && e >= 3, "{c:?}");
        assert!(h % 64 == 0 && i % 64 == 0 && h <= 256 && i <= 256, "{c:?}");
        assert!(t * k * 3 * h * i <= 3 * 8192 * 8 * 128 * 128, "{c:?}");
        let bm = moe::host::row_block((t * k) as i64, e as i64);
        assert!(moe::host::ROW_BLOCKS.contains(&bm), "{c:?}");
        bms.push(bm);
        acts.push(c.act);
        kinds.push(c.nvfp4);
        forced += usize::from(c.force);
        (t_min, t_max) = (t_min.min(t), t_max.max(t));
    }
    for bm in moe::host::ROW_BLOCKS {
        assert!(bms.contains(&bm), "row block {bm} never drawn");
    }
    assert!(acts.contains(&Act::Bf16) && acts.contains(&Act::F16));
    assert!(kinds.contains(&true) && kinds.contains(&false) && forced > 0);
    assert!(t_min <= 4 && t_max >= 4096, "T in {t_min}..={t_max}");
}

/// Random layers against the reference ([`prop_cases`]), each at the host's own row block
/// (`host::row_block`) and form. 24 cases; `PROPTEST_CASES` overrides the count and
/// `PROPTEST_RNG_SEED` fixes the draw. Each case is printed before it runs (a failing case's launch
/// may leave the context unusable, so the shrunk case proptest reports can be a consequence: the last
/// printed case is the first failure); shrinking stops after 16 steps.
#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_moe_layer_property() {
    use proptest::test_runner::{Config, TestRunner};
    let Some((_d, s)) = common::gpu_device("gpu_moe_layer_property") else {
        return;
    };
    let mut config = Config {
        failure_persistence: None,
        max_shrink_iters: 16,
        ..Config::default()
    };
    // `Config::with_cases` would override the environment's count: keep it when set.
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 24;
    }
    let mut runner = TestRunner::new(config);
    runner
        .run(&prop_cases(), |c| {
            let (t, e, k, _, _) = c.shape;
            let bm = moe::host::row_block((t * k) as i64, e as i64) as usize;
            eprintln!("gpu_moe_layer_property: {c:?} bm={bm}");
            let start = std::time::Instant::now();
            match c.act {
                Act::Bf16 => layer_case::<bf16>(&s, c.shape, bm, c.force, c.nvfp4, c.seed),
                Act::F16 => layer_case::<f16>(&s, c.shape, bm, c.force, c.nvfp4, c.seed),
            }
            eprintln!("gpu_moe_layer_property: passed in {:.2?}", start.elapsed());
            Ok(())
        })
        .unwrap();
}

#[test]
fn max_padded_bounds_every_alignment() {
    // The layer sizes its row buffers by `max_padded` so no count is read back from the device.
    for (seed, (t, e, k)) in [
        (1u64, (1, 8, 2)),
        (2, (37, 8, 2)),
        (3, (300, 64, 8)),
        (4, (5, 128, 8)),
    ] {
        let logits = common::data(t * e, seed);
        let (ids, _) = r::route(
            &logits,
            t,
            e,
            k,
            RoutingMode::SoftmaxTopK { renormalize: true },
            None,
        );
        let a = r::align_block_size(&ids, e, 64);
        assert!(a.total <= r::max_padded(t * k, e, 64), "t={t} e={e} k={k}");
        assert_eq!(a.total % 64, 0);
        assert_eq!(a.expert_ids.len() * 64, a.total);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_route_matches_reference() {
    let Some((d, s)) = common::gpu_device("gpu_route_matches_reference") else {
        return;
    };
    let grouped = |groups, keep| RoutingMode::SigmoidBias {
        scale: 2.5,
        group_limit: Some(r::GroupLimit { groups, keep }),
    };
    let modes = [
        RoutingMode::SoftmaxTopK { renormalize: false },
        RoutingMode::SoftmaxTopK { renormalize: true },
        RoutingMode::SigmoidBias {
            scale: 2.5,
            group_limit: None,
        },
        grouped(4, 2),
        grouped(8, 4),
        grouped(16, 16),
    ];
    for (n, &(t, e, k)) in [
        (1, 8, 2),
        (37, 8, 1),
        (300, 64, 8),
        (129, 128, 8),
        (64, 256, 8),
        (10, 5, 3),
    ]
    .iter()
    .enumerate()
    {
        for mode in modes {
            if let RoutingMode::SigmoidBias {
                group_limit: Some(l),
                ..
            } = mode
            {
                // The limits the kernel takes for this shape only (`group_limit_bounds`).
                if moe::host::check_group_limit(e as i64, k as i64, l).is_err() {
                    continue;
                }
            }
            let logits: Vec<f32> = common::data(t * e, 50 + n as u64)
                .iter()
                .map(|v| v * 4.0)
                .collect();
            let bias: Vec<f32> = common::data(e, 60 + n as u64)
                .iter()
                .map(|v| v * 0.5)
                .collect();
            let (want_ids, want_w) = r::route(&logits, t, e, k, mode, Some(&bias));
            let tl = Tensor::from_host(&d, &logits, &[t as i64, e as i64]).unwrap();
            let tb = Tensor::from_host(&d, &bias, &[e as i64]).unwrap();
            let mut ids = Tensor::<i32>::zeros(&d, &[t as i64, k as i64]).unwrap();
            let mut w = Tensor::<f32>::zeros(&d, &[t as i64, k as i64]).unwrap();
            // A fault surfaces at the copy back (the first synchronization): name the case there.
            let case = format!("{mode:?} t={t} e={e} k={k}");
            moe::moe_route(&s, &tl, mode, Some(&tb), &mut ids, &mut w)
                .unwrap_or_else(|err| panic!("{case}: {err}"));
            let (got_ids, got_w) = ids
                .to_host()
                .and_then(|i| Ok((i, w.to_host()?)))
                .unwrap_or_else(|err| panic!("{case}: {err}"));
            for row in 0..t {
                let sl = row * k..(row + 1) * k;
                // f32 scores may order near-ties differently from the f64 reference: then only the
                // weights' multiset must agree closely, unless the tie decides which groups a group
                // limit keeps (then the experts, hence the weights, may differ).
                if got_ids[sl.clone()] != want_ids[sl.clone()] {
                    if let RoutingMode::SigmoidBias {
                        group_limit: Some(l),
                        ..
                    } = mode
                    {
                        let row_logits = &logits[row * e..(row + 1) * e];
                        if kept_groups_are_a_near_tie(row_logits, &bias, l) {
                            println!("{mode:?} t={t} e={e} k={k} row {row}: a near-tie of groups");
                            continue;
                        }
                    }
                    let mut a: Vec<f32> = got_w[sl.clone()].to_vec();
                    let mut b: Vec<f32> = want_w[sl.clone()].to_vec();
                    a.sort_by(f32::total_cmp);
                    b.sort_by(f32::total_cmp);
                    for (x, y) in a.iter().zip(&b) {
                        assert!(
                            (x - y).abs() <= 1e-4,
                            "{mode:?} t={t} e={e} k={k} row {row}: ids {:?} vs {:?}",
                            &got_ids[sl.clone()],
                            &want_ids[sl.clone()]
                        );
                    }
                    continue;
                }
                for (x, y) in got_w[sl.clone()].iter().zip(&want_w[sl.clone()]) {
                    assert!(
                        (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                        "{mode:?} t={t} e={e} k={k} row {row}: {x} vs {y}"
                    );
                }
            }
        }
    }
}

/// Whether one row's last kept group and first dropped group score within f32 rounding of each other
/// (the sum of each group's two best `sigmoid + bias`), so that the kernel may keep either.
fn kept_groups_are_a_near_tie(logits: &[f32], bias: &[f32], l: r::GroupLimit) -> bool {
    if l.keep >= l.groups {
        return false;
    }
    let (_, sel) = r::sigmoid_scores(logits, Some(bias));
    let mut scores = r::group_scores(&sel, l.groups);
    scores.sort_by(|a, b| b.total_cmp(a));
    (scores[l.keep - 1] - scores[l.keep]).abs() < 1e-5
}

/// The memory ops of the W4A16 GEMMs (the IR): weights and scales come through tensor views (whole
/// tiles, TMA-eligible), and the only pointer loads are the activation rows gathered by token id
/// (GEMM 1: even and odd columns) and the routed weights of GEMM 2's epilogue.
#[test]
fn w4a16_gemms_read_weights_through_views() {
    let jobs = cutile_kernels::moe::compile_jobs();
    let count = |text: &str, op: &str| text.matches(op).count();
    for j in jobs.iter().filter(|j| j.kernel.contains("_w4a16")) {
        let (k, metas) = j.dsl_spec().unwrap();
        let text = k.specialize(metas).unwrap().ir_text();
        let (ptr, view) = (count(&text, "load_ptr_tko"), count(&text, "load_view_tko"));
        eprintln!(
            "{} {}: {ptr} pointer loads, {view} view loads",
            j.kernel, j.specialization
        );
        // The rows forms' GEMM 1 gathers `x` (two loads: even and odd columns); the decode form's
        // reads the permuted rows through a view; GEMM 2 reads the routed weights by pointer.
        let decode =
            j.kernel.ends_with("_t") || j.kernel.ends_with("_t8") || j.kernel.ends_with("_p8");
        let want_ptr = match (j.kernel.starts_with("moe_gemm1"), decode) {
            (true, false) => 2,
            (true, true) => 0,
            (false, _) => 1,
        };
        assert_eq!(ptr, want_ptr, "{} {}:\n{text}", j.kernel, j.specialization);
        // Ids, expert, total, global; codes and scales (twice in GEMM 1: gate and up).
        assert!(
            view >= 6,
            "{} {}: {view} view loads",
            j.kernel,
            j.specialization
        );
    }
}

/// The decode form's kernels (weights on the MMA's M side, the word decode, split-K of GEMM 1 and
/// its reduce) at every tile the host or the example's sweep launches, bf16 and f16, W4A16 and
/// dense: specialized, verified, and compiled for sm_80, sm_90, sm_100 and sm_120 (`CUTILE_TILEIRAS`).
fn decode_form_cases() -> Vec<(String, cutile::dsl::Kernel, Vec<cutile::dsl::TensorMeta>)> {
    use common::t;
    use cutile_ir::ScalarType::{self, BF16, F16, F32, I8, I32};
    let (tt, h, i, e, k) = (16i64, 512i64, 256i64, 8i64, 2i64);
    let p = r::max_padded((tt * k) as usize, e as usize, 16) as i64;
    let ids = || vec![t(I32, &[p]), t(I32, &[p / 16]), t(I32, &[1])];
    let mut cases = Vec::new();
    let g1 = |el: ScalarType, w4: bool| {
        // The rows permuted into the aligned order (`moe_permute`), then expert and total.
        let mut v = vec![t(el, &[p, h])];
        if w4 {
            v.extend([
                t(I8, &[e, 2 * i, h / 2]),
                t(I8, &[e, 2 * i, h / 16]),
                t(F32, &[e]),
            ]);
        } else {
            v.push(t(el, &[e, 2 * i, h]));
        }
        v.extend(ids().into_iter().skip(1));
        v.push(t(el, &[p, i]));
        v.push(t(F32, &[2 * p, 2 * i]));
        v
    };
    let g2 = |el: ScalarType, w4: bool| {
        let mut v = vec![t(el, &[p, i])];
        if w4 {
            v.extend([t(I8, &[e, h, i / 2]), t(I8, &[e, h, i / 16]), t(F32, &[e])]);
        } else {
            v.push(t(el, &[e, h, i]));
        }
        v.extend(ids());
        v.push(t(F32, &[tt * k]));
        v.push(t(F32, &[tt * k * 2, h]));
        v
    };
    // The tile's four kernels (W4A16 and dense, both GEMMs), with the `occupancy` hint when `$occ`
    // is not 0 (the host's `Form::Decode::occupancy`).
    macro_rules! forms {
        ($ty:ty, $el:expr, $bn:literal, $bk:literal, $w1:ident, $w2:ident) => {
            forms!($ty, $el, $bn, $bk, $w1, $w2, 0)
        };
        ($ty:ty, $el:expr, $bn:literal, $bk:literal, $w1:ident, $w2:ident, $occ:literal) => {{
            let tag = format!("{} BT=16 BN={} BK={} o{}", stringify!($ty), $bn, $bk, $occ);
            let hinted = |k: cutile::dsl::Kernel| {
                if $occ > 0 {
                    k.with_hint("default", "occupancy", $occ)
                } else {
                    k
                }
            };
            cases.push((
                format!("{} {tag}", stringify!($w1)),
                hinted(moe::kernels::$w1::kernel::<
                    $ty,
                    16,
                    $bn,
                    $bk,
                    { $bk / 2 },
                    { $bk / 16 },
                    { $bk / 8 },
                    { $bk / 4 },
                >()),
                g1($el, true),
            ));
            cases.push((
                format!("{} {tag}", stringify!($w2)),
                hinted(moe::kernels::$w2::kernel::<
                    $ty,
                    16,
                    $bn,
                    $bk,
                    { $bk / 2 },
                    { $bk / 16 },
                    { $bk / 8 },
                    { $bk / 4 },
                >()),
                g2($el, true),
            ));
            cases.push((
                format!("moe_gemm1_dense_t {tag}"),
                hinted(moe::kernels::moe_gemm1_dense_t::kernel::<$ty, 16, $bn, $bk>()),
                g1($el, false),
            ));
            cases.push((
                format!("moe_gemm2_dense_t {tag}"),
                hinted(moe::kernels::moe_gemm2_dense_t::kernel::<$ty, 16, $bn, $bk>()),
                g2($el, false),
            ));
        }};
    }
    // Every (BN, BK, occupancy) of `host::DECODE_TILES` in bf16 (BN 128 with 8 worker warps), two in
    // f16.
    forms!(bf16, BF16, 64, 128, moe_gemm1_w4a16_t, moe_gemm2_w4a16_t);
    forms!(bf16, BF16, 128, 128, moe_gemm1_w4a16_t8, moe_gemm2_w4a16_t8);
    forms!(bf16, BF16, 64, 256, moe_gemm1_w4a16_t, moe_gemm2_w4a16_t);
    forms!(bf16, BF16, 128, 256, moe_gemm1_w4a16_t8, moe_gemm2_w4a16_t8);
    forms!(bf16, BF16, 64, 128, moe_gemm1_w4a16_t, moe_gemm2_w4a16_t, 2);
    forms!(bf16, BF16, 64, 256, moe_gemm1_w4a16_t, moe_gemm2_w4a16_t, 2);
    forms!(bf16, BF16, 64, 128, moe_gemm1_w4a16_t, moe_gemm2_w4a16_t, 3);
    forms!(f16, F16, 64, 128, moe_gemm1_w4a16_t, moe_gemm2_w4a16_t);
    forms!(f16, F16, 128, 256, moe_gemm1_w4a16_t8, moe_gemm2_w4a16_t8);
    // The in-kernel decode prefill form (row block 128) in f16, both K steps (bf16 is in the
    // catalog): GEMM 1 over W13 and its scales viewed as `[E, 2, I, ·]`.
    let p128 = r::max_padded((tt * k) as usize, e as usize, 128) as i64;
    let g1p = vec![
        t(F16, &[p128, h]),
        t(I8, &[e, 2, i, h / 2]),
        t(I8, &[e, 2, i, h / 16]),
        t(F32, &[e]),
        t(I32, &[p128 / 128]),
        t(I32, &[1]),
        t(F16, &[p128, i]),
    ];
    let g2p = vec![
        t(F16, &[p128, i]),
        t(I8, &[e, h, i / 2]),
        t(I8, &[e, h, i / 16]),
        t(F32, &[e]),
        t(I32, &[p128]),
        t(I32, &[p128 / 128]),
        t(I32, &[1]),
        t(F32, &[tt * k]),
        t(F32, &[tt * k, h]),
    ];
    cases.push((
        "moe_gemm1_w4a16_p8 f16 BT=128 BN=64 BK=256".into(),
        moe::kernels::moe_gemm1_w4a16_p8::kernel::<f16, 128, 64, 128, 256, 128, 16, 32, 64>(),
        g1p.clone(),
    ));
    cases.push((
        "moe_gemm1_w4a16_p8 f16 BT=128 BN=64 BK=128".into(),
        moe::kernels::moe_gemm1_w4a16_p8::kernel::<f16, 128, 64, 128, 128, 64, 8, 16, 32>(),
        g1p,
    ));
    cases.push((
        "moe_gemm2_w4a16_p8 f16 BT=128 BN=128 BK=256".into(),
        moe::kernels::moe_gemm2_w4a16_p8::kernel::<f16, 128, 128, 256, 128, 16, 32, 64>(),
        g2p.clone(),
    ));
    cases.push((
        "moe_gemm2_w4a16_p8 f16 BT=128 BN=128 BK=128".into(),
        moe::kernels::moe_gemm2_w4a16_p8::kernel::<f16, 128, 128, 128, 64, 8, 16, 32>(),
        g2p,
    ));
    // The staged sorted form's GEMM 2 and combine in f16 (bf16 is in the catalog).
    let staged = vec![
        t(F16, &[p128, i]),
        t(F16, &[e, h, i]),
        t(F32, &[e]),
        t(I32, &[p128 / 128]),
        t(I32, &[1]),
        t(F32, &[p128, h]),
    ];
    cases.push((
        "moe_gemm2_staged f16 BM=128 BN=128 FOLD=1".into(),
        moe::kernels::moe_gemm2_staged::kernel::<f16, 128, 128, 64, 1>(),
        staged.clone(),
    ));
    cases.push((
        "moe_gemm2_staged f16 BM=128 BN=256 FOLD=0 w8".into(),
        moe::kernels::moe_gemm2_staged::kernel::<f16, 128, 256, 64, 0>().with_hint(
            "default",
            "num_worker_warps_per_cta",
            8,
        ),
        staged,
    ));
    cases.push((
        "moe_combine_staged f16 BT=8 BH=512".into(),
        moe::kernels::moe_combine_staged::kernel::<f16, 8, 512>(),
        vec![
            t(F32, &[p128, h]),
            t(I32, &[tt, k]),
            t(F32, &[tt, k]),
            t(F16, &[tt, h]),
        ],
    ));
    cases.push((
        "moe_silu_reduce bf16 BR=16 BC=64".into(),
        moe::kernels::moe_silu_reduce::kernel::<bf16, 16, 64>(),
        vec![t(F32, &[2 * p, 2 * i]), t(I32, &[1]), t(BF16, &[p, i])],
    ));
    cases
}

#[test]
fn decode_form_kernels_compile_for_four_archs() {
    use cutile::toolchain::GpuArch;
    let cases = decode_form_cases();
    let mut specialized = Vec::new();
    for (name, k, metas) in &cases {
        let s = k
            .clone()
            .specialize(metas)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
        specialized.push((name, s));
    }
    let Some(tileiras) = common::tileiras("decode_form_kernels_compile_for_four_archs") else {
        return;
    };
    let archs: Vec<GpuArch> = match std::env::var("MOE_DECODE_ARCHS").as_deref() {
        Ok("sm_90") => vec![GpuArch::Sm90],
        _ => vec![GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120],
    };
    for arch in archs {
        for (name, s) in &specialized {
            common::compile_cached(&tileiras, s, arch)
                .unwrap_or_else(|e| panic!("{name} {arch:?}: {e}\n{}", s.ir_text()));
        }
    }
}

/// The Blackwell path (`moe::scaled`): the row quantizer and both block-scaled GEMMs verify, the
/// GEMMs are `mmaf_scaled` on e2m1 tiles (one per weight tile and K step: two in GEMM 1, gate and up),
/// tileiras compiles all three for sm_100 and sm_120 and refuses the GEMMs for sm_90, and the catalog
/// skips them below sm_100. They cannot run on our H200.
#[test]
fn blackwell_kernels_compile_for_sm100_and_sm120() {
    use cutile::toolchain::GpuArch;
    let jobs = moe::blackwell_jobs();
    assert_eq!(jobs.len(), 3);
    let mut specialized = Vec::new();
    for j in &jobs {
        for arch in [GpuArch::Sm80, GpuArch::Sm90] {
            assert!(!j.supports(arch), "{} on {arch}", j.kernel);
        }
        for arch in [GpuArch::Sm100, GpuArch::Sm120] {
            assert!(j.supports(arch), "{} on {arch}", j.kernel);
        }
        let (k, metas) = j.dsl_spec().unwrap();
        let s = k
            .clone()
            .specialize(metas)
            .unwrap_or_else(|e| panic!("{}: {e}", j.kernel));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", j.kernel, s.ir_text()));
        let text = s.ir_text();
        let scaled = text.matches("mmaf_scaled").count();
        let want = match j.kernel {
            "moe_gemm1_fp4" => 2,
            "moe_gemm2_fp4" => 1,
            _ => 0,
        };
        assert_eq!(scaled, want, "{}:\n{text}", j.kernel);
        if want > 0 {
            assert!(text.contains("xf4E2M1FN"), "{}", j.kernel);
            assert!(!text.contains("mmaf %"), "{}: a plain mma", j.kernel);
        }
        specialized.push((j.kernel, s));
    }
    let Some(tileiras) = common::tileiras("blackwell_kernels_compile_for_sm100_and_sm120") else {
        return;
    };
    for (name, s) in &specialized {
        for arch in [GpuArch::Sm100, GpuArch::Sm120] {
            common::compile_cached(&tileiras, s, arch)
                .unwrap_or_else(|e| panic!("{name} {arch:?}: {e}\n{}", s.ir_text()));
        }
        if name.starts_with("moe_gemm") {
            assert!(
                common::compile_cached(&tileiras, s, GpuArch::Sm90).is_err(),
                "{name}: sm_90 compiled an e2m1 block-scaled mma"
            );
        }
    }
}

/// What NVFP4 activations cost (the Blackwell path quantizes `x` and the intermediate to e2m1 with
/// e4m3 block scales and one global per row), on a random layer with Gaussian activations and
/// weights, as the layer's relative L2 error against the same layer with unquantized activations:
/// 0.045 with `x` quantized alone and 0.113 with `x` and the intermediate (measured by this test).
/// A block scaled to its maximum puts a Gaussian's values on e2m1 steps of 0.5 and 1 against a value
/// rms near 1.7 (`Δ²/12`: about 0.1 relative per element); the sum over K averages part of it away
/// for `x`, less for the intermediate `silu(g)·u`, whose heavy tail sets its blocks' scales and
/// leaves most of its values on the coarsest steps. The bounds (0.05–0.2) catch a reference that
/// skipped the intermediate's quantization (0.045) or lost a scale (far above). The GPU check of this
/// path (on an sm_100/sm_120 machine) compares against `moe_fp4_activations`, which applies the same
/// quantization, with the W4A16 tolerance.
#[test]
fn fp4_activation_reference_error_is_the_formats() {
    let (t, h, i, e, k) = (16usize, 256usize, 128usize, 4usize, 2usize);
    let gauss = |n: usize, seed: u64| -> Vec<f32> {
        (0..n as u64)
            .map(|j| {
                // Irwin–Hall: the sum of 12 uniforms minus 6 is close to a standard normal.
                (0..12u64)
                    .map(|u| {
                        let z = (seed ^ (j * 12 + u)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        ((z >> 11) as f64 / (1u64 << 53) as f64) as f32
                    })
                    .sum::<f32>()
                    - 6.0
            })
            .collect()
    };
    let x = gauss(t * h, 1);
    let w13: Vec<f32> = gauss(e * 2 * i * h, 2).iter().map(|v| v / 16.0).collect();
    let w2: Vec<f32> = gauss(e * h * i, 3).iter().map(|v| v / 11.3).collect();
    let ids: Vec<i32> = (0..t * k).map(|p| ((p * 7 + p / k) % e) as i32).collect();
    let weights = vec![0.5f32; t * k];
    let exact = r::moe_dense(&x, &w13, &w2, &ids, &weights, (t, h, i, k), |v| v);
    let fp4 = r::moe_fp4_activations(&x, &w13, &w2, &ids, &weights, (t, h, i, k), |v| v).unwrap();
    let l2 = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>().sqrt();
    let diff: Vec<f32> = exact.iter().zip(&fp4).map(|(a, b)| a - b).collect();
    let rel = l2(&diff) / l2(&exact);
    assert!(rel > 0.05 && rel < 0.2, "relative L2 error {rel}");
    // One quantization alone (x only).
    let xq = r::fp4_rows(&x, t, h).unwrap();
    let one = r::moe_dense(&xq, &w13, &w2, &ids, &weights, (t, h, i, k), |v| v);
    let diff1: Vec<f32> = exact.iter().zip(&one).map(|(a, b)| a - b).collect();
    let rel1 = l2(&diff1) / l2(&exact);
    assert!(rel1 < rel, "x alone {rel1}, both {rel}");
    eprintln!("relative L2: x quantized {rel1:.4}, x and h {rel:.4}");
    // Sizes that are not whole 32-element scale pairs are refused.
    assert!(r::moe_fp4_activations(&x, &w13, &w2, &ids, &weights, (t, h, 100, k), |v| v).is_none());
}

/// The router's `bias` is read one element per lane: tileiras 13.5.37 turned its padded tile load into
/// 64- and 128-bit loads at 4- and 8-byte offsets (CUDA_ERROR_MISALIGNED_ADDRESS on the H200, session
/// 38) once the scores were regrouped into groups of 2 or 4 experts. Reads the PTX of the smallest
/// grouped routers (8 experts) and of an ungrouped one.
#[test]
fn route_bias_loads_are_scalar_in_the_ptx() {
    use common::t;
    use cutile_ir::ScalarType::{F32, I32};
    use moe::kernels::SIGMOID_BIAS;
    let Some(tileiras) = common::tileiras("route_bias_loads_are_scalar_in_the_ptx") else {
        return;
    };
    let ptx = common::Sm90Ptx::new(tileiras);
    let metas = |tt: i64, k: i64| {
        vec![
            t(F32, &[tt, 8]),
            t(F32, &[8]),
            t(I32, &[tt, k]),
            t(F32, &[tt, k]),
        ]
    };
    let cases = [
        (
            "4 groups of 2",
            moe::kernels::moe_route::kernel::<f32, SIGMOID_BIAS, 16, 8, 2, 4, 2>(),
            metas(1, 2),
        ),
        (
            "2 groups of 4",
            moe::kernels::moe_route::kernel::<f32, SIGMOID_BIAS, 16, 8, 2, 2, 4>(),
            metas(1, 2),
        ),
        (
            "no groups",
            moe::kernels::moe_route::kernel::<f32, SIGMOID_BIAS, 16, 8, 2, 1, 8>(),
            metas(37, 1),
        ),
    ];
    for (label, kernel, metas) in cases {
        let text = ptx.of_kernel(&kernel, &metas, label);
        let vector_loads: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("ld.global") && (l.contains(".v2") || l.contains(".v4")))
            .collect();
        assert!(vector_loads.is_empty(), "{label}: {vector_loads:#?}");
    }
}
