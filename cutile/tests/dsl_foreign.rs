//! Foreign tile-function calls from kernels: declarations and calls in the traced IR (access attributes,
//! constant parameters and symbolic constant arguments, zero-filled outputs, token ordering through loops and
//! helpers), bytecode that `tileirdisasm --preview=simt` reads, and trace-time errors.

#![allow(clippy::unwrap_used, clippy::missing_safety_doc)]

use cutile::dsl::TensorMeta;
use cutile_ir::ScalarType::*;
use cutile_ir::{Access, Attribute, FunctionKind, Opcode, PreviewType, Type};

/// A tag type whose associated const names a mode.
pub trait FillMode {
    const NAME: &'static str;
}
#[derive(Debug)]
pub struct Lower;
impl FillMode for Lower {
    const NAME: &'static str = "lower";
}
#[derive(Debug)]
pub struct Upper;
impl FillMode for Upper {
    const NAME: &'static str = "upper";
}

const MODE: &str = "fast";

#[cutile::module]
pub mod kernels {
    use super::FillMode;
    use cutile::core::*;

    /// in-only, no results.
    #[cutile::foreign(name = "ext")]
    pub unsafe fn ext_in(x: Tile<f32, S1<16>>);

    /// in + out: the output is passed zero-filled after the parameters.
    #[cutile::foreign(name = "lib.scale$v1")]
    pub unsafe fn scale<const N: i32, T: ElementType>(
        mode: &str,
        x: Tile<f32, S1<16>>,
        s: Scalar<f32>,
    ) -> Tile<f32, S1<16>>;

    /// inout + out, constant arguments in an explicit order.
    #[cutile::foreign(name = "acc", const_args = "S, kind")]
    pub unsafe fn acc<S: Shape>(
        kind: &str,
        #[inout] a: Tile<f32, S1<16>>,
        b: Tile<f32, S1<16>>,
    ) -> (Tile<f32, S1<16>>, Scalar<i32>);

    /// A device helper taking a constant string through a parameter.
    fn helper(kind: ForeignStr, a: Tile<f32, S1<16>>, b: Tile<f32, S1<16>>) -> Tile<f32, S1<16>> {
        let (r, _) = unsafe { acc::<S2<4, 4>>(kind, a, b) };
        r
    }

    /// A helper generic over a tag type: the string is `<F as FillMode>::NAME`.
    fn acc_loop<F: FillMode>(a: Tile<f32, S1<16>>, t: Tile<f32, S1<16>>) -> Tile<f32, S1<16>> {
        let mut a = a;
        for _i in 0..4i32 {
            let (r, _) = unsafe { acc::<S2<4, 4>>(<F as FillMode>::NAME, a, t) };
            a = r;
        }
        a
    }

    #[cutile::entry]
    pub fn calls(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<16>>) {
        let t = x.load_tile::<S1<16>>(block_id_x());
        let m = "slow";
        unsafe { ext_in(t) };
        let u = unsafe { scale::<8, f16>(super::MODE, t, scalar(2.0f32)) };
        let v = unsafe { scale::<8, f16>(m, u, scalar(3.0f32)) };
        let a = acc_loop::<super::Lower>(v, t);
        let (b, _) = unsafe { acc::<S2<4, 4>>(super::Upper::NAME, a, t) };
        let w = helper("lit", b, t);
        y.store(w);
    }
}

fn metas() -> Vec<TensorMeta> {
    vec![
        TensorMeta::contiguous(F32, &[64]),
        TensorMeta::contiguous(F32, &[64]),
    ]
}

fn access(f: &cutile_ir::Function) -> Vec<Access> {
    f.arg_attrs
        .iter()
        .map(|d| match d {
            Attribute::Dictionary(kv) => match kv.as_slice() {
                [(k, Attribute::Access(a))] if k == "cuda_tile.preview$access" => *a,
                other => panic!("unexpected arg attrs {other:?}"),
            },
            other => panic!("unexpected arg attr {other:?}"),
        })
        .collect()
}

fn calls_in(b: &cutile_ir::Block, out: &mut Vec<cutile_ir::Operation>) {
    for op in &b.ops {
        if op.opcode == Opcode::PreviewCall {
            out.push(op.clone());
        }
        for r in &op.regions {
            calls_in(r, out);
        }
    }
}

