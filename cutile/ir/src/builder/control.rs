//! Region ops and terminators: `for`, `loop`, `if`, `reduce`, `scan`, the explicit terminators, and
//! `preview$call`.
//!
//! Each region op comes in two forms: a closure form (`for_loop`, `loop_`, `if_then_else`, `if_then`,
//! `reduce`, `scan`) and a `begin_*` / `end_*` pair for callers that trace code without nesting closures.
//! A body returns the values its implied terminator carries (`continue` for loops, `yield` for if, reduce
//! and scan). A body that ends with its own terminator (an explicit `break_`, `continue_` or `return_`)
//! returns no values and nothing is appended.

use crate::attr::Attribute;
use crate::ir::{OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::Type;
use crate::verify::rules::{Frame, reduce_arg_type};
use crate::verify::text::type_text;

use super::arith::set_attr;
use super::error::BuildError;
use super::function::{FunctionBuilder, Pending};

/// The values a `for` body sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForFrame {
    /// The induction variable (same type as the bounds).
    pub iv: ValueId,
    /// The carried values of this iteration.
    pub carried: Vec<ValueId>,
}

/// The values a `reduce` or `scan` body sees: the running (left) and incoming (right) element of each operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CombineFrame {
    pub lhs: Vec<ValueId>,
    pub rhs: Vec<ValueId>,
}

fn wrong_end(f: &FunctionBuilder<'_>, what: &str) -> BuildError {
    BuildError::Usage(format!(
        "{what}: the innermost open region is {}",
        f.pending_name()
    ))
}

impl<'m> FunctionBuilder<'m> {
    fn types_of(&self, vs: &[ValueId]) -> Result<Vec<Type>, BuildError> {
        vs.iter().map(|v| self.ty(*v).cloned()).collect()
    }

    /// Run a region body; on error drop whatever it left open so the builder stays usable.
    fn run_body<T>(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<T, BuildError>,
    ) -> Result<T, BuildError> {
        let depth = self.depth();
        let r = body(self);
        if r.is_err() {
            self.unwind_to(depth.saturating_sub(1));
        }
        r
    }

    // ---- for ----

    /// Open a `for` from `lo` to `hi` (exclusive) by `step` (rank-0 integer tiles of one type), carrying
    /// `inits`. Close it with [`Self::end_for`].
    pub fn begin_for(
        &mut self,
        lo: ValueId,
        hi: ValueId,
        step: ValueId,
        inits: &[ValueId],
    ) -> Result<ForFrame, BuildError> {
        self.begin_for_ext(lo, hi, step, inits, false)
    }

    /// [`Self::begin_for`] with `unsigned_cmp`: compare the bounds as unsigned integers (13.2+).
    pub fn begin_for_ext(
        &mut self,
        lo: ValueId,
        hi: ValueId,
        step: ValueId,
        inits: &[ValueId],
        unsigned_cmp: bool,
    ) -> Result<ForFrame, BuildError> {
        let iv_ty = self.ty(lo)?.clone();
        let carried_tys = self.types_of(inits)?;
        let mut args = vec![iv_ty];
        args.extend(carried_tys.iter().cloned());
        let frame = Frame {
            opcode: Opcode::For,
            results: carried_tys.clone(),
            iter: carried_tys,
        };
        let pending = Pending::For {
            lo,
            hi,
            step,
            inits: inits.to_vec(),
            unsigned_cmp,
        };
        let vals = self.open(args, frame, pending);
        Ok(ForFrame {
            iv: vals[0],
            carried: vals[1..].to_vec(),
        })
    }

    /// Close the innermost `for` (appending `continue next` unless the body already terminated); returns the
    /// loop's results (the carried values after the last iteration).
    pub fn end_for(&mut self, next: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        if !matches!(self.pending(), Pending::For { .. }) {
            return Err(wrong_end(self, "end_for"));
        }
        let (block, pending) = self.close(Some(Opcode::Continue), next)?;
        let Pending::For {
            lo,
            hi,
            step,
            inits,
            unsigned_cmp,
        } = pending
        else {
            return Err(BuildError::Usage(
                "end_for: internal region mismatch".into(),
            ));
        };
        let result_types = self.types_of(&inits)?;
        let mut op = Operation::new(Opcode::For);
        op.operands = vec![vec![lo], vec![hi], vec![step], inits];
        if unsigned_cmp {
            set_attr(&mut op, "unsignedCmp", OpAttr::Unit)?;
        }
        op.regions.push(block);
        self.emit(op, result_types)
    }

