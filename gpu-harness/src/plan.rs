//! `plan`: every workload `run` launches, described without a GPU and put through the launcher's own
//! cold path (`Launcher::plan_for`), compiled with tileiras into one bundle under the keys the launches
//! will look up.

use std::path::Path;
use std::process::ExitCode;

use cutile::bundle::{Bundle, BundleWriter};
use cutile::launch::aot::{compile_into_bundle, print_outcomes};
use cutile::launch::{Launcher, Plan};
use cutile::toolchain::{GpuArch, Tileiras};
use cutile_examples::run::{describe, layouts};
use cutile_examples::workload::suite;

use crate::BoxError;

/// Plans every workload for `arch` with tileiras `version` (labels: `name arch`).
pub fn plans(arch: GpuArch, version: &str) -> Result<Vec<(String, Plan)>, BoxError> {
    let mut out = Vec::new();
    for w in suite() {
        let l = layouts(&w);
        let args = describe(&w, &l);
        let p = Launcher::new(w.kernel.clone())
            .plan_for(&args, arch, version)
            .map_err(|e| format!("{}: {e}", w.name))?;
        out.push((format!("{} {}", w.name, arch.name()), p));
    }
    Ok(out)
}

/// The workloads whose launch on `arch` would not find its cubin in `bundle`, computing keys as a
/// launch does with tileiras `version` (bundles ignore the version). Empty when the bundle covers `run`.
pub fn missing(bundle: &Bundle, arch: GpuArch, version: &str) -> Result<Vec<String>, BoxError> {
    Ok(plans(arch, version)?
        .into_iter()
        .filter(|(_, p)| bundle.find_key(&p.key).is_none())
        .map(|(label, p)| format!("{label}: {}", p.key))
        .collect())
}

pub fn plan(archs: &[String], bundle: &Path, jobs: Option<usize>) -> Result<ExitCode, BoxError> {
    let archs = archs
        .iter()
        .map(|a| a.parse::<GpuArch>())
        .collect::<Result<Vec<_>, _>>()?;
    let tileiras = Tileiras::discover().map_err(|e| {
        format!("plan needs tileiras (install it with `cargo xtask toolchain`): {e}")
    })?;
    let version = tileiras.version().to_string();
    let mut all = Vec::new();
    for &arch in &archs {
        all.extend(plans(arch, &version)?);
    }
    let threads =
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    eprintln!(
        "compiling {} launches with tileiras {version} on {threads} threads",
        all.len()
    );
    let mut writer = BundleWriter::new();
    let outcomes = compile_into_bundle(&all, &tileiras, threads, &mut writer);
    let failed = print_outcomes(&outcomes);
    if failed > 0 {
        eprintln!("{failed} launches failed to compile; no bundle written");
        return Ok(ExitCode::FAILURE);
    }
    if let Some(dir) = bundle.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    writer.write(bundle)?;
    // Read it back and look every launch up the way `run` will, where no tileiras is installed.
    let written = Bundle::open(bundle)?;
    for &arch in &archs {
        let gaps = missing(&written, arch, cutile::launch::NO_TOOLCHAIN)?;
        if !gaps.is_empty() {
            return Err(format!("the bundle does not cover every launch: {gaps:?}").into());
        }
    }
    println!(
        "wrote {} ({} cubins for {} launches)",
        bundle.display(),
        writer.len(),
        all.len()
    );
    Ok(ExitCode::SUCCESS)
}
