//! The sampling kernels, one block per row of `x: [T, V]` (any row stride), walking the row in `BN`-wide
//! chunks with f32 comparisons (exact for bf16, f16 and f32 inputs):
//!
//! - `argmax`: one pass; per chunk the max and the smallest column holding it, folded into the running
//!   best only when strictly greater, so ties go to the smaller index. Columns past `V` read −∞ and can
//!   only "win" when the running best is −∞ too, which never replaces index 0 (strict comparison).
//! - top-k, two or three launches (the row is read once, by many blocks), all in the order (value
//!   descending, index ascending), so outputs are sorted descending with ties to the smaller index:
//!   - `topk_chunks`: one block per `BN`-wide chunk of a row (grid `T · chunks`); the chunk is loaded
//!     once into registers and its top-`k` set found by a bisection of the `k`-th largest order key
//!     (one count per key bit: 16 rounds for bf16, 19 for f16, 32 for f32, whatever `k`), written
//!     unsorted but in column order into the candidate scratch (`cand_v` f32, `cand_i` i32 column,
//!     `[T · chunks, KP]`; unused slots hold `(−∞, i32::MAX)`, i.e. "no candidate");
//!   - `topk_select` (rows of several chunks): one block per row; the same bisection over the row's
//!     `chunks · KP` candidates (`≤ MB`) gives the row's top-`k` set. The global top-k is a subset of
//!     the union of the chunks' top-k, so this is exact;
//!   - `topk_sort`: one block per row sorts the row's `k` members by a `KP x KP` comparison (a
//!     member's output slot is the number of members before it).
//! - `topk`: the one-launch form for rows too wide for the selection tile (more than `MB_MAX`
//!   candidates): `k` argmax rounds, each a pass over the whole row (from L2 for rows that fit).
//!
//! NaN inputs give unspecified (but in-range) indices.

/// The top-k selection on tiles (plain Rust over DSL values, traced into the kernels; its loops
/// unroll at trace time).
pub mod select {
    use cutile::core::*;

    /// Bits of the f32 image of `E` that can differ between two values of `E`: 16 for bf16, 19 for
    /// f16 (10 mantissa + 5 exponent + sign, shifted by 13 in f32), 32 for f32. Trace-time constant.
    pub fn key_bits<E: Float>() -> i32 {
        match E::SCALAR {
            cutile_ir::ScalarType::BF16 => 16,
            cutile_ir::ScalarType::F16 => 19,
            _ => 32,
        }
    }

    /// Order keys of f32 images of `E` values: `a > b` as values iff `key(a) > key(b)` (±0 are one
    /// key; NaN sorts above +∞ or below −∞ by its sign bit, a total order all the same). The f32 bits
    /// of a negative value have their magnitude bits flipped, then the key keeps its top
    /// [`key_bits`] bits (an arithmetic shift: no two values of `E` share a key), so the bisection of
    /// [`top_set`] needs one round per bit.
    pub fn order_key<E: Float, S: Shape>(v: Tile<f32, S>) -> Tile<i32, S> {
        let b = select(v.cmp_eq(0.0f32), zeros::<i32, S>(), v.bitcast::<i32>());
        let k = select(b.cmp_lt(0i32), b ^ 0x7FFF_FFFFi32, b);
        k >> (32 - key_bits::<E>())
    }

