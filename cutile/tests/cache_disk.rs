//! The disk layer: persistence, verification (corruption, truncation, wrong key), eviction, the off
//! switch, configuration from the environment, and the lock across processes.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use cutile::cache::{
    CacheConfig, CacheError, CacheKey, DEFAULT_MAX_DISK_BYTES, DiskCache, DiskRead, EntryError,
    KernelCache, KeyParts, Origin, parse_size,
};

#[derive(Debug, thiserror::Error)]
#[error("compile failed")]
struct Never;

fn key(name: &str) -> CacheKey {
    CacheKey::new(KeyParts {
        kernel: name,
        source_hash: "abc",
        specialization: "T=f32",
        arch: "sm_90",
        tileiras_version: "13.5.37",
        options: "O3",
    })
}

fn cubin(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ tag).collect()
}

/// A fresh cache (memory empty) on the disk directory `dir`.
fn cache_on(dir: &Path) -> KernelCache {
    KernelCache::new(CacheConfig::in_dir(dir))
}

/// A compile closure that counts its calls.
fn counted<'a>(
    calls: &'a AtomicUsize,
    bytes: &'a [u8],
) -> impl FnOnce() -> Result<Vec<u8>, Never> + 'a {
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(bytes.to_vec())
    }
}

#[test]
fn entries_persist_across_cache_instances() {
    let dir = tempfile::tempdir().unwrap();
    let calls = AtomicUsize::new(0);
    let payload = cubin(1, 5000);
    let got = cache_on(dir.path())
        .fetch(&key("k"), None, counted(&calls, &payload))
        .unwrap();
    assert_eq!(got.origin, Origin::Compiled);

    let path = DiskCache::new(dir.path(), u64::MAX).entry_path(&key("k"));
    assert!(path.starts_with(dir.path().join(&key("k").hex()[..2])));
    let file = fs::read(&path).unwrap();
    assert_eq!(&file[..8], b"CUTILEKC");
    assert_eq!(&file[file.len() - payload.len()..], payload.as_slice());

    let again = cache_on(dir.path())
        .fetch(&key("k"), None, counted(&calls, b"unused"))
        .unwrap();
    assert_eq!(
        (&*again.cubin, again.origin),
        (payload.as_slice(), Origin::Disk)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Damages the stored entry of `key("k")` with `damage`, then checks a new cache instance rejects it,
/// deletes it, recompiles once and stores a good entry again.
fn assert_damage_is_recompiled(damage: impl Fn(&Path), expect: fn(&EntryError) -> bool) {
    let dir = tempfile::tempdir().unwrap();
    let disk = DiskCache::new(dir.path(), u64::MAX);
    let payload = cubin(2, 3000);
    cache_on(dir.path())
        .get_or_compile(&key("k"), || Ok::<_, Never>(payload.clone()))
        .unwrap();
    let path = disk.entry_path(&key("k"));
    damage(&path);

    match disk.read(&key("k")).unwrap() {
        DiskRead::Corrupt(why) => assert!(expect(&why), "unexpected reason {why:?}"),
        other => panic!("damaged entry was not rejected: {other:?}"),
    }
    assert!(!path.exists(), "rejected entry is deleted");

    damage_again_after_rewrite(dir.path(), &payload, damage);
}

fn damage_again_after_rewrite(dir: &Path, payload: &[u8], damage: impl Fn(&Path)) {
    let disk = DiskCache::new(dir, u64::MAX);
    // Put a good entry back, damage it, and go through KernelCache this time.
    disk.write(&key("k"), payload).unwrap();
    damage(&disk.entry_path(&key("k")));
    let calls = AtomicUsize::new(0);
    let cache = cache_on(dir);
    let got = cache
        .fetch(&key("k"), None, counted(&calls, payload))
        .unwrap();
    assert_eq!((&*got.cubin, got.origin), (payload, Origin::Compiled));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().corrupt_entries_removed, 1);
    assert!(matches!(disk.read(&key("k")).unwrap(), DiskRead::Hit(p) if p == payload));
}

fn flip(at: fn(usize) -> usize) -> impl Fn(&Path) {
    move |p: &Path| {
        let mut b = fs::read(p).unwrap();
        let i = at(b.len());
        b[i] ^= 0x40;
        fs::write(p, b).unwrap();
    }
}

fn truncate(to: fn(usize) -> usize) -> impl Fn(&Path) {
    move |p: &Path| {
        let b = fs::read(p).unwrap();
        fs::write(p, &b[..to(b.len())]).unwrap();
    }
}

#[test]
fn a_flipped_payload_byte_is_caught_by_the_checksum() {
    assert_damage_is_recompiled(flip(|len| len - 100), |e| *e == EntryError::Checksum);
}

#[test]
fn a_flipped_header_byte_is_caught() {
    assert_damage_is_recompiled(flip(|_| 2), |e| *e == EntryError::BadMagic);
    assert_damage_is_recompiled(flip(|_| 8), |e| matches!(e, EntryError::Version { .. }));
    assert_damage_is_recompiled(flip(|_| 20), |e| *e == EntryError::KeyMismatch);
    assert_damage_is_recompiled(flip(|_| 48), |e| matches!(e, EntryError::Length { .. }));
    assert_damage_is_recompiled(flip(|_| 60), |e| *e == EntryError::Checksum);
}

#[test]
fn truncated_entries_are_recompiled() {
    assert_damage_is_recompiled(truncate(|_| 0), |e| {
        matches!(e, EntryError::Truncated { .. })
    });
    assert_damage_is_recompiled(truncate(|_| 50), |e| {
        matches!(e, EntryError::Truncated { .. })
    });
    assert_damage_is_recompiled(truncate(|_| 88), |e| matches!(e, EntryError::Length { .. }));
    assert_damage_is_recompiled(truncate(|l| l - 1), |e| {
        matches!(e, EntryError::Length { .. })
    });
}

#[test]
fn an_entry_of_another_key_is_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let disk = DiskCache::new(dir.path(), u64::MAX);
    disk.write(&key("a"), b"cubin of a").unwrap();
    let b_path = disk.entry_path(&key("b"));
    fs::create_dir_all(b_path.parent().unwrap()).unwrap();
    fs::copy(disk.entry_path(&key("a")), &b_path).unwrap();
    assert_eq!(
        disk.read(&key("b")).unwrap(),
        DiskRead::Corrupt(EntryError::KeyMismatch)
    );
    let got = cache_on(dir.path())
        .get_or_compile(&key("b"), || Ok::<_, Never>(b"cubin of b".to_vec()))
        .unwrap();
    assert_eq!(&*got, b"cubin of b");
}

