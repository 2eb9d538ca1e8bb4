//! The backward passes of RMSNorm and LayerNorm over the last axis (any rank, leading axes flattened
//! into rows; f32, f16, bf16, math in f32): the input gradient `dx` and the weight gradient `dw` (and
//! the bias gradient `db` for LayerNorm), as torch's autograd of `F.rms_norm` / `F.layer_norm` gives
//! them.
//!
//! - RMSNorm takes `x, w, dy` and the forward's `eps`: its per-row `rstd` is recomputed from `x` in the
//!   `dx` kernel's first pass (which reads the row anyway), so the plain [`super::rms_norm`] forward
//!   needs to save nothing;
//! - LayerNorm takes `x, w, dy` and the forward's per-row `mean` and `rstd` (f32, `x`'s leading shape),
//!   as [`super::layer_norm_stats`] writes them.
//!
//! A call is three launches (kernels in `dsl_backward.rs`): `dx` one block per row; the weight (and
//! bias) gradient as per-block f32 column sums over row groups into scratch (`[G, cols]`, `G ≤ 256`
//! groups chosen from the shape only), then a small kernel summing the `G` partial rows in a fixed
//! order. No atomics: a call is deterministic, and its result does not depend on the device.
//!
//! Scratch (f32, per stream, see [`crate::op::scratch`]): RMSNorm `round64(rows) + G·cols` elements
//! (the recomputed `rstd` and the partials), LayerNorm `round64(G·cols) + G·cols` (weight and bias
//! partials).

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use super::dsl_backward::backward_kernels as k;
use super::{check_eps, check_vector, stats_view};
use crate::op::{
    FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div, execute, grid_rows,
    pow2_float_kernel, row_tile, scratch,
};

/// Op names.
pub const RMS_NORM_BACKWARD: &str = "rms_norm_backward";
pub const LAYER_NORM_BACKWARD: &str = "layer_norm_backward";

/// The widest chunk of the `dx` kernels (wider rows are walked in chunks of this many columns).
pub const MAX_DX_TILE: i64 = 2048;
/// The most row groups of the weight-gradient partials.
pub const MAX_GROUPS: i64 = 256;

/// RMSNorm backward, queued on `stream`: for `y = x / sqrt(mean(x², -1) + eps) · w`, writes
/// `dx = ∂L/∂x` (shape and type of `x`) and `dw = ∂L/∂w` (`[cols]`, `w`'s type) from `dy = ∂L/∂y`.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_backward<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    w: &'a impl TensorArg,
    dy: &'a impl TensorArg,
    eps: f32,
    dx: &'a mut impl TensorArgMut,
    dw: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("w", w),
        Operand::of("dy", dy),
        Operand::of("dx", &*dx),
        Operand::of("dw", &*dw),
    ];
    run(stream, RMS_NORM_BACKWARD, &operands, eps)
}

/// LayerNorm backward, queued on `stream`: for `y = (x - mean) · rstd · w + b`, writes `dx` (shape
/// and type of `x`), `dw` and `db` (`[cols]`, `w`'s type) from `dy` and the forward's `mean` and `rstd`
/// (f32, `x`'s leading shape: what [`super::layer_norm_stats`] writes).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    w: &'a impl TensorArg,
    dy: &'a impl TensorArg,
    mean: &'a impl TensorArg,
    rstd: &'a impl TensorArg,
    dx: &'a mut impl TensorArgMut,
    dw: &'a mut impl TensorArgMut,
    db: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("w", w),
        Operand::of("dy", dy),
        Operand::of("mean", mean),
        Operand::of("rstd", rstd),
        Operand::of("dx", &*dx),
        Operand::of("dw", &*dw),
        Operand::of("db", &*db),
    ];
    run(stream, LAYER_NORM_BACKWARD, &operands, 0.0)
}

fn run<'a>(
    stream: &'a Stream,
    op: &'static str,
    operands: &[Operand],
    eps: f32,
) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let Some(call) = BwdCall::new(op, operands, &target, eps)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let mut all = operands.to_vec();
    all.push(scratch::scratch(
        stream,
        "scratch",
        ScalarType::F32,
        call.scratch_elems(),
    )?);
    let launches = call.launches(&all)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively), and
    // the stream's scratch; every launch reads and writes inside the views it is given.
    unsafe { execute(stream, &all, &launches) }
}

