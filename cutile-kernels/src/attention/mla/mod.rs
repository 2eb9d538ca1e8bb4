//! DeepSeek multi-head latent attention (MLA): the absorbed decode over a latent KV cache (contiguous
//! or paged, split over the keys with an LSE-weighted combine) and the non-absorbed prefill
//! (`D_qk` = 192 = 128 nope + 64 rope, `D_v` = 128).
//!
//! - `dsl`: the kernels (decode partial / combine / direct, prefill);
//! - [`config`]: the decode tile, value split and split count of a call;
//! - [`reference`]: the CPU references (f64);
//! - [`mla_decode`], [`mla_prefill`]: the ops; [`plan_decode`], [`plan_prefill`]: their launches
//!   without a device; [`described_call`]: the registry's call specs.
//!
//! **Decode layouts** (FlashMLA / vLLM): `q: [B, H, Sq, 576]`, each row the absorbed `q_nope` (512)
//! then `q_rope` (64); the cache rows are 576 wide too, latent `c_kv` (512) then `k_rope` (64):
//! contiguous `[B, S_max, 576]` or paged `[num_blocks, block_size, 576]` with `block_table: [B,
//! max_blocks]` i32 (block size a power of two in 16..=256); `seq_lens: [B]` i32 on the device; `o:
//! [B, H, Sq, 512]`, `lse: [B, H, Sq]` f32 (optional). One latent head serves all `H` query heads:
//! `o = softmax(scale · (q_nope·cᵀ + q_rope·k_ropeᵀ)) · c`. The `Sq` queries of a sequence are its
//! last `Sq` positions (query `i` sees keys `0 ..= len − Sq + i`); lengths are clamped to `[0,
//! capacity]`; a query that sees no key gets zeros and LSE −inf. The head and query axes of `q`, `o`
//! and `lse` must merge into one row axis (e.g. contiguous in `[H, Sq]`); the last axes are
//! contiguous. Scale: [`DEFAULT_SCALE`] = `1/sqrt(192)` unless given (DeepSeek's `qk_head_dim` is 192;
//! pass the yarn-corrected value for long-context checkpoints) — not `1/sqrt(576)`.
//!
//! **Prefill layouts**: `q: [B, H, S, 192]`, `k: [B, Hkv, S_k, 192]` (`Hkv` divides `H`), `v: [B,
//! Hkv, S_k, 128]`, `o: [B, H, S, 128]`, `lse: [B, H, S]` f32 (optional), any strides on the batch,
//! head and sequence axes; `S_k` ≥ 1. Causal is top-left (query `i` sees keys `0..=i`). Scale default
//! `1/sqrt(192)`. One kernel with the 192 columns read as a 128-wide and a 64-wide tile (tiles are
//! powers of two); the split form with one `k_rope` shared by all heads would be the same kernel with a
//! zero head stride on the rope view, so it is not a separate kernel.

pub mod config;
mod dsl;
pub mod reference;

pub use config::MlaDecodeConfig;
pub use dsl::kernels;
pub use reference::{LatentCacheRef, mla_decode_reference, mla_prefill_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, contiguous_strides};

/// Absorbed decode over a contiguous latent cache.
pub const OP_DECODE: &str = "mla_decode";
/// Absorbed decode over a paged latent cache.
pub const OP_DECODE_PAGED: &str = "mla_decode_paged";
/// Prefill (`D_qk` 192, `D_v` 128).
pub const OP_PREFILL: &str = "mla_prefill";
/// Element types with a kernel.
pub const DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16];
/// Latent width (`kv_lora_rank`).
pub const LATENT: i64 = 512;
/// Rope width (`qk_rope_head_dim`).
pub const ROPE: i64 = 64;
/// A decode query / cache row: latent then rope.
pub const ROW: i64 = LATENT + ROPE;
/// Prefill query/key width (`qk_nope_head_dim` 128 + rope 64).
pub const PREFILL_QK: i64 = 192;
/// Prefill value width (`v_head_dim`).
pub const PREFILL_V: i64 = 128;
/// The default softmax scale of both ops, `1/sqrt(192)`.
pub const DEFAULT_SCALE: f32 = 0.072_168_78;

/// What a registry call spec lists for the decode ops.
pub const DECODE_INPUTS: &str = "[q [B, H, Sq, 576], cache [B, S_max, 576]] (mla_decode) or [q, cache \
     [blocks, block_size, 576], block_table [B, max_blocks]] (mla_decode_paged); seq_lens is [B] i32, \
     o is [B, H, Sq, 512], lse [B, H, Sq] f32; a trailing [1] asks the harness for ragged lengths";
/// What a registry call spec lists for [`OP_PREFILL`].
pub const PREFILL_INPUTS: &str = "[q [B, H, S, 192], k [B, Hkv, S_k, 192]] (v is [B, Hkv, S_k, 128], \
     o [B, H, S, 128], lse [B, H, S] f32)";

/// Operand indices of a decode call, in this order.
pub mod slot {
    pub const Q: usize = 0;
    pub const CACHE: usize = 1;
    pub const SEQ_LENS: usize = 2;
    /// The block table (paged); any i32 operand for a contiguous cache (unread).
    pub const BLOCK_TABLE: usize = 3;
    pub const O: usize = 4;
    pub const LSE: usize = 5;
    /// f32 scratch (split partials, and the LSE when not asked for).
    pub const SCRATCH: usize = 6;
    /// The same scratch bytes viewed as the call's element type (16-bit split partials).
    pub const SCRATCH_ELEM: usize = 7;
    /// Operands without scratch.
    pub const COUNT: usize = 6;
}

