//! The schema-driven op encoder and decoder (§1.9): one interpreter of [`OpSchema`] per direction, with the
//! bytecode's value scoping (values of a block go out of scope at its end; an op's results are numbered after
//! its regions) and version gating of every op part.

use super::MAX_REGION_DEPTH;
use super::debug::DebugFeed;
use super::error::{ReadError, WriteError};
use super::read::Reader;
use super::varint::{Cursor, write_i32_list, write_varint};
use super::write::Writer;
use crate::attr::EnumValue;
use crate::ir::{Block, Function, OpAttr, Operation, ValueId};
use crate::schema::{
    AttrKind, AttrSpec, OpSchema, Opcode, OperandKind, Presence, ResultSlot, ResultSpec,
    default_before_since,
};
use crate::version::Version;

fn active(since: Option<Version>, v: Version) -> bool {
    since.is_none_or(|s| s <= v)
}

/// Result slots written at `v` (a slot newer than `v` is not written).
fn active_slots(slots: &[ResultSlot], v: Version) -> usize {
    slots.iter().filter(|s| active(s.since, v)).count()
}

fn kind_name(k: AttrKind) -> &'static str {
    match k {
        AttrKind::Enum(_) => "an enum",
        AttrKind::Int => "an integer",
        AttrKind::Bool => "a bool",
        AttrKind::Str => "a string",
        AttrKind::TypeRef => "a type",
        AttrKind::DenseConst => "dense elements",
        AttrKind::I32Array => "an i32 array",
        AttrKind::BoolArray => "a bool array",
        AttrKind::Hints => "optimization hints",
        AttrKind::Tagged => "a tagged attribute",
        AttrKind::TaggedArray => "an array of tagged attributes",
        AttrKind::UnitFlag => "a unit flag",
    }
}

fn op_attr_name(a: &OpAttr) -> &'static str {
    match a {
        OpAttr::Enum(_) => "an enum",
        OpAttr::Int(_) => "an integer",
        OpAttr::Bool(_) => "a bool",
        OpAttr::Str(_) => "a string",
        OpAttr::Type(_) => "a type",
        OpAttr::Dense(_) => "dense elements",
        OpAttr::I32Array(_) => "an i32 array",
        OpAttr::BoolArray(_) => "a bool array",
        OpAttr::Hints(_) => "optimization hints",
        OpAttr::Tagged(_) => "a tagged attribute",
        OpAttr::TaggedArray(_) => "an array of tagged attributes",
        OpAttr::Unit => "a unit flag",
    }
}

/// Whether a unit-flag slot is set.
fn flag_set(op: &'static str, a: &AttrSpec, val: Option<&OpAttr>) -> Result<bool, WriteError> {
    match val {
        None | Some(OpAttr::Bool(false)) => Ok(false),
        Some(OpAttr::Unit) | Some(OpAttr::Bool(true)) => Ok(true),
        Some(other) => Err(WriteError::BadSlot {
            op,
            slot: format!("attribute `{}`", a.name),
            problem: format!("expected a unit flag, found {}", op_attr_name(other)),
        }),
    }
}

/// Whether an attribute newer than the target version holds only what older versions imply.
fn is_implied_default(opcode: Opcode, a: &AttrSpec, val: Option<&OpAttr>) -> bool {
    match val {
        None | Some(OpAttr::Bool(false)) => true,
        Some(OpAttr::BoolArray(xs)) => xs.iter().all(|x| !x),
        Some(OpAttr::Enum(e)) => default_before_since(opcode, a.name) == Some(*e),
        _ => false,
    }
}

/// The writer's map from [`ValueId`] to bytecode value index, following block scoping.
#[derive(Debug)]
pub(crate) struct ValueScope {
    index: Vec<Option<u32>>,
    stack: Vec<ValueId>,
}

impl ValueScope {
    pub(crate) fn new(num_values: usize) -> ValueScope {
        ValueScope {
            index: vec![None; num_values],
            stack: vec![],
        }
    }

    pub(crate) fn define(
        &mut self,
        v: ValueId,
        what: impl Fn() -> String,
    ) -> Result<(), WriteError> {
        let len = self.index.len();
        let slot = self
            .index
            .get_mut(v.0 as usize)
            .ok_or_else(|| WriteError::UnknownValue {
                what: what(),
                value: v.0,
                len,
            })?;
        if slot.is_some() {
            return Err(WriteError::ValueRedefined {
                what: what(),
                value: v.0,
            });
        }
        *slot = Some(self.stack.len() as u32);
        self.stack.push(v);
        Ok(())
    }

