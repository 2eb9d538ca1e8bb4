//! Vector add and saxpy on the GPU: ragged sizes checked against the CPU reference, then a 2^28-element
//! f32 add timed (GB/s, L2 flushed). Prints `skipped` and exits 0 without a GPU.

use cutile_examples::data::Dt;
use cutile_examples::workload::{saxpy, vadd};

fn main() {
    cutile_examples::example_main(
        "vector_add",
        vec![
            vadd(Dt::F32, 1_000_003),
            vadd(Dt::BF16, 1_000_003),
            saxpy(1_000_003),
        ],
        vec![vadd(Dt::F32, 1 << 28), saxpy(1 << 28)],
    );
}
