"""The flat parameter of one FSDP unit: the unit's parameters flattened and concatenated, padded to a multiple
of the shard group's size, and this rank's contiguous shard of it.

`FlatParamHandle` owns the shard (a Parameter when use_orig_params=False, else a plain tensor whose slices are
the original parameters), gathers the whole flat parameter, turns it into views with the original shapes,
and reduces the gradient of the whole flat parameter into the shard's gradient."""

import math

__all__ = ["FlatParamHandle", "ParamInfo"]


class ParamInfo:
    """One original parameter: where it lives (module, attribute name, its path inside the unit) and where it
    lies in the flat parameter. ``aliases`` are the other (module, name) places the same Parameter was
    registered (shared weights)."""

    def __init__(self, module, name, path, param, offset):
        self.module = module
        self.name = name
        self.path = path  # dotted path of the parameter relative to the unit's wrapped module
        self.shape = tuple(param.shape)
        self.numel = param.numel()
        self.offset = offset
        self.requires_grad = param.requires_grad
        self.aliases = []
        self.orig = None  # the Parameter shown outside forward when use_orig_params=True


class _GatherFlat:
    """Made lazily: an autograd.Function whose forward all-gathers the shard into the whole flat parameter (in
    the compute dtype) and returns the original parameters as views of it, and whose backward writes the views'
    gradients into one flat gradient (no per-view full-size buffers) and reduces it into the shard's gradient
    (reduce-scatter averaged; all-reduce for NO_SHARD; kept unsharded under no_sync())."""
    fn = None

    @classmethod
    def get(cls):
        if cls.fn is None:
            from ...autograd import Function

            class GatherFlatParameter(Function):
                @staticmethod
                def forward(ctx, shard, handle, full=None):
                    ctx.handle = handle
                    return handle.views(handle.gather(shard, handle.compute_dtype) if full is None else full)

                @staticmethod
                def backward(ctx, *grads):
                    import strata
                    h = ctx.handle
                    flat = strata.zeros(h.padded_numel, dtype=h.compute_dtype)
                    for info, g in zip(h.infos, grads):
                        if g is not None:
                            flat[info.offset:info.offset + info.numel] = g.reshape(-1)
                    h.reduce_grad(flat, owned=True)
                    return None, None, None

            cls.fn = GatherFlatParameter
        return cls.fn


class _SavedView:
    __slots__ = ("shape", "stride", "offset")

    def __init__(self, shape, stride, offset):
        self.shape, self.stride, self.offset = shape, stride, offset


def _set_attr(module, name, value):
    """Installs ``value`` as ``module.name``: a Parameter is registered, a plain tensor (a view used during
    forward) is a plain attribute, so it shows in neither named_parameters nor state_dict."""
    module._parameters.pop(name, None)
    module.__dict__.pop(name, None)
    from ...nn import Parameter
    if isinstance(value, Parameter):
        module._parameters[name] = value
    else:
        object.__setattr__(module, name, value)


