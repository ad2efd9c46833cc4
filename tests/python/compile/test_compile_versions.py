"""strata.compile on the constructs whose bytecode differs between CPython 3.11 and 3.12.

scripts/test.sh runs this file under both versions. Each test checks the compiled result
against eager code and, where the construct must not break the graph, captures it with
fullgraph=True; on 3.12 it also checks that the function really contains the 3.12 bytecode
it is about (so the test cannot pass by exercising something else)."""

import dis
import sys

import pytest

import strata
import strata.nn as nn
from strata._dynamo.convert import CompileError

from compile_testutil import same

PY312 = sys.version_info >= (3, 12)



def opnames(fn):
    """Every opname of fn's code and of the code objects nested in it."""
    names = set()
    todo = [fn.__code__]
    while todo:
        code = todo.pop()
        names.update(i.opname for i in dis.get_instructions(code))
        todo.extend(c for c in code.co_consts if isinstance(c, type(code)))
    return names


def uses(fn, *ops):
    """On 3.12, asserts that fn's bytecode contains each of ops (3.11 spells them differently)."""
    if PY312:
        missing = set(ops) - opnames(fn)
        assert not missing, f"{fn.__name__} has no {sorted(missing)} on this version"


def check(fn, *args, fullgraph=True, graphs=None):
    """fn compiled (in one graph unless fullgraph=False) gives eager's results, also when
    called again from the cache; graphs: the expected graph count (explain)."""
    ref = fn(*args)
    cf = strata.compile(fn, fullgraph=fullgraph)
    same(cf(*args), ref)
    same(cf(*args), ref)
    if graphs is not None:
        ex = strata.compiler.explain(fn)(*args)
        assert ex.graph_count == graphs, ex.break_reasons
    return ref


# -- comprehensions (3.12 inlines them into the frame: LOAD_FAST_AND_CLEAR ... END_FOR) ----------

def test_list_comprehension_over_tensors_and_rows():
    def f(xs, x):
        ys = [t * 2 + 1 for t in xs]
        rows = [r.sum() for r in x]
        pairs = [a * b for a in xs for b in ys if True]
        return ys, rows, pairs

    uses(f, "LOAD_FAST_AND_CLEAR", "END_FOR", "LIST_APPEND")
    check(f, [strata.randn(3), strata.randn(3)], strata.randn(4, 2))


def test_dict_comprehension_and_nested_comprehension():
    def f(d, x):
        scaled = {k: v * x for k, v in d.items()}
        grid = [[x[i] * j for j in range(2)] for i in range(3)]
        keyed = {f"k{i}": t.relu() for i, t in enumerate(scaled.values())}
        return scaled, grid, keyed

    uses(f, "LOAD_FAST_AND_CLEAR", "MAP_ADD")
    check(f, {"a": strata.randn(3), "b": strata.randn(3)}, strata.randn(3))


def test_comprehension_variable_shadows_a_local():
    # 3.12 saves the outer t (LOAD_FAST_AND_CLEAR) and restores it after the loop; an outer
    # variable that was never bound must stay unbound (the NULL that STORE_FAST restores).
    def f(xs, t):
        ys = [t * 3 for t in xs]
        return ys, t

    def g(xs):
        ys = [u + 1 for u in xs]
        u = len(ys)
        return ys, u

    uses(f, "LOAD_FAST_AND_CLEAR")
    check(f, [strata.randn(2), strata.randn(2)], strata.ones(2))
    check(g, [strata.randn(2), strata.randn(2)])


def test_comprehension_reads_outer_locals_and_closures():
    def f(xs, w):
        scale = w.sum()

        def add(t):
            return t + scale

        return [add(t) * scale for t in xs], [(lambda v: v * w)(t) for t in xs]

    check(f, [strata.randn(3), strata.randn(3)], strata.randn(3))


def test_comprehension_whose_variable_is_captured_by_a_lambda():
    # On 3.12 t becomes a cell of the frame inside the inlined comprehension.
    def f(xs):
        fns = [lambda: t * 2 for t in xs]
        return [fn() for fn in fns]

    xs = [strata.randn(2), strata.randn(2)]
    same(strata.compile(f)(xs), f(xs))


