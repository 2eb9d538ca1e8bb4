//! `Display` for [`Attribute`] and the dense-elements / enum spellings the op printer shares.
//!
//! Attributes print the way tileirdisasm shows them inside ops: integers and floats with their type
//! (`-1 : i32`, `0xFF800000 : f32`), assume predicates without the dialect prefix (`div_by<16>`,
//! `bounded<0, ?>`), optimization hints as `<default = {}>` (values without types), the preview access
//! attribute as `#cuda_tile<preview$access<in>>`.

use std::fmt::{self, Display, Formatter, Write};

use super::float::format_float_bits;
use crate::attr::{Attribute, EnumKind, EnumValue, ExprBinOp, OptimizationHints};
use crate::types::{ScalarType, Type};

/// MLIR's `printEscapedString`: printable ASCII except `"` and `\` as is, everything else as `\XX`.
pub(crate) fn escape_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\22"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:02X}");
            }
        }
    }
    out.push('"');
    out
}

/// Whether `s` can print as a bare MLIR identifier (dictionary keys, symbol names).
pub(crate) fn is_bare_id(s: &str) -> bool {
    let mut cs = s.chars();
    match cs.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    cs.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
}

/// `@name`, quoted if it is not a bare identifier.
pub(crate) fn symbol(name: &str) -> String {
    if is_bare_id(name) {
        format!("@{name}")
    } else {
        format!("@{}", escape_string(name))
    }
}

fn key(name: &str) -> String {
    if is_bare_id(name) {
        name.to_string()
    } else {
        escape_string(name)
    }
}

/// The text spelling of an enum value where it differs from the bytecode table's names.
pub(crate) fn enum_text(e: EnumValue) -> &'static str {
    match (e.kind, e.value) {
        (EnumKind::IntegerOverflow, 1) => "no_signed_wrap",
        (EnumKind::IntegerOverflow, 2) => "no_unsigned_wrap",
        (EnumKind::IntegerOverflow, 3) => "no_wrap",
        _ => e.name(),
    }
}

