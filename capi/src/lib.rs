//! `libcutile_kernels.so`: the C ABI of `cutile-kernels`, exporting the five entry points TileGym's
//! cutile-rs backend binds (`cutile_matmul`, `cutile_bmm`, `cutile_silu_and_mul`, `cutile_swiglu`,
//! `cutile_attention_sink`) with the signatures of `include/cutile_kernels.h`.
//!
//! Each entry point reads its [`TensorDesc`]s, borrows the caller's stream and runs the op through
//! [`kernels::foreign`], returning an `int32_t` code (see the header) instead of unwinding: a bad
//! descriptor, an unsupported case or a panic becomes a code, never a crash. Tile and schedule
//! arguments are ignored (the library picks its own configuration). With `CUTILE_KERNELS_LOG=1` the
//! error text behind a nonzero code is printed to stderr, since the ABI has no way to return it.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cutile::runtime::RuntimeError;
use cutile_ir::ScalarType;
use kernels::OpError;
use kernels::foreign::{self, ForeignStream, RawTensor};

/// Largest rank a descriptor holds.
pub const MAX_DIMS: usize = 5;

/// One tensor as the caller describes it (`TensorDesc` of the header; strides in elements).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TensorDesc {
    pub ptr: u64,
    pub ndim: i32,
    pub shape: [i64; MAX_DIMS],
    pub strides: [i64; MAX_DIMS],
    pub dtype: i32,
}

/// Return codes (the header's `CUTILE_*`).
pub mod rc {
    pub const OK: i32 = 0;
    pub const DTYPE: i32 = -2;
    pub const LAUNCH: i32 = -3;
    pub const DEVICE: i32 = -4;
    pub const NULL: i32 = -5;
    pub const BAD_ARGUMENTS: i32 = -6;
}

/// Why a call returned a nonzero code.
#[derive(Debug)]
struct Failure {
    code: i32,
    message: String,
}

impl Failure {
    fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<OpError> for Failure {
    fn from(e: OpError) -> Failure {
        let code = match &e {
            OpError::DType { .. } => rc::DTYPE,
            OpError::Launch(_) | OpError::Tune(_) => rc::LAUNCH,
            OpError::UnsupportedDevice { .. } => rc::DEVICE,
            OpError::Runtime(
                RuntimeError::NoDriver { .. }
                | RuntimeError::DriverInit { .. }
                | RuntimeError::NoDevice { .. }
                | RuntimeError::DriverTooOld { .. }
                | RuntimeError::DeviceOutOfRange { .. }
                | RuntimeError::Driver { .. },
            ) => rc::DEVICE,
            _ => rc::BAD_ARGUMENTS,
        };
        Failure::new(code, e.to_string())
    }
}

/// The element type of a descriptor's dtype code.
fn dtype_of(code: i32) -> Option<ScalarType> {
    Some(match code {
        0 => ScalarType::F32,
        1 => ScalarType::F16,
        2 => ScalarType::BF16,
        3 => ScalarType::I32,
        4 => ScalarType::I64,
        _ => return None,
    })
}

/// Reads a descriptor.
///
/// # Safety
/// `d` is null or points to a readable `TensorDesc`.
unsafe fn read(name: &'static str, d: *const TensorDesc) -> Result<RawTensor, Failure> {
    // SAFETY: null or readable, by the caller's promise.
    let Some(d) = (unsafe { d.as_ref() }) else {
        return Err(Failure::new(rc::NULL, format!("`{name}`: null descriptor")));
    };
    let rank = usize::try_from(d.ndim)
        .ok()
        .filter(|&r| r <= MAX_DIMS)
        .ok_or_else(|| {
            Failure::new(
                rc::BAD_ARGUMENTS,
                format!("`{name}`: ndim {} is outside 0..={MAX_DIMS}", d.ndim),
            )
        })?;
    let dtype = dtype_of(d.dtype).ok_or_else(|| {
        Failure::new(
            rc::DTYPE,
            format!(
                "`{name}`: dtype code {} is none of 0 (f32), 1 (f16), 2 (bf16), 3 (i32), 4 (i64)",
                d.dtype
            ),
        )
    })?;
    let shape = d.shape[..rank].to_vec();
    if d.ptr == 0 && shape.iter().all(|&e| e != 0) {
        return Err(Failure::new(
            rc::NULL,
            format!("`{name}`: null address for a non-empty tensor of shape {shape:?}"),
        ));
    }
    Ok(RawTensor {
        name,
        ptr: d.ptr,
        shape,
        strides: d.strides[..rank].to_vec(),
        dtype,
    })
}

/// Borrows the caller's stream on `device_id`.
///
/// # Safety
/// `raw_stream` is a live stream of that device's primary context (or 0).
unsafe fn stream(device_id: i32, raw_stream: u64) -> Result<ForeignStream, Failure> {
    let ordinal = usize::try_from(device_id)
        .map_err(|_| Failure::new(rc::DEVICE, format!("device id {device_id} is negative")))?;
    // SAFETY: forwarded to the caller.
    Ok(unsafe { ForeignStream::new(ordinal, raw_stream as usize) }?)
}

/// Runs `body`, turning an error or a panic into a return code (logged when asked).
fn guard(entry: &str, body: impl FnOnce() -> Result<(), Failure>) -> i32 {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return rc::OK,
        Ok(Err(f)) => f,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Failure::new(rc::BAD_ARGUMENTS, format!("internal error (panic): {what}"))
        }
    };
    if std::env::var_os("CUTILE_KERNELS_LOG").is_some_and(|v| v != "0") {
        eprintln!("{entry} -> {}: {}", failure.code, failure.message);
    }
    failure.code
}