#[test]
fn declarations_and_calls() {
    let s = kernels::calls::kernel().specialize(&metas()).unwrap();
    let text = s.ir_text();
    cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5).unwrap();
    let decl = |n: &str| s.module.functions.iter().find(|f| f.name == n).unwrap();
    let t16 = Type::tile(F32, &[16]);
    let ext = decl("ext");
    assert!(ext.private && ext.body.is_none(), "{text}");
    assert_eq!(access(ext), [Access::In]);
    assert_eq!(ext.param_types, std::slice::from_ref(&t16));
    let scale = decl("lib.scale$v1");
    assert_eq!(access(scale), [Access::In, Access::In, Access::Out]);
    assert_eq!(
        scale.param_types,
        [t16.clone(), Type::scalar_tile(F32), t16.clone()]
    );
    assert_eq!(scale.result_types, std::slice::from_ref(&t16));
    let FunctionKind::ExternDecl { const_params } = &scale.kind else {
        panic!("{text}")
    };
    let kinds: Vec<(String, Type)> = const_params
        .iter()
        .map(|c| match c {
            Attribute::ConstParam { name, ty } => (name.clone(), ty.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("mode".to_string(), Type::Preview(PreviewType::String)),
            ("N".to_string(), Type::Preview(PreviewType::Index)),
            ("T".to_string(), Type::Preview(PreviewType::Datatype)),
        ]
    );
    let acc = decl("acc");
    assert_eq!(access(acc), [Access::InOut, Access::In, Access::Out]);
    assert_eq!(acc.result_types, [t16.clone(), Type::scalar_tile(I32)]);

    let mut calls = vec![];
    calls_in(s.module.functions[0].body.as_ref().unwrap(), &mut calls);
    let consts: Vec<(String, Vec<Attribute>)> = calls
        .iter()
        .map(|c| {
            let callee = match c.attr("callee") {
                Some(cutile_ir::OpAttr::Str(s)) => s.clone(),
                other => panic!("{other:?}"),
            };
            let args = match c.attr("const_args") {
                Some(cutile_ir::OpAttr::TaggedArray(a)) => a.clone(),
                other => panic!("{other:?}"),
            };
            (callee, args)
        })
        .collect();
    let shape44 = Attribute::SymbolicTuple(vec![Attribute::ExprInt(4), Attribute::ExprInt(4)]);
    let str_ = |s: &str| Attribute::ExprConstStr(s.into());
    let scale_args = |m: &str| {
        vec![
            str_(m),
            Attribute::ExprInt(8),
            Attribute::ConcreteType(Type::Scalar(F16)),
        ]
    };
    assert_eq!(
        consts,
        [
            ("ext".to_string(), vec![]),
            ("lib.scale$v1".to_string(), scale_args("fast")),
            ("lib.scale$v1".to_string(), scale_args("slow")),
            ("acc".to_string(), vec![shape44.clone(), str_("lower")]),
            ("acc".to_string(), vec![shape44.clone(), str_("upper")]),
            ("acc".to_string(), vec![shape44, str_("lit")]),
        ],
        "{text}"
    );
    // Every call takes two ordering tokens and returns two (Tile C++'s convention).
    for c in &calls {
        let ops = &c.operands[0];
        let types: Vec<Type> = ops[..2]
            .iter()
            .map(|v| s.module.functions[0].value_type(*v).unwrap().clone())
            .collect();
        assert_eq!(types, [Type::Token, Type::Token], "{text}");
    }
}

#[test]
fn calls_are_chained_by_tokens_through_loops_and_stores() {
    let s = kernels::calls::kernel().specialize(&metas()).unwrap();
    let text = s.ir_text();
    // The loop carries the call token; the store after the calls waits for them.
    assert!(text.contains("for "), "{text}");
    let body = s.module.functions[0].body.as_ref().unwrap();
    let for_op = body.ops.iter().find(|o| o.opcode == Opcode::For).unwrap();
    let carried_tokens = for_op
        .results
        .iter()
        .filter(|v| s.module.functions[0].value_type(**v) == Some(&Type::Token))
        .count();
    assert!(carried_tokens >= 1, "{text}");
    let store = body
        .ops
        .iter()
        .rev()
        .find(|o| o.opcode == Opcode::StoreViewTko)
        .unwrap();
    let tok = *store.operands.iter().flatten().last().unwrap();
    // The store's token comes from the join after the last call, not the entry token.
    let producer = body.ops.iter().find(|o| o.results.contains(&tok)).unwrap();
    assert_eq!(producer.opcode, Opcode::JoinTokens, "{text}");
}

