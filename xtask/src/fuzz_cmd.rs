//! `cargo xtask fuzz`: hostile input at volume for the three file readers that take untrusted bytes — the
//! bytecode reader (`cutile_ir::bytecode::read_module_with_version`), the `.tilelib` container reader
//! (`tilelib_tools::container`) and the AOT bundle reader (`cutile::bundle::Bundle::from_bytes`).
//!
//! This is a generation-based mutational fuzzer that runs on the stable toolchain. cargo-fuzz / libFuzzer
//! need a nightly compiler (sanitizer-coverage instrumentation via `-Z` flags) and cargo-fuzz itself, while this
//! workspace and its CI build with stable only; so there is no coverage feedback, and every input is made by
//! mutating a real file: the bytecode samples (`shared/data/tileir-samples` and the copies under
//! `cutile/ir/tests`), the `.tilelib` files of the tilelib-tools tests plus containers written in-process, and
//! bundles written in-process with `BundleWriter`. Mutations: bit flips, bytes replaced by interesting values
//! (0, 0xFF, 0x7F, 0x80, …), large LEB128 varints and 32/64-bit words written over or inserted, truncation,
//! random insertion and deletion, splicing two inputs, and duplicating chunks. Bundle inputs get their header
//! lengths and index checksum recomputed half of the time so that mutations reach the index parser instead of
//! stopping at the checksum.
//!
//! Input `i` of target `t` is a pure function of (`--seed`, `t`, `i`): a finding is reproduced with
//! `--replay i`, and the run does not depend on how iterations are spread over threads.
//!
//! Per input it checks: no panic (caught with `catch_unwind`), no input slower than `--time-limit-ms`, and a
//! peak of live heap bytes allocated by the reader no larger than `64 × input + 1 MiB` (the bytecode reader
//! budgets 16× the file; the cap leaves room for the in-memory representation). Bytecode the reader accepts
//! must also write back and read back equal, as in cutile-ir's `bytecode_fuzz` test. A watchdog thread turns a
//! hang (10× the time limit) into a saved reproducer and exit status 2; a single allocation request of 1 GiB
//! or more aborts the process at once with the replay command (a failed allocation cannot be caught).
//! Findings are saved under `--out`, and any finding makes the command fail.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cutile::bundle::{Bundle, BundleWriter};
use cutile::cache::{CacheKey, KeyParts};

use crate::BoxError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetArg {
    Bytecode,
    Tilelib,
    Bundle,
    All,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Generated inputs per target.
    #[arg(long, default_value_t = 1_000_000)]
    pub iters: u64,
    /// Which reader to drive.
    #[arg(long, value_enum, default_value = "all")]
    pub target: TargetArg,
    /// PRNG seed (default: from the clock; always printed so a run can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where reproducers of findings are written.
    #[arg(long, default_value = "target/fuzz-findings")]
    pub out: PathBuf,
    /// Worker threads (default: available parallelism).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Flag any single input that takes longer than this.
    #[arg(long, default_value_t = 1000)]
    pub time_limit_ms: u64,
    /// Regenerate input N of `--target` (not `all`) for `--seed`, save it under `--out` and run it once.
    #[arg(long, requires = "seed")]
    pub replay: Option<u64>,
}

// ---- allocation accounting (the counting allocator lives in main.rs) ----

/// Heap accounting of the current thread while it runs one input.
struct Track {
    on: Cell<bool>,
    live: Cell<usize>,
    peak: Cell<usize>,
    /// Input being run, for the message of an aborting allocation.
    iter: Cell<u64>,
    target: Cell<u8>,
}

thread_local! {
    static TRACK: Track = const {
        Track {
            on: Cell::new(false),
            live: Cell::new(0),
            peak: Cell::new(0),
            iter: Cell::new(0),
            target: Cell::new(0),
        }
    };
}

static SEED: AtomicU64 = AtomicU64::new(0);

/// One allocation request this large while an input runs is reported and ends the process.
const FATAL_REQUEST: usize = 1 << 30;

