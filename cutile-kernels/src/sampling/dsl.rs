//! The sampling kernels over `x: [T, V]` (any row stride), with f32 comparisons (exact for bf16, f16
//! and f32 inputs); every result breaks ties toward the smaller index:
//!
//! - argmax, one launch for rows of one chunk, two otherwise:
//!   - `argmax`: one block per row walking it in `BN`-wide tiles; per tile the max and the smallest
//!     column holding it, folded into the running best only when strictly greater. Columns past `V`
//!     read −∞ and can only "win" when the running best is −∞ too, which never replaces index 0;
//!   - `argmax_chunks` + `argmax_merge`: one block per `BN`-wide chunk of a row (grid `T · chunks`,
//!     so a few decode rows still spread over the SMs) writes its `(max, column)` partial, and one
//!     block per row folds the row's partials the same way.
//! - top-k, two launches or more (the row is read once, by many blocks), all in the order (value
//!   descending, index ascending), so outputs are sorted descending:
//!   - `topk_chunks`: one block per `BN`-wide chunk of a row (grid `T · chunks`); the chunk is loaded
//!     once into registers and its top-`k` set found by a bisection of the `k`-th largest order key
//!     (one count per key bit: 16 rounds for bf16, 19 for f16, 32 for f32, whatever `k`), written
//!     unsorted but in column order into the candidate scratch (`cand_v` f32, `cand_i` i32 column,
//!     `[T · chunks, KP]`; unused slots hold `(−∞, i32::MAX)`, i.e. "no candidate");
//!   - `topk_select` (rows of several chunks), one or more rounds: one block per group of at most
//!     `MB` of a row's candidates runs the same bisection and keeps the group's top-`k` set, until one
//!     set is left per row. The top-k of a union is a subset of the union of its parts' top-k, so each
//!     round is exact;
//!   - `topk_sort`: one block per row sorts the row's `k` members by a `KP x KP` comparison (a
//!     member's output slot is the number of members before it).
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

    /// The max of `x[row, cols]` (columns past `V` masked to −∞) and the smallest column holding it
    /// (`i32::MAX` when none equals it: NaN).
    fn tile_best<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        rows: Tile<i32, S1<BN>>,
        cols: Tile<i32, S1<BN>>,
    ) -> (Tile<f32, S1<1>>, Tile<i32, S1<1>>) {
        let inb = cols < x.dim(1);
        let raw = x.gather((rows, cols), Some(inb), 0.0).cast::<f32>();
        let t = select(inb, raw, full::<f32, S1<BN>>(f32::NEG_INFINITY));
        let m = t.amax::<0>();
        let hit = inb & (t == m.broadcast::<S1<BN>>());
        let ci = select(hit, cols, full::<i32, S1<BN>>(i32::MAX)).amin::<0>();
        (m, ci)
    }

    /// [`tile_best`] with the values compared in their own type (bf16/f16 max and equality: exact, and
    /// no widening to f32, so half the registers per value); masked lanes read −∞. A lane past `V` can
    /// only tie a max of −∞, and then a real column (smaller) ties too, so it never wins.
    fn tile_best_native<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        rows: Tile<i32, S1<BN>>,
        cols: Tile<i32, S1<BN>>,
    ) -> (Tile<f32, S1<1>>, Tile<i32, S1<1>>) {
        let t = x.gather((rows, cols), Some(cols < x.dim(1)), f32::NEG_INFINITY);
        let m = t.amax::<0>();
        let hit = t == m.broadcast::<S1<BN>>();
        let ci = select(hit, cols, full::<i32, S1<BN>>(i32::MAX)).amin::<0>();
        (m.cast::<f32>(), ci)
    }

    /// Block `b = r · chunks + j` of a split argmax: chunk `j` of row `r`'s best (`native`: compared
    /// in the element type), stored as partial `b`; a chunk of NaNs reports its first column.
    fn chunk_partial<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        chunks: Scalar<i32>,
        part_v: &mut Tensor<f32, S1<1>>,
        part_i: &mut Tensor<i32, S1<1>>,
        native: bool,
    ) {
        let b = block_id_x();
        let row = b / chunks;
        let j = b - row * chunks;
        let (rows, cols) = (row.splat::<S1<BN>>(), iota::<BN>() + j * BN);
        let (m, ci) = if native {
            tile_best_native::<E, BN>(x, rows, cols)
        } else {
            tile_best::<E, BN>(x, rows, cols)
        };
        let first = (j * BN).splat::<S1<1>>();
        part_v.store(m);
        part_i.store(select(ci == i32::MAX, first, ci));
    }

    /// `out[t] = argmax(x[t, :])`, the row gathered in `BN`-wide tiles (masked past `V`). Grid: the
    /// tiles of `out` (one row per block).
    #[cutile::entry]
    pub fn argmax<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        out: &mut Tensor<i64, S1<1>>,
    ) {
        let rr = block_id_x().splat::<S1<BN>>();
        let v = x.dim(1);
        let mut best = full::<f32, S1<1>>(f32::NEG_INFINITY);
        let mut bidx = zeros::<i32, S1<1>>();
        for j in 0..(v + BN - 1) / BN {
            let (m, ci) = tile_best::<E, BN>(x, rr, iota::<BN>() + j * BN);
            let better = m > best;
            bidx = select(better, ci, bidx);
            best = select(better, m, best);
        }
        out.store(bidx.cast::<i64>());
    }

    /// Stage 1 of the split argmax (rows of several chunks): the max of chunk `j` of row `r` (block
    /// `b = r · chunks + j`, `BN` columns, masked past `V`) and the smallest column holding it, into
    /// `part_v[b]` (f32) and `part_i[b]`. A chunk of NaNs reports its first column, so every partial
    /// index is in range. Grid `T · chunks`.
    #[cutile::entry]
    pub fn argmax_chunks<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        chunks: Scalar<i32>,
        part_v: &mut Tensor<f32, S1<1>>,
        part_i: &mut Tensor<i32, S1<1>>,
    ) {
        chunk_partial::<E, BN>(x, chunks, part_v, part_i, false);
    }

    /// [`argmax_chunks`] comparing in the element type (the tuner's candidate; see
    /// [`tile_best_native`]).
    #[cutile::entry]
    pub fn argmax_chunks_native<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        chunks: Scalar<i32>,
        part_v: &mut Tensor<f32, S1<1>>,
        part_i: &mut Tensor<i32, S1<1>>,
    ) {
        chunk_partial::<E, BN>(x, chunks, part_v, part_i, true);
    }

    /// [`argmax_chunks_native`] on 8 worker warps (half the values per thread, for the wider chunks).
    #[cutile::entry(num_worker_warps = 8)]
    pub fn argmax_chunks_native8<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        chunks: Scalar<i32>,
        part_v: &mut Tensor<f32, S1<1>>,
        part_i: &mut Tensor<i32, S1<1>>,
    ) {
        chunk_partial::<E, BN>(x, chunks, part_v, part_i, true);
    }

    /// Stage 2 of the split argmax: `out[r]` from row `r` of the partials (`part_v`, `part_i`: `[T,
    /// chunks]`, chunks in column order), walked in `CB`-wide tiles; a tile's best replaces the running
    /// one only when strictly greater, and within a tile ties go to the smaller column, so the result
    /// is the first column holding the row's max (0 for a row of −∞). Grid `T`.
    #[cutile::entry]
    pub fn argmax_merge<const CB: i32>(
        part_v: &Tensor<f32, S2<DYN, DYN>>,
        part_i: &Tensor<i32, S2<DYN, DYN>>,
        out: &mut Tensor<i64, S1<1>>,
    ) {
        let row = block_id_x();
        let rr = row.splat::<S1<CB>>();
        let n = part_v.dim(1);
        let mut best = full::<f32, S1<1>>(f32::NEG_INFINITY);
        let mut bidx = zeros::<i32, S1<1>>();
        for j in 0..(n + CB - 1) / CB {
            let at = iota::<CB>() + j * CB;
            let inb = at < n;
            let v = part_v.gather((rr, at), Some(inb), f32::NEG_INFINITY);
            let i = part_i.gather((rr, at), Some(inb), i32::MAX);
            let m = v.amax::<0>();
            let hit = inb & (v == m.broadcast::<S1<CB>>());
            let ci = select(hit, i, full::<i32, S1<CB>>(i32::MAX)).amin::<0>();
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

    /// A selection round of top-k (rows of more than one chunk): group `g` of row `r` (block `b = r ·
    /// groups + g`) takes the row's candidates `g · MB .. (g + 1) · MB` (`cand_v`, `cand_i`: `[T, n]`,
    /// in column order, column `i32::MAX` = none) and writes their top-`k` set, unsorted in column
    /// order, into row `b` of `sel_v`, `sel_i` (`[T · groups, KP]`): the next round's `[T, groups ·
    /// KP]` candidates, still in column order. Grid `T · groups`.
    #[cutile::entry(occupancy = 4)]
    pub fn topk_select<E: Float, const KP: i32, const MB: i32>(
        cand_v: &Tensor<f32, S2<DYN, DYN>>,
        cand_i: &Tensor<i32, S2<DYN, DYN>>,
        k: Scalar<i32>,
        groups: Scalar<i32>,
        sel_v: &mut Tensor<f32, S2<DYN, DYN>>,
        sel_i: &mut Tensor<i32, S2<DYN, DYN>>,
    ) {
        let b = block_id_x();
        let row = b / groups;
        let g = b - row * groups;
        let rr = row.splat::<S1<MB>>();
        let at = iota::<MB>() + g * MB;
        let inb = at < cand_v.dim(1);
        let t = cand_v.gather((rr, at), Some(inb), f32::NEG_INFINITY);
        let ci = cand_i.gather((rr, at), Some(inb), i32::MAX);
        let valid = ci != i32::MAX;
        let (sel, pos, n) = top_set::<E, MB>(order_key::<E, S1<MB>>(t), valid, k);
        put_set::<MB, KP>(sel_v, sel_i, b, t, ci, sel, pos, n);
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
}
