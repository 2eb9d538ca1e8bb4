//! `C = A · B` with a loop over K tiles and an mma per step.

use crate::builder::{ArraySpec, BuildError, ModuleBuilder, kernel_params};
use crate::ir::Module;
use crate::types::{Padding, ScalarType};

/// Entry `tiled_matmul(a, b, c)`: `A` is M×K, `B` is K×N and `C` is M×N, all of `in_elem` (15 parameters).
/// Grid: `ceil(M / bm)` × `ceil(N / bn)` × 1; block (x, y) computes the `bm × bn` tile of C at (x, y),
/// accumulating in `acc` over `ceil(K / bk)` steps of zero-padded `bm × bk` and `bk × bn` tiles, then
/// converts to `in_elem` and stores.
///
/// Supported: f16 (acc f16 or f32), bf16, tf32 and f32 (acc f32), f64 (acc f64), f8E4M3FN and f8E5M2 (acc f16
/// or f32), as mmaf allows.
pub fn tiled_matmul(
    bm: i64,
    bn: i64,
    bk: i64,
    in_elem: ScalarType,
    acc: ScalarType,
) -> Result<Module, BuildError> {
    use ScalarType::*;
    let (tm, tn, tk) = (
        super::check_tile("tiled_matmul", "bm", bm)?,
        super::check_tile("tiled_matmul", "bn", bn)?,
        super::check_tile("tiled_matmul", "bk", bk)?,
    );
    super::check_elem(
        "tiled_matmul",
        in_elem,
        &[F16, BF16, TF32, F32, F64, F8E4M3FN, F8E5M2],
    )?;
    super::check_elem("tiled_matmul", acc, &[F16, F32, F64])?;
    let arr = ArraySpec::row_major(in_elem, 2);
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("tiled_matmul", &kernel_params(&[arr, arr, arr], &[]))?;
    let tok = f.make_token()?;
    let n = arr.param_count();
    let (a, b, c) = (
        f.bind_array(&arr, 0)?,
        f.bind_array(&arr, n)?,
        f.bind_array(&arr, 2 * n)?,
    );
    let [bx, by, _] = f.get_tile_block_id()?;

    let pa = f.make_partition_view(a, &[tm, tk], Some(Padding::Zero))?;
    let pb = f.make_partition_view(b, &[tk, tn], Some(Padding::Zero))?;
    let pc = f.make_partition_view(c, &[tm, tn], None)?;
    // The number of K tiles is the second extent of A's tile grid.
    let k_tiles = f.get_index_space_shape(pa)?[1];
    let zero_acc = f.constant(acc, &[bm, bn], 0.0)?;
    let (lo, step) = (f.const_i32(0)?, f.const_i32(1)?);
    let result = f.for_loop(lo, k_tiles, step, &[zero_acc], |f, k, carried| {
        let (ta, _) = f.load_view_tko(pa, &[bx, k], Some(tok))?;
        let (tb, _) = f.load_view_tko(pb, &[k, by], Some(tok))?;
        Ok(vec![f.mmaf(ta, tb, carried[0])?])
    })?[0];
    let out = if acc == in_elem {
        result
    } else {
        f.ftof(result, in_elem)?
    };
    f.store_view_tko(out, pc, &[bx, by], Some(tok))?;
    f.finish()?;
    Ok(m.finish())
}
