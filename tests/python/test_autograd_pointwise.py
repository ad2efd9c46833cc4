"""Derivatives of the pointwise ops and activations (src/autograd/derivatives_pointwise.cpp):
gradcheck in float64, gradients equal to torch's (subgradient conventions included), gradgradcheck
for a subset, in-place variants, node names and errors."""

import numpy as np
import pytest

import strata
import strata.nn.functional as F
from strata.autograd import gradcheck

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    torch = None

pytestmark = pytest.mark.skipif(not hasattr(strata.Tensor, "grad_fn"), reason="autograd not merged yet")
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

F64 = strata.float64
DTYPES = [("float32", 1e-5, 1e-6), ("float64", 1e-10, 1e-12)]


def leaf(values, dtype=F64, shape=None):
    a = np.asarray(values, dtype=np.float64)
    if shape is not None:
        a = a.reshape(shape)
    return strata.tensor(a, dtype=dtype).requires_grad_()


def gradgradcheck(fn, inputs, seed=0):
    # strata.autograd.gradgradcheck evaluates the first derivative inside the
    # numerical Jacobian's no_grad block, so grad(create_graph=True) finds no
    # graph; this does the same check with grad mode forced on.
    inputs = tuple(inputs)
    n = len(inputs)
    with strata.no_grad():
        outs = fn(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    rng = np.random.default_rng(seed)
    gos = tuple(strata.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype).requires_grad_() for o in outs)
    diff = [i for i, x in enumerate(inputs) if x.requires_grad]

    def first_derivative(*args):
        with strata.enable_grad():
            ins, go = args[:n], args[n:]
            o = fn(*ins)
            o = o if isinstance(o, tuple) else (o,)
            gs = strata.autograd.grad(list(o), [ins[i] for i in diff], list(go), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivative, inputs + gos)


# ---- unary ops -------------------------------------------------------------------------------
GENERAL = [-1.7, -0.6, 0.3, 0.9, 1.4, 2.2]
POSITIVE = [0.3, 0.7, 1.1, 1.6, 2.4, 3.3]
UNIT = [-0.8, -0.45, -0.1, 0.2, 0.55, 0.85]
WIDE = [-4.2, -2.1, -0.7, 0.4, 2.6, 5.3]

