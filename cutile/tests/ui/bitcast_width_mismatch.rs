// `bitcast` reinterprets bits, so source and result element types must have the same width.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn bits_of_i32_as_f16<const B: i32>(x: &Tensor<i32, S1<DYN>>, y: &mut Tensor<f16, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t.bitcast::<f16>());
    }
}

fn main() {}
