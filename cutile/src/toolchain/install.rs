//! Installing the toolchain: the four NVIDIA wheels (tileiras, libNVVM, ptxas, nvdisasm) are installed by pip
//! into a temporary directory next to the prefix, verified by compiling a module, marked, and then
//! renamed into place, so an interrupted install never looks installed. A complete, marked prefix
//! makes installing a no-op; an unmarked but complete tree (e.g. made by hand with pip) is verified
//! and adopted.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use thiserror::Error;

use super::arch::GpuArch;
use super::compile::CompileRequest;
use super::error::ToolchainError;
use super::layout::{ToolchainLayout, default_install_dir};
use super::process::{Stream, run_streaming};
use super::sample::MINIMAL_MODULE;
use super::tileiras::Tileiras;
use super::{TILEIRAS_VERSION, WHEELS};

/// How many trailing stderr lines of a failed command an error shows.
const TAIL_LINES: usize = 12;

/// What to install where.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The prefix; `<prefix>/nvidia/cu13/bin/tileiras` once installed.
    pub prefix: PathBuf,
    /// Reinstall even when the prefix holds a verified toolchain.
    pub force: bool,
    /// The Python interpreter whose pip is used.
    pub python: OsString,
}

impl InstallOptions {
    pub fn new(prefix: impl Into<PathBuf>) -> InstallOptions {
        InstallOptions {
            prefix: prefix.into(),
            force: false,
            python: "python3".into(),
        }
    }

    /// Options for the default prefix ([`default_install_dir`]).
    pub fn at_default_dir() -> Result<InstallOptions, InstallError> {
        default_install_dir()
            .map(InstallOptions::new)
            .ok_or(InstallError::NoInstallDir)
    }
}

/// Progress reported while installing.
#[derive(Debug, Clone, Copy)]
pub enum InstallEvent<'a> {
    /// A step starts, e.g. "running pip".
    Stage(&'a str),
    /// One line of pip's output, as it arrives.
    Pip(&'a str),
}

/// What [`install`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallOutcome {
    /// The prefix already held a verified toolchain; nothing was done.
    AlreadyInstalled,
    /// The prefix held a complete but unmarked toolchain; it was verified and marked.
    Adopted,
    /// The wheels were installed and verified.
    Installed,
}

/// A verified toolchain prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    pub prefix: PathBuf,
    /// `<prefix>/nvidia/cu13/bin/tileiras`.
    pub tileiras: PathBuf,
    pub outcome: InstallOutcome,
}

/// Why installing failed; each names the missing piece and the fix.
#[derive(Debug, Error)]
pub enum InstallError {
    #[error(
        "no install location: set CUTILE_TOOLCHAIN_DIR (or XDG_CACHE_HOME or HOME), or pass --dir"
    )]
    NoInstallDir,

    #[error(
        "Python interpreter `{}` not found ({source}); install Python 3 (e.g. `apt install python3`) \
         or put python3 on PATH",
        .python.to_string_lossy()
    )]
    PythonMissing { python: OsString, source: io::Error },

    #[error(
        "pip is not available for `{py}`: {}\nFix: run `{py} -m ensurepip --upgrade`, or install \
         pip (e.g. `apt install python3-pip`)",
        .stderr_tail.join("\n  "), py = .python.to_string_lossy()
    )]
    PipMissing {
        python: OsString,
        stderr_tail: Vec<String>,
    },

    #[error(
        "pip could not fetch the wheels ({status}); the package index is unreachable or has no wheel \
         for this platform. Last pip output:\n  {}\nFix: check network/proxy access to PyPI (or the \
         configured index), then rerun",
        .stderr_tail.join("\n  ")
    )]
    RegistryUnreachable {
        status: String,
        stderr_tail: Vec<String>,
    },

    #[error("pip install failed ({status}). Last pip output:\n  {}", .stderr_tail.join("\n  "))]
    PipFailed {
        status: String,
        stderr_tail: Vec<String>,
    },

    #[error(
        "the wheel `{wheel}=={}` installed but did not provide {}; the wheel is not the expected \
         one (check the index) — reinstall with --force",
        TILEIRAS_VERSION, .missing.display()
    )]
    WheelIncomplete {
        wheel: &'static str,
        missing: PathBuf,
    },

    #[error(
        "{} exists and does not look like a cutile toolchain; refusing to replace it. Choose an \
         empty or new directory",
        .prefix.display()
    )]
    PrefixOccupied { prefix: PathBuf },

    #[error("the toolchain in {} failed verification: {source}", .prefix.display())]
    VerificationFailed {
        prefix: PathBuf,
        source: Box<ToolchainError>,
    },

    #[error("the toolchain in {} is version {found}, expected {}; reinstall with --force", .prefix.display(), TILEIRAS_VERSION)]
    WrongVersion { prefix: PathBuf, found: String },

    #[error("{context}: {source}")]
    Io { context: String, source: io::Error },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> InstallError {
    let context = context.into();
    move |source| InstallError::Io { context, source }
}

