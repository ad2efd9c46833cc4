"""OpInfos of einsum and the structural, counting and index ops of
src/ops/decl/misc_more.def (tensordot, kron, diag_embed, unique, searchsorted,
scatter_reduce, ...)."""

import itertools

import numpy as np

from .core import ALL, FLOAT, INT, ErrorInput, OpInfo, SampleInput, make_array, register

F64 = ("float64",)


def arr(shape, dtype, rng, noncontig=False, low=-3.0, high=3.0):
    return make_array(shape, dtype, rng, low=low, high=high, noncontig=noncontig)


def idx(values):
    return np.asarray(values, dtype=np.int64)


# ---- einsum and contractions ---------------------------------------------------------------

def einsum_samples(dtype, rng):
    for eq, shapes in [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
                       ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 2, 2)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
                       ("ij->ji", [(2, 3)]), ("i,j", [(3,), (4,)]), ("...ij,...jk", [(2, 2, 3), (3, 2)]),
                       ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]), ("i,i->", [(4,), (4,)]),
                       ("ab,cb->ac", [(0, 3), (2, 3)])]:
        yield SampleInput((eq, [arr(s, dtype, rng) for s in shapes]), name=eq)
    yield SampleInput(("ij,jk", [arr((3, 2), dtype, rng, noncontig=True), arr((2, 2), dtype, rng)]),
                      name="noncontig")


def einsum_errors(rng):
    a, b = arr((2, 3), "float32", rng), arr((4, 5), "float32", rng)
    yield ErrorInput(("ij,jk", [a, b]), match="does not broadcast")
    yield ErrorInput(("ij,jk", [a]), match="fewer operands")
    yield ErrorInput(("ijk", [a]), match="number of subscripts")
    yield ErrorInput(("ij->kk", [a]), match="does not appear")
    yield ErrorInput(("i1", [a]), match="invalid subscript")


def tensordot_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), arr((3, 4, 2), dtype, rng), 2))
    yield SampleInput((arr((2, 3), dtype, rng), arr((3, 2), dtype, rng), ([1], [0])), name="lists")
    yield SampleInput((arr((2, 3), dtype, rng, noncontig=True), arr((2, 3), dtype, rng), ([0, 1], [0, 1])),
                      name="full")
    yield SampleInput((arr((2,), dtype, rng), arr((3,), dtype, rng), 0), name="outer")


def tensordot_errors(rng):
    yield ErrorInput((arr((2, 3), "float32", rng), arr((4, 2), "float32", rng), ([1], [0])),
                     match="contracted dimensions need to match")


def ref_addr(m, u, v, beta=1, alpha=1):
    o = np.outer(u, v)
    return (beta * m + alpha * o).astype(np.result_type(m, u)) if beta != 0 else np.broadcast_to(alpha * o, o.shape)


def addr_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), arr((3,), dtype, rng), arr((4,), dtype, rng)))
    yield SampleInput((arr((4,), dtype, rng), arr((3,), dtype, rng), arr((4,), dtype, rng)),
                      {"beta": 0.5, "alpha": 2.0}, name="broadcast self")


def addr_errors(rng):
    yield ErrorInput((arr((3, 4), "float32", rng), arr((3, 1), "float32", rng), arr((4,), "float32", rng)),
                     match="1-D")


def block_diag_ref(*ts):
    ms = [t.reshape(1, -1) if t.ndim < 2 else t for t in ts]
    out = np.zeros((sum(m.shape[0] for m in ms), sum(m.shape[1] for m in ms)), np.result_type(*ts))
    r = c = 0
    for m in ms:
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


def block_diag_samples(dtype, rng):
    yield SampleInput((arr((2, 3), dtype, rng), arr((3,), dtype, rng), arr((), dtype, rng)))
    yield SampleInput((arr((2, 2), dtype, rng, noncontig=True),), name="single")


# ---- structure ----------------------------------------------------------------------------------

def cross_samples(dtype, rng):
    yield SampleInput((arr((4, 3), dtype, rng), arr((4, 3), dtype, rng)))
    yield SampleInput((arr((3, 2), dtype, rng), arr((3, 2), dtype, rng)), {"dim": 0}, name="dim0")


