//! `gemm` through the host API on the GPU: ragged bf16/f16 calls (also with `b` passed as a transposed
//! view) checked against the CPU reference, every representative call timed (TFLOP/s). Prints `skipped`
//! and exits 0 without a GPU.

fn main() {
    cutile_examples::example_ops("gemm", &[cutile_kernels::gemm::OP]);
}
