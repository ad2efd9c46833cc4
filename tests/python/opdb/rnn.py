"""OpInfos of the recurrent layer ops (decl/rnn.def) with float64 NumPy references of one layer in one direction.
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
