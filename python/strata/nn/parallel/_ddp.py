"""strata.nn.parallel.DistributedDataParallel (torch's DDP, over a strata.distributed process group).

At construction the parameters and buffers are broadcast from rank 0 (coalesced per dtype). Gradients are
all-reduced in buckets of about `bucket_cap_mb` (the parameters in reverse order, as backward produces them):
a hook on each parameter copies its gradient (the accumulated .grad plus this backward's, so no_sync()
accumulation works) into its bucket's flat buffer, and once every parameter of a bucket has reported, the bucket's
all-reduce starts asynchronously on the communication thread while backward goes on. Buckets start in index order
on every rank. When backward returns (a post-accumulate-grad hook), the remaining buckets start (parameters that
got no gradient count as zeros: find_unused_parameters), every bucket is waited for, averaged over the group, and
written to .grad. Buffers are broadcast from rank 0 before each forward (broadcast_buffers).

gradient_as_bucket_view and static_graph are accepted; .grad is a copy of the bucket's slice either way."""

import contextlib

from ..modules.module import Module

__all__ = ["DistributedDataParallel"]


class _Bucket:
    def __init__(self, params, dtype):
        import strata

        self.params = params
        self.numel = sum(p.numel() for p in params)
        self.flat = strata.zeros(self.numel, dtype=dtype)
        self.offsets = {}
        off = 0
        for p in params:
            self.offsets[id(p)] = off
            off += p.numel()
        self.ready = set()
        self.work = None

    def slot(self, p):
        off = self.offsets[id(p)]
        return self.flat[off:off + p.numel()]


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None, mixed_precision=None,
                 device_mesh=None):
        super().__init__()
        from ... import distributed as dist
        from . import _check_no_devices

        _check_no_devices("DistributedDataParallel", device_ids)
        if not dist.is_initialized():
            raise ValueError("Default process group has not been initialized, please make sure to call "
                             "init_process_group.")
        self.module = module
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.device_ids = None
        self.output_device = None
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        seen = set()
        self._params = []
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._params.append(p)
        if init_sync:
            self._sync(list(module.parameters()) + list(module.buffers()))
        self._buckets = self._make_buckets()
        self._where = {id(p): b for b in self._buckets for p in b.params}
        self._active = False  # this backward reduces gradients
        self._next = 0
        self._hooks = []
        for p in self._params:
            self._hooks.append(p.register_hook(self._grad_hook(p)))
            self._hooks.append(p.register_post_accumulate_grad_hook(self._after_backward))

    # ---- set-up --------------------------------------------------------------------------------------------
    def _sync(self, tensors):
        """Broadcast from rank 0, one message per dtype."""
        import strata
        from ... import distributed as dist

        by_dtype = {}
        for t in tensors:
            if t.numel():
                by_dtype.setdefault(t.dtype, []).append(t)
        with strata.no_grad():
            for ts in by_dtype.values():
                flat = strata.cat([t.detach().reshape(-1) for t in ts])
                dist.broadcast(flat, src=dist.get_global_rank(self.process_group, 0), group=self.process_group)
                off = 0
                for t in ts:
                    t.copy_(flat[off:off + t.numel()].view(t.shape))
                    off += t.numel()

    def _make_buckets(self):
        buckets, cur, size = [], [], 0
        for p in reversed(self._params):
            nbytes = p.numel() * p.element_size()
            if cur and (size + nbytes > self.bucket_bytes_cap or p.dtype != cur[0].dtype):
                buckets.append(_Bucket(cur, cur[0].dtype))
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            buckets.append(_Bucket(cur, cur[0].dtype))
        return buckets

    # ---- forward ------------------------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        import strata

        if self.broadcast_buffers and self.require_forward_param_sync:
            bufs = list(self.module.buffers())
            if bufs:
                self._sync(bufs)
        self._active = strata.is_grad_enabled() and self.require_backward_grad_sync
        self._next = 0
        for b in self._buckets:
            b.ready.clear()
            b.work = None
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally in .grad; the first backward after the block reduces the sums."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ---- backward -----------------------------------------------------------------------------------------
    def _grad_hook(self, p):
        def hook(grad):
            if not self._active:
                return None
            import strata

            b = self._where[id(p)]
            with strata.no_grad():
                slot = b.slot(p)
                if id(p) in b.ready:  # a second gradient for the same parameter in one backward
                    slot.add_(grad.reshape(-1))
                else:
                    g = grad.reshape(-1)
                    slot.copy_(g if p.grad is None else p.grad.reshape(-1) + g)
                    b.ready.add(id(p))
            self._launch_ready()
            return None

        return hook

    def _launch_ready(self, force=False):
        from ... import distributed as dist
        import strata

        while self._next < len(self._buckets):
            b = self._buckets[self._next]
            if len(b.ready) < len(b.params):
                if not force:
                    return
                with strata.no_grad():
                    for p in b.params:
                        if id(p) not in b.ready:
                            s = b.slot(p)
                            s.copy_(p.grad.reshape(-1)) if p.grad is not None else s.zero_()
                            b.ready.add(id(p))
            b.work = dist.all_reduce(b.flat, group=self.process_group, async_op=True)
            self._next += 1

    def _after_backward(self, _param):
        if not self._active:
            return
        self._active = False
        import strata
        from ... import distributed as dist

        self._launch_ready(force=True)
        n = dist.get_world_size(self.process_group)
        with strata.no_grad():
            for b in self._buckets:
                b.work.wait()
                for p in b.params:  # the average, written in one pass
                    v = b.slot(p).view(p.shape)
                    if p.grad is None:
                        p.grad = v.div(n)
                    else:
                        strata.div(v, n, out=p.grad)

    # ---- torch's other entry points -----------------------------------------------------------------------
    def _set_static_graph(self):
        self.static_graph = True

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("DistributedDataParallel.register_comm_hook is not implemented in Strata yet")

    @contextlib.contextmanager
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        if enable:
            raise NotImplementedError("DistributedDataParallel.join (uneven inputs) is not implemented in Strata yet")
        yield
