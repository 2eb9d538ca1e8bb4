//! Pointer-based memory access and hints: gathers and scatters at computed element indices with masks,
//! atomics, and `assume` facts about device integers.
//!
//! Gathers/scatters address `base + Σ index_k · stride_k` per element, so any index pattern works. Every
//! access is masked by the array bounds (`0 <= index_k < extent_k`) and by the caller's mask; masked-off
//! gather elements read as the padding value. Writes through pointers are only possible on `&mut Tensor`
//! parameters; like [`Tensor::store_at`] a scatter is `unsafe` because the blocks' writes may overlap.
//! Atomics are safe: they are bounds-masked and cannot race.

use cutile_ir::{
    AtomicRmwMode, Attribute, ComparisonPredicate, MemoryOrdering, MemoryScope, OpAttr, Opcode,
    ScalarType, Type, ValueId,
};

use super::elem::{ElementType, HostConst, HostNum};
use super::shape::Shape;
use super::shape::rank::{R1, R2, R3, R4};
use super::tensor::{Hints, Tensor};
use super::value::{Scalar, Tile, Token, tile_type};
use crate::trace::{self, Op};

/// Element indices of a gather/scatter on a rank-`R` tensor: one `Tile<i32, T>` per axis.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not index a tensor of this rank",
    label = "give one index tile per tensor axis"
)]
pub trait GatherIndex<R, T: Shape> {
    #[doc(hidden)]
    fn per_axis(&self) -> Vec<ValueId>;
}
impl<T: Shape> GatherIndex<R1, T> for Tile<i32, T> {
    fn per_axis(&self) -> Vec<ValueId> {
        vec![self.v]
    }
}
impl<T: Shape> GatherIndex<R2, T> for (Tile<i32, T>, Tile<i32, T>) {
    fn per_axis(&self) -> Vec<ValueId> {
        vec![self.0.v, self.1.v]
    }
}
impl<T: Shape> GatherIndex<R3, T> for (Tile<i32, T>, Tile<i32, T>, Tile<i32, T>) {
    fn per_axis(&self) -> Vec<ValueId> {
        vec![self.0.v, self.1.v, self.2.v]
    }
}
impl<T: Shape> GatherIndex<R4, T> for (Tile<i32, T>, Tile<i32, T>, Tile<i32, T>, Tile<i32, T>) {
    fn per_axis(&self) -> Vec<ValueId> {
        vec![self.0.v, self.1.v, self.2.v, self.3.v]
    }
}

impl<E: ElementType, S: Shape> Tensor<E, S> {
    /// Pointers to the elements at `idx` (one index tile per axis, all of shape `T`), and the mask of
    /// indices inside the array (`0 <= i_k < extent_k` on every axis) and-ed with `user_mask`.
    fn pointers<T: Shape>(
        &self,
        idx: &[ValueId],
        user_mask: Option<ValueId>,
    ) -> (ValueId, ValueId) {
        let (ptrs, mask) = self.pointers_checked::<T>(idx, user_mask, true);
        let mask = mask.unwrap_or_else(|| {
            let bool_ty = tile_type(ScalarType::I1, T::DIMS);
            super::arith::splat_const(ScalarType::I1, &bool_ty, HostNum::Bool(true))
        });
        (ptrs, mask)
    }

