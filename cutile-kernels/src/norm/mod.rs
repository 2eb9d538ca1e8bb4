//! Row normalizations over the last axis, as `torch.nn.functional.rms_norm` / `layer_norm` with a weight
//! (and bias) over that axis: any rank (leading axes flattened into rows), f32, f16 and bf16, math in
//! f32.
//!
//! - `dsl`: the kernels;
//! - [`config`]: whole-row or looped form and tile per row length, and the tuner's candidates;
//! - [`reference`]: the CPU references;
//! - [`plan_rms_norm`] / [`plan_layer_norm`]: the launches of a call, without a device.

pub mod config;
mod dsl;
pub mod reference;

pub use config::{NormConfig, Variant};
pub use dsl::kernels;
pub use reference::{layer_norm_reference, rms_norm_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;

use crate::op::tuning;
use crate::op::{
    FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, grid_rows, pow2_float_kernel,
};

/// Op names.
pub const RMS_NORM: &str = "rms_norm";
pub const LAYER_NORM: &str = "layer_norm";

/// `y = x / sqrt(mean(x², -1) + eps) · w`, queued on `stream`; `w` has the length of `x`'s last axis.
pub fn rms_norm<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    w: &'a impl TensorArg,
    eps: f32,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("w", w),
        Operand::of("y", &*y),
    ];
    run(stream, RMS_NORM, &operands, eps)
}

/// `y = (x - mean) / sqrt(var + eps) · w + b` over the last axis (biased variance), queued on `stream`;
/// `w` and `b` have the length of `x`'s last axis.
pub fn layer_norm<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    w: &'a impl TensorArg,
    b: &'a impl TensorArg,
    eps: f32,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("w", w),
        Operand::of("b", b),
        Operand::of("y", &*y),
    ];
    run(stream, LAYER_NORM, &operands, eps)
}

fn run<'a>(
    stream: &'a Stream,
    op: &'static str,
    operands: &[Operand],
    eps: f32,
) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(op, operands, &target, eps)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let candidates = config::candidates(op, call.cols());
    let class = config::class(call.x.dtype, call.cols());
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`y` exclusively).
    unsafe {
        tuning::run_tuned(
            stream,
            operands,
            operands.len() - 1,
            op,
            class,
            &candidates,
            true,
            |c| launches(c, &call, &target),
        )
    }
}

/// A validated call: `x` and `y` as `rows x cols`, the vectors, eps.
#[derive(Debug, Clone)]
struct Call {
    op: &'static str,
    x: Operand,
    y: Operand,
    /// Operand indices of the weight (and bias) vectors, and their 1-D views.
    vectors: Vec<(usize, Operand)>,
    eps: f32,
}

impl Call {
    /// Checks `[x, w, (b,) y]`; `None` for an empty `x`.
    fn new(
        op: &'static str,
        operands: &[Operand],
        target: &Target,
        eps: f32,
    ) -> Result<Option<Call>, OpError> {
        let n = if op == LAYER_NORM { 4 } else { 3 };
        if operands.len() != n {
            return Err(OpError::Unsupported {
                op,
                what: format!("takes {n} tensors, got {}", operands.len()),
            });
        }
        let (x, y) = (&operands[0], &operands[n - 1]);
        x.expect_dtype(op, FLOATS)?;
        y.expect_same_dtype(op, x)?;
        y.expect_same_shape(op, x)?;
        for o in operands {
            target.expect_device(op, o)?;
        }
        if !eps.is_finite() || eps < 0.0 {
            return Err(OpError::Unsupported {
                op,
                what: format!("eps must be finite and ≥ 0, got {eps}"),
            });
        }
        let cols = x.shape.last().copied().unwrap_or(1);
        let mut vectors = Vec::new();
        for (i, v) in operands.iter().enumerate().take(n - 1).skip(1) {
            v.expect_same_dtype(op, x)?;
            v.expect_rank(op, 1)?;
            if v.shape[0] != cols {
                return Err(OpError::Shape {
                    op,
                    what: format!("`{}` must have the length of `x`'s last axis", v.name),
                    left: v.shape[0].to_string(),
                    right: cols.to_string(),
                });
            }
            vectors.push((i, v.clone()));
        }
        if x.numel() == 0 {
            return Ok(None);
        }
        Ok(Some(Call {
            op,
            x: x.as_rows(op)?,
            y: y.as_rows(op)?,
            vectors,
            eps,
        }))
    }

    fn cols(&self) -> i64 {
        self.x.shape[1]
    }
}

/// The launches of an RMSNorm call with the default configuration; `operands` are `[x, w, y]`.
pub fn plan_rms_norm(
    operands: &[Operand],
    target: &Target,
    eps: f32,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan(RMS_NORM, operands, target, eps, false)
}

