"""BatchNorm1d/2d, LayerNorm, RMSNorm, GroupNorm."""

import numbers

from ... import _C
from .. import functional as F
from .. import init
from ._util import new_param
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "RMSNorm", "GroupNorm"]


def _strata():
    import importlib

    return importlib.import_module(__name__.split(".")[0])


def _register_affine(module, enabled, shape, bias, device, dtype):
    """The learnable scale and shift of a norm layer (torch's names): weight and
    bias of `shape`, or None for both when not `enabled`, bias None unless `bias`."""
    if enabled:
        module.weight = new_param(shape, device, dtype)
        if bias:
            module.bias = new_param(shape, device, dtype)
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module):
    """Scale 1, shift 0: every norm layer's initial affine transform is the identity."""
    if module.weight is not None:
        init.ones_(module.weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)



class _NormBase(Module):
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        st = _strata()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, affine, (num_features,), bias, device, dtype)
        if self.track_running_stats:
            self.register_buffer("running_mean", st.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", st.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", st.tensor(0, dtype=_C.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # State dicts without version metadata (strata's, and old torch ones) may lack num_batches_tracked.
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = self.num_batches_tracked if self.num_batches_tracked is not None else \
                    _strata().tensor(0, dtype=_C.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: a cumulative moving average.
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_stats else None,
                            self.running_var if use_stats else None, self.weight, self.bias, bn_training, factor,
                            self.eps)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics would be reduced across processes. Strata has no process groups yet
    (strata.distributed), so there is one process and this is ordinary batch norm over the local batch, as
    torch's is when no process group is initialised."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Returns `module` with every BatchNorm*D replaced by a SyncBatchNorm sharing its parameters and
        buffers."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


def _norm_shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _register_affine(self, elementwise_affine, self.normalized_shape, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = new_param(self.normalized_shape, device, dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, affine, (num_channels,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, " \
               f"bias={self.bias is not None}"
