"""OpInfos of the recurrent layer ops (decl/rnn.def) and their fused backwards, with float64 NumPy references of one
layer in one direction.
The ops are reached through strata._C._ops (leading underscore, no torch counterpart, so compare_dtype is off).
The references return [output, hy(, cy)]: the workspace the ops also return is internal and not compared (the
comparison stops at the shorter list). Their gradients are checked against torch in test_rnn.py (the opdb
gradcheck's size limit leaves these ops out: every sample has more elements than it takes).
"""

import numpy as np

from .core import FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _reference(cell, x, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse):
    dt = x.dtype
    f64 = [None if a is None else a.astype(np.float64) for a in (x, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr)]
    x, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr = f64
    packed = batch_sizes is not None
    if packed:
        sizes = [int(s) for s in batch_sizes]
        data = x
    else:
        sizes = [x.shape[1]] * x.shape[0]
        data = x.reshape(-1, x.shape[-1])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int) if sizes else []
    G = w_ih.shape[0]
    b_ih = np.zeros(G) if b_ih is None else b_ih
    b_hh = np.zeros(G) if b_hh is None else b_hh
    h, c = hx.copy(), None if cx is None else cx.copy()
    out = np.zeros((data.shape[0], hx.shape[1]))
    steps = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
    for t in steps:
        nb, off = sizes[t], offsets[t]
        gi = data[off:off + nb] @ w_ih.T + b_ih
        gh = h[:nb] @ w_hh.T + b_hh
        if cell == "lstm":
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            c[:nb] = _sigmoid(f) * c[:nb] + _sigmoid(i) * np.tanh(g)
            hn = _sigmoid(o) * np.tanh(c[:nb])
            h[:nb] = hn if w_hr is None else hn @ w_hr.T
        elif cell == "gru":
            ir, iz, inn = np.split(gi, 3, axis=1)
            hr, hz, hn = np.split(gh, 3, axis=1)
            r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
            n = np.tanh(inn + r * hn)
            h[:nb] = (1 - z) * n + z * h[:nb]
        else:
            pre = gi + gh
            h[:nb] = np.tanh(pre) if cell == "tanh" else np.maximum(pre, 0)
        out[off:off + nb] = h[:nb]
    if not packed:
        out = out.reshape(x.shape[0], x.shape[1], -1)
    res = [out.astype(dt), h.astype(dt)]
    if c is not None:
        res.append(c.astype(dt))
    return res


def _lstm_ref(x, hx, cx, w_ih, w_hh, b_ih=None, b_hh=None, w_hr=None, batch_sizes=None, reverse=False):
    return _reference("lstm", x, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse)


def _single_ref(cell):
    def ref(x, hx, w_ih, w_hh, b_ih=None, b_hh=None, batch_sizes=None, reverse=False):
        return _reference(cell, x, hx, None, w_ih, w_hh, b_ih, b_hh, None, batch_sizes, reverse)
    return ref


# (T, B, I, H) padded; packed: batch sizes over N rows.
_PACKED = np.array([3, 2, 2, 1], dtype=np.int64)


def _samples(cell):
    gates = {"lstm": 4, "gru": 3, "tanh": 1, "relu": 1}[cell]

    def gen(dtype, rng):
        T, B, I, H = 4, 3, 5, 6

        def arr(*shape, **kw):
            return make_array(shape, dtype, rng, low=-1.0, high=1.0, **kw)

        def weights(P):
            return arr(gates * H, I), arr(gates * H, P), arr(gates * H), arr(gates * H)

        for reverse in (False, True):
            for packed in (False, True):
                projs = (0, 3) if cell == "lstm" else (0,)
                for P in projs:
                    out = P or H
                    x = arr(int(_PACKED.sum()), I) if packed else arr(T, B, I)
                    w_ih, w_hh, b_ih, b_hh = weights(out)
                    hx = arr(B, out)
                    state = (hx, arr(B, H)) if cell == "lstm" else (hx,)
                    kwargs = {"reverse": reverse}
                    if packed:
                        kwargs["batch_sizes"] = _PACKED
                    if P:
                        kwargs["w_hr"] = arr(P, H)
                    yield SampleInput((x,) + state + (w_ih, w_hh, b_ih, b_hh), kwargs,
                                      name=f"reverse={reverse} packed={packed} proj={P}")
        # No biases, a non-contiguous input, a single step.
        w_ih, w_hh, _, _ = weights(H)
        state = (arr(B, H), arr(B, H)) if cell == "lstm" else (arr(B, H),)
        yield SampleInput((arr(T, B, I, noncontig=True),) + state + (w_ih, w_hh), name="no bias, strided input")
        yield SampleInput((arr(1, B, I),) + state + weights(H), name="one step")
    return gen


