"""The RPC agent: worker rendezvous, the socket transport, the request executor, RRef tables and timeouts.

One agent per process (`_agent`), made by init_rpc. Each worker listens on a TCP socket (one listener thread) and
publishes (name, host, port) in the rendezvous store; every worker reads the others' entries. A worker connects to a
peer the first time it sends to it and keeps that connection: requests go one way on it and replies come back on the
same socket. Every connection has a reader thread; requests are executed by a pool of `num_worker_threads` daemon
threads; replies complete the callers' Futures (and run their `then` callbacks) on a second pool of 4 threads.

A message is a fixed header (kind, id, four lengths) and four parts: a small plain pickle of metadata (distributed
autograd information), the body pickled with a Pickler that takes tensors and RRefs out of band, the tensors'
descriptions (dtype, shape, requires_grad, Parameter or not, offset) and their raw bytes, sent from and received
into memory without pickling (64-byte aligned; the received tensors are views of the receive buffer). Tensors
therefore never go through the restricted unpickler of strata.load, keep their dtype, shape and requires_grad (a
Parameter stays a Parameter), and a tensor appearing twice in one message arrives as one tensor (views of one
storage arrive as separate tensors)."""

import collections
import datetime
import io
import itertools
import heapq
import os
import pickle
import socket
import struct
import sys
import threading
import time
import traceback

from ...futures import Future

DEFAULT_RPC_TIMEOUT_SEC = 60.0
UNSET_RPC_TIMEOUT = -1.0
DEFAULT_NUM_WORKER_THREADS = 16
DEFAULT_INIT_METHOD = "env://"
DEFAULT_SHUTDOWN_TIMEOUT = 0.0

_HEADER = struct.Struct("!BQQQQQ")
_REQUEST, _REPLY_OK, _REPLY_ERR = 0, 1, 2


class WorkerInfo:
    """A worker's name and id (its rank), as torch.distributed.rpc.WorkerInfo."""

    __slots__ = ("name", "id")

    def __init__(self, name, id):
        self.name = str(name)
        self.id = int(id)

    def __eq__(self, other):
        return isinstance(other, WorkerInfo) and other.name == self.name and other.id == self.id

    def __hash__(self):
        return hash((self.name, self.id))

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, name={self.name})"

    __str__ = __repr__

    def __reduce__(self):
        return (WorkerInfo, (self.name, self.id))


# ---- serialization ---------------------------------------------------------------------------------------------

def _op_function_reduce(obj):
    """Strata's builtin ops (strata.add, ...) are C objects pickle cannot name: send them as the attribute of the
    namespace they are found in."""
    import strata

    name = getattr(obj, "__name__", None)
    spaces = ["strata", "strata.nn.functional", "strata.linalg", "strata.special", "strata.fft", "strata._C._ops"]
    for space in spaces:
        mod = sys.modules.get(space)
        if mod is not None and name and getattr(mod, name, None) is obj:
            return (_lookup_attr, (space, name))
    raise pickle.PicklingError(f"rpc: cannot send the builtin {obj!r}: it is not an attribute of {spaces}")


def _lookup_attr(space, name):
    import importlib

    return getattr(importlib.import_module(space), name)


class _Pickler(pickle.Pickler):
    def __init__(self, file):
        super().__init__(file, protocol=5)
        self.tensors = []
        self._seen = {}

    def persistent_id(self, obj):
        from ... import _C
        from .api import RRef

        if isinstance(obj, _C.Tensor):
            i = self._seen.get(id(obj))
            if i is None:
                i = self._seen[id(obj)] = len(self.tensors)
                self.tensors.append(obj)
            return ("T", i)
        if isinstance(obj, RRef):
            return ("R", obj._owner.name, obj._owner.id, obj._rid)
        return None

    def reducer_override(self, obj):
        from ... import _C

        if type(obj) is _C.op_function:
            return _op_function_reduce(obj)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, tensors):
        super().__init__(file)
        self.tensors = tensors

    def persistent_load(self, pid):
        if pid[0] == "T":
            return self.tensors[pid[1]]
        if pid[0] == "R":
            from .api import RRef

            return RRef._from_wire(WorkerInfo(pid[1], pid[2]), pid[3])
        raise pickle.UnpicklingError(f"rpc: unknown persistent id {pid!r}")


_ALIGN = 64


