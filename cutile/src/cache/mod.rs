//! The kernel cache: compiled cubins by [`CacheKey`], in memory and on disk.
//!
//! Lookup order ([`KernelCache::get_or_resolve`]): memory → registered AOT bundles → disk → compile.
//! [`KernelCache::get_or_compile`] is the same without bundles. The compile step is a closure, so this
//! module knows nothing about the toolchain; a step that has no compiler to run says so with
//! [`StepError::NoCompiler`] ([`KernelCache::lookup`]), and the lookup fails with the typed
//! [`CacheError::NoCompiler`] for the caller and every waiter.
//!
//! - Memory: one fill per key at a time across threads (single flight); a hit never calls the closure;
//!   a failure reaches every waiter and is not cached.
//! - Disk ([`DiskCache`]): verified, atomically written entries, a lock per entry across processes,
//!   LRU eviction above a size bound; configured by [`CacheConfig`] (`CUTILE_CACHE=off` disables it).
//!   Disk trouble never fails a lookup: the kernel is compiled and the problem is counted in
//!   [`CacheStats::disk_errors`] and kept in [`KernelCache::last_disk_error`].

mod config;
mod disk;
mod entry;
mod error;
mod flight;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use crate::key::{CacheKey, KeyParts, source_hash, to_hex};
pub use config::{CacheConfig, DEFAULT_MAX_DISK_BYTES, parse_size};
pub use disk::{DiskCache, DiskEntry, DiskRead, EntryLock, EvictReport};
pub use entry::EntryError;
pub use error::{CacheError, SharedError, StepError};

use crate::bundle::BundleSet;
use flight::{Claim, SingleFlight};

/// Where a lookup found its cubin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Memory,
    /// Another thread produced it while this one waited.
    Shared,
    Bundle,
    Disk,
    Compiled,
}

/// A cubin and where it came from.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub cubin: Arc<[u8]>,
    pub origin: Origin,
}

/// Counters since the cache was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub memory_hits: u64,
    pub shared_waits: u64,
    pub bundle_hits: u64,
    pub disk_hits: u64,
    pub compiles: u64,
    pub compile_failures: u64,
    pub corrupt_entries_removed: u64,
    pub evicted_entries: u64,
    pub disk_errors: u64,
}

#[derive(Default)]
struct Counters {
    memory_hits: AtomicU64,
    shared_waits: AtomicU64,
    bundle_hits: AtomicU64,
    disk_hits: AtomicU64,
    compiles: AtomicU64,
    compile_failures: AtomicU64,
    corrupt_entries_removed: AtomicU64,
    evicted_entries: AtomicU64,
    disk_errors: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Memory + optional disk cache of cubins.
pub struct KernelCache {
    memory: SingleFlight,
    disk: Option<DiskCache>,
    counters: Counters,
    last_disk_error: Mutex<Option<CacheError>>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("disk", &self.disk)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl KernelCache {
    pub fn new(config: CacheConfig) -> KernelCache {
        KernelCache {
            memory: SingleFlight::default(),
            disk: config
                .disk_dir
                .map(|dir| DiskCache::new(dir, config.max_disk_bytes)),
            counters: Counters::default(),
            last_disk_error: Mutex::new(None),
        }
    }

    /// The process-wide cache, configured from the environment at first use.
    pub fn global() -> Result<&'static KernelCache, CacheError> {
        static GLOBAL: OnceLock<Result<KernelCache, CacheError>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| CacheConfig::from_env().map(KernelCache::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The disk layer, if enabled.
    pub fn disk(&self) -> Option<&DiskCache> {
        self.disk.as_ref()
    }

    /// memory → disk → `compile`.
    pub fn get_or_compile<E, F>(&self, key: &CacheKey, compile: F) -> Result<Arc<[u8]>, CacheError>
    where
        F: FnOnce() -> Result<Vec<u8>, E>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Ok(self.fetch(key, None, compile)?.cubin)
    }

    /// memory → `bundles` → disk → `compile`.
    pub fn get_or_resolve<E, F>(
        &self,
        key: &CacheKey,
        bundles: &BundleSet,
        compile: F,
    ) -> Result<Arc<[u8]>, CacheError>
    where
        F: FnOnce() -> Result<Vec<u8>, E>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Ok(self.fetch(key, Some(bundles), compile)?.cubin)
    }

    /// The general lookup, also reporting where the cubin came from.
    pub fn fetch<E, F>(
        &self,
        key: &CacheKey,
        bundles: Option<&BundleSet>,
        compile: F,
    ) -> Result<Fetched, CacheError>
    where
        F: FnOnce() -> Result<Vec<u8>, E>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.lookup(key, bundles, || compile().map_err(StepError::Failed))
    }

