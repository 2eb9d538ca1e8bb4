//! Float literals exactly as MLIR prints them (`printFloatValue` over LLVM's `APFloat::toString`).
//!
//! MLIR first tries the 6-digit scientific form (`1.500000e+00`) and keeps it if it reads back to the same
//! bits; otherwise it prints the shortest-precision decimal form (`0.333333343`) if that has a decimal point;
//! infinities, NaNs and whatever is left print as the raw bit pattern in hex (`0xFF800000`). The digit
//! generation below reproduces `APFloat::toString` step by step (including its truncate-then-round quirks),
//! so every value prints as tileirdisasm prints it.

use crate::types::ScalarType;

/// IEEE-like layout of a float type: explicit mantissa bits, exponent bits, and how it spells inf/NaN.
#[derive(Clone, Copy, Debug)]
struct Format {
    mant: u32,
    exp: u32,
    /// Whether the type has a sign bit.
    signed: bool,
    /// Special-case encoding of NaN in non-IEEE types.
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Ieee,
    /// f8E4M3FN: no inf; NaN is exponent and mantissa all ones.
    FiniteNanAllOnes,
    /// f8E8M0FNU: exponent only, no zero, 0xFF is NaN.
    E8M0,
    /// f4E2M1FN / fnv8E5M3FNU style: no inf, no NaN (fnv8: treated as finite).
    Finite,
}

fn format_of(t: ScalarType) -> Option<Format> {
    use ScalarType::*;
    let f = |mant, exp, kind: Kind| Format {
        mant,
        exp,
        signed: kind != Kind::E8M0,
        kind,
    };
    Some(match t {
        F16 => f(10, 5, Kind::Ieee),
        BF16 => f(7, 8, Kind::Ieee),
        F32 => f(23, 8, Kind::Ieee),
        F64 => f(52, 11, Kind::Ieee),
        TF32 => f(10, 8, Kind::Ieee),
        F8E5M2 => f(2, 5, Kind::Ieee),
        F8E4M3FN => f(3, 4, Kind::FiniteNanAllOnes),
        F8E8M0FNU => f(0, 8, Kind::E8M0),
        F4E2M1FN => f(1, 2, Kind::Finite),
        FNV8E5M3FNU => f(3, 5, Kind::Finite),
        _ => return None,
    })
}

/// A decoded finite value: sign, integer significand and binary exponent (value = sig * 2^exp).
enum Decoded {
    Zero { neg: bool },
    Finite { neg: bool, sig: u64, exp: i32 },
    Special,
}

fn decode(f: &Format, bits: u64) -> Decoded {
    let mant_mask = (1u64 << f.mant) - 1;
    let exp_mask = (1u64 << f.exp) - 1;
    let m = bits & mant_mask;
    let e = (bits >> f.mant) & exp_mask;
    let neg = f.signed && (bits >> (f.mant + f.exp)) & 1 == 1;
    let bias = (1i32 << (f.exp - 1)) - 1;
    match f.kind {
        Kind::E8M0 => {
            if e == exp_mask {
                return Decoded::Special;
            }
            return Decoded::Finite {
                neg: false,
                sig: 1,
                exp: e as i32 - 127,
            };
        }
        Kind::Ieee if e == exp_mask => return Decoded::Special,
        Kind::FiniteNanAllOnes if e == exp_mask && m == mant_mask => return Decoded::Special,
        _ => {}
    }
    if e == 0 {
        if m == 0 {
            return Decoded::Zero { neg };
        }
        return Decoded::Finite {
            neg,
            sig: m,
            exp: 1 - bias - f.mant as i32,
        };
    }
    Decoded::Finite {
        neg,
        sig: m | (1u64 << f.mant),
        exp: e as i32 - bias - f.mant as i32,
    }
}

/// The bits of a float type's value as written in dense constants, printed as MLIR does.
pub(crate) fn format_float_bits(t: ScalarType, bits: u64) -> String {
    let Some(f) = format_of(t) else {
        return format!("0x{bits:X}");
    };
    let width = 1 + f.mant + f.exp - u32::from(!f.signed);
    let bits = if width >= 64 {
        bits
    } else {
        bits & ((1u64 << width) - 1)
    };
    let hex = || format!("0x{bits:X}");
    let (neg, sig, exp) = match decode(&f, bits) {
        Decoded::Special => return hex(),
        Decoded::Zero { neg } => {
            // APFloat prints zero as "0.0" padded to the precision, with "e+00".
            return format!("{}0.000000e+00", if neg { "-" } else { "" });
        }
        Decoded::Finite { neg, sig, exp } => (neg, sig, exp),
    };
    let short = to_string_digits(neg, exp, sig, 6, 0, false);
    if reads_back(&short, t, bits) {
        return short;
    }
    // `APFloat::toString()` defaults: precision from the type (Steele & White), padding 3, truncated zeros.
    let precision = f.mant + 1;
    let long = to_string_digits(neg, exp, sig, 2 + precision * 59 / 196, 3, true);
    if long.contains('.') {
        return long;
    }
    hex()
}

