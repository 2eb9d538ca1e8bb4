//! Tuning: choosing among an op's candidate configurations by timing them on the actual device, with a
//! correctness gate, and remembering the winner in a persistent tuning cache.
//!
//! An op (in `cutile-kernels`) describes one tuning problem as a [`Trial`]: run a configuration and
//! return its output, compare two outputs within the op's tolerance, and time a configuration. [`tune`]
//! runs the default configuration first; its output is the reference every other candidate must match
//! before it is timed, so a fast but wrong configuration is rejected and tuning never changes results
//! beyond the op's tolerance. [`Tuner`] adds the mode (`CUTILE_TUNE=off|on|force`) and the cache, keyed by
//! [`TuneKey`] (device, arch, driver, tileiras version, op, shape class).
//!
//! | `CUTILE_TUNE` | effect |
//! |---|---|
//! | unset, `off` | ops use their measured default table; nothing is timed |
//! | `on` | a cached winner is used; a class without one is tuned on its first call and cached |
//! | `force` | every class is tuned again on its first call in the process, replacing the cached winner |
//!
//! `CUTILE_TUNE_CACHE` names the cache file; by default it is `tuning.json` beside the kernel cache's
//! directory (`~/.cache/cutile/tuning.json`), and memory-only when the disk cache is off.

mod cache;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

pub use cache::{TuneCache, TuneEntry};

/// Errors of tuning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// `CUTILE_TUNE` holds something else than `off`, `on` or `force`.
    #[error("CUTILE_TUNE={value:?} is not a tuning mode; use `off` (the default), `on` or `force`")]
    Mode { value: String },
    /// The default configuration itself failed: there is nothing to compare candidates with.
    #[error("tuning {op}: the default configuration `{config}` failed: {source}")]
    Default {
        op: String,
        config: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The candidate list is empty.
    #[error(
        "tuning {op}: no candidate configurations (the op's candidate list must hold its default)"
    )]
    NoCandidates { op: String },
}

/// How the tuner behaves (`CUTILE_TUNE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TuneMode {
    /// Use the default table; never time anything.
    #[default]
    Off,
    /// Use cached winners; tune a class that has none on its first call.
    On,
    /// Tune every class again on its first call in this process.
    Force,
}

impl TuneMode {
    /// Parses a `CUTILE_TUNE` value (`off`/`0`/empty, `on`/`1`, `force`), case-insensitively.
    pub fn parse(value: &str) -> Result<TuneMode, TuneError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "off" | "0" | "false" | "no" => Ok(TuneMode::Off),
            "on" | "1" | "true" | "yes" => Ok(TuneMode::On),
            "force" => Ok(TuneMode::Force),
            _ => Err(TuneError::Mode {
                value: value.to_string(),
            }),
        }
    }

    /// The mode the environment asks for.
    pub fn from_env() -> Result<TuneMode, TuneError> {
        TuneMode::parse(&std::env::var("CUTILE_TUNE").unwrap_or_default())
    }
}

/// What a tuning result is valid for: the same op and shape class on the same device, driver and compiler.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TuneKey {
    /// Device name, e.g. `NVIDIA H200`.
    pub device: String,
    /// Target, e.g. `sm_90`.
    pub arch: String,
    /// Driver CUDA version, e.g. `13.0`.
    pub driver: String,
    /// tileiras version the cubins come from.
    pub toolchain: String,
    /// Op, e.g. `softmax`.
    pub op: String,
    /// Shape class, e.g. `bf16 rows>=4096 cols<=8192`.
    pub class: String,
}

impl TuneKey {
    /// The key as one line: the cache's map key.
    pub fn id(&self) -> String {
        format!(
            "{} | {} | driver {} | tileiras {} | {} | {}",
            self.device, self.arch, self.driver, self.toolchain, self.op, self.class
        )
    }
}

/// A boxed error from a trial's run or timing.
pub type TrialError = Box<dyn std::error::Error + Send + Sync>;

