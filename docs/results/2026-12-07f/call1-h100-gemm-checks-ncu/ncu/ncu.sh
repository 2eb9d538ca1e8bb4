#!/usr/bin/env bash
# Session 43: our attention prefill and fp8 per-tensor 4096^3 under ncu beside cuDNN / cuBLAS.
set -u
Q=.gpu/q2
xz -dc $Q/gh.xz >/tmp/gh && chmod +x /tmp/gh
xz -dc $Q/q.bundle.xz >/tmp/q.bundle
export CUTILE_CACHE_DIR=/tmp/kcache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv >"$OUT/smi.txt"
which ncu >"$OUT/ncu-version.txt" 2>&1; ncu --version >>"$OUT/ncu-version.txt" 2>&1
A=$OUT/att; F=$OUT/fp8; mkdir -p "$A" "$F"
OUT=$A NCU_OPS=attention NCU_CALL='attention bf16 [4, 32, 4096, 128] [4, 32, 4096, 128]' \
  NCU_KERNEL=regex:flash_attention NCU_COUNT=4 NCU_BUDGET=${NB:-110} NCU_PEER_KERNEL='regex:sdpa|fmha|flash|attn' \
  NCU_PEER="from torch.nn.attention import sdpa_kernel, SDPBackend
q = torch.randn(4, 32, 4096, 128, device='cuda', dtype=torch.bfloat16)
k = torch.randn_like(q); v = torch.randn_like(q)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for c in (False, True):
        F.scaled_dot_product_attention(q, k, v, is_causal=c)
torch.cuda.synchronize()" bash ci/gpu/ncu-call.sh 2>&1 | tee "$A/summary.txt"
OUT=$F NCU_OPS=gemm_fp8_tensor NCU_CALL='gemm_fp8_tensor f8e4m3 [4096, 4096] [4096, 4096]' \
  NCU_KERNEL=regex:gemm_fp8 NCU_COUNT=4 NCU_BUDGET=${NB:-110} NCU_PEER_KERNEL='regex:gemm|nvjet|xmma|cutlass' \
  NCU_PEER="a = torch.randn(4096, 4096, device='cuda').to(torch.float8_e4m3fn)
w = torch.randn(4096, 4096, device='cuda').to(torch.float8_e4m3fn)
s = torch.tensor(1.0, device='cuda')
for fast in (False, True):
    torch._scaled_mm(a, w.t(), scale_a=s, scale_b=s, out_dtype=torch.bfloat16, use_fast_accum=fast)
torch.cuda.synchronize()" bash ci/gpu/ncu-call.sh 2>&1 | tee "$F/summary.txt"
# The reports are large: keep the text pages, compressed.
find "$OUT" -name '*.ncu-rep' -delete
find "$OUT" -name '*.txt' -size +200k -exec xz -9 {} \;
find "$OUT" -name '*.csv' -exec xz -9 {} \;
ls -laR "$OUT" | head -40
