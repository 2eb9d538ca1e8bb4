//! The in-memory Tile IR module: functions, blocks, regions and ops, independent of any bytecode version.
//!
//! Ops are generic: an [`Operation`] holds its [`Opcode`], result values, attribute slots and operand groups laid
//! out exactly as the op's [`OpSchema`](crate::schema::OpSchema) lists them. Values live in a per-function arena
//! ([`Function::values`]) that records each value's type; blocks own the values they define (arguments and op
//! results), and a value is visible only in its block and the regions nested below it, as in the bytecode.

use crate::attr::{Attribute, EnumValue, OptimizationHints};
use crate::schema::Opcode;
use crate::types::Type;

/// An SSA value of one function (index into [`Function::values`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// The argument-attribute key carrying a foreign function parameter's access mode.
pub const ACCESS_ATTR: &str = "cuda_tile.preview$access";

/// A debug-info reference: 0 is "unknown location"; n ≥ 1 is `Module::debug_attrs[n - 1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DebugRef(pub u64);

/// Untagged op attribute values, one per [`AttrSpec`](crate::schema::AttrSpec) kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpAttr {
    Enum(EnumValue),
    Int(u64),
    Bool(bool),
    Str(String),
    Type(Type),
    /// Raw little-endian dense elements (a splat holds one element); typed by the op's result.
    Dense(Vec<u8>),
    I32Array(Vec<i32>),
    BoolArray(Vec<bool>),
    Hints(OptimizationHints),
    Tagged(Attribute),
    TaggedArray(Vec<Attribute>),
    /// A unit attribute carried by a flags bit (`flush_to_zero`, `unsignedCmp`, …): present = true.
    Unit,
}

/// One op. `attrs[i]` and `operands[i]` correspond to `schema().attrs[i]` and `schema().operands[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub opcode: Opcode,
    pub results: Vec<ValueId>,
    /// `None` for an absent optional attribute or an unset unit flag.
    pub attrs: Vec<Option<OpAttr>>,
    /// One entry per operand group: `Single` has 1 value, `Optional` 0 or 1, variadic groups any number.
    pub operands: Vec<Vec<ValueId>>,
    pub regions: Vec<Block>,
    pub loc: DebugRef,
}

impl Operation {
    /// An op with all slots empty, sized for its schema.
    pub fn new(opcode: Opcode) -> Operation {
        let s = opcode.schema();
        Operation {
            opcode,
            results: vec![],
            attrs: vec![None; s.attrs.len()],
            operands: vec![vec![]; s.operands.len()],
            regions: vec![],
            loc: DebugRef(0),
        }
    }
    /// The attribute in the slot named `name`, if set.
    pub fn attr(&self, name: &str) -> Option<&OpAttr> {
        let i = self.opcode.schema().attr_index(name)?;
        self.attrs.get(i)?.as_ref()
    }
    /// The operands of the group named `name` (empty if no such group).
    pub fn operand_group(&self, name: &str) -> &[ValueId] {
        match self.opcode.schema().operand_index(name) {
            Some(i) => self.operands.get(i).map(Vec::as_slice).unwrap_or(&[]),
            None => &[],
        }
    }
    /// All operands in encoding order.
    pub fn all_operands(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.operands.iter().flatten().copied()
    }
    /// Visit this op and every op nested in its regions, in pre-order (the debug table's order).
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Operation)) {
        f(self);
        for b in &self.regions {
            b.walk(f);
        }
    }
}

/// A block: arguments and a list of ops ending in a terminator. Every region has exactly one block.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Block {
    pub args: Vec<ValueId>,
    pub ops: Vec<Operation>,
}

impl Block {
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Operation)) {
        for op in &self.ops {
            op.walk(f);
        }
    }
}

/// What a function-table entry is.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionKind {
    /// A kernel (`entry`): public, scalar (rank-0 tile) parameters, no results, has a body.
    Entry { hints: OptimizationHints },
    /// A foreign function declaration (`preview$func extern`): private, no body, preview only.
    /// `const_params` holds [`Attribute::ConstParam`] entries.
    ExternDecl { const_params: Vec<Attribute> },
    /// An extern implementation entry (`preview$extern_impl`, form 1). Kept so such files round-trip; the
    /// toolchain rejects the ones we can build today (see toolchain.md §4.3).
    ExternImpl {
        opflags: u64,
        sym_name: String,
        implements: String,
        function_type: Type,
    },
}

/// One entry of the function table.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub kind: FunctionKind,
    pub param_types: Vec<Type>,
    pub result_types: Vec<Type>,
    /// Private visibility (flags bit 0). Entries are public; extern declarations private.
    pub private: bool,
    /// 13.5: one attribute per parameter (usually a Dictionary; `preview$access` for extern declarations).
    /// Empty means the empty array `06 00`.
    pub arg_attrs: Vec<Attribute>,
    /// The body; its block arguments are the parameters. `None` for extern declarations.
    pub body: Option<Block>,
    pub loc: DebugRef,
    /// Types of every value of this function, indexed by [`ValueId`].
    pub values: Vec<Type>,
}

