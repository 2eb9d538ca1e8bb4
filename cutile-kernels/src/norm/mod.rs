//! Row normalizations over the last axis, as `torch.nn.functional.rms_norm` / `layer_norm` with a weight
//! (and bias) over that axis: any rank (leading axes flattened into rows), f32, f16 and bf16, math in
//! f32. Besides the plain ops:
//!
//! - [`add_rms_norm`]: the fused residual add + RMSNorm of transformer blocks, out of place (`h = x + r`,
//!   `y = rms_norm(h) · w`), one kernel;
//! - [`rms_norm_heads`]: RMSNorm of every head vector of a `[T, H, D]` tensor with one `[D]` weight
//!   (Qwen3 / Gemma QK-norm), several heads per block, any token and head strides;
//! - [`layer_norm_stats`]: LayerNorm that also returns the per-row mean and rstd (f32), what a backward
//!   pass needs;
//! - [`backward`]: [`rms_norm_backward`] and [`layer_norm_backward`] (`dx`, `dw`, `db`), deterministic
//!   (per-group partial sums in scratch, no atomics).
//!
//! Modules and planners:
//!
//! - `dsl`: the kernels;
//! - [`config`]: whole-row or looped form and tile per row length (head tile for the per-head op), and
//!   the tuner's candidates;
//! - [`reference`]: the CPU references;
//! - [`plan_rms_norm`] / [`plan_layer_norm`] / [`plan_add_rms_norm`] / [`plan_layer_norm_stats`] /
//!   [`plan_rms_norm_heads`]: the launches of a call, without a device.

pub mod backward;
pub mod config;
mod dsl;
mod dsl_backward;
pub mod reference;

pub use backward::{
    LAYER_NORM_BACKWARD, RMS_NORM_BACKWARD, layer_norm_backward, rms_norm_backward,
};
pub use dsl_backward::backward_kernels;

pub use config::{HeadsConfig, NormConfig, Variant};
pub use dsl::kernels;
pub use reference::{
    add_rms_norm_reference, layer_norm_backward_reference, layer_norm_reference,
    layer_norm_stats_reference, rms_norm_backward_reference, rms_norm_heads_reference,
    rms_norm_reference,
};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;

use crate::op::tuning;
use crate::op::{
    FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, grid_rows, pow2_float_kernel,
};

/// Op names.
pub const RMS_NORM: &str = "rms_norm";
pub const LAYER_NORM: &str = "layer_norm";
pub const ADD_RMS_NORM: &str = "add_rms_norm";
pub const LAYER_NORM_STATS: &str = "layer_norm_stats";
pub const RMS_NORM_HEADS: &str = "rms_norm_heads";

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

/// Fused residual add + RMSNorm, out of place, queued on `stream` as one kernel:
/// `h = x + r`, rounded to the element type, and `y = h / sqrt(mean(h², -1) + eps) · w`.
///
/// `x`, `r`, `h` and `y` have one shape and element type; `w` has the length of the last axis. The sum
/// is rounded to the storage type *before* the statistics, as a framework that stores `h` and then calls
/// RMSNorm on it does (`h = x + r; y = rms_norm(h)` in torch), so `y` is exactly RMSNorm of the `h`
/// returned. This is vLLM's `fused_add_rms_norm(input, residual, weight, eps)` with its in-place results
/// as separate outputs: vLLM's `residual` is our `h` (the new residual stream), its `input` our `y`.
pub fn add_rms_norm<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    r: &'a impl TensorArg,
    w: &'a impl TensorArg,
    eps: f32,
    h: &'a mut impl TensorArgMut,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("r", r),
        Operand::of("w", w),
        Operand::of("h", &*h),
        Operand::of("y", &*y),
    ];
    run(stream, ADD_RMS_NORM, &operands, eps)
}

