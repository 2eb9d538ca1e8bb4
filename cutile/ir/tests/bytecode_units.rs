//! Unit tests of the bytecode layer: primitive encodings, header checks, version gating, malformed-module errors
//! (each naming the op and slot), reader errors (offset and context), and modules built with the builder that
//! tileirdisasm must accept.

mod bytecode_common;

use bytecode_common::*;
use cutile_ir::builder::ModuleBuilder;
use cutile_ir::bytecode::varint::{read_varint, unzigzag, write_varint, zigzag};
use cutile_ir::bytecode::{
    WriteError, header_version, read_module, read_module_with_version, write_module,
};
use cutile_ir::*;

fn varint(x: u64) -> Vec<u8> {
    let mut b = vec![];
    write_varint(&mut b, x);
    b
}

#[test]
fn varint_edges() {
    let cases: &[(u64, &[u8])] = &[
        (0, &[0x00]),
        (1, &[0x01]),
        (127, &[0x7f]),
        (128, &[0x80, 0x01]),
        (130, &[0x82, 0x01]),
        (223, &[0xdf, 0x01]),
        (16383, &[0xff, 0x7f]),
        (16384, &[0x80, 0x80, 0x01]),
        (16386, &[0x82, 0x80, 0x01]),
        (u32::MAX as u64, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        (
            1 << 63,
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
        ),
        (
            u64::MAX,
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ),
    ];
    for &(x, bytes) in cases {
        assert_eq!(varint(x), bytes, "encoding {x}");
        assert_eq!(
            read_varint(bytes).expect("decode"),
            (x, bytes.len()),
            "decoding {x}"
        );
    }
    // Trailing bytes after a complete varint are not consumed.
    assert_eq!(read_varint(&[0x05, 0xff]).expect("decode"), (5, 1));
    // Truncated, over 64 bits, over 10 bytes.
    assert!(read_varint(&[]).is_err());
    assert!(read_varint(&[0x80]).is_err());
    assert!(read_varint(&[0xff; 9]).is_err());
    assert!(read_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).is_err());
    assert!(read_varint(&[0x80; 11]).is_err());
}

#[test]
fn zigzag_edges() {
    let cases: &[(i64, u64)] = &[
        (0, 0),
        (-1, 1),
        (1, 2),
        (-2, 3),
        (63, 126),
        (-64, 127),
        (i64::MAX, u64::MAX - 1),
        (i64::MIN, u64::MAX),
    ];
    for &(x, z) in cases {
        assert_eq!(zigzag(x), z, "zigzag({x})");
        assert_eq!(unzigzag(z), x, "unzigzag({z})");
    }
    for x in [i64::MIN + 1, -123_456_789, 987_654_321, i64::MAX - 1] {
        assert_eq!(unzigzag(zigzag(x)), x);
    }
}

fn minimal_bytes() -> Vec<u8> {
    std::fs::read(data_dir().join("minimal_empty_kernel_v13_5.tilebc")).expect("sample")
}

#[test]
fn header_checks() {
    let ok = minimal_bytes();
    assert_eq!(header_version(&ok).expect("header"), (V13_5, false));
    let pre = std::fs::read(data_dir().join("preview/extern_decl_in.tilebc")).expect("sample");
    assert_eq!(header_version(&pre).expect("header"), (V13_5, true));

    let mut bad = ok.clone();
    bad[1] = b'X';
    assert_eq!(header_version(&bad).expect_err("magic").offset, 0);
    let mut v6 = ok.clone();
    v6[9] = 6;
    let e = header_version(&v6).expect_err("13.6");
    assert!(
        e.message.contains("13.6") && e.message.contains("13.1, 13.2, 13.3, 13.4, 13.5"),
        "{e}"
    );
    let mut tag = ok.clone();
    tag[10] = 2;
    assert!(
        header_version(&tag)
            .expect_err("tag bits")
            .message
            .contains("0x2")
    );
    let mut pre134 = ok.clone();
    pre134[9] = 4;
    pre134[10] = 1;
    assert!(
        header_version(&pre134)
            .expect_err("preview at 13.4")
            .message
            .contains("preview")
    );
    assert!(header_version(&ok[..11]).is_err());
}

