"""DTensor: a tensor sharded over a DeviceMesh (torch.distributed.tensor.DTensor), without op interception.

Strata has no __torch_function__/__torch_dispatch__, so a DTensor cannot turn every op into a sharded op as torch's
does. Instead a DTensor *is* its local shard: a Python subclass of strata.Tensor sharing the local shard's storage,
carrying the mesh, the placements and the global shape/stride in `_spec`. Consequences (docs/DISTRIBUTED.md):

* every op, method and attribute of strata.Tensor works on the local shard: `.shape`, `.size()`, `.numel()`,
  arithmetic, matmul, in-place updates. Optimizers therefore update sharded parameters shard by shard, which is
  right for elementwise optimizers (SGD, Adam, AdamW, ...). Results of ops are plain tensors (local values).
* the global view is explicit: `_spec.shape`/`_spec.stride`, `placements`, `device_mesh`, `full_tensor()`,
  `redistribute()`, `to_local()`, `DTensor.from_local()`.
* `to_local`, `from_local`, `redistribute` and `full_tensor` are differentiable with DTensor's gradient rules.
"""

import math

import strata

from .placement_types import Partial, Placement, Replicate, Shard, _StridedShard

__all__ = ["DTensor", "DTensorSpec", "distribute_tensor", "distribute_module"]

_Tensor = strata.Tensor


def _dist():
    from ... import distributed as dist

    return dist


def _reduce_op(name):
    R = _dist().ReduceOp
    return {"sum": R.SUM, "avg": R.AVG, "max": R.MAX, "min": R.MIN}[name]


class DTensorSpec:
    """The mesh, the placements (one per mesh dimension) and the global shape and stride of a DTensor."""

    def __init__(self, mesh, placements, shape, stride=None):
        self.mesh = mesh
        self.placements = tuple(placements)
        self.shape = strata.Size(shape) if hasattr(strata, "Size") else tuple(shape)
        if stride is None:
            stride, acc = [], 1
            for s in reversed(tuple(shape)):
                stride.append(acc)
                acc *= max(int(s), 1)
            stride = tuple(reversed(stride))
        self.stride = tuple(stride)

    @property
    def ndim(self):
        return len(self.shape)

    def local_shape(self):
        """This rank's shard shape (torch.chunk's sizes, mesh dimensions applied in order)."""
        shape = list(self.shape)
        for strided in (False, True):  # strided shards split the piece the other shards left
            for i, p in enumerate(self.placements):
                if isinstance(p, _StridedShard if strided else Shard):
                    shape[p.dim] = _chunk_sizes(shape[p.dim], self.mesh.size(i))[self.mesh.get_local_rank(i)]
        return tuple(shape)

    def __eq__(self, other):
        return isinstance(other, DTensorSpec) and self.mesh == other.mesh and \
            self.placements == other.placements and tuple(self.shape) == tuple(other.shape)

    def __repr__(self):
        return f"DTensorSpec(mesh={self.mesh}, placements={self.placements}, shape={tuple(self.shape)})"


def _chunk_sizes(size, n):
    c = -(-size // n) if size > 0 else 0
    return [max(0, min(c, size - k * c)) for k in range(n)]


def _normalize_placements(op, mesh, placements, ndim):
    if placements is None:
        return tuple(Replicate() for _ in range(mesh.ndim))
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"{op}: {len(placements)} placements {placements} for a mesh of {mesh.ndim} dimensions "
                         f"(one placement per mesh dimension)")
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"{op}: placements must be Shard, Replicate or Partial, got {p!r}")
        if isinstance(p, Shard):
            d = p.dim
            if not -ndim <= d < max(ndim, 1) or ndim == 0:
                raise IndexError(f"{op}: {p!r} is out of range for a tensor of {ndim} dimensions")
            p = Shard(d % ndim)
        out.append(p)
    return tuple(out)


# ---- collectives on local shards (no autograd) --------------------------------------------------------------


def _size_before(spec_shape, placements, d, upto, mesh):
    """The size along tensor dim d of the piece held after the mesh dims < upto that shard d."""
    s = spec_shape[d]
    for j in range(upto):
        p = placements[j]
        if isinstance(p, Shard) and p.dim == d:
            s = _chunk_sizes(s, mesh.size(j))[mesh.get_local_rank(j)]
    return s


