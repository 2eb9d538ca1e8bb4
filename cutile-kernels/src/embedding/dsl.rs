//! The embedding gather: block `(i, j)` writes tile `(i, j)` (`BM` tokens × `BN` columns) of `out: [T,
//! D]` from rows `ids[i·BM ..]` of `table: [V, D]` (any strides). An id outside `[0, V)` (checked in
//! the index type) writes a row of zeros; nothing is read out of bounds.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// `out[t, :] = table[ids[t], :]`. Grid: the tiles of `out`.
    #[cutile::entry]
    pub fn embedding<E: Float, I: ElementType, const BM: i32, const BN: i32>(
        table: &Tensor<E, S2<DYN, DYN>>,
        ids: &Tensor<I, S1<DYN>>,
        out: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (bi, bj, _) = block_id();
        let rows = iota::<BM>() + bi * BM;
        let valid = rows < ids.dim(0);
        let id = ids.gather(rows, Some(valid), -1);
        let ok = valid
            & (id >= scalar::<I>(0).splat::<S1<BM>>())
            & (id < table.dim(0).cast::<I>().splat::<S1<BM>>());
        let r = select(ok, id, scalar::<I>(0).splat::<S1<BM>>())
            .cast::<i32>()
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, BN>>();
        let cols = (iota::<BN>() + bj * BN)
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<BM, BN>>();
        let m = ok.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BN>>() & (cols < table.dim(1));
        out.store(table.gather((r, cols), Some(m), 0.0));
    }
}
