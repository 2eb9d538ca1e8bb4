//! The on-disk entry format: a fixed header, then the cubin.
//!
//! ```text
//! offset size
//!      0    8  magic "CUTILEKC"
//!      8    4  format version (u32 LE)
//!     12    4  reserved, 0
//!     16   32  key id (BLAKE3 of the cache key)
//!     48    8  payload length (u64 LE)
//!     56   32  BLAKE3 of the payload
//!     88    …  payload
//! ```
//! An entry is accepted only when every field checks out and the file is exactly header + payload.

pub const MAGIC: &[u8; 8] = b"CUTILEKC";
pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 88;

/// Why a disk entry was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("entry is {len} bytes, shorter than the {HEADER_LEN}-byte header")]
    Truncated { len: usize },
    #[error("bad magic")]
    BadMagic,
    #[error("format version {found}, expected {FORMAT_VERSION}")]
    Version { found: u32 },
    #[error("entry belongs to another key")]
    KeyMismatch,
    #[error("payload length {declared} does not match the {actual} bytes present")]
    Length { declared: u64, actual: usize },
    #[error("payload checksum mismatch")]
    Checksum,
}

/// Header + payload for `key_id`.
pub fn encode(key_id: &[u8; 32], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(key_id);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(payload).as_bytes());
    out.extend_from_slice(payload);
    out
}

/// Verifies `bytes` as the entry of `key_id` and returns its payload.
pub fn decode<'a>(key_id: &[u8; 32], bytes: &'a [u8]) -> Result<&'a [u8], EntryError> {
    if bytes.len() < HEADER_LEN {
        return Err(EntryError::Truncated { len: bytes.len() });
    }
    let (header, payload) = bytes.split_at(HEADER_LEN);
    if &header[0..8] != MAGIC {
        return Err(EntryError::BadMagic);
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version != FORMAT_VERSION {
        return Err(EntryError::Version { found: version });
    }
    if &header[16..48] != key_id {
        return Err(EntryError::KeyMismatch);
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&header[48..56]);
    let declared = u64::from_le_bytes(len);
    if declared != payload.len() as u64 {
        return Err(EntryError::Length {
            declared,
            actual: payload.len(),
        });
    }
    if blake3::hash(payload).as_bytes() != &header[56..88] {
        return Err(EntryError::Checksum);
    }
    Ok(payload)
}
