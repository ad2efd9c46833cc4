"""Derivatives of the reduction family: gradcheck, gradients against torch, gradgradcheck."""

import math

import numpy as np
import pytest

import strata
from strata.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.skipif(not hasattr(strata.Tensor, "grad_fn"), reason="autograd not merged yet")

INF = float("inf")


def _shape_ops_differentiable():
    """Whether the view/shape ops some backward formulas use (unsqueeze, expand, flip, cat, narrow, reshape,
    scatter) have derivatives yet: they belong to another family."""
    x = strata.randn(2, 3, dtype=strata.float64).requires_grad_()
    idx = strata.tensor([[0], [1]])
    try:
        y = x.unsqueeze(0).expand(2, 2, 3).flip([2]).reshape(4, 3)
        y = strata.cat([y, x.narrow(1, 0, 2).reshape(2, 2).sum(1, keepdim=True).expand(2, 3)], 0)
        z = strata.zeros(2, 3, dtype=strata.float64).scatter(1, idx, x[:, :1])
        (y.sum() + z.sum()).backward()
    except NotImplementedError:
        return False
    return True


needs_shape_derivs = pytest.mark.skipif(not _shape_ops_differentiable(),
                                        reason="view/shape derivatives (another family) not merged yet")


def _maximum_differentiable():
    x = strata.randn(2, dtype=strata.float64).requires_grad_()
    try:
        strata.maximum(x, strata.zeros(2, dtype=strata.float64)).sum().backward()
    except NotImplementedError:
        return False
    return True


def _gradgradcheck(fn, *inputs):
    # strata's gradgradcheck evaluates fn under no_grad for the numerical part, so the first derivative would
    # find no graph; build it with grad mode on explicitly.
    def wrapped(*a):
        with strata.enable_grad():
            return fn(*a)

    return gradgradcheck(wrapped, inputs)


def _leaf(data, dtype=strata.float64, noncontig=False):
    arr = np.asarray(data, dtype=np.float64)
    if noncontig and arr.ndim == 2:
        base = strata.tensor(np.ascontiguousarray(arr.T), dtype=dtype)
        x = base.t()
        assert not x.is_contiguous()
        return x.requires_grad_()
    return strata.tensor(arr, dtype=dtype).requires_grad_()


rng = np.random.default_rng(1234)
R23 = rng.standard_normal((2, 3))
R234 = rng.standard_normal((2, 3, 4))
POS23 = rng.uniform(0.5, 2.0, (2, 3))
TIES = [[1.0, 3.0, 3.0], [2.0, -1.0, -1.0]]
ZERO1 = [[1.5, 0.0, 2.0, -3.0], [0.5, 2.0, 1.5, 2.5]]  # one zero in a row
ZERO2 = [[0.0, 2.0, 0.0, -3.0], [0.5, 0.0, 1.5, 2.5]]  # two zeros overall (and in row 0)
ZERO_LAST = [[2.0, 3.0, -1.5, 0.0], [0.0, 1.2, 0.8, 2.0]]

