//! `cargo xtask aot --arch sm_90[,sm_100…] -o FILE [--filter STR]`: compiles the DSL specializations the
//! compile catalog declares (`cutile_kernels::catalog`, jobs with a kernel and arrays) for each
//! architecture into one AOT bundle. Keys come from `cutile::launch::plan`, the function launches use,
//! so a machine without tileiras finds these cubins by registering the bundle (`CUTILE_BUNDLE=FILE`).
//!
//! Layout facts (extent/stride divisibility, base alignment) are part of a specialization: a bundle
//! serves launches whose arrays have the facts of the declared ones (the catalog declares aligned and
//! ragged shapes of each kernel).

use std::path::PathBuf;

use cutile::bundle::BundleWriter;
use cutile::launch::aot::{compile_into_bundle, print_outcomes};
use cutile::launch::{CompileOptions, Plan, plan};
use cutile::toolchain::GpuArch;
use cutile_kernels::catalog::compile_jobs;

use crate::BoxError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Comma-separated target architectures.
    #[arg(long, default_value = "sm_90", value_delimiter = ',')]
    pub arch: Vec<String>,
    /// The bundle file to write.
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Only kernels whose catalog name contains this string.
    #[arg(long)]
    pub filter: Option<String>,
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
    let tileiras = crate::toolchain_cmd::ensure_toolchain()?;
    let version = tileiras.version().to_string();
    let options = CompileOptions::default();
    let mut plans: Vec<(String, Plan)> = Vec::new();
    let mut skipped = 0;
    for job in compile_jobs() {
        if args
            .filter
            .as_deref()
            .is_some_and(|f| !job.kernel.contains(f))
        {
            continue;
        }
        let Some((kernel, arrays)) = job.dsl_spec() else {
            skipped += 1; // IR-builder samples have no launcher
            continue;
        };
        for &arch in &archs {
            let label = format!("{} [{}] {}", job.kernel, job.specialization, arch.name());
            let p = plan(kernel, arrays, arch, &options, &version)
                .map_err(|e| format!("{label}: {e}"))?;
            plans.push((label, p));
        }
    }
    if plans.is_empty() {
        return Err("no DSL kernel of the catalog matches the filter".into());
    }
    eprintln!(
        "compiling {} specializations ({skipped} non-DSL catalog jobs skipped) with tileiras {version}",
        plans.len()
    );
    let threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let mut writer = BundleWriter::new();
    let outcomes = compile_into_bundle(&plans, &tileiras, threads, &mut writer);
    let failed = print_outcomes(&outcomes);
    if failed > 0 {
        return Err(format!("{failed} specializations failed; no bundle written").into());
    }
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    writer.write(&args.out)?;
    let bytes = std::fs::metadata(&args.out)?.len();
    println!(
        "wrote {} ({} cubins, {:.1} MiB); use it with CUTILE_BUNDLE={}",
        args.out.display(),
        writer.len(),
        bytes as f64 / (1 << 20) as f64,
        args.out.display()
    );
    Ok(())
}
