//! Builder behaviour: type inference, region construction (closure and begin/end forms), hints, debug
//! locations, the generic op path, and the error messages of misuse (table-driven).

use cutile_ir::builder::*;
use cutile_ir::verify::verify_module;
use cutile_ir::*;

use ScalarType::*;

type R<T> = Result<T, BuildError>;

fn f32t(shape: &[i64]) -> Type {
    Type::tile(F32, shape)
}

/// Build a one-entry module with `params`, run `body`, finish, and check the verifier accepts it.
fn build(params: &[Type], body: impl FnOnce(&mut FunctionBuilder<'_>) -> R<()>) -> Module {
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", params).expect("entry");
    body(&mut f).expect("body builds");
    f.finish().expect("finish");
    let module = m.finish();
    if let Err(e) = verify_module(&module, V13_5) {
        panic!("built module does not verify: {e}");
    }
    module
}

fn body_ops(m: &Module) -> Vec<Opcode> {
    let mut v = vec![];
    m.functions[0].walk(&mut |o| v.push(o.opcode));
    v
}

#[test]
fn infers_elementwise_and_comparison_types() {
    build(&[], |f| {
        let a = f.constant(F32, &[4, 8], 1.5)?;
        let b = f.constant(F32, &[4, 8], 2.0)?;
        let s = f.addf(a, b)?;
        assert_eq!(f.ty(s)?, &f32t(&[4, 8]));
        let c = f.cmpf(ComparisonPredicate::LessThan, a, s)?;
        assert_eq!(f.ty(c)?, &Type::tile(I1, &[4, 8]));
        let h = f.ftof(s, F16)?;
        assert_eq!(f.ty(h)?, &Type::tile(F16, &[4, 8]));
        let i = f.ftoi(s, I32, Signedness::Signed)?;
        let j = f.cmpi(ComparisonPredicate::Equal, i, i, Signedness::Signed)?;
        let k = f.select(j, a, b)?;
        assert_eq!(f.ty(k)?, &f32t(&[4, 8]));
        let e = f.exp(k)?;
        let r = f.fma(e, e, e)?;
        assert_eq!(f.ty(r)?, &f32t(&[4, 8]));
        Ok(())
    });
}

#[test]
fn broadcast_to_reshapes_then_broadcasts() {
    let m = build(&[], |f| {
        let s = f.const_f32(3.0)?;
        let t = f.broadcast_to(s, &[16, 32])?;
        assert_eq!(f.ty(t)?, &f32t(&[16, 32]));
        let same = f.broadcast_to(t, &[16, 32])?;
        assert_eq!(same, t, "no op when the shape already matches");
        Ok(())
    });
    assert_eq!(
        body_ops(&m),
        [
            Opcode::Constant,
            Opcode::Reshape,
            Opcode::Broadcast,
            Opcode::Return
        ]
    );
}

#[test]
fn reduce_drops_the_dimension_and_scan_keeps_it() {
    build(&[], |f| {
        let t = f.constant(F32, &[8, 64], 1.0)?;
        let id = scalar_attr(F32, 0.0)?;
        let r = f.reduce(&[t], 1, std::slice::from_ref(&id), |b, l, r| {
            Ok(vec![b.addf(l[0], r[0])?])
        })?;
        assert_eq!(f.ty(r[0])?, &f32t(&[8]));
        let s = f.scan(&[t], 0, true, &[id], |b, l, r| {
            Ok(vec![b.maxf(l[0], r[0])?])
        })?;
        assert_eq!(f.ty(s[0])?, &f32t(&[8, 64]));
        Ok(())
    });
}

#[test]
fn for_loop_carries_values_and_scopes_the_body() {
    build(&[], |f| {
        let (lo, hi, step) = (f.const_i32(0)?, f.const_i32(10)?, f.const_i32(1)?);
        let acc = f.constant(F32, &[16], 0.0)?;
        let one = f.constant(F32, &[16], 1.0)?;
        let mut inner_iv = None;
        let out = f.for_loop(lo, hi, step, &[acc, one], |b, iv, c| {
            inner_iv = Some(iv);
            assert!(b.in_scope(iv) && b.in_scope(one));
            let n = b.addf(c[0], c[1])?;
            Ok(vec![n, c[1]])
        })?;
        assert_eq!(out.len(), 2);
        assert_eq!(f.ty(out[0])?, &f32t(&[16]));
        let iv = inner_iv.expect("body ran");
        assert!(!f.in_scope(iv), "the induction variable ends with the loop");
        let err = f.addi(iv, iv).expect_err("iv is out of scope");
        assert!(err.to_string().contains("is out of scope"), "{err}");
        Ok(())
    });
}

#[test]
fn loop_with_break_and_if_with_continue() {
    let m = build(&[], |f| {
        let zero = f.const_i32(0)?;
        let limit = f.const_i32(100)?;
        let res = f.loop_(&[zero], &[Type::scalar_tile(I32)], |b, c| {
            let one = b.const_i32(1)?;
            let next = b.addi(c[0], one)?;
            let done = b.cmpi(
                ComparisonPredicate::GreaterThanOrEqual,
                next,
                limit,
                Signedness::Signed,
            )?;
            b.if_then(done, |b| b.break_(&[next]))?;
            Ok(vec![next])
        })?;
        assert_eq!(f.ty(res[0])?, &Type::scalar_tile(I32));
        let (lo, hi, st) = (f.const_i32(0)?, f.const_i32(4)?, f.const_i32(1)?);
        let x = f.const_f32(0.0)?;
        f.for_loop(lo, hi, st, &[x], |b, iv, c| {
            let two = b.const_i32(2)?;
            let skip = b.cmpi(ComparisonPredicate::LessThan, iv, two, Signedness::Signed)?;
            b.if_then(skip, |b| b.continue_(&[c[0]]))?;
            let y = b.addf(c[0], c[0])?;
            Ok(vec![y])
        })?;
        let c = f.const_bool(true)?;
        let picked = f.if_then_else(
            c,
            &[Type::scalar_tile(F32)],
            |b| Ok(vec![b.const_f32(1.0)?]),
            |b| Ok(vec![b.const_f32(2.0)?]),
        )?;
        assert_eq!(picked.len(), 1);
        Ok(())
    });
    let ops = body_ops(&m);
    for o in [
        Opcode::Loop,
        Opcode::Break,
        Opcode::For,
        Opcode::Continue,
        Opcode::If,
        Opcode::Yield,
    ] {
        assert!(ops.contains(&o), "{o:?} missing from {ops:?}");
    }
}

#[test]
fn begin_end_form_equals_closure_form() {
    let closure = build(&[], |f| {
        let (lo, hi, st) = (f.const_i32(0)?, f.const_i32(8)?, f.const_i32(1)?);
        let a = f.const_f32(0.0)?;
        let r = f.for_loop(lo, hi, st, &[a], |b, _iv, c| Ok(vec![b.addf(c[0], c[0])?]))?;
        let c = f.const_bool(false)?;
        f.if_then_else(
            c,
            &[Type::scalar_tile(F32)],
            |_| Ok(vec![r[0]]),
            |b| Ok(vec![b.negf(r[0])?]),
        )?;
        Ok(())
    });
    let explicit = build(&[], |f| {
        let (lo, hi, st) = (f.const_i32(0)?, f.const_i32(8)?, f.const_i32(1)?);
        let a = f.const_f32(0.0)?;
        let fr = f.begin_for(lo, hi, st, &[a])?;
        let n = f.addf(fr.carried[0], fr.carried[0])?;
        let r = f.end_for(&[n])?;
        let c = f.const_bool(false)?;
        f.begin_if(c, &[Type::scalar_tile(F32)])?;
        f.begin_else(&[r[0]])?;
        let neg = f.negf(r[0])?;
        f.end_if(&[neg])?;
        Ok(())
    });
    assert_eq!(closure, explicit);
}

#[test]
fn generic_path_builds_the_same_op_as_the_typed_method() {
    let typed = build(&[], |f| {
        let a = f.constant(F32, &[4], 1.0)?;
        f.addf(a, a)?;
        Ok(())
    });
    let generic = build(&[], |f| {
        let a = f.constant(F32, &[4], 1.0)?;
        f.op(Opcode::AddF)
            .operand("lhs", a)
            .operand("rhs", a)
            .enum_attr("rounding_mode", RoundingMode::NearestEven)
            .result(f32t(&[4]))
            .build()?;
        Ok(())
    });
    assert_eq!(typed, generic);
}

#[test]
fn generic_path_builds_regions() {
    build(&[], |f| {
        let c = f.const_bool(true)?;
        let one = f.const_i32(1)?;
        let r = f
            .op(Opcode::If)
            .operand("condition", c)
            .result(Type::scalar_tile(I32))
            .region_with(&[], |b, _| b.yield_(&[one]))
            .region_with(&[], |b, _| {
                let two = b.const_i32(2)?;
                b.yield_(&[two])
            })
            .build()?;
        assert_eq!(r.len(), 1);
        Ok(())
    });
}

#[test]
fn hints_and_debug_locations() {
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", &[Type::scalar_tile(I32)]).expect("entry");
    f.num_worker_warps_per_cta("default", 8).expect("hint");
    f.occupancy("sm_90", 2).expect("hint");
    f.num_cta_in_cga("sm_100", 2).expect("hint");
    f.enable_debug_info("kernel.rs", "/src", 10);
    f.set_loc(11, 5).expect("loc");
    let a = f.const_i32(1).expect("const");
    f.set_loc(12, 1).expect("loc");
    let b = f.addi(a, a).expect("addi");
    f.set_loc(11, 5).expect("loc");
    f.addi(b, a).expect("addi");
    f.finish().expect("finish");
    let module = m.finish();
    verify_module(&module, V13_5).expect("verifies");
    let func = &module.functions[0];
    let FunctionKind::Entry { hints } = &func.kind else {
        panic!("entry")
    };
    let keys: Vec<&str> = hints.by_arch.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(keys, ["default", "sm_90", "sm_100"]);
    assert_ne!(func.loc, DebugRef(0));
    let locs: Vec<DebugRef> = func
        .body
        .as_ref()
        .expect("body")
        .ops
        .iter()
        .map(|o| o.loc)
        .collect();
    assert_eq!(locs[0], locs[2], "equal line:col share one debug attribute");
    assert_ne!(locs[0], locs[1]);
    assert!(
        module
            .debug_attrs
            .iter()
            .any(|d| matches!(d, DebugAttr::Subprogram { name, .. } if name == "k"))
    );
    assert!(matches!(
        &module.debug_attrs[locs[1].0 as usize - 1],
        DebugAttr::Loc {
            line: 12,
            col: 1,
            ..
        }
    ));
}

#[test]
fn extern_call_infers_results_from_the_declaration() {
    let mut m = ModuleBuilder::new();
    let t4 = f32t(&[4]);
    m.extern_decl(
        "ext",
        &[(t4.clone(), Access::In), (t4.clone(), Access::Out)],
        std::slice::from_ref(&t4),
        &[],
    )
    .expect("decl");
    let mut f = m.entry("k", &[]).expect("entry");
    let z = f.constant(F32, &[4], 0.0).expect("const");
    let r = f.preview_call("ext", vec![], &[z, z]).expect("call");
    assert_eq!(f.ty(r[0]).expect("ty"), &t4);
    f.finish().expect("finish");
    let module = m.finish();
    assert!(module.needs_preview());
    verify_module(&module, V13_5).expect("verifies at 13.5");
    let e = verify_module(&module, V13_4).expect_err("preview needs 13.5");
    assert!(e.mentions("needs bytecode 13.5"), "{e}");
}

#[test]
fn builder_stays_usable_after_an_error() {
    let m = build(&[], |f| {
        let a = f.constant(F32, &[4], 1.0)?;
        let b = f.constant(F32, &[8], 1.0)?;
        assert!(f.addf(a, b).is_err());
        let (lo, hi, st) = (f.const_i32(0)?, f.const_i32(2)?, f.const_i32(1)?);
        let failed = f.for_loop(lo, hi, st, &[], |b, iv, _| {
            b.addf(iv, iv)?; // ints into addf: fails inside the body
            Ok(vec![])
        });
        assert!(failed.is_err());
        assert_eq!(f.depth(), 0, "the failed region was dropped");
        f.addf(a, a)?;
        Ok(())
    });
    let ops = body_ops(&m);
    assert_eq!(ops.iter().filter(|o| **o == Opcode::AddF).count(), 1);
    assert!(!ops.contains(&Opcode::For));
}

#[test]
fn samples_are_built_and_reject_bad_parameters() {
    use cutile_ir::samples::*;
    for m in [
        vector_add(1024, F32),
        vector_add(256, I32),
        row_softmax(1024, BF16),
        row_softmax(512, F32),
        tiled_matmul(128, 128, 64, F16, F32),
        tiled_matmul(64, 64, 32, F32, F32),
    ] {
        verify_module(&m.expect("builds"), V13_5).expect("verifies");
    }
    let cases: Vec<(R<Module>, &str)> = vec![
        (
            vector_add(1000, F32),
            "tile = 1000 must be a positive power of two",
        ),
        (row_softmax(1024, I32), "element type i32 is not supported"),
        (
            tiled_matmul(128, 128, 64, BF16, F16),
            "inputs of bf16 need an accumulator of f32, got f16",
        ),
    ];
    for (r, want) in cases {
        let e = r.expect_err("must fail").to_string();
        assert!(e.contains(want), "`{e}` lacks `{want}`");
    }
}

/// One misuse of the builder and the message it must produce.
type Case = (&'static str, fn(&mut FunctionBuilder<'_>) -> R<()>);

