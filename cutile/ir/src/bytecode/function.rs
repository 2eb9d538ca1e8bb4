//! Function-table entries (§1.7, §4.1, §4.3): kernels (`entry`), preview extern declarations and extern
//! implementations, with the ≤13.4 and 13.5 flag layouts.

use super::debug::{DebugFeed, DebugInfo};
use super::error::{ReadError, WriteError};
use super::ops::{FnReader, FnWriter, ValueScope};
use super::read::Reader;
use super::varint::{Cursor, write_varint};
use super::write::Writer;
use crate::attr::{Attribute, OptimizationHints};
use crate::ir::{Block, Function, FunctionKind};
use crate::types::Type;
use crate::version::*;

mod flag {
    pub const PRIVATE: u8 = 1 << 0;
    pub const KERNEL: u8 = 1 << 1;
    /// ≤13.4: optimization hints follow.
    pub const HAS_HINTS: u8 = 1 << 2;
    /// 13.5: bits 2–3 hold the form (0 normal, 1 extern implementation, 2 testing, 3 reserved).
    pub const FORM_SHIFT: u8 = 2;
    pub const FORM_EXTERN_IMPL: u8 = 1;
}

impl Writer<'_> {
    /// Encode the function-table entry of `f`, the `index`-th function (its debug index is `index + 1`).
    pub(crate) fn write_function(
        &mut self,
        f: &Function,
        index: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), WriteError> {
        let v = self.version;
        self.flush_debug(f.loc, || "the function location".into())?;
        let mut debug = vec![f.loc.0];
        self.write_string(out, &f.name);
        let sig = self.type_id(&f.signature())?;
        write_varint(out, sig as u64);
        let private = if f.private { flag::PRIVATE } else { 0 };
        match &f.kind {
            FunctionKind::Entry { hints } => {
                let with_hints = v >= V13_5 || !hints.by_arch.is_empty();
                let flags = private
                    | flag::KERNEL
                    | if v < V13_5 && with_hints {
                        flag::HAS_HINTS
                    } else {
                        0
                    };
                out.push(flags);
                write_varint(out, index as u64 + 1);
                if with_hints {
                    self.write_tagged(out, &Attribute::OptimizationHints(hints.clone()))?;
                }
                if v >= V13_5 {
                    self.write_tagged(out, &Attribute::Array(f.arg_attrs.clone()))?;
                } else if !f.arg_attrs.is_empty() {
                    self.require(V13_5, || "function argument attributes".into())?;
                }
                let body = f.body.as_ref().ok_or_else(|| {
                    WriteError::Invalid("a kernel (entry) must have a body".into())
                })?;
                if body.args.len() != f.param_types.len() {
                    return Err(WriteError::Invalid(format!(
                        "the body has {} arguments but the signature {} parameters",
                        body.args.len(),
                        f.param_types.len()
                    )));
                }
                let mut cx = FnWriter {
                    f,
                    scope: ValueScope::new(f.values.len()),
                    debug,
                };
                for (i, (a, t)) in body.args.iter().zip(&f.param_types).enumerate() {
                    let what = || format!("parameter {i}");
                    if f.value_type(*a) != Some(t) {
                        return Err(WriteError::Invalid(format!(
                            "parameter {i}'s value %{} does not have the signature's type",
                            a.0
                        )));
                    }
                    cx.scope.define(*a, what)?;
                }
                let mut ops = vec![];
                self.write_ops(&mut cx, &body.ops, &mut ops)?;
                write_varint(out, ops.len() as u64);
                out.extend_from_slice(&ops);
                debug = cx.debug;
            }
            FunctionKind::ExternDecl { const_params } => {
                self.note_preview(|| "an extern function declaration".into())?;
                if f.body.is_some() {
                    return Err(WriteError::Invalid(
                        "an extern declaration must not have a body (the toolchain rejects non-extern preview$func)"
                            .into(),
                    ));
                }
                out.push(private);
                write_varint(out, index as u64 + 1);
                self.write_tagged(out, &Attribute::Array(f.arg_attrs.clone()))?;
                write_varint(out, 0);
                self.write_tagged(out, &Attribute::Array(const_params.clone()))?;
            }
            FunctionKind::ExternImpl {
                opflags,
                sym_name,
                implements,
                function_type,
            } => {
                self.note_preview(|| "an extern implementation".into())?;
                if *opflags != 0 {
                    return Err(WriteError::Invalid(format!(
                        "extern implementation opflags {opflags:#x}: the optional attributes they announce are \
                         not known, only 0 can be written"
                    )));
                }
                if f.body.is_some() {
                    return Err(WriteError::Invalid(
                        "an extern implementation entry has no body".into(),
                    ));
                }
                out.push(private | flag::FORM_EXTERN_IMPL << flag::FORM_SHIFT);
                write_varint(out, index as u64 + 1);
                write_varint(out, *opflags);
                self.write_string(out, sym_name);
                self.write_string(out, implements);
                let t = self.type_id(function_type)?;
                write_varint(out, t as u64);
                // One region with no blocks, then an empty body.
                out.extend_from_slice(&[1, 0, 0]);
            }
        }
        self.debug_lists.push(debug);
        Ok(())
    }
}

