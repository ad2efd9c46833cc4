"""strata.optim.lr_scheduler against torch.optim.lr_scheduler: the learning rates (and OneCycleLR's
momentum / beta1) over 20+ steps must equal torch's to 1e-12, for one and two parameter groups."""

import math
import warnings

import pytest

import strata as st

torch = pytest.importorskip("torch")

STEPS = 30


def _opts(opt_name, opt_kw, two_groups):
    tp = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    sp = [st.zeros(2), st.zeros(3)]
    if two_groups:
        tg = [{"params": tp[:1]}, {"params": tp[1:], "lr": 0.03}]
        sg = [{"params": sp[:1]}, {"params": sp[1:], "lr": 0.03}]
    else:
        tg, sg = tp, sp
    return getattr(torch.optim, opt_name)(tg, **opt_kw), getattr(st.optim, opt_name)(sg, **opt_kw)


def _momenta(opt):
    out = []
    for g in opt.param_groups:
        if "betas" in g:
            out.append(g["betas"])
        else:
            out.append(g.get("momentum"))
    return out


def _assert_seq_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, (tuple, list)):
            _assert_seq_equal(x, y)
        elif x is None:
            assert y is None
        else:
            assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15), (a, b)


SCHEDULERS = [
    ("StepLR", dict(step_size=4, gamma=0.5), "SGD", dict(lr=0.1)),
    ("MultiStepLR", dict(milestones=[3, 7, 7, 15], gamma=0.3), "SGD", dict(lr=0.1)),
    ("ExponentialLR", dict(gamma=0.9), "Adam", dict(lr=0.01)),
    ("CosineAnnealingLR", dict(T_max=10), "SGD", dict(lr=0.1)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001), "SGD", dict(lr=0.1)),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.95 ** e + 0.01 * e), "SGD", dict(lr=0.1)),
    ("LinearLR", dict(), "SGD", dict(lr=0.1)),
    ("LinearLR", dict(start_factor=0.2, end_factor=0.9, total_iters=12), "AdamW", dict(lr=0.1)),
    ("ConstantLR", dict(), "SGD", dict(lr=0.1)),
    ("ConstantLR", dict(factor=0.6, total_iters=9), "Adam", dict(lr=0.1)),
    ("PolynomialLR", dict(total_iters=12, power=2.0), "SGD", dict(lr=0.1)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=STEPS), "SGD", dict(lr=0.1, momentum=0.9)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=STEPS, anneal_strategy="linear"), "SGD",
     dict(lr=0.1, momentum=0.9)),
    ("OneCycleLR", dict(max_lr=0.01, epochs=3, steps_per_epoch=10, pct_start=0.25), "Adam", dict(lr=0.1)),
    ("OneCycleLR", dict(max_lr=0.02, total_steps=STEPS, three_phase=True, div_factor=10.0, final_div_factor=100.0,
                        base_momentum=0.8, max_momentum=0.9), "Adam", dict(lr=0.1)),
    ("OneCycleLR", dict(max_lr=0.02, total_steps=STEPS, cycle_momentum=False), "RMSprop", dict(lr=0.1)),
]


@pytest.mark.parametrize("two_groups", [False, True])
@pytest.mark.parametrize("sched,skw,opt,okw", SCHEDULERS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SCHEDULERS)])
def test_sequence_matches_torch(sched, skw, opt, okw, two_groups):
    topt, sopt = _opts(opt, okw, two_groups)
    if sched == "OneCycleLR" and two_groups:
        skw = dict(skw, max_lr=[skw["max_lr"], skw["max_lr"] * 2])
    tsched = getattr(torch.optim.lr_scheduler, sched)(topt, **skw)
    ssched = getattr(st.optim.lr_scheduler, sched)(sopt, **skw)
    steps = STEPS - 1 if sched == "OneCycleLR" else STEPS
    t_lrs, s_lrs = [tsched.get_last_lr()], [ssched.get_last_lr()]
    t_mom, s_mom = [_momenta(topt)], [_momenta(sopt)]
    for _ in range(steps):
        topt.step()
        sopt.step()
        tsched.step()
        ssched.step()
        t_lrs.append(tsched.get_last_lr())
        s_lrs.append(ssched.get_last_lr())
        t_mom.append(_momenta(topt))
        s_mom.append(_momenta(sopt))
    _assert_seq_equal(t_lrs, s_lrs)
    _assert_seq_equal(t_mom, s_mom)
    assert [g["lr"] for g in sopt.param_groups] == s_lrs[-1]
    assert ssched.last_epoch == tsched.last_epoch


