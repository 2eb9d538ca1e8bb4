//! The NVFP4 MoE kernels: the format's codecs on integer tiles, quantize / dequantize, the GPU
//! alignment (`moe_align_*`: histogram, plan, stable placement), and the grouped
//! expert GEMMs (W4A16 on any arch with bf16/f16 MMA, sm_80 and up; the same structure with dense
//! bf16/f16 weights as the peer). The W4A16 GEMMs decode a weight tile into its even (low nibble) and
//! odd (high nibble) halves and multiply them by the even and odd activation columns (two MMAs of
//! depth `BK/2`), so the nibbles are never re-interleaved in registers.
//!
//! Packed NVFP4 bytes and e4m3 scale bytes are `i8` tensors (a `u8` runtime tensor binds to them); a
//! loaded byte is widened to i32 and masked with `0xFF`, so the sign extension of the load never
//! leaks into the nibbles. Every decode is exact:
//! - e2m1 nibble `s e e m` (`codec::e2m1_decode`): integer work, `2·|v| = m` when `e = 0`, else
//!   `(2 + m) << (e - 1)`, then one i32 → f32 conversion and a multiplication by 0.5 (the fast forms
//!   build the bit pattern instead: `codec::e2m1_bits`, `words`);
//! - e4m3 byte `s eeee mmm` (`codec::e4m3_decode`, `codec::e4m3_folded`): the bits `eeee mmm`
//!   placed at the low end of a wider float's exponent are the value times a power of two (subnormal
//!   codes included), which one or two exact multiplications by powers of two take back.
//!
//! The encodes are branch-free too: the e2m1 code of `|v|` is the number of grid midpoints below it
//! (`>` or `>=` per midpoint so ties go to the even code), the e4m3 code of a block scale is
//! `8·E + rne(v · 2^(9-E))` with `E` the number of powers of two `2^-5 … 2^8` at or below `v`
//! (rounding by adding and subtracting `1.5 · 2^23`, exact in f32 for `0 <= x < 2^22`).

/// The format's codecs on integer and f32 tiles (plain Rust over DSL values; traced into the kernels).
pub mod codec {
    use cutile::core::bitcast::width::W16;
    use cutile::core::*;

    /// `1.5 · 2^23`: adding and subtracting it rounds an f32 in `[0, 2^22)` to an integer, ties to even.
    const RNE_MAGIC: f32 = 12_582_912.0;

    /// The values of e2m1 nibbles (low 4 bits of `nib`, already `0..16`).
    pub fn e2m1_decode<S: Shape>(nib: Tile<i32, S>) -> Tile<f32, S> {
        let e = (nib >> 1i32) & 3i32;
        let m = nib & 1i32;
        let shift = (e - 1i32).max(0i32);
        let twice = select(e.cmp_eq(0i32), m, (m + 2i32) << shift);
        let mag = twice.cast::<f32>() * 0.5f32;
        select((nib & 8i32).cmp_ne(0i32), -mag, mag)
    }

    /// The values of non-negative e4m3 bytes (`0..0x7F`; higher bits are ignored). The byte's
    /// exponent and mantissa bits placed at the low end of an f32's exponent and the top of its
    /// mantissa (`b << 20`) are the f32 of `e4m3 · 2^-120`, subnormal codes included (both formats
    /// have an implicit leading one above exponent 0 and none at it), so one multiplication by
    /// `2^120` (exact: a power of two, the result normal) gives the value: two integer ops and one
    /// f32 multiplication, no conversion, no `select`. The multiplication must keep f32 subnormal
    /// inputs (no flush to zero), as Tile IR's `mulf` does unless asked to flush.
    pub fn e4m3_decode<S: Shape>(b: Tile<i32, S>) -> Tile<f32, S> {
        ((b << 20i32) & 0x07F0_0000i32).bitcast::<f32>() * 2f32.powi(120)
    }

    /// The factor the fast decode leaves on its weights: [`e2m1_bits`] times [`e4m3_folded`] is
    /// `e2m1 · e4m3 · 2^-7` exactly, so a GEMM multiplies its f32 accumulator by `global · 2^7`.
    pub const FOLD_UNDO: f32 = 128.0;

    /// The e2m1 nibbles of bytes `b` (sign-extended `i8` → `i16`; the low nibble, or the high one
    /// when `high`) as the bit patterns of `E` (bf16 or f16) with the nibble's sign, exponent and
    /// mantissa bits moved into place: `sign << 15 | (nib & 7) << 6` in bf16 is the value `· 2^-126`,
    /// `sign << 15 | (nib & 7) << 9` in f16 the value `· 2^-14`, for every code (the code `0.5` is a
    /// subnormal of `E`, the rest normals). Four integer ops per element, no conversion.
    pub fn e2m1_bits<E: BitWidth<Bits = W16>, S: Shape>(b: Tile<i16, S>, high: bool) -> Tile<E, S> {
        let mant_at = if E::SCALAR == cutile_ir::ScalarType::BF16 {
            6
        } else {
            9
        };
        // Shift the sign bit (bit 3 of the nibble) to bit 15, the magnitude bits to `mant_at`.
        let (ss, ms) = if high {
            (8i32, mant_at - 4)
        } else {
            (12i32, mant_at)
        };
        let sign = (b << ss) & -32768i32;
        let mag = if ms >= 0 {
            (b << ms) & (7i32 << mant_at)
        } else {
            (b >> -ms) & (7i32 << mant_at)
        };
        (sign | mag).bitcast::<E>()
    }

    /// e4m3 scale bytes (`0..0x7F`) as `E` multipliers of [`e2m1_bits`]: `e4m3 · 2^119` for bf16,
    /// `e4m3 · 2^7` for f16 (exact: 4 significant bits; at most `448 · 2^119 < 2^128` and `448 · 128
    /// < 65504`), so `bits · scale = e2m1 · e4m3 · 2^-7` exactly (at most 6 significant bits, between
    /// `2^-17` and 21: normal in bf16, and a multiple of `2^-24` in f16).
    ///
    /// Decoded in `E` itself, as [`e4m3_decode`] does in f32: the byte's bits placed at the low end
    /// of `E`'s exponent and the top of its mantissa are `e4m3 · 2^-120` in bf16 (`b << 4`) and
    /// `e4m3 · 2^-8` in f16 (`b << 7`), subnormal codes included, then exact multiplications by
    /// powers of two (`2^120 · 2^119`, `2^15`) that `E`'s packed multiply does two lanes at a time.
    /// They must keep subnormal inputs, which bf16/f16 multiplications do (no flush to zero), as the
    /// weights' own subnormal code 0.5 already needs.
    pub fn e4m3_folded<E: Numeric + BitWidth<Bits = W16>, S: Shape>(b: Tile<i32, S>) -> Tile<E, S> {
        let (at, muls): (i32, &[f32]) = if E::SCALAR == cutile_ir::ScalarType::BF16 {
            (4, &[2f32.powi(120), 2f32.powi(119)])
        } else {
            (7, &[2f32.powi(15)])
        };
        let v = ((b << at) & (0x7Fi32 << at)).cast::<i16>().bitcast::<E>();
        muls.iter().fold(v, |v, &m| v * full::<E, S>(m))
    }

    /// The e4m3 codes of non-negative block scales `v <= 448` (round to nearest even, saturating).
    pub fn e4m3_encode<S: Shape>(v: Tile<f32, S>) -> Tile<i32, S> {
        let mut big_e = zeros::<i32, S>();
        let mut p = 0.03125f32;
        for _ in 0..14 {
            big_e += v.cmp_ge(p).cast::<i32>();
            p *= 2.0;
        }
        let scale = (full::<i32, S>(1i32) << (-big_e + 14i32)).cast::<f32>() * 0.03125f32;
        let q = v * scale;
        let n = ((q + RNE_MAGIC) - RNE_MAGIC).cast::<i32>();
        (big_e * 8i32 + n).min(0x7Ei32)
    }

    /// The e2m1 nibbles of `v` (nearest, ties to even, magnitudes clamped to 6); bit 3 is the sign
    /// bit of `x` (the element before scaling, so -0.0 keeps its sign).
    pub fn e2m1_encode<S: Shape>(v: Tile<f32, S>, x: Tile<f32, S>) -> Tile<i32, S> {
        let a = v.abs();
        let code = a.cmp_gt(0.25f32).cast::<i32>()
            + a.cmp_ge(0.75f32).cast::<i32>()
            + a.cmp_gt(1.25f32).cast::<i32>()
            + a.cmp_ge(1.75f32).cast::<i32>()
            + a.cmp_gt(2.5f32).cast::<i32>()
            + a.cmp_ge(3.5f32).cast::<i32>()
            + a.cmp_gt(5.0f32).cast::<i32>();
        let neg_zero = x.cmp_eq(0.0f32) & (full::<f32, S>(1.0f32) / x).cmp_lt(0.0f32);
        let neg = x.cmp_lt(0.0f32) | neg_zero;
        code + select(neg, 8i32, 0i32)
    }

    /// NVFP4 quantization of a `BR x BK` f32 tile whose global scales are `gt` (`[BR, BKS]`: the
    /// tensor's scale, or each row's, broadcast): the packed codes (`[BR, BKH]` bytes, element `2j` in
    /// the low nibble of byte `j`) and the e4m3 block-scale codes (`[BR, BKS]`). A zero global gives
    /// zero scales, a zero block scale zero codes (the recipe in the module docs).
    pub fn quantize_tile<const BR: i32, const BK: i32, const BKH: i32, const BKS: i32>(
        t: Tile<f32, S2<BR, BK>>,
        gt: Tile<f32, S2<BR, BKS>>,
    ) -> (Tile<i8, S2<BR, BKH>>, Tile<i32, S2<BR, BKS>>) {
        let bamax = t.abs().reshape::<S3<BR, BKS, 16>>().amax_squeezed::<2>();
        let safe_g = select(gt.cmp_eq(0.0f32), 1.0f32, gt);
        let code = select(
            gt.cmp_eq(0.0f32),
            0i32,
            e4m3_encode((bamax / 6.0f32) / safe_g),
        );
        let sd = e4m3_decode(code) * gt;
        let inv = select(
            sd.cmp_eq(0.0f32),
            0.0f32,
            full::<f32, S2<BR, BKS>>(1.0f32) / select(sd.cmp_eq(0.0f32), 1.0f32, sd),
        );
        let inv_full = inv
            .reshape::<S3<BR, BKS, 1>>()
            .broadcast::<S3<BR, BKS, 16>>()
            .reshape::<S2<BR, BK>>();
        let codes = e2m1_encode(t * inv_full, t).reshape::<S3<BR, BKH, 2>>();
        let lo = codes.extract::<S3<BR, BKH, 1>>(&[0, 0, 0]);
        let hi = codes.extract::<S3<BR, BKH, 1>>(&[0, 0, 1]);
        let bytes = (lo | (hi << 4i32)).cast::<i8>().reshape::<S2<BR, BKH>>();
        (bytes, code)
    }
}

/// The rows form's choice of decode (`DEC` of `moe_gemm1_w4a16` / `moe_gemm2_w4a16`), plain Rust
/// over DSL values: `DEC = 0` the f32 decode (`codec::e2m1_decode`, the global inside the weights),
/// `DEC = 1` the bit-pattern decode (`codec::e2m1_bits`, the global on the accumulator).
pub mod pick {
    use cutile::core::bitcast::width::W16;
    use cutile::core::*;

    /// The even and odd halves of a weight tile in decode `dec` (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub fn halves<
        E: Numeric + BitWidth<Bits = W16>,
        const BN: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        dec: i32,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: Scalar<f32>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> (Tile<E, S2<BN, BKH>>, Tile<E, S2<BN, BKH>>) {
        if dec == 1 {
            super::kernels::dequant_halves_fast::<E, BN, BKH, BKS>(w, s, g, n, k)
        } else {
            super::kernels::dequant_halves::<E, BN, BKH, BKS>(w, s, global, g, n, k)
        }
    }

