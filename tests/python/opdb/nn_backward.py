"""OpInfos of the fused nn backward ops (decl/nn_backward.def), with float64 NumPy references. They are not
exported as strata.<name> (leading underscore) and torch has no such ops, so they are reached through
strata._C._ops and compare_dtype is off (test_autograd_fused.py checks the result dtypes)."""

import numpy as np

from .core import ALL_FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register

HALF_TOL = {"float16": (1e-2, 1e-2), "bfloat16": (8e-2, 8e-2)}


def _pair(v):
    return (v, v) if np.isscalar(v) else tuple(v)


def _conv2d_backward(g, x, w, stride, padding, dilation, groups, input_grad=True, weight_grad=True):
    dt = x.dtype
    g, x, w = (a.astype(np.float64) for a in (g, x, w))
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = g.shape[2], g.shape[3]
    og = o // groups
    # Top/left padding as given; bottom/right as much as the last window reads.
    bh = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - ph - h)
    bw = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - pw - wd)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, bh), (pw, bw)))
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    for i in range(kh):
        for j in range(kw):
            rs = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cs = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            for gr in range(groups):
                go, gc = slice(gr * og, (gr + 1) * og), slice(gr * cg, (gr + 1) * cg)
                gw[go, :, i, j] = np.einsum("nohw,nchw->oc", g[:, go], xp[:, gc, rs, cs])
                gxp[:, gc, rs, cs] += np.einsum("nohw,oc->nchw", g[:, go], w[go, :, i, j])
    gx = gxp[:, :, ph:ph + h, pw:pw + wd]
    gb = g.sum(axis=(0, 2, 3))
    if not input_grad:
        gx = np.zeros_like(gx)
    if not weight_grad:
        gw = np.zeros_like(gw)
    return [gx.astype(dt), gw.astype(dt), gb.astype(dt)]


def conv_samples(dtype, rng):
    m = lambda *s, **k: make_array(s, dtype, rng, **k)  # noqa: E731
    yield SampleInput((m(2, 4, 5, 5), m(2, 3, 5, 5), m(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1), name="3x3 pad 1")
    # stride (2, 1), padding (1, 0), dilation (2, 1), 2 groups: output 3 x 5.
    yield SampleInput((m(2, 6, 3, 5), m(2, 4, 7, 6), m(6, 2, 3, 2), [2, 1], [1, 0], [2, 1], 2), name="strided groups")
    yield SampleInput((m(2, 4, 3, 3), m(2, 3, 6, 6), m(4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1),
                      name="stride 2 pad 1")
    yield SampleInput((m(1, 2, 4, 4), m(1, 3, 4, 4), m(2, 3, 1, 1), [1, 1], [0, 0], [1, 1], 1), name="1x1")
    yield SampleInput((m(2, 4, 5, 5, noncontig=True), m(2, 3, 5, 5, noncontig=True), m(4, 3, 3, 3), [1, 1], [1, 1],
                       [1, 1], 1), name="noncontig")
    yield SampleInput((m(0, 4, 5, 5), m(0, 3, 5, 5), m(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1), name="empty batch")
    yield SampleInput((m(2, 4, 5, 5), m(2, 3, 5, 5), m(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1),
                      {"input_grad": False}, name="no input grad")
    yield SampleInput((m(2, 4, 5, 5), m(2, 3, 5, 5), m(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1),
                      {"weight_grad": False}, name="no weight grad")


def conv_errors(rng):
    f = np.ones
    yield ErrorInput((f((4, 5, 5), np.float32), f((3, 5, 5), np.float32), f((4, 3, 3, 3), np.float32), [1, 1],
                      [1, 1], [1, 1], 1), match="4-D")
    yield ErrorInput((f((2, 4, 5, 5), np.float32), f((2, 3, 5, 5), np.float32), f((4, 2, 3, 3), np.float32),
                      [1, 1], [1, 1], [1, 1], 1), match="shapes do not match")
    yield ErrorInput((f((2, 4, 5, 5), np.float32), f((2, 3, 5, 5), np.float32), f((4, 3, 3, 3), np.float32),
                      [0, 1], [1, 1], [1, 1], 1), match="stride")
    yield ErrorInput((f((2, 4, 5, 5), np.float32), f((2, 3, 5, 5), np.float64), f((4, 3, 3, 3), np.float32),
                      [1, 1], [1, 1], [1, 1], 1), match="dtype")


def _layer_norm_backward(go, x, ns, w=None, eps=1e-5):
    dt = x.dtype
    if x.size == 0:
        shape = tuple(ns)
        return [np.zeros(x.shape, dt), np.zeros(shape, dt), np.zeros(shape, dt)]
    go, x = go.astype(np.float64), x.astype(np.float64)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    gxhat = go * w.astype(np.float64) if w is not None else go
    gx = rstd * (gxhat - gxhat.mean(axis=axes, keepdims=True) - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
    lead = tuple(range(x.ndim - len(ns)))
    gw = (go * xhat).sum(axis=lead) if lead else go * xhat
    gb = go.sum(axis=lead) if lead else go
    return [gx.astype(dt), np.asarray(gw).astype(dt), np.asarray(gb).astype(dt)]


def layer_norm_samples(dtype, rng):
    m = lambda *s, **k: make_array(s, dtype, rng, **k)  # noqa: E731
    yield SampleInput((m(3, 5), m(3, 5), [5], m(5)), name="2d weight")
    yield SampleInput((m(2, 3, 4), m(2, 3, 4), [3, 4], m(3, 4)), {"eps": 1e-3}, name="2 dims eps")
    yield SampleInput((m(4, 6), m(4, 6), [6]), name="no weight")
    yield SampleInput((m(4, 6, noncontig=True), m(4, 6, noncontig=True), [6], m(6)), name="noncontig")
    yield SampleInput((m(7), m(7), [7], m(7)), name="1-d")
    yield SampleInput((m(0, 6), m(0, 6), [6], m(6)), name="empty rows")
    yield SampleInput((m(3, 0), m(3, 0), [0], m(0)), name="empty row")


def layer_norm_errors(rng):
    f = np.ones
    yield ErrorInput((f((3, 5), np.float32), f((3, 5), np.float32), [4]), match="normalized_shape")
    yield ErrorInput((f((3, 4), np.float32), f((3, 5), np.float32), [5]), match="size")
    yield ErrorInput((f((3, 5), np.float32), f((3, 5), np.float32), [5], f(4, np.float32)), match="weight")
    yield ErrorInput((f((3, 5), np.int64), f((3, 5), np.int64), [5]), match="floating")


register(
    OpInfo("_C._ops._conv2d_backward", ref=_conv2d_backward, dtypes=ALL_FLOAT, samples=conv_samples, errors=conv_errors,
           tol=HALF_TOL, compare_dtype=False),
    OpInfo("_C._ops._layer_norm_backward", ref=_layer_norm_backward, dtypes=ALL_FLOAT, samples=layer_norm_samples,
           errors=layer_norm_errors, tol=HALF_TOL, compare_dtype=False),
)
