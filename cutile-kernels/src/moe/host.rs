//! The family's host functions over runtime tensors: NVFP4 quantize / dequantize, top-k routing, and
//! one MoE layer (W4A16 or dense weights) given the routing's aligned order. Shapes are checked (typed
//! [`OpError`]s, never a panic); each function queues its launches on `stream` and waits.
//!
//! The layer's form and tiles are chosen here from the routing's row block ([`row_block`],
//! [`gemm_tiles`], [`default_form`]: the decode form, weights on the MMA's M side, for row block 16);
//! its intermediates (`h`, `y`, the alignment's histogram) live in a caller-owned [`Workspace`]
//! reused across calls (the quantizer's `part` is still allocated per call: it runs once per model
//! load). These are not yet planned ops over `op::scratch` (see `docs/moe.md`).

use cutile::core::{BitWidth, Float, MmaOperand};
use cutile::runtime::{DeviceElement, Stream, Tensor, TensorView, TensorViewMut};

use super::kernels;
use super::reference::BLOCK;
use crate::op::{OpError, ceil_div};

/// The activation types of the family: bf16 and f16.
pub trait MoeElem:
    Float + MmaOperand<f32> + DeviceElement + BitWidth<Bits = cutile::core::bitcast::width::W16>
{
    /// [`DequantKernel::Groups`] of `w: [.., K/2]`, `s: [.., K/16]` into `y` (contiguous, `16 ·
    /// s.numel()` elements); `Ok(false)` where the type has no such kernel (f16) or the tensor has
    /// 2^30 scale groups or more, so the caller takes [`DequantKernel::Tiles`].
    fn dequantize_groups(
        _stream: &Stream,
        _w: &TensorView<'_, i8>,
        _s: &TensorView<'_, i8>,
        _y: &mut TensorViewMut<'_, Self>,
        _rows: i64,
    ) -> Result<bool, OpError> {
        Ok(false)
    }
}
impl MoeElem for half::bf16 {
    fn dequantize_groups(
        stream: &Stream,
        w: &TensorView<'_, i8>,
        s: &TensorView<'_, i8>,
        y: &mut TensorViewMut<'_, Self>,
        rows: i64,
    ) -> Result<bool, OpError> {
        const OP: &str = "nvfp4_dequantize_folded";
        let groups = s.numel();
        let halves = 2 * groups;
        // The kernel indexes half groups in i32; larger tensors take `Tiles` (per-expert indices).
        if halves > i64::from(i32::MAX) {
            return Ok(false);
        }
        let mut y = y.reborrow().reshape(&[halves, 8])?;
        let (w, s) = (w.reshape(&[halves, 4])?, s.reshape(&[groups])?);
        let grid = (u32_of(OP, ceil_div(halves, 2 * rows))?, 1, 1);
        match rows {
            128 => kernels::nvfp4_dequantize_groups::<256>(&w, &s, &mut y)
                .grid(grid)
                .launch(stream)?,
            256 => kernels::nvfp4_dequantize_groups::<512>(&w, &s, &mut y)
                .grid(grid)
                .launch(stream)?,
            512 => kernels::nvfp4_dequantize_groups::<1024>(&w, &s, &mut y)
                .grid(grid)
                .launch(stream)?,
            1024 => kernels::nvfp4_dequantize_groups::<2048>(&w, &s, &mut y)
                .grid(grid)
                .launch(stream)?,
            _ => {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!("{rows} scale groups per block (128, 256, 512 or 1024)"),
                });
            }
        }
        Ok(true)
    }
}
impl MoeElem for half::f16 {}

/// The kernel that writes the folded bf16/f16 copy of NVFP4 weights ([`Form::Sorted`] and its staged
/// twin; [`nvfp4_dequantize_folded`]): `Tiles`, `64 x 128` tiles of `[G, N, K]` with the even and odd
/// columns interleaved by a relayout; `Groups { rows }`, bf16 only (f16 takes `Tiles`), the weights
/// flattened into scale groups of 16 and each byte decoded into one word of two bf16, `rows` groups
/// (128, 256, 512 or 1024) per block, one thread per half group (no shared memory on sm_90, where
/// `Tiles` relayouts through 33.8 KB per block). Same values bit for bit; which one runs nearer copy
/// bandwidth was a device measurement (`nvfp4_moe` times both; [`DEFAULT_DEQUANT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequantKernel {
    Tiles,
    Groups { rows: i64 },
}

/// The kernel [`moe_layer`] dequantizes with unless [`Workspace::dequant`] names another. H200
/// (session 25, `docs/moe.md`): 512 groups per block moved the Mixtral W13 at 3557 GB/s against
/// `Tiles`' 2600 (a device copy of the same bf16 bytes: 4245), the fastest of the four widths at both
/// layers timed; f16 still takes `Tiles`.
pub const DEFAULT_DEQUANT: DequantKernel = DequantKernel::Groups { rows: 512 };

/// The dequantization kernels the `nvfp4_moe` example times against each other.
pub const DEQUANT_KERNELS: [DequantKernel; 5] = [
    DequantKernel::Tiles,
    DequantKernel::Groups { rows: 128 },
    DequantKernel::Groups { rows: 256 },
    DequantKernel::Groups { rows: 512 },
    DequantKernel::Groups { rows: 1024 },
];

/// The row block of [`moe_layer`]'s callers before the host picked it ([`row_block`]); any of
/// [`ROW_BLOCKS`] works.
pub const BM: i64 = 64;
const QBR: i64 = 16;
const QBK: i64 = 256;
const DBN: i64 = 64;
const DBK: i64 = 128;

fn shape_err(op: &'static str, what: &str, got: &[i64], want: &[i64]) -> OpError {
    OpError::Shape {
        op,
        what: what.into(),
        left: format!("{got:?}"),
        right: format!("{want:?}"),
    }
}

fn expect(op: &'static str, name: &str, got: &[i64], want: &[i64]) -> Result<(), OpError> {
    if got == want {
        Ok(())
    } else {
        Err(shape_err(
            op,
            &format!("`{name}` has the wrong shape"),
            got,
            want,
        ))
    }
}

fn u32_of(op: &'static str, v: i64) -> Result<u32, OpError> {
    u32::try_from(v.max(1)).map_err(|_| OpError::Unsupported {
        op,
        what: format!("{v} blocks exceed the grid"),
    })
}

/// NVFP4-quantizes `x: [G, R, K]` per group (one global scale per group; `K` a multiple of 256):
/// `q: [G, R, K/2]` bytes, `s: [G, R, K/16]` e4m3 bytes, `global: [G]`. Two launches: per-tile
/// absolute maxima, then scales and codes.
pub fn nvfp4_quantize<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    q: &mut Tensor<i8>,
    s: &mut Tensor<i8>,
    global: &mut Tensor<f32>,
) -> Result<(), OpError> {
    const OP: &str = "nvfp4_quantize";
    let sh = x.shape().to_vec();
    if sh.len() != 3 {
        return Err(OpError::Rank {
            op: OP,
            arg: "x",
            expected: "3 ([groups, rows, K])".into(),
            shape: sh,
        });
    }
    let (g, r, k) = (sh[0], sh[1], sh[2]);
    if k % QBK != 0 {
        return Err(shape_err(OP, "K must be a multiple of 256", &[k], &[QBK]));
    }
    expect(OP, "q", q.shape(), &[g, r, k / 2])?;
    expect(OP, "s", s.shape(), &[g, r, k / BLOCK as i64])?;
    expect(OP, "global", global.shape(), &[g])?;
    if g * r * k == 0 {
        return Ok(());
    }
    let tiles = ceil_div(r, QBR) * (k / QBK);
    let mut part = Tensor::<f32>::zeros(stream.device(), &[g, tiles])?;
    let grid = (u32_of(OP, tiles)?, u32_of(OP, g)?, 1);
    kernels::nvfp4_amax::<E, 16, 256>(x, &mut part)
        .grid(grid)
        .launch(stream)?;
    kernels::nvfp4_quantize::<E, 16, 256, 128, 16>(x, &part, q, s, global)
        .grid(grid)
        .launch(stream)?;
    Ok(())
}

/// `(G, N, K)` of a dequantization into `y: [G, N, K]` from NVFP4 `w: [G, N, K/2]`, `s: [G, N, K/16]`
/// (`K` a multiple of 32), or the typed error naming the argument that does not fit.
fn dequant_dims(
    op: &'static str,
    w: &Tensor<i8>,
    s: &Tensor<i8>,
    y: &[i64],
) -> Result<(i64, i64, i64), OpError> {
    if y.len() != 3 {
        return Err(OpError::Rank {
            op,
            arg: "y",
            expected: "3 ([groups, rows, K])".into(),
            shape: y.to_vec(),
        });
    }
    let (g, n, k) = (y[0], y[1], y[2]);
    if k % (2 * BLOCK as i64) != 0 {
        return Err(shape_err(op, "K must be a multiple of 32", &[k], &[32]));
    }
    expect(op, "w", w.shape(), &[g, n, k / 2])?;
    expect(op, "s", s.shape(), &[g, n, k / BLOCK as i64])?;
    Ok((g, n, k))
}

/// Dequantizes NVFP4 `w: [G, N, K/2]`, `s: [G, N, K/16]`, `global: [G]` into `y: [G, N, K]`.
pub fn nvfp4_dequantize<E: MoeElem>(
    stream: &Stream,
    w: &Tensor<i8>,
    s: &Tensor<i8>,
    global: &Tensor<f32>,
    y: &mut Tensor<E>,
) -> Result<(), OpError> {
    const OP: &str = "nvfp4_dequantize";
    let (g, n, k) = dequant_dims(OP, w, s, y.shape())?;
    expect(OP, "global", global.shape(), &[g])?;
    if g * n * k == 0 {
        return Ok(());
    }
    let tiles = ceil_div(n, DBN) * ceil_div(k, DBK);
    kernels::nvfp4_dequantize::<E, 64, 128, 64, 8>(w, s, global, y)
        .grid((u32_of(OP, tiles)?, u32_of(OP, g)?, 1))
        .launch(stream)?;
    Ok(())
}

