//! Running a [`Workload`]: its tensors on a device, its launch arguments (from real tensors, or from
//! descriptions for planning without a GPU), a correctness check against the CPU reference, and a
//! CUDA-event benchmark.

use cutile::launch::{LaunchArgs, LaunchError, Launcher};
use cutile::runtime::{Device, Stream};
use cutile_ir::ScalarType;

use crate::BoxError;
use crate::data::{DevTensor, Dt, rel_l2, uniform};
use crate::workload::{GridRule, Init, Metric, Param, TensorSpec, Workload};
use cutile::runtime::timing::{L2Flush, Stats, time_device};

/// A workload's tensors on a device (parameter order, tensors only) and, when kept, the host copies of
/// every tensor with initial data (inputs, and outputs the kernel also reads such as saxpy's `y`) as
/// the device holds them: what the reference takes.
#[derive(Debug)]
pub struct Instance {
    pub tensors: Vec<DevTensor>,
    pub host_inputs: Vec<Vec<f32>>,
}

fn host_data(t: &TensorSpec) -> Vec<f32> {
    let n = t.shape.iter().product::<i64>().max(0) as usize;
    match t.init {
        Init::Uniform { low, high, seed } => t.dt.round(&uniform(n, low, high, seed)),
        Init::Zeros => vec![0.0; n],
    }
}

/// Allocates and fills the workload's tensors; `keep_host` keeps the input data for a reference.
pub fn instantiate(device: &Device, w: &Workload, keep_host: bool) -> Result<Instance, BoxError> {
    let mut tensors = Vec::new();
    let mut host_inputs = Vec::new();
    for p in &w.params {
        let t = match p {
            Param::In(t) | Param::Out(t) => t,
            Param::Scalar(_) => continue,
        };
        let dev = match t.init {
            Init::Zeros => DevTensor::zeros(device, t.dt, &t.shape)?,
            Init::Uniform { .. } => {
                let data = host_data(t);
                let d = DevTensor::upload(device, t.dt, &data, &t.shape)?;
                if keep_host {
                    host_inputs.push(data);
                }
                d
            }
        };
        tensors.push(dev);
    }
    Ok(Instance {
        tensors,
        host_inputs,
    })
}

fn grid_of(w: &Workload, sm_count: u32) -> Option<cutile::runtime::Grid> {
    match w.grid {
        GridRule::Derived => None,
        GridRule::Fixed(g) => Some(g),
        GridRule::PerSm => Some((sm_count.max(1), 1, 1)),
    }
}

/// The launch arguments of `w` over its device tensors.
pub fn args<'a>(w: &Workload, tensors: &'a mut [DevTensor], sm_count: u32) -> LaunchArgs<'a> {
    let mut a = LaunchArgs::new();
    let mut it = tensors.iter_mut();
    for p in &w.params {
        match p {
            Param::Scalar(v) => a = a.scalar(*v),
            Param::In(_) => {
                if let Some(t) = it.next() {
                    a = t.input(a);
                }
            }
            Param::Out(_) => {
                if let Some(t) = it.next() {
                    a = t.output(a);
                }
            }
        }
    }
    match grid_of(w, sm_count) {
        Some(g) => a.grid(g),
        None => a,
    }
}

/// Shapes and row-major strides of `w`'s tensors: storage for [`describe`].
pub fn layouts(w: &Workload) -> Vec<(Vec<i64>, Vec<i64>)> {
    w.params
        .iter()
        .filter_map(|p| match p {
            Param::In(t) | Param::Out(t) => {
                let strides =
                    cutile::dsl::TensorMeta::contiguous(ScalarType::F32, &t.shape).strides;
                Some((t.shape.clone(), strides))
            }
            Param::Scalar(_) => None,
        })
        .collect()
}

fn ir_type(dt: Dt) -> ScalarType {
    match dt {
        Dt::F32 => ScalarType::F32,
        Dt::BF16 => ScalarType::BF16,
        Dt::F16 => ScalarType::F16,
    }
}

/// The launch arguments of `w` as descriptions at 256-byte aligned made-up addresses (what fresh
/// allocations give): for planning and AOT compiles without a GPU. Never launch them.
pub fn describe<'a>(w: &Workload, layouts: &'a [(Vec<i64>, Vec<i64>)]) -> LaunchArgs<'a> {
    let mut a = LaunchArgs::new();
    let mut it = layouts.iter().enumerate();
    for p in &w.params {
        let (t, output) = match p {
            Param::Scalar(v) => {
                a = a.scalar(*v);
                continue;
            }
            Param::In(t) => (t, false),
            Param::Out(t) => (t, true),
        };
        if let Some((i, (shape, strides))) = it.next() {
            let ptr = 0x7000_0000_0000u64 + ((i as u64) << 36);
            // SAFETY: descriptions only feed specialization and key computation; callers never launch
            // them (documented above).
            a = unsafe { a.raw_tensor(output, ir_type(t.dt), shape, strides, ptr, 0) };
        }
    }
    match grid_of(w, 132) {
        Some(g) => a.grid(g),
        None => a,
    }
}

