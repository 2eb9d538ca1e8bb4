//! Attention decode: a few query tokens per sequence (1, or 2–8 for speculative decoding) against a
//! KV cache, contiguous `[B, Hkv, S_max, D]` or paged `[blocks, block_size, Hkv, D]` (vLLM) with a
//! block table, per-sequence lengths on the device, split over the keys (flash-decoding) with an
//! LSE-weighted combine (a second launch, or in the same launch by the last split of a sequence's KV
//! head: a tuning candidate).
//!
//! - `dsl`: the kernels (split partials, combine, the one-launch split with its combine, one-split
//!   direct);
//! - [`config`]: the query tile, key tile and split count of a call;
//! - [`reference`]: the CPU reference;
//! - [`plan`]: the launches of a call, without a device; [`decode`]: the op.
//!
//! Shapes: `q`, `o`: `[B, Hq, Sq, D]` (any strides), `seq_lens: [B]` i32, `lse: [B, Hq, Sq]` f32
//! (optional), `block_table: [B, max_blocks]` i32. The `Sq` queries of a sequence are its last `Sq`
//! positions: query `i` sees keys `0 ..= seq_lens[b] − Sq + i`. Lengths are clamped to `[0,
//! capacity]`; a query that sees no key gets zeros and LSE −inf. GQA: KV head `h / (Hq / Hkv)`.

pub mod config;
mod dsl;
pub mod reference;

pub use config::DecodeConfig;
pub use dsl::kernels;
pub use reference::{CacheRef, decode_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::attention::online::MERGE_LANES;
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, contiguous_strides};

/// The op over a contiguous cache.
pub const OP: &str = "attention_decode";
/// The op over a paged cache.
pub const OP_PAGED: &str = "attention_decode_paged";
/// Element types with a kernel (q, the cache, o).
pub const DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16];
/// What a registry call spec lists for [`OP`] and [`OP_PAGED`].
pub const SPEC_INPUTS: &str = "[q [B, Hq, Sq, D], cache [B, Hkv, S_max, D]] (contiguous) or [q, cache \
     [blocks, block_size, Hkv, D], block_table [B, max_blocks]] (paged); v has the cache's shape, \
     seq_lens is [B] i32, o has q's shape, lse is [B, Hq, Sq] f32; a trailing [1] asks the harness for \
     ragged lengths";

/// Operand indices of a call, in this order.
pub mod slot {
    pub const Q: usize = 0;
    pub const K: usize = 1;
    pub const V: usize = 2;
    pub const SEQ_LENS: usize = 3;
    /// The block table (paged); any i32 operand for a contiguous cache (unread).
    pub const BLOCK_TABLE: usize = 4;
    pub const O: usize = 5;
    pub const LSE: usize = 6;
    /// f32 scratch of the split partials (only when the call splits).
    pub const SCRATCH: usize = 7;
    /// i32 counters of the one-launch split (`decode_split_last`), one per `(b, kvh)`, zero between
    /// launches (the stream's counter pool; only when a configuration merges in the same launch).
    pub const COUNTERS: usize = 8;
    /// Operands without scratch.
    pub const COUNT: usize = 7;
}

/// The KV cache of a call.
pub enum KvCache<'a> {
    /// `k`, `v: [B, Hkv, S_max, D]`.
    Contiguous {
        k: &'a dyn TensorArg,
        v: &'a dyn TensorArg,
    },
    /// `k`, `v: [num_blocks, block_size, Hkv, D]` (block size a power of two in 16..=256),
    /// `block_table: [B, max_blocks]` i32. The entries a sequence's length reaches must be block ids
    /// below `num_blocks`: the table lives on the device, so the host cannot check them, and a page
    /// past the pool is an undefined load (entries past the length are never read).
    Paged {
        k: &'a dyn TensorArg,
        v: &'a dyn TensorArg,
        block_table: &'a dyn TensorArg,
    },
}

impl std::fmt::Debug for KvCache<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KvCache::Contiguous { .. } => "KvCache::Contiguous",
            KvCache::Paged { .. } => "KvCache::Paged",
        })
    }
}

