//! Element-wise activations and their gradients over a `rows x cols` view, math in f32 whatever the
//! storage type.
//!
//! Four kernels, each generic over the activation (`ACT`, one of [`SILU`], [`GELU_ERF`], [`GELU_TANH`],
//! [`RELU`]) and a `TM x BN` tile:
//! - `act_fwd`: `y = act(x)`;
//! - `act_bwd`: `dx = g · act'(x)`;
//! - `gated_fwd`: `y = act(a) · b` (SwiGLU / GeGLU; `a` and `b` may be the two halves of one tensor,
//!   passed as two views);
//! - `gated_bwd`: `da = g · b · act'(a)`, `db = g · act(a)`.
//!
//! Every kernel walks the output in `TM x BN` tiles, one per block: block `p` takes row tile
//! `p / ceil(cols / BN)` and column tile `p % ceil(cols / BN)`, so the grid is one-dimensional (explicit,
//! `(tiles, 1, 1)`) and never hits the 65535-block limit of the y axis. With `GATHER = 1` (the host's
//! default) tiles move through masked pointer gathers and scatters (`load_ptr_tko` / `store_ptr_tko`),
//! which tileiras lowers to predicated loads and stores, 16 bytes wide on aligned rows, all of a
//! block's loads in flight at once. With `GATHER = 0` inputs are view loads through zero-padded
//! partitions and outputs view stores (masked at the edges); tileiras puts each view load in a
//! bounds-check branch with its conversion, so a warp's loads wait for one another, and on rows off
//! 16 bytes (`silu_and_mul` of `[.., 2N]` with odd `N`) guards every element with its own branch. The
//! view form stays a tuner candidate (`config::candidates`).
//!
//! The math lives in [`math`], plain Rust over f32 tiles: the activation and the fast-or-exact choice
//! are host values, so only the chosen formula is traced.

/// `ACT` of SiLU, `x · sigmoid(x)`.
pub const SILU: i32 = 0;
/// `ACT` of the exact GELU, `x · Φ(x)`.
pub const GELU_ERF: i32 = 1;
/// `ACT` of the tanh-approximated GELU.
pub const GELU_TANH: i32 = 2;
/// `ACT` of ReLU, `max(x, 0)`.
pub const RELU: i32 = 3;
/// `ACT` of the tanh GELU's forward with its constants folded (`math::gelu_tanh_folded`) where the
/// output is 16-bit; otherwise the same as [`GELU_TANH`]. A tuner candidate (`ActConfig::folded`).
pub const GELU_TANH_FOLDED: i32 = 4;

/// The activations and their derivatives on f32 tiles.
pub mod math {
    use cutile::core::*;

