//! Element-wise arithmetic: operators (`+ - * / % -x !x & | ^ << >>`), math functions, comparisons,
//! `select`, `fma`, min/max, and constants. Float or integer IR ops are chosen from the element type.
//!
//! Operands must have the same shape (rustc checks it); to combine a tile with a column or row, broadcast
//! it first (`m.broadcast()`); a [`Scalar`] or a host number (`x * 2.0`) is splatted automatically.

use std::ops;

use cutile_ir::{
    ComparisonOrdering, ComparisonPredicate, IntegerOverflow, OpAttr, Opcode, RoundingMode,
    ScalarType, Signedness, Type, ValueId,
};

use super::elem::{ElementType, Float, HostConst, HostNum, Int, Numeric, scalar_bytes};
use super::shape::Shape;
use super::value::{Scalar, Tile, tile_type};
use crate::trace::{self, Op};

/// Binary element-wise operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Pow,
    Atan2,
    /// The high half of the double-width product, operands taken as unsigned (`MulhiI`).
    MulHiU,
}

/// Unary element-wise operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Un {
    Neg,
    Not,
    Abs,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Tanh,
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Floor,
    Ceil,
}

fn enum_attr(v: impl Into<cutile_ir::EnumValue>) -> OpAttr {
    OpAttr::Enum(v.into())
}

/// Emit a binary op on two values of IR type `ty` with element type `e`.
#[track_caller]
pub(crate) fn binary(k: Bin, e: ScalarType, ty: Type, a: ValueId, b: ValueId) -> ValueId {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let float = e.is_float();
    let rn = || enum_attr(RoundingMode::NearestEven);
    let signed = || enum_attr(Signedness::Signed);
    let ovf = || enum_attr(IntegerOverflow::None);
    let op = match (k, float) {
        (Bin::Add, true) => Op::new(Opcode::AddF).attr("rounding_mode", rn()),
        (Bin::Add, false) => Op::new(Opcode::AddI).attr("overflow", ovf()),
        (Bin::Sub, true) => Op::new(Opcode::SubF).attr("rounding_mode", rn()),
        (Bin::Sub, false) => Op::new(Opcode::SubI).attr("overflow", ovf()),
        (Bin::Mul, true) => Op::new(Opcode::MulF).attr("rounding_mode", rn()),
        (Bin::Mul, false) => Op::new(Opcode::MulI).attr("overflow", ovf()),
        (Bin::Div, true) => Op::new(Opcode::DivF).attr("rounding_mode", rn()),
        // Rust semantics: integer division truncates toward zero.
        (Bin::Div, false) => Op::new(Opcode::DivI)
            .attr("signedness", signed())
            .attr("rounding", enum_attr(RoundingMode::Zero)),
        (Bin::Rem, true) => Op::new(Opcode::RemF),
        (Bin::Rem, false) => Op::new(Opcode::RemI).attr("signedness", signed()),
        (Bin::Min, true) => Op::new(Opcode::MinF),
        (Bin::Min, false) => Op::new(Opcode::MinI).attr("signedness", signed()),
        (Bin::Max, true) => Op::new(Opcode::MaxF),
        (Bin::Max, false) => Op::new(Opcode::MaxI).attr("signedness", signed()),
        (Bin::And, false) => Op::new(Opcode::AndI),
        (Bin::Or, false) => Op::new(Opcode::OrI),
        (Bin::Xor, false) => Op::new(Opcode::XOrI),
        (Bin::Shl, false) => Op::new(Opcode::ShLI).attr("overflow", ovf()),
        (Bin::Shr, false) => Op::new(Opcode::ShRI).attr("signedness", signed()),
        (Bin::Pow, true) => Op::new(Opcode::FPowF),
        (Bin::Atan2, true) => Op::new(Opcode::Atan2),
        (Bin::MulHiU, false) => Op::new(Opcode::MulhiI),
        _ => {
            trace::fail(format!("{k:?} is not defined on {e} elements"));
            return poison(ty);
        }
    };
    let (l, r) = match k {
        Bin::Pow => ("source", "exponent"),
        Bin::Atan2 | Bin::MulHiU => ("x", "y"),
        _ => ("lhs", "rhs"),
    };
    trace::with(|t| t.push1(op.operand(l, a).operand(r, b).result(ty)))
}

