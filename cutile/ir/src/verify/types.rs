//! Validity of types on their own (tile shapes, views, pointers) and the element-type families the op rules
//! use. A type that fails here is rejected wherever it appears: value, parameter or attribute.

use crate::types::{DYNAMIC, Padding, ScalarType, Type};
use crate::version::{V13_3, V13_4, V13_5, Version};

use super::text::type_text as tt;

/// The largest number of elements a tile may have.
pub const MAX_TILE_ELEMENTS: i64 = 1 << 24;

/// f16, bf16, f32, f64: what most float arithmetic accepts.
pub fn is_base_float(s: ScalarType) -> bool {
    matches!(
        s,
        ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 | ScalarType::F64
    )
}

/// Any float element type (conversions, constants).
pub fn is_float(s: ScalarType) -> bool {
    s.is_float()
}

/// i1, i8, i16, i32, i64: what integer arithmetic accepts (i4 only appears in exti/trunci/pack/unpack).
pub fn is_int(s: ScalarType) -> bool {
    s.is_integer() && s != ScalarType::I4
}

/// A tile's scalar element type and shape (None for tiles of pointers and non-tiles).
pub fn scalar_tile(t: &Type) -> Option<(ScalarType, &[i64])> {
    match t {
        Type::Tile { elem, shape } => match **elem {
            Type::Scalar(s) => Some((s, shape)),
            _ => None,
        },
        _ => None,
    }
}

/// A tile of pointers: the pointee and the tile shape.
pub fn pointer_tile(t: &Type) -> Option<(&Type, &[i64])> {
    match t {
        Type::Tile { elem, shape } => match &**elem {
            Type::Pointer { pointee, .. } => Some((pointee, shape)),
            _ => None,
        },
        _ => None,
    }
}

/// Shape of any tile.
pub fn tile_shape(t: &Type) -> Option<&[i64]> {
    t.tile_shape()
}

/// Whether `t` is a rank-0 tile of an integer type (an index or a dynamic extent).
pub fn is_int_scalar(t: &Type) -> bool {
    matches!(scalar_tile(t), Some((s, sh)) if sh.is_empty() && is_int(s))
}

/// Whether `t` is a rank-0 tile of `s`.
pub fn is_scalar_of(t: &Type, s: ScalarType) -> bool {
    matches!(scalar_tile(t), Some((e, sh)) if sh.is_empty() && e == s)
}

/// A view the load/store family accepts, as seen by those ops.
#[derive(Debug)]
pub struct ViewInfo<'a> {
    pub tile_shape: Vec<i64>,
    pub elem: &'a Type,
    pub padding: Option<Padding>,
    /// `Some(d)` for a gather/scatter view.
    pub sparse_dim: Option<usize>,
    pub kind: &'static str,
    /// The tensor view's pointer attribute (see [`PTR_ATTR_NAMES`]).
    pub ptr_attr: Option<u8>,
}

impl ViewInfo<'_> {
    /// The tile type a load yields and a store takes.
    pub fn tile_type(&self) -> Type {
        Type::Tile {
            elem: Box::new(self.elem.clone()),
            shape: self.tile_shape.clone(),
        }
    }
}

/// Partition, strided and gather/scatter views (None for anything else).
pub fn view_info(t: &Type) -> Option<ViewInfo<'_>> {
    let (tile_shape, tv, padding, sparse_dim, kind) = match t {
        Type::PartitionView {
            tile_shape,
            tensor_view,
            padding,
            ..
        } => (tile_shape, tensor_view, padding, None, "partition_view"),
        Type::StridedView {
            tile_shape,
            tensor_view,
            padding,
            ..
        } => (tile_shape, tensor_view, padding, None, "strided_view"),
        Type::GatherScatterView {
            tile_shape,
            tensor_view,
            sparse_dim,
            padding,
        } => (
            tile_shape,
            tensor_view,
            padding,
            Some(*sparse_dim as usize),
            "gather_scatter_view",
        ),
        _ => return None,
    };
    let (elem, ptr_attr) = match &**tv {
        Type::TensorView { elem, attr, .. } => (&**elem, *attr),
        _ => return None,
    };
    Some(ViewInfo {
        tile_shape: tile_shape.iter().map(|&d| d as i64).collect(),
        elem,
        padding: *padding,
        sparse_dim,
        kind,
        ptr_attr,
    })
}

