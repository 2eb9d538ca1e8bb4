//! Matrix product `c = a @ b` with f32 accumulation, as `torch.matmul` on 2-D operands ([`gemm`]) and
//! `torch.bmm` on 3-D ones ([`bmm`]): f16 and bf16, and f32 on tf32 tensor cores when the caller opts in
//! ([`GemmOptions::allow_tf32`], as `torch.backends.cuda.matmul.allow_tf32`); any strides (a transposed
//! operand is a transposed view, e.g. `w.transpose(0, 1)` of a PyTorch `Linear` weight; a batch stride
//! of 0 broadcasts an operand over the batch).
//!
//! Operands: `[a, b, c]`, and a fourth, `packed`, of the element type, when one of them is not
//! 16-byte aligned ([`Operand::is_16b_aligned`]: a row stride like `k = 517` bf16): each such operand
//! is copied into an aligned region of that scratch before the product (the product into one, then
//! out to `c`), since the product's tiles reach unaligned rows with neither TMA nor vector accesses.
//! [`gemm`] takes it from the stream's scratch buffer ([`crate::op::scratch`]); planning without a
//! device appends a described one ([`with_scratch`]). Without it the product reads the operands as
//! they are (correct, slower).
//!
//! - `dsl`: the kernels (one tile per block, persistent, and the tile copy that packs);
//! - [`grouped`]: the grouped GEMM (`G` ragged-row products in one persistent launch, as
//!   `torch._grouped_mm` with `offs`; its kernel in `dsl_grouped`);
//! - [`config`]: the tile/schedule per shape, and the tuner's candidates;
//! - [`reference`]: the CPU reference;
//! - [`plan`]: the launches of a call, without a device;
//! - [`fp8`]: fp8 (e4m3/e5m2) GEMM with per-tensor, per-row or block scales (kernels in `dsl_fp8`,
//!   CPU reference and quantization in [`fp8_reference`]).

pub mod config;
mod dsl;
mod dsl_fp8;
mod dsl_grouped;
pub mod epilogue;
pub mod fp8;
pub mod fp8_reference;
pub mod grouped;
pub mod reference;

pub use config::GemmConfig;
pub use dsl::kernels;
pub use dsl::{grouped_tile, k_tiles};
pub use dsl_fp8::kernels as fp8_kernels;
pub use epilogue::{Activation, EpilogueSpec, GemmEpilogue, gemm_epilogue};
pub use fp8::{Fp8Format, Fp8Options, Fp8Scales, gemm_fp8, gemm_fp8_with};
pub use grouped::{grouped_gemm, grouped_gemm_reference};
pub use reference::{gemm_epilogue_reference, gemm_reference};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::ceil_div;
use crate::op::tuning;
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, float_kernel};

/// The op's name.
pub const OP: &str = "gemm";
/// The batched op's name.
pub const BMM: &str = "bmm";
/// Element types with a kernel (f32 only with [`GemmOptions::allow_tf32`]).
pub const DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16, ScalarType::F32];

/// Options of [`gemm_with`] and [`bmm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GemmOptions {
    /// Multiply f32 operands on tensor cores as tf32 (10-bit mantissa, f32 accumulation): relative
    /// error about 1e-3 of the dot product's magnitude instead of f32's 1e-7. Off by default, as
    /// `torch.backends.cuda.matmul.allow_tf32`; without it an f32 call is refused (there is no f32
    /// tensor-core product).
    pub allow_tf32: bool,
}

/// `c = a @ b` for `a: [m, k]`, `b: [k, n]`, `c: [m, n]` (f16 or bf16), queued on `stream`. An empty
/// `c` is a no-op; `k = 0` gives zeros. f32 needs [`gemm_with`] and [`GemmOptions::allow_tf32`].
pub fn gemm<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    gemm_with(stream, a, b, &GemmOptions::default(), c)
}

