"""The rest of torch.optim against torch: Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop, LBFGS, SparseAdam,
``foreach=``/``fused=`` on every optimizer that takes them, and optim.swa_utils.

Same method as test_optim.py: equal initial parameters and hand-set gradients, several steps, every option,
float64 to 1e-12 (float32 to a few ulps), then the optimizer state compared key by key."""

import copy
import math

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

from test_optim import SHAPES, make_params  # noqa: E402  (the parameter and gradient sets of test_optim)
from test_optim import make_grads as _make_grads  # noqa: E402

STEPS = 7


def make_grads(dtype, steps=STEPS, seed=1, shapes=SHAPES):
    return _make_grads(dtype, steps, seed, shapes)


def run(lib, cls, arrays, grads, groups=None, **kw):
    params = [lib.tensor(a, requires_grad=True) for a in arrays]
    opt = cls(params if groups is None else groups(params), **kw)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = None if g is None else lib.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params], opt


def assert_close(a, b, dtype):
    rtol, atol = (1e-12, 1e-13) if dtype == "float64" else (5e-6, 5e-7)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def compare_state(topt, sopt, dtype):
    for tg, sg in zip(topt.param_groups, sopt.param_groups):
        assert {k: v for k, v in tg.items() if k != "params"} == {k: v for k, v in sg.items() if k != "params"}
        for tpar, spar in zip(tg["params"], sg["params"]):
            ts, ss = topt.state[tpar], sopt.state[spar]
            assert set(ts) == set(ss)
            for key, tv in ts.items():
                sv = ss[key]
                if key in ("step", "mu_product", "eta", "mu"):  # float32 0-d counters, compared exactly
                    assert sv.dtype == st.float32 and sv.dim() == 0, key
                    assert float(tv) == float(sv), (key, float(tv), float(sv))
                else:
                    assert_close(sv.numpy(), tv.numpy(), dtype)


CASES = [
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-4, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.02, momentum_decay=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.02, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("NAdam", dict(lr=0.01, betas=(0.5, 0.7), eps=1e-3)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.02, betas=(0.5, 0.7))),  # rho_t passes 5 within the run: both branches
    ("RAdam", dict(lr=0.02, betas=(0.6, 0.6), weight_decay=0.1)),
    ("RAdam", dict(lr=0.02, betas=(0.6, 0.6), weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.7, eps=1e-4, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1)),  # averaging starts mid-run
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    ("Rprop", dict(lr=0.05, maximize=True)),
]


def _ids(cases):
    return [f"{n}-{i}" for i, (n, _) in enumerate(cases)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CASES, ids=_ids(CASES))
def test_step_matches_torch(name, kw, dtype):
    arrays, grads = make_params(dtype), make_grads(dtype)
    # Gradients that repeat with flipped or kept signs exercise Rprop's three branches.
    grads[3] = [-g for g in grads[2]]
    grads[4] = [g * 0.5 for g in grads[3]]
    tp, topt = run(torch, getattr(torch.optim, name), arrays, grads, **kw)
    sp, sopt = run(st, getattr(st.optim, name), arrays, grads, **kw)
    for a, b in zip(sp, tp):
        assert_close(a, b, dtype)
    compare_state(topt, sopt, dtype)


FOREACH_CASES = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.02, decoupled_weight_decay=True, weight_decay=0.1)),
    ("RAdam", dict(lr=0.02, betas=(0.5, 0.7))),
    ("Adadelta", dict(lr=0.5)),
    ("ASGD", dict(lr=0.05, t0=2)),
    ("Rprop", dict(lr=0.05)),
]


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("name,kw", FOREACH_CASES, ids=_ids(FOREACH_CASES))
def test_foreach_matches_torch(name, kw, foreach):
    arrays, grads = make_params("float64"), make_grads("float64")
    tp, topt = run(torch, getattr(torch.optim, name), arrays, grads, foreach=foreach, **kw)
    sp, sopt = run(st, getattr(st.optim, name), arrays, grads, foreach=foreach, **kw)
    for a, b in zip(sp, tp):
        assert_close(a, b, "float64")
    compare_state(topt, sopt, "float64")


