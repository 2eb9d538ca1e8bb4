//! The tuner without a GPU: a fake trial whose "kernels" compute a known answer (or a wrong one) and
//! whose timer reports made-up times. The correctness gate must reject a wrong candidate however fast,
//! the cache must persist winners across tuners, and the modes must do what `CUTILE_TUNE` documents.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::tune::{
    Choice, Rejection, Trial, TrialError, TuneCache, TuneError, TuneKey, TuneMode, Tuner, tune,
};

/// A candidate: its name, its output (a scaled reference), its time, whether it fails to run.
#[derive(Debug, Clone)]
struct Fake {
    name: &'static str,
    scale: f32,
    seconds: f64,
    fails: bool,
}

fn fake(name: &'static str, scale: f32, seconds: f64) -> Fake {
    Fake {
        name,
        scale,
        seconds,
        fails: false,
    }
}

/// Counts runs and timings so tests can see what the tuner did.
#[derive(Debug, Default)]
struct FakeTrial {
    runs: Vec<&'static str>,
    timed: Vec<&'static str>,
}

impl Trial for FakeTrial {
    type Config = Fake;
    type Output = Vec<f32>;
    fn name(&self, c: &Fake) -> String {
        c.name.into()
    }
    fn run(&mut self, c: &Fake) -> Result<Vec<f32>, TrialError> {
        self.runs.push(c.name);
        if c.fails {
            return Err(format!("{} does not compile", c.name).into());
        }
        Ok((0..64).map(|i| i as f32 * c.scale).collect())
    }
    fn agrees(&self, r: &Vec<f32>, g: &Vec<f32>) -> bool {
        cutile_testkit::all_close(g, r, 1e-3, 1e-3).is_ok()
    }
    fn time(&mut self, c: &Fake) -> Result<f64, TrialError> {
        self.timed.push(c.name);
        Ok(c.seconds)
    }
}

fn key(class: &str) -> TuneKey {
    TuneKey {
        device: "Fake GPU".into(),
        arch: "sm_90".into(),
        driver: "13.0".into(),
        toolchain: "13.5.37".into(),
        op: "softmax".into(),
        class: class.into(),
    }
}

#[test]
fn a_fast_wrong_candidate_is_rejected_and_never_timed() {
    let candidates = [
        fake("default", 1.0, 10e-6),
        fake("wrong-but-fastest", 1.5, 1e-6),
        fake("right-and-faster", 1.0, 5e-6),
        Fake {
            fails: true,
            ..fake("broken", 1.0, 0.5e-6)
        },
        fake("right-but-slower", 1.0, 20e-6),
    ];
    let mut trial = FakeTrial::default();
    let out = tune("softmax", &mut trial, &candidates).unwrap();
    assert_eq!(out.winner, "right-and-faster");
    assert_eq!(out.winner_index, 2);
    assert!((out.speedup() - 2.0).abs() < 1e-9);
    assert_eq!(
        out.rejected,
        vec![
            ("wrong-but-fastest".to_string(), Rejection::Mismatch),
            (
                "broken".to_string(),
                Rejection::Failed("broken does not compile".into())
            )
        ]
    );
    assert!(!trial.timed.contains(&"wrong-but-fastest"));
    assert!(!trial.timed.contains(&"broken"));
    // The default ran first: it is the reference.
    assert_eq!(trial.runs[0], "default");
}