def _tensor_buffer(t):
    """(wire description, a contiguous NumPy array over t's data): raw bytes, no pickling of the data."""
    from ... import _C
    from ...nn.parameter import Parameter

    d = t.detach()
    if not d.is_contiguous():
        d = d.contiguous()
    name = str(d.dtype).rsplit(".", 1)[-1]
    try:
        arr = d.numpy()
        viewed = False
    except Exception:  # dtypes NumPy lacks (bfloat16, ...): their bits as an integer type of the same width
        arr = d.view({1: _C.uint8, 2: _C.int16, 4: _C.int32, 8: _C.int64}[d.element_size()]).numpy()
        viewed = True
    return (name, tuple(d.shape), arr.dtype.str, viewed, bool(t.requires_grad), isinstance(t, Parameter)), arr


def _serialize(obj):
    """(body bytes, tensor descriptions (pickled), raw buffers, the tensors found in obj in order). The tensors'
    bytes follow each other in the message, each padded to 64 bytes."""
    buf = io.BytesIO()
    p = _Pickler(buf)
    p.dump(obj)
    tensors = p.tensors
    descs, buffers, offset = [], [], 0
    for t in tensors:
        try:
            desc, arr = _tensor_buffer(t)
        except Exception:  # sparse and other layouts: Strata's tensor pickling
            descs.append(("pickle", pickle.dumps((t.detach(), bool(t.requires_grad)))))
            continue
        raw = memoryview(arr.reshape(-1)).cast("B")
        pad = (-offset) % _ALIGN
        if pad:
            buffers.append(bytes(pad))
        descs.append(desc + (offset + pad, raw.nbytes))
        buffers.append(raw)
        offset += pad + raw.nbytes
    return buf.getvalue(), pickle.dumps(descs) if tensors else b"", buffers, tensors


def _deserialize(body, tmeta, raw):
    """(the object, the tensors it holds, in the sender's order)."""
    import numpy as np

    import strata
    from ...nn.parameter import Parameter

    tensors = []
    for desc in (pickle.loads(tmeta) if tmeta else ()):
        if desc[0] == "pickle":
            t, rg = pickle.loads(desc[1])
            tensors.append(t.requires_grad_(True) if rg else t)
            continue
        name, shape, np_dtype, viewed, rg, is_param, offset, nbytes = desc
        dt = np.dtype(np_dtype)
        arr = np.frombuffer(raw, dtype=dt, count=nbytes // dt.itemsize, offset=offset).reshape(shape)
        t = strata.from_numpy(arr)
        if viewed:
            t = t.view(getattr(strata, name))
        if is_param:
            t = Parameter(t, requires_grad=rg)
        elif rg:
            t.requires_grad_(True)
        tensors.append(t)
    return _Unpickler(io.BytesIO(body), tensors).load(), tensors


class _Deferred:
    """A handler's result that is a Future: the reply is sent when it completes."""

    __slots__ = ("future",)

    def __init__(self, future):
        self.future = future


class RemoteError:
    """What travels back for an exception: its type (when it pickles) and the text with the remote traceback."""

    def __init__(self, exc, worker):
        self.text = f"On {worker}:\n{exc!r}\n{''.join(traceback.format_exception(exc))}"
        try:
            self.type = type(exc)
            pickle.dumps(self.type)
        except Exception:
            self.type = RuntimeError

    def to_exception(self):
        try:
            e = self.type(self.text)
            if isinstance(e, BaseException):
                return e
        except Exception:
            pass
        return RuntimeError(self.text)


# ---- transport ------------------------------------------------------------------------------------------------

def _recv_exact(sock, n, copy=True):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("connection closed")
        got += k
    return bytes(buf) if copy else buf


class _Conn:
    def __init__(self, agent, sock, peer_id):
        self.agent = agent
        self.sock = sock
        self.peer_id = peer_id
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._read_loop, name=f"rpc-reader-{peer_id}", daemon=True)
        self.thread.start()

    def send(self, kind, mid, meta, body, tmeta, buffers):
        nraw = sum(memoryview(b).nbytes for b in buffers)
        header = _HEADER.pack(kind, mid, len(meta), len(body), len(tmeta), nraw)
        with self.lock:
            if self.closed:
                raise RuntimeError(f"rpc: the connection to worker {self.peer_id} is closed")
            self.sock.sendall(header + meta + body + tmeta)
            for b in buffers:
                self.sock.sendall(b)

    def _read_loop(self):
        try:
            while True:
                kind, mid, lm, lb, lt, lr = _HEADER.unpack(_recv_exact(self.sock, _HEADER.size))
                meta = _recv_exact(self.sock, lm)
                body = _recv_exact(self.sock, lb)
                tmeta = _recv_exact(self.sock, lt) if lt else b""
                raw = _recv_exact(self.sock, lr, copy=False) if lr else b""
                if kind == _REQUEST:
                    self.agent._executor.submit(self.agent._handle_request, self, mid, meta, body, tmeta, raw)
                else:
                    # completed off this thread: a callback that blocks on another reply does not stop this reader
                    self.agent._completer.submit(self.agent._handle_reply, kind, mid, meta, body, tmeta, raw)
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            self.close()
            self.agent._connection_lost(self)

    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class _Pool:
    """A FIFO of calls run by `n` daemon threads (daemon: a stuck user function cannot keep the interpreter alive)."""

    def __init__(self, n, name):
        self._queue = collections.deque()
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, fn, *args):
        with self._cond:
            self._queue.append((fn, args))
            self._cond.notify()

    def _loop(self):
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                fn, args = self._queue.popleft()
            if fn is None:
                return
            try:
                fn(*args)
            except Exception:  # a failure to reply (the caller went away); nothing else to tell
                pass

    def stop(self):
        with self._cond:
            self._queue.extend([(None, ())] * len(self._threads))
            self._cond.notify_all()


