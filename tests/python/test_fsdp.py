"""FullyShardedDataParallel (strata.distributed.fsdp) on 2 ranks through the launcher.

WORKER trains an MLP and a small transformer-style model with FSDP (every sharding strategy, with and without
auto-wrap policies, use_orig_params, mixed precision, no_sync accumulation) on the global batch split across the
ranks, and checks against one process training the unwrapped model on the whole batch: parameters, global
gradient norms from clip_grad_norm_, full/local/sharded state dicts and their round trips, optimizer state dicts
and their reload, summon_full_params, enable_wrap/wrap, and the errors for bad input. TORCH_SCRIPT is a torch
FSDP script run unchanged on Strata (strata.torch_alias) and on torch itself with gloo; results are compared."""

import pytest

import strata.distributed as dist
from _ranks import launch

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="Open MPI is not installed")


WORKER = r'''
import copy, math, contextlib, strata, strata.distributed as dist, strata.nn as nn, strata.nn.functional as F
from strata.distributed.fsdp import (FullyShardedDataParallel as FSDP, ShardingStrategy, MixedPrecision,
    StateDictType, FullStateDictConfig, ShardedStateDictConfig, FullOptimStateDictConfig, CPUOffload, BackwardPrefetch)
from strata.distributed.fsdp.wrap import (transformer_auto_wrap_policy, size_based_auto_wrap_policy,
    lambda_auto_wrap_policy, ModuleWrapPolicy, wrap, enable_wrap)
import functools
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()

class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        a = F.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1) @ v
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 4)
    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x).mean(1)

def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 33), nn.Tanh(), nn.Linear(33, 4))

def batches(kind, steps, seed=3):
    g = strata.Generator().manual_seed(seed)
    shape = (8, 16) if kind == "mlp" else (8, 5, 8)
    return [(strata.randn(*shape, generator=g), strata.randn(8, 4, generator=g)) for _ in range(steps)]

def make(kind, seed=0):
    strata.manual_seed(seed)
    return mlp() if kind == "mlp" else Net()

def train(model, data, split, opt, clip=None, accumulate=1, no_sync=None):
    norms = []
    for i in range(0, len(data), accumulate):
        opt.zero_grad()
        for j, (x, y) in enumerate(data[i:i + accumulate]):
            if split:
                x, y = x.chunk(n)[r], y.chunk(n)[r]
            ctx = no_sync() if (no_sync and j < accumulate - 1) else contextlib.nullcontext()
            with ctx:
                out = model(x)
                F.mse_loss(out.float(), y).backward()
        if clip is not None:
            norms.append(float(clip(model)))
        opt.step()
    return norms

def close(a, b, atol, what):
    assert tuple(a.shape) == tuple(b.shape), (what, a.shape, b.shape)
    d = (a.float() - b.float()).abs().max().item() if a.numel() else 0.0
    assert d <= atol, (what, d)

def check_full(f, ref, atol, what):
    sd, rsd = f.state_dict(), ref.state_dict()
    assert list(sd) == list(rsd), (what, list(sd), list(rsd))
    for k in rsd:
        close(sd[k], rsd[k], atol, (what, k))

S = ShardingStrategy
wrap_block = ModuleWrapPolicy({Block})
cases = [("mlp", S.FULL_SHARD, None, False), ("mlp", S.SHARD_GRAD_OP, None, False), ("mlp", S.NO_SHARD, None, False),
         ("mlp", S.HYBRID_SHARD, None, False), ("mlp", S._HYBRID_SHARD_ZERO2, None, True),
         ("mlp", S.FULL_SHARD, functools.partial(size_based_auto_wrap_policy, min_num_params=500), False),
         ("mlp", S.FULL_SHARD, functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda m: isinstance(m, nn.Linear)), True),
         ("net", S.FULL_SHARD, functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block}), False),
         ("net", S.SHARD_GRAD_OP, wrap_block, True), ("net", S.NO_SHARD, wrap_block, False),
         ("net", S.FULL_SHARD, None, True), ("net", S.HYBRID_SHARD, wrap_block, False)]
done = []
for kind, strategy, policy, orig in cases:
    what = (kind, strategy.name, policy is not None, orig)
    data = batches(kind, 4)
    f = FSDP(make(kind, seed=10 + r), sharding_strategy=strategy, auto_wrap_policy=policy, use_orig_params=orig,
             sync_module_states=True, cpu_offload=CPUOffload(), backward_prefetch=BackwardPrefetch.BACKWARD_POST)
    ref = make(kind, seed=10)
    if policy is not None:
        assert len(FSDP.fsdp_modules(f)) > 1, what
    check_full(f, ref, 0, what + ("sync_module_states",))
    if orig:
        names = [k for k, _ in f.named_parameters()]
        assert [k.replace("_fsdp_wrapped_module.", "") for k in names] == [k for k, _ in ref.named_parameters()], names
    opt = strata.optim.Adam(f.parameters(), lr=0.01, eps=1e-3)
    ropt = strata.optim.Adam(ref.parameters(), lr=0.01, eps=1e-3)
    norms = train(f, data, True, opt, clip=lambda m: m.clip_grad_norm_(0.5))
    rnorms = train(ref, data, False, ropt, clip=lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.5))
    assert max(abs(a - b) for a, b in zip(norms, rnorms)) < 1e-5 and rnorms[0] > 0.5, (what, norms, rnorms)
    check_full(f, ref, 2e-5, what)
    # optimizer state keyed by names, gathered whole
    osd = FSDP.optim_state_dict(f, opt)
    rnames = [k for k, _ in ref.named_parameters()]
    rosd = ropt.state_dict()
    assert sorted(osd["state"]) == sorted(rnames), (what, list(osd["state"]))
    assert sorted(osd["param_groups"][0]["params"]) == sorted(rnames)
    for i, name in enumerate(rnames):
        for key in ("exp_avg", "exp_avg_sq"):
            close(osd["state"][name][key], rosd["state"][i][key], 1e-5, (what, name, key))
    # a fresh model and optimizer loaded from the full state dicts continue the same training
    f2 = FSDP(make(kind, seed=99), sharding_strategy=strategy, auto_wrap_policy=policy, use_orig_params=orig)
    f2.load_state_dict(f.state_dict())
    opt2 = strata.optim.Adam(f2.parameters(), lr=0.01, eps=1e-3)
    opt2.load_state_dict(FSDP.optim_state_dict_to_load(f2, opt2, osd))
    more = batches(kind, 2, seed=5)
    train(f2, more, True, opt2)
    train(ref, more, False, ropt)
    check_full(f2, ref, 3e-5, what + ("reloaded",))
    done.append(what)

# HYBRID_SHARD over several nodes, pretended: LOCAL_WORLD_SIZE=1 makes each rank a node, so parameters are
# sharded over a group of one rank and gradients all-reduced across the nodes (the groups come from new_group)
import os
os.environ["LOCAL_WORLD_SIZE"], local = "1", os.environ.get("LOCAL_WORLD_SIZE")
for strategy, orig in ((S.HYBRID_SHARD, False), (S._HYBRID_SHARD_ZERO2, True)):
    data = batches("net", 3)
    f = FSDP(make("net"), sharding_strategy=strategy, auto_wrap_policy=wrap_block, use_orig_params=orig)
    assert f._replicate_group is not None and dist.get_world_size(f._shard_group) == 1
    assert f.blocks[0]._replicate_group is f._replicate_group
    ref = make("net")
    opt, ropt = strata.optim.Adam(f.parameters(), lr=0.01, eps=1e-3), strata.optim.Adam(ref.parameters(), lr=0.01, eps=1e-3)
    norms = train(f, data, True, opt, clip=lambda m: m.clip_grad_norm_(0.5))
    rnorms = train(ref, data, False, ropt, clip=lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.5))
    assert max(abs(a - b) for a, b in zip(norms, rnorms)) < 1e-5, (norms, rnorms)
    check_full(f, ref, 2e-5, ("hybrid over nodes", strategy.name))
os.environ["LOCAL_WORLD_SIZE"] = local

# mixed precision: bf16 parameters and compute, float32 reduction; loose tolerance
for kind, policy in (("mlp", None), ("net", wrap_block)):
    data = batches(kind, 3)
    mp = MixedPrecision(param_dtype=strata.bfloat16, reduce_dtype=strata.float32, buffer_dtype=strata.bfloat16)
    f = FSDP(make(kind), mixed_precision=mp, auto_wrap_policy=policy)
    ref = make(kind)
    assert f._handle.flat_param.dtype == strata.float32
    out = f(data[0][0].chunk(n)[r])
    assert out.dtype == strata.bfloat16, out.dtype
    opt, ropt = strata.optim.SGD(f.parameters(), lr=0.1), strata.optim.SGD(ref.parameters(), lr=0.1)
    train(f, data, True, opt)
    train(ref, data, False, ropt)
    sd = f.state_dict()
    assert all(v.dtype == strata.float32 for v in sd.values())
    check_full(f, ref, 3e-2, ("mixed", kind))
    # and the difference is really there (the low precision is used)
    diff = max((sd[k] - ref.state_dict()[k]).abs().max().item() for k in sd)
    assert diff > 1e-6, diff
assert len(done) == len(cases) == 12

# no_sync: two micro-batches accumulated locally, the third synchronised
for strategy in (S.FULL_SHARD, S.NO_SHARD):
    data = batches("net", 6)
    f = FSDP(make("net"), sharding_strategy=strategy, auto_wrap_policy=wrap_block)
    ref = make("net")
    opt, ropt = strata.optim.SGD(f.parameters(), lr=0.1), strata.optim.SGD(ref.parameters(), lr=0.1)
    train(f, data, True, opt, accumulate=3, no_sync=f.no_sync)
    train(ref, data, False, ropt, accumulate=3)
    check_full(f, ref, 2e-5, ("no_sync", strategy.name))

# state dicts: rank0_only, local and sharded round trips, summon_full_params
f = FSDP(make("net"), auto_wrap_policy=wrap_block)
ref = make("net")
with FSDP.state_dict_type(f, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
    sd = f.state_dict()
    assert (list(sd) == list(ref.state_dict())) if r == 0 else sd == {}, list(sd)
assert FSDP.get_state_dict_type(f).state_dict_type == StateDictType.FULL_STATE_DICT
for kind in (StateDictType.LOCAL_STATE_DICT, StateDictType.SHARDED_STATE_DICT):
    with FSDP.state_dict_type(f, kind):
        sd = {k: v.clone() for k, v in f.state_dict().items()}
        if kind == StateDictType.LOCAL_STATE_DICT:
            assert "_flat_param" in sd and "blocks.0._flat_param" in sd, list(sd)
        else:
            assert list(sd) == list(ref.state_dict()), list(sd)
            w = ref.state_dict()["blocks.1.fc1.weight"]
            close(sd["blocks.1.fc1.weight"], w.chunk(n)[r], 0, "sharded chunk")
    g = strata.Generator().manual_seed(5)
    with FSDP.summon_full_params(f):
        for _, p in f.named_parameters():
            p.data.copy_(strata.randn(p.shape, generator=g))
    with FSDP.state_dict_type(f, kind):
        f.load_state_dict(sd)
    check_full(f, ref, 0, kind.name)
with FSDP.summon_full_params(f):
    names = [(k, tuple(p.shape)) for k, p in f.named_parameters()]
    assert names == [(k, tuple(p.shape)) for k, p in ref.named_parameters()], names
    f.head.weight.data.mul_(2)
with FSDP.summon_full_params(f, writeback=False):
    f.head.bias.data.zero_()
with FSDP.summon_full_params(f):
    close(f.head.weight, ref.head.weight * 2, 0, "writeback")
    close(f.head.bias, ref.head.bias, 0, "no writeback")

# FSDP units inside a model that is not FSDP: its state_dict and load_state_dict use the unwrapped keys
for orig in (False, True):
    outer = make("net")
    outer.blocks[0] = FSDP(outer.blocks[0], use_orig_params=orig)
    outer.head = FSDP(outer.head, use_orig_params=orig)
    check_full(outer, make("net"), 0, ("partly wrapped", orig))
    outer.load_state_dict(make("net", seed=4).state_dict())
    check_full(outer, make("net", seed=4), 0, ("partly wrapped load", orig))

# apply() sees the whole parameters and writes back; the older optimizer-state calls
f = FSDP(make("net"), auto_wrap_policy=wrap_block)
def init(m):
    if isinstance(m, nn.Linear):
        with strata.no_grad():
            m.weight.fill_(0.01)
f.apply(init)
ref = make("net")
ref.apply(init)
check_full(f, ref, 0, "apply")
opt = strata.optim.Adam(f.parameters(), lr=0.01)
train(f, batches("net", 1), True, opt)
full_osd = FSDP.full_optim_state_dict(f, opt)
assert (sorted(full_osd["state"]) == sorted(k for k, _ in ref.named_parameters())) if r == 0 else full_osd == {}
fresh = strata.optim.Adam(f.parameters(), lr=0.01)
fresh.load_state_dict(FSDP.scatter_full_optim_state_dict(full_osd if r == 0 else None, f, optim=fresh))
for a_, b_ in zip(opt.state_dict()["state"].values(), fresh.state_dict()["state"].values()):
    close(a_["exp_avg"], b_["exp_avg"], 0, "scatter_full_optim_state_dict")

# enable_wrap / wrap
with enable_wrap(wrapper_cls=FSDP, sharding_strategy=S.SHARD_GRAD_OP):
    m = make("net")
    m.blocks[0] = wrap(m.blocks[0])
    w = wrap(m)
assert isinstance(w.blocks[0], FSDP) and w.blocks[0].sharding_strategy == S.SHARD_GRAD_OP
assert wrap(nn.Linear(2, 2)).__class__ is nn.Linear
check_full(w, make("net"), 0, "wrap")

# activation checkpointing inside FSDP units: the recomputation in backward finds the parameters again, and
# its gradients are reduced
from strata.utils.checkpoint import checkpoint
class CkptBlock(Block):
    def forward(self, x):
        return checkpoint(super().forward, x, use_reentrant=False)
def ckpt_net():
    m = make("net")
    m.blocks = nn.ModuleList([CkptBlock(), CkptBlock()])
    m.blocks.load_state_dict(make("net").blocks.state_dict())
    return m
for strategy, orig in ((S.FULL_SHARD, False), (S.SHARD_GRAD_OP, True), (S.NO_SHARD, False)):
    data = batches("net", 3)
    f = FSDP(ckpt_net(), sharding_strategy=strategy, use_orig_params=orig, auto_wrap_policy=ModuleWrapPolicy({CkptBlock}))
    ref = make("net")
    opt, ropt = strata.optim.SGD(f.parameters(), lr=0.1), strata.optim.SGD(ref.parameters(), lr=0.1)
    train(f, data, True, opt)
    train(ref, data, False, ropt)
    check_full(f, ref, 2e-5, ("checkpoint", strategy.name))

# apply_activation_checkpointing on an FSDP model (the blocks inside their units get wrapped): same training,
# the unwrapped model's state dict keys
from strata.distributed.algorithms._checkpoint.checkpoint_wrapper import (apply_activation_checkpointing,
    checkpoint_wrapper, CheckpointImpl, CheckpointWrapper)
for impl in (CheckpointImpl.NO_REENTRANT, CheckpointImpl.REENTRANT):
    data = batches("net", 3)
    f = FSDP(make("net"), auto_wrap_policy=wrap_block)
    apply_activation_checkpointing(f, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=impl),
                                   check_fn=lambda m: isinstance(m, Block))
    assert sum(isinstance(m, CheckpointWrapper) for m in f.modules()) == 2
    ref = make("net")
    opt, ropt = strata.optim.SGD(f.parameters(), lr=0.1), strata.optim.SGD(ref.parameters(), lr=0.1)
    train(f, data, True, opt)
    train(ref, data, False, ropt)
    check_full(f, ref, 2e-5, ("apply_activation_checkpointing", impl.name))
    f.load_state_dict(make("net").state_dict())
    check_full(f, make("net"), 0, "checkpoint wrapper load")
plain = checkpoint_wrapper(make("net"))
assert list(plain.state_dict()) == list(make("net").state_dict())
assert [k for k, _ in plain.named_parameters()] == [k for k, _ in make("net").named_parameters()]

# FULL_SHARD frees the gathered parameters when a unit's forward ends and gathers them again in backward;
# SHARD_GRAD_OP keeps them (autograd holds them) until backward. Measured with the CPU allocator's counters.
import gc
class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)
    def forward(self, x):
        return self.fc(x).tanh()
full_bytes = 3 * (256 * 256 + 256) * 4
for strategy in (S.FULL_SHARD, S.SHARD_GRAD_OP):
    m = FSDP(nn.Sequential(Wide(), Wide(), Wide()), sharding_strategy=strategy, auto_wrap_policy=ModuleWrapPolicy({Wide}))
    x = strata.randn(2, 256)
    gc.collect()
    before = strata._C._cpu_allocator_stats()["allocated_bytes"]
    y = m(x).sum()
    gc.collect()
    grown = strata._C._cpu_allocator_stats()["allocated_bytes"] - before
    y.backward()
    gathers = sum(u._handle.gathers for u in FSDP.fsdp_modules(m) if u._handle is not None)
    if strategy == S.FULL_SHARD:
        assert grown < full_bytes / 4 and gathers == 6, (grown, gathers)
    else:
        assert grown >= full_bytes and gathers == 3, (grown, gathers)
    del m, y

# ShardedGradScaler: an inf on one rank skips the step on every rank and backs the scale off
from strata.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
fs = FSDP(mlp())
opt = strata.optim.SGD(fs.parameters(), lr=0.1)
scaler = ShardedGradScaler("cpu", init_scale=4.0, growth_interval=1)
before = fs._flat_param.detach().clone()
x = strata.randn(2, 16)
if r == 1:
    x[0, 0] = float("inf")
scaler.scale(fs(x).sum()).backward()
scaler.step(opt)
scaler.update()
assert scaler.get_scale() == 2.0 and strata.equal(fs._flat_param, before)
opt.zero_grad()
scaler.scale(fs(strata.randn(2, 16)).sum()).backward()
scaler.step(opt)
scaler.update()
assert scaler.get_scale() == 4.0 and not strata.equal(fs._flat_param, before)

# distributed.checkpoint: get_state_dict/set_state_dict on an FSDP model give and take whole tensors keyed by the
# original names; dcp.save/load round trip; training continues identically
import tempfile
import strata.distributed.checkpoint as dcp
from strata.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
where = [tempfile.mkdtemp(prefix="fsdp_dcp_") if r == 0 else None]
dist.broadcast_object_list(where)
for orig in (False, True):
    m = FSDP(make("net"), auto_wrap_policy=wrap_block, use_orig_params=orig)
    opt = strata.optim.Adam(m.parameters(), lr=0.01)
    train(m, batches("net", 2), True, opt)
    msd, osd = get_state_dict(m, opt)
    assert list(msd) == list(make("net").state_dict()) and sorted(osd["state"]) == sorted(k for k, _ in make("net").named_parameters())
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=f"{where[0]}/{orig}")
    m2 = FSDP(make("net", seed=5), auto_wrap_policy=wrap_block, use_orig_params=orig)
    opt2 = strata.optim.Adam(m2.parameters(), lr=0.01)
    msd2, osd2 = get_state_dict(m2, opt2)
    dcp.load({"model": msd2, "optim": osd2}, checkpoint_id=f"{where[0]}/{orig}")
    set_state_dict(m2, opt2, model_state_dict=msd2, optim_state_dict=osd2)
    more = batches("net", 2, seed=8)
    train(m, more, True, opt)
    train(m2, more, True, opt2)
    a, b = m.state_dict(), m2.state_dict()
    for k in a:
        close(a[k], b[k], 1e-6, ("dcp", orig, k))
dist.barrier()
if r == 0:
    __import__("shutil").rmtree(where[0])

# errors
def raises(exc, fn, text):
    try:
        fn()
    except exc as e:
        assert text in str(e), (text, str(e))
        return
    raise AssertionError(f"no {exc.__name__} for {text}")
raises(TypeError, lambda: FSDP(mlp(), sharding_strategy="FULL_SHARD"), "sharding_strategy must be a ShardingStrategy")
raises(ValueError, lambda: FSDP(mlp(), device_id=0), "CPU tensors only")
raises(ValueError, lambda: FSDP(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).double())), "one dtype")
frozen = mlp(); frozen[0].weight.requires_grad_(False)
raises(ValueError, lambda: FSDP(frozen), "requires_grad")
FSDP(frozen, use_orig_params=True)
raises(ValueError, lambda: FSDP(FSDP(mlp())), "already wrapped")
raises(RuntimeError, lambda: f.blocks[0].clip_grad_norm_(1.0), "root FSDP instance")
raises(ValueError, lambda: FSDP.set_state_dict_type(f, StateDictType.FULL_STATE_DICT, ShardedStateDictConfig()), "takes a FullStateDictConfig")
raises(RuntimeError, lambda: f.load_state_dict({"nope": strata.zeros(1)}), '"nope"')
raises(ValueError, lambda: FSDP(mlp(), sharding_strategy=S.FULL_SHARD, process_group=(None, None)), "hybrid")
raises(NotImplementedError, lambda: get_state_dict(nn.Sequential(FSDP(mlp())), []), "wrap the whole model")
print("OK", r, flush=True)
'''


