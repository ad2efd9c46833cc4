"""ns per GuardSet.check() for the guard sets strata.compile builds most often.

  PYTHONPATH=python python bench/guards_bench.py
Two figures per case: "py" is gs.check(...) called from Python (timeit, method
call included), "c++" is check() looped in C++ (what the frame-evaluation hook
pays). The module case also times every guard read from its root
(_check_unshared) against the shared-prefix tree walk, and attribute ("attr")
against namespace ("dict_item") steps for _modules/_parameters."""
import timeit

import strata
import strata.nn as nn
from strata._C import _guards

G = {}


def py_ns(gs, args, number):
    check = gs.check
    return min(timeit.repeat(lambda: check(args, G, None), number=number, repeat=7)) / number * 1e9


def cpp_ns(gs, args, number, shared=True):
    return min(gs._time_check(args, G, None, number, shared) for _ in range(7))


def tensor_guards(n):
    gs = _guards.GuardSet([f"x{i}" for i in range(n)])
    gs.add_global_state(**_guards.global_state())
    xs = tuple(strata.randn(8, 16) for _ in range(n))
    for i in range(n):
        gs.add_tensor([("arg", i)], strata.float32, "cpu", False, [8, 16], [16, 1])
    return gs, xs


class Net(nn.Module):
    def __init__(self, layers):
        super().__init__()
        for i in range(layers):
            setattr(self, f"layer{i}", nn.Linear(4, 4))


def module_guards(m, step):
    gs = _guards.GuardSet(["self", "x"])
    gs.add_global_state(**_guards.global_state())
    gs.add_type([("arg", 0)], type(m))
    gs.add_equals([("arg", 0), ("attr", "training")], True)
    for name, sub in m._modules.items():
        path = [("arg", 0), (step, "_modules"), ("dict_item", name)]
        for pname, p in sub._parameters.items():
            gs.add_tensor(path + [(step, "_parameters"), ("dict_item", pname)], p.dtype, "cpu", True,
                          list(p.shape), list(p.stride()))
    gs.add_tensor([("arg", 1)], strata.float32, "cpu", False, [None, 4], None)
    return gs


def main():
    for n in (1, 10):
        gs, xs = tensor_guards(n)
        print(f"{n:2d} tensor guard(s) + global state: py {py_ns(gs, xs, 500_000):6.0f} ns   "
              f"c++ {cpp_ns(gs, xs, 1_000_000):6.0f} ns")
    m = Net(25)
    args = (m, strata.randn(2, 4))
    for step in ("attr", "dict_item"):
        gs = module_guards(m, step)
        assert gs.check(args, G, None) and gs._check_unshared(args, G, None)
        print(f"module, 50 parameters via {step:9s} ({len(gs)} guards, {gs._num_nodes} nodes): "
              f"shared py {py_ns(gs, args, 50_000):5.0f} ns  c++ {cpp_ns(gs, args, 100_000):5.0f} ns   "
              f"unshared c++ {cpp_ns(gs, args, 100_000, shared=False):5.0f} ns")
    empty = _guards.GuardSet([])
    print(f"empty set: py {py_ns(empty, (), 500_000):6.0f} ns   c++ {cpp_ns(empty, (), 1_000_000):6.0f} ns")


if __name__ == "__main__":
    main()
