"""Strata's benchmark suite: every case measured against its peers in the same run, one table, full numbers in JSON.

    .venv/bin/python bench/suite.py                  # everything (a few minutes)
    .venv/bin/python bench/suite.py --quick          # a subset with shorter budgets (under a minute)
    .venv/bin/python bench/suite.py --only 'gemm.*'  # cases whose name matches (glob or substring; comma-separated)

Each case runs Strata and its peers (PyTorch when importable, NumPy, and a physical reference: the plain C loop of
bench/c_loop.cpp, or oneDNN called directly) on the same inputs, interleaved sample by sample in rotating order, so a
burst of load from other users of the machine hits every side alike. Every side is warmed up, then timed over repeated
samples (each sample a batch of calls long enough to time reliably); the table shows the median time per call and
the time ratio Strata / peer: below 1 means Strata is faster. Min and max per side are in the JSON
(default bench/results/suite-latest.json), with the machine, the thread count and the library versions.

Before timing, Strata's result is compared with each peer's (loosely: this is a benchmark, not a test); a mismatch
is printed and recorded, since a ratio between two different computations means nothing.

What each case measures and what the references are: docs/BENCHMARKS.md.
"""

import argparse
import ctypes
import fnmatch
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
DEFAULT_JSON = ROOT / "bench" / "results" / "suite-latest.json"


class Skip(Exception):
    """Raised by a case's setup: the case cannot run here; the message says why."""


# ---------------------------------------------------------------------------------------------------------------------
# Timing


def _time_batch(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def measure(fns, budget_s, min_samples, max_samples=400, sample_s=2e-3, warmup=1):
    """Seconds per call for each side of fns (name -> callable): median, min, max over samples.

    A sample is `inner` back-to-back calls, with inner chosen per side so that a sample lasts about sample_s (one
    call for anything slower), because perf_counter around a single sub-microsecond call measures the timer. The
    sides take turns sample by sample, in an order rotated every round, so that load from other users of the machine
    and cache or frequency effects fall on all of them alike.
    """
    names = list(fns)
    inner, est, samples = {}, {}, {name: [] for name in names}
    for name in names:
        fn = fns[name]
        for _ in range(warmup):
            fn()
        one = max(_time_batch(fn, 1), 1e-8)
        if one >= sample_s:
            # Slow calls (a 4096^3 GEMM takes seconds here): the calibration call already is a good sample.
            inner[name], est[name] = 1, one
            samples[name].append(one)
        else:
            inner[name] = min(100000, int(sample_s / one))
            est[name] = _time_batch(fn, inner[name]) * inner[name]  # also a longer warm-up for tiny ops
    per_round = sum(est.values())
    rounds = int(min(max_samples, max(min_samples, budget_s / max(per_round, 1e-9))))
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            if len(samples[name]) < rounds:
                samples[name].append(_time_batch(fns[name], inner[name]))
    out = {}
    for name, ts in samples.items():
        ts.sort()
        out[name] = {"median": ts[len(ts) // 2], "min": ts[0], "max": ts[-1], "samples": len(ts),
                     "calls_per_sample": inner[name]}
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Libraries: Strata, the peers and the direct references. Loaded once by Env.


class Env:
    def __init__(self, threads, quick=False):
        import numpy as np

        sys.path.insert(0, str(ROOT / "python"))
        import strata as st

        self.np, self.st, self.threads, self.quick = np, st, threads, quick
        self._cache = {}
        st.set_num_threads(threads)
        try:
            import torch

            torch.set_num_threads(threads)
        except Exception:  # a missing or broken torch only removes a column
            torch = None
        self.torch = torch
        self.has_autograd = hasattr(st.Tensor, "grad_fn")
        self.rng = np.random.default_rng(0)
        self.dnnl = self._load_dnnl()
        self.c_loop = self._load_c_loop()

    def _load_dnnl(self):
        for name in ("libdnnl.so.3", "libdnnl.so.2", "libdnnl.so"):
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            i64, fl, p, ch = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_char
            gemm_args = [ch, ch, i64, i64, i64, fl, p, i64, p, i64, fl, p, i64]
            lib.dnnl_sgemm.argtypes = gemm_args
            lib.dnnl_sgemm.restype = ctypes.c_int
            if hasattr(lib, "dnnl_gemm_bf16bf16f32"):
                lib.dnnl_gemm_bf16bf16f32.argtypes = gemm_args
                lib.dnnl_gemm_bf16bf16f32.restype = ctypes.c_int
            return lib
        return None

    def dnnl_version(self):
        if self.dnnl is None:
            return None

        class Version(ctypes.Structure):
            _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                        ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]

        self.dnnl.dnnl_version.restype = ctypes.POINTER(Version)
        v = self.dnnl.dnnl_version().contents
        return f"{v.major}.{v.minor}.{v.patch}"

    def _load_c_loop(self):
        path = BUILD / "bench" / "libc_loop.so"
        if not path.exists():
            return None
        lib = ctypes.CDLL(str(path))
        lib.c_loop_run.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.c_int]
        lib.c_loop_run.restype = ctypes.c_double
        return lib

    def c_loop_fn(self, op, a, b, out):
        """A callable running the C loop `op` on NumPy float32 arrays (b may be None), returning out."""
        if self.c_loop is None:
            return None
        run, n, th = self.c_loop.c_loop_run, a.size, self.threads
        pa, pb, pc = a.ctypes.data, (b if b is not None else a).ctypes.data, out.ctypes.data
        name = op.encode()
        if run(name, pa, pb, pc, 0, 1) < 0:
            raise RuntimeError(f"c_loop has no op {op!r} (rebuild build/bench/libc_loop.so)")
        return lambda: (run(name, pa, pb, pc, n, th), out)[1]

    def randn(self, *shape):
        return self.rng.standard_normal(shape, dtype=self.np.float32)

    def cached_randn(self, key, *shape):
        """Random inputs shared by the cases that need the same big array (generating 32M numbers takes a while)."""
        if key not in self._cache:
            self._cache[key] = self.randn(*shape)
        return self._cache[key]

    def n_pointwise(self):
        # --quick uses 8M elements (32 MiB per array): still far beyond the caches, a quarter of the time.
        return (1 << 23) if self.quick else N_POINTWISE


