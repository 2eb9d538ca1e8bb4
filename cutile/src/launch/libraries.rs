//! Tile libraries (`.tilelib`) that kernels calling foreign functions are linked with: the
//! [`TileLibrarySpec`] a user configures (per [`CompileOptions`](super::CompileOptions) or as process-wide
//! defaults), and their resolution for one compile — canonical paths, sorted and de-duplicated, passed to
//! tileiras as `--preview=simt -l …`, and a fingerprint over every library file's, dependency's content and
//! every setting for the cache key.
//!
//! A kernel without foreign calls links nothing (its key and compile do not change with the configured
//! libraries); one with foreign calls and no library fails with [`LaunchError::NoTileLibrary`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::LaunchError;
use crate::cache::to_hex;

/// A tile library to link: its file, files it depends on (linked after it), and settings.
///
/// Settings are part of the cache key; tileiras 13.5 has no documented option to pass them on, so they are
/// not handed to it (they identify a build configuration of the library for caching).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileLibrarySpec {
    path: PathBuf,
    dependencies: Vec<PathBuf>,
    settings: BTreeMap<String, String>,
}

impl TileLibrarySpec {
    /// The library at `path` (a `.tilelib`).
    pub fn new(path: impl Into<PathBuf>) -> TileLibrarySpec {
        TileLibrarySpec {
            path: path.into(),
            dependencies: vec![],
            settings: BTreeMap::new(),
        }
    }
    /// A library file this one needs (linked too).
    pub fn dependency(mut self, path: impl Into<PathBuf>) -> TileLibrarySpec {
        self.dependencies.push(path.into());
        self
    }
    /// A setting (`key = value`); a later value for the same key replaces the earlier one.
    pub fn setting(mut self, key: impl Into<String>, value: impl Into<String>) -> TileLibrarySpec {
        self.settings.insert(key.into(), value.into());
        self
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn dependencies(&self) -> &[PathBuf] {
        &self.dependencies
    }
    pub fn settings(&self) -> &BTreeMap<String, String> {
        &self.settings
    }
}

static DEFAULTS: RwLock<Vec<TileLibrarySpec>> = RwLock::new(Vec::new());
/// Bumped on every change of the defaults, so in-memory launch keys change with them.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Replace the process-wide default tile libraries (linked into every kernel with foreign calls, in
/// addition to the options' own).
pub fn set_default_tile_libraries(libraries: Vec<TileLibrarySpec>) {
    if let Ok(mut d) = DEFAULTS.write() {
        *d = libraries;
    }
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Add one process-wide default tile library.
pub fn add_default_tile_library(library: TileLibrarySpec) {
    if let Ok(mut d) = DEFAULTS.write() {
        d.push(library);
    }
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The process-wide default tile libraries.
pub fn default_tile_libraries() -> Vec<TileLibrarySpec> {
    DEFAULTS.read().map(|d| d.clone()).unwrap_or_default()
}

pub(crate) fn defaults_generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// The libraries of one compile, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedLibraries {
    /// Canonical library specs, sorted, without duplicates.
    pub specs: Vec<TileLibrarySpec>,
    /// Files to pass with `-l`, in order (libraries, then dependencies not already listed).
    pub link: Vec<PathBuf>,
    /// Content fingerprint for the cache key.
    pub fingerprint: String,
}

fn canonical(path: &Path) -> Result<PathBuf, LaunchError> {
    std::fs::canonicalize(path).map_err(|source| LaunchError::TileLibrary {
        path: path.to_path_buf(),
        source,
    })
}

fn content_hash(path: &Path) -> Result<String, LaunchError> {
    let bytes = std::fs::read(path).map_err(|source| LaunchError::TileLibrary {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(to_hex(blake3::hash(&bytes).as_bytes()))
}

/// Resolve `options` followed by the process defaults: canonicalize, sort, de-duplicate, hash contents.
pub fn resolve(options: &[TileLibrarySpec]) -> Result<ResolvedLibraries, LaunchError> {
    let mut specs = vec![];
    for s in options.iter().cloned().chain(default_tile_libraries()) {
        let mut deps = s
            .dependencies
            .iter()
            .map(|d| canonical(d))
            .collect::<Result<Vec<_>, _>>()?;
        deps.sort();
        deps.dedup();
        specs.push(TileLibrarySpec {
            path: canonical(&s.path)?,
            dependencies: deps,
            settings: s.settings,
        });
    }
    specs.sort();
    specs.dedup();
    let mut link: Vec<PathBuf> = specs.iter().map(|s| s.path.clone()).collect();
    link.dedup();
    for s in &specs {
        for d in &s.dependencies {
            if !link.contains(d) {
                link.push(d.clone());
            }
        }
    }
    let mut parts = vec![];
    for s in &specs {
        let mut p = format!("{}#{}", s.path.display(), content_hash(&s.path)?);
        for d in &s.dependencies {
            p.push_str(&format!(" dep {}#{}", d.display(), content_hash(d)?));
        }
        for (k, v) in &s.settings {
            p.push_str(&format!(" {k}={v:?}"));
        }
        parts.push(p);
    }
    Ok(ResolvedLibraries {
        specs,
        link,
        fingerprint: parts.join("; "),
    })
}

/// The foreign functions a module calls (its extern declarations).
pub fn foreign_functions(module: &cutile_ir::Module) -> Vec<String> {
    module
        .functions
        .iter()
        .filter(|f| matches!(f.kind, cutile_ir::FunctionKind::ExternDecl { .. }))
        .map(|f| f.name.clone())
        .collect()
}
