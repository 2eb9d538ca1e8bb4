//! Element-wise vector ops: `c = a + b` ([`add`]) and `y = alpha · x + y` ([`axpy`]), over tensors of
//! any rank with the same shape, f32, f16 and bf16.
//!
//! - `dsl`: the kernels (one 1024-element tile per block);
//! - [`reference`]: the CPU references;
//! - [`plan_add`] / [`plan_axpy`]: the launches of a call, without a device.

mod dsl;
pub mod reference;

pub use dsl::kernels;
pub use reference::{saxpy_reference, vadd_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;

use crate::op::{
    FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, execute, float_kernel,
};

/// Op names.
pub const ADD: &str = "add";
pub const AXPY: &str = "axpy";
/// Elements per block.
pub const TILE: i64 = 1024;

/// `c = a + b`, queued on `stream`; all three have one shape and element type, and are contiguous.
pub fn add<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("c", &*c),
    ];
    let plan = plan_add(&operands, &Target::of(stream.device())?)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively).
    unsafe { execute(stream, &operands, &plan) }
}

/// `y = alpha · x + y` (in f32), queued on `stream`; `x` and `y` have one shape and element type, and
/// are contiguous.
pub fn axpy<'a>(
    stream: &'a Stream,
    alpha: f32,
    x: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [Operand::of("x", x), Operand::of("y", &*y)];
    let plan = plan_axpy(&operands, &Target::of(stream.device())?, alpha)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`y` exclusively).
    unsafe { execute(stream, &operands, &plan) }
}

/// Checks that `operands` share the first one's dtype and shape, are on the target and contiguous;
/// returns the element count.
fn flat(op: &'static str, operands: &[Operand], target: &Target) -> Result<i64, OpError> {
    let first = &operands[0];
    first.expect_dtype(op, FLOATS)?;
    for o in operands {
        o.expect_same_dtype(op, first)?;
        o.expect_same_shape(op, first)?;
        target.expect_device(op, o)?;
        if o.strides != crate::op::contiguous_strides(&o.shape) && o.numel() > 1 {
            return Err(OpError::Layout {
                op,
                arg: o.name,
                shape: o.shape.clone(),
                strides: o.strides.clone(),
                constraint: "element-wise ops take contiguous tensors; pass a contiguous copy"
                    .into(),
            });
        }
    }
    Ok(first.numel())
}

fn flat_arg(index: usize, n: i64, output: bool) -> PlannedArg {
    PlannedArg::Tensor {
        operand: index,
        output,
        shape: vec![n],
        strides: vec![1],
        offset: 0,
    }
}

/// The launches of `add` (`operands` = `[a, b, c]`).
pub fn plan_add(operands: &[Operand], target: &Target) -> Result<Vec<PlannedLaunch>, OpError> {
    if operands.len() != 3 {
        return Err(OpError::Unsupported {
            op: ADD,
            what: format!("takes 3 tensors (a, b, c), got {}", operands.len()),
        });
    }
    let n = flat(ADD, operands, target)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let dt = operands[0].dtype;
    let kernel = float_kernel!(dt, |E| kernels::vadd::kernel::<E, 1024>()).ok_or_else(|| {
        OpError::Unsupported {
            op: ADD,
            what: format!("no {dt} kernel"),
        }
    })?;
    Ok(vec![PlannedLaunch {
        kernel,
        args: (0..3).map(|i| flat_arg(i, n, i == 2)).collect(),
        grid: None,
        config: format!("vadd B={TILE}"),
    }])
}

/// The launches of `axpy` (`operands` = `[x, y]`).
pub fn plan_axpy(
    operands: &[Operand],
    target: &Target,
    alpha: f32,
) -> Result<Vec<PlannedLaunch>, OpError> {
    if operands.len() != 2 {
        return Err(OpError::Unsupported {
            op: AXPY,
            what: format!("takes 2 tensors (x, y), got {}", operands.len()),
        });
    }
    let n = flat(AXPY, operands, target)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let dt = operands[0].dtype;
    let kernel = float_kernel!(dt, |E| kernels::saxpy::kernel::<E, 1024>()).ok_or_else(|| {
        OpError::Unsupported {
            op: AXPY,
            what: format!("no {dt} kernel"),
        }
    })?;
    Ok(vec![PlannedLaunch {
        kernel,
        args: vec![
            PlannedArg::F32(alpha),
            flat_arg(0, n, false),
            flat_arg(1, n, true),
        ],
        grid: None,
        config: format!("saxpy B={TILE}"),
    }])
}

/// The calls the catalog compiles (`cargo xtask kernels`), the GPU runner checks and benchmarks, and the
/// examples run: the benchmark shapes and ragged ones, per element type.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    let mut calls = Vec::new();
    for n in [1i64 << 20, 1_000_003] {
        calls.push(c(ADD, "f32", &[&[n]], false));
        calls.push(c(ADD, "bf16", &[&[n]], false));
        calls.push(c(AXPY, "f32", &[&[n]], false));
    }
    calls
}
