//! An NVFP4 mixture-of-experts layer on the GPU: random bf16 expert weights quantized to NVFP4 on the
//! device (`nvfp4_quantize`), random router logits routed (`moe_route`: softmax top-k, renormalized)
//! and aligned (`moe_align_block_size`, row block picked by `host::row_block`) on the device, the
//! W4A16 layer (`moe_layer_in` with NVFP4 weights) checked against the same layer over the
//! dequantized weights in bf16 (`nvfp4_dequantize` then the dense path, a different kernel path over
//! the same numbers, except in the sorted prefill form, which itself dequantizes and runs the dense
//! kernels: there the GPU tests' CPU reference is the check), then timed: the whole layer, each stage (alignment, GEMM 1, GEMM 2, combine)
//! and the bf16-weight layer, with reused intermediates. Prints times, weight bandwidth (bytes of the
//! experts the tokens hit) and the memory saved against bf16 weights. Three layers: 8 experts, H 4096,
//! I 14336, top-2 (Mixtral-8x7B), 128 experts, H 2048, I 768, top-8 (Qwen3-30B-A3B), and 64 experts,
//! H 2048, I 1024, top-8 (OLMoE-1B-7B); T = 1, 16, 64
//! (decode) and 4096 (prefill), or the token counts of `NVFP4_MOE_TOKENS` (e.g. `1024,4096`). Prints
//! one markdown table row per (layer, T, row block, form).
//! `NVFP4_MOE_SWEEP=1` times every candidate, not only the host's pick: for decode (row block 16) every
//! decode-form tile at row blocks 16 and 32 (`host::DECODE_TILES`, `host::DECODE_TILES_32`); for
//! prefill every form (both rows forms, the sorted form and, at row block 128, the staged sorted form
//! at both tile widths and the in-kernel decode form in both K steps) at the host's block and at 64;
//! `NVFP4_MOE_SWEEP=sorted` only the sorted forms at prefill (the rows and in-kernel forms lost by
//! 1.2-13x in session 23 and take most of the sweep's time). With the sweep, the prefill default's
//! row also times each kernel of `host::DEQUANT_KERNELS` alone and in the layer, beside a device
//! copy of the bf16 W13 (`| dequant |` rows).
//! `NVFP4_MOE_BUDGET_S` (default 110) bounds the wall time: candidates past it print as skipped. Prints `skipped` and exits 0 without a GPU.

use cutile::runtime::{Device, Stream, Tensor};
use cutile_kernels::moe::{self, Routing, Weights, Workspace, reference as r};
use half::bf16;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `NVFP4_MOE_SWEEP`: unset, `sorted` (the sorted forms only at prefill), anything else (every form).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sweep {
    Off,
    Sorted,
    All,
}

struct Layer {
    e: i64,
    h: i64,
    i: i64,
    k: i64,
}