/// Called by the global allocator on every allocation (`grow` bytes more) and free (`shrink` bytes less).
/// Must not allocate.
pub(crate) fn account(grow: usize, shrink: usize, request: usize) {
    let _ = TRACK.try_with(|t| {
        if !t.on.get() {
            return;
        }
        if request >= FATAL_REQUEST {
            t.on.set(false);
            fatal_allocation(request, t.target.get(), t.iter.get());
        }
        let live = (t.live.get() + grow).saturating_sub(shrink);
        t.live.set(live);
        if live > t.peak.get() {
            t.peak.set(live);
        }
    });
}

/// Writes the replay command to stderr without allocating, then aborts.
fn fatal_allocation(request: usize, target: u8, iter: u64) -> ! {
    use std::io::Write;
    let mut buf = [0u8; 512];
    let mut w = &mut buf[..];
    let name = Target::ALL.get(target as usize).map_or("?", |t| t.name());
    let _ = write!(
        w,
        "\nFINDING: one allocation of {request} bytes while reading {name} input {iter}\n\
         replay: cargo xtask fuzz --target {name} --seed {} --replay {iter}\n",
        SEED.load(Ordering::Relaxed)
    );
    let left = w.len();
    let n = buf.len() - left;
    let _ = std::io::stderr().write_all(&buf[..n]);
    std::process::abort();
}

fn start_tracking(target: Target, iter: u64) {
    TRACK.with(|t| {
        t.live.set(0);
        t.peak.set(0);
        t.iter.set(iter);
        t.target.set(target as u8);
        t.on.set(true);
    });
}

/// Stops tracking; returns the peak of live bytes since `start_tracking`.
fn stop_tracking() -> usize {
    TRACK.with(|t| {
        t.on.set(false);
        t.peak.get()
    })
}

// ---- targets and corpus ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Bytecode = 0,
    Tilelib = 1,
    Bundle = 2,
}

impl Target {
    const ALL: [Target; 3] = [Target::Bytecode, Target::Tilelib, Target::Bundle];
    fn name(self) -> &'static str {
        match self {
            Target::Bytecode => "bytecode",
            Target::Tilelib => "tilelib",
            Target::Bundle => "bundle",
        }
    }
    /// Runs the reader on one input; whether it accepted it. Errors are fine; only panics, time and memory
    /// matter.
    fn read(self, bytes: &[u8]) -> bool {
        match self {
            Target::Bytecode => {
                use cutile_ir::bytecode::{read_module, read_module_with_version, write_module};
                let Ok((m, v, _)) = read_module_with_version(bytes) else {
                    return false;
                };
                let target = if v.is_writable() { v } else { cutile_ir::V13_5 };
                if let Ok(out) = write_module(&m, target) {
                    match read_module(&out) {
                        Ok(back) => assert!(back == m, "write + read changed an accepted module"),
                        Err(e) => panic!("our own output does not read back: {e}"),
                    }
                }
                true
            }
            Target::Tilelib => {
                let others = tilelib_tools::container::other_sections(bytes);
                tilelib_tools::container::read(bytes).is_ok() && others.is_ok()
            }
            Target::Bundle => Bundle::from_bytes(bytes.to_vec()).is_ok(),
        }
    }
}

fn files_with_ext(dir: &Path, ext: &str, out: &mut Vec<Vec<u8>>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    paths.sort();
    for p in paths {
        if let Ok(b) = std::fs::read(&p) {
            out.push(b);
        }
    }
}

fn dedup(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v.dedup();
    v
}

/// The bytecode samples: the shared sample set and the in-repo copies the cutile-ir tests use.
fn bytecode_corpus() -> Vec<Vec<u8>> {
    let root = crate::workspace_root();
    let mut out = vec![];
    for dir in [
        root.join("../shared/data/tileir-samples"),
        root.join("../shared/data/tileir-samples/preview"),
        root.join("shared/data/tileir-samples"),
        root.join("cutile/ir/tests/bytecode_data"),
        root.join("cutile/ir/tests/bytecode_data/preview"),
        root.join("cutile/ir/tests/print_data"),
        root.join("tilelib-tools/tests/data"),
    ] {
        files_with_ext(&dir, "tilebc", &mut out);
    }
    dedup(out)
}

