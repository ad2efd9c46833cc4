"""strata.distributed.rpc, distributed autograd, DistributedOptimizer and RemoteModule, with 2-3 worker processes
started by each test. The same scenarios run under torch's rpc as the reference (the training one always, the others
with STRATA_TEST_TORCH_RPC=1) and must agree.

Each worker imports this file as the module `test_rpc`, so the functions below travel by reference as in any RPC
program; `T` is the library under test in that process (strata, or torch for the reference runs)."""

import importlib
import os
import pickle
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

T = importlib.import_module(os.environ.get("RPC_TEST_LIB", "strata"))
HERE = os.path.dirname(os.path.abspath(__file__))


def _libs(always_torch=False):
    """strata, and torch as the reference when its rpc is available (not probed inside the workers: importing torch
    there would cost seconds). Worker processes importing torch take seconds each, so the reference runs of the
    API scenarios happen with STRATA_TEST_TORCH_RPC=1 only; the training comparison runs it unless that is 0."""
    out = ["strata"]
    flag = os.environ.get("STRATA_TEST_TORCH_RPC")
    if "RPC_TEST_LIB" in os.environ or flag == "0" or not (always_torch or flag == "1"):
        return out
    try:
        import torch.distributed.rpc as trpc

        if trpc.is_available():
            out.append("torch")
    except Exception:
        pass
    return out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(scenario, world_size, lib="strata", tmp_path=None, timeout=120, exit_codes=None):
    """Starts world_size workers running `scenario`; returns what rank 0's scenario returned."""
    port = _free_port()
    out = os.path.join(str(tmp_path), f"{scenario}-{lib}.pkl")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world_size),
               RPC_TEST_LIB=lib, RPC_TEST_OUT=out, OMP_NUM_THREADS="1")
    pypath = [HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")]
    env["PYTHONPATH"] = os.pathsep.join(pypath + [env.get("PYTHONPATH", "")])
    code = f"import test_rpc; test_rpc._worker_main({scenario!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for r in range(world_size)]
    deadline = time.monotonic() + timeout
    logs = []
    try:
        for p in procs:
            left = max(1.0, deadline - time.monotonic())
            logs.append(p.communicate(timeout=left)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    exit_codes = exit_codes or [0] * world_size
    bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != exit_codes[r]]
    assert not bad, f"{lib} workers failed {bad}:\n" + "\n".join(f"--- rank {r}:\n{log[-3000:]}"
                                                              for r, log in enumerate(logs))
    with open(out, "rb") as f:
        return pickle.load(f)


def _worker_main(scenario):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")
    # In "basic", worker1 has one executor thread: its nested calls must not wait for their replies behind
    # themselves.
    threads = 1 if (scenario, rank) == ("basic", 1) else 8
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=threads, rpc_timeout=60)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
    fn = globals()["_scenario_" + scenario]
    result = fn(rpc, rank, world)
    if not getattr(fn, "shuts_down", False):
        rpc.shutdown()
    if rank == 0:
        with open(os.environ["RPC_TEST_OUT"], "wb") as f:
            pickle.dump(result, f)


# ---- functions run remotely -------------------------------------------------------------------------------------

def add_scaled(x, y, scale=1.0):
    return (x + y) * scale


def pack(x, tag):
    return {"tag": tag, "items": [x, x * 2], "shape": tuple(x.shape)}


def whoami():
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")
    return rpc.get_worker_info().name


def fail(msg):
    raise ValueError(msg)


def slow(seconds):
    time.sleep(seconds)
    return seconds


def relay(to, x):
    """A nested call: this worker asks `to` for x + 1."""
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")
    return rpc.rpc_sync(to, T.add, args=(x, 1))


class Counter:
    def __init__(self, start):
        self.n = start

    def inc(self, k=1):
        self.n += k
        return self.n

    def get(self):
        return self.n


class AsyncHolder:
    def __init__(self, v):
        self.v = v

    @importlib.import_module(T.__name__ + ".distributed.rpc").functions.async_execution
    def plus(self, k):
        fut = T.futures.Future()
        fut.set_result(self.v + k)
        return fut


