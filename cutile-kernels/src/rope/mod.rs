//! Standalone rotary position embedding (RoPE), as vLLM's `rotary_embedding`: q `[T, Hq, D]` and k `[T,
//! Hk, D]` rotated in ONE launch, at `positions[T]` (i32 or i64, any order), from a cos/sin cache.
//!
//! ```no_run
//! use cutile::runtime::{Device, Stream, Tensor};
//! use cutile_kernels::rope::{self, RopeStyle};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! let (t, hq, hk, d, rot, max_pos) = (4096, 32, 8, 128, 128, 8192);
//! let mut q = Tensor::<half::bf16>::random(&device, &[t, hq, d], 1)?;
//! let mut k = Tensor::<half::bf16>::random(&device, &[t, hk, d], 2)?;
//! let (c, s) = rope::reference::cos_sin_cache(max_pos as usize, rot as usize, 10000.0);
//! let cos = Tensor::from_host(&device, &c, &[max_pos, rot / 2])?;
//! let sin = Tensor::from_host(&device, &s, &[max_pos, rot / 2])?;
//! let pos = Tensor::from_host(&device, &(0..t as i32).collect::<Vec<_>>(), &[t])?;
//! rope::rope_(&stream, &mut q, &mut k, &cos, &sin, &pos, RopeStyle::Neox)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! - Styles: NeoX (half-split: lane `i` pairs with `i + rot/2`) and GPT-J (interleaved: `2i` with
//!   `2i + 1`), [`RopeStyle`].
//! - Partial rotary: `rot = 2 · cos.shape[1]` lanes rotate (`rot ≤ D`), lanes `rot..D` are copied.
//! - The cos/sin cache is **f32** `[max_pos, rot/2]` whatever the activation type (vLLM keeps it in the
//!   model dtype; f32 costs 2 × 4 bytes per rotated pair per token and keeps the angles exact).
//! - A position outside `[0, max_pos)` reads `cos = sin = 0`: its rotated lanes become 0. Nothing is
//!   read out of bounds.
//! - [`rope`] writes `q_out`, `k_out` (out of place); [`rope_`] rotates `q`, `k` in place. Any strides:
//!   q and k are usually column slices of a fused qkv output `[T, (Hq + 2Hkv)·D]` viewed as `[T, H, D]`.
//! - bf16, f16, f32; math in f32.
//!
//! - [`config`]: the tile per head dimension, and the full-rotary tiles the tuner may time
//!   (`CUTILE_TUNE`); [`reference`](mod@reference): the CPU reference;
//! - [`plan`]: the launch of a call, without a device ([`plan_with`]: every tuning candidate's);
//!   [`representative_calls`] for the catalog.

pub mod config;
mod dsl;
pub mod reference;

pub use config::RopeConfig;
pub(crate) use dsl::grid;
pub use dsl::kernels;
pub use reference::RopeStyle;

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::tuning::{self, Candidate, DeviceTrial};
use crate::op::{
    CallSpec, FLOATS, INDICES, OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div,
    execute, float_index_kernel,
};

/// The op's name in the registry.
pub const OP: &str = "rope";

/// Operand order, out of place: `[q, k, cos, sin, positions, q_out, k_out]`; in place the first five
/// (q and k are then the outputs).
pub mod slot {
    pub const Q: usize = 0;
    pub const K: usize = 1;
    pub const COS: usize = 2;
    pub const SIN: usize = 3;
    pub const POSITIONS: usize = 4;
    pub const Q_OUT: usize = 5;
    pub const K_OUT: usize = 6;
}

