"""OpInfos of the view ops and of index / index_put, with NumPy references.

Names that torch does not expose at module level (view, expand, unfold, ...)
are tested through strata._C._ops and set compare_dtype=False (the harness
looks the name up in torch for the dtype comparison)."""

import numpy as np

from .core import ALL, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register

SOME = FLOAT + ("float16", "int64", "int8", "bool")


def arr(shape, dtype, rng, noncontig=False):
    return make_array(shape, dtype, rng, noncontig=noncontig)


def transposed(shape, dtype, rng):
    """A non-contiguous (transposed) array whose .T has the given shape."""
    return np.ascontiguousarray(arr(shape[::-1], dtype, rng)).T


# ---- view / reshape -------------------------------------------------------------

def view_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), (6, 4)))
    yield SampleInput((arr((2, 3, 4), dtype, rng), (-1,)))
    yield SampleInput((arr((2, 3, 4), dtype, rng), (4, -1, 3)))
    yield SampleInput((arr((), dtype, rng), (1, 1)), name="0-d")
    yield SampleInput((arr((1,), dtype, rng), ()), name="to 0-d")
    yield SampleInput((arr((0, 3), dtype, rng), (3, 0, 2)), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), (4, 2, 3)), name="noncontig splittable")
    yield SampleInput((transposed((3, 4), dtype, rng), (3, 2, 2)), name="transposed split last dim")


def reshape_samples(dtype, rng):
    yield from view_samples(dtype, rng)
    yield SampleInput((transposed((3, 4), dtype, rng), (12,)), name="needs copy")
    yield SampleInput((transposed((3, 4), dtype, rng), (2, -1)), name="needs copy -1")


def view_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), (5,)), match="invalid for input of size 6")
    yield ErrorInput((np.ones((2, 3), np.float32), (-1, -1)), match="only one dimension can be inferred")
    yield ErrorInput((np.ones((0, 3), np.float32), (-1, 0)), match="ambiguous")
    yield ErrorInput((np.ascontiguousarray(np.ones((4, 3), np.float32)).T, (12,)),
                     match="view size is not compatible with input tensor's size and stride.*reshape")


register(
    OpInfo("_C._ops.view", ref=lambda x, s: x.reshape(s), dtypes=ALL, samples=view_samples, errors=view_errors,
           method="view", compare_dtype=False),
    OpInfo("reshape", ref=lambda x, s: x.reshape(s), dtypes=SOME, samples=reshape_samples, method="reshape"),
)


def flatten_ref(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:])


def flatten_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng),))
    yield SampleInput((arr((2, 3, 4), dtype, rng), 1))
    yield SampleInput((arr((2, 3, 4, 5), dtype, rng), 1, 2))
    yield SampleInput((arr((2, 3, 4), dtype, rng), -2, -1))
    yield SampleInput((arr((), dtype, rng),), name="0-d")
    yield SampleInput((arr((2, 0, 3), dtype, rng),), name="zero-size")
    yield SampleInput((transposed((3, 4), dtype, rng),), name="transposed")


def unflatten_samples(dtype, rng):
    yield SampleInput((arr((2, 12), dtype, rng), 1, (3, 4)))
    yield SampleInput((arr((2, 12), dtype, rng), -1, (2, -1, 3)))
    yield SampleInput((arr((6,), dtype, rng), 0, (6, 1)))
    yield SampleInput((arr((0, 4), dtype, rng), 1, (2, 2)), name="zero-size")
    yield SampleInput((transposed((4, 3), dtype, rng), 0, (2, 2)), name="transposed")


def unflatten_ref(x, dim, sizes):
    dim %= x.ndim
    sizes = list(sizes)
    if -1 in sizes:
        k = sizes.index(-1)
        rest = int(np.prod([s for s in sizes if s != -1]))
        sizes[k] = x.shape[dim] // rest
    return x.reshape(x.shape[:dim] + tuple(sizes) + x.shape[dim + 1:])


def unflatten_errors(rng):
    yield ErrorInput((np.ones((2, 5), np.float32), 1, (2, 2)), match="don't multiply up to the size of dim 1")


register(
    OpInfo("flatten", ref=flatten_ref, dtypes=SOME, samples=flatten_samples, method="flatten"),
    OpInfo("unflatten", ref=unflatten_ref, dtypes=SOME, samples=unflatten_samples, errors=unflatten_errors,
           method="unflatten"),
)


