//! `mla_decode` / `mla_decode_paged` / `mla_prefill` as [`Workload`]s: the decode calls take i32
//! `seq_lens` and `block_table` and both write an f32 LSE, so they have their own host data, upload and
//! call here; the comparison and the timing are the workload's ([`crate::run`]).
//!
//! Decode inputs (logical, f32 host values; integers exact): `q [B, H, Sq, 576]`, the latent cache
//! (`[B, S_max, 576]` or `[blocks, block_size, 576]`), `seq_lens` and, paged, `block_table`, with the
//! shapes of [`mla::described_call`]; outputs `o [B, H, Sq, 512]` and `lse`. With the ragged flag (a
//! trailing `[1]` shape) the lengths are random with 0, 1 and the capacity among them, else full.
//! Paged block tables are random injections into the cache's blocks. Every cache row past a
//! sequence's length (and every unused block) holds NaN. Prefill inputs: `q [B, H, S, 192]`, `k [B,
//! Hkv, S_k, 192]`, `v [B, Hkv, S_k, 128]`; outputs `o [B, H, S, 128]` and `lse`. Values are uniform in
//! ±1 (q and the cache scaled by 1/2 so the 576-deep scores stay in a softmax-friendly range).

use cutile::launch::Pending;
use cutile::runtime::timing::Stats;
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_kernels::attention::mla::{
    self, LatentCache, LatentCacheRef, MlaDecodeOptions, MlaPrefillOptions, OP_DECODE,
    OP_DECODE_PAGED, OP_PREFILL, slot,
};
use cutile_kernels::op::CallSpec;

use crate::BoxError;
use crate::data::{Dt, uniform};
use crate::decode::{numel, shuffle};
use crate::workload::{HostTensor, OutputSpec, Workload};

use crate::launch_times::Timing;

/// Whether `op` is one of the MLA ops.
pub fn covers(op: &str) -> bool {
    matches!(op, OP_DECODE | OP_DECODE_PAGED | OP_PREFILL)
}

/// Whether `op` is an MLA decode op (memory-bound: the latent cache read).
pub fn is_decode(op: &str) -> bool {
    matches!(op, OP_DECODE | OP_DECODE_PAGED)
}

/// The call's shapes without the ragged flag, and the flag.
fn split_flag(call: &CallSpec) -> (Vec<Vec<i64>>, bool) {
    let n = match call.op.as_str() {
        OP_DECODE_PAGED => 3,
        _ => 2,
    };
    let ragged = call.shapes.get(n).is_some_and(|f| f.first() == Some(&1));
    (call.shapes.iter().take(n).cloned().collect(), ragged)
}

/// The outputs: `o` (element type) and `lse` (f32).
pub fn outputs(dt: Dt, call: &CallSpec) -> Result<Vec<OutputSpec>, BoxError> {
    let (shapes, _) = split_flag(call);
    let (o, lse) = if is_decode(&call.op) {
        let (ops, _) = mla::described_call(&call.op, dt.scalar(), &shapes)?;
        (ops[slot::O].shape.clone(), ops[slot::LSE].shape.clone())
    } else {
        let ops = mla::described_prefill(dt.scalar(), &shapes)?;
        (
            ops[mla::prefill_slot::O].shape.clone(),
            ops[mla::prefill_slot::LSE].shape.clone(),
        )
    };
    Ok(vec![
        OutputSpec {
            name: "o",
            shape: o,
            f32: false,
        },
        OutputSpec {
            name: "lse",
            shape: lse,
            f32: true,
        },
    ])
}

/// Decode: bytes of the latent cache rows read at full length (the benchmark calls' lengths; a
/// ragged call reads less), once per call (the second value part's re-read is L2 traffic).
pub fn decode_bytes(dt: Dt, call: &CallSpec) -> Result<f64, BoxError> {
    let (shapes, _) = split_flag(call);
    let (ops, paged) = mla::described_call(&call.op, dt.scalar(), &shapes)?;
    let c = &ops[slot::CACHE].shape;
    let keys = if paged {
        let t = &ops[slot::BLOCK_TABLE].shape;
        t[0] * t[1] * c[1]
    } else {
        c[0] * c[1]
    };
    Ok((keys * mla::ROW) as f64 * dt.bytes() as f64)
}

