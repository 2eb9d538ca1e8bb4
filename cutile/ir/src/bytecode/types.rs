//! Type encodings (§1.5): interning a [`Type`] into the writer's Type table (components first, as cuTile does),
//! and decoding the reader's Type table, including the pre-13.3 partition-view layout and the 13.4 pointer and
//! tensor-view flags.

use super::MAX_TYPE_DEPTH;
use super::error::{ReadError, WriteError};
use super::tables::{Budget, Item};
use super::varint::{Cursor, write_i32_list, write_i64_list, write_varint};
use super::write::Writer;
use crate::types::{Padding, PreviewType, ScalarType, Type};
use crate::version::*;

mod tag {
    pub const POINTER: u8 = 0x0C;
    pub const TILE: u8 = 0x0D;
    pub const TENSOR_VIEW: u8 = 0x0E;
    pub const PARTITION_VIEW: u8 = 0x0F;
    pub const FUNCTION: u8 = 0x10;
    pub const TOKEN: u8 = 0x11;
    pub const GATHER_SCATTER_VIEW: u8 = 0x14;
    pub const STRIDED_VIEW: u8 = 0x15;
}

fn preview_from_tag(t: u8) -> Option<PreviewType> {
    Some(match t {
        211 => PreviewType::Datatype,
        212 => PreviewType::Shape,
        213 => PreviewType::String,
        214 => PreviewType::Index,
        215 => PreviewType::None,
        _ => return None,
    })
}

/// Text-ish name of a type for error messages.
pub(crate) fn describe(ty: &Type) -> String {
    match ty {
        Type::Scalar(s) => s.name().to_string(),
        Type::Pointer { .. } => "ptr".into(),
        Type::Tile { .. } => "tile".into(),
        Type::TensorView { .. } => "tensor_view".into(),
        Type::PartitionView { .. } => "partition_view".into(),
        Type::GatherScatterView { .. } => "gather_scatter_view".into(),
        Type::StridedView { .. } => "strided_view".into(),
        Type::Token => "token".into(),
        Type::Function { .. } => "function type".into(),
        Type::Preview(p) => format!("preview type {}", p.tag()),
    }
}

