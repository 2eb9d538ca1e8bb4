//! What the tileiras search looked at: the rule ([`SearchSource`]) and each place with its outcome
//! ([`SearchedLocation`]). A leaf of the toolchain module, so that both the search (`discover`) and its
//! not-found error (`error`) can name them without depending on each other.

use std::fmt;
use std::path::PathBuf;

/// Which rule of the search order a location belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchSource {
    /// `$CUTILE_TILEIRAS`.
    EnvTileiras,
    /// The toolchain prefix from `$CUTILE_TOOLCHAIN_DIR` or the cache directory.
    InstallDir,
    /// `$CUDA_TOOLKIT_PATH/bin`.
    CudaToolkitPath,
    /// `/usr/local/cuda/bin`, `/opt/cuda/bin`.
    StandardLocation,
    /// A directory of `$PATH`.
    Path,
}

impl fmt::Display for SearchSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SearchSource::EnvTileiras => "$CUTILE_TILEIRAS",
            SearchSource::InstallDir => "installed toolchain",
            SearchSource::CudaToolkitPath => "$CUDA_TOOLKIT_PATH",
            SearchSource::StandardLocation => "standard CUDA location",
            SearchSource::Path => "$PATH",
        })
    }
}

/// One place the search looked at and what it found there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchedLocation {
    pub source: SearchSource,
    /// The candidate path; `None` when the variable behind this rule is unset.
    pub path: Option<PathBuf>,
    /// "found", "missing", "not executable", "not set", ...
    pub outcome: String,
}

impl fmt::Display for SearchedLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}: {} ({})", self.source, p.display(), self.outcome),
            None => write!(f, "{}: {}", self.source, self.outcome),
        }
    }
}
