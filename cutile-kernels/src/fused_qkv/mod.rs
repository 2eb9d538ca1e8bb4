//! Fused QKV projection for attention layers: `x · W` for the q, k and v heads, plus bias, per-head
//! RMSNorm of q and k (QK-norm), RoPE of q and k (NeoX or GPT-J, full or half rotary), q stored and k, v
//! written into a contiguous or paged KV cache, as one op.
//!
//! - `dsl`: the kernels (fused, split-K partials, epilogue);
//! - [`config`]: the schedule per call (fused / split-K / unfused) and the tuner's candidates;
//! - [`reference`]: the CPU reference;
//! - [`plan`]: the launches of a call, without a device; [`fused_qkv`]: the op.

pub mod config;
mod dsl;
pub mod reference;

pub use config::QkvConfig;
pub use dsl::kernels;
pub use dsl::{BIAS, GPTJ, NORM, PAGED};
pub use reference::{CacheIndex, QkvReference, RopeStyle, fused_qkv_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::tuning::Candidate;
use crate::op::{CallSpec, OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div};

/// The op's name.
pub const OP: &str = "fused_qkv";
/// Element types of `x`, the weights, q and the caches.
pub const DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16];
/// Head dimensions with a kernel.
pub const HEAD_DIMS: &[i64] = &[64, 128, 256];

/// Operand indices of a call, in this order (absent optional tensors hold any operand, unread).
pub mod slot {
    pub const X: usize = 0;
    pub const W: usize = 1;
    pub const BIAS: usize = 2;
    pub const Q_NORM: usize = 3;
    pub const K_NORM: usize = 4;
    pub const COS: usize = 5;
    pub const SIN: usize = 6;
    pub const POSITIONS: usize = 7;
    /// Batch index (contiguous cache) or slot mapping (paged).
    pub const INDEX_A: usize = 8;
    /// Cache position (contiguous cache); the slot mapping again when paged.
    pub const INDEX_B: usize = 9;
    pub const Q: usize = 10;
    pub const K_CACHE: usize = 11;
    pub const V_CACHE: usize = 12;
    /// f32 scratch (split-K partials).
    pub const SCRATCH: usize = 13;
    /// The same scratch as `[T, N]` of the input type (the unfused path's projection).
    pub const SCRATCH_E: usize = 14;
    /// i32 per-tile counters (the one-launch split-K's last-block test), zero between launches.
    pub const COUNTERS: usize = 15;
    /// Operands without scratch.
    pub const COUNT: usize = 13;
}

/// Which implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Path {
    /// The fused kernels whenever they support the call (they support every valid call today).
    #[default]
    Auto,
    /// The fused kernels (fused, or split-K for few tokens).
    Fused,
    /// The catalog's separate ops: `gemm` (`gemm_epilogue` with the bias), `rms_norm_heads` of q and
    /// k, `rope`, `kv_cache_write`.
    Unfused,
}

/// The call's switches that are not tensors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QkvOptions {
    pub bias: bool,
    pub norm: bool,
    pub eps: f32,
    pub style: RopeStyle,
    pub paged: bool,
    pub path: Path,
}

/// The projection's parameters: `weight: [hidden, N]` with `N = (Hq + 2·Hkv)·D` (a PyTorch `Linear`
/// weight `[N, hidden]` passed as its transposed view works too), optional `bias: [N]`, optional
/// `q_norm`, `k_norm: [D]` (both or neither) with `eps`.
pub struct QkvLayer<'a> {
    pub weight: &'a dyn TensorArg,
    pub bias: Option<&'a dyn TensorArg>,
    pub q_norm: Option<&'a dyn TensorArg>,
    pub k_norm: Option<&'a dyn TensorArg>,
    pub eps: f32,
}

/// RoPE tables: `cos`, `sin: [max_pos, rot/2]` f32 (`rot` = D or D/2), and the pairing style.
pub struct Rope<'a> {
    pub cos: &'a dyn TensorArg,
    pub sin: &'a dyn TensorArg,
    pub style: RopeStyle,
}

/// Where k and v go. Index tensors are `[T]` of `positions`' type (i32 or i64).
pub enum KvCache<'a> {
    /// `k`, `v: [B, Hkv, max_seq, D]`; token `t` goes to `(batch[t], :, pos[t], :)`.
    Contiguous {
        k: &'a mut dyn TensorArgMut,
        v: &'a mut dyn TensorArgMut,
        batch: &'a dyn TensorArg,
        pos: &'a dyn TensorArg,
    },
    /// `k`, `v: [num_blocks, block_size, Hkv, D]`; token `t` goes to slot `slot_mapping[t]` (block
    /// `slot / block_size`, offset `slot % block_size`); slot −1 skips the token.
    Paged {
        k: &'a mut dyn TensorArgMut,
        v: &'a mut dyn TensorArgMut,
        slot_mapping: &'a dyn TensorArg,
    },
}