def _all_gather(t, d, full, mesh, i):
    dist = _dist()
    n = mesh.size(i)
    if n == 1:
        return t
    sizes = _chunk_sizes(full, n)
    c = max(sizes) if sizes else 0
    x = t.movedim(d, 0)
    if x.shape[0] < c:
        pad = strata.zeros((c - x.shape[0],) + tuple(x.shape[1:]), dtype=t.dtype)
        x = strata.cat([x, pad], 0)
    x = x.contiguous()
    out = strata.empty((n * c,) + tuple(x.shape[1:]), dtype=t.dtype)
    dist.all_gather_into_tensor(out, x, group=mesh.get_group(i))
    pieces = [out.narrow(0, k * c, sizes[k]) for k in range(n)]
    return strata.cat(pieces, 0).movedim(0, d).contiguous()


def _reduce_scatter(t, d, mesh, i, op):
    dist = _dist()
    n = mesh.size(i)
    k = mesh.get_local_rank(i)
    full = t.shape[d]
    sizes = _chunk_sizes(full, n)
    if n == 1:
        return t.clone()
    c = max(sizes)
    x = t.movedim(d, 0)
    if full < n * c:
        pad = strata.zeros((n * c - full,) + tuple(x.shape[1:]), dtype=t.dtype)
        x = strata.cat([x, pad], 0)
    x = x.contiguous()
    out = strata.empty((c,) + tuple(x.shape[1:]), dtype=t.dtype)
    dist.reduce_scatter_tensor(out, x, op=_reduce_op(op), group=mesh.get_group(i))
    return out.narrow(0, 0, sizes[k]).movedim(0, d).contiguous()


def _all_reduce(t, mesh, i, op):
    out = t.clone().contiguous()
    if mesh.size(i) > 1:
        _dist().all_reduce(out, op=_reduce_op(op), group=mesh.get_group(i))
    return out


def _chunk(t, d, mesh, i):
    n, k = mesh.size(i), mesh.get_local_rank(i)
    sizes = _chunk_sizes(t.shape[d], n)
    c = max(sizes) if sizes else 0
    return t.narrow(d, k * c if sizes[k] else 0, sizes[k]).contiguous()


def _partition(t, p, mesh, i):
    if p.reduce_op == "sum":
        return t / mesh.size(i) if t.is_floating_point() else t // mesh.size(i)
    return t.clone()


def _redistribute_local(t, spec, target):
    """The local shard, for the same global tensor, under `target` placements (a new tensor)."""
    mesh = spec.mesh
    cur, tgt = list(spec.placements), list(target)
    n = len(cur)
    for i in range(n):
        if isinstance(cur[i], Partial) and isinstance(tgt[i], Partial) and cur[i] != tgt[i]:
            raise ValueError(f"DTensor.redistribute: cannot turn {cur[i]!r} into {tgt[i]!r} on mesh dimension {i} "
                             "(reduce it to Replicate first)")
    if any(isinstance(p, _StridedShard) for p in tgt):
        # to a strided shard (only backward of fully_shard-over-TP parameters asks): via the whole tensor
        if any(isinstance(p, Partial) for p in tgt):
            raise NotImplementedError(f"DTensor.redistribute: cannot redistribute to {tuple(tgt)}")
        whole = _redistribute_local(t, spec, [Replicate()] * n)
        return _local_piece(whole, DTensorSpec(mesh, tgt, spec.shape))
    # 0. strided shards first: gather the piece the other mesh dims' shards left
    t = t.contiguous()
    for i in range(n):
        if isinstance(cur[i], _StridedShard):
            d, s = cur[i].dim, spec.shape[cur[i].dim]
            for j in range(n):
                if j != i and isinstance(cur[j], Shard) and cur[j].dim == d:
                    s = _chunk_sizes(s, mesh.size(j))[mesh.get_local_rank(j)]
            t = _all_gather(t, d, s, mesh, i)
            cur[i] = Replicate()
    # 1. mesh dims whose shard goes away, plus later mesh dims sharding the same tensor dim (nested pieces)
    undo = set()
    for i in range(n):
        if isinstance(cur[i], Shard) and tgt[i] != cur[i]:
            undo.add(i)
        if isinstance(tgt[i], Shard) and cur[i] != tgt[i]:
            for j in range(i + 1, n):
                if cur[j] == tgt[i]:
                    undo.add(j)
    for i in list(undo):
        for j in range(i + 1, n):
            if isinstance(cur[j], Shard) and cur[j] == cur[i]:
                undo.add(j)
    t = t.contiguous()
    for i in sorted(undo, reverse=True):
        d = cur[i].dim
        t = _all_gather(t, d, _size_before(spec.shape, cur, d, i, mesh), mesh, i)
        cur[i] = Replicate()
    # 2. partial sums
    for i in range(n):
        if isinstance(cur[i], Partial) and tgt[i] != cur[i]:
            d = tgt[i].dim if isinstance(tgt[i], Shard) else None
            if d is not None and not any(isinstance(p, Shard) and p.dim == d for j, p in enumerate(cur) if j != i) \
                    and not any(isinstance(p, Shard) and p.dim == d for j, p in enumerate(tgt) if j != i):
                t = _reduce_scatter(t, d, mesh, i, cur[i].reduce_op)
                cur[i] = tgt[i]
            else:
                t = _all_reduce(t, mesh, i, cur[i].reduce_op)
                cur[i] = Replicate()
    # 3. new shards and partials, in mesh order (nested shards of one tensor dim chunk in mesh order)
    for i in range(n):
        if isinstance(cur[i], Replicate) and not isinstance(tgt[i], Replicate):
            if isinstance(tgt[i], Shard):
                t = _chunk(t, tgt[i].dim, mesh, i)
            else:
                t = _partition(t, tgt[i], mesh, i)
            cur[i] = tgt[i]
    return t


