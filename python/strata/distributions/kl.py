"""kl_divergence(p, q) with a registry keyed on the pair of distribution types;
register_kl adds an implementation. The most specific registered pair wins (by the
classes' method resolution order)."""

import math

import strata as _st

from ._families import (Bernoulli, Beta, Binomial, Categorical, Dirichlet, Exponential, Gamma, Independent, Laplace,
                        Normal, OneHotCategorical, Poisson, Uniform)
from .transforms import TransformedDistribution
from .utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}
_KL_MEMOIZE = {}


def register_kl(type_p, type_q):
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError("Expected type_p and type_q to be Distribution subclasses")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun
    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    # the pair whose classes come earliest in the MROs: most specific on p, then on q
    def key(m):
        return (type_p.__mro__.index(m[0]), type_q.__mro__.index(m[1]))
    return _KL_REGISTRY[min(matches, key=key)]


def kl_divergence(p, q):
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


def _inf_where(cond, value):
    return _st.where(cond, _st.full_like(value, float("inf")), value)


def _zero_where(cond, value):
    return _st.where(cond, _st.zeros_like(value), value)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    softplus = _st.nn.functional.softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _zero_where(p.probs == 0, _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _zero_where(p.probs == 1, _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    n = p.total_count
    kl = n * _kl_bernoulli_bernoulli(Bernoulli(probs=p.probs, validate_args=False),
                                     Bernoulli(probs=q.probs, validate_args=False))
    return _inf_where(p.total_count > q.total_count, kl)  # p puts mass where q has none


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand_as(t), t)
    t = _zero_where((p.probs == 0).expand_as(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale + scale_ratio * _st.exp(-loc_abs_diff / p.scale) - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * _st.log(p.rate / q.rate)
    t2 = _st.lgamma(q.concentration) - _st.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * _st.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    sp, sq = a1 + b1, a2 + b2
    t1 = _st.lgamma(a2) + _st.lgamma(b2) + _st.lgamma(sp)
    t2 = _st.lgamma(a1) + _st.lgamma(b1) + _st.lgamma(sq)
    t3 = (a1 - a2) * _st.digamma(a1)
    t4 = (b1 - b2) * _st.digamma(b1)
    t5 = (sp - sq) * _st.digamma(sp)
    return t1 - t2 + t3 + t4 - t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (_st.sqrt(_st.tensor(2 * 3.141592653589793, dtype=common_term.dtype)) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions with different transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions with different event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


# ---- pairs of different families: -H(p) - E_p[log q], or infinite where p's support is not inside q's ----
_EULER = 0.5772156649015329
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _infinite_like(t):
    return _st.full_like(t, float("inf"))


def _normal_cross(p, q, mean, var):
    """-H(p) - E_p[log N(q.loc, q.scale)] from p's mean and variance."""
    return (-p.entropy() + q.scale.log() + _HALF_LOG_2PI
            + (var + (mean - q.loc).pow(2)) / (2 * q.scale.pow(2)))


def _gamma_cross(p, q, mean, mean_log):
    """-H(p) - E_p[log Gamma(q.concentration, q.rate)] from E_p[x] and E_p[log x]."""
    c, r = q.concentration, q.rate
    return -p.entropy() - (c * r.log() + (c - 1) * mean_log - r * mean - _st.lgamma(c))


def _uniform_log_means(p):
    """E[log x] and E[log(1 - x)] for x ~ Uniform(low, high) (0 < low, high < 1 where used)."""
    lo, hi = p.low, p.high
    w = hi - lo
    e_log = (_st.xlogy(hi, hi) - _st.xlogy(lo, lo)) / w - 1
    e_log1m = (_st.xlogy(1 - lo, 1 - lo) - _st.xlogy(1 - hi, 1 - hi)) / w - 1
    return e_log, e_log1m


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    a, b = p.concentration1, p.concentration0
    return _gamma_cross(p, q, p.mean, _st.digamma(a) - _st.digamma(a + b))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    return _normal_cross(p, q, p.mean, p.variance)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > 0) | (q.high < 1), result)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    return _gamma_cross(p, q, p.mean, -_EULER - p.rate.log())


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    return _normal_cross(p, q, p.mean, p.variance)


@register_kl(Exponential, Uniform)
def _kl_exponential_uniform(p, q):
    result = q.high - q.low
    return _infinite_like(result + p.rate)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    return _normal_cross(p, q, p.mean, p.variance)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return _normal_cross(p, q, p.loc, p.variance)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E|x - m| for x ~ Normal(mu, s): the folded normal's mean
    d = p.loc - q.loc
    e_abs = (p.scale * math.sqrt(2 / math.pi) * _st.exp(-d.pow(2) / (2 * p.scale.pow(2)))
             + d * _st.erf(d / (p.scale * math.sqrt(2))))
    return -p.entropy() + (2 * q.scale).log() + e_abs / q.scale


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    a, b = q.concentration1, q.concentration0
    e_log, e_log1m = _uniform_log_means(p)
    log_beta = _st.lgamma(a) + _st.lgamma(b) - _st.lgamma(a + b)
    result = -p.entropy() - ((a - 1) * e_log + (b - 1) * e_log1m - log_beta)
    return _inf_where((p.low < 0) | (p.high > 1), result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = -p.entropy() - (q.rate.log() - q.rate * p.mean)
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    e_log, _ = _uniform_log_means(p)
    result = _gamma_cross(p, q, p.mean, e_log)
    return _inf_where(p.low < 0, result)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    pr, lam = p.probs, q.rate
    return _st.xlogy(1 - pr, 1 - pr) + _st.xlogy(pr, pr) + lam - pr * lam.log()


def _infinite_pair(p, q):
    return _infinite_like(p.mean + q.mean)


for _p, _q in [(Normal, Beta), (Normal, Exponential), (Normal, Gamma), (Normal, Uniform), (Laplace, Beta),
               (Laplace, Exponential), (Laplace, Gamma), (Laplace, Uniform), (Gamma, Beta), (Gamma, Uniform),
               (Exponential, Beta), (Poisson, Bernoulli), (Poisson, Binomial)]:
    register_kl(_p, _q)(_infinite_pair)


from ._mvn import MultivariateNormal, _batch_mahalanobis  # noqa: E402
from ._tril import solve_tril  # noqa: E402


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    shape = _st.broadcast_shapes(tuple(lp.shape[:-2]), tuple(lq.shape[:-2]))
    lp_b = lp.expand(tuple(shape) + (n, n))
    lq_b = lq.expand(tuple(shape) + (n, n))
    term_trace = solve_tril(lq_b, lp_b).pow(2).flatten(-2).sum(-1)      # || Lq^-1 Lp ||_F^2
    term_mahal = _batch_mahalanobis(lq, q.loc - p.loc)
    return q._half_log_det() - p._half_log_det() + 0.5 * (term_trace + term_mahal - n)