impl Function {
    /// A new function with a body whose block arguments are the parameters.
    pub fn new_entry(name: impl Into<String>, param_types: Vec<Type>) -> Function {
        let mut f = Function {
            name: name.into(),
            kind: FunctionKind::Entry {
                hints: OptimizationHints::empty_default(),
            },
            param_types: param_types.clone(),
            result_types: vec![],
            private: false,
            arg_attrs: vec![],
            body: None,
            loc: DebugRef(0),
            values: vec![],
        };
        let args = param_types.into_iter().map(|t| f.new_value(t)).collect();
        f.body = Some(Block { args, ops: vec![] });
        f
    }
    /// A foreign function declaration (`preview$func extern`): private, no body, one
    /// `{cuda_tile.preview$access = …}` dictionary per parameter, `const_params` as [`Attribute::ConstParam`]s.
    pub fn new_extern_decl(
        name: impl Into<String>,
        params: &[(Type, crate::attr::Access)],
        results: &[Type],
        const_params: Vec<Attribute>,
    ) -> Function {
        Function {
            name: name.into(),
            kind: FunctionKind::ExternDecl { const_params },
            param_types: params.iter().map(|(t, _)| t.clone()).collect(),
            result_types: results.to_vec(),
            private: true,
            arg_attrs: params
                .iter()
                .map(|(_, a)| {
                    Attribute::Dictionary(vec![(ACCESS_ATTR.to_string(), Attribute::Access(*a))])
                })
                .collect(),
            body: None,
            loc: DebugRef(0),
            values: vec![],
        }
    }

    /// Allocate a value of type `ty`.
    pub fn new_value(&mut self, ty: Type) -> ValueId {
        self.values.push(ty);
        ValueId(self.values.len() as u32 - 1)
    }
    /// The type of a value (None if the id is out of range).
    pub fn value_type(&self, v: ValueId) -> Option<&Type> {
        self.values.get(v.0 as usize)
    }
    pub fn is_entry(&self) -> bool {
        matches!(self.kind, FunctionKind::Entry { .. })
    }
    /// The function's type.
    pub fn signature(&self) -> Type {
        Type::Function {
            params: self.param_types.clone(),
            results: self.result_types.clone(),
        }
    }
    /// Visit every op of the body in pre-order.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Operation)) {
        if let Some(b) = &self.body {
            b.walk(f);
        }
    }
}

/// A module-level global (Global section).
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    pub name: String,
    pub ty: Type,
    /// Raw dense initializer bytes.
    pub value: Vec<u8>,
    pub alignment: u64,
    /// 13.3+: private visibility.
    pub private: bool,
    /// 13.3+: the `constant` varint.
    pub constant: u64,
}

/// Debug-info attributes (Debug section). References inside are [`DebugRef`]s into the same table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DebugAttr {
    CompileUnit {
        file: DebugRef,
    },
    File {
        name: String,
        dir: String,
    },
    LexicalBlock {
        scope: DebugRef,
        file: DebugRef,
        line: u64,
        col: u64,
    },
    Loc {
        scope: DebugRef,
        filename: String,
        line: u64,
        col: u64,
    },
    /// `flags` exists from 13.5 (0 when read from older bytecode).
    Subprogram {
        file: DebugRef,
        line: u64,
        name: String,
        linkage_name: String,
        compile_unit: DebugRef,
        scope_line: u64,
        flags: u64,
    },
    CallSite {
        callee: DebugRef,
        caller: DebugRef,
    },
}

/// A Tile IR module: what one bytecode file holds.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Module {
    pub functions: Vec<Function>,
    pub globals: Vec<Global>,
    /// Debug attributes; `DebugRef(n)` refers to `debug_attrs[n - 1]`.
    pub debug_attrs: Vec<DebugAttr>,
    /// Producer section string, if any.
    pub producer: Option<String>,
}

impl Module {
    pub fn new() -> Module {
        Module::default()
    }
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }
    /// Add a debug attribute and return its reference.
    pub fn add_debug_attr(&mut self, a: DebugAttr) -> DebugRef {
        self.debug_attrs.push(a);
        DebugRef(self.debug_attrs.len() as u64)
    }
    /// Whether the module needs the preview header flag (and so bytecode 13.5 and `--preview=simt`).
    pub fn needs_preview(&self) -> bool {
        self.functions.iter().any(|f| {
            let mut any = !f.is_entry()
                || f.arg_attrs.iter().any(Attribute::is_preview)
                || f.param_types
                    .iter()
                    .chain(&f.result_types)
                    .any(Type::is_preview);
            f.walk(&mut |op| any |= op.opcode.is_preview());
            any
        })
    }
}
