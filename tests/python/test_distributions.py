"""strata.distributions against torch.distributions on the same parameters: log_prob,
entropy, cdf/icdf, mean/mode/variance, kl_divergence; sample moments with fixed seeds
(tolerances of several standard errors), rsample gradients, validation errors, and a
small normalizing flow / VAE loss written in torch style."""

import numpy as np
import pytest
import torch

import strata as st
import strata.distributions as D
import torch.distributions as TD


def S(x, **kw):
    return st.tensor(np.asarray(x, dtype=np.float64), **kw)


def T(x, **kw):
    return torch.tensor(np.asarray(x, dtype=np.float64), **kw)


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a, dtype=np.float64),
                               b.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)


LOC, SCALE = [-1.0, 0.0, 2.5], [0.5, 1.0, 3.0]
CONC, RATE = [0.4, 1.0, 5.0], [0.5, 2.0, 1.5]
PROBS = [0.1, 0.5, 0.93]
CAT = [[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]]

# (name, strata ctor, torch ctor, values inside the support)
CASES = [
    ("Normal", lambda M, P: M.Normal(P(LOC), P(SCALE)), [0.3, -2.0, 7.0]),
    ("Laplace", lambda M, P: M.Laplace(P(LOC), P(SCALE)), [0.3, -2.0, 7.0]),
    ("Uniform", lambda M, P: M.Uniform(P(LOC), P([0.0, 1.0, 4.0])), [-0.5, 0.2, 3.0]),
    ("Exponential", lambda M, P: M.Exponential(P(RATE)), [0.3, 2.0, 0.01]),
    ("Gamma", lambda M, P: M.Gamma(P(CONC), P(RATE)), [0.3, 2.0, 4.0]),
    ("Beta", lambda M, P: M.Beta(P(CONC), P(RATE)), [0.3, 0.5, 0.9]),
    ("LogNormal", lambda M, P: M.LogNormal(P(LOC), P(SCALE)), [0.3, 2.0, 7.0]),
    ("Bernoulli", lambda M, P: M.Bernoulli(P(PROBS)), [0.0, 1.0, 1.0]),
    ("BernoulliLogits", lambda M, P: M.Bernoulli(logits=P([-2.0, 0.0, 3.0])), [0.0, 1.0, 0.0]),
    ("Poisson", lambda M, P: M.Poisson(P(RATE)), [0.0, 3.0, 1.0]),
    ("Binomial", lambda M, P: M.Binomial(10, P(PROBS)), [0.0, 5.0, 10.0]),
    ("Categorical", lambda M, P: M.Categorical(P(CAT)), [2.0, 0.0]),
    ("OneHotCategorical", lambda M, P: M.OneHotCategorical(P(CAT)), [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
    ("Dirichlet", lambda M, P: M.Dirichlet(P(CAT) * 4), [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]),
    ("Independent", lambda M, P: M.Independent(M.Normal(P([LOC, SCALE]), P([SCALE, SCALE])), 1),
     [[0.3, -2.0, 7.0], [0.0, 1.0, 2.0]]),
]
PROPS = ["mean", "variance", "stddev", "mode"]


@pytest.mark.parametrize("name,make,values", CASES, ids=[c[0] for c in CASES])
def test_against_torch(name, make, values):
    d, t = make(D, S), make(TD, T)
    assert tuple(d.batch_shape) == tuple(t.batch_shape) and tuple(d.event_shape) == tuple(t.event_shape)
    v = np.asarray(values, dtype=np.float64)
    close(d.log_prob(S(v)), t.log_prob(T(v)))
    for p in PROPS:
        close(getattr(d, p), getattr(t, p))
    try:
        te = t.entropy()
    except NotImplementedError:
        te = None
    if te is not None:
        close(d.entropy(), te)
    for fn in ("cdf",):
        try:
            tv = getattr(t, fn)(T(v))
        except NotImplementedError:
            continue
        close(getattr(d, fn)(S(v)), tv)
    try:
        q = np.array([0.05, 0.5, 0.9])[: v.shape[-1]] if v.ndim == 1 else None
        tv = t.icdf(T(q)) if q is not None else None
    except NotImplementedError:
        tv = None
    if tv is not None:
        close(d.icdf(S(q)), tv)
    # sample shapes and support
    s = d.sample((5,))
    assert tuple(s.shape) == tuple(t.sample((5,)).shape)
    if t.has_enumerate_support:
        close(d.enumerate_support(), t.enumerate_support())
    e = d.expand((4,) + tuple(d.batch_shape))
    assert tuple(e.batch_shape) == (4,) + tuple(d.batch_shape)
    close(e.log_prob(S(v)), t.expand((4,) + tuple(t.batch_shape)).log_prob(T(v)))


MOMENT_CASES = [c for c in CASES if c[0] not in ("Categorical",)]


@pytest.mark.parametrize("name,make,values", MOMENT_CASES, ids=[c[0] for c in MOMENT_CASES])
def test_sample_moments(name, make, values):
    st.manual_seed(1234)
    d = make(D, S)
    n = 40000
    x = d.sample((n,)).numpy()
    mean, var = d.mean.numpy(), d.variance.numpy()
    if name == "LogNormal":  # heavy-tailed: check log x ~ Normal(loc, scale) instead
        x, mean, var = np.log(x), np.asarray(LOC), np.asarray(SCALE) ** 2
    # the sample mean is within 5 standard errors; the variance within 10% (+ a floor)
    se = np.sqrt(var / n)
    assert np.all(np.abs(x.mean(0) - mean) <= 5 * se + 1e-12), (x.mean(0), mean)
    assert np.all(np.abs(x.var(0) - var) <= 0.1 * var + 1e-3), (x.var(0), var)


def test_categorical_frequencies_and_seed_reproducibility():
    st.manual_seed(7)
    c = D.Categorical(S(CAT))
    a = c.sample((30000,)).numpy()
    freq = np.stack([(a == k).mean(0) for k in range(3)], -1)
    assert np.abs(freq - np.asarray(CAT)).max() < 0.015
    st.manual_seed(3)
    x1 = D.Gamma(S(CONC), S(RATE)).sample((10,)).numpy()
    st.manual_seed(3)
    x2 = D.Gamma(S(CONC), S(RATE)).sample((10,)).numpy()
    assert np.array_equal(x1, x2)


@pytest.mark.parametrize("pair", [
    ("Normal", "Normal"), ("Laplace", "Laplace"), ("Exponential", "Exponential"), ("Gamma", "Gamma"),
    ("Beta", "Beta"), ("Dirichlet", "Dirichlet"), ("Bernoulli", "Bernoulli"), ("Categorical", "Categorical"),
    ("OneHotCategorical", "OneHotCategorical"), ("Poisson", "Poisson"), ("Binomial", "Binomial"),
    ("LogNormal", "LogNormal"), ("Independent", "Independent"), ("Uniform", "Uniform"), ("Uniform", "Normal"),
])
def test_kl_against_torch(pair):
    mk = {c[0]: c[1] for c in CASES}

    def other(M, P, name):
        # a second member of the family with different parameters
        return {
            "Normal": lambda: M.Normal(P([0.3, 1.0, -1.0]), P([1.5, 0.7, 2.0])),
            "Laplace": lambda: M.Laplace(P([0.3, 1.0, -1.0]), P([1.5, 0.7, 2.0])),
            "Exponential": lambda: M.Exponential(P([1.5, 0.7, 2.0])),
            "Gamma": lambda: M.Gamma(P([1.5, 0.7, 2.0]), P([1.0, 3.0, 0.2])),
            "Beta": lambda: M.Beta(P([1.5, 0.7, 2.0]), P([1.0, 3.0, 0.2])),
            "Dirichlet": lambda: M.Dirichlet(P([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0]])),
            "Bernoulli": lambda: M.Bernoulli(P([0.3, 0.0, 0.5])),
            "Categorical": lambda: M.Categorical(P([[0.5, 0.25, 0.25], [0.1, 0.0, 0.9]])),
            "OneHotCategorical": lambda: M.OneHotCategorical(P([[0.5, 0.25, 0.25], [0.1, 0.0, 0.9]])),
            "Poisson": lambda: M.Poisson(P([1.5, 0.7, 2.0])),
            "Binomial": lambda: M.Binomial(10, P([0.3, 0.2, 0.5])),
            "LogNormal": lambda: M.LogNormal(P([0.3, 1.0, -1.0]), P([1.5, 0.7, 2.0])),
            "Independent": lambda: M.Independent(M.Normal(P([[0.0] * 3, [1.0] * 3]), P([[2.0] * 3, [0.5] * 3])), 1),
            "Uniform": lambda: M.Uniform(P([-2.0, -1.0, -5.0]), P([1.0, 2.0, 5.0])),
        }[name]()

    p_s, p_t = mk[pair[0]](D, S), mk[pair[0]](TD, T)
    q_s, q_t = other(D, S, pair[1]), other(TD, T, pair[1])
    close(D.kl_divergence(p_s, q_s), TD.kl_divergence(p_t, q_t))


def test_kl_binomial_total_counts():
    p, q = D.Binomial(S([10.0, 12.0]), S([0.3, 0.4])), D.Binomial(S([10.0, 10.0]), S([0.2, 0.5]))
    pt, qt = TD.Binomial(T([10.0, 12.0]), T([0.3, 0.4])), TD.Binomial(T([10.0, 10.0]), T([0.2, 0.5]))
    close(D.kl_divergence(p, q), TD.kl_divergence(pt, qt))
    with pytest.raises(NotImplementedError, match="total_count"):
        D.kl_divergence(q, p)


def test_register_kl_and_missing_pair():
    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return st.zeros(())

    assert float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0))) == 0.0
    assert float(D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(1.0, 1.0))) > 0  # falls back to Normal-Normal
    with pytest.raises(NotImplementedError, match="KL"):
        D.kl_divergence(D.Poisson(1.0), D.Normal(0.0, 1.0))


