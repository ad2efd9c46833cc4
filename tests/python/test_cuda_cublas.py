"""Matrix products on CUDA tensors through cuBLAS (src/backends/cuda/cublas_gemm.cpp), tested on the fake driver
and its fake cuBLAS (fake_cublas.cpp: the GEMM runs on the host pointers when the fake stream reaches it). Each
check runs in a subprocess with STRATA_CUDA_DRIVER=fake, as in test_cuda_fake.py. PRODUCT_CHECKS compare with the
CPU and are driver-agnostic: test_real_gpu_products runs them on a real GPU when the machine has one."""

import os
import subprocess
import sys
import textwrap

import pytest

import strata
from _cuda_fake_run import PKG_PARENT, run_fake


# Every product against the CPU's, for the four dtypes, with contiguous, transposed, sliced (a step: copied),
# batched-broadcast operands, out= (a transposed out: column-major C) and bias broadcasts.
PRODUCT_CHECKS = """
import strata.nn.functional as F
strata.manual_seed(0)
TOL = {strata.float32: 2e-5, strata.float64: 1e-12, strata.float16: 2e-3, strata.bfloat16: 1.6e-2}
ncases = 0

def check(name, fn, *args, dt, **kw):
    global ncases
    want = fn(*args, **kw)
    got = fn(*[a.cuda() if isinstance(a, strata.Tensor) else a for a in args],
             **{k: v.cuda() if isinstance(v, strata.Tensor) else v for k, v in kw.items()})
    assert got.device.type == "cuda" and got.dtype == want.dtype and got.shape == want.shape, (name, got, want)
    g, w = got.cpu().double(), want.double()
    err = ((g - w).abs().max() / max(1.0, w.abs().max().item())).item() if w.numel() else 0.0
    assert err <= TOL[dt], (name, dt, err)
    ncases += 1

for dt in (strata.float32, strata.float64, strata.float16, strata.bfloat16):
    r = lambda *s: strata.randn(*s).to(dt)
    a, b = r(5, 7), r(7, 3)
    check("mm", strata.mm, a, b, dt=dt)
    check("mm a.t()", lambda x, y: strata.mm(x.t(), y), r(7, 5), b, dt=dt)
    check("mm b.t()", lambda x, y: strata.mm(x, y.t()), a, r(3, 7), dt=dt)
    check("mm both.t()", lambda x, y: strata.mm(x.t(), y.t()), r(7, 5), r(3, 7), dt=dt)
    check("mm sliced", lambda x, y: strata.mm(x[1:, ::2], y[::3, 1:]), r(6, 14), r(21, 4), dt=dt)
    check("mm row/col", strata.mm, r(1, 7), r(7, 1), dt=dt)
    check("mm k=0", strata.mm, r(3, 0), r(0, 2), dt=dt)
    check("mm out=", lambda x, y: strata.mm(x, y, out=strata.empty(5, 3, dtype=dt, device=x.device)), a, b, dt=dt)
    check("mm out=.t()", lambda x, y: strata.mm(x, y, out=strata.empty(3, 5, dtype=dt, device=x.device).t()),
          a, b, dt=dt)
    check("bmm", strata.bmm, r(4, 5, 6), r(4, 6, 3), dt=dt)
    check("bmm transposed", lambda x, y: strata.bmm(x.transpose(1, 2), y.transpose(1, 2)), r(4, 6, 5), r(4, 3, 6),
          dt=dt)
    check("bmm permuted batch", lambda x, y: strata.bmm(x.permute(1, 0, 2), y), r(5, 4, 6), r(4, 6, 3), dt=dt)
    check("baddbmm", lambda s, x, y: strata.baddbmm(s, x, y, beta=0.5, alpha=2.0), r(4, 5, 3), r(4, 5, 6),
          r(4, 6, 3), dt=dt)
    check("baddbmm bias bcast", strata.baddbmm, r(3), r(2, 5, 6), r(2, 6, 3), dt=dt)
    check("addbmm", lambda s, x, y: strata.addbmm(s, x, y, beta=0.5), r(5, 3), r(4, 5, 6), r(4, 6, 3), dt=dt)
    check("addbmm no batch", lambda s, x, y: strata.addbmm(s, x, y, beta=0.5), r(5, 3), r(0, 5, 6), r(0, 6, 3),
          dt=dt)
    check("bmm k=0", strata.bmm, r(2, 3, 0), r(2, 0, 4), dt=dt)
    check("addmm row bias", strata.addmm, r(3), a, b, dt=dt)
    check("addmm row bias a,b", lambda s, x, y: strata.addmm(s, x, y, beta=0.25, alpha=-1.5), r(1, 3), a, b, dt=dt)
    check("addmm col bias", strata.addmm, r(5, 1), a, b, dt=dt)
    check("addmm full", lambda s, x, y: strata.addmm(s, x, y, beta=2.0), r(5, 3), a, b, dt=dt)
    check("addmm beta=0", lambda s, x, y: strata.addmm(s, x, y, beta=0.0), r(5, 3), a, b, dt=dt)
    check("addmm out=", lambda s, x, y: strata.addmm(s, x, y, out=strata.empty(5, 3, dtype=dt, device=x.device)),
          r(3), a, b, dt=dt)
    check("addmm_", lambda s, x, y: s.clone().addmm_(x, y.t()), r(5, 3), a, r(3, 7), dt=dt)
    check("mv", strata.mv, a, r(7), dt=dt)
    check("mv strided", lambda x, v: strata.mv(x.t(), v[::2]), r(7, 5), r(14), dt=dt)
    check("addmv", lambda s, x, v: strata.addmv(s, x, v, beta=0.5, alpha=3.0), r(5), a, r(7), dt=dt)
    check("dot", strata.dot, r(9), r(9), dt=dt)
    check("matmul 1x2", strata.matmul, r(7), b, dt=dt)
    check("matmul 2x1", strata.matmul, a, r(7), dt=dt)
    check("matmul 3x2", strata.matmul, r(2, 5, 7), b, dt=dt)
    check("matmul 3x2 transposed", lambda x, y: strata.matmul(x.transpose(0, 1), y), r(5, 2, 7), b, dt=dt)
    check("matmul broadcast", strata.matmul, r(2, 1, 5, 7), r(4, 7, 3), dt=dt)
    check("matmul broadcast 2", strata.matmul, r(3, 5, 7), r(2, 1, 7, 3), dt=dt)
    check("matmul 1x3", strata.matmul, r(7), r(2, 7, 3), dt=dt)
    check("matmul 4x4 permuted", lambda x, y: strata.matmul(x.permute(0, 2, 1, 3), y), r(2, 5, 3, 7),
          r(2, 3, 7, 4), dt=dt)
    check("@", lambda x, y: x @ y, r(3, 5, 7), r(3, 7, 2), dt=dt)
    check("linear", F.linear, r(2, 4, 7), r(3, 7), r(3), dt=dt)
    check("linear no bias", F.linear, r(4, 7), r(3, 7), dt=dt)
    check("linear 1-D weight", F.linear, r(4, 7), r(7), dt=dt)
    check("linear 2-D bias", F.linear, r(4, 7), r(3, 7), r(4, 3), dt=dt)
    check("linear transposed input", lambda x, w, bb: F.linear(x.t(), w, bb), r(7, 4), r(3, 7), r(3), dt=dt)
    check("linear permuted 3-D input", lambda x, w: F.linear(x.transpose(0, 1), w), r(4, 2, 7), r(3, 7), dt=dt)
    lin = strata.nn.Linear(7, 3).to(dt)
    x = r(6, 7)
    want = lin(x)
    lin.to("cuda")
    got = lin(x.cuda())
    assert got.device.type == "cuda" and (got.cpu().double() - want.detach().double()).abs().max() <= TOL[dt] * 10
    ncases += 1
print("PRODUCTS-OK", ncases)
"""