def test_graph_break_inside_a_comprehension():
    # 3.11: the comprehension is a function of its own (inlined, so the break stops at its
    # call); 3.12: it is part of the frame, so the resume function starts inside the loop with
    # the list, the iterator and the saved outer variable on the stack.
    log = []

    def f(xs, t):
        y = t * 2
        ys = [(log.append(1), u.sum().item())[1] * u for u in xs]
        return [v + y for v in ys], t, len(log)

    xs = [strata.randn(3), strata.randn(3), strata.randn(3)]
    t = strata.randn(3)
    ref = f(xs, t)
    log.clear()
    got = strata.compile(f)(xs, t)
    same(got[0], ref[0])
    same(got[1], t)
    assert got[2] == 3
    ex = strata.compiler.explain(f)(xs, t)
    assert ex.graph_break_count >= 1


def test_print_inside_a_comprehension(capsys):
    def f(xs):
        out = [print("item", i) or x.exp() for i, x in enumerate(xs)]
        return out, strata.stack(out).sum()

    xs = [strata.randn(2), strata.randn(2)]
    ref = f(xs)
    capsys.readouterr()
    got = strata.compile(f)(xs)
    same(got, ref)
    assert capsys.readouterr().out == "item 0\nitem 1\n"


def test_data_dependent_branch_inside_a_comprehension():
    def f(xs):
        return [x * 2 if x.sum() > 0 else x - 1 for x in xs]

    xs = [strata.ones(2), -strata.ones(2), strata.ones(2) * 3]
    same(strata.compile(f)(xs), f(xs))


# -- method calls (3.12: LOAD_ATTR with the method bit instead of LOAD_METHOD) ------------------

class Scaler:
    def __init__(self, s):
        self.s = s

    def apply(self, x):
        return x * self.s

    @staticmethod
    def shift(x):
        return x + 1

    @classmethod
    def make(cls, x):
        return x - 1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scaler = Scaler(0.5)

    def helper(self, x):
        return self.lin(x).relu()

    def forward(self, x):
        return self.scaler.apply(self.helper(x)) + Scaler.shift(x) + Scaler.make(x)


def test_method_calls_on_tensors_objects_modules_and_lists():
    sc = Scaler(3.0)

    def f(x, out):
        y = x.mul(2).add(1).relu()
        out.append(y)
        z = sc.apply(y) + Scaler.shift(y) + sc.make(y)
        return z.sum(dim=0), x.shape.numel(), "ab".upper()

    uses(f, "LOAD_ATTR")
    if PY312:
        assert any(i.opname == "LOAD_ATTR" and i.arg & 1 for i in dis.get_instructions(f))
    log, log2 = [], []
    x = strata.randn(3, 2)
    same(strata.compile(f, fullgraph=True)(x, log), f(x, log2))
    same(log, log2)


def test_module_method_calls():
    strata.manual_seed(0)
    m = Block()
    x = strata.randn(2, 4)
    same(strata.compile(m, fullgraph=True)(x), m(x))


def test_super_calls_in_forward():
    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x)

    class Child(Base):
        def forward(self, x):
            return super().forward(x * 2) + 1

    class TwoArg(Base):
        def forward(self, x):
            return super(TwoArg, self).forward(x) - 1

    class Scaled(nn.Linear):  # super() reaches one of strata's own modules
        def forward(self, x):
            return super().forward(x) * 3

    class Breaks(Base):  # super().forward is on the stack when the argument breaks the graph
        def forward(self, x):
            return super().forward(x * x.sum().item())

    uses(Child.forward, "LOAD_SUPER_ATTR")
    strata.manual_seed(0)
    x = strata.randn(2, 3)
    for m in (Child(), TwoArg(), Scaled(3, 3)):
        same(strata.compile(m, fullgraph=True)(x), m(x))
    m = Breaks()
    same(strata.compile(m)(x), m(x))
    ex = strata.compiler.explain(m.forward)(x)
    assert ex.graph_break_count == 1 and "item" in ex.break_reasons[0].reason


# -- slices (3.12: BINARY_SLICE / STORE_SLICE for two-part slices) ---------------------------------

def test_binary_slice_on_tensors_lists_tuples():
    def f(x, xs, n):
        a = x[1:3]
        b = x[n:]
        c = x[:-1]
        d = x[1:3, ::2]
        return a, b, c, d, xs[1:], tuple(xs)[:1], "abcd"[1:3]

    uses(f, "BINARY_SLICE")
    check(f, strata.randn(5, 4), [strata.randn(1), strata.randn(2), strata.randn(3)], 2)


def test_store_slice_on_tensors():
    def f(x, y, n):
        z = x.clone()
        z[1:3] = 0
        z[n:] = y[n:] * 2
        z[:1] = z[3:4]
        return z

    uses(f, "STORE_SLICE")
    check(f, strata.randn(5, 2), strata.randn(5, 2), 3)


