"""The generic op binding (python/src/op_bind.cpp): vectorcall entry, the
all-Tensor fast path and the general path must agree, and behave as torch."""

import pytest

import strata
from strata import _C


def t(*v):
    return strata.tensor(list(v))


def test_op_objects():
    assert isinstance(strata.add, _C.op_function)
    assert isinstance(strata.Tensor.__dict__["add"], _C.op_method)
    assert isinstance(strata.Tensor.__dict__["__add__"], _C.op_method)
    assert strata.add.__name__ == "add" and strata.Tensor.add_.__name__ == "add_"
    assert "add(Tensor self, Tensor other" in strata.add.__doc__
    assert "add" in repr(strata.add)
    a, b = t(1.0, 2.0), t(3.0, 4.0)
    # Class access gives the function itself; instance access binds self.
    assert strata.Tensor.add(a, b).tolist() == [4.0, 6.0]
    m = a.add
    assert m(b).tolist() == [4.0, 6.0] and m.__self__ is a
    with pytest.raises(TypeError):
        type(strata.add)()


def test_fast_and_general_paths_agree():
    a, b = t(1.0, 2.0, 3.0), t(0.5, 0.25, 2.0)
    fast = strata.add(a, b)
    general = strata.add(a, b, alpha=1)
    assert fast.tolist() == general.tolist() == [1.5, 2.25, 5.0]
    assert (a + b).tolist() == a.add(b).tolist() == fast.tolist()
    assert strata.add(a, other=b).tolist() == fast.tolist()
    assert strata.add(input := a, b).tolist() == fast.tolist() and input is a
    # Single-Tensor ops with defaults after self.
    assert a.sum().item() == 6.0
    assert strata.sum(a, dtype=strata.float64).dtype is strata.float64


def test_overload_order_tensor_before_number():
    x = t(1.0, 5.0, 3.0)
    # A 0-d tensor picks the elementwise overload, as in torch (first pass:
    # no tensor -> number conversion), an int picks the dim overload.
    assert strata.max(x, strata.tensor(2.0)).tolist() == [2.0, 5.0, 3.0]
    r = strata.max(x, 0)
    assert r.values.item() == 5.0 and r.indices.item() == 1
    values, indices = x.max(0)
    assert values.item() == 5.0 and indices.item() == 1
    assert x.max().item() == 5.0


def test_wrapped_numbers_and_scalars():
    a = strata.tensor([1, 2], dtype=strata.int32)
    assert (a + 1).dtype is strata.int32
    assert (a + 1.5).dtype is strata.float32
    assert (2 + a).tolist() == [3, 4]
    assert strata.add(a, a, alpha=2).tolist() == [3, 6]


def test_tensor_subclass_argument():
    class Sub(strata.Tensor):
        pass

    p = strata.Tensor._make_subclass(Sub, t(1.0, 2.0), False) if hasattr(strata.Tensor, "_make_subclass") else None
    if p is None:
        pytest.skip("no _make_subclass")
    assert isinstance(p, Sub)
    assert (p + t(1.0, 1.0)).tolist() == [2.0, 3.0]
    assert strata.add(t(1.0, 1.0), p).tolist() == [2.0, 3.0]


def test_keywords_not_interned():
    a, b = t(1.0, 2.0), t(3.0, 4.0)
    name = "".join(["oth", "er"])  # a str built at run time, not interned
    assert strata.add(a, **{name: b}).tolist() == [4.0, 6.0]
    assert strata.add(a, b, **{"".join(["al", "pha"]): 2}).tolist() == [7.0, 10.0]


def test_varargs_int_list():
    x = strata.arange(6)
    assert x.view(2, 3).shape == (2, 3)
    assert x.view((3, 2)).shape == (3, 2)
    assert strata.zeros(2, 3).shape == (2, 3)
    with pytest.raises(TypeError):
        x.view(2, "a")


def test_out_returns_same_object_and_inplace_returns_self():
    a, b = t(1.0, 2.0), t(3.0, 4.0)
    out = strata.empty(2)
    assert strata.add(a, b, out=out) is out
    assert out.tolist() == [4.0, 6.0]
    c = t(1.0, 2.0)
    assert c.add_(b) is c and c.tolist() == [4.0, 6.0]
    assert c.add_(b, alpha=2) is c and c.tolist() == [10.0, 14.0]
    d = c
    d += 1
    d -= b
    d *= 2
    d /= 2
    assert d is c and c.tolist() == [8.0, 11.0]
    i = strata.tensor([3, 5])
    j = i
    i //= 2
    i %= 2
    i **= 2
    i &= 1
    i |= 2
    i ^= 1
    assert i is j and i.tolist() == [2, 3]


