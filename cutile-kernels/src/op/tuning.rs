//! The bridge from a family's candidate configurations to [`cutile::tune`]: a [`DeviceTrial`] runs a
//! candidate's plan on the call's own inputs with the output redirected to scratch memory, reads it back
//! for the correctness gate, and times it with CUDA events (L2 flushed for memory-bound ops).
//!
//! A family calls [`choose`] with its default configuration first in the candidate list; the result is
//! the candidate to plan with. With `CUTILE_TUNE` unset or `off` this costs one enum check.

use cutile::runtime::timing::{FLUSH_BYTES, L2Flush, time_device};
use cutile::runtime::{Stream, Tensor};
use cutile::tune::{Choice, Trial, TrialError, TuneKey, TuneMode, Tuner};
use cutile_ir::ScalarType;

use super::{OpError, Operand, PlannedLaunch, execute};

/// A candidate configuration of an op: its tuner name and how it plans.
pub trait Candidate: Clone {
    fn name(&self) -> String;
}

/// Trial of an op's candidates on real operands: `plan` builds a candidate's launches for operands
/// whose output (`operands[output]`) points at scratch memory.
pub struct DeviceTrial<'s, C, P>
where
    P: Fn(&C, &[Operand]) -> Result<Vec<PlannedLaunch>, OpError>,
{
    stream: &'s Stream,
    operands: Vec<Operand>,
    output: usize,
    scratch: Tensor<u8>,
    span_elems: usize,
    tolerance: f64,
    memory_bound: bool,
    flush: Option<L2Flush>,
    plan: P,
    _c: std::marker::PhantomData<C>,
}

impl<C, P> std::fmt::Debug for DeviceTrial<'_, C, P>
where
    P: Fn(&C, &[Operand]) -> Result<Vec<PlannedLaunch>, OpError>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTrial")
            .field("operands", &self.operands)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

/// Elements between the first and one past the last element `o` addresses.
fn span(o: &Operand) -> usize {
    if o.shape.contains(&0) {
        return 0;
    }
    let last: i64 = o
        .shape
        .iter()
        .zip(&o.strides)
        .map(|(&d, &s)| (d - 1) * s.abs())
        .sum();
    last as usize + 1
}

fn to_f32(dtype: ScalarType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        ScalarType::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        ScalarType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        // Indices as numbers (exact below 2^24), not their bit patterns as floats.
        ScalarType::I64 => bytes
            .chunks_exact(8)
            .map(|b| {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                i64::from_le_bytes(w) as f32
            })
            .collect(),
        ScalarType::I32 => bytes
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32)
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    }
}

/// Relative L2 error of `got` against `want`; non-finite values must sit at the same places.
pub fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let (mut num, mut den) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        if !w.is_finite() || !g.is_finite() {
            if g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()) {
                return f64::INFINITY;
            }
            continue;
        }
        num += ((g - w) as f64).powi(2);
        den += (w as f64).powi(2);
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

impl<'s, C, P> DeviceTrial<'s, C, P>
where
    P: Fn(&C, &[Operand]) -> Result<Vec<PlannedLaunch>, OpError>,
{
    /// A trial over `operands`, whose operand `output` is redirected to the trial's own buffer, read
    /// back and compared. `tolerance` is the relative L2 error two configurations may differ by. Every
    /// other operand is kept as it is: a scratch operand the op also writes (e.g. softmax's per-split
    /// `stats`, [`super::scratch`]) stays the stream's scratch buffer, used in stream order.
    pub fn new(
        stream: &'s Stream,
        operands: &[Operand],
        output: usize,
        tolerance: f64,
        memory_bound: bool,
        plan: P,
    ) -> Result<Self, OpError> {
        let out = &operands[output];
        let span_elems = span(out);
        let bytes = span_elems * out.elem_bytes() as usize;
        let scratch = Tensor::<u8>::zeros(stream.device(), &[bytes.max(1) as i64])?;
        let mut ops = operands.to_vec();
        ops[output].ptr = scratch.device_ptr();
        let flush = if memory_bound {
            Some(L2Flush::new(stream.device(), FLUSH_BYTES)?)
        } else {
            None
        };
        Ok(DeviceTrial {
            stream,
            operands: ops,
            output,
            scratch,
            span_elems,
            tolerance,
            memory_bound,
            flush,
            plan,
            _c: std::marker::PhantomData,
        })
    }

    fn enqueue(&self, c: &C) -> Result<(), OpError> {
        let plan = (self.plan)(c, &self.operands)?;
        // SAFETY: the inputs are the caller's live tensors (borrowed for the whole tuning call) and the
        // output is our scratch buffer, which covers the output's span; the guard waits below.
        let pending = unsafe { execute(self.stream, &self.operands, &plan) }?;
        pending.wait()?;
        Ok(())
    }
}

impl<C: Candidate, P> Trial for DeviceTrial<'_, C, P>
where
    P: Fn(&C, &[Operand]) -> Result<Vec<PlannedLaunch>, OpError>,
{
    type Config = C;
    type Output = Vec<f32>;

    fn name(&self, config: &C) -> String {
        config.name()
    }

    fn run(&mut self, config: &C) -> Result<Vec<f32>, TrialError> {
        self.enqueue(config)?;
        let bytes = self.scratch.to_host()?;
        let out = &self.operands[self.output];
        let n = self.span_elems * out.elem_bytes() as usize;
        Ok(to_f32(out.dtype, &bytes[..n]))
    }

    fn agrees(&self, reference: &Vec<f32>, got: &Vec<f32>) -> bool {
        rel_l2(got, reference) <= self.tolerance
    }

    fn time(&mut self, config: &C) -> Result<f64, TrialError> {
        let plan = (self.plan)(config, &self.operands)?;
        let flush = if self.memory_bound {
            self.flush.as_mut()
        } else {
            None
        };
        let stats = time_device(self.stream, 3, 20, flush, || -> Result<(), TrialError> {
            // SAFETY: as in `enqueue`; `time_device` waits for each launch before the next.
            let p = unsafe { execute(self.stream, &self.operands, &plan) }?;
            std::mem::forget(p);
            Ok(())
        })?;
        Ok(stats.median_us * 1e-6)
    }
}

