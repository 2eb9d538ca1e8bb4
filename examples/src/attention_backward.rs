//! The attention backward (`attention_backward`) as a [`Workload`]: a call needs the forward's output and
//! its f32 LSE besides the element type's tensors, so it has its own upload and call here, as the prefill
//! variants do; comparison and timing are the workload's.
//!
//! Inputs (logical, f32 host values rounded to the element type): `q, k, v, d_o` (`d_o` has `q`'s shape).
//! A run first calls the forward with LSE ([`attention::attention_with`], untimed) for `o` and `lse`,
//! then the backward (timed when asked). Outputs: `dq` (`q`'s shape), `dk`, `dv` (`k`'s shape), against
//! [`attention::attention_backward_reference`] (an f64 forward and backward from `q, k, v, d_o`).
//!
//! FLOPs: 2.5× the forward's (`4 · pairs · D`), i.e. five `2 · pairs · D` products (`Q Kᵀ`, `dO Vᵀ`,
//! `Pᵀ dO`, `dSᵀ Q`, `dS K`): the FlashAttention convention. The kernels do seven (`Q Kᵀ` and `dO Vᵀ`
//! are recomputed by the dQ kernel), which the convention does not count.

use cutile::launch::Pending;
use cutile::runtime::timing::Stats;
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_kernels::attention::{self, AttentionOptions, Extras};
use cutile_kernels::op::CallSpec;

use crate::BoxError;
use crate::data::{Dt, uniform};
use crate::launch_times::Timing;
use crate::workload::{HostTensor, OutputSpec};

fn numel(s: &[i64]) -> usize {
    s.iter().product::<i64>().max(0) as usize
}

/// Whether `op` is the backward op.
pub fn covers(op: &str) -> bool {
    op == attention::BACKWARD_OP
}

/// q's and k's shapes of the call.
fn shapes(call: &CallSpec) -> Result<(Vec<i64>, Vec<i64>), BoxError> {
    match call.shapes.as_slice() {
        [q, k] if q.len() == k.len() && (q.len() == 3 || q.len() == 4) => {
            Ok((q.clone(), k.clone()))
        }
        s => Err(format!(
            "{}: lists {}, got {s:?}",
            call.op,
            attention::BACKWARD_INPUTS
        )
        .into()),
    }
}

fn options(call: &CallSpec) -> AttentionOptions {
    AttentionOptions {
        causal: call.causal,
        ..Default::default()
    }
}

/// The outputs: `dq`, `dk`, `dv`.
pub fn outputs(call: &CallSpec) -> Result<Vec<OutputSpec>, BoxError> {
    let (q, k) = shapes(call)?;
    let o = |name, shape| OutputSpec {
        name,
        shape,
        f32: false,
    };
    Ok(vec![o("dq", q), o("dk", k.clone()), o("dv", k)])
}

/// The forward call a run makes first (LSE on, no other variant): a bundle that serves the backward
/// must hold its kernels too (`Workload::plans`).
pub fn forward_call(call: &CallSpec) -> Result<CallSpec, BoxError> {
    let (q, k) = shapes(call)?;
    Ok(CallSpec {
        op: attention::PREFILL_OP.to_string(),
        dtype: call.dtype.clone(),
        shapes: vec![q, k, attention::spec_flags(&options(call), false, true)],
        causal: call.causal,
    })
}

/// 2.5× the forward's FLOPs (see the module docs).
pub fn flops(call: &CallSpec) -> Result<f64, BoxError> {
    let (q, k) = shapes(call)?;
    let r = q.len();
    let (sq, sk, d) = (q[r - 2], k[r - 2], q[r - 1]);
    let slices: i64 = q[..r - 2].iter().product();
    let pairs: f64 = if call.causal {
        (0..sq).map(|i| (i + 1).min(sk) as f64).sum()
    } else {
        (sq * sk) as f64
    };
    Ok(2.5 * 4.0 * slices as f64 * pairs * d as f64)
}

/// The call's logical inputs `q, k, v, d_o`, uniform in ±1 from `seed` (the workload's is 0).
pub fn inputs(dt: Dt, call: &CallSpec, seed: u64) -> Result<Vec<HostTensor>, BoxError> {
    let (q, k) = shapes(call)?;
    let base = seed.wrapping_mul(4).wrapping_add(51);
    let r = |s: &[i64], i: u64| -> HostTensor {
        (
            dt.round(&uniform(numel(s), -1.0, 1.0, base.wrapping_add(i))),
            s.to_vec(),
        )
    };
    Ok(vec![r(&q, 0), r(&k, 1), r(&k, 2), r(&q, 3)])
}

