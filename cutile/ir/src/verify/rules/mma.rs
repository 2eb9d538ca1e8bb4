//! Matrix multiply-accumulate: mmaf, mmai and mmaf_scaled (operand shapes, element-type and
//! accumulator combinations, block scales).

use super::*;

pub(super) fn check_mma(c: &Ck<'_>) -> R {
    use ScalarType::*;
    let (a, b, acc, r) = (c.one("lhs")?, c.one("rhs")?, c.one("acc")?, c.res(0)?);
    c.same(acc, r, "accumulator and result types")?;
    let (ae, ash) =
        scalar_tile(a).ok_or_else(|| format!("lhs must be a numeric tile, got {}", tt(a)))?;
    let (be, bsh) =
        scalar_tile(b).ok_or_else(|| format!("rhs must be a numeric tile, got {}", tt(b)))?;
    let (ce, csh) =
        scalar_tile(acc).ok_or_else(|| format!("acc must be a numeric tile, got {}", tt(acc)))?;
    if ae != be {
        return Err(format!(
            "lhs and rhs element types differ: {} vs {}",
            tt(a),
            tt(b)
        ));
    }
    let rank = ash.len();
    if (rank != 2 && rank != 3) || bsh.len() != rank || csh.len() != rank {
        return Err(format!(
            "operands must all be 2-d (or all 3-d, batched) tiles, got {}, {}, {}",
            tt(a),
            tt(b),
            tt(acc)
        ));
    }
    let bt = rank - 2;
    let (m, k, k2, n) = (ash[bt], ash[bt + 1], bsh[bt], bsh[bt + 1]);
    if k != k2
        || csh[bt] != m
        || csh[bt + 1] != n
        || (bt == 1 && (ash[0] != bsh[0] || ash[0] != csh[0]))
    {
        return Err(format!(
            "shapes do not form M×K · K×N + M×N: {} · {} + {}",
            tt(a),
            tt(b),
            tt(acc)
        ));
    }
    match c.op.opcode {
        Opcode::MmaF => {
            let allowed: &[ScalarType] = match ae {
                F8E4M3FN | F8E5M2 | F16 => &[F16, F32],
                BF16 | TF32 | F32 => &[F32],
                F64 => &[F64],
                _ => {
                    return Err(format!(
                        "unsupported input element type {ae}; use f16, bf16, tf32, f32, f64, f8E4M3FN or f8E5M2"
                    ));
                }
            };
            if !allowed.contains(&ce) {
                let names: Vec<&str> = allowed.iter().map(|s| s.name()).collect();
                return Err(format!(
                    "inputs of {ae} need an accumulator of {}, got {ce}",
                    names.join(" or ")
                ));
            }
            Ok(())
        }
        Opcode::MmaI => {
            if ae != I8 || ce != I32 {
                return Err(format!(
                    "mmai needs i8 inputs and an i32 accumulator, got {ae} and {ce}"
                ));
            }
            Ok(())
        }
        _ => {
            let (ls, rs) = (c.one("lhs_scale")?, c.one("rhs_scale")?);
            let (lse, lssh) = scalar_tile(ls)
                .ok_or_else(|| format!("lhs_scale must be a tile, got {}", tt(ls)))?;
            let (rse, rssh) = scalar_tile(rs)
                .ok_or_else(|| format!("rhs_scale must be a tile, got {}", tt(rs)))?;
            if !matches!(ae, F8E4M3FN | F8E5M2 | F4E2M1FN) || ce != F32 {
                return Err(format!(
                    "mmaf_scaled needs f8E4M3FN, f8E5M2 or f4E2M1FN inputs and an f32 accumulator, got {ae} and {ce}"
                ));
            }
            if lse != rse || !matches!(lse, F8E4M3FN | F8E8M0FNU) {
                return Err(format!(
                    "scales must both be f8E4M3FN or both f8E8M0FNU, got {lse} and {rse}"
                ));
            }
            if lssh.len() != rank || rssh.len() != rank {
                return Err("scales must have the rank of the operands".into());
            }
            let (lsm, lsk, rsk, rsn) = (lssh[bt], lssh[bt + 1], rssh[bt], rssh[bt + 1]);
            if lsm != m || rsn != n || lsk != rsk || lsk == 0 || k % lsk != 0 {
                return Err(format!(
                    "scale shapes {} and {} do not fit operands {} and {}",
                    tt(ls),
                    tt(rs),
                    tt(a),
                    tt(b)
                ));
            }
            let vec = k / lsk;
            let ok = match (ae, lse) {
                (F8E4M3FN | F8E5M2, F8E8M0FNU) => vec == 32,
                (F4E2M1FN, F8E4M3FN) => vec == 16,
                (F4E2M1FN, F8E8M0FNU) => vec == 16 || vec == 32,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "unsupported scale combination: {ae} inputs with {lse} scales every {vec} elements of K"
                ));
            }
            Ok(())
        }
    }
}
