"""strata.autograd.Function: user-defined forward and backward in Python.

`apply` runs `forward` with grad mode off, then records one graph node for the
call (a C++ node whose backward calls back into `backward` here). Tensors
saved with `ctx.save_for_backward` are checked against their version counter
when `ctx.saved_tensors` is read, like the built-in ops' saved tensors.
"""

import functools

from .. import _C
from .._grad_mode import no_grad

_Tensor = _C.Tensor


def _legacy_name(t):
    names = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
             "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor"}
    return f"strata.{names.get(t.dtype._name, 'Tensor')} [{', '.join(str(s) for s in t.shape)}]"


class _Packed:
    """A tensor of save_for_backward under saved_tensors_hooks (strata.autograd.graph)."""

    __slots__ = ("packed", "unpack_hook")

    def __init__(self, t, pack_hook, unpack_hook):
        version = t._version
        with no_grad():
            self.packed = pack_hook(t)
        if t._version != version:
            raise RuntimeError("A saved tensor pack hook is modifying its input in place. Tensors provided as input "
                               "to pack hook cannot be modified by in-place operations as this can lead to "
                               "unexpected side-effects.")
        self.unpack_hook = unpack_hook

    def unpack(self):
        r = self.unpack_hook(self.packed)
        if not isinstance(r, _Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(r).__name__}")
        return r


class FunctionCtx:
    def __init__(self):
        self.to_save = ()
        self._saved = None
        self._dirty = ()
        self._non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _Tensor):
                raise TypeError("save_for_backward can only save tensors, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        if self._saved is None:
            if self.to_save and getattr(self, "_released", False):
                raise RuntimeError(
                    "Trying to backward through the graph a second time (or directly access saved tensors after they "
                    "have already been freed). Specify retain_graph=True if you need to backward through the graph a "
                    "second time or if you need to access saved tensors after calling backward.")
            return tuple(self.to_save)
        out = []
        for t, version in self._saved:
            if isinstance(t, _Packed):
                out.append(t.unpack())
                continue
            if t is not None and t._version != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace operation: "
                    f"[{_legacy_name(t)}] is at version {t._version}; expected version {version} instead.")
            out.append(t)
        return tuple(out)

    # Called by the C++ node ----------------------------------------------
    def _run_backward(self, grads):
        grads = tuple(grads)
        if not self.materialize_grads:
            pass  # zeros are materialised in C++; None stays None for non-float outputs
        res = self._function.backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._input_is_tensor)
        if len(res) > n and all(r is None for r in res[n:]):
            res = res[:n]
        if len(res) != n:
            raise RuntimeError(f"function {self._function.__name__}Backward returned an incorrect number of "
                               f"gradients (expected {n}, got {len(res)})")
        out = []
        for i, r in enumerate(res):
            if r is not None and not isinstance(r, _Tensor):
                raise TypeError(f"function {self._function.__name__}Backward returned a gradient of type "
                                f"{type(r).__name__} at index {i}; expected a Tensor or None")
            out.append(r if self._input_is_tensor[i] else None)
        return tuple(out)

    def _release(self):
        self._released = True
        self._saved = None
        self.to_save = ()


class BackwardCFunction(FunctionCtx):
    pass


class _FunctionMeta(type):
    pass


class Function(metaclass=_FunctionMeta):
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`
    (or `forward(*args)` plus `setup_context(ctx, inputs, output)`), then call
    `YourFunction.apply(*args)`."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = BackwardCFunction()
        ctx._function = cls
        ctx._input_is_tensor = tuple(isinstance(a, _Tensor) for a in args)
        ctx.needs_input_grad = tuple(isinstance(a, _Tensor) and a.requires_grad for a in args)
        record = _C._is_grad_enabled() and any(ctx.needs_input_grad)
        separate_setup = cls.setup_context is not Function.setup_context
        with no_grad():
            if separate_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not record:
            return output
        is_tuple = isinstance(output, tuple)
        outs = list(output) if is_tuple else [output]
        inputs = [a if isinstance(a, _Tensor) else None for a in args]
        dirty = ctx._dirty
        nondiff = ctx._non_differentiable
        out_tensors, differentiable, is_dirty = [], [], []
        for o in outs:
            if not isinstance(o, _Tensor):
                out_tensors.append(None)
                differentiable.append(False)
                is_dirty.append(False)
                continue
            d = any(o._is_same(x) for x in dirty)
            if not d and any(isinstance(x, _Tensor) and o._is_same(x) for x in args):
                o = o.detach()  # an input returned as is becomes a new alias with its own history
            out_tensors.append(o)
            differentiable.append(not any(o._is_same(x) for x in nondiff))
            is_dirty.append(d)
        _C._function_record(ctx, inputs, out_tensors, cls.__name__ + "Backward", differentiable, is_dirty)
        # Saved outputs are kept without their history (the node holds ctx, so
        # a saved output with history would be a reference cycle in C++).
        saved = []
        hooks = _C._current_saved_tensors_default_hooks()
        for t in ctx.to_save:
            if t is None:
                saved.append((None, 0))
            elif hooks is not None:
                saved.append((_Packed(t, *hooks), 0))
            elif any(o is not None and t._is_same(o) for o in out_tensors):
                saved.append((t.detach(), t._version))
            else:
                saved.append((t, t._version))
        ctx._saved = saved
        ctx.to_save = ()
        res = [o if o is not None else orig for o, orig in zip(out_tensors, outs)]
        return tuple(res) if is_tuple else res[0]


def once_differentiable(fn):
    """Marks a backward as not differentiable itself: it runs with grad mode off."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper
