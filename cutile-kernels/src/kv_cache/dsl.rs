//! The KV-cache write kernel: k and v `[T, Hkv, D]` (any strides) scattered into their caches.
//!
//! The caches are addressed as `[blocks, block_size, Hkv, D]` (a contiguous `[B, Hkv, S, D]` cache is
//! passed as its `[B, S, Hkv, D]` strided view). Block `(i, h)` owns tokens `i·BM ..` of head `h` as
//! one `[BM, DP]` tile of k and one of v (`DP` the power of two ≥ `D`). The grid order is a run-time
//! flag: token tiles fastest (`(tiles, Hkv)` grid) or, with [`HEADS_FASTEST`], a 1-D grid of
//! `tiles · Hkv` blocks whose adjacent blocks hold the heads of one token tile. Token `t` goes to
//! `(a[t] / block_size, a[t] % block_size)` when paged (`a` = slot mapping), to `(a[t], b[t])` otherwise
//! (batch, position). A token whose slot is negative or past the cache, or whose batch or position is
//! outside the cache, is skipped; the checks run in the index type, so an i64 index is never truncated
//! into range. Entries no token addresses are never written.

/// `flags` bit: paged cache (`a` = slot mapping) instead of contiguous (`a` = batch, `b` = position).
pub const PAGED: i32 = 1;
/// `flags` bit: 1-D grid, the heads of one token tile on adjacent blocks.
pub const HEADS_FASTEST: i32 = 2;

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// Writes k and v of `BM` tokens of head `head`. Grid explicit: `(ceil(T / BM), Hkv, 1)`, or
    /// `(ceil(T / BM) · Hkv, 1, 1)` with [`HEADS_FASTEST`](super::HEADS_FASTEST).
    #[cutile::entry]
    // `ok = ok & ..` on device tiles: the DSL's `&` builds IR (no `&=` needed).
    #[allow(clippy::too_many_arguments, clippy::assign_op_pattern)]
    pub fn kv_cache_write<E: Float, I: Numeric, const BM: i32, const DP: i32>(
        k: &Tensor<E, S3<DYN, DYN, DYN>>,
        v: &Tensor<E, S3<DYN, DYN, DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        flags: Scalar<i32>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, DP>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, DP>>,
    ) {
        let (b0, b1, _) = block_id();
        // The flag bit as 0 or 1: RoPE's decode of the block index in either order.
        let hf = (flags & super::HEADS_FASTEST) / super::HEADS_FASTEST;
        let (bi, head) = crate::rope::grid::tile_and_head(b0, b1, k.dim(1), hf);
        let d = k.dim(2);
        let rows = iota::<BM>() + bi * BM;
        let valid = rows < index_a.dim(0);
        let nblk = k_cache.dim(0).cast::<I>().splat::<S1<BM>>();
        let bs = k_cache.dim(1).cast::<I>().splat::<S1<BM>>();
        let zero = scalar::<I>(0).splat::<S1<BM>>();
        let a = index_a.gather(rows, Some(valid), -1);
        let b = index_b.gather(rows, Some(valid), 0);
        let mut blk = a;
        let mut off = b;
        let mut ok = valid & (a >= zero);
        if (flags & super::PAGED) != 0 {
            blk = a / bs;
            off = a % bs;
            ok = ok & (blk < nblk);
        } else {
            ok = ok & (a < nblk) & (b >= zero) & (b < bs);
        }
        let blk = select(ok, blk, zero)
            .cast::<i32>()
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, DP>>();
        let off = select(ok, off, zero)
            .cast::<i32>()
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, DP>>();
        let r = rows.reshape::<S2<BM, 1>>().broadcast::<S2<BM, DP>>();
        let lane = iota::<DP>()
            .reshape::<S2<1, DP>>()
            .broadcast::<S2<BM, DP>>();
        let m = ok.reshape::<S2<BM, 1>>().broadcast::<S2<BM, DP>>() & (lane < d);
        let h = head.splat::<S2<BM, DP>>();
        let kt = k.gather((r, h, lane), Some(m), 0.0);
        let vt = v.gather((r, h, lane), Some(m), 0.0);
        // SAFETY: a token's (block, offset) is its own cache entry; distinct tokens of one call address
        // distinct entries (the caller's contract), and block `(i, h)` writes only head `h` of its tokens.
        unsafe {
            k_cache.scatter((blk, off, h, lane), kt, Some(m));
            v_cache.scatter((blk, off, h, lane), vt, Some(m));
        }
    }
}
