"""strata.distributed.all_reduce's C entry (python/src/distributed_bind.cpp, all_reduce_entry): the common call
runs there (its counter, _C._distributed.all_reduce_entry_calls, moves), every other call goes to the Python
function behind it (the counter stays), with the same results and the same errors."""
import json
import pickle

import pytest

import strata
import strata.distributed as dist
from _ranks import run_worker

WORKER = r'''
import json, os
import strata
import strata.distributed as dist
from strata.distributed import ReduceOp

dist.init_process_group("gloo")
C = strata._C._distributed
r, n = dist.get_rank(), dist.get_world_size()
out = {}

def check(name, call, t, want, entry):
    c0 = C.all_reduce_entry_calls()
    w = call(t)
    if w is not None:
        w.wait()
    taken = C.all_reduce_entry_calls() - c0
    got = t.tolist()
    out[name] = [taken == (1 if entry else 0), got == want, taken, got, want]

tot = n * (n + 1) // 2  # sum over ranks of rank + 1
v = lambda dt=strata.float32: strata.full((5,), float(r + 1), dtype=dt)
# the common call, in each spelling: the C entry
check("plain", lambda t: dist.all_reduce(t), v(), [float(tot)] * 5, True)
check("op_kw", lambda t: dist.all_reduce(t, op=ReduceOp.SUM), v(), [float(tot)] * 5, True)
check("op_pos", lambda t: dist.all_reduce(t, ReduceOp.SUM), v(), [float(tot)] * 5, True)
check("all_kw", lambda t: dist.all_reduce(t, group=None, async_op=False, op=ReduceOp.SUM), v(), [float(tot)] * 5, True)
check("all_pos", lambda t: dist.all_reduce(t, ReduceOp.SUM, None, False), v(), [float(tot)] * 5, True)
check("int64", lambda t: dist.all_reduce(t), v(strata.int64), [tot] * 5, True)
check("float64", lambda t: dist.all_reduce(tensor=t), v(strata.float64), [float(tot)] * 5, False)  # keyword tensor
# everything else: the Python function
check("max", lambda t: dist.all_reduce(t, op=ReduceOp.MAX), v(), [float(n)] * 5, False)
check("avg", lambda t: dist.all_reduce(t, op=ReduceOp.AVG), v(), [tot / n] * 5, False)
check("world", lambda t: dist.all_reduce(t, group=dist.group.WORLD), v(), [float(tot)] * 5, False)
check("async", lambda t: dist.all_reduce(t, async_op=True), v(), [float(tot)] * 5, False)
check("float16", lambda t: dist.all_reduce(t), v(strata.float16), [float(tot)] * 5, False)
check("bool", lambda t: dist.all_reduce(t), strata.tensor([r == 0, False]), [True, False], False)
nc = strata.full((4, 2), float(r + 1)).t()  # not contiguous
check("strided", lambda t: dist.all_reduce(t), nc, [[float(tot)] * 4] * 2, False)
check("empty", lambda t: dist.all_reduce(t), strata.ones(0), [], False)
sub = dist.new_group(list(range(n)))
check("subgroup", lambda t: dist.all_reduce(t, group=sub), v(), [float(tot)] * 5, False)
# the debug mode (every rank at once: its check is collective)
dist._state.debug = True
check("debug", lambda t: dist.all_reduce(t), v(), [float(tot)] * 5, False)
dist._state.debug = False
# async work queued before: the common call waits its turn (ordering kept)
a = v()
w = dist.all_reduce(a, async_op=True)
b = v()
check("after_async", lambda t: dist.all_reduce(t), b, [float(tot)] * 5, True)
w.wait()
out["async_result"] = [a.tolist() == [float(tot)] * 5]
# errors: the same type and message from the entry as from the Python function
gen = dist._collectives._all_reduce_general
def err(f, *a, **k):
    try:
        f(*a, **k)
    except Exception as e:
        return [type(e).__name__, str(e)]
    return None
for name, a, k in [("str", ("x",), {}), ("kw", (v(),), {"foo": 1}), ("op", (v(),), {"op": "sum"}),
                   ("none", (), {}), ("bad_group", (v(),), {"group": 5})]:
    c0 = C.all_reduce_entry_calls()
    e1, e2 = err(dist.all_reduce, *a, **k), err(gen, *a, **k)
    out["err_" + name] = [e1 == e2 and e1 is not None, C.all_reduce_entry_calls() == c0, e1, e2]
dist.destroy_process_group()
e = err(dist.all_reduce, v())
out["err_uninit"] = [e == err(gen, v()) and e is not None and e[0] == "ValueError", e]
with open(os.path.join(os.environ["OUT"], f"rank{r}.json"), "w") as f:
    json.dump(out, f)
'''


@pytest.mark.parametrize("nproc", [2, 4])
def test_common_call_takes_the_c_entry_and_others_the_python_path(tmp_path, nproc):
    run_worker(tmp_path, WORKER, "strata", nproc, timeout=240)
    for r in range(nproc):
        out = json.loads((tmp_path / f"rank{r}.json").read_text())
        bad = {k: v for k, v in out.items() if not all(x is True for x in v[:2] if isinstance(x, bool))}
        assert not bad, (r, bad)
        assert len(out) == 25


def test_entry_is_the_module_attribute_and_errors_match_without_a_group():
    assert dist.all_reduce is dist._collectives.all_reduce
    if not hasattr(strata._C._distributed, "make_all_reduce"):
        pytest.skip("binding without the C entry")
    assert dist.all_reduce is not dist._collectives._all_reduce_general
    assert pickle.loads(pickle.dumps(dist.all_reduce)) is dist.all_reduce  # by name, as the Python function was
    gen = dist._collectives._all_reduce_general
    for args, kw in [((strata.ones(3),), {}), ((strata.ones(3),), {"op": dist.ReduceOp.SUM}), (("x",), {}),
                     ((strata.ones(3),), {"foo": 1}), ((), {})]:
        msgs = []
        for f in (dist.all_reduce, gen):
            with pytest.raises(Exception) as ei:
                f(*args, **kw)
            msgs.append((type(ei.value), str(ei.value)))
        assert msgs[0] == msgs[1]
