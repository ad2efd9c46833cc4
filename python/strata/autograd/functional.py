"""torch.autograd.functional: Jacobians, Hessians and their products with vectors for
functions of tensors, on the tape autograd (docs/FUNC.md).

Inputs are given as a Tensor or a tuple of Tensors, and results mirror that: a single
tensor in gives a single tensor back, a tuple gives a tuple (jacobian and hessian nest
[output][input] / [input][input]). Without create_graph the inputs are detached first and
every result comes back without history; with it, the results are differentiable
functions of the inputs. Forward-mode products (jvp, hvp, strategy="forward-mode") use
the double-backward construction: a backward pass with a dummy cotangent that requires
grad, differentiated again with respect to that cotangent.
"""

from .. import _C
from .._grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(x, what, api):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, _C.Tensor):
            where = f"the value at index {i} has type {type(t)}" if is_tuple else f"the given {what} has type {type(t)}"
            raise TypeError(f"The {what} given to {api} must be either a Tensor or a tuple of Tensors but {where}.")
    return is_tuple, xs


def _unpack(res, flags):
    """Drops the tuple levels the caller did not have: flags is is_tuple, or a pair
    (outer_is_tuple, inner_is_tuple) for the two-level results."""
    if isinstance(flags, tuple):
        outer, inner = flags
        if not inner:
            res = tuple(r[0] for r in res)
        return res if outer else res[0]
    return res if flags else res[0]


def _prepare(xs, create_graph, need_graph):
    # A new tensor object per input (so the function's own captures of the same tensor are not
    # confused with it): connected to the input's history only when create_graph asks for it.
    out = []
    for t in xs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(xs, create_graph):
    if not xs:
        return xs
    if isinstance(xs[0], tuple):
        return tuple(_finish(x, create_graph) for x in xs)
    return xs if create_graph else tuple(t.detach() for t in xs)


def _check_v(v, refs, refs_is_tuple):
    if len(refs) > 1 or refs_is_tuple:
        if len(v) != len(refs):
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got {len(v)}.")
    elif len(v) != 1:
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, refs)):
        if tuple(a.shape) != tuple(b.shape):
            pre = f"Entry {i} in " if refs_is_tuple or len(refs) > 1 else ""
            raise RuntimeError(f"{pre}v has invalid size: should be {b.size()} but got {a.size()}.")


def _strict_check(xs, kind, strict):
    if not strict:
        return
    for i, t in enumerate(xs):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                               "This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "outputs":
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               "must be computed in a differentiable manner from the input when running in strict "
                               "mode.")
        if kind == "jacobian":
            raise RuntimeError("While computing the hessian, found that the jacobian of the user-provided function "
                               f"with respect to input {i} is independent of the input. This is not allowed in strict "
                               "mode. You should ensure that your function is twice differentiable and that the "
                               "jacobian depends on the inputs (this would be violated by a linear function for "
                               "example).")
        if kind == "hessian":
            raise RuntimeError(f"The hessian of the user-provided function with respect to input {i} is independent "
                               "of the input. This is not allowed in strict mode. You should ensure that your "
                               "function is thrice differentiable and that the hessian depends on the inputs.")
        if kind == "grad_inputs":
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                               "user-provided function. This is not allowed in strict mode.")


