//! Specialization-time checks: what depends on values (tile extents, element counts, the actual arrays)
//! fails when a kernel is specialized, with an error naming both values, the kernel and the source line.

#![allow(clippy::unwrap_used)]

use cutile::dsl::{ArgError, SpecializeError, TensorMeta};
use cutile_ir::ScalarType::*;

#[cutile::module]
mod kernels {
    use cutile::core::*;

    #[cutile::entry]
    pub fn copy<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<B>>) {
        y.store(x.load_tile::<S1<B>>(block_id_x()));
    }

    #[cutile::entry]
    pub fn fixed_cols<const B: i32>(x: &Tensor<f32, S2<DYN, 64>>, y: &mut Tensor<f32, S2<B, 64>>) {
        y.store(x.load_tile::<S2<B, 64>>((block_id_x(), 0)));
    }

    #[cutile::entry]
    pub fn bad_reshape<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S2<B, B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t.reshape::<S2<B, B>>());
    }

    #[cutile::entry]
    pub fn bad_broadcast<const B: i32>(
        x: &Tensor<f32, S2<DYN, DYN>>,
        y: &mut Tensor<f32, S2<B, B>>,
    ) {
        let t = x.load_tile::<S2<B, 2>>((block_id_x(), 0));
        y.store(t.broadcast());
    }

    #[cutile::entry]
    pub fn bad_extract_at<const B: i32>(
        x: &Tensor<f32, S2<DYN, DYN>>,
        y: &mut Tensor<f32, S2<B, 32>>,
    ) {
        let t = x.load_tile::<S2<B, B>>((block_id_x(), 0));
        // 32 columns do not tile B = 16.
        y.store(t.extract_at::<S2<B, 32>>((0, block_id_x())));
    }

    #[cutile::entry]
    pub fn needs_big_tiles<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<B>>) {
        assert!(B >= 64, "B must be at least 64");
        y.store(x.load_tile::<S1<B>>(block_id_x()));
    }
}

fn v(n: i64) -> TensorMeta {
    TensorMeta::contiguous(F32, &[n])
}

fn trace_error(r: Result<cutile::dsl::Specialized, SpecializeError>) -> String {
    match r {
        Err(e @ SpecializeError::Trace(_)) => e.to_string(),
        Err(other) => panic!("expected a trace error, got {other}"),
        Ok(_) => panic!("expected a trace error, got a module"),
    }
}

#[test]
fn non_power_of_two_tile_names_value_kernel_and_line() {
    let msg = trace_error(kernels::copy::kernel::<1000>().specialize(&[v(5000), v(5000)]));
    assert!(msg.contains("kernel `copy`"), "{msg}");
    assert!(msg.contains("extent 1000"), "{msg}");
    assert!(msg.contains("powers of two"), "{msg}");
    assert!(msg.contains("dsl_specialize.rs:"), "{msg}");
}

#[test]
fn oversized_tile_names_count_and_limit() {
    let msg = trace_error(kernels::copy::kernel::<{ 1 << 25 }>().specialize(&[v(5000), v(5000)]));
    assert!(msg.contains("33554432 elements"), "{msg}");
    assert!(msg.contains("16777216"), "{msg}");
}

#[test]
fn reshape_and_broadcast_report_both_shapes() {
    let msg = trace_error(
        kernels::bad_reshape::kernel::<16>()
            .specialize(&[v(256), TensorMeta::contiguous(F32, &[16, 16])]),
    );
    assert!(msg.contains("(16)") && msg.contains("(16, 16)"), "{msg}");
    let m2 = TensorMeta::contiguous(F32, &[64, 64]);
    let msg = trace_error(kernels::bad_broadcast::kernel::<16>().specialize(&[m2.clone(), m2]));
    assert!(msg.contains("(16, 2)") && msg.contains("(16, 16)"), "{msg}");
    assert!(msg.contains("neither 1 nor 16"), "{msg}");
}

#[test]
fn extract_at_names_both_shapes() {
    let m = TensorMeta::contiguous(F32, &[64, 64]);
    let msg = trace_error(kernels::bad_extract_at::kernel::<16>().specialize(&[m.clone(), m]));
    assert!(
        msg.contains("(16, 32)") && msg.contains("(16, 16)"),
        "{msg}"
    );
    assert!(msg.contains("do not divide"), "{msg}");
}

