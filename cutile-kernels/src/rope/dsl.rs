//! The standalone RoPE kernel: q `[T, Hq, D]` and k `[T, Hk, D]` (any strides) rotated in one launch.
//!
//! Block `(i, h)` owns tokens `i·BM ..` of head `h` (heads `0..Hq` are q, `Hq..Hq+Hk` are k) as one
//! `[BM, DP]` tile (`DP` the power of two ≥ `D`; lanes `≥ D` are masked off). Every lane `j < rot`
//! reads its own value and its partner's (`j ± rot/2` for NeoX, `j ^ 1` for GPT-J) through pointer
//! gathers and writes `x·cos + sign·x_partner·sin`; lanes `rot..D` are copied. Reads and writes of a
//! lane's pair stay in one block, so in place (`q_in` and `q_out` the same memory) is safe.
//!
//! Full rotary (`rot = D`, the common case), and partial rotary in place, take `rope_neox` / `rope_gptj`
//! instead (they rotate the pairs of lanes `0..rot` and never touch the rest): block `(i, g)` owns
//! tokens `i·BM ..` of the `HB` heads `g·HB ..` (groups `0..ceil(Hq/HB)` are q, the rest k) as two
//! `[BM, HB, HP]` tiles, the first and second lane of every rotated pair (`HP` the power of two ≥
//! `rot/2`; GPT-J reads them as one `[BM, HB, 2·HP]` run per row and splits the pairs in registers).
//! cos/sin are read once per token and block (`[BM, HP]`, broadcast over the heads), each x element is
//! read once, and no lane needs its partner from a second gather. The style is a host constant of the
//! entry, so NeoX's pair lanes `(i, i + D/2)` and GPT-J's rows are contiguous runs the compiler sees
//! as such (and vectorizes).
//!
//! Both kernels take the grid order as a run-time argument (`heads_fastest`): the 2-D grid (token
//! tiles, heads or head groups) with token tiles fastest, or a 1-D grid with the heads of one token
//! tile on adjacent blocks, so the blocks resident together cover one contiguous stretch of q and k
//! (`config::PairsConfig`, the pair kernels' default).
//!
//! A position outside `[0, max_pos)` reads `cos = sin = 0` (its rotated lanes become 0); nothing is read
//! out of bounds. The range check runs in the index type, so an i64 position is never truncated into
//! range.

/// `flags` bit: interleaved (GPT-J) pairs instead of half-split (NeoX).
pub const GPTJ: i32 = 1;

/// The grid order both RoPE kernels and the KV-cache write kernel take at run time (plain Rust over DSL
/// values, traced into the kernels that call it).
pub mod grid {
    use cutile::core::*;