/// `q = rope(norm(x · W + bias))` for the q heads, and k (normed, rotated) and v written into the
/// cache, queued on `stream`. `x: [T, hidden]`, `positions: [T]` (i32 or i64, any order), `q: [T, Hq,
/// D]` (heads contiguous). Tokens must address distinct cache entries. `T = 0` is a no-op.
#[allow(clippy::too_many_arguments)]
pub fn fused_qkv<'a>(
    stream: &'a Stream,
    x: &'a dyn TensorArg,
    positions: &'a dyn TensorArg,
    layer: &QkvLayer<'a>,
    rope: &Rope<'a>,
    q: &'a mut dyn TensorArgMut,
    cache: KvCache<'a>,
    path: Path,
) -> Result<Pending<'a>, OpError> {
    let xo = Operand::of("x", x);
    let or_x = |name, t: Option<&'a dyn TensorArg>| match t {
        Some(t) => Operand::of(name, t),
        None => xo.clone(),
    };
    let (paged, k, v, a, b) = match &cache {
        KvCache::Contiguous { k, v, batch, pos } => (
            false,
            Operand::of("k_cache", &**k),
            Operand::of("v_cache", &**v),
            Operand::of("batch", *batch),
            Operand::of("pos", *pos),
        ),
        KvCache::Paged { k, v, slot_mapping } => {
            let s = Operand::of("slot_mapping", *slot_mapping);
            (
                true,
                Operand::of("k_cache", &**k),
                Operand::of("v_cache", &**v),
                s.clone(),
                s,
            )
        }
    };
    let mut operands = vec![
        xo.clone(),
        Operand::of("weight", layer.weight),
        or_x("bias", layer.bias),
        or_x("q_norm", layer.q_norm),
        or_x("k_norm", layer.k_norm),
        Operand::of("cos", rope.cos),
        Operand::of("sin", rope.sin),
        Operand::of("positions", positions),
        a,
        b,
        Operand::of("q", &*q),
        k,
        v,
    ];
    if layer.q_norm.is_some() != layer.k_norm.is_some() {
        return Err(OpError::Unsupported {
            op: OP,
            what: "give both `q_norm` and `k_norm` or neither".into(),
        });
    }
    let opts = QkvOptions {
        bias: layer.bias.is_some(),
        norm: layer.q_norm.is_some(),
        eps: layer.eps,
        style: rope.style,
        paged,
        path,
    };
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(&operands, &opts, &target)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    // With `CUTILE_TUNE` on, every candidate may run, so the scratch covers them all.
    let tuning = cutile::tune::Tuner::global().mode() != cutile::tune::TuneMode::Off;
    let candidates = call.configs(&target, tuning);
    let elems = scratch_elems(&call, &candidates);
    if elems > 0 {
        let s = crate::op::scratch::scratch(stream, "scratch", ScalarType::F32, elems)?;
        operands.push(s.clone());
        operands.push(scratch_as_input_type(&s, &call));
        let n = counter_elems(&call, &candidates);
        if n > 0 {
            operands.push(crate::op::scratch::counters(stream, "counters", n)?);
        }
    }
    let class = config::class(call.dtype, call.t, call.heads(), call.d, call.hidden);
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (q and the caches
    // exclusively), and the stream's scratch, which lives until exit. Trials redirect q to the tuner's
    // scratch and rewrite the same cache entries with the same values.
    unsafe {
        crate::op::tuning::run_tuned(
            stream,
            &operands,
            slot::Q,
            OP,
            class,
            &candidates,
            false,
            |c| launches(c, &call, &operands, &target),
        )
    }
}

impl std::fmt::Debug for QkvLayer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QkvLayer")
            .field("bias", &self.bias.is_some())
            .field("norm", &self.q_norm.is_some())
            .field("eps", &self.eps)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Rope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rope")
            .field("style", &self.style)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for KvCache<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KvCache::Contiguous { .. } => "KvCache::Contiguous",
            KvCache::Paged { .. } => "KvCache::Paged",
        })
    }
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    index: ScalarType,
    t: i64,
    hidden: i64,
    hq: i64,
    hkv: i64,
    d: i64,
    rot: i64,
    opts: QkvOptions,
    /// Kernel views: q as `[T, Hq·D]`, the caches as `[blocks, block_size, Hkv, D]`.
    q: Operand,
    k_cache: Operand,
    v_cache: Operand,
}

