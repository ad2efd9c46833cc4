"""Tensor guards include the dispatch key set (as torch's TENSOR_MATCH does): a vmap-batched tensor
has the logical dtype, sizes and strides of the tensor a graph was captured with, but its ops go
through the Vmap layer and a generated kernel would read its physical data. Such a call misses every
entry and runs eagerly, without marking the frame eager."""

import pytest

import strata as st
from strata._dynamo import eval_frame


def f(a):
    return (a * 2 + 1).relu() - a


def _entries(fn):
    return sum(len(s.entries) for s in eval_frame.states_of(fn.__code__))


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_vmap_over_a_compiled_function_matches_eager(backend):
    cf = st.compile(f, backend=backend)
    x = st.randn(3)
    assert st.equal(cf(x), f(x))
    xs = st.randn(4, 3)
    vmap = getattr(st, "vmap", None) or st.func.vmap
    got = vmap(cf)(xs)
    assert got.shape == (4, 3) and st.allclose(got, f(xs))
    # The plain call still runs its entry; the batched one added none.
    assert st.equal(cf(x), f(x)) and _entries(f) == 1


def test_key_set_is_part_of_the_guard():
    x = st.randn(3)
    keys = st._C._guards.dispatch_key_bits(x)
    gs = st._C._guards.GuardSet(["x"])
    gs.add_tensor((("arg", 0),), x.dtype, "cpu", False, [3], [1], keys)
    assert gs.check((x,), {}, None)
    gs2 = st._C._guards.GuardSet(["x"])
    gs2.add_tensor((("arg", 0),), x.dtype, "cpu", False, [3], [1], keys | (1 << 28))
    assert not gs2.check((x,), {}, None)
    assert "dispatch_keys" in gs2.check_verbose((x,), {}, None)
    with pytest.raises(TypeError, match="keys must be an int"):
        gs.add_tensor((("arg", 0),), x.dtype, "cpu", False, [3], [1], "x")
