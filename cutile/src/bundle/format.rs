//! The bundle file format. All integers little-endian.
//!
//! ```text
//! header (64 bytes)
//!      0   8  magic "CUTILEBN"
//!      8   4  format version (u32)
//!     12   4  entry count (u32)
//!     16   8  index length in bytes (u64)
//!     24   8  data length in bytes (u64)
//!     32  32  BLAKE3 of the index
//! index: per entry
//!          7 strings, each u32 length + UTF-8: kernel, source hash, specialization, arch,
//!          tileiras version, options fingerprint, cache key hex
//!          u64 payload offset (from the start of the data region), u64 payload length,
//!          32-byte BLAKE3 of the payload
//! data: the payloads, back to back in index order
//! ```
//! The reader requires the file to be exactly header + index + data, the index to be consumed
//! exactly, the payloads to tile the data region in order, every checksum to match, and each entry's
//! key hex to equal the hash of its fields. So every byte of a valid bundle is checked by something,
//! and any single changed byte is rejected.

use super::{BundleEntry, BundleError};
use crate::key::{CacheKey, KeyParts};

pub const MAGIC: &[u8; 8] = b"CUTILEBN";
pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 64;

/// Encodes `entries` (key, payload) as a bundle file.
pub(crate) fn encode(entries: &[(CacheKey, Vec<u8>)]) -> Vec<u8> {
    let mut index = Vec::new();
    let mut offset = 0u64;
    for (key, payload) in entries {
        let p = key.parts();
        let hex = key.hex();
        for s in [
            p.kernel,
            p.source_hash,
            p.specialization,
            p.arch,
            p.tileiras_version,
            p.options,
            hex.as_str(),
        ] {
            index.extend_from_slice(&(s.len() as u32).to_le_bytes());
            index.extend_from_slice(s.as_bytes());
        }
        index.extend_from_slice(&offset.to_le_bytes());
        index.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        index.extend_from_slice(blake3::hash(payload).as_bytes());
        offset += payload.len() as u64;
    }
    let mut out = Vec::with_capacity(HEADER_LEN + index.len() + offset as usize);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&(index.len() as u64).to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(blake3::hash(&index).as_bytes());
    out.extend_from_slice(&index);
    for (_, payload) in entries {
        out.extend_from_slice(payload);
    }
    out
}

/// A bounds-checked little-endian reader.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], BundleError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| malformed(format!("{what} runs past the end of the index")))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> Result<u32, BundleError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64, BundleError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }
    fn string(&mut self, what: &str) -> Result<&'a str, BundleError> {
        let n = self.u32(what)? as usize;
        std::str::from_utf8(self.take(n, what)?)
            .map_err(|_| malformed(format!("{what} is not UTF-8")))
    }
}

fn malformed(reason: impl Into<String>) -> BundleError {
    BundleError::Malformed {
        reason: reason.into(),
    }
}

fn header_u64(bytes: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Decodes and fully verifies a bundle; payload ranges are absolute offsets into `bytes`.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<BundleEntry>, BundleError> {
    if bytes.len() < HEADER_LEN {
        return Err(malformed(format!(
            "{} bytes is shorter than the {HEADER_LEN}-byte header",
            bytes.len()
        )));
    }
    if &bytes[0..8] != MAGIC {
        return Err(malformed("bad magic: not a cutile bundle"));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != FORMAT_VERSION {
        return Err(BundleError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let count = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
    let (index_len, data_len) = (header_u64(bytes, 16), header_u64(bytes, 24));
    let expected = (HEADER_LEN as u128) + index_len as u128 + data_len as u128;
    if expected != bytes.len() as u128 {
        return Err(malformed(format!(
            "header declares {expected} bytes in all, the file has {}",
            bytes.len()
        )));
    }
    let index_end = HEADER_LEN + index_len as usize;
    let index = &bytes[HEADER_LEN..index_end];
    if blake3::hash(index).as_bytes() != &bytes[32..64] {
        return Err(malformed("index checksum mismatch"));
    }

    let mut r = Reader {
        bytes: index,
        at: 0,
    };
    // Each entry needs at least 7 length words and 48 bytes of offsets and checksum; this bounds the
    // allocation below by the actual index size.
    if count > index.len() / (7 * 4 + 48) {
        return Err(malformed(format!(
            "{count} entries cannot fit in a {}-byte index",
            index.len()
        )));
    }
    let mut entries = Vec::with_capacity(count);
    let mut next = 0u64;
    for i in 0..count {
        let what = |f: &str| format!("entry {i}: {f}");
        let kernel = r.string(&what("kernel"))?;
        let source_hash = r.string(&what("source hash"))?;
        let specialization = r.string(&what("specialization"))?;
        let arch = r.string(&what("arch"))?;
        let tileiras_version = r.string(&what("tileiras version"))?;
        let options = r.string(&what("options"))?;
        let key_hex = r.string(&what("key"))?;
        let offset = r.u64(&what("offset"))?;
        let len = r.u64(&what("length"))?;
        let checksum = r.take(32, &what("checksum"))?;
        if offset != next || offset.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(malformed(format!(
                "entry {i}: payload at {offset}+{len} does not follow the previous one in the \
                 {data_len}-byte data region"
            )));
        }
        next = offset + len;
        let start = index_end + offset as usize;
        let range = start..start + len as usize;
        if blake3::hash(&bytes[range.clone()]).as_bytes() != checksum {
            return Err(BundleError::Checksum {
                kernel: kernel.to_string(),
                specialization: specialization.to_string(),
                arch: arch.to_string(),
            });
        }
        let key = CacheKey::new(KeyParts {
            kernel,
            source_hash,
            specialization,
            arch,
            tileiras_version,
            options,
        });
        if key.hex() != key_hex {
            return Err(malformed(format!(
                "entry {i} ({kernel} for {arch}): stored key {key_hex} is not the hash of its fields"
            )));
        }
        entries.push(BundleEntry { key, range });
    }
    if r.at != index.len() {
        return Err(malformed(format!(
            "{} unused bytes after the last index entry",
            index.len() - r.at
        )));
    }
    if next != data_len {
        return Err(malformed(format!(
            "payloads cover {next} of the {data_len}-byte data region"
        )));
    }
    Ok(entries)
}
