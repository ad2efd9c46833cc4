"""A pre-norm transformer encoder block on a jagged batch (nested q/k/v through Linear, SDPA, LayerNorm),
forward + backward, Strata against torch 2.13 in one process, one thread each (docs/NESTED.md).

    PYTHONPATH=python python bench/nested_block.py [B] [E] [H]
"""

import sys
import time

import numpy as np

import strata

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def block(m, E, H, seed=0):
    nn = m.nn
    g = np.random.RandomState(seed)
    mods = dict(ln1=nn.LayerNorm(E), ln2=nn.LayerNorm(E), q=nn.Linear(E, E), k=nn.Linear(E, E), v=nn.Linear(E, E),
                out=nn.Linear(E, E), ff1=nn.Linear(E, 4 * E), ff2=nn.Linear(4 * E, E))
    with m.no_grad():
        for mod in mods.values():
            mod.weight.copy_(m.tensor((g.randn(*mod.weight.shape) / np.sqrt(E)).astype(np.float32)))
            mod.bias.zero_()

    def f(x):
        F = m.nn.functional
        h = mods["ln1"](x)
        q, k, v = (mods[n](h).unflatten(-1, [H, E // H]).transpose(1, 2) for n in "qkv")
        x = x + mods["out"](F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(-2))
        return x + mods["ff2"](F.gelu(mods["ff1"](mods["ln2"](x))))
    return f


def run(m, f, arrs, reps):
    best = float("inf")
    for _ in range(reps):
        xs = [m.tensor(a, requires_grad=True) for a in arrs]
        t0 = time.perf_counter()
        y = f(m.nested.as_nested_tensor(xs, layout=m.jagged))
        y.values().pow(2).sum().backward()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    B = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    E = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    H = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    rs = np.random.RandomState(1)
    arrs = [rs.randn(int(n), E).astype(np.float32) for n in rs.randint(8, 129, size=B)]
    strata.set_num_threads(1)
    ts = run(strata, block(strata, E, H), arrs, 10)
    line = f"B={B} E={E} H={H} tokens={sum(len(a) for a in arrs)}: strata {ts * 1e3:.1f} ms"
    if torch is not None:
        torch.set_num_threads(1)
        tt = run(torch, block(torch, E, H), arrs, 10)
        line += f", torch {tt * 1e3:.1f} ms, ratio {ts / tt:.2f}x torch's time"
    print(line)


if __name__ == "__main__":
    main()
