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
    /// Build the GPU harness (+ `.xz`) and its kernel bundle into `.gpu/`; print the device commands.
    Prepare(PrepareArgs),
    /// Build the harness and run `gpu-harness check ARGS..` here.
    Check(PassArgs),
    /// Build the harness and run `gpu-harness bench ARGS..` here.
    Bench(PassArgs),
    /// Build the harness and run `gpu-harness validate ARGS..` here.
    Validate(PassArgs),
}

/// Arguments passed on to the harness unchanged.
#[derive(Debug, clap::Args)]
pub struct PassArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
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
        Args::Check(p) => pass("check", p),
        Args::Bench(p) => pass("bench", p),
        Args::Validate(p) => pass("validate", p),
    }
}

/// Builds the release harness and returns its path.
fn build_harness(root: &Path) -> Result<PathBuf, BoxError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("==> cargo build --release -p gpu-harness");
    let status = Command::new(&cargo)
        .current_dir(root)
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
    Ok(built)
}

fn pass(sub: &str, p: &PassArgs) -> Result<(), BoxError> {
    let root = workspace_root();
    let bin = build_harness(&root)?;
    let status = Command::new(&bin)
        .current_dir(&root)
        .arg(sub)
        .args(&p.args)
        .status()?;
    check(status, &format!("gpu-harness {sub}"))
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
    let built = build_harness(&root)?;
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
    let xz = dir.join("gpu-harness.xz");
    eprintln!("==> xz -9 -T1 {}", rel_to(&root, &xz));
    let out = std::fs::File::create(&xz)?;
    let status = Command::new("xz")
        .args(["-9", "-T1", "-c"])
        .arg(&bin)
        .stdout(out)
        .status()
        .map_err(|e| format!("running xz (install xz-utils): {e}"))?;
    check(status, "xz")?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let (b, k, z) = (size(&bin), size(&bundle), size(&xz));
    let rel = |p: &Path| rel_to(&root, p);
    let mib = |n: u64| n as f64 / (1 << 20) as f64;
    println!(
        "ready: {} ({:.1} MiB; {} {:.2} MiB) and {} ({:.1} MiB)",
        rel(&bin),
        mib(b),
        rel(&xz),
        mib(z),
        rel(&bundle),
        mib(k)
    );
    if k + z > TRANSFER_LIMIT / 2 {
        eprintln!(
            "warning: {:.1} MiB is over half of the 64 MiB the device tool carries with the checkout",
            mib(k + z)
        );
    }
    let (d, bu) = (rel(&dir), rel(&bundle));
    let unpack = format!("xz -dc {d}/gpu-harness.xz > /tmp/gh && chmod +x /tmp/gh");
    println!(
        "\ncarry only what a run needs (the uncompressed binary stays here):\n  \
         bundle-only run, carry [\"{d}/gpu-harness.xz\", \"{bu}\", \"{d}/reference\"]:\n    \
         set -o pipefail; {unpack} && /tmp/gh check --fixed --bundle {bu} --out $OUT; \
         /tmp/gh bench --bundle {bu} --out $OUT; \
         /tmp/gh tune --bundle {bu} --out $OUT/tune; \
         /tmp/gh run --bundle {bu} --out $OUT; \
         python3 ci/gpu/peers.py $OUT/peers.json --calls $OUT/bench-calls.json; \
         /tmp/gh report $OUT\n  \
         toolchain run (property check with JIT), carry [\"{d}/gpu-harness.xz\", \"{d}/tc\"]:\n    \
         {unpack} && tar -xJf {d}/tc/tc135.tar.xz -C /tmp && \
         unset CUDA_HOME CUDA_PATH CUDA_ROOT; \
         CUTILE_TILEIRAS=/tmp/nvidia/cu13/bin/tileiras /tmp/gh check --cases 300 --seed 1 --out $OUT\n  \
         node burn-in (one process per GPU; --processes-per-gpu 2 on one H200):\n    \
         {unpack} && /tmp/gh validate --bundle {bu} --fixed-check --out $OUT --processes-per-gpu 2"
    );
    Ok(())
}

fn rel_to(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}
