//! fp8 GEMM with scales, as `torch._scaled_mm`: `c = scale(a @ b)` for e4m3 or e5m2 operands, f32
//! accumulation, a bf16 (or f32) output, with one scale per tensor, per row of `a` and column of `b`, or
//! DeepSeek-style block scales (`a`: one per row and 128 K elements, `b`: one per 128x128 block).
//!
//! The runtime has no fp8 element type: fp8 tensors are byte tensors (`u8` or `i8`) holding codes, and
//! the [`Fp8Format`] of the call says how to read them (the kernel's parameters are typed `f8e4m3fn` or
//! `f8e5m2`, so the tensor cores read them directly). Operands: `[a, b, sa, sb, c]`, and a sixth,
//! `sa_rows` (f32 scratch, [`SA_ROWS`]), when block scales come with `sa` not row-major (e.g. M-major,
//! as `torch._scaled_mm` takes them): the plan then first copies `sa` into a row-major `[m, k/128]`
//! region of it (the GEMM family's tile copy) and the product reads that copy, since the product runs
//! 1.06–1.28× slower reading M-major scales (session 33, `docs/gemm.md`). [`gemm_fp8`] takes it from
//! the stream's scratch ([`crate::op::scratch`]); planning without a device appends a described one
//! ([`with_scratch`]). Without it the product reads `sa` as it is (correct, slower).
//!
//! - [`gemm_fp8`] / [`gemm_fp8_with`]: the host API;
//! - [`plan_fp8`]: the launches of a call, without a device (registry, catalog, runner);
//! - kernels in `dsl_fp8`, the CPU reference and quantization helpers in [`super::fp8_reference`].

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType;

use super::dsl_fp8::kernels;
use crate::op::tuning::{self, Candidate};
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div};

/// Op name: one scale per tensor.
pub const OP_TENSOR: &str = "gemm_fp8_tensor";
/// Op name: one scale per row of `a` and per column of `b`.
pub const OP_ROW: &str = "gemm_fp8_row";
/// Op name: block scales (`a`: 1x128, `b`: 128x128).
pub const OP_BLOCK: &str = "gemm_fp8_block";
/// The ops of this module.
pub const OPS: &[&str] = &[OP_TENSOR, OP_ROW, OP_BLOCK];

/// Block scales: K steps per scale load (the kernels load `[BM, SCALE_GROUP]` of `sa` and
/// `[SCALE_GROUP, 1]` of `sb` at a time, not one column per step).
pub const SCALE_GROUP: i32 = 8;
/// The scale block: `a` has one scale per row and `BLOCK` K elements, `b` one per `BLOCK x BLOCK`.
pub const BLOCK: i64 = 128;
/// Output element types.
pub const OUT_DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F32];
/// Operand index of `sa_rows`, the f32 scratch a block-scale call whose `sa` is not row-major copies
/// `sa` into (row-major `[m, k/128]` from its start; [`sa_rows_len`] elements).
pub const SA_ROWS: usize = 5;
/// Tile of the `sa` relayout copy (`gemm`'s `copy_tiles`, f32): 8 KiB per block, its width a divisor
/// of the common `k/128` (16, 32, 56 … are multiples of 8; a narrower `sa` is a clipped edge tile).
const SA_COPY_BM: i32 = 64;
const SA_COPY_BN: i32 = 32;

/// How the bytes of an fp8 tensor encode values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Fp8Format {
    /// OCP E4M3FN: 4 exponent, 3 mantissa bits, finite only (max 448), torch's `float8_e4m3fn`.
    #[default]
    E4M3,
    /// OCP E5M2: 5 exponent, 2 mantissa bits (max 57344), torch's `float8_e5m2`.
    E5M2,
}

impl Fp8Format {
    /// The Tile IR element type.
    pub fn scalar(self) -> ScalarType {
        match self {
            Fp8Format::E4M3 => ScalarType::F8E4M3FN,
            Fp8Format::E5M2 => ScalarType::F8E5M2,
        }
    }

    /// The format of a Tile IR element type, if it is an fp8 one.
    pub fn of(dtype: ScalarType) -> Option<Fp8Format> {
        match dtype {
            ScalarType::F8E4M3FN => Some(Fp8Format::E4M3),
            ScalarType::F8E5M2 => Some(Fp8Format::E5M2),
            _ => None,
        }
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f32 {
        match self {
            Fp8Format::E4M3 => 448.0,
            Fp8Format::E5M2 => 57344.0,
        }
    }
}

/// Which scales a call applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaleMode {
    Tensor,
    Row,
    Block,
}

impl ScaleMode {
    /// The op name of this mode.
    pub fn op(self) -> &'static str {
        match self {
            ScaleMode::Tensor => OP_TENSOR,
            ScaleMode::Row => OP_ROW,
            ScaleMode::Block => OP_BLOCK,
        }
    }

    /// The mode of an op name.
    pub fn of_op(op: &str) -> Option<ScaleMode> {
        [ScaleMode::Tensor, ScaleMode::Row, ScaleMode::Block]
            .into_iter()
            .find(|m| m.op() == op)
    }

    /// The scale shapes of an `m x k` by `k x n` product: `(sa, sb)` as the planner describes them.
    pub fn scale_shapes(self, m: i64, n: i64, k: i64) -> ([i64; 2], [i64; 2]) {
        match self {
            ScaleMode::Tensor => ([1, 1], [1, 1]),
            ScaleMode::Row => ([m, 1], [1, n]),
            ScaleMode::Block => (
                [m, ceil_div(k, BLOCK)],
                [ceil_div(k, BLOCK), ceil_div(n, BLOCK)],
            ),
        }
    }
}

