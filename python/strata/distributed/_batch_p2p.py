"""P2POp, batch_isend_irecv and get_default_backend_for_device (torch.distributed's names)."""

from . import _collectives


def _check_op(op):
    if op not in (_collectives.isend, _collectives.irecv):
        raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                         f"``torch.distributed.irecv``, got {op!r}")


class P2POp:
    """One point-to-point operation (isend or irecv of `tensor` with `peer`, a global rank, or `group_peer`, a rank
    of `group`) for batch_isend_irecv."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        from . import _group
        import strata

        _check_op(op)
        if not isinstance(tensor, strata.Tensor):
            raise TypeError(f"P2POp: tensor must be a Tensor, got {type(tensor).__name__}")
        if (peer is None) == (group_peer is None):
            raise ValueError("P2POp: give exactly one of peer and group_peer")
        self.op = op
        self.tensor = tensor
        self.group = _group(group)
        if not hasattr(self.group, "_ranks"):  # GroupMember.NON_GROUP_MEMBER: the op will do nothing
            self.peer, self.group_peer = peer, group_peer
        elif peer is not None:
            if peer not in self.group._ranks:
                raise ValueError(f"P2POp: global rank {peer} is not part of the group")
            self.peer, self.group_peer = peer, self.group._ranks.index(peer)
        else:
            if not 0 <= group_peer < self.group.size():
                raise ValueError(f"P2POp: group rank {group_peer} is out of range for a group of size "
                                 f"{self.group.size()}")
            self.peer, self.group_peer = self.group._ranks[group_peer], group_peer
        self.tag = tag

    def __repr__(self):
        me = self.group.rank()
        name = self.op.__name__
        s, d = (me, self.group_peer) if name == "isend" else (self.group_peer, me)
        return f"P2POp({name} group_src={s}, group_dst={d}, {tuple(self.tensor.shape)}, {self.tensor.dtype})"


def batch_isend_irecv(p2p_op_list):
    """Starts every operation of the list (all on one group) and returns their work handles. The messages are
    non-blocking (MPI_Isend/MPI_Irecv tested by the communication thread), so any order of sends and receives
    across ranks completes."""
    if not isinstance(p2p_op_list, list) or not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``.")
    group = p2p_op_list[0].group
    if not all(p.group is group for p in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    works = []
    for p in p2p_op_list:
        key = "group_dst" if p.op is _collectives.isend else "group_src"
        w = p.op(p.tensor, group=group, tag=p.tag, **{key: p.group_peer})
        if w is not None:
            works.append(w)
    return works


_DEVICE_BACKEND = {"cpu": "gloo", "cuda": "nccl"}


def get_default_backend_for_device(device):
    """torch's default backend name for a device type: "gloo" for cpu (served by MPI here), "nccl" for cuda."""
    import strata

    kind = device.type if isinstance(device, strata.device) else strata.device(device).type
    b = _DEVICE_BACKEND.get(kind)
    if b is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return b
