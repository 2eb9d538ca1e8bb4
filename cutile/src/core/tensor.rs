//! Global arrays and views: [`Tensor`] (a kernel's array parameter), [`Partition`] (the array cut into tiles
//! of a static shape, with a padding mode for out-of-range elements), tile loads and stores, and block ids.
//!
//! In a kernel signature, `&Tensor<E, S>` is a shared, read-only input; `S` gives its rank and extents (`DYN`
//! for run-time extents, a number for an extent that specialization checks). `&mut Tensor<E, S>` is an
//! output partitioned by the launcher into tiles of the static shape `S`, one per block: the block writes its
//! own tile with [`Tensor::store`]. Writing any other tile ([`Tensor::store_at`]) is `unsafe`, because
//! disjointness of the blocks' writes is then the kernel's responsibility.

use std::marker::PhantomData;

use cutile_ir::{
    MemoryOrdering, OpAttr, Opcode, OptimizationHints, Padding, ScalarType, Type, ValueId,
};

use super::elem::ElementType;
use super::shape::{DYN, SameRank, Shape, fmt_dims, rank::*};
use super::value::{Scalar, Tile, Token, check_tile_dims};
use crate::trace::{self, Op};

/// A global array seen by a kernel (see the module docs for `&` vs `&mut`).
pub struct Tensor<E, S> {
    /// The `tensor_view` value.
    pub(crate) view: ValueId,
    pub(crate) view_ty: Type,
    /// Extents (rank-0 index-type values, after `assume`).
    pub(crate) dims: Vec<ValueId>,
    /// The base pointer (after `assume`).
    pub(crate) base: ValueId,
    /// Strides (index-type values); `None` for a static unit stride.
    pub(crate) strides: Vec<Option<ValueId>>,
    /// For `&mut` parameters: the slot of this tensor's ordering token.
    pub(crate) out_slot: Option<usize>,
    pub(crate) _p: PhantomData<fn() -> (E, S)>,
}

impl<E, S> std::fmt::Debug for Tensor<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor(%{})", self.view.0)
    }
}

/// Optional hints for one load or store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    /// Expected latency class, passed to tileiras as `latency`.
    pub latency: Option<i32>,
    /// Whether tileiras may use the tensor memory accelerator (`allow_tma`).
    pub allow_tma: Option<bool>,
}

impl Hints {
    /// Plain loads/stores, no tensor memory accelerator: faster when each block moves one small tile
    /// (whole-row softmax and norms on an H200: several times faster than with the TMA).
    pub const NO_TMA: Hints = Hints {
        latency: None,
        allow_tma: Some(false),
    };

    /// Only a latency hint (the `latency=` of cuTile's loads, stores, gathers and scatters).
    pub const fn with_latency(latency: i32) -> Hints {
        Hints {
            latency: Some(latency),
            allow_tma: None,
        }
    }

    pub(crate) fn attr(&self) -> Option<OpAttr> {
        if self.latency.is_none() && self.allow_tma.is_none() {
            return None;
        }
        let mut h = OptimizationHints::default();
        if let Some(l) = self.latency {
            h.set_i32("default", "latency", l);
        }
        if let Some(t) = self.allow_tma {
            h.set("default", "allow_tma", cutile_ir::Attribute::Bool(t));
        }
        Some(OpAttr::Hints(h))
    }
}

/// A tensor cut into tiles of shape `T`; loads read one tile by its tile index.
pub struct Partition<E, T> {
    pub(crate) view: ValueId,
    pub(crate) out_slot: Option<usize>,
    pub(crate) _p: PhantomData<fn() -> (E, T)>,
}
impl<E, T> Clone for Partition<E, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E, T> Copy for Partition<E, T> {}
impl<E, T> std::fmt::Debug for Partition<E, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partition(%{})", self.view.0)
    }
}

/// One component of a tile index: a device `i32` scalar or a host `i32`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tile index",
    label = "tile indices are `Scalar<i32>` values or `i32` numbers"
)]
pub trait IntoIndex {
    #[doc(hidden)]
    fn index_value(self) -> ValueId;
}
impl IntoIndex for Scalar<i32> {
    fn index_value(self) -> ValueId {
        self.v
    }
}
impl IntoIndex for i32 {
    #[track_caller]
    fn index_value(self) -> ValueId {
        let _at = crate::trace::at(::std::panic::Location::caller());
        super::arith::splat_const(
            ScalarType::I32,
            &Type::scalar_tile(ScalarType::I32),
            super::elem::HostNum::Int(self as i64),
        )
    }
}

