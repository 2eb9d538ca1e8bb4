//! The declarations `tilelib declare` generates compile and can be called from kernels. The modules below
//! are the generated files, committed under `foreign_fixtures/declared/` and kept current by tilelib-tools'
//! tests (which regenerate them from the shared `.tilelib` samples, the preview samples, a hand-built
//! interface and a library that test packages with tileiras, and compare).

#![allow(clippy::unwrap_used)]

use cutile_ir::{Attribute, FunctionKind};

#[rustfmt::skip]
#[path = "foreign_fixtures/declared/built_tilelib.rs"]
pub mod built;
#[rustfmt::skip]
#[path = "foreign_fixtures/declared/call_extern_in_out_tilebc.rs"]
pub mod in_out;
#[rustfmt::skip]
#[path = "foreign_fixtures/declared/call_extern_inout_tilebc.rs"]
pub mod inout;
#[rustfmt::skip]
#[path = "foreign_fixtures/declared/lib1_tilelib.rs"]
pub mod lib1;
#[rustfmt::skip]
#[path = "foreign_fixtures/declared/lib2_tilelib.rs"]
pub mod lib2;
#[rustfmt::skip]
#[path = "foreign_fixtures/declared/mapping_rules.rs"]
pub mod mapping;

const MODE: &str = "forward";

#[cutile::module]
mod kernels {
    use cutile::core::*;

    #[cutile::entry]
    pub fn samples(x: Scalar<i32>) {
        unsafe {
            super::lib1::ext(x);
            super::lib2::ext(x);
        }
    }

    #[cutile::entry]
    pub fn in_out() {
        let a = unsafe { super::in_out::ext(zeros::<f32, S1<4>>()) };
        let _ = a;
    }

    #[cutile::entry]
    pub fn inout() {
        let a = unsafe { super::inout::ext(zeros::<f32, S1<4>>()) };
        let _ = a;
    }

    /// Two libraries' `ext` with different signatures cannot share one module.
    #[cutile::entry]
    pub fn clash(x: Scalar<i32>) {
        unsafe {
            super::lib1::ext(x);
            let _ = super::in_out::ext(zeros::<f32, S1<4>>());
        }
    }

    #[cutile::entry]
    pub fn built(x: Scalar<i32>) {
        unsafe {
            let s = super::built::scale(zeros::<f32, S1<128>>());
            let _ = s;
            let acc =
                super::built::accumulate(zeros::<f32, S2<16, 16>>(), zeros::<f16, S2<16, 16>>());
            let _ = acc;
            super::built::configured::<4, f32, S1<8>>("fwd", x);
            let (_i, _f) = super::built::split(zeros::<i32, S1<4>>());
        }
    }

    #[cutile::entry]
    pub fn mapping(x: Scalar<i32>) {
        let _ = x;
        unsafe {
            let (_acc, _flag, _f8) = super::mapping::fft_forward_v1::<8, f32, S2<2, 2>>(
                super::MODE,
                zeros::<f16, S2<8, 2>>(),
                zeros::<bf16, S2<8, 8>>(),
            );
            // `r#type` (tile<1x2x3x4xi64>) compiles but cannot be called: 3 is not a tile extent.
        }
    }
}

fn decls(m: &cutile_ir::Module) -> Vec<String> {
    m.functions
        .iter()
        .filter(|f| matches!(f.kind, FunctionKind::ExternDecl { .. }))
        .map(|f| f.name.clone())
        .collect()
}

#[test]
fn generated_declarations_trace_and_verify() {
    let s = kernels::samples::kernel().specialize(&[]).unwrap();
    assert_eq!(decls(&s.module), ["ext"], "{}", s.ir_text());
    let b = kernels::built::kernel().specialize(&[]).unwrap();
    assert_eq!(
        decls(&b.module),
        ["scale", "accumulate", "configured", "split"]
    );
    let m = kernels::mapping::kernel().specialize(&[]).unwrap();
    assert_eq!(decls(&m.module), ["fft.forward$v1"]);
    // `const_args` restores the interface's order of constant parameters.
    let fft = m
        .module
        .functions
        .iter()
        .find(|f| f.name == "fft.forward$v1")
        .unwrap();
    let FunctionKind::ExternDecl { const_params } = &fft.kind else {
        panic!()
    };
    let names: Vec<&str> = const_params
        .iter()
        .map(|c| match c {
            Attribute::ConstParam { name, .. } => name.as_str(),
            _ => "?",
        })
        .collect();
    assert_eq!(names, ["N", "T", "S", "mode"]);
    let io = kernels::in_out::kernel().specialize(&[]).unwrap();
    let ino = kernels::inout::kernel().specialize(&[]).unwrap();
    for s in [&s, &b, &m, &io, &ino] {
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5).unwrap();
        let bc = s.bytecode(cutile_ir::V13_5).unwrap();
        match cutile::toolchain::Tileiras::discover() {
            Ok(t) => {
                t.disassemble(&bc, true)
                    .unwrap_or_else(|e| panic!("{e}\n{}", s.ir_text()));
            }
            Err(e) => cutile_testkit::skip(
                "generated_declarations_trace_and_verify (tileirdisasm part)",
                &format!("no toolchain ({e})"),
            ),
        }
    }
}

#[test]
fn one_symbol_with_two_signatures_is_a_trace_error() {
    let e = kernels::clash::kernel()
        .specialize(&[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`ext` is called with two signatures"), "{e}");
    assert!(e.contains("dsl_foreign_declared.rs"), "{e}");
}
