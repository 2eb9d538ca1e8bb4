//! Element-wise activations and their gradients, as torch's: SiLU-and-mul / SwiGLU, GELU (exact erf and
//! tanh approximation), GeGLU, ReLU. Any rank (leading axes flattened into rows), f32, f16 and bf16,
//! math in f32; an empty tensor is a no-op.
//!
//! ```no_run
//! use cutile::runtime::{Device, Stream, Tensor};
//! use cutile_kernels::activation::{self, GeluApprox};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! // An MLP's fused gate/up projection: [tokens, 2·N] → [tokens, N].
//! let x = Tensor::<half::bf16>::random(&device, &[4096, 2 * 11008], 1)?;
//! let mut y = Tensor::<half::bf16>::zeros(&device, &[4096, 11008])?;
//! activation::silu_and_mul(&stream, &x, &mut y)?.wait()?;
//! let mut z = Tensor::<half::bf16>::zeros(&device, &[4096, 2 * 11008])?;
//! activation::gelu(&stream, &x, &mut z, GeluApprox::Tanh)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! | op | computes |
//! |---|---|
//! | [`silu_and_mul`] | `y = silu(x[.., :N]) · x[.., N:]` for `x: [.., 2N]` (vLLM's convention) |
//! | [`swiglu`] | `y = silu(a) · b` |
//! | [`gelu`] | `y = x · Φ(x)`, or the tanh form with [`GeluApprox::Tanh`] |
//! | [`geglu`] | `y = gelu(x[.., :N]) · x[.., N:]` |
//! | [`relu`] | `y = max(x, 0)` |
//!
//! and each one's `_backward`: the gradient wrt the inputs given `grad_out` (for the gated ops over one
//! tensor `x: [.., 2N]`, `grad_x = [grad wrt the activated half | grad wrt the multiplier half]`).
//!
//! Every op runs one launch of one of four kernels (`dsl`): `act_fwd`, `act_bwd`, `gated_fwd`,
//! `gated_bwd`, over `rows x cols` views; the halves of `x: [.., 2N]` are two views of the same tensor
//! (`N` elements apart). Strided rows are taken as they come (a unit-stride last axis and leading axes
//! that flatten into one row stride); fully contiguous unary and pair calls are viewed as a single row,
//! so narrow rows still fill whole tiles.
//!
//! - [`config`]: the tile per (element type, row length, arch), and the tuner's candidates;
//! - [`reference`](mod@reference): the CPU references (f64);
//! - [`plan`]: the launches of a call, without a device; [`OPS`]: every op of the family as data.

pub mod config;
pub(crate) mod dsl;
pub mod reference;

pub use config::ActConfig;
pub use dsl::{kernels, math};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;

use crate::op::tuning;
use crate::op::{FLOATS, OpError, Operand, PlannedArg, PlannedLaunch, Target, float_kernel};

/// An activation function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `x · sigmoid(x)`.
    Silu,
    /// `x · Φ(x)`, `Φ` the standard normal CDF (`F.gelu(x)`).
    GeluErf,
    /// `x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))` (`F.gelu(x, approximate="tanh")`).
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

/// GELU's `approximate` argument, as torch's `"none"` / `"tanh"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GeluApprox {
    /// The exact GELU through erf.
    #[default]
    None,
    /// The tanh approximation.
    Tanh,
}

impl GeluApprox {
    fn activation(self) -> Activation {
        match self {
            GeluApprox::None => Activation::GeluErf,
            GeluApprox::Tanh => Activation::GeluTanh,
        }
    }
}

/// How an op's tensors relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// One input `x`: `y = act(x)`. Operands `[x, y]`, backward `[x, grad_out, grad_x]`.
    Unary,
    /// One input `x: [.., 2N]` whose halves are gate and multiplier: `y = act(x[.., :N]) · x[.., N:]`.
    /// Operands `[x, y]` (`y: [.., N]`), backward `[x, grad_out, grad_x]`.
    Gated,
    /// Two inputs of one shape: `y = act(a) · b`. Operands `[a, b, y]`, backward
    /// `[a, b, grad_out, grad_a, grad_b]`.
    Pair,
}

