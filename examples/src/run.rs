//! Running a [`Workload`] through its family's host API: its tensors on a device, one call of the op
//! (`cutile_kernels::softmax::softmax(&stream, &x, &mut y)` and so on, with views where the workload's
//! layout asks), a correctness check against the CPU reference, and a CUDA-event benchmark of the call.

use cutile::launch::Pending;
use cutile::runtime::timing::{L2Flush, Stats, time_device};
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_kernels::{activation, attention, gemm, norm, softmax, vector_add};

use crate::BoxError;
use crate::data::{DevTensors, rel_l2_floored};
use crate::workload::{ALPHA, EPS, HostTensor, Layout, Metric, OutputSpec, Workload};

/// A workload's tensors on a device (inputs in storage layout, the outputs of the element type last),
/// its f32 outputs (`layer_norm_stats`'s `mean` and `rstd`; [`Workload::f32_storage`]) and, when kept,
/// the logical host inputs (what the reference takes).
#[derive(Debug)]
pub struct Instance {
    pub tensors: DevTensors,
    pub f32_outputs: Vec<Tensor<f32>>,
    pub host_inputs: Vec<HostTensor>,
}

/// Allocates and fills the workload's tensors; `keep_host` keeps the input data for a reference.
pub fn instantiate(device: &Device, w: &Workload, keep_host: bool) -> Result<Instance, BoxError> {
    instantiate_with(device, w, w.inputs()?, keep_host)
}

/// [`instantiate`] with given logical inputs (as [`Workload::inputs`] returns them) instead of the
/// workload's own seeded data.
pub fn instantiate_with(
    device: &Device,
    w: &Workload,
    inputs: Vec<HostTensor>,
    keep_host: bool,
) -> Result<Instance, BoxError> {
    let stored = w.storage(&inputs)?;
    let tensors = DevTensors::upload(device, w.dt()?, &stored)?;
    let f32_outputs = w
        .f32_storage()?
        .iter()
        .map(|(d, s)| Tensor::from_host(device, d, s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Instance {
        tensors,
        f32_outputs,
        host_inputs: if keep_host { inputs } else { Vec::new() },
    })
}

/// What to do with the op's [`Pending`] guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Wait for the work (and report its errors).
    Wait,
    /// Leave the work queued: only for callers that synchronize the stream themselves while the
    /// tensors are alive (timing with events).
    Detach,
}

fn finish(p: Pending<'_>, after: After) -> Result<(), BoxError> {
    match after {
        After::Wait => p.wait()?,
        // The guard only waits in `drop`; forgetting it leaves the queued work to the caller, who
        // keeps the tensors alive and synchronizes (see `After::Detach`).
        After::Detach => std::mem::forget(p),
    }
    Ok(())
}

