"""PyTorch-signature wrappers of the factory and random ops.

The generic binding already exports every op (strata.zeros, strata.rand, ...)
with its schema's arguments; these wrappers replace them to accept what torch
accepts on top: sizes as varargs or one sequence, layout/pin_memory/
memory_format/requires_grad, the overloaded call forms of arange/randint/
normal, and strata.Generator objects for generator=."""

import builtins

from . import _C
from .random import (  # noqa: F401
    Generator,
    _gen_id,
    default_generator,
    fork_rng,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

from ._repr import get_printoptions, printoptions, set_printoptions  # noqa: F401

_ops = _C._ops
Tensor = _C.Tensor


class layout:
    """Tensor layouts; Strata has only strided tensors."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "strata." + self._name


strided = layout("strided")

__all__ = [
    "zeros", "ones", "full", "empty", "empty_strided", "arange", "range", "linspace", "logspace", "eye",
    "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like", "randint_like",
    "rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
    "poisson", "binomial",
    "Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
    "layout", "strided", "set_printoptions", "get_printoptions", "printoptions",
]


# ---- argument helpers ----------------------------------------------------------

def _size(size, name):
    """Sizes given as varargs (2, 3) or as one sequence ((2, 3) / strata.Size)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = size[0]
    out = []
    for s in size:
        if isinstance(s, builtins.float) or isinstance(s, builtins.bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{name}(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(s).__name__}")
        # An int (subclass) is kept as it is: a symbolic size of strata.compile is one (symshape.SymInt).
        out.append(s if isinstance(s, builtins.int) else s.__index__())
    return tuple(out)


def _check_opts(name, layout=None, pin_memory=False, memory_format=None):
    if layout is not None and layout is not strided:
        raise NotImplementedError(f"{name}(): layout {layout!r} is not supported (only strata.strided)")
    if pin_memory:
        raise RuntimeError(f"{name}(): pin_memory=True needs an accelerator; none is available")
    if memory_format is not None:
        fmt = repr(memory_format).split(".")[-1]
        if fmt not in ("preserve_format", "contiguous_format", "channels_last", "channels_last_3d"):
            raise NotImplementedError(f"{name}(): memory_format {memory_format!r} is not supported")


def _finish(t, requires_grad):
    if requires_grad:
        if not hasattr(t, "requires_grad_"):
            raise NotImplementedError("requires_grad=True needs autograd, which is not available yet")
        t.requires_grad_(True)
    return t


def _factory(op, name, args, size, out, dtype, layout, device, pin_memory, requires_grad, **extra):
    """args: sizes given positionally; size: the size= keyword (torch accepts either)."""
    _check_opts(name, layout, pin_memory)
    if size is not None:
        if args:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        args = (size,)
    t = op(_size(args, name), dtype=dtype, device=device, out=out, **extra)
    return _finish(t, requires_grad)


# ---- factories -------------------------------------------------------------------

def zeros(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    return _factory(_ops.zeros, "zeros", args, size, out, dtype, layout, device, pin_memory, requires_grad)


def ones(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    return _factory(_ops.ones, "ones", args, size, out, dtype, layout, device, pin_memory, requires_grad)


def empty(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
          memory_format=None):
    _check_opts("empty", memory_format=memory_format)
    if memory_format is not None and repr(memory_format) in ("torch.channels_last", "torch.channels_last_3d"):
        from . import _channels_last

        t = _factory(_ops.empty, "empty", args, size, out, dtype, layout, device, pin_memory, False)
        t = _channels_last.empty(tuple(t.shape), memory_format, t.dtype, t.device)
        return _finish(t, requires_grad)
    return _factory(_ops.empty, "empty", args, size, out, dtype, layout, device, pin_memory, requires_grad)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
         requires_grad=False):
    _check_opts("full", layout, pin_memory)
    t = _ops.full(_size((size,), "full"), fill_value, dtype=dtype, device=device, out=out)
    return _finish(t, requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    _check_opts("empty_strided", layout, pin_memory)
    t = _ops.empty_strided(_size((size,), "empty_strided"), _size((stride,), "empty_strided"), dtype=dtype,
                           device=device)
    return _finish(t, requires_grad)


def arange(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
           requires_grad=False):
    """arange(end), arange(start, end), arange(start, end, step)."""
    _check_opts("arange", layout, pin_memory)
    if end is None:
        start, end = 0, start
    t = _ops.arange(start, end, step, dtype=dtype, device=device, out=out)
    return _finish(t, requires_grad)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):  # noqa: A001
    """Deprecated in torch: like arange but including end; always floating point."""
    if end is None:
        start, end = 0, start
    n = builtins.int((end - start) // step) + 1
    t = _ops.arange(0, builtins.max(n, 0), 1, dtype=_C.float64, device=device)
    t = (t * step + start).to(dtype or _C.get_default_dtype())
    if out is not None:
        if tuple(out.shape) != tuple(t.shape):
            raise RuntimeError(f"range: out= has shape {tuple(out.shape)}, expected {tuple(t.shape)}")
        return out.copy_(t)
    return _finish(t, requires_grad)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    _check_opts("linspace", layout, pin_memory)
    return _finish(_ops.linspace(start, end, steps, dtype=dtype, device=device, out=out), requires_grad)


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    _check_opts("logspace", layout, pin_memory)
    return _finish(_ops.logspace(start, end, steps, base, dtype=dtype, device=device, out=out), requires_grad)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    _check_opts("eye", layout, pin_memory)
    return _finish(_ops.eye(n, m, dtype=dtype, device=device, out=out), requires_grad)


# ---- *_like ---------------------------------------------------------------------------

def _like(name, input, dtype, layout, device, pin_memory, memory_format):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    _check_opts(name, layout, pin_memory, memory_format)
    return tuple(input.shape), dtype or input.dtype, device if device is not None else input.device


def _like_layout(input, memory_format):
    """The channels-last format of a *_like result (asked for, or input's kept by preserve_format), or None."""
    if memory_format is None and input.is_contiguous():
        return None
    from . import _channels_last

    return _channels_last.like_layout(input, memory_format)


def _filled_like(name, input, dtype, layout, device, pin_memory, requires_grad, memory_format, make, value):
    if isinstance(input, Tensor) and _C._is_nested(input):  # the same structure, new values (docs/NESTED.md)
        from ._nested import _map_values
        return _map_values(input, lambda v: _filled_like(name, v, dtype, None, device, pin_memory, requires_grad,
                                                         memory_format, make, value))
    s, d, dev = _like(name, input, dtype, layout, device, pin_memory, memory_format)
    mf = _like_layout(input, memory_format)
    if mf is None:
        return _finish(make(s, d, dev), requires_grad)
    from . import _channels_last

    t = _channels_last.empty(s, mf, d, dev)
    if value is not None:
        t.fill_(value)
    return _finish(t, requires_grad)


def zeros_like(input, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
               memory_format=None):
    return _filled_like("zeros_like", input, dtype, layout, device, pin_memory, requires_grad, memory_format,
                        lambda s, d, dev: _ops.zeros(s, dtype=d, device=dev), 0)


def ones_like(input, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
              memory_format=None):
    return _filled_like("ones_like", input, dtype, layout, device, pin_memory, requires_grad, memory_format,
                        lambda s, d, dev: _ops.ones(s, dtype=d, device=dev), 1)


def empty_like(input, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
               memory_format=None):
    return _filled_like("empty_like", input, dtype, layout, device, pin_memory, requires_grad, memory_format,
                        lambda s, d, dev: _ops.empty(s, dtype=d, device=dev), None)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
              memory_format=None):
    return _filled_like("full_like", input, dtype, layout, device, pin_memory, requires_grad, memory_format,
                        lambda s, d, dev: _ops.full(s, fill_value, dtype=d, device=dev), fill_value)


def _dense_strides(t):
    """t's strides when t is dense but not contiguous (a permuted layout), else None.
    Random *_like results keep such a layout, as torch's do, and random ops draw in
    stride order, so the layout decides which element gets which value."""
    if t.is_contiguous():
        return None
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return None
        expected *= size
    return t.stride()


def _empty_in_layout(input, shape, dtype, device, keep_layout=True):
    """An uninitialised tensor for a *_like result: input's layout when that is dense."""
    strides = _dense_strides(input) if keep_layout else None
    if strides is None:
        return _ops.empty(shape, dtype=dtype, device=device)
    return _ops.empty_strided(shape, strides, dtype=dtype, device=device)


def _random_like(name, input, dtype, layout, device, pin_memory, memory_format, factory, fill):
    if isinstance(input, Tensor) and _C._is_nested(input):  # the same structure, new values (docs/NESTED.md)
        from ._nested import _map_values
        return _map_values(input, lambda v: _random_like(name, v, dtype, None, device, pin_memory, memory_format,
                                                         factory, fill))
    s, d, dev = _like(name, input, dtype, layout, device, pin_memory, memory_format)
    keep = memory_format is None or repr(memory_format).split(".")[-1] == "preserve_format"
    if input.is_contiguous() or not keep:
        return factory(s, d, dev)
    return fill(_empty_in_layout(input, s, d, dev))


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False, memory_format=None):
    g = _gen_id(generator)
    t = _random_like("rand_like", input, dtype, layout, device, pin_memory, memory_format,
                     lambda s, d, dev: _ops.rand(s, generator=g, dtype=d, device=dev),
                     lambda t: _ops.uniform_(t, 0.0, 1.0, generator=g))
    return _finish(t, requires_grad)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None, pin_memory=False,
               requires_grad=False, memory_format=None):
    g = _gen_id(generator)
    t = _random_like("randn_like", input, dtype, layout, device, pin_memory, memory_format,
                     lambda s, d, dev: _ops.randn(s, generator=g, dtype=d, device=dev),
                     lambda t: _ops.normal_(t, 0.0, 1.0, generator=g))
    return _finish(t, requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 pin_memory=False, requires_grad=False, memory_format=None):
    """randint_like(input, high) or randint_like(input, low, high)."""
    if high is None:
        low, high = 0, low
    s, d, dev = _like("randint_like", input, dtype, layout, device, pin_memory, memory_format)
    return _finish(_ops.randint(low, high, s, generator=_gen_id(generator), dtype=d, device=dev), requires_grad)


# ---- random ---------------------------------------------------------------------------

def rand(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
         requires_grad=False):
    return _factory(_ops.rand, "rand", args, size, out, dtype, layout, device, pin_memory, requires_grad,
                    generator=_gen_id(generator))


def randn(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
          requires_grad=False):
    return _factory(_ops.randn, "randn", args, size, out, dtype, layout, device, pin_memory, requires_grad,
                    generator=_gen_id(generator))


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
            requires_grad=False, low=None, high=None):
    """randint(high, size) or randint(low, high, size); [low, high), int64 by default."""
    args = list(args)
    if size is None:
        if not args:
            raise TypeError("randint() missing required argument 'size'")
        size = args.pop()
    if high is None:
        if not args:
            raise TypeError("randint() missing required argument 'high'")
        high = args.pop()
    if low is None:
        low = args.pop() if args else 0
    if args:
        raise TypeError("randint() takes at most 3 positional arguments (low, high, size)")
    _check_opts("randint", layout, pin_memory)
    t = _ops.randint(low, high, _size((size,), "randint"), generator=_gen_id(generator), dtype=dtype,
                     device=device, out=out)
    return _finish(t, requires_grad)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    _check_opts("randperm", layout, pin_memory)
    return _finish(_ops.randperm(n, generator=_gen_id(generator), dtype=dtype, device=device, out=out),
                   requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """normal(mean_tensor, std_tensor), normal(mean_tensor, std=1.0), normal(mean, std_tensor),
    normal(mean, std, size)."""
    g = _gen_id(generator)
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if mt and st:
        t = _ops.normal(mean, std, generator=g, out=out)
    elif mt:
        t = _ops.normal(mean, builtins.float(std), generator=g, out=out)
    elif st:
        t = _ops.normal(builtins.float(mean), std, generator=g, out=out)
    else:
        if size is None:
            raise TypeError("normal(): with float mean and std, the size argument is required")
        _check_opts("normal", layout, pin_memory)
        t = _ops.normal(builtins.float(mean), builtins.float(std), _size((size,), "normal"), generator=g,
                        dtype=dtype, device=device, out=out)
    return _finish(t, requires_grad)


def bernoulli(input, p=None, *, generator=None, out=None):
    g = _gen_id(generator)
    t = _ops.bernoulli(input, generator=g) if p is None else _ops.bernoulli(input, builtins.float(p), generator=g)
    if out is not None:
        if tuple(out.shape) != tuple(t.shape):
            raise RuntimeError(f"bernoulli: out= has shape {tuple(out.shape)}, expected {tuple(t.shape)}")
        out.copy_(t)
        return out
    return t


def poisson(input, generator=None):
    return _ops.poisson(input, _gen_id(generator))


def binomial(count, prob, generator=None):
    return _ops.binomial(count, prob, _gen_id(generator))


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    return _ops.multinomial(input, num_samples, replacement, generator=_gen_id(generator), out=out)


# ---- Tensor methods -----------------------------------------------------------------

def _new_factory(name, op):
    def method(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        _check_opts(name, layout, pin_memory)
        t = op(_size(size, name), dtype=dtype or self.dtype, device=device if device is not None else self.device)
        return _finish(t, requires_grad)

    method.__name__ = name
    return method


Tensor.new_zeros = _new_factory("new_zeros", _ops.zeros)
Tensor.new_ones = _new_factory("new_ones", _ops.ones)
Tensor.new_empty = _new_factory("new_empty", _ops.empty)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    _check_opts("new_full", layout, pin_memory)
    t = _ops.full(_size((size,), "new_full"), fill_value, dtype=dtype or self.dtype,
                  device=device if device is not None else self.device)
    return _finish(t, requires_grad)


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False, layout=None,
                       pin_memory=False):
    _check_opts("new_empty_strided", layout, pin_memory)
    t = _ops.empty_strided(_size((size,), "new_empty_strided"), _size((stride,), "new_empty_strided"),
                           dtype=dtype or self.dtype, device=device if device is not None else self.device)
    return _finish(t, requires_grad)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    _check_opts("new_tensor", layout, pin_memory)
    if isinstance(data, Tensor):
        t = data.to(dtype=dtype or data.dtype, device=device if device is not None else self.device, copy=True)
    else:
        t = _C._tensor(data, dtype or self.dtype, device if device is not None else self.device)
    return _finish(t, requires_grad)


Tensor.new_full = _new_full
Tensor.new_empty_strided = _new_empty_strided
Tensor.new_tensor = _new_tensor


def _uniform_(self, from_=0.0, to=1.0, *, generator=None, **kw):
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kw))}'")
    return _ops.uniform_(self, from_, to, generator=_gen_id(generator))


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _ops.normal_(self, mean, std, generator=_gen_id(generator))