impl Writer<'_> {
    /// The Type-table id of `ty`, interning its components first.
    pub(crate) fn type_id(&mut self, ty: &Type) -> Result<u32, WriteError> {
        let v = self.version;
        let mut b = vec![];
        match ty {
            Type::Scalar(s) => {
                self.require(s.since(), || format!("type {}", s.name()))?;
                write_varint(&mut b, s.tag() as u64);
            }
            Type::Pointer { pointee, attr } => {
                let p = self.type_id(pointee)?;
                b.push(tag::POINTER);
                self.ptr_attr_flags(&mut b, *attr, "ptr")?;
                write_varint(&mut b, p as u64);
                b.extend(attr.filter(|_| v >= V13_4));
            }
            Type::Tile { elem, shape } => {
                let e = self.type_id(elem)?;
                b.push(tag::TILE);
                write_varint(&mut b, e as u64);
                write_i64_list(&mut b, shape);
            }
            Type::TensorView {
                elem,
                shape,
                strides,
                attr,
            } => {
                let e = self.type_id(elem)?;
                b.push(tag::TENSOR_VIEW);
                self.ptr_attr_flags(&mut b, *attr, "tensor_view")?;
                write_varint(&mut b, e as u64);
                write_i64_list(&mut b, shape);
                write_i64_list(&mut b, strides);
                b.extend(attr.filter(|_| v >= V13_4));
            }
            Type::PartitionView {
                tile_shape,
                tensor_view,
                dim_map,
                padding,
            } => {
                let tv = self.type_id(tensor_view)?;
                b.push(tag::PARTITION_VIEW);
                if v >= V13_3 {
                    write_varint(&mut b, padding.is_some() as u64);
                }
                write_i32_list(&mut b, tile_shape);
                write_varint(&mut b, tv as u64);
                write_i32_list(&mut b, dim_map);
                if v < V13_3 {
                    write_varint(&mut b, padding.is_some() as u64);
                }
                b.extend(padding.map(|p| p as u8));
            }
            Type::GatherScatterView {
                tile_shape,
                tensor_view,
                sparse_dim,
                padding,
            } => {
                self.require(V13_3, || "type gather_scatter_view".into())?;
                let tv = self.type_id(tensor_view)?;
                b.push(tag::GATHER_SCATTER_VIEW);
                write_varint(&mut b, padding.is_some() as u64);
                write_i32_list(&mut b, tile_shape);
                write_varint(&mut b, tv as u64);
                write_varint(&mut b, *sparse_dim);
                b.extend(padding.map(|p| p as u8));
            }
            Type::StridedView {
                tile_shape,
                traversal_strides,
                tensor_view,
                dim_map,
                padding,
            } => {
                self.require(V13_3, || "type strided_view".into())?;
                let tv = self.type_id(tensor_view)?;
                b.push(tag::STRIDED_VIEW);
                write_varint(&mut b, padding.is_some() as u64);
                write_i32_list(&mut b, tile_shape);
                write_i32_list(&mut b, traversal_strides);
                write_varint(&mut b, tv as u64);
                write_i32_list(&mut b, dim_map);
                b.extend(padding.map(|p| p as u8));
            }
            Type::Token => b.push(tag::TOKEN),
            Type::Function { params, results } => {
                let p = params
                    .iter()
                    .map(|t| self.type_id(t))
                    .collect::<Result<Vec<_>, _>>()?;
                let r = results
                    .iter()
                    .map(|t| self.type_id(t))
                    .collect::<Result<Vec<_>, _>>()?;
                b.push(tag::FUNCTION);
                for ids in [p, r] {
                    write_varint(&mut b, ids.len() as u64);
                    for id in ids {
                        write_varint(&mut b, id as u64);
                    }
                }
            }
            Type::Preview(p) => {
                self.note_preview(|| format!("preview type tag {}", p.tag()))?;
                write_varint(&mut b, p.tag() as u64);
            }
        }
        Ok(self.types.intern(b))
    }

    /// 13.4+: the optional-flags varint of pointer and tensor_view (bit0 = ptrAttr byte follows).
    fn ptr_attr_flags(
        &self,
        b: &mut Vec<u8>,
        attr: Option<u8>,
        what: &str,
    ) -> Result<(), WriteError> {
        if self.version >= V13_4 {
            write_varint(b, attr.is_some() as u64);
        } else if attr.is_some() {
            self.require(V13_4, || format!("the pointer attribute of a {what} type"))?;
        }
        Ok(())
    }
}

/// The decoded Type table. Types are trees, so each reference clones one; every clone is charged to the budget
/// by its weight (nodes plus list elements), so that cost follows memory.
#[derive(Debug)]
pub(crate) struct TypeTable {
    types: Vec<(Type, u64)>,
}

impl TypeTable {
    /// A copy of type `id`, or a message if the id is out of range or the budget is exhausted.
    pub(crate) fn get(&self, id: u64, budget: &mut Budget) -> Result<Type, String> {
        let (t, nodes) = usize::try_from(id)
            .ok()
            .and_then(|i| self.types.get(i))
            .ok_or_else(|| format!("type id {id} is out of range ({} types)", self.types.len()))?;
        budget.charge(*nodes)?;
        Ok(t.clone())
    }
}

enum Slot {
    Pending,
    InProgress,
    Done(Type, u64),
}

struct TypeDecoder<'a, 'b> {
    items: &'b [Item<'a>],
    slots: Vec<Slot>,
    version: Version,
    preview: bool,
    budget: &'b mut Budget,
}

