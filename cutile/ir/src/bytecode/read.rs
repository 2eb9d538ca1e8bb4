//! The reader's top level: header, section framing, and the fixed parse order (String, Producer, Type, Constant,
//! Global, Debug, Func) over a [`Reader`] that resolves table ids and charges a materialization budget.

use super::debug::DebugInfo;
use super::error::ReadError;
use super::tables::{Budget, Item, parse_table};
use super::types::{TypeTable, decode_type_table};
use super::varint::Cursor;
use super::{MAGIC, section};
use crate::ir::{Global, Module};
use crate::types::Type;
use crate::version::*;

/// Decoding state shared by all parts of the reader.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    pub(crate) version: Version,
    pub(crate) preview: bool,
    strings: Vec<Item<'a>>,
    types: TypeTable,
    constants: Vec<Item<'a>>,
    pub(crate) budget: Budget,
}

impl Reader<'_> {
    /// Read a string id and resolve it.
    pub(crate) fn string(&mut self, c: &mut Cursor<'_>) -> Result<String, ReadError> {
        let at = c.offset();
        let id = c.varint()?;
        let (_, bytes) = usize::try_from(id)
            .ok()
            .and_then(|i| self.strings.get(i))
            .ok_or_else(|| {
                c.err_at(
                    at,
                    format!(
                        "string id {id} is out of range ({} strings)",
                        self.strings.len()
                    ),
                )
            })?;
        self.budget
            .charge(1 + bytes.len() as u64 / 8)
            .map_err(|m| c.err_at(at, m))?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| c.err_at(at, format!("string {id} is not valid UTF-8")))
    }

    /// Read a type id and resolve it.
    pub(crate) fn ty(&mut self, c: &mut Cursor<'_>) -> Result<Type, ReadError> {
        let at = c.offset();
        let id = c.varint()?;
        self.types
            .get(id, &mut self.budget)
            .map_err(|m| c.err_at(at, m))
    }

    /// Read a constant id and resolve it to the raw dense bytes.
    pub(crate) fn constant(&mut self, c: &mut Cursor<'_>) -> Result<Vec<u8>, ReadError> {
        let at = c.offset();
        let id = c.varint()?;
        let &(base, bytes) = usize::try_from(id)
            .ok()
            .and_then(|i| self.constants.get(i))
            .ok_or_else(|| {
                c.err_at(
                    at,
                    format!(
                        "constant id {id} is out of range ({} constants)",
                        self.constants.len()
                    ),
                )
            })?;
        let mut item = Cursor::new(bytes, base);
        let n = item.varint()?;
        if n != item.remaining() as u64 {
            return Err(item.err(format!(
                "constant {id} declares {n} bytes but holds {}",
                item.remaining()
            )));
        }
        self.budget.charge(1 + n / 8).map_err(|m| c.err_at(at, m))?;
        Ok(item.rest().to_vec())
    }
}

/// The version and preview flag of a bytecode file, from its 12-byte header.
pub fn header_version(bytes: &[u8]) -> Result<(Version, bool), ReadError> {
    let mut c = Cursor::new(bytes, 0);
    let magic = c
        .bytes(8)
        .map_err(|_| c.err("file is shorter than the 12-byte Tile IR header"))?;
    if magic != MAGIC {
        return Err(ReadError::new(
            0,
            "not Tile IR bytecode (bad magic; expected \"\\x7fTileIR\\0\")",
        ));
    }
    let major = c.u8()?;
    let minor = c.u8()?;
    let at = c.offset();
    let tag = u16::from_le_bytes([c.u8()?, c.u8()?]);
    let version = Version::new(major, minor);
    if !version.is_readable() {
        let readable: Vec<String> = Version::READABLE.iter().map(|v| v.to_string()).collect();
        return Err(ReadError::new(
            8,
            format!(
                "unsupported bytecode version {version}; readable versions are {}",
                readable.join(", ")
            ),
        ));
    }
    if tag & !1 != 0 {
        return Err(ReadError::new(
            at,
            format!("header has unrecognized version tag bits ({:#x})", tag & !1),
        ));
    }
    let preview = tag & 1 == 1;
    if preview && version != Version::LATEST {
        return Err(ReadError::new(
            at,
            format!(
                "preview bytecode at version {version} is not readable; preview content is only valid at {}",
                Version::LATEST
            ),
        ));
    }
    Ok((version, preview))
}

/// Decode a bytecode file (13.1–13.5) into a [`Module`].
pub fn read_module(bytes: &[u8]) -> Result<Module, ReadError> {
    read_module_with_version(bytes).map(|(m, _, _)| m)
}

