//! Constants: scalar values, their encoding as dense little-endian element bytes for every element type
//! (including the 8- and 4-bit floats, rounded to nearest-even), splat and dense `constant` ops, and tagged
//! scalar attributes for reduce/scan identities.

use crate::attr::Attribute;
use crate::ir::{OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::{ScalarType, Type};

use super::error::BuildError;
use super::function::FunctionBuilder;

/// A scalar constant before it is encoded for an element type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Const {
    /// An integer (for float element types it is converted to the nearest float).
    Int(i64),
    /// A float (for integer element types it must be integral).
    Float(f64),
    Bool(bool),
    /// The raw bit pattern of the element (low bits used).
    Bits(u64),
}

impl From<i64> for Const {
    fn from(v: i64) -> Self {
        Const::Int(v)
    }
}
impl From<i32> for Const {
    fn from(v: i32) -> Self {
        Const::Int(v as i64)
    }
}
impl From<f64> for Const {
    fn from(v: f64) -> Self {
        Const::Float(v)
    }
}
impl From<f32> for Const {
    fn from(v: f32) -> Self {
        Const::Float(v as f64)
    }
}
impl From<bool> for Const {
    fn from(v: bool) -> Self {
        Const::Bool(v)
    }
}

/// Small float formats: (exponent bits, mantissa bits, bias, has sign, kind of specials).
#[derive(Clone, Copy)]
enum Special {
    /// e5m2: all-ones exponent is inf (mantissa 0) or NaN.
    Ieee,
    /// e4m3fn: no infinities; all-ones exponent with all-ones mantissa is NaN.
    FiniteNanOnes,
    /// e2m1fn: no infinities, no NaN.
    Finite,
}

fn small_float_format(s: ScalarType) -> Option<(u32, u32, i32, Special)> {
    match s {
        ScalarType::F8E4M3FN => Some((4, 3, 7, Special::FiniteNanOnes)),
        ScalarType::F8E5M2 => Some((5, 2, 15, Special::Ieee)),
        ScalarType::F4E2M1FN => Some((2, 1, 1, Special::Finite)),
        _ => None,
    }
}

/// Decode one small-float bit pattern (None for NaN).
fn decode_small(bits: u32, e: u32, m: u32, bias: i32, sp: Special) -> Option<f64> {
    let sign = if (bits >> (e + m)) & 1 == 1 {
        -1.0
    } else {
        1.0
    };
    let exp = ((bits >> m) & ((1 << e) - 1)) as i32;
    let man = (bits & ((1 << m) - 1)) as f64;
    let all_ones = exp == (1 << e) - 1;
    match sp {
        Special::Ieee if all_ones => {
            return if man == 0.0 {
                Some(sign * f64::INFINITY)
            } else {
                None
            };
        }
        Special::FiniteNanOnes if all_ones && man as u32 == (1 << m) - 1 => return None,
        _ => {}
    }
    let frac = man / (1u32 << m) as f64;
    Some(if exp == 0 {
        sign * frac * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(exp - bias)
    })
}

/// Round `x` to the nearest representable pattern of a small float type (ties to even, saturating to the
/// largest finite value for formats without infinity).
fn encode_small(x: f64, s: ScalarType) -> Option<u64> {
    let (e, m, bias, sp) = small_float_format(s)?;
    let width = 1 + e + m;
    if x.is_nan() {
        return match sp {
            Special::Ieee => Some(((1u64 << (e + m)) - 1) | (1 << (m - 1))),
            Special::FiniteNanOnes => Some((1u64 << (e + m)) - 1),
            Special::Finite => None,
        };
    }
    let mut best: Option<(f64, u32)> = None;
    for bits in 0..(1u32 << width) {
        let Some(v) = decode_small(bits, e, m, bias, sp) else {
            continue;
        };
        if v.is_infinite() && !x.is_infinite() {
            continue;
        }
        if v == 0.0 && (bits >> (e + m)) & 1 != (x.is_sign_negative() as u32) {
            continue;
        }
        let d = if v.is_infinite() && x.is_infinite() && v == x {
            0.0
        } else {
            (v - x).abs()
        };
        let better = match best {
            None => true,
            Some((bd, bb)) => d < bd || (d == bd && bits & 1 == 0 && bb & 1 == 1),
        };
        if better {
            best = Some((d, bits));
        }
    }
    best.map(|(_, b)| b as u64)
}