/// `q_out`, `k_out` = RoPE of `q`, `k` at `positions`, queued on `stream` (one launch).
#[allow(clippy::too_many_arguments)]
pub fn rope<'a>(
    stream: &'a Stream,
    q: &'a impl TensorArg,
    k: &'a impl TensorArg,
    cos: &'a impl TensorArg,
    sin: &'a impl TensorArg,
    positions: &'a impl TensorArg,
    q_out: &'a mut impl TensorArgMut,
    k_out: &'a mut impl TensorArgMut,
    style: RopeStyle,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("q", q),
        Operand::of("k", k),
        Operand::of("cos", cos),
        Operand::of("sin", sin),
        Operand::of("positions", positions),
        Operand::of("q_out", &*q_out),
        Operand::of("k_out", &*k_out),
    ];
    run(stream, &operands, style)
}

/// RoPE of `q` and `k` in place at `positions`, queued on `stream` (one launch).
pub fn rope_<'a>(
    stream: &'a Stream,
    q: &'a mut impl TensorArgMut,
    k: &'a mut impl TensorArgMut,
    cos: &'a impl TensorArg,
    sin: &'a impl TensorArg,
    positions: &'a impl TensorArg,
    style: RopeStyle,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("q", &*q),
        Operand::of("k", &*k),
        Operand::of("cos", cos),
        Operand::of("sin", sin),
        Operand::of("positions", positions),
    ];
    run(stream, &operands, style)
}

/// Validates, chooses the tile (for a full-rotary call tuned when `CUTILE_TUNE` asks) and queues the
/// launch.
fn run<'a>(
    stream: &'a Stream,
    operands: &[Operand],
    style: RopeStyle,
) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let call = Call::new(operands, &target)?;
    // With tuning off (the default) no candidate list or key is built.
    let tuned = cutile::tune::Tuner::global().mode() != cutile::tune::TuneMode::Off;
    let launches = if !tuned || call.is_empty() {
        call.plan(operands, style, false)?
    } else if call.pairs_path() {
        let class = config::pairs_class(call.dtype, style, call.tokens, call.d);
        let candidates = call.pairs_candidates(style);
        call.tuned(
            stream,
            operands,
            style,
            class,
            &candidates,
            move |c, ops, cfg| c.launch_pairs(ops, cfg, style),
        )?
    } else {
        let candidates = config::candidates(OP, call.tokens, call.d)?;
        let class = config::head_class(call.dtype, style, &candidates[0]);
        call.tuned(
            stream,
            operands,
            style,
            class,
            &candidates,
            move |c, ops, cfg| c.launch(ops, cfg, style),
        )?
    };
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively); the
    // launch addresses only elements `Call::new` checked against their shapes.
    unsafe { execute(stream, operands, &launches) }
}

/// Elements from the first to one past the last element `o` addresses: what a buffer standing in for
/// it must hold.
fn span(o: &Operand) -> i64 {
    1 + o
        .shape
        .iter()
        .zip(&o.strides)
        .map(|(&n, &s)| (n - 1).max(0) * s.abs())
        .sum::<i64>()
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    index: ScalarType,
    tokens: i64,
    hq: i64,
    hk: i64,
    heads: i64,
    d: i64,
    rot: i64,
    in_place: bool,
    /// SMs of the target (the default pair tile shrinks to fill them, `config::choose_pairs_on`).
    sms: i64,
}

fn shape_err(what: String, left: &[i64], right: &[i64]) -> OpError {
    OpError::Shape {
        op: OP,
        what,
        left: format!("{left:?}"),
        right: format!("{right:?}"),
    }
}

