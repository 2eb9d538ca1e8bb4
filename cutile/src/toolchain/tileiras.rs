//! The validated tileiras handle: probes a found executable once per process (version, readable
//! bytecode versions, accepted GPU names, libNVVM, ptxas, tileirdisasm) and caches the result.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use super::arch::GpuArch;
use super::discover::{Located, SearchEnv, SearchSource, locate, unusable_reason};
use super::error::ToolchainError;
use super::process::{RunOutcome, run_with_timeout, tool_command};
use super::version::{
    TileirasVersion, parse_help_gpu_names, parse_list_versions, parse_tool_version,
};

/// Limit for each probe run; they normally take milliseconds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// What validation learned about one tileiras executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolchainInfo {
    /// The executable, as found.
    pub tileiras: PathBuf,
    /// Its directory with symlinks resolved (tileiras resolves its own via /proc/self/exe).
    pub bin_dir: PathBuf,
    /// Parsed from `--version`, e.g. 13.5.37.
    pub version: TileirasVersion,
    /// The whole `--version` output.
    pub version_text: String,
    /// Bytecode versions it reads (`--list-versions`), ascending.
    pub bytecode_versions: Vec<TileirasVersion>,
    /// GPU names its `--help` lists (our table when the help lists none we can parse).
    pub gpu_archs: Vec<GpuArch>,
    /// The libNVVM it will load.
    pub libnvvm: PathBuf,
    /// The ptxas it will run.
    pub ptxas: PathBuf,
    /// tileirdisasm next to it, if present.
    pub tileirdisasm: Option<PathBuf>,
    /// nvdisasm next to it, if present (wheel nvidia-cuda-nvdisasm; [`Tileiras::sass`]).
    pub nvdisasm: Option<PathBuf>,
}

/// A found and validated tileiras. Cheap to clone; share one per process.
#[derive(Debug, Clone)]
pub struct Tileiras {
    info: Arc<ToolchainInfo>,
    source: Option<SearchSource>,
}

impl Tileiras {
    /// Finds tileiras through the search order over this process's environment and validates it.
    pub fn discover() -> Result<Tileiras, ToolchainError> {
        Tileiras::discover_in(&SearchEnv::from_process())
    }

    /// Finds tileiras through the search order over `env` and validates it.
    pub fn discover_in(env: &SearchEnv) -> Result<Tileiras, ToolchainError> {
        let Located {
            tileiras, source, ..
        } = locate(env)?;
        let mut t = Tileiras::at(tileiras)?;
        t.source = Some(source);
        Ok(t)
    }

    /// Validates the tileiras at `path` (no search).
    pub fn at(path: impl AsRef<Path>) -> Result<Tileiras, ToolchainError> {
        Ok(Tileiras {
            info: validate_cached(path.as_ref())?,
            source: None,
        })
    }

    /// The executable.
    pub fn path(&self) -> &Path {
        &self.info.tileiras
    }

    /// Everything validation found.
    pub fn info(&self) -> &ToolchainInfo {
        &self.info
    }

    /// The tool version, e.g. 13.5.37.
    pub fn version(&self) -> TileirasVersion {
        self.info.version
    }

    /// Bytecode versions this tileiras reads.
    pub fn bytecode_versions(&self) -> &[TileirasVersion] {
        &self.info.bytecode_versions
    }

    /// Architectures this tileiras accepts.
    pub fn supported_archs(&self) -> &[GpuArch] {
        &self.info.gpu_archs
    }

    /// tileirdisasm next to tileiras, if present.
    pub fn tileirdisasm(&self) -> Option<&Path> {
        self.info.tileirdisasm.as_deref()
    }

    /// nvdisasm next to tileiras, if present.
    pub fn nvdisasm(&self) -> Option<&Path> {
        self.info.nvdisasm.as_deref()
    }

    /// The search rule that found it (`None` when built with [`Tileiras::at`]).
    pub fn source(&self) -> Option<SearchSource> {
        self.source
    }

    /// Ok when this tileiras accepts `arch` as `--gpu-name`.
    pub fn check_arch(&self, arch: GpuArch) -> Result<(), ToolchainError> {
        if self.info.gpu_archs.contains(&arch) {
            Ok(())
        } else {
            Err(ToolchainError::ArchNotAccepted {
                arch,
                tileiras: self.info.tileiras.clone(),
                version: self.info.version,
                accepted: self.info.gpu_archs.clone(),
            })
        }
    }

    /// Whether this tileiras reads bytecode of version `v` (major.minor).
    pub fn reads_bytecode_version(&self, v: TileirasVersion) -> bool {
        self.info
            .bytecode_versions
            .iter()
            .any(|b| b.same_release(&v))
    }
}

type CacheKey = (PathBuf, u64, Option<SystemTime>);