/// A tile index of rank `R`: a tuple with one [`IntoIndex`] per axis (a bare value for rank 1).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tile index of the right rank",
    label = "give one index per axis of the tile",
    note = "a rank-2 tile takes `(i, j)`; rank 1 takes `i` or `(i,)`"
)]
pub trait TileIndex<R> {
    #[doc(hidden)]
    fn index_values(self) -> Vec<ValueId>;
}
impl<A: IntoIndex> TileIndex<R1> for A {
    fn index_values(self) -> Vec<ValueId> {
        vec![self.index_value()]
    }
}
impl TileIndex<R0> for () {
    fn index_values(self) -> Vec<ValueId> {
        vec![]
    }
}
impl<A: IntoIndex> TileIndex<R1> for (A,) {
    fn index_values(self) -> Vec<ValueId> {
        vec![self.0.index_value()]
    }
}
impl<A: IntoIndex, B: IntoIndex> TileIndex<R2> for (A, B) {
    fn index_values(self) -> Vec<ValueId> {
        vec![self.0.index_value(), self.1.index_value()]
    }
}
impl<A: IntoIndex, B: IntoIndex, C: IntoIndex> TileIndex<R3> for (A, B, C) {
    fn index_values(self) -> Vec<ValueId> {
        vec![
            self.0.index_value(),
            self.1.index_value(),
            self.2.index_value(),
        ]
    }
}
impl<A: IntoIndex, B: IntoIndex, C: IntoIndex, D: IntoIndex> TileIndex<R4> for (A, B, C, D) {
    fn index_values(self) -> Vec<ValueId> {
        vec![
            self.0.index_value(),
            self.1.index_value(),
            self.2.index_value(),
            self.3.index_value(),
        ]
    }
}

fn partition_type(view_ty: &Type, tile: &[i32], padding: Option<Padding>) -> Type {
    Type::partition_view(tile, view_ty.clone(), padding)
}

impl<E: ElementType, S: Shape> Tensor<E, S> {
    /// Cut this tensor into tiles of shape `T`. Elements of edge tiles that fall outside the tensor are
    /// unspecified when loaded (use [`partition_padded`](Self::partition_padded) to define them) and are
    /// not written by stores.
    #[track_caller]
    pub fn partition<T: Shape>(&self) -> Partition<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.make_partition(None)
    }

    /// Cut this tensor into tiles of shape `T`; out-of-range elements of a tile that overlaps the
    /// tensor load as `padding`. A tile that lies wholly outside the tensor is undefined in Tile IR
    /// whatever the padding (cuTile's documented rule; on an H100 such loads returned neighbouring
    /// memory, `docs/toolchain-findings.md`, session 34): clamp the index into range and mask the
    /// loaded tile with `select` instead.
    #[track_caller]
    pub fn partition_padded<T: Shape>(&self, padding: Padding) -> Partition<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.make_partition(Some(padding))
    }

    #[track_caller]
    fn make_partition<T: Shape>(&self, padding: Option<Padding>) -> Partition<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(T::DIMS, "partition");
        if padding.is_some_and(|p| p != Padding::Zero) && !E::SCALAR.is_float() {
            trace::fail(format!(
                "padding {:?} needs a floating-point element type, not {}",
                padding,
                E::SCALAR
            ));
        }
        let ty = partition_type(&self.view_ty, T::DIMS, padding);
        let view = self.view;
        let v = trace::with(|t| {
            t.push1(
                Op::new(Opcode::MakePartitionView)
                    .operand("tensor_view", view)
                    .result(ty),
            )
        });
        Partition {
            view: v,
            out_slot: self.out_slot,
            _p: PhantomData,
        }
    }

    /// Load the tile of shape `T` at tile index `idx` (unpadded; see [`partition`](Self::partition)).
    #[track_caller]
    pub fn load_tile<T: Shape>(&self, idx: impl TileIndex<T::Rank>) -> Tile<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.partition::<T>().load(idx)
    }

    /// Load the tile of shape `T` at `idx`; out-of-range elements read as `padding`.
    #[track_caller]
    pub fn load_tile_padded<T: Shape>(
        &self,
        idx: impl TileIndex<T::Rank>,
        padding: Padding,
    ) -> Tile<E, T>
    where
        S: SameRank<T>,
    {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.partition_padded::<T>(padding).load(idx)
    }

    /// Extent of axis `axis` (a device value; for `&mut` outputs, of the whole array).
    #[track_caller]
    pub fn dim(&self, axis: usize) -> Scalar<i32> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        match self.dims.get(axis) {
            Some(&v) => Scalar::from_value(index_to_i32(v)),
            None => {
                trace::fail(format!(
                    "axis {axis} is out of range for a tensor of rank {}",
                    S::RANK
                ));
                super::arith::scalar(0)
            }
        }
    }

    /// This block's tile of a partitioned output (`&mut Tensor<E, S>` parameter).
    #[track_caller]
    fn own_index(&self) -> Vec<ValueId> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        if S::RANK > 3 {
            trace::fail(format!(
                "a partitioned output has at most 3 dimensions (one per grid axis), not {}",
                S::RANK
            ));
        }
        let ids = block_id_values();
        ids[..S::RANK.min(3)].to_vec()
    }

    /// Store `tile` as this block's tile of the output. Only `&mut Tensor` parameters are writable.
    #[track_caller]
    pub fn store(&mut self, tile: Tile<E, S>) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        check_tile_dims(S::DIMS, "store");
        let idx = self.own_index();
        let p = self.make_partition::<S>(None);
        store_view(p.view, tile.v, idx, self.out_slot, Hints::default());
    }

    /// Store with load/store hints.
    #[track_caller]
    pub fn store_with(&mut self, tile: Tile<E, S>, hints: Hints) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let idx = self.own_index();
        let p = self.make_partition::<S>(None);
        store_view(p.view, tile.v, idx, self.out_slot, hints);
    }

    /// Load this block's tile of the output (ordered after this kernel's earlier stores to it).
    #[track_caller]
    pub fn load(&self) -> Tile<E, S> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let idx = self.own_index();
        let p = self.make_partition::<S>(None);
        Tile::from_value(load_view(
            p.view,
            Tile::<E, S>::ir_type(),
            idx,
            self.out_slot,
            Hints::default(),
        ))
    }

    /// Store `tile` at an arbitrary tile index of the output.
    ///
    /// # Safety
    /// No two blocks may write the same elements, and no block may read elements another block writes in
    /// the same launch: the launcher only guarantees disjointness for [`store`](Self::store).
    #[track_caller]
    pub unsafe fn store_at(&mut self, idx: impl TileIndex<S::Rank>, tile: Tile<E, S>) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let idx = idx.index_values();
        let p = self.make_partition::<S>(None);
        store_view(p.view, tile.v, idx, self.out_slot, Hints::default());
    }

    /// [`store_at`](Self::store_at) with load/store hints.
    ///
    /// # Safety
    /// As [`store_at`](Self::store_at).
    #[track_caller]
    pub unsafe fn store_at_with(
        &mut self,
        idx: impl TileIndex<S::Rank>,
        tile: Tile<E, S>,
        hints: Hints,
    ) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let idx = idx.index_values();
        let p = self.make_partition::<S>(None);
        store_view(p.view, tile.v, idx, self.out_slot, hints);
    }
}

