"""torch.distributed.rpc's functions and RRef over the agent in _agent.py."""

import atexit
import enum
import threading

from ...futures import Future
from . import _agent as A
from ._agent import DEFAULT_RPC_TIMEOUT_SEC, UNSET_RPC_TIMEOUT, WorkerInfo

__all__ = ["init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "get_worker_info", "RRef", "WorkerInfo",
           "BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions", "is_available"]

_agent = None
_init_lock = threading.Lock()


def is_available():
    return True


class BackendType(enum.Enum):
    """The RPC backends: TENSORPIPE (here: Strata's own TCP transport, same options)."""

    TENSORPIPE = "TENSORPIPE"


class RpcBackendOptions:
    def __init__(self, rpc_timeout=DEFAULT_RPC_TIMEOUT_SEC, init_method=A.DEFAULT_INIT_METHOD):
        self.rpc_timeout = float(rpc_timeout)
        self.init_method = init_method


class TensorPipeRpcBackendOptions(RpcBackendOptions):
    """torch's TensorPipe options: num_worker_threads (the executor's threads), rpc_timeout (seconds, the default
    for every call; 0 is no limit), init_method (env://, tcp://host:port, file:///path), device_maps / devices
    (CPU only: a map naming another device is refused by init_rpc)."""

    def __init__(self, *, num_worker_threads=A.DEFAULT_NUM_WORKER_THREADS, rpc_timeout=DEFAULT_RPC_TIMEOUT_SEC,
                 init_method=A.DEFAULT_INIT_METHOD, device_maps=None, devices=None, _transports=None,
                 _channels=None):
        super().__init__(rpc_timeout, init_method)
        if int(num_worker_threads) < 1:
            raise ValueError(f"TensorPipeRpcBackendOptions: num_worker_threads must be >= 1, got {num_worker_threads}")
        self.num_worker_threads = int(num_worker_threads)
        self.device_maps = {}
        for to, m in (device_maps or {}).items():
            self.set_device_map(to, m)
        self.devices = list(devices or [])

    def set_device_map(self, to, device_map):
        self.device_maps.setdefault(to, {}).update(device_map)

    def set_devices(self, devices):
        self.devices = list(devices)


def _check_cpu_devices(options):
    from ... import _C

    named = [d for m in options.device_maps.values() for kv in m.items() for d in kv] + list(options.devices)
    for d in named:
        if isinstance(d, int) or _C.device(d).type != "cpu":
            raise ValueError(f"init_rpc: device_maps/devices name {d!r}, but RPC here carries CPU tensors only "
                             "(this build has no CUDA backend)")


def _require_agent(what="RPC"):
    if _agent is None:
        raise RuntimeError(f"{what}: RPC has not been initialized. Call strata.distributed.rpc.init_rpc first.")
    return _agent


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None):
    """Starts this process's RPC agent as worker `name` (unique) with `rank` among `world_size` workers, meeting
    the others through the store of rpc_backend_options.init_method (env:// reads MASTER_ADDR, MASTER_PORT, RANK,
    WORLD_SIZE). Returns once every worker's address is known."""
    global _agent
    from .. import _rendezvous, _state, PrefixStore

    if not isinstance(name, str) or not name:
        raise ValueError(f"init_rpc: name must be a non-empty string, got {name!r}")
    if backend is not None and backend != BackendType.TENSORPIPE:
        raise ValueError(f"init_rpc: unsupported backend {backend!r} (BackendType.TENSORPIPE)")
    options = rpc_backend_options if rpc_backend_options is not None else TensorPipeRpcBackendOptions()
    if not isinstance(options, RpcBackendOptions):
        raise TypeError(f"init_rpc: rpc_backend_options must be TensorPipeRpcBackendOptions, got "
                        f"{type(options).__name__}")
    if not hasattr(options, "num_worker_threads"):
        options.num_worker_threads = A.DEFAULT_NUM_WORKER_THREADS
        options.device_maps, options.devices = {}, []
    _check_cpu_devices(options)
    with _init_lock:
        if _agent is not None:
            raise RuntimeError("init_rpc: RPC is already initialized in this process (call rpc.shutdown first)")
        timeout = options.rpc_timeout if options.rpc_timeout > 0 else 1800.0
        if _state.default is not None and _state.store is not None:
            # A process group exists: its store is the rendezvous (its port is taken by it).
            store, owns = PrefixStore("rpc_agent", _state.store), False
            rank = _state.default.rank() if rank == -1 else rank
            world_size = _state.default.size() if world_size is None else world_size
        else:
            store, rank, world_size = _rendezvous(options.init_method or "env://", rank,
                                                  -1 if world_size is None else world_size, timeout)
            owns = True
        if not 0 <= rank < world_size:
            raise ValueError(f"init_rpc: rank {rank} is outside [0, {world_size})")
        _agent = A.Agent(name, rank, world_size, store, options, owns)


