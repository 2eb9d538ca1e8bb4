//! [`FunctionBuilder`]: the insertion point, value scoping, region nesting, debug locations and hints of one
//! entry under construction. The op-specific methods live in sibling modules as further `impl` blocks.

use std::collections::HashMap;

use crate::attr::{Attribute, OptimizationHints};
use crate::ir::{Block, DebugAttr, DebugRef, Function, FunctionKind, Module, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::Type;
use crate::verify::rules::{self, Env, Frame};
use crate::verify::structure;
use crate::version::Version;

use super::error::BuildError;

/// What a region level will become when it is closed.
#[derive(Debug)]
pub(crate) enum Pending {
    Body,
    /// A block opened with [`FunctionBuilder::begin_block`] for the generic op path.
    Generic,
    For {
        lo: ValueId,
        hi: ValueId,
        step: ValueId,
        inits: Vec<ValueId>,
        unsigned_cmp: bool,
    },
    Loop {
        inits: Vec<ValueId>,
        result_types: Vec<Type>,
    },
    IfThen {
        cond: ValueId,
        result_types: Vec<Type>,
    },
    IfElse {
        cond: ValueId,
        result_types: Vec<Type>,
        then: Block,
    },
    Reduce {
        operands: Vec<ValueId>,
        dim: u32,
        identities: Vec<Attribute>,
        result_types: Vec<Type>,
    },
    Scan {
        operands: Vec<ValueId>,
        dim: u32,
        reverse: bool,
        identities: Vec<Attribute>,
        result_types: Vec<Type>,
    },
}

impl Pending {
    fn name(&self) -> &'static str {
        match self {
            Pending::Body => "the function body",
            Pending::Generic => "a block opened with begin_block",
            Pending::For { .. } => "a for body (begin_for)",
            Pending::Loop { .. } => "a loop body (begin_loop)",
            Pending::IfThen { .. } => "an if's then region (begin_if)",
            Pending::IfElse { .. } => "an if's else region (begin_else)",
            Pending::Reduce { .. } => "a reduce body (begin_reduce)",
            Pending::Scan { .. } => "a scan body (begin_scan)",
        }
    }
}

#[derive(Debug)]
struct Level {
    block: Block,
    /// Values defined at this level (arguments and op results), hidden again when it closes.
    defined: Vec<ValueId>,
    pending: Pending,
}

/// The debug scope of a function built with [`FunctionBuilder::enable_debug_info`].
#[derive(Debug, Clone)]
struct DebugScope {
    subprogram: DebugRef,
    filename: String,
}

/// Builds one entry function. Obtain it from [`ModuleBuilder::entry`](super::ModuleBuilder::entry); call
/// [`finish`](FunctionBuilder::finish) to add the function to the module (dropping it discards the function).
///
/// Ops are appended to the innermost open block. Region ops either take closures (`for_loop`,
/// `if_then_else`, `reduce`, …) or come as `begin_*` / `end_*` pairs for callers that cannot nest closures.
/// Every op is type-checked as it is created, with the verifier's rules.
#[derive(Debug)]
pub struct FunctionBuilder<'m> {
    pub(crate) module: &'m mut Module,
    pub(crate) func: Function,
    levels: Vec<Level>,
    frames: Vec<Frame>,
    visible: Vec<bool>,
    loc: DebugRef,
    debug: Option<DebugScope>,
    loc_cache: HashMap<(u64, u64), DebugRef>,
}

impl<'m> FunctionBuilder<'m> {
    pub(crate) fn new(module: &'m mut Module, name: &str, params: &[Type]) -> Self {
        let mut func = Function::new_entry(name, params.to_vec());
        let body = func.body.take().unwrap_or_default();
        let n = func.values.len();
        let args = body.args.clone();
        FunctionBuilder {
            module,
            func,
            levels: vec![Level {
                block: body,
                defined: args,
                pending: Pending::Body,
            }],
            frames: vec![Frame::entry()],
            visible: vec![true; n],
            loc: DebugRef(0),
            debug: None,
            loc_cache: HashMap::new(),
        }
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        &self.func.name
    }

    /// The parameter values, in order.
    pub fn params(&self) -> Vec<ValueId> {
        self.levels[0].block.args.clone()
    }

