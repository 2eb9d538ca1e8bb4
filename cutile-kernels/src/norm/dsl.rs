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
//!
//! Fused and per-head forms, built the same way (no cuTile counterpart in the fixtures):
//! - `add_rms_norm_gather` / `add_rms_norm_gather_looped`: residual add + RMSNorm, `h = x + r` rounded to
//!   `E` (then normalized: the statistics are those of the stored `h`), `y = rms_norm(h) · w`; grids as
//!   `rms_norm_gather` / `rms_norm_gather_looped`;
//! - `rms_norm_heads<E, TM, BD>`: per-head RMSNorm over `[T, H, D]` (any token / head strides), `TM`
//!   consecutive head vectors per block as one `TM x BD` gather; explicit grid `(ceil(T·H / TM), 1, 1)`;
//! - `layer_norm_stats_gather` / `layer_norm_stats_persistent` / `layer_norm_stats_gather_looped`: the
//!   LayerNorm forms also writing the f32 per-row `mean` and `rstd = 1 / sqrt(var + eps)`.

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

    // -----------------------------------------------------------------------------------------------------
    // Fused residual add + RMSNorm: `h = x + r` (rounded to `E`, as torch stores it), `y = rms_norm(h) · w`.

    /// `a + b` in f32, rounded to the storage type (what a framework stores as the new residual).
    fn add_round<E: Float, const BN: i32>(
        a: Tile<E, S1<BN>>,
        b: Tile<E, S1<BN>>,
    ) -> Tile<E, S1<BN>> {
        (a.cast::<f32>() + b.cast::<f32>()).cast::<E>()
    }

    /// Gather residual-add RMSNorm, one block per row: `h = x + r` (rounded to `E`), `y = h · rsqrt(mean(h²)
    /// + eps) · w`, the statistics taken over the rounded `h`. Grid `(rows, 1, 1)` (= the derived grid when
    /// `BN` ≥ `cols`); `BN` is a power of two ≥ `cols`.
    #[cutile::entry]
    pub fn add_rms_norm_gather<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        r: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        h: &mut Tensor<E, S2<1, BN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let ri = row.splat::<S1<BN>>();
        let c = iota::<BN>();
        let n = x.dim(1).cast::<f32>();
        let lat = Hints::with_latency(1);
        if x.dim(1) == BN
            && r.dim(1) == BN
            && h.dim(1) == BN
            && y.dim(1) == BN
            && w.dim(0) == BN
            && row < x.dim(0)
            && row < r.dim(0)
            && row < h.dim(0)
            && row < y.dim(0)
        {
            // SAFETY: row `row` and columns `0..BN` exist in `x`, `r`, `h` and `y`; `w` has `BN` elements.
            let xt = unsafe { x.gather_unchecked((ri, c), lat) };
            let rt = unsafe { r.gather_unchecked((ri, c), lat) };
            let s = add_round(xt, rt);
            // SAFETY: as above; block `row` writes only row `row`.
            unsafe { h.scatter_unchecked((ri, c), s, lat) };
            let wt = unsafe { w.gather_unchecked(c, lat) }.cast::<f32>();
            let out = rms_row(s.cast::<f32>(), wt, n, eps).cast::<E>();
            // SAFETY: as above.
            unsafe { y.scatter_unchecked((ri, c), out, lat) };
        } else {
            // Zero padding: the padding lanes of `h` are 0 + 0 and add nothing to the sum of squares.
            let xt = x.gather_with((ri, c), None, 0.0, lat);
            let rt = r.gather_with((ri, c), None, 0.0, lat);
            let s = add_round(xt, rt);
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { h.scatter_with((ri, c), s, None, lat) };
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let out = rms_row(s.cast::<f32>(), wt, n, eps).cast::<E>();
            // SAFETY: as above.
            unsafe { y.scatter_with((ri, c), out, None, lat) };
        }
    }

    /// Residual-add RMSNorm for long rows with gathers. Grid `(rows, 1, 1)` (explicit): block `r` walks
    /// row `r` in `BN`-wide chunks twice. The first pass writes `h = x + r` (rounded to `E`) and sums the
    /// squares of the rounded values per lane; the second recomputes the same rounded `h` from `x` and `r`
    /// (rather than reading `h` back) and writes `y`.
    #[cutile::entry(occupancy = 8)]
    pub fn add_rms_norm_gather_looped<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        r: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        h: &mut Tensor<E, S2<1, BN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let ri = row.splat::<S1<BN>>();
        let lane = iota::<BN>();
        let n = x.dim(1).cast::<f32>();
        let chunks = (x.dim(1) + (BN - 1)) / BN;
        let lat = Hints::with_latency(1);
        let mut sq = zeros::<f32, S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let xt = x.gather_with((ri, c), None, 0.0, lat);
            let rt = r.gather_with((ri, c), None, 0.0, lat);
            let s = add_round(xt, rt);
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { h.scatter_with((ri, c), s, None, lat) };
            let t = s.cast::<f32>();
            sq = fma(t, t, sq);
        }
        let inv = (sq.sum::<0>() / n + eps).rsqrt().broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let xt = x.gather_with((ri, c), None, 0.0, lat);
            let rt = r.gather_with((ri, c), None, 0.0, lat);
            let t = add_round(xt, rt).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { y.scatter_with((ri, c), (t * inv * wt).cast::<E>(), None, lat) };
        }
    }

    // -----------------------------------------------------------------------------------------------------
    // Per-head RMSNorm (QK-norm) over `[T, H, D]` with one `D`-long weight shared by all heads.

    /// RMSNorm of every `D`-long head vector of `x: [T, H, D]` (any token and head strides, unit stride
    /// along `D`) with the weight `w: [D]`. Block `b` takes the `TM` consecutive head vectors `b·TM ..
    /// b·TM + TM` of the flattened `T·H` sequence as one `TM x BD` gather (token = i / H, head = i % H),
    /// so short heads still give each block a few thousand elements. Unmasked when `D == BD` and the block's
    /// `TM` vectors all exist, masked otherwise. Grid explicit: `(ceil(T·H / TM), 1, 1)`; `BD` is a power of
    /// two ≥ `D`.
    #[cutile::entry]
    pub fn rms_norm_heads<E: Float, const TM: i32, const BD: i32>(
        x: &Tensor<E, S3<DYN, DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S3<1, 1, BD>>,
    ) {
        let pid = block_id_x();
        let heads = x.dim(1);
        let d = x.dim(2);
        let total = x.dim(0) * heads;
        let n = d.cast::<f32>();
        let lat = Hints::with_latency(1);
        let flat = iota::<TM>() + pid * TM;
        let tok = (flat / heads)
            .reshape::<S2<TM, 1>>()
            .broadcast::<S2<TM, BD>>();
        let head = (flat % heads)
            .reshape::<S2<TM, 1>>()
            .broadcast::<S2<TM, BD>>();
        let c = iota::<BD>();
        let lane = c.reshape::<S2<1, BD>>().broadcast::<S2<TM, BD>>();
        if d == BD
            && w.dim(0) == BD
            && (pid + 1) * TM <= total
            && y.dim(0) == x.dim(0)
            && y.dim(1) == heads
            && y.dim(2) == BD
        {
            // SAFETY: the block's `TM` head vectors exist in `x` and `y` (`(pid + 1)·TM ≤ T·H`, same
            // shapes) and each has `BD` elements; `w` has `BD` elements.
            let t = unsafe { x.gather_unchecked((tok, head, lane), lat) }.cast::<f32>();
            let wt = unsafe { w.gather_unchecked(c, lat) }
                .cast::<f32>()
                .reshape::<S2<1, BD>>()
                .broadcast::<S2<TM, BD>>();
            let inv = ((t * t).sum::<1>() / n + eps).rsqrt();
            let out = (t * inv.broadcast() * wt).cast::<E>();
            // SAFETY: as above; block `pid` writes only its own `TM` head vectors.
            unsafe { y.scatter_unchecked((tok, head, lane), out, lat) };
        } else {
            // Zero padding (lanes past `D`, vectors past `T·H`) adds nothing to the sums of squares.
            let t = x
                .gather_with((tok, head, lane), None, 0.0, lat)
                .cast::<f32>();
            let wt = w
                .gather_with(c, None, 0.0, lat)
                .cast::<f32>()
                .reshape::<S2<1, BD>>()
                .broadcast::<S2<TM, BD>>();
            let inv = ((t * t).sum::<1>() / n + eps).rsqrt();
            let out = (t * inv.broadcast() * wt).cast::<E>();
            // SAFETY: block `pid` writes only its own head vectors (bounds-masked).
            unsafe { y.scatter_with((tok, head, lane), out, None, lat) };
        }
    }

    // -----------------------------------------------------------------------------------------------------
    // LayerNorm that also writes the per-row mean and rstd = 1 / sqrt(var + eps) (f32), as a backward pass
    // needs them.

    /// Mean, centered row (padding lanes zero) and rstd of one f32 row whose lanes at and past `cols` are
    /// padding (zero).
    fn ln_stats<const BN: i32>(
        t: Tile<f32, S1<BN>>,
        cols: Scalar<i32>,
        eps: Scalar<f32>,
    ) -> (Tile<f32, S1<1>>, Tile<f32, S1<BN>>, Tile<f32, S1<1>>) {
        let n = cols.cast::<f32>();
        let mean = t.sum::<0>() / n;
        let d = select(iota::<BN>() < cols, t - mean.broadcast(), 0.0);
        let inv = ((d * d).sum::<0>() / n + eps).rsqrt();
        (mean, d, inv)
    }

    /// Gather LayerNorm with statistics, one block per row: `y` as `layer_norm_gather`, and `mean[row]`,
    /// `rstd[row]` (f32, `rows` long). Grid `(rows, 1, 1)`; `BN` is a power of two ≥ `cols`.
    #[cutile::entry]
    pub fn layer_norm_stats_gather<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
        mean: &mut Tensor<f32, S1<1>>,
        rstd: &mut Tensor<f32, S1<1>>,
    ) {
        let row = block_id_x();
        let ri = row.splat::<S1<BN>>();
        let r1 = row.splat::<S1<1>>();
        let c = iota::<BN>();
        let cols = x.dim(1);
        let lat = Hints::with_latency(1);
        if cols == BN
            && y.dim(1) == BN
            && w.dim(0) == BN
            && b.dim(0) == BN
            && row < x.dim(0)
            && row < y.dim(0)
            && row < mean.dim(0)
            && row < rstd.dim(0)
        {
            // SAFETY: row `row` and columns `0..BN` exist in `x` and `y`; `w` and `b` have `BN` elements;
            // `mean` and `rstd` have element `row`.
            let t = unsafe { x.gather_unchecked((ri, c), lat) }.cast::<f32>();
            let wt = unsafe { w.gather_unchecked(c, lat) }.cast::<f32>();
            let bt = unsafe { b.gather_unchecked(c, lat) }.cast::<f32>();
            let (m, d, inv) = ln_stats(t, cols, eps);
            let out = fma(d * inv.broadcast(), wt, bt).cast::<E>();
            // SAFETY: as above; block `row` writes only row `row` and element `row`.
            unsafe { y.scatter_unchecked((ri, c), out, lat) };
            unsafe { mean.scatter_unchecked(r1, m, lat) };
            unsafe { rstd.scatter_unchecked(r1, inv, lat) };
        } else {
            let t = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let bt = b.gather_with(c, None, 0.0, lat).cast::<f32>();
            let (m, d, inv) = ln_stats(t, cols, eps);
            let out = fma(d * inv.broadcast(), wt, bt).cast::<E>();
            // SAFETY: block `row` writes only row `row` and element `row` (bounds-masked).
            unsafe { y.scatter_with((ri, c), out, None, lat) };
            unsafe { mean.scatter_with(r1, m, None, lat) };
            unsafe { rstd.scatter_with(r1, inv, None, lat) };
        }
    }

    /// Persistent LayerNorm with statistics: `layer_norm_persistent`, also storing each step's `TM` means
    /// and rstds (f32) as `TM`-long tiles of `mean` and `rstd`. Grid explicit, `(g, 1, 1)` with any `g ≥ 1`.
    #[cutile::entry]
    pub fn layer_norm_stats_persistent<E: Float, const TM: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<TM, BN>>,
        mean: &mut Tensor<f32, S1<TM>>,
        rstd: &mut Tensor<f32, S1<TM>>,
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
            let m = xt.sum::<1>() / n;
            let d = select(valid, xt - m.broadcast(), 0.0);
            let inv = ((d * d).sum::<1>() / n + eps).rsqrt();
            let out = fma(d * inv.broadcast(), wt, bt).cast::<E>();
            // SAFETY: block `pid` writes only row tiles `pid + k·grid` (of `y`, `mean` and `rstd`), each
            // written by exactly one block.
            unsafe { y.store_at_with((t, 0), out, Hints::NO_TMA) };
            unsafe { mean.store_at_with(t, m.reshape::<S1<TM>>(), Hints::NO_TMA) };
            unsafe { rstd.store_at_with(t, inv.reshape::<S1<TM>>(), Hints::NO_TMA) };
        }
    }

    /// LayerNorm with statistics for long rows with gathers: `layer_norm_gather_looped`, also writing
    /// `mean[row]` and `rstd[row]`. Grid `(rows, 1, 1)` (explicit).
    #[cutile::entry(occupancy = 6)]
    pub fn layer_norm_stats_gather_looped<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
        mean: &mut Tensor<f32, S1<1>>,
        rstd: &mut Tensor<f32, S1<1>>,
    ) {
        let row = block_id_x();
        let ri = row.splat::<S1<BN>>();
        let r1 = row.splat::<S1<1>>();
        let lane = iota::<BN>();
        let cols = x.dim(1);
        let n = cols.cast::<f32>();
        let chunks = (cols + (BN - 1)) / BN;
        let lat = Hints::with_latency(1);
        let first = x.gather_with((ri, lane), None, 0.0, lat).cast::<f32>();
        let shift = first.sum::<0>() / cols.min(BN).cast::<f32>();
        let shift_row = shift.broadcast::<S1<BN>>();
        let mut s1 = zeros::<f32, S1<BN>>();
        let mut s2 = zeros::<f32, S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let t = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let d = select(c < cols, t - shift_row, 0.0);
            s1 += d;
            s2 = fma(d, d, s2);
        }
        let dm = s1.sum::<0>() / n;
        let var = (s2.sum::<0>() / n - dm * dm).max(0.0);
        let m = shift + dm;
        let inv = (var + eps).rsqrt();
        // SAFETY: block `row` writes only element `row` (bounds-masked).
        unsafe { mean.scatter_with(r1, m, None, lat) };
        unsafe { rstd.scatter_with(r1, inv, None, lat) };
        let mean_row = m.broadcast::<S1<BN>>();
        let inv_row = inv.broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let t = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let bt = b.gather_with(c, None, 0.0, lat).cast::<f32>();
            let out = fma((t - mean_row) * inv_row, wt, bt);
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { y.scatter_with((ri, c), out.cast::<E>(), None, lat) };
        }
    }
}