/// `k(x: f32, y: f32)`: atan2 (13.2+) and insert (13.4+) — both fine at 13.4.
fn atan2_insert_module() -> Module {
    let t = Type::scalar_tile(ScalarType::F32);
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", &[t.clone(), t]).expect("entry");
    let (x, y) = (f.param(0).expect("x"), f.param(1).expect("y"));
    let _ = f.atan2(x, y).expect("atan2");
    let dest = f.constant(ScalarType::F32, &[8], 0i64).expect("dest");
    let src = f.constant(ScalarType::F32, &[2], 1i64).expect("src");
    let i = f.const_i32(1).expect("index");
    let _ = f.insert(dest, src, &[i]).expect("insert");
    f.finish().expect("finish");
    m.finish()
}

#[test]
fn ops_within_their_version_are_written_and_accepted() {
    let m = atan2_insert_module();
    for v in [V13_4, V13_5] {
        let bytes = write_module(&m, v).unwrap_or_else(|e| panic!("{v}: {e}"));
        let (back, rv, pre) = read_module_with_version(&bytes).expect("read back");
        assert_eq!((rv, pre), (v, false));
        assert_eq!(back, m);
        if let Some(tool) = tileirdisasm() {
            let text = disasm(&tool, &bytes, false).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert!(text.contains("atan2") && text.contains("insert"), "{text}");
        } else {
            cutile_testkit::skip(
                "ops_within_their_version_are_written_and_accepted (tileirdisasm check)",
                &cutile_testkit::tools::not_found("tileirdisasm"),
            );
        }
    }
}

fn with_op(op: Operation, extra_values: &[Type]) -> Module {
    let mut f = Function::new_entry("k", vec![]);
    for t in extra_values {
        f.new_value(t.clone());
    }
    f.body.as_mut().expect("body").ops = vec![op, Operation::new(Opcode::Return)];
    Module {
        functions: vec![f],
        ..Module::default()
    }
}

#[test]
fn ops_newer_than_the_target_are_rejected() {
    let mut op = Operation::new(Opcode::MultimemStoreViewTko);
    op.results = vec![ValueId(0)];
    let m = with_op(op, &[Type::Token]);
    match write_module(&m, V13_4) {
        Err(WriteError::InFunction { function, source }) => {
            assert_eq!(function, "k");
            assert_eq!(
                *source,
                WriteError::TooNew {
                    what: "op `multimem_store_view_tko`".into(),
                    since: V13_5,
                    version: V13_4
                }
            );
            let text = source.to_string();
            assert!(text.contains("13.5") && text.contains("13.4"), "{text}");
        }
        other => panic!("expected a version error, got {other:?}"),
    }
    // At 13.5 the op exists, so the next problem is reported: its missing attribute.
    let e = write_module(&m, V13_5).expect_err("missing attribute");
    assert!(
        e.to_string().contains(
            "op `multimem_store_view_tko`: missing required attribute `memory_ordering_semantics`"
        ),
        "{e}"
    );
}

#[test]
fn unsupported_versions_list_the_writable_ones() {
    let m = atan2_insert_module();
    for v in [V13_1, V13_3, Version::new(13, 6), Version::new(12, 0)] {
        let e = write_module(&m, v).expect_err("not writable");
        assert!(matches!(e, WriteError::UnsupportedVersion { .. }));
        assert!(e.to_string().contains("13.4, 13.5"), "{e}");
    }
}

#[test]
fn preview_content_needs_13_5() {
    let bytes = std::fs::read(data_dir().join("preview/call_extern_in.tilebc")).expect("sample");
    let m = read_module(&bytes).expect("read");
    let e = write_module(&m, V13_4).expect_err("preview at 13.4");
    assert!(
        matches!(e, WriteError::PreviewNeedsLatest { version: V13_4, .. }),
        "{e:?}"
    );
    let out = write_module(&m, V13_5).expect("13.5");
    assert_eq!(header_version(&out).expect("header"), (V13_5, true));
    // A call alone (without a declaration in the module) is preview content too.
    let call_only = with_op(
        {
            let mut op = Operation::new(Opcode::PreviewCall);
            op.attrs[0] = Some(OpAttr::Str("ext".into()));
            op.attrs[1] = Some(OpAttr::TaggedArray(vec![]));
            op
        },
        &[],
    );
    assert!(matches!(
        write_module(&call_only, V13_4),
        Err(WriteError::PreviewNeedsLatest { .. })
    ));
    assert_eq!(
        header_version(&write_module(&call_only, V13_5).expect("13.5")).expect("hdr"),
        (V13_5, true)
    );
}

