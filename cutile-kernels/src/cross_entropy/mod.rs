//! Fused linear + cross-entropy, as `F.cross_entropy(F.linear(x, w), target)` (mean or sum over the
//! targets that are not `ignore_index`), with the gradients w.r.t. `x` and (optionally) `w`, computed
//! chunk by chunk so the `[T, V]` logits never exist: peak extra memory is one chunk's `C x V` logits
//! (plus `T` f32 losses), not torch's `T x V`.
//!
//! Launches of a call ([`plan`]):
//! 1. `ce_count`: the number of targets that count and the gradient scale (`1 / count` for the mean)
//!    into f32 scratch `stats`: the gradient needs the scale before any chunk, so it is counted first
//!    (exactly, in i32) instead of rescaling `dx` afterwards;
//! 2. per chunk of `C` rows ([`config::chunk_rows`]): `crate::gemm` writes the chunk's logits
//!    `x[rows] @ w^T` into the logits scratch (`C x V`, row pitch [`config::logits_ld`]); `ce_rows`
//!    writes the rows' losses and, when a gradient is asked for, overwrites the logits with
//!    `dlogits = (softmax - onehot) · scale`; `crate::gemm` gives `dx[rows] = dlogits @ w`; the gemm
//!    epilogue path accumulates `dw += dlogits^T @ x[rows]` in f32 (the first chunk writes, the next
//!    add `dw` as the residual of the same tile);
//! 3. `ce_cast` when `dw` is bf16/f16 and there is more than one chunk (the f32 accumulator is then a
//!    `V x H` f32 scratch; pass an f32 `dw` to avoid it), and `ce_reduce`: the sum of the row losses in
//!    a fixed order, divided by the count for the mean. Deterministic: no atomics anywhere.
//!
//! The gradients are those of the loss with an upstream gradient of 1 (`loss.backward()`). An
//! all-ignored mean gives `loss = NaN` (0 / 0, as torch) and zero gradients; a target outside
//! `[0, V)` that is not `ignore_index` gives a NaN loss (torch raises a device assert) and no one-hot
//! term in its row's gradient. Logits are stored in the inputs' element type (as `F.linear`'s output);
//! all softmax math is f32.
//!
//! - `dsl`: the row, count, reduction and cast kernels;
//! - [`config`]: the chunk rule and the row tile;
//! - [`reference`]: the f64 CPU reference.

pub mod config;
mod dsl;
pub mod reference;

pub use dsl::kernels;
pub use reference::{CeReference, fused_linear_cross_entropy_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::gemm::{self, EpilogueSpec, GemmOptions};
use crate::op::{CallSpec, OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div};

/// The op's name.
pub const OP: &str = "fused_linear_cross_entropy";
/// Element types of `x` and `w` (f32 only with [`CeOptions::allow_tf32`]).
pub const DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16, ScalarType::F32];

/// Operand indices of a call, in this order (an absent `dx` / `dw` holds `x`, never written).
pub mod slot {
    pub const X: usize = 0;
    pub const W: usize = 1;
    pub const TARGET: usize = 2;
    pub const LOSS: usize = 3;
    pub const DX: usize = 4;
    pub const DW: usize = 5;
    /// The f32 scratch (stats, row losses, dw partials and accumulator, then the logits).
    pub const SCRATCH: usize = 6;
    /// The same scratch viewed in the inputs' element type (the logits region).
    pub const SCRATCH_E: usize = 7;
    /// Operands without scratch.
    pub const COUNT: usize = 6;
}

/// How the per-token losses are reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Reduction {
    /// The mean over the targets that are not `ignore_index` (torch's default).
    #[default]
    Mean,
    /// The sum.
    Sum,
}

