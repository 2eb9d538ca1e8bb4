//! Every op by name, with how to plan a call of it from a [`CallSpec`] (op, element type, input shapes):
//! what `cargo xtask aot --ops .. --shapes ..` and the GPU runner use to know which kernels a set of host
//! calls needs, without a device.
//!
//! A bundle built from the plans of some calls serves every call of the same *class*: the kernel cache
//! key holds the element type, each extent's and stride's power-of-two divisibility up to 16, the
//! index width (i32 unless an extent needs i64) and the configuration the family chose, not the extents
//! themselves (a 1000x1023 and a 2024x4095 softmax share their cubin).

use cutile::launch::{Launcher, Plan};
use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType;

use super::{OpError, Operand, PlannedLaunch, Target, describe};
use crate::{
    activation, attention, cross_entropy, dropout, embedding, fused_qkv, gemm, kv_cache, norm,
    rope, sampling, softmax, vector_add,
};

/// One host call, described: `shapes` are the op's input shapes in order (see [`OpInfo::inputs`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallSpec {
    pub op: String,
    /// `f32`, `f16` or `bf16`.
    pub dtype: String,
    pub shapes: Vec<Vec<i64>>,
    /// Attention only.
    #[serde(default)]
    pub causal: bool,
}

/// An op in the registry.
#[derive(Debug, Clone, Copy)]
pub struct OpInfo {
    pub name: &'static str,
    pub family: &'static str,
    /// What [`CallSpec::shapes`] lists for this op.
    pub inputs: &'static str,
    plan: fn(&CallSpec, ScalarType, &Target, bool) -> Result<PlannedCall, OpError>,
}

/// A call's described operands and its launches.
#[derive(Debug, Clone)]
pub struct PlannedCall {
    pub operands: Vec<Operand>,
    pub launches: Vec<PlannedLaunch>,
}

/// Parses an element type name.
pub fn parse_dtype(s: &str) -> Option<ScalarType> {
    Some(match s.to_ascii_lowercase().as_str() {
        "f32" | "float32" | "float" => ScalarType::F32,
        "f16" | "float16" | "half" => ScalarType::F16,
        "bf16" | "bfloat16" => ScalarType::BF16,
        // fp8 operands of the `gemm_fp8_*` ops (byte tensors read as these codes).
        "f8e4m3" | "f8e4m3fn" | "e4m3" | "float8_e4m3fn" => ScalarType::F8E4M3FN,
        "f8e5m2" | "e5m2" | "float8_e5m2" => ScalarType::F8E5M2,
        _ => return None,
    })
}

fn shapes<const N: usize>(op: &'static str, spec: &CallSpec) -> Result<[Vec<i64>; N], OpError> {
    <[Vec<i64>; N]>::try_from(spec.shapes.clone()).map_err(|s| OpError::Unsupported {
        op,
        what: format!("a call spec lists {N} input shape(s), got {}", s.len()),
    })
}

fn d(name: &'static str, i: usize, dt: ScalarType, shape: &[i64]) -> Operand {
    Operand::described(name, i, dt, shape)
}

