"""strata.onnx.export: the captured graph lowered to ONNX, checked with onnx.checker and run in
onnxruntime against eager strata, with dynamic axes run at other sizes."""

import io
import math

import numpy as np
import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def to_onnx(model, args, **kw):
    buf = io.BytesIO()
    strata.onnx.export(model, args, buf, **kw)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    return proto, ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def run_and_compare(sess, model, inputs, names, atol=1e-5, rtol=1e-4):
    feeds = {n: t.numpy() for n, t in zip(names, inputs)}
    got = sess.run(None, feeds)
    with strata.no_grad():
        ref = flat(model(*inputs))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        r = r.detach().numpy()
        assert g.shape == r.shape, (g.shape, r.shape)
        assert g.dtype == r.dtype, (g.dtype, r.dtype)
        np.testing.assert_allclose(g, r, atol=atol, rtol=rtol)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 16), nn.Tanh(),
                                 nn.Linear(16, 4))

    def forward(self, x):
        return F.softmax(self.net(x), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 2 * 2, 10)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)          # [B, 8, 8, 8]
        x = F.relu(self.bn2(self.conv2(x)))                             # [B, 16, 4, 4]
        pooled = F.adaptive_avg_pool2d(x, 1).flatten(1)                 # [B, 16]
        x = F.avg_pool2d(x, 2)                                          # [B, 16, 2, 2]
        return self.fc(x.view(x.size(0), -1)), self.head(pooled)


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        B, T, D = x.shape
        H = self.heads
        q = self.q(x).view(B, T, H, D // H).transpose(1, 2)
        k = self.k(x).view(B, T, H, D // H).transpose(1, 2)
        v = self.v(x).view(B, T, H, D // H).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(D // H), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.o(y)


class TransformerBlock(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, approximate="none"):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.approximate = approximate
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=self.approximate))
        return self.head(x).mean(dim=1)


def test_mlp_matches_eager_and_writes_a_file(tmp_path):
    strata.manual_seed(0)
    m = MLP()
    m.train()  # export runs in eval mode and restores the mode
    x = strata.randn(5, 6)
    path = tmp_path / "mlp.onnx"
    strata.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["probs"])
    assert m.training
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert [o.name for o in proto.graph.output] == ["probs"]
    inits = {i.name for i in proto.graph.initializer}
    assert {"net.0.weight", "net.0.bias", "net.3.weight", "net.5.bias"} <= inits
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    m.eval()
    run_and_compare(sess, m, [x], ["x"])


def test_cnn_conv_bn_relu_pool_linear():
    strata.manual_seed(1)
    m = SmallCNN()
    # non-trivial running statistics
    m.train()
    for _ in range(3):
        m(strata.randn(4, 3, 16, 16))
    m.eval()
    x = strata.randn(2, 3, 16, 16)
    proto, sess = to_onnx(m, (x,), input_names=["img"], output_names=["logits", "feat"])
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool"} <= ops
    run_and_compare(sess, m, [x], ["img"])


def test_cnn_dynamic_batch():
    strata.manual_seed(2)
    m = SmallCNN().eval()
    x = strata.randn(2, 3, 16, 16)
    proto, sess = to_onnx(m, (x,), input_names=["img"], output_names=["logits", "feat"],
                          dynamic_axes={"img": {0: "batch"}, "logits": {0: "batch"}, "feat": {0: "batch"}})
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and [d.dim_value for d in dims[1:]] == [3, 16, 16]
    for b in (2, 5, 1):
        run_and_compare(sess, m, [strata.randn(b, 3, 16, 16)], ["img"])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_transformer_block(approximate):
    strata.manual_seed(3)
    m = TransformerBlock(approximate=approximate).eval()
    ids = strata.randint(0, 50, (2, 7))
    proto, sess = to_onnx(m, (ids,), input_names=["ids"], output_names=["logits"])
    ops = {n.op_type for n in proto.graph.node}
    assert {"Gather", "LayerNormalization", "MatMul", "Softmax"} <= ops
    assert ("Erf" in ops) == (approximate == "none") and ("Tanh" in ops) == (approximate == "tanh")
    run_and_compare(sess, m, [ids], ["ids"])


def test_transformer_dynamic_batch_and_sequence():
    strata.manual_seed(4)
    m = TransformerBlock().eval()
    ids = strata.randint(0, 50, (3, 5))
    proto, sess = to_onnx(m, (ids,), input_names=["ids"], output_names=["logits"],
                          dynamic_axes={"ids": {0: "batch", 1: "seq"}, "logits": {0: "batch"}})
    # the reshapes read the dynamic sizes from the input instead of baking 3 and 5 in
    assert "Shape" in {n.op_type for n in proto.graph.node}
    for b, t in ((3, 5), (4, 5), (1, 9), (6, 2)):
        run_and_compare(sess, m, [strata.randint(0, 50, (b, t))], ["ids"])


