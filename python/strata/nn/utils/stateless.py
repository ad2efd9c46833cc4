"""torch.nn.utils.stateless: the older spelling of strata.func.functional_call."""

from ...func._functional_call import _reparametrize_module, functional_call as _functional_call

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with parameters and buffers replaced for this call
    (strata.func.functional_call, which torch now recommends, is the same operation)."""
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)


_reparametrize_module = _reparametrize_module
