"""OpInfos of the fused optimizer steps (decl/optim.def), with NumPy references of one update. The ops update
their arguments in place and return the parameter; torch has no public op of this form (its fused steps take
lists), so they are reached through strata._C._ops and compare_dtype is off. test_optim_more.py checks whole
optimizer runs against torch's fused=True."""

import numpy as np

from .core import FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register


def _lerp(a, b, w):
    return a + w * (b - a) if w < 0.5 else b - (b - a) * (1 - w)


def _adam(p, g, m, v, vmax, lr, beta1, beta2, weight_decay, eps, step, amsgrad=False, maximize=False,
          decoupled_weight_decay=False):
    dt = p.dtype
    p, g, m, v = (a.astype(np.float64) for a in (p, g, m, v))
    g = -g if maximize else g
    if weight_decay:
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = _lerp(m, g, 1 - beta1)
    v = v * beta2 + (1 - beta2) * g * g
    if amsgrad:
        v = np.maximum(vmax.astype(np.float64), v)
    denom = np.sqrt(v) / np.sqrt(1 - beta2 ** step) + eps
    return (p - lr / (1 - beta1 ** step) * m / denom).astype(dt)


def _sgd(p, g, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False,
         is_first_step=False):
    dt = p.dtype
    p, g = p.astype(np.float64), g.astype(np.float64)
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        b = g if is_first_step else buf.astype(np.float64) * momentum + (1 - dampening) * g
        g = g + momentum * b if nesterov else b
    return (p - lr * g).astype(dt)


def _adagrad(p, g, s, lr, lr_decay, weight_decay, eps, step, maximize=False):
    dt = p.dtype
    p, g, s = (a.astype(np.float64) for a in (p, g, s))
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    s = s + g * g
    return (p - lr / (1 + (step - 1) * lr_decay) * g / (np.sqrt(s) + eps)).astype(dt)


def _state(dtype, rng, shape):
    m = make_array(shape, dtype, rng)
    # 0-d results of NumPy arithmetic are scalars; asarray keeps them arrays of the sample dtype.
    return m, np.asarray(np.abs(make_array(shape, dtype, rng))), np.asarray(np.abs(make_array(shape, dtype, rng)) + 1)


def adam_samples(dtype, rng):
    for shape in [(5, 7), (300,), (), (0, 3)]:
        p, g = make_array(shape, dtype, rng), make_array(shape, dtype, rng)
        m, v, vmax = _state(dtype, rng, shape)
        hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, step=3.0)
        yield SampleInput((p, g, m, v, None), hyper, name=f"{shape}")
        yield SampleInput((p, g, m, v, vmax), dict(hyper, amsgrad=True, maximize=True, weight_decay=0.1),
                          name=f"{shape} amsgrad maximize wd")
        yield SampleInput((p, g, m, v, None), dict(hyper, beta1=0.6, weight_decay=0.1, decoupled_weight_decay=True,
                                                   step=1.0), name=f"{shape} decoupled first step")


def sgd_samples(dtype, rng):
    for shape in [(4, 6), (5000,), ()]:
        p, g, buf = make_array(shape, dtype, rng), make_array(shape, dtype, rng), make_array(shape, dtype, rng)
        yield SampleInput((p, g, None), dict(lr=0.1), name=f"{shape} plain")
        yield SampleInput((p, g, buf), dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
                          name=f"{shape} momentum")
        yield SampleInput((p, g, buf), dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True, is_first_step=True),
                          name=f"{shape} nesterov first")


def adagrad_samples(dtype, rng):
    for shape in [(3, 5), (1000,), ()]:
        p, g = make_array(shape, dtype, rng), make_array(shape, dtype, rng)
        s = np.asarray(np.abs(make_array(shape, dtype, rng)))
        yield SampleInput((p, g, s), dict(lr=0.1, lr_decay=0.01, weight_decay=0.0, eps=1e-10, step=2.0))
        yield SampleInput((p, g, s), dict(lr=0.1, lr_decay=0.0, weight_decay=0.1, eps=1e-6, step=1.0, maximize=True))


def _f(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


H_ADAM = dict(lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, step=1.0)


def adam_errors(rng):
    yield ErrorInput((_f(3), _f(4), _f(3), _f(3), None), H_ADAM, match="expected grad to have the parameter's shape")
    yield ErrorInput((_f(3), _f(3), _f(3), _f(3, dtype=np.float64), None), H_ADAM, match="same dtype")
    yield ErrorInput((np.ones(3, np.int64), _f(3), _f(3), _f(3), None), H_ADAM, error=TypeError,
                     match="float32 or float64")
    yield ErrorInput((_f(3), _f(3), _f(3), _f(3), None), dict(H_ADAM, amsgrad=True), match="needs max_exp_avg_sq")
    yield ErrorInput((_f(3), _f(3), _f(3), _f(3), None), dict(H_ADAM, step=0.0), match="step >= 1")
    yield ErrorInput((_f(4, 4)[:, ::2], _f(4, 2), _f(4, 2), _f(4, 2), None), H_ADAM, match="contiguous")


def sgd_errors(rng):
    yield ErrorInput((_f(3), _f(3), None), dict(lr=0.1, momentum=0.9), match="needs a momentum_buffer")
    yield ErrorInput((_f(3), _f(3), _f(2)), dict(lr=0.1, momentum=0.9), match="momentum_buffer")


def adagrad_errors(rng):
    yield ErrorInput((_f(3), _f(3), _f(3, 1)), dict(lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10, step=1.0),
                     match="state_sum")


register(
    OpInfo("_C._ops._fused_adam_step_", ref=_adam, dtypes=FLOAT, samples=adam_samples, errors=adam_errors,
           compare_dtype=False),
    OpInfo("_C._ops._fused_sgd_step_", ref=_sgd, dtypes=FLOAT, samples=sgd_samples, errors=sgd_errors,
           compare_dtype=False),
    OpInfo("_C._ops._fused_adagrad_step_", ref=_adagrad, dtypes=FLOAT, samples=adagrad_samples,
           errors=adagrad_errors, compare_dtype=False),
)
