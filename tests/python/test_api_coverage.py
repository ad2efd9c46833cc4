"""bench/api_coverage.py runs and reports, and every torch name in the usage
list that Strata lacks raises a clear "not implemented yet" error naming it,
which is also an AttributeError so that feature probes keep working. The
coverage targets are not asserted here."""

import json
import os
import subprocess
import sys

import pytest

import strata
from strata._missing import HOT_MODULES, NotImplementedAttributeError

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import api_coverage  # noqa: E402


def run_script(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench", "api_coverage.py"), *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def report():
    return api_coverage.coverage(api_coverage.load_usage())


def test_usage_list_is_well_formed():
    data = api_coverage.load_usage()
    assert len(data["projects"]) >= 30
    for p in data["projects"]:
        assert "/" in p["repo"] and len(p["commit"]) == 40
    assert len(data["names"]) > 300
    for r in data["names"]:
        assert set(r) == {"name", "kind", "projects", "uses"}
        assert 1 <= r["projects"] <= len(data["projects"]) and r["uses"] >= r["projects"]
        assert r["name"].startswith("Tensor." if r["kind"] == "Tensor" else r["kind"] + ".")
    names = {r["name"] for r in data["names"]}
    for common in ("torch.nn.Linear", "torch.cat", "Tensor.view", "torch.nn.functional.relu"):
        assert common in names


def test_script_table_and_json():
    out = run_script("--missing", "5")
    assert out.returncode == 0, out.stderr
    assert "(all)" in out.stdout and "by uses" in out.stdout and "missing names" in out.stdout
    js = run_script("--json", "--min-projects", "2")
    assert js.returncode == 0, js.stderr
    rep = json.loads(js.stdout)
    assert rep["min_projects"] == 2
    total = next(t for t in rep["namespaces"] if t["namespace"] == "(all)")
    assert total["names"] - total["present"] == len(rep["missing"])
    assert all(r["projects"] >= 2 for r in rep["missing"])
    assert 0 <= total["by_name"] <= 100 and 0 <= total["by_uses"] <= 100
    weights = [(r["projects"], r["uses"]) for r in rep["missing"]]
    assert weights == sorted(weights, key=lambda w: (-w[0], -w[1]))


def test_coverage_counts_what_strata_has(report):
    # Names Strata certainly has are present; placeholders count as missing.
    missing = {r["name"] for r in report["missing"]}
    for have in ("torch.nn.Linear", "torch.cat", "Tensor.view", "torch.cuda.is_available"):
        assert have not in missing
    data = {"projects": [{}], "names": [{"name": "Tensor.frobnicate_", "kind": "Tensor", "projects": 1, "uses": 1},
                                        {"name": "torch.nn.Linear", "kind": "torch.nn", "projects": 1, "uses": 3}]}
    rep = api_coverage.coverage(data)
    assert [r["name"] for r in rep["missing"]] == ["Tensor.frobnicate_"]
    assert rep["namespaces"][0]["by_uses"] == 75.0


def _strata_path(row):
    if row["kind"] == "Tensor":
        return ["strata", "Tensor", row["name"].split(".", 1)[1]]
    return ["strata"] + row["name"].split(".")[1:]


def test_every_missing_name_says_not_implemented(report):
    problems = []
    for row in report["missing"]:
        parts = _strata_path(row)
        obj = strata
        for i in range(1, len(parts)):
            try:
                obj = getattr(obj, parts[i])
            except NotImplementedAttributeError as e:
                here = ".".join(parts[: i + 1])
                torch_name = "torch" + here[len("strata"):]
                if f"{here} is not implemented yet ({torch_name})" not in str(e):
                    problems.append(f"{row['name']}: unclear message {e}")
                break
            except AttributeError as e:
                if ".".join(parts[:i]) in HOT_MODULES:  # Note [No miss hook on hot modules]: Python's own error
                    if f"has no attribute '{parts[i]}'" not in str(e):
                        problems.append(f"{row['name']}: unexpected message {e}")
                    break
                problems.append(f"{row['name']}: plain AttributeError ({e}); a strata module imported after "
                                "strata/__init__.py ran install_module_hooks needs its miss hook")
                break
        else:
            problems.append(f"{row['name']}: found, yet reported missing")
    assert not problems, "\n".join(problems[:20])


def test_missing_error_is_both_kinds_and_probes_work():
    assert issubclass(NotImplementedAttributeError, NotImplementedError)
    assert issubclass(NotImplementedAttributeError, AttributeError)
    import strata.nn as nn
    import strata.nn.functional as F

    # A torch name Strata lacks: NotImplementedError, while hasattr/getattr-with-default answer as for a miss.
    from strata._missing import _torch_names

    name = sorted(n for n in _torch_names()["torch.nn"] if not n.startswith("_") and n not in vars(nn))[0]
    with pytest.raises(NotImplementedError, match=rf"strata\.nn\.{name} is not implemented yet "
                                                  rf"\(torch\.nn\.{name}\)"):
        getattr(nn, name)
    assert not hasattr(nn, name) and getattr(nn, name, None) is None
    assert hasattr(F, "scaled_dot_product_attention") and hasattr(strata, "cuda")
    # The hot modules have no miss hook (Note [No miss hook on hot modules]): their misses are Python's own.
    for mod in (strata, F):
        assert "__getattr__" not in vars(mod)
    # Names torch does not have either: the usual AttributeError, not "not implemented".
    for mod, where in ((strata, "strata"), (strata.nn, "strata.nn"), (F, "strata.nn.functional")):
        with pytest.raises(AttributeError, match=rf"module '{where}' has no attribute 'frobnicate'") as ei:
            mod.frobnicate
        assert not isinstance(ei.value, NotImplementedError)
    # from-imports of a missing name still fail as imports do.
    with pytest.raises(ImportError):
        exec("from strata import frobnicate")


def test_tensor_placeholders():
    t = strata.ones(2)
    from strata._missing import _torch_names

    name = sorted(n for n in _torch_names()["torch.Tensor"]
                  if not n.startswith("_") and type(strata.Tensor.__dict__.get(n)).__name__ == "_MissingTensorAttribute")[0]
    with pytest.raises(NotImplementedError, match=rf"strata\.Tensor\.{name} is not implemented yet "
                                                  rf"\(torch\.Tensor\.{name}\)"):
        getattr(t, name)
    assert not hasattr(t, name) and not hasattr(strata.Tensor, name) and getattr(t, name, 7) == 7
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'frobnicate'") as ei:
        t.frobnicate
    assert not isinstance(ei.value, NotImplementedError)
    # Assigning the real method over a placeholder replaces it.
    saved = strata.Tensor.__dict__.get(name)
    try:
        setattr(strata.Tensor, name, lambda self: "real")
        assert getattr(t, name)() == "real"
    finally:
        if saved is not None:
            setattr(strata.Tensor, name, saved)


SAMPLE = '''
import os
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.nn import Linear
from torch.utils.data import DataLoader as DL


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = Linear(4, 2)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        y = F.relu(self.fc(x)).view(-1)
        s = "a,b".split(",")
        parts = os.path.join("a", "b").split("/")
        n = np.zeros(3).sum()
        return torch.cat([y, y]).sum(dim=0), x.shape, self.to("cpu"), s, parts, n


opt = optim.SGD(Net().parameters(), lr=0.1)
loader = DL([])
t = torch.ones(2).split(1)
'''


def test_extract_counts_a_sample_project(tmp_path):
    pytest.importorskip("torch")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(SAMPLE)
    (proj / "old.py").write_text("print 'python 2'\n")
    nb = {"cells": [{"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n", "torch.zeros(2)\n"]},
                    {"cell_type": "markdown", "source": ["torch.ones(3)"]}]}
    (proj / "nb.ipynb").write_text(json.dumps(nb))
    out, names = tmp_path / "usage.json", tmp_path / "names.json"
    res = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "api_usage", "extract.py"), f"me/proj={proj}",
                          "--out", str(out), "--names-out", str(names)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    data = json.loads(out.read_text())
    assert data["projects"] == [{"repo": "me/proj", "commit": None, "files_parsed": 2, "files_skipped": 1,
                                 "names_used": len(data["names"])}]
    got = {r["name"]: r["uses"] for r in data["names"]}
    assert got == {
        "torch.nn.Module": 1, "torch.nn.Linear": 1, "torch.nn.init.zeros_": 1, "torch.nn.functional.relu": 1,
        "Tensor.view": 1, "torch.cat": 1, "Tensor.sum": 1, "Tensor.shape": 1, "torch.optim.SGD": 1,
        "torch.utils.data.DataLoader": 1, "torch.ones": 1, "Tensor.split": 1, "torch.zeros": 1,
    }, got
    assert all(r["projects"] == 1 for r in data["names"])
    torch_names = json.loads(names.read_text())["names"]
    assert "relu" in torch_names["torch.nn.functional"] and "view" in torch_names["torch.Tensor"]


def test_uncaught_miss_on_a_hot_module_names_what_is_missing(tmp_path):
    script = tmp_path / "uses_csr.py"
    script.write_text("import strata as torch\nq = torch.sparse_csr_tensor(torch.ones(2), torch.ones(2), torch.ones(2))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "AttributeError: module 'strata' has no attribute 'sparse_csr_tensor'" in proc.stderr
    assert "strata.sparse_csr_tensor is not implemented yet (torch.sparse_csr_tensor)" in proc.stderr
