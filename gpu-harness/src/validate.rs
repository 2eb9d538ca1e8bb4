//! `validate`: the burn-in of a new node. One process per visible GPU (the binary re-runs itself with
//! `CUDA_VISIBLE_DEVICES=i`), each running a short `check` and then `bench`; then every GPU's bench rows
//! are held to the per-arch thresholds kept in the repo (`gpu-harness/thresholds/<arch>.toml`, compiled
//! in; `--thresholds FILE` overrides) and to their siblings (a row more than the sibling band slower than
//! the median of the same row on the other processes is an outlier). Writes `node-report.json` and
//! `node-report.md` under `--out`; exit status 1 on any failure.
//!
//! `--processes-per-gpu K` runs K processes per device, so the multi-process path runs on one GPU; the
//! benches of processes sharing a device run one after another (checks run together). Every visible
//! GPU runs at once by default; `--devices 0,3` picks some (ordinals of the visible set).
//!
//! After the workers, the NCCL check: an all-reduce over the chosen GPUs, its bus bandwidth
//! (nccl-tests: `algbw · 2(n−1)/n`) held to `--nccl-min-fraction` of the per-GPU NVLink bandwidth
//! `nvidia-smi nvlink -s` reports (no figure: measured, not judged). With one GPU it is reported
//! skipped (it needs ≥ 2), never passed; `--no-nccl` leaves it out. NVLink multicast stays off.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::BoxError;
use crate::schema::{BenchFile, CheckFile, Row};

/// One minimum: rows of `ops` (and `dtypes`, when listed) doing at least `min_work` bytes or flops
/// must reach `min_gbps` / `min_tflops`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub name: String,
    pub ops: Vec<String>,
    #[serde(default)]
    pub dtypes: Vec<String>,
    /// Rows with less work are launch-bound and not held to the minimum.
    #[serde(default)]
    pub min_work: f64,
    #[serde(default)]
    pub min_gbps: Option<f64>,
    #[serde(default)]
    pub min_tflops: Option<f64>,
}

/// A thresholds file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub arch: String,
    /// Relative slack against siblings (0.10: 10% slower than the siblings' median is an outlier).
    pub sibling_band: f64,
    #[serde(default)]
    pub rule: Vec<Rule>,
}

/// The thresholds kept in the repo, by arch.
pub fn builtin(arch: &str) -> Option<&'static str> {
    match arch {
        "sm_90" => Some(include_str!("../thresholds/sm_90.toml")),
        _ => None,
    }
}

impl Thresholds {
    pub fn parse(text: &str) -> Result<Thresholds, BoxError> {
        Ok(toml::from_str(text)?)
    }
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// `gpu0-p0` …
    pub worker: String,
    /// `threshold`, `outlier`, `check`, `bench`, `process`.
    pub kind: String,
    pub what: String,
}

/// Rows of `rows` below their rule's minimum.
pub fn below_thresholds(th: &Thresholds, rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.error.is_none()) {
        for rule in &th.rule {
            if !rule.ops.contains(&r.op)
                || (!rule.dtypes.is_empty() && !rule.dtypes.contains(&r.dtype))
            {
                continue;
            }
            if r.size() < rule.min_work {
                continue;
            }
            let min = if r.unit == "GB/s" {
                rule.min_gbps
            } else {
                rule.min_tflops
            };
            if let Some(min) = min
                && r.throughput < min
            {
                out.push(format!(
                    "{}: {:.1} {} < {min} ({})",
                    r.name, r.throughput, r.unit, rule.name
                ));
            }
        }
    }
    out
}

/// Sibling outliers: for each call timed by at least two workers, a worker whose median time is more
/// than `band` above the median over all workers. Returns (worker, message).
pub fn outliers(workers: &[(String, Vec<Row>)], band: f64) -> Vec<(String, String)> {
    let mut names: Vec<&str> = workers
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.name.as_str()))
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let times: Vec<(&str, f64)> = workers
            .iter()
            .filter_map(|(w, rows)| {
                rows.iter()
                    .find(|r| r.name == name && r.error.is_none() && r.median_us > 0.0)
                    .map(|r| (w.as_str(), r.median_us))
            })
            .collect();
        if times.len() < 2 {
            continue;
        }
        let mut t: Vec<f64> = times.iter().map(|x| x.1).collect();
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2.0
        };
        for (w, us) in times {
            if us > median * (1.0 + band) {
                out.push((
                    w.to_string(),
                    format!(
                        "{name}: {us:.2} µs is {:.0}% slower than the siblings' median {median:.2} µs",
                        100.0 * (us / median - 1.0)
                    ),
                ));
            }
        }
    }
    out
}