/// How a call reads and multiplies its operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Fp8Options {
    /// The format of both operands' codes.
    pub format: Fp8Format,
    /// Hopper's fast fp8 accumulation (`torch._scaled_mm(use_fast_accum=True)`): faster, and the tensor
    /// cores' running sum keeps fewer low bits over long K. Off by default, as in torch.
    pub fast_accum: bool,
}

/// What an fp8 call spec lists (the registry's and the runner's `shapes`): `[a, b]`, `[a, b, [f]]` or
/// `[a, b, [f, l]]`, where `f = 1` asks for fast accumulation and `l = 1` passes block scales' `sa`
/// M-major (strides `[1, m]`, the layout `torch._scaled_mm` takes; the plan then copies it row-major
/// first). `0`, or absent, is exact accumulation and `sa` row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8Spec<'s> {
    pub a: &'s [i64],
    pub b: &'s [i64],
    pub fast: bool,
    pub sa_m_major: bool,
}

/// The [`Fp8Spec`] of a call spec's shapes; `None` if malformed.
pub fn spec_shapes(shapes: &[Vec<i64>]) -> Option<Fp8Spec<'_>> {
    let bit = |v: i64| match v {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    };
    let (a, b, flags): (&[i64], &[i64], &[i64]) = match shapes {
        [a, b] => (a, b, &[]),
        [a, b, f] if (1..=2).contains(&f.len()) => (a, b, f),
        _ => return None,
    };
    Some(Fp8Spec {
        a,
        b,
        fast: match flags.first() {
            Some(&f) => bit(f)?,
            None => false,
        },
        sa_m_major: match flags.get(1) {
            Some(&l) => bit(l)?,
            None => false,
        },
    })
}

/// The f32 scale tensors of a call (device tensors, as `torch._scaled_mm`'s `scale_a`/`scale_b`).
#[derive(Debug, Clone, Copy)]
pub enum Fp8Scales<'s, S: TensorArg> {
    /// One scale each: `a` and `b` hold one element (shape `[]`, `[1]` or `[1, 1]`).
    Tensor { a: &'s S, b: &'s S },
    /// `a`: `[m]` or `[m, 1]` (one per row of `a`); `b`: `[n]` or `[1, n]` (one per column of `b`).
    Row { a: &'s S, b: &'s S },
    /// `a`: `[m, k/128]` (one per row and 128 K elements); `b`: `[k/128, ceil(n/128)]` (one per 128x128
    /// block of `b`). `k` must be a multiple of 128. Any strides; the product reads `a` row-major. An
    /// `a` of other strides (M-major, `[1, m]`, as `torch._scaled_mm` takes it) is first copied
    /// row-major into the stream's scratch, one more launch (`m · k/128` f32): read in place it ran
    /// the product 1.06–1.28× slower on an H100 (session 33, `docs/gemm.md`; tileiras lays the
    /// `[BM, 8]` scale tile out along M, and each step's column pick then crosses threads).
    Block { a: &'s S, b: &'s S },
}

impl<S: TensorArg> Fp8Scales<'_, S> {
    fn mode(&self) -> ScaleMode {
        match self {
            Fp8Scales::Tensor { .. } => ScaleMode::Tensor,
            Fp8Scales::Row { .. } => ScaleMode::Row,
            Fp8Scales::Block { .. } => ScaleMode::Block,
        }
    }

    fn tensors(&self) -> (&S, &S) {
        match self {
            Fp8Scales::Tensor { a, b } | Fp8Scales::Row { a, b } | Fp8Scales::Block { a, b } => {
                (a, b)
            }
        }
    }
}

/// `c = scale(a @ b)` with e4m3 operands: `a: [m, k]`, `b: [k, n]` (byte tensors or views holding e4m3
/// codes; fastest with `a` row-major and `b` column-major, i.e. `w.t()` of an `[n, k]` weight), f32
/// `scales`, `c: [m, n]` bf16 or f32. `k` must be a multiple of 16 (of 128 with block scales); an empty
/// `c` is a no-op. Needs sm_89 or newer (fp8 tensor cores): sm_80 is refused.
pub fn gemm_fp8<'a, S: TensorArg>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    scales: &Fp8Scales<'a, S>,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    gemm_fp8_with(stream, a, b, &Fp8Options::default(), scales, c)
}

