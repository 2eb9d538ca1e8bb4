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
//!
//! Operands: `[x, y]`, and for the split-row form (few wide rows) a third, `stats`: f32 scratch of
//! [`scratch_len`] elements that is no user tensor. [`softmax`] takes it from the stream's scratch
//! buffer ([`crate::op::scratch`]); planning without a device appends a described one
//! ([`with_scratch`]).

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
    let mut operands = vec![Operand::of("x", x), Operand::of("y", &*y)];
    let target = Target::of(stream.device())?;
    let Some(mut call) = Call::new(&operands, &target)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let candidates = config::candidates(&target, call.dtype(), call.rows(), call.cols());
    let class = config::class(call.dtype(), call.rows(), call.cols());
    // Scratch for every candidate (a tuning trial may run any of them on these operands).
    let need = scratch_need(&candidates, call.rows(), call.cols());
    if need > 0 {
        let stats = crate::op::scratch::scratch(stream, "stats", cutile_ir::ScalarType::F32, need)?;
        call.stats = Some(stats.clone());
        operands.push(stats);
    }
    // SAFETY: the operands are `x` and `y`, borrowed for 'a (`y` exclusively), and the stream's scratch
    // buffer, which lives until process exit and is used only by work queued on `stream`, in stream
    // order; plans address only the rows views of `x`, `y` and `need` elements of the scratch.
    unsafe {
        tuning::run_tuned(stream, &operands, 1, OP, class, &candidates, true, |c| {
            launches(c, &call, &target)
        })
    }
}

/// A validated call: the `rows x cols` views of `x` and `y`, and the scratch operand when given.
#[derive(Debug, Clone)]
struct Call {
    x: Operand,
    y: Operand,
    stats: Option<Operand>,
}

impl Call {
    /// Checks `[x, y]` or `[x, y, stats]`; `None` for an empty tensor.
    fn new(operands: &[Operand], target: &Target) -> Result<Option<Call>, OpError> {
        let (x, y, stats) = match operands {
            [x, y] => (x, y, None),
            [x, y, s] => (x, y, Some(s)),
            _ => {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!(
                        "takes 2 operands (x, y) and an optional f32 scratch (stats), got {}",
                        operands.len()
                    ),
                });
            }
        };
        if let Some(s) = stats {
            s.expect_dtype(OP, &[cutile_ir::ScalarType::F32])?;
            s.expect_rank(OP, 1)?;
            target.expect_device(OP, s)?;
        }
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
            stats: stats.cloned(),
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

/// The f32 scratch elements configuration `cfg` needs for `rows` rows (0 unless split-row): its
/// `stats` view `[rows, sp, 2]`, `sp` = the split count rounded up to 16 (so the view's strides, and
/// the cubin, do not depend on the split count).
pub fn scratch_len(cfg: &SoftmaxConfig, rows: i64, cols: i64) -> i64 {
    match cfg.variant {
        Variant::Split => rows * stats_splits(cfg, cols) * 2,
        _ => 0,
    }
}

/// Splits of the split-row form, padded to a multiple of 16 (the `stats` view's middle extent).
fn stats_splits(cfg: &SoftmaxConfig, cols: i64) -> i64 {
    crate::op::ceil_div(split_grid(cfg, cols).1, 16) * 16
}

/// `(per, splits)` of a split-row configuration: chunks per split and the blocks per row, so that no
/// split is empty.
fn split_grid(cfg: &SoftmaxConfig, cols: i64) -> (i64, i64) {
    let per = config::chunks_per_split(cols, cfg.bn, cfg.splits);
    let chunks = crate::op::ceil_div(cols.max(1), cfg.bn);
    (per, crate::op::ceil_div(chunks, per))
}

/// The scratch elements the largest of `configs` needs.
fn scratch_need(configs: &[SoftmaxConfig], rows: i64, cols: i64) -> i64 {
    configs
        .iter()
        .map(|c| scratch_len(c, rows, cols))
        .max()
        .unwrap_or(0)
}

