"""torch.autograd.profiler: the older spelling of the profiler (strata.profiler underneath)."""

from ..profiler import record_function  # noqa: F401
from ..profiler import profile as _profile

__all__ = ["profile", "record_function"]


class profile(_profile):
    """``torch.autograd.profiler.profile(enabled=True, *, use_cuda=False, record_shapes=False, ...)``: the
    same recording as strata.profiler.profile; ``enabled=False`` records nothing."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, **kwargs):
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules, acc_events=acc_events)
        self.enabled = enabled

    def __enter__(self):
        return super().__enter__() if self.enabled else self

    def __exit__(self, *exc):
        return super().__exit__(*exc) if self.enabled else False
