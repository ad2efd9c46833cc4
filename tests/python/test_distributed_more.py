"""strata.distributed's batch_isend_irecv/P2POp, differentiable collectives (distributed.nn.functional),
checkpoint (DCP) with its state_dict helpers, and the 1-D DeviceMesh. The multi-rank part is one worker script run
on 2 ranks twice through the launcher, once on Strata and once on torch (gloo); the two runs' results (values,
gradients, state dict keys) must agree. DCP's files are Strata's own format, so its round trip is checked on
Strata alone (2 ranks with DDP, and 1 process without a process group)."""

import json
import os

import numpy as np
import pytest

import strata
import strata.distributed as dist
import strata.distributed.checkpoint as dcp
from _ranks import run_worker
from strata.distributed.checkpoint.state_dict import (
    StateDictOptions, get_model_state_dict, get_optimizer_state_dict, get_state_dict, set_model_state_dict,
    set_optimizer_state_dict, set_state_dict)

WORKER = r'''
import importlib, json, os, sys
LIB = os.environ["LIB"]
torch = importlib.import_module(LIB)
dist = importlib.import_module(LIB + ".distributed")
F = importlib.import_module(LIB + ".distributed.nn.functional")
dcp = importlib.import_module(LIB + ".distributed.checkpoint")
sdm = importlib.import_module(LIB + ".distributed.checkpoint.state_dict")
nn = torch.nn
out = {}
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
out["default_backend"] = dist.get_default_backend_for_device("cpu")

# batch_isend_irecv: a ring, sends listed before receives on every rank
send = torch.arange(4, dtype=torch.float32) + 10 * r
recv = torch.zeros(4)
recv64 = torch.zeros(2, dtype=torch.int64)
ops = [dist.P2POp(dist.isend, send, (r + 1) % n), dist.P2POp(dist.irecv, recv, (r - 1) % n),
       dist.P2POp(dist.isend, torch.tensor([r, 7 * r]), group_peer=(r - 1) % n, tag=3),
       dist.P2POp(dist.irecv, recv64, group_peer=(r + 1) % n, tag=3)]
works = dist.batch_isend_irecv(ops)
out["n_works"] = len(works)
for w in works:
    w.wait()
out["ring"] = recv.tolist()
out["ring64"] = recv64.tolist()
try:
    dist.batch_isend_irecv([send])
except ValueError as e:
    out["bad_list"] = "P2POp" in str(e)
try:
    dist.P2POp(dist.all_reduce, send, 0)
except ValueError as e:
    out["bad_op"] = "isend" in str(e)

def leaf(shape, seed):
    k = 1
    for d in shape:
        k *= d
    return (torch.arange(k, dtype=torch.float32) * 0.37 + seed * 0.11).sin().reshape(shape).requires_grad_()

# differentiable collectives: forward values and the gradient of a rank-dependent loss
x = leaf((3,), 100 + r)
y = F.all_reduce(x)
(y * (r + 1) * torch.arange(1.0, 4.0)).sum().backward()
out["all_reduce"] = [y.tolist(), x.grad.tolist(), x.tolist()]
x = leaf((2, 2), 200 + r)
ys = F.all_gather(x)
sum(((k + 1) * (r + 2)) * yk.pow(2).sum() for k, yk in enumerate(ys)).backward()
out["all_gather"] = [[t.tolist() for t in ys], x.grad.tolist()]
x = leaf((3,), 300 + r)
y = F.broadcast(x, src=1)
(y * (r + 3)).sum().backward()
out["broadcast"] = [y.tolist(), x.grad.tolist()]
xs = [leaf((2,), 400 + 10 * r + k) for k in range(n)]
y = F.reduce_scatter(torch.empty(2), xs)
(y * (r + 1) * torch.tensor([1.0, -2.0])).sum().backward()
out["reduce_scatter"] = [y.tolist(), [t.grad.tolist() for t in xs]]
xs = [leaf((3,), 500 + 10 * r + k) for k in range(n)]
ys = F.all_to_all([torch.empty(3) for _ in range(n)], xs)
sum((j + 2) * (r + 1) * yj.sum() for j, yj in enumerate(ys)).backward()
out["all_to_all"] = [[t.tolist() for t in ys], [t.grad.tolist() for t in xs]]
x = leaf((4,), 600 + r)
y = F.all_to_all_single(torch.empty(4), x)
(y * torch.arange(1.0, 5.0) * (r + 1)).sum().backward()
out["all_to_all_single"] = [y.tolist(), x.grad.tolist()]
x = leaf((3,), 700 + r)
y = F.reduce(x, dst=0)
(y * (r + 2)).sum().backward()
out["reduce"] = [y.tolist() if r == 0 else [0.0] * 3, x.grad.tolist()]  # off dst torch leaves what gloo left
x = leaf((2,), 800 + r)
ys = F.gather(x, dst=1)
sum((k + 1) * (r + 1) * yk.sum() for k, yk in enumerate(ys)).backward()
out["gather"] = [t.tolist() for t in ys]
# torch 2.13's gather backward leaves garbage in the gradient on the rank that is not dst (gloo): ours is checked
# against the adjoint instead: rank r's gradient is dst's gradient for slice r, (r + 1) * (dst + 1)
if LIB == "strata":
    assert x.grad.tolist() == [2.0 * (r + 1)] * 2, x.grad
xs = [leaf((2,), 900 + 10 * r + k) for k in range(n)]
y = F.scatter(xs, src=0)
(y * (r + 4)).sum().backward()
out["scatter"] = [y.tolist(), [t.grad.tolist() for t in xs]]
if LIB == "strata":
    for bad in (lambda: F.reduce_scatter(torch.empty(2), [torch.ones(2)]),
                lambda: F.all_to_all([torch.empty(1)], [torch.ones(1)] * n)):
        try:
            bad()
            raise AssertionError("no error")
        except ValueError as e:
            assert "expected" in str(e) or "group of" in str(e), e

# state_dict helpers on a DDP-wrapped model with an Adam that has not stepped yet
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
opt = torch.optim.Adam(model.parameters(), lr=0.1)
msd, osd = sdm.get_state_dict(model, opt)
out["model_keys"] = sorted(msd)
out["optim_state_keys"] = sorted(osd["state"])
out["optim_state_inner"] = sorted(osd["state"]["0.weight"])
out["optim_groups"] = [g["params"] for g in osd["param_groups"]]
out["step_after_init"] = float(osd["state"]["0.weight"]["step"])
full = sdm.get_model_state_dict(model, options=sdm.StateDictOptions(full_state_dict=True, cpu_offload=True))
out["full_offload_keys"] = sorted(full)
res = sdm.set_model_state_dict(model, {k: v for k, v in msd.items() if k != "2.bias"},
                               options=sdm.StateDictOptions(strict=False))
out["missing"] = list(res.missing_keys)

with open(os.path.join(os.environ["OUT"], f"{LIB}{r}.json"), "w") as f:
    json.dump(out, f)

if LIB == "strata":
    # DCP round trip with the process group: train a step, save, scramble, load, compare
    x = torch.randn(5, 3)
    model(x).sum().backward()
    opt.step()
    msd, osd = sdm.get_state_dict(model, opt)
    ck = os.path.join(os.environ["OUT"], "ckpt")
    extra = {"epoch": 3, "rank_only": {"r": r}} if r == 1 else {"epoch": 3}
    dcp.save({"model": msd, "optim": osd, **extra}, checkpoint_id=ck)
    want_m = {k: v.clone() for k, v in msd.items()}
    want_o = {k: {kk: vv.clone() for kk, vv in s.items()} for k, s in osd["state"].items()}
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0).add_(5)
    model.zero_grad(set_to_none=True)  # else get_state_dict leaves opt2 without state, as torch's does
    opt2 = torch.optim.Adam(model.parameters(), lr=0.5)
    msd2, osd2 = sdm.get_state_dict(model, opt2)
    sd2 = {"model": msd2, "optim": osd2, "epoch": 0}
    dcp.load(sd2, checkpoint_id=ck)
    sdm.set_state_dict(model, opt2, model_state_dict=sd2["model"], optim_state_dict=sd2["optim"])
    got_m, got_o = sdm.get_state_dict(model, opt2)
    assert sd2["epoch"] == 3
    for k, v in want_m.items():
        assert torch.equal(got_m[k], v), k
    for k, s in want_o.items():
        for kk, vv in s.items():
            assert torch.equal(torch.as_tensor(got_o["state"][k][kk]), torch.as_tensor(vv)), (k, kk)
    assert opt2.param_groups[0]["lr"] == 0.1
    files = sorted(os.listdir(ck))
    # every key saved once: rank 0 wrote the shared ones, rank 1 its own
    assert files == [".metadata", "__0_0.distcp", "__1_0.distcp"], files
    meta = json.load(open(os.path.join(ck, ".metadata")))
    assert meta["entries"]["rank_only.r"]["file"] == "__1_0.distcp"
    assert meta["entries"]["model.0.weight"]["file"] == "__0_0.distcp"
    full = sdm.get_model_state_dict(model, options=sdm.StateDictOptions(full_state_dict=True, cpu_offload=True))
    assert (len(full) > 0) == (r == 0)
    # 1-D device mesh over the world
    mesh = dist.init_device_mesh("cpu", (n,), mesh_dim_names=("dp",))
    assert mesh.size() == n and mesh.get_rank() == r and mesh.get_local_rank("dp") == r
    t = torch.ones(2) * (r + 1)
    dist.all_reduce(t, group=mesh.get_group())
    assert t.tolist() == [3.0, 3.0], t
    print("STRATA_OK", r, flush=True)
    dist.destroy_process_group()
else:
    sys.stdout.flush()
    os._exit(0)
'''


@pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")
def test_two_ranks_match_torch(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    for lib in ["strata", "torch"]:
        run_worker(tmp_path, WORKER, lib, 2, timeout=180)
    for r in range(2):
        ours = json.load(open(tmp_path / f"strata{r}.json"))
        theirs = json.load(open(tmp_path / f"torch{r}.json"))
        assert ours.keys() == theirs.keys()
        for k in ours:
            a, b = ours[k], theirs[k]
            if k in ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all", "all_to_all_single",
                     "reduce", "gather", "scatter"):
                _close(a, b, k)
            else:
                assert a == b, (k, a, b)


def _close(a, b, what):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (what, a, b)
        for x, y in zip(a, b):
            _close(x, y, what)
    else:
        assert abs(a - b) <= 1e-5 * (1 + abs(b)), (what, a, b)


# ---- one process, no process group ---------------------------------------------------------------------------


def test_default_backend_and_p2p_errors_without_a_group():
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(strata.device("cpu")) == "gloo"
    assert dist.get_default_backend_for_device("cuda") == "nccl"
    with pytest.raises(ValueError, match="Default backend not registered"):
        dist.get_default_backend_for_device("meta")
    with pytest.raises(ValueError, match="isend"):
        dist.P2POp(dist.all_reduce, strata.ones(2), 0)
    with pytest.raises(ValueError, match="P2POp"):
        dist.batch_isend_irecv([strata.ones(2)])
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.P2POp(dist.isend, strata.ones(2), 0)
    with pytest.raises(RuntimeError, match="mesh_dim_names"):
        dist.init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp",))
    assert not dist.is_initialized()


