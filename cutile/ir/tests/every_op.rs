//! One well-typed use of every body op of the schema: built with the builder, accepted by the verifier,
//! written at 13.5, read back unchanged, and accepted by tileirdisasm (`--preview=simt` for preview content).
//!
//! `Opcode` is `#[non_exhaustive]`, so `use_of` needs a wildcard arm; the coverage test therefore walks
//! `Opcode::all_body_ops()` and fails for any op without a case, or whose case does not emit it.

mod builder_support;

use cutile_ir::builder::*;
use cutile_ir::bytecode::{read_module, write_module};
use cutile_ir::print::print_module;
use cutile_ir::verify::verify_module;
use cutile_ir::*;

use ScalarType::*;

type R = Result<(), BuildError>;
type Body = fn(&mut FunctionBuilder<'_>) -> R;
type Setup = fn(&mut ModuleBuilder) -> R;

/// How one op is exercised: optional module-level setup, then the body of `entry @k` with the parameters
/// `(tile<ptr<f32>>, tile<ptr<i32>>, tile<i32>, tile<ptr<f32, <multicast>>>)`.
struct Case {
    setup: Option<Setup>,
    body: Body,
}

fn case(body: Body) -> Option<Case> {
    Some(Case { setup: None, body })
}

// ---- helpers ----

fn c32(f: &mut FunctionBuilder<'_>, shape: &[i64], v: f64) -> Result<ValueId, BuildError> {
    f.constant(F32, shape, v)
}
fn ci32(f: &mut FunctionBuilder<'_>, shape: &[i64], v: i64) -> Result<ValueId, BuildError> {
    f.constant(I32, shape, v)
}
/// A 64×64 row-major tensor view over parameter `p`.
fn tview(f: &mut FunctionBuilder<'_>, p: usize) -> Result<ValueId, BuildError> {
    let base = f.param(p)?;
    f.make_tensor_view(
        base,
        &[Dim::Static(64), Dim::Static(64)],
        &[Dim::Static(64), Dim::Static(1)],
    )
}
/// 16×16 tiles of the f32 view (parameter 0).
fn pview(f: &mut FunctionBuilder<'_>) -> Result<ValueId, BuildError> {
    let tv = tview(f, 0)?;
    f.make_partition_view(tv, &[16, 16], None)
}
/// 16×16 tiles of the multicast f32 view (parameter 3), for the multimem ops.
fn mview(f: &mut FunctionBuilder<'_>) -> Result<ValueId, BuildError> {
    let tv = tview(f, 3)?;
    f.make_partition_view(tv, &[16, 16], None)
}
fn unary_f(f: &mut FunctionBuilder<'_>, op: Opcode) -> R {
    let a = c32(f, &[16], 0.5)?;
    f.unary_float(op, a, FloatOpts::default()).map(|_| ())
}
fn binary_f(f: &mut FunctionBuilder<'_>, op: Opcode) -> R {
    let a = c32(f, &[16], 0.5)?;
    let b = c32(f, &[16], 2.0)?;
    f.binary_float(op, a, b, FloatOpts::default()).map(|_| ())
}
fn int_op(f: &mut FunctionBuilder<'_>, op: Opcode, binary: bool) -> R {
    let a = ci32(f, &[16], 7)?;
    let b = ci32(f, &[16], 3)?;
    f.int_op(op, a, binary.then_some(b), IntOpts::default())
        .map(|_| ())
}
fn sum_f32(
    b: &mut FunctionBuilder<'_>,
    l: &[ValueId],
    r: &[ValueId],
) -> Result<Vec<ValueId>, BuildError> {
    Ok(vec![b.addf(l[0], r[0])?])
}

/// The case exercising `op`; `None` for the structural opcodes that never appear in a body.
fn use_of(op: Opcode) -> Option<Case> {
    use Opcode::*;
    match op {
        Module | Entry => None,
        AbsF | Ceil | Cos | CosH | Exp | Exp2 | Floor | Log | Log2 | NegF | Rsqrt | Sin | SinH
        | Sqrt | Tan | TanH => Some(Case {
            setup: None,
            body: UNARY[UNARY_OPS.iter().position(|o| *o == op)?],
        }),
        AddF | SubF | MulF | DivF | RemF | MaxF | MinF | FPowF | Atan2 => Some(Case {
            setup: None,
            body: BINARY[BINARY_OPS.iter().position(|o| *o == op)?],
        }),
        AbsI => case(|f| int_op(f, Opcode::AbsI, false)),
        NegI => case(|f| int_op(f, Opcode::NegI, false)),
        AddI | SubI | MulI | MulhiI | DivI | RemI | MaxI | MinI | AndI | OrI | XOrI | ShLI
        | ShRI => Some(Case {
            setup: None,
            body: INT[INT_OPS.iter().position(|o| *o == op)?],
        }),
        Fma => case(|f| {
            let a = c32(f, &[8, 8], 1.0)?;
            f.fma(a, a, a).map(|_| ())
        }),
        FPowI => case(|f| {
            let a = c32(f, &[16], 2.0)?;
            let e = ci32(f, &[16], 3)?;
            f.powi(a, e).map(|_| ())
        }),
        CmpF => case(|f| {
            let a = c32(f, &[16], 1.0)?;
            f.cmpf(ComparisonPredicate::LessThan, a, a).map(|_| ())
        }),
        CmpI => case(|f| {
            let a = ci32(f, &[16], 1)?;
            f.cmpi(ComparisonPredicate::GreaterThan, a, a, Signedness::Unsigned)
                .map(|_| ())
        }),
        Select => case(|f| {
            let c = f.constant(I1, &[16], true)?;
            let a = c32(f, &[16], 1.0)?;
            let b = c32(f, &[16], 2.0)?;
            f.select(c, a, b).map(|_| ())
        }),
        Constant => case(|f| {
            let vals: Vec<Const> = (0..8).map(|i| Const::Int(i * 3)).collect();
            f.constant_dense(I16, &[8], &vals).map(|_| ())
        }),
        Iota => case(|f| f.iota(I32, 128).map(|_| ())),
        Bitcast => case(|f| {
            let a = c32(f, &[16], 1.0)?;
            f.bitcast(a, I32).map(|_| ())
        }),
        ExtI => case(|f| {
            let a = f.constant(I8, &[16], -3)?;
            f.exti(a, I32, Signedness::Signed).map(|_| ())
        }),
        TruncI => case(|f| {
            let a = f.constant(I64, &[16], 300)?;
            f.trunci(a, I16).map(|_| ())
        }),
        FToF => case(|f| {
            let a = c32(f, &[16], 1.5)?;
            f.ftof(a, BF16).map(|_| ())
        }),
        FToI => case(|f| {
            let a = c32(f, &[16], 1.5)?;
            f.ftoi(a, I32, Signedness::Signed).map(|_| ())
        }),
        IToF => case(|f| {
            let a = ci32(f, &[16], 5)?;
            f.itof(a, F16, Signedness::Signed).map(|_| ())
        }),
        IntToPtr => case(|f| {
            let a = f.constant(I64, &[4], 4096)?;
            f.int_to_ptr(a, F32).map(|_| ())
        }),
        PtrToInt => case(|f| {
            let p = f.param(0)?;
            f.ptr_to_int(p).map(|_| ())
        }),
        PtrToPtr => case(|f| {
            let p = f.param(0)?;
            f.ptr_to_ptr(p, I32).map(|_| ())
        }),
        Broadcast => case(|f| {
            let a = c32(f, &[1, 16], 1.0)?;
            f.broadcast(a, &[8, 16]).map(|_| ())
        }),
        Reshape => case(|f| {
            let a = c32(f, &[4, 16], 1.0)?;
            f.reshape(a, &[64]).map(|_| ())
        }),
        Permute => case(|f| {
            let a = c32(f, &[4, 16], 1.0)?;
            f.permute(a, &[1, 0]).map(|_| ())
        }),
        Cat => case(|f| {
            let a = c32(f, &[4, 16], 1.0)?;
            let b = c32(f, &[4, 16], 2.0)?;
            f.cat(a, b, 0).map(|_| ())
        }),
        Extract => case(|f| {
            let a = c32(f, &[8, 16], 1.0)?;
            let (i, j) = (f.const_i32(1)?, f.const_i32(0)?);
            f.extract(a, &[i, j], &[4, 16]).map(|_| ())
        }),
        Insert => case(|f| {
            let big = c32(f, &[8, 16], 0.0)?;
            let small = c32(f, &[4, 16], 1.0)?;
            let (i, j) = (f.const_i32(1)?, f.const_i32(0)?);
            f.insert(big, small, &[i, j]).map(|_| ())
        }),
        Pack => case(|f| {
            let a = f.constant(F16, &[16], 1.0)?;
            f.pack(a).map(|_| ())
        }),
        Unpack => case(|f| {
            let a = f.constant(I8, &[32], 0)?;
            f.unpack(a, F16).map(|_| ())
        }),
        Offset => case(|f| {
            let p = f.param(0)?;
            let ps = f.broadcast_to(p, &[16])?;
            let off = f.iota(I32, 16)?;
            f.offset(ps, off).map(|_| ())
        }),
        Assume => case(|f| {
            let n = f.param(2)?;
            f.assume_bounded(n, Some(0), Some(1 << 20)).map(|_| ())
        }),
        MakeToken => case(|f| f.make_token().map(|_| ())),
        JoinTokens => case(|f| {
            let (a, b) = (f.make_token()?, f.make_token()?);
            f.join_tokens(&[a, b]).map(|_| ())
        }),
        MakeTensorView => case(|f| {
            let base = f.param(0)?;
            let n = f.param(2)?;
            f.make_tensor_view(
                base,
                &[Dim::Dynamic(n), Dim::Static(32)],
                &[Dim::Static(32), Dim::Static(1)],
            )
            .map(|_| ())
        }),
        MakePartitionView => case(|f| pview(f).map(|_| ())),
        MakeStridedView => case(|f| {
            let tv = tview(f, 0)?;
            f.make_strided_view(tv, &[16, 16], &[2, 1], None)
                .map(|_| ())
        }),
        MakeGatherScatterView => case(|f| {
            let tv = tview(f, 0)?;
            f.make_gather_scatter_view(tv, &[16, 16], 0, Some(Padding::Zero))
                .map(|_| ())
        }),
        GetTileBlockId => case(|f| f.get_tile_block_id().map(|_| ())),
        GetNumTileBlocks => case(|f| f.get_num_tile_blocks().map(|_| ())),
        GetIndexSpaceShape => case(|f| {
            let pv = pview(f)?;
            f.get_index_space_shape(pv).map(|_| ())
        }),
        GetTensorShape => case(|f| {
            let tv = tview(f, 0)?;
            f.get_tensor_shape(tv).map(|_| ())
        }),
        LoadViewTko => case(|f| {
            let pv = pview(f)?;
            let i = f.const_i32(0)?;
            f.load_view_tko(pv, &[i, i], None).map(|_| ())
        }),
        StoreViewTko => case(|f| {
            let pv = pview(f)?;
            let i = f.const_i32(1)?;
            let t = c32(f, &[16, 16], 1.0)?;
            let tok = f.make_token()?;
            let o = MemOpts {
                ordering: MemoryOrdering::Release,
                scope: Some(MemoryScope::Device),
                token: Some(tok),
                ..Default::default()
            };
            f.store_view_tko_with(t, pv, &[i, i], &o).map(|_| ())
        }),
        LoadPtrTko => case(|f| {
            let p = f.param(0)?;
            let ps = f.broadcast_to(p, &[16])?;
            let mask = f.constant(I1, &[16], true)?;
            let pad = c32(f, &[16], 0.0)?;
            f.load_ptr_tko(ps, Some(mask), Some(pad), None).map(|_| ())
        }),
        StorePtrTko => case(|f| {
            let p = f.param(0)?;
            let ps = f.broadcast_to(p, &[16])?;
            let off = f.iota(I32, 16)?;
            let ps = f.offset(ps, off)?;
            let v = c32(f, &[16], 3.0)?;
            f.store_ptr_tko(ps, v, None, None).map(|_| ())
        }),
        AtomicRMWTko => case(|f| {
            let p = f.param(1)?;
            let one = f.const_i32(1)?;
            f.atomic_rmw_tko(p, one, AtomicRmwMode::Add, None, AtomicOpts::default())
                .map(|_| ())
        }),
        AtomicCASTko => case(|f| {
            let p = f.param(1)?;
            let (a, b) = (f.const_i32(0)?, f.const_i32(1)?);
            f.atomic_cas_tko(
                p,
                a,
                b,
                None,
                AtomicOpts {
                    ordering: MemoryOrdering::AcqRel,
                    ..Default::default()
                },
            )
            .map(|_| ())
        }),
        AtomicRedViewTko => case(|f| {
            let pv = pview(f)?;
            let i = f.const_i32(0)?;
            let v = c32(f, &[16, 16], 1.0)?;
            f.atomic_red_view_tko(pv, &[i, i], v, AtomicRmwMode::AddF, AtomicOpts::default())
                .map(|_| ())
        }),
        MultimemLoadReduceViewTko => case(|f| {
            let pv = mview(f)?;
            let i = f.const_i32(0)?;
            let o = MemOpts {
                ordering: MemoryOrdering::Relaxed,
                scope: Some(MemoryScope::Sys),
                ..Default::default()
            };
            f.multimem_load_reduce_view_tko(pv, &[i, i], MultimemReduction::Add, &o)
                .map(|_| ())
        }),
        MultimemReduceViewTko => case(|f| {
            let pv = mview(f)?;
            let i = f.const_i32(0)?;
            let t = c32(f, &[16, 16], 1.0)?;
            let o = MemOpts {
                ordering: MemoryOrdering::Relaxed,
                scope: Some(MemoryScope::Sys),
                ..Default::default()
            };
            f.multimem_reduce_view_tko(pv, t, &[i, i], MultimemReduction::Add, &o)
                .map(|_| ())
        }),
        MultimemStoreViewTko => case(|f| {
            let pv = mview(f)?;
            let i = f.const_i32(0)?;
            let t = c32(f, &[16, 16], 1.0)?;
            let o = MemOpts {
                ordering: MemoryOrdering::Relaxed,
                scope: Some(MemoryScope::Sys),
                ..Default::default()
            };
            f.multimem_store_view_tko(pv, t, &[i, i], &o).map(|_| ())
        }),
        Global => Some(Case {
            setup: Some(|m| m.global("table", F32, &[Const::Float(1.0), Const::Float(2.0)], 16)),
            body: |f| f.get_global("table").map(|_| ()),
        }),
        GetGlobal => Some(Case {
            setup: Some(|m| m.global("lut", I32, &[Const::Int(1); 4], 16)),
            body: |f| f.get_global("lut").map(|_| ()),
        }),
        Alloca => case(|f| f.alloca(F32, 64, 16, false).map(|_| ())),
        GdcWaitTko => case(|f| f.gdc_wait_tko(None).map(|_| ())),
        GdcLaunchDependentsTko => case(|f| {
            let t = f.make_token()?;
            f.gdc_launch_dependents_tko(Some(t)).map(|_| ())
        }),
        MemoryFenceAliasTko => case(|f| {
            let t = f.make_token()?;
            f.memory_fence_alias_tko(t).map(|_| ())
        }),
        PrintTko => case(|f| {
            let a = f.const_i32(42)?;
            let b = f.const_f32(0.5)?;
            f.print_tko("a=%d b=%f 100%%\n", &[a, b], None).map(|_| ())
        }),
        Assert => case(|f| {
            let c = f.constant(I1, &[16], true)?;
            f.assert(c, "all good")
        }),
        MmaF => case(|f| {
            let a = f.constant(F16, &[16, 32], 1.0)?;
            let b = f.constant(F16, &[32, 16], 1.0)?;
            let c = c32(f, &[16, 16], 0.0)?;
            f.mmaf(a, b, c).map(|_| ())
        }),
        MmaI => case(|f| {
            let a = f.constant(I8, &[16, 32], 1)?;
            let b = f.constant(I8, &[32, 16], 1)?;
            let c = ci32(f, &[16, 16], 0)?;
            f.mmai(a, b, c, Signedness::Signed, Signedness::Signed)
                .map(|_| ())
        }),
        MmaFScaled => case(|f| {
            let a = f.constant(F8E4M3FN, &[16, 64], 1.0)?;
            let b = f.constant(F8E4M3FN, &[64, 16], 1.0)?;
            let c = c32(f, &[16, 16], 0.0)?;
            let sa = f.constant(F8E8M0FNU, &[16, 2], 1.0)?;
            let sb = f.constant(F8E8M0FNU, &[2, 16], 1.0)?;
            f.mmaf_scaled(a, b, c, sa, sb).map(|_| ())
        }),
        For | Continue => case(|f| {
            let (lo, hi, st) = (f.const_i32(0)?, f.const_i32(8)?, f.const_i32(1)?);
            let acc = c32(f, &[16], 0.0)?;
            let one = c32(f, &[16], 1.0)?;
            f.for_loop(lo, hi, st, &[acc], |b, _, c| Ok(vec![b.addf(c[0], one)?]))
                .map(|_| ())
        }),
        Loop | Break => case(|f| {
            let zero = f.const_i32(0)?;
            let ten = f.const_i32(10)?;
            f.loop_(&[zero], &[Type::scalar_tile(I32)], |b, c| {
                let one = b.const_i32(1)?;
                let n = b.addi(c[0], one)?;
                let done = b.cmpi(
                    ComparisonPredicate::GreaterThanOrEqual,
                    n,
                    ten,
                    Signedness::Signed,
                )?;
                b.if_then(done, |b| b.break_(&[n]))?;
                Ok(vec![n])
            })
            .map(|_| ())
        }),
        If | Yield => case(|f| {
            let n = f.param(2)?;
            let zero = f.const_i32(0)?;
            let pos = f.cmpi(
                ComparisonPredicate::GreaterThan,
                n,
                zero,
                Signedness::Signed,
            )?;
            f.if_then_else(
                pos,
                &[Type::scalar_tile(F32)],
                |b| Ok(vec![b.const_f32(1.0)?]),
                |b| Ok(vec![b.const_f32(-1.0)?]),
            )
            .map(|_| ())
        }),
        Return => case(|f| {
            let n = f.param(2)?;
            let zero = f.const_i32(0)?;
            let neg = f.cmpi(ComparisonPredicate::LessThan, n, zero, Signedness::Signed)?;
            f.if_then(neg, |b| b.return_())?;
            f.return_()
        }),
        Reduce => case(|f| {
            let t = c32(f, &[8, 32], 1.0)?;
            let id = scalar_attr(F32, 0.0)?;
            f.reduce(&[t], 1, &[id], sum_f32).map(|_| ())
        }),
        Scan => case(|f| {
            let t = c32(f, &[8, 32], 1.0)?;
            let id = scalar_attr(F32, 0.0)?;
            f.scan(&[t], 1, false, &[id], sum_f32).map(|_| ())
        }),
        PreviewCall => Some(Case {
            setup: Some(|m| {
                let t = Type::tile(F32, &[4]);
                m.extern_decl(
                    "ext",
                    &[(t.clone(), Access::In), (t.clone(), Access::Out)],
                    &[t],
                    &[],
                )
            }),
            body: |f| {
                let z = c32(f, &[4], 0.0)?;
                f.preview_call("ext", vec![], &[z, z]).map(|_| ())
            },
        }),
        // An opcode added to the schema lands here and fails `every_body_op_has_a_case_that_uses_it`.
        _ => None,
    }
}

// Grouped ops share one body each; fn pointers cannot capture, so they are listed.
const UNARY_OPS: [Opcode; 16] = [
    Opcode::AbsF,
    Opcode::Ceil,
    Opcode::Cos,
    Opcode::CosH,
    Opcode::Exp,
    Opcode::Exp2,
    Opcode::Floor,
    Opcode::Log,
    Opcode::Log2,
    Opcode::NegF,
    Opcode::Rsqrt,
    Opcode::Sin,
    Opcode::SinH,
    Opcode::Sqrt,
    Opcode::Tan,
    Opcode::TanH,
];
const UNARY: [Body; 16] = [
    |f| unary_f(f, Opcode::AbsF),
    |f| unary_f(f, Opcode::Ceil),
    |f| unary_f(f, Opcode::Cos),
    |f| unary_f(f, Opcode::CosH),
    |f| unary_f(f, Opcode::Exp),
    |f| unary_f(f, Opcode::Exp2),
    |f| unary_f(f, Opcode::Floor),
    |f| unary_f(f, Opcode::Log),
    |f| unary_f(f, Opcode::Log2),
    |f| unary_f(f, Opcode::NegF),
    |f| unary_f(f, Opcode::Rsqrt),
    |f| unary_f(f, Opcode::Sin),
    |f| unary_f(f, Opcode::SinH),
    |f| unary_f(f, Opcode::Sqrt),
    |f| unary_f(f, Opcode::Tan),
    |f| unary_f(f, Opcode::TanH),
];
const BINARY_OPS: [Opcode; 9] = [
    Opcode::AddF,
    Opcode::SubF,
    Opcode::MulF,
    Opcode::DivF,
    Opcode::RemF,
    Opcode::MaxF,
    Opcode::MinF,
    Opcode::FPowF,
    Opcode::Atan2,
];
const BINARY: [Body; 9] = [
    |f| binary_f(f, Opcode::AddF),
    |f| binary_f(f, Opcode::SubF),
    |f| binary_f(f, Opcode::MulF),
    |f| binary_f(f, Opcode::DivF),
    |f| binary_f(f, Opcode::RemF),
    |f| binary_f(f, Opcode::MaxF),
    |f| binary_f(f, Opcode::MinF),
    |f| binary_f(f, Opcode::FPowF),
    |f| binary_f(f, Opcode::Atan2),
];
const INT_OPS: [Opcode; 13] = [
    Opcode::AddI,
    Opcode::SubI,
    Opcode::MulI,
    Opcode::MulhiI,
    Opcode::DivI,
    Opcode::RemI,
    Opcode::MaxI,
    Opcode::MinI,
    Opcode::AndI,
    Opcode::OrI,
    Opcode::XOrI,
    Opcode::ShLI,
    Opcode::ShRI,
];
const INT: [Body; 13] = [
    |f| int_op(f, Opcode::AddI, true),
    |f| int_op(f, Opcode::SubI, true),
    |f| int_op(f, Opcode::MulI, true),
    |f| int_op(f, Opcode::MulhiI, true),
    |f| int_op(f, Opcode::DivI, true),
    |f| int_op(f, Opcode::RemI, true),
    |f| int_op(f, Opcode::MaxI, true),
    |f| int_op(f, Opcode::MinI, true),
    |f| int_op(f, Opcode::AndI, true),
    |f| int_op(f, Opcode::OrI, true),
    |f| int_op(f, Opcode::XOrI, true),
    |f| int_op(f, Opcode::ShLI, true),
    |f| int_op(f, Opcode::ShRI, true),
];

/// Build the module of `op`'s case.
fn build(op: Opcode, c: &Case) -> Result<Module, String> {
    let mut m = ModuleBuilder::new();
    if let Some(setup) = c.setup {
        setup(&mut m).map_err(|e| format!("setup: {e}"))?;
    }
    let params = [
        Type::pointer_tile(F32, &[]),
        Type::pointer_tile(I32, &[]),
        Type::scalar_tile(I32),
        multicast_pointer_tile(F32),
    ];
    let mut f = m
        .entry(&format!("use_{}", op.mnemonic().replace('$', "_")), &params)
        .map_err(|e| e.to_string())?;
    (c.body)(&mut f).map_err(|e| format!("build: {e}"))?;
    f.finish().map_err(|e| format!("finish: {e}"))?;
    Ok(m.finish())
}

fn contains(m: &Module, op: Opcode) -> bool {
    if op == Opcode::Global {
        return !m.globals.is_empty();
    }
    let mut found = false;
    for f in &m.functions {
        f.walk(&mut |o| found |= o.opcode == op);
    }
    found
}

#[test]
fn every_body_op_has_a_case_that_uses_it() {
    let mut missing = Vec::new();
    for op in Opcode::all_body_ops() {
        match use_of(op) {
            None => missing.push(format!("{}: no case", op.mnemonic())),
            Some(c) => match build(op, &c) {
                Ok(m) if contains(&m, op) => {}
                Ok(_) => missing.push(format!("{}: the case does not emit it", op.mnemonic())),
                Err(e) => missing.push(format!("{}: {e}", op.mnemonic())),
            },
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // Structural opcodes are the only ones without a case.
    assert!(use_of(Opcode::Module).is_none() && use_of(Opcode::Entry).is_none());
}

#[test]
fn every_op_verifies_writes_reads_back_and_disassembles() {
    let disasm = builder_support::tileirdisasm();
    if disasm.is_none() {
        builder_support::skip("every_op (tileirdisasm part)", "tileirdisasm");
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for op in Opcode::all_body_ops() {
        let name = op.mnemonic();
        let Some(c) = use_of(op) else { continue };
        let m = match build(op, &c) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if let Err(e) = verify_module(&m, V13_5) {
            failures.push(format!("{name}: {e}"));
            continue;
        }
        let bytes = match write_module(&m, V13_5) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{name}: write: {e}"));
                continue;
            }
        };
        match read_module(&bytes) {
            Ok(back) if print_module(&back) == print_module(&m) => {}
            Ok(back) => failures.push(format!(
                "{name}: read back differs:\n--- built\n{}--- read\n{}",
                print_module(&m),
                print_module(&back)
            )),
            Err(e) => failures.push(format!("{name}: read back: {e}")),
        }
        if let Some(tool) = &disasm {
            let run = builder_support::disasm(tool, &bytes, m.needs_preview(), name);
            if !run.ok {
                failures.push(format!(
                    "{name}: tileirdisasm rejected it: {}",
                    run.stderr.trim()
                ));
            }
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} ops failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
