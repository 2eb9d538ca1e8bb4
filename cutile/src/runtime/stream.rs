//! Streams (owned, or borrowed from a foreign caller such as PyTorch), timing events and CUDA graph
//! capture.

use std::fmt;

use cudarc::driver::{result, sys};

use super::device::Device;
use super::error::{Result, driver_err};

/// An ordered queue of device work.
pub struct Stream {
    device: Device,
    raw: sys::CUstream,
    owned: bool,
}

// SAFETY: CUDA streams may be used from any thread; every use binds the device's context first.
unsafe impl Send for Stream {}
// SAFETY: the driver serialises operations on one stream internally; the handle is immutable.
unsafe impl Sync for Stream {}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.device.ordinal())
            .field("raw", &self.raw)
            .finish()
    }
}

impl Stream {
    /// A new stream on `device`. It is a blocking stream: it orders itself after work on the legacy
    /// default stream (where the runtime's synchronous copies run).
    pub fn new(device: &Device) -> Result<Stream> {
        device.bind()?;
        let raw = result::stream::create(result::stream::StreamKind::Default)
            .map_err(driver_err("cuStreamCreate"))?;
        Ok(Stream {
            device: device.clone(),
            raw,
            owned: true,
        })
    }

    /// The legacy default stream of `device` (cannot be captured into a graph).
    pub fn legacy(device: &Device) -> Stream {
        Stream {
            device: device.clone(),
            raw: std::ptr::null_mut(),
            owned: false,
        }
    }

    /// Borrows a stream someone else created (a PyTorch stream's `cuda_stream`, a C caller's
    /// `CUstream`) without owning it: it is never destroyed here. Work queued through it runs in
    /// `device`'s primary context (the one the CUDA runtime, and so PyTorch, uses); every call binds
    /// that context first, so a thread with no current context works too. `0` is the legacy default
    /// stream.
    ///
    /// # Safety
    /// `raw` must be a stream of `device`'s primary context (or 0, or a per-thread default stream
    /// handle) that stays alive for as long as the returned value or any work queued through it is in
    /// use.
    pub unsafe fn from_raw(device: &Device, raw: usize) -> Stream {
        Stream {
            device: device.clone(),
            raw: raw as sys::CUstream,
            owned: false,
        }
    }

    /// Whether this value created the stream (and destroys it on drop).
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The `CUstream` handle as an integer (what a foreign caller passes to
    /// [`Stream::from_raw`]); the stream keeps owning it.
    pub fn raw_handle(&self) -> usize {
        self.raw as usize
    }

    pub(crate) fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The address of the underlying CUDA stream handle, as an identity: two live streams of one device
    /// never share it (the legacy default stream is 0 on every device, so pair it with the device
    /// ordinal). A handle value may be reused by a stream created after this one was destroyed.
    pub fn id(&self) -> usize {
        self.raw as usize
    }

    /// Queues a copy of `data` (host memory) to the device bytes at `address` on this stream: it runs
    /// after the work queued before it and before the work queued after it, without blocking the
    /// host on either. The driver stages pageable host memory before returning, so `data` may be
    /// dropped at once. Not allowed during graph capture (the driver refuses pageable sources there).
    ///
    /// # Safety
    /// `address .. address + data.len()` must be device memory of this stream's device, writable in
    /// stream order (no other stream may use it while the copy is pending).
    pub unsafe fn copy_to_device_async(&self, address: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: guaranteed by the caller; the context is current and the stream handle is live.
        unsafe { result::memcpy_htod_async(address, data, self.raw) }
            .map_err(driver_err("cuMemcpyHtoDAsync"))
    }

    /// Waits until all work queued on this stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the stream handle is live (owned by self, or the null stream).
        unsafe { result::stream::synchronize(self.raw) }.map_err(driver_err("cuStreamSynchronize"))
    }

    /// Starts recording work queued on this stream into a graph instead of running it. Thread-local
    /// capture mode: other threads may keep using the device meanwhile.
    pub fn begin_capture(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: live stream handle.
        unsafe {
            result::stream::begin_capture(
                self.raw,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .map_err(driver_err("cuStreamBeginCapture"))
    }

    /// Ends capture and instantiates the recorded work as an executable graph.
    pub fn end_capture(&self) -> Result<Graph> {
        self.device.bind()?;
        // SAFETY: live stream handle; the graph returned is owned by the new `Graph`.
        let graph = unsafe { result::stream::end_capture(self.raw) }
            .map_err(driver_err("cuStreamEndCapture"))?;
        // SAFETY: `graph` is the valid graph just captured.
        let exec =
            match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
                Ok(exec) => exec,
                Err(e) => {
                    // SAFETY: the graph is ours and not used after this.
                    let _ = unsafe { result::graph::destroy(graph) };
                    return Err(driver_err("cuGraphInstantiate")(e));
                }
            };
        Ok(Graph {
            device: self.device.clone(),
            graph,
            exec,
        })
    }

    /// Whether the stream is currently capturing.
    pub fn is_capturing(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: live stream handle.
        let status = unsafe { result::stream::is_capturing(self.raw) }
            .map_err(driver_err("cuStreamIsCapturing"))?;
        Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned && self.device.bind().is_ok() {
            // SAFETY: the stream is owned and destroyed once; queued work still completes.
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

/// Work captured from a stream, instantiated and ready to replay.
pub struct Graph {
    device: Device,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

// SAFETY: graph handles may be used from any thread with the context bound; launching is
// externally synchronised by the driver.
unsafe impl Send for Graph {}
// SAFETY: as above; the handles are immutable.
unsafe impl Sync for Graph {}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.device.ordinal())
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// Replays the captured work on `stream`.
    ///
    /// # Safety
    /// The graph holds the raw device addresses captured with each launch: every buffer it touches
    /// must still be alive, and not in use elsewhere in a way that conflicts with the captured
    /// kernels, until the replay finishes.
    pub unsafe fn launch(&self, stream: &Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: live graph and stream handles; buffer validity is the caller's obligation.
        unsafe { result::graph::launch(self.exec, stream.raw()) }
            .map_err(driver_err("cuGraphLaunch"))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: both handles are owned and destroyed once.
            unsafe {
                let _ = result::graph::exec_destroy(self.exec);
                let _ = result::graph::destroy(self.graph);
            }
        }
    }
}

/// A CUDA event with timing enabled.
pub struct Event {
    device: Device,
    raw: sys::CUevent,
}

// SAFETY: events may be recorded and queried from any thread with the context bound.
unsafe impl Send for Event {}
// SAFETY: as above; the handle is immutable.
unsafe impl Sync for Event {}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.device.ordinal())
            .finish_non_exhaustive()
    }
}

impl Event {
    /// A timing-enabled event on `device`.
    pub fn new(device: &Device) -> Result<Event> {
        device.bind()?;
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(driver_err("cuEventCreate"))?;
        Ok(Event {
            device: device.clone(),
            raw,
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: live event and stream handles.
        unsafe { result::event::record(self.raw, stream.raw()) }
            .map_err(driver_err("cuEventRecord"))
    }

    /// Waits until the work before the event's last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: live event handle.
        unsafe { result::event::synchronize(self.raw) }.map_err(driver_err("cuEventSynchronize"))
    }

    /// Milliseconds of device time from this event to `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.device.bind()?;
        // SAFETY: live event handles.
        unsafe { result::event::elapsed(self.raw, end.raw) }
            .map_err(driver_err("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the event is owned and destroyed once.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}
