// `exp` needs floating-point elements.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn exp_of_ints<const B: i32>(x: &Tensor<i32, S1<DYN>>, y: &mut Tensor<i32, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t.exp());
    }
}

fn main() {}