/// Operand indices of a prefill call, in this order.
pub mod prefill_slot {
    pub const Q: usize = 0;
    pub const K: usize = 1;
    pub const V: usize = 2;
    pub const O: usize = 3;
    pub const LSE: usize = 4;
    /// Operands of a call.
    pub const COUNT: usize = 5;
}

/// The latent cache of a decode call.
pub enum LatentCache<'a> {
    /// `[B, S_max, 576]`.
    Contiguous(&'a dyn TensorArg),
    /// `[num_blocks, block_size, 576]` with `block_table: [B, max_blocks]` i32. The entries a
    /// sequence's length reaches must be block ids below `num_blocks` (the host cannot check a
    /// device table; a page past the pool is an undefined load).
    Paged {
        cache: &'a dyn TensorArg,
        block_table: &'a dyn TensorArg,
    },
}

impl std::fmt::Debug for LatentCache<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LatentCache::Contiguous(_) => "LatentCache::Contiguous",
            LatentCache::Paged { .. } => "LatentCache::Paged",
        })
    }
}

/// Options of [`mla_decode`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MlaDecodeOptions {
    /// Softmax scale; `None` is [`DEFAULT_SCALE`] (`1/sqrt(192)`).
    pub scale: Option<f32>,
    /// Splits of the key range; `None` chooses from the SM count and the capacity. Clamped to
    /// `1..=`[`config::MAX_SPLITS`].
    pub splits: Option<u32>,
}

/// Options of [`mla_prefill`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MlaPrefillOptions {
    /// Query `i` sees keys `0..=i` only.
    pub causal: bool,
    /// Softmax scale; `None` is [`DEFAULT_SCALE`].
    pub scale: Option<f32>,
}

fn round_up(x: i64, to: i64) -> i64 {
    (x + to - 1) / to * to
}

fn shape_err(
    op: &'static str,
    what: &str,
    l: impl std::fmt::Debug,
    r: impl std::fmt::Debug,
) -> OpError {
    OpError::Shape {
        op,
        what: what.into(),
        left: format!("{l:?}"),
        right: format!("{r:?}"),
    }
}

fn unsupported(op: &'static str, what: String) -> OpError {
    OpError::Unsupported { op, what }
}

fn layout_err(op: &'static str, o: &Operand, constraint: &str) -> OpError {
    OpError::Layout {
        op,
        arg: o.name,
        shape: o.shape.clone(),
        strides: o.strides.clone(),
        constraint: constraint.into(),
    }
}

fn check_scale(op: &'static str, scale: Option<f32>) -> Result<f32, OpError> {
    let s = scale.unwrap_or(DEFAULT_SCALE);
    if s.is_finite() && s > 0.0 {
        Ok(s)
    } else {
        Err(unsupported(
            op,
            format!("scale must be finite and > 0, got {s}"),
        ))
    }
}

/// The stride of the row axis that axes `a` and `a + 1` of `t` merge into, or a layout error.
fn merged_stride(op: &'static str, t: &Operand, a: usize) -> Result<i64, OpError> {
    let (n0, n1) = (t.shape[a], t.shape[a + 1]);
    let (s0, s1) = (t.strides[a], t.strides[a + 1]);
    if n1 <= 1 {
        Ok(s0)
    } else if n0 <= 1 || s0 == n1 * s1 {
        Ok(s1)
    } else {
        Err(layout_err(
            op,
            t,
            "the head and query axes must merge into one row axis (head stride = Sq · query stride)",
        ))
    }
}

fn last_contiguous(op: &'static str, t: &Operand) -> Result<(), OpError> {
    match (t.shape.last(), t.strides.last()) {
        (Some(&n), Some(&s)) if n > 1 && s != 1 => Err(layout_err(
            op,
            t,
            "the last axis must be contiguous (stride 1)",
        )),
        _ => Ok(()),
    }
}

// ---- Decode ------------------------------------------------------------------------------------------

