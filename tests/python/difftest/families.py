"""How each OpInfo is driven: the torch counterpart of its name, and the
family whose hypothesis strategy draws its inputs.

Families are recognised from the op database's own sample generators (their
closures carry the value ranges and keyword arguments the op needs):
  unary      unary_samples / special.unary / act_samples (+ with_kwargs)
  binary     binary_samples / special.binary / activation_backward.bw_samples
  reduce     reduce_samples (dim list + keepdim)
  dim        single_dim_samples (one int dim)
  generic    everything else: the op database's samples, redrawn with a
             drawn seed, dtype and memory layout of every tensor argument.
"""

import inspect

import torch

# Ops with no torch counterpart to compare with (the reason is printed by the skip).
NO_TORCH = {
    "_C._ops._conv2d_backward": "internal fused kernel; conv2d's gradient is compared through autograd elsewhere",
    "_C._ops._layer_norm_backward": "internal fused kernel (native_layer_norm_backward has another signature)",
    "_C._ops._fused_adam_step_": "internal fused optimizer step (torch's _fused_adam_ is CUDA/flat-list only)",
    "_C._ops._fused_sgd_step_": "internal fused optimizer step",
    "_C._ops._fused_adagrad_step_": "internal fused optimizer step",
    "_C._ops._lstm_layer": "internal one-layer kernel with strata's own packed-weight signature",
    "_C._ops._gru_layer": "internal one-layer kernel with strata's own packed-weight signature",
    "_C._ops._rnn_tanh_layer": "internal one-layer kernel with strata's own packed-weight signature",
    "_C._ops._rnn_relu_layer": "internal one-layer kernel with strata's own packed-weight signature",
    "_C._ops._lstm_layer_backward": "internal fused backward of _lstm_layer (strata's workspace layout)",
    "_C._ops._gru_layer_backward": "internal fused backward of _gru_layer (strata's workspace layout)",
    "_C._ops._rnn_layer_backward": "internal fused backward of _rnn_tanh_layer / _rnn_relu_layer",
}


def _aten_index(x, indices, dim=0):
    return torch.ops.aten.index(x, [None] * dim + list(indices))


def _aten_index_put(x, indices, values, accumulate=False, dim=0):
    return torch.ops.aten.index_put(x, [None] * dim + list(indices), values, accumulate)


# strata name -> torch callable, where the dotted name does not resolve in torch
# or strata's spelling takes a keyword torch lacks (dim= of index/index_put).
TORCH_OVERRIDES = {
    "repeat": lambda x, *a, **k: x.repeat(*a, **k),
    "index": _aten_index,
    "_C._ops.index": _aten_index,
    "index_put": _aten_index_put,
    "_C._ops.index_put": _aten_index_put,
}


def torch_callable(name):
    """The torch function to compare strata.<name> with, or None."""
    if name in NO_TORCH:
        return None
    if name in TORCH_OVERRIDES:
        return TORCH_OVERRIDES[name]
    obj = torch
    try:
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj
    except AttributeError:
        pass
    short = name.split(".")[-1]
    return getattr(torch.ops.aten, short, None)


def _closure(fn):
    try:
        return dict(inspect.getclosurevars(fn).nonlocals)
    except (TypeError, ValueError):
        return {}


def family(info):
    """(family name, parameters from the sample generator's closure)."""
    gen = info.samples
    kw = {}
    q = getattr(gen, "__qualname__", "")
    if q.startswith("with_kwargs."):
        c = _closure(gen)
        kw = dict(c.get("kw", {}))
        gen = c.get("gen", gen)
        q = getattr(gen, "__qualname__", "")
    c = _closure(gen)
    mod = getattr(gen, "__module__", "")
    if q == "unary_samples.<locals>.gen":
        return "unary", dict(low=c["low"], high=c["high"], kwargs=kw)
    if q == "act_samples.<locals>.gen":
        return "unary", dict(low=-3.0, high=3.0, kwargs=kw)
    if q == "unary.<locals>.gen" and mod.endswith("special"):
        return "unary", dict(low=c["low"], high=c["high"], kwargs=kw)
    if q == "binary_samples.<locals>.gen":
        return "binary", dict(a=(c["low"], c["high"]), b=(c["low"], c["high"]), nonzero_rhs=c["nonzero_rhs"],
                              integer_b=False, kwargs=kw, mixed=True)
    if q == "binary.<locals>.gen" and mod.endswith("special"):
        return "binary", dict(a=(c["lo_a"], c["hi_a"]), b=(c["lo_b"], c["hi_b"]), nonzero_rhs=False,
                              integer_b=c["integer_b"], kwargs=kw, mixed=False)
    if q == "bw_samples.<locals>.gen":
        return "binary", dict(a=(-3.0, 3.0), b=(c["low"], c["high"]), nonzero_rhs=False, integer_b=False,
                              kwargs=dict(c.get("kw", {})), mixed=False)
    if q == "reduce_samples.<locals>.gen":
        return "reduce", dict(low=c["low"], high=c["high"], dim_kw=c["dim_kw"], allow_empty=c["allow_empty"],
                              empty_list=any(d == () for d, _ in c["dims"]))
    if q == "single_dim_samples.<locals>.gen":
        return "dim", dict(low=c["low"], high=c["high"], empty=c["empty"])
    return "generic", {}