    /// Pointers to the elements at `idx`, and the and of `user_mask` with (when `bounds`) the array-bounds
    /// mask; `None` when there is nothing to mask.
    fn pointers_checked<T: Shape>(
        &self,
        idx: &[ValueId],
        user_mask: Option<ValueId>,
        bounds: bool,
    ) -> (ValueId, Option<ValueId>) {
        use super::arith::{Bin, binary, compare, splat_const, splat_value};
        let ity = trace::with(|t| t.index_ty);
        let dims = T::DIMS;
        let off_ty = tile_type(ity, dims);
        let bool_ty = tile_type(ScalarType::I1, dims);
        let mut offset: Option<ValueId> = None;
        let mut mask = user_mask;
        let and = |m: ValueId, mask: &mut Option<ValueId>| {
            *mask = Some(match *mask {
                None => m,
                Some(acc) => binary(Bin::And, ScalarType::I1, bool_ty.clone(), acc, m),
            });
        };
        for (k, &i) in idx.iter().enumerate() {
            let wide = super::tileops::convert(i, ScalarType::I32, ity, dims);
            if bounds && let Some(&extent) = self.dims.get(k) {
                let zero = splat_const(ity, &off_ty, HostNum::Int(0));
                let lo = compare(
                    ComparisonPredicate::GreaterThanOrEqual,
                    ity,
                    bool_ty.clone(),
                    wide,
                    zero,
                );
                and(lo, &mut mask);
                let e = splat_value(ity, extent, dims);
                let hi = compare(ComparisonPredicate::LessThan, ity, bool_ty.clone(), wide, e);
                and(hi, &mut mask);
            }
            let mut term = wide;
            if let Some(Some(stride)) = self.strides.get(k) {
                let s = splat_value(ity, *stride, dims);
                term = binary(Bin::Mul, ity, off_ty.clone(), term, s);
            }
            offset = Some(match offset {
                None => term,
                Some(acc) => binary(Bin::Add, ity, off_ty.clone(), acc, term),
            });
        }
        let offset = offset.unwrap_or_else(|| splat_const(ity, &off_ty, HostNum::Int(0)));
        let base = self.base;
        let ptr_ty = Type::pointer_tile(
            E::SCALAR,
            &dims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        );
        let ptrs = trace::with(|t| {
            let mut b = base;
            if !dims.is_empty() {
                let ones: Vec<i64> = vec![1; dims.len()];
                b = t.push1(
                    Op::new(Opcode::Reshape)
                        .operand("source", b)
                        .result(Type::pointer_tile(E::SCALAR, &ones)),
                );
                if dims.iter().any(|&d| d != 1) {
                    b = t.push1(
                        Op::new(Opcode::Broadcast)
                            .operand("source", b)
                            .result(ptr_ty.clone()),
                    );
                }
            }
            t.push1(
                Op::new(Opcode::Offset)
                    .operand("ptr", b)
                    .operand("offset", offset)
                    .result(ptr_ty),
            )
        });
        (ptrs, mask)
    }