/// The expert weights of a layer.
#[derive(Debug)]
pub enum Weights<'a, E: MoeElem> {
    /// NVFP4: `w13: [E, 2I, H/2]`, `s13: [E, 2I, H/16]`, `g13: [E]`, `w2: [E, H, I/2]`,
    /// `s2: [E, H, I/16]`, `g2: [E]`.
    Nvfp4 {
        w13: &'a Tensor<i8>,
        s13: &'a Tensor<i8>,
        g13: &'a Tensor<f32>,
        w2: &'a Tensor<i8>,
        s2: &'a Tensor<i8>,
        g2: &'a Tensor<f32>,
    },
    /// Dense: `w13: [E, 2I, H]`, `w2: [E, H, I]`.
    Dense {
        w13: &'a Tensor<E>,
        w2: &'a Tensor<E>,
    },
}

/// The routing of a layer in the aligned order of `moe_align_block_size` with a row block `BM` of
/// [`ROW_BLOCKS`] (the GEMMs' M tile; read off the shapes: `BM = P / expert_ids.len()`):
/// `sorted_ids: [P]` pair ids (`t·k + j`; padding rows `T·k`), `expert_ids: [P / BM]`, `total: [1]`
/// (the padded rows used), `weights: [T·k]` or `[T, k]` the routed weights (f32, as `moe_route`
/// writes them), `topk` = k.
#[derive(Debug)]
pub struct Routing<'a> {
    pub sorted_ids: &'a Tensor<i32>,
    pub expert_ids: &'a Tensor<i32>,
    pub total: &'a Tensor<i32>,
    pub weights: &'a Tensor<f32>,
    pub topk: i32,
}

/// The row blocks (GEMM M tiles) the layer has kernels for.
pub const ROW_BLOCKS: [i64; 4] = [16, 32, 64, 128];

/// The row block the host picks for `pairs = T·k` routed pairs over `experts` experts, from the mean
/// rows per hit expert: 16 up to 12 rows (decode: an expert sees a handful of rows), 32 up to 48, 64
/// below 192, else 128 (prefill). 32 from 13 rows on because an expert whose rows pass 16 needs a
/// second 16-row block, which decodes its weights again: at a mean of 16 (Mixtral T = 64) the
/// decode form ran 1.46× faster at block 32 (666.5 against 969.9 µs, H200 session 11), at a mean of
/// 4 (T = 16) 1.13× slower (664.7 against 585.6 µs).
pub fn row_block(pairs: i64, experts: i64) -> i64 {
    let hit = pairs.min(experts).max(1);
    let mean = pairs / hit;
    match mean {
        ..=12 => 16,
        13..=48 => 32,
        49..=191 => 64,
        _ => 128,
    }
}

/// The tiles of the two GEMMs for row block `bm`, `H = h`, `I = i`: `(BN, BK)` of GEMM 1 and of
/// GEMM 2. Decode blocks (16, 32) take K = 128 per step where K (`H` for GEMM 1, `I` for GEMM 2)
/// allows it: twice the weight bytes per load and half the loop trips, while the grid keeps `I / 64`
/// and `H / 64` column tiles per expert block to fill the SMs. Prefill (128) takes a 128-wide N tile
/// in GEMM 2 (one accumulator) where `H` allows it; GEMM 1 keeps 64 because it holds two.
pub fn gemm_tiles(bm: i64, h: i64, i: i64) -> ((i64, i64), (i64, i64)) {
    let k128 = |k: i64| if k % 128 == 0 { 128 } else { 64 };
    match bm {
        16 | 32 => ((64, k128(h)), (64, k128(i))),
        128 => ((64, 64), (if h % 128 == 0 { 128 } else { 64 }, 64)),
        _ => ((64, 64), (64, 64)),
    }
}

/// The K splits of GEMM 2 on a GPU with `sms` SMs when it launches about `ctas` (row block, column
/// tile) pairs over `k_tiles` K steps: 1 when the pairs already fill two waves, else enough splits to
/// reach two waves, at most 8 and keeping at least 4 K steps per split. Each split writes its own f32
/// rows of `y` (`[T·k·S, H]`, routed weight applied) and `moe_combine` sums slots and splits in a fixed
/// order: deterministic, no atomics. (Decode of a wide layer: Mixtral at T = 1 hits 2 experts, so GEMM
/// 2 has 2 blocks × 64 column tiles, each walking K = 14336.)
pub fn k_splits(sms: i64, ctas: i64, k_tiles: i64) -> i64 {
    let target = 2 * sms.max(1);
    if ctas >= target {
        return 1;
    }
    ceil_div(target, ctas.max(1)).min(8).min(k_tiles / 4).max(1)
}

/// The GEMM form of a layer call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Rows of the aligned order on the MMA's M side (`BM` = the row block), weights on its N side
    /// ([`gemm_tiles`]); the W4A16 GEMMs decode with `codec::e2m1_decode` (integer ops, an i32 → f32
    /// conversion, f32 multiplies and an f32 → bf16/f16 conversion per element). Every row block.
    Rows,
    /// [`Form::Rows`] with the bit-pattern decode of the decode form (`codec::e2m1_bits`: four `i16`
    /// ops and one multiplication in bf16/f16 per element, no conversion). Every row block; prefill.
    RowsBits,
    /// The decode form, for row blocks 16 and 32 ([`forms`]): the weights on the MMA's M side (`bn`
    /// weight rows per CTA, 8 worker warps when `bn` is 128), the row block's rows of the aligned
    /// order (permuted once by `moe_permute`) on its N side, `bk` of K per step in both GEMMs, the
    /// word decode (`dsl::words`: two e2m1 weights per 32-bit integer op), and split-K of either GEMM
    /// when its grid is short ([`k_splits`]; GEMM 1's partial sums are reduced with the SiLU·up step
    /// by `moe_silu_reduce`).
    Decode {
        /// Weight rows per CTA: 64 or 128.
        bn: i64,
        /// K per step: 128 or 256.
        bk: i64,
        /// CTAs per SM that tileiras sizes registers and stages for (the `occupancy` hint; 0: no
        /// hint, one CTA per SM at these tiles). The 4-warp tiles (`bn` 64) take 2 or 3: sm_90 puts
        /// them in 128 or 80 registers without spills, so independent CTAs hide each other's decode
        /// and `wgmma` waits, where one CTA of 255 registers per SM (no hint) has only its own warps.
        /// Not picked: on the H200 (session 23, Mixtral) the best of them, BN 64 BK 256 at 2 CTAs,
        /// took 222.8 and 599.8 µs at T = 1 and 16 against 211.7 and 564.4 for 128 x 256 without it.
        occupancy: i64,
    },
    /// The prefill form, row blocks 64 and 128: the rows of `x` gathered once into the aligned
    /// order (`moe_permute`), then two persistent GEMMs over the used row blocks only (read off
    /// `total` on the device), in grouped tile order, with view (TMA) loads of both operands and no
    /// split-K (`moe_gemm1_sorted`, `moe_gemm2_sorted`: the structure of the GEMM family's persistent
    /// kernel). Both weight kinds run the dense kernels: NVFP4 weights are dequantized once per call
    /// into the [`Workspace`] (`E · 2I · H` elements of the activation type, W13's then W2's in the
    /// same buffer), a cost amortized over a prefill's many rows per expert and not over a decode's.
    Sorted,
    /// The prefill form without the dequantized copy, row block 128 where 128 divides `H`: `x`'s
    /// rows permuted into the aligned order (`moe_permute`), then the decode form's swapped product
    /// and word decode at 128 rows per block (the weights on the MMA's M side as register operands,
    /// the rows on its N side through views), `bk` of K per step, 8 worker warps, no split-K, grids
    /// with the column tiles fastest so the blocks in flight share a few row blocks and their
    /// experts' weights in L2. GEMM 1 (`moe_gemm1_w4a16_p8`) stacks the gate and up rows of 64
    /// columns of `h` into one 128-row operand; GEMM 2 (`moe_gemm2_w4a16_p8`) takes 128 columns of
    /// `y`. Each expert's weights are decoded once per row block that uses it instead of once per
    /// call, and never written out: the trade against [`Form::Sorted`] where experts get few row
    /// blocks each (many experts, e.g. 128 experts top-8 at T = 4096: two blocks per expert).
    /// Dense weights need no decode, so with them this form runs [`Form::Sorted`]'s kernels.
    /// Not picked: on the H200 (session 23, T = 4096) it ran slower than [`Form::Sorted`]'s
    /// dequantize-then-GEMM at both layers, 2153 against 1737 µs (128 experts top-8, BK 256) and
    /// 13548 against 7869 µs (Mixtral), GEMM 1 alone 1293 against 944 µs at 128 experts.
    InKernel {
        /// K per step: 128 or 256.
        bk: i64,
    },
    /// [`Form::Sorted`] with GEMM 2's tiles stored as they are into `y: [P, H]` f32 in the aligned
    /// order (`moe_gemm2_staged`, persistent, grouped order; row block 128 only), and the combine
    /// applying the routed weights while it gathers each pair's row back through the pair's aligned
    /// position (`moe_positions`, `moe_combine_staged`). `moe_gemm2_sorted` scatters rows to
    /// `y[sorted_ids[r]]` with the routed weights gathered by pair, and with that epilogue tileiras
    /// 13.5.37 waits for every K step's `wgmma`s (sm_90 SASS); with the tile store the K loop keeps a
    /// step in flight, and wider tiles fit (the scattered `128 x 128` spilled).
    SortedStaged {
        /// Columns per tile: 128 (4 worker warps) or 256 (8), dividing `H`.
        bn: i64,
    },
}

/// The row blocks [`Form::Sorted`] has kernels for.
pub const SORTED_ROW_BLOCKS: [i64; 2] = [64, 128];

/// The K steps of [`Form::InKernel`] (row block 128).
pub const IN_KERNEL_BK: [i64; 2] = [128, 256];

/// The tile widths of [`Form::SortedStaged`] (row block 128).
pub const STAGED_BN: [i64; 2] = [128, 256];

/// The `(bn, bk, occupancy)` tiles of the decode form the layer has kernels for: the four tiles
/// without a hint, and the 4-warp ones at 2 (BK 128 and 256) and 3 CTAs per SM (BK 128: at 256 its
/// sm_90 build spills 304 bytes).
pub const DECODE_TILES: [(i64, i64, i64); 7] = [
    (64, 128, 0),
    (128, 128, 0),
    (64, 256, 0),
    (128, 256, 0),
    (64, 128, 2),
    (64, 256, 2),
    (64, 128, 3),
];

