//! The attention prefill variants (`attention_prefill`, `attention_varlen`) as a [`Workload`]: their calls
//! mix the element type with i32 sequence offsets and f32 sinks and LSE, so they have their own host
//! data, upload and call here, as `fused_qkv` does; comparison and timing are the workload's.
//!
//! Inputs (logical, f32 host values; offsets exact): `q, k, v`, then for varlen `cu_seqlens_q,
//! cu_seqlens_k`, then `sinks` when the call has them. Outputs: `o`, then `lse` (f32) when asked.

use cutile::launch::Pending;
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_kernels::attention::{self, Extras, VariantCall, VarlenBatch};
use cutile_kernels::op::CallSpec;

use crate::BoxError;
use crate::data::{Dt, uniform};
use crate::launch_times::Timing;
use crate::workload::{HostTensor, OutputSpec, Workload};

fn numel(s: &[i64]) -> usize {
    s.iter().product::<i64>().max(0) as usize
}

/// The decoded call and its q and k shapes (`[B, H, S, D]` or `[total, H, D]`).
pub fn decode(dt: Dt, call: &CallSpec) -> Result<(VariantCall, Vec<i64>, Vec<i64>), BoxError> {
    let (ops, vc, _) = attention::described_call(&call.op, dt.scalar(), &call.shapes, call.causal)?;
    Ok((vc, ops[0].shape.clone(), ops[1].shape.clone()))
}

/// The outputs: `o` (q's shape) and, when asked, the f32 `lse`.
pub fn outputs(dt: Dt, call: &CallSpec) -> Result<Vec<OutputSpec>, BoxError> {
    let (vc, q, _) = decode(dt, call)?;
    let mut out = vec![OutputSpec {
        name: "o",
        shape: q.clone(),
        f32: false,
    }];
    if vc.lse {
        let shape = match &vc.batch {
            Some(_) => vec![q[1], q[0]],
            None => q[..q.len() - 1].to_vec(),
        };
        out.push(OutputSpec {
            name: "lse",
            shape,
            f32: true,
        });
    }
    Ok(out)
}

/// Multiply-adds ×4 of the visible (query, key) pairs (two matmuls of 2 flops each).
pub fn flops(dt: Dt, call: &CallSpec) -> Result<f64, BoxError> {
    let (vc, q, k) = decode(dt, call)?;
    let o = &vc.options;
    let visible = |sq: i64, sk: i64| -> f64 {
        let shift = o.query_offset + if o.bottom_right { sk - sq } else { 0 };
        (0..sq)
            .map(|i| {
                let pos = i + shift;
                let hi = if o.causal { (pos + 1).clamp(0, sk) } else { sk };
                let lo = o.window.map_or(0, |w| (pos - i64::from(w)).clamp(0, sk));
                (hi - lo).max(0) as f64
            })
            .sum()
    };
    Ok(match &vc.batch {
        Some(b) => {
            let pairs: f64 = b
                .seqlens_q
                .iter()
                .zip(&b.seqlens_k)
                .map(|(&a, &c)| visible(a as i64, c as i64))
                .sum();
            4.0 * pairs * (q[1] * q[2]) as f64
        }
        None => {
            let r = q.len();
            let slices: i64 = q[..r - 2].iter().product();
            4.0 * slices as f64 * visible(q[r - 2], k[r - 2]) * q[r - 1] as f64
        }
    })
}

/// The call's logical inputs (see the module docs).
pub fn inputs(dt: Dt, call: &CallSpec) -> Result<Vec<HostTensor>, BoxError> {
    let (vc, q, k) = decode(dt, call)?;
    let r = |s: &[i64], seed: u64, range: f64| -> HostTensor {
        (
            dt.round(&uniform(numel(s), -range, range, seed)),
            s.to_vec(),
        )
    };
    let mut out = vec![r(&q, 41, 2.0), r(&k, 42, 1.0), r(&k, 43, 1.0)];
    if let Some(b) = &vc.batch {
        for lens in [&b.seqlens_q, &b.seqlens_k] {
            let cu: Vec<f32> = VarlenBatch::cu(lens).iter().map(|&c| c as f32).collect();
            let n = cu.len() as i64;
            out.push((cu, vec![n]));
        }
    }
    if vc.sinks {
        // Heads are axis 1 of both `[B, H, S, D]` and `[total, H, D]`.
        let h = q[1];
        out.push((uniform(h as usize, -1.0, 2.0, 44), vec![h]));
    }
    Ok(out)
}

