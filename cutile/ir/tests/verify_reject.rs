//! The verifier rejects ill-formed modules with a diagnostic naming the function, the op and the problem.
//! Each case starts from a valid module (made with the builder) and breaks one thing.

mod builder_support;

use cutile_ir::builder::*;
use cutile_ir::bytecode::write_module;
use cutile_ir::verify::{Diagnostic, diagnose_module, diagnose_module_strict, verify_module};
use cutile_ir::*;

use ScalarType::*;

fn find<'a>(b: &'a mut Block, code: Opcode, nth: &mut usize) -> Option<&'a mut Operation> {
    for op in b.ops.iter_mut() {
        if op.opcode == code {
            if *nth == 0 {
                return Some(op);
            }
            *nth -= 1;
        }
        for r in op.regions.iter_mut() {
            if let Some(x) = find(r, code, nth) {
                return Some(x);
            }
        }
    }
    None
}

/// The `nth` op (pre-order) of kind `code` in the first function.
fn op_mut(m: &mut Module, code: Opcode, nth: usize) -> &mut Operation {
    let mut n = nth;
    let body = m.functions[0].body.as_mut().expect("body");
    find(body, code, &mut n).unwrap_or_else(|| panic!("no {code:?} #{nth}"))
}

fn body_mut(m: &mut Module) -> &mut Block {
    m.functions[0].body.as_mut().expect("body")
}

fn set_type(m: &mut Module, v: ValueId, t: Type) {
    m.functions[0].values[v.0 as usize] = t;
}

/// `entry @k(%p: tile<ptr<f32>>)` with a few arithmetic ops on tile<4xf32> and a cmpf.
fn arith() -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m
        .entry("k", &[Type::pointer_tile(F32, &[])])
        .expect("entry");
    let a = f.constant(F32, &[4], 1.0).expect("c");
    let b = f.constant(F32, &[4], 2.0).expect("c");
    let s = f.addf(a, b).expect("addf");
    f.cmpf(ComparisonPredicate::LessThan, s, a).expect("cmpf");
    f.finish().expect("finish");
    m.finish()
}

fn with_if() -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", &[]).expect("entry");
    let c = f.const_bool(true).expect("c");
    f.const_i32(7).expect("c");
    f.if_then_else(
        c,
        &[Type::scalar_tile(F32)],
        |b| Ok(vec![b.const_f32(1.0)?]),
        |b| Ok(vec![b.const_f32(2.0)?]),
    )
    .expect("if");
    f.finish().expect("finish");
    m.finish()
}

fn with_mma() -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", &[]).expect("entry");
    let a = f.constant(F16, &[16, 32], 1.0).expect("c");
    let b = f.constant(F16, &[32, 16], 1.0).expect("c");
    let c = f.constant(F32, &[16, 16], 0.0).expect("c");
    f.mmaf(a, b, c).expect("mmaf");
    f.finish().expect("finish");
    m.finish()
}

fn with_insert() -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", &[]).expect("entry");
    let big = f.constant(F32, &[8, 8], 0.0).expect("c");
    let small = f.constant(F32, &[4, 8], 1.0).expect("c");
    let i = f.const_i32(1).expect("c");
    let z = f.const_i32(0).expect("c");
    f.insert(big, small, &[i, z]).expect("insert");
    f.finish().expect("finish");
    m.finish()
}

fn with_global() -> Module {
    let mut m = ModuleBuilder::new();
    m.global("g", F32, &[Const::Float(1.0); 4], 16)
        .expect("global");
    let mut f = m.entry("k", &[]).expect("entry");
    f.get_global("g").expect("get_global");
    f.finish().expect("finish");
    m.finish()
}

fn with_extern() -> Module {
    let mut m = ModuleBuilder::new();
    let t = Type::tile(F32, &[4]);
    m.extern_decl(
        "ext",
        &[(t.clone(), Access::InOut)],
        std::slice::from_ref(&t),
        &[],
    )
    .expect("decl");
    let mut f = m.entry("k", &[]).expect("entry");
    let z = f.constant(F32, &[4], 0.0).expect("c");
    f.preview_call("ext", vec![], &[z]).expect("call");
    f.finish().expect("finish");
    m.finish()
}