#[test]
fn misuse_is_reported_with_the_op_and_the_types() {
    let cases: &[Case] = &[
        (
            "addf: operand types differ: tile<4xf32> vs tile<8xf32>",
            |f| {
                let (a, b) = (f.constant(F32, &[4], 1.0)?, f.constant(F32, &[8], 1.0)?);
                f.addf(a, b).map(|_| ())
            },
        ),
        (
            "addf: lhs must be a tile of f16, bf16, f32 or f64, got tile<4xi32>",
            |f| {
                let a = f.constant(I32, &[4], 1)?;
                f.addf(a, a).map(|_| ())
            },
        ),
        (
            "addi: lhs must be a tile of i1, i8, i16, i32 or i64, got tile<f32>",
            |f| {
                let a = f.const_f32(1.0)?;
                f.addi(a, a).map(|_| ())
            },
        ),
        (
            "broadcast: cannot broadcast tile<2x4xf32> to tile<8x8xf32>",
            |f| {
                let a = f.constant(F32, &[2, 4], 1.0)?;
                f.broadcast(a, &[8, 8]).map(|_| ())
            },
        ),
        (
            "reshape: element counts differ: tile<4x4xf32> has 16, tile<8x4xf32> has 32",
            |f| {
                let a = f.constant(F32, &[4, 4], 1.0)?;
                f.reshape(a, &[8, 4]).map(|_| ())
            },
        ),
        (
            "mmaf: shapes do not form M×K · K×N + M×N: tile<16x32xf16> · tile<16x16xf16> + tile<16x16xf32>",
            |f| {
                let a = f.constant(F16, &[16, 32], 1.0)?;
                let b = f.constant(F16, &[16, 16], 1.0)?;
                let c = f.constant(F32, &[16, 16], 0.0)?;
                f.mmaf(a, b, c).map(|_| ())
            },
        ),
        (
            "mmaf: inputs of bf16 need an accumulator of f32, got f16",
            |f| {
                let a = f.constant(BF16, &[16, 16], 1.0)?;
                let c = f.constant(F16, &[16, 16], 0.0)?;
                f.mmaf(a, a, c).map(|_| ())
            },
        ),
        (
            "constant: tile dimensions must be positive powers of two, got [3]",
            |f| f.constant(F32, &[3], 1.0).map(|_| ()),
        ),
        ("constant: 300 does not fit in i8", |f| {
            f.constant(I8, &[4], 300).map(|_| ())
        }),
        (
            "exp: rounding mode approx is only supported for f32, got f16",
            |f| {
                let a = f.constant(F16, &[4], 1.0)?;
                let o = FloatOpts {
                    rounding: Some(RoundingMode::Approx),
                    ..Default::default()
                };
                f.unary_float(Opcode::Exp, a, o).map(|_| ())
            },
        ),
        (
            "addf: flush_to_zero is only supported for f32, got f16",
            |f| {
                let a = f.constant(F16, &[4], 1.0)?;
                let o = FloatOpts {
                    flush_to_zero: true,
                    ..Default::default()
                };
                f.binary_float(Opcode::AddF, a, a, o).map(|_| ())
            },
        ),
        ("remf: has no rounding modifier", |f| {
            let a = f.constant(F32, &[4], 1.0)?;
            let o = FloatOpts {
                rounding: Some(RoundingMode::Zero),
                ..Default::default()
            };
            f.binary_float(Opcode::RemF, a, a, o).map(|_| ())
        }),
        (
            "ftof: converting tile<4xf32> to itself is not allowed",
            |f| {
                let a = f.constant(F32, &[4], 1.0)?;
                f.ftof(a, F32).map(|_| ())
            },
        ),
        (
            "exti: must extend to a wider integer, got i32 -> i16",
            |f| {
                let a = f.constant(I32, &[4], 1)?;
                f.exti(a, I16, Signedness::Signed).map(|_| ())
            },
        ),
        (
            "load_view_tko: partition_view has 2 dimension(s) but 1 index operand(s) were given",
            |f| {
                let p = f.param(0)?;
                let tv = f.make_tensor_view(
                    p,
                    &[Dim::Static(64), Dim::Static(64)],
                    &[Dim::Static(64), Dim::Static(1)],
                )?;
                let pv = f.make_partition_view(tv, &[16, 16], None)?;
                let i = f.const_i32(0)?;
                f.load_view_tko(pv, &[i], None).map(|_| ())
            },
        ),
        (
            "store_view_tko: the stored tile must be tile<16x16xf32> (the view's tile), got tile<16x8xf32>",
            |f| {
                let p = f.param(0)?;
                let tv = f.make_tensor_view(
                    p,
                    &[Dim::Static(64), Dim::Static(64)],
                    &[Dim::Static(64), Dim::Static(1)],
                )?;
                let pv = f.make_partition_view(tv, &[16, 16], None)?;
                let i = f.const_i32(0)?;
                let t = f.constant(F32, &[16, 8], 0.0)?;
                f.store_view_tko(t, pv, &[i, i], None).map(|_| ())
            },
        ),
        (
            "make_partition_view: padding_value neg_inf needs a float element type",
            |f| {
                let p = f.param(1)?;
                let tv = f.make_tensor_view(p, &[Dim::Static(64)], &[Dim::Static(1)])?;
                f.make_partition_view(tv, &[16], Some(Padding::NegInf))
                    .map(|_| ())
            },
        ),
        (
            "make_tensor_view: tensor_view<?xf32, strides=[1]> has 1 dynamic extent(s) but 0 shape operand(s) were given",
            |f| {
                let p = f.param(0)?;
                f.op(Opcode::MakeTensorView)
                    .operand("base", p)
                    .result(Type::tensor_view(F32, &[DYNAMIC], &[1]))
                    .build()
                    .map(|_| ())
            },
        ),
        (
            "load_view_tko: a weak access must not have a memory scope",
            |f| {
                let p = f.param(0)?;
                let tv = f.make_tensor_view(p, &[Dim::Static(64)], &[Dim::Static(1)])?;
                let pv = f.make_partition_view(tv, &[16], None)?;
                let i = f.const_i32(0)?;
                let o = MemOpts {
                    scope: Some(MemoryScope::Device),
                    ..Default::default()
                };
                f.load_view_tko_with(pv, &[i], &o).map(|_| ())
            },
        ),
        (
            "atomic_rmw_tko: mode add works only with i32 and i64, got f32",
            |f| {
                let p = f.param(0)?;
                let v = f.const_f32(1.0)?;
                f.atomic_rmw_tko(p, v, AtomicRmwMode::Add, None, AtomicOpts::default())
                    .map(|_| ())
            },
        ),
        ("assume: div_by<12>: divisor must be a power of two", |f| {
            let p = f.param(0)?;
            f.assume_div_by(p, 12).map(|_| ())
        }),
        (
            "print_tko: format string \"%d %f\" takes 2 argument(s), got 1",
            |f| {
                let a = f.const_i32(1)?;
                f.print_tko("%d %f", &[a], None).map(|_| ())
            },
        ),
        (
            "reduce: identity 0 has type i32 but operand 0 holds f32",
            |f| {
                let t = f.constant(F32, &[8], 1.0)?;
                let id = scalar_attr(I32, 0)?;
                f.reduce(&[t], 0, &[id], |b, l, r| Ok(vec![b.addf(l[0], r[0])?]))
                    .map(|_| ())
            },
        ),
        (
            "reduce: only ops without memory effects may appear in the body, found print_tko",
            |f| {
                let t = f.constant(F32, &[8], 1.0)?;
                let id = scalar_attr(F32, 0.0)?;
                f.reduce(&[t], 0, &[id], |b, l, r| {
                    b.print_tko("%f", &[l[0]], None)?;
                    Ok(vec![b.addf(l[0], r[0])?])
                })
                .map(|_| ())
            },
        ),
        (
            "continue: operand types (tile<i32>) must match the for's result types (tile<f32>)",
            |f| {
                let (lo, hi, st) = (f.const_i32(0)?, f.const_i32(4)?, f.const_i32(1)?);
                let x = f.const_f32(0.0)?;
                f.for_loop(lo, hi, st, &[x], |_, iv, _| Ok(vec![iv]))
                    .map(|_| ())
            },
        ),
        (
            "break: must be nested (through ifs only) in a loop, found in entry",
            |f| f.break_(&[]),
        ),
        (
            "yield: must terminate an if, reduce or scan region, not a entry region",
            |f| f.yield_(&[]),
        ),
        ("return: an entry returns nothing, got (tile<i32>)", |f| {
            let a = f.const_i32(0)?;
            f.op(Opcode::Return)
                .operand("operands", a)
                .build()
                .map(|_| ())
        }),
        (
            "yield: operand types () must match the if's result types (tile<f32>)",
            |f| {
                let c = f.const_bool(true)?;
                f.if_then_else(c, &[Type::scalar_tile(F32)], |_| Ok(vec![]), |_| Ok(vec![]))
                    .map(|_| ())
            },
        ),
        (
            "addf: has no operand group `x`; its groups are [lhs, rhs]",
            |f| {
                let a = f.const_f32(1.0)?;
                f.op(Opcode::AddF).operand("x", a).build().map(|_| ())
            },
        ),
        (
            "addf: attribute `rounding_mode` takes a RoundingMode enum value",
            |f| {
                let a = f.const_f32(1.0)?;
                f.op(Opcode::AddF)
                    .operand("lhs", a)
                    .operand("rhs", a)
                    .attr("rounding_mode", OpAttr::Int(0))
                    .build()
                    .map(|_| ())
            },
        ),
        ("addf: required attribute `rounding_mode` is not set", |f| {
            let a = f.const_f32(1.0)?;
            f.op(Opcode::AddF)
                .operand("lhs", a)
                .operand("rhs", a)
                .result(Type::scalar_tile(F32))
                .build()
                .map(|_| ())
        }),
        (
            "the current block already ends with return; ops after a terminator are unreachable",
            |f| {
                f.return_()?;
                f.const_i32(0).map(|_| ())
            },
        ),
        (
            "end_for: the innermost open region is the function body",
            |f| f.end_for(&[]).map(|_| ()),
        ),
        (
            "@k: hint `default.num_worker_warps_per_cta` = 3 is out of range",
            |f| f.num_worker_warps_per_cta("default", 3).map(|_| ()),
        ),
        ("@k: unknown optimization hint `sm_90.latency`", |f| {
            f.hint("sm_90", "latency", Attribute::i32(3)).map(|_| ())
        }),
        (
            "set_loc needs a debug scope; call enable_debug_info first",
            |f| f.set_loc(1, 1).map(|_| ()),
        ),
        ("get_global: no global named @g", |f| {
            f.get_global("g").map(|_| ())
        }),
        ("preview$call: no function named @nope", |f| {
            f.preview_call("nope", vec![], &[]).map(|_| ())
        }),
        (
            "extract: each dimension of tile<8x8xf32> must be a multiple of the one of tile<16x8xf32>",
            |f| {
                let a = f.constant(F32, &[8, 8], 1.0)?;
                let i = f.const_i32(0)?;
                f.op(Opcode::Extract)
                    .operand("source", a)
                    .operands("indices", &[i, i])
                    .result(Type::Tile {
                        elem: Box::new(Type::Scalar(F32)),
                        shape: vec![16, 8],
                    })
                    .build()
                    .map(|_| ())
            },
        ),
    ];
    let params = [Type::pointer_tile(F32, &[]), Type::pointer_tile(I32, &[])];
    for (want, case) in cases {
        let mut m = ModuleBuilder::new();
        let mut f = m.entry("k", &params).expect("entry");
        match case(&mut f) {
            Ok(()) => panic!("expected an error containing `{want}`, but the case succeeded"),
            Err(e) => assert!(
                e.to_string().contains(want),
                "error `{e}` does not contain `{want}`"
            ),
        }
    }
}

