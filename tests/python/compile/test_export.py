"""strata.export: fullgraph capture into an ExportedProgram (signature, state_dict, module()),
save/load as a self-contained archive, and Graph.add_node, which load rebuilds graphs with."""

import collections
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata._C import _compile
from strata.export import export, save, load, Dim, ExportError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x, scale=2.0):
        return self.bn(self.layers(x)) * scale + 1


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def same(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    assert strata.equal(a, b), (a, b)


def test_module_signature_state_dict_and_call():
    strata.manual_seed(0)
    m = MLP().eval()
    x = strata.randn(5, 4)
    ep = export(m, (x,))
    sig = ep.graph_signature
    assert sig.parameters == ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias", "bn.weight",
                              "bn.bias"]
    assert sig.buffers == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert sig.user_inputs == ["x"]
    assert len(sig.user_outputs) == 1
    assert set(ep.state_dict) == set(m.state_dict())
    assert ep.state_dict["layers.0.weight"] is m.layers[0].weight
    assert ep.range_constraints == {}
    assert sig.inputs_to_parameters[sig.input_specs[1].name] == "layers.0.weight"
    with strata.no_grad():
        same(ep(x), m(x))
        same(ep(x, scale=3.0 - 1.0), m(x))
    ops = [n.op for n in ep.graph.nodes]
    assert ops == ["linear", "relu", "linear", "batch_norm", "mul", "add"]
    text = str(ep)
    assert "ExportedProgram" in text and "layers.0.weight" in text and "strata.ops.linear" in text
    assert "strata.ops.batch_norm" in ep.print_readable(print_output=False)


def test_module_runs_with_its_own_parameters():
    strata.manual_seed(1)
    m = MLP().eval()
    x = strata.randn(2, 4)
    ep = export(m, (x,))
    em = ep.module()
    assert [n for n, _ in em.named_parameters()] == ep.graph_signature.parameters
    assert getattr(em.layers, "0").weight is m.layers[0].weight
    with strata.no_grad():
        same(em(x), m(x))
        m2 = MLP().eval()
        em.load_state_dict(m2.state_dict())
        same(em(x), m2(x))
        same(ep(x), m(x))  # the program itself still has the original tensors


def test_specialisation_is_checked_at_call():
    m = MLP().eval()
    ep = export(m, (strata.randn(3, 4),))
    with pytest.raises(ValueError, match=r"x.shape\[0\] is 6, but the program was exported with the static size 3"):
        ep(strata.randn(6, 4))
    with pytest.raises(ValueError, match="scale is 3.0 but the program was exported with 2.0"):
        ep(strata.randn(3, 4), scale=3.0)
    with pytest.raises(TypeError, match="must be a Tensor"):
        ep([[1.0] * 4] * 3)
    with pytest.raises(TypeError, match="do not match the exported signature"):
        ep()


def test_graph_break_raises_with_reason_and_line():
    def f(x):
        y = x * 2
        print("side effect")  # a graph break
        return y

    with pytest.raises(ExportError) as ei:
        export(f, (strata.randn(3),))
    msg = str(ei.value)
    assert msg.startswith("strata.export:")
    assert "print" in msg and f"test_export.py:{f.__code__.co_firstlineno + 2}" in msg


def test_data_dependent_branch_raises():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(ExportError, match=r"data-dependent[^\n]*\n  at .*test_export.py:\d+ in .*M.forward: if x.sum"):
        export(M(), (strata.randn(3),))


def test_break_inside_a_submodule_names_the_inner_line():
    class Inner(nn.Module):
        def forward(self, x):
            return x.tolist()

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(ExportError, match=r"at .*test_export.py:\d+ in .*Inner.forward: return x.tolist\(\)\n"
                                          r"  called from .*Outer.forward"):
        export(Outer(), (strata.randn(3),))


def test_library_module_as_root():
    m = nn.Linear(3, 2)
    x = strata.randn(4, 3)
    ep = export(m, (x,))
    assert ep.graph_signature.parameters == ["weight", "bias"]
    assert ep.graph_signature.user_inputs == ["input"]
    with strata.no_grad():
        same(ep(x), m(x))
        same(ep(input=x), m(x))


def test_python_side_effects_raise():
    seen = []

    def f(x):
        seen.append(1)
        return x + 1

    with pytest.raises(ExportError, match="mutates Python state"):
        export(f, (strata.randn(2),))


def test_dynamic_shapes_static_forms_keep_the_program_static():
    # Dim.STATIC, None and an empty dict are static; dynamic dims are tested in test_export_dynamic.py
    m = MLP().eval()
    x = strata.randn(3, 4)
    for spec in ({"x": {0: Dim.STATIC}}, ({},), {"x": None}, ({0: 3},)):
        ep = export(m, (x,), dynamic_shapes=spec)
        assert ep.range_constraints == {}
        with pytest.raises(ValueError, match="static size 3"):
            ep(strata.randn(5, 4))