fn shape_err(
    what: impl Into<String>,
    left: impl std::fmt::Debug,
    right: impl std::fmt::Debug,
) -> OpError {
    OpError::Shape {
        op: OP,
        what: what.into(),
        left: format!("{left:?}"),
        right: format!("{right:?}"),
    }
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

/// Fails unless the innermost axis of `o` is contiguous.
fn unit_last(o: &Operand) -> Result<(), OpError> {
    match (o.shape.last(), o.strides.last()) {
        (Some(&n), Some(&s)) if n > 1 && s != 1 => Err(layout_err(
            o,
            "the last axis must be contiguous (stride 1); pass a contiguous copy",
        )),
        _ => Ok(()),
    }
}

/// Fails unless `o` is a `[len]` vector of `like`'s element type.
fn check_vec(o: &Operand, like: &Operand, len: i64, what: &str) -> Result<(), OpError> {
    o.expect_rank(OP, 1)?;
    o.expect_same_dtype(OP, like)?;
    if o.shape[0] != len {
        return Err(shape_err(
            format!("`{}` must have {what} elements", o.name),
            o.shape[0],
            len,
        ));
    }
    unit_last(o)
}

impl Call {
    /// Checks the operands (`slot::COUNT` of them, scratch after them is ignored); `None` when `T = 0`.
    fn new(ops: &[Operand], opts: &QkvOptions, target: &Target) -> Result<Option<Call>, OpError> {
        if ops.len() < slot::COUNT {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!("takes {} tensors, got {}", slot::COUNT, ops.len()),
            });
        }
        for o in &ops[..slot::COUNT] {
            target.expect_device(OP, o)?;
        }
        let (x, w, q) = (&ops[slot::X], &ops[slot::W], &ops[slot::Q]);
        x.expect_dtype(OP, DTYPES)?;
        x.expect_rank(OP, 2)?;
        w.expect_rank(OP, 2)?;
        w.expect_same_dtype(OP, x)?;
        q.expect_rank(OP, 3)?;
        q.expect_same_dtype(OP, x)?;
        let (t, hidden) = (x.shape[0], x.shape[1]);
        if w.shape[0] != hidden {
            return Err(shape_err(
                "`weight` must be [hidden, N] (a PyTorch Linear weight [N, hidden] as its transposed view): rows vs `x`'s columns",
                w.shape[0],
                hidden,
            ));
        }
        let (hq, d) = (q.shape[1], q.shape[2]);
        if q.shape[0] != t {
            return Err(shape_err(
                "`q` must be [T, Hq, D]: its tokens vs `x`'s rows",
                q.shape[0],
                t,
            ));
        }
        if !HEAD_DIMS.contains(&d) {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!("head dimension D = {d} has no kernel; supported: {HEAD_DIMS:?}"),
            });
        }
        if hq > 1 && q.strides[1] != d || d > 1 && q.strides[2] != 1 {
            return Err(layout_err(
                q,
                "the (heads, head_dim) axes of `q` must be contiguous",
            ));
        }
        // The caches.
        let (k, v) = (&ops[slot::K_CACHE], &ops[slot::V_CACHE]);
        for c in [k, v] {
            c.expect_rank(OP, 4)?;
            c.expect_same_dtype(OP, x)?;
            unit_last(c)?;
        }
        v.expect_same_shape(OP, k)?;
        let hkv = if opts.paged { k.shape[2] } else { k.shape[1] };
        if k.shape[3] != d {
            return Err(shape_err(
                "the caches' head dimension vs `q`'s D",
                k.shape[3],
                d,
            ));
        }
        if hkv < 1 || hq < 1 {
            return Err(shape_err(
                "head counts (Hq, Hkv) must be at least 1",
                (hq, hkv),
                (1, 1),
            ));
        }
        let n = (hq + 2 * hkv) * d;
        if w.shape[1] != n {
            return Err(shape_err(
                format!(
                    "`weight`'s columns must be (Hq + 2·Hkv)·D with Hq = {hq} (from `q`), Hkv = {hkv} (from the caches), D = {d}"
                ),
                w.shape[1],
                n,
            ));
        }
        let view = |c: &Operand| -> Operand {
            let mut o = c.clone();
            if !opts.paged {
                // [B, Hkv, S, D] → [B, S, Hkv, D].
                o.shape = vec![c.shape[0], c.shape[2], c.shape[1], c.shape[3]];
                o.strides = vec![c.strides[0], c.strides[2], c.strides[1], c.strides[3]];
            }
            o
        };
        // Optional tensors.
        if opts.bias {
            check_vec(&ops[slot::BIAS], x, n, "N = (Hq + 2·Hkv)·D")?;
        }
        if opts.norm {
            check_vec(&ops[slot::Q_NORM], x, d, "D")?;
            check_vec(&ops[slot::K_NORM], x, d, "D")?;
            if !opts.eps.is_finite() || opts.eps < 0.0 {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!("eps must be finite and ≥ 0, got {}", opts.eps),
                });
            }
        }
        // RoPE tables.
        let (cos, sin) = (&ops[slot::COS], &ops[slot::SIN]);
        cos.expect_rank(OP, 2)?;
        cos.expect_dtype(OP, &[ScalarType::F32])?;
        let rot = 2 * cos.shape[1];
        if rot != d && rot != d / 2 {
            return Err(shape_err(
                "`cos`/`sin` must be [max_pos, rot/2] with the rotary dim rot = D or D/2",
                rot,
                d,
            ));
        }
        sin.expect_same_dtype(OP, cos)?;
        sin.expect_same_shape(OP, cos)?;
        unit_last(cos)?;
        unit_last(sin)?;
        // Positions and cache indices.
        let pos = &ops[slot::POSITIONS];
        pos.expect_rank(OP, 1)?;
        pos.expect_dtype(OP, &[ScalarType::I32, ScalarType::I64])?;
        for o in [pos, &ops[slot::INDEX_A], &ops[slot::INDEX_B]] {
            o.expect_rank(OP, 1)?;
            o.expect_same_dtype(OP, pos)?;
            if o.shape[0] != t {
                return Err(shape_err(
                    format!("`{}` must have one entry per token", o.name),
                    o.shape[0],
                    t,
                ));
            }
        }
        if t == 0 {
            return Ok(None);
        }
        if hidden < 1 {
            return Err(OpError::Unsupported {
                op: OP,
                what: "hidden = 0 (an empty projection); `x` needs at least one column".into(),
            });
        }
        let mut qv = q.clone();
        qv.shape = vec![t, hq * d];
        qv.strides = vec![q.strides[0], 1];
        if t > 1 && q.strides[0] < hq * d {
            return Err(layout_err(q, "the tokens of `q` overlap"));
        }
        let hd = x.dtype;
        Ok(Some(Call {
            dtype: hd,
            index: pos.dtype,
            t,
            hidden,
            hq,
            hkv,
            d,
            rot,
            opts: *opts,
            q: qv,
            k_cache: view(k),
            v_cache: view(v),
        }))
    }

    fn heads(&self) -> i64 {
        self.hq + 2 * self.hkv
    }

    fn n(&self) -> i64 {
        self.heads() * self.d
    }

    fn flags(&self) -> i32 {
        let o = &self.opts;
        (if o.bias { BIAS } else { 0 })
            | (if o.norm { NORM } else { 0 })
            | (if o.style == RopeStyle::Gptj { GPTJ } else { 0 })
            | (if o.paged { PAGED } else { 0 })
    }

    fn default_config(&self, target: &Target) -> QkvConfig {
        match self.opts.path {
            Path::Unfused => QkvConfig::Unfused,
            Path::Auto | Path::Fused => {
                config::choose(target, self.t, self.heads(), self.d, self.hidden)
            }
        }
    }

    fn configs(&self, target: &Target, all: bool) -> Vec<QkvConfig> {
        if !all {
            return vec![self.default_config(target)];
        }
        let mut c = config::candidates(target, self.t, self.heads(), self.d, self.hidden);
        match self.opts.path {
            Path::Unfused => c.retain(|c| *c == QkvConfig::Unfused),
            // Auto takes the fused kernels whenever they support the call, tuned or not.
            Path::Fused | Path::Auto => c.retain(|c| *c != QkvConfig::Unfused),
        }
        c
    }
}

