//! Row normalizations, one row per block (`BN` ≥ row length), math in f32 whatever the storage type:
//! RMSNorm `y = x / sqrt(mean(x²) + eps) · w` and LayerNorm `y = (x - mean) / sqrt(var + eps) · w + b`.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// RMSNorm of each row of `x` with weight `w` (length = row length).
    #[cutile::entry]
    pub fn rms_norm<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let t = x
            .load_tile_padded::<S2<1, BN>>((row, 0), Padding::Zero)
            .cast::<f32>();
        let n = x.dim(1).cast::<f32>();
        let inv = ((t * t).sum::<1>() / n + eps).rsqrt();
        let wt = w
            .load_tile_padded::<S1<BN>>(0, Padding::Zero)
            .cast::<f32>()
            .reshape::<S2<1, BN>>();
        y.store((t * inv.broadcast() * wt).cast::<E>());
    }

    /// LayerNorm of each row of `x` with weight `w` and bias `b`.
    #[cutile::entry]
    pub fn layer_norm<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, DYN>>,
        w: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        eps: Scalar<f32>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let row = block_id_x();
        let t = x
            .load_tile_padded::<S2<1, BN>>((row, 0), Padding::Zero)
            .cast::<f32>();
        let n = x.dim(1).cast::<f32>();
        let mean = t.sum::<1>() / n;
        // Padding columns must not contribute to the variance.
        let valid = iota::<BN>().reshape::<S2<1, BN>>() < x.dim(1);
        let d = select(valid, t - mean.broadcast(), 0.0);
        let inv = ((d * d).sum::<1>() / n + eps).rsqrt();
        let wt = w
            .load_tile_padded::<S1<BN>>(0, Padding::Zero)
            .cast::<f32>()
            .reshape::<S2<1, BN>>();
        let bt = b
            .load_tile_padded::<S1<BN>>(0, Padding::Zero)
            .cast::<f32>()
            .reshape::<S2<1, BN>>();
        y.store((d * inv.broadcast() * wt + bt).cast::<E>());
    }
}

/// CPU reference of RMSNorm over rows of length `cols`.
pub fn rms_norm_reference(x: &[f32], w: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / cols as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(v, w)| v * inv * w));
    }
    out
}

/// CPU reference of LayerNorm over rows of length `cols`.
pub fn layer_norm_reference(x: &[f32], w: &[f32], b: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let mean = row.iter().sum::<f32>() / cols as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / cols as f32;
        let inv = 1.0 / (var + eps).sqrt();
        out.extend(
            row.iter()
                .zip(w.iter().zip(b))
                .map(|(v, (w, b))| (v - mean) * inv * w + b),
        );
    }
    out
}