def test_rsample_gradients():
    # reparameterised samples: the gradient of a mean of samples is the gradient of the mean
    st.manual_seed(0)
    loc, scale = S([0.5], requires_grad=True), S([2.0], requires_grad=True)
    D.Normal(loc, scale).rsample((100000,)).pow(2).mean().backward()   # E[x^2] = loc^2 + scale^2 (5 standard errors)
    assert abs(float(loc.grad) - 1.0) < 0.07 and abs(float(scale.grad) - 4.0) < 0.1
    for conc in (0.3, 1.0, 4.0):
        a = S([conc], requires_grad=True)
        D.Gamma(a, S([2.0])).rsample((40000,)).mean().backward()   # d/da E[x] = 1/rate
        assert abs(float(a.grad) - 0.5) < 0.03, (conc, float(a.grad))
    c1, c0 = S([2.0], requires_grad=True), S([3.0], requires_grad=True)
    D.Beta(c1, c0).rsample((40000,)).mean().backward()   # E = c1/(c1+c0): d/dc1 = c0/(c1+c0)^2 = 0.12
    assert abs(float(c1.grad) - 0.12) < 0.01 and abs(float(c0.grad) + 0.08) < 0.01
    c = S([1.0, 2.0, 3.0], requires_grad=True)
    D.Dirichlet(c).rsample((40000,))[:, 0].mean().backward()   # d E[x0] / dc = (a0 - c0, -c0, -c0)/a0^2
    np.testing.assert_allclose(c.grad.numpy(), np.array([5.0, -1.0, -1.0]) / 36, atol=0.01)
    # the gamma sample's gradient is the implicit one torch also uses (its value checked in test_special)
    a = S([1.5, 3.0], requires_grad=True)
    x = st._C._ops._standard_gamma(a)
    x.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(),
                               torch._standard_gamma_grad(T(a.detach().numpy()), T(x.detach().numpy())).numpy(),
                               rtol=3e-3)