FUSED_CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", FUSED_CASES, ids=_ids(FUSED_CASES))
def test_fused_matches_torch(name, kw, dtype):
    arrays, grads = make_params(dtype), make_grads(dtype)
    tp, topt = run(torch, getattr(torch.optim, name), arrays, grads, fused=True, **kw)
    sp, sopt = run(st, getattr(st.optim, name), arrays, grads, fused=True, **kw)
    for a, b in zip(sp, tp):
        assert_close(a, b, dtype)
    compare_state(topt, sopt, dtype)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_argument_errors_match_torch(name):
    for lib in (torch, st):
        cls = getattr(lib.optim, name)
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
            cls([lib.zeros(2, requires_grad=True)], lr=0.1, fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
            cls([lib.zeros(2, requires_grad=True)], lr=0.1, fused=True, differentiable=True)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "NAdam", "RAdam", "Adamax", "ASGD", "Rprop", "Adadelta",
                                  "RMSprop"])
def test_capturable_refused_at_step_on_cpu_like_torch(name):
    for lib in (torch, st):
        p = lib.zeros(2, requires_grad=True)
        opt = getattr(lib.optim, name)([p], capturable=True)  # accepted at construction
        p.grad = lib.ones(2)
        with pytest.raises(AssertionError, match="capturable=True"):
            opt.step()


# test_optim.py's state-dict round trip covers Adamax, RAdam, Adadelta and Rprop too. NAdam's mu_product and
# ASGD's eta/mu are float32 scalars that loading casts to the parameter dtype (as torch does), so their
# continuation is compared with torch's here instead.
@pytest.mark.parametrize("name,kw", [("NAdam", {}), ("ASGD", {}), ("Rprop", {}), ("RAdam", {})])
def test_state_dict_layout_matches_torch_and_loads_across(name, kw):
    # A torch state dict (converted tensor by tensor) loads into the strata optimizer, which then continues
    # exactly as torch does.
    arrays, grads = make_params("float64"), make_grads("float64", steps=6)
    tparams = [torch.tensor(a, requires_grad=True) for a in arrays]
    topt = getattr(torch.optim, name)(tparams, lr=0.02, **kw)
    for gs in grads[:3]:
        for p, g in zip(tparams, gs):
            p.grad = torch.tensor(g)
        topt.step()
    tsd = topt.state_dict()
    ssd = {"param_groups": copy.deepcopy(tsd["param_groups"]),
           "state": {k: {n: st.tensor(v.numpy()) if torch.is_tensor(v) else v for n, v in s.items()}
                     for k, s in tsd["state"].items()}}
    sparams = [st.tensor(p.detach().numpy()) for p in tparams]
    sopt = getattr(st.optim, name)(sparams, lr=0.02, **kw)
    sopt.load_state_dict(ssd)
    sd = sopt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    # torch continues from a loaded copy too (loading casts scalar state to the parameter dtype).
    tparams = [p.detach().clone().requires_grad_() for p in tparams]
    topt2 = getattr(torch.optim, name)(tparams, lr=0.02, **kw)
    topt2.load_state_dict(tsd)
    topt = topt2
    for (k, s), (_, ts) in zip(sopt.state.items(), topt.state.items()):
        assert {n: v.dtype for n, v in s.items()} == {n: getattr(st, str(v.dtype)[6:]) for n, v in ts.items()}
    assert {k: set(v) for k, v in sd["state"].items()} == {k: set(v) for k, v in tsd["state"].items()}
    for gs in grads[3:]:
        for tp, sp, g in zip(tparams, sparams, gs):
            tp.grad = torch.tensor(g)
            sp.grad = st.tensor(g)
        topt.step()
        sopt.step()
    for tp, sp in zip(tparams, sparams):
        assert_close(sp.numpy(), tp.detach().numpy(), "float64")


