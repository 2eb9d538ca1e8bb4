//! Shape and type rearrangements (`reshape`, `broadcast`, `permute`, `transpose`, `cat`, `extract`,
//! `cast`), reductions and scans (built-in and generic with a closure), and `mma`.

use cutile_ir::{Attribute, OpAttr, Opcode, RoundingMode, ScalarType, Signedness, Type, ValueId};

use super::elem::{ElementType, HostConst, HostNum, MmaOperand, Numeric, scalar_bytes};
use super::shape::{MmaShapes, ReduceAxis, SameRank, Shape, Transpose, fmt_dims, numel};
use super::tensor::TileIndex;
use super::value::{Scalar, Tile, check_tile_dims, tile_type};
use crate::trace::{self, Op};

fn push1(op: Op) -> ValueId {
    trace::with(|t| t.push1(op))
}

impl<E: ElementType, S: Shape> Tile<E, S> {
    /// The same elements in shape `T` (row-major order); the element counts must agree.
    #[track_caller]
    pub fn reshape<T: Shape>(self) -> Tile<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(T::DIMS, "reshape");
        if numel(S::DIMS) != numel(T::DIMS) {
            trace::fail(format!(
                "cannot reshape a tile of shape {} ({} elements) into shape {} ({} elements)",
                fmt_dims(S::DIMS),
                numel(S::DIMS),
                fmt_dims(T::DIMS),
                numel(T::DIMS)
            ));
            return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
        }
        if S::DIMS == T::DIMS {
            return Tile::from_value(self.v);
        }
        Tile::from_value(push1(
            Op::new(Opcode::Reshape)
                .operand("source", self.v)
                .result(Tile::<E, T>::ir_type()),
        ))
    }

    /// Repeat unit dimensions to reach shape `T` (same rank; every extent of `S` is 1 or equals `T`'s).
    #[track_caller]
    pub fn broadcast<T: Shape>(self) -> Tile<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(T::DIMS, "broadcast");
        for (i, (&a, &b)) in S::DIMS.iter().zip(T::DIMS).enumerate() {
            if a != 1 && a != b {
                trace::fail(format!(
                    "cannot broadcast shape {} to {}: axis {i} has extent {a}, which is neither 1 nor {b}",
                    fmt_dims(S::DIMS),
                    fmt_dims(T::DIMS)
                ));
                return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
            }
        }
        if S::DIMS == T::DIMS {
            return Tile::from_value(self.v);
        }
        Tile::from_value(push1(
            Op::new(Opcode::Broadcast)
                .operand("source", self.v)
                .result(Tile::<E, T>::ir_type()),
        ))
    }

    /// Reorder axes: axis `i` of the result is axis `perm[i]` of `self`; `T` must be the permuted shape.
    #[track_caller]
    pub fn permute<T: Shape>(self, perm: &[usize]) -> Tile<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let rank = S::RANK;
        let mut seen = vec![false; rank];
        let valid = perm.len() == rank
            && perm
                .iter()
                .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
        if !valid {
            trace::fail(format!("{perm:?} is not a permutation of the {rank} axes"));
            return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
        }
        let expect: Vec<i32> = perm.iter().map(|&p| S::DIMS[p]).collect();
        if expect != T::DIMS {
            trace::fail(format!(
                "permuting shape {} by {perm:?} gives {}, not the requested {}",
                fmt_dims(S::DIMS),
                fmt_dims(&expect),
                fmt_dims(T::DIMS)
            ));
            return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
        }
        let p: Vec<i32> = perm.iter().map(|&x| x as i32).collect();
        Tile::from_value(push1(
            Op::new(Opcode::Permute)
                .attr("permutation", OpAttr::I32Array(p))
                .operand("source", self.v)
                .result(Tile::<E, T>::ir_type()),
        ))
    }

    /// Swap the two axes of a rank-2 tile.
    #[track_caller]
    pub fn transpose(self) -> Tile<E, S::Out>
    where
        S: Transpose,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Tile::from_value(push1(
            Op::new(Opcode::Permute)
                .attr("permutation", OpAttr::I32Array(vec![1, 0]))
                .operand("source", self.v)
                .result(Tile::<E, S::Out>::ir_type()),
        ))
    }

    /// The sub-tile of shape `T` at tile index `idx` (in units of `T`), with constant indices.
    #[track_caller]
    pub fn extract<T: Shape>(self, idx: &[i32]) -> Tile<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(T::DIMS, "extract");
        let ok = idx.len() == S::RANK
            && S::DIMS
                .iter()
                .zip(T::DIMS)
                .zip(idx)
                .all(|((&s, &t), &i)| s % t == 0 && i >= 0 && i < s / t);
        if !ok {
            trace::fail(format!(
                "cannot extract tile {idx:?} of shape {} from a tile of shape {}",
                fmt_dims(T::DIMS),
                fmt_dims(S::DIMS)
            ));
            return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
        }
        let iv: Vec<ValueId> = idx
            .iter()
            .map(|&i| super::tensor::IntoIndex::index_value(i))
            .collect();
        self.extract_op(&iv)
    }

    /// The sub-tile of shape `T` at tile index `idx` (in units of `T`), with indices known only at run
    /// time (a loop counter, a loaded value), mixed with constants: `t.extract_at::<S2<64, 1>>((0, j))`.
    /// One index per dimension (a rank mismatch does not compile); an index outside the tile is
    /// undefined behavior (nothing checks it on the device). tileiras may place the tile in per-thread
    /// local memory to index it, where [`Tile::extract`]'s constant indices select registers.
    #[track_caller]
    pub fn extract_at<T: Shape>(self, idx: impl TileIndex<S::Rank>) -> Tile<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(T::DIMS, "extract_at");
        if !S::DIMS.iter().zip(T::DIMS).all(|(&s, &t)| s % t == 0) {
            trace::fail(format!(
                "cannot extract tiles of shape {} from a tile of shape {}: the extents do not divide",
                fmt_dims(T::DIMS),
                fmt_dims(S::DIMS),
            ));
            return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
        }
        self.extract_op(&idx.index_values())
    }

    /// The `extract` op of [`Tile::extract`] and [`Tile::extract_at`], once the indices are checked.
    fn extract_op<T: Shape>(self, iv: &[ValueId]) -> Tile<E, T> {
        Tile::from_value(push1(
            Op::new(Opcode::Extract)
                .operand("source", self.v)
                .operands("indices", iv)
                .result(Tile::<E, T>::ir_type()),
        ))
    }

    /// Convert every element to `F` (float↔float rounds to nearest even, float→int truncates toward zero,
    /// int→int sign-extends or truncates).
    #[track_caller]
    pub fn cast<F: ElementType>(self) -> Tile<F, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Tile::from_value(convert(self.v, E::SCALAR, F::SCALAR, S::DIMS))
    }
}

