//! The kernel-body rewriter: device control flow becomes calls of `cutile::dsl::__rt` with the body as a
//! closure and the variables it assigns threaded through; comparisons and `&&`/`||` become trait calls that
//! work on device and host values; `print!`/`println!`/`assert!` become device operations. Rust the DSL
//! cannot express is rejected with a `compile_error!` at its span.
//!
//! The rewrite is bottom-up: a construct's children are rewritten first, and generated code is never
//! visited again, so the closures and destructuring assignments we emit are not themselves rejected.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, Ident, Pat};

use crate::assigned::outer_assigned;

pub struct Rewriter {
    pub errors: Vec<syn::Error>,
    /// Names of the module's functions (for recursion checks done elsewhere) — unused here.
    pub rt: TokenStream,
}

impl Rewriter {
    pub fn new() -> Rewriter {
        Rewriter {
            errors: vec![],
            rt: quote!(::cutile::dsl::__rt),
        }
    }

    fn err(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, msg));
    }

    /// Rewrite a function body in place.
    pub fn rewrite_block(&mut self, b: &mut syn::Block) {
        self.visit_block_mut(b);
    }

    fn rewrite_for(&mut self, f: &mut syn::ExprForLoop) -> Option<Expr> {
        let span = f.for_token.span();
        if f.label.is_some() {
            self.err(
                f.label.span(),
                "loop labels are not supported in kernels (there is no `break`)",
            );
            return None;
        }
        let (lo, hi, step) = match self.range_parts(&f.expr) {
            Some(p) => p,
            None => {
                self.err(
                    f.expr.span(),
                    "a device loop iterates over `a..b` or `(a..b).step_by(s)` with `i32` bounds \
                     (`Scalar<i32>` or `i32`); iterating other collections is not supported in kernels",
                );
                return None;
            }
        };
        let pat = match &*f.pat {
            Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => {
                let id = &p.ident;
                quote!(#id)
            }
            Pat::Wild(w) => quote!(#w),
            other => {
                self.err(
                    other.span(),
                    "the loop variable of a device loop must be a plain name or `_`",
                );
                return None;
            }
        };
        let vars = outer_assigned(&f.body);
        let rt = &self.rt;
        let body = &f.body;
        let (tuple, tuple_mut) = carried_tuples(&vars);
        Some(syn::parse_quote_spanned! {span=>
            {
                #tuple = #rt::for_range(#lo, #hi, #step, #tuple, |#pat, #tuple_mut| {
                    #body;
                    #tuple
                });
            }
        })
    }

    /// `a..b` → (a, b, 1); `(a..b).step_by(s)` → (a, b, s).
    fn range_parts(&mut self, e: &Expr) -> Option<(Expr, Expr, Expr)> {
        match e {
            Expr::Range(r) => {
                if let syn::RangeLimits::Closed(c) = r.limits {
                    self.err(
                        c.span(),
                        "inclusive ranges are not supported in device loops; use `a..b + 1`",
                    );
                    return None;
                }
                let lo = r.start.as_deref()?.clone();
                let hi = r.end.as_deref()?.clone();
                Some((lo, hi, syn::parse_quote!(1i32)))
            }
            Expr::Paren(p) => self.range_parts(&p.expr),
            Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                let (lo, hi, _) = self.range_parts(&m.receiver)?;
                Some((lo, hi, m.args[0].clone()))
            }
            _ => None,
        }
    }

    fn rewrite_while(&mut self, w: &mut syn::ExprWhile) -> Option<Expr> {
        let span = w.while_token.span();
        if w.label.is_some() {
            self.err(
                w.label.span(),
                "loop labels are not supported in kernels (there is no `break`)",
            );
            return None;
        }
        if let Expr::Let(l) = &*w.cond {
            self.err(l.span(), "`while let` is not supported in kernels");
            return None;
        }
        let vars = outer_assigned(&w.body);
        let rt = &self.rt;
        let body = &w.body;
        let cond = &w.cond;
        let (tuple, tuple_mut) = carried_tuples(&vars);
        Some(syn::parse_quote_spanned! {span=>
            {
                #tuple = #rt::while_loop(#tuple, |#tuple| #cond, |#tuple_mut| {
                    #body;
                    #tuple
                });
            }
        })
    }

    fn rewrite_if(&mut self, i: &mut syn::ExprIf) -> Expr {
        let span = i.if_token.span();
        let mut vars = outer_assigned(&i.then_branch);
        let else_expr: Expr = match &i.else_branch {
            Some((_, e)) => {
                let b: syn::Block = syn::parse_quote!({ #e });
                for v in outer_assigned(&b) {
                    if !vars.contains(&v) {
                        vars.push(v);
                    }
                }
                (**e).clone()
            }
            None => syn::parse_quote!(()),
        };
        let rt = &self.rt;
        let then_b = &i.then_branch;
        let cond = &i.cond;
        let (tuple, tuple_mut) = carried_tuples(&vars);
        let which = Ident::new("__cutile_then", Span::mixed_site());
        let res = Ident::new("__cutile_if", Span::mixed_site());
        syn::parse_quote_spanned! {span=>
            {
                let #res;
                (#res, #tuple) = #rt::branch(#cond, #tuple, |#which: bool, #tuple_mut| {
                    if #which { (#then_b, #tuple) } else { (#else_expr, #tuple) }
                });
                #res
            }
        }
    }

    fn rewrite_binary(&mut self, b: &syn::ExprBinary) -> Option<Expr> {
        use syn::BinOp::*;
        let rt = &self.rt;
        let (l, r) = (&b.left, &b.right);
        let span = b.op.span();
        let f = match b.op {
            Lt(_) => quote_spanned!(span=> lt),
            Le(_) => quote_spanned!(span=> le),
            Gt(_) => quote_spanned!(span=> gt),
            Ge(_) => quote_spanned!(span=> ge),
            Eq(_) => quote_spanned!(span=> eq),
            Ne(_) => quote_spanned!(span=> ne),
            And(_) => return Some(syn::parse_quote_spanned!(span=> #rt::and(#l, || #r))),
            Or(_) => return Some(syn::parse_quote_spanned!(span=> #rt::or(#l, || #r))),
            _ => return None,
        };
        Some(syn::parse_quote_spanned!(span=> #rt::#f(#l, #r)))
    }

    fn rewrite_macro(&mut self, m: &syn::ExprMacro) -> Option<Expr> {
        let name = m.mac.path.segments.last()?.ident.to_string();
        let span = m.mac.path.span();
        let rt = self.rt.clone();
        match name.as_str() {
            "print" | "println" => {
                let args = match m.mac.parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                ) {
                    Ok(a) => a,
                    Err(e) => {
                        self.errors.push(e);
                        return None;
                    }
                };
                let mut it = args.into_iter();
                let Some(Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(fmt),
                    ..
                })) = it.next()
                else {
                    self.err(span, "device `print!` needs a string literal format");
                    return None;
                };
                let mut rest: Vec<Expr> = it.collect();
                for e in &mut rest {
                    self.visit_expr_mut(e);
                }
                let (mut pieces, inline) = match split_format(&fmt.value()) {
                    Ok(p) => p,
                    Err(msg) => {
                        self.err(fmt.span(), msg);
                        return None;
                    }
                };
                if name == "println"
                    && let Some(last) = pieces.last_mut()
                {
                    last.push('\n');
                }
                // `{name}` placeholders refer to variables; `{}` to the positional arguments in order.
                let mut args = vec![];
                let mut pos = rest.into_iter();
                for n in inline {
                    match n {
                        Some(id) => {
                            let id = Ident::new(&id, fmt.span());
                            args.push(quote!(#id));
                        }
                        None => match pos.next() {
                            Some(e) => args.push(quote!(#e)),
                            None => {
                                self.err(fmt.span(), "more `{}` placeholders than arguments");
                                return None;
                            }
                        },
                    }
                }
                if pos.next().is_some() {
                    self.err(fmt.span(), "more arguments than `{}` placeholders");
                    return None;
                }
                Some(syn::parse_quote_spanned! {span=>
                    #rt::print(&[#(#pieces),*], &[#(&#args as &dyn ::cutile::core::debug::DevicePrint),*])
                })
            }
            "assert" => {
                let args = match m.mac.parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                ) {
                    Ok(a) => a,
                    Err(e) => {
                        self.errors.push(e);
                        return None;
                    }
                };
                let mut it = args.into_iter();
                let Some(mut cond) = it.next() else {
                    self.err(span, "`assert!` needs a condition");
                    return None;
                };
                let default_msg = quote!(#cond).to_string();
                self.visit_expr_mut(&mut cond);
                let msg = match it.next() {
                    None => default_msg,
                    Some(Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    })) if it.next().is_none() => s.value(),
                    Some(other) => {
                        self.err(
                            other.span(),
                            "a device `assert!` message must be a plain string literal (no format arguments)",
                        );
                        return None;
                    }
                };
                Some(syn::parse_quote_spanned!(span=> #rt::device_assert(#cond, #msg)))
            }
            _ => None,
        }
    }

    /// Visit a call argument: a closure literal is allowed here (e.g. the combiner of `reduce`).
    fn visit_arg(&mut self, a: &mut Expr) {
        if let Expr::Closure(c) = a {
            if let Some(m) = &c.movability {
                self.err(m.span(), "`static` closures are not supported in kernels");
            }
            if c.asyncness.is_some() {
                self.err(c.span(), "async closures are not supported in kernels");
            }
            self.visit_expr_mut(&mut c.body);
        } else {
            self.visit_expr_mut(a);
        }
    }
}

/// `(a, b,)` and `(mut a, mut b,)` for the carried variables.
fn carried_tuples(vars: &[Ident]) -> (TokenStream, TokenStream) {
    // Spanned at the first assignment, so a "cannot be carried" error points at the variable.
    let span = vars
        .first()
        .map(|v| v.span())
        .unwrap_or_else(Span::call_site);
    (
        quote_spanned!(span=> (#(#vars,)*)),
        quote_spanned!(span=> (#(mut #vars,)*)),
    )
}

/// Split a format string at `{}` / `{name}` placeholders. Returns the literal pieces (one more than the
/// placeholders) and, per placeholder, `Some(name)` for inline variables or `None` for positional ones.
fn split_format(s: &str) -> Result<(Vec<String>, Vec<Option<String>>), String> {
    let mut pieces = vec![String::new()];
    let mut names = vec![];
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                if let Some(p) = pieces.last_mut() {
                    p.push('{');
                }
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                if let Some(p) = pieces.last_mut() {
                    p.push('}');
                }
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(ch) => name.push(ch),
                        None => return Err("unclosed `{` in the format string".into()),
                    }
                }
                if name.contains(':') {
                    return Err("format specs (`{:…}`) are not supported by device `print!`; the conversion follows the element type".into());
                }
                if name.is_empty() {
                    names.push(None);
                } else if name.chars().all(|ch| ch.is_alphanumeric() || ch == '_')
                    && !name.starts_with(|ch: char| ch.is_ascii_digit())
                {
                    names.push(Some(name));
                } else {
                    return Err(format!(
                        "unsupported placeholder `{{{name}}}` in device `print!`"
                    ));
                }
                pieces.push(String::new());
            }
            '}' => return Err("unmatched `}` in the format string".into()),
            c => {
                if let Some(p) = pieces.last_mut() {
                    p.push(c);
                }
            }
        }
    }
    Ok((pieces, names))
}

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::ForLoop(f) => {
                self.visit_expr_mut(&mut f.expr);
                self.visit_block_mut(&mut f.body);
                if let Some(new) = self.rewrite_for(f) {
                    *e = new;
                }
            }
            Expr::While(w) => {
                self.visit_expr_mut(&mut w.cond);
                self.visit_block_mut(&mut w.body);
                if let Some(new) = self.rewrite_while(w) {
                    *e = new;
                }
            }
            Expr::If(i) => {
                if let Expr::Let(l) = &mut *i.cond {
                    // `if let` matches host values only: it stays a trace-time branch.
                    self.visit_expr_mut(&mut l.expr);
                    self.visit_block_mut(&mut i.then_branch);
                    if let Some((_, el)) = &mut i.else_branch {
                        self.visit_expr_mut(el);
                    }
                    return;
                }
                self.visit_expr_mut(&mut i.cond);
                self.visit_block_mut(&mut i.then_branch);
                if let Some((_, el)) = &mut i.else_branch {
                    self.visit_expr_mut(el);
                }
                *e = self.rewrite_if(i);
            }
            Expr::Binary(b) => {
                self.visit_expr_mut(&mut b.left);
                self.visit_expr_mut(&mut b.right);
                if let Some(new) = self.rewrite_binary(b) {
                    *e = new;
                }
            }
            Expr::Loop(l) => self.err(
                l.loop_token.span(),
                "`loop` is not supported in kernels: write a `while` with a device condition",
            ),
            Expr::Break(b) => self.err(
                b.span(),
                "`break` is not supported in kernels: device loops run to their bound (use a `while` condition)",
            ),
            Expr::Continue(c) => self.err(
                c.span(),
                "`continue` is not supported in kernels: guard the rest of the body with an `if`",
            ),
            Expr::Return(r) => self.err(
                r.span(),
                "`return` is not supported in kernels: device functions return their final expression",
            ),
            Expr::Try(t) => self.err(t.question_token.span(), "the `?` operator is not supported in kernels"),
            Expr::Async(a) => self.err(a.span(), "`async` blocks are not supported in kernels"),
            Expr::Await(a) => self.err(a.span(), "`.await` is not supported in kernels"),
            Expr::Yield(y) => self.err(y.span(), "`yield` is not supported in kernels"),
            Expr::Closure(c) => self.err(
                c.span(),
                "closures can only be passed directly to DSL operations (such as `reduce`); \
                 storing or returning a closure is not supported in kernels",
            ),
            Expr::Index(ix) => self.err(
                ix.bracket_token.span.join(),
                "indexing is not supported in kernels: tiles have no run-time element access \
                 (use `extract`, `select` with a mask, or a gather)",
            ),
            Expr::Macro(m) => {
                if let Some(new) = self.rewrite_macro(m) {
                    *e = new;
                }
            }
            Expr::Call(c) => {
                self.visit_expr_mut(&mut c.func);
                for a in c.args.iter_mut() {
                    self.visit_arg(a);
                }
            }
            Expr::MethodCall(m) => {
                self.visit_expr_mut(&mut m.receiver);
                for a in m.args.iter_mut() {
                    self.visit_arg(a);
                }
            }
            _ => visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_stmt_mut(&mut self, s: &mut syn::Stmt) {
        match s {
            syn::Stmt::Macro(m) => {
                // `print!(…);` in statement position.
                let mut e = Expr::Macro(syn::ExprMacro {
                    attrs: m.attrs.clone(),
                    mac: m.mac.clone(),
                });
                self.visit_expr_mut(&mut e);
                if !matches!(e, Expr::Macro(_)) {
                    *s = syn::Stmt::Expr(e, Some(Default::default()));
                }
            }
            syn::Stmt::Local(l) => {
                if let Some(init) = &mut l.init
                    && let Some((_, div)) = &init.diverge
                {
                    self.err(div.span(), "`let … else` is not supported in kernels");
                }
                visit_mut::visit_stmt_mut(self, s);
            }
            syn::Stmt::Item(_) => {}
            _ => visit_mut::visit_stmt_mut(self, s),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn format_split() {
        let (p, n) = split_format("a={} b={x} {{lit}}").unwrap();
        assert_eq!(p, ["a=", " b=", " {lit}"]);
        assert_eq!(n, [None, Some("x".to_string())]);
        assert!(split_format("{:.3}").is_err());
        assert!(split_format("{").is_err());
    }

    fn rewrite(src: &str) -> (String, Vec<String>) {
        let mut b: syn::Block = syn::parse_str(src).unwrap();
        let mut r = Rewriter::new();
        r.rewrite_block(&mut b);
        (
            quote!(#b).to_string(),
            r.errors.iter().map(|e| e.to_string()).collect(),
        )
    }

    #[test]
    fn for_loop_threads_assigned_vars() {
        let (out, errs) = rewrite("{ let mut acc = z; for k in 0..n { acc = acc + k; } }");
        assert!(errs.is_empty());
        assert!(
            out.contains("for_range (0 , n , 1i32 , (acc ,) , | k , (mut acc ,) |"),
            "{out}"
        );
    }

    #[test]
    fn nested_if_in_loop_propagates() {
        let (out, errs) = rewrite("{ for k in 0..n { if c { m = m + 1; } } }");
        assert!(errs.is_empty());
        assert!(out.contains("for_range (0 , n , 1i32 , (m ,)"), "{out}");
        assert!(out.contains(":: branch (c , (m ,)"), "{out}");
    }

    #[test]
    fn rejects_unsupported() {
        for (src, frag) in [
            ("{ loop {} }", "`loop`"),
            ("{ for i in 0..n { break; } }", "`break`"),
            ("{ let f = |x| x; }", "closures"),
            ("{ let y = t[i]; }", "indexing"),
            ("{ return; }", "`return`"),
            ("{ for i in v.iter() {} }", "iterates over"),
        ] {
            let (_, errs) = rewrite(src);
            assert!(errs.iter().any(|e| e.contains(frag)), "{src}: {errs:?}");
        }
    }

    #[test]
    fn closure_argument_allowed() {
        let (_, errs) = rewrite("{ let r = t.reduce::<1>(0.0, |a, b| a + b); }");
        assert!(errs.is_empty(), "{errs:?}");
    }
}