impl Call {
    fn new(operands: &[Operand], target: &Target) -> Result<Call, OpError> {
        let in_place = match operands.len() {
            5 => true,
            7 => false,
            n => {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!(
                        "takes 7 tensors (q, k, cos, sin, positions, q_out, k_out) or 5 in place, got {n}"
                    ),
                });
            }
        };
        for o in operands {
            target.expect_device(OP, o)?;
        }
        let (q, k) = (&operands[slot::Q], &operands[slot::K]);
        let (cos, sin, pos) = (
            &operands[slot::COS],
            &operands[slot::SIN],
            &operands[slot::POSITIONS],
        );
        q.expect_dtype(OP, FLOATS)?;
        k.expect_same_dtype(OP, q)?;
        cos.expect_dtype(OP, &[ScalarType::F32])?;
        sin.expect_dtype(OP, &[ScalarType::F32])?;
        pos.expect_dtype(OP, INDICES)?;
        q.expect_rank(OP, 3)?;
        k.expect_rank(OP, 3)?;
        cos.expect_rank(OP, 2)?;
        pos.expect_rank(OP, 1)?;
        sin.expect_same_shape(OP, cos)?;
        let (t, hq, d) = (q.shape[0], q.shape[1], q.shape[2]);
        if k.shape[0] != t || k.shape[2] != d {
            return Err(shape_err(
                "`k` must be [T, Hk, D] with `q`'s T and D".into(),
                &k.shape,
                &q.shape,
            ));
        }
        if pos.shape[0] != t {
            return Err(shape_err(
                "`positions` must have one entry per token of `q`".into(),
                &pos.shape,
                &[t],
            ));
        }
        let rot = 2 * cos.shape[1];
        if rot > d || rot == 0 {
            return Err(shape_err(
                "the cos/sin cache is [max_pos, rot/2] with 0 < rot ≤ D".into(),
                &cos.shape,
                &[cos.shape[0], d / 2],
            ));
        }
        if !in_place {
            for (o, src) in [(slot::Q_OUT, q), (slot::K_OUT, k)] {
                operands[o].expect_same_dtype(OP, src)?;
                operands[o].expect_same_shape(OP, src)?;
            }
        }
        let heads = hq + k.shape[1];
        if heads > 65535 {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!("{heads} heads exceed the grid's 65535 along y"),
            });
        }
        Ok(Call {
            dtype: q.dtype,
            index: pos.dtype,
            tokens: t,
            hq,
            hk: k.shape[1],
            heads,
            d,
            rot,
            in_place,
            sms: i64::from(target.sm_count),
        })
    }

    fn launch(
        &self,
        operands: &[Operand],
        cfg: &RopeConfig,
        style: RopeStyle,
    ) -> Result<PlannedLaunch, OpError> {
        let kernel = kernel(self.dtype, self.index, cfg).ok_or_else(|| OpError::Unsupported {
            op: OP,
            what: format!(
                "no {} kernel with {} positions for BM = {}, DP = {}",
                self.dtype, self.index, cfg.bm, cfg.dp
            ),
        })?;
        let (q_out, k_out) = if self.in_place {
            (slot::Q, slot::K)
        } else {
            (slot::Q_OUT, slot::K_OUT)
        };
        let flags = match style {
            RopeStyle::Neox => 0,
            RopeStyle::Gptj => dsl::GPTJ,
        };
        let whole = |i: usize, output: bool| PlannedArg::whole(i, &operands[i], output);
        Ok(PlannedLaunch {
            kernel,
            args: vec![
                whole(slot::Q, false),
                whole(slot::K, false),
                whole(slot::COS, false),
                whole(slot::SIN, false),
                whole(slot::POSITIONS, false),
                PlannedArg::I32(self.rot as i32),
                PlannedArg::I32(flags),
                PlannedArg::I32(cfg.heads_fastest as i32),
                whole(q_out, true),
                whole(k_out, true),
            ],
            grid: Some(if cfg.heads_fastest {
                (
                    crate::op::grid_rows(OP, ceil_div(self.tokens, cfg.bm) * self.heads)?,
                    1,
                    1,
                )
            } else {
                (
                    crate::op::grid_rows(OP, ceil_div(self.tokens, cfg.bm))?,
                    self.heads as u32,
                    1,
                )
            }),
            config: format!("rope {}", cfg.name()),
        })
    }
}

