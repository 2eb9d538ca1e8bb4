//! The Blackwell path of the NVFP4 MoE (sm_100, sm_120): both GEMMs on the block-scaled tensor cores
//! (`mma_scaled`: e2m1 operands, one e4m3 scale per 16 along K, f32 accumulation), with the
//! activations quantized to NVFP4 on the fly by [`kernels::nvfp4_quantize_rows()`].
//!
//! Activations get one global scale per row (`row amax / (6 · 448)`) instead of one per tensor: a
//! row's global multiplies only that row of the product, so the GEMM applies it to its f32
//! accumulator with the expert's weight global (`acc[r, n] · gx[r] · gw[e]`), and rows stay
//! independent, so padding rows of the aligned order (never written by GEMM 1 past `total`) cannot
//! spoil a real row's scale. The block scales and codes follow the format of `docs/moe.md` (the same
//! `codec::quantize_tile` as the weight quantizer).
//!
//! Layouts: `xq: [T, H/2]`, `xs: [T, H/16]` bytes and `xg: [T]` f32 (the quantized `x`); GEMM 1 reads
//! them at the rows of its row block's tokens (gathers), GEMM 2 reads the quantized `h` (`[P, I/2]`,
//! `[P, I/16]`, `[P]`) in the aligned order (views). The weights and the routing tensors are the
//! W4A16 path's (`docs/moe.md`, "Layouts"). A packed byte tile becomes an e2m1 tile through
//! `Tile::reinterpret` (Tile IR `unpack`: byte `j` gives elements `2j` (low nibble) and `2j + 1`), the
//! scale bytes through `bitcast` to `f8e4m3fn`.
//!
//! tileiras compiles these for sm_100 and sm_120 and refuses them for sm_80/sm_90 (no e2m1 type there);
//! our H200 cannot run them, so they are checked by the IR and compile tests only
//! (`tests/moe.rs::blackwell_kernels_compile_for_sm100_and_sm120`).

