"""strata.autograd: reverse-mode automatic differentiation (torch.autograd).

The recording happens in C++ (src/autograd): a dispatcher layer on the
Autograd key records one node per differentiable op, and the engine walks the
graph backwards. This package is the Python surface: backward/grad, the
custom Function, anomaly mode and gradient checks.
"""

from .. import _C
from .._grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode  # noqa: F401
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .anomaly_mode import detect_anomaly, set_detect_anomaly, is_anomaly_enabled  # noqa: F401
from .gradcheck import gradcheck, gradgradcheck  # noqa: F401
from . import graph  # noqa: F401
from . import profiler  # noqa: F401
from .variable import Variable  # noqa: F401
from . import functional  # noqa: F401  (torch.autograd.functional: jacobian, hessian, vjp, jvp, hvp, vhp)

__all__ = ["backward", "grad", "Function", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "detect_anomaly", "set_detect_anomaly", "gradcheck", "gradgradcheck", "Variable"]


def _as_list(x):
    if x is None:
        return []
    if isinstance(x, _C.Tensor):
        return [x]
    return list(x)


def _tensors(x, what):
    out = _as_list(x)
    for i, t in enumerate(out):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{what}: element {i} must be a Tensor, not {type(t).__name__}")
    return out


def _grads_list(grad_tensors, n, what):
    grads = _as_list(grad_tensors)
    if not grads:
        return [None] * n
    if len(grads) != n:
        raise RuntimeError(f"{what}: got {n} tensors and {len(grads)} gradients")
    out = []
    for g in grads:
        if g is None or isinstance(g, _C.Tensor):
            out.append(g)
        else:
            raise TypeError(f"{what}: gradients must be Tensors or None, got {type(g).__name__}")
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulates the gradients of `tensors` into the .grad of the leaves."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    tensors = _tensors(tensors, "backward(): tensors")
    if not tensors:
        raise RuntimeError("backward: expected at least one tensor")
    grads = _grads_list(grad_tensors, len(tensors), "backward")
    if retain_graph is None:
        retain_graph = create_graph
    ins = _tensors(inputs, "backward(): inputs")
    if _C._vmap_levels() and any(_C._vmap_is_batched(t) for t in tensors):
        raise RuntimeError("backward() called on a batched tensor inside vmap: accumulating into .grad is not "
                           "supported there; use strata.autograd.grad (per-example gradients: differentiate with "
                           "respect to parameters lifted with strata.func._vmap._lift_to_active_levels)")
    if inputs is not None and not ins:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    if any(_C._is_nested(t) for t in list(tensors) + list(ins)):  # run on the values (docs/NESTED.md)
        from .._nested import _values_of
        tensors, grads, ins = ([_values_of(t) for t in x] for x in (tensors, grads, ins))
    _C._run_backward(tensors, grads, bool(retain_graph), bool(create_graph), ins, True, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Returns the gradients of `outputs` with respect to `inputs` (nothing is accumulated into .grad)."""
    single = isinstance(inputs, _C.Tensor)
    outs = _tensors(outputs, "grad(): outputs")
    ins = _tensors(inputs, "grad(): inputs")
    if not ins:
        raise RuntimeError("grad requires non-empty inputs.")
    grads = _grads_list(grad_outputs, len(outs), "grad")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        from ..func import _vmap

        return _vmap._grads_batched(grad, outs, ins, grads, dict(
            retain_graph=retain_graph, create_graph=create_graph, allow_unused=allow_unused,
            materialize_grads=materialize_grads))
    if _C._vmap_levels() and (any(_C._vmap_is_batched(t) for t in outs) or any(_C._vmap_is_batched(t) for t in ins)):
        from ..func import _vmap

        res = _vmap._batched_autograd_grad(outs, ins, grads, retain_graph, create_graph, allow_unused)
    elif any(_C._is_nested(t) for t in list(outs) + list(ins)):  # on the values; nested inputs get nested grads
        from .._nested import _values_of, _like_or_none
        res = _C._run_backward([_values_of(t) for t in outs], [_values_of(g) for g in grads], bool(retain_graph),
                               bool(create_graph), [_values_of(t) for t in ins], bool(allow_unused), False)
        res = [_like_or_none(i, r) for i, r in zip(ins, res)]
    else:
        res = _C._run_backward(outs, grads, bool(retain_graph), bool(create_graph), ins, bool(allow_unused), False)
    if materialize_grads:
        from .. import zeros_like

        res = [zeros_like(i) if r is None else r for r, i in zip(res, ins)]
    return tuple(res)


Node = _C._Node
