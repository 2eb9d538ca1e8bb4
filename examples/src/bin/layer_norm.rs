//! LayerNorm on the GPU: whole-row (1000x1023, f32 and bf16) and looped (300x8191 bf16) checked against
//! the CPU reference, then bf16 16384x8192 (looped) and 8192x1024 timed (GB/s, L2 flushed). Prints
//! `skipped` and exits 0 without a GPU.

use cutile_examples::data::Dt;
use cutile_examples::workload::norm;

fn main() {
    let checks = [
        norm(Dt::F32, 1000, 1023, true, false),
        norm(Dt::BF16, 1000, 1023, true, false),
        norm(Dt::BF16, 300, 8191, true, true),
    ];
    let benches = [
        norm(Dt::BF16, 16384, 8192, true, true),
        norm(Dt::BF16, 8192, 1024, true, false),
    ];
    cutile_examples::example_main(
        "layer_norm",
        checks.into_iter().flatten().collect(),
        benches.into_iter().flatten().collect(),
    );
}
