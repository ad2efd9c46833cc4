"""Ops, autograd, generators, module hooks and the profiler used from several Python threads at once.

Ops release the GIL while their kernel runs (python/src/op_bind.cpp, Note [Releasing the GIL]), so
these threads really overlap inside the library; results are compared with NumPy / torch and with the
same work done on one thread. tests/cpp/test_threads.cpp hammers the same parts from std::threads
(and is what the ThreadSanitizer build runs)."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import strata

N_THREADS = 4


def run_threads(fn, n=N_THREADS):
    errors = []

    def wrap(i):
        try:
            fn(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def test_large_ops_in_threads_match_numpy():
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((200, 200)).astype(np.float32) for _ in range(N_THREADS)]
    vecs = [rng.standard_normal(1 << 16).astype(np.float32) for _ in range(N_THREADS)]
    out = [None] * N_THREADS

    def work(i):
        a, v = strata.from_numpy(mats[i]), strata.from_numpy(vecs[i])
        for _ in range(5):
            m = a @ a
            e = strata.exp(v * 0.01) + v
            s = v.sum()
        out[i] = (m.numpy(), e.numpy(), s.item())

    run_threads(work)
    for i in range(N_THREADS):
        np.testing.assert_allclose(out[i][0], mats[i] @ mats[i], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(out[i][1], np.exp(vecs[i] * 0.01) + vecs[i], rtol=1e-5, atol=1e-5)
        assert out[i][2] == pytest.approx(float(vecs[i].astype(np.float64).sum()), rel=1e-4, abs=1e-2)


def test_errors_raised_in_threads_leave_the_interpreter_working():
    # A kernel that raises after the GIL was released must take it back before the exception reaches Python.
    big = strata.ones(1 << 16)

    def work(i):
        for _ in range(20):
            with pytest.raises(RuntimeError, match="size"):
                strata.add(big, strata.ones(3 + i))
            assert (big + big).sum().item() == 2 * (1 << 16)

    run_threads(work)


def test_independent_backward_passes():
    def work(i):
        for it in range(20):
            x = strata.full((1 << 15,), float(i + it), requires_grad=True)
            (x * x).sum().backward()
            assert strata.equal(x.grad, strata.full((1 << 15,), 2.0 * (i + it)))

    run_threads(work)


def test_backward_accumulates_into_a_shared_leaf():
    w = strata.ones(1 << 15, requires_grad=True)
    iters = 25

    def work(i):
        c = strata.full((1 << 15,), float(i + 1))
        for _ in range(iters):
            (w * c).sum().backward()

    run_threads(work)
    expected = sum(iters * (i + 1) for i in range(N_THREADS))
    assert strata.equal(w.grad, strata.full((1 << 15,), float(expected)))


def test_tensor_hooks_run_in_backward_threads():
    seen = []
    lock = threading.Lock()

    def work(i):
        x = strata.ones(1 << 15, requires_grad=True)

        def hook(g):
            with lock:
                seen.append(i)
            return g * 2

        x.register_hook(hook)
        (x * 3).sum().backward()
        assert strata.equal(x.grad, strata.full((1 << 15,), 6.0))

    run_threads(work)
    assert sorted(seen) == list(range(N_THREADS))


def test_autograd_function_backward_in_threads():
    class Square(strata.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    def work(i):
        for _ in range(10):
            x = strata.full((1 << 15,), float(i), requires_grad=True)
            Square.apply(x).sum().backward()
            assert strata.equal(x.grad, strata.full((1 << 15,), 2.0 * i))

    run_threads(work)


def test_generators_reseeded_in_threads_repeat_their_stream():
    ref = strata.rand(1 << 15, generator=strata.Generator().manual_seed(123))

    def work(i):
        g = strata.Generator()
        for it in range(20):
            g.manual_seed(123)
            assert strata.equal(strata.rand(1 << 15, generator=g), ref)
            strata.randn(1 << 12)  # the default generator, shared by all threads
            if it % 5 == 0:
                strata.manual_seed(it)

    run_threads(work)


def test_default_generator_draws_are_not_lost_or_repeated():
    # Threads drawing from one generator get disjoint slices of its stream: together, after a seed, they
    # consume exactly as much of it as one thread drawing the same amount.
    strata.manual_seed(7)
    draws = []
    lock = threading.Lock()

    def work(i):
        for _ in range(10):
            r = strata.randint(0, 2**31 - 1, (1000,))
            with lock:
                draws.append(r)

    run_threads(work)
    after_threads = strata.rand(8)
    strata.manual_seed(7)
    for _ in range(N_THREADS * 10):
        strata.randint(0, 2**31 - 1, (1000,))
    assert strata.equal(after_threads, strata.rand(8))
    assert len(draws) == N_THREADS * 10


def test_module_hooks_from_threads():
    lin = strata.nn.Linear(256, 256)
    calls = []
    lock = threading.Lock()

    def pre(mod, args):
        with lock:
            calls.append("pre")

    def post(mod, args, out):
        with lock:
            calls.append("post")
        return out * 2

    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_hook(post)
    x = strata.randn(64, 256)
    want = lin(x)  # two hook calls
    assert strata.allclose(want, (x @ lin.weight.T + lin.bias) * 2)

    def work(i):
        for _ in range(10):
            assert strata.allclose(lin(x), want)
            # Registration and removal while other threads call the module.
            h = lin.register_forward_hook(lambda m, a, o: None)
            h.remove()

    run_threads(work)
    h1.remove()
    h2.remove()
    assert calls.count("pre") == calls.count("post") == 1 + N_THREADS * 10


def test_profiler_records_every_thread():
    a = strata.ones(1 << 15)
    barrier = threading.Barrier(N_THREADS)
    idents = set()

    def work(i):
        barrier.wait()
        for _ in range(5):
            strata.neg(a)
        idents.add(threading.get_native_id())

    with strata.profiler.profile() as prof:
        run_threads(work)
        strata.neg(a)
    negs = [e for e in prof.events() if e.name in ("aten::neg", "strata::neg")]
    threads = {e.thread for e in negs}
    assert len(negs) == 5 * N_THREADS + 1
    assert len(threads) == N_THREADS + 1
    # After the profile, no thread records.
    run_threads(lambda i: strata.neg(a))
    assert not strata.profiler.is_profiling()


def test_loading_a_library_while_threads_run_ops():
    # Loading the example extension registers kernels for existing ops (add on its device) and defines new
    # ops while other threads call add; in a fresh process so that the load happens during the calls.
    ext = os.environ.get("STRATA_EXT_EXAMPLE") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "build", "tests", "cpp", "out_of_tree", "libstrata_ext_example.so")
    if not os.path.exists(ext):
        pytest.skip("no extension library built")
    code = textwrap.dedent(f'''
        import threading, strata
        stop = False
        bad = []
        def work():
            x = strata.ones(1 << 15)
            n = 0
            while not stop or n < 50:
                if (x + x).sum().item() != 2 * (1 << 15):
                    bad.append(n)
                n += 1
        ts = [threading.Thread(target=work) for _ in range(3)]
        for t in ts: t.start()
        strata.ops.load_library({ext!r})
        a = strata.tensor([1.0, 2.0]).to("npu")
        r = strata.ops.myext.scaled_add(a, a, 3.0).cpu().tolist()
        stop = True
        for t in ts: t.join()
        print(r, bad)
    ''')
    env = dict(os.environ)
    pydir = os.path.dirname(os.path.dirname(os.path.abspath(strata.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [pydir, env.get("PYTHONPATH", "")] if p)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "[4.0, 8.0] []"