/// Outcome of a correctness check.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub name: String,
    pub rel_err: f64,
    pub tolerance: f64,
    pub pass: bool,
    /// Compared elements (all, or the sampled rows).
    pub compared: usize,
}

impl CheckResult {
    pub fn line(&self) -> String {
        format!(
            "{:<40} rel L2 {:.2e} (tol {:.0e}, {} values) {}",
            self.name,
            self.rel_err,
            self.tolerance,
            self.compared,
            if self.pass { "ok" } else { "FAILED" }
        )
    }
}

/// Launches `w` once and compares its output with the CPU reference.
pub fn check(device: &Device, stream: &Stream, w: &Workload) -> Result<CheckResult, BoxError> {
    let mut inst = instantiate(device, w, true)?;
    let launcher = Launcher::new(w.kernel.clone());
    launcher.launch(stream, args(w, &mut inst.tensors, device.sm_count()))?;
    let out_index = w
        .params
        .iter()
        .filter(|p| !matches!(p, Param::Scalar(_)))
        .position(|p| matches!(p, Param::Out(_)))
        .ok_or("workload without an output")?;
    let mut got = inst.tensors[out_index].to_f32()?;
    let scalars: Vec<f32> = w
        .params
        .iter()
        .filter_map(|p| match p {
            Param::Scalar(v) => Some(*v),
            _ => None,
        })
        .collect();
    let reference = w.reference.as_ref().ok_or("workload without a reference")?;
    let want = reference(&inst.host_inputs, &scalars);
    if let Some(rows) = &want.rows {
        let width = w
            .params
            .iter()
            .find_map(|p| match p {
                Param::Out(t) => t.shape.last().copied(),
                _ => None,
            })
            .unwrap_or(1) as usize;
        got = rows
            .iter()
            .flat_map(|&r| got[r * width..(r + 1) * width].iter().copied())
            .collect();
    }
    let rel_err = rel_l2(&got, &want.values);
    let tolerance = w.tolerance();
    Ok(CheckResult {
        name: w.name.clone(),
        rel_err,
        tolerance,
        pass: rel_err <= tolerance,
        compared: got.len(),
    })
}

/// Outcome of a benchmark.
#[derive(Debug, Clone)]
pub struct BenchResult {
    pub name: String,
    pub stats: Stats,
    /// GB/s or TFLOP/s at the median.
    pub throughput: f64,
    pub unit: &'static str,
    pub l2_flushed: bool,
}

impl BenchResult {
    pub fn line(&self) -> String {
        format!(
            "{:<40} {:>10.2} µs median ({:.2}–{:.2}, n={}) {:>9.1} {}{}",
            self.name,
            self.stats.median_us,
            self.stats.min_us,
            self.stats.p90_us,
            self.stats.samples,
            self.throughput,
            self.unit,
            if self.l2_flushed { " (L2 flushed)" } else { "" }
        )
    }
}

/// Times `iters` launches of `w` (after 5 warm-up launches), flushing L2 first when `w` is memory-bound
/// and a flush buffer is given.
pub fn bench(
    device: &Device,
    stream: &Stream,
    w: &Workload,
    iters: usize,
    flush: Option<&mut L2Flush>,
) -> Result<BenchResult, BoxError> {
    let mut inst = instantiate(device, w, false)?;
    let launcher = Launcher::new(w.kernel.clone());
    let a = args(w, &mut inst.tensors, device.sm_count());
    launcher.prepare(device, &a)?;
    let flush = if w.flush_l2 { flush } else { None };
    let flushed = flush.is_some();
    let stats = time_device(stream, 5, iters, flush, || {
        // SAFETY: the tensors live in `inst` until after `time_device` returns, and it waits for every
        // launch (end event) before the next one is queued.
        unsafe { launcher.enqueue(stream, &a) }.map_err(|e: LaunchError| -> BoxError { e.into() })
    })?;
    stream.synchronize()?;
    let secs = stats.median_us * 1e-6;
    let (throughput, unit) = match w.metric {
        Metric::Bytes(b) => (b / secs / 1e9, "GB/s"),
        Metric::Flops(f) => (f / secs / 1e12, "TFLOP/s"),
    };
    Ok(BenchResult {
        name: w.name.clone(),
        stats,
        throughput,
        unit,
        l2_flushed: flushed,
    })
}
