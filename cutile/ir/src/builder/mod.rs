//! The IR builder: construct well-typed Tile IR modules.
//!
//! Every op is checked when it is created, with the same rules as [`crate::verify`], so mistakes surface at
//! the call that made them with a message naming the op and the offending types, e.g.
//! `addf: operand types differ: tile<4xf32> vs tile<8xf32>`. Result types are inferred wherever the operands
//! determine them; ops that change shape or element type take the target (`broadcast(v, &[64, 64])`,
//! `ftof(v, ScalarType::F16)`).
//!
//! # Overview
//! ```
//! use cutile_ir::builder::{ArraySpec, ModuleBuilder, kernel_params};
//! use cutile_ir::{Padding, ScalarType::F32};
//!
//! # fn main() -> Result<(), cutile_ir::builder::BuildError> {
//! let a = ArraySpec::row_major(F32, 1);
//! let mut m = ModuleBuilder::new();
//! let mut f = m.entry("scale", &kernel_params(&[a, a], &[]))?;
//! let (src, dst) = (f.bind_array(&a, 0)?, f.bind_array(&a, a.param_count())?);
//! let [bx, _, _] = f.get_tile_block_id()?;
//! let pin = f.make_partition_view(src, &[256], Some(Padding::Zero))?;
//! let pout = f.make_partition_view(dst, &[256], None)?;
//! let (x, _) = f.load_view_tko(pin, &[bx], None)?;
//! let two = f.constant(F32, &[256], 2.0)?;
//! let y = f.mulf(x, two)?;
//! f.store_view_tko(y, pout, &[bx], None)?;
//! f.finish()?; // appends `return`
//! let module = m.finish();
//! # cutile_ir::verify::verify_module(&module, cutile_ir::V13_5).map_err(|e| cutile_ir::builder::BuildError::Usage(e.to_string()))?;
//! # Ok(()) }
//! ```
//!
//! # API in brief (stable)
//! - [`ModuleBuilder`]: `new`, `producer`, `entry(name, &param_types) -> FunctionBuilder`,
//!   `extern_decl(name, &[(Type, Access)], &results, &const_params)`, `global(name, elem, &values, align)`,
//!   `module()`, `finish() -> Module`.
//! - [`FunctionBuilder`] basics: `params`, `param(i)`, `ty(v)`, `in_scope(v)`, `finish()`; hints
//!   `num_worker_warps_per_cta(arch, n)`, `occupancy(arch, n)`, `num_cta_in_cga(arch, n)`, `hint(arch, key,
//!   attr)` (arch `"sm_90"`… or `"default"`); debug locations `enable_debug_info(file, dir, line)`,
//!   `set_loc(line, col)`, `clear_loc()`.
//! - Generic path for any op: `op(Opcode) .operand(group, v) .operands(group, &vs) .attr(name, OpAttr)
//!   .enum_attr(name, e) .flag(name) .result(ty) .region(block) .region_with(&arg_types, |b, args| …)
//!   .build() -> Vec<ValueId>`; blocks for it via `begin_block` / `end_block`.
//! - Constants ([`Const`]): `constant(elem, shape, v)` (splat), `constant_dense(elem, shape, &vals)`,
//!   `constant_bytes`, `const_i32`, `const_i64`, `const_f32`, `const_bool`; [`scalar_attr`] for identities.
//! - Float math: `addf subf mulf divf remf maxf minf powf atan2` and `binary_float(op, a, b, FloatOpts)`;
//!   `absf negf ceil floor cos cosh sin sinh tan tanh exp exp2 log log2 sqrt rsqrt` and
//!   `unary_float(op, a, FloatOpts)`; `fma`, `fma_with`, `powi`.
//! - Integer math: `addi subi muli mulhii andi ori xori shli absi negi`, `divi remi maxi mini shri (…,
//!   Signedness)`, `int_op(op, a, b, IntOpts)`.
//! - Comparisons and selection: `cmpf(pred, a, b)`, `cmpf_with`, `cmpi(pred, a, b, sign)`, `select`.
//! - Conversions: `ftof`, `ftof_with`, `ftoi`, `itof`, `exti`, `trunci`, `bitcast`, `int_to_ptr`,
//!   `ptr_to_int`, `ptr_to_ptr`.
//! - Shapes: `broadcast`, `broadcast_to`, `reshape`, `permute`, `cat`, `extract`, `insert`, `iota`, `pack`,
//!   `unpack`, `offset`.
//! - Memory: `make_token`, `join_tokens`, `assume`, `assume_div_by`, `assume_bounded`, `make_tensor_view(base,
//!   &[Dim], &[Dim])`, `make_partition_view(tv, tile, padding)`, `make_partition_view_mapped`,
//!   `make_strided_view`, `make_gather_scatter_view`, `get_tile_block_id`, `get_num_tile_blocks`,
//!   `get_index_space_shape`, `get_tensor_shape`, `load_view_tko[_with]`, `store_view_tko[_with]`,
//!   `load_ptr_tko[_with]`, `store_ptr_tko[_with]` ([`MemOpts`]), `atomic_rmw_tko`, `atomic_cas_tko`,
//!   `atomic_red_view_tko` ([`AtomicOpts`]), `multimem_*` (views over a [`multicast_pointer_tile`]; the
//!   tensor view inherits the base pointer's attribute), `get_global`, `alloca`, `gdc_wait_tko`,
//!   `gdc_launch_dependents_tko`, `memory_fence_alias_tko`, `print_tko`, `assert`, `mmaf`, `mmaf_with`,
//!   `mmai`, `mmaf_scaled`.
//! - Arrays as kernel arguments: [`ArraySpec`], [`kernel_params`], `bind_array` (see [`array`](mod@array) for the
//!   convention the runtime packs arguments by).
//! - Regions ([`control`]): `for_loop(lo, hi, step, &inits, |b, iv, carried| Ok(next))`,
//!   `loop_(&inits, &result_types, |b, carried| …)`, `if_then_else(cond, &result_types, |b| …, |b| …)`,
//!   `if_then(cond, |b| …)`, `reduce(&operands, dim, &identities, |b, lhs, rhs| …)`, `scan(…)`; the same as
//!   `begin_for`/`end_for`, `begin_loop`/`end_loop`, `begin_if`/`begin_else`/`end_if`,
//!   `begin_reduce`/`end_reduce`, `begin_scan`/`end_scan`; terminators `yield_`, `continue_`, `break_`,
//!   `return_`; `preview_call(callee, const_args, &args)`.
//!
//! After an error the builder stays usable: the failing op is not added, and a region whose body failed is
//! dropped.

