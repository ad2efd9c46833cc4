"""Helpers shared by the strata.compile tests (imported by module name: pytest puts this folder
on sys.path)."""

import os

import pytest

import strata

# The generated-kernel tests (test_codegen*.py) need a C++ compiler...
needs_gxx = pytest.mark.skipif(not any(os.access(os.path.join(p, "g++"), os.X_OK)
                                       for p in os.environ.get("PATH", "").split(os.pathsep)),
                               reason="no g++")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """...and share one kernel cache directory per test module (STRATA_CACHE_DIR), so a module's
    kernels are compiled once and never land in the user's cache. A module opts in with
    `from compile_testutil import cache_dir` and `pytest.mark.usefixtures("cache_dir")`."""
    d = str(tmp_path_factory.mktemp("strata_cache"))
    old = os.environ.get("STRATA_CACHE_DIR")
    os.environ["STRATA_CACHE_DIR"] = d
    yield d
    if old is None:
        del os.environ["STRATA_CACHE_DIR"]
    else:
        os.environ["STRATA_CACHE_DIR"] = old


def same(a, b, *, requires_grad=False):
    """a and b are equal the way a compiled result must equal eager's: same container types and
    keys in the same order, tensors of the same shape and dtype that are bit for bit equal (and,
    with requires_grad=True, the same requires_grad flag), other values ==."""
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            same(x, y, requires_grad=requires_grad)
        return
    if isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), (a, b)
        for k in a:
            same(a[k], b[k], requires_grad=requires_grad)
        return
    if isinstance(a, strata.Tensor):
        assert isinstance(b, strata.Tensor), (a, b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        if requires_grad:
            assert a.requires_grad == b.requires_grad, (a.requires_grad, b.requires_grad)
        assert strata.equal(a, b), (a, b)
        return
    assert a == b, (a, b)


def record_graph(fn, *shapes):
    """fn recorded on Meta tensors of the given shapes into a fresh graph IR (inputs x0, x1, ...
    on the CPU; fn's result, or each element of a tuple result, is an output)."""
    from strata._C import _compile
    g = _compile.Graph()
    ms = []
    for k, sh in enumerate(shapes):
        m = strata.empty(*sh, device="meta")
        g.add_input(f"x{k}", m, device=strata.device("cpu"))
        ms.append(m)
    with _compile.record(g):
        out = fn(*ms)
    out = out if isinstance(out, tuple) else (out,)
    g.set_outputs([g.value_of(o) for o in out])
    return g