    /// The top-`k` set of the `valid` elements of `key` (the `k` largest keys, ties to the smaller
    /// position; all of them when fewer than `k` are valid): `(sel, pos)`, the membership and, for
    /// members, the rank of the position among members (so members keep their position order), and
    /// the member count. The `k`-th largest key is found bit by bit from the top (`key_bits` rounds of
    /// one count each, against `2·k` reductions for `k` argmax rounds); the members are the keys above
    /// it and the first `k − (count above)` keys equal to it.
    #[allow(clippy::type_complexity)]
    pub fn top_set<E: Float, const N: i32>(
        key: Tile<i32, S1<N>>,
        valid: Tile<bool, S1<N>>,
        k: Scalar<i32>,
    ) -> (Tile<bool, S1<N>>, Tile<i32, S1<N>>, Tile<i32, S1<1>>) {
        let bits = key_bits::<E>();
        // Keys are `bits`-bit signed; `u = key + half` is their unsigned image, built MSB first.
        let half = (1i64 << (bits - 1)) as u32 as i32;
        let mut prefix = zeros::<i32, S1<1>>();
        for b in (0..bits).rev() {
            let cand = prefix | ((1i64 << b) as u32 as i32);
            let thr = (cand - half).broadcast::<S1<N>>();
            let count = (valid & key.cmp_ge(thr)).cast::<i32>().sum::<0>();
            prefix = select(count.cmp_ge(k), cand, prefix);
        }
        let thr = (prefix - half).broadcast::<S1<N>>();
        let above = valid & key.cmp_gt(thr);
        let tie = valid & key.cmp_eq(thr);
        let room = (k.splat::<S1<1>>() - above.cast::<i32>().sum::<0>()).broadcast::<S1<N>>();
        let sel = above | (tie & tie.cast::<i32>().cumsum::<0>().cmp_le(room));
        let pos = sel.cast::<i32>().cumsum::<0>() - 1i32;
        (sel, pos, sel.cast::<i32>().sum::<0>())
    }

    /// `t` along the rows of a `KP x KP` tile (`[i, j] = t[i]`).
    pub fn per_row<const KP: i32>(t: Tile<i32, S1<KP>>) -> Tile<i32, S2<KP, KP>> {
        t.reshape::<S2<KP, 1>>().broadcast::<S2<KP, KP>>()
    }

