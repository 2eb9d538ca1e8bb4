//! The transformer and training ops (`rope`, `kv_cache_write`, `kv_cache_write_paged`, `embedding`,
//! `argmax`, `topk`, `rms_norm_backward`, `layer_norm_backward`, `dropout`, `dropout_backward`) as
//! [`Workload`]s: their tensors mix the element type with i32/i64 index tensors (and f32 RoPE tables
//! and norm statistics, i64 outputs) or have several outputs, so like `fused_qkv` they have their own
//! host data, upload and call here; the comparison and the timing are the workload's ([`crate::run`]).
//!
//! Inputs (logical f32 host values; integers exact), per op:
//! - `rope`: `q, k, cos, sin, positions` (positions a shuffle of the table, out of order); outputs
//!   `q_out, k_out` (in place calls update `q`, `k`);
//! - `kv_cache_write[_paged]`: `k, v, index(es), k_cache, v_cache` (the caches' old contents, updated in
//!   place); outputs the whole caches, so entries no token addresses are checked too. Paged slot
//!   mappings are a random injection with every eighth token −1; contiguous calls write distinct
//!   random (batch, position) pairs;
//! - `embedding`: `table, ids` (random ids, every 16th out of range → a zero row); output `out`;
//! - `argmax`, `topk`: `x` quantized to quarter steps so ties are common; outputs `out` / `values,
//!   indices` (the indices compared at the f32 tolerance: they must be exact);
//! - `rms_norm_backward`: `x, w, dy`; outputs `dx, dw`. `layer_norm_backward`: `x, w, dy` and the
//!   reference `mean, rstd` of `x` (f32); outputs `dx, dw, db`;
//! - `dropout`, `dropout_backward`: `x` (`dy`), with `dropout::SPEC_PARAMS`; output `y` (`dx`), whose
//!   reference uses the same Philox stream, so the mask is compared exactly;
//! - `fused_linear_cross_entropy`: `x` in [-1, 1], `w` in [-0.5, 0.5], `target` (random classes, every
//!   `ignore_every`-th of the spec's switches `ignore_index`); outputs `loss` (f32 [1]) and the
//!   gradients the switches ask for, `dx` and `dw` (f32 or the element type), compared at the element
//!   type's tolerance (the logits and `dlogits` are stored in it, as torch's `F.linear` output and
//!   its gradient; the reference rounds both the same way).

use cutile::runtime::timing::Stats;
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_ir::ScalarType;
use cutile_kernels::norm::backward::{self as norm_bwd, LAYER_NORM_BACKWARD, RMS_NORM_BACKWARD};
use cutile_kernels::op::{CallSpec, Operand};
use cutile_kernels::{cross_entropy, dropout, embedding, kv_cache, rope, sampling};

use crate::BoxError;
use crate::data::{Dt, uniform};
use crate::fused_qkv::shuffle;
use crate::workload::{HostTensor, Metric, OutputSpec, Workload};

/// Whether `op` is one of this module's.
pub fn covers(op: &str) -> bool {
    [
        rope::OP,
        kv_cache::OP,
        kv_cache::OP_PAGED,
        embedding::OP,
        sampling::ARGMAX,
        sampling::TOPK,
        RMS_NORM_BACKWARD,
        LAYER_NORM_BACKWARD,
        dropout::OP,
        dropout::BACKWARD,
        cross_entropy::OP,
    ]
    .contains(&op)
}

fn numel(s: &[i64]) -> usize {
    s.iter().product::<i64>().max(0) as usize
}

/// The call's described operands (shapes and types of every tensor, outputs included).
pub fn operands(dt: Dt, call: &CallSpec) -> Result<Vec<Operand>, BoxError> {
    let s = dt.scalar();
    Ok(match call.op.as_str() {
        rope::OP => rope::described_call(s, &call.shapes)?.0,
        kv_cache::OP | kv_cache::OP_PAGED => kv_cache::described_call(&call.op, s, &call.shapes)?,
        embedding::OP => embedding::described_call(s, &call.shapes)?,
        sampling::ARGMAX | sampling::TOPK => sampling::described_call(&call.op, s, &call.shapes)?,
        RMS_NORM_BACKWARD | LAYER_NORM_BACKWARD => {
            let x = call
                .shapes
                .first()
                .ok_or("a norm backward call lists [x]")?;
            norm_bwd::described_call(&call.op, s, x)?
        }
        dropout::OP | dropout::BACKWARD => dropout::described_call(&call.op, s, &call.shapes)?,
        cross_entropy::OP => cross_entropy::described_call(s, &call.shapes)?.0,
        other => return Err(format!("{other} is no transformer op").into()),
    })
}