/// Emit a unary op.
#[track_caller]
pub(crate) fn unary(k: Un, e: ScalarType, ty: Type, a: ValueId) -> ValueId {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let float = e.is_float();
    let op = match (k, float) {
        (Un::Neg, true) => Op::new(Opcode::NegF),
        (Un::Neg, false) => {
            Op::new(Opcode::NegI).attr("overflow", enum_attr(IntegerOverflow::None))
        }
        (Un::Not, false) => {
            // Bitwise not: xor with all ones (for i1, logical not).
            let ones = splat_const(e, &ty, HostNum::Int(mask_of(e)));
            return trace::with(|t| {
                t.push1(
                    Op::new(Opcode::XOrI)
                        .operand("lhs", a)
                        .operand("rhs", ones)
                        .result(ty),
                )
            });
        }
        (Un::Abs, true) => Op::new(Opcode::AbsF),
        (Un::Abs, false) => Op::new(Opcode::AbsI),
        (Un::Exp, true) => {
            Op::new(Opcode::Exp).attr("rounding_mode", enum_attr(RoundingMode::Full))
        }
        (Un::Exp2, true) => Op::new(Opcode::Exp2),
        (Un::Log, true) => Op::new(Opcode::Log),
        (Un::Log2, true) => Op::new(Opcode::Log2),
        (Un::Sqrt, true) => {
            Op::new(Opcode::Sqrt).attr("rounding_mode", enum_attr(RoundingMode::NearestEven))
        }
        (Un::Rsqrt, true) => Op::new(Opcode::Rsqrt),
        (Un::Tanh, true) => {
            Op::new(Opcode::TanH).attr("rounding_mode", enum_attr(RoundingMode::Full))
        }
        (Un::Sin, true) => Op::new(Opcode::Sin),
        (Un::Cos, true) => Op::new(Opcode::Cos),
        (Un::Tan, true) => Op::new(Opcode::Tan),
        (Un::Sinh, true) => Op::new(Opcode::SinH),
        (Un::Cosh, true) => Op::new(Opcode::CosH),
        (Un::Floor, true) => Op::new(Opcode::Floor),
        (Un::Ceil, true) => Op::new(Opcode::Ceil),
        _ => {
            trace::fail(format!("{k:?} is not defined on {e} elements"));
            return poison(ty);
        }
    };
    trace::with(|t| t.push1(op.operand("source", a).result(ty)))
}

fn mask_of(e: ScalarType) -> i64 {
    match e.bit_width() {
        64 => -1,
        1 => 1,
        w => (1i64 << w) - 1,
    }
}

/// A placeholder value of type `ty` used after an error, so tracing can go on.
pub(crate) fn poison(ty: Type) -> ValueId {
    trace::with(|t| {
        let e = ty.tile_scalar().unwrap_or(ScalarType::I32);
        let bytes = vec![0u8; e.storage_bytes()];
        t.push1(
            Op::new(Opcode::Constant)
                .attr("value", OpAttr::Dense(bytes))
                .result(ty),
        )
    })
}

/// A splat constant of type `ty` (a tile of element `e`).
#[track_caller]
pub(crate) fn splat_const(e: ScalarType, ty: &Type, v: HostNum) -> ValueId {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let bytes = match scalar_bytes(e, v) {
        Ok(b) => b,
        Err(m) => {
            trace::fail(m);
            vec![0u8; e.storage_bytes()]
        }
    };
    trace::with(|t| {
        t.push1(
            Op::new(Opcode::Constant)
                .attr("value", OpAttr::Dense(bytes))
                .result(ty.clone()),
        )
    })
}

