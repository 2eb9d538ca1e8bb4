//! Compiling bytecode to a cubin: the request (arch, options, libraries, time limit), the run in a
//! private directory, the mapping of exit codes and `error: ` lines to typed errors, and keeping the
//! input of a failed compile together with a command that reproduces it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::arch::{GpuArch, HostArch};
use super::error::{ExitKind, ToolFailure, ToolTimeout, ToolchainError};
use super::process::{
    Finished, RunOutcome, error_messages, exit_kind, reproduce_command, run_with_timeout,
    tool_command,
};
use super::tileiras::Tileiras;
use super::version::bytecode_header_version;

/// Default limit for one compile. Large kernels take seconds on a 2-core machine (toolchain.md §2.2).
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// A preview feature of tileiras (`--preview=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PreviewFeature {
    /// SIMT content: foreign function declarations and calls, tile libraries.
    Simt,
}

impl PreviewFeature {
    pub const fn name(self) -> &'static str {
        match self {
            PreviewFeature::Simt => "simt",
        }
    }
}

/// Everything that decides how one bytecode module is compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileRequest {
    pub arch: GpuArch,
    /// 0..=3 (tileiras's default is 3).
    pub opt_level: u8,
    /// `--lineinfo`.
    pub line_info: bool,
    /// `--device-debug` (tileiras requires `opt_level == 0` with it).
    pub device_debug: bool,
    /// ISA of the cubin's embedded host callbacks.
    pub host_arch: HostArch,
    /// `--preview=` features; `Simt` is needed for preview bytecode and libraries.
    pub preview: Vec<PreviewFeature>,
    /// Tile libraries (`-l`), in order.
    pub libraries: Vec<PathBuf>,
    /// The run is killed after this long.
    pub timeout: Duration,
}

impl CompileRequest {
    /// `-O3`, no debug info, native host, no preview, no libraries, the default timeout.
    pub fn new(arch: GpuArch) -> CompileRequest {
        CompileRequest {
            arch,
            opt_level: 3,
            line_info: false,
            device_debug: false,
            host_arch: HostArch::native(),
            preview: Vec::new(),
            libraries: Vec::new(),
            timeout: DEFAULT_COMPILE_TIMEOUT,
        }
    }

    /// The tileiras options this request stands for (no input or output), in a fixed order; they
    /// identify the compile for caching. Library paths are made absolute because tileiras runs in a
    /// private directory.
    pub fn option_args(&self) -> Result<Vec<OsString>, ToolchainError> {
        if self.opt_level > 3 {
            return Err(ToolchainError::InvalidRequest(format!(
                "optimisation level {} is out of range; tileiras accepts 0 to 3",
                self.opt_level
            )));
        }
        let mut args: Vec<OsString> = vec![
            format!("--gpu-name={}", self.arch.name()).into(),
            format!("--opt-level={}", self.opt_level).into(),
            format!("--host-arch={}", self.host_arch.name()).into(),
        ];
        if self.line_info {
            args.push("--lineinfo".into());
        }
        if self.device_debug {
            args.push("--device-debug".into());
        }
        let mut preview = self.preview.clone();
        preview.sort();
        preview.dedup();
        if !preview.is_empty() {
            let names: Vec<&str> = preview.iter().map(|p| p.name()).collect();
            args.push(format!("--preview={}", names.join(",")).into());
        }
        for lib in &self.libraries {
            let abs = std::path::absolute(lib).map_err(|e| {
                ToolchainError::io(format!("resolve library path {}", lib.display()), e)
            })?;
            args.push("-l".into());
            args.push(abs.into_os_string());
        }
        Ok(args)
    }
}

/// A compiled module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cubin {
    /// The CUDA ELF image, ready for `cuModuleLoadData`.
    pub bytes: Vec<u8>,
    /// The architecture it was compiled for (runs only on that exact CC when arch-specific).
    pub arch: GpuArch,
    /// Wall time of the tileiras run (including its ptxas child).
    pub elapsed: Duration,
    /// Whatever tileiras printed to stderr on success (warnings, remarks); usually empty.
    pub diagnostics: String,
}

const EM_CUDA: u16 = 190;

