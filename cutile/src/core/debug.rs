//! Device-side output and checks: `print!`/`println!` and `assert!` inside kernels are rewritten by the
//! macro into [`print`] and [`device_assert`]. `{}` placeholders become printf conversions chosen from each
//! argument's element type; every element of a tile argument is printed.

use cutile_ir::{OpAttr, Opcode, ScalarType, Type, ValueId};

use super::elem::ElementType;
use super::shape::Shape;
use super::value::{Scalar, Tile};
use crate::trace::{self, Op};

/// A value `print!` can show: a tile or a scalar.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be printed from the device",
    label = "only tiles and scalars can be printed"
)]
pub trait DevicePrint {
    #[doc(hidden)]
    fn print_arg(&self) -> (ValueId, ScalarType);
}
impl<E: ElementType, S: Shape> DevicePrint for Tile<E, S> {
    fn print_arg(&self) -> (ValueId, ScalarType) {
        (self.v, E::SCALAR)
    }
}
impl<E: ElementType> DevicePrint for Scalar<E> {
    fn print_arg(&self) -> (ValueId, ScalarType) {
        (self.v, E::SCALAR)
    }
}

fn conversion(e: ScalarType) -> &'static str {
    match e {
        ScalarType::I64 => "%lld",
        t if t.is_integer() => "%d",
        _ => "%f",
    }
}

/// Print `pieces[0] arg0 pieces[1] arg1 …` from every thread block that reaches it. `pieces` has one
/// more entry than `args`; literal `%` is escaped.
#[track_caller]
pub fn print(pieces: &[&str], args: &[&dyn DevicePrint]) {
    let _at = crate::trace::at(::std::panic::Location::caller());
    if pieces.len() != args.len() + 1 {
        trace::fail(format!(
            "print: {} placeholders but {} arguments",
            pieces.len().saturating_sub(1),
            args.len()
        ));
        return;
    }
    let mut fmt = String::new();
    let mut vals = vec![];
    for (i, p) in pieces.iter().enumerate() {
        fmt.push_str(&p.replace('%', "%%"));
        if let Some(a) = args.get(i) {
            let (v, e) = a.print_arg();
            let (v, e) = match e {
                // printf has no 16-bit or 8-bit float conversions: widen for printing.
                ScalarType::F16
                | ScalarType::BF16
                | ScalarType::F8E4M3FN
                | ScalarType::F8E5M2
                | ScalarType::TF32 => {
                    let dims: Vec<i32> = trace::with(|t| {
                        t.ty(v)
                            .tile_shape()
                            .unwrap_or(&[])
                            .iter()
                            .map(|&d| d as i32)
                            .collect()
                    });
                    (
                        super::tileops::convert(v, e, ScalarType::F32, &dims),
                        ScalarType::F32,
                    )
                }
                ScalarType::I1 | ScalarType::I8 | ScalarType::I16 => {
                    let dims: Vec<i32> = trace::with(|t| {
                        t.ty(v)
                            .tile_shape()
                            .unwrap_or(&[])
                            .iter()
                            .map(|&d| d as i32)
                            .collect()
                    });
                    (
                        super::tileops::convert(v, e, ScalarType::I32, &dims),
                        ScalarType::I32,
                    )
                }
                _ => (v, e),
            };
            fmt.push_str(conversion(e));
            vals.push(v);
        }
    }
    trace::with(|t| {
        t.push(
            Op::new(Opcode::PrintTko)
                .attr("str", OpAttr::Str(fmt))
                .operands("args", &vals)
                .result(Type::Token),
        )
    });
}

/// A condition `assert!` accepts: a host `bool` (checked while tracing: a false one fails the
/// specialization with the message) or device `bool` scalars/tiles (checked at run time).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be asserted",
    label = "expected a `bool`, a `Scalar<bool>` or a `Tile<bool, _>`"
)]
pub trait AssertCond {
    #[doc(hidden)]
    #[track_caller]
    fn check(self, message: &str);
}
impl AssertCond for bool {
    #[track_caller]
    fn check(self, message: &str) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        if !self {
            trace::fail(format!("assertion failed: {message}"));
        }
    }
}
impl AssertCond for Scalar<bool> {
    #[track_caller]
    fn check(self, message: &str) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        emit_assert(self.v, message);
    }
}
impl<S: Shape> AssertCond for Tile<bool, S> {
    #[track_caller]
    fn check(self, message: &str) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        emit_assert(self.v, message);
    }
}

fn emit_assert(v: ValueId, message: &str) {
    trace::with(|t| {
        t.push(
            Op::new(Opcode::Assert)
                .attr("message", OpAttr::Str(message.to_string()))
                .operand("condition", v),
        )
    });
}

/// `assert!(cond, msg)` in a kernel.
#[track_caller]
pub fn device_assert(cond: impl AssertCond, message: &str) {
    let _at = crate::trace::at(::std::panic::Location::caller());
    cond.check(message);
}
