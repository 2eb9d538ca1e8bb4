#!/usr/bin/env python3
"""Peer timings on the GPU machine, paired call by call with gpu-harness in the same run.

Reads the benchmark calls the harness times (op, dtype, shapes, causal; written by
`gpu-harness bench` as $OUT/bench-calls.json, or by `gpu-harness calls --out DIR` beforehand) and times,
for every call, its torch and Triton counterparts with triton.testing.do_bench's procedure (CUDA events, L2 flushed
by reading a 256 MiB buffer, or with CUTILE_L2_FLUSH=write by do_bench itself, which writes it
before every repetition, median):

  add / axpy          torch.add / Tensor.add_(alpha=)
  softmax             torch.softmax, the Triton row softmax of tr_kernels.py (num_warps 4, 8, 16)
  rms_norm            torch.nn.functional.rms_norm, the Triton row RMSNorm of tr_kernels.py
  layer_norm          torch.nn.functional.layer_norm, the Triton row LayerNorm of tr_kernels.py
  add_rms_norm        h = x + r; y = F.rms_norm(h) in torch (tr_kernels.py has no fused add: torch only)
  rms_norm_heads      F.rms_norm over D of [.., T, H, D], the Triton row RMSNorm on its [T·H, D] rows
  layer_norm_stats    torch.native_layer_norm (y, mean, rstd) (tr_kernels.py writes no stats: torch only)
  gemm                torch.matmul (cuBLAS)
  grouped_gemm        torch._grouped_mm(a, b, offs=offs) when the installed torch has it (impl
                      torch_grouped_mm), and a loop of torch.matmul per group (impl torch_loop, always)
  gemm epilogues      gemm_bias[_gelu[_tanh]|_silu][_residual|_f32_out], gemm_residual, gemm_f32_out, gemm_splitk:
                      torch eager with the same epilogue: F.linear(a, b.T, bias) (cuBLASLt's bias epilogue),
                      then F.gelu / F.silu and + residual; the f32-output ops run in the input type and
                      cast with .float() (torch has no f32-output bf16 linear); gemm_splitk also against
                      torch.matmul (cuBLAS)
  attention           scaled_dot_product_attention with the cuDNN and the flash backends
  attention_backward  SDPA forward (cuDNN and flash backends) with autograd, timing only the backward
                      (torch.autograd.grad of the output, retain_graph); FLOPs 2.5x the forward's
  attention_prefill   the variants (flags: bottom_right, window, softcap, query_offset, sinks, lse): SDPA with
                      a boolean mask (efficient and cuDNN backends) when there is no soft-cap and no sink,
                      and torch eager math (scores, tanh cap, mask, sinks as an extra softmax column) always
  attention_varlen    flash SDPA per sequence (a Python loop over the ragged batch: dense q/k/v slices, a
                      boolean mask for the variants), and torch eager math per sequence
  activations         silu_and_mul / swiglu / gelu[_tanh] / geglu[_tanh] / relu and their _backward:
                      torch eager (F.silu(a) * b, F.gelu(x, approximate=..), torch.relu; the backward
                      through aten's silu_backward / gelu_backward / threshold_backward), and the one
                      Triton kernel of act_kernels.py beside this script (BLOCK 1024/4096, 4/8 warps)
  attention_decode    scaled_dot_product_attention(enable_gqa=True) on the same contiguous cache [B, Hkv, S, D]
                      (the benchmark calls are full-length), cuDNN, flash and efficient backends (a backend
                      that refuses the shape is recorded as an error row)
  attention_decode_paged  the same SDPA rows on the equivalent contiguous cache; the paged-vs-contiguous
                      comparison is our own attention_decode row of the same B and KV (same run)
  mla_decode[_paged]  absorbed MLA decode on the equivalent contiguous latent cache [B, S, 576]: torch eager
                      (impl torch: q viewed [B, H·Sq, 576] bmm cacheᵀ, f32 softmax, bmm cache[..., :512]),
                      and F.scaled_dot_product_attention with q [B, H, Sq, 576], k = cache expanded to
                      [B, H, S, 576], v = its first 512 columns (D_qk ≠ D_v), backends efficient, cuDNN,
                      flash and math (a refusal is the row's error; skipped when the expanded cache would
                      exceed 24 GB); bytes = the latent cache read once; Sq > 1 skipped (causal suffix)
  mla_prefill         SDPA with D_qk 192 / D_v 128 (GQA repeated), backends cuDNN, flash, efficient (a
                      refusal is recorded as the row's error): which accept D_qk ≠ D_v shows in the rows
  rope                RoPE in torch ops on q and k (vLLM's native form: gather cos/sin rows, cat/stack),
                      in place (copy_) or out of place as the call asks
  kv_cache_write[_paged]  cache writes by index assignment / index_copy_ (torch only)
  embedding           F.embedding
  argmax / topk       torch.argmax / torch.topk (sorted)
  rms_norm_backward   torch autograd of F.rms_norm (dx, dw); torch only
  layer_norm_backward aten.native_layer_norm_backward from the forward's mean/rstd (dx, dw, db); torch only
  dropout[_backward]  F.dropout(training=True) (torch's RNG differs from ours: checked by its kept values
                      and its keep rate, within 5σ of 1 - p; ours is checked bit-exactly by the harness)
  gemm_fp8_tensor / gemm_fp8_row / gemm_fp8_block
                      torch._scaled_mm (cuBLASLt fp8, bf16 out; use_fast_accum when the call lists a
                      third shape [1] or [1, l], as ours then does) with per-tensor scales / rowwise
                      scales (scale_a [m, 1], scale_b [1, n]) / block scales (scale_a [m, k/128]
                      M-major whatever l says, l = 1 passes ours M-major too; scale_b
                      [k/128, n/128], accepted by newer torch on sm_90 only: an older torch's refusal is
                      recorded as the row's error), b column-major (w.t()); and torch.matmul in bf16
                      (cuBLAS) of the same shape, impl `cublas-bf16`
  fused_qkv           torch's unfused sequence (F.linear, split, per-head F.rms_norm, RoPE in torch ops,
                      cache write by index assignment), and F.linear alone (cuBLAS) of the same shape
  fused_linear_cross_entropy  F.cross_entropy(F.linear(x, w), target) forward + backward (autograd to the
                      gradients the call asks for: x and/or w), every 8th target -100 (the harness's data
                      rule; all / none per the call's switches); the row also carries torch's peak memory
                      above its inputs (torch.cuda.max_memory_allocated) and ours as our planner sizes it
                      (the op's only extra allocation is its scratch: one chunk's logits + T f32, see
                      docs/ops.md), peak_mem_bytes / ours_scratch_bytes

Each result is checked against a float32 torch computation (relative L2; of several outputs the largest).
The Triton kernels are imported at run time from --triton-kernels (default: .gpu/reference/tr_kernels.py
in the checkout, else ../shared/bench/reference/tr_kernels.py beside the checkout; both found from this
script's place); without the file the Triton rows are reported as skipped.

usage: python3 peers.py OUT/peers.json --calls OUT/bench-calls.json [--triton-kernels PATH] [--ops softmax,gemm]
Writes the `cutile-bench` schema (docs/gpu-runner.md): rows carry the harness's call name and impl
(torch, cublas, triton, cudnn, flash), so `gpu-harness report OUT` pairs them with ours.
"""
import argparse
import functools
import importlib.util
import itertools
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # act_kernels.py beside this script
import triton
from triton.testing import do_bench

DEV = torch.device("cuda")
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
EPS = 1e-5   # the harness's norm eps (cutile_examples::workload::EPS)
ALPHA = 1.5  # the harness's axpy alpha (cutile_examples::workload::ALPHA)
TRITON_WARPS = (4, 8, 16)
# A whole row in one Triton block beyond this many elements does not compile in reasonable time.
TRITON_MAX_BLOCK = 65536


CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def load_triton_kernels(path):
    candidates = [path] if path else [
        os.path.join(CHECKOUT, ".gpu", "reference", "tr_kernels.py"),
        os.path.join(CHECKOUT, "..", "shared", "bench", "reference", "tr_kernels.py"),
    ]
    for p in candidates:
        if p and os.path.isfile(p):
            spec = importlib.util.spec_from_file_location("tr_kernels", p)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod, p
    return None, None


def relerr(out, ref):
    o, r = out.float(), ref.float()
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-30))


