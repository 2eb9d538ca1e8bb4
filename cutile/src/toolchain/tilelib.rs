//! Packaging a tile library (`.tilelib`) with `tileiras --preview-create-tile-lib`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::compile::{private_workdir, tool_failure};
use super::error::{ToolTimeout, ToolchainError};
use super::process::{RunOutcome, reproduce_command, run_with_timeout, tool_command};
use super::tileiras::Tileiras;

const TILELIB_TIMEOUT: Duration = Duration::from_secs(120);

fn absolute(p: &Path) -> Result<PathBuf, ToolchainError> {
    std::path::absolute(p).map_err(|e| ToolchainError::io(format!("resolve {}", p.display()), e))
}

impl Tileiras {
    /// Creates the tile library `out` from an interface bytecode file (extern declarations only)
    /// and implementation files (bytecode, cubin/LTOIR/fatbin, or a provider `.so`), in order.
    ///
    /// Runs `tileiras --preview=simt --preview-create-tile-lib --preview-interface=I
    /// --preview-implementation=F... -o out`. `out` is replaced only when tileiras succeeds. A
    /// refusal (no implementation, interface-only, cubin without bytecode, ...) is
    /// [`ToolchainError::TileLibraryRefused`] carrying tileiras's message.
    pub fn create_tile_library<P: AsRef<Path>>(
        &self,
        interface: &Path,
        implementations: &[P],
        out: &Path,
    ) -> Result<(), ToolchainError> {
        let interface = absolute(interface)?;
        let impls = implementations
            .iter()
            .map(|p| absolute(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let out = absolute(out)?;
        let work = private_workdir()?;
        let staged = work.path().join("library.tilelib");

        let args_for = |o: &Path| -> Vec<OsString> {
            let mut a: Vec<OsString> =
                vec!["--preview=simt".into(), "--preview-create-tile-lib".into()];
            let mut iface = OsString::from("--preview-interface=");
            iface.push(&interface);
            a.push(iface);
            for i in &impls {
                let mut arg = OsString::from("--preview-implementation=");
                arg.push(i);
                a.push(arg);
            }
            a.push("-o".into());
            a.push(o.as_os_str().to_owned());
            a
        };
        let reproduce = reproduce_command(self.path(), &args_for(&out));
        let mut cmd = tool_command(self.path(), work.path());
        cmd.args(args_for(&staged));
        let outcome = run_with_timeout(&mut cmd, TILELIB_TIMEOUT).map_err(|source| {
            ToolchainError::Spawn {
                tool: self.path().to_owned(),
                source,
            }
        })?;
        match outcome {
            RunOutcome::TimedOut { stderr } => {
                Err(ToolchainError::Timeout(Box::new(ToolTimeout {
                    tool: self.path().to_owned(),
                    limit: TILELIB_TIMEOUT,
                    kept_input: None,
                    reproduce,
                    stderr: String::from_utf8_lossy(&stderr).into_owned(),
                })))
            }
            RunOutcome::Finished(run) if !run.status.success() => {
                Err(ToolchainError::TileLibraryRefused(Box::new(tool_failure(
                    self.path(),
                    &run,
                    None,
                    reproduce,
                ))))
            }
            RunOutcome::Finished(_) => {
                if !staged.is_file() {
                    return Err(ToolchainError::MalformedOutput {
                        tool: self.path().to_owned(),
                        detail: format!("no library was written to {}", staged.display()),
                        reproduce,
                    });
                }
                persist(&staged, &out)
            }
        }
    }
}

/// Moves the finished library into place; across filesystems, copies next to `out` and renames, so
/// `out` is never half-written.
fn persist(staged: &Path, out: &Path) -> Result<(), ToolchainError> {
    if std::fs::rename(staged, out).is_ok() {
        return Ok(());
    }
    let dir = out.parent().unwrap_or(Path::new("."));
    let io = |e: std::io::Error| ToolchainError::io(format!("write {}", out.display()), e);
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::fs::copy(staged, tmp.path()).map_err(io)?;
    tmp.persist(out).map_err(|e| io(e.error))?;
    Ok(())
}