impl Reader<'_> {
    /// Decode the `index`-th function-table entry.
    pub(crate) fn read_function(
        &mut self,
        c: &mut Cursor<'_>,
        index: usize,
        debug: &DebugInfo,
    ) -> Result<Function, ReadError> {
        let name = self
            .string(c)
            .map_err(|e| e.within(format!("function #{index}")))?;
        self.read_function_rest(c, name.clone(), debug)
            .map_err(|e| e.within(format!("function `{name}`")))
    }

    fn read_function_rest(
        &mut self,
        c: &mut Cursor<'_>,
        name: String,
        debug: &DebugInfo,
    ) -> Result<Function, ReadError> {
        let v = self.version;
        let sat = c.offset();
        let (param_types, result_types) = match self.ty(c)? {
            Type::Function { params, results } => (params, results),
            _ => return Err(c.err_at(sat, "the signature is not a function type")),
        };
        let fat = c.offset();
        let flags = c.u8()?;
        let lat = c.offset();
        let loc_index = c.varint()?;
        let mut feed = DebugFeed::new(debug, loc_index, c, lat)?;
        let loc = feed.next(lat)?;
        let private = flags & flag::PRIVATE != 0;
        let kernel = flags & flag::KERNEL != 0;
        let mut f = Function {
            name,
            kind: FunctionKind::Entry {
                hints: OptimizationHints::default(),
            },
            param_types,
            result_types,
            private,
            arg_attrs: vec![],
            body: None,
            loc,
            values: vec![],
        };
        let form = if v >= V13_5 {
            if flags & 0xF0 != 0 {
                return Err(c.err_at(
                    fat,
                    format!("unknown function flag bits {:#x}", flags & 0xF0),
                ));
            }
            (flags >> flag::FORM_SHIFT) & 3
        } else {
            if flags & !0x07 != 0 {
                return Err(c.err_at(
                    fat,
                    format!("unknown function flag bits {:#x}", flags & !0x07),
                ));
            }
            0
        };
        match (kernel, form) {
            (true, 0) => {
                let hints = if v >= V13_5 || flags & flag::HAS_HINTS != 0 {
                    let hat = c.offset();
                    match self.read_tagged(c, 0)? {
                        Attribute::OptimizationHints(h) => h,
                        _ => return Err(c.err_at(hat, "expected tagged optimization hints")),
                    }
                } else {
                    OptimizationHints::default()
                };
                f.kind = FunctionKind::Entry { hints };
                if v >= V13_5 {
                    f.arg_attrs = self.read_array(c, "argument attributes")?;
                }
                let bat = c.offset();
                let len = c.varint()?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= c.remaining())
                    .ok_or_else(|| {
                        c.err_at(bat, format!("body length {len} exceeds the remaining data"))
                    })?;
                let mut body = c.sub(len)?;
                let args: Vec<_> = f
                    .param_types
                    .clone()
                    .into_iter()
                    .map(|t| f.new_value(t))
                    .collect();
                let mut cx = FnReader {
                    f: &mut f,
                    scope: args.clone(),
                    debug: feed,
                };
                let mut ops = vec![];
                while !body.is_empty() {
                    ops.push(self.read_op(&mut body, &mut cx, 0)?);
                }
                cx.debug.finish(body.offset())?;
                f.body = Some(Block { args, ops });
            }
            (true, _) => {
                return Err(c.err_at(fat, format!("a kernel cannot have function form {form}")));
            }
            (false, _) if v < V13_5 => {
                return Err(c.err_at(
                    fat,
                    format!("non-kernel function entries are not readable at bytecode {v}"),
                ));
            }
            (false, _) if !self.preview => {
                return Err(c.err_at(
                    fat,
                    "a non-kernel function (preview$func) in a file without the preview flag",
                ));
            }
            (false, 0) => {
                f.arg_attrs = self.read_array(c, "argument attributes")?;
                let bat = c.offset();
                let len = c.varint()?;
                if len != 0 {
                    return Err(c.err_at(
                        bat,
                        "a preview$func with a body (only extern declarations are supported)",
                    ));
                }
                let const_params = self.read_array(c, "constant parameters")?;
                f.kind = FunctionKind::ExternDecl { const_params };
                feed.finish(c.offset())?;
            }
            (false, flag::FORM_EXTERN_IMPL) => {
                let oat = c.offset();
                let opflags = c.varint()?;
                if opflags != 0 {
                    return Err(c.err_at(oat, format!("extern implementation opflags {opflags:#x} announce attributes whose layout is unknown")));
                }
                let sym_name = self.string(c)?;
                let implements = self.string(c)?;
                let function_type = self.ty(c)?;
                let rat = c.offset();
                let (regions, blocks) = (c.varint()?, c.varint()?);
                if (regions, blocks) != (1, 0) {
                    return Err(c.err_at(rat, format!("expected 1 region with 0 blocks, found {regions} regions / {blocks} blocks")));
                }
                let bat = c.offset();
                if c.varint()? != 0 {
                    return Err(c.err_at(
                        bat,
                        "an extern implementation entry must have an empty body",
                    ));
                }
                f.kind = FunctionKind::ExternImpl {
                    opflags,
                    sym_name,
                    implements,
                    function_type,
                };
                feed.finish(c.offset())?;
            }
            (false, _) => {
                return Err(c.err_at(
                    fat,
                    format!("function form {form} (testing/reserved) is not supported"),
                ));
            }
        }
        Ok(f)
    }

    /// A tagged attribute that must be an Array; its items.
    fn read_array(&mut self, c: &mut Cursor<'_>, what: &str) -> Result<Vec<Attribute>, ReadError> {
        let at = c.offset();
        match self.read_tagged(c, 0)? {
            Attribute::Array(items) => Ok(items),
            _ => Err(c.err_at(at, format!("{what}: expected a tagged array"))),
        }
    }
}