/// The operands of a call (`[x, w, dy, dx, dw]` for RMSNorm, `[x, w, dy, mean, rstd, dx, dw, db]` for
/// LayerNorm) with the described scratch the plan needs appended (nothing for an empty call), for
/// planning without a device.
pub fn with_scratch(
    op: &str,
    operands: &[Operand],
    target: &Target,
) -> Result<Vec<Operand>, OpError> {
    let op = name(op)?;
    let mut out = operands.to_vec();
    if let Some(call) = BwdCall::new(op, operands, target, 1e-5)? {
        out.push(Operand::described(
            "scratch",
            operands.len(),
            ScalarType::F32,
            &[call.scratch_elems()],
        ));
    }
    Ok(out)
}

/// The launches of a call whose operands end with the scratch of [`with_scratch`] (none for an empty
/// call).
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
    eps: f32,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = name(op)?;
    let n = n_operands(op);
    let Some(call) = BwdCall::new(op, &operands[..n.min(operands.len())], target, eps)? else {
        return Ok(Vec::new());
    };
    call.launches(operands)
}

fn name(op: &str) -> Result<&'static str, OpError> {
    match op {
        RMS_NORM_BACKWARD => Ok(RMS_NORM_BACKWARD),
        LAYER_NORM_BACKWARD => Ok(LAYER_NORM_BACKWARD),
        other => Err(OpError::Unsupported {
            op: "norm backward",
            what: format!("`{other}` is neither {RMS_NORM_BACKWARD} nor {LAYER_NORM_BACKWARD}"),
        }),
    }
}

fn n_operands(op: &str) -> usize {
    if op == RMS_NORM_BACKWARD { 5 } else { 8 }
}

/// The tiles of a call, from its shape only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwdConfig {
    /// Chunk width of the `dx` kernel.
    pub dx_bn: i64,
    /// Rows and columns of a partial-sum tile.
    pub tm: i64,
    pub bn: i64,
    /// Row groups (rows of the partial matrices).
    pub groups: i64,
    /// Tile of the final column sums.
    pub sum_bn: i64,
}

/// The configuration for `rows x cols`.
pub fn choose(rows: i64, cols: i64) -> BwdConfig {
    let dx_bn = row_tile(cols).min(MAX_DX_TILE);
    let bn = if cols <= 128 { 128 } else { 256 };
    let tm = 4096 / bn;
    let col_tiles = ceil_div(cols.max(1), bn);
    let row_tiles = ceil_div(rows, tm).max(1);
    // About 512 blocks in all, at most MAX_GROUPS rows of partials.
    let groups = ceil_div(512, col_tiles).clamp(1, MAX_GROUPS).min(row_tiles);
    BwdConfig {
        dx_bn,
        tm,
        bn,
        groups,
        sum_bn: bn,
    }
}

/// A validated call: every operand's kernel view, the configuration.
#[derive(Debug, Clone)]
struct BwdCall {
    op: &'static str,
    x: Operand,
    w: Operand,
    dy: Operand,
    /// LayerNorm: `mean`, `rstd` as 1-D `rows` views.
    stats: Option<(Operand, Operand)>,
    dx: Operand,
    dw: Operand,
    db: Option<Operand>,
    eps: f32,
    cfg: BwdConfig,
}

/// Rounded up to 64 elements (256 bytes of f32), so a second scratch region stays aligned.
fn round64(n: i64) -> i64 {
    ceil_div(n, 64) * 64
}

