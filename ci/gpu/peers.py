#!/usr/bin/env python3
"""Peer timings on the GPU machine, for pairing with gpu-harness in the same run.

Measures torch (cuBLAS / ATen) and a row-per-program Triton kernel on the shapes our harness benchmarks, with
triton.testing.do_bench (CUDA events, L2 flushed before every repetition, median), and checks each result
against a float32 torch reference. Writes one JSON list to argv[1] and prints a short table.

usage: python3 peers.py OUT.json [--quick]
"""
import json
import math
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

DEV = torch.device("cuda")


@triton.jit
def _row_softmax(dst, src, src_stride, dst_stride, n_cols, BLOCK: tl.constexpr):
    # One program per row; the row padded with -inf so padding loses the max and adds exp(-inf) = 0.
    r = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    v = tl.load(src + r * src_stride + cols, mask=keep, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(dst + r * dst_stride + cols, (e / tl.sum(e, axis=0)).to(dst.dtype.element_ty), mask=keep)


def triton_softmax(x, y, warps):
    rows, cols = x.shape
    _row_softmax[(rows,)](y, x, x.stride(0), y.stride(0), cols, BLOCK=triton.next_power_of_2(cols),
                          num_warps=warps)


def relerr(out, ref):
    o, r = out.float(), ref.float()
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r))


def timed(fn):
    lo, med, hi = do_bench(fn, warmup=25, rep=200, quantiles=[0.1, 0.5, 0.9])
    return med, lo, hi


def main():
    out_path = sys.argv[1]
    quick = "--quick" in sys.argv
    rows = []

    def rec(case, impl, ms, lo, hi, err, nbytes=None, flops=None, cfg=None):
        row = dict(case=case, impl=impl, cfg=cfg, ms=ms, p10=lo, p90=hi, relerr=err)
        if nbytes:
            row["GBps"] = nbytes / (ms * 1e-3) / 1e9
        if flops:
            row["TFLOPs"] = flops / (ms * 1e-3) / 1e12
        rows.append(row)
        print(json.dumps(row), flush=True)

    m, n = (1024, 1024) if quick else (8192, 8192)
    x = torch.randn(m, n, device=DEV, dtype=torch.bfloat16) * 3
    y = torch.empty_like(x)
    ref = torch.softmax(x.float(), dim=-1)
    nbytes = 2 * x.numel() * x.element_size()
    case = f"softmax bf16 {m}x{n}"
    y.copy_(torch.softmax(x, dim=-1))
    rec(case, "torch.softmax", *timed(lambda: torch.softmax(x, dim=-1)), relerr(y, ref), nbytes=nbytes)
    for warps in (4, 8, 16):
        y.fill_(float("nan"))
        triton_softmax(x, y, warps)
        torch.cuda.synchronize()
        rec(case, "triton row", *timed(lambda w=warps: triton_softmax(x, y, w)), relerr(y, ref), nbytes=nbytes,
            cfg=f"num_warps={warps}")
    del x, y, ref

    s = 1024 if quick else 4096
    a = torch.randn(s, s, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(s, s, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(s, s, device=DEV, dtype=torch.bfloat16)
    ref = a.float() @ b.float()
    torch.matmul(a, b, out=c)
    rec(f"gemm bf16 {s}^3", "torch.matmul (cuBLAS)", *timed(lambda: torch.matmul(a, b, out=c)), relerr(c, ref),
        flops=2 * s ** 3)

    with open(out_path, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, triton=triton.__version__,
                       rows=rows), f, indent=1)
    print(f"{'case':24} {'impl':24} {'cfg':14} {'ms':>9} {'GB/s':>8} {'TF/s':>7} {'relerr':>9}")
    for r in rows:
        print(f"{r['case']:24} {r['impl']:24} {r['cfg'] or '':14} {r['ms']:9.4f} {r.get('GBps', 0):8.1f} "
              f"{r.get('TFLOPs', 0):7.1f} {r['relerr']:9.2e}")


if __name__ == "__main__":
    main()
