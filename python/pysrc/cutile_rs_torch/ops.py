"""The ops: torch custom ops (namespace ``cutile_rs``) over the Rust extension, with fake (meta)
implementations for torch.compile and opcheck, and the torch-like public functions.

Tensors cross to Rust as (data_ptr, shape, strides in elements, dtype) and are never copied, except
where a public function documents a ``.contiguous()`` (an axis other than the last for softmax, a
non-unit innermost stride). Outputs are allocated here with torch; launches go on torch's current
stream of the input's device, with no synchronization.

An eager call on plain tensors (no autograd, no torch.compile tracing, no dispatch or function mode
active) runs the op's body directly instead of going through torch's dispatcher: the dispatcher adds
more host time per call than the whole launch (see ``_direct``). Everything else (tracing, fake
tensors, opcheck, autograd errors) goes through the registered custom op.

The row ops, the activations and matmul go one step further on such calls when torch has DLPack's C
exchange table (torch 2.10 and later): one extension call (``_native.FastOp``) reads the inputs,
replays the launches prepared for their layout, allocates the contiguous output with torch's allocator
and launches on torch's current stream. It returns None for a call it does not take (then the op runs
as above, with its usual errors).
"""

from typing import Optional

import torch

from . import _native

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32", torch.int64: "i64"}

# The raw-stream query torch's own generated code uses (no Stream object is built); older torch
# builds without it fall back to the public API.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda index: torch.cuda.current_stream(index).cuda_stream
)


_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_dispatch_stack = torch._C._len_torch_dispatch_stack
_function_mode = torch._C._is_torch_function_mode_enabled
_grad_enabled = torch.is_grad_enabled

# DLPack's C exchange table: a capsule since torch 2.11 (an integer address under the older name).
_exchange = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
if _exchange is None:
    _exchange = getattr(torch.Tensor, "__c_dlpack_exchange_api__", None)
_HAS_FAST = _exchange is not None and _native.use_exchange_api(_exchange)


def _fast_op(name: str):
    """The op's one-call eager path, or None without the exchange table."""
    return _native.FastOp(name) if _HAS_FAST else None


def _desc(t: torch.Tensor):
    # torch.Size is a tuple and stride() returns one: no conversion needed.
    return (t.data_ptr(), t.shape, t.stride(), _DTYPES.get(t.dtype, str(t.dtype)))


def _where(t: torch.Tensor):
    """(device ordinal, raw stream) for a launch on torch's current stream of t's device."""
    index = t.get_device()
    if index < 0:
        raise _native.CutileError(f"cutile_rs_torch ops take CUDA tensors; got one on {t.device}")
    return index, _raw_stream(index)


def _inner_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 0 or t.stride(-1) == 1 else t.contiguous()


def _direct(*tensors) -> bool:
    """Whether an eager call may run the op's body without torch's dispatcher.

    Only for plain tensors with nothing that needs the dispatcher: no torch.compile tracing, no
    dispatch or function mode (FakeTensorMode, opcheck's checks, profilers' modes), no tensor
    subclass, and no input that autograd tracks (the op has no backward; the custom op says so).
    """
    if _is_compiling() or _dispatch_stack() or _function_mode():
        return False
    for t in tensors:
        if type(t) is not _Tensor or (t.requires_grad and _grad_enabled()):
            return False
    return True


def _direct1(x) -> bool:
    """``_direct`` of one tensor, without the varargs tuple (the one-input ops' fast paths)."""
    return not (
        type(x) is not _Tensor
        or _is_compiling()
        or _dispatch_stack()
        or _function_mode()
        or (x.requires_grad and _grad_enabled())
    )


class _Op:
    """The custom op ``cutile_rs::name`` over ``body``, called like a function: ``body`` runs directly
    when ``_direct`` allows it, else torch's dispatcher runs the registered op."""

    def __init__(self, name: str, body, mutates_args=()):
        self.body = body
        self.op = torch.library.custom_op(f"cutile_rs::{name}", body, mutates_args=mutates_args)

    def register_fake(self, fake):
        self.op.register_fake(fake)
        return fake

    def __call__(self, *args):
        if _direct(*(a for a in args if isinstance(a, torch.Tensor))):
            return self.body(*args)
        return self.op(*args)


def _custom(name: str, mutates_args=()):
    """Decorator form of ``_Op``."""
    return lambda body: _Op(name, body, mutates_args)


# --- softmax over the last axis ------------------------------------------------------------------


@_custom("softmax")
def _softmax(x: torch.Tensor) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty_like(x)
    _native.softmax(_desc(x), _desc(y), *_where(x))
    return y