/// `o = softmax(scale · q·[c, k_rope]ᵀ) · c` per sequence over its first `seq_lens[b]` cache rows,
/// queued on `stream`; the natural-log LSE into `lse` when given. An empty batch is a no-op.
pub fn mla_decode<'a>(
    stream: &'a Stream,
    q: &'a dyn TensorArg,
    cache: &LatentCache<'a>,
    seq_lens: &'a dyn TensorArg,
    options: &MlaDecodeOptions,
    o: &'a mut dyn TensorArgMut,
    lse: Option<&'a mut dyn TensorArgMut>,
) -> Result<Pending<'a>, OpError> {
    let (paged, c, table) = match cache {
        LatentCache::Contiguous(c) => (
            false,
            Operand::of("cache", *c),
            Operand::of("seq_lens", seq_lens),
        ),
        LatentCache::Paged { cache, block_table } => (
            true,
            Operand::of("cache", *cache),
            Operand::of("block_table", *block_table),
        ),
    };
    let qo = Operand::of("q", q);
    let oo = Operand::of("o", &*o);
    let target = Target::of(stream.device())?;
    let lse_shape = qo.shape.get(..3).map(<[i64]>::to_vec).unwrap_or_default();
    let lse_op = match &lse {
        Some(l) => Operand::of("lse", &**l),
        None => Operand {
            name: "lse",
            dtype: ScalarType::F32,
            strides: contiguous_strides(&lse_shape),
            shape: lse_shape.clone(),
            ptr: 0,
            device: target.device,
        },
    };
    let mut operands = vec![qo, c, Operand::of("seq_lens", seq_lens), table, oo, lse_op];
    let op = if paged { OP_DECODE_PAGED } else { OP_DECODE };
    let Some(call) = DecodeCall::new(op, &operands, paged, &target, options)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    // With `CUTILE_TUNE` on, every candidate may run, so the scratch covers them all.
    let tuning = cutile::tune::Tuner::global().mode() != cutile::tune::TuneMode::Off;
    let configs = call.configs(tuning, &target);
    let parts = call.scratch_for(&configs);
    let dummy = if lse.is_none() {
        lse_shape.iter().product::<i64>()
    } else {
        0
    };
    if parts + dummy > 0 {
        let s = crate::op::scratch::scratch(stream, "scratch", ScalarType::F32, parts + dummy)?;
        if lse.is_none() {
            let l = &mut operands[slot::LSE];
            l.ptr = s.ptr + 4 * parts as u64;
            l.device = s.device;
        }
        let e = elem_view(&s, call.dtype);
        operands.extend([s, e]);
    }
    // SAFETY: the operands are the caller's tensors, borrowed for 'a (o and lse exclusively), and the
    // stream's scratch, which lives until exit. Trials redirect `o` to the tuner's scratch and write
    // the same LSE values.
    unsafe {
        crate::op::tuning::run_tuned(
            stream,
            &operands,
            slot::O,
            op,
            call.class(),
            &configs,
            true,
            |c| call.with(*c).launches(&operands),
        )
    }
}

/// A validated decode call.
#[derive(Debug, Clone)]
struct DecodeCall {
    op: &'static str,
    dtype: ScalarType,
    paged: bool,
    b: i64,
    /// Query rows per sequence, `H · Sq`.
    rows: i64,
    sq: i64,
    scale: f32,
    cfg: MlaDecodeConfig,
    /// Keys the cache holds per sequence, and the page size of a paged cache.
    capacity: i64,
    block_size: Option<i64>,
    /// The split count was forced (`MlaDecodeOptions::splits`): never tuned.
    forced: bool,
    /// `q`, `o`, `lse` viewed `[B, R, 576]`, `[B, R, 512]`, `[B, R]`.
    views: [(Vec<i64>, Vec<i64>); 3],
    ops: Vec<Operand>,
}

impl DecodeCall {
    fn new(
        op: &'static str,
        operands: &[Operand],
        paged: bool,
        target: &Target,
        options: &MlaDecodeOptions,
    ) -> Result<Option<DecodeCall>, OpError> {
        let Some([q, c, lens, table, o, lse]) = operands.get(..slot::COUNT) else {
            return Err(unsupported(
                op,
                format!(
                    "takes {} tensors (q, cache, seq_lens, block_table, o, lse), got {}",
                    slot::COUNT,
                    operands.len()
                ),
            ));
        };
        q.expect_dtype(op, DTYPES)?;
        for t in [c, o] {
            t.expect_same_dtype(op, q)?;
        }
        lens.expect_dtype(op, &[ScalarType::I32])?;
        lse.expect_dtype(op, &[ScalarType::F32])?;
        for t in [q, c, lens, o, lse] {
            target.expect_device(op, t)?;
        }
        q.expect_rank(op, 4)?;
        o.expect_rank(op, 4)?;
        c.expect_rank(op, 3)?;
        lens.expect_rank(op, 1)?;
        lse.expect_rank(op, 3)?;
        let (b, h, sq) = (q.shape[0], q.shape[1], q.shape[2]);
        if q.shape[3] != ROW {
            return Err(shape_err(
                op,
                "`q` rows must be 512 latent + 64 rope",
                q.shape[3],
                ROW,
            ));
        }
        if c.shape[2] != ROW {
            return Err(shape_err(
                op,
                "cache rows must be 512 latent + 64 rope",
                c.shape[2],
                ROW,
            ));
        }
        if o.shape[..] != [b, h, sq, LATENT] {
            return Err(shape_err(
                op,
                "`o` must be [B, H, Sq, 512]",
                &o.shape,
                [b, h, sq, LATENT],
            ));
        }
        if lse.shape[..] != q.shape[..3] {
            return Err(shape_err(
                op,
                "`lse` must be `q`'s [B, H, Sq]",
                &lse.shape,
                &q.shape[..3],
            ));
        }
        if lens.shape[0] != b {
            return Err(shape_err(
                op,
                "`seq_lens` length vs the batch of `q`",
                lens.shape[0],
                b,
            ));
        }
        if !(0..=config::MAX_QUERIES).contains(&sq) {
            return Err(unsupported(
                op,
                format!(
                    "{sq} queries per sequence; MLA decode takes 1..={}",
                    config::MAX_QUERIES
                ),
            ));
        }
        for t in [q, c, o] {
            last_contiguous(op, t)?;
        }
        let (capacity, block_size) = if paged {
            table.expect_dtype(op, &[ScalarType::I32])?;
            target.expect_device(op, table)?;
            table.expect_rank(op, 2)?;
            if table.shape[0] != b {
                return Err(shape_err(
                    op,
                    "`block_table` rows vs the batch of `q`",
                    table.shape[0],
                    b,
                ));
            }
            let bs = c.shape[1];
            if !config::BLOCK_SIZES.contains(&bs) {
                return Err(unsupported(
                    op,
                    format!(
                        "block size {bs}; the kernels take {:?}",
                        config::BLOCK_SIZES
                    ),
                ));
            }
            (table.shape[1] * bs, Some(bs))
        } else {
            if c.shape[0] != b {
                return Err(shape_err(
                    op,
                    "batch (axis 0) of the cache vs `q`",
                    c.shape[0],
                    b,
                ));
            }
            (c.shape[1], None)
        };
        let scale = check_scale(op, options.scale)?;
        if q.numel() == 0 {
            return Ok(None);
        }
        let rows = h * sq;
        let qs = merged_stride(op, q, 1)?;
        let os = merged_stride(op, o, 1)?;
        let ls = merged_stride(op, lse, 1)?;
        if i32::try_from(capacity).is_err() || i32::try_from(rows).is_err() {
            return Err(unsupported(
                op,
                format!("a cache of {capacity} keys or {rows} query rows per sequence exceeds i32"),
            ));
        }
        let cfg = config::choose(
            target,
            rows,
            b,
            capacity,
            block_size,
            options.splits.map(i64::from),
        );
        if b > i64::from(u16::MAX) * 1024 || cfg.y_blocks(rows) > i64::from(u16::MAX) {
            return Err(unsupported(
                op,
                format!("grid of {b} x {} blocks is too large", cfg.y_blocks(rows)),
            ));
        }
        let views = [
            (vec![b, rows, ROW], vec![q.strides[0], qs, 1]),
            (vec![b, rows, LATENT], vec![o.strides[0], os, 1]),
            (vec![b, rows], vec![lse.strides[0], ls]),
        ];
        Ok(Some(DecodeCall {
            op,
            dtype: q.dtype,
            paged,
            b,
            rows,
            sq,
            scale,
            cfg,
            capacity,
            block_size,
            forced: options.splits.is_some(),
            views,
            ops: operands[..slot::COUNT].to_vec(),
        }))
    }

