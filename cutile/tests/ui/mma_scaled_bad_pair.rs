// `mma_scaled` takes e2m1 or fp8 values with the scale type their format defines: MXFP8 (e4m3 values)
// has power-of-two e8m0 scales, so e4m3 scales are refused.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn e4m3_scaled_by_e4m3(x: &Tensor<i8, S2<DYN, DYN>>, y: &mut Tensor<f32, S2<64, 64>>) {
        let v = x
            .partition_padded::<S2<64, 64>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>();
        let s = x
            .partition_padded::<S2<64, 2>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>();
        y.store(mma_scaled(v, s, v, s.transpose(), zeros::<f32, S2<64, 64>>()));
    }
}

fn main() {}
