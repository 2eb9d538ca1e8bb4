//! Device control flow. The `#[cutile::module]` macro rewrites `for`, `while` and `if` in kernels into
//! calls of these functions, passing the body as a closure and the variables it assigns as carried values.
//! They are public (and usable by hand) but not meant to be the usual way to write kernels.
//!
//! - `for i in a..b` / `for i in (a..b).step_by(s)` → [`for_range`]: always a Tile IR `for`.
//! - `while c { … }` → [`while_loop`]: a Tile IR `loop` that breaks when the condition is false.
//! - `if c { … } else { … }` → [`branch`]: a Tile IR `if` when `c` is a device `Scalar<bool>`; when `c` is
//!   a host `bool` (e.g. a const generic), only the taken branch is traced (compile-time specialization).

use cutile_ir::{Opcode, ScalarType, Type, ValueId};

use super::elem::HostNum;
use super::value::{Carry, Scalar, flat, flat_types};
use crate::trace::{self, Op};

/// A loop bound: a device `i32` scalar or a host `i32`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a device loop bound",
    label = "loop bounds are `Scalar<i32>` values or `i32` numbers"
)]
pub trait LoopBound {
    #[doc(hidden)]
    fn bound_value(self) -> ValueId;
}
impl LoopBound for Scalar<i32> {
    fn bound_value(self) -> ValueId {
        self.v
    }
}
impl LoopBound for i32 {
    #[track_caller]
    fn bound_value(self) -> ValueId {
        let _at = crate::trace::at(::std::panic::Location::caller());
        super::arith::splat_const(
            ScalarType::I32,
            &Type::scalar_tile(ScalarType::I32),
            HostNum::Int(self as i64),
        )
    }
}

/// `for i in lo..hi` (step `step`, which must be positive) with loop-carried values `init`.
#[track_caller]
pub fn for_range<C: Carry>(
    lo: impl LoopBound,
    hi: impl LoopBound,
    step: impl LoopBound,
    init: C,
    body: impl FnOnce(Scalar<i32>, C) -> C,
) -> C {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let (lo, hi, step) = (lo.bound_value(), hi.bound_value(), step.bound_value());
    let init_vals = flat(&init);
    let types = flat_types::<C>();
    let (iv, args, st) = trace::with(|t| t.open_for(Type::scalar_tile(ScalarType::I32), &types));
    let out = body(Scalar::from_value(iv), C::rebuild(&mut args.into_iter()));
    let mut out_vals = flat(&out);
    let results = trace::with(|t| {
        let (mut block, extra_init, extra_yield, changed) = t.close_loop_body(&st);
        out_vals.extend(extra_yield);
        block.ops.push({
            let mut op = cutile_ir::Operation::new(Opcode::Continue);
            op.operands[0] = out_vals;
            op
        });
        let mut all_init = init_vals;
        all_init.extend(extra_init);
        let mut res_types = types.clone();
        res_types.extend(changed.iter().map(|_| Type::Token));
        let r = t.push(
            Op::new(Opcode::For)
                .operand("lowerBound", lo)
                .operand("upperBound", hi)
                .operand("step", step)
                .operands("initValues", &all_init)
                .results(res_types)
                .region(block),
        );
        for (k, &slot) in changed.iter().enumerate() {
            t.out_tokens[slot] = r[types.len() + k];
        }
        r
    });
    C::rebuild(&mut results.into_iter())
}

/// `while cond(vars) { vars = body(vars) }` as a Tile IR `loop`.
#[track_caller]
pub fn while_loop<C: Carry>(
    init: C,
    cond: impl FnOnce(C) -> Scalar<bool>,
    body: impl FnOnce(C) -> C,
) -> C {
    let _at = crate::trace::at(::std::panic::Location::caller());
    let init_vals = flat(&init);
    let types = flat_types::<C>();
    let (args, st) = trace::with(|t| t.open_loop(&types));
    // Condition: `if c { } else { break vars }`, written with the carried values as block args.
    let c = cond(C::rebuild(&mut args.clone().into_iter()));
    let ph = st.placeholders.clone();
    trace::with(|t| {
        t.open_block(&[]);
        let then_b = {
            t.push(Op::new(Opcode::Yield));
            t.close_block()
        };
        t.open_block(&[]);
        let mut brk = args.clone();
        brk.extend(ph.iter().copied());
        t.push(Op::new(Opcode::Break).operands("operands", &brk));
        let else_b = t.close_block();
        t.push(
            Op::new(Opcode::If)
                .operand("condition", c.v)
                .region(then_b)
                .region(else_b),
        );
    });
    let out = body(C::rebuild(&mut args.into_iter()));
    let mut out_vals = flat(&out);
    let results = trace::with(|t| {
        let (mut block, extra_init, extra_yield, changed) = t.close_loop_body(&st);
        // The break above yields every placeholder token; drop those of unchanged slots (they were
        // substituted by the outer tokens, which the loop does not carry).
        fix_break_tokens(&mut block, types.len(), &st.placeholders, &changed);
        out_vals.extend(extra_yield);
        block.ops.push({
            let mut op = cutile_ir::Operation::new(Opcode::Continue);
            op.operands[0] = out_vals;
            op
        });
        let mut all_init = init_vals;
        all_init.extend(extra_init);
        let mut res_types = types.clone();
        res_types.extend(changed.iter().map(|_| Type::Token));
        let r = t.push(
            Op::new(Opcode::Loop)
                .operands("initValues", &all_init)
                .results(res_types)
                .region(block),
        );
        for (k, &slot) in changed.iter().enumerate() {
            t.out_tokens[slot] = r[types.len() + k];
        }
        r
    });
    C::rebuild(&mut results.into_iter())
}