/// The `(bn, bk, occupancy)` tiles of the decode form at row block 32: the two defaults of row block
/// 16 and the 4-warp one at 2 CTAs per SM (at 3 its sm_90 build spills 144 bytes).
pub const DECODE_TILES_32: [(i64, i64, i64); 3] = [(64, 128, 0), (128, 256, 0), (64, 128, 2)];

/// The forms a layer with row block `bm`, `H = h`, `I = i` can run: [`Form::Rows`] and
/// [`Form::RowsBits`] always; [`Form::Sorted`] for the row blocks of [`SORTED_ROW_BLOCKS`]; for
/// `bm == 16` also every [`DECODE_TILES`] entry whose `bn` divides `H` and `I`, for `bm == 32` every
/// [`DECODE_TILES_32`] one (the example's sweep times them all).
pub fn forms(bm: i64, h: i64, i: i64) -> Vec<Form> {
    let mut v = vec![Form::Rows, Form::RowsBits];
    if SORTED_ROW_BLOCKS.contains(&bm) {
        v.push(Form::Sorted);
    }
    if bm == 128 {
        v.extend(
            STAGED_BN
                .into_iter()
                .filter(|bn| h % bn == 0)
                .map(|bn| Form::SortedStaged { bn }),
        );
    }
    if bm == 128 && h % 128 == 0 {
        v.extend(IN_KERNEL_BK.map(|bk| Form::InKernel { bk }));
    }
    let tiles: &[(i64, i64, i64)] = match bm {
        16 => &DECODE_TILES,
        32 => &DECODE_TILES_32,
        _ => &[],
    };
    v.extend(
        tiles
            .iter()
            .filter(|(bn, _, _)| h % bn == 0 && i % bn == 0)
            .map(|&(bn, bk, occupancy)| Form::Decode { bn, bk, occupancy }),
    );
    v
}

/// The form the host picks for row block `bm` of a layer with `H = h`, `I = i`: for `bm` 16 and 32
/// the decode form with 128 weight rows over 8 worker warps and K = 256 per step when 128 divides `H`
/// and `I`, else 64 rows and K = 128 (H200 sweeps: session 8, where the rows forms lost to it, and
/// session 11 with the word decode, where 128 x 256 was the fastest of the four tiles at every
/// Mixtral and E 128 decode row, e.g. T = 16: 585.6 µs against 699.8-868.8); [`Form::Sorted`] for row
/// block 128 (prefill: the rows forms' gathered activations and row-major block order ran Mixtral T =
/// 4096 at 0.075× torch's cuBLAS loop on the H200, session 9), staged with 128-wide GEMM 2 tiles
/// ([`Form::SortedStaged`]) when 128 divides `H`: session 23 on the H200, T = 4096, GEMM 2 took 1864
/// µs staged against 3551 scattered (Mixtral) and 454 against 705 (128 experts top-8), the layer 6234
/// against 7869 and 1575 against 1737 µs; 128-wide tiles ran GEMM 2 faster than 256-wide ones at
/// both layers (1864 / 1963, 454 / 466 µs); [`Form::RowsBits`] for 64 (fewer ops per weight than
/// [`Form::Rows`]; an estimate).
pub fn default_form(bm: i64, h: i64, i: i64) -> Form {
    match bm {
        128 if h % 128 == 0 => Form::SortedStaged { bn: 128 },
        128 => Form::Sorted,
        16 | 32 if h % 128 == 0 && i % 128 == 0 => Form::Decode {
            bn: 128,
            bk: 256,
            occupancy: 0,
        },
        16 | 32 => Form::Decode {
            bn: 64,
            bk: 128,
            occupancy: 0,
        },
        _ => Form::RowsBits,
    }
}

/// The shape of GEMM 2's f32 output `y` for a layer call, `[T·k·S, H]` with `S` the K splits the
/// host picks for `form` (`None`: [`default_form`]; for [`moe_gemm2`] and [`moe_combine`] called as
/// stages).
pub fn gemm2_out_shape<E: MoeElem>(
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    form: Option<Form>,
) -> Result<[i64; 2], OpError> {
    let d = check_layer("moe_gemm2", x, weights, routing, None, form)?;
    Ok([d.y_rows(), d.h])
}

/// Device buffers an aligned layer reuses from call to call (the intermediates `h: [P, I]` and
/// `y: [T·k, H]`, the alignment's histogram and expert starts): reallocated only when a shape changes,
/// so repeated calls of one shape allocate nothing. One per stream (its buffers are used in stream
/// order).
#[derive(Debug)]
pub struct Workspace<E: MoeElem> {
    /// The form to run instead of the host's pick ([`default_form`]); a form the routing's row block
    /// cannot run ([`forms`]) is refused with a typed error. For sweeps and tests.
    pub form: Option<Form>,
    /// The kernel that dequantizes NVFP4 weights for the sorted forms instead of
    /// [`DEFAULT_DEQUANT`]. For sweeps and tests.
    pub dequant: Option<DequantKernel>,
    h: Option<Tensor<E>>,
    y: Option<Tensor<f32>>,
    counts: Option<Tensor<i32>>,
    start: Option<Tensor<i32>>,
    scratch: Scratch<E>,
}

/// The sorted forms' dequantized NVFP4 weights: `[E · 2I · H]` flat (W13's, then W2's in the first
/// `E · H · I`), and the kernel that writes them (the call's [`Workspace::dequant`]).
#[derive(Debug)]
struct Dequantized<E: MoeElem> {
    buf: Option<Tensor<E>>,
    kernel: DequantKernel,
}

/// The workspace buffers the GEMM launches (re)allocate as a form needs them, a field apart from `h`
/// and `y` so a launch can hold both.
#[derive(Debug)]
struct Scratch<E: MoeElem> {
    /// The decode form's split-K partial sums of GEMM 1.
    part: Option<Tensor<f32>>,
    /// [`Form::Sorted`], [`Form::InKernel`] and [`Form::Decode`]: `x`'s rows in the aligned order,
    /// `[P, H]`.
    xs: Option<Tensor<E>>,
    /// [`Form::Sorted`] with NVFP4 weights: the dequantized weights and the kernel that writes them.
    wd: Dequantized<E>,
    /// [`Form::SortedStaged`]: each pair's row in the aligned order, `[T, k]`.
    pos: Option<Tensor<i32>>,
}

impl<E: MoeElem> Default for Workspace<E> {
    fn default() -> Self {
        Workspace {
            form: None,
            dequant: None,
            h: None,
            y: None,
            counts: None,
            start: None,
            scratch: Scratch {
                part: None,
                xs: None,
                wd: Dequantized {
                    buf: None,
                    kernel: DEFAULT_DEQUANT,
                },
                pos: None,
            },
        }
    }
}

/// `slot`'s tensor of `shape`, allocated when it is missing or of another shape.
fn reuse<'a, T: DeviceElement>(
    slot: &'a mut Option<Tensor<T>>,
    stream: &Stream,
    shape: &[i64],
) -> Result<&'a mut Tensor<T>, OpError> {
    if slot.as_ref().is_none_or(|t| t.shape() != shape) {
        *slot = None;
        *slot = Some(Tensor::<T>::zeros(stream.device(), shape)?);
    }
    Ok(slot.as_mut().expect("set above"))
}

/// The checked facts of one layer call.
#[derive(Debug, Clone, Copy)]
struct Dims {
    t: i64,
    h: i64,
    i: i64,
    k: i64,
    p: i64,
    bm: i64,
    /// K splits of GEMM 2 ([`k_splits`]).
    splits: i64,
    /// The form and GEMM 1's K splits (1 in [`Form::Rows`]).
    form: Form,
    splits1: i64,
}

impl Dims {
    /// The rows of GEMM 2's f32 output: `P` in the aligned order for [`Form::SortedStaged`], else
    /// `T·k·S` (pair-major, one row per K split).
    fn y_rows(&self) -> i64 {
        match self.form {
            Form::SortedStaged { .. } => self.p,
            _ => self.t * self.k * self.splits,
        }
    }
}

