//! The host API for memory and streams owned by someone else (PyTorch through the Python package, C
//! callers through the C ABI): tensors described by address, shape, strides (in elements) and element
//! type ([`RawTensor`]), launched on a borrowed stream ([`ForeignStream`]) and never waited for.
//!
//! Nothing is copied, allocated for the caller's tensors, or freed: each call wraps the described
//! memory as non-owning [`Tensor`]s, runs the family's op (which validates exactly as for owned
//! tensors) and returns once the work is queued. The caller's stream ordering keeps the memory alive,
//! as PyTorch's caching allocator does for its own kernels.
//!
//! [`Replay`] (`replay`) queues a prepared call's launches again over new addresses, for bindings
//! whose per-call host time matters.

mod replay;

pub use replay::{Replay, ReplayOp};

use cutile::launch::{TensorArg, TensorArgMut};
use cutile::runtime::{DeviceElement, Stream, Tensor};
use cutile_ir::ScalarType;

use crate::op::{OpError, float_kernel};

/// One tensor argument described by its owner.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTensor {
    /// The parameter's name (for errors).
    pub name: &'static str,
    /// Device address of element 0.
    pub ptr: u64,
    pub shape: Vec<i64>,
    /// Strides in elements.
    pub strides: Vec<i64>,
    pub dtype: ScalarType,
}

impl RawTensor {
    /// Whether both describe the same elements (address, shape, strides and type; names aside).
    pub fn describes_same(&self, other: &RawTensor) -> bool {
        (self.ptr, &self.shape, &self.strides, self.dtype)
            == (other.ptr, &other.shape, &other.strides, other.dtype)
    }

    /// The same memory with the last two axes swapped (a transposed operand).
    fn transposed(&self) -> RawTensor {
        let mut t = self.clone();
        let r = t.shape.len();
        if r >= 2 {
            t.shape.swap(r - 1, r - 2);
            t.strides.swap(r - 1, r - 2);
        }
        t
    }
}

/// A stream someone else created, on a device ordinal, in that device's primary context.
#[derive(Debug)]
pub struct ForeignStream {
    stream: Stream,
}

impl ForeignStream {
    /// Borrows `raw` (a `CUstream`, e.g. `torch.cuda.current_stream().cuda_stream`; 0 is the legacy
    /// default stream) of device `ordinal`.
    ///
    /// # Safety
    /// `raw` must be a live stream of that device's primary context for as long as this value is used.
    pub unsafe fn new(ordinal: usize, raw: usize) -> Result<ForeignStream, OpError> {
        let device = cutile::runtime::Device::new(ordinal)?;
        // SAFETY: forwarded to the caller.
        let stream = unsafe { Stream::from_raw(&device, raw) };
        Ok(ForeignStream { stream })
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }
}

/// Wraps `t` as a non-owning `Tensor<E>`, or names the mismatch when its element type is not `E`.
///
/// # Safety
/// `t` must describe live device memory of the stream's device, as [`Tensor::from_raw_parts`] asks.
unsafe fn wrap<E: DeviceElement>(
    op: &'static str,
    s: &ForeignStream,
    t: &RawTensor,
    like: &RawTensor,
) -> Result<Tensor<E>, OpError> {
    if t.dtype != like.dtype {
        return Err(OpError::DType {
            op,
            arg: t.name,
            dtype: t.dtype,
            constraint: format!("it must match `{}` ({})", like.name, like.dtype),
        });
    }
    if t.shape.len() != t.strides.len() {
        return Err(OpError::Layout {
            op,
            arg: t.name,
            shape: t.shape.clone(),
            strides: t.strides.clone(),
            constraint: "shape and strides must have the same length".into(),
        });
    }
    // SAFETY: forwarded to the caller.
    Ok(unsafe { Tensor::from_raw_parts(t.ptr, &t.shape, &t.strides, s.stream().device()) }?)
}

