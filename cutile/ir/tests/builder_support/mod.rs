//! Shared helpers of the builder/verifier test binaries: locating and running tileiras and tileirdisasm
//! (through `cutile_testkit`, skipping when they are absent) and scratch files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// tileiras through the kit's discovery (`CUTILE_TILEIRAS`, the default install, `PATH`), if it exists.
pub fn tileiras() -> Option<PathBuf> {
    cutile_testkit::tools::tileiras()
}

/// tileirdisasm through the kit's discovery (`CUTILE_TILEIRDISASM`, beside `CUTILE_TILEIRAS`, the default
/// install, `PATH`), if it exists.
pub fn tileirdisasm() -> Option<PathBuf> {
    cutile_testkit::tools::tileirdisasm()
}

/// Skip `test` because `tool` is missing (a failure under `CUTILE_REQUIRE_TOOLS=1`).
pub fn skip(test: &str, tool: &str) {
    cutile_testkit::skip(test, &cutile_testkit::tools::not_found(tool));
}

/// A fresh scratch file path for this process.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("cutile-ir-tests-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!("{}-{name}", N.fetch_add(1, Ordering::Relaxed)))
}

/// The outcome of one tool run.
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

fn run(cmd: &mut Command) -> Run {
    // CUDA_HOME & co. redirect tileiras' libnvvm search (toolchain.md §5.1).
    cmd.env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("CUDA_ROOT");
    match cmd.output() {
        Ok(o) => Run {
            ok: o.status.success(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: format!(
                "exit {:?}: {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            ),
        },
        Err(e) => Run {
            ok: false,
            stdout: String::new(),
            stderr: format!("could not run: {e}"),
        },
    }
}

/// `tileirdisasm [--preview=simt] file`.
pub fn disasm(tool: &Path, bytes: &[u8], preview: bool, name: &str) -> Run {
    let f = scratch(&format!("{name}.tilebc"));
    if let Err(e) = std::fs::write(&f, bytes) {
        return Run {
            ok: false,
            stdout: String::new(),
            stderr: format!("cannot write {}: {e}", f.display()),
        };
    }
    let mut c = Command::new(tool);
    if preview {
        c.arg("--preview=simt");
    }
    c.arg(&f);
    let r = run(&mut c);
    let _ = std::fs::remove_file(&f);
    r
}

/// `tileiras --gpu-name=ARCH -o out.cubin file`; on success returns the cubin bytes in `stdout` form check.
pub fn compile(tool: &Path, bytes: &[u8], arch: &str, name: &str) -> (Run, Vec<u8>) {
    let f = scratch(&format!("{name}.tilebc"));
    let out = f.with_extension("cubin");
    if let Err(e) = std::fs::write(&f, bytes) {
        return (
            Run {
                ok: false,
                stdout: String::new(),
                stderr: format!("cannot write {}: {e}", f.display()),
            },
            vec![],
        );
    }
    let r = run(Command::new(tool)
        .arg(format!("--gpu-name={arch}"))
        .arg("-o")
        .arg(&out)
        .arg(&f));
    let cubin = std::fs::read(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&f);
    let _ = std::fs::remove_file(&out);
    (r, cubin)
}