def test_validation_errors():
    with pytest.raises(ValueError, match="scale"):
        D.Normal(S([0.0]), S([-1.0]))
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli(S([1.5]))
    with pytest.raises(ValueError, match="Either"):
        D.Bernoulli(S([0.5]), S([0.0]))
    with pytest.raises(ValueError, match="support"):
        D.Exponential(S([1.0])).log_prob(S([-1.0]))
    with pytest.raises(ValueError, match="support"):
        D.Poisson(S([1.0])).log_prob(S([0.5]))
    with pytest.raises(ValueError, match="broadcastable"):
        D.Normal(S([0.0, 1.0]), S([1.0, 1.0])).log_prob(S([0.0, 1.0, 2.0]))
    D.Normal(S([0.0]), S([-1.0]), validate_args=False)  # no check when asked
    with pytest.raises(NotImplementedError):
        D.Bernoulli(S([0.5])).rsample()


def test_transforms_against_torch():
    x = np.linspace(-3, 3, 7)
    for ms, mt in [(D.ExpTransform(), TD.ExpTransform()), (D.SigmoidTransform(), TD.SigmoidTransform()),
                   (D.TanhTransform(), TD.TanhTransform()),
                   (D.AffineTransform(S(1.5), S(-2.0)), TD.AffineTransform(T(1.5), T(-2.0))),
                   (D.ComposeTransform([D.AffineTransform(0.5, 2.0), D.TanhTransform()]),
                    TD.ComposeTransform([TD.AffineTransform(0.5, 2.0), TD.TanhTransform()]))]:
        ys, yt = ms(S(x)), mt(T(x))
        close(ys, yt)
        close(ms.inv(ys), mt.inv(yt), rtol=1e-8, atol=1e-8)
        close(ms.log_abs_det_jacobian(S(x), ys), mt.log_abs_det_jacobian(T(x), yt), rtol=1e-8, atol=1e-8)


