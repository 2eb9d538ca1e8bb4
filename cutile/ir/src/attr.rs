//! Attributes: the enum kinds ops carry untagged, the self-contained ("tagged") attributes used in arrays,
//! dictionaries and hints, optimization hints, and the preview (SIMT) attributes of foreign declarations.

use crate::types::Type;

/// The enum families that appear as op attributes; every value is one varint byte in bytecode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EnumKind {
    AtomicRmwMode,
    ComparisonOrdering,
    ComparisonPredicate,
    IntegerOverflow,
    MemoryOrdering,
    MemoryScope,
    RoundingMode,
    Signedness,
    SymbolVisibility,
    Synchronization,
    MultimemReductionKind,
}

impl EnumKind {
    /// Text spellings indexed by the encoded value.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            EnumKind::AtomicRmwMode => &[
                "and", "or", "xor", "add", "addf", "max", "min", "umax", "umin", "xchg",
            ],
            EnumKind::ComparisonOrdering => &["unordered", "ordered"],
            EnumKind::ComparisonPredicate => &[
                "equal",
                "not_equal",
                "less_than",
                "less_than_or_equal",
                "greater_than",
                "greater_than_or_equal",
            ],
            EnumKind::IntegerOverflow => &["none", "nsw", "nuw", "nw"],
            EnumKind::MemoryOrdering => &["weak", "relaxed", "acquire", "release", "acq_rel"],
            EnumKind::MemoryScope => &["tl_blk", "device", "sys"],
            EnumKind::RoundingMode => &[
                "nearest_even",
                "zero",
                "negative_inf",
                "positive_inf",
                "approx",
                "full",
                "nearest_int_to_zero",
                "nearest_away",
            ],
            EnumKind::Signedness => &["unsigned", "signed"],
            EnumKind::SymbolVisibility => &["public", "private"],
            EnumKind::Synchronization => &["none", "warp", "warpgroup", "cta"],
            EnumKind::MultimemReductionKind => {
                &["add", "min", "max", "and", "or", "xor", "umin", "umax"]
            }
        }
    }
    pub fn count(self) -> u8 {
        self.names().len() as u8
    }
}

/// One enum value: its family and encoded number (validated against [`EnumKind::count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EnumValue {
    pub kind: EnumKind,
    pub value: u8,
}

impl EnumValue {
    pub fn new(kind: EnumKind, value: u8) -> Option<EnumValue> {
        (value < kind.count()).then_some(EnumValue { kind, value })
    }
    pub fn name(self) -> &'static str {
        self.kind
            .names()
            .get(self.value as usize)
            .copied()
            .unwrap_or("?")
    }
}

/// A Rust enum for one [`EnumKind`], convertible to and from the encoded number.
pub trait TypedEnum: Copy + Into<EnumValue> + 'static {
    /// The family it encodes.
    const KIND: EnumKind;
    /// The variant with this encoded number, if any.
    fn from_u8(v: u8) -> Option<Self>;
    /// Text spelling (as in [`EnumKind::names`]).
    fn name(self) -> &'static str {
        self.into().name()
    }
}

impl EnumValue {
    /// This value as the typed enum `E`, if it belongs to `E`'s family and is in range.
    pub fn typed<E: TypedEnum>(self) -> Option<E> {
        if self.kind == E::KIND {
            E::from_u8(self.value)
        } else {
            None
        }
    }
}

macro_rules! typed_enum {
    ($(#[$m:meta])* $name:ident : $kind:ident { $($var:ident = $v:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($var = $v),* }
        impl From<$name> for EnumValue {
            fn from(x: $name) -> EnumValue { EnumValue { kind: EnumKind::$kind, value: x as u8 } }
        }
        impl TypedEnum for $name {
            const KIND: EnumKind = EnumKind::$kind;
            fn from_u8(v: u8) -> Option<$name> {
                $(if v == $v { return Some($name::$var); })*
                None
            }
        }
    };
}

typed_enum!(
    /// Rounding of floating-point results.
    RoundingMode: RoundingMode {
    NearestEven = 0, Zero = 1, NegativeInf = 2, PositiveInf = 3, Approx = 4, Full = 5, NearestIntToZero = 6, NearestAway = 7
});
typed_enum!(
    /// Comparison predicate of `cmpf` / `cmpi`.
    ComparisonPredicate: ComparisonPredicate {
    Equal = 0, NotEqual = 1, LessThan = 2, LessThanOrEqual = 3, GreaterThan = 4, GreaterThanOrEqual = 5
});
typed_enum!(
    /// NaN handling of `cmpf`.
    ComparisonOrdering: ComparisonOrdering { Unordered = 0, Ordered = 1 });
typed_enum!(
    /// Integer signedness of conversions, comparisons and division.
    Signedness: Signedness { Unsigned = 0, Signed = 1 });
typed_enum!(
    /// Overflow flags of integer arithmetic.
    IntegerOverflow: IntegerOverflow { None = 0, Nsw = 1, Nuw = 2, Nw = 3 });
typed_enum!(
    /// Memory ordering semantics of loads, stores and atomics.
    MemoryOrdering: MemoryOrdering { Weak = 0, Relaxed = 1, Acquire = 2, Release = 3, AcqRel = 4 });
typed_enum!(
    /// Memory scope of atomics and ordered accesses.
    MemoryScope: MemoryScope { TlBlk = 0, Device = 1, Sys = 2 });
typed_enum!(
    /// Atomic read-modify-write operation.
    AtomicRmwMode: AtomicRmwMode {
    And = 0, Or = 1, Xor = 2, Add = 3, AddF = 4, Max = 5, Min = 6, UMax = 7, UMin = 8, Xchg = 9
});
typed_enum!(
    /// Symbol visibility of globals and functions.
    SymbolVisibility: SymbolVisibility { Public = 0, Private = 1 });

/// Optimization hints keyed by architecture (`"sm_90"`, …) or `"default"` (13.3+, architecture-independent).
/// Each value is a dictionary, e.g. `{num_worker_warps_per_cta = 8}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct OptimizationHints {
    pub by_arch: Vec<(String, Vec<(String, Attribute)>)>,
}

