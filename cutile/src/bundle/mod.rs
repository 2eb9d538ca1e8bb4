//! Ahead-of-time kernel bundles: many cubins in one verified file, loadable with no compiler present.
//!
//! A bundle is made on any machine with tileiras ([`BundleWriter`]) for a declared set of
//! specializations and architectures, and opened where the kernels run ([`Bundle::open`]). Registered
//! bundles ([`register`], or the `CUTILE_BUNDLE=path[:path…]` variable) are consulted by the kernel
//! lookup chain after the in-memory cache and before the disk cache and the compiler (see
//! `cutile::cache::KernelCache::get_or_resolve`).
//!
//! Each entry records the full cache key (kernel, source hash, specialization, arch, tileiras version,
//! options fingerprint, key hex) and the cubin, with a checksum. Reading never panics on malformed
//! input: every length and offset is checked before use.

mod format;
mod registry;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

pub use registry::{BundleSet, ENV_VAR, global, register};

use crate::key::CacheKey;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error("bundle {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("malformed bundle: {reason}")]
    Malformed { reason: String },
    #[error(
        "bundle format version {found} is not supported (this build reads version {supported})"
    )]
    UnsupportedVersion { found: u32, supported: u32 },
    #[error("bundle entry {kernel}[{specialization}] for {arch}: cubin checksum mismatch")]
    Checksum {
        kernel: String,
        specialization: String,
        arch: String,
    },
    #[error("bundle {path}: {source}")]
    InFile {
        path: PathBuf,
        source: Box<BundleError>,
    },
    #[error(
        "kernel {kernel}[{specialization}] is in the bundle for {present:?} but not for {requested}; \
         rebuild the bundle with {requested} in its architecture list"
    )]
    WrongArch {
        kernel: String,
        specialization: String,
        requested: String,
        present: Vec<String>,
    },
    #[error(
        "kernel {kernel} is in the bundle, but not specialization {requested}; it has {present:?}"
    )]
    SpecializationNotFound {
        kernel: String,
        requested: String,
        present: Vec<String>,
    },
    #[error("kernel {kernel} is not in the bundle; it has {present:?}")]
    KernelNotFound {
        kernel: String,
        present: Vec<String>,
    },
    #[error("bundle already has {kernel}[{specialization}] for {arch}")]
    Duplicate {
        kernel: String,
        specialization: String,
        arch: String,
    },
}

/// One cubin of a bundle and the key it was compiled for.
#[derive(Debug, Clone)]
pub struct BundleEntry {
    key: CacheKey,
    range: std::ops::Range<usize>,
}

impl BundleEntry {
    /// The full cache key: kernel, source hash, specialization, arch, tileiras version, options.
    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    pub fn kernel(&self) -> &str {
        self.key.kernel()
    }

    pub fn specialization(&self) -> &str {
        self.key.specialization()
    }

    pub fn arch(&self) -> &str {
        self.key.arch()
    }

    pub fn cubin_len(&self) -> usize {
        self.range.len()
    }
}

