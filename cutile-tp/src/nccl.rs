//! NCCL through cudarc's bindings (`cudarc::nccl`, loaded at run time): the library probe with a
//! typed error instead of cudarc's panic, one communicator per rank of this process
//! (`ncclCommInitAll`), the sum all-reduce on device buffers, the per-rank streams shared by the
//! catalog's ops and NCCL, and the nccl-tests bus-bandwidth measurement.
//!
//! Where libnccl comes from: cudarc dlopens `libnccl.so` (and versioned variants without the `.2`
//! suffix); torch's pip package ships `nvidia/nccl/lib/libnccl.so.2` only, so a link named
//! `libnccl.so` is needed on `LD_LIBRARY_PATH` ([`LD_RECIPE`]). NVLink multicast (NVLS) stays off: the
//! callers set `NCCL_NVLS_ENABLE=0` unless the environment already says otherwise.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys as drv};
use cudarc::nccl::{result, sys};
use cutile::runtime::{Device, Stream};

use crate::{Result, TpError};

/// The shell lines that make torch's libnccl loadable.
pub const LD_RECIPE: &str = "NCCL_DIR=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],\"lib\"))'); mkdir -p /tmp/nccl-lib && ln -sf $NCCL_DIR/libnccl.so.2 /tmp/nccl-lib/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-lib:$NCCL_DIR:$LD_LIBRARY_PATH";

/// The file names cudarc tries.
pub fn library_candidates() -> Vec<String> {
    cudarc::get_lib_name_candidates("nccl")
}

/// Directories of the loader path `ld_path` (`LD_LIBRARY_PATH`'s form) holding a `libnccl.so.2` but no
/// `libnccl.so` (the pip layout).
pub fn versioned_only(ld_path: &str) -> Vec<String> {
    ld_path
        .split(':')
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let p = std::path::Path::new(d);
            p.join("libnccl.so.2").exists() && !p.join("libnccl.so").exists()
        })
        .map(str::to_string)
        .collect()
}

/// The error for a missing library, with the fix, for the loader path `ld_path`.
pub fn missing_error(ld_path: &str) -> TpError {
    let found = versioned_only(ld_path);
    let hint = if found.is_empty() {
        format!("Install NCCL (torch's pip wheel brings it) and make it loadable: {LD_RECIPE}")
    } else {
        format!("{found:?} hold libnccl.so.2 but not libnccl.so; add a link: {LD_RECIPE}")
    };
    TpError::NcclMissing {
        searched: library_candidates(),
        hint,
    }
}

/// The loaded NCCL's version code (e.g. 22703 for 2.27.3), or [`TpError::NcclMissing`].
pub fn version() -> Result<i32> {
    // SAFETY: only tries to dlopen the candidate names.
    if !unsafe { sys::is_culib_present() } {
        return Err(missing_error(
            &std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
        ));
    }
    result::get_nccl_version().map_err(|e| nccl_err("ncclGetVersion", e))
}

fn nccl_err(call: &'static str, e: result::NcclError) -> TpError {
    TpError::Nccl {
        call,
        code: format!("{:?}", e.0),
    }
}

fn drv_err(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> TpError {
    move |e| TpError::Driver {
        call,
        what: e.to_string(),
    }
}

/// Sets `NCCL_NVLS_ENABLE=0` unless set: NVLink multicast stays off.
///
/// # Safety
/// Changes the process environment: call it before any other thread starts.
pub unsafe fn disable_nvls_unless_set() {
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // SAFETY: the caller guarantees no other thread runs.
        unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    }
}

/// One rank's communicator.
#[derive(Debug)]
pub struct Comm {
    raw: sys::ncclComm_t,
    rank: usize,
    ranks: usize,
}

// SAFETY: an NCCL communicator may be used from any thread, by one thread at a time; `Comm` is not
// `Sync` and its calls take `&self` from the owning rank's thread only.
unsafe impl Send for Comm {}

