//! Control flow: region ops (for, loop, if, reduce, scan), the frames they give to nested terminators,
//! terminator types, and which ops a reduce/scan body may contain.

use super::*;

/// What an enclosing region op tells the terminators nested in it (innermost last in a frame stack).
#[derive(Clone, Debug)]
pub struct Frame {
    pub opcode: Opcode,
    /// The region op's result types.
    pub results: Vec<Type>,
    /// For/loop: the carried value types; reduce/scan: the rank-0 tile types the body yields.
    pub iter: Vec<Type>,
}

impl Frame {
    /// The frame of a function body.
    pub fn entry() -> Frame {
        Frame {
            opcode: Opcode::Entry,
            results: vec![],
            iter: vec![],
        }
    }

    /// The frame an existing region op gives to the ops of its regions.
    pub fn of_op(values: &[Type], op: &Operation) -> Frame {
        let ty = |v: &ValueId| values.get(v.0 as usize).cloned().unwrap_or(Type::Token);
        let results: Vec<Type> = op.results.iter().map(ty).collect();
        let iter = match op.opcode {
            Opcode::For | Opcode::Loop => op.operand_group("initValues").iter().map(ty).collect(),
            Opcode::Reduce | Opcode::Scan => op
                .operand_group("operands")
                .iter()
                .map(|v| reduce_arg_type(&ty(v)))
                .collect(),
            _ => vec![],
        };
        Frame {
            opcode: op.opcode,
            results,
            iter,
        }
    }
}

/// The rank-0 tile type a reduce/scan body sees for an operand of type `t`.
pub fn reduce_arg_type(t: &Type) -> Type {
    match t {
        Type::Tile { elem, .. } => Type::Tile {
            elem: elem.clone(),
            shape: vec![],
        },
        other => other.clone(),
    }
}

fn no_views(ts: &[&Type], what: &str) -> R {
    for (i, t) in ts.iter().enumerate() {
        if matches!(t, Type::TensorView { .. }) || view_info(t).is_some() {
            return Err(format!(
                "{what} {i} is a view ({}); views cannot be carried or returned",
                tt(t)
            ));
        }
    }
    Ok(())
}

fn block_arg_types<'a>(c: &Ck<'a>, b: &'a Block) -> Result<Vec<&'a Type>, String> {
    b.args.iter().map(|v| c.ty(*v)).collect()
}

fn last_op(b: &Block) -> Option<Opcode> {
    b.ops.last().map(|o| o.opcode)
}

fn ends_with(b: &Block, allowed: &[Opcode], region: &str) -> R {
    match last_op(b) {
        Some(o) if allowed.contains(&o) => Ok(()),
        other => {
            let names: Vec<&str> = allowed.iter().map(|o| o.mnemonic()).collect();
            Err(format!(
                "{region} must end with {}, but ends with {}",
                names.join(" or "),
                other.map_or("nothing", |o| o.mnemonic())
            ))
        }
    }
}

pub(super) fn check_for(c: &Ck<'_>) -> R {
    let (lo, hi, step) = (c.one("lowerBound")?, c.one("upperBound")?, c.one("step")?);
    if !is_int_scalar(lo) {
        return Err(format!(
            "bounds must be rank-0 integer tiles, got {}",
            tt(lo)
        ));
    }
    c.same(lo, hi, "lower and upper bound types")?;
    c.same(lo, step, "bound and step types")?;
    let inits = c.group("initValues")?;
    let rs = c.results()?;
    if inits != rs {
        return Err(format!(
            "result types ({}) must equal the init value types ({})",
            types_text(&rs.iter().map(|t| (*t).clone()).collect::<Vec<_>>()),
            types_text(&inits.iter().map(|t| (*t).clone()).collect::<Vec<_>>())
        ));
    }
    no_views(&inits, "carried value")?;
    let body = c.op.regions.first().ok_or("missing body region")?;
    let args = block_arg_types(c, body)?;
    if args.len() != inits.len() + 1 || args[0] != lo || args[1..] != inits[..] {
        return Err(format!(
            "body arguments must be the induction variable ({}) then the carried values",
            tt(lo)
        ));
    }
    ends_with(body, &[Opcode::Continue], "the body")
}