/// [`gemm`] with options.
pub fn gemm_with<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    options: &GemmOptions,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("c", &*c),
    ];
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(&operands, &target, options)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let mut operands = operands.to_vec();
    let call = if call.needs_packing() {
        let (m, n, k) = (call.m, call.n, call.k);
        operands.push(crate::op::scratch::scratch(
            stream,
            "packed",
            call.dtype,
            scratch_len(m, n, k),
        )?);
        Call::new(&operands, &target, options)?.unwrap_or(call)
    } else {
        call
    };
    let candidates = config::candidates(&target, call.dtype, call.m, call.n);
    let class = config::class(call.dtype, call.m, call.n, call.k);
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively), and the
    // stream's scratch buffer, which lives until process exit and is used by work queued on `stream`
    // only, in stream order; plans address its regions within `scratch_len` elements.
    unsafe {
        tuning::run_tuned(stream, &operands, 2, OP, class, &candidates, false, |cfg| {
            launches(cfg, &call, &target)
        })
    }
}

#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    m: i64,
    n: i64,
    k: i64,
    ops: [Operand; 3],
    /// Per operand (`a`, `b`, `c`): its aligned row-major copy in the scratch operand (index 3), when
    /// the operand is unaligned and the scratch is given.
    packed: [Option<Region>; 3],
    /// Operand `i` is not 16-byte aligned.
    unaligned: [bool; 3],
}

/// A row-major `rows x cols` region of the scratch operand, `ld` elements per row, `offset` elements in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    rows: i64,
    cols: i64,
    ld: i64,
    offset: i64,
}

/// Row pitch of a packed region: a multiple of 16 elements (≥ 32 bytes), so the stride's divisibility
/// is the largest the layout facts record.
fn packed_ld(cols: i64) -> i64 {
    ceil_div(cols.max(1), 16) * 16
}

/// Elements of a region start 256 bytes (128 16-bit elements) apart.
fn region_len(rows: i64, cols: i64) -> i64 {
    ceil_div(rows.max(1) * packed_ld(cols), 128) * 128
}

/// Scratch elements for packing all three operands of an `m x k` by `k x n` product (a call packs only
/// the unaligned ones, but the size depends on the shape alone, so plans made without a device and
/// real calls agree).
pub fn scratch_len(m: i64, n: i64, k: i64) -> i64 {
    region_len(m, k) + region_len(k, n) + region_len(m, n)
}

/// Checks `c = a @ b` for 2-D operands on `target`'s device and returns `(m, k, n)`; every product op
/// of this family (plain, epilogue) validates its shapes here.
pub(crate) fn product_extents(
    op: &'static str,
    a: &Operand,
    b: &Operand,
    c: &Operand,
    target: &Target,
) -> Result<(i64, i64, i64), OpError> {
    for o in [a, b, c] {
        o.expect_rank(op, 2)?;
        target.expect_device(op, o)?;
    }
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
    if b.shape[0] != k {
        return Err(OpError::Shape {
            op,
            what: "inner extents: `a`'s columns vs `b`'s rows".into(),
            left: k.to_string(),
            right: b.shape[0].to_string(),
        });
    }
    if c.shape != [m, n] {
        return Err(OpError::Shape {
            op,
            what: "`c` must be `[a.rows, b.cols]`".into(),
            left: format!("{:?}", c.shape),
            right: format!("{:?}", [m, n]),
        });
    }
    Ok((m, k, n))
}

/// `a`'s element type is one the op takes under `options`.
fn expect_dtype(op: &'static str, a: &Operand, options: &GemmOptions) -> Result<(), OpError> {
    a.expect_dtype(op, DTYPES)?;
    if a.dtype == ScalarType::F32 && !options.allow_tf32 {
        return Err(OpError::Unsupported {
            op,
            what:
                "f32 operands: the product runs on tensor cores as tf32 (10-bit mantissa); opt in \
                   with `GemmOptions { allow_tf32: true }`, or pass bf16/f16 operands"
                    .into(),
        });
    }
    Ok(())
}

