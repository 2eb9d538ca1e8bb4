//! GEMM with an epilogue and split-K: `c = act(a @ b + bias) + residual` ([`gemm_epilogue`]), as
//! `F.linear` / `torch.addmm` followed by an activation and a residual add, with everything after the
//! product done in f32 on the accumulator and one cast to `c`'s element type (bf16, f16 or f32,
//! independent of the inputs': the output cast).
//!
//! - bias: `[n]`, the inputs' element type (as `F.linear`), broadcast over rows;
//! - activation: [`Activation`] (GELU erf/tanh, SiLU) on `a @ b + bias`;
//! - residual: `[m, n]`, `c`'s element type, any strides, added after the activation (without a bias
//!   or an activation, the single-launch kernels start the accumulator from it instead).
//!
//! Schedule ([`schedule`]): one `gemm_epilogue` launch (persistent or one tile per block, as
//! [`super::config::choose_epilogue`]), or split-K when the output has fewer 64x128 tiles than the
//! device has SMs and K is deep: `gemm_partial` writes `S` f32 partial tiles into scratch ([`crate::op::scratch`],
//! `[S, m, n]`), then `gemm_reduce` sums them in a fixed order (deterministic, no atomics) and applies
//! the epilogue. Operands are read as they are (no packing of unaligned rows, as `bmm`).
//!
//! Operand order of a call: `[a, b, c]`, then `bias` and `residual` when present, then the split-K
//! scratch `partials` when the schedule splits ([`with_scratch`] appends a described one).

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use super::dsl::{ACT_NONE, EPI_BIAS, EPI_RESIDUAL};
use super::{GemmOptions, config, expect_dtype, kernels, product_extents};
use crate::op::ceil_div;
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target};

/// The activation of the epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Activation {
    #[default]
    None,
    /// `x · Φ(x)` (`F.gelu(x)`).
    GeluErf,
    /// `F.gelu(x, approximate="tanh")`.
    GeluTanh,
    /// `x · sigmoid(x)` (`F.silu`).
    Silu,
}

impl Activation {
    /// The kernels' `ACT` code.
    fn code(self) -> i32 {
        match self {
            Activation::None => ACT_NONE,
            Activation::GeluErf => crate::activation::dsl::GELU_ERF,
            Activation::GeluTanh => crate::activation::dsl::GELU_TANH,
            Activation::Silu => crate::activation::dsl::SILU,
        }
    }
}

/// What an epilogue does, without its tensors (what planning needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct EpilogueSpec {
    pub bias: bool,
    pub activation: Activation,
    pub residual: bool,
}

impl EpilogueSpec {
    fn flags(&self) -> i32 {
        (if self.bias { EPI_BIAS } else { 0 }) | (if self.residual { EPI_RESIDUAL } else { 0 })
    }

    /// Where the residual goes: nowhere; the accumulator's start when it is the whole epilogue
    /// (`dsl::residual_in_accumulator`); else apart, added after the product in registers of its own
    /// (after a bias or an activation).
    pub fn residual_at(&self) -> config::ResidualAt {
        if !self.residual {
            config::ResidualAt::None
        } else if super::dsl::residual_in_accumulator(self.activation.code(), self.flags()) {
            config::ResidualAt::Accumulator
        } else {
            config::ResidualAt::Apart
        }
    }
}

/// The epilogue of a [`gemm_epilogue`] call: the optional bias and residual tensors and the activation.
#[derive(Clone, Copy, Default)]
pub struct GemmEpilogue<'t> {
    /// `[n]`, the inputs' element type.
    pub bias: Option<&'t dyn TensorArg>,
    pub activation: Activation,
    /// `[m, n]`, `c`'s element type, any strides.
    pub residual: Option<&'t dyn TensorArg>,
}

impl std::fmt::Debug for GemmEpilogue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmEpilogue")
            .field("bias", &self.bias.is_some())
            .field("activation", &self.activation)
            .field("residual", &self.residual.is_some())
            .finish()
    }
}