# (id, fn(lib, x), data). fn works for both strata and torch (same API).
CASES = [
    # sum / mean (derivatives in core, variants tested here)
    ("sum", lambda m, x: x.sum(), R23),
    ("sum_dim", lambda m, x: x.sum(1), R234),
    ("sum_dims_keepdim", lambda m, x: x.sum((0, 2), keepdim=True), R234),
    ("sum_negdim", lambda m, x: m.sum(x, dim=-1), R234),
    ("sum_dtype", lambda m, x: x.sum(1, dtype=m.float64), R23),
    ("mean", lambda m, x: x.mean(), R23),
    ("mean_dims", lambda m, x: x.mean((0, 2)), R234),
    ("mean_keepdim", lambda m, x: x.mean(-1, keepdim=True), R234),
    ("mean_dtype", lambda m, x: x.mean(0, dtype=m.float64), R23),
    # prod
    ("prod", lambda m, x: x.prod(), POS23),
    ("prod_neg", lambda m, x: x.prod(), R23),
    ("prod_one_zero", lambda m, x: x.prod(), ZERO1),
    ("prod_two_zeros", lambda m, x: x.prod(), ZERO2),
    ("prod_dim", lambda m, x: x.prod(1), R23),
    ("prod_dim_keepdim", lambda m, x: x.prod(0, keepdim=True), R23),
    ("prod_dim_zeros", lambda m, x: x.prod(1), ZERO2),
    ("prod_dim_zeros_last", lambda m, x: x.prod(-1, keepdim=True), ZERO_LAST),
    ("prod_dim0_zeros", lambda m, x: x.prod(0), ZERO2),
    ("prod_dtype", lambda m, x: x.prod(1, dtype=m.float64), R23),
    ("prod_0d", lambda m, x: x.prod(), 1.7),
    # max / min
    ("max", lambda m, x: x.max(), R23),
    ("min", lambda m, x: x.min(), R23),
    ("max_dim", lambda m, x: x.max(1)[0], R234),
    ("max_dim_keepdim", lambda m, x: x.max(0, keepdim=True).values, R23),
    ("min_dim", lambda m, x: m.min(x, -1)[0], R234),
    ("min_dim_keepdim", lambda m, x: x.min(1, True).values, R23),
    ("max_dim_0d", lambda m, x: x.max(0)[0], 2.5),
    ("amax", lambda m, x: x.amax(), R23),
    ("amax_dim", lambda m, x: x.amax(1), R234),
    ("amax_dims_keepdim", lambda m, x: x.amax((0, 2), keepdim=True), R234),
    ("amin", lambda m, x: x.amin(-1), R234),
    ("amin_dims", lambda m, x: m.amin(x, dim=(0, 1)), R234),
    ("max_other", lambda m, x: m.max(x, m.tensor([[0.1, -0.2, 0.3]], dtype=x.dtype)), R23),
    # var / std family (composites)
    ("var", lambda m, x: x.var(), R23),
    ("var_dim", lambda m, x: x.var(1), R234),
    ("var_correction0", lambda m, x: m.var(x, dim=(0, 2), correction=0, keepdim=True), R234),
    ("var_correction2", lambda m, x: m.var(x, dim=1, correction=2), R234),
    ("var_unbiased_false", lambda m, x: x.var(False), R23),
    ("var_mean", lambda m, x: m.var_mean(x, 1, correction=0), R234),
    ("var_mean_all", lambda m, x: m.var_mean(x), R23),
    ("std", lambda m, x: x.std(), R23),
    ("std_dim", lambda m, x: x.std(1, keepdim=True), R234),
    ("std_mean", lambda m, x: m.std_mean(x, 0), R23),
    ("std_mean_keepdim", lambda m, x: m.std_mean(x, (0, 2), correction=0, keepdim=True), R234),
    ("std_unbiased_false", lambda m, x: m.std(x, False), R23),
    ("var_mean_unbiased", lambda m, x: m.var_mean(x, True), R23),
    ("std_0d", lambda m, x: m.std(x, correction=0), 1.5),
    # norm
    ("norm", lambda m, x: x.norm(), R23),
    ("norm_p1", lambda m, x: x.norm(1), R23),
    ("norm_pinf", lambda m, x: x.norm(INF), R23),
    ("norm_pninf", lambda m, x: x.norm(-INF), R23),
    ("norm_p0", lambda m, x: x.norm(0), R23),
    ("norm_p3", lambda m, x: x.norm(3), R23),
    ("norm_p1_5", lambda m, x: x.norm(1.5), R23),
    ("norm_p0_5", lambda m, x: x.norm(0.5), R23),
    ("norm_pneg1", lambda m, x: x.norm(-1.0), R23),
    ("norm_dim", lambda m, x: x.norm(2, 1), R234),
    ("norm_dims_keepdim", lambda m, x: m.norm(x, p=3, dim=(0, 2), keepdim=True), R234),
    ("norm_p1_dim", lambda m, x: x.norm(1, -1), R234),
    ("norm_pinf_dim", lambda m, x: x.norm(INF, dim=1, keepdim=True), R234),
    ("norm_dtype", lambda m, x: m.norm(x, 2, 1, dtype=m.float64), R23),
    ("norm_fro", lambda m, x: m.norm(x, "fro", dim=1), R23),
    ("norm_0d", lambda m, x: x.norm(), -1.3),
    # logsumexp
    ("logsumexp", lambda m, x: x.logsumexp(1), R234),
    ("logsumexp_dims_keepdim", lambda m, x: m.logsumexp(x, (0, 2), keepdim=True), R234),
    # scans
    ("cumsum", lambda m, x: x.cumsum(1), R234),
    ("cumsum_neg", lambda m, x: x.cumsum(-1), R234),
    ("cumsum_dtype", lambda m, x: m.cumsum(x, 0, dtype=m.float64), R23),
    ("cumsum_0d", lambda m, x: x.cumsum(0), 0.7),
    ("cumprod", lambda m, x: x.cumprod(1), R23),
    ("cumprod_dim0", lambda m, x: x.cumprod(0), R234),
    ("cumprod_one_zero", lambda m, x: x.cumprod(1), ZERO1),
    ("cumprod_two_zeros", lambda m, x: x.cumprod(1), ZERO2),
    ("cumprod_zero_last", lambda m, x: x.cumprod(-1), ZERO_LAST),
    ("cumprod_zeros_dim0", lambda m, x: x.cumprod(0), ZERO2),
    ("cumprod_dtype", lambda m, x: m.cumprod(x, 1, dtype=m.float64), R23),
    # softmax
    ("softmax", lambda m, x: x.softmax(1), R234),
    ("softmax_dim0", lambda m, x: m.softmax(x, 0), R23),
    ("softmax_dtype", lambda m, x: m.softmax(x, -1, dtype=m.float64), R23),
    ("log_softmax", lambda m, x: x.log_softmax(-1), R234),
    ("log_softmax_dim0", lambda m, x: m.log_softmax(x, 0), R23),
    ("log_softmax_dtype", lambda m, x: m.log_softmax(x, 1, dtype=m.float64), R23),
    ("softmax_0d", lambda m, x: x.softmax(0), 0.3),
]
# Non-smooth at the sample (ties) or with a zero Jacobian: compare with torch only.
NO_GRADCHECK = {"norm_p0", "std_0d"}


