//! The op schema: for every Tile IR op, how its bytecode is laid out (result form, flags word, attributes in
//! declaration order, operand groups, regions) and from which bytecode version each part exists.
//!
//! The table in `table.rs` (one `op_table!` row per op) transcribes the per-op encoders of bytecode 13.5 (as published with cuTile Python
//! 1.7.0's `encodings.py`), written as data. The writer, the reader, the generic printer and the structural
//! verifier are all interpreters of this one table, so an op cannot be encoded one way and decoded another.
//!
//! Encoding order of one op: opcode varint; result types (fixed: one type id each; counted/variadic: count then
//! ids); the flags varint if the op has one at this version; attributes in order (absent optional ones skipped);
//! an operand total-count varint if `operand_count_prefix` is set; operand groups in order; then the regions.

mod table;

use crate::attr::{EnumKind, EnumValue};
use crate::version::*;
pub(crate) use table::OPS;
pub use table::Opcode;

/// How an op's result types are written.
#[derive(Clone, Copy, Debug)]
pub enum ResultSpec {
    /// One type id per named result, no count.
    Fixed(&'static [ResultSlot]),
    /// A count, then one type id per named result (the count is fixed by the op).
    Counted(&'static [ResultSlot]),
    /// A count, then that many type ids.
    Variadic,
}

/// A named result; `since` is the version that introduced it (None = as old as the op).
#[derive(Clone, Copy, Debug)]
pub struct ResultSlot {
    pub name: &'static str,
    pub since: Option<Version>,
}

/// Whether an attribute is always written or only when a bit of the flags word is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    Required,
    /// Present iff this bit of the flags varint is set. For [`AttrKind::UnitFlag`] the bit *is* the value.
    Flag(u8),
}

/// The untagged encoding of an op attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Enum(EnumKind),
    /// varint
    Int,
    /// one byte
    Bool,
    /// string id
    Str,
    /// type id
    TypeRef,
    /// constant-table id (raw dense elements)
    DenseConst,
    /// count + i32 each
    I32Array,
    /// count + one byte each
    BoolArray,
    /// untagged dictionary arch → tagged dictionary
    Hints,
    /// one tagged attribute
    Tagged,
    /// count + tagged attributes
    TaggedArray,
    /// a unit/bool attribute stored only as a bit of the flags word
    UnitFlag,
}

#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    pub presence: Presence,
    pub since: Option<Version>,
}

/// How an operand group is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandKind {
    /// exactly one value id
    Single,
    /// one value id iff this flags bit is set
    Optional(u8),
    /// a 0/1 count varint, then the value id if 1 (no flags bit)
    CountedOptional,
    /// count + value ids
    SizedVariadic,
    /// value ids whose count is implied by the op's total-count prefix
    UnsizedVariadic,
}

#[derive(Clone, Copy, Debug)]
pub struct OperandSpec {
    pub name: &'static str,
    pub kind: OperandKind,
    pub since: Option<Version>,
}

/// The bytecode layout of one op.
#[derive(Clone, Copy, Debug)]
pub struct OpSchema {
    pub op: Opcode,
    /// Name as printed in Tile IR text (`cuda_tile.` prefix omitted).
    pub mnemonic: &'static str,
    /// First bytecode version that has this op.
    pub since: Version,
    pub results: ResultSpec,
    /// From which version a flags varint is written (None: never).
    pub flags_since: Option<Version>,
    pub attrs: &'static [AttrSpec],
    /// If set, a varint "N + len(variadic group)" precedes the operands.
    pub operand_count_prefix: Option<u8>,
    pub operands: &'static [OperandSpec],
    /// Number of regions (each with exactly one block).
    pub regions: u8,
}

// `Opcode`, `Opcode::from_u32`, `Opcode::mnemonic` and `Opcode::schema` are generated from the rows of
// `table.rs`.
impl Opcode {
    /// Look an op up by its text name.
    pub fn from_mnemonic(name: &str) -> Option<Opcode> {
        OPS.iter().find(|s| s.mnemonic == name).map(|s| s.op)
    }
    /// Ops that only exist in preview bytecode.
    pub fn is_preview(self) -> bool {
        self == Opcode::PreviewCall
    }
    /// Module and Entry have opcodes but are never emitted as ops (functions live in the function table).
    pub fn is_structural(self) -> bool {
        matches!(self, Opcode::Module | Opcode::Entry)
    }
    /// Every op a builder may emit inside a function body.
    pub fn all_body_ops() -> impl Iterator<Item = Opcode> {
        OPS.iter().map(|s| s.op).filter(|o| !o.is_structural())
    }
    pub fn is_terminator(self) -> bool {
        matches!(
            self,
            Opcode::Yield | Opcode::Continue | Opcode::Break | Opcode::Return
        )
    }
}

impl OpSchema {
    /// Index of an attribute slot by name.
    pub fn attr_index(&self, name: &str) -> Option<usize> {
        self.attrs.iter().position(|a| a.name == name)
    }
    pub fn operand_index(&self, name: &str) -> Option<usize> {
        self.operands.iter().position(|a| a.name == name)
    }
    /// Whether this op writes a flags varint at `version`.
    pub fn has_flags(&self, version: Version) -> bool {
        self.flags_since.is_some_and(|v| version >= v)
    }
}

/// The value a versioned attribute takes when read from bytecode older than the version that introduced it,
/// so that the data model is the same whatever version a module came from. `None`: the attribute has no
/// representation in older bytecode beyond "absent" (optional / all-false arrays are handled by the caller).
pub fn default_before_since(op: Opcode, attr: &str) -> Option<EnumValue> {
    use crate::attr::*;
    match (op, attr) {
        (Opcode::Exp, "rounding_mode") | (Opcode::TanH, "rounding_mode") => {
            Some(RoundingMode::Full.into())
        }
        (Opcode::NegI, "overflow") => Some(IntegerOverflow::None.into()),
        (Opcode::Global, "symbol_visibility") => Some(SymbolVisibility::Public.into()),
        _ => None,
    }
}