impl Call {
    /// The launch of a call with the pair kernels (full rotary, or partial in place).
    fn launch_pairs(
        &self,
        operands: &[Operand],
        cfg: &config::PairsConfig,
        style: RopeStyle,
    ) -> Result<PlannedLaunch, OpError> {
        let kernel = pairs_kernel(self.dtype, self.index, cfg, style).ok_or_else(|| {
            OpError::Unsupported {
                op: OP,
                what: format!(
                    "no {} kernel with {} positions for BM = {}, HB = {}, HP = {}",
                    self.dtype, self.index, cfg.bm, cfg.hb, cfg.hp
                ),
            }
        })?;
        let (q_out, k_out) = if self.in_place {
            (slot::Q, slot::K)
        } else {
            (slot::Q_OUT, slot::K_OUT)
        };
        let whole = |i: usize, output: bool| PlannedArg::whole(i, &operands[i], output);
        let groups = ceil_div(self.hq, cfg.hb) + ceil_div(self.hk, cfg.hb);
        let name = match style {
            RopeStyle::Neox => "rope_neox",
            RopeStyle::Gptj => "rope_gptj",
        };
        Ok(PlannedLaunch {
            kernel,
            args: vec![
                whole(slot::Q, false),
                whole(slot::K, false),
                whole(slot::COS, false),
                whole(slot::SIN, false),
                whole(slot::POSITIONS, false),
                PlannedArg::I32(cfg.heads_fastest as i32),
                whole(q_out, true),
                whole(k_out, true),
            ],
            grid: Some(if cfg.heads_fastest {
                (
                    crate::op::grid_rows(OP, ceil_div(self.tokens, cfg.bm) * groups)?,
                    1,
                    1,
                )
            } else {
                (
                    crate::op::grid_rows(OP, ceil_div(self.tokens, cfg.bm))?,
                    groups as u32,
                    1,
                )
            }),
            config: format!("{name} {}", cfg.name()),
        })
    }
}

impl Call {
    /// Whether the call rotates every lane (`rot = D`) and is not empty.
    fn full_rotary(&self) -> bool {
        self.rot == self.d && !self.is_empty()
    }

    /// Whether the call takes the pair kernels: full rotary, or partial rotary in place. The pair
    /// kernels rotate lanes `0..rot` and never touch `rot..D`, which in place is all there is to do
    /// (out of place those lanes must be copied, which the per-head kernel does). Partial rotary in
    /// place has only its default tile (no tuning candidates: a trial runs out of place and would
    /// compare lanes no candidate writes).
    fn pairs_path(&self) -> bool {
        (self.full_rotary() || self.in_place) && !self.is_empty()
    }

    fn is_empty(&self) -> bool {
        self.tokens == 0 || self.heads == 0 || self.d == 0
    }

    /// The full-rotary tiles the tuner may time, the default first; none unless [`Call::full_rotary`]
    /// with a head dimension the kernels take (else [`Call::plan`] reports the error).
    fn pairs_candidates(&self, style: RopeStyle) -> Vec<config::PairsConfig> {
        if self.full_rotary() && self.d <= config::MAX_D {
            config::pairs_candidates_on(self.tokens, self.d, self.hq, self.hk, self.sms, style)
        } else {
            Vec::new()
        }
    }

    /// The default pair tile of the call ([`config::choose_pairs_on`] for its `rot` rotated lanes).
    fn pairs_default(&self, style: RopeStyle) -> config::PairsConfig {
        config::choose_pairs_on(self.tokens, self.rot, self.hq, self.hk, self.sms, style)
    }

