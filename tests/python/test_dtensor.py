"""strata.distributed.tensor (DTensor), the n-D DeviceMesh and FSDP2's fully_shard.

One worker script runs on 4 ranks through the launcher, once on Strata and once on torch (gloo) when torch is
installed: it builds a 2 x 2 mesh ("dp", "tp"), redistributes a 5 x 6 tensor (uneven shards) between every pair of
placements on the 1-D sub-mesh mesh["tp"] and on the 2-D mesh, takes gradients through redistribute/full_tensor,
trains small models with fully_shard (on the world and on mesh["dp"], nested, tied weights, gradient accumulation,
mixed precision) against single-process training, and round-trips their checkpoints (DCP, full state dicts). The two
runs' local shards, full tensors, gradients and mesh coordinates must agree; the training checks are asserted
inside each run. Error messages are checked on Strata's run."""

import json

import numpy as np
import pytest

import strata.distributed as dist
from _ranks import run_worker

WORKER = r'''
import importlib, itertools, json, os
LIB = os.environ["LIB"]
torch = importlib.import_module(LIB)
dist = importlib.import_module(LIB + ".distributed")
dt = importlib.import_module(LIB + ".distributed.tensor")
dm = importlib.import_module(LIB + ".distributed.device_mesh")
fsdp = importlib.import_module(LIB + ".distributed.fsdp")
nn = torch.nn
Shard, Replicate, Partial, DTensor = dt.Shard, dt.Replicate, dt.Partial, dt.DTensor
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
assert n == 4
out = {}
mesh = dm.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
tp, dp = mesh["tp"], mesh["dp"]
out["mesh"] = [mesh.get_coordinate(), mesh.get_local_rank("dp"), mesh.get_local_rank(1), mesh.size(), mesh.size(1),
               tp.get_coordinate(), tp.mesh.tolist(), dp.mesh.tolist(), mesh.mesh.tolist(), list(mesh.shape),
               dist.get_process_group_ranks(mesh.get_group("tp")), dist.get_process_group_ranks(dp.get_group())]
t = torch.tensor([float(r)])
dist.all_reduce(t, group=mesh.get_group("tp"))
out["tp_sum"] = t.tolist()

X = torch.arange(30, dtype=torch.float32).reshape(5, 6) * 0.5 - 3.0
W = torch.cos(torch.arange(30, dtype=torch.float32)).reshape(5, 6)
pl = [Shard(0), Shard(1), Replicate(), Partial()]

def source(m, a):
    """A DTensor of X with placements a (Partial terms built with from_local: weights summing to 1 for "sum",
    averaging 1 for "avg"; X and values below (above) it for "max" ("min"))."""
    base = [Replicate() if isinstance(p, Partial) else p for p in a]
    d = dt.distribute_tensor(X, m, [Replicate()] * m.ndim).redistribute(m, base)
    loc = d.to_local()
    for i, p in enumerate(a):
        if isinstance(p, Partial):
            k, s = m.get_local_rank(i), m.size(i)
            if p.reduce_op == "sum":
                loc = loc * ((k + 1) * 2.0 / (s * (s + 1)))
            elif p.reduce_op == "avg":
                loc = loc * ((k + 1) * 2.0 / (s + 1))
            elif k > 0:
                loc = loc + (k + 1.5) * (1 if p.reduce_op == "min" else -1)
    return DTensor.from_local(loc, m, list(a), shape=X.shape, stride=X.stride())

res, grads = {}, {}
pl1 = pl + [Partial("avg"), Partial("max"), Partial("min")]
for m, combos in ((tp, [(p,) for p in pl1]), (mesh, list(itertools.product(pl, pl)))):
    for a in combos:
        d0 = source(m, a)
        for b in combos:
            if any(isinstance(q, Partial) and q != p for p, q in zip(a, b)):
                continue  # going to Partial is refused, as torch does
            d1 = d0.redistribute(m, list(b))
            key = f"{m.ndim}:{a}->{b}"
            # the full tensor is checked against X on Strata's run (torch's is slow and adds nothing)
            full = d1.full_tensor().tolist() if LIB == "strata" else None
            res[key] = [d1.to_local().tolist(), full, [str(p) for p in d1.placements]]
        if not any(isinstance(p, Partial) for p in a):
            leaf = dt.distribute_tensor(X, m, list(a)).requires_grad_()
            for b in combos[:3]:
                leaf.grad = None
                (leaf.redistribute(m, list(b)).full_tensor() * W).sum().backward()
                grads[f"{m.ndim}:{a}->{b}"] = leaf.grad.to_local().tolist()
out["res"], out["grads"] = res, grads

# from_local(run_check=True) makes Replicate shards equal (rank tp-0's values)
d = DTensor.from_local(torch.full((2,), float(r)), tp, [Replicate()], run_check=True)
out["run_check"] = d.to_local().tolist()
# distribute_module: every parameter replicated
lin = dt.distribute_module(nn.Linear(3, 2), tp)
out["distribute_module"] = [type(p).__name__ for p in lin.parameters()] + [
    [str(x) for x in p.placements] for p in lin.parameters()]
out["state_dict"] = {k: type(v).__name__ for k, v in lin.state_dict().items()}
import copy
out["deepcopy"] = [[type(p).__name__, [str(x) for x in p.placements], p.is_leaf]
                  for p in copy.deepcopy(lin).parameters()]
prm = nn.Parameter(dt.distribute_tensor(X, tp, [Shard(0)]))
out["param"] = [type(prm).__name__, prm.requires_grad, prm.is_leaf, [str(x) for x in prm.placements]]

# fully_shard on the world and on mesh["dp"] (two independent FSDP groups of 2), SGD and Adam
def make(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3), nn.Linear(3, 2))
XS = torch.sin(torch.arange(8 * 5.0).reshape(8, 5))
YS = torch.cos(torch.arange(8 * 2.0).reshape(8, 2))
for fmesh, opt, raf in ((None, "sgd", True), (dp, "adam", False), (None, "adam", True)):
    ref, model = make(), make()
    for layer in (model[0], model[2]):
        fsdp.fully_shard(layer, mesh=fmesh, reshard_after_forward=raf)
    fsdp.fully_shard(model, mesh=fmesh, reshard_after_forward=raf)
    assert isinstance(model, fsdp.FSDPModule) and isinstance(model, nn.Sequential)
    assert type(model).__name__ == "FSDPSequential", type(model).__name__
    world, me = (n, r) if fmesh is None else (2, dp.get_local_rank())
    per = 8 // world
    mk = (lambda ps: torch.optim.SGD(ps, lr=0.1)) if opt == "sgd" else (lambda ps: torch.optim.Adam(ps, lr=0.05))
    o1, o2 = mk(ref.parameters()), mk(model.parameters())
    for step in range(3):
        xs = XS * (step + 1)
        l1 = ((ref(xs) - YS) ** 2).mean()
        l2 = ((model(xs[me * per:(me + 1) * per]) - YS[me * per:(me + 1) * per]) ** 2).mean()
        o1.zero_grad(); o2.zero_grad(); l1.backward(); l2.backward()
        n1 = nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        n2 = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        assert abs(n1.item() - n2.item()) < 1e-5, (n1, n2)
        for (name, p1), p2 in zip(ref.named_parameters(), model.parameters()):
            assert isinstance(p2, DTensor) and isinstance(p2.grad, DTensor), name
            assert p2.placements == (Shard(0),), p2.placements
            assert (p1.grad - p2.grad.full_tensor()).abs().max().item() < 1e-5, name
        o1.step(); o2.step()
    for (name, p1), p2 in zip(ref.named_parameters(), model.parameters()):
        assert (p1 - p2.full_tensor()).abs().max().item() < 1e-5, name
    assert all(isinstance(v, DTensor) for v in model.state_dict().values())

# gradient accumulation: no sync on the first micro-batch, one reduce-scatter on the second
ref, model = make(), fsdp.fully_shard(make())
for k in range(2):
    model.set_requires_gradient_sync(k == 1)
    xs, ys = XS[k * 4:(k + 1) * 4], YS[k * 4:(k + 1) * 4]
    ((ref(xs) - ys) ** 2).sum().backward()
    ((model(xs[r:r + 1]) - ys[r:r + 1]) ** 2).sum().mul(n).backward()
    if k == 0:
        assert all(p.grad is None for p in model.parameters())
for p1, p2 in zip(ref.parameters(), model.parameters()):
    assert (p1.grad - p2.grad.full_tensor()).abs().max().item() < 1e-4
# tied weights (an embedding and an output layer sharing one parameter): one shard, gradients of both uses
def tied():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 4), nn.Linear(4, 6, bias=False))
    m[2].weight = m[0].weight
    return m
ref, model = tied(), fsdp.fully_shard(tied())
assert model[2].weight is model[0].weight and len(list(model.parameters())) == 3
IDS = torch.tensor([[1, 2, 3], [4, 5, 0], [2, 2, 1], [0, 3, 5]])
o1, o2 = torch.optim.Adam(ref.parameters(), lr=0.1), torch.optim.Adam(model.parameters(), lr=0.1)
for step in range(2):
    l1, l2 = ref(IDS).pow(2).mean(), model(IDS[r:r + 1]).pow(2).mean()
    o1.zero_grad(); o2.zero_grad(); l1.backward(); l2.backward()
    for p1, p2 in zip(ref.parameters(), model.parameters()):
        assert (p1.grad - p2.grad.full_tensor()).abs().max().item() < 1e-5
    o1.step(); o2.step()
# another method than forward, registered to gather the parameters
class WithMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)
    def forward(self, x):
        return self.lin(x)
    def encode(self, x):
        return self.lin(x) * 2
torch.manual_seed(0)
wm = WithMethod()
want = wm.encode(XS).detach()
fsdp.fully_shard(wm)
fsdp.register_fsdp_forward_method(wm, "encode")
assert (wm.encode(XS) - want).abs().max().item() < 1e-6
# the root module keeps its gathered parameters after forward by default (reshard_after_forward=None)
assert not isinstance(wm.lin.weight, DTensor)
wm.reshard()
assert isinstance(wm.lin.weight, DTensor)
# explicit unshard/reshard, mixed precision
model = fsdp.fully_shard(make(), mp_policy=fsdp.MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                                     reduce_dtype=torch.float32))
model.unshard()
assert not any(isinstance(p, DTensor) for p in model.parameters())
model.reshard()
assert all(isinstance(p, DTensor) for p in model.parameters())
y = model(XS)
assert y.dtype == torch.bfloat16, y.dtype
y.float().sum().backward()
assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())

# checkpoints of a sharded model and its Adam state: DCP round trip into a differently initialised model,
# and full state dicts
dcp = importlib.import_module(LIB + ".distributed.checkpoint")
sdm = importlib.import_module(LIB + ".distributed.checkpoint.state_dict")
def fsdp_adam(seed):
    model = make(seed)
    fsdp.fully_shard(model[0]); fsdp.fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    ((model(XS[r * 2:r * 2 + 2]) - YS[r * 2:r * 2 + 2]) ** 2).sum().backward()
    opt.step(); opt.zero_grad()
    return model, opt
def snapshot(model, opt):
    osd = sdm.get_optimizer_state_dict(model, opt)
    return ([p.full_tensor() for p in model.parameters()],
            [osd["state"][k]["exp_avg_sq"].full_tensor() for k in sorted(osd["state"])])
model, opt = fsdp_adam(0)
want = snapshot(model, opt)
msd, osd = sdm.get_state_dict(model, opt)
ck = os.path.join(os.environ["OUT"], "ck_" + LIB)
dcp.save({"model": msd, "optim": osd}, checkpoint_id=ck)
model2, opt2 = fsdp_adam(1)
assert (snapshot(model2, opt2)[0][0] - want[0][0]).abs().max().item() > 1e-3
msd2, osd2 = sdm.get_state_dict(model2, opt2)
dcp.load({"model": msd2, "optim": osd2}, checkpoint_id=ck)
sdm.set_state_dict(model2, opt2, model_state_dict=msd2, optim_state_dict=osd2)
got = snapshot(model2, opt2)
for a, b in zip(want[0] + want[1], got[0] + got[1]):
    assert (a - b).abs().max().item() < 1e-6
full = sdm.get_model_state_dict(model, options=sdm.StateDictOptions(full_state_dict=True))
assert all(type(v).__name__ != "DTensor" for v in full.values())
for (k, v), p in zip(full.items(), model.parameters()):
    assert (v - p.full_tensor()).abs().max().item() == 0, k
model3 = fsdp.fully_shard(make(2))
sdm.set_model_state_dict(model3, full, options=sdm.StateDictOptions(full_state_dict=True))
for p, q in zip(model.parameters(), model3.parameters()):
    assert (p.full_tensor() - q.full_tensor()).abs().max().item() == 0

if LIB == "strata":
    def raises(exc, words, fn):
        try:
            fn()
        except exc as e:
            assert all(w in str(e) for w in words), (words, str(e))
        else:
            raise AssertionError(f"no {exc.__name__} for {words}")
    raises(ValueError, ["2 dimensions"], lambda: dt.distribute_tensor(X, mesh, [Shard(0)]))
    raises(IndexError, ["Shard(dim=2)", "2 dimensions"], lambda: dt.distribute_tensor(X, tp, [Shard(2)]))
    raises(RuntimeError, ["Partial", "not allowed"],
           lambda: dt.distribute_tensor(X, tp, [Shard(0)]).redistribute(tp, [Partial()]))
    raises(RuntimeError, ["2 dimensions", "mesh_dim"], lambda: mesh.get_group())
    raises(KeyError, ["'pp'"], lambda: mesh["pp"])
    raises(TypeError, ["distribute_tensor"], lambda: DTensor(X))
    raises(ValueError, ["reduce_op"], lambda: Partial("mean"))
    raises(ValueError, ["rank 1 has", "expected"],
           lambda: DTensor.from_local(torch.zeros(2 + (tp.get_local_rank() == 1)), tp, [Shard(0)], shape=(4,),
                                      run_check=True))
    raises(NotImplementedError, ["1-D mesh"], lambda: fsdp.fully_shard(make(), mesh=mesh))
    raises(ValueError, ["already sharded"], lambda: fsdp.fully_shard(fsdp.fully_shard(make())))
    raises(RuntimeError, ["holds 6 ranks", "world has 4"], lambda: dm.init_device_mesh("cpu", (2, 3)))
json.dump(out, open(os.path.join(os.environ["OUT"], f"{LIB}{r}.json"), "w"))
print("DONE", r, flush=True)
os._exit(0)
'''