impl OptimizationHints {
    /// `{default = {}}`: what cuTile writes for a kernel without hints.
    pub fn empty_default() -> Self {
        OptimizationHints {
            by_arch: vec![("default".into(), vec![])],
        }
    }
    /// Set (or replace) one integer hint for one arch key.
    pub fn set_i32(&mut self, arch: &str, key: &str, value: i32) {
        self.set(arch, key, Attribute::i32(value));
    }
    pub fn set(&mut self, arch: &str, key: &str, value: Attribute) {
        let dict = match self.by_arch.iter_mut().position(|(a, _)| a == arch) {
            Some(i) => &mut self.by_arch[i].1,
            None => {
                self.by_arch.push((arch.to_string(), vec![]));
                &mut self.by_arch.last_mut().expect("just pushed").1
            }
        };
        match dict.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => dict.push((key.to_string(), value)),
        }
    }
}

/// Access mode of a foreign function's operand (`preview$access`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    In = 0,
    Out = 1,
    InOut = 2,
}

impl Access {
    pub fn from_u8(v: u8) -> Option<Access> {
        Some(match v {
            0 => Access::In,
            1 => Access::Out,
            2 => Access::InOut,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Access::In => "in",
            Access::Out => "out",
            Access::InOut => "inout",
        }
    }
}

/// Binary operators of preview symbolic expressions (tags 211–215 and 218).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExprBinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    CeilDiv,
}

/// Self-contained ("tagged") attributes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attribute {
    /// Integer of a scalar integer type; `value` holds the bits masked to the width.
    Integer {
        ty: Type,
        value: u64,
    },
    /// Float of a scalar float type, as its bit pattern.
    Float {
        ty: Type,
        bits: u64,
    },
    Bool(bool),
    Type(Type),
    String(String),
    Array(Vec<Attribute>),
    /// Dense elements: the type and the raw little-endian buffer (a splat holds one element).
    DenseElements {
        ty: Type,
        data: Vec<u8>,
    },
    /// `div_by<N>` (optionally `every`/`along`): an assume predicate.
    DivBy {
        divisor: u64,
        every: Option<i64>,
        along: Option<i64>,
    },
    /// `same_elements<[…]>`: an assume predicate.
    SameElements(Vec<i64>),
    Dictionary(Vec<(String, Attribute)>),
    OptimizationHints(OptimizationHints),
    /// `bounded<lb, ub>`: an assume predicate; `None` is unbounded (`?`).
    Bounded {
        lb: Option<i64>,
        ub: Option<i64>,
    },
    /// 13.5 tag 13.
    MultimemReductionKind(u8),
    // ---- preview (SIMT) attributes, 13.5 with the preview flag ----
    /// `preview$access<in|out|inout>` (tag 223).
    Access(Access),
    /// A constant parameter of a foreign declaration (tag 226): name and kind (a preview type).
    ConstParam {
        name: String,
        ty: Type,
    },
    /// Symbolic integer (tag 209).
    ExprInt(i64),
    /// Symbolic variable (tag 210).
    ExprVar(String),
    /// Binary symbolic expression.
    ExprBinary {
        op: ExprBinOp,
        lhs: Box<Attribute>,
        rhs: Box<Attribute>,
    },
    /// Unary negation (tag 220).
    ExprNeg(Box<Attribute>),
    /// A tuple of symbolic expressions, e.g. a shape (tag 216).
    SymbolicTuple(Vec<Attribute>),
    /// A concrete element type used as a datatype constant argument (tag 219).
    ConcreteType(Type),
    /// Builtin expression named `context.…` (tag 227).
    ExprBuiltin(String),
    /// Constant string expression (tag 228).
    ExprConstStr(String),
}

impl Attribute {
    pub fn i32(v: i32) -> Attribute {
        Attribute::Integer {
            ty: Type::Scalar(crate::ScalarType::I32),
            value: v as u32 as u64,
        }
    }
    pub fn i64(v: i64) -> Attribute {
        Attribute::Integer {
            ty: Type::Scalar(crate::ScalarType::I64),
            value: v as u64,
        }
    }
    pub fn f32(v: f32) -> Attribute {
        Attribute::Float {
            ty: Type::Scalar(crate::ScalarType::F32),
            bits: v.to_bits() as u64,
        }
    }
    /// Whether this attribute (or any nested one) needs the preview flag.
    pub fn is_preview(&self) -> bool {
        match self {
            Attribute::Access(_)
            | Attribute::ConstParam { .. }
            | Attribute::ExprInt(_)
            | Attribute::ExprVar(_)
            | Attribute::ExprBinary { .. }
            | Attribute::ExprNeg(_)
            | Attribute::SymbolicTuple(_)
            | Attribute::ConcreteType(_)
            | Attribute::ExprBuiltin(_)
            | Attribute::ExprConstStr(_) => true,
            Attribute::Array(items) => items.iter().any(Attribute::is_preview),
            Attribute::Dictionary(items) => items.iter().any(|(_, a)| a.is_preview()),
            Attribute::Type(t) => t.is_preview(),
            _ => false,
        }
    }
}
