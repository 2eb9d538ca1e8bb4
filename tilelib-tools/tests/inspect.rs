//! `inspect` and `declare` on tileiras-made libraries and on the preview samples (snapshots), and `declare` on
//! hand-built interfaces covering every constant-parameter kind and every reason to skip a function.

mod common;

use cutile_ir::{Access, ScalarType};
use tilelib_tools::declare::{Declarations, declare};
use tilelib_tools::inspect::{InspectError, inspect};
use tilelib_tools::interface::{
    ConstKind, ConstParam, Dim, ForeignFunction, Interface, Operand, ValueType,
};

#[test]
fn sample_libraries() -> Result<(), Box<dyn std::error::Error>> {
    for name in ["lib1.tilelib", "lib2.tilelib"] {
        let report = inspect(&common::read(name))?;
        insta::assert_snapshot!(format!("inspect_json_{name}"), report.to_json());
        insta::assert_snapshot!(format!("inspect_text_{name}"), report.to_string());
        let decls = declare(&report.interface, name);
        common::check_declared_fixture(&name.replace('.', "_"), parses(&decls));
        insta::assert_snapshot!(format!("declare_{name}"), parses(&decls));
    }
    Ok(())
}

/// The call samples hold an entry plus an extern declaration with out / inout operands.
#[test]
fn preview_samples_with_results() -> Result<(), Box<dyn std::error::Error>> {
    for name in ["call_extern_in_out.tilebc", "call_extern_inout.tilebc"] {
        let report = inspect(&common::read(name))?;
        assert_eq!(report.container, "interface");
        assert_eq!(
            report.interface.other_functions.len(),
            1,
            "{name}: the entry `k`"
        );
        insta::assert_snapshot!(format!("inspect_text_{name}"), report.to_string());
        let decls = declare(&report.interface, name);
        assert_eq!(decls.declared, vec!["ext".to_string()], "{name}");
        common::check_declared_fixture(&name.replace('.', "_"), parses(&decls));
        insta::assert_snapshot!(format!("declare_{name}"), parses(&decls));
    }
    Ok(())
}

#[test]
fn interface_that_is_not_bytecode_is_an_error() {
    let ltoir = common::read("twice_sm90.ltoir");
    let lib = tilelib_tools::container::write(&tilelib_tools::container::TileLib {
        interface: ltoir,
        implementations: vec![],
    })
    .expect("writes");
    assert!(matches!(
        inspect(&lib),
        Err(InspectError::InterfaceNotBytecode(_))
    ));
}

/// The generated module must at least be valid Rust syntax (the `#[cutile::foreign]` macro gets the rest).
fn parses(decls: &Declarations) -> &str {
    if let Err(e) = syn::parse_file(&decls.source) {
        panic!("generated source does not parse: {e}\n{}", decls.source);
    }
    &decls.source
}

fn tile(elem: ScalarType, shape: &[Dim]) -> ValueType {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d}x")).collect();
    ValueType::Tile {
        elem,
        shape: shape.to_vec(),
        text: format!("tile<{}{}>", dims.concat(), elem.name()),
    }
}

fn operand(i: usize, ty: ValueType, access: Access) -> Operand {
    Operand {
        name: format!("arg{i}"),
        ty,
        access,
    }
}

fn func(symbol: &str, consts: &[(&str, ConstKind)], operands: Vec<Operand>) -> ForeignFunction {
    let results = operands
        .iter()
        .filter(|o| o.access != Access::In)
        .map(|o| o.ty.clone())
        .collect();
    ForeignFunction {
        symbol: symbol.to_string(),
        const_params: consts
            .iter()
            .map(|(n, k)| ConstParam {
                name: n.to_string(),
                kind: *k,
            })
            .collect(),
        operands,
        results,
    }
}

/// Every mapping rule of the generator, and every reason to leave a function out.
#[test]
fn declare_mapping_rules() {
    use Dim::{Dynamic, Static, Symbolic};
    use ScalarType::*;
    let t4 = tile(F32, &[Static(4)]);
    let mut mismatched = func(
        "mismatched_results",
        &[],
        vec![operand(0, t4.clone(), Access::Out)],
    );
    mismatched.results.clear();
    let interface = Interface {
        version: "13.5".into(),
        preview: true,
        other_functions: vec![],
        functions: vec![
            func(
                "fft.forward$v1",
                &[
                    ("N", ConstKind::Index),
                    ("T", ConstKind::Datatype),
                    ("S", ConstKind::Shape),
                    ("mode", ConstKind::String),
                ],
                vec![
                    operand(0, tile(F16, &[Symbolic("N".into()), Static(2)]), Access::In),
                    operand(1, tile(BF16, &[Static(8), Static(8)]), Access::InOut),
                    operand(2, tile(I1, &[]), Access::Out),
                    operand(3, tile(F8E4M3FN, &[Static(16)]), Access::Out),
                ],
            ),
            func(
                "type",
                &[],
                vec![operand(
                    0,
                    tile(I64, &[Static(1), Static(2), Static(3), Static(4)]),
                    Access::In,
                )],
            ),
            // Same Rust identifier as the first function: gets a suffix.
            func(
                "fft_forward_v1",
                &[],
                vec![operand(0, t4.clone(), Access::In)],
            ),
            // Not expressible, each for its own reason.
            func(
                "rank5",
                &[],
                vec![operand(0, tile(F32, &vec![Static(1); 5]), Access::In)],
            ),
            func(
                "fp4",
                &[],
                vec![operand(0, tile(F4E2M1FN, &[Static(2)]), Access::In)],
            ),
            func(
                "dynamic",
                &[],
                vec![operand(0, tile(F32, &[Dynamic]), Access::In)],
            ),
            func(
                "expr",
                &[("N", ConstKind::Index)],
                vec![operand(0, tile(F32, &[Symbolic("2*N".into())]), Access::In)],
            ),
            func(
                "not_a_tile",
                &[],
                vec![operand(
                    0,
                    ValueType::Other {
                        text: "token".into(),
                    },
                    Access::In,
                )],
            ),
            mismatched,
        ],
    };
    let decls = declare(&interface, "mathdx.tilelib");
    assert_eq!(decls.declared, ["fft.forward$v1", "type", "fft_forward_v1"]);
    let skipped: Vec<&str> = decls.skipped.iter().map(|s| s.symbol.as_str()).collect();
    assert_eq!(
        skipped,
        [
            "rank5",
            "fp4",
            "dynamic",
            "expr",
            "not_a_tile",
            "mismatched_results"
        ]
    );
    common::check_declared_fixture("mapping_rules", parses(&decls));
    insta::assert_snapshot!("declare_mapping_rules", parses(&decls));
}
