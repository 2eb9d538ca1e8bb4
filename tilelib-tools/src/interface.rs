//! The interface of a tile library: the foreign functions its `.nvtlifc` bytecode declares, reduced to what a
//! caller needs (symbol, constant parameters, operands with type, shape and access, results).
//!
//! Parsing goes through the `cutile-ir` bytecode reader; this module only interprets the
//! [`FunctionKind::ExternDecl`] entries of the module it returns. Functions of any other kind are listed in
//! [`Interface::other_functions`] (tileiras refuses such interfaces; `inspect` still shows them).

use cutile_ir::{Access, Attribute, Function, FunctionKind, Module, PreviewType, ScalarType, Type};
use serde::{Serialize, Serializer};
use std::fmt;

/// The key of the access attribute in an extern declaration's per-parameter dictionary.
pub const ACCESS_KEY: &str = cutile_ir::ACCESS_ATTR;

/// Everything a tile library's interface declares.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interface {
    /// Bytecode version of the interface file, e.g. `13.5`.
    pub version: String,
    /// Whether the header carries the preview flag (required for extern declarations).
    pub preview: bool,
    /// The foreign functions, in function-table order.
    pub functions: Vec<ForeignFunction>,
    /// Functions that are not extern declarations (entries, extern implementations).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_functions: Vec<OtherFunction>,
}

/// A function of the interface module that is not an extern declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OtherFunction {
    pub name: String,
    /// `entry` or `extern_impl`.
    pub kind: &'static str,
}

/// One foreign function (`preview$func extern`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForeignFunction {
    /// The symbol callers name in `preview$call`.
    pub symbol: String,
    pub const_params: Vec<ConstParam>,
    pub operands: Vec<Operand>,
    pub results: Vec<ValueType>,
}

/// A constant (compile-time) parameter of a foreign function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConstParam {
    pub name: String,
    pub kind: ConstKind,
}

/// What a constant parameter holds (its preview type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstKind {
    /// `index`: an integer.
    Index,
    /// `!preview$string`.
    String,
    /// `!preview$Datatype`: an element type.
    Datatype,
    /// `!preview$shape`: a tuple of integers.
    Shape,
}

/// One operand (parameter) of a foreign function.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Operand {
    /// Positional name as tileirdisasm prints it (`arg0`, `arg1`, …); bytecode keeps no parameter names.
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ValueType,
    #[serde(serialize_with = "access_name")]
    pub access: Access,
}

fn access_name<S: Serializer>(a: &Access, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(a.name())
}

/// The type of an operand or result.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ValueType {
    /// A tile of scalars.
    Tile {
        #[serde(serialize_with = "scalar_name")]
        elem: ScalarType,
        shape: Vec<Dim>,
        /// Tile IR text, e.g. `tile<4xf32>`.
        text: String,
    },
    /// Anything else (tiles of pointers, tokens, views, …), as Tile IR text.
    Other { text: String },
}

fn scalar_name<S: Serializer>(t: &ScalarType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

impl ValueType {
    fn of(ty: &Type) -> ValueType {
        let text = ty.to_string();
        match ty {
            Type::Tile { elem, shape } => match **elem {
                Type::Scalar(elem) => ValueType::Tile {
                    elem,
                    shape: shape.iter().map(|&d| Dim::of(d)).collect(),
                    text,
                },
                _ => ValueType::Other { text },
            },
            _ => ValueType::Other { text },
        }
    }
    pub fn text(&self) -> &str {
        match self {
            ValueType::Tile { text, .. } | ValueType::Other { text } => text,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// One dimension of a tile shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    Static(i64),
    /// `?` (not valid in tile types today, but representable in bytecode).
    Dynamic,
    /// A symbolic extent: the name of an index constant parameter or an expression over them.
    Symbolic(String),
}

impl Dim {
    fn of(d: i64) -> Dim {
        if d == cutile_ir::DYNAMIC {
            Dim::Dynamic
        } else {
            Dim::Static(d)
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(d) => write!(f, "{d}"),
            Dim::Dynamic => f.write_str("?"),
            Dim::Symbolic(s) => f.write_str(s),
        }
    }
}

/// Static dimensions serialize as numbers, the others as strings (`"?"`, `"N"`).
impl Serialize for Dim {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Dim::Static(d) => s.serialize_i64(*d),
            other => s.collect_str(other),
        }
    }
}

/// Why an interface could not be understood.
#[derive(Debug, thiserror::Error)]
pub enum InterfaceError {
    #[error("the interface is not readable Tile IR bytecode: {0}")]
    Bytecode(#[from] cutile_ir::bytecode::ReadError),
    #[error(
        "operand {operand} of foreign function `{symbol}` has no `{ACCESS_KEY}` attribute; every operand \
         of an extern declaration must say whether it is in, out or inout"
    )]
    MissingAccess { symbol: String, operand: usize },
    #[error(
        "constant parameter {index} of foreign function `{symbol}` is malformed ({detail}); each must be a \
         const_param attribute whose type is index, !preview$string, !preview$Datatype or !preview$shape"
    )]
    BadConstParam {
        symbol: String,
        index: usize,
        detail: String,
    },
}