def test_fsdp_matches_single_process_training(tmp_path):
    script = tmp_path / "fsdp_worker.py"
    script.write_text(WORKER)
    p = launch([str(script)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("OK") == 2, p.stdout


TORCH_SCRIPT = r'''
import functools, torch, torch.distributed as dist, torch.nn as nn, torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy, StateDictType, FullStateDictConfig
from torch.distributed.fsdp.wrap import ModuleWrapPolicy, transformer_auto_wrap_policy
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()

class Block(nn.Module):
    def __init__(self, d=12):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 24), nn.Linear(24, d)
    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))

def build():
    m = nn.Sequential(nn.Linear(6, 12), Block(), Block(), nn.Linear(12, 3))
    with torch.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.37 + k).reshape(p.shape) * 0.3)
    return m

def data(step):
    x = torch.cos(torch.arange(8 * 6, dtype=torch.float32) * 0.11 + step).reshape(8, 6)
    y = torch.sin(torch.arange(8 * 3, dtype=torch.float32) * 0.23 - step).reshape(8, 3)
    return x.chunk(world)[rank], y.chunk(world)[rank]

cases = [(ShardingStrategy.FULL_SHARD, ModuleWrapPolicy({Block}), False),
         (ShardingStrategy.FULL_SHARD, functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block}), True),
         (ShardingStrategy.SHARD_GRAD_OP, ModuleWrapPolicy({Block}), True),
         (ShardingStrategy.NO_SHARD, None, False),
         (ShardingStrategy.FULL_SHARD, ModuleWrapPolicy({Block}), "checkpointed")]
for strategy, policy, orig in cases:
    model = FSDP(build(), sharding_strategy=strategy, auto_wrap_policy=policy, use_orig_params=orig is True,
                 device_id=torch.device("cpu"))
    if orig == "checkpointed":
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, eps=1e-3)
    norms = []
    for step in range(4):
        x, y = data(step)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        norms.append(round(float(model.clip_grad_norm_(0.3)), 5))
        opt.step()
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=True)):
        sd = model.state_dict()
    osd = FSDP.optim_state_dict(model, opt)
    if rank == 0:
        vals = [round(v, 5) for k in sd for v in sd[k].reshape(-1).tolist()[:6]]
        mom = [round(v, 6) for k in sorted(osd["state"]) for v in osd["state"][k]["exp_avg"].reshape(-1).tolist()[:3]]
        print("RESULT", repr((strategy.name, list(sd), norms, vals, sorted(osd["state"]), mom)), flush=True)
dist.barrier()
'''


def test_a_torch_fsdp_script_runs_unchanged_and_matches_torch(tmp_path):
    """Parameters, clip norms and state-dict keys agree with torch's FSDP (gloo, CPU) for each case. The
    optimizer state (AdamW's exp_avg) is compared with use_orig_params=False only: with use_orig_params=True
    torch 2.13's FSDP.optim_state_dict returned values near zero on rank 0 for parameters whose rank-0 shard is
    empty, although its own optimizer held the same exp_avg as ours on the rank owning them (checked by
    printing opt.state there) and the parameters after the steps agree exactly."""
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(TORCH_SCRIPT)
    # torch's own run ends through os._exit after the script, as in test_distributed_ddp.py (torch 2.13's gloo
    # sometimes aborts in its teardown at interpreter exit).
    reference = tmp_path / "reference.py"
    reference.write_text(f"import os, runpy, sys\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
                         "sys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n")
    results = []
    for run in (["-m", "strata.torch_alias", str(script)], [str(reference)]):
        p = launch(run)
        assert p.returncode == 0, p.stdout + p.stderr
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
        assert len(lines) == 5, p.stdout
        results.append([eval(ln[len("RESULT"):]) for ln in lines])
    for ours, theirs, orig in zip(*results, (False, True, True, False, False)):
        name, keys, norms, values, okeys, momentum = ours
        assert (name, keys, okeys) == (theirs[0], theirs[1], theirs[4])
        assert max(abs(a - b) for a, b in zip(norms, theirs[2])) < 1e-4, (name, norms, theirs[2])
        assert len(values) == len(theirs[3]) > 50
        assert max(abs(a - b) for a, b in zip(values, theirs[3])) < 1e-4, name
        if not orig:
            assert max(abs(a - b) for a, b in zip(momentum, theirs[5])) < 1e-5, name
    # ours agree across the cases (the same training each time)
    assert all(r[5] == results[0][0][5] for r in results[0]), [r[5][:3] for r in results[0]]


def test_fsdp_without_a_process_group_raises():
    from strata import nn
    from strata.distributed.fsdp import FullyShardedDataParallel as FSDP

    if dist.is_initialized():
        pytest.skip("a process group is running in this process")
    with pytest.raises(ValueError, match="init_process_group"):
        FSDP(nn.Linear(2, 2))
