//! Shared by the printer tests: a small function builder and hand-built modules, each the same module as one
//! `tests/print_data/NAME.tilebc` (whose tileirdisasm text is `NAME.mlir`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use cutile_ir::print::normalize;
use cutile_ir::*;

/// Panics with the first differing line unless `ours` and `want` are equal after `normalize`.
pub fn assert_same_text(label: &str, ours: &str, want: &str) {
    let (a, b) = (normalize(ours), normalize(want));
    if a == b {
        return;
    }
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            panic!(
                "{label}: first difference at normalized line {i}\n ours: {x}\n want: {y}\n\nours in full:\n{ours}"
            );
        }
    }
    panic!("{label}: line counts differ\nours:\n{ours}\nwant:\n{want}");
}

/// A tiny function builder over the generic `Operation` API, so each case reads like the oracle text.
pub struct Fb {
    pub f: Function,
    pub blocks: Vec<Block>,
}

pub type Attrs<'a> = &'a [(&'a str, OpAttr)];
pub type Operands<'a> = &'a [(&'a str, &'a [ValueId])];

impl Fb {
    pub fn new(name: &str, params: Vec<Type>) -> (Fb, Vec<ValueId>) {
        let mut f = Function::new_entry(name, params);
        f.kind = FunctionKind::Entry {
            hints: OptimizationHints::default(),
        };
        let body = f.body.take().expect("entry has a body");
        let args = body.args.clone();
        (
            Fb {
                f,
                blocks: vec![body],
            },
            args,
        )
    }

    pub fn op_r(
        &mut self,
        opcode: Opcode,
        results: &[Type],
        attrs: Attrs<'_>,
        operands: Operands<'_>,
        regions: Vec<Block>,
    ) -> Vec<ValueId> {
        let mut op = Operation::new(opcode);
        let schema = opcode.schema();
        for (name, a) in attrs {
            let i = schema.attr_index(name).expect("attribute slot exists");
            op.attrs[i] = Some(a.clone());
        }
        for (name, vs) in operands {
            let i = schema.operand_index(name).expect("operand group exists");
            op.operands[i] = vs.to_vec();
        }
        op.results = results
            .iter()
            .map(|t| self.f.new_value(t.clone()))
            .collect();
        op.regions = regions;
        let out = op.results.clone();
        self.blocks
            .last_mut()
            .expect("a block is open")
            .ops
            .push(op);
        out
    }

    pub fn op(
        &mut self,
        opcode: Opcode,
        results: &[Type],
        attrs: Attrs<'_>,
        operands: Operands<'_>,
    ) -> Vec<ValueId> {
        self.op_r(opcode, results, attrs, operands, vec![])
    }

    pub fn op1(
        &mut self,
        opcode: Opcode,
        result: &Type,
        attrs: Attrs<'_>,
        operands: Operands<'_>,
    ) -> ValueId {
        self.op(opcode, std::slice::from_ref(result), attrs, operands)[0]
    }

    pub fn region(&mut self, arg_types: &[Type], body: impl FnOnce(&mut Fb, &[ValueId])) -> Block {
        let args: Vec<ValueId> = arg_types
            .iter()
            .map(|t| self.f.new_value(t.clone()))
            .collect();
        self.blocks.push(Block {
            args: args.clone(),
            ops: vec![],
        });
        body(self, &args);
        self.blocks.pop().expect("pushed above")
    }

    pub fn constant(&mut self, ty: &Type, data: Vec<u8>) -> ValueId {
        self.op1(Opcode::Constant, ty, &[("value", OpAttr::Dense(data))], &[])
    }

    pub fn ret(&mut self) {
        self.op(Opcode::Return, &[], &[], &[]);
    }

    pub fn finish(mut self) -> Module {
        self.f.body = Some(self.blocks.pop().expect("the body"));
        Module {
            functions: vec![self.f],
            ..Module::default()
        }
    }
}

pub fn en(e: impl Into<EnumValue>) -> OpAttr {
    OpAttr::Enum(e.into())
}

pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn arith_module() -> Module {
    use Opcode::*;
    let (mut b, _) = Fb::new("e1", vec![]);
    let f32t = Type::tile(ScalarType::F32, &[4]);
    let i32t = Type::tile(ScalarType::I32, &[4]);
    let i1t = Type::tile(ScalarType::I1, &[4]);
    let x = b.constant(&f32t, f32s(&[1.5]));
    let y = b.constant(&f32t, f32s(&[1.0, 2.0, 0.1, -3.0]));
    let k = b.constant(&i32t, i32s(&[1, -2, 3, 4]));
    let rm = |r: RoundingMode| ("rounding_mode", en(r));
    let xy: Operands<'_> = &[("lhs", &[x]), ("rhs", &[y])];
    let kk: Operands<'_> = &[("lhs", &[k]), ("rhs", &[k])];
    let ftz = ("flush_to_zero", OpAttr::Unit);
    b.op1(AddF, &f32t, &[rm(RoundingMode::Zero), ftz.clone()], xy);
    b.op1(
        AddF,
        &f32t,
        &[rm(RoundingMode::NearestEven), ftz.clone()],
        xy,
    );
    b.op1(MulF, &f32t, &[rm(RoundingMode::NearestEven)], xy);
    b.op1(DivF, &f32t, &[rm(RoundingMode::Approx)], xy);
    let ov = |o: IntegerOverflow| ("overflow", en(o));
    b.op1(AddI, &i32t, &[ov(IntegerOverflow::Nsw)], kk);
    b.op1(AddI, &i32t, &[ov(IntegerOverflow::None)], kk);
    b.op1(SubI, &i32t, &[ov(IntegerOverflow::Nw)], kk);
    b.op1(MulI, &i32t, &[ov(IntegerOverflow::Nuw)], kk);
    let sg = |s: Signedness| ("signedness", en(s));
    b.op1(
        DivI,
        &i32t,
        &[sg(Signedness::Signed), ("rounding", en(RoundingMode::Zero))],
        kk,
    );
    b.op1(
        DivI,
        &i32t,
        &[
            sg(Signedness::Unsigned),
            ("rounding", en(RoundingMode::PositiveInf)),
        ],
        kk,
    );
    b.op1(RemI, &i32t, &[sg(Signedness::Signed)], kk);
    let nan = ("propagate_nan", OpAttr::Unit);
    b.op1(MaxF, &f32t, &[nan.clone(), ftz.clone()], xy);
    b.op1(MinF, &f32t, &[nan], xy);
    b.op1(MaxI, &i32t, &[sg(Signedness::Unsigned)], kk);
    b.op1(
        CmpF,
        &i1t,
        &[
            ("comparison_predicate", en(ComparisonPredicate::LessThan)),
            ("comparison_ordering", en(ComparisonOrdering::Ordered)),
        ],
        xy,
    );
    let c = b.op1(
        CmpI,
        &i1t,
        &[
            ("comparison_predicate", en(ComparisonPredicate::Equal)),
            sg(Signedness::Signed),
        ],
        kk,
    );
    b.op1(
        Select,
        &f32t,
        &[],
        &[
            ("cond", &[c]),
            ("val_if_true", &[x]),
            ("val_if_false", &[y]),
        ],
    );
    let src: Operands<'_> = &[("source", &[x])];
    b.op1(Exp, &f32t, &[rm(RoundingMode::Approx)], src);
    b.op1(Exp2, &f32t, std::slice::from_ref(&ftz), src);
    b.op1(Sqrt, &f32t, &[rm(RoundingMode::Approx), ftz.clone()], src);
    b.op1(Rsqrt, &f32t, &[], src);
    b.op1(TanH, &f32t, &[rm(RoundingMode::Full)], src);
    b.op1(TanH, &f32t, &[rm(RoundingMode::Approx)], src);
    b.op1(
        Fma,
        &f32t,
        &[rm(RoundingMode::NearestEven)],
        &[("lhs", &[x]), ("rhs", &[y]), ("acc", &[x])],
    );
    b.op1(
        NegI,
        &i32t,
        &[ov(IntegerOverflow::Nsw)],
        &[("source", &[k])],
    );
    b.op1(NegF, &f32t, &[], src);
    b.op1(AbsF, &f32t, &[], src);
    b.op1(ShLI, &i32t, &[ov(IntegerOverflow::None)], kk);
    b.op1(ShRI, &i32t, &[sg(Signedness::Unsigned)], kk);
    b.op1(AndI, &i32t, &[], kk);
    b.op1(MulhiI, &i32t, &[], &[("x", &[k]), ("y", &[k])]);
    b.op1(FPowF, &f32t, &[], &[("source", &[x]), ("exponent", &[y])]);
    b.op1(FPowI, &f32t, &[], &[("source", &[x]), ("exponent", &[k])]);
    b.op1(Atan2, &f32t, &[], &[("x", &[x]), ("y", &[y])]);
    b.op1(RemF, &f32t, &[], xy);
    b.ret();
    b.finish()
}

pub fn control_flow_module() -> Module {
    use Opcode::*;
    let s32 = Type::scalar_tile(ScalarType::I32);
    let s1 = Type::scalar_tile(ScalarType::I1);
    let sf = Type::scalar_tile(ScalarType::F32);
    let f32t = Type::tile(ScalarType::F32, &[4]);
    let i32t = Type::tile(ScalarType::I32, &[4]);
    let (mut b, p) = Fb::new("e4", vec![s32.clone(), s1.clone()]);
    let (n, c) = (p[0], p[1]);
    let z = b.constant(&s32, i32s(&[0]));
    let one = b.constant(&s32, i32s(&[1]));
    let x = b.constant(&f32t, f32s(&[2.0]));
    let yield_ = |b: &mut Fb, vs: &[ValueId]| {
        b.op(Yield, &[], &[], &[("operands", vs)]);
    };
    // if with results and an else branch
    let then = b.region(&[], |b, _| yield_(b, &[x, z]));
    let els = b.region(&[], |b, _| {
        let y = b.op1(NegF, &f32t, &[], &[("source", &[x])]);
        yield_(b, &[y, one]);
    });
    b.op_r(
        If,
        &[f32t.clone(), s32.clone()],
        &[],
        &[("condition", &[c])],
        vec![then, els],
    );
    // if without results: empty yields are implicit
    let then = b.region(&[], |b, _| {
        b.op1(NegF, &f32t, &[], &[("source", &[x])]);
        yield_(b, &[]);
    });
    let els = b.region(&[], |b, _| yield_(b, &[]));
    b.op_r(If, &[], &[], &[("condition", &[c])], vec![then, els]);
    let then = b.region(&[], |b, _| yield_(b, &[]));
    let els = b.region(&[], |b, _| yield_(b, &[]));
    b.op_r(If, &[], &[], &[("condition", &[c])], vec![then, els]);
    // for, unsigned, no iter values
    let bounds: [(&str, &[ValueId]); 3] =
        [("lowerBound", &[z]), ("upperBound", &[n]), ("step", &[one])];
    let body = b.region(std::slice::from_ref(&s32), |b, _| {
        b.op(Continue, &[], &[], &[]);
    });
    b.op_r(
        For,
        &[],
        &[("unsignedCmp", OpAttr::Unit)],
        &bounds,
        vec![body],
    );
    // for with two iter values
    let body = b.region(&[s32.clone(), f32t.clone(), s32.clone()], |b, a| {
        let acc = b.op1(
            AddF,
            &f32t,
            &[("rounding_mode", en(RoundingMode::NearestEven))],
            &[("lhs", &[a[1]]), ("rhs", &[a[1]])],
        );
        b.op(Continue, &[], &[], &[("operands", &[acc, a[0]])]);
    });
    let init = [x, z];
    let mut ops: Vec<(&str, &[ValueId])> = bounds.to_vec();
    ops.push(("initValues", &init));
    b.op_r(For, &[f32t.clone(), s32.clone()], &[], &ops, vec![body]);
    // loop with an iter value, a conditional break and a continue
    let body = b.region(std::slice::from_ref(&s32), |b, a| {
        let cc = b.op1(
            CmpI,
            &s1,
            &[
                ("comparison_predicate", en(ComparisonPredicate::GreaterThan)),
                ("signedness", en(Signedness::Signed)),
            ],
            &[("lhs", &[a[0]]), ("rhs", &[n])],
        );
        let then = b.region(&[], |b, _| {
            b.op(Break, &[], &[], &[("operands", &[a[0]])]);
        });
        let els = b.region(&[], |b, _| yield_(b, &[]));
        b.op_r(If, &[], &[], &[("condition", &[cc])], vec![then, els]);
        let v2 = b.op1(
            AddI,
            &s32,
            &[("overflow", en(IntegerOverflow::None))],
            &[("lhs", &[a[0]]), ("rhs", &[one])],
        );
        b.op(Continue, &[], &[], &[("operands", &[v2])]);
    });
    b.op_r(
        Loop,
        std::slice::from_ref(&s32),
        &[],
        &[("initValues", &[z])],
        vec![body],
    );
    let body = b.region(&[], |b, _| {
        b.op(Break, &[], &[], &[]);
    });
    b.op_r(Loop, &[], &[], &[], vec![body]);
    let body = b.region(&[], |b, _| {
        b.op(Break, &[], &[], &[("operands", &[z])]);
    });
    b.op_r(Loop, std::slice::from_ref(&s32), &[], &[], vec![body]);
    // reduce over two operands, then a reverse scan
    let m = b.constant(&i32t, i32s(&[3]));
    let ids = OpAttr::TaggedArray(vec![Attribute::f32(0.5), Attribute::i32(-1)]);
    let body = b.region(
        &[sf.clone(), sf.clone(), s32.clone(), s32.clone()],
        |b, a| {
            let r1 = b.op1(
                AddF,
                &sf,
                &[("rounding_mode", en(RoundingMode::NearestEven))],
                &[("lhs", &[a[0]]), ("rhs", &[a[1]])],
            );
            let r2 = b.op1(
                MaxI,
                &s32,
                &[("signedness", en(Signedness::Signed))],
                &[("lhs", &[a[2]]), ("rhs", &[a[3]])],
            );
            yield_(b, &[r1, r2]);
        },
    );
    b.op_r(
        Reduce,
        &[sf.clone(), s32.clone()],
        &[("dim", OpAttr::Int(0)), ("identities", ids)],
        &[("operands", &[x, m])],
        vec![body],
    );
    let body = b.region(&[sf.clone(), sf.clone()], |b, a| {
        let r = b.op1(
            MulF,
            &sf,
            &[("rounding_mode", en(RoundingMode::NearestEven))],
            &[("lhs", &[a[0]]), ("rhs", &[a[1]])],
        );
        yield_(b, &[r]);
    });
    b.op_r(
        Scan,
        std::slice::from_ref(&f32t),
        &[
            ("dim", OpAttr::Int(0)),
            ("reverse", OpAttr::Bool(true)),
            ("identities", OpAttr::TaggedArray(vec![Attribute::f32(1.0)])),
        ],
        &[("operands", &[x])],
        vec![body],
    );
    b.ret();
    b.finish()
}

/// Every `(bytecode, tileirdisasm text)` pair the printer is checked against: the reference samples
/// (`shared/data/tileir-samples`, or the copies in `tests/bytecode_data`) and `tests/print_data`. Files without
/// a text, and the extern-implementation attempt that tileirdisasm rejects, are left out.
pub fn oracle_pairs() -> Vec<(PathBuf, PathBuf)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = here.join("../../../shared/data/tileir-samples");
    let samples = if shared.is_dir() {
        shared
    } else {
        here.join("tests/bytecode_data")
    };
    let mut out = vec![];
    for dir in [
        samples.clone(),
        samples.join("preview"),
        here.join("tests/print_data"),
    ] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let bc = e.path();
            let Some(stem) = bc
                .file_name()
                .and_then(|n| n.to_str()?.strip_suffix(".tilebc"))
            else {
                continue;
            };
            if stem.contains("rejected") {
                continue;
            }
            let text = [format!("{stem}.tileir.mlir"), format!("{stem}.mlir")]
                .into_iter()
                .map(|n| dir.join(n))
                .find(|p| p.is_file());
            if let Some(text) = text {
                out.push((bc, text));
            }
        }
    }
    out.sort();
    out
}

