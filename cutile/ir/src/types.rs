//! The type system of Tile IR: element (scalar) types, tiles, views, pointers, tokens, function types and the
//! preview (SIMT) types. Types are plain values (`Clone + Eq + Hash`); the bytecode writer interns them.

use std::fmt;

/// Marker for a dynamic dimension or stride (`?` in text), stored as `i64::MIN` in bytecode.
pub const DYNAMIC: i64 = i64::MIN;

/// Scalar element types, with their bytecode tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    I1,
    I4,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    TF32,
    F8E4M3FN,
    F8E5M2,
    F8E8M0FNU,
    F4E2M1FN,
    FNV8E5M3FNU,
}

impl ScalarType {
    pub const ALL: [ScalarType; 16] = [
        ScalarType::I1,
        ScalarType::I4,
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::TF32,
        ScalarType::F8E4M3FN,
        ScalarType::F8E5M2,
        ScalarType::F8E8M0FNU,
        ScalarType::F4E2M1FN,
        ScalarType::FNV8E5M3FNU,
    ];

    /// The type tag in the bytecode type table.
    pub fn tag(self) -> u32 {
        use ScalarType::*;
        match self {
            I1 => 0,
            I8 => 1,
            I16 => 2,
            I32 => 3,
            I64 => 4,
            F16 => 5,
            BF16 => 6,
            F32 => 7,
            TF32 => 8,
            F64 => 9,
            F8E4M3FN => 10,
            F8E5M2 => 11,
            F8E8M0FNU => 18,
            F4E2M1FN => 19,
            I4 => 22,
            FNV8E5M3FNU => 130,
        }
    }

    pub fn from_tag(tag: u32) -> Option<ScalarType> {
        ScalarType::ALL.into_iter().find(|t| t.tag() == tag)
    }

    /// The first bytecode version that knows this type.
    pub fn since(self) -> crate::Version {
        use ScalarType::*;
        match self {
            F8E8M0FNU => crate::V13_2,
            F4E2M1FN | I4 => crate::V13_3,
            FNV8E5M3FNU => crate::V13_4,
            _ => crate::V13_1,
        }
    }

    pub fn bit_width(self) -> u32 {
        use ScalarType::*;
        match self {
            I1 => 1,
            I4 | F4E2M1FN => 4,
            I8 | F8E4M3FN | F8E5M2 | F8E8M0FNU | FNV8E5M3FNU => 8,
            I16 | F16 | BF16 => 16,
            I32 | F32 | TF32 => 32,
            I64 | F64 => 64,
        }
    }

    /// Bytes one element occupies in a dense constant buffer (i1 takes a byte, 4-bit types a byte each).
    pub fn storage_bytes(self) -> usize {
        (self.bit_width() as usize).div_ceil(8)
    }

    pub fn is_integer(self) -> bool {
        matches!(
            self,
            ScalarType::I1
                | ScalarType::I4
                | ScalarType::I8
                | ScalarType::I16
                | ScalarType::I32
                | ScalarType::I64
        )
    }

    pub fn is_float(self) -> bool {
        !self.is_integer()
    }

    /// The spelling used in Tile IR text.
    pub fn name(self) -> &'static str {
        use ScalarType::*;
        match self {
            I1 => "i1",
            I4 => "i4",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F64 => "f64",
            TF32 => "tf32",
            F8E4M3FN => "f8E4M3FN",
            F8E5M2 => "f8E5M2",
            F8E8M0FNU => "f8E8M0FNU",
            F4E2M1FN => "f4E2M1FN",
            FNV8E5M3FNU => "fnv8E5M3FNU",
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The value a partition view yields for elements outside the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    Zero = 0,
    NegZero = 1,
    Nan = 2,
    PosInf = 3,
    NegInf = 4,
}

impl Padding {
    pub fn from_u8(v: u8) -> Option<Padding> {
        Some(match v {
            0 => Padding::Zero,
            1 => Padding::NegZero,
            2 => Padding::Nan,
            3 => Padding::PosInf,
            4 => Padding::NegInf,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Padding::Zero => "zero",
            Padding::NegZero => "neg_zero",
            Padding::Nan => "nan",
            Padding::PosInf => "pos_inf",
            Padding::NegInf => "neg_inf",
        }
    }
}

/// Types that exist only in preview (SIMT) bytecode, 13.5 with the preview flag.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PreviewType {
    /// `!preview$Datatype` (tag 211): a constant parameter that names an element type.
    Datatype,
    /// `!preview$shape` (tag 212).
    Shape,
    /// `!preview$string` (tag 213).
    String,
    /// `index` (tag 214).
    Index,
    /// `none` (tag 215).
    None,
}

impl PreviewType {
    pub fn tag(&self) -> u32 {
        match self {
            PreviewType::Datatype => 211,
            PreviewType::Shape => 212,
            PreviewType::String => 213,
            PreviewType::Index => 214,
            PreviewType::None => 215,
        }
    }
}

/// A Tile IR type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A bare element type (appears inside composite types and in attributes).
    Scalar(ScalarType),
    /// `ptr<T>`, with the optional 13.4+ pointer attribute byte.
    Pointer {
        pointee: Box<Type>,
        attr: Option<u8>,
    },
    /// `tile<AxBxT>`; rank 0 (`tile<T>`) is a scalar value.
    Tile { elem: Box<Type>, shape: Vec<i64> },
    /// `tensor_view<?x?xT, strides=[?,1]>`: a global array; [`DYNAMIC`] marks run-time extents.
    TensorView {
        elem: Box<Type>,
        shape: Vec<i64>,
        strides: Vec<i64>,
        attr: Option<u8>,
    },
    /// `partition_view<tile=(AxB), padding_value = P, tensor_view<…>>`.
    PartitionView {
        tile_shape: Vec<i32>,
        tensor_view: Box<Type>,
        dim_map: Vec<i32>,
        padding: Option<Padding>,
    },
    /// 13.3+: a view whose one sparse dimension is gathered/scattered.
    GatherScatterView {
        tile_shape: Vec<i32>,
        tensor_view: Box<Type>,
        sparse_dim: u64,
        padding: Option<Padding>,
    },
    /// 13.3+: a partition view with traversal strides.
    StridedView {
        tile_shape: Vec<i32>,
        traversal_strides: Vec<i32>,
        tensor_view: Box<Type>,
        dim_map: Vec<i32>,
        padding: Option<Padding>,
    },
    /// Ordering token.
    Token,
    /// Function signature.
    Function {
        params: Vec<Type>,
        results: Vec<Type>,
    },
    /// Preview (SIMT) types.
    Preview(PreviewType),
}

