//! Element types of tiles and tensors, as Rust types, and their Tile IR scalar types.
//!
//! The traits form the categories the DSL's typed signatures ask for: [`ElementType`] (anything a tile may
//! hold), [`Numeric`] (arithmetic), [`Float`] (transcendental functions), [`Int`] (bitwise operations and
//! integer division), and [`MmaOperand`] (valid `mma` input/accumulator pairs). Types without a Rust
//! counterpart (tf32 and the 8-bit floats) are zero-sized markers.

use cutile_ir::ScalarType;

pub use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
}

/// An element type of tiles and tensors. Sealed: the set is fixed by Tile IR.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tile element type",
    label = "not a tile element type",
    note = "tile element types are bool, i8, i16, i32, i64, f16, bf16, f32, f64, tf32, f8e4m3fn and f8e5m2"
)]
pub trait ElementType: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The Tile IR scalar type.
    const SCALAR: ScalarType;
}

/// Element types with arithmetic (`+ - * /`, comparisons, min/max).
#[diagnostic::on_unimplemented(
    message = "`{Self}` tiles have no arithmetic",
    label = "arithmetic needs a numeric element type",
    note = "convert with `.cast::<f32>()` first: bool, tf32 and the 8-bit floats only take part in conversions and `mma`"
)]
pub trait Numeric: ElementType {}

/// Floating-point element types with transcendental functions (exp, log, sqrt, tanh, …).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a floating-point element type",
    label = "this operation needs f16, bf16, f32 or f64 elements",
    note = "convert with `.cast::<f32>()` first"
)]
pub trait Float: Numeric {}

/// Integer element types (bitwise operations, shifts, integer division).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an integer element type",
    label = "this operation needs i8, i16, i32 or i64 elements"
)]
pub trait Int: Numeric {}

/// `Self` may be an `mma` input with accumulator element type `Acc`.
#[diagnostic::on_unimplemented(
    message = "`mma` does not take `{Self}` inputs with a `{Acc}` accumulator",
    label = "unsupported mma element types",
    note = "valid pairs: f16/bf16/tf32/f8e4m3fn/f8e5m2 inputs with an f32 accumulator (f16 also with f16), f64 with f64, i8 with i32"
)]
pub trait MmaOperand<Acc: ElementType>: ElementType {}

/// The 8-bit float element types (e4m3 and e5m2): the inputs whose `mma` may use Hopper's fast accumulation
/// ([`crate::core::mma_fast_acc`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an fp8 element type",
    label = "fast accumulation applies to f8e4m3fn and f8e5m2 inputs only"
)]
pub trait Fp8: MmaOperand<f32> {}

macro_rules! elem {
    ($($t:ty => $s:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl ElementType for $t { const SCALAR: ScalarType = ScalarType::$s; }
    )*};
}

/// TensorFloat-32: f32 storage whose `mma` rounds inputs to a 10-bit mantissa.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct tf32;
/// 8-bit float, 4 exponent and 3 mantissa bits, finite only (OCP E4M3).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct f8e4m3fn;
/// 8-bit float, 5 exponent and 2 mantissa bits (OCP E5M2).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct f8e5m2;

/// 4-bit float, 2 exponent and 1 mantissa bit, finite only (OCP E2M1: ±0, 0.5, 1, 1.5, 2, 3, 4, 6), two
/// per byte (element `2j` in the low nibble of byte `j`). An input of [`crate::core::mma_scaled`]
/// (Blackwell, sm_100+); a tile of it comes from bytes through [`crate::core::Tile::reinterpret`].
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct f4e2m1fn;
/// 8-bit power-of-two scale (OCP E8M0: exponent only, bias 127, `0xFF` NaN): the MX formats' block
/// scale.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct f8e8m0fnu;

elem!(
    bool => I1, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    f16 => F16, bf16 => BF16, f32 => F32, f64 => F64,
    tf32 => TF32, f8e4m3fn => F8E4M3FN, f8e5m2 => F8E5M2,
    f4e2m1fn => F4E2M1FN, f8e8m0fnu => F8E8M0FNU,
);

