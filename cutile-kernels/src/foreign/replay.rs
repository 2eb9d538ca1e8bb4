//! Replaying a foreign call's launches for later calls of the same layouts: the low-overhead path a
//! binding (the Python package) takes for repeated eager calls.
//!
//! [`Replay::prepare`] runs one [`ReplayOp`] call once under [`capture`](crate::op::capture::capture)
//! with every tensor moved to a made-up address that keeps the low byte of its real address (the
//! alignment facts kernels are specialized for), and loads the kernels the captured plans name.
//! [`Replay::enqueue`] then queues those launches over new addresses: per launch one argument packing
//! and one driver call, with no validation, configuration choice or cache lookup left to do.
//!
//! A call whose plan addresses memory that is not one of its tensors (the stream's scratch) is not
//! replayable: `prepare` returns `None` and the caller runs the op itself. So does any call while the
//! tuner is on (a tuning trial launches, which a capture must not do).

use std::sync::Arc;

use cutile::launch::{Launcher, Prepared};
use cutile::runtime::{Device, Grid, Stream};
use cutile::tune::{TuneMode, Tuner};

use super::{ForeignStream, RawTensor, UnaryActivation};
use crate::op::capture::capture;
use crate::op::{OpError, Operand, PlannedLaunch, describe_at};

/// The calls a [`Replay`] can stand for, each with its scalars (fixed for the replay). Their tensors
/// are passed in the order of the matching `foreign` function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayOp {
    /// `[x, y]`, as [`super::softmax`].
    Softmax,
    /// `[x, weight, y]`, as [`super::rms_norm`].
    RmsNorm { eps: f32 },
    /// `[x, weight, bias, y]`, as [`super::layer_norm`].
    LayerNorm { eps: f32 },
    /// `[x, y]`, as [`super::silu_and_mul`].
    SiluAndMul,
    /// `[a, b, y]`, as [`super::swiglu`].
    Swiglu,
    /// `[x, y]`, as [`super::unary_activation`].
    Activation(UnaryActivation),
    /// `[a, b, c]`, as [`super::matmul`].
    Matmul,
}

impl ReplayOp {
    fn name(self) -> &'static str {
        match self {
            ReplayOp::Softmax => "softmax",
            ReplayOp::RmsNorm { .. } => "rms_norm",
            ReplayOp::LayerNorm { .. } => "layer_norm",
            ReplayOp::SiluAndMul => "silu_and_mul",
            ReplayOp::Swiglu => "swiglu",
            ReplayOp::Activation(_) => "activation",
            ReplayOp::Matmul => "matmul",
        }
    }

    /// The names of its tensors, in the order a replay takes them (those of the `foreign` function).
    pub fn tensor_names(self) -> &'static [&'static str] {
        match self {
            ReplayOp::Softmax | ReplayOp::SiluAndMul | ReplayOp::Activation(_) => &["x", "y"],
            ReplayOp::RmsNorm { .. } => &["x", "weight", "y"],
            ReplayOp::LayerNorm { .. } => &["x", "weight", "bias", "y"],
            ReplayOp::Swiglu => &["a", "b", "y"],
            ReplayOp::Matmul => &["a", "b", "c"],
        }
    }

    /// Runs the op's `foreign` function over `t` (in [`tensor_names`](Self::tensor_names) order).
    ///
    /// # Safety
    /// As the `foreign` function's (or: inside a capture, with `t` at made-up addresses).
    pub unsafe fn call(self, s: &ForeignStream, t: &[RawTensor]) -> Result<(), OpError> {
        // SAFETY: forwarded to the caller.
        unsafe {
            match self {
                ReplayOp::Softmax => super::softmax(s, &t[0], &t[1]),
                ReplayOp::RmsNorm { eps } => super::rms_norm(s, &t[0], &t[1], eps, &t[2]),
                ReplayOp::LayerNorm { eps } => {
                    super::layer_norm(s, &t[0], &t[1], &t[2], eps, &t[3])
                }
                ReplayOp::SiluAndMul => super::silu_and_mul(s, &t[0], &t[1]),
                ReplayOp::Swiglu => super::swiglu(s, &t[0], &t[1], &t[2]),
                ReplayOp::Activation(a) => super::unary_activation(s, &t[0], &t[1], a),
                ReplayOp::Matmul => super::matmul(s, &t[0], &t[1], &t[2]),
            }
        }
    }
}

