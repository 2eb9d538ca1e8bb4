//! `bench`: criterion benchmarks of every representative call, timed on the device.
//!
//! [`CudaTime`] is a `criterion::measurement::Measurement` whose values are device nanoseconds: each
//! benchmark runs through `iter_custom`, which per iteration queues an L2 flush on the timed stream
//! ahead of the first event (outside the measured span; it also hides the host's launch overhead), records a CUDA event, makes the host call, records a second event, waits, and adds
//! the elapsed device time. Criterion drives warm-up and sampling; the per-sample means of the measured
//! samples give the row's median/min/p90 (µs). Results go to `bench.json` (schema `cutile-bench`, see
//! [`crate::schema`]) with the clocks, power limit and driver from `nvidia-smi`, and the call list to
//! `bench-calls.json` for `ci/gpu/peers.py`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use criterion::Criterion;
use criterion::measurement::{Measurement, ValueFormatter};
use cutile::bundle::{self, Bundle};
use cutile::runtime::timing::{FLUSH_BYTES, L2Flush, Stats};
use cutile::runtime::{Device, Event, Stream};
use cutile_examples::run::{After, Owned, call, instantiate};
use cutile_examples::workload::{Metric, Workload, benches, of_ops};

use crate::BoxError;
use crate::schema::{BenchFile, Env, OURS, Row};

/// Device time in nanoseconds, measured by `iter_custom` with CUDA events.
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaTime;

/// Formats nanoseconds as criterion's wall-time formatter would.
#[derive(Debug)]
struct NsFormatter;

impl ValueFormatter for NsFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (d, unit) = if typical < 1e3 {
            (1.0, "ns")
        } else if typical < 1e6 {
            (1e3, "µs")
        } else if typical < 1e9 {
            (1e6, "ms")
        } else {
            (1e9, "s")
        };
        values.iter_mut().for_each(|v| *v /= d);
        unit
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &criterion::Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per = match throughput {
            criterion::Throughput::Bytes(b) | criterion::Throughput::BytesDecimal(b) => *b as f64,
            _ => 1.0,
        };
        values.iter_mut().for_each(|v| *v = per / *v);
        "GB/s"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for CudaTime {
    type Intermediate = ();
    type Value = f64;
    fn start(&self) {}
    /// Not used: every benchmark measures through `iter_custom`.
    fn end(&self, _: ()) -> f64 {
        0.0
    }
    fn add(&self, a: &f64, b: &f64) -> f64 {
        a + b
    }
    fn zero(&self) -> f64 {
        0.0
    }
    fn to_f64(&self, v: &f64) -> f64 {
        *v
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &NsFormatter
    }
}

/// Options of `bench`.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    pub bundle: Option<PathBuf>,
    pub out: PathBuf,
    pub ops: Vec<String>,
    pub sample_size: usize,
    pub measurement_ms: u64,
    pub warm_up_ms: u64,
}

/// Reads clocks, power limit, driver and temperature of the visible device 0 with `nvidia-smi`.
pub fn query_env(device: &Device) -> Env {
    let mut env = Env {
        device: device.name().to_string(),
        arch: device.arch(),
        visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
        ..Env::default()
    };
    let index = env
        .visible_devices
        .as_deref()
        .and_then(|v| v.split(',').next())
        .unwrap_or("0")
        .to_string();
    let q = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu";
    let out = std::process::Command::new("nvidia-smi")
        .args([
            &format!("--query-gpu={q}"),
            "--format=csv,noheader,nounits",
            "-i",
            &index,
        ])
        .output();
    if let Ok(o) = out
        && o.status.success()
    {
        let text = String::from_utf8_lossy(&o.stdout);
        let f: Vec<&str> = text
            .lines()
            .next()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok());
        env.driver = f.first().map(|s| s.to_string()).filter(|s| !s.is_empty());
        env.sm_clock_mhz = num(1);
        env.max_sm_clock_mhz = num(2);
        env.mem_clock_mhz = num(3);
        env.power_limit_w = num(4);
        env.temperature_c = num(5);
    }
    env.notes.insert(
        "timing".into(),
        "criterion (iter_custom) with CUDA events around each host call; an L2 flush queued on the stream before each call, outside the events".into(),
    );
    env
}

