//! Self-contained ("tagged") attributes (§1.6), used inside arrays, dictionaries, hints, function argument
//! attributes and some op attributes; plus the untagged dictionary and optimization-hints forms built from them.

use super::MAX_ATTR_DEPTH;
use super::error::{ReadError, WriteError};
use super::read::Reader;
use super::types::describe;
use super::varint::{Cursor, write_signed_varint, write_varint};
use super::write::Writer;
use crate::attr::{Access, Attribute, ExprBinOp, OptimizationHints};
use crate::types::{ScalarType, Type};
use crate::version::*;

mod tag {
    pub const INTEGER: u8 = 1;
    pub const FLOAT: u8 = 2;
    pub const BOOL: u8 = 3;
    pub const TYPE: u8 = 4;
    pub const STRING: u8 = 5;
    pub const ARRAY: u8 = 6;
    pub const DENSE_ELEMENTS: u8 = 7;
    pub const DIV_BY: u8 = 8;
    pub const SAME_ELEMENTS: u8 = 9;
    pub const DICTIONARY: u8 = 10;
    pub const OPTIMIZATION_HINTS: u8 = 11;
    pub const BOUNDED: u8 = 12;
    pub const MULTIMEM_REDUCTION_KIND: u8 = 13;
    // Preview (SIMT) tags, 13.5 with the preview flag.
    pub const EXPR_INT: u8 = 209;
    pub const EXPR_VAR: u8 = 210;
    pub const SYMBOLIC_TUPLE: u8 = 216;
    pub const CONCRETE_TYPE: u8 = 219;
    pub const EXPR_NEG: u8 = 220;
    pub const ACCESS: u8 = 223;
    pub const CONST_PARAM: u8 = 226;
    pub const EXPR_BUILTIN: u8 = 227;
    pub const EXPR_CONST_STR: u8 = 228;
}

/// Tags of the binary symbolic expressions, established with tileirdisasm's compact printer: 211 prints `*`,
/// 213 `+`, 214 `-`, 215 `/`, 218 `/+` (ceiling division), and 212 is rejected in integer context (true division).
fn binop_tag(op: ExprBinOp) -> u8 {
    match op {
        ExprBinOp::Mul => 211,
        ExprBinOp::Div => 212,
        ExprBinOp::Add => 213,
        ExprBinOp::Sub => 214,
        ExprBinOp::FloorDiv => 215,
        ExprBinOp::CeilDiv => 218,
    }
}

fn binop_from_tag(t: u8) -> Option<ExprBinOp> {
    [
        ExprBinOp::Add,
        ExprBinOp::Sub,
        ExprBinOp::Mul,
        ExprBinOp::Div,
        ExprBinOp::FloorDiv,
        ExprBinOp::CeilDiv,
    ]
    .into_iter()
    .find(|&op| binop_tag(op) == t)
}

fn int_mask(s: ScalarType) -> u64 {
    match s.bit_width() {
        64 => u64::MAX,
        w => (1u64 << w) - 1,
    }
}

