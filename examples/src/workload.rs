//! Op calls as data. A [`Workload`] is a host-API call ([`CallSpec`]: op, element type, input shapes,
//! from a family's `representative_calls()` or built for a shape) plus how its tensors are stored
//! ([`Layout`]: contiguous, or passed as a transposed/permuted view). From it follow the seeded input
//! data, the CPU reference (the family's `reference` module), the throughput metric, and the launcher
//! plans a bundle must hold for it. Which kernel, tile, variant and grid a call gets is the family's
//! choice (`config.rs`); nothing here picks one. [`crate::run`] runs a workload through the host API.

use cutile::launch::{Launcher, Plan};
use cutile::toolchain::GpuArch;
use cutile_kernels::attention::decode;
use cutile_kernels::gemm::grouped;
use cutile_kernels::op::registry::launcher_plans;
use cutile_kernels::op::{CallSpec, Operand, Target, contiguous_strides, describe};
use cutile_kernels::{activation, attention, fused_qkv, gemm, norm, softmax, vector_add};

use crate::BoxError;
use crate::data::{Dt, swap_axes, uniform};

/// `eps` of the norm calls.
pub const EPS: f32 = 1e-5;
/// GEMM options of the harness: f32 calls run the tf32 product (the only f32 one; its tolerance is in
/// [`Workload::tolerance`]).
const TF32: gemm::GemmOptions = gemm::GemmOptions { allow_tf32: true };
/// `alpha` of the axpy calls.
pub const ALPHA: f32 = 1.5;

/// How a call's tensors are stored and passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Every tensor contiguous in its logical shape.
    Contiguous,
    /// GEMM: `b` stored as a contiguous `[n, k]` and passed as `b.transpose(0, 1)`; fused QKV: the
    /// weight stored as PyTorch `Linear`'s `[N, hidden]`, passed the same way.
    TransposedB,
    /// 4-D attention: `q`, `k`, `v`, `o` stored `[B, S, H, D]` and passed as `.transpose(1, 2)` views
    /// (`[B, H, S, D]`).
    Bshd,
    /// The first input (`x`, `a`) stored with its last axis `offset + cols + pad` long (padding filled
    /// with [`PAD_VALUE`]) and passed as the view `.slice(last, offset..offset + cols)`: a padded row
    /// stride (`pad > 0`) and/or a start `offset` elements in. Element-wise ops take it only 1-D
    /// (`pad = 0`: an offset slice of a contiguous buffer).
    Strided { pad: i64, offset: i64 },
    /// `rms_norm_heads`: `x: [.., T, H, D]` stored with its head axis `before + H + after` long
    /// (the other heads filled with [`PAD_VALUE`]) and passed as the view
    /// `.slice(rank - 2, before..before + H)`: `q` (`before = 0`, `after = 2·Hkv`) or `k`
    /// (`before = Hq`, `after = Hkv`) of a fused `[T, (Hq + 2·Hkv)·D]` projection.
    HeadSlice { before: i64, after: i64 },
}

/// What the padding of a [`Layout::Strided`] input holds: a kernel that reads it gets a visibly wrong
/// result.
pub const PAD_VALUE: f32 = 7777.0;

impl Layout {
    fn suffix(self) -> String {
        match self {
            Layout::Contiguous => String::new(),
            Layout::TransposedB => " (b = [n,k].T)".into(),
            Layout::Bshd => " (BSHD view)".into(),
            Layout::Strided { pad, offset } => format!(" (x strided: pad {pad}, offset {offset})"),
            Layout::HeadSlice { before, after } => {
                format!(" (x = heads of a fused tensor: {before} before, {after} after)")
            }
        }
    }
}

/// Throughput measure of a call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Bytes moved (read + written) → GB/s.
    Bytes(f64),
    /// Floating-point operations → TFLOP/s.
    Flops(f64),
}

/// What the reference produced: the expected first output (logical row-major order), for all rows or
/// for the listed rows of the output viewed as `rows x last-extent`, and the expected further outputs
/// of a multi-output op (all of each, in [`Workload::outputs`] order after the first).
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub values: Vec<f32>,
    pub rows: Option<Vec<usize>>,
    pub others: Vec<Vec<f32>>,
}

/// One output of a call: its name in the host API, logical shape, and whether it is f32 whatever the
/// call's element type (the statistics of `layer_norm_stats`) rather than of the element type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSpec {
    pub name: &'static str,
    pub shape: Vec<i64>,
    pub f32: bool,
}

/// Host data of one tensor: values (row-major) and shape.
pub type HostTensor = (Vec<f32>, Vec<i64>);

/// One host-API call of one op.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Unique name: the call's label plus the layout, e.g. `gemm bf16 [1000, 517] [517, 1023] (b = [n,k].T)`.
    pub name: String,
    pub call: CallSpec,
    pub layout: Layout,
}

fn shape_of(call: &CallSpec, i: usize) -> Result<&[i64], BoxError> {
    call.shapes
        .get(i)
        .map(|s| s.as_slice())
        .ok_or_else(|| format!("{}: input shape {i} missing", call.label()).into())
}

fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>().max(0) as usize
}

fn last(shape: &[i64]) -> i64 {
    shape.last().copied().unwrap_or(1)
}

impl Workload {
    /// The call with contiguous tensors.
    pub fn new(call: CallSpec) -> Workload {
        Workload::with_layout(call, Layout::Contiguous)
    }

    pub fn with_layout(call: CallSpec, layout: Layout) -> Workload {
        Workload {
            name: format!("{}{}", call.label(), layout.suffix()),
            call,
            layout,
        }
    }

    pub fn op(&self) -> &str {
        &self.call.op
    }

    pub fn dt(&self) -> Result<Dt, BoxError> {
        Dt::parse(&self.call.dtype)
            .ok_or_else(|| format!("{}: unknown element type", self.name).into())
    }

    /// The first output's tolerance (`cutile_kernels::tolerance`); f32 products run as tf32, whose
    /// 10-bit mantissa is f16's.
    pub fn tolerance(&self) -> f64 {
        // fp8 products write bf16.
        if crate::fp8::covers(self.op()) {
            return Dt::BF16.tolerance();
        }
        // The backward rounds P and dS to the element type before its products (as FlashAttention
        // does) and takes the forward's rounded output: twice the element type's tolerance.
        if crate::attention_backward::covers(self.op()) {
            return 2.0 * self.dt().map_or(0.0, Dt::tolerance);
        }
        match self.dt() {
            Ok(Dt::F32)
                if matches!(self.op(), gemm::OP | gemm::BMM | grouped::OP)
                    || is_epilogue(self.op()) =>
            {
                Dt::F16.tolerance()
            }
            dt => dt.map_or(0.0, Dt::tolerance),
        }
    }

    /// The tolerance of an output: of the element type, or of f32 for an f32 output of 16-bit
    /// inputs (an f32 output of f32 inputs keeps [`Self::tolerance`]: a tf32 product is no more exact
    /// for being written in f32).
    pub fn output_tolerance(&self, o: &OutputSpec) -> f64 {
        if o.f32 && !matches!(self.dt(), Ok(Dt::F32)) {
            Dt::F32.tolerance()
        } else {
            self.tolerance()
        }
    }

