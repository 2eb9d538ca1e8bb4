//! Greedy and top-k sampling helpers over logits `x: [T, V]` (V up to 2^31 − 1, any row stride; bf16,
//! f16, f32):
//!
//! - [`argmax`]: `out[T]` i64 = `torch.argmax(x, -1)` (ties → the smaller index);
//! - [`topk`]: `values[T, k]` (x's type) and `indices[T, k]` i64 = `torch.topk(x, k)` with `k =
//!   values.shape[1] ≤ 64 ≤ V`, sorted descending, ties → the smaller index.
//!
//! ```no_run
//! use cutile::runtime::{Device, Stream, Tensor};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! let logits = Tensor::<half::bf16>::random(&device, &[64, 128256], 1)?;
//! let mut next = Tensor::<i64>::zeros(&device, &[64])?;
//! cutile_kernels::sampling::argmax(&stream, &logits, &mut next)?.wait()?;
//! let mut vals = Tensor::<half::bf16>::zeros(&device, &[64, 50])?;
//! let mut idx = Tensor::<i64>::zeros(&device, &[64, 50])?;
//! cutile_kernels::sampling::topk(&stream, &logits, &mut vals, &mut idx)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! argmax is one launch for rows of one chunk (up to 8192 columns, fewer for small batches), and
//! otherwise two: every chunk of a row writes its `(max, column)` partial (grid `T · chunks`, at least
//! two blocks per SM where the row allows, so a few decode rows still use the whole device) and one
//! block per row merges them. Top-k is two launches or more: every `BN`-wide chunk of a row keeps its
//! own top-k set (grid `T · chunks`, at least the SM count where the row allows), one or more
//! selection rounds keep the top-k of groups of at most [`config::MB_MAX`] candidates until one set
//! per row is left, and one block per row sorts it. Both take their partials from scratch that is no
//! user tensor: operands `[x, out, part_v, part_i]` and `[x, values, indices, cand_v, cand_i]`, f32 /
//! i32 ([`argmax`] and [`topk`] take it from the stream's scratch buffer; planning without a device
//! appends described ones: [`with_scratch`]). NaN inputs give unspecified in-range indices.
//!
//! - [`config`]: chunk and slot sizes; [`reference`](mod@reference): the CPU references;
//! - [`plan`]: the launch of a call, without a device; [`representative_calls`] for the catalog.

pub mod config;
mod dsl;
pub mod reference;

pub use dsl::kernels;

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::tuning::Candidate;

use crate::op::{
    CallSpec, FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, execute, float_kernel,
    grid_rows,
};

/// `[x, out]`.
pub const ARGMAX: &str = "argmax";
/// `[x, values, indices]`.
pub const TOPK: &str = "topk";

/// `out[t] = argmax(x[t, :])` (i64), queued on `stream`.
pub fn argmax<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    out: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![Operand::of("x", x), Operand::of("out", &*out)];
    let target = Target::of(stream.device())?;
    if let Some(n) = scratch_elems(ARGMAX, &operands, &target) {
        let (v, i) = pair_scratch(stream, ["part_v", "part_i"], n)?;
        operands.extend([v, i]);
    }
    run_on(stream, ARGMAX, &operands, &target)
}

/// The `k = values.shape[1]` largest of each row and their indices (i64), sorted descending.
pub fn topk<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    values: &'a mut impl TensorArgMut,
    indices: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![
        Operand::of("x", x),
        Operand::of("values", &*values),
        Operand::of("indices", &*indices),
    ];
    let target = Target::of(stream.device())?;
    if let Some(n) = scratch_elems(TOPK, &operands, &target) {
        let (v, i) = pair_scratch(stream, ["cand_v", "cand_i"], n)?;
        operands.extend([v, i]);
    }
    run_on(stream, TOPK, &operands, &target)
}

