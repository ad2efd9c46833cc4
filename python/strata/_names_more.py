"""More of torch's top-level names, written over existing ops: the `*_copy` view
variants (the view, then a contiguous copy, so the result never aliases its
input), cov/corrcoef, set_default_tensor_type and get_autocast_gpu_dtype."""

import warnings

from . import _C

__all__ = ["expand_copy", "t_copy", "permute_copy", "view_copy", "squeeze_copy", "unsqueeze_copy", "transpose_copy",
           "diagonal_copy", "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy", "unbind_copy",
           "alias_copy", "detach_copy", "narrow_copy", "cov", "corrcoef", "set_default_tensor_type",
           "get_autocast_gpu_dtype"]

from ._surface_more import contiguous_format as _CONTIG  # noqa: E402


def _copy(view, out):
    if out is None:
        return view.clone(memory_format=_CONTIG)
    out.resize_(view.shape)
    return out.copy_(view)


def _copies(views, out):
    if out is None:
        return [v.clone(memory_format=_CONTIG) for v in views]
    if len(out) != len(views):
        raise RuntimeError(f"Expected out to have {len(views)} tensors, but got {len(out)}")
    for o, v in zip(out, views):
        o.resize_(v.shape)
        o.copy_(v)
    return None


def expand_copy(input, size, *, implicit=False, out=None):
    return _copy(input.expand(size), out)


def t_copy(input, *, out=None):
    return _copy(input.t(), out)


def permute_copy(input, dims, *, out=None):
    return _copy(input.permute(dims), out)


def view_copy(input, size, *, out=None):
    return _copy(input.view(size), out)


def squeeze_copy(input, dim=None, *, out=None):
    return _copy(input.squeeze() if dim is None else input.squeeze(dim), out)


def unsqueeze_copy(input, dim, *, out=None):
    return _copy(input.unsqueeze(dim), out)


def transpose_copy(input, dim0, dim1, *, out=None):
    return _copy(input.transpose(dim0, dim1), out)


def diagonal_copy(input, offset=0, dim1=0, dim2=1, *, out=None):
    return _copy(input.diagonal(offset, dim1, dim2), out)


def select_copy(input, dim, index, *, out=None):
    return _copy(input.select(dim, index), out)


def narrow_copy(input, dim, start, length, *, out=None):
    return _copy(input.narrow(dim, start, length), out)


def slice_copy(input, dim=0, start=None, end=None, step=1, *, out=None):
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = dim + input.dim() if dim < 0 else dim
    if not 0 <= d < max(input.dim(), 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.dim()}, {input.dim() - 1}], "
                         f"but got {dim})")
    return _copy(input[(slice(None),) * d + (slice(start, end, step),)], out)


def split_copy(input, split_size, dim=0, *, out=None):
    return _copies(input.split(split_size, dim), out)


def split_with_sizes_copy(input, split_sizes, dim=0, *, out=None):
    return _copies(input.split(list(split_sizes), dim), out)


def unbind_copy(input, dim=0, *, out=None):
    return _copies(input.unbind(dim), out)


def alias_copy(input, *, out=None):
    return _copy(input, out)


def detach_copy(input, *, out=None):
    return _copy(input.detach(), out)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows of `input` (variables) over its columns (observations),
    with optional integer frequency weights and floating observation weights."""
    if input.dim() > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got an input with {input.dim()} dimensions")
    x = input if input.dim() == 2 else input.view(1, -1)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_C.get_default_dtype())
    n = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        if wt.dim() > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{wt.dim()} dimensions")
        if name == "fweights" and (wt.dtype.is_floating_point or wt.dtype.is_complex or wt.dtype == _C.bool):
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{_dtype_name(wt.dtype)} dtype")
        if name == "aweights" and not wt.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{_dtype_name(wt.dtype)} dtype")
        if wt.numel() != n:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                               f"input but got {wt.numel()} != {n}")
        if bool((wt < 0).any()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = wt if w is None else w * wt
    if w is None:
        avg = x.mean(1)
        norm = n - correction
    else:
        w = w.to(x.dtype) if not w.dtype.is_floating_point else w
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    if bool(norm <= 0) if not isinstance(norm, (int, float)) else norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        norm = norm.clamp(min=0) if not isinstance(norm, (int, float)) else 0
    xm = x - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    c = xm.mm(xw.t().conj()) / norm
    return c.squeeze()


def corrcoef(input):
    """Pearson correlation coefficients of the rows of `input`, clipped to [-1, 1]."""
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.dim()} dimensions")
    c = cov(input)
    if c.dim() == 0:
        return c / c
    stddev = c.diagonal().sqrt()
    c = c / stddev.unsqueeze(1)
    c = c / stddev.unsqueeze(0)
    return c.clip(-1, 1)


def _dtype_name(dt):
    from ._tensor_compat import _TYPE_NAMES
    return _TYPE_NAMES.get(dt, str(dt)).replace("Tensor", "")


def set_default_tensor_type(t):
    """Deprecated in torch: sets the default dtype from a CPU floating tensor type
    (strata.FloatTensor, "torch.DoubleTensor", ...). CUDA types raise TypeError,
    as torch does without CUDA; non-floating types raise TypeError."""
    from ._legacy_types import _LegacyTensorType
    import importlib

    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    if isinstance(t, str):
        module, _, name = t.rpartition(".")
        if module in ("torch", "strata", "torch.cuda", "strata.cuda"):
            module = "strata" + module[5:] if module.startswith("torch") else module
        try:
            t = getattr(importlib.import_module(module or t), name)
        except AttributeError:
            raise TypeError(f"invalid type: '{t}'") from None
    if not isinstance(t, _LegacyTensorType):
        raise TypeError(f"invalid type: '{t}'")
    if t.is_cuda:
        raise TypeError(f"type torch.cuda.{t.__name__} not available. Torch not compiled with CUDA enabled.")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _C.set_default_dtype(t.dtype)


def get_autocast_gpu_dtype():
    """Deprecated in torch: the CUDA autocast dtype, float16 (torch's default)."""
    warnings.warn("torch.get_autocast_gpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cuda') "
                  "instead.", DeprecationWarning, stacklevel=2)
    return _C.float16