fn with_multimem() -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", &[multicast_pointer_tile(F32)]).expect("entry");
    let p = f.param(0).expect("param");
    let tv = f
        .make_tensor_view(p, &[Dim::Static(64)], &[Dim::Static(1)])
        .expect("tv");
    let pv = f.make_partition_view(tv, &[16], None).expect("pv");
    let i = f.const_i32(0).expect("c");
    let t = f.constant(F32, &[16], 1.0).expect("c");
    let o = MemOpts {
        ordering: MemoryOrdering::Relaxed,
        scope: Some(MemoryScope::Device),
        ..Default::default()
    };
    f.multimem_store_view_tko(pv, t, &[i], &o).expect("store");
    f.finish().expect("finish");
    m.finish()
}

/// Replace every pointer attribute in `t` by `to`.
fn retag(t: &mut Type, to: Option<u8>) {
    match t {
        Type::Pointer { attr, .. } | Type::TensorView { attr, .. } => *attr = to,
        _ => {}
    }
    match t {
        Type::Pointer { pointee: x, .. }
        | Type::Tile { elem: x, .. }
        | Type::PartitionView { tensor_view: x, .. } => retag(x, to),
        _ => {}
    }
}

fn vadd() -> Module {
    samples::vector_add(1024, F32).expect("vadd")
}
fn softmax() -> Module {
    samples::row_softmax(1024, F32).expect("softmax")
}
fn matmul() -> Module {
    samples::tiled_matmul(128, 128, 64, F16, F32).expect("matmul")
}

fn en(e: impl Into<EnumValue>) -> Option<OpAttr> {
    Some(OpAttr::Enum(e.into()))
}

