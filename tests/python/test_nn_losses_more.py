"""The losses composed in strata.nn._functional_more (and their modules) against torch: forward values and
input gradients, every reduction, float64, on the same inputs."""

import math
import warnings

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

REDUCTIONS = ["none", "mean", "sum"]


def pair(arr, requires_grad=True):
    return (st.tensor(arr, requires_grad=requires_grad), torch.tensor(arr, requires_grad=requires_grad))


def check(s_out, t_out, s_inputs, t_inputs, rtol=1e-10, atol=1e-12):
    """Same values, then the same gradients of a random projection of the output."""
    np.testing.assert_allclose(s_out.detach().numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol)
    w = np.random.default_rng(9).standard_normal(tuple(t_out.shape))
    (s_out * st.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    for s, t in zip(s_inputs, t_inputs):
        if t.grad is None:
            assert s.grad is None or np.all(s.grad.numpy() == 0)
            continue
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5))
Y = RNG.standard_normal((4, 5))


def both(name, *args, **kw):
    return getattr(st.nn.functional, name), getattr(torch.nn.functional, name)


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    logp = np.log(np.abs(X) / np.abs(X).sum(1, keepdims=True))
    target = np.abs(Y) / np.abs(Y).sum(1, keepdims=True)
    if not log_target:
        # A zero target contributes 0 (xlogy); torch's gradient there with respect to the target is NaN, so the
        # zero is checked on the forward value only.
        zt = target.copy()
        zt[0, 1] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_allclose(
                st.nn.functional.kl_div(st.tensor(logp), st.tensor(zt), reduction=reduction).numpy(),
                torch.nn.functional.kl_div(torch.tensor(logp), torch.tensor(zt), reduction=reduction).numpy(),
                rtol=1e-12)
    if log_target:
        target = np.log(target + 0.1)
    (si, ti), (stg, ttg) = pair(logp), pair(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = st.nn.functional.kl_div(si, stg, reduction=reduction, log_target=log_target)
        t = torch.nn.functional.kl_div(ti, ttg, reduction=reduction, log_target=log_target)
    check(s, t, [si, stg], [ti, ttg])
    m = st.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    assert m.reduction == reduction and m.log_target == log_target


def test_kl_div_mean_warns_like_torch():
    with pytest.warns(UserWarning, match="batchmean"):
        st.nn.functional.kl_div(st.zeros(2, 3), st.ones(2, 3) / 3)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1_and_huber(reduction, beta):
    (si, ti), (sg, tg) = pair(X), pair(Y * 0.7)
    check(st.nn.SmoothL1Loss(reduction=reduction, beta=beta)(si, sg),
          torch.nn.SmoothL1Loss(reduction=reduction, beta=beta)(ti, tg), [si, sg], [ti, tg])
    if beta > 0:
        (si, ti), (sg, tg) = pair(X), pair(Y * 0.7)
        check(st.nn.HuberLoss(reduction=reduction, delta=beta)(si, sg),
              torch.nn.HuberLoss(reduction=reduction, delta=beta)(ti, tg), [si, sg], [ti, tg])
        w = np.abs(RNG.standard_normal(X.shape))
        (si, ti), (sg, tg) = pair(X), pair(Y * 0.7)
        check(st.nn.functional.huber_loss(si, sg, reduction, beta, weight=st.tensor(w)),
              torch.nn.functional.huber_loss(ti, tg, reduction, beta, weight=torch.tensor(w)), [si, sg], [ti, tg])


def test_smooth_l1_errors():
    with pytest.raises(RuntimeError, match="negative values for beta"):
        st.nn.functional.smooth_l1_loss(st.zeros(2), st.zeros(2), beta=-1.0)
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        st.nn.functional.huber_loss(st.zeros(2), st.zeros(2), weight=st.ones(3))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        st.nn.functional.smooth_l1_loss(st.zeros(2), st.zeros(2), reduction="avg")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
@pytest.mark.parametrize("batched", [True, False])
def test_cosine_embedding(reduction, margin, batched):
    tgt = np.array([1.0, -1.0, -1.0, 1.0])
    a, b = (X, Y) if batched else (X[0], Y[0])
    tgt = tgt if batched else np.array(-1.0)
    (s1, t1), (s2, t2) = pair(a), pair(b)
    check(st.nn.CosineEmbeddingLoss(margin, reduction=reduction)(s1, s2, st.tensor(tgt)),
          torch.nn.CosineEmbeddingLoss(margin, reduction=reduction)(t1, t2, torch.tensor(tgt)), [s1, s2], [t1, t2])


def test_cosine_embedding_errors_like_torch():
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="multi-target not supported"):
            lib.nn.functional.cosine_embedding_loss(lib.zeros(3, 4), lib.zeros(3, 4), lib.ones(3, 1))
        with pytest.raises(RuntimeError, match="1D target tensor expects 2D input tensors"):
            lib.nn.functional.cosine_embedding_loss(lib.zeros(4), lib.zeros(4), lib.ones(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kw", [dict(), dict(margin=0.5, p=1, swap=True), dict(p=3, eps=1e-3)])
def test_triplet_margin(reduction, kw):
    z = RNG.standard_normal((4, 5))
    (sa, ta), (sp, tp), (sn, tn) = pair(X), pair(Y), pair(z)
    check(st.nn.TripletMarginLoss(reduction=reduction, **kw)(sa, sp, sn),
          torch.nn.TripletMarginLoss(reduction=reduction, **kw)(ta, tp, tn), [sa, sp, sn], [ta, tp, tn])


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance(swap):
    z = RNG.standard_normal((4, 5))
    (sa, ta), (sp, tp), (sn, tn) = pair(X), pair(Y), pair(z)
    sdist = lambda a, b: 1 - st.nn.functional.cosine_similarity(a, b)  # noqa: E731
    tdist = lambda a, b: 1 - torch.nn.functional.cosine_similarity(a, b)  # noqa: E731
    check(st.nn.TripletMarginWithDistanceLoss(distance_function=sdist, margin=0.7, swap=swap)(sa, sp, sn),
          torch.nn.TripletMarginWithDistanceLoss(distance_function=tdist, margin=0.7, swap=swap)(ta, tp, tn),
          [sa, sp, sn], [ta, tp, tn])
    (sa, ta), (sp, tp), (sn, tn) = pair(X), pair(Y), pair(z)
    check(st.nn.TripletMarginWithDistanceLoss(reduction="none")(sa, sp, sn),
          torch.nn.TripletMarginWithDistanceLoss(reduction="none")(ta, tp, tn), [sa, sp, sn], [ta, tp, tn])
    for lib in (st, torch):
        with pytest.raises(ValueError, match="greater than 0"):
            lib.nn.functional.triplet_margin_with_distance_loss(lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3),
                                                                margin=0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking(reduction):
    tgt = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    (s1, t1), (s2, t2) = pair(X[0]), pair(Y[0])
    check(st.nn.MarginRankingLoss(0.2, reduction=reduction)(s1, s2, st.tensor(tgt)),
          torch.nn.MarginRankingLoss(0.2, reduction=reduction)(t1, t2, torch.tensor(tgt)), [s1, s2], [t1, t2])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (False, False), (True, True), (False, True)])
