//! Ahead-of-time bundling of planned specializations: compile a list of [`Plan`]s with tileiras on a few
//! threads (each distinct key once) and add the cubins to a [`BundleWriter`] under the plans' keys, the
//! keys launches look up. `cargo xtask aot` and the GPU harness's `plan` both use it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::plan::Plan;
use crate::bundle::BundleWriter;
use crate::cache::CacheKey;
use crate::toolchain::Tileiras;

/// What happened to one planned specialization.
#[derive(Debug, Clone)]
pub struct AotOutcome {
    /// The caller's label (e.g. `gemm [128x128x64 elem=bf16] sm_90`).
    pub label: String,
    pub key: CacheKey,
    /// Cubin bytes and compile seconds, or why it failed. A plan whose key another plan already
    /// produced reports that plan's label in `same_as` and the same result.
    pub result: Result<(usize, f64), String>,
    pub same_as: Option<String>,
}

/// A compile's cubin and seconds, or its error text.
type Compiled = Result<(Vec<u8>, f64), String>;

/// Compiles every distinct key of `plans` with `tileiras` on `threads` threads and adds the cubins to
/// `writer` (in the order the plans were given). Failures are reported per plan, not returned early.
pub fn compile_into_bundle(
    plans: &[(String, Plan)],
    tileiras: &Tileiras,
    threads: usize,
    writer: &mut BundleWriter,
) -> Vec<AotOutcome> {
    // First plan of each key does the work.
    let mut first: HashMap<[u8; 32], usize> = HashMap::new();
    let mut work = Vec::new();
    for (i, (_, p)) in plans.iter().enumerate() {
        if let std::collections::hash_map::Entry::Vacant(e) = first.entry(*p.key.id()) {
            e.insert(i);
            work.push(i);
        }
    }
    let queue = Mutex::new(work.into_iter());
    let done: Mutex<HashMap<usize, Compiled>> = Mutex::new(HashMap::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                    let Some(i) = next else { break };
                    let t0 = Instant::now();
                    let r = plans[i]
                        .1
                        .compile(tileiras)
                        .map(|c| (c, t0.elapsed().as_secs_f64()))
                        .map_err(|e| e.to_string());
                    if let Ok(mut d) = done.lock() {
                        d.insert(i, r);
                    }
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut outcomes = Vec::with_capacity(plans.len());
    for (i, (label, p)) in plans.iter().enumerate() {
        let owner = first.get(p.key.id()).copied().unwrap_or(i);
        let result = if owner == i {
            match done.remove(&i) {
                Some(Ok((cubin, secs))) => {
                    let len = cubin.len();
                    writer
                        .add(&p.key, cubin)
                        .map(|()| (len, secs))
                        .map_err(|e| e.to_string())
                }
                Some(Err(e)) => Err(e),
                None => Err("the compile thread did not report (it panicked)".into()),
            }
        } else {
            outcomes
                .get(owner)
                .map(|o: &AotOutcome| o.result.clone())
                .unwrap_or_else(|| Err("no result for the first plan of this key".into()))
        };
        outcomes.push(AotOutcome {
            label: label.clone(),
            key: p.key.clone(),
            result,
            same_as: (owner != i).then(|| plans[owner].0.clone()),
        });
    }
    outcomes
}

/// Prints outcomes as a table (label, cubin KiB, seconds or the error) and returns the failure count.
pub fn print_outcomes(outcomes: &[AotOutcome]) -> usize {
    let w = outcomes
        .iter()
        .map(|o| o.label.len())
        .max()
        .unwrap_or(0)
        .max(5);
    println!("{:<w$}  {:>9}  {:>7}  key", "label", "cubin", "seconds");
    let mut failed = 0;
    for o in outcomes {
        let id = &o.key.hex()[..12];
        match (&o.result, &o.same_as) {
            (Ok(_), Some(other)) => {
                println!("{:<w$}  {:>9}  {:>7}  {id} (= {other})", o.label, "", "")
            }
            (Ok((bytes, secs)), None) => println!(
                "{:<w$}  {:>6} KiB  {secs:>7.2}  {id}",
                o.label,
                bytes.div_ceil(1024)
            ),
            (Err(e), _) => {
                failed += 1;
                println!("{:<w$}  FAILED: {e}", o.label);
            }
        }
    }
    failed
}
