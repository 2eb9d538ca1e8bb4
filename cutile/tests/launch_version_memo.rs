//! The tileiras version in cache keys is remembered next to the disk cache, so a later process can key
//! its lookups without running tileiras. One test per process: it sets `CUTILE_CACHE_DIR` first.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::launch::{NO_TOOLCHAIN, key_toolchain_version, toolchain};

#[test]
fn version_is_memoized_in_the_cache_dir() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread or cache reads the environment in this test process.
    unsafe { std::env::set_var("CUTILE_CACHE_DIR", dir.path()) };
    let v = key_toolchain_version();
    let Ok(t) = toolchain() else {
        assert_eq!(v, NO_TOOLCHAIN);
        cutile_testkit::skip(
            "version_is_memoized_in_the_cache_dir",
            &format!("tileiras not found, keys say `{NO_TOOLCHAIN}`"),
        );
        return;
    };
    assert_eq!(v, t.version().to_string());
    let memos: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "version"))
        .collect();
    assert_eq!(memos.len(), 1, "{memos:?}");
    assert_eq!(std::fs::read_to_string(&memos[0]).unwrap(), v);
    // The disk layer does not mistake it for an entry.
    let disk = cutile::cache::DiskCache::new(dir.path(), 1 << 20);
    assert!(disk.entries().unwrap().is_empty());
}
