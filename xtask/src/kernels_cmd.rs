//! `cargo xtask kernels [--arch sm_80,sm_90,…]`: the main job. Builds every kernel of the compile catalog with our
//! own IR code, writes its bytecode, compiles it with the real tileiras for each architecture and prints a table
//! (kernel, specialization, arch, bytecode bytes, cubin bytes, seconds, and the kernel's registers,
//! stack frame and static shared memory as the cubin records them). Exits non-zero if any step fails.
//!
//! `--subset` is what CI (`cargo xtask test`) compiles: every specialization for sm_90 (the arch the
//! project runs on), and for each other arch one specialization of every kernel entry (the catalog's
//! first), so every family still compiles for four archs while the full arch × specialization matrix
//! stays with the main job. Compiles go through the kernel cache
//! ([`cutile::launch::compile_bytecode_cached`]), so a module the tests already compiled in the same
//! run is not compiled twice.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use cutile::toolchain::{CompileRequest, GpuArch, Tileiras};
use cutile_ir::Version;
use cutile_ir::bytecode::write_module;
use cutile_kernels::catalog::{CompileJob, compile_jobs, compile_jobs_full};

use crate::BoxError;

pub const DEFAULT_ARCHS: &str = "sm_80,sm_90,sm_100,sm_120";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Comma-separated target architectures.
    #[arg(long, default_value = DEFAULT_ARCHS, value_delimiter = ',')]
    pub arch: Vec<String>,
    /// Bytecode version to write (13.4 or 13.5).
    #[arg(long, default_value = "13.5")]
    pub bytecode: String,
    /// Only kernels whose name contains this string.
    #[arg(long)]
    pub filter: Option<String>,
    /// Also write each bytecode file and cubin here (`<kernel>-<n>.tilebc`, `<kernel>-<n>.<arch>.cubin`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Parallel tileiras processes (default: number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Every tuning candidate of every representative call too (`catalog::compile_jobs_full`), not only
    /// the default configurations.
    #[arg(long)]
    pub full: bool,
    /// CI's representative subset: every specialization for sm_90, one per kernel entry for the
    /// other archs (see the module header).
    #[arg(long)]
    pub subset: bool,
    /// Print the (kernel, specialization, arch) pairs that would compile, and compile nothing.
    #[arg(long)]
    pub list: bool,
}

/// The arch whose every specialization the subset compiles.
const SUBSET_FULL_ARCH: GpuArch = GpuArch::Sm90;

/// The (job index, arch) pairs to compile: every supported pair, or with `subset` every pair for
/// [`SUBSET_FULL_ARCH`] and, for the other archs, the first job of each kernel name that the arch supports.
fn selected_pairs(jobs: &[CompileJob], archs: &[GpuArch], subset: bool) -> Vec<(usize, GpuArch)> {
    let mut seen = std::collections::HashSet::new();
    let mut pairs = Vec::new();
    for (n, job) in jobs.iter().enumerate() {
        for &arch in archs.iter().filter(|&&a| job.supports(a)) {
            if !subset || arch == SUBSET_FULL_ARCH || seen.insert((job.kernel, arch)) {
                pairs.push((n, arch));
            }
        }
    }
    pairs
}

/// One row of the result table.
struct Row {
    kernel: String,
    specialization: String,
    arch: String,
    bytecode_bytes: usize,
    outcome: Result<Compiled, String>,
}