fn call_typed<T: DeviceElement>(
    stream: &Stream,
    w: &Workload,
    ts: &mut [Tensor<T>],
    f32_outs: &mut [Tensor<f32>],
    after: After,
) -> Result<(), BoxError> {
    // Outputs of the element type at the end (`axpy`: its `y`, the last input, updated in place).
    let n_out = if w.output_in_place() {
        1
    } else {
        w.outputs()?.iter().filter(|o| !o.f32).count()
    };
    if ts.len() <= n_out {
        return Err(format!("{}: {} tensors for {n_out} outputs", w.name, ts.len()).into());
    }
    let split = ts.len() - n_out;
    let (ins, outs) = ts.split_at_mut(split);
    let need = |n: usize| -> Result<(), BoxError> {
        if ins.len() < n {
            return Err(format!("{}: {} inputs, the op takes {n}", w.name, ins.len()).into());
        }
        Ok(())
    };
    need(1)?;
    // The first input as the op sees it: the whole tensor, or the strided slice of its padded storage.
    let x0 = match w.layout {
        Layout::Strided { offset, .. } => {
            let s = ins[0].shape().to_vec();
            let (axis, stored) = (s.len().saturating_sub(1), s.last().copied().unwrap_or(1));
            let cols = w
                .call
                .shapes
                .first()
                .and_then(|x| x.last().copied())
                .unwrap_or(stored);
            ins[0].slice(axis, offset..offset + cols)?
        }
        Layout::HeadSlice { before, .. } => {
            let heads = w
                .call
                .shapes
                .first()
                .and_then(|x| x.len().checked_sub(2).map(|a| (a, x[a])))
                .ok_or_else(|| format!("{}: a head slice needs [.., T, H, D]", w.name))?;
            ins[0].slice(heads.0, before..before + heads.1)?
        }
        _ => ins[0].view(),
    };
    let x0 = &x0;
    if let Some(spec) = activation::find(w.op()) {
        return finish(
            activation::call_op(stream, spec, x0, &ins[1..], outs)?,
            after,
        );
    }
    if let Some(e) = gemm::epilogue::find(w.op()) {
        need(2 + e.spec.bias as usize + e.spec.residual as usize)?;
        let b = match w.layout {
            Layout::TransposedB => ins[1].transpose(0, 1)?,
            _ => ins[1].view(),
        };
        let bias = e
            .spec
            .bias
            .then(|| &ins[2] as &dyn cutile::launch::TensorArg);
        let r_at = 2 + e.spec.bias as usize;
        let residual = e
            .spec
            .residual
            .then(|| &ins[r_at] as &dyn cutile::launch::TensorArg);
        let epi = gemm::GemmEpilogue {
            bias,
            activation: e.spec.activation,
            residual,
        };
        // f32 products run as tf32, as `gemm`'s; the f32-output ops write the f32 output.
        let c: &mut Tensor<_> = if e.out_f32 {
            let [c] = f32_outs else {
                return Err(format!("{}: one f32 output expected", w.name).into());
            };
            return finish(gemm::gemm_epilogue(stream, x0, &b, &epi, &TF32, c)?, after);
        } else {
            outs.first_mut()
                .ok_or_else(|| format!("{}: no output", w.name))?
        };
        return finish(gemm::gemm_epilogue(stream, x0, &b, &epi, &TF32, c)?, after);
    }
    let o = &mut outs[0];
    match (w.op(), w.layout) {
        (vector_add::ADD, _) => {
            need(2)?;
            finish(vector_add::add(stream, x0, &ins[1], o)?, after)
        }
        // `o` is `y`, updated in place.
        (vector_add::AXPY, _) => {
            need(1)?;
            finish(vector_add::axpy(stream, ALPHA, x0, o)?, after)
        }
        (softmax::OP, _) => {
            need(1)?;
            finish(softmax::softmax(stream, x0, o)?, after)
        }
        (norm::RMS_NORM, _) => {
            need(2)?;
            finish(norm::rms_norm(stream, x0, &ins[1], EPS, o)?, after)
        }
        (norm::LAYER_NORM, _) => {
            need(3)?;
            finish(
                norm::layer_norm(stream, x0, &ins[1], &ins[2], EPS, o)?,
                after,
            )
        }
        (norm::RMS_NORM_HEADS, _) => {
            need(2)?;
            finish(norm::rms_norm_heads(stream, x0, &ins[1], EPS, o)?, after)
        }
        (norm::ADD_RMS_NORM, _) => {
            need(3)?;
            let [h, y] = outs else {
                return Err(format!("{}: add_rms_norm writes h and y", w.name).into());
            };
            finish(
                norm::add_rms_norm(stream, x0, &ins[1], &ins[2], EPS, h, y)?,
                after,
            )
        }
        (norm::LAYER_NORM_STATS, _) => {
            need(3)?;
            let [mean, rstd] = f32_outs else {
                return Err(format!("{}: layer_norm_stats writes mean and rstd", w.name).into());
            };
            finish(
                norm::layer_norm_stats(stream, x0, &ins[1], &ins[2], EPS, o, mean, rstd)?,
                after,
            )
        }
        // f32 products run as tf32 (the harness opts in; `Workload::tolerance` is f16's for them).
        (gemm::OP, Layout::TransposedB) => {
            need(2)?;
            let b = ins[1].transpose(0, 1)?;
            finish(gemm::gemm_with(stream, x0, &b, &TF32, o)?, after)
        }
        (gemm::OP, _) => {
            need(2)?;
            finish(gemm::gemm_with(stream, x0, &ins[1], &TF32, o)?, after)
        }
        (gemm::BMM, _) => {
            need(2)?;
            finish(gemm::bmm(stream, x0, &ins[1], &TF32, o)?, after)
        }
        // The group end rows and whether `b` is stored `[G, n, k]` come from the call spec.
        (gemm::grouped::OP, _) => {
            need(2)?;
            let (_, offsets) = gemm::grouped::described_call(w.dt()?.scalar(), &w.call.shapes)?;
            let b = if gemm::grouped::spec_transposed(&w.call.shapes) {
                ins[1].transpose(1, 2)?
            } else {
                ins[1].view()
            };
            finish(
                gemm::grouped_gemm(stream, x0, &b, &offsets, &TF32, o)?,
                after,
            )
        }
        (attention::OP, layout) => {
            need(3)?;
            let options = attention::AttentionOptions {
                causal: w.call.causal,
                scale: None,
                ..Default::default()
            };
            if layout == Layout::Bshd {
                let (q, k, v) = (
                    ins[0].transpose(1, 2)?,
                    ins[1].transpose(1, 2)?,
                    ins[2].transpose(1, 2)?,
                );
                let mut ov = o.transpose_mut(1, 2)?;
                finish(
                    attention::attention(stream, &q, &k, &v, &options, &mut ov)?,
                    after,
                )
            } else {
                finish(
                    attention::attention(stream, &ins[0], &ins[1], &ins[2], &options, o)?,
                    after,
                )
            }
        }
        (other, _) => Err(format!("{}: unknown op {other}", w.name).into()),
    }
}