fn tilelib_corpus(bytecode: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let root = crate::workspace_root();
    let mut out = vec![];
    files_with_ext(&root.join("tilelib-tools/tests/data"), "tilelib", &mut out);
    // Containers written in-process: small interfaces with zero to three implementation files.
    let mut small: Vec<&Vec<u8>> = bytecode.iter().collect();
    small.sort_by_key(|b| b.len());
    for (i, n_impl) in [0usize, 1, 2, 3].into_iter().enumerate() {
        let Some(iface) = small.get(i) else { break };
        let lib = tilelib_tools::container::TileLib {
            interface: (*iface).clone(),
            implementations: small
                .iter()
                .skip(i + 1)
                .take(n_impl)
                .map(|b| b.to_vec())
                .collect(),
        };
        if let Ok(b) = tilelib_tools::container::write(&lib) {
            out.push(b);
        }
    }
    dedup(out)
}

fn bundle_corpus(bytecode: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let key = |kernel: &str, spec: &str, arch: &str| {
        CacheKey::new(KeyParts {
            kernel,
            source_hash: "0123456789abcdef",
            specialization: spec,
            arch,
            tileiras_version: "13.5.37",
            options: "opt=3",
        })
    };
    let payload = |i: usize| -> Vec<u8> {
        bytecode
            .get(i % bytecode.len().max(1))
            .map(|b| b[..b.len().min(300)].to_vec())
            .unwrap_or_else(|| vec![0x7f, b'E', b'L', b'F', 2, 1, 1])
    };
    let mut out = vec![];
    for n in [0usize, 1, 2, 4] {
        let mut w = BundleWriter::new();
        for i in 0..n {
            let spec = format!("T=f32,TILE={}", 64 << i);
            let arch = if i % 2 == 0 { "sm_90" } else { "sm_100" };
            let body = if i == 3 { vec![] } else { payload(i) };
            if w.add(&key("cutile_kernels::vadd", &spec, arch), body)
                .is_err()
            {
                continue;
            }
        }
        out.push(w.to_bytes());
    }
    dedup(out)
}

// ---- mutation ----

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

const INTERESTING_BYTES: [u8; 8] = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE, 0x40, 0x10];

