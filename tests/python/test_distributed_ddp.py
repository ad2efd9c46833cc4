"""DistributedDataParallel on 2 ranks through the launcher: training with the global batch split across the
ranks gives the parameters of one process training on the whole batch (several steps, several buckets, with and
without no_sync accumulation, an unused parameter); DistributedSampler takes its defaults from the group."""

import os
import subprocess
import sys
import textwrap

import pytest

import strata.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")

DDP = r'''
import copy, strata, strata.distributed as dist, strata.nn as nn, strata.nn.functional as F
from strata.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()

class Net(nn.Module):  # the digits classifier's shape: 64 pixels -> 10 classes, plus a parameter never used
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 32), nn.Linear(32, 32), nn.Linear(32, 10)
        self.unused = nn.Linear(3, 3)
        self.register_buffer("calls", strata.zeros(1))
    def forward(self, x):
        self.calls += 1
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

strata.manual_seed(100 + r)          # different initial weights per rank: DDP broadcasts rank 0's
model = Net()
strata.manual_seed(100)
reference = Net()                    # rank 0's initial weights, trained on the whole batch in this process
gen = strata.Generator().manual_seed(7)
steps = [(strata.randn(16, 64, generator=gen), strata.randint(0, 10, (16,), generator=gen)) for _ in range(6)]

def train(net, batches, accumulate, split):
    opt = strata.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for i in range(0, len(batches), accumulate):
        opt.zero_grad()
        for j, (x, y) in enumerate(batches[i:i + accumulate]):
            if split:
                x, y = x.chunk(n)[r], y.chunk(n)[r]
            last = j == accumulate - 1
            ctx = net.no_sync() if (split and not last) else __import__("contextlib").nullcontext()
            with ctx:
                F.cross_entropy(net(x), y).backward()
        opt.step()

for accumulate, bucket_mb in ((1, 0.002), (2, 25), (3, 0.004)):
    m, ref = copy.deepcopy(model), copy.deepcopy(reference)
    ddp = DDP(m, bucket_cap_mb=bucket_mb, find_unused_parameters=True)
    assert len(ddp._buckets) > 1 or bucket_mb == 25
    for p, q in zip(m.parameters(), ref.parameters()):
        assert strata.equal(p, q), "parameters were not broadcast from rank 0"
    train(ddp, steps, accumulate, split=True)
    train(ref, steps, accumulate, split=False)
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        if name.startswith("unused"):
            continue
        assert strata.allclose(p, q, rtol=1e-4, atol=1e-5), (accumulate, name, (p - q).abs().max().item())
    assert sorted(ddp.state_dict()) == sorted("module." + k for k in m.state_dict())

# DistributedSampler: defaults from the process group, disjoint shares covering the data set
s = strata.utils.data.DistributedSampler(range(10), shuffle=True, seed=3)
s.set_epoch(2)
mine = list(s)
shares = [None] * n
dist.all_gather_object(shares, mine)
assert sorted(sum(shares, [])) == list(range(10)) and len(mine) == 5
print("OK", r, flush=True)
'''


@pytest.mark.parametrize("mpi_runtime", [False, True])
def test_ddp_matches_single_process_training(tmp_path, mpi_runtime):
    script = tmp_path / "ddp.py"
    script.write_text(textwrap.dedent(DDP))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node", "2",
                        *(["--mpi-runtime"] if mpi_runtime else []), str(script)], capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("OK") == 2, p.stdout


ZERO = r'''
import copy, strata, strata.distributed as dist, strata.nn as nn, strata.nn.functional as F
from strata.nn.parallel import DistributedDataParallel as DDP
from strata.distributed.optim import ZeroRedundancyOptimizer
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
strata.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
ref = copy.deepcopy(model)
ddp = DDP(model)
zero = ZeroRedundancyOptimizer(ddp.parameters(), strata.optim.Adam, lr=0.01)
opt = strata.optim.Adam(ref.parameters(), lr=0.01)
owned = sum(p.numel() for p in model.parameters() if zero._owner[id(p)] == r)
assert 0 < owned < sum(p.numel() for p in model.parameters())   # the state is sharded
gen = strata.Generator().manual_seed(1)
for step in range(4):
    x, y = strata.randn(8, 8, generator=gen), strata.randn(8, 4, generator=gen)
    zero.zero_grad(); F.mse_loss(ddp(x.chunk(n)[r]), y.chunk(n)[r]).backward(); zero.step()
    opt.zero_grad(); F.mse_loss(ref(x), y).backward(); opt.step()
for p, q in zip(model.parameters(), ref.parameters()):
    assert strata.allclose(p, q, rtol=1e-4, atol=1e-6), (p - q).abs().max().item()
zero.consolidate_state_dict(to=0)
if r == 0:
    sd, rsd = zero.state_dict(), opt.state_dict()
    assert sorted(sd["state"]) == sorted(rsd["state"])
    for k in rsd["state"]:
        assert strata.allclose(sd["state"][k]["exp_avg"], rsd["state"][k]["exp_avg"], atol=1e-6)
print("OK", flush=True)
'''


def test_zero_redundancy_optimizer_matches_adam(tmp_path):
    script = tmp_path / "zero.py"
    script.write_text(textwrap.dedent(ZERO))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(script)], capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("OK") == 2, p.stdout


TORCH_SCRIPT = r'''
import torch, torch.distributed as dist, torch.nn as nn, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sampler = DistributedSampler(data, shuffle=True, seed=1)
loader = DataLoader(data, batch_size=8, sampler=sampler)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for x, y in loader:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
if rank == 0:
    print("PARAMS", [round(v, 5) for p in model.parameters() for v in p.detach().reshape(-1).tolist()[:4]],
          flush=True)
dist.destroy_process_group()
'''


def test_a_torch_ddp_script_runs_unchanged_and_matches_torch(tmp_path):
    """The same torch DDP script (DistributedSampler, DataLoader, SGD) through the launcher: on Strata (via
    strata.torch_alias) and on torch itself (gloo); the trained parameters agree."""
    script = tmp_path / "train.py"
    script.write_text(TORCH_SCRIPT)
    # The reference run on torch itself ends through os._exit after the script: torch 2.13 with gloo aborts
    # in its own teardown at interpreter exit now and then ("terminate called without an active exception",
    # 3 of 8 runs here), after the script has finished and printed its parameters. Strata's run is the script
    # unchanged, exit included.
    reference = tmp_path / "reference.py"
    reference.write_text(f"import os, runpy, sys\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
                         "sys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), OMP_NUM_THREADS="1")
    out = []
    for run in (["-m", "strata.torch_alias", str(script)], [str(reference)]):
        p = subprocess.run([sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node", "2",
                            *run], capture_output=True, text=True, timeout=180, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("PARAMS")]
        assert line, p.stdout
        out.append(eval(line[0][len("PARAMS"):]))
    ours, theirs = out
    assert len(ours) == len(theirs) > 0
    assert max(abs(a - b) for a, b in zip(ours, theirs)) < 1e-4, (ours, theirs)