/// Prefill: 2·(192 + 128) flops per visible (query, key) pair and head.
pub fn prefill_flops(dt: Dt, call: &CallSpec) -> Result<f64, BoxError> {
    let ops = mla::described_prefill(dt.scalar(), &split_flag(call).0)?;
    let q = &ops[mla::prefill_slot::Q].shape;
    let sk = ops[mla::prefill_slot::K].shape[2];
    let pairs: f64 = if call.causal {
        (0..q[2]).map(|i| (i + 1).min(sk) as f64).sum()
    } else {
        (q[2] * sk) as f64
    };
    Ok(2.0 * (q[0] * q[1]) as f64 * pairs * (mla::PREFILL_QK + mla::PREFILL_V) as f64)
}

/// The call's logical inputs (see the module docs); `seed` varies the data.
pub fn inputs(dt: Dt, call: &CallSpec, seed: u64) -> Result<Vec<HostTensor>, BoxError> {
    let (shapes, ragged) = split_flag(call);
    let unit = |i: usize, s: u64, r: f64| dt.round(&uniform(i, -r, r, s));
    if !is_decode(&call.op) {
        let ops = mla::described_prefill(dt.scalar(), &shapes)?;
        let p = mla::prefill_slot::Q;
        return Ok([p, mla::prefill_slot::K, mla::prefill_slot::V]
            .iter()
            .map(|&i| {
                let s = ops[i].shape.clone();
                (unit(numel(&s), seed.wrapping_add(40 + i as u64), 1.0), s)
            })
            .collect());
    }
    let (ops, paged) = mla::described_call(&call.op, dt.scalar(), &shapes)?;
    let q = ops[slot::Q].shape.clone();
    let cache = ops[slot::CACHE].shape.clone();
    let w = mla::ROW as usize;
    let b = q[0] as usize;
    let cap = if paged {
        let t = &ops[slot::BLOCK_TABLE].shape;
        (t[1] * cache[1]) as usize
    } else {
        cache[1] as usize
    };
    let order = shuffle(b, seed ^ 0x51);
    let mut lens: Vec<usize> = (0..b)
        .map(|i| {
            if !ragged {
                return cap;
            }
            match order[i] % 5 {
                0 => cap,
                1 => 0,
                2 => 1.min(cap),
                _ => {
                    let r = uniform(1, 0.0, 1.0, seed.wrapping_add(i as u64 * 7 + 3))[0] as f64;
                    ((r * cap as f64) as usize).min(cap)
                }
            }
        })
        .collect();
    let qv = unit(numel(&q), seed.wrapping_add(11), 0.5);
    let mut c = unit(numel(&cache), seed.wrapping_add(12), 0.5);
    let mut out = vec![(qv, q.clone())];
    if paged {
        let (blocks, bs) = (cache[0] as usize, cache[1] as usize);
        let max_blocks = ops[slot::BLOCK_TABLE].shape[1] as usize;
        let pool = shuffle(blocks, seed ^ 0xB10C);
        let mut next = 0;
        let mut table = vec![-1f32; b * max_blocks];
        let mut used = vec![false; blocks];
        for (i, len) in lens.iter_mut().enumerate() {
            let need = len.div_ceil(bs);
            let have = need.min(blocks - next);
            *len = (*len).min(have * bs);
            for j in 0..have {
                table[i * max_blocks + j] = pool[next] as f32;
                used[pool[next]] = true;
                next += 1;
            }
            for p in *len..have * bs {
                let blk = pool[next - have + p / bs];
                let row = (blk * bs + p % bs) * w;
                c[row..row + w].fill(f32::NAN);
            }
        }
        for (blk, u) in used.iter().enumerate() {
            if !u {
                c[blk * bs * w..(blk + 1) * bs * w].fill(f32::NAN);
            }
        }
        out.push((c, cache));
        out.push((lens.iter().map(|&l| l as f32).collect(), vec![b as i64]));
        out.push((table, ops[slot::BLOCK_TABLE].shape.clone()));
    } else {
        for (bi, &len) in lens.iter().enumerate() {
            c[(bi * cap + len) * w..(bi + 1) * cap * w].fill(f32::NAN);
        }
        out.push((c, cache));
        out.push((lens.iter().map(|&l| l as f32).collect(), vec![b as i64]));
    }
    Ok(out)
}

