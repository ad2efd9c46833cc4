"""Tensor.detach(), strata.detach(x) and Tensor.data inside compiled code: recorded as graph nodes (an alias
made under no_grad), not graph breaks; results, requires_grad and gradients as in eager."""

import pytest

import strata as st


def _loss_and_y(x, w):
    y = (x @ w).relu()
    loss = y.sum()
    return loss.detach() * 2, y


def _mixed(x, w):
    y = x @ w
    return st.detach(y) + y.data * 3, y


def _inplace_on_detached(x):
    y = x * 2
    d = y.detach()
    d.add_(1)          # shares y's memory, as in eager
    return y + 0


@pytest.mark.parametrize("fn", [_loss_and_y, _mixed])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_detach_recorded(fn, backend, dynamic):
    st.manual_seed(0)
    x = st.randn(5, 4)
    w = st.randn(4, 3, requires_grad=True)
    e = st._dynamo.explain(fn)(x, w)
    assert e.graph_break_count == 0, e.break_reasons
    cf = st.compile(fn, backend=backend, dynamic=dynamic)
    got = cf(x, w)
    ref = fn(x, w)
    for g, r in zip(got, ref):
        assert g.requires_grad == r.requires_grad
        assert st.equal(g.detach(), r.detach())
    got[1].pow(2).sum().backward()
    g_compiled = w.grad.clone()
    w.grad = None
    ref[1].pow(2).sum().backward()
    assert st.allclose(g_compiled, w.grad)
    assert not got[0].requires_grad and got[0].grad_fn is None


def test_detach_shares_memory():
    x = st.randn(6)
    cf = st.compile(_inplace_on_detached, fullgraph=True)
    assert st.equal(cf(x), _inplace_on_detached(x))
    assert st.equal(cf(x), x * 2 + 1)