/// LayerNorm as [`layer_norm`] that also writes the statistics a backward pass needs: `mean` and
/// `rstd = 1 / sqrt(var + eps)` (biased variance) of every row, f32 whatever `x`'s type, shaped as `x`'s
/// leading axes (`[B, S]` for `x: [B, S, C]`; as `torch.native_layer_norm`'s, without its trailing 1).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_stats<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    w: &'a impl TensorArg,
    b: &'a impl TensorArg,
    eps: f32,
    y: &'a mut impl TensorArgMut,
    mean: &'a mut impl TensorArgMut,
    rstd: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("w", w),
        Operand::of("b", b),
        Operand::of("y", &*y),
        Operand::of("mean", &*mean),
        Operand::of("rstd", &*rstd),
    ];
    run(stream, LAYER_NORM_STATS, &operands, eps)
}

/// Per-head RMSNorm (Qwen3 / Gemma QK-norm): `y[…, t, h, :] = x[…, t, h, :] / sqrt(mean(x[…, t, h, :]²) +
/// eps) · w` for every head vector of `x: [.., T, H, D]` (rank ≥ 3; the axes before `H` flattened into
/// tokens), with one weight `w: [D]` shared by all heads, queued on `stream` as one launch.
///
/// The token and head axes may have any strides (e.g. `q` viewed out of a fused `qkv` projection), the
/// head axis `D` must be contiguous; `y` has `x`'s shape and element type (its own strides).
pub fn rms_norm_heads<'a>(
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
    let target = Target::of(stream.device())?;
    let Some(call) = HeadsCall::new(&operands, &target, eps)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let d = call.x.shape[2];
    let candidates = config::candidates_heads(d);
    let class = config::class_heads(call.x.dtype, d);
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`y` exclusively).
    unsafe {
        tuning::run_tuned(
            stream,
            &operands,
            2,
            RMS_NORM_HEADS,
            class,
            &candidates,
            true,
            |c| heads_launches(c, &call),
        )
    }
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
    let candidates = config::candidates(op, call.x.dtype, call.cols());
    let class = config::class(call.x.dtype, call.cols());
    // The tuner compares (and redirects to scratch) the normalized output `y`; the other outputs (`h`,
    // `mean`, `rstd`) are written to the caller's tensors by every trial, with the same values.
    let output = Layout::of(op).y_index();
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively).
    unsafe {
        tuning::run_tuned(
            stream,
            operands,
            output,
            op,
            class,
            &candidates,
            true,
            |c| launches(c, &call, &target),
        )
    }
}

/// The operand groups of a row op, in the order its kernels take them: `rows_in` row-shaped inputs, then
/// `vectors` 1-D weights (and bias), eps, `rows_out` row-shaped outputs (`y` last), `stats` f32 per-row
/// outputs.
#[derive(Debug, Clone, Copy)]
struct Layout {
    rows_in: usize,
    vectors: usize,
    rows_out: usize,
    stats: usize,
}

impl Layout {
    fn of(op: &str) -> Layout {
        let l = |rows_in, vectors, rows_out, stats| Layout {
            rows_in,
            vectors,
            rows_out,
            stats,
        };
        match op {
            LAYER_NORM => l(1, 2, 1, 0),
            ADD_RMS_NORM => l(2, 1, 2, 0),
            LAYER_NORM_STATS => l(1, 2, 1, 2),
            _ => l(1, 1, 1, 0),
        }
    }

    fn len(&self) -> usize {
        self.rows_in + self.vectors + self.rows_out + self.stats
    }

    /// The operand index of `y`, the last row-shaped output.
    fn y_index(&self) -> usize {
        self.rows_in + self.vectors + self.rows_out - 1
    }
}

/// A validated call: `x` as `rows x cols`, and every operand with the view its kernels get (rows for the
/// row-shaped ones, 1-D for the vectors and statistics), in kernel order; eps.
#[derive(Debug, Clone)]
struct Call {
    op: &'static str,
    x: Operand,
    layout: Layout,
    /// `(operand index, view)` of every operand, in the kernels' parameter order (eps after the vectors).
    views: Vec<(usize, Operand)>,
    eps: f32,
}

/// Fails unless `eps` is finite and ≥ 0.
fn check_eps(op: &'static str, eps: f32) -> Result<(), OpError> {
    if !eps.is_finite() || eps < 0.0 {
        return Err(OpError::Unsupported {
            op,
            what: format!("eps must be finite and ≥ 0, got {eps}"),
        });
    }
    Ok(())
}

