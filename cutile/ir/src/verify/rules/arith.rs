//! Elementwise arithmetic: float and integer unary/binary ops, fma, select, comparisons and the
//! rounding-mode / flush-to-zero rules they share (`rounding` is also used by the conversions).

use super::*;

impl Ck<'_> {
    fn unary_float(&self) -> Result<ScalarType, String> {
        let src = self.one("source")?;
        let s = self.float_tile(src, "source")?;
        self.same(src, self.res(0)?, "source and result types")?;
        Ok(s)
    }
    fn binary_float(&self, l: &str, r: &str) -> Result<ScalarType, String> {
        let (a, b) = (self.one(l)?, self.one(r)?);
        let s = self.float_tile(a, l)?;
        self.same(a, b, "operand types")?;
        self.same(a, self.res(0)?, "operand and result types")?;
        Ok(s)
    }
    fn unary_int(&self) -> Result<ScalarType, String> {
        let src = self.one("source")?;
        let s = self.int_tile(src, "source")?;
        self.same(src, self.res(0)?, "source and result types")?;
        Ok(s)
    }
    fn binary_int(&self, l: &str, r: &str) -> Result<ScalarType, String> {
        let (a, b) = (self.one(l)?, self.one(r)?);
        let s = self.int_tile(a, l)?;
        self.same(a, b, "operand types")?;
        self.same(a, self.res(0)?, "operand and result types")?;
        Ok(s)
    }
    fn ftz_f32(&self, s: ScalarType) -> R {
        if self.unit("flush_to_zero") && s != ScalarType::F32 {
            return Err(format!("flush_to_zero is only supported for f32, got {s}"));
        }
        Ok(())
    }
    /// The rounding-mode attribute `name`, which must be one of `allowed`.
    pub(super) fn rounding(
        &self,
        name: &str,
        allowed: &[RoundingMode],
    ) -> Result<RoundingMode, String> {
        let raw = match self.op.attr(name) {
            Some(OpAttr::Enum(e)) => *e,
            _ => return Err(format!("missing `{name}`")),
        };
        match raw.typed::<RoundingMode>() {
            Some(rm) if allowed.contains(&rm) => Ok(rm),
            _ => {
                let names: Vec<&str> = allowed.iter().map(|r| r.name()).collect();
                Err(format!(
                    "rounding mode {} is not allowed here; expected one of [{}]",
                    raw.name(),
                    names.join(", ")
                ))
            }
        }
    }
    fn approx_f32(&self, rm: RoundingMode, s: ScalarType) -> R {
        if matches!(rm, RoundingMode::Approx | RoundingMode::Full) && s != ScalarType::F32 {
            return Err(format!(
                "rounding mode {} is only supported for f32, got {s}",
                rm.name()
            ));
        }
        Ok(())
    }
}

