//! The tracing context: while a kernel's generated builder runs, every DSL operation appends Tile IR to the
//! innermost open block of a thread-local `Tracer` and returns a typed handle to the new value.
//!
//! Errors found while tracing (shape arithmetic, powers of two, unsupported element types) do not unwind:
//! the first one is recorded with the kernel source location (`#[track_caller]`), tracing continues with
//! well-typed placeholder values, and the specialization fails with that error at the end.
//!
//! Writes through each `&mut Tensor` are ordered by a hidden per-tensor token. Region helpers
//! (`Tracer::finish_for`, `Tracer::finish_if`) thread the tokens a region changed through the region as
//! extra loop-carried values or `if` results, so ordering survives control flow.

use std::cell::RefCell;
use std::panic::Location;

use std::collections::HashMap;

use cutile_ir::{
    Block, DebugAttr, DebugRef, Function, OpAttr, Opcode, Operation, ScalarType, Type, ValueId,
};

/// An error found while tracing a kernel, with the kernel-source location that caused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub message: String,
    pub file: &'static str,
    pub line: u32,
    pub column: u32,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (at {}:{}:{})",
            self.message, self.file, self.line, self.column
        )
    }
}

/// One op under construction: slots are filled by schema name.
pub(crate) struct Op {
    pub(crate) op: Operation,
    pub(crate) result_types: Vec<Type>,
}

impl Op {
    pub(crate) fn new(opcode: Opcode) -> Op {
        Op {
            op: Operation::new(opcode),
            result_types: vec![],
        }
    }
    /// Set the attribute slot `name` (a wrong name is a bug in this crate, caught by the op tests).
    pub(crate) fn attr(mut self, name: &str, a: OpAttr) -> Op {
        match self.op.opcode.schema().attr_index(name) {
            Some(i) => self.op.attrs[i] = Some(a),
            None => debug_assert!(
                false,
                "{} has no attribute {name}",
                self.op.opcode.mnemonic()
            ),
        }
        self
    }
    pub(crate) fn operand(self, name: &str, v: ValueId) -> Op {
        self.operands(name, &[v])
    }
    pub(crate) fn operands(mut self, name: &str, vs: &[ValueId]) -> Op {
        match self.op.opcode.schema().operand_index(name) {
            Some(i) => self.op.operands[i].extend_from_slice(vs),
            None => debug_assert!(false, "{} has no operand {name}", self.op.opcode.mnemonic()),
        }
        self
    }
    pub(crate) fn result(mut self, ty: Type) -> Op {
        self.result_types.push(ty);
        self
    }
    pub(crate) fn results(mut self, tys: impl IntoIterator<Item = Type>) -> Op {
        self.result_types.extend(tys);
        self
    }
    pub(crate) fn region(mut self, b: Block) -> Op {
        self.op.regions.push(b);
        self
    }
}

