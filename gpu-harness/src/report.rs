//! The results of a run: serialisable records per phase, the JSON file, and the summary table.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::BoxError;

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub device: String,
    pub arch: String,
    pub sm_count: u32,
    pub bundle: String,
    pub bundle_entries: usize,
    pub checks: Vec<Check>,
    pub benches: Vec<Bench>,
    pub host: Option<Host>,
    pub graph: Option<Graph>,
    pub first_launch: Vec<FirstLaunch>,
    /// Failures that stopped a workload or phase.
    pub errors: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub rel_l2: f64,
    pub tolerance: f64,
    pub compared: usize,
    pub pass: bool,
}

#[derive(Debug, Serialize)]
pub struct Bench {
    pub name: String,
    pub median_us: f64,
    pub min_us: f64,
    pub p90_us: f64,
    pub samples: usize,
    pub throughput: f64,
    pub unit: String,
    pub l2_flushed: bool,
}

/// Host time of one warm launch call (µs), from the host clock around the call, no sync inside.
#[derive(Debug, Serialize)]
pub struct Host {
    pub kernel: String,
    pub launches: usize,
    /// The same arguments every time (the launcher reuses its packed buffer).
    pub same_args_median_us: f64,
    pub same_args_p90_us: f64,
    /// Two argument sets alternating (packed afresh every time).
    pub alternating_args_median_us: f64,
    pub alternating_args_p90_us: f64,
    /// The runtime's `Kernel::enqueue` with arguments packed once: driver + runtime only.
    pub runtime_enqueue_median_us: f64,
    /// A tiny softmax (`[4, 128]` f16) through the host API (`cutile_kernels::softmax::softmax`):
    /// validation, configuration, planning and launch.
    pub host_api_softmax_median_us: f64,
    /// The same softmax through `cutile_kernels::foreign` (a borrowed stream and described tensors, as
    /// the Python package and the C ABI call it).
    pub foreign_softmax_median_us: f64,
    /// The same softmax replayed (`foreign::Replay`: prepared once, then packing and the driver call).
    pub replayed_softmax_median_us: f64,
    /// Planning that softmax alone (validation, configuration, the launch plan; nothing launched).
    pub softmax_plan_median_us: f64,
}

/// Device time per kernel inside a CUDA graph of many launches of the tiny kernel.
#[derive(Debug, Serialize)]
pub struct Graph {
    pub kernel: String,
    pub kernels_per_graph: usize,
    pub per_kernel_median_us: f64,
    /// The same launches queued one by one on a stream (device time per kernel), for comparison.
    pub stream_per_kernel_median_us: f64,
}

/// First launch in a new process (median over repetitions, ms).
#[derive(Debug, Serialize)]
pub struct FirstLaunch {
    pub case: String,
    /// `bundle` (registered just before the launch, no disk cache) or `disk` (a warm disk cache).
    pub mode: String,
    pub repetitions: usize,
    /// Spawn → first launch finished, without the test data setup.
    pub total_ms: f64,
    /// Spawn → `main`.
    pub exec_ms: f64,
    /// CUDA driver init and context (`Device::new`, `Stream::new`).
    pub device_init_ms: f64,
    /// The launch itself: key, lookup (bundle or disk), module load, launch and sync.
    pub launch_ms: f64,
    /// Where the cubin came from in the last repetition.
    pub origin: String,
}

impl Report {
    /// Writes `dir/gpu-harness.json`.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, BoxError> {
        let path = dir.join("gpu-harness.json");
        std::fs::write(&path, serde_json::to_vec_pretty(self)?)?;
        Ok(path)
    }

    pub fn failed_checks(&self) -> usize {
        self.checks.iter().filter(|c| !c.pass).count()
    }

    /// The summary table.
    pub fn print(&self) {
        println!(
            "\n== {} ({}, {} SMs), bundle {} ({} entries)",
            self.device, self.arch, self.sm_count, self.bundle, self.bundle_entries
        );
        if !self.checks.is_empty() {
            println!(
                "\n{:<44} {:>10} {:>7} {:>10}  result",
                "check", "rel L2", "tol", "values"
            );
            for c in &self.checks {
                println!(
                    "{:<44} {:>10.2e} {:>7.0e} {:>10}  {}",
                    c.name,
                    c.rel_l2,
                    c.tolerance,
                    c.compared,
                    if c.pass { "ok" } else { "FAILED" }
                );
            }
        }
        if !self.benches.is_empty() {
            println!(
                "\n{:<44} {:>11} {:>11} {:>11}  throughput",
                "benchmark", "median µs", "min µs", "p90 µs"
            );
            for b in &self.benches {
                println!(
                    "{:<44} {:>11.2} {:>11.2} {:>11.2}  {:>8.1} {}{}",
                    b.name,
                    b.median_us,
                    b.min_us,
                    b.p90_us,
                    b.throughput,
                    b.unit,
                    if b.l2_flushed { " (L2 flushed)" } else { "" }
                );
            }
        }
        if let Some(h) = &self.host {
            println!(
                "\nhost time per warm launch of {} ({} launches): same args {:.2} µs (p90 {:.2}), \
                 alternating args {:.2} µs (p90 {:.2}); runtime enqueue alone {:.2} µs; a tiny \
                 softmax through the host API {:.2} µs (planning {:.2} µs), through `foreign` {:.2} µs, \
                 replayed {:.2} µs",
                h.kernel,
                h.launches,
                h.same_args_median_us,
                h.same_args_p90_us,
                h.alternating_args_median_us,
                h.alternating_args_p90_us,
                h.runtime_enqueue_median_us,
                h.host_api_softmax_median_us,
                h.softmax_plan_median_us,
                h.foreign_softmax_median_us,
                h.replayed_softmax_median_us
            );
        }
        if let Some(g) = &self.graph {
            println!(
                "per kernel inside a CUDA graph of {} {}: {:.2} µs (one by one on a stream: {:.2} µs)",
                g.kernels_per_graph,
                g.kernel,
                g.per_kernel_median_us,
                g.stream_per_kernel_median_us
            );
        }
        for f in &self.first_launch {
            println!(
                "first launch in a new process, {} via {}: {:.1} ms total (exec {:.1}, device init {:.1}, \
                 launch {:.2}) [{}; median of {}]",
                f.case,
                f.mode,
                f.total_ms,
                f.exec_ms,
                f.device_init_ms,
                f.launch_ms,
                f.origin,
                f.repetitions
            );
        }
        for e in &self.errors {
            println!("ERROR: {e}");
        }
        println!(
            "\n{} checks ({} failed), {} benchmarks, {} errors",
            self.checks.len(),
            self.failed_checks(),
            self.benches.len(),
            self.errors.len()
        );
    }
}