#[test]
fn malformed_ops_name_the_op_and_slot() {
    let f32t = Type::scalar_tile(ScalarType::F32);
    // addf without its rounding mode and operands.
    let mut add = Operation::new(Opcode::AddF);
    add.results = vec![ValueId(0)];
    let m = with_op(add.clone(), std::slice::from_ref(&f32t));
    let e = write_module(&m, V13_5).expect_err("missing attribute");
    assert!(
        e.to_string()
            .contains("op `addf`: missing required attribute `rounding_mode`"),
        "{e}"
    );

    add.attrs[0] = Some(OpAttr::Enum(RoundingMode::NearestEven.into()));
    let e = write_module(&with_op(add.clone(), std::slice::from_ref(&f32t)), V13_5)
        .expect_err("missing operand");
    assert!(
        e.to_string()
            .contains("op `addf`: missing required operand `lhs`"),
        "{e}"
    );

    // Wrong attribute kind.
    let mut bad = add.clone();
    bad.attrs[0] = Some(OpAttr::Int(0));
    let e = write_module(&with_op(bad, std::slice::from_ref(&f32t)), V13_5).expect_err("kind");
    assert!(
        e.to_string().contains("attribute `rounding_mode`")
            && e.to_string().contains("expected an enum"),
        "{e}"
    );

    // An operand that was never defined.
    add.operands = vec![vec![ValueId(1)], vec![ValueId(1)]];
    let e = write_module(&with_op(add, &[f32t.clone(), f32t]), V13_5).expect_err("scope");
    assert!(
        matches!(e, WriteError::InFunction { ref source, .. }
        if **source == WriteError::ValueNotInScope { op: "addf", value: 1 }),
        "{e:?}"
    );
}

#[test]
fn values_of_a_region_go_out_of_scope() {
    // for-loop yielding an inner value; using that inner value after the loop must fail.
    let i32t = Type::scalar_tile(ScalarType::I32);
    let mut m = ModuleBuilder::new();
    let mut f = m.entry("k", std::slice::from_ref(&i32t)).expect("entry");
    let n = f.param(0).expect("n");
    let (lo, one) = (f.const_i32(0).expect("lo"), f.const_i32(1).expect("one"));
    let res = f
        .for_loop(lo, n, one, &[lo], |b, iv, carried| {
            let s = b.addi(iv, carried[0])?;
            Ok(vec![s])
        })
        .expect("for");
    let _ = f.addi(res[0], n).expect("use result");
    f.finish().expect("finish");
    let m = m.finish();
    let bytes = write_module(&m, V13_5).expect("write");
    assert_eq!(read_module(&bytes).expect("read"), m);
    if let Some(tool) = tileirdisasm() {
        disasm(&tool, &bytes, false).expect("tileirdisasm accepts the loop");
    } else {
        cutile_testkit::skip(
            "values_of_a_region_go_out_of_scope (tileirdisasm check)",
            &cutile_testkit::tools::not_found("tileirdisasm"),
        );
    }

    // Move the loop-body value into the outer block: it is not in scope there.
    let mut broken = m.clone();
    let body = broken.functions[0].body.as_mut().expect("body");
    let for_op = body
        .ops
        .iter()
        .find(|o| o.opcode == Opcode::For)
        .expect("for")
        .clone();
    let inner = for_op.regions[0].ops[0].results[0];
    let last = body.ops.len() - 1;
    body.ops[last - 1].operands[0] = vec![inner];
    let e = write_module(&broken, V13_5).expect_err("out of scope");
    assert!(
        e.to_string().contains("addi") && e.to_string().contains("not in scope"),
        "{e}"
    );
}

