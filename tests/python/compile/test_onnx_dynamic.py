"""strata.onnx.export with dynamic axes captured as symbols: dim_params on inputs and outputs, sizes
the model computes from the dynamic dims lowered through Shape/Gather/Concat, and onnxruntime runs
at sizes other than the export's, against eager strata."""

import io
import warnings

import numpy as np
import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata.export import Dim

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def to_onnx(model, args, **kw):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no fallback to the static capture
        strata.onnx.export(model, args, buf, **kw)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    return proto, ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def dims_of(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def compare(sess, model, inputs, names, atol=1e-5):
    got = sess.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
    with strata.no_grad():
        ref = model(*inputs)
    ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == tuple(r.shape)
        np.testing.assert_allclose(g, r.numpy(), atol=atol, rtol=1e-4)


def reshape_targets_are_computed(proto):
    """No Reshape/Expand reads a baked shape initializer: every target is made in the graph."""
    inits = {i.name for i in proto.graph.initializer}
    return all(n.input[1] not in inits for n in proto.graph.node if n.op_type in ("Reshape", "Expand"))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(6, 32), nn.Linear(32, 4)

    def forward(self, x):
        h = F.gelu(self.l1(x))
        return F.log_softmax(self.l2(h), dim=-1)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        feat = F.adaptive_avg_pool2d(x, 1)
        return self.fc(feat.view(feat.size(0), -1)), x


class Block(nn.Module):
    def __init__(self, d=32, h=4, vocab=50, max_len=64):
        super().__init__()
        self.h = h
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids) + self.pos(strata.arange(t))
        d = x.size(-1)
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.h) ** 0.5)
        mask = strata.ones(t, t).tril() == 0
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(x)


def test_mlp_dynamic_batch():
    strata.manual_seed(0)
    m = MLP().eval()
    proto, sess = to_onnx(m, (strata.randn(3, 6),), input_names=["x"], output_names=["logp"],
                          dynamic_axes={"x": {0: "batch"}, "logp": {0: "batch"}})
    assert dims_of(proto.graph.input[0]) == ["batch", 6]
    assert dims_of(proto.graph.output[0]) == ["batch", 4]
    for b in (3, 1, 8, 33):
        compare(sess, m, [strata.randn(b, 6)], ["x"])


def test_conv_net_dynamic_batch_and_image_size():
    strata.manual_seed(1)
    m = ConvNet().eval()
    proto, sess = to_onnx(m, (strata.randn(2, 3, 16, 16),), input_names=["img"], output_names=["logits", "fmap"],
                          dynamic_axes={"img": {0: "batch", 2: "height", 3: "width"}})
    assert dims_of(proto.graph.input[0]) == ["batch", 3, "height", "width"]
    # output dims follow from the symbols: the batch by name, the feature map's sizes as expressions
    assert dims_of(proto.graph.output[0]) == ["batch", 5]
    fmap = dims_of(proto.graph.output[1])
    assert fmap[:2] == ["batch", 16] and all(isinstance(d, str) and "height" in d for d in fmap[2:3])
    assert reshape_targets_are_computed(proto)
    for shape in ((2, 3, 16, 16), (5, 3, 16, 16), (3, 3, 20, 12), (1, 3, 32, 8)):
        compare(sess, m, [strata.randn(*shape)], ["img"])


def test_transformer_block_dynamic_batch_and_sequence():
    strata.manual_seed(2)
    m = Block().eval()
    ids = strata.randint(0, 50, (3, 5))
    proto, sess = to_onnx(m, (ids,), input_names=["ids"], output_names=["logits"],
                          dynamic_axes={"ids": {0: "batch", 1: "seq"}})
    assert dims_of(proto.graph.input[0]) == ["batch", "seq"]
    assert dims_of(proto.graph.output[0]) == ["batch", "seq", 50]   # named from the symbols
    ops = [n.op_type for n in proto.graph.node]
    assert {"Shape", "Gather", "Concat", "Range", "ConstantOfShape"} <= set(ops)
    assert reshape_targets_are_computed(proto)
    for b, t in ((3, 5), (2, 9), (6, 2), (1, 17)):
        compare(sess, m, [strata.randint(0, 50, (b, t))], ["ids"], atol=1e-4)