/// An f32 and an i32 scratch array of `n` elements each, named `names`, from one buffer of the
/// stream's scratch (the i32 array 256-byte aligned after the f32 one).
fn pair_scratch(
    stream: &Stream,
    names: [&'static str; 2],
    n: i64,
) -> Result<(Operand, Operand), OpError> {
    let half = crate::op::ceil_div(n, 64) * 64;
    let s = crate::op::scratch::scratch(stream, names[0], ScalarType::F32, 2 * half)?;
    let v = Operand {
        shape: vec![n],
        ..s.clone()
    };
    let i = Operand {
        name: names[1],
        dtype: ScalarType::I32,
        shape: vec![n],
        ptr: s.ptr + (half as u64) * 4,
        ..s
    };
    Ok((v, i))
}

/// `(T, V)` of a well-formed, non-empty call of `op` (`None` for malformed calls, which [`plan`]
/// rejects, and empty ones).
fn rows_of(op: &str, operands: &[Operand]) -> Option<(i64, i64)> {
    let x = operands.first()?;
    let (t, v) = (*x.shape.first()?, *x.shape.get(1)?);
    if x.rank() != 2 || t <= 0 || v <= 0 || v > i64::from(i32::MAX) {
        return None;
    }
    if op == TOPK {
        let vals = operands.get(1)?;
        let k = *vals.shape.get(1)?;
        if vals.rank() != 2 || k <= 0 || k > config::MAX_K || k > v {
            return None;
        }
    }
    Some((t, v))
}

/// Elements of each of the two scratch arrays a well-formed call `[x, out]` / `[x, values, indices]`
/// of `op` takes on `target`; `None` when it takes none (malformed or empty calls, argmax rows of
/// one chunk).
fn scratch_elems(op: &str, operands: &[Operand], target: &Target) -> Option<i64> {
    let (t, v) = rows_of(op, operands)?;
    if op == TOPK {
        let k = operands[1].shape[1];
        return Some(config::topk_split(t, v, k, target.sm_count).scratch(t));
    }
    let split = config::argmax_split(t, v, target.sm_count);
    (split.chunks > 1).then(|| t * config::argmax_scratch(t, v, target.sm_count))
}

/// `operands` of a call of `op` with the described scratch appended (argmax `part_v` f32 and
/// `part_i` i32 when its rows take several chunks; top-k `cand_v` and `cand_i`): what planning
/// without a device (AOT bundles, the registry, coverage tests) passes to [`plan`]. Other calls, and
/// operands that already hold the scratch, are returned as they are.
pub fn with_scratch(op: &str, operands: &[Operand], target: &Target) -> Vec<Operand> {
    let mut out = operands.to_vec();
    let (names, n_user) = match op {
        ARGMAX => (["part_v", "part_i"], 2),
        TOPK => (["cand_v", "cand_i"], 3),
        _ => return out,
    };
    if operands.len() != n_user {
        return out;
    }
    if let Some(n) = scratch_elems(op, operands, target) {
        out.push(Operand::described(names[0], n_user, ScalarType::F32, &[n]));
        out.push(Operand::described(
            names[1],
            n_user + 1,
            ScalarType::I32,
            &[n],
        ));
    }
    out
}

fn run_on<'a>(
    stream: &'a Stream,
    op: &str,
    operands: &[Operand],
    target: &Target,
) -> Result<Pending<'a>, OpError> {
    let launches = plan(op, operands, target)?;
    let tuned = cutile::tune::Tuner::global().mode() != cutile::tune::TuneMode::Off;
    // Only a split argmax (chunks, then the merge) has candidates to time.
    let split = rows_of(op, operands).filter(|_| tuned && op == ARGMAX && launches.len() > 1);
    let Some((t, v)) = split else {
        // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively),
        // and the stream's scratch buffer (used in stream order); the launches address only the
        // shapes `plan` checked.
        return unsafe { execute(stream, operands, &launches) };
    };
    let candidates = config::argmax_candidates(t, v, target.sm_count);
    let class = format!("{} [{t}, {v}]", operands[0].dtype);
    // SAFETY: as above; every candidate fits the scratch (`config::argmax_scratch`).
    unsafe {
        crate::op::tuning::run_tuned(stream, operands, 1, ARGMAX, class, &candidates, true, |c| {
            plan_argmax_with(operands, target, c)
        })
    }
}

/// The launches of an argmax call `[x, out, part_v, part_i]` (as [`plan`] takes it) with `split`
/// instead of the default (an [`config::argmax_candidates`] entry).
pub fn plan_argmax_with(
    operands: &[Operand],
    target: &Target,
    split: &config::ArgmaxSplit,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_split(ARGMAX, operands, target, Some(split))
}

fn shape_err(op: &'static str, what: &str, left: &[i64], right: &[i64]) -> OpError {
    OpError::Shape {
        op,
        what: what.into(),
        left: format!("{left:?}"),
        right: format!("{right:?}"),
    }
}