/// `n` deterministic router logits in [-2, 2) (a 64-bit LCG).
fn logits(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

fn nvfp4_bytes(l: &Layer) -> i64 {
    // Codes, scales and one global per expert, for W13 and W2.
    let per = |n: i64, kk: i64| n * kk / 2 + n * kk / 16 + 4;
    l.e * (per(2 * l.i, l.h) + per(l.h, l.i))
}

fn quantized(
    s: &Stream,
    w: &Tensor<bf16>,
    shape: [i64; 3],
) -> Res<(Tensor<i8>, Tensor<i8>, Tensor<f32>)> {
    let d = s.device();
    let [g, n, k] = shape;
    let mut q = Tensor::<i8>::zeros(d, &[g, n, k / 2])?;
    let mut sc = Tensor::<i8>::zeros(d, &[g, n, k / 16])?;
    let mut gl = Tensor::<f32>::zeros(d, &[g])?;
    moe::nvfp4_quantize(s, w, &mut q, &mut sc, &mut gl)?;
    Ok((q, sc, gl))
}

/// Median µs of `f` (CUDA events, L2 flushed before each call).
fn time(
    s: &Stream,
    flush: &mut cutile::runtime::timing::L2Flush,
    iters: usize,
    f: impl FnMut() -> Result<(), cutile_kernels::op::OpError>,
) -> Res<f64> {
    Ok(cutile::runtime::timing::time_device(s, 3, iters, Some(flush), f)?.median_us)
}

/// The wall-clock budget of the whole example (`NVFP4_MOE_BUDGET_S`, default 110 s): candidates
/// past it are listed as skipped, so one GPU run always ends with a table. It also carries the
/// device's copy bandwidth measured at the start (GB/s, read + written), the base of the `%` columns.
struct Budget {
    start: std::time::Instant,
    limit_s: f64,
    copy_gbs: f64,
}

impl Budget {
    fn over(&self) -> bool {
        self.start.elapsed().as_secs_f64() > self.limit_s
    }
}

/// The sorted forms' per-call dequantization by each kernel (`DEQUANT_KERNELS`): W13 and W2 alone
/// (bytes read and written ÷ time) and the layer with it (`layer`), beside a device copy of the
/// bf16 W13 (read and written ÷ time), the bandwidth a memory-bound pass can reach in this run.
fn dequant_rows(
    s: &Stream,
    flush: &mut cutile::runtime::timing::L2Flush,
    iters: usize,
    (q13, s13, q2, s2): (&Tensor<i8>, &Tensor<i8>, &Tensor<i8>, &Tensor<i8>),
    d13: &Tensor<bf16>,
    mut layer: impl FnMut(
        &mut cutile::runtime::timing::L2Flush,
        &mut Workspace<bf16>,
        moe::host::DequantKernel,
    ) -> Res<f64>,
    ws: &mut Workspace<bf16>,
) -> Res<()> {
    let d = s.device();
    let mut y13 = Tensor::<bf16>::zeros(d, d13.shape())?;
    let sh2 = [q2.shape()[0], q2.shape()[1], 2 * q2.shape()[2]];
    let mut y2 = Tensor::<bf16>::zeros(d, &sh2)?;
    let bytes = |q: &Tensor<i8>, sc: &Tensor<i8>, y: &Tensor<bf16>| {
        (q.numel() + sc.numel() + 2 * y.numel()) as f64
    };
    let gbs = |b: f64, us: f64| b / (us * 1e-6) / 1e9;
    let copy_us = time(s, flush, iters, || Ok(y13.copy_from(&d13.view())?))?;
    println!(
        "| dequant | device copy of bf16 W13 ({:.2} GB read + written) | {copy_us:.1} µs | {:.0} GB/s |",
        4.0 * d13.numel() as f64 / 1e9,
        gbs(4.0 * d13.numel() as f64, copy_us)
    );
    for kernel in moe::host::DEQUANT_KERNELS {
        let u13 = time(s, flush, iters, || {
            moe::host::nvfp4_dequantize_folded(s, q13, s13, &mut y13, kernel)
        })?;
        let u2 = time(s, flush, iters, || {
            moe::host::nvfp4_dequantize_folded(s, q2, s2, &mut y2, kernel)
        })?;
        let layer_us = layer(flush, ws, kernel)?;
        println!(
            "| dequant | {kernel:?} | W13 {u13:.1} µs ({:.0} GB/s) | W2 {u2:.1} µs ({:.0} GB/s) | layer {layer_us:.1} µs |",
            gbs(bytes(q13, s13, &y13), u13),
            gbs(bytes(q2, s2, &y2), u2),
        );
    }
    Ok(())
}

fn form_name(f: moe::host::Form) -> String {
    match f {
        moe::host::Form::Rows => "rows (f32 decode)".into(),
        moe::host::Form::RowsBits => "rows (bit decode)".into(),
        moe::host::Form::Decode {
            bn,
            bk,
            occupancy: 0,
        } => format!("decode BN={bn} BK={bk}"),
        moe::host::Form::Decode { bn, bk, occupancy } => {
            format!("decode BN={bn} BK={bk} o{occupancy}")
        }
        moe::host::Form::Sorted => "sorted (permuted rows, persistent, dequantized once)".into(),
        moe::host::Form::InKernel { bk } => format!("in-kernel decode BT=128 BK={bk}"),
        moe::host::Form::SortedStaged { bn } => {
            format!("sorted, GEMM 2 staged 128x{bn} (tile stores, gathering combine)")
        }
    }
}

fn run(s: &Stream, l: &Layer, t: i64, seed: u64, sweep: Sweep, budget: &Budget) -> Res<()> {
    let sweep_forms = sweep;
    let sweep = sweep != Sweep::Off;
    let d = s.device();
    let (e, h, i, k) = (l.e, l.h, l.i, l.k);
    let w13 = Tensor::<bf16>::random_uniform(d, &[e, 2 * i, h], -0.05, 0.05, seed)?;
    let w2 = Tensor::<bf16>::random_uniform(d, &[e, h, i], -0.05, 0.05, seed + 1)?;
    let (q13, s13, g13) = quantized(s, &w13, [e, 2 * i, h])?;
    let (q2, s2, g2) = quantized(s, &w2, [e, h, i])?;
    drop((w13, w2));
    let x = Tensor::<bf16>::random(d, &[t, h], seed + 2)?;
    let logits = logits((t * e) as usize, seed + 3);
    let tl = Tensor::from_host(d, &logits, &[t, e])?;
    let mut tids = Tensor::<i32>::zeros(d, &[t, k])?;
    let mut tw = Tensor::<f32>::zeros(d, &[t, k])?;
    let mode = r::RoutingMode::SoftmaxTopK { renormalize: true };
    moe::moe_route(s, &tl, mode, None, &mut tids, &mut tw)?;
    let mut ws = Workspace::<bf16>::default();
    let picked = moe::host::row_block(t * k, e);
    // The candidates: the host's pick; with the sweep, for decode (picked block 16) every decode
    // tile at row blocks 16 and 32 (the rows forms there lost to the decode form by 1.3-2.3x in
    // session 8), else every form at the picked block and at 64.
    let mut cands: Vec<(i64, moe::host::Form)> =
        vec![(picked, moe::host::default_form(picked, h, i))];
    if sweep {
        let decode = picked == 16;
        let bms: Vec<i64> = if decode {
            vec![16, 32]
        } else {
            vec![picked, 64]
        };
        for bm in bms {
            for f in moe::host::forms(bm, h, i) {
                let wanted = if decode {
                    matches!(f, moe::host::Form::Decode { .. })
                } else {
                    sweep_forms == Sweep::All
                        || matches!(
                            f,
                            moe::host::Form::Sorted | moe::host::Form::SortedStaged { .. }
                        )
                };
                if wanted && !cands.contains(&(bm, f)) {
                    cands.push((bm, f));
                }
            }
        }
    }
    let iters = if t > 64 { 10 } else { 30 };
    let mut flush = cutile::runtime::timing::L2Flush::new(d, 256 << 20)?;
    let w4 = Weights::Nvfp4 {
        w13: &q13,
        s13: &s13,
        g13: &g13,
        w2: &q2,
        s2: &s2,
        g2: &g2,
    };
    // The same layer over the dequantized weights, through the dense kernels (the check, and the
    // bf16-weight peer the prefill target compares against).
    let mut d13 = Tensor::<bf16>::zeros(d, &[e, 2 * i, h])?;
    let mut d2 = Tensor::<bf16>::zeros(d, &[e, h, i])?;
    moe::nvfp4_dequantize(s, &q13, &s13, &g13, &mut d13)?;
    moe::nvfp4_dequantize(s, &q2, &s2, &g2, &mut d2)?;
    let dense = Weights::Dense { w13: &d13, w2: &d2 };
    let ids_host = tids.to_host()?;
    let mut failed = false;
    let mut aligned: Option<(i64, moe::host::AlignedBuffers)> = None;
    for (bm, form) in cands {
        if budget.over() {
            println!(
                "E={e} H={h} I={i} top-{k} T={t} BM={bm} {form:?}: skipped (NVFP4_MOE_BUDGET_S spent)"
            );
            continue;
        }
        ws.form = Some(form);
        // Routing → aligned order on the GPU (no host round trip).
        if aligned.as_ref().is_none_or(|(b, _)| *b != bm) {
            aligned = Some((bm, moe::host::aligned_buffers(s, t * k, e, bm)?));
        }
        let (_, (so, ex, to)) = aligned.as_mut().expect("set above");
        moe::moe_align_block_size(s, &tids, e, bm, so, ex, to, &mut ws)?;
        let routing = Routing {
            sorted_ids: so,
            expert_ids: ex,
            total: to,
            weights: &tw,
            topk: k as i32,
        };
        let mut out = Tensor::<bf16>::zeros(d, &[t, h])?;
        moe::moe_layer_in(s, &x, &w4, &routing, &mut out, &mut ws)?;
        let mut want_t = Tensor::<bf16>::zeros(d, &[t, h])?;
        moe::moe_layer_in(s, &x, &dense, &routing, &mut want_t, &mut ws)?;
        let (got, want) = (out.to_host()?, want_t.to_host()?);
        let scale = want
            .iter()
            .fold(0f32, |m, v| m.max(v.to_f32().abs()))
            .max(1e-6);
        let err = got
            .iter()
            .zip(&want)
            .fold(0f32, |m, (a, b)| m.max((a.to_f32() - b.to_f32()).abs()));
        let ok = err <= 2e-2 * scale;
        // Device time of the whole W4A16 layer (alignment included) and of each stage, and of the
        // layer with bf16 weights (our dense grouped GEMMs: the peer), all with reused
        // intermediates (no allocation inside the timed calls).
        // Both alignment forms on the same buffers (they write the same values); the host's pick is
        // one of them.
        let mut align_form_us = |form| {
            time(s, &mut flush, iters, || {
                moe::host::moe_align_block_size_with(s, &tids, e, bm, so, ex, to, &mut ws, form)
            })
        };
        let align_one_us = align_form_us(moe::host::AlignForm::OneLaunch)?;
        let align_three_us = align_form_us(moe::host::AlignForm::ThreePass)?;
        let align_us = if moe::host::align_in_one_launch(t * k, e) {
            align_one_us
        } else {
            align_three_us
        };
        let routing = Routing {
            sorted_ids: so,
            expert_ids: ex,
            total: to,
            weights: &tw,
            topk: k as i32,
        };
        let p = routing.sorted_ids.shape()[0];
        let mut hb = Tensor::<bf16>::zeros(d, &[p, i])?;
        let ys = moe::host::gemm2_out_shape(&x, &w4, &routing, Some(form))?;
        let mut y = Tensor::<f32>::zeros(d, &ys)?;
        let g1_us = time(s, &mut flush, iters, || {
            moe::host::moe_gemm1(s, &x, &w4, &routing, &mut hb, &mut ws)
        })?;
        let g2_us = time(s, &mut flush, iters, || {
            moe::host::moe_gemm2(s, &x, &hb, &w4, &routing, &mut y, &mut ws)
        })?;
        let comb_us = time(s, &mut flush, iters, || {
            if let moe::host::Form::SortedStaged { .. } = form {
                moe::host::moe_combine_staged(s, &x, &y, &w4, &routing, &mut out, &mut ws)
            } else {
                moe::host::moe_combine(s, &y, ys[0] / t, &mut out)
            }
        })?;
        let w4_us = time(s, &mut flush, iters, || {
            moe::moe_layer_in(s, &x, &w4, &routing, &mut out, &mut ws)
        })?;
        let bf_us = time(s, &mut flush, iters, || {
            moe::moe_layer_in(s, &x, &dense, &routing, &mut want_t, &mut ws)
        })?;
        let hit = ids_host
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len() as i64;
        let weight_bytes = nvfp4_bytes(l) / e * hit;
        let bf16_bytes = e * 3 * i * h * 2;
        let (b13, b2) = (weight_bytes * 2 / 3, weight_bytes / 3);
        let gbs = |bytes: i64, us: f64| bytes as f64 / (us * 1e-6) / 1e9;
        let pct = |bytes: i64, us: f64| 100.0 * gbs(bytes, us) / budget.copy_gbs;
        println!(
            "| {e} | {t} | {bm} | {}{} | {} | {w4_us:.1} | {:.0} | {:.1}% | {bf_us:.1} | {:.2}x | \
             {g1_us:.1} ({:.0}%) | {g2_us:.1} ({:.0}%) | {align_us:.1} ({align_one_us:.1} / {align_three_us:.1}) | \
             {comb_us:.1} | {} | {err:.2e} |",
            form_name(form),
            if bm == picked && form == moe::host::default_form(bm, h, i) {
                " *"
            } else {
                ""
            },
            ys[0] / (t * k),
            gbs(weight_bytes, w4_us),
            pct(weight_bytes, w4_us),
            bf_us / w4_us,
            pct(b13, g1_us),
            pct(b2, g2_us),
            if ok { "ok" } else { "MISMATCH" },
        );
        if sweep
            && t > 64
            && bm == picked
            && form == moe::host::default_form(bm, h, i)
            && matches!(
                form,
                moe::host::Form::Sorted | moe::host::Form::SortedStaged { .. }
            )
        {
            dequant_rows(
                s,
                &mut flush,
                iters,
                (&q13, &s13, &q2, &s2),
                &d13,
                |fl, ws, dq| {
                    ws.dequant = Some(dq);
                    let r = time(s, fl, iters, || {
                        moe::moe_layer_in(s, &x, &w4, &routing, &mut out, ws)
                    });
                    ws.dequant = None;
                    r
                },
                &mut ws,
            )?;
        }
        if t == 1 && bm == picked && form == moe::host::default_form(bm, h, i) {
            println!(
                "| E={e} H={h} I={i}: NVFP4 weights {:.1} MiB vs bf16 {:.1} MiB; {hit} experts hit at T=1 |",
                nvfp4_bytes(l) as f64 / 1048576.0,
                bf16_bytes as f64 / 1048576.0
            );
        }
        failed |= !ok;
    }
    if failed {
        return Err(
            "the W4A16 layer does not match the dense layer over the dequantized weights".into(),
        );
    }
    Ok(())
}

fn main() {
    if !cutile::runtime::is_available() {
        println!("nvfp4_moe: skipped (no CUDA driver)");
        return;
    }
    let (d, s) = match Device::new(0).and_then(|d| Stream::new(&d).map(|s| (d, s))) {
        Ok(v) => v,
        Err(e) => {
            println!("nvfp4_moe: skipped (no usable CUDA device: {e})");
            return;
        }
    };
    let layers = [
        Layer {
            e: 8,
            h: 4096,
            i: 14336,
            k: 2,
        },
        // Qwen3-30B-A3B's experts. (Qwen1.5-MoE's I = 1408 is refused: the quantizer takes K in
        // multiples of 256, docs/moe.md.)
        Layer {
            e: 128,
            h: 2048,
            i: 768,
            k: 8,
        },
        // The 64-expert top-8 shape issue 12 names: OLMoE-1B-7B's experts.
        Layer {
            e: 64,
            h: 2048,
            i: 1024,
            k: 8,
        },
    ];
    // NVFP4_MOE_SWEEP=1 times other row blocks and forms, not only the host's pick (see `run`).
    let sweep = match std::env::var("NVFP4_MOE_SWEEP").as_deref() {
        Err(_) => Sweep::Off,
        Ok("sorted") => Sweep::Sorted,
        Ok(_) => Sweep::All,
    };
    // The `%` columns' base, measured here: the same binary runs on H100s (HBM3) and H200s (HBM3e).
    let probe = cutile::runtime::timing::L2Flush::new(&d, cutile::runtime::timing::FLUSH_BYTES);
    let copy_gbs = match probe.and_then(|mut f| {
        cutile::runtime::timing::copy_gbps(
            &s,
            Some(&mut f),
            cutile::runtime::timing::COPY_PROBE_BYTES,
            20,
        )
    }) {
        Ok(g) => g,
        Err(e) => {
            println!("nvfp4_moe: FAILED: the copy bandwidth probe: {e}");
            std::process::exit(1);
        }
    };
    let budget = Budget {
        start: std::time::Instant::now(),
        limit_s: std::env::var("NVFP4_MOE_BUDGET_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(110.0),
        copy_gbs,
    };
    println!(
        "NVFP4 MoE (W4A16), bf16 activations; times in µs (CUDA events, median, L2 flushed before each call); \
         GB/s and % are NVFP4 expert-weight bytes of the experts hit / time against {copy_gbs:.0} GB/s copy \
         (a 512 MiB device copy, read + written, measured at the start); \
         `*` = the host's pick; `bf16 w` = the same layer with dense bf16 weights in the same form."
    );
    println!(
        "| E | T | BM | form | K splits (GEMM 2) | W4A16 layer µs | GB/s | % copy | bf16 w µs | bf16/W4 | \
         GEMM 1 µs (% copy) | GEMM 2 µs (% copy) | align µs (one launch / three) | combine µs | check | \
         max err |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // NVFP4_MOE_TOKENS=1024,4096 runs other token counts (ci/gpu/moe_peer.py reads the same variable).
    let tokens: Vec<i64> = match std::env::var("NVFP4_MOE_TOKENS") {
        Ok(v) => match v.split(',').map(|t| t.trim().parse::<i64>()).collect() {
            Ok(ts) => ts,
            Err(e) => {
                println!(
                    "nvfp4_moe: FAILED: NVFP4_MOE_TOKENS={v:?} is not a list of token counts ({e})"
                );
                std::process::exit(2);
            }
        },
        Err(_) => vec![1, 16, 64, 4096],
    };
    let mut failed = false;
    for (n, l) in layers.iter().enumerate() {
        for &t in &tokens {
            if budget.over() {
                println!("E={} T={t}: skipped (NVFP4_MOE_BUDGET_S spent)", l.e);
                continue;
            }
            if let Err(e) = run(&s, l, t, 100 + n as u64, sweep, &budget) {
                println!("nvfp4_moe: FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
