//! The op table: one row per op of bytecode 13.5, transcribed from the format's published per-op encoders.
//!
//! Each row is the single source of an op's facts: [`op_table!`] turns it into the [`Opcode`] variant and its
//! number, [`Opcode::from_u32`], [`Opcode::mnemonic`], [`Opcode::schema`] and the entry in [`OPS`]. Adding
//! an op is adding one row; the numbers and names are written nowhere else.
//!
//! Row syntax (`[...]` lists keep declaration order, which is encoding order):
//!
//! ```text
//! Variant = opcode, "mnemonic", since_version {
//!     results: Fixed["name", "name2" since V13_4] | Counted[...] | Variadic,
//!     flags: V13_x,                      // optional: the version from which a flags varint is written
//!     attrs: ["name": Kind, "name": Enum(EnumKind) flag 1 since V13_5],  // optional; `flag N`: present iff bit N
//!     operand_count_prefix: N,           // optional
//!     operands: ["name", "name": Optional(0) since V13_2, "name": SizedVariadic],  // optional; default Single
//!     regions: N,                        // optional; default 0
//! }
//! ```
//!
//! Rows must be in ascending opcode order (a unit test checks it, with unique mnemonics).

use super::*;

/// Expands the op rows into the opcode enum, its decoding and names, and the schema table.
macro_rules! op_table {
    (@since) => { None };
    (@since $v:ident) => { Some($v) };
    (@opt) => { None };
    (@opt $n:literal) => { Some($n) };
    (@regions) => { 0 };
    (@regions $n:literal) => { $n };
    (@presence) => { Presence::Required };
    (@presence $bit:literal) => { Presence::Flag($bit) };
    (@operand) => { OperandKind::Single };
    (@operand $k:ident) => { OperandKind::$k };
    (@operand $k:ident ($n:literal)) => { OperandKind::$k($n) };
    (@results Variadic) => { ResultSpec::Variadic };
    (@results $k:ident [ $($name:literal $(since $s:ident)?),* ]) => {
        ResultSpec::$k(&[$(ResultSlot { name: $name, since: op_table!(@since $($s)?) }),*])
    };
    ($(
        $op:ident = $num:literal, $mn:literal, $since:ident {
            results: $rkind:ident $([ $($rname:literal $(since $rsince:ident)?),* $(,)? ])?,
            $(flags: $flags:ident,)?
            $(attrs: [
                $($aname:literal : $akind:ident $(($ekind:ident))? $(flag $abit:literal)? $(since $asince:ident)?),*
                $(,)?
            ],)?
            $(operand_count_prefix: $prefix:literal,)?
            $(operands: [
                $($oname:literal $(: $okind:ident $(($obit:literal))?)? $(since $osince:ident)?),*
                $(,)?
            ],)?
            $(regions: $regions:literal,)?
        }
    )*) => {
        /// Every opcode, as numbered in bytecode 13.5.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Opcode {
            $(
                #[doc = concat!("`", $mn, "` (opcode ", stringify!($num), ")")]
                $op = $num,
            )*
        }

        /// One schema constant per op, named after its variant (only `OPS` and `Opcode::schema` use them).
        #[allow(non_upper_case_globals)]
        mod row {
            use super::*;
            $(
                pub(super) const $op: OpSchema = OpSchema {
                    op: Opcode::$op,
                    mnemonic: $mn,
                    since: $since,
                    results: op_table!(@results $rkind $([ $($rname $(since $rsince)?),* ])?),
                    flags_since: op_table!(@since $($flags)?),
                    attrs: &[$($(AttrSpec {
                        name: $aname,
                        kind: AttrKind::$akind $((EnumKind::$ekind))?,
                        presence: op_table!(@presence $($abit)?),
                        since: op_table!(@since $($asince)?),
                    }),*)?],
                    operand_count_prefix: op_table!(@opt $($prefix)?),
                    operands: &[$($(OperandSpec {
                        name: $oname,
                        kind: op_table!(@operand $($okind $(($obit))?)?),
                        since: op_table!(@since $($osince)?),
                    }),*)?],
                    regions: op_table!(@regions $($regions)?),
                };
            )*
        }

        /// Every op's layout, in opcode order.
        pub(crate) static OPS: &[OpSchema] = &[$(row::$op),*];

        impl Opcode {
            /// The opcode with this number, if any.
            pub fn from_u32(n: u32) -> Option<Opcode> {
                match n {
                    $($num => Some(Opcode::$op),)*
                    _ => None,
                }
            }
            /// Name as printed in Tile IR text (`cuda_tile.` prefix omitted).
            pub fn mnemonic(self) -> &'static str {
                match self {
                    $(Opcode::$op => $mn,)*
                }
            }
            /// The layout of this op.
            pub fn schema(self) -> &'static OpSchema {
                match self {
                    $(Opcode::$op => &row::$op,)*
                }
            }
        }
    };
}

