"""strata.distributed: stores in one process; collectives, groups, objects and async handles on 2 and 4 ranks
started by the launcher (and by mpirun); each checked against a reference the rank computes itself from every
rank's inputs (NumPy). Every launch is bounded by a timeout, so a hang fails the test instead of CI."""

import datetime
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import strata
import strata.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")


def launch(tmp_path, code, nproc, *launcher_args, timeout=90, env=None):
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(code))
    e = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), OMP_NUM_THREADS="1")
    e.update(env or {})
    cmd = [sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           *launcher_args, str(script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


# ---- stores --------------------------------------------------------------------------------------------------


def _exercise_store(s):
    s.set("a", "1")
    assert s.get("a") == b"1"
    assert s.add("n", 2) == 2 and s.add("n", 3) == 5 and s.get("n") == b"5"
    assert s.compare_set("a", "1", "x") == b"x"
    assert s.compare_set("a", "1", "y") == b"x"  # mismatch: the current value
    assert s.compare_set("new", "", "v") == b"v"  # absent and expected empty: set
    assert s.check(["a", "new"]) and not s.check(["nope"])
    k = s.num_keys()
    assert s.delete_key("new") is True and s.delete_key("new") is False
    assert s.num_keys() == k - 1
    s.wait(["a"])
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out"):
        s.wait(["never"], datetime.timedelta(seconds=0.2))
    assert time.monotonic() - t0 < 5


def test_hash_store():
    _exercise_store(dist.HashStore())


def test_file_store(tmp_path):
    _exercise_store(dist.FileStore(str(tmp_path / "store"), 1))
    other = dist.FileStore(str(tmp_path / "store"), 1)  # a second opener sees the same table
    assert other.get("a") == b"x"


def test_tcp_store_master_and_client_and_blocking_get():
    master = dist.TCPStore("127.0.0.1", 0, 2, True, timeout=datetime.timedelta(seconds=10), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", master.port, 2, False, timeout=datetime.timedelta(seconds=10))
    _exercise_store(client)
    got = []
    th = threading.Thread(target=lambda: got.append(client.get("later")))
    th.start()
    time.sleep(0.1)
    master.set("later", b"\x00\x01")
    th.join(5)
    assert got == [b"\x00\x01"]
    client.set_timeout(datetime.timedelta(seconds=0.2))
    with pytest.raises(dist.DistStoreError, match="timed out"):
        client.get("missing")
    prefixed = dist.PrefixStore("p", client)
    prefixed.set("k", "v")
    assert master.get("p/k") == b"v" and prefixed.get("k") == b"v"


# ---- the API without a process group -------------------------------------------------------------------------


def test_uninitialized_and_unsupported_backends():
    assert not dist.is_initialized()
    assert dist.is_mpi_available() and dist.is_gloo_available() and not dist.is_nccl_available()
    for fn in (dist.get_rank, dist.get_world_size, dist.barrier):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            fn()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(strata.ones(2))
    with pytest.raises(RuntimeError, match="nccl.*CUDA backend"):
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
    with pytest.raises(ValueError, match="unknown or unsupported backend"):
        dist.init_process_group("smoke", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
    assert dist.Backend("GLOO") == "gloo" and dist.Backend.MPI == "mpi"
    assert int(dist.ReduceOp.SUM) == int(__import__("torch").distributed.ReduceOp.SUM)


# ---- collectives on 2 and 4 ranks ----------------------------------------------------------------------------

COLLECTIVES = r'''
import numpy as np, strata, strata.distributed as dist
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
r, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "gloo" and dist.get_backend().served_by == "mpi"
S = strata
DTYPES = {"float32": (S.float32, np.float32), "float64": (S.float64, np.float64), "float16": (S.float16, np.float16),
          "bfloat16": (S.bfloat16, np.float32), "int8": (S.int8, np.int8), "uint8": (S.uint8, np.uint8),
          "int16": (S.int16, np.int16), "int32": (S.int32, np.int32), "int64": (S.int64, np.int64),
          "bool": (S.bool, np.bool_)}

def data(rank, shape, name, lo=0, hi=5):
    sd, nd = DTYPES[name]
    a = np.random.default_rng(1000 * rank + len(shape)).integers(lo, hi, size=shape)
    if name == "bool":
        a = a % 2
    return S.tensor(a.astype(np.float64)).to(sd)

def npy(t):
    return t.to(S.float64).numpy() if t.dtype != S.bool else t.numpy()

def check(got, want, name, what):
    tol = {"float16": 1e-2, "bfloat16": 5e-2}.get(name, 1e-6)
    g = npy(got)
    assert g.shape == want.shape, (what, name, g.shape, want.shape)
    assert np.allclose(g.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol), (what, name, g, want)

RED = {dist.ReduceOp.SUM: lambda xs: np.sum(xs, 0), dist.ReduceOp.MAX: lambda xs: np.max(xs, 0),
       dist.ReduceOp.MIN: lambda xs: np.min(xs, 0), dist.ReduceOp.PRODUCT: lambda xs: np.prod(xs, 0),
       dist.ReduceOp.AVG: lambda xs: np.mean(xs, 0)}
shape = (3, 4)
for name in DTYPES:
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
    if name in ("float32", "float64", "float16", "bfloat16"):
        ops.append(dist.ReduceOp.AVG)
    allin = np.stack([npy(data(k, shape, name, 1, 4)) for k in range(n)])
    for op in ops:
        want = RED[op](allin)
        if name == "bool":
            want = want.astype(bool) if op != dist.ReduceOp.PRODUCT else np.all(allin, 0)
        t = data(r, shape, name, 1, 4)
        dist.all_reduce(t, op=op)
        check(t, want, name, f"all_reduce {op}")
        # non-contiguous: a transposed view of a bigger tensor; the result lands in the caller's tensor
        base = data(r, (4, 3), name, 1, 4).t()
        assert not base.is_contiguous()
        w = dist.all_reduce(base, op=op, async_op=True)
        w.wait()
        assert w.is_completed()
        check(base, RED[op](np.stack([npy(data(k, (4, 3), name, 1, 4)).T for k in range(n)])) if name != "bool"
              else base.numpy(), name, f"all_reduce noncontig {op}")
    # broadcast from the last rank
    t = data(r, shape, name)
    dist.broadcast(t, src=n - 1)
    check(t, npy(data(n - 1, shape, name)), name, "broadcast")
    # reduce to rank 1
    t = data(r, shape, name)
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    check(t, np.max(np.stack([npy(data(k, shape, name)) for k in range(n)]), 0) if r == 1 else npy(data(r, shape, name)),
          name, "reduce")
    ins = [npy(data(k, shape, name)) for k in range(n)]
    # all_gather into a list (one output non-contiguous) and into one tensor
    outs = [S.zeros(shape, dtype=DTYPES[name][0]) for _ in range(n)]
    outs[0] = S.zeros((4, 3), dtype=DTYPES[name][0]).t()
    dist.all_gather(outs, data(r, shape, name))
    for k in range(n):
        check(outs[k], ins[k], name, "all_gather")
    big = S.zeros((n * 3, 4), dtype=DTYPES[name][0])
    dist.all_gather_into_tensor(big, data(r, shape, name))
    check(big, np.concatenate(ins), name, "all_gather_into_tensor")
    # gather / scatter at rank 0
    gl = [S.zeros(shape, dtype=DTYPES[name][0]) for _ in range(n)] if r == 0 else None
    dist.gather(data(r, shape, name), gl, dst=0)
    if r == 0:
        for k in range(n):
            check(gl[k], ins[k], name, "gather")
    t = S.zeros(shape, dtype=DTYPES[name][0])
    dist.scatter(t, [data(10 + k, shape, name) for k in range(n)] if r == 0 else None, src=0)
    check(t, npy(data(10 + r, shape, name)), name, "scatter")
    if name != "bool":
        # reduce_scatter: rank k gets the sum of everyone's k-th input
        chunks = lambda rank: [data(100 * rank + j, shape, name) for j in range(n)]
        out = S.zeros(shape, dtype=DTYPES[name][0])
        dist.reduce_scatter(out, chunks(r))
        check(out, np.sum(np.stack([npy(chunks(k)[r]) for k in range(n)]), 0), name, "reduce_scatter")
        out = S.zeros(shape, dtype=DTYPES[name][0])
        dist.reduce_scatter_tensor(out, S.cat(chunks(r)))
        check(out, np.sum(np.stack([npy(chunks(k)[r]) for k in range(n)]), 0), name, "reduce_scatter_tensor")
    # all_to_all_single: equal and uneven splits
    inp = data(r, (2 * n, 3), name)
    out = S.zeros((2 * n, 3), dtype=DTYPES[name][0])
    dist.all_to_all_single(out, inp)
    check(out, np.concatenate([npy(data(k, (2 * n, 3), name))[2 * r:2 * r + 2] for k in range(n)]), name, "a2a")
    in_split = [k + 1 for k in range(n)]                 # rank r sends k+1 rows to rank k
    out_split = [r + 1] * n                              # and receives r+1 rows from each
    inp = data(r, (sum(in_split), 2), name)
    out = S.zeros((sum(out_split), 2), dtype=DTYPES[name][0])
    dist.all_to_all_single(out, inp, out_split, in_split)
    off = sum(in_split[:r])
    check(out, np.concatenate([npy(data(k, (sum(in_split), 2), name))[off:off + r + 1] for k in range(n)]), name,
          "a2a uneven")
    # zero-size tensors
    z = S.zeros((0, 3), dtype=DTYPES[name][0])
    dist.all_reduce(z); dist.broadcast(z, 0)
    zz = [S.zeros((0, 3), dtype=DTYPES[name][0]) for _ in range(n)]
    dist.all_gather(zz, z)
    # point to point: a ring with isend/irecv (every rank sends before it receives)
    t = S.zeros(shape, dtype=DTYPES[name][0])
    ws = [dist.isend(data(r, shape, name), (r + 1) % n), dist.irecv(t, (r - 1) % n)]
    for w in ws:
        w.wait()
    check(t, npy(data((r - 1) % n, shape, name)), name, "isend/irecv")

# all_to_all with lists
outs = [S.zeros(2) for _ in range(n)]
dist.all_to_all(outs, [S.full((2,), float(10 * r + k)) for k in range(n)])
assert [o.tolist() for o in outs] == [[10.0 * k + r] * 2 for k in range(n)]
# send/recv and recv from any source
if r == 0:
    t = S.zeros(3)
    srcs = sorted(dist.recv(t) for _ in range(n - 1))
    assert srcs == list(range(1, n)), srcs
else:
    dist.send(S.ones(3) * r, 0)
# async: many in flight, then waits in reverse order
ts = [S.full((1000,), float(r + i)) for i in range(5)]
ws = [dist.all_reduce(t, async_op=True) for t in ts]
for w in reversed(ws):
    assert w.wait() is True
for i, t in enumerate(ts):
    assert t[0].item() == sum(k + i for k in range(n))
assert all(w.is_completed() and w.is_success() for w in ws)
# objects
objs = [None] * n
dist.all_gather_object(objs, {"rank": r, "s": "x" * r})
assert objs == [{"rank": k, "s": "x" * k} for k in range(n)]
lst = [1, "two", {3: 4}] if r == 1 else [None, None, None]
dist.broadcast_object_list(lst, src=1)
assert lst == [1, "two", {3: 4}]
g = [None] * n if r == 0 else None
dist.gather_object(("r", r), g, dst=0)
assert r != 0 or g == [("r", k) for k in range(n)]
out = [None]
dist.scatter_object_list(out, [k * k for k in range(n)] if r == 0 else None, src=0)
assert out == [r * r]
# groups: evens and odds; the world group again
evens = dist.new_group([k for k in range(n) if k % 2 == 0])
odds = dist.new_group([k for k in range(n) if k % 2 == 1])
mine, other = (evens, odds) if r % 2 == 0 else (odds, evens)
assert dist.get_rank(other) == -1 and dist.all_reduce(S.ones(1), group=other) is None
t = S.ones(2) * r
dist.all_reduce(t, group=mine)
assert t.tolist() == [float(sum(k for k in range(n) if k % 2 == r % 2))] * 2
assert dist.get_world_size(mine) == len(dist.get_process_group_ranks(mine))
t = S.ones(1) * r
dist.broadcast(t, src=dist.get_process_group_ranks(mine)[-1], group=mine)
assert t.item() == dist.get_process_group_ranks(mine)[-1]
# errors: shapes and dtypes
import pytest
with pytest.raises(ValueError, match="all_gather.*3 ranks|all_gather.*has 1 tensors"):
    dist.all_gather([S.zeros(2)], S.zeros(2))
with pytest.raises(ValueError, match="all_gather_into_tensor.*world_size"):
    dist.all_gather_into_tensor(S.zeros(5), S.zeros(2))
with pytest.raises(TypeError, match="dtype"):
    dist.all_gather([S.zeros(2, dtype=S.int32) for _ in range(n)], S.zeros(2))
with pytest.raises(ValueError, match="not part of the group"):
    dist.broadcast(S.zeros(1), src=n + 3)
with pytest.raises(ValueError, match="BAND is not supported"):
    dist.all_reduce(S.zeros(1), op=dist.ReduceOp.BAND)
# the profiler records collectives on the communication thread's track, with bytes and communicator
from strata.profiler import profile
with profile() as prof:
    dist.all_reduce(S.ones(1024))
names = [e.key for e in prof.key_averages()]
assert any(k.startswith("distributed::all_reduce [4096 B, comm") for k in names), names
dist.barrier()
dist.destroy_process_group()
assert not dist.is_initialized()
print("OK", r, flush=True)
import os
if "OK_DIR" in os.environ:  # mpirun may interleave the ranks' output lines
    open(os.path.join(os.environ["OK_DIR"], f"ok{r}"), "w").close()
'''


@pytest.mark.parametrize("nproc,mpi_runtime", [(2, False), (4, False), (2, True)])
def test_collectives_through_the_launcher(tmp_path, nproc, mpi_runtime):
    p = launch(tmp_path, COLLECTIVES, nproc, *(["--mpi-runtime"] if mpi_runtime else []), timeout=180,
               env={"OK_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert all((tmp_path / f"ok{k}").exists() for k in range(nproc)), p.stdout + p.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
def test_collectives_under_mpirun(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(COLLECTIVES)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), OMP_NUM_THREADS="1", OK_DIR=str(tmp_path))
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    p = subprocess.run(["mpirun", *root, "--oversubscribe", "-np", "2", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists(), p.stdout + p.stderr


def test_file_and_tcp_init_methods(tmp_path):
    code = r'''
    import os, sys, strata, strata.distributed as dist
    r = int(os.environ["RANK"])
    method = sys.argv[1]
    dist.init_process_group("mpi", init_method=method, rank=r, world_size=2)
    t = strata.ones(3) * (r + 1)
    dist.all_reduce(t)
    assert t.tolist() == [3.0] * 3 and dist.get_backend() == "mpi"
    print("OK", r, flush=True)
    '''
    for method in (f"file://{tmp_path}/rdzv", "tcp://127.0.0.1:{port}"):
        import socket

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        script = tmp_path / "w.py"
        script.write_text(textwrap.dedent(code))
        env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR))
        env.pop("MASTER_ADDR", None)
        procs = [subprocess.Popen([sys.executable, str(script), method.format(port=port)], env=dict(env, RANK=str(k)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(2)]
        outs = [p.communicate(timeout=90) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert [o[0].strip() for o in outs] == ["OK 0", "OK 1"]


# ---- failures ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mpi_runtime", [False, True])
def test_a_killed_rank_stops_the_launcher(tmp_path, mpi_runtime):
    code = r'''
    import os, signal, strata, strata.distributed as dist
    dist.init_process_group("gloo")
    for step in range(1000000):
        t = strata.ones(1000)
        dist.all_reduce(t)
        if step == 3 and dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    '''
    t0 = time.monotonic()
    p = launch(tmp_path, code, 2, *(["--mpi-runtime"] if mpi_runtime else []), timeout=60)
    assert p.returncode == 1
    if mpi_runtime:  # mpirun's report
        assert "process rank 1" in p.stderr and "signal 9" in p.stderr, p.stderr
    else:
        assert "rank 1" in p.stderr and "SIGKILL" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("mpi_runtime", [False, True])
def test_a_failing_rank_reports_its_error(tmp_path, mpi_runtime):
    code = r'''
    import strata, strata.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        raise ValueError("the failing rank's own message")
    dist.all_reduce(strata.ones(2))  # rank 0 waits here until the launcher stops it
    '''
    t0 = time.monotonic()
    p = launch(tmp_path, code, 2, *(["--mpi-runtime"] if mpi_runtime else []), timeout=60)
    assert p.returncode == 1
    assert "the failing rank's own message" in p.stderr.split("strata.distributed.run:")[-1]
    assert ("rank 1 failed: ValueError" if mpi_runtime else "rank 1") in p.stderr
    assert time.monotonic() - t0 < 30  # the failing rank does not wait for the others in MPI_Finalize


def test_a_hung_rank_times_out(tmp_path):
    code = r'''
    import datetime, time, strata, strata.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    if dist.get_rank() == 1:
        time.sleep(120)
    dist.all_reduce(strata.ones(2))
    '''
    t0 = time.monotonic()
    p = launch(tmp_path, code, 2, timeout=60)
    assert p.returncode == 1
    assert "did not complete within" in p.stderr and "rank 0" in p.stderr.split("strata.distributed.run:")[-1]
    assert time.monotonic() - t0 < 40


def test_debug_mode_reports_mismatched_collectives(tmp_path):
    code = r'''
    import strata, strata.distributed as dist
    dist.init_process_group("gloo")
    t = strata.ones(4 if dist.get_rank() == 0 else 5)
    dist.all_reduce(t)
    '''
    p = launch(tmp_path, code, 2, timeout=60, env={"STRATA_DISTRIBUTED_DEBUG": "DETAIL"})
    assert p.returncode == 1
    assert "ranks called different collectives" in p.stderr
    assert "rank 0: all_reduce (4,)" in p.stderr and "rank 1: all_reduce (5,)" in p.stderr


def test_launcher_forwards_sigterm_and_launch_alias_passes_local_rank(tmp_path):
    import signal

    script = tmp_path / "sleepy.py"
    # one write() per line: both ranks share the pipe, and a print may reach it in pieces
    script.write_text("import os, sys, time\nos.write(1, f'STARTED {sys.argv[1:]}\\n'.encode())\ntime.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR))
    p = subprocess.Popen([sys.executable, "-m", "strata.distributed.launch", "--standalone", "--nproc-per-node", "2",
                          str(script), "x"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [p.stdout.readline(), p.stdout.readline()]
    assert sorted(lines) == ["STARTED ['--local-rank=0', 'x']\n", "STARTED ['--local-rank=1', 'x']\n"], lines
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM
    assert time.monotonic() - t0 < 20


# ---- the synchronous fast path (the caller makes the MPI call when the engine is idle) ------------------------

FAST_PATH = r'''
import os, threading, time, strata, strata.distributed as dist
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
C = strata._C._distributed
r = dist.get_rank()
assert C.fast_path_enabled()

# An idle engine: a synchronous all_reduce runs on the caller's thread.
n0 = C.fast_path_calls()
x = strata.full((300,), float(r + 1))
dist.all_reduce(x)
assert x.tolist() == [3.0] * 300, x
assert C.fast_path_calls() == n0 + 1

# An outstanding async all_reduce (rank 1 joins late, so rank 0's cannot have completed) and a synchronous one after
# it on the same group: the synchronous one queues behind it (no fast path), so both pair with the same calls of
# the other rank. Were it run first on rank 0 only, x would be summed with rank 1's y (1 + 20) and y with x.
if r == 1:
    time.sleep(0.5)
x = strata.full((1024,), float(r + 1))  # 4 KiB: within the fast path's size limit
y = strata.full((1024,), 10.0 * (r + 1))
n0 = C.fast_path_calls()
w = dist.all_reduce(x, async_op=True)
dist.all_reduce(y)
if r == 0:
    assert C.fast_path_calls() == n0, "a synchronous call overtook an outstanding async one"
w.wait()
assert x.tolist() == [3.0] * 1024 and y.tolist() == [30.0] * 1024, (x[:3], y[:3])
n0 = C.fast_path_calls()
dist.all_reduce(y)
assert C.fast_path_calls() == n0 + 1, "the engine is idle again: the fast path"

# Larger messages take the thread path: all_reduce on 2^k ranks over STRATA_DISTRIBUTED_ALLREDUCE_MAX_BYTES (64 KiB
# by default), the other small collectives over STRATA_DISTRIBUTED_FAST_PATH_MAX_BYTES (16 KiB).
big = strata.full((16385,), float(r + 1))
dist.all_reduce(big)
assert big.tolist() == [3.0] * 16385 and C.fast_path_calls() == n0 + 1
bb = strata.full((4097,), float(r))
dist.broadcast(bb, src=1)
assert bb.tolist() == [1.0] * 4097 and C.fast_path_calls() == n0 + 1
# A 16 KiB all_reduce travels in 5 pieces (STRATA_DISTRIBUTED_CHUNK_BYTES: 4000); each piece lands where it belongs.
v = strata.arange(4096, dtype=strata.float32) * (r + 1)
dist.all_reduce(v)
assert v.tolist() == [3.0 * i for i in range(4096)] and C.fast_path_calls() == n0 + 2
# Collectives other than all_reduce, broadcast, all_gather, reduce_scatter and barrier take the thread path at
# any size (64 B here).
o = strata.empty(16)
dist.all_to_all_single(o, strata.full((16,), float(r)), [8, 8], [8, 8])
assert o.tolist() == [0.0] * 8 + [1.0] * 8 and C.fast_path_calls() == n0 + 2

# broadcast, all_gather_into_tensor, reduce_scatter_tensor through the C++ fast call; a new group's communicator.
g = dist.new_group([0, 1])
b = strata.arange(5, dtype=strata.int64) * (r + 1)
dist.broadcast(b, src=1, group=g)
assert b.tolist() == [0, 2, 4, 6, 8], b
out = strata.empty(6, dtype=strata.float64)
dist.all_gather_into_tensor(out, strata.full((3,), float(r), dtype=strata.float64))
assert out.tolist() == [0, 0, 0, 1, 1, 1], out
rs = strata.empty(2, dtype=strata.int32)
dist.reduce_scatter_tensor(rs, strata.arange(4, dtype=strata.int32) + r, op=dist.ReduceOp.MAX)
assert rs.tolist() == ([1, 2] if r == 0 else [3, 4]), rs
n0 = C.fast_path_calls()
a = strata.full((4,), float(r + 1))
dist.all_reduce(a, op=dist.ReduceOp.AVG)
ai = strata.full((4,), r + 2, dtype=strata.int64)
dist.all_reduce(ai, op=dist.ReduceOp.AVG)  # (2 + 3) / 2, truncated as on the general path
rs = strata.empty(2, dtype=strata.float64)
dist.reduce_scatter_tensor(rs, strata.arange(4, dtype=strata.float64) + r, op=dist.ReduceOp.AVG)
assert a.tolist() == [1.5] * 4 and ai.tolist() == [2] * 4, (a, ai)
assert rs.tolist() == ([0.5, 1.5] if r == 0 else [2.5, 3.5]), rs
assert C.fast_path_calls() == n0 + 3

# Synchronous calls from two Python threads at once, on one group: each call pairs with some call of the other rank
# (the order between the threads is the scheduler's), so every tensor holds the same value and any pairing gives 3.
# MPI calls must never overlap (one token): overlapping calls on one communicator would mix up their messages.
errors = []
def hammer(k):
    try:
        t = strata.empty(64)
        for i in range(300):
            t.fill_(float(r + 1))
            dist.all_reduce(t)
            if t.tolist() != [3.0] * 64:
                errors.append((k, i, t[:4].tolist()))
    except Exception as e:
        errors.append(repr(e))
n0 = C.fast_path_calls()
ts = [threading.Thread(target=hammer, args=(k,)) for k in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
assert not errors, errors[:5]
print(f"rank {r}: {C.fast_path_calls() - n0} of 600 threaded calls took the fast path", flush=True)
dist.barrier()
if "OK_DIR" in os.environ:
    open(os.path.join(os.environ["OK_DIR"], f"ok{r}"), "w").close()
'''


@pytest.mark.parametrize("mpi_runtime", [False, True])
def test_fast_path_keeps_order_and_serves_threads(tmp_path, mpi_runtime):
    p = launch(tmp_path, FAST_PATH, 2, *(["--mpi-runtime"] if mpi_runtime else []), timeout=120,
               env={"OK_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists(), p.stdout + p.stderr


@pytest.mark.parametrize("mode", ["fast", "thread", "async"])
def test_a_hung_rank_times_out_on_every_path(tmp_path, mode):
    # fast (the default: the caller's thread runs the small collective and waits for it with a deadline), thread
    # (STRATA_DISTRIBUTED_FAST_PATH=0) and async: the caller raises DistError within the timeout, the engine is
    # broken (later calls raise at once), and the process ends by itself (sys.exit(3) -> the launcher exits 1).
    code = r'''
    import datetime, sys, time, strata, strata.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
    if dist.get_rank() == 1:
        time.sleep(120)
    t0 = time.monotonic()
    try:
        if MODE == "async":
            dist.all_reduce(strata.ones(2), async_op=True).wait()
        else:
            dist.all_reduce(strata.ones(2))
    except dist.DistError as e:
        print("CAUGHT after %.1f s: %s" % (time.monotonic() - t0, e), file=sys.stderr, flush=True)
        try:
            dist.all_reduce(strata.ones(2))
        except dist.DistError as e2:
            print("THEN:", e2, file=sys.stderr, flush=True)
        sys.exit(3)
    print("NOT REACHED", file=sys.stderr, flush=True)
    '''.replace("MODE", repr(mode))
    t0 = time.monotonic()
    env = {"STRATA_DISTRIBUTED_FAST_PATH": "1" if mode == "fast" else "0"}
    p = launch(tmp_path, code, 2, timeout=60, env=env)
    assert p.returncode == 1, p.stderr
    assert "did not complete within 2" in p.stderr, p.stderr
    assert "NOT REACHED" not in p.stderr
    assert "CAUGHT" in p.stderr and "unusable after an earlier failure" in p.stderr, p.stderr
    caught = float(p.stderr.split("CAUGHT after ")[1].split(" s")[0])
    assert 1.5 < caught < 20, p.stderr  # the group's timeout (2 s), not the launcher's or the test's
    assert time.monotonic() - t0 < 40


def test_the_fast_path_is_on_unless_turned_off():
    code = "import strata; print(strata._C._distributed.fast_path_enabled())"
    env = {k: v for k, v in os.environ.items() if k != "STRATA_DISTRIBUTED_FAST_PATH"}
    env["PYTHONPATH"] = os.path.abspath(PYTHON_DIR)
    for value, want in ((None, "True"), ("0", "False"), ("off", "False"), ("1", "True")):
        e = dict(env, **({} if value is None else {"STRATA_DISTRIBUTED_FAST_PATH": value}))
        out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == want, (value, out.stdout, out.stderr)


# ---- small collectives: our own all-reduce (2^k ranks), MPI's non-blocking ones otherwise ----------------------

SMALL = r'''
import os
r = int(os.environ["RANK"])
if r == 1:  # one rank runs every collective on the communication thread: the route must not depend on the thread
    os.environ["STRATA_DISTRIBUTED_FAST_PATH"] = "0"
import strata, strata.distributed as dist
dist.init_process_group("gloo")
C = strata._C._distributed
n_ranks = dist.get_world_size()
R = dist.ReduceOp
assert C.fast_path_enabled() == (r != 1)

def data(rank, dt, n):
    base = strata.arange(n, dtype=strata.int64) % 4
    if dt.is_floating_point:
        return ((base.to(dt) - 1.5) * (rank + 1) * 0.37).to(dt)
    if dt == strata.uint8:
        return (base + rank).to(dt)
    return (base - 1 + rank).to(dt)  # -1 .. 2 + rank: products stay small

def same_everywhere(t):
    seen = [None] * n_ranks
    dist.all_gather_object(seen, repr(t.tolist()))
    assert all(s == seen[0] for s in seen), "ranks disagree"

for dt in (strata.int8, strata.uint8, strata.int16, strata.int32, strata.int64, strata.float32, strata.float64):
    esize = strata.empty(0, dtype=dt).element_size()
    # 16 KiB and 64 KiB: several pieces of at most 4000 bytes (64 KiB: the own all-reduce's limit on 2^k ranks;
    # on 3 ranks it is above the 16 KiB limit of the other route: the thread path's MPI_Allreduce)
    for n in (5, 1000 // esize, 16384 // esize, 65536 // esize):
        inputs = strata.stack([data(k, dt, n) for k in range(n_ranks)])
        for op, want in ((R.SUM, inputs.sum(0)), (R.PRODUCT, inputs.prod(0)), (R.MIN, inputs.amin(0)),
                         (R.MAX, inputs.amax(0))):
            t = data(r, dt, n)
            dist.all_reduce(t, op=op)
            want = want.to(dt)
            if dt.is_floating_point:
                assert strata.allclose(t, want, rtol=1e-5, atol=1e-6), (dt, n, op, t[:6], want[:6])
            else:
                assert t.tolist() == want.tolist(), (dt, n, op, t[:6], want[:6])
            same_everywhere(t)
        t = data(r, dt, n)
        dist.all_reduce(t, op=R.AVG)
        want = inputs.sum(0) / n_ranks if dt.is_floating_point else strata.div(inputs.sum(0), n_ranks, rounding_mode="trunc")
        assert strata.allclose(t.to(strata.float64), want.to(dt).to(strata.float64), rtol=1e-5), (dt, n, t[:6])

if n_ranks & (n_ranks - 1) == 0:
    # Our own all-reduce: NaN wins MAX and MIN on every rank; +0.0 is MAX of {-0.0, +0.0} and -0.0 its MIN.
    nan = float("nan")
    t = strata.tensor([nan if r == 0 else 1.0, -0.0 if r == 0 else 0.0, 2.0])
    u = t.clone()
    dist.all_reduce(t, op=R.MAX)
    dist.all_reduce(u, op=R.MIN)
    assert t[0].isnan().item() and u[0].isnan().item(), (t, u)
    assert repr(t[1].item()) == "0.0" and repr(u[1].item()) == "-0.0", (t, u)
    same_everywhere(t)
    same_everywhere(u)

# broadcast, all_gather_into_tensor, reduce_scatter_tensor and barrier, small (non-blocking MPI) and large (blocking)
for n in (3, 3000):
    b = strata.arange(n, dtype=strata.float64) * (r + 1)
    dist.broadcast(b, src=n_ranks - 1)
    assert b.tolist() == [float(i * n_ranks) for i in range(n)]
    out = strata.empty(n * n_ranks, dtype=strata.int32)
    dist.all_gather_into_tensor(out, strata.full((n,), r, dtype=strata.int32))
    assert out.tolist() == [k for k in range(n_ranks) for _ in range(n)]
    rs = strata.empty(n, dtype=strata.int64)
    dist.reduce_scatter_tensor(rs, strata.arange(n * n_ranks, dtype=strata.int64))
    assert rs.tolist() == [(r * n + i) * n_ranks for i in range(n)]
    dist.barrier()
print(f"rank {r}: {C.fast_path_calls()} calls on the fast path", flush=True)
open(os.path.join(os.environ["OK_DIR"], f"ok{r}"), "w").close()
'''


@pytest.mark.parametrize("nproc,runtime", [(2, ""), (3, ""), (4, ""), (2, "--mpi-runtime"), (4, "--mpi-runtime")])
def test_small_collectives_agree_across_routes_and_ranks(tmp_path, nproc, runtime):
    # joined ranks (TCP: no pieces, the own all-reduce up to 16 KiB) and one mpirun job (shared memory: pieces, the
    # own all-reduce up to 64 KiB)
    p = launch(tmp_path, SMALL, nproc, *([runtime] if runtime else []), timeout=240, env={"OK_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr[-6000:]
    for k in range(nproc):
        assert (tmp_path / f"ok{k}").exists(), p.stdout + p.stderr[-6000:]
    assert "rank 1: 0 calls" in p.stdout and "rank 0: 0 calls" not in p.stdout, p.stdout


@pytest.mark.parametrize("what", ["broadcast", "barrier", "all_reduce_16k"])
def test_a_hung_rank_times_out_in_other_small_collectives(tmp_path, what):
    # The fast path's wait honours the group's timeout for every small collective it runs, not only all_reduce.
    code = r'''
    import datetime, sys, time, strata, strata.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
    C = strata._C._distributed
    if dist.get_rank() == 1:
        time.sleep(120)
    n0 = C.fast_path_calls()
    try:
        if WHAT == "broadcast":
            dist.broadcast(strata.ones(8), src=1)  # the root of a small broadcast need not wait
        elif WHAT == "barrier":
            dist.barrier()
        else:
            dist.all_reduce(strata.ones(4096))
    except dist.DistError as e:
        print("CAUGHT on the fast path: %s" % (C.fast_path_calls() == n0 + 1), e, file=sys.stderr, flush=True)
        sys.exit(3)
    print("NOT REACHED", file=sys.stderr, flush=True)
    '''.replace("WHAT", repr(what))
    p = launch(tmp_path, code, 2, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "CAUGHT on the fast path: True" in p.stderr and "did not complete within 2" in p.stderr, p.stderr


def test_the_fast_path_backs_off_while_peers_arrive_late(tmp_path):
    # Rank 1 comes 2 ms late to each of 32 all_reduces: rank 0's waits go past their polling time, so its fast path
    # turns itself off for a while (the next call queues on the communication thread) and comes back afterwards.
    code = r'''
    import os, time, strata, strata.distributed as dist
    dist.init_process_group("gloo")
    C = strata._C._distributed
    r = dist.get_rank()
    x = strata.ones(4)
    dist.barrier()
    for i in range(32):
        if r == 1:
            time.sleep(0.002)
        dist.all_reduce(x)
    if r == 0:
        assert C.fast_path_backoffs() == 1, C.fast_path_backoffs()
        n0 = C.fast_path_calls()
        dist.all_reduce(x)
        assert C.fast_path_calls() == n0, "backed off: the thread path"
        time.sleep(0.3)
        dist.all_reduce(x)
        assert C.fast_path_calls() == n0 + 1, "the fast path again"
    else:
        dist.all_reduce(x)
        dist.all_reduce(x)
    assert x.tolist() == [2.0 ** 34] * 4, x
    open(os.path.join(os.environ["OK_DIR"], f"ok{r}"), "w").close()
    '''
    p = launch(tmp_path, code, 2, timeout=90, env={"OK_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists(), p.stdout + p.stderr[-4000:]
