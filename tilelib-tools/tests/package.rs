//! `package`: the checks made before tileiras runs (no tileiras needed), then packaging with tileiras —
//! the shared interface with bytecode + LTOIR / cubin / fatbin, an interface built with the cutile-ir data
//! model and writer, and tileiras's own refusals explained. Tests needing tileiras print SKIPPED without it.

mod common;

use cutile_ir::{Access, Attribute, Function, Module, PreviewType, ScalarType, Type};
use std::path::{Path, PathBuf};
use tilelib_tools::container::{self, TileLib};
use tilelib_tools::interface::ConstKind;
use tilelib_tools::kind::FileKind;
use tilelib_tools::package::{self, PackageError};

/// Writes test inputs into a temporary directory.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().expect("tempdir"))
    }
    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.path().join(name);
        std::fs::write(&p, bytes).expect("write test input");
        p
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// Inputs every test can use: interface, bytecode implementation, LTOIR, fatbin, cubin, junk.
struct Inputs {
    dir: Dir,
    interface: PathBuf,
    bytecode: PathBuf,
    ltoir: PathBuf,
    fatbin: PathBuf,
    cubin: PathBuf,
    junk: PathBuf,
}

fn inputs() -> Inputs {
    let dir = Dir::new();
    let ifc = common::read("tilelib_interface.tilebc");
    Inputs {
        interface: dir.file("interface.tilebc", &ifc),
        // As in lib1/lib2: the declarations module stands in for the implementation bytecode.
        bytecode: dir.file("impl.tilebc", &ifc),
        ltoir: dir.file("twice.ltoir", &common::read("twice_sm90.ltoir")),
        fatbin: dir.file("twice.fatbin", &common::read("twice_sm90.fatbin")),
        cubin: dir.file("k.cubin", &common::sample_cubin()),
        junk: dir.file("notes.txt", b"not an implementation"),
        dir,
    }
}

#[test]
fn checks_before_tileiras() {
    let i = inputs();
    let with_entry = i.dir.file(
        "with_entry.tilebc",
        &common::read("call_extern_in_out.tilebc"),
    );
    let mut old = common::read("tilelib_interface.tilebc");
    old[9] = 4; // header minor version 13.4
    let old = i.dir.file("old.tilebc", &old);
    let absent = i.dir.path("absent.cubin");
    type Case<'a> = (
        &'a str,
        &'a Path,
        Vec<&'a PathBuf>,
        fn(&PackageError) -> bool,
    );
    let cases: Vec<Case> = vec![
        ("interface not bytecode", &i.ltoir, vec![&i.bytecode], |e| {
            matches!(
                e,
                PackageError::InterfaceNotBytecode {
                    kind: FileKind::Ltoir,
                    ..
                }
            )
        }),
        (
            "interface with an entry",
            &with_entry,
            vec![&i.bytecode],
            |e| matches!(e, PackageError::InterfaceNotOnlyDeclarations { functions, .. } if functions == &["entry `k`"]),
        ),
        ("interface at 13.4", &old, vec![&i.bytecode], |e| {
            matches!(
                e,
                PackageError::WrongBytecodeVersion {
                    role: "interface",
                    ..
                }
            )
        }),
        (
            "implementation at 13.4",
            &i.interface,
            vec![&old, &i.ltoir],
            |e| {
                matches!(
                    e,
                    PackageError::WrongBytecodeVersion {
                        role: "implementation",
                        ..
                    }
                )
            },
        ),
        ("interface only", &i.interface, vec![], |e| {
            matches!(e, PackageError::NoImplementation)
        }),
        ("cubin only", &i.interface, vec![&i.cubin], |e| {
            matches!(e, PackageError::PrecompiledWithoutBytecode { .. })
        }),
        (
            "unknown kind",
            &i.interface,
            vec![&i.bytecode, &i.junk],
            |e| matches!(e, PackageError::UnknownImplementation { .. }),
        ),
        (
            "two bytecodes",
            &i.interface,
            vec![&i.bytecode, &i.bytecode, &i.ltoir],
            |e| matches!(e, PackageError::SeveralBytecodes { paths } if paths.len() == 2),
        ),
        (
            "two pre-compiled",
            &i.interface,
            vec![&i.bytecode, &i.ltoir, &i.cubin],
            |e| matches!(e, PackageError::SeveralPrecompiled { paths } if paths.len() == 2),
        ),
        ("missing file", &i.interface, vec![&absent], |e| {
            matches!(e, PackageError::Io { .. })
        }),
    ];
    for (what, interface, impls, expected) in cases {
        let impls: Vec<PathBuf> = impls.into_iter().cloned().collect();
        match package::validate(interface, &impls) {
            Ok(plan) => panic!("{what}: accepted: {plan}"),
            Err(e) => assert!(expected(&e), "{what}: unexpected error {e}"),
        }
    }
}

