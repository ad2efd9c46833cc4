"""Key-value stores for rendezvous (torch.distributed's Store, TCPStore, FileStore, HashStore, PrefixStore).

Values are bytes (a str is stored as its UTF-8 encoding, as in torch). `get` and `wait` block until the keys exist,
up to the store's timeout, then raise (torch raises a RuntimeError subclass, DistStoreError; so does this).
`add` keeps a decimal integer under the key. `compare_set(key, expected, desired)` sets `desired` when the key
holds `expected` (or is absent and `expected` is empty) and returns the value the key holds afterwards.

TCPStore: the master runs a small threaded server in its own process (one thread per client connection); every
request is one length-prefixed pickle over a socket, answered the same way. FileStore: one pickled dict in a file,
read and rewritten under an exclusive fcntl lock. HashStore: a dict in this process."""

import datetime
import fcntl
import os
import pickle
import socket
import sys
import socketserver
import struct
import threading
import time

__all__ = ["Store", "TCPStore", "FileStore", "HashStore", "PrefixStore", "DistStoreError"]

_DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)


class DistStoreError(RuntimeError):
    pass


def _bytes(v):
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"Store: values must be str or bytes, got {type(v).__name__}")


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


class _Table:
    """The key-value table with blocking reads: shared by the TCP server and HashStore."""

    def __init__(self):
        self.data = {}
        self.cond = threading.Condition()

    def run(self, cmd, args):
        with self.cond:
            if cmd == "set":
                self.data[args[0]] = args[1]
                self.cond.notify_all()
                return None
            if cmd == "get" or cmd == "wait":
                keys, timeout = args
                deadline = None if timeout is None else time.monotonic() + timeout
                while not all(k in self.data for k in keys):
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        missing = [k for k in keys if k not in self.data]
                        raise DistStoreError(f"Store: timed out after {timeout:g} s waiting for keys {missing}")
                    self.cond.wait(left)
                return self.data[keys[0]] if cmd == "get" else None
            if cmd == "add":
                key, amount = args
                value = int(self.data.get(key, b"0")) + amount
                self.data[key] = str(value).encode()
                self.cond.notify_all()
                return value
            if cmd == "compare_set":
                key, expected, desired = args
                cur = self.data.get(key)
                if (cur is None and expected == b"") or (cur is not None and cur == expected):
                    self.data[key] = desired
                    self.cond.notify_all()
                    return desired
                return expected if cur is None else cur
            if cmd == "delete_key":
                existed = args[0] in self.data
                self.data.pop(args[0], None)
                return existed
            if cmd == "num_keys":
                return len(self.data)
            if cmd == "check":
                return all(k in self.data for k in args[0])
            raise ValueError(f"Store: unknown request {cmd!r}")


class Store:
    """The store API; subclasses provide `_run(cmd, args)`."""

    def __init__(self, timeout=_DEFAULT_TIMEOUT):
        self._timeout = _seconds(timeout)

    @property
    def timeout(self):
        return datetime.timedelta(seconds=self._timeout)

    def set_timeout(self, timeout):
        self._timeout = _seconds(timeout)

    def set(self, key, value):
        self._run("set", (key, _bytes(value)))

    def get(self, key):
        return self._run("get", ([key], self._timeout))

    def add(self, key, amount):
        return self._run("add", (key, int(amount)))

    def compare_set(self, key, expected_value, desired_value):
        return self._run("compare_set", (key, _bytes(expected_value), _bytes(desired_value)))

    def wait(self, keys, timeout=None):
        if isinstance(keys, str):
            keys = [keys]
        self._run("wait", (list(keys), self._timeout if timeout is None else _seconds(timeout)))

    def check(self, keys):
        return self._run("check", (list(keys),))

    def delete_key(self, key):
        return self._run("delete_key", (key,))

    def num_keys(self):
        return self._run("num_keys", ())

    def multi_set(self, keys, values):
        for k, v in zip(keys, values):
            self.set(k, v)

    def multi_get(self, keys):
        self.wait(keys)
        return [self.get(k) for k in keys]


class HashStore(Store):
    """A store in this process's memory (for threads of one process)."""

    def __init__(self):
        super().__init__()
        self._table = _Table()

    def _run(self, cmd, args):
        return self._table.run(cmd, args)


def _send(sock, obj):
    payload = pickle.dumps(obj)
    sock.sendall(struct.pack("!Q", len(payload)) + payload)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("TCPStore: the connection was closed by the other side")
        buf += chunk
    return bytes(buf)


