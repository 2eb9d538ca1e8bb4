//! Which variables a loop or branch body assigns that were declared outside it: these become the
//! loop-carried values (or extra `if` results) of the device control flow the body is rewritten into.
//!
//! The walk keeps a stack of scopes (blocks, closure parameters, match arms, `if let` bindings) so an
//! assignment to a name the body itself declared (or shadowed) is not mistaken for an outer variable.

use syn::visit::Visit;
use syn::{Expr, Ident, Pat};

/// Outer variables assigned in `body`, in order of first assignment, each with the assignment's ident.
pub fn outer_assigned(body: &syn::Block) -> Vec<Ident> {
    let mut w = Walker {
        scopes: vec![vec![]],
        found: vec![],
    };
    w.visit_block(body);
    w.found
}

/// Same for a single expression (a `while` condition is not allowed to assign, but an `if` body is a block).
struct Walker {
    scopes: Vec<Vec<Ident>>,
    found: Vec<Ident>,
}

impl Walker {
    fn declared(&self, name: &Ident) -> bool {
        self.scopes.iter().any(|s| s.iter().any(|d| d == name))
    }
    fn declare_pat(&mut self, p: &Pat) {
        let mut ids = vec![];
        pat_idents(p, &mut ids);
        if let Some(s) = self.scopes.last_mut() {
            s.extend(ids);
        }
    }
    fn assign_target(&mut self, e: &Expr) {
        match e {
            Expr::Path(p) if p.path.segments.len() == 1 && p.qself.is_none() => {
                let id = &p.path.segments[0].ident;
                if !self.declared(id) && !self.found.iter().any(|f| f == id) {
                    self.found.push(id.clone());
                }
            }
            Expr::Tuple(t) => t.elems.iter().for_each(|x| self.assign_target(x)),
            Expr::Array(a) => a.elems.iter().for_each(|x| self.assign_target(x)),
            Expr::Paren(p) => self.assign_target(&p.expr),
            // `x.0 = …`, `x.field = …`: the root variable changes.
            Expr::Field(f) => self.assign_target(&f.base),
            _ => {}
        }
    }
}

/// The identifiers a pattern binds.
pub fn pat_idents(p: &Pat, out: &mut Vec<Ident>) {
    match p {
        Pat::Ident(i) => {
            out.push(i.ident.clone());
            if let Some((_, sub)) = &i.subpat {
                pat_idents(sub, out);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|x| pat_idents(x, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|x| pat_idents(x, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| pat_idents(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|x| pat_idents(x, out)),
        Pat::Reference(r) => pat_idents(&r.pat, out),
        Pat::Type(t) => pat_idents(&t.pat, out),
        Pat::Or(o) => {
            if let Some(first) = o.cases.first() {
                pat_idents(first, out)
            }
        }
        Pat::Paren(p) => pat_idents(&p.pat, out),
        _ => {}
    }
}

impl<'a> Visit<'a> for Walker {
    fn visit_block(&mut self, b: &'a syn::Block) {
        self.scopes.push(vec![]);
        for s in &b.stmts {
            self.visit_stmt(s);
        }
        self.scopes.pop();
    }
    fn visit_local(&mut self, l: &'a syn::Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, e)) = &init.diverge {
                self.visit_expr(e);
            }
        }
        self.declare_pat(&l.pat);
    }
    fn visit_expr_assign(&mut self, a: &'a syn::ExprAssign) {
        self.visit_expr(&a.right);
        self.assign_target(&a.left);
        // Indexing/field bases on the left may read variables; nothing else to do.
    }
    fn visit_expr_binary(&mut self, b: &'a syn::ExprBinary) {
        use syn::BinOp::*;
        self.visit_expr(&b.right);
        self.visit_expr(&b.left);
        if matches!(
            b.op,
            AddAssign(_)
                | SubAssign(_)
                | MulAssign(_)
                | DivAssign(_)
                | RemAssign(_)
                | BitXorAssign(_)
                | BitAndAssign(_)
                | BitOrAssign(_)
                | ShlAssign(_)
                | ShrAssign(_)
        ) {
            self.assign_target(&b.left);
        }
    }
    fn visit_expr_closure(&mut self, c: &'a syn::ExprClosure) {
        self.scopes.push(vec![]);
        for p in &c.inputs {
            self.declare_pat(p);
        }
        self.visit_expr(&c.body);
        self.scopes.pop();
    }
    fn visit_expr_for_loop(&mut self, f: &'a syn::ExprForLoop) {
        self.visit_expr(&f.expr);
        self.scopes.push(vec![]);
        self.declare_pat(&f.pat);
        self.visit_block(&f.body);
        self.scopes.pop();
    }
    fn visit_arm(&mut self, a: &'a syn::Arm) {
        self.scopes.push(vec![]);
        self.declare_pat(&a.pat);
        if let Some((_, g)) = &a.guard {
            self.visit_expr(g);
        }
        self.visit_expr(&a.body);
        self.scopes.pop();
    }
    fn visit_expr_if(&mut self, i: &'a syn::ExprIf) {
        if let Expr::Let(l) = &*i.cond {
            self.visit_expr(&l.expr);
            self.scopes.push(vec![]);
            self.declare_pat(&l.pat);
            self.visit_block(&i.then_branch);
            self.scopes.pop();
        } else {
            self.visit_expr(&i.cond);
            self.visit_block(&i.then_branch);
        }
        if let Some((_, e)) = &i.else_branch {
            self.visit_expr(e);
        }
    }
    fn visit_item(&mut self, _: &'a syn::Item) {}
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        let b: syn::Block = syn::parse_str(src).expect("test block parses");
        outer_assigned(&b).iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn finds_outer_assignments_in_order() {
        assert_eq!(
            names("{ acc = acc + x; m += 1; acc = f(acc); }"),
            ["acc", "m"]
        );
    }

    #[test]
    fn ignores_locals_and_shadows() {
        assert_eq!(names("{ let mut t = 0; t = 1; acc = t; }"), ["acc"]);
        assert_eq!(names("{ let acc = 1; acc = 2; }"), Vec::<String>::new());
        // assignment before the shadowing let is to the outer variable
        assert_eq!(names("{ acc = 2; let acc = 1; }"), ["acc"]);
    }

    #[test]
    fn closure_params_and_nested_scopes() {
        assert_eq!(
            names("{ (x, y) = g(x, y, |__w, (mut x, mut y)| { x = 1; (x, y) }); }"),
            ["x", "y"]
        );
        assert_eq!(names("{ { let z = 0; z = 1; } z = 3; }"), ["z"]);
        assert_eq!(
            names("{ match v { Some(q) => { q = 1; } None => { r = 2; } } }"),
            ["r"]
        );
    }

    #[test]
    fn destructuring_and_fields() {
        assert_eq!(names("{ (a, [b, _]) = t; s.0 = 1; }"), ["a", "b", "s"]);
    }
}
