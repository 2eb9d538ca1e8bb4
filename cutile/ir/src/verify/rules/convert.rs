//! Conversions: bitcast, integer extension/truncation, float/int conversions, pointer/int casts and
//! pack/unpack.

use super::*;

/// Rules of the conversion ops.
pub(super) fn check(c: &Ck<'_>) -> R {
    let op = c.op;
    use Opcode::*;
    match op.opcode {
        Bitcast => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (a, b) = match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) => (a, b),
                _ => {
                    return Err(format!(
                        "source and result must be numeric tiles, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            };
            c.same_shape(src, r, "source and result")?;
            if mlir_width(a) != mlir_width(b) {
                return Err(format!(
                    "bit widths differ: {} ({} bits) -> {} ({} bits)",
                    tt(src),
                    mlir_width(a),
                    tt(r),
                    mlir_width(b)
                ));
            }
            Ok(())
        }
        ExtI | TruncI => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            let int_or_i4 = |t: &Type| scalar_tile(t).map(|(s, _)| s).filter(|s| s.is_integer());
            let (a, b) = match (int_or_i4(src), int_or_i4(r)) {
                (Some(a), Some(b)) => (a, b),
                _ => {
                    return Err(format!(
                        "source and result must be integer tiles, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            };
            c.same_shape(src, r, "source and result")?;
            if op.opcode == ExtI && b.bit_width() <= a.bit_width() {
                return Err(format!("must extend to a wider integer, got {a} -> {b}"));
            }
            if op.opcode == TruncI && b.bit_width() >= a.bit_width() {
                return Err(format!(
                    "must truncate to a narrower integer, got {a} -> {b}"
                ));
            }
            Ok(())
        }
        FToF => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            let (a, b) = match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) if a.is_float() && b.is_float() => (a, b),
                _ => {
                    return Err(format!(
                        "source and result must be float tiles, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            };
            c.same_shape(src, r, "source and result")?;
            if a == b {
                return Err(format!("converting {} to itself is not allowed", tt(src)));
            }
            if b == ScalarType::F8E8M0FNU {
                c.rounding(
                    "rounding_mode",
                    &[RoundingMode::Zero, RoundingMode::PositiveInf],
                )?;
            } else {
                c.rounding(
                    "rounding_mode",
                    &[RoundingMode::NearestEven, RoundingMode::Zero],
                )?;
            }
            Ok(())
        }
        FToI => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) if a.is_float() && is_int(b) => {}
                _ => {
                    return Err(format!(
                        "needs a float tile -> integer tile, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            }
            c.same_shape(src, r, "source and result")?;
            c.rounding("rounding_mode", &[RoundingMode::NearestIntToZero])?;
            Ok(())
        }
        IToF => {
            let (src, r) = (c.one("from_")?, c.res(0)?);
            match (scalar_tile(src), scalar_tile(r)) {
                (Some((a, _)), Some((b, _))) if is_int(a) && b.is_float() => {
                    if b == ScalarType::F8E8M0FNU {
                        return Err("integer to f8E8M0FNU conversion is not supported".into());
                    }
                }
                _ => {
                    return Err(format!(
                        "needs an integer tile -> float tile, got {} -> {}",
                        tt(src),
                        tt(r)
                    ));
                }
            }
            c.same_shape(src, r, "source and result")?;
            c.rounding("rounding_mode", &[RoundingMode::NearestEven])?;
            Ok(())
        }
        IntToPtr => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            if !matches!(scalar_tile(src), Some((ScalarType::I64, _))) || pointer_tile(r).is_none()
            {
                return Err(format!(
                    "needs an i64 tile -> pointer tile, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            c.same_shape(src, r, "source and result")
        }
        PtrToInt => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            if pointer_tile(src).is_none() || !matches!(scalar_tile(r), Some((ScalarType::I64, _)))
            {
                return Err(format!(
                    "needs a pointer tile -> i64 tile, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            c.same_shape(src, r, "source and result")
        }
        PtrToPtr => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            if pointer_tile(src).is_none() || pointer_tile(r).is_none() {
                return Err(format!("needs pointer tiles, got {} -> {}", tt(src), tt(r)));
            }
            c.same_shape(src, r, "source and result")
        }
        Pack | Unpack => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = scalar_tile(src)
                .ok_or_else(|| format!("source must be a numeric tile, got {}", tt(src)))?;
            let (re, rs) = scalar_tile(r)
                .ok_or_else(|| format!("result must be a numeric tile, got {}", tt(r)))?;
            let packed = if op.opcode == Pack { re } else { se };
            if packed != ScalarType::I8 {
                return Err(format!(
                    "the packed side must be an i8 tile, got {}",
                    tt(if op.opcode == Pack { r } else { src })
                ));
            }
            if ss.len() != 1 || rs.len() != 1 {
                return Err(format!(
                    "source and result must be rank-1 tiles, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            if se.bit_width() == re.bit_width() {
                return Err(format!(
                    "element widths must differ, got {} -> {}",
                    tt(src),
                    tt(r)
                ));
            }
            let bits = |s: ScalarType, n: i64| s.bit_width() as i64 * n;
            if bits(se, ss[0]) != bits(re, rs[0]) {
                return Err(format!("sizes in bytes differ: {} -> {}", tt(src), tt(r)));
            }
            Ok(())
        }
        // `check_op` only sends this family its own opcodes.
        other => Err(format!(
            "internal error: {} was dispatched to the conversion rules",
            other.mnemonic()
        )),
    }
}

/// Bit width as MLIR counts it (tf32 is 19 bits wide there).
fn mlir_width(s: ScalarType) -> u32 {
    if s == ScalarType::TF32 {
        19
    } else {
        s.bit_width()
    }
}
