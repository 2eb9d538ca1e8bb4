//! Host side of the attention backward pass ([`attention_backward`]): given the forward's `q, k, v`, its
//! output `o`, its LSE (what [`super::attention_with`] writes with `Extras::lse`: natural log of each
//! row's softmax denominator of the *scaled* logits, f32) and the output gradient `d_o`, writes `dq`,
//! `dk`, `dv` as torch's autograd of `scaled_dot_product_attention` gives them. Validation (typed
//! errors naming the operand), the configuration (`config::choose_backward`), and the plan of its three
//! launches (kernels in `dsl_backward.rs`): `delta = rowsum(dO ∘ O)` into scratch, then the dK/dV kernel
//! and the dQ kernel, both reading `delta`.
//!
//! Supported: the layouts and element types of the forward (`[B, H, S, D]` any strides or
//! `[BH, S, D]`; bf16, f16; D 64 or 128), grouped-query attention (`dk`/`dv` summed over the query heads
//! of a group, no atomics), causal masking aligned top-left, bottom-right or shifted by
//! `query_offset` (a row that sees no key has LSE `-inf` and zero gradients), any positive scale.
//! Not yet: the sliding window, soft-capping, sinks and varlen batches (`OpError::Unsupported`).
//!
//! Scratch (per stream, see [`crate::op::scratch`]): `B·H·S_q` f32 for `delta`.

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use super::dsl_backward::backward_kernels as k;
use super::{AttentionOptions, DTYPES, MAX_EXTENT, config};
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div, mma_kernel};

/// The op's registry name.
pub const BACKWARD_OP: &str = "attention_backward";
/// What a registry call spec of [`BACKWARD_OP`] lists.
pub const BACKWARD_INPUTS: &str = "[q, k] (v, dk, dv have k's shape; o, d_o, dq q's; lse f32 of q's shape without D; causal top-left)";
/// The operands of a call, in order (the scratch `delta` follows when planned).
pub const BACKWARD_OPERANDS: [&str; 9] = ["q", "k", "v", "o", "d_o", "lse", "dq", "dk", "dv"];

fn unsupported(what: impl Into<String>) -> OpError {
    OpError::Unsupported {
        op: BACKWARD_OP,
        what: what.into(),
    }
}

fn shape_err(what: &str, l: impl std::fmt::Debug, r: impl std::fmt::Debug) -> OpError {
    OpError::Shape {
        op: BACKWARD_OP,
        what: what.into(),
        left: format!("{l:?}"),
        right: format!("{r:?}"),
    }
}

/// Gradients of attention, queued on `stream`: `dq` (`q`'s shape), `dk`, `dv` (`k`'s shape) from the
/// forward's `q`, `k`, `v` (layouts as [`super::attention`]), its output `o`, its `lse` (f32 `[B, H, S_q]`,
/// or `[BH, S_q]` for 3-D calls, exactly as the forward's `Extras::lse` writes it) and the output
/// gradient `d_o` (`o`'s shape). `options` must be the forward's (causal alignment, scale); the window
/// and soft-cap are not supported.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<'a>(
    stream: &'a Stream,
    q: &'a impl TensorArg,
    k: &'a impl TensorArg,
    v: &'a impl TensorArg,
    o: &'a impl TensorArg,
    d_o: &'a impl TensorArg,
    lse: &'a impl TensorArg,
    options: &AttentionOptions,
    dq: &'a mut impl TensorArgMut,
    dk: &'a mut impl TensorArgMut,
    dv: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![
        Operand::of("q", q),
        Operand::of("k", k),
        Operand::of("v", v),
        Operand::of("o", o),
        Operand::of("d_o", d_o),
        Operand::of("lse", lse),
        Operand::of("dq", &*dq),
        Operand::of("dk", &*dk),
        Operand::of("dv", &*dv),
    ];
    let target = Target::of(stream.device())?;
    let Some(call) = BwdCall::new(&operands, &target, options)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    operands.push(crate::op::scratch::scratch(
        stream,
        "delta",
        ScalarType::F32,
        call.delta_elems(),
    )?);
    let launches = call.launches(&operands)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively), and
    // the stream's scratch; every launch reads and writes inside the views it is given.
    unsafe { crate::op::execute(stream, &operands, &launches) }
}

/// `operands` (the nine of [`BACKWARD_OPERANDS`]) with the described `delta` scratch the plan needs
/// appended (nothing for an empty call), for planning without a device.
pub fn with_scratch(
    operands: &[Operand],
    target: &Target,
    options: &AttentionOptions,
) -> Result<Vec<Operand>, OpError> {
    let mut out = operands.to_vec();
    if let Some(call) = BwdCall::new(operands, target, options)? {
        out.push(Operand::described(
            "delta",
            operands.len(),
            ScalarType::F32,
            &[call.delta_elems()],
        ));
    }
    Ok(out)
}

