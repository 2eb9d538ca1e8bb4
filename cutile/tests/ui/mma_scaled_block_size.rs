// NVFP4 (e2m1 values, e4m3 scales) has one scale per 16 values along K: 128 values over 4 scales (blocks
// of 32) is refused when the kernel is instantiated.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    pub fn nvfp4_blocks_of_32<const K: i32, const KH: i32, const KS: i32>(
        x: &Tensor<i8, S2<DYN, DYN>>,
        y: &mut Tensor<f32, S2<64, 64>>,
    ) {
        let v = x
            .partition_padded::<S2<64, KH>>(Padding::Zero)
            .load((0, 0))
            .reinterpret::<f4e2m1fn, S2<64, K>>();
        let s = x
            .partition_padded::<S2<64, KS>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>();
        y.store(mma_scaled(v, s, v.transpose(), s.transpose(), zeros::<f32, S2<64, 64>>()));
    }
}

fn main() {
    let _ = k::nvfp4_blocks_of_32::kernel::<128, 64, 4>();
}