/// One op of the family, as data: what the registry, the runner and the tests iterate over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub name: &'static str,
    pub act: Activation,
    pub form: Form,
    /// The gradient op (takes `grad_out`, writes the inputs' gradients).
    pub backward: bool,
}

impl OpSpec {
    /// The operands' names in order, inputs then outputs.
    pub fn operand_names(&self) -> &'static [&'static str] {
        match (self.form, self.backward) {
            (Form::Unary | Form::Gated, false) => &["x", "y"],
            (Form::Unary | Form::Gated, true) => &["x", "grad_out", "grad_x"],
            (Form::Pair, false) => &["a", "b", "y"],
            (Form::Pair, true) => &["a", "b", "grad_out", "grad_a", "grad_b"],
        }
    }

    /// How many of [`OpSpec::operand_names`] are outputs.
    pub fn outputs(&self) -> usize {
        match (self.form, self.backward) {
            (Form::Pair, true) => 2,
            _ => 1,
        }
    }

    /// The shape of every operand for a call whose first input is `x` (`None` when a gated `x` has no
    /// even last axis).
    pub fn operand_shapes(&self, x: &[i64]) -> Option<Vec<Vec<i64>>> {
        let half = || -> Option<Vec<i64>> {
            let (&last, lead) = x.split_last()?;
            (last % 2 == 0).then(|| [lead, &[last / 2]].concat())
        };
        let names = self.operand_names();
        Some(match (self.form, self.backward) {
            (Form::Gated, false) => vec![x.to_vec(), half()?],
            (Form::Gated, true) => vec![x.to_vec(), half()?, x.to_vec()],
            _ => vec![x.to_vec(); names.len()],
        })
    }
}

macro_rules! op_names {
    ($($(#[$doc:meta])* $c:ident = $n:literal),* $(,)?) => {$(
        $(#[$doc])*
        pub const $c: &str = $n;
    )*};
}
op_names!(
    /// `silu(x[.., :N]) · x[.., N:]`.
    SILU_AND_MUL = "silu_and_mul",
    SILU_AND_MUL_BACKWARD = "silu_and_mul_backward",
    /// `silu(a) · b`.
    SWIGLU = "swiglu",
    SWIGLU_BACKWARD = "swiglu_backward",
    /// Exact GELU.
    GELU = "gelu",
    GELU_BACKWARD = "gelu_backward",
    /// GELU, tanh approximation.
    GELU_TANH = "gelu_tanh",
    GELU_TANH_BACKWARD = "gelu_tanh_backward",
    /// `gelu(x[.., :N]) · x[.., N:]`, exact GELU.
    GEGLU = "geglu",
    GEGLU_BACKWARD = "geglu_backward",
    /// GeGLU with the tanh GELU.
    GEGLU_TANH = "geglu_tanh",
    GEGLU_TANH_BACKWARD = "geglu_tanh_backward",
    RELU = "relu",
    RELU_BACKWARD = "relu_backward",
);

const fn spec(name: &'static str, act: Activation, form: Form, backward: bool) -> OpSpec {
    OpSpec {
        name,
        act,
        form,
        backward,
    }
}

/// Every op of the family.
pub const OPS: &[OpSpec] = {
    use Activation::*;
    use Form::*;
    &[
        spec(SILU_AND_MUL, Silu, Gated, false),
        spec(SILU_AND_MUL_BACKWARD, Silu, Gated, true),
        spec(SWIGLU, Silu, Pair, false),
        spec(SWIGLU_BACKWARD, Silu, Pair, true),
        spec(GELU, GeluErf, Unary, false),
        spec(GELU_BACKWARD, GeluErf, Unary, true),
        spec(GELU_TANH, GeluTanh, Unary, false),
        spec(GELU_TANH_BACKWARD, GeluTanh, Unary, true),
        spec(GEGLU, GeluErf, Gated, false),
        spec(GEGLU_BACKWARD, GeluErf, Gated, true),
        spec(GEGLU_TANH, GeluTanh, Gated, false),
        spec(GEGLU_TANH_BACKWARD, GeluTanh, Gated, true),
        spec(RELU, Relu, Unary, false),
        spec(RELU_BACKWARD, Relu, Unary, true),
    ]
};

/// The op named `name`.
pub fn find(name: &str) -> Option<&'static OpSpec> {
    OPS.iter().find(|o| o.name == name)
}

/// The op of `(act, form, backward)`; every host function below names one that [`OPS`] lists.
fn op_of(act: Activation, form: Form, backward: bool) -> Result<&'static OpSpec, OpError> {
    OPS.iter()
        .find(|o| o.act == act && o.form == form && o.backward == backward)
        .ok_or_else(|| OpError::Unsupported {
            op: "activation",
            what: format!("no {act:?} op of form {form:?} (backward: {backward})"),
        })
}