#[test]
fn accepted_combinations() -> Result<(), Box<dyn std::error::Error>> {
    let i = inputs();
    for (impls, warned) in [
        (vec![i.bytecode.clone(), i.ltoir.clone()], false),
        (vec![i.bytecode.clone(), i.cubin.clone()], false),
        (vec![i.fatbin.clone(), i.bytecode.clone()], false),
        (vec![i.bytecode.clone()], true),
    ] {
        let plan = package::validate(&i.interface, &impls)?;
        assert_eq!(plan.interface.functions.len(), 1);
        assert_eq!(plan.implementations.len(), impls.len());
        assert_eq!(!plan.warnings.is_empty(), warned, "{impls:?}");
    }
    Ok(())
}

/// tileiras packages the shared interface with each kind of pre-compiled code; the result inspects as
/// expected and is exactly what our container writer produces for the same files.
#[test]
fn tileiras_packages_each_precompiled_kind() -> Result<(), Box<dyn std::error::Error>> {
    let Some(tileiras) = common::tileiras("tileiras_packages_each_precompiled_kind") else {
        return Ok(());
    };
    let i = inputs();
    for (pre, kind) in [
        (&i.ltoir, FileKind::Ltoir),
        (&i.fatbin, FileKind::Fatbin),
        (&i.cubin, FileKind::Cubin { sm: Some(90) }),
    ] {
        let out = i.dir.path("out.tilelib");
        let impls = vec![i.bytecode.clone(), pre.clone()];
        package::package(&tileiras, &i.interface, &impls, &out)?;
        let bytes = std::fs::read(&out)?;
        let report = tilelib_tools::inspect::inspect(&bytes)?;
        let kinds: Vec<FileKind> = report
            .implementations
            .iter()
            .map(|x| x.kind.clone())
            .collect();
        assert_eq!(kinds, vec![common::bytecode_13_5_preview(), kind]);
        assert_eq!(report.interface.functions[0].symbol, "ext");
        let ours = container::write(&TileLib {
            interface: std::fs::read(&i.interface)?,
            implementations: vec![std::fs::read(&impls[0])?, std::fs::read(&impls[1])?],
        })?;
        assert_eq!(
            ours, bytes,
            "our writer reproduces tileiras's container byte for byte"
        );
    }
    Ok(())
}

