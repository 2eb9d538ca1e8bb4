//! `cargo xtask gpu prepare [--arch sm_90] [--dir .gpu]`: everything a run on the GPU machine needs, which
//! has no cargo, no tileiras and no network: builds the `gpu-harness` binary in release mode (stripped),
//! runs its `plan` step to compile every launch it will make into an AOT bundle, and puts both into the
//! git-ignored `.gpu/` folder that travels with the checkout. Then, on the device:
//!
//! ```text
//! .gpu/gpu-harness run --bundle .gpu/kernels.bundle --out $OUT
//! ```
//!
//! (carry `.gpu`, which git ignores); `tune` instead of `run` makes a tuning run (the bundle holds every
//! tuning candidate). Results come back as `$OUT/gpu-harness.json` plus the table on
//! stdout.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BoxError;

#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Build the GPU harness and its kernel bundle into `.gpu/`.
    Prepare(PrepareArgs),
}

#[derive(Debug, clap::Args)]
pub struct PrepareArgs {
    /// Architectures to compile the bundle for (the H200 is sm_90).
    #[arg(long, default_value = "sm_90")]
    pub arch: String,
    /// Output folder, relative to the workspace root.
    #[arg(long, default_value = ".gpu")]
    pub dir: PathBuf,
}

/// What the device tool may carry in all (checkout included).
const TRANSFER_LIMIT: u64 = 64 << 20;

pub fn run(args: &Args) -> Result<(), BoxError> {
    match args {
        Args::Prepare(a) => prepare(a),
    }
}

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn check(status: std::process::ExitStatus, what: &str) -> Result<(), BoxError> {
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})").into())
    }
}

fn prepare(args: &PrepareArgs) -> Result<(), BoxError> {
    let root = workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("==> cargo build --release -p gpu-harness");
    let status = Command::new(&cargo)
        .current_dir(&root)
        .args(["build", "--release", "-p", "gpu-harness"])
        .status()?;
    check(status, "building gpu-harness")?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    let built = target.join("release").join("gpu-harness");
    if !built.is_file() {
        return Err(format!("the build did not produce {}", built.display()).into());
    }
    let dir = root.join(&args.dir);
    std::fs::create_dir_all(&dir)?;
    let bin = dir.join("gpu-harness");
    std::fs::copy(&built, &bin)?;
    let bundle = dir.join("kernels.bundle");
    eprintln!(
        "==> gpu-harness plan --arch {} --bundle {}",
        args.arch,
        bundle.display()
    );
    let status = Command::new(&bin)
        .current_dir(&root)
        .args(["plan", "--arch", &args.arch, "--bundle"])
        .arg(&bundle)
        .status()?;
    check(status, "gpu-harness plan")?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let (b, k) = (size(&bin), size(&bundle));
    let rel = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    println!(
        "ready: {} ({:.1} MiB) and {} ({:.1} MiB)",
        rel(&bin),
        b as f64 / (1 << 20) as f64,
        rel(&bundle),
        k as f64 / (1 << 20) as f64
    );
    if b + k > TRANSFER_LIMIT / 2 {
        eprintln!(
            "warning: {:.1} MiB is over half of the 64 MiB the device tool carries with the checkout",
            (b + k) as f64 / (1 << 20) as f64
        );
    }
    println!(
        "device command (carry [\"{}\"]):\n  {} run --bundle {} --out $OUT\ntuning run:\n  {} tune --bundle {} --out $OUT",
        rel(&dir),
        rel(&bin),
        rel(&bundle),
        rel(&bin),
        rel(&bundle)
    );
    Ok(())
}
