//! Dropout with a counter-based RNG, as `F.dropout(x, p, training=True)`: `y = x · mask / (1 - p)`,
//! and its backward `dx = dy · mask / (1 - p)` recomputed from the same `(seed, offset)` (no mask is
//! stored). With `c = offset + i` for element `i` of the flattened input (logical row-major order),
//! the element is kept iff its 16-bit random number, half `c mod 2` of word `(c / 2) mod 4` of
//! Philox-4x32-10 of the counter `c / 8` under the key `seed`, is `≥ round(p · 2^16)`
//! ([`reference::random_bits`]; one Philox call serves eight elements: the 32-bit multiplies of the
//! rounds, not memory, bounded the four-per-call form), so a call is reproducible from
//! `(seed, offset)`, and a caller that splits a tensor into pieces passes each piece's element offset
//! (a multiple of 8) to get the same mask as one call. The keep rate is `p` rounded to `2^-16`
//! (FlashAttention's dropout rounds it to `2^-8`). torch's own dropout RNG (curand Philox with its own counter
//! layout) is not reproduced: compare with it statistically.
//!
//! f32, f16, bf16 (math in f32), contiguous tensors of any rank; one launch.
//!
//! - [`config`]: the tile, and the tiles the tuner may time (`CUTILE_TUNE`);
//!   [`reference`](mod@reference): Philox, the mask and dropout on the CPU, bit-exact with the kernel;
//! - [`plan`]: the launch of a call, without a device ([`plan_with`]: every tuning candidate's);
//!   [`representative_calls`] for the catalog.

pub mod config;
mod dsl;
pub mod reference;

pub use config::DropoutConfig;
pub use dsl::kernels;

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::tuning;
use crate::op::{
    CallSpec, FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, contiguous_strides,
    float_kernel,
};

/// Op names. Operands `[x, y]` (`[dy, dx]` for the backward).
pub const OP: &str = "dropout";
pub const BACKWARD: &str = "dropout_backward";

/// A call's random stream and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropoutParams {
    /// Drop probability, in `[0, 1]`.
    pub p: f32,
    /// The Philox key.
    pub seed: u64,
    /// The counter of the first element.
    pub offset: u64,
}

/// `y = x · mask / (1 - p)`, queued on `stream`; `y` has `x`'s shape and type.
pub fn dropout<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    params: DropoutParams,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    run(
        stream,
        OP,
        [Operand::of("x", x), Operand::of("y", &*y)],
        params,
    )
}

/// `dx = dy · mask / (1 - p)` with the mask of the forward call of the same `params`, queued on
/// `stream`.
pub fn dropout_backward<'a>(
    stream: &'a Stream,
    dy: &'a impl TensorArg,
    params: DropoutParams,
    dx: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    run(
        stream,
        BACKWARD,
        [Operand::of("dy", dy), Operand::of("dx", &*dx)],
        params,
    )
}

/// Validates, chooses the tile (tuned when `CUTILE_TUNE` asks) and queues the launch.
fn run<'a>(
    stream: &'a Stream,
    op: &'static str,
    operands: [Operand; 2],
    params: DropoutParams,
) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(op, &operands, &target, params)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let candidates = config::candidates(call.n, call.rows);
    let class = config::class(call.dtype, call.n, call.rows);
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (the output exclusively);
    // the launch addresses only the `n` elements `Call::new` checked. The output is bit-exact, so the
    // tuner's correctness gate compares equal outputs.
    unsafe {
        tuning::run_tuned(
            stream,
            &operands,
            1,
            call.op,
            class,
            &candidates,
            true,
            |c| call.launch(c),
        )
    }
}

