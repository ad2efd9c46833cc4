"""strata.nn.functional's pooling (1-D, 3-D, adaptive, unpooling, LP), transposed and 3-D convolution,
interpolation, pixel/channel shuffles and unfold/fold, with torch.nn.functional's signatures. The ops are
declared in src/ops/decl/nn_more.def; this module maps torch's argument conventions onto them and composes the
few functions without an op of their own (LP pooling, the shuffles)."""

import builtins
import math

from .. import _C

_ops = _C._ops

__all__ = [
    "max_pool1d", "max_pool3d", "max_pool1d_with_indices", "max_pool3d_with_indices", "avg_pool1d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d",
    "lp_pool3d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "interpolate", "upsample",
    "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "unfold",
    "fold",
]


def _tuple(x, n):
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x] * n


# ---- pooling -------------------------------------------------------------------------------

def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    out = _ops.max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return out if return_indices else out[0]


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    out = _ops.max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return out if return_indices else out[0]


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _ops.max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _ops.max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _ops.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _ops.avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _adaptive_size(input, output_size, k, name):
    """output_size as a list of k ints; None keeps the input's size along that dim."""
    if isinstance(output_size, builtins.int) or output_size is None:
        output_size = [output_size] * k
    output_size = list(output_size)
    if len(output_size) != k:
        raise ValueError(f"{name}: output_size must be an int or a tuple of {k}, got {output_size}")
    for i in range(k):
        if output_size[i] is None:
            output_size[i] = input.shape[input.dim() - k + i]
    return output_size


def adaptive_avg_pool1d(input, output_size):
    return _ops.adaptive_avg_pool1d(input, _adaptive_size(input, output_size, 1, "adaptive_avg_pool1d"))


def adaptive_avg_pool3d(input, output_size):
    return _ops.adaptive_avg_pool3d(input, _adaptive_size(input, output_size, 3, "adaptive_avg_pool3d"))


def adaptive_max_pool1d(input, output_size, return_indices=False):
    out = _ops.adaptive_max_pool1d(input, _adaptive_size(input, output_size, 1, "adaptive_max_pool1d"))
    return out if return_indices else out[0]


def adaptive_max_pool2d(input, output_size, return_indices=False):
    out = _ops.adaptive_max_pool2d(input, _adaptive_size(input, output_size, 2, "adaptive_max_pool2d"))
    return out if return_indices else out[0]


def adaptive_max_pool3d(input, output_size, return_indices=False):
    out = _ops.adaptive_max_pool3d(input, _adaptive_size(input, output_size, 3, "adaptive_max_pool3d"))
    return out if return_indices else out[0]


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool3d(input, output_size, True)


def _unpool_size(input, k, kernel_size, stride, padding, output_size):
    ks = _tuple(kernel_size, k)
    st = _tuple(stride if stride is not None else kernel_size, k)
    pd = _tuple(padding, k)
    default = [(input.shape[input.dim() - k + i] - 1) * st[i] - 2 * pd[i] + ks[i] for i in range(k)]
    if output_size is None:
        return default
    output_size = list(output_size)
    if len(output_size) == k + 2:
        output_size = output_size[2:]
    elif len(output_size) == k + 1 and input.dim() == k + 1:
        output_size = output_size[1:]
    if len(output_size) != k:
        raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} elements, but it has a "
                         f"length of '{len(output_size)}'")
    for i in range(k):
        lo = default[i] - st[i]
        hi = default[i] + st[i]
        if not lo < output_size[i] < hi:
            raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {i} must be between {lo} and {hi})')
    return output_size


def _max_unpool(input, indices, k, kernel_size, stride, padding, output_size):
    if input.dim() not in (k + 1, k + 2):
        raise RuntimeError(f"max_unpool{k}d: Expected {k + 1}D or {k + 2}D (batch mode) tensor for input, but got "
                           f"input of size {list(input.shape)}")
    size = _unpool_size(input, k, kernel_size, stride, padding, output_size)
    return _ops._pool_scatter(input, indices, size, False)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size)


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, k):
    from . import functional as F

    ks = _tuple(kernel_size, k)
    pool = {1: avg_pool1d, 2: F.avg_pool2d, 3: avg_pool3d}[k]
    out = pool(_ops.pow(input, norm_type), kernel_size, stride, 0, ceil_mode)
    # sign * relu(abs) keeps the sign of out (a negative mean of odd powers) and zeroes -0.
    out = _ops.mul(_ops.mul(_ops.sign(out), F.relu(_ops.abs(out))), math.prod(ks))
    return _ops.pow(out, 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 3)


# ---- convolution ---------------------------------------------------------------------------

def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _ops.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _ops.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _ops.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _ops.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


# ---- interpolation -------------------------------------------------------------------------

_MODE_DIMS = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
        align_corners = False
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got input with spatial "
                    f"dimensions of {spatial} and output size of {size}. Please provide input tensor in "
                    "(N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
            output_size = [builtins.int(s) for s in size]
        else:
            output_size = [builtins.int(size)] * dim
        scales = None
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                    f"spatial dimensions of {spatial} and scale_factor of shape {scale_factor}. Please provide "
                    "input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        output_size = [math.floor(float(spatial[i]) * scales[i]) for i in range(dim)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor or mode == "area":
        scales = None  # the kernel then derives the scale from the sizes
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported yet")
    if mode == "area":
        if dim == 1:
            return adaptive_avg_pool1d(input, output_size)
        if dim == 2:
            from . import functional as F
            return F.adaptive_avg_pool2d(input, output_size)
        if dim == 3:
            return adaptive_avg_pool3d(input, output_size)
    elif mode in _MODE_DIMS:
        need = _MODE_DIMS[mode]
        if input.dim() != need and input.dim() in (3, 4, 5):
            raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {need}D input")
    if mode in _MODE_DIMS or (mode in ("nearest", "nearest-exact") and 1 <= dim <= 3):
        s = (scales or []) + [None] * 3
        return _ops._interpolate(input, output_size, mode, align_corners, s[0], s[1], s[2])
    raise NotImplementedError(
        f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the modes: nearest | "
        f"linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- shuffles, unfold/fold -----------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):
    r = builtins.int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *b, c, h, w = input.shape
    if c % (r * r) != 0:
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(b)
    x = input.reshape(*b, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*b, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    r = builtins.int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *b, c, h, w = input.shape
    if h % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    n = len(b)
    x = input.reshape(*b, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*b, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    g = builtins.int(groups)
    if input.dim() < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    n, c, *rest = input.shape
    if c % g != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {g} groups.")
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(n, c, *rest)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    if input.dim() not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)")
    return _ops.im2col(input, _tuple(kernel_size, 2), _tuple(dilation, 2), _tuple(padding, 2), _tuple(stride, 2))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    if input.dim() not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {input.dim()}D)")
    return _ops.col2im(input, _tuple(output_size, 2), _tuple(kernel_size, 2), _tuple(dilation, 2),
                       _tuple(padding, 2), _tuple(stride, 2))
