// Rust the DSL cannot express is rejected at its span.
#[cutile::module]
mod k {
    use cutile::core::*;

    fn helper(x: Tile<f32, S1<16>>) -> Tile<f32, S1<16>> {
        helper(x)
    }

    #[cutile::entry]
    fn bad<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<B>>) {
        let double = |t: Tile<f32, S1<B>>| t * 2.0;
        let t = x.load_tile::<S1<B>>(block_id_x());
        let first = t[0];
        for i in 0..4 {
            if i > 2 {
                break;
            }
        }
        loop {}
        y.store(t);
        return;
    }
}

fn main() {}