impl GemmEpilogue<'_> {
    /// The epilogue without its tensors.
    pub fn spec(&self) -> EpilogueSpec {
        EpilogueSpec {
            bias: self.bias.is_some(),
            activation: self.activation,
            residual: self.residual.is_some(),
        }
    }
}

/// The host function's name (in errors).
const OP: &str = "gemm_epilogue";

/// A registry op of the epilogue path: a fixed epilogue, output of the inputs' type or f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpilogueOp {
    pub name: &'static str,
    pub spec: EpilogueSpec,
    /// `c` is f32 whatever the inputs' type (the output cast).
    pub out_f32: bool,
}

const fn op(
    name: &'static str,
    bias: bool,
    activation: Activation,
    residual: bool,
    out_f32: bool,
) -> EpilogueOp {
    EpilogueOp {
        name,
        spec: EpilogueSpec {
            bias,
            activation,
            residual,
        },
        out_f32,
    }
}

/// `c = a @ b` through [`gemm_epilogue`] without an epilogue: split-K when [`schedule`] says so.
pub const GEMM_SPLITK: &str = "gemm_splitk";

/// The epilogue ops (each `[a, b]` shapes in a call spec; bias `[n]`, residual `[m, n]` implied).
pub const OPS: &[EpilogueOp] = &[
    op(GEMM_SPLITK, false, Activation::None, false, false),
    op("gemm_bias", true, Activation::None, false, false),
    op("gemm_bias_gelu", true, Activation::GeluErf, false, false),
    op(
        "gemm_bias_gelu_tanh",
        true,
        Activation::GeluTanh,
        false,
        false,
    ),
    op("gemm_bias_silu", true, Activation::Silu, false, false),
    op("gemm_residual", false, Activation::None, true, false),
    op(
        "gemm_bias_gelu_residual",
        true,
        Activation::GeluErf,
        true,
        false,
    ),
    op("gemm_f32_out", false, Activation::None, false, true),
    op(
        "gemm_bias_silu_f32_out",
        true,
        Activation::Silu,
        false,
        true,
    ),
];

/// The epilogue op named `name`.
pub fn find(name: &str) -> Option<&'static EpilogueOp> {
    OPS.iter().find(|o| o.name == name)
}

impl EpilogueOp {
    /// `c`'s element type for `dtype` inputs.
    pub fn out_dtype(&self, dtype: ScalarType) -> ScalarType {
        if self.out_f32 { ScalarType::F32 } else { dtype }
    }

    /// The described operands of a call on `a: [m, k]`, `b: [k, n]` (`[a, b, c, bias?, residual?]`,
    /// contiguous), with the split-K scratch when the schedule on `target` splits.
    pub fn described_operands(
        &self,
        dtype: ScalarType,
        a: &[i64],
        b: &[i64],
        target: &Target,
    ) -> Result<Vec<Operand>, OpError> {
        let (m, n) = (
            a.first().copied().unwrap_or(0),
            b.get(1).copied().unwrap_or(0),
        );
        let out = self.out_dtype(dtype);
        let mut ops = vec![
            Operand::described("a", 0, dtype, a),
            Operand::described("b", 1, dtype, b),
            Operand::described("c", 2, out, &[m, n]),
        ];
        if self.spec.bias {
            ops.push(Operand::described("bias", ops.len(), dtype, &[n]));
        }
        if self.spec.residual {
            ops.push(Operand::described("residual", ops.len(), out, &[m, n]));
        }
        with_scratch(&ops, target, &self.spec)
    }
}

/// Element types of `c`.
pub const OUT_DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16, ScalarType::F32];

/// How a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// One `gemm_epilogue` launch with this configuration.
    Direct(config::GemmConfig),
    /// `gemm_partial` over `splits` K ranges into f32 scratch, then `gemm_reduce`.
    SplitK {
        bm: i64,
        bn: i64,
        bk: i64,
        splits: i64,
    },
}

/// The largest number of K ranges.
pub const MAX_SPLITS: i64 = 16;