    /// The launches of the call: the default configuration's, or every tuning candidate's (default
    /// first) with `all_candidates`; none when the call is empty.
    fn plan(
        &self,
        operands: &[Operand],
        style: RopeStyle,
        all_candidates: bool,
    ) -> Result<Vec<PlannedLaunch>, OpError> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        if !self.pairs_path() {
            let tiles = if all_candidates {
                config::candidates(OP, self.tokens, self.d)?
            } else {
                vec![config::choose(OP, self.tokens, self.d)?]
            };
            return tiles
                .iter()
                .map(|c| self.launch(operands, c, style))
                .collect();
        }
        // A partial-rotary call in place has no candidates but still its default.
        let mut tiles = if all_candidates {
            self.pairs_candidates(style)
        } else {
            Vec::new()
        };
        if tiles.is_empty() {
            tiles.push(self.pairs_default(style));
        }
        tiles
            .iter()
            .map(|c| self.launch_pairs(operands, c, style))
            .collect()
    }

    /// The launch of the candidate [`Call::tune`] picks, or the default plan when there is nothing to
    /// choose between (fewer than two candidates).
    #[allow(clippy::too_many_arguments)]
    fn tuned<C: Candidate + 'static>(
        &self,
        stream: &Stream,
        operands: &[Operand],
        style: RopeStyle,
        class: String,
        candidates: &[C],
        launch: impl Fn(&Call, &[Operand], &C) -> Result<PlannedLaunch, OpError> + Copy + 'static,
    ) -> Result<Vec<PlannedLaunch>, OpError> {
        if candidates.len() < 2 {
            return self.plan(operands, style, false);
        }
        let cfg = self.tune(stream, operands, class, candidates, launch)?;
        Ok(vec![launch(self, operands, &cfg)?])
    }

    /// The configuration to use: `candidates[0]` (the default) unless the tuner (`CUTILE_TUNE`)
    /// picked another for `class`; `launch` plans one candidate. Trials run out of place into scratch
    /// whatever the call: `q_out` is the trial's own buffer (the one compared), `k_out` the stream's
    /// scratch, so no trial writes the caller's tensors (in place, the repeated runs would rotate `k`
    /// once per run). The layouts stay the call's, so a trial's kernels are the ones the call launches
    /// (in place or not, the same keys).
    fn tune<C: Candidate + 'static>(
        &self,
        stream: &Stream,
        operands: &[Operand],
        class: String,
        candidates: &[C],
        launch: impl Fn(&Call, &[Operand], &C) -> Result<PlannedLaunch, OpError> + 'static,
    ) -> Result<C, OpError> {
        let key = tuning::key(stream, OP, class);
        tuning::choose(&key, candidates, || {
            let (q_out, k_out) = if self.in_place {
                (slot::Q, slot::K)
            } else {
                (slot::Q_OUT, slot::K_OUT)
            };
            let mut ops = operands[..slot::Q_OUT].to_vec();
            ops.push(Operand {
                name: "q_out",
                ..operands[q_out].clone()
            });
            let k = &operands[k_out];
            let scratch = crate::op::scratch::scratch(stream, "k_out", k.dtype, span(k))?;
            ops.push(Operand {
                name: "k_out",
                ptr: scratch.ptr,
                ..k.clone()
            });
            let call = Call {
                in_place: false,
                ..self.clone()
            };
            let trial = DeviceTrial::new(
                stream,
                &ops,
                slot::Q_OUT,
                crate::tolerance(self.dtype),
                true,
                move |c: &C, ops: &[Operand]| Ok(vec![launch(&call, ops, c)?]),
            )?;
            Ok(Box::new(trial))
        })
    }
}

/// `kernels::$k::kernel::<$E, $I, BM, HB, HP, 2·HP>()` for `$cfg`'s tile among the listed ones
/// ([`config::pairs_tiles`]).
macro_rules! pairs_tile_kernel {
    ($k:ident, $E:ty, $I:ty, $cfg:expr, [$(($bm:literal, $hb:literal, $hp:literal)),* $(,)?]) => {
        match ($cfg.bm, $cfg.hb, $cfg.hp) {
            $(($bm, $hb, $hp) => Some(kernels::$k::kernel::<$E, $I, $bm, $hb, $hp, { 2 * $hp }>()),)*
            _ => None,
        }
    };
}