/// Whether MLIR's parser would read `text` back to exactly `bits` in type `t`.
fn reads_back(text: &str, t: ScalarType, bits: u64) -> bool {
    match t {
        ScalarType::F64 => text.parse::<f64>().is_ok_and(|v| v.to_bits() == bits),
        ScalarType::F32 => text
            .parse::<f32>()
            .is_ok_and(|v| v.to_bits() as u64 == bits),
        _ => {
            // A 7-significant-digit decimal is never close enough to a rounding midpoint of a ≤ 24-bit type for
            // the double rounding through f64 to matter.
            let Ok(v) = text.parse::<f64>() else {
                return false;
            };
            round_f64_to(t, v) == Some(bits)
        }
    }
}

/// Round an f64 to the nearest value of a small float type (ties to even); None if the type has no finite
/// encoding for the result.
fn round_f64_to(t: ScalarType, v: f64) -> Option<u64> {
    match t {
        ScalarType::F16 => return Some(half::f16::from_f64(v).to_bits() as u64),
        ScalarType::BF16 => return Some(half::bf16::from_f64(v).to_bits() as u64),
        ScalarType::TF32 => {
            // tf32 is f32 with a 10-bit mantissa: round the f32 bits to nearest even on bit 13.
            let b = (v as f32).to_bits();
            let lsb = (b >> 13) & 1;
            let r = b.wrapping_add(0x0fff + lsb) >> 13;
            return Some(r as u64);
        }
        _ => {}
    }
    // The remaining types have at most 8 bits: pick the nearest of all finite encodings, ties to even.
    let f = format_of(t)?;
    let width = 1 + f.mant + f.exp - u32::from(!f.signed);
    let mut best: Option<(u64, f64)> = None;
    for bits in 0..(1u64 << width) {
        let val = match decode(&f, bits) {
            Decoded::Special => continue,
            Decoded::Zero { neg } => {
                if neg {
                    -0.0
                } else {
                    0.0
                }
            }
            Decoded::Finite { neg, sig, exp } => {
                let x = sig as f64 * 2f64.powi(exp);
                if neg { -x } else { x }
            }
        };
        let d = (val - v).abs();
        let better = match best {
            None => true,
            Some((b, bd)) => d < bd || (d == bd && b & 1 == 1),
        };
        if better {
            best = Some((bits, d));
        }
    }
    best.map(|(b, _)| b)
}

/// LLVM's `toStringImpl` digit generation and layout, for a value `sig * 2^exp`.
fn to_string_digits(
    neg: bool,
    mut exp: i32,
    sig: u64,
    format_precision: u32,
    max_padding: u32,
    truncate_zero: bool,
) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    // Ignore trailing binary zeros.
    let tz = sig.trailing_zeros();
    let mut significand = BigUint::from_u64(sig >> tz);
    exp += tz as i32;
    // Change the exponent from 2^e to 10^e.
    if exp > 0 {
        significand.shl(exp as u32);
        exp = 0;
    } else if exp < 0 {
        // N * 2^-e == N * 5^e * 10^-e
        for _ in 0..(-exp) {
            significand.mul_small(5);
        }
    }
    adjust_big_to_precision(&mut significand, &mut exp, format_precision);

    // Digits, least significant first, dropping trailing zeros.
    let mut buffer: Vec<u8> = Vec::new();
    let mut in_trail = true;
    while !significand.is_zero() {
        let d = significand.divrem_small(10) as u8;
        if in_trail && d == 0 {
            exp += 1;
        } else {
            buffer.push(b'0' + d);
            in_trail = false;
        }
    }
    if buffer.is_empty() {
        buffer.push(b'0');
    }
    adjust_digits_to_precision(&mut buffer, &mut exp, format_precision);
    let ndigits = buffer.len();

    let scientific = if max_padding == 0 {
        true
    } else if exp >= 0 {
        exp as u32 > max_padding || ndigits as u32 + exp as u32 > format_precision
    } else {
        let msd = exp + ndigits as i32 - 1;
        if msd >= 0 {
            false
        } else {
            (-msd) as u32 > max_padding
        }
    };
    let digit = |i: usize| buffer[ndigits - 1 - i] as char;

    if scientific {
        exp += ndigits as i32 - 1;
        out.push(digit(0));
        out.push('.');
        if ndigits == 1 && truncate_zero {
            out.push('0');
        } else {
            for i in 1..ndigits {
                out.push(digit(i));
            }
        }
        if !truncate_zero && format_precision as usize > ndigits - 1 {
            for _ in 0..(format_precision as usize - ndigits + 1) {
                out.push('0');
            }
        }
        out.push(if truncate_zero { 'E' } else { 'e' });
        out.push(if exp >= 0 { '+' } else { '-' });
        let e = exp.unsigned_abs();
        if !truncate_zero && e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
        return out;
    }
    if exp >= 0 {
        for i in 0..ndigits {
            out.push(digit(i));
        }
        for _ in 0..exp {
            out.push('0');
        }
        return out;
    }
    let whole = exp + ndigits as i32;
    let mut i = 0usize;
    if whole > 0 {
        while i < whole as usize {
            out.push(digit(i));
            i += 1;
        }
        out.push('.');
    } else {
        out.push_str("0.");
        for _ in 0..(-whole) {
            out.push('0');
        }
    }
    while i < ndigits {
        out.push(digit(i));
        i += 1;
    }
    out
}