/// The expected `[dq, dk, dv]` from the logical inputs.
pub fn reference(call: &CallSpec, i: &[HostTensor]) -> Result<Vec<Vec<f32>>, BoxError> {
    let (q, k) = shapes(call)?;
    let r = q.len();
    let (b, h, hkv) = if r == 4 {
        (q[0], q[1], k[1])
    } else {
        (q[0], 1, 1)
    };
    if i.len() != 4 {
        return Err(format!("{}: takes q, k, v, d_o", call.op).into());
    }
    let g = attention::attention_backward_reference(
        &i[0].0,
        &i[1].0,
        &i[2].0,
        &i[3].0,
        (b as usize, h as usize, hkv as usize),
        q[r - 2] as usize,
        k[r - 2] as usize,
        q[r - 1] as usize,
        &options(call),
    );
    Ok(vec![g.dq, g.dk, g.dv])
}

struct Instance<T: DeviceElement> {
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    d_o: Tensor<T>,
    o: Tensor<T>,
    lse: Tensor<f32>,
    dq: Tensor<T>,
    dk: Tensor<T>,
    dv: Tensor<T>,
    options: AttentionOptions,
}

fn upload<T: DeviceElement>(
    dev: &Device,
    stream: &Stream,
    call: &CallSpec,
    i: &[HostTensor],
) -> Result<Instance<T>, BoxError> {
    let (q, k) = shapes(call)?;
    let typed = |n: usize| -> Result<Tensor<T>, BoxError> {
        let h: Vec<T> = i[n].0.iter().map(|&x| T::from_f64(x as f64)).collect();
        Ok(Tensor::from_host(dev, &h, &i[n].1)?)
    };
    let options = options(call);
    let mut inst = Instance {
        q: typed(0)?,
        k: typed(1)?,
        v: typed(2)?,
        d_o: typed(3)?,
        o: Tensor::zeros(dev, &q)?,
        lse: Tensor::zeros(dev, &q[..q.len() - 1])?,
        dq: Tensor::zeros(dev, &q)?,
        dk: Tensor::zeros(dev, &k)?,
        dv: Tensor::zeros(dev, &k)?,
        options,
    };
    // The forward with its LSE: what the backward takes.
    let extras = Extras {
        sinks: None,
        lse: Some(&mut inst.lse),
    };
    attention::attention_with(
        stream,
        &inst.q,
        &inst.k,
        &inst.v,
        &inst.options,
        extras,
        &mut inst.o,
    )?
    .wait()?;
    Ok(inst)
}

fn call<'a, T: DeviceElement>(
    stream: &'a Stream,
    inst: &'a mut Instance<T>,
) -> Result<Pending<'a>, BoxError> {
    Ok(attention::attention_backward(
        stream,
        &inst.q,
        &inst.k,
        &inst.v,
        &inst.o,
        &inst.d_o,
        &inst.lse,
        &inst.options,
        &mut inst.dq,
        &mut inst.dk,
        &mut inst.dv,
    )?)
}

fn down<T: DeviceElement>(t: &Tensor<T>) -> Result<Vec<f32>, BoxError> {
    Ok(t.to_host()?
        .into_iter()
        .map(|v| v.to_f64() as f32)
        .collect())
}

fn run_typed<T: DeviceElement>(
    dev: &Device,
    stream: &Stream,
    call_spec: &CallSpec,
    i: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<Stats>), BoxError> {
    let mut inst = upload::<T>(dev, stream, call_spec, i)?;
    call(stream, &mut inst)?.wait()?;
    let outs = vec![down(&inst.dq)?, down(&inst.dk)?, down(&inst.dv)?];
    let stats = crate::launch_times::time_queued(stream, timing, || {
        std::mem::forget(call(stream, &mut inst)?);
        Ok(())
    })?;
    stream.synchronize()?;
    Ok((outs, stats))
}

/// Runs the call once on `inputs` (and, with `timing`, times the backward): `[dq, dk, dv]` read back,
/// and the timing.
pub fn run(
    dev: &Device,
    stream: &Stream,
    dt: Dt,
    call: &CallSpec,
    inputs: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<Stats>), BoxError> {
    match dt {
        Dt::BF16 => run_typed::<half::bf16>(dev, stream, call, inputs, timing),
        Dt::F16 => run_typed::<half::f16>(dev, stream, call, inputs, timing),
        Dt::F32 => Err("attention_backward takes bf16 or f16".into()),
    }
}
