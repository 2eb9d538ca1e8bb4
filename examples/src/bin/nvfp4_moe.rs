//! An NVFP4 mixture-of-experts layer on the GPU: random bf16 expert weights quantized to NVFP4 on the
//! device (`nvfp4_quantize`), random router logits routed on the device (`moe_route`: softmax top-k,
//! renormalized) and aligned on the CPU (no GPU alignment kernel yet), the W4A16 layer (`moe_layer` with NVFP4 weights) checked against the same layer
//! over the dequantized weights in bf16 (`nvfp4_dequantize` then the dense path, a different kernel
//! path over the same numbers), then timed. Prints time, weight bandwidth (bytes of the experts the
//! tokens hit) and the memory saved against bf16 weights. Two layers: 8 experts, H 4096, I 14336,
//! top-2 (Mixtral-8x7B), and 128 experts, H 2048, I 768, top-8 (Qwen3-30B-A3B); T = 16 (decode) and 4096 (prefill).
//! Prints `skipped` and exits 0 without a GPU.

use cutile::runtime::{Device, Stream, Tensor};
use cutile_kernels::moe::{self, Routing, Weights, reference as r};
use half::bf16;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

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

fn run(s: &Stream, l: &Layer, t: i64, seed: u64) -> Res<()> {
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
    let ids = tids.to_host()?;
    let a = r::align_block_size(&ids, e as usize, moe::host::BM as usize);
    let p = r::max_padded(ids.len(), e as usize, moe::host::BM as usize);
    let mut sorted = a.sorted_ids.clone();
    sorted.resize(p, ids.len() as i32);
    let mut experts = a.expert_ids.clone();
    experts.resize(p / moe::host::BM as usize, 0);
    let ts = Tensor::from_host(d, &sorted, &[p as i64])?;
    let te = Tensor::from_host(d, &experts, &[experts.len() as i64])?;
    let tt = Tensor::from_host(d, &[a.total as i32], &[1])?;
    let tw = Tensor::from_host(d, &tw.to_host()?, &[t * k])?;
    let routing = Routing {
        sorted_ids: &ts,
        expert_ids: &te,
        total: &tt,
        weights: &tw,
        topk: k as i32,
    };
    let w4 = Weights::Nvfp4 {
        w13: &q13,
        s13: &s13,
        g13: &g13,
        w2: &q2,
        s2: &s2,
        g2: &g2,
    };
    let mut out = Tensor::<bf16>::zeros(d, &[t, h])?;
    moe::moe_layer(s, &x, &w4, &routing, &mut out)?;
    // The same layer over the dequantized weights, through the dense kernels.
    let mut d13 = Tensor::<bf16>::zeros(d, &[e, 2 * i, h])?;
    let mut d2 = Tensor::<bf16>::zeros(d, &[e, h, i])?;
    moe::nvfp4_dequantize(s, &q13, &s13, &g13, &mut d13)?;
    moe::nvfp4_dequantize(s, &q2, &s2, &g2, &mut d2)?;
    let mut want_t = Tensor::<bf16>::zeros(d, &[t, h])?;
    let dense = Weights::Dense { w13: &d13, w2: &d2 };
    moe::moe_layer(s, &x, &dense, &routing, &mut want_t)?;
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
    // Device time (CUDA events, L2 flushed before each call, median of the runs) of the W4A16 layer
    // and of the same layer with bf16 weights (our dense grouped GEMMs: the peer). Both include
    // the per-call allocations of the intermediates, which `moe_layer` makes on every call.
    let iters = if t > 64 { 10 } else { 30 };
    let mut flush = cutile::runtime::timing::L2Flush::new(d, 256 << 20)?;
    let w4_stats = cutile::runtime::timing::time_device(s, 3, iters, Some(&mut flush), || {
        moe::moe_layer(s, &x, &w4, &routing, &mut out)
    })?;
    let bf_stats = cutile::runtime::timing::time_device(s, 3, iters, Some(&mut flush), || {
        moe::moe_layer(s, &x, &dense, &routing, &mut want_t)
    })?;
    let secs = w4_stats.median_us * 1e-6;
    let hit = experts[..a.total / moe::host::BM as usize]
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len() as i64;
    let weight_bytes = nvfp4_bytes(l) / e * hit;
    let bf16_bytes = e * 3 * i * h * 2;
    println!(
        "E={e} H={h} I={i} top-{k} T={t}: max |err| {err:.3e} (scale {scale:.3e}) {}; W4A16 {:.1} µs, \
         bf16 weights {:.1} µs ({:.2}x) per layer (CUDA events, median of {iters}, L2 flushed); \
         {:.1} GB/s of NVFP4 expert weights ({hit} experts hit); NVFP4 weights {:.1} MiB vs bf16 {:.1} MiB \
         ({:.2}x smaller)",
        if ok { "ok" } else { "MISMATCH" },
        w4_stats.median_us,
        bf_stats.median_us,
        bf_stats.median_us / w4_stats.median_us,
        weight_bytes as f64 / secs / 1e9,
        nvfp4_bytes(l) as f64 / 1048576.0,
        bf16_bytes as f64 / 1048576.0,
        bf16_bytes as f64 / nvfp4_bytes(l) as f64
    );
    if !ok {
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
    let _ = &d;
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
    ];
    let mut failed = false;
    for (n, l) in layers.iter().enumerate() {
        for t in [16, 4096] {
            if let Err(e) = run(&s, l, t, 100 + n as u64) {
                println!("nvfp4_moe: FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
