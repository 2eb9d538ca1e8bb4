//! AOT bundles: round trip, selection by kernel / specialization / arch, the errors when something is
//! missing, the lookup chain, and robustness against damaged files.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};

use cutile::bundle::{Bundle, BundleError, BundleSet, BundleWriter};
use cutile::cache::{CacheConfig, CacheKey, KernelCache, KeyParts, Origin};
use proptest::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("no compiler here")]
struct NoCompiler;

fn key(kernel: &str, specialization: &str, arch: &str) -> CacheKey {
    CacheKey::new(KeyParts {
        kernel,
        source_hash: "src1",
        specialization,
        arch,
        tileiras_version: "13.5.37",
        options: "O3",
    })
}

fn fake_cubin(k: &CacheKey) -> Vec<u8> {
    format!("cubin of {k}").into_bytes()
}

/// vadd × {f32, f16} × {sm_90, sm_100} and softmax f32 for sm_90.
fn sample_keys() -> Vec<CacheKey> {
    let mut keys = Vec::new();
    for spec in ["T=f32", "T=f16"] {
        for arch in ["sm_90", "sm_100"] {
            keys.push(key("vadd", spec, arch));
        }
    }
    keys.push(key("softmax", "T=f32", "sm_90"));
    keys
}

fn sample_bytes() -> Vec<u8> {
    let mut w = BundleWriter::new();
    for k in sample_keys() {
        w.add(&k, fake_cubin(&k)).unwrap();
    }
    assert_eq!(w.len(), 5);
    w.to_bytes()
}

