//! Row softmax: one row per block, the row loaded as one tile padded with -inf (so padding never wins the
//! max and contributes `exp(-inf) = 0` to the sum), math in f32 whatever the storage type.
//!
//! The row moves with plain loads and stores, not the TMA: for one small tile per block the copy engine's
//! setup dominates (measured on an H200 for the same whole-row shape in `norm.rs`: 7x).

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    const NO_TMA: Hints = Hints {
        latency: None,
        allow_tma: Some(false),
    };

    /// `y[r, :] = softmax(x[r, :])`; `BN` must be at least the row length (a power of two).
    #[cutile::entry]
    pub fn row_softmax<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let t = x
            .partition_padded::<S2<1, BN>>(Padding::NegInf)
            .load_with((row, 0), NO_TMA)
            .cast::<f32>();
        let m = t.amax::<1>();
        let e = (t - m.broadcast()).exp();
        let s = e.sum::<1>();
        y.store_with((e / s.broadcast()).cast::<E>(), NO_TMA);
    }
}

/// CPU reference: softmax of each row of a row-major `rows x cols` matrix.
pub fn row_softmax_reference(x: &[f32], cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f32 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}
