"""Per-example gradients of an MLP: strata.vmap over autograd.grad (w.r.t. parameters lifted to the vmap level)
next to torch.func.vmap(torch.func.grad(...)) in the same process, and a Python loop of per-example backward
passes for both. Also a forward-only vmap (batched MLP) against torch.func.vmap.

    .venv/bin/python bench/vmap.py [--batch 64] [--sizes 784,256,10] [--repeat 15] [--threads 2]

Times are the minimum over `repeat` runs (ms); ratios are torch time / Strata time (>= 1: Strata faster).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import strata  # noqa: E402
from strata.func._vmap import _lift_to_active_levels  # noqa: E402


def tmin(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--sizes", default="784,256,10")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-loop", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    strata.set_num_threads(a.threads)
    din, dh, dout = (int(s) for s in a.sizes.split(","))
    rs = np.random.RandomState(0)
    npp = [rs.randn(dh, din).astype(np.float32) * 0.05, rs.randn(dh).astype(np.float32) * 0.05,
           rs.randn(dout, dh).astype(np.float32) * 0.05, rs.randn(dout).astype(np.float32) * 0.05]
    X = rs.randn(a.batch, din).astype(np.float32)
    Y = rs.randint(0, dout, a.batch)

    def loss(m, ps, x, y):
        W1, b1, W2, b2 = ps
        h = m.nn.functional.linear(x, W1, b1).relu()
        return m.nn.functional.cross_entropy(m.nn.functional.linear(h, W2, b2)[None], y[None])

    sp = [strata.tensor(p, requires_grad=True) for p in npp]
    sx, sy = strata.tensor(X), strata.tensor(Y)

    def s_one(x, y):
        lifted = [_lift_to_active_levels(p) for p in sp]
        return strata.autograd.grad(loss(strata, lifted, x, y), lifted)
    s_vmap = strata.vmap(s_one)

    tp = [torch.tensor(p) for p in npp]
    tx, ty = torch.tensor(X), torch.tensor(Y)
    t_vmap = torch.func.vmap(torch.func.grad(lambda ps, x, y: loss(torch, ps, x, y)), in_dims=(None, 0, 0))

    gs, gt = s_vmap(sx, sy), t_vmap(tp, tx, ty)
    err = max(float(np.abs(g.numpy() - h.numpy()).max()) for g, h in zip(gs, gt))

    rows = []
    ts = tmin(lambda: s_vmap(sx, sy), a.repeat)
    tt = tmin(lambda: t_vmap(tp, tx, ty), a.repeat)
    rows.append(("per-example grads, vmap", ts, tt))

    if not a.no_loop:
        tpg = [torch.tensor(p, requires_grad=True) for p in npp]

        def s_loop():
            return [strata.autograd.grad(loss(strata, sp, sx[i], sy[i]), sp) for i in range(a.batch)]

        def t_loop():
            return [torch.autograd.grad(loss(torch, tpg, tx[i], ty[i]), tpg) for i in range(a.batch)]
        rows.append(("per-example grads, Python loop", tmin(s_loop, max(3, a.repeat // 3)),
                     tmin(t_loop, max(3, a.repeat // 3))))

    sf = strata.vmap(lambda x: loss(strata, [p.detach() for p in sp], x, sy[0]))
    tf = torch.func.vmap(lambda x: loss(torch, tp, x, ty[0]))
    rows.append(("forward only (vmap of the loss)", tmin(lambda: sf(sx), a.repeat), tmin(lambda: tf(tx), a.repeat)))

    print(f"batch {a.batch}, MLP {din}-{dh}-{dout}, threads {a.threads}; max |strata - torch| of the per-example "
          f"grads: {err:.2e}")
    print(f"{'case':36s} {'strata ms':>10s} {'torch ms':>10s} {'torch/strata':>13s}")
    for name, s, t in rows:
        print(f"{name:36s} {s:10.3f} {t:10.3f} {t / s:12.2f}x")


if __name__ == "__main__":
    main()
