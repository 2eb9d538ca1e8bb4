// A foreign tile function must be declared `unsafe fn`.
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::foreign(name = "ext")]
    pub fn ext(x: Tile<f32, S1<16>>);
}

fn main() {}