def test_poisson_nll(reduction, log_input, full):
    target = np.floor(np.abs(Y) * 3)
    inp = X if log_input else np.abs(X) + 0.1
    (si, ti), (sg, tg) = pair(inp), pair(target, False)
    check(st.nn.PoissonNLLLoss(log_input=log_input, full=full, reduction=reduction)(si, sg),
          torch.nn.PoissonNLLLoss(log_input=log_input, full=full, reduction=reduction)(ti, tg), [si], [ti])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("var_shape", ["full", "last1", "dropped", "float"])
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll(reduction, var_shape, full):
    var = np.abs(RNG.standard_normal({"full": (4, 5), "last1": (4, 1), "dropped": (4,), "float": ()}[var_shape])) + 0.05
    var_s, var_t = pair(var)
    if var_shape == "float":
        var_s = var_t = 0.3
    var_s_in = var_s
    (si, ti), (sg, tg) = pair(X), pair(Y)
    check(st.nn.GaussianNLLLoss(full=full, reduction=reduction)(si, sg, var_s),
          torch.nn.GaussianNLLLoss(full=full, reduction=reduction)(ti, tg, var_t),
          [si, sg] + ([var_s_in] if var_shape != "float" else []), [ti, tg] + ([var_t] if var_shape != "float" else []))