/// The call's switches that are not tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CeOptions {
    /// Targets equal to this contribute neither loss nor gradient (torch's default -100).
    pub ignore_index: i64,
    pub reduction: Reduction,
    /// Rows per chunk; `None`: [`config::chunk_rows`]'s rule (1 GiB of logits, balanced chunks).
    pub chunk: Option<usize>,
    /// f32 `x` and `w`: run the products on tensor cores as tf32 (as [`GemmOptions::allow_tf32`]).
    pub allow_tf32: bool,
    /// The gradients are asked for (set by the host function from `dx` / `dw`; planning only).
    pub dx: bool,
    pub dw: bool,
}

impl Default for CeOptions {
    fn default() -> Self {
        CeOptions {
            ignore_index: -100,
            reduction: Reduction::Mean,
            chunk: None,
            allow_tf32: false,
            dx: false,
            dw: false,
        }
    }
}

/// `loss = cross_entropy(x @ w^T, target)` (see the module docs), queued on `stream`; with `dx` /
/// `dw` also the gradients of `loss` w.r.t. `x` and `w`. `x: [T, H]`, `w: [V, H]` (a PyTorch `Linear`
/// weight; any strides, so a view works), `target: [T]` i32 or i64, `loss`: one f32 (`[1]` or `[]`),
/// `dx: [T, H]` of `x`'s type, `dw: [V, H]` f32 or `x`'s type (written, not accumulated into).
/// `options.dx` / `options.dw` are ignored here (the tensors given decide). `T = 0` is refused (the
/// loss is undefined).
#[allow(clippy::too_many_arguments)]
pub fn fused_linear_cross_entropy<'a>(
    stream: &'a Stream,
    x: &'a dyn TensorArg,
    w: &'a dyn TensorArg,
    target: &'a dyn TensorArg,
    options: &CeOptions,
    loss: &'a mut dyn TensorArgMut,
    dx: Option<&'a mut dyn TensorArgMut>,
    dw: Option<&'a mut dyn TensorArgMut>,
) -> Result<Pending<'a>, OpError> {
    let xo = Operand::of("x", x);
    let opts = CeOptions {
        dx: dx.is_some(),
        dw: dw.is_some(),
        ..*options
    };
    let mut operands = vec![
        xo.clone(),
        Operand::of("w", w),
        Operand::of("target", target),
        Operand::of("loss", &*loss),
        dx.as_deref()
            .map_or_else(|| xo.clone(), |t| Operand::of("dx", t)),
        dw.as_deref()
            .map_or_else(|| xo.clone(), |t| Operand::of("dw", t)),
    ];
    let tgt = Target::of(stream.device())?;
    let call = Call::new(&operands, &opts, &tgt)?;
    let layout = Layout::of(&call, &tgt);
    let s = crate::op::scratch::scratch(stream, "scratch", ScalarType::F32, layout.total)?;
    operands.push(s.clone());
    operands.push(scratch_as(&s, call.dtype));
    let launches = launches(&call, &layout, &operands, &tgt)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (loss, dx, dw exclusively),
    // and the stream's scratch, which lives until exit and is used in stream order; the plan addresses
    // it within `layout.total` f32 elements.
    unsafe { crate::op::execute(stream, &operands, &launches) }
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    index: ScalarType,
    t: i64,
    h: i64,
    v: i64,
    opts: CeOptions,
    /// `dw` is f32 (accumulated in place) rather than the inputs' type.
    dw_f32: bool,
    /// Rows per chunk.
    chunk: i64,
}

fn shape_err(
    what: impl Into<String>,
    left: impl std::fmt::Debug,
    right: impl std::fmt::Debug,
) -> OpError {
    OpError::Shape {
        op: OP,
        what: what.into(),
        left: format!("{left:?}"),
        right: format!("{right:?}"),
    }
}

fn unsupported(what: impl Into<String>) -> OpError {
    OpError::Unsupported {
        op: OP,
        what: what.into(),
    }
}

