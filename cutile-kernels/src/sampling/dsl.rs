//! The sampling kernels, one block per row of `x: [T, V]` (any row stride), walking the row in `BN`-wide
//! chunks with f32 comparisons (exact for bf16, f16 and f32 inputs):
//!
//! - `argmax`: one pass; per chunk the max and the smallest column holding it, folded into the running
//!   best only when strictly greater, so ties go to the smaller index. Columns past `V` read −∞ and can
//!   only "win" when the running best is −∞ too, which never replaces index 0 (strict comparison).
//! - top-k, two launches (the row is read once, by many blocks):
//!   - `topk_chunks`: one block per `BN`-wide chunk of a row (grid `T · chunks`); the chunk is loaded
//!     once into registers and `k` selection rounds over it give the chunk's own top-k, sorted, into
//!     the candidate scratch (`cand_v` f32, `cand_i` i32 column, `[T · chunks, KP]`; slots past `k`, and
//!     slots of a chunk with fewer than `k` columns, hold `(−∞, i32::MAX)`, i.e. "no candidate");
//!   - `topk_merge`: one block per row; the row's `chunks · KP` candidates (`≤ MB`) are loaded once and
//!     `k` rounds over them give the row's top-k. The global top-k is a subset of the union of the
//!     chunks' top-k, so this is exact.
//!
//!   A round finds the largest element that comes after the previous round's `(value, index)` in the
//!   order (value descending, index ascending), so outputs are sorted descending with ties to the
//!   smaller index.
//! - `topk`: the one-launch form for rows too wide for the merge tile (more than `MB_MAX` candidates):
//!   `k` rounds, each a pass over the whole row (from L2 for rows that fit).
//!
//! NaN inputs give unspecified (but in-range) indices.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
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

    /// Stage 1 of top-k: the `k` largest of each `BN`-wide chunk of each row, sorted descending (ties:
    /// smaller index first), `k ≤ KP`, with their columns. Block `b` takes row `b / chunks`, chunk
    /// `b % chunks`. Grid: the tiles of `cand_v` (`[T · chunks, KP]`).
    #[cutile::entry(occupancy = 4)]
    pub fn topk_chunks<E: Float, const KP: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        k: Scalar<i32>,
        chunks: Scalar<i32>,
        cand_v: &mut Tensor<f32, S2<1, KP>>,
        cand_i: &mut Tensor<i32, S2<1, KP>>,
    ) {
        let b = block_id_x();
        let row = b / chunks;
        let j = b - row * chunks;
        let v = x.dim(1);
        let cols = iota::<BN>() + j * BN;
        let inb = cols < v;
        let t = x
            .gather((row.splat::<S1<BN>>(), cols), Some(inb), 0.0)
            .cast::<f32>();
        let ninf = full::<f32, S1<BN>>(f32::NEG_INFINITY);
        let imax = full::<i32, S1<BN>>(i32::MAX);
        let slots = iota::<KP>();
        let mut out_v = full::<f32, S1<KP>>(f32::NEG_INFINITY);
        let mut out_i = full::<i32, S1<KP>>(i32::MAX);
        // The previous round's pick; round 0 starts above everything.
        let mut pv = full::<f32, S1<1>>(f32::INFINITY);
        let mut pi = full::<i32, S1<1>>(-1);
        for r in 0..k {
            let pvb = pv.broadcast::<S1<BN>>();
            let after = (t < pvb) | ((t == pvb) & (cols > pi.broadcast::<S1<BN>>()));
            let cand = inb & after;
            let m = select(cand, t, ninf).amax::<0>();
            let hit = cand & (t == m.broadcast::<S1<BN>>());
            let mi = select(hit, cols, imax).amin::<0>();
            let here = slots == r;
            out_v = select(here, m.broadcast::<S1<KP>>(), out_v);
            out_i = select(here, mi.broadcast::<S1<KP>>(), out_i);
            pv = m;
            pi = mi;
        }
        cand_v.store(out_v.reshape::<S2<1, KP>>());
        cand_i.store(out_i.reshape::<S2<1, KP>>());
    }

    /// Stage 2 of top-k: the `k` largest of each row's candidates (`cand_v`, `cand_i`: `[T, n]`, `n ≤
    /// MB`, column `i32::MAX` = no candidate), sorted descending (ties: smaller column first). Grid:
    /// the tiles of `values` (one row per block).
    #[cutile::entry(occupancy = 4)]
    pub fn topk_merge<E: Float, const KP: i32, const MB: i32>(
        cand_v: &Tensor<f32, S2<DYN, DYN>>,
        cand_i: &Tensor<i32, S2<DYN, DYN>>,
        k: Scalar<i32>,
        values: &mut Tensor<E, S2<1, KP>>,
        indices: &mut Tensor<i64, S2<1, KP>>,
    ) {
        let row = block_id_x();
        let n = cand_v.dim(1);
        let rr = row.splat::<S1<MB>>();
        let pos = iota::<MB>();
        let inb = pos < n;
        let t = cand_v.gather((rr, pos), Some(inb), f32::NEG_INFINITY);
        let ci = cand_i.gather((rr, pos), Some(inb), i32::MAX);
        let valid = ci != full::<i32, S1<MB>>(i32::MAX);
        let ninf = full::<f32, S1<MB>>(f32::NEG_INFINITY);
        let imax = full::<i32, S1<MB>>(i32::MAX);
        let slots = iota::<KP>();
        let mut out_v = zeros::<f32, S1<KP>>();
        let mut out_i = zeros::<i32, S1<KP>>();
        let mut pv = full::<f32, S1<1>>(f32::INFINITY);
        let mut pi = full::<i32, S1<1>>(-1);
        for r in 0..k {
            let pvb = pv.broadcast::<S1<MB>>();
            let after = (t < pvb) | ((t == pvb) & (ci > pi.broadcast::<S1<MB>>()));
            let cand = valid & after;
            let m = select(cand, t, ninf).amax::<0>();
            let hit = cand & (t == m.broadcast::<S1<MB>>());
            let mi = select(hit, ci, imax).amin::<0>();
            let here = slots == r;
            out_v = select(here, m.broadcast::<S1<KP>>(), out_v);
            out_i = select(here, mi.broadcast::<S1<KP>>(), out_i);
            pv = m;
            pi = mi;
        }
        values.store(out_v.cast::<E>().reshape::<S2<1, KP>>());
        indices.store(out_i.cast::<i64>().reshape::<S2<1, KP>>());
    }

    /// The `k` largest of each row, sorted descending (ties: smaller index first), `k ≤ KP`, in one
    /// launch of `k` passes over the row (for rows with too many chunks for `topk_merge`). Grid: the
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