/// The launches of a LayerNorm call with the default configuration; `operands` are `[x, w, b, y]`.
pub fn plan_layer_norm(
    operands: &[Operand],
    target: &Target,
    eps: f32,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan(LAYER_NORM, operands, target, eps, false)
}

/// The launches of a call of `op` (`rms_norm` or `layer_norm`): the default configuration, or every
/// candidate's when `all_candidates`.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
    eps: f32,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = if op == LAYER_NORM {
        LAYER_NORM
    } else {
        RMS_NORM
    };
    let Some(call) = Call::new(op, operands, target, eps)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        config::candidates(op, call.cols())
    } else {
        vec![config::choose(op, call.cols())]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(launches(c, &call, target)?);
    }
    Ok(out)
}

fn launches(cfg: &NormConfig, call: &Call, target: &Target) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels as k;
    let dt = call.x.dtype;
    let layer = call.op == LAYER_NORM;
    let kernel = match (cfg.variant, layer) {
        (Variant::WholeRow, false) => pow2_float_kernel!(dt, cfg.bn, k::rms_norm),
        (Variant::WholeRow, true) => pow2_float_kernel!(dt, cfg.bn, k::layer_norm),
        (Variant::Looped, false) => pow2_float_kernel!(dt, cfg.bn, k::rms_norm_looped),
        (Variant::Looped, true) => pow2_float_kernel!(dt, cfg.bn, k::layer_norm_looped),
        (Variant::Gather, false) => pow2_float_kernel!(dt, cfg.bn, k::rms_norm_gather),
        (Variant::Gather, true) => pow2_float_kernel!(dt, cfg.bn, k::layer_norm_gather),
        (Variant::GatherLooped, false) => {
            pow2_float_kernel!(dt, cfg.bn, k::rms_norm_gather_looped)
        }
        (Variant::GatherLooped, true) => {
            pow2_float_kernel!(dt, cfg.bn, k::layer_norm_gather_looped)
        }
        (Variant::Persistent, true) => persistent_kernel(dt, cfg.tm, cfg.bn),
        (Variant::Persistent, false) => None,
    }
    .ok_or_else(|| OpError::Unsupported {
        op: call.op,
        what: format!(
            "no {dt} kernel for configuration `{}`",
            tuning::Candidate::name(cfg)
        ),
    })?;
    let mut args = vec![PlannedArg::view(0, &call.x, false)];
    for (i, v) in &call.vectors {
        args.push(PlannedArg::view(*i, v, false));
    }
    args.push(PlannedArg::F32(call.eps));
    args.push(PlannedArg::view(call.vectors.len() + 1, &call.y, true));
    let rows = call.x.shape[0];
    let grid = match cfg.variant {
        // One block per row; the chunked output's tile count would repeat rows.
        Variant::Looped | Variant::GatherLooped => Some((grid_rows(call.op, rows)?, 1, 1)),
        Variant::WholeRow | Variant::Gather => None,
        // One block per SM at most, each looping over row groups.
        Variant::Persistent => {
            let steps = crate::op::ceil_div(rows, cfg.tm);
            Some((steps.clamp(1, target.sm_count as i64) as u32, 1, 1))
        }
    };
    Ok(vec![PlannedLaunch {
        kernel,
        args,
        grid,
        config: tuning::Candidate::name(cfg),
    }])
}

/// The calls the catalog compiles (`cargo xtask kernels`), the GPU runner checks and benchmarks, and the
/// examples run: the benchmark shapes and ragged ones, per element type.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = |op: &str, dtype: &str, shapes: &[&[i64]], causal: bool| crate::op::CallSpec {
        op: op.into(),
        dtype: dtype.into(),
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        causal,
    };
    let mut calls = Vec::new();
    for op in [RMS_NORM, LAYER_NORM] {
        for x in [
            &[16384i64, 8192][..],
            &[8192, 1024],
            &[4096, 4096],
            &[1000, 1023],
            &[300, 8191],
        ] {
            calls.push(c(op, "bf16", &[x], false));
        }
        for dt in ["f32", "f16"] {
            calls.push(c(op, dt, &[&[1000, 1023]], false));
            calls.push(c(op, dt, &[&[16384, 8192]], false));
        }
    }
    calls
}

fn persistent_kernel(dt: cutile_ir::ScalarType, tm: i64, bn: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::layer_norm_persistent as k;
    crate::op::float_kernel!(dt, |E| match (tm, bn) {
        (16, 1024) => Some(k::kernel::<E, 16, 1024>()),
        (8, 2048) => Some(k::kernel::<E, 8, 2048>()),
        (4, 4096) => Some(k::kernel::<E, 4, 4096>()),
        (2, 8192) => Some(k::kernel::<E, 2, 8192>()),
        _ => None,
    })
    .flatten()
}