impl Call {
    fn new(ops: &[Operand], opts: &CeOptions, target: &Target) -> Result<Call, OpError> {
        if ops.len() < slot::COUNT {
            return Err(unsupported(format!(
                "takes {} tensors (x, w, target, loss, dx, dw), got {}",
                slot::COUNT,
                ops.len()
            )));
        }
        for o in &ops[..slot::COUNT] {
            target.expect_device(OP, o)?;
        }
        let (x, w, tg, loss) = (
            &ops[slot::X],
            &ops[slot::W],
            &ops[slot::TARGET],
            &ops[slot::LOSS],
        );
        x.expect_dtype(OP, DTYPES)?;
        if x.dtype == ScalarType::F32 && !opts.allow_tf32 {
            return Err(unsupported(
                "f32 `x` and `w`: the products run on tensor cores as tf32 (10-bit mantissa); opt in \
                 with `CeOptions { allow_tf32: true, .. }`, or pass bf16/f16",
            ));
        }
        x.expect_rank(OP, 2)?;
        w.expect_rank(OP, 2)?;
        w.expect_same_dtype(OP, x)?;
        let (t, h, v) = (x.shape[0], x.shape[1], w.shape[0]);
        if w.shape[1] != h {
            return Err(shape_err(
                "`w` must be [V, H] (a PyTorch Linear weight): its columns vs `x`'s columns",
                w.shape[1],
                h,
            ));
        }
        if v < 1 || v > i32::MAX as i64 {
            return Err(shape_err(
                "the vocabulary V (`w`'s rows) must be in 1..=2^31-1",
                v,
                "1..=2147483647",
            ));
        }
        tg.expect_rank(OP, 1)?;
        tg.expect_dtype(OP, crate::op::INDICES)?;
        if tg.shape[0] != t {
            return Err(shape_err(
                "`target` must have one entry per row of `x`",
                tg.shape[0],
                t,
            ));
        }
        if t == 0 {
            return Err(unsupported(
                "no tokens (T = 0): the loss is undefined (torch gives NaN for the mean, 0 for the \
                 sum); skip the call",
            ));
        }
        loss.expect_dtype(OP, &[ScalarType::F32])?;
        if loss.rank() > 1 || loss.numel() != 1 {
            return Err(OpError::Rank {
                op: OP,
                arg: loss.name,
                expected: "0 or 1 (one f32 element)".into(),
                shape: loss.shape.clone(),
            });
        }
        if i32::try_from(opts.ignore_index).is_err() {
            return Err(unsupported(format!(
                "ignore_index {} does not fit i32",
                opts.ignore_index
            )));
        }
        if opts.dx {
            let dx = &ops[slot::DX];
            dx.expect_same_dtype(OP, x)?;
            if dx.shape != [t, h] {
                return Err(shape_err("`dx` must be [T, H] (as `x`)", &dx.shape, [t, h]));
            }
        }
        let mut dw_f32 = false;
        if opts.dw {
            let dw = &ops[slot::DW];
            if dw.dtype != ScalarType::F32 {
                dw.expect_same_dtype(OP, x)?;
            }
            dw_f32 = dw.dtype == ScalarType::F32;
            if dw.shape != [v, h] {
                return Err(shape_err("`dw` must be [V, H] (as `w`)", &dw.shape, [v, h]));
            }
        }
        if opts.chunk == Some(0) {
            return Err(unsupported("`chunk` must be at least 1 row"));
        }
        let chunk = config::chunk_rows(
            t,
            v,
            x.elem_bytes() as i64,
            opts.chunk.map(|c| c.min(i64::MAX as usize) as i64),
        );
        Ok(Call {
            dtype: x.dtype,
            index: tg.dtype,
            t,
            h,
            v,
            opts: *opts,
            dw_f32,
            chunk,
        })
    }

    fn chunks(&self) -> i64 {
        ceil_div(self.t, self.chunk)
    }

    fn grad(&self) -> bool {
        self.opts.dx || self.opts.dw
    }

    /// `dw` accumulates in an f32 scratch (16-bit `dw`, several chunks).
    fn dw_scratch(&self) -> bool {
        self.opts.dw && !self.dw_f32 && self.chunks() > 1
    }