#[test]
fn bytecode_has_preview_flag_and_tileirdisasm_reads_it() {
    let s = kernels::calls::kernel().specialize(&metas()).unwrap();
    let bc = s.bytecode(cutile_ir::V13_5).unwrap();
    let (_, version, preview) = cutile_ir::bytecode::read_module_with_version(&bc).unwrap();
    assert_eq!(version.to_string(), "13.5");
    assert!(preview, "the preview flag must be set");
    match cutile::toolchain::Tileiras::discover() {
        Ok(t) => {
            let text = t.disassemble(&bc, true).unwrap();
            assert!(
                text.contains("preview$func extern @\"lib.scale$v1\"")
                    || text.contains("preview$func extern @lib.scale$v1"),
                "{text}"
            );
            assert!(text.contains("preview$call @acc"), "{text}");
            assert!(text.contains("preview$access<inout>"), "{text}");
            // Our printer shows the DSL's foreign declarations and calls (constant parameters of every kind,
            // string/datatype/index constant arguments) exactly as tileirdisasm does.
            let (ours, theirs) = (
                cutile_ir::print::normalize(&s.ir_text()),
                cutile_ir::print::normalize(&text),
            );
            assert_eq!(ours, theirs, "ours:\n{ours}\ntileirdisasm:\n{theirs}");
        }
        Err(e) => cutile_testkit::skip(
            "bytecode_has_preview_flag_and_tileirdisasm_reads_it (tileirdisasm part)",
            &format!("no toolchain ({e})"),
        ),
    }
}

mod host {
    use super::*;
    use cutile::launch::{CompileOptions, LaunchError, TileLibrarySpec, plan};
    use cutile::toolchain::GpuArch;
    use std::path::PathBuf;

    fn sample(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data/tileir-samples/preview")
            .join(name)
    }

    fn key_with(options: &CompileOptions) -> Result<cutile::launch::Plan, LaunchError> {
        plan(
            &kernels::calls::kernel(),
            &metas(),
            GpuArch::Sm90,
            options,
            cutile::launch::NO_TOOLCHAIN,
        )
    }

    #[test]
    fn foreign_calls_without_a_library_name_the_functions() {
        let err = key_with(&CompileOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LaunchError::NoTileLibrary { .. }), "{msg}");
        for f in ["`ext`", "`lib.scale$v1`", "`acc`"] {
            assert!(msg.contains(f), "{msg}");
        }
    }

    #[test]
    fn missing_library_file_is_named() {
        let o =
            CompileOptions::default().tile_library(TileLibrarySpec::new("/nonexistent/x.tilelib"));
        let err = key_with(&o).unwrap_err();
        assert!(matches!(err, LaunchError::TileLibrary { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/x.tilelib"), "{err}");
    }

    #[test]
    fn libraries_are_canonical_sorted_deduplicated_and_keyed_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, dep) = (
            dir.path().join("a.tilelib"),
            dir.path().join("b.tilelib"),
            dir.path().join("d.bin"),
        );
        std::fs::copy(sample("lib1.tilelib"), &a).unwrap();
        std::fs::copy(sample("lib2.tilelib"), &b).unwrap();
        std::fs::write(&dep, b"v1").unwrap();
        let spec_b = TileLibrarySpec::new(dir.path().join("./b.tilelib")).dependency(&dep);
        let o = CompileOptions::default()
            .tile_library(spec_b.clone())
            .tile_library(TileLibrarySpec::new(&a))
            .tile_library(spec_b.clone());
        let p = key_with(&o).unwrap();
        let canon = |p: &PathBuf| std::fs::canonicalize(p).unwrap();
        assert_eq!(p.libraries.link, [canon(&a), canon(&b), canon(&dep)]);
        let r = p.request();
        assert_eq!(r.preview, [cutile::toolchain::PreviewFeature::Simt]);
        let args: Vec<String> = r
            .option_args()
            .unwrap()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        assert!(joined.contains("--preview=simt -l "), "{joined}");
        // Same paths, other dependency content → other key; a setting → other key.
        let k1 = p.key.clone();
        std::fs::write(&dep, b"v2").unwrap();
        let k2 = key_with(&o).unwrap().key;
        assert_ne!(k1, k2);
        let o3 = CompileOptions::default()
            .tile_library(spec_b.setting("variant", "fast"))
            .tile_library(TileLibrarySpec::new(&a));
        assert_ne!(key_with(&o3).unwrap().key, k2);
        // Order and duplicates do not matter.
        let o4 = CompileOptions::default()
            .tile_library(TileLibrarySpec::new(&a))
            .tile_library(TileLibrarySpec::new(&b).dependency(&dep));
        assert_eq!(key_with(&o4).unwrap().key, k2);
    }

    #[test]
    fn kernels_without_foreign_calls_link_nothing() {
        #[cutile::module]
        mod plain {
            use cutile::core::*;
            #[cutile::entry]
            pub fn copy(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<16>>) {
                y.store(x.load_tile::<S1<16>>(block_id_x()));
            }
        }
        let lib =
            CompileOptions::default().tile_library(TileLibrarySpec::new("/nonexistent/x.tilelib"));
        let with = plan(
            &plain::copy::kernel(),
            &metas(),
            GpuArch::Sm90,
            &lib,
            cutile::launch::NO_TOOLCHAIN,
        )
        .unwrap();
        let without = plan(
            &plain::copy::kernel(),
            &metas(),
            GpuArch::Sm90,
            &Default::default(),
            cutile::launch::NO_TOOLCHAIN,
        )
        .unwrap();
        assert!(with.libraries.link.is_empty());
        assert!(with.request().preview.is_empty() && with.request().libraries.is_empty());
        assert_eq!(with.key, without.key);
    }
}

