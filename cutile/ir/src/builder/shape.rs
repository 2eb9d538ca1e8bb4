//! Shape ops: broadcast, reshape, permute, cat, extract, insert, iota, pack/unpack and pointer offsets.

use crate::ir::{OpAttr, ValueId};
use crate::schema::Opcode;
use crate::types::{ScalarType, Type};
use crate::verify::text::type_text;

use super::arith::{positional, set_attr};
use super::error::BuildError;
use super::function::FunctionBuilder;

impl FunctionBuilder<'_> {
    fn reshaped(&self, v: ValueId, shape: &[i64], code: Opcode) -> Result<Type, BuildError> {
        let t = self.ty(v)?;
        t.with_shape(shape).ok_or_else(|| {
            BuildError::op(code, format!("source must be a tile, got {}", type_text(t)))
        })
    }

    /// Broadcast to `shape` (same rank; each source dimension equals the target or is 1).
    pub fn broadcast(&mut self, v: ValueId, shape: &[i64]) -> Result<ValueId, BuildError> {
        let ty = self.reshaped(v, shape, Opcode::Broadcast)?;
        self.emit1(positional(Opcode::Broadcast, &[v]), ty)
    }

    /// Broadcast NumPy-style: prepend unit dimensions with a reshape if the rank is lower, then broadcast.
    /// Returns `v` itself when it already has `shape`.
    pub fn broadcast_to(&mut self, v: ValueId, shape: &[i64]) -> Result<ValueId, BuildError> {
        let t = self.ty(v)?;
        let cur = t
            .tile_shape()
            .ok_or_else(|| {
                BuildError::op(
                    Opcode::Broadcast,
                    format!("source must be a tile, got {}", type_text(t)),
                )
            })?
            .to_vec();
        if cur == shape {
            return Ok(v);
        }
        if cur.len() > shape.len() {
            return Err(BuildError::op(
                Opcode::Broadcast,
                format!(
                    "cannot broadcast {} to the lower rank shape {shape:?}",
                    type_text(t)
                ),
            ));
        }
        let mut v = v;
        if cur.len() < shape.len() {
            let mut padded = vec![1; shape.len() - cur.len()];
            padded.extend(&cur);
            v = self.reshape(v, &padded)?;
            if padded == shape {
                return Ok(v);
            }
        }
        self.broadcast(v, shape)
    }

    /// Reshape to `shape` (same element count).
    pub fn reshape(&mut self, v: ValueId, shape: &[i64]) -> Result<ValueId, BuildError> {
        let ty = self.reshaped(v, shape, Opcode::Reshape)?;
        self.emit1(positional(Opcode::Reshape, &[v]), ty)
    }

    /// Permute dimensions: result dimension `i` is source dimension `perm[i]`.
    pub fn permute(&mut self, v: ValueId, perm: &[i32]) -> Result<ValueId, BuildError> {
        let t = self.ty(v)?;
        let sh = t.tile_shape().unwrap_or(&[]);
        let new: Option<Vec<i64>> = perm
            .iter()
            .map(|&p| usize::try_from(p).ok().and_then(|p| sh.get(p).copied()))
            .collect();
        let new = new.ok_or_else(|| {
            BuildError::op(
                Opcode::Permute,
                format!("permutation {perm:?} does not fit {}", type_text(t)),
            )
        })?;
        let ty = self.reshaped(v, &new, Opcode::Permute)?;
        let mut op = positional(Opcode::Permute, &[v]);
        set_attr(&mut op, "permutation", OpAttr::I32Array(perm.to_vec()))?;
        self.emit1(op, ty)
    }

    /// Concatenate along `dim`.
    pub fn cat(&mut self, a: ValueId, b: ValueId, dim: usize) -> Result<ValueId, BuildError> {
        let (ta, tb) = (self.ty(a)?, self.ty(b)?);
        let (sa, sb) = match (ta.tile_shape(), tb.tile_shape()) {
            (Some(x), Some(y)) if dim < x.len() && dim < y.len() => (x, y),
            _ => {
                return Err(BuildError::op(
                    Opcode::Cat,
                    format!(
                        "cannot concatenate {} and {} along dim {dim}",
                        type_text(ta),
                        type_text(tb)
                    ),
                ));
            }
        };
        let mut sh = sa.to_vec();
        sh[dim] += sb[dim];
        let ty = self.reshaped(a, &sh, Opcode::Cat)?;
        let mut op = positional(Opcode::Cat, &[a, b]);
        set_attr(&mut op, "dim", OpAttr::Int(dim as u64))?;
        self.emit1(op, ty)
    }

    /// The sub-tile of `shape` at tile index `indices` (rank-0 i32 values, in units of `shape`).
    pub fn extract(
        &mut self,
        v: ValueId,
        indices: &[ValueId],
        shape: &[i64],
    ) -> Result<ValueId, BuildError> {
        let ty = self.reshaped(v, shape, Opcode::Extract)?;
        let mut op = positional(Opcode::Extract, &[v]);
        op.operands[1] = indices.to_vec();
        self.emit1(op, ty)
    }

    /// (13.4+) `dest` with the sub-tile at tile index `indices` replaced by `src`.
    pub fn insert(
        &mut self,
        dest: ValueId,
        src: ValueId,
        indices: &[ValueId],
    ) -> Result<ValueId, BuildError> {
        let ty = self.ty(dest)?.clone();
        let mut op = positional(Opcode::Insert, &[src, dest]);
        op.operands[2] = indices.to_vec();
        self.emit1(op, ty)
    }

    /// `[0, 1, …, n-1]` as a 1-d integer tile.
    pub fn iota(&mut self, elem: ScalarType, n: i64) -> Result<ValueId, BuildError> {
        self.emit1(positional(Opcode::Iota, &[]), Type::tile(elem, &[n]))
    }

    /// (13.3+) Pack a rank-1 tile into the i8 tile of the same byte size.
    pub fn pack(&mut self, v: ValueId) -> Result<ValueId, BuildError> {
        let t = self.ty(v)?;
        let bits = match (t.tile_scalar(), t.tile_shape()) {
            (Some(s), Some([n])) => s.bit_width() as i64 * n,
            _ => {
                return Err(BuildError::op(
                    Opcode::Pack,
                    format!("source must be a rank-1 tile, got {}", type_text(t)),
                ));
            }
        };
        self.emit1(
            positional(Opcode::Pack, &[v]),
            Type::tile(ScalarType::I8, &[bits / 8]),
        )
    }

    /// (13.3+) Unpack a rank-1 i8 tile into elements of `to`.
    pub fn unpack(&mut self, v: ValueId, to: ScalarType) -> Result<ValueId, BuildError> {
        let t = self.ty(v)?;
        let n = match t.tile_shape() {
            Some([n]) => *n,
            _ => {
                return Err(BuildError::op(
                    Opcode::Unpack,
                    format!("source must be a rank-1 tile, got {}", type_text(t)),
                ));
            }
        };
        let count = n * 8 / to.bit_width().max(1) as i64;
        self.emit1(positional(Opcode::Unpack, &[v]), Type::tile(to, &[count]))
    }

    /// Advance each pointer by the matching element of the integer tile `off` (in elements).
    pub fn offset(&mut self, ptrs: ValueId, off: ValueId) -> Result<ValueId, BuildError> {
        let ty = self.ty(ptrs)?.clone();
        self.emit1(positional(Opcode::Offset, &[ptrs, off]), ty)
    }
}
