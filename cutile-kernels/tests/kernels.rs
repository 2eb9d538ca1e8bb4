//! The catalog's integration tests, linked into one test binary.
//!
//! Each module here was once its own `tests/*.rs` binary. Every such binary links the whole catalog,
//! about 160 MB unoptimized, so 29 of them cost gigabytes of disk and minutes of linking on a CI
//! machine; as modules of one binary they share that link. Run one family with a name filter:
//! `cargo test -p cutile-kernels --test kernels -- moe::`.

#![allow(clippy::unwrap_used)]

// Not every module uses every shared helper.
#[allow(dead_code)]
mod common;

mod activation;
mod attention_backward;
mod attention_decode;
mod attention_mla;
mod attention_prefill;
mod cross_entropy;
mod dropout;
mod dsl_attention;
mod dsl_gpu;
mod dsl_ir;
mod dsl_norm;
mod embedding;
mod foreign_replay;
mod fused_qkv;
mod gemm_epilogue;
mod gemm_fp8;
mod gemm_reference;
mod grouped_gemm;
mod host_api;
mod kv_cache;
mod moe;
mod norm_backward;
mod norm_fused;
mod op_inventory;
mod rope;
mod sampling;
mod softmax_norm_reference;
mod softmax_split;
mod wgmma_pipelining;