def rref_sum(rref):
    return rref.to_here().sum()


def make_rref(v):
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")
    return rpc.RRef(v)


def _async_fn():
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")

    @rpc.functions.async_execution
    def async_add_chain(to, x, n):
        # n chained calls to `to`, without holding an executor thread while waiting
        out = T.futures.Future()

        def step(k, fut):
            if k == n:
                out.set_result(fut.wait())
            else:
                rpc.rpc_async(to, T.add, args=(fut.wait(), 1)).then(lambda f: step(k + 1, f))

        rpc.rpc_async(to, T.add, args=(x, 1)).then(lambda f: step(1, f))
        return out

    return async_add_chain


async_add_chain = None


def _install_async():
    global async_add_chain
    async_add_chain = _async_fn()
    async_add_chain.__qualname__ = async_add_chain.__name__ = "async_add_chain"


_install_async()


# ---- scenarios (run by every worker; rank 0 drives) ------------------------------------------------------------

def _scenario_basic(rpc, rank, world):
    if rank != 0:
        return None
    r = {}
    x, y = T.arange(6.0).reshape(2, 3), T.ones(2, 3)
    r["builtin"] = rpc.rpc_sync("worker1", T.add, args=(x, y)).numpy()
    r["user_kwargs"] = rpc.rpc_sync("worker2", add_scaled, args=(x, y), kwargs={"scale": 0.5}).numpy()
    futs = [rpc.rpc_async(f"worker{i % world}", add_scaled, args=(x, T.full((2, 3), float(i)))) for i in range(6)]
    r["async"] = [f.wait().numpy() for f in futs]
    r["done"] = all(f.done() for f in futs)
    obj = rpc.rpc_sync(rpc.get_worker_info("worker1"), pack, args=(x, "hello"))
    r["object"] = (obj["tag"], [t.numpy() for t in obj["items"]], obj["shape"])
    r["names"] = [rpc.rpc_sync(w, whoami) for w in ("worker0", "worker1", rpc.get_worker_info("worker2"))]
    r["info"] = (repr(rpc.get_worker_info()), rpc.get_worker_info("worker2").id, rpc.get_worker_info("worker2").name)
    r["nested"] = rpc.rpc_sync("worker1", relay, args=("worker2", x)).numpy()
    r["then"] = rpc.rpc_async("worker1", T.mul, args=(x, 2)).then(lambda f: f.wait() + 1).wait().numpy()
    # RRefs
    c = rpc.remote("worker1", Counter, args=(10,))
    r["rref_meta"] = (c.owner().name, c.owner_name(), c.is_owner())
    r["rref_proxy"] = [c.rpc_sync().inc(2), c.rpc_async().inc(3).wait(), c.remote().inc(1).to_here(),
                       c.rpc_sync().get()]
    r["rref_confirmed"] = c.confirmed_by_owner()
    t = rpc.remote("worker2", T.mul, args=(x, 3))
    r["rref_to_here"] = t.to_here().numpy()
    r["rref_as_arg"] = rpc.rpc_sync("worker1", rref_sum, args=(t,)).item()
    local = rpc.RRef(x)
    r["local_rref"] = (local.is_owner(), local.local_value() is x, local.to_here() is x)
    r["local_rref_remote_use"] = rpc.rpc_sync("worker2", rref_sum, args=(local,)).item()
    back = rpc.rpc_sync("worker1", make_rref, args=(y * 7,))
    r["returned_rref"] = (back.owner_name(), back.is_owner(), back.to_here().numpy())
    try:
        t.local_value()
        r["local_value_not_owner"] = None
    except RuntimeError:
        r["local_value_not_owner"] = "RuntimeError"
    # async_execution: the reply waits for the chained future
    r["async_exec"] = rpc.rpc_sync("worker1", async_add_chain, args=("worker2", x, 3)).numpy()
    r["async_exec_remote"] = rpc.remote("worker2", async_add_chain, args=("worker1", x, 2)).to_here().numpy()
    h = rpc.remote("worker1", AsyncHolder, args=(x,))
    r["async_method"] = [v.numpy() for v in (h.rpc_sync().plus(1), h.rpc_async().plus(2).wait(),
                                             h.remote().plus(3).to_here())]
    # remote errors: the exception type, the remote worker and the remote traceback
    try:
        rpc.rpc_sync("worker1", fail, args=("boom",))
        r["error"] = None
    except ValueError as e:
        r["error"] = ("ValueError", "boom" in str(e), "worker1" in str(e), "Traceback" in str(e))
    try:
        rpc.remote("worker2", fail, args=("late",)).to_here()
        r["remote_error"] = None
    except ValueError as e:
        r["remote_error"] = ("ValueError", "late" in str(e))
    # timeouts
    t0 = time.monotonic()
    try:
        rpc.rpc_sync("worker2", slow, args=(3.0,), timeout=0.3)
        r["timeout"] = None
    except RuntimeError as e:
        r["timeout"] = ("RuntimeError", "timeout" in str(e), time.monotonic() - t0 < 2.5)
    f = rpc.rpc_async("worker2", slow, args=(3.0,), timeout=0.3)
    try:
        f.wait()
        r["timeout_async"] = None
    except RuntimeError as e:
        r["timeout_async"] = "timeout" in str(e)
    r["no_timeout"] = rpc.rpc_sync("worker1", slow, args=(0.2,), timeout=0)
    # unknown workers
    for key, to in (("unknown", "nobody"), ("unknown_rank", 17)):
        try:
            rpc.rpc_sync(to, T.add, args=(x, y))
            r[key] = None
        except Exception as e:  # torch raises RuntimeError for a name
            r[key] = type(e).__name__
    return r


