//! Disassembling to text: bytecode with tileirdisasm (round-trip tests and diagnostics) and cubins
//! with nvdisasm (the SASS tileiras produced, for tests that check what the compiled kernel does).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::compile::{classify, keep_failed_input, private_workdir, tool_failure};
use super::error::{ToolFailure, ToolTimeout, ToolchainError};
use super::process::{RunOutcome, reproduce_command, run_with_timeout, tool_command};
use super::tileiras::Tileiras;

/// tileirdisasm and nvdisasm take milliseconds to seconds; this only guards against a hang.
const DISASM_TIMEOUT: Duration = Duration::from_secs(60);

impl Tileiras {
    /// The `cuda_tile` text of `bytecode` as tileirdisasm prints it (no module wrapper).
    /// `preview` adds `--preview=simt`, needed for bytecode with the preview flag.
    /// Unreadable bytecode gives [`ToolchainError::InvalidBytecode`] with the input kept.
    pub fn disassemble(&self, bytecode: &[u8], preview: bool) -> Result<String, ToolchainError> {
        let disasm = self
            .tileirdisasm()
            .ok_or_else(|| ToolchainError::MissingTileirdisasm {
                looked: self.info().bin_dir.join("tileirdisasm"),
            })?;
        let args = |inp: &Path| -> Vec<OsString> {
            let mut a: Vec<OsString> = Vec::new();
            if preview {
                a.push("--preview=simt".into());
            }
            a.push(inp.as_os_str().to_owned());
            a
        };
        // tileirdisasm uses exit 3 for bad input, like tileiras; other codes are unexpected.
        run_to_text(
            disasm,
            bytecode,
            "input.tilebc",
            &args,
            |failure| match classify(failure) {
                e @ ToolchainError::InvalidBytecode(_) => e,
                ToolchainError::BadOption(f)
                | ToolchainError::InvalidOptionCombination(f)
                | ToolchainError::BackendFailure(f) => ToolchainError::ToolFailed(f),
                other => other,
            },
        )
    }

    /// The SASS of `cubin` as `nvdisasm -c` prints it (code sections only, one instruction per line
    /// after its `/*offset*/`). A cubin nvdisasm cannot read gives [`ToolchainError::ToolFailed`]
    /// with the input kept and a reproduction command.
    pub fn sass(&self, cubin: &[u8]) -> Result<String, ToolchainError> {
        let nvdisasm = self
            .nvdisasm()
            .ok_or_else(|| ToolchainError::MissingNvdisasm {
                looked: self.info().bin_dir.join("nvdisasm"),
            })?;
        let args = |inp: &Path| -> Vec<OsString> { vec!["-c".into(), inp.into()] };
        run_to_text(nvdisasm, cubin, "input.cubin", &args, |failure| {
            ToolchainError::ToolFailed(Box::new(failure))
        })
    }
}

/// Runs `tool` with `args` on `input`, written as `file` in a private directory, and returns its
/// stdout. A timeout or failure keeps the input and names a reproduction command; `failed` types a
/// finished, unsuccessful run.
fn run_to_text(
    tool: &Path,
    input: &[u8],
    file: &str,
    args: &dyn Fn(&Path) -> Vec<OsString>,
    failed: impl FnOnce(ToolFailure) -> ToolchainError,
) -> Result<String, ToolchainError> {
    let work = private_workdir()?;
    let path = work.path().join(file);
    std::fs::write(&path, input)
        .map_err(|e| ToolchainError::io(format!("write {}", path.display()), e))?;
    let reproduce = |kept: &Option<std::path::PathBuf>| {
        reproduce_command(tool, &args(kept.as_deref().unwrap_or(&path)))
    };
    let mut cmd = tool_command(tool, work.path());
    cmd.args(args(&path));
    let outcome =
        run_with_timeout(&mut cmd, DISASM_TIMEOUT).map_err(|source| ToolchainError::Spawn {
            tool: tool.to_owned(),
            source,
        })?;
    match outcome {
        RunOutcome::TimedOut { stderr } => {
            let kept = keep_failed_input(input);
            Err(ToolchainError::Timeout(Box::new(ToolTimeout {
                tool: tool.to_owned(),
                limit: DISASM_TIMEOUT,
                reproduce: reproduce(&kept),
                kept_input: kept,
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            })))
        }
        RunOutcome::Finished(run) if run.status.success() => {
            String::from_utf8(run.stdout).map_err(|e| ToolchainError::MalformedOutput {
                tool: tool.to_owned(),
                detail: format!("the text is not UTF-8: {e}"),
                reproduce: reproduce(&None),
            })
        }
        RunOutcome::Finished(run) => {
            let kept = keep_failed_input(input);
            let repro = reproduce(&kept);
            Err(failed(tool_failure(tool, &run, kept, repro)))
        }
    }
}
