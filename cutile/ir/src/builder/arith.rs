//! Elementwise ops: float and integer arithmetic, math functions, fma, min/max, comparisons, select and the
//! conversions. Results take the operand type (comparisons: an i1 tile of the operand shape; conversions: the
//! operand shape with the requested element type).

use crate::attr::{
    ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode, Signedness,
};
use crate::ir::{OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::{ScalarType, Type};
use crate::verify::text::type_text;

use super::error::BuildError;
use super::function::FunctionBuilder;

/// Modifiers of float ops. Unset fields take the op's default (rounding: `nearest_even`, or `full` for
/// `exp`/`tanh`); setting a modifier the op does not have is an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloatOpts {
    pub rounding: Option<RoundingMode>,
    pub flush_to_zero: bool,
    /// `maxf`/`minf`: return NaN if either input is NaN.
    pub propagate_nan: bool,
}

/// Modifiers of integer ops. Unset fields take the op's default (overflow `none`, signedness `signed`,
/// division rounding `zero`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntOpts {
    pub overflow: Option<IntegerOverflow>,
    pub signedness: Option<Signedness>,
    pub rounding: Option<RoundingMode>,
}

/// Set the attribute slot `name` of `op` (the slot must exist in the op's schema).
pub(crate) fn set_attr(op: &mut Operation, name: &str, a: OpAttr) -> Result<(), BuildError> {
    let i = op
        .opcode
        .schema()
        .attr_index(name)
        .ok_or_else(|| BuildError::op(op.opcode, format!("has no `{name}` modifier")))?;
    op.attrs[i] = Some(a);
    Ok(())
}

/// Put one value in each `Single` operand group, in schema order.
pub(crate) fn positional(code: Opcode, vals: &[ValueId]) -> Operation {
    let mut op = Operation::new(code);
    for (g, v) in op.operands.iter_mut().zip(vals) {
        g.push(*v);
    }
    op
}

fn has_attr(code: Opcode, name: &str) -> bool {
    code.schema().attr_index(name).is_some()
}