/// `y = silu(x[.., :N]) · x[.., N:]` for `x: [.., 2N]`, `y: [.., N]`, queued on `stream`.
pub fn silu_and_mul<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let spec = op_of(Activation::Silu, Form::Gated, false)?;
    run(stream, spec, &[Operand::of("x", x), Operand::of("y", &*y)])
}

/// The gradient of [`silu_and_mul`] wrt `x` given `grad_out` (`[.., N]`): `grad_x: [.., 2N]`.
pub fn silu_and_mul_backward<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_x: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    gated_backward(stream, Activation::Silu, x, grad_out, grad_x)
}

/// `y = silu(a) · b` (`a`, `b`, `y` of one shape), queued on `stream`.
pub fn swiglu<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let spec = op_of(Activation::Silu, Form::Pair, false)?;
    let operands = [
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("y", &*y),
    ];
    run(stream, spec, &operands)
}

/// The gradients of [`swiglu`] given `grad_out`: `grad_a = grad_out · b · silu'(a)`, `grad_b = grad_out ·
/// silu(a)`.
pub fn swiglu_backward<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_a: &'a mut impl TensorArgMut,
    grad_b: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let spec = op_of(Activation::Silu, Form::Pair, true)?;
    let operands = [
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("grad_out", grad_out),
        Operand::of("grad_a", &*grad_a),
        Operand::of("grad_b", &*grad_b),
    ];
    run(stream, spec, &operands)
}

/// `y = gelu(x)` (`F.gelu(x, approximate=..)`), queued on `stream`.
pub fn gelu<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
    approximate: GeluApprox,
) -> Result<Pending<'a>, OpError> {
    let spec = op_of(approximate.activation(), Form::Unary, false)?;
    run(stream, spec, &[Operand::of("x", x), Operand::of("y", &*y)])
}

/// `grad_x = grad_out · gelu'(x)`.
pub fn gelu_backward<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_x: &'a mut impl TensorArgMut,
    approximate: GeluApprox,
) -> Result<Pending<'a>, OpError> {
    unary_backward(stream, approximate.activation(), x, grad_out, grad_x)
}

/// `y = gelu(x[.., :N]) · x[.., N:]` for `x: [.., 2N]`, `y: [.., N]`.
pub fn geglu<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
    approximate: GeluApprox,
) -> Result<Pending<'a>, OpError> {
    let spec = op_of(approximate.activation(), Form::Gated, false)?;
    run(stream, spec, &[Operand::of("x", x), Operand::of("y", &*y)])
}

/// The gradient of [`geglu`] wrt `x` given `grad_out` (`[.., N]`): `grad_x: [.., 2N]`.
pub fn geglu_backward<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_x: &'a mut impl TensorArgMut,
    approximate: GeluApprox,
) -> Result<Pending<'a>, OpError> {
    gated_backward(stream, approximate.activation(), x, grad_out, grad_x)
}

/// `y = max(x, 0)`.
pub fn relu<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    y: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let spec = op_of(Activation::Relu, Form::Unary, false)?;
    run(stream, spec, &[Operand::of("x", x), Operand::of("y", &*y)])
}

/// `grad_x = grad_out` where `x > 0`, else 0.
pub fn relu_backward<'a>(
    stream: &'a Stream,
    x: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_x: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    unary_backward(stream, Activation::Relu, x, grad_out, grad_x)
}