/// The expected `[o, lse?]` from the logical inputs.
pub fn reference(dt: Dt, call: &CallSpec, i: &[HostTensor]) -> Result<Vec<Vec<f32>>, BoxError> {
    let (vc, q, k) = decode(dt, call)?;
    let sinks = vc.sinks.then(|| i[i.len() - 1].0.as_slice());
    let (o, lse) = match &vc.batch {
        Some(b) => {
            let [h, hkv, d] = vc.heads;
            attention::varlen_reference(
                &i[0].0,
                &i[1].0,
                &i[2].0,
                b,
                h as usize,
                hkv as usize,
                d as usize,
                &vc.options,
                sinks,
            )
        }
        None => {
            let r = q.len();
            let (bb, h, hkv) = if r == 4 {
                (q[0], q[1], k[1])
            } else {
                (q[0], 1, 1)
            };
            attention::prefill_reference(
                &i[0].0,
                &i[1].0,
                &i[2].0,
                (bb as usize, h as usize, hkv as usize),
                q[r - 2] as usize,
                k[r - 2] as usize,
                q[r - 1] as usize,
                &vc.options,
                sinks,
            )
        }
    };
    Ok(if vc.lse { vec![o, lse] } else { vec![o] })
}

struct Instance<T: DeviceElement> {
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    cu: Option<[Tensor<i32>; 2]>,
    sinks: Option<Tensor<f32>>,
    o: Tensor<T>,
    lse: Option<Tensor<f32>>,
    vc: VariantCall,
}

fn upload<T: DeviceElement>(
    dev: &Device,
    w: &Workload,
    i: &[HostTensor],
) -> Result<Instance<T>, BoxError> {
    let (vc, q, _) = decode(w.dt()?, &w.call)?;
    let typed = |k: usize| -> Result<Tensor<T>, BoxError> {
        let h: Vec<T> = i[k].0.iter().map(|&x| T::from_f64(x as f64)).collect();
        Ok(Tensor::from_host(dev, &h, &i[k].1)?)
    };
    let cu = match &vc.batch {
        Some(_) => {
            let ints = |k: usize| -> Result<Tensor<i32>, BoxError> {
                let h: Vec<i32> = i[k].0.iter().map(|&x| x as i32).collect();
                Ok(Tensor::from_host(dev, &h, &i[k].1)?)
            };
            Some([ints(3)?, ints(4)?])
        }
        None => None,
    };
    let sinks = if vc.sinks {
        let s = &i[i.len() - 1];
        Some(Tensor::from_host(dev, &s.0, &s.1)?)
    } else {
        None
    };
    let lse = match outputs(w.dt()?, &w.call)?.get(1) {
        Some(l) => Some(Tensor::zeros(dev, &l.shape)?),
        None => None,
    };
    Ok(Instance {
        q: typed(0)?,
        k: typed(1)?,
        v: typed(2)?,
        cu,
        sinks,
        o: Tensor::zeros(dev, &q)?,
        lse,
        vc,
    })
}

fn call<'a, T: DeviceElement>(
    stream: &'a Stream,
    inst: &'a mut Instance<T>,
) -> Result<Pending<'a>, BoxError> {
    let extras = Extras {
        sinks: inst
            .sinks
            .as_ref()
            .map(|s| s as &dyn cutile::launch::TensorArg),
        lse: inst
            .lse
            .as_mut()
            .map(|l| l as &mut dyn cutile::launch::TensorArgMut),
    };
    Ok(match (&inst.cu, &inst.vc.batch) {
        (Some([cq, ck]), Some(b)) => attention::attention_varlen(
            stream,
            &inst.q,
            &inst.k,
            &inst.v,
            cq,
            ck,
            b.max_q(),
            &inst.vc.options,
            extras,
            &mut inst.o,
        )?,
        _ => attention::attention_with(
            stream,
            &inst.q,
            &inst.k,
            &inst.v,
            &inst.vc.options,
            extras,
            &mut inst.o,
        )?,
    })
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
    w: &Workload,
    i: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<cutile::runtime::timing::Stats>), BoxError> {
    let mut inst = upload::<T>(dev, w, i)?;
    call(stream, &mut inst)?.wait()?;
    let mut outs = vec![down(&inst.o)?];
    if let Some(l) = &inst.lse {
        outs.push(l.to_host()?);
    }
    let stats = crate::launch_times::time_queued(stream, timing, || {
        std::mem::forget(call(stream, &mut inst)?);
        Ok(())
    })?;
    stream.synchronize()?;
    Ok((outs, stats))
}

/// Runs the call once on `inputs` (and, with `timing`, times it): `[o, lse?]` read back, and the timing.
pub fn run(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<cutile::runtime::timing::Stats>), BoxError> {
    match w.dt()? {
        Dt::BF16 => run_typed::<half::bf16>(dev, stream, w, inputs, timing),
        Dt::F16 => run_typed::<half::f16>(dev, stream, w, inputs, timing),
        Dt::F32 => Err("the attention variants take bf16 or f16".into()),
    }
}

/// Whether `op` is one of the variant ops.
pub fn is_variant(op: &str) -> bool {
    op == attention::PREFILL_OP || op == attention::VARLEN_OP
}
