//! Finding the tileiras executable: `CUTILE_TILEIRAS`, then the installed toolchain prefix, then
//! `CUDA_TOOLKIT_PATH`/bin and the standard CUDA locations, then `PATH`. Every place looked at is
//! recorded so that a not-found error can list them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::ToolchainError;
use super::layout::{ToolchainLayout, default_install_dir};
pub use super::searched::{SearchSource, SearchedLocation};

/// Env var naming the tileiras executable to use (highest precedence).
pub const ENV_TILEIRAS: &str = "CUTILE_TILEIRAS";

/// Standard CUDA install locations searched after `CUDA_TOOLKIT_PATH`.
pub const STANDARD_CUDA_DIRS: [&str; 2] = ["/usr/local/cuda", "/opt/cuda"];

/// The inputs of the search, captured from the process environment or built by hand (tests, tools
/// that want a different search).
#[derive(Debug, Clone, Default)]
pub struct SearchEnv {
    /// Value of `CUTILE_TILEIRAS`.
    pub tileiras: Option<PathBuf>,
    /// The toolchain install prefix (see [`default_install_dir`]).
    pub install_dir: Option<PathBuf>,
    /// Value of `CUDA_TOOLKIT_PATH`.
    pub cuda_toolkit_path: Option<PathBuf>,
    /// CUDA roots whose `bin` is searched after `CUDA_TOOLKIT_PATH`.
    pub standard_dirs: Vec<PathBuf>,
    /// Value of `PATH`.
    pub path: Option<OsString>,
}

impl SearchEnv {
    /// The search this process would do: its environment and the standard CUDA locations.
    pub fn from_process() -> SearchEnv {
        let set = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        SearchEnv {
            tileiras: set(ENV_TILEIRAS).map(PathBuf::from),
            install_dir: default_install_dir(),
            cuda_toolkit_path: set("CUDA_TOOLKIT_PATH").map(PathBuf::from),
            standard_dirs: STANDARD_CUDA_DIRS.iter().map(PathBuf::from).collect(),
            path: set("PATH"),
        }
    }
}

/// The outcome of a successful search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The tileiras executable chosen.
    pub tileiras: PathBuf,
    /// The rule that found it.
    pub source: SearchSource,
    /// Every location looked at, the winning one last.
    pub searched: Vec<SearchedLocation>,
}

/// Why a candidate path is unusable, or `None` when it is an executable file.
pub(crate) fn unusable_reason(path: &Path) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Err(_) => Some("missing"),
        Ok(m) if !m.is_file() => Some("not a file"),
        Ok(m) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if m.permissions().mode() & 0o111 == 0 {
                    return Some("not executable");
                }
            }
            let _ = m;
            None
        }
    }
}

/// Runs the search order over `env`.
pub fn locate(env: &SearchEnv) -> Result<Located, ToolchainError> {
    let mut searched = Vec::new();

    match &env.tileiras {
        // An explicit choice that is wrong is an error, not a reason to silently use another one.
        Some(p) => {
            if let Some(reason) = unusable_reason(p) {
                return Err(ToolchainError::EnvPathInvalid {
                    path: p.clone(),
                    reason: format!("is {reason}"),
                });
            }
            return Ok(found(searched, SearchSource::EnvTileiras, p.clone()));
        }
        None => searched.push(SearchedLocation {
            source: SearchSource::EnvTileiras,
            path: None,
            outcome: "not set".into(),
        }),
    }

    let mut candidates: Vec<(SearchSource, PathBuf)> = Vec::new();
    match &env.install_dir {
        Some(d) => candidates.push((SearchSource::InstallDir, ToolchainLayout::new(d).tileiras())),
        None => searched.push(SearchedLocation {
            source: SearchSource::InstallDir,
            path: None,
            outcome: "no CUTILE_TOOLCHAIN_DIR, XDG_CACHE_HOME or HOME".into(),
        }),
    }
    match &env.cuda_toolkit_path {
        Some(d) => candidates.push((
            SearchSource::CudaToolkitPath,
            d.join("bin").join("tileiras"),
        )),
        None => searched.push(SearchedLocation {
            source: SearchSource::CudaToolkitPath,
            path: None,
            outcome: "not set".into(),
        }),
    }
    for d in &env.standard_dirs {
        candidates.push((
            SearchSource::StandardLocation,
            d.join("bin").join("tileiras"),
        ));
    }
    match &env.path {
        Some(p) => {
            for d in std::env::split_paths(p).filter(|d| !d.as_os_str().is_empty()) {
                candidates.push((SearchSource::Path, d.join("tileiras")));
            }
        }
        None => searched.push(SearchedLocation {
            source: SearchSource::Path,
            path: None,
            outcome: "not set".into(),
        }),
    }

    for (source, path) in candidates {
        match unusable_reason(&path) {
            None => return Ok(found(searched, source, path)),
            Some(reason) => searched.push(SearchedLocation {
                source,
                path: Some(path),
                outcome: reason.into(),
            }),
        }
    }
    Err(ToolchainError::NotFound { searched })
}

fn found(mut searched: Vec<SearchedLocation>, source: SearchSource, path: PathBuf) -> Located {
    searched.push(SearchedLocation {
        source,
        path: Some(path.clone()),
        outcome: "found".into(),
    });
    Located {
        tileiras: path,
        source,
        searched,
    }
}
