//! Attention backward kernels, FlashAttention-2 style and without atomics: given the forward's `q, k, v`,
//! its output `o`, its natural-log LSE and the output gradient `dO`, they write `dQ`, `dK`, `dV`.
//!
//! Notation: `S = Q Kᵀ · scale` (the scaled logits), `P = exp(S - lse)` (the softmax, recomputed from the
//! forward's LSE, so no max/sum pass is needed), `dP = dO Vᵀ`, `dS = P ∘ (dP - delta)` with
//! `delta = rowsum(dO ∘ O)`; then `dV = Pᵀ dO`, `dK = scale · dSᵀ Q`, `dQ = scale · dS K`.
//!
//! Three launches (see `backward.rs`):
//!
//! 1. [`backward_kernels::attn_bwd_delta`]: `delta[b, h, i] = Σ_d dO · O` in f32, one block per
//!    (batch·head, `BM` query rows);
//! 2. [`backward_kernels::attn_bwd_dkdv`]: one block per (batch, K/V head, `BN` key rows). It keeps `K`
//!    and `V` of its tile and two f32 `BN x D` accumulators, and loops over the query heads of its GQA
//!    group and over their query tiles (causal: only those that can see the key tile; the tiles that
//!    straddle the diagonal get the mask, the others none). Working in the transposed orientation
//!    (`Sᵀ = K Qᵀ`, `BN x BM`) makes every product a plain `mma` without transposing a result;
//! 3. [`backward_kernels::attn_bwd_dq`]: one block per (batch·head, `BM` query rows), looping over the
//!    key tiles (causal: up to the diagonal) with one f32 `BM x D` accumulator.
//!
//! Each output tile has exactly one writer, so the result is deterministic. Exponentials are base 2
//! (`scale · log2 e` folded into one fma with `-lse · log2 e`) with flush-to-zero (`exp2_ftz`), as the
//! forward does.
//!
//! Layout: every array is `[B, H, S, D]` (`[B, H, S]` for `lse` and `delta`), any strides; the host passes
//! `[BH, S, D]` calls as `[BH, 1, S, D]` views. Query `i` sits at position `i + off` (`off` = the
//! forward's causal shift: 0 top-left, `S_k - S_q` bottom-right) and, when `CAUSAL`, sees keys
//! `0 ..= i + off`. A row that sees no key has `lse = -inf` (the forward's convention): its gradients are
//! zero (its `-lse` is taken as `-inf`, so every `P` of the row is 0).
//!
//! Out-of-range rows: tiles are zero padded. A padded query row has `Q = dO = 0` and `lse = delta = 0`,
//! so it adds nothing to `dK`/`dV`; padded key rows of `dK`/`dV` are never stored. `dQ` masks keys past
//! `S_k` explicitly (their `P` is `exp(-lse)`, which may overflow for very negative `lse`).

/// The kernels, written in the DSL.
#[cutile::module]
pub mod backward_kernels {
    use cutile::core::*;

    const LOG2_E: f64 = std::f64::consts::LOG2_E;

    /// `delta[b, h, i] = Σ_d dO[b, h, i, d] · O[b, h, i, d]` (f32).
    ///
    /// Grid: `(B·H, ceil(S_q / BM), 1)`. Parameters: `o`, `d_o` (`[B, H, S_q, D]`), `delta`
    /// (`[B, H, S_q]` f32).
    #[cutile::entry(occupancy = 4)]
    pub fn attn_bwd_delta<E: MmaOperand<f32>, const BM: i32, const D: i32>(
        o: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        d_o: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        delta: &mut Tensor<f32, S3<1, 1, BM>>,
    ) {
        let (bh, qt, _) = block_id();
        let heads = o.dim(1);
        let b = bh / heads;
        let h = bh % heads;
        let to = o
            .load_tile_padded::<S4<1, 1, BM, D>>((b, h, qt, 0), Padding::Zero)
            .reshape::<S2<BM, D>>()
            .cast::<f32>();
        let tdo = d_o
            .load_tile_padded::<S4<1, 1, BM, D>>((b, h, qt, 0), Padding::Zero)
            .reshape::<S2<BM, D>>()
            .cast::<f32>();
        let d = (to * tdo).sum::<1>().reshape::<S3<1, 1, BM>>();
        // SAFETY: block (bh, qt) writes only tile (b, h, qt).
        unsafe { delta.store_at((b, h, qt), d) };
    }