def test_dynamic_axes_list_form_names_dims():
    m = MLP().eval()
    proto, sess = to_onnx(m, (strata.randn(3, 6),), input_names=["x"], dynamic_axes={"x": [0]})
    d = proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert d.dim_param == "x_dynamic_axes_1"
    run_and_compare(sess, m, [strata.randn(8, 6)], ["x"])


def test_reshape_without_dynamic_axes_is_static():
    def f(x):
        return x.view(x.size(0), -1) * 2

    proto, sess = to_onnx(f, (strata.randn(3, 4, 5),), input_names=["x"])
    assert "Shape" not in {n.op_type for n in proto.graph.node}
    run_and_compare(sess, f, [strata.randn(3, 4, 5)], ["x"])
    with pytest.raises(Exception):  # sizes are baked in: another batch is refused by onnxruntime
        sess.run(None, {"x": strata.randn(4, 4, 5).numpy()})


def test_elementwise_and_shape_ops():
    w = strata.randn(4, 4)

    def f(a, b):
        r = [a + b, a - b, a * b, a / b, a + 2, a - 1.5, 2 * a, 1 - a, a / 3, 3 / (b.abs() + 1), a ** 2,
             b.abs().pow(0.5), a.add(b, alpha=2), a.sub(b, alpha=0.5), a @ b.t(), strata.mm(a, b.t()),
             strata.addmm(b, a, w), strata.addmm(b, a, w, beta=0.5, alpha=2.0), -a, a.exp(), (a.abs() + 1).log(),
             (a.abs() + 1).sqrt(), (a.abs() + 1).rsqrt(), a.sigmoid(), a.tanh(), F.relu(a), F.silu(a),
             F.gelu(a), F.gelu(a, approximate="tanh"), F.softmax(a, 0), F.log_softmax(a, dim=1), a.clone(),
             F.dropout(a, 0.3, training=False), a.mean(), a.mean(1, keepdim=True), a.mean((0, 1)),
             a.sum(), a.sum(-1), a.sum((0, 1), keepdim=True), a.unsqueeze(0), a.unsqueeze(-1).squeeze(-1),
             a.unsqueeze(1).squeeze(), strata.cat([a, b], 0), strata.cat([a, b], dim=-1), a.transpose(0, 1),
             a.reshape(8, 2), a.view(-1), a.flatten(), a.permute(1, 0), a.t().contiguous(),
             a[None].expand(3, 4, 4), a.unsqueeze(1).expand(4, 2, 4), F.layer_norm(a, (4,)),
             strata.bmm(a[None], b[None]), strata.matmul(a, b), a.exp().sum(-1, keepdim=True)]
        return tuple(r)

    a, b = strata.randn(4, 4), strata.randn(4, 4)
    proto, sess = to_onnx(f, (a, b), input_names=["a", "b"])
    run_and_compare(sess, f, [a, b], ["a", "b"], atol=1e-5)


def test_integer_inputs_and_promotion():
    def f(x, i):
        return x * i, i + 1, i * 2.5, (i / 2), i.sum(0)

    x, i = strata.randn(3, 4), strata.randint(0, 9, (3, 4))
    proto, sess = to_onnx(f, (x, i), input_names=["x", "i"])
    run_and_compare(sess, f, [x, i], ["x", "i"])


def test_output_that_is_an_input_and_duplicated_outputs():
    def f(x):
        y = x.relu()
        return x, y, y

    proto, sess = to_onnx(f, (strata.randn(2, 3),), input_names=["x"], output_names=["a", "b", "c"])
    run_and_compare(sess, f, [strata.randn(2, 3)], ["x"])


def test_float64_model():
    m = nn.Linear(3, 2).double()
    x = strata.randn(4, 3, dtype=strata.float64)
    proto, sess = to_onnx(m, (x,), input_names=["x"])
    run_and_compare(sess, m, [x], ["x"])


def test_unmapped_op_names_op_and_line():
    def f(x):
        return strata.cumsum(x, 0) + 1

    with pytest.raises(strata.onnx.UnsupportedOperatorError) as ei:
        strata.onnx.export(f, (strata.randn(3),), io.BytesIO())
    msg = str(ei.value)
    assert "cumsum" in msg and "test_onnx.py" in msg and "strata.cumsum(x, 0)" in msg