/// Sign-extend the low `bits` bits of `v`.
fn sext(v: u64, bits: u32) -> i64 {
    if bits == 0 || bits >= 64 {
        return v as i64;
    }
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// One scalar element as MLIR prints it inside dense elements or integer/float attributes (no type).
pub(crate) fn scalar_text(t: ScalarType, bits: u64) -> String {
    if t == ScalarType::I1 {
        return if bits & 1 == 1 { "true" } else { "false" }.into();
    }
    if t.is_integer() {
        return sext(bits, t.bit_width()).to_string();
    }
    format_float_bits(t, bits)
}

fn le_bits(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .take(8)
        .enumerate()
        .fold(0u64, |acc, (i, &b)| acc | (b as u64) << (8 * i))
}

/// The element values of a dense buffer, or None if its size fits no encoding MLIR accepts.
///
/// A buffer of one element is a splat. i1 buffers follow MLIR: one byte `00`/`FF` is a splat, otherwise the
/// elements are packed one bit each (LSB first); a buffer with one byte per element is also accepted.
fn elements(t: ScalarType, count: usize, data: &[u8]) -> Option<Vec<u64>> {
    if t == ScalarType::I1 {
        if data.len() == 1 && (count == 1 || data[0] == 0 || data[0] == 0xff) {
            return Some(vec![u64::from(data[0] != 0); count.max(1)]);
        }
        if data.len() == count.div_ceil(8) {
            return Some(
                (0..count)
                    .map(|i| u64::from(data[i / 8] >> (i % 8) & 1))
                    .collect(),
            );
        }
        if data.len() == count {
            return Some(data.iter().map(|&b| u64::from(b != 0)).collect());
        }
        return None;
    }
    let w = t.storage_bytes();
    if data.len() == w {
        return Some(vec![le_bits(data); count.max(1)]);
    }
    if data.len() != w * count {
        return None;
    }
    Some(data.chunks(w).map(le_bits).collect())
}

/// The inside of a dense-elements literal for a tile of `t` with `shape`: `1`, `[1, 2]`, `[[…], […]]`, or
/// `"0x…"` (the raw buffer in hex) for more than 100 distinct elements, as MLIR prints it.
pub(crate) fn dense_text(t: ScalarType, shape: &[i64], data: &[u8]) -> String {
    let count = shape.iter().map(|&d| d.max(0) as usize).product::<usize>();
    let hex = || {
        let mut s = String::from("\"0x");
        for b in data {
            let _ = write!(s, "{b:02X}");
        }
        s.push('"');
        s
    };
    let Some(vals) = elements(t, count, data) else {
        return hex();
    };
    if vals.iter().all(|&v| v == vals[0]) {
        return scalar_text(t, vals[0]);
    }
    if count > 100 {
        return hex();
    }
    let mut out = String::new();
    nested(&mut out, t, shape, &vals);
    out
}

fn nested(out: &mut String, t: ScalarType, shape: &[i64], vals: &[u64]) {
    let Some((&first, rest)) = shape.split_first() else {
        if let Some(&v) = vals.first() {
            out.push_str(&scalar_text(t, v));
        }
        return;
    };
    let inner: usize = rest.iter().map(|&d| d.max(0) as usize).product();
    out.push('[');
    for i in 0..first.max(0) as usize {
        if i > 0 {
            out.push_str(", ");
        }
        let lo = (i * inner).min(vals.len());
        let hi = ((i + 1) * inner).min(vals.len());
        nested(out, t, rest, &vals[lo..hi]);
    }
    out.push(']');
}

/// Scalar element type and shape of a dense-elements type (None if it is not a tile of scalars).
pub(crate) fn dense_shape(ty: &Type) -> Option<(ScalarType, &[i64])> {
    match ty {
        Type::Tile { elem, shape } => match **elem {
            Type::Scalar(s) => Some((s, shape)),
            _ => None,
        },
        Type::Scalar(s) => Some((*s, &[])),
        _ => None,
    }
}

fn scalar_of(ty: &Type) -> Option<ScalarType> {
    match ty {
        Type::Scalar(s) => Some(*s),
        _ => None,
    }
}

/// An attribute value without its type, as MLIR's `printAttributeWithoutType` (used in optimization hints).
pub(crate) fn attr_without_type(a: &Attribute) -> String {
    match a {
        Attribute::Integer { ty, value } => match scalar_of(ty) {
            Some(s) => scalar_text(s, *value),
            None => value.to_string(),
        },
        Attribute::Float { ty, bits } => match scalar_of(ty) {
            Some(s) => scalar_text(s, *bits),
            None => format!("0x{bits:X}"),
        },
        other => other.to_string(),
    }
}

/// Entries of a dictionary in the order MLIR keeps them: sorted by key (byte order), whatever order they were
/// built or read in. The sort is stable, so duplicate keys keep their relative order.
fn sorted_by_key<T>(items: &[(String, T)]) -> Vec<&(String, T)> {
    let mut v: Vec<&(String, T)> = items.iter().collect();
    v.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    v
}

/// `<arch = {key = value, …}, …>`, both levels sorted by key as tileirdisasm prints them.
pub(crate) fn hints_text(h: &OptimizationHints) -> String {
    let mut s = String::from("<");
    for (i, (arch, dict)) in sorted_by_key(&h.by_arch).into_iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{} = {{", key(arch));
        for (j, (k, v)) in sorted_by_key(dict).into_iter().enumerate() {
            if j > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{} = {}", key(k), attr_without_type(v));
        }
        s.push('}');
    }
    s.push('>');
    s
}

fn expr_op(op: ExprBinOp) -> &'static str {
    match op {
        ExprBinOp::Add => "+",
        ExprBinOp::Sub => "-",
        ExprBinOp::Mul => "*",
        ExprBinOp::Div => "/",
        ExprBinOp::FloorDiv => "floordiv",
        ExprBinOp::CeilDiv => "ceildiv",
    }
}

impl Display for Attribute {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Attribute::Integer { ty, .. } if *ty == Type::Scalar(ScalarType::I1) => {
                f.write_str(&attr_without_type(self))
            }
            Attribute::Integer { ty, .. } | Attribute::Float { ty, .. } => {
                write!(f, "{} : {ty}", attr_without_type(self))
            }
            Attribute::Bool(b) => write!(f, "{b}"),
            Attribute::Type(t) => write!(f, "{t}"),
            Attribute::String(s) => f.write_str(&escape_string(s)),
            Attribute::Array(items) => {
                f.write_char('[')?;
                super::types::comma_list(f, items)?;
                f.write_char(']')
            }
            Attribute::DenseElements { ty, data } => match dense_shape(ty) {
                Some((s, shape)) => write!(f, "dense<{}> : {ty}", dense_text(s, shape, data)),
                None => write!(f, "dense<\"0x{}\"> : {ty}", hex_bytes(data)),
            },
            Attribute::DivBy {
                divisor,
                every,
                along,
            } => {
                write!(f, "div_by<{divisor}")?;
                if let (Some(e), Some(a)) = (every, along) {
                    write!(f, ", every {e} along {a}")?;
                }
                f.write_char('>')
            }
            Attribute::SameElements(v) => {
                f.write_str("same_elements<[")?;
                super::types::comma_list(f, v)?;
                f.write_str("]>")
            }
            Attribute::Dictionary(items) => {
                f.write_char('{')?;
                for (i, (k, v)) in sorted_by_key(items).into_iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} = {v}", key(k))?;
                }
                f.write_char('}')
            }
            Attribute::OptimizationHints(h) => f.write_str(&hints_text(h)),
            Attribute::Bounded { lb, ub } => {
                let b = |v: &Option<i64>| v.map_or("?".to_string(), |x| x.to_string());
                write!(f, "bounded<{}, {}>", b(lb), b(ub))
            }
            Attribute::MultimemReductionKind(k) => {
                let names = EnumKind::MultimemReductionKind.names();
                match names.get(*k as usize) {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{k}"),
                }
            }
            Attribute::Access(a) => write!(f, "#cuda_tile<preview$access<{}>>", a.name()),
            // As an extern declaration's `<[name: kind, …]>` list shows it.
            Attribute::ConstParam { name, ty } => write!(f, "{}: {ty}", key(name)),
            Attribute::ExprInt(v) => write!(f, "{v}"),
            Attribute::ExprVar(n) => f.write_str(n),
            Attribute::ExprBinary { op, lhs, rhs } => write!(f, "({lhs} {} {rhs})", expr_op(*op)),
            Attribute::ExprNeg(x) => write!(f, "-{x}"),
            Attribute::SymbolicTuple(items) => {
                f.write_char('(')?;
                super::types::comma_list(f, items)?;
                f.write_char(')')
            }
            Attribute::ConcreteType(t) => write!(f, "{t}"),
            Attribute::ExprBuiltin(n) => f.write_str(n),
            Attribute::ExprConstStr(s) => f.write_str(&escape_string(s)),
        }
    }
}