/// Options of [`decode`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DecodeOptions {
    /// Softmax scale; `None` is `1/sqrt(D)`.
    pub scale: Option<f32>,
    /// Splits of the key range; `None` chooses from the SM count and the cache capacity
    /// ([`config::choose`]). Clamped to `1..=`[`config::MAX_SPLITS`].
    pub splits: Option<u32>,
    /// Merge the splits in the split launch (`decode_split_last`) instead of a second launch; ignored
    /// when the call runs one split. Not a default (not yet timed on a GPU): tests force it; a forced
    /// configuration is never tuned.
    pub one_launch: bool,
}

/// `o = softmax(q kᵀ · scale) v` per sequence over its first `seq_lens[b]` cached keys, queued on
/// `stream`; the natural-log LSE of the scaled scores into `lse` when given. An empty batch (or no
/// query) is a no-op.
pub fn decode<'a>(
    stream: &'a Stream,
    q: &'a dyn TensorArg,
    cache: &KvCache<'a>,
    seq_lens: &'a dyn TensorArg,
    options: &DecodeOptions,
    o: &'a mut dyn TensorArgMut,
    lse: Option<&'a mut dyn TensorArgMut>,
) -> Result<Pending<'a>, OpError> {
    let (paged, k, v, table) = match cache {
        KvCache::Contiguous { k, v } => (
            false,
            Operand::of("k_cache", *k),
            Operand::of("v_cache", *v),
            Operand::of("seq_lens", seq_lens),
        ),
        KvCache::Paged { k, v, block_table } => (
            true,
            Operand::of("k_cache", *k),
            Operand::of("v_cache", *v),
            Operand::of("block_table", *block_table),
        ),
    };
    let qo = Operand::of("q", q);
    let oo = Operand::of("o", &*o);
    let target = Target::of(stream.device())?;
    // The LSE goes to scratch when not asked for: validate with a stand-in of its shape.
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
        k,
        v,
        Operand::of("seq_lens", seq_lens),
        table,
        oo,
        lse_op,
    ];
    let Some(call) = Call::new(&operands, paged, &target, options)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    // With `CUTILE_TUNE` on, every candidate split count may run, so the scratch covers them all.
    let tuning = cutile::tune::Tuner::global().mode() != cutile::tune::TuneMode::Off;
    let configs = call.configs(tuning, options);
    let parts = call.scratch_for(&configs);
    let dummy = if lse.is_none() {
        lse_shape.iter().product::<i64>()
    } else {
        0
    };
    if parts + dummy > 0 {
        let parts_aligned = round_up(parts, 64);
        let s =
            crate::op::scratch::scratch(stream, "scratch", ScalarType::F32, parts_aligned + dummy)?;
        if lse.is_none() {
            let l = &mut operands[slot::LSE];
            l.ptr = s.ptr + 4 * parts_aligned as u64;
            l.device = s.device;
        }
        operands.push(s);
        let n = call.counters_for(&configs);
        if n > 0 {
            operands.push(crate::op::scratch::counters(stream, "counters", n)?);
        }
    }
    let op = if paged { OP_PAGED } else { OP };
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

fn round_up(x: i64, to: i64) -> i64 {
    (x + to - 1) / to * to
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    paged: bool,
    b: i64,
    hkv: i64,
    d: i64,
    scale: f32,
    /// Keys the cache holds per sequence.
    capacity: i64,
    cfg: DecodeConfig,
    ops: Vec<Operand>,
}

fn shape_err(what: &str, l: impl std::fmt::Debug, r: impl std::fmt::Debug) -> OpError {
    OpError::Shape {
        op: OP,
        what: what.into(),
        left: format!("{l:?}"),
        right: format!("{r:?}"),
    }
}

fn unsupported(what: String) -> OpError {
    OpError::Unsupported { op: OP, what }
}

fn layout_err(o: &Operand, constraint: &str) -> OpError {
    OpError::Layout {
        op: OP,
        arg: o.name,
        shape: o.shape.clone(),
        strides: o.strides.clone(),
        constraint: constraint.into(),
    }
}