/// [`gemm_fp8`] with both operands in `options.format`, and fast accumulation if asked.
pub fn gemm_fp8_with<'a, S: TensorArg>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    options: &Fp8Options,
    scales: &Fp8Scales<'a, S>,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let format = options.format;
    let mode = scales.mode();
    let op = mode.op();
    let (sa, sb) = scales.tensors();
    let operands = vec![
        as_fp8(op, Operand::of("a", a), format)?,
        as_fp8(op, Operand::of("b", b), format)?,
        Operand::of("sa", sa),
        Operand::of("sb", sb),
        Operand::of("c", &*c),
    ];
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(&operands, &target, mode, options.fast_accum)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let call = if call.sa_strided {
        let mut operands = operands;
        operands.push(crate::op::scratch::scratch(
            stream,
            "sa_rows",
            ScalarType::F32,
            sa_rows_len(call.m, call.k),
        )?);
        Call::new(&operands, &target, mode, options.fast_accum)?.unwrap_or(call)
    } else {
        call
    };
    let candidates = candidates(&target, &call);
    let class = class(&call);
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively), and the
    // stream's scratch buffer (`sa_rows`), which lives until process exit and is used by work queued
    // on `stream` only, in stream order; plans address its first `sa_rows_len` elements.
    unsafe {
        tuning::run_tuned(stream, &call.ops, 4, op, class, &candidates, false, |cfg| {
            launches(cfg, &call, &target)
        })
    }
}

/// A byte tensor read as `format` codes (`u8`/`i8` → the fp8 type); a described operand already of
/// `format`'s type passes as it is.
fn as_fp8(op: &'static str, mut o: Operand, format: Fp8Format) -> Result<Operand, OpError> {
    if o.dtype == ScalarType::I8 || o.dtype == format.scalar() {
        o.dtype = format.scalar();
        return Ok(o);
    }
    Err(OpError::DType {
        op,
        arg: o.name,
        dtype: o.dtype,
        constraint: format!(
            "fp8 operands are byte tensors (u8 or i8) holding {} codes",
            format.scalar()
        ),
    })
}

/// The launches of a call (`operands` = `[a, b, sa, sb, c]`, `a` and `b` typed fp8, e.g. described with
/// `ScalarType::F8E4M3FN`, and `sa_rows` when [`with_scratch`] appends one) with `mode`'s scales and
/// fast accumulation if `fast_accum`: the default configuration, or every candidate's (each candidate
/// with its own `sa` copy first when `sa_rows` is given and `sa` is not row-major).
pub fn plan_fp8(
    operands: &[Operand],
    target: &Target,
    mode: ScaleMode,
    fast_accum: bool,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(operands, target, mode, fast_accum)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        candidates(target, &call)
    } else {
        vec![choose(target, &call)]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(launches(c, &call, target)?);
    }
    Ok(out)
}

/// The described operands `[a, b, sa, sb, c]` of an `[m, k]` by `[k, n]` call: `a` row-major, `b`
/// column-major (the `w.t()` view of an `[n, k]` weight, the fast layout), the scales of `mode`, `c`
/// of `out`.
pub fn described_operands(
    format: Fp8Format,
    mode: ScaleMode,
    out: ScalarType,
    m: i64,
    n: i64,
    k: i64,
) -> Vec<Operand> {
    let (sa, sb) = mode.scale_shapes(m, n, k);
    let mut b = Operand::described("b", 1, format.scalar(), &[k, n]);
    b.strides = vec![1, k.max(1)];
    vec![
        Operand::described("a", 0, format.scalar(), &[m, k]),
        b,
        Operand::described("sa", 2, ScalarType::F32, &sa),
        Operand::described("sb", 3, ScalarType::F32, &sb),
        Operand::described("c", 4, out, &[m, n]),
    ]
}

/// Elements of the `sa_rows` scratch of an `m x k` block-scale call: `sa` row-major, `m · k/128`.
pub fn sa_rows_len(m: i64, k: i64) -> i64 {
    m.max(0) * ceil_div(k.max(0), BLOCK)
}

/// `operands` (`[a, b, sa, sb, c]`) with a described `sa_rows` scratch ([`SA_ROWS`]) appended when
/// `mode` is block scales and `sa` is not row-major: what planning without a device (AOT bundles, the
/// registry, the runner) passes to [`plan_fp8`]. Operands that already hold one, and calls that need
/// none, are returned as they are; bad operands get the errors [`plan_fp8`] gives them.
pub fn with_scratch(
    operands: &[Operand],
    target: &Target,
    mode: ScaleMode,
) -> Result<Vec<Operand>, OpError> {
    let mut out = operands.to_vec();
    if operands.len() != 5 {
        return Ok(out);
    }
    if let Some(call) = Call::new(operands, target, mode, false)?
        && call.sa_strided
    {
        out.push(Operand::described(
            "sa_rows",
            SA_ROWS,
            ScalarType::F32,
            &[sa_rows_len(call.m, call.k)],
        ));
    }
    Ok(out)
}

/// The described operands of a call spec ([`spec_shapes`]) in `format` with `mode`'s scales and a
/// bf16 `c`: `b` of the spec's shape, column-major (a `b` that disagrees with `a` is the planner's
/// error to report), `sa` M-major when the spec asks, and the `sa_rows` scratch when that needs one
/// ([`with_scratch`]). `sa` M-major is refused for other than block scales.
pub fn spec_operands(
    format: Fp8Format,
    mode: ScaleMode,
    spec: &Fp8Spec<'_>,
    target: &Target,
) -> Result<Vec<Operand>, OpError> {
    let (m, k, n) = (
        spec.a.first().copied().unwrap_or(0),
        spec.a.get(1).copied().unwrap_or(0),
        spec.b.get(1).copied().unwrap_or(0),
    );
    let mut operands = described_operands(format, mode, ScalarType::BF16, m, n, k);
    operands[1].strides = match spec.b {
        [rows, _] => vec![1, (*rows).max(1)],
        b => crate::op::contiguous_strides(b),
    };
    operands[1].shape = spec.b.to_vec();
    if spec.sa_m_major {
        if mode != ScaleMode::Block {
            return Err(OpError::Unsupported {
                op: mode.op(),
                what: "an M-major `sa` (a call spec's `[f, 1]`) applies to block scales only"
                    .into(),
            });
        }
        operands[2].strides = vec![1, m.max(1)];
    }
    with_scratch(&operands, target, mode)
}

