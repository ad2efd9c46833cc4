"""strata.profiler's schedule= (torch.profiler.schedule, ProfilerAction, prof.step(), on_trace_ready,
tensorboard_trace_handler), checked against torch's own schedule function and by what each cycle records."""

import itertools
import json
import warnings

import pytest

import strata
from strata import profiler as P


@pytest.mark.parametrize("wait,warmup,active,repeat,skip_first,skip_first_wait",
                         [c for c in itertools.product((0, 1, 2), (0, 1), (1, 3), (0, 2), (0, 3), (0, 1))])
def test_schedule_matches_torch(wait, warmup, active, repeat, skip_first, skip_first_wait):
    torch = pytest.importorskip("torch")
    kw = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
              skip_first_wait=skip_first_wait)
    ours = P.schedule(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about warmup=0
        theirs = torch.profiler.schedule(**kw)
    assert [ours(i).name for i in range(40)] == [theirs(i).name for i in range(40)]


def test_schedule_rejects_bad_arguments():
    with pytest.raises(ValueError, match="Invalid profiler schedule"):
        P.schedule(wait=0, warmup=0, active=0)
    with pytest.raises(ValueError, match="Invalid profiler schedule"):
        P.schedule(wait=-1, warmup=0, active=1)
    with pytest.raises(TypeError, match="schedule"):
        P.profile(schedule=3)


def _train(prof, steps, x):
    for i in range(steps):
        (x * float(i)).sum()
        prof.step()


def test_schedule_records_only_active_steps_and_saves_each_cycle():
    x = strata.ones(8)
    saved = []

    def ready(prof):
        names = [e.name for e in prof.events()]
        saved.append((prof.step_num, sorted(n for n in names if n.startswith("ProfilerStep#")), names.count("strata::mul")))

    with P.profile(schedule=P.schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=ready) as prof:
        _train(prof, 10, x)
    # Cycle 1 records steps 2 and 3, cycle 2 steps 6 and 7; on_trace_ready runs as each cycle's last step ends.
    assert saved == [(4, ["ProfilerStep#2", "ProfilerStep#3"], 2), (8, ["ProfilerStep#6", "ProfilerStep#7"], 2)]
    # The results after the block are the last cycle's; every op of a step nests in its ProfilerStep range.
    evs = prof.events()
    steps = {e.name: e for e in evs if e.name.startswith("ProfilerStep#")}
    assert set(steps) == {"ProfilerStep#6", "ProfilerStep#7"}
    for e in evs:
        if e.name in ("strata::mul", "strata::sum"):
            assert e.cpu_parent is not None and e.cpu_parent.name.startswith("ProfilerStep#")


def test_leaving_the_block_mid_cycle_saves_what_was_recorded():
    x = strata.ones(4)
    calls = []
    with P.profile(schedule=P.schedule(wait=0, warmup=0, active=5), on_trace_ready=lambda p: calls.append(
            sorted(e.name for e in p.events() if e.name.startswith("ProfilerStep#")))) as prof:
        _train(prof, 2, x)
    assert calls == [["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]]  # step 2 was open at the exit


def test_without_schedule_step_only_counts():
    x = strata.ones(4)
    with P.profile() as prof:
        _train(prof, 3, x)
    assert prof.step_num == 3
    assert not any(e.name.startswith("ProfilerStep#") for e in prof.events())
    assert sum(e.name == "strata::mul" for e in prof.events()) == 3


def test_tensorboard_trace_handler_writes_one_trace_per_cycle(tmp_path):
    x = strata.ones(4)
    handler = P.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w0")
    with P.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=3), on_trace_ready=handler) as prof:
        _train(prof, 8, x)
    files = sorted((tmp_path / "tb").iterdir())
    assert len(files) == 3 and all(f.name.startswith("w0.") and f.name.endswith(".pt.trace.json") for f in files)
    for f in files:
        trace = json.loads(f.read_text())
        assert any(ev.get("name", "").startswith("ProfilerStep#") for ev in trace["traceEvents"])
    gz = P.tensorboard_trace_handler(str(tmp_path / "gz"), worker_name="w1", use_gzip=True)
    with P.profile(schedule=P.schedule(wait=0, warmup=0, active=1, repeat=1), on_trace_ready=gz) as prof:
        _train(prof, 2, x)
    (only,) = list((tmp_path / "gz").iterdir())
    import gzip

    assert only.name.endswith(".pt.trace.json.gz") and "traceEvents" in json.loads(gzip.open(only).read())