/// `entry @k(%p: tile<ptr<f32>>)` computing one op on constants (for attribute mutations).
fn one_op(body: fn(&mut FunctionBuilder<'_>) -> Result<(), BuildError>) -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m
        .entry(
            "k",
            &[Type::pointer_tile(F32, &[]), Type::pointer_tile(I32, &[])],
        )
        .expect("entry");
    body(&mut f).expect("body");
    f.finish().expect("finish");
    m.finish()
}

fn conv_f16() -> Module {
    one_op(|f| {
        let a = f.constant(F32, &[4], 1.0)?;
        f.ftof(a, F16).map(|_| ())
    })
}
fn conv_itof() -> Module {
    one_op(|f| {
        let a = f.constant(I32, &[4], 1)?;
        f.itof(a, F32, Signedness::Signed).map(|_| ())
    })
}
fn divi_u() -> Module {
    one_op(|f| {
        let a = f.constant(I32, &[4], 7)?;
        f.divi(a, a, Signedness::Unsigned).map(|_| ())
    })
}
fn negi() -> Module {
    one_op(|f| {
        let a = f.constant(I32, &[4], 7)?;
        f.negi(a).map(|_| ())
    })
}
fn red_view() -> Module {
    one_op(|f| {
        let p = f.param(0)?;
        let tv = f.make_tensor_view(p, &[Dim::Static(64)], &[Dim::Static(1)])?;
        let pv = f.make_partition_view(tv, &[16], None)?;
        let i = f.const_i32(0)?;
        let v = f.constant(F32, &[16], 1.0)?;
        f.atomic_red_view_tko(pv, &[i], v, AtomicRmwMode::AddF, AtomicOpts::default())
            .map(|_| ())
    })
}
fn rmw() -> Module {
    one_op(|f| {
        let p = f.param(1)?;
        let one = f.const_i32(1)?;
        f.atomic_rmw_tko(p, one, AtomicRmwMode::Add, None, AtomicOpts::default())
            .map(|_| ())
    })
}
fn misc() -> Module {
    one_op(|f| {
        let a = f.constant(I32, &[4], 1)?;
        f.exti(a, I64, Signedness::Signed)?;
        let (t1, t2) = (f.make_token()?, f.make_token()?);
        f.join_tokens(&[t1, t2])?;
        f.alloca(F32, 4, 16, false)?;
        let x = f.const_i32(3)?;
        f.print_tko("%d", &[x], None)?;
        f.iota(I8, 128)?;
        let m = f.constant(F32, &[4, 4], 1.0)?;
        f.permute(m, &[1, 0])?;
        Ok(())
    })
}
fn reduce_sum() -> Module {
    one_op(|f| {
        let t = f.constant(F32, &[8], 1.0)?;
        let id = scalar_attr(F32, 0.0)?;
        f.reduce(&[t], 0, &[id], |b, l, r| Ok(vec![b.addf(l[0], r[0])?]))
            .map(|_| ())
    })
}

/// Insert `op` at the start of the (first) reduce body.
fn into_reduce(m: &mut Module, op: Operation) {
    op_mut(m, Opcode::Reduce, 0).regions[0].ops.insert(0, op);
}

fn hints(m: &mut Module) -> &mut OptimizationHints {
    match &mut m.functions[0].kind {
        FunctionKind::Entry { hints } => hints,
        _ => panic!("not an entry"),
    }
}

struct Case {
    name: &'static str,
    base: fn() -> Module,
    version: Version,
    break_it: fn(&mut Module),
    /// The function and op the diagnostic must name (`""` / None for module-level problems).
    function: &'static str,
    op: Option<&'static str>,
    fragment: &'static str,
}

const V: Version = V13_5;

/// Cases only [`diagnose_module_strict`] reports (tileiras warns about bad hints but accepts them).
const STRICT: &[&str] = &["unknown hint", "16 warps before 13.5"];

#[rustfmt::skip]
fn cases() -> Vec<Case> {
    vec![
        Case { name: "result type differs from operands", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "operand and result types differ: tile<4xf32> vs tile<8xf32>",
            break_it: |m| { let r = op_mut(m, Opcode::AddF, 0).results[0]; set_type(m, r, Type::tile(F32, &[8])); } },
        Case { name: "cmpf result not i1", base: arith, version: V, function: "k", op: Some("cmpf"),
            fragment: "result must be tile<4xi1> (i1 of the operand shape), got tile<4xf32>",
            break_it: |m| { let r = op_mut(m, Opcode::CmpF, 0).results[0]; set_type(m, r, Type::tile(F32, &[4])); } },
        Case { name: "missing return", base: arith, version: V, function: "k", op: None,
            fragment: "the body must end with return, but ends with cmpf",
            break_it: |m| { body_mut(m).ops.pop(); } },
        Case { name: "use before definition", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "is not in scope here (used before its definition)",
            break_it: |m| { body_mut(m).ops.swap(1, 2); } },
        Case { name: "unknown value", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "operand %9999 does not exist in this function",
            break_it: |m| { op_mut(m, Opcode::AddF, 0).operands[0] = vec![ValueId(9999)]; } },
        Case { name: "value defined twice", base: arith, version: V, function: "k", op: Some("constant"),
            fragment: "is defined twice",
            break_it: |m| { let r = body_mut(m).ops[0].results.clone(); body_mut(m).ops[1].results = r; } },
        Case { name: "entry parameter not rank 0", base: arith, version: V, function: "k", op: None,
            fragment: "entry parameter 0 must be a rank-0 tile (a scalar or a pointer), got tile<4xptr<f32>>",
            break_it: |m| { let t = Type::pointer_tile(F32, &[4]); m.functions[0].param_types[0] = t.clone(); m.functions[0].values[0] = t; } },
        Case { name: "private entry", base: arith, version: V, function: "k", op: None,
            fragment: "an entry must be public", break_it: |m| m.functions[0].private = true },
        Case { name: "entry with results", base: arith, version: V, function: "k", op: None,
            fragment: "an entry returns nothing, but the signature returns (tile<i32>)",
            break_it: |m| m.functions[0].result_types = vec![Type::scalar_tile(I32)] },
        Case { name: "attribute of the wrong kind", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "attribute `rounding_mode` must be a RoundingMode enum value",
            break_it: |m| op_mut(m, Opcode::AddF, 0).attrs[0] = Some(OpAttr::Int(0)) },
        Case { name: "enum value out of range", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "attribute `rounding_mode` must be a RoundingMode enum value",
            break_it: |m| op_mut(m, Opcode::AddF, 0).attrs[0] = Some(OpAttr::Enum(EnumValue { kind: EnumKind::RoundingMode, value: 9 })) },
        Case { name: "required attribute missing", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "required attribute `rounding_mode` is not set",
            break_it: |m| op_mut(m, Opcode::AddF, 0).attrs[0] = None },
        Case { name: "rounding not allowed", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "rounding mode approx is not allowed here; expected one of [nearest_even, zero, negative_inf, positive_inf]",
            break_it: |m| op_mut(m, Opcode::AddF, 0).attrs[0] = Some(OpAttr::Enum(RoundingMode::Approx.into())) },
        Case { name: "operand group arity", base: arith, version: V, function: "k", op: Some("addf"),
            fragment: "operand `lhs` takes exactly one value, got 2",
            break_it: |m| { let v = op_mut(m, Opcode::AddF, 0).operands[0][0]; op_mut(m, Opcode::AddF, 0).operands[0].push(v); } },
        Case { name: "terminator not last", base: arith, version: V, function: "k", op: Some("return"),
            fragment: "a terminator must be the last op of its block",
            break_it: |m| body_mut(m).ops.insert(0, Operation::new(Opcode::Return)) },
        Case { name: "for without region", base: matmul, version: V, function: "tiled_matmul", op: Some("for"),
            fragment: "has 0 regions, needs 1", break_it: |m| op_mut(m, Opcode::For, 0).regions.clear() },
        Case { name: "continue type mismatch", base: matmul, version: V, function: "tiled_matmul", op: Some("continue"),
            fragment: "operand types (tile<128x64xf16>) must match the for's result types (tile<128x128xf32>)",
            break_it: |m| { let v = op_mut(m, Opcode::LoadViewTko, 0).results[0]; op_mut(m, Opcode::Continue, 0).operands[0] = vec![v]; } },
        Case { name: "break in a for", base: matmul, version: V, function: "tiled_matmul", op: Some("break"),
            fragment: "must be nested (through ifs only) in a loop, found in for",
            break_it: |m| op_mut(m, Opcode::Continue, 0).opcode = Opcode::Break },
        Case { name: "induction variable used after the loop", base: matmul, version: V, function: "tiled_matmul", op: Some("store_view_tko"),
            fragment: "is not in scope here (defined in a region that has ended)",
            break_it: |m| { let iv = op_mut(m, Opcode::For, 0).regions[0].args[0]; op_mut(m, Opcode::StoreViewTko, 0).operands[2][0] = iv; } },
        Case { name: "mmaf K mismatch", base: with_mma, version: V, function: "k", op: Some("mmaf"),
            fragment: "shapes do not form M×K · K×N + M×N: tile<16x32xf16> · tile<16x16xf16> + tile<16x16xf32>",
            break_it: |m| { let b = body_mut(m).ops[1].results[0]; set_type(m, b, Type::tile(F16, &[16, 16])); } },
        Case { name: "load tile differs from the view tile", base: vadd, version: V, function: "vector_add", op: Some("load_view_tko"),
            fragment: "the result tile must be tile<1024xf32> (the view's tile), got tile<512xf32>",
            break_it: |m| { let r = op_mut(m, Opcode::LoadViewTko, 0).results[0]; set_type(m, r, Type::tile(F32, &[512])); } },
        Case { name: "acquire load without scope", base: vadd, version: V, function: "vector_add", op: Some("load_view_tko"),
            fragment: "a acquire access needs a memory scope",
            break_it: |m| op_mut(m, Opcode::LoadViewTko, 0).attrs[0] = Some(OpAttr::Enum(MemoryOrdering::Acquire.into())) },
        Case { name: "assume with a bad divisor", base: vadd, version: V, function: "vector_add", op: Some("assume"),
            fragment: "div_by<12>: divisor must be a power of two",
            break_it: |m| op_mut(m, Opcode::Assume, 0).attrs[0] = Some(OpAttr::Tagged(Attribute::DivBy { divisor: 12, every: None, along: None })) },
        Case { name: "impure op in a reduce body", base: softmax, version: V, function: "row_softmax", op: Some("reduce"),
            fragment: "only ops without memory effects may appear in the body, found print_tko",
            break_it: |m| {
                let tok = { let f = &mut m.functions[0]; f.new_value(Type::Token) };
                let mut p = Operation::new(Opcode::PrintTko);
                p.attrs[0] = Some(OpAttr::Str("x".into()));
                p.results = vec![tok];
                op_mut(m, Opcode::Reduce, 0).regions[0].ops.insert(0, p);
            } },
        Case { name: "yield type mismatch", base: with_if, version: V, function: "k", op: Some("yield"),
            fragment: "operand types (tile<i32>) must match the if's result types (tile<f32>)",
            break_it: |m| { let i = body_mut(m).ops[1].results[0]; op_mut(m, Opcode::Yield, 0).operands[0] = vec![i]; } },
        Case { name: "unknown hint", base: arith, version: V, function: "k", op: None,
            fragment: "unknown optimization hint `sm_90.foo`",
            break_it: |m| hints(m).set_i32("sm_90", "foo", 1) },
        Case { name: "16 warps before 13.5", base: arith, version: V13_4, function: "k", op: None,
            fragment: "hint `default.num_worker_warps_per_cta` = 16 is out of range",
            break_it: |m| hints(m).set_i32("default", "num_worker_warps_per_cta", 16) },
        Case { name: "duplicate function", base: arith, version: V, function: "", op: None,
            fragment: "function name @k is defined twice",
            break_it: |m| { let f = m.functions[0].clone(); m.functions.push(f); } },
        Case { name: "global of 3 elements", base: with_global, version: V, function: "", op: None,
            fragment: "global @g: tile dimensions must be positive powers of two, got [3]",
            break_it: |m| { m.globals[0].ty = Type::tile(F32, &[3]); m.globals[0].value.truncate(12); } },
        Case { name: "get_global without the global", base: with_global, version: V, function: "k", op: Some("get_global"),
            fragment: "no global named @g in the module", break_it: |m| m.globals.clear() },
        Case { name: "global op in a body", base: arith, version: V, function: "k", op: Some("global"),
            fragment: "globals belong in Module::globals",
            break_it: |m| {
                let mut g = Operation::new(Opcode::Global);
                g.attrs[0] = Some(OpAttr::Str("g".into()));
                g.attrs[1] = Some(OpAttr::Dense(vec![0; 4]));
                g.attrs[2] = Some(OpAttr::Int(4));
                g.attrs[3] = Some(OpAttr::Enum(SymbolVisibility::Public.into()));
                body_mut(m).ops.insert(0, g);
            } },
        Case { name: "op newer than the version", base: with_insert, version: V13_3, function: "k", op: Some("insert"),
            fragment: "needs bytecode 13.4 or newer, not 13.3", break_it: |_| {} },
        Case { name: "type newer than the version", base: arith, version: V13_2, function: "k", op: Some("constant"),
            fragment: "type tile<4xf4E2M1FN> needs bytecode 13.3 or newer, not 13.2",
            break_it: |m| {
                let r = body_mut(m).ops[0].results[0];
                set_type(m, r, Type::tile(F4E2M1FN, &[4]));
                body_mut(m).ops.truncate(2);
                body_mut(m).ops.push(Operation::new(Opcode::Return));
            } },
        Case { name: "tensor view drops the pointer attribute", base: with_multimem, version: V, function: "k", op: Some("make_tensor_view"),
            fragment: "the tensor_view must carry the base pointer's ptr_attr (multicast), got absent",
            break_it: |m| { let r = op_mut(m, Opcode::MakeTensorView, 0).results[0]; retag(&mut m.functions[0].values[r.0 as usize], None); } },
        Case { name: "multimem over a unicast pointer", base: with_multimem, version: V, function: "k", op: Some("multimem_store_view_tko"),
            fragment: "needs a view over a multicast pointer",
            break_it: |m| {
                let f = &mut m.functions[0];
                for t in f.values.iter_mut().chain(f.param_types.iter_mut()) { retag(t, Some(PTR_UNICAST)); }
            } },
        Case { name: "unknown pointer attribute", base: with_multimem, version: V, function: "k", op: None,
            fragment: "pointer attribute 3 is unknown",
            break_it: |m| retag(&mut m.functions[0].param_types[0], Some(3)) },
        Case { name: "ftof rounding negative_inf", base: conv_f16, version: V, function: "k", op: Some("ftof"),
            fragment: "rounding mode negative_inf is not allowed here; expected one of [nearest_even, zero]",
            break_it: |m| op_mut(m, Opcode::FToF, 0).attrs[0] = en(RoundingMode::NegativeInf) },
        Case { name: "itof rounding zero", base: conv_itof, version: V, function: "k", op: Some("itof"),
            fragment: "rounding mode zero is not allowed here; expected one of [nearest_even]",
            break_it: |m| op_mut(m, Opcode::IToF, 0).attrs[1] = en(RoundingMode::Zero) },
        Case { name: "unsigned division rounding to -inf", base: divi_u, version: V, function: "k", op: Some("divi"),
            fragment: "rounding negative_inf is not allowed with unsigned division",
            break_it: |m| op_mut(m, Opcode::DivI, 0).attrs[1] = en(RoundingMode::NegativeInf) },
        Case { name: "negi nuw", base: negi, version: V, function: "k", op: Some("negi"),
            fragment: "overflow flag nuw is not supported",
            break_it: |m| op_mut(m, Opcode::NegI, 0).attrs[0] = en(IntegerOverflow::Nuw) },
        Case { name: "atomic reduction at sys scope", base: red_view, version: V, function: "k", op: Some("atomic_red_view_tko"),
            fragment: "memory scope sys is not supported",
            break_it: |m| op_mut(m, Opcode::AtomicRedViewTko, 0).attrs[1] = en(MemoryScope::Sys) },
        Case { name: "atomic reduction with xchg", base: red_view, version: V, function: "k", op: Some("atomic_red_view_tko"),
            fragment: "mode xchg is not supported",
            break_it: |m| op_mut(m, Opcode::AtomicRedViewTko, 0).attrs[2] = en(AtomicRmwMode::Xchg) },
        Case { name: "weak atomic", base: rmw, version: V, function: "k", op: Some("atomic_rmw_tko"),
            fragment: "atomics need relaxed, acquire, release or acq_rel ordering, not weak",
            break_it: |m| op_mut(m, Opcode::AtomicRMWTko, 0).attrs[0] = en(MemoryOrdering::Weak) },
        Case { name: "addf atomic on integers", base: rmw, version: V, function: "k", op: Some("atomic_rmw_tko"),
            fragment: "mode addf works only with f16, bf16, f32 and f64, got i32",
            break_it: |m| op_mut(m, Opcode::AtomicRMWTko, 0).attrs[2] = en(AtomicRmwMode::AddF) },
        Case { name: "load with release ordering", base: vadd, version: V, function: "vector_add", op: Some("load_view_tko"),
            fragment: "memory ordering release is not allowed for a load",
            break_it: |m| { let o = op_mut(m, Opcode::LoadViewTko, 0); o.attrs[0] = en(MemoryOrdering::Release); o.attrs[1] = en(MemoryScope::Device); } },
        Case { name: "exti to the same width", base: misc, version: V, function: "k", op: Some("exti"),
            fragment: "must extend to a wider integer, got i32 -> i32",
            break_it: |m| { let r = op_mut(m, Opcode::ExtI, 0).results[0]; set_type(m, r, Type::tile(I32, &[4])); } },
        Case { name: "join of one token", base: misc, version: V, function: "k", op: Some("join_tokens"),
            fragment: "needs two or more tokens, got 1",
            break_it: |m| { op_mut(m, Opcode::JoinTokens, 0).operands[0].pop(); } },
        Case { name: "alloca under-aligned", base: misc, version: V, function: "k", op: Some("alloca"),
            fragment: "alignment 2 is below the size of f32",
            break_it: |m| op_mut(m, Opcode::Alloca, 0).attrs[1] = Some(OpAttr::Int(2)) },
        Case { name: "print argument count", base: misc, version: V, function: "k", op: Some("print_tko"),
            fragment: "format string \"%d %d\" takes 2 argument(s), got 1",
            break_it: |m| op_mut(m, Opcode::PrintTko, 0).attrs[0] = Some(OpAttr::Str("%d %d".into())) },
        Case { name: "iota overflowing its element type", base: misc, version: V, function: "k", op: Some("iota"),
            fragment: "512 elements do not fit in i8",
            break_it: |m| { let r = op_mut(m, Opcode::Iota, 0).results[0]; set_type(m, r, Type::tile(I8, &[512])); } },
        Case { name: "permute with a wrong result shape", base: misc, version: V, function: "k", op: Some("permute"),
            fragment: "result shape [4, 8] does not match the permuted source shape [4, 4]",
            break_it: |m| { let r = op_mut(m, Opcode::Permute, 0).results[0]; set_type(m, r, Type::tile(F32, &[4, 8])); } },
        Case { name: "assume in a reduce body", base: reduce_sum, version: V, function: "k", op: Some("reduce"),
            fragment: "only ops without memory effects may appear in the body, found assume",
            break_it: |m| {
                let v = m.functions[0].new_value(Type::pointer_tile(F32, &[]));
                let mut a = Operation::new(Opcode::Assume);
                a.attrs[0] = Some(OpAttr::Tagged(Attribute::DivBy { divisor: 16, every: None, along: None }));
                a.operands[0] = vec![ValueId(0)];
                a.results = vec![v];
                into_reduce(m, a);
            } },
        Case { name: "for in a reduce body", base: reduce_sum, version: V, function: "k", op: Some("reduce"),
            fragment: "only ops without memory effects may appear in the body, found for",
            break_it: |m| {
                let c = body_mut(m).ops[0].results[0];
                let _ = c;
                let (lo, iv) = (m.functions[0].new_value(Type::scalar_tile(I32)), m.functions[0].new_value(Type::scalar_tile(I32)));
                let mut k = Operation::new(Opcode::Constant);
                k.attrs[0] = Some(OpAttr::Dense(vec![0; 4]));
                k.results = vec![lo];
                let mut l = Operation::new(Opcode::For);
                l.operands = vec![vec![lo], vec![lo], vec![lo], vec![]];
                l.regions = vec![Block { args: vec![iv], ops: vec![Operation::new(Opcode::Continue)] }];
                into_reduce(m, l);
                into_reduce(m, k);
            } },
        Case { name: "entry parameter attribute", base: arith, version: V, function: "k", op: None,
            fragment: "entry parameter 0 carries an attribute",
            break_it: |m| m.functions[0].arg_attrs = vec![Attribute::Dictionary(vec![("foo".into(), Attribute::Bool(true))])] },
        Case { name: "token entry parameter", base: arith, version: V, function: "k", op: None,
            fragment: "entry parameter 1 must be a rank-0 tile (a scalar or a pointer), got token",
            break_it: |m| {
                m.functions[0].param_types.push(Type::Token);
                let t = m.functions[0].new_value(Type::Token);
                body_mut(m).args.push(t);
            } },
        Case { name: "preview content before 13.5", base: with_extern, version: V13_4, function: "", op: None,
            fragment: "needs bytecode 13.5, not 13.4", break_it: |_| {} },
        Case { name: "public extern declaration", base: with_extern, version: V, function: "ext", op: None,
            fragment: "an extern declaration must be private", break_it: |m| m.functions[0].private = false },
        Case { name: "extern parameter without access", base: with_extern, version: V, function: "ext", op: None,
            fragment: "extern parameter 0 needs a `cuda_tile.preview$access` attribute",
            break_it: |m| m.functions[0].arg_attrs = vec![Attribute::Dictionary(vec![])] },
        Case { name: "call with the wrong argument types", base: with_extern, version: V, function: "k", op: Some("preview$call"),
            fragment: "argument types (tile<f32>) do not match @ext's parameters (tile<4xf32>)",
            break_it: |m| {
                let v = { let f = &mut m.functions[1]; f.new_value(Type::scalar_tile(F32)) };
                let body = m.functions[1].body.as_mut().expect("body");
                let mut c = Operation::new(Opcode::Constant);
                c.attrs[0] = Some(OpAttr::Dense(vec![0; 4]));
                c.results = vec![v];
                body.ops.insert(0, c);
                let mut n = 0;
                find(body, Opcode::PreviewCall, &mut n).expect("call").operands[0] = vec![v];
            } },
    ]
}

/// Every rejection that can be written as bytecode must be a rejection of tileirdisasm too, so the verifier
/// is not stricter than NVIDIA's own verifier. Cases the writer refuses (dangling values, malformed layouts)
/// or versions it does not write are skipped.
#[test]
fn tileirdisasm_rejects_what_the_verifier_rejects() {
    let Some(tool) = builder_support::tileirdisasm() else {
        builder_support::skip(
            "tileirdisasm_rejects_what_the_verifier_rejects",
            "tileirdisasm",
        );
        return;
    };
    let (mut checked, mut accepted) = (0, Vec::new());
    for c in cases() {
        if STRICT.contains(&c.name) || !c.version.is_writable() {
            continue;
        }
        let mut m = (c.base)();
        (c.break_it)(&mut m);
        let Ok(bytes) = write_module(&m, c.version) else {
            continue;
        };
        checked += 1;
        let run = builder_support::disasm(&tool, &bytes, m.needs_preview(), "reject");
        if run.ok {
            accepted.push(c.name);
        }
    }
    assert!(checked >= 30, "only {checked} cases could be written");
    assert!(
        accepted.is_empty(),
        "tileirdisasm accepts what the verifier rejects: {accepted:?}"
    );
}

fn describe(ds: &[Diagnostic]) -> String {
    ds.iter().map(|d| format!("\n  {d}")).collect()
}

#[test]
fn the_bases_are_valid() {
    for base in [
        arith,
        with_if,
        with_mma,
        with_insert,
        with_global,
        vadd,
        softmax,
        matmul,
    ] {
        verify_module(&base(), V13_4).expect("valid at 13.4");
        verify_module(&base(), V13_5).expect("valid at 13.5");
    }
    verify_module(&with_extern(), V13_5).expect("valid at 13.5");
    verify_module(&with_multimem(), V13_5).expect("valid at 13.5");
}

#[test]
fn ill_formed_modules_are_rejected_with_a_precise_message() {
    let mut failures = Vec::new();
    for c in cases() {
        let mut m = (c.base)();
        (c.break_it)(&mut m);
        let strict = STRICT.contains(&c.name);
        let ds = if strict {
            diagnose_module_strict(&m, c.version)
        } else {
            diagnose_module(&m, c.version)
        };
        let hit = ds
            .iter()
            .any(|d| d.function == c.function && d.op == c.op && d.message.contains(c.fragment));
        if !hit {
            failures.push(format!(
                "case `{}`: wanted @{} {:?} `{}`, got:{}",
                c.name,
                c.function,
                c.op,
                c.fragment,
                describe(&ds)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn verify_error_display_names_function_op_and_location() {
    let mut m = arith();
    let r = op_mut(&mut m, Opcode::AddF, 0).results[0];
    set_type(&mut m, r, Type::tile(F32, &[8]));
    let e = verify_module(&m, V13_5).expect_err("invalid");
    let text = e.to_string();
    assert!(
        text.contains("not valid Tile IR for bytecode 13.5"),
        "{text}"
    );
    assert!(
        text.contains("@k: addf (at body[2]): operand and result types differ"),
        "{text}"
    );
}