    /// The same call with configuration `cfg`.
    fn with(&self, cfg: MlaDecodeConfig) -> DecodeCall {
        DecodeCall {
            cfg,
            ..self.clone()
        }
    }

    /// The configurations to consider: the table's, and with `all` (tuning on, or a plan for a
    /// tuning run's bundle) every candidate ([`config::candidates`]); a forced split count is never
    /// tuned.
    fn configs(&self, all: bool, target: &Target) -> Vec<MlaDecodeConfig> {
        if all && !self.forced {
            config::candidates(
                target,
                self.rows,
                self.b,
                self.capacity,
                self.block_size,
                self.cfg,
            )
        } else {
            vec![self.cfg]
        }
    }

    /// f32 elements of scratch any of `configs` needs.
    fn scratch_for(&self, configs: &[MlaDecodeConfig]) -> i64 {
        configs
            .iter()
            .map(|c| self.with(*c).scratch_elems())
            .max()
            .unwrap_or(0)
    }

    /// The tuning class: the call's shape, not its configuration.
    fn class(&self) -> String {
        let table = if self.paged {
            &self.ops[slot::BLOCK_TABLE].shape
        } else {
            &self.ops[slot::SEQ_LENS].shape
        };
        format!(
            "{} b{} rows{} cache{:?} table{:?}",
            self.dtype,
            self.b,
            self.rows,
            self.ops[slot::CACHE].shape,
            table
        )
    }

    /// The element type the split kernel stores its partial outputs in.
    fn partial_dtype(&self) -> ScalarType {
        if self.cfg.elem_partials {
            self.dtype
        } else {
            ScalarType::F32
        }
    }

    /// f32 elements of scratch the split partials need (0 with one split), a multiple of 64: the
    /// LSEs, then the outputs (of [`Self::partial_dtype`], packed into f32 elements).
    fn scratch_elems(&self) -> i64 {
        let c = &self.cfg;
        if c.splits <= 1 {
            return 0;
        }
        let n = self.b * c.y_blocks(self.rows) * c.splits * c.m;
        let bytes = n * c.dv * self.partial_dtype().storage_bytes() as i64;
        round_up(n, 64) + round_up((bytes + 3) / 4, 64)
    }

    fn view(&self, slot: usize, which: usize, output: bool) -> PlannedArg {
        PlannedArg::Tensor {
            operand: slot,
            output,
            shape: self.views[which].0.clone(),
            strides: self.views[which].1.clone(),
            offset: 0,
        }
    }

