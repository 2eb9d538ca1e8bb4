//! The toolchain driver's error type: every way finding, validating or running tileiras can fail,
//! each naming the cause and the fix.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use super::arch::{GpuArch, UnsupportedArch, list_archs};
use super::searched::SearchedLocation;
use super::version::TileirasVersion;
use super::{TILEIRAS_VERSION, WHEEL_NVCC, WHEEL_NVDISASM, WHEEL_NVVM, WHEEL_TILEIRAS};

/// How a tool process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with this status code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl fmt::Display for ExitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exit code {c}"),
            ExitKind::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// A tool run that ended unsuccessfully, with what is needed to reproduce it by hand.
#[derive(Debug, Clone)]
pub struct ToolFailure {
    /// The executable that ran.
    pub tool: PathBuf,
    /// How it ended.
    pub exit: ExitKind,
    /// The tool's `error: ` lines (prefix removed); when it printed none, its last stderr lines.
    pub messages: Vec<String>,
    /// Its whole stderr.
    pub stderr: String,
    /// Where the input bytecode was kept for reproduction (compile and disassemble failures).
    pub kept_input: Option<PathBuf>,
    /// A shell command that reruns the tool the same way (environment cleaned as the driver does).
    pub reproduce: String,
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .tool
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.tool.display().to_string());
        write!(f, "{name} failed ({})", self.exit)?;
        match self.messages.as_slice() {
            [] => write!(f, " with no message")?,
            [one] => write!(f, ": {one}")?,
            many => {
                write!(f, ":")?;
                for m in many {
                    write!(f, "\n    {m}")?;
                }
            }
        }
        if let Some(k) = &self.kept_input {
            write!(f, "\n  input kept at: {}", k.display())?;
        }
        write!(f, "\n  reproduce with: {}", self.reproduce)
    }
}

/// A tool run killed because it exceeded its time limit.
#[derive(Debug, Clone)]
pub struct ToolTimeout {
    pub tool: PathBuf,
    pub limit: Duration,
    pub kept_input: Option<PathBuf>,
    pub reproduce: String,
    /// Stderr printed before it was killed.
    pub stderr: String,
}

impl fmt::Display for ToolTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} did not finish within {:.1} s and was killed; raise the timeout in the compile request if the kernel is large",
            self.tool.display(),
            self.limit.as_secs_f64()
        )?;
        if let Some(k) = &self.kept_input {
            write!(f, "\n  input kept at: {}", k.display())?;
        }
        write!(f, "\n  reproduce with: {}", self.reproduce)
    }
}

fn install_hint() -> String {
    format!(
        "run `cargo xtask toolchain` (installs tileiras {v} into ~/.cache/cutile/toolchain/{v}), or \
         `python3 -m pip install --no-deps --target <prefix> {t}=={v} {n}=={v} {c}=={v}` (all three \
         wheels into one prefix, then set CUTILE_TOOLCHAIN_DIR=<prefix>), or set \
         CUTILE_TILEIRAS=/path/to/tileiras",
        v = TILEIRAS_VERSION,
        t = WHEEL_TILEIRAS,
        n = WHEEL_NVVM,
        c = WHEEL_NVCC
    )
}