/// Decode a bytecode file and also return its version and preview flag.
pub fn read_module_with_version(bytes: &[u8]) -> Result<(Module, Version, bool), ReadError> {
    let (version, preview) = header_version(bytes)?;
    let sections = split_sections(bytes)?;
    let get = |id: u8| sections[id as usize];

    let cursor = |id: u8| get(id).map(|(base, data)| Cursor::new(data, base));

    let strings = match cursor(section::STRING) {
        Some(mut c) => parse_table(&mut c, 4).map_err(|e| e.within("String section"))?,
        None => vec![],
    };
    let mut budget = Budget::for_input(bytes.len());
    let type_items = match cursor(section::TYPE) {
        Some(mut c) => parse_table(&mut c, 4).map_err(|e| e.within("Type section"))?,
        None => vec![],
    };
    let types = decode_type_table(&type_items, version, preview, &mut budget)
        .map_err(|e| e.within("Type section"))?;
    let constants = match cursor(section::CONSTANT) {
        Some(mut c) => parse_table(&mut c, 8).map_err(|e| e.within("Constant section"))?,
        None => vec![],
    };
    let mut r = Reader {
        version,
        preview,
        strings,
        types,
        constants,
        budget,
    };
    let mut module = Module::new();

    if let Some(mut c) = cursor(section::PRODUCER) {
        let p = r.string(&mut c).map_err(|e| e.within("Producer section"))?;
        c.expect_end("the producer string")
            .map_err(|e| e.within("Producer section"))?;
        module.producer = Some(p);
    }
    if let Some(mut c) = cursor(section::GLOBAL) {
        module.globals = r
            .read_globals(&mut c)
            .map_err(|e| e.within("Global section"))?;
    }
    let debug = match cursor(section::DEBUG) {
        Some(mut c) => r
            .read_debug(&mut c)
            .map_err(|e| e.within("Debug section"))?,
        None => DebugInfo::default(),
    };
    let mut c = cursor(section::FUNC).ok_or_else(|| {
        ReadError::new(
            bytes.len(),
            "the file has no Func section, which is mandatory",
        )
    })?;
    let n = c
        .count(3, "function")
        .map_err(|e| e.within("Func section"))?;
    for i in 0..n {
        let f = r
            .read_function(&mut c, i, &debug)
            .map_err(|e| e.within("Func section"))?;
        module.functions.push(f);
    }
    // nvcc 13.5 (`--tilebc`) pads the Func section's content with 0xCB up to the next section's
    // alignment, inside the section length; such padding is not a function.
    let mut tail = c.clone();
    if tail.rest().iter().all(|&b| b == 0xCB) {
        c = tail;
    }
    c.expect_end("the last function")
        .map_err(|e| e.within("Func section"))?;
    module.debug_attrs = debug.attrs;
    Ok((module, version, preview))
}

type Sections<'a> = [Option<(usize, &'a [u8])>; 8];

/// Walk the section headers after the file header up to the end marker.
fn split_sections(bytes: &[u8]) -> Result<Sections<'_>, ReadError> {
    let mut c = Cursor::new(bytes, 0);
    c.bytes(12)?;
    let mut out: Sections<'_> = [None; 8];
    loop {
        let at = c.offset();
        let head = c
            .u8()
            .map_err(|_| c.err("missing end-of-bytecode marker"))?;
        let id = head & 0x7f;
        let aligned = head & 0x80 != 0;
        if id == section::END {
            if aligned {
                return Err(c.err_at(
                    at,
                    "the end-of-bytecode marker must not carry the alignment bit",
                ));
            }
            c.expect_end("the end-of-bytecode marker")?;
            return Ok(out);
        }
        let name = section::name(id);
        if id as usize >= out.len() {
            return Err(c.err_at(at, format!("unknown section id {id:#x}")));
        }
        let len = c.varint().map_err(|e| e.within(name))?;
        if aligned {
            let a_at = c.offset();
            let align = c.varint().map_err(|e| e.within(name))?;
            if align == 0 || !align.is_power_of_two() || align > 1 << 16 {
                return Err(c
                    .err_at(
                        a_at,
                        format!("section alignment {align} is not a power of two up to 65536"),
                    )
                    .within(name));
            }
            let pad = (align - c.offset() as u64 % align) % align;
            c.bytes(pad as usize).map_err(|e| e.within(name))?;
        }
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= c.remaining())
            .ok_or_else(|| {
                c.err(format!(
                    "section length {len} exceeds remaining data size {}",
                    c.remaining()
                ))
                .within(name)
            })?;
        let base = c.offset();
        let data = c.bytes(len)?;
        if out[id as usize].is_some() {
            return Err(c.err_at(at, format!("duplicate {name}")));
        }
        out[id as usize] = Some((base, data));
    }
}

impl Reader<'_> {
    fn read_globals(&mut self, c: &mut Cursor<'_>) -> Result<Vec<Global>, ReadError> {
        let n = c.count(4, "global")?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let g = self
                .read_global(c)
                .map_err(|e| e.within(format!("global #{i}")))?;
            out.push(g);
        }
        c.expect_end("the last global")?;
        Ok(out)
    }

    fn read_global(&mut self, c: &mut Cursor<'_>) -> Result<Global, ReadError> {
        let name = self.string(c)?;
        let ty = self.ty(c)?;
        let value = self.constant(c)?;
        let alignment = c.varint()?;
        let (private, constant) = if self.version >= V13_3 {
            (c.bool()?, c.varint()?)
        } else {
            (false, 0)
        };
        Ok(Global {
            name,
            ty,
            value,
            alignment,
            private,
            constant,
        })
    }
}