    fn launches(&self, operands: &[Operand]) -> Result<Vec<PlannedLaunch>, OpError> {
        use kernels as kn;
        let op = self.op;
        let c = &self.cfg;
        let missing = || {
            unsupported(
                op,
                format!(
                    "no {} kernel for `{}` paged={}",
                    self.dtype,
                    c.name(),
                    self.paged
                ),
            )
        };
        let y = c.y_blocks(self.rows);
        let grid = |z: i64, rows_fast: bool| -> Result<(u32, u32, u32), OpError> {
            let f =
                |n: i64| u32::try_from(n).map_err(|_| unsupported(op, format!("grid extent {n}")));
            let (gx, gy) = if rows_fast { (y, self.b) } else { (self.b, y) };
            if gy > i64::from(u16::MAX) {
                return Err(unsupported(
                    op,
                    format!("grid y extent {gy} of `{}` exceeds 65535", c.name()),
                ));
            }
            Ok((f(gx)?, f(gy)?, f(z)?))
        };
        let ops = &self.ops;
        let table = if self.paged {
            PlannedArg::whole(slot::BLOCK_TABLE, &ops[slot::BLOCK_TABLE], false)
        } else {
            PlannedArg::Tensor {
                operand: slot::SEQ_LENS,
                output: false,
                shape: vec![1, self.b],
                strides: vec![self.b, 1],
                offset: 0,
            }
        };
        let inputs = vec![
            self.view(slot::Q, 0, false),
            PlannedArg::whole(slot::CACHE, &ops[slot::CACHE], false),
            PlannedArg::whole(slot::SEQ_LENS, &ops[slot::SEQ_LENS], false),
            table,
            PlannedArg::F32(self.scale),
            PlannedArg::I32(self.sq as i32),
            PlannedArg::I32(c.chunk as i32),
            PlannedArg::I32(i32::from(c.rows_fast)),
        ];
        let outputs = vec![self.view(slot::O, 1, true), self.view(slot::LSE, 2, true)];
        // `$p`: the partial's element type for the split kernel (`E` or `f32`), nothing for the
        // direct one.
        macro_rules! pick {
            ($k:ident, [$($p:ty)?], $($extra:tt)*) => {
                crate::op::mma_kernel!(self.dtype, |E| match (c.m, c.bn, c.dv) {
                    (64, 16, 256) => Some(kn::$k::kernel::<E, $($p,)? 64, 16, 256, $($extra)*>()),
                    (64, 32, 256) => Some(kn::$k::kernel::<E, $($p,)? 64, 32, 256, $($extra)*>()),
                    (64, 64, 256) => Some(kn::$k::kernel::<E, $($p,)? 64, 64, 256, $($extra)*>()),
                    (64, 16, 512) => Some(kn::$k::kernel::<E, $($p,)? 64, 16, 512, $($extra)*>()),
                    (64, 32, 512) => Some(kn::$k::kernel::<E, $($p,)? 64, 32, 512, $($extra)*>()),
                    _ => None,
                })
                .flatten()
                .map(|k| match i32::try_from(c.workers) {
                    Ok(w) if w > 0 => k.with_hint("default", "num_worker_warps_per_cta", w),
                    _ => k,
                })
            };
        }
        if c.splits <= 1 {
            let kernel = if self.paged {
                pick!(mla_decode_direct, [], true)
            } else {
                pick!(mla_decode_direct, [], false)
            }
            .ok_or_else(missing)?;
            return Ok(vec![PlannedLaunch {
                kernel,
                args: [inputs, outputs].concat(),
                grid: Some(grid(1, c.rows_fast)?),
                config: c.name(),
            }]);
        }
        let scratch_slot = if c.elem_partials {
            slot::SCRATCH_ELEM
        } else {
            slot::SCRATCH
        };
        let s = operands.get(slot::SCRATCH).ok_or_else(|| {
            unsupported(
                op,
                format!(
                    "`{}` splits the keys and needs a scratch operand after the call's tensors (use \
                     `mla::with_scratch`)",
                    c.name()
                ),
            )
        })?;
        if s.dtype != ScalarType::F32 || s.numel() < self.scratch_elems() {
            return Err(unsupported(
                op,
                format!(
                    "the scratch operand holds {} {} elements; the call needs {} f32",
                    s.numel(),
                    s.dtype,
                    self.scratch_elems()
                ),
            ));
        }
        let viewed = operands.get(scratch_slot).is_some_and(|e| {
            e.dtype == self.partial_dtype()
                && e.ptr == s.ptr
                && e.numel() * e.elem_bytes() as i64 >= self.scratch_elems() * 4
        });
        if !viewed {
            return Err(unsupported(
                op,
                format!(
                    "`{}` stores 16-bit partials and needs the scratch viewed as {} after it \
                     (use `mla::with_scratch`)",
                    c.name(),
                    self.dtype
                ),
            ));
        }
        let by = self.b * y;
        let lse_shape = vec![by, c.splits, c.m];
        let o_shape = vec![by, c.splits, c.m, c.dv];
        let tensor =
            |operand: usize, output: bool, shape: &Vec<i64>, offset: i64| PlannedArg::Tensor {
                operand,
                output,
                strides: contiguous_strides(shape),
                shape: shape.clone(),
                offset,
            };
        // The outputs start after the LSEs: offset `o_off` f32 elements, in the view's elements.
        let o_off =
            round_up(by * c.splits * c.m, 64) * 4 / self.partial_dtype().storage_bytes() as i64;
        let partial = match (self.paged, c.elem_partials) {
            (true, true) => pick!(mla_decode_partial, [E], true),
            (false, true) => pick!(mla_decode_partial, [E], false),
            (true, false) => pick!(mla_decode_partial, [f32], true),
            (false, false) => pick!(mla_decode_partial, [f32], false),
        }
        .ok_or_else(missing)?;
        // Combine tiles: whole row tiles at 8–32 lanes (both partial types), and with 16-bit
        // partials the same element counts as fewer rows of 64–256 lanes (the tuner's
        // `combine_rows` candidates).
        macro_rules! combine {
            ($p:ty, [$(($mb:literal, $dv:literal, $db:literal)),*]) => {
                crate::op::mma_kernel!(self.dtype, |E| match (c.m, c.combine_rows, c.dv, c.lanes) {
                    $((64, $mb, $dv, $db) => {
                        Some(kn::mla_decode_combine::kernel::<E, $p, 64, $mb, $dv, $db>())
                    })*
                    _ => None,
                })
            };
        }
        macro_rules! whole_rows {
            ($p:ty $(, $extra:tt)*) => {
                combine!($p, [
                    (64, 256, 32), (64, 256, 16), (64, 256, 8),
                    (64, 512, 32), (64, 512, 16), (64, 512, 8)
                    $(, $extra)*
                ])
            };
        }
        let combine = if c.elem_partials {
            whole_rows!(
                E,
                (32, 256, 64),
                (16, 256, 128),
                (8, 256, 256),
                (16, 256, 64),
                (8, 256, 128),
                (4, 256, 256),
                (8, 256, 64),
                (4, 256, 128),
                (2, 256, 256)
            )
        } else {
            whole_rows!(f32)
        }
        .flatten()
        .ok_or_else(missing)?;
        Ok(vec![
            PlannedLaunch {
                kernel: partial,
                args: [
                    inputs,
                    vec![
                        tensor(scratch_slot, true, &o_shape, o_off),
                        tensor(slot::SCRATCH, true, &lse_shape, 0),
                    ],
                ]
                .concat(),
                grid: Some(grid(c.splits, c.rows_fast)?),
                config: c.name(),
            },
            PlannedLaunch {
                kernel: combine,
                args: [
                    vec![
                        tensor(scratch_slot, false, &o_shape, o_off),
                        tensor(slot::SCRATCH, false, &lse_shape, 0),
                    ],
                    outputs,
                ]
                .concat(),
                grid: Some(grid((c.m / c.combine_rows) * (c.dv / c.lanes), false)?),
                config: format!("{} combine", c.name()),
            },
        ])
    }
}