def _local_piece(full, spec):
    """This rank's local shard of the global tensor `full` under spec (no communication: nested shards chunk in mesh
    order, strided shards last; Replicate keeps everything). Partial placements raise."""
    t = full
    for strided in (False, True):
        for i, p in enumerate(spec.placements):
            if isinstance(p, Partial):
                raise ValueError(f"cannot take the local piece of a tensor for a Partial placement {p!r}")
            if isinstance(p, _StridedShard if strided else Shard):
                t = _chunk(t, p.dim, spec.mesh, i)
    return t


class _Redistribute(strata.autograd.Function):
    """Forward: the new local shard. Backward: the gradient goes the other way, from grad_placements (default: the
    target placements, a Partial one read as Replicate: the gradient of a sum of terms is the same for every term)
    to the source placements (likewise)."""

    @staticmethod
    def forward(ctx, x, spec, target, grad_placements):
        ctx.spec, ctx.target, ctx.gp = spec, target, grad_placements
        local = _Tensor.detach(x)
        if tuple(spec.placements) == tuple(target):
            return local.clone()
        return _redistribute_local(local, spec, target)

    @staticmethod
    def backward(ctx, g):
        gp = ctx.gp if ctx.gp is not None else _unpartial(ctx.target)
        gspec = DTensorSpec(ctx.spec.mesh, gp, ctx.spec.shape)
        back = _unpartial(ctx.spec.placements)
        if tuple(gp) == back:
            return g, None, None, None
        return _redistribute_local(g, gspec, back), None, None, None


class _ToLocal(strata.autograd.Function):
    """The local shard; backward turns the local gradient, whose placements are grad_placements, into the
    DTensor's own placements (a Partial placement's gradient being Replicate)."""

    @staticmethod
    def forward(ctx, x, spec, grad_placements):
        ctx.spec, ctx.gp = spec, grad_placements
        local = _Tensor.detach(x)
        return local.view_as(local)

    @staticmethod
    def backward(ctx, g):
        own = _unpartial(ctx.spec.placements)
        if ctx.gp is None or tuple(ctx.gp) == own:
            return g, None, None
        gspec = DTensorSpec(ctx.spec.mesh, ctx.gp, ctx.spec.shape)
        return _redistribute_local(g, gspec, own), None, None


def _unpartial(ps):
    return tuple(Replicate() if isinstance(p, Partial) else p for p in ps)


def _wrap(local, spec):
    """A DTensor sharing `local`'s storage and autograd history (non-leaf if local requires grad)."""
    if isinstance(local, DTensor):
        local = local.to_local()
    out = local.as_subclass(DTensor)
    out._spec = spec
    return out


