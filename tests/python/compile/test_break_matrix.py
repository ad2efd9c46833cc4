"""The graph-break matrix: one small function per construct that capture cannot (or can) follow,
written once against a framework module T (strata, or torch when it is installed).

For each construct:
- strata.compile(f) gives what eager f gives, bit for bit (backend="eager"), on the capturing call
  and on the cached one, and prints what eager prints;
- strata.compiler.explain(f) gives the graph and graph-break counts recorded in CASES;
- torch._dynamo.explain on the same source gives the torch counts recorded in CASES (the test
  checks the record, so the table below stays true). Where the two differ the reason is in the
  table.

    construct            strata (graphs, breaks)   torch 2.13 (graphs, breaks)  why they differ
    print                2, 1                      2, 1
    item                 2, 1                      2, 1
    if_tensor            2, 1                      2, 1
    bool_tensor          2, 1                      2, 1
    tolist               2, 1                      2, 1
    numpy_call           2, 1                      1, 0   torch traces numpy calls; strata breaks at them
    deepcopy             2, 1                      1, 0   torch inlines copy.deepcopy; strata does not inline libraries
    random_call          2, 1                      2, 1
    generator            2, 2                      1, 0   torch inlines generators; strata breaks at the call,
                                                          and the loop over the real generator runs eagerly
    with_unknown         3, 2                      1, 0   torch inlines user objects and context managers;
                                                          strata breaks at Box() and at the with
    unsupported_bytecode 1, 1                      1, 0   STORE_GLOBAL is traced by torch; for strata it is a
                                                          break, and the rest of the frame runs eagerly
    break_in_inlined     4, 2                      4, 3   both compile the callee on its own; torch also counts
                                                          the break at the call site in the caller
    break_in_loop        4, 3                      0, 0   torch runs a frame with a break inside a loop eagerly;
                                                          strata resumes inside the loop: one graph per
                                                          iteration's stretch between prints
    break_in_submodule   4, 2                      4, 3   as break_in_inlined
    two_breaks           3, 2                      2, 1   torch compiles no empty graph (nor counts its break);
                                                          strata keeps an entry (guards) for the empty middle one
    break_first          2, 1                      1, 0   the same: the graph before the print is empty
    break_before_return  2, 1                      1, 0   the same: the graph after the print is empty
    no_grad_block        1, 0                      1, 0
    break_in_no_grad     2, 1                      2, 1
    try_except           1, 0                      1, 0
    break_in_try         4, 2                      2, 1   as break_in_inlined: strata compiles the callee on
                                                          its own (the try block resumes after the call)
    raise_in_try         1, 1                      1, 0   torch traces raise/except; strata breaks at the raise
    break_in_autocast    2, 1                      2, 1
    break_in_try_finally 2, 1                      0, 0   torch runs a frame with a break inside try/finally
                                                          eagerly; strata resumes inside the try block
    raise_at_break_in_try 3, 3                     0, 0   the same for torch; strata: print, the callee's raise
                                                          (the callee's frame splits there) and the call in
                                                          the caller, which raised: the except clause and the
                                                          rest of the frame run in Python
    break_in_nested_with 2, 1                      2, 1
    break_in_list_loop   3, 2                      0, 0   as break_in_loop
"""

import contextlib
import copy
import io
import random

import numpy as np
import pytest

import strata as st

from compile_testutil import same as _same

try:
    import torch
    import torch._dynamo
except ImportError:  # pragma: no cover - torch is optional
    torch = None


# -- helpers used by the cases ------------------------------------------------------------------

class Box:
    """A context manager capture knows nothing about."""

    def __enter__(self):
        return 3

    def __exit__(self, *exc):
        return False


def helper_with_print(x):
    y = x + 1
    print("in helper")
    return y * 2


def gen(n):
    for i in range(n):
        yield i


G_COUNTER = 0


# -- the cases: make(T) returns f (or a module) written against T --------------------------------

CASES = {}


def case(strata_counts, torch_counts, note=""):
    def deco(make):
        CASES[make.__name__] = (make, strata_counts, torch_counts, note)
        return make
    return deco


@case((2, 1), (2, 1))
def print_(T):
    def f(x):
        y = x * 2
        print("p")
        return y + 1
    return f