/// `Self` may be an input of [`crate::core::mma_scaled`] with block scales of element type `Scale`:
/// each scale multiplies `BLOCK_16` / `BLOCK_32` consecutive elements along K (Tile IR `mmaf_scaled`:
/// e2m1 with e4m3 scales in blocks of 16 (NVFP4), e2m1 with e8m0 scales in blocks of 16 or 32 (MXFP4),
/// e4m3 / e5m2 with e8m0 scales in blocks of 32 (MXFP8); f32 accumulation).
#[diagnostic::on_unimplemented(
    message = "`mma_scaled` does not take `{Self}` inputs with `{Scale}` block scales",
    label = "unsupported block-scaled mma element types",
    note = "valid pairs: f4e2m1fn with f8e4m3fn (blocks of 16) or f8e8m0fnu (16 or 32); f8e4m3fn or f8e5m2 with f8e8m0fnu (32)"
)]
pub trait BlockScaled<Scale: ElementType>: ElementType {
    /// Whether a scale may cover 16 elements.
    const BLOCK_16: bool;
    /// Whether a scale may cover 32 elements.
    const BLOCK_32: bool;
}

impl BlockScaled<f8e4m3fn> for f4e2m1fn {
    const BLOCK_16: bool = true;
    const BLOCK_32: bool = false;
}
impl BlockScaled<f8e8m0fnu> for f4e2m1fn {
    const BLOCK_16: bool = true;
    const BLOCK_32: bool = true;
}
impl BlockScaled<f8e8m0fnu> for f8e4m3fn {
    const BLOCK_16: bool = false;
    const BLOCK_32: bool = true;
}
impl BlockScaled<f8e8m0fnu> for f8e5m2 {
    const BLOCK_16: bool = false;
    const BLOCK_32: bool = true;
}

impl Numeric for i8 {}
impl Numeric for i16 {}
impl Numeric for i32 {}
impl Numeric for i64 {}
impl Numeric for f16 {}
impl Numeric for bf16 {}
impl Numeric for f32 {}
impl Numeric for f64 {}
impl Int for i8 {}
impl Int for i16 {}
impl Int for i32 {}
impl Int for i64 {}
impl Float for f16 {}
impl Float for bf16 {}
impl Float for f32 {}
impl Float for f64 {}

impl MmaOperand<f32> for f16 {}
impl MmaOperand<f16> for f16 {}
impl MmaOperand<f32> for bf16 {}
impl MmaOperand<f32> for tf32 {}
impl MmaOperand<f32> for f8e4m3fn {}
impl MmaOperand<f32> for f8e5m2 {}
impl Fp8 for f8e4m3fn {}
impl Fp8 for f8e5m2 {}
impl MmaOperand<f64> for f64 {}
impl MmaOperand<i32> for i8 {}

/// The bytes of a host number as one element of `ty` (little-endian, as dense constants store it), or why it
/// does not fit.
pub(crate) fn scalar_bytes(ty: ScalarType, v: HostNum) -> Result<Vec<u8>, String> {
    use ScalarType as T;
    let as_int = |bits: u32| -> Result<i64, String> {
        let i = match v {
            HostNum::Int(i) => i,
            HostNum::Bool(b) => b as i64,
            HostNum::Float(f) => {
                if f.fract() != 0.0 || !f.is_finite() {
                    return Err(format!(
                        "{f} is not an integer, so it cannot be a {ty} constant"
                    ));
                }
                f as i64
            }
        };
        let (lo, hi) = if bits == 64 {
            (i64::MIN, i64::MAX)
        } else {
            (-(1i64 << (bits - 1)), (1i64 << bits) - 1)
        };
        if i < lo || i > hi {
            return Err(format!("{i} does not fit in {ty}"));
        }
        Ok(i)
    };
    let as_f64 = || match v {
        HostNum::Float(f) => f,
        HostNum::Int(i) => i as f64,
        HostNum::Bool(b) => b as u8 as f64,
    };
    Ok(match ty {
        T::I1 => vec![match v {
            HostNum::Bool(b) => b as u8,
            _ => (as_int(1)? != 0) as u8,
        }],
        T::I8 => vec![as_int(8)? as u8],
        T::I16 => (as_int(16)? as u16).to_le_bytes().to_vec(),
        T::I32 => (as_int(32)? as u32).to_le_bytes().to_vec(),
        T::I64 => as_int(64)?.to_le_bytes().to_vec(),
        T::F16 => f16::from_f64(as_f64()).to_le_bytes().to_vec(),
        T::BF16 => bf16::from_f64(as_f64()).to_le_bytes().to_vec(),
        T::F32 | T::TF32 => (as_f64() as f32).to_le_bytes().to_vec(),
        T::F64 => as_f64().to_le_bytes().to_vec(),
        T::F8E4M3FN => vec![f32_to_f8(as_f64() as f32, 4, 3, true)],
        T::F8E5M2 => vec![f32_to_f8(as_f64() as f32, 5, 2, false)],
        other => return Err(format!("constants of {other} are not supported")),
    })
}