impl BwdCall {
    /// Checks the operands; `None` when there is nothing to do (no columns).
    fn new(
        op: &'static str,
        operands: &[Operand],
        target: &Target,
        eps: f32,
    ) -> Result<Option<BwdCall>, OpError> {
        let n = n_operands(op);
        if operands.len() != n {
            return Err(OpError::Unsupported {
                op,
                what: format!("takes {n} tensors, got {}", operands.len()),
            });
        }
        for o in operands {
            target.expect_device(op, o)?;
        }
        let x = &operands[0];
        x.expect_dtype(op, FLOATS)?;
        if x.rank() == 0 {
            return Err(OpError::Rank {
                op,
                arg: x.name,
                expected: "1 or more".into(),
                shape: x.shape.clone(),
            });
        }
        let (w, dy) = (&operands[1], &operands[2]);
        let outs = if op == RMS_NORM_BACKWARD { 3 } else { 5 };
        let (dx, dw) = (&operands[outs], &operands[outs + 1]);
        for o in [dy, dx] {
            o.expect_same_dtype(op, x)?;
            o.expect_same_shape(op, x)?;
        }
        let cols = x.shape[x.rank() - 1];
        check_vector(op, w, x, cols, "last axis")?;
        check_vector(op, dw, x, cols, "last axis")?;
        let db = if op == LAYER_NORM_BACKWARD {
            check_vector(op, &operands[7], x, cols, "last axis")?;
            Some(operands[7].clone())
        } else {
            check_eps(op, eps)?;
            None
        };
        let lead = &x.shape[..x.rank() - 1];
        let stats = if op == LAYER_NORM_BACKWARD {
            let mut v = Vec::new();
            for s in &operands[3..5] {
                if s.dtype != ScalarType::F32 {
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
                v.push(stats_view(op, s)?);
            }
            Some((v[0].clone(), v[1].clone()))
        } else {
            None
        };
        if cols == 0 {
            return Ok(None);
        }
        let xr = x.as_rows(op)?;
        let rows = xr.shape[0];
        grid_rows(op, rows)?;
        Ok(Some(BwdCall {
            op,
            w: w.clone(),
            dy: dy.as_rows(op)?,
            stats,
            dx: dx.as_rows(op)?,
            dw: dw.clone(),
            db,
            eps,
            cfg: choose(rows, cols),
            x: xr,
        }))
    }

    fn rows(&self) -> i64 {
        self.x.shape[0]
    }

    fn cols(&self) -> i64 {
        self.x.shape[1]
    }

    fn partial_elems(&self) -> i64 {
        self.cfg.groups * self.cols()
    }

    /// Where the partials start in the scratch (RMSNorm keeps its `rstd` first).
    fn partial_offset(&self) -> i64 {
        if self.op == RMS_NORM_BACKWARD {
            round64(self.rows())
        } else {
            0
        }
    }

    /// f32 elements of scratch the call uses.
    fn scratch_elems(&self) -> i64 {
        if self.op == RMS_NORM_BACKWARD {
            self.partial_offset() + self.partial_elems()
        } else {
            round64(self.partial_elems()) + self.partial_elems()
        }
    }

    fn launches(&self, operands: &[Operand]) -> Result<Vec<PlannedLaunch>, OpError> {
        let op = self.op;
        let n = n_operands(op);
        let s = operands.get(n).ok_or_else(|| OpError::Unsupported {
            op,
            what: "the plan needs the scratch operand of `with_scratch`".into(),
        })?;
        if s.dtype != ScalarType::F32 || s.numel() < self.scratch_elems() {
            return Err(OpError::Unsupported {
                op,
                what: format!(
                    "the scratch must be {} f32 elements, got {:?} {}",
                    self.scratch_elems(),
                    s.shape,
                    s.dtype
                ),
            });
        }
        let dt = self.x.dtype;
        let c = self.cfg;
        let unsupported = |what: String| OpError::Unsupported { op, what };
        let scratch_view = |offset: i64, shape: Vec<i64>, output: bool| {
            let strides = crate::op::contiguous_strides(&shape);
            PlannedArg::Tensor {
                operand: n,
                output,
                shape,
                strides,
                offset,
            }
        };
        let (rows, cols) = (self.rows(), self.cols());
        let part = |offset: i64, output: bool| scratch_view(offset, vec![c.groups, cols], output);
        let mut out = Vec::new();
        let rms = op == RMS_NORM_BACKWARD;
        let (idx_dx, idx_dw) = if rms { (3, 4) } else { (5, 6) };
        // 1. dx, one block per row (and RMSNorm's rstd into the scratch).
        if rows > 0 {
            let kernel = if rms {
                pow2_float_kernel!(dt, c.dx_bn, k::rms_norm_bwd_dx)
            } else {
                pow2_float_kernel!(dt, c.dx_bn, k::layer_norm_bwd_dx)
            }
            .ok_or_else(|| unsupported(format!("no {dt} dx kernel for BN = {}", c.dx_bn)))?;
            let mut args = vec![
                PlannedArg::view(0, &self.x, false),
                PlannedArg::view(1, &self.w, false),
                PlannedArg::view(2, &self.dy, false),
            ];
            if rms {
                args.push(PlannedArg::F32(self.eps));
                args.push(PlannedArg::view(idx_dx, &self.dx, true));
                args.push(scratch_view(0, vec![rows], true));
            } else if let Some((m, r)) = &self.stats {
                args.push(PlannedArg::view(3, m, false));
                args.push(PlannedArg::view(4, r, false));
                args.push(PlannedArg::view(idx_dx, &self.dx, true));
            }
            out.push(PlannedLaunch {
                kernel,
                args,
                grid: Some((grid_rows(op, rows)?, 1, 1)),
                config: format!("{op}_dx BN={}", c.dx_bn),
            });
        }
        // 2. Per-group column sums into the scratch.
        let kernel = partial_kernel(rms, dt, c.tm, c.bn)
            .ok_or_else(|| unsupported(format!("no {dt} partial kernel {}x{}", c.tm, c.bn)))?;
        let mut args = vec![
            PlannedArg::view(0, &self.x, false),
            PlannedArg::view(2, &self.dy, false),
        ];
        let po = self.partial_offset();
        let pb_offset = round64(self.partial_elems());
        if rms {
            args.push(scratch_view(0, vec![rows], false));
            args.push(part(po, true));
        } else if let Some((m, r)) = &self.stats {
            args.push(PlannedArg::view(3, m, false));
            args.push(PlannedArg::view(4, r, false));
            args.push(part(0, true));
            args.push(part(pb_offset, true));
        }
        let col_tiles = u32::try_from(ceil_div(cols, c.bn))
            .map_err(|_| unsupported(format!("{cols} columns exceed the grid")))?;
        out.push(PlannedLaunch {
            kernel,
            args,
            grid: Some((c.groups as u32, col_tiles, 1)),
            config: format!("{op}_partial TM={} BN={} G={}", c.tm, c.bn, c.groups),
        });
        // 3. The partial rows summed into dw (and db).
        let kernel = pow2_float_kernel!(dt, c.sum_bn, k::sum_partials)
            .ok_or_else(|| unsupported(format!("no {dt} sum kernel for BN = {}", c.sum_bn)))?;
        let sum_grid = Some((ceil_div(cols, c.sum_bn) as u32, 1, 1));
        let mut sums = vec![(po, idx_dw, &self.dw)];
        if let Some(db) = &self.db {
            sums.push((pb_offset, 7, db));
        }
        for (offset, idx, dst) in sums {
            out.push(PlannedLaunch {
                kernel: kernel.clone(),
                args: vec![part(offset, false), PlannedArg::view(idx, dst, true)],
                grid: sum_grid,
                config: format!("{op}_sum BN={}", c.sum_bn),
            });
        }
        Ok(out)
    }
}

fn partial_kernel(rms: bool, dt: ScalarType, tm: i64, bn: i64) -> Option<cutile::dsl::Kernel> {
    crate::op::float_kernel!(dt, |E| match (rms, tm, bn) {
        (true, 32, 128) => Some(k::rms_norm_bwd_partial::kernel::<E, 32, 128>()),
        (true, 16, 256) => Some(k::rms_norm_bwd_partial::kernel::<E, 16, 256>()),
        (false, 32, 128) => Some(k::layer_norm_bwd_partial::kernel::<E, 32, 128>()),
        (false, 16, 256) => Some(k::layer_norm_bwd_partial::kernel::<E, 16, 256>()),
        _ => None,
    })
    .flatten()
}

/// The described operands of a registry call of `op` on `x: shape` (`[x]` lists `x`'s shape; `w`, `dw`,
/// `db` are `[cols]`, `mean`, `rstd` f32 of the leading shape), scratch excluded.
pub fn described_call(op: &str, dt: ScalarType, x: &[i64]) -> Result<Vec<Operand>, OpError> {
    let op = name(op)?;
    let cols = [x.last().copied().unwrap_or(1)];
    let lead = &x[..x.len().saturating_sub(1)];
    let d = Operand::described;
    let mut v = vec![d("x", 0, dt, x), d("w", 1, dt, &cols), d("dy", 2, dt, x)];
    if op == LAYER_NORM_BACKWARD {
        v.push(d("mean", 3, ScalarType::F32, lead));
        v.push(d("rstd", 4, ScalarType::F32, lead));
    }
    let i = v.len();
    v.push(d("dx", i, dt, x));
    v.push(d("dw", i + 1, dt, &cols));
    if op == LAYER_NORM_BACKWARD {
        v.push(d("db", i + 2, dt, &cols));
    }
    Ok(v)
}

/// The calls the catalog compiles and the runner checks and benchmarks: a Llama-sized bf16 row
/// (16384 x 4096) and a ragged one wider than one dx chunk, and a small f32 one (8 specializations per
/// op: few, as the catalog's compile time is boxed).
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    let mut calls = Vec::new();
    for op in [RMS_NORM_BACKWARD, LAYER_NORM_BACKWARD] {
        calls.push(c(op, "bf16", &[&[16384, 4096]], false));
        calls.push(c(op, "bf16", &[&[300, 5000]], false));
        calls.push(c(op, "f32", &[&[2, 37, 100]], false));
    }
    calls
}
