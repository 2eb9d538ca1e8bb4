//! Helpers shared by the kernel-family test files: array metadata, deterministic data, and the GPU plumbing
//! (a cubin from tileiras or a saved directory; device + stream, or a printed reason the test is skipped).

use cutile::dsl::{Specialized, TensorMeta};
use cutile::runtime::{Device, Stream};
use cutile_ir::ScalarType;

pub fn t(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, shape)
}

/// Deterministic values in [-1, 1).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// The sm_90 cubin of a specialization: from tileiras, else from `CUTILE_KERNELS_CUBINS`; `None` (after
/// printing why) when neither has it.
pub fn gpu_cubin(name: &str, s: &Specialized) -> Option<Vec<u8>> {
    if let Ok(t) = cutile::toolchain::Tileiras::discover() {
        let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
        let c = s
            .compile(&t, &req)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        return Some(c.bytes);
    }
    let path = std::env::var_os("CUTILE_KERNELS_CUBINS")
        .map(|d| std::path::PathBuf::from(d).join(format!("{name}.sm_90.cubin")));
    match path.as_ref().map(std::fs::read) {
        Some(Ok(bytes)) => Some(bytes),
        _ => {
            eprintln!("SKIPPED: {name}: no tileiras and no saved cubin ({path:?})");
            None
        }
    }
}

/// Device 0 and a stream, or `None` after printing why the GPU test is skipped.
pub fn gpu_device() -> Option<(Device, Stream)> {
    if !cutile::runtime::is_available() {
        eprintln!("SKIPPED: no CUDA driver");
        return None;
    }
    match Device::new(0) {
        Ok(d) => {
            let s = Stream::new(&d).expect("create a stream");
            Some((d, s))
        }
        Err(e) => {
            eprintln!("SKIPPED: no usable CUDA device ({e})");
            None
        }
    }
}