/// A host-side number on its way into a device constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostNum {
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// Host number types usable as constants in tile expressions (`x * 2.0`, `full(0)`).
pub trait HostConst: Copy {
    fn host_num(self) -> HostNum;
}
impl HostConst for f32 {
    fn host_num(self) -> HostNum {
        HostNum::Float(self as f64)
    }
}
impl HostConst for f64 {
    fn host_num(self) -> HostNum {
        HostNum::Float(self)
    }
}
impl HostConst for i32 {
    fn host_num(self) -> HostNum {
        HostNum::Int(self as i64)
    }
}
impl HostConst for i64 {
    fn host_num(self) -> HostNum {
        HostNum::Int(self)
    }
}
impl HostConst for bool {
    fn host_num(self) -> HostNum {
        HostNum::Bool(self)
    }
}
impl HostConst for f16 {
    fn host_num(self) -> HostNum {
        HostNum::Float(self.to_f64())
    }
}
impl HostConst for bf16 {
    fn host_num(self) -> HostNum {
        HostNum::Float(self.to_f64())
    }
}

/// Round an f32 to an 8-bit float with `e` exponent and `m` mantissa bits, round-to-nearest-even, saturating
/// to the largest finite value for the finite-only E4M3FN format (its all-ones pattern is NaN).
fn f32_to_f8(x: f32, e: u32, m: u32, finite_only: bool) -> u8 {
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let bias = (1i32 << (e - 1)) - 1;
    let max_code: u8 = if finite_only {
        0x7E
    } else {
        ((((1u32 << e) - 2) << m) | ((1 << m) - 1)) as u8
    };
    if x.is_nan() {
        return 0x7F | sign;
    }
    let a = x.abs();
    if a.is_infinite() {
        return sign
            | if finite_only {
                max_code
            } else {
                (((1u32 << e) - 1) << m) as u8
            };
    }
    // Enumerate the positive codes and pick the nearest (ties to even code); 128 candidates is cheap.
    let decode = |c: u8| -> f32 {
        let ex = (c >> m) as i32;
        let mant = (c & ((1 << m) - 1)) as f32;
        if ex == 0 {
            mant / (1 << m) as f32 * 2f32.powi(1 - bias)
        } else {
            (1.0 + mant / (1 << m) as f32) * 2f32.powi(ex - bias)
        }
    };
    let mut best = 0u8;
    let mut best_err = f32::INFINITY;
    for c in 0..=max_code {
        let err = (decode(c) - a).abs();
        if err < best_err || (err == best_err && c % 2 == 0) {
            best = c;
            best_err = err;
        }
    }
    sign | best
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn f8_known_values() {
        // E4M3FN: 1.0 = 0x38, 448 = 0x7E (max), -2.0 = 0xC0; E5M2: 1.0 = 0x3C, 57344 = 0x7B.
        assert_eq!(f32_to_f8(1.0, 4, 3, true), 0x38);
        assert_eq!(f32_to_f8(448.0, 4, 3, true), 0x7E);
        assert_eq!(f32_to_f8(1e6, 4, 3, true), 0x7E);
        assert_eq!(f32_to_f8(-2.0, 4, 3, true), 0xC0);
        assert_eq!(f32_to_f8(1.0, 5, 2, false), 0x3C);
        assert_eq!(f32_to_f8(57344.0, 5, 2, false), 0x7B);
    }

    #[test]
    fn constants_checked() {
        assert_eq!(
            scalar_bytes(ScalarType::I32, HostNum::Int(-1)).unwrap(),
            vec![0xff; 4]
        );
        assert!(scalar_bytes(ScalarType::I8, HostNum::Int(300)).is_err());
        assert!(scalar_bytes(ScalarType::I32, HostNum::Float(1.5)).is_err());
        assert_eq!(
            scalar_bytes(ScalarType::BF16, HostNum::Float(1.0)).unwrap(),
            bf16::ONE.to_le_bytes().to_vec()
        );
    }
}