/// Convert an index-type value to i32 (a no-op for i32 specializations).
pub(crate) fn index_to_i32(v: ValueId) -> ValueId {
    trace::with(|t| {
        if t.ty(v).tile_scalar() == Some(ScalarType::I32) {
            v
        } else {
            t.push1(
                Op::new(Opcode::TruncI)
                    .attr(
                        "overflow",
                        OpAttr::Enum(cutile_ir::IntegerOverflow::None.into()),
                    )
                    .operand("from_", v)
                    .result(Type::scalar_tile(ScalarType::I32)),
            )
        }
    })
}

impl<E: ElementType, T: Shape> Partition<E, T> {
    /// Load the tile at tile index `idx`. The tile must overlap the tensor on every axis: a tile
    /// wholly outside it is undefined in Tile IR, padded partition or not.
    #[track_caller]
    pub fn load(&self, idx: impl TileIndex<T::Rank>) -> Tile<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        self.load_with(idx, Hints::default())
    }

    /// Load with hints.
    #[track_caller]
    pub fn load_with(&self, idx: impl TileIndex<T::Rank>, hints: Hints) -> Tile<E, T> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let idx = idx.index_values();
        Tile::from_value(load_view(
            self.view,
            Tile::<E, T>::ir_type(),
            idx,
            self.out_slot,
            hints,
        ))
    }

    /// Number of tiles along `axis` (ceil(extent / tile extent)).
    #[track_caller]
    pub fn num_tiles(&self, axis: usize) -> Scalar<i32> {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let rank = T::RANK;
        if axis >= rank {
            trace::fail(format!(
                "axis {axis} is out of range for a partition of rank {rank}"
            ));
            return super::arith::scalar(0);
        }
        let view = self.view;
        let vals = trace::with(|t| {
            let idx_ty = Type::scalar_tile(ScalarType::I32);
            t.push(
                Op::new(Opcode::GetIndexSpaceShape)
                    .operand("src", view)
                    .results(std::iter::repeat_n(idx_ty, rank)),
            )
        });
        Scalar::from_value(vals[axis])
    }
}