/// The op `op` by its data ([`OPS`]): `x` the first input (`x` or `a`), `rest` the other inputs in the
/// op's order (`grad_out`; `b`; `b, grad_out`), `outs` the outputs (`grad_a, grad_b` for
/// `swiglu_backward`, else one). What the examples and the runner call for any op of the family.
pub fn call_op<'a, T: TensorArg, O: TensorArgMut>(
    stream: &'a Stream,
    op: &OpSpec,
    x: &'a impl TensorArg,
    rest: &'a [T],
    outs: &'a mut [O],
) -> Result<Pending<'a>, OpError> {
    let names = op.operand_names();
    let n_in = names.len() - op.outputs();
    if rest.len() + 1 != n_in || outs.len() != op.outputs() {
        return Err(OpError::Unsupported {
            op: op.name,
            what: format!(
                "takes {n_in} inputs and {} outputs ({}), got {} and {}",
                op.outputs(),
                names.join(", "),
                rest.len() + 1,
                outs.len()
            ),
        });
    }
    let mut operands = vec![Operand::of(names[0], x)];
    operands.extend(rest.iter().zip(&names[1..]).map(|(t, n)| Operand::of(n, t)));
    operands.extend(
        outs.iter()
            .zip(&names[n_in..])
            .map(|(t, n)| Operand::of(n, t)),
    );
    run(stream, op, &operands)
}

fn unary_backward<'a>(
    stream: &'a Stream,
    act: Activation,
    x: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_x: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("grad_out", grad_out),
        Operand::of("grad_x", &*grad_x),
    ];
    run(stream, op_of(act, Form::Unary, true)?, &operands)
}

fn gated_backward<'a>(
    stream: &'a Stream,
    act: Activation,
    x: &'a impl TensorArg,
    grad_out: &'a impl TensorArg,
    grad_x: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("x", x),
        Operand::of("grad_out", grad_out),
        Operand::of("grad_x", &*grad_x),
    ];
    run(stream, op_of(act, Form::Gated, true)?, &operands)
}

/// Validates, chooses the tile (tuned when `CUTILE_TUNE` asks) and queues the launch.
fn run<'a>(
    stream: &'a Stream,
    spec: &OpSpec,
    operands: &[Operand],
) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let Some(call) = Call::new(spec, operands, &target)? else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let (dt, rows, cols, aligned) = (call.dtype, call.rows, call.cols, call.aligned);
    let candidates = candidates(spec, dt, &target, rows, cols);
    let class = config::class(&candidates[0], dt, aligned);
    let first_output = operands.len() - spec.outputs();
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (outputs exclusively); the
    // launches address only the views `Call::new` checked against their shapes and strides.
    unsafe {
        tuning::run_tuned(
            stream,
            operands,
            first_output,
            spec.name,
            class,
            &candidates,
            true,
            |c| call.launch(c),
        )
    }
}

/// A validated call: the kernel's tensor arguments as views of the operands, and the view extents.
#[derive(Debug, Clone)]
struct Call {
    spec: OpSpec,
    dtype: cutile_ir::ScalarType,
    rows: i64,
    cols: i64,
    /// Every view starts and steps its rows on 16-byte boundaries.
    aligned: bool,
    /// The kernel's tensor parameters in order.
    args: Vec<PlannedArg>,
}

fn view(operand: usize, o: &Operand, output: bool, cols: i64, offset: i64) -> PlannedArg {
    PlannedArg::Tensor {
        operand,
        output,
        shape: vec![o.shape[0], cols],
        strides: o.strides.clone(),
        offset,
    }
}

