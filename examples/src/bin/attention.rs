//! `attention` through the host API on the GPU: ragged 3-D and 4-D (grouped-query, and `[B,S,H,D]` storage
//! passed as a permuted view) calls, causal and not, bf16 and f16, checked against the CPU reference;
//! every representative call timed (TFLOP/s). Prints `skipped` and exits 0 without a GPU.

fn main() {
    cutile_examples::example_ops("attention", &[cutile_kernels::attention::OP]);
}