def cross_errors(rng):
    yield ErrorInput((arr((4, 2), "float32", rng), arr((4, 2), "float32", rng)), {"dim": 1},
                     match="must have length 3")


def diff_samples(dtype, rng):
    yield SampleInput((arr((3, 5), dtype, rng),))
    yield SampleInput((arr((3, 5), dtype, rng, noncontig=True), 2, 0), name="n2 dim0 noncontig")
    yield SampleInput((arr((6,), dtype, rng),), {"prepend": arr((2,), dtype, rng), "append": arr((1,), dtype, rng)},
                      name="prepend append")
    yield SampleInput((arr((3,), dtype, rng), 5), name="n beyond length")


def diff_errors(rng):
    yield ErrorInput((arr((), "float32", rng),), match="at least one-dimensional")
    yield ErrorInput((arr((3,), "float32", rng), -1), match="non-negative")


def ref_diff(a, n=1, dim=-1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = prepend
    if append is not None:
        kw["append"] = append
    return np.diff(a, n, axis=dim, **kw)


def rot90_samples(dtype, rng):
    for k in (-1, 0, 1, 2, 3, 6):
        yield SampleInput((arr((2, 3), dtype, rng), k), name=f"k{k}")
    yield SampleInput((arr((2, 3, 4), dtype, rng, noncontig=True), 1, [2, 0]), name="dims")


def rot90_errors(rng):
    yield ErrorInput((arr((2, 3), "float32", rng), 1, [0, 0]), match="rotation dims to be different")
    yield ErrorInput((arr((3,), "float32", rng),), match="total dims >= 2")


def diag_embed_samples(dtype, rng):
    yield SampleInput((arr((2, 3), dtype, rng),))
    yield SampleInput((arr((2, 3), dtype, rng), 1, 0, 2), name="offset dims")
    yield SampleInput((arr((4,), dtype, rng, noncontig=True), -2), name="negative offset")


def ref_diag_embed(a, offset=0, dim1=-2, dim2=-1):
    n = a.shape[-1]
    m = n + abs(offset)
    out = np.zeros(a.shape[:-1] + (m, m), a.dtype)
    for i in range(n):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = a[..., i]
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


def diag_samples(dtype, rng):
    yield SampleInput((arr((3,), dtype, rng),))
    yield SampleInput((arr((3, 4), dtype, rng), 1), name="matrix")
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True), -2), name="matrix noncontig")


def ref_diag(a, k=0):
    return np.diag(a, k).copy()


def atleast_samples(dtype, rng):
    for shape in [(), (3,), (2, 3), (2, 3, 1)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))


def broadcast_tensors_samples(dtype, rng):
    yield SampleInput((arr((3, 1), dtype, rng), arr((4,), dtype, rng), arr((), dtype, rng)))


def meshgrid_samples(dtype, rng):
    for ind in ("ij", "xy"):
        yield SampleInput((arr((3,), dtype, rng), arr((2,), dtype, rng)), {"indexing": ind}, name=ind)


def cartesian_ref(*ts):
    return np.array(list(itertools.product(*ts)), dtype=ts[0].dtype).reshape(-1, len(ts))


def cartesian_samples(dtype, rng):
    yield SampleInput((arr((3,), dtype, rng), arr((2,), dtype, rng)))


def combinations_ref(a, r=2, with_replacement=False):
    f = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(f(a.tolist(), r))
    if r == 0:
        return np.zeros((0,), a.dtype)
    return np.array(rows, dtype=a.dtype).reshape(len(rows), r)


def combinations_samples(dtype, rng):
    a = arr((4,), dtype, rng)
    for r, rep in [(2, False), (3, True), (0, False), (5, False)]:
        yield SampleInput((a, r, rep), name=f"r{r} rep{rep}")


def vander_samples(dtype, rng):
    yield SampleInput((arr((3,), dtype, rng),))
    yield SampleInput((arr((3,), dtype, rng), 4, True), name="N increasing")


def ref_vander(x, N=None, increasing=False):
    r = np.vander(x, N, increasing)
    return r.astype(np.int64) if x.dtype.kind in "iub" else r


