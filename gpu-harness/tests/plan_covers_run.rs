//! `plan` enumerates exactly the launches `run` makes: a bundle holding the planned keys (made with a
//! tileiras version) serves every launch computed where no tileiras is installed, and a missing entry is
//! reported by name.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::bundle::{Bundle, BundleWriter};
use cutile::launch::NO_TOOLCHAIN;
use cutile::toolchain::GpuArch;
use gpu_harness::plan::{missing, plans};

fn bundle_of(skip: Option<usize>) -> (Bundle, Vec<String>) {
    let planned = plans(GpuArch::Sm90, "13.5.37").unwrap();
    let mut w = BundleWriter::new();
    let mut seen = std::collections::HashSet::new();
    let mut labels = vec![];
    for (i, (label, p)) in planned.iter().enumerate() {
        if Some(i) == skip || !seen.insert(*p.key.id()) {
            continue;
        }
        w.add(&p.key, format!("cubin of {label}").into_bytes())
            .unwrap();
        labels.push(label.clone());
    }
    (Bundle::from_bytes(w.to_bytes()).unwrap(), labels)
}

#[test]
fn planned_bundle_covers_every_launch() {
    let (b, _) = bundle_of(None);
    assert_eq!(
        missing(&b, GpuArch::Sm90, NO_TOOLCHAIN).unwrap(),
        Vec::<String>::new()
    );
    // Another arch is not covered at all.
    let other = missing(&b, GpuArch::Sm100, NO_TOOLCHAIN).unwrap();
    assert_eq!(
        other.len(),
        plans(GpuArch::Sm100, NO_TOOLCHAIN).unwrap().len()
    );
}

#[test]
fn a_missing_entry_is_named() {
    let (b, labels) = bundle_of(Some(0));
    let gaps = missing(&b, GpuArch::Sm90, NO_TOOLCHAIN).unwrap();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    let first = plans(GpuArch::Sm90, NO_TOOLCHAIN).unwrap().remove(0).0;
    assert!(gaps[0].starts_with(&first), "{gaps:?}");
    assert!(!labels.contains(&first));
}
