"""OpInfos of the pooling, interpolation, transposed convolution and fold ops of decl/nn_more.def, with short
NumPy references (1-D cases; tests/python/test_nn_ops_more.py compares every dim count with torch)."""

import numpy as np

from .core import FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register


def _windows(x, k, s, p, d, fill, ceil_mode=False):
    """(..., L) -> (..., out, k) windows of the padded input (fill outside)."""
    n = x.shape[-1]
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    xp = np.concatenate([np.full(x.shape[:-1] + (p,), fill), x, np.full(x.shape[:-1] + (p + k * d + s,), fill)], -1)
    idx = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d
    return xp[..., idx], idx - p


def _max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    w, _ = _windows(x.astype(np.float64), kernel_size, stride or kernel_size, padding, dilation, -np.inf, ceil_mode)
    return w.max(-1).astype(x.dtype)


def _avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    s = stride or kernel_size
    w, pos = _windows(x.astype(np.float64), kernel_size, s, padding, 1, 0.0, ceil_mode)
    n = x.shape[-1]
    start = pos[:, 0]
    end = np.minimum(start + kernel_size, n + padding)
    div = (end - start) if count_include_pad else (np.minimum(end, n) - np.maximum(start, 0))
    return (w.sum(-1) / div).astype(x.dtype)