@case((2, 1), (2, 1))
def item(T):
    def f(x):
        s = (x * 2).sum().item()
        return x + s
    return f


@case((2, 1), (2, 1))
def if_tensor(T):
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
    return f


@case((2, 1), (2, 1))
def bool_tensor(T):
    def f(x):
        y = x.sum() * 0 + 1
        if bool(y):
            return x * 3
        return x
    return f


@case((2, 1), (2, 1))
def tolist(T):
    def f(x):
        values = (x * 2).tolist()
        return x + len(values) + values[1]
    return f


@case((2, 1), (1, 0), "torch traces numpy calls")
def numpy_call(T):
    def f(x):
        y = x * 2
        s = float(np.sqrt(2.0))
        return y + s
    return f


@case((2, 1), (1, 0), "torch inlines copy.deepcopy")
def deepcopy(T):
    def f(x):
        y = copy.deepcopy(x) * 2
        return y + 1
    return f


@case((2, 1), (2, 1))
def random_call(T):
    def f(x):
        y = x * 2
        return y + random.random()
    return f


@case((2, 2), (1, 0), "torch inlines generators")
def generator(T):
    def f(x):
        for i in gen(3):
            x = x + i
        return x * 2
    return f


@case((3, 2), (1, 0), "torch inlines user context managers")
def with_unknown(T):
    def f(x):
        y = x * 2
        with Box() as k:
            y = y + k
        return y - 1
    return f


@case((1, 1), (1, 0), "torch traces STORE_GLOBAL")
def unsupported_bytecode(T):
    def f(x):
        global G_COUNTER
        y = x * 2
        G_COUNTER = 5
        return y + G_COUNTER
    return f


@case((4, 2), (4, 3), "torch also counts the caller's break")
def break_in_inlined(T):
    def f(x):
        y = x - 1
        z = helper_with_print(y)
        return z + 1
    return f


@case((4, 3), (0, 0), "torch skips a frame with a break in a loop")
def break_in_loop(T):
    def f(x):
        for i in range(3):
            x = x + i
            print(i)
        return x * 2
    return f


@case((4, 2), (4, 3), "torch also counts the caller's break")
def break_in_submodule(T):
    class Inner(T.nn.Module):
        def forward(self, x):
            y = x * 2
            print("inner")
            return y + 1

    class Outer(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x - 1) * 3
    return Outer()


@case((3, 2), (2, 1), "torch compiles no empty graph")
def two_breaks(T):
    def f(x):
        y = x * 2
        print("a")
        print("b")
        return y + 1
    return f


@case((2, 1), (1, 0), "torch compiles no empty graph")
def break_first(T):
    def f(x):
        print("a")
        return x * 2
    return f


@case((2, 1), (1, 0), "torch compiles no empty graph")
def break_before_return(T):
    def f(x):
        y = x * 2
        print("a")
        return y
    return f


@case((1, 0), (1, 0))
def no_grad_block(T):
    def f(x):
        with T.no_grad():
            y = x * 2
        return y + x, T.is_grad_enabled()
    return f


@case((2, 1), (2, 1))
def break_in_no_grad(T):
    def f(x):
        y = x * 3
        with T.no_grad():
            z = y * 2
            print("inside")
            z = z + 1
        return z * x, T.is_grad_enabled()
    return f


@case((1, 0), (1, 0))
def try_except(T):
    def f(x):
        try:
            y = x * 2
        except RuntimeError:
            y = x
        return y + 1
    return f


@case((4, 2), (2, 1), "strata compiles the callee on its own")
def break_in_try(T):
    def f(x):
        y = x * 2
        try:
            z = helper_with_print(y)
        except ValueError:
            z = y
        return z - 1
    return f


@case((1, 1), (1, 0), "torch traces raise/except")
def raise_in_try(T):
    def f(x):
        y = x * 2
        try:
            raise ValueError("boom")
        except ValueError:
            y = y + 1
        return y * 3
    return f


@case((2, 1), (2, 1))
def break_in_autocast(T):
    def f(x):
        y = x * 3
        with T.autocast("cpu", dtype=T.bfloat16):
            z = y @ y[:, None]
            print("inside")
            z = (z @ y[None, :]) * 2
        return z.float() * x, T.is_autocast_enabled("cpu")
    return f


