"""Inference tensors (Tensor.is_inference) and the mps device, against torch: tensors made under inference_mode are
inference tensors, their views too; outside inference mode they refuse in-place updates, requires_grad and being
saved for backward, with torch's messages."""

import pytest

import strata

torch = pytest.importorskip("torch")


def make(lib):
    with lib.inference_mode():
        a = lib.ones(3)
        v = a[1:]
        n = lib.ones(2)
        with lib.inference_mode(False):
            b = lib.ones(3)
            nested_enabled = lib.is_inference_mode_enabled()
        c = a * 2
    return {"a": a, "v": v, "b": b, "c": c, "n": n, "nested_enabled": nested_enabled}


def test_flags_match_torch():
    s, t = make(strata), make(torch)
    for k in ("a", "v", "b", "c", "n"):
        assert s[k].is_inference() == t[k].is_inference(), k
    assert s["nested_enabled"] == t["nested_enabled"] is False
    assert not strata.ones(2).is_inference()
    # views of an inference tensor made outside inference mode are inference tensors; a view of a normal tensor
    # made inside inference mode is not.
    assert s["a"].view(3).is_inference() and s["a"].t().is_inference() and s["a"][0].is_inference()
    assert t["a"].view(3).is_inference()
    normal, tnormal = strata.ones(3), torch.ones(3)
    with strata.inference_mode():
        sv = normal[1:]
    with torch.inference_mode():
        tv = tnormal[1:]
    assert sv.is_inference() == tv.is_inference()
    # out-of-place results computed outside inference mode are normal tensors
    assert not (s["a"] + 1).is_inference() and not (t["a"] + 1).is_inference()


def errors(fn, lib, x):
    try:
        fn(lib, x)
    except RuntimeError as e:
        return str(e)
    return None


def _messages(fn):
    s, t = make(strata), make(torch)
    return errors(fn, strata, s["a"]), errors(fn, torch, t["a"])


@pytest.mark.parametrize("fn", [
    lambda lib, x: x.add_(1),
    lambda lib, x: x.zero_(),
    lambda lib, x: x.mul_(2),
    lambda lib, x: x.copy_(lib.zeros(3)),
    lambda lib, x: x.fill_(2.0),
    lambda lib, x: x.__setitem__(0, 5.0),
    lambda lib, x: lib.add(lib.ones(3), 1, out=x),
    lambda lib, x: x[1:].add_(1),
], ids=["add_", "zero_", "mul_", "copy_", "fill_", "setitem", "out=", "view-add_"])
def test_inplace_outside_inference_mode_refused(fn):
    se, te = _messages(fn)
    assert te is not None and te.startswith("Inplace update to inference tensor outside InferenceMode")
    assert se == te


def test_inplace_inside_inference_mode_allowed():
    a = make(strata)["a"]
    with strata.inference_mode():
        a.add_(1)
    assert a.tolist() == [2.0, 2.0, 2.0]
    # a normal tensor may be updated in place inside inference mode
    n = strata.ones(2)
    with strata.inference_mode():
        n.add_(1)
    assert n.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.ones(3, requires_grad=True) * x,
    lambda lib, x: lib.ones(3, requires_grad=True).exp() * x,
    lambda lib, x: lib.nn.functional.linear(lib.ones(3, requires_grad=True), x.view(1, 3)),
], ids=["mul", "exp-mul", "linear"])
def test_saved_for_backward_refused(fn):
    se, te = _messages(fn)
    assert te is not None and te.startswith("Inference tensors cannot be saved for backward.")
    assert se is not None and se.startswith("Inference tensors cannot be saved for backward.")


def test_ops_that_save_nothing_are_allowed():
    s, t = make(strata), make(torch)
    assert (strata.ones(3, requires_grad=True) + s["a"]).requires_grad
    assert (torch.ones(3, requires_grad=True) + t["a"]).requires_grad
    assert not (s["a"] * 2).is_inference()


def test_requires_grad_refused():
    s, t = make(strata), make(torch)
    with pytest.raises(RuntimeError) as te:
        t["a"].requires_grad_()
    with pytest.raises(RuntimeError) as se:
        s["a"].requires_grad_()
    assert str(se.value) == str(te.value)
    # clone() gives a normal tensor
    c = s["a"].clone()
    assert not c.is_inference()
    c.add_(1).requires_grad_()


def test_mps_device_as_torch_cpu_build():
    for spec in ("mps", "mps:0"):
        sd, td = strata.device(spec), torch.device(spec)
        assert sd.type == td.type == "mps"
        assert sd.index == td.index
        assert str(sd) == str(td)
        assert repr(sd).endswith(repr(td)[len("device"):])  # device(type='mps', index=0)
    assert strata.device("mps", 0) == strata.device("mps:0")
    assert strata.backends.mps.is_available() is False
    # as torch's CPU-only build: no kernel for the MPS backend, and .to() says mps is not linked
    with pytest.raises(NotImplementedError) as te:
        torch.empty(2, device="mps")
    with pytest.raises(NotImplementedError) as se:
        strata.empty(2, device="mps")
    assert "from the 'MPS' backend" in str(te.value) and "from the 'MPS' backend" in str(se.value)
    with pytest.raises(RuntimeError, match="not linked with support for mps devices"):
        torch.zeros(2).to("mps")
    with pytest.raises(RuntimeError, match="not linked with support for mps devices"):
        strata.zeros(2).to("mps")