@pytest.mark.parametrize("lib", _libs())
def test_basic(lib, tmp_path):
    r = _run("basic", 3, lib, tmp_path)
    x, y = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    np.testing.assert_allclose(r["builtin"], x + y)
    np.testing.assert_allclose(r["user_kwargs"], (x + y) * 0.5)
    for i, a in enumerate(r["async"]):
        np.testing.assert_allclose(a, x + i)
    assert r["done"]
    assert r["object"][0] == "hello" and r["object"][2] == (2, 3)
    np.testing.assert_allclose(r["object"][1][1], 2 * x)
    assert r["names"] == ["worker0", "worker1", "worker2"]
    assert r["info"] == ("WorkerInfo(id=0, name=worker0)", 2, "worker2")
    np.testing.assert_allclose(r["nested"], x + 1)
    np.testing.assert_allclose(r["then"], 2 * x + 1)
    assert r["rref_meta"] == ("worker1", "worker1", False)
    assert r["rref_proxy"] == [12, 15, 16, 16]
    assert r["rref_confirmed"]
    np.testing.assert_allclose(r["rref_to_here"], 3 * x)
    assert r["rref_as_arg"] == pytest.approx(3 * x.sum())
    assert r["local_rref"] == (True, True, True)
    assert r["local_rref_remote_use"] == pytest.approx(x.sum())
    assert r["returned_rref"][:2] == ("worker1", False)
    np.testing.assert_allclose(r["returned_rref"][2], 7 * y)
    assert r["local_value_not_owner"] == "RuntimeError"
    np.testing.assert_allclose(r["async_exec"], x + 3)
    np.testing.assert_allclose(r["async_exec_remote"], x + 2)
    for k, a in enumerate(r["async_method"]):
        np.testing.assert_allclose(a, x + k + 1)
    assert r["error"] == ("ValueError", True, True, True)
    assert r["remote_error"] == ("ValueError", True)
    assert r["timeout"] == ("RuntimeError", True, True)
    assert r["timeout_async"] is True
    assert r["no_timeout"] == 0.2
    assert r["unknown"] == "RuntimeError"
    assert r["unknown_rank"] is not None


# ---- distributed autograd and DistributedOptimizer: the tutorial's model split over two workers ----------------