    /// [`fetch`](Self::fetch) with a compile step that can report that there is no compiler
    /// ([`StepError::NoCompiler`], which fails the lookup with [`CacheError::NoCompiler`]).
    pub fn lookup<E, F>(
        &self,
        key: &CacheKey,
        bundles: Option<&BundleSet>,
        compile: F,
    ) -> Result<Fetched, CacheError>
    where
        F: FnOnce() -> Result<Vec<u8>, StepError<E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let leader = match self.memory.claim(key.id(), || key.to_string()) {
            Claim::Ready(cubin) => {
                bump(&self.counters.memory_hits);
                return Ok(Fetched {
                    cubin,
                    origin: Origin::Memory,
                });
            }
            Claim::Wait(flight) => {
                bump(&self.counters.shared_waits);
                return flight.wait().map(|cubin| Fetched {
                    cubin,
                    origin: Origin::Shared,
                });
            }
            Claim::Lead(leader) => leader,
        };
        let mut origin = Origin::Compiled;
        let outcome = self.fill(key, bundles, compile, &mut origin);
        leader
            .finish(outcome)
            .map(|cubin| Fetched { cubin, origin })
    }

    /// Produces the cubin for a memory miss: bundles, then disk, then the compiler under the entry's
    /// cross-process lock.
    fn fill<E, F>(
        &self,
        key: &CacheKey,
        bundles: Option<&BundleSet>,
        compile: F,
        origin: &mut Origin,
    ) -> Result<Arc<[u8]>, CacheError>
    where
        F: FnOnce() -> Result<Vec<u8>, StepError<E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        if let Some(cubin) = bundles
            .map(|b| b.find_key(key))
            .transpose()
            .map_err(CacheError::Bundle)?
            .flatten()
        {
            bump(&self.counters.bundle_hits);
            *origin = Origin::Bundle;
            return Ok(cubin);
        }
        let Some(disk) = &self.disk else {
            return self.compile(key, compile);
        };
        if let Some(cubin) = self.read_disk(disk, key) {
            *origin = Origin::Disk;
            return Ok(cubin);
        }
        let _lock = match disk.lock(key) {
            Ok(lock) => Some(lock),
            Err(e) => {
                self.disk_error(e);
                None
            }
        };
        // Another process may have compiled it while this one waited for the lock.
        if let Some(cubin) = self.read_disk(disk, key) {
            *origin = Origin::Disk;
            return Ok(cubin);
        }
        let cubin = self.compile(key, compile)?;
        match disk.write(key, &cubin) {
            Ok(()) => match disk.evict(Some(key)) {
                Ok(report) => {
                    self.counters
                        .evicted_entries
                        .fetch_add(report.removed_entries, Ordering::Relaxed);
                }
                Err(e) => self.disk_error(e),
            },
            Err(e) => self.disk_error(e),
        }
        Ok(cubin)
    }

    fn read_disk(&self, disk: &DiskCache, key: &CacheKey) -> Option<Arc<[u8]>> {
        match disk.read(key) {
            Ok(DiskRead::Hit(bytes)) => {
                bump(&self.counters.disk_hits);
                Some(bytes.into())
            }
            Ok(DiskRead::Miss) => None,
            Ok(DiskRead::Corrupt(_)) => {
                bump(&self.counters.corrupt_entries_removed);
                None
            }
            Err(e) => {
                self.disk_error(e);
                None
            }
        }
    }

    fn compile<E, F>(&self, key: &CacheKey, compile: F) -> Result<Arc<[u8]>, CacheError>
    where
        F: FnOnce() -> Result<Vec<u8>, StepError<E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        bump(&self.counters.compiles);
        compile().map(Arc::from).map_err(|e| {
            bump(&self.counters.compile_failures);
            match e {
                StepError::NoCompiler(reason) => CacheError::NoCompiler {
                    key: key.to_string(),
                    reason,
                },
                StepError::Failed(e) => CacheError::Compile {
                    key: key.to_string(),
                    source: Arc::new(e),
                },
            }
        })
    }

    fn disk_error(&self, e: CacheError) {
        bump(&self.counters.disk_errors);
        *self
            .last_disk_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// The most recent disk problem that was worked around, if any.
    pub fn last_disk_error(&self) -> Option<CacheError> {
        self.last_disk_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            memory_hits: get(&c.memory_hits),
            shared_waits: get(&c.shared_waits),
            bundle_hits: get(&c.bundle_hits),
            disk_hits: get(&c.disk_hits),
            compiles: get(&c.compiles),
            compile_failures: get(&c.compile_failures),
            corrupt_entries_removed: get(&c.corrupt_entries_removed),
            evicted_entries: get(&c.evicted_entries),
            disk_errors: get(&c.disk_errors),
        }
    }

    /// Forgets the in-memory layer (disk entries stay).
    pub fn clear_memory(&self) {
        self.memory.clear();
    }
}