/// Fails unless `o`'s non-trivial axes are laid out contiguously.
fn expect_contiguous(op: &'static str, o: &Operand) -> Result<(), OpError> {
    let want = contiguous_strides(&o.shape);
    let ok = o
        .shape
        .iter()
        .zip(o.strides.iter().zip(&want))
        .all(|(&n, (s, w))| n <= 1 || s == w);
    if ok {
        Ok(())
    } else {
        Err(OpError::Layout {
            op,
            arg: o.name,
            shape: o.shape.clone(),
            strides: o.strides.clone(),
            constraint: "must be contiguous (the mask follows the logical element order); pass a \
                         contiguous copy"
                .into(),
        })
    }
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    op: &'static str,
    dtype: ScalarType,
    /// Elements.
    n: i64,
    /// `n` is a multiple of 8: the `[n / 8, 8]` row kernel (rows = Philox groups), else the flat one.
    rows: bool,
    x: Operand,
    y: Operand,
    params: DropoutParams,
}

impl Call {
    /// Checks a call of `op` on `[x, y]`; `None` when `x` is empty.
    fn new(
        op: &str,
        operands: &[Operand],
        target: &Target,
        params: DropoutParams,
    ) -> Result<Option<Call>, OpError> {
        let op = match op {
            OP => OP,
            BACKWARD => BACKWARD,
            other => {
                return Err(OpError::Unsupported {
                    op: OP,
                    what: format!("`{other}` is neither {OP} nor {BACKWARD}"),
                });
            }
        };
        let [x, y] = operands else {
            return Err(OpError::Unsupported {
                op,
                what: format!("takes 2 tensors (input, output), got {}", operands.len()),
            });
        };
        for o in operands {
            target.expect_device(op, o)?;
        }
        x.expect_dtype(op, FLOATS)?;
        y.expect_same_dtype(op, x)?;
        y.expect_same_shape(op, x)?;
        if !(0.0..=1.0).contains(&params.p) {
            return Err(OpError::Unsupported {
                op,
                what: format!("the drop probability must be in [0, 1], got {}", params.p),
            });
        }
        if !params.offset.is_multiple_of(8) {
            return Err(OpError::Unsupported {
                op,
                what: format!(
                    "the counter offset must be a multiple of 8 (one Philox call serves eight \
                     elements), got {}; round the offsets of split pieces to multiples of 8",
                    params.offset
                ),
            });
        }
        expect_contiguous(op, x)?;
        expect_contiguous(op, y)?;
        let n = x.numel();
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(Call {
            op,
            dtype: x.dtype,
            n,
            rows: n % 8 == 0,
            x: x.clone(),
            y: y.clone(),
            params,
        }))
    }

    /// The one launch of tile `cfg`.
    fn launch(&self, cfg: &DropoutConfig) -> Result<Vec<PlannedLaunch>, OpError> {
        let (op, n, bn) = (self.op, self.n, cfg.bn);
        crate::op::grid_rows(op, crate::op::ceil_div(n, bn))?;
        let (kernel, name) = if self.rows {
            (rows_kernel(self.dtype, bn), "dropout_rows")
        } else {
            (kernel(self.dtype, bn), "dropout")
        };
        let kernel = kernel.ok_or_else(|| OpError::Unsupported {
            op,
            what: format!("no {} {name} kernel for BN = {bn}", self.dtype),
        })?;
        let words = |v: u64| {
            [
                PlannedArg::I32(v as u32 as i32),
                PlannedArg::I32((v >> 32) as i32),
            ]
        };
        // The row kernel views x and y as `[n / 8, 8]`, whose rows are the Philox groups.
        let view = |o: &Operand| {
            let (shape, strides) = if self.rows {
                (vec![n / 8, 8], vec![8, 1])
            } else {
                (vec![n], vec![1])
            };
            Operand {
                shape,
                strides,
                ..o.clone()
            }
        };
        let p = self.params;
        let mut args = vec![PlannedArg::view(0, &view(&self.x), false)];
        args.extend(words(p.seed));
        args.extend(words(p.offset));
        args.push(PlannedArg::I32(reference::threshold(p.p) as i32));
        args.push(PlannedArg::F32(reference::scale(p.p)));
        args.push(PlannedArg::view(1, &view(&self.y), true));
        Ok(vec![PlannedLaunch {
            kernel,
            args,
            grid: None,
            config: format!("{name} BN={bn}"),
        }])
    }
}