fn leb128(mut v: u64) -> Vec<u8> {
    let mut out = vec![];
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A varint or a little-endian word that tends to break length arithmetic.
fn interesting_chunk(rng: &mut fastrand::Rng, len: usize) -> Vec<u8> {
    let values = [
        u64::MAX,
        u32::MAX as u64,
        i32::MAX as u64,
        0x8000_0000,
        1 << 32,
        1 << 40,
        i64::MAX as u64,
        len as u64,
        len as u64 + 1,
        (len as u64).wrapping_sub(1),
        0,
        1,
        0xFFFF,
        0x1_0000,
    ];
    let v = values[rng.usize(..values.len())];
    match rng.u8(..5) {
        0 | 1 => leb128(v),
        // An overlong varint: continuation bits that never stop within ten bytes.
        2 => {
            let mut b = vec![0x80u8; rng.usize(6..16)];
            b.push(0x01);
            b
        }
        3 => (v as u32).to_le_bytes().to_vec(),
        _ => v.to_le_bytes().to_vec(),
    }
}

fn mutate_once(rng: &mut fastrand::Rng, data: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let len = data.len();
    let pos = |rng: &mut fastrand::Rng| if len == 0 { 0 } else { rng.usize(..len) };
    match rng.u8(..11) {
        // bit flip
        0 if len > 0 => {
            let p = pos(rng);
            data[p] ^= 1 << rng.u8(..8);
        }
        // interesting byte
        1 if len > 0 => {
            let p = pos(rng);
            data[p] = INTERESTING_BYTES[rng.usize(..INTERESTING_BYTES.len())];
        }
        // random byte
        2 if len > 0 => {
            let p = pos(rng);
            data[p] = rng.u8(..);
        }
        // overwrite with a varint / word
        3 if len > 0 => {
            let chunk = interesting_chunk(rng, len);
            let p = pos(rng);
            for (i, b) in chunk.into_iter().enumerate() {
                if let Some(d) = data.get_mut(p + i) {
                    *d = b;
                }
            }
        }
        // insert a varint / word
        4 => {
            let chunk = interesting_chunk(rng, len);
            let p = rng.usize(..=len);
            data.splice(p..p, chunk);
        }
        // truncate
        5 if len > 0 => data.truncate(rng.usize(..len)),
        // insert random bytes
        6 => {
            let n = 1 + rng.usize(..16);
            let p = rng.usize(..=len);
            let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
            data.splice(p..p, bytes);
        }
        // delete a range
        7 if len > 0 => {
            let p = pos(rng);
            let n = 1 + rng.usize(..(len - p).min(64));
            data.drain(p..p + n);
        }
        // splice: a prefix of this input and a suffix of another
        8 if !corpus.is_empty() => {
            let other = &corpus[rng.usize(..corpus.len())];
            let cut = rng.usize(..=len);
            let from = rng.usize(..=other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        // duplicate a chunk somewhere else
        9 if len > 0 => {
            let p = pos(rng);
            let n = 1 + rng.usize(..(len - p).min(256));
            let chunk = data[p..p + n].to_vec();
            let q = rng.usize(..=len);
            data.splice(q..q, chunk);
        }
        // repeat a byte many times (long runs of continuation bits or zeros)
        10 if len > 0 => {
            let p = pos(rng);
            let n = 1 + rng.usize(..64);
            let b = data[p];
            data.splice(p..p, std::iter::repeat_n(b, n));
        }
        _ => {
            data.push(rng.u8(..));
        }
    }
}

/// Makes a mutated bundle consistent again where checksums would otherwise stop the reader early: the
/// header's data length and the index checksum.
fn fix_bundle(rng: &mut fastrand::Rng, data: &mut [u8]) {
    // The 64-byte header of `cutile/src/bundle/format.rs`: index length at 16, data length at 24, index
    // BLAKE3 at 32.
    const HEADER: usize = 64;
    if data.len() < HEADER || !rng.bool() {
        return;
    }
    let index_len = u64::from_le_bytes(data[16..24].try_into().unwrap_or([0; 8]));
    let Some(index_end) = (HEADER as u64)
        .checked_add(index_len)
        .filter(|&e| e <= data.len() as u64)
    else {
        return;
    };
    let index_end = index_end as usize;
    let data_len = (data.len() - index_end) as u64;
    data[24..32].copy_from_slice(&data_len.to_le_bytes());
    let h = blake3::hash(&data[HEADER..index_end]);
    data[32..64].copy_from_slice(h.as_bytes());
}

/// Input `iter` of `target`: a pure function of the seed, the target and the iteration.
fn generate(seed: u64, target: Target, iter: u64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut rng =
        fastrand::Rng::with_seed(splitmix(seed ^ splitmix(((target as u64) << 56) ^ iter)));
    let mut data = corpus[rng.usize(..corpus.len())].clone();
    // Mostly few mutations (stay close to valid files), sometimes many.
    let n = match rng.u8(..8) {
        0..=3 => 1,
        4 | 5 => 2 + rng.usize(..3),
        6 => 5 + rng.usize(..10),
        _ => 15 + rng.usize(..50),
    };
    for _ in 0..n {
        mutate_once(&mut rng, &mut data, corpus);
    }
    if target == Target::Bundle {
        fix_bundle(&mut rng, &mut data);
    }
    data
}

// ---- running ----

#[derive(Debug)]
struct Finding {
    target: Target,
    iter: u64,
    what: String,
    file: Option<PathBuf>,
}

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn alloc_cap(len: usize) -> usize {
    64 * len + (1 << 20)
}

/// What running one input gave.
struct Outcome {
    /// `Some(description)` if the input is a finding.
    finding: Option<String>,
    /// Peak live heap bytes.
    peak: usize,
    /// The reader accepted the input.
    accepted: bool,
}

/// Runs one input through `target`'s reader.
fn run_one(target: Target, iter: u64, bytes: &[u8], limit: Duration) -> Outcome {
    run_one_with(|b| target.read(b), target, iter, bytes, limit)
}

/// Runs `read` on one input with panic catching, timing and heap accounting.
fn run_one_with(
    read: impl Fn(&[u8]) -> bool + std::panic::RefUnwindSafe,
    target: Target,
    iter: u64,
    bytes: &[u8],
    limit: Duration,
) -> Outcome {
    let start = Instant::now();
    start_tracking(target, iter);
    let r = std::panic::catch_unwind(|| read(bytes));
    let peak = stop_tracking();
    let took = start.elapsed();
    let finding = if r.is_err() {
        let msg = PANIC_MSG
            .with(|m| m.borrow_mut().take())
            .unwrap_or_else(|| "panic".into());
        Some(format!("panic: {msg}"))
    } else if took > limit {
        Some(format!("slow: {took:?} for {} bytes", bytes.len()))
    } else if peak > alloc_cap(bytes.len()) {
        Some(format!(
            "memory: peak {peak} live bytes for a {}-byte input (cap {})",
            bytes.len(),
            alloc_cap(bytes.len())
        ))
    } else {
        None
    };
    Outcome {
        finding,
        peak,
        accepted: matches!(r, Ok(true)),
    }
}

fn save(out: &Path, target: Target, seed: u64, iter: u64, bytes: &[u8]) -> Option<PathBuf> {
    std::fs::create_dir_all(out).ok()?;
    let p = out.join(format!("{}-seed{seed}-iter{iter}.bin", target.name()));
    std::fs::write(&p, bytes).ok()?;
    Some(p)
}

fn install_panic_hook() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_input = TRACK.with(|t| t.on.get());
            if in_input {
                let msg = info.to_string();
                PANIC_MSG.with(|m| *m.borrow_mut() = Some(msg));
            } else {
                default(info);
            }
        }));
    });
}