def _recv(sock):
    (n,) = struct.unpack("!Q", _recv_exact(sock, 8))
    return pickle.loads(_recv_exact(sock, n))


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        table = self.server.table
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                cmd, args = _recv(self.request)
            except (ConnectionError, OSError, EOFError):
                return
            try:
                reply = (True, table.run(cmd, args))
            except Exception as e:  # reported to the client, which raises it
                reply = (False, f"{type(e).__name__}: {e}")
            try:
                _send(self.request, reply)
            except OSError:
                return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class TCPStore(Store):
    """torch.distributed.TCPStore(host_name, port, world_size=None, is_master=False, timeout=300 s,
    wait_for_workers=True). The master serves the table (port 0: a free port, see `.port`); every instance,
    the master's included, is a client of it. With `wait_for_workers` and a `world_size`, the master's
    constructor returns once `world_size` instances have connected."""

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=_DEFAULT_TIMEOUT,
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True):
        super().__init__(timeout)
        self.host = host_name
        self._server = None
        if is_master:
            self._server = _Server(("", int(port)), _Handler, bind_and_activate=True)
            self._server.table = _Table()
            port = self._server.server_address[1]
            threading.Thread(target=self._server.serve_forever, name="TCPStore", daemon=True).start()
        self.port = int(port)
        self._lock = threading.Lock()
        self._sock = self._connect()
        self.add("__strata_store_clients", 1)
        if is_master and wait_for_workers and world_size:
            self._wait_count("__strata_store_clients", int(world_size))

    def _connect(self):
        deadline = time.monotonic() + self._timeout
        last = None
        while time.monotonic() < deadline:
            try:
                s = socket.create_connection((self.host, self.port), timeout=max(1.0, deadline - time.monotonic()))
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError as e:
                last = e
                time.sleep(0.05)
        raise DistStoreError(f"TCPStore: could not connect to {self.host}:{self.port} within "
                             f"{self._timeout:g} s: {last}")

    def _wait_count(self, key, n):
        deadline = time.monotonic() + self._timeout
        while int(self._run("add", (key, 0))) < n:
            if time.monotonic() > deadline:
                raise DistStoreError(f"TCPStore: timed out after {self._timeout:g} s waiting for {n} clients")
            time.sleep(0.01)

    def _run(self, cmd, args):
        with self._lock:
            try:
                _send(self._sock, (cmd, args))
                ok, value = _recv(self._sock)
            except OSError as e:
                raise DistStoreError(f"TCPStore: lost the connection to {self.host}:{self.port} ({cmd}): {e}")
        if not ok:
            raise DistStoreError(value)
        return value

    def num_keys(self):
        return super().num_keys()

    def __del__(self):
        try:
            self._sock.close()
            if self._server is not None:
                # At interpreter exit the server's daemon thread no longer runs, so shutdown() (which waits for
                # it) would hang the process: just close the listening socket then.
                if not sys.is_finalizing():
                    self._server.shutdown()
                self._server.server_close()
        except Exception:
            pass


class FileStore(Store):
    """torch.distributed.FileStore(file_name, world_size=-1): every process opening the same file sees the same
    table (one pickled dict, rewritten under an exclusive lock; blocking reads poll)."""

    def __init__(self, file_name, world_size=-1):
        super().__init__()
        self.path = file_name
        open(file_name, "ab").close()

    def _run(self, cmd, args):
        if cmd in ("get", "wait"):
            keys, timeout = args
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                data = self._locked(lambda d: None)
                if all(k in data for k in keys):
                    return data[keys[0]] if cmd == "get" else None
                if deadline is not None and time.monotonic() > deadline:
                    missing = [k for k in keys if k not in data]
                    raise DistStoreError(f"FileStore: timed out after {timeout:g} s waiting for keys {missing}")
                time.sleep(0.005)
        out = []
        self._locked(lambda d: out.append(_apply(d, cmd, args)))
        return out[0]

    def _locked(self, fn):
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                raw = f.read()
                data = pickle.loads(raw) if raw else {}
                before = dict(data)
                fn(data)
                if data != before:
                    f.seek(0)
                    f.truncate()
                    f.write(pickle.dumps(data))
                    f.flush()
                return data
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _apply(data, cmd, args):
    t = _Table()
    t.data = data
    return t.run(cmd, args)


class PrefixStore(Store):
    """Every key of `store` under `prefix + "/"`."""

    def __init__(self, prefix, store):
        super().__init__(store.timeout)
        self.prefix = prefix
        self.underlying_store = store

    def _key(self, k):
        return f"{self.prefix}/{k}"

    def _run(self, cmd, args):
        s = self.underlying_store
        if cmd in ("get", "wait", "check"):
            args = ([self._key(k) for k in args[0]],) + tuple(args[1:])
        elif cmd != "num_keys":
            args = (self._key(args[0]),) + tuple(args[1:])
        return s._run(cmd, args)
