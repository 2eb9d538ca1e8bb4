//! Element-wise vector kernels: `c = a + b` and `y = alpha * x + y` (saxpy), one tile per block.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// `c = a + b` over 1-D arrays; block `i` handles elements `[i*B, (i+1)*B)`.
    #[cutile::entry]
    pub fn vadd<E: Numeric, const B: i32>(
        a: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        c: &mut Tensor<E, S1<B>>,
    ) {
        let pid = block_id_x();
        let ta = a.load_tile::<S1<B>>(pid);
        let tb = b.load_tile::<S1<B>>(pid);
        c.store(ta + tb);
    }

    /// `y = alpha * x + y`, computed in f32 whatever the storage type.
    #[cutile::entry]
    pub fn saxpy<E: Float, const B: i32>(
        alpha: Scalar<f32>,
        x: &Tensor<E, S1<DYN>>,
        y: &mut Tensor<E, S1<B>>,
    ) {
        let pid = block_id_x();
        let tx = x.load_tile::<S1<B>>(pid).cast::<f32>();
        let ty = y.load().cast::<f32>();
        y.store((alpha * tx + ty).cast::<E>());
    }
}
