//! Flash-attention forward (bf16) on the GPU: [8, 1000, 64] and [4, 777, 128], causal and not, checked
//! against the CPU reference, then B·H = 128, S = 4096, D = 128 timed (TFLOP/s). Prints `skipped` and exits
//! 0 without a GPU.

use cutile_examples::workload::attention;

fn main() {
    let checks = [false, true]
        .into_iter()
        .flat_map(|c| [attention(8, 1000, 64, c), attention(4, 777, 128, c)])
        .flatten()
        .collect();
    let benches = [false, true]
        .into_iter()
        .filter_map(|c| attention(128, 4096, 128, c))
        .collect();
    cutile_examples::example_main("attention", checks, benches);
}
