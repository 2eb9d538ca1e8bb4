//! Tiled GEMM `C = A · B` with f32 accumulation: one output tile per block (grid = tiles of C), a
//! persistent variant where a fixed grid of blocks strides over the output tiles, a batched variant
//! (grid = batch × tiles), and the tile copy that packs operands with unaligned rows into aligned
//! scratch (and unpacks the product).
//!
//! Every product kernel has two element types: `E`, what the tensors store, and `M`, what the tensor
//! cores multiply. They are equal for f16 and bf16 (the cast is then no op at all); f32 operands are
//! multiplied as `tf32` (rounded to a 10-bit mantissa, f32 accumulation), which is what "f32 GEMM on
//! tensor cores" means on every NVIDIA GPU and why the host API makes it opt-in.
//!
//! The epilogue kernels (`gemm_epilogue`, and split-K's `gemm_partial` + `gemm_reduce`) compute
//! `c = act(a @ b + bias) + residual` in f32 and store it as the output type `O` (which may differ from
//! `E`). What the epilogue does is the compile-time `FLAGS` ([`EPI_BIAS`], [`EPI_RESIDUAL`]) and `ACT`
//! ([`ACT_NONE`] or an activation code of [`crate::activation`]): a specialization traces only what its
//! host call selected. An absent bias or residual is a one-element dummy view the kernel never reads.

use cutile::core::*;

/// `FLAGS` bit of the epilogue kernels: add `bias` (a `[1, N]` view, broadcast over rows).
pub const EPI_BIAS: i32 = 1;
/// `FLAGS` bit of the epilogue kernels: add `residual` (`[M, N]`, any strides) after the activation.
pub const EPI_RESIDUAL: i32 = 2;
/// `ACT` of the epilogue kernels: no activation.
pub const ACT_NONE: i32 = -1;

/// Whether the epilogue kernels start the accumulator from the residual tile instead of adding it
/// after the product: when the residual is the whole epilogue (no bias, no activation), `a @ b +
/// residual` is the same sum, and the residual then needs no registers of its own beside the
/// accumulator's (so such a product takes the persistent 8-warp schedule, on 128x128 tiles:
/// `config::choose_epilogue`).
pub fn residual_in_accumulator(act: i32, flags: i32) -> bool {
    flags == EPI_RESIDUAL && act == ACT_NONE
}

/// The epilogue on an f32 accumulator tile: bias, then the activation (`exact`: no approximate exp or
/// division, for f32 outputs). The residual is added by [`finish_tile`], after this.
pub fn epilogue_math<S: Shape>(
    acc: Tile<f32, S>,
    bias: Option<Tile<f32, S>>,
    act: i32,
    exact: bool,
) -> Tile<f32, S> {
    let mut y = acc;
    if let Some(b) = bias {
        y += b;
    }
    if act != ACT_NONE {
        y = crate::activation::math::forward(act, y, !exact);
    }
    y
}

/// The epilogue of tile `(tm, tn)`: `act(acc + bias) + residual` in f32, cast to `O` (the residual
/// not again when `acc` started from it: `in_acc`, [`residual_in_accumulator`]).
#[allow(clippy::too_many_arguments)]
pub fn finish_tile<
    E: ElementType,
    O: ElementType,
    R: ElementType,
    const BM: i32,
    const BN: i32,
    const ACT: i32,
    const FLAGS: i32,
>(
    acc: Tile<f32, S2<BM, BN>>,
    tm: Scalar<i32>,
    tn: Scalar<i32>,
    bias: &Tensor<E, S2<DYN, DYN>>,
    residual: &Tensor<R, S2<DYN, DYN>>,
    in_acc: bool,
) -> Tile<O, S2<BM, BN>> {
    let b = ((FLAGS & EPI_BIAS) != 0).then(|| {
        bias.partition_padded::<S2<1, BN>>(Padding::Zero)
            .load((0, tn))
            .cast::<f32>()
            .broadcast::<S2<BM, BN>>()
    });
    let exact = O::SCALAR == cutile_ir::ScalarType::F32;
    let mut y = epilogue_math(acc, b, ACT, exact);
    if (FLAGS & EPI_RESIDUAL) != 0 && !in_acc {
        y += residual
            .partition_padded::<S2<BM, BN>>(Padding::Zero)
            .load((tm, tn))
            .cast::<f32>();
    }
    y.cast::<O>()
}

