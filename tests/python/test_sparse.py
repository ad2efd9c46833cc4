"""Sparse COO tensors (docs/SPARSE.md) against torch: construction and its errors, coalesce, accessors,
conversions, products with autograd into the dense operand, the values and a sparse leaf, arithmetic,
reductions, repr, pickling and torch's checkpoint format both ways, and the clear error every other op
raises for the sparse layout. The GCN layer at the end is the usual research snippet."""

import copy
import io
import pickle

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")

RS = np.random.RandomState(0)
IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]  # (0, 2) twice: uncoalesced
VAL = [3.0, 4.0, 5.0, 1.0, -2.0]


def pair(indices=IDX, values=VAL, size=(3, 3), **kw):
    s = strata.sparse_coo_tensor(strata.tensor(indices), strata.tensor(values), size, **kw)
    t = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), size, **kw)
    return s, t


def npy(x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return (x.to_dense() if x.is_sparse else x).numpy()
    x = x.detach()
    return (x.to_dense() if x.is_sparse else x).numpy()


def same_sparse(s, t):
    assert s.is_sparse and t.is_sparse
    assert tuple(s.shape) == tuple(t.shape)
    assert s.is_coalesced() == t.is_coalesced()
    assert s._nnz() == t._nnz()
    np.testing.assert_array_equal(s._indices().numpy(), t._indices().numpy())
    np.testing.assert_allclose(s._values().detach().numpy(), t._values().detach().numpy(), rtol=1e-6, atol=1e-6)


def test_basic_properties():
    s, t = pair()
    assert isinstance(s, strata.Tensor) and type(s) is strata.Tensor
    assert s.layout is strata.sparse_coo and repr(s.layout) == "strata.sparse_coo"
    assert s.is_sparse and not strata.ones(2).is_sparse and strata.ones(2).layout is strata.strided
    assert tuple(s.shape) == (3, 3) and s.dtype is strata.float32 and s.device.type == "cpu"
    assert s.dim() == 2 and s.sparse_dim() == 2 and s.dense_dim() == 0 and s._nnz() == 5
    assert s.is_coalesced() is False
    np.testing.assert_array_equal(npy(s), npy(t))


def test_size_inference_and_dense_dims():
    s = strata.sparse_coo_tensor(strata.tensor(IDX), strata.tensor(VAL))
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL))
    assert tuple(s.shape) == tuple(t.shape) == (3, 3)
    v = RS.randn(5, 2).astype(np.float32)
    s = strata.sparse_coo_tensor(IDX, strata.tensor(v))  # indices as a list
    t = torch.sparse_coo_tensor(IDX, torch.tensor(v))
    assert tuple(s.shape) == tuple(t.shape) and s.dense_dim() == t.dense_dim() == 1
    np.testing.assert_allclose(npy(s), npy(t))
    e = strata.sparse_coo_tensor(strata.zeros(2, 0, dtype=strata.int64), strata.zeros(0))
    assert tuple(e.shape) == (0, 0) and e.is_coalesced() and e._nnz() == 0
    one = strata.sparse_coo_tensor([[1], [2]], [7.0], (3, 3))
    assert one.is_coalesced() is torch.sparse_coo_tensor([[1], [2]], [7.0], (3, 3)).is_coalesced()


def test_dtype_device_requires_grad_kwargs():
    s = strata.sparse_coo_tensor(IDX, VAL, (3, 3), dtype=strata.float64, requires_grad=True)
    t = torch.sparse_coo_tensor(IDX, VAL, (3, 3), dtype=torch.float64, requires_grad=True)
    assert s.dtype is strata.float64 and s.requires_grad and t.requires_grad
    assert s.to(strata.float32).dtype is strata.float32 and s.to(strata.float32).is_sparse


