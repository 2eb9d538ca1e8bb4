//! The launch contract of one specialized entry, read from its traced IR: where each declared parameter
//! sits among the entry's scalar parameters (a tensor is its pointer, then one extent and one stride per
//! axis in the index type; a scalar is one value), which input extents are static, and the tile shape of
//! each output's own partition (what the grid counts). Also packing the arguments in that order
//! ([`Signature::pack`]) and computing the grid ([`Signature::grid`]).
//!
//! Reading the contract from the IR rather than re-deriving it keeps the launcher in step with whatever
//! `KernelBuilder` emits: a disagreement is found on the cold path and reported, never packed.

use std::collections::HashMap;

use cutile_ir::{Function, Opcode, Operation, ScalarType, Type, ValueId};

use super::args::{Arg, LaunchArgs, ScalarValue, TensorRef};
use super::error::LaunchError;
use crate::dsl::{ArgError, Kernel, ParamKind, Specialized};
use crate::runtime::{Grid, KernelArgs};

/// One declared parameter of a specialized entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamLayout {
    Tensor {
        name: &'static str,
        output: bool,
        elem: ScalarType,
        rank: usize,
        /// Index of its pointer among the entry's parameters; extents and strides follow it.
        first_slot: usize,
        /// Per axis, the extent the view's type fixes (inputs declared with a number instead of `DYN`).
        static_dims: Vec<Option<i64>>,
        /// For outputs: the tile shape of the partition the kernel stores its own tile through.
        tile: Option<Vec<i64>>,
    },
    Scalar {
        name: &'static str,
        elem: ScalarType,
        slot: usize,
    },
}

/// The launch contract of one specialized entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub entry: &'static str,
    pub params: Vec<ParamLayout>,
    /// Integer type of extents and strides.
    pub index_type: ScalarType,
    /// Number of entry parameters.
    pub slots: usize,
    /// The parameter whose tiles make the default grid: the first output with a known tile.
    pub grid_param: Option<usize>,
}

/// What a value of the entry's parameter list is.
fn scalar_param(ty: &Type) -> Option<ScalarType> {
    match ty {
        Type::Tile { elem, shape } if shape.is_empty() => match &**elem {
            Type::Scalar(s) => Some(*s),
            _ => None,
        },
        _ => None,
    }
}