/// Rules of the elementwise arithmetic ops.
pub(super) fn check(c: &Ck<'_>) -> R {
    let op = c.op;
    use Opcode::*;
    match op.opcode {
        AbsF | Ceil | Cos | CosH | Floor | Log | Log2 | NegF | Sin | SinH | Tan => {
            c.unary_float().map(|_| ())
        }
        Exp | TanH => {
            let s = c.unary_float()?;
            let rm = c.rounding("rounding_mode", &[RoundingMode::Full, RoundingMode::Approx])?;
            if rm == RoundingMode::Approx && s != ScalarType::F32 {
                return Err(format!(
                    "rounding mode approx is only supported for f32, got {s}"
                ));
            }
            Ok(())
        }
        Exp2 | Rsqrt => {
            let s = c.unary_float()?;
            c.ftz_f32(s)
        }
        Sqrt => {
            let s = c.unary_float()?;
            let rm = c.rounding(
                "rounding_mode",
                &[
                    RoundingMode::NearestEven,
                    RoundingMode::Zero,
                    RoundingMode::NegativeInf,
                    RoundingMode::PositiveInf,
                    RoundingMode::Approx,
                ],
            )?;
            c.approx_f32(rm, s)?;
            c.ftz_f32(s)
        }
        AddF | SubF | MulF => {
            let s = c.binary_float("lhs", "rhs")?;
            c.rounding(
                "rounding_mode",
                &[
                    RoundingMode::NearestEven,
                    RoundingMode::Zero,
                    RoundingMode::NegativeInf,
                    RoundingMode::PositiveInf,
                ],
            )?;
            c.ftz_f32(s)
        }
        DivF => {
            let s = c.binary_float("lhs", "rhs")?;
            let rm = c.rounding(
                "rounding_mode",
                &[
                    RoundingMode::NearestEven,
                    RoundingMode::Zero,
                    RoundingMode::NegativeInf,
                    RoundingMode::PositiveInf,
                    RoundingMode::Approx,
                    RoundingMode::Full,
                ],
            )?;
            c.approx_f32(rm, s)?;
            c.ftz_f32(s)
        }
        RemF => c.binary_float("lhs", "rhs").map(|_| ()),
        MaxF | MinF => {
            let s = c.binary_float("lhs", "rhs")?;
            c.ftz_f32(s)
        }
        FPowF => c.binary_float("source", "exponent").map(|_| ()),
        Atan2 => c.binary_float("x", "y").map(|_| ()),
        Fma => {
            let (a, b, acc) = (c.one("lhs")?, c.one("rhs")?, c.one("acc")?);
            let s = c.float_tile(a, "lhs")?;
            c.same(a, b, "operand types")?;
            c.same(a, acc, "operand and accumulator types")?;
            c.same(a, c.res(0)?, "operand and result types")?;
            c.rounding(
                "rounding_mode",
                &[
                    RoundingMode::NearestEven,
                    RoundingMode::Zero,
                    RoundingMode::NegativeInf,
                    RoundingMode::PositiveInf,
                ],
            )?;
            c.ftz_f32(s)
        }
        AbsI => c.unary_int().map(|_| ()),
        NegI => {
            c.unary_int()?;
            if c.enum_("overflow") == Some(IntegerOverflow::Nuw) {
                return Err("overflow flag nuw is not supported (negation is signed)".into());
            }
            Ok(())
        }
        AddI | SubI | MulI | ShLI | AndI | OrI | XOrI | ShRI | MaxI | MinI | RemI => {
            c.binary_int("lhs", "rhs").map(|_| ())
        }
        MulhiI => c.binary_int("x", "y").map(|_| ()),
        DivI => {
            c.binary_int("lhs", "rhs")?;
            let rm = c.rounding(
                "rounding",
                &[
                    RoundingMode::Zero,
                    RoundingMode::NegativeInf,
                    RoundingMode::PositiveInf,
                ],
            )?;
            if rm == RoundingMode::NegativeInf
                && c.enum_("signedness") == Some(Signedness::Unsigned)
            {
                return Err("rounding negative_inf is not allowed with unsigned division".into());
            }
            Ok(())
        }
        CmpF | CmpI => {
            let (a, b) = (c.one("lhs")?, c.one("rhs")?);
            if op.opcode == CmpF {
                c.float_tile(a, "lhs")?;
            } else {
                c.int_tile(a, "lhs")?;
            }
            c.same(a, b, "operand types")?;
            let r = c.res(0)?;
            let want = a
                .tile_shape()
                .map(|sh| Type::tile(ScalarType::I1, sh))
                .unwrap_or(Type::Token);
            if *r != want {
                return Err(format!(
                    "result must be {} (i1 of the operand shape), got {}",
                    tt(&want),
                    tt(r)
                ));
            }
            Ok(())
        }
        Select => {
            let (cond, t, f) = (
                c.one("cond")?,
                c.one("val_if_true")?,
                c.one("val_if_false")?,
            );
            if !matches!(scalar_tile(cond), Some((ScalarType::I1, _))) {
                return Err(format!("condition must be an i1 tile, got {}", tt(cond)));
            }
            c.same(t, f, "value types")?;
            c.same(t, c.res(0)?, "value and result types")?;
            c.same_shape(cond, t, "condition and value")?;
            if matches!(scalar_tile(t), Some((ScalarType::F4E2M1FN, _))) {
                return Err("cannot select on f4E2M1FN tiles".into());
            }
            Ok(())
        }
        FPowI => {
            let (base, e, r) = (c.one("source")?, c.one("exponent")?, c.res(0)?);
            c.float_tile(base, "source")?;
            c.int_tile(e, "exponent")?;
            c.same_shape(base, e, "base and exponent")?;
            c.same(base, r, "base and result types")
        }
        // `check_op` only sends this family its own opcodes.
        other => Err(format!(
            "internal error: {} was dispatched to the elementwise arithmetic rules",
            other.mnemonic()
        )),
    }
}