def test_one_cycle_past_total_steps_raises():
    opt = st.optim.SGD([st.zeros(1)], lr=0.1, momentum=0.9)
    sched = st.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched.step()
        sched.step()
        sched.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
            sched.step()


@pytest.mark.parametrize("make,exc,msg", [
    (lambda o: st.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0), ValueError, "You must define either total_steps"),
    (lambda o: st.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=0), ValueError,
     "Expected positive integer total_steps"),
    (lambda o: st.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=1.5), ValueError,
     "pct_start"),
    (lambda o: st.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="exp"), ValueError,
     "anneal_strategy must be one of 'cos' or 'linear'"),
    (lambda o: st.optim.lr_scheduler.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=5), ValueError,
     "max_lr must have the same length as optimizer.param_groups"),
    (lambda o: st.optim.lr_scheduler.LinearLR(o, start_factor=0.0), ValueError,
     "Starting multiplicative factor"),
    (lambda o: st.optim.lr_scheduler.LinearLR(o, end_factor=1.5), ValueError, "Ending multiplicative factor"),
    (lambda o: st.optim.lr_scheduler.LambdaLR(o, [lambda e: 1.0, lambda e: 1.0]), ValueError,
     "Expected 1 lr_lambdas, but got 2"),
    (lambda o: st.optim.lr_scheduler.StepLR(o, 2, last_epoch=3), KeyError, "initial_lr"),
    (lambda o: st.optim.lr_scheduler.StepLR(object(), 2), TypeError, "is not an Optimizer"),
])
def test_scheduler_errors(make, exc, msg):
    opt = st.optim.SGD([st.zeros(1)], lr=0.1, momentum=0.9)
    with pytest.raises(exc, match=msg):
        make(opt)


def test_one_cycle_needs_momentum():
    opt = st.optim.Adagrad([st.zeros(1)])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        st.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5)


@pytest.mark.parametrize("sched,skw", [("StepLR", dict(step_size=3, gamma=0.5)),
                                       ("MultiStepLR", dict(milestones=[2, 5, 5])),
                                       ("ExponentialLR", dict(gamma=0.8)),
                                       ("CosineAnnealingLR", dict(T_max=6, eta_min=0.01)),
                                       ("LinearLR", dict(start_factor=0.25, total_iters=4)),
                                       ("ConstantLR", dict(factor=0.5, total_iters=4)),
                                       ("PolynomialLR", dict(total_iters=8, power=0.5))])
def test_step_with_epoch_uses_closed_form(sched, skw):
    topt, sopt = _opts("SGD", dict(lr=0.1), False)
    tsched = getattr(torch.optim.lr_scheduler, sched)(topt, **skw)
    ssched = getattr(st.optim.lr_scheduler, sched)(sopt, **skw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in [3, 7, 2, 11]:
            tsched.step(epoch)
            ssched.step(epoch)
            _assert_seq_equal(tsched.get_last_lr(), ssched.get_last_lr())


@pytest.mark.parametrize("sched,skw", [("StepLR", dict(step_size=3, gamma=0.5)),
                                       ("CosineAnnealingLR", dict(T_max=6)),
                                       ("OneCycleLR", dict(max_lr=0.3, total_steps=25))])
def test_scheduler_state_dict_round_trip(sched, skw):
    def build():
        opt = st.optim.SGD([st.zeros(2)], lr=0.1, momentum=0.9)
        return opt, getattr(st.optim.lr_scheduler, sched)(opt, **skw)

    opt, s = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            opt.step()
            s.step()
        osd, ssd = opt.state_dict(), s.state_dict()
        assert "optimizer" not in ssd
        opt2, s2 = build()
        opt2.load_state_dict(osd)
        s2.load_state_dict(ssd)
        for _ in range(10):
            opt.step()
            opt2.step()
            s.step()
            s2.step()
            assert s.get_last_lr() == s2.get_last_lr()
            assert opt.param_groups[0]["momentum"] == opt2.param_groups[0]["momentum"]


def test_lambda_state_dict_keeps_callable_objects():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    opt = st.optim.SGD([st.zeros(1)], lr=1.0)
    s = st.optim.lr_scheduler.LambdaLR(opt, Decay(0.5))
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}]
    s2 = st.optim.lr_scheduler.LambdaLR(st.optim.SGD([st.zeros(1)], lr=1.0), Decay(0.9))
    s2.load_state_dict(sd)
    assert s2.lr_lambdas[0].rate == 0.5
    fn = st.optim.lr_scheduler.LambdaLR(st.optim.SGD([st.zeros(1)], lr=1.0), lambda e: 1.0)
    assert fn.state_dict()["lr_lambdas"] == [None]