def _grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad over the outputs that require grad (None entries skipped); None for an
    input nothing reaches."""
    from . import grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    outs, gos = [], []
    for o, g in zip(outputs, grad_outputs):
        if o is not None and o.requires_grad:
            outs.append(o)
            gos.append(g)
    if not outs:
        return (None,) * len(inputs)
    return grad(outs, inputs, gos, retain_graph=retain_graph, create_graph=create_graph, allow_unused=True)


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when "
                  "using the double backward trick to compute forward mode gradients. This is not allowed in strict "
                  "mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian."
                         " This is not allowed in strict mode as it prevents from using the double backward trick to "
                         "replace forward mode AD.",
}
_NO_GRAPH = {
    "back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode when create_graph=True.",
    "double_back": "The hessian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode when create_graph=True.",
}
_NO_GRAPH["back_trick"] = _NO_GRAPH["back"]
_NO_GRAPH["double_back_trick"] = _NO_GRAPH["double_back"]


def _zeros_for_none(grads, refs, strict, create_graph, stage):
    from .. import zeros_like
    out = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = zeros_like(r)
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(_NO_GRAPH[stage].format(i=i))
        out.append(g)
    return tuple(out)


def _single_element_output(outputs, is_tuple, api):
    if is_tuple or not isinstance(outputs[0], _C.Tensor):
        raise RuntimeError(f"The function given to {api} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {api} should contain a single element")


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product; v has the structure of the output
    (it may be omitted when the output is a single element)."""
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prepare(xs, create_graph, True)
        out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "vjp")
        _strict_check(outs, "outputs", strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _prepare(v, create_graph, False)
            _check_v(v, outs, out_tuple)
        elif len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _zeros_for_none(_grad(outs, xs, v, create_graph=create_graph), xs, strict, create_graph, "back")
    return _unpack(_finish(outs, create_graph), out_tuple), _unpack(_finish(res, create_graph), in_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, by the double-backward construction
    (twice the backward work of a vjp); v has the structure of inputs (it may be omitted
    when the input is a single element)."""
    from .. import zeros_like
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
        xs = _prepare(xs, create_graph, True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _prepare(v, create_graph, False)
            _check_v(v, xs, in_tuple)
        elif len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "jvp")
        _strict_check(outs, "outputs", strict)
        dummies = tuple(zeros_like(o, requires_grad=True) for o in outs)
        g = _grad(outs, xs, dummies, create_graph=True)
        _strict_check(g, "grad_inputs", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _grad(g, dummies, v, create_graph=create_graph)
        res = _zeros_for_none(res, outs, strict, create_graph, "back_trick")
    return _unpack(_finish(outs, create_graph), out_tuple), _unpack(_finish(res, create_graph), out_tuple)


def _basis_rows(n, dtype, device):
    from .. import eye
    return eye(n, dtype=dtype, device=device)


def _jac_reverse(outs, xs, create_graph, strict):
    """Jacobian [out][in] (shape out.shape + in.shape) by one backward per output element."""
    from .. import stack, zeros_like
    jac = []
    for i, o in enumerate(outs):
        rows = [[] for _ in xs]
        flat = o.reshape(-1)
        for k in range(o.numel()):
            gs = _grad((flat[k],), xs, retain_graph=True, create_graph=create_graph)
            for j, (g, x) in enumerate(zip(gs, xs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. "
                                           "This is not allowed in strict mode.")
                    g = zeros_like(x)
                elif strict and create_graph and not g.requires_grad:
                    raise RuntimeError(f"The jacobian of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode when create_graph=True.")
                rows[j].append(g)
        jac.append(tuple(
            (stack(r) if r else zeros_like(x).reshape((0,) + tuple(x.shape))).reshape(tuple(o.shape) + tuple(x.shape))
            for r, x in zip(rows, xs)))
    return tuple(jac)


def _jac_forward(outs, xs, create_graph):
    """Jacobian [out][in] from Jacobian-vector products of the input basis vectors (the
    double-backward construction: one recorded backward, then one backward per element)."""
    from .. import stack, zeros_like
    dummies = tuple(zeros_like(o, requires_grad=True) for o in outs)
    g = _grad(outs, xs, dummies, create_graph=True)
    live = [(gi, xi) for gi, xi in zip(g, xs) if gi is not None and gi.requires_grad]
    cols = [[] for _ in outs]  # per output: one tensor per input element
    for x in xs:
        for k in range(x.numel()):
            t = zeros_like(x).reshape(-1)
            t[k] = 1
            t = t.reshape(x.shape)
            tangent = [t if xi is x else zeros_like(xi) for _, xi in live]
            res = _grad(tuple(gi for gi, _ in live), dummies, tuple(tangent), retain_graph=True,
                        create_graph=create_graph) if live else (None,) * len(outs)
            for c, r, o in zip(cols, res, outs):
                c.append(zeros_like(o) if r is None else r)
    jac = []
    for o, c in zip(outs, cols):
        per_in, off = [], 0
        for x in xs:
            m = x.numel()
            part = c[off:off + m]
            blk = stack(part) if part else zeros_like(o).reshape((0,) + tuple(o.shape))
            per_in.append(blk.reshape(m, o.numel()).transpose(0, 1).reshape(tuple(o.shape) + tuple(x.shape)))
            off += m
        jac.append(per_in)
    return jac  # lists, as torch's forward-mode path returns them


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs: a Tensor for one input and one output, a tuple over
    the inputs (one output) or over the outputs (one input), else a tuple over outputs of
    tuples over inputs; entry [i][j] has shape outputs[i].shape + inputs[j].shape.
    strategy "forward-mode" (with vectorize=True, as in torch) builds it from
    Jacobian-vector products. vectorize is accepted; the rows are computed one at a time."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                             'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, '
                             'prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` and '
                                      '`strategy="forward-mode"` are not supported together (yet). Please either set '
                                      '`create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are '
                               'not supported together (yet). Please either set `strict=False` or '
                               '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                                      "implemented for `vectorize=True`.")
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _prepare(xs, create_graph, True)
        out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "jacobian")
        _strict_check(outs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        if strategy == "forward-mode":
            jac = _jac_forward(outs, xs, create_graph)  # create_graph is False here: no history to drop
        else:
            jac = _finish(_jac_reverse(outs, xs, create_graph, strict), create_graph)
        return _unpack(jac, (out_tuple, in_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function returning a single-element tensor: a Tensor of shape
    inputs.shape + inputs.shape for one input, else a tuple of tuples [i][j]."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*inp):
        out = func(*inp)
        is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _strict_check(outs, "outputs", strict)
        _single_element_output(outs, is_tuple, "hessian")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(scalar_func, inp, create_graph=True)
        _strict_check(jac, "jacobian", strict)
        return jac

    res = jacobian(jac_func, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _unpack(res, (in_tuple, in_tuple))


def _second_order_setup(func, inputs, v, create_graph, strict, api):
    in_tuple, xs = _as_tuple(inputs, "inputs", api)
    xs = _prepare(xs, create_graph, True)
    if v is not None:
        _, v = _as_tuple(v, "v", api)
        v = _prepare(v, create_graph, False)
        _check_v(v, xs, in_tuple)
    elif len(xs) != 1 or xs[0].numel() != 1:
        raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                           "Tensor with a single element.")
    out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", api)
    _strict_check(outs, "outputs", strict)
    _single_element_output(outs, out_tuple, api)
    jac = _grad(outs, xs, create_graph=True)
    _strict_check(jac, "jacobian", strict)
    return in_tuple, out_tuple, xs, v, outs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of a single-element function."""
    with enable_grad():
        in_tuple, out_tuple, xs, v, outs, jac = _second_order_setup(func, inputs, v, create_graph, strict, "vhp")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _zeros_for_none(_grad(jac, xs, v, create_graph=create_graph), xs, strict, create_graph, "double_back")
    return _unpack(_finish(outs, create_graph), out_tuple), _unpack(_finish(res, create_graph), in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of a single-element function, by the
    double-backward construction (for a twice-differentiable function H is symmetric and
    vhp gives the same values with one backward pass less)."""
    from .. import zeros_like
    with enable_grad():
        in_tuple, out_tuple, xs, v, outs, jac = _second_order_setup(func, inputs, v, create_graph, strict, "hvp")
        dummies = tuple(zeros_like(x, requires_grad=True) for x in xs)
        back = _grad(jac, xs, dummies, create_graph=True)
        _strict_check(jac, "hessian", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _grad(back, dummies, v, create_graph=create_graph)
        res = _zeros_for_none(res, xs, strict, create_graph, "double_back_trick")
    return _unpack(_finish(outs, create_graph), out_tuple), _unpack(_finish(res, create_graph), in_tuple)