# ---------------------------------------------------------------------------------------------------------------------
# Cases. A case's setup(env) returns {"strata": fn, "torch": fn, "numpy": fn, "ref": fn} (any but strata may be
# missing) plus optional metadata; each fn returns its result so that it can be checked against Strata's.

CASES = []


def case(name, group, what, quick=False, budget=2.0, work=None, tol=1e-4, min_samples=None, extra=None):
    # extra(env, result, quick), when given, adds measurements of its own to a case that was timed.
    def register(setup):
        CASES.append({"name": name, "group": group, "what": what, "quick": quick, "budget": budget, "work": work,
                      "tol": tol, "min_samples": min_samples, "setup": setup, "extra": extra})
        return setup

    return register


def needs_autograd(env):
    if not env.has_autograd:
        raise Skip("needs autograd (strata.Tensor has no grad_fn yet)")


def both(env):
    """(strata, torch or None) as the libraries a lib-generic builder receives."""
    return [("strata", env.st)] + ([("torch", env.torch)] if env.torch is not None else [])


# --- per-call overhead on tiny inputs ---------------------------------------------------------------------------------

TINY_A, TINY_B = [1.0, 2.0, 3.0, 4.0], [0.5, 0.25, 0.125, 0.0625]


@case("overhead.add", "overhead", "a + b on two 4-element float32 tensors (no grad): the cost of one op call",
      quick=True, budget=1.0)
def _(env):
    sides = {}
    for side, lib in both(env):
        a, b = lib.tensor(TINY_A), lib.tensor(TINY_B)
        sides[side] = lambda a=a, b=b: a + b
    a, b = env.np.array(TINY_A, env.np.float32), env.np.array(TINY_B, env.np.float32)
    sides["numpy"] = lambda: a + b
    return sides


@case("overhead.add_requires_grad", "overhead", "a + b on 4 floats with requires_grad=True: op call plus graph "
      "recording", quick=True, budget=1.0)
def _(env):
    needs_autograd(env)
    sides = {}
    for side, lib in both(env):
        a, b = lib.tensor(TINY_A, requires_grad=True), lib.tensor(TINY_B, requires_grad=True)
        sides[side] = lambda a=a, b=b: a + b
    return sides


@case("overhead.sum_method", "overhead", "x.sum() on 4 floats: a method call returning a 0-d tensor", quick=True,
      budget=1.0)
def _(env):
    sides = {}
    for side, lib in both(env):
        x = lib.tensor(TINY_A)
        sides[side] = x.sum
    x = env.np.array(TINY_A, env.np.float32)
    sides["numpy"] = x.sum
    return sides


def _indexing(env, index):
    base = env.randn(8, 8)
    sides = {}
    for side, lib in both(env):
        x = lib.from_numpy(base.copy())
        sides[side] = lambda x=x: x[index]
    sides["numpy"] = lambda: base[index]
    return sides


@case("index.int", "overhead", "x[1] on an 8x8 float32 tensor: a view from an int index", quick=True, budget=1.0)
def _(env):
    return _indexing(env, 1)


@case("index.slice", "overhead", "x[:, 2] on an 8x8 float32 tensor: a strided view from a slice and an int",
      quick=True, budget=1.0)
def _(env):
    return _indexing(env, (slice(None), 2))


@case("matmul.1x64@64x64", "overhead", "x @ w with x 1x64 and w 64x64 float32 (a new result each call)",
      quick=True, budget=1.0, work=("GFLOP", 2 * 64 * 64 / 1e9))
def _(env):
    x, w = env.randn(1, 64), env.randn(64, 64)
    sides = {}
    for side, lib in both(env):
        lx, lw = lib.from_numpy(x), lib.from_numpy(w)
        sides[side] = lambda lx=lx, lw=lw: lx @ lw
    sides["numpy"] = lambda: x @ w
    return sides


MLP_IN, MLP_HIDDEN, MLP_OUT = 64, 256, 10


def _mlp(env, lib, weights, use_nn, requires_grad):
    """A 2-layer MLP (Linear, ReLU, Linear) as a callable, with the given weights; returns (model, params)."""
    w1, b1, w2, b2 = (lib.from_numpy(w.copy()) for w in weights)
    if use_nn:
        l1, l2 = lib.nn.Linear(MLP_IN, MLP_HIDDEN), lib.nn.Linear(MLP_HIDDEN, MLP_OUT)
        with lib.no_grad():
            for p, v in ((l1.weight, w1), (l1.bias, b1), (l2.weight, w2), (l2.bias, b2)):
                p.copy_(v)
        model = lib.nn.Sequential(l1, lib.nn.ReLU(), l2)
        return model, list(model.parameters())
    params = [p.requires_grad_() if requires_grad else p for p in (w1, b1, w2, b2)]
    F = lib.nn.functional
    return (lambda x: F.linear(F.relu(F.linear(x, params[0], params[1])), params[2], params[3])), params


def _mlp_weights(env):
    return (env.randn(MLP_HIDDEN, MLP_IN) * 0.1, env.randn(MLP_HIDDEN) * 0.1, env.randn(MLP_OUT, MLP_HIDDEN) * 0.1,
            env.randn(MLP_OUT) * 0.1)


def _strata_has_nn(env):
    nn = env.st.nn
    return all(hasattr(nn, k) for k in ("Linear", "ReLU", "Sequential"))


@case("mlp.forward_b1", "overhead", f"2-layer MLP {MLP_IN}-{MLP_HIDDEN}-{MLP_OUT} (ReLU) forward at batch 1 under "
      "no_grad; nn.Linear modules when strata.nn has them, else F.linear with explicit weights (both sides alike)",
      quick=True, budget=1.5)
