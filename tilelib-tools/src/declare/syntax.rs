//! The Rust spelling of `#[cutile::foreign]` declarations and of DSL types: the one place to change when the
//! DSL's syntax changes. [`super`] decides *what* to declare; this module decides *how it is written*.
//!
//! Current spelling (cutile's `core` module): tiles are `Tile<E, S>` with `E` an element type (`f32`, `f16`,
//! `bool`, …) and `S` a type-level shape `S1<A>` … `S4<A, B, C, D>` of `i32` extents, rank-0 tiles are
//! `Scalar<E>`; element-type
//! parameters are bounded by `ElementType`, shape parameters by `Shape`.

use cutile_ir::ScalarType;

/// Lines placed after the generated file's header comment.
pub const PRELUDE: &str = "#![allow(non_snake_case, non_upper_case_globals, clippy::too_many_arguments)]\n\n\
     #[allow(unused_imports)]\n\
     use cutile::core::{\n         ElementType, S1, S2, S3, S4, Scalar, Shape, Tile, bf16, f16, f8e4m3fn, f8e5m2, tf32,\n     };\n";

/// The largest tile rank a type-level shape can spell.
pub const MAX_RANK: usize = 4;

/// The attribute that marks a body-less `unsafe fn` as a foreign tile function implemented under `symbol`.
/// `const_args` lists the constant parameters in interface order when it differs from the DSL's default
/// order (the `&str` parameters, then the generic parameters, each in declaration order).
pub fn foreign_attr(symbol: &str, const_args: Option<&[String]>) -> String {
    match const_args {
        None => format!("#[cutile::foreign(name = {})]", string_literal(symbol)),
        Some(order) => format!(
            "#[cutile::foreign(name = {}, const_args = {})]",
            string_literal(symbol),
            string_literal(&order.join(", "))
        ),
    }
}

/// The attribute marking a parameter whose tile the foreign function reads and replaces (its new value is
/// returned first among the results).
pub const INOUT_ATTR: &str = "#[inout]";

/// The Rust element type of a Tile IR scalar type, if the DSL has one.
pub fn element_type(s: ScalarType) -> Option<&'static str> {
    use ScalarType::*;
    Some(match s {
        I1 => "bool",
        I8 => "i8",
        I16 => "i16",
        I32 => "i32",
        I64 => "i64",
        F16 => "f16",
        BF16 => "bf16",
        F32 => "f32",
        F64 => "f64",
        TF32 => "tf32",
        F8E4M3FN => "f8e4m3fn",
        F8E5M2 => "f8e5m2",
        I4 | F8E8M0FNU | F4E2M1FN | FNV8E5M3FNU => return None,
    })
}

/// A type-level shape from its extents (already Rust expressions: literals or const-generic names).
/// `dims.len()` must be at most [`MAX_RANK`].
pub fn shape_type(dims: &[String]) -> String {
    if dims.is_empty() {
        "S0".to_string()
    } else {
        format!("S{}<{}>", dims.len(), dims.join(", "))
    }
}

/// A tile type from its element type and shape type; rank 0 is the DSL's scalar, `Scalar<E>`.
pub fn tile_type(elem: &str, shape: &str) -> String {
    if shape == "S0" {
        format!("Scalar<{elem}>")
    } else {
        format!("Tile<{elem}, {shape}>")
    }
}

/// Generic parameter for an `index` constant parameter.
pub fn index_generic(name: &str) -> String {
    format!("const {name}: i32")
}

/// Generic parameter for a `!preview$Datatype` constant parameter.
pub fn datatype_generic(name: &str) -> String {
    format!("{name}: ElementType")
}

/// Generic parameter for a `!preview$shape` constant parameter.
pub fn shape_generic(name: &str) -> String {
    format!("{name}: Shape")
}

/// Ordinary parameter for a `!preview$string` constant parameter (call sites pass a literal, a `const`, an
/// associated const, or a local bound to one of these; the macro checks it).
pub fn string_param(name: &str) -> String {
    format!("{name}: &str")
}

/// A parameter, with its attribute for inout operands. Operands are passed by value; an inout operand's
/// updated tile is one of the results (the updated inout operands come first, then the out operands).
pub fn param(name: &str, ty: &str, inout: bool) -> String {
    if inout {
        format!("{INOUT_ATTR} {name}: {ty}")
    } else {
        format!("{name}: {ty}")
    }
}

/// The return type of a function producing `results` (already Rust types).
pub fn return_type(results: &[String]) -> Option<String> {
    match results {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("({})", many.join(", "))),
    }
}

/// The whole declaration: doc lines, attribute, signature.
pub fn function(
    doc: &[String],
    symbol: &str,
    const_args: Option<&[String]>,
    rust_name: &str,
    generics: &[String],
    params: &[String],
    ret: Option<&str>,
) -> String {
    let mut out = String::new();
    for line in doc {
        for wrapped in wrap(line, DOC_WIDTH) {
            out.push_str(format!("/// {wrapped}").trim_end());
            out.push('\n');
        }
    }
    out.push_str(&foreign_attr(symbol, const_args));
    out.push('\n');
    let generics = if generics.is_empty() {
        String::new()
    } else {
        format!("<{}>", generics.join(", "))
    };
    let ret = ret.map(|r| format!(" -> {r}")).unwrap_or_default();
    let one_line = format!(
        "pub unsafe fn {rust_name}{generics}({}){ret};\n",
        params.join(", ")
    );
    if one_line.len() <= 100 {
        out.push_str(&one_line);
    } else {
        out.push_str(&format!("pub unsafe fn {rust_name}{generics}(\n"));
        for p in params {
            out.push_str(&format!("    {p},\n"));
        }
        out.push_str(&format!("){ret};\n"));
    }
    out
}

/// Doc comment text width (after `/// `).
const DOC_WIDTH: usize = 96;

/// Greedy word wrap; a word longer than `width` gets a line of its own; an empty line stays empty.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("never empty");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// A Rust string literal for `s` (escaped).
pub fn string_literal(s: &str) -> String {
    format!("{s:?}")
}

/// Strict and reserved keywords that cannot be identifiers without `r#`.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield",
];

/// A Rust identifier for `name`: characters outside `[A-Za-z0-9_]` become `_`, a leading digit gets a `_`
/// prefix, keywords become raw identifiers (`self`, `Self`, `super`, `crate` and `_`, which cannot be raw,
/// get a `_` suffix).
pub fn identifier(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    if matches!(id.as_str(), "self" | "Self" | "super" | "crate" | "_") {
        id.push('_');
    } else if KEYWORDS.contains(&id.as_str()) {
        id.insert_str(0, "r#");
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for (name, want) in [
            ("ext", "ext"),
            ("my.lib$fn", "my_lib_fn"),
            ("1d_fft", "_1d_fft"),
            ("type", "r#type"),
            ("self", "self_"),
            ("", "__"),
            ("_", "__"),
            ("é", "__"),
        ] {
            assert_eq!(identifier(name), want, "{name}");
        }
    }

    #[test]
    fn doc_wrapping() {
        assert_eq!(wrap("", 10), vec![""]);
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("a verylongword b", 4), vec!["a", "verylongword", "b"]);
    }

    #[test]
    fn long_signatures_wrap() {
        let params: Vec<String> = (0..6)
            .map(|i| format!("arg{i}: Tile<f32, S2<128, 128>>"))
            .collect();
        let text = function(&[], "f", None, "f", &[], &params, None);
        assert!(
            text.contains("pub unsafe fn f(\n    arg0: Tile<f32, S2<128, 128>>,\n"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.len() <= 100), "{text}");
    }
}