impl Call {
    fn new(
        operands: &[Operand],
        target: &Target,
        options: &GemmOptions,
    ) -> Result<Option<Call>, OpError> {
        let (a, b, c, packed) = match operands {
            [a, b, c] => (a, b, c, None),
            [a, b, c, p] => (a, b, c, Some(p)),
            _ => {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!(
                        "takes 3 tensors (a, b, c) and an optional scratch (packed), got {}",
                        operands.len()
                    ),
                });
            }
        };
        expect_dtype(OP, a, options)?;
        b.expect_same_dtype(OP, a)?;
        c.expect_same_dtype(OP, a)?;
        let (m, k, n) = product_extents(OP, a, b, c, target)?;
        if m == 0 || n == 0 {
            return Ok(None);
        }
        let unaligned = [a, b, c].map(|o| !o.is_16b_aligned());
        let mut regions = [None; 3];
        if let Some(p) = packed {
            p.expect_same_dtype(OP, a)?;
            p.expect_rank(OP, 1)?;
            target.expect_device(OP, p)?;
            let need = scratch_len(m, n, k);
            if p.shape[0] < need {
                return Err(OpError::Shape {
                    op: OP,
                    what: "the `packed` scratch must hold `gemm::scratch_len(m, n, k)` elements \
                           (`gemm::with_scratch` appends one when planning)"
                        .into(),
                    left: p.shape[0].to_string(),
                    right: need.to_string(),
                });
            }
            let mut offset = 0;
            for (i, (rows, cols)) in [(m, k), (k, n), (m, n)].into_iter().enumerate() {
                // `k = 0`: no product terms, nothing to pack.
                if unaligned[i] && rows > 0 && cols > 0 {
                    regions[i] = Some(Region {
                        rows,
                        cols,
                        ld: packed_ld(cols),
                        offset,
                    });
                }
                offset += region_len(rows, cols);
            }
        }
        Ok(Some(Call {
            dtype: a.dtype,
            m,
            n,
            k,
            ops: [a.clone(), b.clone(), c.clone()],
            packed: regions,
            unaligned,
        }))
    }

    /// An operand is unaligned (and the product has terms): a scratch to pack into pays.
    fn needs_packing(&self) -> bool {
        self.k > 0 && self.unaligned.iter().any(|&u| u)
    }
}

/// `operands` (`[a, b, c]`) with a described scratch operand `packed` (index 3) appended when one of
/// them is not 16-byte aligned: what planning without a device (AOT bundles, the registry, the runner)
/// passes to [`plan`]. Operands that already hold a scratch are returned as they are.
pub fn with_scratch(operands: &[Operand], target: &Target) -> Result<Vec<Operand>, OpError> {
    let mut out = operands.to_vec();
    if operands.len() != 3 {
        return Ok(out);
    }
    // Whether an f32 call may run is [`plan_with`]'s question; the scratch only depends on the shapes.
    let any = GemmOptions { allow_tf32: true };
    if let Some(call) = Call::new(operands, target, &any)?
        && call.needs_packing()
    {
        out.push(Operand::described(
            "packed",
            3,
            call.dtype,
            &[scratch_len(call.m, call.n, call.k)],
        ));
    }
    Ok(out)
}

/// The launches of a call (`operands` = `[a, b, c]`): the default configuration, or every candidate's.
pub fn plan(
    operands: &[Operand],
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_with(operands, target, &GemmOptions::default(), all_candidates)
}

/// [`plan`] with options.
pub fn plan_with(
    operands: &[Operand],
    target: &Target,
    options: &GemmOptions,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(operands, target, options)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        config::candidates(target, call.dtype, call.m, call.n)
    } else {
        vec![config::choose_plain(target, call.dtype, call.m, call.n)]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(launches(c, &call, target)?);
    }
    Ok(out)
}

