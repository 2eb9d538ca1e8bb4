//! Device timing with CUDA events: warm-up, then the median (and spread) of many timed launches, each
//! optionally preceded by an L2 flush.
//!
//! The flush ([`FlushMode`]) either writes a buffer five times the L2 (`write`, as `triton.testing.do_bench`
//! does) or reads one (`read`, the default). A written flush leaves the L2 full of dirty lines, so the
//! timed kernel pays for writing them back as it evicts them: a kernel that reads 50 MB after it moves
//! about 100 MB, which is the flush's cost, not the kernel's (on the H200, a 50 MB GEMV took 23 µs after a
//! written flush, the time of 100 MB at the copy bandwidth). A read flush leaves the L2 cold and clean, as
//! the previous layer's weight reads leave it in a real decode step. `none` flushes nothing: a diagnostic
//! for compute-bound kernels, to tell the flush's effect on a timing from the kernel's own.

use std::ffi::{CStr, c_void};

use cudarc::driver::{result, sys};

use super::error::driver_err;
use super::{Device, Event, RuntimeError, Stream, Tensor};

/// Bytes written by one L2 flush: 256 MiB, five times the H200's 50 MiB L2.
pub const FLUSH_BYTES: usize = 256 << 20;

/// How [`L2Flush`] evicts the cache (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// Read the buffer (a grid-stride kernel that writes nothing): the L2 ends cold and clean.
    Read,
    /// Write the buffer (`cuMemsetD8Async`): the L2 ends full of dirty lines.
    Write,
    /// Flush nothing: each timed call finds the L2 as the previous one left it.
    None,
}

impl FlushMode {
    /// `CUTILE_L2_FLUSH` (`read`, `write` or `none`), else [`FlushMode::Read`].
    pub fn from_env() -> Result<FlushMode, RuntimeError> {
        FlushMode::parse(std::env::var("CUTILE_L2_FLUSH").ok().as_deref())
    }

    /// A `CUTILE_L2_FLUSH` value (unset or empty: [`FlushMode::Read`]).
    pub fn parse(value: Option<&str>) -> Result<FlushMode, RuntimeError> {
        match value {
            None | Some("") | Some("read") => Ok(FlushMode::Read),
            Some("write") => Ok(FlushMode::Write),
            Some("none") => Ok(FlushMode::None),
            Some(other) => Err(RuntimeError::BadFlushMode {
                value: other.to_string(),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FlushMode::Read => "read",
            FlushMode::Write => "write",
            FlushMode::None => "none",
        }
    }
}

/// The read flush's kernel, as PTX for the driver to compile at load time (no tileiras needed): each
/// thread XORs 16-byte words of the buffer in a grid-stride loop and stores only if the result equals
/// a value a zeroed buffer cannot give, so the loads stay and nothing is written.
const READ_FLUSH_PTX: &CStr = cr#".version 7.8
.target sm_80
.address_size 64

.visible .entry cutile_l2_read_flush(
    .param .u64 buf,
    .param .u64 words,
    .param .u64 sink
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;

    ld.param.u64 %rd1, [buf];
    ld.param.u64 %rd2, [words];
    ld.param.u64 %rd3, [sink];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    mov.u32 %r5, 0;
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra DONE;
LOOP:
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
    xor.b32 %r5, %r5, %r6;
    xor.b32 %r5, %r5, %r7;
    xor.b32 %r5, %r5, %r8;
    xor.b32 %r5, %r5, %r9;
    add.u64 %rd4, %rd4, %rd6;
    setp.lt.u64 %p2, %rd4, %rd2;
    @%p2 bra LOOP;
DONE:
    setp.ne.u32 %p1, %r5, 305419897;
    @%p1 bra END;
    st.global.u32 [%rd3], %r5;
END:
    ret;
}
"#;

/// The read flush's loaded kernel.
struct ReadKernel {
    device: Device,
    module: sys::CUmodule,
    function: sys::CUfunction,
}

impl std::fmt::Debug for ReadKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadKernel").finish_non_exhaustive()
    }
}

impl ReadKernel {
    fn load(device: &Device) -> Result<ReadKernel, RuntimeError> {
        device.bind()?;
        // SAFETY: a NUL-terminated PTX image; the driver compiles and copies it during the call.
        let module = unsafe { result::module::load_data(READ_FLUSH_PTX.as_ptr().cast()) }
            .map_err(driver_err("cuModuleLoadData (L2 read flush PTX)"))?;
        let name = c"cutile_l2_read_flush".to_owned();
        // SAFETY: `module` was just loaded in the bound context.
        let function = match unsafe { result::module::get_function(module, name) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: unloaded once, nothing refers to it.
                let _ = unsafe { result::module::unload(module) };
                return Err(driver_err("cuModuleGetFunction (L2 read flush)")(e));
            }
        };
        Ok(ReadKernel {
            device: device.clone(),
            module,
            function,
        })
    }
}

