"""Regenerate the cuTile Python reference IR for the softmax / RMSNorm / LayerNorm and GEMM kernels.

Usage (no GPU needed):
    python3 -m pip install cuda-tile==1.7.0
    cargo xtask toolchain            # installs tileirdisasm next to tileiras
    python3 gen_reference.py [TILEIRDISASM] [OUT_DIR] [NAME_PREFIX ...]   # prefixes: only those fixtures

For every (kernel, dtype, shape) below it compiles the kernel to Tile IR bytecode 13.5 for sm_90 with cuTile's
own front end (`cuda.tile._compile.compile_tile`, bytecode only, no tileiras), with the array facts cuTile
infers at launch from contiguous torch tensors (16-byte aligned base, unit last stride, extents and strides
divisible by the largest power of two <= 16 dividing them), and writes the text form printed by
`tileirdisasm` as `<name>.mlir`, keeping the bytecode as `<name>.tilebc` (what the tests read). The kernels are copied from the project's
`../shared/bench/reference/ct_kernels.py` (beside the checkout) (the forms measured in `docs/anchors.md`), with the launch
arguments `bench.py` uses.
"""
import math
import os
import subprocess
import sys

import cuda.tile as ct
from cuda.tile import RoundingMode as RMd
from cuda.tile._bytecode.version import BytecodeVersion
from cuda.tile._compile import compile_tile
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature

ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]
PAD_ZERO = ct.PaddingMode.ZERO


@ct.kernel
def ct_softmax_gather(out, inp, N: ConstInt, TILE_N: ConstInt):
    r = ct.bid(0)
    offs = ct.arange(TILE_N, dtype=ct.int32)
    chk = TILE_N != N
    row = ct.gather(inp, (r, offs), check_bounds=chk, padding_value=-math.inf)
    row = ct.astype(row, ct.float32)
    mx = ct.max(row, 0, keepdims=True)
    num = ct.exp(row - mx, rounding_mode=RMd.APPROX)
    den = ct.sum(num, 0, keepdims=True)
    y = ct.truediv(num, den, rounding_mode=RMd.APPROX, flush_to_zero=True)
    ct.scatter(out, (r, offs), ct.astype(y, out.dtype), check_bounds=chk)


