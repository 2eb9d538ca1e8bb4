//! `FastOp`: one op's eager calls in a single extension call, for the host time of small calls.
//!
//! Through DLPack's C exchange table ([`crate::exchange`]) a call reads its input tensors, looks their
//! layout up among the op's prepared replays (`foreign::Replay`), allocates the output, asks torch
//! for its current stream and queues the replay there, releasing the GIL only for the launch. The
//! first call of a layout prepares the replay (validation, configuration, kernels). A call that is not
//! for this path (a CPU tensor, an element type without a kernel, a layout the op does not replay or
//! refuses) returns `None`, and the Python layer runs the op its usual way, which also raises the
//! usual errors.
//!
//! Outputs come from the exchange table's allocator (alloc `"dlpack"`, the default: contiguous, torch's
//! caching allocator on the current stream). With alloc `"torch"`, outputs shaped like the first input
//! come from `torch.empty_like` instead (dense strides kept); on the H200 that cost 0.4–1.6 µs more
//! per call (`docs/results/2026-12-02f/python-host-time-grant2.txt`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cutile_ir::ScalarType;
use cutile_kernels::foreign::{self, ForeignStream, RawTensor, ReplayOp, UnaryActivation};
use pyo3::prelude::*;

use crate::exchange::{self, Described, KDL_CUDA, View};
use crate::{CutileError, guarded, replay_op};

/// A key word per element type (the table key holds plain integers).
fn dtype_word(t: ScalarType) -> u64 {
    match t {
        ScalarType::F32 => 1,
        ScalarType::F16 => 2,
        ScalarType::BF16 => 3,
        ScalarType::I32 => 4,
        ScalarType::I64 => 5,
        _ => 0,
    }
}

/// Whether `op` is gated: its output halves the first input's last axis.
fn gated(op: ReplayOp) -> bool {
    matches!(
        op,
        ReplayOp::SiluAndMul
            | ReplayOp::Activation(UnaryActivation::Geglu | UnaryActivation::GegluTanh)
    )
}

/// Whether `op`'s output has its first input's shape and type (then `torch.empty_like` can make it).
fn output_like_first(op: ReplayOp) -> bool {
    !gated(op) && op != ReplayOp::Matmul
}

