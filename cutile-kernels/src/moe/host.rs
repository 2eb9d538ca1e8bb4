//! The family's host functions over runtime tensors: NVFP4 quantize / dequantize, top-k routing, and
//! one MoE layer (W4A16 or dense weights) given the routing's aligned order. Shapes are checked (typed
//! [`OpError`]s, never a panic); each function queues its launches on `stream` and waits.
//!
//! Intermediates (`part` of the quantizer, `h` and `y` of a layer) are allocated per call: these
//! functions are the kernels' first host surface, not yet the planned, scratch-backed ops of the
//! other families (see `docs/moe.md`).

use cutile::core::{Float, MmaOperand};
use cutile::runtime::{DeviceElement, Stream, Tensor};

use super::kernels;
use super::reference::BLOCK;
use crate::op::{OpError, ceil_div};

/// The activation types of the family: bf16 and f16.
pub trait MoeElem: Float + MmaOperand<f32> + DeviceElement {}
impl MoeElem for half::bf16 {}
impl MoeElem for half::f16 {}

/// GEMM row block (rows of the aligned order per block): the `block` to align with.
pub const BM: i64 = 64;
const BN: i64 = 64;
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

/// Dequantizes NVFP4 `w: [G, N, K/2]`, `s: [G, N, K/16]`, `global: [G]` into `y: [G, N, K]`.
pub fn nvfp4_dequantize<E: MoeElem>(
    stream: &Stream,
    w: &Tensor<i8>,
    s: &Tensor<i8>,
    global: &Tensor<f32>,
    y: &mut Tensor<E>,
) -> Result<(), OpError> {
    const OP: &str = "nvfp4_dequantize";
    let sh = y.shape().to_vec();
    if sh.len() != 3 {
        return Err(OpError::Rank {
            op: OP,
            arg: "y",
            expected: "3 ([groups, rows, K])".into(),
            shape: sh,
        });
    }
    let (g, n, k) = (sh[0], sh[1], sh[2]);
    if k % (2 * BLOCK as i64) != 0 {
        return Err(shape_err(OP, "K must be a multiple of 32", &[k], &[32]));
    }
    expect(OP, "w", w.shape(), &[g, n, k / 2])?;
    expect(OP, "s", s.shape(), &[g, n, k / BLOCK as i64])?;
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

/// The routing of a layer in the aligned order of `moe_align_block_size` with block [`BM`]:
/// `sorted_ids: [P]` pair ids (`t·k + j`; padding rows `T·k`), `expert_ids: [P / BM]`, `total: [1]`
/// (the padded rows used), `weights: [T·k]` the routed weights (f32), `topk` = k.
#[derive(Debug)]
pub struct Routing<'a> {
    pub sorted_ids: &'a Tensor<i32>,
    pub expert_ids: &'a Tensor<i32>,
    pub total: &'a Tensor<i32>,
    pub weights: &'a Tensor<f32>,
    pub topk: i32,
}

