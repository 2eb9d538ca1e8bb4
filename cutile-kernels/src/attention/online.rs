//! The online softmax the split-KV decode kernels share (`decode` and `mla`): the state of a query
//! tile, the step that folds one key tile into it, and the final normalization. Plain Rust over DSL
//! values, traced into the kernels that call it.

use cutile::core::*;

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
    let o = select(seen, acc / l.broadcast::<S2<M, D>>(), 0.0f32);
    let lse = (m + l.log2()) * std::f64::consts::LN_2;
    (o, lse)
}
