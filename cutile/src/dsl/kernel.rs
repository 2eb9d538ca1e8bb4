//! Kernels as values: the static description the macro emits ([`KernelInfo`]), a kernel with its generic
//! arguments fixed ([`Kernel`]), the builder the generated code drives ([`KernelBuilder`]: parameters,
//! layout `assume`s, tensor views, then the traced body), and the specialized result ([`Specialized`]).

use std::fmt;

use cutile_ir::{
    Attribute, Function, FunctionKind, Module, OpAttr, Opcode, OptimizationHints, ScalarType, Type,
    ValueId,
};

pub use super::error::{ArgError, SpecializeError};
use super::spec::{GenericValue, LayoutFacts, TensorMeta, choose_index_type};
use crate::core::{ElementType, Scalar, Shape, Tensor};
use crate::trace::{self, Op, TraceGuard};

/// How a kernel parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `&Tensor<E, S>`: a shared input array.
    Input,
    /// `&mut Tensor<E, S>`: an output partitioned into `S` tiles, one per block.
    Output,
    /// `Scalar<E>`: a run-time scalar argument.
    Scalar,
}

/// One parameter as the macro saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamInfo {
    pub name: &'static str,
    pub kind: ParamKind,
}

/// One optimization hint from `#[cutile::entry(...)]`: (arch key or `"default"`, hint name, value).
pub type HintInfo = (&'static str, &'static str, i32);

/// What the macro knows about one kernel, independent of its generic arguments.
#[derive(Debug)]
pub struct KernelInfo {
    /// `module_path!()` of the kernel's module.
    pub module_path: &'static str,
    /// The kernel's name (also its entry symbol).
    pub name: &'static str,
    /// Names of the generic parameters, in order.
    pub generics: &'static [&'static str],
    pub params: &'static [ParamInfo],
    pub hints: &'static [HintInfo],
    /// Hash of the kernel module's source tokens (cache identity).
    pub source_hash: u64,
    /// Source file and line of the kernel function (debug info).
    pub file: &'static str,
    pub line: u32,
}

/// A parameter declaration with its types resolved (built by generated code from the Rust types).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamDecl {
    Tensor {
        elem: ScalarType,
        dims: &'static [i32],
        mutable: bool,
    },
    Scalar {
        elem: ScalarType,
    },
}

impl ParamDecl {
    pub fn tensor<E: ElementType, S: Shape>(mutable: bool) -> ParamDecl {
        ParamDecl::Tensor {
            elem: E::SCALAR,
            dims: S::DIMS,
            mutable,
        }
    }
    pub fn scalar<E: ElementType>() -> ParamDecl {
        ParamDecl::Scalar { elem: E::SCALAR }
    }
}

/// A kernel with its generic arguments fixed: ready to be specialized for concrete arrays.
#[derive(Clone)]
pub struct Kernel {
    pub info: &'static KernelInfo,
    pub generics: Vec<GenericValue>,
    /// Per tensor parameter: the extents of its declared shape (for outputs, the tile shape).
    tensor_shapes: Vec<&'static [i32]>,
    build: fn(&[TensorMeta], &OptimizationHints) -> Result<Module, SpecializeError>,
    hints: OptimizationHints,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kernel({}<", self.info.name)?;
        for (i, g) in self.generics.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{g}")?;
        }
        f.write_str(">)")
    }
}

impl Kernel {
    /// Used by generated code.
    #[doc(hidden)]
    pub fn new(
        info: &'static KernelInfo,
        generics: Vec<GenericValue>,
        tensor_shapes: Vec<&'static [i32]>,
        build: fn(&[TensorMeta], &OptimizationHints) -> Result<Module, SpecializeError>,
    ) -> Kernel {
        let mut hints = OptimizationHints::empty_default();
        for &(arch, key, v) in info.hints {
            hints.set_i32(arch, key, v);
        }
        Kernel {
            info,
            generics,
            tensor_shapes,
            build,
            hints,
        }
    }

    /// The tile shape of tensor parameter `i` (counting tensors only) if it is a partitioned output.
    pub fn output_tile(&self, i: usize) -> Option<Vec<i32>> {
        let p = self
            .info
            .params
            .iter()
            .filter(|p| p.kind != ParamKind::Scalar)
            .nth(i)?;
        (p.kind == ParamKind::Output).then(|| {
            self.tensor_shapes
                .get(i)
                .map(|d| d.to_vec())
                .unwrap_or_default()
        })
    }

