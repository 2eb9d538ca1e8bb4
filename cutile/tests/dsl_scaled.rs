//! Block-scaled MMA (`mma_scaled`) and the sub-byte element types: the IR the DSL writes for NVFP4
//! (e2m1 values from bytes, e4m3 scales in blocks of 16) and MXFP8 (e4m3 values, e8m0 scales in blocks
//! of 32), and tileiras compiling both for the Blackwell archs (sm_100, sm_120). Neither can run on our
//! H200; the misuse of the front end is covered by `tests/ui/mma_scaled_*.rs`.

#![allow(clippy::unwrap_used)]

use cutile::dsl::{Kernel, TensorMeta};
use cutile::toolchain::{CompileRequest, GpuArch, Tileiras};
use cutile_ir::ScalarType::*;

#[cutile::module]
mod kernels {
    use cutile::core::*;

    /// One NVFP4 tile product: `x: [M, K/2]` and `w: [N, K/2]` packed e2m1 (two per byte, low nibble
    /// first), `xs: [M, K/16]` and `ws: [N, K/16]` e4m3 scale bytes; `y = x · wᵀ` in f32.
    #[cutile::entry]
    pub fn nvfp4_tile<const M: i32, const N: i32, const K: i32, const KH: i32, const KS: i32>(
        x: &Tensor<i8, S2<DYN, DYN>>,
        xs: &Tensor<i8, S2<DYN, DYN>>,
        w: &Tensor<i8, S2<DYN, DYN>>,
        ws: &Tensor<i8, S2<DYN, DYN>>,
        y: &mut Tensor<f32, S2<M, N>>,
    ) {
        let xq = x
            .partition_padded::<S2<M, KH>>(Padding::Zero)
            .load((0, 0))
            .reinterpret::<f4e2m1fn, S2<M, K>>();
        let xsc = xs
            .partition_padded::<S2<M, KS>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>();
        let wq = w
            .partition_padded::<S2<N, KH>>(Padding::Zero)
            .load((0, 0))
            .reinterpret::<f4e2m1fn, S2<N, K>>()
            .transpose();
        let wsc = ws
            .partition_padded::<S2<N, KS>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>()
            .transpose();
        y.store(mma_scaled(xq, xsc, wq, wsc, zeros::<f32, S2<M, N>>()));
    }

    /// One MXFP8 tile product: `x: [M, K]`, `w: [K, N]` e4m3 bytes, `xs: [M, K/32]`, `ws: [K/32, N]`
    /// e8m0 scale bytes.
    #[cutile::entry]
    pub fn mxfp8_tile<const M: i32, const N: i32, const K: i32, const KS: i32>(
        x: &Tensor<i8, S2<DYN, DYN>>,
        xs: &Tensor<i8, S2<DYN, DYN>>,
        w: &Tensor<i8, S2<DYN, DYN>>,
        ws: &Tensor<i8, S2<DYN, DYN>>,
        y: &mut Tensor<f32, S2<M, N>>,
    ) {
        let xq = x
            .partition_padded::<S2<M, K>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>();
        let xsc = xs
            .partition_padded::<S2<M, KS>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e8m0fnu>();
        let wq = w
            .partition_padded::<S2<K, N>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e4m3fn>();
        let wsc = ws
            .partition_padded::<S2<KS, N>>(Padding::Zero)
            .load((0, 0))
            .bitcast::<f8e8m0fnu>();
        y.store(mma_scaled(xq, xsc, wq, wsc, zeros::<f32, S2<M, N>>()));
    }
}

fn bytes(shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(I8, shape)
}

fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>)> {
    vec![
        (
            "nvfp4 128x128x128",
            kernels::nvfp4_tile::kernel::<128, 128, 128, 64, 8>(),
            vec![
                bytes(&[128, 64]),
                bytes(&[128, 8]),
                bytes(&[128, 64]),
                bytes(&[128, 8]),
                TensorMeta::contiguous(F32, &[128, 128]),
            ],
        ),
        (
            "mxfp8 128x128x128",
            kernels::mxfp8_tile::kernel::<128, 128, 128, 4>(),
            vec![
                bytes(&[128, 128]),
                bytes(&[128, 4]),
                bytes(&[128, 128]),
                bytes(&[4, 128]),
                TensorMeta::contiguous(F32, &[128, 128]),
            ],
        ),
    ]
}

/// The product is one `mmaf_scaled` with e2m1 (from bytes through `unpack`) or e4m3 operands and
/// their scales, and the module verifies at bytecode 13.5.
#[test]
fn block_scaled_products_write_one_scaled_mma() {
    for (name, k, metas) in cases() {
        let s = k
            .specialize(&metas)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
        let text = s.ir_text();
        let mma: Vec<_> = text.lines().filter(|l| l.contains("mmaf_scaled")).collect();
        assert_eq!(mma.len(), 1, "{name}:\n{text}");
        if name.starts_with("nvfp4") {
            assert!(mma[0].contains("f4E2M1FN"), "{}", mma[0]);
            assert!(mma[0].contains("f8E4M3FN"), "{}", mma[0]);
            // Bytes to e2m1: one `unpack` per operand, 64 bytes a row into 128 values.
            assert_eq!(text.matches("unpack").count(), 2, "{text}");
        } else {
            assert!(mma[0].contains("f8E8M0FNU"), "{}", mma[0]);
            assert!(!text.contains("unpack"), "{text}");
        }
    }
}

/// tileiras compiles both for sm_100 and sm_120 (the Blackwell path of the NVFP4 MoE) and refuses
/// them for sm_90, where there is no block-scaled tensor-core instruction.
#[test]
fn block_scaled_products_compile_for_blackwell_only() {
    let t = match Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip("mma_scaled compile", &format!("tileiras not found ({e})"));
            return;
        }
    };
    for (name, k, metas) in cases() {
        let s = k.specialize(&metas).unwrap();
        for arch in [GpuArch::Sm100, GpuArch::Sm120] {
            s.compile(&t, &CompileRequest::new(arch))
                .unwrap_or_else(|e| panic!("{name} / {arch}: {e}\n{}", s.ir_text()));
        }
        let hopper = s.compile(&t, &CompileRequest::new(GpuArch::Sm90));
        assert!(hopper.is_err(), "{name}: sm_90 compiled a block-scaled mma");
    }
}

/// Not a check: prints each case's IR and tileiras's answer for sm_90.
#[test]
#[ignore = "manual tool: cargo test -p cutile --test dsl_scaled dump -- --ignored --nocapture"]
fn dump() {
    let t = Tileiras::discover().unwrap();
    for (name, k, metas) in cases() {
        let s = k.specialize(&metas).unwrap();
        println!("// {name}\n{}", s.ir_text());
        println!(
            "{:?}",
            s.compile(&t, &CompileRequest::new(GpuArch::Sm90)).err()
        );
    }
}
