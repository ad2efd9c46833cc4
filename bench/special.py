"""Throughput of torch.special functions, Strata against torch in the same run.

Each function on 1e6 elements (float32 and float64), with 1 thread and with the
default thread count; the minimum over several repetitions (the machine may be
shared). Prints the times and the ratio torch time / strata time (>= 1.0 means
Strata is at least as fast).

    PYTHONPATH=python .venv/bin/python bench/special.py                 # every function
    PYTHONPATH=python .venv/bin/python bench/special.py ndtri i0e       # a subset
    options: --n N (elements), --reps R, --threads 1,0 (0 = default)
"""
import argparse
import time

import numpy as np
import torch

import strata


def _u(lo, hi):
    return lambda rng, n: rng.uniform(lo, hi, n)


def _pos_int(hi):
    return lambda rng, n: rng.integers(0, hi, n).astype(np.float64)


# name -> list of input generators (one per argument)
CASES = {
    "airy_ai": [_u(-10, 10)],
    "bessel_j0": [_u(-30, 30)],
    "bessel_j1": [_u(-30, 30)],
    "bessel_y0": [_u(0.01, 30)],
    "bessel_y1": [_u(0.01, 30)],
    "modified_bessel_i0": [_u(-30, 30)],
    "modified_bessel_i1": [_u(-30, 30)],
    "modified_bessel_k0": [_u(0.01, 30)],
    "modified_bessel_k1": [_u(0.01, 30)],
    "scaled_modified_bessel_k0": [_u(0.01, 30)],
    "scaled_modified_bessel_k1": [_u(0.01, 30)],
    "spherical_bessel_j0": [_u(-30, 30)],
    "entr": [_u(0, 10)],
    "erf": [_u(-5, 5)],
    "erfc": [_u(-5, 5)],
    "erfcx": [_u(-5, 30)],
    "erfinv": [_u(-1, 1)],
    "expit": [_u(-10, 10)],
    "exp2": [_u(-10, 10)],
    "expm1": [_u(-5, 5)],
    "gammaln": [_u(0.1, 30)],
    "digamma": [_u(0.1, 30)],
    "i0": [_u(-30, 30)],
    "i0e": [_u(-30, 30)],
    "i1": [_u(-30, 30)],
    "i1e": [_u(-30, 30)],
    "log_ndtr": [_u(-30, 10)],
    "ndtr": [_u(-10, 10)],
    "ndtri": [_u(0, 1)],
    "sinc": [_u(-10, 10)],
    "log1p": [_u(0, 10)],
    "logit": [_u(0, 1)],
    "xlogy": [_u(0, 10), _u(0, 10)],
    "xlog1py": [_u(0, 10), _u(0, 10)],
    "zeta": [_u(1.1, 10), _u(0.1, 10)],
    "gammainc": [_u(0.1, 20), _u(0, 30)],
    "gammaincc": [_u(0.1, 20), _u(0, 30)],
    "multigammaln": None,  # (x, p) with an int p: below
    "polygamma": None,
    "chebyshev_polynomial_t": [_u(-1, 1), _pos_int(10)],
    "chebyshev_polynomial_u": [_u(-1, 1), _pos_int(10)],
    "chebyshev_polynomial_v": [_u(-1, 1), _pos_int(10)],
    "chebyshev_polynomial_w": [_u(-1, 1), _pos_int(10)],
    "shifted_chebyshev_polynomial_t": [_u(0, 1), _pos_int(10)],
    "shifted_chebyshev_polynomial_u": [_u(0, 1), _pos_int(10)],
    "shifted_chebyshev_polynomial_v": [_u(0, 1), _pos_int(10)],
    "shifted_chebyshev_polynomial_w": [_u(0, 1), _pos_int(10)],
    "hermite_polynomial_h": [_u(-2, 2), _pos_int(10)],
    "hermite_polynomial_he": [_u(-2, 2), _pos_int(10)],
    "laguerre_polynomial_l": [_u(0, 5), _pos_int(10)],
    "legendre_polynomial_p": [_u(-1, 1), _pos_int(10)],
}
EXTRA = {  # functions with a non-tensor argument
    "multigammaln": ([_u(2, 30)], (3,)),
    "polygamma": ([_u(0.1, 30)], (1,), True),  # polygamma(n, x): n first
}


def best(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", default="1,0")
    args = ap.parse_args()
    names = args.names or [k for k in CASES]
    default_threads = torch.get_num_threads()
    rng = np.random.default_rng(0)
    print(f"{'function':32s} {'dtype':8s} {'thr':>3s} {'torch ms':>9s} {'strata ms':>9s} {'ratio':>6s}")
    for name in names:
        spec = CASES.get(name)
        extra, scalar_first = (), False
        if spec is None:
            e = EXTRA[name]
            spec, extra = e[0], e[1]
            scalar_first = len(e) > 2
        arrays = [g(rng, args.n) for g in spec]
        tf, sf = getattr(torch.special, name), getattr(strata.special, name)
        for dt in ("float32", "float64"):
            targs = [torch.from_numpy(a.astype(dt)) for a in arrays]
            sargs = [strata.tensor(a.astype(dt)) for a in arrays]
            if scalar_first:
                tcall = lambda: tf(*extra, *targs)  # noqa: E731
                scall = lambda: sf(*extra, *sargs)  # noqa: E731
            else:
                tcall = lambda: tf(*targs, *extra)  # noqa: E731
                scall = lambda: sf(*sargs, *extra)  # noqa: E731
            for th in (int(t) for t in args.threads.split(",")):
                nt = th or default_threads
                torch.set_num_threads(nt)
                strata.set_num_threads(nt)
                tt, st = best(tcall, args.reps), best(scall, args.reps)
                print(f"{name:32s} {dt:8s} {nt:3d} {tt * 1e3:9.2f} {st * 1e3:9.2f} {tt / st:6.2f}", flush=True)


if __name__ == "__main__":
    main()
