//! Type-level shapes: `S0`, `S1<A>`, …, `S4<A, B, C, D>` built from `i32` const generics, so a tile's rank
//! and static extents are part of its Rust type and rustc rejects rank and shape mismatches at `cargo build`.
//!
//! Arithmetic on the extents (reshape element counts, broadcast compatibility, powers of two) cannot be done
//! in types on stable Rust; those checks run while the kernel is traced and name both values.
//! Rank-changing rearrangements that need no arithmetic (reducing an axis, transposing) are traits with
//! an associated output shape.

/// A dynamic extent of a tensor (known only at launch): `Tensor<f32, S2<DYN, DYN>>`.
pub const DYN: i32 = -1;

/// Rank markers, so index tuples can be checked against a shape's rank.
pub mod rank {
    /// Rank 0.
    #[derive(Clone, Copy, Debug)]
    pub struct R0;
    /// Rank 1.
    #[derive(Clone, Copy, Debug)]
    pub struct R1;
    /// Rank 2.
    #[derive(Clone, Copy, Debug)]
    pub struct R2;
    /// Rank 3.
    #[derive(Clone, Copy, Debug)]
    pub struct R3;
    /// Rank 4.
    #[derive(Clone, Copy, Debug)]
    pub struct R4;
}
use rank::*;

/// A type-level shape. `DIMS` lists the extents (`DYN` for dynamic ones, which only tensors may have).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shape",
    note = "shapes are S0, S1<A>, S2<A, B>, S3<A, B, C> and S4<A, B, C, D>"
)]
pub trait Shape: Copy + Default + Send + Sync + 'static {
    /// The rank marker (`R2` for `S2<_, _>`).
    type Rank;
    /// The extents.
    const DIMS: &'static [i32];
    /// Number of dimensions.
    const RANK: usize = Self::DIMS.len();
}

/// Rank 0 (a scalar).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct S0;
/// Rank 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct S1<const A: i32>;
/// Rank 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct S2<const A: i32, const B: i32>;
/// Rank 3.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct S3<const A: i32, const B: i32, const C: i32>;
/// Rank 4.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct S4<const A: i32, const B: i32, const C: i32, const D: i32>;

impl Shape for S0 {
    type Rank = R0;
    const DIMS: &'static [i32] = &[];
}
impl<const A: i32> Shape for S1<A> {
    type Rank = R1;
    const DIMS: &'static [i32] = &[A];
}
impl<const A: i32, const B: i32> Shape for S2<A, B> {
    type Rank = R2;
    const DIMS: &'static [i32] = &[A, B];
}
impl<const A: i32, const B: i32, const C: i32> Shape for S3<A, B, C> {
    type Rank = R3;
    const DIMS: &'static [i32] = &[A, B, C];
}
impl<const A: i32, const B: i32, const C: i32, const D: i32> Shape for S4<A, B, C, D> {
    type Rank = R4;
    const DIMS: &'static [i32] = &[A, B, C, D];
}

/// Shapes of the same rank as `Self`'s (the target of `broadcast`, `permute` and the views of a tensor).
#[diagnostic::on_unimplemented(
    message = "`{T}` does not have the rank of `{Self}`",
    label = "rank mismatch",
    note = "broadcast and permute keep the rank: reshape first to add or drop unit dimensions"
)]
pub trait SameRank<T: Shape>: Shape {}
impl<A: Shape<Rank = R>, B: Shape<Rank = R>, R> SameRank<B> for A {}

/// Reducing axis `AX`: `Keep` sets the axis to 1, `Drop` removes it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no axis {AX}",
    label = "axis out of range for this tile's rank"
)]
pub trait ReduceAxis<const AX: usize>: Shape {
    /// The shape with extent 1 at `AX` (keeps the rank, so the result broadcasts back).
    type Keep: Shape;
    /// The shape without axis `AX`.
    type Drop: Shape;
}

impl<const A: i32> ReduceAxis<0> for S1<A> {
    type Keep = S1<1>;
    type Drop = S0;
}
impl<const A: i32, const B: i32> ReduceAxis<0> for S2<A, B> {
    type Keep = S2<1, B>;
    type Drop = S1<B>;
}
impl<const A: i32, const B: i32> ReduceAxis<1> for S2<A, B> {
    type Keep = S2<A, 1>;
    type Drop = S1<A>;
}
impl<const A: i32, const B: i32, const C: i32> ReduceAxis<0> for S3<A, B, C> {
    type Keep = S3<1, B, C>;
    type Drop = S2<B, C>;
}
impl<const A: i32, const B: i32, const C: i32> ReduceAxis<1> for S3<A, B, C> {
    type Keep = S3<A, 1, C>;
    type Drop = S2<A, C>;
}
impl<const A: i32, const B: i32, const C: i32> ReduceAxis<2> for S3<A, B, C> {
    type Keep = S3<A, B, 1>;
    type Drop = S2<A, B>;
}
impl<const A: i32, const B: i32, const C: i32, const D: i32> ReduceAxis<0> for S4<A, B, C, D> {
    type Keep = S4<1, B, C, D>;
    type Drop = S3<B, C, D>;
}
impl<const A: i32, const B: i32, const C: i32, const D: i32> ReduceAxis<1> for S4<A, B, C, D> {
    type Keep = S4<A, 1, C, D>;
    type Drop = S3<A, C, D>;
}
impl<const A: i32, const B: i32, const C: i32, const D: i32> ReduceAxis<2> for S4<A, B, C, D> {
    type Keep = S4<A, B, 1, D>;
    type Drop = S3<A, B, D>;
}
impl<const A: i32, const B: i32, const C: i32, const D: i32> ReduceAxis<3> for S4<A, B, C, D> {
    type Keep = S4<A, B, C, 1>;
    type Drop = S3<A, B, C>;
}

/// Rank-2 transpose.
pub trait Transpose: Shape {
    type Out: Shape;
}
impl<const A: i32, const B: i32> Transpose for S2<A, B> {
    type Out = S2<B, A>;
}

/// Shapes of the `mma` operands: `(M, K) x (K, N) -> (M, N)`, optionally with a leading batch dimension.
/// The common extents are unified by rustc, so a mismatched K or N is a type error.
pub trait MmaShapes<Rhs: Shape>: Shape {
    type Out: Shape;
}
impl<const M: i32, const K: i32, const N: i32> MmaShapes<S2<K, N>> for S2<M, K> {
    type Out = S2<M, N>;
}
impl<const B: i32, const M: i32, const K: i32, const N: i32> MmaShapes<S3<B, K, N>>
    for S3<B, M, K>
{
    type Out = S3<B, M, N>;
}

/// Element count of a static shape (as i64, so large products do not overflow).
pub(crate) fn numel(dims: &[i32]) -> i64 {
    dims.iter().map(|&d| d as i64).product()
}

/// `dims` formatted like a tuple, for messages: `(1, 128)`.
pub(crate) fn fmt_dims(dims: &[i32]) -> String {
    let inner: Vec<String> = dims
        .iter()
        .map(|d| {
            if *d == DYN {
                "DYN".into()
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("({})", inner.join(", "))
}