/// The expected `[o, lse]` from the logical inputs.
pub fn reference(dt: Dt, call: &CallSpec, i: &[HostTensor]) -> Result<Vec<Vec<f32>>, BoxError> {
    let (shapes, _) = split_flag(call);
    if !is_decode(&call.op) {
        let ops = mla::described_prefill(dt.scalar(), &shapes)?;
        if i.len() != 3 {
            return Err(format!("{}: {} inputs given", call.op, i.len()).into());
        }
        let q = &ops[mla::prefill_slot::Q].shape;
        let k = &ops[mla::prefill_slot::K].shape;
        let (o, lse) = mla::mla_prefill_reference(
            &i[0].0,
            &i[1].0,
            &i[2].0,
            q[0] as usize,
            q[1] as usize,
            k[1] as usize,
            q[2] as usize,
            k[2] as usize,
            call.causal,
            mla::DEFAULT_SCALE,
        );
        return Ok(vec![o, lse]);
    }
    let (ops, paged) = mla::described_call(&call.op, dt.scalar(), &shapes)?;
    if i.len() != 3 + usize::from(paged) {
        return Err(format!("{}: {} inputs given", call.op, i.len()).into());
    }
    let q = &ops[slot::Q].shape;
    let cache = &ops[slot::CACHE].shape;
    let lens: Vec<i32> = i[2].0.iter().map(|&x| x as i32).collect();
    let table: Vec<i32> = i
        .get(3)
        .map_or(Vec::new(), |t| t.0.iter().map(|&x| x as i32).collect());
    let c = if paged {
        LatentCacheRef::Paged {
            c: &i[1].0,
            block_size: cache[1] as usize,
            block_table: &table,
            max_blocks: ops[slot::BLOCK_TABLE].shape[1] as usize,
        }
    } else {
        LatentCacheRef::Contiguous {
            c: &i[1].0,
            s_max: cache[1] as usize,
        }
    };
    let [b, h, sq] = [q[0], q[1], q[2]].map(|x| x as usize);
    let (o, lse) = mla::mla_decode_reference(&i[0].0, &c, &lens, b, h, sq, mla::DEFAULT_SCALE);
    Ok(vec![o, lse])
}

/// One call's device tensors.
struct Instance<T: DeviceElement> {
    ins: Vec<Tensor<T>>,
    lens: Option<Tensor<i32>>,
    table: Option<Tensor<i32>>,
    o: Tensor<T>,
    lse: Tensor<f32>,
    causal: bool,
}

fn upload<T: DeviceElement>(
    dev: &Device,
    w: &Workload,
    i: &[HostTensor],
) -> Result<Instance<T>, BoxError> {
    let typed = |k: usize| -> Result<Tensor<T>, BoxError> {
        let h: Vec<T> = i[k].0.iter().map(|&v| T::from_f64(v as f64)).collect();
        Ok(Tensor::from_host(dev, &h, &i[k].1)?)
    };
    let ints = |k: usize| -> Result<Tensor<i32>, BoxError> {
        let h: Vec<i32> = i[k].0.iter().map(|&v| v as i32).collect();
        Ok(Tensor::from_host(dev, &h, &i[k].1)?)
    };
    let outs = outputs(w.dt()?, &w.call)?;
    let decode = is_decode(w.op());
    Ok(Instance {
        ins: if decode {
            vec![typed(0)?, typed(1)?]
        } else {
            vec![typed(0)?, typed(1)?, typed(2)?]
        },
        lens: if decode { Some(ints(2)?) } else { None },
        table: if decode && i.len() > 3 {
            Some(ints(3)?)
        } else {
            None
        },
        o: Tensor::zeros(dev, &outs[0].shape)?,
        lse: Tensor::zeros(dev, &outs[1].shape)?,
        causal: w.call.causal,
    })
}

