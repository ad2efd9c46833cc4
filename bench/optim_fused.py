"""Step time of strata.optim Adam/AdamW/SGD with fused=True (the kernels of decl/optim.def), and of the composed
update, against torch on a model-sized parameter set: 24 blocks of (512x512 x4, 2048x512, 512x2048, three vectors),
216 float32 tensors, 75.6M parameters. Best of 3 runs of 8 steps each.

    PYTHONPATH=python .venv/bin/python bench/optim_fused.py [threads]
"""
import sys
import time

import numpy as np
import strata as st
import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(threads)
st.set_num_threads(threads)
shapes = []
for _ in range(24):
    shapes += [(512, 512)] * 4 + [(2048, 512), (512, 2048), (512,), (512,), (2048,)]
rng = np.random.default_rng(0)
arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
grads = [rng.standard_normal(s).astype(np.float32) * 1e-2 for s in shapes]
print(f"{len(shapes)} tensors, {sum(a.size for a in arrays) / 1e6:.1f}M params, {threads} threads")


def make(lib, name, kw):
    ps = [lib.tensor(a) for a in arrays]
    for p, g in zip(ps, grads):
        p.grad = lib.tensor(g)
    return getattr(lib.optim, name)(ps, **kw)


def timeit(opt, n=8):
    opt.step()  # state creation
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            opt.step()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e3


cases = [("Adam", dict(lr=1e-3, fused=True)), ("AdamW", dict(lr=1e-3, fused=True)),
         ("SGD", dict(lr=1e-2, momentum=0.9, fused=True)), ("Adam", dict(lr=1e-3)),
         ("Adam", dict(lr=1e-3, foreach=True))]
for name, kw in cases:
    with torch.no_grad():
        t = timeit(make(torch, name, kw))
    s = timeit(make(st, name, kw))
    print(f"{name:6s} {str(kw):40s} strata {s:8.2f} ms  torch {t:8.2f} ms  ratio {s / t:5.2f}")
