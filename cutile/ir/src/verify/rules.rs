//! Per-op type rules: what each op requires of its operand, result and block-argument types and of its
//! attribute values, as enforced by tileiras' own verifier (element-type families, same-type operands,
//! shape agreement of mma/broadcast/reshape/views, memory-ordering combinations, terminator types).
//!
//! The builder runs [`check_op`] on every op it creates and the verifier on every op it walks, so both report
//! the same message for the same mistake. Messages never include the mnemonic; callers prefix it.

use crate::attr::{Attribute, EnumKind, OptimizationHints};
use crate::ir::{Block, FunctionKind, Module, OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::{DYNAMIC, PreviewType, ScalarType, Type};

use super::text::{attr_text, type_text as tt, types_text};
use super::types::*;

/// What an enclosing region op tells the terminators nested in it (innermost last in a frame stack).
#[derive(Clone, Debug)]
pub struct Frame {
    pub opcode: Opcode,
    /// The region op's result types.
    pub results: Vec<Type>,
    /// For/loop: the carried value types; reduce/scan: the rank-0 tile types the body yields.
    pub iter: Vec<Type>,
}

impl Frame {
    /// The frame of a function body.
    pub fn entry() -> Frame {
        Frame {
            opcode: Opcode::Entry,
            results: vec![],
            iter: vec![],
        }
    }

    /// The frame an existing region op gives to the ops of its regions.
    pub fn of_op(values: &[Type], op: &Operation) -> Frame {
        let ty = |v: &ValueId| values.get(v.0 as usize).cloned().unwrap_or(Type::Token);
        let results: Vec<Type> = op.results.iter().map(ty).collect();
        let iter = match op.opcode {
            Opcode::For | Opcode::Loop => op.operand_group("initValues").iter().map(ty).collect(),
            Opcode::Reduce | Opcode::Scan => op
                .operand_group("operands")
                .iter()
                .map(|v| reduce_arg_type(&ty(v)))
                .collect(),
            _ => vec![],
        };
        Frame {
            opcode: op.opcode,
            results,
            iter,
        }
    }
}

/// The rank-0 tile type a reduce/scan body sees for an operand of type `t`.
pub fn reduce_arg_type(t: &Type) -> Type {
    match t {
        Type::Tile { elem, .. } => Type::Tile {
            elem: elem.clone(),
            shape: vec![],
        },
        other => other.clone(),
    }
}

/// What a rule may look at besides the op itself.
#[derive(Clone, Copy, Debug)]
pub struct Env<'a> {
    pub module: &'a Module,
    /// The function's value arena.
    pub values: &'a [Type],
    /// Enclosing region ops, outermost (the function body) first.
    pub frames: &'a [Frame],
    /// Also check optimization hints (tileiras only warns about bad ones unless `--Werr-hints`).
    pub strict_hints: bool,
}

type R = Result<(), String>;

// Rounding mode encodings.
const RM_NEAREST_EVEN: u8 = 0;
const RM_ZERO: u8 = 1;
const RM_NEG_INF: u8 = 2;
const RM_POS_INF: u8 = 3;
const RM_APPROX: u8 = 4;
const RM_FULL: u8 = 5;
const RM_NEAREST_INT_TO_ZERO: u8 = 6;
const RM_NAMES: [&str; 8] = [
    "nearest_even",
    "zero",
    "negative_inf",
    "positive_inf",
    "approx",
    "full",
    "nearest_int_to_zero",
    "nearest_away",
];

struct Ck<'a> {
    env: Env<'a>,
    op: &'a Operation,
}

impl<'a> Ck<'a> {
    fn ty(&self, v: ValueId) -> Result<&'a Type, String> {
        self.env
            .values
            .get(v.0 as usize)
            .ok_or_else(|| format!("value %{} does not exist in this function", v.0))
    }
    fn group(&self, name: &str) -> Result<Vec<&'a Type>, String> {
        self.op
            .operand_group(name)
            .iter()
            .map(|v| self.ty(*v))
            .collect()
    }
    fn one(&self, name: &str) -> Result<&'a Type, String> {
        match self.op.operand_group(name) {
            [v] => self.ty(*v),
            other => Err(format!(
                "operand `{name}` needs exactly one value, got {}",
                other.len()
            )),
        }
    }
    fn opt(&self, name: &str) -> Result<Option<&'a Type>, String> {
        match self.op.operand_group(name) {
            [] => Ok(None),
            [v] => Ok(Some(self.ty(*v)?)),
            other => Err(format!(
                "operand `{name}` takes at most one value, got {}",
                other.len()
            )),
        }
    }
    fn res(&self, i: usize) -> Result<&'a Type, String> {
        let v = self
            .op
            .results
            .get(i)
            .ok_or_else(|| format!("missing result #{i}"))?;
        self.ty(*v)
    }
    fn results(&self) -> Result<Vec<&'a Type>, String> {
        self.op.results.iter().map(|v| self.ty(*v)).collect()
    }
    fn enum_(&self, name: &str) -> Option<u8> {
        match self.op.attr(name) {
            Some(OpAttr::Enum(e)) => Some(e.value),
            _ => None,
        }
    }
    fn unit(&self, name: &str) -> bool {
        matches!(self.op.attr(name), Some(OpAttr::Unit))
    }
    fn int_attr(&self, name: &str) -> Option<u64> {
        match self.op.attr(name) {
            Some(OpAttr::Int(v)) => Some(*v),
            _ => None,
        }
    }
    fn str_attr(&self, name: &str) -> Option<&'a str> {
        match self.op.attr(name) {
            Some(OpAttr::Str(s)) => Some(s),
            _ => None,
        }
    }

    // ---- families ----

    fn float_tile(&self, t: &Type, what: &str) -> Result<ScalarType, String> {
        match scalar_tile(t) {
            Some((s, _)) if is_base_float(s) => Ok(s),
            _ => Err(format!(
                "{what} must be a tile of f16, bf16, f32 or f64, got {}",
                tt(t)
            )),
        }
    }
    fn int_tile(&self, t: &Type, what: &str) -> Result<ScalarType, String> {
        match scalar_tile(t) {
            Some((s, _)) if is_int(s) => Ok(s),
            _ => Err(format!(
                "{what} must be a tile of i1, i8, i16, i32 or i64, got {}",
                tt(t)
            )),
        }
    }
    fn same(&self, a: &Type, b: &Type, what: &str) -> R {
        if a == b {
            Ok(())
        } else {
            Err(format!("{what} differ: {} vs {}", tt(a), tt(b)))
        }
    }

    fn unary_float(&self) -> Result<ScalarType, String> {
        let src = self.one("source")?;
        let s = self.float_tile(src, "source")?;
        self.same(src, self.res(0)?, "source and result types")?;
        Ok(s)
    }
    fn binary_float(&self, l: &str, r: &str) -> Result<ScalarType, String> {
        let (a, b) = (self.one(l)?, self.one(r)?);
        let s = self.float_tile(a, l)?;
        self.same(a, b, "operand types")?;
        self.same(a, self.res(0)?, "operand and result types")?;
        Ok(s)
    }
    fn unary_int(&self) -> Result<ScalarType, String> {
        let src = self.one("source")?;
        let s = self.int_tile(src, "source")?;
        self.same(src, self.res(0)?, "source and result types")?;
        Ok(s)
    }
    fn binary_int(&self, l: &str, r: &str) -> Result<ScalarType, String> {
        let (a, b) = (self.one(l)?, self.one(r)?);
        let s = self.int_tile(a, l)?;
        self.same(a, b, "operand types")?;
        self.same(a, self.res(0)?, "operand and result types")?;
        Ok(s)
    }
    fn ftz_f32(&self, s: ScalarType) -> R {
        if self.unit("flush_to_zero") && s != ScalarType::F32 {
            return Err(format!("flush_to_zero is only supported for f32, got {s}"));
        }
        Ok(())
    }
    fn rounding(&self, name: &str, allowed: &[u8]) -> Result<u8, String> {
        let rm = self
            .enum_(name)
            .ok_or_else(|| format!("missing `{name}`"))?;
        if !allowed.contains(&rm) {
            let names: Vec<&str> = allowed.iter().map(|&r| RM_NAMES[r as usize]).collect();
            return Err(format!(
                "rounding mode {} is not allowed here; expected one of [{}]",
                RM_NAMES.get(rm as usize).unwrap_or(&"?"),
                names.join(", ")
            ));
        }
        Ok(rm)
    }
    fn approx_f32(&self, rm: u8, s: ScalarType) -> R {
        if (rm == RM_APPROX || rm == RM_FULL) && s != ScalarType::F32 {
            return Err(format!(
                "rounding mode {} is only supported for f32, got {s}",
                RM_NAMES[rm as usize]
            ));
        }
        Ok(())
    }
    fn same_shape(&self, a: &Type, b: &Type, what: &str) -> R {
        if a.tile_shape() != b.tile_shape() || a.tile_shape().is_none() {
            return Err(format!("{what} shapes differ: {} vs {}", tt(a), tt(b)));
        }
        Ok(())
    }
    fn token_result(&self, i: usize) -> R {
        let t = self.res(i)?;
        if !t.is_token() {
            return Err(format!("result #{i} must be a token, got {}", tt(t)));
        }
        Ok(())
    }
    fn token_operand(&self, name: &str) -> R {
        if let Some(t) = self.opt(name)?
            && !t.is_token()
        {
            return Err(format!("operand `{name}` must be a token, got {}", tt(t)));
        }
        Ok(())
    }
}

