//! Compiling a ready bytecode module through the kernel cache, keyed by the module's own bytes: for
//! tools that compile modules outside a launch (`cargo xtask kernels`, the tests' compile checks), so an
//! identical module compiled twice in one run, or in an earlier run with the same cache directory,
//! reaches tileiras once. Launches keep their own keys ([`super::plan`]); these entries never collide
//! with them (their kernel part is [`BYTECODE_KERNEL`]).

use std::sync::Arc;

use crate::cache::{CacheError, CacheKey, KernelCache, KeyParts, Origin, to_hex};
use crate::toolchain::{CompileRequest, Tileiras};

/// The kernel part of a bytecode-keyed entry.
pub const BYTECODE_KERNEL: &str = "cutile.bytecode-module";

/// The cache key of `bytecode` compiled with `tileiras` under `request`: the module's BLAKE3 hash, the
/// arch, the tileiras version and every compile option (the request's debug form, libraries included).
pub fn bytecode_key(tileiras: &Tileiras, bytecode: &[u8], request: &CompileRequest) -> CacheKey {
    let hash = to_hex(blake3::hash(bytecode).as_bytes());
    let options = format!("{request:?}");
    let version = tileiras.version().to_string();
    CacheKey::new(KeyParts {
        kernel: BYTECODE_KERNEL,
        source_hash: &hash,
        specialization: "",
        arch: request.arch.name(),
        tileiras_version: &version,
        options: &options,
    })
}

/// Compiles `bytecode` for `request` through the process-wide kernel cache (memory → disk → tileiras)
/// and says where the cubin came from. A failed compile is not cached.
pub fn compile_bytecode_cached(
    tileiras: &Tileiras,
    bytecode: &[u8],
    request: &CompileRequest,
) -> Result<(Arc<[u8]>, Origin), CacheError> {
    let key = bytecode_key(tileiras, bytecode, request);
    let fetched = KernelCache::global()?.fetch(&key, None, || {
        tileiras.compile(bytecode, request).map(|c| c.bytes)
    })?;
    Ok((fetched.cubin, fetched.origin))
}
