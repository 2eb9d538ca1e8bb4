//! From a cache key to a launchable function: the lookup chain (memory → registered bundles → disk cache →
//! compile, through [`KernelCache::lookup`]) plus a per-device memo of loaded functions.
//!
//! The warm path is one mutex-guarded hash lookup: a function once loaded for (device, key, entry name)
//! is kept for the life of the process, like the modules of the CUDA runtime API. This chain lives here,
//! above the runtime, so that `cutile::runtime` knows nothing of keys, caches or bundles.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::error::LaunchError;
use crate::bundle;
use crate::cache::{CacheError, KernelCache, StepError};
use crate::key::CacheKey;
use crate::runtime::{CuFunction, CuModule, Device};

type MemoKey = (usize, [u8; 32], String);

fn memo() -> &'static Mutex<HashMap<MemoKey, CuFunction>> {
    static MEMO: OnceLock<Mutex<HashMap<MemoKey, CuFunction>>> = OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// Returns the function `entry` of the cubin for `key` on `device`, loading it on first use through
/// memory → registered bundles → disk cache → `compile` (see [`KernelCache::get_or_resolve`]).
pub fn load_kernel<E, F>(
    device: &Device,
    key: &CacheKey,
    entry: &str,
    compile: F,
) -> Result<CuFunction, LaunchError>
where
    F: FnOnce() -> Result<Vec<u8>, E>,
    E: std::error::Error + Send + Sync + 'static,
{
    load_with(device, key, entry, || compile().map_err(StepError::Failed))
}

/// [`load_kernel`] with a compile step that may report that there is no compiler: a miss then fails
/// with [`LaunchError::NotAvailable`].
pub(crate) fn load_with<E, F>(
    device: &Device,
    key: &CacheKey,
    entry: &str,
    compile: F,
) -> Result<CuFunction, LaunchError>
where
    F: FnOnce() -> Result<Vec<u8>, StepError<E>>,
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
        return Err(LaunchError::KeyArchMismatch {
            key: key.to_string(),
            key_arch: key.arch().to_string(),
            device_arch: device.arch(),
        });
    }
    let bundles = bundle::global();
    let cubin = KernelCache::global()
        .and_then(|cache| cache.lookup(key, Some(bundles), compile))
        .map_err(|e| lookup_error(e, key, bundles.len()))?
        .cubin;
    let function = CuModule::from_cubin(device, &cubin)?.kernel(entry)?;
    // Two threads may both load on a cold start; the first insert wins and the other module is dropped.
    let mut memo = memo().lock().unwrap_or_else(|p| p.into_inner());
    Ok(memo.entry(memo_key).or_insert(function).clone())
}

/// Maps a failed lookup of `key`; `bundles` is how many bundles were searched.
pub(crate) fn lookup_error(e: CacheError, key: &CacheKey, bundles: usize) -> LaunchError {
    match e {
        CacheError::NoCompiler { key: shown, reason } => LaunchError::NotAvailable {
            key: shown,
            arch: key.arch().to_string(),
            bundles,
            tileiras: reason,
        },
        e => LaunchError::Cache(e),
    }
}
