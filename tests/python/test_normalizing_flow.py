"""Issue 13's research snippet: a RealNVP-style normalizing flow (affine coupling layers with tanh-bounded
scales, a base MultivariateNormal, a TransformedDistribution tail), written once against a `torch`-like
module and run under Strata and under torch with the same weights: log-likelihood, its gradients, a
training step and samples pushed through the inverse must agree."""
import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")


def build_flow(T, weights, dim=4, hidden=16, layers=3):
    """The flow's pieces as plain functions of `T` (strata or torch) and a dict of parameters."""
    params = {k: T.tensor(v, dtype=T.float64, requires_grad=True) for k, v in weights.items()}
    masks = [T.tensor([(i + j) % 2 for j in range(dim)], dtype=T.float64) for i in range(layers)]

    def net(i, x):
        h = T.tanh(x @ params[f"w1_{i}"] + params[f"b1_{i}"])
        st = h @ params[f"w2_{i}"] + params[f"b2_{i}"]
        s, t = st.chunk(2, dim=-1)
        return T.tanh(s), t

    def forward(x):  # data -> latent, with log|det J|
        logdet = T.zeros(x.shape[0], dtype=T.float64)
        for i, m in enumerate(masks):
            s, t = net(i, x * m)
            s, t = s * (1 - m), t * (1 - m)
            x = x * m + (1 - m) * (x * T.exp(s) + t)
            logdet = logdet + s.sum(-1)
        return x, logdet

    def inverse(z):
        for i in reversed(range(layers)):
            m = masks[i]
            s, t = net(i, z * m)
            s, t = s * (1 - m), t * (1 - m)
            z = z * m + (1 - m) * ((z - t) * T.exp(-s))
        return z

    base = T.distributions.MultivariateNormal(T.zeros(dim, dtype=T.float64),
                                              scale_tril=T.eye(dim, dtype=T.float64) * 1.5)

    def log_prob(x):
        z, logdet = forward(x)
        return base.log_prob(z) + logdet

    return params, forward, inverse, log_prob, base


def make_weights(dim=4, hidden=16, layers=3, seed=0):
    rng = np.random.default_rng(seed)
    w = {}
    for i in range(layers):
        w[f"w1_{i}"] = rng.normal(0, 0.5, (dim, hidden))
        w[f"b1_{i}"] = rng.normal(0, 0.1, hidden)
        w[f"w2_{i}"] = rng.normal(0, 0.3, (hidden, 2 * dim))
        w[f"b2_{i}"] = rng.normal(0, 0.1, 2 * dim)
    return w


def test_realnvp_log_likelihood_gradients_and_a_training_step_match_torch():
    w = make_weights()
    data = np.random.default_rng(1).normal(size=(64, 4)) @ np.array(
        [[1.0, 0.5, 0, 0], [0, 1.0, 0.3, 0], [0, 0, 1.0, -0.4], [0.2, 0, 0, 1.0]])
    results = {}
    for name, T in (("strata", strata), ("torch", torch)):
        params, forward, inverse, log_prob, _ = build_flow(T, w)
        x = T.tensor(data, dtype=T.float64)
        nll = -log_prob(x).mean()
        nll.backward()
        grads = {k: p.grad.numpy().copy() for k, p in params.items()}
        opt = T.optim.Adam(list(params.values()), lr=1e-2)
        for _ in range(5):
            opt.zero_grad()
            loss = -log_prob(x).mean()
            loss.backward()
            opt.step()
        z, _ = forward(x)
        back = inverse(z)
        results[name] = (nll.item(), grads, loss.item(), {k: p.detach().numpy().copy() for k, p in params.items()},
                         (back - x).abs().max().item())
    s, t = results["strata"], results["torch"]
    np.testing.assert_allclose(s[0], t[0], rtol=1e-12)
    for k in s[1]:
        np.testing.assert_allclose(s[1][k], t[1][k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(s[2], t[2], rtol=1e-9)
    for k in s[3]:
        np.testing.assert_allclose(s[3][k], t[3][k], rtol=1e-8, atol=1e-11)
    assert s[4] < 1e-12 and t[4] < 1e-12  # the inverse undoes the forward map


def test_transformed_distribution_flow_tail_matches_torch():
    # A fixed-transform tail as torch users write it: exp(affine(base)) (a log-normal-like flow).
    vals = np.abs(np.random.default_rng(2).normal(size=(16, 3))) + 0.1
    out = {}
    for name, T in (("strata", strata), ("torch", torch)):
        D = T.distributions
        loc = T.tensor([0.1, -0.2, 0.3], dtype=T.float64, requires_grad=True)
        base = D.Independent(D.Normal(T.zeros(3, dtype=T.float64), T.ones(3, dtype=T.float64)), 1)
        flow = D.TransformedDistribution(base, [D.transforms.AffineTransform(loc, 0.7), D.transforms.ExpTransform()])
        lp = flow.log_prob(T.tensor(vals, dtype=T.float64))
        lp.sum().backward()
        out[name] = (lp.detach().numpy(), loc.grad.numpy().copy())
    np.testing.assert_allclose(out["strata"][0], out["torch"][0], rtol=1e-12)
    np.testing.assert_allclose(out["strata"][1], out["torch"][1], rtol=1e-10)