@pytest.mark.parametrize("make,msg", [
    (lambda lib, p: lib.optim.Adamax(p, lr=-1), "Invalid learning rate"),
    (lambda lib, p: lib.optim.Adamax(p, betas=(0.9, 1.0)), "Invalid beta parameter at index 1"),
    (lambda lib, p: lib.optim.NAdam(p, momentum_decay=-1), "Invalid momentum_decay value"),
    (lambda lib, p: lib.optim.NAdam(p, eps=-1), "Invalid epsilon value"),
    (lambda lib, p: lib.optim.RAdam(p, betas=(-0.1, 0.9)), "Invalid beta parameter at index 0"),
    (lambda lib, p: lib.optim.RAdam(p, weight_decay=-1), "Invalid weight_decay value"),
    (lambda lib, p: lib.optim.Adadelta(p, rho=1.5), "Invalid rho value"),
    (lambda lib, p: lib.optim.ASGD(p, weight_decay=-1), "Invalid weight_decay value"),
    (lambda lib, p: lib.optim.Rprop(p, etas=(1.5, 2.0)), "Invalid eta values"),
    (lambda lib, p: lib.optim.SparseAdam(p, eps=0.0), "Invalid epsilon value"),
    (lambda lib, p: lib.optim.LBFGS(p, lr=-1), "Invalid learning rate"),
    (lambda lib, p: lib.optim.LBFGS([{"params": p[:1]}, {"params": p[1:]}]), "doesn't support per-parameter"),
    (lambda lib, p: lib.optim.Adam(p, lr=lib.tensor([0.1, 0.2])), "Tensor lr must be 1-element"),
])
def test_invalid_hyperparameters_like_torch(make, msg):
    for lib in (torch, st):
        with pytest.raises(ValueError, match=msg):
            make(lib, [lib.zeros(2, requires_grad=True), lib.zeros(1, requires_grad=True)])


def test_sparse_adam_refuses_dense_gradients_like_torch():
    for lib in (torch, st):
        p = lib.zeros(3, requires_grad=True)
        opt = lib.optim.SparseAdam([p], lr=0.1)
        opt.step()  # no gradient: nothing to do
        p.grad = lib.ones(3)
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            opt.step()


# ---- LBFGS -------------------------------------------------------------------------------------------------

def quartic_closure(lib, params, calls):
    """f = sum(a x^2/2 + b y^2/2 + 0.3 x y - x + 0.025 (x^4 + y^4)) over two parameters, with the gradient
    written by hand so the test does not depend on autograd. Smooth and well conditioned, so rounding
    differences stay at rounding level over the iterations instead of being amplified."""
    x, y = params
    a = lib.tensor([1.0, 2.0, 0.5, 3.0], dtype=lib.float64)
    b = lib.tensor([2.0, 0.7, 1.5, 1.0], dtype=lib.float64)

    def closure():
        calls.append(1)
        xv, yv = x.detach(), y.detach()
        f = (0.5 * a * xv * xv + 0.5 * b * yv * yv + 0.3 * xv * yv - xv + 0.025 * (xv ** 4 + yv ** 4)).sum()
        x.grad = a * xv + 0.3 * yv - 1 + 0.1 * xv ** 3
        y.grad = b * yv + 0.3 * xv + 0.1 * yv ** 3
        return f

    return closure


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.5, max_iter=7, history_size=3),
    dict(lr=1.5, max_iter=5, history_size=2),
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", max_iter=30, history_size=4, max_eval=40),
    dict(line_search_fn="strong_wolfe", tolerance_grad=1e-3, tolerance_change=1e-5),
    dict(lr=0.1, tolerance_change=1e-3),
])
def test_lbfgs_matches_torch(kw):
    x0 = np.array([-1.2, 0.5, 1.7, -0.3]), np.array([1.0, -0.4, 2.5, 0.8])
    results = []
    for lib in (torch, st):
        params = [lib.tensor(a, requires_grad=True) for a in x0]
        opt = lib.optim.LBFGS(params, **kw)
        calls = []
        closure = quartic_closure(lib, params, calls)
        losses = [float(opt.step(closure)) for _ in range(3)]
        state = opt.state[params[0]]
        results.append(([p.detach().numpy() for p in params], losses, len(calls), state["func_evals"],
                        state["n_iter"], len(state["old_dirs"])))
    (tp, tl, tc, tfe, tni, tnd), (sp, sl, sc, sfe, sni, snd) = results
    assert (sc, sfe, sni, snd) == (tc, tfe, tni, tnd)
    np.testing.assert_allclose(sl, tl, rtol=1e-11, atol=1e-14)
    for a, b in zip(sp, tp):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_lbfgs_converges_on_a_quadratic_and_stops_on_tolerance_grad():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 5))
    h = a @ a.T + 5 * np.eye(5)
    b = rng.standard_normal(5)
    p = st.zeros(5, dtype=st.float64)
    hm, bv = st.tensor(h), st.tensor(b)
    opt = st.optim.LBFGS([p], line_search_fn="strong_wolfe", max_iter=100, max_eval=200, tolerance_grad=1e-10,
                         tolerance_change=1e-14)
    evals = []

    def closure():
        evals.append(1)
        p.grad = hm @ p - bv
        return 0.5 * (p @ (hm @ p)) - bv @ p

    opt.step(closure)
    np.testing.assert_allclose(p.numpy(), np.linalg.solve(h, b), rtol=1e-6, atol=1e-8)
    # From the optimum, a looser tolerance_grad makes the next step stop after its first evaluation.
    opt2 = st.optim.LBFGS([p], tolerance_grad=1e-5)
    before = len(evals)
    opt2.step(closure)
    assert len(evals) == before + 1 and opt2.state[p]["func_evals"] == 1 and opt2.state[p]["n_iter"] == 0