/// Every shape check of a layer call, in one place: `x`, the weights of either kind, the routing and
/// (when given) `out`.
fn check_layer<E: MoeElem>(
    op: &'static str,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    out: Option<&[i64]>,
    form: Option<Form>,
) -> Result<Dims, OpError> {
    let xs = x.shape().to_vec();
    if xs.len() != 2 {
        return Err(OpError::Rank {
            op,
            arg: "x",
            expected: "2 ([T, H])".into(),
            shape: xs,
        });
    }
    let (t, h) = (xs[0], xs[1]);
    let w13s = match weights {
        Weights::Nvfp4 { w13, .. } => w13.shape(),
        Weights::Dense { w13, .. } => w13.shape(),
    };
    if w13s.len() != 3 {
        return Err(OpError::Rank {
            op,
            arg: "w13",
            expected: "3 ([E, 2I, ...])".into(),
            shape: w13s.to_vec(),
        });
    }
    let (ne, i2) = (w13s[0], w13s[1]);
    let i = i2 / 2;
    if h % 64 != 0 || i % 64 != 0 || i2 != 2 * i || ne < 1 {
        return Err(shape_err(
            op,
            "H and I must be multiples of 64 and E at least 1",
            &[h, i, ne],
            &[64, 64, 1],
        ));
    }
    let named: Vec<(&str, &[i64], Vec<i64>)> = match weights {
        Weights::Nvfp4 {
            w13,
            s13,
            g13,
            w2,
            s2,
            g2,
        } => vec![
            ("w13", w13.shape(), vec![ne, 2 * i, h / 2]),
            ("s13", s13.shape(), vec![ne, 2 * i, h / 16]),
            ("g13", g13.shape(), vec![ne]),
            ("w2", w2.shape(), vec![ne, h, i / 2]),
            ("s2", s2.shape(), vec![ne, h, i / 16]),
            ("g2", g2.shape(), vec![ne]),
        ],
        Weights::Dense { w13, w2 } => vec![
            ("w13", w13.shape(), vec![ne, 2 * i, h]),
            ("w2", w2.shape(), vec![ne, h, i]),
        ],
    };
    for (name, got, want) in &named {
        expect(op, name, got, want)?;
    }
    let k = i64::from(routing.topk);
    if k < 1 || k > ne {
        return Err(OpError::Unsupported {
            op,
            what: format!("top-k {k} must be in 1..={ne}"),
        });
    }
    let p = routing.sorted_ids.shape().first().copied().unwrap_or(0);
    let blocks = routing.expert_ids.shape().first().copied().unwrap_or(0);
    let bm = if blocks > 0 && p % blocks == 0 {
        p / blocks
    } else {
        0
    };
    if !ROW_BLOCKS.contains(&bm) {
        return Err(shape_err(
            op,
            "`sorted_ids` must hold `expert_ids.len()` blocks of 16, 32, 64 or 128 rows",
            &[p, blocks],
            &ROW_BLOCKS,
        ));
    }
    expect(op, "sorted_ids", routing.sorted_ids.shape(), &[p])?;
    expect(op, "expert_ids", routing.expert_ids.shape(), &[blocks])?;
    expect(op, "total", routing.total.shape(), &[1])?;
    if routing.weights.shape() != [t, k] {
        expect(op, "weights", routing.weights.shape(), &[t * k])?;
    }
    if let Some(o) = out {
        expect(op, "out", o, &[t, h])?;
    }
    let form = form.unwrap_or(default_form(bm, h, i));
    if !forms(bm, h, i).contains(&form) {
        return Err(OpError::Unsupported {
            op,
            what: format!("form {form:?} with row block {bm}, H {h}, I {i}"),
        });
    }
    let blocks_est = (p / bm).min(ceil_div(t * k, bm) + (t * k).min(ne));
    let sms = i64::from(x.device().sm_count());
    let (splits, splits1) = match form {
        Form::Rows | Form::RowsBits => {
            let (_, (bn2, bk2)) = gemm_tiles(bm, h, i);
            (k_splits(sms, blocks_est * (h / bn2), ceil_div(i, bk2)), 1)
        }
        Form::Decode {
            bn, bk, occupancy, ..
        } => {
            // A wave is `occupancy` CTAs per SM.
            let slots = sms * occupancy.max(1);
            (
                k_splits(slots, blocks_est * (h / bn), ceil_div(i, bk)),
                k_splits(slots, blocks_est * (i / bn), ceil_div(h, bk)),
            )
        }
        Form::Sorted | Form::SortedStaged { .. } | Form::InKernel { .. } => (1, 1),
    };
    Ok(Dims {
        form,
        splits1,
        t,
        h,
        i,
        k,
        p,
        bm,
        splits,
    })
}

/// One MoE layer: `out[t] = Σ_j w[t,j] · W2[e] (silu(W13[e, :I] x[t]) ⊙ W13[e, I:] x[t])`, `x: [T, H]`,
/// `out: [T, H]`. `H` and `I` must be multiples of 64. Intermediates are allocated for this call;
/// [`moe_layer_in`] reuses a [`Workspace`].
pub fn moe_layer<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    out: &mut Tensor<E>,
) -> Result<(), OpError> {
    moe_layer_in(stream, x, weights, routing, out, &mut Workspace::default())
}

/// [`moe_layer`] with its intermediates in `ws`: GEMM 1 ([`moe_gemm1`]), GEMM 2 ([`moe_gemm2`]) and
/// the combine ([`moe_combine`]), queued on `stream` with no allocation once `ws` has this shape.
pub fn moe_layer_in<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    out: &mut Tensor<E>,
    ws: &mut Workspace<E>,
) -> Result<(), OpError> {
    let d = check_layer("moe_layer", x, weights, routing, Some(out.shape()), ws.form)?;
    if d.t == 0 || d.p == 0 {
        return Ok(());
    }
    let h = reuse(&mut ws.h, stream, &[d.p, d.i])?;
    ws.scratch.wd.kernel = ws.dequant.unwrap_or(DEFAULT_DEQUANT);
    launch_gemm1(stream, x, weights, routing, d, h, &mut ws.scratch)?;
    let y = reuse(&mut ws.y, stream, &[d.y_rows(), d.h])?;
    launch_gemm2(stream, h, weights, routing, d, y, &mut ws.scratch)?;
    if let Form::SortedStaged { .. } = d.form {
        return combine_staged(stream, y, routing, d, out, &mut ws.scratch.pos);
    }
    let y3 = y.reshape(&[d.t, d.k * d.splits, d.h])?;
    kernels::moe_combine::<E, 8, 512>(&y3, out).launch(stream)?;
    Ok(())
}

/// GEMM 1 of a layer alone (for timing the stages): `h: [P, I]` ← SiLU(gate)·up of the rows of `x`
/// in the aligned order (its split-K partial sums, if any, in `ws`; form `ws.form` or the host's).
pub fn moe_gemm1<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    h: &mut Tensor<E>,
    ws: &mut Workspace<E>,
) -> Result<(), OpError> {
    let d = check_layer("moe_gemm1", x, weights, routing, None, ws.form)?;
    expect("moe_gemm1", "h", h.shape(), &[d.p, d.i])?;
    if d.t == 0 || d.p == 0 {
        return Ok(());
    }
    ws.scratch.wd.kernel = ws.dequant.unwrap_or(DEFAULT_DEQUANT);
    launch_gemm1(stream, x, weights, routing, d, h, &mut ws.scratch)
}

/// GEMM 2 of a layer alone (for timing the stages): `y: [T·k·S, H]` f32 ([`gemm2_out_shape`]) ←
/// routed weight · `h` · W2ᵀ per K split, scattered to the pairs' rows; `x` only gives `T` and `H`;
/// form `ws.form` or the host's (its dequantized weights, if any, in `ws`).
pub fn moe_gemm2<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    h: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    y: &mut Tensor<f32>,
    ws: &mut Workspace<E>,
) -> Result<(), OpError> {
    let d = check_layer("moe_gemm2", x, weights, routing, None, ws.form)?;
    expect("moe_gemm2", "h", h.shape(), &[d.p, d.i])?;
    expect("moe_gemm2", "y", y.shape(), &[d.y_rows(), d.h])?;
    if d.t == 0 || d.p == 0 {
        return Ok(());
    }
    ws.scratch.wd.kernel = ws.dequant.unwrap_or(DEFAULT_DEQUANT);
    launch_gemm2(stream, h, weights, routing, d, y, &mut ws.scratch)
}

/// The combine alone: `out[t] = Σ_j y[t·n + j]` in row order, `y: [T·n, H]` f32, `out: [T, H]`
/// (`n` = `slots`: top-k times GEMM 2's K splits, slot-major).
pub fn moe_combine<E: MoeElem>(
    stream: &Stream,
    y: &Tensor<f32>,
    slots: i64,
    out: &mut Tensor<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_combine";
    let os = out.shape().to_vec();
    if os.len() != 2 || slots < 1 {
        return Err(OpError::Rank {
            op: OP,
            arg: "out",
            expected: "2 ([T, H]) and at least one slot".into(),
            shape: os,
        });
    }
    expect(OP, "y", y.shape(), &[os[0] * slots, os[1]])?;
    if os[0] * os[1] == 0 {
        return Ok(());
    }
    let y3 = y.reshape(&[os[0], slots, os[1]])?;
    kernels::moe_combine::<E, 8, 512>(&y3, out).launch(stream)?;
    Ok(())
}

/// The combine of [`Form::SortedStaged`] alone (for timing the stages): `out[t] = Σ_j w[t, j] ·
/// y[pos(t, j)]` in slot order, `y: [P, H]` f32 as [`moe_gemm2`] writes it in that form (the aligned
/// order, no routed weight), `pos(t, j)` the aligned row of pair `(t, j)` (computed here, in `ws`).
pub fn moe_combine_staged<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    y: &Tensor<f32>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    out: &mut Tensor<E>,
    ws: &mut Workspace<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_combine";
    let form = ws.form.unwrap_or(Form::SortedStaged { bn: 128 });
    if !matches!(form, Form::SortedStaged { .. }) {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("the staged combine after a {form:?} GEMM 2 (use `moe_combine`)"),
        });
    }
    let d = check_layer(OP, x, weights, routing, Some(out.shape()), Some(form))?;
    expect(OP, "y", y.shape(), &[d.y_rows(), d.h])?;
    if d.t == 0 || d.p == 0 {
        return Ok(());
    }
    combine_staged(stream, y, routing, d, out, &mut ws.scratch.pos)
}

fn launch_gemm1<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    h: &mut Tensor<E>,
    scratch: &mut Scratch<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    match d.form {
        Form::Decode { bn, bk, occupancy } => {
            return launch_gemm1_decode(stream, x, weights, r, d, (bn, bk, occupancy), h, scratch);
        }
        Form::Sorted | Form::SortedStaged { .. } => {
            return launch_gemm1_sorted(stream, x, weights, r, d, h, scratch);
        }
        Form::InKernel { bk } => {
            return launch_gemm1_in_kernel(stream, x, weights, r, d, bk, h, scratch);
        }
        Form::Rows | Form::RowsBits => {}
    }
    let ((bn, bk), _) = gemm_tiles(d.bm, d.h, d.i);
    let grid = (u32_of(OP, d.p / d.bm)?, u32_of(OP, d.i / bn)?, 1);
    // The 128-row tiles run 8 worker warps (two warpgroups; with 4 they spill on sm_90).
    macro_rules! go {
        (128, $bn:literal, $bk:literal) => {
            if d.form == Form::RowsBits {
                go!(128, $bn, $bk, 1, moe_gemm1_w4a16_w8, moe_gemm1_dense_w8)
            } else {
                go!(128, $bn, $bk, 0, moe_gemm1_w4a16_w8, moe_gemm1_dense_w8)
            }
        };
        ($bm:literal, $bn:literal, $bk:literal) => {
            if d.form == Form::RowsBits {
                go!($bm, $bn, $bk, 1, moe_gemm1_w4a16, moe_gemm1_dense)
            } else {
                go!($bm, $bn, $bk, 0, moe_gemm1_w4a16, moe_gemm1_dense)
            }
        };
        ($bm:literal, $bn:literal, $bk:literal, $dec:literal, $w4:ident, $dn:ident) => {
            match weights {
                Weights::Nvfp4 { w13, s13, g13, .. } => {
                    kernels::$w4::<E, $bm, $bn, $bk, { $bk / 2 }, { $bk / 16 }, $dec>(
                        x,
                        *w13,
                        *s13,
                        *g13,
                        r.sorted_ids,
                        r.expert_ids,
                        r.total,
                        r.topk,
                        h,
                    )
                    .grid(grid)
                    .launch(stream)?
                }
                Weights::Dense { w13, .. } => kernels::$dn::<E, $bm, $bn, $bk>(
                    x,
                    *w13,
                    r.sorted_ids,
                    r.expert_ids,
                    r.total,
                    r.topk,
                    h,
                )
                .grid(grid)
                .launch(stream)?,
            }
        };
    }
    match (d.bm, bk) {
        (16, 128) => go!(16, 64, 128),
        (16, _) => go!(16, 64, 64),
        (32, 128) => go!(32, 64, 128),
        (32, _) => go!(32, 64, 64),
        (128, _) => go!(128, 64, 64),
        _ => go!(64, 64, 64),
    }
    Ok(())
}