/// f32 elements of scratch the configurations need.
fn scratch_elems(call: &Call, configs: &[QkvConfig]) -> i64 {
    let tn = call.t * call.n();
    configs
        .iter()
        .map(|c| match c {
            QkvConfig::Fused { .. } | QkvConfig::FusedPair { .. } => 0,
            QkvConfig::SplitK { splits, .. } | QkvConfig::SplitLast { splits, .. } => splits * tn,
            QkvConfig::Unfused => ceil_div(tn, 2),
        })
        .max()
        .unwrap_or(0)
}

/// Counters the configurations need: one per (row tile, head) of a one-launch split-K.
fn counter_elems(call: &Call, configs: &[QkvConfig]) -> i64 {
    configs
        .iter()
        .map(|c| match c {
            QkvConfig::SplitLast { bm, .. } => ceil_div(call.t, *bm) * call.heads(),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// The f32 scratch `s` viewed as the unfused projection `[T, N]` of the call's element type.
fn scratch_as_input_type(s: &Operand, call: &Call) -> Operand {
    Operand {
        name: "scratch (projection)",
        dtype: call.dtype,
        shape: vec![call.t, call.n()],
        strides: vec![call.n(), 1],
        ..s.clone()
    }
}

/// `operands` (a call's [`slot::COUNT`] tensors) followed by a described f32 scratch big enough for
/// every configuration `plan` may emit, and its projection view: what planning without a device passes.
pub fn with_scratch(
    operands: &[Operand],
    opts: &QkvOptions,
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<Operand>, OpError> {
    let mut out = operands[..slot::COUNT.min(operands.len())].to_vec();
    if let Some(call) = Call::new(operands, opts, target)? {
        let configs = call.configs(target, all_candidates);
        let elems = scratch_elems(&call, &configs);
        if elems > 0 {
            let s = Operand::described("scratch", slot::SCRATCH, ScalarType::F32, &[elems]);
            out.push(s.clone());
            out.push(scratch_as_input_type(&s, &call));
            let n = counter_elems(&call, &configs);
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

/// The launches of a call over `operands` ([`with_scratch`]'s list): the default configuration, or every
/// candidate's.
pub fn plan(
    operands: &[Operand],
    opts: &QkvOptions,
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(operands, opts, target)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for cfg in call.configs(target, all_candidates) {
        out.extend(launches(&cfg, &call, operands, target)?);
    }
    Ok(out)
}

/// `$body` with `$d`, `$r`, `$hr` bound to consts for a (head dim, rotary dim) pair with a kernel.
macro_rules! rot_dims {
    ($dd:expr, $rr:expr, |$d:ident, $r:ident, $hr:ident| $body:expr) => {{
        macro_rules! arm {
            ($dv:literal, $rv:literal, $hv:literal) => {{
                const $d: i32 = $dv;
                const $r: i32 = $rv;
                const $hr: i32 = $hv;
                Some($body)
            }};
        }
        match ($dd, $rr) {
            (64, 64) => arm!(64, 64, 32),
            (64, 32) => arm!(64, 32, 16),
            (128, 128) => arm!(128, 128, 64),
            (128, 64) => arm!(128, 64, 32),
            (256, 256) => arm!(256, 256, 128),
            (256, 128) => arm!(256, 128, 64),
            _ => None,
        }
    }};
}

/// `$body` with `$i` the Rust type of an index element type (i32, i64).
macro_rules! index_type {
    ($dt:expr, |$i:ident| $body:expr) => {{
        match $dt {
            ScalarType::I32 => {
                type $i = i32;
                Some($body)
            }
            ScalarType::I64 => {
                type $i = i64;
                Some($body)
            }
            _ => None,
        }
    }};
}

fn no_kernel(call: &Call, cfg: &QkvConfig) -> OpError {
    OpError::Unsupported {
        op: OP,
        what: format!(
            "no {} kernel for `{}` with D = {}, rot = {}, {} indices",
            call.dtype,
            cfg.name(),
            call.d,
            call.rot,
            call.index
        ),
    }
}

fn grid(op: &'static str, x: i64, y: i64, z: i64) -> Result<(u32, u32, u32), OpError> {
    let g = |v: i64, limit: i64| {
        u32::try_from(v)
            .ok()
            .filter(|&v| (v as i64) <= limit)
            .ok_or_else(|| OpError::Unsupported {
                op,
                what: format!("a grid of ({x}, {y}, {z}) blocks exceeds the device's limits"),
            })
    };
    Ok((g(x, i32::MAX as i64)?, g(y, 65535)?, g(z, 65535)?))
}

/// The epilogue's parameters after the projection input(s): bias … v_cache.
fn epilogue_args(call: &Call, ops: &[Operand]) -> Vec<PlannedArg> {
    let dummy = |present: bool, s: usize| {
        if present {
            PlannedArg::whole(s, &ops[s], false)
        } else {
            // Never read: a one-element view of `x`.
            PlannedArg::Tensor {
                operand: slot::X,
                output: false,
                shape: vec![1],
                strides: vec![1],
                offset: 0,
            }
        }
    };
    vec![
        dummy(call.opts.bias, slot::BIAS),
        dummy(call.opts.norm, slot::Q_NORM),
        dummy(call.opts.norm, slot::K_NORM),
        PlannedArg::whole(slot::COS, &ops[slot::COS], false),
        PlannedArg::whole(slot::SIN, &ops[slot::SIN], false),
        PlannedArg::whole(slot::POSITIONS, &ops[slot::POSITIONS], false),
        PlannedArg::whole(slot::INDEX_A, &ops[slot::INDEX_A], false),
        PlannedArg::whole(slot::INDEX_B, &ops[slot::INDEX_B], false),
        PlannedArg::F32(if call.opts.norm { call.opts.eps } else { 0.0 }),
        PlannedArg::I32(call.flags()),
        PlannedArg::view(slot::Q, &call.q, true),
        PlannedArg::view(slot::K_CACHE, &call.k_cache, true),
        PlannedArg::view(slot::V_CACHE, &call.v_cache, true),
    ]
}

fn scratch<'o>(ops: &'o [Operand], s: usize, cfg: &QkvConfig) -> Result<&'o Operand, OpError> {
    ops.get(s).ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!(
            "`{}` needs scratch operands after the call's tensors (use `fused_qkv::with_scratch`)",
            cfg.name()
        ),
    })
}

/// A view of `base` (a call operand) as a sub-op sees it: `shape` and `strides` starting `offset`
/// elements in, its address moved accordingly (so the sub-op's alignment checks see the real one).
fn sub_view(
    name: &'static str,
    base: &Operand,
    shape: Vec<i64>,
    strides: Vec<i64>,
    offset: i64,
) -> Operand {
    Operand {
        name,
        shape,
        strides,
        ptr: base.ptr + offset as u64 * base.elem_bytes(),
        ..base.clone()
    }
}

/// The launches a sub-op planned over its own operand list, moved onto this call's operands: the
/// sub-op's operand `i` is the call's operand `map[i].0`, `map[i].1` elements in.
fn remap(
    mut launches: Vec<PlannedLaunch>,
    map: &[(usize, i64)],
    cfg: &QkvConfig,
) -> Result<Vec<PlannedLaunch>, OpError> {
    for l in &mut launches {
        for a in &mut l.args {
            if let PlannedArg::Tensor {
                operand, offset, ..
            } = a
            {
                let &(slot, at) = map.get(*operand).ok_or_else(|| OpError::Unsupported {
                    op: OP,
                    what: format!(
                        "`{}`: a step planned an operand ({}) the composed call does not have",
                        cfg.name(),
                        *operand
                    ),
                })?;
                *operand = slot;
                *offset += at;
            }
        }
        l.config = format!("{} ({})", cfg.name(), l.config);
    }
    Ok(launches)
}

/// The unfused path, from the catalog's standalone ops, each in its own launch: the projection
/// (`gemm`, or `gemm_epilogue` with the bias; never split, since the scratch holds the projection)
/// into scratch `[T, N]`; with QK-norm, `rms_norm_heads` of the q heads into `q` and of the k heads in
/// place; `rope` of q (in `q`) and k (in place; out of place from the scratch into `q` without
/// norm); `kv_cache_write` (or `_paged`) of k and v from the scratch.
fn unfused(
    cfg: &QkvConfig,
    call: &Call,
    ops: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let proj = scratch(ops, slot::SCRATCH_E, cfg)?;
    let (t, n, d) = (call.t, call.n(), call.d);
    let whole = |s: usize| (s, 0i64);
    let heads_at = |name, h: i64, first: i64| {
        (
            sub_view(name, proj, vec![t, h, d], vec![n, d, 1], first * d),
            (slot::SCRATCH_E, first * d),
        )
    };
    let (qs, qs_at) = heads_at("q (projection)", call.hq, 0);
    let (ks, ks_at) = heads_at("k (projection)", call.hkv, call.hq);
    let (vs, vs_at) = heads_at("v (projection)", call.hkv, call.hq + call.hkv);
    let mut out = Vec::new();
    // 1. The projection.
    let mut gemm_ops = vec![ops[slot::X].clone(), ops[slot::W].clone(), proj.clone()];
    let mut map = vec![whole(slot::X), whole(slot::W), whole(slot::SCRATCH_E)];
    if call.opts.bias {
        gemm_ops.push(ops[slot::BIAS].clone());
        map.push(whole(slot::BIAS));
        let spec = crate::gemm::EpilogueSpec {
            bias: true,
            ..Default::default()
        };
        let options = crate::gemm::GemmOptions::default();
        let l =
            crate::gemm::epilogue::plan_epilogue_with(&gemm_ops, target, &spec, &options, false)?;
        out.extend(remap(l, &map, cfg)?);
    } else {
        out.extend(remap(
            crate::gemm::plan(&gemm_ops, target, false)?,
            &map,
            cfg,
        )?);
    }
    // 2. QK-norm and 3. RoPE.
    // `q` as the user gave it, `[T, Hq, D]`.
    let q_user = (ops[slot::Q].clone(), whole(slot::Q));
    let rope_tables = [
        (ops[slot::COS].clone(), whole(slot::COS)),
        (ops[slot::SIN].clone(), whole(slot::SIN)),
        (ops[slot::POSITIONS].clone(), whole(slot::POSITIONS)),
    ];
    let style = call.opts.style;
    if call.opts.norm {
        let eps = call.opts.eps;
        let norm = |x: &(Operand, (usize, i64)), w: usize, y: &(Operand, (usize, i64))| {
            let l = crate::norm::plan_rms_norm_heads(
                &[x.0.clone(), ops[w].clone(), y.0.clone()],
                target,
                eps,
                false,
            )?;
            remap(l, &[x.1, whole(w), y.1], cfg)
        };
        let (q, k) = ((qs.clone(), qs_at), (ks.clone(), ks_at));
        out.extend(norm(&q, slot::Q_NORM, &q_user)?);
        out.extend(norm(&k, slot::K_NORM, &k)?);
        // In place on q (now in `q`) and k (in the scratch).
        let mut rope_ops = vec![q_user.0.clone(), ks.clone()];
        let mut map = vec![q_user.1, ks_at];
        for (o, at) in &rope_tables {
            rope_ops.push(o.clone());
            map.push(*at);
        }
        out.extend(remap(
            crate::rope::plan(&rope_ops, target, style)?,
            &map,
            cfg,
        )?);
    } else {
        // q from the scratch into `q`; k in place.
        let mut rope_ops = vec![qs.clone(), ks.clone()];
        let mut map = vec![qs_at, ks_at];
        for (o, at) in &rope_tables {
            rope_ops.push(o.clone());
            map.push(*at);
        }
        rope_ops.extend([q_user.0.clone(), ks.clone()]);
        map.extend([q_user.1, ks_at]);
        out.extend(remap(
            crate::rope::plan(&rope_ops, target, style)?,
            &map,
            cfg,
        )?);
    }
    // 4. The cache writes.
    let (kv_op, mut kv_ops, mut map) = if call.opts.paged {
        (
            crate::kv_cache::OP_PAGED,
            vec![ks, vs, ops[slot::INDEX_A].clone()],
            vec![ks_at, vs_at, whole(slot::INDEX_A)],
        )
    } else {
        (
            crate::kv_cache::OP,
            vec![
                ks,
                vs,
                ops[slot::INDEX_A].clone(),
                ops[slot::INDEX_B].clone(),
            ],
            vec![ks_at, vs_at, whole(slot::INDEX_A), whole(slot::INDEX_B)],
        )
    };
    kv_ops.extend([ops[slot::K_CACHE].clone(), ops[slot::V_CACHE].clone()]);
    map.extend([whole(slot::K_CACHE), whole(slot::V_CACHE)]);
    out.extend(remap(
        crate::kv_cache::plan(kv_op, &kv_ops, target)?,
        &map,
        cfg,
    )?);
    Ok(out)
}

/// `kernel` with [`config::WIDE_WORKERS`] worker warps when `wide`, else as it is (tileiras's default).
/// A split-K kernel with its hints: 8 worker warps when `wide`, and an `occupancy` hint when nonzero.
fn hinted(kernel: cutile::dsl::Kernel, wide: bool, occupancy: i64) -> cutile::dsl::Kernel {
    widen(kernel, wide).with_occupancy(occupancy)
}

fn widen(kernel: cutile::dsl::Kernel, wide: bool) -> cutile::dsl::Kernel {
    if wide {
        kernel.with_hint("default", "num_worker_warps_per_cta", config::WIDE_WORKERS)
    } else {
        kernel
    }
}

fn launches(
    cfg: &QkvConfig,
    call: &Call,
    ops: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels as k;
    let (dt, it, d, r) = (call.dtype, call.index, call.d, call.rot);
    let heads = call.heads();
    let tn = call.t * call.n();
    // The split-K epilogue: sums the f32 partials, then bias, norm, RoPE, q store and cache writes.
    let epilogue = |splits: i64, wide: bool| -> Result<PlannedLaunch, OpError> {
        let bm = config::EPILOGUE_BM;
        let kernel =
            crate::op::mma_kernel!(dt, |E| index_type!(it, |I| rot_dims!(d, r, |D, R, HR| {
                k::qkv_epilogue::kernel::<E, f32, I, 32, D, R, HR>()
            })))
            .flatten()
            .flatten()
            .ok_or_else(|| no_kernel(call, cfg))?;
        let kernel = widen(kernel, wide);
        scratch(ops, slot::SCRATCH, cfg)?;
        let mut args = vec![PlannedArg::Tensor {
            operand: slot::SCRATCH,
            output: false,
            shape: vec![splits, call.t, call.n()],
            strides: vec![tn, call.n(), 1],
            offset: 0,
        }];
        args.extend(epilogue_args(call, ops));
        Ok(PlannedLaunch {
            kernel,
            args,
            grid: Some(grid(OP, ceil_div(call.t, bm), heads, 1)?),
            config: cfg.name(),
        })
    };
    match *cfg {
        QkvConfig::Fused { bm, bk, persistent } => {
            // `q` is stored in `EPILOGUE_ROWS`-row tiles (the epilogue's slices).
            const EB: i32 = config::EPILOGUE_ROWS as i32;
            let kernel = crate::op::mma_kernel!(dt, |E| index_type!(it, |I| rot_dims!(
                d,
                r,
                |D, R, HR| match (persistent, bm, bk) {
                    (false, 64, 64) => Some(k::fused_qkv::kernel::<E, I, 64, 64, D, R, HR, EB>()),
                    (false, 128, 64) => Some(k::fused_qkv::kernel::<E, I, 128, 64, D, R, HR, EB>()),
                    (true, 64, 64) => {
                        Some(k::fused_qkv_persistent::kernel::<E, I, 64, 64, D, R, HR, EB>())
                    }
                    (true, 128, 64) => {
                        Some(k::fused_qkv_persistent::kernel::<E, I, 128, 64, D, R, HR, EB>())
                    }
                    _ => None,
                }
            )))
            .flatten()
            .flatten()
            .flatten()
            .ok_or_else(|| no_kernel(call, cfg))?;
            // Two warpgroups share the accumulator (see `config::WIDE_WORKERS`).
            let kernel = widen(kernel, bm == 128 || persistent);
            let mut args = vec![
                PlannedArg::whole(slot::X, &ops[slot::X], false),
                PlannedArg::whole(slot::W, &ops[slot::W], false),
            ];
            args.extend(epilogue_args(call, ops));
            let tiles_m = ceil_div(call.t, bm);
            let grid = if persistent {
                let tiles = tiles_m * heads;
                grid(OP, tiles.min(target.sm_count as i64).max(1), 1, 1)?
            } else {
                grid(OP, heads, tiles_m, 1)?
            };
            Ok(vec![PlannedLaunch {
                kernel,
                args,
                grid: Some(grid),
                config: cfg.name(),
            }])
        }
        QkvConfig::SplitK {
            bm,
            bk,
            bn,
            splits,
            wide,
            occupancy,
        } => {
            // Every (BM, BK, BN) of `config::SPLIT_BMS` x {64, 128} x {64, 128, 256}.
            macro_rules! partials {
                ($E:ty; $(($m:literal, $k:literal, $n:literal)),*) => {
                    match (bm, bk, bn) {
                        $(($m, $k, $n) => Some(k::qkv_partial::kernel::<$E, $m, $k, $n>()),)*
                        _ => None,
                    }
                };
            }
            let kernel = crate::op::mma_kernel!(dt, |E| partials!(E;
                (16, 64, 64), (16, 64, 128), (16, 64, 256), (16, 128, 64), (16, 128, 128), (16, 128, 256),
                (32, 64, 64), (32, 64, 128), (32, 64, 256), (32, 128, 64), (32, 128, 128), (32, 128, 256),
                (64, 64, 64), (64, 64, 128), (64, 64, 256), (64, 128, 64), (64, 128, 128), (64, 128, 256)
            ))
            .flatten()
            .ok_or_else(|| no_kernel(call, cfg))?;
            let kernel = hinted(kernel, wide, occupancy);
            scratch(ops, slot::SCRATCH, cfg)?;
            let partial = PlannedLaunch {
                kernel,
                args: vec![
                    PlannedArg::whole(slot::X, &ops[slot::X], false),
                    PlannedArg::whole(slot::W, &ops[slot::W], false),
                    PlannedArg::Tensor {
                        operand: slot::SCRATCH,
                        output: true,
                        shape: vec![splits, call.t, call.n()],
                        strides: vec![tn, call.n(), 1],
                        offset: 0,
                    },
                ],
                grid: Some(grid(
                    OP,
                    ceil_div(call.t, bm),
                    ceil_div(call.n(), bn),
                    splits,
                )?),
                config: cfg.name(),
            };
            Ok(vec![partial, epilogue(splits, wide)?])
        }
        QkvConfig::FusedPair { bm, bk } => {
            if heads % 2 != 0 {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!("`{}` needs an even head count, got {heads}", cfg.name()),
                });
            }
            const EB: i32 = config::EPILOGUE_ROWS as i32;
            let kernel = crate::op::mma_kernel!(dt, |E| index_type!(it, |I| rot_dims!(
                d,
                r,
                |D, R, HR| match (D, bm, bk) {
                    (64, 64, 64) => {
                        Some(k::fused_qkv_pair::kernel::<E, I, 64, 64, D, R, HR, EB, 128>())
                    }
                    (64, 128, 64) => {
                        Some(k::fused_qkv_pair::kernel::<E, I, 128, 64, D, R, HR, EB, 128>())
                    }
                    (128, 64, 64) => {
                        Some(k::fused_qkv_pair::kernel::<E, I, 64, 64, D, R, HR, EB, 256>())
                    }
                    (128, 128, 64) => {
                        Some(k::fused_qkv_pair::kernel::<E, I, 128, 64, D, R, HR, EB, 256>())
                    }
                    _ => None,
                }
            )))
            .flatten()
            .flatten()
            .flatten()
            .ok_or_else(|| no_kernel(call, cfg))?;
            let mut args = vec![
                PlannedArg::whole(slot::X, &ops[slot::X], false),
                PlannedArg::whole(slot::W, &ops[slot::W], false),
            ];
            args.extend(epilogue_args(call, ops));
            Ok(vec![PlannedLaunch {
                kernel: widen(kernel, true),
                args,
                grid: Some(grid(OP, heads / 2, ceil_div(call.t, bm), 1)?),
                config: cfg.name(),
            }])
        }
        QkvConfig::SplitLast {
            bm,
            bk,
            splits,
            wide,
            occupancy,
        } => {
            let kernel = crate::op::mma_kernel!(dt, |E| index_type!(it, |I| rot_dims!(
                d,
                r,
                |D, R, HR| match (bm, bk) {
                    (16, 64) => Some(k::qkv_split_last::kernel::<E, I, 16, 64, D, R, HR>()),
                    (32, 64) => Some(k::qkv_split_last::kernel::<E, I, 32, 64, D, R, HR>()),
                    (64, 64) => Some(k::qkv_split_last::kernel::<E, I, 64, 64, D, R, HR>()),
                    (16, 128) => Some(k::qkv_split_last::kernel::<E, I, 16, 128, D, R, HR>()),
                    (32, 128) => Some(k::qkv_split_last::kernel::<E, I, 32, 128, D, R, HR>()),
                    (64, 128) => Some(k::qkv_split_last::kernel::<E, I, 64, 128, D, R, HR>()),
                    _ => None,
                }
            )))
            .flatten()
            .flatten()
            .flatten()
            .ok_or_else(|| no_kernel(call, cfg))?;
            let kernel = hinted(kernel, wide, occupancy);
            scratch(ops, slot::SCRATCH, cfg)?;
            let counters = scratch(ops, slot::COUNTERS, cfg)?;
            let tiles = ceil_div(call.t, bm) * heads;
            if counters.shape.first().is_none_or(|&n| n < tiles) {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!(
                        "`{}` needs {tiles} counters, the counter operand holds {:?}",
                        cfg.name(),
                        counters.shape
                    ),
                });
            }
            let mut args = vec![
                PlannedArg::whole(slot::X, &ops[slot::X], false),
                PlannedArg::whole(slot::W, &ops[slot::W], false),
            ];
            args.extend(epilogue_args(call, ops));
            args.push(PlannedArg::Tensor {
                operand: slot::SCRATCH,
                output: true,
                shape: vec![splits, call.t, call.n()],
                strides: vec![tn, call.n(), 1],
                offset: 0,
            });
            args.push(PlannedArg::Tensor {
                operand: slot::COUNTERS,
                output: true,
                shape: vec![tiles],
                strides: vec![1],
                offset: 0,
            });
            Ok(vec![PlannedLaunch {
                kernel,
                args,
                grid: Some(grid(OP, ceil_div(call.t, bm), heads, splits)?),
                config: cfg.name(),
            }])
        }
        QkvConfig::Unfused => unfused(cfg, call, ops, target),
    }
}