    /// The block's (token tile, head or head group) from its index `(b0, b1)` among `heads` heads or
    /// groups: the 2-D grid `(token tiles, heads)` with token tiles fastest, or with `heads_fastest`
    /// (0 or 1) the 1-D grid `token tiles · heads` with the heads of one token tile adjacent, so blocks
    /// launched together read neighbouring memory. Arithmetic, not a branch: both orders are one
    /// kernel.
    pub fn tile_and_head(
        b0: Scalar<i32>,
        b1: Scalar<i32>,
        heads: Scalar<i32>,
        heads_fastest: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>) {
        let tokens_fastest = scalar::<i32>(1i32) - heads_fastest;
        (
            (b0 / heads) * heads_fastest + b0 * tokens_fastest,
            (b0 % heads) * heads_fastest + b1 * tokens_fastest,
        )
    }
}

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use super::grid::tile_and_head;
    use cutile::core::*;

    /// RoPE of `BM` tokens of head `h` of `x_in` into `x_out` (see the module docs).
    #[allow(clippy::too_many_arguments)]
    fn rope_head<E: Float, I: ElementType, const BM: i32, const DP: i32>(
        x_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        x_out: &mut Tensor<E, S3<1, 1, DP>>,
        h: Scalar<i32>,
        rows: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        rot: Scalar<i32>,
        flags: Scalar<i32>,
    ) {
        let d = x_in.dim(2);
        let p = positions.gather(rows, Some(valid), 0);
        let in_range = (p >= scalar::<I>(0).splat::<S1<BM>>())
            & (p < cos.dim(0).cast::<I>().splat::<S1<BM>>())
            & valid;
        let pos = select(in_range, p.cast::<i32>(), zeros::<i32, S1<BM>>())
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, DP>>();
        let pos_ok = in_range.reshape::<S2<BM, 1>>().broadcast::<S2<BM, DP>>();
        let r = rows.reshape::<S2<BM, 1>>().broadcast::<S2<BM, DP>>();
        let lane = iota::<DP>()
            .reshape::<S2<1, DP>>()
            .broadcast::<S2<BM, DP>>();
        let ok = valid.reshape::<S2<BM, 1>>().broadcast::<S2<BM, DP>>() & (lane < d);
        let half = rot / 2;
        let gptj = ((flags & super::GPTJ) != 0).splat::<S2<BM, DP>>();
        let even = (lane % 2) == 0;
        let lo = lane < half;
        // `first`: the lane whose partner's term enters with a minus sign.
        let first = select(gptj, even, lo);
        let partner = select(
            gptj,
            select(even, lane + 1, lane - 1),
            select(lo, lane + half, lane - half),
        );
        let cidx = select(gptj, lane / 2, select(lo, lane, lane - half));
        let rot_ok = ok & (lane < rot);
        let hh = h.splat::<S2<BM, DP>>();
        let x = x_in.gather((r, hh, lane), Some(ok), 0.0).cast::<f32>();
        let xp = x_in
            .gather((r, hh, partner), Some(rot_ok), 0.0)
            .cast::<f32>();
        let cs_ok = rot_ok & pos_ok;
        let c = cos.gather((pos, cidx), Some(cs_ok), 0.0);
        let s = sin.gather((pos, cidx), Some(cs_ok), 0.0);
        let ss = select(first, -s, s);
        let y = select(lane < rot, x * c + xp * ss, x);
        // SAFETY: block `(i, h)` writes only head `h` of its own tokens `i·BM ..`.
        unsafe { x_out.scatter((r, hh, lane), y.cast::<E>(), Some(ok)) };
    }

    /// Full-rotary RoPE of the `[BM, HB]` (token, head) block at tokens `rows`, heads `h0 ..` of `x_in`
    /// into `x_out` (see the module docs); `gptj` picks the pair lanes, and `DP2 = 2·HP` is GPT-J's
    /// row of pair lanes (unused by NeoX).
    #[allow(clippy::too_many_arguments)]
    fn rope_pairs<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const DP2: i32,
    >(
        x_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        x_out: &mut Tensor<E, S3<1, 1, HP>>,
        h0: Scalar<i32>,
        rows: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        gptj: bool,
    ) {
        let half = cos.dim(1);
        let p = positions.gather(rows, Some(valid), 0);
        let in_range = (p >= scalar::<I>(0).splat::<S1<BM>>())
            & (p < cos.dim(0).cast::<I>().splat::<S1<BM>>())
            & valid;
        let pos = select(in_range, p.cast::<i32>(), zeros::<i32, S1<BM>>())
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, HP>>();
        let i2 = iota::<HP>()
            .reshape::<S2<1, HP>>()
            .broadcast::<S2<BM, HP>>();
        let cs_ok = in_range.reshape::<S2<BM, 1>>().broadcast::<S2<BM, HP>>() & (i2 < half);
        let c = cos
            .gather((pos, i2), Some(cs_ok), 0.0)
            .reshape::<S3<BM, 1, HP>>()
            .broadcast::<S3<BM, HB, HP>>();
        let s = sin
            .gather((pos, i2), Some(cs_ok), 0.0)
            .reshape::<S3<BM, 1, HP>>()
            .broadcast::<S3<BM, HB, HP>>();
        let heads = iota::<HB>() + h0;
        let row_head_ok = valid.reshape::<S2<BM, 1>>().broadcast::<S2<BM, HB>>()
            & (heads < x_in.dim(1))
                .reshape::<S2<1, HB>>()
                .broadcast::<S2<BM, HB>>();
        if gptj {
            rope_pairs_interleaved::<E, BM, HB, HP, DP2>(
                x_in,
                x_out,
                rows,
                heads,
                row_head_ok,
                half,
                c,
                s,
            );
        } else {
            let r = rows.reshape::<S3<BM, 1, 1>>().broadcast::<S3<BM, HB, HP>>();
            let hh = heads
                .reshape::<S3<1, HB, 1>>()
                .broadcast::<S3<BM, HB, HP>>();
            let i = iota::<HP>()
                .reshape::<S3<1, 1, HP>>()
                .broadcast::<S3<BM, HB, HP>>();
            let ok = row_head_ok
                .reshape::<S3<BM, HB, 1>>()
                .broadcast::<S3<BM, HB, HP>>()
                & (i < half);
            let (lo, hi) = (i, i + half);
            let x1 = x_in.gather((r, hh, lo), Some(ok), 0.0).cast::<f32>();
            let x2 = x_in.gather((r, hh, hi), Some(ok), 0.0).cast::<f32>();
            let y1 = x1 * c - x2 * s;
            let y2 = x2 * c + x1 * s;
            // SAFETY: block `(i, g)` writes only heads `h0 .. h0 + HB` of its own tokens `i·BM ..`, lanes
            // it read itself.
            unsafe {
                x_out.scatter((r, hh, lo), y1.cast::<E>(), Some(ok));
                x_out.scatter((r, hh, hi), y2.cast::<E>(), Some(ok));
            }
        }
    }

    /// GPT-J's pairs `(2i, 2i + 1)` of the `[BM, HB]` (token, head) block at `rows`, `heads` (mask
    /// `row_head_ok`, `half` pairs per row) rotated by `c`, `s`. Each row's `2·HP = DP2` lanes are
    /// one gather over a contiguous lane run, reshaped to `[.., HP, 2]` so the pair is the last axis,
    /// split and re-joined in registers, and scattered back the same way. The contiguous run lets
    /// tileiras vectorize (sm_90: 16-byte `LDG`/`STG` at D 128 and at D 64 with two tokens); the
    /// session-30 form gathered `[BM, HB, HP, 2]` with lanes `2i + {0, 1}` and got 4-byte accesses
    /// (H200: bf16 D 128 T 4096 65% of copy, f16 D 64 T 32768 56%), and two gathers at `2i` and
    /// `2i + 1` before that 2-byte ones.
    #[allow(clippy::too_many_arguments)]
    fn rope_pairs_interleaved<
        E: Float,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const DP2: i32,
    >(
        x_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        x_out: &mut Tensor<E, S3<1, 1, HP>>,
        rows: Tile<i32, S1<BM>>,
        hh: Tile<i32, S1<HB>>,
        row_head_ok: Tile<bool, S2<BM, HB>>,
        half: Scalar<i32>,
        c: Tile<f32, S3<BM, HB, HP>>,
        s: Tile<f32, S3<BM, HB, HP>>,
    ) {
        let lane = iota::<DP2>()
            .reshape::<S3<1, 1, DP2>>()
            .broadcast::<S3<BM, HB, DP2>>();
        let ok = row_head_ok
            .reshape::<S3<BM, HB, 1>>()
            .broadcast::<S3<BM, HB, DP2>>()
            & (lane < half * 2);
        let r = rows
            .reshape::<S3<BM, 1, 1>>()
            .broadcast::<S3<BM, HB, DP2>>();
        let h = hh.reshape::<S3<1, HB, 1>>().broadcast::<S3<BM, HB, DP2>>();
        let x = x_in
            .gather((r, h, lane), Some(ok), 0.0)
            .cast::<f32>()
            .reshape::<S4<BM, HB, HP, 2>>();
        let x1 = x
            .extract::<S4<BM, HB, HP, 1>>(&[0, 0, 0, 0])
            .reshape::<S3<BM, HB, HP>>();
        let x2 = x
            .extract::<S4<BM, HB, HP, 1>>(&[0, 0, 0, 1])
            .reshape::<S3<BM, HB, HP>>();
        let y1 = (x1 * c - x2 * s).reshape::<S4<BM, HB, HP, 1>>();
        let y2 = (x2 * c + x1 * s).reshape::<S4<BM, HB, HP, 1>>();
        let y = cat::<3, f32, S4<BM, HB, HP, 1>, S4<BM, HB, HP, 1>, S4<BM, HB, HP, 2>>(y1, y2)
            .reshape::<S3<BM, HB, DP2>>();
        // SAFETY: as in `rope_pairs`: the block's own heads and tokens, lanes it read itself.
        unsafe { x_out.scatter((r, h, lane), y.cast::<E>(), Some(ok)) };
    }

    /// The body of the full-rotary entries: picks q or k and the head group from the block index.
    #[allow(clippy::too_many_arguments)]
    fn rope_full<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const DP2: i32,
    >(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        heads_fastest: Scalar<i32>,
        q_out: &mut Tensor<E, S3<1, 1, HP>>,
        k_out: &mut Tensor<E, S3<1, 1, HP>>,
        gptj: bool,
    ) {
        let (b0, b1, _) = block_id();
        let gq = (q_in.dim(1) + HB - 1) / HB;
        let (bi, g) = tile_and_head(b0, b1, gq + (k_in.dim(1) + HB - 1) / HB, heads_fastest);
        let rows = iota::<BM>() + bi * BM;
        let valid = rows < positions.dim(0);
        if g < gq {
            rope_pairs::<E, I, BM, HB, HP, DP2>(
                q_in,
                q_out,
                g * HB,
                rows,
                valid,
                cos,
                sin,
                positions,
                gptj,
            );
        } else {
            rope_pairs::<E, I, BM, HB, HP, DP2>(
                k_in,
                k_out,
                (g - gq) * HB,
                rows,
                valid,
                cos,
                sin,
                positions,
                gptj,
            );
        }
    }

    /// Full-rotary NeoX RoPE of q and k in one launch. Grid explicit: `(ceil(T / BM), ceil(Hq / HB) +
    /// ceil(Hk / HB), 1)`, or with `heads_fastest = 1` `(ceil(T / BM) · (ceil(Hq / HB) + ceil(Hk /
    /// HB)), 1, 1)` (see `rope_full`). `DP2 = 2·HP` as for [`rope_gptj`] (NeoX reads its halves as two
    /// `HP`-lane runs and does not use it; one parameter list keeps one dispatch for both entries).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn rope_neox<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const DP2: i32,
    >(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        heads_fastest: Scalar<i32>,
        q_out: &mut Tensor<E, S3<1, 1, HP>>,
        k_out: &mut Tensor<E, S3<1, 1, HP>>,
    ) {
        rope_full::<E, I, BM, HB, HP, DP2>(
            q_in,
            k_in,
            cos,
            sin,
            positions,
            heads_fastest,
            q_out,
            k_out,
            false,
        );
    }

    /// Full-rotary GPT-J RoPE of q and k in one launch; grid as [`rope_neox`]. `DP2 = 2·HP`: the
    /// lanes of a row's pairs, read as one contiguous run.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn rope_gptj<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const DP2: i32,
    >(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        heads_fastest: Scalar<i32>,
        q_out: &mut Tensor<E, S3<1, 1, HP>>,
        k_out: &mut Tensor<E, S3<1, 1, HP>>,
    ) {
        rope_full::<E, I, BM, HB, HP, DP2>(
            q_in,
            k_in,
            cos,
            sin,
            positions,
            heads_fastest,
            q_out,
            k_out,
            true,
        );
    }

    /// RoPE of q and k in one launch. Grid explicit: `(ceil(T / BM), Hq + Hk, 1)`, or with
    /// `heads_fastest = 1` `(ceil(T / BM) · (Hq + Hk), 1, 1)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn rope<E: Float, I: ElementType, const BM: i32, const DP: i32>(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        rot: Scalar<i32>,
        flags: Scalar<i32>,
        heads_fastest: Scalar<i32>,
        q_out: &mut Tensor<E, S3<1, 1, DP>>,
        k_out: &mut Tensor<E, S3<1, 1, DP>>,
    ) {
        let (b0, b1, _) = block_id();
        let nq = q_in.dim(1);
        let (bi, head) = tile_and_head(b0, b1, nq + k_in.dim(1), heads_fastest);
        let rows = iota::<BM>() + bi * BM;
        let valid = rows < positions.dim(0);
        if head < nq {
            rope_head::<E, I, BM, DP>(
                q_in, q_out, head, rows, valid, cos, sin, positions, rot, flags,
            );
        } else {
            rope_head::<E, I, BM, DP>(
                k_in,
                k_out,
                head - nq,
                rows,
                valid,
                cos,
                sin,
                positions,
                rot,
                flags,
            );
        }
    }
}