/// A row of `w` from the per-iteration device times of its measured samples (µs).
pub fn row_of(w: &Workload, sample_means_us: Vec<f64>, l2_flushed: bool) -> Result<Row, BoxError> {
    let stats = Stats::of(sample_means_us);
    let secs = stats.median_us * 1e-6;
    let (bytes, flops, throughput, unit) = match w.metric()? {
        Metric::Bytes(b) => (Some(b), None, b / secs / 1e9, "GB/s"),
        Metric::Flops(f) => (None, Some(f), f / secs / 1e12, "TFLOP/s"),
    };
    Ok(Row {
        name: w.name.clone(),
        op: w.call.op.clone(),
        dtype: w.call.dtype.clone(),
        shapes: w.call.shapes.clone(),
        causal: w.call.causal,
        layout: format!("{:?}", w.layout),
        implementation: OURS.into(),
        cfg: None,
        median_us: stats.median_us,
        min_us: stats.min_us,
        p90_us: stats.p90_us,
        samples: stats.samples,
        bytes,
        flops,
        throughput,
        unit: unit.into(),
        l2_flushed,
        rel_err: None,
        error: None,
    })
}

fn error_row(w: &Workload, e: &str) -> Row {
    Row {
        name: w.name.clone(),
        op: w.call.op.clone(),
        dtype: w.call.dtype.clone(),
        shapes: w.call.shapes.clone(),
        causal: w.call.causal,
        layout: format!("{:?}", w.layout),
        implementation: OURS.into(),
        cfg: None,
        median_us: 0.0,
        min_us: 0.0,
        p90_us: 0.0,
        samples: 0,
        bytes: None,
        flops: None,
        throughput: 0.0,
        unit: String::new(),
        l2_flushed: false,
        rel_err: None,
        error: Some(e.to_string()),
    }
}

/// Timed calls of an attention decode row (at most a 2 GiB cache read: about 0.5 ms).
const DECODE_CALLS: usize = 200;

/// Timed calls of a `fused_qkv` row (16384 tokens: about 1.5 ms each).
const FUSED_QKV_CALLS: usize = 100;

/// Timed calls of an attention backward row (B4 H32 S4096 D128: tens of ms each).
const ATTENTION_BACKWARD_CALLS: usize = 30;

/// Times one workload through criterion; returns its row.
fn bench_one(
    c: &mut Criterion<CudaTime>,
    device: &Device,
    stream: &Stream,
    w: &Workload,
    flush: &mut L2Flush,
    sample_size: usize,
) -> Result<Row, BoxError> {
    if let Some(owned) = Owned::of(w) {
        // These families own their tensors (index, RoPE, cache, f32 side tensors:
        // `cutile_examples::run::Owned`), so their modules time them, by the same method: an L2
        // flush queued before every call (none for the compute-bound attention variants and backward
        // and fp8 GEMMs), CUDA
        // events around it, the median of the calls.
        let inputs = w.inputs()?;
        let calls = match owned {
            Owned::FusedQkv | Owned::AttentionVariant | Owned::Fp8 | Owned::MlaPrefill => {
                FUSED_QKV_CALLS
            }
            Owned::Decode | Owned::Transformer | Owned::MlaDecode => DECODE_CALLS,
            Owned::AttentionBackward => ATTENTION_BACKWARD_CALLS,
        };
        let (_, stats) = owned.run(device, stream, w, &inputs, Some((calls, Some(flush))))?;
        let stats = stats.ok_or_else(|| format!("{}: no timing", w.name))?;
        let flushed = owned.flushed() && flush.flushes();
        let mut row = row_of(w, vec![stats.median_us], flushed)?;
        (row.min_us, row.p90_us, row.samples) = (stats.min_us, stats.p90_us, stats.samples);
        return Ok(row);
    }
    let mut inst = instantiate(device, w, false)?;
    // Loads modules (and tunes, when on) outside the measurement.
    call(stream, w, &mut inst, After::Wait)?;
    let flushed = w.memory_bound() && flush.flushes();
    let (start, end) = (Event::new(device)?, Event::new(device)?);
    // (iterations, total ns) of every iter_custom call, warm-up included; the last `sample_size` are
    // criterion's samples.
    let records: Rc<RefCell<Vec<(u64, f64)>>> = Rc::default();
    let failure: Rc<RefCell<Option<String>>> = Rc::default();
    {
        let (records, failure) = (records.clone(), failure.clone());
        let mut once = |iters: u64| -> Result<f64, BoxError> {
            let mut total_ns = 0.0;
            for _ in 0..iters {
                // Every call gets an L2 flush queued on the timed stream ahead of its start event, as
                // the peers' `do_bench` does: the GPU is busy with it while the host prepares the call,
                // so host launch overhead stays outside the events. Compute-bound ops get it too (cold
                // L2 for them as for cuBLAS/cuDNN); only memory-bound rows are labelled "L2 flushed".
                flush.enqueue(stream)?;
                start.record(stream)?;
                // Detach: the end event is recorded and waited for before `inst` can be touched again.
                call(stream, w, &mut inst, After::Detach)?;
                end.record(stream)?;
                end.synchronize()?;
                total_ns += start.elapsed_ms(&end)? as f64 * 1e6;
            }
            Ok(total_ns)
        };
        c.bench_function(&w.name, |b| {
            b.iter_custom(|iters| {
                if failure.borrow().is_some() {
                    return iters as f64;
                }
                match once(iters) {
                    Ok(ns) => {
                        records.borrow_mut().push((iters, ns));
                        ns
                    }
                    Err(e) => {
                        *failure.borrow_mut() = Some(e.to_string());
                        iters as f64
                    }
                }
            })
        });
    }
    stream.synchronize()?;
    if let Some(e) = failure.borrow_mut().take() {
        return Err(e.into());
    }
    let recs = records.borrow();
    let measured = &recs[recs.len().saturating_sub(sample_size)..];
    let means: Vec<f64> = measured
        .iter()
        .map(|&(n, ns)| ns / n.max(1) as f64 / 1e3)
        .collect();
    row_of(w, means, flushed)
}

