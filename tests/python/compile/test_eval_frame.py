"""strata._C._eval_frame: the PEP 523 frame hook of strata.compile.

Every test installs its own callback and the fixture uninstalls it and drops
every code state afterwards, so a failing test does not leave the hook on.
"""
import asyncio
import gc
import operator
import os
import subprocess
import sys
import threading
import traceback
import tracemalloc
import weakref

import pytest

from strata import _C

EF = _C._eval_frame

pytestmark = pytest.mark.skipif(not EF.supported, reason="the frame hook needs CPython 3.11 or 3.12")


@pytest.fixture(autouse=True)
def _uninstall():
    assert EF.get_callback() is None
    yield
    EF.set_callback(None)
    EF.set_enabled(True)
    EF.clear_all()


class Recorder:
    """A callback that records the code objects it is asked about and answers
    from a table keyed by function name (None for the rest)."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.names = []

    def __call__(self, code, func):
        self.names.append(code.co_name)
        return self.answers.get(code.co_name)


def replace_with(fn):
    """An entry that returns fn(args, func) as the frame's result."""
    return lambda args, func: fn(args, func)


# ---------------------------------------------------------------------------
# Which frames reach the callback


def test_callback_sees_function_frames_only():
    def plain(x):
        return x + 1

    def gen():
        yield 1

    async def coro():
        return 2

    async def agen():
        yield 3

    rec = Recorder()
    EF.set_callback(rec)
    assert plain(1) == 2
    assert list(gen()) == [1]
    assert asyncio.run(coro()) == 2

    async def drain():
        return [v async for v in agen()]

    assert asyncio.run(drain()) == [3]

    class Body:
        y = 1

    exec(compile("module_level = 1\n", "<module-body>", "exec"), {})
    EF.set_callback(None)

    assert "plain" in rec.names
    assert "drain" not in rec.names  # a coroutine
    for name in ("gen", "coro", "agen", "Body", "<module>"):
        assert name not in rec.names, name


def test_callback_receives_code_and_function():
    got = []

    def cb(code, func):
        got.append((code, func))
        return None

    def target(a):
        return a

    EF.set_callback(cb)
    target(0)
    EF.set_callback(None)
    assert any(code is target.__code__ and func is target for code, func in got)


def test_none_asks_again_every_call():
    def target(a):
        return a * 2

    rec = Recorder()
    EF.set_callback(rec)
    assert [target(i) for i in range(3)] == [0, 2, 4]
    EF.set_callback(None)
    assert rec.names.count("target") == 3
    assert EF.get_code_state(target.__code__) is None


def test_skip_marks_the_code():
    def target(a):
        return a + 10

    rec = Recorder({"target": EF.SKIP})
    EF.set_callback(rec)
    assert target(1) == 11
    assert target(2) == 12
    EF.set_callback(None)
    assert rec.names.count("target") == 1
    assert EF.get_code_state(target.__code__) is EF.SKIP
    assert target.__code__ in EF.codes_with_state()


def test_callback_exception_propagates():
    def cb(code, func):
        if code.co_name == "target":
            raise KeyError("from the callback")
        return None

    def target():
        return 1

    EF.set_callback(cb)
    with pytest.raises(KeyError, match="from the callback"):
        target()
    EF.set_callback(None)
    assert target() == 1


# ---------------------------------------------------------------------------
# Entries


def test_entry_replaces_result_args_with_defaults_and_keywords():
    def target(a, b=2, *rest, c, d=4, **kw):
        return "original"

    seen = []

    def entry(args, func):
        seen.append((args, func))
        return ("replaced", args)

    EF.set_callback(Recorder({"target": entry}))
    assert target(1, c=3) == ("replaced", (1, 2, 3, 4, (), {}))
    assert target(1, 5, 6, 7, c=8, d=9, z=10) == ("replaced", (1, 5, 8, 9, (6, 7), {"z": 10}))
    EF.set_callback(None)
    assert all(func is target for _, func in seen)
    assert EF.get_code_state(target.__code__) is entry