# How the L2 is flushed before each timed call, as gpu-harness does (`CUTILE_L2_FLUSH`, see
# cutile::runtime::timing): `read` (the default) reads a 256 MiB buffer, leaving the L2 cold and clean;
# `write` is triton.testing.do_bench's own flush (zeroing 256 MiB), which leaves it full of dirty lines
# that the timed call then pays to write back; `none` flushes nothing (a diagnostic for compute-bound
# calls, to tell the flush's share of a timing).
FLUSH_MODE = os.environ.get("CUTILE_L2_FLUSH", "read") or "read"
if FLUSH_MODE not in ("read", "write", "none"):
    sys.exit(f"CUTILE_L2_FLUSH={FLUSH_MODE}: set it to `read` (the default), `write` or `none`")
_flush_buf = []


def read_flush():
    """Reads 256 MiB (a sum into one float), evicting the L2 without leaving dirty lines (nothing
    with CUTILE_L2_FLUSH=none)."""
    if FLUSH_MODE == "none":
        return
    if not _flush_buf:
        _flush_buf.append(torch.zeros(64 << 20, dtype=torch.float32, device="cuda"))
    _flush_buf[0].sum()


def bench_read_flush(fn, warmup_ms=25, rep_ms=200, max_reps=2000):
    """do_bench's procedure (estimate, warm up, time each rep with CUDA events after a flush, quantiles)
    with the read flush."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        read_flush()
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    n = min(max_reps, max(1, int(rep_ms / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        read_flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in zip(starts, ends))
    q = lambda p: t[min(len(t) - 1, int(round(p * (len(t) - 1))))]
    return q(0.1), q(0.5), q(0.9)


def timed(fn):
    if FLUSH_MODE == "write":
        lo, med, hi = do_bench(fn, warmup=25, rep=200, quantiles=[0.1, 0.5, 0.9])
    else:
        lo, med, hi = bench_read_flush(fn)
    return med, lo, hi


def numel(shape):
    return math.prod(shape)


def bench_grouped_gemm(rec, call, dt, shapes):
    """grouped_gemm: shapes [[total_m, k], [G, k, n], group_rows] (+ [1]: b is the transpose(1, 2) view of
    a contiguous [G, n, k]). Peers: torch._grouped_mm(a, b, offs=offs) when this torch has it (impl
    `torch_grouped_mm`; an error row when it refuses the call, e.g. f16/f32 or an arch it does not
    support), and a Python loop of torch.matmul per group into slices of c (impl `torch_loop`, always)."""
    (m, k), (g, _, n), rows = shapes[0], shapes[1], shapes[2]
    transposed = len(shapes) > 3 and list(shapes[3]) == [1]
    torch.backends.cuda.matmul.allow_tf32 = dt == torch.float32
    a = rand([m, k], dt)
    b = rand([g, n, k], dt).transpose(1, 2) if transposed else rand([g, k, n], dt)
    ends = list(itertools.accumulate(rows))
    starts = [e - r for e, r in zip(ends, rows)]
    ref = torch.empty(m, n, device=DEV, dtype=torch.float64)
    for q in range(g):
        ref[starts[q]:ends[q]] = a[starts[q]:ends[q]].double() @ b[q].double()
    flops = 2 * m * n * k
    cfg = "b=[G,n,k].T" if transposed else None
    if hasattr(torch, "_grouped_mm"):
        offs = torch.tensor(ends, device=DEV, dtype=torch.int32)
        out = {}

        def grouped():
            out["c"] = torch._grouped_mm(a, b, offs=offs)

        rec.run(call, "torch_grouped_mm", grouped, lambda: relerr(out["c"], ref), flops=flops, cfg=cfg)
    else:
        rec.skip(call, "torch_grouped_mm", f"torch {torch.__version__} has no torch._grouped_mm")
    c = torch.empty(m, n, device=DEV, dtype=dt)
    parts = [(a[s:e], b[q], c[s:e]) for q, (s, e) in enumerate(zip(starts, ends)) if e > s]

    def loop():
        for x, w, y in parts:
            torch.matmul(x, w, out=y)

    rec.run(call, "torch_loop", loop, lambda: relerr(c, ref), flops=flops, cfg=cfg)
    torch.backends.cuda.matmul.allow_tf32 = False


class Recorder:
    def __init__(self):
        self.rows = []

    def run(self, call, impl, fn, check, nbytes=None, flops=None, cfg=None, extra=None):
        """Runs `fn` once, checks it with `check()` (relative error), then times it. `extra()` (after the
        first run) returns more fields for the row (e.g. peak memory)."""
        row = dict(name=call["name"], op=call["op"], dtype=call["dtype"], shapes=call["shapes"],
                   causal=call.get("causal", False), impl=impl, cfg=cfg, nbytes=nbytes, flops=flops)
        try:
            fn()
            torch.cuda.synchronize()
            if extra:
                row.update(extra())
            row["relerr"] = check()
            ms, lo, hi = timed(fn)
            row.update(ms=ms, p10=lo, p90=hi)
            if nbytes:
                row["GBps"] = nbytes / (ms * 1e-3) / 1e9
            if flops:
                row["TFLOPs"] = flops / (ms * 1e-3) / 1e12
        except Exception as e:  # one failing peer must not stop the others
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        self.rows.append(row)
        print(json.dumps(row), flush=True)

    def skip(self, call, impl, why):
        row = dict(name=call["name"], op=call["op"], dtype=call["dtype"], shapes=call["shapes"],
                   causal=call.get("causal", False), impl=impl, skipped=why)
        self.rows.append(row)
        print(json.dumps(row), flush=True)


def rand(shape, dt, scale=1.0):
    return (torch.rand(shape, device=DEV, dtype=torch.float32) * 2 - 1).mul_(scale).to(dt)


def bench_call(rec, call, tk):
    if call["op"] in FP8_OPS:
        bench_gemm_fp8(rec, call)
        rec.skip(call, "triton", "no Triton peer for this op")
        return
    op, dt = call["op"], DTYPES[call["dtype"]]
    shapes = call["shapes"]
    esize = torch.tensor([], dtype=dt).element_size()
    x_shape = shapes[0]
    if op in ("add", "axpy"):
        a, b = rand(x_shape, dt), rand(x_shape, dt)
        nbytes = 3 * numel(x_shape) * esize
        if op == "add":
            c = torch.empty_like(a)
            ref = a.float() + b.float()
            rec.run(call, "torch", lambda: torch.add(a, b, out=c), lambda: relerr(c, ref), nbytes=nbytes)
        else:
            y0 = b.clone()
            ref = ALPHA * a.float() + y0.float()
            # Timed in place like the harness's axpy; checked on a fresh copy.
            rec.run(call, "torch", lambda: b.add_(a, alpha=ALPHA),
                    lambda: relerr(y0.clone().add_(a, alpha=ALPHA), ref), nbytes=nbytes)
        return
    if op in ("softmax", "rms_norm", "layer_norm"):
        cols = x_shape[-1]
        x = rand(x_shape, dt, 4.0 if op == "softmax" else 1.0)
        y = torch.empty_like(x)
        x2, y2 = x.view(-1, cols), y.view(-1, cols)
        nbytes = 2 * numel(x_shape) * esize
        if op == "softmax":
            ref = torch.softmax(x.float(), dim=-1)
            rec.run(call, "torch", lambda: torch.softmax(x, dim=-1),
                    lambda: relerr(torch.softmax(x, dim=-1), ref), nbytes=nbytes)
            triton_fn = (lambda w: tk.softmax(x2, y2, w)) if tk else None
        else:
            w = rand([cols], dt)
            if op == "rms_norm":
                ref = F.rms_norm(x.float(), (cols,), w.float(), EPS)
                rec.run(call, "torch", lambda: F.rms_norm(x, (cols,), w, EPS),
                        lambda: relerr(F.rms_norm(x, (cols,), w, EPS), ref), nbytes=nbytes)
                triton_fn = (lambda nw: tk.rmsnorm(x2, w, y2, EPS, nw)) if tk else None
            else:
                b = rand([cols], dt)
                ref = F.layer_norm(x.float(), (cols,), w.float(), b.float(), EPS)
                rec.run(call, "torch", lambda: F.layer_norm(x, (cols,), w, b, EPS),
                        lambda: relerr(F.layer_norm(x, (cols,), w, b, EPS), ref), nbytes=nbytes)
                triton_fn = (lambda nw: tk.layernorm(x2, w, b, y2, EPS, nw)) if tk else None
        if triton_fn is None:
            rec.skip(call, "triton", "tr_kernels.py not found (--triton-kernels)")
        elif triton.next_power_of_2(cols) > TRITON_MAX_BLOCK:
            rec.skip(call, "triton", f"a whole row of {cols} exceeds one Triton block of {TRITON_MAX_BLOCK}")
        else:
            for nw in TRITON_WARPS:
                rec.run(call, "triton", lambda nw=nw: triton_fn(nw), lambda: relerr(y, ref),
                        nbytes=nbytes, cfg=f"num_warps={nw}")
        return
    if op == "add_rms_norm":
        cols = x_shape[-1]
        x, r, w = rand(x_shape, dt), rand(x_shape, dt), rand([cols], dt)
        h_ref = (x.float() + r.float()).to(dt).float()  # h is stored in dt before the statistics
        y_ref = F.rms_norm(h_ref, (cols,), w.float(), EPS)

        def fused():
            h = x + r
            return h, F.rms_norm(h, (cols,), w, EPS)

        def check():
            h, y = fused()
            return max(relerr(h, h_ref), relerr(y, y_ref))
        rec.run(call, "torch", fused, check, nbytes=4 * numel(x_shape) * esize)
        rec.skip(call, "triton", "tr_kernels.py has no fused residual add + RMSNorm")
        return
    if op == "rms_norm_heads":
        d = x_shape[-1]
        x, w = rand(x_shape, dt), rand([d], dt)
        y = torch.empty_like(x)
        ref = F.rms_norm(x.float(), (d,), w.float(), EPS)
        nbytes = 2 * numel(x_shape) * esize
        rec.run(call, "torch", lambda: F.rms_norm(x, (d,), w, EPS),
                lambda: relerr(F.rms_norm(x, (d,), w, EPS), ref), nbytes=nbytes)
        if tk is None:
            rec.skip(call, "triton", "tr_kernels.py not found (--triton-kernels)")
        else:
            x2, y2 = x.view(-1, d), y.view(-1, d)  # every head vector a row
            for nw in TRITON_WARPS:
                rec.run(call, "triton", lambda nw=nw: tk.rmsnorm(x2, w, y2, EPS, nw), lambda: relerr(y, ref),
                        nbytes=nbytes, cfg=f"num_warps={nw}")
        return
    if op == "layer_norm_stats":
        cols = x_shape[-1]
        x, w, b = rand(x_shape, dt), rand([cols], dt), rand([cols], dt)
        xf = x.float()
        mean_ref = xf.mean(dim=-1, keepdim=True)
        rstd_ref = torch.rsqrt(xf.var(dim=-1, unbiased=False, keepdim=True) + EPS)
        y_ref = F.layer_norm(xf, (cols,), w.float(), b.float(), EPS)
        rows = numel(x_shape) // max(cols, 1)

        def stats():
            return torch.native_layer_norm(x, (cols,), w, b, EPS)

        def check():
            y, mean, rstd = stats()
            return max(relerr(y, y_ref), relerr(mean.reshape(-1), mean_ref.reshape(-1)),
                       relerr(rstd.reshape(-1), rstd_ref.reshape(-1)))
        rec.run(call, "torch", stats, check, nbytes=2 * numel(x_shape) * esize + 2 * rows * 4)
        rec.skip(call, "triton", "tr_kernels.py has no LayerNorm that writes mean and rstd")
        return
    if op == "fused_qkv":
        bench_fused_qkv(rec, call, dt, shapes)
        return
    if op in TRANSFORMER_OPS:
        TRANSFORMER_OPS[op](rec, call, dt, shapes, esize)
        rec.skip(call, "triton", "no Triton peer for this op")
        return
    if op in EPILOGUE_OPS:
        bench_gemm_epilogue(rec, call, dt, shapes)
        rec.skip(call, "triton", "no Triton peer for this op")
        return
    if op == "grouped_gemm":
        bench_grouped_gemm(rec, call, dt, shapes)
        rec.skip(call, "triton", "no Triton peer for this op")
        return
    if op in ("gemm", "bmm"):
        # f32: ours runs as tf32, so cuBLAS gets tf32 too (torch's allow_tf32), and the check is
        # against the exact f32 product.
        torch.backends.cuda.matmul.allow_tf32 = dt == torch.float32
        if op == "gemm":
            (m, k), (_, n) = shapes[0], shapes[1]
            a, b = rand([m, k], dt), rand([k, n], dt)
            c = torch.empty(m, n, device=DEV, dtype=dt)
            fn, flops = (lambda: torch.matmul(a, b, out=c)), 2 * m * n * k
        else:
            (bt, m, k), (_, _, n) = shapes[0], shapes[1]
            a, b = rand([bt, m, k], dt), rand([bt, k, n], dt)
            c = torch.empty(bt, m, n, device=DEV, dtype=dt)
            fn, flops = (lambda: torch.bmm(a, b, out=c)), 2 * bt * m * n * k
        ref = a.double() @ b.double()
        rec.run(call, "cublas", fn, lambda: relerr(c, ref), flops=flops)
        torch.backends.cuda.matmul.allow_tf32 = False
        return
    if op == "attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q_shape, k_shape = shapes[0], shapes[1]
        causal = call.get("causal", False)
        q, k, v = rand(q_shape, dt), rand(k_shape, dt), rand(k_shape, dt)
        if len(q_shape) == 3:  # [BH, S, D] → [1, BH, S, D]
            q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        gqa = q.shape[1] != k.shape[1]
        sq, sk, d = q.shape[-2], k.shape[-2], q.shape[-1]
        slices = q.shape[0] * q.shape[1]
        pairs = sum(min(i + 1, sk) for i in range(sq)) if causal else sq * sk
        flops = 4 * slices * pairs * d

        def sdpa(qq, kk, vv):
            return F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, enable_gqa=gqa)

        kf, vf = k.float(), v.float()
        if gqa:
            rep = q.shape[1] // k.shape[1]
            kf, vf = kf.repeat_interleave(rep, dim=1), vf.repeat_interleave(rep, dim=1)
        ref = F.scaled_dot_product_attention(q.float(), kf, vf, is_causal=causal)
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            def fn(backend=backend):
                with sdpa_kernel(backend):
                    return sdpa(q, k, v)
            rec.run(call, name, fn, lambda fn=fn: relerr(fn(), ref), flops=flops)
        return
    if op in ("attention_decode", "attention_decode_paged"):
        bench_decode(rec, call, dt, esize)
    if op in ("mla_decode", "mla_decode_paged"):
        bench_mla_decode(rec, call, dt, esize)
        return
    if op == "mla_prefill":
        bench_mla_prefill(rec, call, dt)
        return
    if op in ("attention_prefill", "attention_varlen"):
        bench_attention_variant(rec, call, dt, shapes)
        return
    if op in ACT_OPS:
        bench_activation(rec, call, dt, esize)
        return
    rec.skip(call, "-", f"no peer for op {op}")


def bench_decode(rec, call, dt, esize):
    """Decode (cutile_kernels::attention::decode::described_call): q [B, Hq, Sq, D]; contiguous cache
    [B, Hkv, S, D], or paged [blocks, bs, Hkv, D] with block_table [B, max_blocks] (capacity
    max_blocks·bs). SDPA on a contiguous [B, Hkv, capacity, D] cache, every key visible (the benchmark
    calls are full-length; for Sq > 1 the causal-suffix mask is not expressible as is_causal, so those
    calls are skipped). Metric: K/V bytes read."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    shapes = call["shapes"]
    q_shape, c_shape = shapes[0], shapes[1]
    b, hq, sq, d = q_shape
    if call["op"] == "attention_decode":
        hkv, s = c_shape[1], c_shape[2]
    else:
        hkv, s = c_shape[2], shapes[2][1] * c_shape[1]
    if sq != 1:
        rec.skip(call, "torch", "Sq > 1 needs a causal-suffix mask SDPA has no flag for")
        return
    q = rand([b, hq, sq, d], dt)
    k, v = rand([b, hkv, s, d], dt), rand([b, hkv, s, d], dt)
    nbytes = 2 * b * hkv * s * d * esize
    rep = hq // hkv
    ref = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(rep, dim=1),
                                         v.float().repeat_interleave(rep, dim=1))
    backends = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION))
    for name, backend in backends:
        def fn(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        rec.run(call, name, fn, lambda fn=fn: relerr(fn(), ref), nbytes=nbytes,
                cfg="contiguous cache" if call["op"] == "attention_decode_paged" else None)
MLA_SCALE = 1.0 / math.sqrt(192.0)


def bench_mla_decode(rec, call, dt, esize):
    """MLA decode (cutile_kernels::attention::mla::described_call): q [B, H, Sq, 576]; contiguous latent
    cache [B, S, 576] or paged [blocks, bs, 576] with block_table [B, max_blocks] (capacity
    max_blocks·bs); the peers run on the contiguous equivalent, every key visible (full-length calls).
    Metric: latent cache bytes read once."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    shapes = call["shapes"]
    b, h, sq, w = shapes[0]
    s = shapes[1][1] if call["op"] == "mla_decode" else shapes[2][1] * shapes[1][1]
    cfg = "contiguous cache" if call["op"] == "mla_decode_paged" else None
    if sq != 1:
        rec.skip(call, "torch", "Sq > 1 needs a causal-suffix mask")
        return
    q = rand([b, h, sq, w], dt, 0.5)
    cache = rand([b, s, w], dt, 0.5)
    nbytes = b * s * w * esize
    qr = q.view(b, h * sq, w)
    # f32 reference (B·H·S f32 scores).
    sc = torch.bmm(qr.float(), cache.float().transpose(1, 2)) * MLA_SCALE
    ref = torch.bmm(torch.softmax(sc, dim=-1), cache[..., :512].float()).view(b, h, sq, 512)
    del sc

    def eager():
        scores = torch.bmm(qr, cache.transpose(1, 2)).float() * MLA_SCALE
        p = torch.softmax(scores, dim=-1).to(dt)
        return torch.bmm(p, cache[..., :512]).view(b, h, sq, 512)
    rec.run(call, "torch", eager, lambda: relerr(eager(), ref), nbytes=nbytes, cfg=cfg)
    if b * h * s * (576 + 512) * esize > 24e9:
        rec.skip(call, "sdpa", "the expanded cache would exceed 24 GB")
        return
    k = cache.unsqueeze(1).expand(b, h, s, w)
    v = cache[..., :512].unsqueeze(1).expand(b, h, s, 512)
    backends = (("efficient", SDPBackend.EFFICIENT_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("flash", SDPBackend.FLASH_ATTENTION), ("math", SDPBackend.MATH))
    for name, backend in backends:
        def fn(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, scale=MLA_SCALE)
        rec.run(call, name, fn, lambda fn=fn: relerr(fn(), ref), nbytes=nbytes, cfg=cfg)


def bench_mla_prefill(rec, call, dt):
    """MLA prefill: q [B, H, S, 192], k [B, Hkv, S_k, 192], v [B, Hkv, S_k, 128]; SDPA backends that
    accept D_qk ≠ D_v. FLOPs 2·(192 + 128) per visible (query, key) pair and head."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q_shape, k_shape = call["shapes"][0], call["shapes"][1]
    causal = call.get("causal", False)
    b, h, sq, _ = q_shape
    hkv, sk = k_shape[1], k_shape[2]
    q, k = rand(q_shape, dt), rand(k_shape, dt)
    v = rand([b, hkv, sk, 128], dt)
    rep_ = h // hkv
    if rep_ > 1:
        k, v = k.repeat_interleave(rep_, dim=1), v.repeat_interleave(rep_, dim=1)
    pairs = sum(min(i + 1, sk) for i in range(sq)) if causal else sq * sk
    flops = 2 * b * h * pairs * (192 + 128)
    ref = torch.cat([F.scaled_dot_product_attention(q[i:i + 1].float(), k[i:i + 1].float(),
                                                    v[i:i + 1].float(), is_causal=causal, scale=MLA_SCALE)
                     for i in range(b)])
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        def fn(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=MLA_SCALE)
        rec.run(call, name, fn, lambda fn=fn: relerr(fn(), ref), flops=flops)


def variant_flags(flags):
    """cutile_kernels::attention::spec_flags: [bottom_right, window (-1), softcap x1000 (0), query_offset,
    sinks, lse]."""
    br, w, cap, off, sinks, lse = flags
    return dict(bottom_right=bool(br), window=None if w < 0 else w, softcap=cap / 1000.0 if cap else None,
                offset=off, sinks=bool(sinks), lse=bool(lse))


def variant_mask(sq, sk, causal, f):
    """[sq, sk] bool, True where query i (at position i + offset (+ sk - sq)) sees key j."""
    pos = torch.arange(sq, device=DEV)[:, None] + f["offset"] + (sk - sq if f["bottom_right"] else 0)
    key = torch.arange(sk, device=DEV)[None, :]
    ok = torch.ones(sq, sk, dtype=torch.bool, device=DEV)
    if causal:
        ok &= key <= pos
    if f["window"] is not None:
        ok &= key >= pos - f["window"]
    return ok


def variant_math(q, k, v, mask, f, sinks, scale):
    """Eager torch: [B, H, S, D] (k/v already repeated for GQA); sinks [H] f32 or None."""
    s = (q @ k.transpose(-1, -2)).float() * scale
    if f["softcap"]:
        s = f["softcap"] * torch.tanh(s / f["softcap"])
    s = s.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        col = sinks.view(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)
        s = torch.cat([s, col], dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    if sinks is not None:
        p = p[..., :-1]
    return (p.to(v.dtype) @ v)


def bench_attention_variant(rec, call, dt, shapes):
    causal = call.get("causal", False)
    if call["op"] == "attention_prefill":
        q_shape, k_shape = shapes[0], shapes[1]
        f = variant_flags(shapes[2] if len(shapes) > 2 else [0, -1, 0, 0, 0, 0])
        if len(q_shape) == 3:
            q_shape, k_shape = [1] + q_shape, [1] + k_shape
        seqs = None
    else:
        (h, hkv, d), lq, lk = shapes[0], shapes[1], shapes[2]
        f = variant_flags(shapes[3] if len(shapes) > 3 else [0, -1, 0, 0, 0, 0])
        seqs = list(zip(lq, lk))
        q_shape, k_shape = [1, h, sum(lq), d], [1, hkv, sum(lk), d]
    h, hkv, d = q_shape[1], k_shape[1], q_shape[3]
    rep = h // hkv
    scale = 1.0 / math.sqrt(d)
    q, k, v = rand(q_shape, dt), rand(k_shape, dt), rand(k_shape, dt)
    sinks = torch.randn(h, device=DEV) if f["sinks"] else None
    kr, vr = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if seqs is None:
        parts = [(slice(None), slice(None), q_shape[2], k_shape[2])]
    else:
        parts, a, b = [], 0, 0
        for lq_, lk_ in seqs:
            parts.append((slice(a, a + lq_), slice(b, b + lk_), lq_, lk_))
            a, b = a + lq_, b + lk_
    masks = [variant_mask(sq, sk, causal, f) for _, _, sq, sk in parts]
    pairs = sum(int(m.sum()) for m in masks) * q_shape[0]
    flops = 4 * h * pairs * d
    out = torch.empty_like(q)

    def math_fn():
        for (qs, ks, sq, sk), m in zip(parts, masks):
            if sq == 0:
                continue
            out[:, :, qs] = variant_math(q[:, :, qs], kr[:, :, ks], vr[:, :, ks], m, f, sinks, scale)
        return out

    ref_parts = []
    for (qs, ks, sq, sk), m in zip(parts, masks):
        ref_parts.append(variant_math(q[:, :, qs].float(), kr[:, :, ks].float(), vr[:, :, ks].float(), m, f, sinks,
                                      scale) if sq else None)

    def check(o):
        errs = [relerr(o[:, :, qs], r) for (qs, _, sq, _), r in zip(parts, ref_parts) if sq]
        return max(errs) if errs else 0.0

    rec.run(call, "torch_math", math_fn, lambda: check(math_fn()), flops=flops)
    if f["softcap"] or f["sinks"]:
        rec.skip(call, "sdpa", "SDPA has no soft-cap or sink")
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for name, backend in (("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("flash", SDPBackend.FLASH_ATTENTION)):
        plain = f["window"] is None and f["offset"] == 0 and not (causal and f["bottom_right"])

        def fn(backend=backend, plain=plain):
            with sdpa_kernel(backend):
                for (qs, ks, sq, sk), m in zip(parts, masks):
                    if sq == 0:
                        continue
                    if plain or backend == SDPBackend.FLASH_ATTENTION:
                        # flash takes no mask: only the plain (top-left or no) causal calls
                        if not plain:
                            raise RuntimeError("flash SDPA takes no boolean mask")
                        out[:, :, qs] = F.scaled_dot_product_attention(
                            q[:, :, qs], k[:, :, ks], v[:, :, ks], is_causal=causal,
                            enable_gqa=rep > 1)
                    else:
                        out[:, :, qs] = F.scaled_dot_product_attention(q[:, :, qs], kr[:, :, ks], vr[:, :, ks],
                                                                       attn_mask=m)
            return out
        rec.run(call, name, fn, lambda fn=fn: check(fn()), flops=flops)


# The activation ops (cutile-kernels/src/activation): name -> (activation, form, backward).
ACT_OPS = {}
for _base, _act, _form in (("silu_and_mul", "silu", "gated"), ("swiglu", "silu", "pair"), ("gelu", "gelu", "unary"),
                           ("gelu_tanh", "gelu_tanh", "unary"), ("geglu", "gelu", "gated"),
                           ("geglu_tanh", "gelu_tanh", "gated"), ("relu", "relu", "unary")):
    ACT_OPS[_base] = (_act, _form, False)
    ACT_OPS[_base + "_backward"] = (_act, _form, True)


def torch_act(act, t):
    if act == "silu":
        return F.silu(t)
    if act == "relu":
        return torch.relu(t)
    return F.gelu(t, approximate="tanh" if act == "gelu_tanh" else "none")


def torch_act_backward(act, g, t):
    """g * act'(t) through aten's backward ops (what autograd runs)."""
    if act == "silu":
        return torch.ops.aten.silu_backward(g, t)
    if act == "relu":
        return torch.ops.aten.threshold_backward(g, t, 0)
    return torch.ops.aten.gelu_backward(g, t, approximate="tanh" if act == "gelu_tanh" else "none")


def torch_activation(act, form, backward, ins):
    """The op in torch eager on `ins` (x / x, g / a, b / a, b, g); a tuple of its outputs."""
    if form == "unary":
        return (torch_act_backward(act, ins[1], ins[0]),) if backward else (torch_act(act, ins[0]),)
    if form == "gated":
        x = ins[0]
        n = x.shape[-1] // 2
        a, b = x[..., :n], x[..., n:]
    else:
        a, b = ins[0], ins[1]
    if not backward:
        return (torch_act(act, a) * b,)
    g = ins[-1]
    da, db = torch_act_backward(act, g * b, a), g * torch_act(act, a)
    return (torch.cat([da, db], dim=-1),) if form == "gated" else (da, db)


def bench_activation(rec, call, dt, esize):
    import act_kernels as ak
    act, form, backward = ACT_OPS[call["op"]]
    x_shape = call["shapes"][0]
    half = x_shape[:-1] + [x_shape[-1] // 2]
    if form == "gated":
        in_shapes, out_shapes = ([x_shape, half], [x_shape]) if backward else ([x_shape], [half])
    elif form == "pair":
        in_shapes, out_shapes = ([x_shape] * 3, [x_shape] * 2) if backward else ([x_shape] * 2, [x_shape])
    else:
        in_shapes, out_shapes = ([x_shape] * 2, [x_shape]) if backward else ([x_shape], [x_shape])
    ins = [rand(s, dt, 4.0 if i == 0 else 1.0) for i, s in enumerate(in_shapes)]
    refs = torch_activation(act, form, backward, [t.float() for t in ins])
    nbytes = sum(numel(s) for s in in_shapes + out_shapes) * esize

    def check_outs(outs):
        return max(relerr(o, r) for o, r in zip(outs, refs))
    rec.run(call, "torch", lambda: torch_activation(act, form, backward, ins),
            lambda: check_outs(torch_activation(act, form, backward, ins)), nbytes=nbytes)
    outs = [torch.empty(s, device=DEV, dtype=dt) for s in out_shapes]
    for block in (1024, 4096):
        for nw in (4, 8):
            fn = ak.make(call["op"], act, form == "gated", form == "pair", backward, ins, outs, block, nw)
            rec.run(call, "triton", fn, lambda: check_outs(outs), nbytes=nbytes, cfg=f"BLOCK={block} num_warps={nw}")


SCHEMA_VERSION = 1  # of the `cutile-bench` schema (docs/gpu-runner.md; gpu-harness/src/schema.rs)


def bench_fused_qkv(rec, call, dt, shapes):
    """The harness's described call (cutile_kernels::fused_qkv::described_call): shapes = [[T, hidden],
    [Hq, Hkv, D, rot], [bias, norm, gptj, paged, unfused, i64]]; max_pos max(8192, T); a paged cache of
    16-token blocks, or a contiguous one-sequence cache of T positions."""
    (t, hidden), (hq, hkv, d, rot) = shapes[0], shapes[1]
    sw = shapes[2] if len(shapes) > 2 else [0, 1, 0, 1, 0, 1]
    has_bias, has_norm, gptj, paged = (bool(v) for v in sw[:4])
    n = (hq + 2 * hkv) * d
    max_pos, half = max(8192, t), rot // 2  # positions are distinct: at least T of them
    x = rand([t, hidden], dt)
    w = rand([n, hidden], dt, 1.0 / math.sqrt(hidden))  # nn.Linear's [out, in]
    bias = rand([n], dt) if has_bias else None
    qn, kn = rand([d], dt).add_(1), rand([d], dt).add_(1)
    inv = 1.0 / (10000.0 ** (torch.arange(0, half, device=DEV, dtype=torch.float32) * 2 / rot))
    ang = torch.arange(max_pos, device=DEV, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    pos = torch.randperm(max_pos, device=DEV)[:t]
    if paged:
        blocks, bs = (t + 15) // 16 + 1, 16
        slot = torch.randperm(blocks * bs, device=DEV)[:t]
        k_cache = torch.zeros(blocks * bs, hkv, d, device=DEV, dtype=dt)  # [num_blocks·block_size, Hkv, D]
    else:
        slot = torch.randperm(t, device=DEV)
        k_cache = torch.zeros(1, hkv, t, d, device=DEV, dtype=dt)
    v_cache = torch.zeros_like(k_cache)

    def rope(v, c, s):  # v: [T, H, D] (any float type); c, s: [T, rot/2]
        c, s = c[:, None, :].to(v.dtype), s[:, None, :].to(v.dtype)
        r, rest = v[..., :rot], v[..., rot:]
        if gptj:
            e, o = r[..., 0::2], r[..., 1::2]
            r = torch.stack((e * c - o * s, o * c + e * s), dim=-1).flatten(-2)
        else:
            a, b = r[..., :half], r[..., half:]
            r = torch.cat((a * c - b * s, b * c + a * s), dim=-1)
        return torch.cat((r, rest), dim=-1)

    def unfused(xx, ww, bb, wq, wk, kc, vc):
        qkv = F.linear(xx, ww, bb)
        q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
        q, k, v = q.view(t, hq, d), k.view(t, hkv, d), v.view(t, hkv, d)
        if has_norm:
            q, k = F.rms_norm(q, (d,), wq, 1e-6), F.rms_norm(k, (d,), wk, 1e-6)
        c, s = cos[pos], sin[pos]
        q, k = rope(q, c, s), rope(k, c, s)
        if paged:
            kc.index_copy_(0, slot, k.to(kc.dtype))
            vc.index_copy_(0, slot, v.to(vc.dtype))
        else:
            kc[0, :, slot] = k.transpose(0, 1).to(kc.dtype)
            vc[0, :, slot] = v.transpose(0, 1).to(vc.dtype)
        return q

    f = lambda v: None if v is None else v.float()  # noqa: E731
    k_ref, v_ref = k_cache.float().clone(), v_cache.float().clone()
    q_ref = unfused(x.float(), w.float(), f(bias), qn.float(), kn.float(), k_ref, v_ref)

    def check():
        q = unfused(x, w, bias, qn, kn, k_cache, v_cache)
        return max(relerr(q, q_ref), relerr(k_cache, k_ref), relerr(v_cache, v_ref))
    flops = 2 * t * n * hidden
    rec.run(call, "torch", lambda: unfused(x, w, bias, qn, kn, k_cache, v_cache), check, flops=flops)
    out = torch.empty(t, n, device=DEV, dtype=dt)
    lin_ref = F.linear(x.float(), w.float())
    rec.run(call, "cublas", lambda: torch.matmul(x, w.t(), out=out), lambda: relerr(out, lin_ref),
            flops=flops)


def rope_tables(max_pos, rot):
    half = rot // 2
    inv = 1.0 / (10000.0 ** (torch.arange(0, half, device=DEV, dtype=torch.float32) * 2 / rot))
    ang = torch.arange(max_pos, device=DEV, dtype=torch.float32)[:, None] * inv[None, :]
    return ang.cos(), ang.sin()


def bench_rope(rec, call, dt, shapes, esize):
    """cutile_kernels::rope::described_call: [[T, Hq, Hk, D], [rot, max_pos], [gptj, i64, in_place]];
    f32 cos/sin tables [max_pos, rot/2]."""
    (t, hq, hk, d), (rot, max_pos) = shapes[0], shapes[1]
    gptj, wide, in_place = (bool(v) for v in (shapes[2] if len(shapes) > 2 else [0, 0, 0]))
    half = rot // 2
    cos, sin = rope_tables(max_pos, rot)
    pos = torch.randint(0, max_pos, (t,), device=DEV, dtype=torch.int64 if wide else torch.int32)
    q, k = rand([t, hq, d], dt, 2.0), rand([t, hk, d], dt, 2.0)
    q0, k0 = q.clone(), k.clone()

    def rot_(v, c, s):
        c, s = c[:, None, :].to(v.dtype), s[:, None, :].to(v.dtype)
        r, rest = v[..., :rot], v[..., rot:]
        if gptj:
            e, o = r[..., 0::2], r[..., 1::2]
            r = torch.stack((e * c - o * s, o * c + e * s), dim=-1).flatten(-2)
        else:
            a, b = r[..., :half], r[..., half:]
            r = torch.cat((a * c - b * s, b * c + a * s), dim=-1)
        return torch.cat((r, rest), dim=-1)

    def fwd(qq, kk):
        c, s = cos[pos.long()], sin[pos.long()]
        return rot_(qq, c, s), rot_(kk, c, s)

    q_ref, k_ref = fwd(q0.float(), k0.float())

    def run():
        qo, ko = fwd(q, k)
        if in_place:
            q.copy_(qo)
            k.copy_(ko)
        return qo, ko

    def check():
        q.copy_(q0)
        k.copy_(k0)
        qo, ko = run()
        return max(relerr(qo, q_ref), relerr(ko, k_ref))
    idx = 8 if wide else 4
    nbytes = 2 * t * (hq + hk) * d * esize + t * half * 8 + t * idx
    rec.run(call, "torch", run, check, nbytes=nbytes)


def bench_kv_cache(rec, call, dt, shapes, esize):
    """cutile_kernels::kv_cache::described_call: [[T, Hkv, D], [B, S] or [num_blocks, block_size],
    [i64]]; paged slots a random injection, contiguous (batch, position) pairs distinct."""
    (t, hkv, d), (a, b) = shapes[0], shapes[1]
    paged = call["op"] == "kv_cache_write_paged"
    wide = bool(shapes[2][0]) if len(shapes) > 2 and shapes[2] else False
    idt = torch.int64 if wide else torch.int32
    k, v = rand([t, hkv, d], dt), rand([t, hkv, d], dt)
    n = min(t, a * b)
    entries = torch.randperm(a * b, device=DEV)[:n]
    k, v = k[:n], v[:n]
    if paged:
        kc = torch.zeros(a * b, hkv, d, device=DEV, dtype=dt)  # [num_blocks·block_size, Hkv, D]
        slot = entries.to(idt)

        def run():
            kc.index_copy_(0, slot.long(), k)
            vc.index_copy_(0, slot.long(), v)
        idx_bytes = t * (8 if wide else 4)
    else:
        kc = torch.zeros(a, hkv, b, d, device=DEV, dtype=dt)
        bi, pi = (entries // b).to(idt), (entries % b).to(idt)

        def run():
            kc[bi.long(), :, pi.long()] = k
            vc[bi.long(), :, pi.long()] = v
        idx_bytes = 2 * t * (8 if wide else 4)
    vc = torch.zeros_like(kc)

    def check():
        run()
        if paged:
            return max(relerr(kc[slot.long()], k), relerr(vc[slot.long()], v))
        return max(relerr(kc[bi.long(), :, pi.long()], k), relerr(vc[bi.long(), :, pi.long()], v))
    rec.run(call, "torch", run, check, nbytes=4 * t * hkv * d * esize + idx_bytes)


def bench_embedding(rec, call, dt, shapes, esize):
    """cutile_kernels::embedding::described_call: [[V, D], [T], [i64]]."""
    (vocab, d), (t,) = shapes[0], shapes[1]
    wide = bool(shapes[2][0]) if len(shapes) > 2 and shapes[2] else False
    table = rand([vocab, d], dt)
    ids = torch.randint(0, vocab, (t,), device=DEV, dtype=torch.int64 if wide else torch.int32)
    ref = table[ids.long()]
    rec.run(call, "torch", lambda: F.embedding(ids, table), lambda: relerr(F.embedding(ids, table), ref),
            nbytes=2 * t * d * esize + t * (8 if wide else 4))


def bench_argmax(rec, call, dt, shapes, esize):
    (t, v) = shapes[0]
    x = rand([t, v], dt, 8.0)
    ref = x.float().argmax(dim=-1)
    rec.run(call, "torch", lambda: torch.argmax(x, dim=-1),
            lambda: float((torch.argmax(x, dim=-1) != ref).sum()) / max(t, 1),
            nbytes=t * v * esize + t * 8)


def bench_topk(rec, call, dt, shapes, esize):
    (t, v), (k,) = shapes[0], shapes[1]
    x = rand([t, v], dt, 8.0)
    ref = torch.topk(x.float(), k, dim=-1, sorted=True).values
    rec.run(call, "torch", lambda: torch.topk(x, k, dim=-1, sorted=True),
            lambda: relerr(torch.topk(x, k, dim=-1, sorted=True).values, ref),
            nbytes=t * v * esize + t * k * (esize + 8))


def bench_rms_norm_backward(rec, call, dt, shapes, esize):
    """[x] (w is [cols]): torch autograd of F.rms_norm; the check is dx against float32 autograd."""
    x_shape = shapes[0]
    cols = x_shape[-1]
    x = rand(x_shape, dt, 2.0).requires_grad_(True)
    w = (rand([cols], dt, 0.5).float() + 1.0).to(dt).requires_grad_(True)
    dy = rand(x_shape, dt)
    y = F.rms_norm(x, (cols,), w, EPS)
    xf, wf = x.detach().float().requires_grad_(True), w.detach().float().requires_grad_(True)
    ref = torch.autograd.grad(F.rms_norm(xf, (cols,), wf, EPS), (xf, wf), dy.float())

    def run():
        return torch.autograd.grad(y, (x, w), dy, retain_graph=True)

    def check():
        dx, dw = run()
        return max(relerr(dx, ref[0]), relerr(dw, ref[1]))
    n = math.prod(x_shape)
    rec.run(call, "torch", run, check, nbytes=5 * n * esize)


def bench_layer_norm_backward(rec, call, dt, shapes, esize):
    """[x] (w, b are [cols]; mean, rstd from torch.native_layer_norm): aten's backward kernel."""
    x_shape = shapes[0]
    cols = x_shape[-1]
    x = rand(x_shape, dt, 2.0)
    w = (rand([cols], dt, 0.5).float() + 1.0).to(dt)
    b = rand([cols], dt)
    dy = rand(x_shape, dt)
    _, mean, rstd = torch.native_layer_norm(x, [cols], w, b, EPS)
    xf = x.float().requires_grad_(True)
    wf, bf = w.float().requires_grad_(True), b.float().requires_grad_(True)
    ref = torch.autograd.grad(F.layer_norm(xf, (cols,), wf, bf, EPS), (xf, wf, bf), dy.float())
    mask = [True, True, True]

    def run():
        return torch.ops.aten.native_layer_norm_backward(dy, x, [cols], mean, rstd, w, b, mask)

    def check():
        got = run()
        return max(relerr(g, r) for g, r in zip(got, ref))
    n = math.prod(x_shape)
    rec.run(call, "torch", run, check, nbytes=5 * n * esize)


DROPOUT_P = 0.1  # cutile_kernels::dropout::SPEC_PARAMS.p


def bench_dropout(rec, call, dt, shapes, esize):
    """[x]: F.dropout(x, 0.1, training=True). torch's mask cannot match ours (another RNG layout), so
    the check is statistical: kept values must be x / (1 - p) exactly (relative error), and the keep
    rate within 5σ of 1 - p (reported as an error of 1 when it is not)."""
    x_shape = shapes[0]
    x = rand(x_shape, dt, 2.0)
    p = DROPOUT_P

    def run():
        return F.dropout(x, p, training=True)

    def check():
        y = run()
        kept = y != 0
        n = max(y.numel(), 1)
        rate = float(kept.sum()) / n
        sigma = math.sqrt((1 - p) * p / n)
        if abs(rate - (1 - p)) > 5 * sigma + 1.0 / n:
            return 1.0
        return relerr(y[kept], x[kept].float() / (1 - p))
    rec.run(call, "torch", run, check, nbytes=2 * math.prod(x_shape) * esize)
# The fp8 GEMM ops (gemm::fp8::OPS) and their fp8 element types.
FP8_OPS = ("gemm_fp8_tensor", "gemm_fp8_row", "gemm_fp8_block")
FP8_DTYPES = {"f8e4m3": "float8_e4m3fn", "f8e4m3fn": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
              "float8_e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "e5m2": "float8_e5m2",
              "float8_e5m2": "float8_e5m2"}


def bench_gemm_fp8(rec, call):
    """torch._scaled_mm with the call's scales against an f64 reference of the same codes and scales,
    and bf16 torch.matmul (cuBLAS) of the same shape."""
    op = call["op"]
    (m, k), (_, n) = call["shapes"][0], call["shapes"][1]
    f8 = getattr(torch, FP8_DTYPES[call["dtype"]], None)
    flops = 2 * m * n * k
    if f8 is None:
        rec.skip(call, "torch", f"this torch has no {FP8_DTYPES[call['dtype']]}")
        return
    a = rand([m, k], torch.float32, 2.0).to(f8)
    w = rand([n, k], torch.float32, 1.0).to(f8)
    b = w.t()  # [k, n] column-major: what _scaled_mm wants
    kb, nb = -(-k // 128), -(-n // 128)
    if op == "gemm_fp8_tensor":
        sa = torch.tensor(0.5, device=DEV)
        sb = torch.tensor(0.75, device=DEV)
        ref_sa, ref_sb = sa.double(), sb.double()
    elif op == "gemm_fp8_row":
        sa = torch.rand(m, 1, device=DEV) * 0.75 + 0.25
        sb = torch.rand(1, n, device=DEV) * 0.75 + 0.25
        ref_sa, ref_sb = sa.double(), sb.double()
    else:
        sa = torch.rand(m, kb, device=DEV) * 0.75 + 0.25
        sb = torch.rand(kb, nb, device=DEV) * 0.75 + 0.25
    if op == "gemm_fp8_block":
        ad, bd = a.double(), b.double()
        ref = torch.zeros(m, n, device=DEV, dtype=torch.float64)
        for q in range(kb):
            part = ad[:, q * 128:(q + 1) * 128] @ bd[q * 128:(q + 1) * 128, :]
            sbq = sb[q].double().repeat_interleave(128)[:n]
            ref += part * sa[:, q:q + 1].double() * sbq[None, :]
        # cuBLASLt's block-scaled fp8 (newer torch, sm_90): scale_a outer-dim major, as it documents.
        scale_a, scale_b = sa.t().contiguous().t(), sb.t().contiguous().t()
    else:
        ref = (a.double() @ b.double()) * ref_sa * ref_sb
        scale_a, scale_b = sa, sb

    # A third shape [1] (or [1, l], l = 1: our sa M-major) asks for fast accumulation: the peer then
    # uses torch's use_fast_accum too.
    fast = len(call["shapes"]) > 2 and call["shapes"][2][:1] == [1]

    def fp8_fn():
        return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                                use_fast_accum=fast)
    rec.run(call, "torch", fp8_fn, lambda: relerr(fp8_fn(), ref), flops=flops,
            cfg="torch._scaled_mm " + op.removeprefix("gemm_fp8_") + (" use_fast_accum" if fast else ""))
    ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16)
    c = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    ref16 = ab.double() @ bb.double()
    rec.run(call, "cublas-bf16", lambda: torch.matmul(ab, bb, out=c), lambda: relerr(c, ref16), flops=flops)


# The GEMM epilogue ops: (bias, activation, residual, f32 output), as gemm::epilogue::OPS.
EPILOGUE_OPS = {
    "gemm_splitk": (False, None, False, False),
    "gemm_bias": (True, None, False, False),
    "gemm_bias_gelu": (True, "gelu", False, False),
    "gemm_bias_gelu_tanh": (True, "gelu_tanh", False, False),
    "gemm_bias_silu": (True, "silu", False, False),
    "gemm_residual": (False, None, True, False),
    "gemm_bias_gelu_residual": (True, "gelu", True, False),
    "gemm_f32_out": (False, None, False, True),
    "gemm_bias_silu_f32_out": (True, "silu", False, True),
}


def bench_gemm_epilogue(rec, call, dt, shapes):
    bias_on, act, res_on, out_f32 = EPILOGUE_OPS[call["op"]]
    torch.backends.cuda.matmul.allow_tf32 = dt == torch.float32
    (m, k), (_, n) = shapes[0], shapes[1]
    a, b = rand([m, k], dt), rand([k, n], dt)
    w = b.t().contiguous()  # a Linear weight [n, k]: F.linear(a, w) = a @ b
    bias = rand([n], dt) if bias_on else None
    res = rand([m, n], torch.float32 if out_f32 else dt) if res_on else None

    def epi(y):
        if act == "gelu":
            y = F.gelu(y)
        elif act == "gelu_tanh":
            y = F.gelu(y, approximate="tanh")
        elif act == "silu":
            y = F.silu(y)
        if out_f32:
            y = y.float()
        if res is not None:
            y = y + res
        return y

    def fn():
        return epi(F.linear(a, w, bias))

    def ref():
        y = a.double() @ b.double()
        if bias is not None:
            y = y + bias.double()
        if act == "gelu":
            y = F.gelu(y)
        elif act == "gelu_tanh":
            y = F.gelu(y, approximate="tanh")
        elif act == "silu":
            y = F.silu(y)
        if res is not None:
            y = y + res.double()
        return y

    want = ref()
    out = {}
    rec.run(call, "torch", lambda: out.__setitem__("y", fn()), lambda: relerr(out["y"], want),
            flops=2 * m * n * k)
    if call["op"] == "gemm_splitk":
        c = torch.empty(m, n, device=DEV, dtype=dt)
        rec.run(call, "cublas", lambda: torch.matmul(a, b, out=c), lambda: relerr(c, want),
                flops=2 * m * n * k)
    torch.backends.cuda.matmul.allow_tf32 = False


def bench_cross_entropy(rec, call, dt, shapes, esize):
    """[[T, H], [V], [dx, dw, dw_f32, i64, sum, ignore_every?, chunk?]] (cutile_kernels::cross_entropy::
    described_call): F.cross_entropy(F.linear(x, w), target) forward and backward in torch eager."""
    (t, h), (v,) = shapes[0], shapes[1]
    sw = (shapes[2] if len(shapes) > 2 else [1, 1, 1, 1, 0]) + [8, 0]
    want_dx, want_dw, dw_f32, _, red_sum, every, _ = (bool(sw[0]), bool(sw[1]), bool(sw[2]), sw[3],
                                                     bool(sw[4]), sw[5], sw[6])
    red = "sum" if red_sum else "mean"
    x = rand([t, h], dt).requires_grad_(want_dx)
    w = rand([v, h], dt, 0.5).requires_grad_(want_dw)
    tgt = torch.randint(0, v, (t,), device=DEV)
    if every > 0:
        tgt[every - 1::every] = -100
    wrt = [p for p, on in ((x, want_dx), (w, want_dw)) if on]

    def run():
        loss = F.cross_entropy(F.linear(x, w), tgt, ignore_index=-100, reduction=red)
        if wrt:
            return [loss] + list(torch.autograd.grad(loss, wrt))
        return [loss]

    xf = x.detach().float().requires_grad_(want_dx)
    wf = w.detach().float().requires_grad_(want_dw)
    ref = None

    def check():
        nonlocal ref
        if ref is None:
            lf = F.cross_entropy(F.linear(xf, wf), tgt, ignore_index=-100, reduction=red)
            wrtf = [p for p, on in ((xf, want_dx), (wf, want_dw)) if on]
            ref = [lf.detach()] + (list(torch.autograd.grad(lf, wrtf)) if wrtf else [])
        return max(relerr(g, r) for g, r in zip(run(), ref))

    def peak():
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        peak_extra = torch.cuda.max_memory_allocated() - base
        # The harness writes the scratch our planner sizes for the call (bench-calls.json).
        ours = call.get("scratch_bytes", 0)
        print(f"{call['name']}: peak memory above inputs: torch {peak_extra / 2**20:.1f} MiB, "
              f"ours (scratch, planned) {ours / 2**20:.1f} MiB; logits T x V x {esize} = "
              f"{t * v * esize / 2**20:.1f} MiB", flush=True)
        return dict(peak_mem_bytes=peak_extra, ours_scratch_bytes=ours, logits_bytes=t * v * esize)
    products = 1 + int(want_dx) + int(want_dw)
    rec.run(call, "torch", run, check, flops=2 * t * h * v * products, extra=peak)


def bench_attention_backward(rec, call, dt, shapes, esize):
    """attention_backward: [q, k] (3-D [BH, S, D] or 4-D [B, H, S, D], GQA when k has fewer heads; causal
    top-left). Peers: SDPA forward once per backend (cuDNN, flash) with autograd, then only the backward
    timed (torch.autograd.grad of the output with a fixed dO, retain_graph). FLOPs: 2.5x the forward's
    (4 * pairs * D), i.e. five matmuls per tile (QK^T, dO V^T, P^T dO, dS^T Q, dS K), the FlashAttention
    convention, the same as the harness's row. Checked against float32 autograd of the math backend
    (dq, dk, dv; the largest relative error)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q_shape, k_shape = shapes[0], shapes[1]
    causal = call.get("causal", False)
    q, k, v, do = rand(q_shape, dt), rand(k_shape, dt), rand(k_shape, dt), rand(q_shape, dt)
    if len(q_shape) == 3:  # [BH, S, D] -> [1, BH, S, D]
        q, k, v, do = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), do.unsqueeze(0)
    gqa = q.shape[1] != k.shape[1]
    sq, sk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    slices = q.shape[0] * q.shape[1]
    pairs = sum(min(i + 1, sk) for i in range(sq)) if causal else sq * sk
    flops = 2.5 * 4 * slices * pairs * d
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        of = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal, enable_gqa=gqa)
    ref = torch.autograd.grad(of, (qf, kf, vf), do.float())
    del of
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        state = {}

        def fn(backend=backend, state=state):
            if "out" not in state:  # the forward once, outside the timing
                with sdpa_kernel(backend):
                    state["out"] = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
            with sdpa_kernel(backend):
                return torch.autograd.grad(state["out"], (q, k, v), do, retain_graph=True)

        def check(fn=fn):
            return max(relerr(g, r) for g, r in zip(fn(), ref))

        rec.run(call, name, fn, check, flops=flops)
        state.clear()
    torch.cuda.empty_cache()


TRANSFORMER_OPS = {
    "attention_backward": bench_attention_backward,
    "fused_linear_cross_entropy": bench_cross_entropy,
    "rms_norm_backward": bench_rms_norm_backward,
    "layer_norm_backward": bench_layer_norm_backward,
    "dropout": bench_dropout,
    "dropout_backward": bench_dropout,
    "rope": bench_rope,
    "kv_cache_write": bench_kv_cache,
    "kv_cache_write_paged": bench_kv_cache,
    "embedding": bench_embedding,
    "argmax": bench_argmax,
    "topk": bench_topk,
}


@functools.lru_cache(maxsize=None)  # read once: the file is rewritten after every call
def smi_env():
    """Clocks, power limit, driver and temperature of the first visible GPU, from nvidia-smi."""
    env = {}
    q = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"
    try:
        import subprocess
        idx = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-i", idx],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        f = [x.strip() for x in out.split(",")]

        def num(i):
            try:
                return float(f[i])
            except (IndexError, ValueError):
                return None
        env = dict(driver=f[0] or None, sm_clock_mhz=num(1), max_sm_clock_mhz=num(2), mem_clock_mhz=num(3),
                   power_limit_w=num(4), temperature_c=num(5))
    except Exception:  # no nvidia-smi: the fields stay empty
        pass
    return env


def bench_file(rows, tk_path, calls_path):
    """The rows in the `cutile-bench` schema (one row per implementation and config)."""
    out = []
    for r in rows:
        ms = r.get("ms")
        err = r.get("error") or r.get("skipped")
        out.append(dict(
            name=r["name"], op=r["op"], dtype=r["dtype"], shapes=r["shapes"], causal=r.get("causal", False),
            layout="Contiguous", impl=r["impl"], cfg=r.get("cfg"),
            median_us=(ms or 0.0) * 1e3, min_us=(r.get("p10") or 0.0) * 1e3, p90_us=(r.get("p90") or 0.0) * 1e3,
            samples=0, bytes=r.get("nbytes"), flops=r.get("flops"),
            throughput=r.get("GBps") or r.get("TFLOPs") or 0.0, unit="GB/s" if r.get("nbytes") else "TFLOP/s",
            l2_flushed=True, rel_err=r.get("relerr"), error=err if ms is None else None,
            **{k: r[k] for k in ("peak_mem_bytes", "ours_scratch_bytes", "logits_bytes") if k in r}))
    env = dict(device=torch.cuda.get_device_name(0), arch="sm_%d%d" % torch.cuda.get_device_capability(0),
               visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
               notes=dict(torch=torch.__version__, triton=triton.__version__, triton_kernels=str(tk_path),
                          calls=calls_path, timing=f"do_bench procedure: CUDA events, L2 flushed ({FLUSH_MODE}), median",
                          l2_flush=FLUSH_MODE))
    env.update(smi_env())
    return dict(schema="cutile-bench", schema_version=SCHEMA_VERSION, producer="peers.py", env=env, rows=out)


def write(path, rows, tk_path, calls_path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(bench_file(rows, tk_path, calls_path), f, indent=1)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="JSON file to write")
    ap.add_argument("--calls", required=True, help="bench-calls.json written by gpu-harness (bench or calls)")
    ap.add_argument("--triton-kernels", default=None, help="path of tr_kernels.py (imported at run time)")
    ap.add_argument("--ops", default="", help="only these ops, comma-separated")
    args = ap.parse_args()

    with open(args.calls) as f:
        calls = json.load(f)
    if args.ops:
        keep = set(args.ops.split(","))
        calls = [c for c in calls if c["op"] in keep]
    tk, tk_path = load_triton_kernels(args.triton_kernels)
    print(f"{len(calls)} calls; triton kernels: {tk_path or 'not found'}", flush=True)
    rec = Recorder()
    for call in calls:
        if call.get("layout", "Contiguous") != "Contiguous":
            rec.skip(call, "-", "view layouts are not benchmarked")
            continue
        bench_call(rec, call, tk)
        torch.cuda.empty_cache()
        # Rewritten after every call: a run stopped by a time limit keeps what it measured.
        write(args.out, rec.rows, tk_path, args.calls)

    write(args.out, rec.rows, tk_path, args.calls)
    print(f"{'call':52} {'impl':24} {'cfg':12} {'ms':>9} {'GB/s':>8} {'TF/s':>7} {'relerr':>9}")
    for r in rec.rows:
        if "ms" not in r:
            print(f"{r['name']:52} {r['impl']:24} {'':12} {r.get('error') or r.get('skipped')}")
            continue
        print(f"{r['name']:52} {r['impl']:24} {r['cfg'] or '':12} {r['ms']:9.4f} {r.get('GBps', 0):8.1f} "
              f"{r.get('TFLOPs', 0):7.1f} {r['relerr']:9.2e}")
    return 0 if all("error" not in r for r in rec.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