class Stage(T.nn.Module):
    """One part of the model: Linear then tanh."""

    def __init__(self, n_in, n_out, seed):
        super().__init__()
        self.lin = T.nn.Linear(n_in, n_out)
        g = np.random.default_rng(seed)
        with T.no_grad():
            self.lin.weight.copy_(T.tensor(g.standard_normal((n_out, n_in)) * 0.3, dtype=T.float32))
            self.lin.bias.copy_(T.tensor(g.standard_normal(n_out) * 0.1, dtype=T.float32))

    def forward(self, x):
        return T.tanh(self.lin(x))


def _data(step):
    g = np.random.default_rng(100 + step)
    return (T.tensor(g.standard_normal((8, 5)), dtype=T.float32),
            T.tensor(g.standard_normal((8, 2)), dtype=T.float32))


def _remote_forward(stage_rref, x):
    return stage_rref.local_value()(x)


def _param_rrefs(stage_rref):
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")
    return [rpc.RRef(p) for p in stage_rref.local_value().parameters()]


def _get_params(stage_rref):
    return [p.detach().clone() for p in stage_rref.local_value().parameters()]


def _grads_here(ctx_id):
    dist_autograd = importlib.import_module(T.__name__ + ".distributed.autograd")
    return sorted(tuple(g.shape) for g in dist_autograd.get_gradients(ctx_id).values())


def _scenario_train(rpc, rank, world):
    if rank != 0:
        return None
    dist_autograd = importlib.import_module(T.__name__ + ".distributed.autograd")
    dist_optim = importlib.import_module(T.__name__ + ".distributed.optim")
    # stage 1 and 3 live on worker1, stage 2 here: activations cross the wire twice each way
    s1 = rpc.remote("worker1", Stage, args=(5, 4, 1))
    s2 = Stage(4, 3, 2)
    s3 = rpc.remote("worker1", Stage, args=(3, 2, 3))
    params = rpc.rpc_sync("worker1", _param_rrefs, args=(s1,)) + [rpc.RRef(p) for p in s2.parameters()] + \
        rpc.rpc_sync("worker1", _param_rrefs, args=(s3,))
    opt = dist_optim.DistributedOptimizer(T.optim.SGD, params, lr=0.1, momentum=0.9)
    losses, grad_shapes = [], None
    for step in range(4):
        x, y = _data(step)
        with dist_autograd.context() as ctx:
            h = rpc.rpc_sync("worker1", _remote_forward, args=(s1, x))
            h = s2(h)
            out = rpc.rpc_sync("worker1", _remote_forward, args=(s3, h))
            loss = T.nn.functional.mse_loss(out, y)
            dist_autograd.backward(ctx, [loss])
            if step == 0:
                local = dist_autograd.get_gradients(ctx)
                grad_shapes = (sorted(tuple(g.shape) for g in local.values()),
                               rpc.rpc_sync("worker1", _grads_here, args=(ctx,)),
                               all(p.grad is None for p in s2.parameters()))
            opt.step(ctx)
        losses.append(loss.item())
    dist = [p.numpy() for p in rpc.rpc_sync("worker1", _get_params, args=(s1,))] + \
        [p.detach().numpy() for p in s2.parameters()] + \
        [p.numpy() for p in rpc.rpc_sync("worker1", _get_params, args=(s3,))]
    # the same model in one process
    m = T.nn.Sequential(Stage(5, 4, 1), Stage(4, 3, 2), Stage(3, 2, 3))
    o = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    ref_losses = []
    for step in range(4):
        x, y = _data(step)
        o.zero_grad()
        loss = T.nn.functional.mse_loss(m(x), y)
        loss.backward()
        o.step()
        ref_losses.append(loss.item())
    return {"params": dist, "ref": [p.detach().numpy() for p in m.parameters()], "losses": losses,
            "ref_losses": ref_losses, "grad_shapes": grad_shapes}


