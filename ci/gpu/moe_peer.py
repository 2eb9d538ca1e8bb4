"""The torch peer of examples/src/bin/nvfp4_moe.rs (issue 12): a bf16 MoE layer as a loop of torch.matmul
over the experts, with softmax top-k routing (renormalized), for the example's layers and token counts.

    python3 ci/gpu/moe_peer.py          # one line per (layer, T): median µs, CUDA events, L2 flushed
    NVFP4_MOE_TOKENS=1024,4096 python3 ci/gpu/moe_peer.py   # other token counts (as the example reads them)

Run it in the same device command as the example so the two are measured on the same machine state.
Routing comes from random logits like the example's (its own draw: the per-expert token counts have the
same distribution, not the same values).
"""
import torch
import torch.nn.functional as F
import os
import sys

# The same timing and L2 flush as peers.py and gpu-harness (`CUTILE_L2_FLUSH`, read by default).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import FLUSH_MODE, timed  # noqa: E402

LAYERS = [(8, 4096, 14336, 2), (128, 2048, 768, 8), (64, 2048, 1024, 8)]  # (E, H, I, top-k), as the example
TOKENS = [int(t) for t in os.environ.get("NVFP4_MOE_TOKENS", "1,16,64,4096").split(",")]


def layer(x, w13, w2, logits, k):
    probs = torch.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probs, k, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros(x.shape[0], w2.shape[1], device=x.device, dtype=torch.float32)
    inter = w13.shape[1] // 2
    for e in range(w13.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x[tok] @ w13[e].t()
        a = F.silu(h[:, :inter]) * h[:, inter:]
        y = a @ w2[e].t()
        out.index_add_(0, tok, y.float() * weights[tok, slot, None])
    return out.to(x.dtype)


def main():
    torch.manual_seed(0)
    for e, h, i, k in LAYERS:
        w13 = (torch.rand(e, 2 * i, h, device="cuda") * 0.1 - 0.05).to(torch.bfloat16)
        w2 = (torch.rand(e, h, i, device="cuda") * 0.1 - 0.05).to(torch.bfloat16)
        for t in TOKENS:
            x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
            logits = torch.rand(t, e, device="cuda") * 4 - 2
            ms = timed(lambda: layer(x, w13, w2, logits, k))[0]
            print(f"torch E={e} H={h} I={i} top-{k} T={t}: {ms * 1e3:.1f} µs per layer "
                  f"(bf16 weights, a matmul loop over the experts; median, L2 flushed ({FLUSH_MODE}))", flush=True)
        del w13, w2
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