/// Reshape then broadcast a rank-0 value to a tile of `dims`.
pub(crate) fn splat_value(e: ScalarType, v: ValueId, dims: &[i32]) -> ValueId {
    if dims.is_empty() {
        return v;
    }
    let ones = vec![1; dims.len()];
    trace::with(|t| {
        let r = t.push1(
            Op::new(Opcode::Reshape)
                .operand("source", v)
                .result(tile_type(e, &ones)),
        );
        if dims.iter().all(|&d| d == 1) {
            r
        } else {
            t.push1(
                Op::new(Opcode::Broadcast)
                    .operand("source", r)
                    .result(tile_type(e, dims)),
            )
        }
    })
}

/// Comparison producing an i1 tile of type `ty_bool`.
#[track_caller]
pub(crate) fn compare(
    p: ComparisonPredicate,
    e: ScalarType,
    ty_bool: Type,
    a: ValueId,
    b: ValueId,
) -> ValueId {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let op = if e.is_float() {
        Op::new(Opcode::CmpF)
            .attr("comparison_predicate", enum_attr(p))
            .attr(
                "comparison_ordering",
                enum_attr(ComparisonOrdering::Ordered),
            )
    } else {
        let s = if e == ScalarType::I1 {
            Signedness::Unsigned
        } else {
            Signedness::Signed
        };
        Op::new(Opcode::CmpI)
            .attr("comparison_predicate", enum_attr(p))
            .attr("signedness", enum_attr(s))
    };
    trace::with(|t| t.push1(op.operand("lhs", a).operand("rhs", b).result(ty_bool)))
}

// ---------------------------------------------------------------------------------------------------------
// Operators on tiles and scalars.

