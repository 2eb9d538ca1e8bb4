//! The dropout kernels: block `b` takes elements `b·BN ..` of the flattened (contiguous) input, which
//! are `BQ = BN / 8` groups of eight. Group `g` (counter `offset / 8 + b·BQ + j`) gets the four words of
//! one Philox-4x32-10 call under the key `seed`, split into eight 16-bit numbers; element `8g + c` of
//! the counter stream takes half `c mod 2` (low first) of word `c / 2`.
//! Philox runs in i32 lanes: the low half of each 32 x 32-bit product is the wrapping `*`, the high
//! half `mulhi_unsigned` (Tile IR's unsigned `mulhii`), so no 64-bit arithmetic is emulated.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// Philox-4x32 multipliers and Weyl key increments (as in `reference.rs`), as i32 bit patterns.
    const M0: i32 = 0xD251_1F53_u32 as i32;
    const M1: i32 = 0xCD9E_8D57_u32 as i32;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    const MASK: i64 = 0xFFFF_FFFF;

    /// A u32 held in an i64 lane, from an i32 scalar's bits.
    fn u32_of(v: Scalar<i32>) -> Scalar<i64> {
        v.cast::<i64>() & MASK
    }

    /// One Philox round on the counter words (u32 bit patterns in i32 lanes) with round key
    /// `(k0, k1)`.
    #[allow(clippy::type_complexity)]
    fn round<const BQ: i32>(
        c: (
            Tile<i32, S1<BQ>>,
            Tile<i32, S1<BQ>>,
            Tile<i32, S1<BQ>>,
            Tile<i32, S1<BQ>>,
        ),
        k0: Scalar<i32>,
        k1: Scalar<i32>,
    ) -> (
        Tile<i32, S1<BQ>>,
        Tile<i32, S1<BQ>>,
        Tile<i32, S1<BQ>>,
        Tile<i32, S1<BQ>>,
    ) {
        let (c0, c1, c2, c3) = c;
        (
            c2.mulhi_unsigned(M1) ^ c1 ^ k0,
            c2 * M1,
            c0.mulhi_unsigned(M0) ^ c3 ^ k1,
            c0 * M0,
        )
    }

    /// Round key `r` of the key word `k`: `k + r·w` mod 2^32.
    fn key(k: Scalar<i32>, r: u32, w: u32) -> Scalar<i32> {
        k + r.wrapping_mul(w) as i32
    }

    /// Philox-4x32-10 of the counters `(c0, c1, 0, 0)` under `(k0, k1)`: all four words.
    #[allow(clippy::type_complexity)]
    fn philox<const BQ: i32>(
        c0: Tile<i32, S1<BQ>>,
        c1: Tile<i32, S1<BQ>>,
        k0: Scalar<i32>,
        k1: Scalar<i32>,
    ) -> (
        Tile<i32, S1<BQ>>,
        Tile<i32, S1<BQ>>,
        Tile<i32, S1<BQ>>,
        Tile<i32, S1<BQ>>,
    ) {
        let z = zeros::<i32, S1<BQ>>();
        let c = (c0, c1, z, z);
        let c = round(c, key(k0, 0, W0), key(k1, 0, W1));
        let c = round(c, key(k0, 1, W0), key(k1, 1, W1));
        let c = round(c, key(k0, 2, W0), key(k1, 2, W1));
        let c = round(c, key(k0, 3, W0), key(k1, 3, W1));
        let c = round(c, key(k0, 4, W0), key(k1, 4, W1));
        let c = round(c, key(k0, 5, W0), key(k1, 5, W1));
        let c = round(c, key(k0, 6, W0), key(k1, 6, W1));
        let c = round(c, key(k0, 7, W0), key(k1, 7, W1));
        let c = round(c, key(k0, 8, W0), key(k1, 8, W1));
        round(c, key(k0, 9, W0), key(k1, 9, W1))
    }

    /// `w` broadcast along a new axis of 8 columns.
    fn spread<const BQ: i32>(w: Tile<i32, S1<BQ>>) -> Tile<i32, S2<BQ, 8>> {
        w.reshape::<S2<BQ, 1>>().broadcast::<S2<BQ, 8>>()
    }

    /// The 16-bit random numbers of the `BQ` Philox groups starting at group `g0` under the key
    /// `(k0, k1)`, as a `[BQ, 8]` tile in element order: column `c` is half `c mod 2` (low first) of
    /// word `c / 2`, in `0..65536`.
    fn halves<const BQ: i32>(
        g0: Scalar<i64>,
        k0: Scalar<i32>,
        k1: Scalar<i32>,
    ) -> Tile<i32, S2<BQ, 8>> {
        let g = iota::<BQ>().cast::<i64>() + g0;
        let (w0, w1, w2, w3) = philox(g.cast::<i32>(), (g >> 32).cast::<i32>(), k0, k1);
        let col = iota::<8>().reshape::<S2<1, 8>>().broadcast::<S2<BQ, 8>>();
        let word = col >> 1;
        let bits = select(
            word < 2,
            select(word == 0, spread::<BQ>(w0), spread::<BQ>(w1)),
            select(word == 2, spread::<BQ>(w2), spread::<BQ>(w3)),
        );
        // `>>` is arithmetic: the mask drops the sign copies of the high half.
        (bits >> ((col & 1) * 16)) & 0xFFFF
    }

    /// The first Philox group of block `pid` of `BQ` groups: `offset / 8 + pid·BQ`.
    fn first_group<const BQ: i32>(
        pid: Scalar<i32>,
        lo: Scalar<i32>,
        hi: Scalar<i32>,
    ) -> Scalar<i64> {
        (((u32_of(hi) << 32) | u32_of(lo)) >> 3) + pid.cast::<i64>() * (BQ as i64)
    }

    /// `y[i] = x[i] · scale` where the 16-bit random number of element `i` is `≥ thr` (`0 ..= 65536`),
    /// else 0, for the flattened `x` and `y`. `seed` and `offset` (a multiple of 8) come as (low, high)
    /// 32-bit words. `BQ = BN / 8`. Grid: the tiles of `y`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn dropout<E: Float, const BN: i32, const BQ: i32>(
        x: &Tensor<E, S1<DYN>>,
        seed_lo: Scalar<i32>,
        seed_hi: Scalar<i32>,
        offset_lo: Scalar<i32>,
        offset_hi: Scalar<i32>,
        thr: Scalar<i32>,
        scale: Scalar<f32>,
        y: &mut Tensor<E, S1<BN>>,
    ) {
        let pid = block_id_x();
        let g0 = first_group::<BQ>(pid, offset_lo, offset_hi);
        // [BQ, 8] row-major is the tile's element order.
        let r = halves::<BQ>(g0, seed_lo, seed_hi).reshape::<S1<BN>>();
        let keep = r >= thr.splat::<S1<BN>>();
        let t = x
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load(pid)
            .cast::<f32>();
        y.store(select(keep, t * scale, 0.0).cast::<E>());
    }

    /// `dropout` over `x` and `y` viewed as `[n / 8, 8]` (`n` a multiple of 8): block `b` takes rows
    /// `b·BQ ..`, row `j` being Philox group `offset / 8 + b·BQ + j`, so the eight numbers of a group
    /// land in the tile's own element order with no reshuffle, and a 16-bit row is one 16-byte access.
    /// Same bits as `dropout`. Grid: the tiles of `y`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn dropout_rows<E: Float, const BQ: i32>(
        x: &Tensor<E, S2<DYN, 8>>,
        seed_lo: Scalar<i32>,
        seed_hi: Scalar<i32>,
        offset_lo: Scalar<i32>,
        offset_hi: Scalar<i32>,
        thr: Scalar<i32>,
        scale: Scalar<f32>,
        y: &mut Tensor<E, S2<BQ, 8>>,
    ) {
        let pid = block_id_x();
        let g0 = first_group::<BQ>(pid, offset_lo, offset_hi);
        let keep = halves::<BQ>(g0, seed_lo, seed_hi) >= thr.splat::<S2<BQ, 8>>();
        let t = x
            .partition_padded::<S2<BQ, 8>>(Padding::Zero)
            .load((pid, 0))
            .cast::<f32>();
        y.store(select(keep, t * scale, 0.0).cast::<E>());
    }
}
