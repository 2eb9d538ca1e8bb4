//! Loaded cubins and their kernels, and kernel launches.
//!
//! Tile IR kernels fix their own CTA size, so a launch takes only the tile grid: the block is always
//! (1, 1, 1) and dynamic shared memory 0, as the Tile IR launch contract requires.

use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::args::KernelArgs;
use super::cubin::ParamSlot;
use super::cubin::{self, CubinEntry, CubinInfo};
use super::device::Device;
use super::error::{Result, RuntimeError, driver_err};
use super::stream::Stream;

struct ModuleInner {
    device: Device,
    raw: sys::CUmodule,
    info: CubinInfo,
}

// SAFETY: module handles may be used from any thread with their context bound; immutable afterwards.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the module is owned and unloaded once; no `CuFunction` outlives it (they hold an Arc).
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

/// A cubin loaded on a device. Clone is cheap; the module is unloaded when the last clone and the last
/// [`CuFunction`] from it are gone.
#[derive(Clone)]
pub struct CuModule {
    inner: Arc<ModuleInner>,
}

impl fmt::Debug for CuModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuModule")
            .field("device", &self.inner.device.ordinal())
            .field("arch", &self.inner.info.arch())
            .field("kernels", &self.kernel_names())
            .finish()
    }
}

impl CuModule {
    /// Loads a cubin (`cuModuleLoadData`) after validating it and checking that it targets `device`.
    pub fn from_cubin(device: &Device, cubin: &[u8]) -> Result<CuModule> {
        let info = cubin::inspect(cubin)?;
        if !cubin::runs_on(info.sm, device.compute_capability()) {
            return Err(RuntimeError::CubinArchMismatch {
                cubin_arch: info.arch(),
                device_arch: device.arch(),
                device: device.name().to_string(),
            });
        }
        device.bind()?;
        // SAFETY: `inspect` checked that every range the ELF headers declare lies inside `cubin`, and the
        // driver copies the image during the call.
        let raw = unsafe { result::module::load_data(cubin.as_ptr().cast()) }
            .map_err(driver_err("cuModuleLoadData"))?;
        Ok(CuModule {
            inner: Arc::new(ModuleInner {
                device: device.clone(),
                raw,
                info,
            }),
        })
    }

    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Names of the kernels in the cubin.
    pub fn kernel_names(&self) -> Vec<String> {
        self.inner
            .info
            .kernels
            .iter()
            .map(|k| k.name.clone())
            .collect()
    }

    /// Looks a kernel up by its entry name.
    pub fn kernel(&self, name: &str) -> Result<CuFunction> {
        let not_found = || RuntimeError::KernelNotFound {
            name: name.to_string(),
            available: self.kernel_names(),
        };
        let info = self.inner.info.kernel(name).cloned();
        let cname = CString::new(name).map_err(|_| not_found())?;
        self.inner.device.bind()?;
        // SAFETY: the module handle is live (held by `self`).
        let raw = match unsafe { result::module::get_function(self.inner.raw, cname) } {
            Ok(f) => f,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_FOUND => return Err(not_found()),
            Err(e) => return Err(driver_err("cuModuleGetFunction")(e)),
        };
        let info = info.unwrap_or(CubinEntry {
            name: name.to_string(),
            params: None,
            param_bytes: None,
            resources: None,
        });
        Ok(CuFunction {
            module: self.clone(),
            raw,
            info: Arc::new(info),
        })
    }
}

/// A kernel entry point of a loaded [`CuModule`]. Clone is cheap.
#[derive(Clone)]
pub struct CuFunction {
    module: CuModule,
    raw: sys::CUfunction,
    info: Arc<CubinEntry>,
}

// SAFETY: function handles may be used from any thread with their context bound.
unsafe impl Send for CuFunction {}
// SAFETY: as above; the handle is immutable.
unsafe impl Sync for CuFunction {}

impl fmt::Debug for CuFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuFunction")
            .field("name", &self.info.name)
            .field("params", &self.info.params)
            .finish()
    }
}

/// The tile grid of a launch: number of tile blocks along x, y, z.
pub type Grid = (u32, u32, u32);

/// Grid limits of every architecture tileiras targets.
const MAX_GRID: Grid = (i32::MAX as u32, 65535, 65535);

/// Checks a grid against the hardware limits.
pub fn check_grid(grid: Grid) -> Result<()> {
    let reason = if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
        Some("every dimension must be at least 1")
    } else if grid.0 > MAX_GRID.0 {
        Some("x may be at most 2^31 - 1")
    } else if grid.1 > MAX_GRID.1 || grid.2 > MAX_GRID.2 {
        Some("y and z may be at most 65535")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(RuntimeError::InvalidGrid { grid, reason }),
        None => Ok(()),
    }
}