/// The launches of a call of `op` ([`ARGMAX`] `[x, out]`, or [`TOPK`] `[x, values, indices]`, each
/// plus the scratch pair [`with_scratch`] appends where the call takes one); none when there are no
/// rows.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_split(op, operands, target, None)
}

/// [`plan`], an argmax call with `split` when given.
fn plan_split(
    op: &str,
    operands: &[Operand],
    target: &Target,
    split: Option<&config::ArgmaxSplit>,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let (op, n) = match op {
        ARGMAX => (ARGMAX, 2),
        TOPK => (TOPK, 3),
        _ => {
            return Err(OpError::UnknownOp {
                name: op.into(),
                known: format!("{ARGMAX}, {TOPK}"),
            });
        }
    };
    if operands.len() != n && operands.len() != n + 2 {
        return Err(OpError::Unsupported {
            op,
            what: format!("takes {n} tensors (+ 2 scratch), got {}", operands.len()),
        });
    }
    for o in operands {
        target.expect_device(op, o)?;
    }
    let x = &operands[0];
    x.expect_dtype(op, FLOATS)?;
    x.expect_rank(op, 2)?;
    let (t, v) = (x.shape[0], x.shape[1]);
    if x.strides[1] != 1 && v > 1 {
        return Err(OpError::Layout {
            op,
            arg: x.name,
            shape: x.shape.clone(),
            strides: x.strides.clone(),
            constraint: "the vocabulary axis must be contiguous (stride 1); pass a contiguous copy"
                .into(),
        });
    }
    if v > i64::from(i32::MAX) {
        return Err(OpError::Unsupported {
            op,
            what: format!("rows of {v} elements exceed 2^31 - 1"),
        });
    }
    if op == ARGMAX {
        let out = &operands[1];
        out.expect_dtype(op, &[ScalarType::I64])?;
        if out.shape != [t] {
            return Err(shape_err(
                op,
                "`out` must be [T] for `x: [T, V]`",
                &out.shape,
                &[t],
            ));
        }
        if t > 0 && v == 0 {
            return Err(OpError::Unsupported {
                op,
                what: "argmax of an empty row".into(),
            });
        }
        if t == 0 {
            return Ok(Vec::new());
        }
        let split = match split {
            // A given split must tile the row exactly: fewer chunks would leave columns unread.
            Some(s) if s.bn <= 0 || s.chunks != (v + s.bn - 1) / s.bn => {
                return Err(OpError::Unsupported {
                    op,
                    what: format!(
                        "{} chunks of {} columns do not tile rows of {v}; take the split from \
                         `config::argmax_candidates`",
                        s.chunks, s.bn
                    ),
                });
            }
            Some(s) => *s,
            None => config::argmax_split(t, v, target.sm_count),
        };
        return plan_argmax(operands, split);
    }
    let (vals, idx) = (&operands[1], &operands[2]);
    vals.expect_same_dtype(op, x)?;
    idx.expect_dtype(op, &[ScalarType::I64])?;
    vals.expect_rank(op, 2)?;
    idx.expect_same_shape(op, vals)?;
    let k = vals.shape[1];
    if vals.shape[0] != t {
        return Err(shape_err(
            op,
            "`values` must be [T, k] for `x: [T, V]`",
            &vals.shape,
            &[t, k],
        ));
    }
    if k > config::MAX_K || (t > 0 && k > v) {
        return Err(OpError::Unsupported {
            op,
            what: format!(
                "k = {k} must be at most {} and at most V = {v}",
                config::MAX_K
            ),
        });
    }
    if k == 0 || t == 0 {
        return Ok(Vec::new());
    }
    plan_topk(operands, config::topk_split(t, v, k, target.sm_count), k)
}

/// The scratch pair `[a, b]` (operands `n_user`, `n_user + 1`) of a validated call that needs `n`
/// elements of each, or an error naming `with_scratch`.
fn scratch_pair<'o>(
    op: &'static str,
    operands: &'o [Operand],
    n_user: usize,
    n: i64,
) -> Result<&'o [Operand], OpError> {
    let pair = operands
        .get(n_user..n_user + 2)
        .ok_or_else(|| OpError::Unsupported {
            op,
            what: format!(
                "this call takes its scratch pair (f32, i32) after its {n_user} tensors: plan \
                 `sampling::with_scratch`'s operands"
            ),
        })?;
    for (o, dt) in pair.iter().zip([ScalarType::F32, ScalarType::I32]) {
        target_scratch(op, o, dt, n)?;
    }
    Ok(pair)
}

