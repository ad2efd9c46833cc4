"""strata.distributed.autograd: torch.distributed.autograd for RPC (CPU tensors).

Inside `with dist_autograd.context() as context_id:`, every RPC carries the context id; the tensors it sends that
require grad are recorded as a *send* on the sender and arrive as leaves (a *recv*) on the receiver, in both
directions (arguments and results). `backward(context_id, roots)` runs the local backward from the roots to the
leaves they reach: a recv leaf's gradient is sent to the worker that sent that tensor, which runs its own local
backward from the sent tensors with it (recursively, across workers); every other leaf's gradient is accumulated
in the context (`get_gradients`), never in `.grad`.

Each send is differentiated in its own local pass when its gradient arrives: a graph part shared by the roots and
sends, or by two sends (a tensor sent twice), is traversed once per pass, the gradients adding up. So that this
works, every pass keeps the graph (retain_graph=True inside); the graph is freed when its tensors are dropped (the
context keeps the sent tensors until it exits). Hence `retain_graph=False` frees nothing early, and a second
backward in the same context works where torch raises.

The local pass needs the leaves its graph reaches. Strata's graph nodes do not name their leaf tensors, so they are
found by matching the AccumulateGrad nodes reached against the candidates of the context: recv leaves, sent
tensors, values kept by RRefs on this worker (tensors, modules' parameters, containers of them) and, only when some
node is still unmatched, every leaf tensor the garbage collector tracks."""

import contextlib
import gc
import itertools
import threading

__all__ = ["context", "backward", "get_gradients", "DistAutogradContext"]

_contexts = {}
_lock = threading.Lock()
_local = threading.local()
_counter = itertools.count(0)


class DistAutogradContext:
    def __init__(self, context_id):
        self.id = context_id
        self.lock = threading.Lock()
        self.grads = {}  # id(tensor) -> [tensor, gradient]
        self.sends = {}  # send id -> the tensors sent that require grad
        self.recvs = {}  # id(tensor) -> (tensor, sender worker id, send id, position in that send)
        self.workers = set()  # other workers that know this context
        self.send_ids = itertools.count()

    def _context_id(self):
        return self.id

    def _known_worker_ids(self):
        return set(self.workers)

    def _send_functions(self):
        return dict(self.sends)

    def _recv_functions(self):
        return {k: v[0] for k, v in self.recvs.items()}


def _agent():
    from ..rpc import api

    return api._agent


def _my_id():
    a = _agent()
    return a.me.id if a is not None else 0


def _current_context_id():
    return getattr(_local, "ctx", None)


@contextlib.contextmanager
def _running_in(ctx_id):
    prev = getattr(_local, "ctx", None)
    _local.ctx = ctx_id
    try:
        yield
    finally:
        _local.ctx = prev


def _get_or_create(ctx_id):
    with _lock:
        c = _contexts.get(ctx_id)
        if c is None:
            c = _contexts[ctx_id] = DistAutogradContext(ctx_id)
        return c


def _retrieve_context(context_id):
    with _lock:
        c = _contexts.get(context_id)
    if c is None:
        raise RuntimeError(f"Could not find autograd context with id: {context_id}")
    return c


def _is_valid_context(context_id):
    with _lock:
        return context_id in _contexts


class context:
    """`with context() as context_id:` a distributed autograd context for this thread (released at exit, on every
    worker that took part)."""

    def __enter__(self):
        if _current_context_id() is not None:
            raise RuntimeError("Already have an autograd context id for this thread.")
        cid = (_my_id() << 48) + next(_counter)
        _get_or_create(cid)
        _local.ctx = cid
        self.context_id = cid
        return cid

    def __exit__(self, *exc):
        _local.ctx = None
        _release(self.context_id)
        return False


def _release(ctx_id):
    with _lock:
        c = _contexts.pop(ctx_id, None)
    agent = _agent()
    if c is None or agent is None:
        return
    from ..rpc.api import rpc_async

    for w in c.workers:
        if w != agent.me.id:
            try:
                rpc_async(w, _release_remote, args=(ctx_id,))
            except Exception:
                pass


def _release_remote(ctx_id):
    _release(ctx_id)


def _release_all():
    with _lock:
        _contexts.clear()


# ---- recording (called by the RPC agent) ------------------------------------------------------------------------

def _record_send(ctx_id, tensors, to_info):
    """The autograd part of a message sent in context ctx_id: (ctx_id, send id or None, sender, indices)."""
    if ctx_id is None:
        return None
    with _lock:
        c = _contexts.get(ctx_id)
    if c is None:
        return None
    if to_info is not None:
        c.workers.add(to_info.id)
    idx = [i for i, t in enumerate(tensors) if t.requires_grad]
    if not idx:
        return (ctx_id, None, _my_id(), [])
    with c.lock:
        sid = next(c.send_ids)
        c.sends[sid] = [tensors[i] for i in idx]
    return (ctx_id, sid, _my_id(), idx)


def _record_recv(meta, tensors):
    """Records the tensors received with `meta` as recv leaves; returns the context id."""
    if meta is None:
        return None
    ctx_id, sid, sender, idx = meta
    c = _get_or_create(ctx_id)
    if sender != _my_id():
        c.workers.add(sender)
    if sid is not None:
        with c.lock:
            for pos, i in enumerate(idx):
                t = tensors[i]
                c.recvs[id(t)] = (t, sender, sid, pos)
    return ctx_id


# ---- backward ---------------------------------------------------------------------------------------------------

