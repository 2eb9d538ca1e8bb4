//! The tileiras toolchain: finding, validating and running NVIDIA's Tile IR compiler (and the
//! bytecode and cubin disassemblers), and installing it from PyPI.
//!
//! - [`Tileiras::discover`] searches `CUTILE_TILEIRAS`, the installed prefix
//!   (`$CUTILE_TOOLCHAIN_DIR` or `~/.cache/cutile/toolchain/13.5.37`), `CUDA_TOOLKIT_PATH`/bin,
//!   `/usr/local/cuda/bin`, `/opt/cuda/bin` and `PATH`, then validates the find once per process.
//! - [`Tileiras::compile`] turns bytecode into a [`Cubin`] for one [`GpuArch`]; failures are typed
//!   by exit code and carry the kept input and a reproduction command.
//! - [`Tileiras::disassemble`] and [`Tileiras::create_tile_library`] wrap tileirdisasm and the
//!   `.tilelib` packager; [`Tileiras::sass`] runs nvdisasm on a cubin (what tileiras made of a
//!   kernel, readable on a machine without a GPU).
//! - [`install::install`] puts the four wheels into the prefix (used by `cargo xtask toolchain`).
//!
//! tileiras always runs with `CUDA_HOME`, `CUDA_PATH` and `CUDA_ROOT` removed: they redirect its
//! libNVVM search to another toolkit and break every compile (toolchain.md §5.1).

mod arch;
mod compile;
mod disasm;
mod discover;
mod error;
pub mod install;
mod layout;
mod process;
mod sample;
mod searched;
mod tileiras;
mod tilelib;
mod version;

pub use arch::{GpuArch, HostArch, UnsupportedArch};
pub use compile::{CompileRequest, Cubin, DEFAULT_COMPILE_TIMEOUT, PreviewFeature};
pub use discover::{
    ENV_TILEIRAS, Located, STANDARD_CUDA_DIRS, SearchEnv, SearchSource, SearchedLocation, locate,
};
pub use error::{ExitKind, ToolFailure, ToolTimeout, ToolchainError};
pub use layout::{
    ENV_TOOLCHAIN_DIR, MARKER_FILE, ToolchainLayout, default_install_dir, install_dir_from,
};
pub use process::CLEARED_ENV;
pub use sample::MINIMAL_MODULE;
pub use tileiras::{Tileiras, ToolchainInfo};
pub use version::TileirasVersion;

/// The toolchain release this crate installs and is tested with.
pub const TILEIRAS_VERSION: &str = "13.5.37";

/// PyPI wheel providing tileiras and tileirdisasm.
pub const WHEEL_TILEIRAS: &str = "nvidia-cuda-tileiras";
/// PyPI wheel providing libNVVM.
pub const WHEEL_NVVM: &str = "nvidia-nvvm";
/// PyPI wheel providing ptxas.
pub const WHEEL_NVCC: &str = "nvidia-cuda-nvcc";
/// PyPI wheel providing nvdisasm (cubin → SASS text; inspection only, tileiras does not need it).
pub const WHEEL_NVDISASM: &str = "nvidia-cuda-nvdisasm";
/// The four wheels, all at [`TILEIRAS_VERSION`], installed into one prefix.
pub const WHEELS: [&str; 4] = [WHEEL_TILEIRAS, WHEEL_NVVM, WHEEL_NVCC, WHEEL_NVDISASM];