/// Something that can be the right-hand side of an element-wise op with a `Tile<E, S>`: the same tile
/// type, a [`Scalar<E>`] or a host number; produces the IR value of shape `S`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be combined element-wise with a `Tile<{E}, {S}>`",
    label = "operand shape or element type differs",
    note = "element-wise operands must have the same element type and shape; broadcast a row or column first \
            (`m.broadcast()`), convert with `.cast::<…>()`, or use a `Scalar` or a number"
)]
pub trait Operand<E: ElementType, S: Shape> {
    #[doc(hidden)]
    fn value_as(self, dims: &'static [i32]) -> ValueId;
}
impl<E: ElementType, S: Shape> Operand<E, S> for Tile<E, S> {
    fn value_as(self, _: &'static [i32]) -> ValueId {
        self.v
    }
}
impl<E: ElementType, S: Shape> Operand<E, S> for Scalar<E> {
    fn value_as(self, dims: &'static [i32]) -> ValueId {
        splat_value(E::SCALAR, self.v, dims)
    }
}
macro_rules! host_operand {
    ($($h:ty),*) => {$(
        impl<E: ElementType, S: Shape> Operand<E, S> for $h {
            #[track_caller]
            fn value_as(self, dims: &'static [i32]) -> ValueId {
                let _at = crate::trace::at(::std::panic::Location::caller());
                splat_const(E::SCALAR, &tile_type(E::SCALAR, dims), self.host_num())
            }
        }
    )*};
}
host_operand!(f32, f64, i32, i64, bool);

macro_rules! binop {
    ($tr:ident, $m:ident, $atr:ident, $am:ident, $k:expr, $bound:ident) => {
        impl<E: $bound, S: Shape, R: Operand<E, S>> ops::$tr<R> for Tile<E, S> {
            type Output = Tile<E, S>;
            #[track_caller]
            fn $m(self, rhs: R) -> Tile<E, S> {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let b = rhs.value_as(S::DIMS);
                Tile::from_value(binary($k, E::SCALAR, Self::ir_type(), self.v, b))
            }
        }
        impl<E: $bound, S: Shape, R: Operand<E, S>> ops::$atr<R> for Tile<E, S> {
            #[track_caller]
            fn $am(&mut self, rhs: R) {
                let _at = crate::trace::at(::std::panic::Location::caller());
                *self = ops::$tr::$m(*self, rhs);
            }
        }
        impl<E: $bound, S: Shape> ops::$tr<Tile<E, S>> for Scalar<E> {
            type Output = Tile<E, S>;
            #[track_caller]
            fn $m(self, rhs: Tile<E, S>) -> Tile<E, S> {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let a = splat_value(E::SCALAR, self.v, S::DIMS);
                Tile::from_value(binary($k, E::SCALAR, Tile::<E, S>::ir_type(), a, rhs.v))
            }
        }
        scalar_rhs!($tr, $m, $atr, $am, $k, $bound; Scalar<E>, f32, f64, i32, i64);
        host_lhs!($tr, $m, $k, $bound; f32, f64, i32, i64);
    };
}

macro_rules! scalar_rhs {
    ($tr:ident, $m:ident, $atr:ident, $am:ident, $k:expr, $bound:ident; $($r:ty),*) => {$(
        impl<E: $bound> ops::$tr<$r> for Scalar<E> {
            type Output = Scalar<E>;
            #[track_caller]
            fn $m(self, rhs: $r) -> Scalar<E> {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let b = ScalarOperand::<E>::scalar_value(rhs);
                Scalar::from_value(binary($k, E::SCALAR, Self::ir_type(), self.v, b))
            }
        }
        impl<E: $bound> ops::$atr<$r> for Scalar<E> {
            #[track_caller]
            fn $am(&mut self, rhs: $r) {
                let _at = crate::trace::at(::std::panic::Location::caller());
                *self = ops::$tr::$m(*self, rhs);
            }
        }
    )*};
}

macro_rules! host_lhs {
    ($tr:ident, $m:ident, $k:expr, $bound:ident; $($h:ty),*) => {$(
        impl<E: $bound, S: Shape> ops::$tr<Tile<E, S>> for $h {
            type Output = Tile<E, S>;
            #[track_caller]
            fn $m(self, rhs: Tile<E, S>) -> Tile<E, S> {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let a = splat_const(E::SCALAR, &Tile::<E, S>::ir_type(), self.host_num());
                Tile::from_value(binary($k, E::SCALAR, Tile::<E, S>::ir_type(), a, rhs.v))
            }
        }
        impl<E: $bound> ops::$tr<Scalar<E>> for $h {
            type Output = Scalar<E>;
            #[track_caller]
            fn $m(self, rhs: Scalar<E>) -> Scalar<E> {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let a = splat_const(E::SCALAR, &Scalar::<E>::ir_type(), self.host_num());
                Scalar::from_value(binary($k, E::SCALAR, Scalar::<E>::ir_type(), a, rhs.v))
            }
        }
    )*};
}

/// The right-hand side of an op with a [`Scalar<E>`]: another scalar or a host number.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be combined with a `Scalar<{E}>`",
    label = "expected a `Scalar<{E}>` or a number"
)]
pub trait ScalarOperand<E: ElementType> {
    #[doc(hidden)]
    fn scalar_value(self) -> ValueId;
}
impl<E: ElementType> ScalarOperand<E> for Scalar<E> {
    fn scalar_value(self) -> ValueId {
        self.v
    }
}
macro_rules! host_scalar_operand {
    ($($h:ty),*) => {$(
        impl<E: ElementType> ScalarOperand<E> for $h {
            #[track_caller]
            fn scalar_value(self) -> ValueId {
                let _at = crate::trace::at(::std::panic::Location::caller());
                splat_const(E::SCALAR, &Scalar::<E>::ir_type(), self.host_num())
            }
        }
    )*};
}
host_scalar_operand!(f32, f64, i32, i64, bool);