fn plan_softmax(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let [x] = shapes(softmax::OP, spec)?;
    let operands = softmax::with_scratch(&[d("x", 0, dt, &x), d("y", 1, dt, &x)], t, all)?;
    let launches = softmax::plan(&operands, t, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_norm(
    op: &'static str,
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let [x] = shapes(op, spec)?;
    let cols = [x.last().copied().unwrap_or(1)];
    let lead = &x[..x.len().saturating_sub(1)];
    let mut operands = vec![d("x", 0, dt, &x)];
    if op == norm::ADD_RMS_NORM {
        operands.push(d("r", 1, dt, &x));
    }
    operands.push(d("w", operands.len(), dt, &cols));
    if op == norm::LAYER_NORM || op == norm::LAYER_NORM_STATS {
        operands.push(d("b", operands.len(), dt, &cols));
    }
    if op == norm::ADD_RMS_NORM {
        operands.push(d("h", operands.len(), dt, &x));
    }
    operands.push(d("y", operands.len(), dt, &x));
    if op == norm::LAYER_NORM_STATS {
        operands.push(d("mean", operands.len(), ScalarType::F32, lead));
        operands.push(d("rstd", operands.len(), ScalarType::F32, lead));
    }
    let launches = norm::plan(op, &operands, t, 1e-5, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_rms(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    plan_norm(norm::RMS_NORM, spec, dt, t, all)
}

fn plan_ln(spec: &CallSpec, dt: ScalarType, t: &Target, all: bool) -> Result<PlannedCall, OpError> {
    plan_norm(norm::LAYER_NORM, spec, dt, t, all)
}

fn plan_add_rms(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    plan_norm(norm::ADD_RMS_NORM, spec, dt, t, all)
}

fn plan_ln_stats(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    plan_norm(norm::LAYER_NORM_STATS, spec, dt, t, all)
}

fn plan_rms_heads(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let [x] = shapes(norm::RMS_NORM_HEADS, spec)?;
    let head = [x.last().copied().unwrap_or(1)];
    let operands = vec![d("x", 0, dt, &x), d("w", 1, dt, &head), d("y", 2, dt, &x)];
    let launches = norm::plan_rms_norm_heads(&operands, t, 1e-6, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_gemm(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let [a, b] = shapes(gemm::OP, spec)?;
    let c = [
        a.first().copied().unwrap_or(0),
        b.get(1).copied().unwrap_or(0),
    ];
    let operands = gemm::with_scratch(
        &[d("a", 0, dt, &a), d("b", 1, dt, &b), d("c", 2, dt, &c)],
        t,
    )?;
    // f32 calls plan the tf32 product, the only f32 one (an opt-in of the host API).
    let options = gemm::GemmOptions { allow_tf32: true };
    let launches = gemm::plan_with(&operands, t, &options, all)?;
    Ok(PlannedCall { operands, launches })
}

/// An fp8 GEMM op (any of [`gemm::fp8::OPS`]): `[a, b]` shapes (`b` described column-major, the fast
/// layout), and `[f]` or `[f, l]` after them (`f = 1`: fast accumulation; `l = 1`: block scales' `sa`
/// M-major, which plans its row-major copy first); the scales follow from the op's mode, the output
/// is bf16.
fn plan_gemm_fp8(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    use gemm::fp8::{Fp8Format, ScaleMode};
    let mode = ScaleMode::of_op(&spec.op).ok_or_else(|| OpError::UnknownOp {
        name: spec.op.clone(),
        known: ops().iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
    })?;
    let format = Fp8Format::of(dt).ok_or_else(|| OpError::Unsupported {
        op: mode.op(),
        what: format!("element type {dt}: the op takes f8e4m3 or f8e5m2"),
    })?;
    let fp8_spec = gemm::fp8::spec_shapes(&spec.shapes).ok_or_else(|| OpError::Unsupported {
        op: mode.op(),
        what: format!(
            "a call spec lists [a, b], [a, b, [fast]] or [a, b, [fast, sa_m_major]] shapes (1 for \
             fast accumulation, 1 for block scales' `sa` M-major), got {:?}",
            spec.shapes
        ),
    })?;
    let operands = gemm::fp8::spec_operands(format, mode, &fp8_spec, t)?;
    let launches = gemm::fp8::plan_fp8(&operands, t, mode, fp8_spec.fast, all)?;
    Ok(PlannedCall { operands, launches })
}

/// A GEMM epilogue op (any of [`gemm::epilogue::OPS`]): `[a, b]` shapes; bias and residual follow.
fn plan_gemm_epilogue(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let op = gemm::epilogue::find(&spec.op).ok_or_else(|| OpError::UnknownOp {
        name: spec.op.clone(),
        known: ops().iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
    })?;
    let [a, b] = shapes(op.name, spec)?;
    let operands = op.described_operands(dt, &a, &b, t)?;
    // As for `gemm`: f32 plans the tf32 product.
    let options = gemm::GemmOptions { allow_tf32: true };
    let launches = gemm::epilogue::plan_epilogue(&operands, t, &op.spec, &options)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_bmm(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let [a, b] = shapes(gemm::BMM, spec)?;
    let c = [
        a.first().copied().unwrap_or(0),
        a.get(1).copied().unwrap_or(0),
        b.get(2).copied().unwrap_or(0),
    ];
    let operands = vec![d("a", 0, dt, &a), d("b", 1, dt, &b), d("c", 2, dt, &c)];
    // As for `gemm`: f32 plans the tf32 product.
    let options = gemm::GemmOptions { allow_tf32: true };
    let launches = gemm::plan_bmm(&operands, t, &options)?;
    Ok(PlannedCall { operands, launches })
}

/// The grouped GEMM: `[[total_m, k], [G, k, n], group_rows]` (+ `[1]`: `b` a transposed view).
fn plan_grouped_gemm(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let (ops, offsets) = gemm::grouped::described_call(dt, &spec.shapes)?;
    // As for `gemm`: f32 plans the tf32 product.
    let options = gemm::GemmOptions { allow_tf32: true };
    let (operands, launches) = gemm::grouped::plan(&ops, &offsets, t, &options, all)?;
    Ok(PlannedCall { operands, launches })
}

/// The grouped GEMM's entry (its own list, so families adding ops do not edit one array).
const GROUPED_OPS: [OpInfo; 1] = [OpInfo {
    name: gemm::grouped::OP,
    family: "gemm",
    inputs: gemm::grouped::SPEC_INPUTS,
    plan: plan_grouped_gemm,
}];

fn plan_attention(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let [q, k] = shapes(attention::OP, spec)?;
    let operands = vec![
        d("q", 0, dt, &q),
        d("k", 1, dt, &k),
        d("v", 2, dt, &k),
        d("o", 3, dt, &q),
    ];
    let options = attention::AttentionOptions {
        causal: spec.causal,
        scale: None,
        ..Default::default()
    };
    let launches = attention::plan(&operands, t, &options, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_decode(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    use attention::decode;
    let (ops, paged) = decode::described_call(&spec.op, dt, &spec.shapes)?;
    let options = decode::DecodeOptions::default();
    let operands = decode::with_scratch_for(&ops, paged, t, &options, all)?;
    let launches = decode::plan_all(&operands, paged, t, &options, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_mla_decode(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    use attention::mla;
    let (ops, paged) = mla::described_call(&spec.op, dt, &spec.shapes)?;
    let options = mla::MlaDecodeOptions::default();
    let operands = mla::with_scratch_for(&ops, paged, t, &options, all)?;
    let launches = mla::plan_decode_all(&operands, paged, t, &options, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_mla_prefill(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    use attention::mla;
    let operands = mla::described_prefill(dt, &spec.shapes)?;
    let options = mla::MlaPrefillOptions {
        causal: spec.causal,
        scale: None,
    };
    let launches = mla::plan_prefill(&operands, t, &options)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_attention_variant(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let (operands, launches) = attention::plan_spec(&spec.op, dt, &spec.shapes, spec.causal, t)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_fused_qkv(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let (ops, opts) = fused_qkv::described_call(dt, &spec.shapes)?;
    let operands = fused_qkv::with_scratch(&ops, &opts, t, all)?;
    let launches = fused_qkv::plan(&operands, &opts, t, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_cross_entropy(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let (ops, opts) = cross_entropy::described_call(dt, &spec.shapes)?;
    let operands = cross_entropy::with_scratch(&ops, &opts, t)?;
    let launches = cross_entropy::plan(&operands, &opts, t)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_add(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let [a] = shapes(vector_add::ADD, spec)?;
    let operands = vec![d("a", 0, dt, &a), d("b", 1, dt, &a), d("c", 2, dt, &a)];
    let launches = vector_add::plan_add(&operands, t)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_axpy(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let [x] = shapes(vector_add::AXPY, spec)?;
    let operands = vec![d("x", 0, dt, &x), d("y", 1, dt, &x)];
    let launches = vector_add::plan_axpy(&operands, t, 1.0)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_rope(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let (operands, opts) = rope::described_call(dt, &spec.shapes)?;
    let launches = rope::plan_with(&operands, t, opts.style, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_kv_cache(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let operands = kv_cache::described_call(&spec.op, dt, &spec.shapes)?;
    let launches = kv_cache::plan(&spec.op, &operands, t)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_embedding(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let operands = embedding::described_call(dt, &spec.shapes)?;
    let launches = embedding::plan(&operands, t)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_sampling(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let operands = sampling::with_scratch(
        &spec.op,
        &sampling::described_call(&spec.op, dt, &spec.shapes)?,
        t,
    );
    let mut launches = sampling::plan(&spec.op, &operands, t)?;
    if all && spec.op == sampling::ARGMAX && launches.len() > 1 {
        let x = &operands[0].shape;
        // The default's launches first, then every other candidate's chunk kernel (the merge is the
        // same kernel).
        for c in &sampling::config::argmax_candidates(x[0], x[1], t.sm_count)[1..] {
            launches.push(sampling::plan_argmax_with(&operands, t, c)?.remove(0));
        }
    }
    Ok(PlannedCall { operands, launches })
}

fn plan_norm_backward(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    let op = norm::backward::RMS_NORM_BACKWARD;
    let [x] = shapes(op, spec)?;
    let ops = norm::backward::described_call(&spec.op, dt, &x)?;
    let operands = norm::backward::with_scratch(&spec.op, &ops, t)?;
    let launches = norm::backward::plan(&spec.op, &operands, t, 1e-5)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_dropout(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let operands = dropout::described_call(&spec.op, dt, &spec.shapes)?;
    let launches = dropout::plan_with(&spec.op, &operands, t, dropout::SPEC_PARAMS, all)?;
    Ok(PlannedCall { operands, launches })
}

fn plan_attention_backward(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    _all: bool,
) -> Result<PlannedCall, OpError> {
    use attention::backward;
    let ops = backward::described_call(dt, &spec.shapes)?;
    let options = attention::AttentionOptions {
        causal: spec.causal,
        ..Default::default()
    };
    let operands = backward::with_scratch(&ops, t, &options)?;
    let launches = backward::plan_backward(&operands, t, &options)?;
    Ok(PlannedCall { operands, launches })
}

/// The training ops (norm backward passes, dropout, fused linear + cross-entropy, attention backward).
const TRAINING_OPS: [OpInfo; 6] = [
    OpInfo {
        name: dropout::OP,
        family: "dropout",
        inputs: "[x] (y has x's shape; p = 0.1, a fixed seed)",
        plan: plan_dropout,
    },
    OpInfo {
        name: dropout::BACKWARD,
        family: "dropout",
        inputs: "[dy] (dx has dy's shape; p = 0.1, a fixed seed)",
        plan: plan_dropout,
    },
    OpInfo {
        name: norm::RMS_NORM_BACKWARD,
        family: "norm",
        inputs: "[x] (w, dw are [cols]; dy, dx have x's shape)",
        plan: plan_norm_backward,
    },
    OpInfo {
        name: norm::LAYER_NORM_BACKWARD,
        family: "norm",
        inputs: "[x] (w, dw, db are [cols]; dy, dx have x's shape; mean, rstd f32 of x's leading shape)",
        plan: plan_norm_backward,
    },
    OpInfo {
        name: cross_entropy::OP,
        family: "cross_entropy",
        inputs: cross_entropy::SPEC_INPUTS,
        plan: plan_cross_entropy,
    },
    OpInfo {
        name: attention::BACKWARD_OP,
        family: "attention",
        inputs: attention::BACKWARD_INPUTS,
        plan: plan_attention_backward,
    },
];

/// The transformer ops (RoPE, KV-cache writes, embedding, sampling).
const TRANSFORMER_OPS: [OpInfo; 6] = [
    OpInfo {
        name: rope::OP,
        family: "rope",
        inputs: rope::SPEC_INPUTS,
        plan: plan_rope,
    },
    OpInfo {
        name: kv_cache::OP,
        family: "kv_cache",
        inputs: kv_cache::SPEC_INPUTS,
        plan: plan_kv_cache,
    },
    OpInfo {
        name: kv_cache::OP_PAGED,
        family: "kv_cache",
        inputs: kv_cache::SPEC_INPUTS,
        plan: plan_kv_cache,
    },
    OpInfo {
        name: embedding::OP,
        family: "embedding",
        inputs: embedding::SPEC_INPUTS,
        plan: plan_embedding,
    },
    OpInfo {
        name: sampling::ARGMAX,
        family: "sampling",
        inputs: "[[T, V]] (out is i64 [T])",
        plan: plan_sampling,
    },
    OpInfo {
        name: sampling::TOPK,
        family: "sampling",
        inputs: "[[T, V], [k]] (values [T, k], indices i64 [T, k])",
        plan: plan_sampling,
    },
];

/// An activation op (any of [`activation::OPS`]): the input shape is `x`'s (`a`'s for the pair ops);
/// the other operands follow from it (`activation::OpSpec::operand_shapes`).
fn plan_activation(
    spec: &CallSpec,
    dt: ScalarType,
    t: &Target,
    all: bool,
) -> Result<PlannedCall, OpError> {
    let op = activation::find(&spec.op).ok_or_else(|| OpError::UnknownOp {
        name: spec.op.clone(),
        known: ops().iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
    })?;
    let [x] = shapes(op.name, spec)?;
    let operands = activation::described_operands(op, dt, &x)?;
    let launches = activation::plan(op.name, &operands, t, all)?;
    Ok(PlannedCall { operands, launches })
}

macro_rules! activation_ops {
    ($($name:ident: $inputs:literal),* $(,)?) => {
        [$(OpInfo {
            name: activation::$name,
            family: "activation",
            inputs: $inputs,
            plan: plan_activation,
        }),*]
    };
}

/// The activation family's entries, in [`activation::OPS`] order.
const ACTIVATION_OPS: [OpInfo; 14] = activation_ops!(
    SILU_AND_MUL: "[x] ([.., 2N]; y is [.., N])",
    SILU_AND_MUL_BACKWARD: "[x] ([.., 2N]; grad_out is [.., N], grad_x [.., 2N])",
    SWIGLU: "[a] (b and y have a's shape)",
    SWIGLU_BACKWARD: "[a] (b, grad_out, grad_a, grad_b have a's shape)",
    GELU: "[x]",
    GELU_BACKWARD: "[x] (grad_out and grad_x have x's shape)",
    GELU_TANH: "[x]",
    GELU_TANH_BACKWARD: "[x] (grad_out and grad_x have x's shape)",
    GEGLU: "[x] ([.., 2N]; y is [.., N])",
    GEGLU_BACKWARD: "[x] ([.., 2N]; grad_out is [.., N], grad_x [.., 2N])",
    GEGLU_TANH: "[x] ([.., 2N]; y is [.., N])",
    GEGLU_TANH_BACKWARD: "[x] ([.., 2N]; grad_out is [.., N], grad_x [.., 2N])",
    RELU: "[x]",
    RELU_BACKWARD: "[x] (grad_out and grad_x have x's shape)",
);

/// Every op of the catalog.
pub fn ops() -> &'static [OpInfo] {
    static ALL: std::sync::LazyLock<Vec<OpInfo>> = std::sync::LazyLock::new(|| {
        let epilogue: Vec<OpInfo> = gemm::epilogue::OPS
            .iter()
            .map(|o| OpInfo {
                name: o.name,
                family: "gemm",
                inputs: "[m, k] [k, n] (bias [n], residual [m, n] as the op's name says)",
                plan: plan_gemm_epilogue,
            })
            .collect();
        [
            BASE_OPS.as_slice(),
            &ACTIVATION_OPS,
            &TRANSFORMER_OPS,
            &TRAINING_OPS,
            &FP8_OPS,
            &epilogue,
            &GROUPED_OPS,
        ]
        .concat()
    });
    &ALL
}

/// The fp8 GEMM ops (`gemm::fp8`), by scale mode.
const FP8_OPS: [OpInfo; 3] = [
    OpInfo {
        name: gemm::fp8::OP_TENSOR,
        family: "gemm",
        inputs: "[a, b] or [a, b, [1]] (fast accumulation) ([m, k], [k, n] fp8; sa, sb one f32 each; c [m, n] bf16)",
        plan: plan_gemm_fp8,
    },
    OpInfo {
        name: gemm::fp8::OP_ROW,
        family: "gemm",
        inputs: "[a, b] or [a, b, [1]] (fast accumulation) ([m, k], [k, n] fp8; sa [m, 1], sb [1, n] f32; c [m, n] bf16)",
        plan: plan_gemm_fp8,
    },
    OpInfo {
        name: gemm::fp8::OP_BLOCK,
        family: "gemm",
        inputs: "[a, b], [a, b, [f]] or [a, b, [f, 1]] (f = 1: fast accumulation; [f, 1]: sa M-major, copied row-major first) ([m, k], [k, n] fp8; sa [m, k/128], sb [k/128, n/128] f32; c [m, n] bf16)",
        plan: plan_gemm_fp8,
    },
];

/// The ops of the families before the activations.
const BASE_OPS: [OpInfo; 19] = [
    OpInfo {
        name: vector_add::ADD,
        family: "vector_add",
        inputs: "[a]",
        plan: plan_add,
    },
    OpInfo {
        name: vector_add::AXPY,
        family: "vector_add",
        inputs: "[x]",
        plan: plan_axpy,
    },
    OpInfo {
        name: softmax::OP,
        family: "softmax",
        inputs: "[x]",
        plan: plan_softmax,
    },
    OpInfo {
        name: norm::RMS_NORM,
        family: "norm",
        inputs: "[x]",
        plan: plan_rms,
    },
    OpInfo {
        name: norm::LAYER_NORM,
        family: "norm",
        inputs: "[x]",
        plan: plan_ln,
    },
    OpInfo {
        name: norm::ADD_RMS_NORM,
        family: "norm",
        inputs: "[x] (r, h and y have x's shape)",
        plan: plan_add_rms,
    },
    OpInfo {
        name: norm::RMS_NORM_HEADS,
        family: "norm",
        inputs: "[x] ([T, H, D]; w is [D])",
        plan: plan_rms_heads,
    },
    OpInfo {
        name: norm::LAYER_NORM_STATS,
        family: "norm",
        inputs: "[x] (mean and rstd are f32 of x's leading shape)",
        plan: plan_ln_stats,
    },
    OpInfo {
        name: gemm::OP,
        family: "gemm",
        inputs: "[a, b]",
        plan: plan_gemm,
    },
    OpInfo {
        name: gemm::BMM,
        family: "gemm",
        inputs: "[a, b] (batched: [B, m, k], [B, k, n])",
        plan: plan_bmm,
    },
    OpInfo {
        name: attention::OP,
        family: "attention",
        inputs: "[q, k] (v has k's shape)",
        plan: plan_attention,
    },
    OpInfo {
        name: attention::decode::OP,
        family: "attention",
        inputs: attention::decode::SPEC_INPUTS,
        plan: plan_decode,
    },
    OpInfo {
        name: attention::decode::OP_PAGED,
        family: "attention",
        inputs: attention::decode::SPEC_INPUTS,
        plan: plan_decode,
    },
    OpInfo {
        name: attention::mla::OP_DECODE,
        family: "attention",
        inputs: attention::mla::DECODE_INPUTS,
        plan: plan_mla_decode,
    },
    OpInfo {
        name: attention::mla::OP_DECODE_PAGED,
        family: "attention",
        inputs: attention::mla::DECODE_INPUTS,
        plan: plan_mla_decode,
    },
    OpInfo {
        name: attention::mla::OP_PREFILL,
        family: "attention",
        inputs: attention::mla::PREFILL_INPUTS,
        plan: plan_mla_prefill,
    },
    OpInfo {
        name: attention::PREFILL_OP,
        family: "attention",
        inputs: attention::PREFILL_INPUTS,
        plan: plan_attention_variant,
    },
    OpInfo {
        name: attention::VARLEN_OP,
        family: "attention",
        inputs: attention::VARLEN_INPUTS,
        plan: plan_attention_variant,
    },
    OpInfo {
        name: fused_qkv::OP,
        family: "fused_qkv",
        inputs: fused_qkv::SPEC_INPUTS,
        plan: plan_fused_qkv,
    },
];

/// The registry entry of `name`.
pub fn find(name: &str) -> Result<&'static OpInfo, OpError> {
    ops()
        .iter()
        .find(|o| o.name == name)
        .ok_or_else(|| OpError::UnknownOp {
            name: name.into(),
            known: ops().iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
        })
}

impl CallSpec {
    /// A call of `op` on `dtype` inputs of `shapes` (`causal`: attention only).
    pub fn new(op: &str, dtype: &str, shapes: &[&[i64]], causal: bool) -> CallSpec {
        CallSpec {
            op: op.into(),
            dtype: dtype.into(),
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            causal,
        }
    }

    /// A short label, e.g. `softmax bf16 [8192, 8192]`.
    pub fn label(&self) -> String {
        let shapes: Vec<String> = self.shapes.iter().map(|s| format!("{s:?}")).collect();
        format!(
            "{} {} {}{}",
            self.op,
            self.dtype,
            shapes.join(" "),
            if self.causal { " causal" } else { "" }
        )
    }

    /// The call's described operands and launches on `target` (every candidate's with `all_candidates`).
    pub fn plan(&self, target: &Target, all_candidates: bool) -> Result<PlannedCall, OpError> {
        let info = find(&self.op)?;
        let dt = parse_dtype(&self.dtype).ok_or_else(|| OpError::Unsupported {
            op: info.name,
            what: format!(
                "unknown element type `{}`; use f32, f16 or bf16",
                self.dtype
            ),
        })?;
        (info.plan)(self, dt, target, all_candidates)
    }
}

/// The launcher plans (specialization + cache key) of every launch the calls make on `arch`, labelled
/// `call: config arch`: exactly what a bundle must hold to serve them.
pub fn launcher_plans(
    calls: &[CallSpec],
    arch: GpuArch,
    toolchain_version: &str,
    all_candidates: bool,
) -> Result<Vec<(String, Plan)>, OpError> {
    let target = Target::planning(arch);
    let mut out = Vec::new();
    for call in calls {
        let planned = call.plan(&target, all_candidates)?;
        for launch in &planned.launches {
            // SAFETY: described operands only feed specialization and keys; nothing is launched.
            let args = unsafe { describe(launch, &planned.operands) };
            let plan =
                Launcher::new(launch.kernel.clone()).plan_for(&args, arch, toolchain_version)?;
            out.push((
                format!("{}: {} {}", call.label(), launch.config, arch.name()),
                plan,
            ));
        }
    }
    Ok(out)
}
