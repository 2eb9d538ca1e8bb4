"""Triton peers of the activation family (cutile-kernels/src/activation), imported by peers.py.

One kernel serves every op: each program handles BLOCK columns of one row of a [rows, cols] view
(1-D grid over row x column blocks, so long single rows need no second grid axis), loads the first
input `a` (for the gated ops also `b`, for the backward ops also `g`) in f32, and writes

  forward:  y = act(a)              (gated: act(a) * b)
  backward: da = g * act'(a)        (gated: da = g * b * act'(a), db = g * act(a))

ACT: 0 SiLU, 1 exact GELU (erf), 2 tanh GELU (written as a * sigmoid(2u), since (1 + tanh u) / 2 =
sigmoid(2u)), 3 ReLU.
"""
import torch
import triton
import triton.language as tl

ACTS = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "relu": 3}


@triton.jit
def _act_and_slope(a, ACT: tl.constexpr):
    if ACT == 0:
        s = tl.sigmoid(a)
        y = a * s
        dy = s * (1.0 + a * (1.0 - s))
    elif ACT == 1:
        cdf = 0.5 * (1.0 + tl.math.erf(a * 0.7071067811865476))
        pdf = tl.exp(-0.5 * a * a) * 0.3989422804014327
        y = a * cdf
        dy = cdf + a * pdf
    elif ACT == 2:
        k = 0.7978845608028654
        s = tl.sigmoid(2.0 * k * (a + 0.044715 * a * a * a))
        y = a * s
        dy = s + a * s * (1.0 - s) * 2.0 * k * (1.0 + 3.0 * 0.044715 * a * a)
    else:
        y = tl.maximum(a, 0.0)
        dy = tl.where(a > 0.0, 1.0, 0.0)
    return y, dy


@triton.jit
def act_kernel(a_ptr, b_ptr, g_ptr, o1_ptr, o2_ptr, cols, a_rs, b_rs, g_rs, o1_rs, o2_rs, col_blocks,
               ACT: tl.constexpr, GATED: tl.constexpr, BACKWARD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // col_blocks).to(tl.int64)
    c = (pid % col_blocks) * BLOCK + tl.arange(0, BLOCK)
    m = c < cols
    a = tl.load(a_ptr + row * a_rs + c, mask=m, other=0.0).to(tl.float32)
    y, dy = _act_and_slope(a, ACT)
    if GATED:
        b = tl.load(b_ptr + row * b_rs + c, mask=m, other=0.0).to(tl.float32)
    if BACKWARD:
        g = tl.load(g_ptr + row * g_rs + c, mask=m, other=0.0).to(tl.float32)
        if GATED:
            tl.store(o1_ptr + row * o1_rs + c, (g * b * dy).to(o1_ptr.dtype.element_ty), mask=m)
            tl.store(o2_ptr + row * o2_rs + c, (g * y).to(o2_ptr.dtype.element_ty), mask=m)
        else:
            tl.store(o1_ptr + row * o1_rs + c, (g * dy).to(o1_ptr.dtype.element_ty), mask=m)
    else:
        if GATED:
            y = y * b
        tl.store(o1_ptr + row * o1_rs + c, y.to(o1_ptr.dtype.element_ty), mask=m)


def launch(act, a, b=None, g=None, o1=None, o2=None, block=1024, num_warps=4):
    """Runs the kernel over 2-D views [rows, cols] with unit column stride (rows of any stride)."""
    rows, cols = a.shape
    col_blocks = triton.cdiv(cols, block)
    gated, backward = b is not None, g is not None
    dummy = a
    act_kernel[(rows * col_blocks,)](
        a, b if gated else dummy, g if backward else dummy, o1, o2 if o2 is not None else o1,
        cols, a.stride(0), (b if gated else dummy).stride(0), (g if backward else dummy).stride(0),
        o1.stride(0), (o2 if o2 is not None else o1).stride(0), col_blocks,
        ACT=ACTS[act], GATED=gated, BACKWARD=backward, BLOCK=block, num_warps=num_warps)


def rows2(t):
    """A contiguous-rows tensor as [rows, last]."""
    return t.reshape(-1, t.shape[-1])


def flat(t):
    """A contiguous tensor as one row."""
    return t.reshape(1, -1)


def make(op, act, gated, pair, backward, ins, outs, block=1024, num_warps=4):
    """A closure running `op` on torch tensors `ins` (x / x, g / a, b / a, b, g) into `outs`."""
    if gated:  # x [.., 2N]: the halves are views N apart
        x = rows2(ins[0])
        n = x.shape[1] // 2
        a, b = x[:, :n], x[:, n:]
        if backward:
            g, dx = rows2(ins[1]), rows2(outs[0])
            return lambda: launch(act, a, b, g, dx[:, :n], dx[:, n:], block, num_warps)
        y = rows2(outs[0])
        return lambda: launch(act, a, b, None, y, None, block, num_warps)
    if pair:
        a, b = flat(ins[0]), flat(ins[1])
        if backward:
            g = flat(ins[2])
            return lambda: launch(act, a, b, g, flat(outs[0]), flat(outs[1]), block, num_warps)
        return lambda: launch(act, a, b, None, flat(outs[0]), None, block, num_warps)
    x = flat(ins[0])
    if backward:
        return lambda: launch(act, x, None, flat(ins[1]), flat(outs[0]), None, block, num_warps)
    return lambda: launch(act, x, None, None, flat(outs[0]), None, block, num_warps)