/// tileiras's refusals (no checks of ours in the way) come back explained in plain words.
#[test]
fn tileiras_refusals_are_explained() -> Result<(), Box<dyn std::error::Error>> {
    let Some(tileiras) = common::tileiras("tileiras_refusals_are_explained") else {
        return Ok(());
    };
    let i = inputs();
    let with_entry = i.dir.file(
        "with_entry.tilebc",
        &common::read("call_extern_in_out.tilebc"),
    );
    let fallback = package::explain(&[]);
    let cases: [(&str, &Path, Vec<PathBuf>, &str); 4] = [
        ("interface only", &i.interface, vec![], "no implementation"),
        (
            "cubin only",
            &i.interface,
            vec![i.cubin.clone()],
            "cannot stand alone",
        ),
        (
            "two bytecodes",
            &i.interface,
            vec![i.bytecode.clone(), i.bytecode.clone()],
            "exactly one",
        ),
        (
            "interface with an entry",
            &with_entry,
            vec![i.bytecode.clone()],
            "besides foreign function declarations",
        ),
    ];
    for (what, interface, impls, phrase) in cases {
        let out = i.dir.path("refused.tilelib");
        match package::create(&tileiras, interface, &impls, &out) {
            Err(PackageError::Refused {
                explanation,
                messages,
                ..
            }) => {
                assert_ne!(
                    explanation, fallback,
                    "{what}: not recognised: {messages:?}"
                );
                assert!(explanation.contains(phrase), "{what}: {explanation}");
                assert!(!out.exists(), "{what}: no output on refusal");
            }
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
    }
    Ok(())
}

/// An extern declaration built with the data model.
fn extern_decl(
    name: &str,
    consts: &[(&str, PreviewType)],
    params: &[(Type, Access)],
    results: &[Type],
) -> Function {
    let const_params = consts
        .iter()
        .map(|(n, t)| Attribute::ConstParam {
            name: n.to_string(),
            ty: Type::Preview(t.clone()),
        })
        .collect();
    Function::new_extern_decl(name, params, results, const_params)
}

/// A several-function interface written by cutile-ir, packaged by tileiras, then inspected and declared.
#[test]
fn built_interface_round_trip() -> Result<(), Box<dyn std::error::Error>> {
    use ScalarType::*;
    let t = |e, s: &[i64]| Type::tile(e, s);
    let mut module = Module::new();
    module.functions = vec![
        extern_decl(
            "scale",
            &[],
            &[(t(F32, &[128]), Access::In), (t(F32, &[128]), Access::Out)],
            &[t(F32, &[128])],
        ),
        extern_decl(
            "accumulate",
            &[],
            &[
                (t(F32, &[16, 16]), Access::InOut),
                (t(F16, &[16, 16]), Access::In),
            ],
            &[t(F32, &[16, 16])],
        ),
        extern_decl(
            "configured",
            &[
                ("N", PreviewType::Index),
                ("mode", PreviewType::String),
                ("T", PreviewType::Datatype),
                ("S", PreviewType::Shape),
            ],
            &[(t(I32, &[]), Access::In)],
            &[],
        ),
        extern_decl(
            "split",
            &[],
            &[
                (t(I32, &[4]), Access::In),
                (t(I32, &[4]), Access::Out),
                (t(F32, &[4]), Access::Out),
            ],
            &[t(I32, &[4]), t(F32, &[4])],
        ),
    ];
    let bytes = cutile_ir::bytecode::write_module(&module, cutile_ir::V13_5)?;
    // The interface model sees exactly what was built.
    let parsed = tilelib_tools::interface::Interface::from_bytecode(&bytes)?;
    let symbols: Vec<&str> = parsed.functions.iter().map(|f| f.symbol.as_str()).collect();
    assert_eq!(symbols, ["scale", "accumulate", "configured", "split"]);
    let kinds: Vec<ConstKind> = parsed.functions[2]
        .const_params
        .iter()
        .map(|c| c.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            ConstKind::Index,
            ConstKind::String,
            ConstKind::Datatype,
            ConstKind::Shape
        ]
    );
    let access: Vec<Access> = parsed.functions[3]
        .operands
        .iter()
        .map(|o| o.access)
        .collect();
    assert_eq!(access, [Access::In, Access::Out, Access::Out]);

    let Some(tileiras) = common::tileiras("built_interface_round_trip (packaging part)") else {
        return Ok(());
    };
    // tileirdisasm (which verifies) reads it back: an independent check of what was built.
    insta::assert_snapshot!("tileirdisasm_built", tileiras.disassemble(&bytes, true)?);
    let i = inputs();
    let interface = i.dir.file("built.tilebc", &bytes);
    let out = i.dir.path("built.tilelib");
    package::package(
        &tileiras,
        &interface,
        &[i.bytecode.clone(), i.ltoir.clone()],
        &out,
    )?;
    let report = tilelib_tools::inspect::inspect(&std::fs::read(&out)?)?;
    assert_eq!(report.interface, parsed);
    insta::assert_snapshot!("inspect_text_built", report.to_string());
    let decls = tilelib_tools::declare::declare(&report.interface, "built.tilelib");
    assert!(decls.skipped.is_empty(), "{:?}", decls.skipped);
    assert!(
        syn::parse_file(&decls.source).is_ok(),
        "generated source parses"
    );
    common::check_declared_fixture("built_tilelib", &decls.source);
    insta::assert_snapshot!("declare_built", decls.source);
    Ok(())
}