@_softmax.register_fake
def _(x):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_SOFTMAX = _fast_op("softmax")


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``torch.softmax(x, dim)``; an axis other than the last is moved last (a copy)."""
    if _SOFTMAX is not None and (dim == -1 or dim == x.dim() - 1) and _direct1(x):
        y = _SOFTMAX(0.0, x)
        if y is not None:
            return y
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0 or dim == x.dim() - 1:
        return _softmax(x)
    return _softmax(x.movedim(dim, -1).contiguous()).movedim(-1, dim)


# --- norms over the last axis --------------------------------------------------------------------


@_custom("rms_norm")
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty_like(x)
    _native.rms_norm(_desc(x), _desc(weight), float(eps), _desc(y), *_where(x))
    return y


@_rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_RMS_NORM = _fast_op("rms_norm")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)``."""
    if _RMS_NORM is not None and _direct(x, weight):
        y = _RMS_NORM(eps, x, weight)
        if y is not None:
            return y
    return _rms_norm(x, weight, eps)


@_custom("layer_norm")
def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = torch.empty_like(x)
    _native.layer_norm(_desc(x), _desc(weight), _desc(bias), float(eps), _desc(y), *_where(x))
    return y


@_layer_norm.register_fake
def _(x, weight, bias, eps):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_LAYER_NORM = _fast_op("layer_norm")


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)``."""
    if _LAYER_NORM is not None and _direct(x, weight, bias):
        y = _LAYER_NORM(eps, x, weight, bias)
        if y is not None:
            return y
    return _layer_norm(x, weight, bias, eps)


# --- matmul --------------------------------------------------------------------------------------


@_custom("matmul")
def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dim() != 2 or b.dim() != 2:
        raise _native.CutileError(f"matmul takes 2-D a and b; got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    c = a.new_empty((a.shape[0], b.shape[1]))
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


_MATMUL = _fast_op("matmul")


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D f16/bf16 operands with any strides (a transposed view is not copied); f32
    as tf32 when ``torch.backends.cuda.matmul.allow_tf32`` is set."""
    _tf32_allowed(a)
    if _MATMUL is not None and _direct(a, b):
        c = _MATMUL(0.0, a, b)
        if c is not None:
            return c
    return _matmul(a, b)


# --- attention -----------------------------------------------------------------------------------


@_custom("attention")
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: Optional[float]) -> torch.Tensor:
    q, k, v = (_inner_contiguous(t) for t in (q, k, v))
    o = torch.empty_like(q)
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


@_custom("silu_and_mul")
def _silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    x = _inner_contiguous(x)
    y = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
    _native.silu_and_mul(_desc(x), _desc(y), *_where(x))
    return y


@_silu_and_mul.register_fake
def _(x):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


_SILU_AND_MUL = _fast_op("silu_and_mul")


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :n]) * x[..., n:]`` for ``x: [..., 2n]`` (vLLM's convention)."""
    if _SILU_AND_MUL is not None and _direct1(x):
        y = _SILU_AND_MUL(0.0, x)
        if y is not None:
            return y
    return _silu_and_mul(x)


@_custom("swiglu")
def _swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = _inner_contiguous(a), _inner_contiguous(b)
    y = torch.empty_like(a)
    _native.swiglu(_desc(a), _desc(b), _desc(y), *_where(a))
    return y


@_swiglu.register_fake
def _(a, b):
    return torch.empty(a.shape, dtype=a.dtype, device=a.device)


_SWIGLU = _fast_op("swiglu")


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``silu(a) * b``."""
    if _SWIGLU is not None and _direct(a, b):
        y = _SWIGLU(0.0, a, b)
        if y is not None:
            return y
    return _swiglu(a, b)


# --- one-input activations -----------------------------------------------------------------------


def _unary(name: str, x: torch.Tensor, gated: bool) -> torch.Tensor:
    x = _inner_contiguous(x)
    shape = (*x.shape[:-1], x.shape[-1] // 2) if gated else x.shape
    y = x.new_empty(shape)
    _native.activation(name, _desc(x), _desc(y), *_where(x))
    return y


@_custom("activation")
def _activation(x: torch.Tensor, name: str) -> torch.Tensor:
    return _unary(name, x, name.startswith("geglu"))


@_activation.register_fake
def _(x, name):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2)) if name.startswith("geglu") else torch.empty_like(x)


def _approx(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise _native.CutileError(f"approximate must be 'none' or 'tanh'; got {approximate!r}")
    return "" if approximate == "none" else "_tanh"


_ACTIVATIONS = {n: _fast_op(n) for n in ("gelu", "gelu_tanh", "relu", "geglu", "geglu_tanh")}


def _activate(x: torch.Tensor, name: str) -> torch.Tensor:
    fast = _ACTIVATIONS[name]
    if fast is not None and _direct1(x):
        y = fast(0.0, x)
        if y is not None:
            return y
    return _activation(x, name)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``torch.nn.functional.gelu(x, approximate=...)``."""
    return _activate(x, "gelu" + _approx(approximate))


def relu(x: torch.Tensor) -> torch.Tensor:
    """``torch.relu(x)``."""
    return _activate(x, "relu")


def geglu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``gelu(x[..., :n]) * x[..., n:]`` for ``x: [..., 2n]``."""
    return _activate(x, "geglu" + _approx(approximate))


# --- RoPE, KV-cache writes -----------------------------------------------------------------------


@_custom("rope")
def _rope(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor, style: str
) -> tuple[torch.Tensor, torch.Tensor]:
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    _native.rope(
        _desc(q), _desc(k), _desc(cos), _desc(sin), _desc(positions), _desc(q_out), _desc(k_out), style, *_where(q)
    )
    return q_out, k_out


@_rope.register_fake
def _(q, k, cos, sin, positions, style):
    return torch.empty_like(q), torch.empty_like(k)


def rope(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    style: str = "neox",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary embedding of ``q: [T, Hq, D]`` and ``k: [T, Hkv, D]`` at ``positions: [T]`` (int32/int64,
    any order) with float32 ``cos``, ``sin: [max_pos, rot/2]`` (``rot`` = D or less: partial rotary);
    ``style`` "neox" (half-split) or "gptj" (interleaved). Returns new ``(q, k)``; one launch."""
    return _rope(q, k, cos, sin, positions, style)


@_custom("write_kv_cache", mutates_args=("k_cache", "v_cache"))
def _write_kv_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: Optional[torch.Tensor],
    pos: Optional[torch.Tensor],
    slot_mapping: Optional[torch.Tensor],
) -> None:
    index = [_desc(slot_mapping)] if slot_mapping is not None else [_desc(batch), _desc(pos)]
    _native.write_kv_cache(_desc(k), _desc(v), index, _desc(k_cache), _desc(v_cache), *_where(k))