    /// The kernel's entry name.
    pub fn name(&self) -> &'static str {
        self.info.name
    }

    /// Override or add an optimization hint (`num_worker_warps_per_cta`, `occupancy`, `num_cta_in_cga`) for
    /// one arch key (`"sm_90"`, …) or `"default"`.
    pub fn with_hint(mut self, arch: &str, key: &str, value: i32) -> Kernel {
        self.hints.set_i32(arch, key, value);
        self
    }

    /// The `occupancy` hint (blocks per SM tileiras sizes registers and pipelines for) on every arch
    /// when `blocks > 0`; 0 leaves the kernel as it is, so its cache keys and bundles stay those of
    /// the unhinted kernel.
    pub fn with_occupancy(self, blocks: i64) -> Kernel {
        match i32::try_from(blocks) {
            Ok(n) if n > 0 => self.with_hint("default", "occupancy", n),
            _ => self,
        }
    }

    /// The `num_cta_in_cga` hint on every arch when `ctas > 1`: tileiras splits each tile block over
    /// a cluster of that many CTAs, which share operand loads (TMA multicast), and a block of the
    /// launch grid is then a cluster (sm_80 has no clusters and ignores it). 1 leaves the kernel as
    /// it is, as [`Kernel::with_occupancy`] does with 0.
    pub fn with_cluster(self, ctas: i64) -> Kernel {
        match i32::try_from(ctas) {
            Ok(n) if n > 1 => self.with_hint("default", "num_cta_in_cga", n),
            _ => self,
        }
    }

    /// The optimization hints this kernel will carry.
    pub fn hints(&self) -> &OptimizationHints {
        &self.hints
    }

    /// Build the Tile IR for these arrays (the cold path: tracing, no toolchain).
    pub fn specialize(&self, tensors: &[TensorMeta]) -> Result<Specialized, SpecializeError> {
        let module = (self.build)(tensors, &self.hints)?;
        Ok(Specialized {
            entry: self.info.name,
            index_type: choose_index_type(tensors),
            facts: tensors.iter().map(LayoutFacts::of).collect(),
            module,
        })
    }
}

/// A specialized kernel: its Tile IR module and the facts it was built for.
#[derive(Clone, Debug)]
pub struct Specialized {
    pub entry: &'static str,
    pub module: Module,
    pub index_type: ScalarType,
    pub facts: Vec<LayoutFacts>,
}

impl Specialized {
    /// The IR as tileirdisasm would print it.
    pub fn ir_text(&self) -> String {
        cutile_ir::print::print_module(&self.module)
    }

    /// Tile IR bytecode of `version`.
    pub fn bytecode(&self, version: cutile_ir::Version) -> Result<Vec<u8>, SpecializeError> {
        cutile_ir::bytecode::write_module(&self.module, version).map_err(|source| {
            SpecializeError::Bytecode {
                kernel: self.entry.to_string(),
                source,
            }
        })
    }

    /// Compile to a cubin for `arch` with `tileiras` (bytecode at the newest version it reads, up to 13.5).
    pub fn compile(
        &self,
        tileiras: &crate::toolchain::Tileiras,
        request: &crate::toolchain::CompileRequest,
    ) -> Result<crate::toolchain::Cubin, SpecializeError> {
        let bc = self.bytecode(bytecode_version_for(tileiras))?;
        tileiras
            .compile(&bc, request)
            .map_err(|source| SpecializeError::Toolchain {
                kernel: self.entry.to_string(),
                source,
            })
    }
}

/// The newest bytecode version both we and `tileiras` handle: what [`Specialized::compile`] writes.
pub fn bytecode_version_for(tileiras: &crate::toolchain::Tileiras) -> cutile_ir::Version {
    let ours = cutile_ir::Version::WRITABLE;
    let theirs = tileiras.bytecode_versions();
    ours.iter()
        .rev()
        .find(|v| theirs.iter().any(|t| t.to_string() == v.to_string()))
        .copied()
        .unwrap_or(cutile_ir::V13_4)
}

/// Drives one specialization: validates the arrays against the declarations, opens the trace with the
/// entry parameters, emits the layout `assume`s and tensor views, hands out parameter handles, and closes
/// the trace. Generated code calls it; it is public only for that.
pub struct KernelBuilder {
    info: &'static KernelInfo,
    decls: Vec<ParamDecl>,
    /// Per parameter: (first IR param index, view value, dims values, out slot).
    handles: Vec<Handle>,
    guard: Option<TraceGuard>,
}

impl fmt::Debug for KernelBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelBuilder({})", self.info.name)
    }
}

#[derive(Clone, Debug)]
enum Handle {
    Tensor {
        view: ValueId,
        view_ty: Type,
        dims: Vec<ValueId>,
        base: ValueId,
        strides: Vec<Option<ValueId>>,
        slot: Option<usize>,
    },
    Scalar(ValueId),
}