    /// `for iv in lo..hi step step` carrying `inits`; `body(b, iv, carried)` returns the next carried values.
    pub fn for_loop(
        &mut self,
        lo: ValueId,
        hi: ValueId,
        step: ValueId,
        inits: &[ValueId],
        body: impl FnOnce(&mut Self, ValueId, &[ValueId]) -> Result<Vec<ValueId>, BuildError>,
    ) -> Result<Vec<ValueId>, BuildError> {
        let fr = self.begin_for(lo, hi, step, inits)?;
        let next = self.run_body(|b| body(b, fr.iv, &fr.carried))?;
        self.end_for(&next)
    }

    // ---- loop ----

    /// Open an unbounded `loop` carrying `inits` and producing `result_types` (through `break_`). Returns the
    /// carried values. Close it with [`Self::end_loop`].
    pub fn begin_loop(
        &mut self,
        inits: &[ValueId],
        result_types: &[Type],
    ) -> Result<Vec<ValueId>, BuildError> {
        let carried_tys = self.types_of(inits)?;
        let frame = Frame {
            opcode: Opcode::Loop,
            results: result_types.to_vec(),
            iter: carried_tys.clone(),
        };
        let pending = Pending::Loop {
            inits: inits.to_vec(),
            result_types: result_types.to_vec(),
        };
        Ok(self.open(carried_tys, frame, pending))
    }

    /// Close the innermost `loop` (appending `continue next` unless the body already terminated).
    pub fn end_loop(&mut self, next: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        if !matches!(self.pending(), Pending::Loop { .. }) {
            return Err(wrong_end(self, "end_loop"));
        }
        let (block, pending) = self.close(Some(Opcode::Continue), next)?;
        let Pending::Loop {
            inits,
            result_types,
        } = pending
        else {
            return Err(BuildError::Usage(
                "end_loop: internal region mismatch".into(),
            ));
        };
        let mut op = Operation::new(Opcode::Loop);
        op.operands[0] = inits;
        op.regions.push(block);
        self.emit(op, result_types)
    }

    /// An unbounded loop: `body(b, carried)` returns the next carried values; leave it with
    /// [`Self::break_`] (typically inside an `if`), which provides the loop's results.
    pub fn loop_(
        &mut self,
        inits: &[ValueId],
        result_types: &[Type],
        body: impl FnOnce(&mut Self, &[ValueId]) -> Result<Vec<ValueId>, BuildError>,
    ) -> Result<Vec<ValueId>, BuildError> {
        let carried = self.begin_loop(inits, result_types)?;
        let next = self.run_body(|b| body(b, &carried))?;
        self.end_loop(&next)
    }

    // ---- if ----

    /// Open the then region of an `if` on `cond` (a `tile<i1>`) producing `result_types`.
    pub fn begin_if(&mut self, cond: ValueId, result_types: &[Type]) -> Result<(), BuildError> {
        self.ty(cond)?;
        let frame = Frame {
            opcode: Opcode::If,
            results: result_types.to_vec(),
            iter: vec![],
        };
        self.open(
            vec![],
            frame,
            Pending::IfThen {
                cond,
                result_types: result_types.to_vec(),
            },
        );
        Ok(())
    }

    /// Close the then region (yielding `then_values` unless it terminated itself) and open the else region.
    pub fn begin_else(&mut self, then_values: &[ValueId]) -> Result<(), BuildError> {
        if !matches!(self.pending(), Pending::IfThen { .. }) {
            return Err(wrong_end(self, "begin_else"));
        }
        let (then, pending) = self.close(Some(Opcode::Yield), then_values)?;
        let Pending::IfThen { cond, result_types } = pending else {
            return Err(BuildError::Usage(
                "begin_else: internal region mismatch".into(),
            ));
        };
        let frame = Frame {
            opcode: Opcode::If,
            results: result_types.clone(),
            iter: vec![],
        };
        self.open(
            vec![],
            frame,
            Pending::IfElse {
                cond,
                result_types,
                then,
            },
        );
        Ok(())
    }

    /// Close the `if`: the else region yields `else_values` (unless it terminated itself). If no else region
    /// was opened, the then region is closed with `else_values` and an empty else (which needs no results).
    pub fn end_if(&mut self, else_values: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        if matches!(self.pending(), Pending::IfThen { .. }) {
            self.begin_else(else_values)?;
            return self.end_if(&[]);
        }
        if !matches!(self.pending(), Pending::IfElse { .. }) {
            return Err(wrong_end(self, "end_if"));
        }
        let (els, pending) = self.close(Some(Opcode::Yield), else_values)?;
        let Pending::IfElse {
            cond,
            result_types,
            then,
        } = pending
        else {
            return Err(BuildError::Usage("end_if: internal region mismatch".into()));
        };
        let mut op = Operation::new(Opcode::If);
        op.operands[0] = vec![cond];
        op.regions = vec![then, els];
        self.emit(op, result_types)
    }

