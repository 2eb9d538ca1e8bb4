//! The tensor-parallel block on GPUs, one thread per rank (GPU `r` = rank `r`).
//!
//! Per rank, on its stream: `fused_qkv` (its q heads; its k, v heads into a contiguous cache) →
//! `attention` (causal, its heads; q and o as `[1, H_r, T, D]` views of `[T, H_r, D]`) → `gemm` with
//! its `w_o` rows (a partial sum) → NCCL all-reduce → `add` (residual) → `gemm` with its gate|up
//! columns → `silu_and_mul` → `gemm` with its `w_down` rows → all-reduce → `add`. With
//! `chunks > 1` the MLP runs in token chunks and chunk `i`'s all-reduce runs on the rank's second
//! stream while chunk `i + 1` computes (compute/communication overlap).
//!
//! Without a communicator (`nccl = false`, one rank) the same code is the single-GPU, unsharded
//! layer: the baseline every sharded run is compared with.

use cudarc::nccl::sys::ncclDataType_t;
use cutile::launch::Pending;
use cutile::runtime::{Device, Tensor};
use cutile_kernels::attention::{self, AttentionOptions};
use cutile_kernels::fused_qkv::{self, KvCache, Path, QkvLayer, Rope, RopeStyle};
use cutile_kernels::{activation, gemm, vector_add};
use half::bf16;
use serde::{Deserialize, Serialize};

use crate::nccl::{Comm, RankStreams, elapsed_ms};
use crate::reference::{BlockInputs, RankWeights};
use crate::shard::{BlockConfig, ShardPlan, rank_config};
use crate::{Result, TpError};

/// How a run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOptions {
    /// All-reduce through NCCL (with one rank too); `false` only with one rank (the baseline).
    pub nccl: bool,
    /// Token chunks of the MLP (1: no overlap).
    pub chunks: usize,
    pub warmup: usize,
    pub iters: usize,
}

/// Medians over the timed iterations, the slowest rank's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// The layer, end to end.
    pub total_ms: f64,
    /// The two all-reduces as queued on the compute stream (0 with overlap: they run beside it).
    pub comm_ms: f64,
    /// The MLP's all-reduce alone (with overlap, on the communication stream).
    pub mlp_comm_ms: f64,
}

/// A run's result.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub ranks: usize,
    /// Rank 0's `y` (`[T, hidden]`).
    pub y: Vec<f32>,
    /// The largest relative difference of another rank's `y` from rank 0's (all hold the full
    /// output after the all-reduce, so 0 unless the collectives disagree).
    pub rank_divergence: f64,
    pub times: Times,
}