/// Names of the pointer attribute values (13.4+): `ptr<T, <multicast>>` is what multimem ops need.
pub const PTR_ATTR_NAMES: [&str; 3] = ["none", "unicast", "multicast"];

/// The pointer attribute byte of `ptr<T, attr>` (13.4+), typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtrAttr {
    None = 0,
    Unicast = 1,
    Multicast = 2,
}

impl PtrAttr {
    pub fn from_u8(v: u8) -> Option<PtrAttr> {
        match v {
            0 => Some(PtrAttr::None),
            1 => Some(PtrAttr::Unicast),
            2 => Some(PtrAttr::Multicast),
            _ => None,
        }
    }
    /// Text spelling (as in [`PTR_ATTR_NAMES`]).
    pub fn name(self) -> &'static str {
        PTR_ATTR_NAMES[self as usize]
    }
}

fn ptr_attr_ok(attr: Option<u8>, t: &Type) -> Result<(), String> {
    match attr {
        Some(a) if a as usize >= PTR_ATTR_NAMES.len() => Err(format!(
            "pointer attribute {a} is unknown (0 none, 1 unicast, 2 multicast): {}",
            tt(t)
        )),
        _ => Ok(()),
    }
}

/// The pointer attribute of a tile of pointers.
pub fn pointer_attr(t: &Type) -> Option<u8> {
    match t {
        Type::Tile { elem, .. } => match &**elem {
            Type::Pointer { attr, .. } => *attr,
            _ => None,
        },
        _ => None,
    }
}

/// Check that a type is well formed on its own.
pub fn type_ok(t: &Type) -> Result<(), String> {
    match t {
        Type::Scalar(_) | Type::Token | Type::Preview(_) => Ok(()),
        Type::Pointer { pointee, attr } => match **pointee {
            Type::Scalar(_) => ptr_attr_ok(*attr, t),
            _ => Err(format!(
                "pointer to a non-scalar type is not allowed: {}",
                tt(t)
            )),
        },
        Type::Tile { elem, shape } => {
            match &**elem {
                Type::Scalar(_) => {}
                Type::Pointer { .. } => type_ok(elem)?,
                _ => {
                    return Err(format!(
                        "tile element must be a scalar or a pointer: {}",
                        tt(t)
                    ));
                }
            }
            tile_dims_ok(shape).map_err(|m| format!("{m} in {}", tt(t)))?;
            if matches!(**elem, Type::Scalar(ScalarType::F4E2M1FN))
                && (shape.is_empty() || shape.iter().all(|d| d % 2 != 0))
            {
                return Err(format!(
                    "f4E2M1FN tiles need an even number of elements: {}",
                    tt(t)
                ));
            }
            Ok(())
        }
        Type::TensorView {
            elem,
            shape,
            strides,
            attr,
        } => {
            ptr_attr_ok(*attr, t)?;
            if !matches!(**elem, Type::Scalar(_)) {
                return Err(format!("tensor_view element must be a scalar: {}", tt(t)));
            }
            if shape.len() != strides.len() {
                return Err(format!(
                    "tensor_view shape has rank {} but strides have rank {}: {}",
                    shape.len(),
                    strides.len(),
                    tt(t)
                ));
            }
            if shape.iter().chain(strides).any(|&d| d <= 0 && d != DYNAMIC) {
                return Err(format!(
                    "tensor_view extents and strides must be positive or dynamic: {}",
                    tt(t)
                ));
            }
            Ok(())
        }
        Type::PartitionView {
            tile_shape,
            tensor_view,
            dim_map,
            padding,
        } => {
            partition_like(t, tile_shape, tensor_view, *padding)?;
            dim_map_ok(t, tile_shape.len(), dim_map)
        }
        Type::StridedView {
            tile_shape,
            traversal_strides,
            tensor_view,
            dim_map,
            padding,
        } => {
            partition_like(t, tile_shape, tensor_view, *padding)?;
            dim_map_ok(t, tile_shape.len(), dim_map)?;
            if traversal_strides.len() != tile_shape.len()
                || traversal_strides.iter().any(|&s| s <= 0)
            {
                return Err(format!(
                    "strided_view needs one positive traversal stride per tile dimension: {}",
                    tt(t)
                ));
            }
            Ok(())
        }
        Type::GatherScatterView {
            tile_shape,
            tensor_view,
            sparse_dim,
            padding,
        } => {
            partition_like(t, tile_shape, tensor_view, *padding)?;
            if *sparse_dim as usize >= tile_shape.len() {
                return Err(format!(
                    "sparse_dim {sparse_dim} is outside the view's rank {}: {}",
                    tile_shape.len(),
                    tt(t)
                ));
            }
            Ok(())
        }
        Type::Function { params, results } => params.iter().chain(results).try_for_each(type_ok),
    }
}