/// The calls the catalog compiles and the runner checks and benchmarks: one ragged call per scale mode
/// (bf16 output, e4m3), the benchmark shapes (4096³ and 8192³, which share one 128-row kernel), and
/// the same with fast accumulation at 4096³ (and 8192³, sharing its cubin). Block scales also with
/// `sa` M-major (`[0, 1]`: `torch._scaled_mm`'s layout, copied row-major before the product), ragged
/// and at 4096³, beside the row-major calls of the same shape.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    let mut v = Vec::new();
    for op in OPS {
        v.push(c(op, "f8e4m3", &[&[1000, 512], &[512, 1000]], false));
        if *op == OP_BLOCK {
            v.push(c(
                op,
                "f8e4m3",
                &[&[1000, 512], &[512, 1000], &[0, 1]],
                false,
            ));
        }
        for s in [4096, 8192] {
            v.push(c(op, "f8e4m3", &[&[s, s], &[s, s]], false));
            if *op == OP_BLOCK && s == 4096 {
                v.push(c(op, "f8e4m3", &[&[s, s], &[s, s], &[0, 1]], false));
            }
            v.push(c(op, "f8e4m3", &[&[s, s], &[s, s], &[1]], false));
        }
    }
    // e5m2 operands at a bench size (cuBLAS refuses e5m2 x e5m2, so `_scaled_mm` has no twin).
    v.push(c(
        OP_TENSOR,
        "f8e5m2",
        &[&[4096, 4096], &[4096, 4096]],
        false,
    ));
    v
}

/// A GEMM fp8 configuration: tile, schedule (persistent: grid = SM count × occupancy) and worker
/// warps per block (the `num_worker_warps_per_cta` hint: 8 splits a 128-row accumulator over two
/// warpgroups, 64 registers each instead of 128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fp8Config {
    pub persistent: bool,
    pub bm: i64,
    pub bn: i64,
    pub bk: i64,
    pub workers: i32,
    /// tileiras `occupancy` hint (blocks per SM; 0: none). A persistent grid is this many blocks per SM.
    pub occupancy: i64,
    /// How block scales reach each K step (other modes: [`BlockScales::PerStep`]).
    pub scales: BlockScales,
    /// CTAs per cluster (`num_cta_in_cga`; 1: none), as [`crate::gemm::GemmConfig::cga`]: each tile
    /// split over that many CTAs that share one operand's loads; a block of the grid is a cluster.
    pub cga: i64,
    /// tileiras's `latency` hint on the operand loads (0: none; else [`OPERAND_LATENCY`], per-tensor
    /// and per-row scales only). tileiras sizes the operand pipeline by it. Name suffix ` l{n}`.
    pub latency: i32,
}

/// The operand-load `latency` hint of the deeper-pipeline candidates.
pub const OPERAND_LATENCY: i32 = 10;

/// How the block-scale kernels bring each 128-deep K step its scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockScales {
    /// `gemm_fp8_block`: the step's `[BM, 1]` of `sa` and one `sb` value loaded in the step (tileiras
    /// waits on that load before the step's scaled add: a memory latency per step).
    PerStep,
    /// `gemm_fp8_block_grouped`, the scales of [`SCALE_GROUP`] steps per load, each step's column
    /// picked by a masked row sum (a shared-memory exchange and three barriers per step). Name
    /// suffix ` g8 sum`.
    GroupSum,
    /// The same with the column picked by a run-time index (`Tile::extract_at`: tileiras stores the
    /// thread's part of the tile to local memory and loads the column back, no barrier). Name suffix
    /// ` g8 at`.
    GroupIndex,
}

impl Candidate for Fp8Config {
    fn name(&self) -> String {
        let occupancy = if self.occupancy > 0 {
            format!(" o{}", self.occupancy)
        } else {
            String::new()
        };
        let cga = if self.cga > 1 {
            format!(" c{}", self.cga)
        } else {
            String::new()
        };
        let latency = if self.latency > 0 {
            format!(" l{}", self.latency)
        } else {
            String::new()
        };
        format!(
            "gemm_fp8{} {}x{}x{} w{}{occupancy}{cga}{latency}{}",
            if self.persistent { " persistent" } else { "" },
            self.bm,
            self.bn,
            self.bk,
            self.workers,
            match self.scales {
                BlockScales::PerStep => String::new(),
                BlockScales::GroupSum => format!(" g{SCALE_GROUP} sum"),
                BlockScales::GroupIndex => format!(" g{SCALE_GROUP} at"),
            }
        )
    }
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    mode: ScaleMode,
    /// Fast accumulation.
    fast: bool,
    format: Fp8Format,
    out: ScalarType,
    m: i64,
    n: i64,
    k: i64,
    /// `[a, b, sa, sb, c]` (a and b typed fp8), and `sa_rows` when given.
    ops: Vec<Operand>,
    /// The `[.., ..]` views the kernel reads `sa` and `sb` through.
    scale_views: [(Vec<i64>, Vec<i64>); 2],
    /// Block scales whose `sa` is not row-major: the product reads `sa` from a row-major copy.
    sa_strided: bool,
    /// `sa_strided` and the `sa_rows` scratch is given: the plan copies `sa` into it first.
    sa_rows: bool,
}

