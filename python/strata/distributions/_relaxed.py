"""Cauchy, the relaxed (Concrete / Gumbel-softmax) families and Wishart.

Cauchy(loc, scale): density 1 / (pi * scale * (1 + z^2)), z = (x - loc) / scale; samples by the inverse CDF.
LogitRelaxedBernoulli / RelaxedBernoulli: the binary Concrete distribution (Maddison et al. 2017) over logits and
over (0, 1) (its sigmoid). ExpRelaxedCategorical / RelaxedOneHotCategorical: the Concrete distribution over log-
probabilities and over the simplex (its exp). Wishart(df, ...): positive-definite matrices, sampled by the Bartlett
decomposition (chi-square diagonal from Gamma, so rsample is differentiable in the scale and in df).
"""

import math

import strata as _st
import strata.nn.functional as _F

from . import constraints
from ._families import Categorical, _expand_params
from ._tril import cholesky, solve_tril
from .distribution import Distribution
from .transforms import ExpTransform, SigmoidTransform, TransformedDistribution
from .utils import _batch_shape, broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Cauchy", "LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical",
           "RelaxedOneHotCategorical", "Wishart"]


class Cauchy(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_batch_shape((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Cauchy, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self):  # undefined
        return _st.full(self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):  # infinite
        return _st.full(self._extended_shape(), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = _st.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * _st.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - z.pow(2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _st.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return _st.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli variable: (logit(p) + logit(U)) / temperature, U uniform."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        self.temperature = temperature
        given = probs if probs is not None else logits
        if probs is not None:
            self.probs, = broadcast_all(probs)
            self._param = self.probs
        else:
            self.logits, = broadcast_all(logits)
            self._param = self.logits
        super().__init__(_batch_shape((given,), self._param), validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def expand(self, batch_shape, _instance=None):
        new = _expand_params(self, LogitRelaxedBernoulli, batch_shape, ("probs", "logits"), _instance)
        new.temperature = self.temperature
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @property
    def param_shape(self):
        return self._param.size()

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(_st.rand(shape, dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        t = self.temperature if isinstance(self.temperature, _st.Tensor) else _st.tensor(float(self.temperature))
        return t.log() + diff - 2 * _F.softplus(diff)


class _BaseParameters:
    """temperature, logits and probs of a relaxed distribution are its base distribution's."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_BaseParameters, TransformedDistribution):
    """A relaxed Bernoulli variable in (0, 1): sigmoid of a LogitRelaxedBernoulli."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical variable: log_softmax((logits + Gumbel noise) / temperature)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = _st.Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        logits = self.logits.expand(shape)
        u = clamp_probs(_st.rand(shape, dtype=logits.dtype, device=logits.device))
        gumbels = -((-(u.log())).log())
        scores = (logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        t = self.temperature if isinstance(self.temperature, _st.Tensor) else \
            _st.tensor(float(self.temperature), dtype=logits.dtype)
        # log density of the ExpConcrete: log (K-1)! + (K-1) log t + sum_k s_k - K logsumexp(s), s = logits - t*x
        log_scale = math.lgamma(k) + (k - 1) * t.log()
        score = logits - value * t
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_BaseParameters, TransformedDistribution):
    """A relaxed one-hot vector on the simplex (the Gumbel-softmax / Concrete distribution): exp of an
    ExpRelaxedCategorical."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)


def _mvdigamma(x, p):
    """Multivariate digamma: sum_{i<p} digamma(x - i/2)."""
    return sum(_st.digamma(x - i / 2) for i in range(p))


class Wishart(Distribution):
    """Wishart(df, covariance_matrix | precision_matrix | scale_tril) over p x p positive-definite matrices, df > p-1.
    """
    arg_constraints = {"covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(0)}
    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else \
            covariance_matrix if covariance_matrix is not None else precision_matrix
        if given.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        p = given.shape[-1]
        if given.shape[-2] != p:
            raise ValueError(f"Wishart: expected square matrices, got shape {tuple(given.shape)}")
        if isinstance(df, (int, float)):
            batch_shape = _st.Size(given.shape[:-2])
            self.df = _st.tensor(float(df), dtype=given.dtype).expand(batch_shape)
        else:
            batch_shape = _st.broadcast_shapes(tuple(given.shape[:-2]), tuple(df.shape))
            self.df = df.expand(batch_shape)
        event_shape = _st.Size(given.shape[-2:])
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        mat_shape = tuple(batch_shape) + tuple(event_shape)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(mat_shape)
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(mat_shape)
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self.precision_matrix = precision_matrix.expand(mat_shape)
            lp = cholesky(precision_matrix)
            eye = _st.eye(p, dtype=lp.dtype, device=lp.device).expand(lp.shape)
            lp_inv = solve_tril(lp, eye)
            self._unbroadcasted_scale_tril = cholesky(lp_inv.transpose(-1, -2) @ lp_inv)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = _st.Size(batch_shape)
        mat_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        new.df = self.df.expand(batch_shape)
        for n in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if n in self.__dict__:
                setattr(new, n, getattr(self, n).expand(mat_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def covariance_matrix(self):
        l = self._unbroadcasted_scale_tril
        return (l @ l.transpose(-1, -2)).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def precision_matrix(self):
        l = self._unbroadcasted_scale_tril
        p = l.shape[-1]
        l_inv = solve_tril(l, _st.eye(p, dtype=l.dtype, device=l.device).expand(l.shape))
        return (l_inv.transpose(-1, -2) @ l_inv).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @property
    def _p(self):
        return self._event_shape[-1]

    @property
    def mean(self):
        return self.df[..., None, None] * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self._p - 1
        factor = _st.where(factor <= 0, _st.full_like(factor, math.nan), factor)
        return factor[..., None, None] * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag = v.diagonal(dim1=-2, dim2=-1)
        return self.df[..., None, None] * (v.pow(2) + diag[..., :, None] * diag[..., None, :])

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Bartlett: X = L A A^T L^T, A lower triangular with sqrt(chi2(df - i)) on the diagonal and N(0, 1)
        below it. (max_try_correction is accepted for torch's signature: the chi-square draws are clamped away
        from zero, so there is no singular sample to redraw.)"""
        p = self._p
        sample_shape = _st.Size(sample_shape)
        shape = tuple(sample_shape) + tuple(self._batch_shape)
        l = self._unbroadcasted_scale_tril
        df = self.df.expand(shape)
        dof = df.unsqueeze(-1) - _st.arange(p, dtype=l.dtype, device=l.device)  # df - i
        chi2 = (2 * _st._C._ops._standard_gamma(dof / 2)).clamp(min=_st.finfo(l.dtype).tiny)
        noise = _st.randn(shape + (p, p), dtype=l.dtype, device=l.device).tril(-1)
        a = noise + _st.diag_embed(chi2.sqrt())
        la = l @ a
        return la @ la.transpose(-1, -2)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        p = self._p
        nu = self.df
        l = self._unbroadcasted_scale_tril
        log_det_sigma = 2 * l.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        log_det_x = 2 * cholesky(value).diagonal(dim1=-2, dim2=-1).log().sum(-1)
        shape = _st.broadcast_shapes(tuple(l.shape[:-2]), tuple(value.shape[:-2]))
        lb = l.expand(tuple(shape) + (p, p))
        # tr(Sigma^-1 X) = tr(L^-T L^-1 X) = sum of (L^-1 X) * (L^-1)^T ... computed as tr(L^-1 X L^-T)
        m = solve_tril(lb, value.expand(tuple(shape) + (p, p)))
        m = solve_tril(lb, m.transpose(-1, -2))
        trace = m.diagonal(dim1=-2, dim2=-1).sum(-1)
        return ((nu - p - 1) / 2 * log_det_x - trace / 2 - nu * p / 2 * math.log(2) - nu / 2 * log_det_sigma
                - _st.mvlgamma(nu / 2, p))

    def entropy(self):
        p = self._p
        nu = self.df
        l = self._unbroadcasted_scale_tril
        log_det_sigma = (2 * l.diagonal(dim1=-2, dim2=-1).log().sum(-1)).expand(self._batch_shape)
        e_log_det_x = _mvdigamma(nu / 2, p) + p * math.log(2) + log_det_sigma
        return (_st.mvlgamma(nu / 2, p) - (nu - p - 1) / 2 * e_log_det_x + nu * p / 2 + nu * p / 2 * math.log(2)
                + nu / 2 * log_det_sigma)
