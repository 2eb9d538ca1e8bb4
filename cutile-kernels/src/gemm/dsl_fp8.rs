//! The fp8 GEMM kernels: `c = scale(a @ b)` with e4m3 or e5m2 operands (`F`), f32 accumulation on the
//! tensor cores and an output of type `O` (bf16 or f32), persistent (block `p` computes output tiles
//! `p, p + grid, …` in the GEMM family's grouped order; a grid of one block per tile makes it one tile
//! per block).
//!
//! - [`kernels::gemm_fp8_scaled`]: one scale per tensor or per row of `a` and column of `b`, applied
//!   once to the f32 accumulator (`acc · sa[row] · sb[col]`); `ROWWISE` selects which.
//! - [`kernels::gemm_fp8_block`]: DeepSeek-style block scales (`sa`: one per row and 128-deep K block,
//!   `sb`: one per 128x128 block of `b`): every 128-deep K step's partial product is scaled by
//!   `sa[row, kb] · sb[kb, col / 128]` and added to the f32 accumulator. `BK = BN = 128`.
//! - [`kernels::gemm_fp8_block_grouped`]: the same product with the scales loaded `G` steps at a time
//!   and each step's column picked on chip.
//!
//! The operands are `[m, k]` and `[k, n]` views of any strides; the fast layout is `a` row-major and
//! `b` column-major (`w.t()` of an `[n, k]` weight), since the fp8 tensor-core product reads both
//! operands K-major.
//!
//! `FAST = 1` multiplies with [`cutile::core::mma_fast_acc`] (Hopper's fast fp8 accumulation,
//! `torch._scaled_mm`'s `use_fast_accum`); `FAST = 0` with the exactly accumulating
//! [`cutile::core::mma`].

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// `a @ b + acc`, with fast accumulation when `FAST != 0`.
    fn product<F: Fp8, const BM: i32, const BN: i32, const BK: i32, const FAST: i32>(
        a: Tile<F, S2<BM, BK>>,
        b: Tile<F, S2<BK, BN>>,
        acc: Tile<f32, S2<BM, BN>>,
    ) -> Tile<f32, S2<BM, BN>> {
        if FAST != 0 {
            mma_fast_acc(a, b, acc)
        } else {
            mma(a, b, acc)
        }
    }

    /// `c = (a @ b) · sa · sb` with `a: [M, K]`, `b: [K, N]` of fp8 type `F`. `ROWWISE = 0`: `sa` and
    /// `sb` are `[1, 1]` views of one f32 each, loaded once per block before the tile loop;
    /// `ROWWISE = 1`: `sa` is `[M, 1]` (one per row of `a`), `sb` `[1, N]` (one per column of `b`),
    /// applied as an outer product. `LAT > 0` puts tileiras's `latency` hint on the operand loads,
    /// which sizes the operand pipeline (`docs/toolchain-findings.md`).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_fp8_scaled<
        F: Fp8,
        O: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const ROWWISE: i32,
        const FAST: i32,
        const LAT: i32,
    >(
        a: &Tensor<F, S2<DYN, DYN>>,
        b: &Tensor<F, S2<DYN, DYN>>,
        sa: &Tensor<f32, S2<DYN, DYN>>,
        sb: &Tensor<f32, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<O, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let tiles_m = pa.num_tiles(0);
        let tiles_n = pb.num_tiles(1);
        let k_tiles = pa.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        let hints = if LAT > 0 {
            Hints::with_latency(LAT)
        } else {
            Hints::default()
        };
        // One scale per tensor: loaded once, so a tile's epilogue does not wait on its load.
        let tensor_scale = if ROWWISE == 0 {
            Some(
                sa.partition_padded::<S2<1, 1>>(Padding::Zero).load((0, 0))
                    * sb.partition_padded::<S2<1, 1>>(Padding::Zero).load((0, 0)),
            )
        } else {
            None
        };
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = crate::gemm::dsl::grouped_tile(tile, tiles_m, tiles_n, group);
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in 0..k_tiles {
                acc = product::<F, BM, BN, BK, FAST>(
                    pa.load_with((tm, k), hints),
                    pb.load_with((k, tn), hints),
                    acc,
                );
            }
            let scaled = if let Some(s) = tensor_scale {
                acc * s.broadcast::<S2<BM, BN>>()
            } else {
                let ra = sa
                    .partition_padded::<S2<BM, 1>>(Padding::Zero)
                    .load((tm, 0))
                    .broadcast::<S2<BM, BN>>();
                let rb = sb
                    .partition_padded::<S2<1, BN>>(Padding::Zero)
                    .load((0, tn))
                    .broadcast::<S2<BM, BN>>();
                acc * ra * rb
            };
            // SAFETY: tile indices `p + i·grid` are distinct across blocks.
            unsafe { c.store_at((tm, tn), scaled.cast::<O>()) };
        }
    }

    /// Block-scaled `c = Σ_kb (a[:, kb] @ b[kb, :]) · sa[:, kb] · sb[kb, :/128]` with `a: [M, K]`,
    /// `b: [K, N]` of fp8 type `F`, `sa: [M, K/128]`, `sb: [K/128, ceil(N/128)]` (f32), K a multiple of
    /// 128. `BK` and `BN` must be 128 (one scale block per K step and per output column tile).
    #[cutile::entry]
    pub fn gemm_fp8_block<
        F: Fp8,
        O: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const FAST: i32,
    >(
        a: &Tensor<F, S2<DYN, DYN>>,
        b: &Tensor<F, S2<DYN, DYN>>,
        sa: &Tensor<f32, S2<DYN, DYN>>,
        sb: &Tensor<f32, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<O, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let psa = sa.partition_padded::<S2<BM, 1>>(Padding::Zero);
        let psb = sb.partition_padded::<S2<1, 1>>(Padding::Zero);
        let tiles_m = pa.num_tiles(0);
        let tiles_n = pb.num_tiles(1);
        let k_tiles = pa.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = crate::gemm::dsl::grouped_tile(tile, tiles_m, tiles_n, group);
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in 0..k_tiles {
                let part = product::<F, BM, BN, BK, FAST>(
                    pa.load((tm, k)),
                    pb.load((k, tn)),
                    zeros::<f32, S2<BM, BN>>(),
                );
                let s = psa.load((tm, k)) * psb.load((k, tn)).broadcast::<S2<BM, 1>>();
                acc += part * s.broadcast::<S2<BM, BN>>();
            }
            // SAFETY: tile indices `p + i·grid` are distinct across blocks.
            unsafe { c.store_at((tm, tn), acc.cast::<O>()) };
        }
    }

    /// [`gemm_fp8_block`] with the scales loaded `G` K steps at a time: per group, one `[BM, G]` tile
    /// of `sa` times the group's `[G, 1]` of `sb`, and each step's column taken out of that tile on
    /// chip: `PICK = 1` by a run-time index ([`Tile::extract_at`]), `PICK = 0` by a masked row sum.
    /// So a global-memory wait comes once per `G` steps instead of once per step.
    #[cutile::entry]
    pub fn gemm_fp8_block_grouped<
        F: Fp8,
        O: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const G: i32,
        const PICK: i32,
        const FAST: i32,
    >(
        a: &Tensor<F, S2<DYN, DYN>>,
        b: &Tensor<F, S2<DYN, DYN>>,
        sa: &Tensor<f32, S2<DYN, DYN>>,
        sb: &Tensor<f32, S2<DYN, DYN>>,
        group: Scalar<i32>,
        c: &mut Tensor<O, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let psa = sa.partition_padded::<S2<BM, G>>(Padding::Zero);
        let psb = sb.partition_padded::<S2<G, 1>>(Padding::Zero);
        let tiles_m = pa.num_tiles(0);
        let tiles_n = pb.num_tiles(1);
        let k_tiles = pa.num_tiles(1);
        let groups = psa.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        let lanes = iota::<G>().reshape::<S2<1, G>>().broadcast::<S2<BM, G>>();
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = crate::gemm::dsl::grouped_tile(tile, tiles_m, tiles_n, group);
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for g in 0..groups {
                let s = psa.load((tm, g))
                    * psb
                        .load((g, tn))
                        .reshape::<S2<1, G>>()
                        .broadcast::<S2<BM, G>>();
                let steps = (k_tiles - g * G).min(G);
                for j in 0..steps {
                    let part = product::<F, BM, BN, BK, FAST>(
                        pa.load((tm, g * G + j)),
                        pb.load((g * G + j, tn)),
                        zeros::<f32, S2<BM, BN>>(),
                    );
                    let col = if PICK != 0 {
                        s.extract_at::<S2<BM, 1>>((0, j))
                    } else {
                        select(lanes == j, s, 0.0).sum::<1>()
                    };
                    acc = fma(part, col.broadcast::<S2<BM, BN>>(), acc);
                }
            }
            // SAFETY: tile indices `p + i·grid` are distinct across blocks.
            unsafe { c.store_at((tm, tn), acc.cast::<O>()) };
        }
    }
}