class DTensor(_Tensor):
    """A tensor sharded over a DeviceMesh; its storage, shape and ops are the local shard's (module docstring).

    Build one with distribute_tensor() or DTensor.from_local(); not with the constructor."""

    _strata_param_subclass = True
    _strata_dtensor = True

    def __new__(cls, *args, **kwargs):
        raise TypeError("DTensor: build a DTensor with distribute_tensor(tensor, mesh, placements) or "
                        "DTensor.from_local(local_tensor, mesh, placements)")

    def __init__(self, *args, **kwargs):
        pass

    @staticmethod
    def _leaf(local, spec, requires_grad):
        out = _Tensor._make_subclass(DTensor, _Tensor.detach(local), requires_grad)
        out._spec = spec
        return out

    def _as_parameter(self, requires_grad=True):
        """nn.Parameter(dtensor): a leaf DTensor flagged as a parameter (torch keeps the DTensor type too)."""
        out = DTensor._leaf(self, self._spec, requires_grad)
        out._is_param = True
        return out

    # ---- metadata ------------------------------------------------------------------------------------------
    @property
    def placements(self):
        return self._spec.placements

    @property
    def device_mesh(self):
        return self._spec.mesh

    @property
    def _local_tensor(self):
        return _Tensor.detach(self)

    @property
    def grad(self):
        g = _Tensor.grad.fget(self)
        if g is None or isinstance(g, DTensor) or "_spec" not in self.__dict__:
            return g
        w = g.as_subclass(DTensor)
        w._spec = DTensorSpec(self._spec.mesh, self._spec.placements, self._spec.shape, self._spec.stride)
        _Tensor.grad.fset(self, w)
        return w

    @grad.setter
    def grad(self, value):
        _Tensor.grad.fset(self, value)

    def __repr__(self):
        return (f"DTensor(local_tensor={_Tensor.__repr__(_Tensor.detach(self))}, device_mesh={self.device_mesh}, "
                f"placements={self.placements})")

    __str__ = __repr__

    def flatten(self, start_dim=0, end_dim=-1):
        """The local flatten; a DTensor with the placements renumbered when no sharded dimension is flattened
        (e.g. (B, S, V) sharded on V -> (B*S, V) sharded on dim 1), else a plain local tensor."""
        out = _Tensor.flatten(self, start_dim, end_dim)
        nd = self._spec.ndim
        if nd == 0:
            return out
        s, e = start_dim % nd, end_dim % nd
        if s >= e:
            return _wrap(out, self._spec)
        new = []
        for p in self._spec.placements:
            if isinstance(p, Shard):
                if s <= p.dim <= e:
                    return out
                p = Shard(p.dim if p.dim < s else p.dim - (e - s))
            elif not isinstance(p, (Replicate, Partial)):
                return out
            new.append(p)
        g = list(self._spec.shape)
        size = 1
        for v in g[s:e + 1]:
            size *= v
        return _wrap(out, DTensorSpec(self._spec.mesh, new, g[:s] + [size] + g[e + 1:]))

    def detach(self):
        """A DTensor sharing this one's local storage and placements, outside autograd (so state_dict() holds
        DTensors, as torch's)."""
        return _wrap(_Tensor.detach(self), self._spec)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = DTensor._leaf(_Tensor.detach(self).clone(), self._spec, self.requires_grad)
        if getattr(self, "_is_param", False):
            out._is_param = True
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        raise TypeError("DTensor cannot be pickled in Strata: save full_tensor() or to_local() instead")

    # ---- conversions ---------------------------------------------------------------------------------------
    def to_local(self, *, grad_placements=None):
        """The local shard as a plain tensor sharing storage; differentiable. grad_placements: the placements of
        the gradient that will reach the local tensor (default: this DTensor's, Partial read as Replicate); the
        backward redistributes it to this DTensor's placements (e.g. Partial() for a replicated input consumed by
        a column-sharded matmul: its gradient is all-reduced)."""
        if self.requires_grad:
            gp = None if grad_placements is None else _normalize_placements(
                "DTensor.to_local", self.device_mesh, grad_placements, self._spec.ndim)
            return _ToLocal.apply(self, self._spec, gp)
        return _Tensor.detach(self)

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False, shape=None, stride=None):
        """A DTensor whose local shard is `local_tensor` (shared storage, differentiable). Without `shape` the global
        shape assumes even shards: the local size times the mesh size along each sharded dimension. run_check=True
        checks the shards' shapes over the mesh and broadcasts Replicate shards from mesh coordinate 0."""
        if not isinstance(local_tensor, _Tensor):
            raise TypeError(f"DTensor.from_local: expected a Tensor, got {type(local_tensor).__name__}")
        mesh = device_mesh if device_mesh is not None else _default_mesh()
        placements = _normalize_placements("DTensor.from_local", mesh, placements, local_tensor.dim())
        if shape is None:
            gshape = list(local_tensor.shape)
            for i, p in enumerate(placements):
                if isinstance(p, Shard):
                    gshape[p.dim] *= mesh.size(i)
        else:
            gshape = list(shape)
        spec = DTensorSpec(mesh, placements, gshape, stride)
        if run_check:
            _check_shards("DTensor.from_local", local_tensor, spec)
            for i, p in enumerate(placements):
                if isinstance(p, Replicate) and mesh.size(i) > 1:
                    buf = _Tensor.detach(local_tensor).contiguous().clone()
                    g = mesh.get_group(i)
                    _dist().broadcast(buf, _dist().get_global_rank(g, 0), group=g)
                    with strata.no_grad():
                        _Tensor.detach(local_tensor).copy_(buf)
        return _wrap(local_tensor, spec)

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False, forward_dtype=None,
                     backward_dtype=None):
        """The same global tensor under new placements (differentiable): Shard->Replicate all-gathers,
        Partial->Replicate all-reduces, Partial->Shard reduce-scatters, Replicate->Shard chunks locally,
        Shard(i)->Shard(j) gathers then chunks. Going to Partial raises (as torch). The backward sends the gradient
        the other way (Replicate->Shard chunks, Shard->Replicate all-gathers, a Partial source gets the gradient
        as Replicate)."""
        if device_mesh is not None and device_mesh != self.device_mesh:
            raise NotImplementedError(f"DTensor.redistribute: moving to another mesh ({device_mesh}) is not supported "
                                      f"(the DTensor is on {self.device_mesh})")
        mesh = self.device_mesh
        if placements is None:
            raise ValueError("DTensor.redistribute: placements must be given")
        target = _normalize_placements("DTensor.redistribute", mesh, placements, self._spec.ndim)
        for i, (a, b) in enumerate(zip(self.placements, target)):
            if isinstance(b, Partial) and a != b:
                raise RuntimeError(f"DTensor.redistribute: cannot redistribute {a!r} to {b!r} on mesh dimension {i}: "
                                   "redistributing to Partial is not allowed (as in torch); build a Partial DTensor "
                                   "with DTensor.from_local")
        return self._redistribute(target, forward_dtype)

    def _redistribute(self, target, forward_dtype=None, grad_placements=None):
        mesh = self.device_mesh
        out = _Redistribute.apply(self, self._spec, tuple(target), grad_placements)
        if forward_dtype is not None:
            out = out.to(forward_dtype)
        return _wrap(out, DTensorSpec(mesh, target, self._spec.shape, self._spec.stride))

    def full_tensor(self, *, grad_placements=None):
        """The global tensor on every rank (a plain tensor; differentiable)."""
        return self.redistribute(self.device_mesh, [Replicate()] * self.device_mesh.ndim).to_local(
            grad_placements=grad_placements)


