"""strata.func against torch.func in one process (float64, 1 thread each so the two do not
compete for the shared cores): the Hessian of a small function, jacrev and jacfwd of an
MLP's output with respect to its input, grad of an MLP loss with respect to its
parameters (functional_call), and a Hessian-vector product. Prints the median of several
repetitions per case and the strata/torch ratios of medians and of minimums (above 1:
strata slower; on a loaded machine the minimums are the steadier figure).

    PYTHONPATH=python .venv/bin/python bench/func.py [--reps 15]
"""
import argparse
import time

import numpy as np
import torch

import strata
import strata.func as sf
import torch.func as tf


def median_time(fn, reps):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2], ts[0]


def cases(lib, fn):
    g = np.random.default_rng(0)
    x8 = lib.tensor(g.standard_normal(8))
    a = lib.tensor(g.standard_normal((8, 8)))

    def small(x):
        return ((a @ x).tanh() * x.exp()).sum() + (x * x + 1).log().sum()

    model = lib.nn.Sequential(lib.nn.Linear(16, 64), lib.nn.Tanh(), lib.nn.Linear(64, 64), lib.nn.Tanh(),
                              lib.nn.Linear(64, 10)).double()
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(g.standard_normal(tuple(p.shape)) * 0.2))
    params = {k: v.detach() for k, v in model.named_parameters()}
    xin = lib.tensor(g.standard_normal(16))
    batch = lib.tensor(g.standard_normal((32, 16)))
    target = lib.tensor(g.integers(0, 10, 32))

    def net(x):
        return fn.functional_call(model, params, (x,))

    def loss(p):
        return lib.nn.functional.cross_entropy(fn.functional_call(model, p, (batch,)), target)

    v8 = lib.tensor(g.standard_normal(8))
    x64 = lib.tensor(g.standard_normal(64))
    b64 = lib.tensor(g.standard_normal((64, 64)) / 8)

    def wide(x):
        return ((b64 @ x).tanh() * x.exp()).sum()
    return {
        "hessian(small f), 8 inputs": lambda: fn.hessian(small)(x8),
        "jacrev(jacrev(small f))": lambda: fn.jacrev(fn.jacrev(small))(x8),
        "hessian(f), 64 inputs": lambda: fn.hessian(wide)(x64),
        "jacrev(MLP 16-64-64-10)": lambda: fn.jacrev(net)(xin),
        "jacfwd(MLP 16-64-64-10)": lambda: fn.jacfwd(net)(xin),
        "grad(MLP loss) wrt params": lambda: fn.grad(loss)(params),
        "hvp = jvp(grad(small f))": lambda: fn.jvp(fn.grad(small), (x8,), (v8,)),
        "vjp(grad(small f)) (hvp)": lambda: fn.vjp(fn.grad(small), x8)[1](v8),
    }


def check(a, b, name):
    # the two libraries must agree before their times are compared
    if isinstance(b, torch.Tensor):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-8, atol=1e-10, err_msg=name)
    elif isinstance(b, dict):
        for k in b:
            check(a[k], b[k], name)
    else:
        for x, y in zip(a, b, strict=True):
            check(x, y, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    strata.set_num_threads(1)
    torch.set_num_threads(1)
    cs, ct = cases(strata, sf), cases(torch, tf)
    print(f"{'case':32s} {'strata ms':>10s} {'torch ms':>10s} {'ratio':>7s} {'min ratio':>9s}   (medians; mins in brackets)")
    for name in cs:
        check(cs[name](), ct[name](), name)
        ms, mins = median_time(cs[name], args.reps)
        mt, mint = median_time(ct[name], args.reps)
        print(f"{name:32s} {ms * 1e3:10.3f} {mt * 1e3:10.3f} {ms / mt:7.2f} {mins / mint:9.2f}   "
              f"[{mins * 1e3:.3f} / {mint * 1e3:.3f}]")


if __name__ == "__main__":
    main()