impl Call {
    /// Checks the operands ([`slot::COUNT`] of them; scratch after them is ignored); `None` when the
    /// call has nothing to compute (no sequence, head or query).
    fn new(
        operands: &[Operand],
        paged: bool,
        target: &Target,
        options: &DecodeOptions,
    ) -> Result<Option<Call>, OpError> {
        let Some([q, k, v, lens, table, o, lse]) = operands.get(..slot::COUNT) else {
            return Err(unsupported(format!(
                "takes {} tensors (q, k_cache, v_cache, seq_lens, block_table, o, lse), got {}",
                slot::COUNT,
                operands.len()
            )));
        };
        q.expect_dtype(OP, DTYPES)?;
        for t in [k, v, o] {
            t.expect_same_dtype(OP, q)?;
        }
        lens.expect_dtype(OP, &[ScalarType::I32])?;
        lse.expect_dtype(OP, &[ScalarType::F32])?;
        for t in [q, k, v, lens, o, lse] {
            target.expect_device(OP, t)?;
        }
        for t in [q, k, v, o] {
            t.expect_rank(OP, 4)?;
        }
        lens.expect_rank(OP, 1)?;
        lse.expect_rank(OP, 3)?;
        o.expect_same_shape(OP, q)?;
        v.expect_same_shape(OP, k)?;
        let (b, hq, sq, d) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
        if lse.shape[..] != q.shape[..3] {
            return Err(shape_err(
                "`lse` must be `q`'s [B, Hq, Sq]",
                &lse.shape,
                &q.shape[..3],
            ));
        }
        if lens.shape[0] != b {
            return Err(shape_err(
                "`seq_lens` length vs the batch of `q`",
                lens.shape[0],
                b,
            ));
        }
        if !config::HEAD_DIMS.contains(&d) {
            return Err(unsupported(format!(
                "head dimension {d}; the kernels take {:?}",
                config::HEAD_DIMS
            )));
        }
        if k.shape[3] != d {
            return Err(shape_err(
                "the cache's head dimension vs `q`'s",
                k.shape[3],
                d,
            ));
        }
        if !(0..=config::MAX_QUERIES).contains(&sq) {
            return Err(unsupported(format!(
                "{sq} queries per sequence; decode takes 1..={}",
                config::MAX_QUERIES
            )));
        }
        for t in [k, v] {
            if t.shape[3] > 1 && t.strides[3] != 1 {
                return Err(layout_err(
                    t,
                    "the head dimension must be contiguous (stride 1)",
                ));
            }
        }
        let (hkv, capacity, block_size) = if paged {
            table.expect_dtype(OP, &[ScalarType::I32])?;
            target.expect_device(OP, table)?;
            table.expect_rank(OP, 2)?;
            if table.shape[0] != b {
                return Err(shape_err(
                    "`block_table` rows vs the batch of `q`",
                    table.shape[0],
                    b,
                ));
            }
            let bs = k.shape[1];
            if !config::BLOCK_SIZES.contains(&bs) {
                return Err(unsupported(format!(
                    "block size {bs}; the kernels take {:?}",
                    config::BLOCK_SIZES
                )));
            }
            (k.shape[2], table.shape[1] * bs, Some(bs))
        } else {
            if k.shape[0] != b {
                return Err(shape_err(
                    "batch (axis 0) of the cache vs `q`",
                    k.shape[0],
                    b,
                ));
            }
            (k.shape[1], k.shape[2], None)
        };
        if hkv == 0 || hq % hkv != 0 {
            return Err(shape_err(
                "the cache's heads must divide `q`'s heads (grouped-query attention)",
                hkv,
                hq,
            ));
        }
        let rows = hq / hkv * sq;
        if rows > config::MAX_ROWS {
            return Err(unsupported(format!(
                "{} query heads per KV head times {sq} queries = {rows} rows; the kernels take at \
                 most {}",
                hq / hkv,
                config::MAX_ROWS
            )));
        }
        let scale = options.scale.unwrap_or(1.0 / (d as f32).sqrt());
        if !(scale.is_finite() && scale > 0.0) {
            return Err(unsupported(format!(
                "scale must be finite and > 0, got {scale}"
            )));
        }
        if q.numel() == 0 {
            return Ok(None);
        }
        if i32::try_from(capacity).is_err() {
            return Err(unsupported(format!(
                "a cache of {capacity} keys per sequence exceeds i32"
            )));
        }
        let mut cfg = config::choose(
            target,
            rows,
            b * hkv,
            capacity,
            block_size,
            options.splits.map(i64::from),
        );
        cfg.one_launch = options.one_launch && cfg.splits > 1;
        if b > i64::from(u16::MAX) * 1024 || hkv > i64::from(u16::MAX) {
            return Err(unsupported(format!(
                "grid of {b} x {hkv} blocks is too large"
            )));
        }
        Ok(Some(Call {
            dtype: q.dtype,
            paged,
            b,
            hkv,
            d,
            scale,
            capacity,
            cfg,
            ops: operands[..slot::COUNT].to_vec(),
        }))
    }