/// The least arithmetic intensity (flops per byte of `a`, `b` and `c`) at which a product with few
/// output tiles is split over K. Below it the product is bound by reading the operands, which the
/// unsplit launch already does at close to copy bandwidth with half the SMs busy; splitting only adds
/// the partial planes' traffic. The H200 measured this (2026-12-01, `docs/gemm.md`): split-K lost
/// 20–40% at `16/64/128 x 8192 x 8192` (intensity 16–124) and gained 1.5× at `512 x 512 x 65536`
/// (intensity 255). The H200's bf16 ridge point is about 200 flop/byte.
pub const MIN_SPLIT_INTENSITY: f64 = 128.0;

/// Flops per byte moved by `c[m, n] = a[m, k] @ b[k, n]` with `elem_bytes`-byte operands and output.
pub fn intensity(m: i64, n: i64, k: i64, elem_bytes: i64) -> f64 {
    let (m, n, k) = (m.max(1) as f64, n.max(1) as f64, k.max(1) as f64);
    2.0 * m * n * k / (elem_bytes.max(1) as f64 * (m * k + k * n + m * n))
}

/// The split-K rule: with 64x128 output tiles, split when the tiles fill at most half the SMs, K
/// has at least 8 tiles of depth, and the product is compute-bound ([`MIN_SPLIT_INTENSITY`]); the
/// number of splits is the smallest power of two giving at least two blocks per SM, at most
/// [`MAX_SPLITS`], with every split keeping at least 4 K tiles. Otherwise the single-launch
/// configuration of [`config::choose_epilogue`] (where `spec`'s residual goes picks it:
/// [`EpilogueSpec::residual_at`]).
/// Examples on 132 SMs (bf16, 64-deep tiles): `512 x 512 x 65536` → 32 tiles, intensity 255, 16
/// splits; `16 x 8192 x 8192` (intensity 16) and `128 x 8192 x 8192` (128 tiles) → direct; `4096³` →
/// direct.
pub fn schedule(
    target: &Target,
    dtype: ScalarType,
    m: i64,
    n: i64,
    k: i64,
    spec: &EpilogueSpec,
) -> Schedule {
    let (bm, bn) = (64, 128);
    let bk = if dtype == ScalarType::F32 { 32 } else { 64 };
    let tiles = ceil_div(m, bm) * ceil_div(n, bn);
    let sms = (target.sm_count as i64).max(1);
    let k_tiles = ceil_div(k, bk);
    let bytes = (dtype.bit_width() as i64 / 8).max(1);
    if 2 * tiles <= sms && k_tiles >= 8 && intensity(m, n, k, bytes) >= MIN_SPLIT_INTENSITY {
        let mut splits = 1;
        while tiles * splits < 2 * sms && splits < MAX_SPLITS && k_tiles / (2 * splits) >= 4 {
            splits *= 2;
        }
        if splits > 1 {
            return Schedule::SplitK { bm, bn, bk, splits };
        }
    }
    Schedule::Direct(config::choose_epilogue(
        target,
        dtype,
        m,
        n,
        spec.residual_at(),
    ))
}

/// Row pitch of a partial tile plane (a multiple of 16 f32, so rows are 64-byte aligned).
fn partial_ld(n: i64) -> i64 {
    ceil_div(n.max(1), 16) * 16
}

/// f32 scratch elements of a split-K call: `splits` planes of `m x partial_ld(n)`.
pub fn scratch_len(splits: i64, m: i64, n: i64) -> i64 {
    splits * m.max(1) * partial_ld(n)
}

#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    out: ScalarType,
    m: i64,
    n: i64,
    k: i64,
    spec: EpilogueSpec,
    /// Operand indices of bias and residual.
    bias: Option<usize>,
    residual: Option<usize>,
    /// Index of the split-K scratch, when given.
    scratch: Option<usize>,
    ops: Vec<Operand>,
}