    /// The smallest normal value of output `o`'s element type: below it a result is subnormal, which
    /// the kernels' flush-to-zero arithmetic (the approximate `exp`/`div` of 16-bit outputs, chosen
    /// for speed) may write as zero; [`crate::run::compare`] takes such entries as equal.
    pub fn output_flush_floor(&self, o: &OutputSpec) -> Result<f32, BoxError> {
        if crate::fp8::covers(self.op()) {
            return Ok(f32::MIN_POSITIVE);
        }
        Ok(match if o.f32 { Dt::F32 } else { self.dt()? } {
            Dt::F32 | Dt::BF16 => f32::MIN_POSITIVE,
            Dt::F16 => half::f16::MIN_POSITIVE.to_f32(),
        })
    }

    /// Every output the call writes, in the host API's order: `[h, y]` for `add_rms_norm`,
    /// `[y, mean, rstd]` for `layer_norm_stats` (the statistics f32, shaped as `x` without its last
    /// axis), otherwise the one output ([`Workload::output_shape`]; `axpy`'s `y` updated in place).
    pub fn outputs(&self) -> Result<Vec<OutputSpec>, BoxError> {
        let o = |name, shape, f32| OutputSpec { name, shape, f32 };
        if crate::transformer::covers(self.op()) {
            return crate::transformer::outputs(self.dt()?, &self.call);
        }
        if crate::fp8::covers(self.op()) {
            return crate::fp8::outputs(&self.call);
        }
        let x = shape_of(&self.call, 0)?.to_vec();
        if let Some(spec) = activation::find(self.op()) {
            let shapes = spec
                .operand_shapes(&x)
                .ok_or_else(|| format!("{}: the last axis must be even", self.name))?;
            let n_in = shapes.len() - spec.outputs();
            return Ok(spec.operand_names()[n_in..]
                .iter()
                .zip(&shapes[n_in..])
                .map(|(&name, s)| o(name, s.clone(), false))
                .collect());
        }
        if crate::attention_variants::is_variant(self.op()) {
            return crate::attention_variants::outputs(self.dt()?, &self.call);
        }
        if crate::mla::covers(self.op()) {
            return crate::mla::outputs(self.dt()?, &self.call);
        }
        if crate::attention_backward::covers(self.op()) {
            return crate::attention_backward::outputs(&self.call);
        }
        if let Some(op) = gemm::epilogue::find(self.op()) {
            return Ok(vec![o("c", self.output_shape()?, op.out_f32)]);
        }
        Ok(match self.op() {
            norm::ADD_RMS_NORM => vec![o("h", x.clone(), false), o("y", x, false)],
            norm::LAYER_NORM_STATS => {
                let lead = x[..x.len().saturating_sub(1)].to_vec();
                vec![
                    o("y", x, false),
                    o("mean", lead.clone(), true),
                    o("rstd", lead, true),
                ]
            }
            gemm::OP | gemm::BMM | grouped::OP => vec![o("c", self.output_shape()?, false)],
            // The caches are updated in place (their old contents are inputs): see `storage`.
            fused_qkv::OP => {
                let (ops, _) = fused_qkv::described_call(self.dt()?.scalar(), &self.call.shapes)?;
                vec![
                    o("q", ops[fused_qkv::slot::Q].shape.clone(), false),
                    o(
                        "k_cache",
                        ops[fused_qkv::slot::K_CACHE].shape.clone(),
                        false,
                    ),
                    o(
                        "v_cache",
                        ops[fused_qkv::slot::V_CACHE].shape.clone(),
                        false,
                    ),
                ]
            }
            attention::OP => vec![o("o", self.output_shape()?, false)],
            decode::OP | decode::OP_PAGED => {
                vec![
                    o("o", x.clone(), false),
                    o("lse", x[..3.min(x.len())].to_vec(), true),
                ]
            }
            _ => vec![o("y", self.output_shape()?, false)],
        })
    }

    /// Memory-bound ops: L2 is flushed before each timed call.
    pub fn memory_bound(&self) -> bool {
        !matches!(
            self.op(),
            gemm::OP | gemm::BMM | grouped::OP | attention::OP
        ) && !crate::attention_variants::is_variant(self.op())
            && self.op() != cutile_kernels::attention::mla::OP_PREFILL
            && !crate::attention_backward::covers(self.op())
            && !is_epilogue(self.op())
            && !crate::fp8::covers(self.op())
    }

    /// The shape of the output (logical).
    pub fn output_shape(&self) -> Result<Vec<i64>, BoxError> {
        Ok(match self.op() {
            op if crate::transformer::covers(op) => self
                .outputs()?
                .first()
                .map(|o| o.shape.clone())
                .unwrap_or_default(),
            op if op == gemm::OP || is_epilogue(op) || crate::fp8::covers(op) => {
                vec![shape_of(&self.call, 0)?[0], shape_of(&self.call, 1)?[1]]
            }
            gemm::BMM => {
                let (a, b) = (shape_of(&self.call, 0)?, shape_of(&self.call, 1)?);
                vec![a[0], a[1], b[2]]
            }
            grouped::OP => {
                let (a, b) = (shape_of(&self.call, 0)?, shape_of(&self.call, 1)?);
                vec![a[0], b.get(2).copied().unwrap_or(0)]
            }
            op if activation::find(op).is_some() => self
                .outputs()?
                .first()
                .map(|o| o.shape.clone())
                .unwrap_or_default(),
            op if crate::attention_variants::is_variant(op) || crate::mla::covers(op) => self
                .outputs()?
                .first()
                .map(|o| o.shape.clone())
                .unwrap_or_default(),
            fused_qkv::OP => {
                let h = shape_of(&self.call, 1)?;
                vec![
                    shape_of(&self.call, 0)?[0],
                    h[0],
                    h.get(2).copied().unwrap_or(0),
                ]
            }
            _ => shape_of(&self.call, 0)?.to_vec(),
        })
    }