@_write_kv_cache.register_fake
def _(k, v, k_cache, v_cache, batch, pos, slot_mapping):
    return None


def _index_args(batch, pos, slot_mapping):
    if (slot_mapping is None) == (batch is None or pos is None):
        raise _native.CutileError(
            "pass either batch and pos (contiguous [B, Hkv, S, D] cache) or slot_mapping (paged "
            "[blocks, block_size, Hkv, D] cache)"
        )
    return batch, pos, slot_mapping


def write_kv_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: Optional[torch.Tensor] = None,
    pos: Optional[torch.Tensor] = None,
    slot_mapping: Optional[torch.Tensor] = None,
) -> None:
    """Writes ``k``, ``v: [T, Hkv, D]`` into the caches in place: contiguous ``[B, Hkv, S, D]`` at
    ``(batch[t], :, pos[t], :)``, or paged ``[blocks, block_size, Hkv, D]`` at ``slot_mapping[t]``
    (-1 skips the token). Index tensors are int32 or int64."""
    _write_kv_cache(k, v, k_cache, v_cache, *_index_args(batch, pos, slot_mapping))


# --- decode attention ----------------------------------------------------------------------------


@_custom("attention_decode")
def _attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: Optional[torch.Tensor],
    scale: Optional[float],
) -> tuple[torch.Tensor, torch.Tensor]:
    o = torch.empty_like(q)
    lse = q.new_empty(q.shape[:3], dtype=torch.float32)
    _native.attention_decode(
        _desc(q),
        _desc(k_cache),
        _desc(v_cache),
        None if block_table is None else _desc(block_table),
        _desc(seq_lens),
        None if scale is None else float(scale),
        _desc(o),
        _desc(lse),
        *_where(q),
    )
    return o, lse


@_attention_decode.register_fake
def _(q, k_cache, v_cache, seq_lens, block_table, scale):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: Optional[torch.Tensor] = None,
    scale: Optional[float] = None,
    return_lse: bool = False,
):
    """Decode attention over a KV cache: ``q: [B, Hq, Sq, D]`` (Sq 1-8: the last Sq positions, causal
    among themselves) against each sequence's first ``seq_lens[b]`` (int32) cached keys; the cache is
    contiguous ``[B, Hkv, S_max, D]`` or, with ``block_table: [B, max_blocks]`` (int32), paged
    ``[blocks, block_size, Hkv, D]``. Returns ``o`` (and the natural-log LSE ``[B, Hq, Sq]`` float32
    with ``return_lse``). Split-KV chosen from the SM count."""
    o, lse = _attention_decode(q, k_cache, v_cache, seq_lens, block_table, scale)
    return (o, lse) if return_lse else o