/// Compiles the embedded minimal module for sm_90 with the toolchain in `prefix`: this proves that
/// tileiras, libNVVM and ptxas all work together, and that the version is the one we install.
pub fn verify_prefix(prefix: &Path) -> Result<Tileiras, InstallError> {
    let layout = ToolchainLayout::new(prefix);
    let fail = |e: ToolchainError| InstallError::VerificationFailed {
        prefix: prefix.to_owned(),
        source: Box::new(e),
    };
    let tileiras = Tileiras::at(layout.tileiras()).map_err(fail)?;
    let found = tileiras.version().to_string();
    if found != TILEIRAS_VERSION {
        return Err(InstallError::WrongVersion {
            prefix: prefix.to_owned(),
            found,
        });
    }
    tileiras
        .compile(&MINIMAL_MODULE, &CompileRequest::new(GpuArch::Sm90))
        .map_err(fail)?;
    Ok(tileiras)
}

fn write_marker(layout: &ToolchainLayout) -> Result<(), InstallError> {
    let text = format!(
        "cutile toolchain {TILEIRAS_VERSION}: {} verified by compiling a module for sm_90\n",
        WHEELS.join(", ")
    );
    std::fs::write(layout.marker(), text)
        .map_err(io_err(format!("write {}", layout.marker().display())))
}

/// Installs (or verifies) the toolchain per `opts`, reporting progress to `progress`.
pub fn install(
    opts: &InstallOptions,
    progress: &mut dyn FnMut(InstallEvent<'_>),
) -> Result<Installation, InstallError> {
    // One install at a time within a process; across processes the final rename arbitrates.
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());

    let prefix =
        std::path::absolute(&opts.prefix).map_err(io_err("resolve the install directory"))?;
    let layout = ToolchainLayout::new(&prefix);
    let done = |outcome| Installation {
        prefix: prefix.clone(),
        tileiras: layout.tileiras(),
        outcome,
    };

    if !opts.force {
        if layout.is_complete() {
            progress(InstallEvent::Stage(&format!(
                "toolchain {TILEIRAS_VERSION} already installed and verified in {}",
                prefix.display()
            )));
            return Ok(done(InstallOutcome::AlreadyInstalled));
        }
        if layout.first_missing().is_none() {
            progress(InstallEvent::Stage(&format!(
                "found an unverified toolchain in {}; verifying it",
                prefix.display()
            )));
            match verify_prefix(&prefix) {
                Ok(_) => {
                    write_marker(&layout)?;
                    return Ok(done(InstallOutcome::Adopted));
                }
                Err(e) => progress(InstallEvent::Stage(&format!("{e}\nreinstalling"))),
            }
        }
    }

    let replacing = match std::fs::read_dir(&prefix) {
        Ok(mut entries) => entries.next().is_some(),
        Err(_) => false,
    };
    if replacing && !looks_like_toolchain(&prefix) {
        return Err(InstallError::PrefixOccupied { prefix });
    }

    check_pip(&opts.python)?;

    let (parent, name) = match (prefix.parent(), prefix.file_name()) {
        (Some(p), Some(n)) => (p.to_owned(), n.to_string_lossy().into_owned()),
        _ => {
            return Err(InstallError::PrefixOccupied { prefix });
        }
    };
    std::fs::create_dir_all(&parent).map_err(io_err(format!("create {}", parent.display())))?;
    remove_stale_siblings(&parent, &name);
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-{}-", std::process::id()))
        .tempdir_in(&parent)
        .map_err(io_err(format!(
            "create a staging directory in {}",
            parent.display()
        )))?;

    let specs: Vec<String> = WHEELS
        .iter()
        .map(|w| format!("{w}=={TILEIRAS_VERSION}"))
        .collect();
    progress(InstallEvent::Stage(&format!(
        "installing {} with pip into {}",
        specs.join(" "),
        staging.path().display()
    )));
    let mut pip = Command::new(&opts.python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-input",
        "--target",
    ])
    .arg(staging.path())
    .args(&specs);
    let (status, tail) = run_streaming(&mut pip, TAIL_LINES, &mut |_: Stream, line: &str| {
        progress(InstallEvent::Pip(line))
    })
    .map_err(|e| spawn_error(&opts.python, e))?;
    if !status.success() {
        return Err(classify_pip_failure(status.to_string(), tail));
    }

    let staged = ToolchainLayout::new(staging.path());
    if let Some((wheel, missing)) = staged.first_missing() {
        return Err(InstallError::WheelIncomplete { wheel, missing });
    }
    progress(InstallEvent::Stage(
        "verifying: compiling a minimal module for sm_90",
    ));
    verify_prefix(staging.path()).map_err(|e| match e {
        InstallError::VerificationFailed { source, .. } => InstallError::VerificationFailed {
            prefix: prefix.clone(),
            source,
        },
        other => other,
    })?;
    write_marker(&staged)?;

    progress(InstallEvent::Stage(&format!(
        "moving into place: {}",
        prefix.display()
    )));
    let outcome = place(staging, &prefix, replacing, &name)?;
    Ok(done(outcome))
}