fn in_place(call: &CallSpec) -> bool {
    call.op == rope::OP
        && call
            .shapes
            .get(2)
            .and_then(|f| f.get(2))
            .copied()
            .unwrap_or(0)
            != 0
}

/// How many leading operands are inputs (the rest are outputs, uploaded as zeros); the caches of a
/// KV-cache write and in-place RoPE's q, k are inputs updated in place.
fn n_inputs(call: &CallSpec, n: usize) -> usize {
    match call.op.as_str() {
        rope::OP => 5,
        kv_cache::OP | kv_cache::OP_PAGED => n,
        embedding::OP => 2,
        RMS_NORM_BACKWARD => 3,
        LAYER_NORM_BACKWARD => 5,
        cross_entropy::OP => 3,
        _ => 1,
    }
}

/// The outputs, in host-API order (indices at the f32 tolerance: exact).
pub fn outputs(dt: Dt, call: &CallSpec) -> Result<Vec<OutputSpec>, BoxError> {
    let ops = operands(dt, call)?;
    let o = |x: &Operand, name| OutputSpec {
        name,
        shape: x.shape.clone(),
        f32: x.dtype == ScalarType::I64,
    };
    Ok(match call.op.as_str() {
        rope::OP => vec![o(&ops[0], "q_out"), o(&ops[1], "k_out")],
        kv_cache::OP | kv_cache::OP_PAGED => {
            let n = ops.len();
            vec![o(&ops[n - 2], "k_cache"), o(&ops[n - 1], "v_cache")]
        }
        embedding::OP => vec![o(&ops[2], "out")],
        sampling::ARGMAX => vec![o(&ops[1], "out")],
        RMS_NORM_BACKWARD => vec![o(&ops[3], "dx"), o(&ops[4], "dw")],
        LAYER_NORM_BACKWARD => vec![o(&ops[5], "dx"), o(&ops[6], "dw"), o(&ops[7], "db")],
        dropout::OP | dropout::BACKWARD => vec![o(&ops[1], "y")],
        cross_entropy::OP => {
            let sw = cross_entropy::spec_switches(&call.shapes)?;
            // All at the element type's tolerance: the f32 loss and dw come from logits stored in it.
            let e = |x: &Operand, name| OutputSpec {
                name,
                shape: x.shape.clone(),
                f32: false,
            };
            let mut v = vec![e(&ops[3], "loss")];
            if sw.dx {
                v.push(e(&ops[4], "dx"));
            }
            if sw.dw {
                v.push(e(&ops[5], "dw"));
            }
            v
        }
        _ => vec![o(&ops[1], "values"), o(&ops[2], "indices")],
    })
}

/// Bytes read and written once by a call.
pub fn metric(dt: Dt, call: &CallSpec) -> Result<Metric, BoxError> {
    let ops = operands(dt, call)?;
    if call.op == cross_entropy::OP {
        // The products: logits, and dx / dw when asked for (2·T·V·H each).
        let sw = cross_entropy::spec_switches(&call.shapes)?;
        let (t, h, v) = (ops[0].shape[0], ops[0].shape[1], ops[1].shape[0]);
        let products = 1 + sw.dx as i64 + sw.dw as i64;
        return Ok(Metric::Flops(2.0 * (t * h * v * products) as f64));
    }
    let bytes = |o: &Operand| numel(&o.shape) as f64 * o.elem_bytes() as f64;
    Ok(Metric::Bytes(match call.op.as_str() {
        // q and k read and written (in place only the `rot` rotated lanes of each head move: the rest
        // is never touched); per token rot/2 cos and sin entries and one position.
        rope::OP => {
            let t = ops[0].shape[0] as f64;
            let (half, d) = (ops[2].shape[1] as f64, ops[0].shape[2] as f64);
            let moved = if in_place(call) { 2.0 * half / d } else { 1.0 };
            2.0 * (bytes(&ops[0]) + bytes(&ops[1])) * moved + t * half * 8.0 + bytes(&ops[4])
        }
        // k and v read, the same amount written into the caches, the indices read.
        kv_cache::OP | kv_cache::OP_PAGED => {
            let idx: f64 = ops[2..ops.len() - 2].iter().map(bytes).sum();
            2.0 * (bytes(&ops[0]) + bytes(&ops[1])) + idx
        }
        // The addressed rows read, out written, ids read.
        embedding::OP => 2.0 * bytes(&ops[2]) + bytes(&ops[1]),
        // x and dy read twice (dx pass, weight-gradient pass), dx written; vectors and stats ignored.
        RMS_NORM_BACKWARD | LAYER_NORM_BACKWARD => 5.0 * bytes(&ops[0]),
        // x read, y written.
        dropout::OP | dropout::BACKWARD => 2.0 * bytes(&ops[0]),
        // x read once (top-k rereads it k times, mostly from L2: counted once).
        _ => bytes(&ops[0]) + ops[1..].iter().map(bytes).sum::<f64>(),
    }))
}

