"""The rest of torch.nn.functional that composes from existing ops: activations, distances, losses,
channel-wise and alpha dropout, instance and local-response normalisation, and CTC loss.

Everything here is built from whole-tensor ops, so autograd differentiates it without a derivative of its
own; the one exception is ``ctc_loss``, whose backward is the alpha-beta formula (an autograd Function),
because differentiating through the log-space recursion would meet -inf - -inf at unreachable states.
``functional`` re-exports every name in ``__all__``."""

import builtins
import math
import warnings

from .. import _C

Tensor = _C.Tensor

__all__ = [
    "threshold", "threshold_", "glu", "prelu", "rrelu", "rrelu_", "hardshrink", "softshrink", "softmin",
    "normalize", "cosine_similarity", "pairwise_distance", "gumbel_softmax",
    "kl_div", "smooth_l1_loss", "huber_loss", "cosine_embedding_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "margin_ranking_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "multilabel_soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss", "hinge_embedding_loss",
    "soft_margin_loss", "ctc_loss", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "instance_norm", "local_response_norm", "native_channel_shuffle",
]


def _st():
    # The top-level package, looked up late (this module is imported while strata itself initialises).
    import importlib

    return importlib.import_module(__name__.rsplit(".", 2)[0])


def _reduction(size_average, reduce, reduction):
    from .functional import _reduction as legacy

    return legacy(size_average, reduce, reduction)


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _in_place(input, result, inplace):
    if inplace:
        input.copy_(result)
        return input
    return result


# ---- activations ---------------------------------------------------------------------------------------

def threshold(input, threshold, value, inplace=False):
    """``input`` where ``input > threshold``, else ``value``."""
    if inplace:
        return input.masked_fill_(input <= threshold, value)
    return input.masked_fill(input <= threshold, value)


def threshold_(input, threshold, value):
    return input.masked_fill_(input <= threshold, value)


def glu(input, dim=-1):
    """``a * sigmoid(b)`` where ``a`` and ``b`` are the two halves of ``input`` along ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {n}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def prelu(input, weight):
    """``max(0, x) + weight * min(0, x)``, ``weight`` one value or one per channel (dim 1; dim 0 for 1-D input)."""
    if weight.numel() != 1:
        channels = input.shape[1] if input.dim() >= 2 else 1
        if weight.numel() != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channels}.")
        if input.dim() >= 2:
            weight = weight.reshape((channels,) + (1,) * (input.dim() - 2))
    elif weight.dim() > 0 and input.dim() < weight.dim():
        weight = weight.reshape(())
    _st_ = _st()
    return _st_.where(input >= 0, input, weight * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element while training, and is
    ``(lower + upper) / 2`` otherwise."""
    if not training:
        from .functional import leaky_relu

        return leaky_relu(input, (lower + upper) / 2, inplace)
    st = _st()
    slope = st.empty_like(input).uniform_(lower, upper)
    return _in_place(input, st.where(input > 0, input, input * slope), inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def hardshrink(input, lambd=0.5):
    return input.masked_fill(input.abs() <= lambd, 0)


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, inf) for input dtype {input.dtype}, but found {lambd}")
    st = _st()
    shrunk = input - input.sign() * lambd
    return st.where(input.abs() > lambd, shrunk, st.zeros_like(input))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    from .functional import softmax

    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    denom = input.norm(p, dim, True).clamp(min=eps).expand_as(input)
    if out is None:
        return input / denom
    _st().div(input, denom, out=out)
    return out


cosine_similarity = _C._ops.cosine_similarity  # the op (torch.cosine_similarity); F.* is the same callable


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dimension."""
    out_dim = builtins.max(x1.dim(), x2.dim())
    diff = x1 - x2 + eps
    if out_dim == 0:
        return diff.abs()
    return diff.norm(p, -1, keepdim)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample from the Gumbel-softmax distribution; ``hard=True`` returns one-hot samples whose gradient is
    the soft sample's (straight-through)."""
    st = _st()
    gumbels = -st.empty_like(logits).exponential_().log()
    y_soft = st.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = st.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


# ---- losses ----------------------------------------------------------------------------------------------

