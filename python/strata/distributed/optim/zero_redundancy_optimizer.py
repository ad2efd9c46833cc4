"""ZeroRedundancyOptimizer: each rank keeps the optimizer state of its share of the parameters only.

The parameters are partitioned across the group's ranks (greedily by size, largest first, per parameter group,
as torch does). step() runs the wrapped optimizer on this rank's share (the gradients must already be the same
on every rank: DDP's), then every share is broadcast from its owner, one message per owner and dtype. The
hyper-parameters of `param_groups` (which learning-rate schedulers change) are passed on to the wrapped
optimizer before each step. state_dict() needs consolidate_state_dict(to) first, on every rank, and is then
available on rank `to`."""

from ...optim.optimizer import Optimizer

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        from ... import distributed as dist

        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer(overlap_with_ddp=True) is not implemented in Strata")
        if not dist.is_initialized():
            raise ValueError("Default process group has not been initialized, please make sure to call "
                             "init_process_group.")
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.world_size = dist.get_world_size(self.process_group)
        self.rank = dist.get_rank(self.process_group)
        self._optimizer_class = optimizer_class
        self._consolidated = None
        super().__init__(params, defaults)
        self._owner = {}
        local_groups = []
        for group in self.param_groups:
            load = [0] * self.world_size
            mine = []
            for p in sorted(group["params"], key=lambda t: -t.numel()):
                r = min(range(self.world_size), key=lambda k: load[k])
                load[r] += p.numel()
                self._owner[id(p)] = r
                if r == self.rank:
                    mine.append(p)
            local_groups.append(dict({k: v for k, v in group.items() if k != "params"}, params=mine))
        # The wrapped optimizer gets this rank's share (a group may be empty here: kept so that indices match).
        self.optim = optimizer_class([g for g in local_groups if g["params"]] or [{"params": []}], **defaults) \
            if any(g["params"] for g in local_groups) else None
        self._local_groups = local_groups

    def _sync_hyperparameters(self):
        if self.optim is None:
            return
        idx = [i for i, g in enumerate(self._local_groups) if g["params"]]
        for i, lg in zip(idx, self.optim.param_groups):
            for k, v in self.param_groups[i].items():
                if k != "params":
                    lg[k] = v

    def step(self, closure=None):
        import strata
        from ... import distributed as dist

        self._sync_hyperparameters()
        loss = None
        if self.optim is not None:
            loss = self.optim.step(closure) if closure is not None else self.optim.step()
        elif closure is not None:
            with strata.enable_grad():
                loss = closure()
        with strata.no_grad():
            for owner in range(self.world_size):
                by_dtype = {}
                for group in self.param_groups:
                    for p in group["params"]:
                        if self._owner[id(p)] == owner and p.numel():
                            by_dtype.setdefault(p.dtype, []).append(p)
                for ps in by_dtype.values():
                    flat = strata.cat([p.detach().reshape(-1) for p in ps])
                    dist.broadcast(flat, src=dist.get_global_rank(self.process_group, owner),
                                   group=self.process_group)
                    if owner != self.rank:
                        off = 0
                        for p in ps:
                            p.copy_(flat[off:off + p.numel()].view(p.shape))
                            off += p.numel()
        return loss

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.detach_().zero_() if hasattr(p.grad, "detach_") else p.grad.zero_()

    def _global_index(self):
        """Parameter -> its index in the order of param_groups (the same on every rank)."""
        return {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}

    def consolidate_state_dict(self, to=0):
        """Collective: gathers every rank's share of the optimizer state on rank `to`."""
        from ... import distributed as dist

        local = self.optim.state_dict() if self.optim is not None else None
        index = self._global_index()
        ids = [[index[id(p)] for p in g["params"]] for g in self._local_groups if g["params"]]
        gathered = [None] * self.world_size if self.rank == to else None
        dist.gather_object((local, ids), gathered, dst=dist.get_global_rank(self.process_group, to),
                           group=self.process_group)
        self._consolidated = gathered

    def state_dict(self):
        if self._consolidated is None:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please call "
                               "`consolidate_state_dict(to)` on all ranks beforehand if you meant to save the "
                               "global state.")
        index = self._global_index()
        state = {}
        for entry in self._consolidated:
            if entry is None or entry[0] is None:
                continue
            local, ids = entry
            flat_ids = [i for g in ids for i in g]
            for k, st in local["state"].items():
                # the local optimizer numbers its parameters 0.. in its own group order
                state[flat_ids[k]] = st
        groups = []
        for g in self.param_groups:
            groups.append(dict({k: v for k, v in g.items() if k != "params"},
                               params=[index[id(p)] for p in g["params"]]))
        return {"state": state, "param_groups": groups}