/// Counts and time of one target's run.
#[derive(Debug)]
struct Summary {
    target: Target,
    inputs: u64,
    wall: Duration,
    /// Inputs the reader accepted (a measure of how deep the mutations reach).
    accepted: u64,
    /// Largest peak live heap of one input as a fraction of its cap.
    max_peak_ratio: f64,
    findings: Vec<Finding>,
}

struct Worker {
    /// Milliseconds since `epoch` at which the current input started; 0 when idle.
    busy_since: AtomicU64,
    iter: AtomicU64,
}

fn fuzz_target(
    target: Target,
    seed: u64,
    iters: u64,
    jobs: usize,
    limit: Duration,
    out: &Path,
    corpus: &[Vec<u8>],
) -> Summary {
    let started = Instant::now();
    let findings = Mutex::new(Vec::<Finding>::new());
    let done = AtomicBool::new(false);
    let workers: Vec<Worker> = (0..jobs)
        .map(|_| Worker {
            busy_since: AtomicU64::new(0),
            iter: AtomicU64::new(0),
        })
        .collect();
    let max_ratio = Mutex::new(0f64);
    let accepted_total = AtomicU64::new(0);
    let now_ms = || started.elapsed().as_millis() as u64 + 1;
    let wall = std::thread::scope(|s| {
        // Watchdog: an input running ten times the limit is a hang; save it and stop.
        s.spawn(|| {
            let hang = (limit * 10).as_millis() as u64;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                for w in &workers {
                    let since = w.busy_since.load(Ordering::Relaxed);
                    if since != 0 && now_ms().saturating_sub(since) > hang {
                        let iter = w.iter.load(Ordering::Relaxed);
                        let bytes = generate(seed, target, iter, corpus);
                        let file = save(out, target, seed, iter, &bytes);
                        eprintln!(
                            "FINDING [{}] iteration {iter}: hang (still running after {} ms); \
                             reproducer {}",
                            target.name(),
                            hang,
                            file.map_or("not saved".into(), |p| p.display().to_string())
                        );
                        std::process::exit(2);
                    }
                }
            }
        });
        let handles: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(w, worker)| {
                let findings = &findings;
                let max_ratio = &max_ratio;
                let accepted_total = &accepted_total;
                s.spawn(move || {
                    let mut ratio = 0f64;
                    let mut accepted = 0u64;
                    let mut i = w as u64;
                    while i < iters {
                        let bytes = generate(seed, target, i, corpus);
                        worker.iter.store(i, Ordering::Relaxed);
                        worker.busy_since.store(now_ms(), Ordering::Relaxed);
                        let o = run_one(target, i, &bytes, limit);
                        worker.busy_since.store(0, Ordering::Relaxed);
                        ratio = ratio.max(o.peak as f64 / alloc_cap(bytes.len()) as f64);
                        accepted += o.accepted as u64;
                        if let Some(what) = o.finding {
                            let mut fs = findings.lock().unwrap_or_else(|e| e.into_inner());
                            let file = if fs.len() < 50 {
                                save(out, target, seed, i, &bytes)
                            } else {
                                None
                            };
                            eprintln!(
                                "FINDING [{}] iteration {i}: {what}; reproducer {}",
                                target.name(),
                                file.as_ref().map_or("not saved (too many)".into(), |p| p
                                    .display()
                                    .to_string())
                            );
                            fs.push(Finding {
                                target,
                                iter: i,
                                what,
                                file,
                            });
                        }
                        i += jobs as u64;
                    }
                    let mut m = max_ratio.lock().unwrap_or_else(|e| e.into_inner());
                    *m = m.max(ratio);
                    accepted_total.fetch_add(accepted, Ordering::Relaxed);
                })
            })
            .collect();
        for h in handles {
            let _ = h.join();
        }
        done.store(true, Ordering::Relaxed);
        // The workers' time, not the watchdog's last sleep.
        started.elapsed()
    });
    Summary {
        target,
        inputs: iters,
        wall,
        accepted: accepted_total.into_inner(),
        max_peak_ratio: max_ratio.into_inner().unwrap_or_else(|e| e.into_inner()),
        findings: findings.into_inner().unwrap_or_else(|e| e.into_inner()),
    }
}