/// The harness's GEMM options: f32 calls take the tf32 product.
const TF32: gemm::GemmOptions = gemm::GemmOptions { allow_tf32: true };

/// One call of the workload's host op on `inst`'s tensors.
pub fn call(
    stream: &Stream,
    w: &Workload,
    inst: &mut Instance,
    after: After,
) -> Result<(), BoxError> {
    let f = &mut inst.f32_outputs;
    match &mut inst.tensors {
        DevTensors::F32(t) => call_typed(stream, w, t, f, after),
        DevTensors::BF16(t) => call_typed(stream, w, t, f, after),
        DevTensors::F16(t) => call_typed(stream, w, t, f, after),
    }
}

/// Outcome of a correctness check: over all outputs (`pass` when every output passes; `rel_err` and
/// `tolerance` of the output closest to or furthest over its tolerance; `compared` summed) and per output.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub name: String,
    pub rel_err: f64,
    pub tolerance: f64,
    pub pass: bool,
    /// Compared elements (all, or the sampled rows).
    pub compared: usize,
    /// Outputs that should have been NaN/±inf (as the reference) and were not, or the reverse.
    pub mismatched_special: usize,
    pub first_mismatch: Option<(usize, f32, f32)>,
    /// Each output's comparison, in [`Workload::outputs`] order.
    pub outputs: Vec<OutputCheck>,
}

/// The comparison of one output with its reference, under its own tolerance.
#[derive(Debug, Clone)]
pub struct OutputCheck {
    pub output: String,
    pub rel_err: f64,
    pub tolerance: f64,
    pub pass: bool,
    pub compared: usize,
    pub mismatched_special: usize,
    pub first_mismatch: Option<(usize, f32, f32)>,
}

impl OutputCheck {
    fn text(&self) -> String {
        format!(
            "rel L2 {:.2e} (tol {:.0e}, {} values{})",
            self.rel_err,
            self.tolerance,
            self.compared,
            match self.first_mismatch {
                Some((i, g, w)) => format!(
                    ", {} NaN/inf mismatches, first at {i}: got {g}, want {w}",
                    self.mismatched_special
                ),
                None => String::new(),
            },
        )
    }
}

impl CheckResult {
    /// The overall result of `outputs` (at least one).
    pub fn of(name: &str, outputs: Vec<OutputCheck>) -> CheckResult {
        let ratio = |o: &OutputCheck| {
            if o.tolerance > 0.0 {
                o.rel_err / o.tolerance
            } else {
                o.rel_err
            }
        };
        let worst = outputs
            .iter()
            .max_by(|a, b| ratio(a).total_cmp(&ratio(b)).then(b.pass.cmp(&a.pass)));
        CheckResult {
            name: name.to_string(),
            rel_err: worst.map_or(f64::INFINITY, |o| o.rel_err),
            tolerance: worst.map_or(0.0, |o| o.tolerance),
            pass: !outputs.is_empty() && outputs.iter().all(|o| o.pass),
            compared: outputs.iter().map(|o| o.compared).sum(),
            mismatched_special: outputs.iter().map(|o| o.mismatched_special).sum(),
            first_mismatch: outputs.iter().find_map(|o| o.first_mismatch),
            outputs,
        }
    }

    pub fn line(&self) -> String {
        let status = if self.pass { "ok" } else { "FAILED" };
        match self.outputs.as_slice() {
            [one] => format!("{:<56} {} {status}", self.name, one.text()),
            many => {
                let parts: Vec<String> = many
                    .iter()
                    .map(|o| {
                        format!(
                            "{}: {}{}",
                            o.output,
                            o.text(),
                            if o.pass { "" } else { " FAILED" }
                        )
                    })
                    .collect();
                format!("{:<56} {} {status}", self.name, parts.join("; "))
            }
        }
    }
}

