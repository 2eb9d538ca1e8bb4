//! `cutile-kernels`: prebuilt tile kernels called like torch ops.
//!
//! One folder per family; each holds its DSL kernels (`dsl.rs`), its host API (`mod.rs`: the ops, and
//! `plan`, the launches of a call without a device), its configuration choice (`config.rs`: the default
//! table and the tuner's candidates), its CPU reference (`reference.rs`) and its tests:
//!
//! | family | ops |
//! |---|---|
//! | [`vector_add`] | [`vector_add::add`], [`vector_add::axpy`] |
//! | [`softmax`] | [`softmax::softmax`] |
//! | [`norm`] | [`norm::rms_norm`], [`norm::layer_norm`], [`norm::add_rms_norm`], [`norm::rms_norm_heads`], [`norm::layer_norm_stats`], [`norm::rms_norm_backward`], [`norm::layer_norm_backward`] |
//! | [`gemm`] | [`gemm::gemm`] |
//! | [`attention`] | [`attention::attention`] |
//! | [`activation`] | [`activation::silu_and_mul`], [`activation::swiglu`], [`activation::gelu`], [`activation::geglu`], [`activation::relu`] and their `_backward` |
//! | [`fused_qkv`] | [`fused_qkv::fused_qkv`] |
//! | [`cross_entropy`] | [`cross_entropy::fused_linear_cross_entropy`] |
//! | [`dropout`] | [`dropout::dropout`], [`dropout::dropout_backward`] |
//!
//! [`foreign`] runs the ops on memory and streams owned by someone else (the Python package and the C
//! ABI call it). [`op`] holds what the families share (errors, operands, planned launches, tuning glue, the registry
//! of ops by name that AOT bundles and the GPU runner use); [`catalog`] lists the compile jobs of
//! `cargo xtask kernels`, drawn from the families' plans.

pub mod activation;
pub mod attention;
pub mod catalog;
pub mod cross_entropy;
pub mod dropout;
pub mod embedding;
pub mod foreign;
pub mod fused_qkv;
pub mod gemm;
pub mod kv_cache;
pub mod moe;
pub mod norm;
pub mod op;
pub mod rope;
pub mod sampling;
pub mod softmax;
pub mod vector_add;

pub use op::OpError;

/// The README's quick-start snippets, compiled as doc tests so they keep working.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The relative L2 error an op's output may have against its f64/f32 reference, per output element
/// type: about 4 ulps of the type's rounding, what a correctly written kernel reaches; none for
/// integer outputs (indices must agree exactly).
pub fn tolerance(dtype: cutile_ir::ScalarType) -> f64 {
    match dtype {
        cutile_ir::ScalarType::BF16 => 1e-2,
        cutile_ir::ScalarType::F16 => 2e-3,
        d if d.is_integer() => 0.0,
        _ => 1e-5,
    }
}
