//! Errors of the kernel cache.

use std::path::PathBuf;
use std::sync::Arc;

use crate::bundle::BundleError;

/// A compile failure shared by every caller waiting on the same key.
pub type SharedError = Arc<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The compile closure failed. Every caller that waited for the same key gets the same error;
    /// downcast `source` to the compiler's error type for details.
    #[error("compiling {key} failed: {source}")]
    Compile { key: String, source: SharedError },

    /// The key reached the compile step on a machine with no compiler ([`StepError::NoCompiler`]); the
    /// reason says why there is none.
    #[error("{key} is not cached and cannot be compiled here: {reason}")]
    NoCompiler { key: String, reason: String },

    /// The compile closure panicked; waiting callers are released with this error.
    #[error("compiling {key} panicked; see the panic message above")]
    CompilePanicked { key: String },

    /// An environment variable has a value the cache cannot use.
    #[error("{var}={value:?} is invalid: expected {expected}")]
    Config {
        var: &'static str,
        value: String,
        expected: &'static str,
    },

    /// A disk operation failed where it cannot be skipped (explicit maintenance calls).
    #[error("kernel cache: {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: Arc<std::io::Error>,
    },

    /// A bundle named in `CUTILE_BUNDLE` could not be loaded.
    #[error(transparent)]
    Bundle(Arc<BundleError>),
}

/// Why a compile step (the closure a lookup runs on a miss) produced no cubin.
#[derive(Debug)]
pub enum StepError<E> {
    /// There is no compiler on this machine; the text says why (e.g. tileiras was not found).
    NoCompiler(String),
    /// The compiler ran and failed.
    Failed(E),
}

impl CacheError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, e: std::io::Error) -> CacheError {
        CacheError::Io {
            op,
            path: path.into(),
            source: Arc::new(e),
        }
    }
}
