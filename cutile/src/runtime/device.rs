//! CUDA devices: selection by ordinal, their properties, and their primary context.
//!
//! A [`Device`] is a cheap handle to a process-wide record per ordinal. The record retains the device's
//! primary context once and keeps it for the life of the process, so every handle, module and buffer
//! of one ordinal shares one context (the same model as the CUDA runtime API).

use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{result, sys};

use super::driver::driver;
use super::error::{Result, RuntimeError, driver_err};

struct DeviceRecord {
    ordinal: usize,
    ctx: sys::CUcontext,
    name: String,
    compute_capability: (u32, u32),
    sm_count: u32,
    total_memory: usize,
}

// SAFETY: a CUcontext handle may be used from any thread once made current there (`bind` does that);
// the record is immutable after construction.
unsafe impl Send for DeviceRecord {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for DeviceRecord {}

/// A CUDA device and its primary context. Clone is cheap.
#[derive(Clone)]
pub struct Device {
    record: Arc<DeviceRecord>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("ordinal", &self.record.ordinal)
            .field("name", &self.record.name)
            .field("arch", &self.arch())
            .finish()
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.record.ordinal == other.record.ordinal
    }
}

impl Eq for Device {}

impl Device {
    /// Number of visible CUDA devices.
    pub fn count() -> Result<usize> {
        driver()?;
        let n = result::device::get_count().map_err(driver_err("cuDeviceGetCount"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The device with this ordinal (0-based, as CUDA_VISIBLE_DEVICES numbers them).
    pub fn new(ordinal: usize) -> Result<Device> {
        static DEVICES: OnceLock<Mutex<HashMap<usize, Device>>> = OnceLock::new();
        // An opened device is returned without asking the driver again (this runs on every call that
        // borrows a foreign stream).
        if let Some(d) = DEVICES.get().and_then(|m| {
            m.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&ordinal)
                .cloned()
        }) {
            return Ok(d);
        }
        let count = Device::count()?;
        if count == 0 {
            return Err(RuntimeError::NoDevice {
                hint: "check `nvidia-smi` and CUDA_VISIBLE_DEVICES".to_string(),
            });
        }
        if ordinal >= count {
            return Err(RuntimeError::DeviceOutOfRange { ordinal, count });
        }
        let devices = DEVICES.get_or_init(Default::default);
        let mut devices = devices.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = devices.get(&ordinal) {
            return Ok(d.clone());
        }
        let device = Device {
            record: Arc::new(DeviceRecord::open(ordinal)?),
        };
        devices.insert(ordinal, device.clone());
        Ok(device)
    }

    /// All visible devices, in ordinal order.
    pub fn all() -> Result<Vec<Device>> {
        (0..Device::count()?).map(Device::new).collect()
    }

    pub fn ordinal(&self) -> usize {
        self.record.ordinal
    }

    /// Marketing name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.record.name
    }

    /// `(major, minor)`, e.g. `(9, 0)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.record.compute_capability
    }

    /// The tileiras target name for this device, e.g. `"sm_90"`.
    pub fn arch(&self) -> String {
        let (major, minor) = self.record.compute_capability;
        format!("sm_{major}{minor}")
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.record.sm_count
    }

    /// Global memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.record.total_memory
    }

    /// Waits for all work on this device.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        result::ctx::synchronize().map_err(driver_err("cuCtxSynchronize"))
    }

    /// Makes this device's context current on the calling thread (a no-op when it already is).
    pub(crate) fn bind(&self) -> Result<()> {
        let current = result::ctx::get_current().map_err(driver_err("cuCtxGetCurrent"))?;
        if current != Some(self.record.ctx) {
            // SAFETY: the context was retained in `open` and is never released.
            unsafe { result::ctx::set_current(self.record.ctx) }
                .map_err(driver_err("cuCtxSetCurrent"))?;
        }
        Ok(())
    }
}

impl DeviceRecord {
    fn open(ordinal: usize) -> Result<DeviceRecord> {
        let dev = result::device::get(ordinal as i32).map_err(driver_err("cuDeviceGet"))?;
        let attr = |a: sys::CUdevice_attribute| -> Result<u32> {
            // SAFETY: `dev` is a valid device handle from cuDeviceGet.
            let v = unsafe { result::device::get_attribute(dev, a) }
                .map_err(driver_err("cuDeviceGetAttribute"))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        use sys::CUdevice_attribute as A;
        let compute_capability = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sm_count = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        // SAFETY: valid device handle.
        let total_memory =
            unsafe { result::device::total_mem(dev) }.map_err(driver_err("cuDeviceTotalMem"))?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer length passed matches the buffer; the driver NUL-terminates within it.
        unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32 - 1, dev) }
            .result()
            .map_err(driver_err("cuDeviceGetName"))?;
        // SAFETY: the last byte was never written by the driver (len - 1 passed), so a NUL exists.
        let name = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: valid device handle; the retained context is kept for the process lifetime.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(driver_err("cuDevicePrimaryCtxRetain"))?;
        Ok(DeviceRecord {
            ordinal,
            ctx,
            name,
            compute_capability,
            sm_count,
            total_memory,
        })
    }
}