fn bf(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

fn up(device: &Device, v: &[f32], shape: &[usize]) -> Result<Tensor<bf16>> {
    let s: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
    Ok(Tensor::from_host(device, &bf(v), &s)?)
}

/// One rank's device tensors.
struct RankState {
    c: BlockConfig,
    x: Tensor<bf16>,
    cos: Tensor<f32>,
    sin: Tensor<f32>,
    positions: Tensor<i32>,
    batch: Tensor<i32>,
    w_qkv: Tensor<bf16>,
    w_o: Tensor<bf16>,
    w_gu: Tensor<bf16>,
    w_down: Tensor<bf16>,
    q: Tensor<bf16>,
    k_cache: Tensor<bf16>,
    v_cache: Tensor<bf16>,
    o: Tensor<bf16>,
    attn: Tensor<bf16>,
    h1: Tensor<bf16>,
    gu: Tensor<bf16>,
    act: Tensor<bf16>,
    m: Tensor<bf16>,
    y: Tensor<bf16>,
}

/// Leaves an op queued: the tensors it uses are fields of the rank state, alive until the streams
/// are synchronized.
fn queued(p: std::result::Result<Pending<'_>, cutile_kernels::op::OpError>) -> Result<()> {
    // SAFETY: every buffer an op of this module queues is owned by `RankState` (or the stream's
    // scratch), which is only dropped or read after `RankStreams::sync`.
    unsafe { p?.detach() };
    Ok(())
}

impl RankState {
    fn new(device: &Device, c: BlockConfig, i: &BlockInputs, w: &RankWeights) -> Result<RankState> {
        let (t, hd, d) = (c.tokens, c.hidden, c.d);
        let z = |shape: &[usize]| -> Result<Tensor<bf16>> {
            let s: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
            Ok(Tensor::zeros(device, &s)?)
        };
        let tt = t as i64;
        Ok(RankState {
            x: up(device, &i.x, &[t, hd])?,
            cos: Tensor::from_host(device, &i.cos, &[tt, (d / 2) as i64])?,
            sin: Tensor::from_host(device, &i.sin, &[tt, (d / 2) as i64])?,
            positions: Tensor::from_host(device, &(0..t as i32).collect::<Vec<_>>(), &[tt])?,
            batch: Tensor::from_host(device, &vec![0i32; t], &[tt])?,
            w_qkv: up(device, &w.w_qkv, &[hd, c.qkv_cols()])?,
            w_o: up(device, &w.w_o, &[c.hq * d, hd])?,
            w_gu: up(device, &w.w_gate_up, &[hd, 2 * c.ffn])?,
            w_down: up(device, &w.w_down, &[c.ffn, hd])?,
            q: z(&[t, c.hq, d])?,
            k_cache: z(&[1, c.hkv, t, d])?,
            v_cache: z(&[1, c.hkv, t, d])?,
            o: z(&[t, c.hq, d])?,
            attn: z(&[t, hd])?,
            h1: z(&[t, hd])?,
            gu: z(&[t, 2 * c.ffn])?,
            act: z(&[t, c.ffn])?,
            m: z(&[t, hd])?,
            y: z(&[t, hd])?,
            c,
        })
    }

    /// Queues one forward; returns (total, comm on the compute stream, MLP all-reduce) in ms once the
    /// streams are synchronized.
    fn forward(&mut self, rs: &RankStreams, comm: Option<&Comm>, chunks: usize) -> Result<Times> {
        let c = self.c;
        let (t, hd, d, hq) = (c.tokens as i64, c.hidden as i64, c.d as i64, c.hq as i64);
        let s = &rs.stream;
        let start = rs.mark(&rs.cs)?;
        queued(fused_qkv::fused_qkv(
            s,
            &self.x,
            &self.positions,
            &QkvLayer {
                weight: &self.w_qkv,
                bias: None,
                q_norm: None,
                k_norm: None,
                eps: 0.0,
            },
            &Rope {
                cos: &self.cos,
                sin: &self.sin,
                style: RopeStyle::Neox,
            },
            &mut self.q,
            KvCache::Contiguous {
                k: &mut self.k_cache,
                v: &mut self.v_cache,
                batch: &self.batch,
                pos: &self.positions,
            },
            Path::Auto,
        ))?;
        {
            let qv = self.q.reshape(&[1, t, hq, d])?.transpose(1, 2)?;
            let mut ov = self.o.reshape_mut(&[1, t, hq, d])?.transpose(1, 2)?;
            let opts = AttentionOptions {
                causal: true,
                ..Default::default()
            };
            queued(attention::attention(
                s,
                &qv,
                &self.k_cache,
                &self.v_cache,
                &opts,
                &mut ov,
            ))?;
        }
        {
            let o2 = self.o.reshape(&[t, hq * d])?;
            queued(gemm::gemm(s, &o2, &self.w_o, &mut self.attn))?;
        }
        let a0 = rs.mark(&rs.cs)?;
        if let Some(comm) = comm {
            // SAFETY: `attn` is owned by the state; every rank queues the same collectives.
            unsafe {
                comm.all_reduce_sum_raw(
                    self.attn.device_ptr(),
                    (t * hd) as usize,
                    ncclDataType_t::ncclBfloat16,
                    &rs.cs,
                )?
            };
        }
        let a1 = rs.mark(&rs.cs)?;
        queued(vector_add::add(s, &self.x, &self.attn, &mut self.h1))?;
        let chunks = chunks.clamp(1, c.tokens.max(1));
        let overlap = chunks > 1 && comm.is_some();
        let rows = (t + chunks as i64 - 1) / chunks as i64;
        let mut comm_marks = Vec::new();
        for k in 0..chunks as i64 {
            let (r0, r1) = (k * rows, ((k + 1) * rows).min(t));
            if r0 >= r1 {
                break;
            }
            {
                let h = self.h1.slice(0, r0..r1)?;
                let mut gu = self.gu.slice_mut(0, r0..r1)?;
                queued(gemm::gemm(s, &h, &self.w_gu, &mut gu))?;
            }
            {
                let gu = self.gu.slice(0, r0..r1)?;
                let mut a = self.act.slice_mut(0, r0..r1)?;
                queued(activation::silu_and_mul(s, &gu, &mut a))?;
            }
            {
                let a = self.act.slice(0, r0..r1)?;
                let mut m = self.m.slice_mut(0, r0..r1)?;
                queued(gemm::gemm(s, &a, &self.w_down, &mut m))?;
            }
            if let Some(comm) = comm {
                let on = if overlap {
                    RankStreams::join(&rs.comm_cs, &rs.cs)?;
                    &rs.comm_cs
                } else {
                    &rs.cs
                };
                let before = rs.mark(on)?;
                let ptr = self.m.device_ptr() + (r0 * hd) as u64 * 2;
                // SAFETY: rows r0..r1 of `m`, owned by the state; same order on every rank.
                unsafe {
                    comm.all_reduce_sum_raw(
                        ptr,
                        ((r1 - r0) * hd) as usize,
                        ncclDataType_t::ncclBfloat16,
                        on,
                    )?
                };
                let after = rs.mark(on)?;
                comm_marks.push((before, after));
            }
        }
        if overlap {
            RankStreams::join(&rs.cs, &rs.comm_cs)?;
        }
        queued(vector_add::add(s, &self.h1, &self.m, &mut self.y))?;
        let end = rs.mark(&rs.cs)?;
        rs.sync()?;
        let mut mlp_comm = 0.0;
        for (a, b) in &comm_marks {
            mlp_comm += elapsed_ms(a, b)?;
        }
        let attn_comm = elapsed_ms(&a0, &a1)?;
        Ok(Times {
            total_ms: elapsed_ms(&start, &end)?,
            comm_ms: attn_comm + if overlap { 0.0 } else { mlp_comm },
            mlp_comm_ms: mlp_comm,
        })
    }
}

/// The registry calls one rank makes (all ranks have one shape): fused_qkv, attention (contiguous
/// here; the block passes BSHD views), the three GEMMs (the MLP's per token chunk of `chunks`),
/// silu_and_mul and the residual add. Planning them on the CPU checks that every op takes the
/// sharded shapes; `cargo xtask aot --ops … --shapes …` can bundle them.
pub fn rank_calls(
    c: &BlockConfig,
    n: usize,
    chunks: usize,
) -> Result<Vec<cutile_kernels::op::CallSpec>> {
    use cutile_kernels::op::CallSpec;
    let plan = ShardPlan::new(*c, n)?;
    let r = rank_config(c, &plan.ranks[0]);
    let i = |v: usize| v as i64;
    let (t, h, d) = (i(r.tokens), i(r.hidden), i(r.d));
    let (hq, hkv, f) = (i(r.hq), i(r.hkv), i(r.ffn));
    let chunks = chunks.clamp(1, r.tokens.max(1)) as i64;
    let rows = (t + chunks - 1) / chunks;
    let mut calls = vec![
        CallSpec::new(fused_qkv::OP, "bf16", &[&[t, h], &[hq, hkv, d, d]], false),
        CallSpec::new(
            attention::OP,
            "bf16",
            &[&[1, hq, t, d], &[1, hkv, t, d]],
            true,
        ),
        CallSpec::new(gemm::OP, "bf16", &[&[t, hq * d], &[hq * d, h]], false),
        CallSpec::new(vector_add::ADD, "bf16", &[&[t, h]], false),
    ];
    let mut sizes = vec![rows];
    if t % rows != 0 {
        sizes.push(t % rows);
    }
    for m in sizes {
        calls.push(CallSpec::new(
            gemm::OP,
            "bf16",
            &[&[m, h], &[h, 2 * f]],
            false,
        ));
        calls.push(CallSpec::new(
            activation::SILU_AND_MUL,
            "bf16",
            &[&[m, 2 * f]],
            false,
        ));
        calls.push(CallSpec::new(gemm::OP, "bf16", &[&[m, f], &[f, h]], false));
    }
    Ok(calls)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the block over `n` ranks (GPUs `0..n`) on `inputs` and times it.
pub fn run(c: &BlockConfig, n: usize, inputs: &BlockInputs, o: &RunOptions) -> Result<RunResult> {
    let plan = ShardPlan::new(*c, n)?;
    if !o.nccl && n != 1 {
        return Err(TpError::Shard {
            ranks: n,
            what: "more than one rank needs NCCL".into(),
        });
    }
    let have = Device::count()?;
    if n > have {
        return Err(TpError::NotEnoughDevices { ranks: n, have });
    }
    let ordinals: Vec<usize> = (0..n).collect();
    let comms: Vec<Option<Comm>> = if o.nccl {
        Comm::init_all(&ordinals)?.into_iter().map(Some).collect()
    } else {
        vec![None]
    };
    type RankOut = (Vec<f32>, Vec<Times>);
    // Each thread owns its rank's communicator and hands it back, so no communicator is destroyed
    // before every rank has finished.
    let outs: Vec<(Result<RankOut>, Option<Comm>)> = std::thread::scope(|s| {
        let hs: Vec<_> = plan
            .ranks
            .iter()
            .zip(comms)
            .map(|(shard, comm)| {
                s.spawn(move || {
                    let r = (|| -> Result<RankOut> {
                        let device = Device::new(shard.rank)?;
                        let rs = RankStreams::new(&device)?;
                        let w = inputs.weights.shard(c, shard);
                        let mut st = RankState::new(&device, rank_config(c, shard), inputs, &w)?;
                        drop(w);
                        device.synchronize()?;
                        for _ in 0..o.warmup.max(1) {
                            st.forward(&rs, comm.as_ref(), o.chunks)?;
                        }
                        device.synchronize()?;
                        let mut times = Vec::new();
                        for _ in 0..o.iters.max(1) {
                            times.push(st.forward(&rs, comm.as_ref(), o.chunks)?);
                        }
                        rs.sync()?;
                        let y = st.y.to_host()?.iter().map(|v| v.to_f32()).collect();
                        Ok((y, times))
                    })();
                    (r, comm)
                })
            })
            .collect();
        hs.into_iter()
            .enumerate()
            .map(|(rank, h)| {
                h.join().unwrap_or_else(|_| {
                    (
                        Err(TpError::Rank {
                            rank,
                            what: "thread panicked".into(),
                        }),
                        None,
                    )
                })
            })
            .collect()
    });
    let (outs, comms): (Vec<_>, Vec<_>) = outs.into_iter().unzip();
    drop(comms);
    let mut ys = Vec::new();
    let mut times = Times::default();
    for (rank, out) in outs.into_iter().enumerate() {
        let (y, ts) = out.map_err(|e| match e {
            TpError::Rank { .. } => e,
            e => TpError::Rank {
                rank,
                what: e.to_string(),
            },
        })?;
        let pick = |f: fn(&Times) -> f64| median(&mut ts.iter().map(f).collect::<Vec<_>>());
        let r = Times {
            total_ms: pick(|t| t.total_ms),
            comm_ms: pick(|t| t.comm_ms),
            mlp_comm_ms: pick(|t| t.mlp_comm_ms),
        };
        times.total_ms = times.total_ms.max(r.total_ms);
        times.comm_ms = times.comm_ms.max(r.comm_ms);
        times.mlp_comm_ms = times.mlp_comm_ms.max(r.mlp_comm_ms);
        ys.push(y);
    }
    let rank_divergence = ys
        .iter()
        .skip(1)
        .map(|y| crate::reference::rel_max_err(y, &ys[0]))
        .fold(0f64, f64::max);
    Ok(RunResult {
        ranks: n,
        y: ys.swap_remove(0),
        rank_divergence,
        times,
    })
}
