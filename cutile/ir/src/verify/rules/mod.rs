//! Per-op type rules: what each op requires of its operand, result and block-argument types and of its
//! attribute values, as enforced by tileiras' own verifier (element-type families, same-type operands,
//! shape agreement of mma/broadcast/reshape/views, memory-ordering combinations, terminator types).
//!
//! The builder runs [`check_op`] on every op it creates and the verifier on every op it walks, so both report
//! the same message for the same mistake. Messages never include the mnemonic; callers prefix it.

//!
//! One module per op family, each owning the rules of its ops; [`check_op`] dispatches on the opcode with an
//! exhaustive match, so a new op does not compile until it is given to a family. Attribute values are read as
//! the IR's typed enums ([`RoundingMode`], [`MemoryOrdering`], …), never as raw numbers.

mod arith;
mod call;
mod control;
mod convert;
mod hints;
mod memory;
mod misc;
mod mma;
mod shape;

pub use control::{Frame, is_effect_free, reduce_arg_type};
pub use hints::check_hints;

use crate::attr::{
    AtomicRmwMode, Attribute, IntegerOverflow, MemoryOrdering, MemoryScope, OptimizationHints,
    RoundingMode, Signedness, TypedEnum,
};
use crate::ir::{Block, FunctionKind, Module, OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::{DYNAMIC, PreviewType, ScalarType, Type};

use super::text::{attr_text, type_text as tt, types_text};
use super::types::*;

/// What a rule may look at besides the op itself.
#[derive(Clone, Copy, Debug)]
pub struct Env<'a> {
    pub module: &'a Module,
    /// The function's value arena.
    pub values: &'a [Type],
    /// Enclosing region ops, outermost (the function body) first.
    pub frames: &'a [Frame],
    /// Also check optimization hints (tileiras only warns about bad ones unless `--Werr-hints`).
    pub strict_hints: bool,
}

type R = Result<(), String>;

struct Ck<'a> {
    env: Env<'a>,
    op: &'a Operation,
}

impl<'a> Ck<'a> {
    fn ty(&self, v: ValueId) -> Result<&'a Type, String> {
        self.env
            .values
            .get(v.0 as usize)
            .ok_or_else(|| format!("value %{} does not exist in this function", v.0))
    }
    fn group(&self, name: &str) -> Result<Vec<&'a Type>, String> {
        self.op
            .operand_group(name)
            .iter()
            .map(|v| self.ty(*v))
            .collect()
    }
    fn one(&self, name: &str) -> Result<&'a Type, String> {
        match self.op.operand_group(name) {
            [v] => self.ty(*v),
            other => Err(format!(
                "operand `{name}` needs exactly one value, got {}",
                other.len()
            )),
        }
    }
    fn opt(&self, name: &str) -> Result<Option<&'a Type>, String> {
        match self.op.operand_group(name) {
            [] => Ok(None),
            [v] => Ok(Some(self.ty(*v)?)),
            other => Err(format!(
                "operand `{name}` takes at most one value, got {}",
                other.len()
            )),
        }
    }
    fn res(&self, i: usize) -> Result<&'a Type, String> {
        let v = self
            .op
            .results
            .get(i)
            .ok_or_else(|| format!("missing result #{i}"))?;
        self.ty(*v)
    }
    fn results(&self) -> Result<Vec<&'a Type>, String> {
        self.op.results.iter().map(|v| self.ty(*v)).collect()
    }
    /// The enum attribute `name` as the typed enum `E` (None if absent or not a value of `E`).
    fn enum_<E: TypedEnum>(&self, name: &str) -> Option<E> {
        match self.op.attr(name) {
            Some(OpAttr::Enum(e)) => e.typed::<E>(),
            _ => None,
        }
    }
    fn unit(&self, name: &str) -> bool {
        matches!(self.op.attr(name), Some(OpAttr::Unit))
    }
    fn int_attr(&self, name: &str) -> Option<u64> {
        match self.op.attr(name) {
            Some(OpAttr::Int(v)) => Some(*v),
            _ => None,
        }
    }
    fn str_attr(&self, name: &str) -> Option<&'a str> {
        match self.op.attr(name) {
            Some(OpAttr::Str(s)) => Some(s),
            _ => None,
        }
    }

    // ---- families ----

    fn float_tile(&self, t: &Type, what: &str) -> Result<ScalarType, String> {
        match scalar_tile(t) {
            Some((s, _)) if is_base_float(s) => Ok(s),
            _ => Err(format!(
                "{what} must be a tile of f16, bf16, f32 or f64, got {}",
                tt(t)
            )),
        }
    }
    fn int_tile(&self, t: &Type, what: &str) -> Result<ScalarType, String> {
        match scalar_tile(t) {
            Some((s, _)) if is_int(s) => Ok(s),
            _ => Err(format!(
                "{what} must be a tile of i1, i8, i16, i32 or i64, got {}",
                tt(t)
            )),
        }
    }
    fn same(&self, a: &Type, b: &Type, what: &str) -> R {
        if a == b {
            Ok(())
        } else {
            Err(format!("{what} differ: {} vs {}", tt(a), tt(b)))
        }
    }
    fn same_shape(&self, a: &Type, b: &Type, what: &str) -> R {
        if a.tile_shape() != b.tile_shape() || a.tile_shape().is_none() {
            return Err(format!("{what} shapes differ: {} vs {}", tt(a), tt(b)));
        }
        Ok(())
    }
    fn token_result(&self, i: usize) -> R {
        let t = self.res(i)?;
        if !t.is_token() {
            return Err(format!("result #{i} must be a token, got {}", tt(t)));
        }
        Ok(())
    }
    fn token_operand(&self, name: &str) -> R {
        if let Some(t) = self.opt(name)?
            && !t.is_token()
        {
            return Err(format!("operand `{name}` must be a token, got {}", tt(t)));
        }
        Ok(())
    }
}