    /// The same call with configuration `cfg`.
    fn with(&self, cfg: DecodeConfig) -> Call {
        Call {
            cfg,
            ..self.clone()
        }
    }

    /// The configurations to consider: the table's, and with `all` (tuning on, or a plan for a
    /// tuning run's bundle) the split counts and one-launch twins the tuner times
    /// ([`config::candidates`]); a forced split count or one-launch merge is never tuned.
    fn configs(&self, all: bool, options: &DecodeOptions) -> Vec<DecodeConfig> {
        if all && options.splits.is_none() && !options.one_launch {
            config::candidates(self.cfg, self.capacity, !self.paged)
        } else {
            vec![self.cfg]
        }
    }

    /// f32 elements of scratch any of `configs` needs.
    fn scratch_for(&self, configs: &[DecodeConfig]) -> i64 {
        configs
            .iter()
            .map(|c| self.with(*c).scratch_elems())
            .max()
            .unwrap_or(0)
    }

    /// i32 counters any of `configs` needs: one per `(b, kvh)` for a one-launch split.
    fn counters_for(&self, configs: &[DecodeConfig]) -> i64 {
        if configs.iter().any(|c| c.one_launch && c.splits > 1) {
            self.b * self.hkv
        } else {
            0
        }
    }

    /// The tuning class: everything but the split count, the occupancy hint and the one-launch
    /// merge.
    fn class(&self) -> String {
        format!(
            "{} b{} hkv{} m{} d{} cap{} pb{}",
            self.dtype, self.b, self.hkv, self.cfg.m, self.d, self.capacity, self.cfg.pb
        )
    }

    /// f32 elements of scratch the split partials need (0 with one split).
    fn scratch_elems(&self) -> i64 {
        if self.cfg.splits <= 1 {
            return 0;
        }
        let rows = self.b * self.hkv * self.cfg.splits * self.cfg.m;
        round_up(rows, 64) + rows * self.d
    }