fn launch_gemm2<E: MoeElem>(
    stream: &Stream,
    h: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    y: &mut Tensor<f32>,
    scratch: &mut Scratch<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    match d.form {
        Form::Decode { bn, bk, occupancy } => {
            return launch_gemm2_decode(stream, h, weights, r, d, (bn, bk, occupancy), y);
        }
        Form::Sorted => return launch_gemm2_sorted(stream, h, weights, r, d, y, &mut scratch.wd),
        Form::SortedStaged { bn } => {
            return launch_gemm2_staged(stream, h, weights, r, d, bn, y, &mut scratch.wd);
        }
        Form::InKernel { bk } => {
            return launch_gemm2_in_kernel(stream, h, weights, r, d, bk, y, scratch);
        }
        Form::Rows | Form::RowsBits => {}
    }
    let (_, (bn, bk)) = gemm_tiles(d.bm, d.h, d.i);
    let wflat = r.weights.reshape(&[d.t * d.k])?;
    let grid = (
        u32_of(OP, d.p / d.bm)?,
        u32_of(OP, d.h / bn)?,
        u32_of(OP, d.splits)?,
    );
    let splits = d.splits as i32;
    // The 128-row tiles run 8 worker warps (two warpgroups; with 4 they spill on sm_90).
    macro_rules! go {
        (128, $bn:literal, $bk:literal) => {
            if d.form == Form::RowsBits {
                go!(128, $bn, $bk, 1, moe_gemm2_w4a16_w8, moe_gemm2_dense_w8)
            } else {
                go!(128, $bn, $bk, 0, moe_gemm2_w4a16_w8, moe_gemm2_dense_w8)
            }
        };
        ($bm:literal, $bn:literal, $bk:literal) => {
            if d.form == Form::RowsBits {
                go!($bm, $bn, $bk, 1, moe_gemm2_w4a16, moe_gemm2_dense)
            } else {
                go!($bm, $bn, $bk, 0, moe_gemm2_w4a16, moe_gemm2_dense)
            }
        };
        ($bm:literal, $bn:literal, $bk:literal, $dec:literal, $w4:ident, $dn:ident) => {
            match weights {
                Weights::Nvfp4 { w2, s2, g2, .. } => {
                    kernels::$w4::<E, $bm, $bn, $bk, { $bk / 2 }, { $bk / 16 }, $dec>(
                        h,
                        *w2,
                        *s2,
                        *g2,
                        r.sorted_ids,
                        r.expert_ids,
                        r.total,
                        &wflat,
                        splits,
                        y,
                    )
                    .grid(grid)
                    .launch(stream)?
                }
                Weights::Dense { w2, .. } => kernels::$dn::<E, $bm, $bn, $bk>(
                    h,
                    *w2,
                    r.sorted_ids,
                    r.expert_ids,
                    r.total,
                    &wflat,
                    splits,
                    y,
                )
                .grid(grid)
                .launch(stream)?,
            }
        };
    }
    match (d.bm, bn, bk) {
        (16, _, 128) => go!(16, 64, 128),
        (16, _, _) => go!(16, 64, 64),
        (32, _, 128) => go!(32, 64, 128),
        (32, _, _) => go!(32, 64, 64),
        (128, 128, _) => go!(128, 128, 64),
        (128, _, _) => go!(128, 64, 64),
        _ => go!(64, 64, 64),
    }
    Ok(())
}

/// `x`'s rows gathered once into the aligned order (`moe_permute`: `[P, H]` in `slot`, zero rows for
/// padding), for the forms whose GEMM 1 reads them through a view instead of gathering in its K loop
/// (in the decode form that gather's bounds checks cost about 5 predicate instructions per weight).
/// Row blocks 64 and 128 permute in their own block, the decode form's 16 and 32 in blocks of 16.
fn permute_rows<'a, E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    r: &Routing<'_>,
    d: Dims,
    slot: &'a mut Option<Tensor<E>>,
) -> Result<&'a Tensor<E>, OpError> {
    const OP: &str = "moe_layer";
    const BK: i64 = 64;
    let xs = reuse(slot, stream, &[d.p, d.h])?;
    let bm = if d.bm >= 64 { d.bm } else { 16 };
    let grid = (u32_of(OP, d.p / bm)?, u32_of(OP, d.h / BK)?, 1);
    match bm {
        128 => kernels::moe_permute::<E, 128, 64>(x, r.sorted_ids, r.total, r.topk, &mut *xs)
            .grid(grid)
            .launch(stream)?,
        64 => kernels::moe_permute::<E, 64, 64>(x, r.sorted_ids, r.total, r.topk, &mut *xs)
            .grid(grid)
            .launch(stream)?,
        _ => kernels::moe_permute::<E, 16, 64>(x, r.sorted_ids, r.total, r.topk, &mut *xs)
            .grid(grid)
            .launch(stream)?,
    }
    Ok(xs)
}

/// The decode form's `occupancy` on a launch: the tileiras hint when it is not 0 (0 leaves the
/// kernel as it is, so its cache entries and bundles stay those of the unhinted kernel).
trait BlocksPerSm {
    fn blocks_per_sm(self, occupancy: i64) -> Self;
}

impl BlocksPerSm for cutile::launch::Launch<'_> {
    fn blocks_per_sm(self, occupancy: i64) -> Self {
        match i32::try_from(occupancy) {
            Ok(n) if n > 0 => self.hint("occupancy", n),
            _ => self,
        }
    }
}

/// GEMM 1 in the decode form (row block 16 or 32): grid `(P / bm, I / bn, splits1)`; with several K
/// splits the partial sums go to `part: [splits1 · P, 2I]` f32 and `moe_silu_reduce` writes `h`.
#[allow(clippy::too_many_arguments)]
fn launch_gemm1_decode<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    (bn, bk, occupancy): (i64, i64, i64),
    h: &mut Tensor<E>,
    scratch: &mut Scratch<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    let xs = permute_rows(stream, x, r, d, &mut scratch.xs)?;
    let grid = (
        u32_of(OP, d.p / d.bm)?,
        u32_of(OP, d.i / bn)?,
        u32_of(OP, d.splits1)?,
    );
    let splits = d.splits1 as i32;
    // One split writes `h` directly and never touches `part`: a minimal buffer stands in for it.
    let pshape = if d.splits1 > 1 {
        vec![d.splits1 * d.p, 2 * d.i]
    } else {
        vec![d.bm, 2 * bn]
    };
    let pt = reuse(&mut scratch.part, stream, &pshape)?;
    macro_rules! go {
        ($bt:literal, $bn:literal, $bk:literal, $w4:ident) => {
            match weights {
                Weights::Nvfp4 { w13, s13, g13, .. } => {
                    kernels::$w4::<
                        E,
                        $bt,
                        $bn,
                        $bk,
                        { $bk / 2 },
                        { $bk / 16 },
                        { $bk / 8 },
                        { $bk / 4 },
                    >(xs, *w13, *s13, *g13, r.expert_ids, r.total, splits, h, pt)
                    .grid(grid)
                    .blocks_per_sm(occupancy)
                    .launch(stream)?
                }
                Weights::Dense { w13, .. } => kernels::moe_gemm1_dense_t::<E, $bt, $bn, $bk>(
                    xs,
                    *w13,
                    r.expert_ids,
                    r.total,
                    splits,
                    h,
                    pt,
                )
                .grid(grid)
                .blocks_per_sm(occupancy)
                .launch(stream)?,
            }
        };
    }
    match (d.bm, bn, bk) {
        (32, 128, _) => go!(32, 128, 256, moe_gemm1_w4a16_t8),
        (32, _, _) => go!(32, 64, 128, moe_gemm1_w4a16_t),
        (_, 128, 256) => go!(16, 128, 256, moe_gemm1_w4a16_t8),
        (_, 128, _) => go!(16, 128, 128, moe_gemm1_w4a16_t8),
        (_, _, 256) => go!(16, 64, 256, moe_gemm1_w4a16_t),
        _ => go!(16, 64, 128, moe_gemm1_w4a16_t),
    }
    if d.splits1 > 1 {
        kernels::moe_silu_reduce::<E, 16, 64>(pt, r.total, splits, h).launch(stream)?;
    }
    Ok(())
}

/// GEMM 2 in the decode form (row block 16 or 32): grid `(P / bm, H / bn, splits)`.
fn launch_gemm2_decode<E: MoeElem>(
    stream: &Stream,
    h: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    (bn, bk, occupancy): (i64, i64, i64),
    y: &mut Tensor<f32>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    let wflat = r.weights.reshape(&[d.t * d.k])?;
    let grid = (
        u32_of(OP, d.p / d.bm)?,
        u32_of(OP, d.h / bn)?,
        u32_of(OP, d.splits)?,
    );
    let splits = d.splits as i32;
    macro_rules! go {
        ($bt:literal, $bn:literal, $bk:literal, $w4:ident) => {
            match weights {
                Weights::Nvfp4 { w2, s2, g2, .. } => kernels::$w4::<
                    E,
                    $bt,
                    $bn,
                    $bk,
                    { $bk / 2 },
                    { $bk / 16 },
                    { $bk / 8 },
                    { $bk / 4 },
                >(
                    h,
                    *w2,
                    *s2,
                    *g2,
                    r.sorted_ids,
                    r.expert_ids,
                    r.total,
                    &wflat,
                    splits,
                    y,
                )
                .grid(grid)
                .blocks_per_sm(occupancy)
                .launch(stream)?,
                Weights::Dense { w2, .. } => kernels::moe_gemm2_dense_t::<E, $bt, $bn, $bk>(
                    h,
                    *w2,
                    r.sorted_ids,
                    r.expert_ids,
                    r.total,
                    &wflat,
                    splits,
                    y,
                )
                .grid(grid)
                .blocks_per_sm(occupancy)
                .launch(stream)?,
            }
        };
    }
    match (d.bm, bn, bk) {
        (32, 128, _) => go!(32, 128, 256, moe_gemm2_w4a16_t8),
        (32, _, _) => go!(32, 64, 128, moe_gemm2_w4a16_t),
        (_, 128, 256) => go!(16, 128, 256, moe_gemm2_w4a16_t8),
        (_, 128, _) => go!(16, 128, 128, moe_gemm2_w4a16_t8),
        (_, _, 256) => go!(16, 64, 256, moe_gemm2_w4a16_t),
        _ => go!(16, 64, 128, moe_gemm2_w4a16_t),
    }
    Ok(())
}