/// The benchmark calls of `ops` (all when empty), split into those the harness can make and those
/// whose op it cannot yet (`check::COVERED`).
pub fn workloads(ops: &[String]) -> (Vec<Workload>, Vec<Workload>) {
    let mut ws = benches();
    if !ops.is_empty() {
        let names: Vec<&str> = ops.iter().map(String::as_str).collect();
        ws = of_ops(ws, &names);
    }
    ws.into_iter()
        .partition(|w| crate::check::COVERED.contains(&w.op()))
}

pub fn run(a: &BenchArgs) -> Result<ExitCode, BoxError> {
    let Some((device, stream)) = cutile_examples::gpu_or_skip("gpu-harness bench")? else {
        return Ok(ExitCode::from(3));
    };
    if let Some(b) = &a.bundle {
        bundle::register(Bundle::open(b)?);
    }
    std::fs::create_dir_all(&a.out)?;
    let (ws, skip) = workloads(&a.ops);
    for w in &skip {
        println!("NOT COVERED (no workload inputs/host call yet): {}", w.name);
    }
    let calls = crate::run::write_bench_calls(&a.out, &ws)?;
    println!("benchmark calls for peers.py: {}", calls.display());
    let mut file = BenchFile::new("gpu-harness bench", query_env(&device));
    let mut c = Criterion::default()
        .with_measurement(CudaTime)
        .sample_size(a.sample_size.max(10))
        .warm_up_time(Duration::from_millis(a.warm_up_ms))
        .measurement_time(Duration::from_millis(a.measurement_ms))
        .nresamples(1000)
        .without_plots()
        .output_directory(&a.out.join("criterion"));
    let mut flush = L2Flush::new(&device, FLUSH_BYTES)?;
    // Which flush the memory-bound rows follow (`CUTILE_L2_FLUSH`, `cutile::runtime::timing`); peers.py
    // reads the same variable.
    file.env
        .notes
        .insert("l2_flush".into(), flush.mode().name().into());
    println!(
        "L2 flush before memory-bound calls: {}",
        flush.mode().name()
    );
    // The memory roofline of this run, measured on this device (an H100's HBM3 is not an H200's).
    // A probe that cannot run (1 GiB not free on a shared card) costs the run its measured roofline,
    // not its timings: the report then says the H200's figure stands in.
    match cutile::runtime::timing::copy_gbps(
        &stream,
        Some(&mut flush),
        cutile::runtime::timing::COPY_PROBE_BYTES,
        20,
    ) {
        Ok(copy) => {
            println!("device copy bandwidth: {copy:.0} GB/s (read + written, median of 20)");
            file.env.copy_gbps = Some(copy);
        }
        Err(e) => println!(
            "device copy bandwidth: not measured ({e}); the report falls back to the H200's figure"
        ),
    }
    let bar = crate::progress::bar(ws.len() as u64, "bench");
    let mut errors = 0;
    for w in &ws {
        let row = crate::guarded(|| {
            bench_one(
                &mut c,
                &device,
                &stream,
                w,
                &mut flush,
                a.sample_size.max(10),
            )
        });
        let row = match row {
            Ok(r) => {
                crate::progress::say(
                    &bar,
                    format!(
                        "{:<56} {:>10.2} µs median ({:.2}–{:.2}) {:>9.1} {}",
                        r.name, r.median_us, r.min_us, r.p90_us, r.throughput, r.unit
                    ),
                );
                r
            }
            Err(e) => {
                errors += 1;
                crate::progress::say(&bar, format!("{}: ERROR {e}", w.name));
                error_row(w, &e.to_string())
            }
        };
        file.rows.push(row);
        file.write(&a.out.join("bench.json"))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let path = a.out.join("bench.json");
    file.write(&path)?;
    println!(
        "\nbench: {} calls, {} errors; results {}",
        ws.len(),
        errors,
        path.display()
    );
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Reads `dir/bench.json`.
pub fn read_ours(dir: &Path) -> Result<BenchFile, BoxError> {
    BenchFile::read(&dir.join("bench.json"))
}
