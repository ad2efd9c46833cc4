"""OpInfos of the shape and index ops (cat, stack, split, flip, gather, sort, ...)."""

import itertools

import numpy as np

from .core import ALL, ALL_FLOAT, FLOAT, INT, ErrorInput, OpInfo, SampleInput, make_array, register

F32 = np.float32


def arr(shape, dtype, rng, noncontig=False):
    return make_array(shape, dtype, rng, noncontig=noncontig)


def distinct(shape, dtype, rng):
    """Values without ties (so sort/topk orders are unique): a permutation scaled into range."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return (rng.permutation(n) % 2).astype(bool).reshape(shape)
    v = rng.permutation(n).astype(np.float64)
    if dtype in ("int8", "uint8") or dtype in ("float16", "bfloat16"):
        v = v % 100
    if dtype not in INT and dtype != "bool":
        v = v / 4 - 3
    np_t = F32 if dtype == "bfloat16" else np.dtype(dtype)
    return v.astype(np_t).reshape(shape)


def moved(a, dim):
    return np.moveaxis(a, dim, -1)


# ---- references --------------------------------------------------------------

def ref_cat(tensors, dim=0):
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return np.concatenate(tensors)
    return np.concatenate(kept, axis=dim)


def ref_split(a, split_size, dim=0):
    n = a.shape[dim]
    if isinstance(split_size, (list, tuple)):
        bounds = np.cumsum(split_size)[:-1]
        return tuple(np.split(a, bounds, axis=dim))
    starts = list(range(0, n, split_size)) if split_size > 0 else [0]
    starts = starts or [0]
    return tuple(np.take(a, range(s, min(s + split_size, n)), axis=dim) for s in starts)


def ref_chunk(a, chunks, dim=0):
    n = a.shape[dim]
    if n == 0:
        return tuple(a for _ in range(chunks))
    return ref_split(a, -(-n // chunks), dim)


def ref_gather(a, dim, index):
    a1 = a.reshape(1) if a.ndim == 0 else a
    i1 = index.reshape(1) if index.ndim == 0 else index
    sl = tuple(slice(None) if d == dim % a1.ndim else slice(0, i1.shape[d]) for d in range(a1.ndim))
    r = np.take_along_axis(a1[sl], i1, axis=dim)
    return r.reshape(index.shape)


def _scatter_loop(a, dim, index, src, combine):
    out = a.copy()
    o1 = out.reshape(1) if out.ndim == 0 else out
    i1 = index.reshape(1) if index.ndim == 0 else index
    s1 = None if src is None or np.ndim(src) == 0 and not isinstance(src, np.ndarray) else src
    if isinstance(s1, np.ndarray) and s1.ndim == 0:
        s1 = s1.reshape(1)
    d = dim % o1.ndim
    for pos in itertools.product(*[range(n) for n in i1.shape]):
        tgt = list(pos)
        tgt[d] = i1[pos]
        v = src if s1 is None else s1[pos]
        o1[tuple(tgt)] = combine(o1[tuple(tgt)], v)
    return out


def ref_scatter(a, dim, index, src):
    return _scatter_loop(a, dim, index, src, lambda old, v: v)


def ref_scatter_add(a, dim, index, src):
    return _scatter_loop(a, dim, index, src, lambda old, v: old + v)


def ref_index_select(a, dim, index):
    if a.ndim == 0:
        return a.copy()
    return np.take(a, index.reshape(-1), axis=dim)


def ref_index_add(a, dim, index, source, alpha=1):
    out = a.copy()
    o = out.reshape(1) if out.ndim == 0 else out
    s = source.reshape(1) if source.ndim == 0 else source
    om, sm = np.moveaxis(o, dim, 0), np.moveaxis(s, dim, 0)
    for j, i in enumerate(index.reshape(-1)):
        om[i] = om[i] + sm[j] * alpha
    return out


def ref_take_along_dim(a, indices, dim=None):
    if dim is None:
        return np.take_along_axis(a.reshape(-1), indices.reshape(-1), 0)
    return np.take_along_axis(a, indices, dim)


def ref_masked_select(a, mask):
    ab, mb = np.broadcast_arrays(a, mask)
    return ab[mb]


def _argsort(a, dim, descending):
    if a.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(a, axis=dim, kind="stable")
    # Stable descending: sort the reversed array ascending, reverse back and map indices.
    n = a.shape[dim]
    r = np.argsort(np.flip(a, dim), axis=dim, kind="stable")
    return (n - 1 - np.flip(r, dim)).astype(np.int64)


def ref_sort(a, dim=-1, descending=False, stable=False):
    idx = _argsort(a, dim, descending)
    vals = a.copy() if a.ndim == 0 else np.take_along_axis(a, idx, dim)
    return vals, idx


def ref_argsort(a, dim=-1, descending=False, stable=False):
    return _argsort(a, dim, descending)


def ref_topk(a, k, dim=-1, largest=True, sorted=True):
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    idx = np.take(_argsort(a, dim, largest), range(k), axis=dim)
    return np.take_along_axis(a, idx, dim), idx


# ---- samples -----------------------------------------------------------------

def cat_samples(dtype, rng):
    yield SampleInput(([arr((2, 3), dtype, rng), arr((4, 3), dtype, rng)],), name="dim0")
    yield SampleInput(([arr((2, 3), dtype, rng), arr((2, 1), dtype, rng), arr((2, 2), dtype, rng)],), {"dim": 1})
    yield SampleInput(([arr((2, 3, 4), dtype, rng, noncontig=True), arr((2, 3, 2), dtype, rng)],), {"dim": -1},
                      name="noncontig")
    yield SampleInput(([arr((0, 3), dtype, rng), arr((2, 3), dtype, rng)],), name="zero-size")
    yield SampleInput(([arr((0,), dtype, rng), arr((2, 3), dtype, rng), arr((0,), dtype, rng)],), {"dim": 1},
                      name="legacy empty")
    yield SampleInput(([arr((0,), dtype, rng), arr((0,), dtype, rng)],), name="all empty")
    yield SampleInput(([arr((5,), dtype, rng)],), name="single")
    if dtype in FLOAT:
        yield SampleInput(([arr((2, 3), dtype, rng), arr((2, 3), "int32", rng)],), name="promotion")


def stack_samples(dtype, rng):
    for dim in (0, 1, -1, 2):
        yield SampleInput(([arr((2, 3), dtype, rng), arr((2, 3), dtype, rng, noncontig=True)],), {"dim": dim})
    yield SampleInput(([arr((), dtype, rng), arr((), dtype, rng)],), name="0-d")
    yield SampleInput(([arr((0, 2), dtype, rng)],), {"dim": 1}, name="zero-size")


def split_samples(dtype, rng):
    yield SampleInput((arr((7, 3), dtype, rng), 3), name="int")
    yield SampleInput((arr((7, 3), dtype, rng), 2, 1), name="int dim1")
    yield SampleInput((arr((7, 3), dtype, rng), 10), name="bigger than dim")
    yield SampleInput((arr((7, 4), dtype, rng, noncontig=True), [1, 0, 3], -1), name="sizes noncontig")
    yield SampleInput((arr((0, 3), dtype, rng), 2), name="empty")
    yield SampleInput((arr((0, 3), dtype, rng), 0), name="empty size 0")


def chunk_samples(dtype, rng):
    for shape, chunks, dim in [((7, 3), 3, 0), ((5,), 4, 0), ((6, 4), 2, -1), ((2, 3), 5, 1), ((0, 3), 3, 0)]:
        yield SampleInput((arr(shape, dtype, rng), chunks, dim), name=f"{shape}/{chunks}")


def flip_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), [0, 2]))
    yield SampleInput((arr((2, 3, 4), dtype, rng, noncontig=True), [-1]), name="noncontig")
    yield SampleInput((arr((3, 4), dtype, rng), []), name="no dims")
    yield SampleInput((arr((), dtype, rng), [0]), name="0-d")
    yield SampleInput((arr((0, 4), dtype, rng), [0, 1]), name="zero-size")


def roll_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), 1), name="flat")
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True), -5), name="flat noncontig")
    yield SampleInput((arr((3, 4), dtype, rng), [1, -2], [0, 1]))
    yield SampleInput((arr((3, 4, 2), dtype, rng, noncontig=True), [7], [-2]), name="big shift")
    yield SampleInput((arr((3, 4), dtype, rng), [1, 1], [0, 0]), name="repeated dim")
    yield SampleInput((arr((2, 2, 2, 2, 2, 2), dtype, rng), [1] * 6, list(range(6))), name="six dims")
    yield SampleInput((arr((), dtype, rng), 3), name="0-d")
    yield SampleInput((arr((0, 3), dtype, rng), [1], [1]), name="zero-size")


def ref_roll(a, shifts, dims=None):
    if dims is None or dims == []:
        return np.roll(a, shifts)
    return np.roll(a, shifts, axis=tuple(dims) if isinstance(dims, list) else dims)


def repeat_samples(dtype, rng):
    yield SampleInput((arr((2, 3), dtype, rng), [2, 3]))
    yield SampleInput((arr((2, 3), dtype, rng, noncontig=True), [2, 1, 2]), name="extra dims noncontig")
    yield SampleInput((arr((3,), dtype, rng), [0, 2]), name="zero repeat")
    yield SampleInput((arr((), dtype, rng), [3]), name="0-d")
    yield SampleInput((arr((0, 2), dtype, rng), [2, 2]), name="zero-size")


def tile_samples(dtype, rng):
    yield SampleInput((arr((2, 3), dtype, rng), [2]), name="fewer reps")
    yield SampleInput((arr((2, 3), dtype, rng, noncontig=True), [2, 1, 2]), name="more reps")
    yield SampleInput((arr((), dtype, rng), [2, 2]), name="0-d")


def tri_samples(dtype, rng):
    for diag in (0, 1, -1, 5, -7):
        yield SampleInput((arr((4, 5), dtype, rng), diag), name=f"diag {diag}")
    yield SampleInput((arr((2, 3, 4), dtype, rng, noncontig=True),), name="batched noncontig")
    yield SampleInput((arr((0, 3), dtype, rng),), name="zero-size")


def index_arr(shape, high, rng, low=0):
    return rng.integers(low, high, size=shape).astype(np.int64)


def gather_samples(dtype, rng):
    a = arr((4, 5), dtype, rng)
    yield SampleInput((a, 0, index_arr((3, 5), 4, rng)), name="dim0")
    yield SampleInput((a, 1, index_arr((4, 7), 5, rng)), name="dim1 longer")
    yield SampleInput((a, -1, index_arr((2, 3), 5, rng)), name="smaller index")
    yield SampleInput((arr((3, 6), dtype, rng, noncontig=True), 1, index_arr((3, 2), 3, rng)), name="noncontig")
    yield SampleInput((arr((), dtype, rng), 0, np.array(0)), name="0-d")
    yield SampleInput((a, 1, np.zeros((4, 0), np.int64)), name="empty index")
    yield SampleInput((a, 0, index_arr((2, 2), 4, rng).astype(np.int32)), name="int32 index")


def unique_index(shape, dim, size, rng):
    """Indices unique along dim (scatter with duplicates has no defined winner)."""
    idx = np.empty(shape, np.int64)
    m = np.moveaxis(idx, dim, -1)
    for pos in itertools.product(*[range(n) for n in m.shape[:-1]]):
        m[pos] = rng.permutation(size)[: m.shape[-1]]
    return idx


def scatter_samples(dtype, rng):
    a = arr((4, 5), dtype, rng)
    yield SampleInput((a, 0, unique_index((3, 5), 0, 4, rng), arr((3, 5), dtype, rng)), name="dim0")
    yield SampleInput((a, 1, unique_index((2, 3), 1, 5, rng), arr((3, 4), dtype, rng, noncontig=True)),
                      name="smaller index, larger src")
    yield SampleInput((a, -1, unique_index((4, 2), 1, 5, rng), 1), name="value")
    yield SampleInput((arr((), dtype, rng), 0, np.array(0), arr((), dtype, rng)), name="0-d")
    yield SampleInput((a, 0, np.zeros((0, 5), np.int64), arr((0, 5), dtype, rng)), name="empty index")
    yield SampleInput((a, 0, unique_index((3, 5), 0, 4, rng).astype(np.int32), arr((3, 5), dtype, rng)),
                      name="int32 index")  # torch 2.13 takes int32 indices (test_differential.py)


def scatter_add_samples(dtype, rng):
    a = arr((4, 5), dtype, rng)
    yield SampleInput((a, 0, index_arr((6, 5), 4, rng), arr((6, 5), dtype, rng)), name="duplicates")
    yield SampleInput((a, 1, index_arr((3, 8), 5, rng), arr((4, 9), dtype, rng, noncontig=True)), name="noncontig")
    yield SampleInput((arr((), dtype, rng), 0, np.array(0), arr((), dtype, rng)), name="0-d")


def index_select_samples(dtype, rng):
    a = arr((4, 5), dtype, rng)
    yield SampleInput((a, 0, index_arr((6,), 4, rng)), name="dim0 duplicates")
    yield SampleInput((arr((3, 6), dtype, rng, noncontig=True), -1, index_arr((2,), 3, rng)), name="noncontig")
    yield SampleInput((a, 1, np.array(2)), name="0-d index")
    yield SampleInput((arr((), dtype, rng), 0, np.array([0])), name="0-d self")
    yield SampleInput((a, 1, np.zeros((0,), np.int64)), name="empty")
    yield SampleInput((a, 1, np.array([4, 0], np.int32)), name="int32")


def index_add_samples(dtype, rng):
    a = arr((4, 5), dtype, rng)
    yield SampleInput((a, 0, index_arr((6,), 4, rng), arr((6, 5), dtype, rng)), name="duplicates")
    yield SampleInput((a, 1, index_arr((3,), 5, rng), arr((4, 3), dtype, rng)), {"alpha": 2}, name="alpha")
    yield SampleInput((arr((), dtype, rng), 0, np.array([0]), arr((), dtype, rng)), name="0-d")


def take_along_dim_samples(dtype, rng):
    a = arr((3, 4), dtype, rng)
    yield SampleInput((a, index_arr((3, 2), 4, rng), 1))
    yield SampleInput((a, index_arr((1, 4), 3, rng, low=-3), 0), name="broadcast, negative")
    yield SampleInput((arr((3, 1), dtype, rng), index_arr((3, 2), 1, rng), 1), name="broadcast self")
    yield SampleInput((a, index_arr((5,), 12, rng)), name="flattened")
    yield SampleInput((arr((), dtype, rng), np.array(0)), name="0-d flattened")


def nonzero_samples(dtype, rng):
    for shape in [(), (0,), (7,), (3, 4), (2, 0, 3), (2, 3, 4)]:
        a = arr(shape, dtype, rng)
        a = np.where(rng.random(shape) < 0.5, np.zeros_like(a), a)
        yield SampleInput((a,), name=str(shape))
    yield SampleInput((arr((4, 6), dtype, rng, noncontig=True),), name="noncontig")
    if dtype in FLOAT:
        yield SampleInput((np.array([0.0, -0.0, np.nan, np.inf, 1e-30], dtype=dtype),), name="specials")


def masked_select_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), rng.random((3, 4)) > 0.5))
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True), rng.random((4,)) > 0.5), name="broadcast mask")
    yield SampleInput((arr((1, 4), dtype, rng), rng.random((3, 1)) > 0.5), name="broadcast both")
    yield SampleInput((arr((), dtype, rng), np.array(True)), name="0-d")
    yield SampleInput((arr((0, 4), dtype, rng), rng.random((4,)) > 0.5), name="empty")


def sort_samples(dtype, rng):
    for desc in (False, True):
        yield SampleInput((arr((4, 6), dtype, rng),), {"descending": desc}, name=f"ties desc={desc}")
        yield SampleInput((arr((5, 3), dtype, rng, noncontig=True), 0, desc), name=f"dim0 noncontig desc={desc}")
    yield SampleInput((arr((), dtype, rng),), name="0-d")
    yield SampleInput((arr((0, 3), dtype, rng), 0), name="zero-size")
    yield SampleInput((arr((3, 40), dtype, rng),), {"stable": True}, name="stable")
    if dtype in FLOAT:
        a = np.array([[3.0, np.nan, -np.inf, 1.0, np.nan, np.inf, -0.0, 0.0]], dtype=dtype)
        yield SampleInput((a,), name="nan")
        yield SampleInput((a,), {"descending": True}, name="nan desc")


def topk_samples(dtype, rng):
    a = distinct((4, 6), dtype, rng)
    yield SampleInput((a, 3), name="last dim")
    yield SampleInput((a, 2, 0, False), name="smallest dim0")
    yield SampleInput((a, 6, -1), name="k = size")
    yield SampleInput((a, 0), name="k = 0")
    yield SampleInput((distinct((), dtype, rng), 1), name="0-d")
    if dtype in FLOAT:
        yield SampleInput((np.array([1.0, np.nan, 3.0, -np.inf], dtype=dtype), 2), name="nan largest")
        yield SampleInput((np.array([1.0, np.nan, 3.0, -np.inf], dtype=dtype), 2), {"largest": False}, name="nan")


# ---- error inputs ------------------------------------------------------------

def f32(*shape):
    return np.zeros(shape, F32)


def i64(*vals):
    return np.array(vals, np.int64)


def cat_errors(rng):
    yield ErrorInput(([],), error=ValueError, match="non-empty")
    yield ErrorInput(([f32(2, 3), f32(2, 2)],), match=r"Sizes of tensors must match except in dimension 0")
    yield ErrorInput(([f32(2, 3), f32(2)],), match="same number of dimensions")
    yield ErrorInput(([f32(), f32()],), match="zero-dimensional")
    yield ErrorInput(([f32(2, 3)],), {"dim": 2}, error=IndexError, match="Dimension out of range")


def stack_errors(rng):
    yield ErrorInput(([],), error=RuntimeError, match="non-empty")  # torch's category (test_differential.py)
    yield ErrorInput(([f32(2, 3), f32(3, 2)],), match=r"equal size.*\[2, 3\].*\[3, 2\]")
    yield ErrorInput(([f32(2, 3)],), {"dim": 3}, error=IndexError, match="Dimension out of range")


def split_errors(rng):
    yield ErrorInput((f32(3), -1), match="non-negative")
    yield ErrorInput((f32(3), 0), match="can only be 0")
    yield ErrorInput((f32(3), [1, 1]), match="sum exactly to 3")
    yield ErrorInput((f32(3), [4, -1]), match="non-negative")
    yield ErrorInput((f32(3), 1, 1), error=IndexError, match="Dimension out of range")
    yield ErrorInput((f32(), 1), match="at least a 1-dimensional")


def chunk_errors(rng):
    yield ErrorInput((f32(3), 0), match="greater than 0")
    yield ErrorInput((f32(3), 2, 2), error=IndexError, match="Dimension out of range")
    yield ErrorInput((f32(), 2), match="at least a 1-dimensional")


def flip_errors(rng):
    yield ErrorInput((f32(2, 3), [0, 0]), match="multiple times")
    yield ErrorInput((f32(2, 3), [2]), error=IndexError, match="Dimension out of range")


def roll_errors(rng):
    yield ErrorInput((f32(2, 3), [1, 2], [0]), match="must align")
    yield ErrorInput((f32(2, 3), [1], [5]), error=IndexError, match="Dimension out of range")
    yield ErrorInput((f32(2, 3), [1, 2]), match="shifts")


def repeat_errors(rng):
    yield ErrorInput((f32(2, 3), [2]), match="can not be smaller")
    yield ErrorInput((f32(2, 3), [-1, 2]), match="negative dimension")


def tile_errors(rng):
    yield ErrorInput((f32(2, 3), [-1]), match="negative dimension")


def tri_errors(rng):
    yield ErrorInput((f32(3),), match="at least 2 dimensions")
    yield ErrorInput((f32(3, 3),), {"out": np.zeros((3, 3), np.float64)}, match="dtype")


def gather_errors(rng):
    yield ErrorInput((f32(2, 3), 1, i64(5).reshape(1, 1)), error=IndexError,
                     match="index 5 is out of bounds for dimension 1 with size 3")
    yield ErrorInput((f32(2, 3), 1, i64(-1).reshape(1, 1)), error=IndexError, match="index -1 is out of bounds")
    yield ErrorInput((f32(2, 3), 1, np.zeros((1, 1), F32)), match="int32/int64")
    yield ErrorInput((f32(2, 3), 1, i64(0)), match="same number of dimensions")
    yield ErrorInput((f32(2, 3), 1, np.zeros((3, 1), np.int64)), match="no larger than self")
    yield ErrorInput((f32(2, 3), 2, np.zeros((1, 1), np.int64)), error=IndexError, match="Dimension out of range")


def scatter_errors(rng):
    yield ErrorInput((f32(3), 0, i64(5), f32(1)), error=IndexError,
                     match="index 5 is out of bounds for dimension 0 with size 3")
    yield ErrorInput((f32(3), 0, i64(-1), 1.0), error=IndexError, match="index -1 is out of bounds")
    yield ErrorInput((f32(3), 0, i64(0, 1), f32(1)), match="no larger size than src")
    yield ErrorInput((f32(3), 0, i64(0, 1), np.zeros(2, np.float64)), match="dtype")
    yield ErrorInput((f32(3), 0, np.array([0.0], np.float32), f32(1)), match="int32/int64")
    yield ErrorInput((f32(3), 1, i64(0), f32(1)), error=IndexError, match="Dimension out of range")
    yield ErrorInput((f32(3), 0, np.zeros((1, 1), np.int64), f32(1, 1)), match="same number of dimensions")


def scatter_add_errors(rng):
    yield ErrorInput((f32(3), 0, i64(3), f32(1)), error=IndexError, match="index 3 is out of bounds")
    yield ErrorInput((f32(3), 0, i64(0, 1), np.zeros(2, np.float64)), match="dtype")
    yield ErrorInput((f32(2, 3), 0, np.zeros((1, 4), np.int64), f32(1, 4)), match="no larger than self")


def index_select_errors(rng):
    yield ErrorInput((f32(2, 3), 1, i64(5)), error=IndexError,
                     match="index 5 is out of bounds for dimension 1 with size 3")
    yield ErrorInput((f32(2, 3), 1, i64(-1)), error=IndexError, match="out of bounds")
    yield ErrorInput((f32(2, 3), 1, np.zeros((1, 1), np.int64)), error=IndexError, match="vector")
    yield ErrorInput((f32(2, 3), 1, np.zeros(1, F32)), match="int32 or int64")
    yield ErrorInput((f32(2, 3), 2, i64(0)), error=IndexError, match="Dimension out of range")


def index_add_errors(rng):
    yield ErrorInput((f32(3), 0, i64(0, 7), f32(2)), error=IndexError, match="index 7 is out of bounds")
    yield ErrorInput((f32(3), 0, i64(0, 1), np.zeros(2, np.float64)), match="same scalar type")
    yield ErrorInput((f32(3), 0, i64(0, 1), f32(3)), match=r"Number of indices \(2\)")
    yield ErrorInput((f32(3, 2), 0, i64(0, 1), f32(2, 3)), match="source tensor shape must match")
    yield ErrorInput((f32(3), 0, np.zeros((1, 1), np.int64), f32(1)), error=IndexError, match="vector")


def take_along_dim_errors(rng):
    yield ErrorInput((f32(2, 3), i64(5).reshape(1, 1), 1), error=IndexError, match="index 5 is out of bounds")
    yield ErrorInput((f32(2, 3), i64(1), 0), match="same number of dimensions")
    yield ErrorInput((f32(2, 3), np.zeros((1, 1), F32), 0), match="int64")
    yield ErrorInput((f32(2, 3), np.zeros((3, 1), np.int64), 1), match="broadcast")
    yield ErrorInput((f32(2, 3), np.zeros((1, 1), np.int64), 2), error=IndexError, match="Dimension out of range")
    yield ErrorInput((f32(), np.zeros((), np.int64), 0), error=IndexError, match="no dimensions")


def masked_select_errors(rng):
    yield ErrorInput((f32(2, 3), np.array([1, 0, 1])), match="BoolTensor")
    yield ErrorInput((f32(2, 3), np.array([True, False])), match="must match the size")


def sort_errors(rng):
    yield ErrorInput((f32(2, 3), 2), error=IndexError, match="Dimension out of range")


def topk_errors(rng):
    yield ErrorInput((f32(2, 3), 4), match="k out of range")
    yield ErrorInput((f32(2, 3), -1), match="k out of range")
    yield ErrorInput((f32(2, 3), 1, 2), error=IndexError, match="Dimension out of range")
    yield ErrorInput((np.zeros(3, bool), 1), match="bool")


def nonzero_errors(rng):
    yield ErrorInput((f32(2, 3),), {"out": np.zeros((0, 2), F32)}, match="dtype")


register(
    OpInfo("cat", ref=ref_cat, dtypes=ALL, samples=cat_samples, errors=cat_errors),
    OpInfo("stack", ref=lambda tensors, dim=0: np.stack(tensors, axis=dim), dtypes=ALL, samples=stack_samples,
           errors=stack_errors),
    OpInfo("split", ref=ref_split, dtypes=ALL, samples=split_samples, errors=split_errors, method="split"),
    OpInfo("chunk", ref=ref_chunk, dtypes=ALL, samples=chunk_samples, errors=chunk_errors, method="chunk"),
    OpInfo("flip", ref=lambda a, dims: np.flip(a, axis=tuple(dims)) if a.ndim else a.copy(), dtypes=ALL,
           samples=flip_samples, errors=flip_errors, method="flip"),
    OpInfo("roll", ref=ref_roll, dtypes=ALL, samples=roll_samples, errors=roll_errors, method="roll"),
    OpInfo("repeat", ref=lambda a, reps: np.tile(a, reps), dtypes=ALL, samples=repeat_samples, errors=repeat_errors,
           compare_dtype=False),  # torch has Tensor.repeat but no torch.repeat
    OpInfo("tile", ref=lambda a, reps: np.tile(a, reps), dtypes=ALL, samples=tile_samples, errors=tile_errors,
           method="tile"),
    OpInfo("tril", ref=lambda a, k=0: np.tril(a, k), dtypes=ALL, samples=tri_samples, errors=tri_errors,
           method="tril"),
    OpInfo("triu", ref=lambda a, k=0: np.triu(a, k), dtypes=ALL, samples=tri_samples, errors=tri_errors,
           method="triu"),
    OpInfo("gather", ref=ref_gather, dtypes=ALL, samples=gather_samples, errors=gather_errors, method="gather"),
    OpInfo("scatter", ref=ref_scatter, dtypes=ALL, samples=scatter_samples, errors=scatter_errors, method="scatter"),
    OpInfo("scatter_add", ref=ref_scatter_add, dtypes=ALL_FLOAT + INT, samples=scatter_add_samples,
           errors=scatter_add_errors, method="scatter_add", tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}),
    OpInfo("index_select", ref=ref_index_select, dtypes=ALL, samples=index_select_samples,
           errors=index_select_errors, method="index_select"),
    OpInfo("index_add", ref=ref_index_add, dtypes=ALL_FLOAT + INT, samples=index_add_samples, errors=index_add_errors,
           method="index_add", tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}),
    OpInfo("take_along_dim", ref=ref_take_along_dim, dtypes=ALL, samples=take_along_dim_samples,
           errors=take_along_dim_errors, method="take_along_dim"),
    OpInfo("nonzero", ref=lambda a: np.argwhere(a), dtypes=ALL, samples=nonzero_samples, errors=nonzero_errors,
           method="nonzero", meta=False),
    OpInfo("masked_select", ref=ref_masked_select, dtypes=ALL, samples=masked_select_samples,
           errors=masked_select_errors, method="masked_select", meta=False),
    OpInfo("sort", ref=ref_sort, dtypes=ALL, samples=sort_samples, errors=sort_errors, method="sort"),
    OpInfo("argsort", ref=ref_argsort, dtypes=ALL, samples=sort_samples, errors=sort_errors, method="argsort"),
    OpInfo("topk", ref=ref_topk, dtypes=ALL_FLOAT + INT, samples=topk_samples, errors=topk_errors, method="topk"),
)