/// Checks packed arguments against the parameter layout recorded in the cubin, when there is one.
pub fn check_params(
    kernel: &str,
    expected: Option<&[ParamSlot]>,
    args: &[ParamSlot],
) -> Result<()> {
    match expected {
        Some(expected) if expected != args => Err(RuntimeError::ParamMismatch {
            kernel: kernel.to_string(),
            expected: expected.to_vec(),
            found: args.to_vec(),
        }),
        _ => Ok(()),
    }
}

impl CuFunction {
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Parameter layout recorded in the cubin (offset, size per parameter), if any.
    pub fn params(&self) -> Option<&[ParamSlot]> {
        self.info.params.as_deref()
    }

    pub fn module(&self) -> &CuModule {
        &self.module
    }

    /// Queues the kernel on `stream` and returns at once; nothing is synchronised, so this is the form
    /// to use inside graph capture.
    ///
    /// # Safety
    /// The arguments must mean what the kernel expects (the byte layout is checked, the meaning cannot
    /// be): every address must point to live device memory large enough for the accesses the kernel
    /// makes with the given scalars, and that memory must stay alive and unaliased by conflicting work
    /// until the kernel has finished.
    pub unsafe fn enqueue(&self, stream: &Stream, grid: Grid, args: &KernelArgs<'_>) -> Result<()> {
        check_grid(grid)?;
        check_params(self.name(), self.params(), args.slots())?;
        let device = self.module.device();
        if stream.device() != device {
            return Err(RuntimeError::DeviceMismatch {
                op: "launch (stream)",
                expected: device.ordinal(),
                found: stream.device().ordinal(),
            });
        }
        if let Some(found) = args.foreign_device(device.ordinal()) {
            return Err(RuntimeError::DeviceMismatch {
                op: "launch (arguments)",
                expected: device.ordinal(),
                found,
            });
        }
        device.bind()?;
        let mut params = args.param_pointers();
        // SAFETY: live function and stream handles of the bound context; `params` point into `args`,
        // which outlives the call (the driver copies parameter values before returning). The rest is
        // the caller's obligation.
        unsafe { result::launch_kernel(self.raw, grid, (1, 1, 1), 0, stream.raw(), &mut params) }
            .map_err(driver_err("cuLaunchKernel"))
    }

    /// Launches and waits for the kernel to finish.
    ///
    /// # Safety
    /// As for [`enqueue`](Self::enqueue).
    pub unsafe fn launch(&self, stream: &Stream, grid: Grid, args: &KernelArgs<'_>) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.enqueue(stream, grid, args) }?;
        stream.synchronize()
    }

    /// Launches without waiting. The returned guard keeps the arguments' borrows (`'a`) alive until
    /// [`PendingLaunch::wait`] or its drop, which synchronises the stream (unless it is capturing).
    ///
    /// # Safety
    /// As for [`enqueue`](Self::enqueue); in addition, the guard must not be leaked
    /// (`mem::forget`), or the borrows would end while the kernel may still run.
    pub unsafe fn launch_async<'a>(
        &self,
        stream: &'a Stream,
        grid: Grid,
        args: &KernelArgs<'a>,
    ) -> Result<PendingLaunch<'a>> {
        // SAFETY: forwarded to the caller.
        unsafe { self.enqueue(stream, grid, args) }?;
        Ok(PendingLaunch {
            stream,
            done: false,
            _borrows: PhantomData,
        })
    }
}

/// An in-flight launch holding its arguments' borrows.
#[must_use = "dropping the guard waits for the kernel; call wait() to see errors"]
#[derive(Debug)]
pub struct PendingLaunch<'a> {
    stream: &'a Stream,
    done: bool,
    _borrows: PhantomData<&'a mut ()>,
}

impl PendingLaunch<'_> {
    /// Waits for the kernel (and everything queued before it on the stream). Inside graph capture
    /// there is nothing to wait for: the kernel was recorded, not run.
    pub fn wait(mut self) -> Result<()> {
        self.done = true;
        self.finish()
    }

    fn finish(&self) -> Result<()> {
        if self.stream.is_capturing()? {
            return Ok(());
        }
        self.stream.synchronize()
    }
}

impl Drop for PendingLaunch<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Errors cannot be returned from drop; a failed kernel also reports on the next call.
            let _ = self.finish();
        }
    }
}
