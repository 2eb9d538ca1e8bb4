//! Typed handles to Tile IR values: [`Tile`], [`Scalar`] and [`Token`], plus the [`Carry`] trait that lets
//! them flow through device control flow (loop-carried values, `if` results).

use std::marker::PhantomData;

use cutile_ir::{ScalarType, Type, ValueId};

use super::elem::ElementType;
use super::shape::{S0, Shape, fmt_dims, numel};
use crate::trace;

/// The largest number of elements tileiras accepts in one tile.
pub const MAX_TILE_ELEMENTS: i64 = 1 << 24;

/// A tile: an immutable value of shape `S` with elements `E`, held in registers of one block.
///
/// `Tile` is a handle to an IR value; it is `Copy`, and every operation on it records IR and returns a new
/// handle. Its shape is static: `S` is one of `S1<A>`, `S2<A, B>`, … whose extents must be powers of two.
pub struct Tile<E, S> {
    pub(crate) v: ValueId,
    _p: PhantomData<fn() -> (E, S)>,
}

/// A device scalar (a rank-0 tile): block ids, loop indices, reduction results, run-time kernel arguments.
pub struct Scalar<E> {
    pub(crate) v: ValueId,
    _p: PhantomData<fn() -> E>,
}

/// An ordering token: memory operations that take one happen after the operations that produced it.
#[derive(Clone, Copy, Debug)]
pub struct Token {
    pub(crate) v: ValueId,
}

impl<E, S> Clone for Tile<E, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E, S> Copy for Tile<E, S> {}
impl<E, S> std::fmt::Debug for Tile<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tile(%{})", self.v.0)
    }
}
impl<E> Clone for Scalar<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for Scalar<E> {}
impl<E> std::fmt::Debug for Scalar<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scalar(%{})", self.v.0)
    }
}

/// `tile<dims x elem>`.
pub(crate) fn tile_type(elem: ScalarType, dims: &[i32]) -> Type {
    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    Type::tile(elem, &shape)
}

/// Check that `dims` is a legal tile shape; records an error at the caller otherwise.
#[track_caller]
pub(crate) fn check_tile_dims(dims: &[i32], what: &str) -> bool {
    let _at = crate::trace::at(::std::panic::Location::caller());
    for (i, &d) in dims.iter().enumerate() {
        if d <= 0 || (d & (d - 1)) != 0 {
            trace::fail(format!(
                "{what}: tile shape {} has extent {d} on axis {i}; tile extents must be positive powers of two",
                fmt_dims(dims)
            ));
            return false;
        }
    }
    let n = numel(dims);
    if n > MAX_TILE_ELEMENTS {
        trace::fail(format!(
            "{what}: tile shape {} holds {n} elements, more than the {MAX_TILE_ELEMENTS} tileiras allows",
            fmt_dims(dims)
        ));
        return false;
    }
    true
}

impl<E: ElementType, S: Shape> Tile<E, S> {
    /// The IR type of this tile.
    pub fn ir_type() -> Type {
        tile_type(E::SCALAR, S::DIMS)
    }
    pub(crate) fn from_value(v: ValueId) -> Self {
        Tile { v, _p: PhantomData }
    }
    /// The extents of `S`.
    pub fn dims() -> &'static [i32] {
        S::DIMS
    }
}

impl<E: ElementType> Scalar<E> {
    pub fn ir_type() -> Type {
        Type::scalar_tile(E::SCALAR)
    }
    pub(crate) fn from_value(v: ValueId) -> Self {
        Scalar { v, _p: PhantomData }
    }
    /// View this scalar as a rank-0 tile (no IR is emitted).
    pub fn as_tile(self) -> Tile<E, S0> {
        Tile::from_value(self.v)
    }
}

impl<E: ElementType> Tile<E, S0> {
    /// View a rank-0 tile as a scalar (no IR is emitted).
    pub fn to_scalar(self) -> Scalar<E> {
        Scalar::from_value(self.v)
    }
}

