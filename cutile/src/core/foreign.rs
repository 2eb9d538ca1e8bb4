//! Calls of foreign tile functions (functions a tile library implements), as declared with
//! `#[cutile::foreign]`.
//!
//! The attribute turns a body-less `unsafe fn` into a function whose body records one call with
//! [`ForeignCall`]: an extern `preview$func` declaration in the module (one per symbol; a second call with
//! other operand types is a trace error) and a `preview$call` with the constant arguments as symbolic
//! expressions (index → `expr_int`, string → `expr_const_str`, datatype → `concrete_type`, shape →
//! `symbolic_tuple`).
//!
//! Operands are `in` (plain parameters) or `inout` (`#[inout]`), then one zero-filled `out` operand per
//! output-only result. The call follows NVIDIA's Tile C++ calling convention (as `nvcc --tilebc` emits it):
//! two ordering tokens lead the operands and the results. The tracer passes the join of every pending
//! memory token and afterwards orders every later access after the call, so calls are ordered like
//! memory accesses, also through loops and `if`s (the tokens are threaded like the outputs' tokens).

use cutile_ir::{Access, Attribute, Function, OpAttr, Opcode, PreviewType, Type};

use super::elem::{ElementType, HostNum};
use super::shape::Shape;
use super::value::{Scalar, Tile};
use crate::trace::{self, Op};

/// A compile-time string constant argument of a foreign function. Kernels never build one by hand:
/// the `#[cutile::module]` macro turns a literal, a `const`, an associated const, or a local bound to one
/// of these into a `ForeignStr` at the call; anything else is a type error at the argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeignStr(&'static str);

impl ForeignStr {
    /// The string.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

/// Used by the code `#[cutile::module]` generates around constant string arguments (inside `const { }`).
#[doc(hidden)]
pub const fn __foreign_str(s: &'static str) -> ForeignStr {
    ForeignStr(s)
}

/// A value that can be an operand or result of a foreign call: a tile or a scalar (rank-0 tile).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a foreign tile function",
    label = "operands and results of foreign functions are `Tile<E, S>` or `Scalar<E>`"
)]
pub trait ForeignValue: Copy {
    #[doc(hidden)]
    fn ir_type() -> Type;
    #[doc(hidden)]
    fn value(self) -> cutile_ir::ValueId;
    #[doc(hidden)]
    fn from_value(v: cutile_ir::ValueId) -> Self;
}

impl<E: ElementType, S: Shape> ForeignValue for Tile<E, S> {
    fn ir_type() -> Type {
        Tile::<E, S>::ir_type()
    }
    fn value(self) -> cutile_ir::ValueId {
        self.v
    }
    fn from_value(v: cutile_ir::ValueId) -> Self {
        Tile::from_value(v)
    }
}

impl<E: ElementType> ForeignValue for Scalar<E> {
    fn ir_type() -> Type {
        Scalar::<E>::ir_type()
    }
    fn value(self) -> cutile_ir::ValueId {
        self.v
    }
    fn from_value(v: cutile_ir::ValueId) -> Self {
        Scalar::from_value(v)
    }
}

/// The results of a foreign function: `()`, one value, or a tuple of values (updated `inout` operands first,
/// then the `out` operands).
pub trait ForeignResults {
    #[doc(hidden)]
    fn ir_types() -> Vec<Type>;
    #[doc(hidden)]
    fn from_values(vs: &[cutile_ir::ValueId]) -> Self;
}

impl ForeignResults for () {
    fn ir_types() -> Vec<Type> {
        vec![]
    }
    fn from_values(_: &[cutile_ir::ValueId]) -> Self {}
}

impl<E: ElementType, S: Shape> ForeignResults for Tile<E, S> {
    fn ir_types() -> Vec<Type> {
        vec![Self::ir_type()]
    }
    fn from_values(vs: &[cutile_ir::ValueId]) -> Self {
        Tile::from_value(value_at(vs, 0))
    }
}

impl<E: ElementType> ForeignResults for Scalar<E> {
    fn ir_types() -> Vec<Type> {
        vec![Self::ir_type()]
    }
    fn from_values(vs: &[cutile_ir::ValueId]) -> Self {
        Scalar::from_value(value_at(vs, 0))
    }
}

fn value_at(vs: &[cutile_ir::ValueId], i: usize) -> cutile_ir::ValueId {
    vs.get(i).copied().unwrap_or(cutile_ir::ValueId(u32::MAX))
}

macro_rules! tuple_results {
    ($($t:ident $i:tt),+) => {
        impl<$($t: ForeignValue),+> ForeignResults for ($($t,)+) {
            fn ir_types() -> Vec<Type> {
                vec![$(<$t as ForeignValue>::ir_type()),+]
            }
            fn from_values(vs: &[cutile_ir::ValueId]) -> Self {
                ($(<$t as ForeignValue>::from_value(value_at(vs, $i)),)+)
            }
        }
    };
}
tuple_results!(A 0);
tuple_results!(A 0, B 1);
tuple_results!(A 0, B 1, C 2);
tuple_results!(A 0, B 1, C 2, D 3);
tuple_results!(A 0, B 1, C 2, D 3, F 4);
tuple_results!(A 0, B 1, C 2, D 3, F 4, G 5);
tuple_results!(A 0, B 1, C 2, D 3, F 4, G 5, H 6);
tuple_results!(A 0, B 1, C 2, D 3, F 4, G 5, H 6, I 7);