def test_gaussian_nll_errors_and_eps_clamp_like_torch():
    for lib in (st, torch):
        with pytest.raises(ValueError, match="var is of incorrect size"):
            lib.nn.functional.gaussian_nll_loss(lib.zeros(4, 5), lib.zeros(4, 5), lib.ones(3))
        with pytest.raises(ValueError, match="var has negative entry"):
            lib.nn.functional.gaussian_nll_loss(lib.zeros(4, 5), lib.zeros(4, 5), -lib.ones(4, 5))
    var = np.full((4, 5), 1e-9)
    (sv, tv), (si, ti) = pair(var), pair(X)
    check(st.nn.functional.gaussian_nll_loss(si, st.zeros(4, 5, dtype=st.float64), sv, eps=1e-3),
          torch.nn.functional.gaussian_nll_loss(ti, torch.zeros(4, 5, dtype=torch.float64), tv, eps=1e-3),
          [si, sv], [ti, tv])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin(reduction, weighted):
    tgt = (Y > 0).astype(np.float64)
    w = np.abs(RNG.standard_normal(5)) if weighted else None
    (si, ti) = pair(X)
    check(st.nn.MultiLabelSoftMarginLoss(weight=None if w is None else st.tensor(w), reduction=reduction)(
        si, st.tensor(tgt)), torch.nn.MultiLabelSoftMarginLoss(weight=None if w is None else torch.tensor(w),
                                                                reduction=reduction)(ti, torch.tensor(tgt)), [si], [ti])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin(reduction):
    tgt = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4], [4, -1, -1, -1, -1]])
    (si, ti) = pair(X)
    check(st.nn.MultiLabelMarginLoss(reduction=reduction)(si, st.tensor(tgt)),
          torch.nn.MultiLabelMarginLoss(reduction=reduction)(ti, torch.tensor(tgt)), [si], [ti])
    (si, ti) = pair(X[0])
    check(st.nn.functional.multilabel_margin_loss(si, st.tensor(tgt[0]), reduction=reduction),
          torch.nn.functional.multilabel_margin_loss(ti, torch.tensor(tgt[0]), reduction=reduction), [si], [ti])
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="out of range"):
            lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 4), lib.ones(3, 4, dtype=lib.int64) * 5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kw", [dict(), dict(p=2, margin=0.7), dict(weight=True)])
def test_multi_margin(reduction, kw):
    tgt = np.array([0, 4, 2, 2])
    kws, kwt = dict(kw), dict(kw)
    if kw.get("weight"):
        w = np.abs(RNG.standard_normal(5))
        kws["weight"], kwt["weight"] = st.tensor(w), torch.tensor(w)
    (si, ti) = pair(X)
    check(st.nn.MultiMarginLoss(reduction=reduction, **kws)(si, st.tensor(tgt)),
          torch.nn.MultiMarginLoss(reduction=reduction, **kwt)(ti, torch.tensor(tgt)), [si], [ti])
    (si, ti) = pair(X[1])
    check(st.nn.functional.multi_margin_loss(si, st.tensor(3), reduction=reduction, **kws),
          torch.nn.functional.multi_margin_loss(ti, torch.tensor(3), reduction=reduction, **kwt), [si], [ti])
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="target out of range"):
            lib.nn.functional.multi_margin_loss(lib.zeros(3, 4), lib.tensor([0, 1, 7]))
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            lib.nn.functional.multi_margin_loss(lib.zeros(3, 4), lib.tensor([0, 1, 2]), p=3)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_hinge_embedding_and_soft_margin(reduction):
    tgt = np.sign(Y)
    (si, ti) = pair(X)
    check(st.nn.HingeEmbeddingLoss(margin=0.5, reduction=reduction)(si, st.tensor(tgt)),
          torch.nn.HingeEmbeddingLoss(margin=0.5, reduction=reduction)(ti, torch.tensor(tgt)), [si], [ti])
    (si, ti) = pair(X)
    check(st.nn.SoftMarginLoss(reduction=reduction)(si, st.tensor(tgt)),
          torch.nn.SoftMarginLoss(reduction=reduction)(ti, torch.tensor(tgt)), [si], [ti])