binop!(Add, add, AddAssign, add_assign, Bin::Add, Numeric);
binop!(Sub, sub, SubAssign, sub_assign, Bin::Sub, Numeric);
binop!(Mul, mul, MulAssign, mul_assign, Bin::Mul, Numeric);
binop!(Div, div, DivAssign, div_assign, Bin::Div, Numeric);
binop!(Rem, rem, RemAssign, rem_assign, Bin::Rem, Numeric);
binop!(BitAnd, bitand, BitAndAssign, bitand_assign, Bin::And, Bits);
binop!(BitOr, bitor, BitOrAssign, bitor_assign, Bin::Or, Bits);
binop!(BitXor, bitxor, BitXorAssign, bitxor_assign, Bin::Xor, Bits);
binop!(Shl, shl, ShlAssign, shl_assign, Bin::Shl, Int);
binop!(Shr, shr, ShrAssign, shr_assign, Bin::Shr, Int);

/// Element types with bitwise operations: the integers and bool.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no bitwise operations",
    label = "needs integer or bool elements"
)]
pub trait Bits: ElementType {}
impl Bits for bool {}
impl<T: Int> Bits for T {}

impl<E: Numeric, S: Shape> ops::Neg for Tile<E, S> {
    type Output = Tile<E, S>;
    #[track_caller]
    fn neg(self) -> Self {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Tile::from_value(unary(Un::Neg, E::SCALAR, Self::ir_type(), self.v))
    }
}
impl<E: Numeric> ops::Neg for Scalar<E> {
    type Output = Scalar<E>;
    #[track_caller]
    fn neg(self) -> Self {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Scalar::from_value(unary(Un::Neg, E::SCALAR, Self::ir_type(), self.v))
    }
}
impl<E: Bits, S: Shape> ops::Not for Tile<E, S> {
    type Output = Tile<E, S>;
    #[track_caller]
    fn not(self) -> Self {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Tile::from_value(unary(Un::Not, E::SCALAR, Self::ir_type(), self.v))
    }
}
impl<E: Bits> ops::Not for Scalar<E> {
    type Output = Scalar<E>;
    #[track_caller]
    fn not(self) -> Self {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Scalar::from_value(unary(Un::Not, E::SCALAR, Self::ir_type(), self.v))
    }
}

// ---------------------------------------------------------------------------------------------------------
// Math functions and comparisons, as methods on tiles and scalars.

macro_rules! math_methods {
    ($($(#[$doc:meta])* $name:ident => $k:expr),* $(,)?) => {
        impl<E: Float, S: Shape> Tile<E, S> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self) -> Self {
                let _at = crate::trace::at(::std::panic::Location::caller());
                Tile::from_value(unary($k, E::SCALAR, Self::ir_type(), self.v))
            }
        )*}
        impl<E: Float> Scalar<E> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self) -> Self {
                let _at = crate::trace::at(::std::panic::Location::caller());
                Scalar::from_value(unary($k, E::SCALAR, Self::ir_type(), self.v))
            }
        )*}
    };
}
math_methods!(
    /// e^x.
    exp => Un::Exp,
    /// 2^x.
    exp2 => Un::Exp2,
    /// Natural logarithm.
    ln => Un::Log,
    /// Base-2 logarithm.
    log2 => Un::Log2,
    /// Square root.
    sqrt => Un::Sqrt,
    /// 1 / sqrt(x).
    rsqrt => Un::Rsqrt,
    /// Hyperbolic tangent.
    tanh => Un::Tanh,
    /// Sine.
    sin => Un::Sin,
    /// Cosine.
    cos => Un::Cos,
    /// Tangent.
    tan => Un::Tan,
    /// Hyperbolic sine.
    sinh => Un::Sinh,
    /// Hyperbolic cosine.
    cosh => Un::Cosh,
    /// Round toward negative infinity.
    floor => Un::Floor,
    /// Round toward positive infinity.
    ceil => Un::Ceil,
);

