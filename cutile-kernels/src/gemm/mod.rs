//! Matrix product `c = a @ b` with f32 accumulation, as `torch.matmul` on 2-D operands: f16 and bf16,
//! any strides (a transposed operand is a transposed view, e.g. `w.transpose(0, 1)` of a PyTorch
//! `Linear` weight).
//!
//! - `dsl`: the kernels (one tile per block, and persistent);
//! - [`config`]: the tile/schedule per shape, and the tuner's candidates;
//! - [`reference`]: the CPU reference;
//! - [`plan`]: the launches of a call, without a device.

pub mod config;
mod dsl;
pub mod reference;

pub use config::GemmConfig;
pub use dsl::kernels;
pub use reference::gemm_reference;

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::ceil_div;
use crate::op::tuning;
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, mma_kernel};

/// The op's name.
pub const OP: &str = "gemm";
/// Element types with a kernel.
pub const DTYPES: &[ScalarType] = &[ScalarType::BF16, ScalarType::F16];

/// `c = a @ b` for `a: [m, k]`, `b: [k, n]`, `c: [m, n]`, queued on `stream`. An empty `c` is a no-op;
/// `k = 0` gives zeros.
pub fn gemm<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("c", &*c),
    ];
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(&operands, &target)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let candidates = config::candidates(&target, call.m, call.n);
    let class = config::class(call.dtype, call.m, call.n, call.k);
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively).
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
}

impl Call {
    fn new(operands: &[Operand], target: &Target) -> Result<Option<Call>, OpError> {
        let [a, b, c] = operands else {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!("takes 3 tensors (a, b, c), got {}", operands.len()),
            });
        };
        a.expect_dtype(OP, DTYPES)?;
        b.expect_same_dtype(OP, a)?;
        c.expect_same_dtype(OP, a)?;
        for o in [a, b, c] {
            o.expect_rank(OP, 2)?;
            target.expect_device(OP, o)?;
        }
        let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
        if b.shape[0] != k {
            return Err(OpError::Shape {
                op: OP,
                what: "inner extents: `a`'s columns vs `b`'s rows".into(),
                left: k.to_string(),
                right: b.shape[0].to_string(),
            });
        }
        if c.shape != [m, n] {
            return Err(OpError::Shape {
                op: OP,
                what: "`c` must be `[a.rows, b.cols]`".into(),
                left: format!("{:?}", c.shape),
                right: format!("{:?}", [m, n]),
            });
        }
        if m == 0 || n == 0 {
            return Ok(None);
        }
        Ok(Some(Call {
            dtype: a.dtype,
            m,
            n,
            k,
            ops: [a.clone(), b.clone(), c.clone()],
        }))
    }
}

/// The launches of a call (`operands` = `[a, b, c]`): the default configuration, or every candidate's.
pub fn plan(
    operands: &[Operand],
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(operands, target)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        config::candidates(target, call.m, call.n)
    } else {
        vec![config::choose(target, call.m, call.n)]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(launches(c, &call, target)?);
    }
    Ok(out)
}

fn launches(cfg: &GemmConfig, call: &Call, target: &Target) -> Result<Vec<PlannedLaunch>, OpError> {
    use kernels as k;
    let kernel = mma_kernel!(
        call.dtype,
        |E| match (cfg.persistent, cfg.bm, cfg.bn, cfg.bk) {
            (false, 128, 128, 64) => Some(k::gemm::kernel::<E, 128, 128, 64>()),
            (false, 64, 128, 64) => Some(k::gemm::kernel::<E, 64, 128, 64>()),
            (true, 128, 128, 64) => Some(k::gemm_persistent::kernel::<E, 128, 128, 64>()),
            (true, 64, 128, 64) => Some(k::gemm_persistent::kernel::<E, 64, 128, 64>()),
            _ => None,
        }
    )
    .flatten()
    .ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!(
            "no {} kernel for configuration `{}`",
            call.dtype,
            tuning::Candidate::name(cfg)
        ),
    })?;
    let grid = if cfg.persistent {
        let tiles = ceil_div(call.m, cfg.bm) * ceil_div(call.n, cfg.bn);
        Some((tiles.min(target.sm_count as i64).max(1) as u32, 1, 1))
    } else {
        None
    };
    let [a, b, c] = &call.ops;
    Ok(vec![PlannedLaunch {
        kernel,
        args: vec![
            PlannedArg::whole(0, a, false),
            PlannedArg::whole(1, b, false),
            PlannedArg::whole(2, c, true),
        ],
        grid,
        config: tuning::Candidate::name(cfg),
    }])
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
    ]
}