    /// The factor of the accumulators in decode `dec`: `global · 2^7` for the bit-pattern decode,
    /// 1 for the f32 one (its weights already hold the global).
    pub fn acc_scale(dec: i32, global: Scalar<f32>) -> Scalar<f32> {
        if dec == 1 {
            global * super::codec::FOLD_UNDO
        } else {
            scalar::<f32>(1.0f32)
        }
    }
}

/// The word decode of the decode form (plain Rust over DSL values): NVFP4 weights read as 32-bit
/// words of 8 nibbles and decoded two weights per integer instruction.
///
/// A word holds K positions `8c .. 8c + 8` of a weight row, nibble `i` (bits `4i .. 4i + 4`) at
/// position `8c + i` (bytes little-endian, low nibble first). Quarter `j` (0..4) of the word is the
/// pair of nibbles `j` and `j + 4`: shifted so nibble `j` lands in the low 16-bit lane and nibble `j + 4`
/// in the high one, each lane is the bit pattern of [`codec::e2m1_bits`] (sign at bit 15, the three
/// magnitude bits at the exponent's low end), so a shift and a mask per part build two `bf16`/`f16`
/// weights at once (about 1.9 integer ops per weight against about 5.5 for the `i16` decode), and
/// [`Tile::reinterpret`] reads the word tile as the pair tile: element `2c + l` of quarter `j` is
/// K position `8c + j + 4l`. The activations take the same order ([`quarters`]), so each quarter is
/// one MMA of depth `BK/4` and the weights are never re-interleaved.
pub mod words {
    use cutile::core::bitcast::width::W16;
    use cutile::core::*;

    /// How [`decode_quarters`] spreads each scale over its 16 weights: the same values, another
    /// relayout. Which one tileiras compiles to fewer instructions depends on the kernel (sm_90,
    /// session 28: with `PerWord` the 8-warp GEMM 2's K loop has 13–18% fewer instructions, GEMM 1's
    /// and the 4-warp GEMM 2's 7–26% more), so each kernel picks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ScaleSpread {
        /// Broadcast to the weights, as `E` elements.
        PerWeight,
        /// Broadcast to the words as 32-bit pairs (both lanes of a word share its scale), then read
        /// as `E`.
        PerWord,
    }

    /// Quarter `j` of the words `w` as two `E` bit patterns per word (see the module docs).
    pub fn e2m1_word_pair<E: BitWidth<Bits = W16>, S: Shape>(
        w: Tile<i32, S>,
        j: i32,
    ) -> Tile<i32, S> {
        let mant_at = if E::SCALAR == cutile_ir::ScalarType::BF16 {
            6
        } else {
            9
        };
        let sign_mask = 0x8000_8000u32 as i32;
        let mag_mask = (7i32 << mant_at) * 0x1_0001;
        // Nibble `j` has its sign at bit `4j + 3` and its magnitude at `4j .. 4j + 3`; nibble `j + 4`
        // the same 16 bits up, so one shift serves both lanes.
        let (ss, ms) = (12 - 4 * j, mant_at - 4 * j);
        let sign = if ss == 0 {
            w & sign_mask
        } else {
            (w << ss) & sign_mask
        };
        let mag = if ms >= 0 {
            (w << ms) & mag_mask
        } else {
            (w >> -ms) & mag_mask
        };
        sign | mag
    }

    /// The four quarters of the `BN x BK` weight tile `(n, k)` of group `g` (`w: [G, N, K/2]` bytes,
    /// `s: [G, N, K/16]` e4m3 scales), each `BN x KQ` in `E`, holding `e2m1 · e4m3 · 2^-7` exactly
    /// (the caller multiplies its accumulator by `global · FOLD_UNDO`). `BKH = BK/2` bytes, `BKS =
    /// BK/16` scales, `KW = BK/8` words and `KQ = BK/4` weights per quarter row.
    #[allow(clippy::too_many_arguments)]
    pub fn dequant_quarters<
        E: Numeric + BitWidth<Bits = W16>,
        const BN: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
        spread: ScaleSpread,
    ) -> [Tile<E, S2<BN, KQ>>; 4] {
        let words = w
            .partition_padded::<S3<1, BN, BKH>>(Padding::Zero)
            .load((g, n, k))
            .reinterpret::<i32, S2<BN, KW>>();
        let sc = super::kernels::scale_codes::<BN, BKS>(s, g, n, k);
        decode_quarters::<E, BN, BKS, KW, KQ>(words, sc, spread)
    }

    /// [`dequant_quarters`] of the gate and up rows of column tile `n` stacked into one tile: `w:
    /// [G, 2, I, K/2]` bytes and `s: [G, 2, I, K/16]` scales (W13 viewed with its gate and up halves
    /// as a dimension), rows `0..BN` of the result gate rows `n·BN..`, rows `BN..BN2` (`BN2 = 2·BN`)
    /// the same up rows. One `BN2`-row MMA operand instead of two keeps one accumulator.
    #[allow(clippy::too_many_arguments)]
    pub fn dequant_quarters_stacked<
        E: Numeric + BitWidth<Bits = W16>,
        const BN: i32,
        const BN2: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        w: &Tensor<i8, S4<DYN, DYN, DYN, DYN>>,
        s: &Tensor<i8, S4<DYN, DYN, DYN, DYN>>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> [Tile<E, S2<BN2, KQ>>; 4] {
        let zero = scalar::<i32>(0i32);
        let words = w
            .partition_padded::<S4<1, 2, BN, BKH>>(Padding::Zero)
            .load((g, zero, n, k))
            .reinterpret::<i32, S2<BN2, KW>>();
        let sc = super::kernels::unsigned(
            s.partition_padded::<S4<1, 2, BN, BKS>>(Padding::Zero)
                .load((g, zero, n, k))
                .reshape::<S2<BN2, BKS>>(),
        );
        decode_quarters::<E, BN2, BKS, KW, KQ>(words, sc, ScaleSpread::PerWeight)
    }

    /// The four quarters of a weight tile from its words (`BN x KW`, 8 nibbles each) and its e4m3
    /// scale codes (`BN x BKS`, `0..256`), as [`dequant_quarters`] returns them, the scales spread
    /// as `spread` says.
    pub fn decode_quarters<
        E: Numeric + BitWidth<Bits = W16>,
        const BN: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        words: Tile<i32, S2<BN, KW>>,
        sc: Tile<i32, S2<BN, BKS>>,
        spread: ScaleSpread,
    ) -> [Tile<E, S2<BN, KQ>>; 4] {
        // 16 weights per scale: 2 words, so 4 elements of a quarter row.
        let folded = super::codec::e4m3_folded::<E, S2<BN, BKS>>(sc);
        let scale = if spread == ScaleSpread::PerWord {
            let h = folded.bitcast::<i16>().cast::<i32>() & 0xFFFFi32;
            (h | (h << 16i32))
                .reshape::<S3<BN, BKS, 1>>()
                .broadcast::<S3<BN, BKS, 2>>()
                .reshape::<S2<BN, KW>>()
                .reinterpret::<E, S2<BN, KQ>>()
        } else {
            folded
                .reshape::<S3<BN, BKS, 1>>()
                .broadcast::<S3<BN, BKS, 4>>()
                .reshape::<S2<BN, KQ>>()
        };
        [0, 1, 2, 3].map(|j| {
            e2m1_word_pair::<E, S2<BN, KW>>(words, j).reinterpret::<E, S2<BN, KQ>>() * scale
        })
    }

    /// The activation tile `a` (`BT x BK`) in the order of [`dequant_quarters`], transposed for the
    /// MMA's N side: quarter `j`, element `(2c + l, t)` = `a[t, 8c + j + 4l]`.
    pub fn quarters<E: ElementType, const BT: i32, const BK: i32, const KW: i32, const KQ: i32>(
        a: Tile<E, S2<BT, BK>>,
    ) -> [Tile<E, S2<KQ, BT>>; 4] {
        let a = a.reshape::<S4<BT, KW, 2, 4>>();
        [0, 1, 2, 3].map(|j| {
            a.extract::<S4<BT, KW, 2, 1>>(&[0, 0, 0, j])
                .reshape::<S2<BT, KQ>>()
                .transpose()
        })
    }
}

/// Top-k selection on `BT x EP` score tiles (plain Rust over DSL values, unrolled over `KP` slots).
pub mod route {
    use cutile::core::*;

    /// `(ids, picked)`: the `KP` best experts of each row of `sel` in descending order (ties to the
    /// lower id), and `p` at those experts. Columns `>= E` must hold -inf in `sel`.
    pub fn top_k<const BT: i32, const EP: i32, const KP: i32>(
        sel: Tile<f32, S2<BT, EP>>,
        p: Tile<f32, S2<BT, EP>>,
    ) -> (Tile<i32, S2<BT, KP>>, Tile<f32, S2<BT, KP>>) {
        let cols = iota::<EP>()
            .reshape::<S2<1, EP>>()
            .broadcast::<S2<BT, EP>>();
        let slots = iota::<KP>()
            .reshape::<S2<1, KP>>()
            .broadcast::<S2<BT, KP>>();
        let mut sel = sel;
        let mut ids = zeros::<i32, S2<BT, KP>>();
        let mut picked = zeros::<f32, S2<BT, KP>>();
        for j in 0..KP {
            let m = sel.amax::<1>().broadcast::<S2<BT, EP>>();
            let idx = select(sel.cmp_eq(m), cols, EP).amin::<1>();
            let hit = cols.cmp_eq(idx.broadcast::<S2<BT, EP>>());
            let w = select(hit, p, 0.0f32).sum::<1>();
            let at_j = slots.cmp_eq(j);
            ids = select(at_j, idx.broadcast::<S2<BT, KP>>(), ids);
            picked = select(at_j, w.broadcast::<S2<BT, KP>>(), picked);
            sel = select(hit, f32::NEG_INFINITY, sel);
        }
        (ids, picked)
    }

