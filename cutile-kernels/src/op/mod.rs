//! What every family's host API shares, so a family only writes its validation, its configuration
//! choice and its kernels:
//!
//! - [`OpError`]: the typed error of every op (bad rank, shape, dtype or layout; launch failures);
//! - [`Operand`] and [`Target`]: a tensor argument as the planner sees it (from a real tensor, or
//!   described for ahead-of-time planning), and the device the plan is for;
//! - [`PlannedLaunch`]: one kernel launch decided by a family's planner, and [`execute`], which queues
//!   a plan on the caller's stream and returns one [`Pending`](cutile::launch::Pending) guard;
//! - [`scratch`]: per-stream device scratch for intermediate results that are no user tensor (appended
//!   to a call's operands, described when planning without a device), and [`arrival`], the in-kernel
//!   side of its counter pool;
//! - [`tuning`]: the bridge from a family's candidate list to [`cutile::tune`];
//! - [`capture`]: recording the plans a call would queue instead of queuing them (for replay);
//! - [`registry`]: every op by name, with the calls it can plan from a [`CallSpec`], for AOT bundles
//!   and the GPU runner.
//!
//! The flow of one call: host API → `Operand::of` per tensor → family `plan(..)` (validate, choose the
//! configuration, emit launches) → [`execute`]. Planning never touches the device, so the same function
//! serves launches, AOT bundles and coverage tests.

pub mod arrival;
pub mod capture;
mod dispatch;
mod error;
mod launch;
mod operand;
pub mod registry;
pub mod scratch;
pub mod tuning;

pub(crate) use dispatch::{float_index_kernel, float_kernel, mma_kernel, pow2_float_kernel};

/// The index element types of positions, ids and slot mappings.
pub const INDICES: &[cutile_ir::ScalarType] =
    &[cutile_ir::ScalarType::I32, cutile_ir::ScalarType::I64];
pub use error::OpError;
pub use launch::{PlannedArg, PlannedLaunch, describe, describe_at, execute};
pub use operand::{Operand, Target, contiguous_strides};
pub use registry::{CallSpec, OpInfo, ops};

/// The element types the floating-point ops take.
pub const FLOATS: &[cutile_ir::ScalarType] = &[
    cutile_ir::ScalarType::F32,
    cutile_ir::ScalarType::F16,
    cutile_ir::ScalarType::BF16,
];

/// The power-of-two tile a row of `cols` elements needs as one tile (at least 128).
pub fn row_tile(cols: i64) -> i64 {
    (cols.max(128) as u64).next_power_of_two() as i64
}

/// `rows` blocks along x, or an error naming the op when the grid cannot hold them.
pub fn grid_rows(op: &'static str, rows: i64) -> Result<u32, OpError> {
    u32::try_from(rows)
        .ok()
        .filter(|&r| r <= i32::MAX as u32)
        .ok_or_else(|| OpError::Unsupported {
            op,
            what: format!("{rows} rows exceed the grid's 2^31 - 1 blocks"),
        })
}

/// `ceil(a / b)` for `a ≥ 0`, `b > 0`.
pub fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}