/// The full-rotary kernel of `style` for `cfg`, one of [`config::PAIRS_TILES`].
fn pairs_kernel(
    dt: ScalarType,
    it: ScalarType,
    cfg: &config::PairsConfig,
    style: RopeStyle,
) -> Option<cutile::dsl::Kernel> {
    float_index_kernel!(dt, it, |E, I| match style {
        RopeStyle::Neox => config::pairs_tiles!(pairs_tile_kernel!(rope_neox, E, I, cfg,)),
        RopeStyle::Gptj => config::pairs_tiles!(pairs_tile_kernel!(rope_gptj, E, I, cfg,)),
    })
    .flatten()
}

/// `kernels::rope::kernel::<E, I, BM, DP>()` for the listed tiles ([`config::TILES`]).
fn kernel(dt: ScalarType, it: ScalarType, cfg: &RopeConfig) -> Option<cutile::dsl::Kernel> {
    float_index_kernel!(dt, it, |E, I| match (cfg.bm, cfg.dp) {
        (64, 16) => Some(kernels::rope::kernel::<E, I, 64, 16>()),
        (64, 32) => Some(kernels::rope::kernel::<E, I, 64, 32>()),
        (32, 64) => Some(kernels::rope::kernel::<E, I, 32, 64>()),
        (16, 128) => Some(kernels::rope::kernel::<E, I, 16, 128>()),
        (8, 256) => Some(kernels::rope::kernel::<E, I, 8, 256>()),
        (4, 512) => Some(kernels::rope::kernel::<E, I, 4, 512>()),
        (1, 16) => Some(kernels::rope::kernel::<E, I, 1, 16>()),
        (1, 32) => Some(kernels::rope::kernel::<E, I, 1, 32>()),
        (1, 64) => Some(kernels::rope::kernel::<E, I, 1, 64>()),
        (1, 128) => Some(kernels::rope::kernel::<E, I, 1, 128>()),
        (1, 256) => Some(kernels::rope::kernel::<E, I, 1, 256>()),
        (1, 512) => Some(kernels::rope::kernel::<E, I, 1, 512>()),
        _ => None,
    })
    .flatten()
}

/// The launch of a call (operands as [`slot`] lists them; 5 operands = in place); none when the call
/// is empty.
pub fn plan(
    operands: &[Operand],
    target: &Target,
    style: RopeStyle,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_with(operands, target, style, false)
}

/// [`plan`], or with `all_candidates` the launch of every tuning candidate, the default's first (what
/// a bundle for a tuning run holds): a full-rotary call has [`config::pairs_candidates`], any other
/// only its default.
pub fn plan_with(
    operands: &[Operand],
    target: &Target,
    style: RopeStyle,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    Call::new(operands, target)?.plan(operands, style, all_candidates)
}

/// The launch of a pair-kernel call (full rotary, or partial in place) with the pair tile `cfg` (what
/// a test pinning a tile plans); none when the call is empty, an error when the pair kernels cannot
/// do the call or `cfg` has no kernel.
pub fn plan_pairs(
    operands: &[Operand],
    target: &Target,
    style: RopeStyle,
    cfg: &config::PairsConfig,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let call = Call::new(operands, target)?;
    if call.is_empty() {
        return Ok(Vec::new());
    }
    if !call.pairs_path() {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!(
                "the pair kernels write only the rotated lanes; this out-of-place call rotates {} of \
                 {} (run it in place, or through `plan`, which copies the rest)",
                call.rot, call.d
            ),
        });
    }
    Ok(vec![call.launch_pairs(operands, cfg, style)?])
}

/// What [`CallSpec::shapes`] lists for the op.
pub const SPEC_INPUTS: &str =
    "[[T, Hq, Hk, D], [rot, max_pos], optional [gptj, i64 positions, in place] as 0/1]";

/// The options a call spec encodes besides the shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecOptions {
    pub style: RopeStyle,
    pub index: ScalarType,
    pub in_place: bool,
}