fn corpus_for(target: Target, bytecode: &[Vec<u8>]) -> Vec<Vec<u8>> {
    match target {
        Target::Bytecode => bytecode.to_vec(),
        Target::Tilelib => tilelib_corpus(bytecode),
        Target::Bundle => bundle_corpus(bytecode),
    }
}

/// Runs the fuzzer; returns the per-target summaries (the caller decides what a finding means).
fn fuzz(args: &Args, seed: u64) -> Result<Vec<Summary>, BoxError> {
    install_panic_hook();
    SEED.store(seed, Ordering::Relaxed);
    let targets: Vec<Target> = match args.target {
        TargetArg::All => Target::ALL.to_vec(),
        TargetArg::Bytecode => vec![Target::Bytecode],
        TargetArg::Tilelib => vec![Target::Tilelib],
        TargetArg::Bundle => vec![Target::Bundle],
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let limit = Duration::from_millis(args.time_limit_ms.max(1));
    let bytecode = bytecode_corpus();
    if bytecode.is_empty() {
        return Err("no bytecode samples found (cutile/ir/tests/bytecode_data)".into());
    }
    let mut out = vec![];
    for t in targets {
        let corpus = corpus_for(t, &bytecode);
        if corpus.is_empty() {
            return Err(format!("no {} corpus files found", t.name()).into());
        }
        if let Some(iter) = args.replay {
            let bytes = generate(seed, t, iter, &corpus);
            let file = save(&args.out, t, seed, iter, &bytes);
            eprintln!(
                "replaying {} input {iter} ({} bytes) saved as {}",
                t.name(),
                bytes.len(),
                file.map_or("(not saved)".into(), |p| p.display().to_string())
            );
            let o = run_one(t, iter, &bytes, limit);
            let (f, peak) = (o.finding, o.peak);
            eprintln!(
                "peak live heap: {peak} bytes; accepted: {}; result: {}",
                o.accepted,
                f.as_deref().unwrap_or("ok")
            );
            out.push(Summary {
                target: t,
                inputs: 1,
                wall: Duration::ZERO,
                accepted: o.accepted as u64,
                max_peak_ratio: peak as f64 / alloc_cap(bytes.len()) as f64,
                findings: f
                    .map(|what| Finding {
                        target: t,
                        iter,
                        what,
                        file: None,
                    })
                    .into_iter()
                    .collect(),
            });
            continue;
        }
        eprintln!(
            "fuzzing {}: {} inputs from {} corpus files on {jobs} thread(s)",
            t.name(),
            args.iters,
            corpus.len()
        );
        out.push(fuzz_target(
            t, seed, args.iters, jobs, limit, &args.out, &corpus,
        ));
    }
    Ok(out)
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    if args.replay.is_some() && args.target == TargetArg::All {
        return Err("--replay needs one --target (bytecode, tilelib or bundle)".into());
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("fuzz seed: {seed} (repeat with --seed {seed})");
    let summaries = fuzz(args, seed)?;
    let total: usize = summaries.iter().map(|s| s.findings.len()).sum();
    for s in summaries.iter().filter(|_| args.replay.is_none()) {
        let secs = s.wall.as_secs_f64();
        println!(
            "{:<9} {:>9} inputs in {:>7.2} s ({:>9.0} inputs/s), {:>5.1}% accepted, max peak heap {:.1}% of cap, {} finding(s)",
            s.target.name(),
            s.inputs,
            secs,
            s.inputs as f64 / secs.max(1e-9),
            100.0 * s.accepted as f64 / s.inputs.max(1) as f64,
            100.0 * s.max_peak_ratio,
            s.findings.len()
        );
    }
    if total > 0 {
        for f in summaries.iter().flat_map(|s| &s.findings).take(20) {
            eprintln!(
                "  {} #{}: {} ({})",
                f.target.name(),
                f.iter,
                f.what,
                f.file
                    .as_ref()
                    .map_or("no file".into(), |p| p.display().to_string())
            );
        }
        return Err(format!(
            "{total} finding(s); reproducers under {}",
            args.out.display()
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CI run: a short burst per target must find nothing.
    #[test]
    fn short_run_finds_nothing() {
        let args = Args {
            iters: 20_000,
            target: TargetArg::All,
            seed: Some(0x5eed),
            out: std::env::temp_dir().join("cutile-fuzz-ci"),
            jobs: None,
            time_limit_ms: 2000,
            replay: None,
        };
        let summaries = fuzz(&args, 0x5eed).expect("corpus");
        for s in &summaries {
            assert!(
                s.findings.is_empty(),
                "{}: {:?}",
                s.target.name(),
                s.findings
            );
        }
    }

    /// The checks themselves: a panic, a slow input and a heap blow-up are each reported.
    #[test]
    fn findings_are_detected() {
        install_panic_hook();
        let limit = Duration::from_millis(50);
        let input = [0u8; 10];
        let ok = run_one_with(|_| true, Target::Bytecode, 0, &input, limit);
        assert!(ok.finding.is_none() && ok.accepted);
        let panics = run_one_with(|_| panic!("boom"), Target::Bytecode, 1, &input, limit);
        let what = panics.finding.unwrap_or_default();
        assert!(
            what.starts_with("panic:") && what.contains("boom"),
            "{what}"
        );
        let slow = run_one_with(
            |_| {
                std::thread::sleep(Duration::from_millis(120));
                true
            },
            Target::Tilelib,
            2,
            &input,
            limit,
        );
        assert!(slow.finding.unwrap_or_default().starts_with("slow:"));
        let hungry = run_one_with(
            |b| std::hint::black_box(vec![1u8; 4 << 20]).len() > b.len(),
            Target::Bundle,
            3,
            &input,
            limit,
        );
        assert!(hungry.peak >= 4 << 20, "peak {}", hungry.peak);
        assert!(hungry.finding.unwrap_or_default().starts_with("memory:"));
    }

    #[test]
    fn inputs_are_reproducible() {
        let corpus = vec![vec![1u8, 2, 3, 4, 5, 6, 7, 8], vec![9u8; 40]];
        for i in 0..100 {
            assert_eq!(
                generate(7, Target::Bytecode, i, &corpus),
                generate(7, Target::Bytecode, i, &corpus)
            );
        }
    }
}