/// The grouped tile order of [`Form::Sorted`]'s GEMMs: row blocks per band (the GEMM family's).
const SORTED_GROUP: i32 = crate::gemm::config::GROUP as i32;

/// The persistent grid of [`Form::Sorted`]'s GEMMs: one block per SM, or one per output tile the
/// call can have (`P / bm` row blocks at most, `tiles_n` column tiles each) when that is fewer.
fn sorted_grid(
    x_dev: &cutile::runtime::Device,
    d: Dims,
    tiles_n: i64,
) -> Result<(u32, u32, u32), OpError> {
    let tiles = (d.p / d.bm) * tiles_n;
    let sms = i64::from(x_dev.sm_count());
    Ok((u32_of("moe_layer", tiles.min(sms))?, 1, 1))
}

/// NVFP4 weights `w: [E, N, K/2]`, `s` folded-dequantized (`nvfp4_dequantize_folded`: `e2m1 · e4m3
/// · 2^-7`, exact in `E`; the GEMM applies `global · 2^7`) into the first `E · N · K` elements of the
/// workspace buffer `wd` (allocated for `E · 2I · H`, the larger of the layer's two), viewed as `[E,
/// N, K]`.
fn dequantized<'w, E: MoeElem>(
    stream: &Stream,
    wd: &'w mut Dequantized<E>,
    d: Dims,
    experts: i64,
    (w, s): (&Tensor<i8>, &Tensor<i8>),
    n: i64,
    k: i64,
) -> Result<TensorView<'w, E>, OpError> {
    let kernel = wd.kernel;
    let buf = reuse(&mut wd.buf, stream, &[experts * 2 * d.i * d.h])?;
    {
        let mut y = buf
            .slice_mut(0, 0..experts * n * k)?
            .reshape(&[experts, n, k])?;
        launch_dequant_folded(stream, &w.view(), &s.view(), &mut y, kernel)?;
    }
    let view = buf
        .slice(0, 0..experts * n * k)?
        .reshape(&[experts, n, k])?;
    Ok(view)
}

/// The folded dequantization (`e2m1 · e4m3 · 2^-7`, exact in `E`) of `w: [G, N, K/2]`, `s: [G, N,
/// K/16]` into `y: [G, N, K]` (contiguous) by `kernel` (f16 always by `Tiles`).
fn launch_dequant_folded<E: MoeElem>(
    stream: &Stream,
    w: &TensorView<'_, i8>,
    s: &TensorView<'_, i8>,
    y: &mut TensorViewMut<'_, E>,
    kernel: DequantKernel,
) -> Result<(), OpError> {
    const OP: &str = "nvfp4_dequantize_folded";
    if let DequantKernel::Groups { rows } = kernel
        && E::dequantize_groups(stream, w, s, y, rows)?
    {
        return Ok(());
    }
    let (g, n, k) = (y.shape()[0], y.shape()[1], y.shape()[2]);
    let tiles = ceil_div(n, DBN) * ceil_div(k, DBK);
    kernels::nvfp4_dequantize_folded::<E, 64, 128, 64, 8>(w, s, y)
        .grid((u32_of(OP, tiles)?, u32_of(OP, g)?, 1))
        .launch(stream)?;
    Ok(())
}

/// The folded dequantization the sorted prefill forms run once per call: `y: [G, N, K]` ←
/// `e2m1 · e4m3 · 2^-7` of `w: [G, N, K/2]`, `s: [G, N, K/16]` (exact in `E`; the value is `y ·
/// global · 2^7`), by `kernel` (f16 always by [`DequantKernel::Tiles`]). For timing the kernels
/// against each other and testing them; [`moe_layer`] runs the same launch on its workspace.
pub fn nvfp4_dequantize_folded<E: MoeElem>(
    stream: &Stream,
    w: &Tensor<i8>,
    s: &Tensor<i8>,
    y: &mut Tensor<E>,
    kernel: DequantKernel,
) -> Result<(), OpError> {
    const OP: &str = "nvfp4_dequantize_folded";
    let (g, n, k) = dequant_dims(OP, w, s, y.shape())?;
    if g * n * k == 0 {
        return Ok(());
    }
    launch_dequant_folded(stream, &w.view(), &s.view(), &mut y.view_mut(), kernel)
}

/// The weights (`[E, N, K]`) and per-expert `global` a [`Form::Sorted`] GEMM reads (GEMM 2's with
/// `gemm2`, else GEMM 1's), and whether they are folded NVFP4: dense weights as they are, with the
/// routed weights (flat: a rank-1 stand-in) as the `global` that `FOLD = 0` never reads; NVFP4 ones
/// dequantized into `wd` ([`dequantized`]) with their globals.
fn sorted_operands<'a, E: MoeElem>(
    stream: &Stream,
    weights: &Weights<'a, E>,
    r: &Routing<'a>,
    d: Dims,
    gemm2: bool,
    wd: &'a mut Dequantized<E>,
) -> Result<(TensorView<'a, E>, TensorView<'a, f32>, bool), OpError> {
    Ok(match *weights {
        Weights::Dense { w13, w2 } => {
            let w = if gemm2 { w2 } else { w13 };
            (w.view(), r.weights.reshape(&[d.t * d.k])?, false)
        }
        Weights::Nvfp4 {
            w13,
            s13,
            g13,
            w2,
            s2,
            g2,
        } => {
            let ((w, s, g), (n, k)) = if gemm2 {
                ((w2, s2, g2), (d.h, d.i))
            } else {
                ((w13, s13, g13), (2 * d.i, d.h))
            };
            let experts = w.shape()[0];
            let dq = dequantized(stream, wd, d, experts, (w, s), n, k)?;
            (dq, g.view(), true)
        }
    })
}

/// GEMM 1 in [`Form::Sorted`]: `moe_permute` of `x` into `scratch.xs`, NVFP4 weights dequantized
/// into `scratch.wd`, then `moe_gemm1_sorted` over W13 viewed as `[E, 2, I, H]` (64 columns of `h`
/// per tile: a `BM x 128` accumulator of gate and up columns, the GEMM family's 128 x 128 tile over 4
/// worker warps at row block 128).
fn launch_gemm1_sorted<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    h: &mut Tensor<E>,
    scratch: &mut Scratch<E>,
) -> Result<(), OpError> {
    let xs = permute_rows(stream, x, r, d, &mut scratch.xs)?;
    let (w13, global, fold) = sorted_operands(stream, weights, r, d, false, &mut scratch.wd)?;
    let experts = w13.shape()[0];
    let w13 = w13.reshape(&[experts, 2, d.i, d.h])?;
    let grid = sorted_grid(x.device(), d, d.i / 64)?;
    macro_rules! go {
        ($bm:literal, $fold:literal) => {
            kernels::moe_gemm1_sorted::<E, $bm, 64, 128, 64, $fold>(
                xs,
                &w13,
                &global,
                r.expert_ids,
                r.total,
                SORTED_GROUP,
                h,
            )
            .grid(grid)
            .launch(stream)?
        };
    }
    match (d.bm, fold) {
        (128, true) => go!(128, 1),
        (128, false) => go!(128, 0),
        (_, true) => go!(64, 1),
        (_, false) => go!(64, 0),
    }
    Ok(())
}

/// GEMM 2 in [`Form::Sorted`]: NVFP4 weights dequantized into `wd`, then `moe_gemm2_sorted` over 4
/// worker warps: `128 x 64` tiles at row block 128, `64 x 128` at 64 where `H` allows (sm_90 ptxas:
/// `128 x 128` over 4 warps spills its scattered epilogue, and over 8 warps, as `128 x 256`, tileiras
/// emits no wgmma at all).
fn launch_gemm2_sorted<E: MoeElem>(
    stream: &Stream,
    h: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    y: &mut Tensor<f32>,
    wd: &mut Dequantized<E>,
) -> Result<(), OpError> {
    let (w2, global, fold) = sorted_operands(stream, weights, r, d, true, wd)?;
    let wflat = r.weights.reshape(&[d.t * d.k])?;
    let bn = if d.bm == 64 && d.h % 128 == 0 {
        128
    } else {
        64
    };
    let grid = sorted_grid(h.device(), d, d.h / bn)?;
    macro_rules! go {
        ($bm:literal, $bn:literal) => {
            if fold {
                go!($bm, $bn, 1)
            } else {
                go!($bm, $bn, 0)
            }
        };
        ($bm:literal, $bn:literal, $fold:literal) => {
            kernels::moe_gemm2_sorted::<E, $bm, $bn, 64, $fold>(
                h,
                &w2,
                &global,
                r.sorted_ids,
                r.expert_ids,
                r.total,
                &wflat,
                SORTED_GROUP,
                y,
            )
            .grid(grid)
            .launch(stream)?
        };
    }
    match (d.bm, bn) {
        (128, _) => go!(128, 64),
        (_, 128) => go!(64, 128),
        _ => go!(64, 64),
    }
    Ok(())
}

