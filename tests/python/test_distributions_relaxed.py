"""Cauchy, RelaxedBernoulli, RelaxedOneHotCategorical and Wishart against torch.distributions (densities, entropies,
moments) and against their definitions (sample moments, reparameterised gradients)."""

import math

import pytest

import strata
import strata.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions
f64 = strata.float64


def _t(lib, x):
    return lib.tensor(x, dtype=lib.float64)


def _close(a, b, tol=1e-10):
    a, b = a.tolist(), b.tolist()
    flat = lambda v: [x for r in v for x in flat(r)] if isinstance(v, list) else [v]  # noqa: E731
    assert flat(a) == pytest.approx(flat(b), rel=tol, abs=tol, nan_ok=True)


def test_cauchy_matches_torch():
    loc, scale = [0.5, -1.0], [2.0, 0.3]
    x = [[0.1, 3.0], [-2.0, 0.0]]
    ours, ref = D.Cauchy(_t(strata, loc), _t(strata, scale)), TD.Cauchy(_t(torch, loc), _t(torch, scale))
    _close(ours.log_prob(_t(strata, x)), ref.log_prob(_t(torch, x)))
    _close(ours.cdf(_t(strata, x)), ref.cdf(_t(torch, x)))
    _close(ours.icdf(_t(strata, [0.2, 0.9])), ref.icdf(_t(torch, [0.2, 0.9])))
    _close(ours.entropy(), ref.entropy())
    _close(ours.mean, ref.mean)
    _close(ours.variance, ref.variance)
    assert ours.batch_shape == (2,) and ours.expand((3, 2)).batch_shape == (3, 2)
    with pytest.raises(ValueError, match="scale"):
        D.Cauchy(0.0, -1.0, validate_args=True)


def test_cauchy_samples_and_rsample_gradient():
    strata.manual_seed(0)
    loc = strata.tensor(1.5, requires_grad=True)
    scale = strata.tensor(0.5, requires_grad=True)
    s = D.Cauchy(loc, scale).rsample((20000,))
    med = s.median().item()
    assert abs(med - 1.5) < 0.03
    # quartiles are loc -+ scale
    q = strata.quantile(s.detach(), strata.tensor([0.25, 0.75])).tolist()
    assert q == pytest.approx([1.0, 2.0], abs=0.05)
    s.sum().backward()
    assert loc.grad.item() == pytest.approx(20000.0)
    assert scale.grad.item() == pytest.approx(((s.detach() - 1.5) / 0.5).sum().item(), rel=1e-4)


@pytest.mark.parametrize("param", ["probs", "logits"])
def test_relaxed_bernoulli_matches_torch(param):
    vals = [0.3, 0.8] if param == "probs" else [0.3, -1.2]
    v = [0.2, 0.9]
    ours = D.RelaxedBernoulli(_t(strata, 0.7), **{param: _t(strata, vals)})
    ref = TD.RelaxedBernoulli(_t(torch, 0.7), **{param: _t(torch, vals)})
    _close(ours.log_prob(_t(strata, v)), ref.log_prob(_t(torch, v)))
    _close(ours.probs, ref.probs)
    _close(ours.logits, ref.logits)
    assert ours.batch_shape == ref.batch_shape and ours.event_shape == ref.event_shape
    lo, lr = D.LogitRelaxedBernoulli(_t(strata, 0.7), **{param: _t(strata, vals)}), \
        TD.relaxed_bernoulli.LogitRelaxedBernoulli(_t(torch, 0.7), **{param: _t(torch, vals)})
    _close(lo.log_prob(_t(strata, [-0.5, 2.0])), lr.log_prob(_t(torch, [-0.5, 2.0])))


def test_relaxed_bernoulli_samples_and_gradients():
    strata.manual_seed(1)
    probs = strata.tensor([0.2, 0.7], requires_grad=True)
    d = D.RelaxedBernoulli(strata.tensor(0.05), probs=probs)
    s = d.rsample((20000,))
    assert ((s > 0) & (s < 1)).all()
    assert s.mean(0).tolist() == pytest.approx([0.2, 0.7], abs=0.02)  # near-discrete at low temperature
    s.mean(0).sum().backward()
    assert probs.grad is not None and bool(strata.isfinite(probs.grad).all()) and bool((probs.grad > 0).all())
    with pytest.raises(ValueError, match="probs.*logits"):
        D.RelaxedBernoulli(0.5)