def test_lbfgs_errors():
    p = st.zeros(2, dtype=st.float64)
    opt = st.optim.LBFGS([p], line_search_fn="armijo")

    def closure():
        p.grad = p - 1
        return ((p - 1) ** 2).sum()

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


@pytest.mark.skipif(not hasattr(st.Tensor, "grad_fn"), reason="autograd not merged yet")
def test_lbfgs_with_autograd_closure_matches_torch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 3))
    y = np.tanh(x @ np.array([0.5, -1.0, 2.0]))

    def fit(lib):
        w = lib.zeros(3, dtype=lib.float64, requires_grad=True)
        xt, yt = lib.tensor(x), lib.tensor(y)
        opt = lib.optim.LBFGS([w], line_search_fn="strong_wolfe", history_size=5)

        def closure():
            opt.zero_grad()
            loss = ((lib.tanh(xt @ w) - yt) ** 2).mean()
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        return w.detach().numpy()

    np.testing.assert_allclose(fit(st), fit(torch), rtol=1e-9, atol=1e-12)


# ---- swa_utils ---------------------------------------------------------------------------------------------

def _twin_models(seed=0):
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()
    smodel = st.nn.Sequential(st.nn.Linear(3, 4), st.nn.BatchNorm1d(4), st.nn.Linear(4, 2)).double()
    for sp, tp in zip(smodel.parameters(), tmodel.parameters()):
        sp.data.copy_(st.tensor(tp.detach().numpy()))
    return tmodel, smodel


def _perturb(models, rng):
    tmodel, smodel = models
    for sp, tp in zip(smodel.parameters(), tmodel.parameters()):
        d = rng.standard_normal(tuple(tp.shape))
        with torch.no_grad():
            tp.add_(torch.tensor(d))
        with st.no_grad():
            sp.add_(st.tensor(d))
    for sb, tb in zip(smodel.buffers(), tmodel.buffers()):
        if tb.is_floating_point():
            d = rng.random(tuple(tb.shape))
            tb.add_(torch.tensor(d))
            sb.add_(st.tensor(d))


@pytest.mark.parametrize("mode", ["swa", "ema", "ema_single", "swa_single", "custom"])
@pytest.mark.parametrize("use_buffers", [False, True])
def test_averaged_model_matches_torch(mode, use_buffers):
    tmodel, smodel = _twin_models()
    su, tu = st.optim.swa_utils, torch.optim.swa_utils
    kws = {
        "swa": ({}, {}),
        "ema": (dict(multi_avg_fn=tu.get_ema_multi_avg_fn(0.9)), dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.9))),
        "ema_single": (dict(avg_fn=tu.get_ema_avg_fn(0.8)), dict(avg_fn=su.get_ema_avg_fn(0.8))),
        "swa_single": (dict(avg_fn=tu.get_swa_avg_fn()), dict(avg_fn=su.get_swa_avg_fn())),
        "custom": (dict(avg_fn=lambda a, c, n: 0.5 * a + 0.5 * c), dict(avg_fn=lambda a, c, n: 0.5 * a + 0.5 * c)),
    }[mode]
    tavg = tu.AveragedModel(tmodel, use_buffers=use_buffers, **kws[0])
    savg = su.AveragedModel(smodel, use_buffers=use_buffers, **kws[1])
    rng = np.random.default_rng(1)
    for _ in range(4):
        _perturb((tmodel, smodel), rng)
        tavg.update_parameters(tmodel)
        savg.update_parameters(smodel)
    assert int(savg.n_averaged) == int(tavg.n_averaged) == 4
    tsd, ssd = tavg.state_dict(), savg.state_dict()
    assert list(tsd) == list(ssd)
    for k in tsd:
        np.testing.assert_allclose(ssd[k].numpy(), tsd[k].numpy(), rtol=1e-12, atol=1e-14, err_msg=k)
    x = rng.standard_normal((5, 3))
    tavg.eval()
    savg.eval()
    np.testing.assert_allclose(savg(st.tensor(x)).detach().numpy(), tavg(torch.tensor(x)).detach().numpy(),
                               rtol=1e-12, atol=1e-14)