/// Queues one call on `stream`.
fn call<'a, T: DeviceElement>(
    stream: &'a Stream,
    inst: &'a mut Instance<T>,
) -> Result<Pending<'a>, BoxError> {
    let Some(lens) = &inst.lens else {
        return Ok(mla::mla_prefill(
            stream,
            &inst.ins[0],
            &inst.ins[1],
            &inst.ins[2],
            &MlaPrefillOptions {
                causal: inst.causal,
                scale: None,
            },
            &mut inst.o,
            Some(&mut inst.lse),
        )?);
    };
    let cache = match &inst.table {
        Some(t) => LatentCache::Paged {
            cache: &inst.ins[1],
            block_table: t,
        },
        None => LatentCache::Contiguous(&inst.ins[1]),
    };
    Ok(mla::mla_decode(
        stream,
        &inst.ins[0],
        &cache,
        lens,
        &MlaDecodeOptions::default(),
        &mut inst.o,
        Some(&mut inst.lse),
    )?)
}

fn run_typed<T: DeviceElement>(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    i: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<Stats>), BoxError> {
    let mut inst = upload::<T>(dev, w, i)?;
    call(stream, &mut inst)?.wait()?;
    let o: Vec<f32> = inst
        .o
        .to_host()?
        .into_iter()
        .map(|v| v.to_f64() as f32)
        .collect();
    let outs = vec![o, inst.lse.to_host()?];
    let stats = crate::launch_times::time_queued(stream, timing, || {
        std::mem::forget(call(stream, &mut inst)?);
        Ok(())
    })?;
    stream.synchronize()?;
    Ok((outs, stats))
}

/// Runs the call once on `inputs` (and, with `timing`, times it): `[o, lse]` read back, and the timing.
pub fn run(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<Stats>), BoxError> {
    match w.dt()? {
        Dt::BF16 => run_typed::<half::bf16>(dev, stream, w, inputs, timing),
        Dt::F16 => run_typed::<half::f16>(dev, stream, w, inputs, timing),
        Dt::F32 => Err("MLA takes bf16 or f16".into()),
    }
}

/// The benchmark calls: decode bf16, H 128, Sq 1, full lengths, B 1/32/128 by KV 1k/8k/32k while
/// `B · KV ≤ 1M` keys (a 1.1 GiB cache), contiguous and paged (64-token blocks) at every point;
/// prefill bf16 causal and not at B 1 H 128 S 4096 and B 4 H 16 S 4096.
pub fn bench_calls() -> Vec<CallSpec> {
    let mut out = Vec::new();
    for b in [1i64, 32, 128] {
        for kv in [1024i64, 8192, 32768] {
            if b * kv > 1 << 20 {
                continue;
            }
            out.push(CallSpec::new(
                OP_DECODE,
                "bf16",
                &[&[b, 128, 1, 576], &[b, kv, 576]],
                false,
            ));
            let per = kv / 64;
            out.push(CallSpec::new(
                OP_DECODE_PAGED,
                "bf16",
                &[&[b, 128, 1, 576], &[b * per, 64, 576], &[b, per]],
                false,
            ));
        }
    }
    for (b, h) in [(1i64, 128i64), (4, 16)] {
        for causal in [false, true] {
            out.push(CallSpec::new(
                OP_PREFILL,
                "bf16",
                &[&[b, h, 4096, 192], &[b, h, 4096, 192]],
                causal,
            ));
        }
    }
    out
}

