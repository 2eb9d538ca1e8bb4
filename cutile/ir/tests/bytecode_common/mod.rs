//! Helpers shared by the bytecode tests: the sample files and the `tileirdisasm` oracle.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Directory of the reference samples (copies of `shared/data/tileir-samples`).
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bytecode_data")
}

/// Every `.tilebc` under `tests/bytecode_data` and `tests/print_data`, sorted.
pub fn all_samples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut out = vec![];
    for dir in [
        root.join("bytecode_data"),
        root.join("bytecode_data/preview"),
        root.join("print_data"),
    ] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "tilebc") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        !out.is_empty(),
        "no sample files found under {}",
        root.display()
    );
    out
}

pub fn name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `tileirdisasm` through the kit's discovery (`CUTILE_TILEIRDISASM`, the installed toolchain, `PATH`).
pub fn tileirdisasm() -> Option<PathBuf> {
    cutile_testkit::tools::tileirdisasm()
}

/// Disassemble `bytes` (with `--preview=simt` when `preview`); `Err` holds tileirdisasm's stderr.
pub fn disasm(tool: &Path, bytes: &[u8], preview: bool) -> Result<String, String> {
    disasm_with(tool, bytes, preview, &[])
}

/// [`disasm`] with extra arguments (e.g. `-g`).
pub fn disasm_with(
    tool: &Path,
    bytes: &[u8],
    preview: bool,
    extra: &[&str],
) -> Result<String, String> {
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!(
        "cutile-bytecode-test-{}-{n}.tilebc",
        std::process::id()
    ));
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(tool);
    cmd.args(extra);
    if preview {
        cmd.arg("--preview=simt");
    }
    let out = cmd.arg(&file).output().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&file);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "tileirdisasm exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
