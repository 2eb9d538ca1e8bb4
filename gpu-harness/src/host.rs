//! Host-side launch cost of a warm tiny kernel, and device time per kernel inside a CUDA graph.

use std::time::Instant;

use cutile::dsl::Kernel;
use cutile::launch::{LaunchArgs, Launcher};
use cutile::runtime::timing::Stats;
use cutile::runtime::{Device, Event, Stream, Tensor};
use cutile_examples::workload::tiny;
use cutile_kernels::op::Target;

use crate::BoxError;
use crate::report::{Graph, Host};

/// The tiny call's kernel, launched directly (below the host API, to measure the launcher alone): the
/// kernel `add f32 [1024]` plans to, so the bundle (planned from the same call) holds it.
fn tiny_kernel(device: &Device) -> Result<Kernel, BoxError> {
    let w = tiny();
    let planned = w.call.plan(&Target::of(device)?, false)?;
    let launch = planned
        .launches
        .first()
        .ok_or("the tiny call plans no launch")?;
    Ok(launch.kernel.clone())
}

/// The tiny call's tensors (`c = a + b`, 1024 f32 each).
#[derive(Debug)]
struct Instance {
    a: Tensor<f32>,
    b: Tensor<f32>,
    c: Tensor<f32>,
}

fn instantiate(device: &Device) -> Result<Instance, BoxError> {
    let n = [1024i64];
    Ok(Instance {
        a: Tensor::random(device, &n, 1)?,
        b: Tensor::random(device, &n, 2)?,
        c: Tensor::zeros(device, &n)?,
    })
}

fn args(i: &mut Instance) -> LaunchArgs<'_> {
    LaunchArgs::new().input(&i.a).input(&i.b).output(&mut i.c)
}

/// Launches queued between synchronisations: keeps the driver's queue from filling (a full queue
/// would make a launch call wait for the GPU).
const BATCH: usize = 128;

/// Host µs of `n` launch calls made by `launch(i)`, synchronising (untimed) every [`BATCH`] calls.
fn time_calls(
    stream: &Stream,
    n: usize,
    mut launch: impl FnMut(usize) -> Result<(), BoxError>,
) -> Result<Stats, BoxError> {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        if i % BATCH == 0 {
            stream.synchronize()?;
        }
        let t = Instant::now();
        launch(i)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    stream.synchronize()?;
    Ok(Stats::of(samples))
}

/// Median host time per warm launch call of the tiny kernel over `n` calls: with the same arguments,
/// with two argument sets alternating, and the runtime's enqueue of pre-packed arguments alone.
pub fn host_time(device: &Device, stream: &Stream, n: usize) -> Result<Host, BoxError> {
    let kernel = tiny_kernel(device)?;
    let mut insts: [Instance; 2] = [instantiate(device)?, instantiate(device)?];
    let launcher = Launcher::new(kernel.clone());
    // Cold launch first: everything after is warm.
    launcher.launch(stream, args(&mut insts[0]))?;

    let same = time_calls(stream, n, |_| {
        let a = args(&mut insts[0]);
        // SAFETY: the tensors outlive the calls and `time_calls` synchronises before returning.
        Ok(unsafe { launcher.enqueue(stream, &a) }?)
    })?;
    let alternating = time_calls(stream, n, |i| {
        let a = args(&mut insts[i % 2]);
        // SAFETY: as above.
        Ok(unsafe { launcher.enqueue(stream, &a) }?)
    })?;
    let a = args(&mut insts[0]);
    let prepared = launcher.prepare(device, &a)?;
    let packed = prepared.signature().pack(kernel.name(), &a)?;
    let grid = prepared
        .signature()
        .grid(kernel.name(), &a)?
        .ok_or("the tiny kernel has an empty grid")?;
    let rt = prepared.function();
    let runtime = time_calls(stream, n, |_| {
        // SAFETY: the arguments were packed for this kernel from live tensors that outlive the calls.
        Ok(unsafe { rt.enqueue(stream, grid, &packed) }?)
    })?;
    let sm = softmax_host_time(device, stream, n)?;
    Ok(Host {
        host_api_softmax_median_us: sm.host_api.median_us,
        softmax_plan_median_us: sm.plan_only.median_us,
        foreign_softmax_median_us: sm.foreign.median_us,
        replayed_softmax_median_us: sm.replayed.median_us,
        kernel: tiny().name,
        launches: n,
        same_args_median_us: same.median_us,
        same_args_p90_us: same.p90_us,
        alternating_args_median_us: alternating.median_us,
        alternating_args_p90_us: alternating.p90_us,
        runtime_enqueue_median_us: runtime.median_us,
    })
}

