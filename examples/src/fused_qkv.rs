//! `fused_qkv` as a [`Workload`]: its tensors mix the element type with i32/i64 index tensors and f32
//! RoPE tables, so it has its own host data, upload and call here; the comparison and the timing are
//! the workload's ([`crate::run`]).
//!
//! Inputs (logical, f32 host values; integers exact): `x, w, bias, q_norm, k_norm, cos, sin, positions,
//! index_a, index_b, k_cache, v_cache` with the shapes of [`fused_qkv::described_call`] (the caches
//! hold their old contents and are updated in place); outputs `q, k_cache, v_cache`. Positions are
//! out of order; a paged call's slot mapping is a random injection with every eighth token skipped
//! (−1), a contiguous call writes a permutation of the sequence's positions. With
//! [`Layout::TransposedB`] the weight is stored as PyTorch `Linear`'s `[N, hidden]` and passed as its
//! transposed view.

use cutile::launch::{Pending, TensorArg};
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_ir::ScalarType;
use cutile_kernels::fused_qkv::{self, CacheIndex, KvCache, QkvLayer, QkvReference, Rope, slot};
use cutile_kernels::op::CallSpec;

use crate::BoxError;
use crate::data::{Dt, swap_axes, uniform};
use crate::workload::{HostTensor, Layout, Workload};

fn numel(s: &[i64]) -> usize {
    s.iter().product::<i64>().max(0) as usize
}

/// A deterministic shuffle of `0..n` (a small LCG; the data must not depend on a crate's RNG stream).
pub fn shuffle(n: usize, seed: u64) -> Vec<i64> {
    let mut v: Vec<i64> = (0..n as i64).collect();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, ((s >> 33) % (i as u64 + 1)) as usize);
    }
    v
}

