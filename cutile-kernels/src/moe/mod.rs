//! NVFP4 mixture-of-experts (issue 12): the NVFP4 weight format, its quantize / dequantize kernels, and
//! the grouped expert GEMMs of a MoE layer on Hopper-class GPUs as weight-only W4A16 (e2m1 nibbles and
//! e4m3 scales decoded to bf16/f16 in the kernel, bf16/f16 MMA with f32 accumulation), with the same
//! GEMMs over dense bf16/f16 weights as the peer.
//!
//! Layouts (the issue's): `W13: [E, 2I, H/2]` bytes (row `n` of expert `e` holds `K = H` values, byte
//! `j` element `2j` in the low nibble and `2j+1` in the high one; gate rows `0..I`, up rows `I..2I`),
//! `S13: [E, 2I, H/16]` e4m3 bytes, `G13: [E]` f32; `W2: [E, H, I/2]`, `S2: [E, H, I/16]`, `G2: [E]`.
//!
//! A layer runs `moe_gemm1_*` (rows of `x` gathered in the expert-sorted, block-padded order of
//! `moe_align_block_size`; SiLU(gate)·up in the epilogue, `h: [P, I]` in that order), `moe_gemm2_*`
//! (routed weight in the epilogue, each pair's row per K split scattered to `y: [T·k·S, H]` f32) and
//! `moe_combine` (`out[t]` = the sum of its `k·S` rows in slot-then-split order): a deterministic
//! combine, see `docs/moe.md`.
//!
//! - [`reference`](mod@reference): the CPU references (format, routing, alignment, expert computation);
//! - [`kernels`]: the DSL kernels, [`codec`] the format on tiles;
//! - [`host`]: quantize / dequantize, routing and one MoE layer over runtime tensors;
//! - [`compile_jobs`]: the specializations the compile catalog builds for the four archs;
//! - [`scaled`]: the Blackwell path's kernels (activations quantized per row on the fly, both GEMMs on
//!   the block-scaled tensor cores), [`blackwell_jobs`] their sm_100/sm_120 specializations; compiled,
//!   never run (our GPU is sm_90), and no host function drives them yet.
//!
//! `moe_align_block_size` runs on the GPU ([`host::moe_align_block_size`], three passes), so routing,
//! alignment and the layer stays on the device; GEMM 2 splits K when its grid is short. Decode (row
//! block 16, 32 on request) runs the GEMMs in the decode form ([`host::Form::Decode`]: weights on the
//! MMA's M side, the word decode of [`words`], two e2m1 weights per 32-bit op, split-K of GEMM 1
//! too). Not built yet:
//! registry ops and harness workloads (see `docs/moe.md`).

mod dsl;
pub mod host;
pub mod reference;
pub mod scaled;

pub use dsl::{codec, kernels, words};
pub use host::{
    MoeElem, Routing, Weights, Workspace, moe_align_block_size, moe_layer, moe_layer_in, moe_route,
    nvfp4_dequantize, nvfp4_quantize,
};

use crate::catalog::CompileJob;
use cutile::dsl::TensorMeta;
use cutile_ir::ScalarType::{self, *};

/// The W4A16 GEMM tile: `BM` rows of the aligned order, `BN` output columns, `BK` of K per step
/// (`BK/2` packed bytes and `BK/16` scales per weight row).
pub const GEMM_TILE: (i32, i32, i32) = (64, 64, 64);

fn meta(dt: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dt, shape)
}