fn list_searched(searched: &[SearchedLocation]) -> String {
    searched.iter().map(|s| format!("\n  - {s}")).collect()
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_versions(v: &[TileirasVersion]) -> String {
    v.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Everything that can go wrong finding, validating or running tileiras and tileirdisasm.
#[derive(Debug, Error)]
pub enum ToolchainError {
    /// No tileiras anywhere in the search order.
    #[error("tileiras not found. Looked at:{}\nFix: {}", list_searched(.searched), install_hint())]
    NotFound { searched: Vec<SearchedLocation> },

    /// `CUTILE_TILEIRAS` is set but does not name an executable file.
    #[error("CUTILE_TILEIRAS={} {reason}; point it at the tileiras executable or unset it", .path.display())]
    EnvPathInvalid { path: PathBuf, reason: String },

    /// The tool could not be started at all.
    #[error("cannot run {}: {source}", .tool.display())]
    Spawn { tool: PathBuf, source: io::Error },

    /// A probe (`--version`, `--list-versions`, `--help`) failed or printed something unexpected.
    #[error("{} does not behave like tileiras: `{probe}` {detail}", .tool.display())]
    Probe {
        tool: PathBuf,
        probe: &'static str,
        detail: String,
    },

    /// libNVVM (wheel nvidia-nvvm) is not where tileiras looks for it.
    #[error(
        "libnvvm not found next to {}: looked at {}. tileiras dlopens it from there; install the \
         `{}=={}` wheel into the same prefix as tileiras",
        .bin_dir.display(), list_paths(.looked), WHEEL_NVVM, TILEIRAS_VERSION
    )]
    MissingLibnvvm {
        bin_dir: PathBuf,
        looked: Vec<PathBuf>,
    },

    /// ptxas (wheel nvidia-cuda-nvcc) is neither next to tileiras nor on PATH.
    #[error(
        "ptxas not found: looked at {} and on PATH. tileiras runs it to assemble PTX; install the \
         `{}=={}` wheel into the same prefix as tileiras",
        .looked.display(), WHEEL_NVCC, TILEIRAS_VERSION
    )]
    MissingPtxas { looked: PathBuf },

    /// tileirdisasm (wheel nvidia-cuda-tileiras) is not next to tileiras.
    #[error(
        "tileirdisasm not found at {}; it ships in the `{}=={}` wheel next to tileiras",
        .looked.display(), WHEEL_TILEIRAS, TILEIRAS_VERSION
    )]
    MissingTileirdisasm { looked: PathBuf },

    /// nvdisasm (wheel nvidia-cuda-nvdisasm) is not next to tileiras.
    #[error(
        "nvdisasm not found at {}; install the `{}=={}` wheel into the same prefix as tileiras \
         (`cargo xtask toolchain` does)",
        .looked.display(), WHEEL_NVDISASM, TILEIRAS_VERSION
    )]
    MissingNvdisasm { looked: PathBuf },

    /// The architecture text is not one tileiras 13.5 knows.
    #[error(transparent)]
    UnsupportedArch(#[from] UnsupportedArch),

    /// The architecture is in our table but the tileiras found does not list it in `--help`.
    #[error(
        "{arch} is not accepted by {} (version {version}); it accepts {}. Use one of those or a \
         tileiras that supports {arch}",
        .tileiras.display(), list_archs(.accepted.iter().copied())
    )]
    ArchNotAccepted {
        arch: GpuArch,
        tileiras: PathBuf,
        version: TileirasVersion,
        accepted: Vec<GpuArch>,
    },

    /// The bytecode header's version is not one tileiras reads (`--list-versions`).
    #[error(
        "bytecode version {found} is not readable by tileiras {tool_version}, which reads {}; emit \
         one of those versions or use a tileiras that reads {found}",
        list_versions(.supported)
    )]
    BytecodeVersionUnsupported {
        found: TileirasVersion,
        tool_version: TileirasVersion,
        supported: Vec<TileirasVersion>,
    },

    /// The request itself is invalid (e.g. an optimisation level above 3).
    #[error("invalid compile request: {0}")]
    InvalidRequest(String),

    /// Exit 1: bad option value, unknown preview feature, or unreadable input.
    #[error("tileiras rejected an option or input: {0}")]
    BadOption(Box<ToolFailure>),

    /// Exit 2: an invalid combination of options (e.g. `-g` without `-O0`).
    #[error("invalid option combination: {0}")]
    InvalidOptionCombination(Box<ToolFailure>),

    /// Exit 3: the bytecode could not be read or failed verification.
    #[error("bytecode rejected: {0}")]
    InvalidBytecode(Box<ToolFailure>),

    /// Exit 5: back-end or link failure (libNVVM/ptxas failure, unresolved extern, `-l` problems).
    #[error(
        "back-end failure: {0}\n  hint: a bare 'failed to compile Tile IR program' usually means \
         libnvvm or ptxas of another CUDA version was picked up, or an extern function is unresolved"
    )]
    BackendFailure(Box<ToolFailure>),

    /// Any other exit code, or death by a signal.
    #[error("unexpected failure: {0}")]
    ToolFailed(Box<ToolFailure>),

    /// `--preview-create-tile-lib` refused the inputs.
    #[error("tile library not created: {0}")]
    TileLibraryRefused(Box<ToolFailure>),

    /// The tool exceeded its time limit and was killed.
    #[error("{0}")]
    Timeout(Box<ToolTimeout>),

    /// The tool reported success but its output is missing or not what it should be.
    #[error("{} succeeded but its output is unusable: {detail}\n  reproduce with: {reproduce}", .tool.display())]
    MalformedOutput {
        tool: PathBuf,
        detail: String,
        reproduce: String,
    },

    /// A filesystem operation of the driver itself failed.
    #[error("{context}: {source}")]
    Io { context: String, source: io::Error },
}

impl ToolchainError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> ToolchainError {
        ToolchainError::Io {
            context: context.into(),
            source,
        }
    }

    /// The failed run's details, for variants that carry one.
    pub fn tool_failure(&self) -> Option<&ToolFailure> {
        match self {
            ToolchainError::BadOption(f)
            | ToolchainError::InvalidOptionCombination(f)
            | ToolchainError::InvalidBytecode(f)
            | ToolchainError::BackendFailure(f)
            | ToolchainError::ToolFailed(f)
            | ToolchainError::TileLibraryRefused(f) => Some(f),
            _ => None,
        }
    }

    /// Where the input bytecode was kept, for failures that keep it.
    pub fn kept_input(&self) -> Option<&std::path::Path> {
        match self {
            ToolchainError::Timeout(t) => t.kept_input.as_deref(),
            other => other.tool_failure()?.kept_input.as_deref(),
        }
    }
}
