#!/usr/bin/env python3
"""CPU checks of the cutile-rs-torch wheel (no GPU, no CUDA driver, torch optional).

    python3 python/tests/test_cpu.py [--dev] [WHEEL]

Without WHEEL, builds one with `maturin build --release` (slow on a cold target dir). `--dev`: WHEEL is
a development build (`cargo xtask test` makes one without zig), so its platform tag is not checked.
Checks: the wheel's name carries the abi3 and manylinux_2_28 tags and it is small; it holds the
extension and the AOT bundle; the extension has no link-time dependency on libcuda, libcudart,
libtorch or libpython; installed into a fresh venv, the extension imports with no GPU, opens the
shipped bundle, and turns calls into `CutileError`s naming the cause (no driver, bad element type)
rather than crashes. When torch is importable in that venv, the package imports and the fake
implementations give the right shapes under FakeTensorMode; opcheck needs a GPU and runs in
test_gpu.py. Exits nonzero on the first failed check.
"""

import glob
import os
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)
MAX_WHEEL_BYTES = 32 << 20


def step(msg):
    print(f"--- {msg}", flush=True)


def build_wheel(tmp):
    step("maturin build (no wheel given)")
    subprocess.run(
        ["maturin", "build", "--release", "--zig", "--compatibility", "manylinux_2_28", "-o", tmp], cwd=CRATE, check=True
    )
    return glob.glob(os.path.join(tmp, "*.whl"))[0]


def check_wheel(wheel, dev):
    name = os.path.basename(wheel)
    step(f"wheel {name} ({os.path.getsize(wheel) / 2**20:.1f} MiB)")
    assert "-cp310-abi3-" in name, f"not an abi3 (cp310) wheel: {name}"
    if not dev:
        assert "manylinux_2_28_x86_64" in name, f"no manylinux_2_28 tag: {name}"
        assert os.path.getsize(wheel) < MAX_WHEEL_BYTES, "wheel over 32 MiB"
    files = zipfile.ZipFile(wheel).namelist()
    ext = [f for f in files if f.startswith("cutile_rs_torch/_native") and f.endswith(".so")]
    assert ext, f"no extension module in {files}"
    if "cutile_rs_torch/kernels.bundle" not in files:
        print("    WARNING: the wheel has no kernels.bundle (built without python/prepare_gpu.sh?)")
    return ext[0]