/// Made-up addresses: tensor `i` at `MADE_UP | (i + 1) << SPAN_BITS` plus its real address's low
/// byte. `MADE_UP` (the top bit, a kernel-space address on every host CUDA runs on) keeps them apart
/// from any real device address, such as the stream's scratch. Plans may address an operand at an
/// offset into a tensor (a view), which stays below the next tensor's base as long as a tensor spans
/// less than `1 << SPAN_BITS` bytes.
const MADE_UP: u64 = 1 << 63;
const SPAN_BITS: u32 = 44;
/// The address bits a specialization or configuration choice may depend on (alignment up to 256 B).
const LOW_BITS: u64 = 0xff;

fn made_up(i: usize, real: u64) -> u64 {
    MADE_UP | ((i as u64 + 1) << SPAN_BITS) | (real & LOW_BITS)
}

/// One captured launch with its kernel loaded.
#[derive(Debug)]
struct Ready {
    prepared: Arc<Prepared>,
    plan: PlannedLaunch,
    /// Index into [`Replay::steps`]' operand sets.
    operands: usize,
    grid: Grid,
}

/// An operand of a captured plan: tensor `tensor` of the call, `delta` bytes in.
#[derive(Debug, Clone, Copy)]
struct Binding {
    tensor: usize,
    delta: u64,
}

/// The launches of one op call, ready to queue again over tensors at other addresses with the same
/// shapes, strides, element types, device and low address byte.
#[derive(Debug)]
pub struct Replay {
    op: ReplayOp,
    device: Device,
    /// The low address byte of each tensor at preparation.
    low: Vec<u64>,
    /// Per captured `execute` call: its operands and where each lies among the call's tensors.
    steps: Vec<(Vec<Operand>, Vec<Binding>)>,
    launches: Vec<Ready>,
}

