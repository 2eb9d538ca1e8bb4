//! `attention_decode` / `attention_decode_paged` as a [`Workload`]: besides the element type they take
//! i32 `seq_lens` and `block_table` and write an f32 LSE, so they have their own host data, upload and
//! call here; the comparison and the timing are the workload's ([`crate::run`]).
//!
//! Inputs (logical, f32 host values; integers exact): `q, k_cache, v_cache, seq_lens` and, paged,
//! `block_table`, with the shapes of [`decode::described_call`]; outputs `o` and `lse`. With the ragged
//! flag (a trailing `[1]` shape in the call spec) the lengths are random with 0, 1 and the capacity
//! among them, else every sequence is full. Paged block tables are random injections into the cache's
//! blocks (unused entries −1, blocks no sequence uses left over). Every cache entry past a sequence's
//! length (and every unused block) holds NaN: a kernel that reads one gets a visibly wrong result.

use cutile::launch::Pending;
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_kernels::attention::decode::{
    self, CacheRef, DecodeOptions, KvCache, OP_PAGED, decode_reference, slot,
};
use cutile_kernels::op::CallSpec;

use crate::BoxError;
use crate::data::{Dt, uniform};
use crate::workload::HostTensor;

pub(crate) fn numel(s: &[i64]) -> usize {
    s.iter().product::<i64>().max(0) as usize
}

/// A deterministic shuffle of `0..n` (a small LCG).
pub(crate) fn shuffle(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, ((s >> 33) % (i as u64 + 1)) as usize);
    }
    v
}

/// The call's shapes without the ragged flag, and the flag.
pub fn split_flag(call: &CallSpec) -> (Vec<Vec<i64>>, bool) {
    let paged = call.op == OP_PAGED;
    let n = if paged { 3 } else { 2 };
    let ragged = call.shapes.get(n).is_some_and(|f| f.first() == Some(&1));
    (call.shapes.iter().take(n).cloned().collect(), ragged)
}

/// The call's logical inputs (see the module docs); `seed` varies the data.
pub fn inputs(dt: Dt, call: &CallSpec, seed: u64) -> Result<Vec<HostTensor>, BoxError> {
    let (shapes, ragged) = split_flag(call);
    let (ops, paged) = decode::described_call(&call.op, dt.scalar(), &shapes)?;
    let q = ops[slot::Q].shape.clone();
    let cache = ops[slot::K].shape.clone();
    let b = q[0] as usize;
    let d = q[3] as usize;
    let (hkv, cap) = if paged {
        let t = &ops[slot::BLOCK_TABLE].shape;
        (cache[2] as usize, (t[1] * cache[1]) as usize)
    } else {
        (cache[1] as usize, cache[2] as usize)
    };
    // Lengths: 0, 1 and the capacity among random ones (ragged), else full.
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
    let unit = |i: usize, s: u64| dt.round(&uniform(i, -1.0, 1.0, s));
    let qv = unit(numel(&q), seed.wrapping_add(11));
    let mut k = unit(numel(&cache), seed.wrapping_add(12));
    let mut v = unit(numel(&cache), seed.wrapping_add(13));
    let mut out = vec![(qv, q.clone())];
    if paged {
        let (blocks, bs) = (cache[0] as usize, cache[1] as usize);
        let max_blocks = ops[slot::BLOCK_TABLE].shape[1] as usize;
        // Blocks are handed out in a random order until they run out (later lengths shrink).
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
            // Keys of the last block past the length: NaN.
            for p in *len..have * bs {
                let blk = pool[next - have + p / bs];
                let row = (blk * bs + p % bs) * hkv * d;
                k[row..row + hkv * d].fill(f32::NAN);
                v[row..row + hkv * d].fill(f32::NAN);
            }
        }
        for (blk, u) in used.iter().enumerate() {
            if !u {
                let span = bs * hkv * d;
                k[blk * span..(blk + 1) * span].fill(f32::NAN);
                v[blk * span..(blk + 1) * span].fill(f32::NAN);
            }
        }
        out.push((k, cache.clone()));
        out.push((v, cache));
        out.push((lens.iter().map(|&l| l as f32).collect(), vec![b as i64]));
        out.push((table, ops[slot::BLOCK_TABLE].shape.clone()));
    } else {
        for (bi, &len) in lens.iter().enumerate() {
            for h in 0..hkv {
                let start = ((bi * hkv + h) * cap + len) * d;
                let end = ((bi * hkv + h) * cap + cap) * d;
                k[start..end].fill(f32::NAN);
                v[start..end].fill(f32::NAN);
            }
        }
        out.push((k, cache.clone()));
        out.push((v, cache));
        out.push((lens.iter().map(|&l| l as f32).collect(), vec![b as i64]));
    }
    Ok(out)
}