macro_rules! binary_methods {
    ($bound:ident; $($(#[$doc:meta])* $name:ident => $k:expr),* $(,)?) => {
        impl<E: $bound, S: Shape> Tile<E, S> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self, rhs: impl Operand<E, S>) -> Self {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let b = rhs.value_as(S::DIMS);
                Tile::from_value(binary($k, E::SCALAR, Self::ir_type(), self.v, b))
            }
        )*}
        impl<E: $bound> Scalar<E> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self, rhs: impl ScalarOperand<E>) -> Self {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let b = rhs.scalar_value();
                Scalar::from_value(binary($k, E::SCALAR, Self::ir_type(), self.v, b))
            }
        )*}
    };
}
binary_methods!(Numeric;
    /// Element-wise minimum.
    min => Bin::Min,
    /// Element-wise maximum.
    max => Bin::Max,
);
binary_methods!(Int;
    /// The high half of the double-width product of `self` and `rhs` taken as unsigned integers
    /// (`u32 x u32 → u64 >> 32` for i32): with the wrapping `*` (the low half) a full 32 x 32-bit
    /// product without 64-bit lanes, as counter-based RNGs (Philox) need.
    mulhi_unsigned => Bin::MulHiU,
);
binary_methods!(Float;
    /// `self` raised to `rhs`.
    pow => Bin::Pow,
    /// atan2(self, rhs).
    atan2 => Bin::Atan2,
);

impl<E: Numeric, S: Shape> Tile<E, S> {
    /// Absolute value.
    #[track_caller]
    pub fn abs(self) -> Self {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Tile::from_value(unary(Un::Abs, E::SCALAR, Self::ir_type(), self.v))
    }
}
impl<E: Numeric> Scalar<E> {
    /// Absolute value.
    #[track_caller]
    pub fn abs(self) -> Self {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Scalar::from_value(unary(Un::Abs, E::SCALAR, Self::ir_type(), self.v))
    }
}

/// `a * b + c` with a single rounding.
#[track_caller]
pub fn fma<E: Float, S: Shape>(
    a: Tile<E, S>,
    b: impl Operand<E, S>,
    c: impl Operand<E, S>,
) -> Tile<E, S> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let b = b.value_as(S::DIMS);
    let c = c.value_as(S::DIMS);
    let op = Op::new(Opcode::Fma)
        .attr("rounding_mode", enum_attr(RoundingMode::NearestEven))
        .operand("lhs", a.v)
        .operand("rhs", b)
        .operand("acc", c)
        .result(Tile::<E, S>::ir_type());
    Tile::from_value(trace::with(|t| t.push1(op)))
}

/// Element-wise choice: `cond ? a : b`.
#[track_caller]
pub fn select<E: ElementType, S: Shape>(
    cond: Tile<bool, S>,
    a: impl Operand<E, S>,
    b: impl Operand<E, S>,
) -> Tile<E, S> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let a = a.value_as(S::DIMS);
    let b = b.value_as(S::DIMS);
    let op = Op::new(Opcode::Select)
        .operand("cond", cond.v)
        .operand("val_if_true", a)
        .operand("val_if_false", b)
        .result(Tile::<E, S>::ir_type());
    Tile::from_value(trace::with(|t| t.push1(op)))
}

/// Scalar choice: `cond ? a : b`.
#[track_caller]
pub fn select_scalar<E: ElementType>(
    cond: Scalar<bool>,
    a: impl ScalarOperand<E>,
    b: impl ScalarOperand<E>,
) -> Scalar<E> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let a = a.scalar_value();
    let b = b.scalar_value();
    let op = Op::new(Opcode::Select)
        .operand("cond", cond.v)
        .operand("val_if_true", a)
        .operand("val_if_false", b)
        .result(Scalar::<E>::ir_type());
    Scalar::from_value(trace::with(|t| t.push1(op)))
}

