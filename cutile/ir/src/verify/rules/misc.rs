//! Ops outside the other families: assume predicates, assert, print format strings, token creation
//! and joining, tile-block ids, and the grid-dependency / fence token ops.

use super::*;

/// Rules of the remaining ops.
pub(super) fn check(c: &Ck<'_>) -> R {
    let op = c.op;
    use Opcode::*;
    match op.opcode {
        Assume => check_assume(c),
        MakeToken => c.token_result(0),
        JoinTokens => {
            let toks = c.group("tokens")?;
            if toks.len() < 2 {
                return Err(format!("needs two or more tokens, got {}", toks.len()));
            }
            if let Some(t) = toks.iter().find(|t| !t.is_token()) {
                return Err(format!("operands must be tokens, got {}", tt(t)));
            }
            c.token_result(0)
        }
        GetTileBlockId | GetNumTileBlocks => {
            for (i, t) in c.results()?.iter().enumerate() {
                if !is_scalar_of(t, ScalarType::I32) {
                    return Err(format!("result #{i} must be tile<i32>, got {}", tt(t)));
                }
            }
            Ok(())
        }
        PrintTko => {
            let args = c.group("args")?;
            if let Some(t) = args.iter().find(|t| !t.is_tile()) {
                return Err(format!("arguments must be tiles, got {}", tt(t)));
            }
            let fmt = c.str_attr("str").unwrap_or("");
            let want = count_format_args(fmt)?;
            if want != args.len() {
                return Err(format!(
                    "format string {fmt:?} takes {want} argument(s), got {}",
                    args.len()
                ));
            }
            c.token_operand("token")?;
            if !op.results.is_empty() {
                c.token_result(0)?;
            }
            Ok(())
        }
        Assert => {
            let cond = c.one("condition")?;
            if !matches!(scalar_tile(cond), Some((ScalarType::I1, _))) {
                return Err(format!("condition must be an i1 tile, got {}", tt(cond)));
            }
            Ok(())
        }
        GdcLaunchDependentsTko | GdcWaitTko => {
            c.token_operand("token")?;
            c.token_result(0)
        }
        MemoryFenceAliasTko => {
            let t = c.one("token")?;
            if !t.is_token() {
                return Err(format!("operand must be a token, got {}", tt(t)));
            }
            c.token_result(0)
        }
        // `check_op` only sends this family its own opcodes.
        other => Err(format!(
            "internal error: {} was dispatched to the miscellaneous rules",
            other.mnemonic()
        )),
    }
}

fn check_assume(c: &Ck<'_>) -> R {
    let (v, r) = (c.one("value")?, c.res(0)?);
    c.same(v, r, "value and result types")?;
    let pred = match c.op.attr("predicate") {
        Some(OpAttr::Tagged(a)) => a,
        _ => return Err("missing `predicate`".into()),
    };
    let int_or_ptr = |t: &Type| match t {
        Type::Tile { elem, .. } => match &**elem {
            Type::Scalar(s) => is_int(*s),
            Type::Pointer { .. } => true,
            _ => false,
        },
        _ => false,
    };
    match pred {
        Attribute::DivBy {
            divisor,
            every,
            along,
        } => {
            if *divisor == 0 || !divisor.is_power_of_two() || *divisor > (1u64 << 62) {
                return Err(format!(
                    "div_by<{divisor}>: divisor must be a power of two ≤ 2^62"
                ));
            }
            if every.is_some() != along.is_some() {
                return Err("div_by: `every` and `along` must be given together".into());
            }
            match v {
                Type::TensorView { .. } if every.is_none() => Ok(()),
                Type::TensorView { .. } => {
                    Err("div_by on a tensor_view cannot use every/along".into())
                }
                t if int_or_ptr(t) => {
                    if every.is_some() && t.tile_shape().is_some_and(|s| s.is_empty()) {
                        return Err("div_by on a rank-0 tile cannot use every/along".into());
                    }
                    Ok(())
                }
                t => Err(format!(
                    "div_by applies to integer or pointer tiles and tensor_views, got {}",
                    tt(t)
                )),
            }
        }
        Attribute::Bounded { lb, ub } => {
            let s = match scalar_tile(v) {
                Some((s, _)) if is_int(s) => s,
                _ => return Err(format!("bounded applies to integer tiles, got {}", tt(v))),
            };
            let bits = s.bit_width();
            let (min, max) = if bits == 64 {
                (i64::MIN, i64::MAX)
            } else if bits == 1 {
                (-1, 0)
            } else {
                (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
            };
            for b in [lb, ub].into_iter().flatten() {
                if *b < min || *b > max {
                    return Err(format!(
                        "bound {b} is outside the range of {s} [{min}, {max}]"
                    ));
                }
            }
            if let (Some(l), Some(u)) = (lb, ub)
                && l > u
            {
                return Err(format!("lower bound {l} exceeds upper bound {u}"));
            }
            Ok(())
        }
        Attribute::SameElements(vals) => {
            if !int_or_ptr(v) {
                return Err(format!(
                    "same_elements applies to integer or pointer tiles, got {}",
                    tt(v)
                ));
            }
            let sh = v.tile_shape().unwrap_or(&[]);
            if vals.len() != sh.len() || vals.iter().zip(sh).any(|(&x, &d)| x < 0 || x > d) {
                return Err(format!(
                    "same_elements<{vals:?}> must give one value in 0..=dim per dimension of {}",
                    tt(v)
                ));
            }
            Ok(())
        }
        other => Err(format!(
            "predicate must be div_by, bounded or same_elements, got {}",
            attr_text(other)
        )),
    }
}

fn count_format_args(fmt: &str) -> Result<usize, String> {
    let b = fmt.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        let end = (i + 1..b.len())
            .find(|&j| b"diuoxXeEfFgGaAcsSpn%".contains(&b[j]))
            .ok_or_else(|| format!("unterminated format expression in {fmt:?}"))?;
        if !(end == i + 1 && b[end] == b'%') {
            n += 1;
        }
        i = end + 1;
    }
    Ok(n)
}