def _(env):
    weights, x = _mlp_weights(env), env.randn(1, MLP_IN)
    use_nn = _strata_has_nn(env)
    sides = {}
    for side, lib in both(env):
        model, _ = _mlp(env, lib, weights, use_nn, requires_grad=False)
        lx = lib.from_numpy(x)

        def fwd(model=model, lx=lx, lib=lib):
            with lib.no_grad():
                return model(lx)

        sides[side] = fwd
    return sides, {"impl": "nn modules" if use_nn else "functional"}


def _mlp_train_step(lib, model, params, x, target):
    F = lib.nn.functional
    for p in params:
        p.grad = None
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    return params[0].grad


@case("mlp.forward_backward_b1", "overhead", "the same MLP: forward, cross-entropy loss and backward at batch 1",
      quick=True, budget=1.5)
def _(env):
    needs_autograd(env)
    weights, x = _mlp_weights(env), env.randn(1, MLP_IN)
    use_nn = _strata_has_nn(env)
    sides = {}
    for side, lib in both(env):
        model, params = _mlp(env, lib, weights, use_nn, requires_grad=True)
        lx, target = lib.from_numpy(x), lib.tensor([3])
        sides[side] = lambda lib=lib, model=model, params=params, lx=lx, t=target: _mlp_train_step(lib, model, params,
                                                                                                     lx, t)
    return sides, {"impl": "nn modules" if use_nn else "functional"}


# --- large pointwise ops: bandwidth-bound -----------------------------------------------------------------------------

N_POINTWISE = 1 << 25  # 32M float32: 128 MiB per array, far beyond any cache


def _pointwise(env, c_op, strata_fn, torch_fn, numpy_fn, binary=True):
    np, n = env.np, env.n_pointwise()
    a = env.cached_randn("pw_a", n)
    b = env.cached_randn("pw_b", n) if binary else None
    sides = {}
    sa, sb, sout = env.st.from_numpy(a), env.st.from_numpy(b) if binary else None, env.st.empty(n)
    sides["strata"] = lambda: strata_fn(env.st, sa, sb, sout)
    if env.torch is not None and torch_fn is not None:
        ta, tb = env.torch.from_numpy(a), env.torch.from_numpy(b) if binary else None
        tout = env.torch.empty(n)
        sides["torch"] = lambda: torch_fn(env.torch, ta, tb, tout)
    if numpy_fn is not None:
        nout = np.empty_like(a)
        sides["numpy"] = lambda: numpy_fn(np, a, b, nout)
    ref = env.c_loop_fn(c_op, a, b, np.empty_like(a))
    if ref is not None:
        sides["ref"] = ref
    bytes_per = {"gelu": 8}.get(c_op, 12)
    return sides, {"ref_name": f"C loop ({c_op})", "n": n, "work": ("GB", bytes_per * n / 1e9)}


@case("pointwise.add", "pointwise", "add of two 32M float32 vectors into a preallocated out= (12 bytes/element)",
      quick=True, budget=2.0)
def _(env):
    return _pointwise(env, "add", lambda m, a, b, o: m.add(a, b, out=o), lambda m, a, b, o: m.add(a, b, out=o),
                      lambda m, a, b, o: m.add(a, b, out=o))


@case("pointwise.add_new", "pointwise", "a + b on 32M float32 returning a new tensor (allocation included)",
      budget=2.0)
def _(env):
    return _pointwise(env, "add", lambda m, a, b, o: a + b, lambda m, a, b, o: a + b, lambda m, a, b, o: a + b)


@case("pointwise.mul", "pointwise", "mul of two 32M float32 vectors into out= (12 bytes/element)", budget=2.0)
def _(env):
    return _pointwise(env, "mul", lambda m, a, b, o: m.mul(a, b, out=o), lambda m, a, b, o: m.mul(a, b, out=o),
                      lambda m, a, b, o: m.multiply(a, b, out=o))


@case("pointwise.gelu", "pointwise", "gelu (erf form) of 32M float32 into out= (8 bytes/element; NumPy has no erf)",
      quick=True, budget=2.0, tol=1e-3)
def _(env):
    return _pointwise(env, "gelu", lambda m, a, b, o: m.gelu(a, out=o), lambda m, a, b, o: m._C._nn.gelu(a, out=o),
                      None, binary=False)


def _chain7(m, a, b):
    return ((a * b + a) * 0.5 - b).abs().sqrt() * a


@case("pointwise.chain7", "pointwise", "sqrt(|(a*b + a)*0.5 - b|) * a on 32M float32: 7 ops run eagerly one by "
      "one (new tensors); the C loop fuses them into one pass", quick=True, budget=2.0, tol=1e-3)
def _(env):
    return _pointwise(env, "chain7", lambda m, a, b, o: _chain7(m, a, b), lambda m, a, b, o: _chain7(m, a, b),
                      lambda m, a, b, o: m.sqrt(m.abs((a * b + a) * 0.5 - b)) * a)


# --- reductions and normalisations on 4096x4096 -----------------------------------------------------------------------

N_RED = 4096


def _reduction(env, strata_torch_fn, numpy_fn, ref_op):
    np = env.np
    x = env.cached_randn("red_x", N_RED, N_RED)
    sides = {}
    for side, lib in both(env):
        lx = lib.from_numpy(x)
        sides[side] = lambda lib=lib, lx=lx: strata_torch_fn(lib, lx)
    if numpy_fn is not None:
        sides["numpy"] = lambda: numpy_fn(np, x)
    flat = x.reshape(-1)
    ref = env.c_loop_fn(ref_op, flat, None, np.empty_like(flat) if ref_op != "sum" else np.empty(1, np.float32))
    if ref is not None:
        # The reference computes something else (a one-pass sum, or a read+write pass): not comparable elementwise.
        sides["ref"] = ref
    what = "one-pass sum of all elements" if ref_op == "sum" else "read+write pass c = a*0.5"
    return sides, {"ref_name": f"C loop ({ref_op}: {what})", "ref_unchecked": True}


