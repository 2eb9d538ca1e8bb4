//! `softmax` through the host API on the GPU: ragged, multi-dim (3-D, 4-D) and f32/f16/bf16 calls checked
//! against the CPU reference, every representative call timed (GB/s, L2 flushed). Prints `skipped` and
//! exits 0 without a GPU.

fn main() {
    cutile_examples::example_ops("softmax", &[cutile_kernels::softmax::OP]);
}
