"""The dispatcher as Python sees it: the generic binding (overloads, keyword
arguments, defaults, error messages), introspection, strata.ops namespaces."""

import pytest

import strata

_C = strata._C


def test_every_schema_is_bound():
    for info in _C._op_schemas():
        assert callable(getattr(_C._ops, info["name"].replace("::", "__"))), info["name"]


def test_schema_info_is_consistent():
    for info in _C._op_schemas():
        assert info["schema"].startswith(info["name"] + ("." + info["overload"] if info["overload"] else "") + "(")
        names = [a["name"] for a in info["args"]]
        assert len(names) == len(set(names)), info["schema"]
        seen_kw = False
        for a in info["args"]:
            seen_kw |= a["kwarg_only"]
            assert a["kwarg_only"] or not seen_kw, info["schema"]  # keyword-only args come last
            if a["name"] == "out":
                assert a["kwarg_only"] and a["is_write"] and a["has_default"], info["schema"]


def test_keyword_and_positional_arguments():
    x = strata.tensor([1.0, 2.0])
    assert strata.add(x, x, alpha=2).tolist() == [3.0, 6.0]
    assert strata.add(x, other=x).tolist() == [2.0, 4.0]
    assert strata.add(self=x, other=x).tolist() == [2.0, 4.0]
    assert x.add(x, alpha=-1).tolist() == [0.0, 0.0]
    out = strata.tensor([0.0, 0.0])
    r = strata.add(x, 1, out=out)
    assert r._is_same(out) and out.tolist() == [2.0, 3.0]


def test_python_numbers_are_wrapped_weakly():
    i = strata.tensor([1, 2], dtype=strata.int16)
    assert (i + 1).dtype is strata.int16
    assert (i * 2.5).dtype is strata.float32
    assert strata.add(i, True).dtype is strata.int16
    assert (strata.tensor([1.0], dtype=strata.float16) + 1e10).dtype is strata.float16


def test_type_errors_name_the_schema():
    x = strata.tensor([1.0])
    with pytest.raises(TypeError) as e:
        strata.add(x, "two")
    msg = str(e.value)
    assert msg.startswith("add() received an invalid combination of arguments - got (Tensor, str)")
    assert "add(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!)? out=None) -> Tensor" in msg
    assert "argument 'other' must be Tensor, not str" in msg
    with pytest.raises(TypeError, match="unexpected keyword argument 'alhpa'"):
        strata.add(x, x, alhpa=2)
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        strata.add(x)
    with pytest.raises(TypeError, match="got multiple values for argument 'self'"):
        strata.add(x, self=x, other=x)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        strata.add(x, x, 2)


def test_overloads_are_tried_in_order():
    # ops with several overloads report every candidate when none fits
    multi = {}
    for info in _C._op_schemas():
        multi.setdefault(info["name"], []).append(info["schema"])
    names = [n for n, s in multi.items() if len(s) > 1 and not n.startswith("_")]
    if not names:
        pytest.skip("no overloaded op yet")
    name = names[0]
    with pytest.raises(TypeError) as e:
        getattr(_C._ops, name)(object())
    for schema in multi[name]:
        assert schema in str(e.value)


def test_has_kernel_and_kernel_keys():
    assert _C._has_kernel("add", "CPU")
    assert not _C._has_kernel("add", "Python")
    keys = _C._kernel_keys("contiguous")
    assert keys == ["CompositeImplicit"]
    with pytest.raises(ValueError):
        _C._kernel_keys("definitely_not_an_op")


def test_missing_kernel_is_not_implemented_error():
    # exp has CPU and Meta kernels only; a Device argument on another backend
    # reaches the dispatcher's "no kernel" error, which names op and backend.
    m = strata.tensor([1.0], device="meta")
    assert strata.exp(m).device.type == "meta"
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        strata.zeros(1, device="cuda")  # (Tensor.to("cuda") stops earlier: no CUDA backend is built)


def test_ops_namespaces():
    assert strata.ops.aten.add is _C._ops.add
    assert strata.ops.aten.add(strata.tensor([1]), 1).tolist() == [2]
    assert "add" in dir(strata.ops.aten)
    with pytest.raises(AttributeError, match="no operator"):
        strata.ops.aten.definitely_not_an_op
    with pytest.raises(AttributeError, match="load_library"):
        strata.ops.no_such_namespace.foo
    with pytest.raises(OSError, match="could not load"):
        strata.ops.load_library("/nonexistent/libnothing.so")


def test_bind_op_unknown_name():
    with pytest.raises(RuntimeError, match="no operator named"):
        _C._bind_op("nothing::here")


def test_raw_entry_points_agree_with_generic_binding():
    a = strata.tensor([1.0, 2.0, 3.0, 4.0])
    b = strata.tensor([0.5, 0.5, 0.5, 0.5])
    want = strata.add(a, b).tolist()
    assert _C._raw_add(a, b).tolist() == want
    assert _C._raw_add_boxed(a, b).tolist() == want
    assert _C._nb_add(a, b).tolist() == want
    assert _C._raw_noop(a) is a
    w = _C._raw_wrap(a, b)
    assert w is not a and w._is_same(a) and w.data_ptr() == a.data_ptr()
    with pytest.raises(TypeError, match="two strata.Tensor"):
        _C._raw_add(a)
    with pytest.raises(TypeError, match="two strata.Tensor"):
        _C._raw_add(a, 1.0)
    with pytest.raises(RuntimeError, match="size|match"):
        _C._raw_add(a, strata.tensor([1.0, 2.0]))
    assert _C._bench_cpp_add(a, b, 10) > 0