def _skip_other_families(name):
    # max.other is a composite of maximum, whose derivative belongs to the pointwise family.
    if name == "max_other" and not _maximum_differentiable():
        pytest.skip("maximum's derivative (pointwise family) not merged yet")


def _ids(cases):
    return [c[0] for c in cases]


def _float_outs(out):
    outs = out if isinstance(out, tuple) else (out,)
    return [o for o in outs if o.is_floating_point()]


@pytest.mark.parametrize("name,fn,data", CASES, ids=_ids(CASES))
def test_gradcheck(name, fn, data):
    _skip_other_families(name)
    if name in NO_GRADCHECK:
        pytest.skip("zero derivative: compared with torch instead")
    x = _leaf(data)
    assert gradcheck(lambda t: fn(strata, t), (x,))


NONCONTIG = [c for c in CASES if np.ndim(c[2]) == 2 and c[0] in {
    "prod_dim", "prod_one_zero", "max", "amax", "max_dim_keepdim", "norm", "norm_p3", "cumsum_dtype", "cumprod",
    "softmax_dim0", "log_softmax_dtype", "var_unbiased_false", "logsumexp"}]


@pytest.mark.parametrize("name,fn,data", NONCONTIG, ids=_ids(NONCONTIG))
def test_gradcheck_noncontiguous(name, fn, data):
    x = _leaf(data, noncontig=True)
    assert gradcheck(lambda t: fn(strata, t), (x,))