def tri_samples(dtype, rng):
    for args in [(3, 3), (4, 3, 1), (3, 5, -1), (0, 2)]:
        yield SampleInput(args, name=str(args))


def ref_tril_indices(row, col, offset=0):
    return np.stack(np.tril_indices(row, offset, col)).astype(np.int64).reshape(2, -1)


def ref_triu_indices(row, col, offset=0):
    return np.stack(np.triu_indices(row, offset, col)).astype(np.int64).reshape(2, -1)


# ---- distances -------------------------------------------------------------------------------

def ref_cdist(a, b, p=2.0, compute_mode=None):
    d = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(a.dtype)
    if np.isinf(p):
        return d.max(-1)
    return (d ** p).sum(-1) ** (1 / p)


def cdist_samples(dtype, rng):
    for p in (2.0, 1.0, 0.0, float("inf"), 3.0):
        yield SampleInput((arr((4, 3), dtype, rng), arr((2, 3), dtype, rng), p), name=f"p{p}")
    yield SampleInput((arr((2, 3, 2), dtype, rng), arr((2, 2, 2), dtype, rng)), name="batched")


def cdist_errors(rng):
    yield ErrorInput((arr((4, 3), "float32", rng), arr((2, 2), "float32", rng)), match="same number of columns")
    yield ErrorInput((arr((4,), "float32", rng), arr((2, 4), "float32", rng)), match="at least 2D")


def ref_pdist(a, p=2.0):
    i, j = np.triu_indices(a.shape[0], 1)
    return ref_cdist(a[i][:, None, :], a[j][:, None, :], p)[:, 0, 0]


def pdist_samples(dtype, rng):
    for p in (2.0, 1.0):
        yield SampleInput((arr((4, 3), dtype, rng), p), name=f"p{p}")


