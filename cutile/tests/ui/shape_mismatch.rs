// Adding tiles of different shapes, and an mma whose K extents disagree.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn add<const B: i32>(x: &Tensor<f32, S2<DYN, DYN>>, y: &mut Tensor<f32, S2<B, B>>) {
        let a = x.load_tile::<S2<B, B>>((0, 0));
        let b = x.load_tile::<S2<1, B>>((0, 0));
        y.store(a + b);
    }

    #[cutile::entry]
    fn matmul<const M: i32, const N: i32, const K: i32>(
        a: &Tensor<f16, S2<DYN, DYN>>,
        b: &Tensor<f16, S2<DYN, DYN>>,
        c: &mut Tensor<f32, S2<M, N>>,
    ) {
        let ta = a.load_tile::<S2<M, K>>((0, 0));
        let tb = b.load_tile::<S2<N, K>>((0, 0));
        c.store(mma(ta, tb, zeros()));
    }
}

fn main() {}
