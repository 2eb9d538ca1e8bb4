//! Op coverage: one kernel per family using every element-wise function, every conversion pair class
//! (incl. bf16/f16/tf32/f8), the shape ops and the hints, traced, verified and compiled for sm_90.

#![allow(clippy::unwrap_used)]

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::*;

#[cutile::module]
mod kernels {
    use cutile::core::*;

    #[cutile::entry(num_worker_warps = 4, occupancy = 1, sm_90(num_worker_warps = 8))]
    pub fn math<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<B>>) {
        let t = x.load_tile_padded::<S1<B>>(block_id_x(), Padding::Zero);
        let a = t.exp()
            + t.exp2()
            + t.abs().ln()
            + t.abs().log2()
            + t.abs().sqrt()
            + (t.abs() + 1.0).rsqrt();
        let b = t.tanh() + t.sin() + t.cos() + t.tan() + t.sinh() + t.cosh() + t.floor() + t.ceil();
        let c = t.abs().pow(t) + t.atan2(a) + fma(a, b, t) + t.min(a).max(b) - -t;
        let d = select(t < 0.0 || t >= 1.0, c, a / b % 3.0);
        y.store(d);
    }

    #[cutile::entry]
    pub fn ints<const B: i32>(x: &Tensor<i32, S1<DYN>>, y: &mut Tensor<i32, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        let u = (t & 0xff) | (t ^ 3) << 2;
        let v = (u >> 1) / 3 % 7 + t.abs() * -t;
        let w = select(!(v == 0), v, t.min(v).max(u)) ^ t.mulhi_unsigned(u);
        let n = assume_bounded(assume_div_by(x.dim(0), 4), Some(0), None);
        y.store(w + n);
    }

    #[cutile::entry]
    pub fn casts<const B: i32>(x: &Tensor<f32, S2<DYN, DYN>>, y: &mut Tensor<f32, S2<B, B>>) {
        let t = x.load_tile::<S2<B, B>>((block_id_x(), 0));
        let h = t.cast::<f16>().cast::<bf16>().cast::<f32>();
        let f8 = t.cast::<f8e4m3fn>().cast::<f32>() + t.cast::<f8e5m2>().cast::<f32>();
        let i = t
            .cast::<i32>()
            .cast::<i8>()
            .cast::<i64>()
            .cast::<f64>()
            .cast::<f32>();
        let m = t.cast::<bool>().cast::<f32>() + (t > 0.5).cast::<i32>().cast::<f32>();
        let tf = mma(t.cast::<tf32>(), t.cast::<tf32>(), zeros::<f32, S2<B, B>>());
        let q = mma(
            t.cast::<f8e4m3fn>(),
            t.cast::<f8e4m3fn>(),
            zeros::<f32, S2<B, B>>(),
        );
        y.store(h + f8 + i + m + tf + q);
    }

    #[cutile::entry]
    pub fn bitcasts<const B: i32>(x: &Tensor<i32, S1<DYN>>, y: &mut Tensor<i32, S1<B>>) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        let w = t.cast::<i16>();
        let halves = w.bitcast::<bf16>().cast::<f32>() + w.bitcast::<f16>().cast::<f32>();
        let f8 = t.cast::<i8>().bitcast::<f8e4m3fn>().cast::<f32>()
            + t.cast::<i8>().bitcast::<f8e5m2>().cast::<f32>();
        let same = t.bitcast::<i32>();
        let s = block_id_x().bitcast::<f32>().splat::<S1<B>>();
        y.store((t.bitcast::<f32>() + halves + f8 + s).bitcast::<i32>() + same);
    }

    /// Cross-width reinterpretations: bytes as words, words as bf16 pairs, and back.
    #[cutile::entry]
    pub fn reinterprets<const B: i32>(x: &Tensor<i8, S2<DYN, DYN>>, y: &mut Tensor<i32, S2<B, 8>>) {
        let bytes = x.load_tile::<S2<B, 32>>((block_id_x(), 0));
        let words = bytes.reinterpret::<i32, S2<B, 8>>();
        let pairs = words.reinterpret::<bf16, S2<B, 16>>();
        let back = pairs.reinterpret::<i32, S2<B, 8>>()
            + words.reinterpret::<f32, S2<B, 8>>().bitcast::<i32>();
        y.store(
            back + bytes
                .reinterpret::<i8, S1<{ 32 * 32 }>>()
                .reinterpret::<i32, S2<B, 8>>(),
        );
    }

    /// A reinterpretation that changes the byte count: refused at specialization.
    #[cutile::entry]
    pub fn bad_reinterpret<const B: i32>(
        x: &Tensor<i32, S2<DYN, DYN>>,
        y: &mut Tensor<i32, S2<B, 8>>,
    ) {
        let t = x.load_tile::<S2<B, 8>>((block_id_x(), 0));
        y.store(
            t.reinterpret::<bf16, S2<B, 8>>()
                .bitcast::<i16>()
                .cast::<i32>(),
        );
    }

    #[cutile::entry]
    pub fn shapes<const B: i32>(
        x: &Tensor<f32, S3<DYN, DYN, DYN>>,
        y: &mut Tensor<f32, S3<2, B, B>>,
    ) {
        let t = x.load_tile_padded::<S3<2, B, B>>((block_id_x(), 0, 0), Padding::Nan);
        let p = t
            .permute::<S3<B, B, 2>>(&[1, 2, 0])
            .permute::<S3<2, B, B>>(&[2, 0, 1]);
        // The second half picked by a run-time index (block 0: index 0).
        let i = block_id_x() % 2;
        let halves = cat::<0, _, _, _, S3<2, B, B>>(
            p.extract::<S3<1, B, B>>(&[1, 0, 0]),
            p.extract_at::<S3<1, B, B>>((i, 0, 0)),
        );
        let r = halves
            .reshape::<S2<2, { 64 * 64 }>>()
            .cumsum::<1>()
            .reshape::<S3<2, B, B>>();
        let m = t.amin::<2>().broadcast::<S3<2, B, B>>()
            + t.prod::<1>().broadcast()
            + t.sum_squeezed::<0>().reshape::<S3<1, B, B>>().broadcast();
        y.store(
            r + m
                + t.amax_squeezed::<2>()
                    .amax::<1>()
                    .reshape::<S3<2, 1, 1>>()
                    .broadcast(),
        );
    }
}

fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>)> {
    vec![
        (
            "math",
            kernels::math::kernel::<256>(),
            vec![TensorMeta::contiguous(F32, &[1000]); 2],
        ),
        (
            "ints",
            kernels::ints::kernel::<256>(),
            vec![TensorMeta::contiguous(I32, &[1000]); 2],
        ),
        (
            "casts",
            kernels::casts::kernel::<32>(),
            vec![TensorMeta::contiguous(F32, &[100, 100]); 2],
        ),
        (
            "bitcasts",
            kernels::bitcasts::kernel::<256>(),
            vec![TensorMeta::contiguous(I32, &[1000]); 2],
        ),
        (
            "reinterprets",
            kernels::reinterprets::kernel::<32>(),
            vec![
                TensorMeta::contiguous(I8, &[100, 32]),
                TensorMeta::contiguous(I32, &[100, 8]),
            ],
        ),
        (
            "shapes",
            kernels::shapes::kernel::<64>(),
            vec![TensorMeta::contiguous(F32, &[5, 64, 64]); 2],
        ),
    ]
}

#[test]
fn trace_verify_compile() {
    let tileiras = cutile::toolchain::Tileiras::discover();
    if let Err(e) = &tileiras {
        cutile_testkit::skip(
            "trace_verify_compile (compile part)",
            &format!("tileiras not found ({e})"),
        );
    }
    let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
    for (name, k, arrays) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
        if name == "ints" {
            assert!(s.ir_text().contains("mulhii"), "{}", s.ir_text());
        }
        if let Ok(t) = &tileiras {
            s.compile(t, &req)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
        }
    }
}

#[test]
fn hints_reach_the_entry() {
    let s = kernels::math::kernel::<256>()
        .specialize(&vec![TensorMeta::contiguous(F32, &[1000]); 2])
        .unwrap();
    let text = s.ir_text();
    assert!(
        text.contains("default = {num_worker_warps_per_cta = 4, occupancy = 1}"),
        "{text}"
    );
    assert!(
        text.contains("sm_90 = {num_worker_warps_per_cta = 8}"),
        "{text}"
    );
}

#[test]
fn bitcast_emits_one_op_per_reinterpretation() {
    let s = kernels::bitcasts::kernel::<256>()
        .specialize(&vec![TensorMeta::contiguous(I32, &[1000]); 2])
        .unwrap();
    let text = s.ir_text();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("= bitcast ")).collect();
    // i16->bf16, i16->f16, i8->e4m3, i8->e5m2, i32->f32, scalar i32->f32, f32->i32; `i32 -> i32` is elided.
    assert_eq!(lines.len(), 7, "{text}");
    for (from, to) in [
        ("tile<256xi16>", "tile<256xbf16>"),
        ("tile<256xi16>", "tile<256xf16>"),
        ("tile<256xi8>", "tile<256xf8E4M3FN>"),
        ("tile<256xi8>", "tile<256xf8E5M2>"),
        ("tile<256xi32>", "tile<256xf32>"),
        ("tile<i32>", "tile<f32>"),
        ("tile<256xf32>", "tile<256xi32>"),
    ] {
        assert!(
            lines.iter().any(|l| l.contains(from) && l.contains(to)),
            "no bitcast {from} -> {to} in:\n{}",
            lines.join("\n")
        );
    }
}

#[test]
fn reinterpret_packs_and_unpacks_through_bytes() {
    let s = kernels::reinterprets::kernel::<32>()
        .specialize(&[
            TensorMeta::contiguous(I8, &[100, 32]),
            TensorMeta::contiguous(I32, &[100, 8]),
        ])
        .unwrap();
    let text = s.ir_text();
    let count = |op: &str| text.lines().filter(|l| l.contains(op)).count();
    // i8 -> i32 twice (unpack), i32 -> bf16 and bf16 -> i32 (pack + unpack each); i32 -> f32 is a
    // same-width bitcast and i8 -> i8 only a reshape.
    assert_eq!(count("= unpack "), 4, "{text}");
    assert_eq!(count("= pack "), 2, "{text}");
    for ty in ["tile<256xi32>", "tile<512xbf16>", "tile<1024xi8>"] {
        assert!(text.contains(ty), "no {ty} in:\n{text}");
    }
}

#[test]
fn reinterpret_refuses_a_size_change() {
    let err = kernels::bad_reinterpret::kernel::<32>()
        .specialize(&vec![TensorMeta::contiguous(I32, &[100, 8]); 2])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot reinterpret a i32 tile of shape (32, 8) (8192 bits) as a bf16 tile of shape (32, 8) (4096 bits)"),
        "{err}"
    );
}