    /// Bytes moved or flops done by one call.
    pub fn metric(&self) -> Result<Metric, BoxError> {
        if crate::transformer::covers(self.op()) {
            return crate::transformer::metric(self.dt()?, &self.call);
        }
        if crate::fp8::covers(self.op()) {
            return Ok(Metric::Flops(crate::fp8::flops(&self.call)?));
        }
        let b = self.dt()?.bytes() as f64;
        let x = shape_of(&self.call, 0)?;
        let n = numel(x) as f64;
        if let Some(spec) = activation::find(self.op()) {
            // Every operand is read or written once.
            let shapes = spec.operand_shapes(x).unwrap_or_default();
            let all: usize = shapes.iter().map(|s| numel(s)).sum();
            return Ok(Metric::Bytes(all as f64 * b));
        }
        if crate::attention_variants::is_variant(self.op()) {
            return Ok(Metric::Flops(crate::attention_variants::flops(
                self.dt()?,
                &self.call,
            )?));
        }
        if crate::attention_backward::covers(self.op()) {
            return Ok(Metric::Flops(crate::attention_backward::flops(&self.call)?));
        }
        if crate::mla::is_decode(self.op()) {
            return Ok(Metric::Bytes(crate::mla::decode_bytes(
                self.dt()?,
                &self.call,
            )?));
        }
        if crate::mla::covers(self.op()) {
            return Ok(Metric::Flops(crate::mla::prefill_flops(
                self.dt()?,
                &self.call,
            )?));
        }
        Ok(match self.op() {
            vector_add::ADD | vector_add::AXPY => Metric::Bytes(3.0 * n * b),
            norm::RMS_NORM | norm::LAYER_NORM | norm::RMS_NORM_HEADS | softmax::OP => {
                Metric::Bytes(2.0 * n * b)
            }
            // Reads x and r, writes h and y.
            norm::ADD_RMS_NORM => Metric::Bytes(4.0 * n * b),
            // Reads x, writes y, and the f32 mean and rstd of every row.
            norm::LAYER_NORM_STATS => {
                let rows = n / last(x).max(1) as f64;
                Metric::Bytes(2.0 * n * b + 2.0 * rows * 4.0)
            }
            op if op == gemm::OP || is_epilogue(op) => {
                let (m, k, nn) = (x[0], x[1], shape_of(&self.call, 1)?[1]);
                Metric::Flops(2.0 * m as f64 * nn as f64 * k as f64)
            }
            gemm::BMM => {
                let nn = shape_of(&self.call, 1)?[2];
                Metric::Flops(2.0 * (x[0] * x[1] * x[2]) as f64 * nn as f64)
            }
            // Every row of `a` times its group's `k x n` matrix.
            grouped::OP => {
                let nn = shape_of(&self.call, 1)?.get(2).copied().unwrap_or(0);
                Metric::Flops(2.0 * (x[0] * x[1]) as f64 * nn as f64)
            }
            attention::OP => {
                let k = shape_of(&self.call, 1)?;
                let r = x.len();
                let (sq, sk, d) = (x[r - 2], k[r - 2], x[r - 1]);
                let slices: i64 = x[..r - 2].iter().product();
                let pairs: f64 = if self.call.causal {
                    (0..sq).map(|i| (i + 1).min(sk) as f64).sum()
                } else {
                    (sq * sk) as f64
                };
                Metric::Flops(4.0 * slices as f64 * pairs * d as f64)
            }
            // K and V of every sequence at full length (the benchmark calls' lengths; a ragged
            // call reads less).
            decode::OP | decode::OP_PAGED => {
                let c = shape_of(&self.call, 1)?;
                let keys = if self.op() == decode::OP {
                    x[0] * c[2]
                } else {
                    let t = shape_of(&self.call, 2)?;
                    t[0] * t[1] * c[1]
                };
                let hkv = if self.op() == decode::OP { c[1] } else { c[2] };
                Metric::Bytes(2.0 * (keys * hkv * c[3]) as f64 * b)
            }
            fused_qkv::OP => {
                let h = shape_of(&self.call, 1)?;
                let n = (h[0] + 2 * h[1]) * h.get(2).copied().unwrap_or(0);
                Metric::Flops(2.0 * (x[0] * n * x[1]) as f64)
            }
            other => return Err(format!("no metric for op {other}").into()),
        })
    }

    /// The call's inputs in logical shape, seeded and rounded to the element type. For `axpy` the
    /// second input is `y`'s initial value (the op updates it in place).
    pub fn inputs(&self) -> Result<Vec<HostTensor>, BoxError> {
        if crate::fp8::covers(self.op()) {
            return crate::fp8::inputs(&self.call, 6);
        }
        let dt = self.dt()?;
        if crate::transformer::covers(self.op()) {
            return crate::transformer::inputs(dt, &self.call);
        }
        let t = |shape: &[i64], seed: u64, range: f64| -> HostTensor {
            (
                dt.round(&uniform(numel(shape), -range, range, seed)),
                shape.to_vec(),
            )
        };
        let x = shape_of(&self.call, 0)?;
        if let Some(spec) = activation::find(self.op()) {
            // ±4 spans where the activations bend; the runner's property cases add large magnitudes.
            let shapes = spec
                .operand_shapes(x)
                .ok_or_else(|| format!("{}: the last axis must be even", self.name))?;
            let n_in = shapes.len() - spec.outputs();
            return Ok(shapes[..n_in]
                .iter()
                .enumerate()
                .map(|(i, s)| t(s, 20 + i as u64, 4.0))
                .collect());
        }
        Ok(match self.op() {
            vector_add::ADD | vector_add::AXPY => vec![t(x, 1, 1.0), t(x, 2, 1.0)],
            softmax::OP => vec![t(x, 5, 4.0)],
            norm::RMS_NORM | norm::RMS_NORM_HEADS => vec![t(x, 8, 1.0), t(&[last(x)], 9, 1.0)],
            norm::LAYER_NORM | norm::LAYER_NORM_STATS => {
                vec![t(x, 8, 1.0), t(&[last(x)], 9, 1.0), t(&[last(x)], 10, 1.0)]
            }
            norm::ADD_RMS_NORM => vec![t(x, 8, 1.0), t(x, 14, 1.0), t(&[last(x)], 9, 1.0)],
            gemm::OP | gemm::BMM | grouped::OP => {
                vec![t(x, 6, 1.0), t(shape_of(&self.call, 1)?, 7, 1.0)]
            }
            op if is_epilogue(op) => {
                let e = gemm::epilogue::find(op).ok_or("unknown epilogue op")?;
                let (m, n) = (x[0], shape_of(&self.call, 1)?[1]);
                let mut v = vec![t(x, 6, 1.0), t(shape_of(&self.call, 1)?, 7, 1.0)];
                if e.spec.bias {
                    v.push(t(&[n], 15, 1.0));
                }
                if e.spec.residual {
                    v.push(t(&[m, n], 16, 1.0));
                }
                v
            }
            attention::OP => {
                let k = shape_of(&self.call, 1)?;
                vec![t(x, 11, 1.0), t(k, 12, 1.0), t(k, 13, 1.0)]
            }
            fused_qkv::OP => crate::fused_qkv::inputs(self.dt()?, &self.call)?,
            decode::OP | decode::OP_PAGED => crate::decode::inputs(self.dt()?, &self.call, 0)?,
            op if crate::attention_variants::is_variant(op) => {
                crate::attention_variants::inputs(self.dt()?, &self.call)?
            }
            op if crate::mla::covers(op) => crate::mla::inputs(self.dt()?, &self.call, 0)?,
            op if crate::attention_backward::covers(op) => {
                crate::attention_backward::inputs(self.dt()?, &self.call, 0)?
            }
            other => return Err(format!("unknown op {other}").into()),
        })
    }

    /// Whether the output is the last input, updated in place (`axpy`), rather than a separate tensor.
    pub fn output_in_place(&self) -> bool {
        self.op() == vector_add::AXPY
    }

