"""GPU checks of cutile_rs_torch against torch (run by python/gpu_check.sh on the GPU machine).

Every op against its torch reference on random shapes and dtypes; torch.library.opcheck on each custom
op; a torch.compile'd module; CUDA graph capture and replay; and the host overhead of a tiny call next
to torch's own (printed; bounded only loosely).
"""

import time

import pytest
import torch
import torch.nn.functional as F

import cutile_rs_torch as ct

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
MMA_DTYPES = [torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def rel_l2(got, want):
    got, want = got.double(), want.double()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


# --- correctness ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (64, 1000), (4, 97, 129), (1000, 1023), (2, 4096)])
def test_softmax(dtype, shape):
    x = rand(*shape, dtype=dtype, seed=1)
    y = ct.softmax(x, dim=-1)
    torch.cuda.synchronize()
    assert y.shape == x.shape and y.dtype == x.dtype
    assert rel_l2(y, torch.softmax(x.float(), -1)) < TOL[dtype]


def test_softmax_other_dim_and_strided_rows():
    x = rand(16, 300, dtype=torch.float16, seed=2)
    assert rel_l2(ct.softmax(x, dim=0), torch.softmax(x.float(), 0)) < TOL[torch.float16]
    base = rand(32, 512, dtype=torch.float16, seed=3)
    view = base[:, :300]  # rows with a stride larger than their length
    assert rel_l2(ct.softmax(view), torch.softmax(view.float(), -1)) < TOL[torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 64), (33, 1000), (8, 17, 4096), (256, 768)])
def test_rms_norm(dtype, shape):
    x = rand(*shape, dtype=dtype, seed=4)
    w = rand(shape[-1], dtype=dtype, seed=5)
    y = ct.rms_norm(x, w, 1e-6)
    want = F.rms_norm(x.float(), (shape[-1],), w.float(), 1e-6)
    assert rel_l2(y, want) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 64), (33, 1000), (8, 17, 4096), (256, 768)])
def test_layer_norm(dtype, shape):
    x = rand(*shape, dtype=dtype, seed=6)
    w = rand(shape[-1], dtype=dtype, seed=7)
    b = rand(shape[-1], dtype=dtype, seed=8)
    y = ct.layer_norm(x, w, b, 1e-5)
    want = F.layer_norm(x.float(), (shape[-1],), w.float(), b.float(), 1e-5)
    assert rel_l2(y, want) < TOL[dtype]


@pytest.mark.parametrize("dtype", MMA_DTYPES)
@pytest.mark.parametrize("mnk", [(8, 8, 8), (64, 128, 256), (1000, 1023, 517), (1024, 1024, 1024), (256, 4096, 4096)])
def test_matmul(dtype, mnk):
    m, n, k = mnk
    a = rand(m, k, dtype=dtype, seed=9)
    b = rand(k, n, dtype=dtype, seed=10)
    c = ct.matmul(a, b)
    assert c.shape == (m, n)
    assert rel_l2(c, a.float() @ b.float()) < TOL[dtype]


@pytest.mark.parametrize("mnk", [(1000, 1023, 517), (1024, 1024, 1024)])
def test_matmul_f32_runs_as_tf32_when_allowed(mnk, monkeypatch):
    m, n, k = mnk
    a = rand(m, k, dtype=torch.float32, seed=9)
    b = rand(k, n, dtype=torch.float32, seed=10)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    with pytest.raises(ct.CutileError, match="allow_tf32"):
        ct.matmul(a, b)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    # tf32 keeps f16's 10-bit mantissa.
    assert rel_l2(ct.matmul(a, b), a.double() @ b.double()) < TOL[torch.float16]


def test_matmul_transposed_weight_is_not_copied():
    w = rand(512, 256, dtype=torch.bfloat16, seed=11)  # a Linear weight [out, in]
    x = rand(64, 256, dtype=torch.bfloat16, seed=12)
    assert rel_l2(ct.matmul(x, w.t()), x.float() @ w.float().t()) < TOL[torch.bfloat16]


@pytest.mark.parametrize("dtype", MMA_DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bhsd", [(1, 1, 64, 64), (2, 8, 256, 64), (1, 4, 1000, 128), (2, 2, 128, 128)])
def test_attention(dtype, causal, bhsd):
    b, h, s, d = bhsd
    q, k, v = (rand(b, h, s, d, dtype=dtype, seed=13 + i) for i in range(3))
    o = ct.attention(q, k, v, causal=causal)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert rel_l2(o, want) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2), (8, 1024), (4, 33, 2 * 1000), (256, 2 * 4096)])