/// Options of `validate`.
#[derive(Debug, Clone)]
pub struct ValidateArgs {
    pub bundle: Option<PathBuf>,
    pub out: PathBuf,
    pub check_cases: usize,
    pub seed: u64,
    pub processes_per_gpu: usize,
    pub thresholds: Option<PathBuf>,
    pub sibling_band: Option<f64>,
    pub sample_size: usize,
    pub measurement_ms: u64,
    pub warm_up_ms: u64,
    /// Ops to bench (empty: all).
    pub bench_ops: Vec<String>,
    pub fixed_check: bool,
    /// Ordinals of the visible GPUs to run (empty: all).
    pub devices: Vec<usize>,
    /// Leave out the NCCL all-reduce check.
    pub no_nccl: bool,
    /// Bytes of the NCCL check's all-reduce.
    pub nccl_bytes: usize,
    /// busbw must reach this fraction of the NVLink figure.
    pub nccl_min_fraction: f64,
}

/// The node report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeReport {
    pub schema: String,
    pub schema_version: u32,
    pub arch: String,
    pub gpus: Vec<String>,
    pub workers: Vec<WorkerResult>,
    pub findings: Vec<Finding>,
    pub pass: bool,
    /// The NCCL all-reduce bandwidth check (absent with `--no-nccl`).
    #[serde(default)]
    pub nccl: Option<cutile_tp::report::BusBwCheck>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerResult {
    pub worker: String,
    pub visible_device: String,
    pub check_exit: Option<i32>,
    pub bench_exit: Option<i32>,
    pub checks_passed: usize,
    pub checks_failed: usize,
    pub bench_rows: usize,
}

fn visible_gpus() -> Result<Vec<String>, BoxError> {
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES")
        && !v.trim().is_empty()
    {
        return Ok(v.split(',').map(|s| s.trim().to_string()).collect());
    }
    let n = cutile::runtime::Device::count()?;
    Ok((0..n).map(|i| i.to_string()).collect())
}

fn spawn_logged(args: &[String], gpu: &str, log: &Path) -> Result<Option<i32>, BoxError> {
    let f = std::fs::File::create(log)?;
    let status = Command::new(std::env::current_exe()?)
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", gpu)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .status()?;
    Ok(status.code())
}

/// The chosen GPUs (`CUDA_VISIBLE_DEVICES` values for the workers) and their ordinals here.
pub fn pick_devices(
    visible: &[String],
    devices: &[usize],
) -> Result<(Vec<String>, Vec<usize>), BoxError> {
    if devices.is_empty() {
        return Ok((visible.to_vec(), (0..visible.len()).collect()));
    }
    let mut ords = devices.to_vec();
    ords.sort_unstable();
    ords.dedup();
    let mut out = Vec::new();
    for &o in &ords {
        out.push(
            visible
                .get(o)
                .ok_or_else(|| format!("--devices {o}: only {} GPU(s) visible", visible.len()))?
                .clone(),
        );
    }
    Ok((out, ords))
}

/// The NCCL all-reduce check over the devices `ordinals`.
fn nccl_check(a: &ValidateArgs, ordinals: &[usize]) -> cutile_tp::report::BusBwCheck {
    let n = ordinals.len();
    let measured = (n >= 2).then(|| {
        cutile_tp::nccl::measure_all_reduce(ordinals, a.nccl_bytes, 5, 20)
            .map_err(|e| e.to_string())
    });
    cutile_tp::report::judge_busbw(
        n,
        measured,
        cutile_tp::nccl::nvlink_gbps(),
        a.nccl_min_fraction,
    )
}