/// `c = a @ b` (see the header).
///
/// # Safety
/// Each descriptor is null or readable and describes live device memory of `device_id`, which stays
/// alive until the work queued on `raw_stream` (a live stream of that device, or 0) has finished.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cutile_matmul(
    c: *const TensorDesc,
    a: *const TensorDesc,
    b: *const TensorDesc,
    _bm: i32,
    _bn: i32,
    _bk: i32,
    _group_size_m: i32,
    _num_programs: i32,
    _num_cta_in_cga: i32,
    _occupancy: i32,
    _persistent: i32,
    device_id: i32,
    raw_stream: u64,
) -> i32 {
    guard("cutile_matmul", || {
        // SAFETY: the caller's promises, forwarded.
        unsafe {
            let (c, a, b) = (read("c", c)?, read("a", a)?, read("b", b)?);
            let s = stream(device_id, raw_stream)?;
            Ok(foreign::matmul(&s, &a, &b, &c)?)
        }
    })
}

/// `c[q] = op(a[q]) @ op(b[q])` (see the header); one GEMM launch per batch entry.
///
/// # Safety
/// As [`cutile_matmul`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cutile_bmm(
    c: *const TensorDesc,
    a: *const TensorDesc,
    b: *const TensorDesc,
    _bm: i32,
    _bn: i32,
    _bk: i32,
    _group_size_m: i32,
    trans_a: i32,
    trans_b: i32,
    _persistent: i32,
    _num_cta_in_cga: i32,
    _occupancy: i32,
    _num_programs: i32,
    device_id: i32,
    raw_stream: u64,
) -> i32 {
    guard("cutile_bmm", || {
        // SAFETY: the caller's promises, forwarded.
        unsafe {
            let (c, a, b) = (read("c", c)?, read("a", a)?, read("b", b)?);
            let s = stream(device_id, raw_stream)?;
            Ok(foreign::bmm(&s, &a, &b, &c, trans_a != 0, trans_b != 0)?)
        }
    })
}

/// `out = silu(inp[:, :h]) * inp[:, h:]` (see the header).
///
/// # Safety
/// As [`cutile_matmul`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cutile_silu_and_mul(
    out: *const TensorDesc,
    inp: *const TensorDesc,
    _block_size: i32,
    _num_cta_in_cga: i32,
    _occupancy: i32,
    device_id: i32,
    raw_stream: u64,
) -> i32 {
    guard("cutile_silu_and_mul", || {
        // SAFETY: the caller's promises, forwarded.
        unsafe {
            let (out, inp) = (read("out", out)?, read("inp", inp)?);
            let s = stream(device_id, raw_stream)?;
            Ok(foreign::silu_and_mul(&s, &inp, &out)?)
        }
    })
}

/// `c = silu(a) * b` (see the header).
///
/// # Safety
/// As [`cutile_matmul`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cutile_swiglu(
    c: *const TensorDesc,
    a: *const TensorDesc,
    b: *const TensorDesc,
    _tile_size: i32,
    _num_cta_in_cga: i32,
    _occupancy: i32,
    device_id: i32,
    raw_stream: u64,
) -> i32 {
    guard("cutile_swiglu", || {
        // SAFETY: the caller's promises, forwarded.
        unsafe {
            let (c, a, b) = (read("c", c)?, read("a", a)?, read("b", b)?);
            let s = stream(device_id, raw_stream)?;
            Ok(foreign::swiglu(&s, &a, &b, &c)?)
        }
    })
}

