"""The ops: torch custom ops (namespace ``cutile_rs``) over the Rust extension, with fake (meta)
implementations for torch.compile and opcheck, and the torch-like public functions.

Tensors cross to Rust as (data_ptr, shape, strides in elements, dtype) and are never copied, except
where a public function documents a ``.contiguous()`` (an axis other than the last for softmax, a
non-unit innermost stride). Outputs are allocated here with torch; launches go on torch's current
stream of the input's device, with no synchronization.
"""

from typing import Optional

import torch

from . import _native

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def _desc(t: torch.Tensor):
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), _DTYPES.get(t.dtype, str(t.dtype)))


def _where(t: torch.Tensor):
    """(device ordinal, raw stream) for a launch on torch's current stream of t's device."""
    if t.device.type != "cuda":
        raise _native.CutileError(f"cutile_rs_torch ops take CUDA tensors; got one on {t.device}")
    index = t.device.index if t.device.index is not None else torch.cuda.current_device()
    return index, torch.cuda.current_stream(t.device).cuda_stream


def _inner_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 0 or t.stride(-1) == 1 else t.contiguous()


# --- softmax over the last axis ------------------------------------------------------------------


@torch.library.custom_op("cutile_rs::softmax", mutates_args=())
def _softmax(x: torch.Tensor) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _native.softmax(_desc(x), _desc(y), *_where(x))
    return y


@_softmax.register_fake
def _(x):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``torch.softmax(x, dim)``; an axis other than the last is moved last (a copy)."""
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0 or dim == x.dim() - 1:
        return _softmax(x)
    return _softmax(x.movedim(dim, -1).contiguous()).movedim(-1, dim)


# --- norms over the last axis --------------------------------------------------------------------


@torch.library.custom_op("cutile_rs::rms_norm", mutates_args=())
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _native.rms_norm(_desc(x), _desc(weight), float(eps), _desc(y), *_where(x))
    return y


@_rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)``."""
    return _rms_norm(x, weight, eps)


@torch.library.custom_op("cutile_rs::layer_norm", mutates_args=())
def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _native.layer_norm(_desc(x), _desc(weight), _desc(bias), float(eps), _desc(y), *_where(x))
    return y


@_layer_norm.register_fake
def _(x, weight, bias, eps):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)``."""
    return _layer_norm(x, weight, bias, eps)


# --- matmul --------------------------------------------------------------------------------------


@torch.library.custom_op("cutile_rs::matmul", mutates_args=())
def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dim() != 2 or b.dim() != 2:
        raise _native.CutileError(f"matmul takes 2-D a and b; got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    _native.matmul(_desc(a), _desc(b), _desc(c), *_where(a))
    return c


@_matmul.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]))


def _tf32_allowed(a: torch.Tensor) -> None:
    # f32 products run on tensor cores as tf32; follow torch's own switch for that rounding.
    if a.dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        raise _native.CutileError(
            "float32 matmul runs as tf32 (10-bit mantissa) on tensor cores; set "
            "torch.backends.cuda.matmul.allow_tf32 = True to allow it, or pass float16/bfloat16"
        )


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D f16/bf16 operands with any strides (a transposed view is not copied); f32
    as tf32 when ``torch.backends.cuda.matmul.allow_tf32`` is set."""
    _tf32_allowed(a)
    return _matmul(a, b)


# --- attention -----------------------------------------------------------------------------------


@torch.library.custom_op("cutile_rs::attention", mutates_args=())
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: Optional[float]) -> torch.Tensor:
    q, k, v = (_inner_contiguous(t) for t in (q, k, v))
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    _native.attention(
        _desc(q), _desc(k), _desc(v), _desc(o), bool(causal), None if scale is None else float(scale), *_where(q)
    )
    return o


@_attention.register_fake
def _(q, k, v, causal, scale):
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: Optional[float] = None
) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)`` for
    ``[B, H, S, D]`` operands (k/v may have fewer heads, dividing H)."""
    return _attention(q, k, v, causal, scale)


# --- gated activations ---------------------------------------------------------------------------


@torch.library.custom_op("cutile_rs::silu_and_mul", mutates_args=())
def _silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype, device=x.device)
    _native.silu_and_mul(_desc(x), _desc(y), *_where(x))
    return y


@_silu_and_mul.register_fake
def _(x):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :n]) * x[..., n:]`` for ``x: [..., 2n]`` (vLLM's convention)."""
    return _silu_and_mul(x)


@torch.library.custom_op("cutile_rs::swiglu", mutates_args=())
def _swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = _inner_contiguous(a), _inner_contiguous(b)
    y = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    _native.swiglu(_desc(a), _desc(b), _desc(y), *_where(a))
    return y


@_swiglu.register_fake
def _(a, b):
    return torch.empty(a.shape, dtype=a.dtype, device=a.device)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``silu(a) * b``."""
    return _swiglu(a, b)
