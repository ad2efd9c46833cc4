"""strata.nn.init compared with torch.nn.init: gains, fans, bounds and moments of the distributions, errors."""

import math

import numpy as np
import pytest

import strata
import strata.nn as nn
from strata.nn import init

torch = pytest.importorskip("torch")

from test_nn_modules import _parameters_without_core_support  # noqa: E402,F401  (autouse fixture)


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                                        ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


@pytest.mark.parametrize("shape", [(3, 4), (8, 2, 3, 3), (5, 6, 7)])
def test_fan_in_fan_out(shape):
    assert init._calculate_fan_in_and_fan_out(strata.empty(shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_fan_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(strata.empty(3))
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(strata.empty(3, 3), mode="fan_avg")


def _stats(t):
    a = t.numpy().astype(np.float64)
    return a, a.mean(), a.std()


def test_returns_same_tensor_and_runs_under_no_grad():
    t = strata.empty(10, 10)
    for fn in (init.uniform_, init.normal_, init.zeros_, init.ones_, init.eye_, init.xavier_uniform_,
               init.xavier_normal_, init.kaiming_uniform_, init.kaiming_normal_, init.trunc_normal_):
        assert fn(t) is t
    assert init.constant_(t, 0.5) is t and np.all(t.numpy() == 0.5)


def test_uniform_normal_constant():
    a, m, s = _stats(init.uniform_(strata.empty(200, 200), -2.0, 3.0))
    assert a.min() >= -2 and a.max() <= 3 and abs(m - 0.5) < 0.05
    a, m, s = _stats(init.normal_(strata.empty(200, 200), 1.0, 2.0))
    assert abs(m - 1) < 0.05 and abs(s - 2) < 0.05
    assert np.all(init.zeros_(strata.ones(3)).numpy() == 0)
    assert np.all(init.ones_(strata.zeros(3)).numpy() == 1)
    np.testing.assert_array_equal(init.eye_(strata.empty(3, 5)).numpy(), np.eye(3, 5))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(strata.empty(2, 2, 2))


def test_generator_makes_init_reproducible():
    a = init.normal_(strata.empty(5, 5), generator=strata.Generator().manual_seed(3)).numpy()
    b = init.normal_(strata.empty(5, 5), generator=strata.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_xavier(gain):
    shape = (300, 200)
    std = gain * math.sqrt(2.0 / (300 + 200))
    a, m, s = _stats(init.xavier_uniform_(strata.empty(shape), gain=gain))
    bound = math.sqrt(3) * std
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound and abs(s - std) < 0.02 * std
    a, m, s = _stats(init.xavier_normal_(strata.empty(shape), gain=gain))
    assert abs(s - std) < 0.02 * std and abs(m) < 0.02 * std


@pytest.mark.parametrize("mode,nonlin,a", [("fan_in", "leaky_relu", 0), ("fan_out", "relu", 0),
                                           ("fan_in", "leaky_relu", math.sqrt(5)), ("fan_in", "tanh", 0)])
def test_kaiming(mode, nonlin, a):
    t = strata.empty(64, 32, 3, 3)
    fan = 32 * 9 if mode == "fan_in" else 64 * 9
    std = torch.nn.init.calculate_gain(nonlin, a) / math.sqrt(fan)
    x, m, s = _stats(init.kaiming_uniform_(t, a=a, mode=mode, nonlinearity=nonlin))
    assert np.abs(x).max() <= math.sqrt(3) * std * (1 + 1e-6) and abs(s - std) < 0.03 * std
    x, m, s = _stats(init.kaiming_normal_(t, a=a, mode=mode, nonlinearity=nonlin))
    assert abs(s - std) < 0.03 * std


def test_kaiming_zero_element_warns():
    t = strata.empty(0, 3)
    with pytest.warns(UserWarning, match="zero-element"):
        assert init.kaiming_uniform_(t) is t


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (1.0, 2.0, 0.0, 5.0),
                                          (0.0, 1.0, 2.5, 4.0)])
def test_trunc_normal_matches_truncated_distribution(mean, std, a, b):
    x = init.trunc_normal_(strata.empty(200000), mean, std, a, b).numpy().astype(np.float64)
    assert x.min() >= a and x.max() <= b
    alpha, beta = (a - mean) / std, (b - mean) / std
    # Moments of the truncated normal, in closed form.
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    Z = cdf(beta) - cdf(alpha)
    d = (pdf(alpha) - pdf(beta)) / Z
    exp_mean = mean + std * d
    exp_std = std * math.sqrt(1 + (alpha * pdf(alpha) - beta * pdf(beta)) / Z - d * d)
    assert abs(x.mean() - exp_mean) < 0.01 * std
    assert abs(x.std() - exp_std) < 0.01 * std
    assert np.isfinite(x).all()


def test_init_on_module_parameters():
    m = nn.Linear(20, 30)
    init.xavier_uniform_(m.weight)
    init.zeros_(m.bias)
    bound = math.sqrt(6 / 50)
    assert np.abs(m.weight.numpy()).max() <= bound
    assert np.all(m.bias.numpy() == 0)


def test_init_keeps_dtype():
    for dt in (strata.float64, strata.float16, strata.bfloat16):
        t = init.kaiming_uniform_(strata.empty(8, 8, dtype=dt))
        assert t.dtype is dt
        t = init.trunc_normal_(strata.empty(8, 8, dtype=dt))
        assert t.dtype is dt