/// Encode one element of type `s` as the little-endian bytes a dense constant holds for it.
pub fn encode_scalar(s: ScalarType, v: Const) -> Result<Vec<u8>, String> {
    let nbytes = s.storage_bytes();
    let bits: u64 = match (v, s) {
        (Const::Bits(b), _) => b,
        (Const::Bool(b), _) if s.is_integer() => b as u64,
        (Const::Bool(_), _) => return Err(format!("a bool cannot be a {s} constant")),
        (Const::Int(i), _) if s.is_integer() => {
            let w = s.bit_width();
            let (min, max) = if w == 64 {
                (i64::MIN as i128, u64::MAX as i128)
            } else if w == 1 {
                (-1, 1)
            } else {
                (-(1i128 << (w - 1)), (1i128 << w) - 1)
            };
            if (i as i128) < min || (i as i128) > max {
                return Err(format!("{i} does not fit in {s}"));
            }
            (i as u64) & mask(w)
        }
        (Const::Float(f), _) if s.is_integer() => {
            if f.fract() != 0.0 || !f.is_finite() {
                return Err(format!(
                    "{f} is not an integer and cannot be a {s} constant"
                ));
            }
            return encode_scalar(s, Const::Int(f as i64));
        }
        (Const::Int(i), _) => return encode_scalar(s, Const::Float(i as f64)),
        (Const::Float(f), ScalarType::F16) => half::f16::from_f64(f).to_bits() as u64,
        (Const::Float(f), ScalarType::BF16) => half::bf16::from_f64(f).to_bits() as u64,
        (Const::Float(f), ScalarType::F32 | ScalarType::TF32) => (f as f32).to_bits() as u64,
        (Const::Float(f), ScalarType::F64) => f.to_bits(),
        (Const::Float(f), ScalarType::F8E8M0FNU) => {
            // 2^(e - 127); 0xFF is NaN. Only positive powers of two are representable.
            if f.is_nan() || f <= 0.0 || f.log2().fract() != 0.0 {
                return Err(format!(
                    "{f} is not a power of two; f8E8M0FNU holds only 2^k"
                ));
            }
            let e = f.log2() as i64 + 127;
            if !(0..=254).contains(&e) {
                return Err(format!("{f} is out of the range of f8E8M0FNU"));
            }
            e as u64
        }
        (Const::Float(f), _) => encode_small(f, s).ok_or_else(|| {
            format!("{f} cannot be encoded as {s}; pass Const::Bits with the bit pattern")
        })?,
    };
    Ok(bits.to_le_bytes()[..nbytes].to_vec())
}

fn mask(w: u32) -> u64 {
    if w >= 64 { u64::MAX } else { (1u64 << w) - 1 }
}

/// A tagged scalar attribute (`Integer` or `Float`) of element type `s`, e.g. a reduce identity.
pub fn scalar_attr(s: ScalarType, v: impl Into<Const>) -> Result<Attribute, BuildError> {
    let bytes = encode_scalar(s, v.into()).map_err(BuildError::Usage)?;
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(&bytes);
    let bits = u64::from_le_bytes(buf);
    let ty = Type::Scalar(s);
    Ok(if s.is_integer() {
        Attribute::Integer { ty, value: bits }
    } else {
        Attribute::Float { ty, bits }
    })
}

