//! From a cache key to a launchable kernel: the lookup chain plus a per-device memo of loaded kernels.
//!
//! The warm path is one mutex-guarded hash lookup: a kernel once loaded for (device, key, entry name)
//! is kept for the life of the process, like the modules of the CUDA runtime API.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::device::Device;
use super::error::{Result, RuntimeError};
use super::module::{Kernel, Module};
use crate::bundle;
use crate::cache::{CacheKey, KernelCache};

type MemoKey = (usize, [u8; 32], String);

fn memo() -> &'static Mutex<HashMap<MemoKey, Kernel>> {
    static MEMO: OnceLock<Mutex<HashMap<MemoKey, Kernel>>> = OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// Returns the kernel `entry` of the cubin for `key` on `device`, loading it on first use through
/// memory → registered bundles → disk cache → `compile` (see [`KernelCache::get_or_resolve`]).
pub fn load_kernel<E, F>(device: &Device, key: &CacheKey, entry: &str, compile: F) -> Result<Kernel>
where
    F: FnOnce() -> std::result::Result<Vec<u8>, E>,
    E: std::error::Error + Send + Sync + 'static,
{
    let memo_key = (device.ordinal(), *key.id(), entry.to_string());
    if let Some(k) = memo()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&memo_key)
    {
        return Ok(k.clone());
    }
    if key.arch() != device.arch() {
        return Err(RuntimeError::KeyArchMismatch {
            key: key.to_string(),
            key_arch: key.arch().to_string(),
            device_arch: device.arch(),
        });
    }
    let cubin = KernelCache::global()?.get_or_resolve(key, bundle::global(), compile)?;
    let kernel = Module::from_cubin(device, &cubin)?.kernel(entry)?;
    // Two threads may both load on a cold start; the first insert wins and the other module is dropped.
    let mut memo = memo().lock().unwrap_or_else(|p| p.into_inner());
    Ok(memo.entry(memo_key).or_insert(kernel).clone())
}