/// The call's logical inputs (see the module docs).
pub fn inputs(dt: Dt, call: &CallSpec) -> Result<Vec<HostTensor>, BoxError> {
    let ops = operands(dt, call)?;
    let sh = |i: usize| ops[i].shape.clone();
    let r = |i: usize, seed: u64, range: f64| -> HostTensor {
        (
            dt.round(&uniform(numel(&sh(i)), -range, range, seed)),
            sh(i),
        )
    };
    let ints =
        |i: usize, v: Vec<i64>| -> HostTensor { (v.iter().map(|&x| x as f32).collect(), sh(i)) };
    Ok(match call.op.as_str() {
        rope::OP => {
            let [max_pos, half] = [ops[2].shape[0], ops[2].shape[1]];
            let (c, s) =
                rope::reference::cos_sin_cache(max_pos as usize, 2 * half as usize, 10000.0);
            let t = ops[0].shape[0] as usize;
            let order = shuffle(max_pos.max(1) as usize, 41);
            let pos: Vec<i64> = (0..t).map(|i| order[i % order.len()]).collect();
            vec![
                r(0, 42, 2.0),
                r(1, 43, 2.0),
                (c, sh(2)),
                (s, sh(3)),
                ints(4, pos),
            ]
        }
        kv_cache::OP_PAGED => {
            let t = ops[0].shape[0] as usize;
            let c = &ops[3].shape;
            let slots = shuffle((c[0] * c[1]) as usize, 44);
            let a: Vec<i64> = (0..t)
                .map(|i| {
                    if i % 8 == 7 || i >= slots.len() {
                        -1
                    } else {
                        slots[i]
                    }
                })
                .collect();
            vec![
                r(0, 45, 2.0),
                r(1, 46, 2.0),
                ints(2, a),
                r(3, 47, 1.0),
                r(4, 48, 1.0),
            ]
        }
        kv_cache::OP => {
            let t = ops[0].shape[0] as usize;
            let c = &ops[4].shape; // [B, Hkv, S, D]
            let entries = shuffle((c[0] * c[2]) as usize, 49);
            let pick = |i: usize| entries.get(i).copied();
            let batch: Vec<i64> = (0..t).map(|i| pick(i).map_or(-1, |e| e / c[2])).collect();
            let pos: Vec<i64> = (0..t).map(|i| pick(i).map_or(0, |e| e % c[2])).collect();
            vec![
                r(0, 50, 2.0),
                r(1, 51, 2.0),
                ints(2, batch),
                ints(3, pos),
                r(4, 52, 1.0),
                r(5, 53, 1.0),
            ]
        }
        embedding::OP => {
            let v = ops[0].shape[0];
            let t = ops[1].shape[0] as usize;
            let mut rng = cutile_testkit_free_rng(54);
            let ids: Vec<i64> = (0..t)
                .map(|i| {
                    if i % 16 == 5 {
                        v + i as i64
                    } else {
                        (rng() % v.max(1) as u64) as i64
                    }
                })
                .collect();
            vec![r(0, 55, 2.0), ints(1, ids)]
        }
        RMS_NORM_BACKWARD => vec![r(0, 57, 2.0), w_near_one(dt, &sh(1), 58), r(2, 59, 1.0)],
        LAYER_NORM_BACKWARD => {
            let x = r(0, 60, 2.0);
            let cols = *sh(0).last().unwrap_or(&1) as usize;
            let w = w_near_one(dt, &sh(1), 61);
            let zeros = vec![0.0; cols];
            let (_, mean, rstd) = cutile_kernels::norm::layer_norm_stats_reference(
                &x.0,
                &w.0,
                &zeros,
                crate::workload::EPS,
                cols,
            );
            vec![x, w, r(2, 62, 1.0), (mean, sh(3)), (rstd, sh(4))]
        }
        dropout::OP | dropout::BACKWARD => vec![r(0, 63, 2.0)],
        cross_entropy::OP => {
            let sw = cross_entropy::spec_switches(&call.shapes)?;
            let (t, v) = (ops[0].shape[0] as usize, ops[1].shape[0]);
            let mut rng = cutile_testkit_free_rng(66);
            let every = sw.ignore_every.max(0) as usize;
            let tg: Vec<i64> = (0..t)
                .map(|i| {
                    if every > 0 && i % every == every - 1 {
                        -100
                    } else {
                        (rng() % v.max(1) as u64) as i64
                    }
                })
                .collect();
            vec![r(0, 64, 1.0), r(1, 65, 0.5), ints(2, tg)]
        }
        _ => {
            let x = uniform(numel(&sh(0)), -8.0, 8.0, 56);
            let q: Vec<f32> = x.iter().map(|v| (v * 4.0).round() / 4.0).collect();
            vec![(dt.round(&q), sh(0))]
        }
    })
}