/// A tile of `S` filled with `value` (converted to `E`; a value `E` cannot hold is a trace error).
#[track_caller]
pub fn full<E: ElementType, S: Shape>(value: impl HostConst) -> Tile<E, S> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    super::value::check_tile_dims(S::DIMS, "full");
    Tile::from_value(splat_const(
        E::SCALAR,
        &Tile::<E, S>::ir_type(),
        value.host_num(),
    ))
}

/// A tile of zeros.
#[track_caller]
pub fn zeros<E: ElementType, S: Shape>() -> Tile<E, S> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    full(0i32)
}

/// A device scalar constant.
#[track_caller]
pub fn scalar<E: ElementType>(value: impl HostConst) -> Scalar<E> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    Scalar::from_value(splat_const(
        E::SCALAR,
        &Scalar::<E>::ir_type(),
        value.host_num(),
    ))
}

/// `[0, 1, …, N-1]` as i32.
#[track_caller]
pub fn iota<const N: i32>() -> Tile<i32, super::shape::S1<N>> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    super::value::check_tile_dims(&[N], "iota");
    let op = Op::new(Opcode::Iota).result(Tile::<i32, super::shape::S1<N>>::ir_type());
    Tile::from_value(trace::with(|t| t.push1(op)))
}

/// Comparisons. The `#[cutile::module]` macro rewrites `a < b`, `a == b`, … in kernels into these, so
/// they work on device values (producing `bool` tiles/scalars) and host values alike.
pub trait DeviceCmp<Rhs> {
    type Output;
    fn cmp_lt(self, rhs: Rhs) -> Self::Output;
    fn cmp_le(self, rhs: Rhs) -> Self::Output;
    fn cmp_gt(self, rhs: Rhs) -> Self::Output;
    fn cmp_ge(self, rhs: Rhs) -> Self::Output;
    fn cmp_eq(self, rhs: Rhs) -> Self::Output;
    fn cmp_ne(self, rhs: Rhs) -> Self::Output;
}

impl<T: PartialOrd> DeviceCmp<T> for T {
    type Output = bool;
    fn cmp_lt(self, rhs: T) -> bool {
        self < rhs
    }
    fn cmp_le(self, rhs: T) -> bool {
        self <= rhs
    }
    fn cmp_gt(self, rhs: T) -> bool {
        self > rhs
    }
    fn cmp_ge(self, rhs: T) -> bool {
        self >= rhs
    }
    fn cmp_eq(self, rhs: T) -> bool {
        self == rhs
    }
    fn cmp_ne(self, rhs: T) -> bool {
        self != rhs
    }
}

macro_rules! device_cmp {
    (impl[$($g:tt)*] $lhs:ty, $rhs:ty => $out:ty, |$a:ident, $b:ident| ($av:expr, $bv:expr), $e:ty, $dims:expr) => {
        impl<$($g)*> DeviceCmp<$rhs> for $lhs {
            type Output = $out;
            #[track_caller]
            fn cmp_lt(self, rhs: $rhs) -> $out { device_cmp!(@go ComparisonPredicate::LessThan, self, rhs, $a, $b, $av, $bv, $e, $dims) }
            #[track_caller]
            fn cmp_le(self, rhs: $rhs) -> $out { device_cmp!(@go ComparisonPredicate::LessThanOrEqual, self, rhs, $a, $b, $av, $bv, $e, $dims) }
            #[track_caller]
            fn cmp_gt(self, rhs: $rhs) -> $out { device_cmp!(@go ComparisonPredicate::GreaterThan, self, rhs, $a, $b, $av, $bv, $e, $dims) }
            #[track_caller]
            fn cmp_ge(self, rhs: $rhs) -> $out { device_cmp!(@go ComparisonPredicate::GreaterThanOrEqual, self, rhs, $a, $b, $av, $bv, $e, $dims) }
            #[track_caller]
            fn cmp_eq(self, rhs: $rhs) -> $out { device_cmp!(@go ComparisonPredicate::Equal, self, rhs, $a, $b, $av, $bv, $e, $dims) }
            #[track_caller]
            fn cmp_ne(self, rhs: $rhs) -> $out { device_cmp!(@go ComparisonPredicate::NotEqual, self, rhs, $a, $b, $av, $bv, $e, $dims) }
        }
    };
    (@go $p:expr, $s:ident, $r:ident, $a:ident, $b:ident, $av:expr, $bv:expr, $e:ty, $dims:expr) => {{
        let $a = $s;
        let $b = $r;
        let (x, y) = ($av, $bv);
        let out = compare($p, <$e as ElementType>::SCALAR, tile_type(ScalarType::I1, $dims), x, y);
        FromCmp::from_cmp(out)
    }};
}

