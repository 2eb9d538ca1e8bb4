//! Finding and initialising the CUDA driver without panicking.
//!
//! cudarc loads libcuda lazily and panics when it is missing, so every runtime path first goes through
//! [`driver`]: it probes the same library names cudarc would load, runs `cuInit` and
//! `cuDriverGetVersion` behind `catch_unwind` (a last resort against a stub or broken libcuda lacking
//! symbols), and checks the driver's CUDA version. The outcome is computed once per process.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use cudarc::driver::{result, sys};

use super::error::{CudaVersion, Result, RuntimeError};

/// The oldest driver API version that runs Tile IR cubins (r580 = CUDA 13.0).
pub const MIN_DRIVER_VERSION: CudaVersion = CudaVersion {
    major: 13,
    minor: 0,
};

const NO_DRIVER_HINT: &str = "install the NVIDIA driver (r580 or later) or add the directory holding \
     libcuda.so.1 to LD_LIBRARY_PATH; kernels can still be compiled and cached without a GPU";

/// What is known about the loaded driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverInfo {
    /// The newest CUDA version the driver supports.
    pub version: CudaVersion,
}

/// The cached outcome of initialisation. `RuntimeError` is not `Clone`, so the failure is kept in a
/// small cloneable form and rebuilt on each call.
#[derive(Debug, Clone)]
enum InitFailure {
    NoDriver(Vec<String>),
    Init { code: u32, name: String },
    NoDevice,
    TooOld(CudaVersion),
    Panicked(&'static str),
}

impl From<InitFailure> for RuntimeError {
    fn from(f: InitFailure) -> RuntimeError {
        match f {
            InitFailure::NoDriver(searched) => RuntimeError::NoDriver {
                searched,
                hint: NO_DRIVER_HINT.to_string(),
            },
            InitFailure::Init { code, name } => RuntimeError::DriverInit {
                code,
                hint: if code == sys::CUresult::CUDA_ERROR_STUB_LIBRARY as u32 {
                    "the libcuda found is the CUDA toolkit's stub library; install the NVIDIA driver \
                     or remove the stubs directory from LD_LIBRARY_PATH"
                        .to_string()
                } else {
                    "check `nvidia-smi`; the driver or the GPU may be in a bad state".to_string()
                },
                name,
            },
            InitFailure::NoDevice => RuntimeError::NoDevice {
                hint: "check `nvidia-smi` and CUDA_VISIBLE_DEVICES".to_string(),
            },
            InitFailure::TooOld(found) => RuntimeError::DriverTooOld {
                found,
                required: MIN_DRIVER_VERSION,
            },
            InitFailure::Panicked(call) => RuntimeError::DriverInit {
                code: 0,
                name: format!("{call} is missing from libcuda"),
                hint:
                    "the libcuda found is incomplete or not an NVIDIA driver; install driver r580 \
                       or later"
                        .to_string(),
            },
        }
    }
}

/// The library names probed, in cudarc's order (it loads the first that opens), without repeats.
pub fn library_candidates() -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in ["cuda", "nvcuda"]
        .iter()
        .flat_map(|lib| cudarc::get_lib_name_candidates(lib))
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Loads and initialises the driver once; later calls return the cached outcome.
pub fn driver() -> Result<DriverInfo> {
    static STATE: OnceLock<std::result::Result<DriverInfo, InitFailure>> = OnceLock::new();
    STATE.get_or_init(init).clone().map_err(RuntimeError::from)
}

/// Whether a usable driver is present (convenience for tests and tools that skip GPU work).
pub fn is_available() -> bool {
    driver().is_ok()
}

fn init() -> std::result::Result<DriverInfo, InitFailure> {
    // SAFETY: only dlopens candidate names; opening a shared library runs its constructors, which is
    // what loading the driver means anyway.
    if !unsafe { sys::is_culib_present() } {
        return Err(InitFailure::NoDriver(library_candidates()));
    }
    let init = catch_unwind(result::init).map_err(|_| InitFailure::Panicked("cuInit"))?;
    if let Err(e) = init {
        return Err(match e.0 {
            sys::CUresult::CUDA_ERROR_NO_DEVICE => InitFailure::NoDevice,
            other => InitFailure::Init {
                code: other as u32,
                name: format!("{other:?}"),
            },
        });
    }
    let mut raw = 0i32;
    let status = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `raw` is a valid out-pointer for the duration of the call.
        unsafe { sys::cuDriverGetVersion(&mut raw) }
    }))
    .map_err(|_| InitFailure::Panicked("cuDriverGetVersion"))?;
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(InitFailure::Init {
            code: status as u32,
            name: format!("{status:?}"),
        });
    }
    let version = check_driver_version(raw).map_err(InitFailure::TooOld)?;
    Ok(DriverInfo { version })
}

/// Decodes `cuDriverGetVersion`'s integer and checks it against [`MIN_DRIVER_VERSION`]; on failure
/// returns the version found.
pub fn check_driver_version(raw: i32) -> std::result::Result<CudaVersion, CudaVersion> {
    let version = CudaVersion::from_driver_int(raw);
    if version >= MIN_DRIVER_VERSION {
        Ok(version)
    } else {
        Err(version)
    }
}