def test_legacy_size_average_reduce_flags():
    (si, ti), (sg, tg) = pair(X), pair(Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = st.nn.SmoothL1Loss(size_average=False)(si, sg)
        t = torch.nn.SmoothL1Loss(size_average=False)(ti, tg)
    check(s, t, [si, sg], [ti, tg])


# ---- CTC ---------------------------------------------------------------------------------------------------

def _ctc_case(T=12, N=4, C=6, S=5, seed=0, concat=False):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((T, N, C))
    target_lengths = np.array([5, 3, 0, 4])[:N]
    input_lengths = np.array([12, 9, 7, 4])[:N]  # the last is too short for its repeats -> infinite loss
    targets = rng.integers(1, C, size=(N, S))
    targets[3, :4] = [2, 2, 3, 3]  # repeats need blanks between them
    if concat:
        targets = np.concatenate([targets[n, :target_lengths[n]] for n in range(N)])
    return logits, targets, input_lengths, target_lengths


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [True, False])
@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("lengths_as", ["tensor", "tuple"])
def test_ctc_loss_matches_torch(reduction, zero_infinity, concat, lengths_as):
    logits, targets, il, tl = _ctc_case(concat=concat)
    if not zero_infinity:
        il = il.copy()
        il[3] = 10  # keep every loss finite so values and gradients compare
    conv_s = (lambda a: st.tensor(a)) if lengths_as == "tensor" else (lambda a: tuple(int(v) for v in a))
    conv_t = (lambda a: torch.tensor(a)) if lengths_as == "tensor" else (lambda a: tuple(int(v) for v in a))
    sl, tl_ = pair(logits)
    s = st.nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=zero_infinity)(
        sl.log_softmax(2), st.tensor(targets), conv_s(il), conv_s(tl))
    t = torch.nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=zero_infinity)(
        tl_.log_softmax(2), torch.tensor(targets), conv_t(il), conv_t(tl))
    check(s, t, [sl], [tl_], rtol=1e-9, atol=1e-11)


def test_ctc_loss_gradient_wrt_log_probs_matches_torch():
    # torch's gradient with respect to the log-probabilities themselves (its exp(lp) - posterior/exp(lp) form).
    logits, targets, il, tl = _ctc_case(seed=3)
    lp = torch.tensor(logits).log_softmax(2).numpy()
    (sl, tlp) = pair(lp)
    s = st.nn.functional.ctc_loss(sl, st.tensor(targets), st.tensor(il), st.tensor(tl), reduction="sum",
                                  zero_infinity=True)
    t = torch.nn.functional.ctc_loss(tlp, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
                                     reduction="sum", zero_infinity=True)
    check(s, t, [sl], [tlp], rtol=1e-9, atol=1e-11)


def test_ctc_loss_blank_elsewhere_unbatched_and_infinite():
    logits, targets, il, tl = _ctc_case(seed=5)
    targets = np.where(targets == 5, 1, targets)  # label 5 becomes the blank
    (sl, tl_) = pair(logits[:, 0])
    s = st.nn.functional.ctc_loss(sl.log_softmax(1), st.tensor(targets[0]), st.tensor(12), st.tensor(5), blank=5)
    t = torch.nn.functional.ctc_loss(tl_.log_softmax(1), torch.tensor(targets[0]), torch.tensor(12),
                                     torch.tensor(5), blank=5)
    check(s, t, [sl], [tl_], rtol=1e-9, atol=1e-11)
    logits, targets, il, tl = _ctc_case()
    s = st.nn.functional.ctc_loss(st.tensor(logits).log_softmax(2), st.tensor(targets), st.tensor(il),
                                  st.tensor(tl), reduction="none")
    t = torch.nn.functional.ctc_loss(torch.tensor(logits).log_softmax(2), torch.tensor(targets), torch.tensor(il),
                                     torch.tensor(tl), reduction="none")
    assert math.isinf(float(s[3])) and math.isinf(float(t[3]))
    np.testing.assert_allclose(s.numpy()[:3], t.numpy()[:3], rtol=1e-10)


def test_ctc_loss_errors():
    lp = st.zeros(5, 2, 4, dtype=st.float64)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 5"):
        st.nn.functional.ctc_loss(lp, st.ones(2, 3, dtype=st.int64), [6, 5], [3, 3])
    with pytest.raises(RuntimeError, match="Expected tensor to have size at least 3 at dimension 1"):
        st.nn.functional.ctc_loss(lp, st.ones(2, 2, dtype=st.int64), [5, 5], [3, 3])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        st.nn.functional.ctc_loss(lp, st.ones(2, 3, dtype=st.int64), [5, 5], [3, 3], reduction="avg")