    fn get(&self, v: ValueId) -> Option<u32> {
        self.index.get(v.0 as usize).copied().flatten()
    }

    fn mark(&self) -> usize {
        self.stack.len()
    }

    fn truncate(&mut self, mark: usize) {
        while self.stack.len() > mark {
            if let Some(v) = self.stack.pop() {
                self.index[v.0 as usize] = None;
            }
        }
    }
}

/// Per-function writer state: the function (for value types), the scope and the debug ids in pre-order.
#[derive(Debug)]
pub(crate) struct FnWriter<'f> {
    pub(crate) f: &'f Function,
    pub(crate) scope: ValueScope,
    pub(crate) debug: Vec<u64>,
}

impl Writer<'_> {
    fn value_type_id(
        &mut self,
        cx: &FnWriter<'_>,
        v: ValueId,
        what: impl Fn() -> String,
    ) -> Result<u32, WriteError> {
        let ty = cx.f.value_type(v).ok_or_else(|| WriteError::UnknownValue {
            what: what(),
            value: v.0,
            len: cx.f.values.len(),
        })?;
        self.type_id(ty)
    }

    fn write_value(
        &self,
        cx: &FnWriter<'_>,
        out: &mut Vec<u8>,
        op: &'static str,
        v: ValueId,
    ) -> Result<(), WriteError> {
        let idx = cx
            .scope
            .get(v)
            .ok_or(WriteError::ValueNotInScope { op, value: v.0 })?;
        write_varint(out, idx as u64);
        Ok(())
    }

    /// Encode the ops of a function body or region block (the caller writes counts and block arguments).
    pub(crate) fn write_ops(
        &mut self,
        cx: &mut FnWriter<'_>,
        ops: &[Operation],
        out: &mut Vec<u8>,
    ) -> Result<(), WriteError> {
        for op in ops {
            self.write_op(cx, op, out)?;
        }
        Ok(())
    }

    /// Encode one op from its schema.
    fn write_op(
        &mut self,
        cx: &mut FnWriter<'_>,
        op: &Operation,
        out: &mut Vec<u8>,
    ) -> Result<(), WriteError> {
        let s: &OpSchema = op.opcode.schema();
        let name = s.mnemonic;
        let v = self.version;
        if op.opcode.is_structural() {
            return Err(WriteError::Invalid(format!(
                "op `{name}` cannot appear in a function body (functions live in the function table)"
            )));
        }
        self.require(s.since, || format!("op `{name}`"))?;
        if op.opcode.is_preview() {
            self.note_preview(|| format!("op `{name}`"))?;
        }
        if op.attrs.len() > s.attrs.len() && op.attrs[s.attrs.len()..].iter().any(Option::is_some) {
            return Err(WriteError::BadSlot {
                op: name,
                slot: "attributes".into(),
                problem: format!(
                    "{} attribute slots given, the op has {}",
                    op.attrs.len(),
                    s.attrs.len()
                ),
            });
        }
        if op.operands.len() > s.operands.len()
            && op.operands[s.operands.len()..]
                .iter()
                .any(|g| !g.is_empty())
        {
            return Err(WriteError::BadSlot {
                op: name,
                slot: "operands".into(),
                problem: format!(
                    "{} operand groups given, the op has {}",
                    op.operands.len(),
                    s.operands.len()
                ),
            });
        }
        self.flush_debug(op.loc, || format!("op `{name}`"))?;
        cx.debug.push(op.loc.0);
        if op.opcode == Opcode::GetGlobal
            && let Some(OpAttr::Str(g)) = op.attr("name")
        {
            // cuTile defines a global just before the first op that fetches it; intern it in the same place.
            self.intern_global(g)?;
        }

        write_varint(out, op.opcode as u64);

        // Result types.
        let written_results: Vec<ValueId> = match s.results {
            ResultSpec::Fixed(slots) | ResultSpec::Counted(slots) => {
                if op.results.len() != slots.len() {
                    return Err(WriteError::BadSlot {
                        op: name,
                        slot: "results".into(),
                        problem: format!(
                            "expected {} results, found {}",
                            slots.len(),
                            op.results.len()
                        ),
                    });
                }
                if matches!(s.results, ResultSpec::Counted(_)) {
                    write_varint(out, active_slots(slots, v) as u64);
                }
                slots
                    .iter()
                    .zip(&op.results)
                    .filter(|(slot, _)| active(slot.since, v))
                    .map(|(_, r)| *r)
                    .collect()
            }
            ResultSpec::Variadic => {
                write_varint(out, op.results.len() as u64);
                op.results.clone()
            }
        };
        for (i, r) in written_results.iter().enumerate() {
            let t = self.value_type_id(cx, *r, || format!("result {i} of op `{name}`"))?;
            write_varint(out, t as u64);
        }

        // Flags word.
        let mut flags: u64 = 0;
        for (i, a) in s.attrs.iter().enumerate() {
            let val = op.attrs.get(i).and_then(Option::as_ref);
            if !active(a.since, v) {
                if !is_implied_default(op.opcode, a, val) {
                    return Err(WriteError::TooNew {
                        what: format!("attribute `{}` of op `{name}`", a.name),
                        since: a.since.unwrap_or(s.since),
                        version: v,
                    });
                }
                continue;
            }
            if let Presence::Flag(b) = a.presence {
                let present = if a.kind == AttrKind::UnitFlag {
                    flag_set(name, a, val)?
                } else {
                    val.is_some()
                };
                if present {
                    flags |= 1 << b;
                }
            }
        }
        for (i, o) in s.operands.iter().enumerate() {
            let group = op.operands.get(i).map(Vec::as_slice).unwrap_or(&[]);
            if !active(o.since, v) {
                if !group.is_empty() {
                    return Err(WriteError::TooNew {
                        what: format!("operand `{}` of op `{name}`", o.name),
                        since: o.since.unwrap_or(s.since),
                        version: v,
                    });
                }
                continue;
            }
            if let OperandKind::Optional(b) = o.kind
                && !group.is_empty()
            {
                flags |= 1 << b;
            }
        }
        if s.has_flags(v) {
            write_varint(out, flags);
        } else if flags != 0 {
            return Err(WriteError::Invalid(format!(
                "op `{name}` has optional parts set but no flags word at bytecode {v}"
            )));
        }

        // Attributes, in declaration order.
        for (i, a) in s.attrs.iter().enumerate() {
            if !active(a.since, v) || a.kind == AttrKind::UnitFlag {
                continue;
            }
            let val = op.attrs.get(i).and_then(Option::as_ref);
            let val = match (a.presence, val) {
                (_, Some(x)) => x,
                (Presence::Flag(_), None) => continue,
                (Presence::Required, None) => {
                    return Err(WriteError::Missing {
                        op: name,
                        slot: format!("attribute `{}`", a.name),
                    });
                }
            };
            self.write_op_attr(out, name, a, val)?;
        }

        // Operands.
        if let Some(n) = s.operand_count_prefix {
            let var: usize = s
                .operands
                .iter()
                .enumerate()
                .filter(|(_, o)| o.kind == OperandKind::UnsizedVariadic && active(o.since, v))
                .map(|(i, _)| op.operands.get(i).map_or(0, Vec::len))
                .sum();
            write_varint(out, n as u64 + var as u64);
        }
        for (i, o) in s.operands.iter().enumerate() {
            if !active(o.since, v) {
                continue;
            }
            let group = op.operands.get(i).map(Vec::as_slice).unwrap_or(&[]);
            let bad = |problem: String| WriteError::BadSlot {
                op: name,
                slot: format!("operand `{}`", o.name),
                problem,
            };
            match o.kind {
                OperandKind::Single if group.is_empty() => {
                    return Err(WriteError::Missing {
                        op: name,
                        slot: format!("operand `{}`", o.name),
                    });
                }
                OperandKind::Single if group.len() > 1 => {
                    return Err(bad(format!("expected one value, found {}", group.len())));
                }
                OperandKind::Optional(_) | OperandKind::CountedOptional if group.len() > 1 => {
                    return Err(bad(format!(
                        "expected at most one value, found {}",
                        group.len()
                    )));
                }
                OperandKind::CountedOptional | OperandKind::SizedVariadic => {
                    write_varint(out, group.len() as u64);
                }
                _ => {}
            }
            for val in group {
                self.write_value(cx, out, name, *val)?;
            }
        }

        // Regions: each one block whose values go out of scope at its end.
        if s.regions as usize != op.regions.len() {
            return Err(WriteError::BadSlot {
                op: name,
                slot: "regions".into(),
                problem: format!("expected {} regions, found {}", s.regions, op.regions.len()),
            });
        }
        if s.regions > 0 {
            write_varint(out, op.regions.len() as u64);
            for (ri, block) in op.regions.iter().enumerate() {
                write_varint(out, 1);
                write_varint(out, block.args.len() as u64);
                let mark = cx.scope.mark();
                for (ai, arg) in block.args.iter().enumerate() {
                    let what = || format!("argument {ai} of region {ri} of op `{name}`");
                    let t = self.value_type_id(cx, *arg, what)?;
                    write_varint(out, t as u64);
                    cx.scope.define(*arg, what)?;
                }
                let mut body = vec![];
                self.write_ops(cx, &block.ops, &mut body)?;
                write_varint(out, block.ops.len() as u64);
                out.extend_from_slice(&body);
                cx.scope.truncate(mark);
            }
        }

        for (i, r) in written_results.iter().enumerate() {
            cx.scope
                .define(*r, || format!("result {i} of op `{name}`"))?;
        }
        Ok(())
    }

    /// One untagged op attribute of the kind the schema fixes.
    fn write_op_attr(
        &mut self,
        out: &mut Vec<u8>,
        op: &'static str,
        a: &AttrSpec,
        val: &OpAttr,
    ) -> Result<(), WriteError> {
        let bad = |problem: String| WriteError::BadSlot {
            op,
            slot: format!("attribute `{}`", a.name),
            problem,
        };
        match (a.kind, val) {
            (AttrKind::Enum(k), OpAttr::Enum(e)) => {
                if e.kind != k || e.value >= k.count() {
                    return Err(bad(format!(
                        "expected a {k:?} value, found {:?} {}",
                        e.kind, e.value
                    )));
                }
                write_varint(out, e.value as u64);
            }
            (AttrKind::Int, OpAttr::Int(x)) => write_varint(out, *x),
            (AttrKind::Bool, OpAttr::Bool(b)) => out.push(*b as u8),
            (AttrKind::Str, OpAttr::Str(s)) => self.write_string(out, s),
            (AttrKind::TypeRef, OpAttr::Type(t)) => {
                let id = self.type_id(t)?;
                write_varint(out, id as u64);
            }
            (AttrKind::DenseConst, OpAttr::Dense(d)) => {
                let id = self.constant_id(d);
                write_varint(out, id as u64);
            }
            (AttrKind::I32Array, OpAttr::I32Array(xs)) => write_i32_list(out, xs),
            (AttrKind::BoolArray, OpAttr::BoolArray(xs)) => {
                write_varint(out, xs.len() as u64);
                out.extend(xs.iter().map(|&x| x as u8));
            }
            (AttrKind::Hints, OpAttr::Hints(h)) => self.write_hints_untagged(out, h)?,
            (AttrKind::Tagged, OpAttr::Tagged(t)) => self.write_tagged(out, t)?,
            (AttrKind::TaggedArray, OpAttr::TaggedArray(xs)) => self.write_tagged_list(out, xs)?,
            (k, other) => {
                return Err(bad(format!(
                    "expected {}, found {}",
                    kind_name(k),
                    op_attr_name(other)
                )));
            }
        }
        Ok(())
    }
}