def test_entry_args_positional_only_and_methods():
    def posonly(a, b, /, c):
        return None

    class K:
        def method(self, x):
            return None

    k = K()
    EF.set_callback(Recorder({"posonly": replace_with(lambda a, f: a), "method": replace_with(lambda a, f: a)}))
    assert posonly(1, 2, c=3) == (1, 2, 3)
    assert k.method(5) == (k, 5)


def test_entry_args_of_cell_and_free_variables():
    outer_value = "free"

    def target(a, b, *rest):
        def inner():
            return a, rest, outer_value

        return inner()

    # a and rest are arguments that are also cells; outer_value is a free variable.
    EF.set_callback(Recorder({"target": replace_with(lambda args, f: args)}))
    assert target(1, 2, 3) == (1, 2, (3,))
    # The same code run normally still wraps its cells.
    EF.set_code_state(target.__code__, replace_with(lambda args, f: EF.RUN_DEFAULT))
    assert target(1, 2, 3) == (1, (3,), "free")


def test_entry_set_by_the_runtime():
    def target(a):
        return a

    rec = Recorder()
    EF.set_code_state(target.__code__, replace_with(lambda args, f: args[0] * 100))
    EF.set_callback(rec)
    assert target(3) == 300
    EF.set_code_state(target.__code__, None)
    assert target(3) == 3
    EF.set_callback(None)
    assert rec.names.count("target") == 1  # asked only once its entry was gone


def test_run_default_falls_back():
    calls = []

    def target(a, b=1):
        calls.append("ran")
        return a + b

    def entry(args, func):
        calls.append(("entry", args))
        return EF.RUN_DEFAULT

    EF.set_callback(Recorder({"target": entry}))
    assert target(2) == 3
    assert calls == [("entry", (2, 1)), "ran"]


def test_entry_exception_propagates_with_traceback():
    def target(a):
        return a

    def failing_entry(args, func):
        raise ValueError(f"entry failed on {args}")

    EF.set_callback(Recorder({"target": failing_entry}))
    with pytest.raises(ValueError, match=r"entry failed on \(7,\)") as info:
        target(7)
    names = [fs.name for fs in traceback.extract_tb(info.value.__traceback__)]
    assert names[0] == "test_entry_exception_propagates_with_traceback"
    assert names[-1] == "failing_entry"
    # The hook keeps working after the failure.
    EF.set_code_state(target.__code__, replace_with(lambda args, f: "fine"))
    assert target(7) == "fine"


def test_entry_calls_hooked_functions():
    def helper(x):
        return x + 1

    def fact(n):
        return "never runs"

    def fact_entry(args, func):
        (n,) = args
        return 1 if n <= 1 else n * func(n - 1)  # func is fact: its frames are hooked again

    rec = Recorder({"fact": fact_entry, "uses_helper": replace_with(lambda a, f: helper(a[0]) * 2)})

    def uses_helper(x):
        return "never runs"

    EF.set_callback(rec)
    assert fact(10) == 3628800
    assert uses_helper(4) == 10
    EF.set_callback(None)
    assert "helper" in rec.names  # called from inside an entry: hooked
    assert rec.names.count("fact") == 1


def test_hook_disabled_inside_callback():
    def helper():
        return EF.is_enabled()

    inside = []

    def cb(code, func):
        inside.append((code.co_name, helper(), EF.is_enabled()))
        return None

    def target():
        return 0

    EF.set_callback(cb)
    target()
    EF.set_callback(None)
    assert ("target", False, False) in inside
    assert all(name != "helper" for name, _, _ in inside)  # helper ran on the default evaluator
    assert EF.is_enabled()


def test_set_enabled_is_thread_local_and_returns_previous():
    rec = Recorder()
    names_off = []

    def target_main():
        return 1

    def target_thread():
        return 2

    def worker():
        assert EF.is_enabled()  # every thread starts enabled
        assert EF.set_enabled(False) is True
        names_off.append(target_thread())
        assert EF.set_enabled(True) is False

    EF.set_callback(rec)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    target_main()
    EF.set_callback(None)
    assert names_off == [2]
    assert "target_thread" not in rec.names
    assert "target_main" in rec.names