def test_functions_kwargs_and_output_trees():
    Pair = collections.namedtuple("Pair", ["lo", "hi"])

    def f(x, y, *, k=3):
        return {"sum": x + y, "pair": Pair(x.min(), x.max()), "n": k, "list": [x * k, None]}

    x, y = strata.randn(3), strata.randn(3)
    ep = export(f, (x,), {"y": y})
    r, ref = ep(x, y), f(x, y)
    same(r["sum"], ref["sum"])
    assert type(r["pair"]) is Pair
    same(r["pair"].hi, ref["pair"].hi)
    assert r["n"] == 3 and r["list"][1] is None
    same(r["list"][0], ref["list"][0])
    assert ep.graph_signature.user_inputs == ["x", "y"]


def test_nested_inputs_have_paths():
    def f(batch):
        return batch["a"] * batch["b"][1]

    a, b = strata.randn(2), [strata.randn(2), strata.randn(2)]
    ep = export(f, ({"a": a, "b": b},))
    targets = [s.target for s in ep.graph_signature.input_specs]
    assert (("arg", "batch"), ("item", "a")) in targets or (("arg", "batch"), ("dict_item", "a")) in targets
    same(ep({"a": b[0], "b": [a, a]}), b[0] * a)


SCALE = strata.tensor([1.0, 2.0, 3.0])


def test_lifted_constants_and_non_persistent_buffers():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("offset", strata.ones(3), persistent=False)
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x) * SCALE + self.offset

    m = M()
    x = strata.randn(2, 3)
    ep = export(m, (x,))
    kinds = {s.target: s.kind for s in ep.graph_signature.input_specs}
    assert kinds["offset"] == "buffer" and "offset" not in ep.state_dict and "offset" in ep.constants
    assert ep.graph_signature.non_persistent_buffers == ["offset"]
    lifted = ep.graph_signature.lifted_tensor_constants
    assert len(lifted) == 1 and ep.constants[lifted[0]] is SCALE
    with strata.no_grad():
        same(ep(x), m(x))
        ep2 = load(_roundtrip(ep))
        same(ep2(x), m(x))
        same(ep2.module()(x), m(x))


def test_training_batch_norm_mutates_buffers_in_the_graph():
    strata.manual_seed(2)
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    m.train()
    x = strata.randn(8, 4)
    ep = export(m, (x,))
    assert sorted(ep.graph_signature.buffers_to_mutate.values()) == [
        "1.num_batches_tracked", "1.running_mean", "1.running_var"]
    ref = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ref.load_state_dict(m.state_dict())
    ref.train()
    with strata.no_grad():
        before = m[1].running_mean.clone()
        out = ep(x)
        same(out, ref(x))
        assert not strata.equal(before, m[1].running_mean)
        assert strata.allclose(m[1].running_mean, ref[1].running_mean)


def _roundtrip(ep):
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    return buf


def test_save_load_roundtrip_bitwise(tmp_path):
    strata.manual_seed(3)
    m = CNN()
    m.train()
    m(strata.randn(4, 3, 8, 8))
    m.eval()
    x = strata.randn(2, 3, 8, 8)
    ep = export(m, (x,))
    path = tmp_path / "cnn.pt2"
    save(ep, str(path))
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        desc = json.loads(z.read("strata_export/program.json"))
    assert names == {"strata_export/program.json", "strata_export/tensors.safetensors"}
    assert desc["format"] == "strata.export" and desc["version"] == 1
    assert [n["op"] for n in desc["graph"]["nodes"]][:2] == ["conv2d", "batch_norm"]
    assert desc["signature"]["inputs"][1] == {"kind": "parameter", "name": ep.graph_signature.input_specs[1].name,
                                              "target": "conv.weight"}
    ep2 = load(str(path))
    assert ep2.graph_signature.parameters == ep.graph_signature.parameters
    assert [n.op for n in ep2.graph.nodes] == [n.op for n in ep.graph.nodes]
    assert ep2.graph.print_readable() == ep.graph.print_readable()
    with strata.no_grad():
        same(ep2(x), m(x))
        same(ep2.module()(x), m(x))
    assert isinstance(ep2.state_dict["conv.weight"], nn.Parameter)
    with pytest.raises(ValueError, match="exported with the static size"):
        ep2(strata.randn(1, 3, 8, 8))