    /// `sel` with every expert outside each row's best `keep` groups at -inf ([`GroupLimit`]): the `EP`
    /// experts are `GR` groups of `GS = EP / GR`, ranked by the sum of their two best scores, ties to the
    /// lower group id (two equal best scores both count, as `torch.topk(2)` has them).
    ///
    /// [`GroupLimit`]: crate::moe::reference::GroupLimit
    pub fn group_limit<const BT: i32, const EP: i32, const GR: i32, const GS: i32>(
        sel: Tile<f32, S2<BT, EP>>,
        keep: Scalar<i32>,
    ) -> Tile<f32, S2<BT, EP>> {
        let s3 = sel.reshape::<S3<BT, GR, GS>>();
        let best = s3.amax::<2>();
        let cols = iota::<GS>()
            .reshape::<S3<1, 1, GS>>()
            .broadcast::<S3<BT, GR, GS>>();
        let at = select(s3.cmp_eq(best.broadcast::<S3<BT, GR, GS>>()), cols, GS).amin::<2>();
        let rest = select(
            cols.cmp_eq(at.broadcast::<S3<BT, GR, GS>>()),
            f32::NEG_INFINITY,
            s3,
        );
        let mut score = (best + rest.amax::<2>()).reshape::<S2<BT, GR>>();
        let groups = iota::<GR>()
            .reshape::<S2<1, GR>>()
            .broadcast::<S2<BT, GR>>();
        let keep = keep.splat::<S2<BT, GR>>();
        let mut kept = groups.cmp_lt(0i32);
        for j in 0..GR {
            let m = score.amax::<1>().broadcast::<S2<BT, GR>>();
            let g = select(score.cmp_eq(m), groups, GR).amin::<1>();
            let hit = groups.cmp_eq(g.broadcast::<S2<BT, GR>>());
            kept |= hit & keep.cmp_gt(j);
            score = select(hit, f32::NEG_INFINITY, score);
        }
        let kept = kept
            .reshape::<S3<BT, GR, 1>>()
            .broadcast::<S3<BT, GR, GS>>()
            .reshape::<S2<BT, EP>>();
        select(kept, sel, f32::NEG_INFINITY)
    }
}

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use super::codec::*;
    use super::pick;
    use super::words;

    /// `silu(x) = x · sigmoid(x)` with the exact `exp` and division (the activation family's math).
    fn silu<S: Shape>(x: Tile<f32, S>) -> Tile<f32, S> {
        crate::activation::math::forward(crate::activation::dsl::SILU, x, false)
    }
    use super::route;
    use cutile::core::*;

    /// Bytes (`i8`) as their `0..256` values.
    pub fn unsigned<S: Shape>(b: Tile<i8, S>) -> Tile<i32, S> {
        b.cast::<i32>() & 255i32
    }

    /// Tile `(n, c)` of group `g` of a byte tensor `t: [G, N, C]` (packed NVFP4 values or e4m3
    /// scales) in `BN x BC` tiles, zero past the edges.
    pub fn group_tile<const BN: i32, const BC: i32>(
        t: &Tensor<i8, S3<DYN, DYN, DYN>>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        c: Scalar<i32>,
    ) -> Tile<i8, S2<BN, BC>> {
        t.partition_padded::<S3<1, BN, BC>>(Padding::Zero)
            .load((g, n, c))
            .reshape::<S2<BN, BC>>()
    }

    /// The e4m3 scale codes (`0..256`) of the `BN x BK` weight tile `(n, k)` of group `g` (`s: [G, N,
    /// K/16]`, `BKS = BK/16` per row).
    pub fn scale_codes<const BN: i32, const BKS: i32>(
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> Tile<i32, S2<BN, BKS>> {
        unsigned(group_tile::<BN, BKS>(s, g, n, k))
    }

    /// The dequantized `BN x BK` tile of rows `n·BN..` and columns `k·BK..` of group `g` of NVFP4
    /// data (`w: [G, N, K/2]`, `s: [G, N, K/16]`, `global` the group's scale), in f32. `BKH = BK/2`,
    /// `BKS = BK/16`.
    pub fn dequant_tile<const BN: i32, const BK: i32, const BKH: i32, const BKS: i32>(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: Scalar<f32>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> Tile<f32, S2<BN, BK>> {
        let bytes = unsigned(group_tile::<BN, BKH>(w, g, n, k));
        let lo = e2m1_decode(bytes & 15i32).reshape::<S3<BN, BKH, 1>>();
        let hi = e2m1_decode(bytes >> 4i32).reshape::<S3<BN, BKH, 1>>();
        let vals = cat::<2, f32, S3<BN, BKH, 1>, S3<BN, BKH, 1>, S3<BN, BKH, 2>>(lo, hi)
            .reshape::<S2<BN, BK>>();
        let sc = scale_codes::<BN, BKS>(s, g, n, k);
        let scale = (e4m3_decode(sc) * global)
            .reshape::<S3<BN, BKS, 1>>()
            .broadcast::<S3<BN, BKS, 16>>()
            .reshape::<S2<BN, BK>>();
        vals * scale
    }

    /// The `BN x BK` weight tile of [`dequant_tile`] split by nibble instead of interleaved: `(even,
    /// odd)`, each `BN x BKH`, holding elements `2j` (low nibbles) and `2j + 1` (high nibbles) of the
    /// K range, scaled, in `E`. A GEMM multiplies them by the even and odd columns of its activations
    /// (two MMAs of depth `BK/2`), so the nibbles are never re-interleaved in registers.
    #[allow(clippy::too_many_arguments)]
    pub fn dequant_halves<E: ElementType, const BN: i32, const BKH: i32, const BKS: i32>(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: Scalar<f32>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> (Tile<E, S2<BN, BKH>>, Tile<E, S2<BN, BKH>>) {
        let bytes = unsigned(group_tile::<BN, BKH>(w, g, n, k));
        let sc = scale_codes::<BN, BKS>(s, g, n, k);
        // 16 elements per scale = 8 bytes per scale in each half.
        let scale = (e4m3_decode(sc) * global)
            .reshape::<S3<BN, BKS, 1>>()
            .broadcast::<S3<BN, BKS, 8>>()
            .reshape::<S2<BN, BKH>>();
        let even = (e2m1_decode(bytes & 15i32) * scale).cast::<E>();
        let odd = (e2m1_decode(bytes >> 4i32) * scale).cast::<E>();
        (even, odd)
    }

    /// `BM x BKH` tiles of the even and odd columns of K tile `k` (`BKH = BK/2` each) of the rows
    /// `tok` of `x` (zero where `valid` is false or past the edge).
    pub fn gather_rows_split<E: ElementType, const BM: i32, const BKH: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        tok: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        k: Scalar<i32>,
    ) -> (Tile<E, S2<BM, BKH>>, Tile<E, S2<BM, BKH>>) {
        let rows = tok.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BKH>>();
        let even = (iota::<BKH>() * 2i32 + k * (2 * BKH))
            .reshape::<S2<1, BKH>>()
            .broadcast::<S2<BM, BKH>>();
        let mask = valid.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BKH>>();
        (
            x.gather((rows, even), Some(mask), 0i32),
            x.gather((rows, even + 1i32), Some(mask), 0i32),
        )
    }

    /// Element `i` of a rank-1 tensor, as a scalar.
    pub fn at<E: ElementType>(t: &Tensor<E, S1<DYN>>, i: Scalar<i32>) -> Scalar<E> {
        t.load_tile::<S1<1>>(i).reshape::<S0>().to_scalar()
    }

    /// `y[g] = dequantize(w[g], s[g], global[g])`, `y: [G, N, K]`; block `(p, g)` writes tile `p` of
    /// `BN x BK` (row-major over the `N x K` tiles) of group `g`.
    #[cutile::entry]
    pub fn nvfp4_dequantize<
        E: Float,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        y: &mut Tensor<E, S3<1, BN, BK>>,
    ) {
        let (p, g, _) = block_id();
        let col_tiles = (y.dim(2) + (BK - 1)) / BK;
        let n = p / col_tiles;
        let k = p - n * col_tiles;
        let t = dequant_tile::<BN, BK, BKH, BKS>(w, s, at(global, g), g, n, k);
        // SAFETY: block `(p, g)` writes only tile `(g, n, k)`.
        unsafe { y.store_at((g, n, k), t.cast::<E>().reshape::<S3<1, BN, BK>>()) };
    }

    /// The folded dequantization of the sorted form: `y[g] = e2m1 · e4m3 · 2^-7` of `w[g]`, `s[g]`
    /// (`y: [G, N, K]` bf16/f16), the bit-pattern decode of the decode form (four `i16` ops and one
    /// multiplication in `E` per element, no conversion: a pass at memory speed, where the f32 decode
    /// of `nvfp4_dequantize` is bound by its conversions), exact in `E`; the GEMM that reads `y`
    /// multiplies its f32 accumulator by `global[g] · FOLD_UNDO`. Block `(p, g)` writes tile `p` of
    /// `BN x BK` (row-major over the `N x K` tiles) of group `g`.
    #[cutile::entry]
    pub fn nvfp4_dequantize_folded<
        E: Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        y: &mut Tensor<E, S3<1, BN, BK>>,
    ) {
        let (p, g, _) = block_id();
        let col_tiles = (y.dim(2) + (BK - 1)) / BK;
        let n = p / col_tiles;
        let k = p - n * col_tiles;
        let (even, odd) = dequant_halves_fast::<E, BN, BKH, BKS>(w, s, g, n, k);
        let t = cat::<2, E, S3<BN, BKH, 1>, S3<BN, BKH, 1>, S3<BN, BKH, 2>>(
            even.reshape::<S3<BN, BKH, 1>>(),
            odd.reshape::<S3<BN, BKH, 1>>(),
        );
        // SAFETY: block `(p, g)` writes only tile `(g, n, k)`.
        unsafe { y.store_at((g, n, k), t.reshape::<S3<1, BN, BK>>()) };
    }

    /// [`nvfp4_dequantize_folded`] for bf16 over half scale groups: `w` viewed as `[2·groups, 4]`
    /// bytes (8 weights per row), `s` as `[groups]` e4m3 codes (one group = the 16 weights of one
    /// scale, any `[G, N, K]` flattened), `y` as `[2·groups, 8]` bf16; block `p` writes half groups
    /// `p·H..`. Each byte becomes one 32-bit word of both its bf16 results, the low nibble's in the
    /// low half, read as two bf16 by [`Tile::reinterpret`], instead of the folded kernel's `cat` of
    /// even and odd columns, and the grid is one dimension over any tensor. A nibble is decoded into
    /// the high half of an `f32` (a bf16 is the top 16 bits of the `f32` of the same value) and scaled
    /// in `f32`; the product has at most 6 significant bits (`e2m1 · e4m3 · 2^-7`, normal in bf16), so
    /// dropping the low 16 bits is exact: the folded kernel's values, bit for bit.
    ///
    /// Why half groups, and the scale gathered at the weights' shape: a thread then holds 4 bytes
    /// and writes the 16 bytes they become, the layout tileiras picks for a coalesced 16-byte store,
    /// and its scale comes from a load of that same shape (`half >> 1`, one byte per half group, from
    /// L1). sm_90 (tileiras 13.5.37): no shared memory, one `LDG.E` and one `LDG.E.U8` in and one
    /// `STG.E.128` out per half group. Whole groups (`[groups, 8]` bytes, the scale a `[groups]` tile
    /// broadcast along the row) went through shared memory twice, for the scale's broadcast and for
    /// the 32-byte rows' store (25.6 KB per block of 256 groups).
    #[cutile::entry]
    pub fn nvfp4_dequantize_groups<const H: i32>(
        w: &Tensor<i8, S2<DYN, 4>>,
        s: &Tensor<i8, S1<DYN>>,
        y: &mut Tensor<bf16, S2<H, 8>>,
    ) {
        let p = block_id().0;
        let zero = scalar::<i32>(0i32);
        let b = unsigned(
            w.partition_padded::<S2<H, 4>>(Padding::Zero)
                .load((p, zero)),
        );
        let half = (iota::<H>() + p * H)
            .reshape::<S2<H, 1>>()
            .broadcast::<S2<H, 4>>();
        // Past the last group the gather's bounds mask reads 0 (those rows are not stored).
        let scale = e4m3_decode(unsigned(s.gather(half >> 1i32, None, 0i32))) * 2f32.powi(119);
        // Nibble sign to bit 31, magnitude bits to 22..25 (the bf16 pattern of `e2m1_bits`, 16 up).
        let sign = -2147483648i32;
        let mag = 7i32 << 22;
        let lo = (((b << 28) & sign) | ((b << 22) & mag)).bitcast::<f32>() * scale;
        let hi = (((b << 24) & sign) | ((b << 18) & mag)).bitcast::<f32>() * scale;
        let word = ((lo.bitcast::<i32>() >> 16) & 65535i32) | (hi.bitcast::<i32>() & -65536i32);
        // SAFETY: block `p` writes only row tile `p`.
        unsafe { y.store_at((p, zero), word.reinterpret::<bf16, S2<H, 8>>()) };
    }

    /// Per-tile absolute maxima of `x: [G, R, K]`: block `(p, g)` writes `part[g, p]`, the maximum of
    /// `|x|` over its `BR x BK` tile (row-major over the tiles of one group).
    #[cutile::entry]
    pub fn nvfp4_amax<E: Float, const BR: i32, const BK: i32>(
        x: &Tensor<E, S3<DYN, DYN, DYN>>,
        part: &mut Tensor<f32, S2<1, 1>>,
    ) {
        let (p, g, _) = block_id();
        let col_tiles = (x.dim(2) + (BK - 1)) / BK;
        let r = p / col_tiles;
        let c = p - r * col_tiles;
        let t = x
            .partition_padded::<S3<1, BR, BK>>(Padding::Zero)
            .load((g, r, c))
            .reshape::<S2<BR, BK>>()
            .cast::<f32>()
            .abs();
        let m = t.amax::<1>().amax::<0>();
        // SAFETY: block `(p, g)` writes only element `(g, p)`.
        unsafe { part.store_at((g, p), m) };
    }

    /// NVFP4 quantization of `x: [G, R, K]` given the per-tile maxima `part: [G, tiles]` of
    /// `nvfp4_amax` (same `BR x BK` tiling): block `(p, g)` reduces its group's maxima to the global
    /// scale `amax / 2688` (block 0 of the group stores it), then writes the codes `q: [G, R, K/2]`
    /// and the e4m3 scales `s: [G, R, K/16]` of its tile.
    #[cutile::entry]
    pub fn nvfp4_quantize<
        E: Float,
        const BR: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        x: &Tensor<E, S3<DYN, DYN, DYN>>,
        part: &Tensor<f32, S2<DYN, DYN>>,
        q: &mut Tensor<i8, S3<1, BR, BKH>>,
        s: &mut Tensor<i8, S3<1, BR, BKS>>,
        global: &mut Tensor<f32, S1<1>>,
    ) {
        let (p, g, _) = block_id();
        let pp = part.partition_padded::<S2<1, 1024>>(Padding::Zero);
        let mut amax = zeros::<f32, S2<1, 1>>();
        for c in 0..pp.num_tiles(1) {
            amax = amax.max(pp.load((g, c)).amax::<1>());
        }
        let gs = amax.reshape::<S0>().to_scalar() / 2688.0f32;
        if p == 0i32 {
            // SAFETY: only block `(0, g)` writes element `g`.
            unsafe { global.store_at(g, gs.splat::<S1<1>>()) };
        }
        let col_tiles = (x.dim(2) + (BK - 1)) / BK;
        let r = p / col_tiles;
        let c = p - r * col_tiles;
        let t = x
            .partition_padded::<S3<1, BR, BK>>(Padding::Zero)
            .load((g, r, c))
            .reshape::<S2<BR, BK>>()
            .cast::<f32>();
        let (bytes, code) = quantize_tile::<BR, BK, BKH, BKS>(t, gs.splat::<S2<BR, BKS>>());
        // SAFETY: block `(p, g)` writes only its tile `(g, r, c)` of `q` and of `s`.
        unsafe { q.store_at((g, r, c), bytes.reshape::<S3<1, BR, BKH>>()) };
        unsafe { s.store_at((g, r, c), code.cast::<i8>().reshape::<S3<1, BR, BKS>>()) };
    }

    /// The `BM` pair ids of row block `b` of the aligned order, their tokens and whether each row is
    /// a real pair (padding rows hold `pairs`).
    pub fn block_rows<const BM: i32>(
        sorted_ids: &Tensor<i32, S1<DYN>>,
        b: Scalar<i32>,
        pairs: Scalar<i32>,
        topk: Scalar<i32>,
    ) -> (Tile<i32, S1<BM>>, Tile<i32, S1<BM>>, Tile<bool, S1<BM>>) {
        let ids = sorted_ids.partition_padded::<S1<BM>>(Padding::Zero).load(b);
        let valid = ids.cmp_lt(pairs.splat::<S1<BM>>());
        let tok = ids / topk.splat::<S1<BM>>();
        (ids, tok, valid)
    }

    /// `BM x BK` tile `k` of the rows `tok` of `x` (zero where `valid` is false or past the edge).
    pub fn gather_rows<E: ElementType, const BM: i32, const BK: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        tok: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        k: Scalar<i32>,
    ) -> Tile<E, S2<BM, BK>> {
        let rows = tok.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BK>>();
        let cols = (iota::<BK>() + k * BK)
            .reshape::<S2<1, BK>>()
            .broadcast::<S2<BM, BK>>();
        let mask = valid.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BK>>();
        x.gather((rows, cols), Some(mask), 0i32)
    }

    /// The body of `moe_gemm1_w4a16` (one function for its 4- and 8-warp entries).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16_body<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const DEC: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (b, n, _) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let ge = at(global, e);
            let (_ids, tok, valid) = block_rows::<BM>(sorted_ids, b, x.dim(0) * topk, topk);
            let up_n = n + h.dim(1) / BN;
            let mut acc_g = zeros::<f32, S2<BM, BN>>();
            let mut acc_u = zeros::<f32, S2<BM, BN>>();
            for k in 0..(x.dim(1) + (BK - 1)) / BK {
                let (a0, a1) = gather_rows_split::<E, BM, BKH>(x, tok, valid, k);
                let (g0, g1) = pick::halves::<E, BN, BKH, BKS>(DEC, w, s, ge, e, n, k);
                let (u0, u1) = pick::halves::<E, BN, BKH, BKS>(DEC, w, s, ge, e, up_n, k);
                acc_g = mma(a1, g1.transpose(), mma(a0, g0.transpose(), acc_g));
                acc_u = mma(a1, u1.transpose(), mma(a0, u0.transpose(), acc_u));
            }
            let f = pick::acc_scale(DEC, ge);
            let (acc_g, acc_u) = (acc_g * f, acc_u * f);
            // SAFETY: block `(b, n)` writes only tile `(b, n)`.
            unsafe { h.store_at((b, n), (silu(acc_g) * acc_u).cast::<E>()) };
        }
    }

    /// Grouped GEMM 1 with NVFP4 weights (W4A16): for row block `b` of the aligned order (expert
    /// `expert_ids[b]`) and column tile `n` of the intermediate, `h[rows, n] = silu(x[tok] · W13[e,
    /// gate n]ᵀ) · (x[tok] · W13[e, I + gate n]ᵀ)`; weights dequantized in the kernel to `E`, f32
    /// accumulation. `w: [E, 2I, H/2]`, `s: [E, 2I, H/16]`, `h: [P, I]`; blocks past `total` return.
    /// Grid `(P_max / BM, I / BN, 1)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const DEC: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        moe_gemm1_w4a16_body::<E, BM, BN, BK, BKH, BKS, DEC>(
            x, w, s, global, sorted_ids, expert_ids, total, topk, h,
        );
    }

    /// `moe_gemm1_w4a16` with 8 worker warps per CTA (two warpgroups for the 128-row prefill tile, which spills with 4).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16_w8<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const DEC: i32,
    >(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        moe_gemm1_w4a16_body::<E, BM, BN, BK, BKH, BKS, DEC>(
            x, w, s, global, sorted_ids, expert_ids, total, topk, h,
        );
    }

    /// The body of `moe_gemm1_dense` (one function for its 4- and 8-warp entries).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_dense_body<E: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let (b, n, _) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let (_ids, tok, valid) = block_rows::<BM>(sorted_ids, b, x.dim(0) * topk, topk);
            let up_n = n + h.dim(1) / BN;
            let pw = w.partition_padded::<S3<1, BN, BK>>(Padding::Zero);
            let mut acc_g = zeros::<f32, S2<BM, BN>>();
            let mut acc_u = zeros::<f32, S2<BM, BN>>();
            for k in 0..(x.dim(1) + (BK - 1)) / BK {
                let a = gather_rows::<E, BM, BK>(x, tok, valid, k);
                let wg = pw.load((e, n, k)).reshape::<S2<BN, BK>>();
                let wu = pw.load((e, up_n, k)).reshape::<S2<BN, BK>>();
                acc_g = mma(a, wg.transpose(), acc_g);
                acc_u = mma(a, wu.transpose(), acc_u);
            }
            // SAFETY: block `(b, n)` writes only tile `(b, n)`.
            unsafe { h.store_at((b, n), (silu(acc_g) * acc_u).cast::<E>()) };
        }
    }

    /// Grouped GEMM 1 with dense weights `w: [E, 2I, H]` (the bf16/f16 peer of `moe_gemm1_w4a16`).
    #[cutile::entry]
    pub fn moe_gemm1_dense<E: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        moe_gemm1_dense_body::<E, BM, BN, BK>(x, w, sorted_ids, expert_ids, total, topk, h);
    }

    /// `moe_gemm1_dense` with 8 worker warps per CTA (two warpgroups for the 128-row prefill tile, which spills with 4).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_dense_w8<E: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        moe_gemm1_dense_body::<E, BM, BN, BK>(x, w, sorted_ids, expert_ids, total, topk, h);
    }

    /// Writes `acc · weights[ids]` (f32) to the rows `ids · splits + sp` of `y: [T·k·splits, H]`,
    /// columns `n·BN..` (split `sp` of the K range; `splits` = 1 without split-K).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_weighted<const BM: i32, const BN: i32>(
        y: &mut Tensor<f32, S2<DYN, DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        ids: Tile<i32, S1<BM>>,
        valid: Tile<bool, S1<BM>>,
        splits: Scalar<i32>,
        sp: Scalar<i32>,
        n: Scalar<i32>,
        acc: Tile<f32, S2<BM, BN>>,
    ) {
        let wt = weights.gather(ids, Some(valid), 0i32);
        let out = acc * wt.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BN>>();
        let rows = (ids * splits.splat::<S1<BM>>() + sp.splat::<S1<BM>>())
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, BN>>();
        let cols = (iota::<BN>() + n * BN)
            .reshape::<S2<1, BN>>()
            .broadcast::<S2<BM, BN>>();
        let mask = valid.reshape::<S2<BM, 1>>().broadcast::<S2<BM, BN>>();
        // SAFETY: every real pair id occurs once in the aligned order, so block `(b, n, sp)` is the
        // only writer of rows `ids · splits + sp` in columns `n·BN..(n+1)·BN`.
        unsafe { y.scatter((rows, cols), out, Some(mask)) };
    }

    /// The body of `moe_gemm2_w4a16` (one function for its 4- and 8-warp entries).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16_body<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const DEC: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        let (b, n, sp) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let ge = at(global, e);
            let (ids, _tok, valid) =
                block_rows::<BM>(sorted_ids, b, y.dim(0) / splits, scalar::<i32>(1i32));
            let ph = h.partition_padded::<S2<BM, BK>>(Padding::Zero);
            let per = (ph.num_tiles(1) + splits - 1i32) / splits;
            let lo = sp * per;
            let hi = (lo + per).min(ph.num_tiles(1));
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in lo..hi {
                let (w0, w1) = pick::halves::<E, BN, BKH, BKS>(DEC, w, s, ge, e, n, k);
                let a = ph.load((b, k)).reshape::<S3<BM, BKH, 2>>();
                let a0 = a
                    .extract::<S3<BM, BKH, 1>>(&[0, 0, 0])
                    .reshape::<S2<BM, BKH>>();
                let a1 = a
                    .extract::<S3<BM, BKH, 1>>(&[0, 0, 1])
                    .reshape::<S2<BM, BKH>>();
                acc = mma(a1, w1.transpose(), mma(a0, w0.transpose(), acc));
            }
            let f = pick::acc_scale(DEC, ge);
            scatter_weighted::<BM, BN>(y, weights, ids, valid, splits, sp, n, acc * f);
        }
    }

    /// Grouped GEMM 2 with NVFP4 weights: `y[id·S + s, n] = weights[id] · (h[rows, K_s] · W2[e, n,
    /// K_s]ᵀ)` for the real rows of block `b` and K split `s` of `S = splits` (f32 `y: [T·k·S, H]`;
    /// the sum over slots and splits, in that fixed order, is `moe_combine`). `w: [E, H, I/2]`,
    /// `s: [E, H, I/16]`, `h: [P, I]`. Grid `(P_max / BM, H / BN, S)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const DEC: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        moe_gemm2_w4a16_body::<E, BM, BN, BK, BKH, BKS, DEC>(
            h, w, s, global, sorted_ids, expert_ids, total, weights, splits, y,
        );
    }

    /// `moe_gemm2_w4a16` with 8 worker warps per CTA (two warpgroups for the 128-row prefill tile, which spills with 4).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16_w8<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const DEC: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        moe_gemm2_w4a16_body::<E, BM, BN, BK, BKH, BKS, DEC>(
            h, w, s, global, sorted_ids, expert_ids, total, weights, splits, y,
        );
    }

    /// The body of `moe_gemm2_dense` (one function for its 4- and 8-warp entries).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_dense_body<E: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        let (b, n, sp) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let (ids, _tok, valid) =
                block_rows::<BM>(sorted_ids, b, y.dim(0) / splits, scalar::<i32>(1i32));
            let ph = h.partition_padded::<S2<BM, BK>>(Padding::Zero);
            let pw = w.partition_padded::<S3<1, BN, BK>>(Padding::Zero);
            let per = (ph.num_tiles(1) + splits - 1i32) / splits;
            let lo = sp * per;
            let hi = (lo + per).min(ph.num_tiles(1));
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in lo..hi {
                let wt = pw.load((e, n, k)).reshape::<S2<BN, BK>>();
                acc = mma(ph.load((b, k)), wt.transpose(), acc);
            }
            scatter_weighted::<BM, BN>(y, weights, ids, valid, splits, sp, n, acc);
        }
    }

    /// Grouped GEMM 2 with dense weights `w: [E, H, I]` (the peer of `moe_gemm2_w4a16`).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_dense<E: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        moe_gemm2_dense_body::<E, BM, BN, BK>(
            h, w, sorted_ids, expert_ids, total, weights, splits, y,
        );
    }

    /// `moe_gemm2_dense` with 8 worker warps per CTA (two warpgroups for the 128-row prefill tile, which spills with 4).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_dense_w8<E: MmaOperand<f32>, const BM: i32, const BN: i32, const BK: i32>(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        moe_gemm2_dense_body::<E, BM, BN, BK>(
            h, w, sorted_ids, expert_ids, total, weights, splits, y,
        );
    }

    /// The sorted form's gather: `xs[r] = x[sorted_ids[r] / topk]` for the used rows of the aligned
    /// order (zero for padding rows), so both GEMMs read their activations through views (TMA)
    /// instead of a gather per K step. Block `(b, c)` copies the `BM x BK` tile `(b, c)`; row blocks
    /// past `total` are left as they are (no GEMM reads them). Grid `(P / BM, H / BK)`.
    #[cutile::entry]
    pub fn moe_permute<E: ElementType, const BM: i32, const BK: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        topk: Scalar<i32>,
        xs: &mut Tensor<E, S2<BM, BK>>,
    ) {
        let (b, c, _) = block_id();
        if b * BM < at(total, scalar::<i32>(0i32)) {
            let (_ids, tok, valid) = block_rows::<BM>(sorted_ids, b, x.dim(0) * topk, topk);
            let t = gather_rows::<E, BM, BK>(x, tok, valid, c);
            // SAFETY: block `(b, c)` writes only tile `(b, c)`.
            unsafe { xs.store_at((b, c), t) };
        }
    }

    /// Grouped GEMM 1 of the sorted form (dense weights, or NVFP4 weights dequantized into a dense
    /// buffer first; launch with a fixed grid, at most one block per SM): persistent over the used
    /// output tiles `(row block, column tile)` of `h: [P, I]` in grouped order (`group` row blocks per band, so the blocks in flight
    /// share a few weight column panels and a few activation row panels in L2); the row block's
    /// expert `expert_ids[tm]` picks the weights; `xs: [P, H]` rows in the aligned order
    /// (`moe_permute`), `w: [E, 2, I, H]` (W13 `[E, 2I, H]` viewed as gate rows and up rows).
    /// One `[2, BN, BK]` weight tile per K step holds the gate and up rows of the column tile, so a
    /// single `BM x 2BN` accumulator (`BN2 = 2·BN`) takes one MMA per step; the epilogue splits it
    /// into gate and up and stores `silu(gate)·up`. (Two accumulators, one MMA each per step, made
    /// ptxas serialize the wgmmas: C7514 on sm_90.) `FOLD = 1`: `w` holds folded NVFP4 weights
    /// (`nvfp4_dequantize_folded`) and the accumulator is multiplied by `global[e] · FOLD_UNDO`;
    /// `FOLD = 0`: dense weights, `global` never read.
    #[cutile::entry]
    pub fn moe_gemm1_sorted<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BN2: i32,
        const BK: i32,
        const FOLD: i32,
    >(
        xs: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S4<DYN, DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        group: Scalar<i32>,
        h: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let pa = xs.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S4<1, 2, BN, BK>>(Padding::Zero);
        let tiles_m = at(total, scalar::<i32>(0i32)) / BM;
        let tiles_n = h.dim(1) / BN;
        let k_tiles = pa.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        let zero = scalar::<i32>(0i32);
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = crate::gemm::grouped_tile(tile, tiles_m, tiles_n, group);
            let e = at(expert_ids, tm);
            let mut acc = zeros::<f32, S2<BM, BN2>>();
            for k in 0..k_tiles {
                let wt = pw.load((e, zero, tn, k)).reshape::<S2<BN2, BK>>();
                acc = mma(pa.load((tm, k)), wt.transpose(), acc);
            }
            let acc = if FOLD == 1 {
                acc * (at(global, e) * FOLD_UNDO)
            } else {
                acc
            };
            let halves = acc.reshape::<S3<BM, 2, BN>>();
            let gate = halves
                .extract::<S3<BM, 1, BN>>(&[0, 0, 0])
                .reshape::<S2<BM, BN>>();
            let up = halves
                .extract::<S3<BM, 1, BN>>(&[0, 1, 0])
                .reshape::<S2<BM, BN>>();
            // SAFETY: `grouped_tile` maps the tile indices `p + i·grid` one to one onto distinct
            // tiles, so no two blocks (or iterations) write the same tile.
            unsafe { h.store_at((tm, tn), (silu(gate) * up).cast::<E>()) };
        }
    }

    /// Grouped GEMM 2 of the sorted form (launch with a fixed grid, at most one block per SM):
    /// persistent over the used `(row block, column tile)` pairs of the product `h · W2[e]ᵀ` in
    /// grouped order, as `moe_gemm1_sorted`; `w: [E, H, I]`; the
    /// whole K range per tile (the prefill grid is wide), the routed weight in the epilogue and each
    /// real row scattered to `y[pair]` (`y: [T·k, H]` f32); `FOLD` and `global` as in
    /// `moe_gemm1_sorted`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_sorted<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const FOLD: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        group: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        let ph = h.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S3<1, BN, BK>>(Padding::Zero);
        let tiles_m = at(total, scalar::<i32>(0i32)) / BM;
        let tiles_n = y.dim(1) / BN;
        let k_tiles = ph.num_tiles(1);
        let (nblocks, _, _) = num_blocks();
        let one = scalar::<i32>(1i32);
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = crate::gemm::grouped_tile(tile, tiles_m, tiles_n, group);
            let e = at(expert_ids, tm);
            let (ids, _tok, valid) = block_rows::<BM>(sorted_ids, tm, y.dim(0), one);
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in 0..k_tiles {
                let wt = pw.load((e, tn, k)).reshape::<S2<BN, BK>>();
                acc = mma(ph.load((tm, k)), wt.transpose(), acc);
            }
            let acc = if FOLD == 1 {
                acc * (at(global, e) * FOLD_UNDO)
            } else {
                acc
            };
            scatter_weighted::<BM, BN>(y, weights, ids, valid, one, scalar::<i32>(0i32), tn, acc);
        }
    }

    /// Grouped GEMM 2 of the staged sorted form: `moe_gemm2_sorted`'s persistent product in grouped
    /// order, but tile `(tm, tn)` is stored as it is into `ys: [P, H]` f32, in the aligned order and
    /// without the routed weight; `moe_combine_staged` applies the weights and returns the rows to
    /// token order. A scattered epilogue (rows to `y[sorted_ids[r]]`, the weights gathered by pair)
    /// makes tileiras 13.5.37 wait for every K step's `wgmma`s (sm_90 SASS, persistent or one tile
    /// per block alike); with the tile store the K loop keeps one step in flight.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_staged<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const FOLD: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        group: Scalar<i32>,
        ys: &mut Tensor<f32, S2<BM, BN>>,
    ) {
        let ph = h.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pw = w.partition_padded::<S3<1, BN, BK>>(Padding::Zero);
        let tiles_m = at(total, scalar::<i32>(0i32)) / BM;
        let tiles_n = ys.dim(1) / BN;
        let k_tiles = crate::gemm::k_tiles::<BK>(h.dim(1));
        let (nblocks, _, _) = num_blocks();
        for tile in (block_id_x()..tiles_m * tiles_n).step_by(nblocks) {
            let (tm, tn) = crate::gemm::grouped_tile(tile, tiles_m, tiles_n, group);
            let e = at(expert_ids, tm);
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in 0..k_tiles {
                let wt = pw.load((e, tn, k)).reshape::<S2<BN, BK>>();
                acc = mma(ph.load((tm, k)), wt.transpose(), acc);
            }
            let acc = if FOLD == 1 {
                acc * (at(global, e) * FOLD_UNDO)
            } else {
                acc
            };
            // SAFETY: `grouped_tile` maps the tile indices `p + i·grid` one to one onto distinct
            // tiles, so no two blocks (or iterations) write the same tile.
            unsafe { ys.store_at((tm, tn), acc) };
        }
    }

    /// The aligned position of every pair: `pos[sorted_ids[r]] = r` for the rows `r < total` that
    /// hold a real pair (`sorted_ids[r] < pairs`, `pairs` = `pos`'s length); padding rows and rows past
    /// `total` write nothing. Grid `(P / BM)`.
    #[cutile::entry]
    pub fn moe_positions<const BM: i32>(
        sorted_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        pos: &mut Tensor<i32, S1<DYN>>,
    ) {
        let (b, _, _) = block_id();
        let rows = iota::<BM>() + b * BM;
        let ids = sorted_ids.partition_padded::<S1<BM>>(Padding::Zero).load(b);
        let used = rows < at(total, scalar::<i32>(0i32));
        let valid = used & ids.cmp_lt(pos.dim(0).splat::<S1<BM>>());
        // SAFETY: every real pair id occurs once among the first `total` rows of the aligned order.
        unsafe { pos.scatter(ids, rows, Some(valid)) };
    }

    /// The decode form's weight tile: like [`dequant_halves`] (even and odd K elements, `BN x BKH`
    /// each) but decoded by [`e2m1_bits`] and [`e4m3_folded`]: per element four `i16` ops and one
    /// multiplication in `E`, no conversion. The tiles hold `e2m1 · e4m3 · 2^-7` exactly; the caller
    /// multiplies its accumulator by `global · FOLD_UNDO`.
    pub fn dequant_halves_fast<
        E: Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BN: i32,
        const BKH: i32,
        const BKS: i32,
    >(
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        g: Scalar<i32>,
        n: Scalar<i32>,
        k: Scalar<i32>,
    ) -> (Tile<E, S2<BN, BKH>>, Tile<E, S2<BN, BKH>>) {
        let bytes = group_tile::<BN, BKH>(w, g, n, k).cast::<i16>();
        let sc = scale_codes::<BN, BKS>(s, g, n, k);
        let scale = e4m3_folded::<E, S2<BN, BKS>>(sc)
            .reshape::<S3<BN, BKS, 1>>()
            .broadcast::<S3<BN, BKS, 8>>()
            .reshape::<S2<BN, BKH>>();
        (
            e2m1_bits::<E, S2<BN, BKH>>(bytes, false) * scale,
            e2m1_bits::<E, S2<BN, BKH>>(bytes, true) * scale,
        )
    }

    /// The K steps `lo..hi` of split `sp` of `splits` over `steps` K steps.
    pub fn split_range(
        steps: Scalar<i32>,
        splits: Scalar<i32>,
        sp: Scalar<i32>,
    ) -> (Scalar<i32>, Scalar<i32>) {
        let per = (steps + splits - 1i32) / splits;
        let lo = sp * per;
        (lo, (lo + per).min(steps))
    }

    /// GEMM 1's epilogue in the decode form: `gate`, `up` (`BT x BN`, f32, final scale applied) of row
    /// block `b`, column tile `n`. One split: `h[b, n] = silu(gate) · up`. Several: the split's
    /// partial sums go to `part: [S·P, 2I]` f32, rows `sp·P + b·BT..`, gate at column tile `n`, up at
    /// `n + I/BN` ([`moe_silu_reduce`] sums them).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm1_epilogue<E: Float, const BT: i32, const BN: i32>(
        h: &mut Tensor<E, S2<BT, BN>>,
        part: &mut Tensor<f32, S2<BT, BN>>,
        splits: Scalar<i32>,
        sp: Scalar<i32>,
        b: Scalar<i32>,
        n: Scalar<i32>,
        gate: Tile<f32, S2<BT, BN>>,
        up: Tile<f32, S2<BT, BN>>,
    ) {
        if splits == 1i32 {
            // SAFETY: block `(b, n, 0)` writes only tile `(b, n)`.
            unsafe { h.store_at((b, n), (silu(gate) * up).cast::<E>()) };
        } else {
            let row = sp * (h.dim(0) / BT) + b;
            // SAFETY: block `(b, n, sp)` writes only tiles `(row, n)` and `(row, n + I/BN)`.
            unsafe { part.store_at((row, n), gate) };
            unsafe { part.store_at((row, n + h.dim(1) / BN), up) };
        }
    }

    /// The body of `moe_gemm1_w4a16_t` (one function for its 4- and 8-warp entries).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16_t_body<
        E: MmaOperand<f32> + Float + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        xs: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        splits: Scalar<i32>,
        h: &mut Tensor<E, S2<BT, BN>>,
        part: &mut Tensor<f32, S2<BT, BN>>,
    ) {
        let (b, n, sp) = block_id();
        if b * BT < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let ge = at(global, e) * FOLD_UNDO;
            let px = xs.partition_padded::<S2<BT, BK>>(Padding::Zero);
            let up_n = n + h.dim(1) / BN;
            let (lo, hi) = split_range(px.num_tiles(1), splits, sp);
            let mut acc_g = zeros::<f32, S2<BN, BT>>();
            let mut acc_u = zeros::<f32, S2<BN, BT>>();
            for k in lo..hi {
                let [a0, a1, a2, a3] = words::quarters::<E, BT, BK, KW, KQ>(px.load((b, k)));
                let [g0, g1, g2, g3] = words::dequant_quarters::<E, BN, BKH, BKS, KW, KQ>(
                    w,
                    s,
                    e,
                    n,
                    k,
                    words::ScaleSpread::PerWeight,
                );
                let [u0, u1, u2, u3] = words::dequant_quarters::<E, BN, BKH, BKS, KW, KQ>(
                    w,
                    s,
                    e,
                    up_n,
                    k,
                    words::ScaleSpread::PerWeight,
                );
                acc_g = mma(g3, a3, mma(g2, a2, mma(g1, a1, mma(g0, a0, acc_g))));
                acc_u = mma(u3, a3, mma(u2, a2, mma(u1, a1, mma(u0, a0, acc_u))));
            }
            let gate = (acc_g * ge).transpose();
            let up = (acc_u * ge).transpose();
            gemm1_epilogue::<E, BT, BN>(h, part, splits, sp, b, n, gate, up);
        }
    }

    /// Grouped GEMM 1 with NVFP4 weights in the decode form (a handful of rows per expert): the
    /// weights are the M side of the MMA, `acc[BN, BT] += W13[e, n·BN.., K] · x[tok, K]ᵀ` with `BT`
    /// (16) rows of the aligned order on the N side, so the decoded weight tile is the MMA's register
    /// operand and is never staged for the other side; the weights are decoded by
    /// [`dequant_halves_fast`] (global scale applied to the accumulators). K split `sp` of `splits`
    /// (grid `(P_max / BT, I / BN, splits)`); see [`gemm1_epilogue`].
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16_t<
        E: MmaOperand<f32> + Float + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        xs: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        splits: Scalar<i32>,
        h: &mut Tensor<E, S2<BT, BN>>,
        part: &mut Tensor<f32, S2<BT, BN>>,
    ) {
        moe_gemm1_w4a16_t_body::<E, BT, BN, BK, BKH, BKS, KW, KQ>(
            xs, w, s, global, expert_ids, total, splits, h, part,
        );
    }

    /// `moe_gemm1_w4a16_t` with 8 worker warps per CTA (two warpgroups: for `BN = 128` weight rows, 64 per warpgroup).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16_t8<
        E: MmaOperand<f32> + Float + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        xs: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        splits: Scalar<i32>,
        h: &mut Tensor<E, S2<BT, BN>>,
        part: &mut Tensor<f32, S2<BT, BN>>,
    ) {
        moe_gemm1_w4a16_t_body::<E, BT, BN, BK, BKH, BKS, KW, KQ>(
            xs, w, s, global, expert_ids, total, splits, h, part,
        );
    }

    /// Grouped GEMM 1 with dense weights in the decode form (the peer of `moe_gemm1_w4a16_t`).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_dense_t<
        E: MmaOperand<f32> + Float,
        const BT: i32,
        const BN: i32,
        const BK: i32,
    >(
        xs: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        splits: Scalar<i32>,
        h: &mut Tensor<E, S2<BT, BN>>,
        part: &mut Tensor<f32, S2<BT, BN>>,
    ) {
        let (b, n, sp) = block_id();
        if b * BT < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let px = xs.partition_padded::<S2<BT, BK>>(Padding::Zero);
            let up_n = n + h.dim(1) / BN;
            let pw = w.partition_padded::<S3<1, BN, BK>>(Padding::Zero);
            let (lo, hi) = split_range(px.num_tiles(1), splits, sp);
            let mut acc_g = zeros::<f32, S2<BN, BT>>();
            let mut acc_u = zeros::<f32, S2<BN, BT>>();
            for k in lo..hi {
                let a = px.load((b, k)).transpose();
                let wg = pw.load((e, n, k)).reshape::<S2<BN, BK>>();
                let wu = pw.load((e, up_n, k)).reshape::<S2<BN, BK>>();
                acc_g = mma(wg, a, acc_g);
                acc_u = mma(wu, a, acc_u);
            }
            gemm1_epilogue::<E, BT, BN>(
                h,
                part,
                splits,
                sp,
                b,
                n,
                acc_g.transpose(),
                acc_u.transpose(),
            );
        }
    }

    /// GEMM 1's split-K reduce (decode form with several splits): `h[r, c] = silu(Σ_s part[s·P + r,
    /// c]) · Σ_s part[s·P + r, I + c]`, splits summed in order (deterministic). Row blocks at or past
    /// `total` are skipped (GEMM 1 wrote nothing there and GEMM 2 reads nothing there). Grid = tiles
    /// of `h` (`BR` rows, `BC` columns).
    #[cutile::entry]
    pub fn moe_silu_reduce<E: Float, const BR: i32, const BC: i32>(
        part: &Tensor<f32, S2<DYN, DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        splits: Scalar<i32>,
        h: &mut Tensor<E, S2<BR, BC>>,
    ) {
        let (r, c, _) = block_id();
        if r * BR < at(total, scalar::<i32>(0i32)) {
            let pp = part.partition_padded::<S2<BR, BC>>(Padding::Zero);
            let rows = h.dim(0) / BR;
            let up_c = c + h.dim(1) / BC;
            let mut g = zeros::<f32, S2<BR, BC>>();
            let mut u = zeros::<f32, S2<BR, BC>>();
            for sp in 0..splits {
                g += pp.load((sp * rows + r, c));
                u += pp.load((sp * rows + r, up_c));
            }
            h.store((silu(g) * u).cast::<E>());
        }
    }

    /// The body of `moe_gemm2_w4a16_t` (one function for its 4- and 8-warp entries).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16_t_body<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        (b, n, sp): (Scalar<i32>, Scalar<i32>, Scalar<i32>),
        y: &mut Tensor<f32, S2<DYN, DYN>>,
        spread: words::ScaleSpread,
    ) {
        if b * BT < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let ge = at(global, e) * FOLD_UNDO;
            let (ids, _tok, valid) =
                block_rows::<BT>(sorted_ids, b, y.dim(0) / splits, scalar::<i32>(1i32));
            let ph = h.partition_padded::<S2<BT, BK>>(Padding::Zero);
            let (lo, hi) = split_range(ph.num_tiles(1), splits, sp);
            let mut acc = zeros::<f32, S2<BN, BT>>();
            for k in lo..hi {
                let [w0, w1, w2, w3] =
                    words::dequant_quarters::<E, BN, BKH, BKS, KW, KQ>(w, s, e, n, k, spread);
                let [a0, a1, a2, a3] = words::quarters::<E, BT, BK, KW, KQ>(ph.load((b, k)));
                acc = mma(w3, a3, mma(w2, a2, mma(w1, a1, mma(w0, a0, acc))));
            }
            scatter_weighted::<BT, BN>(
                y,
                weights,
                ids,
                valid,
                splits,
                sp,
                n,
                (acc * ge).transpose(),
            );
        }
    }

    /// Grouped GEMM 2 with NVFP4 weights in the decode form: `acc[BN, BT] += W2[e, n·BN.., K_s] ·
    /// h[b·BT.., K_s]ᵀ` (weights on the MMA's M side, decoded by [`dequant_halves_fast`]), then as
    /// `moe_gemm2_w4a16` (routed weight, rows `id·S + s` of `y`). Grid `(P_max / BT, H / BN, S)`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16_t<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        moe_gemm2_w4a16_t_body::<E, BT, BN, BK, BKH, BKS, KW, KQ>(
            h,
            w,
            s,
            global,
            sorted_ids,
            expert_ids,
            total,
            weights,
            splits,
            block_id(),
            y,
            words::ScaleSpread::PerWeight,
        );
    }

    /// `moe_gemm2_w4a16_t` with 8 worker warps per CTA (two warpgroups: for `BN = 128` weight rows, 64 per warpgroup).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16_t8<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        moe_gemm2_w4a16_t_body::<E, BT, BN, BK, BKH, BKS, KW, KQ>(
            h,
            w,
            s,
            global,
            sorted_ids,
            expert_ids,
            total,
            weights,
            splits,
            block_id(),
            y,
            words::ScaleSpread::PerWord,
        );
    }

    /// Grouped GEMM 1 of the in-kernel prefill form ([`crate::moe::host::Form::InKernel`], row
    /// block `BT` = 128): the decode form's product with the gate and up rows of column tile `n`
    /// stacked into one `BN2 = 2·BN` row weight operand (`w: [E, 2, I, H/2]`, `s: [E, 2, I, H/16]`,
    /// [`words::dequant_quarters_stacked`]), so one `BN2 x BT` accumulator holds both (two
    /// accumulators of `BN x BT` at `BT` = 128 spilled 944 bytes per thread on sm_90). Grid `(I / BN,
    /// P / BT)`, column tiles fastest: the blocks in flight share a few row blocks of `xs` and their
    /// experts' weights in L2. No split-K (the prefill grid is wide).
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm1_w4a16_p8<
        E: MmaOperand<f32> + Float + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BN2: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        xs: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S4<DYN, DYN, DYN, DYN>>,
        s: &Tensor<i8, S4<DYN, DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        h: &mut Tensor<E, S2<BT, BN>>,
    ) {
        let (n, b, _) = block_id();
        if b * BT < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let ge = at(global, e) * FOLD_UNDO;
            let px = xs.partition_padded::<S2<BT, BK>>(Padding::Zero);
            let mut acc = zeros::<f32, S2<BN2, BT>>();
            for k in 0..px.num_tiles(1) {
                let [a0, a1, a2, a3] = words::quarters::<E, BT, BK, KW, KQ>(px.load((b, k)));
                let [w0, w1, w2, w3] =
                    words::dequant_quarters_stacked::<E, BN, BN2, BKH, BKS, KW, KQ>(w, s, e, n, k);
                acc = mma(w3, a3, mma(w2, a2, mma(w1, a1, mma(w0, a0, acc))));
            }
            let halves = (acc * ge).transpose().reshape::<S3<BT, 2, BN>>();
            let gate = halves
                .extract::<S3<BT, 1, BN>>(&[0, 0, 0])
                .reshape::<S2<BT, BN>>();
            let up = halves
                .extract::<S3<BT, 1, BN>>(&[0, 1, 0])
                .reshape::<S2<BT, BN>>();
            // SAFETY: block `(n, b)` writes only tile `(b, n)`.
            unsafe { h.store_at((b, n), (silu(gate) * up).cast::<E>()) };
        }
    }

    /// Grouped GEMM 2 of the in-kernel prefill form: `moe_gemm2_w4a16_t8`'s product and epilogue
    /// (one split) on grid `(H / BN, P / BT)`, column tiles fastest as in `moe_gemm1_w4a16_p8`.
    #[cutile::entry(num_worker_warps = 8)]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_w4a16_p8<
        E: MmaOperand<f32> + Numeric + BitWidth<Bits = bitcast::width::W16>,
        const BT: i32,
        const BN: i32,
        const BK: i32,
        const BKH: i32,
        const BKS: i32,
        const KW: i32,
        const KQ: i32,
    >(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<i8, S3<DYN, DYN, DYN>>,
        s: &Tensor<i8, S3<DYN, DYN, DYN>>,
        global: &Tensor<f32, S1<DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        let (n, b, _) = block_id();
        moe_gemm2_w4a16_t_body::<E, BT, BN, BK, BKH, BKS, KW, KQ>(
            h,
            w,
            s,
            global,
            sorted_ids,
            expert_ids,
            total,
            weights,
            scalar::<i32>(1i32),
            (b, n, scalar::<i32>(0i32)),
            y,
            words::ScaleSpread::PerWeight,
        );
    }

    /// Grouped GEMM 2 with dense weights in the decode form (the peer of `moe_gemm2_w4a16_t`).
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm2_dense_t<E: MmaOperand<f32>, const BT: i32, const BN: i32, const BK: i32>(
        h: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S3<DYN, DYN, DYN>>,
        sorted_ids: &Tensor<i32, S1<DYN>>,
        expert_ids: &Tensor<i32, S1<DYN>>,
        total: &Tensor<i32, S1<DYN>>,
        weights: &Tensor<f32, S1<DYN>>,
        splits: Scalar<i32>,
        y: &mut Tensor<f32, S2<DYN, DYN>>,
    ) {
        let (b, n, sp) = block_id();
        if b * BT < at(total, scalar::<i32>(0i32)) {
            let e = at(expert_ids, b);
            let (ids, _tok, valid) =
                block_rows::<BT>(sorted_ids, b, y.dim(0) / splits, scalar::<i32>(1i32));
            let ph = h.partition_padded::<S2<BT, BK>>(Padding::Zero);
            let pw = w.partition_padded::<S3<1, BN, BK>>(Padding::Zero);
            let (lo, hi) = split_range(ph.num_tiles(1), splits, sp);
            let mut acc = zeros::<f32, S2<BN, BT>>();
            for k in lo..hi {
                let wt = pw.load((e, n, k)).reshape::<S2<BN, BK>>();
                acc = mma(wt, ph.load((b, k)).transpose(), acc);
            }
            scatter_weighted::<BT, BN>(y, weights, ids, valid, splits, sp, n, acc.transpose());
        }
    }

    /// `moe_align_block_size`, pass 1 of 3: the expert histogram of pairs `c·BT..` of `ids: [N]`
    /// (the flattened `[T, k]` top-k ids): `counts[c, e]` for `e < EP` (ids outside `0..EP` are not
    /// counted). Grid = tiles of `counts` (`ceil(N / BT)` blocks).
    #[cutile::entry]
    pub fn moe_align_hist<const BT: i32, const EP: i32>(
        ids: &Tensor<i32, S1<DYN>>,
        counts: &mut Tensor<i32, S2<1, EP>>,
    ) {
        let c = block_id_x();
        let v = ids.partition_padded::<S1<BT>>(Padding::Zero).load(c);
        let valid = (iota::<BT>() + c * BT).cmp_lt(ids.dim(0).splat::<S1<BT>>());
        let hot = v.reshape::<S2<BT, 1>>().broadcast::<S2<BT, EP>>().cmp_eq(
            iota::<EP>()
                .reshape::<S2<1, EP>>()
                .broadcast::<S2<BT, EP>>(),
        ) & valid.reshape::<S2<BT, 1>>().broadcast::<S2<BT, EP>>();
        counts.store(hot.cast::<i32>().sum::<0>());
    }

    /// Exclusive prefix sum of `x: [EP]` (`EP = 16·ER`): a 16-wide scan inside each row of the
    /// `ER x 16` view plus the exclusive scan of the row sums.
    pub fn exclusive_scan<const EP: i32, const ER: i32>(x: Tile<i32, S1<EP>>) -> Tile<i32, S1<EP>> {
        let x2 = x.reshape::<S2<ER, 16>>();
        let lanes_j = iota::<16>()
            .reshape::<S3<1, 1, 16>>()
            .broadcast::<S3<ER, 16, 16>>();
        let lanes_i = iota::<16>()
            .reshape::<S3<1, 16, 1>>()
            .broadcast::<S3<ER, 16, 16>>();
        let within = select(
            lanes_j.cmp_lt(lanes_i),
            x2.reshape::<S3<ER, 1, 16>>().broadcast::<S3<ER, 16, 16>>(),
            0i32,
        )
        .sum::<2>()
        .reshape::<S2<ER, 16>>();
        let rows = x2
            .sum::<1>()
            .reshape::<S2<1, ER>>()
            .broadcast::<S2<ER, ER>>();
        let cols = iota::<ER>()
            .reshape::<S2<1, ER>>()
            .broadcast::<S2<ER, ER>>();
        let rws = iota::<ER>()
            .reshape::<S2<ER, 1>>()
            .broadcast::<S2<ER, ER>>();
        let before = select(cols.cmp_lt(rws), rows, 0i32)
            .sum::<1>()
            .broadcast::<S2<ER, 16>>();
        (within + before).reshape::<S1<EP>>()
    }

    /// The padded layout of an alignment from the pairs per expert `cnt: [EP]`: every expert padded to
    /// `BM` rows, and each expert's first and end row (the exclusive and inclusive scans of the padded
    /// counts). `EP = 16·ER`.
    #[allow(clippy::type_complexity)]
    fn align_layout<const BM: i32, const EP: i32, const ER: i32>(
        cnt: Tile<i32, S1<EP>>,
    ) -> (Tile<i32, S1<EP>>, Tile<i32, S1<EP>>, Tile<i32, S1<EP>>) {
        let padded = ((cnt + (BM - 1)) / BM) * BM;
        let first = exclusive_scan::<EP, ER>(padded);
        let end = first + padded;
        (padded, first, end)
    }

    /// The plan of an alignment (one block) from [`align_layout`]'s `padded`, `first`, `end` of the
    /// pairs per expert `cnt`: writes `total: [1]`, the expert of every row block `expert_ids` (blocks
    /// at or past `total` get `num_experts - 1`) and the padding rows of `sorted_ids` (value `pairs`).
    #[allow(clippy::too_many_arguments)]
    fn align_plan<const BM: i32, const EP: i32, const BB: i32>(
        cnt: Tile<i32, S1<EP>>,
        (padded, first, end): (Tile<i32, S1<EP>>, Tile<i32, S1<EP>>, Tile<i32, S1<EP>>),
        num_experts: Scalar<i32>,
        pairs: Scalar<i32>,
        total: &mut Tensor<i32, S1<1>>,
        expert_ids: &mut Tensor<i32, S1<BB>>,
        sorted_ids: &mut Tensor<i32, S1<DYN>>,
    ) {
        total.store(padded.sum::<0>());
        let ends = end.reshape::<S2<1, EP>>().broadcast::<S2<BB, EP>>();
        let last = num_experts - 1i32;
        for j in 0..(expert_ids.dim(0) + (BB - 1)) / BB {
            let rows = ((iota::<BB>() + j * BB) * BM)
                .reshape::<S2<BB, 1>>()
                .broadcast::<S2<BB, EP>>();
            let e = ends
                .cmp_le(rows)
                .cast::<i32>()
                .sum::<1>()
                .reshape::<S1<BB>>()
                .min(last.splat::<S1<BB>>());
            // SAFETY: the single block writes every tile of `expert_ids` once.
            unsafe { expert_ids.store_at(j, e) };
        }
        let slot = iota::<BM>()
            .reshape::<S2<1, BM>>()
            .broadcast::<S2<EP, BM>>();
        let filled = (first + cnt)
            .reshape::<S2<EP, 1>>()
            .broadcast::<S2<EP, BM>>();
        let pad = (padded - cnt)
            .reshape::<S2<EP, 1>>()
            .broadcast::<S2<EP, BM>>();
        // SAFETY: the padding rows of different experts are disjoint and no real pair lands there
        // (the placement writes rows `first[e]..first[e] + cnt[e]`).
        unsafe {
            sorted_ids.scatter(
                filled + slot,
                pairs.splat::<S2<EP, BM>>(),
                Some(slot.cmp_lt(pad)),
            )
        };
    }

    /// Places the `BT` pairs `pair` of one chunk (expert ids `v`, one-hot `hot: [BT, EP]`, `valid`
    /// inside the call) at `base[e] + (pairs of e before it in the chunk)` of `sorted_ids`, `base: [1,
    /// EP]` the first free row of every expert: stable by pair id.
    fn place_chunk<const BT: i32, const EP: i32>(
        v: Tile<i32, S1<BT>>,
        hot: Tile<bool, S2<BT, EP>>,
        pair: Tile<i32, S1<BT>>,
        valid: Tile<bool, S1<BT>>,
        base: Tile<i32, S2<1, EP>>,
        sorted_ids: &mut Tensor<i32, S1<DYN>>,
    ) {
        let at_base = select(hot, base.broadcast::<S2<BT, EP>>(), 0i32).sum::<1>();
        let same = v
            .reshape::<S2<BT, 1>>()
            .broadcast::<S2<BT, BT>>()
            .cmp_eq(v.reshape::<S2<1, BT>>().broadcast::<S2<BT, BT>>());
        let earlier = iota::<BT>()
            .reshape::<S2<1, BT>>()
            .broadcast::<S2<BT, BT>>()
            .cmp_lt(
                iota::<BT>()
                    .reshape::<S2<BT, 1>>()
                    .broadcast::<S2<BT, BT>>(),
            );
        let rank = (same & earlier).cast::<i32>().sum::<1>();
        let pos = (at_base + rank).reshape::<S1<BT>>();
        // SAFETY: every valid pair gets a distinct row (its expert's rows are disjoint from the others'
        // and ranks inside an expert are distinct).
        unsafe { sorted_ids.scatter(pos, pair, Some(valid)) };
    }

    /// `moe_align_block_size`, pass 2 of 3 (one block): sums the histogram `counts: [C, EP]`, pads
    /// every expert to `BM` rows, writes the experts' first rows `start: [EP]` (exclusive scan of the
    /// padded counts), `total: [1]`, the expert of every row block `expert_ids: [P_max / BM]` (blocks
    /// at or past `total` get `num_experts - 1`; the GEMMs skip them) and the padding rows of
    /// `sorted_ids` (value `pairs`). `EP = 16·ER`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn moe_align_plan<
        const BM: i32,
        const EP: i32,
        const ER: i32,
        const CB: i32,
        const BB: i32,
    >(
        counts: &Tensor<i32, S2<DYN, DYN>>,
        num_experts: Scalar<i32>,
        pairs: Scalar<i32>,
        start: &mut Tensor<i32, S1<EP>>,
        total: &mut Tensor<i32, S1<1>>,
        expert_ids: &mut Tensor<i32, S1<BB>>,
        sorted_ids: &mut Tensor<i32, S1<DYN>>,
    ) {
        let pc = counts.partition_padded::<S2<CB, EP>>(Padding::Zero);
        let mut acc = zeros::<i32, S2<1, EP>>();
        for r in 0..pc.num_tiles(0) {
            acc += pc.load((r, 0i32)).sum::<0>();
        }
        let cnt = acc.reshape::<S1<EP>>();
        let layout = align_layout::<BM, EP, ER>(cnt);
        start.store(layout.1);
        align_plan::<BM, EP, BB>(
            cnt,
            layout,
            num_experts,
            pairs,
            total,
            expert_ids,
            sorted_ids,
        );
    }

    /// `moe_align_block_size`, pass 3 of 3: block `c` places pairs `c·BT..` of `ids: [N]` at
    /// `start[e] + (pairs of expert e in earlier blocks) + (pairs of e earlier in this block)`, so the
    /// order inside an expert is the pair order (stable by token). Grid `ceil(N / BT)`.
    #[cutile::entry]
    pub fn moe_align_scatter<const BT: i32, const EP: i32, const CB: i32>(
        ids: &Tensor<i32, S1<DYN>>,
        counts: &Tensor<i32, S2<DYN, DYN>>,
        start: &Tensor<i32, S1<DYN>>,
        sorted_ids: &mut Tensor<i32, S1<DYN>>,
    ) {
        let c = block_id_x();
        let pc = counts.partition_padded::<S2<CB, EP>>(Padding::Zero);
        let mut base = start
            .partition_padded::<S1<EP>>(Padding::Zero)
            .load(0i32)
            .reshape::<S2<1, EP>>();
        for r in 0..(c + (CB - 1)) / CB {
            let row = (iota::<CB>() + r * CB)
                .reshape::<S2<CB, 1>>()
                .broadcast::<S2<CB, EP>>();
            base += select(
                row.cmp_lt(c.splat::<S2<CB, EP>>()),
                pc.load((r, 0i32)),
                0i32,
            )
            .sum::<0>();
        }
        let pair = iota::<BT>() + c * BT;
        let valid = pair.cmp_lt(ids.dim(0).splat::<S1<BT>>());
        let v = ids.partition_padded::<S1<BT>>(Padding::Zero).load(c);
        let hot = v.reshape::<S2<BT, 1>>().broadcast::<S2<BT, EP>>().cmp_eq(
            iota::<EP>()
                .reshape::<S2<1, EP>>()
                .broadcast::<S2<BT, EP>>(),
        );
        place_chunk::<BT, EP>(v, hot, pair, valid, base, sorted_ids);
    }

    /// `moe_align_block_size` in one launch (one block) for calls of a few chunks of `BT` pairs: the
    /// histogram of [`moe_align_hist`] summed over the chunks, the plan of [`moe_align_plan`] (`total`,
    /// `expert_ids`, padding rows), then the placement of [`moe_align_scatter`] chunk by chunk with a
    /// running per-expert base, so the result is the three passes' (stable by pair id). At decode the
    /// three launches' fixed cost is most of the alignment's time. `EP = 16·ER`.
    #[cutile::entry]
    pub fn moe_align_fused<
        const BT: i32,
        const BM: i32,
        const EP: i32,
        const ER: i32,
        const BB: i32,
    >(
        ids: &Tensor<i32, S1<DYN>>,
        num_experts: Scalar<i32>,
        total: &mut Tensor<i32, S1<1>>,
        expert_ids: &mut Tensor<i32, S1<BB>>,
        sorted_ids: &mut Tensor<i32, S1<DYN>>,
    ) {
        let n = ids.dim(0);
        let pids = ids.partition_padded::<S1<BT>>(Padding::Zero);
        let chunks = pids.num_tiles(0);
        let experts = iota::<EP>()
            .reshape::<S2<1, EP>>()
            .broadcast::<S2<BT, EP>>();
        let mut acc = zeros::<i32, S2<1, EP>>();
        for c in 0..chunks {
            let v = pids.load(c);
            let valid = (iota::<BT>() + c * BT).cmp_lt(n.splat::<S1<BT>>());
            let hot = v
                .reshape::<S2<BT, 1>>()
                .broadcast::<S2<BT, EP>>()
                .cmp_eq(experts)
                & valid.reshape::<S2<BT, 1>>().broadcast::<S2<BT, EP>>();
            acc += hot.cast::<i32>().sum::<0>();
        }
        let cnt = acc.reshape::<S1<EP>>();
        let layout = align_layout::<BM, EP, ER>(cnt);
        let first = layout.1;
        align_plan::<BM, EP, BB>(cnt, layout, num_experts, n, total, expert_ids, sorted_ids);
        let mut base = first.reshape::<S2<1, EP>>();
        for c in 0..chunks {
            let v = pids.load(c);
            let pair = iota::<BT>() + c * BT;
            let valid = pair.cmp_lt(n.splat::<S1<BT>>());
            let hot = v
                .reshape::<S2<BT, 1>>()
                .broadcast::<S2<BT, EP>>()
                .cmp_eq(experts)
                & valid.reshape::<S2<BT, 1>>().broadcast::<S2<BT, EP>>();
            place_chunk::<BT, EP>(v, hot, pair, valid, base, sorted_ids);
            base += hot.cast::<i32>().sum::<0>();
        }
    }

    /// `MODE` of `moe_route`: softmax, top-k probabilities as they are.
    pub const SOFTMAX: i32 = 0;
    /// `MODE`: softmax, top-k probabilities divided by their sum.
    pub const SOFTMAX_RENORM: i32 = 1;
    /// `MODE`: sigmoid; experts chosen by `sigmoid + bias`, weights the chosen sigmoids divided by
    /// their sum times `scale` (DeepSeek-V3; with `GR > 1` groups, its expert-group limit).
    pub const SIGMOID_BIAS: i32 = 2;

    /// Router logits `[T, E]` → `ids`, `weights` `[T, k]` (`E <= EP`, `k <= KP`); block `p` routes
    /// tokens `p·BT..`. `bias: [E]` is read in `SIGMOID_BIAS` mode only. With `GR > 1` (that mode only,
    /// `E = EP`, `GS = EP / GR`) each token chooses from its best `keep` of `GR` expert groups
    /// ([`route::group_limit`]); `GR = 1` ignores `keep`. Grid = tiles of `ids`.
    #[cutile::entry]
    pub fn moe_route<
        E: Float,
        const MODE: i32,
        const BT: i32,
        const EP: i32,
        const KP: i32,
        const GR: i32,
        const GS: i32,
    >(
        logits: &Tensor<E, S2<DYN, DYN>>,
        bias: &Tensor<f32, S1<DYN>>,
        scale: Scalar<f32>,
        keep: Scalar<i32>,
        ids: &mut Tensor<i32, S2<BT, KP>>,
        weights: &mut Tensor<f32, S2<BT, KP>>,
    ) {
        let t = block_id_x();
        let v = logits
            .partition_padded::<S2<BT, EP>>(Padding::NegInf)
            .load((t, 0i32))
            .cast::<f32>();
        let k = ids.dim(1);
        let slot_ok = iota::<KP>()
            .reshape::<S2<1, KP>>()
            .broadcast::<S2<BT, KP>>()
            .cmp_lt(k.splat::<S2<BT, KP>>());
        if MODE == SIGMOID_BIAS {
            let p = full::<f32, S2<BT, EP>>(1.0f32) / ((-v).exp() + 1.0f32);
            // One element per lane through a clamped index (vectors of it are not provably contiguous):
            // tileiras 13.5.37 vectorizes the padded tile load of `bias` into 64- and 128-bit loads at
            // 4- and 8-byte offsets (CUDA_ERROR_MISALIGNED_ADDRESS) when the scores are regrouped into
            // groups of 2 or 4 experts (`docs/toolchain-findings.md`).
            let lanes = iota::<EP>();
            let e = bias.dim(0);
            let b = select(
                lanes.cmp_lt(e.splat::<S1<EP>>()),
                bias.gather(lanes.min(e - 1i32), None, 0.0f32),
                f32::NEG_INFINITY,
            )
            .reshape::<S2<1, EP>>()
            .broadcast::<S2<BT, EP>>();
            let sel = if GR > 1 {
                route::group_limit::<BT, EP, GR, GS>(p + b, keep)
            } else {
                p + b
            };
            let (top, picked) = route::top_k::<BT, EP, KP>(sel, p);
            let sum = select(slot_ok, picked, 0.0f32)
                .sum::<1>()
                .broadcast::<S2<BT, KP>>();
            ids.store(top);
            weights.store(picked / sum * scale.splat::<S2<BT, KP>>());
        } else {
            let m = v.amax::<1>().broadcast::<S2<BT, EP>>();
            let ex = (v - m).exp();
            let p = ex / ex.sum::<1>().broadcast::<S2<BT, EP>>();
            let (top, picked) = route::top_k::<BT, EP, KP>(p, p);
            ids.store(top);
            if MODE == SOFTMAX_RENORM {
                let sum = select(slot_ok, picked, 0.0f32)
                    .sum::<1>()
                    .broadcast::<S2<BT, KP>>();
                weights.store(picked / sum);
            } else {
                weights.store(picked);
            }
        }
    }

    /// The combine of the staged sorted form: `out[t, c] = Σ_j w[t, j] · ys[pos[t, j], c]` in slot
    /// order `j = 0..k` (`ys: [P, H]` f32 in the aligned order from `moe_gemm2_staged`, `pos: [T, k]`
    /// from `moe_positions`, `w: [T, k]` the routed weights). Grid = tiles of `out`.
    #[cutile::entry]
    pub fn moe_combine_staged<E: Float, const BT: i32, const BH: i32>(
        ys: &Tensor<f32, S2<DYN, DYN>>,
        pos: &Tensor<i32, S2<DYN, DYN>>,
        w: &Tensor<f32, S2<DYN, DYN>>,
        out: &mut Tensor<E, S2<BT, BH>>,
    ) {
        let (t, c, _) = block_id();
        let pp = pos.partition_padded::<S2<BT, 1>>(Padding::Zero);
        let pw = w.partition_padded::<S2<BT, 1>>(Padding::Zero);
        let real = (iota::<BT>() + t * BT)
            .cmp_lt(pos.dim(0).splat::<S1<BT>>())
            .reshape::<S2<BT, 1>>()
            .broadcast::<S2<BT, BH>>();
        let cols = (iota::<BH>() + c * BH)
            .reshape::<S2<1, BH>>()
            .broadcast::<S2<BT, BH>>();
        let mask = real & cols.cmp_lt(ys.dim(1).splat::<S2<BT, BH>>());
        let mut acc = zeros::<f32, S2<BT, BH>>();
        for j in 0..pos.dim(1) {
            let rows = pp.load((t, j)).broadcast::<S2<BT, BH>>();
            let wj = pw.load((t, j)).broadcast::<S2<BT, BH>>();
            acc += ys.gather((rows, cols), Some(mask), 0.0f32) * wj;
        }
        out.store(acc.cast::<E>());
    }

    /// The deterministic top-k combine: `out[t, c] = Σ_j y[t, j, c]` in slot order `j = 0..k`
    /// (`y: [T, k, H]` f32, `out: [T, H]`). Grid = tiles of `out`.
    #[cutile::entry]
    pub fn moe_combine<E: Float, const BT: i32, const BH: i32>(
        y: &Tensor<f32, S3<DYN, DYN, DYN>>,
        out: &mut Tensor<E, S2<BT, BH>>,
    ) {
        let (t, c, _) = block_id();
        let py = y.partition_padded::<S3<BT, 1, BH>>(Padding::Zero);
        let mut acc = zeros::<f32, S3<BT, 1, BH>>();
        for j in 0..y.dim(1) {
            acc += py.load((t, j, c));
        }
        out.store(acc.reshape::<S2<BT, BH>>().cast::<E>());
    }
}
