// e2m1 tiles are operands of `mma_scaled` only: Tile IR has no arithmetic on them, so adding two is a
// rustc error (convert the bytes to f32 with integer decoding instead).
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn add_e2m1(x: &Tensor<i8, S1<DYN>>, y: &mut Tensor<i8, S1<64>>) {
        let v = x.load_tile::<S1<32>>(block_id_x()).reinterpret::<f4e2m1fn, S1<64>>();
        let w = v + v;
        y.store(w.reinterpret::<i8, S1<32>>());
    }
}

fn main() {}