def _errors(cell, with_c):
    gates = {"lstm": 4, "gru": 3, "tanh": 1, "relu": 1}[cell]
    op = {"lstm": "_lstm_layer", "gru": "_gru_layer", "tanh": "_rnn_tanh_layer", "relu": "_rnn_relu_layer"}[cell]

    def gen(rng):
        H = 4

        def arr(*shape):
            return make_array(shape, "float32", rng)

        def state(B):
            return (arr(B, H), arr(B, H)) if with_c else (arr(B, H),)

        w = (arr(gates * H, 3), arr(gates * H, H))
        yield ErrorInput((arr(2, 2, 5),) + state(2) + w, error=RuntimeError,
                         match=rf"{op}: input.size\(-1\) must be equal to input_size. Expected 3, got 5")
        yield ErrorInput((arr(2, 2, 3),) + state(3) + w, error=RuntimeError, match=rf"{op}: expected hx of shape")
        yield ErrorInput((arr(2, 3),) + state(2) + w, error=RuntimeError,
                         match=rf"{op}: expected input of shape \(seq_len, batch, input_size\)")
        yield ErrorInput((arr(2, 2, 3),) + state(2) + (arr(gates * H * 3), w[1]), error=RuntimeError,
                         match=rf"{op}: expected w_ih of shape")
        yield ErrorInput((arr(2, 2, 3),) + state(2) + (w[0], arr(gates * H, H + 1)), error=RuntimeError,
                         match=rf"{op}: expected w_hh of shape")
        yield ErrorInput((arr(4, 3),) + state(2) + w, {"batch_sizes": np.array([1, 3], dtype=np.int64)},
                         error=RuntimeError, match=rf"{op}: batch_sizes must be positive and non-increasing")
        yield ErrorInput((arr(4, 3),) + state(2) + w, {"batch_sizes": np.array([2, 1], dtype=np.int64)},
                         error=RuntimeError, match=rf"{op}: batch_sizes sum to 3 but the packed input has 4 rows")
        yield ErrorInput((arr(2, 2, 3).astype(np.int64),) + state(2) + w, error=RuntimeError,
                         match=rf"{op}: expected input to be a floating-point tensor")
    return gen


register(
    OpInfo("_C._ops._lstm_layer", _lstm_ref, FLOAT, _samples("lstm"), _errors("lstm", True), compare_dtype=False),
    OpInfo("_C._ops._gru_layer", _single_ref("gru"), FLOAT, _samples("gru"), _errors("gru", False),
           compare_dtype=False),
    OpInfo("_C._ops._rnn_tanh_layer", _single_ref("tanh"), FLOAT, _samples("tanh"), _errors("tanh", False),
           compare_dtype=False),
    OpInfo("_C._ops._rnn_relu_layer", _single_ref("relu"), FLOAT, _samples("relu"), _errors("relu", False),
           compare_dtype=False),
)


# ---- the fused backward ops: _lstm_layer_backward, _gru_layer_backward, _rnn_layer_backward ----
# The reference recomputes the layer in float64 (the samples' forward ran without biases, which the backward ops do
# not take: the gates they read come from the workspace) and walks the steps back (backpropagation through time).

