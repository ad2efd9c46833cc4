"""strata.sparse.mm against torch.sparse.mm on a Cora-sized graph (2708 nodes, 13264 entries), forward and
forward + backward into the dense operand, one thread each, in one process (docs/SPARSE.md, "Speed").

    PYTHONPATH=python python bench/sparse_mm.py [--repeat 30]
"""

import argparse
import time
import warnings

import numpy as np

import strata

warnings.filterwarnings("ignore")


def _time(f, k):
    f()
    t0 = time.perf_counter()
    for _ in range(k):
        f()
    return (time.perf_counter() - t0) / k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    strata.set_num_threads(1)
    rs = np.random.RandomState(0)
    n, nnz = 2708, 13264
    ind = rs.randint(0, n, size=(2, nnz))
    val = rs.rand(nnz).astype(np.float32)
    s = strata.sparse_coo_tensor(ind, val, (n, n)).coalesce()
    t = torch.sparse_coo_tensor(torch.tensor(ind), torch.tensor(val), (n, n)).coalesce()
    for f in (16, 64):
        x = rs.randn(n, f).astype(np.float32)
        xs, xt = strata.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        a = _time(lambda: strata.sparse.mm(s, xs.detach()), args.repeat)
        b = _time(lambda: torch.sparse.mm(t, xt.detach()), args.repeat)
        c = _time(lambda: strata.sparse.mm(s, xs).sum().backward(), args.repeat)
        d = _time(lambda: torch.sparse.mm(t, xt).sum().backward(), args.repeat)
        print(f"F={f:3d}  forward: strata {a * 1e3:7.3f} ms  torch {b * 1e3:7.3f} ms  ratio {a / b:5.2f}   "
              f"forward+backward: strata {c * 1e3:7.3f} ms  torch {d * 1e3:7.3f} ms  ratio {c / d:5.2f}")


if __name__ == "__main__":
    main()