/// The expected `[o, lse]` from the logical inputs.
pub fn reference(dt: Dt, call: &CallSpec, i: &[HostTensor]) -> Result<Vec<Vec<f32>>, BoxError> {
    let (shapes, _) = split_flag(call);
    let (ops, paged) = decode::described_call(&call.op, dt.scalar(), &shapes)?;
    if i.len() != 4 + usize::from(paged) {
        return Err(format!("{}: {} inputs given", call.op, i.len()).into());
    }
    let q = &ops[slot::Q].shape;
    let cache = &ops[slot::K].shape;
    let lens: Vec<i32> = i[3].0.iter().map(|&x| x as i32).collect();
    let table: Vec<i32> = i
        .get(4)
        .map_or(Vec::new(), |t| t.0.iter().map(|&x| x as i32).collect());
    let c = if paged {
        CacheRef::Paged {
            k: &i[1].0,
            v: &i[2].0,
            hkv: cache[2] as usize,
            block_size: cache[1] as usize,
            block_table: &table,
            max_blocks: ops[slot::BLOCK_TABLE].shape[1] as usize,
        }
    } else {
        CacheRef::Contiguous {
            k: &i[1].0,
            v: &i[2].0,
            hkv: cache[1] as usize,
            s_max: cache[2] as usize,
        }
    };
    let [b, hq, sq, d] = [q[0], q[1], q[2], q[3]].map(|x| x as usize);
    let (o, lse) = decode_reference(&i[0].0, &c, &lens, b, hq, sq, d, 1.0 / (d as f32).sqrt());
    Ok(vec![o, lse])
}

/// One call's device tensors.
struct Instance<T: DeviceElement> {
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    lens: Tensor<i32>,
    table: Option<Tensor<i32>>,
    o: Tensor<T>,
    lse: Tensor<f32>,
}

fn upload<T: DeviceElement>(dev: &Device, i: &[HostTensor]) -> Result<Instance<T>, BoxError> {
    let typed = |k: usize| -> Result<Tensor<T>, BoxError> {
        let h: Vec<T> = i[k].0.iter().map(|&v| T::from_f64(v as f64)).collect();
        Ok(Tensor::from_host(dev, &h, &i[k].1)?)
    };
    let ints = |k: usize| -> Result<Tensor<i32>, BoxError> {
        let h: Vec<i32> = i[k].0.iter().map(|&v| v as i32).collect();
        Ok(Tensor::from_host(dev, &h, &i[k].1)?)
    };
    let q = &i[0].1;
    Ok(Instance {
        q: typed(0)?,
        k: typed(1)?,
        v: typed(2)?,
        lens: ints(3)?,
        table: if i.len() > 4 { Some(ints(4)?) } else { None },
        o: Tensor::zeros(dev, q)?,
        lse: Tensor::zeros(dev, &q[..3])?,
    })
}

/// Queues one call on `stream`.
fn call<'a, T: DeviceElement>(
    stream: &'a Stream,
    inst: &'a mut Instance<T>,
) -> Result<Pending<'a>, BoxError> {
    let cache = match &inst.table {
        Some(t) => KvCache::Paged {
            k: &inst.k,
            v: &inst.v,
            block_table: t,
        },
        None => KvCache::Contiguous {
            k: &inst.k,
            v: &inst.v,
        },
    };
    Ok(decode::decode(
        stream,
        &inst.q,
        &cache,
        &inst.lens,
        &DecodeOptions::default(),
        &mut inst.o,
        Some(&mut inst.lse),
    )?)
}

fn run_typed<T: DeviceElement>(
    dev: &Device,
    stream: &Stream,
    i: &[HostTensor],
    timing: crate::launch_times::Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<cutile::runtime::timing::Stats>), BoxError> {
    let mut inst = upload::<T>(dev, i)?;
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
    dt: Dt,
    inputs: &[HostTensor],
    timing: crate::launch_times::Timing<'_>,
) -> Result<(Vec<Vec<f32>>, Option<cutile::runtime::timing::Stats>), BoxError> {
    match dt {
        Dt::BF16 => run_typed::<half::bf16>(dev, stream, inputs, timing),
        Dt::F16 => run_typed::<half::f16>(dev, stream, inputs, timing),
        Dt::F32 => Err("attention decode takes bf16 or f16".into()),
    }
}