#[test]
fn host_assert_fails_specialization() {
    let msg = trace_error(kernels::needs_big_tiles::kernel::<32>().specialize(&[v(64), v(64)]));
    assert!(msg.contains("B must be at least 64"), "{msg}");
    assert!(
        kernels::needs_big_tiles::kernel::<64>()
            .specialize(&[v(64), v(64)])
            .is_ok()
    );
}

#[test]
fn array_checks() {
    let k = kernels::copy::kernel::<128>();
    match k.specialize(&[TensorMeta::contiguous(BF16, &[10]), v(10)]) {
        Err(SpecializeError::Arg(ArgError::DType {
            declared: F32,
            actual: BF16,
            ..
        })) => {}
        other => panic!("{other:?}"),
    }
    match k.specialize(&[TensorMeta::contiguous(F32, &[10, 10]), v(10)]) {
        Err(SpecializeError::Arg(ArgError::Rank {
            declared: 1,
            actual: 2,
            ..
        })) => {}
        other => panic!("{other:?}"),
    }
    match k.specialize(&[v(10)]) {
        Err(SpecializeError::Arg(ArgError::TensorCount {
            expected: 2,
            got: 1,
            ..
        })) => {}
        other => panic!("{other:?}"),
    }
    let fixed = kernels::fixed_cols::kernel::<16>();
    let err = fixed
        .specialize(&[
            TensorMeta::contiguous(F32, &[100, 32]),
            TensorMeta::contiguous(F32, &[100, 64]),
        ])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fixes axis 1 to 64") && err.contains("extent 32"),
        "{err}"
    );
    let ok = fixed
        .specialize(&[
            TensorMeta::contiguous(F32, &[100, 64]),
            TensorMeta::contiguous(F32, &[100, 64]),
        ])
        .unwrap();
    assert!(
        ok.ir_text().contains("tensor_view<?x64xf32"),
        "{}",
        ok.ir_text()
    );
}

#[test]
fn layout_facts_become_assumes() {
    let k = kernels::copy::kernel::<128>();
    let aligned = k.specialize(&[v(4096), v(4096)]).unwrap().ir_text();
    assert!(aligned.contains("div_by<16>"), "{aligned}");
    let odd = TensorMeta::contiguous(F32, &[4097]).with_base_align(4);
    let text = k.specialize(&[odd.clone(), odd]).unwrap().ir_text();
    assert!(text.contains("assume div_by<4>, %arg0"), "{text}");
    assert!(!text.contains("assume div_by<16>, %arg0"), "{text}");
    let strided = TensorMeta::contiguous(F32, &[100]).with_strides(&[3]);
    let text = k.specialize(&[strided, v(100)]).unwrap().ir_text();
    assert!(text.contains("strides=[?]"), "{text}");
}

#[test]
fn large_arrays_use_i64_indices() {
    let k = kernels::copy::kernel::<128>();
    let big = v(3_000_000_000);
    let s = k.specialize(&[big.clone(), big]).unwrap();
    assert_eq!(s.index_type, I64);
    assert!(s.ir_text().contains("tile<i64>"), "{}", s.ir_text());
    cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5).unwrap();
    match cutile::toolchain::Tileiras::discover() {
        Ok(t) => {
            let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
            s.compile(&t, &req)
                .unwrap_or_else(|e| panic!("{e}\n{}", s.ir_text()));
        }
        Err(e) => cutile_testkit::skip(
            "large_arrays_use_i64_indices (compile part)",
            &format!("tileiras not found ({e})"),
        ),
    }
}

#[test]
fn hints_from_attribute_and_override() {
    let k = kernels::copy::kernel::<128>().with_hint("sm_90", "num_worker_warps_per_cta", 8);
    let text = k.specialize(&[v(256), v(256)]).unwrap().ir_text();
    assert!(
        text.contains("sm_90 = {num_worker_warps_per_cta = 8"),
        "{text}"
    );
}
