//! `#[cutile::entry(...)]` arguments: optimization hints, defaulted for every arch or given per arch.
//!
//! `num_worker_warps = 8, occupancy = 2, num_cta_in_cga = 2, sm_100(num_worker_warps = 4)`. Values are
//! checked here against the ranges tileiras accepts, so a bad hint is a build error.

use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitInt, Token};

/// Architecture keys tileiras knows.
const ARCHS: &[&str] = &[
    "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110",
    "sm_120", "sm_121",
];

/// (arch key, IR hint name, value).
pub struct EntryArgs {
    pub hints: Vec<(String, &'static str, i32)>,
}

fn hint(name: &Ident, value: &LitInt) -> syn::Result<(&'static str, i32)> {
    let v: i32 = value.base10_parse()?;
    let pow2 = v > 0 && (v & (v - 1)) == 0;
    let (key, ok, range) = match name.to_string().as_str() {
        "num_worker_warps" => (
            "num_worker_warps_per_cta",
            pow2 && v <= 32,
            "a power of two in 1..=32",
        ),
        "occupancy" => ("occupancy", (1..=32).contains(&v), "in 1..=32"),
        "num_cta_in_cga" => (
            "num_cta_in_cga",
            pow2 && v <= 16,
            "a power of two in 1..=16",
        ),
        other => {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "unknown kernel hint `{other}`; expected num_worker_warps, occupancy or num_cta_in_cga"
                ),
            ));
        }
    };
    if !ok {
        return Err(syn::Error::new(
            value.span(),
            format!("`{name}` must be {range}, not {v}"),
        ));
    }
    Ok((key, v))
}

fn parse_list(
    input: ParseStream,
    arch: &str,
    out: &mut Vec<(String, &'static str, i32)>,
) -> syn::Result<()> {
    while !input.is_empty() {
        let name: Ident = input.parse()?;
        if input.peek(syn::token::Paren) {
            let s = name.to_string();
            if arch != "default" {
                return Err(syn::Error::new(
                    name.span(),
                    "per-arch hints cannot be nested",
                ));
            }
            if !ARCHS.contains(&s.as_str()) {
                return Err(syn::Error::new(
                    name.span(),
                    format!(
                        "unknown architecture `{s}`; expected one of {}",
                        ARCHS.join(", ")
                    ),
                ));
            }
            let inner;
            syn::parenthesized!(inner in input);
            parse_list(&inner, &s, out)?;
        } else {
            input.parse::<Token![=]>()?;
            let v: LitInt = input.parse()?;
            let (k, v) = hint(&name, &v)?;
            out.push((arch.to_string(), k, v));
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(())
}

impl Parse for EntryArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut hints = vec![];
        parse_list(input, "default", &mut hints)?;
        Ok(EntryArgs { hints })
    }
}

impl EntryArgs {
    pub fn empty() -> EntryArgs {
        EntryArgs { hints: vec![] }
    }
}
