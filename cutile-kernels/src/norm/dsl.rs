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
//!
//! Forms after cuTile Python's fastest norms (the shared reference kernels `ct_rmsnorm_row` and
//! `ct_layernorm_persist`; IR compared in `tests/softmax_norm_reference.rs`):
//! - `rms_norm_gather` / `layer_norm_gather`: one block per row, the row and the weight (and bias)
//!   gathered with `latency = 1`, the result scattered with `latency = 1`; unmasked when the row is exactly
//!   `BN` wide, masked otherwise. Grid `(rows, 1, 1)` (= the launcher's derived grid when `BN` ≥ `cols`);
//! - `layer_norm_persistent`: `TM` rows per step as one `TM x BN` tile load (`latency = 4`), centered
//!   two-pass statistics in registers, a non-TMA store, blocks striding over the row tiles. Grid explicit:
//!   `(min(SMs · k, ceil(rows / TM)), 1, 1)`;
//! - `rms_norm_gather_looped` / `layer_norm_gather_looped`: rows wider than a whole-row tile, gathered in
//!   `BN`-wide chunks twice (as the looped forms above); explicit grid `(rows, 1, 1)`.

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

    /// RMSNorm of one f32 row: `x · rsqrt(Σx² / n + eps) · w`.
    fn rms_row<const BN: i32>(
        t: Tile<f32, S1<BN>>,
        w: Tile<f32, S1<BN>>,
        n: Scalar<f32>,
        eps: Scalar<f32>,
    ) -> Tile<f32, S1<BN>> {
        let inv = ((t * t).sum::<0>() / n + eps).rsqrt();
        t * inv.broadcast() * w
    }

    /// Gather RMSNorm, one block per row. Grid `(rows, 1, 1)`; `BN` is a power of two ≥ `cols`.
    #[cutile::entry]
    pub fn rms_norm_gather<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let r = row.splat::<S1<BN>>();
        let c = iota::<BN>();
        let n = x.dim(1).cast::<f32>();
        let lat = Hints::with_latency(1);
        if x.dim(1) == BN && y.dim(1) == BN && w.dim(0) == BN && row < x.dim(0) && row < y.dim(0) {
            // SAFETY: row `row` and columns `0..BN` exist in `x` and `y`, and `w` has `BN` elements.
            let t = unsafe { x.gather_unchecked((r, c), lat) }.cast::<f32>();
            let wt = unsafe { w.gather_unchecked(c, lat) }.cast::<f32>();
            let out = rms_row(t, wt, n, eps).cast::<E>();
            // SAFETY: as above; block `row` writes only row `row`.
            unsafe { y.scatter_unchecked((r, c), out, lat) };
        } else {
            // Zero padding adds nothing to the sum of squares.
            let t = x.gather_with((r, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let out = rms_row(t, wt, n, eps).cast::<E>();
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { y.scatter_with((r, c), out, None, lat) };
        }
    }

    /// LayerNorm of one f32 row whose lanes at and past `cols` are padding (zero).
    fn ln_row<const BN: i32>(
        t: Tile<f32, S1<BN>>,
        w: Tile<f32, S1<BN>>,
        b: Tile<f32, S1<BN>>,
        cols: Scalar<i32>,
        eps: Scalar<f32>,
    ) -> Tile<f32, S1<BN>> {
        let n = cols.cast::<f32>();
        let mean = t.sum::<0>() / n;
        // Padding lanes must not add mean² to the variance.
        let d = select(iota::<BN>() < cols, t - mean.broadcast(), 0.0);
        let inv = ((d * d).sum::<0>() / n + eps).rsqrt();
        fma(d * inv.broadcast(), w, b)
    }

    /// Gather LayerNorm, one block per row. Grid `(rows, 1, 1)`; `BN` is a power of two ≥ `cols`.
    #[cutile::entry]
    pub fn layer_norm_gather<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let r = row.splat::<S1<BN>>();
        let c = iota::<BN>();
        let cols = x.dim(1);
        let lat = Hints::with_latency(1);
        if cols == BN
            && y.dim(1) == BN
            && w.dim(0) == BN
            && b.dim(0) == BN
            && row < x.dim(0)
            && row < y.dim(0)
        {
            // SAFETY: row `row` and columns `0..BN` exist in `x` and `y`; `w` and `b` have `BN` elements.
            let t = unsafe { x.gather_unchecked((r, c), lat) }.cast::<f32>();
            let wt = unsafe { w.gather_unchecked(c, lat) }.cast::<f32>();
            let bt = unsafe { b.gather_unchecked(c, lat) }.cast::<f32>();
            let out = ln_row(t, wt, bt, cols, eps).cast::<E>();
            // SAFETY: as above; block `row` writes only row `row`.
            unsafe { y.scatter_unchecked((r, c), out, lat) };
        } else {
            let t = x.gather_with((r, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let bt = b.gather_with(c, None, 0.0, lat).cast::<f32>();
            let out = ln_row(t, wt, bt, cols, eps).cast::<E>();
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { y.scatter_with((r, c), out, None, lat) };
        }
    }

    /// Persistent LayerNorm (cuTile's `ct_layernorm_persist`): block `i` normalizes row tiles `i, i + grid,
    /// …` of `TM` rows each, loaded as one `TM x BN` tile (`latency = 4`, zero padding), and stores them
    /// without the TMA. `BN` is a power of two ≥ `cols`. Grid explicit, `(g, 1, 1)` with any `g ≥ 1`
    /// (best about `min(SMs · 1..2, ceil(rows / TM))`).
    #[cutile::entry]
    pub fn layer_norm_persistent<E: Float, const TM: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<TM, BN>>,
    ) {
        let pid = block_id_x();
        let (nprog, _, _) = num_blocks();
        let cols = x.dim(1);
        let n = cols.cast::<f32>();
        let px = x.partition_padded::<S2<TM, BN>>(Padding::Zero);
        let tiles = px.num_tiles(0);
        let wt = w
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load(0)
            .cast::<f32>()
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<TM, BN>>();
        let bt = b
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load(0)
            .cast::<f32>()
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<TM, BN>>();
        let valid = (iota::<BN>() < cols)
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<TM, BN>>();
        for t in (pid..tiles).step_by(nprog) {
            let xt = px.load_with((t, 0), Hints::with_latency(4)).cast::<f32>();
            let mean = xt.sum::<1>() / n;
            let d = select(valid, xt - mean.broadcast(), 0.0);
            let inv = ((d * d).sum::<1>() / n + eps).rsqrt();
            let out = fma(d * inv.broadcast(), wt, bt).cast::<E>();
            // SAFETY: block `pid` writes only row tiles `pid + k·grid`, each written by exactly one block.
            unsafe { y.store_at_with((t, 0), out, Hints::NO_TMA) };
        }
    }

    /// RMSNorm for long rows with gathers. Grid `(rows, 1, 1)` (explicit): block `r` gathers row `r` in
    /// `BN`-wide chunks (any `cols`), first summing squares per lane, then scattering the normalized chunks.
    #[cutile::entry(occupancy = 8)]
    pub fn rms_norm_gather_looped<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let r = row.splat::<S1<BN>>();
        let lane = iota::<BN>();
        let n = x.dim(1).cast::<f32>();
        let chunks = (x.dim(1) + (BN - 1)) / BN;
        let lat = Hints::with_latency(1);
        let mut sq = zeros::<f32, S1<BN>>();
        for j in 0..chunks {
            let t = x
                .gather_with((r, lane + j * BN), None, 0.0, lat)
                .cast::<f32>();
            sq = fma(t, t, sq);
        }
        let inv = (sq.sum::<0>() / n + eps).rsqrt().broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let t = x.gather_with((r, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            // SAFETY: block `r` writes only row `r` (bounds-masked).
            unsafe { y.scatter_with((r, c), (t * inv * wt).cast::<E>(), None, lat) };
        }
    }

    /// LayerNorm for long rows with gathers. Grid `(rows, 1, 1)` (explicit); statistics as
    /// `layer_norm_looped` (shifted by the first chunk's mean, one pass), then a second pass scattering the
    /// normalized chunks.
    #[cutile::entry(occupancy = 6)]
    pub fn layer_norm_gather_looped<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let r = row.splat::<S1<BN>>();
        let lane = iota::<BN>();
        let cols = x.dim(1);
        let n = cols.cast::<f32>();
        let chunks = (cols + (BN - 1)) / BN;
        let lat = Hints::with_latency(1);
        let first = x.gather_with((r, lane), None, 0.0, lat).cast::<f32>();
        let shift = first.sum::<0>() / cols.min(BN).cast::<f32>();
        let shift_row = shift.broadcast::<S1<BN>>();
        let mut s1 = zeros::<f32, S1<BN>>();
        let mut s2 = zeros::<f32, S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let t = x.gather_with((r, c), None, 0.0, lat).cast::<f32>();
            let d = select(c < cols, t - shift_row, 0.0);
            s1 += d;
            s2 = fma(d, d, s2);
        }
        let dm = s1.sum::<0>() / n;
        let var = (s2.sum::<0>() / n - dm * dm).max(0.0);
        let mean = (shift + dm).broadcast::<S1<BN>>();
        let inv = (var + eps).rsqrt().broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let t = x.gather_with((r, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let bt = b.gather_with(c, None, 0.0, lat).cast::<f32>();
            let out = fma((t - mean) * inv, wt, bt);
            // SAFETY: block `r` writes only row `r` (bounds-masked).
            unsafe { y.scatter_with((r, c), out.cast::<E>(), None, lat) };
        }
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
