//! cutile: NVIDIA CUDA Tile IR kernels written in Rust. A code map, following one launch of
//! `vadd::<f32, 1024>(&a, &b, &mut c).launch(&stream)` through the modules, lowest layer first
//! (the layer rule, checked by `tests/layers.rs`, is in `ARCHITECTURE.md`):
//!
//! 1. **macro** (`cutile-macros`: [`module`], [`entry`], [`foreign`]): at build time rustc type-checks the
//!    kernel body against [`core`]; the macro rewrites device control flow into calls of
//!    `dsl::__rt`, and emits per kernel a [`dsl::Kernel`] value and a typed launcher returning a
//!    [`launch::Launch`].
//! 2. **trace / specialize** ([`trace`] → [`core`] → [`dsl`]): [`dsl::Kernel::specialize`] runs the body
//!    once with the arrays' [`dsl::TensorMeta`]; every [`core`] op records Tile IR into the thread-local
//!    tracer of [`trace`]. Argument mismatches are [`dsl::ArgError`]s.
//! 3. **IR → bytecode** (`cutile_ir`): the traced `cutile_ir::Module` is verified and written as Tile IR
//!    bytecode 13.4/13.5 ([`dsl::Specialized::bytecode`]).
//! 4. **toolchain** ([`toolchain`]): tileiras, found and validated once per process, compiles bytecode to
//!    a cubin ([`toolchain::Tileiras::compile`]).
//! 5. **key** ([`key`]): [`key::CacheKey`] hashes everything that decides the cubin's bytes (kernel and
//!    source hash, specialization, arch, [`toolchain::TileirasVersion`], options).
//! 6. **bundle / cache** ([`bundle`] → [`cache`]): a key is looked up in memory, in registered AOT
//!    bundles, then on disk; only a miss runs the compile step ([`cache::KernelCache::lookup`]).
//! 7. **runtime** ([`runtime`]): cudarc driver, devices, streams, host [`runtime::Tensor`]s, the loaded
//!    [`runtime::CuModule`] / [`runtime::CuFunction`], packed arguments. It knows nothing of keys,
//!    caches or bundles.
//! 8. **launch** ([`launch`]): [`launch::Launcher`] ties it together. Warm path: a stack-built key to a
//!    loaded function, then pack and launch. Cold path: [`launch::plan`] (specialize → signature →
//!    key) → [`launch::load_kernel`] (cache chain → module load). The typed launchers of step 1 are
//!    [`launch::typed`]; AOT tools call the same [`launch::plan`].
//!
//! Beside the path: [`tune`] times candidate configurations (gated on correctness) and keeps the
//! winners in a tuning cache.

pub mod toolchain;
pub mod trace;

pub mod core;
pub mod dsl;
pub mod key;
pub mod runtime;

pub mod bundle;
pub mod cache;
pub mod launch;
pub mod tune;

pub use cutile_macros::{entry, foreign, module};
