//! The fused QKV projection kernels: `x · W` for the q, k and v heads with an f32 epilogue (bias,
//! per-head RMSNorm of q and k, RoPE of q and k) that stores q and scatters k and v into a KV cache.
//!
//! A tile is rows `i·BM ..` of head `j` (`BN = D`: one whole head per tile, so the norm and
//! RoPE need no communication between blocks); heads `0..Hq` are q, then `Hkv` k heads, then `Hkv` v
//! heads. Three kernels share one epilogue ([`qkv_epilogue_tile`]):
//! - `fused_qkv`: the K loop of `mma` (as `gemm`'s `tile_product`) and the epilogue, grid `(Hq +
//!   2·Hkv, ceil(T/BM), 1)` (heads fastest); `fused_qkv_persistent`: the same over a fixed grid, each
//!   block looping over tiles in row-major order (prefill); both run the epilogue on 64-row slices;
//! - `qkv_partial`: split-K for decode shapes, block `(i, j, s)` writes the f32 partial product of the
//!   `s`-th K range into `part[s]` (`[S, T, N]`), grid `(ceil(T/BM), Hq + 2·Hkv, S)`;
//! - `qkv_epilogue`: sums `part` over its first axis and runs the epilogue, grid as `fused_qkv` (the
//!   split-K path's second launch);
//! - `qkv_split_last`: split-K in one launch: each block writes its partial as `qkv_partial` and
//!   counts itself in on a per-tile counter (acq_rel, device scope); the last block of a tile's `S`
//!   sums the partials in split order and runs the epilogue.
//!
//! The KV cache is addressed as `[blocks, block_size, Hkv, D]` (a contiguous `[B, Hkv, S, D]` cache is
//! passed as its `[B, S, Hkv, D]` strided view): row `r` goes to `(a[r] / block_size, a[r] %
//! block_size)` when paged (`a` = slot mapping), to `(a[r], b[r])` otherwise (batch, position); rows
//! with `a[r] < 0` or past `T` are not written. Run-time switches are bits of `flags` ([`BIAS`],
//! [`NORM`], [`GPTJ`], [`PAGED`]); an absent tensor is a dummy the kernel never reads.