impl FunctionBuilder<'_> {
    /// A splat constant: every element of `tile<shape x elem>` is `value`.
    pub fn constant(
        &mut self,
        elem: ScalarType,
        shape: &[i64],
        value: impl Into<Const>,
    ) -> Result<ValueId, BuildError> {
        let bytes =
            encode_scalar(elem, value.into()).map_err(|m| BuildError::op(Opcode::Constant, m))?;
        self.constant_bytes(elem, shape, bytes)
    }

    /// A dense constant with one value per element (row-major).
    pub fn constant_dense(
        &mut self,
        elem: ScalarType,
        shape: &[i64],
        values: &[Const],
    ) -> Result<ValueId, BuildError> {
        let n: i64 = shape.iter().product();
        if values.len() as i64 != n {
            return Err(BuildError::op(
                Opcode::Constant,
                format!(
                    "{} values given for {n} elements of shape {shape:?}",
                    values.len()
                ),
            ));
        }
        let mut bytes = Vec::with_capacity(values.len() * elem.storage_bytes());
        for v in values {
            bytes.extend(encode_scalar(elem, *v).map_err(|m| BuildError::op(Opcode::Constant, m))?);
        }
        self.constant_bytes(elem, shape, bytes)
    }

    /// A constant from raw element bytes: one element (a splat) or one per element.
    pub fn constant_bytes(
        &mut self,
        elem: ScalarType,
        shape: &[i64],
        bytes: Vec<u8>,
    ) -> Result<ValueId, BuildError> {
        let mut op = Operation::new(Opcode::Constant);
        op.attrs[0] = Some(OpAttr::Dense(bytes));
        self.emit1(op, Type::tile(elem, shape))
    }

    /// A rank-0 `tile<i32>` constant.
    pub fn const_i32(&mut self, v: i32) -> Result<ValueId, BuildError> {
        self.constant(ScalarType::I32, &[], v)
    }

    /// A rank-0 `tile<i64>` constant.
    pub fn const_i64(&mut self, v: i64) -> Result<ValueId, BuildError> {
        self.constant(ScalarType::I64, &[], v)
    }

    /// A rank-0 `tile<f32>` constant.
    pub fn const_f32(&mut self, v: f32) -> Result<ValueId, BuildError> {
        self.constant(ScalarType::F32, &[], v)
    }

    /// A rank-0 `tile<i1>` constant.
    pub fn const_bool(&mut self, v: bool) -> Result<ValueId, BuildError> {
        self.constant(ScalarType::I1, &[], v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_floats_round_to_nearest() {
        let cases: &[(ScalarType, f64, u64)] = &[
            (ScalarType::F8E4M3FN, 1.0, 0x38),
            (ScalarType::F8E4M3FN, -2.0, 0xC0),
            (ScalarType::F8E4M3FN, 448.0, 0x7E),
            (ScalarType::F8E4M3FN, 1000.0, 0x7E),
            (ScalarType::F8E5M2, 1.0, 0x3C),
            (ScalarType::F8E5M2, f64::INFINITY, 0x7C),
            (ScalarType::F4E2M1FN, 6.0, 0x7),
            (ScalarType::F4E2M1FN, -0.5, 0x9),
            (ScalarType::F4E2M1FN, 0.0, 0x0),
            (ScalarType::F8E8M0FNU, 1.0, 127),
        ];
        for &(s, x, want) in cases {
            let got = encode_scalar(s, Const::Float(x)).expect("encodable");
            assert_eq!(got, vec![want as u8], "{s} {x}");
        }
    }

    #[test]
    fn integers_are_range_checked_and_masked() {
        assert_eq!(
            encode_scalar(ScalarType::I8, Const::Int(-1)),
            Ok(vec![0xFF])
        );
        assert_eq!(
            encode_scalar(ScalarType::I16, Const::Int(300)),
            Ok(vec![0x2C, 0x01])
        );
        assert!(encode_scalar(ScalarType::I8, Const::Int(300)).is_err());
        assert!(encode_scalar(ScalarType::I32, Const::Float(1.5)).is_err());
        assert_eq!(
            encode_scalar(ScalarType::I1, Const::Bool(true)),
            Ok(vec![1])
        );
        assert_eq!(
            encode_scalar(ScalarType::F32, Const::Float(f64::NEG_INFINITY)),
            Ok(0xFF80_0000u32.to_le_bytes().to_vec())
        );
    }
}