def test_second_thread_with_hook_enabled_is_hooked():
    def target(x):
        return x

    EF.set_callback(Recorder({"target": replace_with(lambda a, f: -a[0])}))
    out = []
    threads = [threading.Thread(target=lambda i=i: out.append(target(i))) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == [-4, -3, -2, -1]


def test_uninstall_restores_normal_behaviour():
    def target(a):
        return a + 1

    EF.set_callback(Recorder({"target": replace_with(lambda a, f: "replaced")}))
    assert target(1) == "replaced"
    cb = EF.get_callback()
    assert isinstance(cb, Recorder)
    assert EF.set_callback(None) is cb
    assert EF.get_callback() is None
    assert target(1) == 2  # the entry stays but the hook is gone
    assert EF.get_code_state(target.__code__) is not None
    assert EF.clear_all() >= 1
    assert EF.get_code_state(target.__code__) is None
    assert EF.codes_with_state() == []


def test_set_callback_replaces_callback_and_rejects_non_callables():
    first, second = Recorder(), Recorder()
    assert EF.set_callback(first) is None
    assert EF.set_callback(second) is first
    with pytest.raises(TypeError):
        EF.set_callback(42)
    with pytest.raises(TypeError, match="code object"):
        EF.get_code_state(lambda: 0)


# ---------------------------------------------------------------------------
# Exceptions, tracing, recursion


def test_exceptions_elsewhere_under_the_hook():
    def raises(n):
        if n == 0:
            raise IndexError("deep")
        return raises(n - 1)

    def catches():
        try:
            raises(5)
        except IndexError as e:
            return str(e)

    def gen():
        try:
            yield 1
        except RuntimeError:
            yield "caught"

    EF.set_callback(Recorder())
    assert catches() == "deep"
    g = gen()
    next(g)
    assert g.throw(RuntimeError()) == "caught"  # a frame resumed with an exception thrown in
    with pytest.raises(StopIteration):
        next(iter([]))
    with pytest.raises(ZeroDivisionError):
        (lambda: 1 / 0)()


def test_profile_events_stay_balanced():
    events = []

    def prof(frame, event, arg):
        if event in ("call", "return"):
            events.append((event, frame.f_code.co_name))

    def replaced(a):
        return a

    def normal(a):
        return a

    EF.set_callback(Recorder({"replaced": replace_with(lambda a, f: a[0]), "<lambda>": EF.SKIP}))
    sys.setprofile(prof)
    try:
        assert replaced(1) == 1
        assert normal(2) == 2
    finally:
        sys.setprofile(None)
    EF.set_callback(None)
    assert ("call", "normal") in events and ("return", "normal") in events
    calls = [n for e, n in events if e == "call"]
    returns = [n for e, n in events if e == "return"]
    assert "replaced" not in calls and "replaced" not in returns


def test_recursion_depth_500():
    def down(n):
        return 0 if n == 0 else 1 + down(n - 1)

    # Asked at every level, then SKIP, then served by an entry that recurses through hooked frames.
    EF.set_callback(Recorder())
    assert down(500) == 500
    EF.set_callback(Recorder({"down": EF.SKIP}))
    assert down(500) == 500
    EF.clear_all()
    # The entry is the only Python frame per level (a wrapper would double the depth).
    EF.set_callback(Recorder({"down": lambda a, f: 0 if a[0] == 0 else 1 + f(a[0] - 1)}))
    assert down(500) == 500


def _big_frame_function():
    # Many locals make a large frame: replaced frames then often start a new
    # chunk of the thread's data stack, which the 3.12 disposal must give back.
    names = [f"v{i}" for i in range(300)]
    src = "def big(a):\n" + "".join(f"    {n} = a\n" for n in names) + "    return " + " + ".join(names[:3]) + "\n"
    ns = {}
    exec(src, ns)
    return ns["big"]


def test_replaced_frames_across_data_stack_chunks():
    big = _big_frame_function()

    def down(n):
        return big(n) if n == 0 else big(n) + down(n - 1)

    EF.set_callback(Recorder({"big": replace_with(lambda a, f: a[0]), "<lambda>": EF.SKIP}))
    for _ in range(3):
        assert down(300) == sum(range(301))
    EF.set_callback(None)
    assert down(30) == 3 * sum(range(31))


# ---------------------------------------------------------------------------
# References


class Tracked:
    pass


def test_no_leak_of_arguments_or_results():
    def target(x, *rest, **kw):
        return "never runs"

    deaths = 0

    def died(_):
        nonlocal deaths
        deaths += 1

    EF.set_callback(Recorder({"target": operator.is_}))  # a C entry: (args, func) -> False
    # Every argument is released with its replaced frame.
    refs = []
    for _ in range(100000):
        obj = Tracked()
        refs.append(weakref.ref(obj, died))
        assert target(obj, 1, k=2) is False
        del obj
        refs.pop()  # keep the reference alive until the object is gone, then drop it
    assert deaths == 100000

    # And nothing else accumulates: traced memory is flat over 100000 replaced calls.
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        for _ in range(1000):
            target(Tracked(), 1, k=2)
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(100000):
            target(Tracked(), 1, k=2)
        after, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        gc.enable()
    assert after - before < 16 * 1024, after - before


def test_no_leak_when_entry_raises_or_runs_default():
    def target(x):
        return None

    deaths = []

    def entry(args, func):
        if args[0].mode == "raise":
            raise RuntimeError("no")
        return EF.RUN_DEFAULT

    EF.set_callback(Recorder({"target": entry}))
    for mode in ("raise", "default") * 500:
        obj = Tracked()
        obj.mode = mode
        weakref.finalize(obj, deaths.append, 1)
        try:
            target(obj)
        except RuntimeError:
            pass
        del obj
    assert len(deaths) == 1000


def test_entry_and_skip_references_are_dropped():
    class Entry:
        def __call__(self, args, func):
            return 0

    def target():
        return 1

    e = Entry()
    r = weakref.ref(e)
    EF.set_code_state(target.__code__, e)
    del e
    assert r() is not None  # the code holds it
    EF.set_code_state(target.__code__, EF.SKIP)
    assert r() is None
    e2 = Entry()
    r2 = weakref.ref(e2)
    EF.set_code_state(target.__code__, e2)
    del e2
    EF.clear_all()
    assert r2() is None

    # A code object that dies drops its entry and leaves the registry.
    ns = {}
    exec("def temp():\n    return 1\n", ns)
    e3 = Entry()
    r3 = weakref.ref(e3)
    EF.set_code_state(ns["temp"].__code__, e3)
    n = len(EF.codes_with_state())
    del e3, ns
    gc.collect()
    assert r3() is None
    assert len(EF.codes_with_state()) == n - 1


# ---------------------------------------------------------------------------
# An existing test file under the hook


@pytest.mark.parametrize("mode", ["none", "run-default", "replace"])
def test_autograd_suite_under_the_hook(mode):
    # none: every frame offered to the callback, all run normally; run-default:
    # every frame served by an entry that answers RUN_DEFAULT; replace: every
    # frame of this repository's code disposed of unrun, its result computed by
    # a copy of the code (see run_under_hook.py).
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    proc = subprocess.run(
        [sys.executable, os.path.join(here, "run_under_hook.py"), "--mode", mode,
         os.path.join(root, "tests", "python", "test_autograd.py"), "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": os.path.join(root, "python")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "passed" in proc.stdout and "failed" not in proc.stdout
    served, asked = (int(line.split()[-1]) for line in proc.stdout.strip().splitlines()[-2:])
    assert asked > 1000  # the hook really ran
    if mode == "run-default":
        assert served > 10000
    if mode == "replace":
        assert served > 1000
