//! The Debug section (§1.10): per-function lists of debug-attribute ids (the function's location, then one per
//! op in pre-order) and the debug-attribute table (ids from 1). The writer interns the strings of debug
//! attributes in id order, just before the first function or op that refers to them, which is the order in
//! which cuTile creates them; the reader hands the ids out to functions and ops.

use super::error::{ReadError, WriteError};
use super::read::Reader;
use super::tables::{Item, parse_table, write_table};
use super::varint::{Cursor, pad_to, write_varint};
use super::write::Writer;
use crate::ir::{DebugAttr, DebugRef};
use crate::version::V13_5;

mod tag {
    pub const COMPILE_UNIT: u8 = 1;
    pub const FILE: u8 = 2;
    pub const LEXICAL_BLOCK: u8 = 3;
    pub const LOC: u8 = 4;
    pub const SUBPROGRAM: u8 = 5;
    pub const CALL_SITE: u8 = 6;
}

impl Writer<'_> {
    /// Encode (interning their strings) every debug attribute up to id `upto`; errors if `upto` dangles.
    pub(crate) fn flush_debug(
        &mut self,
        upto: DebugRef,
        what: impl FnOnce() -> String,
    ) -> Result<(), WriteError> {
        let module = self.module;
        let attrs = &module.debug_attrs;
        if upto.0 > attrs.len() as u64 {
            return Err(WriteError::BadDebugRef {
                what: what(),
                id: upto.0,
                len: attrs.len(),
            });
        }
        while (self.debug_done as u64) < upto.0 {
            let i = self.debug_done;
            let bytes = self.encode_debug_attr(&attrs[i], i + 1)?;
            self.debug_items.push(bytes);
            self.debug_done += 1;
        }
        Ok(())
    }

    fn encode_debug_attr(&mut self, a: &DebugAttr, id: usize) -> Result<Vec<u8>, WriteError> {
        let len = self.module.debug_attrs.len();
        let r = |x: &DebugRef, b: &mut Vec<u8>| -> Result<(), WriteError> {
            if x.0 > len as u64 {
                return Err(WriteError::BadDebugRef {
                    what: format!("debug attribute {id}"),
                    id: x.0,
                    len,
                });
            }
            write_varint(b, x.0);
            Ok(())
        };
        let mut b = vec![];
        match a {
            DebugAttr::CompileUnit { file } => {
                b.push(tag::COMPILE_UNIT);
                r(file, &mut b)?;
            }
            DebugAttr::File { name, dir } => {
                b.push(tag::FILE);
                self.write_string(&mut b, name);
                self.write_string(&mut b, dir);
            }
            DebugAttr::LexicalBlock {
                scope,
                file,
                line,
                col,
            } => {
                b.push(tag::LEXICAL_BLOCK);
                r(scope, &mut b)?;
                r(file, &mut b)?;
                write_varint(&mut b, *line);
                write_varint(&mut b, *col);
            }
            DebugAttr::Loc {
                scope,
                filename,
                line,
                col,
            } => {
                b.push(tag::LOC);
                r(scope, &mut b)?;
                self.write_string(&mut b, filename);
                write_varint(&mut b, *line);
                write_varint(&mut b, *col);
            }
            DebugAttr::Subprogram {
                file,
                line,
                name,
                linkage_name,
                compile_unit,
                scope_line,
                flags,
            } => {
                b.push(tag::SUBPROGRAM);
                r(file, &mut b)?;
                write_varint(&mut b, *line);
                self.write_string(&mut b, name);
                self.write_string(&mut b, linkage_name);
                r(compile_unit, &mut b)?;
                write_varint(&mut b, *scope_line);
                if self.version >= V13_5 {
                    write_varint(&mut b, *flags);
                } else if *flags != 0 {
                    self.require(V13_5, || {
                        format!("debug subprogram flags (debug attribute {id})")
                    })?;
                }
            }
            DebugAttr::CallSite { callee, caller } => {
                b.push(tag::CALL_SITE);
                r(callee, &mut b)?;
                r(caller, &mut b)?;
            }
        }
        Ok(b)
    }

    /// The section payload; a one-byte dummy attribute when the table is empty (the reference decoder fails on
    /// empty tables).
    pub(crate) fn debug_section(&self) -> Vec<u8> {
        let mut b = vec![];
        write_varint(&mut b, self.debug_lists.len() as u64);
        pad_to(&mut b, 4);
        let mut start: u32 = 0;
        for l in &self.debug_lists {
            b.extend_from_slice(&start.to_le_bytes());
            start += l.len() as u32;
        }
        write_varint(&mut b, start as u64);
        pad_to(&mut b, 8);
        for id in self.debug_lists.iter().flatten() {
            b.extend_from_slice(&id.to_le_bytes());
        }
        if self.debug_items.is_empty() {
            write_table(&mut b, &[vec![0]], 4);
        } else {
            write_table(&mut b, &self.debug_items, 4);
        }
        b
    }
}

/// The decoded Debug section.
#[derive(Debug, Default)]
pub(crate) struct DebugInfo {
    /// Per function-table debug index (the function entry's `loc` − 1): its id list.
    pub(crate) lists: Vec<Vec<u64>>,
    pub(crate) attrs: Vec<DebugAttr>,
    /// Whether the file had a Debug section at all.
    pub(crate) present: bool,
}

/// Hands out one function's debug ids in pre-order and checks they match its op count.
#[derive(Debug)]
pub(crate) struct DebugFeed<'d> {
    list: Option<&'d [u64]>,
    next: usize,
    num_attrs: usize,
}