#[test]
fn entry_and_module_level_misuse() {
    let mut m = ModuleBuilder::new();
    let e = m.entry("k", &[f32t(&[4])]).expect_err("rank-1 param");
    assert!(
        e.to_string()
            .contains("@k: entry parameter 0 must be a rank-0 tile, got tile<4xf32>"),
        "{e}"
    );
    m.entry("k", &[]).expect("entry").finish().expect("finish");
    let e = m.entry("k", &[]).expect_err("duplicate");
    assert!(
        e.to_string().contains("@k: the name is already used"),
        "{e}"
    );
    let e = m.entry("bad name", &[]).expect_err("bad name");
    assert!(e.to_string().contains("names must be non-empty"), "{e}");
    let e = m
        .extern_decl("ext", &[(f32t(&[4]), Access::Out)], &[], &[])
        .expect_err("unbound out");
    assert!(e.to_string().contains("must match the results"), "{e}");
    let e = m
        .global("g", F32, &[Const::Float(1.0); 3], 16)
        .expect_err("3 elements");
    assert!(e.to_string().contains("powers of two"), "{e}");

    let mut f = m.entry("open", &[]).expect("entry");
    let c = f.const_bool(true).expect("const");
    f.begin_if(c, &[]).expect("if");
    let e = f.finish().expect_err("open region");
    assert!(
        e.to_string()
            .contains("1 region(s) are still open (innermost: an if's then region"),
        "{e}"
    );
}
