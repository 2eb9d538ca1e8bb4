//! `plan`: every host-API call `run` and `tune` make (the workload suite of `cutile_examples`), planned
//! without a GPU by the host API's own planner with every tuning candidate
//! (`launcher_plans(.., all_candidates = true)`, or the family planner on view strides), compiled with
//! tileiras into one bundle, re-opened, and every launch looked up as `run` will. With `--cases N
//! --seed S` the bundle also holds the kernels of the property cases `check` draws with the same ops,
//! count and seed, so a device without tileiras runs that check from it.

use std::path::Path;
use std::process::ExitCode;

use cutile::bundle::Bundle;
use cutile::launch::Plan;
use cutile::toolchain::{GpuArch, Tileiras};
use cutile_examples::workload::{Workload, of_ops, suite};

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
    plans_of(arch, version, &[])
}

/// [`plans`] of the workloads of `ops` only (all of them when `ops` is empty).
pub fn plans_of(
    arch: GpuArch,
    version: &str,
    ops: &[String],
) -> Result<Vec<(String, Plan)>, BoxError> {
    let mut ws = workloads();
    if !ops.is_empty() {
        let names: Vec<&str> = ops.iter().map(String::as_str).collect();
        ws = of_ops(ws, &names);
    }
    let mut seen = std::collections::HashSet::new();
    let mut slots: std::collections::HashMap<(String, String), String> = Default::default();
    let mut out = Vec::new();
    for w in ws {
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

/// Compiles the launches of every workload (of `ops` when not empty: a bundle for a narrowed
/// `check`/`bench --ops` run) for `archs` into `bundle`, plus, with `cases = Some((n, seed))`, those
/// of the property cases `check --cases n --seed seed --ops ops` draws.
pub fn plan(
    archs: &[String],
    bundle: &Path,
    jobs: Option<usize>,
    ops: &[String],
    cases: Option<(usize, u64)>,
) -> Result<ExitCode, BoxError> {
    let archs = archs
        .iter()
        .map(|a| a.parse::<GpuArch>())
        .collect::<Result<Vec<_>, _>>()?;
    let tileiras = Tileiras::discover().map_err(|e| {
        format!("plan needs tileiras (install it with `cargo xtask toolchain`): {e}")
    })?;
    let version = tileiras.version().to_string();
    let (mut all, mut verify) = (Vec::new(), Vec::new());
    let case_ws = match cases {
        Some((n, seed)) => crate::check::case_workloads(ops, n, seed)?,
        None => Vec::new(),
    };
    for &arch in &archs {
        for (list, v) in [
            (&mut all, version.as_str()),
            (&mut verify, cutile::launch::NO_TOOLCHAIN),
        ] {
            list.extend(plans_of(arch, v, ops)?);
            // The cases share kernels with the workloads: keep one plan per key.
            let known: std::collections::HashSet<_> =
                list.iter().map(|(_, p)| *p.key.id()).collect();
            list.extend(
                crate::check::distinct_plans(&case_ws, arch, v)
                    .into_iter()
                    .filter(|(_, p)| !known.contains(p.key.id())),
            );
        }
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