pub fn run(a: &ValidateArgs) -> Result<ExitCode, BoxError> {
    let visible = match visible_gpus() {
        Ok(g) if !g.is_empty() => g,
        Ok(_) | Err(_) => {
            println!("skipped: no CUDA driver or device");
            return Ok(ExitCode::from(3));
        }
    };
    let (gpus, ordinals) = pick_devices(&visible, &a.devices)?;
    let device = cutile::runtime::Device::new(0)?;
    let arch = device.arch();
    drop(device);
    let th_text = match &a.thresholds {
        Some(p) => std::fs::read_to_string(p)?,
        None => builtin(&arch)
            .ok_or_else(|| format!("no thresholds for {arch}; pass --thresholds FILE"))?
            .to_string(),
    };
    let th = Thresholds::parse(&th_text)?;
    let band = a.sibling_band.unwrap_or(th.sibling_band);
    std::fs::create_dir_all(&a.out)?;
    let k = a.processes_per_gpu.max(1);
    println!(
        "validate: {} GPU(s) [{}], {k} process(es) each, arch {arch}",
        gpus.len(),
        gpus.join(",")
    );
    let locks: Vec<Mutex<()>> = gpus.iter().map(|_| Mutex::new(())).collect();
    let mut jobs = Vec::new();
    for (gi, g) in gpus.iter().enumerate() {
        for p in 0..k {
            jobs.push((gi, g.clone(), format!("gpu{g}-p{p}")));
        }
    }
    let bar = crate::progress::bar(jobs.len() as u64, "validate workers");
    let results: Vec<(WorkerResult, Vec<Finding>)> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(gi, g, name)| {
                let (locks, bar) = (&locks, &bar);
                s.spawn(move || {
                    let r = worker(a, g, name, &locks[*gi]);
                    bar.inc(1);
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(&jobs)
            .map(|(h, (_, g, name))| {
                h.join().unwrap_or_else(|_| {
                    (
                        WorkerResult {
                            worker: name.clone(),
                            visible_device: g.clone(),
                            ..WorkerResult::default()
                        },
                        vec![Finding {
                            worker: name.clone(),
                            kind: "process".into(),
                            what: "worker thread panicked".into(),
                        }],
                    )
                })
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut report = NodeReport {
        schema: "cutile-node".into(),
        schema_version: crate::schema::SCHEMA_VERSION,
        arch,
        gpus,
        ..NodeReport::default()
    };
    let mut bench_rows = Vec::new();
    for (w, f) in results {
        let dir = a.out.join(&w.worker);
        if let Ok(b) = BenchFile::read(&dir.join("bench.json")) {
            for t in below_thresholds(&th, &b.rows) {
                report.findings.push(Finding {
                    worker: w.worker.clone(),
                    kind: "threshold".into(),
                    what: t,
                });
            }
            bench_rows.push((w.worker.clone(), b.rows));
        }
        report.findings.extend(f);
        report.workers.push(w);
    }
    for (w, what) in outliers(&bench_rows, band) {
        report.findings.push(Finding {
            worker: w,
            kind: "outlier".into(),
            what,
        });
    }
    if !a.no_nccl {
        let c = nccl_check(a, &ordinals);
        if c.state == "fail" || c.state == "error" {
            report.findings.push(Finding {
                worker: format!("gpus {}", report.gpus.join(",")),
                kind: "nccl".into(),
                what: c.why.clone(),
            });
        }
        report.nccl = Some(c);
    }
    report.pass = report.findings.is_empty();
    let json = a.out.join("node-report.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&report)?)?;
    let md = node_markdown(&report, band);
    std::fs::write(a.out.join("node-report.md"), &md)?;
    println!("{md}");
    println!("node report: {}", json.display());
    Ok(if report.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn worker(
    a: &ValidateArgs,
    gpu: &str,
    name: &str,
    lock: &Mutex<()>,
) -> (WorkerResult, Vec<Finding>) {
    let dir = a.out.join(name);
    let mut w = WorkerResult {
        worker: name.into(),
        visible_device: gpu.into(),
        ..WorkerResult::default()
    };
    let mut findings = Vec::new();
    let mut find = |kind: &str, what: String| {
        findings.push(Finding {
            worker: name.into(),
            kind: kind.into(),
            what,
        })
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        find("process", e.to_string());
        return (w, findings);
    }
    let bundle: Vec<String> = a
        .bundle
        .iter()
        .flat_map(|b| ["--bundle".to_string(), b.display().to_string()])
        .collect();
    let out = ["--out".to_string(), dir.display().to_string()];
    let mut check: Vec<String> = vec!["check".into()];
    if a.fixed_check {
        check.push("--fixed".into());
    } else {
        check.extend([
            "--cases".into(),
            a.check_cases.to_string(),
            "--seed".into(),
            a.seed.to_string(),
        ]);
    }
    check.extend(bundle.iter().cloned());
    check.extend(out.iter().cloned());
    match spawn_logged(&check, gpu, &dir.join("check.log")) {
        Ok(c) => {
            w.check_exit = c;
            if c != Some(0) {
                find(
                    "check",
                    format!("check exited {c:?}; see {}/check.log", dir.display()),
                );
            }
        }
        Err(e) => find("process", format!("check: {e}")),
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("check.json"))
        && let Ok(c) = serde_json::from_str::<CheckFile>(&text)
    {
        w.checks_passed = c.passed;
        w.checks_failed = c.failures.len();
    }
    let mut bench: Vec<String> = vec![
        "bench".into(),
        "--sample-size".into(),
        a.sample_size.to_string(),
        "--measurement-ms".into(),
        a.measurement_ms.to_string(),
        "--warm-up-ms".into(),
        a.warm_up_ms.to_string(),
    ];
    if !a.bench_ops.is_empty() {
        bench.extend(["--ops".into(), a.bench_ops.join(",")]);
    }
    bench.extend(bundle);
    bench.extend(out);
    // Benches sharing a device run one at a time.
    let guard = lock.lock();
    match spawn_logged(&bench, gpu, &dir.join("bench.log")) {
        Ok(c) => {
            w.bench_exit = c;
            if c != Some(0) {
                find(
                    "bench",
                    format!("bench exited {c:?}; see {}/bench.log", dir.display()),
                );
            }
        }
        Err(e) => find("process", format!("bench: {e}")),
    }
    drop(guard);
    if let Ok(b) = BenchFile::read(&dir.join("bench.json")) {
        w.bench_rows = b.rows.len();
    }
    (w, findings)
}

fn node_markdown(r: &NodeReport, band: f64) -> String {
    let mut s = format!(
        "# Node validation: {}\n\n{} GPU(s), arch {}, sibling band ±{:.0}%\n\n| worker | device | check exit | checks passed | checks failed | bench exit | bench rows |\n|---|---|---|---|---|---|---|\n",
        if r.pass { "PASS" } else { "FAIL" },
        r.gpus.len(),
        r.arch,
        band * 100.0
    );
    // A process that did not exit (killed, not started) has no code: shown as `–`.
    let code = |c: Option<i32>| c.map_or_else(|| "–".to_string(), |c| c.to_string());
    for w in &r.workers {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            w.worker,
            w.visible_device,
            code(w.check_exit),
            w.checks_passed,
            w.checks_failed,
            code(w.bench_exit),
            w.bench_rows
        ));
    }
    if let Some(c) = &r.nccl {
        s.push_str(&c.markdown());
    }
    if !r.findings.is_empty() {
        s.push_str("\n## Findings\n\n");
        for f in &r.findings {
            s.push_str(&format!("- **{}** {}: {}\n", f.kind, f.worker, f.what));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        crate::schema::BenchFile::parse(include_str!("../tests/golden/bench-v1.json"))
            .expect("golden")
            .rows
    }

    #[test]
    fn builtin_thresholds_parse() {
        let th = Thresholds::parse(builtin("sm_90").expect("sm_90")).expect("parse");
        assert_eq!(th.arch, "sm_90");
        assert!(th.sibling_band > 0.0 && th.sibling_band < 0.5);
        assert!(th.rule.iter().any(|r| r.ops.contains(&"gemm".to_string())));
    }

    #[test]
    fn thresholds_pass_and_fail() {
        let th = Thresholds::parse(builtin("sm_90").expect("sm_90")).expect("parse");
        let mut r = rows();
        // The golden numbers are healthy H200 numbers.
        assert!(
            below_thresholds(&th, &r).is_empty(),
            "{:?}",
            below_thresholds(&th, &r)
        );
        r[0].throughput = 100.0; // softmax at 100 GB/s
        r[2].throughput = 50.0; // gemm at 50 TFLOP/s
        let bad = below_thresholds(&th, &r);
        assert_eq!(bad.len(), 2, "{bad:?}");
        // Below the work floor, rows are not held to the minimum.
        r[0].bytes = Some(1e3);
        r[2].flops = Some(1e3);
        assert!(below_thresholds(&th, &r).is_empty());
    }

    #[test]
    fn sibling_outliers_are_flagged() {
        let base = rows();
        let mut slow = base.clone();
        slow[0].median_us *= 1.5;
        let workers = vec![
            ("gpu0-p0".to_string(), base.clone()),
            ("gpu1-p0".to_string(), base.clone()),
            ("gpu2-p0".to_string(), slow),
        ];
        let o = outliers(&workers, 0.10);
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].0, "gpu2-p0");
        assert!(o[0].1.starts_with("softmax"));
        // Within the band: nothing.
        let mut close = base.clone();
        close[0].median_us *= 1.05;
        assert!(outliers(&[("a".into(), base), ("b".into(), close)], 0.10).is_empty());
    }

    #[test]
    fn node_markdown_shows_exit_codes_and_findings() {
        let worker = |name: &str, check_exit| WorkerResult {
            worker: name.into(),
            visible_device: "0".into(),
            check_exit,
            bench_exit: Some(0),
            checks_passed: 40,
            ..WorkerResult::default()
        };
        let report = NodeReport {
            arch: "sm_90".into(),
            gpus: vec!["0".into()],
            workers: vec![worker("gpu0-p0", Some(0)), worker("gpu0-p1", None)],
            findings: vec![Finding {
                worker: "gpu0-p1".into(),
                kind: "process".into(),
                what: "check was killed".into(),
            }],
            pass: false,
            ..NodeReport::default()
        };
        let md = node_markdown(&report, 0.10);
        assert!(md.starts_with("# Node validation: FAIL"), "{md}");
        assert!(md.contains("| gpu0-p0 | 0 | 0 | 40 | 0 | 0 | 0 |"), "{md}");
        assert!(md.contains("| gpu0-p1 | 0 | – | 40 | 0 | 0 | 0 |"), "{md}");
        assert!(
            md.contains("- **process** gpu0-p1: check was killed"),
            "{md}"
        );
        assert!(!md.contains("Some("), "{md}");
    }

    #[test]
    fn device_lists_pick_from_the_visible_set() {
        let vis: Vec<String> = ["4", "5", "6", "7"].iter().map(|s| s.to_string()).collect();
        let (g, o) = pick_devices(&vis, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g, o), (vis.clone(), vec![0, 1, 2, 3]));
        let (g, o) = pick_devices(&vis, &[3, 1, 3]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g, o), (vec!["5".to_string(), "7".to_string()], vec![1, 3]));
        let e = pick_devices(&vis, &[4]).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("--devices 4: only 4 GPU(s) visible"));
    }

    #[test]
    fn node_markdown_shows_the_nccl_check() {
        use cutile_tp::nccl::BusBw;
        use cutile_tp::report::judge_busbw;
        let mut report = NodeReport {
            arch: "sm_90".into(),
            gpus: vec!["0".into()],
            pass: true,
            nccl: Some(judge_busbw(1, None, None, 0.5)),
            ..NodeReport::default()
        };
        let md = node_markdown(&report, 0.10);
        assert!(
            md.contains("## NCCL all-reduce bus bandwidth: skipped"),
            "{md}"
        );
        assert!(md.contains("needs ≥ 2 GPUs; 1 visible"), "{md}");
        let m = BusBw {
            ranks: 8,
            bytes: 1 << 28,
            time_us: 1000.0,
            algbw_gbps: 268.4,
            busbw_gbps: 469.8,
        };
        report.nccl = Some(judge_busbw(8, Some(Ok(m)), None, 0.5));
        let md = node_markdown(&report, 0.10);
        assert!(md.contains("bus bandwidth: measured"), "{md}");
        assert!(
            md.contains("| 8 | 268435456 | 1000.0 | 268.4 | 469.8 | unknown |"),
            "{md}"
        );
        let json = serde_json::to_string(&report).unwrap_or_else(|e| panic!("{e}"));
        let back: NodeReport = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.nccl.map(|c| c.state), Some("measured".to_string()));
    }
}
