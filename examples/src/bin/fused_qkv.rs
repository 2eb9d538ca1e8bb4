//! `fused_qkv` through the host API on the GPU: random layers (seeded) for the ragged representative
//! calls (bf16 and f16, bias and QK-norm on and off, NeoX and GPT-J RoPE, full and half rotary, paged
//! caches with skipped tokens and contiguous caches, fused and unfused paths), each checked against the
//! CPU reference: q, and both whole caches, so an entry no token addresses must keep its old value.
//! With `--bench` it also times the Llama-style calls (hidden 4096, Hq 32, Hkv 8, D 128, bf16; T = 1,
//! 8, 32, 64, 4096, 16384), fused and unfused, with CUDA events (L2 flushed). Prints `skipped` and
//! exits 0 without a GPU, like the other examples; exits 1 when a check fails.

use cutile_examples::workload::{benches, checks, of_ops};
use cutile_kernels::fused_qkv::OP;

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let timed = if bench {
        of_ops(benches(), &[OP])
    } else {
        Vec::new()
    };
    cutile_examples::example_main("fused_qkv", of_ops(checks(), &[OP]), timed);
}
