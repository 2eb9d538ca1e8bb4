//! Cache keys and the in-memory, single-flight layer.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use cutile::cache::{
    CacheConfig, CacheError, CacheKey, KernelCache, KeyParts, Origin, source_hash,
};

#[derive(Debug, thiserror::Error)]
#[error("tileiras said no: {0}")]
struct FakeCompileError(String);

fn parts() -> KeyParts<'static> {
    KeyParts {
        kernel: "kernels::vadd",
        source_hash: "5eed",
        specialization: "T=f32,TILE=1024",
        arch: "sm_90",
        tileiras_version: "13.5.37",
        options: "O3",
    }
}

fn key() -> CacheKey {
    CacheKey::new(parts())
}

fn ok(bytes: &[u8]) -> Result<Vec<u8>, FakeCompileError> {
    Ok(bytes.to_vec())
}

#[test]
fn every_key_part_changes_the_id() {
    let base = key();
    assert_eq!(base.hex().len(), 64);
    assert_eq!(base, key(), "deterministic");
    let variants: Vec<KeyParts> = vec![
        KeyParts {
            kernel: "kernels::vsub",
            ..parts()
        },
        KeyParts {
            source_hash: "5eee",
            ..parts()
        },
        KeyParts {
            specialization: "T=f16,TILE=1024",
            ..parts()
        },
        KeyParts {
            arch: "sm_100",
            ..parts()
        },
        KeyParts {
            tileiras_version: "13.4.92",
            ..parts()
        },
        KeyParts {
            options: "O0",
            ..parts()
        },
    ];
    for v in variants {
        assert_ne!(CacheKey::new(v.clone()).id(), base.id(), "{v:?}");
    }
    // Field boundaries are part of the encoding: moving a character between fields changes the id.
    let a = CacheKey::new(KeyParts {
        kernel: "ab",
        source_hash: "c",
        ..parts()
    });
    let b = CacheKey::new(KeyParts {
        kernel: "a",
        source_hash: "bc",
        ..parts()
    });
    assert_ne!(a.id(), b.id());
}

#[test]
fn key_display_is_readable() {
    let shown = key().to_string();
    for needle in [
        "kernels::vadd",
        "T=f32,TILE=1024",
        "sm_90",
        "13.5.37",
        "O3",
        &key().hex()[..16],
    ] {
        assert!(shown.contains(needle), "{shown:?} lacks {needle:?}");
    }
}

#[test]
fn source_hash_covers_source_and_dsl_version() {
    let h = source_hash(b"fn k() {}", "0.1.0");
    assert_eq!(h.len(), 64);
    assert_ne!(h, source_hash(b"fn k() { }", "0.1.0"));
    assert_ne!(h, source_hash(b"fn k() {}", "0.1.1"));
}

#[test]
fn a_hit_does_not_call_the_closure() {
    let cache = KernelCache::new(CacheConfig::memory_only());
    let calls = AtomicUsize::new(0);
    let compile = || {
        calls.fetch_add(1, Ordering::SeqCst);
        ok(b"cubin-1")
    };
    let first = cache.fetch(&key(), None, compile).unwrap();
    assert_eq!(
        (&*first.cubin, first.origin),
        (&b"cubin-1"[..], Origin::Compiled)
    );
    let second = cache
        .fetch(&key(), None, || -> Result<Vec<u8>, FakeCompileError> {
            calls.fetch_add(1, Ordering::SeqCst);
            ok(b"other")
        })
        .unwrap();
    assert_eq!(
        (&*second.cubin, second.origin),
        (&b"cubin-1"[..], Origin::Memory)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Another key is another entry.
    let other = CacheKey::new(KeyParts {
        arch: "sm_100",
        ..parts()
    });
    assert_eq!(
        &*cache.get_or_compile(&other, || ok(b"cubin-2")).unwrap(),
        b"cubin-2"
    );
    let s = cache.stats();
    assert_eq!((s.compiles, s.memory_hits), (2, 1));
}

#[test]
fn concurrent_callers_share_one_compile() {
    const THREADS: usize = 16;
    let cache = Arc::new(KernelCache::new(CacheConfig::memory_only()));
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (cache, calls, barrier) = (cache.clone(), calls.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                cache
                    .get_or_compile(&key(), || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(300));
                        ok(b"the cubin")
                    })
                    .unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(&*h.join().unwrap(), b"the cubin");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let s = cache.stats();
    assert_eq!(s.compiles, 1);
    assert_eq!(s.shared_waits + s.memory_hits, THREADS as u64 - 1);
}

#[test]
fn a_failure_reaches_every_waiter_and_is_not_cached() {
    const THREADS: usize = 8;
    let cache = Arc::new(KernelCache::new(CacheConfig::memory_only()));
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (cache, calls, barrier) = (cache.clone(), calls.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                cache.get_or_compile(&key(), || -> Result<Vec<u8>, _> {
                    calls.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(300));
                    Err(FakeCompileError("exit 3".into()))
                })
            })
        })
        .collect();
    for h in handles {
        match h.join().unwrap() {
            Err(CacheError::Compile { key: k, source }) => {
                assert!(k.contains("kernels::vadd"));
                assert!(source.downcast_ref::<FakeCompileError>().is_some());
                assert!(source.to_string().contains("exit 3"));
            }
            other => panic!("expected the compile error, got {other:?}"),
        }
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "waiters share the failed attempt"
    );
    // Not cached: the next call compiles again, and can succeed.
    assert_eq!(
        &*cache.get_or_compile(&key(), || ok(b"fixed")).unwrap(),
        b"fixed"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().compiles, 2);
    assert_eq!(cache.stats().compile_failures, 1);
}

#[test]
fn a_panicking_compile_releases_waiters() {
    let cache = Arc::new(KernelCache::new(CacheConfig::memory_only()));
    let started = Arc::new(Barrier::new(2));
    let leader = {
        let (cache, started) = (cache.clone(), started.clone());
        thread::spawn(move || {
            cache.get_or_compile(&key(), || -> Result<Vec<u8>, FakeCompileError> {
                started.wait();
                thread::sleep(Duration::from_millis(300));
                panic!("compiler crashed");
            })
        })
    };
    started.wait();
    let waiter = cache.get_or_compile(&key(), || ok(b"unused"));
    assert!(
        matches!(waiter, Err(CacheError::CompilePanicked { .. })),
        "{waiter:?}"
    );
    assert!(
        leader.join().is_err(),
        "the leader's panic propagates to its own caller"
    );
    assert_eq!(
        &*cache.get_or_compile(&key(), || ok(b"again")).unwrap(),
        b"again"
    );
}

#[test]
fn clearing_memory_forces_a_new_lookup() {
    let cache = KernelCache::new(CacheConfig::memory_only());
    cache.get_or_compile(&key(), || ok(b"one")).unwrap();
    cache.clear_memory();
    assert_eq!(
        &*cache.get_or_compile(&key(), || ok(b"two")).unwrap(),
        b"two"
    );
}