/// The launch of a call (`[x, y]`); none when `x` is empty.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
    params: DropoutParams,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_with(op, operands, target, params, false)
}

/// [`plan`], or with `all_candidates` the launch of every tuning candidate
/// ([`config::candidates`]), the default's first (what a bundle for a tuning run holds).
pub fn plan_with(
    op: &str,
    operands: &[Operand],
    target: &Target,
    params: DropoutParams,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let Some(call) = Call::new(op, operands, target, params)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        config::candidates(call.n, call.rows)
    } else {
        vec![config::choose(call.n)]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(call.launch(c)?);
    }
    Ok(out)
}

/// The launch of tile `cfg` (what a test pinning a tile plans); none when `x` is empty.
pub fn plan_config(
    op: &str,
    operands: &[Operand],
    target: &Target,
    params: DropoutParams,
    cfg: &DropoutConfig,
) -> Result<Vec<PlannedLaunch>, OpError> {
    match Call::new(op, operands, target, params)? {
        Some(call) => call.launch(cfg),
        None => Ok(Vec::new()),
    }
}

/// The `[n / 8, 8]` kernel of `BN = bn` elements per block (`BQ = bn / 8` rows), for
/// [`config::ROW_TILES`].
fn rows_kernel(dt: ScalarType, bn: i64) -> Option<cutile::dsl::Kernel> {
    float_kernel!(dt, |E| match bn {
        256 => Some(kernels::dropout_rows::kernel::<E, 32>()),
        512 => Some(kernels::dropout_rows::kernel::<E, 64>()),
        1024 => Some(kernels::dropout_rows::kernel::<E, 128>()),
        2048 => Some(kernels::dropout_rows::kernel::<E, 256>()),
        4096 => Some(kernels::dropout_rows::kernel::<E, 512>()),
        _ => None,
    })
    .flatten()
}

/// The kernel of `BN = bn` elements per block (`BQ = bn / 8` Philox groups).
fn kernel(dt: ScalarType, bn: i64) -> Option<cutile::dsl::Kernel> {
    float_kernel!(dt, |E| match bn {
        256 => Some(kernels::dropout::kernel::<E, 256, 32>()),
        1024 => Some(kernels::dropout::kernel::<E, 1024, 128>()),
        4096 => Some(kernels::dropout::kernel::<E, 4096, 512>()),
        _ => None,
    })
    .flatten()
}

/// The parameters the registry plans with (the kernel takes them as run-time scalars: any value
/// shares the specialization).
pub const SPEC_PARAMS: DropoutParams = DropoutParams {
    p: 0.1,
    seed: 0x5EED_0000_1234,
    offset: 0,
};

/// The described operands of a registry call spec (`[x]`; the output has `x`'s shape).
pub fn described_call(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<Vec<Operand>, OpError> {
    let [x] = shapes else {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("a {op} call spec lists [x], got {shapes:?}"),
        });
    };
    let (i, o) = if op == BACKWARD {
        ("dy", "dx")
    } else {
        ("x", "y")
    };
    Ok(vec![
        Operand::described(i, 0, dt, x),
        Operand::described(o, 1, dt, x),
    ])
}

/// The calls the catalog compiles and the runner checks and benchmarks: a bf16 activation of a
/// 16384-token, 4096-wide batch (the bandwidth bench), and ragged small ones (4 specializations).
pub fn representative_calls() -> Vec<CallSpec> {
    let c = |op: &str, dt: &str, x: &[i64]| CallSpec::new(op, dt, &[x], false);
    vec![
        c(OP, "bf16", &[16384, 4096]),
        c(OP, "f32", &[3, 1001]),
        c(BACKWARD, "bf16", &[16384, 4096]),
        c(BACKWARD, "f16", &[77]),
    ]
}
