"""torch.func's differentiating transforms over Strata's tape autograd (docs/FUNC.md).

Every transform opens a *level*: the tensors it differentiates with respect to are
replaced by fresh handles made by ``_grad_input`` (an ``alias`` that autograd records,
so the handle stays connected to whatever the original is connected to), the function
runs on the handles, and ``autograd.grad`` is asked for gradients with respect to the
handles only. Because each level differentiates with respect to its own handles, an
inner level's result is an ordinary differentiable function of the outer level's
handles, and nesting (grad of grad, jacrev of jacrev, hessian, vjp inside grad) is
the tape's create_graph double backward.

Forward mode (jvp, linearize, jacfwd) has no dual numbers to use: it is the
double-vjp construction. With a dummy cotangent ``u`` that requires grad,
``g(u) = J^T u`` is computed by a backward pass that records its own graph; g is
linear in u, so the gradient of ``<g, t>`` with respect to u is ``J t``. Cost: one
forward, one recorded backward, and one backward through that backward per tangent
(about 2x a true forward-mode jvp), and every op in f needs a differentiable
derivative (the derivatives are written with ops, so they are).
"""

import functools
import threading

from .. import _C
from .._grad_mode import enable_grad, is_grad_enabled
from ._vmap import vmap, _lift_to_active_levels
from ._pytree import tree_flatten, tree_unflatten, tree_map, spec_str

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian"]

_tls = threading.local()


def _depth():
    return getattr(_tls, "depth", 0)


class _Level:
    """One transform level: the depth counts the differentiating transforms active on
    this thread, so an inner level knows an outer one will differentiate its results."""

    def __enter__(self):
        _tls.depth = _depth() + 1
        return self

    def __exit__(self, *exc):
        _tls.depth -= 1
        return False


def _autograd_grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False):
    from ..autograd import grad as _grad
    return _grad(outputs, inputs, grad_outputs, retain_graph=retain_graph, create_graph=create_graph,
                 allow_unused=True)


def _grad_input(t):
    """This level's handle on t: a tensor autograd differentiates with respect to.

    t is not detached: when it requires grad (an outer level's handle, or a tensor of the
    ordinary tape) the handle is a recorded alias of it, so results stay connected to the
    outer computation; otherwise the alias is taken of a fresh leaf that requires grad.
    The alias node is what this level's gradients are taken at (and where the
    leaf search of _foreign_graph stops)."""
    if not isinstance(t, _C.Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
    with enable_grad():
        base = t if t.requires_grad else t.detach().requires_grad_(True)
        # Inside vmap the handle is lifted to every active batch level (an expanded view, no
        # copy): each batch entry then differentiates its own copy, so gradients are per entry.
        return _lift_to_active_levels(_C._ops.alias(base))


def _foreign_graph(outs, handles):
    """True when the graph of outs reaches a leaf that requires grad other than through
    this level's handles (a captured tensor that requires grad): the results must then
    keep their graph, as torch.func's do. One walk of the graph, in C++."""
    return _C._graph_reaches_other_leaf([o for o in outs if isinstance(o, _C.Tensor)], list(handles))


def _needs_graph(outer_grad, originals, outs, handles):
    """Whether this level's results must be differentiable: an outer transform level is
    active, an input requires grad, or the function captured a tensor that requires grad."""
    if _depth() > 1:
        return True
    if not outer_grad:
        return False
    if any(t.requires_grad for t in originals):
        return True
    return _foreign_graph(outs, handles)


def _detach_tree(x):
    return tree_map(lambda v: v.detach() if isinstance(v, _C.Tensor) else v, x)


def _zeros_like(t):
    from .. import zeros_like
    return zeros_like(t)


# ---------------------------------------------------------------------------- argnums


def _check_argnums_type(argnums):
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, tuple):
        if not argnums:
            raise RuntimeError("argnums must be non-empty")
        for a in argnums:
            if isinstance(a, bool) or not isinstance(a, int):
                raise RuntimeError(f"argnum must be int, got: {type(a)}")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")


def _normalize_argnums(argnums, nargs):
    def one(a):
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
        return a % nargs
    if isinstance(argnums, int):
        return one(argnums)
    out = tuple(one(a) for a in argnums)
    if len(set(out)) != len(out):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return out


def _select(args, argnums):
    return args[argnums] if isinstance(argnums, int) else tuple(args[i] for i in argnums)


def _replace(args, argnums, new):
    args = list(args)
    if isinstance(argnums, int):
        args[argnums] = new
    else:
        for i, v in zip(argnums, new):
            args[i] = v
    return tuple(args)


def _tensor_leaves(x, api):
    leaves, spec = tree_flatten(x)
    for v in leaves:
        if not isinstance(v, _C.Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(v)}")
    return leaves, spec


