//! Embedding lookup, as `F.embedding(ids, table)`: `out[T, D] = table[ids[T], :]` for `table: [V, D]`
//! (any strides) and ids i32 or i64. An id outside `[0, V)` gives a row of zeros (vLLM's masked
//! vocab-parallel convention; torch raises instead); nothing is ever read out of bounds. bf16, f16,
//! f32; one launch.
//!
//! ```no_run
//! use cutile::runtime::{Device, Stream, Tensor};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! let table = Tensor::<half::bf16>::random(&device, &[128256, 4096], 1)?;
//! let ids = Tensor::from_host(&device, &[1i64, 42, 128000], &[3])?;
//! let mut out = Tensor::<half::bf16>::zeros(&device, &[3, 4096])?;
//! cutile_kernels::embedding::embedding(&stream, &table, &ids, &mut out)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! - [`config`]: the tile; [`reference`](mod@reference): the CPU reference;
//! - [`plan`]: the launch of a call, without a device; [`representative_calls`] for the catalog.

pub mod config;
mod dsl;
pub mod reference;

pub use config::EmbConfig;
pub use dsl::kernels;

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::{
    CallSpec, FLOATS, INDICES, OpError, Operand, PlannedArg, PlannedLaunch, Target, execute,
    float_index_kernel,
};

/// The op's name in the registry. Operands `[table, ids, out]`.
pub const OP: &str = "embedding";

/// `out = table[ids]`, queued on `stream`.
pub fn embedding<'a>(
    stream: &'a Stream,
    table: &'a impl TensorArg,
    ids: &'a impl TensorArg,
    out: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("table", table),
        Operand::of("ids", ids),
        Operand::of("out", &*out),
    ];
    let target = Target::of(stream.device())?;
    let launches = plan(&operands, &target)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (out exclusively); the
    // launch reads only rows the kernel checked are inside `table`.
    unsafe { execute(stream, &operands, &launches) }
}

/// The launch of a call (`[table, ids, out]`); none when `out` is empty.
pub fn plan(operands: &[Operand], target: &Target) -> Result<Vec<PlannedLaunch>, OpError> {
    let [table, ids, out] = operands else {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("takes 3 tensors (table, ids, out), got {}", operands.len()),
        });
    };
    for o in operands {
        target.expect_device(OP, o)?;
    }
    table.expect_dtype(OP, FLOATS)?;
    table.expect_rank(OP, 2)?;
    ids.expect_dtype(OP, INDICES)?;
    ids.expect_rank(OP, 1)?;
    out.expect_same_dtype(OP, table)?;
    out.expect_rank(OP, 2)?;
    let want = [ids.shape[0], table.shape[1]];
    if out.shape != want {
        return Err(OpError::Shape {
            op: OP,
            what: "`out` must be [T, D] for `ids: [T]` and `table: [V, D]`".into(),
            left: format!("{:?}", out.shape),
            right: format!("{want:?}"),
        });
    }
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    let cfg = config::choose(want[0], want[1]);
    let kernel = kernel(table.dtype, ids.dtype, &cfg).ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!(
            "no {} kernel with {} ids for BM = {}, BN = {}",
            table.dtype, ids.dtype, cfg.bm, cfg.bn
        ),
    })?;
    crate::op::grid_rows(OP, crate::op::ceil_div(want[0], cfg.bm))?;
    Ok(vec![PlannedLaunch {
        kernel,
        args: (0..3)
            .map(|i| PlannedArg::whole(i, &operands[i], i == 2))
            .collect(),
        grid: None,
        config: format!("embedding BM={} BN={}", cfg.bm, cfg.bn),
    }])
}

fn kernel(dt: ScalarType, it: ScalarType, cfg: &EmbConfig) -> Option<cutile::dsl::Kernel> {
    use kernels::embedding as k;
    float_index_kernel!(dt, it, |E, I| match (cfg.bm, cfg.bn) {
        (32, 128) => Some(k::kernel::<E, I, 32, 128>()),
        (16, 256) => Some(k::kernel::<E, I, 16, 256>()),
        (8, 512) => Some(k::kernel::<E, I, 8, 512>()),
        (4, 1024) => Some(k::kernel::<E, I, 4, 1024>()),
        (1, 128) => Some(k::kernel::<E, I, 1, 128>()),
        (1, 256) => Some(k::kernel::<E, I, 1, 256>()),
        (1, 512) => Some(k::kernel::<E, I, 1, 512>()),
        (1, 1024) => Some(k::kernel::<E, I, 1, 1024>()),
        _ => None,
    })
    .flatten()
}

/// What [`CallSpec::shapes`] lists.
pub const SPEC_INPUTS: &str = "[[V, D], [T], optional [i64 ids] as 0/1]";

/// The described operands of a registry call spec (see [`SPEC_INPUTS`]).
pub fn described_call(dt: ScalarType, shapes: &[Vec<i64>]) -> Result<Vec<Operand>, OpError> {
    let (tab, t) = match shapes {
        [a, b] | [a, b, _] if a.len() == 2 && b.len() == 1 => (a, b[0]),
        _ => {
            return Err(OpError::Unsupported {
                op: OP,
                what: format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"),
            });
        }
    };
    let it = if shapes.get(2).and_then(|f| f.first()).copied().unwrap_or(0) != 0 {
        ScalarType::I64
    } else {
        ScalarType::I32
    };
    Ok(vec![
        Operand::described("table", 0, dt, tab),
        Operand::described("ids", 1, it, &[t]),
        Operand::described("out", 2, dt, &[t, tab[1]]),
    ])
}

/// The calls the catalog compiles and the runner checks and benchmarks: a Llama-2 vocabulary (bf16,
/// 32000 × 4096) at prefill (T = 16384, the bandwidth bench) and decode (T = 8, i64 ids), and a ragged
/// f32 one (D = 100).
pub fn representative_calls() -> Vec<CallSpec> {
    let c =
        |dt: &str, tab: &[i64], t: i64, f: i64| CallSpec::new(OP, dt, &[tab, &[t], &[f]], false);
    vec![
        c("bf16", &[32000, 4096], 16384, 0),
        c("bf16", &[32000, 4096], 8, 1),
        c("f32", &[1000, 100], 77, 0),
    ]
}
