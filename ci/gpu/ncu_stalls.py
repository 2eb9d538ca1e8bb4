#!/usr/bin/env python3
"""Read the source pages `ci/gpu/ncu-call.sh` writes (`{call,peer}.source.csv[.xz]`, ncu's SASS view
with stall sampling) and print, for the first kernel of each file: the warp stall reasons over all
samples, the instructions with the most samples (with their main reason), and the executed
instruction mix by opcode. Session 43 read our attention prefill and fp8 GEMM beside cuDNN and cuBLAS
with it (`docs/attention.md`, `docs/gemm.md`).

    python3 ci/gpu/ncu_stalls.py call.source.csv.xz peer.source.csv.xz [--top N]
"""
import argparse
import collections
import csv
import lzma


def kernels(path):
    """The per-kernel sections of one source page: [(name, header, rows)]."""
    opener = lzma.open if path.endswith(".xz") else open
    out = []
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for r in rows:
        if r and r[0] == "Kernel Name":
            out.append([r[1], None, []])
        elif r and r[0] == "Address" and out:
            out[-1][1] = r
        elif out and out[-1][1] and len(r) == len(out[-1][1]):
            out[-1][2].append(r)
    return out


def report(path, top):
    secs = kernels(path)
    print(f"{path}: {len(secs)} kernel launches; first: {secs[0][0]}")
    _, hdr, rows = secs[0]
    col = {k: i for i, k in enumerate(hdr)}
    samples = col["Warp Stall Sampling (All Samples)"]
    reasons = [k for k in hdr if k.startswith("stall_") and "Not Issued" not in k]
    num = lambda r, k: int(r[col[k]] or 0)
    sampled = lambda r: int(r[samples] or 0)
    total = sum(map(sampled, rows))
    by_reason = collections.Counter({k: sum(num(r, k) for r in rows) for k in reasons})
    print(f"  {total} samples over {len(rows)} instructions")
    for k, v in by_reason.most_common(10):
        print(f"  {k:<24} {v:>7} {100 * v / max(total, 1):5.1f}%")
    print("  instructions with the most samples:")
    for r in sorted(rows, key=sampled, reverse=True)[:top]:
        main = max(reasons, key=lambda k: num(r, k))
        print(f"  {r[samples]:>7}  {r[0][-5:]}  {r[1].strip()[:60]:<60} {main}")
    mix = collections.Counter()
    for r in rows:
        words = r[1].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        mix[op.split(".")[0]] += num(r, "Instructions Executed")
    print("  executed warp instructions by opcode:", mix.most_common(16))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args()
    for p in args.pages:
        report(p, args.top)


if __name__ == "__main__":
    main()
