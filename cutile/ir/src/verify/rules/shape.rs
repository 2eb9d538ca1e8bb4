//! Tile construction and shape manipulation: constant, iota, broadcast, reshape, permute, cat,
//! extract and insert.

use super::*;

/// Rules of the tile construction and shape ops.
pub(super) fn check(c: &Ck<'_>) -> R {
    let op = c.op;
    use Opcode::*;
    match op.opcode {
        Constant => check_constant(c),
        Iota => {
            let r = c.res(0)?;
            let (s, sh) = scalar_tile(r)
                .filter(|(s, _)| is_int(*s))
                .ok_or_else(|| format!("result must be an integer tile, got {}", tt(r)))?;
            if sh.len() != 1 {
                return Err(format!("result must be a 1-d tile, got {}", tt(r)));
            }
            if s.bit_width() < 64 && sh[0] as u64 > (1u64 << s.bit_width()) {
                return Err(format!("{} elements do not fit in {s}", sh[0]));
            }
            Ok(())
        }
        Broadcast => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = tile_parts(src)?;
            let (re, rs) = tile_parts(r)?;
            if se != re {
                return Err(format!("element types differ: {} -> {}", tt(src), tt(r)));
            }
            if ss.len() != rs.len() {
                return Err(format!(
                    "ranks differ: {} -> {} (reshape first to add unit dimensions)",
                    tt(src),
                    tt(r)
                ));
            }
            if ss.iter().zip(rs).any(|(&a, &b)| a != b && a != 1) {
                return Err(format!(
                    "cannot broadcast {} to {}: each source dimension must equal the target or be 1",
                    tt(src),
                    tt(r)
                ));
            }
            Ok(())
        }
        Reshape => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = tile_parts(src)?;
            let (re, rs) = tile_parts(r)?;
            if se != re {
                return Err(format!("element types differ: {} -> {}", tt(src), tt(r)));
            }
            let (n1, n2): (i64, i64) = (ss.iter().product(), rs.iter().product());
            if n1 != n2 {
                return Err(format!(
                    "element counts differ: {} has {n1}, {} has {n2}",
                    tt(src),
                    tt(r)
                ));
            }
            Ok(())
        }
        Permute => {
            let (src, r) = (c.one("source")?, c.res(0)?);
            let (se, ss) = tile_parts(src)?;
            let (re, rs) = tile_parts(r)?;
            if se != re {
                return Err(format!("element types differ: {} -> {}", tt(src), tt(r)));
            }
            let perm = match op.attr("permutation") {
                Some(OpAttr::I32Array(p)) => p,
                _ => return Err("missing `permutation`".into()),
            };
            if ss.len() < 2 {
                return Err(format!("source must have rank 2 or more, got {}", tt(src)));
            }
            let mut seen = vec![false; ss.len()];
            if perm.len() != ss.len()
                || perm.iter().any(|&p| {
                    p < 0
                        || p as usize >= ss.len()
                        || std::mem::replace(&mut seen[p as usize], true)
                })
            {
                return Err(format!(
                    "permutation {perm:?} is not a permutation of 0..{}",
                    ss.len()
                ));
            }
            let want: Vec<i64> = perm.iter().map(|&p| ss[p as usize]).collect();
            if rs != want.as_slice() {
                return Err(format!(
                    "result shape {rs:?} does not match the permuted source shape {want:?}"
                ));
            }
            Ok(())
        }
        Cat => {
            let (a, b, r) = (c.one("lhs")?, c.one("rhs")?, c.res(0)?);
            let (ae, as_) = tile_parts(a)?;
            let (be, bs) = tile_parts(b)?;
            let (re, rs) = tile_parts(r)?;
            if ae != be || ae != re {
                return Err(format!(
                    "element types differ: {}, {} -> {}",
                    tt(a),
                    tt(b),
                    tt(r)
                ));
            }
            if as_.len() != bs.len() || as_.len() != rs.len() {
                return Err(format!("ranks differ: {}, {} -> {}", tt(a), tt(b), tt(r)));
            }
            let dim = c.int_attr("dim").unwrap_or(u64::MAX) as usize;
            if dim >= as_.len() {
                return Err(format!("dim {dim} is out of range for rank {}", as_.len()));
            }
            for i in 0..as_.len() {
                let ok = if i == dim {
                    as_[i] + bs[i] == rs[i]
                } else {
                    as_[i] == bs[i] && as_[i] == rs[i]
                };
                if !ok {
                    return Err(format!(
                        "cannot concatenate {} and {} along dim {dim} into {}",
                        tt(a),
                        tt(b),
                        tt(r)
                    ));
                }
            }
            Ok(())
        }
        Extract | Insert => {
            let (big, small, r) = if op.opcode == Extract {
                let s = c.one("source")?;
                (s, c.res(0)?, c.res(0)?)
            } else {
                let d = c.one("destination")?;
                let r = c.res(0)?;
                c.same(d, r, "destination and result types")?;
                (d, c.one("source")?, r)
            };
            let _ = r;
            let (be, bs) = tile_parts(big)?;
            let (se, ss) = tile_parts(small)?;
            if be != se {
                return Err(format!(
                    "element types differ: {} vs {}",
                    tt(big),
                    tt(small)
                ));
            }
            if bs.len() != ss.len() {
                return Err(format!("ranks differ: {} vs {}", tt(big), tt(small)));
            }
            if bs.iter().zip(ss).any(|(&b, &s)| b % s != 0) {
                return Err(format!(
                    "each dimension of {} must be a multiple of the one of {}",
                    tt(big),
                    tt(small)
                ));
            }
            let idx = c.group("indices")?;
            if idx.len() != bs.len() {
                return Err(format!("expected {} indices, got {}", bs.len(), idx.len()));
            }
            for (i, t) in idx.iter().enumerate() {
                if !is_scalar_of(t, ScalarType::I32) {
                    return Err(format!("index {i} must be tile<i32>, got {}", tt(t)));
                }
            }
            Ok(())
        }
        // `check_op` only sends this family its own opcodes.
        other => Err(format!(
            "internal error: {} was dispatched to the shape rules",
            other.mnemonic()
        )),
    }
}

fn check_constant(c: &Ck<'_>) -> R {
    let r = c.res(0)?;
    let (s, sh) =
        scalar_tile(r).ok_or_else(|| format!("result must be a numeric tile, got {}", tt(r)))?;
    if s == ScalarType::I4 {
        return Err("i4 constants are not supported; build them as i8 and pack".into());
    }
    let data = match c.op.attr("value") {
        Some(OpAttr::Dense(d)) => d,
        _ => return Err("missing `value`".into()),
    };
    let n: i64 = sh.iter().product();
    let el = s.storage_bytes();
    if data.len() != el && data.len() as i64 != el as i64 * n {
        return Err(format!(
            "dense value has {} bytes; {} needs {el} (splat) or {} bytes",
            data.len(),
            tt(r),
            el as i64 * n
        ));
    }
    Ok(())
}