def _bptt(cell, gout, ghy, gcy, x, hx, cx, w_ih, w_hh, w_hr, batch_sizes, reverse, has_biases):
    dt = x.dtype
    gout, ghy, gcy, x, hx, cx, w_ih, w_hh, w_hr = [None if a is None else np.asarray(a, np.float64) for a in
                                                   (gout, ghy, gcy, x, hx, cx, w_ih, w_hh, w_hr)]
    packed = batch_sizes is not None
    sizes = [int(s) for s in batch_sizes] if packed else [x.shape[1]] * x.shape[0]
    data = x if packed else x.reshape(-1, x.shape[-1])
    go = gout if packed else gout.reshape(-1, gout.shape[-1])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    H = w_ih.shape[0] // {"lstm": 4, "gru": 3}.get(cell, 1)
    h, c = hx.copy(), None if cx is None else cx.copy()
    order = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
    cache = []
    for t in order:  # forward, keeping what each step's gradient needs
        nb, off = sizes[t], offsets[t]
        xt, hp = data[off:off + nb], h[:nb].copy()
        gi, gh = xt @ w_ih.T, hp @ w_hh.T
        if cell == "lstm":
            cp = c[:nb].copy()
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
            c[:nb] = f * cp + i * g
            hn = o * np.tanh(c[:nb])
            h[:nb] = hn if w_hr is None else hn @ w_hr.T
            cache.append((t, xt, hp, (cp, i, f, g, o, c[:nb].copy(), hn)))
        elif cell == "gru":
            r = _sigmoid(gi[:, :H] + gh[:, :H])
            z = _sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
            n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
            h[:nb] = (1 - z) * n + z * hp
            cache.append((t, xt, hp, (r, z, n, gh[:, 2 * H:])))
        else:
            pre = gi + gh
            h[:nb] = np.tanh(pre) if cell == "tanh" else np.maximum(pre, 0)
            cache.append((t, xt, hp, (h[:nb].copy(),)))
    dx = np.zeros_like(data)
    dw_ih, dw_hh = np.zeros_like(w_ih), np.zeros_like(w_hh)
    db_ih, db_hh = np.zeros(w_ih.shape[0]), np.zeros(w_ih.shape[0])
    dw_hr = None if w_hr is None else np.zeros_like(w_hr)
    dh = ghy.copy()
    dc = None if gcy is None else gcy.copy()
    for t, xt, hp, k in reversed(cache):
        nb, off = sizes[t], offsets[t]
        dht = dh[:nb] + go[off:off + nb]
        if cell == "lstm":
            cp, i, f, g, o, cn, hn = k
            if w_hr is not None:
                dw_hr += dht.T @ hn
                dht = dht @ w_hr
            tc = np.tanh(cn)
            dct = dc[:nb] + dht * o * (1 - tc ** 2)
            dgi = np.concatenate([dct * g * i * (1 - i), dct * cp * f * (1 - f), dct * i * (1 - g ** 2),
                                  dht * tc * o * (1 - o)], axis=1)
            dgh = dgi
            dc[:nb] = dct * f
            dhp = np.zeros_like(hp)
        elif cell == "gru":
            r, z, n, hn_lin = k
            dpn = dht * (1 - z) * (1 - n ** 2)
            dr = dpn * hn_lin * r * (1 - r)
            dz = dht * (hp - n) * z * (1 - z)
            dgi = np.concatenate([dr, dz, dpn], axis=1)
            dgh = np.concatenate([dr, dz, dpn * r], axis=1)
            dhp = dht * z
        else:
            (hn,) = k
            dgi = dht * ((1 - hn ** 2) if cell == "tanh" else (hn > 0))
            dgh = dgi
            dhp = np.zeros_like(hp)
        dx[off:off + nb] = dgi @ w_ih
        dw_ih += dgi.T @ xt
        dw_hh += dgh.T @ hp
        db_ih += dgi.sum(0)
        db_hh += dgh.sum(0)
        dh[:nb] = dhp + dgh @ w_hh
    empty = np.zeros(0)
    res = [dx if packed else dx.reshape(x.shape), dh]
    if cell == "lstm":
        res.append(dc)
    res += [dw_ih, dw_hh, db_ih if has_biases else empty, db_hh if has_biases else empty]
    if cell == "lstm":
        res.append(empty if w_hr is None else dw_hr)
    return [r.astype(dt) for r in res]


def _lstm_bwd_ref(gout, ghy, gcy, x, hx, cx, w_ih, w_hh, w_hr, batch_sizes, output, workspace, reverse=False,
                  has_biases=True):
    return _bptt("lstm", gout, ghy, gcy, x, hx, cx, w_ih, w_hh, w_hr, batch_sizes, reverse, has_biases)


def _gru_bwd_ref(gout, ghy, x, hx, w_ih, w_hh, batch_sizes, output, workspace, reverse=False, has_biases=True):
    return _bptt("gru", gout, ghy, None, x, hx, None, w_ih, w_hh, None, batch_sizes, reverse, has_biases)


def _rnn_bwd_ref(gout, ghy, x, hx, w_ih, w_hh, batch_sizes, output, reverse=False, has_biases=True, relu=False):
    return _bptt("relu" if relu else "tanh", gout, ghy, None, x, hx, None, w_ih, w_hh, None, batch_sizes, reverse,
                 has_biases)