/// A verified bundle in memory.
pub struct Bundle {
    bytes: Vec<u8>,
    entries: Vec<BundleEntry>,
    path: Option<PathBuf>,
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle")
            .field("path", &self.path)
            .field("entries", &self.entries.len())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl Bundle {
    /// Reads and verifies a bundle file.
    pub fn open(path: impl AsRef<Path>) -> Result<Bundle, BundleError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| BundleError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut bundle = Bundle::from_bytes(bytes).map_err(|e| BundleError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })?;
        bundle.path = Some(path.to_path_buf());
        Ok(bundle)
    }

    /// Verifies a bundle held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Bundle, BundleError> {
        let entries = format::decode(&bytes)?;
        let mut seen = HashSet::new();
        for k in entries.iter().map(BundleEntry::key) {
            if !seen.insert((k.kernel(), k.specialization(), k.arch())) {
                return Err(duplicate(k));
            }
        }
        Ok(Bundle {
            bytes,
            entries,
            path: None,
        })
    }

    /// The file it was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn entries(&self) -> &[BundleEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The cubin bytes of an entry of this bundle.
    pub fn cubin(&self, entry: &BundleEntry) -> &[u8] {
        self.bytes.get(entry.range.clone()).unwrap_or_default()
    }

    /// The entry for `kernel` / `specialization` / `arch`, or an error saying what the bundle has instead.
    pub fn find_entry(
        &self,
        kernel: &str,
        specialization: &str,
        arch: &str,
    ) -> Result<&BundleEntry, BundleError> {
        let of_kernel: Vec<&BundleEntry> = self
            .entries
            .iter()
            .filter(|e| e.kernel() == kernel)
            .collect();
        if of_kernel.is_empty() {
            return Err(BundleError::KernelNotFound {
                kernel: kernel.to_string(),
                present: sorted_unique(self.entries.iter().map(|e| e.kernel())),
            });
        }
        let of_spec: Vec<&BundleEntry> = of_kernel
            .iter()
            .copied()
            .filter(|e| e.specialization() == specialization)
            .collect();
        if of_spec.is_empty() {
            return Err(BundleError::SpecializationNotFound {
                kernel: kernel.to_string(),
                requested: specialization.to_string(),
                present: sorted_unique(of_kernel.iter().map(|e| e.specialization())),
            });
        }
        of_spec
            .iter()
            .copied()
            .find(|e| e.arch() == arch)
            .ok_or_else(|| BundleError::WrongArch {
                kernel: kernel.to_string(),
                specialization: specialization.to_string(),
                requested: arch.to_string(),
                present: sorted_unique(of_spec.iter().map(|e| e.arch())),
            })
    }

    /// The cubin for `kernel` / `specialization` / `arch`.
    pub fn find(
        &self,
        kernel: &str,
        specialization: &str,
        arch: &str,
    ) -> Result<&[u8], BundleError> {
        Ok(self.cubin(self.find_entry(kernel, specialization, arch)?))
    }

    /// The cubin compiled for `key`, ignoring the tileiras version (any compiler's cubin for the same
    /// source, specialization, arch and options will do). `None` if absent or stale.
    pub fn find_key(&self, key: &CacheKey) -> Option<&[u8]> {
        let e = self
            .find_entry(key.kernel(), key.specialization(), key.arch())
            .ok()?;
        let k = e.key();
        (k.source_hash() == key.source_hash() && k.options() == key.options())
            .then(|| self.cubin(e))
    }
}

fn sorted_unique<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = items.map(str::to_string).collect();
    v.sort();
    v.dedup();
    v
}

fn duplicate(k: &CacheKey) -> BundleError {
    BundleError::Duplicate {
        kernel: k.kernel().to_string(),
        specialization: k.specialization().to_string(),
        arch: k.arch().to_string(),
    }
}

/// Collects cubins and writes them as one bundle.
#[derive(Debug, Default)]
pub struct BundleWriter {
    entries: Vec<(CacheKey, Vec<u8>)>,
}

impl BundleWriter {
    pub fn new() -> BundleWriter {
        BundleWriter::default()
    }

    /// Adds the cubin compiled for `key`. A second entry for the same kernel, specialization and arch
    /// is an error.
    pub fn add(&mut self, key: &CacheKey, cubin: Vec<u8>) -> Result<(), BundleError> {
        if self.entries.iter().any(|(k, _)| {
            k.kernel() == key.kernel()
                && k.specialization() == key.specialization()
                && k.arch() == key.arch()
        }) {
            return Err(duplicate(key));
        }
        self.entries.push((key.clone(), cubin));
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bundle file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        format::encode(&self.entries)
    }

    /// Writes the bundle to `path` atomically (temp file in the same directory, then rename).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), BundleError> {
        use std::io::Write;
        let path = path.as_ref();
        let io = |source| BundleError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        tmp.write_all(&self.to_bytes()).map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }
}