    /// What to upload, in order (the outputs last): the inputs in their storage layout, then the
    /// outputs of the element type (zeros, in [`Workload::outputs`] order) unless the output is updated
    /// in place. The f32 outputs are [`Workload::f32_storage`].
    pub fn storage(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BoxError> {
        let mut out: Vec<HostTensor> = inputs
            .iter()
            .enumerate()
            .map(|(i, (d, s))| match (self.layout, i) {
                (Layout::TransposedB, 1) => swap_axes(d, s, 0, 1),
                // A grouped call's `b` stored `[G, n, k]` when its spec says so.
                (_, 1)
                    if self.op() == grouped::OP && grouped::spec_transposed(&self.call.shapes) =>
                {
                    swap_axes(d, s, 1, 2)
                }
                (Layout::Bshd, _) => swap_axes(d, s, 1, 2),
                (Layout::Strided { pad, offset }, 0) => pad_last(d, s, pad, offset),
                (Layout::HeadSlice { before, after }, 0) => pad_heads(d, s, before, after),
                _ => (d.clone(), s.clone()),
            })
            .collect();
        if crate::transformer::covers(self.op()) || crate::attention_backward::covers(self.op()) {
            // As for fused_qkv, the first output last; `crate::transformer::run` and
            // `crate::attention_backward::run` upload their own tensors (in-place outputs are inputs
            // there).
            let first = self.output_shape()?;
            out.push((vec![0.0; numel(&first)], first));
        } else if self.op() == fused_qkv::OP {
            // Only q: the caches are the last inputs, updated in place.
            let q = self.output_shape()?;
            out.push((vec![0.0; numel(&q)], q));
        } else if !self.output_in_place() {
            for o in self.outputs()?.into_iter().filter(|o| !o.f32) {
                let shape = match self.layout {
                    Layout::Bshd => swap_axes(&[], &o.shape, 1, 2).1,
                    _ => o.shape,
                };
                out.push((vec![0.0; numel(&shape)], shape));
            }
        }
        Ok(out)
    }

    /// The f32 outputs (zeros, contiguous, in [`Workload::outputs`] order): `layer_norm_stats`'s
    /// `mean` and `rstd`; none for the other ops.
    pub fn f32_storage(&self) -> Result<Vec<HostTensor>, BoxError> {
        Ok(self
            .outputs()?
            .into_iter()
            .filter(|o| o.f32)
            .map(|o| (vec![0.0; numel(&o.shape)], o.shape))
            .collect())
    }

    /// The output read back in storage order → logical row-major order.
    pub fn output_logical(&self, stored: Vec<f32>) -> Result<Vec<f32>, BoxError> {
        Ok(match self.layout {
            Layout::Bshd => {
                let shape = self.output_shape()?;
                let stored_shape = swap_axes(&[], &shape, 1, 2).1;
                swap_axes(&stored, &stored_shape, 1, 2).0
            }
            _ => stored,
        })
    }

    /// The expected output from the (logical) inputs, by the family's CPU reference. GEMMs of more
    /// than 2³² multiply-adds are checked on 64 rows spread over `c`.
    /// The error floor of output `output` against its reference (`crate::run::compare`): the
    /// relative error is taken against `max(‖want‖, floor)`. Where rounding error scales with terms
    /// that cancel, not with the result, a relative error against a small result is noise: a GEMM
    /// output entry that sums to near zero (a `1 x k` by `k x 1` product is one value), or norm
    /// backward's `dx` at widths 1 and 2, which is exactly zero (a normalized row of one element, or a
    /// centred row of two, does not depend on `x`). The floor is then the size of those terms; 0
    /// for every other output.
    pub fn error_floor(&self, output: usize, i: &[HostTensor]) -> Result<f64, BoxError> {
        if crate::transformer::covers(self.op()) {
            return crate::transformer::error_floor(&self.call, output, i);
        }
        if output != 0 {
            return Ok(0.0);
        }
        let x = shape_of(&self.call, 0)?;
        Ok(match self.op() {
            op if op == gemm::OP || is_epilogue(op) => {
                let b = shape_of(&self.call, 1)?;
                let (m, k, n) = (x[0] as usize, x[1] as usize, b[1] as usize);
                product_term_norm(&i[0].0, &i[1].0, &checked_rows(m, n, k), n, k)
            }
            gemm::BMM => {
                let b = shape_of(&self.call, 1)?;
                let (batch, m, k, n) = (x[0] as usize, x[1] as usize, x[2] as usize, b[2] as usize);
                let all: Vec<usize> = (0..m).collect();
                (0..batch)
                    .map(|q| {
                        let a = &i[0].0[q * m * k..(q + 1) * m * k];
                        let bq = &i[1].0[q * k * n..(q + 1) * k * n];
                        product_term_norm(a, bq, &all, n, k).powi(2)
                    })
                    .sum::<f64>()
                    .sqrt()
            }
            _ => 0.0,
        })
    }

    pub fn reference(&self, i: &[HostTensor]) -> Result<Expected, BoxError> {
        let all = |values| Expected {
            values,
            rows: None,
            others: Vec::new(),
        };
        let many = |mut outs: Vec<Vec<f32>>| {
            let values = outs.remove(0);
            Expected {
                values,
                rows: None,
                others: outs,
            }
        };
        if crate::fp8::covers(self.op()) {
            return crate::fp8::reference(&self.call, i);
        }
        if crate::transformer::covers(self.op()) {
            return Ok(many(crate::transformer::reference(
                self.dt()?,
                &self.call,
                i,
            )?));
        }
        let x = shape_of(&self.call, 0)?;
        let cols = last(x) as usize;
        if let Some(spec) = activation::find(self.op()) {
            let ins: Vec<&[f32]> = i.iter().map(|t| t.0.as_slice()).collect();
            return Ok(many(activation::reference::op_reference(spec, &ins, cols)));
        }
        Ok(match self.op() {
            vector_add::ADD => all(vector_add::vadd_reference(&i[0].0, &i[1].0)),
            vector_add::AXPY => all(vector_add::saxpy_reference(ALPHA, &i[0].0, &i[1].0)),
            softmax::OP => all(softmax::row_softmax_reference(&i[0].0, cols)),
            norm::RMS_NORM => all(norm::rms_norm_reference(&i[0].0, &i[1].0, EPS, cols)),
            norm::LAYER_NORM => all(norm::layer_norm_reference(
                &i[0].0, &i[1].0, &i[2].0, EPS, cols,
            )),
            norm::RMS_NORM_HEADS => {
                all(norm::rms_norm_heads_reference(&i[0].0, &i[1].0, EPS, cols))
            }
            norm::ADD_RMS_NORM => {
                let (h, y) = norm::add_rms_norm_reference(
                    &i[0].0,
                    &i[1].0,
                    &i[2].0,
                    EPS,
                    cols,
                    self.dt()?.scalar(),
                );
                many(vec![h, y])
            }
            norm::LAYER_NORM_STATS => {
                let (y, mean, rstd) =
                    norm::layer_norm_stats_reference(&i[0].0, &i[1].0, &i[2].0, EPS, cols);
                many(vec![y, mean, rstd])
            }
            gemm::OP => {
                let b = shape_of(&self.call, 1)?;
                let (m, k, n) = (x[0] as usize, x[1] as usize, b[1] as usize);
                let rows = checked_rows(m, n, k);
                let a = pick_rows(&i[0].0, &rows, k);
                Expected {
                    values: gemm::gemm_reference(&a, &i[1].0, rows.len(), n, k),
                    rows: (rows.len() != m).then_some(rows),
                    others: Vec::new(),
                }
            }
            op if is_epilogue(op) => {
                let e = gemm::epilogue::find(op).ok_or("unknown epilogue op")?;
                let b = shape_of(&self.call, 1)?;
                let (m, k, n) = (x[0] as usize, x[1] as usize, b[1] as usize);
                let bias = e.spec.bias.then(|| i[2].0.as_slice());
                let r_at = 2 + e.spec.bias as usize;
                let res = e.spec.residual.then(|| &i[r_at].0);
                let rows = checked_rows(m, n, k);
                let a = pick_rows(&i[0].0, &rows, k);
                let r = res.map(|r| pick_rows(r, &rows, n));
                let values = gemm::gemm_epilogue_reference(
                    &a,
                    &i[1].0,
                    bias,
                    e.spec.activation,
                    r.as_deref(),
                    rows.len(),
                    n,
                    k,
                );
                Expected {
                    values,
                    rows: (rows.len() != m).then_some(rows),
                    others: Vec::new(),
                }
            }
            grouped::OP => {
                let (ops, offsets) =
                    grouped::described_call(self.dt()?.scalar(), &self.call.shapes)?;
                let (m, k, n) = (x[0] as usize, x[1] as usize, ops[1].shape[2] as usize);
                // As `gemm`: large products are checked on 64 rows spread over `c`.
                let rows: Vec<usize> =
                    if (m as u128) * (n as u128) * (k as u128) <= 1 << 32 || m < 64 {
                        (0..m).collect()
                    } else {
                        (0..64).map(|r| r * (m - 1) / 63).collect()
                    };
                let mut values = Vec::with_capacity(rows.len() * n);
                for &r in &rows {
                    let g = offsets.partition_point(|&end| end <= r);
                    values.extend(gemm::gemm_reference(
                        &i[0].0[r * k..(r + 1) * k],
                        &i[1].0[g * k * n..(g + 1) * k * n],
                        1,
                        n,
                        k,
                    ));
                }
                Expected {
                    values,
                    rows: (rows.len() != m).then_some(rows),
                    others: Vec::new(),
                }
            }
            gemm::BMM => {
                let b = shape_of(&self.call, 1)?;
                let (batch, m, k, n) = (x[0] as usize, x[1] as usize, x[2] as usize, b[2] as usize);
                all((0..batch)
                    .flat_map(|q| {
                        let a = &i[0].0[q * m * k..(q + 1) * m * k];
                        let bq = &i[1].0[q * k * n..(q + 1) * k * n];
                        gemm::gemm_reference(a, bq, m, n, k)
                    })
                    .collect())
            }
            attention::OP => {
                let k = shape_of(&self.call, 1)?;
                let r = x.len();
                let (sq, sk, d) = (x[r - 2] as usize, k[r - 2] as usize, x[r - 1] as usize);
                let scale = 1.0 / (d as f32).sqrt();
                // 4-D with fewer K/V heads: query head h reads K/V head h / (H / H_kv).
                let (kk, vv) = if r == 4 && k[1] != x[1] {
                    let (b, h, hkv) = (x[0] as usize, x[1] as usize, k[1] as usize);
                    let per = sk * d;
                    let expand = |t: &[f32]| -> Vec<f32> {
                        (0..b * h)
                            .flat_map(|bh| {
                                let (bi, hi) = (bh / h, bh % h);
                                let src = bi * hkv + hi / (h / hkv);
                                t[src * per..(src + 1) * per].iter().copied()
                            })
                            .collect()
                    };
                    (expand(&i[1].0), expand(&i[2].0))
                } else {
                    (i[1].0.clone(), i[2].0.clone())
                };
                all(attention::attention_reference(
                    &i[0].0,
                    &kk,
                    &vv,
                    sq,
                    sk,
                    d,
                    scale,
                    self.call.causal,
                ))
            }
            fused_qkv::OP => many(crate::fused_qkv::reference(self.dt()?, &self.call, i)?),
            decode::OP | decode::OP_PAGED => {
                many(crate::decode::reference(self.dt()?, &self.call, i)?)
            }
            op if crate::attention_variants::is_variant(op) => many(
                crate::attention_variants::reference(self.dt()?, &self.call, i)?,
            ),
            op if crate::mla::covers(op) => many(crate::mla::reference(self.dt()?, &self.call, i)?),
            op if crate::attention_backward::covers(op) => {
                many(crate::attention_backward::reference(&self.call, i)?)
            }
            other => return Err(format!("no reference for op {other}").into()),
        })
    }

    /// The launcher plans (cache keys) of this call on `arch`: exactly what a bundle must hold for the
    /// host op to find its kernels (every tuning candidate's with `all_candidates`). Contiguous calls
    /// go through `launcher_plans`; views plan the family's launches on operands with the view's
    /// strides, the same planner the host op runs.
    pub fn plans(
        &self,
        arch: GpuArch,
        toolchain_version: &str,
        all_candidates: bool,
    ) -> Result<Vec<(String, Plan)>, BoxError> {
        let mut out = self.own_plans(arch, toolchain_version, all_candidates)?;
        if crate::attention_backward::covers(self.op()) {
            // A run first calls the forward with LSE (untimed, the default config): without its
            // kernels a bundle-only device run cannot run the backward at all (session 29).
            let forward = crate::attention_backward::forward_call(&self.call)?;
            out.extend(launcher_plans(&[forward], arch, toolchain_version, false)?);
        }
        Ok(out)
    }

    /// The plans of the call itself (see [`Self::plans`]).
    fn own_plans(
        &self,
        arch: GpuArch,
        toolchain_version: &str,
        all_candidates: bool,
    ) -> Result<Vec<(String, Plan)>, BoxError> {
        if self.layout == Layout::Contiguous {
            return Ok(launcher_plans(
                std::slice::from_ref(&self.call),
                arch,
                toolchain_version,
                all_candidates,
            )?);
        }
        let target = Target::planning(arch);
        let mut operands = self.call.plan(&target, all_candidates)?.operands;
        let view = |o: &mut Operand, a: usize, b: usize| {
            let mut stored = o.shape.clone();
            stored.swap(a, b);
            let mut strides = contiguous_strides(&stored);
            strides.swap(a, b);
            o.strides = strides;
        };
        let launches = match self.layout {
            Layout::TransposedB if self.op() == fused_qkv::OP => {
                // The scratch does not follow the weight's strides: the planned operands serve.
                let (_, opts) = fused_qkv::described_call(self.dt()?.scalar(), &self.call.shapes)?;
                view(&mut operands[fused_qkv::slot::W], 0, 1);
                fused_qkv::plan(&operands, &opts, &target, all_candidates)?
            }
            Layout::TransposedB if is_epilogue(self.op()) => {
                let e = gemm::epilogue::find(self.op()).ok_or("unknown epilogue op")?;
                view(&mut operands[1], 0, 1);
                gemm::epilogue::plan_epilogue(&operands, &target, &e.spec, &TF32)?
            }
            Layout::TransposedB => {
                view(&mut operands[1], 0, 1);
                // The packing scratch depends on the views' alignment: describe it anew.
                operands = gemm::with_scratch(&operands[..3], &target)?;
                gemm::plan_with(&operands, &target, &TF32, all_candidates)?
            }
            Layout::Bshd => {
                for o in operands.iter_mut() {
                    view(o, 1, 2);
                }
                let options = attention::AttentionOptions {
                    causal: self.call.causal,
                    scale: None,
                    ..Default::default()
                };
                // Every candidate too: a tuned run picks among them on this view (session 39's
                // tuned check met an overlap pick the bundle lacked).
                attention::plan(&operands, &target, &options, all_candidates)?
            }
            Layout::Strided { pad, offset } => {
                let x = &mut operands[0];
                let mut stored = x.shape.clone();
                if let Some(l) = stored.last_mut() {
                    *l += pad + offset;
                }
                x.strides = contiguous_strides(&stored);
                x.ptr = x.ptr.wrapping_add(offset as u64 * x.elem_bytes());
                match self.op() {
                    gemm::OP => {
                        operands = gemm::with_scratch(&operands[..3], &target)?;
                        gemm::plan_with(&operands, &target, &TF32, all_candidates)?
                    }
                    softmax::OP => softmax::plan(&operands, &target, all_candidates)?,
                    op @ (norm::RMS_NORM
                    | norm::LAYER_NORM
                    | norm::ADD_RMS_NORM
                    | norm::LAYER_NORM_STATS
                    | norm::RMS_NORM_HEADS) => {
                        norm::plan(op, &operands, &target, EPS, all_candidates)?
                    }
                    vector_add::ADD => vector_add::plan_add(&operands, &target)?,
                    vector_add::AXPY => vector_add::plan_axpy(&operands, &target, ALPHA)?,
                    op if activation::find(op).is_some() => {
                        activation::plan(op, &operands, &target, all_candidates)?
                    }
                    other => return Err(format!("{other} takes no strided layout").into()),
                }
            }
            Layout::HeadSlice { before, after } => {
                let x = &mut operands[0];
                let r = x.shape.len();
                if r < 3 {
                    return Err(format!("{}: a head slice needs [.., T, H, D]", self.name).into());
                }
                let mut stored = x.shape.clone();
                stored[r - 2] += before + after;
                x.strides = contiguous_strides(&stored);
                x.ptr = x
                    .ptr
                    .wrapping_add((before * x.shape[r - 1]) as u64 * x.elem_bytes());
                match self.op() {
                    norm::RMS_NORM_HEADS => norm::plan(
                        norm::RMS_NORM_HEADS,
                        &operands,
                        &target,
                        EPS,
                        all_candidates,
                    )?,
                    other => return Err(format!("{other} takes no head-slice layout").into()),
                }
            }
            Layout::Contiguous => Vec::new(),
        };
        let mut out = Vec::new();
        for launch in &launches {
            // SAFETY: described operands only feed specialization and keys; nothing is launched.
            let args = unsafe { describe(launch, &operands) };
            let plan =
                Launcher::new(launch.kernel.clone()).plan_for(&args, arch, toolchain_version)?;
            out.push((
                format!("{}: {} {}", self.name, launch.config, arch.name()),
                plan,
            ));
        }
        Ok(out)
    }
}

/// Whether `op` is one of the GEMM epilogue ops (`gemm::epilogue::OPS`: bias, activation, residual,
/// output cast, split-K).
pub fn is_epilogue(op: &str) -> bool {
    gemm::epilogue::find(op).is_some()
}

/// The rows of `c[m, n] = a[m, k] @ b` the reference computes: all of them, or 64 spread over `c` when
/// the product is large (the CPU reference would take minutes).
fn checked_rows(m: usize, n: usize, k: usize) -> Vec<usize> {
    if (m as u128) * (n as u128) * (k as u128) <= 1 << 32 || m < 64 {
        (0..m).collect()
    } else {
        (0..64).map(|r| r * (m - 1) / 63).collect()
    }
}

/// Rows `rows` of a row-major matrix `width` wide.
fn pick_rows(t: &[f32], rows: &[usize], width: usize) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| t[r * width..(r + 1) * width].iter().copied())
        .collect()
}

