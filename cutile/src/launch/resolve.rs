//! The cold path's lookup: the process's tileiras (discovered once; its absence is normal on a deployment
//! machine), the compile step handed to the kernel cache, and the mapping of lookup failures to
//! [`LaunchError`]s that name the missing key and how to produce a bundle for it.

use std::sync::{Arc, OnceLock};

use super::error::LaunchError;
use super::plan::{NO_TOOLCHAIN, Plan};
use crate::bundle::{self, BundleSet};
use crate::cache::{CacheError, KernelCache};
use crate::runtime::{self, Device, RuntimeError};
use crate::toolchain::{Tileiras, ToolchainError};

/// The tileiras this process compiles with, discovered and validated on first use.
pub fn toolchain() -> Result<&'static Tileiras, &'static ToolchainError> {
    static TC: OnceLock<Result<Tileiras, ToolchainError>> = OnceLock::new();
    TC.get_or_init(Tileiras::discover).as_ref()
}

/// The tileiras version that goes into this process's cache keys: the discovered one, else
/// [`NO_TOOLCHAIN`].
pub fn key_toolchain_version() -> String {
    match toolchain() {
        Ok(t) => t.version().to_string(),
        Err(_) => NO_TOOLCHAIN.to_string(),
    }
}

/// Why the cache's compile step produced no cubin.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompileFailure {
    /// No usable tileiras; the text says why.
    #[error("{0}")]
    NoToolchain(String),
    #[error(transparent)]
    Failed(LaunchError),
}

fn compile_step(
    plan: &Plan,
    tileiras: Result<&Tileiras, &ToolchainError>,
) -> Result<Vec<u8>, CompileFailure> {
    match tileiras {
        Ok(t) => plan.compile(t).map_err(CompileFailure::Failed),
        Err(e) => Err(CompileFailure::NoToolchain(e.to_string())),
    }
}

/// Maps a failed lookup; `bundles` is how many bundles were searched.
pub(crate) fn map_lookup_error(e: RuntimeError, plan: &Plan, bundles: usize) -> LaunchError {
    if let RuntimeError::Cache(CacheError::Compile { source, .. }) = &e
        && let Some(CompileFailure::NoToolchain(reason)) = source.downcast_ref::<CompileFailure>()
    {
        return LaunchError::NotAvailable {
            key: plan.key.to_string(),
            arch: plan.arch.name().to_string(),
            bundles,
            tileiras: reason.clone(),
        };
    }
    LaunchError::from(e)
}

/// The cubin for `plan` through `cache` (memory → `bundles` → disk → compile with `tileiras`), with the
/// launcher's error mapping. The launcher itself goes through [`runtime::load_kernel`], which runs the
/// same chain on the process-wide cache and bundles; this form serves tools and tests.
pub fn resolve_cubin(
    cache: &KernelCache,
    bundles: &BundleSet,
    plan: &Plan,
    tileiras: Result<&Tileiras, &ToolchainError>,
) -> Result<Arc<[u8]>, LaunchError> {
    cache
        .get_or_resolve(&plan.key, bundles, || compile_step(plan, tileiras))
        .map_err(|e| map_lookup_error(RuntimeError::Cache(e), plan, bundles.len()))
}

/// Loads the kernel of `plan` on `device` through the process-wide lookup chain.
pub(crate) fn load(device: &Device, plan: &Plan) -> Result<runtime::Kernel, LaunchError> {
    runtime::load_kernel(device, &plan.key, plan.entry(), || {
        compile_step(plan, toolchain())
    })
    .map_err(|e| map_lookup_error(e, plan, bundle::global().len()))
}