/// The launches of a call whose operands are [`with_scratch`]'s (none for an empty call).
pub fn plan_backward(
    operands: &[Operand],
    target: &Target,
    options: &AttentionOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let n = BACKWARD_OPERANDS.len();
    match BwdCall::new(&operands[..n.min(operands.len())], target, options)? {
        None => Ok(Vec::new()),
        Some(call) => call.launches(operands),
    }
}

/// The described operands (the nine of [`BACKWARD_OPERANDS`], scratch excluded) of a registry call
/// spec `[q, k]`.
pub fn described_call(dt: ScalarType, shapes: &[Vec<i64>]) -> Result<Vec<Operand>, OpError> {
    let [q, k] = shapes else {
        return Err(unsupported(format!(
            "a call spec lists {BACKWARD_INPUTS}, got {shapes:?}"
        )));
    };
    let lse = &q[..q.len().saturating_sub(1)];
    let d = Operand::described;
    Ok(vec![
        d("q", 0, dt, q),
        d("k", 1, dt, k),
        d("v", 2, dt, k),
        d("o", 3, dt, q),
        d("d_o", 4, dt, q),
        d("lse", 5, ScalarType::F32, lse),
        d("dq", 6, dt, q),
        d("dk", 7, dt, k),
        d("dv", 8, dt, k),
    ])
}

/// A validated call.
#[derive(Debug, Clone)]
struct BwdCall {
    dtype: ScalarType,
    d: i64,
    causal: bool,
    scale: f32,
    /// Query position shift (causal only; 0 otherwise).
    off: i32,
    /// `[B, H, S, D]` views of q, k, v, o, d_o, dq, dk, dv (3-D calls as `[BH, 1, S, D]`), and the
    /// `[B, H, S_q]` view of lse.
    views: Vec<(Vec<i64>, Vec<i64>)>,
    lse_view: (Vec<i64>, Vec<i64>),
    cfg: config::BackwardConfig,
}

impl BwdCall {
    fn new(
        operands: &[Operand],
        target: &Target,
        options: &AttentionOptions,
    ) -> Result<Option<BwdCall>, OpError> {
        let op = BACKWARD_OP;
        let [q, k, v, o, d_o, lse, dq, dk, dv] = operands else {
            return Err(unsupported(format!(
                "takes 9 tensors {BACKWARD_OPERANDS:?}, got {}",
                operands.len()
            )));
        };
        q.expect_dtype(op, DTYPES)?;
        for t in [k, v, o, d_o, dq, dk, dv] {
            t.expect_same_dtype(op, q)?;
        }
        lse.expect_dtype(op, &[ScalarType::F32])?;
        for t in operands {
            target.expect_device(op, t)?;
        }
        let rank = q.rank();
        if rank != 3 && rank != 4 {
            return Err(OpError::Rank {
                op,
                arg: "q",
                expected: "3 ([BH, S, D]) or 4 ([B, H, S, D])".into(),
                shape: q.shape.clone(),
            });
        }
        for t in [k, v, o, d_o, dq, dk, dv] {
            t.expect_rank(op, rank)?;
        }
        for t in [o, d_o, dq] {
            t.expect_same_shape(op, q)?;
        }
        for t in [v, dk, dv] {
            t.expect_same_shape(op, k)?;
        }
        let d = q.shape[rank - 1];
        if !config::HEAD_DIMS.contains(&d) {
            return Err(unsupported(format!(
                "head dimension {d}; the kernels take {:?}",
                config::HEAD_DIMS
            )));
        }
        if k.shape[rank - 1] != d {
            return Err(shape_err(
                "`k`'s head dimension vs `q`'s",
                k.shape[rank - 1],
                d,
            ));
        }
        if q.shape[0] != k.shape[0] {
            return Err(shape_err(
                "batch (axis 0) of `k` vs `q`",
                k.shape[0],
                q.shape[0],
            ));
        }
        if rank == 4 {
            let (h, hkv) = (q.shape[1], k.shape[1]);
            if hkv == 0 || h % hkv != 0 {
                return Err(shape_err(
                    "`k`'s heads must divide `q`'s heads (grouped-query attention)",
                    hkv,
                    h,
                ));
            }
        }
        let lse_shape = &q.shape[..rank - 1];
        if lse.shape != lse_shape {
            return Err(shape_err(
                "`lse` must be q's shape without D (the forward's `Extras::lse`)",
                &lse.shape,
                lse_shape,
            ));
        }
        if options.window.is_some() {
            return Err(unsupported(
                "the sliding window has no backward yet; call without `window`",
            ));
        }
        if options.softcap.is_some() {
            return Err(unsupported(
                "soft-capping has no backward yet; call without `softcap`",
            ));
        }
        let scale = options.scale.unwrap_or(1.0 / (d as f32).sqrt());
        if !(scale.is_finite() && scale > 0.0) {
            return Err(unsupported(format!(
                "scale must be finite and > 0, got {scale}"
            )));
        }
        let (sq, sk) = (q.shape[rank - 2], k.shape[rank - 2]);
        let lead: i64 = q.shape[..rank - 2].iter().product();
        if lead == 0 {
            return Ok(None);
        }
        if sk == 0 {
            return Err(unsupported(
                "`k` has no keys (seq_k = 0): the forward's softmax over an empty set is undefined",
            ));
        }
        if sq == 0 {
            return Err(unsupported(
                "`q` has no queries (seq_q = 0): dk and dv are zero; fill them without this op",
            ));
        }
        for (name, len) in [("seq_q", sq), ("seq_k", sk)] {
            if len > MAX_EXTENT {
                return Err(unsupported(format!("{name} {len} exceeds {MAX_EXTENT}")));
            }
        }
        if options.query_offset.abs() > MAX_EXTENT {
            return Err(unsupported(format!(
                "query_offset {} is outside ±{MAX_EXTENT}",
                options.query_offset
            )));
        }
        let off = if options.causal {
            options.query_offset + if options.bottom_right { sk - sq } else { 0 }
        } else {
            0
        };
        let as4 = |t: &Operand| -> (Vec<i64>, Vec<i64>) {
            let (s, st) = (&t.shape, &t.strides);
            if t.rank() == 4 {
                (s.clone(), st.clone())
            } else {
                (vec![s[0], 1, s[1], s[2]], vec![st[0], st[0], st[1], st[2]])
            }
        };
        let views = [q, k, v, o, d_o, dq, dk, dv]
            .iter()
            .map(|t| as4(t))
            .collect();
        let lse_view = if rank == 4 {
            (lse.shape.clone(), lse.strides.clone())
        } else {
            (
                vec![lse.shape[0], 1, lse.shape[1]],
                vec![lse.strides[0], lse.strides[0], lse.strides[1]],
            )
        };
        Ok(Some(BwdCall {
            dtype: q.dtype,
            d,
            causal: options.causal,
            scale,
            off: off as i32,
            views,
            lse_view,
            cfg: config::choose_backward(d),
        }))
    }

