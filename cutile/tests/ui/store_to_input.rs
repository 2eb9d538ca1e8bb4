// Inputs (`&Tensor`) are read-only: only `&mut Tensor` outputs can be stored to.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn inplace<const B: i32>(x: &Tensor<f32, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        x.store(t * 2.0);
    }
}

fn main() {}