/// Keep, in the condition's `break`, the carried user values and only the tokens of `changed` slots.
fn fix_break_tokens(
    block: &mut cutile_ir::Block,
    n_user: usize,
    placeholders: &[ValueId],
    changed: &[usize],
) {
    for op in &mut block.ops {
        if op.opcode == Opcode::If {
            for r in &mut op.regions {
                for inner in &mut r.ops {
                    if inner.opcode == Opcode::Break
                        && inner.operands[0].len() == n_user + placeholders.len()
                    {
                        let mut keep: Vec<ValueId> = inner.operands[0][..n_user].to_vec();
                        keep.extend(changed.iter().map(|&s| placeholders[s]));
                        inner.operands[0] = keep;
                    }
                }
            }
        }
    }
}

/// A branch condition: a device `Scalar<bool>` (Tile IR `if`) or a host `bool` (trace-time choice).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the condition of an `if` in a kernel",
    label = "expected a `bool` or a device `Scalar<bool>`",
    note = "for a device `if`, everything the branches assign or produce must be a tile, scalar or token"
)]
pub trait Condition<R, C> {
    #[doc(hidden)]
    fn run_branch(self, carried: C, f: impl FnMut(bool, C) -> (R, C)) -> (R, C);
}

impl<R, C> Condition<R, C> for bool {
    fn run_branch(self, carried: C, mut f: impl FnMut(bool, C) -> (R, C)) -> (R, C) {
        f(self, carried)
    }
}

impl<R: Carry, C: Carry> Condition<R, C> for Scalar<bool> {
    #[track_caller]
    fn run_branch(self, carried: C, mut f: impl FnMut(bool, C) -> (R, C)) -> (R, C) {
        let _at = crate::trace::at(::std::panic::Location::caller());
        let outer = trace::with(|t| {
            t.open_block(&[]);
            t.out_tokens.clone()
        });
        let keep = flat(&carried);
        let (r1, c1) = f(true, carried);
        let (then_tokens, then_b) = trace::with(|t| {
            let tk = std::mem::replace(&mut t.out_tokens, outer.clone());
            (tk, t.close_block())
        });
        trace::with(|t| t.open_block(&[]));
        let (r2, c2) = f(false, C::rebuild(&mut keep.into_iter()));
        let (else_tokens, else_b) = trace::with(|t| {
            let tk = std::mem::replace(&mut t.out_tokens, outer.clone());
            (tk, t.close_block())
        });
        let mut v1 = flat(&(r1, c1));
        let mut v2 = flat(&(r2, c2));
        let mut types = flat_types::<(R, C)>();
        let n = types.len();
        let changed: Vec<usize> = (0..outer.len())
            .filter(|&i| then_tokens[i] != outer[i] || else_tokens[i] != outer[i])
            .collect();
        for &i in &changed {
            v1.push(then_tokens[i]);
            v2.push(else_tokens[i]);
            types.push(Type::Token);
        }
        let cond = self.v;
        let res = trace::with(|t| {
            let mut then_b = then_b;
            let mut else_b = else_b;
            then_b.ops.push(yield_op(v1));
            else_b.ops.push(yield_op(v2));
            let r = t.push(
                Op::new(Opcode::If)
                    .operand("condition", cond)
                    .results(types)
                    .region(then_b)
                    .region(else_b),
            );
            for (k, &slot) in changed.iter().enumerate() {
                t.out_tokens[slot] = r[n + k];
            }
            r
        });
        <(R, C)>::rebuild(&mut res.into_iter())
    }
}

fn yield_op(vals: Vec<ValueId>) -> cutile_ir::Operation {
    let mut op = cutile_ir::Operation::new(Opcode::Yield);
    op.operands[0] = vals;
    op
}

/// `if cond { … } else { … }`: `f(true, vars)` is the then-branch, `f(false, vars)` the else-branch; each
/// returns the `if`'s value and the carried variables.
#[track_caller]
pub fn branch<K: Condition<R, C>, R, C>(
    cond: K,
    carried: C,
    f: impl FnMut(bool, C) -> (R, C),
) -> (R, C) {
    let _at = crate::trace::at(::std::panic::Location::caller());
    cond.run_branch(carried, f)
}