/// The described operands and options of a registry call spec (see [`SPEC_INPUTS`]).
pub fn described_call(
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<(Vec<Operand>, SpecOptions), OpError> {
    let bad = || OpError::Unsupported {
        op: OP,
        what: format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"),
    };
    let (dims, rp) = match shapes {
        [a, b] | [a, b, _] if a.len() == 4 && b.len() == 2 => (a, b),
        _ => return Err(bad()),
    };
    let flags = shapes.get(2).cloned().unwrap_or_default();
    let flag = |i: usize| flags.get(i).copied().unwrap_or(0) != 0;
    let (t, hq, hk, d) = (dims[0], dims[1], dims[2], dims[3]);
    let (rot, max_pos) = (rp[0], rp[1]);
    let opts = SpecOptions {
        style: if flag(0) {
            RopeStyle::Gptj
        } else {
            RopeStyle::Neox
        },
        index: if flag(1) {
            ScalarType::I64
        } else {
            ScalarType::I32
        },
        in_place: flag(2),
    };
    let mut ops = vec![
        Operand::described("q", 0, dt, &[t, hq, d]),
        Operand::described("k", 1, dt, &[t, hk, d]),
        Operand::described("cos", 2, ScalarType::F32, &[max_pos, rot / 2]),
        Operand::described("sin", 3, ScalarType::F32, &[max_pos, rot / 2]),
        Operand::described("positions", 4, opts.index, &[t]),
    ];
    if !opts.in_place {
        ops.push(Operand::described("q_out", 5, dt, &[t, hq, d]));
        ops.push(Operand::described("k_out", 6, dt, &[t, hk, d]));
    }
    Ok((ops, opts))
}

/// The calls the catalog compiles and the runner checks and benchmarks: Llama-like prefill (bf16, T =
/// 16384, 32 q + 8 k heads of 128) for the bandwidth bench, in place and out of place (the same
/// kernel; the pair tells what writing back over the input costs), decode (T = 8), GPT-J partial
/// rotary with i64 positions (f16, D = 256, rot = 64), ragged f32 (D = 80, rot = 32, out of place), and
/// GPT-J full rotary (bf16, D = 64: the interleaved pair kernel). The GPT-J partial call also runs in
/// place (the pair kernels, which leave lanes `rot..D` alone). Three more prefill-sized calls give
/// the tuner other shapes of its classes, so a default tile is not chosen on one shape: GPT-J at T =
/// 4096, NeoX at T = 16384 with 64 + 8 heads (a 70B layer, i64 positions), and f16 GPT-J D = 64 out of
/// place at T = 32768.
pub fn representative_calls() -> Vec<CallSpec> {
    let c = |dt: &str, a: &[i64], b: &[i64], f: &[i64]| CallSpec::new(OP, dt, &[a, b, f], false);
    vec![
        c("bf16", &[16384, 32, 8, 128], &[128, 32768], &[0, 0, 1]),
        c("bf16", &[16384, 32, 8, 128], &[128, 32768], &[0, 0, 0]),
        c("bf16", &[4096, 32, 8, 128], &[128, 8192], &[1, 0, 1]),
        c("bf16", &[16384, 64, 8, 128], &[128, 32768], &[0, 1, 1]),
        c("f16", &[32768, 16, 16, 64], &[64, 32768], &[1, 0, 0]),
        c("bf16", &[8, 32, 8, 128], &[128, 4096], &[0, 0, 1]),
        c("f16", &[1000, 16, 16, 256], &[64, 4096], &[1, 1, 0]),
        c("f16", &[1000, 16, 16, 256], &[64, 4096], &[1, 1, 1]),
        c("f32", &[77, 5, 3, 80], &[32, 1024], &[0, 0, 0]),
        c("bf16", &[300, 8, 2, 64], &[64, 2048], &[1, 1, 0]),
    ]
}