/// A `[r, w]` row-major view of scratch operand `operand` from element `at`.
fn scratch_view(operand: usize, output: bool, [r, w]: [i64; 2], at: i64) -> PlannedArg {
    PlannedArg::Tensor {
        operand,
        output,
        shape: vec![r, w],
        strides: vec![w, 1],
        offset: at,
    }
}

/// The first `n` elements of scratch operand `operand`, as a 1-D output (one element per block).
fn flat(operand: usize, n: i64) -> PlannedArg {
    PlannedArg::Tensor {
        operand,
        output: true,
        shape: vec![n],
        strides: vec![1],
        offset: 0,
    }
}

fn no_kernel(op: &'static str, dtype: ScalarType, what: &str) -> OpError {
    OpError::Unsupported {
        op,
        what: format!("no {dtype} kernel for `{what}`"),
    }
}

/// The launches of a validated, non-empty argmax call with `split`: `argmax` for rows of one chunk,
/// else `argmax_chunks` into the partials (`[x, out, part_v, part_i]`) and `argmax_merge`.
fn plan_argmax(
    operands: &[Operand],
    split: config::ArgmaxSplit,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = ARGMAX;
    let (x, out) = (&operands[0], &operands[1]);
    let t = x.shape[0];
    let config::ArgmaxSplit { bn, chunks, form } = split;
    let rows = grid_rows(op, t)?;
    if chunks == 1 {
        let c = format!("argmax BN={bn}");
        return Ok(vec![PlannedLaunch {
            kernel: float_kernel!(x.dtype, |E| argmax_kernel::<E>(bn))
                .flatten()
                .ok_or_else(|| no_kernel(op, x.dtype, &c))?,
            args: vec![
                PlannedArg::whole(0, x, false),
                PlannedArg::whole(1, out, true),
            ],
            grid: Some((rows, 1, 1)),
            config: c,
        }]);
    }
    scratch_pair(op, operands, 2, t * chunks)?;
    let blocks = grid_rows(op, t * chunks)?;
    let c1 = format!("argmax_chunks {}", split.name());
    let cb = config::ARGMAX_CB;
    let c2 = format!("argmax_merge CB={cb}");
    Ok(vec![
        PlannedLaunch {
            kernel: float_kernel!(x.dtype, |E| argmax_chunks_kernel::<E>(bn, form))
                .flatten()
                .ok_or_else(|| no_kernel(op, x.dtype, &c1))?,
            args: vec![
                PlannedArg::whole(0, x, false),
                PlannedArg::I32(chunks as i32),
                flat(2, t * chunks),
                flat(3, t * chunks),
            ],
            grid: Some((blocks, 1, 1)),
            config: format!("{c1} chunks={chunks}"),
        },
        PlannedLaunch {
            kernel: kernels::argmax_merge::kernel::<{ config::ARGMAX_CB as i32 }>(),
            args: vec![
                scratch_view(2, false, [t, chunks], 0),
                scratch_view(3, false, [t, chunks], 0),
                PlannedArg::whole(1, out, true),
            ],
            grid: Some((rows, 1, 1)),
            config: c2,
        },
    ])
}