    /// `[B, H, S_q]` of the 4-D views.
    fn bhs(&self) -> (i64, i64, i64) {
        let q = &self.views[0].0;
        (q[0], q[1], q[2])
    }

    fn delta_elems(&self) -> i64 {
        let (b, h, s) = self.bhs();
        b * h * s
    }

    fn launches(&self, operands: &[Operand]) -> Result<Vec<PlannedLaunch>, OpError> {
        let n = BACKWARD_OPERANDS.len();
        let s = operands.get(n).ok_or_else(|| {
            unsupported("the plan needs the `delta` scratch operand of `with_scratch`")
        })?;
        if s.dtype != ScalarType::F32 || s.numel() < self.delta_elems() {
            return Err(unsupported(format!(
                "the `delta` scratch must be {} f32 elements, got {:?} {}",
                self.delta_elems(),
                s.shape,
                s.dtype
            )));
        }
        let (b, h, sq) = self.bhs();
        let kv = &self.views[1].0;
        let (hkv, sk) = (kv[1], kv[2]);
        let c = self.cfg;
        let (delta_k, dkdv_k, dq_k) = self.kernels()?;
        // Operand index of each 4-D view: q k v o d_o dq dk dv.
        let idx = [0usize, 1, 2, 3, 4, 6, 7, 8];
        let t = |i: usize, output: bool| {
            let (shape, strides) = self.views[i].clone();
            PlannedArg::Tensor {
                operand: idx[i],
                output,
                shape,
                strides,
                offset: 0,
            }
        };
        let lse = PlannedArg::Tensor {
            operand: 5,
            output: false,
            shape: self.lse_view.0.clone(),
            strides: self.lse_view.1.clone(),
            offset: 0,
        };
        let delta = |output: bool| PlannedArg::Tensor {
            operand: n,
            output,
            shape: vec![b, h, sq],
            strides: vec![h * sq, sq, 1],
            offset: 0,
        };
        let grid = |what: &str, x: i64, y: i64| -> Result<(u32, u32, u32), OpError> {
            let gx = u32::try_from(x)
                .map_err(|_| unsupported(format!("{x} {what} blocks exceed the grid")))?;
            let gy = u32::try_from(y)
                .ok()
                .filter(|&y| y <= 65535)
                .ok_or_else(|| {
                    unsupported(format!("{y} {what} tiles exceed the grid's y extent"))
                })?;
            Ok((gx, gy, 1))
        };
        let scalars = [PlannedArg::F32(self.scale), PlannedArg::I32(self.off)];
        let mut out = Vec::new();
        out.push(PlannedLaunch {
            kernel: delta_k,
            args: vec![t(3, false), t(4, false), delta(true)],
            grid: Some(grid("batch·head", b * h, ceil_div(sq, c.delta_bm))?),
            config: format!("attention_backward_delta BM={}", c.delta_bm),
        });
        let mut args = vec![
            t(0, false),
            t(1, false),
            t(2, false),
            t(4, false),
            lse.clone(),
            delta(false),
        ];
        args.extend(scalars.clone());
        args.push(t(6, true));
        args.push(t(7, true));
        out.push(PlannedLaunch {
            kernel: dkdv_k,
            args,
            grid: Some(grid("batch·kv-head", b * hkv, ceil_div(sk, c.dkdv_bn))?),
            config: format!("attention_backward_dkdv BM={} BN={}", c.dkdv_bm, c.dkdv_bn),
        });
        let mut args = vec![
            t(0, false),
            t(1, false),
            t(2, false),
            t(4, false),
            lse,
            delta(false),
        ];
        args.extend(scalars);
        args.push(t(5, true));
        out.push(PlannedLaunch {
            kernel: dq_k,
            args,
            grid: Some(grid("batch·head", b * h, ceil_div(sq, c.dq_bm))?),
            config: format!("attention_backward_dq BM={} BN={}", c.dq_bm, c.dq_bn),
        });
        Ok(out)
    }

