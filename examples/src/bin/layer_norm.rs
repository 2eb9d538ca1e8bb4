//! `layer_norm` and `layer_norm_stats` through the host API on the GPU: ragged, 3-D and f32/f16/bf16
//! calls checked against the CPU reference (`y`, and `mean`/`rstd` in f32), every representative call
//! timed (GB/s, L2 flushed). Prints `skipped` and exits 0 without a GPU.

fn main() {
    cutile_examples::example_ops(
        "layer_norm",
        &[
            cutile_kernels::norm::LAYER_NORM,
            cutile_kernels::norm::LAYER_NORM_STATS,
        ],
    );
}