# ---- dim reordering ----------------------------------------------------------------

def two_dim_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), 0, 2))
    yield SampleInput((arr((2, 3, 4), dtype, rng), -1, 1))
    yield SampleInput((arr((3, 4), dtype, rng), 1, 1), name="same dim")
    yield SampleInput((arr((), dtype, rng), 0, -1), name="0-d")
    yield SampleInput((arr((2, 0, 3), dtype, rng), 0, 1), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 0, 1), name="noncontig")


def transpose_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), 0, 2), error=IndexError, match="Dimension out of range")


for _name in ("transpose", "swapaxes", "swapdims"):
    register(OpInfo(_name, ref=lambda x, a, b: np.swapaxes(x, a, b) if x.ndim else x, dtypes=ALL if _name ==
                    "transpose" else SOME, samples=two_dim_samples, errors=transpose_errors, method=_name))


def permute_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), (2, 0, 1)))
    yield SampleInput((arr((2, 3, 4), dtype, rng), (-1, 0, -2)))
    if dtype != "bfloat16":  # st.tensor(0-d array, dtype=bfloat16) comes back 1-d (np.ascontiguousarray)
        yield SampleInput((arr((), dtype, rng), ()), name="0-d")
    yield SampleInput((arr((2, 0, 3), dtype, rng), (1, 2, 0)), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), (1, 0)), name="noncontig")


def permute_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), (0,)), match="number of dims don't match")
    yield ErrorInput((np.ones((2, 3), np.float32), (0, 0)), match="multiple times")


def movedim_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), 0, 2))
    yield SampleInput((arr((2, 3, 4), dtype, rng), (0, 1), (2, 0)))
    yield SampleInput((arr((2, 3, 4, 5), dtype, rng), (-1, 0), (1, -1)))
    yield SampleInput((arr((2, 0, 3), dtype, rng), 1, 0), name="zero-size")


def movedim_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), (0, 1), (1,)), match="same number of dims")
    yield ErrorInput((np.ones((2, 3), np.float32), (0, 0), (0, 1)), match="multiple times")


register(
    OpInfo("permute", ref=lambda x, d: np.transpose(x, d), dtypes=ALL, samples=permute_samples,
           errors=permute_errors, method="permute"),
    OpInfo("movedim", ref=np.moveaxis, dtypes=SOME, samples=movedim_samples, errors=movedim_errors,
           method="movedim"),
    OpInfo("moveaxis", ref=np.moveaxis, dtypes=FLOAT, samples=movedim_samples, method="moveaxis"),
)


def t_samples(dtype, rng):
    for shape in [(), (5,), (3, 4), (0, 3)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))


def t_errors(rng):
    yield ErrorInput((np.ones((2, 3, 4), np.float32),), match="expects a tensor with <= 2 dimensions")


register(OpInfo("t", ref=lambda x: x.T, dtypes=SOME, samples=t_samples, errors=t_errors, method="t"))


# ---- select / slice / narrow -----------------------------------------------------------

def select_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), 0, 1))
    yield SampleInput((arr((3, 4), dtype, rng), 1, -1))
    yield SampleInput((arr((5,), dtype, rng), 0, -5), name="to 0-d")
    yield SampleInput((arr((2, 0, 3), dtype, rng), 2, 1), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 1, 2), name="noncontig")


def select_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), 0, 3), error=IndexError, match="index 3 out of range")
    yield ErrorInput((np.ones((3, 4), np.float32), 1, -5), error=IndexError, match="index -5 out of range")
    yield ErrorInput((np.ones((), np.float32), 0, 0), error=IndexError, match="0-dim")


def slice_ref(x, dim=0, start=None, end=None, step=1):
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


def slice_samples(dtype, rng):
    yield SampleInput((arr((6, 4), dtype, rng), 0, 1, 5, 2))
    yield SampleInput((arr((6, 4), dtype, rng), 1, -3, None, 1))
    yield SampleInput((arr((6, 4), dtype, rng), 0, None, -2, 3))
    yield SampleInput((arr((6, 4), dtype, rng), 0, -100, 100, 1), name="clamped")
    yield SampleInput((arr((6, 4), dtype, rng), 0, 5, 2, 1), name="empty (end < start)")
    yield SampleInput((arr((6, 4), dtype, rng), 0, 2, 3, 2**62), name="huge step")
    yield SampleInput((arr((0, 3), dtype, rng), 0, 1, 2, 1), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 1, 1, None, 2), name="noncontig")


