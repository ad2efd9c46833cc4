"""strata.distributed: torch.distributed's process groups and collectives, on MPI, for CPU tensors.

Backends: "mpi"; "gloo" is accepted and served by the MPI backend for CPU tensors, so torch scripts run
unchanged: get_backend() then answers a string equal to "gloo" whose repr and `.served_by` say "mpi". "nccl" needs
the CUDA backend, which this build lacks: is_nccl_available() is False and init_process_group raises saying so.

How the ranks form one MPI world (docs/DISTRIBUTED.md has the measurements):
- started by `mpirun -np N` (Open MPI's runtime): MPI_COMM_WORLD is the group; rank and world size come from MPI
  when RANK/WORLD_SIZE are not set.
- started any other way (our launcher `python -m strata.distributed.run`, a user's own processes with env://,
  tcp:// or file://): each process starts MPI as a singleton; rank 0 starts Open MPI's `ompi-server` and publishes
  its address and an MPI port in the rendezvous store; the others join one by one with MPI_Comm_connect /
  MPI_Comm_accept, merging into one communicator. Processes of one MPI job cannot otherwise see each other.

Every MPI call runs on one communication thread (src/distributed/mpi_comm.h); a caller waits for its collective
with the group's timeout and raises if it expires (a dead or hung rank, or ranks calling different collectives);
the engine is unusable after that (MPI cannot abandon a collective), so the process should exit. Under the
launcher a dead rank also makes the launcher stop the others."""

import atexit
import datetime
import enum
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from urllib.parse import parse_qs, urlparse

from ._store import DistStoreError, FileStore, HashStore, PrefixStore, Store, TCPStore

__all__ = [
    "is_available", "is_mpi_available", "is_gloo_available", "is_nccl_available", "is_ucc_available",
    "is_initialized", "is_torchelastic_launched", "init_process_group", "destroy_process_group", "get_rank",
    "get_world_size", "get_backend", "new_group", "barrier", "monitored_barrier", "Backend", "ReduceOp", "group",
    "GroupMember", "ProcessGroup", "Work", "all_reduce", "broadcast", "reduce", "all_gather",
    "all_gather_into_tensor", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
    "all_to_all_single", "send", "recv", "isend", "irecv", "broadcast_object_list", "all_gather_object",
    "gather_object", "scatter_object_list", "get_process_group_ranks", "get_global_rank", "get_group_rank",
    "Store", "TCPStore", "FileStore", "HashStore", "PrefixStore", "DistStoreError", "DistError",
    "default_pg_timeout",
]

default_pg_timeout = datetime.timedelta(minutes=30)


class DistError(RuntimeError):
    pass


def _C():
    from .. import _C as c

    return c._distributed


def _mpi_status():
    try:
        ok, reason = _C().mpi_available()
    except Exception as e:  # the extension itself failed to load
        return False, str(e)
    return ok, reason


def is_available():
    """True when Open MPI's library can be loaded (the package works); see is_mpi_available()."""
    return _mpi_status()[0]


def is_mpi_available():
    return _mpi_status()[0]


def is_gloo_available():
    """backend="gloo" is served by the MPI backend for CPU tensors."""
    return _mpi_status()[0]


def is_nccl_available():
    """False: NCCL serves CUDA tensors, and this build of Strata has no CUDA backend."""
    return False


def is_ucc_available():
    return False


def mpi_unavailable_reason():
    """Why is_mpi_available() is False ("" when it is True)."""
    return _mpi_status()[1]


def is_torchelastic_launched():
    return "TORCHELASTIC_RUN_ID" in os.environ


