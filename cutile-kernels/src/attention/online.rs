//! The online softmax the split-KV decode kernels share (`decode` and `mla`): the state of a query
//! tile, the step that folds one key tile into it, the final normalization, and the LSE-weighted merge
//! of split partials ([`merge::merge_splits`]). Plain Rust over DSL values, traced into the kernels
//! that call it.

use cutile::core::*;

/// Lanes of the value width per combine block: a combine spreads one row block's merge
/// ([`merge::merge_splits`]) over `width / MERGE_LANES` lane-slice blocks, so a short call's few row
/// blocks still occupy several SMs.
pub const MERGE_LANES: i32 = 32;

/// Online-softmax state of a query tile: running max (base 2, scaled), running sum, accumulator.
pub type State<const M: i32, const D: i32> = (
    Tile<f32, S2<M, 1>>,
    Tile<f32, S2<M, 1>>,
    Tile<f32, S2<M, D>>,
);

/// Fold the raw scores `s` (masked entries −inf) of one key tile and its values `tv` into the state.
/// `qk_scale` is the softmax scale times `log2 e`. `MASKED`: a row may have no finite score yet, so
/// its max may stay −inf; exponents are then taken against 0 (every term is `exp2(−inf) = 0`).
pub fn softmax_step<
    E: MmaOperand<f32>,
    const M: i32,
    const BN: i32,
    const D: i32,
    const MASKED: bool,
>(
    s: Tile<f32, S2<M, BN>>,
    tv: Tile<E, S2<BN, D>>,
    qk_scale: Scalar<f32>,
    st: State<M, D>,
) -> State<M, D> {
    let (m, l, acc) = st;
    let m_new = m.max(s.amax::<1>() * qk_scale);
    let mut m_ref = m_new;
    if MASKED {
        m_ref = select(m_new.cmp_eq(f32::NEG_INFINITY), 0.0f32, m_new);
    }
    let p = fma(s, qk_scale, (-m_ref).broadcast::<S2<M, BN>>()).exp2_ftz();
    let alpha = (m - m_ref).exp2_ftz();
    let l_new = fma(l, alpha, p.sum::<1>());
    let acc_new = mma(p.cast::<E>(), tv, acc * alpha.broadcast::<S2<M, D>>());
    (m_new, l_new, acc_new)
}

/// The normalized output (zeros where no key was seen) and the natural-log LSE (−inf there).
pub fn finish<const M: i32, const D: i32>(
    st: State<M, D>,
) -> (Tile<f32, S2<M, D>>, Tile<f32, S2<M, 1>>) {
    let (m, l, acc) = st;
    let seen = l.cmp_gt(0.0f32).broadcast::<S2<M, D>>();
    // One reciprocal per row (see `dsl::finish`); rows with `l = 0` are replaced by the `select`.
    let o = select(seen, acc * (1.0f32 / l).broadcast::<S2<M, D>>(), 0.0f32);
    let lse = (m + l.log2()) * std::f64::consts::LN_2;
    (o, lse)
}

/// The merge of split-KV partials (in a DSL module for its device loop over steps).
#[cutile::module]
pub mod merge {
    use cutile::core::shape::rank::{R3, R4};
    use cutile::core::*;

    const LOG2_E: f64 = std::f64::consts::LOG2_E;

    /// The LSE-weighted merge of the `splits` partials of row block `bh = b·Hkv + kvh` over row slice
    /// `row` (rows `row·M ..` of the partials' row tile; 0 where `M` is the whole tile) and lane slice
    /// `slice` (lanes `slice·DB ..`): `o = Σ_s w_s·o_s / Σ_s w_s` with `w_s = exp(lse_s − max lse)`,
    /// `lse = max + ln Σ w_s` (zeros and −inf when every split is empty). Returns the `(o, lse)` rows.
    /// `part_o: [rows, splits, M, D]` of element type `P` (f32, or the call's bf16/f16 where the
    /// split kernel stores its partials rounded; the merge upcasts each load), `part_lse: [rows,
    /// splits, M]`.
    ///
    /// `SC` splits per step: a step issues the `SC` LSE `[M]` and partial `[M, DB]` loads together
    /// (split indices clamped to the last split, the extra splits given LSE −inf) and folds them one
    /// by one into a running max, sum and accumulator, so the merge waits on one round trip per step
    /// instead of one per split (a load pair per split measured 9.4 µs for 16 splits on an H100, more
    /// than half of the 1 × 8k cache's key pass; the stepped form 5.7–5.9 µs, session 35). `SC` is as
    /// large as keeps a step's `SC · M · DB` elements within 8192 (at least 1). Every split is folded in
    /// split order, so the result does not depend on which block runs the merge.
    #[allow(clippy::too_many_arguments)]
    pub fn merge_splits<
        P: ElementType,
        SO: Shape<Rank = R4>,
        SL: Shape<Rank = R3>,
        const M: i32,
        const DB: i32,
    >(
        part_o: &Tensor<P, SO>,
        part_lse: &Tensor<f32, SL>,
        bh: Scalar<i32>,
        splits: Scalar<i32>,
        row: Scalar<i32>,
        slice: Scalar<i32>,
    ) -> (Tile<f32, S2<M, DB>>, Tile<f32, S2<M, 1>>) {
        let per = 8192 / (M * DB);
        if per >= 16 {
            merge_steps::<P, SO, SL, M, DB, 16>(part_o, part_lse, bh, splits, row, slice)
        } else if per >= 8 {
            merge_steps::<P, SO, SL, M, DB, 8>(part_o, part_lse, bh, splits, row, slice)
        } else if per >= 4 {
            merge_steps::<P, SO, SL, M, DB, 4>(part_o, part_lse, bh, splits, row, slice)
        } else if per >= 2 {
            merge_steps::<P, SO, SL, M, DB, 2>(part_o, part_lse, bh, splits, row, slice)
        } else {
            merge_steps::<P, SO, SL, M, DB, 1>(part_o, part_lse, bh, splits, row, slice)
        }
    }

