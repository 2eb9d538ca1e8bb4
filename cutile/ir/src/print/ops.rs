//! Per-op custom syntax, matching tileirdisasm 13.5 (found by disassembling bytecode with every op and
//! attribute combination), and a generic fallback form for ops whose syntax was not pinned down.
//!
//! Spacing follows MLIR's generated printers, including their double spaces: an optional directive that
//! prints nothing still leaves its separating space (`addf %a, %b  : tile<…>` when the rounding mode is the
//! default). Printing never fails: an unknown value id prints as `%<invalid N>`, a missing type as
//! `<<unknown>>`.

use std::fmt::Write;

use super::attr::{dense_shape, dense_text, enum_text, escape_string, hints_text, symbol};
use crate::attr::{Attribute, EnumValue};
use crate::ir::{Block, Function, FunctionKind, Module, OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::Type;

/// Prints one function, owning its SSA names.
pub(crate) struct FnPrinter<'a> {
    func: &'a Function,
    names: Vec<Option<String>>,
    next_result: u32,
    next_arg: u32,
    out: String,
}

/// Which block terminator a region leaves implicit when it carries no operands.
#[derive(Clone, Copy, PartialEq)]
enum Elide {
    None,
    Op(Opcode),
}

impl<'a> FnPrinter<'a> {
    pub(crate) fn new(_module: &'a Module, func: &'a Function) -> Self {
        FnPrinter {
            func,
            names: vec![None; func.values.len()],
            next_result: 0,
            next_arg: 0,
            out: String::new(),
        }
    }

    // ---- names and types -------------------------------------------------------------------------------

    fn set_name(&mut self, v: ValueId, name: String) {
        let i = v.0 as usize;
        if i >= self.names.len() {
            self.names.resize(i + 1, None);
        }
        self.names[i] = Some(name);
    }

    fn new_arg(&mut self, v: ValueId) -> String {
        let n = format!("%arg{}", self.next_arg);
        self.next_arg += 1;
        self.set_name(v, n.clone());
        n
    }

    /// Names the results of `op`; returns the `%r = ` / `%r:k = ` prefix (empty for no results).
    fn name_results(&mut self, op: &Operation) -> String {
        let n = self.next_result;
        match op.results.len() {
            0 => String::new(),
            1 => {
                self.next_result += 1;
                self.set_name(op.results[0], format!("%{n}"));
                format!("%{n} = ")
            }
            k => {
                self.next_result += 1;
                for (i, &r) in op.results.iter().enumerate() {
                    self.set_name(r, format!("%{n}#{i}"));
                }
                format!("%{n}:{k} = ")
            }
        }
    }

    fn v(&self, v: ValueId) -> String {
        match self.names.get(v.0 as usize) {
            Some(Some(n)) => n.clone(),
            _ => format!("%<invalid {}>", v.0),
        }
    }

    fn vs(&self, vs: &[ValueId]) -> String {
        vs.iter().map(|&v| self.v(v)).collect::<Vec<_>>().join(", ")
    }

    fn t(&self, v: ValueId) -> String {
        match self.func.value_type(v) {
            Some(t) => t.to_string(),
            None => "<<unknown>>".into(),
        }
    }

    fn ts(&self, vs: &[ValueId]) -> String {
        vs.iter().map(|&v| self.t(v)).collect::<Vec<_>>().join(", ")
    }

    /// Types of index operands: one type if all are equal, else each (`, T` per index), as load/store print.
    fn index_types(&self, idx: &[ValueId]) -> String {
        let Some(&first) = idx.first() else {
            return String::new();
        };
        let t0 = self.func.value_type(first);
        if idx.iter().all(|&i| self.func.value_type(i) == t0) {
            format!(", {}", self.t(first))
        } else {
            idx.iter().map(|&i| format!(", {}", self.t(i))).collect()
        }
    }

    // ---- the function ----------------------------------------------------------------------------------

    pub(crate) fn function(mut self) -> String {
        let f = self.func;
        let params: Vec<ValueId> = match &f.body {
            Some(b) => b.args.clone(),
            None => vec![],
        };
        // Parameters without a body (extern declarations) still print as %argN.
        let mut sig = String::from("(");
        for (i, ty) in f.param_types.iter().enumerate() {
            if i > 0 {
                sig.push_str(", ");
            }
            let name = match params.get(i) {
                Some(&v) => self.new_arg(v),
                None => {
                    let n = format!("%arg{}", self.next_arg);
                    self.next_arg += 1;
                    n
                }
            };
            let _ = write!(sig, "{name}: {ty}");
            if let Some(a) = f.arg_attrs.get(i) {
                sig.push_str(&arg_attr_text(a));
            }
        }
        sig.push(')');
        match f.result_types.len() {
            0 => {}
            1 => {
                let _ = write!(sig, " -> {}", f.result_types[0]);
            }
            _ => {
                let rs: Vec<String> = f.result_types.iter().map(Type::to_string).collect();
                let _ = write!(sig, " -> ({})", rs.join(", "));
            }
        }
        let name = symbol(&f.name);
        match &f.kind {
            FunctionKind::Entry { hints } => {
                let _ = write!(self.out, "entry {name}{sig}");
                if !hints.by_arch.is_empty() {
                    let _ = write!(self.out, " optimization_hints={}", hints_text(hints));
                }
                self.out.push_str(" {\n");
                if let Some(b) = &f.body {
                    self.block_ops(b, 2, Elide::None);
                }
                self.out.push_str("}\n");
            }
            FunctionKind::ExternDecl { const_params } => {
                let _ = writeln!(
                    self.out,
                    "preview$func extern {name}{}{sig} ",
                    const_list(const_params)
                );
            }
            FunctionKind::ExternImpl {
                sym_name,
                implements,
                function_type,
                ..
            } => {
                let _ = writeln!(
                    self.out,
                    "preview$extern_impl {} implements {} : {function_type}",
                    symbol(sym_name),
                    symbol(implements)
                );
            }
        }
        self.out
    }

