#!/usr/bin/env python3
"""How fast this GPU can read N bytes once, at the sizes our decode targets read.

The decode targets (fused QKV, attention decode, MoE decode) are "bytes read ÷ time ≥ X% of the measured
copy bandwidth", where the copy is measured on 1 GiB. A decode step reads far less: fused QKV's weight is
50.3 MB, a 1 × 8k KV cache 33.5 MB. This times, with the harness's method (`cudatime.median_us`: CUDA
events, median, a 256 MiB read flush before each call), the simplest kernels that read the same bytes:

  copy           y.copy_(x) at the size (read + written), and on 1 GiB (the roofline's own figure)
  triton read    each block sums BLOCK bf16 elements and writes one f32 (16-byte loads, no reuse); every
                 BLOCK / num_warps pair below, and a grid-stride form over 1–8 blocks per SM
  torch.sum      PyTorch's reduction
  F.linear       cuBLAS at fused QKV's shape (x [T, 4096] by W [6144, 4096], T 1 and 64), 50.3 MB size only

and prints, per size, each form's GB/s (bytes read ÷ time) as a % of the 1 GiB copy. The best read-only
form is the ceiling a decode kernel of that size can be held to; where it is below a target's X%, that
target is out of reach at that size for any kernel, ours or a peer's. Usage: python3 ci/gpu/read_ceiling.py
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from cudatime import median_us

# (label, bytes read): the decode calls' own sizes (docs/fused_qkv.md, docs/attention.md, docs/moe.md).
SIZES = [
    ("attention decode B1 KV 8k (K+V, Hkv 8, D 128)", 2 * 8 * 8192 * 128 * 2),
    ("fused QKV weight (4096 x 6144 bf16)", 4096 * 6144 * 2),
    ("attention decode B1 KV 32k", 2 * 8 * 32768 * 128 * 2),
    ("MoE Mixtral T1 (2 experts' NVFP4 W13 + W2 + scales)", 2 * (2 * 14336 * 4096 + 4096 * 14336) * 9 // 16),
    ("attention decode B1 KV 128k", 2 * 8 * 131072 * 128 * 2),
]
COPY_PROBE = 1 << 30


@triton.jit
def block_sum(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(out + tl.program_id(0), tl.sum(v.to(tl.float32)))


@triton.jit
def stride_sum(x, out, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out + tl.program_id(0), tl.sum(acc))


def read_forms(x, out, sms):
    n = x.numel()
    for block, warps in [(2048, 4), (4096, 4), (8192, 8), (16384, 8), (32768, 16)]:
        grid = (triton.cdiv(n, block),)
        yield f"triton read {block}/{warps}w", lambda g=grid, b=block, w=warps: block_sum[g](
            x, out, n, BLOCK=b, num_warps=w)
    for per_sm in [1, 2, 4, 8]:
        grid = (sms * per_sm,)
        yield f"triton stride {per_sm}/SM", lambda g=grid: stride_sum[g](x, out, n, BLOCK=4096, num_warps=8)
    yield "torch.sum", lambda: torch.sum(x, dtype=torch.float32)


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    big = torch.empty(COPY_PROBE // 2, dtype=torch.bfloat16, device="cuda").normal_()
    big_y = torch.empty_like(big)
    copy_us = median_us(lambda: big_y.copy_(big), reps=20)
    copy = 2 * COPY_PROBE / (copy_us * 1e-6) / 1e9
    del big, big_y
    print(f"{torch.cuda.get_device_name()}: copy of 1 GiB {copy:.0f} GB/s (read + written); CUDA events, "
          "median of 60, 256 MiB read flush before each call")
    print()
    print("| bytes read | form | µs | GB/s | % of copy |")
    print("|---|---|---|---|---|")
    for label, nbytes in SIZES:
        x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
        y = torch.empty_like(x)
        out = torch.empty(triton.cdiv(x.numel(), 2048), dtype=torch.float32, device="cuda")
        rows = []
        us = median_us(lambda: y.copy_(x))
        rows.append(("copy (read + written)", us, 2 * nbytes / (us * 1e-6) / 1e9))
        for name, fn in read_forms(x, out, sms):
            us = median_us(fn)
            rows.append((name, us, nbytes / (us * 1e-6) / 1e9))
        if "QKV" in label:
            w = x.view(6144, 4096)
            for t in (1, 64):
                a = torch.randn(t, 4096, dtype=torch.bfloat16, device="cuda")
                us = median_us(lambda: F.linear(a, w))
                rows.append((f"F.linear T {t} (cuBLAS)", us, nbytes / (us * 1e-6) / 1e9))
        best = max((r for r in rows if r[0].startswith(("triton", "torch.sum"))), key=lambda r: r[2])
        mb = f"{nbytes / 1e6:.1f} MB: {label}"
        for name, us, gbs in rows:
            mark = " **(best read)**" if name == best[0] else ""
            print(f"| {mb} | {name}{mark} | {us:.2f} | {gbs:.0f} | {100 * gbs / copy:.1f}% |")
        print(f"| {mb} | 80% of copy would take | {nbytes / (0.8 * copy * 1e3):.2f} | {0.8 * copy:.0f} | 80.0% |")
        del x, y, out


if __name__ == "__main__":
    main()
