// A rank-2 tile needs a 2-element index.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn rows<const BN: i32>(x: &Tensor<f32, S2<DYN, DYN>>, y: &mut Tensor<f32, S2<1, BN>>) {
        let t = x.load_tile::<S2<1, BN>>(block_id_x());
        y.store(t);
    }
}

fn main() {}
