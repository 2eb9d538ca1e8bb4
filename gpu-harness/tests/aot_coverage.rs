//! AOT coverage by class: a bundle built (with tileiras, as `cargo xtask aot` builds it) from the plans
//! of a few host calls serves every other call of the same class — same element type, same
//! configuration choice, same power-of-two divisibility of extents and strides, leading dims flattened
//! — and a call of another class is reported missing. Without tileiras it prints SKIPPED, or fails under
//! `CUTILE_REQUIRE_TOOLS=1`.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::bundle::Bundle;
use cutile::launch::{NO_TOOLCHAIN, Plan};
use cutile::toolchain::{GpuArch, Tileiras};
use cutile_kernels::op::{CallSpec, Target};
use gpu_harness::aot::{build_bundle, plans_for_calls};

const ARCH: GpuArch = GpuArch::Sm90;

fn plans(c: &CallSpec, version: &str) -> Vec<(String, Plan)> {
    plans_for_calls(std::slice::from_ref(c), &[ARCH], version, false)
        .unwrap_or_else(|e| panic!("{}: {e}", c.label()))
}

/// The configuration names the host API picks for `c`.
fn configs(c: &CallSpec) -> Vec<String> {
    c.plan(&Target::planning(ARCH), false)
        .unwrap()
        .launches
        .iter()
        .map(|l| l.config.clone())
        .collect()
}

fn tileiras_or_skip() -> Option<Tileiras> {
    match Tileiras::discover() {
        Ok(t) => Some(t),
        Err(e) => {
            if std::env::var("CUTILE_REQUIRE_TOOLS").is_ok_and(|v| v == "1") {
                panic!("tileiras is required (CUTILE_REQUIRE_TOOLS=1) but not found: {e}");
            }
            println!("SKIPPED: no tileiras ({e})");
            None
        }
    }
}

/// Calls of the classes of `base`: `(op, dtype, shape builder)` over the given extents.
fn same_class_calls() -> Vec<(CallSpec, CallSpec)> {
    let soft = CallSpec::new("softmax", "bf16", &[&[1000, 1023]], false);
    let rms = CallSpec::new("rms_norm", "bf16", &[&[300, 8191]], false);
    let gemm = CallSpec::new("gemm", "bf16", &[&[1000, 517], &[517, 1023]], false);
    let mut out = Vec::new();
    // rows ≡ 8 (mod 16), odd cols.
    for rows in [24i64, 200, 424, 1000, 1304, 2024, 3000, 4088] {
        for cols in [513i64, 555, 777, 901, 1001, 1023] {
            out.push((
                soft.clone(),
                CallSpec::new("softmax", "bf16", &[&[rows, cols]], false),
            ));
        }
    }
    // Leading dims flattened into 1000 rows (contiguous, so one row stride).
    for lead in [&[2i64, 500][..], &[4, 250], &[8, 125], &[2, 2, 250]] {
        let mut shape = lead.to_vec();
        shape.push(1023);
        out.push((
            soft.clone(),
            CallSpec::new("softmax", "bf16", &[&shape], false),
        ));
    }
    // rows ≡ 4 (mod 8), odd cols.
    for rows in [12i64, 100, 300, 1004, 2020] {
        for cols in [4097i64, 6001, 8191, 12345] {
            out.push((
                rms.clone(),
                CallSpec::new("rms_norm", "bf16", &[&[rows, cols]], false),
            ));
        }
    }
    out.push((
        rms.clone(),
        CallSpec::new("rms_norm", "bf16", &[&[3, 100, 8191]], false),
    ));
    // m ≡ 8 (mod 16), odd k and n.
    for m in [1000i64, 1304, 2024] {
        for (k, n) in [(517i64, 1023i64), (333, 1001), (1001, 777), (2049, 4095)] {
            out.push((
                gemm.clone(),
                CallSpec::new("gemm", "bf16", &[&[m, k], &[k, n]], false),
            ));
        }
    }
    out
}

#[test]
fn a_small_bundle_serves_every_call_of_its_classes() {
    let Some(tileiras) = tileiras_or_skip() else {
        return;
    };
    let base = [
        CallSpec::new("softmax", "bf16", &[&[1000, 1023]], false),
        CallSpec::new("rms_norm", "bf16", &[&[300, 8191]], false),
        CallSpec::new("gemm", "bf16", &[&[1000, 517], &[517, 1023]], false),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coverage.bundle");
    let version = tileiras.version().to_string();
    let built = build_bundle(
        &plans_for_calls(&base, &[ARCH], &version, false).unwrap(),
        &plans_for_calls(&base, &[ARCH], NO_TOOLCHAIN, false).unwrap(),
        &tileiras,
        2,
        &path,
    )
    .unwrap();
    // softmax 1, rms_norm 1, gemm 4: its odd k and n leave every operand unaligned, so a and b are
    // packed, the product runs on the packed copies and c is unpacked.
    assert_eq!(built.cubins, 6, "{built:?}");
    let bundle = Bundle::open(&path).unwrap();

    let mut served = 0;
    let mut other_config = Vec::new();
    for (b, c) in same_class_calls() {
        if configs(&c) != configs(&b) {
            // The host API picks another configuration: another class by definition.
            other_config.push(c.label());
            continue;
        }
        for (label, p) in plans(&c, NO_TOOLCHAIN) {
            assert!(
                bundle.find_key(&p.key).is_some(),
                "{label} (class of {}) not served: {}",
                b.label(),
                p.key
            );
        }
        served += 1;
    }
    assert!(
        served >= 40,
        "only {served} calls shared a configuration with the bundled ones; other configs: {other_config:?}"
    );

    // Other classes: element type, divisibility of an extent, rank of gemm's operands.
    for c in [
        CallSpec::new("softmax", "f32", &[&[1000, 1023]], false),
        CallSpec::new("softmax", "bf16", &[&[1000, 1024]], false),
        CallSpec::new("rms_norm", "f16", &[&[300, 8191]], false),
        CallSpec::new("gemm", "f16", &[&[1000, 517], &[517, 1023]], false),
        CallSpec::new("gemm", "bf16", &[&[1024, 512], &[512, 1024]], false),
    ] {
        let gaps: Vec<_> = plans(&c, NO_TOOLCHAIN)
            .into_iter()
            .filter(|(_, p)| bundle.find_key(&p.key).is_none())
            .collect();
        assert!(!gaps.is_empty(), "{} should not be served", c.label());
    }
}
