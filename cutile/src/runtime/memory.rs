//! Owned device allocations and synchronous host↔device copies.
//!
//! Copies use the synchronous driver calls on the legacy default stream. Streams made by
//! [`Stream::new`](super::Stream::new) are blocking streams, which order themselves after legacy-stream
//! work, so a kernel launched after an upload sees the data without extra synchronisation.

use cudarc::driver::result;

use super::args::DevicePointer;
use super::device::Device;
use super::error::{Result, RuntimeError, driver_err};

/// A device allocation freed on drop. Zero-byte buffers allocate nothing and have address 0.
#[derive(Debug)]
pub struct DeviceBuffer {
    device: Device,
    ptr: u64,
    bytes: usize,
}

impl DeviceBuffer {
    /// Allocates `bytes` bytes of uninitialised device memory.
    pub fn alloc(device: &Device, bytes: usize) -> Result<DeviceBuffer> {
        let ptr = if bytes == 0 {
            0
        } else {
            device.bind()?;
            // SAFETY: the device's context is current; the result is checked.
            unsafe { result::malloc_sync(bytes) }.map_err(driver_err("cuMemAlloc"))?
        };
        Ok(DeviceBuffer {
            device: device.clone(),
            ptr,
            bytes,
        })
    }

    /// Allocates `bytes` bytes set to zero.
    pub fn zeroed(device: &Device, bytes: usize) -> Result<DeviceBuffer> {
        let buf = DeviceBuffer::alloc(device, bytes)?;
        if bytes > 0 {
            // SAFETY: `ptr` is a live allocation of `bytes` bytes in the bound context.
            unsafe { result::memset_d8_sync(buf.ptr, 0, bytes) }
                .map_err(driver_err("cuMemsetD8"))?;
        }
        Ok(buf)
    }

    /// Allocates a buffer holding a copy of `data`.
    pub fn from_host(device: &Device, data: &[u8]) -> Result<DeviceBuffer> {
        let mut buf = DeviceBuffer::alloc(device, data.len())?;
        buf.write(0, data)?;
        Ok(buf)
    }

    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// Copies `data` into the buffer at byte `offset`.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        check_range("copy to device", offset, data.len(), self.bytes)?;
        // SAFETY: the range was checked against this live allocation.
        unsafe { write_device(&self.device, self.ptr + offset as u64, data) }
    }

    /// Copies bytes at `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("copy to host", offset, out.len(), self.bytes)?;
        // SAFETY: the range was checked against this live allocation.
        unsafe { read_device(&self.device, self.ptr + offset as u64, out) }
    }
}

/// Copies device bytes at `address` into `out`.
///
/// # Safety
/// `address .. address + out.len()` must be readable device memory of `device`.
pub(crate) unsafe fn read_device(device: &Device, address: u64, out: &mut [u8]) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    device.bind()?;
    // SAFETY: guaranteed by the caller; the context is current.
    unsafe { result::memcpy_dtoh_sync(out, address) }.map_err(driver_err("cuMemcpyDtoH"))
}

/// Copies `data` to device bytes at `address`.
///
/// # Safety
/// `address .. address + data.len()` must be writable device memory of `device`.
pub(crate) unsafe fn write_device(device: &Device, address: u64, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    device.bind()?;
    // SAFETY: guaranteed by the caller; the context is current.
    unsafe { result::memcpy_htod_sync(address, data) }.map_err(driver_err("cuMemcpyHtoD"))
}

fn check_range(op: &'static str, offset: usize, len: usize, capacity: usize) -> Result<()> {
    if offset.checked_add(len).is_none_or(|end| end > capacity) {
        return Err(RuntimeError::OutOfBounds {
            op,
            offset,
            len,
            capacity,
        });
    }
    Ok(())
}

impl DevicePointer for DeviceBuffer {
    fn device_ptr(&self) -> u64 {
        self.ptr
    }

    fn device(&self) -> &Device {
        &self.device
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.device.bind().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc in this context and is freed once. cuMemFree waits for
            // work using it, and a failure here can only be reported by leaking.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Copies `bytes` bytes between two device addresses of `device`.
///
/// # Safety
/// Both ranges must be device memory of `device`, `dst` writable; they must not overlap.
pub(crate) unsafe fn copy_device(device: &Device, dst: u64, src: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    device.bind()?;
    // SAFETY: guaranteed by the caller; the context is current.
    unsafe { result::memcpy_dtod_sync(dst, src, bytes) }.map_err(driver_err("cuMemcpyDtoD"))
}
