// Approximate exp / division and flush-to-zero exist only on f32 tiles (Tile IR rejects them elsewhere).
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn approx_exp_of_bf16<const B: i32>(x: &Tensor<bf16, S1<DYN>>, y: &mut Tensor<bf16, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t.exp_approx());
    }

    #[cutile::entry]
    fn approx_div_of_f16<const B: i32>(x: &Tensor<f16, S1<DYN>>, y: &mut Tensor<f16, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t.div_approx_ftz(t));
    }
}

fn main() {}
