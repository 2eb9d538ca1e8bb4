//! Opt-in fast math: approximate `exp`, `exp2` with flush-to-zero, and approximate division with and without
//! flush-to-zero.
//!
//! The plain methods (`exp`, `/`) lower to full-precision ops (`exp rounding<full>`, `divf
//! rounding<nearest_even>`). These lower to the forms cuTile Python emits for its fast softmax and
//! attention kernels:
//!
//! | method | Tile IR |
//! |---|---|
//! | [`Tile::exp_approx`] | `exp … rounding<approx>` |
//! | [`Tile::exp2_ftz`] | `exp2 … flush_to_zero` |
//! | [`Tile::div_approx`] | `divf … rounding<approx>` |
//! | [`Tile::div_approx_ftz`] | `divf … rounding<approx> flush_to_zero` |
//!
//! Tile IR allows approximate rounding and flush-to-zero only on f32 (the verifier rejects them on f16,
//! bf16 and f64), so these methods exist only for [`ApproxFloat`] element types, i.e. `f32`: calling one on
//! a `Tile<bf16, _>` is a rustc error that says to cast to f32 first. Flush-to-zero turns subnormal inputs
//! and results into zero; approximate `exp`/`div` have a few ulp of error (on an H200 the softmax result,
//! rounded to bf16, had the same relative error as with full precision, and ran 1.3–1.8× faster).

use cutile_ir::{OpAttr, Opcode, RoundingMode, ValueId};

use super::arith::Operand;
use super::elem::Float;
use super::shape::Shape;
use super::value::{Scalar, Tile};
use crate::trace::{self, Op};

/// Element types on which Tile IR allows approximate rounding and flush-to-zero: only `f32`.
#[diagnostic::on_unimplemented(
    message = "approximate math and flush-to-zero are only defined on f32 tiles in Tile IR, not on `{Self}`",
    label = "`{Self}` elements cannot use approximate rounding or flush-to-zero",
    note = "convert first: `t.cast::<f32>().exp_approx()`"
)]
pub trait ApproxFloat: Float {}
impl ApproxFloat for f32 {}

fn rounding(r: RoundingMode) -> OpAttr {
    OpAttr::Enum(r.into())
}

fn exp_approx_op(ty: cutile_ir::Type, a: ValueId) -> ValueId {
    trace::with(|t| {
        t.push1(
            Op::new(Opcode::Exp)
                .attr("rounding_mode", rounding(RoundingMode::Approx))
                .operand("source", a)
                .result(ty),
        )
    })
}

fn exp2_ftz_op(ty: cutile_ir::Type, a: ValueId) -> ValueId {
    trace::with(|t| {
        t.push1(
            Op::new(Opcode::Exp2)
                .attr("flush_to_zero", OpAttr::Unit)
                .operand("source", a)
                .result(ty),
        )
    })
}

fn div_approx_op(ty: cutile_ir::Type, a: ValueId, b: ValueId, ftz: bool) -> ValueId {
    let mut op = Op::new(Opcode::DivF).attr("rounding_mode", rounding(RoundingMode::Approx));
    if ftz {
        op = op.attr("flush_to_zero", OpAttr::Unit);
    }
    trace::with(|t| t.push1(op.operand("lhs", a).operand("rhs", b).result(ty)))
}

impl<E: ApproxFloat, S: Shape> Tile<E, S> {
    /// e^x with approximate rounding (`exp … rounding<approx>`).
    #[track_caller]
    pub fn exp_approx(self) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        Tile::from_value(exp_approx_op(Self::ir_type(), self.v))
    }

    /// 2^x with subnormal inputs and results flushed to zero (`exp2 … flush_to_zero`).
    #[track_caller]
    pub fn exp2_ftz(self) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        Tile::from_value(exp2_ftz_op(Self::ir_type(), self.v))
    }

    /// `self / rhs` with approximate rounding (`divf … rounding<approx>`).
    #[track_caller]
    pub fn div_approx(self, rhs: impl Operand<E, S>) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        let b = rhs.value_as(S::DIMS);
        Tile::from_value(div_approx_op(Self::ir_type(), self.v, b, false))
    }

    /// `self / rhs` with approximate rounding and flush-to-zero (`divf … rounding<approx> flush_to_zero`),
    /// cuTile's `truediv(…, rounding_mode=APPROX, flush_to_zero=True)`.
    #[track_caller]
    pub fn div_approx_ftz(self, rhs: impl Operand<E, S>) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        let b = rhs.value_as(S::DIMS);
        Tile::from_value(div_approx_op(Self::ir_type(), self.v, b, true))
    }
}

impl<E: ApproxFloat> Scalar<E> {
    /// e^x with approximate rounding (`exp … rounding<approx>`).
    #[track_caller]
    pub fn exp_approx(self) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        Scalar::from_value(exp_approx_op(Self::ir_type(), self.v))
    }

    /// 2^x with flush-to-zero (`exp2 … flush_to_zero`).
    #[track_caller]
    pub fn exp2_ftz(self) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        Scalar::from_value(exp2_ftz_op(Self::ir_type(), self.v))
    }

    /// `self / rhs` with approximate rounding.
    #[track_caller]
    pub fn div_approx(self, rhs: impl super::arith::ScalarOperand<E>) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        let b = rhs.scalar_value();
        Scalar::from_value(div_approx_op(Self::ir_type(), self.v, b, false))
    }

    /// `self / rhs` with approximate rounding and flush-to-zero.
    #[track_caller]
    pub fn div_approx_ftz(self, rhs: impl super::arith::ScalarOperand<E>) -> Self {
        let _at = trace::at(::std::panic::Location::caller());
        let b = rhs.scalar_value();
        Scalar::from_value(div_approx_op(Self::ir_type(), self.v, b, true))
    }
}