/// `$body` with `$e` the storage type and `$m` the tensor-core operand type of the run-time element
/// type `$dt` (f16/f16, bf16/bf16, f32/tf32); `None` for others.
macro_rules! product_types {
    ($dt:expr, |$e:ident, $m:ident| $body:expr) => {{
        match $dt {
            ScalarType::F16 => {
                type $e = half::f16;
                type $m = half::f16;
                Some($body)
            }
            ScalarType::BF16 => {
                type $e = half::bf16;
                type $m = half::bf16;
                Some($body)
            }
            ScalarType::F32 => {
                type $e = f32;
                type $m = cutile::core::tf32;
                Some($body)
            }
            _ => None,
        }
    }};
}

pub(crate) use product_types;

/// The product kernel of a configuration, or why there is none.
fn product_kernel(cfg: &GemmConfig, dtype: ScalarType) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    product_types!(
        dtype,
        |E, M| match (cfg.persistent, cfg.bm, cfg.bn, cfg.bk) {
            (false, 128, 128, 64) => Some(k::gemm::kernel::<E, M, 128, 128, 64>()),
            (false, 64, 128, 64) => Some(k::gemm::kernel::<E, M, 64, 128, 64>()),
            (false, 128, 128, 32) => Some(k::gemm::kernel::<E, M, 128, 128, 32>()),
            (false, 64, 128, 32) => Some(k::gemm::kernel::<E, M, 64, 128, 32>()),
            (false, 64, 64, 64) => Some(k::gemm::kernel::<E, M, 64, 64, 64>()),
            (false, 64, 64, 32) => Some(k::gemm::kernel::<E, M, 64, 64, 32>()),
            (true, 128, 128, 64) => Some(k::gemm_persistent::kernel::<E, M, 128, 128, 64>()),
            (true, 64, 128, 64) => Some(k::gemm_persistent::kernel::<E, M, 64, 128, 64>()),
            (true, 128, 128, 32) => Some(k::gemm_persistent::kernel::<E, M, 128, 128, 32>()),
            (true, 64, 128, 32) => Some(k::gemm_persistent::kernel::<E, M, 64, 128, 32>()),
            (true, 64, 64, 64) => Some(k::gemm_persistent::kernel::<E, M, 64, 64, 64>()),
            (true, 64, 64, 32) => Some(k::gemm_persistent::kernel::<E, M, 64, 64, 32>()),
            (false, 128, 256, 64) => Some(k::gemm::kernel::<E, M, 128, 256, 64>()),
            (true, 128, 256, 64) => Some(k::gemm_persistent::kernel::<E, M, 128, 256, 64>()),
            // Split over a 2-CTA cluster (`cfg.cga`): 128x256 and 128x128 per CTA.
            (false, 256, 256, 64) => Some(k::gemm::kernel::<E, M, 256, 256, 64>()),
            (true, 256, 256, 64) => Some(k::gemm_persistent::kernel::<E, M, 256, 256, 64>()),
            (true, 256, 128, 64) => Some(k::gemm_persistent::kernel::<E, M, 256, 128, 64>()),
            // Decode shapes (a few rows of `a`): no 64-row tile of which most rows are padding.
            (false, 16, 32, 128) => Some(k::gemm::kernel::<E, M, 16, 32, 128>()),
            (false, 16, 64, 64) => Some(k::gemm::kernel::<E, M, 16, 64, 64>()),
            (false, 16, 128, 64) => Some(k::gemm::kernel::<E, M, 16, 128, 64>()),
            (false, 16, 64, 128) => Some(k::gemm::kernel::<E, M, 16, 64, 128>()),
            (false, 16, 128, 128) => Some(k::gemm::kernel::<E, M, 16, 128, 128>()),
            (false, 32, 64, 64) => Some(k::gemm::kernel::<E, M, 32, 64, 64>()),
            (false, 32, 128, 64) => Some(k::gemm::kernel::<E, M, 32, 128, 64>()),
            (false, 32, 64, 128) => Some(k::gemm::kernel::<E, M, 32, 64, 128>()),
            (false, 32, 128, 128) => Some(k::gemm::kernel::<E, M, 32, 128, 128>()),
            _ => None,
        }
    )
    .flatten()
    .map(|mut kernel| {
        if cfg.workers != 4 {
            kernel = kernel.with_hint("default", "num_worker_warps_per_cta", cfg.workers);
        }
        kernel
            .with_cluster(cfg.cga.into())
            .with_occupancy(cfg.occupancy.into())
    })
    .ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!(
            "no {dtype} kernel for configuration `{}`",
            tuning::Candidate::name(cfg)
        ),
    })
}

