"""One timing method for the ceiling scripts (inplace_ceiling.py, read_ceiling.py): the harness's.

CUDA events around one call, median of `reps`, after a 256 MiB read (`_flush.sum()`) that leaves the L2
cold and clean, as `cutile::runtime::timing::L2Flush` does by default.
"""
import torch

_flush = None


def median_us(fn, reps=60):
    global _flush
    if _flush is None:
        _flush = torch.zeros(64 << 20, dtype=torch.float32, device="cuda")
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        _flush.sum()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]