def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise ``target * (log(target) - input)`` (``input`` holds log-probabilities); ``batchmean`` divides
    the sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    st = _st()
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # target * log(target) is 0 where target is 0 (xlogy), written so no NaN reaches either branch.
        safe = st.where(target > 0, target, st.ones_like(target))
        loss = st.where(target > 0, target * safe.log(), st.zeros_like(target)) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() != 0 else loss.sum()
    return _reduce(loss, reduction)


def _check_same_size(name, input, target):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (plain L1 when ``beta`` is 0)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_same_size("smooth_l1_loss", input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    loss = _st().where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``; optionally weighted per element."""
    _check_same_size("huber_loss", input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = (input - target).abs()
    loss = _st().where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        loss = loss * weight
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos(x1, x2)`` for target 1, ``max(0, cos(x1, x2) - margin)`` for target -1."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.dim() > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.dim() != target.dim() + 1 or input2.dim() != target.dim() + 1:
        raise RuntimeError(f"{target.dim()}D target tensor expects {target.dim() + 1}D input tensors, but found "
                           f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    st = _st()
    eps = 1e-12
    dim = input1.dim() - 1
    prod = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + eps
    mag2 = (input2 * input2).sum(dim) + eps
    cos = prod / (mag1 * mag2).sqrt()
    zeros = st.zeros_like(cos)
    pos = st.where(target == 1, 1 - cos, zeros)
    neg = st.where(target == -1, (cos - margin).clamp(min=0), zeros)
    return _reduce(pos + neg, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the pairwise p-norm distance."""
    reduction = _reduction(size_average, reduce, reduction)
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    if margin <= 0:
        raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _st().minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with any distance function (pairwise_distance by default)."""
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = _st().minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -target * (x1 - x2) + margin)``."""
    reduction = _reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """``exp(input) - target * input`` (``log_input``) or ``input - target * log(input + eps)``; ``full`` adds
    Stirling's approximation of ``log(target!)`` where target > 1."""
    reduction = _reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        st = _st()
        safe = st.where(target > 1, target, st.ones_like(target))
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``0.5 * (log(var) + (input - target)^2 / var)`` (+ ``0.5 log(2 pi)`` when ``full``); ``var`` may omit the
    last dimension or have size 1 there (one variance per sample), or be a float."""
    st = _st()
    if isinstance(var, (builtins.int, builtins.float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = st.full_like(input, float(var))
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # Clamped for stability without changing the gradient (torch clamps a clone under no_grad).
    var = var + (var.detach().clamp(min=eps) - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per-class logistic loss, averaged over classes."""
    reduction = _reduction(size_average, reduce, reduction)
    from .functional import logsigmoid

    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _reduce(loss, reduction)


def _margin_inputs(name, input, target):
    if input.dim() not in (0, 1, 2) or input.numel() == 0 and input.dim() != 2:
        raise RuntimeError(f"{name}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    squeeze = input.dim() < 2
    if squeeze:
        input = input.reshape(1, -1)
        target = target.reshape(1, -1)
    return input, target, squeeze


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``sum_{j in y, i not in y} max(0, 1 - (x[j] - x[i])) / C``; each row of ``target`` lists class indices and
    ends at the first -1."""
    reduction = _reduction(size_average, reduce, reduction)
    st = _st()
    if tuple(input.shape) != tuple(target.shape):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size: {list(target.shape)} for input of "
                           f"size: {list(input.shape)}")
    x, y, squeeze = _margin_inputs("multilabel_margin_loss", input, target)
    n, c = x.shape
    if c == 0:
        loss = st.zeros(n, dtype=x.dtype)
    else:
        if bool(((y < -1) | (y >= c)).any()):
            raise RuntimeError("argument #2 'target' is out of range")
        # Entries count until the first -1 in each row.
        valid = (y != -1).to(_C.int64).cumprod(1).to(x.dtype)
        onehot = st.zeros((n, c, c), dtype=x.dtype).scatter(2, y.clamp(min=0).unsqueeze(2), 1.0)
        counts = (onehot * valid.unsqueeze(2)).sum(1)  # times each class is listed as a target
        is_target = (counts > 0).to(x.dtype)
        margins = (1 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)  # [n, j, i] = 1 - (x_j - x_i)
        loss = (margins * counts.unsqueeze(2) * (1 - is_target).unsqueeze(1)).sum((1, 2)) / c
    if squeeze and reduction == "none":
        loss = loss.reshape(()) if input.dim() == 0 else loss.reshape(())
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` (each term times ``weight[y]``)."""
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    st = _st()
    squeeze = input.dim() < 2
    x = input.reshape(1, -1) if squeeze else input
    y = target.reshape(-1)
    if x.dim() != 2:
        raise RuntimeError(f"multi_margin_loss: Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(input.shape)}")
    n, c = x.shape
    if y.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    if n and bool(((y < 0) | (y >= c)).any()):
        raise RuntimeError("target out of range")
    idx = y.unsqueeze(1)
    x_y = x.gather(1, idx)
    terms = (margin - x_y + x).clamp(min=0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight.gather(0, y).unsqueeze(1)
    terms = terms.scatter(1, idx, 0.0)  # the target class itself does not count
    loss = terms.sum(1) / c
    if squeeze:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """``x`` where target is 1, ``max(0, margin - x)`` where it is -1."""
    reduction = _reduction(size_average, reduce, reduction)
    st = _st()
    zeros = st.zeros_like(input)
    margin_part = st.where(target != 1, (margin - input).clamp(min=0), zeros)
    self_part = st.where(target != -1, input, zeros)
    return _reduce(margin_part + self_part, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``."""
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce((-target * input).exp().log1p(), reduction)


# ---- CTC loss ----------------------------------------------------------------------------------------------

_NEG_INF = float("-inf")


def _lse(*terms):
    """log(sum(exp(terms))) elementwise, exact -inf when every term is -inf (no NaN)."""
    st = _st()
    m = terms[0]
    for t in terms[1:]:
        m = st.maximum(m, t)
    m_safe = m.masked_fill(m == _NEG_INF, 0)
    s = (terms[0] - m_safe).exp()
    for t in terms[1:]:
        s = s + (t - m_safe).exp()
    return s.log() + m_safe


def _shift(x, k):
    """x shifted right by k along the last dim, -inf filled."""
    st = _st()
    if k == 0:
        return x
    pad = st.full(tuple(x.shape[:-1]) + (k,), _NEG_INF, dtype=x.dtype)
    return st.cat([pad, x[..., :-k]], -1)


def _unshift(x, k):
    """x shifted left by k along the last dim, -inf filled."""
    st = _st()
    pad = st.full(tuple(x.shape[:-1]) + (k,), _NEG_INF, dtype=x.dtype)
    return st.cat([x[..., k:], pad], -1)


def _ctc_tables(log_probs, targets, input_lengths, target_lengths, blank):
    """The extended label sequences (blank-interleaved), their log-probabilities per time step and the
    masks of the recursion, batched and padded to the longest target."""
    st = _st()
    T, N, C = log_probs.shape
    in_lens = [builtins.int(v) for v in input_lengths]
    tg_lens = [builtins.int(v) for v in target_lengths]
    if len(in_lens) != N:
        raise RuntimeError(f"input_lengths must be of size batch_size ({N}), got {len(in_lens)}")
    if len(tg_lens) != N:
        raise RuntimeError(f"target_lengths must be of size batch_size ({N}), got {len(tg_lens)}")
    for n in range(N):
        if in_lens[n] > T or in_lens[n] < 0:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {in_lens[n]} "
                               "(while checking arguments for ctc_loss_allocate_outputs)")
        if tg_lens[n] < 0:
            raise RuntimeError(f"Expected target_lengths to be non-negative, but got {tg_lens[n]}")
    if not (0 <= blank < C):
        raise RuntimeError(f"blank must be in label range [0, {C}), got {blank}")
    smax = builtins.max(tg_lens) if tg_lens else 0
    tgt = targets.to(_C.int64)
    if tgt.dim() == 1:
        # Concatenated targets: split by target_lengths and pad.
        if tgt.numel() < builtins.sum(tg_lens):
            raise RuntimeError(f"Expected tensor to have size at least {builtins.sum(tg_lens)} at dimension 0, but "
                               f"got size {tgt.numel()} (while checking arguments for ctc_loss_cpu)")
        rows, off = [], 0
        for n in range(N):
            row = tgt[off:off + tg_lens[n]]
            off += tg_lens[n]
            if tg_lens[n] < smax:
                row = st.cat([row, st.full((smax - tg_lens[n],), blank, dtype=_C.int64)])
            rows.append(row)
        tgt = st.stack(rows) if N else st.zeros((0, smax), dtype=_C.int64)
    else:
        if tgt.shape[1] < smax:
            raise RuntimeError(f"Expected tensor to have size at least {smax} at dimension 1, but got size "
                               f"{tgt.shape[1]} for argument #2 'targets' (while checking arguments for "
                               "ctc_loss_cpu)")
        tgt = tgt[:, :smax]
    S = 2 * smax + 1
    ext = st.full((N, S), blank, dtype=_C.int64)
    if smax:
        ext[:, 1::2] = tgt
    if N and bool(((ext < 0) | (ext >= C)).any()):
        raise RuntimeError(f"ctc_loss: target labels must be in [0, {C})")
    # lp_ext[t, n, s] = log_probs[t, n, ext[n, s]]
    lp_ext = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, S))
    # The skip transition s-2 -> s is allowed for a label that differs from the label two places back.
    ext_prev2 = _C._ops.cat([st.full((N, 2), blank, dtype=_C.int64), ext[:, :-2]], 1) if S > 2 else ext
    can_skip = (ext != blank) & (ext != ext_prev2)
    if S > 0:
        can_skip[:, :2] = False
    pos = st.arange(S).unsqueeze(0)
    lens_t = st.tensor(tg_lens, dtype=_C.int64).reshape(N, 1)
    in_lens_t = st.tensor(in_lens, dtype=_C.int64)
    within = pos < 2 * lens_t + 1  # positions belonging to each sample's own extended sequence
    return lp_ext, ext, can_skip, within, in_lens, tg_lens, in_lens_t, lens_t


def _ctc_alpha(lp_ext, can_skip, within, in_lens):
    st = _st()
    T, N, S = lp_ext.shape
    alphas = []
    init = st.full((N, S), _NEG_INF, dtype=lp_ext.dtype)
    if T == 0:
        return alphas
    first = lp_ext[0]
    init[:, 0] = first[:, 0]
    if S > 1:
        init[:, 1] = first[:, 1]
    alpha = init.masked_fill(~within, _NEG_INF)
    alphas.append(alpha)
    lens = st.tensor(in_lens, dtype=_C.int64).reshape(N, 1)
    for t in range(1, T):
        skip = _shift(alpha, 2).masked_fill(~can_skip, _NEG_INF)
        new = (_lse(alpha, _shift(alpha, 1), skip) + lp_ext[t]).masked_fill(~within, _NEG_INF)
        # Past its input length a sample keeps its last alpha.
        alpha = st.where(lens > t, new, alpha)
        alphas.append(alpha)
    return alphas


def _ctc_nll(alphas, in_lens, tg_lens, dtype, N):
    st = _st()
    out = []
    for n in range(N):
        if in_lens[n] == 0:
            out.append(0.0 if tg_lens[n] == 0 else math.inf)
            continue
        a = alphas[in_lens[n] - 1][n]
        last = 2 * tg_lens[n]
        v = a[last] if tg_lens[n] == 0 else _lse(a[last], a[last - 1])
        out.append(-float(v))
    return st.tensor(out, dtype=dtype)


class _CTCLoss:
    """Forward: the alpha recursion; backward: the beta recursion and torch's gradient formula
    ``exp(lp) - exp(log(sum_{s: l'_s = c} alpha_t(s) beta_t(s)) + nll - lp)`` (the gradient with respect to
    log-probabilities that a log_softmax upstream turns into the exact gradient of the logits)."""

    _fn = None

    @classmethod
    def function(cls):
        if cls._fn is None:
            from ..autograd import Function

            class CTCLossFunction(Function):
                @staticmethod
                def forward(ctx, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
                    tables = _ctc_tables(log_probs.detach(), targets, input_lengths, target_lengths, blank)
                    lp_ext, ext, can_skip, within, in_lens, tg_lens, _, _ = tables
                    alphas = _ctc_alpha(lp_ext, can_skip, within, in_lens)
                    nll = _ctc_nll(alphas, in_lens, tg_lens, log_probs.dtype, log_probs.shape[1])
                    ctx.save_for_backward(log_probs)
                    ctx.tables, ctx.alphas, ctx.nll, ctx.blank = tables, alphas, nll, blank
                    ctx.zero_infinity = zero_infinity
                    if zero_infinity:
                        nll = nll.masked_fill(nll == math.inf, 0)
                    return nll

                @staticmethod
                def backward(ctx, grad_out):
                    (log_probs,) = ctx.saved_tensors
                    grad = _ctc_grad(log_probs.detach(), ctx.tables, ctx.alphas, ctx.nll, ctx.zero_infinity)
                    return grad * grad_out.reshape(1, -1, 1), None, None, None, None, None

            cls._fn = CTCLossFunction
        return cls._fn


def _ctc_grad(log_probs, tables, alphas, nll, zero_infinity):
    st = _st()
    lp_ext, ext, can_skip, within, in_lens, tg_lens, in_lens_t, lens_t = tables
    T, N, C = log_probs.shape
    S = lp_ext.shape[2]
    # beta_t(s): log-probability of finishing the label sequence from state s at time t.
    # s may jump to s+2 when s+2 may be entered by a skip.
    skip_from = st.cat([can_skip[:, 2:], st.zeros((N, builtins.min(2, S)), dtype=_C.bool)], 1)
    last = 2 * lens_t  # (N, 1)
    pos = st.arange(S).unsqueeze(0)
    is_end = ((pos == last) | (pos == last - 1)) & within
    betas = [None] * T
    beta = st.full((N, S), _NEG_INF, dtype=log_probs.dtype)
    tl = in_lens_t.reshape(N, 1)
    for t in range(T - 1, -1, -1):
        lp = lp_ext[t]
        start = (lp.masked_fill(~is_end, _NEG_INF))
        skip = _unshift(beta, 2).masked_fill(~skip_from, _NEG_INF)
        rec = (_lse(beta, _unshift(beta, 1), skip) + lp).masked_fill(~within, _NEG_INF)
        beta = st.where(tl - 1 == t, start, st.where(tl - 1 > t, rec,
                                                     st.full((N, S), _NEG_INF, dtype=log_probs.dtype)))
        betas[t] = beta
    alpha = st.stack(alphas)  # (T, N, S)
    beta = st.stack(betas)
    nll_safe = nll.masked_fill(nll == math.inf, 0).reshape(1, N, 1)
    post = (alpha + beta + nll_safe).exp()  # posterior of each extended state, summing to 1 over s per t
    onehot = st.zeros((N, S, C), dtype=log_probs.dtype).scatter(2, ext.unsqueeze(2), 1.0)
    occupancy = st.matmul(post.permute(1, 0, 2), onehot).permute(1, 0, 2)  # (T, N, C)
    grad = log_probs.exp() - occupancy / log_probs.exp()
    tpos = st.arange(T).reshape(T, 1, 1)
    active = tpos < in_lens_t.reshape(1, N, 1)
    infinite = (nll == math.inf).reshape(1, N, 1)
    grad = grad.masked_fill(~active, 0)
    if zero_infinity:
        grad = grad.masked_fill(infinite, 0)
    else:
        grad = grad.masked_fill(infinite & active, math.nan)
    return grad


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss over ``log_probs`` (T, N, C) (or (T, C) unbatched).

    ``targets`` is (N, S) padded or the concatenation of every target; lengths are tensors or sequences.
    ``mean`` divides each loss by its target length (at least 1), then averages over the batch."""
    st = _st()
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.dim() == 2
    if log_probs.dim() not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 or 3 dimensions (T, [N,] C), got "
                           f"{list(log_probs.shape)}")
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    if isinstance(input_lengths, Tensor):
        input_lengths = input_lengths.reshape(-1).tolist()
    elif isinstance(input_lengths, builtins.int):
        input_lengths = [input_lengths]
    if isinstance(target_lengths, Tensor):
        target_lengths = target_lengths.reshape(-1).tolist()
    elif isinstance(target_lengths, builtins.int):
        target_lengths = [target_lengths]
    if unbatched and targets.dim() == 2 and targets.shape[0] != 1:
        targets = targets.reshape(1, -1)
    loss = _CTCLoss.function().apply(log_probs, targets, list(input_lengths), list(target_lengths), blank,
                                     zero_infinity)
    if unbatched:
        loss = loss.reshape(())
    if reduction == "mean":
        lens = st.tensor([builtins.max(builtins.int(v), 1) for v in target_lengths], dtype=loss.dtype)
        return (loss / lens.reshape(tuple(loss.shape))).mean()
    if reduction == "sum":
        return loss.sum()
    return loss


# ---- dropout variants -----------------------------------------------------------------------------------

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_noise(input):
    # One draw per (sample, channel), broadcast over the remaining dims.
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return _st().empty(shape, dtype=input.dtype, device=input.device)


def _dropout_impl(input, p, training, inplace, feature, alpha):
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return _in_place(input, input * 0.0, inplace)
    st = _st()
    noise = _feature_noise(input) if feature else st.empty_like(input)
    noise.bernoulli_(1 - p)
    if alpha:
        # Keeps the self-normalising mean and variance: dropped units go to SELU's negative saturation value,
        # then an affine map restores zero mean and unit variance.
        sat = 1.7580993408473766
        a = 1.0 / math.sqrt((sat * sat * p + 1) * (1 - p))
        b = (noise - 1) * (sat * a) + sat * a * p
        result = input * (noise * a) + b
    else:
        result = input * (noise / (1 - p))
    return _in_place(input, result, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) input."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 2 and training and p != 0.0:
        return _in_place(input, _dropout_impl(input.unsqueeze(0), p, True, False, True, False).squeeze(0), inplace)
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) input (3-D input is treated as (N, C, L), as torch does)."""
    _check_p(p)
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      "inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", stacklevel=2)
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) input."""
    _check_p(p)
    if input.dim() not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.dim()}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout3d exists to provide channel-wise dropout on "
                      "inputs with 3 spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).", stacklevel=2)
    if input.dim() == 4 and training and p != 0.0:
        return _in_place(input, _dropout_impl(input.unsqueeze(0), p, True, False, True, False).squeeze(0), inplace)
    return _dropout_impl(input, p, training, inplace, True, False)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_impl(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_impl(input, p, training, inplace, True, True)


# ---- normalisation ------------------------------------------------------------------------------------------

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalises each (sample, channel) over its spatial positions: batch norm over the input viewed as one
    sample of N*C channels, the running statistics averaged back over the batch."""
    from .functional import batch_norm

    if input.dim() < 3:
        raise ValueError(f"instance_norm: expected input of at least 3 dimensions (N, C, ...), got "
                         f"{list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if use_input_stats:
        spatial = 1
        for s in input.shape[2:]:
            spatial *= s
        if spatial <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"{list(input.shape)}")
    if not use_input_stats:
        x = input.reshape(n, c, -1)
        out = batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
        return out.reshape(tuple(input.shape))
    x = input.reshape(1, n * c, -1)
    rm = running_mean.repeat(n) if running_mean is not None else None
    rv = running_var.repeat(n) if running_var is not None else None
    w = weight.repeat(n) if weight is not None else None
    b = bias.repeat(n) if bias is not None else None
    out = batch_norm(x, rm, rv, w, b, True, momentum, eps)
    if running_mean is not None:
        running_mean.copy_(rm.reshape(n, c).mean(0).detach())
    if running_var is not None:
        running_var.copy_(rv.reshape(n, c).mean(0).detach())
    return out.reshape(tuple(input.shape))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha/size * sum of x^2 over the `size` neighbouring channels)^beta`` (zero-padded window:
    ``size // 2`` channels before, ``(size - 1) // 2`` after)."""
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    st = _st()
    c = input.shape[1]
    sq = input * input
    before, after = size // 2, (size - 1) // 2
    pad_shape = lambda m: (input.shape[0], m) + tuple(input.shape[2:])  # noqa: E731
    parts = []
    if before:
        parts.append(st.zeros(pad_shape(before), dtype=input.dtype))
    parts.append(sq)
    if after:
        parts.append(st.zeros(pad_shape(after), dtype=input.dtype))
    padded = st.cat(parts, 1) if len(parts) > 1 else sq
    window = padded.narrow(1, 0, c)
    for i in range(1, size):
        window = window + padded.narrow(1, i, c)
    # d^beta as exp(beta * log d) (d >= k > 0): the pow derivative with a Python-scalar exponent currently loses
    # precision (the exponent is held as a float32 scalar there).
    div = ((window * (alpha / size) + k).log() * beta).exp()
    return input / div


def native_channel_shuffle(input, groups):
    from ._functional_nn_ops import channel_shuffle
    return channel_shuffle(input, groups)
