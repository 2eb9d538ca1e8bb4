// `extract_at` takes one run-time index per axis of the tile it picks from.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn pick<const B: i32>(x: &Tensor<f32, S2<DYN, DYN>>, y: &mut Tensor<f32, S2<B, 1>>) {
        let t = x.load_tile::<S2<B, B>>((block_id_x(), 0));
        y.store(t.extract_at::<S2<B, 1>>(block_id_x()));
    }
}

fn main() {}
