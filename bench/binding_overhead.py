"""Per-call cost of the Python binding, measured on a tiny op (add of two
4-element float32 tensors, so the kernel itself is negligible).

    PYTHONPATH=python python bench/binding_overhead.py [--calls N] [--repeat R] [--json PATH]

Entry points timed (see python/src/experimental_bind.cpp for the _C._raw_* ones):
  strata.add(a, b)        the generic nanobind binding: schema-driven parsing of
                          (args, kwargs) into a Stack, call_boxed, result conversion
  a + b, a.add(b)         the same, behind a Python lambda / a bound method
  _C._raw_add_boxed(a,b)  raw METH_FASTCALL entry, but Stack + call_boxed (no parsing)
  _C._nb_add(a, b)        nanobind's typed path: two `const Tensor&`, unboxed call
  _C._raw_add(a, b)       raw METH_FASTCALL entry + unboxed C++ call: the floor
  _C._raw_noop(a, b)      raw entry returning its argument: the cost of any call
  _C._raw_wrap(a, b)      raw entry wrapping a tensor into a new Python object
  _C._bench_cpp_add       add(a, b) in a C++ loop: dispatcher + kernel + allocation
  torch.add(a, b)         PyTorch (CPU), when installed
  numpy.add(a, b)         NumPy

Results: a table on stdout and JSON (default bench/results/binding_overhead.json).
The numbers are minimums over repeats (the least disturbed run), in ns per call.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

import strata

_C = strata._C


def per_call_ns(fn, a, b, calls, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(a, b)
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "binding_overhead.json"))
    args = p.parse_args()
    strata.set_num_threads(1)

    a = strata.tensor([1.0, 2.0, 3.0, 4.0])
    b = strata.tensor([0.5, 0.25, 0.125, 0.0625])
    want = (a + b).tolist()
    for f in (_C._raw_add, _C._raw_add_boxed, _C._nb_add, strata.add):
        assert f(a, b).tolist() == want

    add = strata.add
    cases = [
        ("strata.add(a, b)  [generic binding]", add, a, b),
        ("a + b", lambda x, y: x + y, a, b),
        ("a.add(b)", lambda x, y: x.add(y), a, b),
        ("_C._raw_add_boxed(a, b)", _C._raw_add_boxed, a, b),
        ("_C._nb_add(a, b)", _C._nb_add, a, b),
        ("_C._raw_add(a, b)", _C._raw_add, a, b),
        ("_C._raw_noop(a, b)", _C._raw_noop, a, b),
        ("_C._raw_wrap(a, b)", _C._raw_wrap, a, b),
    ]
    try:
        import torch

        torch.set_num_threads(1)
        ta, tb = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.5, 0.25, 0.125, 0.0625])
        cases.append(("torch.add(a, b)", torch.add, ta, tb))
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    na, nb_ = np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    cases.append(("numpy.add(a, b)", np.add, na, nb_))

    results = {}
    for name, fn, x, y in cases:
        per_call_ns(fn, x, y, max(args.calls // 10, 100), 1)  # warm-up
        results[name] = per_call_ns(fn, x, y, args.calls, args.repeat)
    cpp = min(_C._bench_cpp_add(a, b, args.calls) for _ in range(args.repeat))
    results["C++ add(a, b) loop (no Python)"] = cpp

    raw = results["_C._raw_add(a, b)"]
    generic = results["strata.add(a, b)  [generic binding]"]
    torch_ns = results.get("torch.add(a, b)")
    numpy_ns = results["numpy.add(a, b)"]
    print(f"{'entry point':42s} {'ns/call':>9s} {'/raw_add':>9s} {'/torch':>8s} {'/numpy':>8s}")
    for name, ns in results.items():
        t = f"{ns / torch_ns:8.2f}" if torch_ns else f"{'-':>8s}"
        print(f"{name:42s} {ns:9.0f} {ns / raw:9.2f} {t} {ns / numpy_ns:8.2f}")

    noop, wrap, boxed = results["_C._raw_noop(a, b)"], results["_C._raw_wrap(a, b)"], results["_C._raw_add_boxed(a, b)"]
    breakdown = {
        "python call + argument type checks (raw_noop)": noop,
        "result wrapping (raw_wrap - raw_noop)": wrap - noop,
        "C++ dispatch + kernel + allocation (C++ loop)": cpp,
        "Stack/IValue boxing + call_boxed (raw_add_boxed - raw_add)": boxed - raw,
        "schema parsing, nanobind args/kwargs, result conversion (generic - raw_add_boxed)": generic - boxed,
    }
    print("\nwhere the generic binding's time goes (ns/call, approximate: the parts are measured separately):")
    for k, v in breakdown.items():
        print(f"  {v:7.0f}  {k}")
    print(f"  {generic:7.0f}  total (strata.add)")

    out = {
        "ns_per_call": results,
        "ratios": {
            "generic / raw_add": generic / raw,
            "generic / torch": generic / torch_ns if torch_ns else None,
            "generic / numpy": generic / numpy_ns,
            "raw_add / torch": raw / torch_ns if torch_ns else None,
            "raw_add / numpy": raw / numpy_ns,
        },
        "breakdown_ns": breakdown,
        "config": {"calls": args.calls, "repeat": args.repeat, "python": sys.version.split()[0],
                   "numpy": np.__version__, "torch": torch_version, "machine": platform.machine(),
                   "cpu_capability": _C._cpu_capability()},
    }
    print("\nratios:", json.dumps(out["ratios"], indent=1))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