impl Drop for ReadKernel {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: owned module, unloaded once; `function` dies with it.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

/// A device buffer larger than the L2, and the means to evict the cache with it ([`FlushMode`]).
#[derive(Debug)]
pub struct L2Flush {
    buf: Tensor<u8>,
    mode: FlushMode,
    read: Option<ReadKernel>,
}

// SAFETY: the raw module and function handles are used only with their context bound (`ReadKernel`),
// like `CuModule`'s.
unsafe impl Send for L2Flush {}

impl L2Flush {
    /// A flush of `bytes` in the mode `CUTILE_L2_FLUSH` names ([`FlushMode::from_env`]).
    pub fn new(device: &Device, bytes: usize) -> Result<L2Flush, RuntimeError> {
        L2Flush::with_mode(device, bytes, FlushMode::from_env()?)
    }

    pub fn with_mode(
        device: &Device,
        bytes: usize,
        mode: FlushMode,
    ) -> Result<L2Flush, RuntimeError> {
        // 16-byte words for the read kernel; no buffer worth the name when nothing is flushed.
        let bytes = if mode == FlushMode::None {
            16
        } else {
            bytes.div_ceil(16) * 16
        };
        let shape = [bytes as i64];
        let read = match mode {
            FlushMode::Read => Some(ReadKernel::load(device)?),
            FlushMode::Write | FlushMode::None => None,
        };
        Ok(L2Flush {
            buf: Tensor::zeros(device, &shape)?,
            mode,
            read,
        })
    }

    pub fn mode(&self) -> FlushMode {
        self.mode
    }

    /// Whether [`L2Flush::enqueue`] flushes at all (every mode but [`FlushMode::None`]): a timing taken
    /// after it starts with a cold L2.
    pub fn flushes(&self) -> bool {
        self.mode != FlushMode::None
    }

    /// Queues the flush on `stream` without waiting: the next work on `stream` starts with a cold L2,
    /// and the host can prepare that work while the GPU is still busy flushing, so host-side launch
    /// overhead stays out of a device timing that starts after it.
    pub fn enqueue(&mut self, stream: &Stream) -> Result<(), RuntimeError> {
        if self.mode == FlushMode::None {
            return Ok(());
        }
        stream.device().bind()?;
        let bytes = self.buf.numel().max(0) as usize;
        if let Some(k) = &self.read {
            let (mut buf, mut words, mut sink) = (
                self.buf.device_ptr(),
                (bytes / 16) as u64,
                self.buf.device_ptr(),
            );
            let mut params: Vec<*mut c_void> = vec![
                (&mut buf as *mut u64).cast(),
                (&mut words as *mut u64).cast(),
                (&mut sink as *mut u64).cast(),
            ];
            let sms = stream.device().sm_count().max(1);
            // SAFETY: the kernel reads `words` 16-byte words of `buf` (a live allocation of `bytes`
            // bytes owned by `self`) and writes nothing (its store, to the buffer's first word, is
            // unreachable for a zeroed buffer); the parameters are copied by the driver during the call.
            return unsafe {
                result::launch_kernel(
                    k.function,
                    (sms * 4, 1, 1),
                    (256, 1, 1),
                    0,
                    stream.raw(),
                    &mut params,
                )
            }
            .map_err(driver_err("cuLaunchKernel (L2 read flush)"));
        }
        // SAFETY: `buf` is a live allocation of `bytes` bytes on the stream's device, owned by `self`,
        // which outlives the queued write (the caller synchronizes the stream before dropping it).
        unsafe {
            cudarc::driver::result::memset_d8_async(
                self.buf.device_ptr(),
                0xA5,
                bytes,
                stream.raw(),
            )
        }
        .map_err(super::error::driver_err("cuMemsetD8Async"))
    }
}

/// Summary of timed samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub median_us: f64,
    pub min_us: f64,
    pub p90_us: f64,
    pub samples: usize,
}