/// Ragged checks: both caches, split and not, H 16/128, Sq 1/2, block sizes 16/64/256, f16 and bf16;
/// prefill causal and not with a ragged tail and S 1.
pub fn check_calls() -> Vec<CallSpec> {
    let c = |op: &str, dt: &str, shapes: &[&[i64]]| {
        let mut s = CallSpec::new(op, dt, shapes, false);
        s.shapes.push(vec![1]);
        s
    };
    vec![
        c(OP_DECODE, "bf16", &[&[5, 128, 1, 576], &[5, 1000, 576]]),
        c(OP_DECODE, "f16", &[&[7, 16, 2, 576], &[7, 300, 576]]),
        c(OP_DECODE, "bf16", &[&[70, 16, 1, 576], &[70, 129, 576]]),
        // One block per row tile (the wide direct form): 140 and 3 x 72 of them.
        c(OP_DECODE, "bf16", &[&[140, 64, 1, 576], &[140, 97, 576]]),
        c(
            OP_DECODE_PAGED,
            "f16",
            &[&[72, 48, 3, 576], &[150, 32, 576], &[72, 2]],
        ),
        c(
            OP_DECODE_PAGED,
            "bf16",
            &[&[6, 128, 1, 576], &[64, 16, 576], &[6, 12]],
        ),
        // Split over 32-token pages, where the tuner also times the wide split with 16-bit partials.
        c(
            OP_DECODE_PAGED,
            "f16",
            &[&[2, 64, 2, 576], &[40, 32, 576], &[2, 20]],
        ),
        c(
            OP_DECODE_PAGED,
            "bf16",
            &[&[4, 16, 2, 576], &[40, 64, 576], &[4, 10]],
        ),
        c(
            OP_DECODE_PAGED,
            "f16",
            &[&[3, 32, 1, 576], &[8, 256, 576], &[3, 3]],
        ),
        CallSpec::new(
            OP_PREFILL,
            "bf16",
            &[&[2, 4, 300, 192], &[2, 4, 300, 192]],
            true,
        ),
        CallSpec::new(
            OP_PREFILL,
            "f16",
            &[&[1, 8, 130, 192], &[1, 2, 130, 192]],
            false,
        ),
        CallSpec::new(
            OP_PREFILL,
            "bf16",
            &[&[3, 2, 1, 192], &[3, 2, 1, 192]],
            true,
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The decode check calls' data: lengths 0 and the capacity occur, NaN sits only past the
    /// lengths (the reference stays finite), LSE −inf exactly where a query sees no key; the prefill
    /// references are finite.
    #[test]
    fn check_data_hides_nan_past_the_lengths_only() {
        let (mut zero, mut full) = (false, false);
        for call in check_calls() {
            let dt = Dt::parse(&call.dtype).unwrap();
            let i = inputs(dt, &call, 5).unwrap();
            let r = reference(dt, &call, &i).unwrap();
            assert!(r[0].iter().all(|x| x.is_finite()), "{}", call.label());
            assert_eq!(r[0].len(), numel(&outputs(dt, &call).unwrap()[0].shape));
            if !is_decode(&call.op) {
                assert!(r[1].iter().all(|x| x.is_finite()), "{}", call.label());
                continue;
            }
            assert!(
                i[1].0.iter().any(|x| x.is_nan()),
                "{}: no NaN",
                call.label()
            );
            let q = &i[0].1;
            let per_seq = (q[1] * q[2]) as usize;
            let cap = if call.op == OP_DECODE_PAGED {
                call.shapes[2][1] * call.shapes[1][1]
            } else {
                call.shapes[1][1]
            };
            for (b, &len) in i[2].0.iter().enumerate() {
                zero |= len == 0.0;
                full |= len as i64 == cap;
                for (r_, &x) in r[1][b * per_seq..(b + 1) * per_seq].iter().enumerate() {
                    let qi = (r_ % q[2] as usize) as f32;
                    assert_eq!(
                        x == f32::NEG_INFINITY,
                        len - q[2] as f32 + qi + 1.0 <= 0.0,
                        "{}",
                        call.label()
                    );
                }
            }
        }
        assert!(zero && full);
    }

    #[test]
    fn metrics_count_the_cache_and_the_pairs() {
        let c = CallSpec::new(
            OP_DECODE,
            "bf16",
            &[&[2, 128, 1, 576], &[2, 1024, 576]],
            false,
        );
        assert_eq!(
            decode_bytes(Dt::BF16, &c).unwrap(),
            (2 * 1024 * 576 * 2) as f64
        );
        let p = CallSpec::new(
            OP_PREFILL,
            "bf16",
            &[&[1, 2, 4, 192], &[1, 2, 4, 192]],
            true,
        );
        assert_eq!(
            prefill_flops(Dt::BF16, &p).unwrap(),
            2.0 * 2.0 * 10.0 * 320.0
        );
        // Bench calls plan on sm_90 and keep B·KV ≤ 1M.
        for b in bench_calls() {
            b.plan(
                &cutile_kernels::op::Target::planning(cutile::toolchain::GpuArch::Sm90),
                false,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", b.label()));
        }
    }
}