def ref_cos(a, b, dim=1, eps=1e-8):
    a, b = np.broadcast_arrays(a, b)
    na = np.maximum(np.sqrt((a * a).sum(dim, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(dim, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(dim)


def cos_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), arr((3, 4), dtype, rng)))
    yield SampleInput((arr((3, 4), dtype, rng), arr((4,), dtype, rng), -1), name="broadcast")


# ---- counting, search -------------------------------------------------------------------------

def bincount_samples(dtype, rng):
    x = idx([0, 3, 1, 3, 5])
    yield SampleInput((x,))
    yield SampleInput((x, arr((5,), dtype, rng)), name="weights")
    yield SampleInput((x,), {"minlength": 8}, name="minlength")


def ref_bincount(x, weights=None, minlength=0):
    r = np.bincount(x, weights, minlength)
    return r if weights is None else r.astype(weights.dtype if weights.dtype == np.float32 else np.float64)


def bincount_errors(rng):
    yield ErrorInput((idx([1, -1]),), match="non-negative")
    yield ErrorInput((idx([[1]]),), match="1-d")


def histc_samples(dtype, rng):
    yield SampleInput((arr((20,), dtype, rng), 5, -2, 2))
    yield SampleInput((arr((4, 5), dtype, rng), 4), name="data range")


def ref_histc(x, bins=100, min=0, max=0):
    lo, hi = (x.min(), x.max()) if min == max else (min, max)
    return np.histogram(x, bins, (lo, hi))[0].astype(x.dtype)


def histc_errors(rng):
    yield ErrorInput((arr((5,), "float32", rng), 0), match="bins must be > 0")
    yield ErrorInput((arr((5,), "float32", rng), 3, 2, 1), match="max must be larger than min")


def histogram_samples(dtype, rng):
    yield SampleInput((arr((20,), dtype, rng), 5), {"range": (-2.0, 2.0)})
    yield SampleInput((arr((20,), dtype, rng), np.array([-3.0, -1.0, 0.5, 3.0], dtype=dtype)), name="edges")


def ref_histogram(x, bins=100, range=None, weight=None, density=False):
    h, e = np.histogram(x, bins, range, weights=weight, density=density)
    return h.astype(x.dtype), e.astype(x.dtype)


def unique_samples(dtype, rng):
    yield SampleInput((idx([[3, 1, 2], [1, 3, 3]]).astype(dtype),), {"return_inverse": True, "return_counts": True})
    yield SampleInput((idx([[3, 1, 2], [3, 1, 2], [0, 1, 1]]).astype(dtype),), {"dim": 0, "return_counts": True},
                      name="dim")


def ref_unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    r = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
    out = [r[0]]
    if return_inverse:
        out.append(r[1].reshape(x.shape if dim is None else -1))
    if return_counts:
        out.append(r[2])
    return tuple(out) if len(out) > 1 else out[0]


def unique_consecutive_samples(dtype, rng):
    yield SampleInput((idx([1, 1, 2, 2, 3, 1, 1]).astype(dtype),), {"return_inverse": True, "return_counts": True})


def ref_unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    starts = np.concatenate([[True], x[1:] != x[:-1]])
    ids = np.cumsum(starts) - 1
    pos = np.flatnonzero(starts)
    out = [x[starts]]
    if return_inverse:
        out.append(ids.astype(np.int64))
    if return_counts:
        out.append(np.diff(np.append(pos, len(x))).astype(np.int64))
    return tuple(out) if len(out) > 1 else out[0]


def searchsorted_samples(dtype, rng):
    seq = np.array([1, 3, 5, 7, 9], dtype=dtype)
    vals = np.array([[3, 6, 9], [0, 10, 1]], dtype=dtype)
    yield SampleInput((seq, vals))
    yield SampleInput((seq, vals), {"right": True}, name="right")
    yield SampleInput((seq, vals), {"side": "right", "out_int32": True}, name="side int32")


def ref_searchsorted(seq, vals, out_int32=False, right=False, side=None, sorter=None):
    s = "right" if right or side == "right" else "left"
    return np.searchsorted(seq, vals, side=s).astype(np.int32 if out_int32 else np.int64)


def searchsorted_errors(rng):
    seq = arr((5,), "float32", rng)
    yield ErrorInput((seq, seq), {"right": True, "side": "left"}, match="opposites")
    yield ErrorInput((arr((2, 5), "float32", rng), arr((3, 5), "float32", rng)), match="first N-1 dimensions")


def bucketize_samples(dtype, rng):
    yield SampleInput((np.array([[3, 6, 9], [0, 10, 1]], dtype=dtype), np.array([1, 3, 5, 7, 9], dtype=dtype)))
    yield SampleInput((np.array([3, 6, 9], dtype=dtype), np.array([1, 3, 5], dtype=dtype)), {"right": True},
                      name="right")


def isin_samples(dtype, rng):
    yield SampleInput((np.array([[1, 2, 3], [4, 5, 6]], dtype=dtype), np.array([2, 5, 9, 2], dtype=dtype)))
    yield SampleInput((np.array([1, 2, 3], dtype=dtype), np.array([2], dtype=dtype)), {"invert": True},
                      name="invert")


# ---- scatter_reduce and the index ops ---------------------------------------------------------------

def ref_scatter_reduce(a, dim, index, src, reduce, include_self=True):
    out = a.astype(np.float64).copy()
    groups = {}
    for pos in itertools.product(*[range(n) for n in index.shape]):
        tgt = list(pos)
        tgt[dim] = index[pos]
        groups.setdefault(tuple(tgt), []).append(float(src[pos]))
    for tgt, vals in groups.items():
        if include_self:
            vals = [float(a[tgt])] + vals
        f = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
        v = f(vals)
        if reduce == "mean" and a.dtype.kind in "iu":
            v = np.floor(np.sum(vals) / len(vals))
        out[tgt] = v
    return out.astype(a.dtype)


def scatter_reduce_samples(dtype, rng):
    index = idx([[0, 1, 0], [2, 2, 1]])
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            yield SampleInput((arr((2, 4), dtype, rng), 1, index, arr((2, 3), dtype, rng), reduce),
                              {"include_self": inc}, name=f"{reduce} {inc}")
    yield SampleInput((arr((3, 2), dtype, rng), 0, idx([[0, 1], [2, 0]]), arr((3, 3), dtype, rng), "sum"),
                      name="src larger")
    yield SampleInput((arr((2, 4), dtype, rng), 1, index.astype(np.int32), arr((2, 3), dtype, rng), "amax"),
                      name="int32 index")  # torch 2.13 takes int32 indices (test_differential.py)


def scatter_reduce_errors(rng):
    a = arr((3,), "float32", rng)
    yield ErrorInput((a, 0, idx([0]), a, "max"), match="reduce argument must be")
    yield ErrorInput((a, 0, idx([7]), a, "sum"), error=IndexError, match="out of bounds")


def ref_index_reduce(a, dim, index, source, reduce, include_self=True):
    spread = np.broadcast_to(np.moveaxis(index.reshape((-1,) + (1,) * (a.ndim - 1)), 0, dim), source.shape)
    return ref_scatter_reduce(a, dim, spread, source, reduce, include_self)


def index_reduce_samples(dtype, rng):
    for reduce in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            yield SampleInput((arr((3, 2), dtype, rng), 0, idx([2, 0, 2]), arr((3, 2), dtype, rng), reduce),
                              {"include_self": inc}, name=f"{reduce} {inc}")


def ref_index_copy(a, dim, index, source):
    out = a.copy()
    np.moveaxis(out, dim, 0)[index] = np.moveaxis(source, dim, 0)
    return out


def index_copy_samples(dtype, rng):
    yield SampleInput((arr((4, 3), dtype, rng), 0, idx([3, 0]), arr((2, 3), dtype, rng)))
    yield SampleInput((arr((4, 3), dtype, rng, noncontig=True), -1, idx([2]), arr((4, 1), dtype, rng)), name="dim -1")


def index_copy_errors(rng):
    yield ErrorInput((arr((4, 3), "float32", rng), 0, idx([[0]]), arr((1, 3), "float32", rng)),
                     error=IndexError, match="dimension 1 or 0")  # torch's category (test_differential.py)


def index_fill_errors(rng):
    # a matrix index: RuntimeError for index_fill, IndexError for index_copy (torch's categories)
    yield ErrorInput((arr((4, 3), "float32", rng), 0, idx([[0]]), 1.5), error=RuntimeError, match="dimension 1 or 0")


def ref_index_fill(a, dim, index, value):
    out = a.copy()
    np.moveaxis(out, dim, 0)[index] = value
    return out


def index_fill_samples(dtype, rng):
    yield SampleInput((arr((4, 3), dtype, rng), 1, idx([0, 2]), 2))
    yield SampleInput((arr((4, 3), dtype, rng), 0, idx([]), 2), name="no index")


def ref_masked_scatter(a, mask, source):
    out = np.broadcast_to(a, np.broadcast_shapes(a.shape, mask.shape)).copy()
    m = np.broadcast_to(mask, out.shape)
    out[m] = source.reshape(-1)[: m.sum()]
    return out


def masked_scatter_samples(dtype, rng):
    mask = np.array([[True, False, True], [False, True, True]])
    yield SampleInput((arr((2, 3), dtype, rng), mask, arr((5,), dtype, rng)))
    yield SampleInput((arr((2, 3), dtype, rng), mask[0], arr((2, 2), dtype, rng)), name="broadcast mask")


def masked_scatter_errors(rng):
    yield ErrorInput((arr((2, 3), "float32", rng), np.ones((2, 3), bool), arr((2,), "float32", rng)),
                     match="at least")


def ref_put(a, index, source, accumulate=False):
    out = a.copy().reshape(-1)
    if accumulate:
        np.add.at(out, index.reshape(-1), source.reshape(-1))
    else:
        out[index.reshape(-1)] = source.reshape(-1)
    return out.reshape(a.shape)


def put_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), idx([[0, 11], [-1, 5]]) % 12 - 0, arr((2, 2), dtype, rng)))
    yield SampleInput((arr((3, 4), dtype, rng), idx([1, 1, 2]), arr((3,), dtype, rng), True), name="accumulate")


