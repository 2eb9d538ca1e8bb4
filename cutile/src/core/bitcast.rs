//! `bitcast`: reinterpret the bits of every element of a tile (or scalar) as another element type of
//! the same width (Tile IR `bitcast`). The width check is a trait bound ([`BitWidth`]), so a
//! mismatch (say `i32` → `f16`) is a rustc error at the call, not a trace or verifier failure.
//!
//! Typical uses: building float bit patterns with integer ops (`i16` → `bf16`/`f16`, `i32` → `f32`),
//! reading a float's bits (`f32` → `i32`), and viewing bytes as fp8 (`i8` → `f8e4m3fn`).

use cutile_ir::{Opcode, ValueId};

use super::elem::{ElementType, bf16, f8e4m3fn, f8e5m2, f16};
use super::shape::Shape;
use super::value::{Scalar, Tile, tile_type};
use crate::trace::{self, Op};

/// Width markers of [`BitWidth::Bits`].
pub mod width {
    /// 8 bits.
    #[derive(Clone, Copy, Debug)]
    pub struct W8;
    /// 16 bits.
    #[derive(Clone, Copy, Debug)]
    pub struct W16;
    /// 32 bits.
    #[derive(Clone, Copy, Debug)]
    pub struct W32;
    /// 64 bits.
    #[derive(Clone, Copy, Debug)]
    pub struct W64;
}

/// Element types with a fixed storage width that [`Tile::bitcast`] may reinterpret: `Bits` is the
/// width marker; two types may be bitcast into each other exactly when their `Bits` agree.
/// (`bool` and `tf32` are left out: an `i1` has no byte storage and `tf32` is an mma-input view of f32.)
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be bitcast",
    label = "bitcast takes i8, i16, i32, i64, f16, bf16, f32, f64, f8e4m3fn or f8e5m2"
)]
pub trait BitWidth: ElementType {
    /// The width marker ([`width::W8`] … [`width::W64`]).
    type Bits;
}

macro_rules! widths {
    ($($t:ty => $w:ident),* $(,)?) => {$(
        impl BitWidth for $t { type Bits = width::$w; }
    )*};
}
widths!(
    i8 => W8, f8e4m3fn => W8, f8e5m2 => W8,
    i16 => W16, f16 => W16, bf16 => W16,
    i32 => W32, f32 => W32,
    i64 => W64, f64 => W64,
);

fn emit(v: ValueId, to: cutile_ir::ScalarType, dims: &[i32]) -> ValueId {
    trace::with(|t| {
        t.push1(
            Op::new(Opcode::Bitcast)
                .operand("source", v)
                .result(tile_type(to, dims)),
        )
    })
}

impl<E: BitWidth, S: Shape> Tile<E, S> {
    /// The same bits read as element type `F` (same width, enforced by the bound): no rounding, no
    /// conversion; `F == E` returns the tile unchanged.
    #[track_caller]
    pub fn bitcast<F: BitWidth<Bits = E::Bits>>(self) -> Tile<F, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        if E::SCALAR == F::SCALAR {
            return Tile::from_value(self.v);
        }
        Tile::from_value(emit(self.v, F::SCALAR, S::DIMS))
    }
}

impl<E: BitWidth> Scalar<E> {
    /// The same bits read as element type `F` (same width).
    #[track_caller]
    pub fn bitcast<F: BitWidth<Bits = E::Bits>>(self) -> Scalar<F> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        if E::SCALAR == F::SCALAR {
            return Scalar::from_value(self.v);
        }
        Scalar::from_value(emit(self.v, F::SCALAR, &[]))
    }
}
