"""Every op must work on the Meta device: it needs a Meta kernel, or a
CompositeImplicit one (written in terms of other ops, which have Meta kernels).
A new op that skips Meta fails here by name."""

import pytest

import strata

_C = strata._C


def _full_name(info):
    return info["name"] + ("." + info["overload"] if info["overload"] else "")


_OPS = sorted({_full_name(i) for i in _C._op_schemas()})


def test_op_list_is_not_empty():
    assert len(_OPS) > 50
    assert "add" in _OPS


@pytest.mark.parametrize("name", _OPS)
def test_op_has_meta_or_composite_kernel(name):
    keys = _C._kernel_keys(name)
    assert _C._has_kernel(name, "Meta") or _C._has_kernel(name, "CompositeImplicit"), (
        f"op '{name}' has kernels for {keys} but none for Meta (and no CompositeImplicit kernel): register one "
        "with STRATA_IMPL_CPU_META or STRATA_IMPL(op, Meta, fn), checking device().is_meta() before touching data"
    )


def test_has_kernel_answers_correctly():
    assert _C._has_kernel("add", "CPU")
    assert _C._has_kernel("add", "Meta")
    assert not _C._has_kernel("add", "Vmap")
    assert _C._has_kernel("contiguous", "CompositeImplicit")
    assert "CPU" in _C._kernel_keys("add") and "Meta" in _C._kernel_keys("add")
    with pytest.raises(ValueError, match="no operator"):
        _C._has_kernel("no_such_op", "CPU")
    with pytest.raises(ValueError, match="dispatch key"):
        _C._has_kernel("add", "NoSuchKey")


def test_meta_kernels_run_for_simple_ops():
    m = strata.tensor([[1.0, 2.0, 3.0]], device="meta")
    for f in [strata.exp, strata.neg, strata.abs, lambda t: t + 1, lambda t: strata.add(t, t, alpha=2)]:
        r = f(m)
        assert r.device.type == "meta" and tuple(r.shape) == (1, 3) and r.dtype is strata.float32
    assert (strata.tensor([1, 2], device="meta") / 2).dtype is strata.float32
