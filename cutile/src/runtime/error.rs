//! The runtime's error type: one enum, each variant naming the cause and, where there is one, the fix.

use std::fmt;

use super::cubin::{CubinError, ParamSlot};
use super::layout::LayoutError;

/// A CUDA version as the driver reports it (`cuDriverGetVersion`: 1000 * major + 10 * minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    pub major: u32,
    pub minor: u32,
}

impl CudaVersion {
    /// Decodes the driver's integer encoding (e.g. 13000 → 13.0, 12080 → 12.8).
    pub fn from_driver_int(v: i32) -> CudaVersion {
        let v = v.max(0) as u32;
        CudaVersion {
            major: v / 1000,
            minor: (v % 1000) / 10,
        }
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Everything the runtime can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// libcuda could not be loaded: there is no NVIDIA driver on this machine (or it is not on the
    /// loader path).
    #[error("no CUDA driver: could not load libcuda (searched {searched:?}); {hint}")]
    NoDriver { searched: Vec<String>, hint: String },

    /// libcuda loaded but `cuInit` failed for a reason other than "no device".
    #[error("the CUDA driver failed to initialise: {name} (code {code}); {hint}")]
    DriverInit {
        code: u32,
        name: String,
        hint: String,
    },

    /// The driver works but sees no CUDA device.
    #[error("no CUDA device is visible; {hint}")]
    NoDevice { hint: String },

    /// The driver is older than Tile IR cubins need.
    #[error(
        "the CUDA driver supports CUDA {found}, but Tile IR kernels need CUDA {required} or newer; \
         install NVIDIA driver r580 or later"
    )]
    DriverTooOld {
        found: CudaVersion,
        required: CudaVersion,
    },

    #[error("device ordinal {ordinal} is out of range: {count} CUDA device(s) are visible")]
    DeviceOutOfRange { ordinal: usize, count: usize },

    /// A driver call failed.
    #[error("CUDA call {call} failed: {name} (code {code}): {message}")]
    Driver {
        call: &'static str,
        code: u32,
        name: String,
        message: String,
    },

    #[error(transparent)]
    Layout(#[from] LayoutError),

    /// `CUTILE_L2_FLUSH` names no flush mode.
    #[error(
        "CUTILE_L2_FLUSH={value} is not a flush mode: set it to `read` (the default) or `write`"
    )]
    BadFlushMode { value: String },

    /// A timing came back as 0 µs, so no rate can be derived from it.
    #[error(
        "{what} timed 0 µs: the CUDA events did not bracket the work; time more bytes or check that \
         the work runs on the timed stream"
    )]
    ZeroTiming { what: &'static str },

    /// Two shapes that must agree do not.
    #[error("{op}: shape {left:?} does not match shape {right:?}")]
    ShapeMismatch {
        op: &'static str,
        left: Vec<i64>,
        right: Vec<i64>,
    },

    /// An operation needs a contiguous (row-major, dense) tensor.
    #[error(
        "{op} needs a contiguous tensor, got shape {shape:?} with strides {strides:?}; \
         copy it into a new tensor first"
    )]
    NotContiguous {
        op: &'static str,
        shape: Vec<i64>,
        strides: Vec<i64>,
    },

    /// Objects from different devices were mixed in one operation.
    #[error("{op}: device {expected} was expected but an operand lives on device {found}")]
    DeviceMismatch {
        op: &'static str,
        expected: usize,
        found: usize,
    },

    #[error(transparent)]
    Cubin(#[from] CubinError),

    /// The cubin targets another GPU than the device it is loaded on.
    #[error(
        "the cubin was compiled for {cubin_arch} and cannot run on {device} ({device_arch}); \
         compile the kernel for {device_arch}"
    )]
    CubinArchMismatch {
        cubin_arch: String,
        device_arch: String,
        device: String,
    },

    #[error("kernel `{name}` is not in the module; it has: {available:?}")]
    KernelNotFound {
        name: String,
        available: Vec<String>,
    },

    /// The packed arguments do not have the layout the compiled kernel expects.
    #[error(
        "kernel `{kernel}` takes parameters at {expected:?} (offset, size), but the arguments pack as \
         {found:?}; the launcher and the kernel signature disagree"
    )]
    ParamMismatch {
        kernel: String,
        expected: Vec<ParamSlot>,
        found: Vec<ParamSlot>,
    },

    #[error("invalid launch grid {grid:?}: {reason}")]
    InvalidGrid {
        grid: (u32, u32, u32),
        reason: &'static str,
    },

    /// A host buffer or byte range does not fit the device buffer it is copied to or from.
    #[error("{op}: {len} bytes at offset {offset} do not fit a buffer of {capacity} bytes")]
    OutOfBounds {
        op: &'static str,
        offset: usize,
        len: usize,
        capacity: usize,
    },
}

/// Shorthand used throughout the runtime.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// Wraps a failed driver call, naming the call; used as `.map_err(driver_err("cuMemAlloc"))`.
pub(crate) fn driver_err(
    call: &'static str,
) -> impl FnOnce(cudarc::driver::DriverError) -> RuntimeError {
    move |e| {
        let name = e
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0));
        let message = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        RuntimeError::Driver {
            call,
            code: e.0 as u32,
            name,
            message,
        }
    }
}