def put_errors(rng):
    yield ErrorInput((arr((3,), "float32", rng), idx([3]), arr((1,), "float32", rng)), error=IndexError,
                     match="out of range")


def take_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), idx([[0, 11], [-1, 5]])))
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True), idx(3)), name="0-d index")


def take_errors(rng):
    yield ErrorInput((arr((3,), "float32", rng), idx([-4])), error=IndexError, match="out of range")


register(
    OpInfo("einsum", ref=lambda eq, ops: np.einsum(eq, *ops), dtypes=FLOAT, samples=einsum_samples,
           errors=einsum_errors),
    OpInfo("tensordot", ref=lambda a, b, dims=2: np.tensordot(a, b, dims), dtypes=FLOAT, samples=tensordot_samples,
           errors=tensordot_errors),
    OpInfo("addr", ref=ref_addr, dtypes=FLOAT, samples=addr_samples, errors=addr_errors, method="addr"),
    OpInfo("kron", ref=np.kron, dtypes=FLOAT + ("int64",), method="kron",
           samples=lambda dt, rng: [SampleInput((arr((2, 3), dt, rng), arr((2, 2), dt, rng))),
                                    SampleInput((arr((2,), dt, rng), arr((2, 1, 2), dt, rng)), name="ranks")]),
    OpInfo("block_diag", ref=block_diag_ref, dtypes=FLOAT + ("int32",), samples=block_diag_samples,
           errors=lambda rng: [ErrorInput((arr((2, 2, 2), "float32", rng),), match="2 or fewer dimensions")]),
    OpInfo("linalg.cross", ref=lambda a, b, dim=-1: np.cross(a, b, axis=dim), dtypes=FLOAT,
           samples=cross_samples, errors=cross_errors),
    OpInfo("cross", ref=lambda a, b, dim=None: np.cross(a, b, axis=dim if dim is not None else -1), dtypes=FLOAT,
           samples=cross_samples, errors=cross_errors, method="cross"),
    OpInfo("trace", ref=lambda a: np.array(np.trace(a), dtype=a.dtype if a.dtype.kind == "f" else np.int64),
           dtypes=FLOAT + ("int32",), method="trace",
           samples=lambda dt, rng: [SampleInput((arr((3, 4), dt, rng),)),
                                    SampleInput((arr((3, 3), dt, rng, noncontig=True),), name="noncontig")],
           errors=lambda rng: [ErrorInput((arr((3,), "float32", rng),), match="expected a matrix")]),
    OpInfo("diff", ref=ref_diff, dtypes=FLOAT + ("int64",), samples=diff_samples, errors=diff_errors, method="diff"),
    OpInfo("rot90", ref=lambda a, k=1, dims=(0, 1): np.rot90(a, k, tuple(dims)).copy(), dtypes=ALL,
           samples=rot90_samples, errors=rot90_errors, method="rot90"),
    OpInfo("fliplr", ref=np.fliplr, dtypes=ALL, method="fliplr",
           samples=lambda dt, rng: [SampleInput((arr((2, 3, 2), dt, rng),))],
           errors=lambda rng: [ErrorInput((arr((3,), "float32", rng),), match=">= 2-d")]),
    OpInfo("flipud", ref=np.flipud, dtypes=ALL, method="flipud",
           samples=lambda dt, rng: [SampleInput((arr((2, 3), dt, rng, noncontig=True),))]),
    OpInfo("diag_embed", ref=ref_diag_embed, dtypes=ALL, samples=diag_embed_samples, method="diag_embed"),
    OpInfo("diag", ref=ref_diag, dtypes=ALL, samples=diag_samples, method="diag",
           errors=lambda rng: [ErrorInput((arr((2, 2, 2), "float32", rng),), match="1D or 2D")]),
    OpInfo("diagflat", ref=lambda a, k=0: np.diagflat(a, k), dtypes=FLOAT, method="diagflat",
           samples=lambda dt, rng: [SampleInput((arr((2, 2), dt, rng), 1))]),
    OpInfo("atleast_1d", ref=np.atleast_1d, dtypes=FLOAT, samples=atleast_samples),
    OpInfo("atleast_2d", ref=np.atleast_2d, dtypes=FLOAT, samples=atleast_samples),
    OpInfo("atleast_3d", ref=np.atleast_3d, dtypes=FLOAT, samples=atleast_samples),
    OpInfo("broadcast_tensors", ref=lambda *ts: tuple(np.broadcast_arrays(*ts)), dtypes=FLOAT,
           samples=broadcast_tensors_samples),
    OpInfo("meshgrid", ref=lambda *ts, indexing="ij": tuple(np.meshgrid(*ts, indexing=indexing)), dtypes=FLOAT,
           samples=meshgrid_samples),
    OpInfo("cartesian_prod", ref=cartesian_ref, dtypes=FLOAT + ("int64",), samples=cartesian_samples),
    OpInfo("combinations", ref=combinations_ref, dtypes=FLOAT + ("int64",), samples=combinations_samples,
           method="combinations",
           errors=lambda rng: [ErrorInput((arr((2, 2), "float32", rng),), match="1D vector")]),
    OpInfo("vander", ref=ref_vander, dtypes=FLOAT + ("int64",), samples=vander_samples),
    OpInfo("tril_indices", ref=ref_tril_indices, dtypes=("int64",), samples=tri_samples, meta=False,
           errors=lambda rng: [ErrorInput((-1, 3), match="non-negative")]),
    OpInfo("triu_indices", ref=ref_triu_indices, dtypes=("int64",), samples=tri_samples, meta=False),
    OpInfo("cdist", ref=ref_cdist, dtypes=FLOAT, samples=cdist_samples, errors=cdist_errors,
           tol={"float32": (1e-4, 1e-4)}),
    OpInfo("pdist", ref=ref_pdist, dtypes=FLOAT, samples=pdist_samples,
           errors=lambda rng: [ErrorInput((arr((3,), "float32", rng),), match="2D")]),
    OpInfo("cosine_similarity", ref=ref_cos, dtypes=FLOAT, samples=cos_samples),
    OpInfo("bincount", ref=ref_bincount, dtypes=FLOAT, samples=bincount_samples, errors=bincount_errors, meta=False,
           method="bincount"),
    OpInfo("histc", ref=ref_histc, dtypes=FLOAT, samples=histc_samples, errors=histc_errors, method="histc"),
    OpInfo("histogram", ref=ref_histogram, dtypes=FLOAT, samples=histogram_samples),
    OpInfo("unique", ref=ref_unique, dtypes=FLOAT + INT, samples=unique_samples, meta=False, method="unique"),
    OpInfo("unique_consecutive", ref=ref_unique_consecutive, dtypes=FLOAT + ("int64",),
           samples=unique_consecutive_samples, meta=False),
    OpInfo("searchsorted", ref=ref_searchsorted, dtypes=FLOAT + ("int64", "int32"), samples=searchsorted_samples,
           errors=searchsorted_errors),
    OpInfo("bucketize", ref=lambda x, b, out_int32=False, right=False: np.searchsorted(
        b, x, side="right" if right else "left").astype(np.int64), dtypes=FLOAT + ("int64",),
        samples=bucketize_samples),
    OpInfo("isin", ref=lambda e, t, assume_unique=False, invert=False: np.isin(e, t, invert=invert),
           dtypes=FLOAT + ("int64",), samples=isin_samples),
    OpInfo("scatter_reduce", ref=ref_scatter_reduce, dtypes=FLOAT + ("int64",), samples=scatter_reduce_samples,
           errors=scatter_reduce_errors, method="scatter_reduce"),
    OpInfo("index_reduce", ref=ref_index_reduce, dtypes=FLOAT + ("int64",), samples=index_reduce_samples,
           method="index_reduce",
           errors=lambda rng: [ErrorInput((arr((3,), "float32", rng), 0, idx([0]), arr((1,), "float32", rng), "sum"),
                                          match="Expected reduce to be one of")]),
    OpInfo("index_copy", ref=ref_index_copy, dtypes=ALL, samples=index_copy_samples, errors=index_copy_errors,
           method="index_copy"),
    OpInfo("index_fill", ref=ref_index_fill, dtypes=FLOAT + ("int64",), samples=index_fill_samples,
           method="index_fill", errors=index_fill_errors),
    OpInfo("masked_scatter", ref=ref_masked_scatter, dtypes=FLOAT + ("int64",), samples=masked_scatter_samples,
           errors=masked_scatter_errors, method="masked_scatter"),
    OpInfo("put", ref=ref_put, dtypes=FLOAT + ("int64",), samples=put_samples, errors=put_errors, method="put"),
    OpInfo("take", ref=lambda a, i: a.reshape(-1)[i], dtypes=ALL, samples=take_samples, errors=take_errors,
           method="take"),
)
