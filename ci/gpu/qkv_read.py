#!/usr/bin/env python3
"""What holds fused QKV decode: the weight layout, the grid, or our kernel.

Fused QKV decode reads a 50.3 MB weight (hidden 4096, N = 48 heads x 128) once. Our kernel reads it in
its `[hidden, N]` layout as 128 x 128 tiles (a head's columns, 256 contiguous bytes per row) over S
K-splits, grid 48 x S; cuBLAS's `F.linear` reads the `[N, hidden]` Linear layout. This times, with the
harness's method (`cudatime.median_us`: CUDA events, median, read flush before each call):

  F.linear           x [T, 4096] by W [6144, 4096] (the peer), T 1 and 64
  x @ W              the same product with W stored [4096, 6144] (our layout), T 1 and 64
  tile read          a Triton kernel that only reads the weight the way a split-K kernel of ours does:
                     program (head, split) sums its K range of 128-row x 128-column tiles; in both
                     layouts, at S = 1, 2, 3, 4, 8 and "balanced" (one or two programs per SM, each
                     a contiguous share of the 48 x 32 (head, K-tile) units), on 8 and on 4 warps

and prints GB/s (bytes read / time) as a % of the 1 GiB copy. If the tile read in our layout at S = 2
is far under the best read, the layout and the grid are the limit and a kernel change inside the K loop
cannot fix it. Usage: python3 ci/gpu/qkv_read.py
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from cudatime import median_us

K, HEADS, D = 4096, 48, 128
N = HEADS * D
BK = 128


@triton.jit
def tile_read(w, out, sk, sn, k_tiles, per, BK: tl.constexpr, D: tl.constexpr):
    """Program (head, split): the sum of tiles k in [split*per, split*per + per) of head's columns."""
    head, split = tl.program_id(0), tl.program_id(1)
    rk = tl.arange(0, BK)[:, None]
    rn = head * D + tl.arange(0, D)[None, :]
    acc = tl.zeros([BK, D], dtype=tl.float32)
    lo = split * per
    hi = tl.minimum(lo + per, k_tiles)
    for k in range(lo, hi):
        acc += tl.load(w + (k * BK + rk) * sk + rn * sn).to(tl.float32)
    tl.store(out + head * tl.num_programs(1) + split, tl.sum(acc))


@triton.jit
def tile_read_balanced(w, out, sk, sn, k_tiles, units, BK: tl.constexpr, D: tl.constexpr):
    """Program p: units [p*units/P, (p+1)*units/P) of the (head, K tile) order, head-major."""
    p, progs = tl.program_id(0), tl.num_programs(0)
    lo = p * units // progs
    hi = (p + 1) * units // progs
    rk = tl.arange(0, BK)[:, None]
    dn = tl.arange(0, D)[None, :]
    acc = tl.zeros([BK, D], dtype=tl.float32)
    for u in range(lo, hi):
        head = u // k_tiles
        k = u % k_tiles
        acc += tl.load(w + (k * BK + rk) * sk + (head * D + dn) * sn).to(tl.float32)
    tl.store(out + p, tl.sum(acc))


def main():
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device=dev)  # 1 GiB
    dst = torch.empty_like(src)
    copy_us = median_us(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 2 / copy_us / 1e3
    del src, dst
    print(f"{torch.cuda.get_device_name()}: {sms} SMs; copy of 1 GiB {copy_gbs:.0f} GB/s")
    w_lin = torch.randn(N, K, dtype=torch.bfloat16, device=dev) / 64  # [N, hidden]
    w_ours = w_lin.t().contiguous()  # [hidden, N]
    wbytes = w_lin.numel() * 2
    out = torch.empty(4096, dtype=torch.float32, device=dev)
    k_tiles = K // BK

    def row(label, fn):
        us = median_us(fn)
        gbs = wbytes / us / 1e3
        print(f"  {label:<48} {us:8.2f} us {gbs:7.0f} GB/s {100 * gbs / copy_gbs:5.1f}% of copy")

    for t in (1, 64):
        x = torch.randn(t, K, dtype=torch.bfloat16, device=dev)
        y = torch.empty(t, N, dtype=torch.bfloat16, device=dev)
        row(f"F.linear T {t} (W [N, hidden])", lambda: torch.matmul(x, w_lin.t(), out=y))
        row(f"x @ W T {t} (W [hidden, N])", lambda: torch.matmul(x, w_ours, out=y))
    for name, w, sk, sn in (("ours [hidden, N]", w_ours, N, 1), ("Linear [N, hidden]", w_lin, 1, K)):
        for warps, stages in ((8, 4), (4, 3)):
            for s in (1, 2, 3, 4, 8):
                per = triton.cdiv(k_tiles, s)
                row(f"tile read {name} S {s} w{warps}", lambda s=s, per=per, warps=warps, stages=stages:
                    tile_read[(HEADS, s)](w, out, sk, sn, k_tiles, per, BK=BK, D=D,
                                          num_warps=warps, num_stages=stages))
            for per_sm in (1, 2):
                g = sms * per_sm
                row(f"tile read {name} balanced {g} w{warps}", lambda g=g, warps=warps, stages=stages:
                    tile_read_balanced[(g,)](w, out, sk, sn, k_tiles, HEADS * k_tiles, BK=BK, D=D,
                                             num_warps=warps, num_stages=stages))


if __name__ == "__main__":
    main()
