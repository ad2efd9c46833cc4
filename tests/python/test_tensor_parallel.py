"""strata.distributed.tensor.parallel: parallelize_module with ColwiseParallel / RowwiseParallel /
SequenceParallel / PrepareModuleInput on Linear, Embedding and LayerNorm.

One worker script runs through the launcher: on 2 ranks (a 1-D "tp" mesh over the world) and on 4 ranks (a 2 x 2
("dp", "tp") mesh: tensor parallelism on mesh["tp"], data parallelism by all-reducing gradients over mesh["dp"]).
Each run trains a small embedding + LayerNorm + 3-Linear model for 4 SGD and 4 Adam steps, with and without
sequence parallelism, and asserts that outputs, gradients and parameters equal single-process training on the
whole batch; on 4 ranks also with fully_shard over mesh["dp"] on top of the tensor parallelism (2-D), where
clip_grad_norm_'s total norm must match too. The 4-rank worker also runs on torch (gloo) when torch is installed: the same script, the same
assertions against torch's own single-process training."""


import pytest

import strata.distributed as dist
from _ranks import run_worker

WORKER = r'''
import importlib, os
LIB = os.environ["LIB"]
torch = importlib.import_module(LIB)
dist = importlib.import_module(LIB + ".distributed")
dt = importlib.import_module(LIB + ".distributed.tensor")
dm = importlib.import_module(LIB + ".distributed.device_mesh")
tpar = importlib.import_module(LIB + ".distributed.tensor.parallel")
nn = torch.nn
DTensor, Shard, Replicate = dt.DTensor, dt.Shard, dt.Replicate
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
if n == 2:
    tp_mesh, dp_group, dp_size, dp_rank = dm.init_device_mesh("cpu", (2,), mesh_dim_names=("tp",)), None, 1, 0
else:
    mesh = dm.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    tp_mesh = mesh["tp"]
    dp_group, dp_size, dp_rank = mesh.get_group("dp"), 2, mesh.get_local_rank("dp")

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.norm = nn.LayerNorm(8)
        self.up = nn.Linear(8, 6)
        self.down = nn.Linear(6, 8)
        self.head = nn.Linear(8, 4, bias=False)
    def forward(self, ids):
        h = self.norm(self.emb(ids))
        if isinstance(h, DTensor):
            h = h.to_local()
        return self.head(self.down(torch.relu(self.up(h))))

def make():
    torch.manual_seed(0)
    return Net()

IDS = torch.tensor([[1, 5, 10, 3], [0, 7, 7, 2], [4, 4, 9, 6], [8, 2, 1, 0]])
per = 4 // dp_size

def parallelize(model, sp):
    if sp:
        plan = {"emb": tpar.RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
                "norm": tpar.SequenceParallel(),
                "up": tpar.ColwiseParallel(input_layouts=Shard(1)),
                "down": tpar.RowwiseParallel(),
                "head": tpar.ColwiseParallel(output_layouts=Replicate())}
    else:
        plan = {"emb": tpar.ColwiseParallel(output_layouts=Replicate()),
                "up": tpar.ColwiseParallel(), "down": tpar.RowwiseParallel(output_layouts=Shard(-1)),
                "head": tpar.RowwiseParallel()}
    tpar.parallelize_module(model, tp_mesh, plan)
    if not sp:
        tpar.parallelize_module(model, tp_mesh, {"norm": tpar.PrepareModuleInput(
            input_layouts=Replicate(), desired_input_layouts=Replicate(), use_local_output=True)})

def train(ref, model, opt, steps, manual_dp, sp):
    if opt == "sgd":
        o1, o2 = torch.optim.SGD(ref.parameters(), lr=0.1), torch.optim.SGD(model.parameters(), lr=0.1)
    else:
        o1, o2 = torch.optim.Adam(ref.parameters(), lr=0.05), torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(steps):
        tgt = torch.sin(torch.arange(64.0).reshape(4, 4, 4) + step)
        y1 = ref(IDS)
        l1 = ((y1 - tgt) ** 2).mean()
        mine = slice(dp_rank * per, (dp_rank + 1) * per)
        y2 = model(IDS[mine])
        l2 = ((y2 - tgt[mine]) ** 2).mean()
        o1.zero_grad(); o2.zero_grad(); l1.backward(); l2.backward()
        if manual_dp and dp_group is not None:  # data parallelism over mesh["dp"]: average the local gradients
            for p in model.parameters():
                g = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
                dist.all_reduce(g, group=dp_group)
                g.div_(dp_size)
        assert (y1[mine] - y2).abs().max().item() < 1e-5, (opt, sp, step)
        # under FSDP every parameter is a DTensor; torch refuses DTensors on different meshes (mesh["dp"] for the
        # LayerNorm that tensor parallelism left alone, the 2-D mesh for the others): Strata reduces each on its own
        if not manual_dp and (sp or LIB == "strata"):
            n1 = nn.utils.clip_grad_norm_(ref.parameters(), 1e9)
            n2 = nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            assert abs(n1.item() - n2.item()) < 1e-5, (n1, n2)
        for (name, p1), p2 in zip(ref.named_parameters(), model.parameters()):
            g2 = p2.grad.full_tensor() if isinstance(p2.grad, DTensor) else p2.grad
            assert (p1.grad - g2).abs().max().item() < 1e-5, (opt, sp, step, name)
        o1.step(); o2.step()
    for (name, p1), p2 in zip(ref.named_parameters(), model.parameters()):
        full = p2.full_tensor() if isinstance(p2, DTensor) else p2
        assert (p1 - full).abs().max().item() < 1e-5, (opt, sp, name)

for opt in ("sgd", "adam"):
    for sp in (False, True):
        ref, model = make(), make()
        parallelize(model, sp)
        train(ref, model, opt, 4, True, sp)
        placements = {name: (p.placements if isinstance(p, DTensor) else None) for name, p in model.named_parameters()}
        if sp:
            assert placements["emb.weight"] == (Shard(0),) and placements["norm.weight"] == (Replicate(),)
        else:
            assert placements["emb.weight"] == (Shard(1),) and placements["norm.weight"] is None
            assert placements["head.weight"] == (Shard(1),) and placements["down.bias"] == (Replicate(),)
        assert placements["up.weight"] == (Shard(0),) and placements["up.bias"] == (Shard(0),)

if n == 4:  # FSDP over mesh["dp"] on top of TP over mesh["tp"] (2-D parallelism)
    fsdp = importlib.import_module(LIB + ".distributed.fsdp")
    for sp in (False, True):
        ref, model = make(), make()
        parallelize(model, sp)
        fsdp.fully_shard(model.up, mesh=mesh["dp"])
        fsdp.fully_shard(model, mesh=mesh["dp"])
        w = model.up.weight
        assert w.device_mesh == mesh and type(w.placements[0]).__name__ == "_StridedShard", w.placements
        assert w.placements[1] == Shard(0) and model.down.weight.placements == (Shard(0), Shard(1))
        train(ref, model, "adam", 3, False, sp)
        # the gradient through full_tensor() of a parameter sharded on dim 0 twice (strided) lands in the right rows
        w = model.up.weight
        w.grad = None
        shape = tuple(w.full_tensor().shape)
        W = torch.cos(torch.arange(shape[0] * shape[1], dtype=torch.float32)).reshape(shape)
        (w.full_tensor() * W).sum().backward()
        assert (w.grad.full_tensor() - W).abs().max().item() < 1e-6

# loss_parallel: cross-entropy on vocabulary-sharded logits (a Colwise head with use_local_output=False)
torch.manual_seed(3)
ref = nn.Linear(8, 6)
head = nn.Linear(8, 6)
head.load_state_dict(ref.state_dict())
tpar.parallelize_module(head, tp_mesh, tpar.ColwiseParallel(use_local_output=False))
H = torch.sin(torch.arange(64.0)).reshape(2, 4, 8)
labels = torch.tensor([[0, 5, 2, 3], [4, -100, 1, 5]])
for red in ("mean", "sum"):
    ref.zero_grad(); head.zero_grad()
    l1 = nn.functional.cross_entropy(ref(H).flatten(0, 1), labels.flatten(0, 1), reduction=red)
    with tpar.loss_parallel():
        pred = head(H)
        assert isinstance(pred, DTensor) and pred.placements == (Shard(2),)
        l2 = nn.functional.cross_entropy(pred.flatten(0, 1), labels.flatten(0, 1), reduction=red)
        l2.backward()
    l1.backward()
    v2 = l2.full_tensor() if isinstance(l2, DTensor) else l2
    assert abs(l1.item() - v2.item()) < 1e-5, (red, l1, v2)
    for p1, p2 in zip(ref.parameters(), head.parameters()):
        assert (p1.grad - p2.grad.full_tensor()).abs().max().item() < 1e-5, red

if n == 4 and LIB == "strata":  # DistributedDataParallel over mesh["dp"] of a tensor-parallel model
    ref, model = make(), make()
    parallelize(model, False)
    ddp = nn.parallel.DistributedDataParallel(model, process_group=mesh.get_group("dp"))
    o1, o2 = torch.optim.SGD(ref.parameters(), lr=0.1), torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(2):
        tgt = torch.sin(torch.arange(64.0).reshape(4, 4, 4) + step)
        mine = slice(dp_rank * per, (dp_rank + 1) * per)
        l1, l2 = ((ref(IDS) - tgt) ** 2).mean(), ((ddp(IDS[mine]) - tgt[mine]) ** 2).mean()
        o1.zero_grad(); o2.zero_grad(); l1.backward(); l2.backward()
        for p1, p2 in zip(ref.parameters(), model.parameters()):
            g2 = p2.grad.full_tensor() if isinstance(p2.grad, DTensor) else p2.grad
            assert (p1.grad - g2).abs().max().item() < 1e-5, step
        o1.step(); o2.step()

if LIB == "strata":
    def raises(exc, words, fn):
        try:
            fn()
        except exc as e:
            assert all(w in str(e) for w in words), (words, str(e))
        else:
            raise AssertionError(f"no {exc.__name__} for {words}")
    raises(NotImplementedError, ["ColwiseParallel", "Conv1d"],
           lambda: tpar.parallelize_module(nn.Conv1d(2, 2, 1), tp_mesh, tpar.ColwiseParallel()))
    raises(ValueError, ["matches no submodule", "'nope'"],
           lambda: tpar.parallelize_module(make(), tp_mesh, {"nope": tpar.ColwiseParallel()}))
    if n == 4:
        raises(ValueError, ["1-D mesh", "mesh['tp']"], lambda: tpar.parallelize_module(make(), mesh, {}))
    def lp_weight():
        with tpar.loss_parallel():
            nn.functional.cross_entropy(head(H).flatten(0, 1), labels.flatten(0, 1), weight=torch.ones(6))
    raises(NotImplementedError, ["loss_parallel", "weight"], lp_weight)
    assert nn.functional.cross_entropy.__name__ == "cross_entropy" and "loss_parallel" not in str(
        nn.functional.cross_entropy.__qualname__)
    raises(ValueError, ["token ids", "Replicate"],
           lambda: tpar.parallelize_module(nn.Embedding(4, 2), tp_mesh, tpar.RowwiseParallel()))
print("DONE", r, flush=True)
os._exit(0)
'''


def _run(tmp_path, lib, nproc):
    p = run_worker(tmp_path, WORKER, lib, nproc)
    assert p.stdout.count("DONE") == nproc, p.stdout


@pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")
def test_tensor_parallel_mlp_on_2_ranks_equals_single_process(tmp_path):
    _run(tmp_path, "strata", 2)


@pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")
def test_dp_by_tp_mesh_on_4_ranks_equals_single_process_on_strata_and_torch(tmp_path):
    _run(tmp_path, "strata", 4)
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    _run(tmp_path, "torch", 4)