/// `flags` bit: add the bias.
pub const BIAS: i32 = 1;
/// `flags` bit: per-head RMSNorm of q and k.
pub const NORM: i32 = 2;
/// `flags` bit: interleaved (GPT-J) RoPE instead of half-split (NeoX).
pub const GPTJ: i32 = 4;
/// `flags` bit: paged cache (`a` = slot mapping) instead of contiguous (`a` = batch, `b` = position).
pub const PAGED: i32 = 8;

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use crate::op::arrival;
    use cutile::core::*;

    /// NeoX RoPE of the first `R = 2·HR` lanes of every row: `(x1, x2) → (x1·c − x2·s, x2·c + x1·s)`
    /// for the halves `x1 = y[:, ..HR]`, `x2 = y[:, HR..R]`; lanes `R..D` pass through.
    fn rope_neox<const BM: i32, const D: i32, const R: i32, const HR: i32>(
        y: Tile<f32, S2<BM, D>>,
        c: Tile<f32, S2<BM, HR>>,
        s: Tile<f32, S2<BM, HR>>,
    ) -> Tile<f32, S2<BM, D>> {
        let x1 = y.extract::<S2<BM, HR>>(&[0, 0]);
        let x2 = y.extract::<S2<BM, HR>>(&[0, 1]);
        let rot =
            cat::<1, f32, S2<BM, HR>, S2<BM, HR>, S2<BM, R>>(x1 * c - x2 * s, x2 * c + x1 * s);
        pass_through::<BM, D, R>(y, rot)
    }

    /// GPT-J RoPE of the first `R` lanes: pairs `(y[2i], y[2i+1])` rotate by angle `i`.
    fn rope_gptj<const BM: i32, const D: i32, const R: i32, const HR: i32>(
        y: Tile<f32, S2<BM, D>>,
        c: Tile<f32, S2<BM, HR>>,
        s: Tile<f32, S2<BM, HR>>,
    ) -> Tile<f32, S2<BM, D>> {
        let pairs = y.extract::<S2<BM, R>>(&[0, 0]).reshape::<S3<BM, HR, 2>>();
        let e = pairs
            .extract::<S3<BM, HR, 1>>(&[0, 0, 0])
            .reshape::<S2<BM, HR>>();
        let o = pairs
            .extract::<S3<BM, HR, 1>>(&[0, 0, 1])
            .reshape::<S2<BM, HR>>();
        let re = (e * c - o * s).reshape::<S3<BM, HR, 1>>();
        let ro = (o * c + e * s).reshape::<S3<BM, HR, 1>>();
        let rot = cat::<2, f32, S3<BM, HR, 1>, S3<BM, HR, 1>, S3<BM, HR, 2>>(re, ro)
            .reshape::<S2<BM, R>>();
        pass_through::<BM, D, R>(y, rot)
    }

    /// `rot` (the rotated first `R` lanes) followed by `y`'s lanes `R..D` (`R` is `D` or `D / 2`).
    fn pass_through<const BM: i32, const D: i32, const R: i32>(
        y: Tile<f32, S2<BM, D>>,
        rot: Tile<f32, S2<BM, R>>,
    ) -> Tile<f32, S2<BM, D>> {
        let mut out = y;
        if R == D {
            out = rot.reshape::<S2<BM, D>>();
        } else {
            out = cat::<1, f32, S2<BM, R>, S2<BM, R>, S2<BM, D>>(
                rot,
                y.extract::<S2<BM, R>>(&[0, 1]),
            );
        }
        out
    }

    /// The epilogue of block `(bi, head)` on its f32 projection tile `acc` (`BM` rows of one head):
    /// bias, per-head RMSNorm (q and k heads), RoPE (q and k heads), then q stored as tile `(bi, head)`
    /// of `q: [T, Hq·D]`, or k / v scattered into their cache (see the module docs for the addressing).
    #[allow(clippy::too_many_arguments)]
    fn qkv_epilogue_tile<
        E: Float,
        I: ElementType,
        const BM: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
    >(
        acc: Tile<f32, S2<BM, D>>,
        bi: Scalar<i32>,
        head: Scalar<i32>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<BM, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
    ) {
        let ntok = positions.dim(0);
        let nq = q.dim(1) / D;
        let nkv = k_cache.dim(2);
        let rows = iota::<BM>() + bi * BM;
        let valid = rows < ntok;
        let lane = iota::<D>();
        let lat = Hints::with_latency(1);
        let mut y = acc;
        if (flags & super::BIAS) != 0 {
            let b = bias
                .gather_with(lane + head * D, None, 0.0, lat)
                .cast::<f32>();
            y += b.reshape::<S2<1, D>>().broadcast::<S2<BM, D>>();
        }
        let is_q = head < nq;
        let is_qk = head < nq + nkv;
        if (flags & super::NORM) != 0 && is_qk {
            let wq = q_norm.gather_with(lane, None, 0.0, lat).cast::<f32>();
            let wk = k_norm.gather_with(lane, None, 0.0, lat).cast::<f32>();
            let w = select(is_q.splat::<S1<D>>(), wq, wk)
                .reshape::<S2<1, D>>()
                .broadcast::<S2<BM, D>>();
            let inv = ((y * y).sum::<1>() / (D as f32) + eps).rsqrt();
            y = y * inv.broadcast::<S2<BM, D>>() * w;
        }
        if is_qk {
            let pos = positions
                .gather_with(rows, Some(valid), 0, lat)
                .cast::<i32>()
                .reshape::<S2<BM, 1>>()
                .broadcast::<S2<BM, HR>>();
            let hl = iota::<HR>()
                .reshape::<S2<1, HR>>()
                .broadcast::<S2<BM, HR>>();
            let c = cos.gather_with((pos, hl), None, 0.0, lat);
            let s = sin.gather_with((pos, hl), None, 0.0, lat);
            if (flags & super::GPTJ) != 0 {
                y = rope_gptj::<BM, D, R, HR>(y, c, s);
            } else {
                y = rope_neox::<BM, D, R, HR>(y, c, s);
            }
        }
        let out = y.cast::<E>();
        if is_q {
            // SAFETY: tile `(bi, head)` of `q` is written by block `(bi, head)` only.
            unsafe { q.store_at((bi, head), out) };
        } else {
            let a = index_a
                .gather_with(rows, Some(valid), -1, lat)
                .cast::<i32>();
            let b = index_b.gather_with(rows, Some(valid), 0, lat).cast::<i32>();
            let bs = k_cache.dim(1);
            let paged = ((flags & super::PAGED) != 0).splat::<S1<BM>>();
            let blk = select(paged, a / bs, a);
            let off = select(paged, a % bs, b);
            let ok = ((a >= 0) & valid)
                .reshape::<S2<BM, 1>>()
                .broadcast::<S2<BM, D>>();
            let blk = blk.reshape::<S2<BM, 1>>().broadcast::<S2<BM, D>>();
            let off = off.reshape::<S2<BM, 1>>().broadcast::<S2<BM, D>>();
            let lanes = lane.reshape::<S2<1, D>>().broadcast::<S2<BM, D>>();
            if is_qk {
                let h = (head - nq).splat::<S2<BM, D>>();
                // SAFETY: a row's (block, offset) is one token's cache entry; distinct tokens of one
                // call address distinct entries (the caller's contract), and block `(bi, head)` writes
                // only head `head - Hq` of its own rows.
                unsafe { k_cache.scatter_with((blk, off, h, lanes), out, Some(ok), lat) };
            } else {
                let h = (head - nq - nkv).splat::<S2<BM, D>>();
                // SAFETY: as for k.
                unsafe { v_cache.scatter_with((blk, off, h, lanes), out, Some(ok), lat) };
            }
        }
    }

    /// `Σ_k x[tm, k] @ w[k, head]` over all K tiles with f32 accumulation: the K loop of the fused
    /// kernels, the same form as the GEMM family's `tile_product` (operands multiplied as stored).
    fn head_product<E: MmaOperand<f32>, const BM: i32, const BK: i32, const D: i32>(
        px: Partition<E, S2<BM, BK>>,
        pw: Partition<E, S2<BK, D>>,
        tm: Scalar<i32>,
        head: Scalar<i32>,
        k_tiles: Scalar<i32>,
    ) -> Tile<f32, S2<BM, D>> {
        let mut acc = zeros::<f32, S2<BM, D>>();
        for k in 0..k_tiles {
            acc = mma(px.load((tm, k)), pw.load((k, head)), acc);
        }
        acc
    }

    /// The epilogue of row tile `tm` (`BM` rows) of head `head`, run on `EB`-row slices of `acc`
    /// (`BM` is `EB` or `2·EB`): the cos/sin tiles and the RoPE halves of only `EB` rows live beside
    /// the accumulator at a time (with `BM = 128` in one piece, sm_90 spilled 1.3 KB per thread).
    #[allow(clippy::too_many_arguments)]
    fn qkv_epilogue_rows<
        E: Float,
        I: ElementType,
        const BM: i32,
        const EB: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
    >(
        acc: Tile<f32, S2<BM, D>>,
        tm: Scalar<i32>,
        head: Scalar<i32>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<EB, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
    ) {
        if BM == EB {
            qkv_epilogue_tile::<E, I, EB, D, R, HR>(
                acc.reshape::<S2<EB, D>>(),
                tm,
                head,
                bias,
                q_norm,
                k_norm,
                cos,
                sin,
                positions,
                index_a,
                index_b,
                eps,
                flags,
                q,
                k_cache,
                v_cache,
            );
        } else {
            qkv_epilogue_tile::<E, I, EB, D, R, HR>(
                acc.extract::<S2<EB, D>>(&[0, 0]),
                tm * 2,
                head,
                bias,
                q_norm,
                k_norm,
                cos,
                sin,
                positions,
                index_a,
                index_b,
                eps,
                flags,
                q,
                k_cache,
                v_cache,
            );
            qkv_epilogue_tile::<E, I, EB, D, R, HR>(
                acc.extract::<S2<EB, D>>(&[1, 0]),
                tm * 2 + 1,
                head,
                bias,
                q_norm,
                k_norm,
                cos,
                sin,
                positions,
                index_a,
                index_b,
                eps,
                flags,
                q,
                k_cache,
                v_cache,
            );
        }
    }

    /// Fused QKV: block `(j, i)` computes rows `i·BM ..` of head `j` of `x · w` (`x: [T, hidden]`, `w:
    /// [hidden, N]`, any strides) with f32 accumulation, then the epilogue in `EB`-row slices (`BM` is
    /// `EB` or `2·EB`; `q` is partitioned in `EB`-row tiles). Grid explicit: `(Hq + 2·Hkv, ceil(T /
    /// BM), 1)`, heads fastest, so the blocks running together share their rows of `x` and sweep the
    /// weight (which stays in L2) rather than each rereading `x` for its own head.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn fused_qkv<
        E: MmaOperand<f32> + Float,
        I: ElementType,
        const BM: i32,
        const BK: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
        const EB: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<EB, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
    ) {
        let (head, tm, _) = block_id();
        let px = x.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S2<BK, D>>(Padding::Zero);
        let acc = head_product::<E, BM, BK, D>(px, pw, tm, head, px.num_tiles(1));
        qkv_epilogue_rows::<E, I, BM, EB, D, R, HR>(
            acc, tm, head, bias, q_norm, k_norm, cos, sin, positions, index_a, index_b, eps, flags,
            q, k_cache, v_cache,
        );
    }

    /// [`fused_qkv`] over two heads per tile: block `(j, i)` computes rows `i·BM ..` of heads `2j` and
    /// `2j + 1` (`D2 = 2·D` columns of `w`, the GEMM family's 256-wide tile at D 128), then runs the
    /// epilogue of each head on its half of the accumulator. Grid `((Hq + 2·Hkv) / 2, ceil(T / BM),
    /// 1)`; the head count must be even (a pair may straddle the q/k or k/v boundary: each half's
    /// epilogue takes its own head's branch).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn fused_qkv_pair<
        E: MmaOperand<f32> + Float,
        I: ElementType,
        const BM: i32,
        const BK: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
        const EB: i32,
        const D2: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<EB, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
    ) {
        let (pair, tm, _) = block_id();
        let px = x.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S2<BK, D2>>(Padding::Zero);
        let acc = head_product::<E, BM, BK, D2>(px, pw, tm, pair, px.num_tiles(1));
        qkv_epilogue_rows::<E, I, BM, EB, D, R, HR>(
            acc.extract::<S2<BM, D>>(&[0, 0]),
            tm,
            pair * 2,
            bias,
            q_norm,
            k_norm,
            cos,
            sin,
            positions,
            index_a,
            index_b,
            eps,
            flags,
            q,
            k_cache,
            v_cache,
        );
        qkv_epilogue_rows::<E, I, BM, EB, D, R, HR>(
            acc.extract::<S2<BM, D>>(&[0, 1]),
            tm,
            pair * 2 + 1,
            bias,
            q_norm,
            k_norm,
            cos,
            sin,
            positions,
            index_a,
            index_b,
            eps,
            flags,
            q,
            k_cache,
            v_cache,
        );
    }

    /// Persistent [`fused_qkv`]: launch with a fixed grid `(P, 1, 1)` (one block per SM); block `p`
    /// computes tiles `p, p + P, …` of the `ceil(T / BM) × (Hq + 2·Hkv)` tiles in row-major order
    /// (head fastest, as the GEMM family's persistent kernels), each with its epilogue.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn fused_qkv_persistent<
        E: MmaOperand<f32> + Float,
        I: ElementType,
        const BM: i32,
        const BK: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
        const EB: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<EB, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
    ) {
        let px = x.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S2<BK, D>>(Padding::Zero);
        let heads = pw.num_tiles(1);
        let k_tiles = px.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        for tile in (block_id_x()..px.num_tiles(0) * heads).step_by(nblocks) {
            let tm = tile / heads;
            let head = tile % heads;
            let acc = head_product::<E, BM, BK, D>(px, pw, tm, head, k_tiles);
            // Tile indices `p + i·P` are distinct across blocks, so no two blocks write the same q
            // tile or cache rows of the same head.
            qkv_epilogue_rows::<E, I, BM, EB, D, R, HR>(
                acc, tm, head, bias, q_norm, k_norm, cos, sin, positions, index_a, index_b, eps,
                flags, q, k_cache, v_cache,
            );
        }
    }

    /// The f32 product of rows `bi·BM ..` of `x` with columns `col·BN ..` of `w` over the `split`-th of
    /// `splits` equal K-tile ranges (the split-K kernels' K loop).
    fn split_product<E: MmaOperand<f32>, const BM: i32, const BK: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S2<DYN, DYN>>,
        bi: Scalar<i32>,
        col: Scalar<i32>,
        split: Scalar<i32>,
        splits: Scalar<i32>,
    ) -> Tile<f32, S2<BM, BN>> {
        let px = x.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S2<BK, BN>>(Padding::Zero);
        let k_tiles = px.num_tiles(1);
        let per = (k_tiles + splits - 1) / splits;
        let lo = split * per;
        let hi = k_tiles.min(lo + per);
        let mut acc = zeros::<f32, S2<BM, BN>>();
        for k in lo..hi {
            acc = mma(px.load((bi, k)), pw.load((k, col)), acc);
        }
        acc
    }

    /// Split-K partial products: block `(i, j, s)` of a grid `(ceil(T / BM), N / BN, S)` writes the f32
    /// product of rows `i·BM ..` of `x` with columns `j·BN ..` of `w` over the `s`-th of `S` equal ranges
    /// of K tiles into tile `(s, i, j)` of `part: [S, T, N]`. The columns need not follow head
    /// boundaries (the epilogue kernel reads whole heads of `part`), so `BN` is free to trade the tile
    /// count against the bytes each K step loads.
    #[cutile::entry]
    pub fn qkv_partial<E: MmaOperand<f32>, const BM: i32, const BK: i32, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S2<DYN, DYN>>,
        part: &mut Tensor<f32, S3<1, BM, BN>>,
    ) {
        let (bi, col, split) = block_id();
        let (_, _, splits) = num_blocks();
        let acc = split_product::<E, BM, BK, BN>(x, w, bi, col, split, splits);
        // SAFETY: tile `(split, bi, col)` is written by block `(bi, col, split)` only.
        unsafe { part.store_at((split, bi, col), acc.reshape::<S3<1, BM, BN>>()) };
    }

    /// Split-K in one launch (decode): block `(i, j, s)` of a grid `(ceil(T / BM), Hq + 2·Hkv, S)`
    /// writes the f32 product of rows `i·BM ..` of `x` with head `j` of `w` over the `s`-th of `S`
    /// K ranges into tile `(s, i, j)` of `part: [S, T, N]`, then adds one to `counters[i·heads + j]`
    /// with acq_rel ordering at device scope (which orders the store before it and every later access
    /// after it, `Tensor::atomic_with`). The block that reads `S - 1` is the tile's last: the other
    /// partials are visible to it, so it sums all `S` in split order (the result does not depend on
    /// which block came last), sets the counter back to zero for the next launch, and runs the
    /// epilogue. `counters` must be zero at launch (the host's counter pool is zeroed once; every
    /// launch leaves it zero).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn qkv_split_last<
        E: MmaOperand<f32> + Float,
        I: ElementType,
        const BM: i32,
        const BK: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<BM, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        part: &mut Tensor<f32, S3<1, BM, D>>,
        counters: &mut Tensor<i32, S1<1>>,
    ) {
        let (bi, head, split) = block_id();
        let (_, heads, splits) = num_blocks();
        let acc = split_product::<E, BM, BK, D>(x, w, bi, head, split, splits);
        // The partials cross blocks only through the counter's release/acquire, which orders plain
        // loads and stores, not the TMA's asynchronous proxy (that needs a proxy fence the DSL does
        // not emit): plain stores here and plain loads in the last block.
        // SAFETY: tile `(split, bi, head)` is written by block `(bi, head, split)` only.
        unsafe {
            part.store_at_with(
                (split, bi, head),
                acc.reshape::<S3<1, BM, D>>(),
                Hints::NO_TMA,
            )
        };
        let tile = bi * heads + head;
        if arrival::count_in(counters, tile) == splits - 1 {
            let pp = part.partition_padded::<S3<1, BM, D>>(Padding::Zero);
            let mut sum = zeros::<f32, S2<BM, D>>();
            for s in 0..splits {
                sum += pp
                    .load_with((s, bi, head), Hints::NO_TMA)
                    .reshape::<S2<BM, D>>();
            }
            arrival::reset(counters, tile);
            qkv_epilogue_tile::<E, I, BM, D, R, HR>(
                sum, bi, head, bias, q_norm, k_norm, cos, sin, positions, index_a, index_b, eps,
                flags, q, k_cache, v_cache,
            );
        }
    }

    /// The epilogue over precomputed projections: block `(i, j)` sums tile `(s, i, j)` of `part: [S, T,
    /// N]` over `s` in f32 (split-K partials, or `S = 1` and `F = E` for a plain `gemm` output) and runs
    /// the epilogue. Grid explicit: `(ceil(T / BM), Hq + 2·Hkv, 1)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn qkv_epilogue<
        E: Float,
        F: Float,
        I: ElementType,
        const BM: i32,
        const D: i32,
        const R: i32,
        const HR: i32,
    >(
        part: &Tensor<F, S3<DYN, DYN, DYN>>,
        bias: &Tensor<E, S1<DYN>>,
        q_norm: &Tensor<E, S1<DYN>>,
        k_norm: &Tensor<E, S1<DYN>>,
        cos: &Tensor<f32, S2<DYN, DYN>>,
        sin: &Tensor<f32, S2<DYN, DYN>>,
        positions: &Tensor<I, S1<DYN>>,
        index_a: &Tensor<I, S1<DYN>>,
        index_b: &Tensor<I, S1<DYN>>,
        eps: Scalar<f32>,
        flags: Scalar<i32>,
        q: &mut Tensor<E, S2<BM, D>>,
        k_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
        v_cache: &mut Tensor<E, S4<1, 1, 1, D>>,
    ) {
        let (bi, head, _) = block_id();
        let pp = part.partition_padded::<S3<1, BM, D>>(Padding::Zero);
        let mut acc = zeros::<f32, S2<BM, D>>();
        for s in 0..part.dim(0) {
            acc += pp.load((s, bi, head)).cast::<f32>().reshape::<S2<BM, D>>();
        }
        qkv_epilogue_tile::<E, I, BM, D, R, HR>(
            acc, bi, head, bias, q_norm, k_norm, cos, sin, positions, index_a, index_b, eps, flags,
            q, k_cache, v_cache,
        );
    }
}