fn pointer_param(ty: &Type) -> Option<ScalarType> {
    match ty {
        Type::Tile { elem, shape } if shape.is_empty() => match &**elem {
            Type::Pointer { pointee, .. } => match &**pointee {
                Type::Scalar(s) => Some(*s),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

impl Signature {
    /// Reads the contract of `spec`, built by `kernel` for tensors of the given ranks (in order).
    pub fn from_specialized(
        kernel: &Kernel,
        spec: &Specialized,
        ranks: &[usize],
    ) -> Result<Signature, LaunchError> {
        let bad = |message: String| LaunchError::Signature {
            kernel: kernel.name().to_string(),
            message,
        };
        let func = spec
            .module
            .function(spec.entry)
            .ok_or_else(|| bad(format!("the module has no entry `{}`", spec.entry)))?;
        let body = func
            .body
            .as_ref()
            .ok_or_else(|| bad("the entry has no body".into()))?;
        let types = &func.param_types;
        let index_type = spec.index_type;
        let mut params = Vec::with_capacity(kernel.info.params.len());
        let mut slot = 0usize;
        let mut ranks = ranks.iter();
        for p in kernel.info.params {
            match p.kind {
                ParamKind::Scalar => {
                    let elem = types.get(slot).and_then(scalar_param).ok_or_else(|| {
                        bad(format!(
                            "parameter `{}` should be a scalar at entry slot {slot}, found {:?}",
                            p.name,
                            types.get(slot)
                        ))
                    })?;
                    params.push(ParamLayout::Scalar {
                        name: p.name,
                        elem,
                        slot,
                    });
                    slot += 1;
                }
                ParamKind::Input | ParamKind::Output => {
                    let rank = *ranks
                        .next()
                        .ok_or_else(|| bad("fewer tensor ranks than tensor parameters".into()))?;
                    let elem = types.get(slot).and_then(pointer_param).ok_or_else(|| {
                        bad(format!(
                            "parameter `{}` should be a pointer at entry slot {slot}, found {:?}",
                            p.name,
                            types.get(slot)
                        ))
                    })?;
                    for s in slot + 1..slot + 1 + 2 * rank {
                        if types.get(s).and_then(scalar_param) != Some(index_type) {
                            return Err(bad(format!(
                                "parameter `{}`: entry slot {s} should be an {index_type} extent or stride, found {:?}",
                                p.name,
                                types.get(s)
                            )));
                        }
                    }
                    params.push(ParamLayout::Tensor {
                        name: p.name,
                        output: p.kind == ParamKind::Output,
                        elem,
                        rank,
                        first_slot: slot,
                        static_dims: vec![None; rank],
                        tile: None,
                    });
                    slot += 1 + 2 * rank;
                }
            }
        }
        if slot != types.len() {
            return Err(bad(format!(
                "the declared parameters cover {slot} entry parameters but the entry has {}",
                types.len()
            )));
        }
        let views = ViewMap::new(func, &body.args);
        for p in &mut params {
            if let ParamLayout::Tensor {
                name,
                output,
                first_slot,
                static_dims,
                tile,
                ..
            } = p
            {
                let view = views.view_of_param(*first_slot).ok_or_else(|| {
                    bad(format!("no tensor view is made from parameter `{name}`"))
                })?;
                if let Some(Type::TensorView { shape, .. }) = func.values.get(view.0 as usize) {
                    for (d, &s) in static_dims.iter_mut().zip(shape) {
                        *d = (s != cutile_ir::DYNAMIC).then_some(s);
                    }
                }
                if *output {
                    let tiles = views.store_tiles(view);
                    match tiles.as_slice() {
                        [] => {}
                        [t] => *tile = Some(t.clone()),
                        _ => {
                            return Err(bad(format!(
                                "output `{name}` is stored through partitions of several tile shapes {tiles:?}"
                            )));
                        }
                    }
                }
            }
        }
        let grid_param = params
            .iter()
            .position(|p| matches!(p, ParamLayout::Tensor { tile: Some(_), .. }));
        Ok(Signature {
            entry: spec.entry,
            params,
            index_type,
            slots: slot,
            grid_param,
        })
    }

    /// The type of every entry parameter in order, as (element type, is pointer): what
    /// [`pack`](Self::pack) writes.
    pub fn slot_types(&self) -> Vec<(ScalarType, bool)> {
        let mut out = Vec::with_capacity(self.slots);
        for p in &self.params {
            match p {
                ParamLayout::Scalar { elem, .. } => out.push((*elem, false)),
                ParamLayout::Tensor { elem, rank, .. } => {
                    out.push((*elem, true));
                    out.extend(std::iter::repeat_n((self.index_type, false), 2 * rank));
                }
            }
        }
        out
    }

    /// Checks what the warm key does not capture: static extents of inputs, and that outputs do not
    /// overlap themselves.
    pub fn check_args(&self, kernel: &str, args: &LaunchArgs<'_>) -> Result<(), LaunchError> {
        for (p, a) in self.params.iter().zip(&args.items) {
            if let (
                ParamLayout::Tensor {
                    name,
                    output,
                    static_dims,
                    ..
                },
                Arg::Tensor(t),
            ) = (p, a)
            {
                for (axis, (d, &actual)) in static_dims.iter().zip(t.shape).enumerate() {
                    if let Some(d) = *d
                        && d != actual
                    {
                        return Err(ArgError::StaticShape {
                            kernel: kernel.to_string(),
                            param: name.to_string(),
                            message: format!(
                                "the declared shape fixes axis {axis} to {d}, but the tensor has extent {actual} there (shape {:?})",
                                t.shape
                            ),
                        }
                        .into());
                    }
                }
                if *output && overlaps(t.shape, t.strides) {
                    return Err(ArgError::OverlappingOutput {
                        kernel: kernel.to_string(),
                        param: name.to_string(),
                        shape: t.shape.to_vec(),
                        strides: t.strides.to_vec(),
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// The launch grid: `args`' override, else ceil(extent / tile) of the grid parameter along x, y, z.
    /// `Ok(None)` when the output is empty (nothing to launch).
    pub fn grid(&self, kernel: &str, args: &LaunchArgs<'_>) -> Result<Option<Grid>, LaunchError> {
        if let Some(g) = args.grid {
            return Ok(Some(g));
        }
        let no_grid = |reason: String| LaunchError::NoGrid {
            kernel: kernel.to_string(),
            reason,
        };
        let i = self
            .grid_param
            .ok_or_else(|| no_grid("no output is stored through its own tile partition".into()))?;
        let (Some(ParamLayout::Tensor { name, tile, .. }), Some(Arg::Tensor(t))) =
            (self.params.get(i), args.items.get(i))
        else {
            return Err(no_grid(
                "the grid parameter is not a tensor argument".into(),
            ));
        };
        let tile = tile.as_deref().unwrap_or_default();
        if tile.len() > 3 || tile.len() != t.shape.len() {
            return Err(no_grid(format!(
                "output `{name}` has rank {} and tile {tile:?}; the grid has at most 3 axes",
                t.shape.len()
            )));
        }
        let mut grid = [1u32; 3];
        for (g, (&extent, &tile)) in grid.iter_mut().zip(t.shape.iter().zip(tile)) {
            let tiles = if tile <= 0 {
                return Err(no_grid(format!(
                    "output `{name}` has a tile of extent {tile}"
                )));
            } else {
                (extent.max(0) as u64).div_ceil(tile as u64)
            };
            if tiles == 0 {
                return Ok(None);
            }
            *g = u32::try_from(tiles).map_err(|_| {
                no_grid(format!(
                    "output `{name}` of shape {:?} needs {tiles} tiles along one axis",
                    t.shape
                ))
            })?;
        }
        Ok(Some((grid[0], grid[1], grid[2])))
    }

    /// Packs `args` in entry-parameter order: for a tensor its address, then its extents and strides in
    /// the index type; for a scalar its value at its declared width.
    pub fn pack(
        &self,
        kernel: &str,
        args: &LaunchArgs<'_>,
    ) -> Result<KernelArgs<'static>, LaunchError> {
        let mut out = KernelArgs::new();
        for (p, a) in self.params.iter().zip(&args.items) {
            match (p, a) {
                (ParamLayout::Tensor { name, .. }, Arg::Tensor(t)) => {
                    self.pack_tensor(&mut out, kernel, name, t)?;
                }
                (ParamLayout::Scalar { elem, .. }, Arg::Scalar(ScalarValue { bits, .. })) => {
                    pack_scalar(&mut out, *elem, *bits);
                }
                (p, _) => {
                    return Err(LaunchError::Signature {
                        kernel: kernel.to_string(),
                        message: format!(
                            "argument kind does not match the cached signature at {p:?}"
                        ),
                    });
                }
            }
        }
        Ok(out)
    }

    fn pack_tensor(
        &self,
        out: &mut KernelArgs<'static>,
        kernel: &str,
        name: &str,
        t: &TensorRef<'_>,
    ) -> Result<(), LaunchError> {
        out.push(t.ptr);
        for &v in t.shape.iter().chain(t.strides) {
            if self.index_type == ScalarType::I32 {
                let v = i32::try_from(v).map_err(|_| ArgError::IndexOverflow {
                    kernel: kernel.to_string(),
                    param: name.to_string(),
                    value: v,
                    index_type: self.index_type,
                })?;
                out.push(v);
            } else {
                out.push(v);
            }
        }
        Ok(())
    }
}

/// Pushes a scalar at the storage width of its type (the bits were produced for that type).
fn pack_scalar(out: &mut KernelArgs<'static>, elem: ScalarType, bits: u64) {
    match elem.storage_bytes() {
        1 => out.push(bits as u8),
        2 => out.push(bits as u16),
        4 => out.push(bits as u32),
        _ => out.push(bits),
    };
}

/// Whether two distinct indices of `shape` reach the same element under `strides`. Exact for the
/// layouts views produce (each |stride| at least the span of the smaller axes); other layouts are
/// reported as overlapping, which is conservative.
pub fn overlaps(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return false;
    }
    // (|stride|, extent) of the axes that step, sorted by stride; ranks are small, so insertion sort on
    // the stack.
    let mut axes = [(0u64, 0u64); super::args::MAX_RANK];
    let mut n = 0;
    for (&d, &s) in shape.iter().zip(strides) {
        if d <= 1 {
            continue;
        }
        if n == axes.len() {
            return true; // beyond the launcher's rank limit: be conservative
        }
        let mut i = n;
        let item = (s.unsigned_abs(), d as u64);
        while i > 0 && axes[i - 1] > item {
            axes[i] = axes[i - 1];
            i -= 1;
        }
        axes[i] = item;
        n += 1;
    }
    let mut span = 1u64; // elements covered by the smaller axes
    for &(stride, extent) in &axes[..n] {
        if stride < span {
            return true;
        }
        span = match stride
            .checked_mul(extent - 1)
            .and_then(|x| x.checked_add(span))
        {
            Some(s) => s,
            None => return false,
        };
    }
    false
}

/// Which tensor view each parameter became and which partitions store into a view.
struct ViewMap<'f> {
    defs: HashMap<ValueId, &'f Operation>,
    params: &'f [ValueId],
    func: &'f Function,
}

impl<'f> ViewMap<'f> {
    fn new(func: &'f Function, params: &'f [ValueId]) -> ViewMap<'f> {
        let mut defs = HashMap::new();
        if let Some(body) = &func.body {
            body.walk(&mut |op: &'f Operation| {
                for &r in &op.results {
                    defs.insert(r, op);
                }
            });
        }
        ViewMap { defs, params, func }
    }

    /// The entry parameter a value comes from, looking through `assume`.
    fn param_of(&self, mut v: ValueId) -> Option<usize> {
        for _ in 0..64 {
            if let Some(i) = self.params.iter().position(|&p| p == v) {
                return Some(i);
            }
            let op = self.defs.get(&v)?;
            if op.opcode != Opcode::Assume {
                return None;
            }
            v = *op.operand_group("value").first()?;
        }
        None
    }

    /// The `make_tensor_view` result whose base is entry parameter `slot`.
    fn view_of_param(&self, slot: usize) -> Option<ValueId> {
        let body = self.func.body.as_ref()?;
        body.ops.iter().find_map(|op| {
            (op.opcode == Opcode::MakeTensorView
                && op
                    .operand_group("base")
                    .first()
                    .and_then(|&b| self.param_of(b))
                    == Some(slot))
            .then(|| op.results.first().copied())
            .flatten()
        })
    }

    /// Tile shapes of the partitions of `view` that `store_view_tko` writes through.
    fn store_tiles(&self, view: ValueId) -> Vec<Vec<i64>> {
        let mut tiles: Vec<Vec<i64>> = vec![];
        let Some(body) = &self.func.body else {
            return tiles;
        };
        body.walk(&mut |op| {
            if op.opcode != Opcode::StoreViewTko {
                return;
            }
            let Some(pv) = op.operand_group("view").first() else {
                return;
            };
            let Some(part) = self.defs.get(pv) else {
                return;
            };
            if part.opcode != Opcode::MakePartitionView
                || part.operand_group("tensor_view").first() != Some(&view)
            {
                return;
            }
            if let Some(Type::PartitionView { tile_shape, .. }) =
                self.func.values.get(pv.0 as usize)
            {
                let t: Vec<i64> = tile_shape.iter().map(|&d| d as i64).collect();
                if !tiles.contains(&t) {
                    tiles.push(t);
                }
            }
        });
        tiles
    }
}
