//! Tile IR text spellings of types and attributes, for error messages of the builder and the verifier.
//!
//! This is deliberately small and independent of the full printer: messages must be readable even when the
//! printer is absent or a type is malformed.

use crate::attr::Attribute;
use crate::types::{DYNAMIC, PreviewType, Type};

/// `tile<4x8xf32>`, `tensor_view<?x?xf16, strides=[?,1]>`, `token`, … as in tileirdisasm output.
pub fn type_text(t: &Type) -> String {
    match t {
        Type::Scalar(s) => s.name().to_string(),
        Type::Pointer { pointee, .. } => format!("ptr<{}>", type_text(pointee)),
        Type::Tile { elem, shape } => {
            if shape.is_empty() {
                format!("tile<{}>", type_text(elem))
            } else {
                format!("tile<{}x{}>", dims(shape, "x"), type_text(elem))
            }
        }
        Type::TensorView {
            elem,
            shape,
            strides,
            ..
        } => {
            let shape_part = if shape.is_empty() {
                String::new()
            } else {
                format!("{}x", dims(shape, "x"))
            };
            format!(
                "tensor_view<{shape_part}{}, strides=[{}]>",
                type_text(elem),
                dims(strides, ",")
            )
        }
        Type::PartitionView {
            tile_shape,
            tensor_view,
            dim_map,
            padding,
        } => {
            let mut s = format!("partition_view<tile=({})", dims32(tile_shape, "x"));
            if let Some(p) = padding {
                s += &format!(", padding_value = {}", p.name());
            }
            if !is_identity(dim_map) {
                s += &format!(", dim_map=[{}]", dims32(dim_map, ", "));
            }
            s + &format!(", {}>", type_text(tensor_view))
        }
        Type::GatherScatterView {
            tile_shape,
            tensor_view,
            sparse_dim,
            padding,
        } => {
            let mut s = format!(
                "gather_scatter_view<tile=({}), sparse_dim={sparse_dim}",
                dims32(tile_shape, "x")
            );
            if let Some(p) = padding {
                s += &format!(", padding_value = {}", p.name());
            }
            s + &format!(", {}>", type_text(tensor_view))
        }
        Type::StridedView {
            tile_shape,
            traversal_strides,
            tensor_view,
            dim_map,
            padding,
        } => {
            let mut s = format!(
                "strided_view<tile=({}), traversal_strides=[{}]",
                dims32(tile_shape, "x"),
                dims32(traversal_strides, ",")
            );
            if let Some(p) = padding {
                s += &format!(", padding_value = {}", p.name());
            }
            if !is_identity(dim_map) {
                s += &format!(", dim_map=[{}]", dims32(dim_map, ", "));
            }
            s + &format!(", {}>", type_text(tensor_view))
        }
        Type::Token => "token".to_string(),
        Type::Function { params, results } => {
            format!("({}) -> ({})", types_text(params), types_text(results))
        }
        Type::Preview(p) => match p {
            PreviewType::Datatype => "!preview$Datatype".into(),
            PreviewType::Shape => "!preview$shape".into(),
            PreviewType::String => "!preview$string".into(),
            PreviewType::Index => "index".into(),
            PreviewType::None => "none".into(),
        },
    }
}

/// Comma-separated type list.
pub fn types_text(ts: &[Type]) -> String {
    ts.iter().map(type_text).collect::<Vec<_>>().join(", ")
}

/// A short spelling of an attribute (enough to identify it in a message).
pub fn attr_text(a: &Attribute) -> String {
    match a {
        Attribute::Integer { ty, value } => format!("{value} : {}", type_text(ty)),
        Attribute::Float { ty, bits } => format!("0x{bits:X} : {}", type_text(ty)),
        Attribute::Bool(b) => b.to_string(),
        Attribute::Type(t) => type_text(t),
        Attribute::String(s) => format!("{s:?}"),
        Attribute::DivBy { divisor, .. } => format!("div_by<{divisor}>"),
        Attribute::Bounded { lb, ub } => {
            let f = |x: &Option<i64>| x.map_or("?".to_string(), |v| v.to_string());
            format!("bounded<{}, {}>", f(lb), f(ub))
        }
        Attribute::SameElements(v) => format!("same_elements<{v:?}>"),
        other => format!("{other:?}"),
    }
}

fn dims(d: &[i64], sep: &str) -> String {
    d.iter()
        .map(|&x| {
            if x == DYNAMIC {
                "?".to_string()
            } else {
                x.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(sep)
}

fn dims32(d: &[i32], sep: &str) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

fn is_identity(dim_map: &[i32]) -> bool {
    dim_map.iter().enumerate().all(|(i, &d)| d == i as i32)
}
