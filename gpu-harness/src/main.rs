//! The `gpu-harness` command line; see the library docs for what each subcommand does.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gpu_harness::{bench, check, first, launches, merge, plan, run, tp, tune, validate};

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
        /// Comma-separated ops: only their workloads (default: all).
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
        /// Also the kernels of the property cases `check --cases N --seed S --ops ..` draws (the
        /// same ops), so the check runs from this bundle on a device without tileiras.
        #[arg(long, default_value_t = 0)]
        cases: usize,
        /// The case seed (required with `--cases`).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// GPU: correctness of every host-API op. Property mode (default): `--cases` proptest cases from
    /// `--seed`, kernels compiled first with tileiras (CUTILE_TILEIRAS), failures shrunk and printed
    /// with a one-line reproduction. `--fixed`: the fixed ragged checks from `--bundle` (no tileiras).
    Check {
        /// Total property cases, spread across the ops.
        #[arg(long, default_value_t = 200)]
        cases: usize,
        /// Seed of the case generator (printed by every run).
        #[arg(long)]
        seed: Option<u64>,
        /// Only these ops (comma-separated).
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
        /// Re-run exactly this case (JSON as printed by a failure).
        #[arg(long)]
        case: Option<String>,
        /// The fixed checks of `run` instead of property cases.
        #[arg(long)]
        fixed: bool,
        /// Register this bundle (the fixed checks need it without tileiras).
        #[arg(long)]
        bundle: Option<PathBuf>,
        /// Write `check.json` here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Parallel tileiras processes (default: number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
        /// Threads running property cases, each on its own stream (default: half the CPUs, at most 8).
        #[arg(long)]
        workers: Option<usize>,
        /// Most runs spent shrinking one failure.
        #[arg(long, default_value_t = 64)]
        shrink_steps: usize,
    },
    /// GPU: the in-situ time of every launch of each benchmark call (captured once, replayed back to
    /// back with a CUDA event after each launch, behind bench's L2 flush); launches.json and
    /// launches.md under --out.
    Launches {
        #[arg(long)]
        bundle: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
        /// Timed replays per call (after one untimed).
        #[arg(long, default_value_t = 20)]
        iterations: usize,
        /// Only the calls whose name contains one of these strings (all calls when empty), e.g. to
        /// put one call under `ncu`.
        #[arg(long, value_delimiter = ';')]
        calls: Vec<String>,
    },
    /// GPU: criterion benchmarks (CUDA-event measurement) of every representative call; writes
    /// `bench.json` and `bench-calls.json` (for ci/gpu/peers.py) under --out.
    Bench {
        #[arg(long)]
        bundle: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
        /// Criterion samples per call (at least 10).
        #[arg(long, default_value_t = 10)]
        sample_size: usize,
        /// Criterion measurement time per call, ms.
        #[arg(long, default_value_t = 1000)]
        measurement_ms: u64,
        /// Criterion warm-up time per call, ms.
        #[arg(long, default_value_t = 300)]
        warm_up_ms: u64,
    },
    /// Merge `DIR/bench.json` and `DIR/peers.json` into report.json, report.md and plot-<op>.svg
    /// (or re-render a saved report.json); `--against OLD` diffs two runs per shape.
    Report {
        dir: PathBuf,
        #[arg(long)]
        against: Option<PathBuf>,
        /// Relative noise band of the diff (0.05 = ±5%).
        #[arg(long, default_value_t = 0.05)]
        noise: f64,
    },
    /// GPU node burn-in: a short check and a bench per visible GPU, one process each, against the
    /// per-arch thresholds and the siblings; node-report.{json,md} under --out; exit 1 on any failure.
    Validate {
        #[arg(long)]
        bundle: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
        /// Property cases per process.
        #[arg(long, default_value_t = 40)]
        check_cases: usize,
        #[arg(long)]
        seed: Option<u64>,
        /// Processes per GPU (2 exercises the multi-GPU path on one device).
        #[arg(long, alias = "simulate-gpus", default_value_t = 1)]
        processes_per_gpu: usize,
        /// A thresholds TOML instead of the built-in one of the arch.
        #[arg(long)]
        thresholds: Option<PathBuf>,
        /// Override the thresholds' sibling band (0.10 = 10%).
        #[arg(long)]
        sibling_band: Option<f64>,
        #[arg(long, default_value_t = 10)]
        sample_size: usize,
        #[arg(long, default_value_t = 500)]
        measurement_ms: u64,
        #[arg(long, default_value_t = 300)]
        warm_up_ms: u64,
        /// Bench only these ops (comma-separated; default all), to fit a burn-in into a time window.
        #[arg(long, value_delimiter = ',')]
        bench_ops: Vec<String>,
        /// Fixed bundle checks instead of property cases (no tileiras).
        #[arg(long)]
        fixed_check: bool,
        /// Only these GPUs (ordinals of the visible set, comma-separated; default all, concurrently).
        #[arg(long, value_delimiter = ',')]
        devices: Vec<usize>,
        /// Leave out the NCCL all-reduce bandwidth check (needs libnccl.so: docs/multi-gpu.md).
        #[arg(long)]
        no_nccl: bool,
        /// Bytes of the NCCL check's all-reduce.
        #[arg(long, default_value_t = 256 << 20)]
        nccl_bytes: usize,
        /// The bus bandwidth must reach this fraction of the NVLink figure.
        #[arg(long, default_value_t = 0.5)]
        nccl_min_fraction: f64,
    },
    /// GPU(s): the tensor-parallel transformer block over 1..N GPUs through NCCL (correctness against
    /// one GPU and the CPU, time per layer, all-reduce vs compute, overlap, scaling efficiency, NCCL
    /// bus bandwidth). Needs libnccl.so on LD_LIBRARY_PATH (docs/multi-gpu.md).
    Tp {
        #[arg(long)]
        out: PathBuf,
        /// Rank counts (comma-separated; default 1,2,8 and the GPU count; above it: blocked).
        #[arg(long, value_delimiter = ',')]
        ranks: Vec<usize>,
        /// Correctness shape `T,hidden,Hq,Hkv,D,F` (default 128,512,8,2,64,1024).
        #[arg(long)]
        check_shape: Option<String>,
        /// Timing shape (default Llama-3-8B: 2048,4096,32,8,128,14336).
        #[arg(long)]
        time_shape: Option<String>,
        /// MLP token chunks of the overlapped run (1: no overlap run).
        #[arg(long, default_value_t = 4)]
        chunks: usize,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Correctness only.
        #[arg(long)]
        no_timing: bool,
        /// The NCCL busbw must reach this fraction of the NVLink figure (≥ 2 GPUs).
        #[arg(long, default_value_t = 0.5)]
        min_busbw_fraction: f64,
    },
    /// GPU: launch-overhead phases (host time per launch, CUDA graphs, first launch in a new process).
    Run {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Exit 0 (after printing "skipped") when there is no CUDA driver.
        #[arg(long)]
        allow_skip: bool,
        /// Phases to run.
        #[arg(long, value_delimiter = ',', default_value = "host,graph,first")]
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

/// A seed from the clock (printed by `check`, so a run can be repeated).
fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 % 1_000_000_007)
}

