//! Why a launch, or an ahead-of-time compile through the launcher's path, failed: one enum whose
//! variants name the kernel, the parameter and both sides of a mismatch, and say how to fix it.

use crate::cache::CacheError;
use crate::dsl::{ArgError, ParamKind, SpecializeError};
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

    /// An argument does not fit the kernel's declaration: the same [`ArgError`] the specialization API
    /// ([`Kernel::specialize`](crate::dsl::Kernel::specialize)) gives for the same mistake.
    #[error(transparent)]
    Arg(#[from] ArgError),

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

    /// A cubin for one architecture met a device of another.
    #[error("{0}")]
    ArchMismatch(RuntimeError),

    /// A cache key names another architecture than the device the kernel is loaded for.
    #[error("kernel cache key {key} targets {key_arch}, but the device is {device_arch}")]
    KeyArchMismatch {
        key: String,
        key_arch: String,
        device_arch: String,
    },

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

    /// The kernel cache failed (a broken bundle named in `CUTILE_BUNDLE`, a compile that failed or
    /// panicked, a bad cache setting).
    #[error(transparent)]
    Cache(CacheError),

    /// Anything else the runtime reports (driver calls, module loading).
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
            RuntimeError::CubinArchMismatch { .. } => LaunchError::ArchMismatch(e),
            e => LaunchError::Runtime(e),
        }
    }
}

impl From<SpecializeError> for LaunchError {
    /// Argument mismatches found while tracing stay the same [`ArgError`].
    fn from(e: SpecializeError) -> LaunchError {
        match e {
            SpecializeError::Arg(a) => LaunchError::Arg(a),
            e => LaunchError::Specialize(Box::new(e)),
        }
    }
}

impl LaunchError {
    /// The argument error, if this is one.
    pub fn arg(&self) -> Option<&ArgError> {
        match self {
            LaunchError::Arg(a) => Some(a),
            _ => None,
        }
    }
}