def check_needed(so_path):
    out = subprocess.run(["readelf", "-d", so_path], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    step(f"NEEDED: {', '.join(needed)}")
    for bad in ("libcuda", "libcudart", "libtorch", "libc10", "libpython"):
        assert not any(n.startswith(bad) for n in needed), f"links {bad}: {needed}"


PROBE = r"""
import importlib.machinery, importlib.util, os, sys, glob
site = sys.argv[1]
so = glob.glob(os.path.join(site, "cutile_rs_torch", "_native*.so"))[0]
# Load the extension alone, so this check needs no torch.
spec = importlib.util.spec_from_file_location("cutile_rs_torch._native", so,
    loader=importlib.machinery.ExtensionFileLoader("cutile_rs_torch._native", so))
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
assert issubclass(m.CutileError, RuntimeError)
for f in ("softmax", "rms_norm", "layer_norm", "matmul", "attention", "silu_and_mul", "swiglu", "activation", "rope",
          "write_kv_cache", "attention_decode", "embedding", "argmax", "topk", "fused_qkv", "register_bundle",
          "FastOp", "use_exchange_api"):
    assert callable(getattr(m, f)), f
bundle = os.path.join(site, "cutile_rs_torch", "kernels.bundle")
if os.path.exists(bundle):
    m.register_bundle(bundle)
    print("    bundle opened:", os.path.getsize(bundle), "bytes")
try:
    m.register_bundle(os.path.join(site, "no-such.bundle")); raise SystemExit("no error for a missing bundle")
except m.CutileError as e:
    print("    missing bundle ->", str(e)[:100])
x = (0x10000, (4, 8), (8, 1), "f16")
try:
    m.softmax(x, x, 0, 0); raise SystemExit("softmax ran without a GPU")
except m.CutileError as e:
    print("    no GPU ->", str(e)[:160])
try:
    m.softmax((0x10000, (4, 8), (8, 1), "torch.int32"), x, 0, 0); raise SystemExit("int32 accepted")
except m.CutileError as e:
    assert "element type" in str(e), e
    print("    int32 ->", str(e)[:120])
try:
    m.FastOp("no_such_op"); raise SystemExit("FastOp accepted an unknown op")
except m.CutileError as e:
    assert "no fast path" in str(e), e
    print("    FastOp no_such_op ->", str(e)[:100])
assert m.use_exchange_api(0) is False and m.use_exchange_api(object()) is False
print("extension: ok")
try:
    import torch
except ImportError:
    print("torch is not installed here: skipped the package import, fake-implementation checks and opcheck "
          "(python/gpu_check.sh runs them on the GPU machine)")
    raise SystemExit(0)
import cutile_rs_torch as ct
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():
    x = torch.empty(8, 300, dtype=torch.float16, device="cuda")
    w = torch.empty(300, dtype=torch.float16, device="cuda")
    assert ct.softmax(x).shape == x.shape
    assert ct.rms_norm(x, w).shape == x.shape
    assert ct.layer_norm(x, w, w).shape == x.shape
    assert ct.matmul(x, torch.empty(300, 5, dtype=torch.float16, device="cuda")).shape == (8, 5)
    q = torch.empty(1, 2, 16, 64, dtype=torch.float16, device="cuda")
    assert ct.attention(q, q, q, causal=True).shape == q.shape
    assert ct.silu_and_mul(x[:, :200]).shape == (8, 100)
    assert ct.swiglu(x, x).shape == x.shape
    assert ct.gelu(x, "tanh").shape == x.shape and ct.geglu(x).shape == (8, 150) and ct.relu(x).shape == x.shape
    assert ct.argmax(x).shape == (8,) and ct.topk(x, 5)[1].dtype == torch.int64
    pos = torch.empty(8, dtype=torch.int64, device="cuda")
    qh, kh = torch.empty(8, 4, 64, device="cuda"), torch.empty(8, 2, 64, device="cuda")
    table = torch.empty(100, 32, device="cuda")
    assert [t.shape for t in ct.rope(qh, kh, table, table, pos)] == [qh.shape, kh.shape]
    assert ct.embedding(pos.view(2, 4), table).shape == (2, 4, 32)
    cache = torch.empty(2, 2, 16, 64, device="cuda")
    ct.write_kv_cache(kh, kh, cache, cache, batch=pos, pos=pos)
    o, lse = ct.attention_decode(torch.empty(2, 4, 1, 64, device="cuda"), cache, cache,
                                 torch.empty(2, dtype=torch.int32, device="cuda"), return_lse=True)
    assert o.shape == (2, 4, 1, 64) and lse.shape == (2, 4, 1)
    w = torch.empty(300, (4 + 2 * 2) * 64, device="cuda")
    assert ct.fused_qkv(x.float(), pos, w, table, table, cache, cache, batch=pos, pos=pos).shape == (8, 4, 64)
print("package import and fake implementations: ok")
from cutile_rs_torch import _native, ops
if ops._HAS_FAST:
    # DLPack's exchange table, read on CPU tensors: the C layouts against torch's own view.
    for t in (torch.randn(4, 128).half(), torch.randn(8, 10)[:, 2:7], torch.zeros(2, 3, dtype=torch.int64).t(),
              torch.tensor(3.0), torch.zeros(3, dtype=torch.bfloat16)):
        ptr, shape, strides, dtype, device = _native.exchange_describe(t)
        assert (ptr, tuple(shape), tuple(strides)) == (t.data_ptr(), tuple(t.shape), t.stride()), (t.shape, strides)
        assert device == (1, 0), device
        e = _native.exchange_empty_like(t)
        assert type(e) is torch.Tensor and e.shape == t.shape and e.dtype == t.dtype and e.is_contiguous()
    # A CPU tensor is not for the fast path: None, and the op raises its usual error.
    assert ops._SOFTMAX(0.0, torch.randn(3, 4)) is None
    try:
        ct.softmax(torch.randn(3, 4)); raise SystemExit("a CPU tensor was accepted")
    except ct.CutileError as e:
        assert "CUDA tensors" in str(e), e
    print("DLPack exchange table (torch " + torch.__version__ + "): ok")
else:
    print("torch " + torch.__version__ + " has no DLPack exchange table: the fast path is off")
"""


def main():
    with tempfile.TemporaryDirectory() as tmp:
        args = sys.argv[1:]
        dev = "--dev" in args
        args = [a for a in args if a != "--dev"]
        wheel = args[0] if args else build_wheel(tmp)
        ext = check_wheel(wheel, dev)
        unpacked = os.path.join(tmp, "unpacked")
        zipfile.ZipFile(wheel).extract(ext, unpacked)
        check_needed(os.path.join(unpacked, ext))
        step("install into a fresh venv (no GPU visible)")
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        vpy = os.path.join(venv, "bin", "python")
        subprocess.run([vpy, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], check=True)
        site = subprocess.run(
            [vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        subprocess.run([vpy, "-c", PROBE, site], check=True, env=env)
    print("test_cpu: all checks passed")


if __name__ == "__main__":
    main()
