"""strata.distributed.checkpoint.load reading checkpoints written by torch.distributed.checkpoint.save (one process,
no process group): plain tensors, nested state dicts with non-tensor values, optimizer state; the metadata pickle
goes through the restricted unpickler."""
import pickle
import warnings

import numpy as np
import pytest

import strata
import strata.distributed.checkpoint as sdcp

torch = pytest.importorskip("torch")
tdcp = pytest.importorskip("torch.distributed.checkpoint")


def _torch_save(sd, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is ... uninitialized, assuming ... a single process"
        tdcp.save(sd, checkpoint_id=str(path))


def test_plain_tensors_every_dtype(tmp_path):
    src = {
        "f32": torch.randn(3, 4),
        "f64": torch.randn(5, dtype=torch.float64),
        "i64": torch.arange(7),
        "i8": torch.tensor([-3, 0, 5], dtype=torch.int8),
        "u8": torch.tensor([1, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "bf16": torch.randn(2, 2).to(torch.bfloat16),
        "f16": torch.randn(4).half(),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "noncontig": torch.randn(4, 6)[:, ::2],
    }
    _torch_save(src, tmp_path)
    dst = {k: strata.zeros(tuple(v.shape), dtype=getattr(strata, str(v.dtype).split(".")[1])) for k, v in src.items()}
    sdcp.load(dst, checkpoint_id=tmp_path)
    for k, v in src.items():
        got = dst[k]
        assert tuple(got.shape) == tuple(v.shape), k
        assert np.array_equal(got.float().numpy() if v.dtype in (torch.bfloat16, torch.float16) else got.numpy(),
                              v.float().numpy() if v.dtype in (torch.bfloat16, torch.float16) else v.numpy()), k


def test_nested_state_dict_with_values_and_partial_load(tmp_path):
    src = {"model": {"layer": {"w": torch.randn(2, 3), "b": torch.zeros(2)}},
           "meta": {"epoch": 7, "name": "run-1", "lrs": [0.1, 0.01], "flag": True}, "step": 42}
    _torch_save(src, tmp_path)
    dst = {"model": {"layer": {"w": strata.empty(2, 3), "b": strata.ones(2)}},
           "meta": {"epoch": 0, "name": "", "lrs": [0.0, 0.0], "flag": False}, "step": 0}
    w = dst["model"]["layer"]["w"]
    sdcp.load(dst, checkpoint_id=tmp_path)
    assert dst["model"]["layer"]["w"] is w  # tensors are loaded in place
    assert np.array_equal(w.numpy(), src["model"]["layer"]["w"].numpy())
    assert dst["model"]["layer"]["b"].tolist() == [0.0, 0.0]
    assert dst["meta"] == {"epoch": 7, "name": "run-1", "lrs": [0.1, 0.01], "flag": True} and dst["step"] == 42
    # a key the checkpoint lacks: an error, unless the planner allows a partial load
    more = {"step": 0, "missing": strata.zeros(1)}
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: missing"):
        sdcp.load(more, checkpoint_id=tmp_path)
    sdcp.load(more, checkpoint_id=tmp_path, planner=sdcp.DefaultLoadPlanner(allow_partial_load=True))
    assert more["step"] == 42 and more["missing"].tolist() == [0.0]
    with pytest.raises(RuntimeError, match="Size mismatch"):
        sdcp.load({"model": {"layer": {"w": strata.empty(3, 2)}}}, checkpoint_id=tmp_path)
    md = sdcp.FileSystemReader(tmp_path).read_metadata()
    assert tuple(md.state_dict_metadata["model.layer.w"].size) == (2, 3)


def test_optimizer_state_resumes_training_like_torch(tmp_path):
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(tm.parameters(), lr=0.05)
    x = torch.randn(8, 3)
    for _ in range(2):
        topt.zero_grad()
        tm(x).pow(2).sum().backward()
        topt.step()
    _torch_save({"model": tm.state_dict(), "optim": topt.state_dict()}, tmp_path)

    sm = strata.nn.Linear(3, 2)
    sopt = strata.optim.Adam(sm.parameters(), lr=0.5)
    sm(strata.ones(1, 3)).sum().backward()
    sopt.step()  # so that its state dict has the keys to load into
    sd = {"model": sm.state_dict(), "optim": sopt.state_dict()}
    sdcp.load(sd, checkpoint_id=tmp_path)
    sm.load_state_dict(sd["model"])
    sopt.load_state_dict(sd["optim"])
    assert sopt.param_groups[0]["lr"] == 0.05
    # one more step on both sides: the same parameters
    topt.zero_grad()
    tm(x).pow(2).sum().backward()
    topt.step()
    sopt.zero_grad()
    sm(strata.tensor(x.numpy())).pow(2).sum().backward()
    sopt.step()
    np.testing.assert_allclose(sm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sm.bias.detach().numpy(), tm.bias.detach().numpy(), rtol=1e-5, atol=1e-6)


class _Evil:
    def __reduce__(self):
        import os
        return (os.system, ("echo unpickled-code-ran",))


def test_a_hostile_metadata_pickle_runs_no_code(tmp_path, capfd):
    _torch_save({"w": torch.ones(2)}, tmp_path)
    (tmp_path / ".metadata").write_bytes(pickle.dumps(_Evil(), protocol=4))
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        sdcp.load({"w": strata.zeros(2)}, checkpoint_id=tmp_path)
    assert "unpickled-code-ran" not in capfd.readouterr().out


# ---- the other way: strata writes torch's format (FileSystemWriter(torch_format=True)), torch reads it ------------


def test_torch_reads_what_strata_writes_in_torch_format(tmp_path):
    strata.manual_seed(0)
    sm = strata.nn.Linear(3, 2)
    sopt = strata.optim.Adam(sm.parameters(), lr=0.05)
    for _ in range(2):
        sopt.zero_grad()
        sm(strata.ones(4, 3)).pow(2).sum().backward()
        sopt.step()
    src = {"model": sm.state_dict(), "optim": sopt.state_dict(),
           "extra": {"epoch": 3, "name": "x", "t": strata.arange(5, dtype=strata.int32),
                     "h": strata.tensor([1.5, -2.0]).to(strata.bfloat16), "pair": (1, 2), "empty": {}}}
    md = sdcp.save(src, storage_writer=sdcp.FileSystemWriter(tmp_path, torch_format=True))
    assert "model.weight" in md.state_dict_metadata and "optim.param_groups.0.params" in md.state_dict_metadata

    tm = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(tm.parameters(), lr=0.5)
    tm(torch.ones(1, 3)).sum().backward()
    topt.step()
    dst = {"model": tm.state_dict(), "optim": topt.state_dict(),
           "extra": {"epoch": 0, "name": "", "t": torch.zeros(5, dtype=torch.int32),
                     "h": torch.zeros(2, dtype=torch.bfloat16), "pair": (0, 0), "empty": {}}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tdcp.load(dst, checkpoint_id=str(tmp_path))
    tm.load_state_dict(dst["model"])
    topt.load_state_dict(dst["optim"])
    np.testing.assert_array_equal(tm.weight.detach().numpy(), sm.weight.detach().numpy())
    np.testing.assert_array_equal(dst["optim"]["state"][0]["exp_avg_sq"].numpy(),
                                  sopt.state_dict()["state"][0]["exp_avg_sq"].numpy())
    assert topt.param_groups[0]["lr"] == 0.05
    assert dst["extra"]["epoch"] == 3 and dst["extra"]["name"] == "x" and dst["extra"]["pair"] == (1, 2)
    assert dst["extra"]["t"].tolist() == [0, 1, 2, 3, 4] and dst["extra"]["h"].float().tolist() == [1.5, -2.0]

    # and strata reads its own torch-format checkpoint back
    back = {"model": {"weight": strata.zeros(2, 3), "bias": strata.zeros(2)}, "extra": {"pair": None, "empty": {}}}
    sdcp.load(back, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(back["model"]["weight"].numpy(), sm.weight.detach().numpy())
    assert back["extra"]["pair"] == (1, 2)


WORKER = r'''
import os, strata, strata.distributed as dist, strata.distributed.checkpoint as dcp
dist.init_process_group("gloo")
r = dist.get_rank()
sd = {"shared": strata.ones(3) * (r + 1), f"only{r}": strata.arange(4) + 10 * r, "step": 5}
dcp.save(sd, storage_writer=dcp.FileSystemWriter(os.environ["OUT"] + "/ckpt", torch_format=True))
back = {"shared": strata.zeros(3), "only0": strata.zeros(4, dtype=strata.int64), "only1": strata.zeros(4, dtype=strata.int64)}
dcp.load(back, checkpoint_id=os.environ["OUT"] + "/ckpt")
assert back["shared"].tolist() == [1.0] * 3 and back["only1"].tolist() == [10, 11, 12, 13], back
dist.barrier()
'''


def test_two_ranks_write_torch_format_and_torch_reads_it(tmp_path):
    from _ranks import run_worker

    run_worker(tmp_path, WORKER, "strata", 2, timeout=120)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    dst = {"shared": torch.zeros(3), "only0": torch.zeros(4, dtype=torch.int64),
           "only1": torch.zeros(4, dtype=torch.int64), "step": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tdcp.load(dst, checkpoint_id=str(tmp_path / "ckpt"))
    assert dst["shared"].tolist() == [1.0] * 3  # a replica: written once, by rank 0
    assert dst["only0"].tolist() == [0, 1, 2, 3] and dst["only1"].tolist() == [10, 11, 12, 13]
    assert dst["step"] == 5