/// Decode every item of the Type table. Items may refer to later items (followed up to a fixed depth); cycles
/// are errors.
pub(crate) fn decode_type_table(
    items: &[Item<'_>],
    version: Version,
    preview: bool,
    budget: &mut Budget,
) -> Result<TypeTable, ReadError> {
    let mut d = TypeDecoder {
        items,
        slots: (0..items.len()).map(|_| Slot::Pending).collect(),
        version,
        preview,
        budget,
    };
    for i in 0..items.len() {
        if matches!(d.slots[i], Slot::Pending) {
            d.decode(i, 0)?;
        }
    }
    let types = d
        .slots
        .into_iter()
        .map(|s| match s {
            Slot::Done(t, n) => (t, n),
            // Every slot was decoded above; keep a harmless placeholder rather than panic.
            _ => (Type::Token, 1),
        })
        .collect();
    Ok(TypeTable { types })
}

impl TypeDecoder<'_, '_> {
    /// Resolve a reference read at `at` from inside another item.
    fn resolve(
        &mut self,
        c: &Cursor<'_>,
        at: usize,
        id: u64,
        depth: u32,
    ) -> Result<(Type, u64), ReadError> {
        let idx = usize::try_from(id)
            .ok()
            .filter(|&i| i < self.slots.len())
            .ok_or_else(|| {
                c.err_at(
                    at,
                    format!("type id {id} is out of range ({} types)", self.slots.len()),
                )
            })?;
        if matches!(self.slots[idx], Slot::Pending) {
            if depth >= MAX_TYPE_DEPTH {
                return Err(c.err_at(at, "type references nest too deeply"));
            }
            self.decode(idx, depth + 1)?;
        }
        match &self.slots[idx] {
            Slot::Done(t, n) => {
                self.budget.charge(*n).map_err(|m| c.err_at(at, m))?;
                Ok((t.clone(), *n))
            }
            _ => Err(c.err_at(at, format!("type {idx} refers to itself"))),
        }
    }

    fn child(&mut self, c: &mut Cursor<'_>, depth: u32) -> Result<(Type, u64), ReadError> {
        let at = c.offset();
        let id = c.varint()?;
        self.resolve(c, at, id, depth)
    }

    fn padding(c: &mut Cursor<'_>, present: bool) -> Result<Option<Padding>, ReadError> {
        if !present {
            return Ok(None);
        }
        let at = c.offset();
        let b = c.u8()?;
        Padding::from_u8(b)
            .map(Some)
            .ok_or_else(|| c.err_at(at, format!("unknown padding value {b}")))
    }

    /// Optional-flags varint: only bit 0 is defined.
    fn flags(c: &mut Cursor<'_>) -> Result<bool, ReadError> {
        let at = c.offset();
        match c.varint()? {
            0 => Ok(false),
            1 => Ok(true),
            f => Err(c.err_at(at, format!("unknown optional-flags bits {f:#x}"))),
        }
    }

    fn ptr_attr(&self, c: &mut Cursor<'_>, present: bool) -> Result<Option<u8>, ReadError> {
        Ok(if present { Some(c.u8()?) } else { None })
    }

    fn decode(&mut self, idx: usize, depth: u32) -> Result<(), ReadError> {
        self.slots[idx] = Slot::InProgress;
        let (base, bytes) = self.items[idx];
        let mut c = Cursor::new(bytes, base);
        let (t, n) = self
            .decode_item(&mut c, depth)
            .map_err(|e| e.within(format!("Type table item {idx}")))?;
        c.expect_end("the type")
            .map_err(|e| e.within(format!("Type table item {idx}")))?;
        self.slots[idx] = Slot::Done(t, n);
        Ok(())
    }

    fn decode_item(&mut self, c: &mut Cursor<'_>, depth: u32) -> Result<(Type, u64), ReadError> {
        let v = self.version;
        let at = c.offset();
        // Tags are varints truncated to 8 bits, as the reference reader does.
        let t = c.varint()? as u8;
        let gate = |since: Version, what: &str| -> Result<(), ReadError> {
            if v < since {
                Err(ReadError::new(
                    at,
                    format!("{what} needs bytecode {since}, file is {v}"),
                ))
            } else {
                Ok(())
            }
        };
        if let Some(s) = ScalarType::from_tag(t as u32) {
            gate(s.since(), &format!("type {}", s.name()))?;
            return Ok((Type::Scalar(s), 1));
        }
        let (ty, nodes) = match t {
            tag::TOKEN => (Type::Token, 1),
            tag::POINTER => {
                let has_attr = if v >= V13_4 { Self::flags(c)? } else { false };
                let (p, n) = self.child(c, depth)?;
                let attr = self.ptr_attr(c, has_attr)?;
                (
                    Type::Pointer {
                        pointee: Box::new(p),
                        attr,
                    },
                    n + 1,
                )
            }
            tag::TILE => {
                let (e, n) = self.child(c, depth)?;
                let shape = c.i64_list("tile shape")?;
                let w = n + 1 + shape.len() as u64;
                (
                    Type::Tile {
                        elem: Box::new(e),
                        shape,
                    },
                    w,
                )
            }
            tag::TENSOR_VIEW => {
                let has_attr = if v >= V13_4 { Self::flags(c)? } else { false };
                let (e, n) = self.child(c, depth)?;
                let shape = c.i64_list("tensor_view shape")?;
                let strides = c.i64_list("tensor_view strides")?;
                let attr = self.ptr_attr(c, has_attr)?;
                let w = n + 1 + (shape.len() + strides.len()) as u64;
                (
                    Type::TensorView {
                        elem: Box::new(e),
                        shape,
                        strides,
                        attr,
                    },
                    w,
                )
            }
            tag::PARTITION_VIEW => {
                let unified = v >= V13_3;
                let has_pad = if unified { Self::flags(c)? } else { false };
                let tile_shape = c.i32_list("partition_view tile shape")?;
                let (tv, n) = self.child(c, depth)?;
                let dim_map = c.i32_list("partition_view dim_map")?;
                let has_pad = if unified { has_pad } else { Self::flags(c)? };
                let padding = Self::padding(c, has_pad)?;
                let w = n + 1 + (tile_shape.len() + dim_map.len()) as u64;
                (
                    Type::PartitionView {
                        tile_shape,
                        tensor_view: Box::new(tv),
                        dim_map,
                        padding,
                    },
                    w,
                )
            }
            tag::GATHER_SCATTER_VIEW => {
                gate(V13_3, "type gather_scatter_view")?;
                let has_pad = Self::flags(c)?;
                let tile_shape = c.i32_list("gather_scatter_view tile shape")?;
                let (tv, n) = self.child(c, depth)?;
                let sparse_dim = c.varint()?;
                let padding = Self::padding(c, has_pad)?;
                let w = n + 1 + tile_shape.len() as u64;
                (
                    Type::GatherScatterView {
                        tile_shape,
                        tensor_view: Box::new(tv),
                        sparse_dim,
                        padding,
                    },
                    w,
                )
            }
            tag::STRIDED_VIEW => {
                gate(V13_3, "type strided_view")?;
                let has_pad = Self::flags(c)?;
                let tile_shape = c.i32_list("strided_view tile shape")?;
                let traversal_strides = c.i32_list("strided_view traversal strides")?;
                let (tv, n) = self.child(c, depth)?;
                let dim_map = c.i32_list("strided_view dim_map")?;
                let padding = Self::padding(c, has_pad)?;
                let w = n + 1 + (tile_shape.len() + traversal_strides.len() + dim_map.len()) as u64;
                (
                    Type::StridedView {
                        tile_shape,
                        traversal_strides,
                        tensor_view: Box::new(tv),
                        dim_map,
                        padding,
                    },
                    w,
                )
            }
            tag::FUNCTION => {
                let mut nodes = 1;
                let mut lists = [vec![], vec![]];
                for (k, list) in lists.iter_mut().enumerate() {
                    let what = if k == 0 { "parameter" } else { "result" };
                    let count = c.count(1, what)?;
                    for _ in 0..count {
                        let (t, n) = self.child(c, depth)?;
                        nodes += n;
                        list.push(t);
                    }
                }
                let [params, results] = lists;
                (Type::Function { params, results }, nodes)
            }
            _ => match preview_from_tag(t) {
                Some(p) if self.preview => (Type::Preview(p), 1),
                Some(_) => {
                    return Err(c.err_at(
                        at,
                        format!("preview type tag {t} in a file without the preview flag"),
                    ));
                }
                None => {
                    return Err(c.err_at(at, format!("unknown or unsupported type tag {t}")));
                }
            },
        };
        Ok((ty, nodes))
    }
}