/// `operands` (a decode call's [`slot::COUNT`] tensors) followed by a described f32 scratch for the
/// split partials when the call splits.
pub fn with_scratch(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &MlaDecodeOptions,
) -> Result<Vec<Operand>, OpError> {
    with_scratch_for(operands, paged, target, options, false)
}

/// [`with_scratch`], the scratch covering every tuning candidate when `all`.
pub fn with_scratch_for(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &MlaDecodeOptions,
    all: bool,
) -> Result<Vec<Operand>, OpError> {
    let op = if paged { OP_DECODE_PAGED } else { OP_DECODE };
    let mut out = operands.to_vec();
    if let Some(call) = DecodeCall::new(op, operands, paged, target, options)? {
        let elems = call.scratch_for(&call.configs(all, target));
        if elems > 0 {
            out.truncate(slot::COUNT);
            let s = Operand::described("scratch", slot::SCRATCH, ScalarType::F32, &[elems]);
            let e = elem_view(&s, call.dtype);
            out.extend([s, e]);
        }
    }
    Ok(out)
}

/// The f32 scratch `s` viewed as `dtype` (same address, as many whole elements as its bytes hold):
/// the [`slot::SCRATCH_ELEM`] operand.
fn elem_view(s: &Operand, dtype: ScalarType) -> Operand {
    let n = s.numel() * s.elem_bytes() as i64 / dtype.storage_bytes().max(1) as i64;
    Operand {
        name: "scratch_elem",
        dtype,
        shape: vec![n],
        strides: vec![1],
        ..s.clone()
    }
}

/// The launches of a decode call over `operands` ([`with_scratch`]'s list): `mla_decode_direct`, or
/// `mla_decode_partial` then `mla_decode_combine` when the keys are split.
pub fn plan_decode(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &MlaDecodeOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_decode_all(operands, paged, target, options, false)
}

/// [`plan_decode`], and with `all` the launches of every tuning candidate after the table's (what a
/// bundle for a tuning run must hold; operands from [`with_scratch_for`] with the same `all`).
pub fn plan_decode_all(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &MlaDecodeOptions,
    all: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = if paged { OP_DECODE_PAGED } else { OP_DECODE };
    let Some(call) = DecodeCall::new(op, operands, paged, target, options)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for c in call.configs(all, target) {
        out.extend(call.with(c).launches(operands)?);
    }
    Ok(out)
}

/// The configuration a decode call gets (for tests and reports).
pub fn decode_config_of(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &MlaDecodeOptions,
) -> Result<Option<MlaDecodeConfig>, OpError> {
    let op = if paged { OP_DECODE_PAGED } else { OP_DECODE };
    Ok(DecodeCall::new(op, operands, paged, target, options)?.map(|c| c.cfg))
}

// ---- Prefill -----------------------------------------------------------------------------------------

