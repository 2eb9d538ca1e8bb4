// Kernel parameters must be tensors or device scalars, and hints are range-checked.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn plain_int<const B: i32>(n: i32, y: &mut Tensor<f32, S1<B>>) {}

    #[cutile::entry(num_worker_warps = 3)]
    fn bad_hint<const B: i32>(y: &mut Tensor<f32, S1<B>>) {}
}

fn main() {}
