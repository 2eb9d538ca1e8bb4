//! Specialization inputs: the metadata of the actual arrays ([`TensorMeta`]), the layout facts derived from
//! it ([`LayoutFacts`], emitted as `assume` hints and part of the cache key), generic argument values, and
//! the index type chosen from the array extents.

use cutile_ir::ScalarType;

/// What specialization needs to know about one array argument. Shapes and strides are in elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMeta {
    pub dtype: ScalarType,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    /// Alignment of the base address in bytes (a power of two; 256 for a fresh CUDA allocation).
    pub base_align: u64,
}

impl TensorMeta {
    /// A row-major array with a 256-byte aligned base (what a fresh allocation gives).
    pub fn contiguous(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
        }
        TensorMeta {
            dtype,
            shape: shape.to_vec(),
            strides,
            base_align: 256,
        }
    }
    /// The same array with other strides.
    pub fn with_strides(mut self, strides: &[i64]) -> TensorMeta {
        self.strides = strides.to_vec();
        self
    }
    /// The same array with another base alignment.
    pub fn with_base_align(mut self, align: u64) -> TensorMeta {
        self.base_align = align;
        self
    }
    /// The largest element offset reachable (0 for an empty array).
    pub fn max_offset(&self) -> i128 {
        if self.shape.contains(&0) {
            return 0;
        }
        self.shape
            .iter()
            .zip(&self.strides)
            .map(|(&d, &s)| (d as i128 - 1) * s as i128)
            .sum()
    }
}

/// The largest divisor we record: 16 elements / bytes is what vectorized and TMA accesses need.
pub const MAX_DIVISOR: u64 = 16;

/// The largest power of two (≤ [`MAX_DIVISOR`]) dividing `x`; 0 is divisible by everything.
pub fn pow2_divisor(x: i64) -> u64 {
    if x == 0 {
        return MAX_DIVISOR;
    }
    (1u64 << x.unsigned_abs().trailing_zeros().min(63)).min(MAX_DIVISOR)
}

/// The layout facts of one array that a specialization assumes (and that key the kernel cache).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayoutFacts {
    pub dtype: ScalarType,
    /// Base address divisibility in bytes (≤ 16).
    pub base_div: u64,
    /// Per axis: the extent's power-of-two divisibility (≤ 16).
    pub shape_div: Vec<u64>,
    /// Per axis: the stride's power-of-two divisibility (≤ 16), or `None` where the stride is 1 (a static
    /// unit stride in the tensor view).
    pub stride_div: Vec<Option<u64>>,
    /// All strides non-negative (enables `bounded<0, ?>`).
    pub strides_nonneg: bool,
}

impl LayoutFacts {
    pub fn of(m: &TensorMeta) -> LayoutFacts {
        LayoutFacts {
            dtype: m.dtype,
            base_div: if m.base_align == 0 {
                1
            } else {
                (1u64 << m.base_align.trailing_zeros().min(63)).min(MAX_DIVISOR)
            },
            shape_div: m.shape.iter().map(|&d| pow2_divisor(d)).collect(),
            stride_div: m
                .strides
                .iter()
                .map(|&s| if s == 1 { None } else { Some(pow2_divisor(s)) })
                .collect(),
            strides_nonneg: m.strides.iter().all(|&s| s >= 0),
        }
    }
}

/// The value of one generic parameter of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GenericValue {
    /// An element type parameter.
    Type(ScalarType),
    /// An integer const parameter.
    Int(i64),
    /// A bool const parameter.
    Bool(bool),
}

impl std::fmt::Display for GenericValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GenericValue::Type(t) => write!(f, "{t}"),
            GenericValue::Int(i) => write!(f, "{i}"),
            GenericValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Conversion of const generic values to [`GenericValue`] (used by generated code).
pub trait IntoGeneric {
    fn into_generic(self) -> GenericValue;
}
macro_rules! into_generic_int {
    ($($t:ty),*) => {$(
        impl IntoGeneric for $t {
            fn into_generic(self) -> GenericValue {
                GenericValue::Int(self as i64)
            }
        }
    )*};
}
into_generic_int!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);
impl IntoGeneric for bool {
    fn into_generic(self) -> GenericValue {
        GenericValue::Bool(self)
    }
}

/// The integer type of shapes and strides: i32 unless an array needs more.
pub fn choose_index_type(tensors: &[TensorMeta]) -> ScalarType {
    let limit = i32::MAX as i128;
    let big = tensors.iter().any(|m| {
        m.max_offset() > limit
            || m.shape.iter().any(|&d| d as i128 > limit)
            || m.strides
                .iter()
                .any(|&s| s as i128 > limit || (s as i128) < -limit)
    });
    if big {
        ScalarType::I64
    } else {
        ScalarType::I32
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn facts_of_contiguous() {
        let m = TensorMeta::contiguous(ScalarType::F32, &[1000, 48]);
        let f = LayoutFacts::of(&m);
        assert_eq!(f.base_div, 16);
        assert_eq!(f.shape_div, vec![8, 16]);
        assert_eq!(f.stride_div, vec![Some(16), None]);
        let odd = m.with_strides(&[49, 1]).with_base_align(4);
        let f = LayoutFacts::of(&odd);
        assert_eq!(f.stride_div, vec![Some(1), None]);
        assert_eq!(f.base_div, 4);
    }

    #[test]
    fn index_type_from_extents() {
        let small = TensorMeta::contiguous(ScalarType::F32, &[1 << 15, 1 << 15]);
        assert_eq!(choose_index_type(&[small]), ScalarType::I32);
        let big = TensorMeta::contiguous(ScalarType::F32, &[1 << 16, 1 << 16]);
        assert_eq!(choose_index_type(&[big]), ScalarType::I64);
    }
}