fn unsupported_dtype(op: &'static str, t: &RawTensor) -> OpError {
    OpError::DType {
        op,
        arg: t.name,
        dtype: t.dtype,
        constraint: "the op takes f32, f16 or bf16".into(),
    }
}

/// Runs `$body` with `$E` the element type of `$first`, each listed tensor wrapped as `Tensor<$E>`.
macro_rules! with_tensors {
    ($op:expr, $s:expr, $first:expr, |$E:ident| [$($name:ident = $t:expr),+] $body:block) => {
        float_kernel!($first.dtype, |$E| {
            (|| -> Result<(), OpError> {
                // SAFETY: every public fn of this module forwards its caller's promise that each
                // RawTensor describes live device memory of the stream's device.
                $(#[allow(unused_mut)] let mut $name = unsafe { wrap::<$E>($op, $s, $t, $first) }?;)+
                $body
            })()
        })
        .unwrap_or_else(|| Err(unsupported_dtype($op, $first)))
    };
}

/// `y = softmax(x)` over the last axis.
///
/// # Safety
/// Every tensor must describe live device memory of the stream's device ([`Tensor::from_raw_parts`]'s
/// contract) until the queued work has finished; `y` must not overlap an input.
pub unsafe fn softmax(s: &ForeignStream, x: &RawTensor, y: &RawTensor) -> Result<(), OpError> {
    with_tensors!("softmax", s, x, |E| [xt = x, yt = y] {
        let p = crate::softmax::softmax(s.stream(), &xt, &mut yt)?;
        // SAFETY: the caller keeps the memory alive until the stream has run the work.
        unsafe { p.detach() };
        Ok(())
    })
}

/// `y = rms_norm(x) * w` over the last axis.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn rms_norm(
    s: &ForeignStream,
    x: &RawTensor,
    w: &RawTensor,
    eps: f32,
    y: &RawTensor,
) -> Result<(), OpError> {
    with_tensors!("rms_norm", s, x, |E| [xt = x, wt = w, yt = y] {
        let p = crate::norm::rms_norm(s.stream(), &xt, &wt, eps, &mut yt)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// `y = layer_norm(x) * w + b` over the last axis.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn layer_norm(
    s: &ForeignStream,
    x: &RawTensor,
    w: &RawTensor,
    b: &RawTensor,
    eps: f32,
    y: &RawTensor,
) -> Result<(), OpError> {
    with_tensors!("layer_norm", s, x, |E| [xt = x, wt = w, bt = b, yt = y] {
        let p = crate::norm::layer_norm(s.stream(), &xt, &wt, &bt, eps, &mut yt)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// Foreign callers' GEMM options: f32 operands run as tf32, as TileGym's cuTile matmul does (and
/// `torch.matmul` with `allow_tf32`); a caller wanting exact f32 has no tensor-core product to call.
const GEMM_OPTIONS: crate::gemm::GemmOptions = crate::gemm::GemmOptions { allow_tf32: true };

/// `c = a @ b` for 2-D operands (f32 as tf32).
///
/// # Safety
/// As [`softmax`].
pub unsafe fn matmul(
    s: &ForeignStream,
    a: &RawTensor,
    b: &RawTensor,
    c: &RawTensor,
) -> Result<(), OpError> {
    with_tensors!("gemm", s, a, |E| [at = a, bt = b, ct = c] {
        let p = crate::gemm::gemm_with(s.stream(), &at, &bt, &GEMM_OPTIONS, &mut ct)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// `c[q] = op(a[q]) @ op(b[q])` for 3-D operands, `op` a transpose of the last two axes when asked
/// (f32 as tf32), in one launch.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn bmm(
    s: &ForeignStream,
    a: &RawTensor,
    b: &RawTensor,
    c: &RawTensor,
    transpose_a: bool,
    transpose_b: bool,
) -> Result<(), OpError> {
    const OP: &str = "bmm";
    for t in [a, b, c] {
        if t.shape.len() != 3 || t.strides.len() != 3 {
            return Err(OpError::Rank {
                op: OP,
                arg: t.name,
                expected: "3 ([batch, rows, cols])".into(),
                shape: t.shape.clone(),
            });
        }
    }
    let batch = a.shape[0];
    for t in [b, c] {
        if t.shape[0] != batch {
            return Err(OpError::Shape {
                op: OP,
                what: format!("batch extents of `{}` and `a`", t.name),
                left: t.shape[0].to_string(),
                right: batch.to_string(),
            });
        }
    }
    let a = if transpose_a {
        a.transposed()
    } else {
        a.clone()
    };
    let b = if transpose_b {
        b.transposed()
    } else {
        b.clone()
    };
    with_tensors!(OP, s, &a, |E| [at = &a, bt = &b, ct = c] {
        let p = crate::gemm::bmm(s.stream(), &at, &bt, &GEMM_OPTIONS, &mut ct)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// `y = silu(x[.., :N]) · x[.., N:]` for `x: [.., 2N]`, `y: [.., N]`.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn silu_and_mul(s: &ForeignStream, x: &RawTensor, y: &RawTensor) -> Result<(), OpError> {
    with_tensors!("silu_and_mul", s, x, |E| [xt = x, yt = y] {
        let p = crate::activation::silu_and_mul(s.stream(), &xt, &mut yt)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// `y = silu(a) · b`.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn swiglu(
    s: &ForeignStream,
    a: &RawTensor,
    b: &RawTensor,
    y: &RawTensor,
) -> Result<(), OpError> {
    with_tensors!("swiglu", s, a, |E| [at = a, bt = b, yt = y] {
        let p = crate::activation::swiglu(s.stream(), &at, &bt, &mut yt)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// `o = softmax(q kᵀ · scale) v` for `[B, H, S, D]` (or `[BH, S, D]`) operands.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn attention(
    s: &ForeignStream,
    q: &RawTensor,
    k: &RawTensor,
    v: &RawTensor,
    causal: bool,
    scale: Option<f32>,
    o: &RawTensor,
) -> Result<(), OpError> {
    let options = crate::attention::AttentionOptions {
        causal,
        scale,
        ..Default::default()
    };
    with_tensors!("attention", s, q, |E| [qt = q, kt = k, vt = v, ot = o] {
        let p = crate::attention::attention(s.stream(), &qt, &kt, &vt, &options, &mut ot)?;
        // SAFETY: as in `softmax`.
        unsafe { p.detach() };
        Ok(())
    })
}

/// TileGym's `attention_sink` call (its cutile-rs backend's `cutile_attention_sink`), validated without
/// touching the device: `q`/`o` `[B, H, S_q, D]`, `k`/`v` `[B, H_kv, S_k, D]`, `sinks` `[H]` of the
/// element type, `start_q` a non-empty i32 array; the integer arguments the caller computed from the
/// shapes (`tile_d` = D, `h` = H, `n_kv_ctx` = S_k, `query_group_size` = H / H_kv) must agree with
/// them; `bandwidth` is the sliding window in keys (0: none), so a query at position `p` sees keys
/// `p - bandwidth + 1 ..= p`. Returns the options of the call (causal, the window as a left window of
/// `bandwidth - 1`, the scale), `start_q` still to be read.
#[allow(clippy::too_many_arguments)]
pub fn attention_sink_options(
    q: &RawTensor,
    k: &RawTensor,
    sinks: &RawTensor,
    start_q: &RawTensor,
    qk_scale: f32,
    tile_d: i32,
    h: i32,
    n_kv_ctx: i32,
    query_group_size: i32,
    bandwidth: i32,
) -> Result<crate::attention::AttentionOptions, OpError> {
    const OP: &str = "attention_sink";
    let bad = |what: String| OpError::Unsupported { op: OP, what };
    if q.shape.len() != 4 || k.shape.len() != 4 {
        return Err(OpError::Rank {
            op: OP,
            arg: if q.shape.len() != 4 { "q" } else { "k" },
            expected: "4 ([bs, heads, seq, head_dim])".into(),
            shape: if q.shape.len() != 4 {
                q.shape.clone()
            } else {
                k.shape.clone()
            },
        });
    }
    let agree = |name: &str, given: i32, actual: i64| {
        if i64::from(given) == actual {
            Ok(())
        } else {
            Err(OpError::Shape {
                op: OP,
                what: format!("`{name}` vs the tensors' shapes"),
                left: given.to_string(),
                right: actual.to_string(),
            })
        }
    };
    agree("tile_d", tile_d, q.shape[3])?;
    agree("h", h, q.shape[1])?;
    agree("n_kv_ctx", n_kv_ctx, k.shape[2])?;
    let group = if k.shape[1] > 0 {
        q.shape[1] / k.shape[1]
    } else {
        0
    };
    agree("query_group_size", query_group_size, group)?;
    if sinks.dtype != q.dtype {
        return Err(OpError::DType {
            op: OP,
            arg: "sinks",
            dtype: sinks.dtype,
            constraint: format!("it must match `q` ({})", q.dtype),
        });
    }
    if sinks.shape != [q.shape[1]] {
        return Err(OpError::Shape {
            op: OP,
            what: "`sinks` must be [n_heads]".into(),
            left: format!("{:?}", sinks.shape),
            right: format!("[{}]", q.shape[1]),
        });
    }
    if start_q.dtype != ScalarType::I32 {
        return Err(OpError::DType {
            op: OP,
            arg: "start_q",
            dtype: start_q.dtype,
            constraint: "it must be i32".into(),
        });
    }
    if start_q.shape.iter().product::<i64>() < 1 {
        return Err(bad("`start_q` holds no element".into()));
    }
    if bandwidth < 0 {
        return Err(bad(format!(
            "bandwidth {bandwidth} is negative (0: no window)"
        )));
    }
    Ok(crate::attention::AttentionOptions {
        causal: true,
        scale: Some(qk_scale),
        window: (bandwidth > 0).then(|| bandwidth as u32 - 1),
        ..Default::default()
    })
}

/// TileGym's `attention_sink` (see [`attention_sink_options`]): flash attention with per-head sink
/// logits, causal from position `start_q`, with an optional sliding window. Synchronous like TileGym's
/// own backend: it waits for `stream` to read `start_q` and the sinks (converted to f32 in a temporary
/// device array), and waits for the call before returning.
///
/// # Safety
/// As [`softmax`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_sink(
    s: &ForeignStream,
    q: &RawTensor,
    k: &RawTensor,
    v: &RawTensor,
    sinks: &RawTensor,
    start_q: &RawTensor,
    mut options: crate::attention::AttentionOptions,
    o: &RawTensor,
) -> Result<(), OpError> {
    const OP: &str = "attention_sink";
    let stream = s.stream();
    stream.synchronize()?;
    // SAFETY: the caller's promise: `start_q` describes live i32 device memory of this device.
    let sq = unsafe { Tensor::<i32>::from_raw_parts(start_q.ptr, &[1], &[1], stream.device()) }?;
    let start = sq.to_host()?[0];
    options.query_offset = i64::from(start);
    let host_sinks: Vec<f32> = float_kernel!(sinks.dtype, |E| {
        (|| -> Result<Vec<f32>, OpError> {
            // SAFETY: as above, for `sinks`.
            let t = unsafe { wrap::<E>(OP, s, sinks, sinks) }?;
            Ok(t.to_host()?
                .into_iter()
                .map(|x| x.to_f64() as f32)
                .collect())
        })()
    })
    .unwrap_or_else(|| Err(unsupported_dtype(OP, sinks)))?;
    let sinks32 =
        Tensor::<f32>::from_host(stream.device(), &host_sinks, &[host_sinks.len() as i64])?;
    with_tensors!(OP, s, q, |E| [qt = q, kt = k, vt = v, ot = o] {
        let extras = crate::attention::Extras {
            sinks: Some(&sinks32),
            lse: None,
        };
        crate::attention::attention_with(stream, &qt, &kt, &vt, &options, extras, &mut ot)?.wait()?;
        Ok(())
    })
}

/// A described tensor wrapped as the runtime's non-owning tensor of its own element type, for ops
/// whose operands mix element types (indices next to values) and whose kernels pick by each type.
enum AnyTensor {
    F32(Tensor<f32>),
    F16(Tensor<half::f16>),
    BF16(Tensor<half::bf16>),
    I32(Tensor<i32>),
    I64(Tensor<i64>),
}

impl AnyTensor {
    /// # Safety
    /// As [`wrap`].
    unsafe fn new(
        op: &'static str,
        s: &ForeignStream,
        t: &RawTensor,
    ) -> Result<AnyTensor, OpError> {
        // SAFETY (every arm): forwarded to the caller.
        Ok(match t.dtype {
            ScalarType::F32 => AnyTensor::F32(unsafe { wrap(op, s, t, t) }?),
            ScalarType::F16 => AnyTensor::F16(unsafe { wrap(op, s, t, t) }?),
            ScalarType::BF16 => AnyTensor::BF16(unsafe { wrap(op, s, t, t) }?),
            ScalarType::I32 => AnyTensor::I32(unsafe { wrap(op, s, t, t) }?),
            ScalarType::I64 => AnyTensor::I64(unsafe { wrap(op, s, t, t) }?),
            other => {
                return Err(OpError::DType {
                    op,
                    arg: t.name,
                    dtype: other,
                    constraint: "foreign tensors are f32, f16, bf16, i32 or i64".into(),
                });
            }
        })
    }

    fn arg(&self) -> &dyn TensorArg {
        match self {
            AnyTensor::F32(t) => t,
            AnyTensor::F16(t) => t,
            AnyTensor::BF16(t) => t,
            AnyTensor::I32(t) => t,
            AnyTensor::I64(t) => t,
        }
    }

    fn arg_mut(&mut self) -> &mut dyn TensorArgMut {
        match self {
            AnyTensor::F32(t) => t,
            AnyTensor::F16(t) => t,
            AnyTensor::BF16(t) => t,
            AnyTensor::I32(t) => t,
            AnyTensor::I64(t) => t,
        }
    }
}

/// Wraps every listed `RawTensor` as an [`AnyTensor`] named like it.
macro_rules! any_tensors {
    ($op:expr, $s:expr, [$($name:ident = $t:expr),+ $(,)?]) => {
        // SAFETY: every public fn of this module forwards its caller's promise that each RawTensor
        // describes live device memory of the stream's device.
        $(#[allow(unused_mut)] let mut $name = unsafe { AnyTensor::new($op, $s, $t) }?;)+
    };
}

/// Detaches a queued call: the foreign caller's stream ordering keeps the memory alive.
fn queued(p: cutile::launch::Pending<'_>) -> Result<(), OpError> {
    // SAFETY: the caller keeps the memory alive until the stream has run the work (module contract).
    unsafe { p.detach() };
    Ok(())
}

/// `y = gelu(x)` (`tanh`: the tanh approximation), or `relu(x)` when `relu`.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn unary_activation(
    s: &ForeignStream,
    x: &RawTensor,
    y: &RawTensor,
    activation: UnaryActivation,
) -> Result<(), OpError> {
    use crate::activation::{self as act, GeluApprox};
    any_tensors!("activation", s, [xt = x, yt = y]);
    let (x, mut y) = (xt.arg(), yt.arg_mut());
    let st = s.stream();
    match activation {
        UnaryActivation::Gelu => queued(act::gelu(st, &x, &mut y, GeluApprox::None)?),
        UnaryActivation::GeluTanh => queued(act::gelu(st, &x, &mut y, GeluApprox::Tanh)?),
        UnaryActivation::Relu => queued(act::relu(st, &x, &mut y)?),
        UnaryActivation::Geglu => queued(act::geglu(st, &x, &mut y, GeluApprox::None)?),
        UnaryActivation::GegluTanh => queued(act::geglu(st, &x, &mut y, GeluApprox::Tanh)?),
    }
}

/// The one-input activations [`unary_activation`] runs (`Geglu*`: `y[.., N] = gelu(x[.., :N]) ·
/// x[.., N:]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryActivation {
    Gelu,
    GeluTanh,
    Relu,
    Geglu,
    GegluTanh,
}

/// RoPE of `q` `[T, Hq, D]` and `k` `[T, Hkv, D]` at `positions` `[T]` (i32 or i64) into `q_out`,
/// `k_out` (which may be `q`, `k` themselves: in place), with f32 `cos`, `sin` `[max_pos, rot/2]`.
///
/// # Safety
/// As [`softmax`]; `q_out`/`k_out` may alias `q`/`k` exactly (same description), nothing else.
#[allow(clippy::too_many_arguments)]
pub unsafe fn rope(
    s: &ForeignStream,
    q: &RawTensor,
    k: &RawTensor,
    cos: &RawTensor,
    sin: &RawTensor,
    positions: &RawTensor,
    q_out: &RawTensor,
    k_out: &RawTensor,
    style: crate::rope::RopeStyle,
) -> Result<(), OpError> {
    const OP: &str = "rope";
    any_tensors!(OP, s, [cost = cos, sint = sin, post = positions]);
    if q_out.describes_same(q) && k_out.describes_same(k) {
        any_tensors!(OP, s, [qt = q, kt = k]);
        return queued(crate::rope::rope_(
            s.stream(),
            &mut qt.arg_mut(),
            &mut kt.arg_mut(),
            &cost.arg(),
            &sint.arg(),
            &post.arg(),
            style,
        )?);
    }
    any_tensors!(OP, s, [qt = q, kt = k, qo = q_out, ko = k_out]);
    queued(crate::rope::rope(
        s.stream(),
        &qt.arg(),
        &kt.arg(),
        &cost.arg(),
        &sint.arg(),
        &post.arg(),
        &mut qo.arg_mut(),
        &mut ko.arg_mut(),
        style,
    )?)
}

/// Writes `k`, `v` `[T, Hkv, D]` into the caches: contiguous `[B, Hkv, S, D]` at `(batch[t], :,
/// pos[t], :)` when `index` is `(batch, pos)`, or paged `[blocks, block_size, Hkv, D]` at
/// `slot_mapping[t]` (−1 skips) when it is `(slot_mapping,)`.
///
/// # Safety
/// As [`softmax`]; the caches are written in place.
pub unsafe fn write_kv_cache(
    s: &ForeignStream,
    k: &RawTensor,
    v: &RawTensor,
    index: KvIndex<'_>,
    k_cache: &RawTensor,
    v_cache: &RawTensor,
) -> Result<(), OpError> {
    const OP: &str = "kv_cache_write";
    any_tensors!(OP, s, [kt = k, vt = v, kc = k_cache, vc = v_cache]);
    match index {
        KvIndex::Contiguous { batch, pos } => {
            any_tensors!(OP, s, [bt = batch, pt = pos]);
            queued(crate::kv_cache::write_kv_cache(
                s.stream(),
                &kt.arg(),
                &vt.arg(),
                &bt.arg(),
                &pt.arg(),
                &mut kc.arg_mut(),
                &mut vc.arg_mut(),
            )?)
        }
        KvIndex::Paged { slot_mapping } => {
            any_tensors!(OP, s, [st = slot_mapping]);
            queued(crate::kv_cache::write_kv_cache_paged(
                s.stream(),
                &kt.arg(),
                &vt.arg(),
                &st.arg(),
                &mut kc.arg_mut(),
                &mut vc.arg_mut(),
            )?)
        }
    }
}

/// Where a token's k and v go (index tensors `[T]`, i32 or i64).
#[derive(Debug, Clone, Copy)]
pub enum KvIndex<'r> {
    Contiguous {
        batch: &'r RawTensor,
        pos: &'r RawTensor,
    },
    Paged {
        slot_mapping: &'r RawTensor,
    },
}

/// A KV cache as decode attention reads it: contiguous `[B, Hkv, S_max, D]`, or paged `[blocks,
/// block_size, Hkv, D]` with `block_table` `[B, max_blocks]` i32.
#[derive(Debug, Clone, Copy)]
pub struct DecodeCache<'r> {
    pub k: &'r RawTensor,
    pub v: &'r RawTensor,
    pub block_table: Option<&'r RawTensor>,
}

/// Decode attention: `o` `[B, Hq, Sq, D]` from `q` of the same shape over each sequence's first
/// `seq_lens[b]` (i32) cached keys; the LSE `[B, Hq, Sq]` f32 into `lse` when given.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn decode(
    s: &ForeignStream,
    q: &RawTensor,
    cache: DecodeCache<'_>,
    seq_lens: &RawTensor,
    scale: Option<f32>,
    o: &RawTensor,
    lse: Option<&RawTensor>,
) -> Result<(), OpError> {
    use crate::attention::decode::{self, DecodeOptions, KvCache};
    const OP: &str = "attention_decode";
    any_tensors!(
        OP,
        s,
        [qt = q, kt = cache.k, vt = cache.v, lt = seq_lens, ot = o]
    );
    let table = match cache.block_table {
        Some(b) => Some(unsafe { AnyTensor::new(OP, s, b) }?),
        None => None,
    };
    let mut lse_t = match lse {
        Some(l) => Some(unsafe { AnyTensor::new(OP, s, l) }?),
        None => None,
    };
    let kv = match &table {
        Some(b) => KvCache::Paged {
            k: kt.arg(),
            v: vt.arg(),
            block_table: b.arg(),
        },
        None => KvCache::Contiguous {
            k: kt.arg(),
            v: vt.arg(),
        },
    };
    let options = DecodeOptions {
        scale,
        ..Default::default()
    };
    queued(decode::decode(
        s.stream(),
        qt.arg(),
        &kv,
        lt.arg(),
        &options,
        ot.arg_mut(),
        lse_t.as_mut().map(AnyTensor::arg_mut),
    )?)
}

/// `out[t, :] = table[ids[t], :]` (ids i32 or i64).
///
/// # Safety
/// As [`softmax`].
pub unsafe fn embedding(
    s: &ForeignStream,
    table: &RawTensor,
    ids: &RawTensor,
    out: &RawTensor,
) -> Result<(), OpError> {
    any_tensors!("embedding", s, [tt = table, it = ids, ot = out]);
    queued(crate::embedding::embedding(
        s.stream(),
        &tt.arg(),
        &it.arg(),
        &mut ot.arg_mut(),
    )?)
}

/// `out[t] = argmax(x[t, :])` (i64 out).
///
/// # Safety
/// As [`softmax`].
pub unsafe fn argmax(s: &ForeignStream, x: &RawTensor, out: &RawTensor) -> Result<(), OpError> {
    any_tensors!("argmax", s, [xt = x, ot = out]);
    queued(crate::sampling::argmax(
        s.stream(),
        &xt.arg(),
        &mut ot.arg_mut(),
    )?)
}

/// The `k = values.shape[1]` largest of each row of `x` and their i64 indices, sorted descending.
///
/// # Safety
/// As [`softmax`].
pub unsafe fn topk(
    s: &ForeignStream,
    x: &RawTensor,
    values: &RawTensor,
    indices: &RawTensor,
) -> Result<(), OpError> {
    any_tensors!("topk", s, [xt = x, vt = values, it = indices]);
    queued(crate::sampling::topk(
        s.stream(),
        &xt.arg(),
        &mut vt.arg_mut(),
        &mut it.arg_mut(),
    )?)
}

/// The fused QKV projection's tensors (layouts as [`crate::fused_qkv::fused_qkv`]).
#[derive(Debug, Clone, Copy)]
pub struct QkvTensors<'r> {
    pub x: &'r RawTensor,
    pub positions: &'r RawTensor,
    pub weight: &'r RawTensor,
    pub bias: Option<&'r RawTensor>,
    pub q_norm: Option<&'r RawTensor>,
    pub k_norm: Option<&'r RawTensor>,
    pub cos: &'r RawTensor,
    pub sin: &'r RawTensor,
    pub q: &'r RawTensor,
    pub k_cache: &'r RawTensor,
    pub v_cache: &'r RawTensor,
    pub index: KvIndex<'r>,
}

/// `q = rope(norm(x · W + bias))`, k and v written into the cache (the fused QKV projection; the host
/// API picks fused or unfused).
///
/// # Safety
/// As [`softmax`]; the caches are written in place.
pub unsafe fn fused_qkv(
    s: &ForeignStream,
    t: &QkvTensors<'_>,
    eps: f32,
    style: crate::rope::RopeStyle,
) -> Result<(), OpError> {
    use crate::fused_qkv::{self as fq, KvCache, Path, QkvLayer, Rope};
    const OP: &str = "fused_qkv";
    any_tensors!(
        OP,
        s,
        [
            xt = t.x,
            pt = t.positions,
            wt = t.weight,
            ct = t.cos,
            st = t.sin
        ]
    );
    any_tensors!(OP, s, [qt = t.q, kc = t.k_cache, vc = t.v_cache]);
    let opt = |r: Option<&RawTensor>| r.map(|r| unsafe { AnyTensor::new(OP, s, r) }).transpose();
    let (bt, qn, kn) = (opt(t.bias)?, opt(t.q_norm)?, opt(t.k_norm)?);
    let (a, b) = match t.index {
        KvIndex::Contiguous { batch, pos } => (batch, Some(pos)),
        KvIndex::Paged { slot_mapping } => (slot_mapping, None),
    };
    any_tensors!(OP, s, [at = a]);
    let bt2 = opt(b)?;
    let layer = QkvLayer {
        weight: wt.arg(),
        bias: bt.as_ref().map(AnyTensor::arg),
        q_norm: qn.as_ref().map(AnyTensor::arg),
        k_norm: kn.as_ref().map(AnyTensor::arg),
        eps,
    };
    let rope = Rope {
        cos: ct.arg(),
        sin: st.arg(),
        style,
    };
    let cache = match &bt2 {
        Some(pos) => KvCache::Contiguous {
            k: kc.arg_mut(),
            v: vc.arg_mut(),
            batch: at.arg(),
            pos: pos.arg(),
        },
        None => KvCache::Paged {
            k: kc.arg_mut(),
            v: vc.arg_mut(),
            slot_mapping: at.arg(),
        },
    };
    queued(fq::fused_qkv(
        s.stream(),
        xt.arg(),
        pt.arg(),
        &layer,
        &rope,
        qt.arg_mut(),
        cache,
        Path::Auto,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[i64], strides: &[i64]) -> RawTensor {
        RawTensor {
            name: "a",
            ptr: 0x1000,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            dtype: ScalarType::BF16,
        }
    }

    #[test]
    fn transpose_stays_in_the_same_memory() {
        let a = t(&[4, 3, 5], &[15, 5, 1]);
        let tr = a.transposed();
        assert_eq!(tr.ptr, a.ptr);
        assert_eq!((tr.shape, tr.strides), (vec![4, 5, 3], vec![15, 1, 5]));
    }
}