/// A norm weight in `[0.5, 1.5]`, rounded to the element type.
fn w_near_one(dt: Dt, shape: &[i64], seed: u64) -> HostTensor {
    let v = uniform(numel(shape), -0.5, 0.5, seed);
    (
        dt.round(&v.iter().map(|x| x + 1.0).collect::<Vec<_>>()),
        shape.to_vec(),
    )
}

/// A small deterministic u64 stream (an LCG), independent of any crate's RNG.
fn cutile_testkit_free_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 17
    }
}

fn as_i64(v: &[f32]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// The expected outputs ([`outputs`] order) from the logical inputs.
pub fn reference(dt: Dt, call: &CallSpec, i: &[HostTensor]) -> Result<Vec<Vec<f32>>, BoxError> {
    let ops = operands(dt, call)?;
    Ok(match call.op.as_str() {
        rope::OP => {
            let (opts_ops, opts) = rope::described_call(dt.scalar(), &call.shapes)?;
            let d = opts_ops[0].shape[2] as usize;
            let rot = 2 * opts_ops[2].shape[1] as usize;
            let pos = as_i64(&i[4].0);
            let (c, s) = (&i[2].0, &i[3].0);
            let q = rope::reference::rope(
                &i[0].0,
                ops[0].shape[1] as usize,
                d,
                c,
                s,
                &pos,
                rot,
                opts.style,
            );
            let k = rope::reference::rope(
                &i[1].0,
                ops[1].shape[1] as usize,
                d,
                c,
                s,
                &pos,
                rot,
                opts.style,
            );
            vec![q, k]
        }
        kv_cache::OP | kv_cache::OP_PAGED => {
            let n = ops.len();
            let (hkv, d) = (ops[0].shape[1] as usize, ops[0].shape[2] as usize);
            let (mut kc, mut vc) = (i[n - 2].0.clone(), i[n - 1].0.clone());
            let c = &ops[n - 2].shape;
            let a = as_i64(&i[2].0);
            let b = as_i64(&i[3.min(n - 3)].0);
            let (index, dims) = if call.op == kv_cache::OP_PAGED {
                (
                    kv_cache::reference::Index::Paged { slot: &a },
                    (c[0] as usize, c[1] as usize),
                )
            } else {
                (
                    kv_cache::reference::Index::Contiguous { batch: &a, pos: &b },
                    (c[0] as usize, c[2] as usize),
                )
            };
            kv_cache::reference::write(&i[0].0, &i[1].0, hkv, d, index, dims, &mut kc, &mut vc);
            vec![kc, vc]
        }
        embedding::OP => vec![embedding::reference::embedding(
            &i[0].0,
            ops[0].shape[1] as usize,
            &as_i64(&i[1].0),
        )],
        RMS_NORM_BACKWARD => {
            let cols = *ops[0].shape.last().unwrap_or(&1) as usize;
            let (dx, dw) = cutile_kernels::norm::rms_norm_backward_reference(
                &i[0].0,
                &i[1].0,
                &i[2].0,
                crate::workload::EPS,
                cols,
            );
            vec![dx, dw]
        }
        LAYER_NORM_BACKWARD => {
            let cols = *ops[0].shape.last().unwrap_or(&1) as usize;
            let (dx, dw, db) = cutile_kernels::norm::layer_norm_backward_reference(
                &i[0].0, &i[1].0, &i[2].0, &i[3].0, &i[4].0, cols,
            );
            vec![dx, dw, db]
        }
        dropout::OP | dropout::BACKWARD => {
            let p = dropout::SPEC_PARAMS;
            vec![dropout::reference::dropout(&i[0].0, p.p, p.seed, p.offset)]
        }
        cross_entropy::OP => {
            let sw = cross_entropy::spec_switches(&call.shapes)?;
            let (h, v) = (ops[0].shape[1] as usize, ops[1].shape[0] as usize);
            let round: fn(f64) -> f64 = match dt {
                Dt::BF16 => |x| half::bf16::from_f64(x).to_f64(),
                Dt::F16 => |x| half::f16::from_f64(x).to_f64(),
                Dt::F32 => |x| x as f32 as f64,
            };
            let red = if sw.sum {
                cross_entropy::Reduction::Sum
            } else {
                cross_entropy::Reduction::Mean
            };
            let r = cross_entropy::fused_linear_cross_entropy_reference(
                &i[0].0,
                &i[1].0,
                &as_i64(&i[2].0),
                h,
                v,
                -100,
                red,
                round,
            );
            let f = |x: &[f64]| x.iter().map(|&v| v as f32).collect::<Vec<_>>();
            let mut out = vec![vec![r.loss as f32]];
            if sw.dx {
                out.push(f(&r.dx));
            }
            if sw.dw {
                out.push(f(&r.dw));
            }
            out
        }
        sampling::ARGMAX => {
            let v = ops[0].shape[1] as usize;
            vec![
                sampling::reference::argmax(&i[0].0, v)
                    .iter()
                    .map(|&x| x as f32)
                    .collect(),
            ]
        }
        _ => {
            let v = ops[0].shape[1] as usize;
            let k = ops[1].shape[1] as usize;
            let (vals, idx) = sampling::reference::topk(&i[0].0, v, k);
            vec![vals, idx.iter().map(|&x| x as f32).collect()]
        }
    })
}

/// [`crate::workload::Workload::error_floor`] for these ops: for norm backward's `dx` (output 0),
/// `‖w · dy · rstd‖` over all rows, the size of the first of the two terms whose difference `dx` is
/// (exactly zero at widths 1 and 2, where the reference is rounding noise); 0 otherwise.
pub fn error_floor(call: &CallSpec, output: usize, i: &[HostTensor]) -> Result<f64, BoxError> {
    if output != 0 || !matches!(call.op.as_str(), RMS_NORM_BACKWARD | LAYER_NORM_BACKWARD) {
        return Ok(0.0);
    }
    let cols = call.shapes[0].last().copied().unwrap_or(1).max(1) as usize;
    let (x, w, dy) = (&i[0].0, &i[1].0, &i[2].0);
    let rstd = |row: usize| -> f64 {
        if call.op == LAYER_NORM_BACKWARD {
            i[4].0[row] as f64
        } else {
            let xs = &x[row * cols..(row + 1) * cols];
            let ms = xs.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            1.0 / (ms + crate::workload::EPS as f64).sqrt()
        }
    };
    let mut sum = 0f64;
    for row in 0..x.len() / cols {
        let r = rstd(row);
        for (j, &wj) in w.iter().enumerate().take(cols) {
            sum += (wj as f64 * dy[row * cols + j] as f64 * r).powi(2);
        }
    }
    Ok(sum.sqrt())
}

/// One device tensor of any of the call's element types.
enum Dev<T: DeviceElement> {
    T(Tensor<T>),
    F32(Tensor<f32>),
    I32(Tensor<i32>),
    I64(Tensor<i64>),
}

impl<T: DeviceElement> Dev<T> {
    fn up(dev: &Device, o: &Operand, h: &HostTensor) -> Result<Dev<T>, BoxError> {
        let (v, s) = h;
        Ok(match o.dtype {
            _ if ["cos", "sin", "mean", "rstd", "loss"].contains(&o.name)
                || (o.name == "dw" && o.dtype == ScalarType::F32) =>
            {
                Dev::F32(Tensor::from_host(dev, v, s)?)
            }
            ScalarType::I32 => Dev::I32(Tensor::from_host(
                dev,
                &v.iter().map(|&x| x as i32).collect::<Vec<_>>(),
                s,
            )?),
            ScalarType::I64 => Dev::I64(Tensor::from_host(dev, &as_i64(v), s)?),
            _ => Dev::T(Tensor::from_host(
                dev,
                &v.iter().map(|&x| T::from_f64(x as f64)).collect::<Vec<_>>(),
                s,
            )?),
        })
    }

    fn down(&self) -> Result<Vec<f32>, BoxError> {
        Ok(match self {
            Dev::T(t) => t
                .to_host()?
                .into_iter()
                .map(|x| x.to_f64() as f32)
                .collect(),
            Dev::F32(t) => t.to_host()?,
            Dev::I32(t) => t.to_host()?.into_iter().map(|x| x as f32).collect(),
            Dev::I64(t) => t.to_host()?.into_iter().map(|x| x as f32).collect(),
        })
    }
}

fn ty<T: DeviceElement>(d: &Dev<T>) -> Result<&Tensor<T>, BoxError> {
    match d {
        Dev::T(t) => Ok(t),
        _ => Err("expected a tensor of the element type".into()),
    }
}

fn ty_mut<T: DeviceElement>(d: &mut Dev<T>) -> Result<&mut Tensor<T>, BoxError> {
    match d {
        Dev::T(t) => Ok(t),
        _ => Err("expected a tensor of the element type".into()),
    }
}

/// A gradient output that is either f32 (`dw`/`db` of 16-bit inputs, or every f32 call: `Dev::up` puts an
/// f32 `dw` in `Dev::F32` whatever the element type) or of the element type.
fn grad_mut<T: DeviceElement>(
    d: &mut Dev<T>,
) -> Result<&mut dyn cutile::launch::TensorArgMut, BoxError> {
    match d {
        Dev::T(t) => Ok(t),
        Dev::F32(t) => Ok(t),
        _ => Err("a gradient must be f32 or of the element type".into()),
    }
}

fn table<T: DeviceElement>(d: &Dev<T>) -> Result<&Tensor<f32>, BoxError> {
    match d {
        Dev::F32(t) => Ok(t),
        _ => Err("expected an f32 table".into()),
    }
}

fn f32_mut<T: DeviceElement>(d: &mut Dev<T>) -> Result<&mut Tensor<f32>, BoxError> {
    match d {
        Dev::F32(t) => Ok(t),
        _ => Err("expected an f32 tensor".into()),
    }
}

fn i64_mut<T: DeviceElement>(d: &mut Dev<T>) -> Result<&mut Tensor<i64>, BoxError> {
    match d {
        Dev::I64(t) => Ok(t),
        _ => Err("expected an i64 output".into()),
    }
}

/// `$body` with `$n` the i32 or i64 tensor of `$d`.
macro_rules! index {
    ($d:expr, |$n:ident| $body:expr) => {
        match $d {
            Dev::I32($n) => $body,
            Dev::I64($n) => $body,
            _ => return Err("expected an index tensor".into()),
        }
    };
}

/// Queues one call on `stream` over the device tensors `d` (operand order); waits for it, or leaves it
/// queued (`wait = false`: the timing loop waits for its end event, and `d` outlives it).
fn call<T: DeviceElement>(
    stream: &Stream,
    w: &Workload,
    d: &mut [Dev<T>],
    wait: bool,
) -> Result<(), BoxError> {
    let style = rope::described_call(ScalarType::F32, &w.call.shapes)
        .map(|(_, o)| o.style)
        .unwrap_or(rope::RopeStyle::Neox);
    macro_rules! done {
        ($p:expr) => {{
            let p = $p?;
            if wait {
                p.wait()?;
            } else {
                std::mem::forget(p);
            }
        }};
    }
    match (w.op(), d) {
        (rope::OP, [q, k, c, s, p]) => {
            let (c, s) = (table(c)?, table(s)?);
            let (q, k) = (ty_mut(q)?, ty_mut(k)?);
            index!(p, |p| done!(rope::rope_(stream, q, k, c, s, &*p, style)))
        }
        (rope::OP, [q, k, c, s, p, qo, ko]) => {
            let (q, k, c, s) = (ty(q)?, ty(k)?, table(c)?, table(s)?);
            let (qo, ko) = (ty_mut(qo)?, ty_mut(ko)?);
            index!(p, |p| done!(rope::rope(
                stream, q, k, c, s, &*p, qo, ko, style
            )))
        }
        (kv_cache::OP_PAGED, [k, v, a, kc, vc]) => {
            let (k, v) = (ty(k)?, ty(v)?);
            let (kc, vc) = (ty_mut(kc)?, ty_mut(vc)?);
            index!(a, |a| done!(kv_cache::write_kv_cache_paged(
                stream, k, v, &*a, kc, vc
            )))
        }
        (kv_cache::OP, [k, v, a, b, kc, vc]) => {
            let (k, v) = (ty(k)?, ty(v)?);
            let (kc, vc) = (ty_mut(kc)?, ty_mut(vc)?);
            match (a, b) {
                (Dev::I32(a), Dev::I32(b)) => {
                    done!(kv_cache::write_kv_cache(stream, k, v, &*a, &*b, kc, vc))
                }
                (Dev::I64(a), Dev::I64(b)) => {
                    done!(kv_cache::write_kv_cache(stream, k, v, &*a, &*b, kc, vc))
                }
                _ => return Err("batch and pos must be i32 or i64 alike".into()),
            }
        }
        (embedding::OP, [t, ids, out]) => {
            let (t, out) = (ty(t)?, ty_mut(out)?);
            index!(ids, |ids| done!(embedding::embedding(
                stream, t, &*ids, out
            )))
        }
        (RMS_NORM_BACKWARD, [x, wt, dy, dx, dw]) => {
            let (x, wt, dy) = (ty(x)?, ty(wt)?, ty(dy)?);
            let (dx, mut dw) = (ty_mut(dx)?, grad_mut(dw)?);
            done!(cutile_kernels::norm::rms_norm_backward(
                stream,
                x,
                wt,
                dy,
                crate::workload::EPS,
                dx,
                &mut dw
            ))
        }
        (LAYER_NORM_BACKWARD, [x, wt, dy, m, r, dx, dw, db]) => {
            let (x, wt, dy, m, r) = (ty(x)?, ty(wt)?, ty(dy)?, table(m)?, table(r)?);
            let (dx, mut dw, mut db) = (ty_mut(dx)?, grad_mut(dw)?, grad_mut(db)?);
            done!(cutile_kernels::norm::layer_norm_backward(
                stream, x, wt, dy, m, r, dx, &mut dw, &mut db
            ))
        }
        (dropout::OP, [x, y]) => {
            done!(dropout::dropout(
                stream,
                ty(x)?,
                dropout::SPEC_PARAMS,
                ty_mut(y)?
            ))
        }
        (dropout::BACKWARD, [dy, dx]) => done!(dropout::dropout_backward(
            stream,
            ty(dy)?,
            dropout::SPEC_PARAMS,
            ty_mut(dx)?
        )),
        (sampling::ARGMAX, [x, out]) => done!(sampling::argmax(stream, ty(x)?, i64_mut(out)?)),
        (sampling::TOPK, [x, vals, idx]) => {
            done!(sampling::topk(stream, ty(x)?, ty_mut(vals)?, i64_mut(idx)?))
        }
        (cross_entropy::OP, [x, wt, tg, loss, dx, dw]) => {
            let sw = cross_entropy::spec_switches(&w.call.shapes)?;
            let (_, opts) = cross_entropy::described_call(ScalarType::F32, &w.call.shapes)?;
            let opts = cross_entropy::CeOptions {
                allow_tf32: true,
                ..opts
            };
            let (x, wt) = (ty(x)?, ty(wt)?);
            let loss = f32_mut(loss)?;
            let dx: Option<&mut dyn cutile::launch::TensorArgMut> =
                if sw.dx { Some(ty_mut(dx)?) } else { None };
            let dw: Option<&mut dyn cutile::launch::TensorArgMut> = match (sw.dw, dw) {
                (false, _) => None,
                (true, Dev::F32(t)) => Some(t),
                (true, Dev::T(t)) => Some(t),
                _ => return Err("dw must be f32 or of the element type".into()),
            };
            index!(tg, |tg| done!(cross_entropy::fused_linear_cross_entropy(
                stream, x, wt, &*tg, &opts, loss, dx, dw
            )))
        }
        (op, d) => return Err(format!("{op}: unexpected {} tensors", d.len()).into()),
    }
    Ok(())
}

/// The indices of the output tensors among the operands, in [`outputs`] order.
fn output_slots(call: &CallSpec, n: usize) -> Vec<usize> {
    match call.op.as_str() {
        rope::OP if in_place(call) => vec![0, 1],
        rope::OP => vec![5, 6],
        kv_cache::OP | kv_cache::OP_PAGED => vec![n - 2, n - 1],
        embedding::OP => vec![2],
        sampling::ARGMAX => vec![1],
        RMS_NORM_BACKWARD => vec![3, 4],
        LAYER_NORM_BACKWARD => vec![5, 6, 7],
        dropout::OP | dropout::BACKWARD => vec![1],
        cross_entropy::OP => {
            let sw = cross_entropy::spec_switches(&call.shapes).ok();
            let mut v = vec![3];
            if sw.is_some_and(|s| s.dx) {
                v.push(4);
            }
            if sw.is_some_and(|s| s.dw) {
                v.push(5);
            }
            v
        }
        _ => vec![1, 2],
    }
}

fn run_typed<T: DeviceElement>(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: &[HostTensor],
    timing: crate::launch_times::Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<Stats>), BoxError> {
    let dt = w.dt()?;
    let ops = operands(dt, &w.call)?;
    let n_in = n_inputs(&w.call, ops.len());
    if inputs.len() != n_in {
        return Err(format!("{}: {n_in} inputs expected, got {}", w.name, inputs.len()).into());
    }
    let mut d: Vec<Dev<T>> = Vec::with_capacity(ops.len());
    for (k, o) in ops.iter().enumerate() {
        let zeros;
        let h = match inputs.get(k) {
            Some(h) => h,
            None => {
                zeros = (vec![0.0; numel(&o.shape)], o.shape.clone());
                &zeros
            }
        };
        d.push(Dev::up(dev, o, h)?);
    }
    call(stream, w, &mut d, true)?;
    if w.op() == cross_entropy::OP {
        // The op's only extra device memory: its stream's scratch (grow-only; larger if an earlier call
        // on this stream needed more).
        let held = cutile_kernels::op::scratch::held_bytes(stream);
        eprintln!(
            "{}: scratch held {:.1} MiB (T x V logits would be {:.1} MiB)",
            w.name,
            held as f64 / (1u64 << 20) as f64,
            (ops[0].shape[0] * ops[1].shape[0]) as f64 * ops[0].elem_bytes() as f64
                / (1u64 << 20) as f64
        );
    }
    let outs = output_slots(&w.call, ops.len())
        .into_iter()
        .map(|k| d[k].down())
        .collect::<Result<Vec<_>, _>>()?;
    let stats = match timing {
        None => None,
        Some((iters, flush)) => Some(crate::launch_times::time_call(
            stream,
            5,
            iters,
            flush,
            || call(stream, w, &mut d, false),
        )?),
    };
    stream.synchronize()?;
    Ok((outs, stats))
}

/// Runs the call once on `inputs` (and, with `timing`, times it): the outputs read back ([`outputs`]
/// order) and the timing.
pub fn run(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: &[HostTensor],
    timing: crate::launch_times::Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<Stats>), BoxError> {
    match w.dt()? {
        Dt::BF16 => run_typed::<half::bf16>(dev, stream, w, inputs, timing),
        Dt::F16 => run_typed::<half::f16>(dev, stream, w, inputs, timing),
        Dt::F32 => run_typed::<f32>(dev, stream, w, inputs, timing),
    }
}