def _split_aux(out, api):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return out


def _check_outputs(out, api):
    leaves, spec = tree_flatten(out)
    if not leaves:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got output = {out})")
    for v in leaves:
        if not isinstance(v, _C.Tensor):
            raise RuntimeError(f"{api}: Expected output of f to be a Tensor or Tensors, got {type(v)}")
    return leaves, spec


# ---------------------------------------------------------------------------- reverse mode


class _VjpCore:
    """f run on this level's handles for the positional arguments in argnums (all of them
    when argnums is None); pull(cotangent leaves) gives the gradient leaves."""

    def __init__(self, func, args, kwargs, argnums, has_aux, api):
        self.outer_grad = is_grad_enabled()
        self.outer_depth = _depth() - 1  # the levels around this transform's own
        diff = args if argnums is None else _select(args, argnums)
        self.in_leaves, self.in_spec = _tensor_leaves(diff, api)
        with enable_grad():
            self.handles = [_grad_input(t) for t in self.in_leaves]
            new = tree_unflatten(self.handles, self.in_spec)
            call_args = new if argnums is None else _replace(args, argnums, new)
            out = func(*call_args, **kwargs)
        self.aux = None
        if has_aux:
            out, self.aux = _split_aux(out, api)
            for v in tree_flatten(self.aux)[0]:
                if not isinstance(v, _C.Tensor):
                    raise RuntimeError(f"{api}: aux must hold only Tensors, got unsupported type {type(v)}")
        self.out = out
        self.out_leaves, self.out_spec = _check_outputs(out, api)
        self.graph = _needs_graph(self.outer_grad, self.in_leaves, self.out_leaves, self.handles)

    def default_graph(self, vecs):
        # For vjp_fn / jvp_fn called after the level closed: differentiable when the results
        # were, when called inside a transform that was not there at creation, or when the
        # vectors themselves require grad.
        return self.graph or _depth() > self.outer_depth or any(c.requires_grad for c in vecs)

    def pull(self, cts, retain_graph=True, create_graph=None):
        if create_graph is None:
            create_graph = self.default_graph(cts)
        outs, gos = [], []
        for o, c in zip(self.out_leaves, cts):
            if o.requires_grad:
                outs.append(o)
                gos.append(c)
        res = [None] * len(self.handles)
        if outs:
            with enable_grad():
                res = list(_autograd_grad(outs, self.handles, gos, retain_graph=retain_graph,
                                          create_graph=create_graph))
        return [_zeros_like(t) if r is None else r for r, t in zip(res, self.in_leaves)]

    def result(self, x):
        return x if self.graph else _detach_tree(x)


