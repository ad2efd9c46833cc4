"""Activation checkpointing (torch.utils.checkpoint).

`checkpoint(fn, *args)` runs fn without recording anything, keeping only its
inputs; during backward it runs fn again with grad mode on (restoring the RNG
state, so dropout draws the same mask) and backpropagates through that
recomputation. Memory for fn's intermediate activations is traded for one
extra forward.
"""

import warnings

from .. import _C
from .. import random as _random
from .._grad_mode import enable_grad, no_grad
from ..autograd import Function, backward as _backward

_Tensor = _C.Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "get_device_states", "set_device_states"]


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = _random.get_rng_state()
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, _Tensor)]
        ctx.non_tensor_args = [None if isinstance(a, _Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, _Tensor)])
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        args = list(ctx.non_tensor_args)
        detached = []
        for i, t in zip(ctx.tensor_indices, saved):
            d = t.detach()
            d.requires_grad_(t.requires_grad)
            args[i] = d
            detached.append(d)
        if ctx.preserve_rng_state:
            outer_state = _random.get_rng_state()
            _random.set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.run_function(*args)
        finally:
            if ctx.preserve_rng_state:
                _random.set_rng_state(outer_state)
        if isinstance(outputs, _Tensor):
            outputs = (outputs,)
        outs, gs = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, _Tensor) and o.requires_grad:
                outs.append(o)
                gs.append(g)
        if not outs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward(outs, gs)
        grads_in = [None] * len(args)
        for i, d in zip(ctx.tensor_indices, detached):
            grads_in[i] = d.grad
        return (None, None) + tuple(grads_in)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """Runs function(*args) saving only its inputs; recomputes it in backward."""
    if use_reentrant is None:
        warnings.warn("strata.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "Both values use the same recomputation here.", stacklevel=2)
    if kwargs:
        fn = function

        def function(*a):
            return fn(*a, **kwargs)

    return _CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Splits a Sequential (or list of modules) into `segments` checkpointed chunks."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    n = len(functions)
    size = max(1, n // segments)

    def run(start, end):
        def f(x):
            for m in functions[start:end]:
                x = m(x)
            return x

        return f

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end + 1), input, use_reentrant=True if use_reentrant is None else use_reentrant,
                           **kwargs)
    for m in functions[end + 1:]:
        input = m(input)
    return input


def get_device_states(*args):
    """The accelerator devices among `args`' tensors and their RNG states, as two
    lists: strata tensors live on the CPU, whose RNG checkpoint saves itself, so
    both are empty (what torch returns for CPU tensors)."""
    return [], []


def set_device_states(devices, states, *, device_type=None):
    """Restores RNG states that get_device_states returned: nothing for its empty
    lists; any device raises RuntimeError (Strata has no accelerator)."""
    for device in devices:
        raise RuntimeError(f"set_device_states: no accelerator device {device!r} (Strata runs on the CPU only)")