/// `sqrt(Σ_ij Σ_k a_ik² b_kj²)` over rows `rows` of `a @ b`: the size of the terms a dot product sums,
/// which its rounding error scales with (it is `‖a @ b‖` for random signs, and larger where the terms
/// cancel).
fn product_term_norm(a: &[f32], b: &[f32], rows: &[usize], n: usize, k: usize) -> f64 {
    let sq = |v: &[f32]| -> Vec<f32> { v.iter().map(|x| x * x).collect() };
    let a2 = sq(&pick_rows(a, rows, k));
    gemm::gemm_reference(&a2, &sq(b), rows.len(), n, k)
        .iter()
        .map(|&v| v as f64)
        .sum::<f64>()
        .sqrt()
}

/// `data` of `shape` with its last axis extended to `offset + cols + pad` ([`PAD_VALUE`] around it).
pub fn pad_last(data: &[f32], shape: &[i64], pad: i64, offset: i64) -> HostTensor {
    let cols = last(shape).max(1) as usize;
    let (pad, offset) = (pad.max(0) as usize, offset.max(0) as usize);
    let width = offset + cols + pad;
    let mut out = Vec::with_capacity(data.len() / cols * width);
    for row in data.chunks(cols) {
        out.extend(std::iter::repeat_n(PAD_VALUE, offset));
        out.extend_from_slice(row);
        out.extend(std::iter::repeat_n(PAD_VALUE, pad));
    }
    let mut stored = shape.to_vec();
    match stored.last_mut() {
        Some(l) => *l = width as i64,
        None => stored.push(width as i64),
    }
    (out, stored)
}