pub mod arith;
pub mod array;
pub mod consts;
pub mod control;
mod error;
pub mod function;
pub mod generic;
pub mod memory;
pub mod shape;

pub use arith::{FloatOpts, IntOpts};
pub use array::{ArraySpec, kernel_params};
pub use consts::{Const, encode_scalar, scalar_attr};
pub use control::{CombineFrame, ForFrame};
pub use error::BuildError;
pub use function::FunctionBuilder;
pub use generic::OpBuilder;
pub use memory::{
    AtomicOpts, Dim, MemOpts, MultimemReduction, PTR_MULTICAST, PTR_NONE, PTR_UNICAST,
    multicast_pointer_tile,
};

use crate::attr::{Access, Attribute};
use crate::ir::{Function, Global, Module};
use crate::types::{PreviewType, ScalarType, Type};
use crate::verify::text::type_text;

/// Builds a [`Module`]: entries, extern declarations and globals.
#[derive(Debug, Default)]
pub struct ModuleBuilder {
    module: Module,
}

impl ModuleBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the producer string written to the Producer section.
    pub fn producer(&mut self, p: impl Into<String>) -> &mut Self {
        self.module.producer = Some(p.into());
        self
    }

    fn check_name(&self, name: &str) -> Result<(), BuildError> {
        let bad = name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.');
        if bad {
            return Err(BuildError::Function {
                function: name.to_string(),
                message:
                    "names must be non-empty and use only ASCII letters, digits, `_`, `$` and `.`"
                        .into(),
            });
        }
        if self.module.function(name).is_some()
            || self.module.globals.iter().any(|g| g.name == name)
        {
            return Err(BuildError::Function {
                function: name.to_string(),
                message: "the name is already used in this module; pick another".into(),
            });
        }
        Ok(())
    }

    /// Start an entry (kernel) taking `params`, which must be rank-0 tiles (scalars and pointers; pass
    /// arrays as described in [`array`](mod@array)).
    pub fn entry(
        &mut self,
        name: &str,
        params: &[Type],
    ) -> Result<FunctionBuilder<'_>, BuildError> {
        self.check_name(name)?;
        for (i, t) in params.iter().enumerate() {
            if t.tile_shape().is_none_or(|s| !s.is_empty()) {
                return Err(BuildError::Function {
                    function: name.to_string(),
                    message: format!(
                        "entry parameter {i} must be a rank-0 tile, got {}; pass arrays as a pointer plus shape and stride scalars",
                        type_text(t)
                    ),
                });
            }
            crate::verify::types::type_ok(t).map_err(|message| BuildError::Function {
                function: name.to_string(),
                message,
            })?;
        }
        Ok(FunctionBuilder::new(&mut self.module, name, params))
    }

    /// (preview, 13.5) Declare a foreign function: each parameter with its access mode; the `out`/`inout`
    /// parameters bind, in order, to `results`. `const_params` name constant parameters of kind
    /// `Datatype`, `Shape`, `String` or `Index`.
    pub fn extern_decl(
        &mut self,
        name: &str,
        params: &[(Type, Access)],
        results: &[Type],
        const_params: &[(&str, PreviewType)],
    ) -> Result<(), BuildError> {
        self.check_name(name)?;
        let err = |message: String| BuildError::Function {
            function: name.to_string(),
            message,
        };
        if params.is_empty() {
            return Err(err(
                "an extern declaration needs at least one parameter".into()
            ));
        }
        let mut outs = Vec::new();
        for (i, (t, a)) in params.iter().enumerate() {
            if !t.is_tile() {
                return Err(err(format!(
                    "parameter {i} must be a tile, got {}",
                    type_text(t)
                )));
            }
            crate::verify::types::type_ok(t).map_err(&err)?;
            if *a != Access::In {
                outs.push(t.clone());
            }
        }
        if outs != results {
            return Err(err(format!(
                "the out/inout parameters ({}) must match the results ({}) in order",
                crate::verify::text::types_text(&outs),
                crate::verify::text::types_text(results)
            )));
        }
        let kinds_ok = const_params.iter().all(|(_, k)| {
            matches!(
                k,
                PreviewType::Datatype
                    | PreviewType::Shape
                    | PreviewType::String
                    | PreviewType::Index
            )
        });
        if !kinds_ok {
            return Err(err(
                "constant parameters must be of kind Datatype, Shape, String or Index".into(),
            ));
        }
        let const_params = const_params
            .iter()
            .map(|(n, k)| Attribute::ConstParam {
                name: n.to_string(),
                ty: Type::Preview(k.clone()),
            })
            .collect();
        self.module.functions.push(Function::new_extern_decl(
            name,
            params,
            results,
            const_params,
        ));
        Ok(())
    }

    /// Declare a module global: a rank-1 array of `elem` initialized with `values`.
    pub fn global(
        &mut self,
        name: &str,
        elem: ScalarType,
        values: &[Const],
        alignment: u64,
    ) -> Result<(), BuildError> {
        self.check_name(name)?;
        if values.is_empty() {
            return Err(BuildError::Function {
                function: name.to_string(),
                message: "a global needs at least one element".into(),
            });
        }
        if alignment > 1 && !alignment.is_power_of_two() {
            return Err(BuildError::Function {
                function: name.to_string(),
                message: format!("alignment {alignment} must be a power of two"),
            });
        }
        let mut value = Vec::new();
        for v in values {
            value.extend(
                encode_scalar(elem, *v).map_err(|message| BuildError::Function {
                    function: name.to_string(),
                    message,
                })?,
            );
        }
        let ty = Type::tile(elem, &[values.len() as i64]);
        crate::verify::types::type_ok(&ty).map_err(|message| BuildError::Function {
            function: name.to_string(),
            message,
        })?;
        self.module.globals.push(Global {
            name: name.to_string(),
            ty,
            value,
            alignment,
            private: false,
            constant: 0,
        });
        Ok(())
    }

    /// The module built so far.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The finished module.
    pub fn finish(self) -> Module {
        self.module
    }
}