/// One tuning problem: an op on concrete inputs of one shape class.
pub trait Trial {
    /// A configuration, e.g. a kernel variant and its tile sizes.
    type Config;
    /// What a run produces for the correctness gate (e.g. the output copied to the host).
    type Output;
    /// A short, stable name of `config` (stored in the cache).
    fn name(&self, config: &Self::Config) -> String;
    /// Runs `config` once and returns its output.
    fn run(&mut self, config: &Self::Config) -> Result<Self::Output, TrialError>;
    /// Whether `got` matches the default configuration's `reference` within the op's tolerance.
    fn agrees(&self, reference: &Self::Output, got: &Self::Output) -> bool;
    /// Device time of one run of `config`, in seconds (a median over repetitions).
    fn time(&mut self, config: &Self::Config) -> Result<f64, TrialError>;
}

/// Why a candidate did not win.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// Its output differs from the default's beyond the tolerance.
    Mismatch,
    /// It failed to compile, launch or time.
    Failed(String),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Mismatch => {
                f.write_str("output differs from the default's beyond the tolerance")
            }
            Rejection::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

/// The result of one tuning run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Name of the default configuration.
    pub default: String,
    /// Name of the winner (the default when nothing beat it).
    pub winner: String,
    /// Index of the winner in the candidate list.
    pub winner_index: usize,
    /// Every timed candidate: name and seconds, in candidate order.
    pub timings: Vec<(String, f64)>,
    /// Candidates that were not timed, and why.
    pub rejected: Vec<(String, Rejection)>,
}

impl Outcome {
    /// Default time ÷ winner time (1.0 when the default wins).
    pub fn speedup(&self) -> f64 {
        let t = |n: &str| self.timings.iter().find(|(k, _)| k == n).map(|&(_, s)| s);
        match (t(&self.default), t(&self.winner)) {
            (Some(d), Some(w)) if w > 0.0 => d / w,
            _ => 1.0,
        }
    }
}

/// Tunes `candidates` (the first is the default) with `trial`: the default's output is the reference,
/// each other candidate runs once and is timed only if its output agrees; the fastest timed one wins.
pub fn tune<T: Trial>(
    op: &str,
    trial: &mut T,
    candidates: &[T::Config],
) -> Result<Outcome, TuneError> {
    let Some(default) = candidates.first() else {
        return Err(TuneError::NoCandidates { op: op.into() });
    };
    let default_name = trial.name(default);
    let fail = |source| TuneError::Default {
        op: op.into(),
        config: default_name.clone(),
        source,
    };
    let reference = trial.run(default).map_err(fail)?;
    let mut timings = vec![(default_name.clone(), trial.time(default).map_err(fail)?)];
    let mut rejected = Vec::new();
    let mut indices = vec![0usize];
    for (i, c) in candidates.iter().enumerate().skip(1) {
        let name = trial.name(c);
        let got = match trial.run(c) {
            Ok(o) => o,
            Err(e) => {
                rejected.push((name, Rejection::Failed(e.to_string())));
                continue;
            }
        };
        if !trial.agrees(&reference, &got) {
            rejected.push((name, Rejection::Mismatch));
            continue;
        }
        match trial.time(c) {
            Ok(s) => {
                timings.push((name, s));
                indices.push(i);
            }
            Err(e) => rejected.push((name, Rejection::Failed(e.to_string()))),
        }
    }
    // Fastest wins; ties keep the earlier (default-first) candidate.
    let best = (0..timings.len())
        .min_by(|&a, &b| timings[a].1.total_cmp(&timings[b].1).then(a.cmp(&b)))
        .unwrap_or(0);
    Ok(Outcome {
        default: default_name,
        winner: timings[best].0.clone(),
        winner_index: indices[best],
        timings,
        rejected,
    })
}

/// What [`Tuner::choose`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Tuning is off: use the default table's configuration.
    Default,
    /// A winner cached earlier (by name).
    Cached(String),
    /// A winner found just now.
    Tuned(Outcome),
}