/// GEMM 1 in [`Form::InKernel`]: `moe_permute` of `x` into `scratch.xs`, then `moe_gemm1_w4a16_p8`
/// on grid `(I / 64, P / 128)` over W13 and its scales viewed as `[E, 2, I, ·]` (gate and up rows of
/// a column tile stacked). Dense weights run [`launch_gemm1_sorted`].
#[allow(clippy::too_many_arguments)]
fn launch_gemm1_in_kernel<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    bk: i64,
    h: &mut Tensor<E>,
    scratch: &mut Scratch<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    let Weights::Nvfp4 { w13, s13, g13, .. } = weights else {
        return launch_gemm1_sorted(stream, x, weights, r, d, h, scratch);
    };
    let xs = permute_rows(stream, x, r, d, &mut scratch.xs)?;
    let experts = w13.shape()[0];
    let w = w13.reshape(&[experts, 2, d.i, d.h / 2])?;
    let s = s13.reshape(&[experts, 2, d.i, d.h / 16])?;
    let grid = (u32_of(OP, d.i / 64)?, u32_of(OP, d.p / 128)?, 1);
    macro_rules! go {
        ($bk:literal) => {
            kernels::moe_gemm1_w4a16_p8::<
                E,
                128,
                64,
                128,
                $bk,
                { $bk / 2 },
                { $bk / 16 },
                { $bk / 8 },
                { $bk / 4 },
            >(xs, &w, &s, *g13, r.expert_ids, r.total, h)
            .grid(grid)
            .launch(stream)?
        };
    }
    match bk {
        128 => go!(128),
        _ => go!(256),
    }
    Ok(())
}

/// GEMM 2 in [`Form::InKernel`]: `moe_gemm2_w4a16_p8` on grid `(H / 128, P / 128)`. Dense weights
/// run [`launch_gemm2_sorted`].
#[allow(clippy::too_many_arguments)]
fn launch_gemm2_in_kernel<E: MoeElem>(
    stream: &Stream,
    h: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    bk: i64,
    y: &mut Tensor<f32>,
    scratch: &mut Scratch<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    let Weights::Nvfp4 { w2, s2, g2, .. } = weights else {
        return launch_gemm2_sorted(stream, h, weights, r, d, y, &mut scratch.wd);
    };
    let wflat = r.weights.reshape(&[d.t * d.k])?;
    let grid = (u32_of(OP, d.h / 128)?, u32_of(OP, d.p / 128)?, 1);
    macro_rules! go {
        ($bk:literal) => {
            kernels::moe_gemm2_w4a16_p8::<
                E,
                128,
                128,
                $bk,
                { $bk / 2 },
                { $bk / 16 },
                { $bk / 8 },
                { $bk / 4 },
            >(
                h,
                *w2,
                *s2,
                *g2,
                r.sorted_ids,
                r.expert_ids,
                r.total,
                &wflat,
                y,
            )
            .grid(grid)
            .launch(stream)?
        };
    }
    match bk {
        128 => go!(128),
        _ => go!(256),
    }
    Ok(())
}

/// GEMM 2 in [`Form::SortedStaged`]: NVFP4 weights dequantized into `wd`, then `moe_gemm2_staged`
/// storing `128 x bn` tiles of `y: [P, H]` in the aligned order (`bn` 256 over 8 worker warps).
#[allow(clippy::too_many_arguments)]
fn launch_gemm2_staged<E: MoeElem>(
    stream: &Stream,
    h: &Tensor<E>,
    weights: &Weights<'_, E>,
    r: &Routing<'_>,
    d: Dims,
    bn: i64,
    y: &mut Tensor<f32>,
    wd: &mut Dequantized<E>,
) -> Result<(), OpError> {
    let (w2, global, fold) = sorted_operands(stream, weights, r, d, true, wd)?;
    let grid = sorted_grid(h.device(), d, d.h / bn)?;
    macro_rules! go {
        ($bn:literal, $fold:literal) => {
            kernels::moe_gemm2_staged::<E, 128, $bn, 64, $fold>(
                h,
                &w2,
                &global,
                r.expert_ids,
                r.total,
                SORTED_GROUP,
                y,
            )
            .grid(grid)
        };
    }
    let launch = match (bn, fold) {
        (256, true) => go!(256, 1).hint("num_worker_warps_per_cta", 8),
        (256, false) => go!(256, 0).hint("num_worker_warps_per_cta", 8),
        (_, true) => go!(128, 1),
        (_, false) => go!(128, 0),
    };
    launch.launch(stream)?;
    Ok(())
}

/// The combine of [`Form::SortedStaged`]: `moe_positions` writes each pair's aligned row into `pos`
/// (`[T, k]`), then `moe_combine_staged` sums `w[t, j] · y[pos[t, j]]` over the slots in order.
fn combine_staged<E: MoeElem>(
    stream: &Stream,
    y: &Tensor<f32>,
    r: &Routing<'_>,
    d: Dims,
    out: &mut Tensor<E>,
    pos: &mut Option<Tensor<i32>>,
) -> Result<(), OpError> {
    const OP: &str = "moe_combine";
    const BM: i64 = 256;
    let pos = reuse(pos, stream, &[d.t * d.k])?;
    kernels::moe_positions::<256>(r.sorted_ids, r.total, &mut *pos)
        .grid((u32_of(OP, ceil_div(d.p, BM))?, 1, 1))
        .launch(stream)?;
    let pos2 = pos.reshape(&[d.t, d.k])?;
    let w2 = r.weights.reshape(&[d.t, d.k])?;
    kernels::moe_combine_staged::<E, 8, 512>(y, &pos2, &w2, out).launch(stream)?;
    Ok(())
}

/// How much work [`moe_align_block_size`] does in one launch (`moe_align_fused`, one block looping
/// twice over chunks of 64 pairs): at most this many chunk × expert-column products (`EP`, the
/// experts rounded up to 16/64/128/256). Past it the three-pass form spreads the chunks over blocks.
/// Measured on the H200 (session 19, `nvfp4_moe`): one launch took 10.0–11.2 µs against 36.5–39.5 for
/// three at 1–2 chunks of 16 columns, and at 128 columns 19.3 / 25.3 / 58.4 µs at 1 / 2 / 8 chunks
/// against 37.2 / 36.8 / 43.4: about 5.6 µs per chunk there, even with three launches near 4 chunks.
/// So 512: 32 chunks (2048 pairs) at 16 columns, 8 at 64, 4 at 128, 2 at 256.
pub const ALIGN_FUSED_MAX_WORK: i64 = 512;

/// Whether [`moe_align_block_size`] aligns `pairs` pairs over `experts` experts in one launch
/// ([`ALIGN_FUSED_MAX_WORK`]).
pub fn align_in_one_launch(pairs: i64, experts: i64) -> bool {
    ceil_div(pairs.max(1), 64) * align_columns(experts) <= ALIGN_FUSED_MAX_WORK
}

/// The expert columns of the alignment kernels: `experts` rounded up to 16, 64, 128 or 256.
fn align_columns(experts: i64) -> i64 {
    match experts {
        ..=16 => 16,
        17..=64 => 64,
        65..=128 => 128,
        _ => 256,
    }
}

/// `(sorted_ids, expert_ids, total)` of an aligned order.
pub type AlignedBuffers = (Tensor<i32>, Tensor<i32>, Tensor<i32>);

/// The buffers of an aligned order for `pairs = T·k` pairs over `experts` experts and row block `bm`
/// (sizes that need no read-back of the routing): `sorted_ids: [P_max]`, `expert_ids: [P_max / bm]`,
/// `total: [1]`.
pub fn aligned_buffers(
    stream: &Stream,
    pairs: i64,
    experts: i64,
    bm: i64,
) -> Result<AlignedBuffers, OpError> {
    let p =
        super::reference::max_padded(pairs.max(0) as usize, experts.max(1) as usize, bm as usize)
            as i64;
    let dev = stream.device();
    Ok((
        Tensor::<i32>::zeros(dev, &[p])?,
        Tensor::<i32>::zeros(dev, &[p / bm])?,
        Tensor::<i32>::zeros(dev, &[1])?,
    ))
}

/// The GPU `moe_align_block_size`: the pairs of `ids: [T, k]` (every id in `0..experts`, as
/// [`moe_route`] writes them) sorted by expert, stable by pair id, each expert padded to `bm` rows
/// (one of [`ROW_BLOCKS`]): `sorted_ids: [P_max]` (padding rows `T·k`), `expert_ids: [P_max / bm]`
/// (blocks at or past `total` hold `experts - 1`), `total: [1]`, exactly as
/// [`reference::align_block_size`](super::reference::align_block_size) for the first `total` rows
/// (rows past `total` are not written). Three launches (histogram per chunk of pairs, one block
/// for the padded starts, expert of each block and padding rows, then the placement), or one
/// (`moe_align_fused`, the same passes in one block) for small calls ([`align_in_one_launch`]);
/// nothing goes through the host. `experts <= 256`.
#[allow(clippy::too_many_arguments)]
pub fn moe_align_block_size<E: MoeElem>(
    stream: &Stream,
    ids: &Tensor<i32>,
    experts: i64,
    bm: i64,
    sorted_ids: &mut Tensor<i32>,
    expert_ids: &mut Tensor<i32>,
    total: &mut Tensor<i32>,
    ws: &mut Workspace<E>,
) -> Result<(), OpError> {
    moe_align_block_size_with(
        stream,
        ids,
        experts,
        bm,
        sorted_ids,
        expert_ids,
        total,
        ws,
        AlignForm::Auto,
    )
}

/// How [`moe_align_block_size_with`] aligns: both forms give the same buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlignForm {
    /// One launch for small calls ([`align_in_one_launch`]), three otherwise.
    Auto,
    /// One block, one launch (`moe_align_fused`) at any size.
    OneLaunch,
    /// Histogram, plan and placement as three launches over `ceil(T·k / 64)` blocks.
    ThreePass,
}