/// The call's logical inputs (see the module docs).
pub fn inputs(dt: Dt, call: &CallSpec) -> Result<Vec<HostTensor>, BoxError> {
    let (ops, opts) = fused_qkv::described_call(dt.scalar(), &call.shapes)?;
    let shape = |i: usize| ops[i].shape.clone();
    let t = ops[slot::X].shape[0] as usize;
    let hidden = ops[slot::X].shape[1].max(1) as f64;
    let r = |i: usize, seed: u64, lo: f64, hi: f64| -> HostTensor {
        (dt.round(&uniform(numel(&shape(i)), lo, hi, seed)), shape(i))
    };
    let w_range = 1.0 / hidden.sqrt();
    let [max_pos, half] = [ops[slot::COS].shape[0], ops[slot::COS].shape[1]];
    let rot = 2 * half;
    let (mut cos, mut sin) = (Vec::new(), Vec::new());
    for p in 0..max_pos {
        for i in 0..half {
            let a = p as f64 / 10000f64.powf(2.0 * i as f64 / rot as f64);
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    // Distinct while T ≤ max_pos, repeating beyond (a prefill longer than the table).
    let order = shuffle(max_pos as usize, 31);
    let positions: Vec<f32> = (0..t)
        .map(|i| order.get(i % order.len().max(1)).copied().unwrap_or(0) as f32)
        .collect();
    let cache = shape(slot::K_CACHE);
    let (a, b): (Vec<f32>, Vec<f32>) = if opts.paged {
        let slots = shuffle((cache[0] * cache[1]) as usize, 32);
        let a = (0..t)
            .map(|i| if i % 8 == 7 { -1.0 } else { slots[i] as f32 })
            .collect::<Vec<_>>();
        (a.clone(), a)
    } else {
        let pos = shuffle(cache[2] as usize, 33);
        (vec![0.0; t], pos[..t].iter().map(|&p| p as f32).collect())
    };
    let tn = vec![t as i64];
    Ok(vec![
        r(slot::X, 21, -1.0, 1.0),
        r(slot::W, 22, -w_range, w_range),
        r(slot::BIAS, 23, -0.5, 0.5),
        r(slot::Q_NORM, 24, 0.5, 1.5),
        r(slot::K_NORM, 25, 0.5, 1.5),
        (cos, shape(slot::COS)),
        (sin, shape(slot::SIN)),
        (positions, tn.clone()),
        (a, tn.clone()),
        (b, tn),
        r(slot::K_CACHE, 26, -1.0, 1.0),
        r(slot::V_CACHE, 27, -1.0, 1.0),
    ])
}

/// The expected `[q, k_cache, v_cache]` from the logical inputs.
pub fn reference(dt: Dt, call: &CallSpec, i: &[HostTensor]) -> Result<Vec<Vec<f32>>, BoxError> {
    let (ops, opts) = fused_qkv::described_call(dt.scalar(), &call.shapes)?;
    if i.len() != 12 {
        return Err(format!("fused_qkv: 12 inputs expected, got {}", i.len()).into());
    }
    let ints = |k: usize| -> Vec<i64> { i[k].0.iter().map(|&v| v as i64).collect() };
    let (positions, a, b) = (ints(7), ints(8), ints(9));
    let q = &ops[slot::Q].shape;
    let cache = &ops[slot::K_CACHE].shape;
    let r = QkvReference {
        x: &i[0].0,
        w: &i[1].0,
        bias: opts.bias.then_some(&i[2].0[..]),
        q_norm: opts.norm.then_some(&i[3].0[..]),
        k_norm: opts.norm.then_some(&i[4].0[..]),
        eps: opts.eps,
        cos: &i[5].0,
        sin: &i[6].0,
        positions: &positions,
        style: opts.style,
        rot: 2 * ops[slot::COS].shape[1] as usize,
        hidden: ops[slot::X].shape[1] as usize,
        hq: q[1] as usize,
        hkv: if opts.paged { cache[2] } else { cache[1] } as usize,
        d: q[2] as usize,
    };
    let index = if opts.paged {
        CacheIndex::Paged {
            slot: &a,
            block_size: cache[1] as usize,
        }
    } else {
        CacheIndex::Contiguous {
            batch: &a,
            pos: &b,
            max_seq: cache[2] as usize,
        }
    };
    let (mut k, mut v) = (i[10].0.clone(), i[11].0.clone());
    let q = fused_qkv::fused_qkv_reference(&r, &index, &mut k, &mut v);
    Ok(vec![q, k, v])
}

/// An index tensor of the call's index type.
enum Ints {
    I32(Tensor<i32>),
    I64(Tensor<i64>),
}

impl Ints {
    fn new(dev: &Device, v: &[f32], wide: bool) -> Result<Ints, BoxError> {
        let n = [v.len() as i64];
        Ok(if wide {
            let v: Vec<i64> = v.iter().map(|&x| x as i64).collect();
            Ints::I64(Tensor::from_host(dev, &v, &n)?)
        } else {
            let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            Ints::I32(Tensor::from_host(dev, &v, &n)?)
        })
    }

    fn arg(&self) -> &dyn TensorArg {
        match self {
            Ints::I32(t) => t,
            Ints::I64(t) => t,
        }
    }
}

/// One call's device tensors but the weight (`q` and the caches last).
struct Instance<T: DeviceElement> {
    /// `x`, `bias`, `q_norm`, `k_norm`.
    typed: Vec<Tensor<T>>,
    tables: [Tensor<f32>; 2],
    ints: [Ints; 3],
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    opts: fused_qkv::QkvOptions,
}

/// The call's tensors, and apart from them (so that a view of it can be held beside the caches'
/// mutable borrow) the weight: `[hidden, N]`, or `[N, hidden]` when `linear`.
fn upload<T: DeviceElement>(
    dev: &Device,
    w: &Workload,
    i: &[HostTensor],
    linear: bool,
) -> Result<(Instance<T>, Tensor<T>), BoxError> {
    let (ops, opts) = fused_qkv::described_call(w.dt()?.scalar(), &w.call.shapes)?;
    let typed = |(data, shape): &HostTensor| -> Result<Tensor<T>, BoxError> {
        let h: Vec<T> = data.iter().map(|&v| T::from_f64(v as f64)).collect();
        Ok(Tensor::from_host(dev, &h, shape)?)
    };
    let weight = if linear {
        let (data, shape) = &i[slot::W];
        typed(&swap_axes(data, shape, 0, 1))?
    } else {
        typed(&i[slot::W])?
    };
    let wide = ops[slot::POSITIONS].dtype == ScalarType::I64;
    let inst = Instance {
        typed: [slot::X, slot::BIAS, slot::Q_NORM, slot::K_NORM]
            .iter()
            .map(|&k| typed(&i[k]))
            .collect::<Result<_, _>>()?,
        tables: [
            Tensor::from_host(dev, &i[5].0, &i[5].1)?,
            Tensor::from_host(dev, &i[6].0, &i[6].1)?,
        ],
        ints: [
            Ints::new(dev, &i[7].0, wide)?,
            Ints::new(dev, &i[8].0, wide)?,
            Ints::new(dev, &i[9].0, wide)?,
        ],
        q: Tensor::zeros(dev, &ops[slot::Q].shape)?,
        k: typed(&i[10])?,
        v: typed(&i[11])?,
        opts,
    };
    Ok((inst, weight))
}

/// Queues one call on `stream` with `weight` (`[hidden, N]`, or a view of it).
fn call<'a, T: DeviceElement>(
    stream: &'a Stream,
    inst: &'a mut Instance<T>,
    weight: &'a dyn TensorArg,
) -> Result<Pending<'a>, BoxError> {
    let o = inst.opts;
    let [x, bias, qn, kn] = &inst.typed[..] else {
        return Err("fused_qkv: four typed inputs expected".into());
    };
    let layer = QkvLayer {
        weight,
        bias: o.bias.then_some(bias as &dyn TensorArg),
        q_norm: o.norm.then_some(qn as &dyn TensorArg),
        k_norm: o.norm.then_some(kn as &dyn TensorArg),
        eps: o.eps,
    };
    let rope = Rope {
        cos: &inst.tables[0],
        sin: &inst.tables[1],
        style: o.style,
    };
    let [pos, a, b] = &inst.ints;
    let cache = if o.paged {
        KvCache::Paged {
            k: &mut inst.k,
            v: &mut inst.v,
            slot_mapping: a.arg(),
        }
    } else {
        KvCache::Contiguous {
            k: &mut inst.k,
            v: &mut inst.v,
            batch: a.arg(),
            pos: b.arg(),
        }
    };
    Ok(fused_qkv::fused_qkv(
        stream,
        x,
        pos.arg(),
        &layer,
        &rope,
        &mut inst.q,
        cache,
        o.path,
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
    w: &Workload,
    i: &[HostTensor],
    timing: crate::launch_times::Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<cutile::runtime::timing::Stats>), BoxError> {
    let linear = w.layout == Layout::TransposedB;
    let (mut inst, stored) = upload::<T>(dev, w, i, linear)?;
    let view = linear.then(|| stored.transpose(0, 1)).transpose()?;
    let weight: &dyn TensorArg = match &view {
        Some(v) => v,
        None => &stored,
    };
    call(stream, &mut inst, weight)?.wait()?;
    let outs = vec![down(&inst.q)?, down(&inst.k)?, down(&inst.v)?];
    let stats = crate::launch_times::time_queued(stream, timing, || {
        std::mem::forget(call(stream, &mut inst, weight)?);
        Ok(())
    })?;
    stream.synchronize()?;
    Ok((outs, stats))
}

/// Runs the call once on `inputs` (and, with `timing`, times it): `[q, k_cache, v_cache]` read back,
/// and the timing.
pub fn run(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: &[HostTensor],
    timing: crate::launch_times::Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<cutile::runtime::timing::Stats>), BoxError> {
    match w.dt()? {
        Dt::BF16 => run_typed::<half::bf16>(dev, stream, w, inputs, timing),
        Dt::F16 => run_typed::<half::f16>(dev, stream, w, inputs, timing),
        Dt::F32 => Err("fused_qkv takes bf16 or f16".into()),
    }
}