/// Check one op against the rules of its opcode. `Err` holds the message without the mnemonic.
pub fn check_op(env: Env<'_>, op: &Operation) -> R {
    let c = Ck { env, op };
    for t in c.results()? {
        type_ok(t)?;
    }
    use Opcode::*;
    match op.opcode {
        AbsF | Ceil | Cos | CosH | Floor | Log | Log2 | NegF | Sin | SinH | Tan | Exp | TanH
        | Exp2 | Rsqrt | Sqrt | AddF | SubF | MulF | DivF | RemF | MaxF | MinF | FPowF | Atan2
        | Fma | AbsI | NegI | AddI | SubI | MulI | ShLI | AndI | OrI | XOrI | ShRI | MaxI
        | MinI | RemI | MulhiI | DivI | CmpF | CmpI | Select | FPowI => arith::check(&c),
        Constant | Iota | Broadcast | Reshape | Permute | Cat | Extract | Insert => {
            shape::check(&c)
        }
        Bitcast | ExtI | TruncI | FToF | FToI | IToF | IntToPtr | PtrToInt | PtrToPtr | Pack
        | Unpack => convert::check(&c),
        Offset
        | MakeTensorView
        | MakePartitionView
        | MakeStridedView
        | MakeGatherScatterView
        | GetIndexSpaceShape
        | GetTensorShape
        | LoadViewTko
        | StoreViewTko
        | AtomicRedViewTko
        | MultimemLoadReduceViewTko
        | MultimemReduceViewTko
        | MultimemStoreViewTko
        | LoadPtrTko
        | StorePtrTko
        | AtomicRMWTko
        | AtomicCASTko
        | GetGlobal
        | Global
        | Alloca => memory::check(&c),
        Assume
        | MakeToken
        | JoinTokens
        | GetTileBlockId
        | GetNumTileBlocks
        | PrintTko
        | Assert
        | GdcLaunchDependentsTko
        | GdcWaitTko
        | MemoryFenceAliasTko => misc::check(&c),
        MmaF | MmaI | MmaFScaled => mma::check_mma(&c),
        For => control::check_for(&c),
        Loop => control::check_loop(&c),
        If => control::check_if(&c),
        Reduce | Scan => control::check_reduce_scan(&c),
        Yield | Continue | Break | Return => control::check_terminator(&c),
        PreviewCall => call::check_preview_call(&c),
        Module | Entry => Err("is a structural opcode and cannot appear in a function body".into()),
    }
}

/// Element and shape of a tile (of scalars or pointers).
fn tile_parts(t: &Type) -> Result<(&Type, &[i64]), String> {
    match t {
        Type::Tile { elem, shape } => Ok((elem, shape)),
        _ => Err(format!("expected a tile, got {}", tt(t))),
    }
}
