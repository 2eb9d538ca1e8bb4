//! `tune`: a tuning run on the GPU machine. Every benchmark call is made once through its host API with
//! the process-wide tuner in `force` mode, which times every candidate configuration the family offers
//! (the bundle from `plan` holds them all) against the default, behind the correctness gate, and
//! caches the winner. Per call it prints the default, the winner and the speed-up read back from the
//! tuning cache, and writes `tune.json` and `tune.md` (and the cache itself, `tuning.json`) under
//! `--out`.
//!
//! The global tuner reads `CUTILE_TUNE` and `CUTILE_TUNE_CACHE` once per process, so unless both are
//! already set as needed, `tune` re-runs itself as a child with `CUTILE_TUNE=force` and
//! `CUTILE_TUNE_CACHE=$OUT/tuning.json`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, ExitCode};

use cutile::bundle::{self, Bundle};
use cutile::runtime::{Device, RuntimeError, Stream};
use cutile::tune::{TuneEntry, TuneMode, Tuner};
use cutile_examples::run::{After, Owned, call, instantiate};
use cutile_examples::workload::{benches, of_ops};
use serde::Serialize;

use crate::BoxError;

/// One tuned call.
#[derive(Debug, Serialize)]
pub struct Tuned {
    pub call: String,
    /// The tuning-cache ids the call wrote (one per tuned launch class); empty when the call's class
    /// was tuned by an earlier call or the op has nothing to tune.
    pub keys: Vec<String>,
    pub default: Option<String>,
    pub winner: Option<String>,
    pub speedup: Option<f64>,
    /// Every timed candidate (name, seconds).
    pub timings: Vec<(String, f64)>,
    /// Every candidate kept out by the correctness gate or a failure (name, why).
    pub rejected: Vec<(String, String)>,
    pub note: String,
    pub error: Option<String>,
}

fn env_is(name: &str, want: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == want)
}

/// Entry point: re-runs itself with the tuner's environment unless it is set.
pub fn tune(
    bundle_path: &Path,
    out: &Path,
    ops: &[String],
    allow_skip: bool,
) -> Result<ExitCode, BoxError> {
    std::fs::create_dir_all(out)?;
    let cache = std::path::absolute(out.join("tuning.json"))?;
    if !env_is("CUTILE_TUNE", "force")
        || std::env::var_os("CUTILE_TUNE_CACHE") != Some(cache.clone().into())
    {
        let status = Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .env("CUTILE_TUNE", "force")
            .env("CUTILE_TUNE_CACHE", &cache)
            .status()?;
        return Ok(match status.code() {
            Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
            None => ExitCode::FAILURE,
        });
    }
    run(bundle_path, out, ops, allow_skip)
}

fn changed(
    before: &BTreeMap<String, TuneEntry>,
    after: &BTreeMap<String, TuneEntry>,
) -> Vec<(String, TuneEntry)> {
    after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run(
    bundle_path: &Path,
    out: &Path,
    ops: &[String],
    allow_skip: bool,
) -> Result<ExitCode, BoxError> {
    let tuner = Tuner::global();
    if tuner.mode() != TuneMode::Force {
        return Err("the tuner is not in force mode (CUTILE_TUNE=force)".into());
    }
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(
            e @ (RuntimeError::NoDriver { .. }
            | RuntimeError::NoDevice { .. }
            | RuntimeError::DriverInit { .. }),
        ) => {
            println!("skipped: no CUDA driver or device ({e})");
            return Ok(if allow_skip {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            });
        }
        Err(e) => return Err(e.into()),
    };
    let stream = Stream::new(&device)?;
    bundle::register(Bundle::open(bundle_path)?);
    let mut ws = benches();
    if !ops.is_empty() {
        let names: Vec<&str> = ops.iter().map(String::as_str).collect();
        ws = of_ops(ws, &names);
    }
    println!(
        "gpu-harness tune on {} ({}): {} calls, cache {}",
        device.name(),
        device.arch(),
        ws.len(),
        tuner
            .cache()
            .path()
            .map_or("(memory)".into(), |p| p.display().to_string())
    );
    let mut results = Vec::new();
    let mut failed = 0;
    for w in &ws {
        let before = tuner.cache().entries();
        // One call through the host API tunes every launch class it makes; the families that own
        // their tensors (fused_qkv, decode, fp8, ...) run through their own modules.
        let r = match Owned::of(w) {
            Some(owned) => w
                .inputs()
                .and_then(|i| owned.run(&device, &stream, w, &i, None))
                .map(drop),
            None => instantiate(&device, w, false)
                .and_then(|mut inst| call(&stream, w, &mut inst, After::Wait)),
        };
        let new = changed(&before, &tuner.cache().entries());
        let mut t = Tuned {
            call: w.name.clone(),
            keys: new.iter().map(|(k, _)| k.clone()).collect(),
            default: None,
            winner: None,
            speedup: None,
            timings: Vec::new(),
            rejected: Vec::new(),
            note: String::new(),
            error: None,
        };
        if let Err(e) = r {
            failed += 1;
            t.error = Some(e.to_string());
            println!("{:<56} ERROR {e}", w.name);
        } else if let Some((_, e)) = new.first() {
            t.default = Some(e.default.clone());
            t.winner = Some(e.winner.clone());
            t.speedup = Some(e.speedup);
            t.timings = e.timings.clone();
            t.rejected = e.rejected.clone();
            if new.len() > 1 {
                t.note = format!("{} tuned classes; the first shown", new.len());
            }
            println!(
                "{:<56} default {:<28} winner {:<28} x{:.2}",
                w.name, e.default, e.winner, e.speedup
            );
            for (name, why) in &e.rejected {
                println!("{:<56}   rejected {name}: {why}", "");
            }
        } else {
            t.note =
                "not tuned: its class was tuned by an earlier call, or the op has no candidates"
                    .into();
            println!("{:<56} {}", w.name, t.note);
        }
        results.push(t);
        write(out, &results)?;
    }
    let (json, md) = write(out, &results)?;
    println!("results: {} and {}", json.display(), md.display());
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn write(
    out: &Path,
    results: &[Tuned],
) -> Result<(std::path::PathBuf, std::path::PathBuf), BoxError> {
    let json = out.join("tune.json");
    std::fs::write(&json, serde_json::to_vec_pretty(results)?)?;
    let mut md = String::from("| call | default | winner | speed-up |\n|---|---|---|---|\n");
    for t in results {
        let cell = |s: &Option<String>| s.clone().unwrap_or_else(|| "—".into());
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            t.call,
            cell(&t.default),
            cell(&t.winner),
            match (&t.error, t.speedup) {
                (Some(e), _) => format!("error: {e}"),
                (None, Some(s)) => format!("{s:.2}x"),
                (None, None) => t.note.clone(),
            }
        ));
    }
    let mdp = out.join("tune.md");
    std::fs::write(&mdp, md)?;
    Ok((json, mdp))
}