    fn launches(&self, operands: &[Operand]) -> Result<Vec<PlannedLaunch>, OpError> {
        use kernels as kn;
        let c = &self.cfg;
        let missing = || {
            unsupported(format!(
                "no {} kernel for `{}` D={} paged={}",
                self.dtype,
                c.name(),
                self.d,
                self.paged
            ))
        };
        let grid = |z: i64| -> Result<(u32, u32, u32), OpError> {
            let f = |n: i64| u32::try_from(n).map_err(|_| unsupported(format!("grid extent {n}")));
            Ok((f(self.b)?, f(self.hkv)?, f(z)?))
        };
        let ops = &self.ops;
        // The block table: the real one when paged, else seq_lens viewed as [1, B] (never read).
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
            PlannedArg::whole(slot::Q, &ops[slot::Q], false),
            PlannedArg::whole(slot::K, &ops[slot::K], false),
            PlannedArg::whole(slot::V, &ops[slot::V], false),
            PlannedArg::whole(slot::SEQ_LENS, &ops[slot::SEQ_LENS], false),
            table,
            PlannedArg::F32(self.scale),
            PlannedArg::I32(c.chunk as i32),
        ];
        let outputs = vec![
            PlannedArg::whole(slot::O, &ops[slot::O], true),
            PlannedArg::whole(slot::LSE, &ops[slot::LSE], true),
        ];
        macro_rules! pick {
            ($k:ident, $($extra:tt)*) => {
                crate::op::mma_kernel!(self.dtype, |E| match (c.m, c.bn, c.pb, self.d) {
                    (16, 64, 64, 64) => Some(kn::$k::kernel::<E, 16, 64, 64, $($extra)*, 64>()),
                    (16, 64, 16, 64) => Some(kn::$k::kernel::<E, 16, 64, 64, $($extra)*, 16>()),
                    (16, 64, 32, 64) => Some(kn::$k::kernel::<E, 16, 64, 64, $($extra)*, 32>()),
                    (32, 64, 64, 64) => Some(kn::$k::kernel::<E, 32, 64, 64, $($extra)*, 64>()),
                    (32, 64, 16, 64) => Some(kn::$k::kernel::<E, 32, 64, 64, $($extra)*, 16>()),
                    (32, 64, 32, 64) => Some(kn::$k::kernel::<E, 32, 64, 64, $($extra)*, 32>()),
                    (64, 64, 64, 64) => Some(kn::$k::kernel::<E, 64, 64, 64, $($extra)*, 64>()),
                    (64, 64, 16, 64) => Some(kn::$k::kernel::<E, 64, 64, 64, $($extra)*, 16>()),
                    (64, 64, 32, 64) => Some(kn::$k::kernel::<E, 64, 64, 64, $($extra)*, 32>()),
                    (128, 64, 64, 64) => Some(kn::$k::kernel::<E, 128, 64, 64, $($extra)*, 64>()),
                    (128, 64, 16, 64) => Some(kn::$k::kernel::<E, 128, 64, 64, $($extra)*, 16>()),
                    (128, 64, 32, 64) => Some(kn::$k::kernel::<E, 128, 64, 64, $($extra)*, 32>()),
                    (16, 128, 128, 64) => Some(kn::$k::kernel::<E, 16, 128, 64, $($extra)*, 128>()),
                    (32, 128, 128, 64) => Some(kn::$k::kernel::<E, 32, 128, 64, $($extra)*, 128>()),
                    (16, 128, 128, 128) => Some(kn::$k::kernel::<E, 16, 128, 128, $($extra)*, 128>()),
                    (32, 128, 128, 128) => Some(kn::$k::kernel::<E, 32, 128, 128, $($extra)*, 128>()),
                    (16, 64, 64, 128) => Some(kn::$k::kernel::<E, 16, 64, 128, $($extra)*, 64>()),
                    (16, 64, 16, 128) => Some(kn::$k::kernel::<E, 16, 64, 128, $($extra)*, 16>()),
                    (16, 64, 32, 128) => Some(kn::$k::kernel::<E, 16, 64, 128, $($extra)*, 32>()),
                    (32, 64, 64, 128) => Some(kn::$k::kernel::<E, 32, 64, 128, $($extra)*, 64>()),
                    (32, 64, 16, 128) => Some(kn::$k::kernel::<E, 32, 64, 128, $($extra)*, 16>()),
                    (32, 64, 32, 128) => Some(kn::$k::kernel::<E, 32, 64, 128, $($extra)*, 32>()),
                    (64, 64, 64, 128) => Some(kn::$k::kernel::<E, 64, 64, 128, $($extra)*, 64>()),
                    (64, 64, 16, 128) => Some(kn::$k::kernel::<E, 64, 64, 128, $($extra)*, 16>()),
                    (64, 64, 32, 128) => Some(kn::$k::kernel::<E, 64, 64, 128, $($extra)*, 32>()),
                    (128, 64, 64, 128) => Some(kn::$k::kernel::<E, 128, 64, 128, $($extra)*, 64>()),
                    (128, 64, 16, 128) => Some(kn::$k::kernel::<E, 128, 64, 128, $($extra)*, 16>()),
                    (128, 64, 32, 128) => Some(kn::$k::kernel::<E, 128, 64, 128, $($extra)*, 32>()),
                    _ => None,
                })
                .flatten()
                .map(|k| k.with_occupancy(c.occupancy))
            };
        }
        if c.splits <= 1 {
            let kernel = if self.paged {
                pick!(decode_direct, true)
            } else {
                pick!(decode_direct, false)
            }
            .ok_or_else(missing)?;
            return Ok(vec![PlannedLaunch {
                kernel,
                args: [inputs, outputs].concat(),
                grid: Some(grid(1)?),
                config: c.name(),
            }]);
        }
        let s = operands.get(slot::SCRATCH).ok_or_else(|| {
            unsupported(format!(
                "`{}` splits the keys and needs a scratch operand after the call's tensors (use \
                 `decode::with_scratch`)",
                c.name()
            ))
        })?;
        if s.dtype != ScalarType::F32 || s.numel() < self.scratch_elems() {
            return Err(unsupported(format!(
                "the scratch operand holds {} {} elements; the call needs {} f32",
                s.numel(),
                s.dtype,
                self.scratch_elems()
            )));
        }
        let bh = self.b * self.hkv;
        let lse_shape = vec![bh, c.splits, c.m];
        let o_shape = vec![bh, c.splits, c.m, self.d];
        let part_lse = PlannedArg::Tensor {
            operand: slot::SCRATCH,
            output: true,
            strides: contiguous_strides(&lse_shape),
            shape: lse_shape.clone(),
            offset: 0,
        };
        let part_o = PlannedArg::Tensor {
            operand: slot::SCRATCH,
            output: true,
            strides: contiguous_strides(&o_shape),
            shape: o_shape.clone(),
            offset: round_up(bh * c.splits * c.m, 64),
        };
        let as_input = |a: &PlannedArg| match a.clone() {
            PlannedArg::Tensor {
                operand,
                shape,
                strides,
                offset,
                ..
            } => PlannedArg::Tensor {
                operand,
                output: false,
                shape,
                strides,
                offset,
            },
            other => other,
        };
        if c.one_launch {
            let kernel = if self.paged {
                pick!(decode_split_last, true)
            } else {
                pick!(decode_split_last, false)
            }
            .ok_or_else(missing)?;
            let n = operands
                .get(slot::COUNTERS)
                .filter(|n| n.dtype == ScalarType::I32)
                .map_or(0, Operand::numel);
            if n < bh {
                return Err(unsupported(format!(
                    "`{}` merges in one launch and needs {bh} i32 counters after the scratch \
                     operand (use `decode::with_scratch`), got {n}",
                    c.name()
                )));
            }
            let counters = PlannedArg::Tensor {
                operand: slot::COUNTERS,
                output: true,
                shape: vec![bh],
                strides: vec![1],
                offset: 0,
            };
            return Ok(vec![PlannedLaunch {
                kernel,
                args: [inputs, outputs, vec![part_o, part_lse, counters]].concat(),
                grid: Some(grid(c.splits)?),
                config: c.name(),
            }]);
        }
        let partial = if self.paged {
            pick!(decode_partial, true)
        } else {
            pick!(decode_partial, false)
        }
        .ok_or_else(missing)?;
        // The merge of one row block is spread over `D / MERGE_LANES` blocks (lane slices).
        let combine = crate::op::mma_kernel!(self.dtype, |E| match (c.m, self.d) {
            (16, 64) => Some(kn::decode_combine::kernel::<E, 16, 64, MERGE_LANES>()),
            (32, 64) => Some(kn::decode_combine::kernel::<E, 32, 64, MERGE_LANES>()),
            (64, 64) => Some(kn::decode_combine::kernel::<E, 64, 64, MERGE_LANES>()),
            (128, 64) => Some(kn::decode_combine::kernel::<E, 128, 64, MERGE_LANES>()),
            (16, 128) => Some(kn::decode_combine::kernel::<E, 16, 128, MERGE_LANES>()),
            (32, 128) => Some(kn::decode_combine::kernel::<E, 32, 128, MERGE_LANES>()),
            (64, 128) => Some(kn::decode_combine::kernel::<E, 64, 128, MERGE_LANES>()),
            (128, 128) => Some(kn::decode_combine::kernel::<E, 128, 128, MERGE_LANES>()),
            _ => None,
        })
        .flatten()
        .ok_or_else(missing)?;
        Ok(vec![
            PlannedLaunch {
                kernel: partial,
                args: [inputs, vec![part_o.clone(), part_lse.clone()]].concat(),
                grid: Some(grid(c.splits)?),
                config: c.name(),
            },
            PlannedLaunch {
                kernel: combine,
                args: [
                    vec![
                        PlannedArg::whole(slot::Q, &ops[slot::Q], false),
                        as_input(&part_o),
                        as_input(&part_lse),
                    ],
                    outputs,
                ]
                .concat(),
                grid: Some(grid(self.d / MERGE_LANES as i64)?),
                config: format!("{} combine", c.name()),
            },
        ])
    }
}

