"""Cholesky factor and lower-triangular solve for MultivariateNormal, batched over the
leading dims. strata.linalg.cholesky / solve_triangular are used when present; otherwise
these column-by-column forms (composed of strata ops, so autograd differentiates them)
serve. They cost O(n) op calls per column: meant for the small event sizes of
distributions, not as a linear-algebra library."""

import strata as _st


def cholesky(a):
    fn = getattr(_st.linalg, "cholesky", None)
    if fn is not None:
        return fn(a)
    return _cholesky(a, raise_if_not_pd=True)[0]


def is_positive_definite(a):
    """Per matrix of the batch: symmetric with a Cholesky factor."""
    sym = ((a - a.transpose(-1, -2)).abs() < 1e-6).flatten(-2).all(-1)
    fn = getattr(_st.linalg, "cholesky_ex", None)
    if fn is not None:
        return sym & (fn(a).info == 0)
    return sym & _cholesky(a, raise_if_not_pd=False)[1]


def _cholesky(a, raise_if_not_pd):
    n = a.shape[-1]
    if a.dim() < 2 or a.shape[-2] != n:
        raise ValueError(f"cholesky: expected a batch of square matrices, got shape {tuple(a.shape)}")
    rows = [[] for _ in range(n)]  # rows[i]: L[i, k] for the columns k done so far
    for j in range(n):
        if j:
            lj = _st.stack(rows[j], -1)                     # L[j, :j]
            d = a[..., j, j] - (lj * lj).sum(-1)
        else:
            d = a[..., j, j]
        good = d > 0
        if raise_if_not_pd and not bool(good.all()):
            raise ValueError("cholesky: the input is not positive-definite (the leading minor of order "
                             f"{j + 1} is not positive)")
        ok = good if j == 0 else ok & good
        d = _st.where(good, d, _st.ones_like(d))
        ljj = d.sqrt()
        below = a[..., j + 1:, j]
        if j and j + 1 < n:
            prev = _st.stack([_st.stack(rows[i], -1) for i in range(j + 1, n)], -2)  # L[j+1:, :j]
            below = below - (prev @ lj.unsqueeze(-1)).squeeze(-1)
        below = below / ljj.unsqueeze(-1)
        rows[j].append(ljj)
        for i in range(j + 1, n):
            rows[i].append(below[..., i - j - 1])
    zero = _st.zeros_like(a[..., 0, 0])
    full_rows = [_st.stack(rows[i] + [zero] * (n - 1 - i), -1) for i in range(n)]
    return _st.stack(full_rows, -2), ok


def solve_tril(l, b):
    """X with L X = B for lower-triangular L (..., n, n) and B (..., n, k)."""
    fn = getattr(_st.linalg, "solve_triangular", None)
    if fn is not None:
        return fn(l, b, upper=False)
    n = l.shape[-1]
    xs = []
    for i in range(n):
        r = b[..., i, :]
        if i:
            prev = _st.stack(xs, -2)                          # X[:i]
            r = r - (l[..., i:i + 1, :i] @ prev).squeeze(-2)
        xs.append(r / l[..., i, i].unsqueeze(-1))
    return _st.stack(xs, -2)