/// The catalog's specializations of the family (bf16; the router f32), ending with the Blackwell
/// path's three ([`blackwell_jobs`], sm_100 and newer only); before them (the 9 kernels at the
/// 64-row tiles, the W4A16 ones with the bit-pattern decode; the decode form's W4A16 GEMMs at
/// 128 x 256 over 8 warps (the default) and 64 x 128, its dense peers, and GEMM 1's split-K reduce; the
/// in-kernel decode prefill form's two GEMMs in both K steps; the 128-row 8-warp GEMMs, W4A16 and
/// dense; the three alignment passes, so every entry of `dsl.rs` is
/// compiled), compiled for
/// sm_80, sm_90, sm_100 and sm_120 by `cargo xtask kernels`. Shapes: a small MoE layer (T = 256,
/// H = 1024, I = 512, E = 8, top-2, P_max = 1024 rows of 64).
pub fn compile_jobs() -> Vec<CompileJob> {
    use half::bf16;
    let (t, h, i, e, k) = (256i64, 1024i64, 512i64, 8i64, 2i64);
    let p = crate::moe::reference::max_padded((t * k) as usize, e as usize, 64) as i64;
    let ids = || vec![meta(I32, &[p]), meta(I32, &[p / 64]), meta(I32, &[1])];
    let mut jobs = Vec::new();
    let job = |name: &'static str, spec: &str, k: cutile::dsl::Kernel, m: Vec<TensorMeta>| {
        CompileJob::dsl(name, spec.into(), k, m)
    };
    jobs.push(job(
        "nvfp4_dequantize",
        "E=bf16 BN=64 BK=128",
        kernels::nvfp4_dequantize::kernel::<bf16, 64, 128, 64, 8>(),
        vec![
            meta(I8, &[e, 2 * i, h / 2]),
            meta(I8, &[e, 2 * i, h / 16]),
            meta(F32, &[e]),
            meta(BF16, &[e, 2 * i, h]),
        ],
    ));
    jobs.push(job(
        "nvfp4_dequantize_folded",
        "E=bf16 BN=64 BK=128",
        kernels::nvfp4_dequantize_folded::kernel::<bf16, 64, 128, 64, 8>(),
        vec![
            meta(I8, &[e, 2 * i, h / 2]),
            meta(I8, &[e, 2 * i, h / 16]),
            meta(BF16, &[e, 2 * i, h]),
        ],
    ));
    let halves = e * 2 * i * h / 8;
    for (spec, kernel) in [
        ("H=256", kernels::nvfp4_dequantize_groups::kernel::<256>()),
        ("H=512", kernels::nvfp4_dequantize_groups::kernel::<512>()),
        ("H=1024", kernels::nvfp4_dequantize_groups::kernel::<1024>()),
        ("H=2048", kernels::nvfp4_dequantize_groups::kernel::<2048>()),
    ] {
        jobs.push(job(
            "nvfp4_dequantize_groups",
            spec,
            kernel,
            vec![
                meta(I8, &[halves, 4]),
                meta(I8, &[halves / 2]),
                meta(BF16, &[halves, 8]),
            ],
        ));
    }
    let tiles = (2 * i / 16) * (h / 256);
    jobs.push(job(
        "nvfp4_amax",
        "E=bf16 BR=16 BK=256",
        kernels::nvfp4_amax::kernel::<bf16, 16, 256>(),
        vec![meta(BF16, &[e, 2 * i, h]), meta(F32, &[e, tiles])],
    ));
    jobs.push(job(
        "nvfp4_quantize",
        "E=bf16 BR=16 BK=256",
        kernels::nvfp4_quantize::kernel::<bf16, 16, 256, 128, 16>(),
        vec![
            meta(BF16, &[e, 2 * i, h]),
            meta(F32, &[e, tiles]),
            meta(I8, &[e, 2 * i, h / 2]),
            meta(I8, &[e, 2 * i, h / 16]),
            meta(F32, &[e]),
        ],
    ));
    let mut g1 = vec![
        meta(BF16, &[t, h]),
        meta(I8, &[e, 2 * i, h / 2]),
        meta(I8, &[e, 2 * i, h / 16]),
        meta(F32, &[e]),
    ];
    g1.extend(ids());
    g1.push(meta(BF16, &[p, i]));
    jobs.push(job(
        "moe_gemm1_w4a16",
        "E=bf16 BM=64 BN=64 BK=64 DEC=bits",
        kernels::moe_gemm1_w4a16::kernel::<bf16, 64, 64, 64, 32, 4, 1>(),
        g1,
    ));
    let mut d1 = vec![meta(BF16, &[t, h]), meta(BF16, &[e, 2 * i, h])];
    d1.extend(ids());
    d1.push(meta(BF16, &[p, i]));
    jobs.push(job(
        "moe_gemm1_dense",
        "E=bf16 BM=64 BN=64 BK=64",
        kernels::moe_gemm1_dense::kernel::<bf16, 64, 64, 64>(),
        d1,
    ));
    let mut g2 = vec![
        meta(BF16, &[p, i]),
        meta(I8, &[e, h, i / 2]),
        meta(I8, &[e, h, i / 16]),
        meta(F32, &[e]),
    ];
    g2.extend(ids());
    g2.push(meta(F32, &[t * k]));
    g2.push(meta(F32, &[t * k, h]));
    jobs.push(job(
        "moe_gemm2_w4a16",
        "E=bf16 BM=64 BN=64 BK=64 DEC=bits",
        kernels::moe_gemm2_w4a16::kernel::<bf16, 64, 64, 64, 32, 4, 1>(),
        g2,
    ));
    let mut d2 = vec![meta(BF16, &[p, i]), meta(BF16, &[e, h, i])];
    d2.extend(ids());
    d2.push(meta(F32, &[t * k]));
    d2.push(meta(F32, &[t * k, h]));
    jobs.push(job(
        "moe_gemm2_dense",
        "E=bf16 BM=64 BN=64 BK=64",
        kernels::moe_gemm2_dense::kernel::<bf16, 64, 64, 64>(),
        d2,
    ));
    // The decode form the host picks for a handful of rows per expert (row block 16, 128 weight rows
    // on the MMA's M side over 8 worker warps, K 256 per step, the word decode) and GEMM 1's
    // split-K reduce.
    // The metas of both decode-form GEMMs at row block `bt`, NVFP4 (`w4`) or dense weights. GEMM 1
    // reads `x`'s rows permuted into the aligned order (`moe_permute`), so it takes no `sorted_ids`.
    let padded = |bt: i64| {
        crate::moe::reference::max_padded((t * k) as usize, e as usize, bt as usize) as i64
    };
    let g1d = |bt: i64, w4: bool| {
        let p = padded(bt);
        let mut v = vec![meta(BF16, &[p, h])];
        if w4 {
            v.extend([
                meta(I8, &[e, 2 * i, h / 2]),
                meta(I8, &[e, 2 * i, h / 16]),
                meta(F32, &[e]),
            ]);
        } else {
            v.push(meta(BF16, &[e, 2 * i, h]));
        }
        v.extend([
            meta(I32, &[p / bt]),
            meta(I32, &[1]),
            meta(BF16, &[p, i]),
            meta(F32, &[2 * p, 2 * i]),
        ]);
        v
    };
    let g2d = |bt: i64, w4: bool| {
        let p = padded(bt);
        let mut v = vec![meta(BF16, &[p, i])];
        if w4 {
            v.extend([
                meta(I8, &[e, h, i / 2]),
                meta(I8, &[e, h, i / 16]),
                meta(F32, &[e]),
            ]);
        } else {
            v.push(meta(BF16, &[e, h, i]));
        }
        v.extend([
            meta(I32, &[p]),
            meta(I32, &[p / bt]),
            meta(I32, &[1]),
            meta(F32, &[t * k]),
            meta(F32, &[t * k, h]),
        ]);
        v
    };
    let p16 = padded(16);
    jobs.push(job(
        "moe_gemm1_w4a16_t8",
        "E=bf16 BT=16 BN=128 BK=256",
        kernels::moe_gemm1_w4a16_t8::kernel::<bf16, 16, 128, 256, 128, 16, 32, 64>(),
        g1d(16, true),
    ));
    jobs.push(job(
        "moe_gemm2_w4a16_t8",
        "E=bf16 BT=16 BN=128 BK=256",
        kernels::moe_gemm2_w4a16_t8::kernel::<bf16, 16, 128, 256, 128, 16, 32, 64>(),
        g2d(16, true),
    ));
    // The same at row block 32 (the decode form's second row block, `host::DECODE_TILES_32`).
    jobs.push(job(
        "moe_gemm1_w4a16_t8",
        "E=bf16 BT=32 BN=128 BK=256",
        kernels::moe_gemm1_w4a16_t8::kernel::<bf16, 32, 128, 256, 128, 16, 32, 64>(),
        g1d(32, true),
    ));
    jobs.push(job(
        "moe_gemm2_w4a16_t8",
        "E=bf16 BT=32 BN=128 BK=256",
        kernels::moe_gemm2_w4a16_t8::kernel::<bf16, 32, 128, 256, 128, 16, 32, 64>(),
        g2d(32, true),
    ));
    // The in-kernel decode prefill form (row block 128, 8 worker warps) in both K steps: GEMM 1 with
    // the gate and up rows of 64 columns stacked (W13 and its scales viewed as `[E, 2, I, ·]`), GEMM 2
    // on 128 columns.
    let p128 = padded(128);
    let g1p = || {
        vec![
            meta(BF16, &[p128, h]),
            meta(I8, &[e, 2, i, h / 2]),
            meta(I8, &[e, 2, i, h / 16]),
            meta(F32, &[e]),
            meta(I32, &[p128 / 128]),
            meta(I32, &[1]),
            meta(BF16, &[p128, i]),
        ]
    };
    jobs.push(job(
        "moe_gemm1_w4a16_p8",
        "E=bf16 BT=128 BN=64 BK=256",
        kernels::moe_gemm1_w4a16_p8::kernel::<bf16, 128, 64, 128, 256, 128, 16, 32, 64>(),
        g1p(),
    ));
    jobs.push(job(
        "moe_gemm1_w4a16_p8",
        "E=bf16 BT=128 BN=64 BK=128",
        kernels::moe_gemm1_w4a16_p8::kernel::<bf16, 128, 64, 128, 128, 64, 8, 16, 32>(),
        g1p(),
    ));
    jobs.push(job(
        "moe_gemm2_w4a16_p8",
        "E=bf16 BT=128 BN=128 BK=256",
        kernels::moe_gemm2_w4a16_p8::kernel::<bf16, 128, 128, 256, 128, 16, 32, 64>(),
        g2d(128, true),
    ));
    jobs.push(job(
        "moe_gemm2_w4a16_p8",
        "E=bf16 BT=128 BN=128 BK=128",
        kernels::moe_gemm2_w4a16_p8::kernel::<bf16, 128, 128, 128, 64, 8, 16, 32>(),
        g2d(128, true),
    ));
    // The decode form's 64-row tiles (the default where 128 does not divide H or I) and its
    // bf16-weight peers, which the sweep and `Workspace::form` run.
    jobs.push(job(
        "moe_gemm1_w4a16_t",
        "E=bf16 BT=16 BN=64 BK=128",
        kernels::moe_gemm1_w4a16_t::kernel::<bf16, 16, 64, 128, 64, 8, 16, 32>(),
        g1d(16, true),
    ));
    jobs.push(job(
        "moe_gemm2_w4a16_t",
        "E=bf16 BT=16 BN=64 BK=128",
        kernels::moe_gemm2_w4a16_t::kernel::<bf16, 16, 64, 128, 64, 8, 16, 32>(),
        g2d(16, true),
    ));
    jobs.push(job(
        "moe_gemm1_dense_t",
        "E=bf16 BT=16 BN=64 BK=128",
        kernels::moe_gemm1_dense_t::kernel::<bf16, 16, 64, 128>(),
        g1d(16, false),
    ));
    jobs.push(job(
        "moe_gemm2_dense_t",
        "E=bf16 BT=16 BN=64 BK=128",
        kernels::moe_gemm2_dense_t::kernel::<bf16, 16, 64, 128>(),
        g2d(16, false),
    ));
    // The prefill row block (128 rows, `host::gemm_tiles`: GEMM 1 64 x 64, GEMM 2 128 x 64) over 8
    // worker warps, W4A16 and dense.
    let ids128 = || {
        vec![
            meta(I32, &[p128]),
            meta(I32, &[p128 / 128]),
            meta(I32, &[1]),
        ]
    };
    let mut g1w = vec![
        meta(BF16, &[t, h]),
        meta(I8, &[e, 2 * i, h / 2]),
        meta(I8, &[e, 2 * i, h / 16]),
        meta(F32, &[e]),
    ];
    g1w.extend(ids128());
    g1w.push(meta(BF16, &[p128, i]));
    jobs.push(job(
        "moe_gemm1_w4a16_w8",
        "E=bf16 BM=128 BN=64 BK=64 DEC=bits",
        kernels::moe_gemm1_w4a16_w8::kernel::<bf16, 128, 64, 64, 32, 4, 1>(),
        g1w,
    ));
    let mut d1w = vec![meta(BF16, &[t, h]), meta(BF16, &[e, 2 * i, h])];
    d1w.extend(ids128());
    d1w.push(meta(BF16, &[p128, i]));
    jobs.push(job(
        "moe_gemm1_dense_w8",
        "E=bf16 BM=128 BN=64 BK=64",
        kernels::moe_gemm1_dense_w8::kernel::<bf16, 128, 64, 64>(),
        d1w,
    ));
    let mut g2w = vec![
        meta(BF16, &[p128, i]),
        meta(I8, &[e, h, i / 2]),
        meta(I8, &[e, h, i / 16]),
        meta(F32, &[e]),
    ];
    g2w.extend(ids128());
    g2w.push(meta(F32, &[t * k]));
    g2w.push(meta(F32, &[t * k, h]));
    jobs.push(job(
        "moe_gemm2_w4a16_w8",
        "E=bf16 BM=128 BN=128 BK=64 DEC=bits",
        kernels::moe_gemm2_w4a16_w8::kernel::<bf16, 128, 128, 64, 32, 4, 1>(),
        g2w,
    ));
    let mut d2w = vec![meta(BF16, &[p128, i]), meta(BF16, &[e, h, i])];
    d2w.extend(ids128());
    d2w.push(meta(F32, &[t * k]));
    d2w.push(meta(F32, &[t * k, h]));
    jobs.push(job(
        "moe_gemm2_dense_w8",
        "E=bf16 BM=128 BN=128 BK=64",
        kernels::moe_gemm2_dense_w8::kernel::<bf16, 128, 128, 64>(),
        d2w,
    ));
    // The sorted (prefill) form at row block 128, which the host picks there, and at 64: the
    // permute and both persistent GEMMs (the NVFP4 weights' dequantize is `nvfp4_dequantize_folded`
    // above).
    let permute = |p: i64| {
        vec![
            meta(BF16, &[t, h]),
            meta(I32, &[p]),
            meta(I32, &[1]),
            meta(BF16, &[p, h]),
        ]
    };
    jobs.push(job(
        "moe_permute",
        "E=bf16 BM=128 BK=64",
        kernels::moe_permute::kernel::<bf16, 128, 64>(),
        permute(p128),
    ));
    jobs.push(job(
        "moe_permute",
        "E=bf16 BM=16 BK=64",
        kernels::moe_permute::kernel::<bf16, 16, 64>(),
        permute(p16),
    ));
    let sorted1 = |p: i64, blocks: i64| {
        vec![
            meta(BF16, &[p, h]),
            meta(BF16, &[e, 2, i, h]),
            meta(F32, &[e]),
            meta(I32, &[blocks]),
            meta(I32, &[1]),
            meta(BF16, &[p, i]),
        ]
    };
    let sorted2 = |p: i64, blocks: i64| {
        vec![
            meta(BF16, &[p, i]),
            meta(BF16, &[e, h, i]),
            meta(F32, &[e]),
            meta(I32, &[p]),
            meta(I32, &[blocks]),
            meta(I32, &[1]),
            meta(F32, &[t * k]),
            meta(F32, &[t * k, h]),
        ]
    };
    jobs.push(job(
        "moe_gemm1_sorted",
        "E=bf16 BM=128 BN=64 BK=64 FOLD=1",
        kernels::moe_gemm1_sorted::kernel::<bf16, 128, 64, 128, 64, 1>(),
        sorted1(p128, p128 / 128),
    ));
    jobs.push(job(
        "moe_gemm2_sorted",
        "E=bf16 BM=128 BN=64 BK=64 FOLD=1",
        kernels::moe_gemm2_sorted::kernel::<bf16, 128, 64, 64, 1>(),
        sorted2(p128, p128 / 128),
    ));
    jobs.push(job(
        "moe_permute",
        "E=bf16 BM=64 BK=64",
        kernels::moe_permute::kernel::<bf16, 64, 64>(),
        permute(p),
    ));
    jobs.push(job(
        "moe_gemm1_sorted",
        "E=bf16 BM=64 BN=64 BK=64 FOLD=0",
        kernels::moe_gemm1_sorted::kernel::<bf16, 64, 64, 128, 64, 0>(),
        sorted1(p, p / 64),
    ));
    jobs.push(job(
        "moe_gemm2_sorted",
        "E=bf16 BM=64 BN=128 BK=64 FOLD=0",
        kernels::moe_gemm2_sorted::kernel::<bf16, 64, 128, 64, 0>(),
        sorted2(p, p / 64),
    ));
    // The staged sorted form: GEMM 2's tiles stored in the aligned order (128 x 128 at row block
    // 128, 64 x 128 at 64), the pairs' aligned positions, and the combine that gathers them back.
    let staged2 = |p: i64, blocks: i64| {
        vec![
            meta(BF16, &[p, i]),
            meta(BF16, &[e, h, i]),
            meta(F32, &[e]),
            meta(I32, &[blocks]),
            meta(I32, &[1]),
            meta(F32, &[p, h]),
        ]
    };
    jobs.push(job(
        "moe_gemm2_staged",
        "E=bf16 BM=128 BN=128 BK=64 FOLD=1",
        kernels::moe_gemm2_staged::kernel::<bf16, 128, 128, 64, 1>(),
        staged2(p128, p128 / 128),
    ));
    jobs.push(job(
        "moe_gemm2_staged",
        "E=bf16 BM=128 BN=256 BK=64 FOLD=0 w8",
        kernels::moe_gemm2_staged::kernel::<bf16, 128, 256, 64, 0>().with_hint(
            "default",
            "num_worker_warps_per_cta",
            8,
        ),
        staged2(p128, p128 / 128),
    ));
    jobs.push(job(
        "moe_positions",
        "BM=256",
        kernels::moe_positions::kernel::<256>(),
        vec![meta(I32, &[p128]), meta(I32, &[1]), meta(I32, &[t * k])],
    ));
    jobs.push(job(
        "moe_combine_staged",
        "E=bf16 BT=8 BH=512",
        kernels::moe_combine_staged::kernel::<bf16, 8, 512>(),
        vec![
            meta(F32, &[p128, h]),
            meta(I32, &[t, k]),
            meta(F32, &[t, k]),
            meta(BF16, &[t, h]),
        ],
    ));
    jobs.push(job(
        "moe_silu_reduce",
        "E=bf16 BR=16 BC=64",
        kernels::moe_silu_reduce::kernel::<bf16, 16, 64>(),
        vec![
            meta(F32, &[2 * p16, 2 * i]),
            meta(I32, &[1]),
            meta(BF16, &[p16, i]),
        ],
    ));
    // The GPU alignment (E = 8 padded to 16 expert columns, block 16): histogram, plan, placement.
    let chunks = (t * k + 63) / 64;
    jobs.push(job(
        "moe_align_hist",
        "BT=64 EP=16",
        kernels::moe_align_hist::kernel::<64, 16>(),
        vec![meta(I32, &[t * k]), meta(I32, &[chunks, 16])],
    ));
    jobs.push(job(
        "moe_align_plan",
        "BM=16 EP=16 ER=1 CB=16 BB=64",
        kernels::moe_align_plan::kernel::<16, 16, 1, 16, 64>(),
        vec![
            meta(I32, &[chunks, 16]),
            meta(I32, &[16]),
            meta(I32, &[1]),
            meta(I32, &[p16 / 16]),
            meta(I32, &[p16]),
        ],
    ));
    jobs.push(job(
        "moe_align_scatter",
        "BT=64 EP=16 CB=16",
        kernels::moe_align_scatter::kernel::<64, 16, 16>(),
        vec![
            meta(I32, &[t * k]),
            meta(I32, &[chunks, 16]),
            meta(I32, &[16]),
            meta(I32, &[p16]),
        ],
    ));
    // The one-launch alignment of small calls (`host::align_in_one_launch`).
    jobs.push(job(
        "moe_align_fused",
        "BT=64 BM=16 EP=16 ER=1 BB=64",
        kernels::moe_align_fused::kernel::<64, 16, 16, 1, 64>(),
        vec![
            meta(I32, &[t * k]),
            meta(I32, &[1]),
            meta(I32, &[p16 / 16]),
            meta(I32, &[p16]),
        ],
    ));
    jobs.push(job(
        "moe_route",
        "L=f32 MODE=sigmoid_bias BT=16 EP=64 KP=8",
        kernels::moe_route::kernel::<f32, { kernels::SIGMOID_BIAS }, 16, 64, 8, 1, 64>(),
        vec![
            meta(F32, &[t, 64]),
            meta(F32, &[64]),
            meta(I32, &[t, 8]),
            meta(F32, &[t, 8]),
        ],
    ));
    // DeepSeek-V3's router: 256 experts in 8 groups (4 kept), top-8.
    jobs.push(job(
        "moe_route",
        "L=bf16 MODE=sigmoid_bias BT=8 EP=256 KP=8 GR=8 GS=32",
        kernels::moe_route::kernel::<bf16, { kernels::SIGMOID_BIAS }, 8, 256, 8, 8, 32>(),
        vec![
            meta(BF16, &[t, 256]),
            meta(F32, &[256]),
            meta(I32, &[t, 8]),
            meta(F32, &[t, 8]),
        ],
    ));
    jobs.push(job(
        "moe_combine",
        "E=bf16 BT=8 BH=512",
        kernels::moe_combine::kernel::<bf16, 8, 512>(),
        vec![meta(F32, &[t, k, h]), meta(BF16, &[t, h])],
    ));
    jobs.extend(blackwell_jobs());
    jobs
}

