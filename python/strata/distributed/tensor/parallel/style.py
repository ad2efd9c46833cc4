"""Tensor-parallel styles (torch.distributed.tensor.parallel.style), for Linear and Embedding (LayerNorm-like
modules for SequenceParallel).

Strata's DTensor does not intercept ops, so each style does explicitly what torch's sharding propagation does:
it shards the module's parameters (DTensor parameters whose storage is the local shard), converts the inputs to the
layout the local computation needs in a forward pre-hook, runs the module on local tensors, and turns the local
result into the requested output layout in a forward hook. The communication is DTensor's differentiable
redistribution, so the backward pass sends gradients the right way:

* ColwiseParallel: Linear weight/bias Shard(0), Embedding weight Shard(1). Input -> Replicate (all-gather for a
  Shard(1) sequence-parallel input); its gradient is Partial (all-reduced, or reduce-scattered for a sharded
  input).
  Output: Shard(-1) locally, redistributed to output_layouts.
* RowwiseParallel: Linear weight Shard(1), bias Replicate (added once, after the reduction; with a Shard output its
  gradient is all-reduced over the mesh); Embedding weight
  Shard(0) (ids outside this rank's rows look up zeros). Input -> Shard(-1) (Linear) or Replicate (Embedding).
  Output: Partial, reduced to output_layouts (all-reduce for Replicate, reduce-scatter for Shard).
* SequenceParallel: parameters Replicate; input/output Shard(sequence_dim); parameter gradients are all-reduced
  over the mesh (each rank saw part of the sequence).
"""

import types

import strata
import strata.nn as nn
import strata.nn.functional as F

from .._api import DTensor, _chunk_sizes, _replace_param, distribute_tensor
from ..placement_types import Partial, Placement, Replicate, Shard

__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput",
           "PrepareModuleOutput"]


def _dist():
    from .... import distributed as dist

    return dist


def _one(layouts, what, op):
    if layouts is None:
        return None
    if isinstance(layouts, Placement):
        return layouts
    layouts = tuple(layouts)
    if len(layouts) != 1 or not isinstance(layouts[0], Placement):
        raise ValueError(f"{op}: {what} must be one placement (a 1-D tensor-parallel mesh), got {layouts}")
    return layouts[0]


def _to_layout(x, mesh, layout, desired, grad_placement=None, local=True):
    """x (a plain local tensor taken to have `layout`, or a DTensor) under `desired`: a local tensor or a DTensor.
    grad_placement: the placement of the gradient that the local result will receive (e.g. Partial for the input
    of a column-sharded matmul); the backward turns it into x's placement in one step (Partial -> Shard(1) is one
    reduce-scatter)."""
    if not isinstance(x, strata.Tensor):
        return x
    if isinstance(x, DTensor):
        d = x
    else:
        if layout is None:
            return x
        d = DTensor.from_local(x, mesh, [layout])
    gp = None if grad_placement is None or not local or not d.is_floating_point() else (grad_placement,)
    if desired is not None and d.placements != (_norm(desired, d),):
        d = d._redistribute((_norm(desired, d),), grad_placements=gp)
        gp = None
    if not local:
        return d
    if not d.is_floating_point():
        return d._local_tensor
    return d.to_local(grad_placements=gp)


def _norm(p, d):
    return Shard(p.dim % d._spec.ndim) if isinstance(p, Shard) else p


def _wrap_out(out, mesh, placement, gshape):
    return DTensor.from_local(out, mesh, [placement], shape=gshape)


def _shard_param(module, name, mesh, placement):
    p = module._parameters.get(name)
    if p is None:
        return None
    d = distribute_tensor(p.detach(), mesh, [placement])._as_parameter(p.requires_grad)
    _replace_param(module, name, d)
    return d


def _allreduce_grads(param, mesh):
    """The gradient of a Replicate parameter used on sharded activations is a partial sum: all-reduce it over the
    mesh (a tensor hook; fully_shard, which replaces the parameter, reads _tp_grad_allreduce_group instead)."""
    group = mesh.get_group(0)
    param._tp_grad_allreduce_group = group

    def hook(g):
        g = g.clone().contiguous()
        _dist().all_reduce(g, group=group)
        return g

    param.register_hook(hook)


class ParallelStyle:
    def _apply(self, module, device_mesh):
        raise NotImplementedError(f"{type(self).__name__} does not implement _apply")


