"""Collectives with autograd (torch.distributed.nn.functional). Each returns new tensors (the inputs are not
changed) and its backward is the adjoint collective, as torch's:

* all_reduce: backward all-reduces the gradient with the same op (the true adjoint for SUM and AVG; torch uses the
  same op for MAX/MIN/PRODUCT too, which is not their derivative: we do as torch).
* all_gather: the gradient of rank r's input is the sum over ranks of their gradient for slice r (a reduce-scatter).
* broadcast: the src rank gets the sum of every rank's gradient, the others zeros.
* reduce: the gradient is the dst rank's gradient broadcast to all.
* reduce_scatter: the gradient of input slice j is rank j's output gradient (an all-gather).
* all_to_all / all_to_all_single: an all-to-all of the gradients the other way.
* gather / scatter: scatter / gather of the gradients.
"""

import strata
from strata.autograd import Function

from .. import _collectives as C
from .. import ReduceOp, get_rank, get_world_size, group as _group_ns


def _world():
    return _group_ns.WORLD


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.op, ctx.group = op, group
        out = tensor.clone().contiguous()
        C.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        return None, None, _AllReduce.apply(ctx.op, ctx.group, g)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src, ctx.group, ctx.rank = src, group, get_rank(group)
        out = tensor.clone().contiguous()
        C.broadcast(out, src, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        gx = _Reduce.apply(ctx.src, ReduceOp.SUM, ctx.group, g)
        if ctx.rank != _global_to_group(ctx.group, ctx.src):
            gx = strata.zeros_like(gx)
        return None, None, gx


def _global_to_group(group, rank):
    from .. import get_group_rank

    return get_group_rank(group, rank) if group is not None else rank


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, group, tensor):
        ctx.dst, ctx.group = dst, group
        out = tensor.clone().contiguous()
        C.reduce(out, dst, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        return None, None, None, _Broadcast.apply(ctx.dst, ctx.group, g)


class _AllGather(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        tensor = tensor.contiguous()
        outs = [strata.empty_like(tensor) for _ in range(get_world_size(group))]
        C.all_gather(outs, tensor, group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        grads = [g.contiguous() for g in grads]
        gx = strata.empty_like(grads[0])
        C.reduce_scatter(gx, grads, op=ReduceOp.SUM, group=ctx.group)
        return None, gx


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, group, output, *inputs):
        ctx.group = group
        out = strata.empty_like(output).contiguous()
        C.reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        return (None, None, None) + _AllGather.apply(ctx.group, g)


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, group, out_shapes, *inputs):
        ctx.group = group
        ctx.in_shapes = [tuple(t.shape) for t in inputs]
        outs = [strata.empty(s, dtype=inputs[0].dtype) for s in out_shapes]
        C.all_to_all(outs, [t.contiguous() for t in inputs], group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + _AllToAll.apply(ctx.group, ctx.in_shapes, *[g.contiguous() for g in grads])


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, group, out_shape, out_splits, in_splits, tensor):
        ctx.group, ctx.in_shape, ctx.out_splits, ctx.in_splits = group, tuple(tensor.shape), out_splits, in_splits
        out = strata.empty(out_shape, dtype=tensor.dtype)
        C.all_to_all_single(out, tensor.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        return None, None, None, None, _AllToAllSingle.apply(ctx.group, ctx.in_shape, ctx.in_splits, ctx.out_splits,
                                                            g.contiguous())


class _Gather(Function):
    @staticmethod
    def forward(ctx, dst, group, tensor):
        ctx.dst, ctx.group = dst, group
        tensor = tensor.contiguous()
        outs = [strata.zeros_like(tensor) for _ in range(get_world_size(group))]
        C.gather(tensor, outs if get_rank(group) == _global_to_group(group, dst) else None, dst, group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        return None, None, _Scatter.apply(ctx.dst, ctx.group, *grads)


class _Scatter(Function):
    @staticmethod
    def forward(ctx, src, group, *tensors):
        ctx.src, ctx.group = src, group
        if not all(t.shape == tensors[0].shape for t in tensors):
            raise ValueError(f"scatter: every tensor must have one shape, got {[tuple(t.shape) for t in tensors]}")
        out = strata.zeros_like(tensors[0])
        mine = get_rank(group) == _global_to_group(group, src)
        C.scatter(out, [t.contiguous() for t in tensors] if mine else None, src, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        return (None, None) + _Gather.apply(ctx.src, ctx.group, g)


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """A new tensor: the all-reduce of `tensor` over the group (differentiable)."""
    return _AllReduce.apply(op, group, tensor)


def broadcast(tensor, src, group=None):
    """A new tensor: src's `tensor` on every rank (differentiable; src is a global rank)."""
    return _Broadcast.apply(src, group, tensor)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None):
    """A new tensor: the reduction on dst (differentiable). On other ranks torch returns whatever the backend left
    there; here, the input."""
    return _Reduce.apply(dst, op, group, tensor)


def all_gather(tensor, group=None):
    """A tuple of every rank's `tensor` (differentiable)."""
    return _AllGather.apply(group, tensor)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """A new tensor shaped like `output`: the reduction over ranks of their input_list[rank] (differentiable;
    `output` itself is not written, as torch's returns a new tensor)."""
    if len(input_list) != get_world_size(group):
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors for a group of "
                         f"{get_world_size(group)}")
    return _ReduceScatter.apply(op, group, output, *input_list)


def all_to_all(output_tensor_list, input_tensor_list, group=None):
    """A tuple shaped like output_tensor_list: element j is rank j's input_tensor_list[rank] (differentiable)."""
    n = get_world_size(group)
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: expected {n} output and input tensors, got {len(output_tensor_list)} and "
                         f"{len(input_tensor_list)}")
    return _AllToAll.apply(group, [tuple(t.shape) for t in output_tensor_list], *input_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None):
    """A new tensor shaped like `output`: all_to_all_single of `input` (differentiable)."""
    return _AllToAllSingle.apply(group, tuple(output.shape), output_split_sizes, input_split_sizes, input)


def gather(tensor, dst=0, group=None):
    """A tuple of every rank's tensor on dst (zeros elsewhere), differentiable."""
    return _Gather.apply(dst, group, tensor)


def scatter(tensors, src=0, group=None):
    """src's tensors[rank] on each rank (differentiable); every rank passes a list of world-size tensors."""
    return _Scatter.apply(src, group, *tensors)