impl Cubin {
    /// The SM number recorded in the ELF header (bits 8..16 of `e_flags`, e.g. 90 for sm_90a), if
    /// this is a 64-bit CUDA ELF.
    pub fn elf_sm(&self) -> Option<u32> {
        check_cuda_elf(&self.bytes).ok()?;
        let flags = self.bytes.get(48..52)?;
        let flags = u32::from_le_bytes([flags[0], flags[1], flags[2], flags[3]]);
        Some((flags >> 8) & 0xff)
    }
}

/// Ok when `bytes` start like a 64-bit little-endian CUDA ELF.
pub(crate) fn check_cuda_elf(bytes: &[u8]) -> Result<(), String> {
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Err(format!("not an ELF file ({} bytes)", bytes.len()));
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF".into());
    }
    match bytes.get(18..20) {
        Some(m) if u16::from_le_bytes([m[0], m[1]]) == EM_CUDA => Ok(()),
        Some(m) => Err(format!(
            "ELF machine {} is not EM_CUDA ({EM_CUDA})",
            u16::from_le_bytes([m[0], m[1]])
        )),
        None => Err("truncated ELF header".into()),
    }
}

/// Stores the input of a failed run under `$TMPDIR/cutile-failed/<hash>.tilebc` (content-addressed,
/// so repeated failures of one module share a file). `None` if it cannot be written.
pub(crate) fn keep_failed_input(bytecode: &[u8]) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join("cutile-failed");
    std::fs::create_dir_all(&dir).ok()?;
    let hash = blake3::hash(bytecode).to_hex();
    let path = dir.join(format!("{}.tilebc", &hash.as_str()[..16]));
    if std::fs::read(&path).ok().as_deref() == Some(bytecode) {
        return Some(path);
    }
    // Write then rename, so a concurrent reader never sees a half-written file.
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).ok()?;
    std::io::Write::write_all(&mut tmp, bytecode).ok()?;
    tmp.persist(&path).ok()?;
    Some(path)
}

/// A private working directory for one run (also its TMPDIR); removed when dropped.
pub(crate) fn private_workdir() -> Result<tempfile::TempDir, ToolchainError> {
    tempfile::Builder::new()
        .prefix("cutile-tileiras-")
        .tempdir()
        .map_err(|e| ToolchainError::io("create a private temporary directory for tileiras", e))
}

/// The failure record of a finished, unsuccessful run.
pub(crate) fn tool_failure(
    tool: &Path,
    run: &Finished,
    kept_input: Option<PathBuf>,
    reproduce: String,
) -> ToolFailure {
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    ToolFailure {
        tool: tool.to_owned(),
        exit: exit_kind(&run.status),
        messages: error_messages(&stderr),
        stderr,
        kept_input,
        reproduce,
    }
}

/// Maps a tileiras failure to its variant by exit code (toolchain.md §5.3).
pub(crate) fn classify(failure: ToolFailure) -> ToolchainError {
    let f = Box::new(failure);
    match f.exit {
        ExitKind::Code(1) => ToolchainError::BadOption(f),
        ExitKind::Code(2) => ToolchainError::InvalidOptionCombination(f),
        ExitKind::Code(3) => ToolchainError::InvalidBytecode(f),
        ExitKind::Code(5) => ToolchainError::BackendFailure(f),
        _ => ToolchainError::ToolFailed(f),
    }
}