/// `operands` (a call's [`slot::COUNT`] tensors) followed by a described f32 scratch big enough for the
/// split partials when the call splits, and the described counters when it merges in one launch.
pub fn with_scratch(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &DecodeOptions,
) -> Result<Vec<Operand>, OpError> {
    with_scratch_for(operands, paged, target, options, false)
}

/// [`with_scratch`], the scratch covering every tuning candidate when `all`.
pub fn with_scratch_for(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &DecodeOptions,
    all: bool,
) -> Result<Vec<Operand>, OpError> {
    let mut out = operands.to_vec();
    if let Some(call) = Call::new(operands, paged, target, options)? {
        let configs = call.configs(all, options);
        let elems = call.scratch_for(&configs);
        if elems > 0 {
            out.truncate(slot::COUNT);
            out.push(Operand::described(
                "scratch",
                slot::SCRATCH,
                ScalarType::F32,
                &[elems],
            ));
            let n = call.counters_for(&configs);
            if n > 0 {
                out.push(Operand::described(
                    "counters",
                    slot::COUNTERS,
                    ScalarType::I32,
                    &[n],
                ));
            }
        }
    }
    Ok(out)
}

/// The launches of a call over `operands` ([`with_scratch`]'s list): one `decode_direct` launch, or
/// `decode_partial` then `decode_combine` when the keys are split, or one `decode_split_last` launch
/// when they are split and merged in the same launch.
pub fn plan(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &DecodeOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    match Call::new(operands, paged, target, options)? {
        None => Ok(Vec::new()),
        Some(call) => call.launches(operands),
    }
}

