//! The NVFP4 MoE family without a GPU:
//!
//! - the format: every e2m1 and e4m3 code decodes to its value and re-encodes to itself, rounding at
//!   every midpoint goes to the even code, saturation, zeros and negative zero, the scales of the
//!   issue's formulas, block boundaries (each 16-element block has its own scale) and the packing;
//! - routing (softmax with and without renormalization, sigmoid with a selection-only bias), the
//!   alignment of (token, expert) pairs to GEMM row blocks, and the dense MoE reference on tiny shapes.

#![allow(clippy::unwrap_used)]

use cutile_kernels::moe::reference::{self as r, RoutingMode};

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
    assert_eq!(
        r::dequantize(&q),
        x.iter()
            .map(|v| if *v == 0.0 { *v } else { *v })
            .collect::<Vec<_>>()
    );
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
        RoutingMode::SigmoidBias { scale: 2.5 },
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
        RoutingMode::SigmoidBias { scale: 1.0 },
        Some(&bias),
    );
    assert_eq!(ids, vec![0, 1]);
    assert!((f64::from(w[0]) - s(1.0) / (s(1.0) + s(3.0))).abs() < 1e-6);
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

/// Every catalog specialization of the family specializes, verifies, and with tileiras compiles for
/// sm_80, sm_90, sm_100 and sm_120.
#[test]
fn catalog_kernels_compile_for_four_archs() {
    use cutile::toolchain::{CompileRequest, GpuArch, Tileiras};
    let jobs = cutile_kernels::moe::compile_jobs();
    assert_eq!(jobs.len(), 8);
    let mut specialized = Vec::new();
    for j in &jobs {
        let (k, metas) = j.dsl_spec().unwrap();
        let s = k
            .specialize(metas)
            .unwrap_or_else(|e| panic!("{} {}: {e}", j.kernel, j.specialization));
        specialized.push((j.kernel, s));
    }
    let tileiras = match Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            assert!(
                std::env::var_os("CUTILE_REQUIRE_TOOLS").is_none(),
                "CUTILE_REQUIRE_TOOLS is set but tileiras is missing: {e}"
            );
            eprintln!("SKIPPED: tileiras not found ({e})");
            return;
        }
    };
    for arch in [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120] {
        for (name, s) in &specialized {
            s.compile(&tileiras, &CompileRequest::new(arch))
                .unwrap_or_else(|e| panic!("{name} {arch:?}: {e}\n{}", s.ir_text()));
        }
    }
}