def test_checkpoint_round_trip_without_a_process_group(tmp_path):
    sd = {"a": strata.arange(6, dtype=strata.float32).reshape(2, 3),
          "b": strata.tensor([1.5, -2.25]).to(strata.bfloat16),
          "nested": {"i": strata.tensor([3, -4], dtype=strata.int64), "mask": strata.tensor([True, False]),
                     "list": [strata.ones(2), 7, "text"], "empty": {}},
          "step": 11, "name": "run", "none": None}
    meta = dcp.save(sd, checkpoint_id=tmp_path / "ck")
    assert sorted(os.listdir(tmp_path / "ck")) == [".metadata", "__0_0.distcp"]
    assert meta.state_dict_metadata["nested.list.0"].size == strata.Size([2])
    assert meta.state_dict_metadata["b"].properties.dtype == strata.bfloat16
    assert isinstance(meta.state_dict_metadata["name"], dcp.metadata.BytesStorageMetadata)
    assert meta.state_dict_metadata == dcp.FileSystemReader(tmp_path / "ck").read_metadata().state_dict_metadata
    a_obj = strata.zeros(2, 3)
    tgt = {"a": a_obj, "b": strata.zeros(2, dtype=strata.bfloat16),
           "nested": {"i": strata.zeros(2, dtype=strata.int64), "mask": strata.zeros(2, dtype=strata.bool),
                      "list": [strata.zeros(2), 0, ""], "empty": {}},
           "step": 0, "name": None, "none": 1}
    dcp.load(tgt, storage_reader=dcp.FileSystemReader(str(tmp_path / "ck")))
    assert tgt["a"] is a_obj and strata.equal(a_obj, sd["a"])  # in place
    assert tgt["b"].tolist() == [1.5, -2.25] and tgt["nested"]["i"].tolist() == [3, -4]
    assert tgt["nested"]["mask"].tolist() == [True, False]
    assert tgt["nested"]["list"][0].tolist() == [1.0, 1.0] and tgt["nested"]["list"][1:] == [7, "text"]
    assert tgt["step"] == 11 and tgt["name"] == "run" and tgt["none"] is None and tgt["nested"]["empty"] == {}
    # the older names, and a partial state dict (keys the checkpoint has beyond it are ignored)
    from strata.distributed.checkpoint.state_dict_loader import load_state_dict
    from strata.distributed.checkpoint.state_dict_saver import save_state_dict

    assert save_state_dict is dcp.save_state_dict and load_state_dict is dcp.load_state_dict
    dcp.save_state_dict({"x": strata.full((3,), 2.0)}, dcp.FileSystemWriter(tmp_path / "old"))
    small = {"x": strata.zeros(3)}
    dcp.load_state_dict(small, dcp.FileSystemReader(tmp_path / "old"))
    assert small["x"].tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: y"):
        dcp.load({"x": strata.zeros(3), "y": strata.zeros(1)}, checkpoint_id=tmp_path / "old")
    part = {"x": strata.zeros(3), "y": strata.zeros(1)}
    dcp.load(part, checkpoint_id=tmp_path / "old", planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
    assert part["x"].tolist() == [2.0] * 3 and part["y"].tolist() == [0.0]
    with pytest.raises(RuntimeError, match=r"Size mismatch.*\(3,\).*\(4,\).*x"):
        dcp.load({"x": strata.zeros(4)}, checkpoint_id=tmp_path / "old")
    with pytest.raises(RuntimeError, match="checkpoint_id"):
        dcp.save({"x": strata.zeros(1)})
    with pytest.raises(FileNotFoundError, match="metadata"):
        dcp.load({"x": strata.zeros(1)}, checkpoint_id=tmp_path)
    with pytest.raises(TypeError, match="state_dict must be a dict"):
        dcp.save([strata.zeros(1)], checkpoint_id=tmp_path / "bad")


def _models():
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sm = strata.nn.Sequential(strata.nn.Linear(3, 4), strata.nn.ReLU(), strata.nn.Linear(4, 2))
    with strata.no_grad():
        for (n, p), (_, q) in zip(sm.named_parameters(), tm.named_parameters()):
            p.copy_(strata.tensor(q.detach().numpy()))
    return torch, tm, sm


def test_state_dict_helpers_match_torch_and_round_trip_through_dcp(tmp_path):
    torch, tm, sm = _models()
    import torch.distributed.checkpoint.state_dict as tsd

    topt = torch.optim.Adam(tm.parameters(), lr=0.05)
    sopt = strata.optim.Adam(sm.parameters(), lr=0.05)
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    for _ in range(2):
        topt.zero_grad()
        tm(torch.tensor(x)).pow(2).sum().backward()
        topt.step()
        sopt.zero_grad()
        sm(strata.tensor(x)).pow(2).sum().backward()
        sopt.step()
    tms, tos = tsd.get_state_dict(tm, topt)
    sms, sos = get_state_dict(sm, sopt)
    assert sorted(sms) == sorted(tms)
    for k in tms:
        np.testing.assert_allclose(sms[k].numpy(), tms[k].numpy(), rtol=1e-5, atol=1e-6)
    assert sorted(sos["state"]) == sorted(tos["state"])
    assert [g["params"] for g in sos["param_groups"]] == [g["params"] for g in tos["param_groups"]]
    for k, s in tos["state"].items():
        for kk, v in s.items():
            np.testing.assert_allclose(np.asarray(strata.as_tensor(sos["state"][k][kk]).tolist()),
                                       np.asarray(v.tolist()), rtol=1e-5, atol=1e-6)
    # StateDictOptions
    sm[0].weight.requires_grad_(False)
    assert "0.weight" not in get_model_state_dict(sm, options=StateDictOptions(ignore_frozen_params=True))
    sm[0].weight.requires_grad_(True)
    full = get_model_state_dict(sm, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    assert sorted(full) == sorted(tms)  # no process group: every value (torch does the same)
    with pytest.raises(RuntimeError, match="Missing key"):
        set_model_state_dict(sm, {"0.weight": sms["0.weight"]})
    res = set_model_state_dict(sm, {"0.weight": sms["0.weight"]}, options=StateDictOptions(strict=False))
    assert sorted(res.missing_keys) == ["0.bias", "2.bias", "2.weight"]
    # through DCP into a fresh model and optimizer (whose state is created by get_state_dict)
    dcp.save({"model": sms, "optim": sos}, checkpoint_id=tmp_path / "ck")
    _, _, sm2 = _models()
    sopt2 = strata.optim.Adam(sm2.parameters(), lr=1.0)
    m2, o2 = get_state_dict(sm2, sopt2)
    assert float(strata.as_tensor(o2["state"]["0.weight"]["step"])) == 1.0
    both = {"model": m2, "optim": o2}
    dcp.load(both, checkpoint_id=tmp_path / "ck")
    set_state_dict(sm2, sopt2, model_state_dict=both["model"], optim_state_dict=both["optim"])
    assert sopt2.param_groups[0]["lr"] == 0.05
    for (n, p), (_, q) in zip(sm.named_parameters(), sm2.named_parameters()):
        assert strata.equal(p, q), n
    # one more identical step on both: the optimizer state came back whole
    for m, o in ((sm, sopt), (sm2, sopt2)):
        o.zero_grad()
        m(strata.tensor(x)).pow(2).sum().backward()
        o.step()
    for (n, p), (_, q) in zip(sm.named_parameters(), sm2.named_parameters()):
        assert strata.equal(p, q), n
    set_optimizer_state_dict(sm2, sopt2, get_optimizer_state_dict(sm, sopt))
    with pytest.raises(TypeError, match="optimizers"):
        get_optimizer_state_dict(sm, [])


def test_torch_module_paths_of_ddp_and_the_planners():
    import strata.distributed.checkpoint as dcp
    import strata.nn.parallel as par
    from strata.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
    from strata.nn.parallel.distributed import DistributedDataParallel

    assert DistributedDataParallel is par.DistributedDataParallel
    assert DefaultLoadPlanner is dcp.DefaultLoadPlanner and DefaultSavePlanner is dcp.DefaultSavePlanner


def test_checkpoint_metadata_classes_have_torchs_fields():
    import dataclasses
    from strata.distributed.checkpoint import metadata as ours

    mi = ours.MetadataIndex("layer.weight", [0, 4], index=2)
    assert mi.offset == strata.Size([0, 4]) and mi == ours.MetadataIndex("layer.weight", (0, 4))
    assert hash(mi) == hash(ours.MetadataIndex("layer.weight", (0, 4), index=7))
    props = ours.TensorProperties.create_from_tensor(strata.zeros(2, 3, dtype=strata.float64))
    assert props.dtype == strata.float64 and props.layout == strata.strided and not props.requires_grad
    tsm = ours.TensorStorageMetadata(props, strata.Size([2, 3]),
                                     [ours.ChunkStorageMetadata(strata.Size([0, 0]), strata.Size([2, 3]))])
    m = ours.Metadata({"w": tsm, "step": ours.BytesStorageMetadata()}, storage_meta=ours.StorageMeta("ck"))
    assert m.state_dict_metadata["w"].chunks[0].sizes == strata.Size([2, 3]) and m.version is None
    torch_md = pytest.importorskip("torch.distributed.checkpoint.metadata")
    for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                 "TensorProperties", "MetadataIndex", "StorageMeta"):
        assert [f.name for f in dataclasses.fields(getattr(ours, name))] == \
            [f.name for f in dataclasses.fields(getattr(torch_md, name))], name
