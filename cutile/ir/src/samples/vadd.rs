//! `c = a + b` over 1-d arrays, one tile of `tile` elements per block.

use crate::builder::{ArraySpec, BuildError, ModuleBuilder, kernel_params};
use crate::ir::Module;
use crate::types::{Padding, ScalarType};

/// Entry `vector_add(a, b, c)`: three 1-d arrays of `elem` (9 parameters). Grid: `ceil(n / tile)` × 1 × 1;
/// block `i` handles elements `[i·tile, (i+1)·tile)`, out-of-range elements are not stored.
pub fn vector_add(tile: i64, elem: ScalarType) -> Result<Module, BuildError> {
    use ScalarType::*;
    let t = super::check_tile("vector_add", "tile", tile)?;
    super::check_elem(
        "vector_add",
        elem,
        &[F16, BF16, F32, F64, I8, I16, I32, I64],
    )?;
    let arr = ArraySpec::row_major(elem, 1);
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("vector_add", &kernel_params(&[arr, arr, arr], &[]))?;
    let tok = f.make_token()?;
    let n = arr.param_count();
    let (a, b, c) = (
        f.bind_array(&arr, 0)?,
        f.bind_array(&arr, n)?,
        f.bind_array(&arr, 2 * n)?,
    );
    let [bx, _, _] = f.get_tile_block_id()?;
    let pad = Some(Padding::Zero);
    let pa = f.make_partition_view(a, &[t], pad)?;
    let pb = f.make_partition_view(b, &[t], pad)?;
    let pc = f.make_partition_view(c, &[t], None)?;
    let (x, _) = f.load_view_tko(pa, &[bx], Some(tok))?;
    let (y, _) = f.load_view_tko(pb, &[bx], Some(tok))?;
    let z = if elem.is_float() {
        f.addf(x, y)?
    } else {
        f.addi(x, y)?
    };
    f.store_view_tko(z, pc, &[bx], Some(tok))?;
    f.finish()?;
    Ok(m.finish())
}