#[test]
fn the_default_wins_ties_and_a_failing_default_is_an_error() {
    let mut trial = FakeTrial::default();
    let out = tune(
        "op",
        &mut trial,
        &[fake("default", 1.0, 3e-6), fake("same", 1.0, 3e-6)],
    )
    .unwrap();
    assert_eq!(out.winner, "default");
    assert_eq!(out.speedup(), 1.0);
    let broken = Fake {
        fails: true,
        ..fake("default", 1.0, 1e-6)
    };
    let err = tune("op", &mut FakeTrial::default(), &[broken]).unwrap_err();
    assert!(matches!(err, TuneError::Default { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("the default configuration `default` failed")
    );
    assert!(matches!(
        tune::<FakeTrial>("op", &mut FakeTrial::default(), &[]),
        Err(TuneError::NoCandidates { .. })
    ));
}

#[test]
fn modes_and_the_persistent_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("tuning.json");
    let candidates = [fake("default", 1.0, 10e-6), fake("fast", 1.0, 2e-6)];

    // off: nothing runs.
    let off = Tuner::new(TuneMode::Off, TuneCache::open(Some(path.clone())));
    let mut trial = FakeTrial::default();
    assert_eq!(
        off.choose(&key("c1"), Some(&mut trial), &candidates)
            .unwrap(),
        Choice::Default
    );
    assert!(trial.runs.is_empty());

    // on: tunes a class once, then uses the cached winner.
    let on = Tuner::new(TuneMode::On, TuneCache::open(Some(path.clone())));
    assert!(on.needs_trial(&key("c1")));
    let mut trial = FakeTrial::default();
    let first = on
        .choose(&key("c1"), Some(&mut trial), &candidates)
        .unwrap();
    assert_eq!(first.name(), Some("fast"));
    assert!(matches!(first, Choice::Tuned(_)));
    assert!(!on.needs_trial(&key("c1")));
    let mut trial = FakeTrial::default();
    let again = on
        .choose(&key("c1"), Some(&mut trial), &candidates)
        .unwrap();
    assert_eq!(again, Choice::Cached("fast".into()));
    assert!(trial.runs.is_empty());

    // A new process (new tuner on the same file) finds it; another class or device does not.
    let later = Tuner::new(TuneMode::On, TuneCache::open(Some(path.clone())));
    assert!(!later.needs_trial(&key("c1")));
    assert!(later.needs_trial(&key("c2")));
    let mut other_device = key("c1");
    other_device.device = "Other GPU".into();
    assert!(later.needs_trial(&other_device));
    let entry = later.cache().get(&key("c1").id()).unwrap();
    assert_eq!(entry.winner, "fast");
    assert!((entry.speedup - 5.0).abs() < 1e-9);

    // force: tunes again once per process even with a cached winner.
    let force = Tuner::new(TuneMode::Force, TuneCache::open(Some(path.clone())));
    assert!(force.needs_trial(&key("c1")));
    let mut trial = FakeTrial::default();
    assert!(matches!(
        force
            .choose(&key("c1"), Some(&mut trial), &candidates)
            .unwrap(),
        Choice::Tuned(_)
    ));
    assert!(!force.needs_trial(&key("c1")));

    // A corrupt file reads as empty and is replaced on the next write.
    std::fs::write(&path, b"{not json").unwrap();
    let fresh = Tuner::new(TuneMode::On, TuneCache::open(Some(path.clone())));
    assert!(fresh.needs_trial(&key("c1")));
    fresh
        .choose(&key("c1"), Some(&mut FakeTrial::default()), &candidates)
        .unwrap();
    assert!(TuneCache::open(Some(path)).get(&key("c1").id()).is_some());
}

/// A tuned class's cache entry names the candidates the gate or a failure kept out, and why, so a
/// wrong kernel is visible in `tuning.json` and not only missing from its timings.
#[test]
fn the_cache_records_rejected_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let candidates = [
        fake("default", 1.0, 10e-6),
        fake("wrong", 2.0, 1e-6),
        Fake {
            fails: true,
            ..fake("broken", 1.0, 1e-6)
        },
    ];
    let tuner = Tuner::new(TuneMode::Force, TuneCache::open(Some(path.clone())));
    tuner
        .choose(&key("c1"), Some(&mut FakeTrial::default()), &candidates)
        .unwrap();
    let entry = TuneCache::open(Some(path)).get(&key("c1").id()).unwrap();
    assert_eq!(entry.winner, "default");
    assert_eq!(entry.timings.len(), 1);
    assert_eq!(
        entry.rejected,
        vec![
            (
                "wrong".to_string(),
                "output differs from the default's beyond the tolerance".to_string()
            ),
            (
                "broken".to_string(),
                "failed: broken does not compile".to_string()
            ),
        ]
    );
}

#[test]
fn mode_parsing() {
    for (v, m) in [
        ("", TuneMode::Off),
        ("off", TuneMode::Off),
        ("ON", TuneMode::On),
        ("1", TuneMode::On),
        ("force", TuneMode::Force),
    ] {
        assert_eq!(TuneMode::parse(v).unwrap(), m, "{v:?}");
    }
    let err = TuneMode::parse("fast").unwrap_err();
    assert!(
        err.to_string()
            .contains("use `off` (the default), `on` or `force`")
    );
}