/// Calls the host op once and compares its output with the CPU reference.
pub fn check(device: &Device, stream: &Stream, w: &Workload) -> Result<CheckResult, BoxError> {
    check_with(device, stream, w, w.inputs()?)
}

/// [`check`] on given logical inputs. The comparison is NaN-aware ([`compare`]): where the reference
/// is NaN (torch semantics, e.g. a softmax row of only −inf) the output must be NaN too, where it is
/// ±inf the output must equal it, and the relative L2 error is taken over the finite rest.
pub fn check_with(
    device: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: Vec<HostTensor>,
) -> Result<CheckResult, BoxError> {
    if let Some(owned) = Owned::of(w) {
        // Every output whole, caches included (entries no token addresses must keep their old
        // values, which the reference keeps).
        let want = w.reference(&inputs)?;
        let (mut got, _) = owned.run(device, stream, w, &inputs, None)?;
        // A large product's reference covers some rows of the first output only.
        if let (Some(rows), Some(first), Some(spec)) =
            (&want.rows, got.first_mut(), w.outputs()?.first())
        {
            let width = spec.shape.last().copied().unwrap_or(1) as usize;
            *first = rows
                .iter()
                .flat_map(|&r| first[r * width..(r + 1) * width].iter().copied())
                .collect();
        }
        let wanted = std::iter::once(&want.values).chain(&want.others);
        let mut checks = Vec::new();
        for ((spec, got), wanted) in w.outputs()?.iter().enumerate().zip(&got).zip(wanted) {
            checks.push(output_check(w, spec, got, wanted, &inputs)?);
        }
        return Ok(CheckResult::of(&w.name, checks));
    }
    let mut inst = instantiate_with(device, w, inputs, true)?;
    call(stream, w, &mut inst, After::Wait)?;
    let want = w.reference(&inst.host_inputs)?;
    let specs = w.outputs()?;
    let typed = if w.output_in_place() {
        1
    } else {
        specs.iter().filter(|o| !o.f32).count()
    };
    let first_typed = inst.tensors.len().saturating_sub(typed);
    let (mut next_typed, mut next_f32) = (first_typed, 0);
    let mut checks = Vec::new();
    for (k, spec) in specs.iter().enumerate() {
        let stored = if spec.f32 {
            next_f32 += 1;
            inst.f32_outputs
                .get(next_f32 - 1)
                .ok_or_else(|| format!("{}: no f32 output {}", w.name, spec.name))?
                .to_host()?
        } else {
            next_typed += 1;
            inst.tensors.to_f32(next_typed - 1)?
        };
        let mut got = w.output_logical(stored)?;
        let wanted = if k == 0 {
            &want.values
        } else {
            want.others
                .get(k - 1)
                .ok_or_else(|| format!("{}: no reference for {}", w.name, spec.name))?
        };
        if k == 0
            && let Some(rows) = &want.rows
        {
            let width = spec.shape.last().copied().unwrap_or(1) as usize;
            got = rows
                .iter()
                .flat_map(|&r| got[r * width..(r + 1) * width].iter().copied())
                .collect();
        }
        checks.push(output_check(w, (k, spec), &got, wanted, &inst.host_inputs)?);
    }
    Ok(CheckResult::of(&w.name, checks))
}

/// Output `index` (`spec`) of `w` (`got`) against its reference, under the output's tolerance, flush
/// floor and error floor (from the logical `inputs`).
fn output_check(
    w: &Workload,
    (index, spec): (usize, &OutputSpec),
    got: &[f32],
    wanted: &[f32],
    inputs: &[HostTensor],
) -> Result<OutputCheck, BoxError> {
    let c = compare(
        got,
        wanted,
        w.output_flush_floor(spec)?,
        w.error_floor(index, inputs)?,
    );
    let tolerance = w.output_tolerance(spec);
    Ok(OutputCheck {
        output: spec.name.to_string(),
        rel_err: c.rel_err,
        tolerance,
        pass: c.rel_err <= tolerance && c.mismatched_special == 0,
        compared: got.len(),
        mismatched_special: c.mismatched_special,
        first_mismatch: c.first_mismatch,
    })
}

/// Whether `w` is an attention decode call (its own tensors: `crate::decode`).
pub fn is_decode(w: &Workload) -> bool {
    use cutile_kernels::attention::decode;
    matches!(w.op(), decode::OP | decode::OP_PAGED)
}