    /// Parameter `i`.
    pub fn param(&self, i: usize) -> Result<ValueId, BuildError> {
        self.levels[0]
            .block
            .args
            .get(i)
            .copied()
            .ok_or_else(|| BuildError::Function {
                function: self.func.name.clone(),
                message: format!(
                    "has {} parameters; parameter {i} does not exist",
                    self.func.param_types.len()
                ),
            })
    }

    /// The type of a value of this function.
    pub fn ty(&self, v: ValueId) -> Result<&Type, BuildError> {
        self.func.value_type(v).ok_or_else(|| {
            BuildError::Usage(format!(
                "value %{} does not belong to function @{}",
                v.0, self.func.name
            ))
        })
    }

    /// Whether `v` may be used at the current insertion point.
    pub fn in_scope(&self, v: ValueId) -> bool {
        self.visible.get(v.0 as usize).copied().unwrap_or(false)
    }

    /// How many regions are open around the insertion point (0 in the function body).
    pub fn depth(&self) -> usize {
        self.levels.len() - 1
    }

    /// The module being built (read-only), e.g. to look at extern declarations or globals.
    pub fn module(&self) -> &Module {
        self.module
    }

    // ---- optimization hints ----

    /// Set an entry hint for `arch` (`"sm_90"`, … or `"default"`), checked like tileiras checks it.
    pub fn hint(
        &mut self,
        arch: &str,
        key: &str,
        value: Attribute,
    ) -> Result<&mut Self, BuildError> {
        let mut h = match &self.func.kind {
            FunctionKind::Entry { hints } => hints.clone(),
            _ => OptimizationHints::default(),
        };
        h.set(arch, key, value);
        rules::check_hints(
            &h,
            &["num_cta_in_cga", "num_worker_warps_per_cta", "occupancy"],
            None,
        )
        .map_err(|message| BuildError::Function {
            function: self.func.name.clone(),
            message,
        })?;
        if let FunctionKind::Entry { hints } = &mut self.func.kind {
            *hints = h;
        }
        Ok(self)
    }

    /// `num_worker_warps_per_cta`: a power of two ≤ 32 (only 4 or 8 before bytecode 13.5).
    pub fn num_worker_warps_per_cta(
        &mut self,
        arch: &str,
        n: i32,
    ) -> Result<&mut Self, BuildError> {
        self.hint(arch, "num_worker_warps_per_cta", Attribute::i32(n))
    }

    /// `occupancy`: 1..=32 CTAs per SM to aim for.
    pub fn occupancy(&mut self, arch: &str, n: i32) -> Result<&mut Self, BuildError> {
        self.hint(arch, "occupancy", Attribute::i32(n))
    }

    /// `num_cta_in_cga`: a power of two ≤ 16 (must be 1 on sm_8x).
    pub fn num_cta_in_cga(&mut self, arch: &str, n: i32) -> Result<&mut Self, BuildError> {
        self.hint(arch, "num_cta_in_cga", Attribute::i32(n))
    }

    // ---- debug locations ----

    /// Give the function a debug scope (file, compile unit, subprogram) and a location at `line`. Ops then
    /// carry the location set with [`set_loc`](Self::set_loc).
    pub fn enable_debug_info(&mut self, file: &str, dir: &str, line: u64) -> &mut Self {
        let f = self.module.add_debug_attr(DebugAttr::File {
            name: file.to_string(),
            dir: dir.to_string(),
        });
        let cu = self
            .module
            .add_debug_attr(DebugAttr::CompileUnit { file: f });
        let sp = self.module.add_debug_attr(DebugAttr::Subprogram {
            file: f,
            line,
            name: self.func.name.clone(),
            linkage_name: self.func.name.clone(),
            compile_unit: cu,
            scope_line: line,
            flags: 0,
        });
        self.debug = Some(DebugScope {
            subprogram: sp,
            filename: file.to_string(),
        });
        self.loc_cache.clear();
        self.func.loc = self.loc_ref(line, 0).unwrap_or_default();
        self
    }

    fn loc_ref(&mut self, line: u64, col: u64) -> Option<DebugRef> {
        let d = self.debug.clone()?;
        if let Some(r) = self.loc_cache.get(&(line, col)) {
            return Some(*r);
        }
        let r = self.module.add_debug_attr(DebugAttr::Loc {
            scope: d.subprogram,
            filename: d.filename,
            line,
            col,
        });
        self.loc_cache.insert((line, col), r);
        Some(r)
    }

