//! The activation ops (SiLU-and-mul, SwiGLU, GELU, GeGLU, ReLU and their gradients) through the host API
//! on the GPU: the ragged, strided, rank-3 and one-element calls checked against the CPU reference, every
//! representative call timed (GB/s, L2 flushed). Prints `skipped` and exits 0 without a GPU.

fn main() {
    let ops: Vec<&str> = cutile_kernels::activation::OPS
        .iter()
        .map(|o| o.name)
        .collect();
    cutile_examples::example_ops("activation", &ops);
}