/// Fails unless `v` is a 1-D tensor of `x`'s element type and length `len`.
fn check_vector(
    op: &'static str,
    v: &Operand,
    x: &Operand,
    len: i64,
    axis: &str,
) -> Result<(), OpError> {
    v.expect_same_dtype(op, x)?;
    v.expect_rank(op, 1)?;
    if v.shape[0] != len {
        return Err(OpError::Shape {
            op,
            what: format!("`{}` must have the length of `x`'s {axis}", v.name),
            left: v.shape[0].to_string(),
            right: len.to_string(),
        });
    }
    Ok(())
}

/// A per-row statistics operand (shape = `x`'s leading axes) as a 1-D `rows`-long view.
fn stats_view(op: &'static str, s: &Operand) -> Result<Operand, OpError> {
    let mut as_matrix = s.clone();
    as_matrix.shape.push(1);
    as_matrix.strides.push(1);
    let rows = as_matrix.as_rows(op).map_err(|_| OpError::Layout {
        op,
        arg: s.name,
        shape: s.shape.clone(),
        strides: s.strides.clone(),
        constraint:
            "its axes cannot be flattened into one row axis with one stride; pass a contiguous \
                     copy"
                .into(),
    })?;
    Ok(Operand {
        shape: vec![rows.shape[0]],
        strides: vec![rows.strides[0]],
        ..s.clone()
    })
}