/// Output tile `(tm, tn)` of the `p`-th tile in grouped order: tiles go down `group` tile rows
/// before moving one tile column right (the last band of rows may be shorter), so the blocks in
/// flight at a time share a few row panels of `a` and a few column panels of `b`, which stay in
/// L2 (`group = 1`: row-major).
pub fn grouped_tile(
    p: Scalar<i32>,
    tiles_m: Scalar<i32>,
    tiles_n: Scalar<i32>,
    group: Scalar<i32>,
) -> (Scalar<i32>, Scalar<i32>) {
    let band = group * tiles_n;
    let first = (p / band) * group;
    let rows = (tiles_m - first).min(group);
    let q = p % band;
    (first + q % rows, q / rows)
}

/// `ceil(k / BK)` for an extent `k >= 0`, in i32 arithmetic (no overflow near `i32::MAX`): the K-tile
/// count of the persistent kernels' inner loop, computed once before the tile loop as cuTile's persistent
/// GEMM does (`cdiv(K, tk)`). The partition's `num_tiles` (`get_index_space_shape`) gives the same value,
/// but tileiras re-derives it at its use, inside the K loop: 4 more PTX instructions per K step, 3 more
/// SASS instructions in the consumer's K step at 128x128 on sm_90 (4 at 128x256 over 8 warps;
/// `docs/gemm-ir-diff.md`). The fp8 kernels keep `num_tiles`: there the change was mixed (K steps of the
/// block-scaled and the exact scaled defaults 3 and 1 instructions longer, fast accumulation 3-4 shorter).
pub fn k_tiles<const BK: i32>(k: Scalar<i32>) -> Scalar<i32> {
    k / BK + (k % BK + (BK - 1)) / BK
}

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// `init + Σ_k a[tm, k] @ b[k, tn]` over the first `k_tiles` K tiles, multiplied as `M` with f32
    /// accumulation: the K loop of every single-range product kernel here (`init` zeros, or the
    /// epilogue kernels' residual, [`epilogue_tile`]).
    fn tile_product<
        E: ElementType,
        M: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
    >(
        pa: Partition<E, S2<BM, BK>>,
        pb: Partition<E, S2<BK, BN>>,
        tm: Scalar<i32>,
        tn: Scalar<i32>,
        k_tiles: Scalar<i32>,
        init: Tile<f32, S2<BM, BN>>,
    ) -> Tile<f32, S2<BM, BN>> {
        let mut acc = init;
        for k in 0..k_tiles {
            acc = mma(
                pa.load((tm, k)).cast::<M>(),
                pb.load((k, tn)).cast::<M>(),
                acc,
            );
        }
        acc
    }

    /// `c = a @ b` with `a: M x K`, `b: K x N`; block `p` computes the `BM x BN` tile
    /// [`super::grouped_tile`]`(p)` of `c`, accumulating `BM x BK` by `BK x BN` products in f32. Edge tiles
    /// are zero-padded. Grid: the tile count of `c`.
    #[cutile::entry]
    pub fn gemm<E: ElementType, M: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let (tm, tn) = super::grouped_tile(block_id_x(), pa.num_tiles(0), pb.num_tiles(1), group);
        let k_tiles = pa.num_tiles(1);
        let zero = zeros::<f32, S2<BM, BN>>();
        let acc = tile_product::<E, M, BM, BN, BK>(pa, pb, tm, tn, k_tiles, zero);
        // SAFETY: `grouped_tile` is a bijection of block ids onto the tiles of `c`.
        unsafe { c.store_at((tm, tn), acc.cast::<E>()) };
    }

    /// Batched `c[q] = a[q] @ b[q]` with `a: [B, M, K]`, `b: [B, K, N]`, `c: [B, M, N]` (any strides: a
    /// batch stride of 0 broadcasts an operand over the batch); block `(q, i, j)` computes the `BM x BN`
    /// tile `(i, j)` of `c[q]`, so the grid is the output's tiles `(B, ceil(M / BM), ceil(N / BN))`.
    #[cutile::entry]
    pub fn gemm_batched<
        E: ElementType,
        M: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
    >(
        a: &Tensor<E, S3<DYN, DYN, DYN>>,
        b: &Tensor<E, S3<DYN, DYN, DYN>>,
        c: &mut Tensor<E, S3<1, BM, BN>>,
    ) {
        let (q, bm, bn) = block_id();
        let pa = a.partition_padded::<S3<1, BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S3<1, BK, BN>>(Padding::Zero);
        let mut acc = zeros::<f32, S2<BM, BN>>();
        for k in 0..pa.num_tiles(2) {
            let ta = pa.load((q, bm, k)).reshape::<S2<BM, BK>>();
            let tb = pb.load((q, k, bn)).reshape::<S2<BK, BN>>();
            acc = mma(ta.cast::<M>(), tb.cast::<M>(), acc);
        }
        c.store(acc.cast::<E>().reshape::<S3<1, BM, BN>>());
    }

    /// Persistent `c = a @ b`: launch with a fixed grid (e.g. one block per SM); block `p` computes output
    /// tiles `p, p + grid, p + 2·grid, …` in the order of [`super::grouped_tile`].
    #[cutile::entry]
    pub fn gemm_persistent<
        E: ElementType,
        M: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
    >(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let tiles_m = pa.num_tiles(0);
        let tiles_n = pb.num_tiles(1);
        let k_tiles = super::k_tiles::<BK>(a.dim(1));
        let (nblocks, _, _) = num_blocks();
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = super::grouped_tile(tile, tiles_m, tiles_n, group);
            let zero = zeros::<f32, S2<BM, BN>>();
            let acc = tile_product::<E, M, BM, BN, BK>(pa, pb, tm, tn, k_tiles, zero);
            // SAFETY: tile indices `p + i·grid` are distinct across blocks, so no two blocks write the
            // same output tile.
            unsafe { c.store_at((tm, tn), acc.cast::<E>()) };
        }
    }

    /// `dst = src`, block `(i, j)` copying the `BM x BN` tile `(i, j)` (edge tiles clipped). The GEMM
    /// copies an operand whose row stride is no multiple of 16 bytes into aligned scratch (and the
    /// product back out of it), because without that divisibility the product's tile loads and stores
    /// can use neither TMA nor vector accesses (97 µs against cuBLAS's 24 µs at 1000x1023x517 on the
    /// H200).
    #[cutile::entry]
    pub fn copy_tiles<E: ElementType, const BM: i32, const BN: i32>(
        src: &Tensor<E, S2<DYN, DYN>>,
        dst: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (i, j, _) = block_id();
        let t = src
            .partition_padded::<S2<BM, BN>>(Padding::Zero)
            .load((i, j));
        dst.store(t);
    }

    /// Output tile `(tm, tn)` of the epilogue kernels: the product over `k_tiles` K tiles, then
    /// [`super::finish_tile`]. Where the residual is the whole epilogue
    /// ([`super::residual_in_accumulator`]) the accumulator starts from it instead of zeros.
    #[allow(clippy::too_many_arguments)]
    fn epilogue_tile<
        E: ElementType,
        M: MmaOperand<f32>,
        O: ElementType,
        R: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const ACT: i32,
        const FLAGS: i32,
    >(
        pa: Partition<E, S2<BM, BK>>,
        pb: Partition<E, S2<BK, BN>>,
        tm: Scalar<i32>,
        tn: Scalar<i32>,
        k_tiles: Scalar<i32>,
        bias: &Tensor<E, S2<DYN, DYN>>,
        residual: &Tensor<R, S2<DYN, DYN>>,
    ) -> Tile<O, S2<BM, BN>> {
        let in_acc = super::residual_in_accumulator(ACT, FLAGS);
        let init = if in_acc {
            residual
                .partition_padded::<S2<BM, BN>>(Padding::Zero)
                .load((tm, tn))
                .cast::<f32>()
        } else {
            zeros::<f32, S2<BM, BN>>()
        };
        let acc = tile_product::<E, M, BM, BN, BK>(pa, pb, tm, tn, k_tiles, init);
        super::finish_tile::<E, O, R, BM, BN, ACT, FLAGS>(acc, tm, tn, bias, residual, in_acc)
    }

    /// `c = act(a @ b + bias) + residual` (see the module docs), persistent: block `p` computes output
    /// tiles `p, p + grid, …` in the order of [`super::grouped_tile`] (a grid of one block per tile makes it
    /// one tile per block). `bias` is the
    /// `[1, N]` view of the bias vector, `c` of type `O`, `residual` `[M, N]` of type `R`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_epilogue<
        E: ElementType,
        M: MmaOperand<f32>,
        O: ElementType,
        R: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const ACT: i32,
        const FLAGS: i32,
    >(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<E, S2<DYN, DYN>>,
        residual: &Tensor<R, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<O, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let tiles_m = pa.num_tiles(0);
        let tiles_n = pb.num_tiles(1);
        let k_tiles = super::k_tiles::<BK>(a.dim(1));
        let (nblocks, _, _) = num_blocks();
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = super::grouped_tile(tile, tiles_m, tiles_n, group);
            let out = epilogue_tile::<E, M, O, R, BM, BN, BK, ACT, FLAGS>(
                pa, pb, tm, tn, k_tiles, bias, residual,
            );
            // SAFETY: tile indices `p + i·grid` are distinct across blocks.
            unsafe { c.store_at((tm, tn), out) };
        }
    }

    /// [`gemm_epilogue`] with one output tile per block: block `p` computes tile
    /// [`super::grouped_tile`]`(p)`, so the grid is the output's tile count. The host takes this form whenever
    /// every tile has its own block: without the tile loop's index arithmetic it is the faster one
    /// (H200, `16 x 8192 x 8192` bf16, 64 blocks either way: 48 µs against 55 µs).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_epilogue_tiles<
        E: ElementType,
        M: MmaOperand<f32>,
        O: ElementType,
        R: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const ACT: i32,
        const FLAGS: i32,
    >(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<E, S2<DYN, DYN>>,
        residual: &Tensor<R, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<O, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let (tm, tn) = super::grouped_tile(block_id_x(), pa.num_tiles(0), pb.num_tiles(1), group);
        let k_tiles = pa.num_tiles(1);
        let out = epilogue_tile::<E, M, O, R, BM, BN, BK, ACT, FLAGS>(
            pa, pb, tm, tn, k_tiles, bias, residual,
        );
        // SAFETY: `grouped_tile` is a bijection of block ids onto the tiles of `c`.
        unsafe { c.store_at((tm, tn), out) };
    }

    /// Split-K partial products: block `(i, j, s)` accumulates the `s`-th of `grid.z` equal ranges of
    /// K tiles for output tile `(i, j)` and stores the f32 result as tile `(s, i, j)` of `part`
    /// (`[S, M, N]`). No atomics: `gemm_reduce` sums the partials in a fixed order.
    #[cutile::entry]
    pub fn gemm_partial<
        E: ElementType,
        M: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
    >(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        part: &mut Tensor<f32, S3<1, BM, BN>>,
    ) {
        let (tm, tn, split) = block_id();
        let (_, _, splits) = num_blocks();
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let k_tiles = pa.num_tiles(1);
        let per = (k_tiles + splits - 1) / splits;
        let lo = split * per;
        let hi = k_tiles.min(lo + per);
        let mut acc = zeros::<f32, S2<BM, BN>>();
        for k in lo..hi {
            acc = mma(
                pa.load((tm, k)).cast::<M>(),
                pb.load((k, tn)).cast::<M>(),
                acc,
            );
        }
        // SAFETY: tile `(split, tm, tn)` is written by block `(tm, tn, split)` only.
        unsafe { part.store_at((split, tm, tn), acc.reshape::<S3<1, BM, BN>>()) };
    }

    /// Split-K reduction: block `(i, j)` sums tile `(s, i, j)` of `part` over `s = 0, 1, …` in that
    /// order (deterministic) and applies the epilogue, storing tile `(i, j)` of `c`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_reduce<
        E: ElementType,
        O: ElementType,
        R: ElementType,
        const BM: i32,
        const BN: i32,
        const ACT: i32,
        const FLAGS: i32,
    >(
        part: &Tensor<f32, S3<DYN, DYN, DYN>>,
        bias: &Tensor<E, S2<DYN, DYN>>,
        residual: &Tensor<R, S2<DYN, DYN>>,
        c: &mut Tensor<O, S2<BM, BN>>,
    ) {
        let (tm, tn, _) = block_id();
        let pp = part.partition_padded::<S3<1, BM, BN>>(Padding::Zero);
        let mut acc = zeros::<f32, S2<BM, BN>>();
        for s in 0..part.dim(0) {
            acc += pp.load((s, tm, tn)).reshape::<S2<BM, BN>>();
        }
        let out =
            super::finish_tile::<E, O, R, BM, BN, ACT, FLAGS>(acc, tm, tn, bias, residual, false);
        c.store(out);
    }
}
