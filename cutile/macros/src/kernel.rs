//! Code generation for one `#[cutile::entry]` kernel: the rewritten body as a device function, the static
//! [`KernelInfo`], and a module named after the kernel with `kernel::<…>()` (the kernel as a value, for
//! specialization and the compile-only API) and `build::<…>()` (trace the IR for one specialization).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, GenericParam, ItemFn, Pat, PathArguments, Type};

use crate::hints::EntryArgs;

/// How a kernel parameter is passed, from its Rust type.
#[allow(clippy::large_enum_variant)] // built once per parameter at expansion time
enum ParamShape {
    Tensor {
        mutable: bool,
        elem: Type,
        shape: Type,
    },
    Scalar {
        elem: Type,
    },
}

/// The generic arguments of `Name<A, B>` in the last path segment, if the segment is `name`.
fn generic_args<'a>(ty: &'a Type, name: &str) -> Option<Vec<&'a Type>> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    a.args
        .iter()
        .map(|g| match g {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect()
}

fn classify(ty: &Type) -> Result<ParamShape, syn::Error> {
    const HELP: &str = "kernel parameters are `&Tensor<E, S>` (shared input), `&mut Tensor<E, S>` (output \
                        partitioned into `S` tiles) or `Scalar<E>` (run-time scalar); use a const generic \
                        for a compile-time constant";
    match ty {
        Type::Reference(r) => {
            if let Some(args) = generic_args(&r.elem, "Tensor")
                && args.len() == 2
            {
                return Ok(ParamShape::Tensor {
                    mutable: r.mutability.is_some(),
                    elem: args[0].clone(),
                    shape: args[1].clone(),
                });
            }
            Err(syn::Error::new(ty.span(), HELP))
        }
        _ => {
            if let Some(args) = generic_args(ty, "Scalar")
                && args.len() == 1
            {
                return Ok(ParamShape::Scalar {
                    elem: args[0].clone(),
                });
            }
            if generic_args(ty, "Tensor").is_some() {
                return Err(syn::Error::new(
                    ty.span(),
                    "tensors are passed by reference: `&Tensor<E, S>` for an input, `&mut Tensor<E, S>` for an output",
                ));
            }
            Err(syn::Error::new(ty.span(), HELP))
        }
    }
}

/// Generate everything for one kernel. `f` is the user's function with its body already rewritten.
pub fn generate(f: &ItemFn, args: &EntryArgs, source_hash: u64) -> Result<TokenStream, syn::Error> {
    let sig = &f.sig;
    let name = &sig.ident;
    let vis = &f.vis;
    if let Some(c) = &sig.constness {
        return Err(syn::Error::new(c.span(), "a kernel cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        return Err(syn::Error::new(a.span(), "a kernel cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        return Err(syn::Error::new(
            u.span(),
            "a kernel cannot be `unsafe`; use `unsafe` blocks inside it",
        ));
    }
    if let syn::ReturnType::Type(_, t) = &sig.output {
        return Err(syn::Error::new(
            t.span(),
            "a kernel returns nothing: it writes its `&mut Tensor` outputs",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new(v.span(), "a kernel cannot be variadic"));
    }

    let mut params = vec![];
    for a in &sig.inputs {
        let FnArg::Typed(pt) = a else {
            return Err(syn::Error::new(a.span(), "a kernel cannot take `self`"));
        };
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new(
                pt.pat.span(),
                "kernel parameters must be plain names",
            ));
        };
        params.push((
            pi.ident.clone(),
            pi.mutability.is_some(),
            classify(&pt.ty)?,
            (*pt.ty).clone(),
        ));
    }

    // Generic parameters (lifetimes dropped from turbofish calls).
    let mut generic_names = vec![];
    let mut generic_values = vec![];
    let mut turbofish = vec![];
    for g in &sig.generics.params {
        match g {
            GenericParam::Type(t) => {
                let id = &t.ident;
                generic_names.push(id.to_string());
                generic_values.push(quote_spanned! {id.span()=>
                    ::cutile::dsl::__rt::GenericValue::Type(<#id as ::cutile::core::ElementType>::SCALAR)
                });
                turbofish.push(quote!(#id));
            }
            GenericParam::Const(c) => {
                let id = &c.ident;
                generic_names.push(id.to_string());
                generic_values.push(quote!(::cutile::dsl::__rt::IntoGeneric::into_generic(#id)));
                turbofish.push(quote!(#id));
            }
            GenericParam::Lifetime(_) => {}
        }
    }
    let generics = &sig.generics;
    let (impl_generics, _, where_clause) = generics.split_for_impl();

    let body_fn = format_ident!("__cutile_body_{}", name);
    let inputs = &sig.inputs;
    let block = &f.block;
    let attrs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| !crate::is_entry_attr(a))
        .collect();

    let rt = quote!(::cutile::dsl::__rt);
    let mut decls = vec![];
    let mut shapes = vec![];
    let mut host_params = vec![];
    let mut host_pushes = vec![];
    let mut host_bounds = vec![];
    let mut infos = vec![];
    let mut lets = vec![];
    let mut call_args = vec![];
    for (i, (id, is_mut_binding, shape, ty)) in params.iter().enumerate() {
        let pname = id.to_string();
        match shape {
            ParamShape::Tensor {
                mutable,
                elem,
                shape,
            } => {
                decls.push(
                    quote_spanned! {ty.span()=> #rt::ParamDecl::tensor::<#elem, #shape>(#mutable) },
                );
                shapes.push(quote!(<#shape as ::cutile::core::Shape>::DIMS));
                if *mutable {
                    host_params.push(
                        quote!(#id: &'__cutile_a mut impl ::cutile::launch::TensorOfMut<#elem>),
                    );
                    host_pushes.push(quote!(.output::<#elem>(#id)));
                } else {
                    host_params
                        .push(quote!(#id: &'__cutile_a impl ::cutile::launch::TensorOf<#elem>));
                    host_pushes.push(quote!(.input::<#elem>(#id)));
                }
                let kind = if *mutable {
                    quote!(Output)
                } else {
                    quote!(Input)
                };
                infos.push(quote!(#rt::ParamInfo { name: #pname, kind: #rt::ParamKind::#kind }));
                let tensor_ty = quote!(::cutile::core::Tensor<#elem, #shape>);
                if *mutable {
                    lets.push(quote!(let mut #id: #tensor_ty = __cutile_k.tensor(#i);));
                    call_args.push(quote!(&mut #id));
                } else {
                    lets.push(quote!(let #id: #tensor_ty = __cutile_k.tensor(#i);));
                    call_args.push(quote!(&#id));
                }
            }
            ParamShape::Scalar { elem } => {
                decls.push(quote_spanned! {ty.span()=> #rt::ParamDecl::scalar::<#elem>() });
                host_params.push(quote!(#id: #elem));
                host_pushes.push(quote!(.scalar::<#elem>(#id)));
                host_bounds.push(quote!(#elem: ::cutile::launch::ScalarArg));
                infos.push(quote!(#rt::ParamInfo { name: #pname, kind: #rt::ParamKind::Scalar }));
                let _ = is_mut_binding;
                lets.push(quote!(let #id: ::cutile::core::Scalar<#elem> = __cutile_k.scalar(#i);));
                call_args.push(quote!(#id));
            }
        }
    }
    let hints = args
        .hints
        .iter()
        .map(|(arch, key, v)| quote!((#arch, #key, #v)));
    let name_str = name.to_string();
    // `line!()` spanned at the kernel's name expands to that line.
    let line_expr = quote_spanned!(name.span()=> ::core::line!());
    let doc = format!(
        "Kernel `{name_str}`: [`kernel`] fixes its generic arguments ({}) and returns it as a \
         [`Kernel`](::cutile::dsl::Kernel) to specialize and compile; [`build`] traces its Tile IR for one \
         set of arrays.",
        generic_names.join(", ")
    );

    // The typed host launcher: same generics, runtime tensors for `&Tensor`/`&mut Tensor`, host values for
    // `Scalar<E>`; it borrows every argument for the lifetime of the returned `Launch`.
    let launcher_doc = format!(
        "Launch kernel `{name_str}`: `{name_str}::<…>(args…).launch(&stream)`. Inputs are borrowed shared, \
         outputs exclusively, until the launch has finished."
    );
    let user_where = where_clause.map(|w| {
        let preds = &w.predicates;
        quote!(#preds,)
    });
    let generic_params = &generics.params;
    let launcher = quote! {
        #[doc = #launcher_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #name<'__cutile_a, #generic_params>(#(#host_params),*) -> ::cutile::launch::Launch<'__cutile_a>
        where #user_where #(#host_bounds,)*
        {
            ::cutile::launch::Launch::new(#name::kernel::<#(#turbofish),*>()) #(#host_pushes)*
        }
    };

    Ok(quote! {
        #launcher

        #(#attrs)*
        #[allow(clippy::too_many_arguments, unused_mut, unused_variables, unused_assignments, unused_parens, non_snake_case, clippy::let_unit_value, clippy::unused_unit)]
        #[doc(hidden)]
        pub(crate) fn #body_fn #impl_generics (#inputs) #where_clause #block

        #[doc = #doc]
        #[allow(non_snake_case, non_camel_case_types, unused_imports)]
        #vis mod #name {
            use super::*;

            /// What the macro recorded about this kernel.
            pub static INFO: ::cutile::dsl::__rt::KernelInfo = ::cutile::dsl::__rt::KernelInfo {
                module_path: ::core::module_path!(),
                name: #name_str,
                generics: &[#(#generic_names),*],
                params: &[#(#infos),*],
                hints: &[#(#hints),*],
                source_hash: #source_hash,
                file: ::core::file!(),
                line: #line_expr,
            };

            /// This kernel with the given generic arguments.
            pub fn kernel #impl_generics () -> ::cutile::dsl::Kernel #where_clause {
                ::cutile::dsl::Kernel::new(
                    &INFO,
                    ::std::vec![#(#generic_values),*],
                    ::std::vec![#(#shapes),*],
                    build::<#(#turbofish),*>,
                )
            }

            /// Trace the Tile IR of this kernel for arrays described by `tensors` (in parameter order).
            pub fn build #impl_generics (
                tensors: &[::cutile::dsl::__rt::TensorMeta],
                hints: &::cutile::dsl::__rt::OptimizationHints,
            ) -> ::core::result::Result<::cutile::dsl::__rt::Module, ::cutile::dsl::__rt::SpecializeError> #where_clause {
                let __cutile_k = ::cutile::dsl::__rt::KernelBuilder::begin(&INFO, ::std::vec![#(#decls),*], tensors, hints)?;
                #(#lets)*
                super::#body_fn::<#(#turbofish),*>(#(#call_args),*);
                __cutile_k.finish()
            }
        }
    })
}