    /// `if cond { then } else { els }`; each branch returns the values it yields.
    pub fn if_then_else(
        &mut self,
        cond: ValueId,
        result_types: &[Type],
        then: impl FnOnce(&mut Self) -> Result<Vec<ValueId>, BuildError>,
        els: impl FnOnce(&mut Self) -> Result<Vec<ValueId>, BuildError>,
    ) -> Result<Vec<ValueId>, BuildError> {
        self.begin_if(cond, result_types)?;
        let t = self.run_body(then)?;
        self.begin_else(&t)?;
        let e = self.run_body(els)?;
        self.end_if(&e)
    }

    /// `if cond { then }` without results.
    pub fn if_then(
        &mut self,
        cond: ValueId,
        then: impl FnOnce(&mut Self) -> Result<(), BuildError>,
    ) -> Result<(), BuildError> {
        self.if_then_else(cond, &[], |b| then(b).map(|()| vec![]), |_| Ok(vec![]))
            .map(|_| ())
    }

    // ---- reduce and scan ----

    fn combine_types(&self, operands: &[ValueId], op: Opcode) -> Result<Vec<Type>, BuildError> {
        let tys = self.types_of(operands)?;
        if let Some(t) = tys.iter().find(|t| !t.is_tile()) {
            return Err(BuildError::op(
                op,
                format!("operands must be tiles, got {}", type_text(t)),
            ));
        }
        Ok(tys)
    }

    fn open_combine(
        &mut self,
        op: Opcode,
        tys: &[Type],
        results: Vec<Type>,
        pending: Pending,
    ) -> CombineFrame {
        let elems: Vec<Type> = tys.iter().map(reduce_arg_type).collect();
        let args: Vec<Type> = elems.iter().flat_map(|t| [t.clone(), t.clone()]).collect();
        let frame = Frame {
            opcode: op,
            results,
            iter: elems,
        };
        let vals = self.open(args, frame, pending);
        CombineFrame {
            lhs: vals.iter().step_by(2).copied().collect(),
            rhs: vals.iter().skip(1).step_by(2).copied().collect(),
        }
    }

    /// Open a `reduce` of `operands` along `dim` with one identity per operand (see
    /// [`scalar_attr`](super::scalar_attr)). Results drop dimension `dim`.
    pub fn begin_reduce(
        &mut self,
        operands: &[ValueId],
        dim: u32,
        identities: &[Attribute],
    ) -> Result<CombineFrame, BuildError> {
        let tys = self.combine_types(operands, Opcode::Reduce)?;
        let results: Vec<Type> = tys
            .iter()
            .map(|t| {
                let mut sh = t.tile_shape().unwrap_or(&[]).to_vec();
                if (dim as usize) < sh.len() {
                    sh.remove(dim as usize);
                }
                t.with_shape(&sh).unwrap_or_else(|| t.clone())
            })
            .collect();
        let pending = Pending::Reduce {
            operands: operands.to_vec(),
            dim,
            identities: identities.to_vec(),
            result_types: results.clone(),
        };
        Ok(self.open_combine(Opcode::Reduce, &tys, results, pending))
    }

    /// Close the innermost `reduce`, yielding the combined elements.
    pub fn end_reduce(&mut self, combined: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        if !matches!(self.pending(), Pending::Reduce { .. }) {
            return Err(wrong_end(self, "end_reduce"));
        }
        let (block, pending) = self.close(Some(Opcode::Yield), combined)?;
        let Pending::Reduce {
            operands,
            dim,
            identities,
            result_types,
        } = pending
        else {
            return Err(BuildError::Usage(
                "end_reduce: internal region mismatch".into(),
            ));
        };
        let mut op = Operation::new(Opcode::Reduce);
        op.operands[0] = operands;
        set_attr(&mut op, "dim", OpAttr::Int(dim as u64))?;
        set_attr(&mut op, "identities", OpAttr::TaggedArray(identities))?;
        op.regions.push(block);
        self.emit(op, result_types)
    }

    /// Reduce `operands` along `dim`; `body(b, lhs, rhs)` combines one element of each operand (rank-0 tiles,
    /// only pure ops) and returns the combined elements.
    pub fn reduce(
        &mut self,
        operands: &[ValueId],
        dim: u32,
        identities: &[Attribute],
        body: impl FnOnce(&mut Self, &[ValueId], &[ValueId]) -> Result<Vec<ValueId>, BuildError>,
    ) -> Result<Vec<ValueId>, BuildError> {
        let fr = self.begin_reduce(operands, dim, identities)?;
        let out = self.run_body(|b| body(b, &fr.lhs, &fr.rhs))?;
        self.end_reduce(&out)
    }