def test_loads_without_the_model_source(tmp_path):
    """The archive runs in a fresh process that has never seen this file's classes."""
    strata.manual_seed(4)
    m = MLP().eval()
    x = strata.randn(3, 4)
    path = tmp_path / "mlp.pt2"
    save(export(m, (x,)), path)
    np.save(tmp_path / "x.npy", x.numpy())
    with strata.no_grad():
        np.save(tmp_path / "ref.npy", m(x).numpy())
    code = ("import sys, numpy as np, strata\n"
            "ep = strata.export.load(sys.argv[1])\n"
            "x = strata.from_numpy(np.load(sys.argv[2]))\n"
            "out = ep(x, scale=2.0)\n"
            "assert np.array_equal(out.detach().numpy(), np.load(sys.argv[3])), 'mismatch'\n"
            "print(sorted(dict(ep.module().named_parameters())))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "x.npy"), str(tmp_path / "ref.npy")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "layers.0.weight" in r.stdout


def test_roundtrip_wrapped_numbers_devices_and_factories():
    def f(x):
        y = 1 - x * 2.5 + strata.ones(3, dtype=strata.float64, device=x.device)
        z = strata.cat([x, x], 0).view(2, 3).sum(1, keepdim=True)
        return y, z, (x ** 2).to(strata.int32)

    x = strata.randn(3)
    ep = export(f, (x,))
    ep2 = load(_roundtrip(ep))
    assert ep2.graph.print_readable() == ep.graph.print_readable()
    for a, b in zip(ep2(x), f(x)):
        same(a, b)


def test_load_rejects_bad_archives(tmp_path):
    p = tmp_path / "x.pt2"
    p.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a zip"):
        load(str(p))
    ep = export(lambda x: x.exp(), (strata.randn(2),))
    buf = _roundtrip(ep)
    with zipfile.ZipFile(buf) as z:
        desc = json.loads(z.read("strata_export/program.json"))
        tensors = z.read("strata_export/tensors.safetensors")
    desc["graph"]["nodes"][0]["schema"] = "exp(Tensor self) -> Tensor"

    def write(d):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("strata_export/program.json", json.dumps(d))
            z.writestr("strata_export/tensors.safetensors", tensors)
        out.seek(0)
        return out

    with pytest.raises(ValueError, match="changed its schema"):
        load(write(desc))
    desc["graph"]["nodes"][0]["op"] = "no_such_op"
    with pytest.raises(ValueError, match="does not have"):
        load(write(desc))
    desc["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        load(write(desc))


def test_graph_add_node():
    g = _compile.Graph()
    x = g.add_input("x", strata.empty(2, 3, device="meta"), device="cpu")
    w = g.add_input("w", strata.empty(4, 3, device="meta"), device="cpu")
    (lin,) = g.add_node("linear", [g.value(x), g.value(w), None], source="here: linear")
    (mul,) = g.add_node("mul", [g.value(lin), 2.0, None])
    (cat,) = g.add_node("cat", [[g.value(mul), g.value(lin)], 1, None])
    (ones,) = g.add_node("ones", [[2, 8], None, _compile.GraphDevice(), None])
    (add,) = g.add_node("add", [g.value(cat), g.value(ones), 1, None], grad_enabled=False)
    g.set_outputs([add])
    nodes = g.nodes
    assert [n.op for n in nodes] == ["linear", "mul", "cat", "ones", "add"]
    assert nodes[0].source == "here: linear" and nodes[4].grad_enabled is False and nodes[0].grad_enabled
    assert isinstance(nodes[3].args[2], _compile.GraphDevice)
    assert g.value(add).shape == (2, 8) and g.value(add).dtype == strata.float32
    xr, wr = strata.randn(2, 3), strata.randn(4, 3)
    (out,) = g.run([xr, wr])
    lr = F.linear(xr, wr)
    same(out, strata.cat([lr * 2.0, lr], 1) + 1)
    # the wrapped number keeps float32 (a Python float, not a float64 tensor)
    assert g.value(mul).dtype == strata.float32
    with pytest.raises(ValueError, match="no op named"):
        g.add_node("definitely_not_an_op", [])
    with pytest.raises(ValueError, match="takes 3 arguments"):
        g.add_node("linear", [g.value(x)])
    with pytest.raises(TypeError, match="argument 'dim'.*expects"):
        g.add_node("cat", [[g.value(x)], "one", None])
    with pytest.raises(TypeError, match="add it with add_constant"):
        g.add_node("mul", [g.value(x), strata.ones(3), None])
    other = _compile.Graph()
    y = other.add_input("y", strata.empty(3, device="meta"))
    with pytest.raises(ValueError, match="another graph"):
        g.add_node("exp", [other.value(y), None])
    n_before = len(g.nodes)
    with pytest.raises(Exception):
        g.add_node("mm", [g.value(x), g.value(x), None])  # shape error: nothing added
    assert len(g.nodes) == n_before


def test_value_constant_property():
    g = _compile.Graph()
    c = g.add_constant(strata.tensor([1.0, 2.0]), "k")
    n = g.add_constant(3)
    assert strata.equal(g.value(c).constant, strata.tensor([1.0, 2.0]))
    assert g.value(n).constant == 3
    x = g.add_input("x", strata.empty(2, device="meta"))
    assert g.value(x).constant is None