    /// Load the elements at `idx` where `mask` is true (`padding` elsewhere).
    #[track_caller]
    pub fn gather<T: Shape>(
        &self,
        idx: impl GatherIndex<S::Rank, T>,
        mask: Option<Tile<bool, T>>,
        padding: impl HostConst,
    ) -> Tile<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.gather_impl(
            &idx.per_axis(),
            mask.map(|m| m.v),
            Some(padding.host_num()),
            true,
            Hints::default(),
        )
    }

    /// [`gather`](Self::gather) with hints for the load (`latency`; `allow_tma` is a specialization error
    /// because pointer loads never use the TMA). cuTile's `ct.gather(…, latency=L)`.
    #[track_caller]
    pub fn gather_with<T: Shape>(
        &self,
        idx: impl GatherIndex<S::Rank, T>,
        mask: Option<Tile<bool, T>>,
        padding: impl HostConst,
        hints: Hints,
    ) -> Tile<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.gather_impl(
            &idx.per_axis(),
            mask.map(|m| m.v),
            Some(padding.host_num()),
            true,
            hints,
        )
    }

    /// Load the elements at `idx` with no mask at all (no bounds check, no padding): cuTile's
    /// `ct.gather(…, check_bounds=False)`, a plain `load_ptr_tko` without mask operands.
    ///
    /// # Safety
    /// Every index must be inside the array (`0 <= idx_k < extent_k` on every axis); otherwise the load
    /// reads memory outside the argument.
    #[track_caller]
    pub unsafe fn gather_unchecked<T: Shape>(
        &self,
        idx: impl GatherIndex<S::Rank, T>,
        hints: Hints,
    ) -> Tile<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.gather_impl(&idx.per_axis(), None, None, false, hints)
    }

    fn gather_impl<T: Shape>(
        &self,
        idx: &[ValueId],
        mask: Option<ValueId>,
        padding: Option<HostNum>,
        bounds: bool,
        hints: Hints,
    ) -> Tile<E, T> {
        super::value::check_tile_dims(T::DIMS, "gather");
        let hints = pointer_hints(hints, "gather (load_ptr_tko)");
        let (ptrs, mask) = self.pointers_checked::<T>(idx, mask, bounds);
        let ty = Tile::<E, T>::ir_type();
        let pad = match (mask, padding) {
            (Some(_), Some(p)) => Some(super::arith::splat_const(E::SCALAR, &ty, p)),
            // A masked load needs a padding value: masked-off lanes read zero.
            (Some(_), None) => Some(super::arith::splat_const(E::SCALAR, &ty, HostNum::Int(0))),
            (None, _) => None,
        };
        let slot = self.out_slot;
        trace::with(|t| {
            let tok = slot
                .and_then(|s| t.out_tokens.get(s).copied())
                .unwrap_or(t.entry_token);
            let mut op = Op::new(Opcode::LoadPtrTko)
                .attr(
                    "memory_ordering_semantics",
                    OpAttr::Enum(MemoryOrdering::Weak.into()),
                )
                .operand("source", ptrs)
                .operand("token", tok)
                .result(ty)
                .result(Type::Token);
            if let Some(h) = hints {
                op = op.attr("optimization_hints", h);
            }
            if let (Some(m), Some(p)) = (mask, pad) {
                op = op.operand("mask", m).operand("paddingValue", p);
            }
            Tile::from_value(t.push(op)[0])
        })
    }

    /// Store `values` at the elements `idx` where `mask` is true.
    ///
    /// # Safety
    /// No two blocks may write the same element in one launch (the launcher cannot check computed indices).
    #[track_caller]
    pub unsafe fn scatter<T: Shape>(
        &mut self,
        idx: impl GatherIndex<S::Rank, T>,
        values: Tile<E, T>,
        mask: Option<Tile<bool, T>>,
    ) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.scatter_impl(
            &idx.per_axis(),
            values,
            mask.map(|m| m.v),
            true,
            Hints::default(),
        );
    }

    /// [`scatter`](Self::scatter) with hints for the store (`latency`; `allow_tma` is a specialization
    /// error). cuTile's `ct.scatter(…, latency=L)`.
    ///
    /// # Safety
    /// As [`scatter`](Self::scatter).
    #[track_caller]
    pub unsafe fn scatter_with<T: Shape>(
        &mut self,
        idx: impl GatherIndex<S::Rank, T>,
        values: Tile<E, T>,
        mask: Option<Tile<bool, T>>,
        hints: Hints,
    ) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.scatter_impl(&idx.per_axis(), values, mask.map(|m| m.v), true, hints);
    }

    /// Store `values` at the elements `idx` with no mask (cuTile's `ct.scatter(…, check_bounds=False)`).
    ///
    /// # Safety
    /// As [`scatter`](Self::scatter), and every index must be inside the array on every axis.
    #[track_caller]
    pub unsafe fn scatter_unchecked<T: Shape>(
        &mut self,
        idx: impl GatherIndex<S::Rank, T>,
        values: Tile<E, T>,
        hints: Hints,
    ) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.scatter_impl(&idx.per_axis(), values, None, false, hints);
    }

    fn scatter_impl<T: Shape>(
        &mut self,
        idx: &[ValueId],
        values: Tile<E, T>,
        mask: Option<ValueId>,
        bounds: bool,
        hints: Hints,
    ) {
        let hints = pointer_hints(hints, "scatter (store_ptr_tko)");
        let (ptrs, mask) = self.pointers_checked::<T>(idx, mask, bounds);
        let slot = self.out_slot;
        trace::with(|t| {
            let tok = slot
                .and_then(|s| t.out_tokens.get(s).copied())
                .unwrap_or(t.entry_token);
            let mut op = Op::new(Opcode::StorePtrTko)
                .attr(
                    "memory_ordering_semantics",
                    OpAttr::Enum(MemoryOrdering::Weak.into()),
                )
                .operand("destination", ptrs)
                .operand("value", values.v)
                .operand("token", tok)
                .result(Type::Token);
            if let Some(h) = hints {
                op = op.attr("optimization_hints", h);
            }
            if let Some(m) = mask {
                op = op.operand("mask", m);
            }
            let r = t.push1(op);
            if let Some(s) = slot
                && let Some(st) = t.out_tokens.get_mut(s)
            {
                *st = r;
            }
        })
    }

    /// Atomically apply `mode` with `values` to the elements at `idx` (where `mask` is true), relaxed at
    /// device scope; returns the previous values and the access's token.
    #[track_caller]
    pub fn atomic<T: Shape>(
        &mut self,
        mode: AtomicRmwMode,
        idx: impl GatherIndex<S::Rank, T>,
        values: Tile<E, T>,
        mask: Option<Tile<bool, T>>,
    ) -> (Tile<E, T>, Token) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.atomic_with(
            mode,
            idx,
            values,
            mask,
            AtomicOrder::Relaxed,
            AtomicScope::Device,
        )
    }

    /// [`atomic`](Self::atomic) with a memory ordering and scope, e.g. `AcqRel` at `Device` scope for
    /// a counter that tells the last of several blocks that the others' writes are visible.
    ///
    /// The ordering reaches the kernel's other tensors through the IR's tokens: a `Release` or
    /// `AcqRel` atomic takes the join of every output's pending access, and after an `Acquire` or
    /// `AcqRel` atomic every access of every output is ordered after it (so the last block's loads of
    /// a scratch output see the other blocks' stores). Loads of inputs (`&Tensor`) stay unordered:
    /// a launch never writes its inputs.
    #[track_caller]
    pub fn atomic_with<T: Shape>(
        &mut self,
        mode: AtomicRmwMode,
        idx: impl GatherIndex<S::Rank, T>,
        values: Tile<E, T>,
        mask: Option<Tile<bool, T>>,
        order: AtomicOrder,
        scope: AtomicScope,
    ) -> (Tile<E, T>, Token) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let (ptrs, mask) = self.pointers::<T>(&idx.per_axis(), mask.map(|m| m.v));
        let slot = self.out_slot;
        trace::with(|t| {
            // A release (or acq_rel) is ordered after every earlier access of the kernel, not only
            // those of its own tensor: the writes it publishes are usually to another output.
            let tok = if order.releases() {
                t.join_all_tokens()
            } else {
                slot.and_then(|s| t.out_tokens.get(s).copied())
                    .unwrap_or(t.entry_token)
            };
            let mut op = Op::new(Opcode::AtomicRMWTko)
                .attr(
                    "memory_ordering_semantics",
                    OpAttr::Enum(order.ordering().into()),
                )
                .attr("memory_scope", OpAttr::Enum(scope.scope().into()))
                .attr("mode", OpAttr::Enum(mode.into()))
                .operand("pointers", ptrs)
                .operand("arg", values.v)
                .operand("token", tok)
                .result(Tile::<E, T>::ir_type())
                .result(Type::Token);
            op = op.operand("mask", mask);
            let r = t.push(op);
            if order.acquires() {
                // Every later access of every output waits for the acquire (what the last block of
                // a counter reads was written by the others).
                t.order_all_after(r[1]);
            } else if let Some(s) = slot
                && let Some(st) = t.out_tokens.get_mut(s)
            {
                *st = r[1];
            }
            (Tile::from_value(r[0]), Token { v: r[1] })
        })
    }

    /// `atomic(addf or add, …)`: adds `values` into the elements at `idx`.
    #[track_caller]
    pub fn atomic_add<T: Shape>(
        &mut self,
        idx: impl GatherIndex<S::Rank, T>,
        values: Tile<E, T>,
        mask: Option<Tile<bool, T>>,
    ) -> (Tile<E, T>, Token) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let mode = if E::SCALAR.is_float() {
            AtomicRmwMode::AddF
        } else {
            AtomicRmwMode::Add
        };
        self.atomic(mode, idx, values, mask)
    }
}

