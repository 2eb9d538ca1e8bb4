//! Device timing with CUDA events: warm-up, then the median (and spread) of many timed launches, each
//! optionally preceded by an L2 flush (a device copy of a buffer larger than the cache).

use super::{Device, Event, RuntimeError, Stream, Tensor};

/// Bytes written by one L2 flush: 256 MiB, five times the H200's 50 MiB L2.
pub const FLUSH_BYTES: usize = 256 << 20;

/// Two device buffers; a flush copies one onto the other, evicting whatever the cache held.
#[derive(Debug)]
pub struct L2Flush {
    src: Tensor<u8>,
    dst: Tensor<u8>,
}

impl L2Flush {
    pub fn new(device: &Device, bytes: usize) -> Result<L2Flush, RuntimeError> {
        let shape = [bytes as i64];
        Ok(L2Flush {
            src: Tensor::zeros(device, &shape)?,
            dst: Tensor::zeros(device, &shape)?,
        })
    }

    /// Queues a write of the whole buffer on `stream` without waiting: the next work on `stream`
    /// starts with a cold L2, and the host can prepare that work while the GPU is still busy writing,
    /// so host-side launch overhead stays out of a device timing that starts after it.
    pub fn enqueue(&mut self, stream: &Stream) -> Result<(), RuntimeError> {
        stream.device().bind()?;
        let bytes = self.dst.numel().max(0) as usize;
        // SAFETY: `dst` is a live allocation of `bytes` bytes on the stream's device, owned by `self`,
        // which outlives the queued write (the caller synchronizes the stream before dropping it).
        unsafe {
            cudarc::driver::result::memset_d8_async(
                self.dst.device_ptr(),
                0xA5,
                bytes,
                stream.raw(),
            )
        }
        .map_err(super::error::driver_err("cuMemsetD8Async"))
    }

    /// Copies the buffer (on the legacy stream, which the runtime's blocking streams wait for) and
    /// waits for it, so the next timed launch starts with a cold L2.
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        let src = self.src.view();
        self.dst.copy_from(&src)?;
        self.dst.device().synchronize()?;
        Ok(())
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