/// The benchmark calls: bf16, Hq 32, Hkv 8, D 128, full lengths; B 1/16/64/128 by KV 1k/8k/32k/128k
/// while `B · KV ≤ 512k` keys (K and V ≤ 2 GiB); paged (16- and 128-token blocks) on a subset, to be
/// read against the contiguous rows of the same (B, KV).
pub fn bench_calls() -> Vec<CallSpec> {
    let mut out = Vec::new();
    for b in [1i64, 16, 64, 128] {
        for kv in [1024i64, 8192, 32768, 131072] {
            if b * kv > 1 << 19 {
                continue;
            }
            out.push(CallSpec::new(
                decode::OP,
                "bf16",
                &[&[b, 32, 1, 128], &[b, 8, kv, 128]],
                false,
            ));
        }
    }
    for (b, kv) in [(1i64, 32768i64), (16, 8192), (64, 8192), (128, 4096)] {
        for bs in [16i64, 128] {
            let per = kv / bs;
            out.push(CallSpec::new(
                OP_PAGED,
                "bf16",
                &[&[b, 32, 1, 128], &[b * per, bs, 8, 128], &[b, per]],
                false,
            ));
        }
    }
    out
}

/// Ragged checks beyond the representative calls: both caches, split and not, GQA 1/4/8, Sq 1/3/8,
/// D 64/128, f16 and bf16, block sizes 16 and 256.
pub fn check_calls() -> Vec<CallSpec> {
    let c = |op: &str, dt: &str, shapes: &[&[i64]]| {
        let mut s = CallSpec::new(op, dt, shapes, false);
        s.shapes.push(vec![1]);
        s
    };
    vec![
        c(decode::OP, "bf16", &[&[5, 32, 1, 128], &[5, 8, 1000, 128]]),
        c(decode::OP, "f16", &[&[7, 8, 3, 64], &[7, 1, 300, 64]]),
        c(decode::OP, "bf16", &[&[70, 16, 8, 128], &[70, 4, 129, 128]]),
        c(
            OP_PAGED,
            "bf16",
            &[&[6, 16, 1, 128], &[64, 16, 4, 128], &[6, 12]],
        ),
        c(
            OP_PAGED,
            "f16",
            &[&[3, 8, 2, 64], &[8, 256, 8, 64], &[3, 3]],
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The check calls' data: lengths 0 and the capacity occur, NaN sits only past the lengths (so a
    /// reference that stays finite never read one), and the reference is finite with −inf LSE exactly
    /// for the empty sequences.
    #[test]
    fn check_data_hides_nan_past_the_lengths_only() {
        let (mut zero, mut full) = (false, false);
        for call in check_calls() {
            let dt = Dt::parse(&call.dtype).unwrap();
            let i = inputs(dt, &call, 5).unwrap();
            assert!(
                i[1].0.iter().any(|x| x.is_nan()),
                "{}: no NaN padding",
                call.label()
            );
            let (o, lse) = {
                let r = reference(dt, &call, &i).unwrap();
                (r[0].clone(), r[1].clone())
            };
            assert!(o.iter().all(|x| x.is_finite()), "{}", call.label());
            let q = &i[0].1;
            let per_seq = (q[1] * q[2]) as usize;
            let cap = if call.op == OP_PAGED {
                call.shapes[2][1] * call.shapes[1][1]
            } else {
                call.shapes[1][2]
            };
            for (b, &len) in i[3].0.iter().enumerate() {
                zero |= len == 0.0;
                full |= len as i64 == cap;
                let l = &lse[b * per_seq..(b + 1) * per_seq];
                // With Sq queries, query i sees len − Sq + i + 1 keys.
                let sq = q[2] as f32;
                for (r, &x) in l.iter().enumerate() {
                    let i = (r % q[2] as usize) as f32;
                    assert_eq!(
                        x == f32::NEG_INFINITY,
                        len - sq + i + 1.0 <= 0.0,
                        "{}",
                        call.label()
                    );
                }
            }
        }
        assert!(zero && full);
    }
}