def test_warns_when_scheduler_steps_before_optimizer():
    opt = st.optim.SGD([st.zeros(1)], lr=0.1)
    s = st.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    opt2 = st.optim.SGD([st.zeros(1)], lr=0.1)
    s2 = st.optim.lr_scheduler.StepLR(opt2, 2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()


def _pair_sequential(lib, opt):
    lrs = lib.optim.lr_scheduler
    warm = lrs.LinearLR(opt, start_factor=0.1, total_iters=4)
    cos = lrs.CosineAnnealingLR(opt, T_max=10, eta_min=0.001)
    step = lrs.StepLR(opt, step_size=3, gamma=0.5)
    return lrs.SequentialLR(opt, [warm, cos, step], milestones=[4, 12])


@pytest.mark.parametrize("two_groups", [False, True])
def test_sequential_lr_matches_torch(two_groups):
    topt, sopt = _opts("SGD", dict(lr=0.1), two_groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, ss = _pair_sequential(torch, topt), _pair_sequential(st, sopt)
        t_lrs, s_lrs = [ts.get_last_lr()], [ss.get_last_lr()]
        for _ in range(STEPS):
            topt.step()
            sopt.step()
            ts.step()
            ss.step()
            t_lrs.append(ts.get_last_lr())
            s_lrs.append(ss.get_last_lr())
    _assert_seq_equal(t_lrs, s_lrs)
    sd = ss.state_dict()
    assert "optimizer" not in sd and len(sd["_schedulers"]) == 3


def test_sequential_lr_errors():
    opt = st.optim.SGD([st.zeros(1)], lr=0.1)
    a = st.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        st.optim.lr_scheduler.SequentialLR(opt, [a], milestones=[3])
    other = st.optim.SGD([st.zeros(1)], lr=0.1)
    with pytest.raises(ValueError, match="belong to the same optimizer"):
        st.optim.lr_scheduler.SequentialLR(other, [a, a], milestones=[3])


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=2, threshold=0.05),
                                dict(patience=1, threshold_mode="abs", threshold=0.1, cooldown=2, min_lr=0.004),
                                dict(mode="max", patience=0, threshold_mode="abs", min_lr=[0.01, 0.0])])
def test_reduce_lr_on_plateau_matches_torch(kw):
    topt, sopt = _opts("SGD", dict(lr=0.1, momentum=0.9), True)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    ss = st.optim.lr_scheduler.ReduceLROnPlateau(sopt, **kw)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.9, 0.9, 0.9, 0.9, 0.7] * 4
    for i, m in enumerate(metrics):
        topt.step()
        sopt.step()
        ts.step(m)
        ss.step(st.tensor(m, dtype=st.float64) if i % 2 else m)
        _assert_seq_equal(ts.get_last_lr(), ss.get_last_lr())
        assert (ts.num_bad_epochs, ts.cooldown_counter) == (ss.num_bad_epochs, ss.cooldown_counter)
        assert ts.best == ss.best


def test_reduce_lr_on_plateau_errors():
    opt = st.optim.SGD([st.zeros(1)], lr=0.1)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        st.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode avg is unknown"):
        st.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="avg")
    with pytest.raises(ValueError, match="threshold mode x is unknown"):
        st.optim.lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="x")
    with pytest.raises(ValueError, match="expected 1 min_lrs, got 2"):
        st.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1, 0.2])