trait FromCmp {
    fn from_cmp(v: ValueId) -> Self;
}
impl<S: Shape> FromCmp for Tile<bool, S> {
    fn from_cmp(v: ValueId) -> Self {
        Tile::from_value(v)
    }
}
impl FromCmp for Scalar<bool> {
    fn from_cmp(v: ValueId) -> Self {
        Scalar::from_value(v)
    }
}

device_cmp!(impl[E: ElementType, S: Shape, R: Operand<E, S>] Tile<E, S>, R => Tile<bool, S>,
    |a, b| (a.v, b.value_as(S::DIMS)), E, S::DIMS);
device_cmp!(impl[E: ElementType, R: ScalarOperand<E>] Scalar<E>, R => Scalar<bool>,
    |a, b| (a.v, b.scalar_value()), E, &[]);
macro_rules! host_cmp_lhs {
    ($($h:ty),*) => {$(
        device_cmp!(impl[E: ElementType] $h, Scalar<E> => Scalar<bool>,
            |a, b| (splat_const(E::SCALAR, &Scalar::<E>::ir_type(), a.host_num()), b.v), E, &[]);
        device_cmp!(impl[E: ElementType, S: Shape] $h, Tile<E, S> => Tile<bool, S>,
            |a, b| (splat_const(E::SCALAR, &Tile::<E, S>::ir_type(), a.host_num()), b.v), E, S::DIMS);
    )*};
}
host_cmp_lhs!(f32, f64, i32, i64);

/// Logical and/or on conditions; the macro rewrites `a && b` / `a || b` in kernels into these.
pub trait DeviceLogic<Rhs> {
    type Output;
    fn logic_and(self, rhs: impl FnOnce() -> Rhs) -> Self::Output;
    fn logic_or(self, rhs: impl FnOnce() -> Rhs) -> Self::Output;
}
impl DeviceLogic<bool> for bool {
    type Output = bool;
    fn logic_and(self, rhs: impl FnOnce() -> bool) -> bool {
        self && rhs()
    }
    fn logic_or(self, rhs: impl FnOnce() -> bool) -> bool {
        self || rhs()
    }
}
impl DeviceLogic<Scalar<bool>> for Scalar<bool> {
    type Output = Scalar<bool>;
    #[track_caller]
    fn logic_and(self, rhs: impl FnOnce() -> Scalar<bool>) -> Scalar<bool> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self & rhs()
    }
    #[track_caller]
    fn logic_or(self, rhs: impl FnOnce() -> Scalar<bool>) -> Scalar<bool> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self | rhs()
    }
}
impl<S: Shape> DeviceLogic<Tile<bool, S>> for Tile<bool, S> {
    type Output = Tile<bool, S>;
    #[track_caller]
    fn logic_and(self, rhs: impl FnOnce() -> Tile<bool, S>) -> Tile<bool, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self & rhs()
    }
    #[track_caller]
    fn logic_or(self, rhs: impl FnOnce() -> Tile<bool, S>) -> Tile<bool, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self | rhs()
    }
}
