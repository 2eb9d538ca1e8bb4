//! The dropout kernel: block `b` takes elements `b·BN ..` of the flattened (contiguous) input; each
//! element's 32 random bits are Philox-4x32-10 of its counter `offset + i` under the key `seed`, all
//! in i64 lanes holding u32 values (the DSL's integers are signed: a 32 x 32-bit product is taken as a
//! wrapping i64 product, its high word as an arithmetic shift masked to 32 bits).

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// Philox-4x32 multipliers and Weyl key increments (as in `reference.rs`).
    const M0: i64 = 0xD251_1F53;
    const M1: i64 = 0xCD9E_8D57;
    const W0: i64 = 0x9E37_79B9;
    const W1: i64 = 0xBB67_AE85;
    const MASK: i64 = 0xFFFF_FFFF;

    /// A u32 held in an i64 lane, from an i32 scalar's bits.
    fn u32_of(v: Scalar<i32>) -> Scalar<i64> {
        v.cast::<i64>() & MASK
    }

    /// One Philox round on the counter words (u32 values in i64 lanes) with round key `(k0, k1)`.
    #[allow(clippy::type_complexity)]
    fn round<const BN: i32>(
        c: (
            Tile<i64, S1<BN>>,
            Tile<i64, S1<BN>>,
            Tile<i64, S1<BN>>,
            Tile<i64, S1<BN>>,
        ),
        k0: Scalar<i64>,
        k1: Scalar<i64>,
    ) -> (
        Tile<i64, S1<BN>>,
        Tile<i64, S1<BN>>,
        Tile<i64, S1<BN>>,
        Tile<i64, S1<BN>>,
    ) {
        let (c0, c1, c2, c3) = c;
        let p0 = c0 * M0;
        let p1 = c2 * M1;
        (
            ((p1 >> 32) & MASK) ^ c1 ^ k0,
            p1 & MASK,
            ((p0 >> 32) & MASK) ^ c3 ^ k1,
            p0 & MASK,
        )
    }

    /// Round key `r` of the key `(k0, k1)`: `(k0 + r·W0, k1 + r·W1)` mod 2^32.
    fn key(k: Scalar<i64>, r: i64, w: i64) -> Scalar<i64> {
        (k + r * w) & MASK
    }

    /// The first word of Philox-4x32-10 of the counters `(c0, c1, 0, 0)` under `(k0, k1)`.
    fn philox<const BN: i32>(
        c0: Tile<i64, S1<BN>>,
        c1: Tile<i64, S1<BN>>,
        k0: Scalar<i64>,
        k1: Scalar<i64>,
    ) -> Tile<i64, S1<BN>> {
        let z = zeros::<i64, S1<BN>>();
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
        let c = round(c, key(k0, 9, W0), key(k1, 9, W1));
        c.0
    }

    /// `y[i] = x[i] · scale` where Philox's bits of element `i` are `≥ thr`, else 0, for the flattened
    /// `x` and `y`. `seed`, `offset` and `thr` (≤ 2^32) come as (low, high) 32-bit words. Grid: the
    /// tiles of `y`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn dropout<E: Float, const BN: i32>(
        x: &Tensor<E, S1<DYN>>,
        seed_lo: Scalar<i32>,
        seed_hi: Scalar<i32>,
        offset_lo: Scalar<i32>,
        offset_hi: Scalar<i32>,
        thr_lo: Scalar<i32>,
        thr_hi: Scalar<i32>,
        scale: Scalar<f32>,
        y: &mut Tensor<E, S1<BN>>,
    ) {
        let pid = block_id_x();
        let base =
            pid.cast::<i64>() * (BN as i64) + ((u32_of(offset_hi) << 32) | u32_of(offset_lo));
        let ctr = iota::<BN>().cast::<i64>() + base;
        let bits = philox(
            ctr & MASK,
            (ctr >> 32) & MASK,
            u32_of(seed_lo),
            u32_of(seed_hi),
        );
        let thr: Scalar<i64> = (u32_of(thr_hi) << 32) | u32_of(thr_lo);
        let keep = bits >= thr.splat::<S1<BN>>();
        let t = x
            .partition_padded::<S1<BN>>(Padding::Zero)
            .load(pid)
            .cast::<f32>();
        y.store(select(keep, t * scale, 0.0).cast::<E>());
    }
}
