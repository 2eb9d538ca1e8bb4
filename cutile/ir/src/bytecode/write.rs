//! The writer's top level: the shared interning state ([`Writer`]), the header, and the sections in cuTile's
//! order (Func, Global, Producer, Constant, Debug, Type, String, end marker) with cuTile's alignments.

use super::error::WriteError;
use super::tables::{Interner, write_table};
use super::varint::{PAD_BYTE, write_varint};
use super::{MAGIC, section};
use crate::ir::Module;
use crate::types::{ScalarType, Type};
use crate::version::Version;

/// Encoding state shared by all parts of the writer: target version, the tables being built, the debug strings
/// interned so far and the per-function debug-id lists.
#[derive(Debug)]
pub(crate) struct Writer<'m> {
    pub(crate) module: &'m Module,
    pub(crate) version: Version,
    /// Preview content was written (sets the header flag).
    pub(crate) preview: bool,
    pub(crate) strings: Interner,
    pub(crate) types: Interner,
    pub(crate) constants: Interner,
    /// How many of `module.debug_attrs` have been encoded (their strings interned), in id order.
    pub(crate) debug_done: usize,
    pub(crate) debug_items: Vec<Vec<u8>>,
    /// Per function: its own debug id, then one per op in pre-order.
    pub(crate) debug_lists: Vec<Vec<u64>>,
}