impl<E: ElementType> Scalar<E> {
    /// Convert to element type `F`.
    #[track_caller]
    pub fn cast<F: ElementType>(self) -> Scalar<F> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Scalar::from_value(convert(self.v, E::SCALAR, F::SCALAR, &[]))
    }
    /// Broadcast to a tile of shape `S`.
    #[track_caller]
    pub fn splat<S: Shape>(self) -> Tile<E, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(S::DIMS, "splat");
        Tile::from_value(super::arith::splat_value(E::SCALAR, self.v, S::DIMS))
    }
}

/// Emit the conversion `from` → `to` of a value of shape `dims`.
#[track_caller]
pub(crate) fn convert(v: ValueId, from: ScalarType, to: ScalarType, dims: &[i32]) -> ValueId {
    let _at = crate::trace::at(::std::panic::Location::caller());
    use ScalarType as T;
    if from == to {
        return v;
    }
    let ty = tile_type(to, dims);
    let en = |x: cutile_ir::EnumValue| OpAttr::Enum(x);
    let half = |t: ScalarType| matches!(t, T::F16 | T::BF16);
    if half(from) && half(to) {
        // f16 <-> bf16 goes through f32.
        let mid = convert(v, from, T::F32, dims);
        return convert(mid, T::F32, to, dims);
    }
    let op = match (from.is_float(), to.is_float()) {
        (true, true) => {
            Op::new(Opcode::FToF).attr("rounding_mode", en(RoundingMode::NearestEven.into()))
        }
        (true, false) if to == T::I1 => {
            let zero = super::arith::splat_const(from, &tile_type(from, dims), HostNum::Float(0.0));
            return super::arith::compare(
                cutile_ir::ComparisonPredicate::NotEqual,
                from,
                ty,
                v,
                zero,
            );
        }
        (true, false) => Op::new(Opcode::FToI)
            .attr("signedness", en(Signedness::Signed.into()))
            .attr("rounding_mode", en(RoundingMode::NearestIntToZero.into())),
        (false, true) => {
            let s = if from == T::I1 {
                Signedness::Unsigned
            } else {
                Signedness::Signed
            };
            Op::new(Opcode::IToF)
                .attr("signedness", en(s.into()))
                .attr("rounding_mode", en(RoundingMode::NearestEven.into()))
        }
        (false, false) if to == T::I1 => {
            // Truncation would keep the low bit; Rust-like `x != 0` is what users mean.
            let zero = super::arith::splat_const(from, &tile_type(from, dims), HostNum::Int(0));
            return super::arith::compare(
                cutile_ir::ComparisonPredicate::NotEqual,
                from,
                ty,
                v,
                zero,
            );
        }
        (false, false) if from.bit_width() < to.bit_width() => {
            let s = if from == T::I1 {
                Signedness::Unsigned
            } else {
                Signedness::Signed
            };
            Op::new(Opcode::ExtI).attr("signedness", en(s.into()))
        }
        (false, false) => {
            Op::new(Opcode::TruncI).attr("overflow", en(cutile_ir::IntegerOverflow::None.into()))
        }
    };
    push1(op.operand("from_", v).result(ty))
}

