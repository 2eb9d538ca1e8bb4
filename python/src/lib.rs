//! `cutile_rs_torch._native`: the Python extension over [`cutile_kernels::foreign`]. The Python layer
//! (`pysrc/cutile_rs_torch`) allocates outputs with torch and calls these functions with each tensor as
//! `(data_ptr, shape, strides, dtype)`, the device ordinal and the raw `cuda_stream` of torch's current
//! stream; each queues its kernels on that stream and returns without waiting.
//!
//! The GIL is released while Rust runs; an op error or a Rust panic is raised as `CutileError` (a
//! `RuntimeError`) carrying the typed error's text. Importing touches no GPU.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cutile_ir::ScalarType;
use cutile_kernels::OpError;
use cutile_kernels::foreign::{self, ForeignStream, RawTensor};
use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(
    _native,
    CutileError,
    PyRuntimeError,
    "An op refused a call or failed to launch."
);

/// A tensor as Python passes it: `(data_ptr, shape, strides in elements, dtype name)`.
type Desc = (u64, Vec<i64>, Vec<i64>, String);

fn raw(name: &'static str, (ptr, shape, strides, dtype): Desc) -> PyResult<RawTensor> {
    let dtype = match dtype.as_str() {
        "f32" => ScalarType::F32,
        "f16" => ScalarType::F16,
        "bf16" => ScalarType::BF16,
        other => {
            return Err(CutileError::new_err(format!(
                "`{name}`: element type `{other}` has no kernel; use float32, float16 or bfloat16"
            )));
        }
    };
    Ok(RawTensor {
        name,
        ptr,
        shape,
        strides,
        dtype,
    })
}

/// Runs `body` without the GIL, on torch's stream, turning errors and panics into `CutileError`.
fn run(
    py: Python<'_>,
    device: usize,
    stream: usize,
    body: impl FnOnce(&ForeignStream) -> Result<(), OpError> + Send,
) -> PyResult<()> {
    let outcome = py.allow_threads(|| {
        catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the Python layer passes `torch.cuda.current_stream(device).cuda_stream`, a live
            // stream of the device's primary context, kept alive by torch across the call.
            let s = unsafe { ForeignStream::new(device, stream) }?;
            body(&s)
        }))
    });
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(CutileError::new_err(e.to_string())),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(CutileError::new_err(format!(
                "internal error (a Rust panic; please report it): {what}"
            )))
        }
    }
}

// SAFETY (every op below): the Python layer passes tensors it holds for the call, on `device`, with
// the output freshly allocated by torch; torch's caching allocator keeps their memory alive until the
// work queued on its stream has run.

#[pyfunction]
fn softmax(py: Python<'_>, x: Desc, y: Desc, device: usize, stream: usize) -> PyResult<()> {
    let (x, y) = (raw("x", x)?, raw("y", y)?);
    run(py, device, stream, |s| unsafe {
        foreign::softmax(s, &x, &y)
    })
}

#[pyfunction]
fn rms_norm(
    py: Python<'_>,
    x: Desc,
    w: Desc,
    eps: f32,
    y: Desc,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (x, w, y) = (raw("x", x)?, raw("weight", w)?, raw("y", y)?);
    run(py, device, stream, |s| unsafe {
        foreign::rms_norm(s, &x, &w, eps, &y)
    })
}

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn layer_norm(
    py: Python<'_>,
    x: Desc,
    w: Desc,
    b: Desc,
    eps: f32,
    y: Desc,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (x, w, b, y) = (
        raw("x", x)?,
        raw("weight", w)?,
        raw("bias", b)?,
        raw("y", y)?,
    );
    run(py, device, stream, |s| unsafe {
        foreign::layer_norm(s, &x, &w, &b, eps, &y)
    })
}

#[pyfunction]
fn matmul(py: Python<'_>, a: Desc, b: Desc, c: Desc, device: usize, stream: usize) -> PyResult<()> {
    let (a, b, c) = (raw("a", a)?, raw("b", b)?, raw("c", c)?);
    run(py, device, stream, |s| unsafe {
        foreign::matmul(s, &a, &b, &c)
    })
}

#[pyfunction]
fn silu_and_mul(py: Python<'_>, x: Desc, y: Desc, device: usize, stream: usize) -> PyResult<()> {
    let (x, y) = (raw("x", x)?, raw("y", y)?);
    run(py, device, stream, |s| unsafe {
        foreign::silu_and_mul(s, &x, &y)
    })
}

#[pyfunction]
fn swiglu(py: Python<'_>, a: Desc, b: Desc, y: Desc, device: usize, stream: usize) -> PyResult<()> {
    let (a, b, y) = (raw("a", a)?, raw("b", b)?, raw("y", y)?);
    run(py, device, stream, |s| unsafe {
        foreign::swiglu(s, &a, &b, &y)
    })
}

#[pyfunction]
#[pyo3(signature = (q, k, v, o, causal, scale, device, stream))]
#[allow(clippy::too_many_arguments)]
fn attention(
    py: Python<'_>,
    q: Desc,
    k: Desc,
    v: Desc,
    o: Desc,
    causal: bool,
    scale: Option<f32>,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (q, k, v, o) = (raw("q", q)?, raw("k", k)?, raw("v", v)?, raw("o", o)?);
    run(py, device, stream, |s| unsafe {
        foreign::attention(s, &q, &k, &v, causal, scale, &o)
    })
}

/// Adds an AOT kernel bundle (a file made by `cargo xtask aot`) to the kernel lookup chain.
#[pyfunction]
fn register_bundle(path: std::path::PathBuf) -> PyResult<()> {
    let bundle = cutile::bundle::Bundle::open(&path)
        .map_err(|e| CutileError::new_err(format!("kernel bundle {}: {e}", path.display())))?;
    cutile::bundle::register(bundle);
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CutileError", m.py().get_type::<CutileError>())?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(matmul, m)?)?;
    m.add_function(wrap_pyfunction!(attention, m)?)?;
    m.add_function(wrap_pyfunction!(silu_and_mul, m)?)?;
    m.add_function(wrap_pyfunction!(swiglu, m)?)?;
    m.add_function(wrap_pyfunction!(register_bundle, m)?)?;
    Ok(())
}