def _check_shards(op, local, spec):
    dist = _dist()
    want = spec.local_shape()
    shapes = [None] * dist.get_world_size()
    dist.all_gather_object(shapes, (dist.get_rank(), tuple(local.shape), want))
    bad = [(r, s, w) for r, s, w in shapes if s != w]
    if bad:
        raise ValueError(f"{op}: local shards do not make a {tuple(spec.shape)} tensor with placements "
                         f"{spec.placements}: " + ", ".join(f"rank {r} has {s}, expected {w}" for r, s, w in bad))


_mesh_cache = {}


def _default_mesh():
    dist = _dist()
    if not dist.is_initialized():
        raise RuntimeError("DTensor: no device_mesh given and no process group initialized (call "
                           "init_process_group or init_device_mesh)")
    key = id(dist.group.WORLD)
    if key not in _mesh_cache:
        from ..device_mesh import init_device_mesh

        _mesh_cache.clear()
        _mesh_cache[key] = init_device_mesh("cpu", (dist.get_world_size(),))
    return _mesh_cache[key]


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """The DTensor of `tensor` (taken from global rank src_data_rank, broadcast; None: each rank's own) under
    `placements` (default: Replicate on every mesh dimension); a leaf with tensor.requires_grad."""
    if not isinstance(tensor, _Tensor):
        raise TypeError(f"distribute_tensor: expected a Tensor, got {type(tensor).__name__}")
    if isinstance(tensor, DTensor):
        raise ValueError("distribute_tensor: the tensor is already a DTensor; use redistribute()")
    mesh = device_mesh if device_mesh is not None else _default_mesh()
    placements = _normalize_placements("distribute_tensor", mesh, placements, tensor.dim())
    full = _Tensor.detach(tensor).contiguous()
    if src_data_rank is not None and _dist().get_world_size() > 1:
        full = full.clone()
        _dist().broadcast(full, src_data_rank)
    spec_r = DTensorSpec(mesh, [Replicate()] * mesh.ndim, tuple(tensor.shape))
    local = _redistribute_local(full, spec_r, placements)
    if local is full:
        local = full.clone()
    return DTensor._leaf(local, DTensorSpec(mesh, placements, tuple(tensor.shape)), tensor.requires_grad)