impl Choice {
    /// The chosen configuration's name, or `None` for the default.
    pub fn name(&self) -> Option<&str> {
        match self {
            Choice::Default => None,
            Choice::Cached(n) => Some(n),
            Choice::Tuned(o) => Some(&o.winner),
        }
    }
}

/// The mode plus the tuning cache. Ops use the process-wide [`Tuner::global`].
#[derive(Debug)]
pub struct Tuner {
    mode: TuneMode,
    cache: TuneCache,
    /// Keys tuned in this process (`force` tunes each once).
    tuned: Mutex<HashSet<String>>,
}

impl Tuner {
    pub fn new(mode: TuneMode, cache: TuneCache) -> Tuner {
        Tuner {
            mode,
            cache,
            tuned: Mutex::new(HashSet::new()),
        }
    }

    /// The process-wide tuner: mode from `CUTILE_TUNE` (an unknown value is reported once on stderr
    /// and treated as `off`), cache file from [`default_cache_path`].
    pub fn global() -> &'static Tuner {
        static G: OnceLock<Tuner> = OnceLock::new();
        G.get_or_init(|| {
            let mode = TuneMode::from_env().unwrap_or_else(|e| {
                eprintln!("cutile: {e}; tuning stays off");
                TuneMode::Off
            });
            Tuner::new(mode, TuneCache::open(default_cache_path()))
        })
    }

    pub fn mode(&self) -> TuneMode {
        self.mode
    }

    pub fn cache(&self) -> &TuneCache {
        &self.cache
    }

    /// Whether a call for `key` needs a trial: `on` without a cached winner, or `force` not yet tuned in
    /// this process. Ops check this before building a [`Trial`], which costs scratch memory.
    pub fn needs_trial(&self, key: &TuneKey) -> bool {
        match self.mode {
            TuneMode::Off => false,
            TuneMode::On => {
                let id = key.id();
                self.cache.get(&id).is_none() && !self.tuned_here(&id)
            }
            TuneMode::Force => !self.tuned_here(&key.id()),
        }
    }

    fn tuned_here(&self, id: &str) -> bool {
        self.tuned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    /// The configuration to use for `key`: the default when tuning is off, the cached winner when there
    /// is one (and the mode is not `force`), else the outcome of tuning `candidates` with `trial`,
    /// which is then cached.
    pub fn choose<T: Trial>(
        &self,
        key: &TuneKey,
        trial: Option<&mut T>,
        candidates: &[T::Config],
    ) -> Result<Choice, TuneError> {
        if self.mode == TuneMode::Off {
            return Ok(Choice::Default);
        }
        let id = key.id();
        if !self.needs_trial(key) {
            return Ok(match self.cache.get(&id) {
                Some(e) => Choice::Cached(e.winner),
                None => Choice::Default,
            });
        }
        let Some(trial) = trial else {
            return Ok(Choice::Default);
        };
        let outcome = tune(&key.op, trial, candidates)?;
        self.tuned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone());
        self.cache.put(
            &id,
            TuneEntry {
                winner: outcome.winner.clone(),
                default: outcome.default.clone(),
                speedup: outcome.speedup(),
                timings: outcome.timings.clone(),
                rejected: outcome
                    .rejected
                    .iter()
                    .map(|(n, r)| (n.clone(), r.to_string()))
                    .collect(),
            },
        );
        Ok(Choice::Tuned(outcome))
    }
}

/// `CUTILE_TUNE_CACHE`, else `tuning.json` beside the kernel cache directory; `None` (memory only) when
/// the disk cache is off or no home directory is known.
pub fn default_cache_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CUTILE_TUNE_CACHE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let config = crate::cache::CacheConfig::from_env().ok()?;
    let dir = config.disk_dir?;
    Some(match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.join("tuning.json"),
        _ => dir.join("tuning.json"),
    })
}