def _check_cotangents(core, cotangents, api):
    leaves, spec = tree_flatten(cotangents)
    if spec != core.out_spec:
        raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                           f"to the function. cotangents: {spec_str(spec)}, primal output: {spec_str(core.out_spec)}")
    for i, (c, o) in enumerate(zip(leaves, core.out_leaves)):
        if not isinstance(c, _C.Tensor):
            raise RuntimeError(f"{api}: Expected cotangents to only contain Tensors, got {type(c)}")
        if tuple(c.shape) != tuple(o.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {c.shape} and output[{i}] has "
                               f"a shape of {o.shape}.")
    return leaves


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn): vjp_fn(cotangents) gives the vector-Jacobian product with
    respect to each primal, as a tuple with one entry per primal. cotangents has the
    structure of func's output. With has_aux, func returns (output, aux) and vjp returns
    (output, vjp_fn, aux)."""
    with _Level():
        core = _VjpCore(func, primals, {}, None, has_aux, "vjp(f, *primals)")

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        cts = _check_cotangents(core, cotangents, "vjp(f, *primals)")
        grads = core.pull(cts, retain_graph=retain_graph, create_graph=create_graph)
        return tree_unflatten(grads, core.in_spec)

    out = core.result(core.out)
    if has_aux:
        return out, vjp_fn, core.result(core.aux)
    return out, vjp_fn


def grad_and_value(func, argnums=0, has_aux=False):
    """Like grad, but the transformed function returns (gradient, value) (value is
    (output, aux) with has_aux)."""
    _check_argnums_type(argnums)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        api = "grad_and_value(f)(*args)"
        an = _normalize_argnums(argnums, len(args))
        with _Level():
            core = _VjpCore(func, args, kwargs, an, has_aux, api)
            out = core.out
            if not isinstance(out, _C.Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                                   f"{out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            from .. import ones_like
            grads = core.pull([ones_like(out)], retain_graph=core.graph, create_graph=core.graph)
            g = tree_unflatten(grads, core.in_spec)
            value = core.result(out)
            if has_aux:
                return g, (value, core.result(core.aux))
            return g, value

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of func (which returns a scalar tensor) with respect to the positional
    arguments in argnums (an int, or a tuple giving a tuple of gradients); each argument
    may be a nest of tensors and its gradient has the same nest. With has_aux, func returns
    (output, aux) and the transformed function returns (gradient, aux)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


# ---------------------------------------------------------------------------- forward mode


class _LinearCore:
    """f run on this level's handles; push(tangent leaves) gives J t for every output leaf
    by the double-vjp construction (module docstring)."""

    def __init__(self, func, args, kwargs, argnums, has_aux, api):
        from .. import zeros_like
        self.v = _VjpCore(func, args, kwargs, argnums, has_aux, api)
        v = self.v
        self.dummies = []
        self.gs = [None] * len(v.handles)
        diff_outs = [o for o in v.out_leaves if o.requires_grad]
        if diff_outs:
            with enable_grad():
                self.dummies = [zeros_like(o).requires_grad_(True) for o in diff_outs]
                self.gs = list(_autograd_grad(diff_outs, v.handles, self.dummies, retain_graph=True,
                                              create_graph=True))

    def push(self, tangents, create_graph=None):
        v = self.v
        if create_graph is None:
            create_graph = v.default_graph(tangents)
        pairs = [(g, t) for g, t in zip(self.gs, tangents) if g is not None and g.requires_grad]
        res = [None] * len(self.dummies)
        if pairs:
            with enable_grad():
                res = list(_autograd_grad([g for g, _ in pairs], self.dummies, [t for _, t in pairs],
                                          retain_graph=True, create_graph=create_graph))
        it = iter(res)
        out = []
        for o in v.out_leaves:
            r = next(it) if o.requires_grad else None
            out.append(_zeros_like(o) if r is None else r)
        return out


def _check_tangents(core, tangents, api):
    leaves, spec = tree_flatten(tangents)
    if spec != core.v.in_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python structure. For example, "
                           "if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{spec_str(core.v.in_spec)} and tangents with structure {spec_str(spec)}")
    for t, p in zip(leaves, core.v.in_leaves):
        if not isinstance(t, _C.Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
        if tuple(t.shape) != tuple(p.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    return leaves


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J @ tangents): the Jacobian-vector product of func at primals.
    primals and tangents are tuples with the same structure; the result has the structure
    of func's output. Computed with the double-vjp construction (docs/FUNC.md): about
    twice the cost of a forward-mode jvp, and it keeps f's graph alive meanwhile."""
    api = "jvp(f, primals, tangents)"
    if strict:
        raise RuntimeError("jvp(f, primals, tangents, strict=True): strict is not supported (as in torch.func.jvp)")
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError(f"{api}: Expected tangents to be a tuple of Tensors, got {type(tangents)}")
    with _Level():
        core = _LinearCore(func, primals, {}, None, has_aux, api)
        tl = _check_tangents(core, tangents, api)
        cg = core.v.graph or any(t.requires_grad for t in tl)
        jv = tree_unflatten(core.push(tl, create_graph=cg), core.v.out_spec)
        out = core.v.result(core.v.out)
        if has_aux:
            return out, jv, core.v.result(core.v.aux)
        return out, jv