    /// Open a `scan` (inclusive prefix combination) of `operands` along `dim`; results keep the operand types.
    pub fn begin_scan(
        &mut self,
        operands: &[ValueId],
        dim: u32,
        reverse: bool,
        identities: &[Attribute],
    ) -> Result<CombineFrame, BuildError> {
        let tys = self.combine_types(operands, Opcode::Scan)?;
        let pending = Pending::Scan {
            operands: operands.to_vec(),
            dim,
            reverse,
            identities: identities.to_vec(),
            result_types: tys.clone(),
        };
        Ok(self.open_combine(Opcode::Scan, &tys, tys.clone(), pending))
    }

    /// Close the innermost `scan`.
    pub fn end_scan(&mut self, combined: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        if !matches!(self.pending(), Pending::Scan { .. }) {
            return Err(wrong_end(self, "end_scan"));
        }
        let (block, pending) = self.close(Some(Opcode::Yield), combined)?;
        let Pending::Scan {
            operands,
            dim,
            reverse,
            identities,
            result_types,
        } = pending
        else {
            return Err(BuildError::Usage(
                "end_scan: internal region mismatch".into(),
            ));
        };
        let mut op = Operation::new(Opcode::Scan);
        op.operands[0] = operands;
        set_attr(&mut op, "dim", OpAttr::Int(dim as u64))?;
        set_attr(&mut op, "reverse", OpAttr::Bool(reverse))?;
        set_attr(&mut op, "identities", OpAttr::TaggedArray(identities))?;
        op.regions.push(block);
        self.emit(op, result_types)
    }

    /// Scan `operands` along `dim` (from the end if `reverse`); `body` combines as for [`Self::reduce`].
    pub fn scan(
        &mut self,
        operands: &[ValueId],
        dim: u32,
        reverse: bool,
        identities: &[Attribute],
        body: impl FnOnce(&mut Self, &[ValueId], &[ValueId]) -> Result<Vec<ValueId>, BuildError>,
    ) -> Result<Vec<ValueId>, BuildError> {
        let fr = self.begin_scan(operands, dim, reverse, identities)?;
        let out = self.run_body(|b| body(b, &fr.lhs, &fr.rhs))?;
        self.end_scan(&out)
    }

    // ---- explicit terminators ----

    fn terminator(&mut self, code: Opcode, values: &[ValueId]) -> Result<(), BuildError> {
        let mut op = Operation::new(code);
        op.operands[0] = values.to_vec();
        self.emit(op, vec![]).map(|_| ())
    }

    /// `yield`: end an if/reduce/scan region explicitly.
    pub fn yield_(&mut self, values: &[ValueId]) -> Result<(), BuildError> {
        self.terminator(Opcode::Yield, values)
    }
    /// `continue`: go to the next iteration of the enclosing for/loop (through ifs) with `values` carried.
    pub fn continue_(&mut self, values: &[ValueId]) -> Result<(), BuildError> {
        self.terminator(Opcode::Continue, values)
    }
    /// `break`: leave the enclosing loop (through ifs) with `values` as its results.
    pub fn break_(&mut self, values: &[ValueId]) -> Result<(), BuildError> {
        self.terminator(Opcode::Break, values)
    }
    /// `return` from the kernel (possibly from inside ifs).
    pub fn return_(&mut self) -> Result<(), BuildError> {
        self.terminator(Opcode::Return, &[])
    }

    // ---- foreign calls ----

    /// (preview, 13.5) Call the extern declaration `callee` (declare it with
    /// [`ModuleBuilder::extern_decl`](super::ModuleBuilder::extern_decl)); result types come from the
    /// declaration. `const_args` are symbolic attributes, one per constant parameter.
    pub fn preview_call(
        &mut self,
        callee: &str,
        const_args: Vec<Attribute>,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, BuildError> {
        let decl = self.module.function(callee).ok_or_else(|| {
            BuildError::op(
                Opcode::PreviewCall,
                format!(
                    "no function named @{callee}; declare it with ModuleBuilder::extern_decl first"
                ),
            )
        })?;
        let result_types = decl.result_types.clone();
        let mut op = Operation::new(Opcode::PreviewCall);
        set_attr(&mut op, "callee", OpAttr::Str(callee.to_string()))?;
        set_attr(&mut op, "const_args", OpAttr::TaggedArray(const_args))?;
        op.operands[0] = args.to_vec();
        self.emit(op, result_types)
    }
}