    /// The delta, dK/dV and dQ kernels of the call's (dtype, D, causal, configuration).
    fn kernels(
        &self,
    ) -> Result<
        (
            cutile::dsl::Kernel,
            cutile::dsl::Kernel,
            cutile::dsl::Kernel,
        ),
        OpError,
    > {
        let c = self.cfg;
        let none = || {
            unsupported(format!(
                "no {} backward kernels for D = {} and configuration `{}`",
                self.dtype,
                self.d,
                crate::op::tuning::Candidate::name(&c)
            ))
        };
        if (c.delta_bm, c.dkdv_bm, c.dkdv_bn, c.dq_bm, c.dq_bn) != (64, 64, 64, 64, 64) {
            return Err(none());
        }
        let (d, causal) = (self.d, self.causal);
        let delta = mma_kernel!(self.dtype, |E| match d {
            64 => Some(k::attn_bwd_delta::kernel::<E, 64, 64>()),
            128 => Some(k::attn_bwd_delta::kernel::<E, 64, 128>()),
            _ => None,
        })
        .flatten();
        macro_rules! pick {
            ($k:ident) => {
                mma_kernel!(self.dtype, |E| match (d, causal) {
                    (64, false) => Some(k::$k::kernel::<E, 64, 64, 64, false>()),
                    (64, true) => Some(k::$k::kernel::<E, 64, 64, 64, true>()),
                    (128, false) => Some(k::$k::kernel::<E, 64, 64, 128, false>()),
                    (128, true) => Some(k::$k::kernel::<E, 64, 64, 128, true>()),
                    _ => None,
                })
                .flatten()
            };
        }
        match (delta, pick!(attn_bwd_dkdv), pick!(attn_bwd_dq)) {
            (Some(a), Some(b), Some(c)) => Ok((a, b, c)),
            _ => Err(none()),
        }
    }
}

/// The calls the catalog compiles and the GPU runner checks and benchmarks: the benchmark shapes
/// (B4 H32 S4096 D128 bf16, plain and causal, and S1024, which share their kernels), one f16 D = 64 GQA
/// call, and one small ragged causal GQA call (11 specializations per arch).
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    let mut calls = Vec::new();
    for causal in [false, true] {
        calls.push(c(
            BACKWARD_OP,
            "bf16",
            &[&[4, 32, 4096, 128], &[4, 32, 4096, 128]],
            causal,
        ));
        calls.push(c(
            BACKWARD_OP,
            "bf16",
            &[&[4, 32, 1024, 128], &[4, 32, 1024, 128]],
            causal,
        ));
    }
    calls.push(c(
        BACKWARD_OP,
        "f16",
        &[&[2, 8, 1024, 64], &[2, 2, 1024, 64]],
        false,
    ));
    calls.push(c(
        BACKWARD_OP,
        "bf16",
        &[&[2, 8, 777, 128], &[2, 2, 777, 128]],
        true,
    ));
    calls
}