def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) gives J @ tangents at primals, reusing
    one forward and one recorded backward for every call (each call is one backward pass
    through the recorded backward)."""
    api = "linearize(f, *primals)"
    with _Level():
        core = _LinearCore(func, primals, {}, None, False, api)

    def jvp_fn(*tangents):
        tl = _check_tangents(core, tangents, api)
        return tree_unflatten(core.push(tl), core.v.out_spec)

    return core.v.result(core.v.out), jvp_fn


# ---------------------------------------------------------------------------- Jacobians


def _vjp_rows(vjp_fn, basis, nested=False):
    """The products of vjp_fn with each row of basis: basis is a tuple of tensors sharing a
    leading dim N (row k is the tuple of their k-th slices); returns a tuple of tensors with
    leading dim N, entry k being vjp_fn(row k). Used for jacrev (vjp_fn a vector-Jacobian
    product) and jacfwd (a Jacobian-vector product). Outside vmap all rows are one batched
    call (vmap over the rows of the basis, docs/VMAP.md). Inside vmap the cotangent rows are
    then batched at an inner level where the outputs are not: the batched autograd.grad
    handles that for jacrev's stateless pulls (nested=True: vmap(jacrev(f)) is one backward
    pass too), falling back to one call per row where it cannot; jacfwd's linearized pushes
    inside vmap take one call per row."""
    inside = bool(_C._vmap_levels())
    if not inside or nested:
        try:
            return tuple(vmap(lambda *row: tuple(vjp_fn(row)))(*basis))
        except RuntimeError as e:
            if not inside or "autograd.grad inside vmap" not in str(e):
                raise
    from .. import stack
    rows = [vjp_fn(tuple(b[k] for b in basis)) for k in range(basis[0].shape[0])]
    return tuple(stack([r[i] for r in rows]) for i in range(len(rows[0])))


def _rows_chunked(fn, refs, chunk_size, nested=False):
    """_vjp_rows of fn over the standard basis of the flattened refs, chunk_size rows at a
    time (all at once when None): only one chunk of the basis exists at a time."""
    n = sum(r.numel() for r in refs)
    step = n if chunk_size is None else chunk_size
    parts = [_vjp_rows(fn, _basis(refs, s, min(s + step, n)), nested) for s in range(0, n, step)]
    if len(parts) == 1:
        return parts[0]
    from .. import cat
    return tuple(cat([p[i] for p in parts]) for i in range(len(parts[0])))


def _basis(refs, start, stop):
    """Rows start..stop of the standard basis of the flattened refs, split per ref: a tuple
    whose i-th entry has shape (stop - start, *refs[i].shape), in refs[i]'s dtype."""
    from .. import zeros, arange
    rows = stop - start
    out, off = [], 0
    for r in refs:
        m = r.numel()
        e = zeros(rows, m, dtype=r.dtype, device=r.device)
        lo, hi = max(start, off), min(stop, off + m)  # the basis rows whose 1 falls in this ref
        if lo < hi:
            e[arange(lo - start, hi - start), arange(lo - off, hi - off)] = 1
        out.append(e.reshape((rows,) + tuple(r.shape)))
        off += m
    return tuple(out)


def _check_chunk(chunk_size, api):
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"{api}: `chunk_size` should be greater than 0.")


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of func with respect to the arguments in argnums, by reverse mode: one
    vjp per output element. jac[out][arg] has shape out.shape + arg.shape, nested like
    func's output and, inside, like the selected arguments."""
    _check_argnums_type(argnums)
    _check_chunk(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        an = _normalize_argnums(argnums, len(args))
        with _Level():
            core = _VjpCore(func, args, kwargs, an, has_aux, "jacrev(f)(*args)")
            n = sum(o.numel() for o in core.out_leaves)

            def vjp_fn(cts):
                return tuple(core.pull(list(cts), create_graph=core.graph))

            if n:
                rows = _rows_chunked(vjp_fn, core.out_leaves, chunk_size, nested=True)
            else:
                rows = tuple(_zeros_like(t).reshape((0,) + tuple(t.shape)) for t in core.in_leaves)
            per_out, off = [], 0
            for o in core.out_leaves:
                m = o.numel()
                jacs = [r[off:off + m].reshape(tuple(o.shape) + tuple(t.shape))
                        for r, t in zip(rows, core.in_leaves)]
                per_out.append(tree_unflatten(jacs, core.in_spec))
                off += m
            jac = core.result(tree_unflatten(per_out, core.out_spec))
            if has_aux:
                return jac, core.result(core.aux)
            return jac

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of func with respect to the arguments in argnums, from one jvp per input
    element (linearize: one forward and one recorded backward, then one backward pass per
    element). Same result structure as jacrev."""
    _check_argnums_type(argnums)
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        an = _normalize_argnums(argnums, len(args))
        with _Level():
            core = _LinearCore(func, args, kwargs, an, has_aux, "jacfwd(f)(*args)")
            v = core.v
            n = sum(t.numel() for t in v.in_leaves)
            if n:
                cols = _rows_chunked(lambda ts: tuple(core.push(list(ts), create_graph=v.graph)), v.in_leaves, None)
            else:
                cols = tuple(_zeros_like(o).reshape((0,) + tuple(o.shape)) for o in v.out_leaves)
            per_out = []
            for o, c in zip(v.out_leaves, cols):
                jacs, off = [], 0
                for t in v.in_leaves:
                    m = t.numel()
                    part = c[off:off + m].reshape((m, o.numel())).transpose(0, 1)
                    jacs.append(part.reshape(tuple(o.shape) + tuple(t.shape)))
                    off += m
                per_out.append(tree_unflatten(jacs, v.in_spec))
            jac = v.result(tree_unflatten(per_out, v.out_spec))
            if has_aux:
                return jac, v.result(v.aux)
            return jac

    return wrapper


def hessian(func, argnums=0):
    """jacfwd(jacrev(func, argnums), argnums): second derivatives, shape
    out.shape + arg.shape + arg.shape."""
    return jacfwd(jacrev(func, argnums), argnums)