    fn gemm_options(&self) -> GemmOptions {
        GemmOptions {
            allow_tf32: self.opts.allow_tf32,
        }
    }
}

/// Where things live in the f32 scratch (offsets in f32 elements; the logits region in elements of
/// the inputs' type, of the [`slot::SCRATCH_E`] view).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    stats: i64,
    row_loss: i64,
    /// The `dw` product's split-K partials, when its schedule splits.
    partials: i64,
    /// The f32 `dw` accumulator, when [`Call::dw_scratch`].
    dw: i64,
    /// In elements of the inputs' type.
    logits: i64,
    /// f32 elements in all.
    total: i64,
}

/// `n` rounded up to 64 f32 (256 bytes).
fn align(n: i64) -> i64 {
    ceil_div(n, 64) * 64
}

impl Layout {
    fn of(call: &Call, target: &Target) -> Layout {
        let stats = 0;
        let row_loss = 64;
        let partials = align(row_loss + call.t);
        let mut next = partials;
        if call.opts.dw {
            let last = call.t - (call.chunks() - 1) * call.chunk;
            let mut need = 0;
            for k in [call.chunk, last] {
                if let gemm::epilogue::Schedule::SplitK { splits, .. } = gemm::epilogue::schedule(
                    target,
                    call.dtype,
                    call.v,
                    call.h,
                    k,
                    &EpilogueSpec::default(),
                ) {
                    need = need.max(gemm::epilogue::scratch_len(splits, call.v, call.h));
                }
            }
            next = align(next + need);
        }
        let dw = next;
        if call.dw_scratch() {
            next = align(next + call.v * call.h);
        }
        let per_f32 = 4 / call.dtype.storage_bytes().max(1) as i64;
        let logits = next * per_f32;
        let logits_len = call.chunk * config::logits_ld(call.v);
        let total = align(next + ceil_div(logits_len, per_f32));
        Layout {
            stats,
            row_loss,
            partials,
            dw,
            logits,
            total,
        }
    }
}

/// Scratch `s` (f32) viewed as elements of `dtype`.
fn scratch_as(s: &Operand, dtype: ScalarType) -> Operand {
    let per = 4 / dtype.storage_bytes().max(1) as i64;
    Operand {
        name: "scratch (logits)",
        dtype,
        shape: vec![s.shape[0] * per],
        strides: vec![1],
        ..s.clone()
    }
}

/// `operands` (a call's [`slot::COUNT`] tensors) followed by a described scratch big enough for the
/// call and its view in the inputs' type: what planning without a device passes to [`plan`].
pub fn with_scratch(
    operands: &[Operand],
    opts: &CeOptions,
    target: &Target,
) -> Result<Vec<Operand>, OpError> {
    let call = Call::new(operands, opts, target)?;
    let layout = Layout::of(&call, target);
    let mut out = operands[..slot::COUNT].to_vec();
    let s = Operand::described("scratch", slot::SCRATCH, ScalarType::F32, &[layout.total]);
    out.push(scratch_as(&s, call.dtype));
    out.insert(slot::SCRATCH, s);
    Ok(out)
}

/// f32 elements of scratch a call takes (what [`with_scratch`] describes).
pub fn scratch_len(
    operands: &[Operand],
    opts: &CeOptions,
    target: &Target,
) -> Result<i64, OpError> {
    let call = Call::new(operands, opts, target)?;
    Ok(Layout::of(&call, target).total)
}

/// The launches of a call over `operands` ([`with_scratch`]'s list).
pub fn plan(
    operands: &[Operand],
    opts: &CeOptions,
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let call = Call::new(operands, opts, target)?;
    let layout = Layout::of(&call, target);
    if operands.len() < slot::SCRATCH_E + 1
        || operands[slot::SCRATCH].shape[0] < layout.total
        || operands[slot::SCRATCH].dtype != ScalarType::F32
    {
        return Err(unsupported(format!(
            "needs an f32 scratch of {} elements and its view after the call's tensors (use \
             `cross_entropy::with_scratch`)",
            layout.total
        )));
    }
    launches(&call, &layout, operands, target)
}

