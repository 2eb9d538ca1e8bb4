//! The cold path's lookup: the process's tileiras (discovered once; its absence is normal on a deployment
//! machine), the compile step handed to the kernel cache (which reports a missing tileiras as
//! [`StepError::NoCompiler`]), and [`resolve_cubin`], the lookup for tools and tests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::error::LaunchError;
use super::loader::{load_with, lookup_error};
use super::plan::{NO_TOOLCHAIN, Plan};
use crate::bundle::BundleSet;
use crate::cache::{KernelCache, StepError};
use crate::runtime::{CuFunction, Device};
use crate::toolchain::{SearchEnv, Tileiras, TileirasVersion, ToolchainError, locate};

/// The tileiras this process compiles with, discovered and validated on first use.
pub fn toolchain() -> Result<&'static Tileiras, &'static ToolchainError> {
    static TC: OnceLock<Result<Tileiras, ToolchainError>> = OnceLock::new();
    TC.get_or_init(Tileiras::discover).as_ref()
}

/// The tileiras version that goes into this process's cache keys: that of the tileiras the search
/// finds, else [`NO_TOOLCHAIN`]. Resolved once per process.
///
/// Validating tileiras runs it three times (tens of ms), which a new process with a warm disk cache
/// should not pay before its first launch. So the version is remembered next to the disk cache, in a
/// file named after the executable's path, size and modification time; tileiras itself is validated
/// only when a kernel must actually be compiled ([`toolchain`]).
pub fn key_toolchain_version() -> String {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(resolve_version).clone()
}

fn resolve_version() -> String {
    let Ok(found) = locate(&SearchEnv::from_process()) else {
        return NO_TOOLCHAIN.to_string();
    };
    let memo = version_memo_path(&found.tileiras);
    if let Some(v) = memo
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|v| v.trim().to_string())
        .filter(|v| v.parse::<TileirasVersion>().is_ok())
    {
        return v;
    }
    match toolchain() {
        Ok(t) => {
            let v = t.version().to_string();
            if let Some(p) = memo {
                write_memo(&p, &v);
            }
            v
        }
        Err(_) => NO_TOOLCHAIN.to_string(),
    }
}

/// `<disk cache dir>/tileiras-<hash of path, size, mtime>.version`, when the disk cache is on.
fn version_memo_path(tileiras: &Path) -> Option<PathBuf> {
    let dir = KernelCache::global().ok()?.disk()?.dir().to_path_buf();
    let real = std::fs::canonicalize(tileiras).ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let mut h = blake3::Hasher::new();
    h.update(real.as_os_str().as_encoded_bytes());
    h.update(&meta.len().to_le_bytes());
    h.update(&mtime.to_le_bytes());
    Some(dir.join(format!("tileiras-{}.version", &h.finalize().to_hex()[..16])))
}

/// Best effort: a memo that cannot be written only costs the next process a validation.
fn write_memo(path: &Path, version: &str) {
    use std::io::Write;
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir)
        && tmp.write_all(version.as_bytes()).is_ok()
    {
        let _ = tmp.persist(path);
    }
}

/// The compile step of the launcher's lookups: compile `plan` with `tileiras`, or report that there is none.
fn compile_step(
    plan: &Plan,
    tileiras: Result<&Tileiras, &ToolchainError>,
) -> Result<Vec<u8>, StepError<LaunchError>> {
    match tileiras {
        Ok(t) => plan.compile(t).map_err(StepError::Failed),
        Err(e) => Err(StepError::NoCompiler(e.to_string())),
    }
}

/// The cubin for `plan` through `cache` (memory → `bundles` → disk → compile with `tileiras`), with the
/// launcher's error mapping. The launcher itself goes through [`load_kernel`](super::load_kernel)'s chain,
/// which runs on the process-wide cache and bundles; this form serves tools and tests.
pub fn resolve_cubin(
    cache: &KernelCache,
    bundles: &BundleSet,
    plan: &Plan,
    tileiras: Result<&Tileiras, &ToolchainError>,
) -> Result<Arc<[u8]>, LaunchError> {
    cache
        .lookup(&plan.key, Some(bundles), || compile_step(plan, tileiras))
        .map(|f| f.cubin)
        .map_err(|e| lookup_error(e, &plan.key, bundles.len()))
}

/// Loads the function of `plan` on `device` through the process-wide lookup chain.
pub(crate) fn load(device: &Device, plan: &Plan) -> Result<CuFunction, LaunchError> {
    load_with(device, &plan.key, plan.entry(), || {
        compile_step(plan, toolchain())
    })
}
