"""DistributedOptimizer (torch.distributed.optim.DistributedOptimizer): one local optimizer per worker that owns
parameters, stepped with the gradients of a distributed autograd context."""

import threading

from .. import autograd as dist_autograd
from .. import rpc

__all__ = ["DistributedOptimizer"]


class _LocalOptimizer:
    # Steps of one optimizer are serialized (several trainers may step the same parameters).
    def __init__(self, optimizer_class, local_params_rref, *args, **kwargs):
        self._lock = threading.Lock()
        self._params = [r.local_value() for r in local_params_rref]
        self.optim = optimizer_class(self._params, *args, **kwargs)

    def step(self, autograd_ctx_id):
        grads = dist_autograd.get_gradients(autograd_ctx_id)
        with self._lock:
            for param, grad in grads.items():
                param.grad = grad
            self.optim.step()


def _new_local_optimizer(optimizer_class, local_params_rref, *args, **kwargs):
    return rpc.RRef(_LocalOptimizer(optimizer_class, local_params_rref, *args, **kwargs))


def _local_optimizer_step(local_optim_rref, autograd_ctx_id):
    local_optim_rref.local_value().step(autograd_ctx_id)


class DistributedOptimizer:
    """DistributedOptimizer(optimizer_class, params_rref, *args, **kwargs): params_rref is a list of RRefs to
    parameters (on any workers); every owner builds optimizer_class(its parameters, *args, **kwargs).
    step(context_id) sets each parameter's .grad to its gradient in that distributed autograd context (parameters
    without one keep their .grad, as in torch) and steps every local optimizer, concurrently."""

    def __init__(self, optimizer_class, params_rref, *args, **kwargs):
        per_worker = {}
        for r in params_rref:
            if not isinstance(r, rpc.RRef):
                raise TypeError(f"DistributedOptimizer: params_rref must hold RRefs, got {type(r).__name__}")
            per_worker.setdefault(r.owner(), []).append(r)
        self.remote_optimizers = [
            rpc.rpc_async(w, _new_local_optimizer, args=(optimizer_class, rrefs) + tuple(args), kwargs=kwargs)
            for w, rrefs in per_worker.items()]
        self.remote_optimizers = [f.wait() for f in self.remote_optimizers]

    def step(self, context_id):
        if not dist_autograd._is_valid_context(context_id):
            raise RuntimeError(f"DistributedOptimizer.step: Could not find autograd context with id: {context_id}")
        futs = [rpc.rpc_async(o.owner(), _local_optimizer_step, args=(o, context_id)) for o in self.remote_optimizers]
        errors = []
        for f in futs:
            try:
                f.wait()
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]
