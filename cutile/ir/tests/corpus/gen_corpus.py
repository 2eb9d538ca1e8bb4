"""Generate the bytecode corpus in this folder with cuTile Python (no GPU needed).

Usage:  python3 gen_corpus.py [OUTDIR] [--only NAME[,NAME...]] [--versions 13.1,13.5]

Every kernel below is compiled once per bytecode version 13.1 ... 13.5 and written as
`NAME_v13_N.tilebc`. A kernel that cuTile refuses at some version (a feature too new for it) is reported and
skipped for that version only; the list of what was written is printed at the end.

Needs `pip install cuda-tile==1.7.0`. The kernels are small, made up for coverage of the op set the reader
and printer must handle; they are not meant to be useful programs.
"""

import argparse
import os
import sys
import traceback

import cuda.tile as ct
from cuda.tile._bytecode.version import BytecodeVersion
from cuda.tile._compile import compile_tile
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                   ScalarConstraint)

ConstInt = ct.Constant[int]

# ---------------------------------------------------------------------------------------------------------
# Kernels.
# ---------------------------------------------------------------------------------------------------------


@ct.kernel
def k_vadd(a, b, c, T: ConstInt):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) + ct.load(b, index=(i,), shape=(T,)))


@ct.kernel
def k_atomic_add(counts, x, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    s = ct.sum(t)
    ct.atomic_add(counts, (0,), s)


@ct.kernel
def k_atomic_ops(acc, idx, T: ConstInt):
    i = ct.bid(0)
    offs = ct.arange(T, dtype=ct.int32)
    v = ct.load(idx, index=(i,), shape=(T,))
    ct.atomic_max(acc, offs, v)
    ct.atomic_min(acc, offs, v, memory_order=ct.MemoryOrder.RELAXED)
    ct.atomic_or(acc, offs, v, memory_scope=ct.MemoryScope.BLOCK)
    ct.atomic_and(acc, offs, v)
    ct.atomic_xor(acc, offs, v, memory_order=ct.MemoryOrder.RELEASE)
    old = ct.atomic_xchg(acc, offs, v, memory_order=ct.MemoryOrder.ACQUIRE)
    ct.store(idx, index=(i,), tile=old)


@ct.kernel
def k_atomic_cas_lock(lock, data, out, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(data, index=(i,), shape=(T,))
    m = ct.max(t)
    ct.print("block", i, "max", m)
    while ct.atomic_cas(lock, (0,), 0, 1) == 1:
        pass
    cur = ct.load(out, index=(0,), shape=(1,))
    ct.store(out, index=(0,), tile=ct.maximum(cur, ct.reshape(m, (1,))))
    ct.atomic_xchg(lock, (0,), 0)


@ct.kernel
def k_print_assert(x, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.printf("block %d first %f\n", i, ct.extract(t, (0,), (1,)))
    ct.assert_(ct.sum(t) >= 0.0, "sum must be non-negative")
    ct.assert_(i >= 0)


@ct.kernel
def k_cumsum(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(1, T))
    ct.store(y, index=(i, 0), tile=ct.cumsum(t, axis=1))


@ct.kernel
def k_cumprod_rev(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.store(y, index=(i,), tile=ct.cumprod(t, axis=0, reverse=True))


def _maxop(a, b):
    return ct.maximum(a, b)


@ct.kernel
def k_custom_scan_reduce(x, y, z, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.store(y, index=(i,), tile=ct.scan(t, 0, _maxop, -1e30))
    r = ct.reduce(t, 0, _maxop, -1e30, keepdims=True)
    ct.store(z, index=(i,), tile=r)


@ct.kernel
def k_gather_scatter(src, idx, dst, T: ConstInt):
    i = ct.bid(0)
    ix = ct.load(idx, index=(i,), shape=(T,))
    v = ct.gather(src, ix, padding_value=0.0)
    ct.scatter(dst, ix, v * 2.0)


@ct.kernel
def k_gather_masked_2d(src, dst, T: ConstInt):
    i = ct.bid(0)
    r = ct.arange(T, dtype=ct.int32)
    rows = ct.reshape(r, (T, 1))
    cols = ct.reshape(r, (1, T))
    v = ct.gather(src, (rows, cols), mask=rows >= cols, check_bounds=False)
    ct.scatter(dst, (rows, cols), v, mask=rows < cols + i)


@ct.kernel
def k_while_loop(x, y, n, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    k = 0
    while k < n:
        t = t * 0.5 + 1.0
        k += 1
    ct.store(y, index=(i,), tile=t)


@ct.kernel
def k_if_else(x, y, flag, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    if flag > 0:
        t = t + 1.0
    elif flag < -3:
        t = t * 3.0
    else:
        t = t - 1.0
    if i % 2 == 0:
        ct.store(y, index=(i,), tile=t)


@ct.kernel
def k_int_ops(a, b, c, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    y = ct.load(b, index=(i,), shape=(T,))
    q = x // (y | 1)
    r = x % (y | 1)
    m = ct.maximum(x, y) - ct.minimum(x, y)
    w = ct.where(x > y, q, r) * m + ct.abs(x) - (-y)
    ct.store(c, index=(i,), tile=w)


@ct.kernel
def k_uint_ops(a, c, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    y = x % 7 + (x >> 1) * 3  # (cuTile 1.7 writes unsigned `//` as a floor divi that tileiras rejects)
    z = ct.maximum(y, x) >> 2
    ct.store(c, index=(i,), tile=z)


@ct.kernel
def k_bit_ops(a, c, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    y = (x << 3) ^ (x >> 1)
    y = (y & 0xFF) | ct.bitwise_not(x)
    f = ct.bitcast(y, ct.float32)
    ct.store(c, index=(i,), tile=ct.bitcast(f + 1.0, ct.int32))


@ct.kernel
def k_fp8_casts(a, b, c, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    e4 = x.astype(ct.float8_e4m3fn)
    e5 = x.astype(ct.float8_e5m2)
    ct.store(b, index=(i,), tile=e4)
    y = e4.astype(ct.float32) + e5.astype(ct.float32)
    ct.store(c, index=(i,), tile=y.astype(ct.bfloat16).astype(ct.float16))


@ct.kernel
def k_int_float_casts(a, b, c, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    n = x.astype(ct.int32)
    u = x.astype(ct.uint8)
    ct.store(b, index=(i,), tile=n.astype(ct.int64) + u.astype(ct.int64))
    ct.store(c, index=(i,), tile=(n.astype(ct.float64) * 2.0).astype(ct.float32))


@ct.kernel
def k_cast_rounding(a, c, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    ct.store(c, index=(i,), tile=x.astype(ct.float32, rounding_mode=ct.RoundingMode.RZ))


@ct.kernel
def k_matmul(A, B, C, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    bx = ct.bid(0)
    by = ct.bid(1)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(bx, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, by), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(bx, by), tile=acc.astype(C.dtype))


@ct.kernel
def k_matmul_int8(A, B, C, T: ConstInt):
    bx = ct.bid(0)
    a = ct.load(A, index=(bx, 0), shape=(T, T))
    b = ct.load(B, index=(0, 0), shape=(T, T))
    acc = ct.full((T, T), 0, dtype=ct.int32)
    acc = ct.mma(a, b, acc)
    ct.store(C, index=(bx, 0), tile=acc)


@ct.kernel
def k_matmul_fp8_transposed(A, B, C, T: ConstInt):
    bx = ct.bid(0)
    a = ct.load(A, index=(bx, 0), shape=(T, T))
    b = ct.load(B, index=(0, 0), shape=(T, T), order="F")
    c = ct.matmul(a, ct.transpose(b)).astype(ct.float32)
    ct.store(C, index=(bx, 0), tile=c)


@ct.kernel
def k_reductions(x, s, mx, mn, am, pr, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(4, T))
    ct.store(s, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(mx, index=(i,), tile=ct.max(t, axis=1, propagate_nan=True))
    ct.store(mn, index=(i,), tile=ct.min(t, axis=1))
    ct.store(am, index=(i,), tile=ct.argmax(t, axis=1))
    ct.store(pr, index=(i,), tile=ct.prod(t, axis=1))


@ct.kernel
def k_softmax_fast(x, y, T: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, T), padding_mode=ct.PaddingMode.NEG_INF)
    m = ct.max(t, axis=1, keepdims=True, flush_to_zero=True)
    e = ct.exp2((t - m) * 1.4426950408889634, flush_to_zero=True)
    s = ct.sum(e, axis=1, keepdims=True, flush_to_zero=True)
    r = ct.truediv(e, s, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    ct.store(y, index=(row, 0), tile=r)


@ct.kernel
def k_softmax_exp_approx(x, y, T: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, T), padding_mode=ct.PaddingMode.NEG_INF)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m, rounding_mode=ct.RoundingMode.APPROX)
    s = ct.sum(e, axis=1, keepdims=True)
    ct.store(y, index=(row, 0), tile=ct.truediv(e, s, rounding_mode=ct.RoundingMode.FULL))


@ct.kernel
def k_persistent(x, y, n_tiles, T: ConstInt):
    start = ct.bid(0)
    step = ct.num_blocks(0)
    for t in range(start, n_tiles, step):
        v = ct.load(x, index=(t,), shape=(T,))
        ct.store(y, index=(t,), tile=ct.sqrt(v * v + 1.0))


@ct.kernel
def k_math(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    u = ct.sin(t) + ct.cos(t) + ct.tanh(t) + ct.log(ct.abs(t) + 1.0) + ct.log2(t * t + 1.0)
    u = u + ct.floor(t) + ct.ceil(t) + ct.rsqrt(t * t + 1.0) + ct.pow(t, 2.0)
    u = ct.where(ct.isnan(u), 0.0, u)
    ct.store(y, index=(i,), tile=ct.sinh(u) - ct.cosh(u) + ct.tan(u))


@ct.kernel
def k_atan2(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.store(y, index=(i,), tile=ct.atan2(t, t + 1.0))


@ct.kernel
def k_shapes(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(T, T))
    p = ct.permute(t, (1, 0))
    c = ct.cat((p, t), 0)
    e = ct.extract(c, (1, 0), (T, T))
    b = ct.broadcast_to(ct.reshape(ct.sum(e, axis=0), (1, T)), (T, T))
    ct.store(y, index=(i, 0), tile=b + ct.expand_dims(ct.arange(T, dtype=ct.float32), 0))


@ct.kernel
def k_memory_order(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,), memory_order=ct.MemoryOrder.ACQUIRE,
                memory_scope=ct.MemoryScope.DEVICE, latency=3)
    ct.store(y, index=(i,), tile=t, memory_order=ct.MemoryOrder.RELEASE, memory_scope=ct.MemoryScope.SYS,
             allow_tma=False)


@ct.kernel
def k_hints(x, y, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,), latency=5, allow_tma=True)
    ct.store(y, index=(i,), tile=t + 1.0, latency=2)


@ct.kernel(num_ctas=2, occupancy=2, num_worker_warps=4)
def k_kernel_options(x, y, T: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)) * 2.0)


@ct.kernel(occupancy=ct.ByTarget(sm_120=4, sm_100=1, default=2), num_ctas=ct.ByTarget(sm_100=4),
           opt_level=ct.ByTarget(sm_90=2, default=3))
def k_hints_by_target(x, y, T: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)) + 1.0)


@ct.kernel
def k_break_continue(x, y, n, T: ConstInt):
    i = ct.bid(0)
    acc = ct.full((T,), 0.0, dtype=ct.float32)
    for k in range(n):
        if k == 3:
            continue
        v = ct.load(x, index=(k,), shape=(T,))
        if ct.sum(v) > 100.0:
            break
        acc = acc + v
    ct.store(y, index=(i,), tile=acc)


@ct.kernel
def k_grid_dep(x, y, T: ConstInt):
    ct.grid_dependency_control_wait()
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)))
    ct.grid_dependency_control_launch_dependents()


@ct.kernel
def k_scalars(x, y, alpha, beta, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.store(y, index=(i,), tile=t * alpha + beta)


@ct.kernel
def k_adv_index(x, y, T: ConstInt):
    i = ct.bid(0)
    rows = ct.arange(T, dtype=ct.int32) + i
    t = ct.load_advanced_indexing(x, (rows, ct.Slice(i * T, T)), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i, 0), tile=t)


@ct.kernel
def k_multi_bid(x, y, T: ConstInt):
    bx = ct.bid(0)
    by = ct.bid(1)
    bz = ct.bid(2)
    nx = ct.num_blocks(0)
    ny = ct.num_blocks(1)
    t = ct.load(x, index=(bz * nx * ny + by * nx + bx,), shape=(T,))
    ct.store(y, index=(bz * nx * ny + by * nx + bx,), tile=t)


# ---------------------------------------------------------------------------------------------------------
# Signatures.
# ---------------------------------------------------------------------------------------------------------


def arr(dt, nd, fortran=False):
    strides = (None,) * (nd - 1) + (1,)
    if fortran:
        strides = (1,) + (None,) * (nd - 1)
    return ArrayConstraint(dt, nd, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, stride_constant=strides,
                           base_addr_divisible_by=16, shape_divisible_by=1)


def sc(dt):
    return ScalarConstraint(dt)


f32, f16, i32 = ct.float32, ct.float16, ct.int32

KERNELS = {
    "vadd": (k_vadd, [arr(f32, 1)] * 3 + [256]),
    "atomic_add": (k_atomic_add, [arr(f32, 1), arr(f32, 1), 128]),
    "atomic_ops": (k_atomic_ops, [arr(i32, 1), arr(i32, 1), 64]),
    "atomic_cas_lock": (k_atomic_cas_lock, [arr(i32, 1), arr(f32, 1), arr(f32, 1), 256]),
    "print_assert": (k_print_assert, [arr(f32, 1), 64]),
    "cumsum": (k_cumsum, [arr(f32, 2)] * 2 + [128]),
    "cumprod_rev": (k_cumprod_rev, [arr(f32, 1)] * 2 + [64]),
    "custom_scan_reduce": (k_custom_scan_reduce, [arr(f32, 1)] * 3 + [64]),
    "gather_scatter": (k_gather_scatter, [arr(f32, 1), arr(i32, 1), arr(f32, 1), 64]),
    "gather_masked_2d": (k_gather_masked_2d, [arr(f16, 2)] * 2 + [32]),
    "while_loop": (k_while_loop, [arr(f32, 1), arr(f32, 1), sc(i32), 128]),
    "if_else": (k_if_else, [arr(f32, 1), arr(f32, 1), sc(i32), 128]),
    "int_ops": (k_int_ops, [arr(i32, 1)] * 3 + [128]),
    "uint_ops": (k_uint_ops, [arr(ct.uint32, 1)] * 2 + [128]),
    "bit_ops": (k_bit_ops, [arr(i32, 1)] * 2 + [128]),
    "fp8_casts": (k_fp8_casts, [arr(f32, 1), arr(ct.float8_e4m3fn, 1), arr(f16, 1), 128]),
    "int_float_casts": (k_int_float_casts, [arr(f32, 1), arr(ct.int64, 1), arr(f32, 1), 128]),
    "matmul": (k_matmul, [arr(f16, 2)] * 3 + [64, 64, 32]),
    "matmul_int8": (k_matmul_int8, [arr(ct.int8, 2), arr(ct.int8, 2), arr(i32, 2), 32]),
    "matmul_fp8_transposed": (k_matmul_fp8_transposed,
                              [arr(ct.float8_e4m3fn, 2), arr(ct.float8_e4m3fn, 2, fortran=True),
                               arr(f32, 2), 64]),
    "reductions": (k_reductions, [arr(f32, 2)] + [arr(f32, 1)] * 3 + [arr(i32, 1), arr(f32, 1), 64]),
    "softmax_fast": (k_softmax_fast, [arr(f32, 2)] * 2 + [512]),
    "softmax_exp_approx": (k_softmax_exp_approx, [arr(f32, 2)] * 2 + [256]),
    "persistent": (k_persistent, [arr(f32, 1), arr(f32, 1), sc(i32), 128]),
    "math": (k_math, [arr(f32, 1)] * 2 + [64]),
    "atan2": (k_atan2, [arr(f32, 1)] * 2 + [64]),
    "cast_rounding": (k_cast_rounding, [arr(ct.float64, 1), arr(f32, 1), 64]),
    "shapes": (k_shapes, [arr(f32, 2)] * 2 + [16]),
    "memory_order": (k_memory_order, [arr(f32, 1)] * 2 + [64]),
    "hints": (k_hints, [arr(f32, 1)] * 2 + [64]),
    "kernel_options": (k_kernel_options, [arr(f32, 1)] * 2 + [64]),
    "hints_by_target": (k_hints_by_target, [arr(f32, 1)] * 2 + [64]),
    "break_continue": (k_break_continue, [arr(f32, 1), arr(f32, 1), sc(i32), 64]),
    "grid_dep": (k_grid_dep, [arr(f32, 1)] * 2 + [64]),
    "scalars": (k_scalars, [arr(f32, 1), arr(f32, 1), sc(f32), sc(f32), 64]),
    "adv_index": (k_adv_index, [arr(f32, 2)] * 2 + [16]),
    "multi_bid": (k_multi_bid, [arr(f32, 1)] * 2 + [64]),
}

VERSIONS = ["13.1", "13.2", "13.3", "13.4", "13.5"]


def bytecode_for(kernel, params, version):
    major, minor = (int(p) for p in version.split("."))
    bv = BytecodeVersion(major * 10000 + minor * 100)
    sig = KernelSignature(params, CallingConvention.cutile_python_v1())
    res = compile_tile(kernel._annotated_function, [sig], sm_arch="sm_90",
                       compiler_options=kernel._compiler_options, return_bytecode=True,
                       return_cubin=False, bytecode_version=bv)
    return res.bytecode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", default="")
    ap.add_argument("--versions", default=",".join(VERSIONS))
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    only = {n for n in args.only.split(",") if n}
    written, refused = [], []
    for name, (kernel, params) in KERNELS.items():
        if only and name not in only:
            continue
        for version in args.versions.split(","):
            try:
                bc = bytecode_for(kernel, params, version)
            except Exception as e:  # cuTile refuses a feature at this version: record and go on.
                refused.append((name, version, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
                if args.verbose:
                    traceback.print_exc()
                continue
            path = os.path.join(args.outdir, f"{name}_v{version.replace('.', '_')}.tilebc")
            with open(path, "wb") as f:
                f.write(bc)
            written.append(path)
    for name, version, why in refused:
        print(f"refused {name} at {version}: {why}", file=sys.stderr)
    print(f"wrote {len(written)} files ({len(refused)} kernel/version pairs refused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