class Backend(str):
    """A backend name, lower-cased: Backend("MPI") == "mpi"."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name!r}")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        if value == Backend.UNDEFINED:
            value = name.lower()
        return str.__new__(cls, value)


class ReduceOp:
    class RedOpType(enum.IntEnum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7
        PREMUL_SUM = 8
        UNUSED = 9

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR


# ---- process groups -------------------------------------------------------------------------------------------


class ProcessGroup:
    """A group of ranks over one MPI communicator."""

    def __init__(self, comm, ranks, rank, backend, timeout):
        self._comm = comm
        self._ranks = list(ranks)  # global ranks, by group rank
        self._rank = rank
        self._backend = backend
        self._timeout = timeout

    def rank(self):
        return self._rank

    def size(self):
        return len(self._ranks)

    def name(self):
        return self._backend

    def __repr__(self):
        return f"<strata.distributed.ProcessGroup {self._backend} rank {self._rank} of {len(self._ranks)}>"


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = _NonMember()


class group:  # torch.distributed.group.WORLD
    WORLD = None


class _State:
    def __init__(self):
        self.default = None
        self.store = None
        self.groups = {}  # ProcessGroup -> None (all the groups made, for destroy)
        self.server = None  # ompi-server process (rank 0 of separately started ranks)
        self.group_count = 0
        self.debug = os.environ.get("STRATA_DISTRIBUTED_DEBUG", "OFF").upper() == "DETAIL"
        self.finalize_timeout = default_pg_timeout.total_seconds()
        self.crashed = False  # the interpreter is exiting on an unhandled exception


_state = _State()


def is_initialized():
    return _state.default is not None


def _default():
    if _state.default is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _state.default


def _group(g):
    if g is None or g is GroupMember.WORLD:
        return _default()
    if g is GroupMember.NON_GROUP_MEMBER:
        return g
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"expected a ProcessGroup, got {type(g).__name__}")
    if _state.default is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return g


def _seconds(timeout):
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {v!r}")


def _launched_by_mpirun():
    return "OMPI_COMM_WORLD_SIZE" in os.environ


class _ServedBackend(str):
    """A backend name ("gloo") served by another backend ("mpi"): equal to the name, its repr says both."""

    served_by = "mpi"

    def __repr__(self):
        return f"'{str(self)}' (served by {self.served_by})"


def _backend_name(name):
    return _ServedBackend(name) if name == Backend.GLOO else str(name)


def _rendezvous(init_method, rank, world_size, timeout):
    """The store and this rank's (rank, world_size) for init_method (torch's env://, tcp://, file://)."""
    u = urlparse(init_method)
    q = {k: v[-1] for k, v in parse_qs(u.query).items()}
    if "rank" in q and rank == -1:
        rank = int(q["rank"])
    if "world_size" in q and world_size == -1:
        world_size = int(q["world_size"])
    if u.scheme == "env":
        if rank == -1:
            rank = _env_int("RANK")
        if world_size == -1:
            world_size = _env_int("WORLD_SIZE")
        if (rank is None or world_size is None) and _launched_by_mpirun():
            rank = int(os.environ["OMPI_COMM_WORLD_RANK"]) if rank is None else rank
            world_size = int(os.environ["OMPI_COMM_WORLD_SIZE"]) if world_size is None else world_size
        if rank is None:
            raise ValueError("Error initializing torch.distributed using env:// rendezvous: environment variable "
                             "RANK expected, but not set")
        if world_size is None:
            raise ValueError("Error initializing torch.distributed using env:// rendezvous: environment variable "
                             "WORLD_SIZE expected, but not set")
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if addr is None or port is None:
            if world_size == 1 or _launched_by_mpirun():
                return HashStore(), rank, world_size
            missing = "MASTER_ADDR" if addr is None else "MASTER_PORT"
            raise ValueError("Error initializing torch.distributed using env:// rendezvous: environment variable "
                             f"{missing} expected, but not set")
        return _tcp_store(addr, int(port), rank, world_size, timeout), rank, world_size
    if u.scheme == "tcp":
        if rank == -1 or world_size == -1:
            raise ValueError("init_process_group with a tcp:// init_method needs rank and world_size")
        return _tcp_store(u.hostname, u.port, rank, world_size, timeout), rank, world_size
    if u.scheme == "file":
        if rank == -1 or world_size == -1:
            raise ValueError("init_process_group with a file:// init_method needs rank and world_size")
        store = FileStore(u.path, world_size)
        store.set_timeout(timeout)
        return store, rank, world_size
    raise ValueError(f"init_process_group: unsupported init_method {init_method!r} (env://, tcp://host:port, "
                     "file:///path)")


def _tcp_store(host, port, rank, world_size, timeout):
    return TCPStore(host, port, world_size, is_master=(rank == 0), timeout=datetime.timedelta(seconds=timeout),
                    wait_for_workers=False)