/// [`moe_align_block_size`] in the given form (for tests and timing; results are identical).
#[allow(clippy::too_many_arguments)]
pub fn moe_align_block_size_with<E: MoeElem>(
    stream: &Stream,
    ids: &Tensor<i32>,
    experts: i64,
    bm: i64,
    sorted_ids: &mut Tensor<i32>,
    expert_ids: &mut Tensor<i32>,
    total: &mut Tensor<i32>,
    ws: &mut Workspace<E>,
    form: AlignForm,
) -> Result<(), OpError> {
    const OP: &str = "moe_align_block_size";
    const BT: i64 = 64;
    let pairs = ids.numel();
    if !(1..=256).contains(&experts) || !ROW_BLOCKS.contains(&bm) {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!(
                "{experts} experts and block {bm}: the kernels take 1..=256 experts and a block of 16, 32, 64 or 128"
            ),
        });
    }
    let p = super::reference::max_padded(pairs as usize, experts as usize, bm as usize) as i64;
    expect(OP, "sorted_ids", sorted_ids.shape(), &[p])?;
    expect(OP, "expert_ids", expert_ids.shape(), &[p / bm])?;
    expect(OP, "total", total.shape(), &[1])?;
    if pairs > i64::from(i32::MAX) / 2 {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("{pairs} pairs exceed the i32 row ids"),
        });
    }
    let flat = ids.reshape(&[pairs])?;
    let ne = experts as i32;
    let one_launch = match form {
        AlignForm::Auto => align_in_one_launch(pairs, experts),
        AlignForm::OneLaunch => true,
        AlignForm::ThreePass => false,
    };
    if one_launch {
        macro_rules! fused {
            ($ep:literal, $er:literal) => {
                match bm {
                    16 => kernels::moe_align_fused::<64, 16, $ep, $er, 64>(
                        &flat, ne, total, expert_ids, sorted_ids,
                    )
                    .grid((1, 1, 1))
                    .launch(stream)?,
                    32 => kernels::moe_align_fused::<64, 32, $ep, $er, 64>(
                        &flat, ne, total, expert_ids, sorted_ids,
                    )
                    .grid((1, 1, 1))
                    .launch(stream)?,
                    64 => kernels::moe_align_fused::<64, 64, $ep, $er, 64>(
                        &flat, ne, total, expert_ids, sorted_ids,
                    )
                    .grid((1, 1, 1))
                    .launch(stream)?,
                    _ => kernels::moe_align_fused::<64, 128, $ep, $er, 64>(
                        &flat, ne, total, expert_ids, sorted_ids,
                    )
                    .grid((1, 1, 1))
                    .launch(stream)?,
                }
            };
        }
        match experts {
            ..=16 => fused!(16, 1),
            17..=64 => fused!(64, 4),
            65..=128 => fused!(128, 8),
            _ => fused!(256, 16),
        }
        return Ok(());
    }
    let ep = align_columns(experts);
    let chunks = ceil_div(pairs, BT).max(1);
    let counts = reuse(&mut ws.counts, stream, &[chunks, ep])?;
    let start = reuse(&mut ws.start, stream, &[ep])?;
    let n = pairs as i32;
    let grid = (u32_of(OP, chunks)?, 1, 1);
    macro_rules! go {
        ($ep:literal, $er:literal) => {{
            kernels::moe_align_hist::<64, $ep>(&flat, counts)
                .grid(grid)
                .launch(stream)?;
            match bm {
                16 => kernels::moe_align_plan::<16, $ep, $er, 16, 64>(
                    counts, ne, n, start, total, expert_ids, sorted_ids,
                )
                .grid((1, 1, 1))
                .launch(stream)?,
                32 => kernels::moe_align_plan::<32, $ep, $er, 16, 64>(
                    counts, ne, n, start, total, expert_ids, sorted_ids,
                )
                .grid((1, 1, 1))
                .launch(stream)?,
                64 => kernels::moe_align_plan::<64, $ep, $er, 16, 64>(
                    counts, ne, n, start, total, expert_ids, sorted_ids,
                )
                .grid((1, 1, 1))
                .launch(stream)?,
                _ => kernels::moe_align_plan::<128, $ep, $er, 16, 64>(
                    counts, ne, n, start, total, expert_ids, sorted_ids,
                )
                .grid((1, 1, 1))
                .launch(stream)?,
            }
            kernels::moe_align_scatter::<64, $ep, 16>(&flat, counts, start, sorted_ids)
                .grid(grid)
                .launch(stream)?;
        }};
    }
    match ep {
        16 => go!(16, 1),
        64 => go!(64, 4),
        128 => go!(128, 8),
        _ => go!(256, 16),
    }
    Ok(())
}

/// Router logits `logits: [T, E]` (`E <= 256`) → top-`k` expert `ids` and `weights`, both `[T, k]`
/// (`k <= min(8, E)`), as [`reference::route`](super::reference::route): softmax then top-k (optionally
/// renormalized), or sigmoid with a selection-only `bias: [E]` (required in that mode) and an optional
/// expert-group limit (`E` 8, 64, 128 or 256; 2, 4, 8 or 16 groups of at least two experts; `k` at
/// most the kept groups' experts). One launch.
pub fn moe_route<L: Float + DeviceElement>(
    stream: &Stream,
    logits: &Tensor<L>,
    mode: super::reference::RoutingMode,
    bias: Option<&Tensor<f32>>,
    ids: &mut Tensor<i32>,
    weights: &mut Tensor<f32>,
) -> Result<(), OpError> {
    use super::dsl::kernels::{SIGMOID_BIAS, SOFTMAX, SOFTMAX_RENORM};
    use super::reference::RoutingMode;
    const OP: &str = "moe_route";
    let sh = logits.shape().to_vec();
    if sh.len() != 2 {
        return Err(OpError::Rank {
            op: OP,
            arg: "logits",
            expected: "2 ([T, E])".into(),
            shape: sh,
        });
    }
    let (t, e) = (sh[0], sh[1]);
    let k = ids.shape().get(1).copied().unwrap_or(0);
    expect(OP, "ids", ids.shape(), &[t, k])?;
    expect(OP, "weights", weights.shape(), &[t, k])?;
    if !(1..=256).contains(&e) || k < 1 || k > e.min(8) {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!(
                "E = {e} and k = {k}: the kernel takes 1 <= E <= 256 and 1 <= k <= min(8, E)"
            ),
        });
    }
    let (mode_c, scale, limit) = match mode {
        RoutingMode::SoftmaxTopK { renormalize: false } => (SOFTMAX, 1.0, None),
        RoutingMode::SoftmaxTopK { renormalize: true } => (SOFTMAX_RENORM, 1.0, None),
        RoutingMode::SigmoidBias { scale, group_limit } => (SIGMOID_BIAS, scale, group_limit),
    };
    if let Some(l) = limit {
        check_group_limit(e, k, l)?;
    }
    let zeros;
    let bias = match (bias, mode_c == SIGMOID_BIAS) {
        (Some(b), true) => {
            expect(OP, "bias", b.shape(), &[e])?;
            b
        }
        (None, true) => {
            return Err(OpError::Unsupported {
                op: OP,
                what: "the sigmoid mode needs a `bias` of shape [E]".into(),
            });
        }
        (_, false) => {
            zeros = Tensor::<f32>::zeros(stream.device(), &[e])?;
            &zeros
        }
    };
    if t == 0 {
        return Ok(());
    }
    let ep = if e <= 8 {
        8
    } else {
        (e as u64).next_power_of_two().max(64) as i64
    };
    let kp = if k <= 2 { 2 } else { 8 };
    let (groups, keep) = limit.map_or((1, 0), |l| (l.groups as i64, l.keep as i32));
    macro_rules! go {
        // No group limit: the three modes.
        ($bt:literal, $ep:literal, $kp:literal) => {
            match (mode_c, groups) {
                (SOFTMAX, _) => kernels::moe_route::<L, SOFTMAX, $bt, $ep, $kp, 1, $ep>(
                    logits, bias, scale, keep, ids, weights,
                )
                .launch(stream)?,
                (SOFTMAX_RENORM, _) => {
                    kernels::moe_route::<L, SOFTMAX_RENORM, $bt, $ep, $kp, 1, $ep>(
                        logits, bias, scale, keep, ids, weights,
                    )
                    .launch(stream)?
                }
                (_, 2) => go!($bt, $ep, $kp, 2),
                (_, 4) => go!($bt, $ep, $kp, 4),
                (_, 8) => go!($bt, $ep, $kp, 8),
                (_, 16) => go!($bt, $ep, $kp, 16),
                _ => kernels::moe_route::<L, SIGMOID_BIAS, $bt, $ep, $kp, 1, $ep>(
                    logits, bias, scale, keep, ids, weights,
                )
                .launch(stream)?,
            }
        };
        // The sigmoid mode's group limit: `$gr` groups of `$ep / $gr` experts.
        ($bt:literal, $ep:literal, $kp:literal, $gr:literal) => {{
            const GS: i32 = $ep / $gr;
            kernels::moe_route::<L, SIGMOID_BIAS, $bt, $ep, $kp, $gr, GS>(
                logits, bias, scale, keep, ids, weights,
            )
            .launch(stream)?
        }};
    }
    match (ep, kp) {
        (8, 2) => go!(16, 8, 2),
        (8, _) => go!(16, 8, 8),
        (64, 2) => go!(16, 64, 2),
        (64, _) => go!(16, 64, 8),
        (128, 2) => go!(8, 128, 2),
        (128, _) => go!(8, 128, 8),
        (_, 2) => go!(8, 256, 2),
        _ => go!(8, 256, 8),
    }
    Ok(())
}

/// The group limits `moe_route` takes for `e` experts and top-`k`: the kernel reshapes the `[T, E]`
/// scores into `[T, groups, E / groups]` tiles, so `E` must be its padded width (8, 64, 128 or 256).
pub fn check_group_limit(
    e: i64,
    k: i64,
    limit: super::reference::GroupLimit,
) -> Result<(), OpError> {
    let (g, keep) = (limit.groups as i64, limit.keep as i64);
    let why = if ![8, 64, 128, 256].contains(&e) {
        Some(format!(
            "E = {e}: a group limit needs E of 8, 64, 128 or 256"
        ))
    } else if ![2, 4, 8, 16].contains(&g) || e / g < 2 {
        Some(format!(
            "{g} groups of E = {e}: take 2, 4, 8 or 16 groups of at least two experts each \
             (no limit: `group_limit: None`)"
        ))
    } else if keep < 1 || keep > g {
        Some(format!("keep = {keep} of {g} groups: keep 1 to {g}"))
    } else if k > keep * (e / g) {
        Some(format!(
            "k = {k} from {keep} groups of {} experts: keep at least {} groups",
            e / g,
            (k + e / g - 1) / (e / g)
        ))
    } else {
        None
    };
    match why {
        Some(what) => Err(OpError::Unsupported {
            op: "moe_route",
            what,
        }),
        None => Ok(()),
    }
}
