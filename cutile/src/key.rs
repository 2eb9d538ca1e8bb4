//! The kernel cache key: everything that decides a cubin's bytes, hashed once with BLAKE3.

use std::fmt;

/// Identifies one compiled kernel. Two keys are equal exactly when all their parts are, and the
/// [`id`](CacheKey::id) is a BLAKE3 hash over an unambiguous (length-prefixed) encoding of the parts,
/// computed once at construction so lookups on the warm path only hash 32 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    kernel: String,
    source_hash: String,
    specialization: String,
    arch: String,
    tileiras_version: String,
    options: String,
    id: [u8; 32],
}

/// Domain tag of the key encoding; bump it when the encoding or the meaning of a part changes.
const KEY_DOMAIN: &str = "cutile.kernel-cache-key.v1";

/// The parts of a [`CacheKey`], by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyParts<'a> {
    /// Kernel identity, e.g. `"cutile_kernels::elementwise::vadd"`.
    pub kernel: &'a str,
    /// Hash of the kernel's source and of the DSL version (see [`source_hash`]).
    pub source_hash: &'a str,
    /// Specialization: const generics, element types, layout hints, e.g. `"T=f32,TILE=1024"`.
    pub specialization: &'a str,
    /// Target, as tileiras names it: `"sm_90"`.
    pub arch: &'a str,
    /// The tileiras version that compiles (or compiled) it, e.g. `"13.5.37"`.
    pub tileiras_version: &'a str,
    /// Fingerprint of the compile options (opt level, flags, libraries).
    pub options: &'a str,
}

impl CacheKey {
    pub fn new(parts: KeyParts<'_>) -> CacheKey {
        let mut h = blake3::Hasher::new();
        for field in [
            KEY_DOMAIN,
            parts.kernel,
            parts.source_hash,
            parts.specialization,
            parts.arch,
            parts.tileiras_version,
            parts.options,
        ] {
            h.update(&(field.len() as u64).to_le_bytes());
            h.update(field.as_bytes());
        }
        CacheKey {
            kernel: parts.kernel.to_string(),
            source_hash: parts.source_hash.to_string(),
            specialization: parts.specialization.to_string(),
            arch: parts.arch.to_string(),
            tileiras_version: parts.tileiras_version.to_string(),
            options: parts.options.to_string(),
            id: *h.finalize().as_bytes(),
        }
    }

    pub fn parts(&self) -> KeyParts<'_> {
        KeyParts {
            kernel: &self.kernel,
            source_hash: &self.source_hash,
            specialization: &self.specialization,
            arch: &self.arch,
            tileiras_version: &self.tileiras_version,
            options: &self.options,
        }
    }

    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    pub fn source_hash(&self) -> &str {
        &self.source_hash
    }

    pub fn specialization(&self) -> &str {
        &self.specialization
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    pub fn tileiras_version(&self) -> &str {
        &self.tileiras_version
    }

    pub fn options(&self) -> &str {
        &self.options
    }

    /// The 32-byte hash identifying this key.
    pub fn id(&self) -> &[u8; 32] {
        &self.id
    }

    /// The id as 64 lower-case hex digits (the disk cache file name).
    pub fn hex(&self) -> String {
        to_hex(&self.id)
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}] for {} (tileiras {}, options {}, source {}) #{}",
            self.kernel,
            self.specialization,
            self.arch,
            self.tileiras_version,
            self.options,
            short(&self.source_hash),
            &self.hex()[..16]
        )
    }
}

fn short(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The `source_hash` part of a key: BLAKE3 over the kernel's source text and the DSL version, as hex.
pub fn source_hash(source: &[u8], dsl_version: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&(dsl_version.len() as u64).to_le_bytes());
    h.update(dsl_version.as_bytes());
    h.update(source);
    h.finalize().to_hex().to_string()
}
