//! `cargo xtask aot --arch sm_90[,sm_100…] -o FILE [--ops softmax,rms_norm] [--shapes shapes.toml]
//! [--candidates] [--jobs N]`: compiles the kernels a set of host-API calls launches into one AOT
//! bundle. The calls are those of the shapes file (`[[call]] op = "softmax" dtype = "bf16" shapes =
//! [[8192, 8192]] causal = false`, see `docs/shapes.toml`) or every family's `representative_calls()`,
//! filtered by `--ops`. Their launches come from the host API's planner
//! (`cutile_kernels::op::registry::launcher_plans`, every tuning candidate's with `--candidates`), so the
//! keys are the ones the ops compute; after writing, the bundle is re-opened and every planned call is
//! looked up as a machine without tileiras looks it up (`CUTILE_BUNDLE=FILE`).
//!
//! A bundle serves every call of the same class as a planned one: same element type, config choice and
//! power-of-two divisibility (up to 16) of extents and strides, not the same extents.

use std::path::PathBuf;

use cutile::launch::NO_TOOLCHAIN;
use cutile::toolchain::GpuArch;
use gpu_harness::aot::{build_bundle, plans_for_calls, select_calls};

use crate::BoxError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Comma-separated target architectures.
    #[arg(long, default_value = "sm_90", value_delimiter = ',')]
    pub arch: Vec<String>,
    /// The bundle file to write.
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Only calls of these ops (comma-separated registry names, e.g. `softmax,rms_norm`).
    #[arg(long, value_delimiter = ',')]
    pub ops: Vec<String>,
    /// A TOML file of `[[call]]` tables (op, dtype, shapes, causal) instead of the representative calls.
    #[arg(long)]
    pub shapes: Option<PathBuf>,
    /// Also compile every tuning candidate of each call (for `CUTILE_TUNE=on|force` runs).
    #[arg(long)]
    pub candidates: bool,
    /// Parallel tileiras processes (default: number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    let archs = args
        .arch
        .iter()
        .map(|a| a.parse::<GpuArch>())
        .collect::<Result<Vec<_>, _>>()?;
    let calls = select_calls(&args.ops, args.shapes.as_deref())?;
    let tileiras = crate::toolchain_cmd::ensure_toolchain()?;
    let version = tileiras.version().to_string();
    let plans = plans_for_calls(&calls, &archs, &version, args.candidates)?;
    let verify = plans_for_calls(&calls, &archs, NO_TOOLCHAIN, args.candidates)?;
    let threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    eprintln!(
        "compiling {} launches of {} calls{} with tileiras {version} on {threads} threads",
        plans.len(),
        calls.len(),
        if args.candidates {
            " (every tuning candidate)"
        } else {
            ""
        }
    );
    let built = build_bundle(&plans, &verify, &tileiras, threads, &args.out)?;
    println!(
        "wrote {} ({} cubins for {} launches, {:.1} MiB; every call found on re-open); use it with CUTILE_BUNDLE={}",
        args.out.display(),
        built.cubins,
        built.launches,
        built.bytes as f64 / (1 << 20) as f64,
        args.out.display()
    );
    Ok(())
}