/// The same declarations as `foreign_fixtures/calls.cu` (Tile C++), called in the same order.
#[cutile::module]
pub mod oracle {
    use cutile::core::*;

    #[cutile::foreign]
    pub unsafe fn ext_in(x: Scalar<f32>);
    #[cutile::foreign]
    pub unsafe fn ext_ret(x: Scalar<f32>, y: Scalar<i32>) -> Scalar<f32>;
    #[cutile::foreign]
    pub unsafe fn ext_nt<const N: i32, T: ElementType>(
        x: Scalar<f32>,
        y: Scalar<i32>,
    ) -> Scalar<f32>;

    #[cutile::entry]
    pub fn k(x: Scalar<f32>, y: Scalar<i32>) {
        unsafe {
            ext_in(x);
            let a = ext_ret(x, y);
            let b = ext_nt::<8, i16>(a, y);
            ext_in(b);
        }
    }
}

/// One call as the reader sees it: callee, constant arguments, operand and result types, and which operands
/// are zero constants.
#[derive(Debug, PartialEq)]
struct CallShape {
    callee: String,
    const_args: Vec<Attribute>,
    operands: Vec<Type>,
    results: Vec<Type>,
    zero_operands: Vec<bool>,
}

fn call_shapes(m: &cutile_ir::Module) -> Vec<CallShape> {
    let f = m
        .functions
        .iter()
        .find(|f| matches!(f.kind, FunctionKind::Entry { .. }))
        .unwrap();
    let body = f.body.as_ref().unwrap();
    let mut calls = vec![];
    calls_in(body, &mut calls);
    let is_zero = |v: cutile_ir::ValueId| {
        body.ops.iter().any(|o| {
            o.opcode == Opcode::Constant
                && o.results.contains(&v)
                && matches!(o.attr("value"), Some(cutile_ir::OpAttr::Dense(b)) if b.iter().all(|x| *x == 0))
        })
    };
    calls
        .iter()
        .map(|c| CallShape {
            callee: match c.attr("callee") {
                Some(cutile_ir::OpAttr::Str(s)) => s.clone(),
                other => panic!("{other:?}"),
            },
            const_args: match c.attr("const_args") {
                Some(cutile_ir::OpAttr::TaggedArray(a)) => a.clone(),
                other => panic!("{other:?}"),
            },
            operands: c.operands[0]
                .iter()
                .map(|v| f.value_type(*v).unwrap().clone())
                .collect(),
            results: c
                .results
                .iter()
                .map(|v| f.value_type(*v).unwrap().clone())
                .collect(),
            zero_operands: c.operands[0].iter().map(|v| is_zero(*v)).collect(),
        })
        .collect()
}

#[test]
fn calls_match_tile_cpp_through_nvcc() {
    let fixture = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/foreign_fixtures/calls.tilebc"
    ))
    .unwrap();
    let (theirs, version, preview) =
        cutile_ir::bytecode::read_module_with_version(&fixture).unwrap();
    assert!(preview && version.to_string() == "13.5");
    let s = oracle::k::kernel().specialize(&[]).unwrap();
    let ours_bc = s.bytecode(cutile_ir::V13_5).unwrap();
    let ours = cutile_ir::bytecode::read_module(&ours_bc).unwrap();
    let (a, b) = (call_shapes(&ours), call_shapes(&theirs));
    assert_eq!(a.len(), 4);
    assert_eq!(a, b, "ours:\n{}", s.ir_text());
    // Tile C++ emits no declaration; ours must describe exactly the tile operands and results nvcc passes:
    // parameters `in`, the zero-filled trailing operands `out`.
    assert!(
        !theirs
            .functions
            .iter()
            .any(|f| matches!(f.kind, FunctionKind::ExternDecl { .. }))
    );
    for c in &b {
        let d = ours.functions.iter().find(|f| f.name == c.callee).unwrap();
        assert_eq!(d.param_types, c.operands[2..], "{}", c.callee);
        assert_eq!(d.result_types, c.results[2..], "{}", c.callee);
        let want: Vec<Access> = c.zero_operands[2..]
            .iter()
            .map(|z| if *z { Access::Out } else { Access::In })
            .collect();
        assert_eq!(access(d), want, "{}", c.callee);
        let FunctionKind::ExternDecl { const_params } = &d.kind else {
            panic!()
        };
        assert_eq!(const_params.len(), c.const_args.len());
    }
}