impl Interface {
    /// Read an interface from its bytecode.
    pub fn from_bytecode(bytes: &[u8]) -> Result<Interface, InterfaceError> {
        let (module, version, preview) = cutile_ir::bytecode::read_module_with_version(bytes)?;
        Interface::from_module(&module, version.to_string(), preview)
    }

    /// Interpret an already-read module.
    pub fn from_module(
        module: &Module,
        version: String,
        preview: bool,
    ) -> Result<Interface, InterfaceError> {
        let mut functions = Vec::new();
        let mut other_functions = Vec::new();
        for f in &module.functions {
            match &f.kind {
                FunctionKind::ExternDecl { const_params } => {
                    functions.push(foreign_function(f, const_params)?)
                }
                FunctionKind::Entry { .. } => other_functions.push(OtherFunction {
                    name: f.name.clone(),
                    kind: "entry",
                }),
                FunctionKind::ExternImpl { .. } => other_functions.push(OtherFunction {
                    name: f.name.clone(),
                    kind: "extern_impl",
                }),
            }
        }
        Ok(Interface {
            version,
            preview,
            functions,
            other_functions,
        })
    }

    pub fn function(&self, symbol: &str) -> Option<&ForeignFunction> {
        self.functions.iter().find(|f| f.symbol == symbol)
    }
}

fn foreign_function(
    f: &Function,
    const_params: &[Attribute],
) -> Result<ForeignFunction, InterfaceError> {
    let const_params = const_params
        .iter()
        .enumerate()
        .map(|(index, a)| {
            const_param(a).map_err(|detail| InterfaceError::BadConstParam {
                symbol: f.name.clone(),
                index,
                detail,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let operands = f
        .param_types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            let access = f.arg_attrs.get(i).and_then(access_of).ok_or_else(|| {
                InterfaceError::MissingAccess {
                    symbol: f.name.clone(),
                    operand: i,
                }
            })?;
            Ok(Operand {
                name: format!("arg{i}"),
                ty: ValueType::of(ty),
                access,
            })
        })
        .collect::<Result<Vec<_>, InterfaceError>>()?;
    Ok(ForeignFunction {
        symbol: f.name.clone(),
        const_params,
        operands,
        results: f.result_types.iter().map(ValueType::of).collect(),
    })
}

/// The access mode in one parameter's attribute dictionary.
fn access_of(attr: &Attribute) -> Option<Access> {
    match attr {
        Attribute::Dictionary(entries) => entries.iter().find_map(|(k, v)| match v {
            Attribute::Access(a) if k == ACCESS_KEY => Some(*a),
            _ => None,
        }),
        _ => None,
    }
}

fn const_param(a: &Attribute) -> Result<ConstParam, String> {
    let Attribute::ConstParam { name, ty } = a else {
        return Err(format!("found {a:?} instead of a const_param"));
    };
    let kind = match ty {
        Type::Preview(PreviewType::Index) => ConstKind::Index,
        Type::Preview(PreviewType::String) => ConstKind::String,
        Type::Preview(PreviewType::Datatype) => ConstKind::Datatype,
        Type::Preview(PreviewType::Shape) => ConstKind::Shape,
        other => return Err(format!("`{name}` has type {other}")),
    };
    Ok(ConstParam {
        name: name.clone(),
        kind,
    })
}
