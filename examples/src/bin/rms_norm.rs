//! `rms_norm`, `add_rms_norm` and `rms_norm_heads` through the host API on the GPU: ragged, 3-D,
//! fused-head-slice and f32/f16/bf16 calls checked against the CPU reference (every output), every
//! representative call timed (GB/s, L2 flushed). Prints `skipped` and exits 0 without a GPU.

fn main() {
    cutile_examples::example_ops(
        "rms_norm",
        &[
            cutile_kernels::norm::RMS_NORM,
            cutile_kernels::norm::ADD_RMS_NORM,
            cutile_kernels::norm::RMS_NORM_HEADS,
        ],
    );
}
