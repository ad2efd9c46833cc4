"""strata.nn.functional's pooling (1-D, 3-D, adaptive, unpooling, LP), transposed and 3-D convolution,
interpolation, pixel/channel shuffles, unfold/fold, grid_sample/affine_grid and embedding_bag, with
torch.nn.functional's signatures. The ops are declared in src/ops/decl/nn_more.def; this module maps torch's
argument conventions onto them and composes the functions without an op of their own (LP pooling, the shuffles,
grid_sample, affine_grid, embedding_bag) from differentiable ops."""

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
    "fold", "grid_sample", "affine_grid", "embedding_bag",
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
    from .._settings import _alert_not_deterministic
    _alert_not_deterministic(f"max_unpooling{max(k, 2)}d_forward_out")  # torch's name; 1d runs as 2d
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
        if mode not in ("bilinear", "bicubic") or input.dim() != 4:
            raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D "
                             "tensor as input")
        mode_op = mode + "-aa"
    else:
        mode_op = mode
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
        return _ops._interpolate(input, output_size, mode_op, align_corners, s[0], s[1], s[2])
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


# ---- grid_sample, affine_grid ----------------------------------------------------------------

def _st():
    from .functional import _strata
    return _strata()


def _unnormalize(coord, size, align_corners):
    """Normalized [-1, 1] coordinates -> pixel coordinates (torch's grid_sampler_unnormalize)."""
    if align_corners:
        return _ops.mul(_ops.add(coord, 1), (size - 1) / 2.0)
    return _ops.div(_ops.sub(_ops.mul(_ops.add(coord, 1), size), 1), 2.0)


def _fold_coord(coord, size, padding_mode, align_corners):
    """Pixel coordinates folded (reflection) or clipped (border) into the input, as torch's padding modes."""
    if padding_mode == "border":
        return _ops.clamp(coord, 0, size - 1)
    if padding_mode == "reflection":
        lo, hi = (0.0, 2.0 * (size - 1)) if align_corners else (-1.0, 2.0 * size - 1)
        if lo == hi:
            return _ops.mul(coord, 0)
        mn, span = lo / 2, (hi - lo) / 2
        a = _ops.abs(_ops.sub(coord, mn))
        extra = _ops.fmod(a, span)
        flips = _ops.floor(_ops.div(a, span)).detach()
        even = _ops.eq(_ops.remainder(flips, 2), 0)
        coord = _st().where(even, _ops.add(extra, mn), _ops.add(_ops.sub(span, extra), mn))
        return _ops.clamp(coord, 0, size - 1)
    return coord


def _grid_coord(coord, size, padding_mode, align_corners):
    return _fold_coord(_unnormalize(coord, size, align_corners), size, padding_mode, align_corners)