/// Host µs per call of a tiny softmax (`[4, 128]` f16) through the host API, through `foreign` with a
/// borrowed stream (what a Python or C call costs below its own binding layer), of its planning
/// alone (validation and the launch plan, no launch), and of a prepared `foreign::Replay` of it (the
/// Python package's path for repeated layouts).
fn softmax_host_time(device: &Device, stream: &Stream, n: usize) -> Result<SoftmaxHost, BoxError> {
    use cutile_kernels::foreign::{self, ForeignStream, RawTensor, Replay, ReplayOp};
    let shape = [4i64, 128];
    let x = Tensor::<half::f16>::random(device, &shape, 3)?;
    let mut y = Tensor::<half::f16>::zeros(device, &shape)?;
    // Cold call first (plans and loads the kernel).
    cutile_kernels::softmax::softmax(stream, &x, &mut y)?.wait()?;
    let host_api = time_calls(stream, n, |_| {
        let p = cutile_kernels::softmax::softmax(stream, &x, &mut y)?;
        // SAFETY: `x` and `y` outlive the calls and `time_calls` synchronises before returning.
        unsafe { p.detach() };
        Ok(())
    })?;
    let raw = |name, t: &Tensor<half::f16>| RawTensor {
        name,
        ptr: t.device_ptr(),
        shape: shape.to_vec(),
        strides: vec![shape[1], 1],
        dtype: cutile_ir::ScalarType::F16,
    };
    let target = cutile_kernels::op::Target::of(device)?;
    let operands = [
        cutile_kernels::op::Operand::of("x", &x),
        cutile_kernels::op::Operand::of("y", &y),
    ];
    let plan_only = time_calls(stream, n, |_| {
        std::hint::black_box(cutile_kernels::softmax::plan(&operands, &target, false)?);
        Ok(())
    })?;
    let (rx, ry) = (raw("x", &x), raw("y", &y));
    let foreign = time_calls(stream, n, |_| {
        // SAFETY: the raw stream is `stream`'s own, alive for the calls; the tensors outlive them and
        // `time_calls` synchronises before returning.
        let s = unsafe { ForeignStream::new(device.ordinal(), stream.raw_handle()) }?;
        Ok(unsafe { foreign::softmax(&s, &rx, &ry) }?)
    })?;
    // SAFETY: as above.
    let s = unsafe { ForeignStream::new(device.ordinal(), stream.raw_handle()) }?;
    let replay = Replay::prepare(&s, ReplayOp::Softmax, &[rx.clone(), ry.clone()])?
        .ok_or("a tiny softmax is replayable")?;
    let addresses = [rx.ptr, ry.ptr];
    let replayed = time_calls(stream, n, |_| {
        // SAFETY: as above.
        Ok(unsafe { replay.enqueue(stream.raw_handle(), &addresses) }?)
    })?;
    Ok(SoftmaxHost {
        host_api,
        foreign,
        plan_only,
        replayed,
    })
}

/// The host times [`softmax_host_time`] measures.
struct SoftmaxHost {
    host_api: Stats,
    foreign: Stats,
    plan_only: Stats,
    replayed: Stats,
}

/// Device time per kernel of `per_graph` tiny launches captured into one graph (median of `reps`
/// replays), and of the same launches queued one by one.
pub fn graph_time(
    device: &Device,
    stream: &Stream,
    per_graph: usize,
    reps: usize,
) -> Result<Graph, BoxError> {
    let mut inst = instantiate(device)?;
    let launcher = Launcher::new(tiny_kernel(device)?);
    let a = args(&mut inst);
    launcher.prepare(device, &a)?; // module loads must happen outside capture
    let (start, end) = (Event::new(device)?, Event::new(device)?);

    stream.begin_capture()?;
    let mut captured = Ok(());
    for _ in 0..per_graph {
        // SAFETY: the graph is replayed below while `inst` is alive, and waited for.
        captured = unsafe { launcher.enqueue(stream, &a) };
        if captured.is_err() {
            break;
        }
    }
    let graph = stream.end_capture()?;
    captured?;
    let mut in_graph = Vec::new();
    let mut one_by_one = Vec::new();
    for _ in 0..reps + 1 {
        start.record(stream)?;
        // SAFETY: the captured addresses belong to `inst`, alive until the end of this function.
        unsafe { graph.launch(stream) }?;
        end.record(stream)?;
        end.synchronize()?;
        in_graph.push(start.elapsed_ms(&end)? as f64 * 1e3 / per_graph as f64);

        start.record(stream)?;
        for _ in 0..per_graph {
            // SAFETY: as above.
            unsafe { launcher.enqueue(stream, &a) }?;
        }
        end.record(stream)?;
        end.synchronize()?;
        one_by_one.push(start.elapsed_ms(&end)? as f64 * 1e3 / per_graph as f64);
    }
    // The first replay uploads the graph; leave it out.
    in_graph.remove(0);
    one_by_one.remove(0);
    Ok(Graph {
        kernel: tiny().name,
        kernels_per_graph: per_graph,
        per_kernel_median_us: Stats::of(in_graph).median_us,
        stream_per_kernel_median_us: Stats::of(one_by_one).median_us,
    })
}