/// Values that can be carried through device loops and yielded from device `if`s: tiles, scalars,
/// tokens, and tuples and arrays of them. The `#[cutile::module]` macro threads every variable a loop or
/// branch body assigns through this trait.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be changed inside device control flow",
    label = "assigned inside a device `for`, `while` or `if`",
    note = "only tiles, scalars, tokens and tuples/arrays of them can be loop-carried or produced by a device `if`; \
            host values (integers, floats, bools) are fixed while the kernel is traced — compute them before the loop"
)]
pub trait Carry: Sized {
    /// Append the IR values of `self`, in order.
    fn flatten(&self, out: &mut Vec<ValueId>);
    /// Append the IR types of `Self`, in the order of [`flatten`](Self::flatten).
    fn types(out: &mut Vec<Type>);
    /// Rebuild from values produced in [`flatten`](Self::flatten) order.
    fn rebuild(vals: &mut dyn Iterator<Item = ValueId>) -> Self;
}

fn next(vals: &mut dyn Iterator<Item = ValueId>) -> ValueId {
    vals.next().unwrap_or(ValueId(u32::MAX))
}

impl<E: ElementType, S: Shape> Carry for Tile<E, S> {
    fn flatten(&self, out: &mut Vec<ValueId>) {
        out.push(self.v);
    }
    fn types(out: &mut Vec<Type>) {
        out.push(Self::ir_type());
    }
    fn rebuild(vals: &mut dyn Iterator<Item = ValueId>) -> Self {
        Tile::from_value(next(vals))
    }
}
impl<E: ElementType> Carry for Scalar<E> {
    fn flatten(&self, out: &mut Vec<ValueId>) {
        out.push(self.v);
    }
    fn types(out: &mut Vec<Type>) {
        out.push(Self::ir_type());
    }
    fn rebuild(vals: &mut dyn Iterator<Item = ValueId>) -> Self {
        Scalar::from_value(next(vals))
    }
}
impl Carry for Token {
    fn flatten(&self, out: &mut Vec<ValueId>) {
        out.push(self.v);
    }
    fn types(out: &mut Vec<Type>) {
        out.push(Type::Token);
    }
    fn rebuild(vals: &mut dyn Iterator<Item = ValueId>) -> Self {
        Token { v: next(vals) }
    }
}
impl<T: Carry, const N: usize> Carry for [T; N] {
    fn flatten(&self, out: &mut Vec<ValueId>) {
        for x in self {
            x.flatten(out);
        }
    }
    fn types(out: &mut Vec<Type>) {
        for _ in 0..N {
            T::types(out);
        }
    }
    fn rebuild(vals: &mut dyn Iterator<Item = ValueId>) -> Self {
        std::array::from_fn(|_| T::rebuild(vals))
    }
}

macro_rules! carry_tuple {
    ($($n:ident),*) => {
        impl<$($n: Carry),*> Carry for ($($n,)*) {
            #[allow(non_snake_case, unused_variables)]
            fn flatten(&self, out: &mut Vec<ValueId>) {
                let ($($n,)*) = self;
                $($n.flatten(out);)*
            }
            #[allow(unused_variables)]
            fn types(out: &mut Vec<Type>) {
                $($n::types(out);)*
            }
            #[allow(unused_variables, clippy::unused_unit)]
            fn rebuild(vals: &mut dyn Iterator<Item = ValueId>) -> Self {
                ($($n::rebuild(vals),)*)
            }
        }
    };
}
carry_tuple!();
carry_tuple!(A);
carry_tuple!(A, B);
carry_tuple!(A, B, C);
carry_tuple!(A, B, C, D);
carry_tuple!(A, B, C, D, F);
carry_tuple!(A, B, C, D, F, G);
carry_tuple!(A, B, C, D, F, G, H);
carry_tuple!(A, B, C, D, F, G, H, I);
carry_tuple!(A, B, C, D, F, G, H, I, J);
carry_tuple!(A, B, C, D, F, G, H, I, J, K);
carry_tuple!(A, B, C, D, F, G, H, I, J, K, L);
carry_tuple!(A, B, C, D, F, G, H, I, J, K, L, M);

/// Flatten a carried value into a fresh vector.
pub(crate) fn flat<C: Carry>(c: &C) -> Vec<ValueId> {
    let mut v = vec![];
    c.flatten(&mut v);
    v
}
/// The IR types of a carried type.
pub(crate) fn flat_types<C: Carry>() -> Vec<Type> {
    let mut v = vec![];
    C::types(&mut v);
    v
}
