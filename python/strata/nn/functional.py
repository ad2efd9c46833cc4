"""strata.nn.functional: torch.nn.functional's signatures over Strata's ops.

The ops themselves are declared in src/ops/decl/nn.def; this module only maps
torch.nn.functional's argument conventions onto them (inplace=, argument order,
None defaults) and composes the few functions that have no op of their own
(dropout, the dropout path of scaled_dot_product_attention)."""

import builtins
import math
import warnings

from .. import _C

_ops = _C._ops
Tensor = _C.Tensor

__all__ = [
    "relu", "relu_", "relu6", "gelu", "silu", "mish", "softplus", "leaky_relu", "leaky_relu_", "elu", "elu_",
    "selu", "celu", "hardtanh", "hardtanh_", "hardsigmoid", "hardswish", "logsigmoid", "sigmoid", "tanh",
    "softsign", "tanhshrink", "linear", "layer_norm", "rms_norm", "batch_norm", "group_norm",
    "embedding", "one_hot", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "conv1d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
    "pad", "scaled_dot_product_attention", "dropout", "softmax", "log_softmax", "bilinear",
    "multi_head_attention_forward",
]


def _strata():
    # The top-level package, looked up late: some ops used here (softmax,
    # matmul, rand_like) come from other op families.
    import importlib

    return importlib.import_module(__name__.rsplit(".", 2)[0])


