//! The error every host-API op returns: what was wrong with the call, naming both values and the
//! constraint, or why the launch failed. A bad call never launches.

use cutile_ir::ScalarType;

/// Why an op refused a call or failed to launch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// A tensor has the wrong number of dimensions.
    #[error("{op}: `{arg}` must have {expected} dimensions, but it has shape {shape:?}")]
    Rank {
        op: &'static str,
        arg: &'static str,
        expected: String,
        shape: Vec<i64>,
    },
    /// Two extents that must agree do not.
    #[error("{op}: {what}: {left} != {right}")]
    Shape {
        op: &'static str,
        /// Which extents, e.g. "`y` must have `x`'s shape" or "`w` length vs `x` row length".
        what: String,
        left: String,
        right: String,
    },
    /// An element type the op has no kernel for, or two tensors whose types must match.
    #[error("{op}: `{arg}` has element type {dtype}; {constraint}")]
    DType {
        op: &'static str,
        arg: &'static str,
        dtype: ScalarType,
        constraint: String,
    },
    /// A layout the kernels cannot address (e.g. a non-unit innermost stride).
    #[error("{op}: `{arg}` with shape {shape:?} and strides {strides:?}: {constraint}")]
    Layout {
        op: &'static str,
        arg: &'static str,
        shape: Vec<i64>,
        strides: Vec<i64>,
        constraint: String,
    },
    /// Tensors on different devices, or not on the stream's device.
    #[error(
        "{op}: `{arg}` is on device {got} but the stream runs on device {expected}; move it first"
    )]
    Device {
        op: &'static str,
        arg: &'static str,
        expected: usize,
        got: usize,
    },
    /// A value outside what the op supports (e.g. a row longer than the largest kernel).
    #[error("{op}: {what}")]
    Unsupported { op: &'static str, what: String },
    /// The op name is not in the registry.
    #[error("no op named `{name}`; known ops: {known}")]
    UnknownOp { name: String, known: String },
    /// The device is not one tileiras can target.
    #[error(
        "device {device} (compute capability {major}.{minor}) is not a target tileiras supports"
    )]
    UnsupportedDevice {
        device: String,
        major: u32,
        minor: u32,
    },
    /// The launch itself failed (compile, load, driver).
    #[error(transparent)]
    Launch(#[from] cutile::launch::LaunchError),
    /// A runtime call (allocation, copy, event) failed.
    #[error(transparent)]
    Runtime(#[from] cutile::runtime::RuntimeError),
    /// Tuning failed (only with `CUTILE_TUNE=on|force`).
    #[error(transparent)]
    Tune(#[from] cutile::tune::TuneError),
}
