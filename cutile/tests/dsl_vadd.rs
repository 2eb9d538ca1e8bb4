//! Vector add through the whole DSL pipeline: macro → traced IR → bytecode → (tileiras) cubin.

#![allow(clippy::unwrap_used)]

#[cutile::module]
mod kernels {
    use cutile::core::*;

    #[cutile::entry]
    pub fn vadd<E: Numeric, const B: i32>(
        a: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        c: &mut Tensor<E, S1<B>>,
    ) {
        let pid = block_id_x();
        let ta = a.load_tile::<S1<B>>(pid);
        let tb = b.load_tile::<S1<B>>(pid);
        c.store(ta + tb);
    }
}

use cutile::dsl::TensorMeta;
use cutile_ir::ScalarType;

#[test]
fn vadd_ir() {
    let m = TensorMeta::contiguous(ScalarType::F32, &[4096]);
    let k = kernels::vadd::kernel::<f32, 1024>();
    let s = k
        .specialize(&[m.clone(), m.clone(), m])
        .expect("specializes");
    println!("{}", s.ir_text());
    let bc = s.bytecode(cutile_ir::V13_5).expect("encodes");
    assert!(bc.len() > 100);
}

/// tileiras, or `None` (printing why the test is skipped) when it is not installed.
fn tileiras(test: &str) -> Option<cutile::toolchain::Tileiras> {
    match cutile::toolchain::Tileiras::discover() {
        Ok(t) => Some(t),
        Err(e) => {
            cutile_testkit::skip(test, &format!("tileiras not found ({e})"));
            None
        }
    }
}

#[test]
fn vadd_compiles_for_sm90() {
    let Some(t) = tileiras("vadd_compiles_for_sm90") else {
        return;
    };
    let m = TensorMeta::contiguous(ScalarType::F32, &[4096]);
    let s = kernels::vadd::kernel::<f32, 1024>()
        .specialize(&[m.clone(), m.clone(), m])
        .expect("specializes");
    let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
    let cubin = s.compile(&t, &req).expect("tileiras accepts the kernel");
    assert_eq!(cubin.elf_sm(), Some(90));
}

/// Every op carries a debug location in this file (shown by `tileirdisasm -g`), so tileiras diagnostics
/// and profilers can point at kernel lines.
#[test]
fn ops_carry_kernel_source_locations() {
    let m = TensorMeta::contiguous(ScalarType::F32, &[4096]);
    let s = kernels::vadd::kernel::<f32, 1024>()
        .specialize(&[m.clone(), m.clone(), m])
        .expect("specializes");
    let lines: Vec<u64> = s
        .module
        .debug_attrs
        .iter()
        .filter_map(|a| match a {
            cutile_ir::DebugAttr::Loc { filename, line, .. }
                if filename.ends_with("dsl_vadd.rs") =>
            {
                Some(*line)
            }
            _ => None,
        })
        .collect();
    // The kernel's `fn` line, the block id, both loads and the store.
    let src = include_str!("dsl_vadd.rs");
    let line_of = |needle: &str| {
        src.lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
    };
    for needle in [
        "pub fn vadd<",
        "let pid = block_id_x()",
        "let ta = a.load_tile",
        "c.store(ta + tb)",
    ] {
        let l = line_of(needle).expect("needle in source");
        assert!(
            lines.contains(&l),
            "no location at line {l} ({needle}); have {lines:?}"
        );
    }
    let Some(t) = tileiras("ops_carry_kernel_source_locations") else {
        return;
    };
    let Some(disasm) = t.tileirdisasm() else {
        cutile_testkit::skip(
            "ops_carry_kernel_source_locations (disassembly)",
            "no tileirdisasm beside tileiras",
        );
        return;
    };
    let bc = s.bytecode(cutile_ir::V13_5).expect("encodes");
    let dir = std::env::temp_dir().join(format!("cutile-dsl-loc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("vadd.tilebc");
    std::fs::write(&input, bc).unwrap();
    let out = std::process::Command::new(disasm)
        .arg("-g")
        .arg(&input)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("dsl_vadd.rs"), "{text}");
    assert!(text.contains("di_subprogram"), "{text}");
}