impl Call {
    fn new(
        operands: &[Operand],
        target: &Target,
        spec: &EpilogueSpec,
        options: &GemmOptions,
    ) -> Result<Option<Call>, OpError> {
        let want = 3 + spec.bias as usize + spec.residual as usize;
        if operands.len() != want && operands.len() != want + 1 {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!(
                    "takes {want} tensors (a, b, c{}{}) and an optional scratch, got {}",
                    if spec.bias { ", bias" } else { "" },
                    if spec.residual { ", residual" } else { "" },
                    operands.len()
                ),
            });
        }
        let (a, b, c) = (&operands[0], &operands[1], &operands[2]);
        expect_dtype(OP, a, options)?;
        b.expect_same_dtype(OP, a)?;
        c.expect_dtype(OP, OUT_DTYPES)?;
        let (m, k, n) = product_extents(OP, a, b, c, target)?;
        let mut next = 3;
        let bias = spec.bias.then(|| {
            next += 1;
            next - 1
        });
        let residual = spec.residual.then(|| {
            next += 1;
            next - 1
        });
        if let Some(i) = bias {
            let o = &operands[i];
            o.expect_same_dtype(OP, a)?;
            o.expect_rank(OP, 1)?;
            target.expect_device(OP, o)?;
            if o.shape[0] != n {
                return Err(OpError::Shape {
                    op: OP,
                    what: "`bias` must be `[b.cols]`".into(),
                    left: format!("{:?}", o.shape),
                    right: format!("[{n}]"),
                });
            }
        }
        if let Some(i) = residual {
            let o = &operands[i];
            o.expect_same_dtype(OP, c)?;
            o.expect_rank(OP, 2)?;
            target.expect_device(OP, o)?;
            if o.shape != [m, n] {
                return Err(OpError::Shape {
                    op: OP,
                    what: "`residual` must be `[a.rows, b.cols]` (as `c`)".into(),
                    left: format!("{:?}", o.shape),
                    right: format!("{:?}", [m, n]),
                });
            }
        }
        if m == 0 || n == 0 {
            return Ok(None);
        }
        let scratch = (operands.len() == want + 1).then_some(want);
        if let Some(i) = scratch {
            let p = &operands[i];
            p.expect_dtype(OP, &[ScalarType::F32])?;
            p.expect_rank(OP, 1)?;
            target.expect_device(OP, p)?;
        }
        Ok(Some(Call {
            dtype: a.dtype,
            out: c.dtype,
            m,
            n,
            k,
            spec: *spec,
            bias,
            residual,
            scratch,
            ops: operands.to_vec(),
        }))
    }
}

/// `c = act(a @ b + bias) + residual` (see the module docs), queued on `stream`. `a: [m, k]`,
/// `b: [k, n]` (bf16, f16, or f32 with [`GemmOptions::allow_tf32`]), `c: [m, n]` of bf16, f16 or f32.
/// An empty `c` is a no-op; `k = 0` gives the epilogue of zeros.
pub fn gemm_epilogue<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    epilogue: &GemmEpilogue<'a>,
    options: &GemmOptions,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("c", &*c),
    ];
    if let Some(t) = epilogue.bias {
        operands.push(Operand::of("bias", t));
    }
    if let Some(t) = epilogue.residual {
        operands.push(Operand::of("residual", t));
    }
    let target = Target::of(stream.device())?;
    let spec = epilogue.spec();
    let Some(call) = Call::new(&operands, &target, &spec, options)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    if let Schedule::SplitK { splits, .. } =
        schedule(&target, call.dtype, call.m, call.n, call.k, &call.spec)
    {
        operands.push(crate::op::scratch::scratch(
            stream,
            "partials",
            ScalarType::F32,
            scratch_len(splits, call.m, call.n),
        )?);
    }
    let launches = plan_epilogue(&operands, &target, &spec, options)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively), and the
    // stream's scratch buffer, used by work queued on `stream` only, in stream order; the plan
    // addresses it within `scratch_len` elements.
    unsafe { crate::op::execute(stream, &operands, &launches) }
}

/// `operands` with a described split-K scratch appended when the call's schedule splits (planning
/// without a device). Operands that already hold one are returned as they are.
pub fn with_scratch(
    operands: &[Operand],
    target: &Target,
    spec: &EpilogueSpec,
) -> Result<Vec<Operand>, OpError> {
    let mut out = operands.to_vec();
    let any = GemmOptions { allow_tf32: true };
    if let Some(call) = Call::new(operands, target, spec, &any)?
        && call.scratch.is_none()
        && let Schedule::SplitK { splits, .. } =
            schedule(target, call.dtype, call.m, call.n, call.k, &call.spec)
    {
        out.push(Operand::described(
            "partials",
            out.len(),
            ScalarType::F32,
            &[scratch_len(splits, call.m, call.n)],
        ));
    }
    Ok(out)
}