# name: (strata fn, torch fn, gradcheck values, extra values for the torch comparison (kinks, edges))
UNARY = {
    "exp2": (strata.exp2, torch and torch.exp2, GENERAL, [0.0, -30.0]),
    "expm1": (strata.expm1, torch and torch.expm1, GENERAL, [0.0, 1e-8]),
    "log2": (strata.log2, torch and torch.log2, POSITIVE, [1.0, 1e-3]),
    "log10": (strata.log10, torch and torch.log10, POSITIVE, [1.0, 1e-3]),
    "log1p": (strata.log1p, torch and torch.log1p, [-0.5, 0.3, 0.7, 1.1, 1.6, 2.4], [0.0, -0.9]),
    "rsqrt": (strata.rsqrt, torch and torch.rsqrt, POSITIVE, [1.0, 1e-2]),
    "reciprocal": (strata.reciprocal, torch and torch.reciprocal, GENERAL, [-1e-3, 4.0]),
    "sin": (strata.sin, torch and torch.sin, GENERAL, [0.0, 3.14159]),
    "cos": (strata.cos, torch and torch.cos, GENERAL, [0.0, 3.14159]),
    "tan": (strata.tan, torch and torch.tan, UNIT, [0.0, 1.5]),
    "asin": (strata.asin, torch and torch.asin, UNIT, [0.0, 0.999]),
    "acos": (strata.acos, torch and torch.acos, UNIT, [0.0, -0.999]),
    "atan": (strata.atan, torch and torch.atan, WIDE, [0.0, 100.0]),
    "sinh": (strata.sinh, torch and torch.sinh, GENERAL, [0.0, -5.0]),
    "cosh": (strata.cosh, torch and torch.cosh, GENERAL, [0.0, -5.0]),
    "erf": (strata.erf, torch and torch.erf, GENERAL, [0.0, 4.0]),
    "erfc": (strata.erfc, torch and torch.erfc, GENERAL, [0.0, -4.0]),
    "abs": (strata.abs, torch and torch.abs, GENERAL, [0.0, -0.0, float("nan")]),
    "sign": (strata.sign, torch and torch.sign, GENERAL, [0.0]),
    "floor": (strata.floor, torch and torch.floor, GENERAL, [1.0, -2.0]),
    "ceil": (strata.ceil, torch and torch.ceil, GENERAL, [1.0, -2.0]),
    "trunc": (strata.trunc, torch and torch.trunc, GENERAL, [1.0, -2.0]),
    "round": (strata.round, torch and torch.round, GENERAL, [0.5, 1.5, -2.5]),
    "round_decimals": (lambda x: strata.round(x, decimals=1), torch and (lambda x: torch.round(x, decimals=1)),
                       [-1.73, -0.61, 0.32, 0.97, 1.44, 2.21], [0.25]),
    "nan_to_num": (strata.nan_to_num, torch and torch.nan_to_num, GENERAL,
                   [float("nan"), float("inf"), -float("inf")]),
    "nan_to_num_args": (lambda x: strata.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
                        torch and (lambda x: torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0)), GENERAL,
                        [float("nan"), float("inf"), -float("inf")]),
    # activations
    "gelu": (F.gelu, torch and TF.gelu, WIDE, [0.0, -8.0, 8.0]),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), torch and (lambda x: TF.gelu(x, approximate="tanh")),
                  WIDE, [0.0, -8.0, 8.0]),
    "silu": (F.silu, torch and TF.silu, WIDE, [0.0, -30.0, 30.0]),
    "mish": (F.mish, torch and TF.mish, WIDE, [0.0, -30.0, 25.0]),
    "softplus": (F.softplus, torch and TF.softplus, WIDE, [0.0, 20.0, 20.5, -30.0]),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0, threshold=3.0),
                      torch and (lambda x: TF.softplus(x, beta=2.0, threshold=3.0)),
                      [-1.7, -0.6, 0.3, 0.9, 1.75, 2.2], [1.5, 1.5001, 0.0]),
    "leaky_relu": (F.leaky_relu, torch and TF.leaky_relu, GENERAL, [0.0, -0.0]),
    "leaky_relu_slope": (lambda x: F.leaky_relu(x, 0.3), torch and (lambda x: TF.leaky_relu(x, 0.3)), GENERAL,
                         [0.0]),
    "elu": (F.elu, torch and TF.elu, GENERAL, [0.0, -40.0, 100.0]),
    "elu_args": (lambda x: strata.elu(x, 2.0, 1.5, 0.5),
                 torch and (lambda x: torch.ops.aten.elu(x, alpha=2.0, scale=1.5, input_scale=0.5)), GENERAL, [0.0]),
    "selu": (F.selu, torch and TF.selu, GENERAL, [0.0]),
    "celu": (lambda x: F.celu(x, alpha=0.7), torch and (lambda x: TF.celu(x, alpha=0.7)), GENERAL, [0.0]),
    "hardtanh": (F.hardtanh, torch and TF.hardtanh, GENERAL, [-1.0, 1.0, 0.0]),
    "hardtanh_args": (lambda x: F.hardtanh(x, -0.5, 2.0), torch and (lambda x: TF.hardtanh(x, -0.5, 2.0)), GENERAL,
                      [-0.5, 2.0]),
    "relu6": (F.relu6, torch and TF.relu6, [-4.2, -2.1, 0.4, 2.6, 5.3, 6.5], [0.0, 6.0]),
    "hardsigmoid": (F.hardsigmoid, torch and TF.hardsigmoid, WIDE, [-3.0, 3.0, 0.0]),
    "hardswish": (F.hardswish, torch and TF.hardswish, WIDE, [-3.0, 3.0, 0.0]),
    "log_sigmoid": (F.logsigmoid, torch and TF.logsigmoid, WIDE, [0.0, -50.0, 50.0]),
}

# torch's float64 derivative uses a float32 constant here (celu: 1 / alpha, hardsigmoid: 1 / 6); gradcheck
# confirms that ours is the exact one.
LOW_PRECISION_IN_TORCH = {"celu", "hardsigmoid"}