/// What a compiled row reports: the cubin's size, the compile time and the kernel's resources as the
/// cubin records them (registers, spill stack, static shared memory; `None` if it records none).
struct Compiled {
    cubin_bytes: usize,
    seconds: f64,
    resources: Option<cutile::runtime::cubin::KernelResources>,
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    let archs = args
        .arch
        .iter()
        .map(|a| a.parse::<GpuArch>())
        .collect::<Result<Vec<_>, _>>()?;
    let version: Version = args.bytecode.parse()?;
    let tileiras = crate::toolchain_cmd::ensure_toolchain()?;
    let all = if args.full {
        compile_jobs_full()
    } else {
        compile_jobs()
    };
    let jobs: Vec<CompileJob> = all
        .into_iter()
        .filter(|j| args.filter.as_deref().is_none_or(|f| j.kernel.contains(f)))
        .collect();
    if jobs.is_empty() {
        return Err("no kernel matches the filter".into());
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
    }
    eprintln!(
        "compiling {} specializations for {} with tileiras {} ({})",
        jobs.len(),
        archs
            .iter()
            .map(|a| a.name())
            .collect::<Vec<_>>()
            .join(", "),
        tileiras.version(),
        tileiras.path().display()
    );
    let skipped = jobs
        .iter()
        .map(|j| archs.iter().filter(|&&a| !j.supports(a)).count())
        .sum::<usize>();
    if skipped > 0 {
        eprintln!(
            "skipping {skipped} (specialization, arch) pairs the arch cannot run (fp8 on sm_80, \
             e2m1 block-scaled kernels before sm_100: `CompileJob::supports`)"
        );
    }
    let pairs = selected_pairs(&jobs, &archs, args.subset);
    if args.subset {
        let kernels: std::collections::HashSet<_> = jobs.iter().map(|j| j.kernel).collect();
        eprintln!(
            "subset: {} (specialization, arch) pairs: all {} for {}, one specialization of each of the {} \
             kernels for the other archs (`cargo xtask kernels` compiles the full matrix)",
            pairs.len(),
            pairs.iter().filter(|p| p.1 == SUBSET_FULL_ARCH).count(),
            SUBSET_FULL_ARCH.name(),
            kernels.len()
        );
    }
    if args.list {
        for &(n, arch) in &pairs {
            println!(
                "{}\t{}\t{}",
                jobs[n].kernel,
                jobs[n].specialization,
                arch.name()
            );
        }
        println!("{} pairs", pairs.len());
        return Ok(());
    }
    let rows = compile_all(&tileiras, &jobs, &pairs, &archs, version, args)?;
    print_table(&rows);
    let failed: Vec<&Row> = rows.iter().filter(|r| r.outcome.is_err()).collect();
    if failed.is_empty() {
        println!("{} passed, 0 failed", rows.len());
        Ok(())
    } else {
        for r in &failed {
            eprintln!(
                "FAILED {} [{}] {}: {}",
                r.kernel,
                r.specialization,
                r.arch,
                r.outcome.as_ref().err().map(String::as_str).unwrap_or("")
            );
        }
        println!(
            "{} passed, {} failed",
            rows.len() - failed.len(),
            failed.len()
        );
        Err(format!("{} kernel compilations failed", failed.len()).into())
    }
}

/// Build and write every job of `pairs` once, then compile each (job, arch) pair on a small pool of
/// threads through the kernel cache.
fn compile_all(
    tileiras: &Tileiras,
    jobs: &[CompileJob],
    pairs: &[(usize, GpuArch)],
    archs: &[GpuArch],
    version: Version,
    args: &Args,
) -> Result<Vec<Row>, BoxError> {
    // IR build + bytecode: cheap, done serially so errors come out in catalog order.
    let mut work = Vec::new();
    let mut rows = Vec::new();
    for (n, job) in jobs.iter().enumerate() {
        let job_archs: Vec<GpuArch> = pairs.iter().filter(|p| p.0 == n).map(|p| p.1).collect();
        if job_archs.is_empty() {
            continue;
        }
        let bytes = job
            .build()
            .map_err(|e| e.to_string())
            .and_then(|m| write_module(&m, version).map_err(|e| e.to_string()));
        match bytes {
            Ok(bytes) => {
                if let Some(dir) = &args.out {
                    std::fs::write(dir.join(format!("{}-{n}.tilebc", job.kernel)), &bytes)?;
                }
                // fp8 jobs skip sm_80 (no fp8 types there): `CompileJob::supports`.
                for &arch in &job_archs {
                    work.push((n, job, arch, bytes.clone()));
                }
            }
            Err(e) => {
                for &arch in &job_archs {
                    rows.push(Row {
                        kernel: job.kernel.to_string(),
                        specialization: job.specialization.clone(),
                        arch: arch.name().to_string(),
                        bytecode_bytes: 0,
                        outcome: Err(format!("IR build: {e}")),
                    });
                }
            }
        }
    }
    let threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let total = work.len();
    let queue = Mutex::new(work.into_iter());
    let results = Mutex::new(Vec::new());
    let reused = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                    let Some((n, job, arch, bytes)) = next else {
                        break;
                    };
                    let t0 = Instant::now();
                    let outcome = cutile::launch::compile_bytecode_cached(
                        tileiras,
                        &bytes,
                        &CompileRequest::new(arch),
                    )
                    .map_err(|e| e.to_string())
                    .and_then(|(cubin, origin)| {
                        if origin != cutile::cache::Origin::Compiled {
                            reused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        if let Some(dir) = &args.out {
                            let path =
                                dir.join(format!("{}-{n}.{}.cubin", job.kernel, arch.name()));
                            std::fs::write(path, &cubin[..]).map_err(|e| e.to_string())?;
                        }
                        // The cubin of one kernel: its entry's resources (a cubin the reader
                        // cannot parse shows none rather than failing the compile).
                        let resources = cutile::runtime::cubin::inspect(&cubin)
                            .ok()
                            .and_then(|i| i.kernels.into_iter().find_map(|k| k.resources));
                        Ok(Compiled {
                            cubin_bytes: cubin.len(),
                            seconds: t0.elapsed().as_secs_f64(),
                            resources,
                        })
                    });
                    let row = Row {
                        kernel: job.kernel.to_string(),
                        specialization: job.specialization.clone(),
                        arch: arch.name().to_string(),
                        bytecode_bytes: bytes.len(),
                        outcome,
                    };
                    if let Ok(mut r) = results.lock() {
                        r.push((n, row));
                    }
                }
            });
        }
    });
    let mut compiled = results
        .into_inner()
        .map_err(|_| "a compile thread panicked")?;
    eprintln!(
        "{} of {total} cubins came from the kernel cache (compiled earlier in this run or a previous one)",
        reused.into_inner()
    );
    // Catalog order, then the order the archs were asked for.
    let arch_pos = |name: &str| archs.iter().position(|a| a.name() == name);
    compiled.sort_by_key(|(n, r)| (*n, arch_pos(&r.arch)));
    rows.extend(compiled.into_iter().map(|(_, r)| r));
    Ok(rows)
}

