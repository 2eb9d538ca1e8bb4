//! Why a launch, or an ahead-of-time compile through the launcher's path, failed: one enum whose
//! variants name the kernel, the parameter and both sides of a mismatch, and say how to fix it.

use cutile_ir::ScalarType;

use crate::dsl::{ParamKind, SpecializeError};
use crate::runtime::RuntimeError;
use crate::toolchain::ToolchainError;

/// How a parameter kind reads in messages.
pub(crate) fn kind_name(kind: ParamKind) -> &'static str {
    match kind {
        ParamKind::Input => "an input tensor (`&Tensor`, pass it with `.input(..)`)",
        ParamKind::Output => "an output tensor (`&mut Tensor`, pass it with `.output(..)`)",
        ParamKind::Scalar => "a scalar (pass it with `.scalar(..)`)",
    }
}

/// Everything launching a DSL kernel can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The kernel calls foreign tile functions but no tile library is configured.
    #[error(
        "kernel `{kernel}` calls the foreign tile function(s) {} but no tile library is configured; add the \
         library that implements them with `CompileOptions::tile_library(TileLibrarySpec::new(path))` or \
         `cutile::launch::add_default_tile_library`",
        functions.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
    )]
    NoTileLibrary {
        kernel: String,
        functions: Vec<String>,
    },

    /// A configured tile library (or one of its dependencies) cannot be read.
    #[error("tile library {}: {source}; check the path given to `TileLibrarySpec`", path.display())]
    TileLibrary {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The argument list is longer or shorter than the kernel's parameter list.
    #[error("kernel `{kernel}` takes {expected} arguments ({params}) but {got} were given")]
    ArgCount {
        kernel: String,
        expected: usize,
        got: usize,
        /// The declared parameters, e.g. `a: input, b: input, c: output`.
        params: String,
    },

    /// An argument was passed as another kind than the parameter is declared.
    #[error(
        "kernel `{kernel}`, argument {index} (`{param}`): the kernel declares {declared}, but {given} was passed"
    )]
    ArgKind {
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

    /// The grid cannot be derived from the outputs.
    #[error(
        "kernel `{kernel}`: cannot derive the launch grid: {reason}; pass one with `LaunchArgs::grid`"
    )]
    NoGrid { kernel: String, reason: String },

    /// Specialization (tracing the kernel's IR) failed for another reason than an argument mismatch.
    #[error(transparent)]
    Specialize(Box<SpecializeError>),

    /// The launcher's view of the entry signature disagrees with the traced IR: a bug in cutile.
    #[error("kernel `{kernel}`: {message} (a bug in cutile's launcher, please report it)")]
    Signature { kernel: String, message: String },

    /// The device is not an architecture tileiras compiles for.
    #[error(
        "device {device} has compute capability {major}.{minor}, which tileiras does not target \
         (supported: sm_80, sm_86 … sm_121)"
    )]
    UnsupportedDevice {
        device: String,
        major: u32,
        minor: u32,
    },

    /// No CUDA driver (or no device) on this machine.
    #[error("{0}")]
    NoDriver(RuntimeError),

    /// A cubin or cache key for one architecture met a device of another.
    #[error("{0}")]
    ArchMismatch(RuntimeError),

    /// The kernel is in no registered bundle, not in the disk cache, and tileiras is not here to compile it.
    #[error(
        "kernel not available: {key} is in none of the {bundles} registered AOT bundle(s) nor in the disk cache, \
         and it cannot be compiled here ({tileiras}). Fix: on a machine with tileiras run \
         `cargo xtask aot --arch {arch} -o kernels.bundle` (or `cargo xtask gpu prepare` for the GPU harness) and \
         set CUTILE_BUNDLE=kernels.bundle (or call cutile::bundle::register); or install tileiras with \
         `cargo xtask toolchain`"
    )]
    NotAvailable {
        /// The missing cache key, as displayed (kernel, specialization, arch, versions, id).
        key: String,
        arch: String,
        bundles: usize,
        /// Why tileiras could not be used.
        tileiras: String,
    },

    /// The compile options are out of range (e.g. an optimisation level above 3).
    #[error("invalid compile options: {0}")]
    InvalidOptions(ToolchainError),

    /// tileiras ran and failed.
    #[error("compiling {key} failed: {source}")]
    Compile {
        key: String,
        #[source]
        source: Box<SpecializeError>,
    },

    /// Anything else the runtime reports (driver calls, module loading, the cache).
    #[error(transparent)]
    Runtime(RuntimeError),
}

impl LaunchError {
    /// Whether this failure only means the machine has no CUDA driver or device (callers that can run
    /// without a GPU report themselves as skipped on it).
    pub fn is_no_driver(&self) -> bool {
        matches!(self, LaunchError::NoDriver(_))
    }
}

impl From<RuntimeError> for LaunchError {
    fn from(e: RuntimeError) -> LaunchError {
        match e {
            RuntimeError::NoDriver { .. }
            | RuntimeError::NoDevice { .. }
            | RuntimeError::DriverInit { .. }
            | RuntimeError::DriverTooOld { .. } => LaunchError::NoDriver(e),
            RuntimeError::KeyArchMismatch { .. } | RuntimeError::CubinArchMismatch { .. } => {
                LaunchError::ArchMismatch(e)
            }
            e => LaunchError::Runtime(e),
        }
    }
}

impl From<SpecializeError> for LaunchError {
    /// Argument mismatches found while tracing become the launcher's own variants.
    fn from(e: SpecializeError) -> LaunchError {
        match e {
            SpecializeError::DType {
                kernel,
                param,
                declared,
                actual,
            } => LaunchError::DType {
                kernel,
                param,
                declared,
                actual,
            },
            SpecializeError::Rank {
                kernel,
                param,
                declared,
                actual,
                shape,
            } => LaunchError::Rank {
                kernel,
                param,
                declared,
                actual,
                shape,
            },
            SpecializeError::StaticShape {
                kernel,
                param,
                message,
            } => LaunchError::StaticShape {
                kernel,
                param,
                message,
            },
            e => LaunchError::Specialize(Box::new(e)),
        }
    }
}
