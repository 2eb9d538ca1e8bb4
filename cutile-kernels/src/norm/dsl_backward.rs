//! The backward kernels of RMSNorm and LayerNorm over the last axis of a `rows x cols` matrix, math in
//! f32 whatever the storage type. A call is three kinds of launch (see `backward.rs`):
//!
//! - `*_bwd_dx<E, BN>`: one block per row (grid `(rows, 1, 1)`, explicit), the row walked in `BN`-wide
//!   gathered chunks twice: a first pass accumulating the per-lane sums the gradient needs (`Σ g·x`,
//!   and `Σ x²` for RMSNorm, `Σ g` for LayerNorm, `g = dy·w`), a second writing `dx`. RMSNorm recomputes
//!   its `rstd` from `x` and `eps` in the first pass and stores it (f32, one per row) for the weight
//!   gradient; LayerNorm reads the forward's `mean` and `rstd` (`layer_norm_stats`);
//! - `*_bwd_partial<E, TM, BN>`: the weight (and bias) gradient as a column reduction, without atomics:
//!   block `(g, j)` of a `(G, ceil(cols / BN))` grid sums `dy·x̂` (and `dy`) over the row tiles `g, g + G,
//!   …` (`TM x BN` tiles, zero padded) of column tile `j`, and stores the `1 x BN` f32 sum as row `g` of
//!   a `[G, cols]` partial matrix (scratch);
//! - `sum_partials<E, BN>`: `out[c] = Σ_g part[g, c]`, rows in a fixed order, cast to `E`; grid
//!   `ceil(cols / BN)`.
//!
//! The partial kernels load through views, not gathers: unlike the one-tile activation kernels, their
//! loop lets tileiras overlap a step's loads with the previous step's math, and gathers measured
//! slower on the H200 (bf16 `[16384, 4096]` `rms_norm_backward` 222.1 against 192.1 µs,
//! `layer_norm_backward` 232.8 against 202.4; `docs/h200-results.md`, session 16).
//!
//! The partial sums are always added in the same order, so a call is deterministic.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod backward_kernels {
    use cutile::core::*;

    /// RMSNorm backward, `dx` of row `block_id_x()`, and its `rstd` (f32). Grid `(rows, 1, 1)`.
    #[cutile::entry(occupancy = 4)]
    pub fn rms_norm_bwd_dx<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        dy: &Tensor<E, S2<DYN, DYN>>,
        eps: Scalar<f32>,
        dx: &mut Tensor<E, S2<1, BN>>,
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
        let mut sxx = zeros::<f32, S1<BN>>();
        let mut sgx = zeros::<f32, S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let xt = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let dt = dy.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            sxx = fma(xt, xt, sxx);
            sgx = fma(dt * wt, xt, sgx);
        }
        let inv = (sxx.sum::<0>() / n + eps).rsqrt();
        // dx = r·g - x · r³ · Σ(g·x) / n.
        let coef = (inv * inv * inv * sgx.sum::<0>() / n).broadcast::<S1<BN>>();
        // SAFETY: block `row` writes only element `row` (bounds-masked).
        unsafe { rstd.scatter_with(r1, inv, None, lat) };
        let inv_row = inv.broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let xt = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let dt = dy.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let out = dt * wt * inv_row - xt * coef;
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { dx.scatter_with((ri, c), out.cast::<E>(), None, lat) };
        }
    }

    /// LayerNorm backward, `dx` of row `block_id_x()` from the forward's `mean` and `rstd` (f32, one
    /// per row). Grid `(rows, 1, 1)`.
    #[cutile::entry(occupancy = 4)]
    pub fn layer_norm_bwd_dx<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        dy: &Tensor<E, S2<DYN, DYN>>,
        mean: &Tensor<f32, S1<DYN>>,
        rstd: &Tensor<f32, S1<DYN>>,
        dx: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let ri = row.splat::<S1<BN>>();
        let r1 = row.splat::<S1<1>>();
        let lane = iota::<BN>();
        let cols = x.dim(1);
        let n = cols.cast::<f32>();
        let chunks = (cols + (BN - 1)) / BN;
        let lat = Hints::with_latency(1);
        let m = mean.gather_with(r1, None, 0.0, lat);
        let r = rstd.gather_with(r1, None, 0.0, lat);
        let mut sg = zeros::<f32, S1<BN>>();
        let mut sgx = zeros::<f32, S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let xt = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let dt = dy.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let g = dt * wt;
            sg += g;
            sgx = fma(g, xt, sgx);
        }
        let sg1 = sg.sum::<0>();
        // mean(g) and mean(g·x̂) = r · (Σ g·x - m · Σ g) / n.
        let a = (sg1 / n).broadcast::<S1<BN>>();
        let b = (r * (sgx.sum::<0>() - m * sg1) / n).broadcast::<S1<BN>>();
        let m_row = m.broadcast::<S1<BN>>();
        let r_row = r.broadcast::<S1<BN>>();
        for j in 0..chunks {
            let c = lane + j * BN;
            let xt = x.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let dt = dy.gather_with((ri, c), None, 0.0, lat).cast::<f32>();
            let wt = w.gather_with(c, None, 0.0, lat).cast::<f32>();
            let xh = (xt - m_row) * r_row;
            let out = r_row * (dt * wt - a - xh * b);
            // SAFETY: block `row` writes only row `row` (bounds-masked).
            unsafe { dx.scatter_with((ri, c), out.cast::<E>(), None, lat) };
        }
    }

    /// RMSNorm weight-gradient partials: `part[g, j-tile] = Σ dy · x · rstd` over the row tiles of
    /// group `g`. Grid: the `1 x BN` tiles of `part` (`[G, cols]`).
    #[cutile::entry]
    pub fn rms_norm_bwd_partial<E: Float, const TM: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        dy: &Tensor<E, S2<DYN, DYN>>,
        rstd: &Tensor<f32, S1<DYN>>,
        part: &mut Tensor<f32, S2<1, BN>>,
    ) {
        let (g, j, _) = block_id();
        let (groups, _, _) = num_blocks();
        let px = x.partition_padded::<S2<TM, BN>>(Padding::Zero);
        let pd = dy.partition_padded::<S2<TM, BN>>(Padding::Zero);
        let pr = rstd.partition_padded::<S1<TM>>(Padding::Zero);
        let tiles = px.num_tiles(0);
        let mut acc = zeros::<f32, S2<TM, BN>>();
        for t in (g..tiles).step_by(groups) {
            let xt = px.load((t, j)).cast::<f32>();
            let dt = pd.load((t, j)).cast::<f32>();
            let r = pr.load(t).reshape::<S2<TM, 1>>().broadcast::<S2<TM, BN>>();
            acc = fma(dt * xt, r, acc);
        }
        part.store(acc.sum::<0>());
    }

    /// LayerNorm weight- and bias-gradient partials: `pw[g, j-tile] = Σ dy · (x - mean) · rstd` and
    /// `pb[g, j-tile] = Σ dy` over the row tiles of group `g`. Grid: the `1 x BN` tiles of `pw`
    /// (`[G, cols]`; `pb` has its shape).
    #[cutile::entry]
    pub fn layer_norm_bwd_partial<E: Float, const TM: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        dy: &Tensor<E, S2<DYN, DYN>>,
        mean: &Tensor<f32, S1<DYN>>,
        rstd: &Tensor<f32, S1<DYN>>,
        pw: &mut Tensor<f32, S2<1, BN>>,
        pb: &mut Tensor<f32, S2<1, BN>>,
    ) {
        let (g, j, _) = block_id();
        let (groups, _, _) = num_blocks();
        let px = x.partition_padded::<S2<TM, BN>>(Padding::Zero);
        let pd = dy.partition_padded::<S2<TM, BN>>(Padding::Zero);
        let pm = mean.partition_padded::<S1<TM>>(Padding::Zero);
        let pr = rstd.partition_padded::<S1<TM>>(Padding::Zero);
        let tiles = px.num_tiles(0);
        let mut aw = zeros::<f32, S2<TM, BN>>();
        let mut ab = zeros::<f32, S2<TM, BN>>();
        for t in (g..tiles).step_by(groups) {
            let xt = px.load((t, j)).cast::<f32>();
            let dt = pd.load((t, j)).cast::<f32>();
            let m = pm.load(t).reshape::<S2<TM, 1>>().broadcast::<S2<TM, BN>>();
            let r = pr.load(t).reshape::<S2<TM, 1>>().broadcast::<S2<TM, BN>>();
            // Padding rows and columns have dy = 0 and add nothing.
            aw = fma(dt * (xt - m), r, aw);
            ab += dt;
        }
        pw.store(aw.sum::<0>());
        pb.store(ab.sum::<0>());
    }

    /// `out[c] = Σ_g part[g, c]` (f32 sums in row order, cast to `E`). Grid: the `BN` tiles of `out`.
    #[cutile::entry]
    pub fn sum_partials<E: Float, const BN: i32>(
        part: &Tensor<f32, S2<DYN, DYN>>,
        out: &mut Tensor<E, S1<BN>>,
    ) {
        let j = block_id_x();
        let p = part.partition_padded::<S2<8, BN>>(Padding::Zero);
        let tiles = p.num_tiles(0);
        let mut acc = zeros::<f32, S2<8, BN>>();
        for i in 0..tiles {
            acc += p.load((i, j));
        }
        out.store(acc.sum::<0>().reshape::<S1<BN>>().cast::<E>());
    }
}
