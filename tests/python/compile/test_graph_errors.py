"""A graph op that raises at run time inside a try/with block of the compiled function reaches the
block's handlers as in eager mode (Note [Graph errors inside try blocks] in src/compile/executor.cpp):
the frame runs again eagerly when the graph failed before any effect outside the call. Each case is
run compiled and eagerly on the same inputs, with a good index (the compiled path) and a bad one."""

import pytest

import strata as st


def _idx(*v):
    return st.tensor(list(v), dtype=st.int64)


def both(fn, make_args, backend="inductor"):
    """(eager result or exception type, compiled result or exception type, eager log, compiled log)
    for fresh arguments from make_args() (a tuple whose last item is a log list)."""
    out = []
    for f in (fn, st.compile(fn, backend=backend)):
        args = make_args()
        try:
            r = f(*args)
        except Exception as e:
            r = type(e)
        out.append((r, args[-1]))
    return out


def check(fn, make_args, backend="inductor"):
    (re, le), (rc, lc) = both(fn, make_args, backend)
    if isinstance(re, type):
        assert rc is re
    else:
        assert not isinstance(rc, type), rc
        assert st.equal(re, rc), (re, rc)
    assert le == lc, (le, lc)
    return re, le


def try_except(x, i, log):
    y = x * 2
    try:
        z = y[i] + 1
        log.append("body")
    except IndexError:
        log.append("except")
        z = y.sum()
    return z


def try_except_finally(x, i, log):
    try:
        return x.index_select(0, i).relu()
    except IndexError as e:
        log.append(("except", "out of range" in str(e) or "index" in str(e).lower()))
        return x.neg()
    finally:
        log.append("finally")


def try_finally_propagates(x, i, log):
    try:
        return x[i] * 3
    finally:
        log.append("finally")


def nested_try(x, i, log):
    try:
        try:
            return x[i].exp()
        except KeyError:
            log.append("inner")
            return x
    except IndexError:
        log.append("outer")
        return x * 0


def except_other_type(x, i, log):
    try:
        return x[i] - 1
    except ValueError:
        log.append("wrong handler")
        return x


class Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, val, tb):
        self.log.append(("exit", typ.__name__ if typ else None))
        return typ is IndexError  # swallows it


def with_block(x, i, log):
    r = x + 1
    with Ctx(log):
        r = x[i] * 2
    return r


def break_then_try(x, i, log):
    y = x + 1
    print(end="")  # a graph break: the try below is in the resume function's graph
    try:
        return y[i]
    except IndexError:
        log.append("except after break")
        return y


def embedding_in_try(x, i, log):
    try:
        return st.nn.functional.embedding(i, x) * 2.0
    except IndexError:
        log.append("except")
        return x[:1]


CASES = [try_except, try_except_finally, try_finally_propagates, nested_try, except_other_type, with_block,
         break_then_try, embedding_in_try]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_handlers_see_graph_errors(fn, backend):
    x = st.arange(12, dtype=st.float32).reshape(4, 3)
    check(fn, lambda: (x, _idx(1, 3), []), backend)
    check(fn, lambda: (x, _idx(0, 7), []), backend)


def test_compiled_path_after_an_error():
    """The entry stays cached: a bad index runs the frame again eagerly, a good one the graph."""
    def f(x, i, log):
        try:
            return x[i] + 1
        except IndexError:
            log.append("except")
            return x

    cf = st.compile(f)
    x = st.arange(4.0)
    logs = [[], [], []]  # one per call: a list's length is guarded
    assert st.equal(cf(x, _idx(1), logs[0]), x[_idx(1)] + 1)
    assert st.equal(cf(x, _idx(9), logs[1]), x) and logs[1] == ["except"]
    assert st.equal(cf(x, _idx(2), logs[2]), x[_idx(2)] + 1) and logs[2] == []
    from strata._dynamo import eval_frame
    assert sum(len(s.entries) for s in eval_frame.states_of(f.__code__)) == 1


@pytest.mark.parametrize("functionalize", [False, True])
def test_write_before_the_error_is_not_repeated(functionalize, monkeypatch):
    """A graph that wrote into its input before the op failed is not run again (the write would
    happen twice): the error propagates, and the input was written once. Functionalized, the graph
    writes its inputs only at its end, so it fails before any write and the frame runs again eagerly:
    the except clause sees the error, as in eager mode."""
    from strata._dynamo import config
    monkeypatch.setattr(config, "functionalize", functionalize)

    def f(x, i, log):
        x.add_(1)
        try:
            return x[i]
        except IndexError:
            log.append("except")
            return x

    x, log = st.zeros(3), []
    if functionalize:
        assert st.compile(f)(x, _idx(5), log) is x and log == ["except"]
    else:
        with pytest.raises(IndexError):
            st.compile(f)(x, _idx(5), log)
    assert st.equal(x, st.ones(3))


def test_write_into_own_result_is_replayed():
    """An in-place op on a tensor the graph made has no effect outside the call."""
    def f(x, i, log):
        try:
            y = x * 2
            y.add_(1)
            return y[i]
        except IndexError:
            log.append("except")
            return x

    check(f, lambda: (st.arange(3.0), _idx(4), []))


def test_no_handlers_propagates_unchanged():
    def f(x, i):
        return x[i] * 2

    with pytest.raises(IndexError):
        st.compile(f)(st.arange(3.0), _idx(3))


def test_replay_keeps_autograd():
    """The replay runs under the caller's grad mode; the except clause's result keeps autograd."""
    def f(x, i, log):
        try:
            return (x * 2)[i]
        except IndexError:
            log.append("except")
            return (x * 3).sum()

    x = st.arange(3.0).requires_grad_()
    log = []
    r = st.compile(f)(x, _idx(8), log)
    r.backward()
    assert log == ["except"] and st.equal(x.grad, st.full((3,), 3.0))
