//! `#[cutile::foreign]`: a body-less `unsafe fn` becomes a function that records a call of a tile-library
//! function while a kernel is traced (`cutile::core::foreign`), and the check of constant string arguments at
//! call sites inside `#[cutile::module]` bodies.
//!
//! Constant arguments: the `&str` parameters, then the generic parameters (`const N: i32` → index,
//! `T: ElementType` → datatype, `S: Shape` → shape), in order, or in the order `const_args = "a, b"` lists.
//! Other parameters are operands (`in`, or `inout` with `#[inout]`); the return type lists the updated
//! `inout` operands, then the output-only operands.
//!
//! String arguments must be known when the kernel is compiled. At a call inside `unsafe { … }` (foreign calls
//! are unsafe) or of a module function with a `ForeignStr` parameter, an argument that is a literal, a const
//! (`MODE`, `path::MODE`), an associated const (`Lower::NAME`, `<F as FillMode>::NAME`), or a local bound once
//! to one of these is wrapped in `const { … }` and becomes a `ForeignStr`; a string macro (`concat!`, …) or a
//! reassigned local is rejected here; any other value is a type error (`ForeignStr` expected).

use std::collections::{HashMap, HashSet};

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, FnArg, ForeignItemFn, GenericParam, Pat, Type};

/// `name = "…"`, `const_args = "…"`.
struct Args {
    name: Option<syn::LitStr>,
    const_args: Option<syn::LitStr>,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut a = Args {
            name: None,
            const_args: None,
        };
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            input.parse::<syn::Token![=]>()?;
            let v: syn::LitStr = input.parse()?;
            match key.to_string().as_str() {
                "name" => a.name = Some(v),
                "const_args" => a.const_args = Some(v),
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        "unknown argument; `#[cutile::foreign]` takes `name = \"symbol\"` and \
                         `const_args = \"a, b\"`",
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(a)
    }
}

/// Whether a type is `&str`.
fn is_str_ref(t: &Type) -> bool {
    matches!(t, Type::Reference(r) if r.mutability.is_none()
        && matches!(&*r.elem, Type::Path(p) if p.path.is_ident("str")))
}

/// Whether a type names `ForeignStr`.
pub fn is_foreign_str(t: &Type) -> bool {
    matches!(t, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "ForeignStr"))
}

/// Whether an attribute is `#[foreign]` / `#[cutile::foreign]`.
pub fn is_foreign_attr(a: &syn::Attribute) -> bool {
    let segs: Vec<String> = a
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    matches!(segs.as_slice(), [e] if e == "foreign")
        || matches!(segs.as_slice(), [c, e] if c == "cutile" && e == "foreign")
}

enum Const {
    Str(syn::Ident),
    Index(syn::Ident),
    Datatype(syn::Ident),
    Shape(syn::Ident),
}

impl Const {
    fn name(&self) -> &syn::Ident {
        match self {
            Const::Str(i) | Const::Index(i) | Const::Datatype(i) | Const::Shape(i) => i,
        }
    }
}