fn set_age(path: &Path, secs_ago: u64) {
    let f = fs::File::options().append(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

#[test]
fn eviction_removes_least_recently_used_entries_above_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let entry_bytes = 1000 + 88;
    let disk = DiskCache::new(dir.path(), 3 * entry_bytes as u64);
    let names = ["e0", "e1", "e2", "e3", "e4"];
    for (i, n) in names.iter().enumerate() {
        disk.write(&key(n), &cubin(i as u8, 1000)).unwrap();
        // e0 oldest … e4 newest.
        set_age(&disk.entry_path(&key(n)), 1000 - 100 * i as u64);
    }
    // Reading e1 makes it the most recently used.
    assert!(matches!(disk.read(&key("e1")).unwrap(), DiskRead::Hit(_)));

    let report = disk.evict(None).unwrap();
    assert_eq!(report.removed_entries, 2);
    assert_eq!(report.remaining_bytes, 3 * entry_bytes as u64);
    let alive: Vec<bool> = names
        .iter()
        .map(|n| disk.entry_path(&key(n)).exists())
        .collect();
    assert_eq!(alive, vec![false, true, false, true, true]);
    assert_eq!(disk.total_bytes().unwrap(), 3 * entry_bytes as u64);
}

#[test]
fn the_cache_evicts_after_writing_but_keeps_the_new_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(CacheConfig {
        disk_dir: Some(dir.path().to_path_buf()),
        max_disk_bytes: 2500,
    });
    let disk = cache.disk().unwrap().clone();
    for (i, n) in ["a", "b", "c"].iter().enumerate() {
        cache
            .get_or_compile(&key(n), || Ok::<_, Never>(cubin(i as u8, 1000)))
            .unwrap();
        set_age(&disk.entry_path(&key(n)), 100 - i as u64);
    }
    assert!(!disk.entry_path(&key("a")).exists());
    assert!(disk.entry_path(&key("c")).exists());
    assert_eq!(cache.stats().evicted_entries, 1);
    // An entry larger than the whole bound is still kept (evicting it would defeat the cache).
    cache
        .get_or_compile(&key("huge"), || Ok::<_, Never>(cubin(9, 4000)))
        .unwrap();
    assert!(disk.entry_path(&key("huge")).exists());
}