/// Reader-side function state: the value arena being filled, the values in scope (bytecode index order), and
/// the debug ids to hand out in pre-order.
#[derive(Debug)]
pub(crate) struct FnReader<'f, 'd> {
    pub(crate) f: &'f mut Function,
    pub(crate) scope: Vec<ValueId>,
    pub(crate) debug: DebugFeed<'d>,
}

impl Reader<'_> {
    fn read_value(&self, c: &mut Cursor<'_>, cx: &FnReader<'_, '_>) -> Result<ValueId, ReadError> {
        let at = c.offset();
        let idx = c.varint()?;
        usize::try_from(idx)
            .ok()
            .and_then(|i| cx.scope.get(i))
            .copied()
            .ok_or_else(|| {
                c.err_at(
                    at,
                    format!(
                        "value index {idx} is not defined here ({} values in scope)",
                        cx.scope.len()
                    ),
                )
            })
    }

    /// Decode one op from its schema.
    pub(crate) fn read_op(
        &mut self,
        c: &mut Cursor<'_>,
        cx: &mut FnReader<'_, '_>,
        depth: u32,
    ) -> Result<Operation, ReadError> {
        let at = c.offset();
        let code = c.varint()?;
        let opcode = u32::try_from(code)
            .ok()
            .and_then(Opcode::from_u32)
            .ok_or_else(|| c.err_at(at, format!("unknown opcode {code}")))?;
        let s = opcode.schema();
        self.read_op_body(c, cx, opcode, s, at, depth)
            .map_err(|e| e.within(format!("op `{}`", s.mnemonic)))
    }

    fn read_op_body(
        &mut self,
        c: &mut Cursor<'_>,
        cx: &mut FnReader<'_, '_>,
        opcode: Opcode,
        s: &'static OpSchema,
        at: usize,
        depth: u32,
    ) -> Result<Operation, ReadError> {
        let v = self.version;
        let name = s.mnemonic;
        if opcode.is_structural() {
            return Err(c.err_at(at, format!("op `{name}` cannot appear in a function body")));
        }
        if s.since > v {
            return Err(c.err_at(
                at,
                format!(
                    "unsupported opcode {} for bytecode version {v} (`{name}` exists from {})",
                    opcode as u32, s.since
                ),
            ));
        }
        if opcode.is_preview() && !self.preview {
            return Err(c.err_at(
                at,
                format!("preview op `{name}` in a file without the preview flag"),
            ));
        }
        let loc = cx.debug.next(at)?;

        // Result types, each with whether the file numbers it. A token slot newer than the file gets a fresh
        // token value so the model matches newer versions; that value has no index in the file, so it must not
        // enter the value scope (it would shift every later value index by one).
        let mut result_types: Vec<(crate::types::Type, bool)> = vec![];
        match s.results {
            ResultSpec::Fixed(slots) | ResultSpec::Counted(slots) => {
                if matches!(s.results, ResultSpec::Counted(_)) {
                    let cat = c.offset();
                    let n = c.varint()?;
                    let expect = active_slots(slots, v) as u64;
                    if n != expect {
                        return Err(
                            c.err_at(cat, format!("expected {expect} result types, found {n}"))
                        );
                    }
                }
                for slot in slots {
                    if active(slot.since, v) {
                        result_types.push((self.ty(c)?, true));
                    } else if slot.name.contains("token") {
                        result_types.push((crate::types::Type::Token, false));
                    }
                }
            }
            ResultSpec::Variadic => {
                let n = c.count(1, "result type")?;
                for _ in 0..n {
                    result_types.push((self.ty(c)?, true));
                }
            }
        }

        // Flags word: reject bits the schema does not define.
        let flags = if s.has_flags(v) {
            let fat = c.offset();
            let f = c.varint()?;
            let mut known = 0u64;
            for a in s.attrs.iter().filter(|a| active(a.since, v)) {
                if let Presence::Flag(b) = a.presence {
                    known |= 1 << b;
                }
            }
            for o in s.operands.iter().filter(|o| active(o.since, v)) {
                if let OperandKind::Optional(b) = o.kind {
                    known |= 1 << b;
                }
            }
            if f & !known != 0 {
                return Err(c.err_at(fat, format!("unknown flag bits {:#x}", f & !known)));
            }
            f
        } else {
            0
        };

        // Attributes.
        let mut attrs: Vec<Option<OpAttr>> = vec![None; s.attrs.len()];
        for (i, a) in s.attrs.iter().enumerate() {
            if !active(a.since, v) {
                attrs[i] = default_before_since(opcode, a.name).map(OpAttr::Enum);
                continue;
            }
            let present = match a.presence {
                Presence::Required => true,
                Presence::Flag(b) => flags & (1 << b) != 0,
            };
            if !present {
                continue;
            }
            attrs[i] = Some(if a.kind == AttrKind::UnitFlag {
                OpAttr::Unit
            } else {
                self.read_op_attr(c, a.kind)
                    .map_err(|e| e.within(format!("attribute `{}`", a.name)))?
            });
        }

        // Operands.
        let mut var_count = 0usize;
        if let Some(n) = s.operand_count_prefix {
            let cat = c.offset();
            let total = c.varint()?;
            var_count = total
                .checked_sub(n as u64)
                .filter(|&k| k <= c.remaining() as u64)
                .ok_or_else(|| {
                    c.err_at(
                        cat,
                        format!("operand count {total} does not fit the op ({n} fixed operands)"),
                    )
                })? as usize;
        }
        let mut operands: Vec<Vec<ValueId>> = vec![vec![]; s.operands.len()];
        for (i, o) in s.operands.iter().enumerate() {
            if !active(o.since, v) {
                continue;
            }
            let n = match o.kind {
                OperandKind::Single => 1,
                OperandKind::Optional(b) => (flags & (1 << b) != 0) as usize,
                OperandKind::CountedOptional => {
                    let cat = c.offset();
                    match c.varint()? {
                        k @ (0 | 1) => k as usize,
                        k => {
                            return Err(c.err_at(
                                cat,
                                format!("optional operand `{}` has count {k}", o.name),
                            ));
                        }
                    }
                }
                OperandKind::SizedVariadic => c.count(1, "operand")?,
                OperandKind::UnsizedVariadic => var_count,
            };
            for _ in 0..n {
                let val = self.read_value(c, cx)?;
                operands[i].push(val);
            }
        }

        // An attribute newer than the file that is a bool array per index (`inbounds`) is all-false.
        for (i, a) in s.attrs.iter().enumerate() {
            if !active(a.since, v) && a.kind == AttrKind::BoolArray {
                let len = s.operand_index("index").map_or(0, |k| operands[k].len());
                attrs[i] = Some(OpAttr::BoolArray(vec![false; len]));
            }
        }

        // Regions.
        let mut regions = vec![];
        if s.regions > 0 {
            if depth >= MAX_REGION_DEPTH {
                return Err(c.err("regions nest too deeply"));
            }
            let rat = c.offset();
            let n = c.varint()?;
            if n != s.regions as u64 {
                return Err(c.err_at(rat, format!("expected {} regions, found {n}", s.regions)));
            }
            for _ in 0..n {
                let bat = c.offset();
                let blocks = c.varint()?;
                if blocks != 1 {
                    return Err(c.err_at(
                        bat,
                        format!(
                            "a region has {blocks} blocks; only single-block regions are supported"
                        ),
                    ));
                }
                let nargs = c.count(1, "block argument")?;
                let mark = cx.scope.len();
                let mut args = Vec::with_capacity(nargs);
                for _ in 0..nargs {
                    let t = self.ty(c)?;
                    let val = cx.f.new_value(t);
                    cx.scope.push(val);
                    args.push(val);
                }
                let nops = c.count(1, "op")?;
                let mut ops = Vec::with_capacity(nops);
                for _ in 0..nops {
                    ops.push(self.read_op(c, cx, depth + 1)?);
                }
                cx.scope.truncate(mark);
                regions.push(Block { args, ops });
            }
        }

        let results = result_types
            .into_iter()
            .map(|(t, in_file)| {
                let val = cx.f.new_value(t);
                if in_file {
                    cx.scope.push(val);
                }
                val
            })
            .collect();
        Ok(Operation {
            opcode,
            results,
            attrs,
            operands,
            regions,
            loc,
        })
    }

    /// One untagged op attribute.
    fn read_op_attr(&mut self, c: &mut Cursor<'_>, kind: AttrKind) -> Result<OpAttr, ReadError> {
        Ok(match kind {
            AttrKind::Enum(k) => {
                let at = c.offset();
                let x = c.varint()?;
                let e = u8::try_from(x)
                    .ok()
                    .and_then(|x| EnumValue::new(k, x))
                    .ok_or_else(|| c.err_at(at, format!("value {x} is out of range for {k:?}")))?;
                OpAttr::Enum(e)
            }
            AttrKind::Int => OpAttr::Int(c.varint()?),
            AttrKind::Bool => OpAttr::Bool(c.bool()?),
            AttrKind::Str => OpAttr::Str(self.string(c)?),
            AttrKind::TypeRef => OpAttr::Type(self.ty(c)?),
            AttrKind::DenseConst => OpAttr::Dense(self.constant(c)?),
            AttrKind::I32Array => OpAttr::I32Array(c.i32_list("i32 array element")?),
            AttrKind::BoolArray => {
                let n = c.count(1, "bool array element")?;
                OpAttr::BoolArray((0..n).map(|_| c.bool()).collect::<Result<_, _>>()?)
            }
            AttrKind::Hints => OpAttr::Hints(self.read_hints_untagged(c, 0)?),
            AttrKind::Tagged => OpAttr::Tagged(self.read_tagged(c, 0)?),
            AttrKind::TaggedArray => OpAttr::TaggedArray(self.read_tagged_list(c, 0)?),
            AttrKind::UnitFlag => OpAttr::Unit,
        })
    }
}
