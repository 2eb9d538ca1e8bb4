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
//! argmax is one block per row (see `dsl`): decode batches of a few rows use few SMs. Top-k is two
//! or three launches: every `BN`-wide chunk of a row keeps its own top-k set (grid `T · chunks`, at
//! least the SM count where the row allows), one block per row of several chunks selects the row's
//! set among the candidates, and one block per row sorts it; its operands are
//! `[x, values, indices, cand_v, cand_i]`, the last two f32 / i32 scratch that is no user tensor
//! ([`topk`] takes it from the stream's scratch buffer; planning without a device appends described
//! ones: [`with_scratch`]). Rows with more than [`config::MB_MAX`] candidates take the one-launch form
//! (`k` passes over the row). NaN inputs give unspecified in-range indices.
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
    let operands = [Operand::of("x", x), Operand::of("out", &*out)];
    run(stream, ARGMAX, &operands)
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
    if let Some(split) = split_of(&operands, &target) {
        // One scratch buffer holds both candidate arrays: f32 values, then (256-byte aligned) i32
        // columns.
        let n = split.scratch(operands[0].shape[0]);
        let half = crate::op::ceil_div(n, 64) * 64;
        let s = crate::op::scratch::scratch(stream, "cand_v", ScalarType::F32, 2 * half)?;
        let cand_v = Operand {
            shape: vec![n],
            ..s.clone()
        };
        let cand_i = Operand {
            name: "cand_i",
            dtype: ScalarType::I32,
            shape: vec![n],
            ptr: s.ptr + (half as u64) * 4,
            ..s
        };
        operands.push(cand_v);
        operands.push(cand_i);
    }
    run_on(stream, TOPK, &operands, &target)
}

/// The two-launch split of a well-formed top-k call `[x, values, indices, ..]` on `target` (`None`
/// for malformed calls, which [`plan`] rejects, empty ones and very long rows).
fn split_of(operands: &[Operand], target: &Target) -> Option<config::TopkSplit> {
    let (x, vals) = (operands.first()?, operands.get(1)?);
    if x.rank() != 2 || vals.rank() != 2 {
        return None;
    }
    let (t, v, k) = (x.shape[0], x.shape[1], vals.shape[1]);
    if t <= 0 || v <= 0 || k <= 0 || k > config::MAX_K || k > v || v > i64::from(i32::MAX) {
        return None;
    }
    config::topk_split(t, v, k, target.sm_count)
}

/// `operands` of a call of `op` with the described candidate scratch (`cand_v` f32 and `cand_i` i32,
/// operands 3 and 4) appended when it is a top-k call that takes the two-launch form: what planning
/// without a device (AOT bundles, the registry, coverage tests) passes to [`plan`]. Other calls, and
/// operands that already hold the scratch, are returned as they are.
pub fn with_scratch(op: &str, operands: &[Operand], target: &Target) -> Vec<Operand> {
    let mut out = operands.to_vec();
    if op != TOPK || operands.len() != 3 {
        return out;
    }
    if let Some(split) = split_of(operands, target) {
        let n = split.scratch(operands[0].shape[0]);
        out.push(Operand::described("cand_v", 3, ScalarType::F32, &[n]));
        out.push(Operand::described("cand_i", 4, ScalarType::I32, &[n]));
    }
    out
}

fn run<'a>(stream: &'a Stream, op: &str, operands: &[Operand]) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    run_on(stream, op, operands, &target)
}

fn run_on<'a>(
    stream: &'a Stream,
    op: &str,
    operands: &[Operand],
    target: &Target,
) -> Result<Pending<'a>, OpError> {
    let launches = plan(op, operands, target)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively), and
    // the stream's scratch buffer (used in stream order); the launches address only the shapes `plan`
    // checked.
    unsafe { execute(stream, operands, &launches) }
}

fn shape_err(op: &'static str, what: &str, left: &[i64], right: &[i64]) -> OpError {
    OpError::Shape {
        op,
        what: what.into(),
        left: format!("{left:?}"),
        right: format!("{right:?}"),
    }
}