@case((2, 1), (0, 0), "torch skips a frame with a break in try/finally")
def break_in_try_finally(T):
    def f(x):
        y = x * 2
        try:
            print("in try")
            y = y + 1
        finally:
            y = y * 3
        return y - x
    return f


def raising_helper(x):
    raise ValueError("from helper")


@case((3, 3), (0, 0), "torch skips the frame; strata runs the except clause in Python")
def raise_at_break_in_try(T):
    def f(x):
        y = x * 2
        try:
            print("before")
            y = raising_helper(y)
        except ValueError as e:
            print("caught", e)
            y = y + 10
        return y * x
    return f


@case((2, 1), (2, 1))
def break_in_nested_with(T):
    def f(x):
        y = x * 3
        with T.enable_grad():
            with T.no_grad():
                z = y * 2
                print("inside")
                z = z + 1
            w = y * z
        return w + x, T.is_grad_enabled()
    return f


@case((3, 2), (0, 0), "torch skips a frame with a break in a loop")
def break_in_list_loop(T):
    def f(x):
        for k, s in enumerate([1.5, -2.0]):
            x = x * s + k
            print(k)
        return x.sum()
    return f


# -- running -------------------------------------------------------------------------------------


def _input(T, requires_grad=False):
    x = T.arange(4.0) - 1.5
    if requires_grad:
        x.requires_grad_(True)
    return x


def _call(f, x):
    """f(x) with its stdout; the Python RNG reseeded so random.random() agrees across calls."""
    random.seed(7)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = f(x)
    return r, buf.getvalue()


def same(a, b):
    _same(a, b, requires_grad=True)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_compiled_matches_eager(name, requires_grad):
    make = CASES[name][0]
    f = make(st)
    cf = st.compile(f, backend="eager")
    expected, out_e = _call(f, _input(st, requires_grad))
    for _ in range(2):   # the capturing call, then the cached entries
        got, out_c = _call(cf, _input(st, requires_grad))
        same(got, expected)
        assert out_c == out_e
        assert st.is_grad_enabled()


@pytest.mark.parametrize("name", sorted(CASES))
def test_strata_counts(name):
    make, expected, _, _ = CASES[name]
    with contextlib.redirect_stdout(io.StringIO()):
        e = st.compiler.explain(make(st))(_input(st))
    assert (e.graph_count, e.graph_break_count) == expected, str(e)
    assert all(b.reason for b in e.break_reasons)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_counts_as_recorded(name):
    make, _, expected, _ = CASES[name]
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        e = torch._dynamo.explain(make(torch))(_input(torch))
    torch._dynamo.reset()
    assert (e.graph_count, max(e.graph_break_count, 0)) == expected


def test_raise_propagates_after_the_graph_ran():
    """A raise outside any try: the in-place write before it reaches the caller, then the
    same exception."""
    def f(x):
        x.add_(1)
        y = x * 2
        if y.shape[0] == 4:
            raise ValueError(f"boom {y.shape[0]}")
        return y

    cf = st.compile(f)
    for fn in (f, cf, cf):
        x = _input(st)
        with pytest.raises(ValueError, match="boom 4"):
            fn(x)
        same(x, _input(st) + 1)


def test_break_in_inlined_function_under_try_reaches_the_except():
    def boom(x):
        y = x * 2
        raise ValueError("boom")

    def f(x):
        try:
            z = boom(x)
        except ValueError:
            z = x - 1
        return z + 1

    x = _input(st)
    same(st.compile(f)(x), f(x))


def test_break_in_no_grad_keeps_grads_right():
    make = CASES["break_in_no_grad"][0]
    f = make(st)
    cf = st.compile(f)
    grads = []
    for fn in (f, cf, cf):
        x = _input(st, requires_grad=True)
        with contextlib.redirect_stdout(io.StringIO()):
            out, enabled = fn(x)
        assert enabled and st.is_grad_enabled()
        out.sum().backward()
        grads.append(x.grad)
    same(grads[1], grads[0])
    same(grads[2], grads[0])