def _adaptive(x, out, fn):
    n = x.shape[-1]
    cols = [fn(x[..., (i * n) // out:-(-(i + 1) * n // out)].astype(np.float64), -1) for i in range(out)]
    return np.stack(cols, -1).astype(x.dtype)


def _nearest1d(x, size):
    n = x.shape[-1]
    scale = np.float32(n) / np.float32(size)
    idx = np.minimum(np.floor(np.arange(size, dtype=np.float32) * scale).astype(np.int64), n - 1)
    return x[..., idx]


def _linear1d(x, size, align_corners=False):
    n = x.shape[-1]
    o = np.arange(size, dtype=np.float64)
    if align_corners:
        src = o * ((n - 1) / (size - 1) if size > 1 else 0.0)
    else:
        src = np.maximum((o + 0.5) * (n / size) - 0.5, 0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = np.clip(src - i0, 0, 1)
    xd = x.astype(np.float64)
    return (xd[..., i0] * (1 - lam) + xd[..., i1] * lam).astype(x.dtype)


def _conv_transpose1d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    n, cin, length = x.shape
    coutg, k = w.shape[1], w.shape[2]
    out = (length - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
    full = np.zeros((n, coutg * groups, (length - 1) * stride + dilation * (k - 1) + 1 + output_padding + padding))
    cg = cin // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg].astype(np.float64)
        ws = w[g * cg:(g + 1) * cg].astype(np.float64)
        for i in range(length):
            for t in range(k):
                full[:, g * coutg:(g + 1) * coutg, i * stride + t * dilation] += xs[:, :, i] @ ws[:, :, t]
    y = full[:, :, padding:padding + out]
    if b is not None:
        y = y + b[:, None]
    return y.astype(x.dtype)


def _unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    kh, kw = kernel_size
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    cols = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dilation:i * dilation + stride * oh:stride,
                                  j * dilation:j * dilation + stride * ow:stride]
    return cols.reshape(n, c * kh * kw, oh * ow)


def _pixel_shuffle(x, r):
    n, c, h, w = x.shape
    return x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (r * r), h * r, w * r)


def pool_samples(dtype, rng):
    yield SampleInput((make_array((2, 3, 9), dtype, rng), 3), name="k3")
    yield SampleInput((make_array((3, 10), dtype, rng), 3, 2, 1), {"ceil_mode": True}, name="ceil")
    yield SampleInput((make_array((2, 2, 8), dtype, rng, noncontig=True), 2), name="noncontig")
    yield SampleInput((make_array((0, 2, 8), dtype, rng), 2), name="empty-batch")


def max_pool_samples(dtype, rng):
    yield from pool_samples(dtype, rng)
    yield SampleInput((make_array((2, 3, 11), dtype, rng), 3, 2, 1, 2), name="dilated")


def pool_errors(rng):
    x = np.ones((2, 3, 5), np.float32)
    yield ErrorInput((x, 7), match="Output size is too small")
    yield ErrorInput((x, 3, 1, 2), match="at most half")
    yield ErrorInput((np.ones((5,), np.float32), 3), match="2D or 3D")


def adaptive_samples(dtype, rng):
    yield SampleInput((make_array((2, 3, 10), dtype, rng), 4), name="down")
    yield SampleInput((make_array((3, 5), dtype, rng), 7), name="up")


def interp_samples(dtype, rng):
    yield SampleInput((make_array((2, 3, 5), dtype, rng),), {"size": 9}, name="up")
    yield SampleInput((make_array((1, 2, 9), dtype, rng),), {"size": 4}, name="down")


def linear_samples(dtype, rng):
    for s in interp_samples(dtype, rng):
        yield SampleInput(s.args, dict(s.kwargs, mode="linear"), s.name)
        yield SampleInput(s.args, dict(s.kwargs, mode="linear", align_corners=True), s.name + "-align")


def interp_errors(rng):
    yield ErrorInput((np.ones((2, 3, 4, 5), np.float32),), {"size": 0}, match="greater than 0")
    yield ErrorInput((np.ones((2, 3, 4, 5), np.float32),), {"size": 3, "scale_factor": 2}, error=ValueError,
                     match="only one of")


def conv_t_samples(dtype, rng):
    yield SampleInput((make_array((2, 4, 5), dtype, rng), make_array((4, 3, 3), dtype, rng),
                       make_array((3,), dtype, rng), 2, 1, 1), name="strided")
    yield SampleInput((make_array((1, 4, 6), dtype, rng), make_array((4, 1, 2), dtype, rng), None, 1, 0, 0, 2, 2),
                      name="groups-dilation")


def conv_t_errors(rng):
    yield ErrorInput((np.ones((2, 3, 5), np.float32), np.ones((4, 2, 3), np.float32)), match="to have 4 channels")
    yield ErrorInput((np.ones((2, 3, 5), np.float32), np.ones((3, 2, 3), np.float32), None, 1, 0, 1),
                     match="output padding must be smaller")


def unfold_samples(dtype, rng):
    yield SampleInput((make_array((2, 3, 5, 6), dtype, rng), (2, 3)), name="k23")
    yield SampleInput((make_array((1, 2, 6, 6), dtype, rng), (2, 2), 2, 1, 2), name="dilated")


def unfold_errors(rng):
    yield ErrorInput((np.ones((2, 3, 4, 5), np.float32), (7, 7)), match="must be at least one")


def shuffle_samples(dtype, rng):
    yield SampleInput((make_array((2, 8, 3, 4), dtype, rng), 2), name="r2")
    yield SampleInput((make_array((1, 9, 2, 2), dtype, rng), 3), name="r3")


def shuffle_errors(rng):
    yield ErrorInput((np.ones((2, 3, 4, 5), np.float32), 2), match="divisible by the square")


register(
    OpInfo("nn.functional.max_pool1d", ref=_max_pool1d, dtypes=FLOAT, samples=max_pool_samples, errors=pool_errors),
    OpInfo("nn.functional.avg_pool1d", ref=_avg_pool1d, dtypes=FLOAT, samples=pool_samples, errors=pool_errors),
    OpInfo("nn.functional.adaptive_avg_pool1d", ref=lambda x, o: _adaptive(x, o, np.mean), dtypes=FLOAT,
           samples=adaptive_samples),
    OpInfo("nn.functional.adaptive_max_pool1d", ref=lambda x, o: _adaptive(x, o, np.max), dtypes=FLOAT,
           samples=adaptive_samples),
    OpInfo("nn.functional.interpolate", ref=lambda x, size: _nearest1d(x, size), dtypes=FLOAT,
           samples=interp_samples, errors=interp_errors),
    OpInfo("nn.functional.interpolate", ref=lambda x, size, mode, align_corners=False: _linear1d(x, size,
                                                                                                align_corners),
           dtypes=FLOAT, samples=linear_samples),
    OpInfo("nn.functional.conv_transpose1d", ref=_conv_transpose1d, dtypes=FLOAT, samples=conv_t_samples,
           errors=conv_t_errors, tol={"float32": (1e-4, 1e-4)}),
    OpInfo("nn.functional.unfold", ref=_unfold, dtypes=FLOAT, samples=unfold_samples, errors=unfold_errors),
    OpInfo("nn.functional.pixel_shuffle", ref=_pixel_shuffle, dtypes=FLOAT, samples=shuffle_samples,
           errors=shuffle_errors),
)