/// The launches of a call (operands as in the module docs).
pub fn plan_epilogue(
    operands: &[Operand],
    target: &Target,
    spec: &EpilogueSpec,
    options: &GemmOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_epilogue_with(operands, target, spec, options, true)
}

/// [`plan_epilogue`], with split-K allowed or not: a composed op whose scratch holds other data (the
/// unfused `fused_qkv`) plans one direct launch whatever [`schedule`] says.
pub fn plan_epilogue_with(
    operands: &[Operand],
    target: &Target,
    spec: &EpilogueSpec,
    options: &GemmOptions,
    allow_split: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(operands, target, spec, options)? else {
        return Ok(Vec::new());
    };
    let sched = match schedule(target, call.dtype, call.m, call.n, call.k, &call.spec) {
        Schedule::SplitK { .. } if !allow_split => Schedule::Direct(config::choose_epilogue(
            target,
            call.dtype,
            call.m,
            call.n,
            call.spec.residual_at(),
        )),
        s => s,
    };
    let ops = &call.ops;
    // An absent bias or residual: a one-element view of `a` (of `c`) the kernel never reads.
    let dummy = |operand| PlannedArg::Tensor {
        operand,
        output: false,
        shape: vec![1, 1],
        strides: vec![1, 1],
        offset: 0,
    };
    let bias = match call.bias {
        Some(i) => PlannedArg::Tensor {
            operand: i,
            output: false,
            shape: vec![1, call.n],
            strides: vec![0, ops[i].strides[0]],
            offset: 0,
        },
        None => dummy(0),
    };
    let residual = match call.residual {
        Some(i) => PlannedArg::whole(i, &ops[i], false),
        None => dummy(2),
    };
    let (act, flags) = (call.spec.activation.code(), call.spec.flags());
    let c = PlannedArg::whole(2, &ops[2], true);
    match sched {
        Schedule::Direct(cfg) => {
            let tiles = ceil_div(call.m, cfg.bm) * ceil_div(call.n, cfg.bn);
            // One tile per block unless persistent; either way in grouped tile order.
            let kernel = direct_kernel(&cfg, cfg.persistent, call.dtype, call.out, act, flags)?;
            let blocks = if cfg.persistent {
                tiles.min(target.sm_count as i64).max(1)
            } else {
                tiles
            };
            Ok(vec![PlannedLaunch {
                kernel,
                args: vec![
                    PlannedArg::whole(0, &ops[0], false),
                    PlannedArg::whole(1, &ops[1], false),
                    bias,
                    residual,
                    PlannedArg::I32(cfg.group as i32),
                    c,
                ],
                grid: Some((crate::op::grid_rows(OP, blocks)?, 1, 1)),
                config: format!(
                    "gemm_epilogue {}x{}x{}{}{}",
                    cfg.bm,
                    cfg.bn,
                    cfg.bk,
                    if cfg.persistent { " persistent" } else { "" },
                    if cfg.workers == 4 {
                        String::new()
                    } else {
                        format!(" w{}", cfg.workers)
                    }
                ),
            }])
        }
        Schedule::SplitK { bm, bn, bk, splits } => {
            let Some(s) = call.scratch else {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!(
                        "split-K ({splits} splits) needs the f32 `partials` scratch after the \
                         call's tensors (`gemm::epilogue::with_scratch` appends one when planning)"
                    ),
                });
            };
            let need = scratch_len(splits, call.m, call.n);
            if ops[s].shape[0] < need {
                return Err(OpError::Shape {
                    op: OP,
                    what: "the `partials` scratch must hold `epilogue::scratch_len` elements"
                        .into(),
                    left: ops[s].shape[0].to_string(),
                    right: need.to_string(),
                });
            }
            let ld = partial_ld(call.n);
            let part = |output| PlannedArg::Tensor {
                operand: s,
                output,
                shape: vec![splits, call.m, call.n],
                strides: vec![call.m * ld, ld, 1],
                offset: 0,
            };
            let (tm, tn) = (ceil_div(call.m, bm), ceil_div(call.n, bn));
            let dim = |v: i64, limit: i64| {
                u32::try_from(v)
                    .ok()
                    .filter(|&v| (v as i64) <= limit)
                    .ok_or_else(|| OpError::Unsupported {
                        op: OP,
                        what: format!(
                            "a split-K grid of ({tm}, {tn}, {splits}) exceeds the limits"
                        ),
                    })
            };
            let grid = (
                dim(tm, i32::MAX as i64)?,
                dim(tn, 65535)?,
                dim(splits, 65535)?,
            );
            let name = format!("gemm split{splits} {bm}x{bn}x{bk}");
            Ok(vec![
                PlannedLaunch {
                    kernel: partial_kernel(bm, bn, bk, call.dtype)?,
                    args: vec![
                        PlannedArg::whole(0, &ops[0], false),
                        PlannedArg::whole(1, &ops[1], false),
                        part(true),
                    ],
                    grid: Some(grid),
                    config: format!("{name} (partials)"),
                },
                PlannedLaunch {
                    kernel: reduce_kernel(bm, bn, call.dtype, call.out, act, flags)?,
                    args: vec![part(false), bias, residual, c],
                    grid: Some((grid.0, grid.1, 1)),
                    config: format!("{name} (reduce + epilogue)"),
                },
            ])
        }
    }
}