/// The tuning key of an op call on `stream`'s device for shape class `class`.
pub fn key(stream: &Stream, op: &str, class: String) -> TuneKey {
    let d = stream.device();
    let (major, minor) = d.compute_capability();
    TuneKey {
        device: d.name().to_string(),
        arch: format!("sm_{major}{minor}"),
        driver: cutile::runtime::driver()
            .map(|i| i.version.to_string())
            .unwrap_or_else(|_| "unknown".into()),
        toolchain: cutile::launch::key_toolchain_version(),
        op: op.to_string(),
        class,
    }
}

/// The candidate to use: `candidates[0]` (the default table's choice) unless tuning is on and another
/// candidate won (now or in the cache). `trial` is only built when a trial must run.
pub fn choose<'t, C: Candidate>(
    key: &TuneKey,
    candidates: &[C],
    trial: impl FnOnce() -> Result<Box<dyn Trial<Config = C, Output = Vec<f32>> + 't>, OpError>,
) -> Result<C, OpError> {
    let tuner = Tuner::global();
    let Some(default) = candidates.first() else {
        return Err(OpError::Unsupported {
            op: "tune",
            what: "no candidate configurations".into(),
        });
    };
    let choice = if tuner.needs_trial(key) {
        let mut t = trial()?;
        tuner.choose(key, Some(&mut BoxTrial(&mut *t)), candidates)?
    } else {
        tuner.choose::<BoxTrial<'_, C>>(key, None, candidates)?
    };
    Ok(match choice {
        Choice::Default => default.clone(),
        Choice::Cached(n) => candidates
            .iter()
            .find(|c| c.name() == n)
            .unwrap_or(default)
            .clone(),
        Choice::Tuned(o) => candidates.get(o.winner_index).unwrap_or(default).clone(),
    })
}

/// A `&mut dyn Trial` as a sized `Trial`.
struct BoxTrial<'t, C>(&'t mut dyn Trial<Config = C, Output = Vec<f32>>);

impl<C> Trial for BoxTrial<'_, C> {
    type Config = C;
    type Output = Vec<f32>;
    fn name(&self, c: &C) -> String {
        self.0.name(c)
    }
    fn run(&mut self, c: &C) -> Result<Vec<f32>, TrialError> {
        self.0.run(c)
    }
    fn agrees(&self, r: &Vec<f32>, g: &Vec<f32>) -> bool {
        self.0.agrees(r, g)
    }
    fn time(&mut self, c: &C) -> Result<f64, TrialError> {
        self.0.time(c)
    }
}

/// What every tunable host-API op does after validation: pick the configuration among `candidates`
/// (tuned on `operands` when `CUTILE_TUNE` asks; `output` is the operand the op writes), plan it with
/// `launches` and queue the launches on `stream`.
///
/// # Safety
/// `operands` must come from tensors borrowed for `'a` (the written one exclusively) covering what
/// `launches` addresses, as for [`execute`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn run_tuned<'a, C: Candidate>(
    stream: &'a Stream,
    operands: &[Operand],
    output: usize,
    op: &str,
    class: String,
    candidates: &[C],
    memory_bound: bool,
    launches: impl Fn(&C) -> Result<Vec<PlannedLaunch>, OpError>,
) -> Result<cutile::launch::Pending<'a>, OpError> {
    let dtype = operands[output].dtype;
    // With tuning off (the default) the table's choice is used: no key is built (a warm call's host
    // time is what this path costs).
    if Tuner::global().mode() == TuneMode::Off
        && let Some(default) = candidates.first()
    {
        let plan = launches(default)?;
        // SAFETY: the caller's contract.
        return unsafe { execute(stream, operands, &plan) };
    }
    let key = key(stream, op, class);
    let config = choose(&key, candidates, || {
        let trial = DeviceTrial::new(
            stream,
            operands,
            output,
            crate::tolerance(dtype),
            memory_bound,
            // Plans address operands by index, so the scratch output needs no new plan.
            |c: &C, _: &[Operand]| launches(c),
        )?;
        Ok(Box::new(trial))
    })?;
    let plan = launches(&config)?;
    // SAFETY: the caller's contract.
    unsafe { execute(stream, operands, &plan) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index outputs are compared as numbers: one differing index is a large error, not the
    /// difference of two denormal bit patterns.
    #[test]
    fn integer_outputs_read_as_numbers() {
        let le = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(
            to_f32(ScalarType::I64, &le(&[3, 70000, -1])),
            [3.0, 70000.0, -1.0]
        );
        let i32s: Vec<u8> = [5i32, -7].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(to_f32(ScalarType::I32, &i32s), [5.0, -7.0]);
        let (a, b) = (
            to_f32(ScalarType::I64, &le(&[1, 2, 3, 4])),
            to_f32(ScalarType::I64, &le(&[1, 2, 3, 5])),
        );
        assert!(rel_l2(&b, &a) > 0.1);
        // And they must agree exactly.
        assert_eq!(crate::tolerance(ScalarType::I64), 0.0);
        assert_eq!(crate::tolerance(ScalarType::I32), 0.0);
    }
}
