//! Decode attention kernels: a few query tokens per sequence against a KV cache, split over the keys.
//!
//! Block `(b, kvh, split)` owns the query rows of KV head `kvh` of sequence `b`: the `G = Hq / Hkv` query
//! heads sharing that KV head times the `Sq` queries of the sequence, row `r = g·Sq + i` of an `M`-row
//! tile (`M` ≥ `G·Sq`, a power of two; the pad rows hold zero queries and are never stored). It streams
//! the keys `[split·chunk, min((split + 1)·chunk, len))` of the sequence in `BN`-row tiles with an online
//! softmax (base-2 running max of the scaled scores, f32 sum and accumulator, `exp2` with flush to zero,
//! as the prefill kernel). Query `i` of `Sq` sees keys `0 ..= len − Sq + i` (the last `Sq` positions,
//! causal among themselves).
//!
//! Tiles visible to every query run unmasked; the rest (the sequence's tail) mask the scores to −inf and
//! zero the value rows past `len`, so whatever the cache holds there (stale data, NaN) never reaches the
//! output. A tile never crosses the cache's capacity (contiguous: padded load past `S_max`). Paged
//! caches with pages of at least `BN` tokens load a tile from within one page (`BN` divides the block
//! size); smaller pages (`PB` = 16 or 32 tokens, `BN` = 64) load the pages of a tile separately and
//! concatenate them; a page past `len` is replaced by the tile's first page (whose rows the mask then
//! discards). The block table is read only for pages holding keys below `len`. `len` is `seq_lens[b]`
//! clamped to `[0, capacity]`.
//!
//! Caches: contiguous `[B, Hkv, S_max, D]`, or paged `[blocks, block_size, Hkv, D]` (vLLM) with
//! `block_table: [B, max_blocks]` (key `p` of sequence `b` is row `p % block_size` of block
//! `block_table[b, p / block_size]`); `PAGED` picks the layout, contiguous calls pass any i32 matrix as
//! the (unread) block table.
//!
//! Three kernels share the loop ([`attend`]); the two that merge splits each have a merge
//! ([`merge_splits`], [`merge_serial`]):
//! - `decode_partial`: split `s` writes its normalized partial output (f32) and its natural-log LSE
//!   into tile `(b·Hkv + kvh, s)` of `part_o: [B·Hkv, splits, M, D]` / `part_lse: [B·Hkv, splits, M]`;
//!   an empty split writes zeros and −inf. Grid `(B, Hkv, splits)`.
//! - `decode_combine`: merges the splits of `(b, kvh)` LSE-weighted, many splits per load, and
//!   scatters `o` and `lse`. Grid `(B, Hkv, D / DB)`: each block one `DB`-lane slice.
//! - `decode_split_last`: both in one launch: each split writes its partial to `decode_partial`'s
//!   tiles (plain stores, no TMA) and counts itself in on counter `b·Hkv + kvh` (acq_rel, device
//!   scope); the split that counts last merges the `(b, kvh)` partials one split at a time (plain
//!   loads) and resets the counter. Grid `(B, Hkv, splits)`.
//! - `decode_direct`: one split; writes `o` and `lse` itself. Grid `(B, Hkv, 1)`.
//!
//! A query that sees no key (`len = 0`, or `len < Sq`) gets an output of zeros and LSE −inf.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use crate::attention::online::merge::{merge_splits, merged};
    use crate::attention::online::{State, finish, softmax_step};
    use crate::op::arrival;
    use cutile::core::*;

    const LOG2_E: f64 = std::f64::consts::LOG2_E;

    /// KV heads of the cache.
    fn kv_heads<E: ElementType, const D: i32, const PAGED: bool>(
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
    ) -> Scalar<i32> {
        let mut h = k.dim(1);
        if PAGED {
            h = k.dim(2);
        }
        h
    }

    /// Keys the cache can hold per sequence.
    fn capacity<E: ElementType, const D: i32, const PAGED: bool>(
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
    ) -> Scalar<i32> {
        let mut c = k.dim(2);
        if PAGED {
            c = block_table.dim(1) * k.dim(1);
        }
        c
    }

    /// Key tile `j` (keys `j·BN ..`) of KV head `kvh` of sequence `b`.
    fn kv_tile<E: ElementType, const BN: i32, const D: i32, const PAGED: bool>(
        t: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        b: Scalar<i32>,
        kvh: Scalar<i32>,
        j: Scalar<i32>,
    ) -> Tile<E, S2<BN, D>> {
        let mut out = zeros::<E, S2<BN, D>>();
        if PAGED {
            let bs = t.dim(1);
            let key = j * BN;
            let page = block_table
                .gather((b.as_tile(), (key / bs).as_tile()), None, 0)
                .to_scalar();
            out = t
                .load_tile::<S4<1, BN, 1, D>>((page, (key % bs) / BN, kvh, 0))
                .reshape::<S2<BN, D>>();
        } else {
            out = t
                .load_tile_padded::<S4<1, 1, BN, D>>((b, kvh, j, 0), Padding::Zero)
                .reshape::<S2<BN, D>>();
        }
        out
    }

    /// The `M x D` query tile of `(b, kvh)`: row `g·Sq + i` is query `i` of head `kvh·G + g`.
    fn query_tile<E: ElementType, const M: i32, const D: i32>(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        b: Scalar<i32>,
        kvh: Scalar<i32>,
        group: Scalar<i32>,
    ) -> Tile<E, S2<M, D>> {
        let sq = q.dim(2);
        let rows = iota::<M>();
        let valid = (rows < group * sq)
            .reshape::<S2<M, 1>>()
            .broadcast::<S2<M, D>>();
        let head = (rows / sq + kvh * group)
            .reshape::<S2<M, 1>>()
            .broadcast::<S2<M, D>>();
        let qi = (rows % sq).reshape::<S2<M, 1>>().broadcast::<S2<M, D>>();
        let lanes = iota::<D>().reshape::<S2<1, D>>().broadcast::<S2<M, D>>();
        q.gather((b.splat::<S2<M, D>>(), head, qi, lanes), Some(valid), 0)
    }

    /// Key tile `j` (`BN` keys from `j·BN`) of `(b, kvh)` folded into the state. With `PB == BN` one
    /// tile load each for K and V ([`kv_tile`]); with `PB < BN` (paged caches of `PB`-token pages)
    /// `BN / PB` page loads each, concatenated ([`pages_tile`]; four separate score tiles instead
    /// spilled 4 KB per thread in ptxas). `MASKED`: the tail, where values of keys past `len` are zeroed and
    /// scores of keys after a query's position masked.
    #[allow(clippy::too_many_arguments)]
    fn key_step<
        E: MmaOperand<f32>,
        const M: i32,
        const BN: i32,
        const D: i32,
        const PAGED: bool,
        const PB: i32,
        const MASKED: bool,
    >(
        tq: Tile<E, S2<M, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        at: (Scalar<i32>, Scalar<i32>, Scalar<i32>),
        len: Scalar<i32>,
        sq: Scalar<i32>,
        qk_scale: Scalar<f32>,
        st: State<M, D>,
    ) -> State<M, D> {
        let (b, kvh, j) = at;
        let mut out = st;
        if PB == BN {
            let tk = kv_tile::<E, BN, D, PAGED>(k, block_table, b, kvh, j);
            let mut tv = kv_tile::<E, BN, D, PAGED>(v, block_table, b, kvh, j);
            let mut s = mma(tq, tk.transpose(), zeros::<f32, S2<M, BN>>());
            if MASKED {
                let (s_m, tv_m) = mask_keys::<E, M, BN, D>(s, tv, j * BN, len, sq);
                s = s_m;
                tv = tv_m;
            }
            out = softmax_step::<E, M, BN, D, MASKED>(s, tv, qk_scale, st);
        } else {
            let ids = page_ids::<BN, PB>(block_table, b, j, len);
            let tk = pages_tile::<E, BN, D, PB>(k, ids, kvh);
            let mut tv = pages_tile::<E, BN, D, PB>(v, ids, kvh);
            let mut s = mma(tq, tk.transpose(), zeros::<f32, S2<M, BN>>());
            if MASKED {
                let (s_m, tv_m) = mask_keys::<E, M, BN, D>(s, tv, j * BN, len, sq);
                s = s_m;
                tv = tv_m;
            }
            out = softmax_step::<E, M, BN, D, MASKED>(s, tv, qk_scale, st);
        }
        out
    }

    /// Scores of keys `key0 ..` after each query's last visible key (row `r`: `len − Sq + r % Sq`) set
    /// to −inf, and value rows of keys at or past `len` set to 0 (whatever the cache holds there).
    fn mask_keys<E: MmaOperand<f32>, const M: i32, const N: i32, const D: i32>(
        s: Tile<f32, S2<M, N>>,
        tv: Tile<E, S2<N, D>>,
        key0: Scalar<i32>,
        len: Scalar<i32>,
        sq: Scalar<i32>,
    ) -> (Tile<f32, S2<M, N>>, Tile<E, S2<N, D>>) {
        let keys = iota::<N>() + key0;
        let in_seq = (keys < len).reshape::<S2<N, 1>>().broadcast::<S2<N, D>>();
        let last = ((iota::<M>() % sq) + (len - sq))
            .reshape::<S2<M, 1>>()
            .broadcast::<S2<M, N>>();
        let visible = keys.reshape::<S2<1, N>>().broadcast::<S2<M, N>>() <= last;
        (
            select(visible, s, f32::NEG_INFINITY),
            select(in_seq, tv, 0.0),
        )
    }

    /// The pages of key tile `j` (`BN / PB` of them, from page `j · BN / PB` of sequence `b`; four ids
    /// are returned, the first `BN / PB` used): their block ids, the table read only for pages that
    /// hold a key below `len`; a page past it takes the tile's first page (which holds key `j·BN <
    /// len`, so it is in use), whose rows the mask then discards.
    fn page_ids<const BN: i32, const PB: i32>(
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        b: Scalar<i32>,
        j: Scalar<i32>,
        len: Scalar<i32>,
    ) -> Tile<i32, S1<4>> {
        let pages = iota::<4>() + j * (BN / PB);
        let used = pages * PB < len;
        let ids = block_table.gather((b.splat::<S1<4>>(), pages), Some(used), 0);
        let first = ids.extract::<S1<1>>(&[0]).broadcast::<S1<4>>();
        select(used, ids, first)
    }

    /// Element `i` of a 4-element tile as a scalar.
    fn pick4(t: Tile<i32, S1<4>>, i: i32) -> Scalar<i32> {
        t.extract::<S1<1>>(&[i]).reshape::<S0>().to_scalar()
    }

    /// Rows `0 .. PB` of page `page`, KV head `kvh`, of a paged cache `[blocks, PB, Hkv, D]`.
    fn page_rows<E: ElementType, const PB: i32, const D: i32>(
        t: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        page: Scalar<i32>,
        kvh: Scalar<i32>,
    ) -> Tile<E, S2<PB, D>> {
        t.load_tile::<S4<1, PB, 1, D>>((page, 0, kvh, 0))
            .reshape::<S2<PB, D>>()
    }

    /// The `BN` rows of the `BN / PB` pages `ids` (2 or 4; KV head `kvh`) as one tile: one load per
    /// page, concatenated.
    fn pages_tile<E: ElementType, const BN: i32, const D: i32, const PB: i32>(
        t: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        ids: Tile<i32, S1<4>>,
        kvh: Scalar<i32>,
    ) -> Tile<E, S2<BN, D>> {
        let r0 = page_rows::<E, PB, D>(t, pick4(ids, 0), kvh).reshape::<S3<1, PB, D>>();
        let r1 = page_rows::<E, PB, D>(t, pick4(ids, 1), kvh).reshape::<S3<1, PB, D>>();
        let a = cat::<0, _, _, _, S3<2, PB, D>>(r0, r1);
        let mut out = zeros::<E, S2<BN, D>>();
        if BN == 2 * PB {
            out = a.reshape::<S2<BN, D>>();
        } else {
            let r2 = page_rows::<E, PB, D>(t, pick4(ids, 2), kvh).reshape::<S3<1, PB, D>>();
            let r3 = page_rows::<E, PB, D>(t, pick4(ids, 3), kvh).reshape::<S3<1, PB, D>>();
            let b = cat::<0, _, _, _, S3<2, PB, D>>(r2, r3);
            out = cat::<0, _, _, _, S3<4, PB, D>>(a, b).reshape::<S2<BN, D>>();
        }
        out
    }

    /// The online softmax of block `(b, kvh, split)` over its key range (see the module docs).
    #[allow(clippy::too_many_arguments)]
    fn attend<
        E: MmaOperand<f32>,
        const M: i32,
        const BN: i32,
        const D: i32,
        const PAGED: bool,
        const PB: i32,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        seq_lens: &Tensor<i32, S1<DYN>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        scale: Scalar<f32>,
        chunk: Scalar<i32>,
        b: Scalar<i32>,
        kvh: Scalar<i32>,
        split: Scalar<i32>,
    ) -> State<M, D> {
        let group = q.dim(1) / kv_heads::<E, D, PAGED>(k);
        let sq = q.dim(2);
        let cap = capacity::<E, D, PAGED>(k, block_table);
        let len = seq_lens
            .gather(b.as_tile(), None, 0)
            .to_scalar()
            .min(cap)
            .max(0i32);
        let tq = query_tile::<E, M, D>(q, b, kvh, group);
        let qk_scale = scale * LOG2_E;
        // Key tiles [t_lo, t_end) of this split; [t_lo, t_full) are visible to every query.
        let lo = split * chunk;
        let hi = (lo + chunk).min(len);
        let t_lo = lo / BN;
        let t_end = ((hi + (BN - 1)) / BN).max(t_lo);
        let t_full = ((len - sq + 1i32) / BN).max(t_lo).min(t_end);
        let mut st = (
            full::<f32, S2<M, 1>>(f32::NEG_INFINITY),
            zeros::<f32, S2<M, 1>>(),
            zeros::<f32, S2<M, D>>(),
        );
        for j in t_lo..t_full {
            st = key_step::<E, M, BN, D, PAGED, PB, false>(
                tq,
                k,
                v,
                block_table,
                (b, kvh, j),
                len,
                sq,
                qk_scale,
                st,
            );
        }
        for j in t_full..t_end {
            st = key_step::<E, M, BN, D, PAGED, PB, true>(
                tq,
                k,
                v,
                block_table,
                (b, kvh, j),
                len,
                sq,
                qk_scale,
                st,
            );
        }
        st
    }

    /// Scatter the rows `g·Sq + i < G·Sq` of `out` (lanes `lane0 .. lane0 + DB` of the output) to
    /// `o[b, kvh·G + g, i, lane0 ..]`, and, from the block with `lane0 = 0` only, those of `lse_rows`
    /// to `lse[b, kvh·G + g, i]`.
    #[allow(clippy::too_many_arguments)]
    fn store_rows<E: Float, const M: i32, const DB: i32, const D: i32>(
        out: Tile<f32, S2<M, DB>>,
        lse_rows: Tile<f32, S2<M, 1>>,
        b: Scalar<i32>,
        kvh: Scalar<i32>,
        group: Scalar<i32>,
        sq: Scalar<i32>,
        lane0: Scalar<i32>,
        o: &mut Tensor<E, S4<1, 1, 1, D>>,
        lse: &mut Tensor<f32, S3<1, 1, 1>>,
    ) {
        let rows = iota::<M>();
        let valid = rows < group * sq;
        let head = rows / sq + kvh * group;
        let qi = rows % sq;
        let b1 = b.splat::<S1<M>>();
        let first = (lane0 == 0i32).splat::<S1<M>>();
        // SAFETY: rows of distinct (b, kvh) blocks are distinct query heads, and of one (b, kvh) only
        // the block of lane 0 writes the LSE: each element has one writer.
        unsafe {
            lse.scatter(
                (b1, head, qi),
                lse_rows.reshape::<S1<M>>(),
                Some(valid & first),
            )
        };
        let b2 = b1.reshape::<S2<M, 1>>().broadcast::<S2<M, DB>>();
        let head2 = head.reshape::<S2<M, 1>>().broadcast::<S2<M, DB>>();
        let qi2 = qi.reshape::<S2<M, 1>>().broadcast::<S2<M, DB>>();
        let lanes = (iota::<DB>() + lane0)
            .reshape::<S2<1, DB>>()
            .broadcast::<S2<M, DB>>();
        let ok = valid.reshape::<S2<M, 1>>().broadcast::<S2<M, DB>>();
        // SAFETY: as above; blocks of one (b, kvh) write disjoint lanes.
        unsafe { o.scatter((b2, head2, qi2, lanes), out.cast::<E>(), Some(ok)) };
    }

    /// One split of the keys of `(b, kvh)`: its normalized f32 output and LSE into the scratch tiles
    /// `(b·Hkv + kvh, split)` of `part_o: [B·Hkv, splits, M, D]` and `part_lse: [B·Hkv, splits, M]`.
    /// Grid explicit: `(B, Hkv, splits)`. `chunk`: keys per split, a multiple of `BN`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn decode_partial<
        E: MmaOperand<f32>,
        const M: i32,
        const BN: i32,
        const D: i32,
        const PAGED: bool,
        const PB: i32,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        seq_lens: &Tensor<i32, S1<DYN>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        scale: Scalar<f32>,
        chunk: Scalar<i32>,
        part_o: &mut Tensor<f32, S4<1, 1, M, D>>,
        part_lse: &mut Tensor<f32, S3<1, 1, M>>,
    ) {
        split_partial::<E, M, BN, D, PAGED, PB>(
            q,
            k,
            v,
            seq_lens,
            block_table,
            scale,
            chunk,
            part_o,
            part_lse,
            Hints::default(),
        );
    }

    /// This block's split `(b, kvh, split)` of the keys: its normalized output and LSE stored into
    /// tile `(b·Hkv + kvh, split)` of `part_o` / `part_lse` with `hints`. Returns `(b, kvh, b·Hkv +
    /// kvh)`. Shared by `decode_partial` and `decode_split_last`.
    #[allow(clippy::too_many_arguments)]
    fn split_partial<
        E: MmaOperand<f32>,
        const M: i32,
        const BN: i32,
        const D: i32,
        const PAGED: bool,
        const PB: i32,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        seq_lens: &Tensor<i32, S1<DYN>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        scale: Scalar<f32>,
        chunk: Scalar<i32>,
        part_o: &mut Tensor<f32, S4<1, 1, M, D>>,
        part_lse: &mut Tensor<f32, S3<1, 1, M>>,
        hints: Hints,
    ) -> (Scalar<i32>, Scalar<i32>, Scalar<i32>) {
        let (b, kvh, split) = block_id();
        let (_, hkv, _) = num_blocks();
        let st = attend::<E, M, BN, D, PAGED, PB>(
            q,
            k,
            v,
            seq_lens,
            block_table,
            scale,
            chunk,
            b,
            kvh,
            split,
        );
        let (out, lse) = finish::<M, D>(st);
        let bh = b * hkv + kvh;
        // SAFETY: tile (b·Hkv + kvh, split) is written by block (b, kvh, split) only.
        unsafe {
            part_o.store_at_with((bh, split, 0, 0), out.reshape::<S4<1, 1, M, D>>(), hints);
            part_lse.store_at_with((bh, split, 0), lse.reshape::<S3<1, 1, M>>(), hints);
        }
        (b, kvh, bh)
    }

    /// The whole key range in one block per `(b, kvh)`: writes `o: [B, Hq, Sq, D]` and `lse: [B, Hq,
    /// Sq]` (any strides). Grid explicit: `(B, Hkv, 1)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn decode_direct<
        E: MmaOperand<f32> + Float,
        const M: i32,
        const BN: i32,
        const D: i32,
        const PAGED: bool,
        const PB: i32,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        seq_lens: &Tensor<i32, S1<DYN>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        scale: Scalar<f32>,
        chunk: Scalar<i32>,
        o: &mut Tensor<E, S4<1, 1, 1, D>>,
        lse: &mut Tensor<f32, S3<1, 1, 1>>,
    ) {
        let (b, kvh, _) = block_id();
        let group = q.dim(1) / kv_heads::<E, D, PAGED>(k);
        let st = attend::<E, M, BN, D, PAGED, PB>(
            q,
            k,
            v,
            seq_lens,
            block_table,
            scale,
            chunk,
            b,
            kvh,
            scalar::<i32>(0),
        );
        let (out, lse_rows) = finish::<M, D>(st);
        let lane0 = scalar::<i32>(0);
        store_rows::<E, M, D, D>(out, lse_rows, b, kvh, group, q.dim(2), lane0, o, lse);
    }

    /// [`merge_splits`] one split at a time over all `D` lanes, with plain loads (`decode_split_last`'s
    /// merge: it reads what other blocks stored, ordered by the arrival counter, which TMA loads would
    /// bypass). A load per split waits a round trip each; the stepped merge at any step size made
    /// tileiras spill that kernel (about 1.7–1.9 KB of stack at 16 x 128, sm_90), so it keeps this form.
    fn merge_serial<const M: i32, const D: i32>(
        po: Partition<f32, S4<1, 1, M, D>>,
        pl: Partition<f32, S3<1, 1, M>>,
        bh: Scalar<i32>,
        splits: Scalar<i32>,
    ) -> (Tile<f32, S2<M, D>>, Tile<f32, S2<M, 1>>) {
        let mut m = full::<f32, S2<M, 1>>(f32::NEG_INFINITY);
        let mut l = zeros::<f32, S2<M, 1>>();
        let mut acc = zeros::<f32, S2<M, D>>();
        for s in 0..splits {
            let ls = pl
                .load_with((bh, s, 0), Hints::NO_TMA)
                .reshape::<S2<M, 1>>();
            let os = po
                .load_with((bh, s, 0, 0), Hints::NO_TMA)
                .reshape::<S2<M, D>>();
            let m_new = m.max(ls);
            let m_ref = select(m_new == f32::NEG_INFINITY, 0.0f32, m_new);
            let alpha = ((m - m_ref) * LOG2_E).exp2_ftz();
            let w = ((ls - m_ref) * LOG2_E).exp2_ftz();
            l = fma(l, alpha, w);
            acc = acc * alpha.broadcast::<S2<M, D>>() + os * w.broadcast::<S2<M, D>>();
            m = m_new;
        }
        merged(m, l, acc)
    }

    /// Merge the splits of `(b, kvh)` ([`merge_splits`]) over lanes `slice·DB ..` and scatter that
    /// slice of `o` (and, from slice 0, `lse`). `q` gives the shapes only. Grid explicit: `(B, Hkv,
    /// D / DB)`: the slices spread one row block's merge over several SMs.
    #[cutile::entry]
    pub fn decode_combine<E: Float, const M: i32, const D: i32, const DB: i32>(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        part_o: &Tensor<f32, S4<DYN, DYN, M, D>>,
        part_lse: &Tensor<f32, S3<DYN, DYN, M>>,
        o: &mut Tensor<E, S4<1, 1, 1, D>>,
        lse: &mut Tensor<f32, S3<1, 1, 1>>,
    ) {
        let (b, kvh, slice) = block_id();
        let (_, hkv, _) = num_blocks();
        let group = q.dim(1) / hkv;
        let sq = q.dim(2);
        let (out, lse_rows) = merge_splits::<_, _, _, M, DB>(
            part_o,
            part_lse,
            b * hkv + kvh,
            part_o.dim(1),
            scalar::<i32>(0i32),
            slice,
        );
        store_rows::<E, M, DB, D>(out, lse_rows, b, kvh, group, sq, slice * DB, o, lse);
    }

    /// Split-KV decode in one launch: block `(b, kvh, split)` writes its partial like `decode_partial`
    /// does (tile `(b·Hkv + kvh, split)` of `part_o` / `part_lse`), then adds one to `counters[b·Hkv +
    /// kvh]` with acq_rel ordering at device scope (the partial stores stay before it, every later
    /// access after it, `Tensor::atomic_with`). The block that reads `splits − 1` is the last of its
    /// `(b, kvh)`: every other partial is visible to it, so it resets the counter for the next launch,
    /// merges the `splits` partials in split order ([`merge_serial`]) and scatters `o` and `lse`.
    /// `counters` must be zero at launch (the host's counter pool is zeroed once; every launch leaves
    /// it zero). Grid explicit: `(B, Hkv, splits)`; `chunk` as for `decode_partial`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn decode_split_last<
        E: MmaOperand<f32> + Float,
        const M: i32,
        const BN: i32,
        const D: i32,
        const PAGED: bool,
        const PB: i32,
    >(
        q: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        k: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        v: &Tensor<E, S4<DYN, DYN, DYN, D>>,
        seq_lens: &Tensor<i32, S1<DYN>>,
        block_table: &Tensor<i32, S2<DYN, DYN>>,
        scale: Scalar<f32>,
        chunk: Scalar<i32>,
        o: &mut Tensor<E, S4<1, 1, 1, D>>,
        lse: &mut Tensor<f32, S3<1, 1, 1>>,
        part_o: &mut Tensor<f32, S4<1, 1, M, D>>,
        part_lse: &mut Tensor<f32, S3<1, 1, M>>,
        counters: &mut Tensor<i32, S1<1>>,
    ) {
        let (_, hkv, splits) = num_blocks();
        // The partials cross blocks through the counter's release/acquire, which orders ordinary
        // loads and stores: plain (not TMA) stores here and loads in the merge, so no access goes
        // through the asynchronous proxy, which that ordering alone does not cover (a TMA access
        // would also need a proxy fence, which the DSL does not emit).
        let (b, kvh, bh) = split_partial::<E, M, BN, D, PAGED, PB>(
            q,
            k,
            v,
            seq_lens,
            block_table,
            scale,
            chunk,
            part_o,
            part_lse,
            Hints::NO_TMA,
        );
        if arrival::count_in(counters, bh) == splits - 1 {
            arrival::reset(counters, bh);
            let group = q.dim(1) / hkv;
            let sq = q.dim(2);
            let zero = scalar::<i32>(0);
            let (merged, lse_rows) = merge_serial::<M, D>(
                part_o.partition::<S4<1, 1, M, D>>(),
                part_lse.partition::<S3<1, 1, M>>(),
                bh,
                splits,
            );
            store_rows::<E, M, D, D>(merged, lse_rows, b, kvh, group, sq, zero, o, lse);
        }
    }
}
