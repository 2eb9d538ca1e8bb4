//! Disassembling bytecode to text with tileirdisasm (used by round-trip tests and diagnostics).

use std::ffi::OsString;
use std::time::Duration;

use super::compile::{classify, keep_failed_input, private_workdir, tool_failure};
use super::error::{ToolTimeout, ToolchainError};
use super::process::{RunOutcome, reproduce_command, run_with_timeout, tool_command};
use super::tileiras::Tileiras;

/// tileirdisasm takes milliseconds; this only guards against a hang.
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
        let work = private_workdir()?;
        let input = work.path().join("input.tilebc");
        std::fs::write(&input, bytecode)
            .map_err(|e| ToolchainError::io(format!("write {}", input.display()), e))?;
        let args_for = |inp: &std::path::Path| -> Vec<OsString> {
            let mut a: Vec<OsString> = Vec::new();
            if preview {
                a.push("--preview=simt".into());
            }
            a.push(inp.as_os_str().to_owned());
            a
        };
        let reproduce = |kept: &Option<std::path::PathBuf>| {
            reproduce_command(disasm, &args_for(kept.as_deref().unwrap_or(&input)))
        };
        let mut cmd = tool_command(disasm, work.path());
        cmd.args(args_for(&input));
        let outcome =
            run_with_timeout(&mut cmd, DISASM_TIMEOUT).map_err(|source| ToolchainError::Spawn {
                tool: disasm.to_owned(),
                source,
            })?;
        match outcome {
            RunOutcome::TimedOut { stderr } => {
                let kept = keep_failed_input(bytecode);
                Err(ToolchainError::Timeout(Box::new(ToolTimeout {
                    tool: disasm.to_owned(),
                    limit: DISASM_TIMEOUT,
                    reproduce: reproduce(&kept),
                    kept_input: kept,
                    stderr: String::from_utf8_lossy(&stderr).into_owned(),
                })))
            }
            RunOutcome::Finished(run) if run.status.success() => String::from_utf8(run.stdout)
                .map_err(|e| ToolchainError::MalformedOutput {
                    tool: disasm.to_owned(),
                    detail: format!("the text is not UTF-8: {e}"),
                    reproduce: reproduce(&None),
                }),
            RunOutcome::Finished(run) => {
                let kept = keep_failed_input(bytecode);
                let repro = reproduce(&kept);
                let failure = tool_failure(disasm, &run, kept, repro);
                // tileirdisasm uses exit 3 for bad input, like tileiras; other codes are unexpected.
                Err(match classify(failure) {
                    e @ ToolchainError::InvalidBytecode(_) => e,
                    ToolchainError::BadOption(f)
                    | ToolchainError::InvalidOptionCombination(f)
                    | ToolchainError::BackendFailure(f) => ToolchainError::ToolFailed(f),
                    other => other,
                })
            }
        }
    }
}