/// Expand `#[cutile::foreign(…)]` on a body-less `unsafe fn`.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args: Args = syn::parse2(attr)?;
    if let Ok(f) = syn::parse2::<syn::ItemFn>(item.clone()) {
        return Err(syn::Error::new(
            f.block.span(),
            "a foreign tile function has no body (the tile library implements it): end the declaration \
             with `;`",
        ));
    }
    let f: ForeignItemFn = syn::parse2(item.clone()).map_err(|_| {
        syn::Error::new(
            item.span(),
            "`#[cutile::foreign]` goes on a body-less `unsafe fn name(…) -> …;` (the body is in the tile \
             library)",
        )
    })?;
    let ForeignItemFn {
        attrs, vis, sig, ..
    } = f;
    if sig.unsafety.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "a foreign tile function must be declared `unsafe fn`: nothing checks what the library code \
             does, so every call needs an `unsafe` block",
        ));
    }
    let symbol = args
        .name
        .as_ref()
        .map(|l| l.value())
        .unwrap_or_else(|| sig.ident.to_string());
    let mut consts = vec![];
    let mut operands = vec![];
    let mut params = vec![];
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            return Err(syn::Error::new(
                input.span(),
                "a foreign tile function takes no `self`",
            ));
        };
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new(
                pt.pat.span(),
                "foreign function parameters must be plain names",
            ));
        };
        let id = pi.ident.clone();
        let inout = pt.attrs.iter().any(|a| a.path().is_ident("inout"));
        let other: Vec<&syn::Attribute> = pt
            .attrs
            .iter()
            .filter(|a| !a.path().is_ident("inout"))
            .collect();
        if is_str_ref(&pt.ty) {
            if inout {
                return Err(syn::Error::new(
                    pt.span(),
                    "a string constant cannot be `#[inout]`",
                ));
            }
            consts.push(Const::Str(id.clone()));
            params.push(quote!(#(#other)* #id: ::cutile::core::ForeignStr));
        } else {
            let ty = &pt.ty;
            if let Type::Reference(r) = &**ty {
                return Err(syn::Error::new(
                    r.span(),
                    "operands are passed by value (`Tile<E, S>` or `Scalar<E>`); an `#[inout]` operand's \
                     new value is returned first in the results",
                ));
            }
            operands.push((id.clone(), inout));
            params.push(quote!(#(#other)* #id: #ty));
        }
    }
    for g in &sig.generics.params {
        match g {
            GenericParam::Const(c) => consts.push(Const::Index(c.ident.clone())),
            GenericParam::Type(t) => {
                let bound = |name: &str| {
                    t.bounds.iter().any(|b| {
                        matches!(b, syn::TypeParamBound::Trait(tb)
                            if tb.path.segments.last().is_some_and(|s| s.ident == name))
                    })
                };
                if bound("ElementType") {
                    consts.push(Const::Datatype(t.ident.clone()));
                } else if bound("Shape") {
                    consts.push(Const::Shape(t.ident.clone()));
                } else {
                    return Err(syn::Error::new(
                        t.span(),
                        "a type parameter of a foreign function is a constant argument: bound it by \
                         `ElementType` (datatype) or `Shape` (shape)",
                    ));
                }
            }
            GenericParam::Lifetime(l) => {
                return Err(syn::Error::new(
                    l.span(),
                    "foreign functions take no lifetime parameters",
                ));
            }
        }
    }
    if let Some(order) = &args.const_args {
        let names: Vec<String> = order
            .value()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let mut ordered = vec![];
        for n in &names {
            match consts.iter().position(|c| c.name() == n) {
                Some(i) => ordered.push(consts.remove(i)),
                None => {
                    return Err(syn::Error::new(
                        order.span(),
                        format!("`{n}` is not a `&str` or generic parameter of this function"),
                    ));
                }
            }
        }
        if let Some(c) = consts.first() {
            return Err(syn::Error::new(
                order.span(),
                format!(
                    "`const_args` must list every constant parameter; `{}` is missing",
                    c.name()
                ),
            ));
        }
        consts = ordered;
    }
    if operands.is_empty() && sig.output == syn::ReturnType::Default {
        return Err(syn::Error::new(
            sig.ident.span(),
            "a foreign function needs at least one operand or result (tileiras rejects declarations \
             without inputs)",
        ));
    }
    let const_calls = consts.iter().map(|c| {
        let n = c.name();
        let s = n.to_string();
        match c {
            Const::Str(_) => quote!(__call.const_str(#s, #n);),
            Const::Index(_) => quote!(__call.const_index(#s, #n as i64);),
            Const::Datatype(_) => quote!(__call.const_type::<#n>(#s);),
            Const::Shape(_) => quote!(__call.const_shape::<#n>(#s);),
        }
    });
    let operand_calls = operands.iter().map(|(id, inout)| {
        if *inout {
            quote!(__call.inout(#id);)
        } else {
            quote!(__call.input(#id);)
        }
    });
    let ret = match &sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, t) => quote!(#t),
    };
    let ident = &sig.ident;
    let generics = &sig.generics;
    let where_clause = &sig.generics.where_clause;
    let span = sig.ident.span();
    Ok(quote_spanned! {span=>
        #(#attrs)*
        #[track_caller]
        #[allow(clippy::too_many_arguments)]
        #vis unsafe fn #ident #generics (#(#params),*) -> #ret #where_clause {
            let mut __call = ::cutile::dsl::__rt::ForeignCall::new(#symbol);
            #(#const_calls)*
            #(#operand_calls)*
            __call.finish::<#ret>()
        }
    })
}

/// Per module function: which parameter positions take a constant string (`ForeignStr`, or `&str` of a
/// foreign declaration).
pub type StrParams = HashMap<String, Vec<bool>>;

/// Collect [`StrParams`] from the module's items.
pub fn str_params(items: &[syn::Item]) -> StrParams {
    let mut m = StrParams::new();
    for it in items {
        match it {
            syn::Item::Fn(f) => {
                let v: Vec<bool> = f
                    .sig
                    .inputs
                    .iter()
                    .map(|a| matches!(a, FnArg::Typed(p) if is_foreign_str(&p.ty)))
                    .collect();
                if v.iter().any(|b| *b) {
                    m.insert(f.sig.ident.to_string(), v);
                }
            }
            syn::Item::Verbatim(ts) => {
                if let Ok(f) = syn::parse2::<ForeignItemFn>(ts.clone())
                    && f.attrs.iter().any(is_foreign_attr)
                {
                    let v = f
                        .sig
                        .inputs
                        .iter()
                        .map(|a| matches!(a, FnArg::Typed(p) if is_str_ref(&p.ty)))
                        .collect();
                    m.insert(f.sig.ident.to_string(), v);
                }
            }
            _ => {}
        }
    }
    m
}

/// Rewrites constant string arguments (see the module docs) in one function body.
pub struct ConstStrs<'a> {
    pub errors: Vec<syn::Error>,
    known: &'a StrParams,
    /// Locals bound (by `let`) to a constant string form.
    bound: HashMap<String, Expr>,
    /// Locals assigned anywhere after their `let`.
    reassigned: HashSet<String>,
    /// Other locals and parameters (never wrapped).
    locals: HashSet<String>,
    unsafe_depth: usize,
}

impl<'a> ConstStrs<'a> {
    pub fn new(known: &'a StrParams, f: &syn::ItemFn) -> ConstStrs<'a> {
        let mut locals = HashSet::new();
        for a in &f.sig.inputs {
            if let FnArg::Typed(p) = a
                && let Pat::Ident(pi) = &*p.pat
            {
                locals.insert(pi.ident.to_string());
            }
        }
        let mut assigned = Assigned::default();
        syn::visit::Visit::visit_block(&mut assigned, &f.block);
        ConstStrs {
            errors: vec![],
            known,
            bound: HashMap::new(),
            reassigned: assigned.0,
            locals,
            unsafe_depth: 0,
        }
    }

    /// A constant string form: literal, const path, associated const, or a qualified path.
    fn is_const_form(e: &Expr) -> bool {
        match e {
            Expr::Lit(l) => matches!(l.lit, syn::Lit::Str(_)),
            Expr::Path(p) => {
                p.qself.is_some()
                    || p.path.segments.last().is_some_and(|s| {
                        let n = s.ident.to_string();
                        n.chars().any(|c| c.is_ascii_uppercase())
                            && n.chars()
                                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    })
            }
            Expr::Paren(p) => Self::is_const_form(&p.expr),
            _ => false,
        }
    }

    /// The rewritten argument, or `None` to leave it.
    fn arg(&mut self, e: &Expr, forced: bool) -> Option<Expr> {
        let span = e.span();
        if let Expr::Macro(m) = e {
            let name = m
                .mac
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            if forced || matches!(name.as_str(), "concat" | "format" | "stringify" | "env") {
                self.errors.push(syn::Error::new(
                    span,
                    format!(
                        "`{name}!` is not a constant string argument: pass a literal, a `const`, an \
                         associated const, or a local bound to one of these"
                    ),
                ));
            }
            return None;
        }
        if let Expr::Path(p) = e
            && p.qself.is_none()
            && let Some(id) = p.path.get_ident()
        {
            let n = id.to_string();
            if let Some(b) = self.bound.get(&n).cloned() {
                if self.reassigned.contains(&n) {
                    self.errors.push(syn::Error::new(
                        span,
                        format!(
                            "`{n}` is reassigned in this function, so its value is not a compile-time \
                             constant; bind a constant string argument once"
                        ),
                    ));
                    return None;
                }
                return Some(wrap(&b, span));
            }
            if self.locals.contains(&n) {
                return None;
            }
        }
        if Self::is_const_form(e) {
            return Some(wrap(e, span));
        }
        None
    }
}

fn wrap(e: &Expr, span: Span) -> Expr {
    syn::parse_quote_spanned! {span=> ::cutile::dsl::__rt::__foreign_str(const { #e }) }
}

/// Names assigned by `x = …` / `x += …` anywhere.
#[derive(Default)]
struct Assigned(HashSet<String>);

impl<'ast> syn::visit::Visit<'ast> for Assigned {
    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        if let Expr::Path(p) = &*a.left
            && let Some(id) = p.path.get_ident()
        {
            self.0.insert(id.to_string());
        }
        syn::visit::visit_expr_assign(self, a);
    }
}

impl VisitMut for ConstStrs<'_> {
    fn visit_local_mut(&mut self, l: &mut syn::Local) {
        visit_mut::visit_local_mut(self, l);
        let name = match &l.pat {
            Pat::Ident(pi) => Some(pi.ident.to_string()),
            Pat::Type(pt) => match &*pt.pat {
                Pat::Ident(pi) => Some(pi.ident.to_string()),
                _ => None,
            },
            _ => None,
        };
        if let Some(n) = name {
            match l.init.as_ref().map(|i| &*i.expr) {
                Some(e) if Self::is_const_form(e) => {
                    self.bound.insert(n.clone(), e.clone());
                }
                Some(Expr::Path(p))
                    if p.path
                        .get_ident()
                        .is_some_and(|i| self.bound.contains_key(&i.to_string())) =>
                {
                    let src = p
                        .path
                        .get_ident()
                        .map(|i| i.to_string())
                        .unwrap_or_default();
                    if let Some(b) = self.bound.get(&src).cloned() {
                        self.bound.insert(n.clone(), b);
                    }
                }
                _ => {
                    self.bound.remove(&n);
                    self.locals.insert(n);
                }
            }
        }
    }
    fn visit_expr_unsafe_mut(&mut self, u: &mut syn::ExprUnsafe) {
        self.unsafe_depth += 1;
        visit_mut::visit_expr_unsafe_mut(self, u);
        self.unsafe_depth -= 1;
    }
    fn visit_expr_call_mut(&mut self, c: &mut syn::ExprCall) {
        visit_mut::visit_expr_call_mut(self, c);
        let callee = match &*c.func {
            Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        let Some(callee) = callee else { return };
        let positions = self.known.get(&callee).cloned();
        if positions.is_none() && self.unsafe_depth == 0 {
            return;
        }
        for (i, a) in c.args.iter_mut().enumerate() {
            let forced = positions
                .as_ref()
                .is_some_and(|p| p.get(i).copied().unwrap_or(false));
            if positions.is_some() && !forced {
                continue;
            }
            if let Some(new) = self.arg(a, forced) {
                *a = new;
            }
        }
    }
}

/// Compile error tokens for `e` followed by nothing else.
pub fn error_tokens(e: syn::Error) -> TokenStream {
    let ce = e.to_compile_error();
    quote!(#ce)
}