def test_enable_grad_inside_a_no_grad_caller_still_records_grads():
    """A node recorded with grad on follows the caller's mode, so turning grad on in a frame
    entered under no_grad is a graph break (and the result still requires grad)."""
    def f(x):
        y = x * 3
        with st.enable_grad():
            z = y * x
        return z

    cf = st.compile(f)
    with st.no_grad():
        x = _input(st, requires_grad=True)
        expected = f(x)
        for _ in range(2):
            got = cf(x)
            same(got, expected)
            assert got.requires_grad


# -- breaks inside try/with blocks and loops (Note [Breaks inside try and with blocks] in convert.py) --


def kw_raiser(x, *, scale):
    print("kw", scale)
    raise KeyError(f"scale {scale}")


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_breaking_call_that_raises_reaches_the_frames_handlers(backend):
    """The breaking call raises inside try/with: the exception goes through the frame's own except
    clause, finally and with-exit (grad mode restored), as in eager mode, on every call."""
    log = []

    def f(x):
        y = x * 2
        try:
            with st.no_grad():
                y = y + 1
                kw_raiser(y, scale=3)        # KW_NAMES + CALL inside a with inside a try
                y = y * 100
        except KeyError as e:
            log.append(("caught", str(e), st.is_grad_enabled()))
            y = y - 1
        finally:
            log.append("finally")
        return y * x, st.is_grad_enabled()

    x = _input(st, requires_grad=True)
    expected, out_e = _call(f, x)
    log_e = list(log)
    cf = st.compile(f, backend=backend)
    for _ in range(2):
        log.clear()
        got, out_c = _call(cf, x)
        same(got, expected)
        assert out_c == out_e and log == log_e and st.is_grad_enabled()


def test_an_exception_nobody_catches_leaves_the_block_state_restored():
    def f(x):
        y = x * 2
        with st.no_grad():
            with st.autocast("cpu"):
                print("a")
                raising_helper(y)
        return y

    cf = st.compile(f, backend="eager")
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(ValueError, match="from helper"):
            cf(_input(st))
        assert st.is_grad_enabled() and not st.is_autocast_enabled()


def test_bool_of_a_tensor_raising_at_a_break_in_try():
    def f(x):
        try:
            if x * 2:                          # more than one element: RuntimeError at run time
                y = x + 1
            else:
                y = x - 1
        except RuntimeError:
            y = x * 7
        return y

    x = _input(st)
    same(st.compile(f, backend="eager")(x), f(x))
    same(st.compile(f, backend="eager")(x), f(x))


def test_loop_resume_over_tensors_and_modules():
    layers = st.nn.ModuleList([st.nn.Linear(4, 4) for _ in range(3)])
    ws = [st.randn(4, 4) for _ in range(3)]

    def f(x):
        for k, (layer, w) in enumerate(zip(layers, ws)):
            x = layer(x) @ w
            print("step", k)
        return x.relu()

    x = st.randn(2, 4)
    expected, out_e = _call(f, x)
    cf = st.compile(f, backend="eager")
    for _ in range(2):
        got, out_c = _call(cf, x)
        same(got, expected)
        assert out_c == out_e
    with contextlib.redirect_stdout(io.StringIO()):
        e = st.compiler.explain(f)(x)
    assert (e.graph_count, e.graph_break_count) == (4, 3)


def test_a_long_loop_runs_in_python_after_its_first_break(monkeypatch):
    from strata._dynamo import config
    monkeypatch.setattr(config, "max_resumed_loop_items", 3)

    def f(x):
        for i in range(6):
            x = x + i
            print(i)
        return x * 2

    expected, out_e = _call(f, _input(st))
    cf = st.compile(f, backend="eager")
    for _ in range(2):
        got, out_c = _call(cf, _input(st))
        same(got, expected)
        assert out_c == out_e
    with contextlib.redirect_stdout(io.StringIO()):
        e = st.compiler.explain(f)(_input(st))
    # the first iteration's break leaves 5 items (> 3): the resume function breaks at the loop and
    # runs the rest in Python
    assert (e.graph_count, e.graph_break_count) == (2, 2)


# -- closures over the frame's own variables at a break (Note [Closure cells at a graph break]) ------