impl<'m> Writer<'m> {
    fn new(module: &'m Module, version: Version) -> Writer<'m> {
        let mut w = Writer {
            module,
            version,
            preview: false,
            strings: Interner::default(),
            types: Interner::default(),
            constants: Interner::default(),
            debug_done: 0,
            debug_items: vec![],
            debug_lists: vec![],
        };
        // cuTile pins i1 = 0 and i32 = 1 (its Integer attributes reference i32 by id); do the same so that files
        // read from cuTile are reproduced exactly. Scalars always encode, so these cannot fail.
        let _ = w.type_id(&Type::Scalar(ScalarType::I1));
        let _ = w.type_id(&Type::Scalar(ScalarType::I32));
        w
    }

    pub(crate) fn string_id(&mut self, s: &str) -> u32 {
        self.strings.intern(s.as_bytes().to_vec())
    }

    pub(crate) fn write_string(&mut self, out: &mut Vec<u8>, s: &str) {
        let id = self.string_id(s);
        write_varint(out, id as u64);
    }

    /// Constant-table id of a raw dense buffer (item = byte length varint + bytes).
    pub(crate) fn constant_id(&mut self, data: &[u8]) -> u32 {
        let mut item = Vec::with_capacity(data.len() + 2);
        write_varint(&mut item, data.len() as u64);
        item.extend_from_slice(data);
        self.constants.intern(item)
    }

    /// Record preview content; an error unless the target is the latest version.
    pub(crate) fn note_preview(&mut self, what: impl FnOnce() -> String) -> Result<(), WriteError> {
        if self.version != Version::LATEST {
            return Err(WriteError::PreviewNeedsLatest {
                what: what(),
                version: self.version,
                latest: Version::LATEST,
            });
        }
        self.preview = true;
        Ok(())
    }

    /// An error unless the target version is at least `since`.
    pub(crate) fn require(
        &self,
        since: Version,
        what: impl FnOnce() -> String,
    ) -> Result<(), WriteError> {
        if self.version < since {
            return Err(WriteError::TooNew {
                what: what(),
                since,
                version: self.version,
            });
        }
        Ok(())
    }
}

/// Encode `module` as Tile IR bytecode of `version` (13.4 or 13.5).
///
/// Sets the header's preview flag when the module has preview (SIMT) content, which is only allowed at 13.5.
/// Fails, naming the op and slot, when something cannot be represented at `version` or the module is malformed
/// (a missing required attribute or operand, a value used outside its scope, a dangling debug reference).
pub fn write_module(module: &Module, version: Version) -> Result<Vec<u8>, WriteError> {
    if !version.is_writable() {
        let writable: Vec<String> = Version::WRITABLE.iter().map(|v| v.to_string()).collect();
        return Err(WriteError::UnsupportedVersion {
            version,
            writable: writable.join(", "),
        });
    }
    let mut w = Writer::new(module, version);
    if module.needs_preview() {
        w.note_preview(|| "the module's foreign declarations or calls".to_string())?;
    }

    let mut func = vec![];
    write_varint(&mut func, module.functions.len() as u64);
    for (i, f) in module.functions.iter().enumerate() {
        w.write_function(f, i, &mut func)
            .map_err(|e| e.in_function(&f.name))?;
    }
    // Debug attributes no op referenced still get their strings, after everything the functions interned.
    w.flush_debug(crate::ir::DebugRef(module.debug_attrs.len() as u64), || {
        "the debug attribute table".into()
    })?;

    let global = if module.globals.is_empty() {
        None
    } else {
        Some(w.global_section()?)
    };
    let producer = module.producer.as_ref().map(|p| {
        let mut b = vec![];
        w.write_string(&mut b, p);
        b
    });

    let mut constant = vec![];
    write_table(&mut constant, w.constants.items(), 8);
    let debug = w.debug_section();
    let mut types = vec![];
    write_table(&mut types, w.types.items(), 4);
    let mut strings = vec![];
    write_table(&mut strings, w.strings.items(), 4);

    let mut out = Vec::with_capacity(
        64 + func.len() + constant.len() + debug.len() + types.len() + strings.len(),
    );
    out.extend_from_slice(&MAGIC);
    out.push(version.major);
    out.push(version.minor);
    let tag: u16 = if w.preview { 1 } else { 0 };
    out.extend_from_slice(&tag.to_le_bytes());
    write_section(&mut out, section::FUNC, 8, &func);
    if let Some(g) = global {
        write_section(&mut out, section::GLOBAL, 1, &g);
    }
    if let Some(p) = producer {
        write_section(&mut out, section::PRODUCER, 1, &p);
    }
    write_section(&mut out, section::CONSTANT, 8, &constant);
    write_section(&mut out, section::DEBUG, 8, &debug);
    write_section(&mut out, section::TYPE, 4, &types);
    write_section(&mut out, section::STRING, 4, &strings);
    out.push(section::END);
    Ok(out)
}

/// Section header (id, length, optional alignment), padding measured from the file start, payload.
fn write_section(out: &mut Vec<u8>, id: u8, align: usize, payload: &[u8]) {
    out.push(id | if align > 1 { 0x80 } else { 0 });
    write_varint(out, payload.len() as u64);
    if align > 1 {
        write_varint(out, align as u64);
        while !out.len().is_multiple_of(align) {
            out.push(PAD_BYTE);
        }
    }
    out.extend_from_slice(payload);
}

impl Writer<'_> {
    /// Intern the name, type and initializer of the global called `name` (no-op if there is none).
    pub(crate) fn intern_global(&mut self, name: &str) -> Result<(), WriteError> {
        let module = self.module;
        if let Some(g) = module.globals.iter().find(|g| g.name == name) {
            self.string_id(&g.name);
            self.type_id(&g.ty)?;
            self.constant_id(&g.value);
        }
        Ok(())
    }

    /// Global section payload: count, then per global name, type, constant, alignment, and (13.3+) visibility
    /// byte and `constant` varint.
    fn global_section(&mut self) -> Result<Vec<u8>, WriteError> {
        let module = self.module;
        let mut b = vec![];
        write_varint(&mut b, module.globals.len() as u64);
        for g in &module.globals {
            self.write_string(&mut b, &g.name);
            let t = self
                .type_id(&g.ty)
                .map_err(|e| WriteError::Invalid(format!("global `{}`: {e}", g.name)))?;
            write_varint(&mut b, t as u64);
            let c = self.constant_id(&g.value);
            write_varint(&mut b, c as u64);
            write_varint(&mut b, g.alignment);
            b.push(g.private as u8);
            write_varint(&mut b, g.constant);
        }
        Ok(b)
    }
}