/// One MoE layer: `out[t] = Σ_j w[t,j] · W2[e] (silu(W13[e, :I] x[t]) ⊙ W13[e, I:] x[t])`, `x: [T, H]`,
/// `out: [T, H]`. `H` and `I` must be multiples of 64 (the GEMM tiles; NVFP4 also needs them to be
/// multiples of 32 for the packing).
pub fn moe_layer<E: MoeElem>(
    stream: &Stream,
    x: &Tensor<E>,
    weights: &Weights<'_, E>,
    routing: &Routing<'_>,
    out: &mut Tensor<E>,
) -> Result<(), OpError> {
    const OP: &str = "moe_layer";
    let xs = x.shape().to_vec();
    if xs.len() != 2 {
        return Err(OpError::Rank {
            op: OP,
            arg: "x",
            expected: "2 ([T, H])".into(),
            shape: xs,
        });
    }
    let (t, h) = (xs[0], xs[1]);
    let (ne, i2) = match weights {
        Weights::Nvfp4 { w13, .. } => (w13.shape()[0], w13.shape()[1]),
        Weights::Dense { w13, .. } => (w13.shape()[0], w13.shape()[1]),
    };
    let i = i2 / 2;
    if h % BN != 0 || i % BN != 0 || i2 != 2 * i {
        return Err(shape_err(
            OP,
            "H and I must be multiples of 64",
            &[h, i],
            &[BN, BN],
        ));
    }
    match weights {
        Weights::Nvfp4 {
            w13,
            s13,
            g13,
            w2,
            s2,
            g2,
        } => {
            expect(OP, "w13", w13.shape(), &[ne, 2 * i, h / 2])?;
            expect(OP, "s13", s13.shape(), &[ne, 2 * i, h / 16])?;
            expect(OP, "g13", g13.shape(), &[ne])?;
            expect(OP, "w2", w2.shape(), &[ne, h, i / 2])?;
            expect(OP, "s2", s2.shape(), &[ne, h, i / 16])?;
            expect(OP, "g2", g2.shape(), &[ne])?;
        }
        Weights::Dense { w13, w2 } => {
            expect(OP, "w13", w13.shape(), &[ne, 2 * i, h])?;
            expect(OP, "w2", w2.shape(), &[ne, h, i])?;
        }
    }
    let k = i64::from(routing.topk);
    if k < 1 || k > ne {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("top-k {k} must be in 1..={ne}"),
        });
    }
    let p = routing.sorted_ids.shape().first().copied().unwrap_or(0);
    if p % BM != 0 {
        return Err(shape_err(
            OP,
            "`sorted_ids` must hold whole blocks of 64",
            &[p],
            &[BM],
        ));
    }
    expect(OP, "expert_ids", routing.expert_ids.shape(), &[p / BM])?;
    expect(OP, "total", routing.total.shape(), &[1])?;
    expect(OP, "weights", routing.weights.shape(), &[t * k])?;
    expect(OP, "out", out.shape(), &[t, h])?;
    if t == 0 || p == 0 {
        return Ok(());
    }
    let dev = stream.device();
    let mut hbuf = Tensor::<E>::zeros(dev, &[p, i])?;
    let mut y = Tensor::<f32>::zeros(dev, &[t * k, h])?;
    let g1 = (u32_of(OP, p / BM)?, u32_of(OP, i / BN)?, 1);
    let g2 = (u32_of(OP, p / BM)?, u32_of(OP, h / BN)?, 1);
    let r = routing;
    match weights {
        Weights::Nvfp4 {
            w13,
            s13,
            g13,
            w2,
            s2,
            g2: gs2,
        } => {
            kernels::moe_gemm1_w4a16::<E, 64, 64, 64, 32, 4>(
                x,
                *w13,
                *s13,
                *g13,
                r.sorted_ids,
                r.expert_ids,
                r.total,
                r.topk,
                &mut hbuf,
            )
            .grid(g1)
            .launch(stream)?;
            kernels::moe_gemm2_w4a16::<E, 64, 64, 64, 32, 4>(
                &hbuf,
                *w2,
                *s2,
                *gs2,
                r.sorted_ids,
                r.expert_ids,
                r.total,
                r.weights,
                &mut y,
            )
            .grid(g2)
            .launch(stream)?;
        }
        Weights::Dense { w13, w2 } => {
            kernels::moe_gemm1_dense::<E, 64, 64, 64>(
                x,
                *w13,
                r.sorted_ids,
                r.expert_ids,
                r.total,
                r.topk,
                &mut hbuf,
            )
            .grid(g1)
            .launch(stream)?;
            kernels::moe_gemm2_dense::<E, 64, 64, 64>(
                &hbuf,
                *w2,
                r.sorted_ids,
                r.expert_ids,
                r.total,
                r.weights,
                &mut y,
            )
            .grid(g2)
            .launch(stream)?;
        }
    }
    let y3 = y.reshape(&[t, k, h])?;
    kernels::moe_combine::<E, 8, 512>(&y3, out).launch(stream)?;
    Ok(())
}

/// Router logits `logits: [T, E]` (`E <= 256`) → top-`k` expert `ids` and `weights`, both `[T, k]`
/// (`k <= min(8, E)`), as [`reference::route`](super::reference::route): softmax then top-k (optionally
/// renormalized), or sigmoid with a selection-only `bias: [E]` (required in that mode). One launch.
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
    let (mode_c, scale) = match mode {
        RoutingMode::SoftmaxTopK { renormalize: false } => (SOFTMAX, 1.0),
        RoutingMode::SoftmaxTopK { renormalize: true } => (SOFTMAX_RENORM, 1.0),
        RoutingMode::SigmoidBias { scale } => (SIGMOID_BIAS, scale),
    };
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
    macro_rules! go {
        ($m:expr, $bt:literal, $ep:literal, $kp:literal) => {
            match $m {
                SOFTMAX => kernels::moe_route::<L, SOFTMAX, $bt, $ep, $kp>(
                    logits, bias, scale, ids, weights,
                )
                .launch(stream)?,
                SOFTMAX_RENORM => kernels::moe_route::<L, SOFTMAX_RENORM, $bt, $ep, $kp>(
                    logits, bias, scale, ids, weights,
                )
                .launch(stream)?,
                _ => kernels::moe_route::<L, SIGMOID_BIAS, $bt, $ep, $kp>(
                    logits, bias, scale, ids, weights,
                )
                .launch(stream)?,
            }
        };
    }
    match (ep, kp) {
        (8, 2) => go!(mode_c, 16, 8, 2),
        (8, _) => go!(mode_c, 16, 8, 8),
        (64, 2) => go!(mode_c, 16, 64, 2),
        (64, _) => go!(mode_c, 16, 64, 8),
        (128, 2) => go!(mode_c, 8, 128, 2),
        (128, _) => go!(mode_c, 8, 128, 8),
        (_, 2) => go!(mode_c, 8, 256, 2),
        _ => go!(mode_c, 8, 256, 8),
    }
    Ok(())
}
