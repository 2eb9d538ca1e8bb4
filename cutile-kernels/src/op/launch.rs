//! Planned launches and their execution.
//!
//! A family's planner turns an op call into [`PlannedLaunch`]es: which kernel (with its generic values
//! fixed), which operand (or view of one) each tensor parameter gets, the scalars, and the grid.
//! [`describe`] turns one into the launcher's [`LaunchArgs`] over the operands' addresses, which both
//! [`execute`] (real tensors) and ahead-of-time planning (described operands) use, so a bundle built
//! from a plan holds exactly the keys the launch looks up. Inside [`super::capture`], [`execute`]
//! records the plan instead of queuing it.

use cutile::dsl::Kernel;
use cutile::launch::{LaunchArgs, Launcher, Pending};
use cutile::runtime::{Grid, Stream};

use super::{OpError, Operand};

/// One parameter of a planned launch, in the kernel's parameter order.
#[derive(Debug, Clone, PartialEq)]
pub enum PlannedArg {
    /// Operand `operand` of the call, viewed with `shape` and `strides` starting `offset` elements in.
    Tensor {
        operand: usize,
        output: bool,
        shape: Vec<i64>,
        strides: Vec<i64>,
        offset: i64,
    },
    F32(f32),
    I32(i32),
}

impl PlannedArg {
    /// The whole operand `o` (index `operand`) as it is.
    pub fn whole(operand: usize, o: &Operand, output: bool) -> PlannedArg {
        PlannedArg::view(operand, o, output)
    }

    /// Operand `operand` with the shape and strides of `view` (e.g. its `rows x cols` form).
    pub fn view(operand: usize, view: &Operand, output: bool) -> PlannedArg {
        PlannedArg::Tensor {
            operand,
            output,
            shape: view.shape.clone(),
            strides: view.strides.clone(),
            offset: 0,
        }
    }
}

/// One kernel launch of a plan.
#[derive(Debug, Clone)]
pub struct PlannedLaunch {
    pub kernel: Kernel,
    pub args: Vec<PlannedArg>,
    /// `None`: the tiles of the first output (the launcher's rule).
    pub grid: Option<Grid>,
    /// The configuration in words, e.g. `softmax_gather BN=8192` (the tuner's candidate name).
    pub config: String,
}

/// The launcher's arguments for `launch` over `operands` (real or described).
///
/// # Safety
/// When the result is launched, every operand's address must be live device memory covering the
/// views the plan gives it, borrowed (exclusively for outputs) until the launch has finished.
pub unsafe fn describe<'b>(launch: &'b PlannedLaunch, operands: &[Operand]) -> LaunchArgs<'b> {
    // SAFETY: forwarded to the caller.
    unsafe { describe_at(launch, operands, |_, o| o.ptr) }
}

/// [`describe`] with operand `i` at `address(i, &operands[i])` instead of its own address (a replay of
/// the plan over other memory of the same layouts).
///
/// # Safety
/// As [`describe`], for the addresses `address` gives.
pub unsafe fn describe_at<'b>(
    launch: &'b PlannedLaunch,
    operands: &[Operand],
    address: impl Fn(usize, &Operand) -> u64,
) -> LaunchArgs<'b> {
    let mut a = LaunchArgs::new();
    for arg in &launch.args {
        a = match arg {
            PlannedArg::Tensor {
                operand,
                output,
                shape,
                strides,
                offset,
            } => {
                let o = &operands[*operand];
                let ptr = address(*operand, o)
                    .wrapping_add((*offset as u64).wrapping_mul(o.elem_bytes()));
                // SAFETY: forwarded to the caller (see above).
                unsafe { a.raw_tensor(*output, o.dtype, shape, strides, ptr, o.device) }
            }
            PlannedArg::F32(v) => a.scalar(*v),
            PlannedArg::I32(v) => a.scalar(*v),
        };
    }
    match launch.grid {
        Some(g) => a.grid(g),
        None => a,
    }
}

/// Queues `plan` on `stream` over `operands` and returns one guard for all of it.
///
/// # Safety
/// The operands must come from tensors borrowed for `'a` (outputs exclusively) that cover the views the
/// plan gives them: the host-API functions guarantee it by taking the tensors with lifetime `'a`.
pub unsafe fn execute<'a>(
    stream: &'a Stream,
    operands: &[Operand],
    plan: &[PlannedLaunch],
) -> Result<Pending<'a>, OpError> {
    if super::capture::record(operands, plan) {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    }
    for launch in plan {
        // SAFETY: the operands are live, borrowed for 'a (the caller's contract).
        let args = unsafe { describe(launch, operands) };
        let launcher = Launcher::new(launch.kernel.clone());
        // SAFETY: as above; the guard returned below holds 'a until the stream has finished.
        unsafe { launcher.enqueue(stream, &args) }?;
    }
    // SAFETY: every launch above borrowed only the operands, which live for 'a.
    Ok(unsafe { Pending::for_enqueued(stream) })
}