impl Comm {
    /// Communicators for the devices `ordinals` of this process, rank `i` on `ordinals[i]`.
    pub fn init_all(ordinals: &[usize]) -> Result<Vec<Comm>> {
        version()?;
        if ordinals.is_empty() {
            return Err(TpError::Shard {
                ranks: 0,
                what: "no devices for the communicator".into(),
            });
        }
        let n = ordinals.len();
        let devs: Vec<i32> = ordinals.iter().map(|&o| o as i32).collect();
        let mut raw = vec![std::ptr::null_mut(); n];
        // SAFETY: `raw` holds `n` slots and `devs` `n` ordinals.
        unsafe { result::comm_init_all(raw.as_mut_ptr(), n as i32, devs.as_ptr()) }
            .map_err(|e| nccl_err("ncclCommInitAll", e))?;
        Ok(raw
            .into_iter()
            .enumerate()
            .map(|(rank, raw)| Comm {
                raw,
                rank,
                ranks: n,
            })
            .collect())
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Queues an in-place sum all-reduce of `count` elements at `ptr` on `stream`.
    ///
    /// # Safety
    /// `ptr` must address `count` elements of `dtype` on this rank's device that stay allocated and
    /// untouched by others until the stream has run the collective; every rank must queue the same
    /// collectives in the same order.
    pub unsafe fn all_reduce_sum_raw(
        &self,
        ptr: u64,
        count: usize,
        dtype: sys::ncclDataType_t,
        stream: &CudaStream,
    ) -> Result<()> {
        // SAFETY: as the caller guarantees; the communicator is live.
        unsafe {
            result::all_reduce(
                ptr as *const _,
                ptr as *mut _,
                count,
                dtype,
                sys::ncclRedOp_t::ncclSum,
                self.raw,
                stream.cu_stream() as _,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_err("ncclAllReduce", e))
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the communicator is live and dropped once; errors cannot be returned from drop.
        let _ = unsafe { result::comm_destroy(self.raw) };
    }
}

/// A rank's two streams, usable both by the catalog's ops (`stream`, `comm`: cutile streams over the
/// same handles) and by NCCL and events (`cs`, `comm_cs`).
pub struct RankStreams {
    pub stream: Stream,
    pub comm: Stream,
    pub cs: Arc<CudaStream>,
    pub comm_cs: Arc<CudaStream>,
    pub ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for RankStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankStreams")
            .field("device", &self.stream.device().ordinal())
            .finish()
    }
}

impl RankStreams {
    /// Two new streams on `device` (its primary context, which the catalog's ops use too).
    pub fn new(device: &Device) -> Result<RankStreams> {
        let ctx =
            CudaContext::new(device.ordinal()).map_err(drv_err("cuDevicePrimaryCtxRetain"))?;
        let cs = ctx.new_stream().map_err(drv_err("cuStreamCreate"))?;
        let comm_cs = ctx.new_stream().map_err(drv_err("cuStreamCreate"))?;
        // SAFETY: both streams belong to the device's primary context and outlive the wrappers
        // (fields drop in order: the wrappers first).
        let (stream, comm) = unsafe {
            (
                Stream::from_raw(device, cs.cu_stream() as usize),
                Stream::from_raw(device, comm_cs.cu_stream() as usize),
            )
        };
        Ok(RankStreams {
            stream,
            comm,
            cs,
            comm_cs,
            ctx,
        })
    }