impl FunctionBuilder<'_> {
    fn float_attrs(&self, op: &mut Operation, o: FloatOpts) -> Result<(), BuildError> {
        let code = op.opcode;
        if has_attr(code, "rounding_mode") {
            let default = if matches!(code, Opcode::Exp | Opcode::TanH) {
                RoundingMode::Full
            } else {
                RoundingMode::NearestEven
            };
            set_attr(
                op,
                "rounding_mode",
                OpAttr::Enum(o.rounding.unwrap_or(default).into()),
            )?;
        } else if o.rounding.is_some() {
            return Err(BuildError::op(code, "has no rounding modifier"));
        }
        if o.flush_to_zero {
            set_attr(op, "flush_to_zero", OpAttr::Unit)?;
        }
        if o.propagate_nan {
            set_attr(op, "propagate_nan", OpAttr::Unit)?;
        }
        Ok(())
    }

    fn int_attrs(&self, op: &mut Operation, o: IntOpts) -> Result<(), BuildError> {
        let code = op.opcode;
        if has_attr(code, "overflow") {
            set_attr(
                op,
                "overflow",
                OpAttr::Enum(o.overflow.unwrap_or(IntegerOverflow::None).into()),
            )?;
        } else if o.overflow.is_some() {
            return Err(BuildError::op(code, "has no overflow modifier"));
        }
        if has_attr(code, "signedness") {
            set_attr(
                op,
                "signedness",
                OpAttr::Enum(o.signedness.unwrap_or(Signedness::Signed).into()),
            )?;
        } else if o.signedness.is_some() {
            return Err(BuildError::op(code, "has no signedness"));
        }
        if has_attr(code, "rounding") {
            set_attr(
                op,
                "rounding",
                OpAttr::Enum(o.rounding.unwrap_or(RoundingMode::Zero).into()),
            )?;
        } else if o.rounding.is_some() {
            return Err(BuildError::op(code, "has no rounding modifier"));
        }
        Ok(())
    }

    /// A binary float op (`AddF`, `SubF`, `MulF`, `DivF`, `RemF`, `MaxF`, `MinF`, `FPowF`, `Atan2`); the
    /// result has the operands' type.
    pub fn binary_float(
        &mut self,
        code: Opcode,
        a: ValueId,
        b: ValueId,
        o: FloatOpts,
    ) -> Result<ValueId, BuildError> {
        if !matches!(
            code,
            Opcode::AddF
                | Opcode::SubF
                | Opcode::MulF
                | Opcode::DivF
                | Opcode::RemF
                | Opcode::MaxF
                | Opcode::MinF
                | Opcode::FPowF
                | Opcode::Atan2
        ) {
            return Err(BuildError::op(code, "is not a binary float op"));
        }
        let ty = self.ty(a)?.clone();
        let mut op = positional(code, &[a, b]);
        self.float_attrs(&mut op, o)?;
        self.emit1(op, ty)
    }

    pub fn addf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::AddF, a, b, FloatOpts::default())
    }
    pub fn subf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::SubF, a, b, FloatOpts::default())
    }
    pub fn mulf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::MulF, a, b, FloatOpts::default())
    }
    pub fn divf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::DivF, a, b, FloatOpts::default())
    }
    pub fn remf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::RemF, a, b, FloatOpts::default())
    }
    pub fn maxf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::MaxF, a, b, FloatOpts::default())
    }
    pub fn minf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::MinF, a, b, FloatOpts::default())
    }
    /// `fpowf`: `a` raised to the float power `b`.
    pub fn powf(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::FPowF, a, b, FloatOpts::default())
    }
    pub fn atan2(&mut self, x: ValueId, y: ValueId) -> Result<ValueId, BuildError> {
        self.binary_float(Opcode::Atan2, x, y, FloatOpts::default())
    }
    /// `fpowi` (13.4+): `base` raised to an integer tile `exponent` of the same shape.
    pub fn powi(&mut self, base: ValueId, exponent: ValueId) -> Result<ValueId, BuildError> {
        let ty = self.ty(base)?.clone();
        self.emit1(positional(Opcode::FPowI, &[base, exponent]), ty)
    }

    /// A unary float op (`AbsF`, `NegF`, `Ceil`, `Floor`, `Cos`, `CosH`, `Sin`, `SinH`, `Tan`, `TanH`, `Exp`,
    /// `Exp2`, `Log`, `Log2`, `Sqrt`, `Rsqrt`); the result has the operand's type.
    pub fn unary_float(
        &mut self,
        code: Opcode,
        a: ValueId,
        o: FloatOpts,
    ) -> Result<ValueId, BuildError> {
        use Opcode::*;
        if !matches!(
            code,
            AbsF | NegF
                | Ceil
                | Floor
                | Cos
                | CosH
                | Sin
                | SinH
                | Tan
                | TanH
                | Exp
                | Exp2
                | Log
                | Log2
                | Sqrt
                | Rsqrt
        ) {
            return Err(BuildError::op(code, "is not a unary float op"));
        }
        let ty = self.ty(a)?.clone();
        let mut op = positional(code, &[a]);
        self.float_attrs(&mut op, o)?;
        self.emit1(op, ty)
    }

    pub fn absf(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::AbsF, a, FloatOpts::default())
    }
    pub fn negf(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::NegF, a, FloatOpts::default())
    }
    pub fn ceil(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Ceil, a, FloatOpts::default())
    }
    pub fn floor(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Floor, a, FloatOpts::default())
    }
    pub fn cos(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Cos, a, FloatOpts::default())
    }
    pub fn cosh(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::CosH, a, FloatOpts::default())
    }
    pub fn sin(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Sin, a, FloatOpts::default())
    }
    pub fn sinh(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::SinH, a, FloatOpts::default())
    }
    pub fn tan(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Tan, a, FloatOpts::default())
    }
    /// `tanh` with rounding `full`.
    pub fn tanh(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::TanH, a, FloatOpts::default())
    }
    /// `exp` with rounding `full`.
    pub fn exp(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Exp, a, FloatOpts::default())
    }
    pub fn exp2(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Exp2, a, FloatOpts::default())
    }
    pub fn log(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Log, a, FloatOpts::default())
    }
    pub fn log2(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Log2, a, FloatOpts::default())
    }
    pub fn sqrt(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Sqrt, a, FloatOpts::default())
    }
    pub fn rsqrt(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.unary_float(Opcode::Rsqrt, a, FloatOpts::default())
    }

    /// `a * b + c` rounded once (rounding `nearest_even`).
    pub fn fma(&mut self, a: ValueId, b: ValueId, c: ValueId) -> Result<ValueId, BuildError> {
        self.fma_with(a, b, c, FloatOpts::default())
    }
    pub fn fma_with(
        &mut self,
        a: ValueId,
        b: ValueId,
        c: ValueId,
        o: FloatOpts,
    ) -> Result<ValueId, BuildError> {
        let ty = self.ty(a)?.clone();
        let mut op = positional(Opcode::Fma, &[a, b, c]);
        self.float_attrs(&mut op, o)?;
        self.emit1(op, ty)
    }

    /// An integer op (`AddI`, `SubI`, `MulI`, `MulhiI`, `DivI`, `RemI`, `MaxI`, `MinI`, `AndI`, `OrI`, `XOrI`,
    /// `ShLI`, `ShRI`, and the unary `AbsI`, `NegI` with `b = None`); the result has the operand type.
    pub fn int_op(
        &mut self,
        code: Opcode,
        a: ValueId,
        b: Option<ValueId>,
        o: IntOpts,
    ) -> Result<ValueId, BuildError> {
        use Opcode::*;
        let binary = matches!(
            code,
            AddI | SubI
                | MulI
                | MulhiI
                | DivI
                | RemI
                | MaxI
                | MinI
                | AndI
                | OrI
                | XOrI
                | ShLI
                | ShRI
        );
        let unary = matches!(code, AbsI | NegI);
        let vals: Vec<ValueId> = match (b, binary, unary) {
            (Some(b), true, _) => vec![a, b],
            (None, _, true) => vec![a],
            _ => return Err(BuildError::op(code, "is not an integer op of this arity")),
        };
        let ty = self.ty(a)?.clone();
        let mut op = positional(code, &vals);
        self.int_attrs(&mut op, o)?;
        self.emit1(op, ty)
    }

    pub fn addi(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::AddI, a, Some(b), IntOpts::default())
    }
    pub fn subi(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::SubI, a, Some(b), IntOpts::default())
    }
    pub fn muli(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::MulI, a, Some(b), IntOpts::default())
    }
    /// The high half of the full product.
    pub fn mulhii(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::MulhiI, a, Some(b), IntOpts::default())
    }
    /// Division rounding toward zero.
    pub fn divi(&mut self, a: ValueId, b: ValueId, s: Signedness) -> Result<ValueId, BuildError> {
        self.int_op(
            Opcode::DivI,
            a,
            Some(b),
            IntOpts {
                signedness: Some(s),
                ..Default::default()
            },
        )
    }
    pub fn remi(&mut self, a: ValueId, b: ValueId, s: Signedness) -> Result<ValueId, BuildError> {
        self.int_op(
            Opcode::RemI,
            a,
            Some(b),
            IntOpts {
                signedness: Some(s),
                ..Default::default()
            },
        )
    }
    pub fn maxi(&mut self, a: ValueId, b: ValueId, s: Signedness) -> Result<ValueId, BuildError> {
        self.int_op(
            Opcode::MaxI,
            a,
            Some(b),
            IntOpts {
                signedness: Some(s),
                ..Default::default()
            },
        )
    }
    pub fn mini(&mut self, a: ValueId, b: ValueId, s: Signedness) -> Result<ValueId, BuildError> {
        self.int_op(
            Opcode::MinI,
            a,
            Some(b),
            IntOpts {
                signedness: Some(s),
                ..Default::default()
            },
        )
    }
    pub fn andi(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::AndI, a, Some(b), IntOpts::default())
    }
    pub fn ori(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::OrI, a, Some(b), IntOpts::default())
    }
    pub fn xori(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::XOrI, a, Some(b), IntOpts::default())
    }
    pub fn shli(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::ShLI, a, Some(b), IntOpts::default())
    }
    pub fn shri(&mut self, a: ValueId, b: ValueId, s: Signedness) -> Result<ValueId, BuildError> {
        self.int_op(
            Opcode::ShRI,
            a,
            Some(b),
            IntOpts {
                signedness: Some(s),
                ..Default::default()
            },
        )
    }
    pub fn absi(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::AbsI, a, None, IntOpts::default())
    }
    pub fn negi(&mut self, a: ValueId) -> Result<ValueId, BuildError> {
        self.int_op(Opcode::NegI, a, None, IntOpts::default())
    }

    fn i1_like(&self, a: ValueId, code: Opcode) -> Result<Type, BuildError> {
        let t = self.ty(a)?;
        t.tile_shape()
            .map(|sh| Type::tile(ScalarType::I1, sh))
            .ok_or_else(|| {
                BuildError::op(
                    code,
                    format!("operands must be tiles, got {}", type_text(t)),
                )
            })
    }

    /// Ordered float comparison; the result is an i1 tile of the operand shape.
    pub fn cmpf(
        &mut self,
        pred: ComparisonPredicate,
        a: ValueId,
        b: ValueId,
    ) -> Result<ValueId, BuildError> {
        self.cmpf_with(pred, ComparisonOrdering::Ordered, a, b)
    }
    pub fn cmpf_with(
        &mut self,
        pred: ComparisonPredicate,
        ordering: ComparisonOrdering,
        a: ValueId,
        b: ValueId,
    ) -> Result<ValueId, BuildError> {
        let ty = self.i1_like(a, Opcode::CmpF)?;
        let mut op = positional(Opcode::CmpF, &[a, b]);
        set_attr(&mut op, "comparison_predicate", OpAttr::Enum(pred.into()))?;
        set_attr(
            &mut op,
            "comparison_ordering",
            OpAttr::Enum(ordering.into()),
        )?;
        self.emit1(op, ty)
    }
    /// Integer comparison; the result is an i1 tile of the operand shape.
    pub fn cmpi(
        &mut self,
        pred: ComparisonPredicate,
        a: ValueId,
        b: ValueId,
        s: Signedness,
    ) -> Result<ValueId, BuildError> {
        let ty = self.i1_like(a, Opcode::CmpI)?;
        let mut op = positional(Opcode::CmpI, &[a, b]);
        set_attr(&mut op, "comparison_predicate", OpAttr::Enum(pred.into()))?;
        set_attr(&mut op, "signedness", OpAttr::Enum(s.into()))?;
        self.emit1(op, ty)
    }

    /// `cond ? t : f` elementwise; `cond` is an i1 tile of the values' shape.
    pub fn select(&mut self, cond: ValueId, t: ValueId, f: ValueId) -> Result<ValueId, BuildError> {
        let ty = self.ty(t)?.clone();
        self.emit1(positional(Opcode::Select, &[cond, t, f]), ty)
    }

    fn with_elem(&self, v: ValueId, to: ScalarType, code: Opcode) -> Result<Type, BuildError> {
        let t = self.ty(v)?;
        t.tile_shape().map(|sh| Type::tile(to, sh)).ok_or_else(|| {
            BuildError::op(code, format!("source must be a tile, got {}", type_text(t)))
        })
    }

    fn convert(
        &mut self,
        code: Opcode,
        v: ValueId,
        to: ScalarType,
        attrs: &[(&str, OpAttr)],
    ) -> Result<ValueId, BuildError> {
        let ty = self.with_elem(v, to, code)?;
        let mut op = positional(code, &[v]);
        for (n, a) in attrs {
            set_attr(&mut op, n, a.clone())?;
        }
        self.emit1(op, ty)
    }

    /// Float → float conversion (rounding `nearest_even`; use [`Self::ftof_with`] for `f8E8M0FNU` targets).
    pub fn ftof(&mut self, v: ValueId, to: ScalarType) -> Result<ValueId, BuildError> {
        let rm = if to == ScalarType::F8E8M0FNU {
            RoundingMode::PositiveInf
        } else {
            RoundingMode::NearestEven
        };
        self.ftof_with(v, to, rm)
    }
    pub fn ftof_with(
        &mut self,
        v: ValueId,
        to: ScalarType,
        rounding: RoundingMode,
    ) -> Result<ValueId, BuildError> {
        self.convert(
            Opcode::FToF,
            v,
            to,
            &[("rounding_mode", OpAttr::Enum(rounding.into()))],
        )
    }
    /// Float → integer conversion, truncating toward zero.
    pub fn ftoi(
        &mut self,
        v: ValueId,
        to: ScalarType,
        s: Signedness,
    ) -> Result<ValueId, BuildError> {
        self.convert(
            Opcode::FToI,
            v,
            to,
            &[
                ("signedness", OpAttr::Enum(s.into())),
                (
                    "rounding_mode",
                    OpAttr::Enum(RoundingMode::NearestIntToZero.into()),
                ),
            ],
        )
    }
    /// Integer → float conversion (rounding `nearest_even`).
    pub fn itof(
        &mut self,
        v: ValueId,
        to: ScalarType,
        s: Signedness,
    ) -> Result<ValueId, BuildError> {
        self.convert(
            Opcode::IToF,
            v,
            to,
            &[
                ("signedness", OpAttr::Enum(s.into())),
                (
                    "rounding_mode",
                    OpAttr::Enum(RoundingMode::NearestEven.into()),
                ),
            ],
        )
    }
    /// Integer widening (sign- or zero-extending).
    pub fn exti(
        &mut self,
        v: ValueId,
        to: ScalarType,
        s: Signedness,
    ) -> Result<ValueId, BuildError> {
        self.convert(
            Opcode::ExtI,
            v,
            to,
            &[("signedness", OpAttr::Enum(s.into()))],
        )
    }
    /// Integer narrowing.
    pub fn trunci(&mut self, v: ValueId, to: ScalarType) -> Result<ValueId, BuildError> {
        self.convert(
            Opcode::TruncI,
            v,
            to,
            &[("overflow", OpAttr::Enum(IntegerOverflow::None.into()))],
        )
    }
    /// Reinterpret the bits as another element type of the same width.
    pub fn bitcast(&mut self, v: ValueId, to: ScalarType) -> Result<ValueId, BuildError> {
        self.convert(Opcode::Bitcast, v, to, &[])
    }
    /// i64 tile → tile of `ptr<pointee>`.
    pub fn int_to_ptr(&mut self, v: ValueId, pointee: ScalarType) -> Result<ValueId, BuildError> {
        let t = self.ty(v)?;
        let sh = t.tile_shape().map(<[i64]>::to_vec).unwrap_or_default();
        self.emit1(
            positional(Opcode::IntToPtr, &[v]),
            Type::pointer_tile(pointee, &sh),
        )
    }
    /// Tile of pointers → i64 tile.
    pub fn ptr_to_int(&mut self, v: ValueId) -> Result<ValueId, BuildError> {
        let ty = self.with_elem(v, ScalarType::I64, Opcode::PtrToInt)?;
        self.emit1(positional(Opcode::PtrToInt, &[v]), ty)
    }
    /// Tile of pointers → tile of `ptr<pointee>`.
    pub fn ptr_to_ptr(&mut self, v: ValueId, pointee: ScalarType) -> Result<ValueId, BuildError> {
        let t = self.ty(v)?;
        let sh = t.tile_shape().map(<[i64]>::to_vec).unwrap_or_default();
        self.emit1(
            positional(Opcode::PtrToPtr, &[v]),
            Type::pointer_tile(pointee, &sh),
        )
    }
}
