"""strata.backends.opt_einsum: contraction-order optimisation for einsum, which
Strata does not use."""

enabled = False
strategy = None


def is_available():
    return False