/// One foreign call under construction; generated code for `#[cutile::foreign]` functions drives it.
#[doc(hidden)]
#[derive(Debug)]
pub struct ForeignCall {
    symbol: &'static str,
    const_params: Vec<Attribute>,
    const_args: Vec<Attribute>,
    params: Vec<(Type, Access)>,
    args: Vec<cutile_ir::ValueId>,
    outs: Vec<Type>,
}

impl ForeignCall {
    pub fn new(symbol: &'static str) -> ForeignCall {
        ForeignCall {
            symbol,
            const_params: vec![],
            const_args: vec![],
            params: vec![],
            args: vec![],
            outs: vec![],
        }
    }
    fn constant(&mut self, name: &str, kind: PreviewType, arg: Attribute) {
        self.const_params.push(Attribute::ConstParam {
            name: name.to_string(),
            ty: Type::Preview(kind),
        });
        self.const_args.push(arg);
    }
    pub fn const_str(&mut self, name: &str, s: ForeignStr) {
        self.constant(
            name,
            PreviewType::String,
            Attribute::ExprConstStr(s.0.to_string()),
        );
    }
    pub fn const_index(&mut self, name: &str, v: i64) {
        self.constant(name, PreviewType::Index, Attribute::ExprInt(v));
    }
    pub fn const_type<E: ElementType>(&mut self, name: &str) {
        self.constant(
            name,
            PreviewType::Datatype,
            Attribute::ConcreteType(Type::Scalar(E::SCALAR)),
        );
    }
    pub fn const_shape<S: Shape>(&mut self, name: &str) {
        let dims = S::DIMS
            .iter()
            .map(|&d| Attribute::ExprInt(d as i64))
            .collect();
        self.constant(name, PreviewType::Shape, Attribute::SymbolicTuple(dims));
    }
    pub fn input<V: ForeignValue>(&mut self, v: V) {
        self.params.push((V::ir_type(), Access::In));
        self.args.push(v.value());
    }
    pub fn inout<V: ForeignValue>(&mut self, v: V) {
        self.params.push((V::ir_type(), Access::InOut));
        self.args.push(v.value());
    }

    /// Emit the declaration (first call of this symbol) and the call; returns the results as `R`.
    #[track_caller]
    pub fn finish<R: ForeignResults>(mut self) -> R {
        let _at = trace::at(::std::panic::Location::caller());
        let result_types = R::ir_types();
        let inouts: Vec<Type> = self
            .params
            .iter()
            .filter(|(_, a)| *a == Access::InOut)
            .map(|(t, _)| t.clone())
            .collect();
        if result_types.len() < inouts.len() || result_types[..inouts.len()] != inouts[..] {
            trace::fail(format!(
                "foreign function `{}`: its results must start with the updated #[inout] operands",
                self.symbol
            ));
            return R::from_values(&[]);
        }
        self.outs = result_types[inouts.len()..].to_vec();
        // Output-only operands are passed zero-filled after the parameters (as Tile C++ does).
        let mut params = self.params.clone();
        let mut args = self.args.clone();
        for ty in &self.outs {
            let e = match ty {
                Type::Tile { elem, .. } => match **elem {
                    Type::Scalar(e) => e,
                    _ => continue,
                },
                _ => continue,
            };
            args.push(super::arith::splat_const(e, ty, HostNum::Int(0)));
            params.push((ty.clone(), Access::Out));
        }
        let vs = trace::with(|t| self.emit(t, &params, args, &result_types));
        R::from_values(&vs)
    }

    fn emit(
        &self,
        t: &mut trace::Tracer,
        params: &[(Type, Access)],
        args: Vec<cutile_ir::ValueId>,
        result_types: &[Type],
    ) -> Vec<cutile_ir::ValueId> {
        if let Err(m) = t.declare_extern(extern_decl(
            self.symbol,
            params,
            result_types,
            &self.const_params,
        )) {
            t.fail_here(m);
            return vec![];
        }
        let tok = t.join_all_tokens();
        let mut operands = vec![tok, tok];
        operands.extend(args);
        let op = Op::new(Opcode::PreviewCall)
            .attr("callee", OpAttr::Str(self.symbol.to_string()))
            .attr("const_args", OpAttr::TaggedArray(self.const_args.clone()))
            .operands("operands", &operands)
            .results([Type::Token, Type::Token])
            .results(result_types.iter().cloned());
        let rs = t.push(op);
        if rs.len() < 2 {
            return vec![];
        }
        let after = t.push1(
            Op::new(Opcode::JoinTokens)
                .operands("tokens", &rs[..2])
                .result(Type::Token),
        );
        t.order_all_after(after);
        rs[2..].to_vec()
    }
}

/// The extern declaration of `symbol` (private, access attributes, constant parameters).
pub(crate) fn extern_decl(
    symbol: &str,
    params: &[(Type, Access)],
    results: &[Type],
    const_params: &[Attribute],
) -> Function {
    Function::new_extern_decl(symbol, params, results, const_params.to_vec())
}
