//! Flash-attention forward: `O = softmax(Q Kᵀ · scale) V`, one block per (tile of `BM` queries, batch·head),
//! streaming `BN`-row tiles of keys and values with an online softmax: running row max `m` and sum `l` in
//! f32, exponentials in base 2 with flush to zero (`scale · log2 e` folded into one fma per score), the
//! f32 accumulator rescaled by `exp2(m_old - m_new)` before each `P · V` mma. Inputs and output share
//! one element type (bf16 or f16), accumulation is f32.
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
//! view) with grouped-query attention (fewer K/V heads). Their `_overlap` twins issue the next key tile's
//! scores before this tile's softmax (tuning candidates; see `key_loop`).

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
        dense_3d::<E, BM, BN, D, CAUSAL, false>(q, k, v, scale, o);
    }

    /// [`flash_attention`] with the next key tile's scores computed before this tile's softmax
    /// ([`key_loop`]'s `OVERLAP`): a tuning candidate (`AttentionConfig::overlap`).
    #[cutile::entry(occupancy = 2)]
    pub fn flash_attention_overlap<
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
        dense_3d::<E, BM, BN, D, CAUSAL, true>(q, k, v, scale, o);
    }

    /// The body of [`flash_attention`] and [`flash_attention_overlap`].
    fn dense_3d<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const OVERLAP: bool,
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
        let st = key_loop::<E, BM, BN, D, CAUSAL, OVERLAP>(
            tq,
            |j| pk.load((bh, j, 0)).reshape::<S2<BN, D>>(),
            |j| pv.load((bh, j, 0)).reshape::<S2<BN, D>>(),
            qt,
            k.dim(1),
            scale * LOG2_E,
        );
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
        dense_4d::<E, BM, BN, D, CAUSAL, false>(q, k, v, scale, o);
    }

    /// [`flash_attention_4d`] with the next key tile's scores computed before this tile's softmax
    /// ([`key_loop`]'s `OVERLAP`): a tuning candidate (`AttentionConfig::overlap`).
    #[cutile::entry(occupancy = 2)]
    pub fn flash_attention_4d_overlap<
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
        dense_4d::<E, BM, BN, D, CAUSAL, true>(q, k, v, scale, o);
    }

    /// The body of [`flash_attention_4d`] and [`flash_attention_4d_overlap`].
    fn dense_4d<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const OVERLAP: bool,
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
        let st = key_loop::<E, BM, BN, D, CAUSAL, OVERLAP>(
            tq,
            |j| pk.load((b, kvh, j, 0)).reshape::<S2<BN, D>>(),
            |j| pv.load((b, kvh, j, 0)).reshape::<S2<BN, D>>(),
            qt,
            k.dim(2),
            scale * LOG2_E,
        );
        let out = finish(st).cast::<E>().reshape::<S4<1, 1, BM, D>>();
        // SAFETY: `schedule` maps blocks one-to-one to (bh, qt): each output tile has one writer.
        unsafe { o.store_at((b, h, qt, 0), out) };
    }

    /// The key loop of the dense kernels over the tiles of [`key_tiles`]: unmasked `[0, full)`, then
    /// masked `[full, end)`; `key(j)` / `value(j)` load key / value tile `j`. Without `OVERLAP` each
    /// step computes its scores, then folds them in ([`softmax_step`]), and the scores' `wgmma`s are
    /// waited for before the softmax starts. With `OVERLAP` the scores of tile `j + 1` are issued
    /// before tile `j`'s softmax (carried to the next step), so the tensor cores compute them while
    /// the warps run the exponentials: in sm_90 SASS (tileiras 13.5.37) the next tile's
    /// `HGMMA`s interleave with this tile's `MUFU.EX2`s, where the plain loop waits between them
    /// (FlashAttention-3's intra-warpgroup overlap). It costs one more score tile in registers and
    /// one wasted score product per block (the step after the last reloads the last key tile: the
    /// tile past it can lie wholly outside the keys, and such a load is undefined in Tile IR).
    fn key_loop<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const OVERLAP: bool,
    >(
        tq: Tile<E, S2<BM, D>>,
        key: impl Fn(Scalar<i32>) -> Tile<E, S2<BN, D>>,
        value: impl Fn(Scalar<i32>) -> Tile<E, S2<BN, D>>,
        qt: Scalar<i32>,
        seq_k: Scalar<i32>,
        qk_scale: Scalar<f32>,
    ) -> State<BM, D> {
        let (full, end) = key_tiles::<BM, BN, CAUSAL>(qt, seq_k);
        let mut st = init_state::<BM, D>();
        if OVERLAP {
            let last = (seq_k + (BN - 1)) / BN - 1i32;
            let tk = key(scalar::<i32>(0i32));
            let mut s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
            for j in 0..full {
                let tk = key((j + 1i32).min(last));
                let s_next = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
                st = softmax_step(s, value(j), qk_scale, st);
                s = s_next;
            }
            for j in full..end {
                let tk = key((j + 1i32).min(last));
                let s_next = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
                let masked = mask_scores::<BM, BN, CAUSAL>(s, j, qt, seq_k);
                st = softmax_step(masked, value(j), qk_scale, st);
                s = s_next;
            }
        } else {
            for j in 0..full {
                let tk = key(j);
                let tv = value(j);
                let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
                st = softmax_step(s, tv, qk_scale, st);
            }
            for j in full..end {
                let tk = key(j);
                let tv = value(j);
                let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
                let s = mask_scores::<BM, BN, CAUSAL>(s, j, qt, seq_k);
                st = softmax_step(s, tv, qk_scale, st);
            }
        }
        st
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
        // Flush to zero: a plain `exp2` costs sm_90 a range check and two multiplies per score around
        // its `MUFU.EX2` (ncu, session 43); a subnormal weight is nothing beside the row's sum ≥ 1.
        let p = fma(s, qk_scale, (-m_new).broadcast::<S2<BM, BN>>()).exp2_ftz();
        let alpha = (m - m_new).exp2_ftz();
        let l_new = fma(l, alpha, p.sum::<1>());
        let acc_new = mma(p.cast::<E>(), tv, acc * alpha.broadcast::<S2<BM, D>>());
        (m_new, l_new, acc_new)
    }

    fn finish<const BM: i32, const D: i32>(st: State<BM, D>) -> Tile<f32, S2<BM, D>> {
        let (_, l, acc) = st;
        // One reciprocal per row and a multiply per element: a full-precision divide per element
        // is an `FCHK` range check and a slow-path branch around each reciprocal on sm_90.
        acc * (1.0f32 / l).broadcast::<S2<BM, D>>()
    }

    // ---- Prefill variants: dense `[B, S, H, D]` views and packed variable-length batches ----------------

    /// Run-time options of the variant kernels, the same for every block of a launch.
    type Knobs = (
        Scalar<f32>,
        Scalar<i32>,
        Scalar<i32>,
        Scalar<i32>,
        Scalar<f32>,
        Scalar<i32>,
    );

    /// Flash attention with the prefill variants over dense `[B, S, H, D]` arrays (a permuted view of
    /// `[B, H, S, D]` storage; `k`/`v` with `H_kv` heads dividing `H`).
    ///
    /// Grid: `B · H · ceil(S_q / BM)` blocks, `(B·H, ceil(S_q / BM), 1)`. Parameters: `q` (`[B, S_q, H, D]`),
    /// `k`, `v` (`[B, S_k, H_kv, D]`), `sinks` (`[H]` f32 sink logits, read only when `sinks_on` is 1),
    /// `scale` (softmax scale), `shift` and `bottom_right` (query `i` sits at position
    /// `i + shift + bottom_right · (S_k - S_q)`), `window` (keys at positions `≥ pos - window` only;
    /// 2³⁰ disables it), `softcap` (`cap · tanh(x / cap)` on the scaled scores, used when `SOFTCAP`),
    /// `sinks_on`, `o` (`[B, S_q, H, D]`), `lse` (`[B, H, S_q]` f32, written when `LSE`).
    /// `CAUSAL`: keys after the query's position are masked.
    #[cutile::entry(occupancy = 2)]
    #[allow(clippy::too_many_arguments)]
    pub fn attention_prefill<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const SOFTCAP: bool,
        const LSE: bool,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        sinks: &Tensor<f32, S1<DYN>>,
        scale: Scalar<f32>,
        shift: Scalar<i32>,
        bottom_right: Scalar<i32>,
        window: Scalar<i32>,
        softcap: Scalar<f32>,
        sinks_on: Scalar<i32>,
        o: &mut Tensor<E, S4<1, BM, 1, D>>,
        lse: &mut Tensor<f32, S3<1, 1, BM>>,
    ) {
        let len_q = q.dim(1);
        let len_k = k.dim(1);
        let (bh, qt) = schedule::<BM, CAUSAL>(len_q);
        let heads = q.dim(2);
        let b = bh / heads;
        let h = bh % heads;
        let kvh = h / (heads / k.dim(2));
        let tq = q
            .load_tile_padded::<S4<1, BM, 1, D>>((b, qt, h, 0), Padding::Zero)
            .reshape::<S2<BM, D>>();
        let pk = k.partition_padded::<S4<1, BN, 1, D>>(Padding::Zero);
        let pv = v.partition_padded::<S4<1, BN, 1, D>>(Padding::Zero);
        let knobs = (scale, shift, bottom_right, window, softcap, sinks_on);
        let qk_scale = step_scale::<SOFTCAP>(knobs);
        let off = shift + bottom_right * (len_k - len_q);
        let (lo, u_lo, u_hi, end) = variant_tiles::<BM, BN, CAUSAL>(qt, off, len_k, window);
        let mut st = sink_state::<BM, D>(sinks, h, sinks_on);
        for j in lo..u_lo {
            let tk = pk.load((b, j, kvh, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, j, kvh, 0)).reshape::<S2<BN, D>>();
            let s = variant_scores::<E, BM, BN, D, CAUSAL, SOFTCAP, true>(
                tq, tk, j, qt, off, len_k, knobs,
            );
            st = safe_step(s, tv, qk_scale, st);
        }
        for j in u_lo..u_hi {
            let tk = pk.load((b, j, kvh, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, j, kvh, 0)).reshape::<S2<BN, D>>();
            let s = variant_scores::<E, BM, BN, D, CAUSAL, SOFTCAP, false>(
                tq, tk, j, qt, off, len_k, knobs,
            );
            st = safe_step(s, tv, qk_scale, st);
        }
        for j in u_hi..end {
            let tk = pk.load((b, j, kvh, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, j, kvh, 0)).reshape::<S2<BN, D>>();
            let s = variant_scores::<E, BM, BN, D, CAUSAL, SOFTCAP, true>(
                tq, tk, j, qt, off, len_k, knobs,
            );
            st = safe_step(s, tv, qk_scale, st);
        }
        let (out, lse_row) = safe_finish(st);
        // SAFETY: `schedule` maps blocks one-to-one to (bh, qt): each output tile has one writer.
        unsafe { o.store_at((b, qt, h, 0), out.cast::<E>().reshape::<S4<1, BM, 1, D>>()) };
        if LSE {
            // SAFETY: as for `o`.
            unsafe { lse.store_at((b, h, qt), lse_row.reshape::<S3<1, 1, BM>>()) };
        }
    }

    /// Flash attention with the prefill variants over a packed variable-length batch: `q` `[total_q, H, D]`,
    /// `k`, `v` `[total_k, H_kv, D]`; sequence `b` holds query rows `cu_q[b] .. cu_q[b+1]` and key rows
    /// `cu_k[b] .. cu_k[b+1]`. Its query `i` sits at position `i + shift + bottom_right · (len_k - len_q)`.
    ///
    /// Grid: `(ceil(max_seqlen_q / BM), H, B)`; blocks whose query tile starts past their sequence's end
    /// do nothing. Each block cuts its sequence's rows out of `q`, `k`, `v`, `o` (and `lse`) with
    /// [`Tensor::narrow`] and reads and writes whole tiles through those sub-views, exactly as the dense
    /// kernel does through its parameters (padded partitions: query rows and keys past the sequence read
    /// 0, and the keys are masked; stores past it are dropped). `lse` is `[H, total_q]` f32, written when
    /// `LSE`. The other parameters are [`attention_prefill`]'s.
    #[cutile::entry(occupancy = 2)]
    #[allow(clippy::too_many_arguments)]
    pub fn attention_varlen<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const SOFTCAP: bool,
        const LSE: bool,
    >(
        q: &Tensor<E, S3<DYN, DYN, D>>,
        k: &Tensor<E, S3<DYN, DYN, D>>,
        v: &Tensor<E, S3<DYN, DYN, D>>,
        cu_q: &Tensor<i32, S1<DYN>>,
        cu_k: &Tensor<i32, S1<DYN>>,
        sinks: &Tensor<f32, S1<DYN>>,
        scale: Scalar<f32>,
        shift: Scalar<i32>,
        bottom_right: Scalar<i32>,
        window: Scalar<i32>,
        softcap: Scalar<f32>,
        sinks_on: Scalar<i32>,
        o: &mut Tensor<E, S3<BM, 1, D>>,
        lse: &mut Tensor<f32, S2<1, BM>>,
    ) {
        let (x, h, b) = block_id();
        let (nx, _, _) = num_blocks();
        let qt = if CAUSAL { nx - 1i32 - x } else { x };
        let kvh = h / (q.dim(1) / k.dim(1));
        let q0 = read_i32(cu_q, b);
        let len_q = read_i32(cu_q, b + 1i32) - q0;
        let k0 = read_i32(cu_k, b);
        let len_k = read_i32(cu_k, b + 1i32) - k0;
        if qt * BM < len_q {
            let qs = q.narrow(0, q0, len_q);
            let tq = qs
                .load_tile_padded::<S3<BM, 1, D>>((qt, h, 0), Padding::Zero)
                .reshape::<S2<BM, D>>();
            // A sequence without keys loads none; its views still get one row (the host passes `k`, `v`
            // with at least one) so that no view has an empty extent.
            let kv0 = k0.min(k.dim(0) - 1i32);
            let kv_rows = len_k.max(1i32);
            let pk = k
                .narrow(0, kv0, kv_rows)
                .partition_padded::<S3<BN, 1, D>>(Padding::Zero);
            let pv = v
                .narrow(0, kv0, kv_rows)
                .partition_padded::<S3<BN, 1, D>>(Padding::Zero);
            let knobs = (scale, shift, bottom_right, window, softcap, sinks_on);
            let qk_scale = step_scale::<SOFTCAP>(knobs);
            let off = shift + bottom_right * (len_k - len_q);
            let (lo, u_lo, u_hi, end) = variant_tiles::<BM, BN, CAUSAL>(qt, off, len_k, window);
            let mut st = sink_state::<BM, D>(sinks, h, sinks_on);
            for j in lo..u_lo {
                let tk = pk.load((j, kvh, 0)).reshape::<S2<BN, D>>();
                let tv = pv.load((j, kvh, 0)).reshape::<S2<BN, D>>();
                let s = variant_scores::<E, BM, BN, D, CAUSAL, SOFTCAP, true>(
                    tq, tk, j, qt, off, len_k, knobs,
                );
                st = safe_step(s, tv, qk_scale, st);
            }
            for j in u_lo..u_hi {
                let tk = pk.load((j, kvh, 0)).reshape::<S2<BN, D>>();
                let tv = pv.load((j, kvh, 0)).reshape::<S2<BN, D>>();
                let s = variant_scores::<E, BM, BN, D, CAUSAL, SOFTCAP, false>(
                    tq, tk, j, qt, off, len_k, knobs,
                );
                st = safe_step(s, tv, qk_scale, st);
            }
            for j in u_hi..end {
                let tk = pk.load((j, kvh, 0)).reshape::<S2<BN, D>>();
                let tv = pv.load((j, kvh, 0)).reshape::<S2<BN, D>>();
                let s = variant_scores::<E, BM, BN, D, CAUSAL, SOFTCAP, true>(
                    tq, tk, j, qt, off, len_k, knobs,
                );
                st = safe_step(s, tv, qk_scale, st);
            }
            let (out, lse_row) = safe_finish(st);
            let mut os = o.narrow(0, q0, len_q);
            // SAFETY: blocks own disjoint (sequence, head, query tile) tiles of the sub-views; rows past
            // the sequence are outside the sub-view and not written.
            unsafe { os.store_at((qt, h, 0), out.cast::<E>().reshape::<S3<BM, 1, D>>()) };
            if LSE {
                let mut ls = lse.narrow(1, q0, len_q);
                // SAFETY: as for `o`.
                unsafe { ls.store_at((h, qt), lse_row.reshape::<S2<1, BM>>()) };
            }
        }
    }

    /// Element `i` of a rank-1 i32 array.
    fn read_i32(t: &Tensor<i32, S1<DYN>>, i: Scalar<i32>) -> Scalar<i32> {
        t.gather::<S1<1>>(iota::<1>() + i, None, 0i32)
            .reshape::<S0>()
            .to_scalar()
    }

    /// Key tiles of query tile `qt` (queries at positions `qt·BM + off ..`, `len_k` keys, left window
    /// `window`): `[lo, u_lo)` and `[u_hi, end)` need a mask, `[u_lo, u_hi)` do not; the rest are
    /// skipped.
    fn variant_tiles<const BM: i32, const BN: i32, const CAUSAL: bool>(
        qt: Scalar<i32>,
        off: Scalar<i32>,
        len_k: Scalar<i32>,
        window: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>, Scalar<i32>, Scalar<i32>) {
        let first = qt * BM + off;
        let last = first + (BM - 1);
        // Keys [lo_key, hi_key) are seen by some query of the tile.
        let lo_key = (first - window).max(0i32);
        let hi_key = if CAUSAL {
            (last + 1i32).min(len_k).max(0i32)
        } else {
            len_k.max(0i32)
        };
        let lo = lo_key / BN;
        let end = ((hi_key + (BN - 1)) / BN).max(lo);
        // Tiles every query of the tile sees whole: from the last query's window start, up to the
        // first query's position (causal) and the last full tile.
        let u_lo = (((last - window).max(0i32) + (BN - 1)) / BN)
            .max(lo)
            .min(end);
        let full = if CAUSAL {
            ((first + 1i32).max(0i32) / BN).min(len_k / BN)
        } else {
            len_k / BN
        };
        let u_hi = full.max(u_lo).min(end);
        (lo, u_lo, u_hi, end)
    }

    /// Logits of one tile, in units that [`safe_step`] with [`step_scale`] turns into base-2 logits:
    /// the raw `q kᵀ` (scaled inside the step's `fma`, as the dense kernel does, which saves one f32
    /// multiply per score), or when `SOFTCAP` the soft-capped base-2 logits `cap · tanh(q kᵀ · scale /
    /// cap) · log2 e`; when `MASK`, -inf where the key is past `len_k`, after the query's position
    /// (`CAUSAL`) or before its window.
    #[allow(clippy::too_many_arguments)]
    fn variant_scores<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const SOFTCAP: bool,
        const MASK: bool,
    >(
        tq: Tile<E, S2<BM, D>>,
        tk: Tile<E, S2<BN, D>>,
        j: Scalar<i32>,
        qt: Scalar<i32>,
        off: Scalar<i32>,
        len_k: Scalar<i32>,
        knobs: Knobs,
    ) -> Tile<f32, S2<BM, BN>> {
        let (scale, _, _, window, softcap, _) = knobs;
        let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
        let s = if SOFTCAP {
            (s * (scale / softcap)).tanh() * (softcap * LOG2_E)
        } else {
            s
        };
        if MASK {
            let keys = (iota::<BN>() + j * BN)
                .reshape::<S2<1, BN>>()
                .broadcast::<S2<BM, BN>>();
            let pos = (iota::<BM>() + (qt * BM + off))
                .reshape::<S2<BM, 1>>()
                .broadcast::<S2<BM, BN>>();
            let mut valid = keys < len_k;
            valid &= keys >= pos - window;
            if CAUSAL {
                valid &= keys <= pos;
            }
            select(valid, s, f32::NEG_INFINITY)
        } else {
            s
        }
    }

    /// The state before any key: the sink logit (base 2) as the running max with weight 1 when
    /// `sinks_on` is 1, else the empty state.
    fn sink_state<const BM: i32, const D: i32>(
        sinks: &Tensor<f32, S1<DYN>>,
        h: Scalar<i32>,
        sinks_on: Scalar<i32>,
    ) -> State<BM, D> {
        // Without sinks `sinks` is a one-element stand-in: the index is clamped so that the load
        // stays on it (a tile wholly past the tensor is undefined in Tile IR), and `on` drops it.
        let sink = sinks
            .load_tile_padded::<S1<1>>(h.min(sinks.dim(0) - 1i32), Padding::Zero)
            .reshape::<S2<1, 1>>()
            .broadcast::<S2<BM, 1>>();
        let on = zeros::<i32, S2<BM, 1>>() < sinks_on;
        (
            select(on, sink * LOG2_E, f32::NEG_INFINITY),
            select(on, full::<f32, S2<BM, 1>>(1.0f32), 0.0f32),
            zeros::<f32, S2<BM, D>>(),
        )
    }

    /// The factor [`safe_step`] applies to [`variant_scores`]' logits: `scale · log2 e` on raw scores,
    /// 1 on soft-capped ones (already base-2 logits).
    fn step_scale<const SOFTCAP: bool>(knobs: Knobs) -> Scalar<f32> {
        let (scale, _, _, _, _, _) = knobs;
        if SOFTCAP {
            full::<f32, S0>(1.0f32).to_scalar()
        } else {
            scale * LOG2_E
        }
    }

    /// [`softmax_step`] on logits `s` that become base-2 logits times `qk_scale` (> 0, so scaling
    /// after the max is the same as before it) and may leave a row with no finite logit yet: such a
    /// row keeps max -inf, sum and accumulator unchanged (its exponentials are taken against 0). The
    /// state's max is in base-2 logits.
    fn safe_step<E: MmaOperand<f32>, const BM: i32, const BN: i32, const D: i32>(
        s: Tile<f32, S2<BM, BN>>,
        tv: Tile<E, S2<BN, D>>,
        qk_scale: Scalar<f32>,
        st: State<BM, D>,
    ) -> State<BM, D> {
        let (m, l, acc) = st;
        let m_new = m.max(s.amax::<1>() * qk_scale);
        let m_use = select(m_new == f32::NEG_INFINITY, zeros::<f32, S2<BM, 1>>(), m_new);
        // Flush to zero, as `softmax_step`.
        let p = fma(s, qk_scale, (-m_use).broadcast::<S2<BM, BN>>()).exp2_ftz();
        let alpha = (m - m_use).exp2_ftz();
        let l_new = fma(l, alpha, p.sum::<1>());
        let acc_new = mma(p.cast::<E>(), tv, acc * alpha.broadcast::<S2<BM, D>>());
        (m_new, l_new, acc_new)
    }

    /// Output rows (0 for a row with no weight) and their natural-log sum of exponentials (-inf then).
    fn safe_finish<const BM: i32, const D: i32>(
        st: State<BM, D>,
    ) -> (Tile<f32, S2<BM, D>>, Tile<f32, S2<BM, 1>>) {
        let (m, l, acc) = st;
        let empty = l == 0.0f32;
        let inv = select(empty, zeros::<f32, S2<BM, 1>>(), 1.0f32 / l);
        let lse = (m + l.log2()) * std::f32::consts::LN_2;
        let lse = select(empty, full::<f32, S2<BM, 1>>(f32::NEG_INFINITY), lse);
        (acc * inv.broadcast::<S2<BM, D>>(), lse)
    }
}