fn shape_err(op: &'static str, what: &str, left: &[i64], right: String) -> OpError {
    OpError::Shape {
        op,
        what: what.into(),
        left: format!("{left:?}"),
        right,
    }
}

impl Call {
    fn new(
        operands: &[Operand],
        target: &Target,
        mode: ScaleMode,
        fast: bool,
    ) -> Result<Option<Call>, OpError> {
        let op = mode.op();
        let (a, b, sa, sb, c, rows) = match operands {
            [a, b, sa, sb, c] => (a, b, sa, sb, c, None),
            [a, b, sa, sb, c, r] => (a, b, sa, sb, c, Some(r)),
            _ => {
                return Err(OpError::Unsupported {
                    op,
                    what: format!(
                        "takes 5 tensors (a, b, sa, sb, c) and an optional scratch (sa_rows), got {}",
                        operands.len()
                    ),
                });
            }
        };
        let Some(format) = Fp8Format::of(a.dtype) else {
            return Err(OpError::DType {
                op,
                arg: "a",
                dtype: a.dtype,
                constraint: "the op takes f8e4m3fn or f8e5m2 operands (byte tensors read as fp8)"
                    .into(),
            });
        };
        b.expect_same_dtype(op, a)?;
        c.expect_dtype(op, OUT_DTYPES)?;
        for s in [sa, sb] {
            s.expect_dtype(op, &[ScalarType::F32])?;
            target.expect_device(op, s)?;
        }
        let (m, k, n) = super::product_extents(op, a, b, c, target)?;
        if target.arch == GpuArch::Sm80 {
            return Err(OpError::Unsupported {
                op,
                what: "sm_80 has no fp8 tensor cores (fp8 GEMM needs sm_89 or newer); convert the \
                       operands to bf16 and call `gemm::gemm`"
                    .into(),
            });
        }
        let need = if mode == ScaleMode::Block { BLOCK } else { 16 };
        if k % need != 0 {
            return Err(OpError::Unsupported {
                op,
                what: format!(
                    "k = {k} must be a multiple of {need}{}",
                    if mode == ScaleMode::Block {
                        " (one `a` scale per 128 K elements)"
                    } else {
                        " (16-byte rows of fp8 codes)"
                    }
                ),
            });
        }
        for o in [a, b] {
            if !o.is_16b_aligned() {
                return Err(OpError::Layout {
                    op,
                    arg: o.name,
                    shape: o.shape.clone(),
                    strides: o.strides.clone(),
                    constraint: "fp8 operands need a unit-stride axis, other strides a multiple \
                                 of 16 bytes and a 16-byte aligned start (pass a contiguous copy)"
                        .into(),
                });
            }
        }
        let scale_views = match mode {
            ScaleMode::Tensor => {
                let one = |s: &Operand| -> Result<(Vec<i64>, Vec<i64>), OpError> {
                    if s.numel() != 1 || s.rank() > 2 {
                        return Err(shape_err(
                            op,
                            &format!("`{}` must hold one scale ([], [1] or [1, 1])", s.name),
                            &s.shape,
                            "[1]".into(),
                        ));
                    }
                    Ok((vec![1, 1], vec![1, 1]))
                };
                [one(sa)?, one(sb)?]
            }
            ScaleMode::Row => {
                let va = vector_view(op, sa, m, true)?;
                let vb = vector_view(op, sb, n, false)?;
                [va, vb]
            }
            ScaleMode::Block => {
                let (want_a, want_b) = mode.scale_shapes(m, n, k);
                for (s, want) in [(sa, want_a), (sb, want_b)] {
                    if s.shape != want {
                        return Err(shape_err(
                            op,
                            &format!(
                                "`{}` must be {} for block scales",
                                s.name,
                                if s.name == "sa" {
                                    "`[m, k/128]`"
                                } else {
                                    "`[k/128, ceil(n/128)]`"
                                }
                            ),
                            &s.shape,
                            format!("{want:?}"),
                        ));
                    }
                }
                [
                    (sa.shape.clone(), sa.strides.clone()),
                    (sb.shape.clone(), sb.strides.clone()),
                ]
            }
        };
        let sa_strided = mode == ScaleMode::Block && !sa_row_major(sa);
        if let Some(r) = rows {
            r.expect_dtype(op, &[ScalarType::F32])?;
            r.expect_rank(op, 1)?;
            target.expect_device(op, r)?;
            let need = sa_rows_len(m, k);
            if r.shape[0] < need {
                return Err(OpError::Shape {
                    op,
                    what: "the `sa_rows` scratch must hold `fp8::sa_rows_len(m, k)` elements \
                           (`fp8::with_scratch` appends one when planning)"
                        .into(),
                    left: r.shape[0].to_string(),
                    right: need.to_string(),
                });
            }
        }
        if m == 0 || n == 0 {
            return Ok(None);
        }
        let sa_rows = sa_strided && rows.is_some();
        let mut scale_views = scale_views;
        if sa_rows {
            // The product reads the row-major copy (`SA_ROWS`) instead.
            let kb = ceil_div(k, BLOCK);
            scale_views[0] = (vec![m, kb], vec![kb, 1]);
        }
        Ok(Some(Call {
            mode,
            fast,
            format,
            out: c.dtype,
            m,
            n,
            k,
            ops: operands.to_vec(),
            scale_views,
            sa_strided,
            sa_rows,
        }))
    }
}