/// MLA prefill `o = softmax(q kᵀ · scale) v` (`D_qk` 192, `D_v` 128), queued on `stream`; the
/// natural-log LSE into `lse` when given. An empty batch is a no-op.
#[allow(clippy::too_many_arguments)]
pub fn mla_prefill<'a>(
    stream: &'a Stream,
    q: &'a dyn TensorArg,
    k: &'a dyn TensorArg,
    v: &'a dyn TensorArg,
    options: &MlaPrefillOptions,
    o: &'a mut dyn TensorArgMut,
    lse: Option<&'a mut dyn TensorArgMut>,
) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let qo = Operand::of("q", q);
    let lse_shape = qo.shape.get(..3).map(<[i64]>::to_vec).unwrap_or_default();
    let lse_op = match &lse {
        Some(l) => Operand::of("lse", &**l),
        None => Operand {
            name: "lse",
            dtype: ScalarType::F32,
            strides: contiguous_strides(&lse_shape),
            shape: lse_shape.clone(),
            ptr: 0,
            device: target.device,
        },
    };
    let mut operands = vec![
        qo,
        Operand::of("k", k),
        Operand::of("v", v),
        Operand::of("o", &*o),
        lse_op,
    ];
    let Some(call) = PrefillCall::new(&operands, &target, options)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    if lse.is_none() {
        let s = crate::op::scratch::scratch(
            stream,
            "scratch",
            ScalarType::F32,
            lse_shape.iter().product::<i64>(),
        )?;
        let l = &mut operands[prefill_slot::LSE];
        l.ptr = s.ptr;
        l.device = s.device;
    }
    let plan = call.launches()?;
    // SAFETY: the operands are the caller's tensors, borrowed for 'a (o and lse exclusively), or the
    // stream's scratch, which lives until exit.
    unsafe { crate::op::execute(stream, &operands, &plan) }
}

/// A validated prefill call.
#[derive(Debug, Clone)]
struct PrefillCall {
    dtype: ScalarType,
    causal: bool,
    scale: f32,
    bh: i64,
    seq: i64,
    ops: Vec<Operand>,
}

/// Prefill query rows per block.
pub const PREFILL_BM: i64 = 64;
/// Prefill key rows per tile.
pub const PREFILL_BN: i64 = 64;

impl PrefillCall {
    fn new(
        operands: &[Operand],
        target: &Target,
        options: &MlaPrefillOptions,
    ) -> Result<Option<PrefillCall>, OpError> {
        let op = OP_PREFILL;
        let Some([q, k, v, o, lse]) = operands.get(..prefill_slot::COUNT) else {
            return Err(unsupported(
                op,
                format!("takes 5 tensors (q, k, v, o, lse), got {}", operands.len()),
            ));
        };
        q.expect_dtype(op, DTYPES)?;
        for t in [k, v, o] {
            t.expect_same_dtype(op, q)?;
        }
        lse.expect_dtype(op, &[ScalarType::F32])?;
        for t in [q, k, v, o, lse] {
            target.expect_device(op, t)?;
        }
        for t in [q, k, v, o] {
            t.expect_rank(op, 4)?;
            last_contiguous(op, t)?;
        }
        lse.expect_rank(op, 3)?;
        let (b, h, s) = (q.shape[0], q.shape[1], q.shape[2]);
        if q.shape[3] != PREFILL_QK || k.shape[3] != PREFILL_QK {
            return Err(shape_err(
                op,
                "`q` and `k` head dims must be 192 (128 nope + 64 rope)",
                [q.shape[3], k.shape[3]],
                [PREFILL_QK, PREFILL_QK],
            ));
        }
        let (hkv, sk) = (k.shape[1], k.shape[2]);
        if k.shape[0] != b {
            return Err(shape_err(op, "batch of `k` vs `q`", k.shape[0], b));
        }
        if v.shape[..] != [b, hkv, sk, PREFILL_V] {
            return Err(shape_err(
                op,
                "`v` must be [B, Hkv, S_k, 128]",
                &v.shape,
                [b, hkv, sk, PREFILL_V],
            ));
        }
        if o.shape[..] != [b, h, s, PREFILL_V] {
            return Err(shape_err(
                op,
                "`o` must be [B, H, S, 128]",
                &o.shape,
                [b, h, s, PREFILL_V],
            ));
        }
        if lse.shape[..] != q.shape[..3] {
            return Err(shape_err(
                op,
                "`lse` must be `q`'s [B, H, S]",
                &lse.shape,
                &q.shape[..3],
            ));
        }
        if hkv == 0 && h > 0 || hkv > 0 && h % hkv != 0 {
            return Err(shape_err(
                op,
                "the heads of `k` must divide `q`'s heads (grouped-query attention)",
                hkv,
                h,
            ));
        }
        let scale = check_scale(op, options.scale)?;
        if q.numel() == 0 {
            return Ok(None);
        }
        if sk == 0 {
            return Err(unsupported(op, "`k` and `v` hold no keys (S_k = 0)".into()));
        }
        if i32::try_from(s.max(sk)).is_err() {
            return Err(unsupported(
                op,
                format!("sequence of {} exceeds i32", s.max(sk)),
            ));
        }
        let tiles = (s + PREFILL_BM - 1) / PREFILL_BM;
        if b * h > i64::from(i32::MAX) || tiles > i64::from(u16::MAX) {
            return Err(unsupported(
                op,
                format!("grid of {} x {tiles} blocks is too large", b * h),
            ));
        }
        Ok(Some(PrefillCall {
            dtype: q.dtype,
            causal: options.causal,
            scale,
            bh: b * h,
            seq: s,
            ops: operands[..prefill_slot::COUNT].to_vec(),
        }))
    }