impl Replay {
    /// Plans `op` over `tensors` (their addresses are not touched) on `s`'s device and loads its
    /// kernels. `None` when the call is not replayable (see the module header); an invalid call
    /// returns the op's own error.
    pub fn prepare(
        s: &ForeignStream,
        op: ReplayOp,
        tensors: &[RawTensor],
    ) -> Result<Option<Replay>, OpError> {
        let names = op.tensor_names();
        if tensors.len() != names.len() {
            return Err(OpError::Unsupported {
                op: op.name(),
                what: format!(
                    "a replay of it takes {} tensors ({}), got {}",
                    names.len(),
                    names.join(", "),
                    tensors.len()
                ),
            });
        }
        if Tuner::global().mode() != TuneMode::Off {
            return Ok(None);
        }
        let moved: Vec<RawTensor> = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| RawTensor {
                ptr: made_up(i, t.ptr),
                ..t.clone()
            })
            .collect();
        // SAFETY: inside the capture `execute` queues nothing, and the ops of `ReplayOp` reach their
        // tensors' memory only through `execute`; the made-up addresses are never dereferenced.
        let (result, captured) = capture(|| unsafe { op.call(s, &moved) });
        result?;
        let device = s.stream().device().clone();
        let mut steps = Vec::with_capacity(captured.len());
        let mut launches = Vec::new();
        for (index, c) in captured.into_iter().enumerate() {
            let mut bindings = Vec::with_capacity(c.operands.len());
            for o in &c.operands {
                let Some(b) = binding(o.ptr, &moved) else {
                    return Ok(None); // memory that is no tensor of the call (scratch)
                };
                bindings.push(b);
            }
            for plan in c.launches {
                // SAFETY: the arguments are only inspected (specialization and the cubin's loading);
                // nothing is launched.
                let args = unsafe { describe_at(&plan, &c.operands, |_, o| o.ptr) };
                let prepared = Launcher::new(plan.kernel.clone()).prepare(&device, &args)?;
                let name = plan.kernel.name();
                prepared.signature().check_args(name, &args)?;
                if let Some(grid) = prepared.signature().grid(name, &args)? {
                    launches.push(Ready {
                        prepared,
                        plan,
                        operands: index,
                        grid,
                    });
                }
            }
            steps.push((c.operands, bindings));
        }
        Ok(Some(Replay {
            op,
            device,
            low: tensors.iter().map(|t| t.ptr & LOW_BITS).collect(),
            steps,
            launches,
        }))
    }

    /// The op this replays.
    pub fn op(&self) -> ReplayOp {
        self.op
    }

    /// Whether tensors at `addresses` can take the replay: one address per tensor, each with the low
    /// byte its tensor had when prepared (what [`enqueue`](Self::enqueue) checks).
    pub fn accepts(&self, addresses: &[u64]) -> bool {
        addresses.len() == self.low.len()
            && addresses
                .iter()
                .zip(&self.low)
                .all(|(a, low)| a & LOW_BITS == *low)
    }

    /// Queues the launches on the raw stream `stream` of the replay's device, with tensor `i` of the
    /// prepared call at `addresses[i]`.
    ///
    /// # Safety
    /// `stream` must be a live stream of the device's primary context, and each address live device
    /// memory laid out as the prepared call's tensor (shape, strides, element type), kept alive until
    /// the queued work has run; outputs must not overlap inputs.
    pub unsafe fn enqueue(&self, stream: usize, addresses: &[u64]) -> Result<(), OpError> {
        if !self.accepts(addresses) {
            return Err(OpError::Unsupported {
                op: self.op.name(),
                what: format!(
                    "a replay prepared for {} tensors with address low bytes {:?} was given {:?}; \
                     prepare one for these tensors",
                    self.low.len(),
                    self.low,
                    addresses
                ),
            });
        }
        // SAFETY: the caller's contract.
        let stream = unsafe { Stream::from_raw(&self.device, stream) };
        for l in &self.launches {
            let (operands, bindings) = &self.steps[l.operands];
            // SAFETY: the caller's contract; each operand is its tensor's new address plus the
            // captured offset into it.
            let args = unsafe {
                describe_at(&l.plan, operands, |i, _| {
                    addresses[bindings[i].tensor].wrapping_add(bindings[i].delta)
                })
            };
            let packed = l.prepared.signature().pack(l.plan.kernel.name(), &args)?;
            // SAFETY: packed for this specialization from addresses the caller vouches for.
            unsafe { l.prepared.function().enqueue(&stream, l.grid, &packed) }?;
        }
        Ok(())
    }
}

/// Which tensor of the call the captured address `ptr` lies in, and how far in.
fn binding(ptr: u64, moved: &[RawTensor]) -> Option<Binding> {
    if ptr & MADE_UP == 0 {
        return None;
    }
    let tensor = usize::try_from((ptr & !MADE_UP) >> SPAN_BITS)
        .ok()?
        .checked_sub(1)?;
    let base = moved.get(tensor)?.ptr;
    Some(Binding {
        tensor,
        delta: ptr.checked_sub(base)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_addresses_keep_the_low_byte_and_map_back() {
        let t = |ptr| RawTensor {
            name: "x",
            ptr,
            shape: vec![4],
            strides: vec![1],
            dtype: cutile_ir::ScalarType::F32,
        };
        let real = [0x7f00_1234_5600u64, 0x7f00_0000_0a10];
        let moved: Vec<RawTensor> = real
            .iter()
            .enumerate()
            .map(|(i, &p)| t(made_up(i, p)))
            .collect();
        for (i, (m, r)) in moved.iter().zip(real).enumerate() {
            assert_eq!(m.ptr & LOW_BITS, r & LOW_BITS);
            let b = binding(m.ptr + 96, &moved).expect("a made-up address maps back");
            assert_eq!((b.tensor, b.delta), (i, 96));
        }
        // Scratch or any real device address is no tensor of the call, wherever it lies.
        assert!(binding(0x7f00_1234_5600, &moved).is_none());
        assert!(binding((1 << SPAN_BITS) + 64, &moved).is_none());
        assert!(binding(made_up(5, 0), &moved).is_none());
    }
}