/// Validation results per executable. The key includes size and mtime, so an executable replaced
/// in place (a forced reinstall) is validated again.
fn validate_cached(path: &Path) -> Result<Arc<ToolchainInfo>, ToolchainError> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Arc<ToolchainInfo>>>> = OnceLock::new();
    if let Some(reason) = unusable_reason(path) {
        return Err(ToolchainError::Spawn {
            tool: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, reason),
        });
    }
    let meta = std::fs::metadata(path)
        .map_err(|e| ToolchainError::io(format!("stat {}", path.display()), e))?;
    let key = (path.to_owned(), meta.len(), meta.modified().ok());
    // Holding the lock while probing makes concurrent first uses probe once.
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(info) = cache.get(&key) {
        return Ok(Arc::clone(info));
    }
    let info = Arc::new(validate(path)?);
    cache.insert(key, Arc::clone(&info));
    Ok(info)
}

fn probe(tool: &Path, flag: &'static str) -> Result<String, ToolchainError> {
    let dir = tempfile::Builder::new()
        .prefix("cutile-probe-")
        .tempdir()
        .map_err(|e| ToolchainError::io("create a temporary directory", e))?;
    let mut cmd = tool_command(tool, dir.path());
    cmd.arg(flag);
    let outcome =
        run_with_timeout(&mut cmd, PROBE_TIMEOUT).map_err(|source| ToolchainError::Spawn {
            tool: tool.to_owned(),
            source,
        })?;
    let bad = |detail: String| ToolchainError::Probe {
        tool: tool.to_owned(),
        probe: flag,
        detail,
    };
    match outcome {
        RunOutcome::TimedOut { .. } => Err(bad(format!(
            "did not answer within {} s",
            PROBE_TIMEOUT.as_secs()
        ))),
        RunOutcome::Finished(f) if !f.status.success() => Err(bad(format!(
            "failed ({}): {}",
            f.status,
            String::from_utf8_lossy(&f.stderr).trim()
        ))),
        RunOutcome::Finished(f) => Ok(String::from_utf8_lossy(&f.stdout).into_owned()),
    }
}

fn validate(tileiras: &Path) -> Result<ToolchainInfo, ToolchainError> {
    let real = std::fs::canonicalize(tileiras)
        .map_err(|e| ToolchainError::io(format!("resolve {}", tileiras.display()), e))?;
    let bin_dir = real.parent().map(Path::to_path_buf).unwrap_or_default();

    let version_text = probe(tileiras, "--version")?;
    let version = parse_tool_version(&version_text).ok_or_else(|| ToolchainError::Probe {
        tool: tileiras.to_owned(),
        probe: "--version",
        detail: format!("printed no version number: {}", version_text.trim()),
    })?;
    let listed = probe(tileiras, "--list-versions")?;
    let bytecode_versions = parse_list_versions(&listed);
    if bytecode_versions.is_empty() {
        return Err(ToolchainError::Probe {
            tool: tileiras.to_owned(),
            probe: "--list-versions",
            detail: format!("listed no bytecode version: {}", listed.trim()),
        });
    }
    let help = probe(tileiras, "--help")?;
    let mut gpu_archs = parse_help_gpu_names(&help);
    if gpu_archs.is_empty() {
        gpu_archs = GpuArch::ALL.to_vec();
    }

    let libnvvm = find_libnvvm(&bin_dir)?;
    let ptxas = find_ptxas(&bin_dir)?;
    let disasm = bin_dir.join("tileirdisasm");
    let tileirdisasm = unusable_reason(&disasm).is_none().then_some(disasm);
    let sass = bin_dir.join("nvdisasm");
    let nvdisasm = unusable_reason(&sass).is_none().then_some(sass);

    Ok(ToolchainInfo {
        tileiras: tileiras.to_owned(),
        bin_dir,
        version,
        version_text,
        bytecode_versions,
        gpu_archs,
        libnvvm,
        ptxas,
        tileirdisasm,
        nvdisasm,
    })
}

/// Where tileiras dlopens libNVVM from, in its order (toolchain.md §5.1).
pub(crate) fn libnvvm_candidates(bin_dir: &Path) -> [PathBuf; 2] {
    let root = bin_dir.parent().unwrap_or(bin_dir);
    [
        root.join("nvvm").join("lib64").join("libnvvm.so"),
        root.join("lib").join("libnvvm.so.4"),
    ]
}

fn find_libnvvm(bin_dir: &Path) -> Result<PathBuf, ToolchainError> {
    let looked = libnvvm_candidates(bin_dir);
    match looked.iter().find(|p| p.is_file()) {
        Some(p) => Ok(p.clone()),
        None => Err(ToolchainError::MissingLibnvvm {
            bin_dir: bin_dir.to_owned(),
            looked: looked.to_vec(),
        }),
    }
}

fn find_ptxas(bin_dir: &Path) -> Result<PathBuf, ToolchainError> {
    let beside = bin_dir.join("ptxas");
    if unusable_reason(&beside).is_none() {
        return Ok(beside);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("ptxas"))
        .find(|p| unusable_reason(p).is_none())
        .ok_or(ToolchainError::MissingPtxas { looked: beside })
}
