// Calling a foreign tile function needs an `unsafe` block.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::foreign(name = "ext")]
    pub unsafe fn ext(x: Tile<f32, S1<16>>);

    #[cutile::entry]
    fn calls(x: &Tensor<f32, S1<DYN>>) {
        ext(x.load_tile::<S1<16>>(block_id_x()));
    }
}

fn main() {}
