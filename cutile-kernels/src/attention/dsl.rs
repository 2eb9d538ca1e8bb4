//! Flash-attention forward: `O = softmax(Q Kᵀ · scale) V`, one block per (tile of `BM` queries, batch·head),
//! streaming `BN`-row tiles of keys and values with an online softmax: running row max `m` and sum `l` in
//! f32, exponentials in base 2 (`scale · log2 e` folded into one fma per score), the f32 accumulator
//! rescaled by `exp2(m_old - m_new)` before each `P · V` mma. Inputs and output share one element type
//! (bf16 or f16), accumulation is f32.
//!
//! Key tiles are split in two loops so only the tiles that need it pay for masking: tiles entirely inside
//! the sequence (and, when `CAUSAL`, entirely at or below the diagonal) run unmasked; the rest get an
//! iota-based mask (`key < seq_k`, and `key ≤ query` when causal) applied with a select to -inf. A causal
//! block stops at the diagonal tile.
//!
//! Grid: one block per (batch·head, query tile), e.g. the output's tiles `(batch·heads, ceil(seq_q / BM),
//! 1)` that the launcher derives for the 3-D kernel. Blocks are renumbered in launch order (linear block
//! id) so that consecutive blocks take the query tiles of one head, whose K/V then stay in L2, and causal
//! ones take them heaviest (last) first so the long blocks do not form the tail.
//!
//! Causal attention aligns queries and keys at position 0 (query `i` sees keys `0..=i`, as PyTorch's
//! `is_causal`). `seq_k` must be at least 1 and `scale` positive.
//!
//! Layouts: [`kernels::flash_attention`] takes `[batch·heads, seq, D]` arrays, [`kernels::flash_attention_4d`]
//! `[batch, heads, seq, D]` ones (any strides, so `[batch, seq, heads, D]` storage works through a strided
//! view) with grouped-query attention (fewer K/V heads).

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    const LOG2_E: f64 = std::f64::consts::LOG2_E;

    /// Online-softmax state of a query tile: running max (base-2, scaled), running sum, accumulator.
    type State<const BM: i32, const D: i32> = (
        Tile<f32, S2<BM, 1>>,
        Tile<f32, S2<BM, 1>>,
        Tile<f32, S2<BM, D>>,
    );

    /// Flash attention over `[batch·heads, seq, D]` arrays.
    ///
    /// Grid: `BH · ceil(seq_q / BM)` blocks, e.g. the output's tiles `(BH, ceil(seq_q / BM), 1)` (see the
    /// module docs for their order). Parameters: `q` (`[BH, seq_q, D]`), `k` and `v`
    /// (`[BH, seq_k, D]`), `scale` (the softmax scale, usually `1/sqrt(D)`), `o` (`[BH, seq_q, D]`).
    /// `BM`, `BN`: query and key tile rows; `D`: head dimension; `CAUSAL`: mask keys after the query.
    #[cutile::entry(occupancy = 2)]
    pub fn flash_attention<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
    >(
        q: &Tensor<E, S3<DYN, DYN, D>>,
        k: &Tensor<E, S3<DYN, DYN, D>>,
        v: &Tensor<E, S3<DYN, DYN, D>>,
        scale: Scalar<f32>,
        o: &mut Tensor<E, S3<1, BM, D>>,
    ) {
        let (bh, qt) = schedule::<BM, CAUSAL>(q.dim(1));
        let tq = q
            .load_tile_padded::<S3<1, BM, D>>((bh, qt, 0), Padding::Zero)
            .reshape::<S2<BM, D>>();
        let pk = k.partition_padded::<S3<1, BN, D>>(Padding::Zero);
        let pv = v.partition_padded::<S3<1, BN, D>>(Padding::Zero);
        let qk_scale = scale * LOG2_E;
        let seq_k = k.dim(1);
        let (full, end) = key_tiles::<BM, BN, CAUSAL>(qt, seq_k);
        let mut st = init_state::<BM, D>();
        for j in 0..full {
            let tk = pk.load((bh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((bh, j, 0)).reshape::<S2<BN, D>>();
            let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
            st = softmax_step(s, tv, qk_scale, st);
        }
        for j in full..end {
            let tk = pk.load((bh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((bh, j, 0)).reshape::<S2<BN, D>>();
            let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
            let s = mask_scores::<BM, BN, CAUSAL>(s, j, qt, seq_k);
            st = softmax_step(s, tv, qk_scale, st);
        }
        let out = finish(st).cast::<E>().reshape::<S3<1, BM, D>>();
        // SAFETY: `schedule` maps blocks one-to-one to (bh, qt): each output tile has one writer.
        unsafe { o.store_at((bh, qt, 0), out) };
    }

    /// Flash attention over `[batch, heads, seq, D]` arrays, with grouped-query attention: `k` and `v`
    /// may have fewer heads `H_kv` (dividing `H`); query head `h` reads K/V head `h / (H / H_kv)`.
    ///
    /// Grid: `B · H · ceil(seq_q / BM)` blocks, e.g. `(B·H, ceil(seq_q / BM), 1)`; a launcher cannot
    /// derive it from the rank-4 output, so pass it explicitly. Parameters: `q` (`[B, H, seq_q, D]`),
    /// `k` and `v` (`[B, H_kv, seq_k, D]`), `scale` (usually `1/sqrt(D)`), `o` (`[B, H, seq_q, D]`).
    /// Strides are free, so `[B, seq, H, D]` storage is passed as a permuted strided view.
    #[cutile::entry(occupancy = 2)]
    pub fn flash_attention_4d<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        scale: Scalar<f32>,
        o: &mut Tensor<E, S4<1, 1, BM, D>>,
    ) {
        let (bh, qt) = schedule::<BM, CAUSAL>(q.dim(2));
        let heads = q.dim(1);
        let b = bh / heads;
        let h = bh % heads;
        let kvh = h / (heads / k.dim(1));
        let tq = q
            .load_tile_padded::<S4<1, 1, BM, D>>((b, h, qt, 0), Padding::Zero)
            .reshape::<S2<BM, D>>();
        let pk = k.partition_padded::<S4<1, 1, BN, D>>(Padding::Zero);
        let pv = v.partition_padded::<S4<1, 1, BN, D>>(Padding::Zero);
        let qk_scale = scale * LOG2_E;
        let seq_k = k.dim(2);
        let (full, end) = key_tiles::<BM, BN, CAUSAL>(qt, seq_k);
        let mut st = init_state::<BM, D>();
        for j in 0..full {
            let tk = pk.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
            st = softmax_step(s, tv, qk_scale, st);
        }
        for j in full..end {
            let tk = pk.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
            let s = mask_scores::<BM, BN, CAUSAL>(s, j, qt, seq_k);
            st = softmax_step(s, tv, qk_scale, st);
        }
        let out = finish(st).cast::<E>().reshape::<S4<1, 1, BM, D>>();
        // SAFETY: `schedule` maps blocks one-to-one to (bh, qt): each output tile has one writer.
        unsafe { o.store_at((b, h, qt, 0), out) };
    }

    /// This block's (batch·head, query tile): the linear block id, head-major and query tiles in order
    /// (from the last one when causal, the last tiles seeing the most keys).
    fn schedule<const BM: i32, const CAUSAL: bool>(
        seq_q: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>) {
        let (x, y, _) = block_id();
        let (nx, _, _) = num_blocks();
        let linear = y * nx + x;
        let q_tiles = (seq_q + (BM - 1)) / BM;
        let bh = linear / q_tiles;
        let qb = linear % q_tiles;
        let qt = if CAUSAL { q_tiles - 1i32 - qb } else { qb };
        (bh, qt)
    }

    /// Key tiles `[0, full)` need no mask, `[full, end)` do; tiles from `end` on are not visited.
    fn key_tiles<const BM: i32, const BN: i32, const CAUSAL: bool>(
        qt: Scalar<i32>,
        seq_k: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>) {
        let tiles = (seq_k + (BN - 1)) / BN;
        let in_bounds = seq_k / BN;
        if CAUSAL {
            // Tile j is below the diagonal for every query of the tile when its last key
            // j·BN + BN - 1 ≤ qt·BM; it is visited while its first key j·BN < (qt + 1)·BM.
            let first_query = qt * BM;
            let full = ((first_query + 1i32) / BN).min(in_bounds);
            let end = ((first_query + (BM + BN - 1)) / BN).min(tiles);
            (full, end)
        } else {
            (in_bounds, tiles)
        }
    }

    /// Scores of keys past `seq_k` (zero padding) and, when causal, of keys after the query set to -inf.
    fn mask_scores<const BM: i32, const BN: i32, const CAUSAL: bool>(
        s: Tile<f32, S2<BM, BN>>,
        j: Scalar<i32>,
        qt: Scalar<i32>,
        seq_k: Scalar<i32>,
    ) -> Tile<f32, S2<BM, BN>> {
        let keys = (iota::<BN>() + j * BN)
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<BM, BN>>();
        let mut valid = keys < seq_k;
        if CAUSAL {
            let queries = (iota::<BM>() + qt * BM)
                .reshape::<S2<BM, 1>>()
                .broadcast::<S2<BM, BN>>();
            valid &= keys <= queries;
        }
        select(valid, s, f32::NEG_INFINITY)
    }

    fn init_state<const BM: i32, const D: i32>() -> State<BM, D> {
        (
            full::<f32, S2<BM, 1>>(f32::NEG_INFINITY),
            zeros::<f32, S2<BM, 1>>(),
            zeros::<f32, S2<BM, D>>(),
        )
    }

    /// Fold one tile of raw scores `s` (masked entries -inf) and its values `tv` into the state.
    /// Every row's first visited tile has a finite score (key 0 is always valid), so the max is finite
    /// from then on and `exp2(-inf - m)` is a clean 0.
    fn softmax_step<E: MmaOperand<f32>, const BM: i32, const BN: i32, const D: i32>(
        s: Tile<f32, S2<BM, BN>>,
        tv: Tile<E, S2<BN, D>>,
        qk_scale: Scalar<f32>,
        st: State<BM, D>,
    ) -> State<BM, D> {
        let (m, l, acc) = st;
        // `qk_scale` > 0, so scaling after the max is the same as before it.
        let m_new = m.max(s.amax::<1>() * qk_scale);
        let p = fma(s, qk_scale, (-m_new).broadcast::<S2<BM, BN>>()).exp2();
        let alpha = (m - m_new).exp2();
        let l_new = fma(l, alpha, p.sum::<1>());
        let acc_new = mma(p.cast::<E>(), tv, acc * alpha.broadcast::<S2<BM, D>>());
        (m_new, l_new, acc_new)
    }

    fn finish<const BM: i32, const D: i32>(st: State<BM, D>) -> Tile<f32, S2<BM, D>> {
        let (_, l, acc) = st;
        acc / l.broadcast::<S2<BM, D>>()
    }
}
