"""A 2-layer LSTM (input 128, hidden 256, T=64, B=32, float32), forward and forward+backward, Strata against torch
in the same run (both with their default threads), interleaved so that both see the same machine load. Prints the
medians and minima and the ratios Strata time / torch time (below 1.0: Strata is faster).

    PYTHONPATH=python .venv/bin/python bench/rnn.py [--mode LSTM|GRU|RNN] [--reps 15] [--bidirectional]
"""
import argparse
import time

import numpy as np
import strata as st
import torch

p = argparse.ArgumentParser()
p.add_argument("--mode", default="LSTM", choices=["LSTM", "GRU", "RNN"])
p.add_argument("--input", type=int, default=128)
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--steps", type=int, default=64)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--bidirectional", action="store_true")
p.add_argument("--reps", type=int, default=15)
p.add_argument("--threads", type=int, default=0, help="set both libraries' threads (default: leave their defaults)")
a = p.parse_args()
if a.threads:
    st.set_num_threads(a.threads)
    torch.set_num_threads(a.threads)

torch.manual_seed(0)
tm = getattr(torch.nn, a.mode)(a.input, a.hidden, a.layers, bidirectional=a.bidirectional)
sm = getattr(st.nn, a.mode)(a.input, a.hidden, a.layers, bidirectional=a.bidirectional)
with st.no_grad():
    for (_, pt), (_, ps) in zip(tm.named_parameters(), sm.named_parameters()):
        ps.copy_(st.tensor(pt.detach().numpy()))
x_np = np.random.default_rng(0).standard_normal((a.steps, a.batch, a.input)).astype(np.float32)
xt, xs = torch.tensor(x_np), st.tensor(x_np)


def fwd(lib, m, x):
    with lib.no_grad():
        m(x)


def fwd_bwd(lib, m, x):
    x.requires_grad_(True)
    out = m(x)[0]
    out.sum().backward()
    x.grad = None
    for q in m.parameters():
        q.grad = None


def median_ms(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


np.testing.assert_allclose(sm(xs)[0].detach().numpy(), tm(xt)[0].detach().numpy(), atol=1e-4)
print(f"{a.mode} layers={a.layers} input={a.input} hidden={a.hidden} T={a.steps} B={a.batch} "
      f"bidirectional={a.bidirectional}; threads strata={st.get_num_threads()} torch={torch.get_num_threads()}")
for name, fn in [("forward", fwd), ("forward+backward", fwd_bwd)]:
    for _ in range(3):  # warm-up
        fn(st, sm, xs)
        fn(torch, tm, xt)
    ts, tt = [], []
    for _ in range(a.reps):
        ts.append(median_ms(fn, st, sm, xs))
        tt.append(median_ms(fn, torch, tm, xt))
    ms, mt = float(np.median(ts)), float(np.median(tt))
    # The minimum is what an unloaded machine gives (this machine is shared); the median what it gave this run.
    print(f"{name:17s} median: strata {ms:8.2f} ms  torch {mt:8.2f} ms  ratio {ms / mt:5.2f}   "
          f"min: strata {min(ts):8.2f} ms  torch {min(tt):8.2f} ms  ratio {min(ts) / min(tt):5.2f}")
