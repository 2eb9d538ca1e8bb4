//! Row softmax on the GPU: 1000x1023 and 4097x129 (f32 and bf16) checked against the CPU reference, then
//! bf16 8192x8192, 4096x4096 and 32768x1024 timed (GB/s, L2 flushed). Prints `skipped` and exits 0
//! without a GPU.

use cutile_examples::data::Dt;
use cutile_examples::workload::softmax;

fn main() {
    let checks = [(1000, 1023), (4097, 129)]
        .into_iter()
        .flat_map(|(r, c)| [softmax(Dt::F32, r, c), softmax(Dt::BF16, r, c)])
        .flatten()
        .collect();
    let benches = [(8192, 8192), (4096, 4096), (32768, 1024)]
        .into_iter()
        .filter_map(|(r, c)| softmax(Dt::BF16, r, c))
        .collect();
    cutile_examples::example_main("softmax", checks, benches);
}