/// `AdjustToPrecision(APInt&, …)`: drop whole decimal digits (by truncating division) that cannot matter.
fn adjust_big_to_precision(sig: &mut BigUint, exp: &mut i32, format_precision: u32) {
    let bits = sig.bit_len();
    let required = (format_precision * 196).div_ceil(59);
    if bits <= required {
        return;
    }
    let tens = (bits - required) * 59 / 196;
    if tens == 0 {
        return;
    }
    *exp += tens as i32;
    for _ in 0..tens {
        sig.divrem_small(10);
    }
}

/// `AdjustToPrecision(SmallVector<char>&, …)`: round half up to `format_precision` digits.
fn adjust_digits_to_precision(buffer: &mut Vec<u8>, exp: &mut i32, format_precision: u32) {
    let n = buffer.len();
    let fp = format_precision as usize;
    if n <= fp {
        return;
    }
    let mut first = n - fp;
    if buffer[first - 1] < b'5' {
        while first < n && buffer[first] == b'0' {
            first += 1;
        }
        *exp += first as i32;
        buffer.drain(..first);
        return;
    }
    // Decimal add-with-carry from the first kept digit; digits turned to zero are dropped with it.
    let start = first;
    for d in &mut buffer[start..] {
        if *d == b'9' {
            first += 1;
        } else {
            *d += 1;
            break;
        }
    }
    if first == n {
        *exp += first as i32;
        buffer.clear();
        buffer.push(b'1');
        return;
    }
    *exp += first as i32;
    buffer.drain(..first);
}

/// Just enough arbitrary-precision unsigned arithmetic for the digit generation (little-endian u32 limbs).
#[derive(Clone, Debug)]
struct BigUint {
    limbs: Vec<u32>,
}

impl BigUint {
    fn from_u64(v: u64) -> BigUint {
        let mut b = BigUint {
            limbs: vec![v as u32, (v >> 32) as u32],
        };
        b.trim();
        b
    }
    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }
    fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }
    fn bit_len(&self) -> u32 {
        match self.limbs.last() {
            None => 0,
            Some(&top) => (self.limbs.len() as u32 - 1) * 32 + (32 - top.leading_zeros()),
        }
    }
    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.limbs {
            let v = *l as u64 * m as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }
    fn shl(&mut self, n: u32) {
        for _ in 0..n / 32 {
            self.limbs.insert(0, 0);
        }
        let s = n % 32;
        if s > 0 {
            let mut carry = 0u32;
            for l in &mut self.limbs {
                let v = ((*l as u64) << s) | carry as u64;
                *l = v as u32;
                carry = (v >> 32) as u32;
            }
            if carry != 0 {
                self.limbs.push(carry);
            }
        }
        self.trim();
    }
    /// Divide in place, returning the remainder.
    fn divrem_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.limbs.iter_mut().rev() {
            let v = (rem << 32) | *l as u64;
            *l = (v / d as u64) as u32;
            rem = v % d as u64;
        }
        self.trim();
        rem as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_tileirdisasm_samples() {
        let f32s: &[(f32, &str)] = &[
            (1.5, "1.500000e+00"),
            (0.0, "0.000000e+00"),
            (0.1, "1.000000e-01"),
            (-3.0, "-3.000000e+00"),
            (1.0 / 3.0, "0.333333343"),
            (1e-30, "1.000000e-30"),
            (123456.78, "123456.781"),
            (1e7, "1.000000e+07"),
            (1e10, "1.000000e+10"),
            (f32::INFINITY, "0x7F800000"),
            (f32::NEG_INFINITY, "0xFF800000"),
        ];
        for (v, want) in f32s {
            assert_eq!(
                format_float_bits(ScalarType::F32, v.to_bits() as u64),
                *want
            );
        }
        let f64s: &[(f64, &str)] = &[
            (0.1, "1.000000e-01"),
            (1.0 / 3.0, "0.33333333333333331"),
            (1e300, "1.000000e+300"),
            (-2.5, "-2.500000e+00"),
        ];
        for (v, want) in f64s {
            assert_eq!(format_float_bits(ScalarType::F64, v.to_bits()), *want);
        }
        // f16: 1.0, -0.0, 65504, 0.1
        for (bits, want) in [
            (0x3c00u64, "1.000000e+00"),
            (0x8000, "-0.000000e+00"),
            (0x7bff, "6.550400e+04"),
            (0x2e66, "9.997550e-02"),
        ] {
            assert_eq!(format_float_bits(ScalarType::F16, bits), want);
        }
        assert_eq!(format_float_bits(ScalarType::BF16, 0x3dcd), "1.000980e-01");
        assert_eq!(
            format_float_bits(ScalarType::F8E4M3FN, 0x38),
            "1.000000e+00"
        );
        assert_eq!(format_float_bits(ScalarType::F8E4M3FN, 0xff), "0xFF");
    }
}