def test_relaxed_one_hot_categorical_matches_torch():
    p = [0.2, 0.5, 0.3]
    v = [[0.1, 0.7, 0.2], [0.3, 0.3, 0.4]]
    for kw in ({"probs": p}, {"logits": [0.1, -2.0, 1.0]}):
        ours = D.RelaxedOneHotCategorical(_t(strata, 0.6), **{k: _t(strata, x) for k, x in kw.items()})
        ref = TD.RelaxedOneHotCategorical(_t(torch, 0.6), **{k: _t(torch, x) for k, x in kw.items()})
        _close(ours.log_prob(_t(strata, v)), ref.log_prob(_t(torch, v)))
        _close(ours.probs, ref.probs)
        assert ours.batch_shape == ref.batch_shape and ours.event_shape == ref.event_shape
        eo = D.relaxed_categorical.ExpRelaxedCategorical(_t(strata, 0.6), **{k: _t(strata, x) for k, x in kw.items()})
        er = TD.relaxed_categorical.ExpRelaxedCategorical(_t(torch, 0.6), **{k: _t(torch, x) for k, x in kw.items()})
        lv = [[-2.0, -0.5, -1.2]]
        _close(eo.log_prob(_t(strata, lv)), er.log_prob(_t(torch, lv)))


def test_relaxed_one_hot_samples_and_gradients():
    strata.manual_seed(2)
    logits = strata.tensor([0.0, 1.0, -1.0], requires_grad=True)
    d = D.RelaxedOneHotCategorical(strata.tensor(0.05), logits=logits)
    s = d.rsample((20000,))
    assert s.sum(-1).tolist() == pytest.approx([1.0] * 20000, abs=1e-5)
    assert s.mean(0).tolist() == pytest.approx(strata.softmax(logits.detach(), -1).tolist(), abs=0.02)
    (s[:, 1]).mean().backward()
    g = logits.grad.tolist()
    assert g[1] > 0 and g[0] < 0 and g[2] < 0  # raising logit 1 raises component 1


def _wisharts(lib, kind):
    cov = _t(lib, [[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 0.5]])
    if kind == "cov":
        return lib.distributions.Wishart(_t(lib, 5.0), covariance_matrix=cov)
    if kind == "prec":
        return lib.distributions.Wishart(4.5, precision_matrix=lib.linalg.inv(cov))
    return lib.distributions.Wishart(_t(lib, [4.0, 6.0]), scale_tril=lib.linalg.cholesky(cov))


@pytest.mark.parametrize("kind", ["cov", "prec", "tril_batch"])
def test_wishart_matches_torch(kind):
    ours, ref = _wisharts(strata, kind), _wisharts(torch, kind)
    x = [[3.0, 0.5, 0.2], [0.5, 2.0, 0.1], [0.2, 0.1, 1.5]]
    _close(ours.log_prob(_t(strata, x)), ref.log_prob(_t(torch, x)), 1e-9)
    _close(ours.entropy(), ref.entropy(), 1e-9)
    _close(ours.mean, ref.mean, 1e-9)
    _close(ours.variance, ref.variance, 1e-9)
    _close(ours.covariance_matrix, ref.covariance_matrix, 1e-9)
    _close(ours.precision_matrix, ref.precision_matrix, 1e-9)
    assert ours.batch_shape == ref.batch_shape and ours.event_shape == ref.event_shape


def test_wishart_sample_moments_and_gradients():
    strata.manual_seed(3)
    cov = _t(strata, [[2.0, 0.3], [0.3, 1.0]])
    df = strata.tensor(5.0, dtype=f64, requires_grad=True)
    l = strata.linalg.cholesky(cov).requires_grad_()
    d = D.Wishart(df, scale_tril=l)
    s = d.rsample((8000,))
    assert bool((strata.linalg.eigvalsh(s) > 0).all())
    _close(s.mean(0).detach(), 5.0 * cov, 0.05)
    assert s.var(0).detach().tolist()[0][0] == pytest.approx(d.variance.detach().tolist()[0][0], rel=0.1)
    s.mean(0).sum().backward()
    # E[sum X] = df * sum(cov): d/d df = sum(cov) = 3.6
    assert df.grad.item() == pytest.approx(3.6, rel=0.08)
    assert l.grad is not None and bool(strata.isfinite(l.grad).all())


def test_wishart_errors():
    cov = strata.eye(3, dtype=f64)
    with pytest.raises(ValueError, match="greater than ndim - 1"):
        D.Wishart(1.5, covariance_matrix=cov)
    with pytest.raises(ValueError, match="Exactly one"):
        D.Wishart(4.0, covariance_matrix=cov, scale_tril=cov)


def test_family_modules():
    from strata.distributions.relaxed_bernoulli import RelaxedBernoulli
    from strata.distributions.wishart import Wishart
    assert RelaxedBernoulli is D.RelaxedBernoulli and Wishart is D.Wishart
    assert D.cauchy.Cauchy is D.Cauchy and D.relaxed_categorical.RelaxedOneHotCategorical is \
        D.RelaxedOneHotCategorical
    assert math.isnan(D.Cauchy(0.0, 1.0).mean.item())