    /// [`merge_splits`] at `SC` splits per step.
    fn merge_steps<
        P: ElementType,
        SO: Shape<Rank = R4>,
        SL: Shape<Rank = R3>,
        const M: i32,
        const DB: i32,
        const SC: i32,
    >(
        part_o: &Tensor<P, SO>,
        part_lse: &Tensor<f32, SL>,
        bh: Scalar<i32>,
        splits: Scalar<i32>,
        row: Scalar<i32>,
        slice: Scalar<i32>,
    ) -> (Tile<f32, S2<M, DB>>, Tile<f32, S2<M, 1>>) {
        let po = part_o.partition::<S4<1, 1, M, DB>>();
        let pl = part_lse.partition::<S3<1, 1, M>>();
        let last = splits - 1i32;
        let mut m = full::<f32, S2<M, 1>>(f32::NEG_INFINITY);
        let mut l = zeros::<f32, S2<M, 1>>();
        let mut acc = zeros::<f32, S2<M, DB>>();
        for step in 0..(splits + (SC - 1)) / SC {
            let base = step * SC;
            // All the step's loads first (independent tiles, all in flight at once), then the
            // element-wise fold in split order: a reduction over a split axis of one tile would
            // cross threads (tileiras: ~850 SHFL per step, 16 µs at 16 x 16 x 32). A step past the
            // last split reloads the last split and gives it LSE −inf (weight 0): every load stays in
            // bounds. (A tile wholly past the extent is undefined in Tile IR, padding or not: such
            // loads came back as finite LSEs on an H100, session 34.)
            let ls: Vec<Tile<f32, S2<M, 1>>> = (0..SC)
                .map(|i| {
                    let s = base + i;
                    let t = pl.load((bh, s.min(last), row)).reshape::<S2<M, 1>>();
                    select((s < splits).splat::<S2<M, 1>>(), t, f32::NEG_INFINITY)
                })
                .collect();
            let os: Vec<Tile<f32, S2<M, DB>>> = (0..SC)
                .map(|i| {
                    po.load((bh, (base + i).min(last), row, slice))
                        .reshape::<S2<M, DB>>()
                        .cast::<f32>()
                })
                .collect();
            // (Host-side folds: the DSL turns `for` loops into device loops.)
            let m_new = ls.iter().fold(m, |a, t| a.max(*t));
            let m_ref = select(m_new == f32::NEG_INFINITY, 0.0f32, m_new);
            let alpha = ((m - m_ref) * LOG2_E).exp2_ftz();
            let start = (l * alpha, acc * alpha.broadcast::<S2<M, DB>>());
            (l, acc) = ls.iter().zip(&os).fold(start, |(l, acc), (t, o)| {
                let w = ((*t - m_ref) * LOG2_E).exp2_ftz();
                (l + w, acc + *o * w.broadcast::<S2<M, DB>>())
            });
            m = m_new;
        }
        merged(m, l, acc)
    }

    /// The end of a merge: the output `acc / l` (zeros where every split was empty) and the
    /// natural-log LSE `m + ln l` (−inf there), from the running max `m` of the splits' LSEs, the
    /// weight sum `l` and the weighted sum `acc`.
    pub fn merged<const M: i32, const W: i32>(
        m: Tile<f32, S2<M, 1>>,
        l: Tile<f32, S2<M, 1>>,
        acc: Tile<f32, S2<M, W>>,
    ) -> (Tile<f32, S2<M, W>>, Tile<f32, S2<M, 1>>) {
        let seen = (l > 0.0f32).broadcast::<S2<M, W>>();
        let out = select(seen, acc * (1.0f32 / l).broadcast::<S2<M, W>>(), 0.0f32);
        (out, m + l.ln())
    }
}