def test_dynamic_shapes_argument_and_shared_dim_names():
    def f(x, y):
        return x.view(x.size(0), 2, -1).sum(1) + y

    b = Dim("b")
    proto, sess = to_onnx(f, (strata.randn(4, 6), strata.randn(4, 3)), input_names=["x", "y"],
                          dynamic_shapes={"x": {0: b}, "y": {0: b}})
    assert dims_of(proto.graph.input[0])[0] == dims_of(proto.graph.input[1])[0] == "b"
    assert dims_of(proto.graph.output[0]) == ["b", 3]
    for n in (4, 7):
        compare(sess, f, [strata.randn(n, 6), strata.randn(n, 3)], ["x", "y"])
    # dynamic_axes with one name on two inputs: one size
    proto, sess = to_onnx(f, (strata.randn(4, 6), strata.randn(4, 3)), input_names=["x", "y"],
                          dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    assert dims_of(proto.graph.output[0]) == ["n", 3]
    compare(sess, f, [strata.randn(9, 6), strata.randn(9, 3)], ["x", "y"])


def test_sizes_computed_in_python_slices_and_selects():
    def f(x):
        b, t = x.shape
        z = strata.zeros(b, t) + strata.arange(t)
        return (x + z)[:, 1:t - 1], x[:, t - 1], x.narrow(1, 0, t // 2), x[:, None, :].expand(b, 3, t)

    proto, sess = to_onnx(f, (strata.randn(3, 6),), input_names=["x"], dynamic_axes={"x": {0: "b", 1: "t"}})
    outs = [dims_of(o) for o in proto.graph.output]
    assert outs == [["b", "t - 2"], ["b"], ["b", "t//2"], ["b", 3, "t"]]
    for shape in ((3, 6), (2, 9), (5, 4)):
        compare(sess, f, [strata.randn(*shape)], ["x"])


def test_axis_the_model_needs_fixed_warns_and_falls_back():
    m = MLP().eval()
    buf = io.BytesIO()
    with pytest.warns(UserWarning, match=r"(?s)cannot stay symbolic.*x.shape\[1\]"):
        strata.onnx.export(m, (strata.randn(3, 6),), buf, input_names=["x"], dynamic_axes={"x": {0: "b", 1: "f"}})
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()))
    with pytest.raises(strata.export.ExportError, match=r"x.shape\[1\]"):
        strata.onnx.export(m, (strata.randn(3, 6),), io.BytesIO(), dynamic_shapes={"x": {1: Dim("f")}})


def test_reshapes_that_merge_and_split_dynamic_dims_use_the_exact_shapes():
    def f(x):
        b = x.size(0)
        y = x.flatten(0, 1) * 2                   # (b*t, 8)
        z = y.view(-1, 2, 4).sum(1)               # (b*t, 4)
        return z.reshape(b, -1, 4).flatten(1), y.unsqueeze(1).expand(-1, 3, -1)

    proto, sess = to_onnx(f, (strata.randn(3, 5, 8),), input_names=["x"], dynamic_axes={"x": {0: "b", 1: "t"}})
    assert [dims_of(o) for o in proto.graph.output] == [["b", "4*t"], ["b*t", 3, 8]]
    assert reshape_targets_are_computed(proto)
    for shape in ((3, 5, 8), (2, 7, 8), (6, 2, 8)):
        compare(sess, f, [strata.randn(*shape)], ["x"])


def test_chunk_along_a_dynamic_dim_splits_by_the_symbolic_sizes():
    def f(x):
        a, b = x.chunk(2, dim=1)
        return a * 2, b + 1

    proto, sess = to_onnx(f, (strata.randn(3, 8),), input_names=["x"], dynamic_axes={"x": {0: "b", 1: "t"}})
    assert [dims_of(o) for o in proto.graph.output] == [["b", "(t + 1)//2"], ["b", "t//2"]]
    for shape in ((3, 8), (2, 7), (4, 3)):
        compare(sess, f, [strata.randn(*shape)], ["x"])
