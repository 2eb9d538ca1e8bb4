//! Sub-views of a tensor at run-time offsets: [`Tensor::narrow`] (PyTorch's `narrow`), the rows
//! `start .. start + len` of one axis as a tensor of their own, so that a kernel can cut a packed array
//! (a variable-length batch, one sequence per block) and read or write it with whole-tile view loads and
//! stores (`load_view_tko` / `store_view_tko` over a `partition_view`, eligible for the TMA) instead of
//! per-element pointer gathers.
//!
//! Lowering: the base pointer is advanced with `offset` by `start · stride[axis]` elements and a new
//! `make_tensor_view` takes the narrowed extent as a dynamic dimension; the other extents and every
//! stride are the parent's values (and keep their `assume`s). The parent's base-alignment `assume` holds
//! for the new base only as far as the row stride allows: the new base gets `div_by<min(base, stride ·
//! element bytes)>` (both powers of two read from the parent's `assume`s, which specialization derived
//! from the actual array), so a packed `[tokens, H, D]` bf16 array with `H·D·2` a multiple of 16 keeps the
//! 16-byte alignment the TMA needs, and an unaligned stride gives a view that is still correct, only not
//! TMA-eligible. No host check is needed: the divisibility facts are part of the specialization.
//!
//! Bounds: `start` is clamped to `0 ..= extent` and `len` to `0 ..= extent − start`, so a sub-view never
//! reaches outside its parent whatever the run-time values (a bad offset read from device memory gives an
//! empty or shorter view, not an out-of-bounds access). Loads of tiles past the view's end follow the
//! partition's padding; stores past it are dropped, as at the edge of any view.

use std::marker::PhantomData;

use cutile_ir::{Attribute, OpAttr, Opcode, ScalarType, Type, ValueId};

use super::arith::Bin;
use super::elem::ElementType;
use super::shape::{DYN, Shape};
use super::tensor::Tensor;
use super::value::Scalar;
use crate::trace::{self, Op, Tracer};

/// The largest `div_by` divisor `assume`d of `v` along its chain of `assume`s (1 when none).
fn assumed_divisor(t: &Tracer, mut v: ValueId) -> u64 {
    let mut best = 1u64;
    for _ in 0..16 {
        let Some(op) = t.defining_op(v) else { break };
        if op.opcode != Opcode::Assume {
            break;
        }
        if let Some(OpAttr::Tagged(Attribute::DivBy {
            divisor,
            every: None,
            along: None,
        })) = op.attr("predicate")
        {
            best = best.max(*divisor);
        }
        match op.operand_group("value").first() {
            Some(&next) => v = next,
            None => break,
        }
    }
    best
}

fn assume(t: &mut Tracer, v: ValueId, ty: Type, pred: Attribute) -> ValueId {
    t.push1(
        Op::new(Opcode::Assume)
            .attr("predicate", OpAttr::Tagged(pred))
            .operand("value", v)
            .result(ty),
    )
}

