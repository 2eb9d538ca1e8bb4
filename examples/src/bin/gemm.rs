//! GEMM (bf16 inputs, f32 accumulation) on the GPU, plain and persistent: 1000x1023x517 checked against
//! the CPU reference (and 4096³ on 64 sampled rows), then 4096³ timed (TFLOP/s). Prints `skipped` and
//! exits 0 without a GPU.

use cutile_examples::workload::gemm;

fn main() {
    cutile_examples::example_main(
        "gemm",
        vec![
            gemm(1000, 1023, 517, false),
            gemm(1000, 1023, 517, true),
            gemm(4096, 4096, 4096, false),
        ],
        vec![gemm(4096, 4096, 4096, false), gemm(4096, 4096, 4096, true)],
    );
}
