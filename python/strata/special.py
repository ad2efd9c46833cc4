"""strata.special: torch.special's names for the special functions, bound to
the same ops as their strata.* forms."""

from . import _C

_ops = _C._ops

expm1 = _ops.expm1
exp2 = _ops.exp2
log1p = _ops.log1p
expit = _ops.sigmoid
logit = _ops.logit
xlogy = _ops.xlogy
erf = _ops.erf
erfc = _ops.erfc
erfinv = _ops.erfinv
i0 = _ops.i0
i1 = _ops.special_i1
digamma = _ops.digamma
psi = _ops.digamma
gammaln = _ops.lgamma
polygamma = _ops.polygamma
multigammaln = _ops.mvlgamma
sinc = _ops.sinc
round = _ops.round  # noqa: A001
logsumexp = _ops.logsumexp
softmax = _ops.softmax
log_softmax = _ops.log_softmax

__all__ = [
    "expm1", "exp2", "log1p", "expit", "logit", "xlogy", "erf", "erfc", "erfinv", "i0", "i1", "digamma", "psi",
    "gammaln", "polygamma", "multigammaln", "sinc", "round", "logsumexp", "softmax", "log_softmax",
]
