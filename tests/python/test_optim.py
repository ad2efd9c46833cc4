"""strata.optim optimizers against torch.optim: the same initial parameters and hand-set gradients,
several steps, every option, param groups, state_dict round trips, and argument errors.

Gradients are assigned as ``p.grad = strata.tensor(...)``: before autograd lands, Tensor objects take
arbitrary attributes, and the optimizers read ``p.grad`` either way."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (), (0, 2)]
STEPS = 6


def make_params(dtype, seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def make_grads(dtype, steps=STEPS, seed=1, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]


def run_torch(cls, arrays, grads, groups=None, **kw):
    params = [torch.tensor(a, requires_grad=True) for a in arrays]
    opt = cls(params if groups is None else groups(params), **kw)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = None if g is None else torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params], opt


def run_strata(cls, arrays, grads, groups=None, **kw):
    params = [st.tensor(a) for a in arrays]
    opt = cls(params if groups is None else groups(params), **kw)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = None if g is None else st.tensor(g)
        opt.step()
    return [p.numpy() for p in params], opt


def assert_close_lists(a, b, dtype):
    rtol, atol = (1e-12, 1e-13) if dtype == "float64" else (2e-6, 2e-7)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.5, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, amsgrad=True)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, maximize=True)),
    ("Adam", dict(lr=0.02, weight_decay=0.05, decoupled_weight_decay=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.02, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, eps=1e-6, maximize=True)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_step_matches_torch(name, kw, dtype):
    arrays, grads = make_params(dtype), make_grads(dtype)
    tp, topt = run_torch(getattr(torch.optim, name), arrays, grads, **kw)
    sp, sopt = run_strata(getattr(st.optim, name), arrays, grads, **kw)
    assert_close_lists(sp, tp, dtype)
    # The optimizer state holds the same buffers under the same names.
    for tpar, spar in zip(topt.param_groups[0]["params"], sopt.param_groups[0]["params"]):
        ts, ss = topt.state[tpar], sopt.state[spar]
        assert set(ts) == set(ss)
        for key in ts:
            tv, sv = ts[key], ss[key]
            if key == "step":
                assert float(tv) == float(sv)
            else:
                assert_close_lists([sv.numpy()], [tv.numpy()], dtype)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_params_without_grad_are_skipped(name):
    arrays = make_params("float64")
    grads = make_grads("float64")
    for gs in grads:
        gs[1] = None  # the second parameter never gets a gradient
    kw = dict(lr=0.1, momentum=0.9) if name == "SGD" else {}
    tp, topt = run_torch(getattr(torch.optim, name), arrays, grads, **kw)
    sp, sopt = run_strata(getattr(st.optim, name), arrays, grads, **kw)
    assert_close_lists(sp, tp, "float64")
    np.testing.assert_array_equal(sp[1], arrays[1])
    second = sopt.param_groups[0]["params"][1]
    if name == "Adagrad":
        assert float(sopt.state[second]["step"]) == 0.0  # eager state, never stepped
    else:
        assert second not in sopt.state


@pytest.mark.parametrize("name,kw", [("SGD", dict(momentum=0.9)), ("Adam", dict(amsgrad=True)),
                                     ("RMSprop", dict(momentum=0.3, centered=True)), ("Adagrad", {})])
def test_param_groups_with_different_lr(name, kw):
    arrays, grads = make_params("float64"), make_grads("float64")

    def groups(params):
        return [{"params": params[:2], "lr": 0.2}, {"params": params[2:]}]

    tp, topt = run_torch(getattr(torch.optim, name), arrays, grads, groups=groups, lr=0.01, **kw)
    sp, sopt = run_strata(getattr(st.optim, name), arrays, grads, groups=groups, lr=0.01, **kw)
    assert_close_lists(sp, tp, "float64")
    assert [g["lr"] for g in sopt.param_groups] == [0.2, 0.01]
    for tg, sg in zip(topt.param_groups, sopt.param_groups):
        assert {k: v for k, v in tg.items() if k != "params"} == {k: v for k, v in sg.items() if k != "params"}


def test_add_param_group_fills_defaults():
    a, b = st.zeros(2), st.zeros(3)
    opt = st.optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1]["params"] == [b] or opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                     ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
                                     ("RMSprop", dict(momentum=0.5, centered=True)),
                                     ("Adagrad", dict(lr_decay=0.01)), ("Adamax", {}),
                                     ("RAdam", dict(decoupled_weight_decay=True, weight_decay=0.1)),
                                     ("Adadelta", {}), ("Rprop", {})])
def test_state_dict_round_trip_then_identical_steps(name, kw):
    cls = getattr(st.optim, name)
    arrays = make_params("float64")
    grads = make_grads("float64", steps=6)
    params = [st.tensor(a) for a in arrays]
    opt = cls([{"params": params[:1], "lr": 0.03}, {"params": params[1:]}], **kw)

    def step(o, ps, gs):
        for p, g in zip(ps, gs):
            p.grad = st.tensor(g)
        o.step()

    for gs in grads[:3]:
        step(opt, params, gs)
    sd = opt.state_dict()
    # torch's layout: state keyed by integer position, params as index lists.
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1, 2, 3]]
    assert set(sd["state"]) <= {0, 1, 2, 3}
    assert all(isinstance(v, dict) for v in sd["state"].values())

    clones = [p.clone() for p in params]
    opt2 = cls([{"params": clones[:1], "lr": 0.5}, {"params": clones[1:]}], lr=0.7)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.03
    assert opt2.param_groups[0]["params"][0] is clones[0]
    for gs in grads[3:]:
        step(opt, params, gs)
        step(opt2, clones, gs)
    for p, q in zip(params, clones):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    # Loaded state is a copy: stepping opt did not change the state opt2 loaded from.
    sd_a, sd_b = opt.state_dict(), opt2.state_dict()
    for k in sd_a["state"]:
        for key, v in sd_a["state"][k].items():
            if isinstance(v, st.Tensor):
                np.testing.assert_array_equal(v.numpy(), sd_b["state"][k][key].numpy())
                assert v is not sd_b["state"][k][key]


def test_state_dict_structure_matches_torch():
    arrays, grads = make_params("float32"), make_grads("float32", steps=2)
    _, topt = run_torch(torch.optim.Adam, arrays, grads, lr=0.01)
    _, sopt = run_strata(st.optim.Adam, arrays, grads, lr=0.01)
    tsd, ssd = topt.state_dict(), sopt.state_dict()
    assert tsd["param_groups"] == ssd["param_groups"]
    assert set(tsd["state"]) == set(ssd["state"])
    for k in tsd["state"]:
        assert set(tsd["state"][k]) == set(ssd["state"][k])


def test_state_dict_with_numeric_step_loads_and_continues():
    # A state saved with plain-number step counters (older format) still loads and steps.
    arrays, grads = make_params("float64"), make_grads("float64", steps=4)
    params = [st.tensor(a) for a in arrays]
    opt = st.optim.Adam(params, lr=0.01)
    for gs in grads[:2]:
        for p, g in zip(params, gs):
            p.grad = st.tensor(g)
        opt.step()
    sd = opt.state_dict()
    for s in sd["state"].values():
        s["step"] = float(s["step"])
    clones = [p.clone() for p in params]
    opt2 = st.optim.Adam(clones, lr=0.01)
    opt2.load_state_dict(sd)
    for gs in grads[2:]:
        for p, q, g in zip(params, clones, gs):
            p.grad = st.tensor(g)
            q.grad = st.tensor(g)
        opt.step()
        opt2.step()
    for p, q in zip(params, clones):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-15)


def test_load_state_dict_casts_to_param_dtype():
    p = st.tensor(np.ones(3, dtype="float64"))
    opt = st.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = st.ones(3, dtype=st.float64)
    opt.step()
    sd = opt.state_dict()
    q = st.ones(3, dtype=st.float32)
    opt2 = st.optim.SGD([q], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    assert opt2.state[q]["momentum_buffer"].dtype == st.float32


def test_load_state_dict_mismatch_errors():
    opt = st.optim.SGD([st.zeros(2), st.zeros(2)], lr=0.1)
    other = st.optim.SGD([st.zeros(2)], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(opt.state_dict())
    two = st.optim.SGD([{"params": [st.zeros(1)]}, {"params": [st.zeros(1)]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        other.load_state_dict(two.state_dict())


def test_zero_grad():
    p, q = st.ones(3), st.ones(2)
    opt = st.optim.SGD([p, q], lr=0.1)
    p.grad = st.ones(3)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g
    np.testing.assert_array_equal(g.numpy(), np.zeros(3))
    opt.zero_grad()
    assert p.grad is None


def test_step_closure_returns_loss():
    p = st.ones(2)
    opt = st.optim.SGD([p], lr=0.5)
    calls = []

    def closure():
        calls.append(st.is_grad_enabled())
        p.grad = st.ones(2)
        return 3.0

    assert opt.step(closure) == 3.0
    assert calls == [True]
    np.testing.assert_array_equal(p.numpy(), [0.5, 0.5])


def test_step_hooks_run():
    p = st.ones(1)
    p.grad = st.ones(1)
    opt = st.optim.Adam([p])
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: seen.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: seen.append("post"))
    opt.step()
    h1.remove()
    opt.step()
    assert seen == ["pre", "post", "post"]


@pytest.mark.parametrize("make,msg", [
    (lambda p: st.optim.SGD(p, lr=-0.1), "Invalid learning rate"),
    (lambda p: st.optim.SGD(p, lr=0.1, momentum=-1), "Invalid momentum value"),
    (lambda p: st.optim.SGD(p, lr=0.1, weight_decay=-1), "Invalid weight_decay value"),
    (lambda p: st.optim.SGD(p, lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (lambda p: st.optim.Adam(p, lr=-1e-3), "Invalid learning rate"),
    (lambda p: st.optim.Adam(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    (lambda p: st.optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    (lambda p: st.optim.Adam(p, eps=-1.0), "Invalid epsilon value"),
    (lambda p: st.optim.AdamW(p, weight_decay=-1.0), "Invalid weight_decay value"),
    (lambda p: st.optim.RMSprop(p, alpha=-0.5), "Invalid alpha value"),
    (lambda p: st.optim.RMSprop(p, lr=-1), "Invalid learning rate"),
    (lambda p: st.optim.Adagrad(p, lr_decay=-1), "Invalid lr_decay value"),
    (lambda p: st.optim.Adagrad(p, initial_accumulator_value=-1), "Invalid initial_accumulator_value value"),
])
def test_invalid_hyperparameters(make, msg):
    with pytest.raises(ValueError, match=msg):
        make([st.zeros(2)])


def test_invalid_params():
    with pytest.raises(ValueError, match="empty parameter list"):
        st.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        st.optim.SGD(st.zeros(2), lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        st.optim.SGD([{"params": {st.zeros(2)}}], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        st.optim.SGD([st.zeros(2), 3.0], lr=0.1)
    a = st.zeros(2)
    with pytest.raises(ValueError, match="more than one parameter group"):
        st.optim.SGD([{"params": [a]}, {"params": [a]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        st.optim.SGD([a, a], lr=0.1)


def test_required_default():
    from strata.optim.optimizer import required

    class Custom(st.optim.Optimizer):
        def __init__(self, params, lr=required):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            pass

    with pytest.raises(ValueError, match="didn't specify a value of required optimization parameter lr"):
        Custom([st.zeros(1)])
    assert Custom([{"params": [st.zeros(1)], "lr": 0.1}]).param_groups[0]["lr"] == 0.1


@pytest.mark.skipif(not hasattr(st.Tensor, "grad_fn"), reason="autograd not merged yet")
@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9)), ("Adam", dict(lr=0.05)),
                                     ("RMSprop", dict(lr=0.01, centered=True)), ("Adagrad", dict(lr=0.3))])
def test_training_loop_with_autograd_matches_torch(name, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.1

    def train(lib, optim):
        w = lib.zeros(3, dtype=lib.float64, requires_grad=True)
        b = lib.zeros(1, dtype=lib.float64, requires_grad=True)
        xt, yt = lib.tensor(x), lib.tensor(y)
        opt = getattr(optim, name)([w, b], **kw)
        for _ in range(30):
            opt.zero_grad()
            loss = ((xt @ w + b - yt) ** 2).mean()
            loss.backward()
            opt.step()
        return w.detach().numpy(), b.detach().numpy()

    for s, t in zip(train(st, st.optim), train(torch, torch.optim)):
        np.testing.assert_allclose(s, t, rtol=1e-10, atol=1e-12)
