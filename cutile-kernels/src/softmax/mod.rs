//! Softmax over the last axis, as `torch.softmax(x, -1)`: any rank (leading axes flattened into rows),
//! f32, f16 and bf16, math in f32.
//!
//! ```no_run
//! use cutile::runtime::{Device, Stream, Tensor};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! let x = Tensor::<half::bf16>::random(&device, &[4, 1000, 1023], 1)?;
//! let mut y = Tensor::<half::bf16>::zeros(&device, &[4, 1000, 1023])?;
//! cutile_kernels::softmax::softmax(&stream, &x, &mut y)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! - `dsl`: the kernels;
//! - [`config`]: which kernel and tile a shape gets, and the tuner's candidates;
//! - [`reference`]: the CPU reference;
//! - [`plan`]: the launches of a call, without a device (the host API, AOT bundles and tests share it).

pub mod config;
mod dsl;
pub mod reference;

pub use config::{SoftmaxConfig, Variant};
pub use dsl::kernels;
pub use reference::row_softmax_reference;

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;

use crate::op::tuning;
use crate::op::{
    FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, grid_rows, pow2_float_kernel,
};

/// The op's name (errors, tuning keys, the registry).
pub const OP: &str = "softmax";

/// `y = softmax(x, dim=-1)`, queued on `stream`. `y` has `x`'s shape and element type; both have a
/// unit-stride last axis and leading axes that flatten into rows. An empty `x` is a no-op.
pub fn softmax<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [Operand::of("x", x), Operand::of("y", &*y)];
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(&operands, &target)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let candidates = config::candidates(&target, call.dtype(), call.rows(), call.cols());
    let class = config::class(call.dtype(), call.rows(), call.cols());
    // SAFETY: the operands are `x` and `y`, borrowed for 'a (`y` exclusively); plans address only
    // their rows views.
    unsafe {
        tuning::run_tuned(stream, &operands, 1, OP, class, &candidates, true, |c| {
            launches(c, &call, &target)
        })
    }
}

/// A validated call: the `rows x cols` views of `x` and `y`.
#[derive(Debug, Clone)]
struct Call {
    x: Operand,
    y: Operand,
}

impl Call {
    /// Checks `[x, y]`; `None` for an empty tensor.
    fn new(operands: &[Operand], target: &Target) -> Result<Option<Call>, OpError> {
        let [x, y] = operands else {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!("takes 2 operands (x, y), got {}", operands.len()),
            });
        };
        x.expect_dtype(OP, FLOATS)?;
        y.expect_same_dtype(OP, x)?;
        y.expect_same_shape(OP, x)?;
        target.expect_device(OP, x)?;
        target.expect_device(OP, y)?;
        if x.numel() == 0 {
            return Ok(None);
        }
        Ok(Some(Call {
            x: x.as_rows(OP)?,
            y: y.as_rows(OP)?,
        }))
    }
    fn dtype(&self) -> cutile_ir::ScalarType {
        self.x.dtype
    }
    fn rows(&self) -> i64 {
        self.x.shape[0]
    }
    fn cols(&self) -> i64 {
        self.x.shape[1]
    }
}

/// The launches of a call (`operands` = `[x, y]`): the default configuration (what [`softmax`] runs
/// with tuning off), or every candidate's when `all_candidates` (bundles that serve tuning runs).
pub fn plan(
    operands: &[Operand],
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(c) = Call::new(operands, target)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        config::candidates(target, c.dtype(), c.rows(), c.cols())
    } else {
        vec![config::choose(target, c.dtype(), c.rows(), c.cols())]
    };
    let mut out = Vec::new();
    for cfg in &configs {
        out.extend(launches(cfg, &c, target)?);
    }
    Ok(out)
}

fn launches(
    cfg: &SoftmaxConfig,
    call: &Call,
    _target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    use config::Variant::*;
    use kernels as k;
    let dt = call.dtype();
    let rows = call.rows();
    let missing = || OpError::Unsupported {
        op: OP,
        what: format!(
            "no {dt} kernel for configuration `{}`",
            tuning::Candidate::name(cfg)
        ),
    };
    let kernel = match cfg.variant {
        WholeRow => pow2_float_kernel!(dt, cfg.bn, k::row_softmax),
        Warps8 => pow2_float_kernel!(dt, cfg.bn, k::row_softmax_w8),
        Warps16 => pow2_float_kernel!(dt, cfg.bn, k::row_softmax_w16),
        Online => pow2_float_kernel!(dt, cfg.bn, k::row_softmax_online),
        Rows => rows_kernel(dt, cfg.tm, cfg.bn),
        Gather => match cfg.bn {
            16384 => crate::op::float_kernel!(dt, |E| k::softmax_gather::kernel::<E, 16384>()),
            32768 => crate::op::float_kernel!(dt, |E| k::softmax_gather::kernel::<E, 32768>()),
            bn => pow2_float_kernel!(dt, bn, k::softmax_gather),
        },
        GatherOnline => pow2_float_kernel!(dt, cfg.bn, k::softmax_gather_online),
    }
    .ok_or_else(missing)?;
    let grid = match cfg.variant {
        // One block per row, whatever the chunk count.
        // `TM` rows per block: the tiles of the output.
        Rows => None,
        // One block per row, given explicitly: gathered forms store through pointers (the launcher
        // cannot derive a grid from them) and a chunked output's tile count would repeat rows.
        _ => Some((grid_rows(OP, rows)?, 1, 1)),
    };
    Ok(vec![PlannedLaunch {
        kernel,
        args: vec![
            PlannedArg::view(0, &call.x, false),
            PlannedArg::view(1, &call.y, true),
        ],
        grid,
        config: tuning::Candidate::name(cfg),
    }])
}

fn rows_kernel(dt: cutile_ir::ScalarType, tm: i64, bn: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::row_softmax_rows as k;
    crate::op::float_kernel!(dt, |E| match (tm, bn) {
        (4, 128) => Some(k::kernel::<E, 4, 128>()),
        (4, 256) => Some(k::kernel::<E, 4, 256>()),
        (4, 512) => Some(k::kernel::<E, 4, 512>()),
        (4, 1024) => Some(k::kernel::<E, 4, 1024>()),
        (2, 2048) => Some(k::kernel::<E, 2, 2048>()),
        (1, 4096) => Some(k::kernel::<E, 1, 4096>()),
        (1, 8192) => Some(k::kernel::<E, 1, 8192>()),
        _ => None,
    })
    .flatten()
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
    for x in [
        &[8192i64, 8192][..],
        &[4096, 4096],
        &[32768, 1024],
        &[1024, 32768],
        &[16, 131072],
        &[1000, 1023],
        &[4, 97, 129],
    ] {
        calls.push(c(OP, "bf16", &[x], false));
    }
    for x in [&[8192i64, 8192][..], &[1000, 1023]] {
        calls.push(c(OP, "f32", &[x], false));
        calls.push(c(OP, "f16", &[x], false));
    }
    calls
}