def test_store_slice_on_a_list():
    def f(x, n):
        xs = [x, x + 1, x + 2, x + 3]
        xs[1:3] = [x * 10]
        xs[n:] = (x - 1, x - 2)
        return xs

    uses(f, "STORE_SLICE")
    check(f, strata.randn(2), 2)


def test_store_slice_on_an_input_list_reaches_the_caller():
    def f(x, out):
        out[1:] = [x * 2, x * 3]
        return x + 1

    x = strata.randn(2)
    a, b = [x, x], [x, x]
    same(strata.compile(f, fullgraph=True)(x, a), f(x, b))
    same(a, b)


# -- returns (3.12: RETURN_CONST) --------------------------------------------------------------------

def test_return_constants():
    def nothing(x, out):
        out.append(x * 2)

    def none(x, out):
        out.append(x + 1)
        return None

    def early(x, flag):
        if flag:
            return 7
        return x * 2

    def helper_const(x):
        return 1.5

    def calls(x):
        return x * helper_const(x), nothing(x, [])

    uses(none, "RETURN_CONST")
    x = strata.randn(3)
    for fn in (nothing, none):
        a, b = [], []
        same(strata.compile(fn, fullgraph=True)(x, a), fn(x, b))
        same(a, b)
    check(early, x, True)
    check(early, x, False)
    check(calls, x)


# -- unpacking (3.12: CALL_INTRINSIC_1 INTRINSIC_LIST_TO_TUPLE) --------------------------------------

def test_star_unpacking_into_tuples_lists_and_calls():
    def cat(*ts):
        return strata.cat(ts)

    def f(a, b, x):
        t = (*a, *b)
        l2 = [*a, x, *b]
        c = cat(*t)
        first, *rest = t
        d = {**{"p": x}, **{"q": first}}
        return t, l2, c, rest, d, strata.stack((*a, x))

    uses(f, "CALL_INTRINSIC_1")
    a, b = (strata.randn(2), strata.randn(2)), [strata.randn(2)]
    check(f, a, b, strata.randn(2))


def test_unary_positive_on_tensors_and_numbers():
    # 3.12 spells unary + as CALL_INTRINSIC_1 INTRINSIC_UNARY_POSITIVE.
    def f(x, n):
        return +x, +n

    check(f, strata.randn(3), 2)


# -- jumps and loads (3.12: POP_JUMP_IF_* without direction, LOAD_FAST_CHECK) -------------------------

def test_branches_on_none_and_conditionals_in_loops():
    def f(x, bias, n):
        out = x
        i = 0
        while i < n:
            if bias is not None:
                out = out + bias
            if bias is None:
                out = out * 2
            i += 1
        return out if n else -out

    x = strata.randn(3)
    check(f, x, None, 2)
    check(f, x, strata.ones(3), 3)
    check(f, x, None, 0)


def test_possibly_unbound_local():
    # 3.12 loads a local that may be unbound with LOAD_FAST_CHECK.
    def f(x, flag):
        if flag:
            y = x * 2
        return y + 1

    check(f, strata.randn(2), True)
    with pytest.raises(UnboundLocalError):
        strata.compile(f)(strata.randn(2), False)


def test_compare_ops_on_numbers_and_tensors():
    # COMPARE_OP's argument encodes the operator differently on 3.11 and 3.12.
    def f(x, n):
        flags = (n < 3, n <= 3, n == 3, n != 3, n > 3, n >= 3)
        return flags, x < 0, x >= 0.5, x == x

    check(f, strata.randn(4), 3)


def test_fullgraph_break_reason_is_the_same_on_both_versions():
    def f(xs):
        return [x.item() for x in xs]

    with pytest.raises(CompileError, match=r"Tensor.item\(\) needs the tensor's data"):
        strata.compile(f, fullgraph=True)([strata.randn(())])


def test_break_inside_a_comprehension_that_reads_a_closure_cell():
    # On 3.11 the comprehension function's closure holds the compiled function's own closure
    # cell (k): the entry rebuilds the function with that cell and the frame resumes.
    k = strata.ones(2)

    def f(xs):
        y = xs[0] * 2
        return [x * k + x.sum().item() for x in xs], y

    xs = [strata.randn(2), strata.randn(2)]
    same(strata.compile(f)(xs), f(xs))
    ex = strata.compiler.explain(f)(xs)
    assert ex.graph_count >= 1
