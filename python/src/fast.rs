//! `FastOp`: one op's eager calls in a single extension call, for the host time of small calls.
//!
//! Through DLPack's C exchange table ([`crate::exchange`]) a call reads its input tensors, looks their
//! layout up among the op's prepared replays (`foreign::Replay`), allocates the output with torch's
//! allocator, asks torch for its current stream and queues the replay there, releasing the GIL only
//! for the launch. The first call of a layout prepares the replay (validation, configuration,
//! kernels). A call that is not for this path (a CPU tensor, an element type without a kernel, a
//! layout the op does not replay) returns `None`, and the Python layer runs the op its usual way,
//! which also raises the usual errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cutile_ir::ScalarType;
use cutile_kernels::foreign::{self, ForeignStream, RawTensor, ReplayOp, UnaryActivation};
use pyo3::prelude::*;

use crate::exchange::{self, Described, KDL_CUDA};
use crate::{guarded, replay_op};

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

/// The output's shape for `op` over `inputs`; `None` when the inputs cannot make one (the op's usual
/// path reports why).
fn output_shape(op: ReplayOp, inputs: &[Described]) -> Option<Vec<i64>> {
    let x = &inputs[0].shape;
    match op {
        ReplayOp::SiluAndMul
        | ReplayOp::Activation(UnaryActivation::Geglu | UnaryActivation::GegluTanh) => {
            let (last, lead) = x.split_last()?;
            Some(lead.iter().copied().chain([last / 2]).collect())
        }
        ReplayOp::Matmul => {
            let b = &inputs.get(1)?.shape;
            (x.len() == 2 && b.len() == 2).then(|| vec![x[0], b[1]])
        }
        _ => Some(x.clone()),
    }
}

/// One op's fast path (`FastOp(name)`, the names `prepare` takes), with its replays by layout.
#[pyclass(frozen, module = "cutile_rs_torch._native")]
#[derive(Debug)]
pub struct FastOp {
    name: String,
    /// Replays by input layout key; `None`: that layout is not replayable.
    table: Mutex<HashMap<Vec<u64>, Option<Arc<foreign::Replay>>>>,
}

#[pymethods]
impl FastOp {
    #[new]
    fn new(name: &str) -> PyResult<FastOp> {
        replay_op(name, 0.0)?;
        Ok(FastOp {
            name: name.to_string(),
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
        let op = replay_op(&self.name, eps)?;
        let names = op.tensor_names();
        let mut inputs = Vec::with_capacity(3);
        for t in [Some(a), b, c].into_iter().flatten() {
            inputs.push(ex.describe(t)?);
        }
        if inputs.len() + 1 != names.len() {
            return Err(crate::CutileError::new_err(format!(
                "{}: takes {} input tensors ({}), got {}",
                self.name,
                names.len() - 1,
                names[..names.len() - 1].join(", "),
                inputs.len()
            )));
        }
        let device = inputs[0].device;
        let mut key = Vec::with_capacity(4 + 12 * inputs.len());
        key.push(u64::from(eps.to_bits()));
        for t in &inputs {
            let Some(dtype) = t.dtype else {
                return Ok(None);
            };
            if t.device.device_type != KDL_CUDA || t.device.device_id != device.device_id {
                return Ok(None);
            }
            key.extend([dtype_word(dtype), t.shape.len() as u64, t.ptr & 0xff]);
            key.extend(t.shape.iter().chain(&t.strides).map(|&v| v as u64));
        }
        key.push(device.device_id as u64);
        let Some(out_shape) = output_shape(op, &inputs) else {
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
        let dtype = inputs[0].dtype.unwrap_or(ScalarType::F32);
        let (out, y) = ex.empty(py, &out_shape, dtype, device)?;
        let stream = ex.current_stream(py, device.device_id)?;
        let mut addresses: Vec<u64> = inputs.iter().map(|t| t.ptr).collect();
        addresses.push(y.ptr);
        let ordinal = usize::try_from(device.device_id).unwrap_or(usize::MAX);
        let replay = match entry {
            Some(Some(r)) => r,
            _ => {
                let tensors: Vec<RawTensor> = inputs
                    .iter()
                    .chain([&y])
                    .zip(names)
                    .map(|(t, &name)| RawTensor {
                        name,
                        ptr: t.ptr,
                        shape: t.shape.clone(),
                        strides: t.strides.clone(),
                        dtype: t.dtype.unwrap_or(dtype),
                    })
                    .collect();
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
        if !replay.accepts(&addresses) {
            return Ok(None);
        }
        // SAFETY: the inputs are torch tensors the caller holds for the call and the output is the
        // new tensor `out`, laid out as when the replay was prepared (the key); torch's caching
        // allocator keeps their memory until the work queued on its current stream has run.
        guarded(py, || unsafe { replay.enqueue(stream, &addresses) })?;
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