pub(super) fn check_loop(c: &Ck<'_>) -> R {
    let inits = c.group("initValues")?;
    no_views(&inits, "carried value")?;
    no_views(&c.results()?, "result")?;
    let body = c.op.regions.first().ok_or("missing body region")?;
    let args = block_arg_types(c, body)?;
    if args != inits {
        return Err("body arguments must have the init value types".into());
    }
    ends_with(body, &[Opcode::Continue, Opcode::Break], "the body")
}

pub(super) fn check_if(c: &Ck<'_>) -> R {
    let cond = c.one("condition")?;
    if !is_scalar_of(cond, ScalarType::I1) {
        return Err(format!("condition must be tile<i1>, got {}", tt(cond)));
    }
    no_views(&c.results()?, "result")?;
    if c.op.regions.len() != 2 {
        return Err("needs a then and an else region".into());
    }
    for (b, name) in
        c.op.regions
            .iter()
            .zip(["the then region", "the else region"])
    {
        if !b.args.is_empty() {
            return Err(format!("{name} must not have arguments"));
        }
        ends_with(
            b,
            &[
                Opcode::Yield,
                Opcode::Continue,
                Opcode::Break,
                Opcode::Return,
            ],
            name,
        )?;
    }
    Ok(())
}

pub(super) fn check_reduce_scan(c: &Ck<'_>) -> R {
    let ops = c.group("operands")?;
    let rs = c.results()?;
    if ops.is_empty() {
        return Err("needs at least one operand".into());
    }
    if ops.len() != rs.len() {
        return Err(format!("{} operands but {} results", ops.len(), rs.len()));
    }
    let shape = ops[0]
        .tile_shape()
        .ok_or_else(|| format!("operands must be tiles, got {}", tt(ops[0])))?;
    let dim = c.int_attr("dim").unwrap_or(u64::MAX);
    if dim as usize >= shape.len() {
        return Err(format!("dim {dim} is out of range for {}", tt(ops[0])));
    }
    let ids = match c.op.attr("identities") {
        Some(OpAttr::TaggedArray(a)) => a,
        _ => return Err("missing `identities`".into()),
    };
    if ids.len() != ops.len() {
        return Err(format!(
            "{} identities for {} operands",
            ids.len(),
            ops.len()
        ));
    }
    for (i, (t, r)) in ops.iter().zip(&rs).enumerate() {
        if t.tile_shape() != Some(shape) {
            return Err(format!(
                "operands must share one shape: {} vs {}",
                tt(ops[0]),
                tt(t)
            ));
        }
        let elem = t.elem().cloned().unwrap_or(Type::Token);
        let want = if c.op.opcode == Opcode::Scan {
            (*t).clone()
        } else {
            let mut sh = shape.to_vec();
            sh.remove(dim as usize);
            Type::Tile {
                elem: Box::new(elem.clone()),
                shape: sh,
            }
        };
        if **r != want {
            return Err(format!("result {i} must be {}, got {}", tt(&want), tt(r)));
        }
        let id_ty = match &ids[i] {
            Attribute::Integer { ty, .. } | Attribute::Float { ty, .. } => ty,
            other => {
                return Err(format!(
                    "identity {i} must be an integer or float attribute, got {}",
                    attr_text(other)
                ));
            }
        };
        let half_swap = matches!(
            (id_ty, &elem),
            (
                Type::Scalar(ScalarType::F16),
                Type::Scalar(ScalarType::BF16)
            ) | (
                Type::Scalar(ScalarType::BF16),
                Type::Scalar(ScalarType::F16)
            )
        );
        if *id_ty != elem && !half_swap {
            return Err(format!(
                "identity {i} has type {} but operand {i} holds {}",
                tt(id_ty),
                tt(&elem)
            ));
        }
    }
    let body = c.op.regions.first().ok_or("missing body region")?;
    let args = block_arg_types(c, body)?;
    if args.len() != 2 * ops.len() {
        return Err(format!(
            "the body needs {} arguments (a pair per operand), got {}",
            2 * ops.len(),
            args.len()
        ));
    }
    for (i, t) in ops.iter().enumerate() {
        let want = reduce_arg_type(t);
        if *args[2 * i] != want || *args[2 * i + 1] != want {
            return Err(format!(
                "body arguments {} and {} must be {}",
                2 * i,
                2 * i + 1,
                tt(&want)
            ));
        }
    }
    ends_with(body, &[Opcode::Yield], "the body")?;
    for o in &body.ops[..body.ops.len() - 1] {
        if !is_effect_free(o) {
            return Err(format!(
                "only ops without memory effects may appear in the body, found {}",
                o.opcode.mnemonic()
            ));
        }
    }
    Ok(())
}