def test_products_match_the_cpu_for_four_dtypes():
    out = run_fake(PRODUCT_CHECKS)
    assert "PRODUCTS-OK" in out and int(out.split()[-1]) >= 4 * 40


def test_products_match_torch():
    import numpy as np
    import torch

    out = run_fake("""
        strata.manual_seed(1)
        a, b, bias = strata.randn(6, 9), strata.randn(3, 9, 4), strata.randn(4)
        r1 = strata.matmul(a.cuda(), b.cuda()).cpu()
        r2 = strata.nn.functional.linear(a.cuda(), b[0].t().contiguous().cuda(), bias.cuda()).cpu()
        print(repr((a.tolist(), b.tolist(), bias.tolist(), r1.tolist(), r2.tolist())))
    """)
    a, b, bias, r1, r2 = eval(out.strip().splitlines()[-1])
    ta, tb, tbias = torch.tensor(a), torch.tensor(b), torch.tensor(bias)
    np.testing.assert_allclose(np.array(r1), torch.matmul(ta, tb).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(r2), torch.nn.functional.linear(ta, tb[0].t(), tbias).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_cublas_arguments_and_compute_types():
    run_fake("""
        last = cc.fake_cublas_last_gemm
        assert cc.cublas_info() == (True, "fake", "")
        a, b = strata.randn(5, 7).cuda(), strata.randn(7, 3).cuda()
        strata.mm(a, b)
        g = last()
        # Row-major C = A B is column-major C^T = B^T A^T: cublas m = 3, n = 5, B first.
        assert (g["transa"], g["transb"], g["m"], g["n"], g["k"]) == (0, 0, 3, 5, 7), g
        assert (g["lda"], g["ldb"], g["ldc"], g["batch"]) == (3, 7, 3, 1), g
        assert (g["a_type"], g["c_type"], g["compute_type"], g["alpha"], g["beta"]) == (0, 0, 68, 1.0, 0.0), g
        assert g["stream"] == strata.cuda.current_stream().cuda_stream
        strata.mm(strata.randn(7, 5).cuda().t(), strata.randn(3, 7).cuda().t())  # both read with op T, no copy
        g = last()
        assert (g["transa"], g["transb"], g["lda"], g["ldb"], g["ldc"]) == (1, 1, 7, 5, 3), g
        calls = cc.fake_cublas_calls()
        out = strata.empty(3, 5, device="cuda").t()  # a non-contiguous out= is computed contiguous, then copied
        strata.mm(a, b, out=out)
        g = last()
        assert (g["m"], g["n"], g["transa"], g["transb"], g["lda"], g["ldb"], g["ldc"]) == (3, 5, 0, 0, 3, 7, 3), g
        assert cc.fake_cublas_calls() == calls + 1
        strata.bmm(strata.randn(4, 5, 6).cuda(), strata.randn(4, 6, 2).cuda())
        g = last()
        assert (g["batch"], g["stride_a"], g["stride_b"], g["stride_c"]) == (4, 12, 30, 10), g
        # A broadcast batch: stride 0, one call.
        calls = cc.fake_cublas_calls()
        strata.matmul(strata.randn(3, 5, 6).cuda(), strata.randn(6, 2).cuda().expand(3, 6, 2))
        assert cc.fake_cublas_calls() == calls + 1 and last()["stride_a"] == 0 and last()["batch"] == 3
        # Two batch dims that do not collapse (a permuted batch): one call per outer index.
        calls = cc.fake_cublas_calls()
        strata.matmul(strata.randn(2, 3, 5, 6).cuda().transpose(0, 1), strata.randn(3, 2, 6, 4).cuda())
        assert cc.fake_cublas_calls() == calls + 3, cc.fake_cublas_calls() - calls
        for dt, ty, comp in ((strata.float64, 1, 70), (strata.float16, 2, 68), (strata.bfloat16, 14, 68)):
            strata.mm(a.to(dt), b.to(dt))
            g = last()
            assert (g["a_type"], g["c_type"], g["compute_type"]) == (ty, ty, comp), (dt, g)
        # A 1-D bias: one cublasLtMatmul with the bias epilogue (linear; addmm with beta = 1); otherwise, or for a
        # bias not 16-byte aligned, a rank-1 GEMM broadcasts it, then cuBLAS adds the product.
        x, w, bias = strata.randn(6, 7), strata.randn(3, 7), strata.randn(9)
        dx, dw, dbias = x.cuda(), w.cuda(), bias.cuda()
        lt0, calls0 = cc.fake_cublaslt_calls(), cc.fake_cublas_calls()
        y = strata.nn.functional.linear(dx, dw, dbias[:3])
        assert cc.fake_cublaslt_calls() == (lt0[0] + 1, lt0[1] + 1) and cc.fake_cublas_calls() == calls0
        assert strata.allclose(y.cpu(), strata.nn.functional.linear(x, w, bias[:3]), atol=1e-5)
        y = strata.addmm(dbias[4:7], dx, dw.t(), alpha=0.5)  # offset 16 bytes: aligned
        assert cc.fake_cublaslt_calls()[1] == lt0[1] + 2 and cc.fake_cublas_calls() == calls0
        assert strata.allclose(y.cpu(), strata.addmm(bias[4:7], x, w.t(), alpha=0.5), atol=1e-5)
        y = strata.addmm(dbias[1:4], dx, dw.t())  # 4 bytes in: not aligned
        assert cc.fake_cublaslt_calls()[1] == lt0[1] + 2 and cc.fake_cublas_calls() == calls0 + 2
        assert strata.allclose(y.cpu(), strata.addmm(bias[1:4], x, w.t()), atol=1e-5)
        y = strata.addmm(dbias[:3], dx, dw.t(), beta=0.5)
        assert cc.fake_cublaslt_calls()[1] == lt0[1] + 2 and cc.fake_cublas_calls() == calls0 + 4
        assert strata.allclose(y.cpu(), strata.addmm(bias[:3], x, w.t(), beta=0.5), atol=1e-5)
        for dt in (strata.float64, strata.float16, strata.bfloat16):
            y = strata.nn.functional.linear(dx.to(dt), dw.to(dt), dbias[:3].to(dt))
            want = strata.nn.functional.linear(x.to(dt), w.to(dt), bias[:3].to(dt))
            assert (y.cpu().double() - want.double()).abs().max() <= (1e-12 if dt == strata.float64 else 2e-2), dt
        assert cc.fake_cublaslt_calls()[1] == lt0[1] + 5
        # TF32: off by default (as torch); allowed through strata.backends.cuda.matmul.allow_tf32.
        x = strata.full((1, 4), 1 + 2 ** -20, device="cuda")
        y = strata.ones(4, 1, device="cuda")
        exact = strata.mm(x, y).item()
        assert exact == strata.tensor(4 * (1 + 2 ** -20)).item() and last()["compute_type"] == 68
        strata.backends.cuda.matmul.allow_tf32 = True
        assert strata.mm(x, y).item() == 4.0 and last()["compute_type"] == 77
        strata.set_float32_matmul_precision("highest")
        assert strata.mm(x, y).item() == exact
    """)


def test_result_is_written_in_stream_order():
    run_fake("""
        fake.set_manual_progress(True)
        a, b = strata.randn(4, 6), strata.randn(6, 3)
        da, db = a.cuda(), b.cuda()
        side = strata.cuda.Stream()
        side.wait_stream(strata.cuda.current_stream())
        with strata.cuda.stream(side):
            before = fake.pending(side)
            c = strata.mm(da, db)
            assert fake.pending(side) == before + 1  # the GEMM is queued, not run
        # Read on the default stream without waiting for `side`: the GEMM has not run, the memory is fresh.
        raw = c.cpu()
        assert not strata.allclose(raw, a @ b)
        assert fake.pending(side) >= 1
        assert fake.run_pending(side) >= 1
        assert strata.allclose(c.cpu(), a @ b, atol=1e-5)
        # Ordered through an event, the reader sees the result.
        with strata.cuda.stream(side):
            c2 = strata.mm(db.t(), da.t())
        strata.cuda.current_stream().wait_stream(side)
        assert strata.allclose(c2.cpu(), (a @ b).t(), atol=1e-5)
    """)


def test_handles_per_thread_and_workspace():
    run_fake("""
        import threading
        a, b = strata.randn(8, 8), strata.randn(8, 8)
        want = a @ b
        reserved0 = strata.cuda.memory_reserved()
        errs = []
        def work():
            try:
                for _ in range(3):
                    assert strata.allclose(strata.mm(a.cuda(), b.cuda()).cpu(), want, atol=1e-5)
                    y = strata.nn.functional.linear(a.cuda(), b.t().cuda(), a[0].cuda())  # cuBLASLt
                    assert strata.allclose(y.cpu(), want + a[0], atol=1e-5)
            except Exception as e:
                errs.append(e)
        ts = [threading.Thread(target=work) for _ in range(3)]
        lt0 = cc.fake_cublaslt_calls()[1]
        [t.start() for t in ts]
        [t.join() for t in ts]
        assert not errs, errs
        assert cc.fake_cublaslt_calls()[1] == lt0 + 9
        # One workspace per (handle, stream), from the caching allocator: 32 MiB on a 9.0 device by default.
        assert strata.cuda.memory_reserved() - reserved0 >= 32 << 20
        with strata.cuda.device(1):
            c = strata.mm(a.to("cuda:1"), b.to("cuda:1"))
            assert c.device == strata.device("cuda:1") and strata.allclose(c.cpu(), want, atol=1e-5)
    """, CUBLAS_WORKSPACE_CONFIG="")
    run_fake("""
        r0 = strata.cuda.memory_reserved()
        strata.mm(strata.ones(2, 2, device="cuda"), strata.ones(2, 2, device="cuda"))
        # ":64:2" = 128 KiB of workspace: a small-pool segment (2 MiB) rather than 32 MiB.
        assert strata.cuda.memory_reserved() - r0 <= 4 << 20, strata.cuda.memory_reserved() - r0
    """, CUBLAS_WORKSPACE_CONFIG=":64:2")


def test_errors_name_op_shapes_dtypes_devices():
    run_fake("""
        import re
        def raises(fn, exc, pattern):
            try:
                fn()
            except exc as e:
                assert re.search(pattern, str(e)), str(e)
                return
            raise AssertionError("no error for " + pattern)
        g, c = strata.randn(2, 3).cuda(), strata.randn(3, 4)
        raises(lambda: strata.mm(g, c), RuntimeError,
               r"^Expected all tensors to be on the same device, but got mat2 is on cpu, different from other "
               r"tensors on cuda:0 \\(when checking argument in method wrapper_CUDA_mm\\); mm got self: "
               r"float32\\[2, 3\\] on cuda:0, mat2: float32\\[3, 4\\] on cpu")
        raises(lambda: strata.mm(c.t(), g.t()), RuntimeError, r"but got mat2 is on cuda:0, different from other "
               r"tensors on cpu .*wrapper_CUDA_mm")
        raises(lambda: strata.addmm(strata.zeros(4, device="cuda"), g, c.to("cuda:1")), RuntimeError,
               r"mat2 is on cuda:1, different from other tensors on cuda:0.*wrapper_CUDA_addmm.*self: float32\\[4\\]")
        raises(lambda: strata.bmm(g[None], c[None]), RuntimeError, "wrapper_CUDA_bmm")
        raises(lambda: strata.matmul(g, c), RuntimeError, "wrapper_CUDA_matmul")
        raises(lambda: strata.nn.functional.linear(g, strata.randn(5, 3)), RuntimeError,
               r"weight is on cpu.*wrapper_CUDA_linear.*input: float32\\[2, 3\\] on cuda:0, weight: float32\\[5, 3\\]")
        raises(lambda: strata.mm(g, c.cuda(), out=strata.empty(2, 4)), RuntimeError, "out is on cpu")
        raises(lambda: strata.mm(g, c.cuda().double()), RuntimeError, "mm: expected self, mat2 to have the same dtype")
        raises(lambda: strata.nn.functional.linear(g, strata.randn(5, 3, dtype=strata.float64).cuda()),
               RuntimeError, r"linear: expected input, weight to have the same dtype, but got float32\\[2, 3\\] on "
               r"cuda:0, float64\\[5, 3\\] on cuda:0")
        raises(lambda: strata.mm(g, strata.randn(4, 4).cuda()), RuntimeError,
               r"mat1 and mat2 shapes cannot be multiplied \\(2x3 and 4x4\\)")
        gi = strata.ones(2, 2, dtype=strata.int64, device="cuda")
        raises(lambda: strata.mm(gi, gi), NotImplementedError, "\\"mm_cuda\\" not implemented for 'Long'")
        raises(lambda: strata.matmul(gi[None], gi), NotImplementedError, "\\"matmul_cuda\\" not implemented for 'Long'")
    """)


def test_cublas_not_found_reason():
    # Without a driver the table is unusable, and says why.
    e = {k: v for k, v in os.environ.items() if k != "STRATA_CUDA_DRIVER"}
    e["PYTHONPATH"] = PKG_PARENT
    r = subprocess.run([sys.executable, "-c", "import strata; print(strata._C._cuda.cublas_info()); "
                        "print(strata._C._cuda.cublas_search_dirs())"], env=dict(e, STRATA_CUBLAS_DIR="/nowhere"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    if "True" in r.stdout.splitlines()[0]:
        pytest.skip("a real GPU with cuBLAS is here")
    assert "no usable CUDA driver" in r.stdout or "libcublas.so.13 could not be loaded" in r.stdout
    assert r.stdout.splitlines()[1].startswith("['/nowhere'")


def test_real_gpu_products():
    e = {k: v for k, v in os.environ.items() if k != "STRATA_CUDA_DRIVER"}
    e["PYTHONPATH"] = PKG_PARENT
    probe = subprocess.run([sys.executable, "-c", "import strata; print(strata.cuda.is_available())"], env=e,
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        pytest.skip("no GPU with a driver on this machine (the same checks ran on the fake cuBLAS above)")
    r = subprocess.run([sys.executable, "-c", "import strata\n" + textwrap.dedent(PRODUCT_CHECKS)], env=e,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "PRODUCTS-OK" in r.stdout, r.stdout + r.stderr


def test_products_do_not_synchronize():
    # Operands with a unit stride, biases included, stay on the device: no read-back, no blocking copy (the sync
    # debug mode turns any into an error). A slice with a step is copied through the host until copy kernels exist.
    run_fake("""
        F = strata.nn.functional
        a, b, x = strata.randn(5, 7).cuda(), strata.randn(7, 3).cuda(), strata.randn(2, 5, 7).cuda()
        w, bias = strata.randn(3, 7).cuda(), strata.randn(3).cuda()
        z2, z3 = strata.zeros(5, 3, device="cuda"), strata.zeros(2, 5, 5, device="cuda")
        strata.mm(a, b)
        strata.cuda.set_sync_debug_mode("error")
        strata.mm(a, b), strata.mm(b.t(), a.t()), strata.bmm(x, x.transpose(1, 2)), strata.matmul(x, b)
        F.linear(x, w, bias), F.linear(x, w), strata.addmm(bias, a, b), strata.addmm(bias, a, b, beta=0.5)
        strata.addmm(z2, a, b), strata.baddbmm(z3, x, x.transpose(1, 2)), strata.mv(a, b[:, 0])
        strata.matmul(x[:, None], x.transpose(1, 2)[None]), strata.mm(a, b, out=z2)
        strata.cuda.set_sync_debug_mode("default")
        assert strata.allclose(z2.cpu(), a.cpu() @ b.cpu(), atol=1e-5)
    """)


def test_backward_of_products_runs_on_cuda():
    # The backward formulas of mm, bmm and matmul are products too; with the output gradient given, the gradients
    # are computed on the device and match the CPU's. (linear's bias gradient needs a sum kernel: not yet.)
    run_fake("""
        strata.manual_seed(3)
        for f, shapes in ((strata.mm, [(5, 7), (7, 3)]), (strata.bmm, [(2, 5, 7), (2, 7, 3)]),
                          (strata.matmul, [(2, 5, 7), (2, 7, 4)]), (strata.matmul, [(5, 7), (7,)])):
            cpu = [strata.randn(*s).requires_grad_() for s in shapes]
            dev = [t.detach().cuda().requires_grad_() for t in cpu]
            out_cpu = f(*cpu)
            g = strata.randn(*out_cpu.shape)
            out_cpu.backward(g)
            f(*dev).backward(g.cuda())
            for c, d in zip(cpu, dev):
                assert d.grad.device.type == "cuda" and strata.allclose(d.grad.cpu(), c.grad, atol=1e-5), f
    """)


def test_random_layouts_match_the_cpu():
    # Random sizes (1 included), transposes, steps, offsets, broadcast batches and out= layouts: every way the
    # mapping onto cuBLAS's arguments can go wrong shows as a difference from the CPU.
    out = run_fake("""
        import random
        rng = random.Random(7)
        strata.manual_seed(7)

        def operand(rows, cols, batch, dt):
            # A (batch..., rows, cols) view: maybe stored transposed, maybe with a step or an offset.
            step = rng.choice([1, 1, 2])
            t = strata.randn(*batch, rows * step + 1, cols + 2, dtype=dt)
            t = t[..., 1::step, 1:cols + 1] if step > 1 else t[..., 1:rows + 1, 2:cols + 2]
            if rng.random() < 0.4:
                t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
            return t

        n = 0
        for i in range(300):
            dt = rng.choice([strata.float32, strata.float64])
            m, k, p = rng.choice([1, 2, 3, 5, 8]), rng.choice([1, 3, 4, 9]), rng.choice([1, 2, 6, 7])
            nb = rng.choice([0, 0, 1, 2])
            ba = [rng.choice([1, 2, 3]) for _ in range(nb)]
            bb = [s if rng.random() < 0.6 else 1 for s in ba] if nb else []
            if nb and rng.random() < 0.3:
                bb = bb[1:]
            a, b = operand(m, k, ba, dt), operand(k, p, bb, dt)
            want = strata.matmul(a, b)
            got = strata.matmul(a.cuda(), b.cuda())
            tol = 1e-4 if dt == strata.float32 else 1e-10
            assert got.shape == want.shape and strata.allclose(got.cpu(), want, atol=tol, rtol=tol), (i, a.shape,
                                                                                                    b.stride())
            if nb == 0:
                o = strata.empty(p, m, dtype=dt, device="cuda").t() if rng.random() < 0.5 else \\
                    strata.empty(m, p, dtype=dt, device="cuda")
                strata.mm(a.cuda(), b.cuda(), out=o)
                assert strata.allclose(o.cpu(), want, atol=tol, rtol=tol), i
                s = strata.randn(p, dtype=dt)
                beta, alpha = rng.choice([1.0, 0.5]), rng.choice([1.0, -2.0])
                r = strata.addmm(s.cuda(), a.cuda(), b.cuda(), beta=beta, alpha=alpha)
                assert strata.allclose(r.cpu(), strata.addmm(s, a, b, beta=beta, alpha=alpha), atol=tol, rtol=tol), i
            n += 1
        print("RANDOM-OK", n)
    """)
    assert "RANDOM-OK 300" in out


def _stub_lib(path, symbols):
    """Builds a shared library at `path` exporting `symbols`, each returning 0."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stub library")
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / (path.name + ".c")
    src.write_text("\n".join(f"int {s}(void) {{ return 0; }}" for s in symbols) + "\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(path), str(src)], check=True, capture_output=True)


def _symbols(macro):
    import re

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    header = open(os.path.join(root, "src", "backends", "cuda", "cublas_api.h")).read()
    body = header[header.index(f"#define {macro}("):]
    body = body[:body.index("\n\n")]
    return re.findall(r'X\(\w+, "(\w+)"', body)


def _loader_answer(extra_env, pythonpath=()):
    e = dict(os.environ)
    e.pop("STRATA_CUBLAS_DIR", None)
    e.update({"STRATA_CUDA_DRIVER": "fake", "STRATA_CUBLAS": "real",
              "PYTHONPATH": os.pathsep.join([PKG_PARENT, *map(str, pythonpath)])})
    e.update(extra_env)
    code = "import strata; cc = strata._C._cuda; print(repr((cc.cublas_info(), cc.cublaslt_info())))"
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return eval(r.stdout.strip().splitlines()[-1])


def test_the_loader_search_order_and_missing_functions(tmp_path):
    # Stub libraries stand in for cuBLAS (STRATA_CUBLAS=real loads them over the fake driver): the search order
    # (STRATA_CUBLAS_DIR, then the wheel's nvidia/cu13/lib under sys.path), and the reasons for missing functions.
    blas, lt = _symbols("STRATA_CUBLAS_FNS"), _symbols("STRATA_CUBLASLT_FNS")
    assert "cublasGemmStridedBatchedEx" in blas and "cublasLtMatmul" in lt
    full = tmp_path / "full"
    _stub_lib(full / "libcublas.so.13", blas)
    _stub_lib(full / "libcublasLt.so.13", lt)
    (ok, src, reason), (lt_ok, lt_reason) = _loader_answer({"STRATA_CUBLAS_DIR": str(full)})
    assert (ok, src, reason, lt_ok, lt_reason) == (True, str(full / "libcublas.so.13"), "", True, "")

    wheel = tmp_path / "site"
    _stub_lib(wheel / "nvidia" / "cu13" / "lib" / "libcublas.so.13", blas)
    _stub_lib(wheel / "nvidia" / "cu13" / "lib" / "libcublasLt.so.13", lt[:-1])  # no cublasLtMatmul
    (ok, src, reason), (lt_ok, lt_reason) = _loader_answer({}, pythonpath=[wheel])
    assert ok and src == str(wheel / "nvidia" / "cu13" / "lib" / "libcublas.so.13"), src
    assert not lt_ok and lt_reason == "libcublasLt.so.13 lacks cublasLtMatmul", lt_reason
    # STRATA_CUBLAS_DIR comes first.
    (ok, src, _), _ = _loader_answer({"STRATA_CUBLAS_DIR": str(full)}, pythonpath=[wheel])
    assert ok and src == str(full / "libcublas.so.13")

    partial = tmp_path / "partial"
    _stub_lib(partial / "libcublas.so.13", [s for s in blas if s != "cublasGemmStridedBatchedEx"])
    (ok, src, reason), _ = _loader_answer({"STRATA_CUBLAS_DIR": str(partial)})
    assert not ok and reason == f"{partial}/libcublas.so.13 lacks functions Strata needs: cublasGemmStridedBatchedEx"

    (ok, src, reason), _ = _loader_answer({"STRATA_CUBLAS_DIR": str(tmp_path / "none"),
                                           "LD_LIBRARY_PATH": str(tmp_path / "none")})
    if ok:
        pytest.skip("a libcublas.so.13 is on this machine's default library path")
    assert reason.startswith("libcublas.so.13 could not be loaded (") and str(tmp_path / "none") in reason, reason
