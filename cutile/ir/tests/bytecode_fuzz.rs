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

/// Assemble a 13.5 file by hand: one kernel `k() -> ()` with `body` as its op stream and `extra_types` appended
/// to the Type table after i1, i32, f32 and the signature (ids 0–3). No Debug section (the reader allows that).
fn hand_built(extra_types: &[Vec<u8>], body: &[u8]) -> Vec<u8> {
    use cutile_ir::bytecode::varint::write_varint;
    fn table(items: &[Vec<u8>], width: usize) -> Vec<u8> {
        let mut b = vec![];
        write_varint(&mut b, items.len() as u64);
        while !b.len().is_multiple_of(width) {
            b.push(0xcb);
        }
        let mut off = 0u64;
        for it in items {
            b.extend_from_slice(&off.to_le_bytes()[..width]);
            off += it.len() as u64;
        }
        items.iter().for_each(|it| b.extend_from_slice(it));
        b
    }
    fn section(out: &mut Vec<u8>, id: u8, payload: &[u8]) {
        out.push(id | 0x80);
        write_varint(out, payload.len() as u64);
        out.push(8);
        while !out.len().is_multiple_of(8) {
            out.push(0xcb);
        }
        out.extend_from_slice(payload);
    }
    let mut types = vec![vec![0x00], vec![0x03], vec![0x07], vec![0x10, 0x00, 0x00]];
    types.extend_from_slice(extra_types);
    // name "k" (string 0), signature type 3, kernel, no debug index, hints {}, arg attrs [], body.
    let mut func = vec![0x01, 0x00, 0x03, 0x02, 0x00, 0x0b, 0x00, 0x06, 0x00];
    write_varint(&mut func, body.len() as u64);
    func.extend_from_slice(body);
    let mut out = b"\x7fTileIR\x00\x0d\x05\x00\x00".to_vec();
    section(&mut out, 0x02, &func);
    section(&mut out, 0x05, &table(&types, 4));
    section(&mut out, 0x01, &table(&[b"k".to_vec()], 4));
    out.push(0x00);
    out
}

const RETURN: [u8; 3] = [0x5c, 0x00, 0x00];

/// A large tile type (type 4) used as the result of many `iota` ops: without a budget the reader would clone
/// it into every value and allocate gigabytes from a small file.
#[test]
fn repeated_references_to_a_large_type_are_bounded() {
    let mut big = vec![0x0d, 0x02];
    cutile_ir::bytecode::varint::write_varint(&mut big, 5000);
    for _ in 0..5000 {
        big.extend_from_slice(&1i64.to_le_bytes());
    }
    let iota = [0x3a, 0x04];
    let body = move |n: usize| [iota.repeat(n), RETURN.to_vec()].concat();
    let few = read_module(&hand_built(std::slice::from_ref(&big), &body(3)))
        .expect("a few references are fine");
    assert_eq!(few.functions[0].body.as_ref().expect("body").ops.len(), 4);
    with_deadline(60, move || {
        let start = Instant::now();
        let e = read_module(&hand_built(&[big], &body(40_000))).expect_err("budget");
        assert!(e.message.contains("expands"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
    });
}

#[test]
fn deep_region_nesting_is_rejected() {
    // loop: no results, no operands, one region with one block, no arguments, one op.
    let lp = [0x41, 0x00, 0x00, 0x01, 0x01, 0x00, 0x01];
    let cont = [0x11, 0x00, 0x00];
    let nest = move |depth: usize| [lp.repeat(depth), cont.to_vec(), RETURN.to_vec()].concat();
    read_module(&hand_built(&[], &nest(10))).expect("ten nested loops are fine");
    with_deadline(60, move || {
        let e = read_module(&hand_built(&[], &nest(100_000))).expect_err("too deep");
        assert!(e.message.contains("nest too deeply"), "{e}");
    });
}

#[test]
fn deep_attribute_nesting_is_rejected() {
    // assume (result type 4 = tile<i32>) with a predicate of nested one-element arrays, on a constant.
    let tile_i32 = vec![0x0d, 0x01, 0x00];
    let assume = move |depth: usize| {
        // iota gives a tile<i32> value %0 to assume on.
        let mut b = vec![0x3a, 0x04, 0x06, 0x04];
        b.extend([0x06, 0x01].repeat(depth));
        b.extend([0x03, 0x01]); // innermost: Bool(true)
        b.push(0x00);
        b.extend(RETURN);
        b
    };
    read_module(&hand_built(std::slice::from_ref(&tile_i32), &assume(5)))
        .expect("shallow nesting is fine");
    with_deadline(60, move || {
        let e = read_module(&hand_built(&[tile_i32], &assume(100_000))).expect_err("too deep");
        assert!(e.message.contains("nest too deeply"), "{e}");
    });
}