class ColwiseParallel(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = _one(input_layouts, "input_layouts", "ColwiseParallel") or Replicate()
        self.output_layouts = _one(output_layouts, "output_layouts", "ColwiseParallel") or Shard(-1)
        self.desired_input_layouts = Replicate()
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        if isinstance(module, nn.Linear):
            w = _shard_param(module, "weight", mesh, Shard(0))
            _shard_param(module, "bias", mesh, Shard(0))
            out_features = w._spec.shape[0]
        elif isinstance(module, nn.Embedding):
            w = _shard_param(module, "weight", mesh, Shard(1))
            out_features = w._spec.shape[1]
        else:
            raise NotImplementedError(f"ColwiseParallel: only nn.Linear and nn.Embedding are supported, got "
                                      f"{type(module).__name__}")
        linear = isinstance(module, nn.Linear)

        def pre(m, inputs):
            if not inputs:
                raise ValueError("ColwiseParallel: the module was called without a positional input")
            x = _to_layout(inputs[0], mesh, self.input_layouts, self.desired_input_layouts,
                           grad_placement=Partial() if linear else None)
            return (x,) + tuple(inputs[1:])

        def post(m, inputs, out):
            d = _wrap_out(out, mesh, Shard(out.dim() - 1), tuple(out.shape[:-1]) + (out_features,))
            return _to_layout(d, mesh, None, self.output_layouts, local=self.use_local_output)

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module

    def __repr__(self):
        return (f"ColwiseParallel(input_layouts={self.input_layouts}, output_layouts={self.output_layouts}, "
                f"use_local_output={self.use_local_output})")


class RowwiseParallel(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = _one(input_layouts, "input_layouts", "RowwiseParallel") or Shard(-1)
        self.output_layouts = _one(output_layouts, "output_layouts", "RowwiseParallel") or Replicate()
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        if isinstance(module, nn.Linear):
            w = _shard_param(module, "weight", mesh, Shard(1))
            b = _shard_param(module, "bias", mesh, Replicate())
            out_features = w._spec.shape[0]
            desired = Shard(-1)
            if b is not None and isinstance(self.output_layouts, Shard) and b.requires_grad:
                _allreduce_grads(b, mesh)

            def forward(self_, x):
                return F.linear(x, self_.weight)

            def pre(m, inputs):
                return (_to_layout(inputs[0], mesh, self.input_layouts, desired),) + tuple(inputs[1:])
        elif isinstance(module, nn.Embedding):
            if module.max_norm is not None:
                raise NotImplementedError("RowwiseParallel: nn.Embedding with max_norm is not supported (the norm "
                                          "would be taken per shard)")
            w = _shard_param(module, "weight", mesh, Shard(0))
            b = None
            out_features = w._spec.shape[1]
            rows = w._spec.shape[0]
            n, k = mesh.size(0), mesh.get_local_rank(0)
            per = -(-rows // n)
            start, count = min(k * per, rows), w.shape[0]

            def forward(self_, ids):
                outside = (ids < start) | (ids >= start + count)
                local_ids = (ids - start).masked_fill(outside, 0)
                pad = self_.padding_idx
                pad = pad - start if pad is not None and start <= pad < start + count else None
                if count == 0:
                    return strata.zeros(tuple(ids.shape) + (out_features,), dtype=w.dtype)
                out = F.embedding(local_ids, self_.weight, pad, None, 2.0, self_.scale_grad_by_freq,
                                  self_.sparse)
                return out.masked_fill(outside.unsqueeze(-1), 0.0)

            def pre(m, inputs):
                return (_to_layout(inputs[0], mesh, self.input_layouts, Replicate()),) + tuple(inputs[1:])
        else:
            raise NotImplementedError(f"RowwiseParallel: only nn.Linear and nn.Embedding are supported, got "
                                      f"{type(module).__name__}")

        def post(m, inputs, out):
            d = _wrap_out(out, mesh, Partial(), tuple(out.shape[:-1]) + (out_features,))
            d = d._redistribute((_norm(self.output_layouts, d),))
            if b is not None:
                loc, bias, p = d.to_local(), m.bias, d.placements[0]
                if isinstance(p, Shard) and p.dim == loc.dim() - 1:  # output features sharded: this rank's slice
                    sizes = _chunk_sizes(out_features, mesh.size(0))
                    k = mesh.get_local_rank(0)
                    bias = bias.narrow(0, k * max(sizes) if sizes[k] else 0, sizes[k])
                d = DTensor.from_local(loc + bias, mesh, d.placements, shape=d._spec.shape)
            return d.to_local() if self.use_local_output else d

        if isinstance(module, nn.Embedding) and isinstance(self.input_layouts, Shard):
            raise ValueError("RowwiseParallel: an nn.Embedding's input (token ids) must be Replicate, got "
                             f"{self.input_layouts}")
        module.forward = types.MethodType(forward, module)  # a bound method: deepcopy rebinds it to the copy
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module

    def __repr__(self):
        return (f"RowwiseParallel(input_layouts={self.input_layouts}, output_layouts={self.output_layouts}, "
                f"use_local_output={self.use_local_output})")


class SequenceParallel(ParallelStyle):
    def __init__(self, *, sequence_dim=1, use_local_output=False):
        self.sequence_dim = sequence_dim
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        for name, p in list(module._parameters.items()):
            if p is not None:
                d = _shard_param(module, name, mesh, Replicate())
                if d.requires_grad:
                    _allreduce_grads(d, mesh)
        seq = Shard(self.sequence_dim)

        def pre(m, inputs):
            if not inputs:
                raise ValueError("SequenceParallel: the module was called without a positional input")
            return (_to_layout(inputs[0], mesh, seq, seq),) + tuple(inputs[1:])

        def post(m, inputs, out):
            gshape = list(out.shape)
            gshape[self.sequence_dim] = inputs[0].shape[self.sequence_dim] * mesh.size(0)
            d = DTensor.from_local(out, mesh, [seq], shape=gshape)
            return d.to_local() if self.use_local_output else d

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module


class PrepareModuleInput(ParallelStyle):
    """Converts the module's inputs: positional input i from input_layouts[i] (None: leave it) to
    desired_input_layouts[i]; likewise keyword inputs. A DTensor input keeps its own placements as the source."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_output=False):
        single = isinstance(input_layouts, Placement)
        self.input_layouts = (input_layouts,) if single else tuple(input_layouts or ())
        d = desired_input_layouts
        self.desired_input_layouts = (d,) if isinstance(d, Placement) else tuple(d or ())
        if len(self.input_layouts) != len(self.desired_input_layouts):
            raise ValueError(f"PrepareModuleInput: input_layouts {self.input_layouts} and desired_input_layouts "
                             f"{self.desired_input_layouts} must have the same length")
        self.input_kwarg_layouts = dict(input_kwarg_layouts or {})
        self.desired_input_kwarg_layouts = dict(desired_input_kwarg_layouts or {})
        if set(self.input_kwarg_layouts) != set(self.desired_input_kwarg_layouts):
            raise ValueError("PrepareModuleInput: input_kwarg_layouts and desired_input_kwarg_layouts must name the "
                             "same inputs")
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        def pre(m, args, kwargs):
            if len(args) < len(self.input_layouts):
                raise ValueError(f"PrepareModuleInput: {len(self.input_layouts)} input layouts for a call with "
                                 f"{len(args)} positional inputs")
            new = list(args)
            for i, (a, b) in enumerate(zip(self.input_layouts, self.desired_input_layouts)):
                if a is not None:
                    new[i] = _to_layout(args[i], mesh, a, b, local=self.use_local_output)
            kw = dict(kwargs)
            for k, a in self.input_kwarg_layouts.items():
                if k in kw and a is not None:
                    kw[k] = _to_layout(kw[k], mesh, a, self.desired_input_kwarg_layouts[k],
                                       local=self.use_local_output)
            return tuple(new), kw

        module.register_forward_pre_hook(pre, with_kwargs=True)
        return module


class PrepareModuleOutput(ParallelStyle):
    """Converts the module's outputs (a tensor or a tuple) from output_layouts to desired_output_layouts."""

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        self.output_layouts = (output_layouts,) if isinstance(output_layouts, Placement) else tuple(output_layouts)
        d = desired_output_layouts
        self.desired_output_layouts = (d,) if isinstance(d, Placement) else tuple(d)
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise ValueError(f"PrepareModuleOutput: output_layouts {self.output_layouts} and desired_output_layouts "
                             f"{self.desired_output_layouts} must have the same length")
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        def post(m, inputs, out):
            single = not isinstance(out, (tuple, list))
            outs = [out] if single else list(out)
            if len(outs) != len(self.output_layouts):
                raise ValueError(f"PrepareModuleOutput: {len(self.output_layouts)} output layouts for "
                                 f"{len(outs)} outputs")
            res = [_to_layout(o, mesh, a, b, local=self.use_local_output) if a is not None else o
                   for o, a, b in zip(outs, self.output_layouts, self.desired_output_layouts)]
            return res[0] if single else type(out)(res)

        module.register_forward_hook(post)
        return module
