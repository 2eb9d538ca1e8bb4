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

impl CacheError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, e: std::io::Error) -> CacheError {
        CacheError::Io {
            op,
            path: path.into(),
            source: Arc::new(e),
        }
    }
}
