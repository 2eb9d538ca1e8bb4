//! The Tile IR text printer: a module or function as tileirdisasm 13.5 prints it (custom op syntax, no module
//! wrapper, globals first, then functions in table order), plus [`normalize`] for comparing two such texts.
//!
//! - [`types`]: `Display` for [`Type`](crate::Type).
//! - [`attr`]: `Display` for [`Attribute`](crate::Attribute), dense-elements and enum spellings.
//! - [`float`]: float literals exactly as MLIR formats them.
//! - [`ops`]: the per-op custom syntax and the generic fallback.
//! - [`normalize`]: SSA-name canonicalization and whitespace folding.
//!
//! SSA names are our own (`%argN` for parameters and block arguments, `%N` for results, `%N:k` / `%N#i` for
//! ops with several results); tileirdisasm derives names from op kinds (`%tview`, `%blockId_x`), so texts are
//! compared after [`normalize`].

mod attr;
mod float;
mod normalize;
mod ops;
mod types;

pub use normalize::normalize;

use crate::ir::{Function, Global, Module};
use attr::{dense_shape, dense_text, escape_string, symbol};

/// The whole module: the producer comment (if the file has a Producer section), globals, then every
/// function, each ending in a newline.
pub fn print_module(module: &Module) -> String {
    let mut out = String::new();
    if let Some(p) = &module.producer {
        out.push_str("// Producer: ");
        out.push_str(p);
        out.push('\n');
    }
    for g in &module.globals {
        out.push_str(&print_global(g));
        out.push('\n');
    }
    for f in &module.functions {
        out.push_str(&print_function(module, f));
    }
    out
}

/// One function-table entry (entry kernel, extern declaration or extern implementation), newline-terminated.
pub fn print_function(module: &Module, function: &Function) -> String {
    ops::FnPrinter::new(module, function).function()
}

/// `global [private ][ constant] @name[ alignment = N] <T: values> : tile<…>`, spaced as tileirdisasm does.
fn print_global(g: &Global) -> String {
    let mut s = String::from("global ");
    if g.private {
        s.push_str("private ");
    }
    if g.constant != 0 {
        s.push_str(" constant");
    }
    s.push(' ');
    s.push_str(&symbol(&g.name));
    if g.alignment != 0 {
        s.push_str(&format!(" alignment = {}", g.alignment));
    }
    s.push(' ');
    match dense_shape(&g.ty) {
        Some((elem, shape)) => {
            s.push_str(&format!(
                "<{elem}: {}> : {}",
                dense_text(elem, shape, &g.value),
                g.ty
            ));
        }
        None => s.push_str(&format!(
            "{} : {}",
            escape_string(&format!("{:?}", g.value)),
            g.ty
        )),
    }
    s
}