def test_dist_autograd_training_matches_one_process(tmp_path):
    results = {lib: _run("train", 2, lib, tmp_path) for lib in _libs(always_torch=True)}
    r = results["strata"]
    assert len(r["params"]) == len(r["ref"]) == 6
    for a, b in zip(r["params"], r["ref"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r["losses"], r["ref_losses"], rtol=1e-5)
    assert r["losses"][-1] < r["losses"][0]
    # gradients go to the contexts of the owners, not to .grad
    assert r["grad_shapes"] == ([(3,), (3, 4)], [(2,), (2, 3), (4,), (4, 5)], True)
    if "torch" in results:
        t = results["torch"]
        assert t["grad_shapes"] == r["grad_shapes"]
        for a, b in zip(r["params"], t["params"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r["losses"], t["losses"], rtol=1e-5)


# ---- RemoteModule, RRef.backward, gradients of sent inputs and of results of results ----------------------------

def _double(x):
    return x * 2


def _square_sum_rref(x):
    rpc = importlib.import_module(T.__name__ + ".distributed.rpc")
    return rpc.RRef((x * x).sum())


def _scenario_remote_module(rpc, rank, world):
    if rank != 0:
        return None
    dist_autograd = importlib.import_module(T.__name__ + ".distributed.autograd")
    dist_nn = importlib.import_module(T.__name__ + ".distributed.nn")
    dist_optim = importlib.import_module(T.__name__ + ".distributed.optim")
    r = {}
    rm = dist_nn.RemoteModule("worker1/cpu", Stage, args=(3, 2, 7))
    x = T.tensor(np.linspace(-1, 1, 6).reshape(2, 3), dtype=T.float32, requires_grad=True)
    r["forward"] = rm(x).detach().numpy()
    r["forward_async"] = rm.forward_async(x).wait().detach().numpy()
    ps = rm.remote_parameters()
    r["n_params"] = (len(ps), [p.owner_name() for p in ps])
    opt = dist_optim.DistributedOptimizer(T.optim.SGD, ps, lr=0.5)
    with dist_autograd.context() as ctx:
        # x goes to worker1 and back through two calls; its gradient lands here
        y = rpc.rpc_sync("worker2", _double, args=(rm(x),))
        loss = (y * y).sum()
        dist_autograd.backward(ctx, [loss])
        g = dist_autograd.get_gradients(ctx)
        r["x_grad"] = g[x].numpy()
        r["x_grad_untouched"] = x.grad is None
        opt.step(ctx)
    r["after_step"] = [p.to_here().detach().numpy() for p in ps]
    ref = Stage(3, 2, 7)
    xr = T.tensor(np.linspace(-1, 1, 6).reshape(2, 3), dtype=T.float32, requires_grad=True)
    lr = ((ref(xr) * 2) ** 2).sum()
    lr.backward()
    r["ref_forward"] = ref(xr).detach().numpy()
    r["ref_x_grad"] = xr.grad.numpy()
    r["ref_after_step"] = [(p - 0.5 * p.grad).detach().numpy() for p in ref.parameters()]
    # RRef.backward on a remote scalar in a context
    with dist_autograd.context() as ctx:
        s = rpc.remote("worker2", _square_sum_rref, args=(x,)).to_here()
        s.backward(ctx)
        r["rref_backward"] = dist_autograd.get_gradients(ctx)[x].numpy()
    # one tensor sent to two workers and also used locally: the shared graph is traversed by three passes
    with dist_autograd.context() as ctx:
        h = x * 2
        y1 = rpc.rpc_sync("worker1", T.mul, args=(h, 3.0))
        y2 = rpc.rpc_sync("worker2", T.mul, args=(h, 4.0))
        dist_autograd.backward(ctx, [(y1 + y2 + h).sum()])
        r["shared"] = dist_autograd.get_gradients(ctx)[x].numpy()
    try:
        rm.parameters()
        r["unsupported"] = None
    except ValueError:
        r["unsupported"] = "ValueError"
    return r


@pytest.mark.parametrize("lib", _libs())
def test_remote_module_and_input_grads(lib, tmp_path):
    r = _run("remote_module", 3, lib, tmp_path)
    np.testing.assert_allclose(r["forward"], r["ref_forward"], rtol=1e-5)
    np.testing.assert_allclose(r["forward_async"], r["ref_forward"], rtol=1e-5)
    assert r["n_params"] == (2, ["worker1", "worker1"])
    np.testing.assert_allclose(r["x_grad"], r["ref_x_grad"], rtol=1e-5, atol=1e-6)
    assert r["x_grad_untouched"]
    for a, b in zip(r["after_step"], r["ref_after_step"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    np.testing.assert_allclose(r["rref_backward"], 2 * x, rtol=1e-6)
    np.testing.assert_allclose(r["shared"], np.full((2, 3), 16.0))
    assert r["unsupported"] == "ValueError"


# ---- shutdown waits for outstanding work ------------------------------------------------------------------------

def _record_and_sleep(seconds, value):
    time.sleep(seconds)
    _received.append(value)
    return value


_received = []


def _received_values():
    return list(_received)


def _scenario_shutdown(rpc, rank, world):
    if rank == 1:
        # calls to rank 0 that are still running when rank 0 reaches shutdown: shutdown waits for them
        futs = [rpc.rpc_async("worker0", _record_and_sleep, args=(0.3, i)) for i in range(3)]
    t0 = time.monotonic()
    rpc.shutdown()  # graceful: returns once every worker's outstanding work is done
    waited = time.monotonic() - t0
    if rank == 1:
        assert [f.wait() for f in futs] == [0, 1, 2]
    try:
        rpc.rpc_sync("worker1", T.add, args=(T.ones(1), 1))
        after = None
    except RuntimeError:
        after = "RuntimeError"
    return {"received": sorted(_received), "waited": waited, "after": after}


_scenario_shutdown.shuts_down = True


@pytest.mark.parametrize("lib", _libs())
def test_graceful_shutdown(lib, tmp_path):
    r = _run("shutdown", 2, lib, tmp_path)
    assert r["received"] == [0, 1, 2]
    assert r["waited"] > 0.2
    assert r["after"] == "RuntimeError"


# ---- one worker, in this process: calls to itself, argument checks -----------------------------------------------

@pytest.fixture
def solo(monkeypatch):
    import strata.distributed.rpc as rpc

    for k in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    rpc.init_rpc("solo", rpc_backend_options=rpc.TensorPipeRpcBackendOptions(num_worker_threads=2, rpc_timeout=20))
    try:
        yield rpc
    finally:
        rpc.shutdown()


def test_solo_calls_and_errors(solo):
    import strata
    import strata.distributed.autograd as dist_autograd

    rpc = solo
    x = strata.arange(4.0)
    assert strata.equal(rpc.rpc_sync("solo", strata.mul, args=(x, 2)), x * 2)
    assert rpc.rpc_sync(0, add_scaled, args=(x, x), kwargs={"scale": 2.0}).tolist() == [0.0, 4.0, 8.0, 12.0]
    r = rpc.remote("solo", Counter, args=(1,))
    assert r.is_owner() and r.rpc_sync().inc(4) == 5 and r.local_value().n == 5
    assert rpc.get_worker_info() == rpc.WorkerInfo("solo", 0)
    with pytest.raises(RuntimeError, match="cannot serialize"):
        rpc.rpc_sync("solo", lambda: 1)
    with pytest.raises(RuntimeError, match="could not find destination name nope"):
        rpc.rpc_async("nope", strata.add, args=(x, x))
    with pytest.raises(TypeError, match="callable"):
        rpc.rpc_sync("solo", 3)
    with pytest.raises(RuntimeError, match="already initialized"):
        rpc.init_rpc("again", rank=0, world_size=1)
    with pytest.raises(RuntimeError, match="only be pickled"):
        pickle.dumps(r)
    with pytest.raises(ZeroDivisionError, match="On WorkerInfo\\(id=0, name=solo\\)"):
        rpc.rpc_sync("solo", divmod, args=(1, 0))
    with pytest.raises(RuntimeError, match="Could not find autograd context"):
        dist_autograd.get_gradients(12345)
    with dist_autograd.context() as ctx:
        with pytest.raises(RuntimeError, match="Already have an autograd context"):
            dist_autograd.context().__enter__()
        w = strata.ones(3, requires_grad=True)
        y = rpc.rpc_sync("solo", strata.mul, args=(w, 3.0))
        with pytest.raises(RuntimeError, match="scalars"):
            dist_autograd.backward(ctx, [y])
        dist_autograd.backward(ctx, [y.sum()])
        assert dist_autograd.get_gradients(ctx)[w].tolist() == [3.0, 3.0, 3.0]
        assert w.grad is None
    assert not dist_autograd._is_valid_context(ctx)


def test_not_initialized_and_options():
    import strata
    import strata.distributed.rpc as rpc
    from strata.distributed.nn.api.remote_module import _parse_remote_device

    with pytest.raises(RuntimeError, match="init_rpc"):
        rpc.rpc_sync("w", strata.add, args=(1, 2))
    with pytest.raises(RuntimeError, match="init_rpc"):
        rpc.shutdown()
    with pytest.raises(ValueError, match="num_worker_threads"):
        rpc.TensorPipeRpcBackendOptions(num_worker_threads=0)
    with pytest.raises(ValueError, match="CPU tensors only"):
        rpc.init_rpc("w", rank=0, world_size=1,
                     rpc_backend_options=rpc.TensorPipeRpcBackendOptions(device_maps={"w1": {"cuda:0": "cuda:1"}}))
    assert _parse_remote_device("trainer/cpu") == ("trainer", "cpu")
    assert _parse_remote_device("rank:2/cpu") == (2, "cpu")
    with pytest.raises(ValueError, match="valid format"):
        _parse_remote_device("worker1")
    with pytest.raises(ValueError, match="CPU tensors only"):
        _parse_remote_device("worker1/cuda:0")
    assert repr(rpc.WorkerInfo("a", 3)) == "WorkerInfo(id=3, name=a)"
    assert rpc.BackendType.TENSORPIPE.name == "TENSORPIPE"


def test_wire_format_keeps_tensors():
    import strata
    from strata.distributed.rpc._agent import _deserialize, _serialize

    x = [strata.ones(3, dtype=strata.bfloat16) * 1.5, strata.arange(6).reshape(2, 3).t(),
         strata.nn.Parameter(strata.randn(2)), strata.tensor(3.0, requires_grad=True), strata.zeros(0, 4),
         strata.tensor([True, False]), strata.randn(2, dtype=strata.complex64)]
    x.append(x[0])
    body, tmeta, buffers, tensors = _serialize({"xs": x})
    assert len(tensors) == 7
    raw = bytearray(b"".join(bytes(memoryview(b)) for b in buffers))
    y = _deserialize(body, tmeta, raw)[0]["xs"]
    assert y[0] is y[-1]
    for a, b in zip(x, y):
        assert (a.dtype, tuple(a.shape), type(a), a.requires_grad) == (b.dtype, tuple(b.shape), type(b),
                                                                        b.requires_grad)
        assert b.grad_fn is None and strata.equal(a.detach(), b.detach())


# ---- a worker that dies: the calls waiting on it fail at once, later calls fail to connect -----------------------

def _scenario_death(rpc, rank, world):
    if rank == 1:
        time.sleep(60)  # until rank 0 makes it exit
        return None
    r = {}
    t0 = time.monotonic()
    for key in ("in_flight", "after"):
        try:
            rpc.rpc_sync("worker1", os._exit, args=(3,)) if key == "in_flight" else \
                rpc.rpc_sync("worker1", T.add, args=(T.ones(1), 1))
            r[key] = None
        except RuntimeError as e:
            r[key] = str(e)
    r["seconds"] = time.monotonic() - t0
    rpc.shutdown(graceful=False)
    return r


_scenario_death.shuts_down = True


def test_dead_worker(tmp_path):
    r = _run("death", 2, "strata", tmp_path, exit_codes=[0, 3])
    assert "lost" in r["in_flight"] and "worker1" in r["in_flight"]
    assert "connect" in r["after"]
    assert r["seconds"] < 20  # not the 60 s timeout
