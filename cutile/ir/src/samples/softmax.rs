//! Row softmax: one row per block, computed in f32.

use crate::attr::Attribute;
use crate::builder::{ArraySpec, BuildError, ModuleBuilder, kernel_params, scalar_attr};
use crate::ir::Module;
use crate::types::{Padding, ScalarType};

/// Entry `row_softmax(x, y)`: two 2-d arrays of `elem` (bf16, f16 or f32; 10 parameters) of equal shape
/// `rows × cols` with `cols ≤ tile_cols`. Grid: `rows` × 1 × 1. The row is loaded with `-inf` padding,
/// converted to f32, max-reduced, shifted, exponentiated, sum-reduced and divided, then converted back and
/// stored.
pub fn row_softmax(tile_cols: i64, elem: ScalarType) -> Result<Module, BuildError> {
    use ScalarType::*;
    let tc = super::check_tile("row_softmax", "tile_cols", tile_cols)?;
    super::check_elem("row_softmax", elem, &[BF16, F16, F32])?;
    let arr = ArraySpec::row_major(elem, 2);
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("row_softmax", &kernel_params(&[arr, arr], &[]))?;
    let tok = f.make_token()?;
    let x = f.bind_array(&arr, 0)?;
    let y = f.bind_array(&arr, arr.param_count())?;
    let [row, _, _] = f.get_tile_block_id()?;
    let zero = f.const_i32(0)?;
    let px = f.make_partition_view(x, &[1, tc], Some(Padding::NegInf))?;
    let py = f.make_partition_view(y, &[1, tc], None)?;
    let (t, _) = f.load_view_tko(px, &[row, zero], Some(tok))?;
    let t = if elem == F32 { t } else { f.ftof(t, F32)? };

    let shape = [1, tile_cols];
    let neg_inf: Attribute = scalar_attr(F32, f64::NEG_INFINITY)?;
    let max = f.reduce(&[t], 1, &[neg_inf], |b, l, r| Ok(vec![b.maxf(l[0], r[0])?]))?[0];
    let max = f.reshape(max, &[1, 1])?;
    let max = f.broadcast(max, &shape)?;
    let shifted = f.subf(t, max)?;
    let e = f.exp(shifted)?;
    let sum = f.reduce(&[e], 1, &[scalar_attr(F32, 0.0)?], |b, l, r| {
        Ok(vec![b.addf(l[0], r[0])?])
    })?[0];
    let sum = f.reshape(sum, &[1, 1])?;
    let sum = f.broadcast(sum, &shape)?;
    let out = f.divf(e, sum)?;
    let out = if elem == F32 { out } else { f.ftof(out, elem)? };
    f.store_view_tko(out, py, &[row, zero], Some(tok))?;
    f.finish()?;
    Ok(m.finish())
}