impl Writer<'_> {
    /// Write one tagged attribute.
    pub(crate) fn write_tagged(
        &mut self,
        out: &mut Vec<u8>,
        a: &Attribute,
    ) -> Result<(), WriteError> {
        if a.is_preview()
            && !matches!(
                a,
                Attribute::Array(_) | Attribute::Dictionary(_) | Attribute::Type(_)
            )
        {
            self.note_preview(|| "a preview attribute".to_string())?;
        }
        match a {
            Attribute::Integer { ty, value } => {
                let s = match ty {
                    Type::Scalar(s) if s.is_integer() => *s,
                    _ => {
                        return Err(WriteError::Invalid(format!(
                            "an Integer attribute must have a scalar integer type, not {}",
                            describe(ty)
                        )));
                    }
                };
                out.push(tag::INTEGER);
                let t = self.type_id(ty)?;
                write_varint(out, t as u64);
                write_varint(out, value & int_mask(s));
            }
            Attribute::Float { ty, bits } => {
                let s = match ty {
                    Type::Scalar(s) if s.is_float() => *s,
                    _ => {
                        return Err(WriteError::Invalid(format!(
                            "a Float attribute must have a scalar float type, not {}",
                            describe(ty)
                        )));
                    }
                };
                out.push(tag::FLOAT);
                let t = self.type_id(ty)?;
                write_varint(out, t as u64);
                if s.bit_width() <= 8 {
                    out.push(*bits as u8);
                } else {
                    write_signed_varint(out, *bits as i64);
                }
            }
            Attribute::Bool(b) => {
                out.push(tag::BOOL);
                out.push(*b as u8);
            }
            Attribute::Type(t) => {
                out.push(tag::TYPE);
                let id = self.type_id(t)?;
                write_varint(out, id as u64);
            }
            Attribute::String(s) => {
                out.push(tag::STRING);
                self.write_string(out, s);
            }
            Attribute::Array(items) => {
                out.push(tag::ARRAY);
                self.write_tagged_list(out, items)?;
            }
            Attribute::DenseElements { ty, data } => {
                out.push(tag::DENSE_ELEMENTS);
                let t = self.type_id(ty)?;
                write_varint(out, t as u64);
                let c = self.constant_id(data);
                write_varint(out, c as u64);
            }
            Attribute::DivBy {
                divisor,
                every,
                along,
            } => {
                out.push(tag::DIV_BY);
                write_varint(out, *divisor);
                out.push(every.is_some() as u8 | (along.is_some() as u8) << 1);
                for x in [every, along].into_iter().flatten() {
                    write_signed_varint(out, *x);
                }
            }
            Attribute::SameElements(xs) => {
                out.push(tag::SAME_ELEMENTS);
                super::varint::write_i64_list(out, xs);
            }
            Attribute::Dictionary(items) => {
                out.push(tag::DICTIONARY);
                self.write_dict_untagged(out, items)?;
            }
            Attribute::OptimizationHints(h) => {
                out.push(tag::OPTIMIZATION_HINTS);
                self.write_hints_untagged(out, h)?;
            }
            Attribute::Bounded { lb, ub } => {
                out.push(tag::BOUNDED);
                out.push(lb.is_some() as u8 | (ub.is_some() as u8) << 1);
                for x in [lb, ub].into_iter().flatten() {
                    write_signed_varint(out, *x);
                }
            }
            Attribute::MultimemReductionKind(k) => {
                self.require(V13_5, || "the multimem_reduction_kind attribute".into())?;
                if *k >= crate::attr::EnumKind::MultimemReductionKind.count() {
                    return Err(WriteError::Invalid(format!(
                        "multimem reduction kind {k} is out of range"
                    )));
                }
                out.push(tag::MULTIMEM_REDUCTION_KIND);
                write_varint(out, *k as u64);
            }
            Attribute::Access(acc) => {
                write_varint(out, tag::ACCESS as u64);
                write_varint(out, *acc as u64);
            }
            Attribute::ConstParam { name, ty } => {
                write_varint(out, tag::CONST_PARAM as u64);
                self.write_string(out, name);
                let t = self.type_id(ty)?;
                write_varint(out, t as u64);
            }
            Attribute::ExprInt(x) => {
                write_varint(out, tag::EXPR_INT as u64);
                write_signed_varint(out, *x);
            }
            Attribute::ExprVar(s) => {
                write_varint(out, tag::EXPR_VAR as u64);
                self.write_string(out, s);
            }
            Attribute::ExprBinary { op, lhs, rhs } => {
                write_varint(out, binop_tag(*op) as u64);
                self.write_tagged(out, lhs)?;
                self.write_tagged(out, rhs)?;
            }
            Attribute::ExprNeg(x) => {
                write_varint(out, tag::EXPR_NEG as u64);
                self.write_tagged(out, x)?;
            }
            Attribute::SymbolicTuple(items) => {
                write_varint(out, tag::SYMBOLIC_TUPLE as u64);
                self.write_tagged_list(out, items)?;
            }
            Attribute::ConcreteType(t) => {
                write_varint(out, tag::CONCRETE_TYPE as u64);
                let id = self.type_id(t)?;
                write_varint(out, id as u64);
            }
            Attribute::ExprBuiltin(s) => {
                write_varint(out, tag::EXPR_BUILTIN as u64);
                self.write_string(out, s);
            }
            Attribute::ExprConstStr(s) => {
                write_varint(out, tag::EXPR_CONST_STR as u64);
                self.write_string(out, s);
            }
        }
        Ok(())
    }

    /// Count, then tagged items.
    pub(crate) fn write_tagged_list(
        &mut self,
        out: &mut Vec<u8>,
        items: &[Attribute],
    ) -> Result<(), WriteError> {
        write_varint(out, items.len() as u64);
        for it in items {
            self.write_tagged(out, it)?;
        }
        Ok(())
    }

    /// Count, then (key string id, tagged value) pairs.
    pub(crate) fn write_dict_untagged(
        &mut self,
        out: &mut Vec<u8>,
        items: &[(String, Attribute)],
    ) -> Result<(), WriteError> {
        write_varint(out, items.len() as u64);
        for (k, v) in items {
            if k.is_empty() {
                return Err(WriteError::Invalid(
                    "dictionary keys must be non-empty (the toolchain rejects empty keys)".into(),
                ));
            }
            self.write_string(out, k);
            self.write_tagged(out, v)?;
        }
        Ok(())
    }

    /// Untagged hints: count, then (arch string id, tagged Dictionary) pairs.
    pub(crate) fn write_hints_untagged(
        &mut self,
        out: &mut Vec<u8>,
        h: &OptimizationHints,
    ) -> Result<(), WriteError> {
        write_varint(out, h.by_arch.len() as u64);
        for (arch, dict) in &h.by_arch {
            self.write_string(out, arch);
            out.push(tag::DICTIONARY);
            self.write_dict_untagged(out, dict)?;
        }
        Ok(())
    }
}