/// [`plan`], and with `all` the launches of every tuning candidate after the table's (what a bundle for
/// a tuning run must hold; operands from [`with_scratch_for`] with the same `all`).
pub fn plan_all(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &DecodeOptions,
    all: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(operands, paged, target, options)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for c in call.configs(all, options) {
        out.extend(call.with(c).launches(operands)?);
    }
    Ok(out)
}

/// The configuration a call gets (for tests and reports).
pub fn config_of(
    operands: &[Operand],
    paged: bool,
    target: &Target,
    options: &DecodeOptions,
) -> Result<Option<DecodeConfig>, OpError> {
    Ok(Call::new(operands, paged, target, options)?.map(|c| c.cfg))
}

/// The described operands of a registry call of `op` ([`OP`] or [`OP_PAGED`], shapes as
/// [`SPEC_INPUTS`]), and whether the cache is paged.
pub fn described_call(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<(Vec<Operand>, bool), OpError> {
    let bad = || {
        unsupported(format!(
            "a call spec of `{op}` lists {SPEC_INPUTS}, got {shapes:?}"
        ))
    };
    let paged = op == OP_PAGED;
    // A trailing one-element shape is the harness's data flag (ragged lengths); planning ignores it.
    let shapes = match shapes.split_last() {
        Some((flag, rest)) if flag.len() == 1 && rest.len() == 2 + usize::from(paged) => rest,
        _ => shapes,
    };
    let (q, cache, table) = match (paged, shapes) {
        (false, [q, c]) => (q, c, None),
        (true, [q, c, t]) => (q, c, Some(t)),
        _ => return Err(bad()),
    };
    if q.len() != 4 || cache.len() != 4 || table.is_some_and(|t| t.len() != 2) {
        return Err(bad());
    }
    let d = Operand::described;
    let b = q[0];
    let table = match table {
        Some(t) => d("block_table", slot::BLOCK_TABLE, ScalarType::I32, t),
        None => d("seq_lens", slot::SEQ_LENS, ScalarType::I32, &[b]),
    };
    Ok((
        vec![
            d("q", slot::Q, dt, q),
            d("k_cache", slot::K, dt, cache),
            d("v_cache", slot::V, dt, cache),
            d("seq_lens", slot::SEQ_LENS, ScalarType::I32, &[b]),
            table,
            d("o", slot::O, dt, q),
            d("lse", slot::LSE, ScalarType::F32, &q[..3]),
        ],
        paged,
    ))
}

/// The calls the catalog compiles, the GPU runner checks and benchmarks: a handful (each is a cubin
/// per arch in CI): bf16 split and one-split, contiguous and paged, D 128 and 64, GQA ratios 4 and 1,
/// speculative `Sq = 4`.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    vec![
        // B = 1, GQA 32/8, 32k keys: splits + combine.
        c(OP, "bf16", &[&[1, 32, 1, 128], &[1, 8, 32768, 128]], false),
        // B = 64: enough blocks for one split.
        c(OP, "bf16", &[&[64, 32, 1, 128], &[64, 8, 4096, 128]], false),
        // Paged, 16-token pages, splits.
        c(
            OP_PAGED,
            "bf16",
            &[&[4, 32, 1, 128], &[1024, 16, 8, 128], &[4, 256]],
            false,
        ),
        // Speculative decoding: 4 queries, D = 64, f16, no GQA.
        c(OP, "f16", &[&[2, 8, 4, 64], &[2, 8, 2048, 64]], false),
    ]
}