/// `data` of `shape` (`[.., T, H, D]`) with `before` heads in front of and `after` heads behind the
/// `H` heads of every token ([`PAD_VALUE`]): the storage of a [`Layout::HeadSlice`] view.
pub fn pad_heads(data: &[f32], shape: &[i64], before: i64, after: i64) -> HostTensor {
    let r = shape.len();
    if r < 2 {
        return (data.to_vec(), shape.to_vec());
    }
    let (h, d) = (shape[r - 2].max(0) as usize, shape[r - 1].max(1) as usize);
    let (before, after) = (before.max(0) as usize, after.max(0) as usize);
    let token = (h * d).max(1);
    let mut out = Vec::with_capacity(data.len() / token * (before + h + after) * d);
    for t in data.chunks(token) {
        out.extend(std::iter::repeat_n(PAD_VALUE, before * d));
        out.extend_from_slice(t);
        out.extend(std::iter::repeat_n(PAD_VALUE, after * d));
    }
    let mut stored = shape.to_vec();
    stored[r - 2] += (before + after) as i64;
    (out, stored)
}

/// Every family's representative calls (benchmark and ragged shapes).
pub fn representative_calls() -> Vec<CallSpec> {
    cutile_kernels::catalog::representative_calls()
}

/// A ragged call: some extent is not a multiple of 16 (off every tile boundary).
pub fn is_ragged(call: &CallSpec) -> bool {
    call.shapes.iter().flatten().any(|&e| e % 16 != 0)
}