impl Tileiras {
    /// Compiles one bytecode module into a cubin for `request.arch`.
    ///
    /// tileiras runs with `CUDA_HOME`, `CUDA_PATH` and `CUDA_ROOT` removed, in a private directory
    /// that is also its `TMPDIR`, and is killed after `request.timeout`. On failure the bytecode is
    /// kept under `$TMPDIR/cutile-failed/` and the error carries a command reproducing the run.
    pub fn compile(
        &self,
        bytecode: &[u8],
        request: &CompileRequest,
    ) -> Result<Cubin, ToolchainError> {
        self.check_arch(request.arch)?;
        if let Some(v) = bytecode_header_version(bytecode)
            && !self.reads_bytecode_version(v)
        {
            return Err(ToolchainError::BytecodeVersionUnsupported {
                found: v,
                tool_version: self.version(),
                supported: self.bytecode_versions().to_vec(),
            });
        }
        let options = request.option_args()?;
        let work = private_workdir()?;
        let input = work.path().join("input.tilebc");
        let output = work.path().join("output.cubin");
        std::fs::write(&input, bytecode)
            .map_err(|e| ToolchainError::io(format!("write {}", input.display()), e))?;

        let args_for = |out: &Path, inp: &Path| -> Vec<OsString> {
            let mut a = options.clone();
            a.push("-o".into());
            a.push(out.as_os_str().to_owned());
            a.push(inp.as_os_str().to_owned());
            a
        };
        // The reproduction refers to the kept copy, since the private directory is deleted.
        let reproduce = |kept: &Option<PathBuf>| {
            let inp = kept.clone().unwrap_or_else(|| input.clone());
            reproduce_command(self.path(), &args_for(&inp.with_extension("cubin"), &inp))
        };

        let mut cmd = tool_command(self.path(), work.path());
        cmd.args(args_for(&output, &input));
        let outcome = run_with_timeout(&mut cmd, request.timeout).map_err(|source| {
            ToolchainError::Spawn {
                tool: self.path().to_owned(),
                source,
            }
        })?;
        let run = match outcome {
            RunOutcome::TimedOut { stderr } => {
                let kept = keep_failed_input(bytecode);
                return Err(ToolchainError::Timeout(Box::new(ToolTimeout {
                    tool: self.path().to_owned(),
                    limit: request.timeout,
                    reproduce: reproduce(&kept),
                    kept_input: kept,
                    stderr: String::from_utf8_lossy(&stderr).into_owned(),
                })));
            }
            RunOutcome::Finished(run) => run,
        };
        if !run.status.success() {
            let kept = keep_failed_input(bytecode);
            let repro = reproduce(&kept);
            return Err(classify(tool_failure(self.path(), &run, kept, repro)));
        }

        let malformed = |detail: String| {
            let kept = keep_failed_input(bytecode);
            ToolchainError::MalformedOutput {
                tool: self.path().to_owned(),
                detail,
                reproduce: reproduce(&kept),
            }
        };
        let bytes = std::fs::read(&output)
            .map_err(|e| malformed(format!("no output file {}: {e}", output.display())))?;
        check_cuda_elf(&bytes).map_err(|d| malformed(format!("the output is {d}")))?;
        Ok(Cubin {
            bytes,
            arch: request.arch,
            elapsed: run.elapsed,
            diagnostics: String::from_utf8_lossy(&run.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_args_are_fixed_and_checked() {
        let mut r = CompileRequest::new(GpuArch::Sm90);
        r.host_arch = HostArch::X86_64;
        r.preview = vec![PreviewFeature::Simt, PreviewFeature::Simt];
        r.line_info = true;
        let args: Vec<String> = r
            .option_args()
            .map(|a| a.iter().map(|s| s.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        assert_eq!(
            args,
            [
                "--gpu-name=sm_90",
                "--opt-level=3",
                "--host-arch=x86_64",
                "--lineinfo",
                "--preview=simt"
            ]
        );
        r.opt_level = 4;
        assert!(
            matches!(r.option_args(), Err(ToolchainError::InvalidRequest(m)) if m.contains("0 to 3"))
        );
    }

    #[test]
    fn elf_checks() {
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[18] = 190;
        elf[48..52].copy_from_slice(&0x0600_5a04u32.to_le_bytes());
        assert!(check_cuda_elf(&elf).is_ok());
        let c = Cubin {
            bytes: elf.clone(),
            arch: GpuArch::Sm90,
            elapsed: Duration::ZERO,
            diagnostics: String::new(),
        };
        assert_eq!(c.elf_sm(), Some(90));
        elf[18] = 62;
        assert!(check_cuda_elf(&elf).is_err_and(|e| e.contains("EM_CUDA")));
        assert!(check_cuda_elf(b"TileIR").is_err());
    }

    #[test]
    fn keeps_inputs_by_content() {
        let a = keep_failed_input(b"some bytes for the keep test");
        let b = keep_failed_input(b"some bytes for the keep test");
        assert!(a.is_some());
        assert_eq!(a, b);
        assert_eq!(
            a.and_then(|p| std::fs::read(p).ok()).as_deref(),
            Some(&b"some bytes for the keep test"[..])
        );
    }
}