impl Call {
    /// Checks the operands of `op` (see [`Layout`]); `None` for an empty `x`.
    fn new(
        op: &'static str,
        operands: &[Operand],
        target: &Target,
        eps: f32,
    ) -> Result<Option<Call>, OpError> {
        let layout = Layout::of(op);
        let n = layout.len();
        if operands.len() != n {
            return Err(OpError::Unsupported {
                op,
                what: format!("takes {n} tensors, got {}", operands.len()),
            });
        }
        let x = &operands[0];
        x.expect_dtype(op, FLOATS)?;
        let vec_start = layout.rows_in;
        let out_start = vec_start + layout.vectors;
        let stats_start = out_start + layout.rows_out;
        for o in operands[1..vec_start]
            .iter()
            .chain(&operands[out_start..stats_start])
        {
            o.expect_same_dtype(op, x)?;
            o.expect_same_shape(op, x)?;
        }
        for o in operands {
            target.expect_device(op, o)?;
        }
        check_eps(op, eps)?;
        let cols = x.shape.last().copied().unwrap_or(1);
        for v in &operands[vec_start..out_start] {
            check_vector(op, v, x, cols, "last axis")?;
        }
        let lead = &x.shape[..x.rank().saturating_sub(1)];
        for s in &operands[stats_start..] {
            if s.dtype != cutile_ir::ScalarType::F32 {
                return Err(OpError::DType {
                    op,
                    arg: s.name,
                    dtype: s.dtype,
                    constraint: "the statistics are f32 whatever `x`'s element type".into(),
                });
            }
            if s.shape != lead {
                return Err(OpError::Shape {
                    op,
                    what: format!("`{}` must have `x`'s leading shape (one per row)", s.name),
                    left: format!("{:?}", s.shape),
                    right: format!("{lead:?}"),
                });
            }
        }
        if x.numel() == 0 {
            return Ok(None);
        }
        let mut views = Vec::with_capacity(n);
        for (i, o) in operands.iter().enumerate() {
            let v = if (vec_start..out_start).contains(&i) {
                o.clone()
            } else if i >= stats_start {
                stats_view(op, o)?
            } else {
                o.as_rows(op)?
            };
            views.push((i, v));
        }
        Ok(Some(Call {
            op,
            x: views[0].1.clone(),
            layout,
            views,
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

/// The launches of an `add_rms_norm` call with the default configuration; `operands` are
/// `[x, r, w, h, y]`.
pub fn plan_add_rms_norm(
    operands: &[Operand],
    target: &Target,
    eps: f32,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan(ADD_RMS_NORM, operands, target, eps, false)
}

/// The launches of a `layer_norm_stats` call with the default configuration; `operands` are
/// `[x, w, b, y, mean, rstd]`.
pub fn plan_layer_norm_stats(
    operands: &[Operand],
    target: &Target,
    eps: f32,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan(LAYER_NORM_STATS, operands, target, eps, false)
}

/// The launches of an `rms_norm_heads` call; `operands` are `[x, w, y]`: the default configuration, or
/// every candidate's when `all_candidates`.
pub fn plan_rms_norm_heads(
    operands: &[Operand],
    target: &Target,
    eps: f32,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = HeadsCall::new(operands, target, eps)? else {
        return Ok(Vec::new());
    };
    let d = call.x.shape[2];
    let configs = if all_candidates {
        config::candidates_heads(d)
    } else {
        vec![config::choose_heads(d)]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(heads_launches(c, &call)?);
    }
    Ok(out)
}

/// The launches of a call of the row op `op` (`rms_norm`, `layer_norm`, `add_rms_norm` or
/// `layer_norm_stats`; `rms_norm_heads` goes to [`plan_rms_norm_heads`]): the default configuration, or
/// every candidate's when `all_candidates`.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
    eps: f32,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = match op {
        LAYER_NORM => LAYER_NORM,
        ADD_RMS_NORM => ADD_RMS_NORM,
        LAYER_NORM_STATS => LAYER_NORM_STATS,
        RMS_NORM_HEADS => return plan_rms_norm_heads(operands, target, eps, all_candidates),
        _ => RMS_NORM,
    };
    let Some(call) = Call::new(op, operands, target, eps)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        config::candidates(op, call.x.dtype, call.cols())
    } else {
        vec![config::choose(op, call.x.dtype, call.cols())]
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
    let kernel = match (cfg.variant, call.op) {
        (Variant::WholeRow, RMS_NORM) => pow2_float_kernel!(dt, cfg.bn, k::rms_norm),
        (Variant::WholeRow, LAYER_NORM) => pow2_float_kernel!(dt, cfg.bn, k::layer_norm),
        (Variant::Looped, RMS_NORM) => pow2_float_kernel!(dt, cfg.bn, k::rms_norm_looped),
        (Variant::Looped, LAYER_NORM) => pow2_float_kernel!(dt, cfg.bn, k::layer_norm_looped),
        (Variant::Gather, RMS_NORM) => pow2_float_kernel!(dt, cfg.bn, k::rms_norm_gather),
        (Variant::Gather, LAYER_NORM) => pow2_float_kernel!(dt, cfg.bn, k::layer_norm_gather),
        (Variant::GatherLooped, RMS_NORM) => {
            pow2_float_kernel!(dt, cfg.bn, k::rms_norm_gather_looped)
        }
        (Variant::GatherLooped, LAYER_NORM) => {
            pow2_float_kernel!(dt, cfg.bn, k::layer_norm_gather_looped)
        }
        (Variant::Persistent, LAYER_NORM) => persistent_kernel(dt, cfg.tm, cfg.bn, false),
        (Variant::Gather, ADD_RMS_NORM) => pow2_float_kernel!(dt, cfg.bn, k::add_rms_norm_gather),
        (Variant::GatherLooped, ADD_RMS_NORM) => {
            pow2_float_kernel!(dt, cfg.bn, k::add_rms_norm_gather_looped)
        }
        (Variant::Gather, LAYER_NORM_STATS) => {
            pow2_float_kernel!(dt, cfg.bn, k::layer_norm_stats_gather)
        }
        (Variant::GatherLooped, LAYER_NORM_STATS) => {
            pow2_float_kernel!(dt, cfg.bn, k::layer_norm_stats_gather_looped)
        }
        (Variant::Persistent, LAYER_NORM_STATS) => persistent_kernel(dt, cfg.tm, cfg.bn, true),
        _ => None,
    }
    .ok_or_else(|| OpError::Unsupported {
        op: call.op,
        what: format!(
            "no {dt} kernel for configuration `{}`",
            tuning::Candidate::name(cfg)
        ),
    })?;
    let l = call.layout;
    let out_start = l.rows_in + l.vectors;
    let mut args = Vec::with_capacity(call.views.len() + 1);
    for (i, v) in &call.views {
        if *i == out_start {
            args.push(PlannedArg::F32(call.eps));
        }
        args.push(PlannedArg::view(*i, v, *i >= out_start));
    }
    let rows = call.x.shape[0];
    let grid = match cfg.variant {
        // One block per row, given explicitly: gathered forms store through pointers (the launcher
        // cannot derive a grid from them) and a chunked output's tile count would repeat rows.
        Variant::WholeRow | Variant::Gather | Variant::Looped | Variant::GatherLooped => {
            Some((grid_rows(call.op, rows)?, 1, 1))
        }
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

/// A validated per-head call: `x` and `y` as `[T, H, D]` views (tokens flattened), `w`, eps.
#[derive(Debug, Clone)]
struct HeadsCall {
    x: Operand,
    w: Operand,
    y: Operand,
    eps: f32,
}

/// `o` (rank ≥ 3) as a `[T, H, D]` view: the axes before the last two flattened into tokens with one
/// stride, the head axis `D` contiguous.
fn as_heads(op: &'static str, o: &Operand) -> Result<Operand, OpError> {
    let r = o.rank();
    if r < 3 {
        return Err(OpError::Rank {
            op,
            arg: o.name,
            expected: "3 or more ([.., tokens, heads, head_dim])".into(),
            shape: o.shape.clone(),
        });
    }
    let layout_err = |constraint: &str| OpError::Layout {
        op,
        arg: o.name,
        shape: o.shape.clone(),
        strides: o.strides.clone(),
        constraint: constraint.into(),
    };
    let (h, d) = (o.shape[r - 2], o.shape[r - 1]);
    if d > 1 && o.strides[r - 1] != 1 {
        return Err(layout_err(
            "the last (head_dim) axis must be contiguous (stride 1); pass a contiguous copy",
        ));
    }
    let mut tokens = o.clone();
    tokens.shape = o.shape[..r - 2].to_vec();
    tokens.shape.push(1);
    tokens.strides = o.strides[..r - 2].to_vec();
    tokens.strides.push(1);
    let t = tokens.as_rows(op).map_err(|_| {
        layout_err(
            "the axes before (heads, head_dim) cannot be flattened into one token axis with one \
             stride; pass a contiguous copy",
        )
    })?;
    Ok(Operand {
        shape: vec![t.shape[0], h, d],
        strides: vec![t.strides[0], o.strides[r - 2], 1],
        ..o.clone()
    })
}

impl HeadsCall {
    /// Checks `[x, w, y]`; `None` for an empty `x`.
    fn new(operands: &[Operand], target: &Target, eps: f32) -> Result<Option<HeadsCall>, OpError> {
        let op = RMS_NORM_HEADS;
        let [x, w, y] = operands else {
            return Err(OpError::Unsupported {
                op,
                what: format!("takes 3 tensors, got {}", operands.len()),
            });
        };
        x.expect_dtype(op, FLOATS)?;
        y.expect_same_dtype(op, x)?;
        y.expect_same_shape(op, x)?;
        for o in operands {
            target.expect_device(op, o)?;
        }
        check_eps(op, eps)?;
        let xv = as_heads(op, x)?;
        let d = xv.shape[2];
        check_vector(op, w, x, d, "last (head_dim) axis")?;
        if d > config::MAX_HEAD_DIM {
            return Err(OpError::Unsupported {
                op,
                what: format!(
                    "head vectors of {d} elements exceed the per-head kernel's {}; use `rms_norm` \
                     over the last axis",
                    config::MAX_HEAD_DIM
                ),
            });
        }
        let yv = as_heads(op, y)?;
        if x.numel() == 0 {
            return Ok(None);
        }
        let vectors = xv.shape[0] * xv.shape[1];
        if vectors > (i32::MAX as i64) - 64 {
            return Err(OpError::Unsupported {
                op,
                what: format!("{vectors} head vectors exceed the kernel's i32 vector index"),
            });
        }
        Ok(Some(HeadsCall {
            x: xv,
            w: w.clone(),
            y: yv,
            eps,
        }))
    }
}

fn heads_launches(cfg: &HeadsConfig, call: &HeadsCall) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels::rms_norm_heads as k;
    let dt = call.x.dtype;
    let kernel = crate::op::float_kernel!(dt, |E| {
        macro_rules! bd {
            ($tm:literal) => {
                match cfg.bd {
                    16 => Some(k::kernel::<E, $tm, 16>()),
                    32 => Some(k::kernel::<E, $tm, 32>()),
                    64 => Some(k::kernel::<E, $tm, 64>()),
                    128 => Some(k::kernel::<E, $tm, 128>()),
                    256 => Some(k::kernel::<E, $tm, 256>()),
                    512 => Some(k::kernel::<E, $tm, 512>()),
                    1024 => Some(k::kernel::<E, $tm, 1024>()),
                    _ => None,
                }
            };
        }
        match cfg.tm {
            4 => bd!(4),
            8 => bd!(8),
            16 => bd!(16),
            32 => bd!(32),
            _ => None,
        }
    })
    .flatten()
    .ok_or_else(|| OpError::Unsupported {
        op: RMS_NORM_HEADS,
        what: format!(
            "no {dt} kernel for configuration `{}`",
            tuning::Candidate::name(cfg)
        ),
    })?;
    let vectors = call.x.shape[0] * call.x.shape[1];
    let blocks = grid_rows(RMS_NORM_HEADS, crate::op::ceil_div(vectors, cfg.tm))?;
    Ok(vec![PlannedLaunch {
        kernel,
        args: vec![
            PlannedArg::view(0, &call.x, false),
            PlannedArg::view(1, &call.w, false),
            PlannedArg::F32(call.eps),
            PlannedArg::view(2, &call.y, true),
        ],
        grid: Some((blocks, 1, 1)),
        config: tuning::Candidate::name(cfg),
    }])
}

/// The calls the catalog compiles (`cargo xtask kernels`), the GPU runner checks and benchmarks, and the
/// examples run: the benchmark shapes and ragged ones, per element type.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
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
    for op in [ADD_RMS_NORM, LAYER_NORM_STATS] {
        for x in [
            &[16384i64, 8192][..],
            &[8192, 1024],
            &[4096, 4096],
            &[1000, 1023],
            &[300, 8191],
            // Wider than a whole-row tile: the looped gather form.
            &[64, 20000],
            &[2, 37, 513],
        ] {
            calls.push(c(op, "bf16", &[x], false));
        }
        for dt in ["f32", "f16"] {
            calls.push(c(op, dt, &[&[1000, 1023]], false));
            calls.push(c(op, dt, &[&[16384, 8192]], false));
        }
    }
    for x in [
        &[4096i64, 32, 128][..],
        &[1, 8, 128],
        &[1000, 6, 64],
        &[4096, 8, 256],
        &[37, 5, 80],
    ] {
        calls.push(c(RMS_NORM_HEADS, "bf16", &[x], false));
    }
    for dt in ["f32", "f16"] {
        calls.push(c(RMS_NORM_HEADS, dt, &[&[4096, 32, 128]], false));
        calls.push(c(RMS_NORM_HEADS, dt, &[&[1000, 6, 64]], false));
    }
    calls
}

fn persistent_kernel(
    dt: cutile_ir::ScalarType,
    tm: i64,
    bn: i64,
    stats: bool,
) -> Option<cutile::dsl::Kernel> {
    use kernels::{layer_norm_persistent as k, layer_norm_stats_persistent as ks};
    crate::op::float_kernel!(dt, |E| match (tm, bn, stats) {
        (16, 1024, false) => Some(k::kernel::<E, 16, 1024>()),
        (8, 2048, false) => Some(k::kernel::<E, 8, 2048>()),
        (4, 4096, false) => Some(k::kernel::<E, 4, 4096>()),
        (2, 8192, false) => Some(k::kernel::<E, 2, 8192>()),
        (16, 1024, true) => Some(ks::kernel::<E, 16, 1024>()),
        (8, 2048, true) => Some(ks::kernel::<E, 8, 2048>()),
        (4, 4096, true) => Some(ks::kernel::<E, 4, 4096>()),
        (2, 8192, true) => Some(ks::kernel::<E, 2, 8192>()),
        _ => None,
    })
    .flatten()
}