def slice_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), 0, 0, 2, 0), error=ValueError, match="step must be greater")
    yield ErrorInput((np.ones((3, 4), np.float32), 0, 0, 2, -1), error=ValueError, match="step must be greater")


def narrow_samples(dtype, rng):
    yield SampleInput((arr((6, 4), dtype, rng), 0, 1, 3))
    yield SampleInput((arr((6, 4), dtype, rng), -1, -2, 2))
    yield SampleInput((arr((6, 4), dtype, rng), 0, 6, 0), name="empty at end")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 1, 0, 2), name="noncontig")


def narrow_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), 0, 1, 5), match=r"start \(1\) \+ length \(5\) exceeds")
    yield ErrorInput((np.ones((3, 4), np.float32), 0, 5, 0), error=IndexError, match="start out of range")


register(
    OpInfo("select", ref=lambda x, d, i: np.take(x, i, axis=d), dtypes=ALL, samples=select_samples,
           errors=select_errors, method="select"),
    OpInfo("_C._ops.slice", ref=slice_ref, dtypes=ALL, samples=slice_samples, errors=slice_errors, method="slice",
           compare_dtype=False),
    OpInfo("narrow", ref=lambda x, d, s, n: slice_ref(x, d, s % x.shape[d] if s < 0 else s,
                                                      (s % x.shape[d] if s < 0 else s) + n),
           dtypes=SOME, samples=narrow_samples, errors=narrow_errors, method="narrow"),
)


# ---- expand / squeeze / unsqueeze ---------------------------------------------------------

def expand_ref(x, size):
    size = tuple(x.shape[i - (len(size) - x.ndim)] if s == -1 else s for i, s in enumerate(size))
    return np.broadcast_to(x, size)


def expand_samples(dtype, rng):
    yield SampleInput((arr((3, 1), dtype, rng), (3, 4)))
    yield SampleInput((arr((3, 1), dtype, rng), (2, -1, 5)))
    yield SampleInput((arr((), dtype, rng), (2, 3)), name="0-d")
    yield SampleInput((arr((1, 3), dtype, rng), (0, 3)), name="to zero-size")
    yield SampleInput((arr((2, 3), dtype, rng), (2, 3)), name="same")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True)[:1], (5, 6)), name="noncontig")


def expand_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), (3,)), match="must be greater or equal to the number of dim")
    yield ErrorInput((np.ones((2, 3), np.float32), (2, 4)), match=r"expanded size of the tensor \(4\) must match")
    yield ErrorInput((np.ones((3,), np.float32), (-1, 3)), match="leading, non-existing dimension")


register(
    OpInfo("_C._ops.expand", ref=expand_ref, dtypes=ALL, samples=expand_samples, errors=expand_errors,
           method="expand", compare_dtype=False),
    OpInfo("broadcast_to", ref=expand_ref, dtypes=SOME, samples=expand_samples, errors=expand_errors),
)


def squeeze_ref(x, dim=None):
    if dim is None:
        return np.squeeze(x)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if x.ndim == 0:
        return x
    dims = tuple(d % x.ndim for d in dims if x.shape[d] == 1)
    return np.squeeze(x, axis=dims)


def squeeze_samples(dtype, rng):
    yield SampleInput((arr((1, 3, 1, 4), dtype, rng),))
    yield SampleInput((arr((1, 3, 1, 4), dtype, rng), 2))
    yield SampleInput((arr((1, 3, 1, 4), dtype, rng), 1), name="not size 1")
    yield SampleInput((arr((1, 3, 1, 4), dtype, rng), (0, -2)), name="dims")
    yield SampleInput((arr((1, 3, 1, 4), dtype, rng), (0, 1)), name="dims mixed")
    yield SampleInput((arr((), dtype, rng),), name="0-d")
    yield SampleInput((arr((), dtype, rng), 0), name="0-d dim")
    yield SampleInput((arr((1, 0, 1), dtype, rng),), name="zero-size")


def unsqueeze_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), 0))
    yield SampleInput((arr((3, 4), dtype, rng), 2))
    yield SampleInput((arr((3, 4), dtype, rng), -1))
    yield SampleInput((arr((3, 4), dtype, rng), -3))
    yield SampleInput((arr((), dtype, rng), 0), name="0-d")
    yield SampleInput((arr((0, 2), dtype, rng), 1), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 1), name="noncontig")


def unsqueeze_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), 3), error=IndexError, match="Dimension out of range")


