"""strata.special: torch.special's functions. Those torch also has under
another name are bound to the same ops as their strata.* forms; the rest are
the special_* ops of src/ops/decl/special.def (and igamma/igammac)."""

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
gammainc = _ops.igamma
gammaincc = _ops.igammac

_SPECIAL_OPS = (
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "entr", "erfcx", "i0e", "i1e", "log_ndtr", "ndtr", "ndtri", "xlog1py", "zeta",
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
)
for _name in _SPECIAL_OPS:
    globals()[_name] = getattr(_ops, "special_" + _name)
del _name

__all__ = [
    "expm1", "exp2", "log1p", "expit", "logit", "xlogy", "erf", "erfc", "erfinv", "i0", "i1", "digamma", "psi",
    "gammaln", "polygamma", "multigammaln", "sinc", "round", "logsumexp", "softmax", "log_softmax", "gammainc",
    "gammaincc", *_SPECIAL_OPS,
]
