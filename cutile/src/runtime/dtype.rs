//! Element types that device tensors may hold: a sealed trait with a runtime [`DType`] tag.

use std::fmt;

use half::{bf16, f16};

/// The runtime tag of a tensor element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Short lower-case name (`"f32"`, `"bf16"`, …), as used in specialization strings.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    pub fn is_signed(self) -> bool {
        !matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type that can live in device memory as a tensor element. Sealed: the set matches what the
/// kernels and the Tile IR type system support.
pub trait DeviceElement:
    sealed::Sealed + bytemuck::Pod + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// The runtime tag.
    const DTYPE: DType;

    /// The runtime tag (a method for use through generics).
    fn dtype() -> DType {
        Self::DTYPE
    }

    /// Converts from `f64` with Rust `as` semantics (saturating for integers); used by host fills.
    fn from_f64(v: f64) -> Self;

    /// Converts to `f64` (exact for all but the widest integers).
    fn to_f64(self) -> f64;
}

macro_rules! prim_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceElement for $t {
            const DTYPE: DType = DType::$d;
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}

prim_element!(
    f32 => F32, f64 => F64,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
);

macro_rules! half_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceElement for $t {
            const DTYPE: DType = DType::$d;
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            fn to_f64(self) -> f64 { <$t>::to_f64(self) }
        }
    )*};
}

half_element!(f16 => F16, bf16 => BF16);
