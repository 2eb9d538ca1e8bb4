//! Procedural macros of the cutile kernel DSL.
//!
//! - `#[cutile::module]` on a `mod` of kernels and device helper functions: rewrites every function body
//!   (device control flow into tracing calls, comparisons into trait calls, `print!`/`assert!` into device
//!   operations), rejects Rust the DSL cannot express with a `compile_error!` at its span (closures as values,
//!   recursion, indexing, `loop`/`break`/`continue`/`return`, `?`, `async`), and generates per kernel the
//!   IR builder and the kernel-as-value API (see `kernel.rs`).
//! - `#[cutile::entry(hints…)]` marks a launchable kernel inside such a module; on its own it is an error.
//!
//! - `#[cutile::foreign(name = "symbol")]` on a body-less `unsafe fn`: a tile-library function callable from
//!   kernels (see `foreign.rs`); inside a module, constant string arguments of calls are checked and wrapped.
//!
//! The crate depends only on syn/quote/proc-macro2; generated code refers to `::cutile::…`.

mod assigned;
mod foreign;
mod hints;
mod kernel;
mod recursion;
mod rewrite;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::spanned::Spanned;
use syn::{Item, ItemMod};

/// Whether an attribute is `#[entry]` / `#[cutile::entry]` (with or without arguments).
pub(crate) fn is_entry_attr(a: &syn::Attribute) -> bool {
    let segs: Vec<String> = a
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    matches!(segs.as_slice(), [e] if e == "entry")
        || matches!(segs.as_slice(), [c, e] if c == "cutile" && e == "entry")
}

/// A module of kernels and device helpers. See the crate docs.
#[proc_macro_attribute]
pub fn module(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    if !attr.is_empty() {
        return syn::Error::new(attr.span(), "`#[cutile::module]` takes no arguments")
            .to_compile_error()
            .into();
    }
    let source_hash = fnv1a(&item.to_string());
    let m = syn::parse_macro_input!(item as ItemMod);
    match expand_module(m, source_hash) {
        Ok(ts) => ts.into(),
        Err((errors, shell)) => {
            let errs = errors.iter().map(syn::Error::to_compile_error);
            quote!(#(#errs)* #shell).into()
        }
    }
}

/// A foreign tile function (implemented by a tile library). See `foreign.rs`.
#[proc_macro_attribute]
pub fn foreign(attr: TokenStream, item: TokenStream) -> TokenStream {
    match foreign::expand(attr.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => foreign::error_tokens(e).into(),
    }
}

/// Marks a kernel inside a `#[cutile::module]`.
#[proc_macro_attribute]
pub fn entry(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = TokenStream2::from(item);
    let e = syn::Error::new(
        item.span(),
        "`#[cutile::entry]` only works on a function inside a `#[cutile::module]` module \
         (put `#[cutile::module]` on the enclosing `mod`, above this attribute's module)",
    )
    .to_compile_error();
    quote!(#e #item).into()
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // The DSL version is part of a kernel's identity.
    for b in env!("CARGO_PKG_VERSION").bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

type Failure = (Vec<syn::Error>, TokenStream2);

fn expand_module(m: ItemMod, source_hash: u64) -> Result<TokenStream2, Failure> {
    let ItemMod {
        attrs,
        vis,
        ident,
        content,
        ..
    } = m;
    let shell = quote!(#(#attrs)* #vis mod #ident {});
    let Some((_, items)) = content else {
        return Err((
            vec![syn::Error::new(
                ident.span(),
                "`#[cutile::module]` needs an inline module body: `mod name { … }`",
            )],
            shell,
        ));
    };
    let mut errors = vec![];
    errors.extend(recursion::check(&items));
    let mut out = vec![];
    let str_params = foreign::str_params(&items);
    for item in items {
        match item {
            // A foreign declaration written with a body: left to `#[cutile::foreign]`, which rejects it.
            Item::Fn(f) if f.attrs.iter().any(foreign::is_foreign_attr) => out.push(quote!(#f)),
            Item::Fn(mut f) => {
                let entry_attr = f.attrs.iter().find(|a| is_entry_attr(a)).cloned();
                let mut strs = foreign::ConstStrs::new(&str_params, &f);
                syn::visit_mut::VisitMut::visit_block_mut(&mut strs, &mut f.block);
                errors.extend(strs.errors);
                let mut rw = rewrite::Rewriter::new();
                rw.rewrite_block(&mut f.block);
                errors.extend(rw.errors);
                match entry_attr {
                    Some(a) => {
                        let args = match &a.meta {
                            syn::Meta::Path(_) => Ok(hints::EntryArgs::empty()),
                            _ => a.parse_args::<hints::EntryArgs>(),
                        };
                        match args.and_then(|args| kernel::generate(&f, &args, source_hash)) {
                            Ok(ts) => out.push(ts),
                            Err(e) => errors.push(e),
                        }
                    }
                    None => {
                        f.attrs.push(syn::parse_quote!(#[allow(unused_mut, unused_variables, unused_assignments, unused_parens, clippy::let_unit_value, clippy::unused_unit)]));
                        out.push(quote!(#f));
                    }
                }
            }
            other => out.push(quote!(#other)),
        }
    }
    if !errors.is_empty() {
        return Err((errors, shell));
    }
    Ok(quote! {
        #(#attrs)*
        #vis mod #ident {
            #(#out)*
        }
    })
}