def _reduction(size_average, reduce, reduction):
    """The legacy size_average/reduce flags, mapped like torch does."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    warnings.warn("size_average and reduce args will be deprecated, please use reduction instead.")
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


# ---- activations ---------------------------------------------------------------

def _act(op, input, inplace, *args):
    if inplace:
        op(input, *args, out=input)
        return input
    return op(input, *args)


def relu(input, inplace=False):
    # Written out rather than through _act: this is on every MLP's hot path.
    if inplace:
        _ops.relu(input, out=input)
        return input
    return _ops.relu(input)


def relu_(input):
    return _act(_ops.relu, input, True)


def relu6(input, inplace=False):
    return _act(_ops.hardtanh, input, inplace, 0.0, 6.0)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _act(_ops.hardtanh, input, inplace, float(min_val), float(max_val))


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return _act(_ops.hardtanh, input, True, float(min_val), float(max_val))


def gelu(input, approximate="none", *, out=None):
    return _ops.gelu(input, approximate=approximate, out=out)


def silu(input, inplace=False):
    return _act(_ops.silu, input, inplace)


def mish(input, inplace=False):
    return _act(_ops.mish, input, inplace)


def softplus(input, beta=1.0, threshold=20.0, *, out=None):
    return _ops.softplus(input, float(beta), float(threshold), out=out)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _act(_ops.leaky_relu, input, inplace, float(negative_slope))


def leaky_relu_(input, negative_slope=0.01):
    return _act(_ops.leaky_relu, input, True, float(negative_slope))


def elu(input, alpha=1.0, inplace=False):
    return _act(_ops.elu, input, inplace, float(alpha))


def elu_(input, alpha=1.0):
    return _act(_ops.elu, input, True, float(alpha))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _act(_ops.elu, input, inplace, _SELU_ALPHA, _SELU_SCALE)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu: alpha must not be 0")
    return _act(_ops.elu, input, inplace, float(alpha), 1.0, 1.0 / float(alpha))


def hardsigmoid(input, inplace=False):
    return _act(_ops.hardsigmoid, input, inplace)


def hardswish(input, inplace=False):
    return _act(_ops.hardswish, input, inplace)


def logsigmoid(input):
    return _ops.log_sigmoid(input)


def sigmoid(input):
    return _ops.sigmoid(input)


def tanh(input):
    return _ops.tanh(input)


def softsign(input):
    return _ops.div(input, _ops.add(_ops.abs(input), 1))


def tanhshrink(input):
    return _ops.sub(input, _ops.tanh(input))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("softmax(): dim must be given (implicit dim selection is deprecated in torch)")
    if dtype is not None:
        input = input.to(dtype)
    return _strata().softmax(input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("log_softmax(): dim must be given (implicit dim selection is deprecated in torch)")
    if dtype is not None:
        input = input.to(dtype)
    return _strata().log_softmax(input, dim)


# ---- linear, embedding -------------------------------------------------------------

# The op itself, as torch's F.linear is its builtin: no Python frame per call.
linear = _ops.linear


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if padding_idx is not None:
        n = weight.shape[0] if weight.dim() >= 1 else 0
        if padding_idx > 0:
            if padding_idx >= n:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        # Like torch: the rows looked up are renormalised in place, outside autograd.
        from .._grad_mode import no_grad

        with no_grad():
            _ops.embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    return _ops.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


def one_hot(tensor, num_classes=-1):
    return _ops.one_hot(tensor, num_classes)


# ---- normalization ------------------------------------------------------------------

def _shape_list(s):
    if isinstance(s, builtins.int):
        return [s]
    return list(s)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _ops.layer_norm(input, _shape_list(normalized_shape), weight, bias, float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _ops.rms_norm(input, _shape_list(normalized_shape), weight, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return _ops.group_norm(input, num_groups, weight, bias, float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if momentum is None:
        # torch's modules pass None for a cumulative average; the functional
        # form then behaves like momentum=0 for the update.
        momentum = 0.0
    return _ops.batch_norm(input, weight, bias, running_mean, running_var, training, float(momentum), float(eps))


# ---- losses -------------------------------------------------------------------------

def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    reduction = _reduction(size_average, reduce, reduction)
    return _ops.cross_entropy_loss(input, target, weight, reduction, ignore_index, float(label_smoothing))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    return _ops.nll_loss(input, target, weight, reduction, ignore_index)


def _warn_broadcast(name, input, target):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
            "This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _warn_broadcast("mse_loss", input, target)
    return _ops.mse_loss(input, target, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _warn_broadcast("l1_loss", input, target)
    return _ops.l1_loss(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    reduction = _reduction(size_average, reduce, reduction)
    return _ops.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    return _ops.binary_cross_entropy(input, target, weight, reduction)


# ---- convolution, pooling, padding -----------------------------------------------------

def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _ops.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _ops.conv2d(input, weight, bias, stride, padding, dilation, groups)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return _ops.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    if input.requires_grad:
        # Keeps the argmax for the backward instead of recomputing it there (torch's grad_fn is the same).
        return _ops.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)[0]
    return _ops.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _ops.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _ops.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool2d(input, output_size):
    if isinstance(output_size, builtins.int):
        output_size = (output_size, output_size)
    output_size = list(output_size)
    if len(output_size) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be an int or a pair, got {output_size}")
    # None keeps the input's size along that dim.
    for i in range(2):
        if output_size[i] is None:
            output_size[i] = input.shape[input.dim() - 2 + i]
    return _ops.adaptive_avg_pool2d(input, output_size)


def pad(input, pad, mode="constant", value=None):
    return _ops.pad(input, list(pad), mode, value)


# ---- attention, dropout ------------------------------------------------------------------

def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if _C._is_nested(input):  # the values' dropout (python/strata/_nested.py)
        from .._nested import _dropout
        return _dropout(input, p, training, inplace)
    st = _strata()
    if p == 1.0:
        if inplace:
            _ops.mul(input, 0, out=input)
            return input
        return _ops.mul(input, 0)
    # As torch on the CPU: a Bernoulli(1 - p) mask in the input's layout, divided by 1 - p.
    if _C._vmap_is_batched(input):  # inside vmap: one mask per batch entry (or shared, randomness="same")
        from ..func._vmap import _empty_batched_like
        noise = _empty_batched_like(input)
        _ops.bernoulli_(noise, 1.0 - p)
    elif input.is_contiguous():
        # The same draw as empty + bernoulli_, with no size in the call: strata.compile's symbolic sizes
        # capture it for every batch size (a size read here would be baked into the graph).
        noise = _ops.bernoulli(input, 1.0 - p)
    else:
        noise = st._creation._empty_in_layout(input, input.shape, input.dtype, input.device)
        _ops.bernoulli_(noise, 1.0 - p)
    _ops.div(noise, 1.0 - p, out=noise)
    if inplace:
        _ops.mul(input, noise, out=input)
        return input
    return _ops.mul(input, noise)


# Which implementations strata.nn.attention.sdpa_kernel allows (set by strata.backends.cuda._set_sdp).
_sdpa_fused_ok = True
_sdpa_math_ok = True


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if (dropout_p == 0.0 and _sdpa_fused_ok) or _C._is_nested(query):  # nested: one attention per entry
        return _ops.scaled_dot_product_attention(query, key, value, attn_mask, float(dropout_p), is_causal,
                                                 scale=scale, enable_gqa=enable_gqa)
    if not (_sdpa_math_ok or _sdpa_fused_ok):
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found: sdpa_kernel allows "
                           "neither MATH nor FLASH_ATTENTION, the implementations Strata has on the CPU")
    # With dropout (or when sdpa_kernel allows only MATH): the math path, composed
    # from matmul/softmax (torch's reference formulation), masking fully-masked rows to zero.
    st = _strata()
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    s = scale if scale is not None else 1.0 / math.sqrt(E)
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = st.repeat_interleave(key, rep, dim=-3)
        value = st.repeat_interleave(value, rep, dim=-3)
    scores = _ops.mul(st.matmul(query, key.transpose(-2, -1)), s)
    if is_causal:
        attn_mask = st.ones(L, S, dtype=st.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype is _C.bool:
            scores = scores.masked_fill(_ops.logical_not(attn_mask), float("-inf"))
        else:
            scores = _ops.add(scores, attn_mask)
    probs = st.softmax(scores, -1)
    probs = _ops.nan_to_num(probs, 0.0)
    probs = dropout(probs, dropout_p, True)
    return st.matmul(probs, value)


# ---- bilinear, multi-head attention (composed from the ops above) ------------------------------

def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out, in1, in2), got shape {tuple(weight.shape)}")
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2 or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(
            f"bilinear(): input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)} do not match weight "
            f"{tuple(weight.shape)} (need equal leading dims, last dims {in1} and {in2})")
    st = _strata()
    # One GEMM: x1 @ W viewed as (in1, out * in2), then a contraction with x2 over in2.
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    t = st.matmul(input1, w).reshape(tuple(input1.shape[:-1]) + (out_f, in2))
    y = _ops.sum(_ops.mul(t, input2.unsqueeze(-2)), [-1])
    if bias is not None:
        y = _ops.add(y, bias)
    return y


def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """Boolean masks (True = masked out) become additive float masks of target_type with -inf at masked places."""
    if mask is None:
        return None
    if check_other and other_type is not None and (mask.dtype is _C.bool) != (other_type is _C.bool):
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      "instead.")
    if mask.dtype is _C.bool:
        zeros = _strata().zeros(tuple(mask.shape), dtype=target_type, device=mask.device)
        return zeros.masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch.nn.functional.multi_head_attention_forward for sequence-first inputs (L, N, E) or unbatched (L, E)."""
    st = _strata()
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not supported")
    batched = query.dim() == 3
    if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(f"query, key and value should all be 2-D (unbatched) or 3-D (batched), got "
                             f"{query.dim()}-D, {key.dim()}-D and {value.dim()}-D")
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads != 0:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    head_dim = embed_dim // num_heads
    if tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")

    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask),
                                       "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    # The mask is given whenever is_causal is, and applying it is what the hint promises; the hint only selects
    # a kernel in torch, so it does not change the result here.
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)

    # Input projections.
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    else:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q/k/v_proj_weight is None")
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    q = linear(query, w_q, b_q)
    k = linear(key, w_k, b_k)
    v = linear(value, w_v, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        k = st.cat([k, bias_k.repeat(1, bsz, 1)])
        v = st.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)

    if add_zero_attn:
        k = st.cat([k, st.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)], 1)
        v = st.cat([v, st.zeros((bsz * num_heads, 1, head_dim), dtype=v.dtype, device=v.device)], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else _ops.add(attn_mask, kpm)

    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = _ops.mul(q, math.sqrt(1.0 / head_dim))
        if attn_mask is not None:
            weights = st.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            weights = st.bmm(q_scaled, k.transpose(-2, -1))
        weights = softmax(weights, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = st.bmm(weights, v)
        out = out.transpose(0, 1).contiguous().reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = _ops.mean(weights, [1])
        if not batched:
            out = out.squeeze(1)
            weights = weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, False)
    out = out.permute(2, 0, 1, 3).contiguous().reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if not batched:
        out = out.squeeze(1)
    return out, None


from ._functional_nn_ops import *  # noqa: E402,F401,F403  (pooling, conv_transpose, interpolate, fold, ...)
from ._functional_more import *  # noqa: E402,F401,F403  (activations, losses, dropout variants, norms composed in Python)
from ._functional_more import __all__ as _more_all  # noqa: E402
__all__ = __all__ + _more_all


# ---- channels_last: a channels-last input gives a channels-last result, as torch's CPU kernels do -----------------
from .. import _channels_last as _cl  # noqa: E402

conv2d = _cl.keep_layout(conv2d)
batch_norm = _cl.keep_layout(batch_norm)
max_pool2d = _cl.keep_layout(max_pool2d)
max_pool2d_with_indices = _cl.keep_layout(max_pool2d_with_indices)
avg_pool2d = _cl.keep_layout(avg_pool2d)
adaptive_avg_pool2d = _cl.keep_layout(adaptive_avg_pool2d)
