// The unsigned high-half product exists only on integer tiles (Tile IR's `mulhii` is integer-only).
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn mulhi_of_f32<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t.mulhi_unsigned(t));
    }
}

fn main() {}