/// Concatenate `a` and `b` along axis `AX` into shape `T` (checked while tracing).
#[track_caller]
pub fn cat<const AX: usize, E: ElementType, S, U: Shape, T: Shape>(
    a: Tile<E, S>,
    b: Tile<E, U>,
) -> Tile<E, T>
where
    S: SameRank<U> + SameRank<T>,
{
    let _at = crate::trace::at(::std::panic::Location::caller());
    check_tile_dims(T::DIMS, "cat");
    let ok = AX < S::RANK
        && (0..S::RANK).all(|i| {
            if i == AX {
                S::DIMS[i] + U::DIMS[i] == T::DIMS[i]
            } else {
                S::DIMS[i] == U::DIMS[i] && S::DIMS[i] == T::DIMS[i]
            }
        });
    if !ok {
        trace::fail(format!(
            "cannot concatenate shapes {} and {} along axis {AX} into {}",
            fmt_dims(S::DIMS),
            fmt_dims(U::DIMS),
            fmt_dims(T::DIMS)
        ));
        return Tile::from_value(super::arith::poison(Tile::<E, T>::ir_type()));
    }
    Tile::from_value(push1(
        Op::new(Opcode::Cat)
            .attr("dim", OpAttr::Int(AX as u64))
            .operand("lhs", a.v)
            .operand("rhs", b.v)
            .result(Tile::<E, T>::ir_type()),
    ))
}

// ---------------------------------------------------------------------------------------------------------
// Reductions and scans.

fn identity_attr(e: ScalarType, v: HostNum) -> Result<Attribute, String> {
    let bytes = scalar_bytes(e, v)?;
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(&bytes);
    let raw = u64::from_le_bytes(buf);
    Ok(if e.is_float() {
        Attribute::Float {
            ty: Type::Scalar(e),
            bits: raw,
        }
    } else {
        Attribute::Integer {
            ty: Type::Scalar(e),
            value: raw,
        }
    })
}