/// The Blackwell path ([`scaled`]): the row quantizer of the activations and both block-scaled GEMMs
/// at 128-row blocks, `BN` 64, `BK` 128 (64 packed bytes and 8 scales per row and step), for sm_100
/// and newer only (tileiras has no e2m1 type before sm_100). The tile is what the tensor cores take:
/// in the sm_100a SASS (`nvdisasm` of tileiras 13.5.37's cubins) `128 x 64 x 128` lowers `mmaf_scaled`
/// to `UTCOMMA` (tcgen05 block-scaled MMA) with no spills, while 64-row tiles and 128-wide N tiles
/// fall back to `FFMA` loops with local-memory spills; sm_120a uses `OMMA.SF.16864.F32.E2M1.E2M1.UE4M3`
/// at every tile, and spills only at `128 x 128`. Same small layer as [`compile_jobs`].
pub fn blackwell_jobs() -> Vec<CompileJob> {
    use cutile::toolchain::GpuArch;
    use half::bf16;
    let (t, h, i, e, k) = (256i64, 1024i64, 512i64, 8i64, 2i64);
    const BM: i32 = scaled::TILE.0;
    const BN: i32 = scaled::TILE.1;
    const BK: i32 = scaled::TILE.2;
    let (bm, bn, bk) = scaled::TILE;
    let p = crate::moe::reference::max_padded((t * k) as usize, e as usize, bm as usize) as i64;
    let ids = [
        meta(I32, &[p]),
        meta(I32, &[p / bm as i64]),
        meta(I32, &[1]),
    ];
    let job = |name: &'static str, k: cutile::dsl::Kernel, m: Vec<TensorMeta>| {
        let spec = format!("BM={bm} BN={bn} BK={bk}");
        CompileJob::dsl(name, spec, k, m).from_arch(GpuArch::Sm100)
    };
    let mut g1 = vec![
        meta(I8, &[t, h / 2]),
        meta(I8, &[t, h / 16]),
        meta(F32, &[t]),
        meta(I8, &[e, 2 * i, h / 2]),
        meta(I8, &[e, 2 * i, h / 16]),
        meta(F32, &[e]),
    ];
    g1.extend(ids.clone());
    g1.push(meta(BF16, &[p, i]));
    let mut g2 = vec![
        meta(I8, &[p, i / 2]),
        meta(I8, &[p, i / 16]),
        meta(F32, &[p]),
        meta(I8, &[e, h, i / 2]),
        meta(I8, &[e, h, i / 16]),
        meta(F32, &[e]),
    ];
    g2.extend(ids);
    g2.push(meta(F32, &[t * k]));
    g2.push(meta(F32, &[t * k, h]));
    vec![
        job(
            "nvfp4_quantize_rows",
            scaled::kernels::nvfp4_quantize_rows::kernel::<bf16, 16, 256, 128, 16>(),
            vec![
                meta(BF16, &[p, i]),
                meta(I8, &[p, i / 2]),
                meta(I8, &[p, i / 16]),
                meta(F32, &[p]),
            ],
        ),
        job(
            "moe_gemm1_fp4",
            scaled::kernels::moe_gemm1_fp4::kernel::<bf16, BM, BN, BK, { BK / 2 }, { BK / 16 }>(),
            g1,
        ),
        job(
            "moe_gemm2_fp4",
            scaled::kernels::moe_gemm2_fp4::kernel::<BM, BN, BK, { BK / 2 }, { BK / 16 }>(),
            g2,
        ),
    ]
}