    /// `sqrt(2 / π)`, the tanh GELU's scale.
    pub const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    /// The tanh GELU's cubic coefficient.
    pub const GELU_CUBIC: f32 = 0.044_715;
    /// `1 / sqrt(2π)`, the normal density's scale.
    pub const INV_SQRT_2PI: f32 = 0.398_942_3;
    /// Coefficients of the erfc approximation `erfc(z) ≈ t·(A1 + t·(A2 + t·(A3 + t·(A4 + t·A5))))·e^{-z²}`
    /// with `t = 1 / (1 + P·z)`, `z ≥ 0` (Abramowitz & Stegun, Handbook of Mathematical Functions,
    /// formula 7.1.26): absolute error below 1.5e-7 on `[0, ∞)`, under the f32 tolerance (1e-5
    /// relative) of `Φ(x) = erfc(-x/√2) / 2`. Tile IR has no `erf` op (`cutile/ir/src/schema`).
    pub const ERFC_P: f32 = 0.327_591_1;
    pub const ERFC_A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152,
        1.061_405_4,
    ];

    /// Whether element type `E` gets approximate `exp2` (flush-to-zero) and approximate division:
    /// for f16/bf16 storage only. Their few-ulp f32 error (about 1e-7 relative) is far below the
    /// rounding of a 16-bit result (2^-11 / 2^-8), so the output is the same; the f32 outputs keep the
    /// exact ops because the f32 tolerance (1e-5) leaves less room once the errors of exp, division
    /// and the erfc polynomial add up. Flushed subnormals only occur where `e^{-x}` underflows, where
    /// the activation is already `x` (or `0`) to f32 precision.
    pub fn fast<E: ElementType>() -> bool {
        E::SCALAR != cutile_ir::ScalarType::F32
    }

    /// `e^x`.
    pub fn exp<S: Shape>(x: Tile<f32, S>, fast: bool) -> Tile<f32, S> {
        if fast {
            (x * std::f32::consts::LOG2_E).exp2_ftz()
        } else {
            x.exp()
        }
    }

    /// `a / b`.
    pub fn div<S: Shape>(a: Tile<f32, S>, b: Tile<f32, S>, fast: bool) -> Tile<f32, S> {
        if fast { a.div_approx_ftz(b) } else { a / b }
    }

    /// `1 / (1 + e^{-x})`: 0 where `e^{-x}` overflows, 1 where it underflows, never NaN for finite x.
    pub fn sigmoid<S: Shape>(x: Tile<f32, S>, fast: bool) -> Tile<f32, S> {
        div(full::<f32, S>(1.0), exp(-x, fast) + 1.0, fast)
    }

    /// `(Φ(x), φ(x))`: the standard normal CDF and density, through the erfc approximation above on
    /// `z = |x| / √2` (no cancellation in the lower tail, where `Φ = erfc(z) / 2`).
    pub fn normal_cdf_pdf<S: Shape>(x: Tile<f32, S>, fast: bool) -> (Tile<f32, S>, Tile<f32, S>) {
        let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
        let t = div(full::<f32, S>(1.0), fma(z, ERFC_P, 1.0), fast);
        let mut poly = full::<f32, S>(ERFC_A[4]);
        for a in ERFC_A[..4].iter().rev() {
            poly = fma(poly, t, *a);
        }
        let g = exp(-(z * z), fast);
        let half_erfc = poly * t * g * 0.5;
        let cdf = select(x.cmp_ge(0.0), -half_erfc + 1.0, half_erfc);
        (cdf, g * INV_SQRT_2PI)
    }

    /// `(sigmoid(2u), 2u')` of the tanh GELU, `u = √(2/π)·(x + 0.044715·x³)`: `gelu = x · sigmoid(2u)`
    /// (as `(1 + tanh u) / 2 = sigmoid(2u)`).
    fn gelu_tanh_parts<S: Shape>(x: Tile<f32, S>, fast: bool) -> (Tile<f32, S>, Tile<f32, S>) {
        let x2 = x * x;
        let two_u = x * fma(x2, GELU_CUBIC, 1.0) * (2.0 * SQRT_2_OVER_PI);
        let two_du = fma(x2, 3.0 * GELU_CUBIC, 1.0) * (2.0 * SQRT_2_OVER_PI);
        (sigmoid(two_u, fast), two_du)
    }

    /// The tanh GELU in fewer f32 ops, for 16-bit outputs: `x / (1 + 2^(x·(a·x² + b)))` with
    /// `b = −2·√(2/π)·log2(e)` and `a = 0.044715·b` folded into one `fma`, `exp2` with flush-to-zero
    /// and one approximate division: six ops where `x · sigmoid(2u)` issues ten (the same value up to
    /// f32 rounding, far below a 16-bit output's).
    fn gelu_tanh_folded<S: Shape>(x: Tile<f32, S>) -> Tile<f32, S> {
        const B: f32 = -2.0 * SQRT_2_OVER_PI * std::f32::consts::LOG2_E;
        const A: f32 = B * GELU_CUBIC;
        let e = (x * fma(x * x, A, B)).exp2_ftz();
        x.div_approx_ftz(e + 1.0)
    }

    /// `act(x)` for an activation code of the parent module.
    pub fn forward<S: Shape>(act: i32, x: Tile<f32, S>, fast: bool) -> Tile<f32, S> {
        match act {
            super::SILU => x * sigmoid(x, fast),
            super::GELU_ERF => x * normal_cdf_pdf(x, fast).0,
            super::GELU_TANH_FOLDED if fast => gelu_tanh_folded(x),
            super::GELU_TANH | super::GELU_TANH_FOLDED => x * gelu_tanh_parts(x, fast).0,
            _ => x.max(0.0),
        }
    }

    /// `(act(x), act'(x))`. ReLU's derivative at 0 is 0 (as torch's).
    pub fn forward_and_slope<S: Shape>(
        act: i32,
        x: Tile<f32, S>,
        fast: bool,
    ) -> (Tile<f32, S>, Tile<f32, S>) {
        match act {
            super::SILU => {
                let s = sigmoid(x, fast);
                // d/dx x·s = s + x·s·(1 - s) = s · (1 + x·(1 - s)).
                (x * s, s * fma(x, -s + 1.0, 1.0))
            }
            super::GELU_ERF => {
                let (cdf, pdf) = normal_cdf_pdf(x, fast);
                (x * cdf, fma(x, pdf, cdf))
            }
            super::GELU_TANH | super::GELU_TANH_FOLDED => {
                let (s, two_du) = gelu_tanh_parts(x, fast);
                // d/dx x·s(2u) = s + x · s·(1 - s) · 2u'.
                (x * s, fma(x * s * (-s + 1.0), two_du, s))
            }
            _ => {
                let pos = x.cmp_gt(0.0);
                (select(pos, x, 0.0), select(pos, full::<f32, S>(1.0), 0.0))
            }
        }
    }
}

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use super::math;
    use cutile::core::*;

    /// The `(row tile, column tile)` block `block_id_x()` handles over `cols` columns in `BN`-wide tiles.
    fn tile_of<const BN: i32>(cols: Scalar<i32>) -> (Scalar<i32>, Scalar<i32>) {
        let pid = block_id_x();
        let col_tiles = (cols + (BN - 1)) / BN;
        let r = pid / col_tiles;
        (r, pid - r * col_tiles)
    }

    /// Row and column indices of the elements of tile `(r, c)` in `TM x BN` tiles.
    fn tile_indices<const TM: i32, const BN: i32>(
        r: Scalar<i32>,
        c: Scalar<i32>,
    ) -> (Tile<i32, S2<TM, BN>>, Tile<i32, S2<TM, BN>>) {
        let rows = (iota::<TM>() + r * TM)
            .reshape::<S2<TM, 1>>()
            .broadcast::<S2<TM, BN>>();
        let cols = (iota::<BN>() + c * BN)
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<TM, BN>>();
        (rows, cols)
    }

    /// Tile `(r, c)` of `t` in `TM x BN` tiles (zero past the edges), widened to f32: a view load, or
    /// with `GATHER` a masked pointer gather (see the module docs).
    fn tile_f32<E: Float, const TM: i32, const BN: i32, const GATHER: i32>(
        t: &Tensor<E, S2<DYN, DYN>>,
        r: Scalar<i32>,
        c: Scalar<i32>,
    ) -> Tile<f32, S2<TM, BN>> {
        if GATHER != 0 {
            t.gather(tile_indices::<TM, BN>(r, c), None, 0.0)
                .cast::<f32>()
        } else {
            t.partition_padded::<S2<TM, BN>>(Padding::Zero)
                .load((r, c))
                .cast::<f32>()
        }
    }

    /// Stores tile `(r, c)` of `y`: a view store, or with `GATHER` a masked pointer scatter.
    ///
    /// # Safety
    /// No other block of the launch may write tile `(r, c)`.
    unsafe fn put<E: Float, const TM: i32, const BN: i32, const GATHER: i32>(
        y: &mut Tensor<E, S2<TM, BN>>,
        r: Scalar<i32>,
        c: Scalar<i32>,
        v: Tile<E, S2<TM, BN>>,
    ) {
        if GATHER != 0 {
            unsafe { y.scatter(tile_indices::<TM, BN>(r, c), v, None) };
        } else {
            unsafe { y.store_at((r, c), v) };
        }
    }

    /// `y = act(x)`. Grid `(ceil(rows / TM) · ceil(cols / BN), 1, 1)`.
    #[cutile::entry]
    pub fn act_fwd<E: Float, const ACT: i32, const TM: i32, const BN: i32, const GATHER: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<TM, BN>>,
    ) {
        let (r, c) = tile_of::<BN>(y.dim(1));
        let t = tile_f32::<E, TM, BN, GATHER>(x, r, c);
        let out = math::forward(ACT, t, math::fast::<E>()).cast::<E>();
        // SAFETY: block `p` writes only its own tile `(r, c)`, which no other block is given.
        unsafe { put::<E, TM, BN, GATHER>(y, r, c, out) };
    }

    /// `dx = g · act'(x)`. Grid as `act_fwd`.
    #[cutile::entry]
    pub fn act_bwd<E: Float, const ACT: i32, const TM: i32, const BN: i32, const GATHER: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        g: &Tensor<E, S2<DYN, DYN>>,
        dx: &mut Tensor<E, S2<TM, BN>>,
    ) {
        let (r, c) = tile_of::<BN>(dx.dim(1));
        let t = tile_f32::<E, TM, BN, GATHER>(x, r, c);
        let gt = tile_f32::<E, TM, BN, GATHER>(g, r, c);
        let (_, slope) = math::forward_and_slope(ACT, t, math::fast::<E>());
        // SAFETY: block `p` writes only its own tile `(r, c)`.
        unsafe { put::<E, TM, BN, GATHER>(dx, r, c, (gt * slope).cast::<E>()) };
    }

    /// `y = act(a) · b`. Grid as `act_fwd`.
    #[cutile::entry]
    pub fn gated_fwd<E: Float, const ACT: i32, const TM: i32, const BN: i32, const GATHER: i32>(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<TM, BN>>,
    ) {
        let (r, c) = tile_of::<BN>(y.dim(1));
        let at = tile_f32::<E, TM, BN, GATHER>(a, r, c);
        let bt = tile_f32::<E, TM, BN, GATHER>(b, r, c);
        let out = (math::forward(ACT, at, math::fast::<E>()) * bt).cast::<E>();
        // SAFETY: block `p` writes only its own tile `(r, c)`.
        unsafe { put::<E, TM, BN, GATHER>(y, r, c, out) };
    }

    /// `da = g · b · act'(a)`, `db = g · act(a)`. Grid as `act_fwd`; `da` and `db` may be the two
    /// halves of one tensor (disjoint views).
    #[cutile::entry]
    pub fn gated_bwd<E: Float, const ACT: i32, const TM: i32, const BN: i32, const GATHER: i32>(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S2<DYN, DYN>>,
        g: &Tensor<E, S2<DYN, DYN>>,
        da: &mut Tensor<E, S2<TM, BN>>,
        db: &mut Tensor<E, S2<TM, BN>>,
    ) {
        let (r, c) = tile_of::<BN>(da.dim(1));
        let at = tile_f32::<E, TM, BN, GATHER>(a, r, c);
        let bt = tile_f32::<E, TM, BN, GATHER>(b, r, c);
        let gt = tile_f32::<E, TM, BN, GATHER>(g, r, c);
        let (y, slope) = math::forward_and_slope(ACT, at, math::fast::<E>());
        // SAFETY: block `p` writes only its own tile `(r, c)` of `da` and of `db`.
        unsafe { put::<E, TM, BN, GATHER>(da, r, c, (gt * bt * slope).cast::<E>()) };
        unsafe { put::<E, TM, BN, GATHER>(db, r, c, (gt * y).cast::<E>()) };
    }
}