def _accumulators(outputs):
    """The AccumulateGrad nodes reachable from outputs, id -> node (the dict keeps the node objects alive, so that
    the same graph node answers with the same object)."""
    seen, acc = {}, {}
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        if n.name() == "AccumulateGrad":
            acc[id(n)] = n
            continue
        for nxt, _ in n.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return acc, seen


def _acc_node(t):
    import strata

    try:
        with strata.enable_grad():
            v = t.view_as(t)
        fn = v.grad_fn
        return fn.next_functions[0][0] if fn is not None else None
    except Exception:
        return None


def _owned_leaf_candidates():
    agent = _agent()
    if agent is None:
        return
    import strata

    with agent._lock:
        futures = list(agent.owned.values())
    for f in futures:
        if not f.done() or f._error is not None:
            continue
        yield from _tensors_in(f._result, strata, 2)


def _tensors_in(v, strata, depth):
    if isinstance(v, strata.Tensor):
        yield v
    elif isinstance(v, strata.nn.Module):
        yield from v.parameters()
    elif depth > 0 and isinstance(v, (list, tuple)):
        for x in v:
            yield from _tensors_in(x, strata, depth - 1)
    elif depth > 0 and isinstance(v, dict):
        for x in v.values():
            yield from _tensors_in(x, strata, depth - 1)
    elif depth > 0 and hasattr(v, "__dict__") and not isinstance(v, type):
        for x in vars(v).values():
            yield from _tensors_in(x, strata, depth - 1)


def _leaves_for(ctx, acc):
    import strata

    found = {}

    def consider(t):
        if not isinstance(t, strata.Tensor) or not t.requires_grad or t.grad_fn is not None:
            return
        n = _acc_node(t)
        if n is not None and id(n) in acc and id(n) not in found:
            found[id(n)] = t

    with ctx.lock:
        recv = [e[0] for e in ctx.recvs.values()]
        sent = [t for ts in ctx.sends.values() for t in ts]
    for group in (recv, sent, _owned_leaf_candidates()):
        for t in group:
            consider(t)
            if len(found) == len(acc):
                return list(found.values())
    for o in gc.get_objects():
        if isinstance(o, strata.Tensor):
            consider(o)
            if len(found) == len(acc):
                break
    return list(found.values())


def _local_backward(ctx, outputs, grads, retain_graph):
    import strata
    from ..rpc.api import rpc_async

    leaf_grads = {}

    def add(t, g):
        e = leaf_grads.get(id(t))
        if e is None:
            leaf_grads[id(t)] = [t, g]
        else:
            e[1] = e[1] + g

    nonleaf = []
    for o, g in zip(outputs, grads):
        if g is None or not o.requires_grad:
            continue
        if o.grad_fn is None:
            add(o, g)
        else:
            nonleaf.append((o, g))
    if nonleaf:
        acc, _nodes = _accumulators([o for o, _ in nonleaf])
        # A leaf no Python object refers to any more is not found: its gradient could not be looked up anyway.
        leaves = _leaves_for(ctx, acc)
        if leaves:
            # The graph is always kept (see the module's docstring): a part reached by this pass may be reached again
            # by the pass of a send whose gradient arrives later.
            gs = strata.autograd.grad([o for o, _ in nonleaf], leaves, grad_outputs=[g for _, g in nonleaf],
                                      retain_graph=True, allow_unused=True)
            for t, g in zip(leaves, gs):
                if g is not None:
                    add(t, g)
    remote = {}
    for t, g in leaf_grads.values():
        with ctx.lock:
            r = ctx.recvs.get(id(t))
        if r is not None and r[0] is t:
            remote.setdefault((r[1], r[2]), {})[r[3]] = g
        else:
            with ctx.lock:
                e = ctx.grads.get(id(t))
                if e is None:
                    ctx.grads[id(t)] = [t, g.detach()]
                else:
                    e[1] = e[1] + g
    futs = [rpc_async(sender, _backward_send, args=(ctx.id, sid, by_pos, retain_graph))
            for (sender, sid), by_pos in remote.items()]
    for f in futs:
        f.wait()


def _backward_send(ctx_id, sid, by_pos, retain_graph):
    ctx = _retrieve_context(ctx_id)
    with ctx.lock:
        outs = ctx.sends.get(sid)
    if outs is None:
        raise RuntimeError(f"dist_autograd: no send {sid} in context {ctx_id}")
    _local_backward(ctx, outs, [by_pos.get(i) for i in range(len(outs))], retain_graph)


def backward(context_id, roots, retain_graph=False):
    """Runs the distributed backward pass from the scalar tensors `roots` in context `context_id`; the gradients
    are accumulated in the contexts of the workers holding the leaves (get_gradients), not in .grad. Graphs are
    kept whatever retain_graph says (see the module's docstring)."""
    import strata

    ctx = _retrieve_context(context_id)
    roots = list(roots)
    if not roots:
        raise RuntimeError("dist_autograd.backward: roots is empty")
    for r in roots:
        if not isinstance(r, strata.Tensor):
            raise TypeError(f"dist_autograd.backward: roots must be tensors, got {type(r).__name__}")
        if r.numel() != 1:
            raise RuntimeError(f"dist_autograd.backward: roots must be scalars (grad can be implicitly created only "
                               f"for scalar outputs), got shape {tuple(r.shape)}")
        if not r.requires_grad:
            raise RuntimeError("dist_autograd.backward: element 0 of tensors does not require grad and does not "
                               "have a grad_fn")
    _local_backward(ctx, roots, [strata.ones_like(r) for r in roots], retain_graph)


def get_gradients(context_id):
    """{tensor: gradient} accumulated on this worker in context `context_id`."""
    ctx = _retrieve_context(context_id)
    with ctx.lock:
        return {t: g for t, g in ctx.grads.values()}
