//! Scratch memory for ops whose launches pass intermediate results through device memory that is not a
//! user tensor (e.g. the split-row softmax's per-split statistics, the GEMM's 16-byte aligned copies of
//! operands whose strides are not), and zeroed counters for kernels whose blocks count themselves in
//! (the last block of a tile does the tile's final step, [`counters`]).
//!
//! Plans address tensors by operand index, so a scratch buffer is one more [`Operand`] appended after
//! the op's own tensors (a plan may view several regions of it at offsets). [`scratch`] gives it for a
//! real call; planning without a device describes
//! it with [`Operand::described`] instead (same layout facts: contiguous, 256-byte aligned), so AOT
//! bundles hold the keys the launches look up.
//!
//! # Design and lifetime
//!
//! - One grow-only buffer per (device ordinal, stream) pair, in a process-wide map keyed by the raw
//!   stream handle ([`Stream::id`]): two streams never share a buffer, so concurrent streams cannot race
//!   on it, and the launches of one stream use it in stream order (a later call's first pass runs after
//!   an earlier call's last one).
//! - A call allocates only when its stream's buffer is too small (the first call, or a larger shape):
//!   the new buffer is at least twice the old one, so a stream allocates O(log size) times in all. The
//!   hot path takes a mutex and reads the map: no allocation, no free, no synchronization.
//! - Nothing is ever freed: a grown-out buffer is kept (retired) in the map too, because work queued
//!   earlier on the stream, or a captured CUDA graph, may still address it. Buffers live until process
//!   exit (statics are not dropped), so an operand's address stays valid for the whole process.
//! - A raw stream handle may be reused by a stream created after another was destroyed; the op's
//!   [`Pending`](cutile::launch::Pending) guard borrows the stream until its work has finished, so the
//!   old stream's work is done by then and the new stream can take over its buffer.
//! - The allocation (`cuMemAlloc`) is not allowed inside stream capture: make one call of the op before
//!   capturing a graph with it (as for kernel loading).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cutile::runtime::{DeviceBuffer, DevicePointer, Stream};
use cutile_ir::ScalarType;

use super::{OpError, Operand};

/// The buffers of one (device, stream): the current one and the grown-out ones kept alive.
#[derive(Debug, Default)]
struct Slot {
    current: Option<DeviceBuffer>,
    retired: Vec<DeviceBuffer>,
}

/// Which of a stream's buffers: the scratch (arbitrary contents) or the counters (zero between
/// launches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Scratch,
    Counters,
}

type Key = (usize, usize, Kind);

fn pool() -> &'static Mutex<HashMap<Key, Slot>> {
    static POOL: OnceLock<Mutex<HashMap<Key, Slot>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The smallest buffer ever allocated, in bytes (a few rows of statistics fit without growing).
const MIN_BYTES: usize = 64 * 1024;

/// `elems` elements of `dtype` of scratch for work queued on `stream`, as a contiguous rank-1 operand
/// named `name`: the stream's buffer (grown when too small, see the module docs; its base is 256-byte
/// aligned). Its contents are arbitrary; the op must write what it reads, in stream order.
pub fn scratch(
    stream: &Stream,
    name: &'static str,
    dtype: ScalarType,
    elems: i64,
) -> Result<Operand, OpError> {
    pooled(stream, name, dtype, elems, Kind::Scratch)
}

/// `elems` i32 counters for work queued on `stream`, zero when the op's first launch reads them: the
/// stream's counter buffer, zeroed when allocated or grown. The contract of every kernel that uses
/// it: each counter it increments is back at zero when the launch ends (e.g. the last of a tile's
/// blocks resets it), so the next launch on the stream finds zeros again without a memset.
pub fn counters(stream: &Stream, name: &'static str, elems: i64) -> Result<Operand, OpError> {
    pooled(stream, name, ScalarType::I32, elems, Kind::Counters)
}

fn pooled(
    stream: &Stream,
    name: &'static str,
    dtype: ScalarType,
    elems: i64,
    kind: Kind,
) -> Result<Operand, OpError> {
    let elems = elems.max(1);
    let bytes = usize::try_from(elems)
        .ok()
        .and_then(|e| e.checked_mul(dtype.storage_bytes().max(1)))
        .ok_or_else(|| OpError::Unsupported {
            op: "scratch",
            what: format!("{elems} {dtype} elements of scratch exceed the address space"),
        })?;
    let device = stream.device();
    let key = (device.ordinal(), stream.id(), kind);
    let mut pool = pool().lock().unwrap_or_else(|p| p.into_inner());
    let slot = pool.entry(key).or_default();
    let have = slot.current.as_ref().map_or(0, |b| b.len_bytes());
    if have < bytes {
        let grown = bytes.max(have.saturating_mul(2)).max(MIN_BYTES);
        let fresh = match kind {
            Kind::Scratch => DeviceBuffer::alloc(device, grown)?,
            Kind::Counters => {
                let b = DeviceBuffer::zeroed(device, grown)?;
                // The memset runs on the legacy default stream, which a non-blocking stream does
                // not wait for: finish it before the op's launches are queued (once per growth).
                device.synchronize()?;
                b
            }
        };
        if let Some(old) = slot.current.replace(fresh) {
            slot.retired.push(old);
        }
    }
    let ptr = slot.current.as_ref().map_or(0, |b| b.device_ptr());
    Ok(Operand {
        name,
        dtype,
        shape: vec![elems],
        strides: vec![1],
        ptr,
        device: device.ordinal(),
    })
}

/// Bytes of scratch held for `stream` now (current buffer only; 0 before its first use).
pub fn held_bytes(stream: &Stream) -> usize {
    let key = (stream.device().ordinal(), stream.id(), Kind::Scratch);
    let pool = pool().lock().unwrap_or_else(|p| p.into_inner());
    pool.get(&key)
        .and_then(|s| s.current.as_ref())
        .map_or(0, |b| b.len_bytes())
}