impl<'d> DebugFeed<'d> {
    /// The feed for the function whose entry says `loc`; no Debug section or `loc` 0 means all unknown.
    pub(crate) fn new(
        info: &'d DebugInfo,
        loc: u64,
        c: &Cursor<'_>,
        at: usize,
    ) -> Result<DebugFeed<'d>, ReadError> {
        let list = if !info.present || loc == 0 {
            None
        } else {
            let l = usize::try_from(loc - 1)
                .ok()
                .and_then(|i| info.lists.get(i))
                .ok_or_else(|| {
                    c.err_at(
                        at,
                        format!("function debug index {loc} exceeds the {} functions of the Debug section", info.lists.len()),
                    )
                })?;
            Some(l.as_slice())
        };
        Ok(DebugFeed {
            list,
            next: 0,
            num_attrs: info.attrs.len(),
        })
    }

    /// The next id (the function's own first, then ops in pre-order).
    pub(crate) fn next(&mut self, at: usize) -> Result<DebugRef, ReadError> {
        let Some(list) = self.list else {
            return Ok(DebugRef(0));
        };
        let id = *list.get(self.next).ok_or_else(|| {
            ReadError::new(
                at,
                format!(
                    "the Debug section lists only {} locations for this function",
                    list.len()
                ),
            )
        })?;
        self.next += 1;
        if id > self.num_attrs as u64 {
            return Err(ReadError::new(
                at,
                format!(
                    "debug attribute id {id} is out of range ({} attributes)",
                    self.num_attrs
                ),
            ));
        }
        Ok(DebugRef(id))
    }

    /// Fail if the Debug section listed more locations than the function has ops.
    pub(crate) fn finish(&self, at: usize) -> Result<(), ReadError> {
        match self.list {
            Some(l) if l.len() != self.next => Err(ReadError::new(
                at,
                format!(
                    "the Debug section lists {} locations but the function has {} (itself and its ops)",
                    l.len(),
                    self.next
                ),
            )),
            _ => Ok(()),
        }
    }
}

impl Reader<'_> {
    pub(crate) fn read_debug(&mut self, c: &mut Cursor<'_>) -> Result<DebugInfo, ReadError> {
        let nf = c.count(4, "function")?;
        c.align(4)?;
        let starts = (0..nf).map(|_| c.u32_le()).collect::<Result<Vec<_>, _>>()?;
        let total = c.count(8, "debug index")?;
        c.align(8)?;
        let ids = (0..total)
            .map(|_| c.u64_le())
            .collect::<Result<Vec<_>, _>>()?;
        let mut lists = Vec::with_capacity(nf);
        for i in 0..nf {
            let s = starts[i] as usize;
            let e = starts.get(i + 1).map_or(total, |&e| e as usize);
            if s > e || e > total {
                return Err(c.err(format!(
                    "function {i}'s debug indices {s}..{e} are outside 0..{total}"
                )));
            }
            lists.push(ids[s..e].to_vec());
        }
        let items = parse_table(c, 4).map_err(|e| e.within("debug attribute table"))?;
        // cuTile's placeholder for an empty table: one item that is a single zero byte.
        let attrs = if items.len() == 1 && items[0].1 == [0] {
            vec![]
        } else {
            let n = items.len();
            items
                .iter()
                .enumerate()
                .map(|(i, it)| {
                    self.read_debug_attr(it, n)
                        .map_err(|e| e.within(format!("debug attribute {}", i + 1)))
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(DebugInfo {
            lists,
            attrs,
            present: true,
        })
    }

    fn read_debug_attr(&mut self, item: &Item<'_>, n: usize) -> Result<DebugAttr, ReadError> {
        let mut c = Cursor::new(item.1, item.0);
        let r = |c: &mut Cursor<'_>| -> Result<DebugRef, ReadError> {
            let at = c.offset();
            let x = c.varint()?;
            if x > n as u64 {
                return Err(c.err_at(
                    at,
                    format!("debug reference {x} is out of range ({n} attributes)"),
                ));
            }
            Ok(DebugRef(x))
        };
        let at = c.offset();
        let a = match c.u8()? {
            tag::COMPILE_UNIT => DebugAttr::CompileUnit { file: r(&mut c)? },
            tag::FILE => DebugAttr::File {
                name: self.string(&mut c)?,
                dir: self.string(&mut c)?,
            },
            tag::LEXICAL_BLOCK => DebugAttr::LexicalBlock {
                scope: r(&mut c)?,
                file: r(&mut c)?,
                line: c.varint()?,
                col: c.varint()?,
            },
            tag::LOC => DebugAttr::Loc {
                scope: r(&mut c)?,
                filename: self.string(&mut c)?,
                line: c.varint()?,
                col: c.varint()?,
            },
            tag::SUBPROGRAM => DebugAttr::Subprogram {
                file: r(&mut c)?,
                line: c.varint()?,
                name: self.string(&mut c)?,
                linkage_name: self.string(&mut c)?,
                compile_unit: r(&mut c)?,
                scope_line: c.varint()?,
                flags: if self.version >= V13_5 {
                    c.varint()?
                } else {
                    0
                },
            },
            tag::CALL_SITE => DebugAttr::CallSite {
                callee: r(&mut c)?,
                caller: r(&mut c)?,
            },
            t => return Err(c.err_at(at, format!("unknown debug attribute tag {t}"))),
        };
        c.expect_end("the debug attribute")?;
        Ok(a)
    }
}