def test_averaged_model_argument_errors():
    m = st.nn.Linear(2, 2)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        st.optim.swa_utils.AveragedModel(m, avg_fn=lambda *a: a[0], multi_avg_fn=lambda *a: None)
    for fn in (st.optim.swa_utils.get_ema_avg_fn, st.optim.swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match="Invalid decay value"):
            fn(1.5)


def test_update_bn_matches_torch():
    tmodel, smodel = _twin_models()
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((6, 3)) for _ in range(3)]
    tmodel.eval()
    smodel.eval()
    torch.optim.swa_utils.update_bn([(torch.tensor(b), 0) for b in batches], tmodel)
    st.optim.swa_utils.update_bn([st.tensor(b) for b in batches], smodel)
    assert not smodel.training and smodel[1].momentum == 0.1
    for sb, tb in zip(smodel.buffers(), tmodel.buffers()):
        np.testing.assert_allclose(sb.numpy(), tb.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kw", [dict(swa_lr=0.05), dict(swa_lr=[0.05, 0.2], anneal_epochs=3, anneal_strategy="linear"),
                                dict(swa_lr=0.01, anneal_epochs=0)])
def test_swalr_matches_torch(kw):
    lrs = []
    for lib in (torch, st):
        ps = [lib.zeros(1, requires_grad=True), lib.zeros(1, requires_grad=True)]
        opt = lib.optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.3}], lr=1.0)
        sched = lib.optim.swa_utils.SWALR(opt, **kw)
        seq = []
        for _ in range(12):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        lrs.append(seq)
        sd = sched.state_dict()
        assert "optimizer" not in sd and "anneal_func" not in sd
    np.testing.assert_allclose(np.array(lrs[1]), np.array(lrs[0]), rtol=1e-14)


def test_swalr_errors():
    opt = st.optim.SGD([st.zeros(1)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        st.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        st.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_refuses_integer_params_like_torch(name):
    for lib in (torch, st):
        p = lib.zeros(3, dtype=lib.int64)
        with pytest.raises(RuntimeError, match="`fused=True` requires all the params to be floating point"):
            opt = getattr(lib.optim, name)([p], lr=0.1, fused=True)
            p.grad = lib.ones(3, dtype=lib.int64)
            opt.step()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
                                     ("AdamW", dict(lr=0.01)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                     ("SGD", dict(lr=0.1)), ("Adagrad", dict(lr=0.1, lr_decay=0.01))])
def test_fused_kernels_agree_with_the_composed_update(name, kw, dtype):
    import strata.optim.adam as adam_mod

    if adam_mod._fused_adam_step_ is None:
        pytest.skip("this build has no fused optimizer kernels (decl/optim.def)")
    shapes = SHAPES + [(300, 7)]
    arrays, grads = make_params(dtype, shapes=shapes), make_grads(dtype, shapes=shapes)
    fp, fopt = run(st, getattr(st.optim, name), arrays, grads, fused=True, **kw)
    cp, copt = run(st, getattr(st.optim, name), arrays, grads, **kw)
    for a, b in zip(fp, cp):
        assert_close(a, b, dtype)
    for fpar, cpar in zip(fopt.param_groups[0]["params"], copt.param_groups[0]["params"]):
        fs, cs = fopt.state[fpar], copt.state[cpar]
        assert set(fs) == set(cs)
        for key in fs:
            if key == "step":
                assert float(fs[key]) == float(cs[key])
            else:
                assert_close(fs[key].numpy(), cs[key].numpy(), dtype)


def test_fused_falls_back_for_non_contiguous_parameters():
    base = st.tensor(np.arange(12.0).reshape(3, 4))
    p = base[:, ::2]  # a strided view: the kernel needs contiguous memory, the composed update does not
    q = p.clone()
    for t in (p, q):
        t.grad = st.ones(3, 2, dtype=st.float64)
    st.optim.Adam([p], lr=0.1, fused=True).step()
    st.optim.Adam([q], lr=0.1).step()
    np.testing.assert_array_equal(p.numpy(), q.numpy())
    np.testing.assert_array_equal(base.numpy()[:, ::2], q.numpy())
