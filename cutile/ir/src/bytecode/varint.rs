//! Primitive encodings (unsigned LEB128 varints, zigzag signed varints, little-endian fixed-width integers,
//! `0xCB` padding) and `Cursor`, the bounds-checked reader every decoder uses.

use super::error::ReadError;

/// The padding byte between a section header and its aligned payload, and inside tables.
pub const PAD_BYTE: u8 = 0xCB;

/// Append `x` as an unsigned LEB128 varint.
pub fn write_varint(buf: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        buf.push((x as u8 & 0x7f) | 0x80);
        x >>= 7;
    }
    buf.push(x as u8);
}

/// Zigzag-map a signed value so that small magnitudes get short varints.
pub fn zigzag(x: i64) -> u64 {
    ((x << 1) ^ (x >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Append `x` as a zigzag varint.
pub fn write_signed_varint(buf: &mut Vec<u8>, x: i64) {
    write_varint(buf, zigzag(x));
}

/// Decode one varint at the start of `bytes`: the value and the number of bytes it took.
pub fn read_varint(bytes: &[u8]) -> Result<(u64, usize), ReadError> {
    let mut c = Cursor::new(bytes, 0);
    let v = c.varint()?;
    Ok((v, c.pos))
}

/// Append `0xCB` until `buf.len()` is a multiple of `align` (alignment is measured from the buffer start).
pub(crate) fn pad_to(buf: &mut Vec<u8>, align: usize) {
    while !buf.len().is_multiple_of(align) {
        buf.push(PAD_BYTE);
    }
}

/// A count followed by little-endian i64s (tile shapes, tensor-view shapes and strides).
pub(crate) fn write_i64_list(buf: &mut Vec<u8>, xs: &[i64]) {
    write_varint(buf, xs.len() as u64);
    for x in xs {
        buf.extend_from_slice(&x.to_le_bytes());
    }
}

/// A count followed by little-endian i32s (view tile shapes, dim maps, DenseI32Array).
pub(crate) fn write_i32_list(buf: &mut Vec<u8>, xs: &[i32]) {
    write_varint(buf, xs.len() as u64);
    for x in xs {
        buf.extend_from_slice(&x.to_le_bytes());
    }
}

/// A bounds-checked reader over one buffer (the file, a section payload or a table item) that reports errors
/// with absolute file offsets. Alignment is measured from the start of the buffer, as the format requires.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    /// Absolute file offset of `data[0]`.
    base: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8], base: usize) -> Cursor<'a> {
        Cursor { data, pos: 0, base }
    }
    /// Absolute file offset of the next byte.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    /// An error at the current position.
    pub(crate) fn err(&self, message: impl Into<String>) -> ReadError {
        ReadError::new(self.offset(), message)
    }
    /// An error at an earlier absolute offset.
    pub(crate) fn err_at(&self, offset: usize, message: impl Into<String>) -> ReadError {
        ReadError::new(offset, message)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ReadError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or_else(|| self.err("unexpected end of data"))?;
        self.pos += 1;
        Ok(b)
    }

    /// A one-byte boolean (0 or 1).
    pub(crate) fn bool(&mut self) -> Result<bool, ReadError> {
        let at = self.offset();
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.err_at(at, format!("expected a boolean byte (0 or 1), found {b}"))),
        }
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "{n} bytes needed but only {} remain",
                self.remaining()
            )));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Split off the next `n` bytes as their own cursor (alignment inside it is relative to its start).
    pub(crate) fn sub(&mut self, n: usize) -> Result<Cursor<'a>, ReadError> {
        let base = self.offset();
        Ok(Cursor::new(self.bytes(n)?, base))
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.data[self.pos..];
        self.pos = self.data.len();
        s
    }

    pub(crate) fn varint(&mut self) -> Result<u64, ReadError> {
        let start = self.offset();
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            let bits = (b & 0x7f) as u64;
            if i == 9 && bits > 1 {
                return Err(self.err_at(start, "varint does not fit in 64 bits"));
            }
            value |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.err_at(start, "varint longer than 10 bytes"))
    }

    pub(crate) fn signed_varint(&mut self) -> Result<i64, ReadError> {
        Ok(unzigzag(self.varint()?))
    }

    /// A count of items that each take at least `min_item_bytes`: rejected when the rest of the buffer cannot
    /// hold that many, so that no allocation or loop is driven by an absurd count.
    pub(crate) fn count(&mut self, min_item_bytes: usize, what: &str) -> Result<usize, ReadError> {
        let at = self.offset();
        let n = self.varint()?;
        let max = (self.remaining() / min_item_bytes.max(1)) as u64;
        if n > max {
            return Err(self.err_at(
                at,
                format!(
                    "{what} count {n} exceeds what the remaining {} bytes can hold",
                    self.remaining()
                ),
            ));
        }
        Ok(n as usize)
    }

    pub(crate) fn u32_le(&mut self) -> Result<u32, ReadError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64_le(&mut self) -> Result<u64, ReadError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub(crate) fn i32_le(&mut self) -> Result<i32, ReadError> {
        Ok(self.u32_le()? as i32)
    }
    pub(crate) fn i64_le(&mut self) -> Result<i64, ReadError> {
        Ok(self.u64_le()? as i64)
    }

    pub(crate) fn i64_list(&mut self, what: &str) -> Result<Vec<i64>, ReadError> {
        let n = self.count(8, what)?;
        (0..n).map(|_| self.i64_le()).collect()
    }
    pub(crate) fn i32_list(&mut self, what: &str) -> Result<Vec<i32>, ReadError> {
        let n = self.count(4, what)?;
        (0..n).map(|_| self.i32_le()).collect()
    }

    /// Skip padding up to a multiple of `align`, measured from the start of this buffer.
    pub(crate) fn align(&mut self, align: usize) -> Result<(), ReadError> {
        let pad = (align - self.pos % align) % align;
        self.bytes(pad).map(|_| ())
    }

    /// Fail unless every byte was consumed.
    pub(crate) fn expect_end(&self, what: &str) -> Result<(), ReadError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self.err(format!(
                "{} unexpected trailing bytes after {what}",
                self.remaining()
            )))
        }
    }
}