/// Checks beyond the representative calls: views (transposed `b`, `[B,S,H,D]` attention), more
/// leading dims, and f16/bf16 for every op that takes them.
pub fn extra_checks() -> Vec<Workload> {
    let mut w = Vec::new();
    for dt in ["f16", "bf16"] {
        w.push(Workload::new(CallSpec::new(
            vector_add::ADD,
            dt,
            &[&[1_000_003]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            vector_add::AXPY,
            dt,
            &[&[1_000_003]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            softmax::OP,
            dt,
            &[&[3, 5, 77, 1025]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            norm::RMS_NORM,
            dt,
            &[&[4, 250, 1023]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            norm::LAYER_NORM,
            dt,
            &[&[4, 250, 1023]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            norm::ADD_RMS_NORM,
            dt,
            &[&[4, 250, 1023]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            norm::LAYER_NORM_STATS,
            dt,
            &[&[4, 250, 1023]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(
            norm::RMS_NORM_HEADS,
            dt,
            &[&[3, 77, 7, 96]],
            false,
        )));
        // `q` and `k` of a fused qkv projection with 12 query and 4 key/value heads of 128.
        w.push(Workload::with_layout(
            CallSpec::new(norm::RMS_NORM_HEADS, dt, &[&[333, 12, 128]], false),
            Layout::HeadSlice {
                before: 0,
                after: 8,
            },
        ));
        w.push(Workload::with_layout(
            CallSpec::new(norm::RMS_NORM_HEADS, dt, &[&[333, 4, 128]], false),
            Layout::HeadSlice {
                before: 12,
                after: 4,
            },
        ));
        // Views get shapes no contiguous call of the suite has, so a failure names one layout. (A
        // bundle entry is identified by kernel, specialization text and arch; the text marks each
        // unit stride, `strides%[..,u]`, so a view and a contiguous call of one shape are distinct
        // entries: the fused QKV benches with the `Linear` weight rely on that.)
        w.push(Workload::with_layout(
            CallSpec::new(gemm::OP, dt, &[&[1000, 512], &[512, 1023]], false),
            Layout::TransposedB,
        ));
        // A ragged product with a wave of 256x256 tiles: the plain product's 2-CTA cluster tiles,
        // partial tiles on both edges.
        w.push(Workload::new(CallSpec::new(
            gemm::OP,
            dt,
            &[&[4400, 72], &[72, 8200]],
            false,
        )));
        // Fused QKV with PyTorch's `Linear` weight `[N, hidden]` passed transposed: a decode call
        // (split-K, one launch) and a prefill one, ragged, with every epilogue switch on.
        for t in [3, 77] {
            w.push(Workload::with_layout(
                CallSpec::new(
                    fused_qkv::OP,
                    dt,
                    &[&[t, 768], &[8, 2, 128, 64], &[1, 1, 1, 1, 0, 0]],
                    false,
                ),
                Layout::TransposedB,
            ));
        }
        for causal in [false, true] {
            w.push(Workload::with_layout(
                CallSpec::new(
                    attention::OP,
                    dt,
                    &[&[2, 4, 777, 128], &[2, 2, 777, 128]],
                    causal,
                ),
                Layout::Bshd,
            ));
        }
    }
    w.push(Workload::new(CallSpec::new(
        softmax::OP,
        "f32",
        &[&[7, 3, 4097]],
        false,
    )));
    // The attention variants with every option, f16 and bf16: a dense call with more keys than
    // queries, and a varlen batch with an empty, a length-1 and ragged sequences (GQA, D = 64).
    for dt in ["f16", "bf16"] {
        let every = attention::AttentionOptions {
            causal: true,
            bottom_right: true,
            window: Some(50),
            softcap: Some(20.0),
            ..Default::default()
        };
        let flags = attention::spec_flags(&every, true, true);
        w.push(Workload::new(CallSpec {
            op: attention::PREFILL_OP.into(),
            dtype: dt.into(),
            shapes: vec![vec![1, 4, 100, 64], vec![1, 2, 237, 64], flags.clone()],
            causal: true,
        }));
        w.push(Workload::new(CallSpec {
            op: attention::VARLEN_OP.into(),
            dtype: dt.into(),
            shapes: vec![
                vec![4, 2, 64],
                vec![0, 1, 77, 200],
                vec![5, 1, 60, 260],
                flags,
            ],
            causal: true,
        }));
    }
    // Every activation op with its first input a padded-row slice starting off alignment (a row
    // stride the contiguous calls never have), rank 3 in f16, and one (gated: two) element in f32.
    for o in activation::OPS {
        w.push(Workload::with_layout(
            CallSpec::new(o.name, "bf16", &[&[129, 2, 130]], false),
            Layout::Strided { pad: 6, offset: 2 },
        ));
        w.push(Workload::new(CallSpec::new(
            o.name,
            "f16",
            &[&[5, 3, 34]],
            false,
        )));
        w.push(Workload::new(CallSpec::new(o.name, "f32", &[&[2]], false)));
    }
    // Fused linear + cross-entropy: its ragged calls (one token, all / no targets ignored, several
    // chunks, a 16-bit dw through the f32 accumulator, forward only).
    w.extend(
        cutile_kernels::cross_entropy::check_calls()
            .into_iter()
            .map(Workload::new),
    );
    // Attention backward beyond its ragged representative call: f16 causal GQA with ragged lengths,
    // 3-D non-causal with more keys than queries, and one query against a few keys.
    for (dt, q, k, causal) in [
        (
            "f16",
            &[2i64, 4, 333, 64][..],
            &[2i64, 2, 333, 64][..],
            true,
        ),
        ("bf16", &[6, 200, 64], &[6, 300, 64], false),
        ("bf16", &[1, 4, 1, 128], &[1, 2, 50, 128], false),
    ] {
        w.push(Workload::new(CallSpec::new(
            attention::BACKWARD_OP,
            dt,
            &[q, k],
            causal,
        )));
    }
    w
}

/// Correctness checks: the ragged representative calls and [`extra_checks`].
pub fn checks() -> Vec<Workload> {
    // A ragged representative call may also be a family's check call: each call is checked once.
    let mut seen = std::collections::HashSet::new();
    representative_calls()
        .into_iter()
        .filter(is_ragged)
        .map(Workload::new)
        .chain(extra_checks())
        .chain(crate::decode::check_calls().into_iter().map(Workload::new))
        .chain(crate::mla::check_calls().into_iter().map(Workload::new))
        .chain(epilogue_checks())
        .filter(|w| seen.insert(w.name.clone()))
        .collect()
}

/// Checks of the GEMM epilogue ops: every op on a ragged direct call (bf16; f16 for the f32-output
/// ones), split-K calls (decode-like, and 1000x1023x517 in two splits), tf32, a product wide enough
/// for the persistent 128x256 tiles, and a transposed `b`.
pub fn epilogue_checks() -> Vec<Workload> {
    let mut w = Vec::new();
    for o in gemm::epilogue::OPS {
        let dt = if o.out_f32 { "f16" } else { "bf16" };
        w.push(Workload::new(CallSpec::new(
            o.name,
            dt,
            &[&[100, 77], &[77, 300]],
            false,
        )));
    }
    let c = |op: &str, dt: &str, m: i64, n: i64, k: i64| {
        Workload::new(CallSpec::new(op, dt, &[&[m, k], &[k, n]], false))
    };
    w.push(c("gemm_bias_gelu_residual", "f16", 16, 1024, 4096));
    w.push(c("gemm_bias_silu", "bf16", 77, 1000, 2048));
    w.push(c("gemm_f32_out", "bf16", 1000, 1023, 517));
    w.push(c("gemm_bias_gelu_tanh", "f32", 130, 250, 96));
    // More than 16 tiles of 128x128 per SM, ragged: the persistent 128x256 tiles over 8 workers, with
    // a bias and activation, and with a residual alone (the accumulator starts from it).
    w.push(c("gemm_bias_gelu", "bf16", 4400, 8200, 72));
    w.push(c("gemm_residual", "bf16", 4400, 8200, 72));
    w.push(Workload::with_layout(
        CallSpec::new(
            "gemm_bias_silu",
            "bf16",
            &[&[33, 1000], &[1000, 333]],
            false,
        ),
        Layout::TransposedB,
    ));
    w
}

/// Benchmarks of the GEMM epilogue path: bias + GELU at 4096³ and 8192³ (against `F.linear` + GELU),
/// and split-K decode shapes M = 16, 32, 64, 128 with N = K = 8192 and 512x512x65536 (`gemm_splitk`
/// against `torch.matmul`, `gemm_bias` against `F.linear`; plain `gemm` at the same shapes beside).
pub fn epilogue_benches() -> Vec<CallSpec> {
    let c =
        |op: &str, m: i64, n: i64, k: i64| CallSpec::new(op, "bf16", &[&[m, k], &[k, n]], false);
    let mut v = vec![
        c("gemm_bias_gelu", 4096, 4096, 4096),
        c("gemm_bias_gelu", 8192, 8192, 8192),
        c("gemm_residual", 8192, 8192, 8192),
        c("gemm_bias_gelu_residual", 4096, 4096, 4096),
        c(gemm::epilogue::GEMM_SPLITK, 512, 512, 65536),
        c(gemm::OP, 512, 512, 65536),
    ];
    for m in [16, 32, 64, 128] {
        v.push(c(gemm::epilogue::GEMM_SPLITK, m, 8192, 8192));
        v.push(c("gemm_bias", m, 8192, 8192));
        v.push(c(gemm::OP, m, 8192, 8192));
    }
    v
}

/// The plain GEMMs of the grouped benchmarks' totals (8192 and 16384 rows, k = n = 4096, bf16): the
/// single-GEMM throughput `grouped_gemm`'s ragged 8-group calls of the same total are measured
/// against (issue 14's target: at least 0.9 of it).
pub fn grouped_benches() -> Vec<CallSpec> {
    [8192, 16384]
        .into_iter()
        .map(|m| CallSpec::new(gemm::OP, "bf16", &[&[m, 4096], &[4096, 4096]], false))
        .collect()
}

/// Benchmarks: every representative call, the decode grid (`crate::decode::bench_calls`) and the
/// families' extra bench calls (MLA, GEMM epilogues, grouped GEMM, cross-entropy chunks, attention
/// prefill shapes).
pub fn benches() -> Vec<Workload> {
    let mut seen = std::collections::HashSet::new();
    representative_calls()
        .into_iter()
        .chain(crate::decode::bench_calls())
        .chain(crate::mla::bench_calls())
        .chain(epilogue_benches())
        .chain(grouped_benches())
        .chain(cutile_kernels::cross_entropy::bench_calls())
        .chain(cutile_kernels::attention::bench_calls())
        .map(Workload::new)
        .chain(linear_weight_qkv_benches())
        .filter(|w| seen.insert(w.name.clone()))
        .collect()
}

/// Fused QKV's benchmark shapes (hidden 4096, Hq 32, Hkv 8, D 128) with the weight as PyTorch's
/// `Linear` stores it, `[N, hidden]`, passed transposed: decode reads each head's rows contiguously
/// along K instead of 256-byte runs of a `[hidden, N]` row (docs/fused_qkv.md, session 34).
fn linear_weight_qkv_benches() -> Vec<Workload> {
    [1, 8, 64, 4096]
        .into_iter()
        .map(|t| {
            Workload::with_layout(
                CallSpec::new(
                    fused_qkv::OP,
                    "bf16",
                    &[&[t, 4096], &[32, 8, 128, 128], &[0, 1, 0, 1, 0, 1]],
                    false,
                ),
                Layout::TransposedB,
            )
        })
        .collect()
}

/// Only the workloads of `ops`.
pub fn of_ops(ws: Vec<Workload>, ops: &[&str]) -> Vec<Workload> {
    ws.into_iter().filter(|w| ops.contains(&w.op())).collect()
}

/// The tiny call whose host overhead is measured: a 1024-element f32 `add` (one block).
pub fn tiny() -> Workload {
    Workload::new(CallSpec::new(vector_add::ADD, "f32", &[&[1024]], false))
}

/// Every distinct workload (by name): checks, benchmarks and the tiny one.
pub fn suite() -> Vec<Workload> {
    let mut seen = std::collections::HashSet::new();
    checks()
        .into_iter()
        .chain(benches())
        .chain([tiny()])
        .filter(|w| seen.insert(w.name.clone()))
        .collect()
}

#[cfg(test)]
// Test code: an unwrap is an assertion.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn workload(op: &str, dtype: &str) -> Workload {
        Workload::new(CallSpec {
            op: op.into(),
            dtype: dtype.into(),
            shapes: vec![vec![4, 8], vec![8, 4]],
            causal: false,
        })
    }

    /// Data-driven: (op, input type, f32 output?, expected tolerance).
    #[test]
    fn tf32_products_keep_f16_tolerance_even_with_an_f32_output() {
        let f32_out = |f32| OutputSpec {
            name: "c",
            shape: vec![4, 4],
            f32,
        };
        let cases = [
            ("gemm_f32_out", "f32", true, Dt::F16.tolerance()),
            ("gemm_f32_out", "bf16", true, Dt::F32.tolerance()),
            ("gemm", "f32", false, Dt::F16.tolerance()),
            ("softmax", "f32", true, Dt::F32.tolerance()),
            ("gemm_bias", "bf16", false, Dt::BF16.tolerance()),
        ];
        for (op, dt, f32, want) in cases {
            let got = workload(op, dt).output_tolerance(&f32_out(f32));
            assert_eq!(got, want, "{op} {dt} f32 output {f32}");
        }
    }

    fn call(op: &str, dtype: &str, shapes: &[&[i64]]) -> Workload {
        Workload::new(CallSpec {
            op: op.into(),
            dtype: dtype.into(),
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            causal: false,
        })
    }

    /// A one-value product whose terms cancel: the floor is the terms' size, under which a tf32-sized
    /// error passes and a wrong value still fails; without the floor the same small error fails.
    #[test]
    fn a_cancelling_dot_product_is_judged_against_its_terms() {
        let w = call("gemm_bias_gelu_tanh", "f32", &[&[1, 3], &[3, 1]]);
        let i: Vec<HostTensor> = vec![
            (vec![1.0, 1.0, 1.0], vec![1, 3]),
            (vec![1.0, -1.0, 1e-3], vec![3, 1]),
            (vec![0.0], vec![1]),
        ];
        let floor = w.error_floor(0, &i).unwrap();
        assert!((floor - (2.0f64 + 1e-6).sqrt()).abs() < 1e-6, "{floor}");
        let want = w.reference(&i).unwrap().values;
        let tol = w.tolerance();
        // (output, passes with the floor, passes without it)
        for (delta, with, without) in [(1e-3f32, true, false), (0.5, false, false)] {
            let got = [want[0] + delta];
            let c = crate::run::compare(&got, &want, f32::MIN_POSITIVE, floor);
            let plain = crate::run::compare(&got, &want, f32::MIN_POSITIVE, 0.0);
            assert_eq!(c.rel_err <= tol, with, "delta {delta}: {c:?}");
            assert_eq!(plain.rel_err <= tol, without, "delta {delta}: {plain:?}");
        }
        // Other outputs, and ops without cancelling terms, have none.
        assert_eq!(w.error_floor(1, &i).unwrap(), 0.0);
        let sm = call("softmax", "f32", &[&[1, 3]]);
        assert_eq!(
            sm.error_floor(0, &[(vec![1.0; 3], vec![1, 3])]).unwrap(),
            0.0
        );
    }

    /// Norm backward at widths 1 and 2: `dx` is exactly zero, so the floor (`‖w·dy·rstd‖`) is what
    /// the error is measured against; `dw` keeps a plain relative error.
    #[test]
    fn norm_backward_dx_at_degenerate_widths_has_a_floor() {
        for (op, cols) in [("rms_norm_backward", 1i64), ("layer_norm_backward", 2)] {
            let w = call(op, "f32", &[&[3, cols]]);
            let i = w.inputs().unwrap();
            let want = w.reference(&i).unwrap();
            let floor = w.error_floor(0, &i).unwrap();
            let dx_norm = want
                .values
                .iter()
                .map(|v| (*v as f64).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(floor > 0.1, "{op}: floor {floor}");
            assert!(
                dx_norm < 1e-3 * floor,
                "{op}: dx {dx_norm} is not ~0 next to {floor}"
            );
            assert_eq!(w.error_floor(1, &i).unwrap(), 0.0, "{op}: dw has no floor");
        }
        // A regular width: the floor is of the order of ‖dx‖, not far above it.
        let w = call("rms_norm_backward", "f32", &[&[4, 256]]);
        let i = w.inputs().unwrap();
        let dx = w.reference(&i).unwrap().values;
        let dx_norm = dx.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        let floor = w.error_floor(0, &i).unwrap();
        assert!(
            floor < 2.0 * dx_norm && floor > 0.5 * dx_norm,
            "{floor} vs {dx_norm}"
        );
    }
}