impl KernelBuilder {
    /// Validate `tensors` against `decls` and open the trace.
    pub fn begin(
        info: &'static KernelInfo,
        decls: Vec<ParamDecl>,
        tensors: &[TensorMeta],
        hints: &OptimizationHints,
    ) -> Result<KernelBuilder, SpecializeError> {
        let kernel = info.name.to_string();
        let n_tensors = decls
            .iter()
            .filter(|d| matches!(d, ParamDecl::Tensor { .. }))
            .count();
        if n_tensors != tensors.len() {
            return Err(ArgError::TensorCount {
                kernel,
                expected: n_tensors,
                got: tensors.len(),
            }
            .into());
        }
        let index_ty = choose_index_type(tensors);
        let mut param_types = vec![];
        let mut metas = tensors.iter();
        let mut tensor_metas = vec![];
        for (i, d) in decls.iter().enumerate() {
            let pname = info
                .params
                .get(i)
                .map(|p| p.name)
                .unwrap_or("?")
                .to_string();
            match d {
                ParamDecl::Tensor {
                    elem,
                    dims,
                    mutable,
                } => {
                    let Some(m) = metas.next() else { break };
                    if m.dtype != *elem {
                        return Err(ArgError::DType {
                            kernel,
                            param: pname,
                            declared: *elem,
                            actual: m.dtype,
                        }
                        .into());
                    }
                    if m.shape.len() != dims.len() {
                        return Err(ArgError::Rank {
                            kernel,
                            param: pname,
                            declared: dims.len(),
                            actual: m.shape.len(),
                            shape: m.shape.clone(),
                        }
                        .into());
                    }
                    if m.strides.len() != m.shape.len() {
                        return Err(ArgError::Strides {
                            kernel,
                            param: pname,
                            shape: m.shape.len(),
                            strides: m.strides.len(),
                        }
                        .into());
                    }
                    if !*mutable
                        && let Some(message) =
                            crate::core::tensor::static_dims_message(dims, &m.shape)
                    {
                        return Err(ArgError::StaticShape {
                            kernel,
                            param: pname,
                            message,
                        }
                        .into());
                    }
                    param_types.push(Type::pointer_tile(*elem, &[]));
                    for _ in 0..2 * dims.len() {
                        param_types.push(Type::scalar_tile(index_ty));
                    }
                    tensor_metas.push(m);
                }
                ParamDecl::Scalar { elem } => param_types.push(Type::scalar_tile(*elem)),
            }
        }
        let (guard, params) =
            trace::begin(info.name, param_types, index_ty, (info.file, info.line)).map_err(
                |message| SpecializeError::Setup {
                    kernel: kernel.clone(),
                    message,
                },
            )?;
        let handles = trace::with(|t| {
            if let FunctionKind::Entry { hints: h } = &mut t.func.kind {
                *h = hints.clone();
            }
            let handles = emit_prologue(t, &decls, &params, &tensor_metas, index_ty);
            // One more hidden token slot after the outputs' orders foreign calls among themselves.
            t.out_tokens.push(t.entry_token);
            handles
        });
        Ok(KernelBuilder {
            info,
            decls,
            handles,
            guard: Some(guard),
        })
    }

    /// The handle of tensor parameter `i` (generated code passes the declared types).
    pub fn tensor<E: ElementType, S: Shape>(&self, i: usize) -> Tensor<E, S> {
        match self.handles.get(i) {
            Some(Handle::Tensor {
                view,
                view_ty,
                dims,
                base,
                strides,
                slot,
            }) => Tensor {
                view: *view,
                view_ty: view_ty.clone(),
                dims: dims.clone(),
                base: *base,
                strides: strides.clone(),
                out_slot: *slot,
                _p: std::marker::PhantomData,
            },
            _ => Tensor {
                view: ValueId(u32::MAX),
                view_ty: Type::Token,
                dims: vec![],
                base: ValueId(u32::MAX),
                strides: vec![],
                out_slot: None,
                _p: std::marker::PhantomData,
            },
        }
    }

    /// The handle of scalar parameter `i`.
    pub fn scalar<E: ElementType>(&self, i: usize) -> Scalar<E> {
        match self.handles.get(i) {
            Some(Handle::Scalar(v)) => Scalar::from_value(*v),
            _ => Scalar::from_value(ValueId(u32::MAX)),
        }
    }

    /// Close the trace and return the module (after a structural verification).
    pub fn finish(mut self) -> Result<Module, SpecializeError> {
        let _ = &self.decls;
        let guard = self.guard.take().ok_or_else(|| SpecializeError::Setup {
            kernel: self.info.name.to_string(),
            message: "finish called twice".into(),
        })?;
        let (func, debug, externs): (Function, _, _) =
            trace::finish(guard).map_err(SpecializeError::Trace)?;
        let mut module = Module::new();
        module.functions.push(func);
        module.functions.extend(externs);
        module.debug_attrs = debug;
        // A structural check here turns a DSL bug into a clear error instead of an opaque tileiras one.
        cutile_ir::verify::verify_module(&module, cutile_ir::V13_5).map_err(|e| {
            SpecializeError::Verify {
                kernel: self.info.name.to_string(),
                message: e.to_string(),
            }
        })?;
        Ok(module)
    }
}