/// `$body` with `$o` the Rust type of the output element type `$out`: the input type `$e` itself,
/// or f32 (the output casts with a kernel); `None` for others.
macro_rules! out_type {
    ($out:expr, $dt:expr, $e:ty, |$o:ident| $body:expr) => {{
        if $out == $dt {
            type $o = $e;
            Some($body)
        } else if $out == ScalarType::F32 {
            type $o = f32;
            Some($body)
        } else {
            None
        }
    }};
}

/// `$body` with `$e` the Rust type of the run-time element type `$dt` (bf16, f16, f32).
macro_rules! io_type {
    ($dt:expr, |$e:ident| $body:expr) => {{
        match $dt {
            ScalarType::BF16 => {
                type $e = half::bf16;
                Some($body)
            }
            ScalarType::F16 => {
                type $e = half::f16;
                Some($body)
            }
            ScalarType::F32 => {
                type $e = f32;
                Some($body)
            }
            _ => None,
        }
    }};
}

/// `$body` with `$k` bound to the constant of the run-time `ACT` / `FLAGS` value `$v` (each a small set).
macro_rules! act_const {
    ($v:expr, |$k:ident| $body:expr) => {{
        match $v {
            ACT_NONE => {
                const $k: i32 = ACT_NONE;
                Some($body)
            }
            crate::activation::dsl::GELU_ERF => {
                const $k: i32 = crate::activation::dsl::GELU_ERF;
                Some($body)
            }
            crate::activation::dsl::GELU_TANH => {
                const $k: i32 = crate::activation::dsl::GELU_TANH;
                Some($body)
            }
            crate::activation::dsl::SILU => {
                const $k: i32 = crate::activation::dsl::SILU;
                Some($body)
            }
            _ => None,
        }
    }};
}

macro_rules! flags_const {
    ($v:expr, |$k:ident| $body:expr) => {{
        match $v {
            0 => {
                const $k: i32 = 0;
                Some($body)
            }
            1 => {
                const $k: i32 = 1;
                Some($body)
            }
            2 => {
                const $k: i32 = 2;
                Some($body)
            }
            3 => {
                const $k: i32 = 3;
                Some($body)
            }
            _ => None,
        }
    }};
}

fn unsupported(what: String) -> OpError {
    OpError::Unsupported { op: OP, what }
}