    fn launches(&self) -> Result<Vec<PlannedLaunch>, OpError> {
        use kernels as kn;
        let kernel = crate::op::mma_kernel!(self.dtype, |E| if self.causal {
            kn::mla_prefill::kernel::<E, 64, 64, true>()
        } else {
            kn::mla_prefill::kernel::<E, 64, 64, false>()
        })
        .ok_or_else(|| unsupported(OP_PREFILL, format!("no {} kernel", self.dtype)))?;
        let tiles = (self.seq + PREFILL_BM - 1) / PREFILL_BM;
        let ops = &self.ops;
        let w = |i: usize, out: bool| PlannedArg::whole(i, &ops[i], out);
        Ok(vec![PlannedLaunch {
            kernel,
            args: vec![
                w(prefill_slot::Q, false),
                w(prefill_slot::K, false),
                w(prefill_slot::V, false),
                PlannedArg::F32(self.scale),
                w(prefill_slot::O, true),
                w(prefill_slot::LSE, true),
            ],
            grid: Some((self.bh as u32, tiles as u32, 1)),
            config: format!(
                "mla_prefill BM={PREFILL_BM} BN={PREFILL_BN} causal={}",
                self.causal
            ),
        }])
    }
}

/// The launches of a prefill call over its [`prefill_slot::COUNT`] operands.
pub fn plan_prefill(
    operands: &[Operand],
    target: &Target,
    options: &MlaPrefillOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    match PrefillCall::new(operands, target, options)? {
        None => Ok(Vec::new()),
        Some(c) => c.launches(),
    }
}

// ---- Registry ----------------------------------------------------------------------------------------

/// The described operands of a registry decode call of `op` ([`OP_DECODE`] or [`OP_DECODE_PAGED`],
/// shapes as [`DECODE_INPUTS`]; a trailing `[1]` flag is ignored), and whether the cache is paged.
pub fn described_call(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<(Vec<Operand>, bool), OpError> {
    let paged = op == OP_DECODE_PAGED;
    let name = if paged { OP_DECODE_PAGED } else { OP_DECODE };
    let bad = || {
        unsupported(
            name,
            format!("a call spec of `{op}` lists {DECODE_INPUTS}, got {shapes:?}"),
        )
    };
    let shapes = match shapes.split_last() {
        Some((flag, rest)) if flag.len() == 1 && rest.len() == 2 + usize::from(paged) => rest,
        _ => shapes,
    };
    let (q, cache, table) = match (paged, shapes) {
        (false, [q, c]) => (q, c, None),
        (true, [q, c, t]) => (q, c, Some(t)),
        _ => return Err(bad()),
    };
    if q.len() != 4 || cache.len() != 3 || table.is_some_and(|t| t.len() != 2) {
        return Err(bad());
    }
    let d = Operand::described;
    let b = q[0];
    let table = match table {
        Some(t) => d("block_table", slot::BLOCK_TABLE, ScalarType::I32, t),
        None => d("seq_lens", slot::SEQ_LENS, ScalarType::I32, &[b]),
    };
    let o = [q[0], q[1], q[2], LATENT];
    Ok((
        vec![
            d("q", slot::Q, dt, q),
            d("cache", slot::CACHE, dt, cache),
            d("seq_lens", slot::SEQ_LENS, ScalarType::I32, &[b]),
            table,
            d("o", slot::O, dt, &o),
            d("lse", slot::LSE, ScalarType::F32, &q[..3]),
        ],
        paged,
    ))
}

/// The described operands of a registry prefill call (`[q, k]`, shapes as [`PREFILL_INPUTS`]).
pub fn described_prefill(dt: ScalarType, shapes: &[Vec<i64>]) -> Result<Vec<Operand>, OpError> {
    let (q, k) = match shapes {
        [q, k] | [q, k, _] if q.len() == 4 && k.len() == 4 => (q, k),
        _ => {
            return Err(unsupported(
                OP_PREFILL,
                format!("a call spec lists {PREFILL_INPUTS}, got {shapes:?}"),
            ));
        }
    };
    let d = Operand::described;
    let v = [k[0], k[1], k[2], PREFILL_V];
    let o = [q[0], q[1], q[2], PREFILL_V];
    Ok(vec![
        d("q", prefill_slot::Q, dt, q),
        d("k", prefill_slot::K, dt, k),
        d("v", prefill_slot::V, dt, &v),
        d("o", prefill_slot::O, dt, &o),
        d("lse", prefill_slot::LSE, ScalarType::F32, &q[..3]),
    ])
}

/// The calls the catalog compiles (a cubin each per arch in CI; four specializations): bf16 decode
/// H 128 contiguous with splits and the combine, paged 64-token blocks one split; prefill causal. H 16
/// and Sq 2 run the same kernels (one 64-row tile), checked by `cutile_examples::mla::check_calls`.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    vec![
        // B = 1, H 128, 32k keys: splits + combine (M 64, two row tiles).
        c(
            OP_DECODE,
            "bf16",
            &[&[1, 128, 1, 576], &[1, 32768, 576]],
            false,
        ),
        // Paged, 64-token blocks, B = 128 (512 blocks): one split.
        c(
            OP_DECODE_PAGED,
            "bf16",
            &[&[128, 128, 1, 576], &[128 * 16, 64, 576], &[128, 16]],
            false,
        ),
        // Prefill, causal.
        c(
            OP_PREFILL,
            "bf16",
            &[&[1, 16, 1024, 192], &[1, 16, 1024, 192]],
            true,
        ),
    ]
}