/// The block-scaled GEMMs' tile `(BM, BN, BK)`: the one that reaches the tcgen05 block-scaled MMA on
/// sm_100a (see `blackwell_jobs` in the parent module for the SASS behind it). The aligned order must
/// use 128-row blocks on this path.
pub const TILE: (i32, i32, i32) = (128, 64, 128);

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use super::super::codec::quantize_tile;
    use super::super::kernels::{at, block_rows, gather_rows, group_tile, scatter_weighted};
    use cutile::core::*;

    /// `x · sigmoid(x)`, the activation family's exact form.
    fn silu<S: Shape>(x: Tile<f32, S>) -> Tile<f32, S> {
        crate::activation::math::forward(crate::activation::dsl::SILU, x, false)
    }

    /// NVFP4 with one global scale per row: block `r` quantizes rows `r·BR ..` of `x: [R, K]` in
    /// `BR x BK` tiles (a first pass over the row tiles for the row maxima, a second for the codes)
    /// into `q: [R, K/2]`, `s: [R, K/16]` and `g: [R]` (`row amax / 2688`). Grid `(ceil(R / BR), 1, 1)`.
    #[cutile::entry]
    pub fn nvfp4_quantize_rows<
        E: Float,
        const BR: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        q: &mut Tensor<i8, S2<BR, BKH>>,
        s: &mut Tensor<i8, S2<BR, BKS>>,
        g: &mut Tensor<f32, S1<BR>>,
    ) {
        let r = block_id_x();
        let px = x.partition_padded::<S2<BR, BK>>(Padding::Zero);
        let mut amax = zeros::<f32, S2<BR, 1>>();
        for c in 0..px.num_tiles(1) {
            amax = amax.max(px.load((r, c)).cast::<f32>().abs().amax::<1>());
        }
        let gr = amax / 2688.0f32;
        // SAFETY: block `r` writes only its rows of `g`, `q` and `s`.
        unsafe { g.store_at(r, gr.reshape::<S1<BR>>()) };
        let gt = gr.broadcast::<S2<BR, BKS>>();
        for c in 0..px.num_tiles(1) {
            let t = px.load((r, c)).cast::<f32>();
            let (bytes, code) = quantize_tile::<BR, BK, BKH, BKS>(t, gt);
            unsafe { q.store_at((r, c), bytes) };
            unsafe { s.store_at((r, c), code.cast::<i8>()) };
        }
    }

    /// The e2m1 values (`[BN, BK]`, from `BN x BKH` packed bytes) and e4m3 scales (`[BN, BKS]`) of
    /// the weight tile `(n, k)` of expert `e` (`w: [E, N, K/2]`, `s: [E, N, K/16]`).
    #[allow(clippy::type_complexity)]
    fn weight_tile<const BN: i32, const BK: i32, const BKH: i32, const BKS: i32>(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        e: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> (Tile<f4e2m1fn, S2<BN, BK>>, Tile<f8e4m3fn, S2<BN, BKS>>) {
        (
            group_tile::<BN, BKH>(w, e, n, k).reinterpret::<f4e2m1fn, S2<BN, BK>>(),
            group_tile::<BN, BKS>(s, e, n, k).bitcast::<f8e4m3fn>(),
        )
    }

    /// `v[rows]` of a per-row f32 vector as a `BM x BN` tile (0 where `valid` is false).
    fn row_factor<const BM: i32, const BN: i32>(
        v: &Tensor<f32, S1<DYN>>,
        rows: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
    ) -> Tile<f32, S2<BM, BN>> {
        v.gather(rows, Some(valid), 0.0f32)
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, BN>>()
    }

    /// Grouped GEMM 1 on the block-scaled tensor cores: for row block `b` (expert `expert_ids[b]`) and
    /// column tile `n` of the intermediate, `h[rows, n] = silu(g) · u` with `g` and `u` the products of
    /// the quantized rows of `x` (`xq`, `xs`, `xg` at the block's tokens) with the gate and up rows of
    /// W13 (`w: [E, 2I, H/2]`, `s: [E, 2I, H/16]`, `global: [E]`), each f32 accumulator scaled by
    /// `xg[token] · global[e]`. `h: [P, I]`; blocks past `total` return. Grid `(P_max / BM, I / BN, 1)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_fp4<
        E: Float,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        xq: &Tensor<i8, S2<DYN, DYN>>,
        xs: &Tensor<i8, S2<DYN, DYN>>,
        xg: &Tensor<f32, S1<DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (b, n, _) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let (_ids, tok, valid) = block_rows::<BM>(sorted_ids, b, xq.dim(0) * topk, topk);
            let up_n = n + h.dim(1) / BN;
            let mut acc_g = zeros::<f32, S2<BM, BN>>();
            let mut acc_u = zeros::<f32, S2<BM, BN>>();
            for k in 0..(xq.dim(1) + (BKH - 1)) / BKH {
                let a = gather_rows::<i8, BM, BKH>(xq, tok, valid, k)
                    .reinterpret::<f4e2m1fn, S2<BM, BK>>();
                let a_s = gather_rows::<i8, BM, BKS>(xs, tok, valid, k).bitcast::<f8e4m3fn>();
                let (gv, gs) = weight_tile::<BN, BK, BKH, BKS>(w, s, e, n, k);
                let (uv, us) = weight_tile::<BN, BK, BKH, BKS>(w, s, e, up_n, k);
                acc_g = mma_scaled(a, a_s, gv.transpose(), gs.transpose(), acc_g);
                acc_u = mma_scaled(a, a_s, uv.transpose(), us.transpose(), acc_u);
            }
            let f = row_factor::<BM, BN>(xg, tok, valid) * at(global, e);
            // SAFETY: block `(b, n)` writes only tile `(b, n)`.
            unsafe { h.store_at((b, n), (silu(acc_g * f) * (acc_u * f)).cast::<E>()) };
        }
    }

    /// Grouped GEMM 2 on the block-scaled tensor cores: `y[id·S + s, n] = weights[id] · hg[row] ·
    /// global[e] · (hq[rows, K_s] ⊙ hs) · (W2[e, n, K_s] ⊙ S2)ᵀ` for the real rows of block `b` and
    /// K split `s` of `S = splits` (f32 `y: [T·k·S, H]`, summed by `moe_combine`). `hq: [P, I/2]`,
    /// `hs: [P, I/16]`, `hg: [P]` (the quantized `h`), `w: [E, H, I/2]`, `s: [E, H, I/16]`. Grid
    /// `(P_max / BM, H / BN, S)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_fp4<
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        hq: &Tensor<i8, S2<DYN, DYN>>,
        hs: &Tensor<i8, S2<DYN, DYN>>,
        hg: &Tensor<f32, S1<DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        let (b, n, sp) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let (ids, _tok, valid) =
                block_rows::<BM>(sorted_ids, b, y.dim(0) / splits, scalar::<i32>(1i32));
            let pq = hq.partition_padded::<S2<BM, BKH>>(Padding::Zero);
            let ps = hs.partition_padded::<S2<BM, BKS>>(Padding::Zero);
            let per = (pq.num_tiles(1) + splits - 1i32) / splits;
            let lo = sp * per;
            let hi = (lo + per).min(pq.num_tiles(1));
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in lo..hi {
                let a = pq.load((b, k)).reinterpret::<f4e2m1fn, S2<BM, BK>>();
                let a_s = ps.load((b, k)).bitcast::<f8e4m3fn>();
                let (wv, ws) = weight_tile::<BN, BK, BKH, BKS>(w, s, e, n, k);
                acc = mma_scaled(a, a_s, wv.transpose(), ws.transpose(), acc);
            }
            let rows = iota::<BM>() + b * BM;
            let f = row_factor::<BM, BN>(hg, rows, valid) * at(global, e);
            scatter_weighted::<BM, BN>(y, weights, ids, valid, splits, sp, n, acc * f);
        }
    }
}
