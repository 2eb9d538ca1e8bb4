//! The versioned JSON files of a run (documented in `docs/gpu-runner.md`):
//!
//! - `check.json` ([`CheckFile`], schema `cutile-check`);
//! - `bench.json` (ours) and `peers.json` (`ci/gpu/peers.py`), both [`BenchFile`] (schema
//!   `cutile-bench`): rows of one implementation each, joined on `name`;
//! - `report.json` ([`BenchFile`] with every row, ours and peers, plus the pairing in `pairs`).
//!
//! `schema_version` changes when a field changes meaning or is removed; adding an optional field does
//! not change it. Readers refuse a newer version.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::BoxError;

pub const SCHEMA_VERSION: u32 = 1;
pub const CHECK_SCHEMA: &str = "cutile-check";
pub const BENCH_SCHEMA: &str = "cutile-bench";
/// The implementation name of our rows.
pub const OURS: &str = "cutile";
/// The H200's device copy bandwidth (GB/s) as measured in session 3: the roofline of a file that
/// carries no measured [`Env::copy_gbps`] (files written before the bench measured it).
pub const H200_COPY_GBPS: f64 = 4270.0;
/// Dense bf16 peak (TFLOP/s) of the H100 and H200 SXM (the same tensor cores and clocks).
pub const PEAK_TFLOPS: f64 = 989.0;

/// One failing check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckFailure {
    /// The case as generated (JSON of `check::Case`), or the fixed check's name.
    pub case: String,
    /// The shrunk case.
    pub minimal: String,
    pub message: String,
    /// One command line re-running only the minimal case.
    pub reproduce: String,
}

impl CheckFailure {
    pub fn fixed(name: &str, message: String) -> CheckFailure {
        CheckFailure {
            case: name.into(),
            minimal: name.into(),
            message,
            reproduce: "gpu-harness check --fixed --bundle .gpu/kernels.bundle".into(),
        }
    }
}

/// `check.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckFile {
    pub schema: String,
    pub schema_version: u32,
    pub device: String,
    pub arch: String,
    /// `property`, `fixed` or `case`.
    pub mode: String,
    pub seed: u64,
    pub cases: usize,
    pub passed: usize,
    /// Cases the op refused while planning (not run).
    pub rejected: usize,
    #[serde(default)]
    pub per_op: BTreeMap<String, usize>,
    pub kernels_compiled: usize,
    pub jit_seconds: f64,
    #[serde(default)]
    pub compile_failures: Vec<String>,
    pub failures: Vec<CheckFailure>,
}

/// The machine a bench ran on (`nvidia-smi` where available).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Env {
    pub device: String,
    pub arch: String,
    #[serde(default)]
    pub driver: Option<String>,
    #[serde(default)]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default)]
    pub max_sm_clock_mhz: Option<f64>,
    #[serde(default)]
    pub mem_clock_mhz: Option<f64>,
    #[serde(default)]
    pub power_limit_w: Option<f64>,
    #[serde(default)]
    pub temperature_c: Option<f64>,
    /// `CUDA_VISIBLE_DEVICES` of the process.
    #[serde(default)]
    pub visible_devices: Option<String>,
    /// Device copy bandwidth (GB/s, read + written) measured by the bench at its start
    /// (`cutile::runtime::timing::copy_gbps`): the memory roofline of this run.
    #[serde(default)]
    pub copy_gbps: Option<f64>,
    /// Free-form: torch/triton versions (peers), the timing method.
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

impl Env {
    /// The memory roofline of the run: the measured copy bandwidth, or [`H200_COPY_GBPS`] for a file
    /// without one.
    pub fn copy_roofline_gbps(&self) -> f64 {
        self.copy_gbps
            .filter(|g| g.is_finite() && *g > 0.0)
            .unwrap_or(H200_COPY_GBPS)
    }

    /// The roofline of rows in `unit`: [`Env::copy_roofline_gbps`] for `GB/s`, else the bf16 peak.
    pub fn roofline(&self, unit: &str) -> f64 {
        if unit == "GB/s" {
            self.copy_roofline_gbps()
        } else {
            PEAK_TFLOPS
        }
    }
}