/// What [`Owned::run`] returns: every output (logical row-major f32), and the timing when asked.
pub type OwnedRun = (Vec<Vec<f32>>, Option<Stats>);

/// The families whose calls own their tensors (index, cache and f32 side tensors besides the element
/// type's) and so run through their own module instead of [`instantiate`] and [`call`]: one place
/// that routes them, for the check, the benchmarks and the tuner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// `fused_qkv` (`crate::fused_qkv`).
    FusedQkv,
    /// Attention decode, contiguous and paged (`crate::decode`).
    Decode,
    /// RoPE, cache writes, embedding, sampling, norm backward, dropout (`crate::transformer`).
    Transformer,
    /// The prefill attention variants (`crate::attention_variants`).
    AttentionVariant,
    /// The fp8 GEMMs: byte tensors of fp8 codes and f32 scales (`crate::fp8`).
    Fp8,
    /// The attention backward: the forward's output and f32 LSE first (`crate::attention_backward`).
    AttentionBackward,
    /// MLA decode: latent cache, lengths, block table (`crate::mla`).
    MlaDecode,
    /// MLA prefill: D_qk 192, D_v 128, f32 LSE (`crate::mla`).
    MlaPrefill,
}

impl Owned {
    /// The family `w` belongs to, or `None` for a call through [`instantiate`] and [`call`].
    pub fn of(w: &Workload) -> Option<Owned> {
        if w.op() == cutile_kernels::fused_qkv::OP {
            Some(Owned::FusedQkv)
        } else if is_decode(w) {
            Some(Owned::Decode)
        } else if crate::transformer::covers(w.op()) {
            Some(Owned::Transformer)
        } else if crate::attention_variants::is_variant(w.op()) {
            Some(Owned::AttentionVariant)
        } else if crate::fp8::covers(w.op()) {
            Some(Owned::Fp8)
        } else if crate::attention_backward::covers(w.op()) {
            Some(Owned::AttentionBackward)
        } else if crate::mla::is_decode(w.op()) {
            Some(Owned::MlaDecode)
        } else if crate::mla::covers(w.op()) {
            Some(Owned::MlaPrefill)
        } else {
            None
        }
    }

    /// Whether its benchmark flushes L2 before every call: all but the compute-bound attention
    /// variants and fp8 GEMMs (at decode the weight or cache read is the cost, and one left in L2 by
    /// the previous call would flatter it).
    pub fn flushed(self) -> bool {
        !matches!(
            self,
            Owned::AttentionVariant | Owned::Fp8 | Owned::AttentionBackward | Owned::MlaPrefill
        )
    }

    /// One call of `w` on `inputs` (timed `iters` times after warm-up when `timing` is given; the
    /// flush is dropped where [`Self::flushed`] is false).
    pub fn run(
        self,
        device: &Device,
        stream: &Stream,
        w: &Workload,
        inputs: &[HostTensor],
        timing: crate::launch_times::Timing<'_>,
    ) -> Result<OwnedRun, BoxError> {
        let timing = timing.map(|(n, f)| (n, f.filter(|_| self.flushed())));
        match self {
            Owned::FusedQkv => crate::fused_qkv::run(device, stream, w, inputs, timing),
            Owned::Decode => crate::decode::run(device, stream, w.dt()?, inputs, timing),
            Owned::Transformer => crate::transformer::run(device, stream, w, inputs, timing),
            Owned::AttentionVariant => {
                crate::attention_variants::run(device, stream, w, inputs, timing)
            }
            Owned::Fp8 => {
                crate::fp8::run(device, stream, w, inputs, timing).map(|(c, s)| (vec![c], s))
            }
            Owned::AttentionBackward => {
                crate::attention_backward::run(device, stream, w.dt()?, &w.call, inputs, timing)
            }
            Owned::MlaDecode | Owned::MlaPrefill => {
                crate::mla::run(device, stream, w, inputs, timing)
            }
        }
    }
}

/// A NaN-aware comparison of an output with its reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Relative L2 error over the elements whose reference is finite (a NaN or inf output there
    /// makes it infinite).
    pub rel_err: f64,
    /// Elements whose reference is NaN or ±inf and whose output is not the same special value.
    pub mismatched_special: usize,
    /// The first such element: (index, output, reference).
    pub first_mismatch: Option<(usize, f32, f32)>,
}

