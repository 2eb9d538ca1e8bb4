//! `cutile_rs_torch._native`: the Python extension over [`cutile_kernels::foreign`]. The Python layer
//! (`pysrc/cutile_rs_torch`) allocates outputs with torch and calls these functions with each tensor as
//! `(data_ptr, shape, strides, dtype)`, the device ordinal and the raw `cuda_stream` of torch's current
//! stream; each queues its kernels on that stream and returns without waiting.
//!
//! The GIL is released while Rust runs; an op error or a Rust panic is raised as `CutileError` (a
//! `RuntimeError`) carrying the typed error's text. Importing touches no GPU.
//!
//! Repeated eager calls take a shorter path: `FastOp` (`fast`) does a whole call (tensors read, output
//! allocated, launch of the replayed plan) in one extension call through torch's DLPack exchange table
//! (`exchange`).

mod exchange;
mod fast;

use std::panic::{AssertUnwindSafe, catch_unwind};

use cutile_ir::ScalarType;
use cutile_kernels::OpError;
use cutile_kernels::foreign::{self, ForeignStream, RawTensor, ReplayOp};
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
        "i32" => ScalarType::I32,
        "i64" => ScalarType::I64,
        other => {
            return Err(CutileError::new_err(format!(
                "`{name}`: element type `{other}` has no kernel; use float32, float16 or bfloat16 \
                 (int32 or int64 for indices)"
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

/// Runs `body` without the GIL, turning errors and panics into `CutileError`.
pub(crate) fn guarded<T: Send>(
    py: Python<'_>,
    body: impl FnOnce() -> Result<T, OpError> + Send,
) -> PyResult<T> {
    match py.allow_threads(|| catch_unwind(AssertUnwindSafe(body))) {
        Ok(Ok(v)) => Ok(v),
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

/// Runs `body` without the GIL, on torch's stream, turning errors and panics into `CutileError`.
fn run(
    py: Python<'_>,
    device: usize,
    stream: usize,
    body: impl FnOnce(&ForeignStream) -> Result<(), OpError> + Send,
) -> PyResult<()> {
    guarded(py, || {
        // SAFETY: the Python layer passes `torch.cuda.current_stream(device).cuda_stream`, a live
        // stream of the device's primary context, kept alive by torch across the call.
        let s = unsafe { ForeignStream::new(device, stream) }?;
        body(&s)
    })
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

/// The activation named as the Python layer names it.
fn unary_activation(name: &str) -> PyResult<foreign::UnaryActivation> {
    use foreign::UnaryActivation as A;
    Ok(match name {
        "gelu" => A::Gelu,
        "gelu_tanh" => A::GeluTanh,
        "relu" => A::Relu,
        "geglu" => A::Geglu,
        "geglu_tanh" => A::GegluTanh,
        other => {
            return Err(CutileError::new_err(format!(
                "unknown activation `{other}` (gelu, gelu_tanh, relu, geglu, geglu_tanh)"
            )));
        }
    })
}

fn rope_style(name: &str) -> PyResult<cutile_kernels::rope::RopeStyle> {
    use cutile_kernels::rope::RopeStyle;
    match name {
        "neox" => Ok(RopeStyle::Neox),
        "gptj" => Ok(RopeStyle::Gptj),
        other => Err(CutileError::new_err(format!(
            "unknown RoPE style `{other}` (neox: half-split, gptj: interleaved)"
        ))),
    }
}

#[pyfunction]
fn activation(
    py: Python<'_>,
    name: &str,
    x: Desc,
    y: Desc,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let which = unary_activation(name)?;
    let (x, y) = (raw("x", x)?, raw("y", y)?);
    run(py, device, stream, |s| unsafe {
        foreign::unary_activation(s, &x, &y, which)
    })
}

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn rope(
    py: Python<'_>,
    q: Desc,
    k: Desc,
    cos: Desc,
    sin: Desc,
    positions: Desc,
    q_out: Desc,
    k_out: Desc,
    style: &str,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let style = rope_style(style)?;
    let (q, k, cos, sin, positions) = (
        raw("q", q)?,
        raw("k", k)?,
        raw("cos", cos)?,
        raw("sin", sin)?,
        raw("positions", positions)?,
    );
    let (q_out, k_out) = (raw("q_out", q_out)?, raw("k_out", k_out)?);
    run(py, device, stream, |s| unsafe {
        foreign::rope(s, &q, &k, &cos, &sin, &positions, &q_out, &k_out, style)
    })
}

/// `index` is `(batch, pos)` for a contiguous cache or `(slot_mapping,)` for a paged one.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn write_kv_cache(
    py: Python<'_>,
    k: Desc,
    v: Desc,
    index: Vec<Desc>,
    k_cache: Desc,
    v_cache: Desc,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (k, v) = (raw("k", k)?, raw("v", v)?);
    let (kc, vc) = (raw("k_cache", k_cache)?, raw("v_cache", v_cache)?);
    let index = kv_index(index)?;
    run(py, device, stream, |s| unsafe {
        foreign::write_kv_cache(s, &k, &v, index.as_index(), &kc, &vc)
    })
}

/// The cache index tensors, owned, as [`foreign::KvIndex`] borrows them.
enum KvIndexOwned {
    Contiguous(foreign::RawTensor, foreign::RawTensor),
    Paged(foreign::RawTensor),
}

impl KvIndexOwned {
    fn as_index(&self) -> foreign::KvIndex<'_> {
        match self {
            KvIndexOwned::Contiguous(batch, pos) => foreign::KvIndex::Contiguous { batch, pos },
            KvIndexOwned::Paged(slot_mapping) => foreign::KvIndex::Paged { slot_mapping },
        }
    }
}

fn kv_index(index: Vec<Desc>) -> PyResult<KvIndexOwned> {
    let mut it = index.into_iter();
    match (it.next(), it.next(), it.next()) {
        (Some(b), Some(p), None) => Ok(KvIndexOwned::Contiguous(raw("batch", b)?, raw("pos", p)?)),
        (Some(sl), None, None) => Ok(KvIndexOwned::Paged(raw("slot_mapping", sl)?)),
        _ => Err(CutileError::new_err(
            "the cache index is (batch, pos) for a contiguous cache or (slot_mapping,) for a paged one",
        )),
    }
}

#[pyfunction]
#[pyo3(signature = (q, k_cache, v_cache, block_table, seq_lens, scale, o, lse, device, stream))]
#[allow(clippy::too_many_arguments)]
fn attention_decode(
    py: Python<'_>,
    q: Desc,
    k_cache: Desc,
    v_cache: Desc,
    block_table: Option<Desc>,
    seq_lens: Desc,
    scale: Option<f32>,
    o: Desc,
    lse: Option<Desc>,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (q, k, v) = (
        raw("q", q)?,
        raw("k_cache", k_cache)?,
        raw("v_cache", v_cache)?,
    );
    let table = block_table.map(|b| raw("block_table", b)).transpose()?;
    let (lens, o) = (raw("seq_lens", seq_lens)?, raw("o", o)?);
    let lse = lse.map(|l| raw("lse", l)).transpose()?;
    run(py, device, stream, |s| unsafe {
        let cache = foreign::DecodeCache {
            k: &k,
            v: &v,
            block_table: table.as_ref(),
        };
        foreign::decode(s, &q, cache, &lens, scale, &o, lse.as_ref())
    })
}

#[pyfunction]
fn embedding(
    py: Python<'_>,
    table: Desc,
    ids: Desc,
    out: Desc,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (table, ids, out) = (raw("table", table)?, raw("ids", ids)?, raw("out", out)?);
    run(py, device, stream, |s| unsafe {
        foreign::embedding(s, &table, &ids, &out)
    })
}

#[pyfunction]
fn argmax(py: Python<'_>, x: Desc, out: Desc, device: usize, stream: usize) -> PyResult<()> {
    let (x, out) = (raw("x", x)?, raw("out", out)?);
    run(py, device, stream, |s| unsafe {
        foreign::argmax(s, &x, &out)
    })
}

#[pyfunction]
fn topk(
    py: Python<'_>,
    x: Desc,
    values: Desc,
    indices: Desc,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let (x, values, indices) = (
        raw("x", x)?,
        raw("values", values)?,
        raw("indices", indices)?,
    );
    run(py, device, stream, |s| unsafe {
        foreign::topk(s, &x, &values, &indices)
    })
}

/// `tensors`: x, positions, weight, cos, sin, q, k_cache, v_cache; `optional`: bias, q_norm, k_norm
/// (each or None); `index` as in [`write_kv_cache`].
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn fused_qkv(
    py: Python<'_>,
    tensors: (Desc, Desc, Desc, Desc, Desc, Desc, Desc, Desc),
    optional: (Option<Desc>, Option<Desc>, Option<Desc>),
    index: Vec<Desc>,
    eps: f32,
    style: &str,
    device: usize,
    stream: usize,
) -> PyResult<()> {
    let style = rope_style(style)?;
    let (x, positions, weight, cos, sin, q, k_cache, v_cache) = tensors;
    let (x, positions, weight) = (
        raw("x", x)?,
        raw("positions", positions)?,
        raw("weight", weight)?,
    );
    let (cos, sin, q) = (raw("cos", cos)?, raw("sin", sin)?, raw("q", q)?);
    let (kc, vc) = (raw("k_cache", k_cache)?, raw("v_cache", v_cache)?);
    let opt = |name, d: Option<Desc>| d.map(|d| raw(name, d)).transpose();
    let (bias, q_norm, k_norm) = (
        opt("bias", optional.0)?,
        opt("q_norm", optional.1)?,
        opt("k_norm", optional.2)?,
    );
    let index = kv_index(index)?;
    run(py, device, stream, |s| unsafe {
        let t = foreign::QkvTensors {
            x: &x,
            positions: &positions,
            weight: &weight,
            bias: bias.as_ref(),
            q_norm: q_norm.as_ref(),
            k_norm: k_norm.as_ref(),
            cos: &cos,
            sin: &sin,
            q: &q,
            k_cache: &kc,
            v_cache: &vc,
            index: index.as_index(),
        };
        foreign::fused_qkv(s, &t, eps, style)
    })
}

/// The op a `FastOp` is named for: one of `ReplayOp`'s, an activation by its Python name.
pub(crate) fn replay_op(op: &str, eps: f32) -> PyResult<ReplayOp> {
    Ok(match op {
        "softmax" => ReplayOp::Softmax,
        "rms_norm" => ReplayOp::RmsNorm { eps },
        "layer_norm" => ReplayOp::LayerNorm { eps },
        "silu_and_mul" => ReplayOp::SiluAndMul,
        "swiglu" => ReplayOp::Swiglu,
        "matmul" => ReplayOp::Matmul,
        other => ReplayOp::Activation(unary_activation(other).map_err(|_| {
            CutileError::new_err(format!(
                "no fast path for op `{other}` (softmax, rms_norm, layer_norm, silu_and_mul, \
                 swiglu, matmul, gelu, gelu_tanh, relu, geglu, geglu_tanh)"
            ))
        })?),
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
    m.add_function(wrap_pyfunction!(activation, m)?)?;
    m.add_function(wrap_pyfunction!(rope, m)?)?;
    m.add_function(wrap_pyfunction!(write_kv_cache, m)?)?;
    m.add_function(wrap_pyfunction!(attention_decode, m)?)?;
    m.add_function(wrap_pyfunction!(embedding, m)?)?;
    m.add_function(wrap_pyfunction!(argmax, m)?)?;
    m.add_function(wrap_pyfunction!(topk, m)?)?;
    m.add_function(wrap_pyfunction!(fused_qkv, m)?)?;
    m.add_function(wrap_pyfunction!(register_bundle, m)?)?;
    m.add_class::<fast::FastOp>()?;
    m.add_function(wrap_pyfunction!(exchange::use_exchange_api, m)?)?;
    m.add_function(wrap_pyfunction!(exchange::exchange_describe, m)?)?;
    m.add_function(wrap_pyfunction!(exchange::exchange_empty_like, m)?)?;
    Ok(())
}