/// Emit `load_view_tko`, ordered by the slot's token when the tensor is an output.
pub(crate) fn load_view(
    view: ValueId,
    ty: Type,
    idx: Vec<ValueId>,
    slot: Option<usize>,
    hints: Hints,
) -> ValueId {
    trace::with(|t| {
        let tok = slot
            .and_then(|s| t.out_tokens.get(s).copied())
            .unwrap_or(t.entry_token);
        let mut op = Op::new(Opcode::LoadViewTko)
            .attr(
                "memory_ordering_semantics",
                OpAttr::Enum(MemoryOrdering::Weak.into()),
            )
            .attr("inbounds", OpAttr::BoolArray(vec![false; idx.len()]))
            .operand("view", view)
            .operands("index", &idx)
            .operand("token", tok)
            .result(ty)
            .result(Type::Token);
        if let Some(h) = hints.attr() {
            op = op.attr("optimization_hints", h);
        }
        let r = t.push(op);
        // A load does not need to order later loads; a later store to the same output is ordered by data
        // dependence or by this load's token.
        if let Some(s) = slot
            && let (Some(slot_tok), Some(&rt)) = (t.out_tokens.get_mut(s), r.get(1))
        {
            *slot_tok = rt;
        }
        r[0]
    })
}

/// Emit `store_view_tko` and advance the slot's token.
pub(crate) fn store_view(
    view: ValueId,
    tile: ValueId,
    idx: Vec<ValueId>,
    slot: Option<usize>,
    hints: Hints,
) {
    trace::with(|t| {
        let tok = slot
            .and_then(|s| t.out_tokens.get(s).copied())
            .unwrap_or(t.entry_token);
        let mut op = Op::new(Opcode::StoreViewTko)
            .attr(
                "memory_ordering_semantics",
                OpAttr::Enum(MemoryOrdering::Weak.into()),
            )
            .attr("inbounds", OpAttr::BoolArray(vec![false; idx.len()]))
            .operand("tile", tile)
            .operand("view", view)
            .operands("index", &idx)
            .operand("token", tok)
            .result(Type::Token);
        if let Some(h) = hints.attr() {
            op = op.attr("optimization_hints", h);
        }
        let r = t.push1(op);
        if let Some(s) = slot
            && let Some(slot_tok) = t.out_tokens.get_mut(s)
        {
            *slot_tok = r;
        }
    })
}

fn block_id_values() -> Vec<ValueId> {
    let ty = Type::scalar_tile(ScalarType::I32);
    trace::with(|t| t.push(Op::new(Opcode::GetTileBlockId).results([ty.clone(), ty.clone(), ty])))
}

/// This block's id in the grid, `(x, y, z)`.
#[track_caller]
pub fn block_id() -> (Scalar<i32>, Scalar<i32>, Scalar<i32>) {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let v = block_id_values();
    (
        Scalar::from_value(v[0]),
        Scalar::from_value(v[1]),
        Scalar::from_value(v[2]),
    )
}

/// This block's id along x.
#[track_caller]
pub fn block_id_x() -> Scalar<i32> {
    let _at = crate::trace::at(::std::panic::Location::caller());
    block_id().0
}

/// The grid size, `(x, y, z)`.
#[track_caller]
pub fn num_blocks() -> (Scalar<i32>, Scalar<i32>, Scalar<i32>) {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let ty = Type::scalar_tile(ScalarType::I32);
    let v = trace::with(|t| {
        t.push(Op::new(Opcode::GetNumTileBlocks).results([ty.clone(), ty.clone(), ty]))
    });
    (
        Scalar::from_value(v[0]),
        Scalar::from_value(v[1]),
        Scalar::from_value(v[2]),
    )
}

/// A fresh token with no dependencies.
#[track_caller]
pub fn new_token() -> Token {
    let _at = crate::trace::at(::std::panic::Location::caller());
    Token {
        v: trace::with(|t| t.push1(Op::new(Opcode::MakeToken).result(Type::Token))),
    }
}

/// A token that depends on all of `tokens`.
#[track_caller]
pub fn join_tokens(tokens: &[Token]) -> Token {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let vs: Vec<ValueId> = tokens.iter().map(|t| t.v).collect();
    Token {
        v: trace::with(|t| {
            t.push1(
                Op::new(Opcode::JoinTokens)
                    .operands("tokens", &vs)
                    .result(Type::Token),
            )
        }),
    }
}

/// Check a tensor parameter's static extents against the shape type (used by the kernel prologue).
pub(crate) fn static_dims_message(dims: &[i32], actual: &[i64]) -> Option<String> {
    for (i, (&d, &a)) in dims.iter().zip(actual).enumerate() {
        if d != DYN && d as i64 != a {
            return Some(format!(
                "declared shape {} fixes axis {i} to {d}, but the array has extent {a} there (shape {:?})",
                fmt_dims(dims),
                actual
            ));
        }
    }
    None
}
