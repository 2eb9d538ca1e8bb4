//! The standalone RoPE kernel: q `[T, Hq, D]` and k `[T, Hk, D]` (any strides) rotated in one launch.
//!
//! Block `(i, h)` owns tokens `i·BM ..` of head `h` (heads `0..Hq` are q, `Hq..Hq+Hk` are k) as one
//! `[BM, DP]` tile (`DP` the power of two ≥ `D`; lanes `≥ D` are masked off). Every lane `j < rot`
//! reads its own value and its partner's (`j ± rot/2` for NeoX, `j ^ 1` for GPT-J) through pointer
//! gathers and writes `x·cos + sign·x_partner·sin`; lanes `rot..D` are copied. Reads and writes of a
//! lane's pair stay in one block, so in place (`q_in` and `q_out` the same memory) is safe.
//!
//! Full rotary (`rot = D`, the common case) takes `rope_neox` / `rope_gptj` instead: block `(i, g)` owns
//! tokens `i·BM ..` of the `HB` heads `g·HB ..` (groups `0..ceil(Hq/HB)` are q, the rest k) as two
//! `[BM, HB, HP]` tiles, the first and second lane of every rotated pair (`HP` the power of two ≥
//! `D/2`). cos/sin are read once per token and block (`[BM, HP]`, broadcast over the heads), each x
//! element is read once, and no lane needs its partner from a second gather. The style is a host
//! constant of the entry, so NeoX's pair lanes `(i, i + D/2)` are contiguous runs the compiler sees as
//! such.
//!
//! The pair kernels come in three forms (`FORM`, a tuner dimension): [`BROADCAST`] gathers cos/sin as
//! `[BM, HP]` and broadcasts them over the heads (tileiras moves them through shared memory to the x
//! tile's layout); [`DIRECT`] issues the x gathers first and gathers cos/sin straight in the x tile's
//! `[BM, HB, HP]` layout (repeated reads of one row hit L1; no shared memory, no barrier); [`LOOPED`]
//! is one block per token tile that gathers cos/sin once (as [`DIRECT`]) and walks every q and k head
//! group, so the dependent positions → cos/sin loads are paid once per token tile, not once per group.
//!
//! A position outside `[0, max_pos)` reads `cos = sin = 0` (its rotated lanes become 0); nothing is read
//! out of bounds. The range check runs in the index type, so an i64 position is never truncated into
//! range.

/// `flags` bit: interleaved (GPT-J) pairs instead of half-split (NeoX).
pub const GPTJ: i32 = 1;