/// A registry call spec's switches: `shapes` = `[[T, hidden], [Hq, Hkv, D, rot]]`, optionally followed
/// by `[bias, norm, gptj, paged, unfused, i64 indices]` as 0/1 (default `[0, 1, 0, 1, 0, 1]`).
pub const SPEC_INPUTS: &str =
    "[[T, hidden], [Hq, Hkv, D, rot], optional [bias, norm, gptj, paged, unfused, i64] as 0/1]";

/// The described operands and options of a registry call spec (see [`SPEC_INPUTS`]): a random-layer
/// call with `max_pos = 8192`, a paged cache of 16-token blocks or a contiguous one-sequence cache.
pub fn described_call(
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<(Vec<Operand>, QkvOptions), OpError> {
    let bad = || OpError::Unsupported {
        op: OP,
        what: format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"),
    };
    let (xs, heads) = match shapes {
        [x, h] | [x, h, _] if x.len() == 2 && h.len() == 4 => (x, h),
        _ => return Err(bad()),
    };
    let sw = match shapes.get(2) {
        Some(s) if s.len() == 6 => s.clone(),
        Some(_) => return Err(bad()),
        None => vec![0, 1, 0, 1, 0, 1],
    };
    let (t, hidden) = (xs[0], xs[1]);
    let (hq, hkv, d, rot) = (heads[0], heads[1], heads[2], heads[3]);
    let opts = QkvOptions {
        bias: sw[0] != 0,
        norm: sw[1] != 0,
        eps: 1e-6,
        style: if sw[2] != 0 {
            RopeStyle::Gptj
        } else {
            RopeStyle::Neox
        },
        paged: sw[3] != 0,
        path: if sw[4] != 0 {
            Path::Unfused
        } else {
            Path::Fused
        },
    };
    let it = if sw[5] != 0 {
        ScalarType::I64
    } else {
        ScalarType::I32
    };
    let n = (hq + 2 * hkv) * d;
    let cache = if opts.paged {
        vec![ceil_div(t, 16) + 1, 16, hkv, d]
    } else {
        vec![1, hkv, t.max(1), d]
    };
    let o = Operand::described;
    let ops = vec![
        o("x", slot::X, dt, &[t, hidden]),
        o("weight", slot::W, dt, &[hidden, n]),
        o("bias", slot::BIAS, dt, &[n]),
        o("q_norm", slot::Q_NORM, dt, &[d]),
        o("k_norm", slot::K_NORM, dt, &[d]),
        o("cos", slot::COS, ScalarType::F32, &[8192, rot / 2]),
        o("sin", slot::SIN, ScalarType::F32, &[8192, rot / 2]),
        o("positions", slot::POSITIONS, it, &[t]),
        o("index_a", slot::INDEX_A, it, &[t]),
        o("index_b", slot::INDEX_B, it, &[t]),
        o("q", slot::Q, dt, &[t, hq, d]),
        o("k_cache", slot::K_CACHE, dt, &cache),
        o("v_cache", slot::V_CACHE, dt, &cache),
    ];
    Ok((ops, opts))
}

/// The calls the catalog compiles, the GPU runner checks and benchmarks, and the examples run: the
/// Llama-style benchmark shapes (hidden 4096, Hq 32, Hkv 8, D 128, bf16, QK-norm, paged cache) for
/// decode (T = 1, 8, 32, 64) and prefill (T = 4096, 16384), each fused and unfused, and ragged calls
/// covering the other switches.
pub fn representative_calls() -> Vec<CallSpec> {
    let c = |dt: &str, x: &[i64], h: &[i64], sw: &[i64]| CallSpec::new(OP, dt, &[x, h, sw], false);
    let mut calls = Vec::new();
    for unfused in [0, 1] {
        for t in [1, 8, 32, 64, 4096, 16384] {
            calls.push(c(
                "bf16",
                &[t, 4096],
                &[32, 8, 128, 128],
                &[0, 1, 0, 1, unfused, 1],
            ));
        }
    }
    calls.extend([
        c("f16", &[37, 1000], &[4, 1, 64, 32], &[1, 0, 1, 0, 0, 0]),
        c("bf16", &[300, 520], &[8, 8, 64, 64], &[1, 1, 0, 0, 0, 1]),
        c("f16", &[5, 768], &[8, 2, 128, 64], &[1, 1, 1, 1, 0, 0]),
        c("bf16", &[100, 512], &[4, 2, 256, 256], &[0, 1, 0, 1, 0, 1]),
        c("bf16", &[37, 1000], &[4, 1, 64, 32], &[1, 1, 1, 0, 1, 0]),
    ]);
    calls
}