/// A view of operand `operand` (starting `offset` of its elements in) that a sub-plan (a gemm) sees as
/// one of its own operands.
struct SubOperand {
    operand: usize,
    offset: i64,
    view: Operand,
}

fn sub(ops: &[Operand], operand: usize, offset: i64, shape: &[i64], strides: &[i64]) -> SubOperand {
    let o = &ops[operand];
    SubOperand {
        operand,
        offset,
        view: Operand {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            ptr: o
                .ptr
                .wrapping_add((offset as u64).wrapping_mul(o.elem_bytes())),
            ..o.clone()
        },
    }
}

/// The gemm's launches over `subs` remapped onto this call's operands, labelled `what`.
fn remap(launches: Vec<PlannedLaunch>, subs: &[SubOperand], what: &str) -> Vec<PlannedLaunch> {
    launches
        .into_iter()
        .map(|mut l| {
            for a in &mut l.args {
                if let PlannedArg::Tensor {
                    operand, offset, ..
                } = a
                {
                    let s = &subs[*operand];
                    *operand = s.operand;
                    *offset += s.offset;
                }
            }
            l.config = format!("{OP} {what} ({})", l.config);
            l
        })
        .collect()
}

fn no_kernel(what: &str, call: &Call) -> OpError {
    unsupported(format!(
        "no {} kernel `{what}` for {} targets",
        call.dtype, call.index
    ))
}

/// A 1-D view of `n` elements of operand `operand`, `offset` in.
fn vec_arg(operand: usize, offset: i64, n: i64, output: bool) -> PlannedArg {
    PlannedArg::Tensor {
        operand,
        output,
        shape: vec![n],
        strides: vec![1],
        offset,
    }
}