def _reduction_case(name, what, fn, np_fn, ref_op, quick=False, tol=1e-3):
    @case(f"reduce.{name}", "reduction", f"{what} of a {N_RED}x{N_RED} float32 tensor", quick=quick, budget=2.0,
          work=("GB", 4 * N_RED * N_RED / 1e9), tol=tol)
    def _(env):
        return _reduction(env, fn, np_fn, ref_op)


_reduction_case("sum_dim1", "sum over dim=1 (each row, contiguous)", lambda m, x: x.sum(1), lambda m, x: x.sum(1),
                "sum", quick=True)
_reduction_case("sum_dim0", "sum over dim=0 (down the columns, strided)", lambda m, x: x.sum(0),
                lambda m, x: x.sum(0), "sum", quick=True)
_reduction_case("mean_dim1", "mean over dim=1", lambda m, x: x.mean(1), lambda m, x: x.mean(1), "sum")
_reduction_case("mean_dim0", "mean over dim=0", lambda m, x: x.mean(0), lambda m, x: x.mean(0), "sum")
_reduction_case("max_dim1", "max (amax, values only) over dim=1", lambda m, x: x.amax(1), lambda m, x: x.max(1),
                "sum")
_reduction_case("max_dim0", "max (amax, values only) over dim=0", lambda m, x: x.amax(0), lambda m, x: x.max(0),
                "sum")
_reduction_case("softmax", "softmax over dim=-1", lambda m, x: m.softmax(x, -1), None, "scale", quick=True)
_reduction_case("layer_norm", "layer_norm over the last dim (no affine)", lambda m, x: m.nn.functional.layer_norm(
    x, [N_RED]), None, "scale")


# --- GEMM ---------------------------------------------------------------------------------------------------------------


def _gemm(env, m, k, n, bf16):
    np, st, torch = env.np, env.st, env.torch
    a, b = env.randn(m, k), env.randn(k, n)
    sides, meta = {}, {}
    if bf16:
        sa, sb = st.from_numpy(a).to(st.bfloat16), st.from_numpy(b).to(st.bfloat16)
        sout = st.empty(m, n, dtype=st.bfloat16)
    else:
        sa, sb, sout = st.from_numpy(a), st.from_numpy(b), st.empty(m, n)
    sides["strata"] = lambda: st.mm(sa, sb, out=sout)
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        if bf16:
            ta, tb = ta.bfloat16(), tb.bfloat16()
        tout = torch.empty(m, n, dtype=ta.dtype)
        sides["torch"] = lambda: torch.mm(ta, tb, out=tout)
    if not bf16:
        nout = np.empty((m, n), np.float32)
        sides["numpy"] = lambda: np.matmul(a, b, out=nout)
    if env.dnnl is not None:
        c = np.empty((m, n), np.float32)
        if bf16:
            if hasattr(env.dnnl, "dnnl_gemm_bf16bf16f32"):
                # Strata's own bf16 copies are the inputs (plain contiguous row-major bfloat16); oneDNN writes fp32.
                pa, pb, f = sa.data_ptr(), sb.data_ptr(), env.dnnl.dnnl_gemm_bf16bf16f32
                sides["ref"] = lambda: (f(b"N", b"N", m, n, k, 1.0, pa, k, pb, n, 0.0, c.ctypes.data, n), c)[1]
                meta["ref_name"] = "oneDNN dnnl_gemm_bf16bf16f32 (fp32 output)"
        else:
            pa, pb, f = a.ctypes.data, b.ctypes.data, env.dnnl.dnnl_sgemm
            sides["ref"] = lambda: (f(b"N", b"N", m, n, k, 1.0, pa, k, pb, n, 0.0, c.ctypes.data, n), c)[1]
            meta["ref_name"] = "oneDNN dnnl_sgemm"
    return sides, meta


def _gemm_case(m, k, n, bf16, quick):
    dt = "bf16" if bf16 else "fp32"
    big = m * k * n >= 1 << 30
    budget = 6.0 if big else 2.0
    # bf16 inputs, fp32 accumulation, rounding of the result to bf16: error grows with sqrt(k) times the magnitudes.
    tol = 0.05 if bf16 else 1e-3

    @case(f"gemm.{dt}.{m}x{k}x{n}", "gemm", f"{dt} matrix product ({m}x{k}) @ ({k}x{n}) into out=", quick=quick,
          budget=budget, work=("GFLOP", 2.0 * m * k * n / 1e9), tol=tol, min_samples=3 if big else None)
    def _(env):
        return _gemm(env, m, k, n, bf16)


for _bf16 in (False, True):
    for _n in (64, 256, 1024, 4096):
        _gemm_case(_n, _n, _n, _bf16, quick=_n in ((256, 1024) if not _bf16 else (256,)))
    for _m, _k, _n in ((64, 4096, 4096), (1, 4096, 4096), (256, 64, 4096)):
        _gemm_case(_m, _k, _n, _bf16, quick=(not _bf16 and _m == 1))


# --- convolution ----------------------------------------------------------------------------------------------------


@case("conv.small_cnn_forward", "conv", "conv2d 3->16 (3x3, pad 1), ReLU, conv2d 16->32 (3x3, pad 1), ReLU on a "
      "32x3x32x32 float32 batch, no_grad", quick=True, budget=2.0, tol=1e-3)