def _run(tmp_path, lib, nproc):
    run_worker(tmp_path, WORKER, lib, nproc)
    return [json.load(open(tmp_path / f"{lib}{r}.json")) for r in range(nproc)]


def _close(a, b, what):
    x, y = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    assert x.shape == y.shape and np.allclose(x, y, atol=1e-5), (what, a, b)


@pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")
def test_dtensor_mesh_fsdp_on_4_ranks_match_torch(tmp_path):
    ours = _run(tmp_path, "strata", 4)
    for r, o in enumerate(ours):  # what the mesh must say, independently of torch
        dpr, tpr = divmod(r, 2)
        assert o["mesh"][:5] == [[dpr, tpr], dpr, tpr, 4, 2]
        assert o["mesh"][10] == [2 * dpr, 2 * dpr + 1] and o["mesh"][11] == [tpr, tpr + 2]
        assert o["tp_sum"] == [float(4 * dpr + 1)]
        assert o["run_check"] == [float(2 * dpr)] * 2
        full = (np.arange(30).reshape(5, 6) * 0.5 - 3.0).tolist()
        for k, (local, got_full, _) in o["res"].items():
            _close(got_full, full, k)
    assert len(ours[0]["res"]) == 25 + 169
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    theirs = _run(tmp_path, "torch", 4)
    for o, t in zip(ours, theirs):
        assert o.keys() == t.keys()
        assert o["mesh"] == t["mesh"] and o["distribute_module"] == t["distribute_module"]
        assert o["res"].keys() == t["res"].keys() and o["grads"].keys() == t["grads"].keys()
        for k in o["res"]:
            _close(o["res"][k][0], t["res"][k][0], k)
            assert o["res"][k][2] == t["res"][k][2], k
        for k in o["grads"]:
            _close(o["grads"][k], t["grads"][k], k)
        assert o["run_check"] == t["run_check"] and o["tp_sum"] == t["tp_sum"]
        for k in ("state_dict", "deepcopy", "param"):
            assert o[k] == t[k], (k, o[k], t[k])