def unsqueeze_ref(x, d):
    return np.expand_dims(x, d if d >= 0 else d + x.ndim + 1)


register(
    OpInfo("squeeze", ref=squeeze_ref, dtypes=ALL, samples=squeeze_samples, method="squeeze"),
    OpInfo("unsqueeze", ref=unsqueeze_ref, dtypes=ALL, samples=unsqueeze_samples, errors=unsqueeze_errors,
           method="unsqueeze"),
)


# ---- as_strided / diagonal / unfold ---------------------------------------------------------

def as_strided_ref(x, size, stride, storage_offset=0):
    flat = np.ascontiguousarray(x).reshape(-1)
    return np.lib.stride_tricks.as_strided(flat[storage_offset:], shape=size,
                                           strides=tuple(s * flat.itemsize for s in stride))


def as_strided_samples(dtype, rng):
    yield SampleInput((arr((12,), dtype, rng), (3, 4), (4, 1)))
    yield SampleInput((arr((12,), dtype, rng), (3, 3), (1, 1)), name="overlapping")
    yield SampleInput((arr((12,), dtype, rng), (2, 2), (1, 4), 3), name="offset")
    yield SampleInput((arr((12,), dtype, rng), (4,), (0,), 11), name="stride 0 at the end")
    yield SampleInput((arr((12,), dtype, rng), (0, 5), (9, 9), 12), name="zero-size at the end")
    yield SampleInput((arr((3, 4), dtype, rng), (), (), 5), name="0-d")


def as_strided_errors(rng):
    yield ErrorInput((np.ones((12,), np.float32), (3, 4), (4, 1), 1), match="out of bounds for storage of size 48")
    yield ErrorInput((np.ones((12,), np.float32), (13,), (1,)), match="out of bounds")
    yield ErrorInput((np.ones((12,), np.float32), (2,), (-1,), 5), match="Negative strides")
    yield ErrorInput((np.ones((12,), np.float32), (2,), (1,), -1), match="storage offset")
    yield ErrorInput((np.ones((12,), np.float32), (2, 2), (1,)), match="mismatch in length")
    yield ErrorInput((np.ones((12,), np.float32), (2**20, 2**20), (2**62, 2**62)), match="out of bounds")


def diagonal_samples(dtype, rng):
    yield SampleInput((arr((4, 5), dtype, rng),))
    yield SampleInput((arr((4, 5), dtype, rng), 2))
    yield SampleInput((arr((4, 5), dtype, rng), -3))
    yield SampleInput((arr((4, 5), dtype, rng), 7), name="offset past the end")
    yield SampleInput((arr((4, 5), dtype, rng), -9), name="negative offset past the end")
    yield SampleInput((arr((2, 3, 4), dtype, rng), 1, 2, 0), name="3-d dims swapped")
    yield SampleInput((arr((2, 3, 4), dtype, rng), 0, -1, -2), name="negative dims")
    yield SampleInput((arr((0, 3), dtype, rng),), name="zero-size")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 1), name="noncontig")


def diagonal_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), 0, 1, 1), match="cannot be identical")
    yield ErrorInput((np.ones((3,), np.float32),), error=IndexError, match="Dimension out of range")


def unfold_ref(x, dim, size, step):
    if x.ndim == 0:
        return np.lib.stride_tricks.sliding_window_view(x.reshape(1), size)[::step].reshape(size)
    w = np.lib.stride_tricks.sliding_window_view(x, size, axis=dim)
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(None, None, step)
    return w[tuple(idx)]


def unfold_samples(dtype, rng):
    yield SampleInput((arr((7,), dtype, rng), 0, 3, 2))
    yield SampleInput((arr((3, 8), dtype, rng), 1, 4, 4))
    yield SampleInput((arr((3, 8), dtype, rng), 0, 2, 1))
    yield SampleInput((arr((5,), dtype, rng), 0, 0, 1), name="size 0")
    yield SampleInput((arr((), dtype, rng), 0, 1, 1), name="0-d")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), 1, 2, 1), name="noncontig")


def unfold_errors(rng):
    yield ErrorInput((np.ones((5,), np.float32), 0, 6, 1), match="maximum size for tensor at dimension 0 is 5")
    yield ErrorInput((np.ones((5,), np.float32), 0, 2, 0), match="step is 0 but must be > 0")


