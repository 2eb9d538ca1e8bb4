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
fn tileiras() -> Option<cutile::toolchain::Tileiras> {
    match cutile::toolchain::Tileiras::discover() {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("SKIPPED: tileiras not found ({e})");
            None
        }
    }
}

#[test]
fn vadd_compiles_for_sm90() {
    let Some(t) = tileiras() else { return };
    let m = TensorMeta::contiguous(ScalarType::F32, &[4096]);
    let s = kernels::vadd::kernel::<f32, 1024>()
        .specialize(&[m.clone(), m.clone(), m])
        .expect("specializes");
    let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
    let cubin = s.compile(&t, &req).expect("tileiras accepts the kernel");
    assert_eq!(cubin.elf_sm(), Some(90));
}
