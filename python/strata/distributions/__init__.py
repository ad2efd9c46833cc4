"""strata.distributions: torch.distributions over strata ops. Sampling draws from
strata's generator (strata.manual_seed makes it reproducible); Gamma, Beta and
Dirichlet sample through the _standard_gamma op, whose implicit reparameterisation
gradient makes their rsample differentiable."""

from . import constraints, transforms  # noqa: F401
from ._families import (Bernoulli, Beta, Binomial, Categorical, Dirichlet, Exponential, ExponentialFamily, Gamma,
                        Independent, Laplace, Normal, OneHotCategorical, Poisson, Uniform)
from ._mvn import MultivariateNormal
from ._relaxed import (Cauchy, ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli,  # noqa: F401
                       RelaxedOneHotCategorical, Wishart)
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .transforms import (AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform, TanhTransform, Transform,
                         TransformedDistribution, identity_transform)
from . import constraints as _c


class LogNormal(TransformedDistribution):
    """exp of a Normal(loc, scale) variable."""
    arg_constraints = {"loc": _c.real, "scale": _c.positive}
    support = _c.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return kl_divergence(p.base_dist, q.base_dist)


__all__ = [
    "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "ComposeTransform", "Dirichlet", "Distribution",
    "ExpTransform", "Exponential", "ExponentialFamily", "Gamma", "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal",
    "OneHotCategorical", "Poisson", "SigmoidTransform", "TanhTransform", "Transform", "TransformedDistribution",
    "Uniform", "constraints", "identity_transform", "kl_divergence", "register_kl", "transforms",
    "Cauchy", "RelaxedBernoulli", "RelaxedOneHotCategorical", "Wishart",
]


def _family_modules():
    # torch's one-module-per-family import paths (torch.distributions.normal.Normal, ...)
    import sys
    import types
    for mod, names in {
        "bernoulli": ["Bernoulli"], "beta": ["Beta"], "binomial": ["Binomial"], "categorical": ["Categorical"],
        "dirichlet": ["Dirichlet"], "exponential": ["Exponential"], "gamma": ["Gamma"], "independent": ["Independent"],
        "laplace": ["Laplace"], "log_normal": ["LogNormal"], "multivariate_normal": ["MultivariateNormal"], "normal": ["Normal"],
        "one_hot_categorical": ["OneHotCategorical"], "poisson": ["Poisson"], "uniform": ["Uniform"],
        "transformed_distribution": ["TransformedDistribution"], "exp_family": ["ExponentialFamily"],
        "cauchy": ["Cauchy"], "relaxed_bernoulli": ["LogitRelaxedBernoulli", "RelaxedBernoulli"],
        "relaxed_categorical": ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"], "wishart": ["Wishart"],
    }.items():
        m = types.ModuleType(f"{__name__}.{mod}")
        for n in names:
            setattr(m, n, globals()[n])
        m.__all__ = names
        sys.modules[m.__name__] = m
        globals()[mod] = m


_family_modules()