def _start_ompi_server(timeout):
    exe = shutil.which("ompi-server")
    if exe is None:
        raise DistError("init_process_group: ranks started outside mpirun join through Open MPI's ompi-server, "
                        "which is not installed (install openmpi-bin), or start the job with mpirun")
    d = tempfile.mkdtemp(prefix="strata-ompi-")
    uri = os.path.join(d, "uri")

    def die_with_parent():
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    proc = subprocess.Popen([exe, "--no-daemonize", "-r", uri], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    deadline = time.monotonic() + timeout
    while not (os.path.exists(uri) and os.path.getsize(uri) > 0):
        if proc.poll() is not None:
            raise DistError(f"ompi-server exited with code {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise DistError(f"ompi-server did not report its address within {timeout:g} s")
        time.sleep(0.01)
    time.sleep(0.02)
    with open(uri) as f:
        address = f.read().strip()
    _state.server = (proc, d)
    return address


def _stop_ompi_server():
    if _state.server is not None:
        proc, d = _state.server
        _state.server = None
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(d, ignore_errors=True)


def _form_world(store, rank, world_size, timeout):
    """The communicator holding the world's ranks in rank order (see the module's docstring)."""
    C = _C()
    if _launched_by_mpirun() and int(os.environ["OMPI_COMM_WORLD_SIZE"]) == world_size:
        mrank, msize = C.init()
        if mrank != rank:
            raise DistError(f"init_process_group: rank {rank} was asked for, but mpirun started this process as "
                            f"rank {mrank} of {msize}; leave RANK unset under mpirun")
        return 0
    if _launched_by_mpirun():
        raise DistError(f"init_process_group: world_size={world_size}, but mpirun started "
                        f"{os.environ['OMPI_COMM_WORLD_SIZE']} processes")
    if world_size == 1:
        C.init()
        return 0
    if C.initialized():
        raise DistError("init_process_group: this process already joined an MPI world of separately started "
                        "ranks, which cannot be formed again (MPI starts once per process); start the ranks "
                        "with mpirun (or strata.distributed.run --mpi-runtime) to destroy and re-create groups")
    key = f"strata/mpi/{_state.group_count}"
    if rank == 0:
        store.set(key + "/server", _start_ompi_server(timeout))
    os.environ["OMPI_MCA_pmix_server_uri"] = store.get(key + "/server").decode()
    os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    C.init()
    if rank == 0:
        port = C.open_port(timeout)
        store.set(key + "/port", port)
        comm = 0
        for k in range(1, world_size):
            new = C.accept_and_merge(comm, port, timeout)
            if comm != 0:
                C.comm_free(comm)
            comm = new
        C.close_port(port, timeout)
        return comm
    port = store.get(key + "/port").decode()
    # One at a time, in rank order: an accept pairs with whichever process connects first.
    if rank > 1:
        store.wait([f"{key}/joined/{rank - 1}"])
    comm = C.connect_and_merge(port, timeout)
    store.set(f"{key}/joined/{rank}", "1")
    for k in range(rank + 1, world_size):
        new = C.accept_and_merge(comm, port, timeout)
        C.comm_free(comm)
        comm = new
    return comm


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """torch.distributed.init_process_group, on MPI (see the module's docstring)."""
    if _state.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = Backend(backend) if backend is not None else Backend.MPI
    if ":" in name:  # "cpu:gloo,cuda:nccl"
        parts = dict(p.split(":", 1) for p in name.split(","))
        name = Backend(parts.get("cpu", "mpi"))
    if name == Backend.NCCL:
        raise RuntimeError("init_process_group: backend 'nccl' serves CUDA tensors, and this build of Strata has no "
                           "CUDA backend (is_nccl_available() is False); use backend='gloo' or 'mpi' for CPU "
                           "tensors")
    if name not in (Backend.MPI, Backend.GLOO):
        raise ValueError(f"init_process_group: unknown or unsupported backend {backend!r} (Strata has 'mpi', and "
                         "'gloo' served by MPI)")
    ok, reason = _mpi_status()
    if not ok:
        raise RuntimeError(f"init_process_group: the MPI backend is unavailable: {reason}")
    t = _seconds(timeout)
    if store is not None:
        if init_method is not None:
            raise ValueError("init_process_group: cannot specify both init_method and store")
        if rank < 0 or world_size <= 0:
            raise ValueError("init_process_group: with a store, rank and world_size must be given")
    else:
        store, rank, world_size = _rendezvous(init_method or "env://", rank, world_size, t)
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ValueError(f"init_process_group: invalid rank {rank} for world_size {world_size}")
    comm = _form_world(store, rank, world_size, t)
    _state.store = store
    _state.finalize_timeout = t
    _watch_for_crash()
    pg = ProcessGroup(comm, range(world_size), rank, _backend_name(name), t)
    _state.default = pg
    _state.groups[pg] = None
    GroupMember.WORLD = pg
    group.WORLD = pg
    _state.group_count += 1
    barrier()


def _watch_for_crash():
    hook = sys.excepthook
    if getattr(hook, "_strata_distributed", False):
        return

    def excepthook(*args):
        _state.crashed = True
        hook(*args)

    excepthook._strata_distributed = True
    sys.excepthook = excepthook


def destroy_process_group(group=None):
    """Frees the group's communicator; without a group, every group (the default one included). MPI itself stays
    started until the process exits (it cannot be started twice), so init_process_group may be called again
    (ranks started by mpirun only)."""
    C = _C()
    if group is None or group is _state.default:
        for g in list(_state.groups):
            C.comm_free(g._comm)
        _state.groups.clear()
        _state.default = None
        _state.store = None
        GroupMember.WORLD = None
        globals()["group"].WORLD = None
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    C.comm_free(group._comm)
    _state.groups.pop(group, None)


@atexit.register
def _shutdown():
    if sys.modules.get("strata._C") is None:
        return
    try:
        C = _C()
        if C.initialized():
            # MPI_Finalize waits for the other ranks (under mpirun: a fence over the job): a process ending on an
            # unhandled exception skips it, so that it exits at once and the launcher (or mpirun) stops the rest.
            if not _state.crashed:
                C.finalize(_state.finalize_timeout)
    finally:
        _stop_ompi_server()


def get_rank(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    if group is None and _state.default is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _group(group).rank()


def get_world_size(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).size()


def get_backend(group=None):
    g = _group(group)
    if g is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified")
    return g._backend


def get_process_group_ranks(group):
    return list(_group(group)._ranks)


def get_global_rank(group, group_rank):
    return _group(group)._ranks[group_rank]


def get_group_rank(group, global_rank):
    g = _group(group)
    if global_rank not in g._ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {g}")
    return g._ranks.index(global_rank)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of `ranks` (global ranks; default: all). Every rank of the default group must call it, members or
    not, in the same order (it is collective, as in torch). Non-members get GroupMember.NON_GROUP_MEMBER."""
    d = _default()
    ranks = sorted(range(d.size()) if ranks is None else list(ranks))
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < d.size() for r in ranks):
        raise ValueError(f"new_group: ranks {ranks} must be distinct ranks of the world (size {d.size()})")
    t = d._timeout if timeout is None else _seconds(timeout)
    me = d.rank()
    color = 0 if me in ranks else -1
    comm = _C().comm_split(d._comm, color, ranks.index(me) if me in ranks else 0, t)
    if color < 0:
        return GroupMember.NON_GROUP_MEMBER
    name = _backend_name(Backend(backend)) if backend is not None else d._backend
    pg = ProcessGroup(comm, ranks, ranks.index(me), name, t)
    _state.groups[pg] = None
    return pg


# ---- collectives ----------------------------------------------------------------------------------------------

from . import _collectives  # noqa: E402
from ._collectives import (  # noqa: E402,F401
    Work, all_gather, all_gather_into_tensor, all_gather_object, all_reduce, all_to_all, all_to_all_single,
    barrier, broadcast, broadcast_object_list, gather, gather_object, irecv, isend, monitored_barrier, recv,
    reduce, reduce_scatter, reduce_scatter_tensor, scatter, scatter_object_list, send)

# ---- batched point-to-point, device meshes ---------------------------------------------------------------------

from ._batch_p2p import P2POp, batch_isend_irecv, get_default_backend_for_device  # noqa: E402,F401
from .device_mesh import DeviceMesh, init_device_mesh  # noqa: E402,F401

# ---- RPC and distributed autograd: attributes of the package as in torch, imported on first use ----------------

_LAZY_SUBMODULES = ("rpc", "autograd")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    from .._missing import missing_attribute

    raise missing_attribute(__name__, name)