fn hex_bytes(data: &[u8]) -> String {
    data.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02X}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_forms() {
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(
            dense_text(ScalarType::F32, &[4], &f32s(&[1.5])),
            "1.500000e+00"
        );
        assert_eq!(
            dense_text(ScalarType::F32, &[2, 2], &f32s(&[1.0, 2.0, 3.0, 4.0])),
            "[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]"
        );
        assert_eq!(
            dense_text(ScalarType::I1, &[4], &[0x05]),
            "[true, false, true, false]"
        );
        assert_eq!(dense_text(ScalarType::I1, &[4], &[0x0f]), "true");
        assert_eq!(dense_text(ScalarType::I8, &[2], &[0xff, 0x7f]), "[-1, 127]");
        assert_eq!(
            escape_string("hello \"world\"\n"),
            "\"hello \\22world\\22\\0A\""
        );
    }

    #[test]
    fn attribute_forms() {
        assert_eq!(
            Attribute::f32(f32::NEG_INFINITY).to_string(),
            "0xFF800000 : f32"
        );
        assert_eq!(Attribute::i32(-1).to_string(), "-1 : i32");
        assert_eq!(
            Attribute::Bounded {
                lb: Some(0),
                ub: None
            }
            .to_string(),
            "bounded<0, ?>"
        );
        assert_eq!(
            Attribute::OptimizationHints(OptimizationHints::empty_default()).to_string(),
            "<default = {}>"
        );
    }
}