def _flow(M, P, params):
    # a two-layer affine/tanh flow on a standard normal base (torch style)
    base = M.Independent(M.Normal(P(np.zeros(2)), P(np.ones(2))), 1)
    t = [M.AffineTransform(params[0], params[1], event_dim=1), M.TanhTransform(),
         M.AffineTransform(params[2], params[3], event_dim=1)]
    return M.TransformedDistribution(base, t)


def test_normalizing_flow_and_vae_loss_match_torch():
    rng = np.random.default_rng(0)
    raw = [rng.normal(size=2), rng.uniform(0.5, 1.5, size=2), rng.normal(size=2), rng.uniform(0.5, 1.5, size=2)]
    ps = [S(r, requires_grad=True) for r in raw]
    pt = [T(r, requires_grad=True) for r in raw]
    data = rng.uniform(-0.8, 0.8, size=(16, 2)) * raw[3] + raw[2]
    fs, ft = _flow(D, S, ps), _flow(TD, T, pt)
    ls, lt = -fs.log_prob(S(data)).mean(), -ft.log_prob(T(data)).mean()
    close(ls, lt, rtol=1e-9)
    ls.backward()
    lt.backward()
    for a, b in zip(ps, pt):
        close(a.grad, b.grad, rtol=1e-8, atol=1e-10)
    # VAE: Gaussian posterior, standard prior, Bernoulli likelihood (eps shared with torch)
    mu, logvar = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)) * 0.3
    eps = rng.normal(size=(4, 3))
    w = rng.normal(size=(3, 5))
    xb = (rng.uniform(size=(4, 5)) > 0.5).astype(np.float64)

    def vae(M, P):
        m, lv, W = P(mu, requires_grad=True), P(logvar, requires_grad=True), P(w, requires_grad=True)
        q = M.Normal(m, (0.5 * lv).exp())
        z = m + (0.5 * lv).exp() * P(eps)
        rec = M.Bernoulli(logits=z @ W).log_prob(P(xb)).sum(-1)
        kl = M.kl_divergence(q, M.Normal(P(np.zeros(3)), P(np.ones(3)))).sum(-1)
        loss = (kl - rec).mean()
        loss.backward()
        return loss, m.grad, lv.grad, W.grad

    for a, b in zip(vae(D, S), vae(TD, T)):
        close(a, b, rtol=1e-9, atol=1e-12)


def _kl_family(M, P):
    return {
        "Normal": M.Normal(P([0.3, 1.0, -1.0]), P([1.5, 0.7, 2.0])),
        "Laplace": M.Laplace(P([0.3, 1.0, -1.0]), P([1.5, 0.7, 2.0])),
        "Exponential": M.Exponential(P([1.5, 0.7, 2.0])),
        "Gamma": M.Gamma(P([1.5, 0.7, 2.0]), P([1.0, 3.0, 0.2])),
        "Beta": M.Beta(P([1.5, 0.7, 2.0]), P([1.0, 3.0, 0.2])),
        "Uniform": M.Uniform(P([0.1, 0.0, 0.5]), P([0.9, 1.0, 0.7])),
        "UniformWide": M.Uniform(P([-2.0, -1.0, 0.0]), P([1.0, 2.0, 5.0])),
        "Bernoulli": M.Bernoulli(P([0.3, 0.0, 0.5])),
        "Poisson": M.Poisson(P([1.5, 0.7, 2.0])),
        "Binomial": M.Binomial(10, P([0.3, 0.2, 0.5])),
    }


def test_kl_every_pair_torch_covers():
    ds, dt = _kl_family(D, S), _kl_family(TD, T)
    checked = 0
    for a in ds:
        for b in ds:
            try:
                want = TD.kl_divergence(dt[a], dt[b])
            except NotImplementedError:
                with pytest.raises(NotImplementedError):
                    D.kl_divergence(ds[a], ds[b])
                continue
            np.testing.assert_allclose(D.kl_divergence(ds[a], ds[b]).numpy(), want.numpy(), rtol=1e-9, atol=1e-12,
                                       err_msg=f"KL({a} || {b})")
            checked += 1
    assert checked >= 40


def _mvn_params():
    rng = np.random.default_rng(5)
    a = rng.normal(size=(2, 3, 3))
    cov = a @ a.transpose(0, 2, 1) + 3 * np.eye(3)
    return rng.normal(size=(2, 3)), cov, rng.normal(size=(4, 2, 3))


