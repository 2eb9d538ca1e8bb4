//! The fused linear + cross-entropy kernels that are not a GEMM (the three products of a chunk go
//! through `crate::gemm`'s planned kernels):
//!
//! - `ce_count`: one block counts the targets that are not `ignore_index` (exact, in i32) and writes
//!   `stats = [count, grad_scale]` (f32), `grad_scale = 1 / count` for the mean (0 when nothing counts)
//!   and 1 for the sum. It runs before any chunk, so the row kernel can scale the gradient directly
//!   (no rescaling pass over `dx`, no atomics);
//! - `ce_rows`: one block per row of a chunk's `C x V` logits (grid `(C, 1, 1)`): an online logsumexp
//!   over `1 x BV` tiles in f32 (running max `m` and sum `l`), the row's loss `lse - logit[target]` (0
//!   for an ignored row, NaN for a target outside `[0, V)` that is not `ignore_index`), and, when
//!   `grad != 0`, a second pass that overwrites the logits in place with
//!   `(softmax - onehot(target)) · grad_scale` (0 on ignored rows). The logits arrive twice, as the
//!   input `logits` and the output `dlogits` (the same memory): every tile is read before it is written
//!   by the same block;
//! - `ce_reduce`: one block sums the per-row losses `[T]` in a fixed order (per-lane partial sums over
//!   `BT`-wide tiles, then one tile reduction: deterministic) and divides by the count for the mean (so an
//!   all-ignored mean is `0 / 0 = NaN`, as torch);
//! - `ce_cast`: the f32 `dw` accumulator cast into a bf16/f16 `dw` (tiles of `dw`).

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// `stats[0]` = number of `target` entries `!= ignore`, `stats[1]` = the gradient scale (`1 / count`
    /// when `mean != 0`, 0 if the count is 0; 1 otherwise). Grid `(1, 1, 1)` (the one tile of `stats`).
    #[cutile::entry]
    pub fn ce_count<I: ElementType, const BT: i32>(
        target: &Tensor<I, S1<DYN>>,
        ignore: Scalar<i32>,
        mean: Scalar<i32>,
        stats: &mut Tensor<f32, S1<2>>,
    ) {
        let n = target.dim(0);
        let tiles = (n + (BT - 1)) / BT;
        let ign = ignore.cast::<I>().splat::<S1<BT>>();
        let mut acc = zeros::<i32, S1<BT>>();
        for j in 0..tiles {
            let idx = iota::<BT>() + j * BT;
            let ok = idx < n;
            let t = target.gather(idx, Some(ok), 0);
            let valid = ok & (t != ign);
            acc += select::<i32, S1<BT>>(valid, 1, 0);
        }
        let count = acc.sum::<0>().cast::<f32>();
        let inv = select(count > 0.0, full::<f32, S1<1>>(1.0) / count, 0.0);
        let scale = select((mean != 0).splat::<S1<1>>(), inv, 1.0);
        let lane = iota::<2>();
        stats.store(select(
            lane == 0,
            count.broadcast::<S1<2>>(),
            scale.broadcast::<S1<2>>(),
        ));
    }

    /// One row of a chunk (see the module docs). `logits`, `dlogits`: the chunk's `[C, V]` logits (the same
    /// memory); `target`, `row_loss`: the chunk's `[C]` targets and losses; `stats`: `ce_count`'s output.
    /// Grid `(C, 1, 1)` (explicit).
    #[cutile::entry(occupancy = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn ce_rows<E: Float, I: ElementType, const BV: i32>(
        logits: &Tensor<E, S2<DYN, DYN>>,
        target: &Tensor<I, S1<DYN>>,
        stats: &Tensor<f32, S1<DYN>>,
        ignore: Scalar<i32>,
        grad: Scalar<i32>,
        row_loss: &mut Tensor<f32, S1<1>>,
        dlogits: &mut Tensor<E, S2<1, BV>>,
    ) {
        let row = block_id_x();
        let v = logits.dim(1);
        let r1 = iota::<1>() + row;
        let tg = target.gather(r1, None, 0);
        let valid = tg != ignore.cast::<I>().splat::<S1<1>>();
        let inrange =
            (tg >= scalar::<I>(0).splat::<S1<1>>()) & (tg < v.cast::<I>().splat::<S1<1>>());
        let t32 = select(inrange, tg, scalar::<I>(0).splat::<S1<1>>()).cast::<i32>();
        let xt = logits
            .gather((r1, t32), Some(inrange), 0.0)
            .cast::<f32>()
            .reshape::<S2<1, 1>>();
        let px = logits.partition_padded::<S2<1, BV>>(Padding::NegInf);
        let chunks = px.num_tiles(1);
        // The first tile holds column 0, so `m` is finite from the start (no `-inf - -inf`); padding
        // lanes add `exp(-inf) = 0`.
        let first = px.load((row, 0)).cast::<f32>();
        let mut m = first.amax::<1>();
        let mut l = (first - m.broadcast()).exp().sum::<1>();
        for j in 1..chunks {
            let t = px.load((row, j)).cast::<f32>();
            let m_new = m.max(t.amax::<1>());
            let p = (t - m_new.broadcast()).exp().sum::<1>();
            l = fma(l, (m - m_new).exp(), p);
            m = m_new;
        }
        let lse = m + l.ln();
        let valid2 = valid.reshape::<S2<1, 1>>();
        let inrange2 = inrange.reshape::<S2<1, 1>>();
        let nll = select(inrange2, lse - xt, full::<f32, S2<1, 1>>(f32::NAN));
        let loss = select(valid2, nll, 0.0);
        // SAFETY: block `row` writes only element `row` of `row_loss`.
        unsafe { row_loss.store_at(row, loss.reshape::<S1<1>>()) };
        if grad != 0 {
            let scale = stats
                .gather(iota::<1>() + 1, None, 0.0)
                .reshape::<S2<1, 1>>();
            let s = select(valid2, scale, 0.0).broadcast::<S2<1, BV>>();
            // The one-hot column: none for an ignored or out-of-range target.
            let hot = select(valid & inrange, t32, -1)
                .reshape::<S2<1, 1>>()
                .broadcast::<S2<1, BV>>();
            let mb = m.broadcast::<S2<1, BV>>();
            let inv_l = (full::<f32, S2<1, 1>>(1.0) / l).broadcast::<S2<1, BV>>();
            let lanes = iota::<BV>().reshape::<S2<1, BV>>();
            for j in 0..chunks {
                let t = px.load((row, j)).cast::<f32>();
                let p = (t - mb).exp() * inv_l;
                let onehot = select::<f32, S2<1, BV>>(lanes + j * BV == hot, 1.0, 0.0);
                let d = ((p - onehot) * s).cast::<E>();
                // SAFETY: block `row` writes only row `row`, tile by tile, each after reading it.
                unsafe { dlogits.store_at((row, j), d) };
            }
        }
    }

    /// `loss[0]` = the sum of `row_loss` (`[T]`), divided by `stats[0]` (the count) when `mean != 0`.
    /// Grid `(1, 1, 1)`.
    #[cutile::entry]
    pub fn ce_reduce<const BT: i32>(
        row_loss: &Tensor<f32, S1<DYN>>,
        stats: &Tensor<f32, S1<DYN>>,
        mean: Scalar<i32>,
        loss: &mut Tensor<f32, S1<1>>,
    ) {
        let p = row_loss.partition_padded::<S1<BT>>(Padding::Zero);
        let mut acc = zeros::<f32, S1<BT>>();
        for j in 0..p.num_tiles(0) {
            acc += p.load(j);
        }
        let total = acc.sum::<0>();
        let count = stats.gather(iota::<1>(), None, 0.0);
        loss.store(select((mean != 0).splat::<S1<1>>(), total / count, total));
    }

    /// `dst = src` cast to `E` (`src`: f32, any strides). Grid: the tiles of `dst`.
    #[cutile::entry]
    pub fn ce_cast<E: Float, const BM: i32, const BN: i32>(
        src: &Tensor<f32, S2<DYN, DYN>>,
        dst: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (i, j, _) = block_id();
        let t = src
            .partition_padded::<S2<BM, BN>>(Padding::Zero)
            .load((i, j));
        dst.store(t.cast::<E>());
    }
}
