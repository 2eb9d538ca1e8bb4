//! Memory and views: tokens, assumptions, tensor and partition views, block ids, view and pointer loads and
//! stores, atomics, multimem, globals, alloca, grid-dependency control, print/assert and the mma ops.

use crate::attr::{
    AtomicRmwMode, Attribute, EnumKind, EnumValue, MemoryOrdering, MemoryScope, OptimizationHints,
    Signedness,
};
use crate::ir::{OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::{DYNAMIC, Padding, ScalarType, Type};
use crate::verify::text::type_text;
use crate::verify::types::{pointer_tile, view_info};

use super::arith::{positional, set_attr};
use super::error::BuildError;
use super::function::FunctionBuilder;

/// Ordering, scope, token, hints and in-bounds flags of a load or store. The default is a weak access
/// without scope, token or hints (what cuTile emits); `inbounds` defaults to all false.
#[derive(Clone, Debug, PartialEq)]
pub struct MemOpts {
    pub ordering: MemoryOrdering,
    pub scope: Option<MemoryScope>,
    pub token: Option<ValueId>,
    /// Per-arch `latency` (1..=10) and, for view accesses, `allow_tma` (bool).
    pub hints: Option<OptimizationHints>,
    /// View accesses: one flag per index promising the tile is in bounds.
    pub inbounds: Option<Vec<bool>>,
}

impl Default for MemOpts {
    fn default() -> Self {
        MemOpts {
            ordering: MemoryOrdering::Weak,
            scope: None,
            token: None,
            hints: None,
            inbounds: None,
        }
    }
}

impl MemOpts {
    /// A weak access ordered after `token`.
    pub fn after(token: ValueId) -> Self {
        MemOpts {
            token: Some(token),
            ..Default::default()
        }
    }
}

/// Ordering, scope and token of an atomic. Default: relaxed, device scope, no token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicOpts {
    pub ordering: MemoryOrdering,
    pub scope: MemoryScope,
    pub token: Option<ValueId>,
}

impl Default for AtomicOpts {
    fn default() -> Self {
        AtomicOpts {
            ordering: MemoryOrdering::Relaxed,
            scope: MemoryScope::Device,
            token: None,
        }
    }
}

/// Pointer attribute values (13.4+; `Type::Pointer::attr`): multimem ops need views over a
/// [`PTR_MULTICAST`] pointer, e.g. an entry parameter `tile<ptr<f32, <multicast>>>` made with
/// [`multicast_pointer_tile`].
pub const PTR_NONE: u8 = 0;
pub const PTR_UNICAST: u8 = 1;
pub const PTR_MULTICAST: u8 = 2;

/// A rank-0 tile of a multicast pointer to `elem` (for multimem kernels).
pub fn multicast_pointer_tile(elem: ScalarType) -> Type {
    Type::Tile {
        elem: Box::new(Type::Pointer {
            pointee: Box::new(Type::Scalar(elem)),
            attr: Some(PTR_MULTICAST),
        }),
        shape: vec![],
    }
}

/// The reduction of the multimem ops (13.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultimemReduction {
    Add = 0,
    Min = 1,
    Max = 2,
    And = 3,
    Or = 4,
    Xor = 5,
    UMin = 6,
    UMax = 7,
}

impl From<MultimemReduction> for EnumValue {
    fn from(r: MultimemReduction) -> EnumValue {
        EnumValue {
            kind: EnumKind::MultimemReductionKind,
            value: r as u8,
        }
    }
}

/// One extent or stride of a tensor view: known when the kernel is built, or a run-time value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    Static(i64),
    /// A rank-0 integer tile (all dynamic extents and strides of one view share one type).
    Dynamic(ValueId),
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::Static(v)
    }
}
impl From<ValueId> for Dim {
    fn from(v: ValueId) -> Dim {
        Dim::Dynamic(v)
    }
}

