//! Tensor parallelism over NCCL for the catalog's ops (issue 16).
//!
//! - [`shard`]: the sharding plan (which q / kv heads and which FFN columns each rank owns) and the
//!   host-side weight slicing for column- and row-parallel layers;
//! - [`reference`]: the transformer block on the CPU, unsharded and per rank (row-parallel partials);
//! - [`nccl`]: the communicator over cudarc's NCCL bindings (library probe, typed errors, all-reduce,
//!   the bus-bandwidth measurement);
//! - [`block`]: the tensor-parallel block on N GPUs, one thread per GPU (`fused_qkv`, `attention`,
//!   `gemm`, `silu_and_mul`, `add`, NCCL all-reduce), its timing and the compute/communication split;
//! - [`report`]: the markdown / JSON tables (time per layer, scaling efficiency, errors, bus bandwidth).
//!
//! Everything builds without a GPU or libnccl (cudarc loads both at run time); what needs them
//! returns [`TpError`] instead of panicking.

pub mod block;
pub mod nccl;
pub mod reference;
pub mod report;
pub mod shard;
pub mod sweep;

/// Every failure of this crate.
#[derive(Debug, thiserror::Error)]
pub enum TpError {
    /// The sharding does not fit the model (heads or FFN width not divisible by the ranks …).
    #[error("sharding over {ranks} rank(s): {what}")]
    Shard { ranks: usize, what: String },
    /// libnccl could not be loaded.
    #[error("NCCL library not found (cudarc looks for {searched:?} on the loader path). {hint}")]
    NcclMissing { searched: Vec<String>, hint: String },
    /// An NCCL call failed.
    #[error("NCCL {call} failed: {code}")]
    Nccl { call: &'static str, code: String },
    /// A CUDA driver call made here (streams, events) failed.
    #[error("CUDA {call} failed: {what}")]
    Driver { call: &'static str, what: String },
    /// Fewer devices than ranks.
    #[error("{ranks} rank(s) need {ranks} GPU(s); {have} visible")]
    NotEnoughDevices { ranks: usize, have: usize },
    /// A worker thread panicked or a rank failed.
    #[error("rank {rank}: {what}")]
    Rank { rank: usize, what: String },
    #[error(transparent)]
    Op(#[from] cutile_kernels::op::OpError),
    #[error(transparent)]
    Runtime(#[from] cutile::runtime::RuntimeError),
    #[error(transparent)]
    Launch(#[from] cutile::launch::LaunchError),
}

pub type Result<T> = std::result::Result<T, TpError>;

pub use shard::{BlockConfig, ShardPlan};
