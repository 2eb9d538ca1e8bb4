//! The content-addressed disk layer: one verified file per key, atomic writes, a lock per entry across
//! processes, and size-bounded LRU eviction.
//!
//! Layout: `<dir>/<first two hex digits>/<key hex>.entry` (format in [`super::entry`]), with a sibling
//! `<key hex>.lock` used with `File::lock` so that two processes missing the same key compile it once.
//! Reads refresh the entry's modification time, which is what eviction orders by.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::entry::{self, EntryError};
use super::error::CacheError;
use crate::key::CacheKey;

const ENTRY_EXT: &str = "entry";
const LOCK_EXT: &str = "lock";
const TEMP_PREFIX: &str = ".tmp-";
/// Temp files older than this are leftovers of a crashed writer.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// The result of reading one entry.
#[derive(Debug, PartialEq, Eq)]
pub enum DiskRead {
    Hit(Vec<u8>),
    Miss,
    /// The file failed verification and was deleted.
    Corrupt(EntryError),
}

/// One entry file, as listed for eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskEntry {
    pub path: PathBuf,
    pub bytes: u64,
    pub modified: SystemTime,
}

/// What an eviction pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvictReport {
    pub removed_entries: u64,
    pub removed_bytes: u64,
    pub remaining_bytes: u64,
}

/// Holds the cross-process lock of one entry until dropped.
#[derive(Debug)]
pub struct EntryLock {
    /// `None` when the filesystem does not support locking; then nothing is held.
    _file: Option<File>,
}

/// The disk layer rooted at one directory.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl DiskCache {
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> DiskCache {
        DiskCache {
            dir: dir.into(),
            max_bytes,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    fn shard(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(&key.hex()[..2])
    }

    /// Where the entry of `key` lives.
    pub fn entry_path(&self, key: &CacheKey) -> PathBuf {
        self.shard(key).join(format!("{}.{ENTRY_EXT}", key.hex()))
    }

    fn lock_path(&self, key: &CacheKey) -> PathBuf {
        self.shard(key).join(format!("{}.{LOCK_EXT}", key.hex()))
    }

    /// Reads and verifies the entry of `key`. A file that fails verification is deleted.
    pub fn read(&self, key: &CacheKey) -> Result<DiskRead, CacheError> {
        let path = self.entry_path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(DiskRead::Miss),
            Err(e) => return Err(CacheError::io("read", &path, e)),
        };
        match entry::decode(key.id(), &bytes) {
            Ok(payload) => {
                // Refresh the LRU clock; failing to is harmless.
                if let Ok(f) = File::options().append(true).open(&path) {
                    let _ = f.set_modified(SystemTime::now());
                }
                Ok(DiskRead::Hit(payload.to_vec()))
            }
            Err(why) => {
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(CacheError::io("remove corrupt entry", &path, e)),
                }
                Ok(DiskRead::Corrupt(why))
            }
        }
    }

    /// Writes the entry of `key` atomically: a temp file in the same directory, renamed into place, so
    /// readers see either no file or a complete one.
    pub fn write(&self, key: &CacheKey, payload: &[u8]) -> Result<(), CacheError> {
        let shard = self.shard(key);
        fs::create_dir_all(&shard).map_err(|e| CacheError::io("create directory", &shard, e))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(&shard)
            .map_err(|e| CacheError::io("create temp file in", &shard, e))?;
        // No fsync: a torn entry after a crash fails its checksum and is recompiled.
        tmp.write_all(&entry::encode(key.id(), payload))
            .map_err(|e| CacheError::io("write", tmp.path(), e))?;
        let path = self.entry_path(key);
        tmp.persist(&path)
            .map_err(|e| CacheError::io("rename into", &path, e.error))?;
        Ok(())
    }

    /// Takes the cross-process lock of `key`'s entry, blocking until it is free. On filesystems without
    /// lock support the lock is skipped (the worst outcome is a duplicate compile).
    pub fn lock(&self, key: &CacheKey) -> Result<EntryLock, CacheError> {
        let shard = self.shard(key);
        fs::create_dir_all(&shard).map_err(|e| CacheError::io("create directory", &shard, e))?;
        let path = self.lock_path(key);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| CacheError::io("open lock", &path, e))?;
        match file.lock() {
            Ok(()) => Ok(EntryLock { _file: Some(file) }),
            Err(e) if e.kind() == ErrorKind::Unsupported => Ok(EntryLock { _file: None }),
            Err(e) => Err(CacheError::io("lock", &path, e)),
        }
    }

    /// All entry files with their sizes and modification times.
    pub fn entries(&self) -> Result<Vec<DiskEntry>, CacheError> {
        let mut out = Vec::new();
        for shard in read_dir_or_empty(&self.dir)? {
            if !shard.is_dir() {
                continue;
            }
            for path in read_dir_or_empty(&shard)? {
                if path.extension().is_some_and(|e| e == ENTRY_EXT)
                    && let Ok(meta) = fs::metadata(&path)
                {
                    out.push(DiskEntry {
                        bytes: meta.len(),
                        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                        path,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Total bytes of all entries.
    pub fn total_bytes(&self) -> Result<u64, CacheError> {
        Ok(self.entries()?.iter().map(|e| e.bytes).sum())
    }

    /// Removes least recently used entries until the total is within the bound; `keep` (the entry just
    /// written) is never removed. Also removes stale temp files of crashed writers.
    pub fn evict(&self, keep: Option<&CacheKey>) -> Result<EvictReport, CacheError> {
        let keep = keep.map(|k| self.entry_path(k));
        let mut entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut report = EvictReport::default();
        if total > self.max_bytes {
            entries.sort_by_key(|e| e.modified);
            for e in entries {
                if total <= self.max_bytes {
                    break;
                }
                if Some(&e.path) == keep.as_ref() {
                    continue;
                }
                match fs::remove_file(&e.path) {
                    Ok(()) => {
                        total -= e.bytes;
                        report.removed_entries += 1;
                        report.removed_bytes += e.bytes;
                        remove_idle_lock(&e.path.with_extension(LOCK_EXT));
                    }
                    // Another process evicted it first.
                    Err(err) if err.kind() == ErrorKind::NotFound => total -= e.bytes,
                    Err(err) => return Err(CacheError::io("evict", &e.path, err)),
                }
            }
        }
        self.remove_stale_temps()?;
        report.remaining_bytes = total;
        Ok(report)
    }

    fn remove_stale_temps(&self) -> Result<(), CacheError> {
        let now = SystemTime::now();
        for shard in read_dir_or_empty(&self.dir)? {
            if !shard.is_dir() {
                continue;
            }
            for path in read_dir_or_empty(&shard)? {
                let is_temp = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(TEMP_PREFIX));
                let stale = fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_TEMP);
                if is_temp && stale {
                    let _ = fs::remove_file(&path);
                }
            }
        }
        Ok(())
    }
}

/// Deletes a lock file nobody holds. A process that opened it just before may still lock the unlinked
/// file; that only risks one duplicate compile, never a bad entry.
fn remove_idle_lock(path: &Path) {
    if let Ok(f) = File::options().write(true).open(path)
        && f.try_lock().is_ok()
    {
        let _ = fs::remove_file(path);
    }
}

fn read_dir_or_empty(dir: &Path) -> Result<Vec<PathBuf>, CacheError> {
    match fs::read_dir(dir) {
        Ok(rd) => Ok(rd.filter_map(|e| e.ok().map(|e| e.path())).collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(CacheError::io("list", dir, e)),
    }
}