/// The hints attribute of a pointer load/store: `latency` only; `allow_tma` fails the specialization,
/// naming the op, since pointer accesses never use the tensor memory accelerator.
#[track_caller]
fn pointer_hints(h: Hints, op: &str) -> Option<OpAttr> {
    if let Some(tma) = h.allow_tma {
        trace::fail(format!(
            "{op}: the `allow_tma` hint ({tma}) applies only to tile loads/stores through a partition; \
             pointer accesses never use the TMA (give only `latency`)"
        ));
        return None;
    }
    h.attr()
}

pub use cutile_ir::AtomicRmwMode as AtomicMode;

/// The memory ordering of an atomic (Tile IR's `memory_ordering_semantics`). Tile IR refuses `weak`
/// on atomics, so it has no variant here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOrder {
    /// Atomic, but orders no other access.
    Relaxed,
    /// Later accesses of the block stay after it; a release it reads from makes the releasing block's
    /// earlier writes visible.
    Acquire,
    /// Earlier accesses of the block stay before it.
    Release,
    /// Both.
    AcqRel,
}

impl AtomicOrder {
    /// Whether earlier accesses stay before the atomic.
    fn releases(self) -> bool {
        matches!(self, AtomicOrder::Release | AtomicOrder::AcqRel)
    }

    /// Whether later accesses stay after the atomic.
    fn acquires(self) -> bool {
        matches!(self, AtomicOrder::Acquire | AtomicOrder::AcqRel)
    }