impl Reader<'_> {
    /// Read one tagged attribute.
    pub(crate) fn read_tagged(
        &mut self,
        c: &mut Cursor<'_>,
        depth: u32,
    ) -> Result<Attribute, ReadError> {
        let at = c.offset();
        if depth >= MAX_ATTR_DEPTH {
            return Err(c.err("attributes nest too deeply"));
        }
        // Tags are varints truncated to 8 bits, as the reference reader does.
        let t = c.varint()? as u8;
        if t >= 200 && !self.preview {
            return Err(c.err_at(
                at,
                format!("preview attribute tag {t} in a file without the preview flag"),
            ));
        }
        let a = match t {
            tag::INTEGER => {
                let ty = self.ty(c)?;
                let s = match ty {
                    Type::Scalar(s) if s.is_integer() => s,
                    _ => {
                        return Err(c.err_at(
                            at,
                            format!("Integer attribute of non-integer type {}", describe(&ty)),
                        ));
                    }
                };
                let vat = c.offset();
                let value = if s == ScalarType::I1 {
                    c.u8()? as u64
                } else {
                    c.varint()?
                };
                if value & !int_mask(s) != 0 {
                    return Err(c.err_at(
                        vat,
                        format!("integer {value} does not fit type {}", s.name()),
                    ));
                }
                Attribute::Integer { ty, value }
            }
            tag::FLOAT => {
                let ty = self.ty(c)?;
                let s = match ty {
                    Type::Scalar(s) if s.is_float() => s,
                    _ => {
                        return Err(c.err_at(
                            at,
                            format!("Float attribute of non-float type {}", describe(&ty)),
                        ));
                    }
                };
                let bits = if s.bit_width() <= 8 {
                    c.u8()? as u64
                } else {
                    c.signed_varint()? as u64
                };
                Attribute::Float { ty, bits }
            }
            tag::BOOL => Attribute::Bool(c.bool()?),
            tag::TYPE => Attribute::Type(self.ty(c)?),
            tag::STRING => Attribute::String(self.string(c)?),
            tag::ARRAY => Attribute::Array(self.read_tagged_list(c, depth)?),
            tag::DENSE_ELEMENTS => {
                let ty = self.ty(c)?;
                let data = self.constant(c)?;
                Attribute::DenseElements { ty, data }
            }
            tag::DIV_BY => {
                let divisor = c.varint()?;
                let fat = c.offset();
                let flags = c.u8()?;
                if flags & !3 != 0 {
                    return Err(c.err_at(fat, format!("unknown div_by flags {flags:#x}")));
                }
                let every = if flags & 1 != 0 {
                    Some(c.signed_varint()?)
                } else {
                    None
                };
                let along = if flags & 2 != 0 {
                    Some(c.signed_varint()?)
                } else {
                    None
                };
                Attribute::DivBy {
                    divisor,
                    every,
                    along,
                }
            }
            tag::SAME_ELEMENTS => Attribute::SameElements(c.i64_list("same_elements value")?),
            tag::DICTIONARY => Attribute::Dictionary(self.read_dict_untagged(c, depth)?),
            tag::OPTIMIZATION_HINTS => {
                Attribute::OptimizationHints(self.read_hints_untagged(c, depth)?)
            }
            tag::BOUNDED => {
                let fat = c.offset();
                let flags = c.u8()?;
                if flags & !3 != 0 {
                    return Err(c.err_at(fat, format!("unknown bounded flags {flags:#x}")));
                }
                let lb = if flags & 1 != 0 {
                    Some(c.signed_varint()?)
                } else {
                    None
                };
                let ub = if flags & 2 != 0 {
                    Some(c.signed_varint()?)
                } else {
                    None
                };
                Attribute::Bounded { lb, ub }
            }
            tag::MULTIMEM_REDUCTION_KIND if self.version >= V13_5 => {
                let kat = c.offset();
                let k = c.varint()?;
                if k >= crate::attr::EnumKind::MultimemReductionKind.count() as u64 {
                    return Err(
                        c.err_at(kat, format!("multimem reduction kind {k} is out of range"))
                    );
                }
                Attribute::MultimemReductionKind(k as u8)
            }
            tag::EXPR_INT => Attribute::ExprInt(c.signed_varint()?),
            tag::EXPR_VAR => Attribute::ExprVar(self.string(c)?),
            tag::SYMBOLIC_TUPLE => Attribute::SymbolicTuple(self.read_tagged_list(c, depth)?),
            tag::CONCRETE_TYPE => Attribute::ConcreteType(self.ty(c)?),
            tag::EXPR_NEG => Attribute::ExprNeg(Box::new(self.read_tagged(c, depth + 1)?)),
            tag::ACCESS => {
                let vat = c.offset();
                let v = c.varint()?;
                let acc = u8::try_from(v)
                    .ok()
                    .and_then(Access::from_u8)
                    .ok_or_else(|| c.err_at(vat, format!("unknown preview$access value {v}")))?;
                Attribute::Access(acc)
            }
            tag::CONST_PARAM => {
                let name = self.string(c)?;
                let ty = self.ty(c)?;
                Attribute::ConstParam { name, ty }
            }
            tag::EXPR_BUILTIN => Attribute::ExprBuiltin(self.string(c)?),
            tag::EXPR_CONST_STR => Attribute::ExprConstStr(self.string(c)?),
            _ => match binop_from_tag(t) {
                Some(op) => {
                    let lhs = Box::new(self.read_tagged(c, depth + 1)?);
                    let rhs = Box::new(self.read_tagged(c, depth + 1)?);
                    Attribute::ExprBinary { op, lhs, rhs }
                }
                None => {
                    return Err(c.err_at(
                        at,
                        format!(
                            "unknown or unsupported attribute tag {t} at bytecode {}",
                            self.version
                        ),
                    ));
                }
            },
        };
        Ok(a)
    }

    /// Count, then tagged items.
    pub(crate) fn read_tagged_list(
        &mut self,
        c: &mut Cursor<'_>,
        depth: u32,
    ) -> Result<Vec<Attribute>, ReadError> {
        let n = c.count(1, "attribute")?;
        (0..n).map(|_| self.read_tagged(c, depth + 1)).collect()
    }

    /// Count, then (key string id, tagged value) pairs.
    pub(crate) fn read_dict_untagged(
        &mut self,
        c: &mut Cursor<'_>,
        depth: u32,
    ) -> Result<Vec<(String, Attribute)>, ReadError> {
        let n = c.count(2, "dictionary entry")?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.string(c)?;
            let v = self.read_tagged(c, depth + 1)?;
            out.push((k, v));
        }
        Ok(out)
    }

    /// Untagged hints: (arch, tagged Dictionary) pairs.
    pub(crate) fn read_hints_untagged(
        &mut self,
        c: &mut Cursor<'_>,
        depth: u32,
    ) -> Result<OptimizationHints, ReadError> {
        let n = c.count(2, "optimization hints entry")?;
        let mut by_arch = Vec::with_capacity(n);
        for _ in 0..n {
            let arch = self.string(c)?;
            let at = c.offset();
            match self.read_tagged(c, depth + 1)? {
                Attribute::Dictionary(d) => by_arch.push((arch, d)),
                _ => {
                    return Err(c.err_at(
                        at,
                        format!("optimization hints for `{arch}` are not a dictionary"),
                    ));
                }
            }
        }
        Ok(OptimizationHints { by_arch })
    }
}