def _closure_cases():
    def read_cell(x):
        scale = 2.0
        g = lambda t: t * scale            # noqa: E731
        y = g(x)
        print("a")
        return g(y) + scale

    def tensor_cell_and_returned_closure(x):
        bias = x + 1

        def g(t):
            return t * bias
        y = g(x)
        print("b")
        return g(y), g

    def nonlocal_write_across_the_break(x):
        count = 0

        def inc():
            nonlocal count
            count += 1
        inc()
        print("c")
        inc()
        return x * count

    def argument_cell(x):
        g = lambda: x * 2                  # noqa: E731
        y = g()
        print("d")
        return g() + y

    def list_of_closures(x):
        fs = [lambda t, k=k: t * k + x for k in range(3)]
        print("e")
        return [h(x) for h in fs]
    return [read_cell, tensor_cell_and_returned_closure, nonlocal_write_across_the_break, argument_cell,
            list_of_closures]


CLOSURE_COUNTS = {"read_cell": (2, 1), "tensor_cell_and_returned_closure": (2, 1),
                  "nonlocal_write_across_the_break": (4, 3), "argument_cell": (2, 1), "list_of_closures": (2, 1)}


@pytest.mark.parametrize("idx", range(5))
def test_closure_over_frame_cells_resumes(idx, monkeypatch):
    f = _closure_cases()[idx]
    recompiles = []
    from strata._dynamo import logs
    real = logs.recompile
    monkeypatch.setattr(logs, "recompile", lambda *a: (recompiles.append(a), real(*a)))
    x = _input(st)
    expected, out_e = _call(f, x)
    cf = st.compile(f, backend="eager")
    for _ in range(3):
        got, out_c = _call(cf, x)
        if isinstance(expected, tuple) and callable(expected[1]):
            same(got[0], expected[0])
            same(got[1](x), expected[1](x))    # the returned closure sees the same cell
        else:
            same(got, expected)
        assert out_c == out_e
    assert not recompiles, recompiles         # functions made at the break are guarded by code, not id
    with contextlib.redirect_stdout(io.StringIO()):
        e = st.compiler.explain(f)(x)
    assert (e.graph_count, e.graph_break_count) == CLOSURE_COUNTS[f.__name__]


def test_an_op_raising_in_a_resumed_block_leaves_grad_and_autocast_as_found():
    """After a break inside no_grad/autocast blocks, the rest of the blocks is a graph that runs outside
    the frame's handlers: an op raising there (an index out of range) must not leave the blocks' state."""
    def f(idx, w):
        with st.no_grad():
            with st.autocast("cpu"):
                print("x")
                y = st.nn.functional.embedding(idx, w)
        return y

    w = st.randn(5, 3)
    cf = st.compile(f, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        same(cf(st.tensor([1, 2]), w), f(st.tensor([1, 2]), w))
        with pytest.raises(IndexError):
            cf(st.tensor([1, 9]), w)
    assert st.is_grad_enabled() and not st.is_autocast_enabled()


def _loop_cases():
    def nested(x):
        out = []
        for i in range(2):
            for j in [1.0, 2.0]:
                x = x * j + i
                print(i, j)
            out.append(x.sum())
        return out

    def tensor_rows(x):
        acc = 0
        for row in x:
            acc = acc + row.relu()
            print("r")
        return acc

    def dict_items(x):
        for k, v in {"a": x * 2, "b": x - 1}.items():
            x = x + v
            print(k)
        return x
    return {"nested": (nested, (5, 4)), "tensor_rows": (tensor_rows, (5, 4)), "dict_items": (dict_items, (3, 2))}


@pytest.mark.parametrize("name", ["nested", "tensor_rows", "dict_items"])
def test_loop_resume_shapes(name):
    f, counts = _loop_cases()[name]
    x = st.arange(16.0).reshape(4, 4) - 7.5
    expected, out_e = _call(f, x)
    cf = st.compile(f, backend="eager")
    for _ in range(2):
        got, out_c = _call(cf, x)
        same(got, expected)
        assert out_c == out_e
    with contextlib.redirect_stdout(io.StringIO()):
        e = st.compiler.explain(f)(x)
    assert (e.graph_count, e.graph_break_count) == counts