    /// Attach `line:col` to the ops created from now on. Needs [`enable_debug_info`](Self::enable_debug_info).
    pub fn set_loc(&mut self, line: u64, col: u64) -> Result<&mut Self, BuildError> {
        self.loc = self.loc_ref(line, col).ok_or_else(|| {
            BuildError::Usage(format!(
                "@{}: set_loc needs a debug scope; call enable_debug_info first",
                self.func.name
            ))
        })?;
        Ok(self)
    }

    /// Ops created from now on carry no location.
    pub fn clear_loc(&mut self) -> &mut Self {
        self.loc = DebugRef(0);
        self
    }

    // ---- core: values, levels, emitting ----

    fn alloc(&mut self, t: Type) -> ValueId {
        let v = self.func.new_value(t);
        self.visible.push(true);
        if let Some(l) = self.levels.last_mut() {
            l.defined.push(v);
        }
        v
    }

    fn current(&self) -> &Level {
        // levels always holds the body level while the builder exists.
        &self.levels[self.levels.len() - 1]
    }

    /// The op the current block ends with, if that op is a terminator.
    pub fn terminated_by(&self) -> Option<Opcode> {
        self.current()
            .block
            .ops
            .last()
            .map(|o| o.opcode)
            .filter(|o| o.is_terminator())
    }

    /// Check, allocate results for and append one complete op (regions included) to the current block.
    pub(crate) fn emit(
        &mut self,
        mut op: Operation,
        result_types: Vec<Type>,
    ) -> Result<Vec<ValueId>, BuildError> {
        let code = op.opcode;
        if let Some(t) = self.terminated_by() {
            return Err(BuildError::Usage(format!(
                "{}: the current block already ends with {}; ops after a terminator are unreachable",
                code.mnemonic(),
                t.mnemonic()
            )));
        }
        for v in op.all_operands() {
            match self.visible.get(v.0 as usize) {
                None => {
                    return Err(BuildError::Scope {
                        op: code.mnemonic(),
                        value: v.0,
                        reason: "does not belong to this function",
                    });
                }
                Some(false) => {
                    return Err(BuildError::Scope {
                        op: code.mnemonic(),
                        value: v.0,
                        reason: "is out of scope here (it was defined in a region that has ended)",
                    });
                }
                Some(true) => {}
            }
        }
        let mark = self.func.values.len();
        op.results = result_types
            .into_iter()
            .map(|t| self.func.new_value(t))
            .collect();
        let checked = structure::check_structure(&op, Version::LATEST).and_then(|()| {
            rules::check_op(
                Env {
                    module: self.module,
                    values: &self.func.values,
                    frames: &self.frames,
                    strict_hints: true,
                },
                &op,
            )
        });
        if let Err(m) = checked {
            self.func.values.truncate(mark);
            return Err(BuildError::op(code, m));
        }
        for &r in &op.results {
            self.visible.push(true);
            let l = self.levels.len() - 1;
            self.levels[l].defined.push(r);
        }
        op.loc = self.loc;
        let results = op.results.clone();
        let l = self.levels.len() - 1;
        self.levels[l].block.ops.push(op);
        Ok(results)
    }

    /// Emit an op with exactly one result.
    pub(crate) fn emit1(&mut self, op: Operation, ty: Type) -> Result<ValueId, BuildError> {
        let code = op.opcode;
        self.emit(op, vec![ty])?
            .first()
            .copied()
            .ok_or_else(|| BuildError::op(code, "produced no result"))
    }

    /// Open a nested block with arguments of `arg_types`; ops go there until it is closed.
    pub(crate) fn open(
        &mut self,
        arg_types: Vec<Type>,
        frame: Frame,
        pending: Pending,
    ) -> Vec<ValueId> {
        self.levels.push(Level {
            block: Block::default(),
            defined: vec![],
            pending,
        });
        self.frames.push(frame);
        let args: Vec<ValueId> = arg_types.into_iter().map(|t| self.alloc(t)).collect();
        let l = self.levels.len() - 1;
        self.levels[l].block.args = args.clone();
        args
    }