/// Renames the verified staging directory onto `prefix`, moving an old tree aside first.
fn place(
    staging: tempfile::TempDir,
    prefix: &Path,
    replacing: bool,
    name: &str,
) -> Result<InstallOutcome, InstallError> {
    let parent = prefix.parent().unwrap_or(Path::new("/"));
    let old = if replacing {
        let old = parent.join(format!(".{name}.old-{}", std::process::id()));
        std::fs::rename(prefix, &old).map_err(io_err(format!(
            "move the old toolchain {} aside",
            prefix.display()
        )))?;
        Some(old)
    } else {
        None
    };
    match std::fs::rename(staging.path(), prefix) {
        Ok(()) => {
            let _ = staging.keep();
            if let Some(old) = old {
                let _ = std::fs::remove_dir_all(old);
            }
            Ok(InstallOutcome::Installed)
        }
        Err(e) => {
            if let Some(old) = &old {
                let _ = std::fs::rename(old, prefix);
            }
            // Another process may have finished the same install first; that is success.
            if ToolchainLayout::new(prefix).is_complete() {
                return Ok(InstallOutcome::AlreadyInstalled);
            }
            Err(io_err(format!(
                "rename {} to {}",
                staging.path().display(),
                prefix.display()
            ))(e))
        }
    }
}

fn looks_like_toolchain(prefix: &Path) -> bool {
    let layout = ToolchainLayout::new(prefix);
    layout.marker().exists()
        || prefix.join("nvidia").is_dir()
        || std::fs::read_dir(prefix).is_ok_and(|mut it| {
            it.any(|e| {
                e.is_ok_and(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("nvidia_") && n.ends_with(".dist-info")
                })
            })
        })
}

/// Removes staging and moved-aside directories left by installs whose process is gone (an
/// interrupted install leaves ~230 MB behind otherwise).
fn remove_stale_siblings(parent: &Path, name: &str) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let me = std::process::id();
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let rest = n
            .strip_prefix(&format!(".{name}.partial-"))
            .or_else(|| n.strip_prefix(&format!(".{name}.old-")));
        let pid = rest
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && pid != me
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn spawn_error(python: &OsString, e: io::Error) -> InstallError {
    if e.kind() == io::ErrorKind::NotFound {
        InstallError::PythonMissing {
            python: python.clone(),
            source: e,
        }
    } else {
        InstallError::Io {
            context: format!("run {}", python.to_string_lossy()),
            source: e,
        }
    }
}

/// Fails with a typed error when the interpreter or its pip is missing.
fn check_pip(python: &OsString) -> Result<(), InstallError> {
    let out = Command::new(python)
        .args(["-m", "pip", "--version"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| spawn_error(python, e))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<String> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    Err(InstallError::PipMissing {
        python: python.clone(),
        stderr_tail: lines[lines.len().saturating_sub(TAIL_LINES)..].to_vec(),
    })
}

/// pip failures that mean "could not reach the index or find the wheels there".
fn classify_pip_failure(status: String, stderr_tail: Vec<String>) -> InstallError {
    const UNREACHABLE: [&str; 9] = [
        "could not find a version that satisfies",
        "no matching distribution",
        "max retries exceeded",
        "connection",
        "name resolution",
        "network is unreachable",
        "timed out",
        "proxy",
        "ssl",
    ];
    let text = stderr_tail.join("\n").to_ascii_lowercase();
    if UNREACHABLE.iter().any(|p| text.contains(p)) {
        InstallError::RegistryUnreachable {
            status,
            stderr_tail,
        }
    } else {
        InstallError::PipFailed {
            status,
            stderr_tail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_failures_are_classified() {
        let cases = [
            (
                "ERROR: Could not find a version that satisfies the requirement nvidia-nvvm==13.5.37",
                true,
            ),
            (
                "ERROR: No matching distribution found for nvidia-nvvm==13.5.37",
                true,
            ),
            ("WARNING: Retrying ... NewConnectionError", true),
            (
                "ERROR: Could not install packages due to an OSError: [Errno 28] No space left",
                false,
            ),
        ];
        for (line, unreachable) in cases {
            let e = classify_pip_failure("exit status: 1".into(), vec![line.into()]);
            assert_eq!(
                matches!(e, InstallError::RegistryUnreachable { .. }),
                unreachable,
                "{line}"
            );
            assert!(e.to_string().contains(line));
        }
    }
}