def shutdown(graceful=True, timeout=A.DEFAULT_SHUTDOWN_TIMEOUT):
    """Stops the agent. graceful=True: first waits for this worker's outstanding calls, then for every worker to
    reach shutdown (a barrier through the store), serving their requests meanwhile, so no work is lost. timeout
    (seconds, 0: none) bounds the wait for the other workers; past it the store raises DistStoreError."""
    global _agent
    agent = _require_agent("shutdown")
    if graceful:
        agent.wait_outstanding()
        agent.barrier("shutdown", float(timeout))
        if agent.owns_store:
            # The rendezvous server lives in rank 0: it leaves last, once everyone is past the barrier.
            agent.store.add(f"{agent.prefix}/exit", 1)
            if agent.me.id == 0:
                agent.barrier("exit")
            else:
                agent.store.set(f"{agent.prefix}/exit/{agent.me.id}", b"1")
    agent.close()
    with _init_lock:
        _agent = None
    from ..autograd import _release_all

    _release_all()


@atexit.register
def _close_at_exit():
    global _agent
    if _agent is not None:
        _agent.close()
        _agent = None


def get_worker_info(worker_name=None):
    """The WorkerInfo of `worker_name`, or of this worker."""
    agent = _require_agent("get_worker_info")
    return agent.me if worker_name is None else agent.worker_info(worker_name)


def _check_call(func, args, kwargs, what):
    if not callable(func):
        raise TypeError(f"rpc.{what}: func must be callable, got {type(func).__name__}")
    args = () if args is None else tuple(args)
    kwargs = {} if kwargs is None else dict(kwargs)
    return args, kwargs


def _current_ctx():
    from ..autograd import _current_context_id

    return _current_context_id()


