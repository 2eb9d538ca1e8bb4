//! `Display` for [`Type`]: the short (`cuda_tile.`-less) spelling tileirdisasm uses inside ops, e.g.
//! `tile<1x1024xf32>`, `tile<ptr<f32>>`, `tensor_view<?x?xf32, strides=[?,1]>`,
//! `partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<…>>`, `token`.

use std::fmt::{self, Display, Formatter, Write};

use crate::types::{DYNAMIC, PreviewType, Type};

/// Name of a pointer attribute byte (`#cuda_tile.ptr_attr<…>`); unknown values print as their number.
pub(crate) fn ptr_attr_name(v: u8) -> String {
    match v {
        0 => "default".into(),
        1 => "unicast".into(),
        2 => "multicast".into(),
        n => n.to_string(),
    }
}

fn dim(f: &mut Formatter<'_>, d: i64) -> fmt::Result {
    if d == DYNAMIC {
        f.write_char('?')
    } else {
        write!(f, "{d}")
    }
}

/// `AxBxT` (or just `T` for rank 0).
fn shape_and_elem(f: &mut Formatter<'_>, shape: &[i64], elem: &Type) -> fmt::Result {
    for &d in shape {
        dim(f, d)?;
        f.write_char('x')?;
    }
    write!(f, "{elem}")
}

/// `tile=(AxB)`.
fn tile_shape(f: &mut Formatter<'_>, shape: &[i32]) -> fmt::Result {
    f.write_str("tile=(")?;
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            f.write_char('x')?;
        }
        write!(f, "{d}")?;
    }
    f.write_char(')')
}

/// `, dim_map=[1, 0]` unless the map is the identity.
fn dim_map(f: &mut Formatter<'_>, map: &[i32]) -> fmt::Result {
    if map.iter().enumerate().all(|(i, &d)| d == i as i32) {
        return Ok(());
    }
    f.write_str(", dim_map=[")?;
    comma_list(f, map)?;
    f.write_char(']')
}

pub(crate) fn comma_list<T: Display>(f: &mut impl Write, items: &[T]) -> fmt::Result {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{x}")?;
    }
    Ok(())
}

fn padding(f: &mut Formatter<'_>, p: Option<crate::types::Padding>) -> fmt::Result {
    match p {
        Some(p) => write!(f, "padding_value = {}, ", p.name()),
        None => Ok(()),
    }
}

impl Display for Type {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(s) => write!(f, "{s}"),
            Type::Pointer { pointee, attr } => match attr {
                Some(a) => write!(f, "ptr<{pointee}, <{}>>", ptr_attr_name(*a)),
                None => write!(f, "ptr<{pointee}>"),
            },
            Type::Tile { elem, shape } => {
                f.write_str("tile<")?;
                shape_and_elem(f, shape, elem)?;
                f.write_char('>')
            }
            Type::TensorView {
                elem,
                shape,
                strides,
                attr,
            } => {
                f.write_str("tensor_view<")?;
                shape_and_elem(f, shape, elem)?;
                if !shape.is_empty() {
                    f.write_str(", strides=[")?;
                    for (i, &s) in strides.iter().enumerate() {
                        if i > 0 {
                            f.write_char(',')?;
                        }
                        dim(f, s)?;
                    }
                    f.write_char(']')?;
                }
                if let Some(a) = attr {
                    write!(f, ", #cuda_tile.ptr_attr<{}>", ptr_attr_name(*a))?;
                }
                f.write_char('>')
            }
            Type::PartitionView {
                tile_shape: ts,
                tensor_view,
                dim_map: dm,
                padding: p,
            } => {
                f.write_str("partition_view<")?;
                tile_shape(f, ts)?;
                f.write_str(", ")?;
                padding(f, *p)?;
                write!(f, "{tensor_view}")?;
                dim_map(f, dm)?;
                f.write_char('>')
            }
            Type::StridedView {
                tile_shape: ts,
                traversal_strides,
                tensor_view,
                dim_map: dm,
                padding: p,
            } => {
                f.write_str("strided_view<")?;
                tile_shape(f, ts)?;
                f.write_str(", traversal_strides=[")?;
                for (i, s) in traversal_strides.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str("], ")?;
                padding(f, *p)?;
                write!(f, "{tensor_view}")?;
                dim_map(f, dm)?;
                f.write_char('>')
            }
            Type::GatherScatterView {
                tile_shape: ts,
                tensor_view,
                sparse_dim,
                padding: p,
            } => {
                f.write_str("gather_scatter_view<")?;
                tile_shape(f, ts)?;
                f.write_str(", ")?;
                padding(f, *p)?;
                write!(f, "{tensor_view}, sparse_dim={sparse_dim}>")
            }
            Type::Token => f.write_str("token"),
            Type::Function { params, results } => {
                f.write_char('(')?;
                comma_list(f, params)?;
                f.write_str(") -> ")?;
                if results.len() == 1 {
                    write!(f, "{}", results[0])
                } else {
                    f.write_char('(')?;
                    comma_list(f, results)?;
                    f.write_char(')')
                }
            }
            Type::Preview(p) => f.write_str(match p {
                PreviewType::Datatype => "!cuda_tile<preview$Datatype>",
                PreviewType::Shape => "!cuda_tile<preview$shape>",
                PreviewType::String => "!cuda_tile<preview$string>",
                PreviewType::Index => "index",
                PreviewType::None => "none",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::types::{DYNAMIC, Padding, ScalarType, Type};

    #[test]
    fn spellings() {
        let tv = Type::tensor_view(ScalarType::F32, &[DYNAMIC, DYNAMIC], &[DYNAMIC, 1]);
        assert_eq!(tv.to_string(), "tensor_view<?x?xf32, strides=[?,1]>");
        assert_eq!(
            Type::tile(ScalarType::F32, &[1, 1024]).to_string(),
            "tile<1x1024xf32>"
        );
        assert_eq!(
            Type::pointer_tile(ScalarType::F32, &[]).to_string(),
            "tile<ptr<f32>>"
        );
        assert_eq!(
            Type::partition_view(&[1, 1024], tv, Some(Padding::NegInf)).to_string(),
            "partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>"
        );
        assert_eq!(Type::Token.to_string(), "token");
        assert_eq!(
            Type::tensor_view(ScalarType::F32, &[], &[]).to_string(),
            "tensor_view<f32>"
        );
    }
}