fn launches(cfg: &GemmConfig, call: &Call, target: &Target) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels as k;
    let kernel = product_kernel(cfg, call.dtype)?;
    let copy = float_kernel!(
        call.dtype,
        |E| k::copy_tiles::kernel::<E, COPY_BM, COPY_BN>()
    )
    .ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!("no {} tile copy kernel", call.dtype),
    })?;
    let tiles = ceil_div(call.m, cfg.bm) * ceil_div(call.n, cfg.bn);
    // A block of the grid is a cluster of `cga` CTAs.
    let blocks = if cfg.persistent {
        tiles
            .min(target.sm_count as i64 / cfg.cga.max(1) as i64)
            .max(1)
    } else {
        tiles
    };
    let grid = Some((crate::op::grid_rows(OP, blocks)?, 1, 1));
    let config = tuning::Candidate::name(cfg);
    // What the product reads or writes for operand `i`: its packed region, or the operand itself.
    let arg = |i: usize, output: bool| match call.packed[i] {
        Some(r) => r.arg(output),
        None => PlannedArg::whole(i, &call.ops[i], output),
    };
    let copy_launch = |src: PlannedArg, dst: PlannedArg| PlannedLaunch {
        kernel: copy.clone(),
        args: vec![src, dst],
        grid: None,
        config: format!("{config} (pack)"),
    };
    let mut out = Vec::new();
    for i in 0..2 {
        if let Some(r) = call.packed[i] {
            out.push(copy_launch(
                PlannedArg::whole(i, &call.ops[i], false),
                r.arg(true),
            ));
        }
    }
    out.push(PlannedLaunch {
        kernel,
        args: vec![
            arg(0, false),
            arg(1, false),
            PlannedArg::I32(cfg.group as i32),
            arg(2, true),
        ],
        grid,
        config: config.clone(),
    });
    if let Some(r) = call.packed[2] {
        out.push(copy_launch(
            r.arg(false),
            PlannedArg::whole(2, &call.ops[2], true),
        ));
    }
    Ok(out)
}

/// `c[q] = a[q] @ b[q]` for `a: [B, m, k]`, `b: [B, k, n]`, `c: [B, m, n]`, as `torch.bmm`, in one
/// launch (grid = batch × output tiles). Any strides: a transposed operand is a view, and a batch stride
/// of 0 broadcasts `a` or `b` over the batch. An empty `c` is a no-op; `k = 0` gives zeros. f32 needs
/// [`GemmOptions::allow_tf32`]. Operands whose rows are not 16-byte aligned are read as they are (no
/// packing: correct, slower).
pub fn bmm<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    options: &GemmOptions,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("c", &*c),
    ];
    let target = Target::of(stream.device())?;
    let launches = plan_bmm(&operands, &target, options)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively).
    unsafe { crate::op::execute(stream, &operands, &launches) }
}