fn emit_prologue(
    t: &mut trace::Tracer,
    decls: &[ParamDecl],
    params: &[ValueId],
    metas: &[&TensorMeta],
    index_ty: ScalarType,
) -> Vec<Handle> {
    // Parameter positions of each declaration.
    let mut pos = vec![];
    let mut p = 0usize;
    for d in decls {
        pos.push(p);
        p += match d {
            ParamDecl::Tensor { dims, .. } => 1 + 2 * dims.len(),
            ParamDecl::Scalar { .. } => 1,
        };
    }
    // Pointer alignment assumptions first (as cuTile orders them), then each tensor's extents and view.
    let mut bases = vec![None; decls.len()];
    let mut mi = 0;
    for (i, d) in decls.iter().enumerate() {
        if let ParamDecl::Tensor { elem, .. } = d {
            let m = metas[mi];
            mi += 1;
            let f = LayoutFacts::of(m);
            let ptr = params[pos[i]];
            let v = if f.base_div > 1 {
                assume(t, ptr, Type::pointer_tile(*elem, &[]), div_by(f.base_div))
            } else {
                ptr
            };
            bases[i] = Some(v);
        }
    }
    let mut handles = vec![];
    let mut mi = 0;
    let mut slot = 0;
    for (i, d) in decls.iter().enumerate() {
        match d {
            ParamDecl::Scalar { .. } => handles.push(Handle::Scalar(params[pos[i]])),
            ParamDecl::Tensor {
                elem,
                dims,
                mutable,
            } => {
                let m = metas[mi];
                mi += 1;
                let f = LayoutFacts::of(m);
                let rank = dims.len();
                let ity = Type::scalar_tile(index_ty);
                let mut dim_vals = vec![];
                let mut dyn_shape = vec![];
                let mut shape_ty = vec![];
                for a in 0..rank {
                    let raw = params[pos[i] + 1 + a];
                    let mut v = assume(t, raw, ity.clone(), bounded_nonneg());
                    if f.shape_div[a] > 1 {
                        v = assume(t, v, ity.clone(), div_by(f.shape_div[a]));
                    }
                    dim_vals.push(v);
                    let static_dim = !*mutable && dims[a] != crate::core::DYN;
                    if static_dim {
                        shape_ty.push(dims[a] as i64);
                    } else {
                        shape_ty.push(cutile_ir::DYNAMIC);
                        dyn_shape.push(v);
                    }
                }
                let mut dyn_strides = vec![];
                let mut stride_ty = vec![];
                let mut stride_vals = vec![];
                for a in 0..rank {
                    match f.stride_div[a] {
                        None => {
                            stride_ty.push(1);
                            stride_vals.push(None);
                        }
                        Some(div) => {
                            let raw = params[pos[i] + 1 + rank + a];
                            let mut v = raw;
                            if f.strides_nonneg {
                                v = assume(t, v, ity.clone(), bounded_nonneg());
                            }
                            if div > 1 {
                                v = assume(t, v, ity.clone(), div_by(div));
                            }
                            stride_ty.push(cutile_ir::DYNAMIC);
                            dyn_strides.push(v);
                            stride_vals.push(Some(v));
                        }
                    }
                }
                let view_ty = Type::tensor_view(*elem, &shape_ty, &stride_ty);
                let base = bases[i].unwrap_or(params[pos[i]]);
                let view = t.push1(
                    Op::new(Opcode::MakeTensorView)
                        .operand("base", base)
                        .operands("dynamicShape", &dyn_shape)
                        .operands("dynamicStrides", &dyn_strides)
                        .result(view_ty.clone()),
                );
                let s = if *mutable {
                    t.out_tokens.push(t.entry_token);
                    slot += 1;
                    Some(slot - 1)
                } else {
                    None
                };
                handles.push(Handle::Tensor {
                    view,
                    view_ty,
                    dims: dim_vals,
                    base,
                    strides: stride_vals,
                    slot: s,
                });
            }
        }
    }
    handles
}

fn div_by(d: u64) -> Attribute {
    Attribute::DivBy {
        divisor: d,
        every: None,
        along: None,
    }
}

fn bounded_nonneg() -> Attribute {
    Attribute::Bounded {
        lb: Some(0),
        ub: None,
    }
}

fn assume(t: &mut trace::Tracer, v: ValueId, ty: Type, pred: Attribute) -> ValueId {
    t.push1(
        Op::new(Opcode::Assume)
            .attr("predicate", OpAttr::Tagged(pred))
            .operand("value", v)
            .result(ty),
    )
}