/// Whether a `[m, k/128]` block-scale `sa` is row-major as the product reads it fastest: its K axis has
/// stride 1, or has one element (a single column is the same memory whatever its stride says).
fn sa_row_major(sa: &Operand) -> bool {
    match (sa.shape.as_slice(), sa.strides.as_slice()) {
        ([_, kb], [_, inner]) => *kb <= 1 || *inner == 1,
        _ => true,
    }
}

/// A per-row (`rows = true`: `[len, 1]`) or per-column (`[1, len]`) view of a scale vector given as
/// `[len]`, `[len, 1]` or `[1, len]` as fits.
fn vector_view(
    op: &'static str,
    s: &Operand,
    len: i64,
    rows: bool,
) -> Result<(Vec<i64>, Vec<i64>), OpError> {
    let stride = match (s.shape.as_slice(), s.strides.as_slice()) {
        ([l], [st]) if *l == len => Some(*st),
        ([l, 1], [st, _]) if rows && *l == len => Some(*st),
        ([1, l], [_, st]) if !rows && *l == len => Some(*st),
        _ => None,
    };
    let Some(st) = stride else {
        return Err(shape_err(
            op,
            &format!(
                "`{}` must hold one scale per {} ({})",
                s.name,
                if rows { "row of `a`" } else { "column of `b`" },
                if rows {
                    "[m] or [m, 1]"
                } else {
                    "[n] or [1, n]"
                }
            ),
            &s.shape,
            format!("[{len}]"),
        ));
    };
    Ok(if rows {
        (vec![len, 1], vec![st, 1])
    } else {
        (vec![1, len], vec![(len * st).max(1), st])
    })
}

/// The shape class of a call (tuning cache key).
fn class(call: &Call) -> String {
    format!(
        "{:?}{} {} {}",
        call.mode,
        if call.fast { " fast" } else { "" },
        call.format.scalar(),
        super::config::class(call.out, call.m, call.n, call.k)
    )
}

/// The default configuration (H200 tuning run of 2026-12-02, `docs/gemm.md`): fewer 128x128 output
/// tiles than SMs → 64-row tiles, one block each; otherwise persistent, 128x128 with exact
/// accumulation and 128x256 with fast accumulation (x1.28–1.31 over 128x128 at 4096³ and 8192³; with
/// exact accumulation 128x256 spills and runs 2x slower). K steps are 128 deep (128 bytes of fp8, as
/// 64 of bf16).
///
/// Block scales (one `b` scale per 128 columns), from as many 128x128 tiles as SMs: persistent 64x128
/// tiles on one warpgroup, two blocks per SM, the scales loaded 8 steps at a time and picked by the
/// masked row sum ([`BlockScales::GroupSum`]; 128 registers, no stack frame, 110 KB). The H100 tuner
/// of session 32 (`docs/gemm.md`, "Block scales"): 166.0 µs at 4096³ against 338.4 for the per-step
/// 128x128 kernel (283.4 for the same with grouped loads, 451.3 with the run-time-index pick), 1512
/// against 2601 at 8192³, 1.59–1.98x with fast accumulation (where the grouped 128x128 kernels spill
/// and take 10x longer).
///
/// 128-row tiles take 8 worker warps (`ptxas -v`, sm_90, tileiras 13.5.37): with 4, one warpgroup
/// holds the whole 128x128 f32 accumulator, uses 255 registers and spills, and the per-tensor-scale
/// kernel is left 66 KB of shared memory (2 pipeline stages) against 165 KB for the per-row one — the
/// 1.8x gap the H200 measured between them; with 8, both use 168 registers, no spills, 165 KB.
/// The 64-row tiles of small calls keep 4 worker warps, except with block scales: there one warpgroup
/// spilled 1408 bytes per thread (168 registers), and 8 worker warps build with no stack frame
/// (168 registers, 169 KB; session 27, `cargo xtask kernels --filter gemm_fp8`; not yet timed).
fn choose(target: &Target, call: &Call) -> Fp8Config {
    let tiles = ceil_div(call.m, 128) * ceil_div(call.n, 128);
    if tiles < target.sm_count as i64 {
        return Fp8Config {
            persistent: false,
            bm: 64,
            bn: 128,
            bk: 128,
            workers: if call.mode == ScaleMode::Block { 8 } else { 4 },
            occupancy: 0,
            scales: BlockScales::PerStep,
            cga: 1,
            latency: 0,
        };
    }
    if call.mode == ScaleMode::Block {
        return Fp8Config {
            persistent: true,
            bm: 64,
            bn: 128,
            bk: 128,
            workers: 4,
            occupancy: 2,
            scales: BlockScales::GroupSum,
            cga: 1,
            latency: 0,
        };
    }
    let wide = call.fast;
    Fp8Config {
        persistent: true,
        bm: 128,
        bn: if wide { 256 } else { 128 },
        bk: 128,
        workers: 8,
        occupancy: 0,
        scales: BlockScales::PerStep,
        cga: 1,
        latency: 0,
    }
}