/// Attention with per-head sink logits (TileGym's `attention_sink`): causal from position
/// `start_q[0]`, sliding window `bandwidth` (0: none), over `[bs, heads, seq, head_dim]` bf16/f16
/// tensors with `sinks` `[heads]` of the same type. The integer arguments must agree with the shapes;
/// the tile sizes, grid, CGA size and occupancy are the library's choice and are ignored. Synchronous:
/// returns after the call has run on `raw_stream`.
///
/// # Safety
/// As [`cutile_matmul`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cutile_attention_sink(
    out: *const TensorDesc,
    q: *const TensorDesc,
    k: *const TensorDesc,
    v: *const TensorDesc,
    sinks: *const TensorDesc,
    start_q: *const TensorDesc,
    qk_scale: f32,
    tile_d: i32,
    h: i32,
    n_kv_ctx: i32,
    _tile_m: i32,
    _tile_n: i32,
    query_group_size: i32,
    bandwidth: i32,
    _grid_x: i32,
    _grid_y: i32,
    _num_cta_in_cga: i32,
    _occupancy: i32,
    device_id: i32,
    raw_stream: u64,
) -> i32 {
    guard("cutile_attention_sink", || {
        // SAFETY: the caller's promises, forwarded.
        unsafe {
            let (o, q, k, v) = (
                read("out", out)?,
                read("q", q)?,
                read("k", k)?,
                read("v", v)?,
            );
            let (sinks, start_q) = (read("sinks", sinks)?, read("start_q", start_q)?);
            let options = foreign::attention_sink_options(
                &q,
                &k,
                &sinks,
                &start_q,
                qk_scale,
                tile_d,
                h,
                n_kv_ctx,
                query_group_size,
                bandwidth,
            )?;
            let s = stream(device_id, raw_stream)?;
            Ok(foreign::attention_sink(
                &s, &q, &k, &v, &sinks, &start_q, options, &o,
            )?)
        }
    })
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;

    fn desc(ndim: i32, dtype: i32, ptr: u64) -> TensorDesc {
        TensorDesc {
            ptr,
            ndim,
            shape: [2, 3, 0, 0, 0],
            strides: [3, 1, 0, 0, 0],
            dtype,
        }
    }

    /// The shipped header, compiled by the system C compiler, agrees with the Rust struct.
    #[test]
    fn header_layout_matches_rust() {
        let dir = tempdir();
        let src = dir.join("layout.c");
        let header = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include");
        std::fs::write(
            &src,
            "#include <stdio.h>\n#include <stddef.h>\n#include \"cutile_kernels.h\"\n\
             int main(void) { printf(\"%zu %zu %zu %zu %zu %zu\\n\", sizeof(TensorDesc), \
             offsetof(TensorDesc, ptr), offsetof(TensorDesc, ndim), offsetof(TensorDesc, shape), \
             offsetof(TensorDesc, strides), offsetof(TensorDesc, dtype)); return 0; }\n",
        )
        .expect("write the C probe");
        let exe = dir.join("layout");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(&cc)
            .arg("-std=c99")
            .arg("-Wall")
            .arg("-Werror")
            .arg("-I")
            .arg(&header)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap_or_else(|e| panic!("run the C compiler `{cc}` (set CC to another one): {e}"));
        assert!(status.success(), "the header does not compile with {cc}");
        let out = Command::new(&exe).output().expect("run the C probe");
        let c: Vec<usize> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|v| v.parse().expect("a number"))
            .collect();
        let rust = vec![
            size_of::<TensorDesc>(),
            offset_of!(TensorDesc, ptr),
            offset_of!(TensorDesc, ndim),
            offset_of!(TensorDesc, shape),
            offset_of!(TensorDesc, strides),
            offset_of!(TensorDesc, dtype),
        ];
        assert_eq!(
            c, rust,
            "C (sizeof, offsetof ptr/ndim/shape/strides/dtype) vs Rust"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cutile-capi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        dir
    }

    /// The return code a read gives.
    fn code(r: Result<RawTensor, Failure>) -> i32 {
        r.map_or_else(|f| f.code, |_| rc::OK)
    }

    #[test]
    fn bad_descriptors_give_codes_not_crashes() {
        let ok = desc(2, 2, 0x1000);
        // SAFETY: null and valid descriptors only; no call reaches the device.
        unsafe {
            assert_eq!(code(read("x", std::ptr::null())), rc::NULL);
            assert_eq!(code(read("x", &desc(6, 2, 0x1000))), rc::BAD_ARGUMENTS);
            assert_eq!(code(read("x", &desc(-1, 2, 0x1000))), rc::BAD_ARGUMENTS);
            assert_eq!(code(read("x", &desc(2, 9, 0x1000))), rc::DTYPE);
            assert_eq!(code(read("x", &desc(2, 2, 0))), rc::NULL);
            let t = read("x", &ok).expect("a valid descriptor");
            assert_eq!(
                (t.shape, t.strides, t.dtype),
                (vec![2, 3], vec![3, 1], ScalarType::BF16)
            );
            let null = std::ptr::null();
            assert_eq!(cutile_swiglu(&ok, &ok, &ok, 0, -1, -1, -1, 0), rc::DEVICE);
            assert_eq!(cutile_silu_and_mul(&ok, null, 0, -1, -1, 0, 0), rc::NULL);
            assert_eq!(
                cutile_attention_sink(
                    &ok, &ok, &ok, &ok, &ok, &ok, 1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 0, 0
                ),
                rc::BAD_ARGUMENTS
            );
            assert_eq!(
                cutile_attention_sink(
                    &ok, null, &ok, &ok, &ok, &ok, 1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 0, 0
                ),
                rc::NULL
            );
            assert_eq!(
                cutile_bmm(&ok, null, &ok, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                rc::NULL
            );
        }
    }

    fn desc4(shape: [i64; 4], dtype: i32) -> TensorDesc {
        let mut strides = [0i64; 5];
        let mut acc = 1;
        for i in (0..4).rev() {
            strides[i] = acc;
            acc *= shape[i];
        }
        TensorDesc {
            ptr: 0x1000,
            ndim: 4,
            shape: [shape[0], shape[1], shape[2], shape[3], 0],
            strides,
            dtype,
        }
    }

    fn desc1(n: i64, dtype: i32) -> TensorDesc {
        TensorDesc {
            ptr: 0x2000,
            ndim: 1,
            shape: [n, 0, 0, 0, 0],
            strides: [1, 0, 0, 0, 0],
            dtype,
        }
    }

    /// `cutile_attention_sink`'s argument checks run before any device work: a consistent call reaches
    /// the device (here a bad device id), each inconsistency is a bad-arguments or dtype code.
    #[test]
    fn attention_sink_checks_its_arguments() {
        // bs 2, 8 heads over 2 K/V heads (group 4), 128 queries, 160 keys, head_dim 64, bf16.
        let (q, kv) = (desc4([2, 8, 128, 64], 2), desc4([2, 2, 160, 64], 2));
        let (sinks, start) = (desc1(8, 2), desc1(1, 3));
        let call =
            |q: &TensorDesc, k: &TensorDesc, s: &TensorDesc, st: &TensorDesc, ints: [i32; 5]| {
                let [d, h, n_kv, group, band] = ints;
                // SAFETY: valid descriptors; nothing reaches device memory (device -1 fails first).
                unsafe {
                    cutile_attention_sink(
                        q, q, k, k, s, st, 0.125, d, h, n_kv, 128, 64, group, band, 1, 16, -1, -1,
                        -1, 0,
                    )
                }
            };
        let good = [64, 8, 160, 4, 0];
        assert_eq!(call(&q, &kv, &sinks, &start, good), rc::DEVICE);
        assert_eq!(
            call(&q, &kv, &sinks, &start, [64, 8, 160, 4, 128]),
            rc::DEVICE
        );
        for ints in [
            [128, 8, 160, 4, 0],
            [64, 4, 160, 4, 0],
            [64, 8, 128, 4, 0],
            [64, 8, 160, 2, 0],
            [64, 8, 160, 4, -1],
        ] {
            assert_eq!(
                call(&q, &kv, &sinks, &start, ints),
                rc::BAD_ARGUMENTS,
                "{ints:?}"
            );
        }
        assert_eq!(call(&q, &kv, &desc1(4, 2), &start, good), rc::BAD_ARGUMENTS);
        assert_eq!(call(&q, &kv, &desc1(8, 0), &start, good), rc::DTYPE);
        assert_eq!(call(&q, &kv, &sinks, &desc1(1, 4), good), rc::DTYPE);
        assert_eq!(call(&q, &kv, &sinks, &desc1(0, 3), good), rc::BAD_ARGUMENTS);
        assert_eq!(
            call(&desc(2, 2, 0x1000), &kv, &sinks, &start, good),
            rc::BAD_ARGUMENTS
        );
    }

    #[test]
    fn a_panic_becomes_a_code() {
        assert_eq!(guard("t", || panic!("boom")), rc::BAD_ARGUMENTS);
        assert_eq!(guard("t", || Ok(())), rc::OK);
    }
}