#[test]
fn round_trip_keeps_every_entry_and_its_key() {
    let bundle = Bundle::from_bytes(sample_bytes()).unwrap();
    assert_eq!(bundle.len(), 5);
    for (entry, k) in bundle.entries().iter().zip(sample_keys()) {
        assert_eq!(entry.key(), &k);
        assert_eq!(entry.key().hex(), k.hex());
        assert_eq!(bundle.cubin(entry), fake_cubin(&k).as_slice());
    }
    for k in sample_keys() {
        assert_eq!(
            bundle
                .find(k.kernel(), k.specialization(), k.arch())
                .unwrap(),
            fake_cubin(&k).as_slice()
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kernels.cubins");
    let mut w = BundleWriter::new();
    for k in sample_keys() {
        w.add(&k, fake_cubin(&k)).unwrap();
    }
    w.write(&path).unwrap();
    let opened = Bundle::open(&path).unwrap();
    assert_eq!(opened.path(), Some(path.as_path()));
    assert_eq!(opened.len(), 5);
}

#[test]
fn selection_by_arch_and_what_is_missing() {
    let bundle = Bundle::from_bytes(sample_bytes()).unwrap();
    let sm100 = key("vadd", "T=f16", "sm_100");
    assert_eq!(
        bundle.find("vadd", "T=f16", "sm_100").unwrap(),
        fake_cubin(&sm100).as_slice()
    );

    match bundle.find("vadd", "T=f16", "sm_120") {
        Err(e @ BundleError::WrongArch { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("sm_120") && msg.contains("sm_90") && msg.contains("sm_100"),
                "{msg}"
            );
            let BundleError::WrongArch {
                requested, present, ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(requested, "sm_120");
            assert_eq!(present, vec!["sm_100", "sm_90"]);
        }
        other => panic!("expected WrongArch, got {other:?}"),
    }
    match bundle.find("softmax", "T=f32", "sm_100") {
        Err(BundleError::WrongArch { present, .. }) => assert_eq!(present, vec!["sm_90"]),
        other => panic!("expected WrongArch, got {other:?}"),
    }
    match bundle.find("vadd", "T=bf16", "sm_90") {
        Err(BundleError::SpecializationNotFound { present, .. }) => {
            assert_eq!(present, vec!["T=f16", "T=f32"])
        }
        other => panic!("expected SpecializationNotFound, got {other:?}"),
    }
    match bundle.find("matmul", "T=f32", "sm_90") {
        Err(BundleError::KernelNotFound { present, .. }) => {
            assert_eq!(present, vec!["softmax", "vadd"])
        }
        other => panic!("expected KernelNotFound, got {other:?}"),
    }
}

#[test]
fn duplicates_are_rejected() {
    let mut w = BundleWriter::new();
    let k = key("vadd", "T=f32", "sm_90");
    w.add(&k, vec![1]).unwrap();
    // Same kernel/specialization/arch from another compiler version is still a duplicate.
    let k2 = CacheKey::new(KeyParts {
        tileiras_version: "13.4.92",
        ..k.parts()
    });
    assert!(matches!(
        w.add(&k2, vec![2]),
        Err(BundleError::Duplicate { .. })
    ));
}

#[test]
fn key_lookup_ignores_the_compiler_version_but_not_the_source() {
    let bundle = Bundle::from_bytes(sample_bytes()).unwrap();
    let k = key("vadd", "T=f32", "sm_90");
    let newer_compiler = CacheKey::new(KeyParts {
        tileiras_version: "13.6.0",
        ..k.parts()
    });
    assert_eq!(
        bundle.find_key(&newer_compiler),
        Some(fake_cubin(&k).as_slice())
    );
    let edited = CacheKey::new(KeyParts {
        source_hash: "src2",
        ..k.parts()
    });
    assert_eq!(bundle.find_key(&edited), None, "stale entry for old source");
    let other_opts = CacheKey::new(KeyParts {
        options: "O0",
        ..k.parts()
    });
    assert_eq!(bundle.find_key(&other_opts), None);
}

#[test]
fn lookup_chain_prefers_bundles_over_compiling() {
    let set = BundleSet::new();
    set.add(Bundle::from_bytes(sample_bytes()).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(CacheConfig::in_dir(dir.path()));
    let calls = AtomicUsize::new(0);
    let compile = || -> Result<Vec<u8>, NoCompiler> {
        calls.fetch_add(1, Ordering::SeqCst);
        Err(NoCompiler)
    };

    let k = key("softmax", "T=f32", "sm_90");
    let got = cache.fetch(&k, Some(&set), compile).unwrap();
    assert_eq!(
        (&*got.cubin, got.origin),
        (fake_cubin(&k).as_slice(), Origin::Bundle)
    );
    let again = cache.fetch(&k, Some(&set), compile).unwrap();
    assert_eq!(again.origin, Origin::Memory);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(cache.stats().bundle_hits, 1);

    // Not in any bundle: falls through to the compiler, whose error comes back typed.
    let missing = key("softmax", "T=f32", "sm_120");
    let err = cache.get_or_resolve(&missing, &set, compile).unwrap_err();
    assert!(err.to_string().contains("no compiler here"), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn bundle_lists_load_from_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.bundle"), dir.path().join("b.bundle"));
    let mut w = BundleWriter::new();
    w.add(&key("x", "s", "sm_90"), vec![1, 2, 3]).unwrap();
    w.write(&a).unwrap();
    let mut w = BundleWriter::new();
    w.add(&key("y", "s", "sm_90"), vec![4]).unwrap();
    w.write(&b).unwrap();

    let set = BundleSet::new();
    let list = std::env::join_paths([&a, &b]).unwrap();
    assert_eq!(set.add_paths(&list).unwrap(), 2);
    assert_eq!(
        set.find_key(&key("y", "s", "sm_90")).unwrap().as_deref(),
        Some(&[4u8][..])
    );

    let missing = std::env::join_paths([dir.path().join("nope.bundle")]).unwrap();
    let err = BundleSet::new().add_paths(&missing).unwrap_err();
    assert!(matches!(err, BundleError::Io { .. }));
    assert!(err.to_string().contains("nope.bundle"));
}

#[test]
fn every_single_byte_change_is_rejected() {
    let bytes = sample_bytes();
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        assert!(
            Bundle::from_bytes(damaged).is_err(),
            "flip at {at} accepted"
        );
    }
}

#[test]
fn every_truncation_and_extension_is_rejected() {
    let bytes = sample_bytes();
    for len in 0..bytes.len() {
        assert!(
            Bundle::from_bytes(bytes[..len].to_vec()).is_err(),
            "prefix {len} accepted"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Bundle::from_bytes(longer).is_err());
}

#[test]
fn hostile_headers_fail_cleanly() {
    let mut bytes = sample_bytes();
    bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes()); // entry count
    assert!(matches!(
        Bundle::from_bytes(bytes),
        Err(BundleError::Malformed { .. })
    ));
    let mut bytes = sample_bytes();
    bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes()); // index length
    assert!(matches!(
        Bundle::from_bytes(bytes),
        Err(BundleError::Malformed { .. })
    ));
    let mut bytes = sample_bytes();
    bytes[8] = 2; // version
    assert!(matches!(
        Bundle::from_bytes(bytes),
        Err(BundleError::UnsupportedVersion {
            found: 2,
            supported: 1
        })
    ));
    assert!(
        Bundle::from_bytes(BundleWriter::new().to_bytes())
            .unwrap()
            .is_empty()
    );
}

proptest! {
    #[test]
    fn damaged_bundles_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..24),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = sample_bytes();
        for (at, v) in &edits {
            let i = at.index(bytes.len());
            bytes[i] = *v;
        }
        if truncate {
            let len = cut.index(bytes.len());
            bytes.truncate(len);
            prop_assert!(Bundle::from_bytes(bytes).is_err());
        } else {
            let _ = Bundle::from_bytes(bytes);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        let mut bytes = bytes;
        if magic && bytes.len() >= 12 {
            bytes[..8].copy_from_slice(b"CUTILEBN");
            bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        }
        prop_assert!(Bundle::from_bytes(bytes).is_err());
    }
}
