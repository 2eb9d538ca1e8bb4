//! The persistent tuning cache: one JSON file mapping a [`TuneKey`](super::TuneKey) id to its winner.
//!
//! Reads tolerate a missing or corrupt file (tuning results are a speed hint, never needed for
//! correctness); writes re-read the file, merge, and replace it atomically, so two processes tuning
//! different classes keep both results.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Version of the file's layout; a file of another version is ignored (and replaced on the next write).
const FORMAT: u32 = 1;

/// What is remembered about one tuned class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    /// Name of the winning configuration.
    pub winner: String,
    /// Name of the default configuration it was compared with.
    pub default: String,
    /// Default time ÷ winner time.
    pub speedup: f64,
    /// Every timed candidate (name, seconds).
    pub timings: Vec<(String, f64)>,
    /// Every candidate the correctness gate or a failure kept out (name, why). Absent in files
    /// written before it was recorded.
    #[serde(default)]
    pub rejected: Vec<(String, String)>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    format: u32,
    entries: BTreeMap<String, TuneEntry>,
}

/// The cache: entries in memory, mirrored to `path` when there is one.
#[derive(Debug)]
pub struct TuneCache {
    path: Option<PathBuf>,
    entries: Mutex<BTreeMap<String, TuneEntry>>,
}

fn read(path: &Path) -> BTreeMap<String, TuneEntry> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<File>(&b).ok())
        .filter(|f| f.format == FORMAT)
        .map(|f| f.entries)
        .unwrap_or_default()
}

impl TuneCache {
    /// The cache backed by `path` (memory only for `None`); loads what the file holds.
    pub fn open(path: Option<PathBuf>) -> TuneCache {
        let entries = path.as_deref().map(read).unwrap_or_default();
        TuneCache {
            path,
            entries: Mutex::new(entries),
        }
    }

    /// The backing file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn get(&self, id: &str) -> Option<TuneEntry> {
        self.lock().get(id).cloned()
    }

    /// Every entry, by id.
    pub fn entries(&self) -> BTreeMap<String, TuneEntry> {
        self.lock().clone()
    }

    /// Records `entry` for `id` and writes the file. A failed write is reported on stderr and otherwise
    /// ignored: the result still holds for this process.
    pub fn put(&self, id: &str, entry: TuneEntry) {
        let mut map = self.lock();
        map.insert(id.to_string(), entry);
        if let Some(path) = &self.path
            && let Err(e) = write(path, &map)
        {
            eprintln!(
                "cutile: could not write the tuning cache {}: {e}",
                path.display()
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, TuneEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn write(path: &Path, ours: &BTreeMap<String, TuneEntry>) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Merge with what other processes wrote since we loaded; our entries win for the same key.
    let mut merged = read(path);
    merged.extend(ours.iter().map(|(k, v)| (k.clone(), v.clone())));
    let file = File {
        format: FORMAT,
        entries: merged,
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