impl Call {
    /// Checks `operands` against `spec` (see [`Form`]); `None` for an empty call.
    fn new(spec: &OpSpec, operands: &[Operand], target: &Target) -> Result<Option<Call>, OpError> {
        let op = spec.name;
        let names = spec.operand_names();
        if operands.len() != names.len() {
            return Err(OpError::Unsupported {
                op,
                what: format!(
                    "takes {} tensors ({}), got {}",
                    names.len(),
                    names.join(", "),
                    operands.len()
                ),
            });
        }
        let x = &operands[0];
        x.expect_dtype(op, FLOATS)?;
        for o in operands {
            o.expect_same_dtype(op, x)?;
            target.expect_device(op, o)?;
        }
        if spec.form == Form::Gated && x.rank() == 0 {
            return Err(OpError::Rank {
                op,
                arg: x.name,
                expected: "at least 1 (the last axis holds both halves)".into(),
                shape: x.shape.clone(),
            });
        }
        let Some(shapes) = spec.operand_shapes(&x.shape) else {
            return Err(OpError::Shape {
                op,
                what: format!(
                    "`{}`'s last axis holds the two halves and must be even",
                    x.name
                ),
                left: format!("{}", x.shape.last().copied().unwrap_or(1)),
                right: "2·N".into(),
            });
        };
        for (o, want) in operands.iter().zip(&shapes).skip(1) {
            if &o.shape != want {
                return Err(OpError::Shape {
                    op,
                    what: format!(
                        "`{}` must have shape {want:?} (from `{}`: {:?})",
                        o.name, x.name, x.shape
                    ),
                    left: format!("{:?}", o.shape),
                    right: format!("{want:?}"),
                });
            }
        }
        if x.numel() == 0 {
            return Ok(None);
        }
        let mut rows: Vec<Operand> = operands
            .iter()
            .map(|o| o.as_rows(op))
            .collect::<Result<_, _>>()?;
        // Contiguous unary and pair calls are one long row: narrow rows then still fill whole tiles.
        let n = x.numel();
        if spec.form != Form::Gated
            && n <= i64::from(i32::MAX)
            && rows.iter().all(|r| r.strides[0] == r.shape[1])
        {
            for r in &mut rows {
                r.shape = vec![1, n];
                r.strides = vec![n, 1];
            }
        }
        let cols = rows[0].shape[1];
        let out0 = names.len() - spec.outputs();
        let args = match (spec.form, spec.backward) {
            (Form::Gated, false) => {
                let h = cols / 2;
                vec![
                    view(0, &rows[0], false, h, 0),
                    view(0, &rows[0], false, h, h),
                    view(1, &rows[1], true, h, 0),
                ]
            }
            (Form::Gated, true) => {
                let h = cols / 2;
                vec![
                    view(0, &rows[0], false, h, 0),
                    view(0, &rows[0], false, h, h),
                    view(1, &rows[1], false, h, 0),
                    view(2, &rows[2], true, h, 0),
                    view(2, &rows[2], true, h, h),
                ]
            }
            _ => rows
                .iter()
                .enumerate()
                .map(|(i, r)| view(i, r, i >= out0, cols, 0))
                .collect(),
        };
        let rows_n = rows[0].shape[0];
        // Whether every view starts and steps its rows on 16-byte boundaries (the tuning class tells the
        // two apart: the kernels' layout facts, and so their code, differ).
        let aligned = args.iter().all(|a| match a {
            PlannedArg::Tensor {
                operand,
                shape,
                strides,
                offset,
                ..
            } => {
                let o = &operands[*operand];
                Operand {
                    shape: shape.clone(),
                    strides: strides.clone(),
                    ptr: o.ptr + (*offset as u64) * o.elem_bytes(),
                    ..o.clone()
                }
                .is_16b_aligned()
            }
            _ => true,
        });
        let cols_n = if spec.form == Form::Gated {
            cols / 2
        } else {
            cols
        };
        if cols_n > i64::from(i32::MAX) {
            return Err(OpError::Unsupported {
                op,
                what: format!("rows of {cols_n} elements exceed the kernels' 2^31 - 1 columns"),
            });
        }
        Ok(Some(Call {
            spec: *spec,
            dtype: x.dtype,
            rows: rows_n,
            cols: cols_n,
            aligned,
            args,
        }))
    }

    /// The one launch of configuration `cfg`.
    fn launch(&self, cfg: &ActConfig) -> Result<Vec<PlannedLaunch>, OpError> {
        let op = self.spec.name;
        let name = tuning::Candidate::name(cfg);
        let kernel = kernel(&self.spec, self.dtype, cfg).ok_or_else(|| OpError::Unsupported {
            op,
            what: format!("no {} kernel for tile `{name}`", self.dtype),
        })?;
        let tiles = crate::op::ceil_div(self.rows, cfg.tm) * crate::op::ceil_div(self.cols, cfg.bn);
        let grid = crate::op::grid_rows(op, tiles)?;
        Ok(vec![PlannedLaunch {
            kernel,
            args: self.args.clone(),
            grid: Some((grid, 1, 1)),
            config: format!("{} {name}", kernel_name(&self.spec)),
        }])
    }
}