register(
    OpInfo("as_strided", ref=as_strided_ref, dtypes=ALL, samples=as_strided_samples, errors=as_strided_errors,
           method="as_strided"),
    OpInfo("diagonal", ref=np.diagonal, dtypes=SOME, samples=diagonal_samples, errors=diagonal_errors,
           method="diagonal"),
    OpInfo("_C._ops.unfold", ref=unfold_ref, dtypes=SOME, samples=unfold_samples, errors=unfold_errors,
           method="unfold", compare_dtype=False),
)


# ---- unbind / alias / *_as ----------------------------------------------------------------------

def unbind_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng),))
    yield SampleInput((arr((3, 4), dtype, rng), 1))
    yield SampleInput((arr((2, 0), dtype, rng), 0), name="zero-size parts")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), -1), name="noncontig")


def unbind_errors(rng):
    yield ErrorInput((np.ones((), np.float32),), error=IndexError, match="no dimensions")


def as_samples(dtype, rng):
    yield SampleInput((arr((2, 6), dtype, rng), arr((3, 4), dtype, rng)))
    yield SampleInput((arr((1, 12), dtype, rng), arr((1, 12), dtype, rng)))
    yield SampleInput((arr((0, 3), dtype, rng), arr((3, 0), dtype, rng)), name="zero-size")


def expand_as_samples(dtype, rng):
    yield SampleInput((arr((3, 1), dtype, rng), arr((2, 3, 4), dtype, rng)))
    yield SampleInput((arr((), dtype, rng), arr((2, 2), dtype, rng)), name="0-d")


register(
    OpInfo("unbind", ref=lambda x, d=0: [np.take(x, i, axis=d) for i in range(x.shape[d])], dtypes=SOME,
           samples=unbind_samples, errors=unbind_errors, method="unbind"),
    OpInfo("_C._ops.alias", ref=lambda x: x, dtypes=SOME, samples=t_samples, compare_dtype=False),
    OpInfo("_C._ops.view_as", ref=lambda x, o: x.reshape(o.shape), dtypes=SOME, samples=as_samples,
           method="view_as", compare_dtype=False),
    OpInfo("_C._ops.reshape_as", ref=lambda x, o: x.reshape(o.shape), dtypes=SOME, samples=as_samples,
           method="reshape_as", compare_dtype=False),
    OpInfo("_C._ops.expand_as", ref=lambda x, o: np.broadcast_to(x, o.shape), dtypes=SOME,
           samples=expand_as_samples, method="expand_as", compare_dtype=False),
)


# ---- index / index_put ----------------------------------------------------------------------------

def index_ref(x, indices, dim=0):
    # uint8 index tensors are masks (as in torch); NumPy would read them as integers.
    indices = tuple(i.astype(bool) if i.dtype == np.uint8 else i for i in indices)
    return x[(slice(None),) * dim + indices]


def ints(*a):
    return np.array(a, dtype=np.int64)


def index_samples(dtype, rng):
    yield SampleInput((arr((5, 3), dtype, rng), [ints(0, 4, -1, 2, 2)]), name="rows")
    yield SampleInput((arr((5, 3), dtype, rng), [ints(0, 4), ints(2, -3)]), name="pairs")
    yield SampleInput((arr((5, 3), dtype, rng), [ints(1, 2)]), kwargs={"dim": 1}, name="columns")
    yield SampleInput((arr((4, 5, 6), dtype, rng), [ints(1, 3).reshape(2, 1), ints(0, 4, 2)]), kwargs={"dim": 1},
                      name="broadcast middle")
    yield SampleInput((arr((4, 5), dtype, rng), [np.array(3, dtype=np.int64)]), name="0-d index")
    yield SampleInput((arr((4, 5), dtype, rng), [ints()]), name="empty index")
    yield SampleInput((arr((4, 0), dtype, rng), [ints(1, 1)]), name="zero-size rows")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), [ints(3, 0)], ), kwargs={"dim": 1}, name="noncontig")
    yield SampleInput((arr((3, 4), dtype, rng), [ints(0, 2).astype(np.int32)]), name="int32 index")


