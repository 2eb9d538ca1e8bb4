//! `gpu-harness`: one self-contained binary for GPU runs of the workspace's kernels.
//!
//! The GPU machine has no cargo, no tileiras and no network, so the work is split in two:
//!
//! 1. On a CPU machine with tileiras, `cargo xtask gpu prepare` builds this binary (release, stripped) and
//!    runs `gpu-harness plan --arch sm_90 --bundle .gpu/kernels.bundle`, which enumerates exactly the
//!    launches `run` will make (the same workload list, the same `Launcher::plan_for` the launches call),
//!    and compiles them into one AOT bundle. Both land in the git-ignored `.gpu/` folder.
//! 2. On the GPU machine (carry `.gpu`):
//!
//!    ```text
//!    .gpu/gpu-harness run --bundle .gpu/kernels.bundle --out $OUT
//!    ```
//!
//!    registers the bundle (no tileiras needed), checks every kernel on ragged shapes against its CPU
//!    reference (relative L2 error: f32 ≤ 1e-5, bf16 ≤ 1e-2), benchmarks the reference shapes with CUDA
//!    events (median of 50 after warm-up, L2 flushed before each launch of memory-bound kernels), measures
//!    host time per warm launch of a tiny kernel (median of 10k) and per kernel inside a CUDA graph, and
//!    the first launch in a new process with a warm disk cache and with a bundle (it re-runs itself as a
//!    child). It prints a table and writes `$OUT/gpu-harness.json` (rewritten after each phase, so a
//!    timeout still leaves the phases done). `--phases checks,bench,host,graph,first` selects phases.
//!
//! Without a CUDA driver, `run` prints `skipped: no CUDA driver` and exits 3, or 0 with `--allow-skip`.
//! Exit status 1 means a check failed or a phase reported errors.

mod first;
mod host;
mod plan;
mod report;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Parser)]
#[command(
    name = "gpu-harness",
    about = "Plan (AOT-compile) and run the GPU checks and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// CPU machine: compile every launch `run` makes into a bundle (needs tileiras).
    Plan {
        /// Comma-separated architectures.
        #[arg(long, default_value = "sm_90", value_delimiter = ',')]
        arch: Vec<String>,
        /// The bundle to write.
        #[arg(long)]
        bundle: PathBuf,
        /// Parallel tileiras processes (default: number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// GPU machine: check and benchmark every kernel from the bundle; results under --out.
    Run {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Exit 0 (after printing "skipped") when there is no CUDA driver.
        #[arg(long)]
        allow_skip: bool,
        /// Phases to run.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "checks,bench,host,graph,first"
        )]
        phases: Vec<String>,
    },
    /// Child mode of `run`: one first launch in a fresh process, reported as a JSON line.
    #[command(hide = true)]
    FirstLaunch {
        #[arg(long)]
        case: String,
        /// Register this bundle just before the launch.
        #[arg(long)]
        bundle: Option<PathBuf>,
        /// The parent's wall clock at spawn, in µs since the Unix epoch.
        #[arg(long)]
        t0_us: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan { arch, bundle, jobs } => plan::plan(&arch, &bundle, jobs),
        Command::Run {
            bundle,
            out,
            allow_skip,
            phases,
        } => run::run(&bundle, &out, allow_skip, &phases),
        Command::FirstLaunch {
            case,
            bundle,
            t0_us,
        } => first::child(&case, bundle.as_deref(), t0_us).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpu-harness: error: {e}");
            ExitCode::from(2)
        }
    }
}
