//! `plan`: every host-API call `run` and `tune` make (the workload suite of `cutile_examples`), planned
//! without a GPU by the host API's own planner with every tuning candidate
//! (`launcher_plans(.., all_candidates = true)`, or the family planner on view strides), compiled with
//! tileiras into one bundle, re-opened, and every launch looked up as `run` will.

use std::path::Path;
use std::process::ExitCode;

use cutile::bundle::Bundle;
use cutile::launch::Plan;
use cutile::toolchain::{GpuArch, Tileiras};
use cutile_examples::workload::{Workload, suite};

use crate::BoxError;
use crate::aot::{build_bundle, uncovered};

/// Every workload `run` and `tune` call (checks, benchmarks, the tiny probe call).
pub fn workloads() -> Vec<Workload> {
    suite()
}

/// The launcher plans of every workload on `arch` with tileiras `version`, every tuning candidate
/// included (labels: `call: config arch`), one per distinct key. Two different keys a bundle cannot
/// tell apart (same kernel, specialization text and arch) are an error naming both calls.
pub fn plans(arch: GpuArch, version: &str) -> Result<Vec<(String, Plan)>, BoxError> {
    let mut seen = std::collections::HashSet::new();
    let mut slots: std::collections::HashMap<(String, String), String> = Default::default();
    let mut out = Vec::new();
    for w in workloads() {
        for (label, p) in w
            .plans(arch, version, true)
            .map_err(|e| format!("{}: {e}", w.name))?
        {
            if !seen.insert(*p.key.id()) {
                continue;
            }
            let slot = (
                p.key.kernel().to_string(),
                p.key.specialization().to_string(),
            );
            if let Some(other) = slots.insert(slot, label.clone()) {
                return Err(format!(
                    "`{label}` and `{other}` need different cubins under one bundle entry \
                     (same kernel and specialization text); give one of them other shapes"
                )
                .into());
            }
            out.push((label, p));
        }
    }
    Ok(out)
}

/// The launches on `arch` that would not find their cubin in `bundle`, computing keys as a launch
/// does with tileiras `version` (bundles ignore the version). Empty when the bundle covers `run`.
pub fn missing(bundle: &Bundle, arch: GpuArch, version: &str) -> Result<Vec<String>, BoxError> {
    Ok(uncovered(bundle, &plans(arch, version)?))
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
    let (mut all, mut verify) = (Vec::new(), Vec::new());
    for &arch in &archs {
        all.extend(plans(arch, &version)?);
        verify.extend(plans(arch, cutile::launch::NO_TOOLCHAIN)?);
    }
    let threads =
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    eprintln!(
        "compiling {} launches of {} host calls with tileiras {version} on {threads} threads",
        all.len(),
        workloads().len()
    );
    match build_bundle(&all, &verify, &tileiras, threads, bundle) {
        Ok(b) => {
            println!(
                "wrote {} ({} cubins for {} launches, every launch found on re-open)",
                bundle.display(),
                b.cubins,
                b.launches
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}