GRADGRAD = ["exp2", "expm1", "log2", "log10", "log1p", "rsqrt", "reciprocal", "sin", "cos", "tan", "asin", "acos",
            "atan", "sinh", "cosh", "erf", "erfc", "abs", "floor", "round", "nan_to_num", "gelu", "gelu_tanh",
            "silu", "mish", "softplus_beta", "leaky_relu_slope", "elu_args", "hardtanh", "hardsigmoid", "hardswish",
            "log_sigmoid"]


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_gradcheck(name):
    fn, _, vals, _ = UNARY[name]
    assert gradcheck(fn, (leaf(vals, shape=(2, 3)),))
    # non-contiguous leaf
    x = strata.tensor(np.asarray(vals, dtype=np.float64).reshape(3, 2), dtype=F64).t().requires_grad_()
    assert not x.is_contiguous()
    assert gradcheck(fn, (x,))
    # 0-d
    assert gradcheck(fn, (leaf(vals[2]),))


@pytest.mark.parametrize("name", GRADGRAD)
def test_unary_gradgradcheck(name):
    fn, _, vals, _ = UNARY[name]
    assert gradgradcheck(fn, (leaf(vals[:4]),))


@needs_torch
@pytest.mark.parametrize("dtype,rtol,atol", DTYPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_matches_torch(name, dtype, rtol, atol):
    fn, tfn, vals, extra = UNARY[name]
    data = np.asarray(vals + extra, dtype=np.float64)
    go = np.random.default_rng(1).standard_normal(data.shape)
    x = strata.tensor(data, dtype=getattr(strata, dtype)).requires_grad_()
    tx = torch.tensor(data, dtype=getattr(torch, dtype)).requires_grad_()
    y, ty = fn(x), tfn(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol * 10, atol=atol)
    (g,) = strata.autograd.grad([y], [x], [strata.tensor(go, dtype=y.dtype)])
    (tg,) = torch.autograd.grad([ty], [tx], [torch.tensor(go, dtype=ty.dtype)])
    assert g.dtype == x.dtype
    if dtype == "float64" and name in LOW_PRECISION_IN_TORCH:
        rtol = 1e-7
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=rtol, atol=atol)


@needs_torch
@pytest.mark.parametrize("name", ["exp2", "log1p", "rsqrt", "abs", "sign", "round", "nan_to_num", "gelu", "silu",
                                  "mish", "softplus", "leaky_relu", "elu", "hardtanh", "hardsigmoid", "hardswish",
                                  "log_sigmoid", "erfc", "reciprocal"])
def test_unary_node_names(name):
    fn, tfn, vals, _ = UNARY[name]
    y = fn(leaf(vals))
    ty = tfn(torch.tensor(vals, dtype=torch.float64, requires_grad=True))
    assert y.grad_fn.name() == ty.grad_fn.name()


def test_rounding_and_sign_give_zeros():
    x = leaf(GENERAL)
    for fn in (strata.floor, strata.ceil, strata.trunc, strata.round, strata.sign):
        (g,) = strata.autograd.grad([fn(x).sum()], [x])
        assert g.shape == x.shape and np.all(g.numpy() == 0.0)


def test_zero_size_and_float32_dtype():
    x = strata.zeros(0, 3, requires_grad=True)
    for fn in (strata.exp2, strata.abs, F.gelu, F.hardswish, strata.nan_to_num):
        (g,) = strata.autograd.grad([fn(x).sum()], [x])
        assert g.shape == (0, 3) and g.dtype == strata.float32


# ---- binary and ternary ops ---------------------------------------------------------------------
A = [[7.3, -5.2, 4.1], [-2.7, 9.6, 1.3]]
B = [1.7, -2.3, 0.6]


def _rem_other():  # quotients stay away from integers so the Jacobian is smooth
    return [1.7, -2.3, 0.7]


