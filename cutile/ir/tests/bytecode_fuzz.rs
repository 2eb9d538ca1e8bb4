//! Robustness of the reader on damaged input: truncations at every length, exhaustive single-byte corruption,
//! and proptest-driven byte flips, insertions and deletions of every sample. `read_module` must return `Ok` or
//! `Err` — never panic, hang or take long — and whatever it accepts must survive a write and read back equal.
//! Each test runs in a worker thread with a deadline so that a hang fails the test instead of stalling it.

mod bytecode_common;

use bytecode_common::*;
use cutile_ir::bytecode::{read_module, read_module_with_version, write_module};
use cutile_ir::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::OnceLock;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        all_samples()
            .iter()
            .map(|p| std::fs::read(p).expect("sample"))
            .collect()
    })
}

/// Read `bytes`; if accepted, the module must be writable-or-rejected cleanly, and a successful write must read
/// back to the same module. One input must not take long.
fn check(bytes: &[u8]) {
    let start = Instant::now();
    if let Ok((m, v, _)) = read_module_with_version(bytes) {
        let target = if v.is_writable() { v } else { V13_5 };
        if let Ok(out) = write_module(&m, target) {
            let back = read_module(&out)
                .unwrap_or_else(|e| panic!("our own output does not read back: {e}"));
            assert_eq!(back, m, "write + read changed an accepted module");
        }
    }
    let t = start.elapsed();
    assert!(
        t < Duration::from_secs(2),
        "one input of {} bytes took {t:?}",
        bytes.len()
    );
}

/// Run `f` on a worker thread; fail if it panics or has not finished after `secs`.
fn with_deadline(secs: u64, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().expect("worker"),
        Err(RecvTimeoutError::Disconnected) => {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(RecvTimeoutError::Timeout) => {
            panic!("the reader did not finish within {secs} s (hang?)")
        }
    }
}

fn run<S: Strategy + Send + 'static>(
    cases: u32,
    strategy: S,
    mutate: fn(&[u8], S::Value) -> Vec<u8>,
) where
    S::Value: Send,
{
    with_deadline(300, move || {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let n = samples().len();
        let result = runner.run(&(0..n, strategy), |(i, v)| {
            let bytes = mutate(&samples()[i], v);
            check(&bytes);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    });
}

#[test]
fn truncation_at_every_length_is_an_error() {
    with_deadline(300, || {
        for s in samples() {
            for len in 0..s.len() {
                let r = read_module(&s[..len]);
                assert!(
                    r.is_err(),
                    "a file cut to {len} of {} bytes was accepted",
                    s.len()
                );
            }
        }
    });
}

#[test]
fn every_single_byte_corruption_is_handled() {
    with_deadline(300, || {
        // 13.2 and 13.4 samples differ little from their neighbours; skip them to keep this test quick.
        let paths = all_samples();
        let picked = paths.iter().zip(samples()).filter(|(p, _)| {
            let n = name(p);
            !n.contains("v13_2") && !n.contains("v13_4")
        });
        for (_, s) in picked {
            for pos in 0..s.len() {
                for v in [0x00, 0xff, s[pos] ^ 0x01, s[pos] ^ 0x80] {
                    let mut b = s.clone();
                    b[pos] = v;
                    check(&b);
                }
            }
        }
    });
}

#[test]
fn random_byte_flips() {
    run(
        2000,
        prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
        |s, flips| {
            let mut b = s.to_vec();
            for (i, x) in flips {
                let i = i.index(b.len());
                b[i] ^= x;
            }
            b
        },
    );
}

#[test]
fn random_insertions() {
    run(
        1000,
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<u8>(), 1..24),
        ),
        |s, (at, bytes)| {
            let mut b = s.to_vec();
            let at = at.index(b.len() + 1);
            b.splice(at..at, bytes);
            b
        },
    );
}

#[test]
fn random_deletions() {
    run(
        1000,
        (any::<prop::sample::Index>(), 1usize..32),
        |s, (at, n)| {
            let mut b = s.to_vec();
            let at = at.index(b.len());
            let end = (at + n).min(b.len());
            b.drain(at..end);
            b
        },
    );
}

/// Large counts and ids written as long varints in place of short ones: must be rejected cheaply.
#[test]
fn huge_varints_are_bounded() {
    run(
        1000,
        (any::<prop::sample::Index>(), any::<u64>()),
        |s, (at, x)| {
            let mut b = s.to_vec();
            let at = at.index(b.len());
            let mut v = vec![];
            cutile_ir::bytecode::varint::write_varint(&mut v, x | 1 << 40);
            b.splice(at..(at + 1).min(b.len()), v);
            b
        },
    );
}
