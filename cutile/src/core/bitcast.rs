//! `bitcast`: reinterpret the bits of every element of a tile (or scalar) as another element type of
//! the same width (Tile IR `bitcast`). The width check is a trait bound ([`BitWidth`]), so a
//! mismatch (say `i32` → `f16`) is a rustc error at the call, not a trace or verifier failure.
//!
//! Typical uses: building float bit patterns with integer ops (`i16` → `bf16`/`f16`, `i32` → `f32`),
//! reading a float's bits (`f32` → `i32`), and viewing bytes as fp8 (`i8` → `f8e4m3fn`).
//!
//! `reinterpret` is the cross-width form: the tile's bytes (row-major) read as elements of another
//! width in another shape (Tile IR 13.3+ `pack`/`unpack` through `i8`), e.g. bytes as 32-bit words, or
//! words built by integer ops as bf16 pairs, two elements per 32-bit instruction.

use cutile_ir::{Opcode, ValueId};

use super::elem::{ElementType, bf16, f4e2m1fn, f8e4m3fn, f8e5m2, f8e8m0fnu, f16};
use super::shape::{Shape, fmt_dims, numel};
use super::value::{Scalar, Tile, check_tile_dims, tile_type};
use crate::trace::{self, Op};

/// Width markers of [`BitWidth::Bits`].
pub mod width {
    /// 4 bits (two elements per byte).
    #[derive(Clone, Copy, Debug)]
    pub struct W4;
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
    label = "bitcast takes i8, i16, i32, i64, f16, bf16, f32, f64, f8e4m3fn, f8e5m2, f8e8m0fnu or f4e2m1fn"
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
    f4e2m1fn => W4,
    i8 => W8, f8e4m3fn => W8, f8e5m2 => W8, f8e8m0fnu => W8,
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

/// Bit width of an element type, for [`Tile::reinterpret`]'s size check.
fn bits(s: cutile_ir::ScalarType) -> usize {
    s.bit_width() as usize
}

fn push(op: Op) -> ValueId {
    trace::with(|t| t.push1(op))
}

impl<E: BitWidth, S: Shape> Tile<E, S> {
    /// The tile's bytes (row-major, little-endian elements) read as elements of `F` in shape `T`:
    /// `T` must hold the same number of bits (checked when the kernel is specialized). Same-width
    /// types go through [`Tile::bitcast`] and a reshape; other widths through Tile IR `pack` (to `i8`)
    /// and `unpack` (from `i8`) on the flattened tile (8-bit types other than `i8` bitcast to and from
    /// `i8` around them). Element `i` of the result is made of bytes `i·w .. (i+1)·w` of the source
    /// (`w` = `F`'s width), so a 32-bit word `i` read as `bf16` gives elements `2i` (its low half) and
    /// `2i + 1` (its high half), and byte `j` read as `f4e2m1fn` gives elements `2j` (its low nibble)
    /// and `2j + 1` (its high nibble).
    #[track_caller]
    pub fn reinterpret<F: BitWidth, T: Shape>(self) -> Tile<F, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(T::DIMS, "reinterpret");
        let (from, to) = (E::SCALAR, F::SCALAR);
        let (n_from, n_to) = (numel(S::DIMS) as usize, numel(T::DIMS) as usize);
        if n_from * bits(from) != n_to * bits(to) || !(n_from * bits(from)).is_multiple_of(8) {
            trace::fail(format!(
                "cannot reinterpret a {} tile of shape {} ({} bits) as a {} tile of shape {} ({} bits): \
                 both must hold the same whole number of bytes",
                from,
                fmt_dims(S::DIMS),
                n_from * bits(from),
                to,
                fmt_dims(T::DIMS),
                n_to * bits(to),
            ));
            return Tile::from_value(super::arith::poison(Tile::<F, T>::ir_type()));
        }
        let flat = |v: ValueId, s: cutile_ir::ScalarType, from_dims: &[i32], n: usize| {
            if from_dims.len() == 1 {
                return v;
            }
            push(
                Op::new(Opcode::Reshape)
                    .operand("source", v)
                    .result(tile_type(s, &[n as i32])),
            )
        };
        let mut v = flat(self.v, from, S::DIMS, n_from);
        let i8t = cutile_ir::ScalarType::I8;
        if bits(from) == bits(to) {
            if from != to {
                v = emit(v, to, &[n_to as i32]);
            }
        } else {
            let total = (n_from * bits(from) / 8) as i32;
            // `pack`/`unpack` take and give `i8` and never an 8-bit element type: those bitcast.
            if bits(from) == 8 {
                if from != i8t {
                    v = emit(v, i8t, &[total]);
                }
            } else {
                v = push(
                    Op::new(Opcode::Pack)
                        .operand("source", v)
                        .result(tile_type(i8t, &[total])),
                );
            }
            if bits(to) == 8 {
                if to != i8t {
                    v = emit(v, to, &[total]);
                }
            } else {
                v = push(
                    Op::new(Opcode::Unpack)
                        .operand("source", v)
                        .result(tile_type(to, &[n_to as i32])),
                );
            }
        }
        if T::DIMS.len() == 1 {
            return Tile::from_value(v);
        }
        Tile::from_value(push(
            Op::new(Opcode::Reshape)
                .operand("source", v)
                .result(Tile::<F, T>::ir_type()),
        ))
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