BINARY = {
    "remainder": (strata.remainder, torch and torch.remainder),
    "fmod": (strata.fmod, torch and torch.fmod),
    "maximum": (strata.maximum, torch and torch.maximum),
    "minimum": (strata.minimum, torch and torch.minimum),
    "atan2": (strata.atan2, torch and torch.atan2),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_gradcheck_broadcast(name):
    fn, _ = BINARY[name]
    a, b = leaf(A), leaf(_rem_other())
    assert gradcheck(fn, (a, b))
    assert gradcheck(fn, (leaf(A).detach().t().requires_grad_(), leaf([[1.7], [-2.3], [0.7]])))
    # only one side differentiable, the other a Python number
    assert gradcheck(lambda x: fn(x, 2.3), (a,))
    assert gradgradcheck(fn, (leaf(A[0]), leaf(_rem_other())))


@needs_torch
@pytest.mark.parametrize("dtype,rtol,atol", DTYPES)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_matches_torch(name, dtype, rtol, atol):
    fn, tfn = BINARY[name]
    # ties (maximum/minimum split 0.5/0.5), exact multiples, nan, zero divisor for atan2
    a = np.array([[7.3, -5.2, 4.0, 2.0, float("nan"), 0.0], [-2.7, 9.6, 1.3, -4.6, 1.0, 0.0]])
    b = np.array([1.7, -2.3, 2.0, 2.0, 1.0, 0.0])
    if name in ("remainder", "fmod"):
        b[-1] = 3.0
    go = np.random.default_rng(2).standard_normal(a.shape)
    sd, td = getattr(strata, dtype), getattr(torch, dtype)
    x, y = strata.tensor(a, dtype=sd).requires_grad_(), strata.tensor(b, dtype=sd).requires_grad_()
    tx, ty = torch.tensor(a, dtype=td, requires_grad=True), torch.tensor(b, dtype=td, requires_grad=True)
    gx, gy = strata.autograd.grad([fn(x, y)], [x, y], [strata.tensor(go, dtype=sd)])
    tgx, tgy = torch.autograd.grad([tfn(tx, ty)], [tx, ty], [torch.tensor(go, dtype=td)])
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(gy.numpy(), tgy.numpy(), rtol=rtol, atol=atol)


@needs_torch
def test_maximum_minimum_ties_split():
    x, y = leaf([1.0, 2.0, 3.0]), leaf([1.0, 1.0, 4.0])
    gx, gy = strata.autograd.grad([strata.maximum(x, y).sum()], [x, y])
    assert gx.numpy().tolist() == [0.5, 1.0, 0.0] and gy.numpy().tolist() == [0.5, 0.0, 1.0]
    gx, gy = strata.autograd.grad([strata.minimum(x, y).sum()], [x, y])
    assert gx.numpy().tolist() == [0.5, 0.0, 1.0] and gy.numpy().tolist() == [0.5, 1.0, 0.0]


def test_remainder_fmod_other_grad_is_minus_quotient():
    x, y = leaf([7.5, -7.5, 7.5, -7.5]), leaf([2.0, 2.0, -2.0, -2.0])
    _, gy = strata.autograd.grad([strata.remainder(x, y).sum()], [x, y])
    assert gy.numpy().tolist() == [-3.0, 4.0, 4.0, -3.0]  # -floor(x / y)
    gx, gy = strata.autograd.grad([strata.fmod(x, y).sum()], [x, y])
    assert gy.numpy().tolist() == [-3.0, 3.0, 3.0, -3.0]  # -trunc(x / y)
    assert gx.numpy().tolist() == [1.0, 1.0, 1.0, 1.0]


def test_lerp_gradcheck():
    s, e, w = leaf(A), leaf(B), leaf([[0.3], [0.8]])
    assert gradcheck(strata.lerp, (s, e, w))
    assert gradcheck(lambda a, b: strata.lerp(a, b, 0.25), (s, e))
    assert gradgradcheck(strata.lerp, (leaf(A[0]), leaf(B), leaf([0.3, 0.7, 0.9])))


@needs_torch
@pytest.mark.parametrize("dtype,rtol,atol", DTYPES)
def test_lerp_matches_torch(dtype, rtol, atol):
    s, e, w = np.array(A), np.array(B), np.array([[0.3], [0.8]])
    sd, td = getattr(strata, dtype), getattr(torch, dtype)
    ins = [strata.tensor(v, dtype=sd).requires_grad_() for v in (s, e, w)]
    tins = [torch.tensor(v, dtype=td, requires_grad=True) for v in (s, e, w)]
    gs = strata.autograd.grad([strata.lerp(*ins).sum()], ins)
    tgs = torch.autograd.grad([torch.lerp(*tins).sum()], tins)
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=rtol, atol=atol)
    y = strata.lerp(ins[0], ins[1], 0.5)
    ty = torch.lerp(tins[0], tins[1], 0.5)
    assert y.grad_fn.name() == ty.grad_fn.name()