class _Pending:
    __slots__ = ("future", "to", "timeout")

    def __init__(self, future, to, timeout):
        self.future, self.to, self.timeout = future, to, timeout


class Agent:
    def __init__(self, name, rank, world_size, store, options, owns_store):
        self.options = options
        self.store = store
        self.owns_store = owns_store
        self.world_size = world_size
        self.me = WorkerInfo(name, rank)
        self.default_timeout = float(options.rpc_timeout)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending = {}  # message id -> _Pending
        self._pending_cond = threading.Condition(self._lock)
        self._conns = {}  # peer id -> outgoing _Conn
        self._incoming = []
        self._closing = False
        self.owned = {}  # rref id -> Future of the value (kept until shutdown)
        self._timeouts = []  # heap of (deadline, message id)
        self._timeout_cond = threading.Condition()

        # Requests run on the executor (num_worker_threads); replies are completed, and their callbacks run, on a
        # pool of their own: a request handler blocked on a nested call does not hold up the reply it waits for.
        self._executor = _Pool(max(1, int(options.num_worker_threads)), "rpc-worker")
        self._completer = _Pool(4, "rpc-reply")

        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("", 0))
        self._listener.listen(128)
        self._accept_thread = threading.Thread(target=self._accept_loop, name="rpc-listener", daemon=True)
        self._accept_thread.start()
        self._watchdog = threading.Thread(target=self._timeout_loop, name="rpc-timeouts", daemon=True)
        self._watchdog.start()

        try:
            self._rendezvous(name, rank, world_size, store)
        except BaseException:
            self.close()
            raise

    def _rendezvous(self, name, rank, world_size, store):
        self.prefix = f"rpc{store.add(f'rpc_generation/{rank}', 1)}"
        host = _advertised_host(store)
        store.set(f"{self.prefix}/worker/{rank}", pickle.dumps((name, host, self._listener.getsockname()[1])))
        keys = [f"{self.prefix}/worker/{r}" for r in range(world_size)]
        store.wait(keys)
        self.workers = {}  # id -> (WorkerInfo, host, port)
        by_name = {}
        for r in range(world_size):
            n, h, p = pickle.loads(store.get(keys[r]))
            if n in by_name:
                raise RuntimeError(f"init_rpc: workers {by_name[n]} and {r} both have the name {n!r}; names must be "
                                   "unique")
            by_name[n] = r
            self.workers[r] = (WorkerInfo(n, r), h, p)
        self.by_name = {n: self.workers[r][0] for n, r in by_name.items()}

    # ---- names ----
    def worker_info(self, to):
        if isinstance(to, WorkerInfo):
            w = self.workers.get(to.id)
            if w is None or w[0] != to:
                raise RuntimeError(f"name:{self.me.name},rank:{self.me.id} could not find destination {to}")
            return w[0]
        if isinstance(to, str):
            w = self.by_name.get(to)
            if w is None:
                raise RuntimeError(f"name:{self.me.name},rank:{self.me.id} could not find destination name {to}")
            return w
        if isinstance(to, int) and not isinstance(to, bool):
            if to not in self.workers:
                raise RuntimeError(f"name:{self.me.name},rank:{self.me.id} could not find destination rank {to} "
                                   f"(world size {self.world_size})")
            return self.workers[to][0]
        raise TypeError(f"rpc: the destination must be a worker name, a WorkerInfo or a rank, got "
                        f"{type(to).__name__}")

    def new_id(self):
        with self._lock:
            return (self.me.id, next(self._ids))

    # ---- connections ----
    def _accept_loop(self):
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closing:
                    sock.close()
                    continue
                self._incoming.append(_Conn(self, sock, "incoming"))

    def _conn_to(self, info):
        with self._lock:
            c = self._conns.get(info.id)
            if c is not None and not c.closed:
                return c
            if self._closing:
                raise RuntimeError("rpc: the RPC agent is shut down")
            _, host, port = self.workers[info.id]
            try:
                sock = socket.create_connection((host, port), timeout=30)
            except OSError as e:
                raise RuntimeError(f"rpc: could not connect to {info} at {host}:{port}: {e}") from None
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = self._conns[info.id] = _Conn(self, sock, info.id)
            return c

    def _connection_lost(self, conn):
        # Fail the calls still waiting on a connection that went away (a peer that died).
        if isinstance(conn.peer_id, int):
            with self._lock:
                lost = [(mid, p) for mid, p in self._pending.items() if p.to.id == conn.peer_id]
                for mid, _ in lost:
                    del self._pending[mid]
                self._pending_cond.notify_all()
            for _, p in lost:
                if not self._closing:
                    p.future.set_exception(RuntimeError(f"rpc: the connection to {p.to} was lost before it replied"))

    # ---- timeouts ----
    def _timeout_loop(self):
        while True:
            with self._timeout_cond:
                while not self._timeouts or self._closing:
                    if self._closing:
                        return
                    self._timeout_cond.wait()
                deadline, mid = self._timeouts[0]
                now = time.monotonic()
                if deadline > now:
                    self._timeout_cond.wait(deadline - now)
                    continue
                heapq.heappop(self._timeouts)
            with self._lock:
                p = self._pending.pop(mid, None)
                self._pending_cond.notify_all()
            if p is not None:
                p.future.set_exception(RuntimeError(
                    f"RPCErr:1:RPC ran for more than set timeout ({int(round(p.timeout * 1000))} ms) and will now "
                    "be marked with an error"))

    # ---- sending ----
    def send_request(self, to, payload, timeout, ctx_id=None, record_autograd=True):
        """Sends payload (pickled) to worker `to`; returns a Future of the reply's value."""
        from ..autograd import _record_send

        info = self.worker_info(to)
        if timeout is None or timeout == UNSET_RPC_TIMEOUT:
            timeout = self.default_timeout
        timeout = float(timeout)
        try:
            body, tmeta, buffers, tensors = _serialize(payload)
        except Exception as e:
            raise RuntimeError(f"rpc: cannot serialize the call to {info}: {type(e).__name__}: {e}") from None
        meta = _record_send(ctx_id, tensors, info) if record_autograd else None
        fut = Future()
        with self._lock:
            if self._closing:
                raise RuntimeError("rpc: the RPC agent is shut down; call init_rpc first")
            mid = next(self._ids)
            deadline = time.monotonic() + timeout if timeout > 0 else None
            self._pending[mid] = _Pending(fut, info, timeout)
        if deadline is not None:
            with self._timeout_cond:
                heapq.heappush(self._timeouts, (deadline, mid))
                self._timeout_cond.notify()
        try:
            self._conn_to(info).send(_REQUEST, mid, pickle.dumps(meta), body, tmeta, buffers)
        except Exception as e:
            with self._lock:
                p = self._pending.pop(mid, None)
                self._pending_cond.notify_all()
            if p is not None:
                fut.set_exception(RuntimeError(f"rpc: sending to {info} failed: {e}"))
        return fut

    def _handle_reply(self, kind, mid, meta, body, tmeta, raw):
        with self._lock:
            p = self._pending.pop(mid, None)
            self._pending_cond.notify_all()
        if p is None:  # timed out already
            return
        try:
            value, tensors = _deserialize(body, tmeta, raw)
        except Exception as e:
            p.future.set_exception(RuntimeError(f"rpc: cannot deserialize the reply from {p.to}: "
                                                f"{type(e).__name__}: {e}"))
            return
        if kind == _REPLY_ERR:
            p.future.set_exception(value.to_exception())
            return
        from ..autograd import _record_recv

        _record_recv(pickle.loads(meta), tensors)
        p.future.set_result(value)

    # ---- serving ----
    def _handle_request(self, conn, mid, meta, body, tmeta, raw):
        from ..autograd import _record_recv, _running_in

        ctx_id = None
        try:
            meta = pickle.loads(meta)
            (func, args, kwargs), tensors = _deserialize(body, tmeta, raw)
            ctx_id = _record_recv(meta, tensors)
            with _running_in(ctx_id):
                result = func(*args, **kwargs)
                if _is_async_function(func):
                    if not isinstance(result, Future):
                        raise TypeError(f"rpc: {getattr(func, '__qualname__', func)} is decorated with "
                                        f"@rpc.functions.async_execution and must return a strata.futures.Future, "
                                        f"got {type(result).__name__}")
                    result = _Deferred(result)
        except BaseException as e:
            self._reply_error(conn, mid, e)
            return
        if isinstance(result, _Deferred):
            result.future.add_done_callback(lambda f: self._reply_future(conn, mid, f, ctx_id))
        else:
            self._reply_value(conn, mid, result, ctx_id)

    def _reply_future(self, conn, mid, fut, ctx_id):
        try:
            value = fut.wait()
        except BaseException as e:
            self._reply_error(conn, mid, e)
            return
        if isinstance(value, _Deferred):  # a handler's future of a future
            value.future.add_done_callback(lambda f: self._reply_future(conn, mid, f, ctx_id))
            return
        self._reply_value(conn, mid, value, ctx_id)

    def _reply_value(self, conn, mid, value, ctx_id):
        from ..autograd import _record_send

        try:
            body, tmeta, buffers, tensors = _serialize(value)
        except Exception as e:
            self._reply_error(conn, mid, RuntimeError(f"rpc: cannot serialize the result: {type(e).__name__}: {e}"))
            return
        meta = _record_send(ctx_id, tensors, None)
        conn.send(_REPLY_OK, mid, pickle.dumps(meta), body, tmeta, buffers)

    def _reply_error(self, conn, mid, exc):
        body, tmeta, buffers, _ = _serialize(RemoteError(exc, self.me))
        conn.send(_REPLY_ERR, mid, pickle.dumps(None), body, tmeta, buffers)

    # ---- shutdown ----
    def wait_outstanding(self):
        with self._lock:
            while self._pending:
                self._pending_cond.wait(0.1)

    def barrier(self, what, timeout=0.0):
        """Every worker sets its key and waits for all (timeout in seconds; 0: no limit, peers may still work)."""
        keys = [f"{self.prefix}/{what}/{r}" for r in range(self.world_size)]
        self.store.set(keys[self.me.id], b"1")
        self.store.wait(keys, datetime.timedelta(seconds=timeout) if timeout > 0 else datetime.timedelta(days=365))

    def close(self):
        with self._lock:
            self._closing = True
            conns = list(self._conns.values()) + self._incoming
        try:
            self._listener.close()
        except OSError:
            pass
        for c in conns:
            c.close()
        self._executor.stop()
        self._completer.stop()
        with self._timeout_cond:
            self._timeout_cond.notify_all()
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            p.future.set_exception(RuntimeError("rpc: the RPC agent was shut down before the call completed"))
        self.owned.clear()
        if self.owns_store:
            # rank 0 serves the rendezvous store: free its port now (a later init_rpc may need it)
            server = getattr(self.store, "_server", None)
            try:
                if server is not None:
                    server.shutdown()
                    server.server_close()
                    self.store._server = None
                sock = getattr(self.store, "_sock", None)
                if sock is not None:
                    sock.close()
            except OSError:
                pass
        self.store = None


def _is_async_function(func):
    return getattr(func, "_wrapped_async_rpc_function", None) is not None


def _advertised_host(store):
    """The address the other workers reach this one at: the local end of the store connection (the interface that
    reaches the rendezvous host), else this host's name."""
    env = os.environ.get("STRATA_RPC_HOST")
    if env:
        return env
    sock = getattr(store, "_sock", None)
    if sock is None:
        under = getattr(store, "underlying_store", None)
        sock = getattr(under, "_sock", None)
    if sock is not None:
        return sock.getsockname()[0]
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
