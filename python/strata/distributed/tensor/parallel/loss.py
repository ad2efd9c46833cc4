"""loss_parallel (torch.distributed.tensor.parallel.loss_parallel): cross-entropy on class-sharded logits.

Inside `with loss_parallel():`, `F.cross_entropy` (and nn.CrossEntropyLoss) given a DTensor whose class dimension
(dim 1) is sharded on a 1-D mesh computes the loss without gathering the logits: the row maximum and the sum of
exponentials are all-reduced (max, sum), the target's logit is taken on the rank holding its class and all-reduced.
The loss is the same on every rank (a plain tensor); backward gives each rank the gradient of its logit shard with
no communication. Other inputs go to the ordinary cross_entropy. Supported: 2-D input (N, C) and class-index
targets, reduction "mean"/"sum"/"none", ignore_index; weight and label_smoothing raise. Logits of shape
(B, S, V) sharded on the vocabulary: flatten them first (`pred.flatten(0, 1)` keeps a DTensor's placements when the
sharded dimension is the last one)."""

import contextlib

import strata
from strata.autograd import Function

from .._api import DTensor, _chunk_sizes
from ..placement_types import Shard

__all__ = ["loss_parallel"]


def _dist():
    from .... import distributed as dist

    return dist


class _ShardedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, x, target, offset, group, ignore_index, reduction):
        dist = _dist()
        x = x.detach()
        local_c = x.shape[1]
        m = x.max(1).values if local_c else strata.full((x.shape[0],), float("-inf"), dtype=x.dtype)
        m = m.contiguous()
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
        e = (x - m.unsqueeze(1)).exp()
        s = e.sum(1).contiguous()
        dist.all_reduce(s, group=group)
        inside = (target >= offset) & (target < offset + local_c)
        idx = (target - offset).masked_fill(~inside, 0)
        if local_c:
            picked = x.gather(1, idx.unsqueeze(1)).squeeze(1).masked_fill(~inside, 0.0)
        else:
            picked = strata.zeros((x.shape[0],), dtype=x.dtype)
        picked = picked.contiguous()
        dist.all_reduce(picked, group=group)
        valid = target != ignore_index
        loss = (s.log() + m - picked).masked_fill(~valid, 0.0)
        count = int(valid.sum().item())
        ctx.save_for_backward(e / s.unsqueeze(1), idx, inside & valid, valid)
        ctx.reduction, ctx.count = reduction, count
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        return loss.sum() / count if count else loss.sum() * float("nan")

    @staticmethod
    def backward(ctx, g):
        soft, idx, hit, valid = ctx.saved_tensors
        if ctx.reduction == "none":
            gi = g
        elif ctx.reduction == "sum":
            gi = g.expand(valid.shape)
        else:
            gi = (g / max(ctx.count, 1)).expand(valid.shape)
        gi = gi * valid.to(soft.dtype)
        grad = soft * gi.unsqueeze(1)
        if soft.shape[1]:
            onehot = strata.zeros_like(soft).scatter(1, idx.unsqueeze(1), hit.to(soft.dtype).unsqueeze(1))
            grad = grad - onehot * gi.unsqueeze(1)
        return grad, None, None, None, None, None


def _parallel_cross_entropy(original):
    def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                      reduction="mean", label_smoothing=0.0):
        if not isinstance(input, DTensor):
            return original(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        mesh, pl = input.device_mesh, input.placements
        if mesh.ndim != 1 or pl != (Shard(1),) or input._spec.ndim != 2:
            raise NotImplementedError(f"loss_parallel: cross_entropy needs a 2-D DTensor sharded on the class "
                                      f"dimension (Shard(1)) of a 1-D mesh, got placements {pl} on a "
                                      f"{input._spec.ndim}-D tensor")
        if weight is not None or label_smoothing:
            raise NotImplementedError("loss_parallel: cross_entropy with weight or label_smoothing is not supported")
        if size_average is not None or reduce is not None:
            reduction = "mean" if (size_average is None or size_average) and (reduce is None or reduce) else \
                ("sum" if reduce is None or reduce else "none")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"loss_parallel: unknown reduction {reduction!r}")
        if isinstance(target, DTensor):
            target = target.full_tensor()
        if target.is_floating_point():
            raise NotImplementedError("loss_parallel: class-probability targets are not supported")
        sizes = _chunk_sizes(input._spec.shape[1], mesh.size(0))
        k = mesh.get_local_rank(0)
        offset = k * max(sizes) if sizes[k] else 0
        return _ShardedCrossEntropy.apply(input.to_local(), target, offset, mesh.get_group(0), ignore_index,
                                          reduction)

    return cross_entropy


@contextlib.contextmanager
def loss_parallel():
    """Within the block, cross_entropy on class-sharded DTensor logits is computed without gathering them."""
    import strata.nn.functional as F

    original = F.cross_entropy
    F.cross_entropy = _parallel_cross_entropy(original)
    try:
        yield
    finally:
        F.cross_entropy = original