fn mem_attrs(op: &mut Operation, o: &MemOpts, n_indices: Option<usize>) -> Result<(), BuildError> {
    set_attr(
        op,
        "memory_ordering_semantics",
        OpAttr::Enum(o.ordering.into()),
    )?;
    if let Some(s) = o.scope {
        set_attr(op, "memory_scope", OpAttr::Enum(s.into()))?;
    }
    if let Some(h) = &o.hints {
        set_attr(op, "optimization_hints", OpAttr::Hints(h.clone()))?;
    }
    if let Some(n) = n_indices {
        let ib = o.inbounds.clone().unwrap_or_else(|| vec![false; n]);
        set_attr(op, "inbounds", OpAttr::BoolArray(ib))?;
    } else if o.inbounds.is_some() {
        return Err(BuildError::op(
            op.opcode,
            "has no inbounds flags (pointer accesses)",
        ));
    }
    Ok(())
}

fn set_group(op: &mut Operation, name: &str, vals: Vec<ValueId>) -> Result<(), BuildError> {
    let i = op
        .opcode
        .schema()
        .operand_index(name)
        .ok_or_else(|| BuildError::op(op.opcode, format!("has no operand group `{name}`")))?;
    op.operands[i] = vals;
    Ok(())
}

impl FunctionBuilder<'_> {
    fn emit_n<const N: usize>(
        &mut self,
        op: Operation,
        tys: Vec<Type>,
    ) -> Result<[ValueId; N], BuildError> {
        let code = op.opcode;
        let r = self.emit(op, tys)?;
        r.try_into()
            .map_err(|_| BuildError::op(code, format!("expected {N} results")))
    }

    fn view_tile(&self, view: ValueId, code: Opcode) -> Result<Type, BuildError> {
        let t = self.ty(view)?;
        view_info(t).map(|v| v.tile_type()).ok_or_else(|| {
            BuildError::op(
                code,
                format!(
                    "view must be a partition, strided or gather/scatter view, got {}",
                    type_text(t)
                ),
            )
        })
    }

    // ---- tokens and assumptions ----

    /// A fresh token with no dependencies.
    pub fn make_token(&mut self) -> Result<ValueId, BuildError> {
        self.emit1(Operation::new(Opcode::MakeToken), Type::Token)
    }

    /// A token ordered after all of `tokens` (two or more).
    pub fn join_tokens(&mut self, tokens: &[ValueId]) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::JoinTokens);
        op.operands[0] = tokens.to_vec();
        self.emit1(op, Type::Token)
    }

    /// `v` with a predicate attached (div_by, bounded or same_elements).
    pub fn assume(&mut self, v: ValueId, predicate: Attribute) -> Result<ValueId, BuildError> {
        let ty = self.ty(v)?.clone();
        let mut op = positional(Opcode::Assume, &[v]);
        set_attr(&mut op, "predicate", OpAttr::Tagged(predicate))?;
        self.emit1(op, ty)
    }

    /// Assume every element (or the pointer) is divisible by `divisor` (a power of two).
    pub fn assume_div_by(&mut self, v: ValueId, divisor: u64) -> Result<ValueId, BuildError> {
        self.assume(
            v,
            Attribute::DivBy {
                divisor,
                every: None,
                along: None,
            },
        )
    }

    /// Assume `lb ≤ v ≤ ub` (None: unbounded on that side).
    pub fn assume_bounded(
        &mut self,
        v: ValueId,
        lb: Option<i64>,
        ub: Option<i64>,
    ) -> Result<ValueId, BuildError> {
        self.assume(v, Attribute::Bounded { lb, ub })
    }

    // ---- views ----

    /// A tensor view over global memory at `base` (a rank-0 pointer tile) with the given extents and strides
    /// (in elements).
    pub fn make_tensor_view(
        &mut self,
        base: ValueId,
        shape: &[Dim],
        strides: &[Dim],
    ) -> Result<ValueId, BuildError> {
        let t = self.ty(base)?;
        let elem = pointer_tile(t).map(|(p, _)| p.clone()).ok_or_else(|| {
            BuildError::op(
                Opcode::MakeTensorView,
                format!("base must be a rank-0 pointer tile, got {}", type_text(t)),
            )
        })?;
        let statics = |d: &[Dim]| -> Vec<i64> {
            d.iter()
                .map(|x| match x {
                    Dim::Static(v) => *v,
                    Dim::Dynamic(_) => DYNAMIC,
                })
                .collect()
        };
        let dynamics = |d: &[Dim]| -> Vec<ValueId> {
            d.iter()
                .filter_map(|x| match x {
                    Dim::Dynamic(v) => Some(*v),
                    Dim::Static(_) => None,
                })
                .collect()
        };
        // tileiras requires the view to carry the base pointer's ptr_attr unchanged.
        let ty = Type::TensorView {
            elem: Box::new(elem),
            shape: statics(shape),
            strides: statics(strides),
            attr: crate::verify::types::pointer_attr(t),
        };
        let mut op = positional(Opcode::MakeTensorView, &[base]);
        op.operands[1] = dynamics(shape);
        op.operands[2] = dynamics(strides);
        self.emit1(op, ty)
    }

    /// Partition a tensor view into tiles of `tile` (identity dimension map); out-of-bounds elements read as
    /// `padding` (None: unspecified).
    pub fn make_partition_view(
        &mut self,
        tv: ValueId,
        tile: &[i32],
        padding: Option<Padding>,
    ) -> Result<ValueId, BuildError> {
        let dim_map: Vec<i32> = (0..tile.len() as i32).collect();
        self.make_partition_view_mapped(tv, tile, &dim_map, padding)
    }

    /// Like [`Self::make_partition_view`] with tile dimension `i` mapped to tensor dimension `dim_map[i]`.
    pub fn make_partition_view_mapped(
        &mut self,
        tv: ValueId,
        tile: &[i32],
        dim_map: &[i32],
        padding: Option<Padding>,
    ) -> Result<ValueId, BuildError> {
        let ty = Type::PartitionView {
            tile_shape: tile.to_vec(),
            tensor_view: Box::new(self.ty(tv)?.clone()),
            dim_map: dim_map.to_vec(),
            padding,
        };
        self.emit1(positional(Opcode::MakePartitionView, &[tv]), ty)
    }

    /// (13.3+) A partition view walked with `traversal_strides` (in tiles).
    pub fn make_strided_view(
        &mut self,
        tv: ValueId,
        tile: &[i32],
        traversal_strides: &[i32],
        padding: Option<Padding>,
    ) -> Result<ValueId, BuildError> {
        let ty = Type::StridedView {
            tile_shape: tile.to_vec(),
            traversal_strides: traversal_strides.to_vec(),
            tensor_view: Box::new(self.ty(tv)?.clone()),
            dim_map: (0..tile.len() as i32).collect(),
            padding,
        };
        self.emit1(positional(Opcode::MakeStridedView, &[tv]), ty)
    }

    /// (13.3+) A view whose dimension `sparse_dim` is gathered/scattered through a 1-d index tile.
    pub fn make_gather_scatter_view(
        &mut self,
        tv: ValueId,
        tile: &[i32],
        sparse_dim: u64,
        padding: Option<Padding>,
    ) -> Result<ValueId, BuildError> {
        let ty = Type::GatherScatterView {
            tile_shape: tile.to_vec(),
            tensor_view: Box::new(self.ty(tv)?.clone()),
            sparse_dim,
            padding,
        };
        self.emit1(positional(Opcode::MakeGatherScatterView, &[tv]), ty)
    }

    /// The x, y, z index of this tile block in the grid (rank-0 i32 tiles).
    pub fn get_tile_block_id(&mut self) -> Result<[ValueId; 3], BuildError> {
        self.emit_n(
            Operation::new(Opcode::GetTileBlockId),
            vec![Type::scalar_tile(ScalarType::I32); 3],
        )
    }

    /// The grid size in tile blocks along x, y, z.
    pub fn get_num_tile_blocks(&mut self) -> Result<[ValueId; 3], BuildError> {
        self.emit_n(
            Operation::new(Opcode::GetNumTileBlocks),
            vec![Type::scalar_tile(ScalarType::I32); 3],
        )
    }

    /// The number of tiles of a view along each dimension (rank-0 i32 tiles).
    pub fn get_index_space_shape(&mut self, view: ValueId) -> Result<Vec<ValueId>, BuildError> {
        let t = self.ty(view)?;
        let n = view_info(t).map(|v| v.tile_shape.len()).ok_or_else(|| {
            BuildError::op(
                Opcode::GetIndexSpaceShape,
                format!("src must be a view, got {}", type_text(t)),
            )
        })?;
        self.emit(
            positional(Opcode::GetIndexSpaceShape, &[view]),
            vec![Type::scalar_tile(ScalarType::I32); n],
        )
    }

    /// The extents of a tensor view (rank-0 i32 tiles).
    pub fn get_tensor_shape(&mut self, tv: ValueId) -> Result<Vec<ValueId>, BuildError> {
        let t = self.ty(tv)?;
        let n = match t {
            Type::TensorView { shape, .. } => shape.len(),
            _ => {
                return Err(BuildError::op(
                    Opcode::GetTensorShape,
                    format!("src must be a tensor_view, got {}", type_text(t)),
                ));
            }
        };
        self.emit(
            positional(Opcode::GetTensorShape, &[tv]),
            vec![Type::scalar_tile(ScalarType::I32); n],
        )
    }

    // ---- view loads and stores ----

    /// Load the tile at `indices` of a view (weak, ordered after `token` if given); returns (tile, token).
    pub fn load_view_tko(
        &mut self,
        view: ValueId,
        indices: &[ValueId],
        token: Option<ValueId>,
    ) -> Result<(ValueId, ValueId), BuildError> {
        self.load_view_tko_with(
            view,
            indices,
            &MemOpts {
                token,
                ..Default::default()
            },
        )
    }

    pub fn load_view_tko_with(
        &mut self,
        view: ValueId,
        indices: &[ValueId],
        o: &MemOpts,
    ) -> Result<(ValueId, ValueId), BuildError> {
        let tile = self.view_tile(view, Opcode::LoadViewTko)?;
        let mut op = positional(Opcode::LoadViewTko, &[view]);
        op.operands[1] = indices.to_vec();
        op.operands[2] = o.token.into_iter().collect();
        mem_attrs(&mut op, o, Some(indices.len()))?;
        let [t, k] = self.emit_n(op, vec![tile, Type::Token])?;
        Ok((t, k))
    }

    /// Store `tile` at `indices` of a view; returns the token of the store.
    pub fn store_view_tko(
        &mut self,
        tile: ValueId,
        view: ValueId,
        indices: &[ValueId],
        token: Option<ValueId>,
    ) -> Result<ValueId, BuildError> {
        self.store_view_tko_with(
            tile,
            view,
            indices,
            &MemOpts {
                token,
                ..Default::default()
            },
        )
    }

    pub fn store_view_tko_with(
        &mut self,
        tile: ValueId,
        view: ValueId,
        indices: &[ValueId],
        o: &MemOpts,
    ) -> Result<ValueId, BuildError> {
        let mut op = positional(Opcode::StoreViewTko, &[tile, view]);
        op.operands[2] = indices.to_vec();
        op.operands[3] = o.token.into_iter().collect();
        mem_attrs(&mut op, o, Some(indices.len()))?;
        self.emit1(op, Type::Token)
    }

    // ---- pointer loads and stores ----

    /// Gather through a tile of pointers; masked-off elements read `padding` (or are undefined). Returns
    /// (tile, token).
    pub fn load_ptr_tko(
        &mut self,
        ptrs: ValueId,
        mask: Option<ValueId>,
        padding: Option<ValueId>,
        token: Option<ValueId>,
    ) -> Result<(ValueId, ValueId), BuildError> {
        self.load_ptr_tko_with(
            ptrs,
            mask,
            padding,
            &MemOpts {
                token,
                ..Default::default()
            },
        )
    }

    pub fn load_ptr_tko_with(
        &mut self,
        ptrs: ValueId,
        mask: Option<ValueId>,
        padding: Option<ValueId>,
        o: &MemOpts,
    ) -> Result<(ValueId, ValueId), BuildError> {
        let t = self.ty(ptrs)?;
        let (pointee, sh) = pointer_tile(t).ok_or_else(|| {
            BuildError::op(
                Opcode::LoadPtrTko,
                format!("source must be a pointer tile, got {}", type_text(t)),
            )
        })?;
        let ty = Type::Tile {
            elem: Box::new(pointee.clone()),
            shape: sh.to_vec(),
        };
        let mut op = positional(Opcode::LoadPtrTko, &[ptrs]);
        op.operands[1] = mask.into_iter().collect();
        op.operands[2] = padding.into_iter().collect();
        op.operands[3] = o.token.into_iter().collect();
        mem_attrs(&mut op, o, None)?;
        let [v, k] = self.emit_n(op, vec![ty, Type::Token])?;
        Ok((v, k))
    }

    /// Scatter `value` through a tile of pointers (only where `mask` is set, if given); returns a token.
    pub fn store_ptr_tko(
        &mut self,
        ptrs: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
        token: Option<ValueId>,
    ) -> Result<ValueId, BuildError> {
        self.store_ptr_tko_with(
            ptrs,
            value,
            mask,
            &MemOpts {
                token,
                ..Default::default()
            },
        )
    }

    pub fn store_ptr_tko_with(
        &mut self,
        ptrs: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
        o: &MemOpts,
    ) -> Result<ValueId, BuildError> {
        let mut op = positional(Opcode::StorePtrTko, &[ptrs, value]);
        op.operands[2] = mask.into_iter().collect();
        op.operands[3] = o.token.into_iter().collect();
        mem_attrs(&mut op, o, None)?;
        self.emit1(op, Type::Token)
    }

    // ---- atomics ----

    /// Atomic read-modify-write through a tile of pointers; returns (old values, token).
    pub fn atomic_rmw_tko(
        &mut self,
        ptrs: ValueId,
        arg: ValueId,
        mode: AtomicRmwMode,
        mask: Option<ValueId>,
        o: AtomicOpts,
    ) -> Result<(ValueId, ValueId), BuildError> {
        let ty = self.ty(arg)?.clone();
        let mut op = positional(Opcode::AtomicRMWTko, &[ptrs, arg]);
        op.operands[2] = mask.into_iter().collect();
        op.operands[3] = o.token.into_iter().collect();
        set_attr(
            &mut op,
            "memory_ordering_semantics",
            OpAttr::Enum(o.ordering.into()),
        )?;
        set_attr(&mut op, "memory_scope", OpAttr::Enum(o.scope.into()))?;
        set_attr(&mut op, "mode", OpAttr::Enum(mode.into()))?;
        let [v, k] = self.emit_n(op, vec![ty, Type::Token])?;
        Ok((v, k))
    }

    /// Atomic compare-and-swap; returns (old values, token).
    pub fn atomic_cas_tko(
        &mut self,
        ptrs: ValueId,
        cmp: ValueId,
        val: ValueId,
        mask: Option<ValueId>,
        o: AtomicOpts,
    ) -> Result<(ValueId, ValueId), BuildError> {
        let ty = self.ty(val)?.clone();
        let mut op = positional(Opcode::AtomicCASTko, &[ptrs, cmp, val]);
        op.operands[3] = mask.into_iter().collect();
        op.operands[4] = o.token.into_iter().collect();
        set_attr(
            &mut op,
            "memory_ordering_semantics",
            OpAttr::Enum(o.ordering.into()),
        )?;
        set_attr(&mut op, "memory_scope", OpAttr::Enum(o.scope.into()))?;
        let [v, k] = self.emit_n(op, vec![ty, Type::Token])?;
        Ok((v, k))
    }

    /// (13.3+) Atomically reduce `value` into the tile at `indices` of a view (relaxed); returns a token.
    pub fn atomic_red_view_tko(
        &mut self,
        view: ValueId,
        indices: &[ValueId],
        value: ValueId,
        mode: AtomicRmwMode,
        o: AtomicOpts,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::AtomicRedViewTko);
        set_group(&mut op, "view", vec![view])?;
        set_group(&mut op, "index", indices.to_vec())?;
        set_group(&mut op, "value", vec![value])?;
        set_group(&mut op, "token", o.token.into_iter().collect())?;
        set_attr(
            &mut op,
            "memory_ordering_semantics",
            OpAttr::Enum(o.ordering.into()),
        )?;
        set_attr(&mut op, "memory_scope", OpAttr::Enum(o.scope.into()))?;
        set_attr(&mut op, "mode", OpAttr::Enum(mode.into()))?;
        set_attr(
            &mut op,
            "inbounds",
            OpAttr::BoolArray(vec![false; indices.len()]),
        )?;
        self.emit1(op, Type::Token)
    }

    // ---- multimem (13.5) ----

    /// (13.5) Load the tile at `indices` of a multicast view, reduced across devices; returns (tile, token).
    pub fn multimem_load_reduce_view_tko(
        &mut self,
        view: ValueId,
        indices: &[ValueId],
        reduction: MultimemReduction,
        o: &MemOpts,
    ) -> Result<(ValueId, ValueId), BuildError> {
        let tile = self.view_tile(view, Opcode::MultimemLoadReduceViewTko)?;
        let mut op = Operation::new(Opcode::MultimemLoadReduceViewTko);
        set_group(&mut op, "view", vec![view])?;
        set_group(&mut op, "index", indices.to_vec())?;
        set_group(&mut op, "token", o.token.into_iter().collect())?;
        mem_attrs(
            &mut op,
            &MemOpts {
                hints: None,
                ..o.clone()
            },
            Some(indices.len()),
        )?;
        set_attr(&mut op, "reduction", OpAttr::Enum(reduction.into()))?;
        let [t, k] = self.emit_n(op, vec![tile, Type::Token])?;
        Ok((t, k))
    }

    /// (13.5) Reduce `tile` into the tile at `indices` of a multicast view; needs a scope. Returns a token.
    pub fn multimem_reduce_view_tko(
        &mut self,
        view: ValueId,
        tile: ValueId,
        indices: &[ValueId],
        reduction: MultimemReduction,
        o: &MemOpts,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::MultimemReduceViewTko);
        set_group(&mut op, "view", vec![view])?;
        set_group(&mut op, "tile", vec![tile])?;
        set_group(&mut op, "index", indices.to_vec())?;
        set_group(&mut op, "token", o.token.into_iter().collect())?;
        mem_attrs(
            &mut op,
            &MemOpts {
                hints: None,
                ..o.clone()
            },
            Some(indices.len()),
        )?;
        set_attr(&mut op, "reduction", OpAttr::Enum(reduction.into()))?;
        self.emit1(op, Type::Token)
    }

    /// (13.5) Store `tile` at `indices` of a multicast view; returns a token.
    pub fn multimem_store_view_tko(
        &mut self,
        view: ValueId,
        tile: ValueId,
        indices: &[ValueId],
        o: &MemOpts,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::MultimemStoreViewTko);
        set_group(&mut op, "view", vec![view])?;
        set_group(&mut op, "tile", vec![tile])?;
        set_group(&mut op, "index", indices.to_vec())?;
        set_group(&mut op, "token", o.token.into_iter().collect())?;
        mem_attrs(
            &mut op,
            &MemOpts {
                hints: None,
                ..o.clone()
            },
            Some(indices.len()),
        )?;
        self.emit1(op, Type::Token)
    }

    // ---- globals, alloca, ordering ----

    /// A pointer to the module global `name` (declare it with [`ModuleBuilder::global`](super::ModuleBuilder::global)).
    pub fn get_global(&mut self, name: &str) -> Result<ValueId, BuildError> {
        let g = self
            .module
            .globals
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| {
                BuildError::op(
                    Opcode::GetGlobal,
                    format!("no global named @{name}; declare it with ModuleBuilder::global first"),
                )
            })?;
        let elem = g.ty.elem().cloned().unwrap_or_else(|| g.ty.clone());
        let ty = Type::Tile {
            elem: Box::new(Type::Pointer {
                pointee: Box::new(elem),
                attr: None,
            }),
            shape: vec![],
        };
        let mut op = Operation::new(Opcode::GetGlobal);
        set_attr(&mut op, "name", OpAttr::Str(name.to_string()))?;
        self.emit1(op, ty)
    }

    /// (13.3+) Allocate `num_elem` elements of `pointee`; `global`: shareable across tile threads.
    pub fn alloca(
        &mut self,
        pointee: ScalarType,
        num_elem: u64,
        alignment: u64,
        global: bool,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::Alloca);
        set_attr(&mut op, "num_elem", OpAttr::Int(num_elem))?;
        set_attr(&mut op, "alignment", OpAttr::Int(alignment))?;
        if global {
            set_attr(&mut op, "global_", OpAttr::Unit)?;
        }
        self.emit1(op, Type::pointer_tile(pointee, &[]))
    }

    /// (13.4+) Wait for the grids this one depends on; returns a token.
    pub fn gdc_wait_tko(&mut self, token: Option<ValueId>) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::GdcWaitTko);
        op.operands[0] = token.into_iter().collect();
        self.emit1(op, Type::Token)
    }

    /// (13.4+) Allow dependent grids to launch; returns a token.
    pub fn gdc_launch_dependents_tko(
        &mut self,
        token: Option<ValueId>,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::GdcLaunchDependentsTko);
        op.operands[0] = token.into_iter().collect();
        self.emit1(op, Type::Token)
    }

    /// (13.4+) A memory fence for aliasing accesses, ordered after `token`.
    pub fn memory_fence_alias_tko(&mut self, token: ValueId) -> Result<ValueId, BuildError> {
        self.emit1(
            positional(Opcode::MemoryFenceAliasTko, &[token]),
            Type::Token,
        )
    }

    // ---- debugging ----

    /// Print with a printf-style format (one `%…` per argument); returns a token.
    pub fn print_tko(
        &mut self,
        format: &str,
        args: &[ValueId],
        token: Option<ValueId>,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::PrintTko);
        set_attr(&mut op, "str", OpAttr::Str(format.to_string()))?;
        op.operands[0] = args.to_vec();
        op.operands[1] = token.into_iter().collect();
        self.emit1(op, Type::Token)
    }

    /// Abort the kernel with `message` where `cond` (an i1 tile) is false.
    pub fn assert(&mut self, cond: ValueId, message: &str) -> Result<(), BuildError> {
        let mut op = positional(Opcode::Assert, &[cond]);
        set_attr(&mut op, "message", OpAttr::Str(message.to_string()))?;
        self.emit(op, vec![]).map(|_| ())
    }

    // ---- matrix multiply-accumulate ----

    /// `a · b + acc` for float tiles (M×K · K×N + M×N, optionally batched); the result has `acc`'s type.
    pub fn mmaf(&mut self, a: ValueId, b: ValueId, acc: ValueId) -> Result<ValueId, BuildError> {
        self.mmaf_with(a, b, acc, false)
    }

    /// [`Self::mmaf`] with `fast_acc` (faster, less precise f8 accumulation on Hopper; 13.3+).
    pub fn mmaf_with(
        &mut self,
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        fast_acc: bool,
    ) -> Result<ValueId, BuildError> {
        let ty = self.ty(acc)?.clone();
        let mut op = positional(Opcode::MmaF, &[a, b, acc]);
        if fast_acc {
            set_attr(&mut op, "fast_acc", OpAttr::Unit)?;
        }
        self.emit1(op, ty)
    }

    /// `a · b + acc` for i8 inputs and an i32 accumulator.
    pub fn mmai(
        &mut self,
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        sa: Signedness,
        sb: Signedness,
    ) -> Result<ValueId, BuildError> {
        let ty = self.ty(acc)?.clone();
        let mut op = positional(Opcode::MmaI, &[a, b, acc]);
        set_attr(&mut op, "signedness_lhs", OpAttr::Enum(sa.into()))?;
        set_attr(&mut op, "signedness_rhs", OpAttr::Enum(sb.into()))?;
        self.emit1(op, ty)
    }

    /// (13.3+) Block-scaled `a · b + acc` with f8/f4 inputs and per-block scales.
    pub fn mmaf_scaled(
        &mut self,
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        a_scale: ValueId,
        b_scale: ValueId,
    ) -> Result<ValueId, BuildError> {
        let ty = self.ty(acc)?.clone();
        self.emit1(
            positional(Opcode::MmaFScaled, &[a, b, acc, a_scale, b_scale]),
            ty,
        )
    }
}
