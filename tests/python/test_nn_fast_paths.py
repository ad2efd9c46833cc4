"""The hook-free fast paths of nn (Module.__call__, Sequential.forward calling children's forward directly,
Linear.forward reading _parameters) and the slotted grad-mode context managers: each must behave exactly like the
general path whenever that path would do something different."""

import numpy as np
import pytest

import strata
from strata import nn

F = nn.functional


@pytest.fixture(autouse=True)
def _keep_global_rng():
    # Module construction draws from the global generator; leave its state as found so that tests later in the
    # session see the same random numbers whether or not these ran.
    state = strata.get_rng_state()
    yield
    strata.set_rng_state(state)


def _x(*shape):
    return strata.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


def _close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


def test_sequential_runs_hooks_of_children():
    l1, r, l2 = nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)
    seq = nn.Sequential(l1, r, l2)
    x = _x(2, 4)
    plain = seq(x)
    seen = []
    h1 = r.register_forward_hook(lambda m, args, out: seen.append("post") or out * 0)
    h2 = l2.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    out = seq(x)
    assert seen == ["post", "pre"]
    _close(out, l2.bias.detach().expand(2, 3))  # relu output zeroed by the hook
    h1.remove(), h2.remove()
    _close(seq(x), plain)


def test_sequential_respects_custom_call_and_iter():
    calls = []

    class Loud(nn.Module):
        def forward(self, x):
            return x + 1

        def __call__(self, *args, **kwargs):
            calls.append("call")
            return super().__call__(*args, **kwargs)

    seq = nn.Sequential(Loud(), Loud())
    _close(seq(_x(3)), _x(3) + 2)
    assert calls == ["call", "call"]

    class Reversed(nn.Sequential):
        def __iter__(self):
            return reversed(list(self._modules.values()))

    order = []

    class Tag(nn.Module):
        def __init__(self, t):
            super().__init__()
            self.t = t

        def forward(self, x):
            order.append(self.t)
            return x

    Reversed(Tag("a"), Tag("b"))(_x(1))
    assert order == ["b", "a"]


def test_sequential_with_none_child_raises_like_calling_none():
    seq = nn.Sequential(nn.ReLU())
    seq._modules["1"] = None
    with pytest.raises(TypeError):
        seq(_x(2))


def test_module_call_passes_kwargs_and_positional():
    class Two(nn.Module):
        def forward(self, a, b=None, *, scale=1.0):
            return a * scale if b is None else (a + b) * scale

    m = Two()
    x = _x(3)
    _close(m(x), x)
    _close(m(x, x), x * 2)
    _close(m(x, b=x, scale=3.0), x * 6)
    _close(m(a=x), x)


def test_linear_forward_uses_replaced_parameters_and_attributes():
    lin = nn.Linear(4, 3)
    x = _x(2, 4)
    _close(lin(x), F.linear(x, lin.weight, lin.bias))
    # Parameters replaced by assignment are used.
    lin.weight = nn.Parameter(strata.zeros(3, 4))
    _close(lin(x), lin.bias.detach().expand(2, 3))
    # No bias.
    nb = nn.Linear(4, 3, bias=False)
    _close(nb(x), F.linear(x, nb.weight))
    # The parameter deleted and a plain tensor attribute in its place (what weight-norm style code does).
    del lin.weight
    lin.weight = strata.ones(3, 4)
    _close(lin(x), F.linear(x, strata.ones(3, 4), lin.bias))
    # An instance attribute shadowing a registered parameter wins, as with normal attribute lookup.
    lin2 = nn.Linear(4, 3)
    object.__setattr__(lin2, "bias", strata.zeros(3))
    _close(lin2(x), F.linear(x, lin2._parameters["weight"], strata.zeros(3)))


def test_linear_subclass_with_weight_property():
    # What nn.utils.parametrize does: the class gains a `weight` property computed from other state.
    class Scaled(nn.Linear):
        @property
        def weight(self):
            return self._parameters["raw"] * 2

    # Like parametrize: built as a Linear, then the parameter moved and the class swapped.
    m = nn.Linear(4, 3)
    m.register_parameter("raw", m._parameters.pop("weight"))
    m.__class__ = Scaled
    x = _x(2, 4)
    _close(m(x), F.linear(x, m.raw * 2, m.bias))
    # A class property shadows the registered parameter of the same name.
    class Doubled(nn.Linear):
        @property
        def weight(self):
            return self._parameters["weight"] * 2

    d = nn.Linear(4, 3)
    d.__class__ = Doubled
    _close(d(x), F.linear(x, d._parameters["weight"] * 2, d.bias))
    plain_sub = type("Plain", (nn.Linear,), {})(4, 3)
    _close(plain_sub(x), F.linear(x, plain_sub.weight, plain_sub.bias))


def test_f_linear_is_callable_with_keywords():
    x, w, b = _x(2, 4), _x(3, 4), _x(3)
    _close(F.linear(x, w, b), F.linear(input=x, weight=w, bias=b))
    _close(F.linear(x, w), F.linear(x, w, None))
    with pytest.raises(RuntimeError, match="linear"):
        F.linear(x, _x(3, 5))


def test_relu_inplace_module_and_functional():
    x = _x(5)
    ref = np.maximum(x.numpy(), 0)
    y = x.clone()
    assert nn.ReLU(inplace=True)(y) is y
    np.testing.assert_array_equal(y.numpy(), ref)
    y = x.clone()
    assert F.relu(y, True) is y
    np.testing.assert_array_equal(y.numpy(), ref)
    np.testing.assert_array_equal(F.relu(x).numpy(), ref)
    np.testing.assert_array_equal(x.numpy(), _x(5).numpy())


def test_grad_modes_nest_and_restore():
    assert strata.is_grad_enabled()
    ng = strata.no_grad()
    with ng:
        assert not strata.is_grad_enabled()
        with strata.enable_grad():
            assert strata.is_grad_enabled()
            with ng:  # the same object re-entered while in use
                assert not strata.is_grad_enabled()
            assert strata.is_grad_enabled()
        assert not strata.is_grad_enabled()
    assert strata.is_grad_enabled()
    with pytest.raises(ValueError):
        with strata.no_grad():
            raise ValueError("restored on the way out")
    assert strata.is_grad_enabled()
    with strata.inference_mode():
        assert not strata.is_grad_enabled()
    with strata.inference_mode(False):
        assert strata.is_grad_enabled()
    with strata.set_grad_enabled(False):
        assert not strata.is_grad_enabled()
    assert strata.is_grad_enabled()

    @strata.no_grad()
    def f():
        return strata.is_grad_enabled()

    assert f() is False and strata.is_grad_enabled()