/// `FORM` of the pair kernels: cos/sin broadcast over the heads (see the module docs).
pub const BROADCAST: i32 = 0;
/// `FORM` of the pair kernels: x first, cos/sin gathered in the x tile's layout.
pub const DIRECT: i32 = 1;
/// `FORM` of the pair kernels: one block per token tile, looping over the head groups.
pub const LOOPED: i32 = 2;

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
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

    /// cos and sin of the `BM` tokens at `rows` in the `[BM, HB, HP]` pair tile (one row per token,
    /// zero past `D/2` and for a position out of range): gathered as `[BM, HP]` and broadcast over the
    /// heads, or with `direct` gathered in the tile's own layout.
    #[allow(clippy::type_complexity)]
    fn pair_cos_sin<I: ElementType, const BM: i32, const HB: i32, const HP: i32>(
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        rows: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        direct: bool,
    ) -> (Tile<f32, S3<BM, HB, HP>>, Tile<f32, S3<BM, HB, HP>>) {
        let half = cos.dim(1);
        let p = positions.gather(rows, Some(valid), 0);
        let in_range = (p >= scalar::<I>(0).splat::<S1<BM>>())
            & (p < cos.dim(0).cast::<I>().splat::<S1<BM>>())
            & valid;
        let pos = select(in_range, p.cast::<i32>(), zeros::<i32, S1<BM>>());
        if direct {
            let pos = pos.reshape::<S3<BM, 1, 1>>().broadcast::<S3<BM, HB, HP>>();
            let i = iota::<HP>()
                .reshape::<S3<1, 1, HP>>()
                .broadcast::<S3<BM, HB, HP>>();
            let ok = in_range
                .reshape::<S3<BM, 1, 1>>()
                .broadcast::<S3<BM, HB, HP>>()
                & (i < half);
            (
                cos.gather((pos, i), Some(ok), 0.0),
                sin.gather((pos, i), Some(ok), 0.0),
            )
        } else {
            let pos = pos.reshape::<S2<BM, 1>>().broadcast::<S2<BM, HP>>();
            let i = iota::<HP>()
                .reshape::<S2<1, HP>>()
                .broadcast::<S2<BM, HP>>();
            let ok = in_range.reshape::<S2<BM, 1>>().broadcast::<S2<BM, HP>>() & (i < half);
            let c = cos.gather((pos, i), Some(ok), 0.0);
            let s = sin.gather((pos, i), Some(ok), 0.0);
            (
                c.reshape::<S3<BM, 1, HP>>().broadcast::<S3<BM, HB, HP>>(),
                s.reshape::<S3<BM, 1, HP>>().broadcast::<S3<BM, HB, HP>>(),
            )
        }
    }

    /// Full-rotary RoPE of the `[BM, HB]` (token, head) block at tokens `rows`, heads `h0 ..` of `x_in`
    /// into `x_out` (see the module docs); `gptj` picks the pair lanes. cos/sin are `cs` when given
    /// (a looped block's, read once), else gathered here after the x tile (before it with `FORM`
    /// [`BROADCAST`], the first form's order).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn rope_pairs<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const FORM: i32,
    >(
        x_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        x_out: &mut Tensor<E, S3<1, 1, HP>>,
        h0: Scalar<i32>,
        rows: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        cs: Option<(Tile<f32, S3<BM, HB, HP>>, Tile<f32, S3<BM, HB, HP>>)>,
        gptj: bool,
    ) {
        let half = cos.dim(1);
        let early = if FORM == super::BROADCAST && cs.is_none() {
            Some(pair_cos_sin::<I, BM, HB, HP>(
                cos, sin, positions, rows, valid, false,
            ))
        } else {
            None
        };
        let r = rows.reshape::<S3<BM, 1, 1>>().broadcast::<S3<BM, HB, HP>>();
        let hh = (iota::<HB>() + h0)
            .reshape::<S3<1, HB, 1>>()
            .broadcast::<S3<BM, HB, HP>>();
        let i = iota::<HP>()
            .reshape::<S3<1, 1, HP>>()
            .broadcast::<S3<BM, HB, HP>>();
        let ok = valid
            .reshape::<S3<BM, 1, 1>>()
            .broadcast::<S3<BM, HB, HP>>()
            & (hh < x_in.dim(1))
            & (i < half);
        let (lo, hi) = if gptj {
            (i * 2, i * 2 + 1)
        } else {
            (i, i + half)
        };
        let x1 = x_in.gather((r, hh, lo), Some(ok), 0.0).cast::<f32>();
        let x2 = x_in.gather((r, hh, hi), Some(ok), 0.0).cast::<f32>();
        let (c, s) = match (cs, early) {
            (Some(cs), _) | (None, Some(cs)) => cs,
            (None, None) => pair_cos_sin::<I, BM, HB, HP>(cos, sin, positions, rows, valid, true),
        };
        let y1 = x1 * c - x2 * s;
        let y2 = x2 * c + x1 * s;
        // SAFETY: a block writes only heads `h0 .. h0 + HB` of its own tokens `rows`, lanes it read
        // itself.
        unsafe {
            x_out.scatter((r, hh, lo), y1.cast::<E>(), Some(ok));
            x_out.scatter((r, hh, hi), y2.cast::<E>(), Some(ok));
        }
    }

    /// The body of the full-rotary entries. [`BROADCAST`] and [`DIRECT`]: block `(i, g)` rotates head
    /// group `g` (q groups first, then k) of tokens `i·BM ..`. [`LOOPED`]: block `i` rotates every group
    /// of its tokens with one read of cos/sin.
    #[allow(clippy::too_many_arguments)]
    fn rope_full<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const FORM: i32,
    >(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        q_out: &mut Tensor<E, S3<1, 1, HP>>,
        k_out: &mut Tensor<E, S3<1, 1, HP>>,
        gptj: bool,
    ) {
        let (bi, g, _) = block_id();
        let gq = (q_in.dim(1) + HB - 1) / HB;
        let rows = iota::<BM>() + bi * BM;
        let valid = rows < positions.dim(0);
        if FORM == super::LOOPED {
            let gk = (k_in.dim(1) + HB - 1) / HB;
            let cs = pair_cos_sin::<I, BM, HB, HP>(cos, sin, positions, rows, valid, true);
            for g in 0..gq {
                rope_pairs::<E, I, BM, HB, HP, FORM>(
                    q_in,
                    q_out,
                    g * HB,
                    rows,
                    valid,
                    cos,
                    sin,
                    positions,
                    Some(cs),
                    gptj,
                );
            }
            for g in 0..gk {
                rope_pairs::<E, I, BM, HB, HP, FORM>(
                    k_in,
                    k_out,
                    g * HB,
                    rows,
                    valid,
                    cos,
                    sin,
                    positions,
                    Some(cs),
                    gptj,
                );
            }
        } else if g < gq {
            rope_pairs::<E, I, BM, HB, HP, FORM>(
                q_in,
                q_out,
                g * HB,
                rows,
                valid,
                cos,
                sin,
                positions,
                None,
                gptj,
            );
        } else {
            rope_pairs::<E, I, BM, HB, HP, FORM>(
                k_in,
                k_out,
                (g - gq) * HB,
                rows,
                valid,
                cos,
                sin,
                positions,
                None,
                gptj,
            );
        }
    }

    /// Full-rotary NeoX RoPE of q and k in one launch. Grid explicit: `(ceil(T / BM), ceil(Hq / HB) +
    /// ceil(Hk / HB), 1)`, or `(ceil(T / BM), 1, 1)` for `FORM` [`LOOPED`].
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn rope_neox<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const FORM: i32,
    >(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        q_out: &mut Tensor<E, S3<1, 1, HP>>,
        k_out: &mut Tensor<E, S3<1, 1, HP>>,
    ) {
        rope_full::<E, I, BM, HB, HP, FORM>(q_in, k_in, cos, sin, positions, q_out, k_out, false);
    }

    /// Full-rotary GPT-J RoPE of q and k in one launch; grid as [`rope_neox`].
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn rope_gptj<
        E: Float,
        I: ElementType,
        const BM: i32,
        const HB: i32,
        const HP: i32,
        const FORM: i32,
    >(
        q_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        k_in: &Tensor<E, S3<DYN, DYN, DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        q_out: &mut Tensor<E, S3<1, 1, HP>>,
        k_out: &mut Tensor<E, S3<1, 1, HP>>,
    ) {
        rope_full::<E, I, BM, HB, HP, FORM>(q_in, k_in, cos, sin, positions, q_out, k_out, true);
    }

    /// RoPE of q and k in one launch. Grid explicit: `(ceil(T / BM), Hq + Hk, 1)`.
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
        q_out: &mut Tensor<E, S3<1, 1, DP>>,
        k_out: &mut Tensor<E, S3<1, 1, DP>>,
    ) {
        let (bi, head, _) = block_id();
        let nq = q_in.dim(1);
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
