"""nn.utils.parametrizations.orthogonal against torch: each map on square, tall, wide and batched weights,
the weight stays orthogonal through optimizer steps, assignment reads back, errors."""

import pytest

import strata as st
from strata.nn.utils import parametrizations as sp
from strata.nn.utils import parametrize

torch = pytest.importorskip("torch")


def _gram_err(W):
    n, k = W.shape[-2], W.shape[-1]
    G = W @ W.mT if n < k else W.mT @ W
    return (G - st.eye(min(n, k), dtype=W.dtype)).abs().max().item()


CASES = [((5, 5), None), ((6, 3), None), ((3, 6), None), ((4, 4), "cayley"), ((6, 3), "cayley"),
         ((6, 3), "matrix_exp"), ((6, 3), "householder"), ((5, 5), "householder"), ((3, 6), "householder")]


@pytest.mark.parametrize("shape,orth_map", CASES)
@pytest.mark.parametrize("dtype", [st.float32, st.float64])
def test_matches_torch_and_stays_orthogonal(shape, orth_map, dtype):
    st.manual_seed(0)
    m = st.nn.Linear(shape[1], shape[0]).to(dtype)
    w0 = m.weight.detach().clone()
    sp.orthogonal(m, orthogonal_map=orth_map)
    assert parametrize.is_parametrized(m, "weight")
    tol = 1e-5 if dtype == st.float32 else 1e-12
    assert _gram_err(m.weight) < tol
    tm = torch.nn.Linear(shape[1], shape[0]).to(getattr(torch, str(dtype).split(".")[-1]))
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(w0.numpy()))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orth_map)
    assert torch.allclose(torch.from_numpy(m.weight.detach().numpy()), tm.weight.detach(), atol=tol * 10)
    opt = st.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        m(st.randn(7, shape[1], dtype=dtype)).pow(2).sum().backward()
        opt.step()
        assert _gram_err(m.weight) < tol * 10


def test_assignment_reads_back_and_batched_weights():
    st.manual_seed(1)
    m = st.nn.Linear(3, 6)
    sp.orthogonal(m)
    Q = st.linalg.qr(st.randn(6, 3))[0]
    m.weight = Q
    assert st.allclose(m.weight, Q, atol=1e-6)

    class P(st.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = st.nn.Parameter(st.randn(2, 4, 4))
    p = sp.orthogonal(P())
    W = p.weight
    assert W.shape == (2, 4, 4)
    for b in range(2):
        assert _gram_err(W[b]) < 1e-5


def test_no_trivialization():
    m = sp.orthogonal(st.nn.Linear(4, 4), orthogonal_map="matrix_exp", use_trivialization=False)
    assert _gram_err(m.weight) < 1e-5
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = st.eye(4)
    with pytest.raises(RuntimeError, match="geqrf"):
        sp.orthogonal(st.nn.Linear(3, 5), orthogonal_map="householder", use_trivialization=False)


def test_errors():
    with pytest.raises(ValueError, match="matrix or batch of matrices"):
        sp.orthogonal(st.nn.Linear(3, 3), name="bias")
    with pytest.raises(ValueError, match="orthogonal_map"):
        sp.orthogonal(st.nn.Linear(3, 3), orthogonal_map="qr")
    m = sp.orthogonal(st.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="shape"):
        m.weight = st.eye(4)