@pytest.mark.parametrize("kw", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_against_torch(kw):
    mu, cov, x = _mvn_params()
    m = np.linalg.cholesky(cov) if kw == "scale_tril" else cov
    d, t = D.MultivariateNormal(S(mu), **{kw: S(m)}), TD.MultivariateNormal(T(mu), **{kw: T(m)})
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
    for f in ("mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        close(getattr(d, f), getattr(t, f), rtol=1e-9, atol=1e-12)
    close(d.log_prob(S(x)), t.log_prob(T(x)))
    close(d.entropy(), t.entropy())
    q, qt = D.MultivariateNormal(S(mu[::-1].copy()), S(cov[::-1].copy())), TD.MultivariateNormal(T(mu[::-1].copy()),
                                                                                               T(cov[::-1].copy()))
    close(D.kl_divergence(d, q), TD.kl_divergence(t, qt))
    e = d.expand((5, 2))
    assert tuple(e.sample().shape) == (5, 2, 3)


def test_multivariate_normal_gradients_moments_and_errors():
    mu, cov, x = _mvn_params()
    ls, cs = S(mu, requires_grad=True), S(cov, requires_grad=True)
    lt, ct = T(mu, requires_grad=True), T(cov, requires_grad=True)
    D.MultivariateNormal(ls, cs).log_prob(S(x)).sum().backward()
    TD.MultivariateNormal(lt, ct).log_prob(T(x)).sum().backward()
    close(ls.grad, lt.grad, rtol=1e-9)
    # torch symmetrises nothing either: both differentiate through the lower triangle of the factorisation
    close(cs.grad + cs.grad.transpose(-1, -2), ct.grad + ct.grad.transpose(-1, -2), rtol=1e-8, atol=1e-10)
    st.manual_seed(11)
    d = D.MultivariateNormal(S(mu), S(cov))
    s = d.rsample((30000,)).numpy()
    assert np.abs(s.mean(0) - mu).max() < 5 * np.sqrt(np.diagonal(cov, axis1=1, axis2=2).max() / 30000)
    emp = np.einsum("nbi,nbj->bij", s - mu, s - mu) / 30000
    assert np.abs(emp - cov).max() < 0.06 * np.abs(cov).max()
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.MultivariateNormal(S([0.0, 0.0]), S(bad))
    with pytest.raises(ValueError, match="Exactly one"):
        D.MultivariateNormal(S([0.0, 0.0]))


def test_gaussian_process_marginal_likelihood_matches_torch():
    # a GP's log marginal likelihood with an RBF kernel, written in torch style
    rng = np.random.default_rng(9)
    xs, ys = rng.uniform(-2, 2, 12), rng.normal(size=12)

    def nll(M, lib, P):
        ell, noise = P(np.array(0.7), requires_grad=True), P(np.array(0.1), requires_grad=True)
        X = P(xs)
        k = lib.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / ell ** 2) + noise * lib.eye(12, dtype=X.dtype)
        out = -M.MultivariateNormal(lib.zeros(12, dtype=X.dtype), covariance_matrix=k).log_prob(P(ys))
        out.backward()
        return out, ell.grad, noise.grad

    for a, b in zip(nll(D, st, S), nll(TD, torch, T)):
        close(a, b, rtol=1e-8)


def test_standard_gamma_op():
    tiny = np.finfo(np.float32).tiny
    # torch's edges: at least the smallest normal number (underflow, concentration <= 0, nan)
    out = st._standard_gamma(st.tensor([-1.0, 0.0, float("nan"), 1e-3])).numpy()
    want = torch._standard_gamma(torch.tensor([-1.0, 0.0, float("nan"), 1e-3])).numpy()
    assert np.array_equal(out[:3], want[:3]) and out[3] >= tiny
    with pytest.raises(NotImplementedError, match="gamma_cpu.*int64"):
        st._standard_gamma(st.tensor([1, 2]))
    m = st._standard_gamma(st.empty(2, 3, device="meta"))
    assert m.shape == (2, 3) and m.device.type == "meta"
    assert st._standard_gamma(st.ones(0, 4)).shape == (0, 4)
    g1, g2 = st.Generator().manual_seed(5), st.Generator().manual_seed(5)
    a = st.full((1000,), 2.5, dtype=st.float64)
    x1, x2 = st._standard_gamma(a, generator=g1), st._standard_gamma(a, generator=g2)
    assert np.array_equal(x1.numpy(), x2.numpy())
    assert abs(x1.numpy().mean() - 2.5) < 5 * np.sqrt(2.5 / 1000)
    np.testing.assert_allclose(st._standard_gamma_grad(a[:3], x1[:3]).numpy(),
                               torch._standard_gamma_grad(T(a[:3].numpy()), T(x1[:3].numpy())).numpy(), rtol=3e-3)