def test_constructor_errors():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 1 but found index 2"):
        strata.sparse_coo_tensor(IDX, VAL, (1, 3))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        strata.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (3,), check_invariants=True)
    with strata.sparse.check_sparse_tensor_invariants():
        with pytest.raises(RuntimeError, match="negative index"):
            strata.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (3,))
    with pytest.raises(RuntimeError, match="must have same nnz"):
        strata.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (3,))
    with pytest.raises(RuntimeError, match="sparse_dim x nnz"):
        strata.sparse_coo_tensor(strata.tensor([0, 1]), strata.tensor([1.0, 2.0]), (3,))
    with pytest.raises(RuntimeError, match="number of dimensions must be sparse_dim"):
        strata.sparse_coo_tensor(IDX, VAL, (3, 3, 3))
    with pytest.raises(RuntimeError, match="int64"):
        strata.sparse_coo_tensor(strata.tensor([[0.0, 1.0]]), strata.tensor([1.0, 2.0]), (3,))


def test_coalesce_matches_torch():
    s, t = pair()
    sc, tc = s.coalesce(), t.coalesce()
    same_sparse(sc, tc)
    assert sc.coalesce() is sc
    np.testing.assert_array_equal(sc.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(sc.values().numpy(), tc.values().numpy())
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        s.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        s.values()
    # random 3-D with many duplicates and a dense dim
    ind = RS.randint(0, 3, size=(2, 40))
    val = RS.randn(40, 2).astype(np.float32)
    s = strata.sparse_coo_tensor(strata.tensor(ind), strata.tensor(val), (3, 3, 2))
    t = torch.sparse_coo_tensor(torch.tensor(ind), torch.tensor(val), (3, 3, 2))
    same_sparse(s.coalesce(), t.coalesce())


def test_to_dense_to_sparse():
    x = RS.randn(4, 3).astype(np.float32)
    x[x < 0.3] = 0
    s, t = strata.tensor(x).to_sparse(), torch.tensor(x).to_sparse()
    same_sparse(s, t)
    np.testing.assert_array_equal(s.to_dense().numpy(), x)
    same_sparse(strata.tensor(x).to_sparse(1), torch.tensor(x).to_sparse(1))
    same_sparse(strata.tensor(x).to_sparse_coo(), torch.tensor(x).to_sparse_coo())
    assert s.to_sparse() is s
    d = strata.ones(2, 2)
    assert d.to_dense() is d


def test_sparse_mask_clone_detach():
    s, t = pair()
    x = RS.randn(3, 3).astype(np.float32)
    same_sparse(strata.tensor(x).sparse_mask(s.coalesce()), torch.tensor(x).sparse_mask(t.coalesce()))
    c = s.clone()
    same_sparse(c, t.clone())
    assert c._values() is not s._values()
    v = strata.tensor(VAL, requires_grad=True)
    sg = strata.sparse_coo_tensor(IDX, v, (3, 3))
    tg = torch.sparse_coo_tensor(IDX, torch.tensor(VAL, requires_grad=True), (3, 3))
    assert sg.requires_grad and tg.requires_grad
    assert sg.is_leaf is tg.is_leaf is False and sg.grad_fn is not None and tg.grad_fn is not None
    dt = sg.detach()
    assert dt.is_sparse and not dt.requires_grad
    np.testing.assert_array_equal(npy(dt), npy(t))
    with pytest.raises(RuntimeError, match="incompatible sizes"):
        strata.ones(2, 2).sparse_mask(s)


@pytest.mark.parametrize("how", ["sparse.mm", "spmm", "mm", "matmul_op", "method_mm"])
def test_spmm_forward_backward_into_dense_and_values(how):
    x = RS.randn(3, 4).astype(np.float32)
    vs, vt = strata.tensor(VAL, requires_grad=True), torch.tensor(VAL, requires_grad=True)
    ds, dt = strata.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    s = strata.sparse_coo_tensor(IDX, vs, (3, 3))
    t = torch.sparse_coo_tensor(IDX, vt, (3, 3))
    f = {"sparse.mm": lambda m, a, b: m.sparse.mm(a, b), "spmm": lambda m, a, b: m.spmm(a, b),
         "mm": lambda m, a, b: m.mm(a, b), "matmul_op": lambda m, a, b: a @ b,
         "method_mm": lambda m, a, b: a.mm(b)}[how]
    os_, ot = f(strata, s, ds), f(torch, t, dt)
    np.testing.assert_allclose(os_.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = RS.randn(3, 4).astype(np.float32)
    os_.backward(strata.tensor(g))
    ot.backward(torch.tensor(g))
    np.testing.assert_allclose(ds.grad.numpy(), dt.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vs.grad.numpy(), vt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_spmm_vector_and_addmm():
    s, t = pair()
    x = RS.randn(3).astype(np.float32)
    np.testing.assert_allclose((s @ strata.tensor(x)).numpy(), (t @ torch.tensor(x)).numpy(), rtol=1e-5)
    b, m = RS.randn(3, 2).astype(np.float32), RS.randn(3, 2).astype(np.float32)
    for fs, ft in ((strata.sparse.addmm, torch.sparse.addmm), (strata.addmm, torch.addmm)):
        r_s = fs(strata.tensor(b), s, strata.tensor(m), beta=0.5, alpha=2.0)
        r_t = ft(torch.tensor(b), t, torch.tensor(m), beta=0.5, alpha=2.0)
        np.testing.assert_allclose(r_s.numpy(), r_t.numpy(), rtol=1e-5, atol=1e-5)
    # dense @ sparse
    a = RS.randn(2, 3).astype(np.float32)
    np.testing.assert_allclose((strata.tensor(a) @ s).numpy(), (torch.tensor(a) @ t).numpy(), rtol=1e-5)


@pytest.mark.parametrize("fn", ["sparse.mm", "mm", "matmul", "addmm", "sparse.addmm"])
def test_sparse_leaf_grad(fn):
    x = RS.randn(3, 2).astype(np.float32)
    s = strata.sparse_coo_tensor(IDX, VAL, (3, 3), requires_grad=True)
    t = torch.sparse_coo_tensor(IDX, VAL, (3, 3), requires_grad=True)
    mod = {"sparse.mm": (strata.sparse.mm, torch.sparse.mm), "mm": (strata.mm, torch.mm),
           "matmul": (strata.matmul, torch.matmul),
           "addmm": (lambda a, b: strata.addmm(strata.ones(3, 2), a, b), lambda a, b: torch.addmm(torch.ones(3, 2), a, b)),
           "sparse.addmm": (lambda a, b: strata.sparse.addmm(strata.ones(3, 2), a, b),
                            lambda a, b: torch.sparse.addmm(torch.ones(3, 2), a, b))}[fn]
    mod[0](s, strata.tensor(x)).sum().backward()
    mod[1](t, torch.tensor(x)).sum().backward()
    assert s.grad.is_sparse == t.grad.is_sparse
    if t.grad.is_sparse:
        same_sparse(s.grad, t.grad)
    else:
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_spmm_errors():
    s, _ = pair()
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(3 != 4\)"):
        strata.sparse.mm(s, strata.ones(4, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        strata.sparse.mm(s, strata.ones(3, 2, dtype=strata.float64))
    with pytest.raises(RuntimeError, match="expected the first argument to be sparse"):
        strata.sparse.mm(strata.ones(3, 3), strata.ones(3, 2))


def test_add_mul_transpose_sum():
    s, t = pair()
    s2, t2 = pair(values=[1.0, 1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(npy(s + s2), npy(t + t2))
    np.testing.assert_allclose(npy(strata.add(s, s2, alpha=2)), npy(torch.add(t, t2, alpha=2)))
    np.testing.assert_allclose(npy(s - s2), npy(t - t2))
    same_sparse(s.coalesce() + s2.coalesce(), t.coalesce() + t2.coalesce())
    d = RS.randn(3, 3).astype(np.float32)
    np.testing.assert_allclose((strata.tensor(d) + s).numpy(), (torch.tensor(d) + t).numpy(), rtol=1e-6)
    np.testing.assert_allclose((s + strata.tensor(d)).numpy(), (torch.tensor(d) + t).numpy(), rtol=1e-6)
    same_sparse(s * 2, t * 2)
    same_sparse(2 * s, 2 * t)
    same_sparse(s / 2, t / 2)
    same_sparse(-s, -t)
    same_sparse(s.coalesce() * strata.tensor(d), t.coalesce() * torch.tensor(d))
    same_sparse(s.t(), t.t())
    same_sparse(s.transpose(0, 1), t.transpose(0, 1))
    np.testing.assert_allclose(s.sum().item(), t.sum().item(), rtol=1e-6)
    for dim in (0, 1):
        same_sparse(strata.sparse.sum(s, dim=dim), torch.sparse.sum(t, dim=dim))
    np.testing.assert_allclose(strata.sparse.sum(s, dim=(0, 1)).numpy(), torch.sparse.sum(t, dim=(0, 1)).numpy())
    with pytest.raises(RuntimeError, match="sizes of self and other to match"):
        s + strata.sparse_coo_tensor([[0], [0]], [1.0], (2, 2))


def test_inplace_valuewise_ops():
    s, t = pair(values=[1.0, -2.0, 3.0, -4.0, 5.0])
    s, t = s.coalesce(), t.coalesce()
    assert s.relu_() is s and s.mul_(3) is s
    t.relu_().mul_(3)
    np.testing.assert_array_equal(s._indices().numpy(), t._indices().numpy())
    np.testing.assert_array_equal(s._values().numpy(), t._values().numpy())


def test_legacy_constructors():
    i, v = strata.tensor(IDX), strata.tensor(VAL)
    s = strata.sparse.FloatTensor(i, v, strata.Size([3, 3]))
    same_sparse(s, torch.sparse.FloatTensor(torch.tensor(IDX), torch.tensor(VAL), torch.Size([3, 3])))
    assert isinstance(s, strata.sparse.FloatTensor) and not isinstance(s, strata.sparse.DoubleTensor)
    e = strata.sparse.FloatTensor(2, 3)
    assert e.is_sparse and tuple(e.shape) == (2, 3) and e._nnz() == 0
    with pytest.raises(TypeError, match="expected values of dtype"):
        strata.sparse.LongTensor(i, v, (3, 3))


def test_repr_matches_torch():
    s, t = pair()
    assert repr(s) == repr(t).replace("torch.", "strata.")
    s64 = strata.sparse_coo_tensor(IDX, VAL, (3, 3), dtype=strata.float64, requires_grad=True)
    t64 = torch.sparse_coo_tensor(IDX, VAL, (3, 3), dtype=torch.float64, requires_grad=True)
    assert repr(s64) == repr(t64).replace("torch.", "strata.")
    e = strata.sparse_coo_tensor(strata.zeros(2, 0, dtype=strata.int64), strata.zeros(0))
    te = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0))
    assert repr(e) == repr(te).replace("torch.", "strata.")
    i = strata.sparse_coo_tensor([[0, 1], [1, 2]], [1, 2])
    ti = torch.sparse_coo_tensor([[0, 1], [1, 2]], [1, 2])
    assert repr(i) == repr(ti).replace("torch.", "strata.")


def test_dense_ops_refuse_sparse():
    s, _ = pair()
    for call in (lambda: strata.exp(s), lambda: s.exp_(), lambda: s.add_(s), lambda: strata.exp(s, out=strata.empty(3, 3)), lambda: strata.cat([s, s]), lambda: s[0],
                 lambda: s.view(9), lambda: strata.nn.functional.linear(strata.ones(2, 3), s)):
        with pytest.raises((NotImplementedError, RuntimeError), match="sparse"):
            call()
    with pytest.raises(NotImplementedError, match="Could not run 'exp' with a sparse tensor"):
        strata.exp(s)
    for name in ("tolist", "numpy", "item"):
        with pytest.raises(RuntimeError, match=f"{name}\\(\\): not supported for sparse tensors"):
            getattr(s, name)()


def test_pickle_deepcopy_and_torch_checkpoints(tmp_path):
    s, t = pair()
    same_sparse(pickle.loads(pickle.dumps(s)), t)
    same_sparse(copy.deepcopy(s.coalesce()), t.coalesce())
    p = tmp_path / "s.pt"
    strata.save({"adj": s, "c": s.coalesce()}, str(p))
    back = torch.load(str(p), weights_only=True)
    same_sparse(s, back["adj"])
    same_sparse(s.coalesce(), back["c"])
    q = tmp_path / "t.pt"
    torch.save({"adj": t, "c": t.coalesce()}, str(q))
    mine = strata.load(str(q), weights_only=True)
    same_sparse(mine["adj"], t)
    same_sparse(mine["c"], t.coalesce())
    assert mine["c"].is_coalesced()


def _normalized_adjacency(n, edges, lib):
    """pygcn's D^-1/2 (A + I) D^-1/2 as a sparse COO tensor."""
    a = np.zeros((n, n), dtype=np.float32)
    for i, j in edges:
        a[i, j] = a[j, i] = 1
    a += np.eye(n, dtype=np.float32)
    d = a.sum(1) ** -0.5
    a = d[:, None] * a * d[None, :]
    r, c = np.nonzero(a)
    return lib.sparse.FloatTensor(lib.LongTensor(np.vstack([r, c])), lib.FloatTensor(a[r, c]),
                                  lib.Size([n, n]))


def test_gcn_layer_forward_backward_matches_torch():
    n, fin, fout = 7, 5, 3
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (0, 6), (1, 4)]
    adj_s, adj_t = _normalized_adjacency(n, edges, strata), _normalized_adjacency(n, edges, torch)
    x = RS.randn(n, fin).astype(np.float32)
    w = RS.randn(fin, fout).astype(np.float32)
    b = RS.randn(fout).astype(np.float32)
    outs, grads = [], []
    for lib, adj in ((strata, adj_s), (torch, adj_t)):
        X = lib.tensor(x, requires_grad=True)
        W = lib.tensor(w, requires_grad=True)
        B = lib.tensor(b, requires_grad=True)
        support = lib.mm(X, W)
        out = lib.spmm(adj, support) + B
        h = lib.nn.functional.relu(out)
        loss = lib.nn.functional.log_softmax(h, dim=1).sum()
        loss.backward()
        outs.append(h.detach().numpy())
        grads.append([X.grad.numpy(), W.grad.numpy(), B.grad.numpy()])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    for a, b_ in zip(grads[0], grads[1]):
        np.testing.assert_allclose(a, b_, rtol=1e-4, atol=1e-5)


def test_gcn_module_trains():
    """A two-layer GCN as an nn.Module; one optimizer step with the sparse adjacency held as a buffer-like
    attribute. Compared with torch step by step."""
    n, fin, hid, ncls = 6, 4, 5, 2
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    x = RS.randn(n, fin).astype(np.float32)
    labels = np.array([0, 1, 0, 1, 0, 1])
    w1, w2 = RS.randn(fin, hid).astype(np.float32) * 0.3, RS.randn(hid, ncls).astype(np.float32) * 0.3
    losses = []
    for lib in (strata, torch):
        adj = _normalized_adjacency(n, edges, lib)
        W1, W2 = lib.nn.Parameter(lib.tensor(w1)), lib.nn.Parameter(lib.tensor(w2))
        opt = lib.optim.SGD([W1, W2], lr=0.5)
        X, Y = lib.tensor(x), lib.tensor(labels)
        run = []
        for _ in range(3):
            opt.zero_grad()
            h = lib.relu(lib.sparse.mm(adj, X @ W1))
            out = lib.sparse.mm(adj, h @ W2)
            loss = lib.nn.functional.cross_entropy(out, Y)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_sparse_softmax_matches_torch(log, dim):
    """GAT-style attention: softmax over each row's edges, gradient into the edge scores."""
    ind = [[0, 0, 1, 2, 2, 2, 0], [1, 2, 0, 0, 1, 2, 1]]  # (0, 1) twice
    val = RS.randn(7).astype(np.float32)
    vs, vt = strata.tensor(val, requires_grad=True), torch.tensor(val, requires_grad=True)
    s = strata.sparse_coo_tensor(ind, vs, (3, 3))
    t = torch.sparse_coo_tensor(ind, vt, (3, 3))
    fs = strata.sparse.log_softmax if log else strata.sparse.softmax
    ft = torch.sparse.log_softmax if log else torch.sparse.softmax
    os_, ot = fs(s, dim), ft(t, dim)
    same_sparse(os_, ot)
    w = RS.randn(3, 3).astype(np.float32)
    (os_.to_dense() * strata.tensor(w)).sum().backward()
    (ot.to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(vs.grad.numpy(), vt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_no_strides_no_data_pointer():
    s, _ = pair()
    with pytest.raises(RuntimeError, match="Sparse tensors do not have strides"):
        s.stride()
    with pytest.raises(RuntimeError, match="doesn't have storage"):
        s.data_ptr()


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("idx", [[2, 0], [1, 1, 2, 0, 1], []])
def test_index_select_matches_torch(dim, idx):
    s, t = pair()
    same_sparse(s.index_select(dim, strata.tensor(idx, dtype=strata.int64)),
                t.index_select(dim, torch.tensor(idx, dtype=torch.int64)))
    with pytest.raises(IndexError, match="out of range"):
        s.index_select(dim, strata.tensor([3]))


PYGCN_SCRIPT = r'''
import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def normalize(mx):
    rowsum = np.array(mx.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    return sp.diags(r_inv).dot(mx)


def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, rs):
        super().__init__()
        self.weight = nn.Parameter(torch.FloatTensor(rs.uniform(-0.3, 0.3, (in_features, out_features))))
        self.bias = nn.Parameter(torch.FloatTensor(rs.uniform(-0.3, 0.3, out_features)))

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        return output + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, rs):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid, rs)
        self.gc2 = GraphConvolution(nhid, nclass, rs)

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


rs = np.random.RandomState(0)
n, nfeat = 30, 8
edges = rs.randint(0, n, size=(60, 2))
adj = sp.coo_matrix((np.ones(60), (edges[:, 0], edges[:, 1])), shape=(n, n), dtype=np.float32)
adj = adj + adj.T.multiply(adj.T > adj) - adj.multiply(adj.T > adj)
adj = normalize(adj + sp.eye(adj.shape[0]))
adj = sparse_mx_to_torch_sparse_tensor(adj)
features = torch.FloatTensor(rs.rand(n, nfeat))
labels = torch.LongTensor(rs.randint(0, 3, n))
model = GCN(nfeat, 16, 3, rs)
optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
losses = []
for epoch in range(5):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output, labels)
    loss_train.backward()
    optimizer.step()
    losses.append(loss_train.item())
print("LOSSES", losses)
print("LAYOUT", adj.layout, adj.is_sparse, adj._nnz())
'''


def test_pygcn_script_runs_unchanged_and_matches_torch(tmp_path):
    """pygcn's utilities and model, verbatim in style (scipy adjacency -> torch.sparse.FloatTensor, torch.spmm),
    run through strata.torch_alias and on torch: the same losses."""
    import os
    import subprocess
    import sys
    pytest.importorskip("scipy")
    script = tmp_path / "pygcn.py"
    script.write_text(PYGCN_SCRIPT)
    here = os.path.dirname(os.path.abspath(strata.__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    out = []
    for run in (["-m", "strata.torch_alias", str(script)], [str(script)]):
        p = subprocess.run([sys.executable, *run], capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        lines = dict(ln.split(" ", 1) for ln in p.stdout.splitlines() if ln.startswith(("LOSSES", "LAYOUT")))
        out.append(lines)
    ours, theirs = out
    np.testing.assert_allclose(eval(ours["LOSSES"]), eval(theirs["LOSSES"]), rtol=1e-5)
    assert ours["LAYOUT"].replace("strata.", "torch.") == theirs["LAYOUT"]
