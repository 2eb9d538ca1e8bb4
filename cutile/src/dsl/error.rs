//! Errors of specialization, and the argument errors it shares with the launcher.
//!
//! [`ArgError`] is the one type for "this argument does not fit the kernel's declaration". It lives here,
//! in the lowest layer that raises it (specialization checks the arrays against the declarations); the
//! launcher (`cutile::launch`) raises the same enum for the checks only it can make (argument count and
//! kind, grid-independent layout checks, device), and both [`SpecializeError`] and `LaunchError` wrap it
//! transparently, so one mistake reads the same on the warm and the cold path.

use cutile_ir::ScalarType;

use crate::toolchain::ToolchainError;
use crate::trace::TraceError;

/// An argument that does not fit the kernel's declared parameters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgError {
    /// The argument list is longer or shorter than the kernel's parameter list.
    #[error("kernel `{kernel}` takes {expected} arguments ({params}) but {got} were given")]
    Count {
        kernel: String,
        expected: usize,
        got: usize,
        /// The declared parameters, e.g. `a: input, b: input, c: output`.
        params: String,
    },

    /// The number of tensor descriptions given to specialization differs from the kernel's tensor
    /// parameters (the specialization API takes tensors only).
    #[error(
        "kernel `{kernel}` takes {expected} tensor arguments but {got} tensor descriptions were given"
    )]
    TensorCount {
        kernel: String,
        expected: usize,
        got: usize,
    },

    /// An argument was passed as another kind than the parameter is declared.
    #[error(
        "kernel `{kernel}`, argument {index} (`{param}`): the kernel declares {declared}, but {given} was passed"
    )]
    Kind {
        kernel: String,
        index: usize,
        param: String,
        declared: &'static str,
        given: &'static str,
    },

    /// Element type of a tensor or scalar argument differs from the declaration.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: declared element type {declared} but the argument holds {actual}; \
         pass {declared} data or instantiate the kernel with {actual}"
    )]
    DType {
        kernel: String,
        param: String,
        declared: ScalarType,
        actual: ScalarType,
    },

    /// Rank of a tensor argument differs from the declaration.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: declared rank {declared} but the tensor has rank {actual} (shape {shape:?})"
    )]
    Rank {
        kernel: String,
        param: String,
        declared: usize,
        actual: usize,
        shape: Vec<i64>,
    },

    /// A tensor description whose strides do not match its shape.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: shape has {shape} dimensions but strides have {strides}"
    )]
    Strides {
        kernel: String,
        param: String,
        shape: usize,
        strides: usize,
    },

    /// A tensor's extent contradicts a static extent of the declared shape.
    #[error("kernel `{kernel}`, parameter `{param}`: {message}")]
    StaticShape {
        kernel: String,
        param: String,
        message: String,
    },

    /// A tensor has more dimensions than the launcher handles.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: rank {rank} is above the launcher's limit of {max}"
    )]
    RankTooLarge {
        kernel: String,
        param: String,
        rank: usize,
        max: usize,
    },

    /// An output whose elements overlap cannot be split into disjoint tiles.
    #[error(
        "kernel `{kernel}`, output `{param}`: shape {shape:?} with strides {strides:?} maps several indices to \
         one element, so blocks writing their own tiles would race; pass a non-overlapping (e.g. contiguous) output"
    )]
    OverlappingOutput {
        kernel: String,
        param: String,
        shape: Vec<i64>,
        strides: Vec<i64>,
    },

    /// An extent or stride does not fit the index type the kernel was specialized with.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: {value} does not fit the kernel's {index_type} index type"
    )]
    IndexOverflow {
        kernel: String,
        param: String,
        value: i64,
        index_type: ScalarType,
    },

    /// A tensor lives on another device than the stream.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: the tensor lives on device {found} but the stream is on device {expected}"
    )]
    DeviceMismatch {
        kernel: String,
        param: String,
        expected: usize,
        found: usize,
    },
}

/// Why a kernel could not be specialized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecializeError {
    /// An array does not fit its parameter's declaration.
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error("kernel `{kernel}`: {message}")]
    Setup { kernel: String, message: String },
    #[error("{0}")]
    Trace(TraceError),
    #[error(
        "kernel `{kernel}`: the traced IR is invalid (a bug in the DSL, please report): {message}"
    )]
    Verify { kernel: String, message: String },
    #[error("kernel `{kernel}`: bytecode encoding failed: {source}")]
    Bytecode {
        kernel: String,
        #[source]
        source: cutile_ir::bytecode::WriteError,
    },
    #[error("kernel `{kernel}`: {source}")]
    Toolchain {
        kernel: String,
        #[source]
        source: ToolchainError,
    },
}

impl SpecializeError {
    /// The argument error, if this is one.
    pub fn arg(&self) -> Option<&ArgError> {
        match self {
            SpecializeError::Arg(a) => Some(a),
            _ => None,
        }
    }
}