/// Emit a `reduce` (or `scan`) over axis `axis` with a combiner traced from `f`.
#[track_caller]
fn reduce_region<E: ElementType>(
    opcode: Opcode,
    v: ValueId,
    axis: usize,
    identity: HostNum,
    result_ty: Type,
    reverse: bool,
    f: impl FnOnce(Scalar<E>, Scalar<E>) -> Scalar<E>,
) -> ValueId {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let ident = match identity_attr(E::SCALAR, identity) {
        Ok(a) => a,
        Err(m) => {
            trace::fail(format!("reduction identity: {m}"));
            return super::arith::poison(result_ty);
        }
    };
    let sty = Type::scalar_tile(E::SCALAR);
    let args = trace::with(|t| t.open_block(&[sty.clone(), sty.clone()]));
    let r = f(Scalar::from_value(args[0]), Scalar::from_value(args[1]));
    trace::with(|t| {
        t.push(Op::new(Opcode::Yield).operands("operands", &[r.v]));
        let body = t.close_block();
        let mut op = Op::new(opcode)
            .attr("dim", OpAttr::Int(axis as u64))
            .attr("identities", OpAttr::TaggedArray(vec![ident]))
            .operands("operands", &[v])
            .result(result_ty)
            .region(body);
        if opcode == Opcode::Scan {
            op = op.attr("reverse", OpAttr::Bool(reverse));
        }
        t.push1(op)
    })
}

#[derive(Clone, Copy)]
enum Builtin {
    Sum,
    Prod,
    Max,
    Min,
}

fn builtin_identity(k: Builtin, e: ScalarType) -> HostNum {
    match (k, e.is_float()) {
        (Builtin::Sum, _) => HostNum::Int(0),
        (Builtin::Prod, _) => HostNum::Int(1),
        (Builtin::Max, true) => HostNum::Float(f64::NEG_INFINITY),
        (Builtin::Min, true) => HostNum::Float(f64::INFINITY),
        (Builtin::Max, false) => HostNum::Int(match e.bit_width() {
            8 => i8::MIN as i64,
            16 => i16::MIN as i64,
            32 => i32::MIN as i64,
            _ => i64::MIN,
        }),
        (Builtin::Min, false) => HostNum::Int(match e.bit_width() {
            8 => i8::MAX as i64,
            16 => i16::MAX as i64,
            32 => i32::MAX as i64,
            _ => i64::MAX,
        }),
    }
}

fn builtin_combine<E: Numeric>(k: Builtin) -> impl FnOnce(Scalar<E>, Scalar<E>) -> Scalar<E> {
    move |a, b| match k {
        Builtin::Sum => a + b,
        Builtin::Prod => a * b,
        Builtin::Max => a.max(b),
        Builtin::Min => a.min(b),
    }
}