impl Type {
    pub fn scalar(s: ScalarType) -> Type {
        Type::Scalar(s)
    }
    /// `tile<shape x elem>`.
    pub fn tile(elem: ScalarType, shape: &[i64]) -> Type {
        Type::Tile {
            elem: Box::new(Type::Scalar(elem)),
            shape: shape.to_vec(),
        }
    }
    /// A rank-0 tile (`tile<T>`), the type of scalar values such as kernel parameters.
    pub fn scalar_tile(elem: ScalarType) -> Type {
        Type::tile(elem, &[])
    }
    /// `ptr<T>`.
    pub fn pointer(pointee: ScalarType) -> Type {
        Type::Pointer {
            pointee: Box::new(Type::Scalar(pointee)),
            attr: None,
        }
    }
    /// `tile<ptr<T>>` of the given shape.
    pub fn pointer_tile(pointee: ScalarType, shape: &[i64]) -> Type {
        Type::Tile {
            elem: Box::new(Type::pointer(pointee)),
            shape: shape.to_vec(),
        }
    }
    pub fn tensor_view(elem: ScalarType, shape: &[i64], strides: &[i64]) -> Type {
        Type::TensorView {
            elem: Box::new(Type::Scalar(elem)),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            attr: None,
        }
    }
    pub fn partition_view(tile_shape: &[i32], tensor_view: Type, padding: Option<Padding>) -> Type {
        let rank = tile_shape.len() as i32;
        Type::PartitionView {
            tile_shape: tile_shape.to_vec(),
            tensor_view: Box::new(tensor_view),
            dim_map: (0..rank).collect(),
            padding,
        }
    }

    /// Shape of a tile (None for other types).
    pub fn tile_shape(&self) -> Option<&[i64]> {
        match self {
            Type::Tile { shape, .. } => Some(shape),
            _ => None,
        }
    }
    /// Element type of a tile or tensor view.
    pub fn elem(&self) -> Option<&Type> {
        match self {
            Type::Tile { elem, .. } | Type::TensorView { elem, .. } => Some(elem),
            _ => None,
        }
    }
    /// The scalar element type of a tile (None for tiles of pointers and non-tiles).
    pub fn tile_scalar(&self) -> Option<ScalarType> {
        match self {
            Type::Tile { elem, .. } => match **elem {
                Type::Scalar(s) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }
    pub fn is_tile(&self) -> bool {
        matches!(self, Type::Tile { .. })
    }
    pub fn is_token(&self) -> bool {
        matches!(self, Type::Token)
    }
    /// Whether any part of this type needs the preview flag.
    pub fn is_preview(&self) -> bool {
        match self {
            Type::Preview(_) => true,
            Type::Pointer { pointee, .. } => pointee.is_preview(),
            Type::Tile { elem, .. } | Type::TensorView { elem, .. } => elem.is_preview(),
            Type::Function { params, results } => {
                params.iter().chain(results).any(Type::is_preview)
            }
            _ => false,
        }
    }
    /// The same tile type with another shape (None if not a tile).
    pub fn with_shape(&self, shape: &[i64]) -> Option<Type> {
        match self {
            Type::Tile { elem, .. } => Some(Type::Tile {
                elem: elem.clone(),
                shape: shape.to_vec(),
            }),
            _ => None,
        }
    }
}