# ---- clamp --------------------------------------------------------------------------------------
def test_clamp_gradcheck():
    x = leaf([-1.7, -0.6, 0.3, 0.9, 1.4, 2.2], shape=(2, 3))
    lo, hi = leaf([-1.0, 0.5, 0.1]), leaf([[1.0], [2.0]])
    assert gradcheck(lambda a, b, c: strata.clamp(a, b, c), (x, lo, hi))
    assert gradcheck(lambda a, b: strata.clamp(a, min=b), (x, lo))
    assert gradcheck(lambda a, c: strata.clamp(a, max=c), (x, hi))
    assert gradcheck(lambda a: strata.clamp(a, -1.0, 1.0), (x,))
    assert gradcheck(lambda a: a.clamp(min=0.0), (x,))
    assert gradcheck(lambda a: a.clip(max=0.0), (x,))
    assert gradgradcheck(lambda a, b, c: strata.clamp(a, b, c), (leaf([-1.7, 0.3, 2.2]), leaf([-1.0, 0.5, 0.1]),
                                                                 leaf([1.0, 2.0, 1.5])))


@needs_torch
@pytest.mark.parametrize("dtype,rtol,atol", DTYPES)
def test_clamp_matches_torch(dtype, rtol, atol):
    # boundaries (x == min, x == max pass the gradient to x), min > max (the result is max), nan input
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 0.5, float("nan"), 3.0])
    lo = np.array([-1.0, -1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 2.0])
    hi = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 2.0])
    sd, td = getattr(strata, dtype), getattr(torch, dtype)
    go = np.random.default_rng(3).standard_normal(x.shape)
    for use_lo, use_hi in ((True, True), (True, False), (False, True)):
        ins = [strata.tensor(v, dtype=sd).requires_grad_() for v in (x, lo, hi)]
        tins = [torch.tensor(v, dtype=td, requires_grad=True) for v in (x, lo, hi)]
        args = [ins[0], ins[1] if use_lo else None, ins[2] if use_hi else None]
        targs = [tins[0], tins[1] if use_lo else None, tins[2] if use_hi else None]
        want = [t for t, u in zip(ins, (True, use_lo, use_hi)) if u]
        twant = [t for t, u in zip(tins, (True, use_lo, use_hi)) if u]
        gs = strata.autograd.grad([strata.clamp(*args)], want, [strata.tensor(go, dtype=sd)])
        tgs = torch.autograd.grad([torch.clamp(*targs)], twant, [torch.tensor(go, dtype=td)])
        for g, tg in zip(gs, tgs):
            np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=rtol, atol=atol)
    # Python-number bounds
    sx, tx = strata.tensor(x, dtype=sd).requires_grad_(), torch.tensor(x, dtype=td, requires_grad=True)
    (g,) = strata.autograd.grad([sx.clamp(-1, 1).sum()], [sx])
    (tg,) = torch.autograd.grad([tx.clamp(-1, 1).sum()], [tx])
    np.testing.assert_allclose(g.numpy(), tg.numpy())
    assert sx.clamp(-1, 1).grad_fn.name() == tx.clamp(-1, 1).grad_fn.name()


# ---- masked_fill --------------------------------------------------------------------------------
def test_masked_fill_gradcheck():
    x = leaf(A)
    mask = strata.tensor([[True, False, True], [False, False, True]])
    v = leaf(1.5)
    assert gradcheck(lambda a, b: strata.masked_fill(a, mask, b), (x, v))
    assert gradcheck(lambda a: a.masked_fill(mask, 2.0), (x,))
    # mask broadcast against self and self against mask
    assert gradcheck(lambda a, b: strata.masked_fill(a, strata.tensor([True, False, True]), b), (x, v))
    assert gradcheck(lambda a, b: strata.masked_fill(a, mask, b), (leaf(B), v))
    assert gradgradcheck(lambda a, b: strata.masked_fill(a, mask, b), (x, v))


