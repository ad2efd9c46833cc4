"""Placements: how a DTensor's global tensor lies along one mesh dimension (torch.distributed.tensor.placement_types).

* Shard(dim): the global tensor is split along tensor dimension `dim` as `torch.chunk` splits it (pieces of
  ceil(size / n), the last ones smaller or empty); mesh coordinate k holds piece k.
* Replicate(): every rank holds the whole (as sharded along the other mesh dimensions).
* Partial(reduce_op): every rank holds a term; the global value is their reduction ("sum", "avg", "max", "min")."""

__all__ = ["Placement", "Shard", "Replicate", "Partial"]  # and the private _StridedShard (FSDP over TP)


class Placement:
    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self, reduce_op=None):
        return False


class Shard(Placement):
    def __init__(self, dim=0):
        if not isinstance(dim, int):
            raise TypeError(f"Shard: dim must be an int, got {type(dim).__name__}")
        self.dim = dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class Replicate(Placement):
    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


_REDUCE_OPS = ("sum", "avg", "max", "min")


class Partial(Placement):
    def __init__(self, reduce_op="sum"):
        if reduce_op not in _REDUCE_OPS:
            raise ValueError(f"Partial: reduce_op must be one of {_REDUCE_OPS}, got {reduce_op!r}")
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op=None):
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"


class _StridedShard(Placement):
    """Shard(dim) taken *after* the later mesh dimensions' shards of the same tensor dimension: what fully_shard
    over a data-parallel mesh dimension gives a parameter already sharded on dim 0 by tensor parallelism (the dp
    piece is a chunk of the tp piece). split_factor is the number of tp pieces (as torch's). Redistribution can
    only remove it (full_tensor, or any placements without it)."""

    def __init__(self, dim, split_factor):
        self.dim = dim
        self.split_factor = split_factor

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, _StridedShard) and (other.dim, other.split_factor) == (self.dim, self.split_factor)

    def __hash__(self):
        return hash(("_StridedShard", self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self):
        return f"_S({self.dim}, {self.split_factor})"