/// Every configuration, the default first: 64x128 and 128x128 tiles with 4 or 8 worker warps, and
/// 128x256 (per-tensor and per-row scales; block scales need one `b` scale per 128 columns) with 8,
/// each persistent or one tile per block; per-tensor and per-row scales also 64x128 on one
/// warpgroup at two blocks per SM (` o2`), persistent 256x128 / 256x256 tiles split over 2-CTA
/// clusters (` c2`), and the persistent 128x128 tile with the operand-load latency hint (` l10`).
fn candidates(target: &Target, call: &Call) -> Vec<Fp8Config> {
    let mut all = vec![choose(target, call)];
    let wide = call.mode != ScaleMode::Block;
    for persistent in [false, true] {
        for (bm, bn, workers) in [
            (128, 128, 8),
            (128, 128, 4),
            (64, 128, 4),
            (64, 128, 8),
            (128, 256, 8),
        ] {
            if bn == 256 && !wide {
                continue;
            }
            all.push(Fp8Config {
                persistent,
                bm,
                bn,
                bk: 128,
                workers,
                occupancy: 0,
                scales: BlockScales::PerStep,
                cga: 1,
                latency: 0,
            });
        }
        if wide {
            // One warpgroup per 64x128 tile at two blocks per SM, the block-scale kernels' winner
            // (session 32: one block's waits overlap the other's products).
            all.push(Fp8Config {
                persistent,
                bm: 64,
                bn: 128,
                bk: 128,
                workers: 4,
                occupancy: 2,
                scales: BlockScales::PerStep,
                cga: 1,
                latency: 0,
            });
        }
        if call.mode == ScaleMode::Block {
            // The grouped scale loads with both column picks, on 8 warps and on one warpgroup per
            // block at two blocks per SM (one block's per-step scale work overlaps the other's
            // products).
            for (bm, workers, occupancy) in [(64, 4, 2), (128, 8, 0)] {
                for scales in [BlockScales::GroupSum, BlockScales::GroupIndex] {
                    all.push(Fp8Config {
                        persistent,
                        bm,
                        bn: 128,
                        bk: 128,
                        workers,
                        occupancy,
                        scales,
                        cga: 1,
                        latency: 0,
                    });
                }
            }
        }
    }
    if wide {
        // Tiles split over 2-CTA clusters that share one operand's loads (as the 16-bit GEMM's
        // ` c2` candidates): 128x128 and 128x256 per CTA.
        let pair = |bn| Fp8Config {
            persistent: true,
            bm: 256,
            bn,
            bk: 128,
            workers: 8,
            occupancy: 0,
            scales: BlockScales::PerStep,
            cga: 2,
            latency: 0,
        };
        all.push(pair(128));
        all.push(pair(256));
        // The persistent 128x128 tile with the operand pipeline deepened by the latency hint
        // (session 43's ncu: cuBLAS runs 6 stages of 128x128x128 where tileiras gives ours 5; with
        // the hint tileiras gives 7, 231 KB). The 128x256 tiles get fewer stages with it, not more.
        all.push(Fp8Config {
            persistent: true,
            bm: 128,
            bn: 128,
            bk: 128,
            workers: 8,
            occupancy: 0,
            scales: BlockScales::PerStep,
            cga: 1,
            latency: OPERAND_LATENCY,
        });
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}

/// `$body` with `$f` the fp8 type and `$o` the output type of a call.
macro_rules! fp8_types {
    ($format:expr, $out:expr, |$f:ident, $o:ident| $body:expr) => {{
        macro_rules! with_out {
            ($ff:ty) => {
                match $out {
                    ScalarType::BF16 => {
                        type $f = $ff;
                        type $o = half::bf16;
                        Some($body)
                    }
                    ScalarType::F32 => {
                        type $f = $ff;
                        type $o = f32;
                        Some($body)
                    }
                    _ => None,
                }
            };
        }
        match $format {
            Fp8Format::E4M3 => with_out!(cutile::core::f8e4m3fn),
            Fp8Format::E5M2 => with_out!(cutile::core::f8e5m2),
        }
    }};
}

/// The kernel of a configuration: the entry's const parameters `(BM, BN, ROWWISE, FAST)` (block scales:
/// `(BM, FAST)`, BN = 128) from the call and tile, with the worker-warp hint.
fn kernel(cfg: &Fp8Config, call: &Call) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    // `$mode` selects the entry (0 per tensor, 1 per row, 2 block), `$fast` FAST.
    macro_rules! pick {
        ($f:ty, $o:ty, $fast:literal) => {{
            // The grouped block-scale entry at `$bm` rows with column pick `$pick`.
            macro_rules! grouped {
                ($bm:literal, $pick:literal) => {
                    k::gemm_fp8_block_grouped::kernel::<
                        $f,
                        $o,
                        $bm,
                        128,
                        128,
                        SCALE_GROUP,
                        $pick,
                        $fast,
                    >()
                };
            }
            // The block-scale entry of `cfg.scales` at `$bm` rows.
            macro_rules! block {
                ($bm:literal) => {
                    match cfg.scales {
                        BlockScales::PerStep => {
                            k::gemm_fp8_block::kernel::<$f, $o, $bm, 128, 128, $fast>()
                        }
                        BlockScales::GroupSum => grouped!($bm, 0),
                        BlockScales::GroupIndex => grouped!($bm, 1),
                    }
                };
            }
            // The per-tensor or per-row entry (`$rw`) of a `$bm x $bn` tile at `cfg.latency`.
            macro_rules! scaled {
                ($bm:literal, $bn:literal, $rw:literal) => {{
                    macro_rules! at {
                        ($lat:expr) => {
                            k::gemm_fp8_scaled::kernel::<$f, $o, $bm, $bn, 128, $rw, $fast, { $lat }>()
                        };
                    }
                    match cfg.latency {
                        0 => Some(at!(0)),
                        OPERAND_LATENCY => Some(at!(OPERAND_LATENCY)),
                        _ => None,
                    }
                }};
            }
            match (call.mode, cfg.bm, cfg.bn) {
                (ScaleMode::Tensor, 128, 128) => scaled!(128, 128, 0),
                (ScaleMode::Tensor, 64, 128) => scaled!(64, 128, 0),
                (ScaleMode::Tensor, 128, 256) => scaled!(128, 256, 0),
                (ScaleMode::Tensor, 256, 128) => scaled!(256, 128, 0),
                (ScaleMode::Tensor, 256, 256) => scaled!(256, 256, 0),
                (ScaleMode::Row, 128, 128) => scaled!(128, 128, 1),
                (ScaleMode::Row, 64, 128) => scaled!(64, 128, 1),
                (ScaleMode::Row, 128, 256) => scaled!(128, 256, 1),
                (ScaleMode::Row, 256, 128) => scaled!(256, 128, 1),
                (ScaleMode::Row, 256, 256) => scaled!(256, 256, 1),
                (ScaleMode::Block, 128, 128) if cfg.latency == 0 => Some(block!(128)),
                (ScaleMode::Block, 64, 128) if cfg.latency == 0 => Some(block!(64)),
                _ => None,
            }
        }};
    }
    let picked = fp8_types!(call.format, call.out, |F, O| if call.fast {
        pick!(F, O, 1)
    } else {
        pick!(F, O, 0)
    })
    .flatten();
    let kernel = picked.ok_or_else(|| OpError::Unsupported {
        op: call.mode.op(),
        what: format!(
            "no {} -> {} kernel for configuration `{}`",
            call.format.scalar(),
            call.out,
            cfg.name()
        ),
    })?;
    let kernel = kernel.with_occupancy(cfg.occupancy).with_cluster(cfg.cga);
    Ok(if cfg.workers == 4 {
        kernel
    } else {
        kernel.with_hint("default", "num_worker_warps_per_cta", cfg.workers)
    })
}

