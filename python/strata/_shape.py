"""Python-only parts of the shape/index ops: torch.split's argument name,
nonzero(as_tuple=True), and the one-argument form of where."""

from . import _C

Tensor = _C.Tensor
_ops = _C._ops


def split(tensor, split_size_or_sections, dim=0):
    """Splits into views of split_size_or_sections (an int size or a list of sizes) along dim."""
    return tuple(_ops.split(tensor, split_size_or_sections, dim))


def _split_method(self, split_size, dim=0):
    return tuple(_ops.split(self, split_size, dim))


def chunk(input, chunks, dim=0):
    return tuple(_ops.chunk(input, chunks, dim))


def _chunk_method(self, chunks, dim=0):
    return tuple(_ops.chunk(self, chunks, dim))


def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the nonzero elements: an (n, ndim) tensor, or one 1-d tensor per dim with as_tuple=True."""
    if as_tuple:
        if out is not None:
            raise TypeError("nonzero(): out= is not supported with as_tuple=True")
        return tuple(_ops._nonzero_numpy(input))
    if out is not None:
        return _ops.nonzero(input, out=out)
    return _ops.nonzero(input)


def _nonzero_method(self, *, as_tuple=False):
    return nonzero(self, as_tuple=as_tuple)


def where(condition, input=None, other=None, *, out=None):
    """where(condition, input, other): elementwise choice; where(condition): nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        if out is not None:
            raise TypeError("where(condition) does not take out=")
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() expects either one argument (condition) or three (condition, input, other)")
    if out is not None:
        return _ops.where(condition, input, other, out=out)
    return _ops.where(condition, input, other)


def _where_method(self, condition, y):
    return _ops.where(condition, self, y)


def _install():
    Tensor.split = _split_method
    Tensor.chunk = _chunk_method
    Tensor.nonzero = _nonzero_method
    Tensor.where = _where_method
    # The generic binding gives every op with out= an in-place method; PyTorch
    # has none for these (their result shape differs from self's).
    for name in ("gather_", "index_select_", "take_along_dim_", "nonzero_", "masked_select_"):
        if name in Tensor.__dict__:
            try:
                delattr(Tensor, name)
            except AttributeError:
                pass


_install()

__all__ = ["split", "chunk", "nonzero", "where"]
