"""torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler: loss scaling when each rank holds a shard of
the gradients. As strata.amp.GradScaler, device="cuda" (torch's default) warns and disables itself on this
CPU-only build (scripts run unchanged, without scaling). Enabled (device="cpu"), step() unscales this rank's
gradients, all-reduces whether any rank found an inf or NaN, and skips the optimizer step on every rank if one
did; update() then halves the scale (backoff_factor), or multiplies it by growth_factor after growth_interval
steps without one."""

from ...amp import GradScaler

__all__ = ["ShardedGradScaler"]


class ShardedGradScaler(GradScaler):
    def __init__(self, device="cuda", init_scale=2.0**16, backoff_factor=0.5, growth_factor=2.0,
                 growth_interval=2000, enabled=True, process_group=None):
        super().__init__(device, init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
        from ... import distributed as dist

        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self._growth_factor, self._backoff_factor, self._growth_interval = growth_factor, backoff_factor, growth_interval
        self._growth_tracker = 0
        self._found_inf = False

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        import strata
        from ... import distributed as dist

        super().unscale_(optimizer)
        self._unscaled = True
        bad = 0.0
        with strata.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None and p.grad.numel() and not bool(strata.isfinite(p.grad).all()):
                        bad = 1.0
        flag = strata.tensor([bad])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.process_group)
        self._found_inf = bool(flag.item())

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if not getattr(self, "_unscaled", False):
            self.unscale_(optimizer)
        self._unscaled = False
        if self._found_inf:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif self._found_inf:
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._found_inf = False