/// The launch of a [`bmm`] call (`operands` = `[a, b, c]`), without a device.
pub fn plan_bmm(
    operands: &[Operand],
    target: &Target,
    options: &GemmOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let [a, b, c] = operands else {
        return Err(OpError::Unsupported {
            op: BMM,
            what: format!("takes 3 tensors (a, b, c), got {}", operands.len()),
        });
    };
    expect_dtype(BMM, a, options)?;
    b.expect_same_dtype(BMM, a)?;
    c.expect_same_dtype(BMM, a)?;
    for o in [a, b, c] {
        o.expect_rank(BMM, 3)?;
        target.expect_device(BMM, o)?;
    }
    let (batch, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
    if b.shape[0] != batch || b.shape[1] != k {
        return Err(OpError::Shape {
            op: BMM,
            what: "`b` must be `[a.batch, a.cols, n]`".into(),
            left: format!("{:?}", b.shape),
            right: format!("[{batch}, {k}, n]"),
        });
    }
    if c.shape != [batch, m, n] {
        return Err(OpError::Shape {
            op: BMM,
            what: "`c` must be `[a.batch, a.rows, b.cols]`".into(),
            left: format!("{:?}", c.shape),
            right: format!("{:?}", [batch, m, n]),
        });
    }
    if batch == 0 || m == 0 || n == 0 {
        return Ok(Vec::new());
    }
    if batch > i32::MAX as i64 {
        return Err(OpError::Unsupported {
            op: BMM,
            what: format!("a batch of {batch} exceeds the grid's 2^31 - 1 blocks"),
        });
    }
    // One tile per block; the tile height follows the single GEMM's rule on the whole batch's tiles.
    let cfg = config::choose(target, a.dtype, m.saturating_mul(batch), n);
    let kernel = batched_kernel(cfg.bm, cfg.bk, a.dtype)?;
    Ok(vec![PlannedLaunch {
        kernel,
        args: (0..3)
            .map(|i| PlannedArg::whole(i, &operands[i], i == 2))
            .collect(),
        grid: None,
        config: format!("gemm_batched {}x{}x{}", cfg.bm, cfg.bn, cfg.bk),
    }])
}

fn batched_kernel(bm: i64, bk: i64, dtype: ScalarType) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    product_types!(dtype, |E, M| match (bm, bk) {
        (128, 64) => Some(k::gemm_batched::kernel::<E, M, 128, 128, 64>()),
        (64, 64) => Some(k::gemm_batched::kernel::<E, M, 64, 128, 64>()),
        (128, 32) => Some(k::gemm_batched::kernel::<E, M, 128, 128, 32>()),
        (64, 32) => Some(k::gemm_batched::kernel::<E, M, 64, 128, 32>()),
        _ => None,
    })
    .flatten()
    .ok_or_else(|| OpError::Unsupported {
        op: BMM,
        what: format!("no {dtype} batched kernel with {bm}-row, {bk}-deep tiles"),
    })
}

/// Tile of the pack copy (bf16: 16 KiB per block).
const COPY_BM: i32 = 64;
const COPY_BN: i32 = 128;

impl Region {
    /// This region of the scratch operand (index 3) as a kernel argument.
    fn arg(&self, output: bool) -> PlannedArg {
        PlannedArg::Tensor {
            operand: 3,
            output,
            shape: vec![self.rows, self.cols],
            strides: vec![self.ld, 1],
            offset: self.offset,
        }
    }
}

/// The calls the catalog compiles (`cargo xtask kernels`), the GPU runner checks and benchmarks, and the
/// examples run: the benchmark shapes and ragged ones, per element type.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    vec![
        c(OP, "bf16", &[&[4096, 4096], &[4096, 4096]], false),
        c(OP, "bf16", &[&[8192, 8192], &[8192, 8192]], false),
        c(OP, "bf16", &[&[64, 8192], &[8192, 8192]], false),
        c(OP, "bf16", &[&[1000, 517], &[517, 1023]], false),
        c(OP, "f16", &[&[1000, 517], &[517, 1023]], false),
        c(OP, "f16", &[&[4096, 4096], &[4096, 4096]], false),
        c(OP, "f16", &[&[8192, 8192], &[8192, 8192]], false),
        c(OP, "f32", &[&[4096, 4096], &[4096, 4096]], false),
        c(OP, "f32", &[&[1000, 517], &[517, 1023]], false),
        c(BMM, "bf16", &[&[16, 512, 512], &[16, 512, 1024]], false),
        c(BMM, "f16", &[&[7, 100, 77], &[7, 77, 300]], false),
    ]
}