/// Compares `got` with `want` (see [`Comparison`]); different lengths give an infinite error.
///
/// `flush_floor` (the smallest normal of the stored type, [`Workload::output_flush_floor`]): an entry
/// whose reference and output both lie below it in magnitude counts as equal, because flush-to-zero
/// arithmetic may write a subnormal result as zero (the H200 check of 2026-12-01 failed one-element
/// f16/bf16 `silu_and_mul` / `swiglu` cases on exactly that: a 2e-6 f16 product written as 0).
///
/// `error_floor` ([`Workload::error_floor`]): the relative error is taken against
/// `max(‖want‖, error_floor)`; 0 for a plain relative error.
pub fn compare(got: &[f32], want: &[f32], flush_floor: f32, error_floor: f64) -> Comparison {
    if got.len() != want.len() {
        return Comparison {
            rel_err: f64::INFINITY,
            mismatched_special: 0,
            first_mismatch: None,
        };
    }
    let (mut g, mut w) = (Vec::with_capacity(got.len()), Vec::with_capacity(got.len()));
    let (mut bad, mut first) = (0, None);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        if b.abs() < flush_floor && a.abs() < flush_floor {
            continue;
        }
        if b.is_finite() {
            g.push(a);
            w.push(b);
        } else if !(a == b || (a.is_nan() && b.is_nan())) {
            bad += 1;
            first.get_or_insert((i, a, b));
        }
    }
    let mut rel_err = rel_l2_floored(&g, &w, error_floor);
    if g.iter().any(|v| !v.is_finite()) {
        rel_err = f64::INFINITY;
    }
    Comparison {
        rel_err,
        mismatched_special: bad,
        first_mismatch: first,
    }
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
            "{:<56} {:>10.2} µs median ({:.2}–{:.2}, n={}) {:>9.1} {}{}",
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

/// Times `iters` host-op calls of `w` (after a waited first call and 5 warm-up calls), flushing L2
/// first when `w` is memory-bound and a flush buffer is given. The timed span is what the call
/// enqueues (CUDA events around it), not the host wait.
pub fn bench(
    device: &Device,
    stream: &Stream,
    w: &Workload,
    iters: usize,
    flush: Option<&mut L2Flush>,
) -> Result<BenchResult, BoxError> {
    if let Some(owned) = Owned::of(w) {
        let flushed = flush.is_some() && owned.flushed();
        let inputs = w.inputs()?;
        let (_, stats) = owned.run(device, stream, w, &inputs, Some((iters, flush)))?;
        let stats = stats.ok_or_else(|| format!("{}: no timing", w.name))?;
        return bench_result(w, stats, flushed);
    }
    let mut inst = instantiate(device, w, false)?;
    // Loads modules (and tunes, when tuning is on) outside the timed calls.
    call(stream, w, &mut inst, After::Wait)?;
    let flush = if w.memory_bound() { flush } else { None };
    let flushed = flush.is_some();
    let stats = time_device(stream, 5, iters, flush, || {
        // Detach: `time_device` records its end event after this call and waits for it before the
        // next call or returning, and `inst` outlives it, so the queued work never outlives its
        // tensors.
        call(stream, w, &mut inst, After::Detach)
    })?;
    stream.synchronize()?;
    bench_result(w, stats, flushed)
}

fn bench_result(w: &Workload, stats: Stats, flushed: bool) -> Result<BenchResult, BoxError> {
    let secs = stats.median_us * 1e-6;
    let (throughput, unit) = match w.metric()? {
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

#[cfg(test)]
mod tests {
    use super::compare;

    /// Below the flush floor a zero output equals a subnormal reference; above it nothing changes.
    #[test]
    fn flushed_subnormal_results_compare_equal() {
        let f16_floor = half::f16::MIN_POSITIVE.to_f32();
        // (got, want, floor, passes at 2e-3)
        let cases: [(&[f32], &[f32], f32, bool); 5] = [
            (&[0.0], &[-2e-6], f16_floor, true),
            (&[0.0, 1.0], &[1e-40, 1.0], f32::MIN_POSITIVE, true),
            (&[0.0], &[1e-3], f16_floor, false),
            (&[0.0], &[-2e-6], f32::MIN_POSITIVE, false),
            (&[f32::NAN], &[1e-7], f16_floor, false),
        ];
        for (got, want, floor, pass) in cases {
            let c = compare(got, want, floor, 0.0);
            assert_eq!(
                c.rel_err <= 2e-3,
                pass,
                "{got:?} vs {want:?} floor {floor}: {c:?}"
            );
        }
    }
}