def _exponential_(self, lambd=1.0, *, generator=None):
    return _ops.exponential_(self, lambd, generator=_gen_id(generator))


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    return _ops.log_normal_(self, mean, std, generator=_gen_id(generator))


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    return _ops.cauchy_(self, median, sigma, generator=_gen_id(generator))


def _geometric_(self, p, *, generator=None):
    return _ops.geometric_(self, p, generator=_gen_id(generator))


def _random_(self, *args, generator=None, **kw):
    """random_(), random_(to), random_(from, to)."""
    frm, to = 0, None
    if len(args) == 1:
        to = args[0]
    elif len(args) == 2:
        frm, to = args
    elif args:
        raise TypeError("random_() takes at most 2 positional arguments (from, to)")
    frm = kw.pop("from", frm)
    to = kw.pop("to", to)
    if kw:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kw))}'")
    return _ops.random_(self, frm, to, generator=_gen_id(generator))


def _bernoulli_(self, p=0.5, *, generator=None):
    if isinstance(p, Tensor):
        return _ops.bernoulli_(self, p, generator=_gen_id(generator))
    return _ops.bernoulli_(self, builtins.float(p), generator=_gen_id(generator))


def _bernoulli_method(self, p=None, *, generator=None):
    return bernoulli(self, p, generator=generator)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None):
    return multinomial(self, num_samples, replacement, generator=generator)


Tensor.uniform_ = _uniform_
Tensor.normal_ = _normal_
Tensor.exponential_ = _exponential_
Tensor.log_normal_ = _log_normal_
Tensor.cauchy_ = _cauchy_
Tensor.geometric_ = _geometric_
Tensor.random_ = _random_
Tensor.bernoulli_ = _bernoulli_
Tensor.bernoulli = _bernoulli_method
Tensor.multinomial = _multinomial_method
# The generic binding gives every op with out= an in-place twin; sampling
# indices into the probability tensor itself is not a torch method.
if "multinomial_" in Tensor.__dict__:
    del Tensor.multinomial_