@needs_torch
@pytest.mark.parametrize("dtype,rtol,atol", DTYPES)
def test_masked_fill_matches_torch(dtype, rtol, atol):
    m = np.array([[True, False, True], [False, False, True]])
    sd, td = getattr(strata, dtype), getattr(torch, dtype)
    x, v = strata.tensor(np.array(A), dtype=sd).requires_grad_(), strata.tensor(0.5, dtype=sd).requires_grad_()
    tx, tv = torch.tensor(A, dtype=td, requires_grad=True), torch.tensor(0.5, dtype=td, requires_grad=True)
    go = np.random.default_rng(4).standard_normal((2, 3))
    gs = strata.autograd.grad([strata.masked_fill(x, strata.tensor(m), v)], [x, v], [strata.tensor(go, dtype=sd)])
    tgs = torch.autograd.grad([torch.masked_fill(tx, torch.tensor(m), tv)], [tx, tv], [torch.tensor(go, dtype=td)])
    for g, tg in zip(gs, tgs):
        assert tuple(g.shape) == tuple(tg.shape)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=rtol, atol=atol)
    assert x.masked_fill(strata.tensor(m), 1.0).grad_fn.name() == tx.masked_fill(torch.tensor(m), 1.0).grad_fn.name()


# ---- in-place variants ----------------------------------------------------------------------------
@needs_torch
def test_inplace_variants_match_torch():
    data = np.array([-3.5, -1.0, -0.2, 0.0, 0.4, 1.0, 2.5, 3.0])
    cases = [
        (lambda t: t.exp2_(), lambda t: t.exp2_()),
        (lambda t: t.abs_(), lambda t: t.abs_()),
        (lambda t: t.clamp_(-0.5, 1.0), lambda t: t.clamp_(-0.5, 1.0)),
        (lambda t: t.sin_(), lambda t: t.sin_()),
        (lambda t: F.elu(t, alpha=2.0, inplace=True), lambda t: TF.elu(t, alpha=2.0, inplace=True)),
        (lambda t: F.leaky_relu_(t, 0.2), lambda t: TF.leaky_relu_(t, 0.2)),
        (lambda t: F.hardtanh_(t, -0.5, 1.0), lambda t: TF.hardtanh_(t, -0.5, 1.0)),
        (lambda t: F.hardswish(t, inplace=True), lambda t: TF.hardswish(t, inplace=True)),
        (lambda t: t.remainder_(0.7), lambda t: t.remainder_(0.7)),
    ]
    for fn, tfn in cases:
        x = strata.tensor(data, dtype=F64).requires_grad_()
        tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        y, ty = x * 1.5, tx * 1.5
        fn(y)
        tfn(ty)
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


# ---- errors -----------------------------------------------------------------------------------------
def test_out_argument_with_grad_is_rejected():
    x = leaf(GENERAL)
    with pytest.raises(RuntimeError, match="out="):
        strata.exp2(x, out=strata.empty(6, dtype=F64))
    with pytest.raises(RuntimeError, match="out="):
        strata.maximum(x, x.detach(), out=strata.empty(6, dtype=F64))


def test_inplace_on_leaf_is_rejected():
    x = leaf(GENERAL)
    with pytest.raises(RuntimeError, match="leaf"):
        x.exp2_()


def test_bad_arguments_still_raise_with_grad():
    x = leaf(GENERAL)
    with pytest.raises(RuntimeError, match="approximate"):
        F.gelu(x, approximate="fast")
    with pytest.raises(RuntimeError, match="min_val"):
        strata.hardtanh(x, 1.0, -1.0)
    with pytest.raises(RuntimeError, match="clamp"):
        strata.clamp(x)


def test_saved_input_modified_in_place_is_detected():
    x = leaf(POSITIVE)
    y = x * 1.0
    z = strata.log1p(y)
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_no_nan_from_discarded_branches_in_double_backward():
    # atan2 at the origin: zero gradient (torch's choice), also for the second derivative
    a, b = leaf([0.0, 1.0]), leaf([0.0, 2.0])
    ga, gb = strata.autograd.grad([strata.atan2(a, b).sum()], [a, b], create_graph=True)
    assert ga.numpy().tolist()[0] == 0.0 and gb.numpy().tolist()[0] == 0.0
    (gga,) = strata.autograd.grad([(ga * ga + gb * gb).sum()], [a])
    assert np.all(np.isfinite(gga.numpy()))
    # elu's exp branch must not overflow for large positive inputs
    x = leaf([800.0, -1.0])
    (g,) = strata.autograd.grad([F.elu(x).sum()], [x], create_graph=True)
    (gg,) = strata.autograd.grad([g.sum()], [x])
    np.testing.assert_allclose(gg.numpy(), [0.0, np.exp(-1.0)], rtol=1e-12)
