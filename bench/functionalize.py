"""Mutation-heavy graphs under strata_cpp with and without the functionalization pass
(strata._dynamo.config.functionalize; Note [Functionalization] in python/strata/_dynamo/functionalize.py)
and the reinplacing after it (strata._dynamo.config.reinplace; Note [Reinplacing] in
python/strata/_inductor/reinplace.py).

For each case: strata eager, strata_cpp as captured (functionalize=False: in-place ops and out= writes
run node by node and block fusion), strata_cpp functionalized without reinplacing and with it, ms per
call (min over repeats; the three compiled variants interleaved repeat by repeat), and the number of
generated kernels in the graph's plan (captured / functionalized). Thread CPU time (run with OMP_NUM_THREADS=1 so
that the kernels run on the calling thread; the script sets strata's own thread count to 1), which other jobs on the machine disturb less.

    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/functionalize.py [--repeat 7]
"""

import argparse
import os
import time

import strata as st
import strata.nn.functional as F
from strata._dynamo import config, eval_frame


def adam_like(p, g, m, v):
    m.mul_(0.9).add_(g, alpha=0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)
    return p


def residual_inplace(x, w):
    h = x @ w
    h += x
    h *= 0.5
    h.relu_()
    h.mul_(h.sigmoid())
    return h


def slice_writes(x, y):
    out = st.empty(x.shape)
    k = x.shape[1] // 2
    out[:, :k] = (x[:, :k] * y[:, :k]).tanh()
    out[:, k:] = x[:, k:] + y[:, k:]
    out.mul_(2)
    return out


def adam_step(p, g, m, v):
    # torch.optim.Adam's single-tensor step (lerp_, mul_/addcmul_, sqrt / bias correction / add_, addcdiv_)
    # at step 10 with lr 1e-3, betas (0.9, 0.999), eps 1e-8
    m.lerp_(g, 0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    denom = (v.sqrt() / (1 - 0.999 ** 10) ** 0.5).add_(1e-8)
    p.addcdiv_(m, denom, value=-1e-3 / (1 - 0.9 ** 10))
    return p


def ln_dropout(x, h, w, b):
    return F.layer_norm(x + F.dropout(h, 0.1, training=True), (x.shape[-1],), w, b)


CASES = [
    ("Adam-like update, 4 x 1M floats in place", adam_like,
     lambda: (st.randn(1 << 20), st.randn(1 << 20), st.randn(1 << 20), st.rand(1 << 20))),
    ("Adam step (lerp_, addcmul_, addcdiv_), 1M floats", adam_step,
     lambda: (st.randn(1 << 20), st.randn(1 << 20), st.randn(1 << 20), st.rand(1 << 20))),
    ("x@w, += x, *= .5, relu_, mul_ (4096x64 @ 64x64)", residual_inplace,
     lambda: (st.randn(4096, 64), st.randn(64, 64) * 0.1)),
    ("out[:, :k] = ..., out[:, k:] = ..., mul_ (2048x1024)", slice_writes,
     lambda: (st.randn(2048, 1024), st.randn(2048, 1024))),
    ("LayerNorm(x + dropout(h)) (4096x1024)", ln_dropout,
     lambda: (st.randn(4096, 1024), st.randn(4096, 1024), st.randn(1024), st.randn(1024))),
]


def per_call(fn, args, n=5):
    t0 = time.thread_time()
    for _ in range(n):
        fn(*args)
    return (time.thread_time() - t0) / n


def kernels(fn):
    for s in eval_frame.states_of(fn.__code__):
        for e in s.entries:
            r = e.run.__globals__.get("R")
            r = getattr(r, "functional", r)
            return getattr(r, "num_kernels", 0)
    return None


VARIANTS = [("captured", False, False), ("functional", True, False), ("reinplaced", True, True)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    st.set_num_threads(1)  # eager's own thread pool too: everything on the calling thread
    print(f"load average {os.getloadavg()[0]:.1f}; ms of thread CPU time per call, min of {a.repeat} x 5 calls")
    print(f"    {'case':52}{'eager':>9}{'captured':>10}{'functional':>11}{'reinplaced':>11}  kernels  "
          f"reinplaced vs functional / captured")
    for name, fn, make in CASES:
        st.manual_seed(0)
        args = make()
        compiled, nk = {}, {}
        for label, func, rein in VARIANTS:
            config.functionalize, config.reinplace = func, rein
            st.compiler.reset()
            cf = st.compile(fn, backend="strata_cpp")
            cf(*args)
            # the entry's graph callable (what the cached call runs after its guards), kept across reset()
            r = eval_frame.states_of(fn.__code__)[0].entries[0].run.__globals__["R"]
            g = getattr(getattr(r, "functional", r), "graph", None)
            assert g is None or [g.value(v).name for v in g.inputs] == list(fn.__code__.co_varnames[:len(args)])
            compiled[label] = r
            nk[label] = kernels(fn)
        config.functionalize, config.reinplace = True, True
        best = {k: float("inf") for k in ["eager"] + [v[0] for v in VARIANTS]}
        for _ in range(a.repeat):
            best["eager"] = min(best["eager"], per_call(fn, args))
            for label, _, _ in VARIANTS:
                best[label] = min(best[label], per_call(compiled[label], args))
        t = {k: v * 1e3 for k, v in best.items()}
        print(f"    {name:52}{t['eager']:9.3f}{t['captured']:10.3f}{t['functional']:11.3f}{t['reinplaced']:11.3f}"
              f"  {nk['captured']} / {nk['functional']}    {t['functional'] / t['reinplaced']:5.2f}x / "
              f"{t['captured'] / t['reinplaced']:5.2f}x")


if __name__ == "__main__":
    main()