macro_rules! reductions {
    ($($(#[$d:meta])* $name:ident, $drop:ident, $scan:ident => $k:expr;)*) => {
        impl<E: Numeric, S: Shape> Tile<E, S> {$(
            $(#[$d])*
            /// The result keeps the reduced axis with extent 1, so it broadcasts back against `self`.
            #[track_caller]
            pub fn $name<const AX: usize>(self) -> Tile<E, <S as ReduceAxis<AX>>::Keep>
            where
                S: ReduceAxis<AX>,
            {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let d = self.$drop::<AX>();
                Tile::from_value(push1(
                    Op::new(Opcode::Reshape)
                        .operand("source", d.v)
                        .result(Tile::<E, <S as ReduceAxis<AX>>::Keep>::ir_type()),
                ))
            }
            $(#[$d])*
            /// The reduced axis is removed from the result.
            #[track_caller]
            pub fn $drop<const AX: usize>(self) -> Tile<E, <S as ReduceAxis<AX>>::Drop>
            where
                S: ReduceAxis<AX>,
            {
                let _at = crate::trace::at(::std::panic::Location::caller());
                let ty = Tile::<E, <S as ReduceAxis<AX>>::Drop>::ir_type();
                Tile::from_value(reduce_region::<E>(
                    Opcode::Reduce, self.v, AX, builtin_identity($k, E::SCALAR), ty, false, builtin_combine::<E>($k),
                ))
            }
            $(#[$d])*
            /// Inclusive scan along `AX` (same shape as `self`).
            #[track_caller]
            pub fn $scan<const AX: usize>(self) -> Tile<E, S>
            where
                S: ReduceAxis<AX>,
            {
                let _at = crate::trace::at(::std::panic::Location::caller());
                Tile::from_value(reduce_region::<E>(
                    Opcode::Scan, self.v, AX, builtin_identity($k, E::SCALAR), Self::ir_type(), false,
                    builtin_combine::<E>($k),
                ))
            }
        )*}
    };
}
reductions! {
    /// Sum along axis `AX`.
    sum, sum_squeezed, cumsum => Builtin::Sum;
    /// Product along axis `AX`.
    prod, prod_squeezed, cumprod => Builtin::Prod;
    /// Maximum along axis `AX`.
    amax, amax_squeezed, cummax => Builtin::Max;
    /// Minimum along axis `AX`.
    amin, amin_squeezed, cummin => Builtin::Min;
}

impl<E: ElementType, S: Shape> Tile<E, S> {
    /// Reduce axis `AX` with `combine`, an associative and commutative function with identity `identity`.
    /// The axis is removed from the result.
    #[track_caller]
    pub fn reduce<const AX: usize>(
        self,
        identity: impl HostConst,
        combine: impl FnOnce(Scalar<E>, Scalar<E>) -> Scalar<E>,
    ) -> Tile<E, <S as ReduceAxis<AX>>::Drop>
    where
        S: ReduceAxis<AX>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let ty = Tile::<E, <S as ReduceAxis<AX>>::Drop>::ir_type();
        Tile::from_value(reduce_region::<E>(
            Opcode::Reduce,
            self.v,
            AX,
            identity.host_num(),
            ty,
            false,
            combine,
        ))
    }

    /// Inclusive scan along axis `AX` with `combine` (associative, identity `identity`); `reverse` scans
    /// from the end.
    #[track_caller]
    pub fn scan<const AX: usize>(
        self,
        identity: impl HostConst,
        reverse: bool,
        combine: impl FnOnce(Scalar<E>, Scalar<E>) -> Scalar<E>,
    ) -> Tile<E, S>
    where
        S: ReduceAxis<AX>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        Tile::from_value(reduce_region::<E>(
            Opcode::Scan,
            self.v,
            AX,
            identity.host_num(),
            Self::ir_type(),
            reverse,
            combine,
        ))
    }
}

// ---------------------------------------------------------------------------------------------------------
// Matrix multiply-accumulate.

/// `a @ b + acc`: `(M, K) x (K, N) + (M, N)`, or batched with a leading dimension. Shapes are unified by
/// rustc; element types must be an [`MmaOperand`] pair (e.g. bf16 inputs, f32 accumulator).
#[track_caller]
pub fn mma<A, C, SA, SB>(a: Tile<A, SA>, b: Tile<A, SB>, acc: Tile<C, SA::Out>) -> Tile<C, SA::Out>
where
    A: MmaOperand<C>,
    C: ElementType,
    SA: MmaShapes<SB>,
    SB: Shape,
{
    let _at = crate::trace::at(::std::panic::Location::caller());
    let ty = Tile::<C, SA::Out>::ir_type();
    let op = if A::SCALAR.is_float() {
        Op::new(Opcode::MmaF)
    } else {
        Op::new(Opcode::MmaI)
            .attr("signedness_lhs", OpAttr::Enum(Signedness::Signed.into()))
            .attr("signedness_rhs", OpAttr::Enum(Signedness::Signed.into()))
    };
    Tile::from_value(push1(
        op.operand("lhs", a.v)
            .operand("rhs", b.v)
            .operand("acc", acc.v)
            .result(ty),
    ))
}

/// [`mma`] of fp8 inputs with fast accumulation (Tile IR `fast_acc`, 13.3+): on Hopper the tensor cores keep
/// the running sum in their own reduced-precision accumulator instead of promoting it to f32 every few K
/// steps, which is faster and loses low bits over long K (`torch._scaled_mm`'s `use_fast_accum`).
#[track_caller]
pub fn mma_fast_acc<A, SA, SB>(
    a: Tile<A, SA>,
    b: Tile<A, SB>,
    acc: Tile<f32, SA::Out>,
) -> Tile<f32, SA::Out>
where
    A: super::elem::Fp8,
    SA: MmaShapes<SB>,
    SB: Shape,
{
    let _at = crate::trace::at(::std::panic::Location::caller());
    let ty = Tile::<f32, SA::Out>::ir_type();
    Tile::from_value(push1(
        Op::new(Opcode::MmaF)
            .attr("fast_acc", OpAttr::Unit)
            .operand("lhs", a.v)
            .operand("rhs", b.v)
            .operand("acc", acc.v)
            .result(ty),
    ))
}