def rpc_async(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
    """Runs func(*args, **kwargs) on worker `to`; returns a strata.futures.Future of the result (an exception raised
    there is raised by wait(), with the remote traceback in its message)."""
    agent = _require_agent("rpc_async")
    args, kwargs = _check_call(func, args, kwargs, "rpc_async")
    return agent.send_request(to, (func, args, kwargs), timeout, _current_ctx())


def rpc_sync(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
    """rpc_async(...).wait()."""
    return rpc_async(to, func, args, kwargs, timeout).wait()


def remote(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
    """Runs func on worker `to`, which keeps the result; returns an RRef to it at once."""
    agent = _require_agent("remote")
    args, kwargs = _check_call(func, args, kwargs, "remote")
    info = agent.worker_info(to)
    rid = agent.new_id()
    if info.id == agent.me.id:
        _owned_future(rid)  # the entry exists before the call runs, so local_value() can wait on it
    ack = agent.send_request(info, (_remote_create, (rid, func, args, kwargs), {}), timeout, _current_ctx())
    return RRef._make(info, rid, ack)


# ---- the owner's side ----------------------------------------------------------------------------------------

def _owned_future(rid):
    agent = _require_agent("RRef")
    with agent._lock:
        f = agent.owned.get(rid)
        if f is None:
            f = agent.owned[rid] = Future()
        return f


def _remote_create(rid, func, args, kwargs):
    fut = _owned_future(rid)
    try:
        value = func(*args, **kwargs)
    except BaseException as e:
        fut.set_exception(e)
        return None
    deferred = isinstance(value, A._Deferred)  # a proxy's call of an @async_execution method
    if deferred:
        value = value.future
    if deferred or A._is_async_function(func):
        if not isinstance(value, Future):
            fut.set_exception(TypeError(f"rpc.remote: {getattr(func, '__qualname__', func)} is decorated with "
                                        "@async_execution and must return a Future"))
            return None
        value.add_done_callback(lambda f: fut.set_exception(f._error) if f._error is not None
                                else fut.set_result(f._result))
    else:
        fut.set_result(value)
    return None


def _fetch(rid):
    return A._Deferred(_owned_future(rid))


def _call_method(name, rref, *args, **kwargs):
    method = getattr(rref.local_value(), name)
    result = method(*args, **kwargs)
    if A._is_async_function(method):
        return A._Deferred(result)
    return result


def _rref_backward(rref, ctx_id, retain_graph):
    value = rref.local_value()
    if ctx_id == -1:
        value.backward(retain_graph=retain_graph)
    else:
        from .. import autograd as dist_autograd

        dist_autograd.backward(ctx_id, [value], retain_graph=retain_graph)


class _Proxy:
    def __init__(self, rref, kind, timeout):
        self._rref, self._kind, self._timeout = rref, kind, timeout

    def __getattr__(self, name):
        fn = {"sync": rpc_sync, "async": rpc_async, "remote": remote}[self._kind]
        rref, timeout = self._rref, self._timeout

        def call(*args, **kwargs):
            return fn(rref.owner(), _call_method, args=(name, rref) + args, kwargs=kwargs, timeout=timeout)

        call.__name__ = name
        return call


class RRef:
    """A reference to a value kept by its owner worker. RRef(value) makes this worker the owner of `value`;
    rpc.remote returns RRefs owned by the callee. An RRef sent in an RPC arrives as an RRef to the same value.

    The owner keeps every value an RRef was made for until rpc.shutdown (no reference counting)."""

    def __init__(self, value, type_hint=None):
        agent = _require_agent("RRef")
        self._owner = agent.me
        self._rid = agent.new_id()
        self._ack = None
        _owned_future(self._rid).set_result(value)

    @classmethod
    def _make(cls, owner, rid, ack):
        r = cls.__new__(cls)
        r._owner, r._rid, r._ack = owner, rid, ack
        return r

    @classmethod
    def _from_wire(cls, owner, rid):
        return cls._make(owner, rid, None)

    def __class_getitem__(cls, item):  # RRef[Tensor] in type hints
        return cls

    def __reduce__(self):
        raise RuntimeError("RRef: an RRef can only be pickled as an argument or result of an RPC")

    def is_owner(self):
        return _require_agent("RRef").me.id == self._owner.id

    def owner(self):
        return self._owner

    def owner_name(self):
        return self._owner.name

    def confirmed_by_owner(self):
        if self.is_owner() or self._ack is None:
            return True
        return self._ack.done() and self._ack._error is None

    def _get_future(self):
        if self._ack is None:
            f = Future()
            f.set_result(None)
            return f
        return self._ack

    def local_value(self):
        if not self.is_owner():
            raise RuntimeError(f"RRef.local_value(): this worker ({get_worker_info()}) is not the owner "
                               f"({self._owner}); call it on the owner, or use to_here()")
        if self._ack is not None and self._ack.done() and self._ack._error is not None:
            raise self._ack._error
        return _owned_future(self._rid).wait()

    def to_here(self, timeout=UNSET_RPC_TIMEOUT):
        """The value, copied from the owner (the value itself on the owner)."""
        if self._ack is not None and self._ack.done() and self._ack._error is not None:
            raise self._ack._error
        if self.is_owner():
            return self.local_value()
        return rpc_sync(self._owner, _fetch, args=(self._rid,), timeout=timeout)

    def rpc_sync(self, timeout=UNSET_RPC_TIMEOUT):
        """rref.rpc_sync().method(*args): runs value.method(*args) on the owner and returns the result."""
        return _Proxy(self, "sync", timeout)

    def rpc_async(self, timeout=UNSET_RPC_TIMEOUT):
        return _Proxy(self, "async", timeout)

    def remote(self, timeout=UNSET_RPC_TIMEOUT):
        return _Proxy(self, "remote", timeout)

    def backward(self, dist_autograd_ctx_id=-1, retain_graph=False):
        """Backward from the (scalar tensor) value on its owner: the plain autograd backward when
        dist_autograd_ctx_id is -1, else distributed autograd in that context."""
        rpc_sync(self._owner, _rref_backward, args=(self, dist_autograd_ctx_id, retain_graph))

    def __repr__(self):
        kind = "OwnerRRef" if _agent is not None and self.is_owner() else "UserRRef"
        return f"{kind}(RRefId = GloballyUniqueId(created_on={self._rid[0]}, local_id={self._rid[1]}), " \
               f"owner={self._owner})"