    /// A timing event recorded now on `s`.
    pub fn mark(&self, s: &CudaStream) -> Result<cudarc::driver::CudaEvent> {
        s.record_event(Some(drv::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv_err("cuEventRecord"))
    }

    /// `a` waits for the work queued so far on `b`.
    pub fn join(a: &CudaStream, b: &CudaStream) -> Result<()> {
        a.join(b).map_err(drv_err("cuStreamWaitEvent"))
    }

    pub fn sync(&self) -> Result<()> {
        self.cs
            .synchronize()
            .map_err(drv_err("cuStreamSynchronize"))?;
        self.comm_cs
            .synchronize()
            .map_err(drv_err("cuStreamSynchronize"))
    }
}

/// Milliseconds between two events.
pub fn elapsed_ms(a: &cudarc::driver::CudaEvent, b: &cudarc::driver::CudaEvent) -> Result<f64> {
    a.elapsed_ms(b)
        .map(f64::from)
        .map_err(drv_err("cuEventElapsedTime"))
}

/// nccl-tests' bus bandwidth of an all-reduce: `algbw · 2(n−1)/n`.
pub fn bus_bandwidth(algbw: f64, n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    algbw * 2.0 * (n as f64 - 1.0) / n as f64
}

/// One all-reduce bandwidth measurement.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BusBw {
    pub ranks: usize,
    pub bytes: usize,
    /// Mean time of one all-reduce (the slowest rank's).
    pub time_us: f64,
    /// `bytes / time`, GB/s.
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
}

/// Times `iters` f32 sum all-reduces of `bytes` over the devices `ordinals` (one thread each, after
/// `warmup` untimed ones), nccl-tests style.
pub fn measure_all_reduce(
    ordinals: &[usize],
    bytes: usize,
    warmup: usize,
    iters: usize,
) -> Result<BusBw> {
    let comms = Comm::init_all(ordinals)?;
    let count = (bytes / 4).max(1);
    let iters = iters.max(1);
    let times: Vec<(Result<f64>, Option<Comm>)> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .zip(ordinals)
            .map(|(comm, &ord)| {
                s.spawn(move || {
                    let r = (|| -> Result<f64> {
                        let device = Device::new(ord)?;
                        let rs = RankStreams::new(&device)?;
                        let buf = cutile::runtime::Tensor::<f32>::ones(&device, &[count as i64])?;
                        let go = |k: usize| -> Result<()> {
                            for _ in 0..k {
                                // SAFETY: `buf` lives until after the final synchronize below; every
                                // rank queues the same collectives.
                                unsafe {
                                    comm.all_reduce_sum_raw(
                                        buf.device_ptr(),
                                        count,
                                        sys::ncclDataType_t::ncclFloat32,
                                        &rs.cs,
                                    )?
                                };
                            }
                            Ok(())
                        };
                        go(warmup)?;
                        let a = rs.mark(&rs.cs)?;
                        go(iters)?;
                        let b = rs.mark(&rs.cs)?;
                        rs.sync()?;
                        Ok(elapsed_ms(&a, &b)? / iters as f64)
                    })();
                    (r, Some(comm))
                })
            })
            .collect();
        hs.into_iter()
            .enumerate()
            .map(|(rank, h)| {
                h.join().unwrap_or_else(|_| {
                    (
                        Err(TpError::Rank {
                            rank,
                            what: "thread panicked".into(),
                        }),
                        None,
                    )
                })
            })
            .collect()
    });
    let (times, comms): (Vec<_>, Vec<_>) = times.into_iter().unzip();
    drop(comms);
    let mut worst = 0f64;
    for t in times {
        worst = worst.max(t?);
    }
    let bytes = count * 4;
    let algbw = if worst > 0.0 {
        bytes as f64 / (worst * 1e-3) / 1e9
    } else {
        0.0
    };
    Ok(BusBw {
        ranks: ordinals.len(),
        bytes,
        time_us: worst * 1e3,
        algbw_gbps: algbw,
        busbw_gbps: bus_bandwidth(algbw, ordinals.len()),
    })
}

/// The per-GPU NVLink bandwidth (GB/s, one direction, all links summed) parsed from
/// `nvidia-smi nvlink -s` output (`Link i: 26.562 GB/s` lines per GPU); the smallest GPU's figure,
/// or `None` when no link is listed (no NVLink, or inactive links).
pub fn parse_nvlink_status(text: &str) -> Option<f64> {
    let mut per_gpu: Vec<f64> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("GPU ") {
            per_gpu.push(0.0);
        } else if l.starts_with("Link ")
            && let Some((_, rest)) = l.split_once(':')
        {
            let mut it = rest.split_whitespace();
            let (Some(v), Some(unit)) = (it.next(), it.next()) else {
                continue;
            };
            let Ok(v) = v.parse::<f64>() else { continue };
            let gbps = match unit {
                "GB/s" => v,
                "MB/s" => v / 1e3,
                "TB/s" => v * 1e3,
                _ => continue,
            };
            match per_gpu.last_mut() {
                Some(g) => *g += gbps,
                None => per_gpu.push(gbps),
            }
        }
    }
    per_gpu
        .into_iter()
        .filter(|&g| g > 0.0)
        .min_by(f64::total_cmp)
}

/// [`parse_nvlink_status`] of the machine's `nvidia-smi nvlink -s`, `None` when it cannot run.
pub fn nvlink_gbps() -> Option<f64> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["nvlink", "-s"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse_nvlink_status(&String::from_utf8_lossy(&out.stdout))
}