/// Property checks compile cold: unless `CUTILE_CACHE_DIR` is set, point it at a fresh folder.
fn fresh_cache_dir(want: bool) {
    if !want || std::env::var_os("CUTILE_CACHE_DIR").is_some() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpu-harness-cache-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_ok() {
        // SAFETY: called from `main` before any thread is started.
        unsafe { std::env::set_var("CUTILE_CACHE_DIR", &dir) };
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Tp { .. } | Command::Validate { .. }) {
        // SAFETY: no other thread has started yet. NVLink multicast stays off.
        unsafe { cutile_tp::nccl::disable_nvls_unless_set() };
    }
    let result = match cli.command {
        Command::Check {
            cases,
            seed,
            ops,
            case,
            fixed,
            bundle,
            out,
            jobs,
            workers,
            shrink_steps,
        } => {
            fresh_cache_dir(!fixed && case.is_none());
            check::run(&check::CheckArgs {
                cases,
                seed: seed.unwrap_or_else(random_seed),
                ops,
                case,
                fixed,
                bundle,
                out,
                jobs,
                workers,
                shrink_steps,
            })
        }
        Command::Launches {
            bundle,
            out,
            ops,
            iterations,
            calls,
        } => launches::run(&launches::LaunchesArgs {
            bundle,
            out,
            ops,
            iterations,
            calls,
        }),
        Command::Bench {
            bundle,
            out,
            ops,
            sample_size,
            measurement_ms,
            warm_up_ms,
        } => bench::run(&bench::BenchArgs {
            bundle,
            out,
            ops,
            sample_size,
            measurement_ms,
            warm_up_ms,
        }),
        Command::Report {
            dir,
            against,
            noise,
        } => merge::report(&dir, against.as_deref(), noise),
        Command::Validate {
            bundle,
            out,
            check_cases,
            seed,
            processes_per_gpu,
            thresholds,
            sibling_band,
            sample_size,
            measurement_ms,
            warm_up_ms,
            bench_ops,
            fixed_check,
            devices,
            no_nccl,
            nccl_bytes,
            nccl_min_fraction,
        } => validate::run(&validate::ValidateArgs {
            bundle,
            out,
            check_cases,
            seed: seed.unwrap_or_else(random_seed),
            processes_per_gpu,
            thresholds,
            sibling_band,
            sample_size,
            measurement_ms,
            warm_up_ms,
            bench_ops,
            fixed_check,
            devices,
            no_nccl,
            nccl_bytes,
            nccl_min_fraction,
        }),
        Command::Tp {
            out,
            ranks,
            check_shape,
            time_shape,
            chunks,
            warmup,
            iters,
            no_timing,
            min_busbw_fraction,
        } => tp::run(&tp::TpArgs {
            out,
            ranks,
            check_shape,
            time_shape,
            chunks,
            warmup,
            iters,
            no_timing,
            min_busbw_fraction,
        }),
        Command::Plan {
            arch,
            bundle,
            jobs,
            ops,
            cases,
            seed,
        } => match (cases, seed) {
            (0, _) => plan::plan(&arch, &bundle, jobs, &ops, None),
            (n, Some(s)) => plan::plan(&arch, &bundle, jobs, &ops, Some((n, s))),
            (_, None) => Err("plan --cases needs --seed (the seed the check will run with)".into()),
        },
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
