// A string computed while the kernel is specialized is not a constant argument: `ForeignStr` is expected.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::foreign(name = "ext")]
    pub unsafe fn ext(mode: &str, x: Tile<f32, S1<16>>);

    fn pick(b: bool) -> &'static str {
        if b { "a" } else { "b" }
    }

    #[cutile::entry]
    fn calls<const B: i32>(x: &Tensor<f32, S1<DYN>>) {
        let t = x.load_tile::<S1<16>>(block_id_x());
        let r = pick(B > 1);
        unsafe { ext(r, t) };
    }
}

fn main() {}