# Masks make the result shape depend on data: no meta run for these.
def index_mask_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), [rng.random((3, 4)) > 0.5]), name="full mask")
    yield SampleInput((arr((3, 4, 2), dtype, rng), [rng.random((4,)) > 0.5]), kwargs={"dim": 1}, name="mask dim 1")
    yield SampleInput((arr((3, 4), dtype, rng), [np.zeros((3,), bool)]), name="all-false mask")
    yield SampleInput((arr((3, 4), dtype, rng), [rng.random((3,)) > 0.5, ints(1)]), name="mask and int")
    yield SampleInput((arr((50, 40), dtype, rng, noncontig=True), [rng.random((50, 40)) > 0.3]),
                      name="noncontig large")
    yield SampleInput((arr((3, 4), dtype, rng), [(rng.random((3,)) > 0.5).astype(np.uint8)]), name="uint8 mask")


def index_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(3)]), error=IndexError,
                     match="index 3 is out of bounds for dimension 0 with size 3")
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(-5)]), kwargs={"dim": 1}, error=IndexError,
                     match="index -5 is out of bounds for dimension 1 with size 4")
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(0, 1), ints(0, 1, 2)]), error=IndexError,
                     match="could not be broadcast together")
    yield ErrorInput((np.ones((3, 4), np.float32), [np.ones((4,), bool)]), error=IndexError,
                     match="shape of the mask")
    yield ErrorInput((np.ones((3, 4), np.float32), [np.ones((2,), np.float32)]), error=IndexError,
                     match="must be long, int, byte or bool")
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(0), ints(0), ints(0)]), error=IndexError,
                     match="too many indices")


def index_put_ref(x, indices, values, accumulate=False, dim=0):
    out = x.copy()
    key = (slice(None),) * dim + tuple(indices)
    if accumulate:
        np.add.at(out, key, values)
    else:
        out[key] = values
    return out


def index_put_samples(dtype, rng):
    yield SampleInput((arr((5, 3), dtype, rng), [ints(0, 4, -1)], arr((3, 3), dtype, rng)), name="rows")
    yield SampleInput((arr((5, 3), dtype, rng), [ints(0, 4, 2)], arr((3,), dtype, rng)), name="broadcast values")
    yield SampleInput((arr((5, 3), dtype, rng), [ints(1, 2), ints(0, 2)], arr((), dtype, rng)), name="0-d values")
    yield SampleInput((arr((4, 5, 6), dtype, rng), [ints(1, 3)], arr((4, 2, 6), dtype, rng)), kwargs={"dim": 1},
                      name="middle")
    yield SampleInput((arr((3, 4), dtype, rng), [ints()], arr((0, 4), dtype, rng)), name="empty")
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True), [ints(5, 0)], arr((4, 2), dtype, rng)),
                      kwargs={"dim": 1}, name="noncontig self")
    if dtype != "bool":
        yield SampleInput((arr((5,), dtype, rng), [ints(0, 2, 0, 0, 4)], arr((5,), dtype, rng), True),
                          name="accumulate duplicates")
        yield SampleInput((arr((3, 4), dtype, rng), [ints(1, 1)], arr((2, 4), dtype, rng), True),
                          name="accumulate rows")


def index_put_mask_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), [rng.random((3, 4)) > 0.5], arr((), dtype, rng)), name="mask")
    yield SampleInput((arr((3, 4), dtype, rng), [np.array([True, False, True])], arr((2, 4), dtype, rng)),
                      name="row mask")
    if dtype != "bool":
        yield SampleInput((arr((3, 4), dtype, rng), [np.array([True, False, True])], arr((4,), dtype, rng), True),
                          name="row mask accumulate")


def index_put_errors(rng):
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(0, 1)], np.ones((3,), np.float32)),
                     match="cannot be broadcast to indexing result of shape")
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(0, 1)], np.ones((4,), np.float64)),
                     match="dtypes match")
    yield ErrorInput((np.ones((3, 4), np.float32), [ints(7)], np.ones((4,), np.float32)), error=IndexError,
                     match="index 7 is out of bounds")


register(
    OpInfo("_C._ops.index", ref=index_ref, dtypes=ALL, samples=index_samples, errors=index_errors,
           compare_dtype=False),
    OpInfo("index", ref=index_ref, dtypes=ALL, samples=index_mask_samples, meta=False, compare_dtype=False),
    OpInfo("index_put", ref=index_put_ref, dtypes=ALL, samples=index_put_samples, errors=index_put_errors,
           method="index_put", compare_dtype=False,
           tol={"float16": (2e-3, 4e-3), "bfloat16": (1.6e-2, 3.2e-2)}),
    OpInfo("_C._ops.index_put", ref=index_put_ref, dtypes=SOME, samples=index_put_mask_samples, meta=False,
           compare_dtype=False),
)