#[test]
fn the_off_switch_disables_the_disk_layer() {
    let dir = tempfile::tempdir().unwrap();
    let dir_s = dir.path().to_str().unwrap().to_string();
    for (var, value) in [
        ("CUTILE_CACHE", "off"),
        ("CUTILE_CACHE", "0"),
        ("CUTILE_CACHE", "DISABLED"),
        ("CUTILE_DISABLE_CACHE", "1"),
        ("CUTILE_DISABLE_CACHE", "true"),
    ] {
        let config = CacheConfig::from_vars(|n| match n {
            "CUTILE_CACHE_DIR" => Some(dir_s.clone()),
            n if n == var => Some(value.to_string()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.disk_dir, None, "{var}={value}");
        let cache = KernelCache::new(config);
        cache
            .get_or_compile(&key("k"), || Ok::<_, Never>(b"x".to_vec()))
            .unwrap();
        assert!(cache.disk().is_none());
    }
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn configuration_from_the_environment() {
    let cfg = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        CacheConfig::from_vars(move |n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    };
    let dir = |c: Result<CacheConfig, CacheError>| c.unwrap().disk_dir;
    assert_eq!(
        dir(cfg(&[
            ("CUTILE_CACHE_DIR", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h")
        ])),
        Some(PathBuf::from("/c"))
    );
    assert_eq!(
        dir(cfg(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])),
        Some(PathBuf::from("/x/cutile/kernels"))
    );
    assert_eq!(
        dir(cfg(&[("HOME", "/h")])),
        Some(PathBuf::from("/h/.cache/cutile/kernels"))
    );
    assert_eq!(dir(cfg(&[])), None);
    assert_eq!(
        dir(cfg(&[("CUTILE_CACHE", "on"), ("HOME", "/h")])),
        Some(PathBuf::from("/h/.cache/cutile/kernels"))
    );

    assert_eq!(cfg(&[]).unwrap().max_disk_bytes, DEFAULT_MAX_DISK_BYTES);
    assert_eq!(
        cfg(&[("CUTILE_CACHE_MAX_SIZE", "64M")])
            .unwrap()
            .max_disk_bytes,
        64 << 20
    );
    let err = cfg(&[("CUTILE_CACHE_MAX_SIZE", "lots")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CUTILE_CACHE_MAX_SIZE") && err.contains("lots"),
        "{err}"
    );

    for (text, bytes) in [
        ("0", Some(0)),
        ("1048576", Some(1 << 20)),
        ("512K", Some(512 << 10)),
        ("2g", Some(2 << 30)),
        ("3 MiB", Some(3 << 20)),
        ("10T", None),
        ("-1", None),
        ("", None),
        ("99999999999999999999G", None),
    ] {
        assert_eq!(parse_size(text), bytes, "{text:?}");
    }
}

/// Waits for `path` to exist (up to 60 s).
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{path:?} never appeared"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The contended lookup both sides run: the leader's compile announces itself with `marker`, sleeps,
/// and logs; a follower starts only once the marker exists, i.e. while the leader is compiling.
fn contended_lookup(dir: &Path, lead: bool) -> Origin {
    let marker = dir.join("compiling");
    if !lead {
        wait_for(&marker);
    }
    let cache = cache_on(&dir.join("cache"));
    let got = cache
        .fetch(&key("shared"), None, || {
            fs::write(&marker, b"").unwrap();
            thread::sleep(Duration::from_millis(1500));
            let mut log = fs::read(dir.join("compiles.log")).unwrap_or_default();
            log.extend_from_slice(format!("{}\n", std::process::id()).as_bytes());
            fs::write(dir.join("compiles.log"), log).unwrap();
            Ok::<_, Never>(b"shared cubin".to_vec())
        })
        .unwrap();
    assert_eq!(&*got.cubin, b"shared cubin");
    got.origin
}

fn compile_count(dir: &Path) -> usize {
    fs::read_to_string(dir.join("compiles.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

const CHILD_ENV: &str = "CUTILE_TEST_LOCK_CHILD_DIR";

#[test]
fn the_entry_lock_spans_processes() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        // Child side: follow the parent's compile.
        let origin = contended_lookup(Path::new(&dir), false);
        assert_eq!(
            origin,
            Origin::Disk,
            "the child must wait for the parent's entry"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_entry_lock_spans_processes",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .spawn()
        .unwrap();
    let origin = contended_lookup(dir.path(), true);
    let status = child.wait().unwrap();
    assert!(status.success(), "child process failed: {status}");
    assert_eq!(origin, Origin::Compiled);
    assert_eq!(
        compile_count(dir.path()),
        1,
        "one compile across two processes"
    );
}

#[test]
fn separate_cache_instances_on_one_dir_compile_once() {
    let dir = tempfile::tempdir().unwrap();
    let follower = {
        let dir = dir.path().to_path_buf();
        thread::spawn(move || contended_lookup(&dir, false))
    };
    assert_eq!(contended_lookup(dir.path(), true), Origin::Compiled);
    assert_eq!(follower.join().unwrap(), Origin::Disk);
    assert_eq!(compile_count(dir.path()), 1);
}

#[test]
fn an_unwritable_disk_does_not_fail_the_lookup() {
    let dir = tempfile::tempdir().unwrap();
    // A regular file where the cache directory should be: every disk operation fails.
    let blocker = dir.path().join("not-a-dir");
    fs::write(&blocker, b"").unwrap();
    let cache = cache_on(&blocker);
    let got = cache.get_or_compile(&key("k"), || Ok::<_, Never>(b"still works".to_vec()));
    assert_eq!(&*got.unwrap(), b"still works");
    assert!(cache.stats().disk_errors > 0);
    assert!(matches!(
        cache.last_disk_error(),
        Some(CacheError::Io { .. })
    ));
}