    fn ordering(self) -> MemoryOrdering {
        match self {
            AtomicOrder::Relaxed => MemoryOrdering::Relaxed,
            AtomicOrder::Acquire => MemoryOrdering::Acquire,
            AtomicOrder::Release => MemoryOrdering::Release,
            AtomicOrder::AcqRel => MemoryOrdering::AcqRel,
        }
    }
}

/// Which blocks an atomic's ordering synchronizes with (Tile IR's `memory_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicScope {
    /// The issuing block only.
    Block,
    /// Every block of the device.
    Device,
    /// The whole system (host and peer devices).
    System,
}

impl AtomicScope {
    fn scope(self) -> MemoryScope {
        match self {
            AtomicScope::Block => MemoryScope::TlBlk,
            AtomicScope::Device => MemoryScope::Device,
            AtomicScope::System => MemoryScope::Sys,
        }
    }
}

/// Promise the compiler that `x` is a multiple of `divisor` (a power of two).
#[track_caller]
pub fn assume_div_by<E: ElementType>(x: Scalar<E>, divisor: u64) -> Scalar<E> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    if divisor == 0 || !divisor.is_power_of_two() {
        trace::fail(format!(
            "assume_div_by: the divisor {divisor} is not a power of two"
        ));
        return x;
    }
    assume(
        x,
        Attribute::DivBy {
            divisor,
            every: None,
            along: None,
        },
    )
}

/// Promise the compiler that `lo <= x <= hi` (either bound may be `None`).
#[track_caller]
pub fn assume_bounded<E: ElementType>(x: Scalar<E>, lo: Option<i64>, hi: Option<i64>) -> Scalar<E> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    if !E::SCALAR.is_integer() {
        trace::fail(format!(
            "assume_bounded needs an integer scalar, not {}",
            E::SCALAR
        ));
        return x;
    }
    assume(x, Attribute::Bounded { lb: lo, ub: hi })
}

fn assume<E: ElementType>(x: Scalar<E>, pred: Attribute) -> Scalar<E> {
    Scalar::from_value(trace::with(|t| {
        t.push1(
            Op::new(Opcode::Assume)
                .attr("predicate", OpAttr::Tagged(pred))
                .operand("value", x.v)
                .result(Scalar::<E>::ir_type()),
        )
    }))
}