    /// `dK` and `dV` of one key tile, summed over the query heads of its GQA group.
    ///
    /// Grid: `B·H_kv · ceil(S_k / BN)` blocks, e.g. `(B·H_kv, ceil(S_k / BN), 1)` (taken in linear order:
    /// consecutive blocks share a head; key tiles ascending, the causal ones with the most queries
    /// first). Parameters: `q`, `d_o` (`[B, H, S_q, D]`), `k`, `v` (`[B, H_kv, S_k, D]`), `lse`, `delta`
    /// (`[B, H, S_q]` f32), `scale` (softmax scale), `off` (query position shift), `dk`, `dv`
    /// (`[B, H_kv, S_k, D]`).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn attn_bwd_dkdv<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        d_o: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        lse: &Tensor<f32, S3<DYN, DYN, DYN>>,
        delta: &Tensor<f32, S3<DYN, DYN, DYN>>,
        scale: Scalar<f32>,
        off: Scalar<i32>,
        dk: &mut Tensor<E, S4<1, 1, BN, D>>,
        dv: &mut Tensor<E, S4<1, 1, BN, D>>,
    ) {
        let (x, y, _) = block_id();
        let (nx, _, _) = num_blocks();
        let linear = y * nx + x;
        let seq_q = q.dim(2);
        let seq_k = k.dim(2);
        let k_tiles = (seq_k + (BN - 1)) / BN;
        let bhk = linear / k_tiles;
        let kt = linear % k_tiles;
        let kv_heads = k.dim(1);
        let b = bhk / kv_heads;
        let kvh = bhk % kv_heads;
        let group = q.dim(1) / kv_heads;
        let tk = k
            .load_tile_padded::<S4<1, 1, BN, D>>((b, kvh, kt, 0), Padding::Zero)
            .reshape::<S2<BN, D>>();
        let tv = v
            .load_tile_padded::<S4<1, 1, BN, D>>((b, kvh, kt, 0), Padding::Zero)
            .reshape::<S2<BN, D>>();
        let pq = q.partition_padded::<S4<1, 1, BM, D>>(Padding::Zero);
        let pdo = d_o.partition_padded::<S4<1, 1, BM, D>>(Padding::Zero);
        let plse = lse.partition_padded::<S3<1, 1, BM>>(Padding::Zero);
        let pdelta = delta.partition_padded::<S3<1, 1, BM>>(Padding::Zero);
        let c = scale * LOG2_E;
        let q_tiles = (seq_q + (BM - 1)) / BM;
        // One loop, masked when causal: the tiles that see every key pay a `BN x BM` compare and select
        // per step instead of a second, unmasked copy of the loop body (the mask is all true there, so
        // the result is the same). With both loops (masked `[lo, full)`, then unmasked) the causal
        // sm_90 build spilled 176 bytes per thread (248 for ragged `S`) at the 168-register cap and its
        // pipelines took 217 KB of shared memory; with one it has no stack frame and 166 KB, as the
        // non-causal kernel (tileiras 13.5.37, `cargo xtask kernels --filter attn_bwd_dkdv`). Session
        // 27; not yet timed on the GPU.
        let lo = first_query_tile::<BM, BN, CAUSAL>(kt, off, q_tiles);
        let mut acc = (zeros::<f32, S2<BN, D>>(), zeros::<f32, S2<BN, D>>());
        for g in 0..group {
            let h = kvh * group + g;
            for i in lo..q_tiles {
                let at = (i, kt, off);
                acc = dkdv_step::<E, BM, BN, D, CAUSAL>(
                    tk,
                    tv,
                    pq,
                    pdo,
                    plse,
                    pdelta,
                    (b, h),
                    c,
                    at,
                    acc,
                );
            }
        }
        let (dk_acc, dv_acc) = acc;
        let dk_out = (dk_acc * scale).cast::<E>().reshape::<S4<1, 1, BN, D>>();
        let dv_out = dv_acc.cast::<E>().reshape::<S4<1, 1, BN, D>>();
        // SAFETY: blocks map one-to-one to (batch, K/V head, key tile): each tile has one writer.
        unsafe { dk.store_at((b, kvh, kt, 0), dk_out) };
        // SAFETY: as for `dk`.
        unsafe { dv.store_at((b, kvh, kt, 0), dv_out) };
    }

    /// `dQ` of one query tile.
    ///
    /// Grid: `B·H · ceil(S_q / BM)` blocks, e.g. `(B·H, ceil(S_q / BM), 1)` (linear order, a head's query
    /// tiles consecutive, the causal ones heaviest first). Parameters as [`attn_bwd_dkdv`]'s; `dq`
    /// (`[B, H, S_q, D]`).
    #[cutile::entry(occupancy = 2)]
    #[allow(clippy::too_many_arguments)]
    pub fn attn_bwd_dq<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        d_o: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        lse: &Tensor<f32, S3<DYN, DYN, DYN>>,
        delta: &Tensor<f32, S3<DYN, DYN, DYN>>,
        scale: Scalar<f32>,
        off: Scalar<i32>,
        dq: &mut Tensor<E, S4<1, 1, BM, D>>,
    ) {
        let (x, y, _) = block_id();
        let (nx, _, _) = num_blocks();
        let linear = y * nx + x;
        let seq_q = q.dim(2);
        let seq_k = k.dim(2);
        let q_tiles = (seq_q + (BM - 1)) / BM;
        let bh = linear / q_tiles;
        let qb = linear % q_tiles;
        let qt = if CAUSAL { q_tiles - 1i32 - qb } else { qb };
        let heads = q.dim(1);
        let b = bh / heads;
        let h = bh % heads;
        let kvh = h / (heads / k.dim(1));
        let tq = q
            .load_tile_padded::<S4<1, 1, BM, D>>((b, h, qt, 0), Padding::Zero)
            .reshape::<S2<BM, D>>();
        let tdo = d_o
            .load_tile_padded::<S4<1, 1, BM, D>>((b, h, qt, 0), Padding::Zero)
            .reshape::<S2<BM, D>>();
        let nl = neg_lse2_col(
            lse.load_tile_padded::<S3<1, 1, BM>>((b, h, qt), Padding::Zero)
                .reshape::<S2<BM, 1>>(),
        );
        let dl = delta
            .load_tile_padded::<S3<1, 1, BM>>((b, h, qt), Padding::Zero)
            .reshape::<S2<BM, 1>>();
        let pk = k.partition_padded::<S4<1, 1, BN, D>>(Padding::Zero);
        let pv = v.partition_padded::<S4<1, 1, BN, D>>(Padding::Zero);
        let c = scale * LOG2_E;
        let (full, end) = key_tiles::<BM, BN, CAUSAL>(qt, off, seq_k);
        let mut acc = zeros::<f32, S2<BM, D>>();
        for j in 0..full {
            let tk = pk.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            acc = dq_step::<E, BM, BN, D, CAUSAL, false>(
                tq,
                tdo,
                tk,
                tv,
                nl,
                dl,
                c,
                (j, qt, off, seq_k),
                acc,
            );
        }
        for j in full..end {
            let tk = pk.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((b, kvh, j, 0)).reshape::<S2<BN, D>>();
            acc = dq_step::<E, BM, BN, D, CAUSAL, true>(
                tq,
                tdo,
                tk,
                tv,
                nl,
                dl,
                c,
                (j, qt, off, seq_k),
                acc,
            );
        }
        let out = (acc * scale).cast::<E>().reshape::<S4<1, 1, BM, D>>();
        // SAFETY: blocks map one-to-one to (batch·head, query tile): each tile has one writer.
        unsafe { dq.store_at((b, h, qt, 0), out) };
    }

    /// `-lse · log2 e` of a row of queries, `-inf` where `lse` is `-inf` (a query that sees no key: every
    /// `P` of it becomes `exp2(-inf) = 0`).
    fn neg_lse2<const BM: i32>(lse: Tile<f32, S2<1, BM>>) -> Tile<f32, S2<1, BM>> {
        let nl = lse * (-LOG2_E);
        select(
            nl == f32::INFINITY,
            full::<f32, S2<1, BM>>(f32::NEG_INFINITY),
            nl,
        )
    }

    /// [`neg_lse2`] of a column of queries.
    fn neg_lse2_col<const BM: i32>(lse: Tile<f32, S2<BM, 1>>) -> Tile<f32, S2<BM, 1>> {
        let nl = lse * (-LOG2_E);
        select(
            nl == f32::INFINITY,
            full::<f32, S2<BM, 1>>(f32::NEG_INFINITY),
            nl,
        )
    }

    /// The first query tile that sees a key of key tile `kt` (queries at positions `i + off`, `q_tiles`
    /// tiles); tiles before it see none. Not causal: 0, every tile sees every key.
    fn first_query_tile<const BM: i32, const BN: i32, const CAUSAL: bool>(
        kt: Scalar<i32>,
        off: Scalar<i32>,
        q_tiles: Scalar<i32>,
    ) -> Scalar<i32> {
        if CAUSAL {
            // Some query of tile i sees a key of the tile when i·BM + BM - 1 + off ≥ kt·BN.
            (((kt * BN - off - (BM - 1)).max(0i32) + (BM - 1)) / BM).min(q_tiles)
        } else {
            scalar::<i32>(0i32)
        }
    }

    /// Key tiles of query tile `qt`: `[0, full)` need no mask, `[full, end)` do (keys past `seq_k`,
    /// and after the query when causal); tiles from `end` on are not visited.
    fn key_tiles<const BM: i32, const BN: i32, const CAUSAL: bool>(
        qt: Scalar<i32>,
        off: Scalar<i32>,
        seq_k: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>) {
        let tiles = (seq_k + (BN - 1)) / BN;
        let in_bounds = seq_k / BN;
        if CAUSAL {
            let first = qt * BM + off;
            let last = first + (BM - 1);
            let end = (((last + 1i32).max(0i32) + (BN - 1)) / BN).min(tiles);
            let full = ((first + 1i32).max(0i32) / BN).min(in_bounds).min(end);
            (full, end)
        } else {
            (in_bounds, tiles)
        }
    }

    /// One query tile folded into the `(dK, dV)` accumulators of a key tile, in the transposed
    /// orientation (`BN x BM` tiles). The query tile is loaded from the partitions of `q`, `dO`, `lse`
    /// and `delta` at (batch, head) `bh`; `at`: (query tile, key tile, position shift), used when `MASK`
    /// (causal, keys after the query).
    #[allow(clippy::too_many_arguments)]
    fn dkdv_step<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const MASK: bool,
    >(
        tk: Tile<E, S2<BN, D>>,
        tv: Tile<E, S2<BN, D>>,
        pq: Partition<E, S4<1, 1, BM, D>>,
        pdo: Partition<E, S4<1, 1, BM, D>>,
        plse: Partition<f32, S3<1, 1, BM>>,
        pdelta: Partition<f32, S3<1, 1, BM>>,
        bh: (Scalar<i32>, Scalar<i32>),
        c: Scalar<f32>,
        at: (Scalar<i32>, Scalar<i32>, Scalar<i32>),
        acc: (Tile<f32, S2<BN, D>>, Tile<f32, S2<BN, D>>),
    ) -> (Tile<f32, S2<BN, D>>, Tile<f32, S2<BN, D>>) {
        let (dk, dv) = acc;
        let (b, h) = bh;
        let (i, kt, off) = at;
        let tq = pq.load((b, h, i, 0)).reshape::<S2<BM, D>>();
        let tdo = pdo.load((b, h, i, 0)).reshape::<S2<BM, D>>();
        let nl = neg_lse2(plse.load((b, h, i)).reshape::<S2<1, BM>>());
        let dl = pdelta.load((b, h, i)).reshape::<S2<1, BM>>();
        let st = mma(tk, tq.transpose(), zeros::<f32, S2<BN, BM>>());
        let x = fma(st, c, nl.broadcast::<S2<BN, BM>>());
        let x = if MASK {
            let keys = (iota::<BN>() + kt * BN)
                .reshape::<S2<BN, 1>>()
                .broadcast::<S2<BN, BM>>();
            let pos = (iota::<BM>() + (i * BM + off))
                .reshape::<S2<1, BM>>()
                .broadcast::<S2<BN, BM>>();
            select(keys <= pos, x, f32::NEG_INFINITY)
        } else {
            x
        };
        let pt = x.exp2_ftz();
        let dv = mma(pt.cast::<E>(), tdo, dv);
        let dpt = mma(tv, tdo.transpose(), zeros::<f32, S2<BN, BM>>());
        let dst = pt * (dpt - dl.broadcast::<S2<BN, BM>>());
        let dk = mma(dst.cast::<E>(), tq, dk);
        (dk, dv)
    }

    /// One key tile folded into the `dQ` accumulator of a query tile. `nl`, `dl`: the tile's
    /// `-lse · log2 e` and `delta` as columns; `at`: (key tile, query tile, position shift, `seq_k`),
    /// used when `MASK` (keys past `seq_k`, and after the query when `CAUSAL`).
    #[allow(clippy::too_many_arguments)]
    fn dq_step<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
        const MASK: bool,
    >(
        tq: Tile<E, S2<BM, D>>,
        tdo: Tile<E, S2<BM, D>>,
        tk: Tile<E, S2<BN, D>>,
        tv: Tile<E, S2<BN, D>>,
        nl: Tile<f32, S2<BM, 1>>,
        dl: Tile<f32, S2<BM, 1>>,
        c: Scalar<f32>,
        at: (Scalar<i32>, Scalar<i32>, Scalar<i32>, Scalar<i32>),
        acc: Tile<f32, S2<BM, D>>,
    ) -> Tile<f32, S2<BM, D>> {
        let (j, qt, off, seq_k) = at;
        let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>());
        let x = fma(s, c, nl.broadcast::<S2<BM, BN>>());
        let x = if MASK {
            let keys = (iota::<BN>() + j * BN)
                .reshape::<S2<1, BN>>()
                .broadcast::<S2<BM, BN>>();
            let mut valid = keys < seq_k;
            if CAUSAL {
                let pos = (iota::<BM>() + (qt * BM + off))
                    .reshape::<S2<BM, 1>>()
                    .broadcast::<S2<BM, BN>>();
                valid &= keys <= pos;
            }
            select(valid, x, f32::NEG_INFINITY)
        } else {
            x
        };
        let p = x.exp2_ftz();
        let dp = mma(tdo, tv.transpose(), zeros::<f32, S2<BM, BN>>());
        let ds = p * (dp - dl.broadcast::<S2<BM, BN>>());
        mma(ds.cast::<E>(), tk, acc)
    }
}