/// The launches of a validated top-k call `[x, values, indices, cand_v, cand_i]` with `split`:
/// `topk_chunks` into the candidates, each selection round (rows of several chunks) into the next
/// region of the scratch, `topk_sort` into the outputs.
fn plan_topk(
    operands: &[Operand],
    split: config::TopkSplit,
    k: i64,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = TOPK;
    let (x, vals, idx) = (&operands[0], &operands[1], &operands[2]);
    let t = x.shape[0];
    scratch_pair(op, operands, 3, split.scratch(t))?;
    let config::TopkSplit { bn, chunks, kp } = split;
    let blocks = grid_rows(op, t * chunks)?;
    let rows = grid_rows(op, t)?;
    let c1 = format!("topk_chunks KP={kp} BN={bn}");
    let mut launches = vec![PlannedLaunch {
        kernel: float_kernel!(x.dtype, |E| topk_chunks_kernel::<E>(kp, bn))
            .flatten()
            .ok_or_else(|| no_kernel(op, x.dtype, &c1))?,
        args: vec![
            PlannedArg::whole(0, x, false),
            PlannedArg::I32(k as i32),
            PlannedArg::I32(chunks as i32),
            scratch_view(3, true, [t * chunks, kp], 0),
            scratch_view(4, true, [t * chunks, kp], 0),
        ],
        grid: Some((blocks, 1, 1)),
        config: format!("{c1} chunks={chunks}"),
    }];
    // Where the current candidates start: each round reads them and writes its sets right after.
    let (mut from, mut to) = (0, split.candidates(t));
    for round in split.rounds() {
        let config::SelectRound { width, groups, mb } = round;
        let c = format!("topk_select KP={kp} MB={mb}");
        launches.push(PlannedLaunch {
            kernel: float_kernel!(x.dtype, |E| topk_select_kernel::<E>(kp, mb))
                .flatten()
                .ok_or_else(|| no_kernel(op, x.dtype, &c))?,
            args: vec![
                scratch_view(3, false, [t, width], from),
                scratch_view(4, false, [t, width], from),
                PlannedArg::I32(k as i32),
                PlannedArg::I32(groups as i32),
                scratch_view(3, true, [t * groups, kp], to),
                scratch_view(4, true, [t * groups, kp], to),
            ],
            grid: Some((grid_rows(op, t * groups)?, 1, 1)),
            config: format!("{c} groups={groups}"),
        });
        (from, to) = (to, to + t * groups * kp);
    }
    let c3 = format!("topk_sort KP={kp}");
    launches.push(PlannedLaunch {
        kernel: float_kernel!(x.dtype, |E| topk_sort_kernel::<E>(kp))
            .flatten()
            .ok_or_else(|| no_kernel(op, x.dtype, &c3))?,
        args: vec![
            scratch_view(3, false, [t, kp], from),
            scratch_view(4, false, [t, kp], from),
            PlannedArg::I32(k as i32),
            PlannedArg::whole(1, vals, true),
            PlannedArg::whole(2, idx, true),
        ],
        grid: Some((rows, 1, 1)),
        config: c3,
    });
    Ok(launches)
}

/// Fails unless scratch operand `o` is contiguous `dt` with at least `n` elements.
fn target_scratch(op: &'static str, o: &Operand, dt: ScalarType, n: i64) -> Result<(), OpError> {
    o.expect_dtype(op, &[dt])?;
    if o.rank() != 1 || o.strides != [1] || o.shape[0] < n {
        return Err(OpError::Shape {
            op,
            what: format!(
                "`{}` must be contiguous scratch of at least {n} elements",
                o.name
            ),
            left: format!("{:?}", o.shape),
            right: format!("[{n}]"),
        });
    }
    Ok(())
}

fn topk_chunks_kernel<E: cutile::core::Float>(kp: i64, bn: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::topk_chunks as k;
    macro_rules! by_bn {
        ($kp:literal) => {
            match bn {
                128 => Some(k::kernel::<E, $kp, 128>()),
                256 => Some(k::kernel::<E, $kp, 256>()),
                512 => Some(k::kernel::<E, $kp, 512>()),
                1024 => Some(k::kernel::<E, $kp, 1024>()),
                2048 => Some(k::kernel::<E, $kp, 2048>()),
                4096 => Some(k::kernel::<E, $kp, 4096>()),
                _ => None,
            }
        };
    }
    match kp {
        8 => by_bn!(8),
        16 => by_bn!(16),
        32 => by_bn!(32),
        64 => by_bn!(64),
        _ => None,
    }
}

fn topk_select_kernel<E: cutile::core::Float>(kp: i64, mb: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::topk_select as k;
    macro_rules! by_mb {
        ($kp:literal) => {
            match mb {
                8 => Some(k::kernel::<E, $kp, 8>()),
                16 => Some(k::kernel::<E, $kp, 16>()),
                32 => Some(k::kernel::<E, $kp, 32>()),
                64 => Some(k::kernel::<E, $kp, 64>()),
                128 => Some(k::kernel::<E, $kp, 128>()),
                256 => Some(k::kernel::<E, $kp, 256>()),
                512 => Some(k::kernel::<E, $kp, 512>()),
                1024 => Some(k::kernel::<E, $kp, 1024>()),
                2048 => Some(k::kernel::<E, $kp, 2048>()),
                4096 => Some(k::kernel::<E, $kp, 4096>()),
                _ => None,
            }
        };
    }
    match kp {
        8 => by_mb!(8),
        16 => by_mb!(16),
        32 => by_mb!(32),
        64 => by_mb!(64),
        _ => None,
    }
}