fn print_table(rows: &[Row]) {
    let w_kernel = rows
        .iter()
        .map(|r| r.kernel.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let w_spec = rows
        .iter()
        .map(|r| r.specialization.len())
        .max()
        .unwrap_or(14)
        .max(14);
    println!(
        "{:<w_kernel$}  {:<w_spec$}  {:<7}  {:>9}  {:>9}  {:>8}  {:>4}  {:>5}  {:>6}",
        "kernel", "specialization", "arch", "bytecode", "cubin", "seconds", "regs", "stack", "smem"
    );
    for r in rows {
        let dash = || "-".to_string();
        let (cubin, secs, [regs, stack, smem]) = match &r.outcome {
            Ok(c) => (
                c.cubin_bytes.to_string(),
                format!("{:.2}", c.seconds),
                resource_columns(c.resources.as_ref()),
            ),
            Err(_) => ("FAILED".to_string(), dash(), [dash(), dash(), dash()]),
        };
        println!(
            "{:<w_kernel$}  {:<w_spec$}  {:<7}  {:>9}  {:>9}  {:>8}  {regs:>4}  {stack:>5}  {smem:>6}",
            r.kernel, r.specialization, r.arch, r.bytecode_bytes, cubin, secs
        );
    }
    let spilled: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.outcome.as_ref().is_ok_and(|c| {
                c.resources
                    .as_ref()
                    .and_then(|k| k.stack_frame_bytes)
                    .is_some_and(|b| b > 0)
            })
        })
        .collect();
    if !spilled.is_empty() {
        // A stack frame is where ptxas puts spilled registers (and local arrays): a lead when a
        // kernel runs slower than its tile suggests.
        println!(
            "{} of {} cubins use a per-thread stack frame (register spills or local arrays)",
            spilled.len(),
            rows.len()
        );
    }
}

/// The `regs`, `stack` (bytes per thread) and `smem` (static shared bytes per block) columns; `-`
/// where the cubin does not say.
fn resource_columns(r: Option<&cutile::runtime::cubin::KernelResources>) -> [String; 3] {
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    match r {
        Some(k) => [
            opt(k.registers.map(u64::from)),
            opt(k.stack_frame_bytes.map(u64::from)),
            k.static_shared_bytes.to_string(),
        ],
        None => ["-".into(), "-".into(), "-".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resource columns show what the cubin records and `-` for what it does not.
    #[test]
    fn resource_columns_show_recorded_values_only() {
        let k = cutile::runtime::cubin::KernelResources {
            registers: Some(96),
            stack_frame_bytes: None,
            static_shared_bytes: 1040,
            code_bytes: Some(4096),
        };
        assert_eq!(resource_columns(Some(&k)), ["96", "-", "1040"]);
        assert_eq!(resource_columns(None), ["-", "-", "-"]);
    }

    /// The CI subset keeps every specialization on sm_90 and every kernel entry on every arch that can
    /// run it, and compiles less than the full matrix.
    #[test]
    fn subset_covers_every_kernel_on_every_arch() {
        let jobs = compile_jobs();
        let archs = [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120];
        let full = selected_pairs(&jobs, &archs, false);
        let subset = selected_pairs(&jobs, &archs, true);
        assert!(subset.len() < full.len());
        for (n, job) in jobs.iter().enumerate() {
            if job.supports(GpuArch::Sm90) {
                assert!(
                    subset.contains(&(n, GpuArch::Sm90)),
                    "{}",
                    job.specialization
                );
            }
        }
        for &arch in &archs {
            let want: std::collections::HashSet<&str> = jobs
                .iter()
                .filter(|j| j.supports(arch))
                .map(|j| j.kernel)
                .collect();
            let got: std::collections::HashSet<&str> = subset
                .iter()
                .filter(|p| p.1 == arch)
                .map(|p| jobs[p.0].kernel)
                .collect();
            let missing: Vec<_> = want.difference(&got).collect();
            assert!(
                missing.is_empty(),
                "{arch}: no specialization of {missing:?}"
            );
        }
    }
}
