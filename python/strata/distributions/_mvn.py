"""MultivariateNormal, parameterised by a covariance, precision or lower-triangular scale
matrix; computations go through the Cholesky factor scale_tril."""

import math

import strata as _st

from . import constraints
from ._tril import cholesky, solve_tril
from .distribution import Distribution
from .utils import lazy_property


def _batch_mahalanobis(l, x):
    """|| L^-1 x ||^2 over the last dim, batched (L broadcast against x's batch dims)."""
    shape = _st.broadcast_shapes(tuple(l.shape[:-2]), tuple(x.shape[:-1]))
    l = l.expand(tuple(shape) + tuple(l.shape[-2:]))
    x = x.expand(tuple(shape) + tuple(x.shape[-1:]))
    return solve_tril(l, x.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else \
            covariance_matrix if covariance_matrix is not None else precision_matrix
        if given.dim() < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at least two-dimensional, "
                             "with optional leading batch dimensions")
        batch_shape = _st.broadcast_shapes(tuple(given.shape[:-2]), tuple(loc.shape[:-1]))
        mat_shape = tuple(batch_shape) + tuple(given.shape[-2:])
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(mat_shape)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(mat_shape)
        else:
            self.precision_matrix = precision_matrix.expand(mat_shape)
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            # precision = L_p L_p^T  =>  covariance = L_p^-T L_p^-1; its factor by cholesky
            lp = cholesky(precision_matrix)
            n = lp.shape[-1]
            lp_inv = solve_tril(lp, _st.eye(n, dtype=lp.dtype, device=lp.device).expand(lp.shape))
            self._unbroadcasted_scale_tril = cholesky(lp_inv.transpose(-1, -2) @ lp_inv)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = _st.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for n in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if n in self.__dict__:
                setattr(new, n, getattr(self, n).expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        l = self._unbroadcasted_scale_tril
        return (l @ l.transpose(-1, -2)).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        l = self._unbroadcasted_scale_tril
        n = l.shape[-1]
        l_inv = solve_tril(l, _st.eye(n, dtype=l.dtype, device=l.device).expand(l.shape))
        return (l_inv.transpose(-1, -2) @ l_inv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _st.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
