//! The `gpu-harness` command line; see the library docs for what each subcommand does.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gpu_harness::{first, plan, run, tune};

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
    /// GPU machine: tune every benchmark call (CUTILE_TUNE=force) and report default, winner and
    /// speed-up per call under --out (tune.json, tune.md, tuning.json).
    Tune {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Only these ops (comma-separated), e.g. `softmax,rms_norm`.
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
        /// Exit 0 (after printing "skipped") when there is no CUDA driver.
        #[arg(long)]
        allow_skip: bool,
    },
    /// Write the benchmark calls `run` times as JSON (what `ci/gpu/peers.py --calls` reads).
    Calls {
        /// The folder to write `bench-calls.json` into.
        #[arg(long)]
        out: PathBuf,
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
        Command::Tune {
            bundle,
            out,
            ops,
            allow_skip,
        } => tune::tune(&bundle, &out, &ops, allow_skip),
        Command::Calls { out } => {
            run::write_bench_calls(&out, &cutile_examples::workload::benches()).map(|p| {
                println!("{}", p.display());
                ExitCode::SUCCESS
            })
        }
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