impl<E: ElementType, S: Shape> Tensor<E, S> {
    /// The elements `start .. start + len` along `axis` as a tensor of their own (PyTorch's
    /// `narrow`): same element type, rank and strides, extent `len` on `axis`; index 0 of the result is
    /// index `start` of `self`. `start` and `len` are run-time values, clamped so the result lies
    /// inside `self` (see the module docs). An output (`&mut`) narrows to a writable tensor whose stores
    /// are ordered with the parent's; an input's `axis` must be declared `DYN`.
    ///
    /// Tiles of the result are read and written like those of a parameter ([`Tensor::partition`],
    /// [`Tensor::load_tile_padded`], [`Tensor::store_at`], …): view loads and stores, not gathers.
    #[track_caller]
    pub fn narrow(&self, axis: usize, start: Scalar<i32>, len: Scalar<i32>) -> Tensor<E, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let Type::TensorView { shape, strides, .. } = self.view_ty.clone() else {
            trace::fail("narrow: the tensor has no view");
            return self.same();
        };
        if axis >= shape.len() {
            trace::fail(format!(
                "narrow: axis {axis} is out of range for a tensor of rank {}",
                shape.len()
            ));
            return self.same();
        }
        if self.out_slot.is_none() && S::DIMS.get(axis) != Some(&DYN) {
            trace::fail(format!(
                "narrow: axis {axis} of an input must be declared DYN (its extent becomes a run-time value)"
            ));
            return self.same();
        }
        // Clamp to the parent: 0 ≤ start ≤ extent, 0 ≤ len ≤ extent − start.
        let extent = self.dim(axis);
        let start = start.max(0i32).min(extent);
        let len = len.max(0i32).min(extent - start);
        let ity = trace::with(|t| t.index_ty);
        let start_ix = super::tileops::convert(start.v, ScalarType::I32, ity, &[]);
        let len_ix = super::tileops::convert(len.v, ScalarType::I32, ity, &[]);
        let stride = self.strides.get(axis).copied().flatten();
        let elem_bytes = E::SCALAR.storage_bytes() as u64;
        let base = self.base;
        let ity_ty = Type::scalar_tile(ity);
        let off = match stride {
            Some(s) => super::arith::binary(Bin::Mul, ity, ity_ty.clone(), start_ix, s),
            None => start_ix,
        };
        let (view, view_ty, dim, new_base) = trace::with(|t| {
            let ptr_ty = Type::pointer_tile(E::SCALAR, &[]);
            let mut nb = t.push1(
                Op::new(Opcode::Offset)
                    .operand("ptr", base)
                    .operand("offset", off)
                    .result(ptr_ty.clone()),
            );
            // Alignment of the new base: the parent's, limited by the stride's in bytes.
            let step_bytes = match stride {
                Some(s) => assumed_divisor(t, s) * elem_bytes,
                None => elem_bytes,
            };
            let div = assumed_divisor(t, base).min(step_bytes);
            if div > 1 {
                nb = assume(
                    t,
                    nb,
                    ptr_ty,
                    Attribute::DivBy {
                        divisor: div,
                        every: None,
                        along: None,
                    },
                );
            }
            let dim = assume(
                t,
                len_ix,
                ity_ty,
                Attribute::Bounded {
                    lb: Some(0),
                    ub: None,
                },
            );
            let mut new_shape = shape.clone();
            new_shape[axis] = cutile_ir::DYNAMIC;
            let dyn_shape: Vec<ValueId> = new_shape
                .iter()
                .enumerate()
                .filter(|&(_, &s)| s == cutile_ir::DYNAMIC)
                .map(|(a, _)| if a == axis { dim } else { self.dims[a] })
                .collect();
            let dyn_strides: Vec<ValueId> = self.strides.iter().flatten().copied().collect();
            let view_ty = Type::TensorView {
                elem: Box::new(Type::Scalar(E::SCALAR)),
                shape: new_shape,
                strides: strides.clone(),
                attr: None,
            };
            let view = t.push1(
                Op::new(Opcode::MakeTensorView)
                    .operand("base", nb)
                    .operands("dynamicShape", &dyn_shape)
                    .operands("dynamicStrides", &dyn_strides)
                    .result(view_ty.clone()),
            );
            (view, view_ty, dim, nb)
        });
        let mut dims = self.dims.clone();
        dims[axis] = dim;
        Tensor {
            view,
            view_ty,
            dims,
            base: new_base,
            strides: self.strides.clone(),
            out_slot: self.out_slot,
            _p: PhantomData,
        }
    }

    /// A second handle on the same view (what `narrow` returns after a trace error).
    fn same(&self) -> Tensor<E, S> {
        Tensor {
            view: self.view,
            view_ty: self.view_ty.clone(),
            dims: self.dims.clone(),
            base: self.base,
            strides: self.strides.clone(),
            out_slot: self.out_slot,
            _p: PhantomData,
        }
    }
}
