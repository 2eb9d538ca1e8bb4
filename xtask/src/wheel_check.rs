//! The Python wheel's CPU check, run by `cargo xtask test`: builds the `cutile-rs-torch` wheel with
//! maturin (dev profile, sharing the test build's target dir), then runs `python/tests/test_cpu.py` on
//! it: abi3 tag, no link-time CUDA/torch/libpython dependency, installs into a fresh venv, imports and
//! opens its bundle with no GPU, and turns calls into typed errors. The manylinux_2_28 wheel itself is
//! built by `python/prepare_gpu.sh` (release, linked through zig); the CI build only needs to show the
//! package builds and loads, so it skips zig and the manylinux audit.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BoxError;

/// maturin, pinned to the major version `python/pyproject.toml` requires.
const MATURIN: &str = "maturin>=1.7,<2";

/// A maturin executable: the one on PATH, else one pip installs under `tools` (once).
fn maturin(python: &str, tools: &Path) -> Result<PathBuf, BoxError> {
    if Command::new("maturin")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Ok("maturin".into());
    }
    let bin = tools.join("bin").join("maturin");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!(
        "==> {python} -m pip install --target {} '{MATURIN}'",
        tools.display()
    );
    let status = Command::new(python)
        .args(["-m", "pip", "install", "-q", "--target"])
        .arg(tools)
        .arg(MATURIN)
        .status()
        .map_err(|e| format!("cannot run `{python} -m pip`: {e}"))?;
    if !status.success() || !bin.is_file() {
        return Err(format!(
            "pip could not install {MATURIN} into {} ({status}); install maturin yourself \
             (`pip install maturin`) and re-run",
            tools.display()
        )
        .into());
    }
    Ok(bin)
}

/// Builds the wheel into `target/wheel-check/` and runs the CPU checks on it.
pub fn run(root: &Path, target_dir: &Path) -> Result<(), BoxError> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let work = target_dir.join("wheel-check");
    let wheels = work.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    std::fs::create_dir_all(&wheels)?;
    let maturin = maturin(&python, &work.join("tools"))?;
    eprintln!("==> maturin build --profile dev --compatibility linux (python/)");
    let status = Command::new(&maturin)
        .current_dir(root.join("python"))
        .args([
            "build",
            "--profile",
            "dev",
            "--compatibility",
            "linux",
            "-i",
        ])
        .arg(&python)
        .arg("-o")
        .arg(&wheels)
        .env("CARGO_TARGET_DIR", target_dir)
        // The tools' pip target dir holds maturin's Python side.
        .env("PYTHONPATH", work.join("tools"))
        .status()
        .map_err(|e| format!("cannot run {}: {e}", maturin.display()))?;
    if !status.success() {
        return Err(format!("the wheel did not build (maturin: {status})").into());
    }
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or("maturin reported success but wrote no .whl")?;
    eprintln!("==> python/tests/test_cpu.py --dev {}", wheel.display());
    let status = Command::new(&python)
        .arg(root.join("python/tests/test_cpu.py"))
        .arg("--dev")
        .arg(&wheel)
        .status()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !status.success() {
        return Err(
            format!("the wheel's CPU checks failed ({status}); see the output above").into(),
        );
    }
    Ok(())
}
