// Declaration mistakes: a body, a reference operand, an unbounded type parameter, a wrong `const_args` list.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::foreign]
    pub unsafe fn with_body(x: Tile<f32, S1<16>>) {}

    #[cutile::foreign]
    pub unsafe fn by_ref(#[inout] x: &mut Tile<f32, S1<16>>);

    #[cutile::foreign]
    pub unsafe fn unbounded<T>(x: Tile<f32, S1<16>>);

    #[cutile::foreign(const_args = "N")]
    pub unsafe fn order<const N: i32>(mode: &str, x: Tile<f32, S1<16>>);
}

fn main() {}