fn kernel_name(spec: &OpSpec) -> &'static str {
    match (spec.form, spec.backward) {
        (Form::Unary, false) => "act_fwd",
        (Form::Unary, true) => "act_bwd",
        (_, false) => "gated_fwd",
        (_, true) => "gated_bwd",
    }
}

/// `kernels::$k::kernel::<E, ACT, TM, BN, GATHER>()` for the listed tiles ([`config::TILES`]) in
/// the configuration's access form.
macro_rules! tile_kernel {
    ($k:ident, $e:ty, $act:ident, $cfg:expr) => {
        if $cfg.gather {
            tile_kernel!(@form $k, $e, $act, $cfg, 1)
        } else {
            tile_kernel!(@form $k, $e, $act, $cfg, 0)
        }
    };
    (@form $k:ident, $e:ty, $act:ident, $cfg:expr, $g:literal) => {
        match ($cfg.tm, $cfg.bn) {
            (1, 1024) => Some(kernels::$k::kernel::<$e, $act, 1, 1024, $g>()),
            (1, 2048) => Some(kernels::$k::kernel::<$e, $act, 1, 2048, $g>()),
            (64, 64) => Some(kernels::$k::kernel::<$e, $act, 64, 64, $g>()),
            (16, 256) => Some(kernels::$k::kernel::<$e, $act, 16, 256, $g>()),
            (4, 1024) => Some(kernels::$k::kernel::<$e, $act, 4, 1024, $g>()),
            (8, 1024) => Some(kernels::$k::kernel::<$e, $act, 8, 1024, $g>()),
            (2, 2048) => Some(kernels::$k::kernel::<$e, $act, 2, 2048, $g>()),
            (4, 2048) => Some(kernels::$k::kernel::<$e, $act, 4, 2048, $g>()),
            (1, 4096) => Some(kernels::$k::kernel::<$e, $act, 1, 4096, $g>()),
            (2, 4096) => Some(kernels::$k::kernel::<$e, $act, 2, 4096, $g>()),
            (1, 8192) => Some(kernels::$k::kernel::<$e, $act, 1, 8192, $g>()),
            _ => None,
        }
    };
}

/// The same over the activation.
macro_rules! act_kernel {
    ($k:ident, $e:ty, $act:expr, $cfg:expr) => {{
        use dsl::{GELU_ERF, GELU_TANH, GELU_TANH_FOLDED, RELU, SILU};
        match ($act, $cfg.folded) {
            (Activation::Silu, false) => tile_kernel!($k, $e, SILU, $cfg),
            (Activation::GeluErf, false) => tile_kernel!($k, $e, GELU_ERF, $cfg),
            (Activation::GeluTanh, false) => tile_kernel!($k, $e, GELU_TANH, $cfg),
            (Activation::GeluTanh, true) => tile_kernel!($k, $e, GELU_TANH_FOLDED, $cfg),
            (Activation::Relu, false) => tile_kernel!($k, $e, RELU, $cfg),
            _ => None,
        }
    }};
}

/// Whether a call is the tanh GELU's forward with 16-bit outputs: the one that takes
/// [`config::choose_long_rows`] and has the folded math among its candidates.
fn tanh_gelu_16(spec: &OpSpec, dt: cutile_ir::ScalarType) -> bool {
    spec.act == Activation::GeluTanh && !spec.backward && dt != cutile_ir::ScalarType::F32
}

/// The default configuration of a call.
fn default_config(
    spec: &OpSpec,
    dt: cutile_ir::ScalarType,
    target: &Target,
    rows: i64,
    cols: i64,
) -> ActConfig {
    if tanh_gelu_16(spec, dt) && spec.form == Form::Unary {
        config::choose_long_rows(target, rows, cols)
    } else {
        config::choose(target, rows, cols)
    }
}

/// Every configuration of a call the tuner may time, the default first: the family's tile and form
/// candidates, plus, for the tanh GELU's forward ops with 16-bit outputs, the default tile with the
/// folded math.
fn candidates(
    spec: &OpSpec,
    dt: cutile_ir::ScalarType,
    target: &Target,
    rows: i64,
    cols: i64,
) -> Vec<ActConfig> {
    let mut all = config::candidates(default_config(spec, dt, target, rows, cols), rows, cols);
    if tanh_gelu_16(spec, dt) {
        all.push(ActConfig {
            folded: true,
            ..all[0]
        });
    }
    all
}