/// The launches of a call of `op` ([`ARGMAX`] `[x, out]`, or [`TOPK`] `[x, values, indices]` plus,
/// for the two-launch form, the candidate scratch `[cand_v, cand_i]`: see [`with_scratch`]); none
/// when there are no rows.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
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
    let scratch_ok = op == TOPK && operands.len() == 5;
    if operands.len() != n && !scratch_ok {
        return Err(OpError::Unsupported {
            op,
            what: format!("takes {n} tensors, got {}", operands.len()),
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
    let bn = config::chunk(v);
    let (kernel, args, config) = if op == ARGMAX {
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
        let k = float_kernel!(x.dtype, |E| argmax_kernel::<E>(bn)).flatten();
        (
            k,
            vec![
                PlannedArg::whole(0, x, false),
                PlannedArg::whole(1, out, true),
            ],
            format!("argmax BN={bn}"),
        )
    } else {
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
        if let Some(split) = config::topk_split(t, v, k, target.sm_count) {
            return plan_topk_split(operands, split, k);
        }
        let kp = config::slots(k);
        let kern = float_kernel!(x.dtype, |E| topk_kernel::<E>(kp, bn)).flatten();
        (
            kern,
            vec![
                PlannedArg::whole(0, x, false),
                PlannedArg::I32(k as i32),
                PlannedArg::whole(1, vals, true),
                PlannedArg::whole(2, idx, true),
            ],
            format!("topk KP={kp} BN={bn}"),
        )
    };
    if t == 0 {
        return Ok(Vec::new());
    }
    crate::op::grid_rows(op, t)?;
    let kernel = kernel.ok_or_else(|| OpError::Unsupported {
        op,
        what: format!("no {} kernel for `{config}`", x.dtype),
    })?;
    Ok(vec![PlannedLaunch {
        kernel,
        args,
        grid: None,
        config,
    }])
}

/// The launches of a validated top-k call `[x, values, indices, cand_v, cand_i]` with `split`:
/// `topk_chunks` into the candidates, `topk_select` into the selection region (rows of several
/// chunks; one chunk's candidates already are the row's set), `topk_sort` into the outputs.
fn plan_topk_split(
    operands: &[Operand],
    split: config::TopkSplit,
    k: i64,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = TOPK;
    let (x, vals, idx) = (&operands[0], &operands[1], &operands[2]);
    let t = x.shape[0];
    let n = split.scratch(t);
    let Some([cv, ci]) = operands.get(3..5) else {
        return Err(OpError::Unsupported {
            op,
            what: "the chunked top-k takes its candidate scratch (cand_v, cand_i): plan \
                   `with_scratch`'s operands"
                .into(),
        });
    };
    for (o, dt) in [(cv, ScalarType::F32), (ci, ScalarType::I32)] {
        target_scratch(op, o, dt, n)?;
    }
    let config::TopkSplit { bn, chunks, kp, mb } = split;
    let blocks = grid_rows(op, t * chunks)?;
    let rows = grid_rows(op, t)?;
    let missing = |what: &str| OpError::Unsupported {
        op,
        what: format!("no {} kernel for `{what}`", x.dtype),
    };
    // Views of the scratch arrays: `[r, w]` row-major from element `at`.
    let view = |operand: usize, output: bool, [r, w]: [i64; 2], at: i64| PlannedArg::Tensor {
        operand,
        output,
        shape: vec![r, w],
        strides: vec![w, 1],
        offset: at,
    };
    let c1 = format!("topk_chunks KP={kp} BN={bn}");
    let mut launches = vec![PlannedLaunch {
        kernel: float_kernel!(x.dtype, |E| topk_chunks_kernel::<E>(kp, bn))
            .flatten()
            .ok_or_else(|| missing(&c1))?,
        args: vec![
            PlannedArg::whole(0, x, false),
            PlannedArg::I32(k as i32),
            PlannedArg::I32(chunks as i32),
            view(3, true, [t * chunks, kp], 0),
            view(4, true, [t * chunks, kp], 0),
        ],
        grid: Some((blocks, 1, 1)),
        config: format!("{c1} chunks={chunks}"),
    }];
    // Where the row's `k` members are: the candidates themselves for one chunk per row.
    let mut members = 0;
    if chunks > 1 {
        members = split.candidates(t);
        let c2 = format!("topk_select KP={kp} MB={mb}");
        launches.push(PlannedLaunch {
            kernel: float_kernel!(x.dtype, |E| topk_select_kernel::<E>(kp, mb))
                .flatten()
                .ok_or_else(|| missing(&c2))?,
            args: vec![
                view(3, false, [t, chunks * kp], 0),
                view(4, false, [t, chunks * kp], 0),
                PlannedArg::I32(k as i32),
                view(3, true, [t, kp], members),
                view(4, true, [t, kp], members),
            ],
            grid: Some((rows, 1, 1)),
            config: c2,
        });
    }
    let c3 = format!("topk_sort KP={kp}");
    launches.push(PlannedLaunch {
        kernel: float_kernel!(x.dtype, |E| topk_sort_kernel::<E>(kp))
            .flatten()
            .ok_or_else(|| missing(&c3))?,
        args: vec![
            view(3, false, [t, kp], members),
            view(4, false, [t, kp], members),
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
        _ => None,
    }
}

fn topk_kernel<E: cutile::core::Float>(kp: i64, bn: i64) -> Option<cutile::dsl::Kernel> {
    use kernels::topk as k;
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
        // 74 chunks x 64 candidates > 4096: the one-launch k-pass kernel.
        c(TOPK, "f32", &[&[2, 300000], &[64]]),
    ]
}
