//! Row softmax: one row per block, the row loaded as one tile padded with -inf (so padding never wins the
//! max and contributes `exp(-inf) = 0` to the sum), math in f32 whatever the storage type.
//!
//! The row moves with plain loads and stores, not the TMA: for one small tile per block the copy engine's
//! setup dominates (measured on an H200 for the same whole-row shape in `norm.rs`: 7x).
//!
//! Variants for wide bf16 rows, where `row_softmax` (default hints) reached 0.36x Triton on an H200:
//! - `row_softmax_w8` / `row_softmax_w16`: the same body with 8 / 16 worker warps per block, so a whole
//!   8192-wide f32 row is 32 / 16 values per thread instead of 64 (Triton's best for 8192 is 16 warps);
//! - `row_softmax_online`: the row walked in `1 x BN` chunks, a first pass keeping a running max `m` and
//!   sum `l` (`l = l·exp(m_old - m_new) + Σ exp(x - m_new)`), a second re-reading the chunks (from L2)
//!   and storing `exp(x - m) / l`. Registers stay bounded by the chunk; explicit grid `(rows, 1, 1)`;
//! - `row_softmax_rows`: `TM` rows per block (a `TM x BN` tile), for short rows where one row per block
//!   gives too little work per block.
//!
//! Gather forms, after cuTile Python's fastest softmax (`ct_softmax_gather` in the shared reference
//! kernels; IR compared in `tests/softmax_norm_reference.rs`, differences in `docs/softmax-norm-ir-diff.md`):
//! - `softmax_gather`: one block per row, the row read with a pointer gather (`load_ptr_tko`, no TMA, no
//!   tensor view), math in f32 with approximate `exp` and approximate flush-to-zero division, written back
//!   with a scatter. When the row is exactly `BN` wide (and the block's row exists in `x` and `y`) the
//!   gather and scatter are unmasked, as cuTile's `check_bounds=False`; otherwise the masked branch runs
//!   (ragged widths, padding lanes read -inf). Grid `(rows, 1, 1)`, which is also the grid the launcher
//!   derives from `y`'s `1 x BN` tiles when `BN` ≥ the row length;
//! - `softmax_gather_online`: rows wider than a whole-row tile (e.g. 131072): `1 x BN` chunks gathered
//!   twice, a running max / sum in the first pass; explicit grid `(rows, 1, 1)`;
//! - `softmax_split_stats` + `softmax_split_apply`: few wide rows (fewer rows than SMs), each row split
//!   across `splits` blocks, grid `(rows, splits, 1)` for both. Pass 1 writes each split's partial max and
//!   sum to an f32 scratch `stats[rows, splits, 2]`; pass 2 combines a row's partials and writes its
//!   split of the output. 16 rows of 131072 get 16·16 blocks instead of 16.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// The whole-row body shared by the entries that differ only in hints (device helpers are inlined).
    fn softmax_row<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let t = x
            .partition_padded::<S2<1, BN>>(Padding::NegInf)
            .load_with((row, 0), Hints::NO_TMA)
            .cast::<f32>();
        let m = t.amax::<1>();
        let e = (t - m.broadcast()).exp();
        let s = e.sum::<1>();
        y.store_with((e / s.broadcast()).cast::<E>(), Hints::NO_TMA);
    }

    /// `y[r, :] = softmax(x[r, :])`; `BN` must be at least the row length (a power of two).
    #[cutile::entry]
    pub fn row_softmax<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        softmax_row(x, y);
    }

    /// `row_softmax` with 8 worker warps per block.
    #[cutile::entry(num_worker_warps = 8)]
    pub fn row_softmax_w8<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        softmax_row(x, y);
    }

    /// `row_softmax` with 16 worker warps per block.
    #[cutile::entry(num_worker_warps = 16)]
    pub fn row_softmax_w16<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        softmax_row(x, y);
    }

    /// Online softmax for long rows. Grid `(rows, 1, 1)` (explicit): block `r` walks row `r` in `1 x BN`
    /// chunks (any row length ≥ 1), folding each into the running max and sum, then writes
    /// `exp(x - m) / l` chunk by chunk. Default load/store hints and occupancy 8, as the looped RMSNorm
    /// that reached 3550 GB/s on 8192-wide bf16 rows with 2048-wide chunks (the DSL has no hinted
    /// `store_at`).
    #[cutile::entry(occupancy = 8)]
    pub fn row_softmax_online<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let px = x.partition_padded::<S2<1, BN>>(Padding::NegInf);
        let chunks = px.num_tiles(1);
        // The first chunk holds column 0, so `m` is finite from the start and no `exp(-inf - -inf)` NaN
        // can arise; padding lanes add `exp(-inf) = 0`.
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
        let mb = m.broadcast::<S2<1, BN>>();
        let lb = l.broadcast::<S2<1, BN>>();
        for j in 0..chunks {
            let t = px.load((row, j)).cast::<f32>();
            let out = ((t - mb).exp() / lb).cast::<E>();
            // SAFETY: block `r` writes only chunks of row `r`, so no two blocks write the same elements.
            unsafe { y.store_at((row, j), out) };
        }
    }

    /// Softmax of one f32 row held as a 1-D tile, with approximate `exp` and division (cuTile's fast form).
    fn softmax_fast<const BN: i32>(t: Tile<f32, S1<BN>>) -> Tile<f32, S1<BN>> {
        let m = t.amax::<0>();
        let e = (t - m.broadcast()).exp_approx();
        let s = e.sum::<0>();
        e.div_approx_ftz(s.broadcast())
    }

    /// Gather softmax, one block per row. Grid `(rows, 1, 1)`; `BN` is a power of two ≥ the row length.
    #[cutile::entry]
    pub fn softmax_gather<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let r = row.splat::<S1<BN>>();
        let c = iota::<BN>();
        if x.dim(1) == BN && y.dim(1) == BN && row < x.dim(0) && row < y.dim(0) {
            // SAFETY: rows `row < rows` and columns `0..BN == cols` of both arrays exist.
            let t = unsafe { x.gather_unchecked((r, c), Hints::default()) };
            let out = softmax_fast(t.cast::<f32>()).cast::<E>();
            // SAFETY: as above; block `row` writes only row `row`, so no two blocks write the same elements.
            unsafe { y.scatter_unchecked((r, c), out, Hints::default()) };
        } else {
            // Padding lanes read -inf: they never win the max and add exp(-inf) = 0 to the sum.
            let t = x.gather((r, c), None, f32::NEG_INFINITY);
            let out = softmax_fast(t.cast::<f32>()).cast::<E>();
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { y.scatter((r, c), out, None) };
        }
    }

    /// Online gather softmax for rows wider than one tile. Grid `(rows, 1, 1)` (explicit): block `r` gathers
    /// row `r` in `BN`-wide chunks (any row length ≥ 1), folding each into a running max `m` and sum `l`,
    /// then writes `exp(x - m) / l` chunk by chunk with scatters. Approximate `exp` and division. A chunk
    /// (or row prefix) of only -inf entries keeps `m = -inf`; the shift used in `exp` is then 0, so no
    /// `-inf - -inf` NaN arises (a row of only -inf gives NaN, like the reference and torch).
    #[cutile::entry(occupancy = 8)]
    pub fn softmax_gather_online<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let r = row.splat::<S1<BN>>();
        let lane = iota::<BN>();
        let chunks = (x.dim(1) + (BN - 1)) / BN;
        let mut m = full::<f32, S1<1>>(f32::NEG_INFINITY);
        let mut l = zeros::<f32, S1<1>>();
        for j in 0..chunks {
            let t = x
                .gather_with(
                    (r, lane + j * BN),
                    None,
                    f32::NEG_INFINITY,
                    Hints::with_latency(1),
                )
                .cast::<f32>();
            let m_new = m.max(t.amax::<0>());
            let shift = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
            let p = (t - shift.broadcast()).exp_approx().sum::<0>();
            l = fma(l, (m - shift).exp_approx(), p);
            m = m_new;
        }
        let shift = select(m == f32::NEG_INFINITY, 0.0, m).broadcast::<S1<BN>>();
        let lb = l.broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let t = x
                .gather_with((r, c), None, f32::NEG_INFINITY, Hints::with_latency(1))
                .cast::<f32>();
            let out = (t - shift).exp_approx().div_approx_ftz(lb).cast::<E>();
            // SAFETY: block `r` writes only row `r` (bounds-masked), so no two blocks write the same elements.
            unsafe { y.scatter_with((r, c), out, None, Hints::with_latency(1)) };
        }
    }

    /// The chunk range `[first, last)` of split `s` of a row of `cols` columns when every split takes
    /// `per` `BN`-wide chunks (the last split may take fewer; a split past the end takes none).
    fn split_chunks<const BN: i32>(
        cols: Scalar<i32>,
        s: Scalar<i32>,
        per: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>) {
        let chunks = (cols + (BN - 1)) / BN;
        let first = s * per;
        let last = (first + per).min(chunks);
        (first, last)
    }

    /// Split-row softmax, pass 1 of 2: the partial max and sum of one split of a row. Grid
    /// `(rows, splits, 1)` (explicit): block `(r, s)` gathers chunks `s·per .. (s+1)·per` of row `r`
    /// (`BN` wide, the last one masked), folding them into a running max `m` and sum `l` as
    /// `softmax_gather_online`, and writes `stats[r, s, 0] = m`, `stats[r, s, 1] = l` (f32). A split of
    /// only -inf entries (or none) writes `m = -inf`, `l = 0`.
    #[cutile::entry(occupancy = 8)]
    pub fn softmax_split_stats<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        per: Scalar<i32>,
        stats: &mut Tensor<f32, S3<1, 1, 2>>,
    ) {
        let (row, s, _) = block_id();
        let r = row.splat::<S1<BN>>();
        let lane = iota::<BN>();
        let (first, last) = split_chunks::<BN>(x.dim(1), s, per);
        let mut m = full::<f32, S1<1>>(f32::NEG_INFINITY);
        let mut l = zeros::<f32, S1<1>>();
        for j in first..last {
            let t = x
                .gather_with(
                    (r, lane + j * BN),
                    None,
                    f32::NEG_INFINITY,
                    Hints::with_latency(1),
                )
                .cast::<f32>();
            let m_new = m.max(t.amax::<0>());
            let shift = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
            let p = (t - shift.broadcast()).exp_approx().sum::<0>();
            l = fma(l, (m - shift).exp_approx(), p);
            m = m_new;
        }
        let k = iota::<2>();
        let ml = select(k == 0, m.broadcast::<S1<2>>(), l.broadcast::<S1<2>>());
        // SAFETY: block `(r, s)` writes only `stats[r, s, 0..2]` (bounds-masked).
        unsafe {
            stats.scatter((row.splat::<S1<2>>(), s.splat::<S1<2>>(), k), ml, None);
        }
    }

    /// Split-row softmax, pass 2 of 2. Grid `(rows, splits, 1)` (explicit), as pass 1 with the same `per`:
    /// block `(r, s)` gathers the row's `splits` partials (at most 256; lanes past `splits` read
    /// `m = -inf`, `l = 0`), combines them (`m = max m_s`, `l = Σ l_s·exp(m_s - m)`) and writes
    /// `exp(x - m) / l` over its chunks with scatters. Approximate `exp` and division; when `m = -inf`
    /// (a row of only -inf) the shift is 0 and the row becomes NaN (`0 / 0`), like the reference and torch.
    #[cutile::entry(occupancy = 8)]
    pub fn softmax_split_apply<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        stats: &Tensor<f32, S3<DYN, DYN, DYN>>,
        per: Scalar<i32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let (row, s, _) = block_id();
        let (_, splits, _) = num_blocks();
        let part = iota::<256>();
        let pr = row.splat::<S1<256>>();
        let valid = part < splits;
        let ms = stats.gather(
            (pr, part, zeros::<i32, S1<256>>()),
            Some(valid),
            f32::NEG_INFINITY,
        );
        let ls = stats.gather((pr, part, full::<i32, S1<256>>(1)), Some(valid), 0.0);
        let m = ms.amax::<0>();
        let shift = select(m == f32::NEG_INFINITY, 0.0, m);
        let l = (ls * (ms - shift.broadcast()).exp_approx()).sum::<0>();
        let r = row.splat::<S1<BN>>();
        let lane = iota::<BN>();
        let sb = shift.broadcast::<S1<BN>>();
        let lb = l.broadcast::<S1<BN>>();
        let (first, last) = split_chunks::<BN>(x.dim(1), s, per);
        for j in first..last {
            let c = lane + j * BN;
            let t = x
                .gather_with((r, c), None, f32::NEG_INFINITY, Hints::with_latency(1))
                .cast::<f32>();
            let out = (t - sb).exp_approx().div_approx_ftz(lb).cast::<E>();
            // SAFETY: block `(r, s)` writes only its own chunks of row `r` (bounds-masked); the splits'
            // chunk ranges are disjoint.
            unsafe { y.scatter_with((r, c), out, None, Hints::with_latency(1)) };
        }
    }

    /// `TM` rows per block: block `i` takes rows `i·TM ..` as one `TM x BN` tile (`BN` ≥ the row length,
    /// a power of two). Padding rows past the end are all -inf (NaN after the max) and are never stored.
    #[cutile::entry(num_worker_warps = 8)]
    pub fn row_softmax_rows<E: Float, const TM: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<TM, BN>>,
    ) {
        let tile = block_id_x();
        let t = x
            .partition_padded::<S2<TM, BN>>(Padding::NegInf)
            .load_with((tile, 0), Hints::NO_TMA)
            .cast::<f32>();
        let m = t.amax::<1>();
        let e = (t - m.broadcast()).exp();
        let s = e.sum::<1>();
        y.store_with((e / s.broadcast()).cast::<E>(), Hints::NO_TMA);
    }
}