op_table! {
    AbsF = 0, "absf", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    AbsI = 1, "absi", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    AddF = 2, "addf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["rounding_mode": Enum(RoundingMode), "flush_to_zero": UnitFlag flag 0],
        operands: ["lhs", "rhs"],
    }
    AddI = 3, "addi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["overflow": Enum(IntegerOverflow)],
        operands: ["lhs", "rhs"],
    }
    AndI = 4, "andi", V13_1 {
        results: Fixed["result_type"],
        operands: ["lhs", "rhs"],
    }
    Assert = 5, "assert", V13_1 {
        results: Fixed[],
        attrs: ["message": Str],
        operands: ["condition"],
    }
    Assume = 6, "assume", V13_1 {
        results: Fixed["result_type"],
        attrs: ["predicate": Tagged],
        operands: ["value"],
    }
    AtomicCASTko = 7, "atomic_cas_tko", V13_1 {
        results: Fixed["result_type", "result_token_type"],
        flags: V13_1,
        attrs: ["memory_ordering_semantics": Enum(MemoryOrdering), "memory_scope": Enum(MemoryScope)],
        operands: ["pointers", "cmp", "val", "mask": Optional(0), "token": Optional(1)],
    }
    AtomicRMWTko = 8, "atomic_rmw_tko", V13_1 {
        results: Fixed["result_type", "result_token_type"],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering),
            "memory_scope": Enum(MemoryScope),
            "mode": Enum(AtomicRmwMode),
        ],
        operands: ["pointers", "arg", "mask": Optional(0), "token": Optional(1)],
    }
    Bitcast = 9, "bitcast", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Break = 10, "break", V13_1 {
        results: Counted[],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
    }
    Broadcast = 11, "broadcast", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Cat = 12, "cat", V13_1 {
        results: Fixed["result_type"],
        attrs: ["dim": Int],
        operands: ["lhs", "rhs"],
    }
    Ceil = 13, "ceil", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    CmpF = 14, "cmpf", V13_1 {
        results: Fixed["result_type"],
        attrs: [
            "comparison_predicate": Enum(ComparisonPredicate),
            "comparison_ordering": Enum(ComparisonOrdering),
        ],
        operands: ["lhs", "rhs"],
    }
    CmpI = 15, "cmpi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["comparison_predicate": Enum(ComparisonPredicate), "signedness": Enum(Signedness)],
        operands: ["lhs", "rhs"],
    }
    Constant = 16, "constant", V13_1 {
        results: Fixed["result_type"],
        attrs: ["value": DenseConst],
    }
    Continue = 17, "continue", V13_1 {
        results: Counted[],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
    }
    Cos = 18, "cos", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    CosH = 19, "cosh", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    DivF = 20, "divf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["rounding_mode": Enum(RoundingMode), "flush_to_zero": UnitFlag flag 0],
        operands: ["lhs", "rhs"],
    }
    DivI = 21, "divi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["signedness": Enum(Signedness), "rounding": Enum(RoundingMode)],
        operands: ["lhs", "rhs"],
    }
    Entry = 22, "entry", V13_1 {
        results: Fixed[],
        flags: V13_1,
        attrs: [
            "sym_name": Str,
            "function_type": TypeRef,
            "arg_attrs": TaggedArray flag 2 since V13_5,
            "res_attrs": TaggedArray flag 0,
            "optimization_hints": Hints flag 1,
        ],
        regions: 1,
    }
    Exp = 23, "exp", V13_1 {
        results: Fixed["result_type"],
        attrs: ["rounding_mode": Enum(RoundingMode) since V13_3],
        operands: ["source"],
    }
    Exp2 = 24, "exp2", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["flush_to_zero": UnitFlag flag 0],
        operands: ["source"],
    }
    ExtI = 37, "exti", V13_1 {
        results: Fixed["to_type"],
        attrs: ["signedness": Enum(Signedness)],
        operands: ["from_"],
    }
    Extract = 38, "extract", V13_1 {
        results: Counted["result_type"],
        operand_count_prefix: 1,
        operands: ["source", "indices": UnsizedVariadic],
    }
    Floor = 39, "floor", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Fma = 40, "fma", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["rounding_mode": Enum(RoundingMode), "flush_to_zero": UnitFlag flag 0],
        operands: ["lhs", "rhs", "acc"],
    }
    For = 41, "for", V13_1 {
        results: Variadic,
        flags: V13_2,
        attrs: ["unsignedCmp": UnitFlag flag 0 since V13_2],
        operand_count_prefix: 3,
        operands: ["lowerBound", "upperBound", "step", "initValues": UnsizedVariadic],
        regions: 1,
    }
    FToF = 42, "ftof", V13_1 {
        results: Fixed["to_type"],
        attrs: ["rounding_mode": Enum(RoundingMode)],
        operands: ["from_"],
    }
    FToI = 43, "ftoi", V13_1 {
        results: Fixed["to_type"],
        flags: V13_4,
        attrs: [
            "signedness": Enum(Signedness),
            "rounding_mode": Enum(RoundingMode),
            "saturating": UnitFlag flag 0 since V13_4,
        ],
        operands: ["from_"],
    }
    GetGlobal = 44, "get_global", V13_1 {
        results: Fixed["result_type"],
        attrs: ["name": Str],
    }
    GetIndexSpaceShape = 45, "get_index_space_shape", V13_1 {
        results: Variadic,
        operands: ["src"],
    }
    GetNumTileBlocks = 46, "get_num_tile_blocks", V13_1 {
        results: Fixed["gridSize_x_type", "gridSize_y_type", "gridSize_z_type"],
    }
    GetTensorShape = 47, "get_tensor_shape", V13_1 {
        results: Variadic,
        operands: ["src"],
    }
    GetTileBlockId = 48, "get_tile_block_id", V13_1 {
        results: Fixed["blockId_x_type", "blockId_y_type", "blockId_z_type"],
    }
    Global = 49, "global", V13_1 {
        results: Fixed[],
        flags: V13_3,
        attrs: [
            "sym_name": Str,
            "value": DenseConst,
            "alignment": Int,
            "symbol_visibility": Enum(SymbolVisibility) since V13_3,
            "constant": UnitFlag flag 0 since V13_3,
        ],
    }
    If = 50, "if", V13_1 {
        results: Variadic,
        operands: ["condition"],
        regions: 2,
    }
    IntToPtr = 51, "int_to_ptr", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Iota = 58, "iota", V13_1 {
        results: Fixed["result_type"],
    }
    IToF = 59, "itof", V13_1 {
        results: Fixed["to_type"],
        attrs: ["signedness": Enum(Signedness), "rounding_mode": Enum(RoundingMode)],
        operands: ["from_"],
    }
    JoinTokens = 60, "join_tokens", V13_1 {
        results: Counted["result_type"],
        operand_count_prefix: 0,
        operands: ["tokens": UnsizedVariadic],
    }
    LoadPtrTko = 61, "load_ptr_tko", V13_1 {
        results: Fixed["result_type", "result_token_type"],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering),
            "memory_scope": Enum(MemoryScope) flag 0,
            "optimization_hints": Hints flag 1,
        ],
        operands: ["source", "mask": Optional(2), "paddingValue": Optional(3), "token": Optional(4)],
    }
    LoadViewTko = 62, "load_view_tko", V13_1 {
        results: Counted["tile_type", "result_token_type"],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering),
            "memory_scope": Enum(MemoryScope) flag 0,
            "optimization_hints": Hints flag 1,
            "inbounds": BoolArray since V13_4,
        ],
        operands: ["view", "index": SizedVariadic, "token": Optional(2)],
    }
    Log = 63, "log", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Log2 = 64, "log2", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Loop = 65, "loop", V13_1 {
        results: Variadic,
        operand_count_prefix: 0,
        operands: ["initValues": UnsizedVariadic],
        regions: 1,
    }
    MakePartitionView = 66, "make_partition_view", V13_1 {
        results: Fixed["result_type"],
        operands: ["tensor_view"],
    }
    MakeTensorView = 67, "make_tensor_view", V13_1 {
        results: Counted["result_type"],
        operands: ["base", "dynamicShape": SizedVariadic, "dynamicStrides": SizedVariadic],
    }
    MakeToken = 68, "make_token", V13_1 {
        results: Fixed["result_type"],
    }
    MaxF = 69, "maxf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["propagate_nan": UnitFlag flag 0, "flush_to_zero": UnitFlag flag 1],
        operands: ["lhs", "rhs"],
    }
    MaxI = 70, "maxi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["signedness": Enum(Signedness)],
        operands: ["lhs", "rhs"],
    }
    MinF = 71, "minf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["propagate_nan": UnitFlag flag 0, "flush_to_zero": UnitFlag flag 1],
        operands: ["lhs", "rhs"],
    }
    MinI = 72, "mini", V13_1 {
        results: Fixed["result_type"],
        attrs: ["signedness": Enum(Signedness)],
        operands: ["lhs", "rhs"],
    }
    MmaF = 73, "mmaf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_3,
        attrs: ["fast_acc": UnitFlag flag 0 since V13_3],
        operands: ["lhs", "rhs", "acc"],
    }
    MmaI = 74, "mmai", V13_1 {
        results: Fixed["result_type"],
        attrs: ["signedness_lhs": Enum(Signedness), "signedness_rhs": Enum(Signedness)],
        operands: ["lhs", "rhs", "acc"],
    }
    Module = 75, "module", V13_1 {
        results: Fixed[],
        flags: V13_3,
        attrs: ["sym_name": Str, "producer": Str flag 0 since V13_3],
        regions: 1,
    }
    MulF = 76, "mulf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["rounding_mode": Enum(RoundingMode), "flush_to_zero": UnitFlag flag 0],
        operands: ["lhs", "rhs"],
    }
    MulhiI = 77, "mulhii", V13_1 {
        results: Fixed["result_type"],
        operands: ["x", "y"],
    }
    MulI = 78, "muli", V13_1 {
        results: Fixed["result_type"],
        attrs: ["overflow": Enum(IntegerOverflow)],
        operands: ["lhs", "rhs"],
    }
    NegF = 79, "negf", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    NegI = 80, "negi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["overflow": Enum(IntegerOverflow) since V13_2],
        operands: ["source"],
    }
    Offset = 81, "offset", V13_1 {
        results: Fixed["result_type"],
        operands: ["ptr", "offset"],
    }
    OrI = 82, "ori", V13_1 {
        results: Fixed["result_type"],
        operands: ["lhs", "rhs"],
    }
    Permute = 83, "permute", V13_1 {
        results: Fixed["result_type"],
        attrs: ["permutation": I32Array],
        operands: ["source"],
    }
    FPowF = 84, "fpowf", V13_1 {
        results: Fixed["result_type"],
        operands: ["source", "exponent"],
    }
    PrintTko = 85, "print_tko", V13_1 {
        results: Counted["result_token_type" since V13_2],
        flags: V13_2,
        attrs: ["str": Str],
        operands: ["args": SizedVariadic, "token": Optional(0) since V13_2],
    }
    PtrToInt = 86, "ptr_to_int", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    PtrToPtr = 87, "ptr_to_ptr", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Reduce = 88, "reduce", V13_1 {
        results: Variadic,
        attrs: ["dim": Int, "identities": TaggedArray],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
        regions: 1,
    }
    RemF = 89, "remf", V13_1 {
        results: Fixed["result_type"],
        operands: ["lhs", "rhs"],
    }
    RemI = 90, "remi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["signedness": Enum(Signedness)],
        operands: ["lhs", "rhs"],
    }
    Reshape = 91, "reshape", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Return = 92, "return", V13_1 {
        results: Counted[],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
    }
    Rsqrt = 93, "rsqrt", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["flush_to_zero": UnitFlag flag 0],
        operands: ["source"],
    }
    Scan = 94, "scan", V13_1 {
        results: Variadic,
        attrs: ["dim": Int, "reverse": Bool, "identities": TaggedArray],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
        regions: 1,
    }
    Select = 95, "select", V13_1 {
        results: Fixed["result_type"],
        operands: ["cond", "val_if_true", "val_if_false"],
    }
    ShLI = 96, "shli", V13_1 {
        results: Fixed["result_type"],
        attrs: ["overflow": Enum(IntegerOverflow)],
        operands: ["lhs", "rhs"],
    }
    ShRI = 97, "shri", V13_1 {
        results: Fixed["result_type"],
        attrs: ["signedness": Enum(Signedness)],
        operands: ["lhs", "rhs"],
    }
    Sin = 98, "sin", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    SinH = 99, "sinh", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    Sqrt = 100, "sqrt", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["rounding_mode": Enum(RoundingMode), "flush_to_zero": UnitFlag flag 0],
        operands: ["source"],
    }
    StorePtrTko = 101, "store_ptr_tko", V13_1 {
        results: Fixed["result_token_type"],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering),
            "memory_scope": Enum(MemoryScope) flag 0,
            "optimization_hints": Hints flag 1,
        ],
        operands: ["destination", "value", "mask": Optional(2), "token": Optional(3)],
    }
    StoreViewTko = 102, "store_view_tko", V13_1 {
        results: Counted["result_token_type"],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering),
            "memory_scope": Enum(MemoryScope) flag 0,
            "optimization_hints": Hints flag 1,
            "inbounds": BoolArray since V13_4,
        ],
        operands: ["tile", "view", "index": SizedVariadic, "token": Optional(2)],
    }
    SubF = 103, "subf", V13_1 {
        results: Fixed["result_type"],
        flags: V13_1,
        attrs: ["rounding_mode": Enum(RoundingMode), "flush_to_zero": UnitFlag flag 0],
        operands: ["lhs", "rhs"],
    }
    SubI = 104, "subi", V13_1 {
        results: Fixed["result_type"],
        attrs: ["overflow": Enum(IntegerOverflow)],
        operands: ["lhs", "rhs"],
    }
    Tan = 105, "tan", V13_1 {
        results: Fixed["result_type"],
        operands: ["source"],
    }
    TanH = 106, "tanh", V13_1 {
        results: Fixed["result_type"],
        attrs: ["rounding_mode": Enum(RoundingMode) since V13_2],
        operands: ["source"],
    }
    TruncI = 107, "trunci", V13_1 {
        results: Fixed["to_type"],
        attrs: ["overflow": Enum(IntegerOverflow)],
        operands: ["from_"],
    }
    XOrI = 108, "xori", V13_1 {
        results: Fixed["result_type"],
        operands: ["lhs", "rhs"],
    }
    Yield = 109, "yield", V13_1 {
        results: Counted[],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
    }
    Atan2 = 110, "atan2", V13_2 {
        results: Fixed["result_type" since V13_2],
        operands: ["x" since V13_2, "y" since V13_2],
    }
    Pack = 111, "pack", V13_3 {
        results: Fixed["result_type" since V13_3],
        operands: ["source" since V13_3],
    }
    Unpack = 112, "unpack", V13_3 {
        results: Fixed["result_type" since V13_3],
        operands: ["source" since V13_3],
    }
    Alloca = 113, "alloca", V13_3 {
        results: Fixed["result_type" since V13_3],
        flags: V13_1,
        attrs: [
            "num_elem": Int since V13_3,
            "alignment": Int since V13_3,
            "global_": UnitFlag flag 0 since V13_3,
        ],
    }
    MmaFScaled = 114, "mmaf_scaled", V13_3 {
        results: Fixed["result_type" since V13_3],
        operands: [
            "lhs" since V13_3,
            "rhs" since V13_3,
            "acc" since V13_3,
            "lhs_scale" since V13_3,
            "rhs_scale" since V13_3,
        ],
    }
    MakeGatherScatterView = 115, "make_gather_scatter_view", V13_3 {
        results: Fixed["result_type" since V13_3],
        operands: ["tensor_view"],
    }
    MakeStridedView = 116, "make_strided_view", V13_3 {
        results: Fixed["result_type" since V13_3],
        operands: ["tensor_view" since V13_3],
    }
    AtomicRedViewTko = 117, "atomic_red_view_tko", V13_3 {
        results: Counted["result_token_type" since V13_3],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering) since V13_3,
            "memory_scope": Enum(MemoryScope) since V13_3,
            "mode": Enum(AtomicRmwMode) since V13_3,
            "inbounds": BoolArray since V13_5,
        ],
        operands: [
            "view" since V13_3,
            "index": SizedVariadic since V13_3,
            "value" since V13_3,
            "token": Optional(0) since V13_3,
        ],
    }
    Insert = 118, "insert", V13_4 {
        results: Counted["result_type" since V13_4],
        operand_count_prefix: 2,
        operands: ["source" since V13_4, "destination" since V13_4, "indices": UnsizedVariadic since V13_4],
    }
    GdcLaunchDependentsTko = 119, "gdc_launch_dependents_tko", V13_4 {
        results: Fixed["result_token_type" since V13_4],
        operands: ["token": CountedOptional since V13_4],
    }
    GdcWaitTko = 120, "gdc_wait_tko", V13_4 {
        results: Fixed["result_token_type" since V13_4],
        operands: ["token": CountedOptional since V13_4],
    }
    FPowI = 121, "fpowi", V13_4 {
        results: Fixed["result_type" since V13_4],
        operands: ["source" since V13_4, "exponent" since V13_4],
    }
    MemoryFenceAliasTko = 122, "memory_fence_alias_tko", V13_4 {
        results: Fixed["result_token_type" since V13_4],
        operands: ["token" since V13_4],
    }
    MultimemLoadReduceViewTko = 123, "multimem_load_reduce_view_tko", V13_5 {
        results: Counted["reduced_values_type" since V13_5, "result_token_type" since V13_5],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering) since V13_5,
            "memory_scope": Enum(MemoryScope) flag 0 since V13_5,
            "reduction": Enum(MultimemReductionKind) since V13_5,
            "inbounds": BoolArray since V13_5,
        ],
        operands: ["view" since V13_5, "index": SizedVariadic since V13_5, "token": Optional(1) since V13_5],
    }
    MultimemReduceViewTko = 124, "multimem_reduce_view_tko", V13_5 {
        results: Counted["result_token_type" since V13_5],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering) since V13_5,
            "memory_scope": Enum(MemoryScope) since V13_5,
            "reduction": Enum(MultimemReductionKind) since V13_5,
            "inbounds": BoolArray since V13_5,
        ],
        operands: [
            "view" since V13_5,
            "tile" since V13_5,
            "index": SizedVariadic since V13_5,
            "token": Optional(0) since V13_5,
        ],
    }
    MultimemStoreViewTko = 125, "multimem_store_view_tko", V13_5 {
        results: Counted["result_token_type" since V13_5],
        flags: V13_1,
        attrs: [
            "memory_ordering_semantics": Enum(MemoryOrdering) since V13_5,
            "memory_scope": Enum(MemoryScope) flag 0 since V13_5,
            "inbounds": BoolArray since V13_5,
        ],
        operands: [
            "view" since V13_5,
            "tile" since V13_5,
            "index": SizedVariadic since V13_5,
            "token": Optional(1) since V13_5,
        ],
    }
    PreviewCall = 16386, "preview$call", V13_1 {
        results: Variadic,
        flags: V13_1,
        attrs: [
            "callee": Str,
            "const_args": TaggedArray,
            "arg_attrs": TaggedArray flag 0,
            "res_attrs": TaggedArray flag 1,
        ],
        operand_count_prefix: 0,
        operands: ["operands": UnsizedVariadic],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_opcode_order_with_unique_names() {
        for w in OPS.windows(2) {
            assert!(
                (w[0].op as u32) < (w[1].op as u32),
                "{:?} before {:?}",
                w[0].op,
                w[1].op
            );
        }
        let mut names: Vec<&str> = OPS.iter().map(|s| s.mnemonic).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OPS.len(), "duplicate mnemonic");
    }

    #[test]
    fn every_row_decodes_to_itself() {
        for s in OPS {
            assert_eq!(Opcode::from_u32(s.op as u32), Some(s.op));
            assert_eq!(s.op.schema().mnemonic, s.mnemonic);
            assert_eq!(s.op.mnemonic(), s.mnemonic);
            assert_eq!(Opcode::from_mnemonic(s.mnemonic), Some(s.op));
        }
    }
}