def _(env):
    x = env.randn(32, 3, 32, 32)
    w1, b1 = env.randn(16, 3, 3, 3) * 0.2, env.randn(16) * 0.1
    w2, b2 = env.randn(32, 16, 3, 3) * 0.1, env.randn(32) * 0.1
    sides = {}
    for side, lib in both(env):
        F = lib.nn.functional
        lx, lw1, lb1, lw2, lb2 = (lib.from_numpy(v) for v in (x, w1, b1, w2, b2))

        def fwd(F=F, lib=lib, lx=lx, lw1=lw1, lb1=lb1, lw2=lw2, lb2=lb2):
            with lib.no_grad():
                return F.relu(F.conv2d(F.relu(F.conv2d(lx, lw1, lb1, padding=1)), lw2, lb2, padding=1))

        sides[side] = fwd
    return sides


# --- training steps of the main job's models (examples/) --------------------------------------------------------------


def training_cases():
    """examples/<name>.py modules defining bench_step(lib): see docs/BENCHMARKS.md for the contract."""
    found = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        if "def bench_step(" in path.read_text(errors="replace"):
            found.append(path)
    return found


def _load_example(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_bench_example_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Settings of the training cases (from the command line): --train-small asks bench_step for the examples' --quick
# model (tests use it); the memory run does TRAIN_MEM_WARMUP steps, then up to "steps" more within "budget" seconds.
TRAIN_MEM_STEPS, TRAIN_MEM_WARMUP, TRAIN_MEM_BUDGET_S = 10, 2, 12.0
TRAIN = {"small": False, "steps": TRAIN_MEM_STEPS, "budget": TRAIN_MEM_BUDGET_S}


def _proc_status_kib(*keys):
    vals = {}
    with open("/proc/self/status") as f:
        for line in f:
            k = line.split(":", 1)[0]
            if k in keys:
                vals[k] = int(line.split()[1])
    return vals


def _reset_hwm():
    """Resets VmHWM (peak RSS) to the current RSS (Linux >= 4.0: "5" > /proc/self/clear_refs); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def train_memory_worker(path, framework, threads, steps, warmup, budget_s, small):
    """Runs in its own process (one per framework, so neither library's memory shows in the other's numbers): builds
    examples/<path>'s bench_step, runs `warmup` steps then up to `steps` more, and returns peak-RSS growth and, for
    Strata, its allocator's statistics. Peak RSS is VmHWM, reset to the current RSS before each phase."""
    if framework == "strata":
        sys.path.insert(0, str(ROOT / "python"))
        import strata as lib
    else:
        import torch as lib
    lib.set_num_threads(threads)
    mib = 1.0 / 1024  # /proc/self/status is in KiB
    stats = getattr(getattr(lib, "_C", None), "_cpu_allocator_stats", None) if framework == "strata" else None
    rss_import = _proc_status_kib("VmRSS")["VmRSS"]
    step = _load_example(Path(path)).bench_step(lib, quick=small)
    rss_setup = _proc_status_kib("VmRSS")["VmRSS"]
    alloc_setup = stats() if stats else None

    # Phase 1, the warm-up: the first steps also allocate what persists (gradients, optimizer state).
    hwm_reset = _reset_hwm()
    if stats:
        lib._C._reset_peak_memory_stats()
    t_warm = []
    for _ in range(warmup):
        t0 = time.perf_counter()
        step()
        t_warm.append(time.perf_counter() - t0)
    st = _proc_status_kib("VmRSS", "VmHWM")
    rss_warm, hwm_warm = st["VmRSS"], st["VmHWM"]
    alloc_warm = stats() if stats else None

    # Phase 2, steady state: what one step needs on top of what the warm-up left resident.
    n = int(max(3, min(steps, budget_s / max(t_warm[-1], 1e-6)))) if t_warm else steps
    _reset_hwm()
    if stats:
        lib._C._reset_peak_memory_stats()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    st = _proc_status_kib("VmRSS", "VmHWM")
    rss_end, hwm_steps = st["VmRSS"], st["VmHWM"]
    ru_maxrss_kib = __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss
    times.sort()
    out = {
        "framework": framework, "warmup_steps": warmup, "steps": n, "hwm_reset": hwm_reset,
        "rss_after_import_mib": rss_import * mib, "rss_after_setup_mib": rss_setup * mib,
        # Headline: the peak resident memory the training steps add on top of the built model and data.
        "peak_rss_growth_mib": (max(hwm_warm, hwm_steps) - rss_setup) * mib if hwm_reset else None,
        # The whole process at its peak during the steps (library, model, data and the steps' memory).
        "peak_rss_mib": max(hwm_warm, hwm_steps) * mib if hwm_reset else None,
        "steady_peak_rss_growth_mib": (hwm_steps - rss_warm) * mib if hwm_reset else None,
        "rss_growth_during_steps_mib": (rss_end - rss_warm) * mib,
        "ru_maxrss_mib": ru_maxrss_kib * mib,
        "step_seconds": {"median": times[len(times) // 2], "min": times[0], "max": times[-1]},
        "warmup_step_seconds": t_warm,
    }
    if stats:
        a = stats()
        out["allocator"] = {
            "live_after_setup_mib": alloc_setup["allocated_bytes"] / 2**20,
            "live_after_warmup_mib": alloc_warm["allocated_bytes"] / 2**20,
            "peak_growth_warmup_mib": (alloc_warm["peak_bytes"] - alloc_setup["allocated_bytes"]) / 2**20,
            "peak_growth_steady_mib": (a["peak_bytes"] - alloc_warm["allocated_bytes"]) / 2**20,
            "live_growth_during_steps_mib": (a["allocated_bytes"] - alloc_warm["allocated_bytes"]) / 2**20,
            "allocs_per_step": (a["num_allocs"] - alloc_warm["num_allocs"]) / n,
        }
    return out


def _ratio(a, b):
    return a / b if a is not None and b not in (None, 0) and b > 0 else None


def train_memory(env, path, quick):
    """Peak memory of the training step, one subprocess per framework (run one after the other)."""
    steps = max(3, TRAIN["steps"] // 2) if quick else TRAIN["steps"]
    budget = TRAIN["budget"] * (0.3 if quick else 1.0)
    res = {}
    for side, _ in both(env):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--train-worker", str(path), side, "--threads",
               str(env.threads), "--train-steps", str(steps), "--train-budget", str(budget)]
        if TRAIN["small"]:
            cmd.append("--train-small")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            res[side] = {"error": "timed out"}
            continue
        if p.returncode != 0:
            res[side] = {"error": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}
            continue
        res[side] = json.loads(p.stdout.strip().splitlines()[-1])
    s, t = res.get("strata", {}), res.get("torch", {})
    res["ratios"] = {k: _ratio(s.get(k), t.get(k))
                     for k in ("peak_rss_growth_mib", "steady_peak_rss_growth_mib", "peak_rss_mib")}
    if "step_seconds" in s and "step_seconds" in t:
        res["ratios"]["step_seconds_median"] = _ratio(s["step_seconds"]["median"], t["step_seconds"]["median"])
    return res


def _register_training_cases():
    paths = training_cases()
    if not paths:
        @case("train.examples", "train", "one training step of each model in examples/ (bench_step hook)", quick=True)
        def _(env):
            raise Skip("main-job models not present (no examples/*.py defines bench_step(lib))")
        return
    for path in paths:
        def setup(env, path=path):
            needs_autograd(env)
            mod = _load_example(path)
            sides = {side: mod.bench_step(lib, quick=TRAIN["small"]) for side, lib in both(env)}
            return sides, {"ref_unchecked": True, "torch_unchecked": True, "small": TRAIN["small"]}

        case(f"train.{path.stem}", "train", f"one training step of examples/{path.name} (bench_step hook): time "
             "(interleaved, in process) and peak memory (one subprocess per framework)", quick=True, budget=6.0,
             extra=lambda env, r, quick, path=path: r.update(memory=train_memory(env, path, quick)))(setup)


_register_training_cases()


# ---------------------------------------------------------------------------------------------------------------------
# C++ micro-benchmarks (Google Benchmark), built only when the library is installed

CPP_BENCHES = {
    # binary -> [(benchmark, baseline it is compared with)]
    "bench_dispatch": [("CallOp", "KernelDirect"), ("CallBoxed", "CallOp"), ("CallOpOut", "KernelDirectOut"),
                       ("CallBoxedOut", "CallOpOut"), ("KernelDirect", None), ("KernelDirectOut", None),
                       ("KeySet", None), ("Lookup", None), ("TlsExcludeGuard", None)],
    "bench_allocator": [(f"{side}/{n}", f"{base}/{n}") for n in (64, 4096, 4194304, 67108864)
                        for side, base in (("Strata", "Malloc"), ("AlignedAlloc", "Malloc"))]
    + [(f"StrataTouch/{n}", f"MallocTouch/{n}") for n in (4194304, 67108864)],
}


def run_cpp(binary, quick):
    exe = BUILD / "bench" / binary
    if not exe.exists():
        return {"status": "skipped", "reason": f"{exe.relative_to(ROOT)} not built (Google Benchmark missing?)"}
    cmd = [str(exe), "--benchmark_format=json", f"--benchmark_min_time={0.05 if quick else 0.1}"]
    if not quick:
        cmd.append("--benchmark_repetitions=3")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"{binary} timed out"}
    if out.returncode != 0:
        return {"status": "error", "reason": f"{binary} exited with {out.returncode}: {out.stderr.strip()[-300:]}"}
    data = json.loads(out.stdout)
    rows = {}
    for b in data["benchmarks"]:
        # With repetitions, keep the median aggregate; without, the single run.
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        rows[name] = {"cpu_ns": b["cpu_time"] * scale, "real_ns": b["real_time"] * scale,
                      "iterations": b["iterations"]}
    results = []
    for name, base in CPP_BENCHES[binary]:
        if name not in rows:
            continue
        r = {"name": name, **rows[name]}
        if base and base in rows:
            r["baseline"] = base
            r["ratio_cpu"] = rows[name]["cpu_ns"] / rows[base]["cpu_ns"]
        results.append(r)
    return {"status": "ok", "context": data.get("context", {}), "benchmarks": results}


# ---------------------------------------------------------------------------------------------------------------------
# Checks, machine info, table


def to_numpy(env, v):
    if isinstance(v, (tuple, list)):
        v = v[0]
    if isinstance(v, env.np.ndarray):
        return v
    if env.torch is not None and isinstance(v, env.torch.Tensor):
        return v.detach().float().numpy()
    if isinstance(v, env.st.Tensor):
        return v.detach().float().numpy()
    return env.np.asarray(v)


def check(env, c, sides, meta):
    """Compares Strata's result with each peer's; returns {peer: "ok" | "mismatch: ..."}."""
    np = env.np
    got = to_numpy(env, sides["strata"]())
    res = {}
    for peer, fn in sides.items():
        if peer == "strata" or meta.get(f"{peer}_unchecked"):
            continue
        want = to_numpy(env, fn())
        if want.shape != got.shape and want.size == got.size:
            want = want.reshape(got.shape)  # oneDNN/C loop write flat buffers
        if want.shape != got.shape:
            res[peer] = f"mismatch: shape {got.shape} vs {want.shape}"
            continue
        g, w = got.reshape(-1), want.reshape(-1)
        if g.size > 1 << 20:  # a strided sample keeps the check cheap on 32M-element results
            g, w = g[::61], w[::61]
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        err = float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
        res[peer] = "ok" if err <= c["tol"] * max(scale, 1.0) else f"mismatch: max abs error {err:.3g} (scale {scale:.3g})"
    return res


def machine_info(env, threads):
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu_model": cpu, "logical_cpus": os.cpu_count(), "threads_used": threads, "kernel": platform.release(),
            "loadavg_start": list(os.getloadavg())}
    try:
        info["cpu_capability"] = env.st._C._cpu_capability()
    except Exception:
        pass
    return info


def versions(env):
    v = {"python": sys.version.split()[0], "strata": getattr(env.st, "__version__", None), "numpy": env.np.__version__,
         "torch": getattr(env.torch, "__version__", None), "onednn_direct": env.dnnl_version()}
    try:
        v["strata_blas"] = env.st.blas.backend()
    except Exception as e:
        v["strata_blas"] = f"unknown ({e})"
    try:
        v["git_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                         text=True, timeout=10).stdout.strip()
    except Exception:
        pass
    return v


def fmt_time(s):
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(x):
    return f"{x:.2f}" if x >= 0.095 else f"{x:.2g}"


PEERS = ("torch", "numpy", "ref")


def _fmt_mib(x):
    return "-" if x is None else f"{x:.1f} MiB"


def print_train_table(results):
    rows = [r for r in results if r["status"] == "ok" and "memory" in r]
    if not rows:
        return
    print()
    print("Training steps. Time per step (interleaved, in process): median [min-max]; 'alone': median in the "
          "framework's own process (the memory run). Ratios strata/torch.")
    print("Peak memory (one subprocess per framework): peak RSS growth over the built model+data during the warm-up "
          "and the timed steps, and during the timed steps alone (steady); the whole process's peak RSS; Strata's "
          "allocator: peak live bytes above the live bytes before the steps, allocations per step.")
    for r in rows:
        t, m = r["times"], r["memory"]
        print(f"  {r['name']}")
        for side in ("strata", "torch"):
            if side not in t:
                continue
            line = (f"    {side:7} time {fmt_time(t[side]['median']):>9} [{fmt_time(t[side]['min'])}-"
                    f"{fmt_time(t[side]['max'])}]")
            mem = m.get(side, {})
            if "error" in mem:
                line += f"  memory: error: {mem['error']}"
            elif mem:
                line += f"  alone {fmt_time(mem['step_seconds']['median']):>9}"
                line += (f"  peak RSS growth {_fmt_mib(mem['peak_rss_growth_mib']):>10}  steady "
                         f"{_fmt_mib(mem['steady_peak_rss_growth_mib']):>10}")
                if mem.get("peak_rss_mib") is not None:
                    line += f"  peak RSS {_fmt_mib(mem['peak_rss_mib']):>10}"
                a = mem.get("allocator")
                if a:
                    line += (f"  allocator peak growth {_fmt_mib(a['peak_growth_warmup_mib'])} (steady "
                             f"{_fmt_mib(a['peak_growth_steady_mib'])}), {a['allocs_per_step']:.0f} allocs/step")
            print(line)
        rat = m.get("ratios", {})
        parts = [f"time {fmt_ratio(r['ratios']['torch'])}"] if "torch" in r.get("ratios", {}) else []
        if rat.get("step_seconds_median") is not None:
            parts.append(f"time alone {fmt_ratio(rat['step_seconds_median'])}")
        for key, label in (("peak_rss_growth_mib", "peak RSS growth"), ("steady_peak_rss_growth_mib", "steady"),
                           ("peak_rss_mib", "peak RSS")):
            if rat.get(key) is not None:
                parts.append(f"{label} {fmt_ratio(rat[key])}")
        if parts:
            print(f"    ratio strata/torch: {', '.join(parts)}")


def print_table(results, cpp, header):
    print(header)
    print("Times: median per call. Ratios: time ratio Strata / peer (below 1 = Strata faster; 0.5 = twice as fast).")
    print("ref = physical reference (C loop, or the BLAS called directly): see the last column and docs/BENCHMARKS.md.")
    print()
    cols = f"{'case':32} {'strata':>9} " + " ".join(f"{p:>9} {'ratio':>6}" for p in PEERS) + "  reference"
    print(cols)
    print("-" * len(cols))
    for r in results:
        if r["status"] != "ok":
            print(f"{r['name']:32} {r['status']}: {r['reason']}")
            continue
        t = r["times"]
        line = f"{r['name']:32} {fmt_time(t['strata']['median']):>9} "
        for p in PEERS:
            if p in t:
                flag = "!" if r.get("check", {}).get(p, "ok") != "ok" else ""
                line += f"{fmt_time(t[p]['median']):>9} {fmt_ratio(r['ratios'][p]):>5}{flag or ' '} "
            else:
                line += f"{'-':>9} {'-':>6} "
        print(line + (f" {r.get('ref_name', '')}" if "ref" in t else ""))
    if any(r.get("check", {}).get(p, "ok") != "ok" for r in results if r["status"] == "ok" for p in PEERS):
        print("! = the results differ beyond tolerance (see 'check' in the JSON): that ratio compares different work.")
    print_train_table(results)
    if cpp:
        print()
        print("C++ micro-benchmarks (Google Benchmark; CPU time per iteration; ratio = time / baseline's time)")
        for binary, res in cpp.items():
            if res["status"] != "ok":
                print(f"  {binary}: {res['status']}: {res['reason']}")
                continue
            for b in res["benchmarks"]:
                rat = f"{b['ratio_cpu']:8.3g} x {b['baseline']}" if "baseline" in b else ""
                print(f"  {binary + '.' + b['name']:44} {fmt_time(b['cpu_ns'] * 1e-9):>9}  {rat}")


# ---------------------------------------------------------------------------------------------------------------------


def run_case(env, c, quick):
    """Sets up, checks and times one case; its buffers are freed when this returns."""
    r = {"name": c["name"], "group": c["group"], "what": c["what"]}
    t0 = time.perf_counter()
    try:
        setup = c["setup"](env)
        sides, meta = setup if isinstance(setup, tuple) else (setup, {})
        work = meta.pop("work", c["work"])
        r.update({k: v for k, v in meta.items() if not k.endswith("_unchecked")})
        r["check"] = check(env, c, sides, meta)  # one call per side: also the first warm-up
        budget = c["budget"] * (0.3 if quick else 1.0)
        # The check's call was each side's first warm-up.
        r["times"] = measure(sides, budget, min_samples=c["min_samples"] or (5 if quick else 7), warmup=0)
        s = r["times"]["strata"]["median"]
        r["ratios"] = {p: s / t["median"] for p, t in r["times"].items() if p != "strata"}
        if work:
            unit, amount = work
            r["throughput"] = {p: {"unit": f"{unit}/s", "median": amount / t["median"]} for p, t in r["times"].items()}
        r["status"] = "ok"
        if c["extra"] is not None:
            del setup, sides  # the extra measurement runs without this case's buffers
            c["extra"](env, r, quick)
    except Skip as e:
        r.update(status="skipped", reason=str(e))
    except Exception as e:  # one broken case must not lose the others' numbers
        r.update(status="error", reason=f"{type(e).__name__}: {e}")
    r["seconds"] = time.perf_counter() - t0
    return r


def matches(name, patterns):
    return not patterns or any(fnmatch.fnmatch(name, p) or p in name for p in patterns)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a subset of the cases with short budgets (under a minute)")
    ap.add_argument("--only", default=None, help="run only cases matching these globs or substrings (comma-separated);"
                    " the C++ micro-benchmarks are cases 'cpp.bench_dispatch' and 'cpp.bench_allocator'")
    ap.add_argument("--json", default=str(DEFAULT_JSON), help=f"where to write the full results (default {DEFAULT_JSON})")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for every side (Strata, PyTorch, oneDNN, OpenBLAS, the C loop); default: all CPUs")
    ap.add_argument("--spin", action="store_true", help="keep the libraries' default busy-waiting thread pools "
                    "(default: OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4, see the note in main)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--train-small", action="store_true", help="train.* cases use the examples' --quick model "
                    "sizes (for tests; the real job's sizes otherwise)")
    ap.add_argument("--train-steps", type=int, default=TRAIN_MEM_STEPS, help=argparse.SUPPRESS)
    ap.add_argument("--train-budget", type=float, default=TRAIN_MEM_BUDGET_S, help=argparse.SUPPRESS)
    # Internal: the subprocess that measures one framework's training-step memory (train_memory_worker).
    ap.add_argument("--train-worker", nargs=2, metavar=("EXAMPLE", "FRAMEWORK"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    TRAIN.update(small=args.train_small, steps=args.train_steps, budget=args.train_budget)
    if args.train_worker:
        res = train_memory_worker(args.train_worker[0], args.train_worker[1], args.threads, args.train_steps,
                                  TRAIN_MEM_WARMUP, args.train_budget, args.train_small)
        print(json.dumps(res))
        return 0
    patterns = [p.strip() for p in args.only.split(",") if p.strip()] if args.only else []

    if args.list:
        for c in CASES:
            print(f"{c['name']:32} {'quick ' if c['quick'] else '      '}{c['what']}")
        for b in CPP_BENCHES:
            print(f"{'cpp.' + b:32} quick C++ micro-benchmarks (build/bench/{b})")
        return 0

    # The thread pools of OpenMP, OpenBLAS and MKL read these once, when the libraries load: set them before.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if not args.spin:
        # Idle worker threads of one side's pool must not spin on the cores the next side is timed on (the sides are
        # interleaved, and there are as many threads per pool as cores): on the shared 2-core machine spinning pools
        # made a 256^3 GEMM 20-50x slower for whichever side came next. Passive waiting costs each side a wake-up
        # per parallel region (microseconds), the same for all.
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"

    t_start = time.time()
    load_start = list(os.getloadavg())
    env = Env(args.threads, args.quick)
    selected = [c for c in CASES if (c["quick"] or not args.quick) and matches(c["name"], patterns)]
    header = (f"Strata benchmark suite ({'quick' if args.quick else 'full'}; {args.threads} threads for every side; "
              f"{len(selected)} cases)")
    print(header, file=sys.stderr)
    results = []
    for c in selected:
        r = run_case(env, c, args.quick)
        results.append(r)
        if r["status"] == "ok":
            rat = "  ".join(f"{p} {fmt_ratio(v)}" for p, v in r["ratios"].items())
            print(f"  {r['name']}: strata {fmt_time(r['times']['strata']['median'])}  {rat}  ({r['seconds']:.1f} s)",
                  file=sys.stderr)
        else:
            print(f"  {r['name']}: {r['status']}: {r['reason']}", file=sys.stderr)

    cpp = {}
    for binary in CPP_BENCHES:
        if matches(f"cpp.{binary}", patterns):
            cpp[binary] = run_cpp(binary, args.quick)
    elapsed = time.time() - t_start

    info = machine_info(env, args.threads)
    info["loadavg_start"], info["loadavg_end"] = load_start, list(os.getloadavg())
    out = {
        "suite": "bench/suite.py",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([Path(sys.executable).name, "bench/suite.py"] + (argv if argv is not None else sys.argv[1:])),
        "quick": args.quick,
        "only": patterns,
        "seconds": elapsed,
        "ratio_definition": "time ratio strata / peer, medians; below 1 = Strata faster",
        "machine": info,
        "threads": {"strata": env.st.get_num_threads(),
                    "torch": env.torch.get_num_threads() if env.torch is not None else None,
                    "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"], "c_loop": args.threads,
                    "numpy_elementwise": 1, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
                    "OPENBLAS_THREAD_TIMEOUT": os.environ.get("OPENBLAS_THREAD_TIMEOUT")},
        "versions": versions(env),
        "autograd": env.has_autograd,
        "cases": results,
        "cpp": cpp,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))

    print()
    print_table(results, cpp, f"{header}, {elapsed:.0f} s\nCPU: {info['cpu_model']} ({info['logical_cpus']} logical "
                f"CPUs, load average {info['loadavg_start'][0]:.1f} at start); {out['versions']['strata_blas']}")
    print(f"\nfull numbers: {path}")
    return 0 if all(r["status"] != "error" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