/// Check one op against the rules of its opcode. `Err` holds the message without the mnemonic.
pub fn check_op(env: Env<'_>, op: &Operation) -> R {
    let c = Ck { env, op };
    for t in c.results()? {
        type_ok(t)?;
    }
    use Opcode::*;
    match op.opcode {
        AbsF | Ceil | Cos | CosH | Floor | Log | Log2 | NegF | Sin | SinH | Tan => {
            c.unary_float().map(|_| ())
        }
        Exp | TanH => {
            let s = c.unary_float()?;
            let rm = c.rounding("rounding_mode", &[RM_FULL, RM_APPROX])?;
            if rm == RM_APPROX && s != ScalarType::F32 {
                return Err(format!(
                    "rounding mode approx is only supported for f32, got {s}"
                ));
            }
            Ok(())
        }
        Exp2 | Rsqrt => {
            let s = c.unary_float()?;
            c.ftz_f32(s)
        }
        Sqrt => {
            let s = c.unary_float()?;
            let rm = c.rounding(
                "rounding_mode",
                &[RM_NEAREST_EVEN, RM_ZERO, RM_NEG_INF, RM_POS_INF, RM_APPROX],
            )?;
            c.approx_f32(rm, s)?;
            c.ftz_f32(s)
        }
        AddF | SubF | MulF => {
            let s = c.binary_float("lhs", "rhs")?;
            c.rounding(
                "rounding_mode",
                &[RM_NEAREST_EVEN, RM_ZERO, RM_NEG_INF, RM_POS_INF],
            )?;
            c.ftz_f32(s)
        }
        DivF => {
            let s = c.binary_float("lhs", "rhs")?;
            let rm = c.rounding(
                "rounding_mode",
                &[
                    RM_NEAREST_EVEN,
                    RM_ZERO,
                    RM_NEG_INF,
                    RM_POS_INF,
                    RM_APPROX,
                    RM_FULL,
                ],
            )?;
            c.approx_f32(rm, s)?;
            c.ftz_f32(s)
        }
        RemF => c.binary_float("lhs", "rhs").map(|_| ()),
        MaxF | MinF => {
            let s = c.binary_float("lhs", "rhs")?;
            c.ftz_f32(s)
        }
        FPowF => c.binary_float("source", "exponent").map(|_| ()),
        Atan2 => c.binary_float("x", "y").map(|_| ()),
        Fma => {
            let (a, b, acc) = (c.one("lhs")?, c.one("rhs")?, c.one("acc")?);
            let s = c.float_tile(a, "lhs")?;
            c.same(a, b, "operand types")?;
            c.same(a, acc, "operand and accumulator types")?;
            c.same(a, c.res(0)?, "operand and result types")?;
            c.rounding(
                "rounding_mode",
                &[RM_NEAREST_EVEN, RM_ZERO, RM_NEG_INF, RM_POS_INF],
            )?;
            c.ftz_f32(s)
        }
        AbsI => c.unary_int().map(|_| ()),
        NegI => {
            c.unary_int()?;
            if c.enum_("overflow") == Some(2) {
                return Err("overflow flag nuw is not supported (negation is signed)".into());
            }
            Ok(())
        }
        AddI | SubI | MulI | ShLI | AndI | OrI | XOrI | ShRI | MaxI | MinI | RemI => {
            c.binary_int("lhs", "rhs").map(|_| ())
        }
        MulhiI => c.binary_int("x", "y").map(|_| ()),
        DivI => {
            c.binary_int("lhs", "rhs")?;
            let rm = c.rounding("rounding", &[RM_ZERO, RM_NEG_INF, RM_POS_INF])?;
            if rm == RM_NEG_INF && c.enum_("signedness") == Some(0) {
                return Err("rounding negative_inf is not allowed with unsigned division".into());
            }
            Ok(())
        }
        CmpF | CmpI => {
            let (a, b) = (c.one("lhs")?, c.one("rhs")?);
            if op.opcode == CmpF {
                c.float_tile(a, "lhs")?;
            } else {
                c.int_tile(a, "lhs")?;
            }
            c.same(a, b, "operand types")?;
            let r = c.res(0)?;
            let want = a
                .tile_shape()
                .map(|sh| Type::tile(ScalarType::I1, sh))
                .unwrap_or(Type::Token);
            if *r != want {
                return Err(format!(
                    "result must be {} (i1 of the operand shape), got {}",
                    tt(&want),
                    tt(r)
                ));
            }
            Ok(())
        }
        Constant => check_constant(&c),
        Iota => {
            let r = c.res(0)?;
            let (s, sh) = scalar_tile(r)
                .filter(|(s, _)| is_int(*s))
                .ok_or_else(|| format!("result must be an integer tile, got {}", tt(r)))?;
            if sh.len() != 1 {
                return Err(format!("result must be a 1-d tile, got {}", tt(r)));
            }
            if s.bit_width() < 64 && sh[0] as u64 > (1u64 << s.bit_width()) {
                return Err(format!("{} elements do not fit in {s}", sh[0]));
            }
            Ok(())
        }
        Select => {
            let (cond, t, f) = (
                c.one("cond")?,
                c.one("val_if_true")?,
                c.one("val_if_false")?,
            );
            if !matches!(scalar_tile(cond), Some((ScalarType::I1, _))) {
                return Err(format!("condition must be an i1 tile, got {}", tt(cond)));
            }
            c.same(t, f, "value types")?;
            c.same(t, c.res(0)?, "value and result types")?;
            c.same_shape(cond, t, "condition and value")?;
            if matches!(scalar_tile(t), Some((ScalarType::F4E2M1FN, _))) {
                return Err("cannot select on f4E2M1FN tiles".into());
            }
            Ok(())
        }
        Bitcast => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (a, b) = match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) => (a, b),
                _ => {
                    return Err(format!(
                        "source and result must be numeric tiles, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            };
            c.same_shape(src, r, "source and result")?;
            if mlir_width(a) != mlir_width(b) {
                return Err(format!(
                    "bit widths differ: {} ({} bits) -> {} ({} bits)",
                    tt(src),
                    mlir_width(a),
                    tt(r),
                    mlir_width(b)
                ));
            }
            Ok(())
        }
        ExtI | TruncI => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            let int_or_i4 = |t: &Type| scalar_tile(t).map(|(s, _)| s).filter(|s| s.is_integer());
            let (a, b) = match (int_or_i4(src), int_or_i4(r)) {
                (Some(a), Some(b)) => (a, b),
                _ => {
                    return Err(format!(
                        "source and result must be integer tiles, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            };
            c.same_shape(src, r, "source and result")?;
            if op.opcode == ExtI && b.bit_width() <= a.bit_width() {
                return Err(format!("must extend to a wider integer, got {a} -> {b}"));
            }
            if op.opcode == TruncI && b.bit_width() >= a.bit_width() {
                return Err(format!(
                    "must truncate to a narrower integer, got {a} -> {b}"
                ));
            }
            Ok(())
        }
        FToF => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            let (a, b) = match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) if a.is_float() && b.is_float() => (a, b),
                _ => {
                    return Err(format!(
                        "source and result must be float tiles, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            };
            c.same_shape(src, r, "source and result")?;
            if a == b {
                return Err(format!("converting {} to itself is not allowed", tt(src)));
            }
            if b == ScalarType::F8E8M0FNU {
                c.rounding("rounding_mode", &[RM_ZERO, RM_POS_INF])?;
            } else {
                c.rounding("rounding_mode", &[RM_NEAREST_EVEN, RM_ZERO])?;
            }
            Ok(())
        }
        FToI => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) if a.is_float() && is_int(b) => {}
                _ => {
                    return Err(format!(
                        "needs a float tile -> integer tile, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            }
            c.same_shape(src, r, "source and result")?;
            c.rounding("rounding_mode", &[RM_NEAREST_INT_TO_ZERO])?;
            Ok(())
        }
        IToF => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) if is_int(a) && b.is_float() => {
                    if b == ScalarType::F8E8M0FNU {
                        return Err("integer to f8E8M0FNU conversion is not supported".into());
                    }
                }
                _ => {
                    return Err(format!(
                        "needs an integer tile -> float tile, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            }
            c.same_shape(src, r, "source and result")?;
            c.rounding("rounding_mode", &[RM_NEAREST_EVEN])?;
            Ok(())
        }
        IntToPtr => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            if !matches!(scalar_tile(src), Some((ScalarType::I64, _))) || pointer_tile(r).is_none()
            {
                return Err(format!(
                    "needs an i64 tile -> pointer tile, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            c.same_shape(src, r, "source and result")
        }
        PtrToInt => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            if pointer_tile(src).is_none() || !matches!(scalar_tile(r), Some((ScalarType::I64, _)))
            {
                return Err(format!(
                    "needs a pointer tile -> i64 tile, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            c.same_shape(src, r, "source and result")
        }
        PtrToPtr => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            if pointer_tile(src).is_none() || pointer_tile(r).is_none() {
                return Err(format!("needs pointer tiles, got {} -> {}", tt(src), tt(r)));
            }
            c.same_shape(src, r, "source and result")
        }
        Broadcast => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = tile_parts(src)?;
            let (re, rs) = tile_parts(r)?;
            if se != re {
                return Err(format!("element types differ: {} -> {}", tt(src), tt(r)));
            }
            if ss.len() != rs.len() {
                return Err(format!(
                    "ranks differ: {} -> {} (reshape first to add unit dimensions)",
                    tt(src),
                    tt(r)
                ));
            }
            if ss.iter().zip(rs).any(|(&a, &b)| a != b && a != 1) {
                return Err(format!(
                    "cannot broadcast {} to {}: each source dimension must equal the target or be 1",
                    tt(src),
                    tt(r)
                ));
            }
            Ok(())
        }
        Reshape => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = tile_parts(src)?;
            let (re, rs) = tile_parts(r)?;
            if se != re {
                return Err(format!("element types differ: {} -> {}", tt(src), tt(r)));
            }
            let (n1, n2): (i64, i64) = (ss.iter().product(), rs.iter().product());
            if n1 != n2 {
                return Err(format!(
                    "element counts differ: {} has {n1}, {} has {n2}",
                    tt(src),
                    tt(r)
                ));
            }
            Ok(())
        }
        Permute => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = tile_parts(src)?;
            let (re, rs) = tile_parts(r)?;
            if se != re {
                return Err(format!("element types differ: {} -> {}", tt(src), tt(r)));
            }
            let perm = match op.attr("permutation") {
                Some(OpAttr::I32Array(p)) => p,
                _ => return Err("missing `permutation`".into()),
            };
            if ss.len() < 2 {
                return Err(format!("source must have rank 2 or more, got {}", tt(src)));
            }
            let mut seen = vec![false; ss.len()];
            if perm.len() != ss.len()
                || perm.iter().any(|&p| {
                    p < 0
                        || p as usize >= ss.len()
                        || std::mem::replace(&mut seen[p as usize], true)
                })
            {
                return Err(format!(
                    "permutation {perm:?} is not a permutation of 0..{}",
                    ss.len()
                ));
            }
            let want: Vec<i64> = perm.iter().map(|&p| ss[p as usize]).collect();
            if rs != want.as_slice() {
                return Err(format!(
                    "result shape {rs:?} does not match the permuted source shape {want:?}"
                ));
            }
            Ok(())
        }
        Cat => {
            let (a, b, r) = (c.one("lhs")?, c.one("rhs")?, c.res(0)?);
            let (ae, as_) = tile_parts(a)?;
            let (be, bs) = tile_parts(b)?;
            let (re, rs) = tile_parts(r)?;
            if ae != be || ae != re {
                return Err(format!(
                    "element types differ: {}, {} -> {}",
                    tt(a),
                    tt(b),
                    tt(r)
                ));
            }
            if as_.len() != bs.len() || as_.len() != rs.len() {
                return Err(format!("ranks differ: {}, {} -> {}", tt(a), tt(b), tt(r)));
            }
            let dim = c.int_attr("dim").unwrap_or(u64::MAX) as usize;
            if dim >= as_.len() {
                return Err(format!("dim {dim} is out of range for rank {}", as_.len()));
            }
            for i in 0..as_.len() {
                let ok = if i == dim {
                    as_[i] + bs[i] == rs[i]
                } else {
                    as_[i] == bs[i] && as_[i] == rs[i]
                };
                if !ok {
                    return Err(format!(
                        "cannot concatenate {} and {} along dim {dim} into {}",
                        tt(a),
                        tt(b),
                        tt(r)
                    ));
                }
            }
            Ok(())
        }
        Extract | Insert => {
            let (big, small, r) = if op.opcode == Extract {
                let s = c.one("source")?;
                (s, c.res(0)?, c.res(0)?)
            } else {
                let d = c.one("destination")?;
                let r = c.res(0)?;
                c.same(d, r, "destination and result types")?;
                (d, c.one("source")?, r)
            };
            let _ = r;
            let (be, bs) = tile_parts(big)?;
            let (se, ss) = tile_parts(small)?;
            if be != se {
                return Err(format!(
                    "element types differ: {} vs {}",
                    tt(big),
                    tt(small)
                ));
            }
            if bs.len() != ss.len() {
                return Err(format!("ranks differ: {} vs {}", tt(big), tt(small)));
            }
            if bs.iter().zip(ss).any(|(&b, &s)| b % s != 0) {
                return Err(format!(
                    "each dimension of {} must be a multiple of the one of {}",
                    tt(big),
                    tt(small)
                ));
            }
            let idx = c.group("indices")?;
            if idx.len() != bs.len() {
                return Err(format!("expected {} indices, got {}", bs.len(), idx.len()));
            }
            for (i, t) in idx.iter().enumerate() {
                if !is_scalar_of(t, ScalarType::I32) {
                    return Err(format!("index {i} must be tile<i32>, got {}", tt(t)));
                }
            }
            Ok(())
        }
        Pack | Unpack => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = scalar_tile(src)
                .ok_or_else(|| format!("source must be a numeric tile, got {}", tt(src)))?;
            let (re, rs) = scalar_tile(r)
                .ok_or_else(|| format!("result must be a numeric tile, got {}", tt(r)))?;
            let packed = if op.opcode == Pack { re } else { se };
            if packed != ScalarType::I8 {
                return Err(format!(
                    "the packed side must be an i8 tile, got {}",
                    tt(if op.opcode == Pack { r } else { src })
                ));
            }
            if ss.len() != 1 || rs.len() != 1 {
                return Err(format!(
                    "source and result must be rank-1 tiles, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            if se.bit_width() == re.bit_width() {
                return Err(format!(
                    "element widths must differ, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            let bits = |s: ScalarType, n: i64| s.bit_width() as i64 * n;
            if bits(se, ss[0]) != bits(re, rs[0]) {
                return Err(format!("sizes in bytes differ: {} -> {}", tt(src), tt(r)));
            }
            Ok(())
        }
        Offset => {
            let (p, off, r) = (c.one("ptr")?, c.one("offset")?, c.res(0)?);
            if pointer_tile(p).is_none() {
                return Err(format!("ptr must be a pointer tile, got {}", tt(p)));
            }
            c.int_tile(off, "offset")?;
            c.same_shape(p, off, "pointer and offset")?;
            c.same(p, r, "pointer and result types")
        }
        Assume => check_assume(&c),
        MakeToken => c.token_result(0),
        JoinTokens => {
            let toks = c.group("tokens")?;
            if toks.len() < 2 {
                return Err(format!("needs two or more tokens, got {}", toks.len()));
            }
            if let Some(t) = toks.iter().find(|t| !t.is_token()) {
                return Err(format!("operands must be tokens, got {}", tt(t)));
            }
            c.token_result(0)
        }
        MakeTensorView => check_make_tensor_view(&c),
        MakePartitionView | MakeStridedView | MakeGatherScatterView => {
            let (tv, r) = (c.one("tensor_view")?, c.res(0)?);
            let inner = match (op.opcode, r) {
                (MakePartitionView, Type::PartitionView { tensor_view, .. })
                | (MakeStridedView, Type::StridedView { tensor_view, .. })
                | (MakeGatherScatterView, Type::GatherScatterView { tensor_view, .. }) => {
                    tensor_view
                }
                _ => {
                    return Err(format!(
                        "result must be a {} type, got {}",
                        &op.opcode.mnemonic()["make_".len()..],
                        tt(r)
                    ));
                }
            };
            if **inner != *tv {
                return Err(format!(
                    "operand type {} differs from the view's tensor_view {}",
                    tt(tv),
                    tt(inner)
                ));
            }
            Ok(())
        }
        GetTileBlockId | GetNumTileBlocks => {
            for (i, t) in c.results()?.iter().enumerate() {
                if !is_scalar_of(t, ScalarType::I32) {
                    return Err(format!("result #{i} must be tile<i32>, got {}", tt(t)));
                }
            }
            Ok(())
        }
        GetIndexSpaceShape | GetTensorShape => {
            let src = c.one("src")?;
            let rank = if op.opcode == GetTensorShape {
                match src {
                    Type::TensorView { shape, .. } => shape.len(),
                    _ => return Err(format!("src must be a tensor_view, got {}", tt(src))),
                }
            } else {
                view_info(src)
                    .ok_or_else(|| format!("src must be a view, got {}", tt(src)))?
                    .tile_shape
                    .len()
            };
            let rs = c.results()?;
            if rs.len() != rank {
                return Err(format!("expected {rank} results, got {}", rs.len()));
            }
            if let Some(t) = rs.iter().find(|t| !is_int_scalar(t)) {
                return Err(format!(
                    "results must be rank-0 integer tiles, got {}",
                    tt(t)
                ));
            }
            if rs.windows(2).any(|w| w[0] != w[1]) {
                return Err(format!(
                    "results must share one type, got {}",
                    types_text(&rs.iter().map(|t| (*t).clone()).collect::<Vec<_>>())
                ));
            }
            Ok(())
        }
        LoadViewTko
        | StoreViewTko
        | AtomicRedViewTko
        | MultimemLoadReduceViewTko
        | MultimemReduceViewTko
        | MultimemStoreViewTko => check_view_access(&c),
        LoadPtrTko | StorePtrTko => check_ptr_access(&c),
        AtomicRMWTko | AtomicCASTko => check_atomic(&c),
        PrintTko => {
            let args = c.group("args")?;
            if let Some(t) = args.iter().find(|t| !t.is_tile()) {
                return Err(format!("arguments must be tiles, got {}", tt(t)));
            }
            let fmt = c.str_attr("str").unwrap_or("");
            let want = count_format_args(fmt)?;
            if want != args.len() {
                return Err(format!(
                    "format string {fmt:?} takes {want} argument(s), got {}",
                    args.len()
                ));
            }
            c.token_operand("token")?;
            if !op.results.is_empty() {
                c.token_result(0)?;
            }
            Ok(())
        }
        Assert => {
            let cond = c.one("condition")?;
            if !matches!(scalar_tile(cond), Some((ScalarType::I1, _))) {
                return Err(format!("condition must be an i1 tile, got {}", tt(cond)));
            }
            Ok(())
        }
        MmaF | MmaI | MmaFScaled => check_mma(&c),
        For => check_for(&c),
        Loop => check_loop(&c),
        If => check_if(&c),
        Reduce | Scan => check_reduce_scan(&c),
        Yield | Continue | Break | Return => check_terminator(&c),
        GetGlobal => {
            let name = c.str_attr("name").unwrap_or("");
            let g = env
                .module
                .globals
                .iter()
                .find(|g| g.name == name)
                .ok_or_else(|| format!("no global named @{name} in the module"))?;
            let r = c.res(0)?;
            let (pointee, sh) = pointer_tile(r)
                .filter(|(_, sh)| sh.is_empty())
                .ok_or_else(|| format!("result must be a rank-0 pointer tile, got {}", tt(r)))?;
            let _ = sh;
            let gelem = g.ty.elem().cloned().unwrap_or_else(|| g.ty.clone());
            if *pointee != gelem {
                return Err(format!(
                    "result {} does not point to the element type {} of @{name}",
                    tt(r),
                    tt(&gelem)
                ));
            }
            Ok(())
        }
        Global => Err(
            "globals belong in Module::globals (the Global section), not in a function body".into(),
        ),
        Alloca => {
            let r = c.res(0)?;
            let (pointee, _) = pointer_tile(r)
                .filter(|(_, sh)| sh.is_empty())
                .ok_or_else(|| format!("result must be a rank-0 pointer tile, got {}", tt(r)))?;
            let align = c.int_attr("alignment").unwrap_or(0);
            if align == 0 || !align.is_power_of_two() {
                return Err(format!("alignment {align} must be a power of two"));
            }
            if let Type::Scalar(s) = pointee
                && align < s.storage_bytes() as u64
            {
                return Err(format!("alignment {align} is below the size of {s}"));
            }
            Ok(())
        }
        GdcLaunchDependentsTko | GdcWaitTko => {
            c.token_operand("token")?;
            c.token_result(0)
        }
        MemoryFenceAliasTko => {
            let t = c.one("token")?;
            if !t.is_token() {
                return Err(format!("operand must be a token, got {}", tt(t)));
            }
            c.token_result(0)
        }
        FPowI => {
            let (base, e, r) = (c.one("source")?, c.one("exponent")?, c.res(0)?);
            c.float_tile(base, "source")?;
            c.int_tile(e, "exponent")?;
            c.same_shape(base, e, "base and exponent")?;
            c.same(base, r, "base and result types")
        }
        PreviewCall => check_preview_call(&c),
        Module | Entry => Err("is a structural opcode and cannot appear in a function body".into()),
    }
}

/// Element and shape of a tile (of scalars or pointers).
fn tile_parts(t: &Type) -> Result<(&Type, &[i64]), String> {
    match t {
        Type::Tile { elem, shape } => Ok((elem, shape)),
        _ => Err(format!("expected a tile, got {}", tt(t))),
    }
}

/// Bit width as MLIR counts it (tf32 is 19 bits wide there).
fn mlir_width(s: ScalarType) -> u32 {
    if s == ScalarType::TF32 {
        19
    } else {
        s.bit_width()
    }
}

fn check_constant(c: &Ck<'_>) -> R {
    let r = c.res(0)?;
    let (s, sh) =
        scalar_tile(r).ok_or_else(|| format!("result must be a numeric tile, got {}", tt(r)))?;
    if s == ScalarType::I4 {
        return Err("i4 constants are not supported; build them as i8 and pack".into());
    }
    let data = match c.op.attr("value") {
        Some(OpAttr::Dense(d)) => d,
        _ => return Err("missing `value`".into()),
    };
    let n: i64 = sh.iter().product();
    let el = s.storage_bytes();
    if data.len() != el && data.len() as i64 != el as i64 * n {
        return Err(format!(
            "dense value has {} bytes; {} needs {el} (splat) or {} bytes",
            data.len(),
            tt(r),
            el as i64 * n
        ));
    }
    Ok(())
}

fn check_assume(c: &Ck<'_>) -> R {
    let (v, r) = (c.one("value")?, c.res(0)?);
    c.same(v, r, "value and result types")?;
    let pred = match c.op.attr("predicate") {
        Some(OpAttr::Tagged(a)) => a,
        _ => return Err("missing `predicate`".into()),
    };
    let int_or_ptr = |t: &Type| match t {
        Type::Tile { elem, .. } => match &**elem {
            Type::Scalar(s) => is_int(*s),
            Type::Pointer { .. } => true,
            _ => false,
        },
        _ => false,
    };
    match pred {
        Attribute::DivBy {
            divisor,
            every,
            along,
        } => {
            if *divisor == 0 || !divisor.is_power_of_two() || *divisor > (1u64 << 62) {
                return Err(format!(
                    "div_by<{divisor}>: divisor must be a power of two ≤ 2^62"
                ));
            }
            if every.is_some() != along.is_some() {
                return Err("div_by: `every` and `along` must be given together".into());
            }
            match v {
                Type::TensorView { .. } if every.is_none() => Ok(()),
                Type::TensorView { .. } => {
                    Err("div_by on a tensor_view cannot use every/along".into())
                }
                t if int_or_ptr(t) => {
                    if every.is_some() && t.tile_shape().is_some_and(|s| s.is_empty()) {
                        return Err("div_by on a rank-0 tile cannot use every/along".into());
                    }
                    Ok(())
                }
                t => Err(format!(
                    "div_by applies to integer or pointer tiles and tensor_views, got {}",
                    tt(t)
                )),
            }
        }
        Attribute::Bounded { lb, ub } => {
            let s = match scalar_tile(v) {
                Some((s, _)) if is_int(s) => s,
                _ => return Err(format!("bounded applies to integer tiles, got {}", tt(v))),
            };
            let bits = s.bit_width();
            let (min, max) = if bits == 64 {
                (i64::MIN, i64::MAX)
            } else if bits == 1 {
                (-1, 0)
            } else {
                (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
            };
            for b in [lb, ub].into_iter().flatten() {
                if *b < min || *b > max {
                    return Err(format!(
                        "bound {b} is outside the range of {s} [{min}, {max}]"
                    ));
                }
            }
            if let (Some(l), Some(u)) = (lb, ub)
                && l > u
            {
                return Err(format!("lower bound {l} exceeds upper bound {u}"));
            }
            Ok(())
        }
        Attribute::SameElements(vals) => {
            if !int_or_ptr(v) {
                return Err(format!(
                    "same_elements applies to integer or pointer tiles, got {}",
                    tt(v)
                ));
            }
            let sh = v.tile_shape().unwrap_or(&[]);
            if vals.len() != sh.len() || vals.iter().zip(sh).any(|(&x, &d)| x < 0 || x > d) {
                return Err(format!(
                    "same_elements<{vals:?}> must give one value in 0..=dim per dimension of {}",
                    tt(v)
                ));
            }
            Ok(())
        }
        other => Err(format!(
            "predicate must be div_by, bounded or same_elements, got {}",
            attr_text(other)
        )),
    }
}

fn check_make_tensor_view(c: &Ck<'_>) -> R {
    let (base, r) = (c.one("base")?, c.res(0)?);
    let (pointee, bsh) = pointer_tile(base)
        .ok_or_else(|| format!("base must be a rank-0 pointer tile, got {}", tt(base)))?;
    if !bsh.is_empty() {
        return Err(format!(
            "base must be a rank-0 pointer tile, got {}",
            tt(base)
        ));
    }
    let Type::TensorView {
        elem,
        shape,
        strides,
        ..
    } = r
    else {
        return Err(format!("result must be a tensor_view, got {}", tt(r)));
    };
    if **elem != *pointee {
        return Err(format!(
            "base points to {} but the tensor_view holds {}",
            tt(pointee),
            tt(elem)
        ));
    }
    let (pa, ta) = (
        pointer_attr(base),
        match r {
            Type::TensorView { attr, .. } => *attr,
            _ => None,
        },
    );
    if pa != ta {
        let name = |a: Option<u8>| {
            a.map_or("absent", |a| {
                PTR_ATTR_NAMES.get(a as usize).copied().unwrap_or("?")
            })
        };
        return Err(format!(
            "the tensor_view must carry the base pointer's ptr_attr ({}), got {}",
            name(pa),
            name(ta)
        ));
    }
    let dyn_shape = c.group("dynamicShape")?;
    let dyn_strides = c.group("dynamicStrides")?;
    let want_shape = shape.iter().filter(|&&d| d == DYNAMIC).count();
    let want_strides = strides.iter().filter(|&&d| d == DYNAMIC).count();
    if dyn_shape.len() != want_shape {
        return Err(format!(
            "{} has {want_shape} dynamic extent(s) but {} shape operand(s) were given",
            tt(r),
            dyn_shape.len()
        ));
    }
    if dyn_strides.len() != want_strides {
        return Err(format!(
            "{} has {want_strides} dynamic stride(s) but {} stride operand(s) were given",
            tt(r),
            dyn_strides.len()
        ));
    }
    let all: Vec<&Type> = dyn_shape.iter().chain(&dyn_strides).copied().collect();
    if let Some(t) = all.iter().find(|t| !is_int_scalar(t)) {
        return Err(format!(
            "dynamic extents and strides must be rank-0 integer tiles, got {}",
            tt(t)
        ));
    }
    if all.windows(2).any(|w| w[0] != w[1]) {
        return Err("dynamic extents and strides must all have the same type".into());
    }
    Ok(())
}

/// Index operands of a view access: one per view dimension, rank-0 integer tiles of one type (the sparse
/// dimension of a gather/scatter view takes a 1-d tile of the tile extent).
fn check_view_indices(c: &Ck<'_>, vi: &ViewInfo<'_>) -> R {
    let idx = c.group("index")?;
    let rank = vi.tile_shape.len();
    if idx.len() != rank {
        return Err(format!(
            "{} has {rank} dimension(s) but {} index operand(s) were given",
            vi.kind,
            idx.len()
        ));
    }
    let mut base: Option<&Type> = None;
    for (i, t) in idx.iter().enumerate() {
        if Some(i) == vi.sparse_dim {
            match scalar_tile(t) {
                Some((s, sh)) if is_int(s) && sh.len() == 1 && sh[0] == vi.tile_shape[i] => {
                    continue;
                }
                _ => {
                    return Err(format!(
                        "index {i} (the sparse dimension) must be a 1-d integer tile of {} elements, got {}",
                        vi.tile_shape[i],
                        tt(t)
                    ));
                }
            }
        }
        if !is_int_scalar(t) {
            return Err(format!(
                "index {i} must be a rank-0 integer tile, got {}",
                tt(t)
            ));
        }
        match base {
            Some(b) if b != *t => {
                return Err(format!(
                    "index {i} has type {} but earlier indices have {}",
                    tt(t),
                    tt(b)
                ));
            }
            _ => base = Some(t),
        }
    }
    if let Some(OpAttr::BoolArray(b)) = c.op.attr("inbounds")
        && b.len() != rank
    {
        return Err(format!(
            "inbounds has {} entries for {rank} indices",
            b.len()
        ));
    }
    Ok(())
}

fn check_ordering(c: &Ck<'_>, load: bool) -> R {
    // weak 0, relaxed 1, acquire 2, release 3, acq_rel 4
    let ord = c.enum_("memory_ordering_semantics").unwrap_or(0);
    let scope = c.enum_("memory_scope");
    let ok = if load { [0, 1, 2] } else { [0, 1, 3] };
    let names = EnumKind::MemoryOrdering.names();
    if !ok.contains(&ord) {
        return Err(format!(
            "memory ordering {} is not allowed for a {}; use {}, {} or {}",
            names.get(ord as usize).unwrap_or(&"?"),
            if load { "load" } else { "store" },
            names[ok[0] as usize],
            names[ok[1] as usize],
            names[ok[2] as usize]
        ));
    }
    if ord == 0 && scope.is_some() {
        return Err("a weak access must not have a memory scope".into());
    }
    if ord != 0 && scope.is_none() {
        return Err(format!(
            "a {} access needs a memory scope",
            names[ord as usize]
        ));
    }
    Ok(())
}

fn check_access_hints(c: &Ck<'_>, view: bool) -> R {
    if !c.env.strict_hints {
        return Ok(());
    }
    if let Some(OpAttr::Hints(h)) = c.op.attr("optimization_hints") {
        let keys: &[&str] = if view {
            &["latency", "allow_tma"]
        } else {
            &["latency"]
        };
        check_hints(h, keys, None)?;
    }
    Ok(())
}

fn check_view_access(c: &Ck<'_>) -> R {
    use Opcode::*;
    let op = c.op.opcode;
    let view = c.one("view")?;
    let vi =
        view_info(view).ok_or_else(|| format!("view must be a tile view, got {}", tt(view)))?;
    check_view_indices(c, &vi)?;
    c.token_operand("token")?;
    let want = vi.tile_type();
    match op {
        LoadViewTko | MultimemLoadReduceViewTko => {
            let r = c.res(0)?;
            if *r != want {
                return Err(format!(
                    "the result tile must be {} (the view's tile), got {}",
                    tt(&want),
                    tt(r)
                ));
            }
            c.token_result(1)?;
        }
        _ => {
            let tile = c.one(if op == AtomicRedViewTko {
                "value"
            } else {
                "tile"
            })?;
            if *tile != want {
                return Err(format!(
                    "the stored tile must be {} (the view's tile), got {}",
                    tt(&want),
                    tt(tile)
                ));
            }
            c.token_result(0)?;
        }
    }
    let multimem = matches!(
        op,
        MultimemLoadReduceViewTko | MultimemReduceViewTko | MultimemStoreViewTko
    );
    if multimem && vi.ptr_attr != Some(2) {
        return Err(format!(
            "needs a view over a multicast pointer (tile<ptr<T, <multicast>>>, ptr_attr 2), got {}",
            tt(view)
        ));
    }
    if !multimem && vi.ptr_attr == Some(2) && op == AtomicRedViewTko {
        return Err(
            "multicast pointers are not supported for atomics; use multimem_reduce_view_tko".into(),
        );
    }
    match op {
        LoadViewTko => {
            check_ordering(c, true)?;
            check_access_hints(c, true)
        }
        StoreViewTko => {
            check_ordering(c, false)?;
            check_access_hints(c, true)
        }
        AtomicRedViewTko => {
            if vi.sparse_dim.is_some() {
                return Err("gather_scatter_view is not supported; use a partition_view".into());
            }
            if c.enum_("memory_ordering_semantics") != Some(1) {
                return Err("only relaxed memory ordering is supported".into());
            }
            if c.enum_("memory_scope") == Some(2) {
                return Err("memory scope sys is not supported; use tl_blk or device".into());
            }
            let mode = c.enum_("mode").unwrap_or(0);
            if mode == 9 {
                return Err("mode xchg is not supported".into());
            }
            check_rmw_mode(mode, vi.elem)
        }
        _ => Ok(()),
    }
}

fn check_ptr_access(c: &Ck<'_>) -> R {
    let load = c.op.opcode == Opcode::LoadPtrTko;
    let ptrs = c.one(if load { "source" } else { "destination" })?;
    let (pointee, psh) = pointer_tile(ptrs)
        .ok_or_else(|| format!("pointers must be a pointer tile, got {}", tt(ptrs)))?;
    let val = if load { c.res(0)? } else { c.one("value")? };
    let (ve, vsh) = tile_parts(val)?;
    if ve != pointee || vsh != psh {
        return Err(format!(
            "value {} does not match pointers {} (same shape, element = pointee)",
            tt(val),
            tt(ptrs)
        ));
    }
    if let Some(m) = c.opt("mask")?
        && !matches!(scalar_tile(m), Some((ScalarType::I1, sh)) if sh == psh)
    {
        return Err(format!(
            "mask must be an i1 tile of shape {psh:?}, got {}",
            tt(m)
        ));
    }
    if load {
        if let Some(p) = c.opt("paddingValue")? {
            c.same(p, val, "padding and result types")?;
        }
        c.token_result(1)?;
    } else {
        c.token_result(0)?;
    }
    c.token_operand("token")?;
    check_ordering(c, load)?;
    check_access_hints(c, false)
}

fn check_rmw_mode(mode: u8, elem: &Type) -> R {
    let s = match elem {
        Type::Scalar(s) => *s,
        other => return Err(format!("atomics need a scalar element, got {}", tt(other))),
    };
    let name = EnumKind::AtomicRmwMode
        .names()
        .get(mode as usize)
        .copied()
        .unwrap_or("?");
    match mode {
        4 => {
            if !is_base_float(s) {
                return Err(format!(
                    "mode addf works only with f16, bf16, f32 and f64, got {s}"
                ));
            }
        }
        9 => {
            if s.bit_width() != 32 && s.bit_width() != 64 {
                return Err(format!(
                    "mode xchg works only with 32- or 64-bit types, got {s}"
                ));
            }
        }
        _ => {
            if !matches!(s, ScalarType::I32 | ScalarType::I64) {
                return Err(format!("mode {name} works only with i32 and i64, got {s}"));
            }
        }
    }
    Ok(())
}

fn check_atomic(c: &Ck<'_>) -> R {
    let cas = c.op.opcode == Opcode::AtomicCASTko;
    let ptrs = c.one("pointers")?;
    let (pointee, psh) = pointer_tile(ptrs)
        .ok_or_else(|| format!("pointers must be a pointer tile, got {}", tt(ptrs)))?;
    if pointer_attr(ptrs) == Some(2) {
        return Err("multicast pointers are not supported for atomics".into());
    }
    let val = c.one(if cas { "val" } else { "arg" })?;
    let (ve, vsh) = tile_parts(val)?;
    if ve != pointee || vsh != psh {
        return Err(format!(
            "value {} does not match pointers {} (same shape, element = pointee)",
            tt(val),
            tt(ptrs)
        ));
    }
    c.same(val, c.res(0)?, "value and result types")?;
    if cas {
        c.same(c.one("cmp")?, val, "cmp and val types")?;
        let w = match ve {
            Type::Scalar(s) => s.bit_width(),
            _ => 0,
        };
        if w != 32 && w != 64 {
            return Err(format!(
                "compare-and-swap works only on 32- or 64-bit values, got {}",
                tt(val)
            ));
        }
    } else {
        check_rmw_mode(c.enum_("mode").unwrap_or(0), ve)?;
    }
    if let Some(m) = c.opt("mask")?
        && !matches!(scalar_tile(m), Some((ScalarType::I1, sh)) if sh == psh)
    {
        return Err(format!(
            "mask must be an i1 tile of shape {psh:?}, got {}",
            tt(m)
        ));
    }
    c.token_operand("token")?;
    c.token_result(1)?;
    let ord = c.enum_("memory_ordering_semantics").unwrap_or(0);
    if ord == 0 {
        return Err("atomics need relaxed, acquire, release or acq_rel ordering, not weak".into());
    }
    Ok(())
}

fn count_format_args(fmt: &str) -> Result<usize, String> {
    let b = fmt.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        let end = (i + 1..b.len())
            .find(|&j| b"diuoxXeEfFgGaAcsSpn%".contains(&b[j]))
            .ok_or_else(|| format!("unterminated format expression in {fmt:?}"))?;
        if !(end == i + 1 && b[end] == b'%') {
            n += 1;
        }
        i = end + 1;
    }
    Ok(n)
}

fn check_mma(c: &Ck<'_>) -> R {
    use ScalarType::*;
    let (a, b, acc, r) = (c.one("lhs")?, c.one("rhs")?, c.one("acc")?, c.res(0)?);
    c.same(acc, r, "accumulator and result types")?;
    let (ae, ash) =
        scalar_tile(a).ok_or_else(|| format!("lhs must be a numeric tile, got {}", tt(a)))?;
    let (be, bsh) =
        scalar_tile(b).ok_or_else(|| format!("rhs must be a numeric tile, got {}", tt(b)))?;
    let (ce, csh) =
        scalar_tile(acc).ok_or_else(|| format!("acc must be a numeric tile, got {}", tt(acc)))?;
    if ae != be {
        return Err(format!(
            "lhs and rhs element types differ: {} vs {}",
            tt(a),
            tt(b)
        ));
    }
    let rank = ash.len();
    if (rank != 2 && rank != 3) || bsh.len() != rank || csh.len() != rank {
        return Err(format!(
            "operands must all be 2-d (or all 3-d, batched) tiles, got {}, {}, {}",
            tt(a),
            tt(b),
            tt(acc)
        ));
    }
    let bt = rank - 2;
    let (m, k, k2, n) = (ash[bt], ash[bt + 1], bsh[bt], bsh[bt + 1]);
    if k != k2
        || csh[bt] != m
        || csh[bt + 1] != n
        || (bt == 1 && (ash[0] != bsh[0] || ash[0] != csh[0]))
    {
        return Err(format!(
            "shapes do not form M×K · K×N + M×N: {} · {} + {}",
            tt(a),
            tt(b),
            tt(acc)
        ));
    }
    match c.op.opcode {
        Opcode::MmaF => {
            let allowed: &[ScalarType] = match ae {
                F8E4M3FN | F8E5M2 | F16 => &[F16, F32],
                BF16 | TF32 | F32 => &[F32],
                F64 => &[F64],
                _ => {
                    return Err(format!(
                        "unsupported input element type {ae}; use f16, bf16, tf32, f32, f64, f8E4M3FN or f8E5M2"
                    ));
                }
            };
            if !allowed.contains(&ce) {
                let names: Vec<&str> = allowed.iter().map(|s| s.name()).collect();
                return Err(format!(
                    "inputs of {ae} need an accumulator of {}, got {ce}",
                    names.join(" or ")
                ));
            }
            Ok(())
        }
        Opcode::MmaI => {
            if ae != I8 || ce != I32 {
                return Err(format!(
                    "mmai needs i8 inputs and an i32 accumulator, got {ae} and {ce}"
                ));
            }
            Ok(())
        }
        _ => {
            let (ls, rs) = (c.one("lhs_scale")?, c.one("rhs_scale")?);
            let (lse, lssh) = scalar_tile(ls)
                .ok_or_else(|| format!("lhs_scale must be a tile, got {}", tt(ls)))?;
            let (rse, rssh) = scalar_tile(rs)
                .ok_or_else(|| format!("rhs_scale must be a tile, got {}", tt(rs)))?;
            if !matches!(ae, F8E4M3FN | F8E5M2 | F4E2M1FN) || ce != F32 {
                return Err(format!(
                    "mmaf_scaled needs f8E4M3FN, f8E5M2 or f4E2M1FN inputs and an f32 accumulator, got {ae} and {ce}"
                ));
            }
            if lse != rse || !matches!(lse, F8E4M3FN | F8E8M0FNU) {
                return Err(format!(
                    "scales must both be f8E4M3FN or both f8E8M0FNU, got {lse} and {rse}"
                ));
            }
            if lssh.len() != rank || rssh.len() != rank {
                return Err("scales must have the rank of the operands".into());
            }
            let (lsm, lsk, rsk, rsn) = (lssh[bt], lssh[bt + 1], rssh[bt], rssh[bt + 1]);
            if lsm != m || rsn != n || lsk != rsk || lsk == 0 || k % lsk != 0 {
                return Err(format!(
                    "scale shapes {} and {} do not fit operands {} and {}",
                    tt(ls),
                    tt(rs),
                    tt(a),
                    tt(b)
                ));
            }
            let vec = k / lsk;
            let ok = match (ae, lse) {
                (F8E4M3FN | F8E5M2, F8E8M0FNU) => vec == 32,
                (F4E2M1FN, F8E4M3FN) => vec == 16,
                (F4E2M1FN, F8E8M0FNU) => vec == 16 || vec == 32,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "unsupported scale combination: {ae} inputs with {lse} scales every {vec} elements of K"
                ));
            }
            Ok(())
        }
    }
}

fn no_views(ts: &[&Type], what: &str) -> R {
    for (i, t) in ts.iter().enumerate() {
        if matches!(t, Type::TensorView { .. }) || view_info(t).is_some() {
            return Err(format!(
                "{what} {i} is a view ({}); views cannot be carried or returned",
                tt(t)
            ));
        }
    }
    Ok(())
}

fn block_arg_types<'a>(c: &Ck<'a>, b: &'a Block) -> Result<Vec<&'a Type>, String> {
    b.args.iter().map(|v| c.ty(*v)).collect()
}

fn last_op(b: &Block) -> Option<Opcode> {
    b.ops.last().map(|o| o.opcode)
}

fn ends_with(b: &Block, allowed: &[Opcode], region: &str) -> R {
    match last_op(b) {
        Some(o) if allowed.contains(&o) => Ok(()),
        other => {
            let names: Vec<&str> = allowed.iter().map(|o| o.mnemonic()).collect();
            Err(format!(
                "{region} must end with {}, but ends with {}",
                names.join(" or "),
                other.map_or("nothing", |o| o.mnemonic())
            ))
        }
    }
}

fn check_for(c: &Ck<'_>) -> R {
    let (lo, hi, step) = (c.one("lowerBound")?, c.one("upperBound")?, c.one("step")?);
    if !is_int_scalar(lo) {
        return Err(format!(
            "bounds must be rank-0 integer tiles, got {}",
            tt(lo)
        ));
    }
    c.same(lo, hi, "lower and upper bound types")?;
    c.same(lo, step, "bound and step types")?;
    let inits = c.group("initValues")?;
    let rs = c.results()?;
    if inits != rs {
        return Err(format!(
            "result types ({}) must equal the init value types ({})",
            types_text(&rs.iter().map(|t| (*t).clone()).collect::<Vec<_>>()),
            types_text(&inits.iter().map(|t| (*t).clone()).collect::<Vec<_>>())
        ));
    }
    no_views(&inits, "carried value")?;
    let body = c.op.regions.first().ok_or("missing body region")?;
    let args = block_arg_types(c, body)?;
    if args.len() != inits.len() + 1 || args[0] != lo || args[1..] != inits[..] {
        return Err(format!(
            "body arguments must be the induction variable ({}) then the carried values",
            tt(lo)
        ));
    }
    ends_with(body, &[Opcode::Continue], "the body")
}

fn check_loop(c: &Ck<'_>) -> R {
    let inits = c.group("initValues")?;
    no_views(&inits, "carried value")?;
    no_views(&c.results()?, "result")?;
    let body = c.op.regions.first().ok_or("missing body region")?;
    let args = block_arg_types(c, body)?;
    if args != inits {
        return Err("body arguments must have the init value types".into());
    }
    ends_with(body, &[Opcode::Continue, Opcode::Break], "the body")
}

fn check_if(c: &Ck<'_>) -> R {
    let cond = c.one("condition")?;
    if !is_scalar_of(cond, ScalarType::I1) {
        return Err(format!("condition must be tile<i1>, got {}", tt(cond)));
    }
    no_views(&c.results()?, "result")?;
    if c.op.regions.len() != 2 {
        return Err("needs a then and an else region".into());
    }
    for (b, name) in
        c.op.regions
            .iter()
            .zip(["the then region", "the else region"])
    {
        if !b.args.is_empty() {
            return Err(format!("{name} must not have arguments"));
        }
        ends_with(
            b,
            &[
                Opcode::Yield,
                Opcode::Continue,
                Opcode::Break,
                Opcode::Return,
            ],
            name,
        )?;
    }
    Ok(())
}

fn check_reduce_scan(c: &Ck<'_>) -> R {
    let ops = c.group("operands")?;
    let rs = c.results()?;
    if ops.is_empty() {
        return Err("needs at least one operand".into());
    }
    if ops.len() != rs.len() {
        return Err(format!("{} operands but {} results", ops.len(), rs.len()));
    }
    let shape = ops[0]
        .tile_shape()
        .ok_or_else(|| format!("operands must be tiles, got {}", tt(ops[0])))?;
    let dim = c.int_attr("dim").unwrap_or(u64::MAX);
    if dim as usize >= shape.len() {
        return Err(format!("dim {dim} is out of range for {}", tt(ops[0])));
    }
    let ids = match c.op.attr("identities") {
        Some(OpAttr::TaggedArray(a)) => a,
        _ => return Err("missing `identities`".into()),
    };
    if ids.len() != ops.len() {
        return Err(format!(
            "{} identities for {} operands",
            ids.len(),
            ops.len()
        ));
    }
    for (i, (t, r)) in ops.iter().zip(&rs).enumerate() {
        if t.tile_shape() != Some(shape) {
            return Err(format!(
                "operands must share one shape: {} vs {}",
                tt(ops[0]),
                tt(t)
            ));
        }
        let elem = t.elem().cloned().unwrap_or(Type::Token);
        let want = if c.op.opcode == Opcode::Scan {
            (*t).clone()
        } else {
            let mut sh = shape.to_vec();
            sh.remove(dim as usize);
            Type::Tile {
                elem: Box::new(elem.clone()),
                shape: sh,
            }
        };
        if **r != want {
            return Err(format!("result {i} must be {}, got {}", tt(&want), tt(r)));
        }
        let id_ty = match &ids[i] {
            Attribute::Integer { ty, .. } | Attribute::Float { ty, .. } => ty,
            other => {
                return Err(format!(
                    "identity {i} must be an integer or float attribute, got {}",
                    attr_text(other)
                ));
            }
        };
        let half_swap = matches!(
            (id_ty, &elem),
            (
                Type::Scalar(ScalarType::F16),
                Type::Scalar(ScalarType::BF16)
            ) | (
                Type::Scalar(ScalarType::BF16),
                Type::Scalar(ScalarType::F16)
            )
        );
        if *id_ty != elem && !half_swap {
            return Err(format!(
                "identity {i} has type {} but operand {i} holds {}",
                tt(id_ty),
                tt(&elem)
            ));
        }
    }
    let body = c.op.regions.first().ok_or("missing body region")?;
    let args = block_arg_types(c, body)?;
    if args.len() != 2 * ops.len() {
        return Err(format!(
            "the body needs {} arguments (a pair per operand), got {}",
            2 * ops.len(),
            args.len()
        ));
    }
    for (i, t) in ops.iter().enumerate() {
        let want = reduce_arg_type(t);
        if *args[2 * i] != want || *args[2 * i + 1] != want {
            return Err(format!(
                "body arguments {} and {} must be {}",
                2 * i,
                2 * i + 1,
                tt(&want)
            ));
        }
    }
    ends_with(body, &[Opcode::Yield], "the body")?;
    for o in &body.ops[..body.ops.len() - 1] {
        if !is_effect_free(o) {
            return Err(format!(
                "only ops without memory effects may appear in the body, found {}",
                o.opcode.mnemonic()
            ));
        }
    }
    Ok(())
}

/// Whether an op has no memory effects (what reduce and scan bodies may contain): an op of a kind that
/// touches memory, prints, asserts or assumes has effects; `if` inherits those of its regions; loops contain
/// `continue`, which tileiras counts as an effect. Established with tileirdisasm 13.5.
pub fn is_effect_free(op: &Operation) -> bool {
    use Opcode::*;
    let own = !matches!(
        op.opcode,
        Assert
            | Assume
            | AtomicCASTko
            | AtomicRMWTko
            | AtomicRedViewTko
            | Break
            | Continue
            | Return
            | Global
            | LoadPtrTko
            | LoadViewTko
            | PrintTko
            | StorePtrTko
            | StoreViewTko
            | Alloca
            | GdcLaunchDependentsTko
            | GdcWaitTko
            | MemoryFenceAliasTko
            | MultimemLoadReduceViewTko
            | MultimemReduceViewTko
            | MultimemStoreViewTko
            | PreviewCall
            | Module
            | Entry
    );
    own && op.regions.iter().all(|b| b.ops.iter().all(is_effect_free))
}

fn check_terminator(c: &Ck<'_>) -> R {
    let vals = c.group("operands")?;
    let vals: Vec<Type> = vals.into_iter().cloned().collect();
    let frames = c.env.frames;
    let inner = frames.last().ok_or("must be inside a function body")?;
    // The nearest enclosing op that is not an `if`.
    let through_ifs = frames.iter().rev().find(|f| f.opcode != Opcode::If);
    let mismatch = |want: &[Type], what: &str| -> R {
        if vals != want {
            Err(format!(
                "operand types ({}) must match {what} ({})",
                types_text(&vals),
                types_text(want)
            ))
        } else {
            Ok(())
        }
    };
    match c.op.opcode {
        Opcode::Yield => match inner.opcode {
            Opcode::If => mismatch(&inner.results, "the if's result types"),
            Opcode::Reduce | Opcode::Scan => mismatch(&inner.iter, "the body's element types"),
            other => Err(format!(
                "must terminate an if, reduce or scan region, not a {} region",
                other.mnemonic()
            )),
        },
        Opcode::Continue => match through_ifs {
            Some(f) if f.opcode == Opcode::For => mismatch(&f.results, "the for's result types"),
            Some(f) if f.opcode == Opcode::Loop => mismatch(&f.iter, "the loop's carried types"),
            other => Err(format!(
                "must be nested (through ifs only) in a for or loop, found in {}",
                other.map_or("nothing", |f| f.opcode.mnemonic())
            )),
        },
        Opcode::Break => match through_ifs {
            Some(f) if f.opcode == Opcode::Loop => mismatch(&f.results, "the loop's result types"),
            other => Err(format!(
                "must be nested (through ifs only) in a loop, found in {}",
                other.map_or("nothing", |f| f.opcode.mnemonic())
            )),
        },
        _ => match through_ifs {
            Some(f) if f.opcode == Opcode::Entry => {
                if vals.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "an entry returns nothing, got ({})",
                        types_text(&vals)
                    ))
                }
            }
            other => Err(format!(
                "must be nested (through ifs only) in the function body, found in {}",
                other.map_or("nothing", |f| f.opcode.mnemonic())
            )),
        },
    }
}

fn check_preview_call(c: &Ck<'_>) -> R {
    let callee = c.str_attr("callee").unwrap_or("");
    let f = c
        .env
        .module
        .functions
        .iter()
        .find(|f| f.name == callee)
        .ok_or_else(|| format!("no function named @{callee} in the module"))?;
    let FunctionKind::ExternDecl { const_params } = &f.kind else {
        return Err(format!("@{callee} is not an extern declaration"));
    };
    let mut args: Vec<Type> = c.group("operands")?.into_iter().cloned().collect();
    let mut rs: Vec<Type> = c.results()?.into_iter().cloned().collect();
    // Tile C++'s calling convention (`nvcc --tilebc`): two ordering tokens lead the operands and the
    // results; they are not parameters of the declaration.
    if args.len() >= 2
        && args[..2] == [Type::Token, Type::Token]
        && rs.len() >= 2
        && rs[..2] == [Type::Token, Type::Token]
    {
        args.drain(..2);
        rs.drain(..2);
    }
    if args != f.param_types {
        return Err(format!(
            "argument types ({}) do not match @{callee}'s parameters ({})",
            types_text(&args),
            types_text(&f.param_types)
        ));
    }
    if rs != f.result_types {
        return Err(format!(
            "result types ({}) do not match @{callee}'s results ({})",
            types_text(&rs),
            types_text(&f.result_types)
        ));
    }
    let cargs = match c.op.attr("const_args") {
        Some(OpAttr::TaggedArray(a)) => a,
        _ => return Err("missing `const_args`".into()),
    };
    if cargs.len() != const_params.len() {
        return Err(format!(
            "@{callee} takes {} constant argument(s), got {}",
            const_params.len(),
            cargs.len()
        ));
    }
    for (i, (a, p)) in cargs.iter().zip(const_params).enumerate() {
        let Attribute::ConstParam { ty, .. } = p else {
            continue;
        };
        let ok = match ty {
            Type::Preview(PreviewType::Index) => matches!(
                a,
                Attribute::ExprInt(_)
                    | Attribute::ExprVar(_)
                    | Attribute::ExprBinary { .. }
                    | Attribute::ExprNeg(_)
                    | Attribute::ExprBuiltin(_)
            ),
            Type::Preview(PreviewType::String) => matches!(a, Attribute::ExprConstStr(_)),
            Type::Preview(PreviewType::Datatype) => matches!(a, Attribute::ConcreteType(_)),
            Type::Preview(PreviewType::Shape) => matches!(a, Attribute::SymbolicTuple(_)),
            _ => true,
        };
        if !ok {
            return Err(format!(
                "constant argument {i} ({}) does not fit parameter kind {}",
                attr_text(a),
                tt(ty)
            ));
        }
    }
    Ok(())
}

/// Check optimization hints: keys per arch must be in `allowed`; values typed and in range.
/// `entry_version` enables the entry-specific `num_worker_warps_per_cta` version rule.
pub fn check_hints(
    h: &OptimizationHints,
    allowed: &[&str],
    entry_version: Option<crate::Version>,
) -> R {
    for (arch, dict) in &h.by_arch {
        let arch_ok = arch == "default"
            || arch
                .strip_prefix("sm_")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !arch_ok {
            return Err(format!(
                "optimization hints key `{arch}` must be `default` or an architecture like `sm_90`"
            ));
        }
        if let Some(v) = entry_version
            && arch == "default"
            && v < crate::V13_3
        {
            return Err(format!(
                "hints keyed `default` need bytecode 13.3 or newer, not {v}"
            ));
        }
        for (key, val) in dict {
            if !allowed.contains(&key.as_str()) {
                return Err(format!(
                    "unknown optimization hint `{arch}.{key}`; allowed here: {}",
                    allowed.join(", ")
                ));
            }
            if key == "allow_tma" {
                if !matches!(val, Attribute::Bool(_)) {
                    return Err(format!("hint `{arch}.allow_tma` must be a bool"));
                }
                continue;
            }
            let n = match val {
                Attribute::Integer { value, .. } => *value as u32 as i32 as i64,
                _ => {
                    return Err(format!(
                        "hint `{arch}.{key}` must be an i32 integer, got {}",
                        attr_text(val)
                    ));
                }
            };
            let ok = match key.as_str() {
                "latency" => (1..=10).contains(&n),
                "occupancy" => (1..=32).contains(&n),
                "num_cta_in_cga" => {
                    let ampere =
                        ["sm_80", "sm_86", "sm_87", "sm_88", "sm_89"].contains(&arch.as_str());
                    (1..=16).contains(&n) && (n & (n - 1)) == 0 && (!ampere || n == 1)
                }
                "num_worker_warps_per_cta" => {
                    let pow2 = (1..=32).contains(&n) && (n & (n - 1)) == 0;
                    match entry_version {
                        Some(v) if v < crate::V13_5 => n == 4 || n == 8,
                        _ => pow2,
                    }
                }
                _ => true,
            };
            if !ok {
                let range = match key.as_str() {
                    "latency" => "1..=10",
                    "occupancy" => "1..=32",
                    "num_cta_in_cga" => "a power of two ≤ 16 (1 on sm_8x)",
                    _ => "a power of two ≤ 32 (4 or 8 before bytecode 13.5)",
                };
                return Err(format!(
                    "hint `{arch}.{key}` = {n} is out of range; expected {range}"
                ));
            }
        }
    }
    Ok(())
}