def test_errors():
    a = t(1.0, 2.0)
    with pytest.raises(TypeError, match=r"add\(\) received an invalid combination of arguments - got \(Tensor, str\)"):
        strata.add(a, "x")
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'foo'"):
        strata.add(a, a, foo=1)
    with pytest.raises(TypeError, match="got multiple values for argument 'other'"):
        strata.add(a, a, other=a)
    with pytest.raises(TypeError, match=r"got \(Tensor, out=Tensor, alpha=int\)"):
        a.add_(alpha=2)
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        strata.add(a)
    with pytest.raises(TypeError, match="got multiple values for keyword argument 'out'"):
        a.add_(a, out=a)
    with pytest.raises(TypeError, match=r"add_\(\) missing 1 required positional argument: 'self'"):
        strata.Tensor.add_()
    # C++ exceptions keep their Python types on both paths.
    with pytest.raises(RuntimeError, match="add"):
        a + t(1.0, 2.0, 3.0)
    with pytest.raises(RuntimeError, match="add"):
        strata.add(a, t(1.0, 2.0, 3.0), alpha=2)
    with pytest.raises(IndexError):
        a.sum(5)
    # The thread-local "tensors as numbers" pass is reset after a failure.
    assert strata.max(t(1.0, 5.0), strata.tensor(2.0)).tolist() == [2.0, 5.0]


@pytest.mark.skipif(not hasattr(strata.Tensor, "grad_fn"), reason="autograd not merged yet")
def test_autograd_through_fast_path():
    x = strata.tensor([1.0, 2.0], requires_grad=True)
    y = (x + x).sum()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1)


def test_comparisons_return_notimplemented_for_non_numbers():
    a, b = t(1.0, 2.0), t(2.0, 2.0)
    assert (a < b).tolist() == [True, False] and (a >= b).tolist() == [False, True]
    assert (a == 1).tolist() == [True, False] and (1 < a).tolist() == [False, True]
    # None / str / list: NotImplemented, so Python falls back to identity or raises.
    assert strata.Tensor.__eq__(a, None) is NotImplemented
    assert (a == None) is False and (a != None) is True  # noqa: E711
    assert (a == "x") is False and (a == [1.0, 2.0]) is False
    with pytest.raises(TypeError, match="'<' not supported"):
        a < "x"

    class Floaty:
        def __float__(self):
            return 2.0

    assert (a == Floaty()).tolist() == [False, True]

    class Broken:
        @property
        def __float__(self):
            raise KeyError("boom")

    with pytest.raises(KeyError):
        a == Broken()


def test_reflected_operators_swap_operands():
    a = t(1.0, 2.0, 4.0)
    assert (1 - a).tolist() == [0.0, -1.0, -3.0]
    assert (1 / a).tolist() == [1.0, 0.5, 0.25]
    assert (5 // a).tolist() == [5.0, 2.0, 1.0]
    assert (5 % a).tolist() == [0.0, 1.0, 1.0]
    assert (2 ** a).tolist() == [2.0, 4.0, 16.0]
    assert a.__rsub__(t(0.0, 0.0, 0.0)).tolist() == [-1.0, -2.0, -4.0]
    m = strata.tensor([[1.0, 2.0]])
    assert strata.Tensor.__rmatmul__(strata.tensor([[1.0], [1.0]]), m).tolist() == [[3.0]]
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for -: 'str' and 'Tensor'"):
        "x" - a  # as torch: __rsub__ gives NotImplemented for an operand sub does not take


def test_operator_slots_follow_the_binary_protocol():
    # Tensor's number slots call the op directly for two plain Tensors and
    # otherwise follow CPython's __op__/__rop__ protocol (op_bind.cpp, Note [Operator slots]).
    a, b = strata.tensor([1.0, 2.0]), strata.tensor([3.0, 4.0])
    assert (a + b).tolist() == [4.0, 6.0] and (a - b).tolist() == [-2.0, -2.0]
    assert (a * b).tolist() == [3.0, 8.0] and (a / b).tolist() == pytest.approx([1 / 3, 0.5])
    assert (a @ b).item() == 11.0
    assert (1 + a).tolist() == [2.0, 3.0] and (1 - a).tolist() == [0.0, -1.0] and (2 / a).tolist() == [2.0, 1.0]
    p = strata.nn.Parameter(strata.tensor([1.0, 1.0]))
    assert (a + p).tolist() == (p + a).tolist() == [2.0, 3.0]

    class Sub(strata.Tensor):
        def __add__(self, other):
            return "sub-add"

        def __radd__(self, other):
            return "sub-radd"

    s = strata.Tensor._make_subclass(Sub, strata.tensor([1.0]), False)
    assert a + s == "sub-radd"  # a subclass's reflected method goes first
    assert s + a == "sub-add" and 1 + s == "sub-radd"
    a.__dict__["__add__"] = lambda other: "instance attribute"  # operators look on the type only
    assert (a + b).tolist() == [4.0, 6.0]
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'Tensor' and 'str'"):
        a + "x"
    assert strata.Tensor.__add__(a, "x") is NotImplemented  # as torch: Python then tries the other operand
    with pytest.raises(TypeError, match="add"):
        a.add("x")  # the method itself keeps the TypeError

    class Other:
        def __radd__(self, o):
            return "other-radd"

        def __rsub__(self, o):
            return "other-rsub"

        def __rmatmul__(self, o):
            return "other-rmatmul"

    assert a + Other() == "other-radd" and a - Other() == "other-rsub" and a @ Other() == "other-rmatmul"
    # Re-assigning the operator (as profiler.explain does) must take effect, and restoring it must work.
    original = strata.Tensor.__add__
    try:
        strata.Tensor.__add__ = lambda self, other: "patched"
        assert a + b == "patched"
    finally:
        strata.Tensor.__add__ = original
        strata._C._install_operator_slots()
    assert (a + b).tolist() == [4.0, 6.0]