impl Stats {
    /// Median, minimum and 90th percentile of `samples` (µs); zeros when empty.
    pub fn of(mut samples: Vec<f64>) -> Stats {
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let at = |q: f64| {
            if n == 0 {
                0.0
            } else {
                samples[((n - 1) as f64 * q).round() as usize]
            }
        };
        let median_us = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            samples[n / 2]
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) / 2.0
        };
        Stats {
            median_us,
            min_us: at(0.0),
            p90_us: at(0.9),
            samples: n,
        }
    }
}

/// Times `launch` (which must only enqueue work on `stream`) with events: `warmup` untimed runs, then
/// `iters` timed ones, each after `flush` when given.
pub fn time_device<E: From<RuntimeError>>(
    stream: &Stream,
    warmup: usize,
    iters: usize,
    mut flush: Option<&mut L2Flush>,
    mut launch: impl FnMut() -> Result<(), E>,
) -> Result<Stats, E> {
    let device = stream.device();
    let (start, end) = (Event::new(device)?, Event::new(device)?);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        // The flush is queued ahead of the start event, so the GPU is busy while the host prepares the
        // launch: the timing covers the device work, not the host's launch overhead.
        if let Some(f) = flush.as_deref_mut() {
            f.enqueue(stream)?;
        }
        start.record(stream)?;
        launch()?;
        end.record(stream)?;
        end.synchronize()?;
        if i >= warmup {
            samples.push(start.elapsed_ms(&end)? as f64 * 1e3);
        }
    }
    Ok(Stats::of(samples))
}

/// Bytes of each buffer of [`copy_gbps`]'s probe: 512 MiB, ten times the H200's L2, so the copy runs
/// from and to DRAM whatever the cache holds.
pub const COPY_PROBE_BYTES: usize = 512 << 20;

/// The device's copy bandwidth in GB/s: bytes read plus bytes written by one device-to-device copy of
/// `bytes` (`cuMemcpyDtoDAsync` on `stream`) ÷ its median time over `iters` timed copies, each after
/// `flush` when given. Memory-bound results are quoted as a fraction of this figure measured in the
/// same run, so they mean the same on an H100 (HBM3) as on an H200 (HBM3e).
pub fn copy_gbps(
    stream: &Stream,
    flush: Option<&mut L2Flush>,
    bytes: usize,
    iters: usize,
) -> Result<f64, RuntimeError> {
    let device = stream.device();
    let bytes = bytes.max(16);
    let shape = [bytes as i64];
    let (src, dst) = (
        Tensor::<u8>::zeros(device, &shape)?,
        Tensor::<u8>::zeros(device, &shape)?,
    );
    device.bind()?;
    let stats = time_device(stream, 2, iters.max(1), flush, || {
        // SAFETY: both are live allocations of `bytes` bytes on the stream's device, owned here and
        // dropped only after `time_device` synchronized on the copy's end event.
        unsafe {
            result::memcpy_dtod_async(dst.device_ptr(), src.device_ptr(), bytes, stream.raw())
        }
        .map_err(driver_err("cuMemcpyDtoDAsync (copy bandwidth probe)"))
    })?;
    if stats.median_us <= 0.0 {
        return Err(RuntimeError::ZeroTiming {
            what: "the copy bandwidth probe",
        });
    }
    Ok(2.0 * bytes as f64 / (stats.median_us * 1e-6) / 1e9)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn flush_mode_parses_its_variable() {
        assert_eq!(FlushMode::parse(None).unwrap(), FlushMode::Read);
        assert_eq!(FlushMode::parse(Some("")).unwrap(), FlushMode::Read);
        assert_eq!(FlushMode::parse(Some("read")).unwrap(), FlushMode::Read);
        assert_eq!(FlushMode::parse(Some("write")).unwrap(), FlushMode::Write);
        assert_eq!(FlushMode::parse(Some("none")).unwrap(), FlushMode::None);
        let e = FlushMode::parse(Some("dirty")).unwrap_err().to_string();
        assert!(
            e.contains("CUTILE_L2_FLUSH=dirty") && e.contains("`read`"),
            "{e}"
        );
    }

    /// The read flush's PTX declares the kernel the loader looks up, takes three 64-bit parameters and
    /// stores only behind the impossible-value branch.
    #[test]
    fn read_flush_ptx_is_the_kernel_the_loader_names() {
        let ptx = READ_FLUSH_PTX.to_str().unwrap();
        assert!(ptx.contains(".visible .entry cutile_l2_read_flush("));
        assert_eq!(ptx.matches(".param .u64").count(), 3);
        assert_eq!(ptx.matches("st.global").count(), 1);
        assert!(ptx.contains("@%p1 bra END;"));
    }
}