def _cubic_weights(t):
    """Keys' cubic convolution weights (A = -0.75, as torch's bicubic) of the 4 taps around a fraction t."""
    a = -0.75

    def near(x):  # |x| <= 1
        return _ops.add(_ops.mul(_ops.mul(_ops.sub(_ops.mul(x, a + 2), a + 3), x), x), 1)

    def far(x):  # 1 < |x| < 2
        return _ops.sub(_ops.mul(_ops.add(_ops.mul(_ops.sub(_ops.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)

    return [far(_ops.add(t, 1)), near(t), near(_ops.add(_ops.neg(t), 1)), far(_ops.add(_ops.neg(t), 2))]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if input.dim() != grid.dim() or input.dim() not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but "
                           f"got grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and input.dim() != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    align_corners = builtins.bool(align_corners)
    st = _st()
    k = input.dim() - 2
    n, c = input.shape[0], input.shape[1]
    sizes = list(input.shape[2:])  # (D,) H, W
    out_sp = list(grid.shape[1:-1])
    npos = math.prod(out_sp)
    # grid[..., 0] indexes W, grid[..., 1] H, grid[..., 2] D: coords[i] is the pixel coordinate along sizes[i].
    coords = [_grid_coord(grid[..., k - 1 - i], sizes[i], padding_mode, align_corners) for i in range(k)]
    flat = input.reshape(n, c, math.prod(sizes))

    def tap(corner, weight):
        # corner holds integral coordinates per dim; taps outside the input read 0 (padding_mode='zeros').
        valid = None
        lin = None
        for i, ci in enumerate(corner):
            ok = _ops.logical_and(_ops.ge(ci, 0), _ops.le(ci, sizes[i] - 1))
            valid = ok if valid is None else _ops.logical_and(valid, ok)
            cl = _ops.clamp(ci, 0, sizes[i] - 1)
            lin = cl if lin is None else _ops.add(_ops.mul(lin, sizes[i]), cl)
        idx = lin.to(st.int64).reshape(n, 1, npos).expand(n, c, npos)
        vals = flat.gather(2, idx).reshape(n, c, *out_sp)
        return _ops.mul(vals, _ops.mul(weight, valid).unsqueeze(1))

    if mode == "bicubic":
        # 4 x 4 taps around the unfolded coordinate; each tap is folded into the input by the padding mode.
        ux = _unnormalize(grid[..., 0], sizes[1], align_corners)
        uy = _unnormalize(grid[..., 1], sizes[0], align_corners)
        x0 = _ops.floor(ux).detach()
        y0 = _ops.floor(uy).detach()
        wx = _cubic_weights(_ops.sub(ux, x0))
        wy = _cubic_weights(_ops.sub(uy, y0))
        out = None
        for i in range(4):
            yi = _fold_coord(_ops.add(y0, i - 1), sizes[0], padding_mode, align_corners).detach()
            for j in range(4):
                xj = _fold_coord(_ops.add(x0, j - 1), sizes[1], padding_mode, align_corners).detach()
                t = tap([_ops.trunc(yi), _ops.trunc(xj)], _ops.mul(wy[i], wx[j]))
                out = t if out is None else _ops.add(out, t)
        return out
    if mode == "nearest":
        # The weight 1 stays connected to the grid so that the grid gets its (zero) gradient, as in torch.
        one = _ops.add(_ops.mul(grid.sum(-1), 0), 1)
        return tap([_ops.round(ci).detach() for ci in coords], one)
    lo = [_ops.floor(ci).detach() for ci in coords]
    hi = [_ops.add(li, 1) for li in lo]
    out = None
    for bits in range(1 << k):
        corner, weight = [], None
        for i in range(k):
            # The weight of the low corner is (hi - x), of the high one (x - lo), as torch forms them.
            up = (bits >> (k - 1 - i)) & 1
            corner.append(hi[i] if up else lo[i])
            f = _ops.sub(coords[i], lo[i]) if up else _ops.sub(hi[i], coords[i])
            weight = f if weight is None else _ops.mul(weight, f)
        t = tap(corner, weight)
        out = t if out is None else _ops.add(out, t)
    return out


def _base_coords(num, align_corners, like):
    st = _st()
    if num > 1:
        base = st.linspace(-1, 1, num, dtype=like.dtype, device=like.device)
    else:
        base = st.zeros(1, dtype=like.dtype, device=like.device)
    if not align_corners:
        base = _ops.mul(base, (num - 1) / num)
    return base


def affine_grid(theta, size, align_corners=None):
    align_corners = builtins.bool(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [builtins.int(s) for s in size]
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"{list(theta.shape)}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"{list(theta.shape)}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise ValueError(f"Expected theta's batch size {theta.shape[0]} to match size[0] = {size[0]}")
    st = _st()
    k = len(spatial)
    # Coordinates (x, y[, z], 1) of every output position; x runs along the last dim.
    axes = []
    for i, num in enumerate(reversed(spatial)):
        shape = [1] * k
        shape[k - 1 - i] = num
        axes.append(_base_coords(num, align_corners, theta).reshape(shape).expand(*spatial))
    axes.append(st.ones(*spatial, dtype=theta.dtype, device=theta.device))
    base = st.stack(axes, -1).reshape(1, -1, k + 1)
    grid = st.matmul(base, theta.transpose(1, 2))
    return grid.reshape(size[0], *spatial, k)


# ---- embedding_bag ---------------------------------------------------------------------------

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    st = _st()
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      f"on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({tuple(per_sample_weights.shape)}) is not "
                             f"None, then it must have the same shape as the input ({tuple(input.shape)})")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type Tensor")
        b, length = input.shape
        input = input.reshape(-1)
        # bags + 1 boundaries: b bags of `length` indices each.
        bounds = (st.arange(0, b * length + 1, length, device=input.device) if length
                  else st.zeros(b + 1, dtype=st.int64, device=input.device))
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        if offsets.numel() and offsets.device.type != "meta" and builtins.int(offsets[0]) != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                               f"position 0. However, got {builtins.int(offsets[0])}")
        if include_last_offset:
            bounds = offsets if offsets.numel() else st.zeros(1, dtype=st.int64, device=offsets.device)
        else:
            # The last bag ends at the end of input.
            bounds = st.cat([offsets.to(st.int64), st.tensor([input.numel()], dtype=st.int64, device=offsets.device)])
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx = padding_idx % num
    if max_norm is not None:
        with st.no_grad():
            _ops.embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    # One C++ pass per bag (_embedding_bag in src/ops/decl/nn.def), differentiable for weight and
    # per_sample_weights.
    out, _, _ = _ops._embedding_bag(weight, input, bounds, ("sum", "mean", "max").index(mode), per_sample_weights,
                                    -1 if padding_idx is None else padding_idx, bool(scale_grad_by_freq))
    return out