TIE_CASES = [
    ("max_ties", lambda m, x: x.max(), TIES),
    ("min_ties", lambda m, x: x.min(), TIES),
    ("amax_ties", lambda m, x: x.amax(1), TIES),
    ("amin_ties_keepdim", lambda m, x: x.amin(1, keepdim=True), TIES),
    ("amax_ties_all", lambda m, x: x.amax((0, 1)), [[3.0, 1.0], [3.0, 3.0]]),
    ("max_dim_ties", lambda m, x: x.max(1)[0], TIES),
    ("min_dim_ties", lambda m, x: x.min(1, keepdim=True)[0], TIES),
    ("norm_pinf_ties", lambda m, x: x.norm(INF), [[1.0, -3.0], [3.0, 2.0]]),
    ("norm_pinf_dim_ties", lambda m, x: x.norm(INF, 1), [[1.0, -3.0], [3.0, 3.0]]),
    ("norm_pninf_ties", lambda m, x: x.norm(-INF), [[1.0, -1.0], [3.0, 2.0]]),
    ("norm_zero_input", lambda m, x: x.norm(), [[0.0, 0.0], [0.0, 0.0]]),
    ("norm_zero_row", lambda m, x: x.norm(dim=1), [[0.0, 0.0], [3.0, 4.0]]),
    ("norm_p3_zero_row", lambda m, x: x.norm(3, dim=1), [[0.0, 0.0], [3.0, -4.0]]),
    ("norm_p1_5_zero_row", lambda m, x: x.norm(1.5, dim=1), [[0.0, 0.0], [3.0, -4.0]]),
    ("norm_p1_zeros", lambda m, x: x.norm(1), [[0.0, 2.0], [-3.0, 0.0]]),
    ("norm_p0_5_zeros", lambda m, x: x.norm(0.5, dim=1), [[0.0, 2.0], [-3.0, 1.0]]),
    ("norm_pneg1_zeros", lambda m, x: x.norm(-1, dim=1), [[0.0, 2.0], [-3.0, 1.0]]),
    ("max_nan", lambda m, x: x.max(), [[1.0, math.nan], [math.nan, 2.0]]),
    ("amax_nan", lambda m, x: x.amax(1), [[1.0, math.nan], [3.0, 2.0]]),
    ("std_constant", lambda m, x: x.std(1), [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]),
    ("std_mean_constant", lambda m, x: m.std_mean(x, 1), [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]),
    ("logsumexp_ninf", lambda m, x: x.logsumexp(1), [[-INF, 0.0], [1.0, -INF]]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn,data", CASES + TIE_CASES, ids=_ids(CASES + TIE_CASES))
def test_matches_torch(name, fn, data, dtype):
    torch = pytest.importorskip("torch")
    _skip_other_families(name)
    xs = _leaf(data, getattr(strata, dtype))
    xt = torch.tensor(np.asarray(data, dtype=np.float64), dtype=getattr(torch, dtype), requires_grad=True)
    outs_s, outs_t = _float_outs(fn(strata, xs)), _float_outs(fn(torch, xt))
    assert len(outs_s) == len(outs_t)
    gen = np.random.default_rng(7)
    grads = [gen.standard_normal(tuple(o.shape)) for o in outs_t]
    for os_, ot in zip(outs_s, outs_t):
        assert tuple(os_.shape) == tuple(ot.shape)
        np.testing.assert_allclose(os_.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
    (gs,) = strata.autograd.grad(outs_s, [xs], [strata.tensor(g, dtype=o.dtype) for g, o in zip(grads, outs_s)])
    gt = torch.autograd.grad(outs_t, [xt], [torch.tensor(g, dtype=o.dtype) for g, o in zip(grads, outs_t)],
                             allow_unused=True)[0]
    expected = np.zeros(xt.shape) if gt is None else gt.detach().double().numpy()  # torch: None for norm p=0
    assert gs.dtype == xs.dtype and tuple(gs.shape) == tuple(xs.shape)
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (1e-10, 1e-12)
    np.testing.assert_allclose(gs.double().numpy(), expected, rtol=rtol, atol=atol, equal_nan=True)


# ---- specific values (PyTorch's documented behaviour) -------------------------------------------------------


def _grad(fn, data):
    x = _leaf(data)
    fn(x).backward()
    return x.grad.numpy()


def test_prod_zero_gradients():
    # one zero: only it gets the product of the others; two zeros: nothing gets a gradient
    np.testing.assert_allclose(_grad(lambda x: x.prod(), [2.0, 0.0, 3.0]), [0.0, 6.0, 0.0])
    np.testing.assert_allclose(_grad(lambda x: x.prod(), [0.0, 5.0, 0.0]), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(_grad(lambda x: x.prod(1).sum(), [[2.0, 0.0, 3.0], [1.0, 2.0, 4.0]]),
                               [[0.0, 6.0, 0.0], [8.0, 4.0, 2.0]])


def test_max_evenly_distributes_ties():
    np.testing.assert_allclose(_grad(lambda x: x.max(), [1.0, 4.0, 4.0, 4.0]), [0.0, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(_grad(lambda x: x.amin(), [[1.0, 4.0], [1.0, 2.0]]), [[0.5, 0.0], [0.5, 0.0]])
    # max.dim: the whole gradient to the index returned
    x = _leaf([[1.0, 4.0, 4.0]])
    v, i = x.max(1)
    assert not i.requires_grad and i.grad_fn is None
    v.sum().backward()
    expected = np.zeros((1, 3))
    expected[0, i.item()] = 1.0
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_norm_subgradient_at_zero():
    np.testing.assert_allclose(_grad(lambda x: x.norm(), [0.0, 0.0]), [0.0, 0.0])
    np.testing.assert_allclose(_grad(lambda x: x.norm(1), [0.0, -2.0]), [0.0, -1.0])


def test_std_of_constant_has_zero_gradient():
    np.testing.assert_allclose(_grad(lambda x: x.std(), [3.0, 3.0, 3.0]), [0.0, 0.0, 0.0])


def test_cumprod_zero_gradients():
    # d/dx_i sum_k w_k cumprod(x)_k for x = [2, 0, 3, 4]
    w = np.array([1.0, 2.0, 3.0, 5.0])
    g = _grad(lambda x: (x.cumprod(0) * strata.tensor(w)).sum(), [2.0, 0.0, 3.0, 4.0])
    np.testing.assert_allclose(g, [1.0, 2 * (2 + 3 * 3 + 5 * 12), 0.0, 0.0])


def test_node_names():
    x = _leaf(R23)
    assert x.prod().grad_fn.name() == "ProdBackward0"
    assert x.max().grad_fn.name() == "MaxBackward1"
    assert x.max(1)[0].grad_fn.name() == "MaxBackward0"
    assert x.amax(1).grad_fn.name() == "AmaxBackward0"
    assert x.norm().grad_fn.name() == "LinalgVectorNormBackward0"
    assert x.softmax(1).grad_fn.name() == "SoftmaxBackward0"
    assert x.log_softmax(1).grad_fn.name() == "LogSoftmaxBackward0"
    assert x.cumsum(1).grad_fn.name() == "CumsumBackward0"
    assert x.cumprod(1).grad_fn.name() == "CumprodBackward0"
    assert x.logsumexp(1).grad_fn.name() == "LogsumexpBackward0"
    assert x.var(1).grad_fn.name() == "VarBackward0"
    assert x.std().grad_fn.name() == "StdBackward0"
    assert strata.var_mean(x)[1].grad_fn.name() == "VarMeanBackward0"
    assert strata.std_mean(x, 1)[0].grad_fn.name() == "StdMeanBackward0"


def test_zero_size_and_meta():
    x = strata.zeros(0, 3, dtype=strata.float64).requires_grad_()
    for f in (lambda t: t.sum(0), lambda t: t.prod(0), lambda t: t.cumsum(0), lambda t: t.cumprod(0),
              lambda t: t.softmax(1), lambda t: t.log_softmax(0), lambda t: t.norm(dim=0), lambda t: t.amax(1)):
        (g,) = strata.autograd.grad(f(x).sum(), [x])
        assert tuple(g.shape) == (0, 3)
    m = strata.empty(2, 3, device="meta", dtype=strata.float32).requires_grad_()
    for f in (lambda t: t.prod(), lambda t: t.softmax(1), lambda t: t.log_softmax(1), lambda t: t.norm(3, 1),
              lambda t: t.amax(1), lambda t: t.logsumexp(1), lambda t: t.max(), lambda t: t.cumprod(1)):
        (g,) = strata.autograd.grad(f(m).sum(), [m])
        assert g.device.type == "meta" and tuple(g.shape) == (2, 3) and g.dtype == strata.float32


def test_errors():
    x = _leaf(R23)
    _, idx = x.max(1)
    with pytest.raises(RuntimeError, match="does not require grad"):
        strata.autograd.grad(idx.sum(), [x])
    with pytest.raises(RuntimeError):
        x.argmax().backward()


# ---- double backward ---------------------------------------------------------------------------------------

GRADGRAD = [
    ("softmax", lambda x: strata.softmax(x, 1), R23),
    ("softmax_dtype", lambda x: strata.softmax(x, 0, dtype=strata.float64), R23),
    ("log_softmax", lambda x: x.log_softmax(-1), R23),
    ("log_softmax_dtype", lambda x: strata.log_softmax(x, 1, dtype=strata.float64), R23),
    ("norm_p2_keepdim", lambda x: x.norm(2, 1, keepdim=True), R23),
    ("norm_p3_keepdim", lambda x: x.norm(3, 0, keepdim=True), R23),
    ("norm_p1_5_keepdim", lambda x: x.norm(1.5, 1, keepdim=True), R23),
    ("norm_p0_5_keepdim", lambda x: x.norm(0.5, 1, keepdim=True), R23),
    ("norm_p1_keepdim", lambda x: x.norm(1, 1, keepdim=True), R23),
    ("prod_keepdim", lambda x: x.prod(1, keepdim=True), R23),
    ("logsumexp_keepdim", lambda x: x.logsumexp(1, keepdim=True), R23),
    ("amax_keepdim", lambda x: x.amax(1, keepdim=True), R23),
]
GRADGRAD_SHAPE = [
    ("norm", lambda x: x.norm(), R23),
    ("norm_pinf", lambda x: x.norm(INF, 1), R23),
    ("prod", lambda x: x.prod(), R23),
    ("prod_one_zero", lambda x: x.prod(), ZERO1),
    ("prod_two_zeros", lambda x: x.prod(), ZERO2),
    ("prod_dim_zeros", lambda x: x.prod(1), ZERO2),
    ("var", lambda x: x.var(1), R23),
    ("var_correction0", lambda x: strata.var(x, correction=0), R23),
    ("var_mean", lambda x: strata.var_mean(x, 1), R23),
    ("std", lambda x: x.std(0), R23),
    ("std_mean", lambda x: strata.std_mean(x, 1, keepdim=True), R23),
    ("cumsum", lambda x: x.cumsum(1), R23),
    ("cumprod", lambda x: x.cumprod(1), R23),
    ("max_dim", lambda x: x.max(1)[0], R23),
    ("logsumexp", lambda x: x.logsumexp(1), R23),
]


@pytest.mark.parametrize("name,fn,data", GRADGRAD, ids=_ids(GRADGRAD))
def test_gradgradcheck(name, fn, data):
    assert _gradgradcheck(fn, _leaf(data))


@needs_shape_derivs
@pytest.mark.parametrize("name,fn,data", GRADGRAD_SHAPE, ids=_ids(GRADGRAD_SHAPE))
def test_gradgradcheck_shape_dependent(name, fn, data):
    assert _gradgradcheck(fn, _leaf(data))
