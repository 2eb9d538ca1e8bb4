"""cutile_rs_torch: cutile-rs tile kernels as PyTorch ops.

    import torch, cutile_rs_torch as ct
    y = ct.softmax(x, dim=-1)
    y = ct.rms_norm(x, weight, eps=1e-6)
    y = ct.layer_norm(x, weight, bias, eps=1e-5)
    c = ct.matmul(a, b)
    o = ct.attention(q, k, v, causal=True)
    h = ct.silu_and_mul(gate_up)             # also ct.swiglu(a, b), ct.gelu, ct.geglu, ct.relu
    q, k = ct.rope(q, k, cos, sin, positions)  # also ct.write_kv_cache, ct.fused_qkv
    o = ct.attention_decode(q, k_cache, v_cache, seq_lens, block_table=None)
    e = ct.embedding(ids, table); i = ct.argmax(logits); v, i = ct.topk(logits, 8)

Each op is a ``torch.library.custom_op`` (namespace ``cutile_rs``) with a fake implementation, so
``torch.compile`` traces through it and ``torch.library.opcheck`` accepts it. Kernels run on
``torch.cuda.current_stream()`` without synchronizing; outputs are allocated by torch. Importing needs
no GPU. Kernels come from the AOT bundle shipped in the wheel (sm_90, sm_100), or from the JIT when
tileiras is installed; a call with neither raises ``CutileError`` saying how to get the kernel.
"""

from __future__ import annotations

import os

from . import _native
from ._native import CutileError
from .ops import (
    argmax,
    attention,
    attention_decode,
    embedding,
    fused_qkv,
    gelu,
    geglu,
    layer_norm,
    matmul,
    relu,
    rms_norm,
    rope,
    silu_and_mul,
    softmax,
    swiglu,
    topk,
    write_kv_cache,
)

__all__ = [
    "CutileError",
    "argmax",
    "attention",
    "attention_decode",
    "embedding",
    "fused_qkv",
    "gelu",
    "geglu",
    "relu",
    "rope",
    "topk",
    "write_kv_cache",
    "layer_norm",
    "matmul",
    "rms_norm",
    "silu_and_mul",
    "softmax",
    "swiglu",
    "bundle_path",
]

_BUNDLE = os.path.join(os.path.dirname(__file__), "kernels.bundle")


def bundle_path() -> str | None:
    """The AOT kernel bundle shipped in this wheel, or None when it was built without one."""
    return _BUNDLE if os.path.isfile(_BUNDLE) else None


if bundle_path() is not None:
    _native.register_bundle(_BUNDLE)