/// `operands` (`[x, y]`) with a described f32 scratch operand `stats` (index 2) appended when the
/// call's configurations (the default, or every candidate with `all_candidates`) need one: what
/// planning without a device (AOT bundles, the registry, coverage tests) passes to [`plan`] and to
/// [`describe`](crate::op::describe). Operands that already hold a scratch are returned as they are.
pub fn with_scratch(
    operands: &[Operand],
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<Operand>, OpError> {
    let mut out = operands.to_vec();
    if operands.len() != 2 {
        return Ok(out);
    }
    let Some(c) = Call::new(operands, target)? else {
        return Ok(out);
    };
    let need = scratch_need(&configs(&c, target, all_candidates), c.rows(), c.cols());
    if need > 0 {
        out.push(Operand::described(
            "stats",
            2,
            cutile_ir::ScalarType::F32,
            &[need],
        ));
    }
    Ok(out)
}

fn configs(c: &Call, target: &Target, all_candidates: bool) -> Vec<SoftmaxConfig> {
    if all_candidates {
        config::candidates(target, c.dtype(), c.rows(), c.cols())
    } else {
        vec![config::choose(target, c.dtype(), c.rows(), c.cols())]
    }
}

/// The launches of a call (`operands` = `[x, y]`, or `[x, y, stats]` when the configuration is
/// split-row: see [`with_scratch`]): the default configuration (what [`softmax`] runs with tuning
/// off), or every candidate's when `all_candidates` (bundles that serve tuning runs).
pub fn plan(
    operands: &[Operand],
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(c) = Call::new(operands, target)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for cfg in &configs(&c, target, all_candidates) {
        out.extend(launches(cfg, &c, target)?);
    }
    Ok(out)
}

/// The launches of one configuration `cfg` for a call (`operands` as for [`plan`]): what a tuning
/// trial or a test that pins a configuration runs.
pub fn plan_config(
    cfg: &SoftmaxConfig,
    operands: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    match Call::new(operands, target)? {
        Some(c) => launches(cfg, &c, target),
        None => Ok(Vec::new()),
    }
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
        Split => return split_launches(cfg, call),
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

/// The two launches of the split-row form: pass 1 writes the partial statistics into operand 2
/// (`stats`, viewed `[rows, sp, 2]`), pass 2 reads them; both on grid `(rows, splits, 1)`.
fn split_launches(cfg: &SoftmaxConfig, call: &Call) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels as k;
    let dt = call.dtype();
    let (rows, cols) = (call.rows(), call.cols());
    let name = tuning::Candidate::name(cfg);
    let (per, splits) = split_grid(cfg, cols);
    if splits > config::MAX_SPLITS {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!(
                "`{name}` splits a row into {splits} blocks; the combine pass takes at most {}",
                config::MAX_SPLITS
            ),
        });
    }
    let need = scratch_len(cfg, rows, cols);
    let have = call.stats.as_ref().map_or(0, |s| s.numel());
    if have < need {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!(
                "`{name}` needs an f32 scratch operand `stats` (operand 2) of at least {need} elements, \
                 got {}; `softmax::with_scratch` appends a described one for planning",
                call.stats
                    .as_ref()
                    .map_or("none".to_string(), |s| format!("{:?}", s.shape))
            ),
        });
    }
    let missing = || OpError::Unsupported {
        op: OP,
        what: format!("no {dt} kernel for configuration `{name}`"),
    };
    let stats_kernel =
        pow2_float_kernel!(dt, cfg.bn, k::softmax_split_stats).ok_or_else(missing)?;
    let apply_kernel =
        pow2_float_kernel!(dt, cfg.bn, k::softmax_split_apply).ok_or_else(missing)?;
    let sp = stats_splits(cfg, cols);
    let stats = |output: bool| PlannedArg::Tensor {
        operand: 2,
        output,
        shape: vec![rows, sp, 2],
        strides: vec![2 * sp, 2, 1],
        offset: 0,
    };
    let per = i32::try_from(per).map_err(|_| OpError::Unsupported {
        op: OP,
        what: format!("{per} chunks per split exceed i32"),
    })?;
    let grid = Some((grid_rows(OP, rows)?, splits as u32, 1));
    Ok(vec![
        PlannedLaunch {
            kernel: stats_kernel,
            args: vec![
                PlannedArg::view(0, &call.x, false),
                PlannedArg::I32(per),
                stats(true),
            ],
            grid,
            config: name.clone(),
        },
        PlannedLaunch {
            kernel: apply_kernel,
            args: vec![
                PlannedArg::view(0, &call.x, false),
                stats(false),
                PlannedArg::I32(per),
                PlannedArg::view(1, &call.y, true),
            ],
            grid,
            config: name,
        },
    ])
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
    let c = crate::op::CallSpec::new;
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