fn kernel(
    spec: &OpSpec,
    dt: cutile_ir::ScalarType,
    cfg: &ActConfig,
) -> Option<cutile::dsl::Kernel> {
    let act = spec.act;
    match (spec.form, spec.backward) {
        (Form::Unary, false) => float_kernel!(dt, |E| act_kernel!(act_fwd, E, act, cfg)),
        (Form::Unary, true) => float_kernel!(dt, |E| act_kernel!(act_bwd, E, act, cfg)),
        (_, false) => float_kernel!(dt, |E| act_kernel!(gated_fwd, E, act, cfg)),
        (_, true) => float_kernel!(dt, |E| act_kernel!(gated_bwd, E, act, cfg)),
    }
    .flatten()
}

/// The launches of a call of `op` (operands as [`Form`] lists them): the default configuration, or
/// every tuning candidate's with `all_candidates`.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
    all_candidates: bool,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let spec = find(op).ok_or_else(|| OpError::UnknownOp {
        name: op.into(),
        known: OPS.iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
    })?;
    let Some(call) = Call::new(spec, operands, target)? else {
        return Ok(Vec::new());
    };
    let configs = if all_candidates {
        candidates(spec, call.dtype, target, call.rows, call.cols)
    } else {
        vec![default_config(
            spec, call.dtype, target, call.rows, call.cols,
        )]
    };
    let mut out = Vec::new();
    for c in &configs {
        out.extend(call.launch(c)?);
    }
    Ok(out)
}

/// The launches of one configuration `cfg` (what a test pinning a tile runs).
pub fn plan_config(
    op: &str,
    cfg: &ActConfig,
    operands: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let spec = find(op).ok_or_else(|| OpError::UnknownOp {
        name: op.into(),
        known: OPS.iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
    })?;
    match Call::new(spec, operands, target)? {
        Some(c) => c.launch(cfg),
        None => Ok(Vec::new()),
    }
}

/// Described operands (contiguous, no memory) of a call of `spec` whose first input is `x`: what the
/// registry and the tests plan with.
pub fn described_operands(
    spec: &OpSpec,
    dtype: cutile_ir::ScalarType,
    x: &[i64],
) -> Result<Vec<Operand>, OpError> {
    let shapes = spec.operand_shapes(x).ok_or_else(|| OpError::Shape {
        op: spec.name,
        what: "`x`'s last axis holds the two halves and must be even".into(),
        left: format!("{}", x.last().copied().unwrap_or(1)),
        right: "2·N".into(),
    })?;
    Ok(spec
        .operand_names()
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(i, (name, s))| Operand::described(name, i, dtype, s))
        .collect())
}

/// The calls the catalog compiles (`cargo xtask kernels`), the GPU runner checks and benchmarks, and the
/// examples run. Forward ops: bf16 at the benchmark shape `[16384, 8192]` (the gated ones then write
/// `[16384, 4096]`), a mid size, a ragged and a rank-3 one; f16 and f32 of the mid size and f32 ragged.
/// Backward ops: bf16 large and ragged, f32 mid, f16 rank 3.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = crate::op::CallSpec::new;
    let (large, mid, ragged, rank3) = (
        &[16384i64, 8192][..],
        &[4096i64, 2048][..],
        &[1000i64, 1026][..],
        &[3i64, 7, 66][..],
    );
    let mut calls = Vec::new();
    for o in OPS {
        let list: &[(&str, &[i64])] = if o.backward {
            &[
                ("bf16", large),
                ("bf16", ragged),
                ("f32", mid),
                ("f16", rank3),
            ]
        } else {
            &[
                ("bf16", large),
                ("bf16", mid),
                ("bf16", ragged),
                ("bf16", rank3),
                ("f16", mid),
                ("f32", mid),
                ("f32", ragged),
            ]
        };
        for (dt, x) in list {
            calls.push(c(o.name, dt, &[x], false));
        }
    }
    calls
}
