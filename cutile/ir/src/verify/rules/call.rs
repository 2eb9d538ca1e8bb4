//! Calls into tile libraries: `preview$call` against its extern declaration (arguments, results,
//! constant arguments).

use super::*;

pub(super) fn check_preview_call(c: &Ck<'_>) -> R {
    let callee = c.str_attr("callee").unwrap_or("");
    let f = c
        .env
        .module
        .functions
        .iter()
        .find(|f| f.name == callee)
        .ok_or_else(|| format!("no function named @{callee} in the module"))?;
    let FunctionKind::ExternDecl { const_params } = &f.kind else {
        return Err(format!("@{callee} is not an extern declaration"));
    };
    let mut args: Vec<Type> = c.group("operands")?.into_iter().cloned().collect();
    let mut rs: Vec<Type> = c.results()?.into_iter().cloned().collect();
    // Tile C++'s calling convention (`nvcc --tilebc`): two ordering tokens lead the operands and the
    // results; they are not parameters of the declaration.
    if args.len() >= 2
        && args[..2] == [Type::Token, Type::Token]
        && rs.len() >= 2
        && rs[..2] == [Type::Token, Type::Token]
    {
        args.drain(..2);
        rs.drain(..2);
    }
    if args != f.param_types {
        return Err(format!(
            "argument types ({}) do not match @{callee}'s parameters ({})",
            types_text(&args),
            types_text(&f.param_types)
        ));
    }
    if rs != f.result_types {
        return Err(format!(
            "result types ({}) do not match @{callee}'s results ({})",
            types_text(&rs),
            types_text(&f.result_types)
        ));
    }
    let cargs = match c.op.attr("const_args") {
        Some(OpAttr::TaggedArray(a)) => a,
        _ => return Err("missing `const_args`".into()),
    };
    if cargs.len() != const_params.len() {
        return Err(format!(
            "@{callee} takes {} constant argument(s), got {}",
            const_params.len(),
            cargs.len()
        ));
    }
    for (i, (a, p)) in cargs.iter().zip(const_params).enumerate() {
        let Attribute::ConstParam { ty, .. } = p else {
            continue;
        };
        let ok = match ty {
            Type::Preview(PreviewType::Index) => matches!(
                a,
                Attribute::ExprInt(_)
                    | Attribute::ExprVar(_)
                    | Attribute::ExprBinary { .. }
                    | Attribute::ExprNeg(_)
                    | Attribute::ExprBuiltin(_)
            ),
            Type::Preview(PreviewType::String) => matches!(a, Attribute::ExprConstStr(_)),
            Type::Preview(PreviewType::Datatype) => matches!(a, Attribute::ConcreteType(_)),
            Type::Preview(PreviewType::Shape) => matches!(a, Attribute::SymbolicTuple(_)),
            _ => true,
        };
        if !ok {
            return Err(format!(
                "constant argument {i} ({}) does not fit parameter kind {}",
                attr_text(a),
                tt(ty)
            ));
        }
    }
    Ok(())
}