/// Whether an op has no memory effects (what reduce and scan bodies may contain): an op of a kind that
/// touches memory, prints, asserts or assumes has effects; `if` inherits those of its regions; loops contain
/// `continue`, which tileiras counts as an effect. Established with tileirdisasm 13.5.
pub fn is_effect_free(op: &Operation) -> bool {
    use Opcode::*;
    let own = !matches!(
        op.opcode,
        Assert
            | Assume
            | AtomicCASTko
            | AtomicRMWTko
            | AtomicRedViewTko
            | Break
            | Continue
            | Return
            | Global
            | LoadPtrTko
            | LoadViewTko
            | PrintTko
            | StorePtrTko
            | StoreViewTko
            | Alloca
            | GdcLaunchDependentsTko
            | GdcWaitTko
            | MemoryFenceAliasTko
            | MultimemLoadReduceViewTko
            | MultimemReduceViewTko
            | MultimemStoreViewTko
            | PreviewCall
            | Module
            | Entry
    );
    own && op.regions.iter().all(|b| b.ops.iter().all(is_effect_free))
}

pub(super) fn check_terminator(c: &Ck<'_>) -> R {
    let vals = c.group("operands")?;
    let vals: Vec<Type> = vals.into_iter().cloned().collect();
    let frames = c.env.frames;
    let inner = frames.last().ok_or("must be inside a function body")?;
    // The nearest enclosing op that is not an `if`.
    let through_ifs = frames.iter().rev().find(|f| f.opcode != Opcode::If);
    let mismatch = |want: &[Type], what: &str| -> R {
        if vals != want {
            Err(format!(
                "operand types ({}) must match {what} ({})",
                types_text(&vals),
                types_text(want)
            ))
        } else {
            Ok(())
        }
    };
    match c.op.opcode {
        Opcode::Yield => match inner.opcode {
            Opcode::If => mismatch(&inner.results, "the if's result types"),
            Opcode::Reduce | Opcode::Scan => mismatch(&inner.iter, "the body's element types"),
            other => Err(format!(
                "must terminate an if, reduce or scan region, not a {} region",
                other.mnemonic()
            )),
        },
        Opcode::Continue => match through_ifs {
            Some(f) if f.opcode == Opcode::For => mismatch(&f.results, "the for's result types"),
            Some(f) if f.opcode == Opcode::Loop => mismatch(&f.iter, "the loop's carried types"),
            other => Err(format!(
                "must be nested (through ifs only) in a for or loop, found in {}",
                other.map_or("nothing", |f| f.opcode.mnemonic())
            )),
        },
        Opcode::Break => match through_ifs {
            Some(f) if f.opcode == Opcode::Loop => mismatch(&f.results, "the loop's result types"),
            other => Err(format!(
                "must be nested (through ifs only) in a loop, found in {}",
                other.map_or("nothing", |f| f.opcode.mnemonic())
            )),
        },
        _ => match through_ifs {
            Some(f) if f.opcode == Opcode::Entry => {
                if vals.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "an entry returns nothing, got ({})",
                        types_text(&vals)
                    ))
                }
            }
            other => Err(format!(
                "must be nested (through ifs only) in the function body, found in {}",
                other.map_or("nothing", |f| f.opcode.mnemonic())
            )),
        },
    }
}