@ct.kernel
def ct_softmax_persist(out, inp, N_ROWS: ConstInt, TILE_M: ConstInt, TILE_N: ConstInt):
    pid = ct.bid(0)
    nprog = ct.num_blocks(0)
    n_tiles = ct.cdiv(N_ROWS, TILE_M)
    for t in range(pid, n_tiles, nprog):
        row = ct.load(inp, index=(t, 0), shape=(TILE_M, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
        row = ct.astype(row, ct.float32)
        mx = ct.max(row, 1, keepdims=True)
        num = ct.exp(row - mx, rounding_mode=RMd.APPROX)
        den = ct.sum(num, 1, keepdims=True)
        y = ct.truediv(num, den, rounding_mode=RMd.APPROX, flush_to_zero=True)
        ct.store(out, index=(t, 0), tile=ct.astype(y, out.dtype))


@ct.kernel
def ct_rmsnorm_row(X, Y, W, N: ConstInt, EPS: ConstFloat, TILE_N: ConstInt):
    row = ct.bid(0)
    offs = ct.arange(TILE_N, dtype=ct.int32)
    chk = TILE_N != N
    x = ct.astype(ct.gather(X, (row, offs), check_bounds=chk, latency=1), ct.float32)
    r = ct.rsqrt(ct.sum(x * x, axis=0, keepdims=False) / N + EPS)
    w = ct.astype(ct.gather(W, offs, check_bounds=chk, latency=1), ct.float32)
    ct.scatter(Y, (row, offs), ct.astype(x * r * w, X.dtype), check_bounds=chk, latency=1)


@ct.kernel
def ct_rmsnorm_persist(X, Y, W, TILE_M: ConstInt, TILE_N: ConstInt, EPS: ConstFloat):
    bid = ct.bid(0)
    M = X.shape[0]
    N = X.shape[1]
    upper = (M + TILE_M - 1) // TILE_M
    w = ct.load(W, index=(0,), shape=(TILE_N,), padding_mode=PAD_ZERO)
    w = ct.reshape(ct.astype(w, ct.float32), (1, TILE_N))
    nblk = ct.num_blocks(0)
    for cur in range(bid, upper, nblk):
        x = ct.load(X, index=(cur, 0), shape=(TILE_M, TILE_N), padding_mode=PAD_ZERO, latency=10)
        x = ct.astype(x, ct.float32)
        ss = ct.sum(x * x, axis=1, keepdims=True)
        r = ct.rsqrt(ss / (N * 1.0) + EPS)
        y = x * r * w
        ct.store(Y, index=(cur, 0), tile=ct.astype(y, X.dtype), allow_tma=False, latency=3)


@ct.kernel
def ct_layernorm_persist(X, Y, W, B, D: ConstInt, EPS: ConstFloat, BLOCK_N: ConstInt, BLOCK_D: ConstInt):
    pid = ct.bid(0)
    nprog = ct.num_blocks(0)
    upper = ct.cdiv(X.shape[0], BLOCK_N)
    w = ct.astype(ct.load(W, index=(0,), shape=(BLOCK_D,), padding_mode=PAD_ZERO), ct.float32)
    b = ct.astype(ct.load(B, index=(0,), shape=(BLOCK_D,), padding_mode=PAD_ZERO), ct.float32)
    for cur in range(pid, upper, nprog):
        x = ct.load(X, index=(cur, 0), shape=(BLOCK_N, BLOCK_D), padding_mode=PAD_ZERO, latency=4)
        x = ct.astype(x, ct.float32)
        mean = ct.sum(x, axis=1, keepdims=True) / D
        xc = x - mean
        var = ct.sum(xc * xc, axis=1, keepdims=True) / D
        rstd = ct.rsqrt(var + EPS)
        y = xc * rstd * w[None, :] + b[None, :]
        ct.store(Y, index=(cur, 0), tile=ct.astype(y, Y.dtype), allow_tma=False)


def _grouped_tile(tile, num_m, num_n, group):
    """Output tile (row, col) of the `tile`-th tile in grouped order: `group` tile rows down, then one
    column right (the shared bench's `_swizzle_2d`; the last band may be shorter)."""
    per_band = group * num_n
    first_m = (tile // per_band) * group
    rows = min(num_m - first_m, group)
    return first_m + (tile % rows), (tile % per_band) // rows


@ct.kernel
def ct_matmul(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    # One output tile per block, grouped (2-D swizzled) order with 8 tile rows per band.
    bm, bn = _grouped_tile(ct.bid(0), ct.cdiv(A.shape[0], tm), ct.cdiv(B.shape[1], tn), 8)
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for kk in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        ta = ct.load(A, index=(bm, kk), shape=(tm, tk), padding_mode=PAD_ZERO)
        tb = ct.load(B, index=(kk, bn), shape=(tk, tn), padding_mode=PAD_ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))


@ct.kernel
def ct_matmul_persist(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt, GROUP_SIZE_M: ConstInt):
    # Persistent: block p computes tiles p, p + grid, ... in grouped order.
    num_m = ct.cdiv(A.shape[0], tm)
    num_n = ct.cdiv(B.shape[1], tn)
    k_tiles = ct.cdiv(A.shape[1], tk)
    for tile in range(ct.bid(0), num_m * num_n, ct.num_blocks(0)):
        per_band = GROUP_SIZE_M * num_n
        first_m = (tile // per_band) * GROUP_SIZE_M
        rows = ct.minimum(num_m - first_m, GROUP_SIZE_M)
        bm = first_m + (tile % rows)
        bn = (tile % per_band) // rows
        acc = ct.full((tm, tn), 0.0, dtype=ct.float32)
        for kk in range(k_tiles):
            ta = ct.load(A, index=(bm, kk), shape=(tm, tk), padding_mode=PAD_ZERO)
            tb = ct.load(B, index=(kk, bn), shape=(tk, tn), padding_mode=PAD_ZERO)
            acc = ct.mma(ta, tb, acc=acc)
        ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))


DT = {"bf16": ct.bfloat16, "f16": ct.float16, "f32": ct.float32}


def p2div(v):
    """Largest power of two <= 16 dividing v (cuTile's launch-time divisibility fact)."""
    d = 1
    while d < 16 and v % (2 * d) == 0:
        d *= 2
    return d


def arr(dt, shape):
    strides = [int(math.prod(shape[i + 1:])) for i in range(len(shape))]
    return ArrayConstraint(DT[dt], len(shape), index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=(None,) * (len(shape) - 1) + (1,),
                           shape_divisible_by=[p2div(s) for s in shape],
                           stride_divisible_by=[p2div(s) for s in strides],
                           base_addr_divisible_by=16)


def next_p2(n):
    return 1 << (n - 1).bit_length()


def cases():
    """(file name, kernel, parameters, hint overrides) for every fixture."""
    out = []
    sm_shapes = [(8192, 8192), (4096, 4096), (32768, 1024), (1024, 32768), (16, 131072)]
    for dt in ("bf16",):
        for m, n in sm_shapes:
            out.append((f"softmax_gather_{dt}_{m}x{n}", ct_softmax_gather,
                        [arr(dt, [m, n]), arr(dt, [m, n]), n, next_p2(n)], {}))
    for dt in ("f16", "f32"):
        out.append((f"softmax_gather_{dt}_8192x8192", ct_softmax_gather,
                    [arr(dt, [8192, 8192]), arr(dt, [8192, 8192]), 8192, 8192], {}))
    # A ragged width: the bounds check is on (TILE_N != N).
    out.append(("softmax_gather_bf16_37x1000", ct_softmax_gather,
                [arr("bf16", [37, 1000]), arr("bf16", [37, 1000]), 1000, 1024], {}))
    out.append(("softmax_persist_bf16_8192x8192", ct_softmax_persist,
                [arr("bf16", [8192, 8192]), arr("bf16", [8192, 8192]), 8192, 1, 8192], {"occupancy": 2}))
    norm_shapes = [(16384, 8192), (8192, 1024), (4096, 4096)]
    for m, n in norm_shapes:
        dt = "bf16"
        out.append((f"rmsnorm_row_{dt}_{m}x{n}", ct_rmsnorm_row,
                    [arr(dt, [m, n]), arr(dt, [m, n]), arr(dt, [n]), n, 1e-6, next_p2(n)], {}))
        tm = 16 if n <= 1024 else 4
        out.append((f"rmsnorm_persist_{dt}_{m}x{n}", ct_rmsnorm_persist,
                    [arr(dt, [m, n]), arr(dt, [m, n]), arr(dt, [n]), tm, n, 1e-6], {}))
        bn = 16 if n <= 1024 else (2 if n >= 8192 else 4)
        out.append((f"layernorm_persist_{dt}_{m}x{n}", ct_layernorm_persist,
                    [arr(dt, [m, n]), arr(dt, [m, n]), arr(dt, [n]), arr(dt, [n]), n, 1e-5, bn, n], {}))
    for dt in ("f16", "f32"):
        out.append((f"rmsnorm_row_{dt}_8192x1024", ct_rmsnorm_row,
                    [arr(dt, [8192, 1024]), arr(dt, [8192, 1024]), arr(dt, [1024]), 1024, 1e-6, 1024], {}))
        out.append((f"layernorm_persist_{dt}_8192x1024", ct_layernorm_persist,
                    [arr(dt, [8192, 1024]), arr(dt, [8192, 1024]), arr(dt, [1024]), arr(dt, [1024]),
                     1024, 1e-5, 16, 1024], {}))
    out.append(("rmsnorm_row_bf16_37x1000", ct_rmsnorm_row,
                [arr("bf16", [37, 1000]), arr("bf16", [37, 1000]), arr("bf16", [1000]), 1000, 1e-6, 1024], {}))
    out.append(("layernorm_persist_bf16_16384x8192_nww8", ct_layernorm_persist,
                [arr("bf16", [16384, 8192]), arr("bf16", [16384, 8192]), arr("bf16", [8192]),
                 arr("bf16", [8192]), 8192, 1e-5, 2, 8192], {"num_worker_warps": 8}))
    # GEMM (bench.py `exp_gemm`): bf16, square, contiguous row-major A [M, K], B [K, N], C [M, N].
    nww8 = {"occupancy": 1, "num_worker_warps": 8}
    for s in (4096, 8192):
        ops = [arr("bf16", [s, s]), arr("bf16", [s, s]), arr("bf16", [s, s])]
        out.append((f"matmul_bf16_{s}_128x256x64_nww8", ct_matmul, ops + [128, 256, 64], nww8))
        out.append((f"matmul_bf16_{s}_128x128x64_occ1", ct_matmul, ops + [128, 128, 64], {"occupancy": 1}))
        out.append((f"matmul_persist_bf16_{s}_128x256x64_nww8", ct_matmul_persist, ops + [128, 256, 64, 8], nww8))
        out.append((f"matmul_persist_bf16_{s}_128x128x64_occ1", ct_matmul_persist, ops + [128, 128, 64, 8],
                    {"occupancy": 1}))
        out.append((f"matmul_persist_bf16_{s}_256x256x64_nww8_cta2", ct_matmul_persist, ops + [256, 256, 64, 8],
                    dict(nww8, num_ctas=2)))
    return out


def main():
    disasm = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/cutile/toolchain/13.5.37/nvidia/cu13/bin/tileirdisasm")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    cc = CallingConvention.cutile_python_v1()
    bv = BytecodeVersion(13 * 10000 + 5 * 100)
    only = sys.argv[3:]
    for name, kern, params, hints in cases():
        if only and not any(name.startswith(p) for p in only):
            continue
        k = kern.replace_hints(**hints) if hints else kern
        res = compile_tile(k._annotated_function, [KernelSignature(params, cc, symbol=name)], sm_arch="sm_90",
                           compiler_options=k._compiler_options, return_bytecode=True, return_cubin=False,
                           bytecode_version=bv)
        bc = os.path.join(out_dir, name + ".tilebc")
        with open(bc, "wb") as f:
            f.write(res.bytecode)
        text = subprocess.run([disasm, bc], check=True, capture_output=True, text=True).stdout
        with open(os.path.join(out_dir, name + ".mlir"), "w") as f:
            f.write(text)
        print(name, len(res.bytecode), "bytes")


main()