def _replace_param(module, name, dt):
    dt._is_param = True
    module._parameters[name] = dt


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None, output_fn=None):
    """Calls partition_fn(name, submodule, mesh) on every submodule (default: nothing), then replicates every
    parameter that is not yet a DTensor; input_fn(module, inputs, mesh) and output_fn(module, outputs, mesh) become
    forward pre- and post-hooks. Returns the module."""
    mesh = device_mesh if device_mesh is not None else _default_mesh()
    if partition_fn is not None:
        for name, sub in list(module.named_modules()):
            partition_fn(name, sub, mesh)
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is not None and not isinstance(p, DTensor):
                _replace_param(sub, name, distribute_tensor(p, mesh, [Replicate()] * mesh.ndim)._as_parameter(
                    p.requires_grad))
    if input_fn is not None:
        module.register_forward_pre_hook(lambda m, inputs: input_fn(m, inputs, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda m, inputs, outputs: output_fn(m, outputs, mesh))
    return module


def _total_norm(tensors, norm_type, error_if_nonfinite):
    """The norm of all `tensors` together where some are DTensors: each one's local contribution is reduced over
    the mesh dimensions that shard it (sum of |x|^p; max for inf). Plain tensors count once."""
    norm_type = float(norm_type)
    dist = _dist()
    acc = None
    for t in tensors:
        local = _Tensor.detach(t)
        if math.isinf(norm_type):
            v = local.abs().max() if local.numel() else strata.zeros((), dtype=local.dtype)
            v = v.to(strata.float32) if not v.is_floating_point() else v
        else:
            v = local.abs().pow(norm_type).sum() if norm_type != 0 else (local != 0).sum().to(strata.float32)
        if isinstance(t, DTensor):
            spec = t._spec
            for i, p in enumerate(spec.placements):
                if isinstance(p, Partial):
                    raise ValueError("clip_grad_norm_: a gradient with a Partial placement must be reduced first "
                                     "(redistribute it to Shard or Replicate)")
                if p.is_shard() and spec.mesh.size(i) > 1:
                    v = v.clone().contiguous()
                    dist.all_reduce(v, op=dist.ReduceOp.MAX if math.isinf(norm_type) else dist.ReduceOp.SUM,
                                    group=spec.mesh.get_group(i))
        acc = v if acc is None else (strata.maximum(acc, v) if math.isinf(norm_type) else acc + v)
    if acc is None:
        return strata.tensor(0.0)
    total = acc if math.isinf(norm_type) or norm_type == 0 else acc.pow(1.0 / norm_type)
    if error_if_nonfinite and bool(total.isnan().logical_or(total.isinf())):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total