/// One timed call of one implementation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The harness's call name (the join key), e.g. `softmax bf16 [8192, 8192]`.
    pub name: String,
    pub op: String,
    pub dtype: String,
    pub shapes: Vec<Vec<i64>>,
    #[serde(default)]
    pub causal: bool,
    #[serde(default)]
    pub layout: String,
    /// `cutile`, `torch`, `cublas`, `triton`, `cudnn`, `flash`, …
    #[serde(rename = "impl")]
    pub implementation: String,
    /// Configuration detail (e.g. Triton num_warps).
    #[serde(default)]
    pub cfg: Option<String>,
    pub median_us: f64,
    #[serde(default)]
    pub min_us: f64,
    #[serde(default)]
    pub p90_us: f64,
    #[serde(default)]
    pub samples: usize,
    /// Bytes moved (memory-bound ops) or flops of one call.
    #[serde(default)]
    pub bytes: Option<f64>,
    #[serde(default)]
    pub flops: Option<f64>,
    /// GB/s or TFLOP/s at the median.
    pub throughput: f64,
    pub unit: String,
    #[serde(default)]
    pub l2_flushed: bool,
    /// Relative L2 error against a float32 reference (peers) when measured.
    #[serde(default)]
    pub rel_err: Option<f64>,
    /// Set when the row could not be measured (then the times are 0).
    #[serde(default)]
    pub error: Option<String>,
}

impl Row {
    /// Fraction of the run's roofline ([`Env::roofline`]) at the median.
    pub fn roofline_fraction(&self, env: &Env) -> f64 {
        self.throughput / env.roofline(&self.unit)
    }

    /// Problem size for plots: bytes or flops.
    pub fn size(&self) -> f64 {
        self.bytes.or(self.flops).unwrap_or(0.0)
    }
}

/// `bench.json`, `peers.json`, `report.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchFile {
    pub schema: String,
    pub schema_version: u32,
    /// `cutile-harness bench`, `peers.py`, `report`.
    pub producer: String,
    pub env: Env,
    pub rows: Vec<Row>,
}

impl BenchFile {
    pub fn new(producer: &str, env: Env) -> BenchFile {
        BenchFile {
            schema: BENCH_SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            producer: producer.into(),
            env,
            rows: Vec::new(),
        }
    }

    /// Parses and validates the schema name and version.
    pub fn parse(text: &str) -> Result<BenchFile, BoxError> {
        let f: BenchFile = serde_json::from_str(text)?;
        if f.schema != BENCH_SCHEMA {
            return Err(format!("schema `{}`, expected `{BENCH_SCHEMA}`", f.schema).into());
        }
        if f.schema_version > SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} is newer than this reader's {SCHEMA_VERSION}",
                f.schema_version
            )
            .into());
        }
        Ok(f)
    }

    pub fn read(path: &Path) -> Result<BenchFile, BoxError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        BenchFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()).into())
    }

    pub fn write(&self, path: &Path) -> Result<(), BoxError> {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(path, serde_json::to_vec_pretty(self)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = include_str!("../tests/golden/bench-v1.json");

    #[test]
    fn golden_example_parses_and_round_trips() {
        let f = BenchFile::parse(GOLDEN).expect("golden parses");
        assert_eq!(f.schema_version, 1);
        assert_eq!(f.rows.len(), 3);
        assert_eq!(f.rows[1].implementation, "torch");
        let back = BenchFile::parse(&serde_json::to_string(&f).expect("ser")).expect("de");
        assert_eq!(back, f);
    }

    #[test]
    fn newer_version_and_other_schema_are_refused() {
        let mut v: serde_json::Value = serde_json::from_str(GOLDEN).expect("json");
        v["schema_version"] = 2.into();
        assert!(BenchFile::parse(&v.to_string()).is_err());
        v["schema_version"] = 1.into();
        v["schema"] = "other".into();
        assert!(BenchFile::parse(&v.to_string()).is_err());
    }

    #[test]
    fn check_file_round_trips() {
        let f = CheckFile {
            schema: CHECK_SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            mode: "property".into(),
            seed: 5,
            cases: 2,
            passed: 1,
            failures: vec![CheckFailure::fixed("x", "bad".into())],
            ..CheckFile::default()
        };
        let back: CheckFile =
            serde_json::from_str(&serde_json::to_string(&f).expect("ser")).expect("de");
        assert_eq!(back, f);
    }
}