fn launches(
    call: &Call,
    layout: &Layout,
    ops: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels as k;
    let (dt, it) = (call.dtype, call.index);
    let (t, h, v) = (call.t, call.h, call.v);
    let ld = config::logits_ld(v);
    let bv = config::row_tile(v);
    let ignore = call.opts.ignore_index as i32;
    let mean = (call.opts.reduction == Reduction::Mean) as i32;
    let (x, w) = (&ops[slot::X], &ops[slot::W]);
    let gopt = call.gemm_options();
    let mut out = Vec::new();

    let count = match it {
        ScalarType::I32 => Some(k::ce_count::kernel::<i32, { config::REDUCE_BT as i32 }>()),
        ScalarType::I64 => Some(k::ce_count::kernel::<i64, { config::REDUCE_BT as i32 }>()),
        _ => None,
    }
    .ok_or_else(|| no_kernel("ce_count", call))?;
    out.push(PlannedLaunch {
        kernel: count,
        args: vec![
            PlannedArg::whole(slot::TARGET, &ops[slot::TARGET], false),
            PlannedArg::I32(ignore),
            PlannedArg::I32(mean),
            vec_arg(slot::SCRATCH, layout.stats, 2, true),
        ],
        grid: Some((1, 1, 1)),
        config: format!("{OP} count"),
    });
    let rows = crate::op::float_index_kernel!(dt, it, |E, I| match bv {
        256 => Some(k::ce_rows::kernel::<E, I, 256>()),
        1024 => Some(k::ce_rows::kernel::<E, I, 1024>()),
        2048 => Some(k::ce_rows::kernel::<E, I, 2048>()),
        _ => None,
    })
    .flatten()
    .ok_or_else(|| no_kernel("ce_rows", call))?;

    let dw_target = if call.dw_scratch() {
        (slot::SCRATCH, layout.dw)
    } else {
        (slot::DW, 0)
    };
    for c in 0..call.chunks() {
        let r0 = c * call.chunk;
        let rows_n = call.chunk.min(t - r0);
        let x_off = r0 * x.strides[0];
        // logits = x[rows] @ w^T into the logits scratch.
        let subs = [
            sub(ops, slot::X, x_off, &[rows_n, h], &x.strides),
            sub(ops, slot::W, 0, &[h, v], &[w.strides[1], w.strides[0]]),
            sub(ops, slot::SCRATCH_E, layout.logits, &[rows_n, v], &[ld, 1]),
        ];
        let g = gemm::plan_with(
            &subs.iter().map(|s| s.view.clone()).collect::<Vec<_>>(),
            target,
            &gopt,
            false,
        )?;
        out.extend(remap(g, &subs, &format!("chunk {c} logits")));
        // Row losses and, for a gradient, dlogits in place.
        let logits_view = PlannedArg::Tensor {
            operand: slot::SCRATCH_E,
            output: false,
            shape: vec![rows_n, v],
            strides: vec![ld, 1],
            offset: layout.logits,
        };
        let mut dlogits_view = logits_view.clone();
        if let PlannedArg::Tensor { output, .. } = &mut dlogits_view {
            *output = true;
        }
        let tg = &ops[slot::TARGET];
        out.push(PlannedLaunch {
            kernel: rows.clone(),
            args: vec![
                logits_view,
                PlannedArg::Tensor {
                    operand: slot::TARGET,
                    output: false,
                    shape: vec![rows_n],
                    strides: tg.strides.clone(),
                    offset: r0 * tg.strides[0],
                },
                vec_arg(slot::SCRATCH, layout.stats, 2, false),
                PlannedArg::I32(ignore),
                PlannedArg::I32(call.grad() as i32),
                vec_arg(slot::SCRATCH, layout.row_loss + r0, rows_n, true),
                dlogits_view,
            ],
            grid: Some((crate::op::grid_rows(OP, rows_n)?, 1, 1)),
            config: format!("{OP} chunk {c} rows BV={bv}"),
        });
        let dlogits = |transposed: bool| {
            if transposed {
                sub(ops, slot::SCRATCH_E, layout.logits, &[v, rows_n], &[1, ld])
            } else {
                sub(ops, slot::SCRATCH_E, layout.logits, &[rows_n, v], &[ld, 1])
            }
        };
        if call.opts.dx {
            let dx = &ops[slot::DX];
            let subs = [
                dlogits(false),
                sub(ops, slot::W, 0, &[v, h], &w.strides),
                sub(ops, slot::DX, r0 * dx.strides[0], &[rows_n, h], &dx.strides),
            ];
            let g = gemm::plan_with(
                &subs.iter().map(|s| s.view.clone()).collect::<Vec<_>>(),
                target,
                &gopt,
                false,
            )?;
            out.extend(remap(g, &subs, &format!("chunk {c} dx")));
        }
        if call.opts.dw {
            let (dop, doff) = dw_target;
            let dstrides = if dop == slot::DW {
                ops[slot::DW].strides.clone()
            } else {
                vec![h, 1]
            };
            // The accumulator as the product's output (and residual): f32 scratch or `dw` itself.
            let acc = || sub(ops, dop, doff, &[v, h], &dstrides);
            let mut subs = vec![
                dlogits(true),
                sub(ops, slot::X, x_off, &[rows_n, h], &x.strides),
                acc(),
            ];
            let spec = EpilogueSpec {
                residual: c > 0,
                ..EpilogueSpec::default()
            };
            if spec.residual {
                subs.push(acc());
            }
            if let gemm::epilogue::Schedule::SplitK { splits, .. } =
                gemm::epilogue::schedule(target, dt, v, h, rows_n, &spec)
            {
                let n = gemm::epilogue::scratch_len(splits, v, h);
                subs.push(sub(ops, slot::SCRATCH, layout.partials, &[n], &[1]));
            }
            let g = gemm::epilogue::plan_epilogue(
                &subs.iter().map(|s| s.view.clone()).collect::<Vec<_>>(),
                target,
                &spec,
                &gopt,
            )?;
            out.extend(remap(g, &subs, &format!("chunk {c} dw")));
        }
    }
    if call.dw_scratch() {
        let cast = crate::op::float_kernel!(dt, |E| k::ce_cast::kernel::<
            E,
            { config::CAST_BM as i32 },
            { config::CAST_BN as i32 },
        >())
        .ok_or_else(|| no_kernel("ce_cast", call))?;
        out.push(PlannedLaunch {
            kernel: cast,
            args: vec![
                PlannedArg::Tensor {
                    operand: slot::SCRATCH,
                    output: false,
                    shape: vec![v, h],
                    strides: vec![h, 1],
                    offset: layout.dw,
                },
                PlannedArg::whole(slot::DW, &ops[slot::DW], true),
            ],
            grid: None,
            config: format!("{OP} dw cast"),
        });
    }
    out.push(PlannedLaunch {
        kernel: k::ce_reduce::kernel::<{ config::REDUCE_BT as i32 }>(),
        args: vec![
            vec_arg(slot::SCRATCH, layout.row_loss, t, false),
            vec_arg(slot::SCRATCH, layout.stats, 2, false),
            PlannedArg::I32(mean),
            vec_arg(slot::LOSS, 0, 1, true),
        ],
        grid: Some((1, 1, 1)),
        config: format!("{OP} reduce"),
    });
    Ok(out)
}

