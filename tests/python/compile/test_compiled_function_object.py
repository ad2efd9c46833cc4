"""What strata.compile(fn) returns (Note [Compiled function objects] in python/src/compile_bind.cpp):
a CompiledFunction that calls the frame cache from C++ for plain positional calls and behaves like
the function it wraps for everything else: keywords, defaults, *args, attributes, methods, copy,
deepcopy and pickle."""

import copy
import inspect
import pickle

import pytest

import strata as st


def add(x, y):
    return x + y


compiled_add = st.compile(add)


@st.compile
def scaled(x):
    return x * 2


def test_fast_and_slow_calls_agree():
    x, y = st.randn(3), st.randn(3)
    assert st.equal(compiled_add(x, y), x + y)          # positional: the C++ path
    assert st.equal(compiled_add(x, y=y), x + y)        # keyword: the wrapper
    assert st.equal(compiled_add(y=y, x=x), x + y)
    with pytest.raises(TypeError):
        compiled_add(x)
    with pytest.raises(TypeError):
        compiled_add(x, y, x)


def test_defaults_star_args_and_keyword_only():
    def f(x, scale=2.0, *rest, shift=1.0, **kw):
        return x * scale + shift + sum(rest) + kw.get("extra", 0)

    cf = st.compile(f)
    x = st.randn(4)
    for args, kw in [((x,), {}), ((x, 3.0), {}), ((x, 3.0, 1, 2), {"shift": 0.5}), ((x,), {"extra": 4})]:
        assert st.allclose(cf(*args, **kw), f(*args, **kw))


def test_attributes_are_the_functions():
    assert compiled_add.__name__ == "add" and compiled_add.__qualname__ == "add"
    assert compiled_add.__wrapped__ is add and compiled_add.__module__ == __name__
    assert str(inspect.signature(compiled_add)) == "(x, y)"
    compiled_add.note = 5
    assert compiled_add.note == 5
    del compiled_add.note
    assert not hasattr(compiled_add, "note")
    assert "add" in repr(compiled_add)
    assert st.compile(compiled_add) is compiled_add   # compiling twice is the same object


def test_method_binding():
    class M:
        def __init__(self):
            self.k = 3.0

        @st.compile
        def scale(self, x):
            return x * self.k

    m, x = M(), st.randn(2)
    assert st.equal(m.scale(x), x * 3.0)
    assert st.equal(M.scale(m, x), x * 3.0)


def test_copy_deepcopy_pickle():
    assert copy.copy(compiled_add) is compiled_add
    assert copy.deepcopy(compiled_add) is compiled_add
    assert pickle.loads(pickle.dumps(scaled)) is scaled   # by reference, as a function
    mod = st.compile(st.nn.Linear(3, 2))
    x = st.randn(1, 3)
    mod(x)
    mod2 = copy.deepcopy(mod)
    assert st.allclose(mod2(x), mod(x))


def test_errors_and_the_miss_path_raise_normally():
    def f(x):
        return x.view(5)

    cf = st.compile(f)
    with pytest.raises(RuntimeError):
        cf(st.randn(3))
