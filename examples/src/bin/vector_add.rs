//! `add` and `axpy` through the host API on the GPU: the ragged and f16/bf16 calls checked against the CPU
//! reference, every representative call timed (GB/s, L2 flushed). Prints `skipped` and exits 0 without a
//! GPU.

use cutile_kernels::vector_add::{ADD, AXPY};

fn main() {
    cutile_examples::example_ops("vector_add", &[ADD, AXPY]);
}