/// A registry call spec's inputs: `shapes` = `[[T, H], [V]]`, optionally followed by switches
/// `[dx, dw, dw_f32, i64 target, sum]` (0/1; default `[1, 1, 1, 1, 0]`: both gradients, an f32 `dw`,
/// i64 targets, mean), then optionally `ignore_every` (the workloads' data: every `k`-th target is
/// `ignore_index`, 1 = all, 0 = none; default 8; planning ignores it) and `chunk` (rows per chunk, 0 =
/// [`config::chunk_rows`]'s rule).
pub const SPEC_INPUTS: &str = "[[T, H], [V], optional [dx, dw, dw_f32, i64 target, sum] as 0/1 \
     (+ optional ignore_every, chunk)] (loss f32 [1])";

/// The switches of a call spec (see [`SPEC_INPUTS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecSwitches {
    pub dx: bool,
    pub dw: bool,
    pub dw_f32: bool,
    pub wide: bool,
    pub sum: bool,
    pub ignore_every: i64,
    pub chunk: i64,
}

/// The switches of `shapes` (see [`SPEC_INPUTS`]).
pub fn spec_switches(shapes: &[Vec<i64>]) -> Result<SpecSwitches, OpError> {
    let bad = || unsupported(format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"));
    match shapes {
        [x, v] | [x, v, _] if x.len() == 2 && v.len() == 1 => {}
        _ => return Err(bad()),
    }
    let sw = match shapes.get(2) {
        Some(s) if (5..=7).contains(&s.len()) && s.iter().all(|&v| v >= 0) => s.clone(),
        Some(_) => return Err(bad()),
        None => vec![1, 1, 1, 1, 0],
    };
    Ok(SpecSwitches {
        dx: sw[0] != 0,
        dw: sw[1] != 0,
        dw_f32: sw[2] != 0,
        wide: sw[3] != 0,
        sum: sw[4] != 0,
        ignore_every: sw.get(5).copied().unwrap_or(8),
        chunk: sw.get(6).copied().unwrap_or(0),
    })
}

/// The described operands and options of a registry call spec (see [`SPEC_INPUTS`]).
pub fn described_call(
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<(Vec<Operand>, CeOptions), OpError> {
    let sw = spec_switches(shapes)?;
    let (t, h, v) = (shapes[0][0], shapes[0][1], shapes[1][0]);
    let opts = CeOptions {
        reduction: if sw.sum {
            Reduction::Sum
        } else {
            Reduction::Mean
        },
        chunk: (sw.chunk > 0).then_some(sw.chunk as usize),
        allow_tf32: dt == ScalarType::F32,
        dx: sw.dx,
        dw: sw.dw,
        ..CeOptions::default()
    };
    let it = if sw.wide {
        ScalarType::I64
    } else {
        ScalarType::I32
    };
    let dwt = if sw.dw_f32 { ScalarType::F32 } else { dt };
    let o = Operand::described;
    let ops = vec![
        o("x", slot::X, dt, &[t, h]),
        o("w", slot::W, dt, &[v, h]),
        o("target", slot::TARGET, it, &[t]),
        o("loss", slot::LOSS, ScalarType::F32, &[1]),
        o("dx", slot::DX, dt, &[t, h]),
        o("dw", slot::DW, dwt, &[v, h]),
    ];
    Ok((ops, opts))
}

/// The calls the catalog compiles and the GPU runner benchmarks: the Llama-3 shape (T = 8192, H = 4096,
/// V = 128256, bf16, both gradients, f32 `dw`: 4 chunks) and a Llama-2 vocabulary (T = 4096, V =
/// 32000: one chunk), which share every kernel but the last chunk's, and one small ragged call with an
/// f16 `dw` (its cast kernel). The default
/// switches (`[1, 1, 1, 1, 0]`) are left out of the spec: a listed `1` would make the call look ragged
/// to the runner (`cutile_examples::workload::is_ragged`), which checks ragged calls on the CPU.
pub fn representative_calls() -> Vec<CallSpec> {
    let c = |dt: &str, x: &[i64], v: i64| CallSpec::new(OP, dt, &[x, &[v]], false);
    vec![
        c("bf16", &[8192, 4096], 128256),
        c("bf16", &[4096, 4096], 32000),
        // A small ragged call with an f16 `dw` over 3 chunks: the f32 accumulator's final cast
        // (`ce_cast`), which the benchmark calls (f32 `dw`) do not use.
        CallSpec::new(
            OP,
            "f16",
            &[&[257, 96], &[3001], &[1, 1, 0, 0, 0, 0, 100]],
            false,
        ),
    ]
}

/// Calls the benchmark times beside [`representative_calls`]: the Llama-3 call (bf16 `[8192, 4096]`,
/// `V = 128256`, both gradients, f32 `dw`) at a quarter and half the chunk rows the rule gives it (1024
/// and 2048 against 4096), and as one chunk of all 8192 rows (2 GiB of logits scratch, no adding `dw`
/// product: still more than the logits' size below torch's 6.3 GB peak), so one run measures the
/// chunk budget against the same torch peer.
pub fn bench_calls() -> Vec<CallSpec> {
    [1024, 2048, 8192]
        .into_iter()
        .map(|rows| {
            CallSpec::new(
                OP,
                "bf16",
                &[&[8192, 4096], &[128256], &[1, 1, 1, 1, 0, 8, rows]],
                false,
            )
        })
        .collect()
}

/// Ragged calls the GPU runner checks (`check --fixed`; switches `[dx, dw, dw_f32, i64, sum,
/// ignore_every, chunk]`), kept out of the catalog: one token; every target ignored over several
/// chunks (mean: NaN loss, zero gradients); a 16-bit `dw` over several chunks (the f32 accumulator,
/// a ragged last chunk); `dw` only with a sum; forward only; f16 with i32 targets and a sum.
pub fn check_calls() -> Vec<CallSpec> {
    let c = |dt: &str, x: &[i64], v: i64, sw: &[i64]| CallSpec::new(OP, dt, &[x, &[v], sw], false);
    vec![
        c("bf16", &[1, 64], 10, &[1, 1, 1, 1, 0, 0, 0]),
        c("bf16", &[130, 64], 517, &[1, 1, 1, 1, 0, 1, 64]),
        c("f16", &[257, 96], 3001, &[1, 1, 0, 0, 0, 0, 100]),
        c("bf16", &[77, 200], 2049, &[0, 1, 1, 0, 1, 3, 0]),
        c("f16", &[33, 128], 700, &[0, 0, 1, 1, 0, 8, 0]),
        c("f16", &[300, 520], 1000, &[1, 1, 0, 0, 1, 5, 128]),
    ]
}
