"""strata.func (grad, vjp, jvp, linearize, jacrev, jacfwd, hessian, functional_call,
stack_module_state) and strata.autograd.functional against torch on the same functions."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import strata
import strata.func as sf
import strata.autograd.functional as saf
import torch.func as tf
import torch.autograd.functional as taf

LIBS = {"s": (strata, sf), "t": (torch, tf)}


def _np(x):
    if isinstance(x, (strata.Tensor, torch.Tensor)):
        return x.detach().numpy()
    return x


def assert_same(a, b, rtol=1e-9, atol=1e-11, path="result"):
    """a (strata) and b (torch) have the same nest (same Python types) and values."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, strata.Tensor), f"{path}: expected a Tensor, got {type(a).__name__}"
        assert tuple(a.shape) == tuple(b.shape), f"{path}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
        np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol, err_msg=path)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b), f"{path}: {a!r} vs dict {list(b)}"
        for k in b:
            assert_same(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(b, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {type(a).__name__}/{len(a)} vs " \
                                                         f"{type(b).__name__}/{len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, rtol, atol, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def both(build, **kw):
    """Runs build(lib, func) with strata and with torch and compares the results."""
    assert_same(build(*LIBS["s"]), build(*LIBS["t"]), **kw)


def data(lib, *shapes, seed=0):
    g = np.random.default_rng(seed)
    return [lib.tensor(g.standard_normal(s)) for s in shapes]


def mlp(lib, sizes=(4, 8, 3), seed=1):
    g = np.random.default_rng(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        lin = lib.nn.Linear(a, b).double()
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(g.standard_normal((b, a)) * 0.5))
            lin.bias.copy_(lib.tensor(g.standard_normal(b) * 0.1))
        layers += [lin, lib.nn.Tanh()] if i < len(sizes) - 2 else [lin]
    return lib.nn.Sequential(*layers)


# ------------------------------------------------------------------------------------ grad


def poly(x):
    return (3 * x ** 3 - 2 * x ** 2 + x - 5).sum()


def comp(x):
    return (x.tanh() * x.exp() + (x * x + 1).log()).sum()


@pytest.mark.parametrize("f", [poly, comp], ids=["poly", "tanh_exp_log"])
def test_grad_matches_torch(f):
    both(lambda lib, fn: fn.grad(f)(*data(lib, (5,))))
    both(lambda lib, fn: fn.grad_and_value(f)(*data(lib, (2, 3))))


def test_grad_argnums_aux_and_nests():
    def f(x, y, z):
        return (x.sin() * y).sum() + z.exp().sum(), {"x2": x * 2, "n": (z,)}

    def build(lib, fn):
        x, y, z = data(lib, (3,), (3,), (2,))
        return (fn.grad(f, argnums=(0, 2), has_aux=True)(x, y, z),
                fn.grad(f, argnums=-2, has_aux=True)(x, y, z),
                fn.grad_and_value(f, argnums=1, has_aux=True)(x, y, z))
    both(build)

    def dict_arg(lib, fn):
        x, y = data(lib, (3,), (3,))
        return fn.grad(lambda d, c: (d["a"] * d["b"].cos() * c).sum())({"a": x, "b": y}, 2.0)
    both(dict_arg)


def test_grad_results_have_no_history_unless_connected():
    x, = data(strata, (3,))
    g = sf.grad(comp)(x)
    assert not g.requires_grad and g.grad_fn is None
    # An input that requires grad keeps the result connected (torch.func does the same).
    xr = x.detach().requires_grad_()
    gr = sf.grad(comp)(xr)
    assert gr.requires_grad
    (h,) = strata.autograd.grad(gr.sum(), xr)
    xt = torch.from_numpy(_np(x)).requires_grad_()
    (ht,) = torch.autograd.grad(tf.grad(comp)(xt).sum(), xt)
    assert_same(h, ht)


def test_grad_captured_tensor_that_requires_grad_stays_connected():
    # A gradient penalty: the input gradient of a function of captured parameters, then the
    # gradient of the penalty with respect to those parameters.
    def build(lib, fn):
        w, x = data(lib, (3, 3), (3,))
        w.requires_grad_()
        gx = fn.grad(lambda x: (w @ x).tanh().sum())(x)
        assert gx.requires_grad
        (gw,) = lib.autograd.grad((gx ** 2).sum(), w)
        return gx.detach(), gw
    both(build)


# ------------------------------------------------------------------------------------ vjp / jvp


def two_out(x, y):
    return (y @ x.sin(), (x * x).exp())


def test_vjp_matches_torch():
    def build(lib, fn):
        x, y, c1, c2 = data(lib, (3,), (2, 3), (2,), (3,))
        out, vjp_fn = fn.vjp(two_out, x, y)
        out2, vjp2, aux = fn.vjp(lambda x: (x.cosh(), x.sum()), x, has_aux=True)
        return out, vjp_fn((c1, c2)), vjp_fn((c2[:2] * 0 + c1, c2)), out2, vjp2(c2), aux
    both(build)


def test_jvp_and_linearize_match_torch():
    def build(lib, fn):
        x, y, tx, ty = data(lib, (3,), (2, 3), (3,), (2, 3))
        r1 = fn.jvp(two_out, (x, y), (tx, ty))
        r2 = fn.jvp(lambda x: (comp(x), x.sum() * 2), (x,), (tx,), has_aux=True)
        out, jfn = fn.linearize(lambda x, y: y @ x.tanh(), x, y)
        return r1, r2, out, jfn(tx, ty), jfn(tx * 2, ty * 0)
    both(build)


def test_jvp_of_constant_output_is_zero():
    def build(lib, fn):
        x, = data(lib, (3,))
        return fn.jvp(lambda x: (x * 0).detach() + 1, (x,), (x,))
    both(build)


# ------------------------------------------------------------------------------------ Jacobians


def test_jacrev_jacfwd_match_torch():
    def build(lib, fn):
        x, y = data(lib, (3,), (2, 3))
        return [J(two_out, argnums=a)(x, y) for J in (fn.jacrev, fn.jacfwd) for a in (0, 1, (0, 1))]
    both(build)


def test_jacobian_aux_chunks_and_dict_args():
    def build(lib, fn):
        x, y = data(lib, (4,), (4,))
        f = lambda d: ((d["a"] * d["b"]).softmax(0), {"s": d["a"].sum()})
        return (fn.jacrev(f, has_aux=True)({"a": x, "b": y}),
                fn.jacfwd(f, has_aux=True)({"a": x, "b": y}),
                fn.jacrev(lambda x: x.exp().cumsum(0), chunk_size=3)(x),
                fn.jacrev(lambda x: x.sum())(x))
    both(build)


def test_hessian_matches_torch():
    def build(lib, fn):
        x, a = data(lib, (4,), (4, 4))
        return (fn.hessian(comp)(x),
                fn.hessian(lambda x, a: (a @ x).tanh().pow(2).sum(), argnums=(0, 1))(x, a),
                fn.hessian(lambda x: (x.exp() * x).sum())(x.reshape(2, 2)))
    both(build)


# ------------------------------------------------------------------------------------ nesting


def test_nested_transforms():
    def build(lib, fn):
        x, = data(lib, ())
        v, = data(lib, (3,))
        return (fn.grad(fn.grad(lambda x: x.sin() * x ** 3))(x),
                fn.grad(fn.grad(fn.grad(lambda x: x.exp() * x.cos())))(x),
                fn.jacrev(fn.jacrev(lambda v: v.tanh() * v.sum()))(v),
                fn.jacfwd(fn.jacfwd(lambda v: v.sin() * v.prod()))(v),
                fn.grad(lambda v: fn.vjp(lambda u: u.exp() * u, v)[1](v.cos())[0].sum())(v),
                fn.grad(lambda v: fn.jvp(lambda u: u.exp() * u, (v,), (v.cos(),))[1].sum())(v))
    both(build)


def test_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = 1: the inner derivative must not see x as its input.
    def build(lib, fn):
        x, = data(lib, ())
        return (fn.grad(lambda x: x * fn.grad(lambda y: x + y)(x))(x),
                fn.grad(lambda x: fn.grad(lambda y: x * y)(x.detach() * 0 + 3.0))(x))
    both(build)


def test_hessian_vector_product():
    def build(lib, fn):
        x, v = data(lib, (5,), (5,))
        hvp_fwd = fn.jvp(fn.grad(comp), (x,), (v,))[1]
        hvp_rev = fn.vjp(fn.grad(comp), x)[1](v)[0]
        return hvp_fwd, hvp_rev
    both(build)
    x, v = data(strata, (5,), (5,))
    assert_same(sf.jvp(sf.grad(comp), (x,), (v,))[1], taf.hvp(comp, torch.tensor(_np(x)), torch.tensor(_np(v)))[1])


# ------------------------------------------------------------------------------------ models


def test_grad_through_functional_call_mlp_cross_entropy():
    def build(lib, fn):
        model = mlp(lib)
        params = {k: v.detach() for k, v in model.named_parameters()}
        x, = data(lib, (6, 4), seed=3)
        target = lib.tensor([0, 2, 1, 1, 0, 2])

        def loss(p, x):
            return lib.nn.functional.cross_entropy(fn.functional_call(model, p, (x,)), target)
        g = fn.grad(loss)(params, x)
        jx = fn.jacrev(lambda x: fn.functional_call(model, params, x).softmax(-1))(x[:2])
        return g, jx
    both(build)


def test_functional_call_restores_and_errors():
    model = mlp(strata)
    w0 = model[0].weight
    x, = data(strata, (2, 4))
    zero = {"0.weight": strata.zeros(8, 4, dtype=strata.float64)}
    out = sf.functional_call(model, zero, (x,))
    assert model[0].weight is w0
    ref = model[2](model[1](model[0].bias.expand(2, 8)))
    assert_same(out.detach(), torch.tensor(_np(ref)))

    def boom(m, inp, out):
        raise ValueError("boom")
    h = model.register_forward_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        sf.functional_call(model, zero, (x,))
    h.remove()
    assert model[0].weight is w0
    with pytest.raises(RuntimeError, match="Missing key"):
        sf.functional_call(model, zero, (x,), strict=True)
    with pytest.raises(RuntimeError, match="Unexpected key.*'foo'"):
        sf.functional_call(model, {**dict(model.named_parameters()), "foo": x}, (x,), strict=True)
    with pytest.raises(ValueError, match="multiple dictionaries"):
        sf.functional_call(model, (zero, zero), (x,))
    with pytest.raises(TypeError, match="0.weight"):
        sf.functional_call(model, {"0.weight": 3.0}, (x,))
    from strata.nn.utils import stateless
    assert_same(stateless.functional_call(model, zero, x).detach(), torch.tensor(_np(out)))


def test_functional_call_tied_weights():
    def build(lib, fn):
        a = lib.nn.Linear(2, 2, bias=False).double()
        b = lib.nn.Linear(2, 2, bias=False).double()
        with lib.no_grad():
            a.weight.copy_(lib.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=lib.float64))
        b.weight = a.weight
        m = lib.nn.Sequential(a, b)
        x, = data(lib, (1, 2))
        w = lib.eye(2, dtype=lib.float64) * 2
        return fn.functional_call(m, {"0.weight": w}, x), fn.functional_call(m, {"0.weight": w}, x,
                                                                               tie_weights=False).detach()
    both(build)
    m = strata.nn.Sequential(strata.nn.Linear(2, 2), strata.nn.Linear(2, 2))
    m[1].weight = m[0].weight
    with pytest.raises(ValueError, match="tied"):
        sf.functional_call(m, {"0.weight": strata.eye(2), "1.weight": strata.eye(2) * 2}, strata.ones(1, 2))


def test_maml_inner_step_meta_gradient():
    def build(lib, fn):
        model = mlp(lib, (2, 16, 1))
        params = {k: v.detach().requires_grad_() for k, v in model.named_parameters()}
        xs, xq = data(lib, (5, 2), (5, 2), seed=4)
        ys, yq = xs.sin().sum(1, keepdim=True), xq.sin().sum(1, keepdim=True)

        def loss(p, x, y):
            return ((fn.functional_call(model, p, (x,)) - y) ** 2).mean()
        g = fn.grad(loss)(params, xs, ys)
        fast = {k: params[k] - 0.1 * g[k] for k in params}
        meta = loss(fast, xq, yq)
        grads = lib.autograd.grad(meta, list(params.values()))
        return meta.detach(), dict(zip(params, grads))
    both(build)


def test_stack_module_state_ensemble():
    def build(lib, fn):
        models = [mlp(lib, seed=s) for s in range(3)]
        params, buffers = fn.stack_module_state(models)
        x, = data(lib, (2, 4))
        base = mlp(lib)
        outs = [fn.functional_call(base, ({k: v[i] for k, v in params.items()}, buffers), (x,))
                for i in range(3)]
        grads = [fn.grad(lambda p: fn.functional_call(base, p, (x,)).pow(2).sum())(
            {k: v[i] for k, v in params.items()}) for i in range(3)]
        return [o.detach() for o in outs], grads, {k: (v.shape[0], v.requires_grad, v.is_leaf)
                                                   for k, v in params.items()}
    both(build)
    with pytest.raises(RuntimeError, match="at least one model"):
        sf.stack_module_state([])
    with pytest.raises(RuntimeError, match="training/eval"):
        sf.stack_module_state([mlp(strata), mlp(strata).eval()])


def test_gp_marginal_likelihood_gradient():
    def build(lib, fn):
        x, y = data(lib, (8, 1), (8,), seed=5)

        def nll(hyp):
            ls, sf2, sn2 = hyp[0].exp(), hyp[1].exp(), hyp[2].exp()
            k = sf2 * (-(x - x.T) ** 2 / (2 * ls * ls)).exp() + sn2 * lib.eye(8, dtype=lib.float64)
            chol = lib.linalg.cholesky(k)
            alpha = lib.cholesky_solve(y.unsqueeze(1), chol)
            return 0.5 * (y.unsqueeze(1) * alpha).sum() + chol.diagonal().log().sum()
        hyp = lib.tensor([0.1, 0.2, -1.0], dtype=lib.float64)
        return fn.grad_and_value(nll)(hyp), fn.hessian(nll)(hyp)
    both(build, rtol=1e-8)


# ------------------------------------------------------------------------------------ errors


def test_errors_like_torch():
    x, = data(strata, (3,))
    s = x.sum()
    with pytest.raises(RuntimeError, match="scalar Tensor, got tensor with 1 dims"):
        sf.grad(lambda x: x * 2)(x)
    with pytest.raises(RuntimeError, match="to return a Tensor"):
        sf.grad(lambda x: {"a": x})(s)
    with pytest.raises(RuntimeError, match="aux must hold only Tensors"):
        sf.grad(lambda x: (x.sum(), 3), has_aux=True)(x)
    with pytest.raises(RuntimeError, match=r"should be a tuple: \(output, aux\)"):
        sf.grad(lambda x: x.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="Got argnum=1, but only 1 positional inputs"):
        sf.grad(lambda x: x.sum(), argnums=1)(x)
    with pytest.raises(RuntimeError, match="Got argnum=-2"):
        sf.jacrev(lambda x: x, argnums=-2)(x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        sf.grad(lambda x: x.sum(), argnums=())
    with pytest.raises(RuntimeError, match="unique"):
        sf.grad(lambda x, y: x.sum(), argnums=(0, 0))
    with pytest.raises(ValueError, match="must be Tensor"):
        sf.grad(lambda x: x)(3.0)
    _, fn = sf.vjp(lambda x: (x, x), x)
    with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
        fn(x)
    _, fn = sf.vjp(lambda x: x, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn(strata.ones(2, dtype=strata.float64))
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        sf.jvp(lambda x: x, x, x)
    with pytest.raises(RuntimeError, match="different size"):
        sf.jvp(lambda x: x, (x,), (strata.ones(2, dtype=strata.float64),))
    with pytest.raises(RuntimeError, match="same python structure"):
        sf.jvp(lambda x, y: x, (x, x), (x,))
    with pytest.raises(ValueError, match="chunk_size"):
        sf.jacrev(lambda x: x, chunk_size=0)
    with pytest.raises(RuntimeError, match="non-empty output"):
        sf.vjp(lambda x: (), x)


# ------------------------------------------------------------------------------------ autograd.functional


def _fns(lib):
    return {
        "single": (lambda x: x.exp() * x, "x"),
        "tuple_in": (lambda x, y: y @ x.sin(), "xy"),
        "tuple_out": (lambda x: (x.exp(), x.sum()), "x"),
        "both": (lambda x, y: (y @ x.sin(), x * 2), "xy"),
        "unused": (lambda x, y: x.exp(), "xy"),
    }


def _args(lib, which):
    x, y = data(lib, (3,), (2, 3))
    return x if which == "x" else (x, y)


@pytest.mark.parametrize("name", list(_fns(strata)))
def test_autograd_functional_jacobian(name):
    def build(lib, fn):
        M = saf if lib is strata else taf
        f, which = _fns(lib)[name]
        a = _args(lib, which)
        return (M.jacobian(f, a), M.jacobian(f, a, vectorize=True, strategy="forward-mode"),
                M.jacobian(f, a, create_graph=True))
    both(build)


def test_autograd_functional_products_and_hessian():
    def build(lib, fn):
        M = saf if lib is strata else taf
        x, y = data(lib, (3,), (2, 3))
        sq = lambda x, y: (y @ x).pow(2).sum() + x.exp().sum()
        return (M.vjp(lambda x, y: (y @ x.sin(), x * 2), (x, y), (y[:, 0], x)),
                M.vjp(lambda x: x.sum(), x),
                M.jvp(lambda x, y: (y @ x.sin(), x * 2), (x, y), (x, y)),
                M.jvp(lambda x: x.exp(), x, x),
                M.hvp(sq, (x, y), (x, y)), M.vhp(sq, (x, y), (x, y)),
                M.hvp(comp, x, x), M.vhp(comp, x, x),
                M.hessian(comp, x), M.hessian(sq, (x, y)),
                M.hessian(comp, x, vectorize=True, outer_jacobian_strategy="forward-mode"))
    both(build)


def test_autograd_functional_create_graph_and_strict():
    x, = data(strata, (3,))
    xr = x.detach().requires_grad_()
    out, v = saf.vjp(lambda x: x.exp(), xr, x, create_graph=True)
    assert v.requires_grad and out.requires_grad
    out, v = saf.vjp(lambda x: x.exp(), xr, x)
    assert not v.requires_grad and not out.requires_grad
    (g,) = strata.autograd.grad(saf.hessian(comp, xr, create_graph=True).sum(), xr)
    xt = torch.tensor(_np(x), requires_grad=True)
    (gt,) = torch.autograd.grad(taf.hessian(comp, xt, create_graph=True).sum(), xt)
    assert_same(g, gt)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        saf.jacobian(lambda x, y: x * 2, (x, x), strict=True)
    with pytest.raises(RuntimeError, match="does not require gradients"):
        saf.vjp(lambda x: x.detach(), x, x, strict=True)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        saf.hessian(lambda x: (x.sum(), x.sum()), x)
    with pytest.raises(RuntimeError, match="single element"):
        saf.hvp(lambda x: x, x, x)
    with pytest.raises(RuntimeError, match="invalid size"):
        saf.vjp(lambda x: x, x, strata.ones(2, dtype=strata.float64))
    with pytest.raises(RuntimeError, match="v can only be None"):
        saf.jvp(lambda x: x, x)
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        saf.jacobian(lambda x: x, x, strategy="forward-mode")
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        saf.jacobian(lambda x: x, [x])


def test_strata_func_as_torch_func():
    code = ("import strata.torch_alias as a; a.install(); import torch; from torch.func import grad, "
            "functional_call; import torch.autograd.functional as F; import strata; "
            "assert torch.func is strata.func and grad is strata.func.grad; "
            "assert F.hessian is strata.autograd.functional.hessian; "
            "from torch.nn.utils.stateless import functional_call as fc; print(grad(lambda x: x * x)(torch.tensor(3.0)))")
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "6." in r.stdout


# ------------------------------------------------------------------------------------ second derivatives of ops


def _op_cases(lib):
    F = lib.nn.functional
    g = np.random.default_rng(7)
    w = lib.tensor(g.standard_normal((4, 4)))
    t = lib.tensor([0, 3, 1])
    eye3 = lib.eye(3, dtype=lib.float64)
    return {
        "softmax": lambda x: (F.softmax(x, -1) * w[:3]).sum(),
        "log_softmax": lambda x: (F.log_softmax(x, -1) * w[:3]).sum(),
        "cross_entropy": lambda x: F.cross_entropy(x, t),
        "nll_loss": lambda x: F.nll_loss(F.log_softmax(x, 1), t),
        "mse_loss": lambda x: F.mse_loss(x, w[:3]),
        "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, w[:3].sigmoid()),
        "kl_div": lambda x: F.kl_div(F.log_softmax(x, 1), F.softmax(w[:3], 1), reduction="batchmean"),
        "smooth_l1": lambda x: F.smooth_l1_loss(x, w[:3]),
        "gelu": lambda x: F.gelu(x).pow(2).sum(),
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh").pow(2).sum(),
        "silu": lambda x: F.silu(x).pow(2).sum(),
        "mish": lambda x: F.mish(x).pow(2).sum(),
        "elu": lambda x: F.elu(x).pow(2).sum(),
        "softplus": lambda x: F.softplus(x).pow(2).sum(),
        "logsigmoid": lambda x: F.logsigmoid(x).pow(2).sum(),
        "relu_leaky": lambda x: (F.relu(x) * x + F.leaky_relu(x, 0.1) * x).sum(),
        "sigmoid_tanh": lambda x: (x.sigmoid() * x.tanh()).pow(2).sum(),
        "layer_norm": lambda x: (F.layer_norm(x, (4,)) * w[:3]).pow(2).sum(),
        "rms_norm": lambda x: (F.rms_norm(x, (4,)) * w[:3]).pow(2).sum(),
        "group_norm": lambda x: (F.group_norm(x, 2) * w[:3]).pow(2).sum(),
        "batch_norm_train": lambda x: (F.batch_norm(x, None, None, training=True) * w[:3]).pow(2).sum(),
        "normalize": lambda x: (F.normalize(x, dim=1) * w[:3]).pow(2).sum(),
        "cosine_similarity": lambda x: F.cosine_similarity(x, w[:3]).pow(2).sum(),
        "sdpa": lambda x: F.scaled_dot_product_attention(x[None], w[None, :3], x[None]).pow(2).sum(),
        "logsumexp": lambda x: x.logsumexp(1).pow(2).sum(),
        "logcumsumexp": lambda x: x.logcumsumexp(1).pow(2).sum() + (x.logcumsumexp(0) * w[:3]).sum(),
        "matmul": lambda x: (x @ w @ x.T).sum(),
        "einsum": lambda x: lib.einsum("ij,jk,ik->", x, w, x),
        "norm": lambda x: x.norm() ** 3,
        "vector_norm": lambda x: lib.linalg.vector_norm(x, dim=1).pow(3).sum(),
        "var_std": lambda x: x.var(1).pow(2).sum() + x.std(0).pow(3).sum(),
        "prod_cumprod": lambda x: x.prod(1).sum() + x.cumprod(1).sum(),
        "amax": lambda x: (x.amax(1) ** 2).sum(),
        "abs_sqrt_rsqrt": lambda x: (x.abs() ** 3).sum() + ((x * x + 1).sqrt() * (x * x + 2).rsqrt()).sum(),
        "pow_tensor": lambda x: ((x * x + 1) ** w[:3]).sum(),
        "div_atan2": lambda x: (x / (x * x + 2)).sum() + lib.atan2(x, w[:3] + 3).pow(2).sum(),
        "erf_log1p_expm1": lambda x: x.erf().pow(2).sum() + ((x * x).log1p() * x.expm1()).sum(),
        "where_clamp": lambda x: lib.where(x > 0, x ** 3, x ** 2).sum() + (x.clamp(-0.5, 0.5) * x).sum(),
        "index_gather": lambda x: (x[:, [0, 2]] ** 3).sum() + (x.gather(1, t[:, None]) ** 3).sum(),
        "cat_stack_pad": lambda x: (lib.cat([x, x * 2], 0) ** 3).sum() + (F.pad(x, (1, 1)) ** 3).sum(),
        "scatter_add": lambda x: (lib.zeros(4, 4, dtype=x.dtype).scatter_add(0, t[:, None].expand(3, 4), x) ** 3).sum(),
        "sort_topk": lambda x: (x.sort(1).values ** 3 * w[:3]).sum() + (x.topk(2).values ** 3).sum(),
        "det_inv": lambda x: lib.linalg.det(x[:, :3] + eye3 * 3) + lib.linalg.inv(x[:, :3] + eye3 * 3).sum(),
        "slogdet_solve": lambda x: (lib.linalg.slogdet(x[:, :3] + eye3 * 3)[1]
                                    + lib.linalg.solve(x[:, :3] + eye3 * 3, w[:3, 0]).sum()),
        "cholesky": lambda x: lib.linalg.cholesky(x[:, :3] @ x[:, :3].T + eye3).sum(),
        "pools_interp": lambda x: (F.avg_pool1d(x[None], 2).pow(3).sum() + F.max_pool1d(x[None], 2).pow(3).sum()
                                   + F.interpolate(x[None], scale_factor=2, mode="linear").pow(3).sum()),
        "conv1d": lambda x: (F.conv1d(x[None], w[:, :3, None].reshape(4, 3, 1)) ** 2).sum(),
        "lerp_addcmul_xlogy": lambda x: (lib.lerp(x, w[:3], 0.3).pow(3).sum() + lib.addcmul(x, x, w[:3]).pow(2).sum()
                                         + lib.xlogy(x * x + 1, x * x + 2).sum()),
        "glu_hardswish": lambda x: F.glu(x, 1).pow(2).sum() + F.hardswish(x).pow(2).sum(),
        "lgamma_digamma": lambda x: (x * x + 1).lgamma().pow(2).sum() + (x * x + 1).digamma().sum(),
    }


@pytest.mark.parametrize("name", list(_op_cases(strata)))
def test_hessian_of_op(name):
    # hessian = jacfwd(jacrev): the forward-over-reverse needs each op's derivative to be
    # differentiable twice over (the double-vjp jvp differentiates the double backward).
    def build(lib, fn):
        f = _op_cases(lib)[name]
        x = lib.tensor(np.random.default_rng(3).standard_normal((3, 4)))
        return fn.hessian(f)(x), fn.jacrev(fn.jacrev(f))(x)
    both(build, rtol=1e-7, atol=1e-9)


def test_small_cases_like_torch():
    def build(lib, fn):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64)
        with lib.no_grad():
            g_nograd = fn.grad(lambda x: (x ** 3).sum())(x)
        lin = lib.nn.Linear(2, 1).double()
        p = {"weight": lib.ones(1, 2, dtype=lib.float64), "bias": lib.zeros(1, dtype=lib.float64)}
        return (g_nograd, fn.grad(lambda x: lib.tensor(3.0))(x), fn.jacrev(lambda x: lib.ones(2))(x),
                fn.jvp(lambda x: (x, (x > 0).long()), (x,), (x,)),
                fn.functional_call(lin, p, (), {"input": x}).detach())
    both(build)


def test_functionalize_batch_norm_and_unwrap():
    def build(lib, fn):
        x, = data(lib, (4,))

        def f(x):
            y = x.clone()
            y.add_(1)
            return y.view(2, 2), x[:2]
        a = fn.functionalize(f)(x)
        b = fn.functionalize(f, remove="mutations_and_views")(x)
        bn = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.BatchNorm1d(3)).double()
        fn.replace_all_batch_norm_modules_(bn)
        m = bn[1]
        return a, b, (m.running_mean is None, m.running_var is None, m.num_batches_tracked is None,
                      m.track_running_stats), fn.debug_unwrap(x)
    both(build)
    with pytest.raises(RuntimeError, match="invalid argument for remove"):
        sf.functionalize(lambda x: x, remove="views")
    x, = data(strata, (4,))
    out = sf.functionalize(lambda x: x[:2], remove="mutations_and_views")(x)
    out.add_(100)
    assert float(x[0]) < 50  # the output is a copy, not a view of the input


def test_with_vmap_per_example_grads_and_ensembles():
    # strata.func.vmap (one call per entry today; a batching key later) composed with grad,
    # functional_call, stack_module_state and jacrev, against torch.func.
    def build(lib, fn):
        model = mlp(lib, (4, 6, 3))
        params = {k: v.detach() for k, v in model.named_parameters()}
        x, y = data(lib, (5, 4), (5, 3), seed=8)

        def loss(p, xi, yi):
            return ((fn.functional_call(model, p, (xi[None],)) - yi[None]) ** 2).sum()
        per_example = fn.vmap(fn.grad(loss), in_dims=(None, 0, 0))(params, x, y)
        models = [mlp(lib, (4, 6, 3), seed=s) for s in range(3)]
        sp, sb = fn.stack_module_state(models)
        ens = fn.vmap(lambda p, b, xx: fn.functional_call(model, (p, b), (xx,)), in_dims=(0, 0, None))(sp, sb, x)
        jac = fn.vmap(fn.jacrev(lambda v: v.sin() * v.sum()))(x)
        return per_example, ens.detach(), jac
    both(build)


@pytest.mark.parametrize("shape", [(2, 4, 4), (2, 5, 3), (2, 3, 5)], ids=["square", "tall", "wide"])
def test_lu_factor_and_lu_solve_derivatives(shape):
    # linalg.lu_factor / lu_solve / lu are differentiable (first and second order) as in torch.
    def build(lib, fn):
        a, w = data(lib, shape, shape, seed=9)
        L = lib.linalg
        f = lambda a: (L.lu_factor(a)[0] * w).sum() + (L.lu_factor(a)[0] ** 2).sum()
        out = [fn.jacrev(lambda a: L.lu_factor(a)[0])(a), fn.hessian(f)(a),
               fn.jacrev(lambda a: L.lu(a).L @ L.lu(a).U)(a)]
        if shape[-1] == shape[-2]:
            b, bt = data(lib, (2, 4, 3), (2, 3, 4), seed=10)
            for left in (True, False):
                for adjoint in (False, True):
                    out.append(fn.jacrev(lambda a, r: L.lu_solve(*L.lu_factor(a), r, left=left, adjoint=adjoint),
                                         argnums=(0, 1))(a, b if left else bt))
            out.append(fn.hessian(lambda a: L.lu_solve(*L.lu_factor(a), b).pow(2).sum())(a))
        return out
    both(build, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 5, 100])
def test_jacrev_chunks_across_outputs_and_args(chunk_size):
    def build(lib, fn):
        a, = data(lib, (7,))
        b = lib.arange(8.0, dtype=lib.float64)
        f = lambda a, b: (a.sin() * b.sum(), (a * b[:7]).exp(), b.reshape(2, 4))
        return fn.jacrev(f, argnums=(0, 1), chunk_size=chunk_size)(a, b)
    both(build)


def test_vmap_of_jacrev_pulls_all_rows_in_one_backward(monkeypatch):
    # vmap(jacrev(f)): the cotangent rows are batched at a level of their own inside vmap, and the batched
    # autograd.grad runs the engine once for all of them (it used to take one backward per row)
    import strata.func._transforms as tr
    calls = []
    real = tr._autograd_grad

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(tr, "_autograd_grad", counting)
    w = np.random.default_rng(4).standard_normal((6, 3))
    x = np.random.default_rng(5).standard_normal((4, 3))
    ours = sf.vmap(sf.jacrev(lambda v: (strata.tensor(w) @ v).tanh() * v.sum()))(strata.tensor(x))
    ref = tf.vmap(tf.jacrev(lambda v: (torch.tensor(w) @ v).tanh() * v.sum()))(torch.tensor(x))
    np.testing.assert_allclose(_np(ours), ref.numpy(), rtol=1e-12, atol=1e-12)
    assert len(calls) == 1, len(calls)
    # two arguments, a second-order Jacobian, an inner vmap, a batch dim that is not leading
    g = lambda u, v: (u * v.cos()).sum(0) + u
    a = sf.vmap(sf.jacrev(g, argnums=(0, 1)))(strata.tensor(x), strata.tensor(2 * x))
    b = tf.vmap(tf.jacrev(g, argnums=(0, 1)))(torch.tensor(x), torch.tensor(2 * x))
    for p, q in zip(a, b):
        np.testing.assert_allclose(_np(p), q.numpy(), rtol=1e-12, atol=1e-12)
    h = lambda v: (v.sin() * v.sum()).exp()
    np.testing.assert_allclose(_np(sf.vmap(sf.jacrev(sf.jacrev(h)))(strata.tensor(x))),
                               tf.vmap(tf.jacrev(tf.jacrev(h)))(torch.tensor(x)).numpy(), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(_np(sf.vmap(sf.vmap(sf.jacrev(h)))(strata.tensor(x[:, None]))),
                               tf.vmap(tf.vmap(tf.jacrev(h)))(torch.tensor(x[:, None])).numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(sf.vmap(sf.jacrev(h), in_dims=1)(strata.tensor(x.T.copy()))),
                               tf.vmap(tf.jacrev(h))(torch.tensor(x)).numpy(), rtol=1e-12, atol=1e-12)