/// The state of one kernel trace.
pub(crate) struct Tracer {
    pub(crate) func: Function,
    /// Open blocks; `stack[0]` is the entry body.
    stack: Vec<Block>,
    pub(crate) kernel: String,
    error: Option<TraceError>,
    /// The token every unordered access uses (`make_token` at entry).
    pub(crate) entry_token: ValueId,
    /// The current ordering token of each `&mut Tensor` parameter.
    pub(crate) out_tokens: Vec<ValueId>,
    /// Integer type of tensor shapes and strides in this specialization.
    pub(crate) index_ty: ScalarType,
    /// Kernel-source location of the DSL call being traced (set by [`at`]).
    cur_loc: Option<&'static Location<'static>>,
    /// Debug attributes (DIFile, DICompileUnit, DISubprogram, then one DILoc per distinct location).
    debug: Vec<DebugAttr>,
    subprogram: DebugRef,
    locs: HashMap<(&'static str, u32, u32), DebugRef>,
    /// Extern declarations of the foreign functions called so far (one per symbol).
    externs: Vec<Function>,
}

thread_local! {
    static TRACER: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

/// Run `f` on the active tracer.
///
/// # Panics
/// If no kernel is being traced on this thread: DSL operations are only meaningful inside a kernel's
/// builder, which the `#[cutile::module]` macro generates. Calling them elsewhere is a programming error.
pub(crate) fn with<R>(f: impl FnOnce(&mut Tracer) -> R) -> R {
    TRACER.with(|t| {
        let mut b = t.borrow_mut();
        let tr = b
            .as_mut()
            .expect("cutile::core operations can only run inside a #[cutile::module] kernel while it is specialized");
        f(tr)
    })
}

/// Whether a trace is active on this thread.
pub fn is_tracing() -> bool {
    TRACER.with(|t| t.try_borrow().map(|b| b.is_some()).unwrap_or(true))
}

/// Removes the tracer when dropped, so a panic inside user code does not leave a stale trace behind.
pub(crate) struct TraceGuard(());

impl Drop for TraceGuard {
    fn drop(&mut self) {
        TRACER.with(|t| {
            if let Ok(mut b) = t.try_borrow_mut() {
                *b = None;
            }
        });
    }
}

/// Start tracing entry `name` with the given parameter types. Returns the guard and the parameter values.
pub(crate) fn begin(
    name: &str,
    param_types: Vec<Type>,
    index_ty: ScalarType,
    source: (&'static str, u32),
) -> Result<(TraceGuard, Vec<ValueId>), String> {
    TRACER.with(|t| {
        let mut b = t
            .try_borrow_mut()
            .map_err(|_| "a kernel trace is already running on this thread".to_string())?;
        if b.is_some() {
            return Err(format!(
                "cannot specialize kernel `{name}` while another kernel is being traced on this thread"
            ));
        }
        let mut func = Function::new_entry(name, param_types);
        let mut body = func.body.take().unwrap_or_default();
        let params = body.args.clone();
        let tok = func.new_value(Type::Token);
        let mut op = Operation::new(Opcode::MakeToken);
        op.results.push(tok);
        body.ops.push(op);
        let (file, line) = source;
        let (dir, base) = match file.rfind('/') {
            Some(i) => (&file[..i], &file[i + 1..]),
            None => ("", file),
        };
        let debug = vec![
            DebugAttr::File {
                name: base.to_string(),
                dir: dir.to_string(),
            },
            DebugAttr::CompileUnit { file: DebugRef(1) },
            DebugAttr::Subprogram {
                file: DebugRef(1),
                line: line as u64,
                name: name.to_string(),
                linkage_name: name.to_string(),
                compile_unit: DebugRef(2),
                scope_line: line as u64,
                flags: 0,
            },
        ];
        let mut tr = Tracer {
            func,
            stack: vec![body],
            kernel: name.to_string(),
            error: None,
            entry_token: tok,
            out_tokens: vec![],
            index_ty,
            cur_loc: None,
            debug,
            subprogram: DebugRef(3),
            locs: HashMap::new(),
            externs: vec![],
        };
        tr.func.loc = tr.loc_ref(file, line, 0);
        *b = Some(tr);
        Ok((TraceGuard(()), params))
    })
}

/// Finish the trace: close the body with `return` and hand back the function, its debug attributes and the
/// extern declarations of the foreign functions it calls, or the first error.
pub(crate) fn finish(
    _guard: TraceGuard,
) -> Result<(Function, Vec<DebugAttr>, Vec<Function>), TraceError> {
    TRACER.with(|t| {
        let tr = t.borrow_mut().take();
        let Some(mut tr) = tr else {
            return Err(TraceError {
                message: "internal: the kernel trace disappeared".into(),
                file: file!(),
                line: line!(),
                column: 0,
            });
        };
        if let Some(e) = tr.error.take() {
            return Err(e);
        }
        if tr.stack.len() != 1 {
            return Err(TraceError {
                message: "internal: unbalanced regions at the end of the kernel".into(),
                file: file!(),
                line: line!(),
                column: 0,
            });
        }
        let mut body = tr.stack.pop().unwrap_or_default();
        body.ops.push(Operation::new(Opcode::Return));
        tr.func.body = Some(body);
        Ok((tr.func, tr.debug, tr.externs))
    })
}

/// The directory of this crate's sources, to tell kernel locations from the DSL's own.
fn own_src_dir() -> &'static str {
    let f = file!();
    f.strip_suffix("trace.rs").unwrap_or(f)
}

/// Restores the previous source location when dropped.
pub(crate) struct LocGuard(Option<Option<&'static Location<'static>>>);

impl Drop for LocGuard {
    fn drop(&mut self) {
        if let Some(prev) = self.0 {
            TRACER.with(|t| {
                if let Ok(mut b) = t.try_borrow_mut()
                    && let Some(tr) = b.as_mut()
                {
                    tr.cur_loc = prev;
                }
            });
        }
    }
}

/// Attribute the ops emitted until the guard drops to `loc`, unless `loc` is inside this crate (an internal
/// call), in which case the kernel location already in effect stays.
pub(crate) fn at(loc: &'static Location<'static>) -> LocGuard {
    if loc.file().starts_with(own_src_dir()) {
        return LocGuard(None);
    }
    TRACER.with(|t| match t.try_borrow_mut() {
        Ok(mut b) => match b.as_mut() {
            Some(tr) => LocGuard(Some(tr.cur_loc.replace(loc))),
            None => LocGuard(None),
        },
        Err(_) => LocGuard(None),
    })
}

impl Tracer {
    /// Append an op to the innermost block and return its result values.
    pub(crate) fn push(&mut self, op: Op) -> Vec<ValueId> {
        let Op {
            mut op,
            result_types,
        } = op;
        op.results = result_types
            .into_iter()
            .map(|t| self.func.new_value(t))
            .collect();
        if let Some(l) = self.cur_loc {
            op.loc = self.loc_ref(l.file(), l.line(), l.column());
        }
        let res = op.results.clone();
        if let Some(b) = self.stack.last_mut() {
            b.ops.push(op);
        }
        res
    }
    /// Append a single-result op and return the result.
    pub(crate) fn push1(&mut self, op: Op) -> ValueId {
        let r = self.push(op);
        r.first().copied().unwrap_or(ValueId(u32::MAX))
    }
    /// The `DILoc` for a source position (interned).
    fn loc_ref(&mut self, file: &'static str, line: u32, col: u32) -> DebugRef {
        if let Some(r) = self.locs.get(&(file, line, col)) {
            return *r;
        }
        self.debug.push(DebugAttr::Loc {
            scope: self.subprogram,
            filename: file.to_string(),
            line: line as u64,
            col: col as u64,
        });
        let r = DebugRef(self.debug.len() as u64);
        self.locs.insert((file, line, col), r);
        r
    }

    /// Record the extern declaration `f`; a symbol declared twice must have one signature.
    pub(crate) fn declare_extern(&mut self, f: Function) -> Result<(), String> {
        match self.externs.iter().find(|d| d.name == f.name) {
            None => {
                self.externs.push(f);
                Ok(())
            }
            Some(d)
                if d.param_types == f.param_types
                    && d.result_types == f.result_types
                    && d.arg_attrs == f.arg_attrs
                    && d.kind == f.kind =>
            {
                Ok(())
            }
            Some(d) => Err(format!(
                "foreign function `{}` is called with two signatures in one kernel ({} and {}); one module \
                 can declare a symbol only once, so call it with one set of operand types and constant \
                 parameter kinds",
                f.name,
                sig_text(d),
                sig_text(&f)
            )),
        }
    }
    /// Record an error at the kernel location being traced.
    pub(crate) fn fail_here(&mut self, message: String) {
        match self.cur_loc {
            Some(l) => self.fail(l, message),
            None => self.fail(Location::caller(), message),
        }
    }
    /// One token after every pending access (outputs' tokens and the foreign-call token).
    pub(crate) fn join_all_tokens(&mut self) -> ValueId {
        let mut toks: Vec<ValueId> = vec![];
        for &t in &self.out_tokens {
            if !toks.contains(&t) {
                toks.push(t);
            }
        }
        match toks.as_slice() {
            [] => self.entry_token,
            [one] => *one,
            _ => {
                let mut op = Operation::new(Opcode::JoinTokens);
                op.operands[0] = toks;
                self.push(Op {
                    op,
                    result_types: vec![Type::Token],
                })[0]
            }
        }
    }
    /// Order every later access (on any output, and every later foreign call) after `tok`.
    pub(crate) fn order_all_after(&mut self, tok: ValueId) {
        for t in &mut self.out_tokens {
            *t = tok;
        }
    }

    /// The type of a value.
    /// The op that defined `v`, searched among the ops recorded so far in the open blocks (the entry
    /// prologue included); `None` for block arguments and for values of closed regions.
    pub(crate) fn defining_op(&self, v: ValueId) -> Option<&Operation> {
        self.stack
            .iter()
            .rev()
            .find_map(|b| b.ops.iter().rev().find(|op| op.results.contains(&v)))
    }
    pub(crate) fn ty(&self, v: ValueId) -> Type {
        self.func.value_type(v).cloned().unwrap_or(Type::Token)
    }
    /// Record an error at `loc` (the first one wins).
    pub(crate) fn fail(&mut self, loc: &'static Location<'static>, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(TraceError {
                message: format!("kernel `{}`: {}", self.kernel, message.into()),
                file: loc.file(),
                line: loc.line(),
                column: loc.column(),
            });
        }
    }
    /// Open a nested block with arguments of the given types.
    pub(crate) fn open_block(&mut self, arg_types: &[Type]) -> Vec<ValueId> {
        let args: Vec<ValueId> = arg_types
            .iter()
            .map(|t| self.func.new_value(t.clone()))
            .collect();
        self.stack.push(Block {
            args: args.clone(),
            ops: vec![],
        });
        args
    }
    /// Close the innermost nested block.
    pub(crate) fn close_block(&mut self) -> Block {
        if self.stack.len() > 1 {
            self.stack.pop().unwrap_or_default()
        } else {
            Block::default()
        }
    }

    /// Start a `for` body: block arguments are the induction variable, `carried` values and one placeholder
    /// token per `&mut` tensor. Returns (induction var, carried args, state to finish with).
    pub(crate) fn open_for(
        &mut self,
        iv_ty: Type,
        carried_types: &[Type],
    ) -> (ValueId, Vec<ValueId>, RegionState) {
        let mut tys = vec![iv_ty];
        tys.extend_from_slice(carried_types);
        let args = self.open_block(&tys);
        let outer = self.out_tokens.clone();
        let placeholders: Vec<ValueId> = outer
            .iter()
            .map(|_| self.func.new_value(Type::Token))
            .collect();
        self.out_tokens = placeholders.clone();
        (
            args[0],
            args[1..].to_vec(),
            RegionState {
                outer_tokens: outer,
                placeholders,
            },
        )
    }

    /// Close a loop body opened with [`open_for`](Self::open_for) (or [`open_loop`](Self::open_loop)):
    /// returns the block (with token arguments appended for the tokens the body changed, and unchanged
    /// placeholders replaced by the outer tokens), the extra init values and the extra yielded values.
    pub(crate) fn close_loop_body(
        &mut self,
        st: &RegionState,
    ) -> (Block, Vec<ValueId>, Vec<ValueId>, Vec<usize>) {
        let finals = std::mem::replace(&mut self.out_tokens, st.outer_tokens.clone());
        let mut block = self.close_block();
        let mut extra_init = vec![];
        let mut extra_yield = vec![];
        let mut changed = vec![];
        for (i, (&ph, &fin)) in st.placeholders.iter().zip(&finals).enumerate() {
            if fin == ph {
                substitute(&mut block, ph, st.outer_tokens[i]);
            } else {
                block.args.push(ph);
                extra_init.push(st.outer_tokens[i]);
                extra_yield.push(fin);
                changed.push(i);
            }
        }
        (block, extra_init, extra_yield, changed)
    }

    /// Start a loop body whose block arguments are `carried_types` (no induction variable).
    pub(crate) fn open_loop(&mut self, carried_types: &[Type]) -> (Vec<ValueId>, RegionState) {
        let args = self.open_block(carried_types);
        let outer = self.out_tokens.clone();
        let placeholders: Vec<ValueId> = outer
            .iter()
            .map(|_| self.func.new_value(Type::Token))
            .collect();
        self.out_tokens = placeholders.clone();
        (
            args,
            RegionState {
                outer_tokens: outer,
                placeholders,
            },
        )
    }
}

/// `(params) -> (results)` of a declaration, for messages.
fn sig_text(f: &Function) -> String {
    format!(
        "({}) -> ({})",
        cutile_ir::verify::text::types_text(&f.param_types),
        cutile_ir::verify::text::types_text(&f.result_types)
    )
}

/// What a loop region needs to remember to thread the hidden tokens.
pub(crate) struct RegionState {
    pub(crate) outer_tokens: Vec<ValueId>,
    pub(crate) placeholders: Vec<ValueId>,
}

/// Replace every use of `from` by `to` in `b` and the regions nested in it.
pub(crate) fn substitute(b: &mut Block, from: ValueId, to: ValueId) {
    for op in &mut b.ops {
        for g in &mut op.operands {
            for v in g.iter_mut() {
                if *v == from {
                    *v = to;
                }
            }
        }
        for r in &mut op.regions {
            substitute(r, from, to);
        }
    }
}

/// Record an error at the caller's location on the active tracer.
#[track_caller]
pub(crate) fn fail(message: impl Into<String>) {
    let loc = Location::caller();
    let m = message.into();
    with(|t| t.fail(loc, m));
}