/// The output's shape for `op` over `inputs`; `None` when the inputs cannot make one (the op's usual
/// path reports why).
fn output_shape(op: ReplayOp, inputs: &[View<'_>]) -> Option<Vec<i64>> {
    let x = inputs[0].shape();
    if gated(op) {
        let (last, lead) = x.split_last()?;
        return Some(lead.iter().copied().chain([last / 2]).collect());
    }
    if op == ReplayOp::Matmul {
        let b = inputs.get(1)?.shape();
        return (x.len() == 2 && b.len() == 2).then(|| vec![x[0], b[1]]);
    }
    Some(x.to_vec())
}

/// `op` with the call's scalar.
fn with_eps(op: ReplayOp, eps: f32) -> ReplayOp {
    match op {
        ReplayOp::RmsNorm { .. } => ReplayOp::RmsNorm { eps },
        ReplayOp::LayerNorm { .. } => ReplayOp::LayerNorm { eps },
        other => other,
    }
}

/// One op's fast path (`FastOp(name, alloc="dlpack")`, the op names of `ops.py`), with its replays
/// by layout.
#[pyclass(frozen, module = "cutile_rs_torch._native")]
#[derive(Debug)]
pub struct FastOp {
    name: String,
    op: ReplayOp,
    /// `torch.empty_like`, when outputs shaped like the first input come from it.
    empty_like: Option<PyObject>,
    /// Replays by input layout key; `None`: that layout is not replayable.
    table: Mutex<HashMap<Vec<u64>, Option<Arc<foreign::Replay>>>>,
}

impl FastOp {
    /// The key of a call: the scalar, each input's element type, rank, address low byte, shape and
    /// strides, and the device. `None` when a tensor is not for this path.
    fn key(eps: f32, inputs: &[View<'_>]) -> Option<Vec<u64>> {
        let device = inputs[0].device();
        let mut key = Vec::with_capacity(2 + inputs.len() * 11);
        key.push(u64::from(eps.to_bits()));
        for t in inputs {
            let d = t.device();
            if d.device_type != KDL_CUDA || d.device_id != device.device_id {
                return None;
            }
            let shape = t.shape();
            key.extend([dtype_word(t.dtype()?), shape.len() as u64, t.ptr() & 0xff]);
            key.extend(shape.iter().map(|&v| v as u64));
            match t.strides() {
                Some(s) => key.extend(s.iter().map(|&v| v as u64)),
                None => key.extend(
                    cutile_kernels::op::contiguous_strides(shape)
                        .into_iter()
                        .map(|v| v as u64),
                ),
            }
        }
        key.push(device.device_id as u64);
        Some(key)
    }

    /// A new output for `op` over `inputs` on their device, and how the kernels see it.
    fn output(
        &self,
        py: Python<'_>,
        ex: &exchange::Exchange,
        op: ReplayOp,
        first: &Bound<'_, PyAny>,
        inputs: &[View<'_>],
    ) -> PyResult<Option<(PyObject, Described)>> {
        if let (Some(empty_like), true) = (&self.empty_like, output_like_first(op)) {
            let y = empty_like.call1(py, (first,))?;
            let d = ex.describe(y.bind(py))?;
            return Ok(Some((y, d)));
        }
        let (Some(shape), Some(dtype)) = (output_shape(op, inputs), inputs[0].dtype()) else {
            return Ok(None);
        };
        Ok(Some(ex.empty(py, &shape, dtype, inputs[0].device())?))
    }
}

#[pymethods]
impl FastOp {
    #[new]
    #[pyo3(signature = (name, alloc = "dlpack"))]
    fn new(py: Python<'_>, name: &str, alloc: &str) -> PyResult<FastOp> {
        let empty_like = match alloc {
            "torch" => Some(py.import("torch")?.getattr("empty_like")?.unbind()),
            "dlpack" => None,
            other => {
                return Err(CutileError::new_err(format!(
                    "FastOp alloc must be \"torch\" (torch.empty_like) or \"dlpack\" (the exchange \
                     table's allocator); got {other:?}"
                )));
            }
        };
        Ok(FastOp {
            name: name.to_string(),
            op: replay_op(name, 0.0)?,
            empty_like,
            table: Mutex::new(HashMap::new()),
        })
    }

    /// Runs the op on exactly-`torch.Tensor` inputs `a` (`b`, `c`) with scalar `eps` (ignored by ops
    /// without one) and returns its new output, or `None` when this path does not take the call.
    #[pyo3(signature = (eps, a, b=None, c=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        eps: f32,
        a: &Bound<'_, PyAny>,
        b: Option<&Bound<'_, PyAny>>,
        c: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyObject>> {
        let Some(ex) = exchange::get() else {
            return Ok(None);
        };
        let op = with_eps(self.op, eps);
        let names = op.tensor_names();
        let mut inputs: Vec<View<'_>> = Vec::with_capacity(3);
        for t in [Some(a), b, c].into_iter().flatten() {
            inputs.push(ex.view(t)?);
        }
        if inputs.len() + 1 != names.len() {
            return Err(CutileError::new_err(format!(
                "{}: takes {} input tensors ({}), got {}",
                self.name,
                names.len() - 1,
                names[..names.len() - 1].join(", "),
                inputs.len()
            )));
        }
        let Some(key) = FastOp::key(eps, &inputs) else {
            return Ok(None);
        };
        let entry = self
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(None) = entry {
            return Ok(None);
        }
        let Some((out, y)) = self.output(py, ex, op, a, &inputs)? else {
            return Ok(None);
        };
        let device = inputs[0].device().device_id;
        let stream = ex.current_stream(py, device)?;
        let mut addresses = [0u64; 4];
        for (slot, t) in addresses.iter_mut().zip(&inputs) {
            *slot = t.ptr();
        }
        addresses[inputs.len()] = y.ptr;
        let addresses = &addresses[..=inputs.len()];
        let replay = match entry {
            Some(Some(r)) => r,
            _ => {
                let dtype = inputs[0].dtype().unwrap_or(ScalarType::F32);
                let tensors: Vec<RawTensor> = inputs
                    .iter()
                    .map(View::described)
                    .chain([y])
                    .zip(names)
                    .map(|(t, &name)| RawTensor {
                        name,
                        ptr: t.ptr,
                        shape: t.shape,
                        strides: t.strides,
                        dtype: t.dtype.unwrap_or(dtype),
                    })
                    .collect();
                let ordinal = usize::try_from(device).unwrap_or(usize::MAX);
                let prepared = guarded(py, || {
                    // SAFETY: torch's current stream of the tensors' device, alive across the call.
                    let s = unsafe { ForeignStream::new(ordinal, stream) }?;
                    foreign::Replay::prepare(&s, op, &tensors)
                });
                // A call the op refuses (or cannot prepare) goes its usual way, which raises the
                // op's own error; nothing is remembered for it.
                let Ok(prepared) = prepared else {
                    return Ok(None);
                };
                let prepared = prepared.map(Arc::new);
                self.table
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, prepared.clone());
                match prepared {
                    Some(r) => r,
                    None => return Ok(None),
                }
            }
        };
        if !replay.accepts(addresses) {
            return Ok(None);
        }
        // SAFETY: the inputs are torch tensors the caller holds for the call and the output is the
        // new tensor `out`, laid out as when the replay was prepared (the key fixes the inputs'
        // layouts and so the output's); torch's caching allocator keeps their memory until the work
        // queued on its current stream has run.
        guarded(py, || unsafe { replay.enqueue(stream, addresses) })?;
        Ok(Some(out))
    }

    /// Layouts this op has seen (prepared or refused).
    fn __len__(&self) -> usize {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// How many of them replay.
    fn replays(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|r| r.is_some())
            .count()
    }
}