class FlatParamHandle:
    def __init__(self, infos, flat, shard_group, replicate_group, sharded, use_orig_params, compute_dtype,
                 reduce_dtype, pad_to):
        import strata
        from ... import distributed as dist
        from ...nn import Parameter

        self.infos = infos
        self.shard_group = shard_group
        self.replicate_group = replicate_group  # HYBRID_SHARD across nodes, else None
        self.sharded = sharded
        self.use_orig_params = use_orig_params
        self.dtype = flat.dtype
        self.compute_dtype = compute_dtype or flat.dtype
        self.reduce_dtype = reduce_dtype or self.compute_dtype
        self.numel = flat.numel()  # unpadded
        self.world = dist.get_world_size(shard_group) if sharded else 1
        self.rank = dist.get_rank(shard_group) if sharded else 0
        padded = math.ceil(self.numel / (self.world * pad_to)) * self.world * pad_to if sharded else self.numel
        self.padded_numel = padded
        self.shard_numel = padded // self.world
        self.shard_start = self.rank * self.shard_numel
        with strata.no_grad():
            if padded > self.numel:
                flat = strata.cat([flat, strata.zeros(padded - self.numel, dtype=flat.dtype)])
            shard = flat[self.shard_start:self.shard_start + self.shard_numel].clone()
        self.requires_grad = any(i.requires_grad for i in infos)
        if use_orig_params:
            self.flat_param = shard.requires_grad_(self.requires_grad)
            self._make_orig_params()
        else:
            self.flat_param = Parameter(shard, requires_grad=self.requires_grad)
            self.use_sharded_views()
        self.accumulated = None  # the unsharded gradient summed under no_sync()
        self.sync_grads = True
        self.regathered = None  # the whole flat parameter gathered again in backward (FULL_SHARD)
        self.backward_views = False  # the views installed for backward (pre-backward hook) are in place
        self.gathers = 0  # all-gathers made (forward and backward), for tests and curiosity

    # ---- the original parameters' sharded views (use_orig_params=True) ----------------------------------
    def shard_range(self, info):
        """The part of ``info``'s flattened parameter held by this rank: (start in the parameter, start in
        the shard, length); length 0 when this rank holds none of it."""
        lo = max(info.offset, self.shard_start)
        hi = min(info.offset + info.numel, self.shard_start + self.shard_numel)
        if hi <= lo:
            return 0, 0, 0
        return lo - info.offset, lo - self.shard_start, hi - lo

    def _make_orig_params(self):
        from ...nn import Parameter

        for info in self.infos:
            _, s, n = self.shard_range(info)
            info.orig = Parameter(self.flat_param.detach()[s:s + n], requires_grad=info.requires_grad)
        self.use_sharded_views()

    def use_sharded_views(self):
        """Outside forward: the original parameters (use_orig_params=True) or nothing (False: the gathered
        views are dropped so that their memory can go once autograd releases them)."""
        for info in self.infos:
            for module, name in [(info.module, info.name)] + info.aliases:
                if self.use_orig_params:
                    _set_attr(module, name, info.orig)
                else:
                    module._parameters.pop(name, None)
                    module.__dict__.pop(name, None)

    def views(self, full):
        """The original parameters as views of the whole flat parameter ``full``."""
        return tuple(full[i.offset:i.offset + i.numel].view(i.shape) for i in self.infos)

    def use_full_views(self, full, as_params=False, views=None):
        """Installs views of the whole flat parameter ``full`` (or the given ``views``) with the original
        shapes."""
        from ...nn import Parameter

        out = []
        for info, v in zip(self.infos, self.views(full) if views is None else views):
            if as_params:
                v = Parameter(v, requires_grad=info.requires_grad)
            out.append(v)
            for module, name in [(info.module, info.name)] + info.aliases:
                _set_attr(module, name, v)
        return out

    # ---- communication -----------------------------------------------------------------------------------
    def gather(self, shard, dtype):
        """The whole flat parameter (padded) in ``dtype``, from every rank's shard."""
        import strata
        from ... import distributed as dist

        self.gathers += 1
        src = shard.detach()
        if src.dtype != dtype:
            src = src.to(dtype)
        if not self.sharded:
            return src.clone() if src.dtype == shard.dtype else src
        full = strata.empty(self.padded_numel, dtype=dtype)
        dist.all_gather_into_tensor(full, src.contiguous(), group=self.shard_group)
        return full

    def reduce_grad(self, grad, owned=False):
        """Backward of the gather: the gradient of the whole flat parameter, averaged over the ranks, goes
        into the shard's gradient (or, under no_sync(), is added to the unsharded accumulator)."""
        import strata
        from ... import distributed as dist

        self.regathered = None  # every use of the views in this backward is done
        if self.backward_views:
            self.backward_views = False
            self.use_sharded_views()
        with strata.no_grad():
            fresh = owned or grad.dtype != self.reduce_dtype
            g = grad.to(self.reduce_dtype) if fresh else grad
            if not self.sync_grads:
                self.accumulated = g.clone() if self.accumulated is None else self.accumulated.add_(g)
                return
            if self.accumulated is not None:
                g = g + self.accumulated
                self.accumulated = None
                fresh = True
            g = g.contiguous()
            if self.sharded:
                out = strata.empty(self.shard_numel, dtype=self.reduce_dtype)
                dist.reduce_scatter_tensor(out, g, op=dist.ReduceOp.AVG, group=self.shard_group)
            else:
                out = g if fresh else g.clone()
                dist.all_reduce(out, op=dist.ReduceOp.AVG, group=self.shard_group)
            if self.replicate_group is not None:
                dist.all_reduce(out, op=dist.ReduceOp.AVG, group=self.replicate_group)
            if out.dtype != self.dtype:
                out = out.to(self.dtype)
            self.add_shard_grad(out)

    def add_shard_grad(self, g):
        """Adds the shard's gradient ``g`` to .grad of the flat parameter (or of each original parameter's
        slice when use_orig_params=True)."""
        if not self.use_orig_params:
            p = self.flat_param
            if p.grad is None:
                p.grad = g
            else:
                p.grad.add_(g)
            return
        for info in self.infos:
            if not info.requires_grad:
                continue
            _, s, n = self.shard_range(info)
            piece = g[s:s + n]
            if info.orig.grad is None:
                info.orig.grad = piece.clone()
            else:
                info.orig.grad.add_(piece)

    # ---- freeing after forward (FULL_SHARD) --------------------------------------------------------------
    def saved_tensor_hooks(self, view):
        """Hooks (pack, unpack) for the unit's forward: a tensor autograd saves that is a view of ``full`` is
        kept as its place in the flat parameter instead (so ``full`` can be freed when forward ends), and in
        backward it is rebuilt from the flat parameter gathered again, once per unit and backward."""
        ptr, dtype = view.untyped_storage().data_ptr(), view.dtype

        def pack(t):
            if t.untyped_storage().data_ptr() != ptr or t.dtype != dtype:
                return t
            return _SavedView(tuple(t.shape), tuple(t.stride()), t.storage_offset())

        def unpack(x):
            if not isinstance(x, _SavedView):
                return x
            if self.regathered is None:
                import strata
                with strata.no_grad():
                    self.regathered = self.gather(self.flat_param, self.compute_dtype)
            return self.regathered.as_strided(x.shape, x.stride, x.offset)

        return pack, unpack

    def shard_grad(self):
        """The shard's gradient as one tensor (zeros where there is none), or None when nothing has one."""
        import strata

        if not self.use_orig_params:
            return self.flat_param.grad
        if all(i.orig.grad is None for i in self.infos):
            return None
        g = strata.zeros(self.shard_numel, dtype=self.dtype)
        for info in self.infos:
            if info.orig.grad is not None:
                _, s, n = self.shard_range(info)
                g[s:s + n] = info.orig.grad.reshape(-1)
        return g

    def shard_grads(self):
        """The gradient tensors that make up this rank's share (for norms and clipping)."""
        if not self.use_orig_params:
            return [] if self.flat_param.grad is None else [self.flat_param.grad]
        return [i.orig.grad for i in self.infos if i.orig.grad is not None]