    /// `t` along the columns of a `KP x KP` tile (`[i, j] = t[j]`).
    pub fn per_col<const KP: i32>(t: Tile<i32, S1<KP>>) -> Tile<i32, S2<KP, KP>> {
        t.reshape::<S2<1, KP>>().broadcast::<S2<KP, KP>>()
    }
}

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use super::select::{order_key, per_col, per_row, top_set};
    use cutile::core::*;

    /// `out[t] = argmax(x[t, :])`. Grid: the tiles of `out` (one row per block).
    #[cutile::entry]
    pub fn argmax<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        out: &mut Tensor<i64, S1<1>>,
    ) {
        let row = block_id_x();
        let px = x.partition_padded::<S2<1, BN>>(Padding::NegInf);
        let mut best = full::<f32, S1<1>>(f32::NEG_INFINITY);
        let mut bidx = zeros::<i32, S1<1>>();
        for j in 0..px.num_tiles(1) {
            let t = px.load((row, j)).cast::<f32>().reshape::<S1<BN>>();
            let m = t.amax::<0>();
            let cols = iota::<BN>() + j * BN;
            let hit = t == m.broadcast::<S1<BN>>();
            let ci = select(hit, cols, full::<i32, S1<BN>>(i32::MAX)).amin::<0>();
            let better = m > best;
            bidx = select(better, ci, bidx);
            best = select(better, m, best);
        }
        out.store(bidx.cast::<i64>());
    }

    /// Writes the members of a top set (`sel`, at slots `pos`) and `(−∞, i32::MAX)` ("no candidate")
    /// into slots `n ..KP` of row `r` of `out_v`, `out_i`.
    #[allow(clippy::too_many_arguments)]
    fn put_set<const N: i32, const KP: i32>(
        out_v: &mut Tensor<f32, S2<DYN, DYN>>,
        out_i: &mut Tensor<i32, S2<DYN, DYN>>,
        r: Scalar<i32>,
        v: Tile<f32, S1<N>>,
        col: Tile<i32, S1<N>>,
        sel: Tile<bool, S1<N>>,
        pos: Tile<i32, S1<N>>,
        n: Tile<i32, S1<1>>,
    ) {
        let rn = r.splat::<S1<N>>();
        let slots = iota::<KP>();
        let empty = slots >= n.broadcast::<S1<KP>>();
        let rk = r.splat::<S1<KP>>();
        let none_v = full::<f32, S1<KP>>(f32::NEG_INFINITY);
        let none_i = full::<i32, S1<KP>>(i32::MAX);
        // SAFETY: row `r` belongs to this block alone; members take distinct slots `< n` and the
        // empty marks the slots `>= n`.
        unsafe {
            out_v.scatter((rn, pos), v, Some(sel));
            out_i.scatter((rn, pos), col, Some(sel));
            out_v.scatter((rk, slots), none_v, Some(empty));
            out_i.scatter((rk, slots), none_i, Some(empty));
        }
    }

    /// Stage 1 of top-k: the top-`k` set of each `BN`-wide chunk of each row (`k ≤ KP`), unsorted but
    /// in column order, into row `b` of `cand_v` (f32 values) and `cand_i` (columns), `[T · chunks,
    /// KP]`, unused slots `(−∞, i32::MAX)`. Block `b` takes row `b / chunks`, chunk `b % chunks`.
    /// Grid `T · chunks`.
    #[cutile::entry(occupancy = 4)]
    pub fn topk_chunks<E: Float, const KP: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        k: Scalar<i32>,
        chunks: Scalar<i32>,
        cand_v: &mut Tensor<f32, S2<DYN, DYN>>,
        cand_i: &mut Tensor<i32, S2<DYN, DYN>>,
    ) {
        let b = block_id_x();
        let row = b / chunks;
        let j = b - row * chunks;
        let cols = iota::<BN>() + j * BN;
        let inb = cols < x.dim(1);
        let t = x
            .gather((row.splat::<S1<BN>>(), cols), Some(inb), 0.0)
            .cast::<f32>();
        let (sel, pos, n) = top_set::<E, BN>(order_key::<E, S1<BN>>(t), inb, k);
        put_set::<BN, KP>(cand_v, cand_i, b, t, cols, sel, pos, n);
    }

    /// Stage 2 of top-k (rows of more than one chunk): the top-`k` set of each row's candidates
    /// (`cand_v`, `cand_i`: `[T, n]`, `n ≤ MB`, in column order, column `i32::MAX` = none), unsorted in
    /// column order, into row `r` of `sel_v`, `sel_i` (`[T, KP]`). Grid `T`.
    #[cutile::entry(occupancy = 4)]
    pub fn topk_select<E: Float, const KP: i32, const MB: i32>(
        cand_v: &Tensor<f32, S2<DYN, DYN>>,
        cand_i: &Tensor<i32, S2<DYN, DYN>>,
        k: Scalar<i32>,
        sel_v: &mut Tensor<f32, S2<DYN, DYN>>,
        sel_i: &mut Tensor<i32, S2<DYN, DYN>>,
    ) {
        let row = block_id_x();
        let rr = row.splat::<S1<MB>>();
        let at = iota::<MB>();
        let inb = at < cand_v.dim(1);
        let t = cand_v.gather((rr, at), Some(inb), f32::NEG_INFINITY);
        let ci = cand_i.gather((rr, at), Some(inb), i32::MAX);
        let valid = ci != i32::MAX;
        let (sel, pos, n) = top_set::<E, MB>(order_key::<E, S1<MB>>(t), valid, k);
        put_set::<MB, KP>(sel_v, sel_i, row, t, ci, sel, pos, n);
    }

    /// Last stage of top-k: row `r` of `sel_v`, `sel_i` (`[T, KP]`, the row's `k` members in any
    /// order, unused slots with column `i32::MAX`) sorted into `values[r, ..k]` and `indices[r, ..k]`:
    /// a member's slot is the number of members before it in (value descending, column ascending)
    /// order, from a `KP x KP` comparison. Grid `T`.
    #[cutile::entry(occupancy = 4)]
    pub fn topk_sort<E: Float, const KP: i32>(
        sel_v: &Tensor<f32, S2<DYN, DYN>>,
        sel_i: &Tensor<i32, S2<DYN, DYN>>,
        k: Scalar<i32>,
        values: &mut Tensor<E, S2<DYN, DYN>>,
        indices: &mut Tensor<i64, S2<DYN, DYN>>,
    ) {
        let row = block_id_x();
        let rr = row.splat::<S1<KP>>();
        let slots = iota::<KP>();
        let inb = slots < sel_v.dim(1);
        let v = sel_v.gather((rr, slots), Some(inb), f32::NEG_INFINITY);
        let ci = sel_i.gather((rr, slots), Some(inb), i32::MAX);
        let valid = ci != i32::MAX;
        let key = order_key::<E, S1<KP>>(v);
        let (ki, kj) = (per_row::<KP>(key), per_col::<KP>(key));
        let (ii, ij) = (per_row::<KP>(ci), per_col::<KP>(ci));
        let vj = valid.reshape::<S2<1, KP>>().broadcast::<S2<KP, KP>>();
        let before = vj & ((kj > ki) | ((kj == ki) & (ij < ii)));
        let rank = before.cast::<i32>().sum::<1>().reshape::<S1<KP>>();
        let write = valid & (rank < k);
        // SAFETY: row `r` belongs to this block; members have distinct ranks.
        unsafe {
            values.scatter((rr, rank), v.cast::<E>(), Some(write));
            indices.scatter((rr, rank), ci.cast::<i64>(), Some(write));
        }
    }

    /// The `k` largest of each row, sorted descending (ties: smaller index first), `k ≤ KP`, in one
    /// launch of `k` passes over the row (for rows with too many chunks for `topk_select`). Grid: the
    /// tiles of `values` (one row per block).
    #[cutile::entry]
    pub fn topk<E: Float, const KP: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        k: Scalar<i32>,
        values: &mut Tensor<E, S2<1, KP>>,
        indices: &mut Tensor<i64, S2<1, KP>>,
    ) {
        let row = block_id_x();
        let v = x.dim(1);
        let rr = row.splat::<S1<BN>>();
        let none = full::<i32, S1<1>>(i32::MAX);
        let slots = iota::<KP>();
        let mut out_v = zeros::<f32, S1<KP>>();
        let mut out_i = zeros::<i32, S1<KP>>();
        // The previous round's pick; round 0 starts above everything.
        let mut pv = full::<f32, S1<1>>(f32::INFINITY);
        let mut pi = full::<i32, S1<1>>(-1);
        let chunks = (v + BN - 1) / BN;
        for r in 0..k {
            let mut m = full::<f32, S1<1>>(f32::NEG_INFINITY);
            let mut mi = none;
            for j in 0..chunks {
                let cols = iota::<BN>() + j * BN;
                let inb = cols < v;
                let t = x.gather((rr, cols), Some(inb), 0.0).cast::<f32>();
                let pvb = pv.broadcast::<S1<BN>>();
                let after = (t < pvb) | ((t == pvb) & (cols > pi.broadcast::<S1<BN>>()));
                let cand = inb & after;
                let cm = select(cand, t, full::<f32, S1<BN>>(f32::NEG_INFINITY)).amax::<0>();
                let hit = cand & (t == cm.broadcast::<S1<BN>>());
                let ci = select(hit, cols, full::<i32, S1<BN>>(i32::MAX)).amin::<0>();
                let take = (ci != none) & ((cm > m) | (mi == none));
                m = select(take, cm, m);
                mi = select(take, ci, mi);
            }
            let here = slots == r;
            out_v = select(here, m.broadcast::<S1<KP>>(), out_v);
            out_i = select(here, mi.broadcast::<S1<KP>>(), out_i);
            pv = m;
            pi = mi;
        }
        values.store(out_v.cast::<E>().reshape::<S2<1, KP>>());
        indices.store(out_i.cast::<i64>().reshape::<S2<1, KP>>());
    }
}
