//! `cutile::core`: the device DSL that kernels in a `#[cutile::module]` are written in.
//!
//! Kernels are ordinary Rust functions that rustc type-checks against the typed signatures here. At
//! specialization the generated builder runs the kernel body once: every operation records Tile IR in the
//! current trace and returns a typed handle, so running the body *is* building the IR for that
//! specialization (see `README.md` in this folder for the design and its reasoning).
//!
//! | Rust | Tile IR |
//! |---|---|
//! | [`Tile<E, S>`] (`S` = [`S1<A>`], [`S2<A, B>`], …) | `tile<AxBxE>` value |
//! | [`Scalar<E>`] | rank-0 `tile<E>` (block ids, loop indices, run-time arguments) |
//! | `&Tensor<E, S>` / `&mut Tensor<E, S>` parameter | `tensor_view` of a pointer + shape/stride arguments |
//! | [`Partition<E, T>`] | `partition_view` with optional [`Padding`] |
//! | [`Token`] | `token` (ordering of memory operations) |
//!
//! Opt-in fast math on f32 ([`ApproxFloat`]): [`Tile::exp_approx`], [`Tile::exp2_ftz`],
//! [`Tile::div_approx`], [`Tile::div_approx_ftz`] (see [`approx`]).
//!
//! Element types ([`ElementType`]): `bool, i8, i16, i32, i64, f16, bf16, f32, f64` and the markers
//! [`tf32`], [`f8e4m3fn`], [`f8e5m2`]. Categories: [`Numeric`] (arithmetic), [`Float`] (math functions),
//! [`Int`] (bitwise, shifts), [`MmaOperand`] (`mma` input/accumulator pairs).
//!
//! Operations:
//! - ids: [`block_id`], [`block_id_x`], [`num_blocks`];
//! - memory: [`Tensor::load_tile`], [`Tensor::load_tile_padded`], [`Tensor::partition`],
//!   [`Tensor::partition_padded`], [`Partition::load`], [`Partition::num_tiles`], [`Tensor::store`],
//!   [`Tensor::load`] (own output tile), `unsafe` [`Tensor::store_at`], [`Hints`] (latency, TMA),
//!   [`Tensor::gather`]/[`Tensor::scatter`] at computed indices with masks,
//!   [`Tensor::atomic_add`], [`Tensor::atomic`] and [`Tensor::atomic_with`] (ordering and scope);
//!   sub-views at run-time offsets [`Tensor::narrow`];
//! - constants: [`full`], [`zeros`], [`scalar`], [`iota`];
//! - shape: [`Tile::reshape`], [`Tile::broadcast`], [`Tile::permute`], [`Tile::transpose`], [`cat`],
//!   [`Tile::extract`];
//! - element-wise: `+ - * / % -x !x & | ^ << >>` (with tiles of the same type, a [`Scalar`], or a host
//!   number), comparisons `< <= > >= == !=` (rewritten by the macro), `exp exp2 ln log2 sqrt rsqrt tanh sin
//!   cos tan sinh cosh floor ceil abs min max pow atan2`, [`fma`], [`select`], [`Tile::cast`],
//!   [`Tile::bitcast`] (same-width reinterpretation, [`BitWidth`]) and [`Tile::reinterpret`] (the bytes
//!   of a tile as another width and shape, Tile IR `pack`/`unpack`);
//! - reductions and scans: `sum prod amax amin` (keep the axis) and `*_squeezed` (drop it),
//!   `cumsum cumprod cummax cummin`, generic [`Tile::reduce`] and [`Tile::scan`] with a closure;
//! - [`mma`] (`(M,K) x (K,N) + (M,N)`, shapes unified by rustc), [`mma_fast_acc`] (fp8 inputs, Hopper fast accumulation),
//!   [`mma_scaled`] (block-scaled NVFP4/MXFP4/MXFP8, sm_100+; element pairs and block size checked by rustc);
//! - control flow: `for i in a..b` / `.step_by(s)`, `while`, `if`/`else` (device or host condition), with
//!   the assigned variables carried automatically (see [`control`]);
//! - hints: [`assume_div_by`], [`assume_bounded`], and per-kernel `#[cutile::entry(num_worker_warps = 8,
//!   occupancy = 2, num_cta_in_cga = 2, sm_100(num_worker_warps = 4))]`;
//! - foreign tile functions (tile libraries): `#[cutile::foreign]` declarations, called in `unsafe`
//!   blocks (see [`foreign`]);
//! - debugging: `print!`/`println!` with `{}` placeholders and `assert!` (device conditions are checked
//!   on the GPU; host conditions while specializing).
//!
//! Not supported inside kernels (a `compile_error!` with the span): closures stored in variables,
//! recursion, indexing (`x[i]`), `loop`, `break`/`continue`/`return`, `?`, `async`.

pub mod approx;
pub mod arith;
pub mod bitcast;
pub mod control;
pub mod debug;
pub mod elem;
pub mod foreign;
pub mod memory;
pub mod narrow;
pub mod scaled;
pub mod shape;
pub mod tensor;
pub mod tileops;
pub mod value;

pub use approx::ApproxFloat;
pub use arith::{
    DeviceCmp, DeviceLogic, Operand, ScalarOperand, fma, full, iota, scalar, select, select_scalar,
    zeros,
};
pub use bitcast::BitWidth;
pub use cutile_ir::Padding;
pub use elem::{
    BlockScaled, ElementType, Float, Fp8, HostConst, Int, MmaOperand, Numeric, bf16, f4e2m1fn,
    f8e4m3fn, f8e5m2, f8e8m0fnu, f16, tf32,
};
pub use foreign::{ForeignResults, ForeignStr, ForeignValue};
pub use memory::{
    AtomicMode, AtomicOrder, AtomicScope, GatherIndex, assume_bounded, assume_div_by,
};
pub use scaled::mma_scaled;
pub use shape::{DYN, MmaShapes, ReduceAxis, S0, S1, S2, S3, S4, SameRank, Shape, Transpose};
pub use tensor::{
    Hints, IntoIndex, Partition, Tensor, TileIndex, block_id, block_id_x, join_tokens, new_token,
    num_blocks,
};
pub use tileops::{cat, mma, mma_fast_acc};
pub use value::{Carry, MAX_TILE_ELEMENTS, Scalar, Tile, Token};
