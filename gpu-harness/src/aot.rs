//! Building an AOT bundle from launcher plans and proving it serves them: what `gpu-harness plan` and
//! `cargo xtask aot` share. The plans come from the host API's planner
//! (`cutile_kernels::op::registry::launcher_plans`, or [`Workload::plans`] for views), so a bundle holds
//! exactly the kernels the host ops look up, under the keys they compute.
//!
//! [`Workload::plans`]: cutile_examples::workload::Workload::plans

use std::path::Path;

use cutile::bundle::{Bundle, BundleWriter};
use cutile::launch::Plan;
use cutile::launch::aot::{compile_into_bundle, print_outcomes};
use cutile::toolchain::Tileiras;
use cutile_kernels::op::CallSpec;

use crate::BoxError;

/// What [`build_bundle`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Built {
    /// Distinct cubins in the bundle.
    pub cubins: usize,
    /// Planned launches (a cubin serves every launch of its key).
    pub launches: usize,
    /// File size.
    pub bytes: u64,
}

/// The labels (and keys) of `plans` whose cubin `bundle` lacks. Bundles ignore the tileiras version.
pub fn uncovered(bundle: &Bundle, plans: &[(String, Plan)]) -> Vec<String> {
    plans
        .iter()
        .filter(|(_, p)| bundle.find_key(&p.key).is_none())
        .map(|(label, p)| format!("{label}: {}", p.key))
        .collect()
}

/// Compiles `plans` with `tileiras` on `threads` threads into the bundle `out`, then re-opens the file
/// and looks up every plan of `verify` (the same calls planned as a machine without tileiras plans
/// them, `cutile::launch::NO_TOOLCHAIN`): an error names every launch the bundle would not serve.
pub fn build_bundle(
    plans: &[(String, Plan)],
    verify: &[(String, Plan)],
    tileiras: &Tileiras,
    threads: usize,
    out: &Path,
) -> Result<Built, BoxError> {
    if plans.is_empty() {
        return Err("no launches to compile".into());
    }
    let mut writer = BundleWriter::new();
    let outcomes = compile_into_bundle(plans, tileiras, threads.max(1), &mut writer);
    let failed = print_outcomes(&outcomes);
    if failed > 0 {
        return Err(format!("{failed} launches failed to compile; no bundle written").into());
    }
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    writer.write(out)?;
    let written = Bundle::open(out)?;
    let gaps = uncovered(&written, verify);
    if !gaps.is_empty() {
        return Err(format!(
            "{} does not serve {} planned launches: {gaps:?}",
            out.display(),
            gaps.len()
        )
        .into());
    }
    Ok(Built {
        cubins: writer.len(),
        launches: plans.len(),
        bytes: std::fs::metadata(out)?.len(),
    })
}

/// A `--shapes` file: `[[call]]` tables of `op`, `dtype`, `shapes` and (attention) `causal`.
#[derive(Debug, serde::Deserialize)]
struct ShapesFile {
    #[serde(default)]
    call: Vec<CallSpec>,
}

/// Reads a shapes file (TOML), e.g.
///
/// ```toml
/// [[call]]
/// op = "softmax"
/// dtype = "bf16"
/// shapes = [[8192, 8192]]
/// causal = false
/// ```
pub fn read_shapes(path: &Path) -> Result<Vec<CallSpec>, BoxError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_shapes(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}

/// Parses the text of a shapes file.
pub fn parse_shapes(text: &str) -> Result<Vec<CallSpec>, BoxError> {
    let file: ShapesFile = toml::from_str(text)?;
    if file.call.is_empty() {
        return Err("no [[call]] tables".into());
    }
    Ok(file.call)
}

/// The calls of `cargo xtask aot`: those of the `shapes` file, or every family's
/// `representative_calls()`; then only those of `ops` when it is not empty. An unknown op is an error.
pub fn select_calls(ops: &[String], shapes: Option<&Path>) -> Result<Vec<CallSpec>, BoxError> {
    for op in ops {
        cutile_kernels::op::registry::find(op)?;
    }
    let calls = match shapes {
        Some(p) => read_shapes(p)?,
        None => cutile_kernels::catalog::representative_calls(),
    };
    let calls: Vec<CallSpec> = calls
        .into_iter()
        .filter(|c| ops.is_empty() || ops.contains(&c.op))
        .collect();
    if calls.is_empty() {
        return Err(format!("no call of ops {ops:?} to compile").into());
    }
    Ok(calls)
}

/// The launcher plans of `calls` on each of `archs` with tileiras `version` (every tuning candidate's
/// with `all_candidates`): `launcher_plans` per arch.
pub fn plans_for_calls(
    calls: &[CallSpec],
    archs: &[cutile::toolchain::GpuArch],
    version: &str,
    all_candidates: bool,
) -> Result<Vec<(String, Plan)>, BoxError> {
    let mut out = Vec::new();
    for &arch in archs {
        out.extend(cutile_kernels::op::registry::launcher_plans(
            calls,
            arch,
            version,
            all_candidates,
        )?);
    }
    Ok(out)
}
