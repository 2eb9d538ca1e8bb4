// Constant string arguments must be known at compile time: string macros and reassigned locals are rejected
// (run-time values: foreign_string_runtime.rs).
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::foreign(name = "ext")]
    pub unsafe fn ext(mode: &str, x: Tile<f32, S1<16>>);

    #[cutile::entry]
    fn calls(x: &Tensor<f32, S1<DYN>>) {
        let t = x.load_tile::<S1<16>>(block_id_x());
        unsafe { ext(concat!("a", "b"), t) };
        let mut m = "fast";
        for _i in 0..4i32 {
            m = "slow";
        }
        unsafe { ext(m, t) };
    }
}

fn main() {}