#[test]
fn dangling_debug_references_are_errors() {
    let mut m = atan2_insert_module();
    m.functions[0].body.as_mut().expect("body").ops[0].loc = DebugRef(3);
    let e = write_module(&m, V13_5).expect_err("dangling");
    assert!(
        matches!(e, WriteError::InFunction { ref source, .. }
        if matches!(**source, WriteError::BadDebugRef { id: 3, len: 0, .. })),
        "{e:?}"
    );
}

#[test]
fn debug_attributes_round_trip() {
    let mut m = atan2_insert_module();
    let file = m.add_debug_attr(DebugAttr::File {
        name: "k.rs".into(),
        dir: "/src".into(),
    });
    let cu = m.add_debug_attr(DebugAttr::CompileUnit { file });
    let sp = m.add_debug_attr(DebugAttr::Subprogram {
        file,
        line: 3,
        name: "k".into(),
        linkage_name: "k".into(),
        compile_unit: cu,
        scope_line: 3,
        flags: 0,
    });
    let loc = m.add_debug_attr(DebugAttr::Loc {
        scope: sp,
        filename: "/src/k.rs".into(),
        line: 4,
        col: 9,
    });
    m.functions[0].loc = loc;
    m.functions[0].body.as_mut().expect("body").ops[0].loc = loc;
    for v in [V13_4, V13_5] {
        let bytes = write_module(&m, v).expect("write");
        assert_eq!(read_module(&bytes).expect("read"), m);
        if let Some(tool) = tileirdisasm() {
            disasm(&tool, &bytes, false).expect("tileirdisasm accepts debug info");
        } else {
            cutile_testkit::skip(
                "debug_attributes_round_trip (tileirdisasm check)",
                &cutile_testkit::tools::not_found("tileirdisasm"),
            );
        }
    }
}

#[test]
fn sample_kernels_from_the_builder_are_accepted() {
    use cutile_ir::samples::*;
    let modules = [
        vector_add(1024, ScalarType::F32).expect("vadd"),
        row_softmax(1024, ScalarType::F32).expect("softmax"),
        tiled_matmul(128, 128, 64, ScalarType::F16, ScalarType::F32).expect("matmul"),
    ];
    let tool = tileirdisasm();
    for m in &modules {
        for v in [V13_4, V13_5] {
            let bytes =
                write_module(m, v).unwrap_or_else(|e| panic!("{}: {e}", m.functions[0].name));
            assert_eq!(&read_module(&bytes).expect("read back"), m);
            match &tool {
                Some(t) => {
                    disasm(t, &bytes, false)
                        .unwrap_or_else(|e| panic!("{} at {v}: {e}", m.functions[0].name));
                }
                None => cutile_testkit::skip(
                    "sample_kernels_from_the_builder_are_accepted (tileirdisasm check)",
                    &cutile_testkit::tools::not_found("tileirdisasm"),
                ),
            }
        }
    }
}

/// The binary symbolic-expression tags, checked against tileirdisasm's compact printer.
#[test]
fn preview_expression_tags_match_tileirdisasm() {
    let Some(tool) = tileirdisasm() else {
        cutile_testkit::skip(
            "preview_expression_tags_match_tileirdisasm",
            &cutile_testkit::tools::not_found("tileirdisasm"),
        );
        return;
    };
    let cases = [
        (ExprBinOp::Add, Some("7+3")),
        (ExprBinOp::Sub, Some("7-3")),
        (ExprBinOp::Mul, Some("7*3")),
        (ExprBinOp::FloorDiv, Some("7/3")),
        (ExprBinOp::CeilDiv, Some("7/+3")),
        // True division is not an integer expression, so an index parameter rejects it.
        (ExprBinOp::Div, None),
    ];
    let i32t = Type::scalar_tile(ScalarType::I32);
    for (op, printed) in cases {
        let decl = Function {
            name: "ext".into(),
            kind: FunctionKind::ExternDecl {
                const_params: vec![Attribute::ConstParam {
                    name: "n".into(),
                    ty: Type::Preview(PreviewType::Index),
                }],
            },
            param_types: vec![i32t.clone()],
            result_types: vec![],
            private: true,
            arg_attrs: vec![Attribute::Dictionary(vec![(
                "cuda_tile.preview$access".into(),
                Attribute::Access(Access::In),
            )])],
            body: None,
            loc: DebugRef(0),
            values: vec![],
        };
        let mut f = Function::new_entry("k", vec![i32t.clone()]);
        let arg = f.body.as_ref().expect("body").args[0];
        let mut call = Operation::new(Opcode::PreviewCall);
        call.attrs[0] = Some(OpAttr::Str("ext".into()));
        call.attrs[1] = Some(OpAttr::TaggedArray(vec![Attribute::ExprBinary {
            op,
            lhs: Box::new(Attribute::ExprInt(7)),
            rhs: Box::new(Attribute::ExprInt(3)),
        }]));
        call.operands[0] = vec![arg];
        f.body.as_mut().expect("body").ops = vec![call, Operation::new(Opcode::Return)];
        let m = Module {
            functions: vec![f, decl],
            ..Module::default()
        };
        let bytes = write_module(&m, V13_5).expect("write");
        assert_eq!(read_module(&bytes).expect("read"), m);
        match (printed, disasm(&tool, &bytes, true)) {
            (Some(p), Ok(text)) => {
                assert!(text.contains(&format!("@ext<[{p}]>")), "{op:?}: {text}")
            }
            (None, Err(e)) => assert!(e.contains("integer"), "{op:?}: {e}"),
            (p, r) => panic!("{op:?}: expected {p:?}, got {r:?}"),
        }
    }
}

