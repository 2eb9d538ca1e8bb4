//! The indexed tables (String, Type, Constant, debug attributes): interning on the writer side, the
//! count / offsets / data layout on both sides, and the reader's allocation budget.
//!
//! Layout: count (varint); padding to the offset width; `count` little-endian offsets relative to the data area;
//! the concatenated items. Item *i* runs from `off[i]` to `off[i+1]`, the last one to the end of the buffer.

use super::error::ReadError;
use super::varint::{Cursor, pad_to, write_varint};
use std::collections::HashMap;

/// Items deduplicated by their encoded bytes, numbered in first-intern order (as cuTile numbers them).
#[derive(Debug, Default)]
pub(crate) struct Interner {
    ids: HashMap<Vec<u8>, u32>,
    items: Vec<Vec<u8>>,
}

impl Interner {
    pub(crate) fn intern(&mut self, bytes: Vec<u8>) -> u32 {
        if let Some(&id) = self.ids.get(&bytes) {
            return id;
        }
        let id = self.items.len() as u32;
        self.ids.insert(bytes.clone(), id);
        self.items.push(bytes);
        id
    }
    pub(crate) fn items(&self) -> &[Vec<u8>] {
        &self.items
    }
}

/// Serialize a table with `width`-byte offsets (4 or 8).
pub(crate) fn write_table(out: &mut Vec<u8>, items: &[Vec<u8>], width: usize) {
    write_varint(out, items.len() as u64);
    pad_to(out, width);
    let mut off: u64 = 0;
    for it in items {
        out.extend_from_slice(&off.to_le_bytes()[..width]);
        off += it.len() as u64;
    }
    for it in items {
        out.extend_from_slice(it);
    }
}

/// One table item: its absolute file offset and bytes.
pub(crate) type Item<'a> = (usize, &'a [u8]);

/// Parse a table that occupies the rest of `cur`.
pub(crate) fn parse_table<'a>(
    cur: &mut Cursor<'a>,
    width: usize,
) -> Result<Vec<Item<'a>>, ReadError> {
    let n = cur.count(width, "table item")?;
    cur.align(width)?;
    let mut offs = Vec::with_capacity(n);
    for _ in 0..n {
        let at = cur.offset();
        let off = if width == 8 {
            cur.u64_le()?
        } else {
            cur.u32_le()? as u64
        };
        offs.push((at, off));
    }
    let data_base = cur.offset();
    let data = cur.rest();
    let mut items = Vec::with_capacity(n);
    for i in 0..n {
        let (at, start) = offs[i];
        let end = offs.get(i + 1).map_or(data.len() as u64, |&(_, e)| e);
        if start > end || end > data.len() as u64 {
            return Err(ReadError::new(
                at,
                format!(
                    "item {i} spans {start}..{end}, outside the {} data bytes",
                    data.len()
                ),
            ));
        }
        let (s, e) = (start as usize, end as usize);
        items.push((data_base + s, &data[s..e]));
    }
    Ok(items)
}

/// Caps what the reader materializes (cloned types, strings, constant data) at a multiple of the input size, so
/// that a small malicious file whose items reference each other many times cannot make it allocate absurdly.
#[derive(Debug)]
pub(crate) struct Budget {
    left: u64,
}

impl Budget {
    pub(crate) fn for_input(len: usize) -> Budget {
        Budget {
            left: 16 * len as u64 + (1 << 16),
        }
    }
    pub(crate) fn charge(&mut self, units: u64) -> Result<(), String> {
        if units > self.left {
            return Err(
                "the file expands to far more data than its size allows (items referenced too many times)"
                    .into(),
            );
        }
        self.left -= units;
        Ok(())
    }
}