# --- embedding, sampling helpers -----------------------------------------------------------------


@_custom("embedding")
def _embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = table.new_empty((*ids.shape, table.shape[-1]))
    flat = ids.reshape(-1)
    _native.embedding(_desc(table), _desc(flat), _desc(out.view(flat.shape[0], table.shape[-1])), *_where(table))
    return out


@_embedding.register_fake
def _(ids, table):
    return table.new_empty((*ids.shape, table.shape[-1]))


def embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``torch.nn.functional.embedding(ids, table)`` (ids int32 or int64, any shape)."""
    return _embedding(ids, table)


@_custom("argmax")
def _argmax(x: torch.Tensor) -> torch.Tensor:
    x = _inner_contiguous(x)
    out = x.new_empty(x.shape[:-1], dtype=torch.int64)
    _native.argmax(_desc(x), _desc(out), *_where(x))
    return out


@_argmax.register_fake
def _(x):
    return x.new_empty(x.shape[:-1], dtype=torch.int64)


def argmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.argmax(x, dim=-1)`` for ``x: [T, V]``."""
    return _argmax(x)


@_custom("topk")
def _topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = _inner_contiguous(x)
    values = x.new_empty((*x.shape[:-1], k))
    indices = x.new_empty((*x.shape[:-1], k), dtype=torch.int64)
    _native.topk(_desc(x), _desc(values), _desc(indices), *_where(x))
    return values, indices


@_topk.register_fake
def _(x, k):
    return x.new_empty((*x.shape[:-1], k)), x.new_empty((*x.shape[:-1], k), dtype=torch.int64)


def topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.topk(x, k, dim=-1)`` (sorted, largest) for ``x: [T, V]``."""
    return _topk(x, k)


# --- fused QKV projection ------------------------------------------------------------------------


def _q_heads(weight: torch.Tensor, k_cache: torch.Tensor, paged: bool) -> tuple[int, int]:
    hkv, d = (k_cache.shape[2], k_cache.shape[3]) if paged else (k_cache.shape[1], k_cache.shape[3])
    return weight.shape[1] // d - 2 * hkv, d


@_custom("fused_qkv", mutates_args=("k_cache", "v_cache"))
def _fused_qkv(
    x: torch.Tensor,
    positions: torch.Tensor,
    weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    bias: Optional[torch.Tensor],
    q_norm: Optional[torch.Tensor],
    k_norm: Optional[torch.Tensor],
    batch: Optional[torch.Tensor],
    pos: Optional[torch.Tensor],
    slot_mapping: Optional[torch.Tensor],
    eps: float,
    style: str,
) -> torch.Tensor:
    hq, d = _q_heads(weight, k_cache, slot_mapping is not None)
    q = x.new_empty((x.shape[0], hq, d))
    index = [_desc(slot_mapping)] if slot_mapping is not None else [_desc(batch), _desc(pos)]
    opt = lambda t: None if t is None else _desc(t)  # noqa: E731
    _native.fused_qkv(
        tuple(_desc(t) for t in (x, positions, weight, cos, sin, q, k_cache, v_cache)),
        (opt(bias), opt(q_norm), opt(k_norm)),
        index,
        float(eps),
        style,
        *_where(x),
    )
    return q


@_fused_qkv.register_fake
def _(x, positions, weight, cos, sin, k_cache, v_cache, bias, q_norm, k_norm, batch, pos, slot_mapping, eps, style):
    hq, d = _q_heads(weight, k_cache, slot_mapping is not None)
    return x.new_empty((x.shape[0], hq, d))


def fused_qkv(
    x: torch.Tensor,
    positions: torch.Tensor,
    weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    q_norm: Optional[torch.Tensor] = None,
    k_norm: Optional[torch.Tensor] = None,
    batch: Optional[torch.Tensor] = None,
    pos: Optional[torch.Tensor] = None,
    slot_mapping: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
    style: str = "neox",
) -> torch.Tensor:
    """The fused QKV projection: ``qkv = x @ weight (+ bias)`` for ``x: [T, hidden]``, ``weight:
    [hidden, (Hq + 2 Hkv) D]`` (a ``Linear`` weight's ``.t()`` view works), per-head RMSNorm of q and k
    with ``q_norm``, ``k_norm: [D]`` (both or neither), RoPE at ``positions`` (``cos``, ``sin``:
    ``[max_pos, rot/2]`` float32), k and v written into the cache in place (index arguments as in
    ``write_kv_cache``). Returns ``q: [T, Hq, D]``."""
    return _fused_qkv(
        x, positions, weight, cos, sin, k_cache, v_cache, bias, q_norm, k_norm,
        *_index_args(batch, pos, slot_mapping), eps, style,
    )