fn launches(cfg: &Fp8Config, call: &Call, target: &Target) -> Result<Vec<PlannedLaunch>, OpError> {
    let kernel = kernel(cfg, call)?;
    let tiles = ceil_div(call.m, cfg.bm) * ceil_div(call.n, cfg.bn);
    // The kernels loop over tiles `p, p + grid, …` along x: persistent → one block per SM (`occupancy`
    // per SM with that hint; a block of a `cga` cluster config is a cluster of that many CTAs), else
    // one block per tile.
    let blocks = if cfg.persistent {
        tiles
            .min(target.sm_count as i64 * cfg.occupancy.max(1) / cfg.cga.max(1))
            .max(1)
    } else {
        tiles
    };
    let blocks = u32::try_from(blocks).map_err(|_| OpError::Unsupported {
        op: call.mode.op(),
        what: format!("{tiles} output tiles exceed the grid's 2^32 - 1 blocks"),
    })?;
    let grid = Some((blocks, 1, 1));
    let view =
        |i: usize, (shape, strides): &(Vec<i64>, Vec<i64>), output: bool| PlannedArg::Tensor {
            operand: i,
            output,
            shape: shape.clone(),
            strides: strides.clone(),
            offset: 0,
        };
    let mut out = Vec::with_capacity(2);
    let sa = if call.sa_rows {
        // `sa` as it is → its row-major copy at the start of `sa_rows`, which the product reads.
        out.push(PlannedLaunch {
            kernel: sa_copy_kernel(),
            args: vec![
                PlannedArg::whole(2, &call.ops[2], false),
                view(SA_ROWS, &call.scale_views[0], true),
            ],
            grid: None,
            config: format!("{} (sa rows)", cfg.name()),
        });
        SA_ROWS
    } else {
        2
    };
    out.push(PlannedLaunch {
        kernel,
        args: vec![
            PlannedArg::whole(0, &call.ops[0], false),
            PlannedArg::whole(1, &call.ops[1], false),
            view(sa, &call.scale_views[0], false),
            view(3, &call.scale_views[1], false),
            PlannedArg::I32(super::config::GROUP as i32),
            PlannedArg::whole(4, &call.ops[4], true),
        ],
        grid,
        config: cfg.name(),
    });
    Ok(out)
}

/// The `sa` relayout: the GEMM family's tile copy (`dst = src`, one `SA_COPY_BM x SA_COPY_BN` tile
/// per block) on f32, reading `sa` through its strides and writing row-major tiles.
fn sa_copy_kernel() -> cutile::dsl::Kernel {
    super::kernels::copy_tiles::kernel::<f32, SA_COPY_BM, SA_COPY_BN>()
}
