#!/usr/bin/env python3
"""What writing back over the input costs a memory-bound kernel, on this GPU, at RoPE's size.

RoPE's bench call rewrites q and k in place (bf16 [16384, 32 + 8, 128], 168 MB read and written).
This times, with the harness's method (CUDA events, median, a 256 MiB read flush before each call),
the simplest kernels that move the same bytes:

  copy          y.copy_(x)                      (the roofline's own operation)
  torch  out    torch.mul(x, c, out=y)          (PyTorch's vectorized element-wise kernel)
  torch  in     x.mul_(c)
  triton out    y = x * c, 16-byte accesses     (one block of BLOCK elements each)
  triton in     x = x * c

and prints each as GB/s (read + written) and % of the copy. If the in-place forms fall short of the
out-of-place ones by what RoPE's in-place call falls short of 90% of copy, the gap is the write-back
pattern, not RoPE's kernel (docs/ops.md, RoPE). Usage: python3 ci/gpu/inplace_ceiling.py [elements].
"""
import sys

import torch
import triton
import triton.language as tl

from cudatime import median_us

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384 * 40 * 128
BLOCK = 4096


@triton.jit
def scale_kernel(x, y, n, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    tl.store(y + offs, (v.to(tl.float32) * c).to(v.dtype), mask=m)


def triton_scale(x, y):
    scale_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), 0.999, BLOCK=BLOCK)


def main():
    x = torch.randn(N, device="cuda").to(torch.bfloat16)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    forms = [
        ("copy", lambda: y.copy_(x)),
        ("torch out of place", lambda: torch.mul(x, 0.999, out=y)),
        ("torch in place", lambda: x.mul_(0.999)),
        ("triton out of place", lambda: triton_scale(x, y)),
        ("triton in place", lambda: triton_scale(x, x)),
    ]
    print(f"{torch.cuda.get_device_name()}: bf16 x {N} ({nbytes / 1e6:.1f} MB read + written), "
          "CUDA events, median of 60, 256 MiB read flush before each call")
    print("| form | µs | GB/s | % of copy |")
    print("|---|---|---|---|")
    copy = None
    for name, fn in forms:
        us = median_us(fn)
        gbs = nbytes / (us * 1e-6) / 1e9
        copy = copy or gbs
        print(f"| {name} | {us:.2f} | {gbs:.0f} | {100 * gbs / copy:.1f}% |")


if __name__ == "__main__":
    main()