    /// Close the innermost block. If it does not end in a terminator, `implied` (with `values`) is appended;
    /// if it does, `values` must be empty.
    pub(crate) fn close(
        &mut self,
        implied: Option<Opcode>,
        values: &[ValueId],
    ) -> Result<(Block, Pending), BuildError> {
        if self.levels.len() <= 1 {
            return Err(BuildError::Usage(
                "there is no open region to close (only the function body is open)".into(),
            ));
        }
        let ended = match (self.terminated_by(), implied) {
            (Some(t), _) if !values.is_empty() => Err(BuildError::Usage(format!(
                "the region already ends with {}; return no values from a region that terminates itself",
                t.mnemonic()
            ))),
            (Some(_), _) => Ok(()),
            (None, Some(term)) => {
                let mut op = Operation::new(term);
                op.operands[0] = values.to_vec();
                self.emit(op, vec![]).map(|_| ())
            }
            (None, None) => Err(BuildError::Usage(
                "the region does not end with a terminator (yield, continue, break or return)"
                    .into(),
            )),
        };
        // A failed close still pops the region, so the builder stays usable at the outer level.
        let closed = self.pop_level();
        ended?;
        closed
    }

    /// Drop the innermost open region (after an error inside it).
    pub(crate) fn discard(&mut self) {
        if self.levels.len() > 1 {
            let _ = self.pop_level();
        }
    }

    /// Drop open regions until only `depth` remain (after an error in a region closure).
    pub(crate) fn unwind_to(&mut self, depth: usize) {
        while self.depth() > depth {
            self.discard();
        }
    }

    fn pop_level(&mut self) -> Result<(Block, Pending), BuildError> {
        self.frames.pop();
        let level = self
            .levels
            .pop()
            .ok_or_else(|| BuildError::Usage("no open region".into()))?;
        for v in &level.defined {
            if let Some(x) = self.visible.get_mut(v.0 as usize) {
                *x = false;
            }
        }
        Ok((level.block, level.pending))
    }

    /// The pending kind of the innermost open region (for `end_*` checks).
    pub(crate) fn pending_name(&self) -> &'static str {
        self.current().pending.name()
    }

    pub(crate) fn pending(&self) -> &Pending {
        &self.current().pending
    }

    /// Open a block for the generic op path ([`OpBuilder::region`](super::OpBuilder::region)). Ops go into
    /// it until [`end_block`](Self::end_block); the block must end with its own terminator. `parent` and
    /// `parent_results` describe the op the block will belong to, so terminators inside can be checked.
    pub fn begin_block(
        &mut self,
        parent: Opcode,
        parent_results: &[Type],
        arg_types: &[Type],
    ) -> Vec<ValueId> {
        let iter = match parent {
            Opcode::For => arg_types.iter().skip(1).cloned().collect(),
            Opcode::Loop => arg_types.to_vec(),
            Opcode::Reduce | Opcode::Scan => arg_types.iter().step_by(2).cloned().collect(),
            _ => vec![],
        };
        let frame = Frame {
            opcode: parent,
            results: parent_results.to_vec(),
            iter,
        };
        self.open(arg_types.to_vec(), frame, Pending::Generic)
    }

    /// Close a block opened with [`begin_block`](Self::begin_block) and return it (for
    /// [`OpBuilder::region`](super::OpBuilder::region)).
    pub fn end_block(&mut self) -> Result<Block, BuildError> {
        if !matches!(self.pending(), Pending::Generic) {
            return Err(BuildError::Usage(format!(
                "end_block: the innermost open region is {}, not a block from begin_block",
                self.pending_name()
            )));
        }
        Ok(self.close(None, &[])?.0)
    }

    /// Finish the function: append `return` if the body does not end with a terminator, and add the function
    /// to the module.
    pub fn finish(mut self) -> Result<(), BuildError> {
        if self.levels.len() != 1 {
            return Err(BuildError::Function {
                function: self.func.name.clone(),
                message: format!(
                    "{} region(s) are still open (innermost: {}); close them before finish",
                    self.levels.len() - 1,
                    self.pending_name()
                ),
            });
        }
        if self.terminated_by().is_none() {
            self.emit(Operation::new(Opcode::Return), vec![])?;
        }
        let level = self
            .levels
            .pop()
            .ok_or_else(|| BuildError::Usage("no body".into()))?;
        self.func.body = Some(level.block);
        let f = std::mem::replace(&mut self.func, Function::new_entry("", vec![]));
        self.module.functions.push(f);
        Ok(())
    }
}