def _backward_samples(cell):
    """The backward op's arguments, with output and workspace from strata's forward op (without biases)."""
    import strata as st
    fwd = {"lstm": st._C._ops._lstm_layer, "gru": st._C._ops._gru_layer, "tanh": st._C._ops._rnn_tanh_layer,
           "relu": st._C._ops._rnn_relu_layer}[cell]

    def gen(dtype, rng):
        for s in _samples(cell)(dtype, rng):
            a = s.args[:5] if cell == "lstm" else s.args[:4]  # without the biases
            kw = dict(s.kwargs)
            res = fwd(*[st.tensor(v) for v in a], **{k: st.tensor(v) if isinstance(v, np.ndarray) else v
                                                     for k, v in kw.items()})
            res = [r.numpy() for r in res]
            out, hy = res[0], res[1]
            g = [make_array(out.shape, dtype, rng, low=-1.0, high=1.0), make_array(hy.shape, dtype, rng, low=-1.0,
                                                                                   high=1.0)]
            bs, rev = kw.get("batch_sizes"), kw.get("reverse", False)
            bias = "no bias" not in s.name
            if cell == "lstm":
                g.append(make_array(res[2].shape, dtype, rng, low=-1.0, high=1.0))
                args = tuple(g) + tuple(a[:5]) + (kw.get("w_hr"), bs, out, res[3], rev, bias)
            elif cell == "gru":
                args = tuple(g) + tuple(a[:4]) + (bs, out, res[2], rev, bias)
            else:
                args = tuple(g) + tuple(a[:4]) + (bs, out, rev, bias, cell == "relu")
            yield SampleInput(args, name=s.name)
    return gen


def _backward_errors(cell):
    import strata as st

    def gen(rng):
        H, op = 4, {"lstm": "_lstm_layer_backward", "gru": "_gru_layer_backward"}.get(cell, "_rnn_layer_backward")

        def arr(*shape):
            return make_array(shape, "float32", rng)
        gates = {"lstm": 4, "gru": 3}.get(cell, 1)
        x, h, c, wi, wh = arr(2, 2, 3), arr(2, H), arr(2, H), arr(gates * H, 3), arr(gates * H, H)
        if cell == "lstm":
            out, hy, cy, ws = [r.numpy() for r in st._C._ops._lstm_layer(*(st.tensor(v) for v in (x, h, c, wi, wh)))]
            yield ErrorInput((out, hy, cy, x, h, c, wi, wh, None, None, out, ws[:1]), error=RuntimeError,
                             match=rf"{op}: expected workspace of shape")
            yield ErrorInput((out[:1], hy, cy, x, h, c, wi, wh, None, None, out, ws), error=RuntimeError,
                             match=rf"{op}: expected grad_output of shape")
        elif cell == "gru":
            out, hy, ws = [r.numpy() for r in st._C._ops._gru_layer(*(st.tensor(v) for v in (x, h, wi, wh)))]
            yield ErrorInput((out, hy, x, h, wi, wh, None, out, ws[:, :2]), error=RuntimeError,
                             match=rf"{op}: expected workspace of shape")
            yield ErrorInput((out, hy[:1], x, h, wi, wh, None, out, ws), error=RuntimeError,
                             match=rf"{op}: expected grad_hy of shape")
        else:
            out, hy = [r.numpy() for r in st._C._ops._rnn_tanh_layer(*(st.tensor(v) for v in (x, h, wi, wh)))]
            yield ErrorInput((out, hy, x, h, wi, wh, None, out[:, :1]), error=RuntimeError,
                             match=rf"{op}: expected output of shape")
            yield ErrorInput((out, hy, x, h, arr(gates * H, 5), wh, None, out), error=RuntimeError,
                             match=rf"{op}: input.size\(-1\) must be equal to input_size")
    return gen


register(
    OpInfo("_C._ops._lstm_layer_backward", _lstm_bwd_ref, FLOAT, _backward_samples("lstm"), _backward_errors("lstm"),
           compare_dtype=False),
    OpInfo("_C._ops._gru_layer_backward", _gru_bwd_ref, FLOAT, _backward_samples("gru"), _backward_errors("gru"),
           compare_dtype=False),
    OpInfo("_C._ops._rnn_layer_backward", _rnn_bwd_ref, FLOAT, _backward_samples("tanh"), _backward_errors("tanh"),
           compare_dtype=False),
    OpInfo("_C._ops._rnn_layer_backward", _rnn_bwd_ref, FLOAT, _backward_samples("relu"), None, compare_dtype=False),
)
