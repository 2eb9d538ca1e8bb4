//! Every workload of the examples and the GPU harness plans without a GPU: its described arguments pass
//! the launcher's checks, specialize, and give a launch grid; names are unique (they key the reports).

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::launch::{Launcher, NO_TOOLCHAIN};
use cutile::toolchain::GpuArch;
use cutile_examples::run::{describe, layouts};
use cutile_examples::workload::{GridRule, suite};

#[test]
fn every_workload_plans_and_has_a_grid() {
    let all = suite();
    let mut names = std::collections::HashSet::new();
    for w in &all {
        assert!(
            names.insert(w.name.clone()),
            "duplicate workload {}",
            w.name
        );
        let l = layouts(w);
        let args = describe(w, &l);
        let plan = Launcher::new(w.kernel.clone())
            .plan_for(&args, GpuArch::Sm90, NO_TOOLCHAIN)
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        let grid = plan
            .signature
            .grid(plan.entry(), &args)
            .unwrap_or_else(|e| panic!("{}: {e}", w.name))
            .unwrap_or_else(|| panic!("{}: empty grid", w.name));
        if w.grid == GridRule::Derived {
            assert!(grid.0 >= 1 && grid.1 >= 1 && grid.2 >= 1, "{}", w.name);
        }
        assert!(
            w.reference.is_some() || w.name.contains("4096"),
            "{}",
            w.name
        );
    }
    assert!(all.len() >= 30, "{} workloads", all.len());
}

#[test]
fn ragged_checks_cover_each_kernel_family() {
    let names: Vec<String> = cutile_examples::workload::checks()
        .into_iter()
        .map(|w| w.name)
        .collect();
    for family in [
        "vadd f32 1000003",
        "softmax bf16 1000x1023",
        "softmax f32 4097x129",
        "softmax_w8 bf16 1000x1023",
        "softmax_w16 f32 4097x129",
        "softmax_online bf16 1000x1023",
        "softmax_rows f32 4097x129",
        "gemm bf16 1000x1023x517",
        "gemm_persistent bf16 1000x1023x517",
        "rms_norm bf16 1000x1023",
        "layer_norm_looped bf16 300x8191",
        "attention_causal bf16 8x1000x64",
    ] {
        assert!(
            names.iter().any(|n| n == family),
            "{family} missing from {names:?}"
        );
    }
}
