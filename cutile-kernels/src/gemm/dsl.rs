//! Tiled GEMM `C = A · B` with f32 accumulation: one output tile per block (grid = tiles of C), a
//! persistent variant where a fixed grid of blocks strides over the output tiles, a batched variant
//! (grid = batch × tiles), and the tile copy that packs operands with unaligned rows into aligned
//! scratch (and unpacks the product).
//!
//! Every product kernel has two element types: `E`, what the tensors store, and `M`, what the tensor
//! cores multiply. They are equal for f16 and bf16 (the cast is then no op at all); f32 operands are
//! multiplied as `tf32` (rounded to a 10-bit mantissa, f32 accumulation), which is what "f32 GEMM on
//! tensor cores" means on every NVIDIA GPU and why the host API makes it opt-in.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// `c = a @ b` with `a: M x K`, `b: K x N`; block `(i, j)` computes the `BM x BN` tile `(i, j)` of `c`,
    /// accumulating `BM x BK` by `BK x BN` products in f32. Edge tiles are zero-padded.
    #[cutile::entry]
    pub fn gemm<E: ElementType, M: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        c: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (bm, bn, _) = block_id();
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let mut acc = zeros::<f32, S2<BM, BN>>();
        for k in 0..pa.num_tiles(1) {
            acc = mma(
                pa.load((bm, k)).cast::<M>(),
                pb.load((k, bn)).cast::<M>(),
                acc,
            );
        }
        c.store(acc.cast::<E>());
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
    /// tiles `p, p + grid, p + 2·grid, …` in row-major tile order.
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
        c: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let tiles_m = pa.num_tiles(0);
        let tiles_n = pb.num_tiles(1);
        let k_tiles = pa.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let tm = tile / tiles_n;
            let tn = tile % tiles_n;
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in 0..k_tiles {
                acc = mma(
                    pa.load((tm, k)).cast::<M>(),
                    pb.load((k, tn)).cast::<M>(),
                    acc,
                );
            }
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
}
