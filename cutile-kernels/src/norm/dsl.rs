//! Row normalizations over the last axis of a `rows x cols` matrix, math in f32 whatever the storage type:
//! RMSNorm `y = x / sqrt(mean(x²) + eps) · w` and LayerNorm `y = (x - mean) / sqrt(var + eps) · w + b`
//! (biased variance).
//!
//! Two forms of each, both one row per block (grid `(rows, 1, 1)`, block `r` normalizes row `r`):
//! - whole-row (`rms_norm`, `layer_norm`): the row is one `1 x BN` tile, `BN` the next power of two ≥
//!   `cols`, zero-padded; for rows that fit in registers (up to a few thousand elements);
//! - looped (`rms_norm_looped`, `layer_norm_looped`): the row is walked in `1 x BN` chunks twice, a first
//!   pass accumulating per-lane sums and a second writing the normalized chunks, so 8192-wide rows run
//!   without register spills (`BN` of 1024–2048, any `cols`). Their grid `(rows, 1, 1)` is not the tile
//!   count of the `1 x BN`-tiled output, so launch them with an explicit grid (a derived `(rows,
//!   ceil(cols / BN))` grid only repeats each row's identical writes `ceil(cols / BN)` times).
//!
//! Measured on an H200 (bf16, no L2 flush, so short-row figures are L2-assisted): plain (non-TMA)
//! loads make the whole-row form fast for short rows (1024 wide: RMSNorm 505 → 3440 GB/s, LayerNorm 410
//! → 2520 GB/s), and a high occupancy keeps enough rows in flight for the looped form (16384 x 8192, BN =
//! 2048: RMSNorm 1430 → 3550 GB/s at occupancy 8, LayerNorm 1800 → 2750 GB/s at occupancy 6). BN =
//! 2048 beat 1024 and 4096 there; a whole-row 8192 tile reached only ~1800 GB/s.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// RMSNorm of each row of `x` with weight `w` (length = row length). Grid `(rows, 1, 1)`; `BN` is a
    /// power of two ≥ `cols`.
    #[cutile::entry]
    pub fn rms_norm<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let t = x
            .partition_padded::<S2<1, BN>>(Padding::Zero)
            .load_with((row, 0), Hints::NO_TMA)
            .cast::<f32>();
        let n = x.dim(1).cast::<f32>();
        let inv = ((t * t).sum::<1>() / n + eps).rsqrt();
        let wt = w
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load_with(0, Hints::NO_TMA)
            .cast::<f32>()
            .reshape::<S2<1, BN>>();
        y.store_with((t * inv.broadcast() * wt).cast::<E>(), Hints::NO_TMA);
    }

    /// LayerNorm of each row of `x` with weight `w` and bias `b`. Grid `(rows, 1, 1)`; `BN` is a power
    /// of two ≥ `cols`.
    #[cutile::entry]
    pub fn layer_norm<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let t = x
            .partition_padded::<S2<1, BN>>(Padding::Zero)
            .load_with((row, 0), Hints::NO_TMA)
            .cast::<f32>();
        let n = x.dim(1).cast::<f32>();
        let mean = t.sum::<1>() / n;
        // Padding columns must not contribute to the variance.
        let valid = iota::<BN>().reshape::<S2<1, BN>>() < x.dim(1);
        let d = select(valid, t - mean.broadcast(), 0.0);
        let inv = ((d * d).sum::<1>() / n + eps).rsqrt();
        let wt = w
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load_with(0, Hints::NO_TMA)
            .cast::<f32>()
            .reshape::<S2<1, BN>>();
        let bt = b
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load_with(0, Hints::NO_TMA)
            .cast::<f32>()
            .reshape::<S2<1, BN>>();
        y.store_with((d * inv.broadcast() * wt + bt).cast::<E>(), Hints::NO_TMA);
    }

    /// RMSNorm for long rows. Grid `(rows, 1, 1)` (explicit): block `r` walks row `r` in `1 x BN`
    /// chunks, first summing squares per lane, then writing `x · rsqrt(mean(x²) + eps) · w` chunk by chunk.
    #[cutile::entry(occupancy = 8)]
    pub fn rms_norm_looped<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let n = x.dim(1).cast::<f32>();
        let px = x.partition_padded::<S2<1, BN>>(Padding::Zero);
        let pw = w.partition_padded::<S1<BN>>(Padding::Zero);
        let chunks = px.num_tiles(1);
        // Per-lane partial sums: one block-wide reduction after the loop instead of one per chunk. Zero
        // padding adds nothing.
        let mut sq = zeros::<f32, S2<1, BN>>();
        for j in 0..chunks {
            let t = px.load((row, j)).cast::<f32>();
            sq = fma(t, t, sq);
        }
        let inv = (sq.sum::<1>() / n + eps).rsqrt().broadcast::<S2<1, BN>>();
        for j in 0..chunks {
            let t = px.load((row, j)).cast::<f32>();
            let wt = pw.load(j).cast::<f32>().reshape::<S2<1, BN>>();
            // SAFETY: block `r` writes only chunks of row `r`, so no two blocks write the same elements.
            unsafe { y.store_at((row, j), (t * inv * wt).cast::<E>()) };
        }
    }

    /// LayerNorm for long rows. Grid `(rows, 1, 1)` (explicit): block `r` walks row `r` in `1 x BN` chunks.
    ///
    /// The first pass accumulates per-lane sums of `x - k` and `(x - k)²` with the shift `k` = the mean of
    /// the first chunk, so `var = E[(x-k)²] - E[x-k]²` cancels only `(mean - k)²` instead of `mean²`: one
    /// pass, and rows with a large mean keep their precision. The second pass normalizes.
    #[cutile::entry(occupancy = 6)]
    pub fn layer_norm_looped<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let cols = x.dim(1);
        let n = cols.cast::<f32>();
        let px = x.partition_padded::<S2<1, BN>>(Padding::Zero);
        let pw = w.partition_padded::<S1<BN>>(Padding::Zero);
        let pb = b.partition_padded::<S1<BN>>(Padding::Zero);
        let chunks = px.num_tiles(1);
        // Zero padding keeps the first chunk's sum exact; divide by its true length.
        let first = px.load((row, 0)).cast::<f32>();
        let shift = first.sum::<1>() / cols.min(BN).cast::<f32>();
        let shift_row = shift.broadcast::<S2<1, BN>>();
        let lane = iota::<BN>().reshape::<S2<1, BN>>();
        let mut s1 = zeros::<f32, S2<1, BN>>();
        let mut s2 = zeros::<f32, S2<1, BN>>();
        for j in 0..chunks {
            let t = px.load((row, j)).cast::<f32>();
            // Padding lanes of the last chunk would add -k each: mask them out.
            let valid = lane + j * BN < cols;
            let d = select(valid, t - shift_row, 0.0);
            s1 += d;
            s2 = fma(d, d, s2);
        }
        let dm = s1.sum::<1>() / n;
        let var = (s2.sum::<1>() / n - dm * dm).max(0.0);
        let mean = (shift + dm).broadcast::<S2<1, BN>>();
        let inv = (var + eps).rsqrt().broadcast::<S2<1, BN>>();
        for j in 0..chunks {
            let t = px.load((row, j)).cast::<f32>();
            let wt = pw.load(j).cast::<f32>().reshape::<S2<1, BN>>();
            let bt = pb.load(j).cast::<f32>().reshape::<S2<1, BN>>();
            let out = fma((t - mean) * inv, wt, bt);
            // SAFETY: block `r` writes only chunks of row `r`, so no two blocks write the same elements.
            unsafe { y.store_at((row, j), out.cast::<E>()) };
        }
    }
}
