// A host integer cannot change inside a device loop (the loop body is traced once).
#[cutile::module]
mod k {
    use cutile::core::*;

    #[cutile::entry]
    fn count<const B: i32>(n: Scalar<i32>, y: &mut Tensor<i32, S1<B>>) {
        let mut steps = 0;
        for _ in 0..n {
            steps += 1;
        }
        y.store(full(steps));
    }
}

fn main() {}