    // ---- blocks and regions ----------------------------------------------------------------------------

    fn block_ops(&mut self, b: &Block, indent: usize, elide: Elide) {
        let n = b.ops.len();
        for (i, op) in b.ops.iter().enumerate() {
            let last = i + 1 == n;
            if last && elide == Elide::Op(op.opcode) && op.all_operands().next().is_none() {
                continue;
            }
            self.op(op, indent);
        }
    }

    /// `{`, the block's ops one level deeper, then `}` at `indent`.
    fn region_body(&mut self, b: &Block, indent: usize, elide: Elide) {
        self.out.push_str("{\n");
        self.block_ops(b, indent + 2, elide);
        self.pad(indent);
        self.out.push('}');
    }

    fn pad(&mut self, indent: usize) {
        for _ in 0..indent {
            self.out.push(' ');
        }
    }

    // ---- attribute accessors ---------------------------------------------------------------------------

    fn enum_attr(op: &Operation, name: &str) -> Option<EnumValue> {
        match op.attr(name) {
            Some(OpAttr::Enum(e)) => Some(*e),
            _ => None,
        }
    }

    fn enum_str(op: &Operation, name: &str) -> &'static str {
        Self::enum_attr(op, name).map_or("<<missing>>", enum_text)
    }

    fn unit(op: &Operation, name: &str) -> bool {
        matches!(op.attr(name), Some(OpAttr::Unit | OpAttr::Bool(true)))
    }

    fn int(op: &Operation, name: &str) -> Option<u64> {
        match op.attr(name) {
            Some(OpAttr::Int(v)) => Some(*v),
            _ => None,
        }
    }

    fn one(op: &Operation, name: &str) -> Option<ValueId> {
        op.operand_group(name).first().copied()
    }

    /// ` rounding<m>` unless `m` is the op's default mode (empty then: the caller's space stays).
    fn rounding(op: &Operation, name: &str, default: u8) -> String {
        match Self::enum_attr(op, name) {
            Some(e) if e.value != default => format!("rounding<{}>", e.name()),
            _ => String::new(),
        }
    }

    fn overflow(op: &Operation) -> String {
        match Self::enum_attr(op, "overflow") {
            Some(e) if e.value != 0 => format!(" overflow<{}>", enum_text(e)),
            _ => String::new(),
        }
    }

    fn flag(op: &Operation, name: &str) -> String {
        if Self::unit(op, name) {
            format!(" {name}")
        } else {
            String::new()
        }
    }

    /// `inbounds = [true, false]`, printed only when some entry is true.
    fn inbounds(op: &Operation) -> Option<String> {
        match op.attr("inbounds") {
            Some(OpAttr::BoolArray(v)) if v.iter().any(|&b| b) => {
                let items: Vec<&str> = v
                    .iter()
                    .map(|&b| if b { "true" } else { "false" })
                    .collect();
                Some(format!("inbounds = [{}]", items.join(", ")))
            }
            _ => None,
        }
    }

    /// `weak`, or `relaxed device` when a scope is present.
    fn memory(op: &Operation) -> String {
        let mut s = Self::enum_str(op, "memory_ordering_semantics").to_string();
        if let Some(e) = Self::enum_attr(op, "memory_scope") {
            s.push(' ');
            s.push_str(e.name());
        }
        s
    }

    fn hints(op: &Operation) -> Option<String> {
        match op.attr("optimization_hints") {
            Some(OpAttr::Hints(h)) => Some(hints_text(h)),
            _ => None,
        }
    }

    fn res_types(&self, op: &Operation) -> String {
        self.ts(&op.results)
    }

    fn res_t(&self, op: &Operation, i: usize) -> String {
        match op.results.get(i) {
            Some(&r) => self.t(r),
            None => "<<missing result>>".into(),
        }
    }

    fn opnd(&self, op: &Operation, name: &str) -> String {
        match Self::one(op, name) {
            Some(v) => self.v(v),
            None => "<<missing operand>>".into(),
        }
    }

    fn opnd_t(&self, op: &Operation, name: &str) -> String {
        match Self::one(op, name) {
            Some(v) => self.t(v),
            None => "<<missing operand>>".into(),
        }
    }

    // ---- ops ------------------------------------------------------------------------------------------

    fn op(&mut self, op: &Operation, indent: usize) {
        use Opcode::*;
        // Operands are named before results are, so printing the result prefix first is safe.
        let prefix = self.name_results(op);
        self.pad(indent);
        self.out.push_str(&prefix);
        let mn = op.opcode.mnemonic();
        let o = |s: &Self, n: &str| s.opnd(op, n);
        let ot = |s: &Self, n: &str| s.opnd_t(op, n);
        let line: String = match op.opcode {
            // Unary math with no attributes.
            AbsF | AbsI | Ceil | Cos | CosH | Floor | Log | Log2 | NegF | Sin | SinH | Tan => {
                format!("{mn} {} : {}", o(self, "source"), self.res_t(op, 0))
            }
            Exp2 | Rsqrt => format!(
                "{mn} {}{} : {}",
                o(self, "source"),
                Self::flag(op, "flush_to_zero"),
                self.res_t(op, 0)
            ),
            // Default rounding `full` prints nothing.
            Exp | TanH => format!(
                "{mn} {} {} : {}",
                o(self, "source"),
                Self::rounding(op, "rounding_mode", 5),
                self.res_t(op, 0)
            ),
            Sqrt => format!(
                "{mn} {} {}{} : {}",
                o(self, "source"),
                Self::rounding(op, "rounding_mode", 0),
                Self::flag(op, "flush_to_zero"),
                self.res_t(op, 0)
            ),
            NegI => format!(
                "{mn} {}{} : {}",
                o(self, "source"),
                Self::overflow(op),
                self.res_t(op, 0)
            ),
            AddF | SubF | MulF | DivF => format!(
                "{mn} {}, {} {}{} : {}",
                o(self, "lhs"),
                o(self, "rhs"),
                Self::rounding(op, "rounding_mode", 0),
                Self::flag(op, "flush_to_zero"),
                self.res_t(op, 0)
            ),
            Fma => format!(
                "{mn} {}, {}, {} {}{} : {}",
                o(self, "lhs"),
                o(self, "rhs"),
                o(self, "acc"),
                Self::rounding(op, "rounding_mode", 0),
                Self::flag(op, "flush_to_zero"),
                self.res_t(op, 0)
            ),
            AddI | SubI | MulI | ShLI => format!(
                "{mn} {}, {}{} : {}",
                o(self, "lhs"),
                o(self, "rhs"),
                Self::overflow(op),
                self.res_t(op, 0)
            ),
            AndI | OrI | XOrI | RemF => format!(
                "{mn} {}, {} : {}",
                o(self, "lhs"),
                o(self, "rhs"),
                self.res_t(op, 0)
            ),
            MulhiI | Atan2 => format!(
                "{mn} {}, {} : {}",
                o(self, "x"),
                o(self, "y"),
                self.res_t(op, 0)
            ),
            FPowF => format!(
                "{mn} {}, {} : {}",
                o(self, "source"),
                o(self, "exponent"),
                self.res_t(op, 0)
            ),
            FPowI => format!(
                "{mn} {}, {} : {}, {}",
                o(self, "source"),
                o(self, "exponent"),
                self.res_t(op, 0),
                ot(self, "exponent")
            ),
            // Default rounding of divi is `zero`.
            DivI => {
                let r = Self::rounding(op, "rounding", 1);
                format!(
                    "{mn} {}, {} {}{} : {}",
                    o(self, "lhs"),
                    o(self, "rhs"),
                    Self::enum_str(op, "signedness"),
                    if r.is_empty() { r } else { format!(" {r}") },
                    self.res_t(op, 0)
                )
            }
            RemI | MaxI | MinI | ShRI => format!(
                "{mn} {}, {} {} : {}",
                o(self, "lhs"),
                o(self, "rhs"),
                Self::enum_str(op, "signedness"),
                self.res_t(op, 0)
            ),
            MaxF | MinF => format!(
                "{mn} {}, {}{}{} : {}",
                o(self, "lhs"),
                o(self, "rhs"),
                Self::flag(op, "flush_to_zero"),
                Self::flag(op, "propagate_nan"),
                self.res_t(op, 0)
            ),
            CmpF => format!(
                "{mn} {} {} {}, {} : {} -> {}",
                Self::enum_str(op, "comparison_predicate"),
                Self::enum_str(op, "comparison_ordering"),
                o(self, "lhs"),
                o(self, "rhs"),
                ot(self, "lhs"),
                self.res_t(op, 0)
            ),
            CmpI => format!(
                "{mn} {} {}, {}, {} : {} -> {}",
                Self::enum_str(op, "comparison_predicate"),
                o(self, "lhs"),
                o(self, "rhs"),
                Self::enum_str(op, "signedness"),
                ot(self, "lhs"),
                self.res_t(op, 0)
            ),
            Select => format!(
                "{mn} {}, {}, {} : {}, {}",
                o(self, "cond"),
                o(self, "val_if_true"),
                o(self, "val_if_false"),
                ot(self, "cond"),
                self.res_t(op, 0)
            ),
            // Conversions.
            FToF => format!(
                "{mn} {} {} : {} -> {}",
                o(self, "from_"),
                Self::rounding(op, "rounding_mode", 0),
                ot(self, "from_"),
                self.res_t(op, 0)
            ),
            FToI => format!(
                "{mn} {} {} {}{} : {} -> {}",
                o(self, "from_"),
                Self::enum_str(op, "signedness"),
                Self::rounding(op, "rounding_mode", 6),
                Self::flag(op, "saturating"),
                ot(self, "from_"),
                self.res_t(op, 0)
            ),
            IToF => format!(
                "{mn} {} {} {} : {} -> {}",
                o(self, "from_"),
                Self::enum_str(op, "signedness"),
                Self::rounding(op, "rounding_mode", 0),
                ot(self, "from_"),
                self.res_t(op, 0)
            ),
            ExtI => format!(
                "{mn} {} {} : {} -> {}",
                o(self, "from_"),
                Self::enum_str(op, "signedness"),
                ot(self, "from_"),
                self.res_t(op, 0)
            ),
            TruncI => format!(
                "{mn} {}{} : {} -> {}",
                o(self, "from_"),
                Self::overflow(op),
                ot(self, "from_"),
                self.res_t(op, 0)
            ),
            Bitcast | IntToPtr | PtrToInt | PtrToPtr | Reshape | Broadcast | Pack | Unpack => {
                format!(
                    "{mn} {} : {} -> {}",
                    o(self, "source"),
                    ot(self, "source"),
                    self.res_t(op, 0)
                )
            }
            // Shapes and values.
            Iota | MakeToken => format!("{mn} : {}", self.res_t(op, 0)),
            Constant => self.constant(op),
            Permute => {
                let perm = match op.attr("permutation") {
                    Some(OpAttr::I32Array(p)) => {
                        p.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
                    }
                    _ => String::new(),
                };
                format!(
                    "{mn} {} [{perm}] : {} -> {}",
                    o(self, "source"),
                    ot(self, "source"),
                    self.res_t(op, 0)
                )
            }
            Cat => format!(
                "{mn} {}, {} dim = {} : {}, {} -> {}",
                o(self, "lhs"),
                o(self, "rhs"),
                Self::int(op, "dim").unwrap_or(0),
                ot(self, "lhs"),
                ot(self, "rhs"),
                self.res_t(op, 0)
            ),
            Extract => format!(
                "{mn} {}[{}] : {} -> {}",
                o(self, "source"),
                self.vs(op.operand_group("indices")),
                ot(self, "source"),
                self.res_t(op, 0)
            ),
            Insert => format!(
                "{mn} {}, {}[{}] : {}, {}",
                o(self, "source"),
                o(self, "destination"),
                self.vs(op.operand_group("indices")),
                ot(self, "source"),
                ot(self, "destination")
            ),
            MmaF => format!(
                "{mn} {}, {}, {}{} : {}, {}, {}",
                o(self, "lhs"),
                o(self, "rhs"),
                o(self, "acc"),
                Self::flag(op, "fast_acc"),
                ot(self, "lhs"),
                ot(self, "rhs"),
                ot(self, "acc")
            ),
            MmaI => format!(
                "{mn} {}, {}, {} {} {} : {}, {}, {}",
                o(self, "lhs"),
                o(self, "rhs"),
                o(self, "acc"),
                Self::enum_str(op, "signedness_lhs"),
                Self::enum_str(op, "signedness_rhs"),
                ot(self, "lhs"),
                ot(self, "rhs"),
                ot(self, "acc")
            ),
            MmaFScaled => {
                let names = ["lhs", "rhs", "acc", "lhs_scale", "rhs_scale"];
                let vs: Vec<String> = names.iter().map(|n| o(self, n)).collect();
                let ts: Vec<String> = names.iter().map(|n| ot(self, n)).collect();
                format!("{mn} {} : {}", vs.join(", "), ts.join(", "))
            }
            GetTileBlockId | GetNumTileBlocks => format!("{mn} : {}", self.res_t(op, 0)),
            GetIndexSpaceShape | GetTensorShape => format!(
                "{mn} {} : {} -> {}",
                o(self, "src"),
                ot(self, "src"),
                self.res_t(op, 0)
            ),
            GetGlobal => {
                let name = match op.attr("name") {
                    Some(OpAttr::Str(s)) => symbol(s),
                    _ => "@<<missing>>".into(),
                };
                format!("{mn} {name} : {}", self.res_t(op, 0))
            }
            Alloca => format!(
                "{mn} num_elem = {}, alignment = {}{} : {}",
                Self::int(op, "num_elem").unwrap_or(0),
                Self::int(op, "alignment").unwrap_or(0),
                if Self::unit(op, "global_") {
                    " global"
                } else {
                    ""
                },
                self.res_t(op, 0)
            ),
            Assume => {
                let pred = match op.attr("predicate") {
                    Some(OpAttr::Tagged(a)) => a.to_string(),
                    _ => "<<missing>>".into(),
                };
                format!("{mn} {pred}, {} : {}", o(self, "value"), ot(self, "value"))
            }
            Assert => {
                let msg = match op.attr("message") {
                    Some(OpAttr::Str(s)) => escape_string(s),
                    _ => "\"\"".into(),
                };
                format!(
                    "{mn} {}, {msg} : {}",
                    o(self, "condition"),
                    ot(self, "condition")
                )
            }
            JoinTokens => format!(
                "{mn} {} : {}",
                self.vs(op.operand_group("tokens")),
                self.res_t(op, 0)
            ),
            Offset => format!(
                "{mn} {}, {} : {}, {} -> {}",
                o(self, "ptr"),
                o(self, "offset"),
                ot(self, "ptr"),
                ot(self, "offset"),
                self.res_t(op, 0)
            ),
            // Views.
            MakeTensorView => self.make_tensor_view(op),
            MakePartitionView | MakeStridedView | MakeGatherScatterView => {
                format!("{mn} {} : {}", o(self, "tensor_view"), self.res_t(op, 0))
            }
            LoadViewTko | StoreViewTko => self.view_access(op),
            AtomicRedViewTko => self.atomic_red_view(op),
            MultimemLoadReduceViewTko | MultimemReduceViewTko | MultimemStoreViewTko => {
                self.multimem(op)
            }
            LoadPtrTko | StorePtrTko | AtomicRMWTko | AtomicCASTko => self.ptr_access(op),
            PrintTko => {
                let s = match op.attr("str") {
                    Some(OpAttr::Str(s)) => escape_string(s),
                    _ => "\"\"".into(),
                };
                let args = op.operand_group("args");
                let mut l = format!("{mn} {s}");
                if !args.is_empty() {
                    let _ = write!(l, ", {}", self.vs(args));
                }
                if let Some(t) = Self::one(op, "token") {
                    let _ = write!(l, " token={}", self.v(t));
                }
                if !args.is_empty() {
                    let _ = write!(l, " : {}", self.ts(args));
                }
                let _ = write!(l, " -> {}", self.res_t(op, 0));
                l
            }
            MemoryFenceAliasTko => format!("{mn} {}", o(self, "token")),
            GdcWaitTko | GdcLaunchDependentsTko => match Self::one(op, "token") {
                Some(t) => format!("{mn} token = {} -> {}", self.v(t), self.res_t(op, 0)),
                None => format!("{mn} -> {}", self.res_t(op, 0)),
            },
            // Terminators.
            Yield | Continue | Break | Return => {
                let vs = op.operand_group("operands");
                if vs.is_empty() {
                    mn.to_string()
                } else {
                    format!("{mn} {} : {}", self.vs(vs), self.ts(vs))
                }
            }
            PreviewCall => self.preview_call(op),
            // Ops with regions write their own lines.
            If => return self.if_op(op, indent),
            For => return self.for_op(op, indent),
            Loop => return self.loop_op(op, indent),
            Reduce | Scan => return self.reduce_op(op, indent),
            Module | Entry | Global => return self.generic(op, indent),
        };
        self.out.push_str(&line);
        self.out.push('\n');
    }

    fn constant(&self, op: &Operation) -> String {
        let ty = op.results.first().and_then(|&r| self.func.value_type(r));
        let data = match op.attr("value") {
            Some(OpAttr::Dense(d)) => d.as_slice(),
            _ => &[],
        };
        match ty.and_then(dense_shape) {
            Some((elem, shape)) => format!(
                "constant <{elem}: {}> : {}",
                dense_text(elem, shape, data),
                self.res_t(op, 0)
            ),
            None => format!("constant <<unknown type>> : {}", self.res_t(op, 0)),
        }
    }

    /// `make_tensor_view %base, shape = [%n, 16], strides = [%s, 1] : [base type, ][index type -> ]tensor_view`.
    /// The base type is spelled out when its pointer carries a pointer attribute.
    fn make_tensor_view(&self, op: &Operation) -> String {
        let ty = op.results.first().and_then(|&r| self.func.value_type(r));
        let (shape, strides) = match ty {
            Some(Type::TensorView { shape, strides, .. }) => (shape.as_slice(), strides.as_slice()),
            _ => (&[][..], &[][..]),
        };
        let dyn_shape = op.operand_group("dynamicShape");
        let dyn_strides = op.operand_group("dynamicStrides");
        let mixed = |dims: &[i64], dynamic: &[ValueId]| {
            let mut it = dynamic.iter();
            dims.iter()
                .map(|&d| {
                    if d == crate::types::DYNAMIC {
                        it.next().map_or("?".into(), |&v| self.v(v))
                    } else {
                        d.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut types = Vec::new();
        let base = Self::one(op, "base");
        let base_has_attr = base
            .and_then(|b| self.func.value_type(b))
            .is_some_and(|t| match t {
                Type::Tile { elem, .. } => matches!(**elem, Type::Pointer { attr: Some(_), .. }),
                _ => false,
            });
        if base_has_attr {
            types.push(self.opnd_t(op, "base"));
        }
        if let Some(&d) = dyn_shape.first().or(dyn_strides.first()) {
            types.push(self.t(d));
        }
        let mut t = types.join(", ");
        if !t.is_empty() {
            t.push_str(" -> ");
        }
        format!(
            "make_tensor_view {}, shape = [{}], strides = [{}] : {t}{}",
            self.opnd(op, "base"),
            mixed(shape, dyn_shape),
            mixed(strides, dyn_strides),
            self.res_t(op, 0)
        )
    }

    /// load_view_tko / store_view_tko.
    fn view_access(&self, op: &Operation) -> String {
        let store = op.opcode == Opcode::StoreViewTko;
        let idx = op.operand_group("index");
        let mut l = format!("{} {} ", op.opcode.mnemonic(), Self::memory(op));
        if store {
            let _ = write!(l, "{}, ", self.opnd(op, "tile"));
        }
        let _ = write!(l, "{}[{}]", self.opnd(op, "view"), self.vs(idx));
        if let Some(t) = Self::one(op, "token") {
            let _ = write!(l, " token = {}", self.v(t));
        }
        if let Some(h) = Self::hints(op) {
            let _ = write!(l, " optimization_hints = {h}");
        }
        if let Some(ib) = Self::inbounds(op) {
            let _ = write!(l, " {ib}");
        }
        l.push_str(" : ");
        if store {
            let _ = write!(l, "{}, ", self.opnd_t(op, "tile"));
        }
        let _ = write!(
            l,
            "{}{} -> {}",
            self.opnd_t(op, "view"),
            self.index_types(idx),
            self.res_types(op)
        );
        l
    }

    fn atomic_red_view(&self, op: &Operation) -> String {
        let idx = op.operand_group("index");
        let mut l = format!(
            "atomic_red_view_tko {} {}[{}], {}, {}",
            Self::memory(op),
            self.opnd(op, "view"),
            self.vs(idx),
            Self::enum_str(op, "mode"),
            self.opnd(op, "value")
        );
        if let Some(t) = Self::one(op, "token") {
            let _ = write!(l, " token = {}", self.v(t));
        }
        if let Some(ib) = Self::inbounds(op) {
            let _ = write!(l, " {ib}");
        }
        let _ = write!(
            l,
            " : {}, {}{} -> {}",
            self.opnd_t(op, "value"),
            self.opnd_t(op, "view"),
            self.index_types(idx),
            self.res_t(op, 0)
        );
        l
    }

    /// The three multimem view ops: the token slot and the inbounds slot each keep their separating space;
    /// a non-`add` reduction kind prints as a trailing attribute dictionary.
    fn multimem(&self, op: &Operation) -> String {
        let idx = op.operand_group("index");
        let mut l = format!("{} {} ", op.opcode.mnemonic(), Self::memory(op));
        let tile = op.opcode != Opcode::MultimemLoadReduceViewTko;
        l.push_str(&self.opnd(op, "view"));
        if tile {
            let _ = write!(l, ", {}", self.opnd(op, "tile"));
        }
        let _ = write!(l, "[{}]", self.vs(idx));
        let tok = Self::one(op, "token");
        if let Some(t) = tok {
            let _ = write!(l, " token = {}", self.v(t));
        }
        l.push(' ');
        if let Some(ib) = Self::inbounds(op) {
            l.push_str(&ib);
        }
        if let Some(e) = Self::enum_attr(op, "reduction").filter(|e| e.value != 0) {
            let _ = write!(
                l,
                " attributes {{reduction = #cuda_tile.multimem_reduction_kind<{}>}}",
                e.name()
            );
        }
        let _ = write!(l, " : {}", self.opnd_t(op, "view"));
        if tile {
            let _ = write!(l, ", {}", self.opnd_t(op, "tile"));
        }
        l.push_str(&self.index_types(idx));
        if let Some(t) = tok {
            let _ = write!(l, ", {}", self.t(t));
        }
        let _ = write!(l, " -> {}", self.res_types(op));
        l
    }

    /// load_ptr_tko, store_ptr_tko, atomic_rmw_tko, atomic_cas_tko.
    fn ptr_access(&self, op: &Operation) -> String {
        use Opcode::*;
        let mut l = format!("{} {} ", op.opcode.mnemonic(), Self::memory(op));
        let (vals, typed): (Vec<&str>, Vec<&str>) = match op.opcode {
            LoadPtrTko => (
                vec!["source", "mask", "paddingValue"],
                vec!["source", "mask", "paddingValue"],
            ),
            StorePtrTko => (
                vec!["destination", "value", "mask"],
                vec!["destination", "value", "mask"],
            ),
            AtomicRMWTko => (
                vec!["pointers", "arg", "mask"],
                vec!["pointers", "arg", "mask"],
            ),
            _ => (
                vec!["pointers", "cmp", "val", "mask"],
                vec!["pointers", "val", "mask"],
            ),
        };
        let mut first = true;
        for (i, n) in vals.iter().enumerate() {
            let Some(v) = Self::one(op, n) else { continue };
            if !first {
                l.push_str(", ");
            }
            first = false;
            l.push_str(&self.v(v));
            if op.opcode == AtomicRMWTko && i == 0 {
                let _ = write!(l, ", {}", Self::enum_str(op, "mode"));
            }
        }
        if let Some(t) = Self::one(op, "token") {
            let _ = write!(l, " token={}", self.v(t));
        }
        if let Some(h) = Self::hints(op) {
            let _ = write!(l, " optimization_hints = {h}");
        }
        let ts: Vec<String> = typed
            .iter()
            .filter_map(|n| Self::one(op, n).map(|v| self.t(v)))
            .collect();
        let _ = write!(l, " : {} -> {}", ts.join(", "), self.res_types(op));
        l
    }

    /// `preview$call @f<[16, "lower", f32]>(%a, %b) : (!cuda_tile.tile<…>, …) -> !cuda_tile.tile<…>` (MLIR's
    /// generic function type, hence the dialect prefixes); the constant arguments follow the callee.
    fn preview_call(&self, op: &Operation) -> String {
        let callee = match op.attr("callee") {
            Some(OpAttr::Str(s)) => symbol(s),
            _ => "@<<missing>>".into(),
        };
        let args = op.operand_group("operands");
        let long = |v: &ValueId| match self.func.value_type(*v) {
            Some(t) => long_type(t),
            None => "<<unknown>>".into(),
        };
        let ins: Vec<String> = args.iter().map(long).collect();
        let outs: Vec<String> = op.results.iter().map(long).collect();
        let res = if outs.len() == 1 {
            outs[0].clone()
        } else {
            format!("({})", outs.join(", "))
        };
        let consts = match op.attr("const_args") {
            Some(OpAttr::TaggedArray(a)) => const_list(a),
            _ => String::new(),
        };
        let mut attrs = Vec::new();
        for n in ["arg_attrs", "res_attrs"] {
            if let Some(OpAttr::TaggedArray(a)) = op.attr(n) {
                attrs.push(format!("{n} = {}", Attribute::Array(a.clone())));
            }
        }
        let dict = if attrs.is_empty() {
            String::new()
        } else {
            format!(" {{{}}}", attrs.join(", "))
        };
        format!(
            "preview$call {callee}{consts}({}){dict} : ({}) -> {res}",
            self.vs(args),
            ins.join(", ")
        )
    }

    fn if_op(&mut self, op: &Operation, indent: usize) {
        let mut l = format!("if {}", self.opnd(op, "condition"));
        if !op.results.is_empty() {
            let _ = write!(l, " -> ({})", self.res_types(op));
        }
        l.push(' ');
        self.out.push_str(&l);
        let elide = Elide::Op(Opcode::Yield);
        if let Some(b) = op.regions.first() {
            self.region_body(b, indent, elide);
        }
        if let Some(b) = op.regions.get(1) {
            self.out.push_str(" else ");
            self.region_body(b, indent, elide);
        }
        self.out.push('\n');
    }

    fn for_op(&mut self, op: &Operation, indent: usize) {
        let Some(body) = op.regions.first() else {
            return self.generic_rest(op, indent);
        };
        let mut args = body.args.iter();
        let iv = match args.next() {
            Some(&v) => self.new_arg(v),
            None => "%<missing>".into(),
        };
        let mut l = String::from("for ");
        if Self::unit(op, "unsignedCmp") {
            l.push_str("unsigned ");
        }
        let _ = write!(
            l,
            "{iv} in ({} to {}, step {}) : {} ",
            self.opnd(op, "lowerBound"),
            self.opnd(op, "upperBound"),
            self.opnd(op, "step"),
            self.opnd_t(op, "lowerBound")
        );
        let init = op.operand_group("initValues");
        if !init.is_empty() {
            l.push_str(&self.iter_values(args.as_slice(), init));
            let _ = write!(l, " -> ({}) ", self.ts(init));
        }
        self.out.push_str(&l);
        self.region_body(body, indent, Elide::Op(Opcode::Continue));
        self.out.push('\n');
    }

    /// `iter_values(%argN = %init, …)`, naming the region arguments.
    fn iter_values(&mut self, region_args: &[ValueId], init: &[ValueId]) -> String {
        let mut parts = Vec::new();
        for (i, &v) in init.iter().enumerate() {
            let inner = match region_args.get(i) {
                Some(&a) => self.new_arg(a),
                None => "%<missing>".into(),
            };
            parts.push(format!("{inner} = {}", self.v(v)));
        }
        format!("iter_values({})", parts.join(", "))
    }

    fn loop_op(&mut self, op: &Operation, indent: usize) {
        let Some(body) = op.regions.first() else {
            return self.generic_rest(op, indent);
        };
        let init = op.operand_group("initValues");
        let mut l = String::from("loop ");
        if !init.is_empty() {
            l.push_str(&self.iter_values(&body.args, init));
            l.push(' ');
        }
        if !init.is_empty() || !op.results.is_empty() {
            l.push_str(": ");
        }
        if !init.is_empty() {
            let _ = write!(l, "{} ", self.ts(init));
            if !op.results.is_empty() {
                l.push_str("-> ");
            }
        }
        if !op.results.is_empty() {
            let _ = write!(l, "{} ", self.res_types(op));
        }
        self.out.push_str(&l);
        self.region_body(body, indent, Elide::Op(Opcode::Continue));
        self.out.push('\n');
    }

    /// reduce / scan: header, then the region's arguments on their own line, then the body.
    fn reduce_op(&mut self, op: &Operation, indent: usize) {
        let Some(body) = op.regions.first() else {
            return self.generic_rest(op, indent);
        };
        let operands = op.operand_group("operands");
        let ids = match op.attr("identities") {
            Some(OpAttr::TaggedArray(a)) => Attribute::Array(a.clone()).to_string(),
            _ => "[]".into(),
        };
        let mut l = format!(
            "{} {} dim={}",
            op.opcode.mnemonic(),
            self.vs(operands),
            Self::int(op, "dim").unwrap_or(0)
        );
        if op.opcode == Opcode::Scan {
            let rev = matches!(op.attr("reverse"), Some(OpAttr::Bool(true) | OpAttr::Unit));
            let _ = write!(l, " reverse={rev}");
        }
        let _ = write!(
            l,
            " identities={ids} : {} -> {} ",
            self.ts(operands),
            self.res_types(op)
        );
        self.out.push_str(&l);
        self.out.push('\n');
        self.pad(indent);
        let args: Vec<String> = body
            .args
            .iter()
            .map(|&a| {
                let n = self.new_arg(a);
                format!("{n}: {}", self.t(a))
            })
            .collect();
        let _ = write!(self.out, "({}) ", args.join(", "));
        self.region_body(body, indent, Elide::None);
        self.out.push('\n');
    }

    // ---- generic fallback -----------------------------------------------------------------------------

    /// Fallback for ops without a custom syntax: `mnemonic %a, %b {attr = …} : (T, …) -> (R, …)`, then any
    /// regions as `(%args) { … }`.
    fn generic(&mut self, op: &Operation, indent: usize) {
        self.generic_rest(op, indent);
    }

    fn generic_rest(&mut self, op: &Operation, indent: usize) {
        let schema = op.opcode.schema();
        let operands: Vec<ValueId> = op.all_operands().collect();
        let mut l = op.opcode.mnemonic().to_string();
        if !operands.is_empty() {
            let _ = write!(l, " {}", self.vs(&operands));
        }
        let attrs: Vec<String> = schema
            .attrs
            .iter()
            .zip(&op.attrs)
            .filter_map(|(spec, a)| a.as_ref().map(|a| (spec.name, a)))
            .map(|(name, a)| match a {
                OpAttr::Unit => name.to_string(),
                other => format!("{name} = {}", op_attr_text(other)),
            })
            .collect();
        if !attrs.is_empty() {
            let _ = write!(l, " {{{}}}", attrs.join(", "));
        }
        let _ = write!(l, " : ({}) -> ({})", self.ts(&operands), self.res_types(op));
        self.out.push_str(&l);
        for b in &op.regions {
            let args: Vec<String> = b
                .args
                .iter()
                .map(|&a| {
                    let n = self.new_arg(a);
                    format!("{n}: {}", self.t(a))
                })
                .collect();
            let _ = write!(self.out, " ({}) ", args.join(", "));
            self.region_body(b, indent, Elide::None);
        }
        self.out.push('\n');
    }
}

/// `<[a, b, …]>` after a callee or extern declaration name: its constant arguments (`16`, `"lower"`, `f32`) or
/// constant parameters (`size: index`); nothing when there are none.
fn const_list(items: &[Attribute]) -> String {
    if items.is_empty() {
        return String::new();
    }
    format!("<{}>", Attribute::Array(items.to_vec()))
}

/// An op attribute in the generic form.
fn op_attr_text(a: &OpAttr) -> String {
    match a {
        OpAttr::Enum(e) => enum_text(*e).to_string(),
        OpAttr::Int(v) => v.to_string(),
        OpAttr::Bool(b) => b.to_string(),
        OpAttr::Str(s) => escape_string(s),
        OpAttr::Type(t) => t.to_string(),
        OpAttr::Dense(d) => format!(
            "dense<\"0x{}\">",
            d.iter().map(|b| format!("{b:02X}")).collect::<String>()
        ),
        OpAttr::I32Array(v) => format!(
            "array<i32: {}>",
            v.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
        ),
        OpAttr::BoolArray(v) => format!(
            "array<i1: {}>",
            v.iter().map(bool::to_string).collect::<Vec<_>>().join(", ")
        ),
        OpAttr::Hints(h) => hints_text(h),
        OpAttr::Tagged(t) => t.to_string(),
        OpAttr::TaggedArray(v) => Attribute::Array(v.clone()).to_string(),
        OpAttr::Unit => "unit".into(),
    }
}

/// ` {key = value}` after a parameter: a dictionary prints its entries; a bare access attribute prints under
/// its dictionary key, as extern declarations show it. Empty dictionaries print nothing.
fn arg_attr_text(a: &Attribute) -> String {
    match a {
        Attribute::Dictionary(items) if items.is_empty() => String::new(),
        Attribute::Dictionary(_) => format!(" {a}"),
        Attribute::Access(_) => format!(" {{cuda_tile.preview$access = {a}}}"),
        Attribute::Array(items) if items.is_empty() => String::new(),
        other => format!(" {{{other}}}"),
    }
}

/// A type in MLIR's fully qualified form (`!cuda_tile.tile<4xf32>`), as generic function types print it.
fn long_type(t: &Type) -> String {
    match t {
        Type::Scalar(s) => s.to_string(),
        Type::Token => "!cuda_tile.token".into(),
        Type::Preview(_) => t.to_string(),
        other => format!("!cuda_tile.{other}"),
    }
}