def test_silu_and_mul(dtype, shape):
    x = rand(*shape, dtype=dtype, seed=60)
    n = shape[-1] // 2
    want = F.silu(x[..., :n].float()) * x[..., n:].float()
    assert rel_l2(ct.silu_and_mul(x), want) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (8, 1000), (4, 33, 4096)])
def test_swiglu(dtype, shape):
    a, b = rand(*shape, dtype=dtype, seed=61), rand(*shape, dtype=dtype, seed=62)
    assert rel_l2(ct.swiglu(a, b), F.silu(a.float()) * b.float()) < TOL[dtype]


def test_errors_are_python_exceptions():
    x = rand(4, 8, dtype=torch.float16)
    with pytest.raises(ct.CutileError, match="rms_norm"):
        ct.rms_norm(x, rand(9, dtype=torch.float16), 1e-6)
    with pytest.raises(ct.CutileError):
        ct.matmul(rand(4, 8, dtype=torch.float16), rand(9, 4, dtype=torch.float16))
    with pytest.raises(ct.CutileError, match="element type"):
        ct.softmax(torch.zeros(4, 8, device="cuda", dtype=torch.int32))


def test_runs_on_the_current_stream():
    x = rand(4096, 4096, dtype=torch.float16, seed=20)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = ct.softmax(x)
    s.synchronize()
    assert rel_l2(y, torch.softmax(x.float(), -1)) < TOL[torch.float16]


# --- torch integration ---------------------------------------------------------------------------


def opcheck_cases():
    h = torch.float16
    return [
        (torch.ops.cutile_rs.softmax.default, (rand(8, 300, dtype=h),)),
        (torch.ops.cutile_rs.rms_norm.default, (rand(8, 256, dtype=h), rand(256, dtype=h), 1e-6)),
        (torch.ops.cutile_rs.layer_norm.default, (rand(8, 256, dtype=h), rand(256, dtype=h), rand(256, dtype=h), 1e-5)),
        (torch.ops.cutile_rs.matmul.default, (rand(64, 128, dtype=h), rand(128, 256, dtype=h))),
        (torch.ops.cutile_rs.attention.default, (*(rand(1, 2, 128, 64, dtype=h, seed=i) for i in range(3)), True, None)),
        (torch.ops.cutile_rs.silu_and_mul.default, (rand(8, 2048, dtype=h),)),
        (torch.ops.cutile_rs.swiglu.default, (rand(8, 1024, dtype=h), rand(8, 1024, dtype=h, seed=1))),
    ]


@pytest.mark.parametrize("case", range(7))
def test_opcheck(case):
    op, args = opcheck_cases()[case]
    torch.library.opcheck(op, args)


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = torch.nn.Parameter(rand(d, dtype=torch.bfloat16, seed=30), requires_grad=False)
        self.proj = rand(d, d, dtype=torch.bfloat16, seed=31)

    def forward(self, x):
        h = ct.rms_norm(x, self.w, 1e-6)
        return ct.softmax(ct.matmul(h, self.proj) * 0.05, dim=-1)


def test_torch_compile():
    m = Block(256)
    x = rand(128, 256, dtype=torch.bfloat16, seed=32)
    eager = m(x)
    compiled = torch.compile(m, fullgraph=True)
    got = compiled(x)
    assert rel_l2(got, eager) < 1e-3


def test_cuda_graph_capture_and_replay():
    x = rand(256, 1024, dtype=torch.float16, seed=40)
    w = rand(1024, dtype=torch.float16, seed=41)
    b = rand(1024, 1024, dtype=torch.float16, seed=42)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture: kernel loads happen here
        for _ in range(2):
            ct.softmax(ct.matmul(ct.rms_norm(x, w, 1e-6), b))
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ct.softmax(ct.matmul(ct.rms_norm(x, w, 1e-6), b))
    x.copy_(rand(256, 1024, dtype=torch.float16, seed=43))
    g.replay()
    torch.cuda.synchronize()
    want = torch.softmax((F.rms_norm(x.float(), (1024,), w.float(), 1e-6).half().float() @ b.float()), -1)
    assert rel_l2(y, want) < 2e-2


def test_host_overhead_of_a_tiny_call():
    x = rand(4, 128, dtype=torch.float16, seed=50)
    for _ in range(20):
        ct.softmax(x)
        torch.softmax(x, -1)
    torch.cuda.synchronize()

    def per_call(fn, n=2000):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / n * 1e6

    ours = per_call(lambda: ct.softmax(x))
    theirs = per_call(lambda: torch.softmax(x, -1))
    print(f"\nhost time per tiny softmax call: cutile_rs_torch {ours:.1f} us, torch {theirs:.1f} us")
    # A loose bound (catches a pathological regression, e.g. a synchronizing or re-planning path); the
    # number printed above is the measurement.
    assert ours < 2000.0
