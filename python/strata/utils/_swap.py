"""strata.utils.swap_tensors: exchange two tensors' contents in place."""

from .. import _C


def swap_tensors(t1, t2):
    """Swaps two tensors' data (storage, shape, strides, dtype), requires_grad,
    .grad and instance attributes, keeping each Python object's identity:
    afterwards t1 is what t2 was and the other way round. Only leaf tensors
    can be swapped: a tensor produced by an autograd op keeps its graph
    (RuntimeError), where torch swaps the graph node too."""
    if not (isinstance(t1, _C.Tensor) and isinstance(t2, _C.Tensor)):
        raise TypeError(f"Expected (Tensor, Tensor), got ({type(t1).__name__}, {type(t2).__name__})")
    if t1 is t2:
        return
    for name, t in (("t1", t1), ("t2", t2)):
        if t.grad_fn is not None:
            raise RuntimeError(f"swap_tensors: {name} is not a leaf tensor (it has grad_fn "
                               f"{type(t.grad_fn).__name__}); Strata swaps leaf tensors only")
    if type(t1) is not type(t2):
        t1.__class__, t2.__class__ = type(t2), type(t1)
    rg1, rg2 = t1.requires_grad, t2.requires_grad
    g1, g2 = t1.grad, t2.grad
    d1, d2 = t1.data, t2.data
    t1.requires_grad_(False)
    t2.requires_grad_(False)
    t1.grad = t2.grad = None
    t1.data, t2.data = d2, d1
    t1.requires_grad_(rg2)
    t2.requires_grad_(rg1)
    t1.grad, t2.grad = g2, g1
    dict1 = getattr(t1, "__dict__", None)
    dict2 = getattr(t2, "__dict__", None)
    if dict1 is not None and dict2 is not None:
        a, b = dict(dict1), dict(dict2)
        dict1.clear()
        dict1.update(b)
        dict2.clear()
        dict2.update(a)