/// The single-launch kernel of a configuration and epilogue: the tile loop (`gemm_epilogue`) when
/// `looped` (persistent), else one tile per block (`gemm_epilogue_tiles`).
fn direct_kernel(
    cfg: &config::GemmConfig,
    looped: bool,
    dtype: ScalarType,
    out: ScalarType,
    act: i32,
    flags: i32,
) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    // `$k`: the entry of the chosen form.
    macro_rules! tiles {
        ($k:ident, $E:ty, $M:ty, $O:ty, $A:expr, $F:expr) => {
            match (cfg.bm, cfg.bn, cfg.bk) {
                (128, 256, 64) => Some(k::$k::kernel::<$E, $M, $O, $O, 128, 256, 64, $A, $F>()),
                (128, 128, 64) => Some(k::$k::kernel::<$E, $M, $O, $O, 128, 128, 64, $A, $F>()),
                (64, 128, 64) => Some(k::$k::kernel::<$E, $M, $O, $O, 64, 128, 64, $A, $F>()),
                (128, 128, 32) => Some(k::$k::kernel::<$E, $M, $O, $O, 128, 128, 32, $A, $F>()),
                (64, 128, 32) => Some(k::$k::kernel::<$E, $M, $O, $O, 64, 128, 32, $A, $F>()),
                (16, 64, 128) => Some(k::$k::kernel::<$E, $M, $O, $O, 16, 64, 128, $A, $F>()),
                (32, 64, 128) => Some(k::$k::kernel::<$E, $M, $O, $O, 32, 64, 128, $A, $F>()),
                _ => None,
            }
        };
    }
    let kernel = super::product_types!(dtype, |E, M| out_type!(out, dtype, E, |O| {
        act_const!(act, |A| flags_const!(flags, |F| if looped {
            tiles!(gemm_epilogue, E, M, O, A, F)
        } else {
            tiles!(gemm_epilogue_tiles, E, M, O, A, F)
        }))
    }));
    kernel
        .flatten()
        .flatten()
        .flatten()
        .flatten()
        .map(|kernel| {
            if cfg.workers == 4 {
                kernel
            } else {
                kernel.with_hint("default", "num_worker_warps_per_cta", cfg.workers)
            }
        })
        .ok_or_else(|| {
            unsupported(format!(
                "no {dtype} → {out} epilogue kernel for {}x{}x{} (act {act}, flags {flags}); \
                 the output is the inputs' type or f32",
                cfg.bm, cfg.bn, cfg.bk
            ))
        })
}

fn partial_kernel(
    bm: i64,
    bn: i64,
    bk: i64,
    dtype: ScalarType,
) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    super::product_types!(dtype, |E, M| match (bm, bn, bk) {
        (64, 128, 64) => Some(k::gemm_partial::kernel::<E, M, 64, 128, 64>()),
        (64, 128, 32) => Some(k::gemm_partial::kernel::<E, M, 64, 128, 32>()),
        _ => None,
    })
    .flatten()
    .ok_or_else(|| unsupported(format!("no {dtype} split-K kernel for {bm}x{bn}x{bk}")))
}

fn reduce_kernel(
    bm: i64,
    bn: i64,
    dtype: ScalarType,
    out: ScalarType,
    act: i32,
    flags: i32,
) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    let kernel = io_type!(dtype, |E| out_type!(out, dtype, E, |O| {
        act_const!(act, |A| flags_const!(flags, |F| match (bm, bn) {
            (64, 128) => Some(k::gemm_reduce::kernel::<E, O, O, 64, 128, A, F>()),
            _ => None,
        }))
    }));
    kernel
        .flatten()
        .flatten()
        .flatten()
        .flatten()
        .ok_or_else(|| {
            unsupported(format!(
                "no {dtype} → {out} split-K reduce kernel for {bm}x{bn} (act {act}, flags {flags}); \
                 the output is the inputs' type or f32"
            ))
        })
}

/// The epilogue calls the catalog compiles (3 specializations: the persistent bias + GELU product at
/// 4096³, and the split-K pair of a long-K product).
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    vec![
        c(
            "gemm_bias_gelu",
            "bf16",
            &[&[4096, 4096], &[4096, 4096]],
            false,
        ),
        c(
            "gemm_bias_gelu",
            "bf16",
            &[&[512, 65536], &[65536, 512]],
            false,
        ),
    ]
}