fn topk_sort_kernel<E: cutile::core::Float>(kp: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::topk_sort as k;
    match kp {
        8 => Some(k::kernel::<E, 8>()),
        16 => Some(k::kernel::<E, 16>()),
        32 => Some(k::kernel::<E, 32>()),
        64 => Some(k::kernel::<E, 64>()),
        _ => None,
    }
}

fn argmax_kernel<E: cutile::core::Float>(bn: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::argmax as k;
    match bn {
        128 => Some(k::kernel::<E, 128>()),
        256 => Some(k::kernel::<E, 256>()),
        512 => Some(k::kernel::<E, 512>()),
        1024 => Some(k::kernel::<E, 1024>()),
        2048 => Some(k::kernel::<E, 2048>()),
        4096 => Some(k::kernel::<E, 4096>()),
        8192 => Some(k::kernel::<E, 8192>()),
        _ => None,
    }
}

/// The chunk kernel of `form` at width `bn`: the default's widths (1024..=8192) for `F32`, the
/// candidates' (4096..=16384) for the native forms.
fn argmax_chunks_kernel<E: cutile::core::Float>(
    bn: i64,
    form: config::ChunkForm,
) -> Option<cutile::dsl::Kernel> {
    use config::ChunkForm::*;
    use kernels::{argmax_chunks as f, argmax_chunks_native as n, argmax_chunks_native8 as n8};
    match (form, bn) {
        (F32, 1024) => Some(f::kernel::<E, 1024>()),
        (F32, 2048) => Some(f::kernel::<E, 2048>()),
        (F32, 4096) => Some(f::kernel::<E, 4096>()),
        (F32, 8192) => Some(f::kernel::<E, 8192>()),
        (Native, 4096) => Some(n::kernel::<E, 4096>()),
        (Native, 8192) => Some(n::kernel::<E, 8192>()),
        (Native, 16384) => Some(n::kernel::<E, 16384>()),
        (Native8, 4096) => Some(n8::kernel::<E, 4096>()),
        (Native8, 8192) => Some(n8::kernel::<E, 8192>()),
        (Native8, 16384) => Some(n8::kernel::<E, 16384>()),
        _ => None,
    }
}

/// What [`CallSpec::shapes`] lists: argmax `[[T, V]]`; topk `[[T, V], [k]]`.
pub const SPEC_INPUTS: &str = "[[T, V]] (topk: [[T, V], [k]])";

/// The described operands of a registry call spec of `op` (see [`SPEC_INPUTS`]).
pub fn described_call(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<Vec<Operand>, OpError> {
    let name = if op == TOPK { TOPK } else { ARGMAX };
    let bad = || OpError::Unsupported {
        op: name,
        what: format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"),
    };
    let x = shapes.first().filter(|x| x.len() == 2).ok_or_else(bad)?;
    let d = Operand::described;
    if name == ARGMAX {
        return Ok(vec![
            d("x", 0, dt, x),
            d("out", 1, ScalarType::I64, &x[..1]),
        ]);
    }
    let k = shapes
        .get(1)
        .and_then(|k| k.first())
        .copied()
        .ok_or_else(bad)?;
    Ok(vec![
        d("x", 0, dt, x),
        d("values", 1, dt, &[x[0], k]),
        d("indices", 2, ScalarType::I64, &[x[0], k]),
    ])
}

/// The calls the catalog compiles and the runner checks and benchmarks: argmax over a Llama-3
/// vocabulary (bf16, 128256) at T = 1024 (the bandwidth bench) and decode T = 8, ragged f32; top-k 50
/// of bf16 decode logits and k = 5 of a ragged f16 row set.
pub fn representative_calls() -> Vec<CallSpec> {
    let c = |op: &str, dt: &str, s: &[&[i64]]| CallSpec::new(op, dt, s, false);
    vec![
        c(ARGMAX, "bf16", &[&[1024, 128256]]),
        c(ARGMAX, "bf16", &[&[8, 128256]]),
        c(ARGMAX, "f32", &[&[77, 1000]]),
        c(TOPK, "bf16", &[&[8, 128256], &[50]]),
        c(TOPK, "f16", &[&[33, 1000], &[5]]),
        // 74 chunks x 64 candidates > 4096: two selection rounds.
        c(TOPK, "f32", &[&[2, 300000], &[64]]),
    ]
}