fn tile_dims_ok(shape: &[i64]) -> Result<(), String> {
    let mut n: i64 = 1;
    for &d in shape {
        if d <= 0 || (d & (d - 1)) != 0 {
            return Err(format!(
                "tile dimensions must be positive powers of two, got {shape:?}"
            ));
        }
        n = n.saturating_mul(d);
    }
    if n > MAX_TILE_ELEMENTS {
        return Err(format!(
            "tile of {n} elements exceeds the maximum of {MAX_TILE_ELEMENTS}"
        ));
    }
    Ok(())
}

fn partition_like(
    t: &Type,
    tile: &[i32],
    tv: &Type,
    padding: Option<Padding>,
) -> Result<(), String> {
    let Type::TensorView { elem, shape, .. } = tv else {
        return Err(format!("view must wrap a tensor_view: {}", tt(t)));
    };
    type_ok(tv)?;
    if tile.is_empty() {
        return Err(format!("view tile shape must not be empty: {}", tt(t)));
    }
    if tile.len() != shape.len() {
        return Err(format!(
            "view tile rank {} differs from tensor_view rank {}: {}",
            tile.len(),
            shape.len(),
            tt(t)
        ));
    }
    let tile64: Vec<i64> = tile.iter().map(|&d| d as i64).collect();
    tile_dims_ok(&tile64).map_err(|m| format!("{m} in {}", tt(t)))?;
    if let Some(p) = padding
        && p != Padding::Zero
        && !matches!(**elem, Type::Scalar(s) if s.is_float())
    {
        return Err(format!(
            "padding_value {} needs a float element type: {}",
            p.name(),
            tt(t)
        ));
    }
    Ok(())
}

fn dim_map_ok(t: &Type, rank: usize, dim_map: &[i32]) -> Result<(), String> {
    let mut seen = vec![false; rank];
    if dim_map.len() != rank {
        return Err(format!(
            "dim_map must map all {rank} tile dimensions: {}",
            tt(t)
        ));
    }
    for &d in dim_map {
        if d < 0 || d as usize >= rank || seen[d as usize] {
            return Err(format!(
                "dim_map must be a permutation of 0..{rank}: {}",
                tt(t)
            ));
        }
        seen[d as usize] = true;
    }
    Ok(())
}

/// The first bytecode version that can carry `t` (and whether it needs the preview flag).
pub fn type_since(t: &Type) -> Version {
    match t {
        Type::Scalar(s) => s.since(),
        Type::Pointer { pointee, attr } => {
            let v = type_since(pointee);
            if attr.is_some() { v.max(V13_4) } else { v }
        }
        Type::Tile { elem, .. } => type_since(elem),
        Type::TensorView { elem, attr, .. } => {
            let v = type_since(elem);
            if attr.is_some() { v.max(V13_4) } else { v }
        }
        Type::PartitionView { tensor_view, .. } => type_since(tensor_view),
        Type::StridedView { tensor_view, .. } | Type::GatherScatterView { tensor_view, .. } => {
            type_since(tensor_view).max(V13_3)
        }
        Type::Token => crate::version::V13_1,
        Type::Function { params, results } => params
            .iter()
            .chain(results)
            .map(type_since)
            .max()
            .unwrap_or(crate::version::V13_1),
        Type::Preview(_) => V13_5,
    }
}
