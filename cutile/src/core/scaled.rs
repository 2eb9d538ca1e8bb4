//! Block-scaled matrix multiply-accumulate (Tile IR 13.3+ `mmaf_scaled`): the Blackwell tensor cores'
//! NVFP4 / MXFP4 / MXFP8 product, where every `B` consecutive elements along K of each operand share one
//! scale.
//!
//! `mma_scaled(x, xs, y, ys, acc)[i, j] = acc[i, j] + Σ_k x[i, k]·xs[i, k / B] · y[k, j]·ys[k / B, j]`
//! with `B = K / KS` (`KS` the scales' K extent). Misuse is a rustc error at the call: the element
//! pairs by the [`BlockScaled`] bound, the shapes by the tiles' const generics, and the block size by a
//! `const` assertion evaluated when the kernel is instantiated (`B` must divide evenly and be one the
//! pair allows). The op exists on sm_100 and later only: tileiras refuses it for sm_80/sm_90, so a kernel
//! that calls it is compiled for Blackwell targets alone.

use cutile_ir::Opcode;

use super::elem::{BlockScaled, ElementType};
use super::shape::S2;
use super::value::Tile;
use crate::trace::{self, Op};

/// Whether `K` elements over `KS` scales make a block size the pair `(E, Sc)` allows.
const fn block_ok<E: BlockScaled<Sc>, Sc: ElementType>(k: i32, ks: i32) -> bool {
    ks > 0 && k % ks == 0 && ((k / ks == 16 && E::BLOCK_16) || (k / ks == 32 && E::BLOCK_32))
}

/// The block-scaled product of `x: [M, K]` and `y: [K, N]` (both `E`) with scales `xs: [M, KS]`,
/// `ys: [KS, N]` (both `Sc`), added to the f32 accumulator: see the module docs.
///
/// ```ignore
/// // NVFP4: e2m1 values, one e4m3 scale per 16 along K.
/// let acc = mma_scaled(x, xs, y, ys, acc); // x: [64, 128] f4e2m1fn, xs: [64, 8] f8e4m3fn
/// ```
#[track_caller]
pub fn mma_scaled<
    E: BlockScaled<Sc>,
    Sc: ElementType,
    const M: i32,
    const N: i32,
    const K: i32,
    const KS: i32,
>(
    x: Tile<E, S2<M, K>>,
    xs: Tile<Sc, S2<M, KS>>,
    y: Tile<E, S2<K, N>>,
    ys: Tile<Sc, S2<KS, N>>,
    acc: Tile<f32, S2<M, N>>,
) -> Tile<f32, S2<M, N>> {
    const {
        assert!(
            block_ok::<E, Sc>(K, KS),
            "mma_scaled: K / KS must be a block size the element and scale types allow (16 for \
             f4e2m1fn with f8e4m3fn scales, 16 or 32 with f8e8m0fnu, 32 for fp8 with f8e8m0fnu)"
        )
    };
    let _at = crate::trace::at(::std::panic::Location::caller());
    let ty = Tile::<f32, S2<M, N>>::ir_type();
    Tile::from_value(trace::with(|t| {
        t.push1(
            Op::new(Opcode::MmaFScaled)
                .operand("lhs", x.v)
                .operand("rhs", y.v)
                .operand("acc", acc.v)
                .operand("lhs_scale", xs.v)
                .operand("rhs_scale", ys.v)
                .result(ty),
        )
    }))
}