/// `tileirdisasm`: env `CUTILE_TILEIRDISASM`, else the toolchain cache, else `PATH`.
pub fn tileirdisasm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CUTILE_TILEIRDISASM") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    let cached = home.join(".cache/cutile/toolchain/13.5.37/nvidia/cu13/bin/tileirdisasm");
    if cached.is_file() {
        return Some(cached);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("tileirdisasm"))
        .find(|p| p.is_file())
}

/// tileirdisasm's text for `bytes` (`--preview=simt` when `preview`); `Err` carries its diagnostics.
pub fn disassemble(tool: &Path, name: &str, bytes: &[u8], preview: bool) -> Result<String, String> {
    let file =
        std::env::temp_dir().join(format!("cutile-print-{}-{name}.tilebc", std::process::id()));
    std::fs::write(&file, bytes).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let mut cmd = Command::new(tool);
    if preview {
        cmd.arg("--preview=simt");
    }
    let out = cmd.arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| format!("running {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An entry calling two extern declarations with constant parameters of every kind (index, string,
/// datatype, shape), the way `#[cutile::foreign]` lowers foreign calls: two leading ordering tokens, constant
/// arguments as symbolic expressions.
pub fn preview_const_module() -> Module {
    use Opcode::*;
    let sf = Type::scalar_tile(ScalarType::F32);
    let f4 = Type::tile(ScalarType::F32, &[4]);
    let cp = |name: &str, kind: PreviewType| Attribute::ConstParam {
        name: name.into(),
        ty: Type::Preview(kind),
    };
    let decl = Function::new_extern_decl(
        "lib_fn",
        &[(f4.clone(), Access::In), (f4.clone(), Access::Out)],
        std::slice::from_ref(&f4),
        vec![
            cp("size", PreviewType::Index),
            cp("direction", PreviewType::String),
            cp("dtype", PreviewType::Datatype),
            cp("shape", PreviewType::Shape),
        ],
    );
    let decl2 = Function::new_extern_decl(
        "plain_fn",
        &[(sf.clone(), Access::InOut)],
        std::slice::from_ref(&sf),
        vec![],
    );
    let (mut b, args) = Fb::new("caller", vec![sf.clone()]);
    let tok = b.op1(MakeToken, &Type::Token, &[], &[]);
    let zero = b.constant(&f4, f32s(&[0.0]));
    let r = b.op(
        PreviewCall,
        &[Type::Token, Type::Token, f4.clone()],
        &[
            ("callee", OpAttr::Str("lib_fn".into())),
            (
                "const_args",
                OpAttr::TaggedArray(vec![
                    Attribute::ExprInt(16),
                    Attribute::ExprConstStr("lower".into()),
                    Attribute::ConcreteType(Type::Scalar(ScalarType::F32)),
                    Attribute::SymbolicTuple(vec![Attribute::ExprInt(4), Attribute::ExprInt(-2)]),
                ]),
            ),
        ],
        &[("operands", &[tok, tok, zero, zero])],
    );
    let j = b.op1(JoinTokens, &Type::Token, &[], &[("tokens", &r[..2])]);
    b.op(
        PreviewCall,
        &[Type::Token, Type::Token, sf.clone()],
        &[
            ("callee", OpAttr::Str("plain_fn".into())),
            ("const_args", OpAttr::TaggedArray(vec![])),
        ],
        &[("operands", &[j, j, args[0]])],
    );
    b.ret();
    let mut m = b.finish();
    m.functions.push(decl);
    m.functions.push(decl2);
    m
}
