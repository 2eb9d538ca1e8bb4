//! Recursion check: device functions are inlined while tracing, so a function that (directly or through
//! others in the module) calls itself has no finite expansion. Calls are found syntactically (`f(…)`,
//! `self::f(…)`); a call that closes a cycle is reported at its span with the cycle spelled out.

use std::collections::BTreeMap;

use syn::visit::Visit;
use syn::{Item, spanned::Spanned};

struct Calls<'a> {
    names: &'a [String],
    found: Vec<(String, proc_macro2::Span)>,
}

impl<'ast> Visit<'ast> for Calls<'_> {
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            let callee = match segs.as_slice() {
                [f] => Some(f.clone()),
                [s, f] if s == "self" => Some(f.clone()),
                _ => None,
            };
            if let Some(f) = callee
                && self.names.contains(&f)
            {
                self.found.push((f, c.func.span()));
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}

/// Errors for every call that is part of a recursion cycle among the module's functions.
pub fn check(items: &[Item]) -> Vec<syn::Error> {
    let fns: Vec<&syn::ItemFn> = items
        .iter()
        .filter_map(|i| if let Item::Fn(f) = i { Some(f) } else { None })
        .collect();
    let names: Vec<String> = fns.iter().map(|f| f.sig.ident.to_string()).collect();
    let mut graph: BTreeMap<String, Vec<(String, proc_macro2::Span)>> = BTreeMap::new();
    for f in &fns {
        let mut c = Calls {
            names: &names,
            found: vec![],
        };
        c.visit_block(&f.block);
        graph.insert(f.sig.ident.to_string(), c.found);
    }
    let mut errors = vec![];
    for (caller, calls) in &graph {
        for (callee, span) in calls {
            if let Some(path) = path_to(&graph, callee, caller) {
                let mut cycle = vec![caller.clone()];
                cycle.extend(path);
                errors.push(syn::Error::new(
                    *span,
                    format!(
                        "recursive call ({}): device functions are inlined into the kernel, so recursion is not supported",
                        cycle.join(" -> ")
                    ),
                ));
            }
        }
    }
    errors
}

/// A call path from `from` to `to` (inclusive of both), if any.
fn path_to(
    graph: &BTreeMap<String, Vec<(String, proc_macro2::Span)>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut stack = vec![(from.to_string(), vec![from.to_string()])];
    let mut seen = vec![];
    while let Some((n, path)) = stack.pop() {
        if n == to {
            return Some(path);
        }
        if seen.contains(&n) {
            continue;
        }
        seen.push(n.clone());
        for (m, _) in graph.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
            let mut p = path.clone();
            p.push(m.clone());
            stack.push((m.clone(), p));
        }
    }
    None
}