#[test]
fn read_errors_carry_offset_and_context() {
    let bytes = std::fs::read(data_dir().join("vadd_v13_5.tilebc")).expect("sample");
    // Cut inside the Func section: the error names it and points inside the file.
    let e = read_module(&bytes[..100]).expect_err("truncated");
    assert!(e.offset <= 100, "{e}");
    assert!(e.to_string().contains("section"), "{e}");
    // Corrupt the first op's opcode (make_token at offset 0x1e + body start): unknown opcode.
    let mut bad = bytes.clone();
    let body = 16 + 13; // payload at 16; the body starts after the 13-byte entry header
    assert_eq!(bad[body], 0x44, "make_token opcode expected");
    bad[body] = 0x7f;
    let e = read_module(&bad).expect_err("bad opcode");
    assert_eq!(e.offset, body);
    assert!(e.message.contains("unknown opcode 127"), "{e}");
    assert!(
        e.context.contains("Func section") && e.context.contains("function `vadd_"),
        "{e}"
    );
    // A value index out of scope in an op names the op.
    let mut bad = bytes.clone();
    // assume (06 04 08 10 00 00): the last byte is its operand %0; make it %200.
    assert_eq!(
        &bad[body + 2..body + 8],
        &[0x06, 0x04, 0x08, 0x10, 0x00, 0x00]
    );
    bad[body + 7] = 0x48;
    let e = read_module(&bad).expect_err("bad value");
    assert!(
        e.context.ends_with("op `assume`") && e.message.contains("value index 72"),
        "{e}"
    );
}

#[test]
fn globals_and_producer_round_trip() {
    use cutile_ir::builder::Const;
    let mut m = ModuleBuilder::new();
    m.producer("cutile-rs test");
    m.global(
        "g_unused",
        ScalarType::I32,
        &[Const::Int(1), Const::Int(2)],
        8,
    )
    .expect("global");
    m.global("g", ScalarType::F32, &[Const::Float(0.5)], 4)
        .expect("global");
    let mut f = m.entry("k", &[]).expect("entry");
    let _ = f.get_global("g").expect("get_global");
    f.finish().expect("finish");
    let m = m.finish();
    for v in [V13_4, V13_5] {
        let bytes = write_module(&m, v).expect("write");
        assert_eq!(read_module(&bytes).expect("read"), m);
        if let Some(tool) = tileirdisasm() {
            let text = disasm(&tool, &bytes, false).expect("tileirdisasm accepts globals");
            assert!(text.contains("// Producer: cutile-rs test"), "{text}");
            assert!(
                text.contains("@g_unused") && text.contains("get_global @g"),
                "{text}"
            );
        } else {
            cutile_testkit::skip(
                "globals_and_producer_round_trip (tileirdisasm check)",
                &cutile_testkit::tools::not_found("tileirdisasm"),
            );
        }
    }
}