def test_graph_break_raises_naming_reason():
    def f(x):
        if x.sum() > 0:  # data-dependent control flow: a graph break
            return x + 1
        return x - 1

    with pytest.raises(strata.export.ExportError) as ei:
        strata.onnx.export(f, (strata.randn(3),), io.BytesIO())
    assert "test_onnx.py" in str(ei.value)


def test_training_mode_batch_norm_is_refused():
    m = nn.BatchNorm1d(3)
    with pytest.raises(strata.onnx.UnsupportedOperatorError, match="training"):
        strata.onnx.export(m, (strata.randn(4, 3),), io.BytesIO(), training="training")
    assert m.training


def test_export_params_false_makes_parameters_inputs():
    m = nn.Linear(3, 2)
    proto = strata.onnx.export(m, (strata.randn(4, 3),), None, input_names=["x"], export_params=False)
    assert [i.name for i in proto.graph.input] == ["x", "weight", "bias"]
    assert not proto.graph.initializer
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = strata.randn(4, 3)
    got = sess.run(None, {"x": x.numpy(), "weight": m.weight.detach().numpy(), "bias": m.bias.detach().numpy()})
    np.testing.assert_allclose(got[0], m(x).detach().numpy(), atol=1e-6)


def test_bad_dynamic_axes_name():
    with pytest.raises(ValueError, match="not an input or output name"):
        strata.onnx.export(MLP(), (strata.randn(2, 6),), io.BytesIO(), input_names=["x"],
                           dynamic_axes={"inp": {0: "b"}})


def test_kwargs_and_trailing_dict():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(3, 3)

        def forward(self, x, scale=1.0, shift=None):
            y = self.l(x) * scale
            return y if shift is None else y + shift

    m = M()
    x, s = strata.randn(2, 3), strata.randn(2, 3)
    proto, sess = to_onnx(m, (x, {"scale": 2.0, "shift": s}), input_names=["x", "shift"])
    got = sess.run(None, {"x": x.numpy(), "shift": s.numpy()})[0]
    np.testing.assert_allclose(got, m(x, scale=2.0, shift=s).detach().numpy(), atol=1e-6)


def test_indexing_comparisons_and_casts():
    def f(x, m):
        a, b = x.chunk(2, -1)
        p, q = x.split(3, 0)
        return (x[:, 1:3], x[0], x[..., :2], x[:, -1], a * b, p - q[:3], x[:, ::2], x.narrow(1, 1, 2),
                strata.where(x > 0, x, 0.0), x.masked_fill(m, -1.0), (x < 0.5).float(), x.to(strata.float64),
                x.ge(x.t()) & m, (x != 0.25) | (x == x), x[:, None, 2])

    x = strata.randn(6, 6)
    m = x.abs() > 0.7
    proto, sess = to_onnx(f, (x, m), input_names=["x", "m"])
    run_and_compare(sess, f, [x, m], ["x", "m"])


class SDPABlock(nn.Module):
    def __init__(self, d=24, heads=3, causal=False):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.heads, self.causal = heads, causal

    def forward(self, x, mask=None):
        B, T, D = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [t.reshape(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


def test_scaled_dot_product_attention_dynamic_batch():
    strata.manual_seed(5)
    m = SDPABlock().eval()
    x = strata.randn(2, 5, 24)
    proto, sess = to_onnx(m, (x,), input_names=["x"], dynamic_axes={"x": {0: "B", 1: "T"}})
    for b, t in ((2, 5), (4, 3), (1, 8)):
        run_and_compare(sess, m, [strata.randn(b, t, 24)], ["x"])


def test_scaled_dot_product_attention_causal_and_masks():
    strata.manual_seed(6)
    x = strata.randn(2, 5, 24)
    m = SDPABlock(causal=True).eval()
    proto, sess = to_onnx(m, (x,), input_names=["x"], dynamic_axes={"x": {0: "B"}})
    for b in (2, 3):
        run_and_compare(sess, m, [strata.randn(b, 5, 24)], ["x"])
    # a dynamic sequence length: the causal mask is built from the sizes at run time (Range, LessOrEqual)
    proto, sess = to_onnx(m, (x,), input_names=["x"], dynamic_axes={"x": {0: "B", 1: "T"}})
    assert "Range" in {n.op_type for n in proto.graph.node}
    for b, t in ((2, 5), (3, 8), (2, 3)):
        run_and_compare(sess, m, [strata.randn(b, t, 24)], ["x"])
    m = SDPABlock().eval()
    for mask in (strata.rand(5, 5) > 0.3, strata.randn(5, 5)):
        if mask.dtype == strata.bool:
            mask[:, 0] = True  # no fully masked row
        proto, sess = to_onnx(m, (x, mask), input_names=["x", "mask"])
        run_and_compare(sess, m, [x, mask], ["x", "mask"])
