"""Disagreements with torch that strata keeps on purpose, or gaps it has not
closed yet. An entry: (op, variant, substring of the mismatch message,
predicate(args, kwargs) -> bool or None, reason). Variant is "fn", "method",
"out", "inplace", "out_alias" (out= is the first argument), "meta" (every tensor on the meta
device), "meta_mixed" (only the first), "error-input" or "*". Keep this list short and honest: a
disagreement that is a strata bug gets fixed instead, with a sample or error
input in tests/python/opdb that keeps it fixed."""

import numpy as np

from .compare import Arr


def _arrs(x):
    if isinstance(x, Arr):
        yield x
    elif isinstance(x, (list, tuple)):
        for e in x:
            yield from _arrs(e)


def has_nan(args, kwargs):
    return any(a.values.dtype.kind in "fc" and np.isnan(a.values).any() for a in _arrs(args))


def has_inf(args, kwargs):
    return any(a.values.dtype.kind in "fc" and np.isinf(a.values).any() for a in _arrs(args))


def has_huge(limit):
    def pred(args, kwargs):
        return any(a.values.dtype.kind in "fc" and (np.abs(a.values[~np.isnan(a.values)]) >= limit).any()
                   for a in _arrs(args))
    return pred


def is_complex(args, kwargs):
    return any(a.values.dtype.kind == "c" for a in _arrs(args))


def complex_nan_or_inf(args, kwargs):
    return any(a.values.dtype.kind == "c" and (~np.isfinite(a.values)).any() for a in _arrs(args))


def complex_huge(args, kwargs):
    return any(a.values.dtype.kind == "c" and (np.abs(a.values[np.isfinite(a.values)]) >= 1e15).any()
               for a in _arrs(args))


def nan_inf_or_huge(args, kwargs):
    return has_nan(args, kwargs) or has_huge(1e15)(args, kwargs)


def nan_or_inf(args, kwargs):
    return has_nan(args, kwargs) or has_inf(args, kwargs)


def self_not_contiguous(args, kwargs):
    return isinstance(args[0], Arr) and args[0].layout != "contig"


def put_duplicates(args, kwargs):
    index = args[1].values.ravel()
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    return not accumulate and len(np.unique(index % max(args[0].values.size, 1))) < index.size


def scalar_other(args, kwargs):
    return len(args) >= 2 and isinstance(args[1], (bool, int, float))


def is_float64(args, kwargs):
    return args[0].dtype == "float64"


def int_min_wide(args, kwargs):
    """An int32/int64 INT_MIN among the arguments."""
    return any(a.values.dtype in (np.int32, np.int64) and a.values.size
               and (a.values == np.iinfo(a.values.dtype).min).any() for a in _arrs(args))


# Inputs on which torch itself crashes the process: strata runs alone on them (it must
# return or raise) and torch is not called.
TORCH_CRASHES = {
    "lcm": (int_min_wide, "torch 2.13 dies of SIGFPE on lcm(INT_MIN, INT_MIN + 1) for int32/int64 "
                          "(INT_MIN / gcd with gcd = -1); strata wraps like NumPy"),
}


ALLOW = [
    # ---- strata takes more than torch ----------------------------------------------------------
    ("*", "*", "must be Tensor, not", scalar_other,
     "strata's binary ops take a Python number as `other` wherever they take a 0-d tensor; torch's binding "
     "has no Scalar overload for some of them (atan2, hypot, maximum, logaddexp, gcd, logical_and...)"),
    # ---- torch accidents we do not copy --------------------------------------------------------
    ("kron", "*", "view size is not compatible", None,
     "torch's kron calls .view() on a permuted intermediate and fails for some non-contiguous inputs; "
     "the product is well defined and strata computes it"),
    ("gelu_backward", "fn", "could not create a primitive descriptor", None,
     "torch's oneDNN path fails for some strided inputs; strata computes the gradient"),
    ("take_along_dim", "error-input", "torch returns", None,
     "torch does not bounds-check take_along_dim's indices (it reads past the dimension); strata raises IndexError"),
    ("special.airy_ai", "*", "values differ", is_float64,
     "torch's float64 Ai has ~3e-6 absolute error near x=-2 (checked against mpmath); strata's is within 1e-12"),
    *[(f"special.{n}", "*", "NaN positions differ", nan_inf_or_huge,
       "torch's polynomial kernels return a number for some NaN x and NaN (inf - inf in the recurrence) "
       "for |x| ~ 1e30 where the value overflows; strata gives NaN for NaN and +-inf for the overflow")
      for n in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")],
    ("special.zeta", "*", "NaN positions differ", nan_or_inf,
     "torch's Hurwitz zeta gives NaN for q = +inf (strata: the limit 0) and inf for a NaN x at a pole q "
     "(strata: NaN for a NaN argument)"),
    ("special.airy_ai", "*", "NaN positions differ", has_huge(1e15),
     "Ai(x) for x <~ -1e15: the phase of the oscillation is lost in floating point; torch returns NaN, strata "
     "a value within the |x|^(-1/4) envelope"),
    ("nn.functional.gelu", "*", "NaN positions differ", has_inf,
     "torch's float32 gelu gives NaN for +inf in its vector path; gelu(inf) = inf (strata, and torch's scalar "
     "path)"),
    *[(n, "*", ")[1]: NaN positions differ", has_inf,
       "the mean of a row holding +-inf: torch's Welford update gives NaN (inf - inf) where torch.mean gives "
       "+-inf; strata gives +-inf like torch.mean")
      for n in ("var_mean", "std_mean")],
    ("prod", "*", "NaN positions differ", lambda a, k: complex_nan_or_inf(a, k) or complex_huge(a, k),
     "complex prod with an infinite or NaN factor (or one that overflows): torch multiplies its identity 1 + 0j "
     "and then the factors left to right, strata's reduction in another order, and with infinities the textbook "
     "product is not associative (0 * inf and inf - inf appear in one order and not the other)"),
    ("as_strided_scatter", "*", "values differ", self_not_contiguous,
     "torch applies size/stride to a clone whose strides follow the input's memory layout, so its result "
     "depends on it; strata applies them to the row-major order of the input (torch's contiguous result)"),
    ("take_along_dim", "*", "view size is not compatible", None,
     "torch's take_along_dim calls .view() on some strided inputs and fails; strata gathers"),
    ("put", "*", "values differ", put_duplicates,
     "duplicate indices without accumulate: torch documents the result as undefined (it writes in the "
     "source's memory order); strata's last write in row-major order wins"),
    ("kthvalue", "*", ")[1]: values differ", None,
     "the index among tied values is unspecified (torch's quickselect order); the values ([0]) are compared"),
    *[("signbit", v, "does not support non-boolean outputs", None,
       "torch refuses a float out= for signbit only; strata casts the bool result like every other predicate")
      for v in ("out", "out_alias")],
    *[(n, v, "but torch ValueError (alpha argument of type", None,
       "an int tensor with a float alpha: torch raises RuntimeError on CPU but ValueError on meta; strata raises "
       "RuntimeError on both") for n in ("add", "sub") for v in ("meta", "meta_mixed")],
    ("floor_divide", "meta_mixed", "Expected all tensors to be on the same device", None,
     "torch 2.13's floor_divide does not check devices (meta and CPU operands of any shape mix; its add, div, "
     "remainder refuse them); strata refuses them for every op, 0-d CPU operands excepted"),
    ("mvlgamma", "error-input", "torch returns", None,
     "torch 2.13 returns a number for x <= (p-1)/2, outside the domain; strata raises"),
    ("scatter_reduce", "error-input", "torch returns", None,
     "torch 2.13 accepts reduce='max', not among its documented sum/prod/mean/amax/amin; strata raises"),
    ("linalg.svdvals", "error-input", "torch returns", None,
     "strata refuses non-finite input before calling LAPACK; torch returns NaNs"),
    # torch's category for an out-of-range index differs between ops (IndexError for x[i], RuntimeError
    # for gather/scatter/index_select); strata raises IndexError for all of them.
    *[(n, "error-input", "strata raises IndexError, torch RuntimeError", None,
       "out-of-range indices raise IndexError in strata for every op (torch: RuntimeError for this one)")
      for n in ("gather", "scatter", "scatter_add", "scatter_reduce", "index_select")],
    ("_C._ops.slice", "error-input", "strata raises ValueError, torch RuntimeError", None,
     "strata's slice op backs Tensor.__getitem__, where torch raises ValueError for a step <= 0"),
    *[(n, "*", "differ", has_huge(1e9),
       "for a >~ 1e9 torch's Cephes-based value drifts (P(1e9, a - 10 sqrt(a)) = 3.6e-24 for 7.54e-24, "
       "1e-9 off near x = a at 1e14) and its float32 path gives 0.5 or NaN; strata uses Temme's uniform "
       "expansion there, checked against a 40-digit series in test_special.py::test_gammainc_for_huge_a; "
       "and torch gives P(nan, inf) = 1 where strata gives NaN for a NaN argument")
      for n in ("special.gammainc", "special.gammaincc")],
]


def allowed(op, variant, message, args=None, kwargs=None):
    for name, var, needle, pred, _reason in ALLOW:
        if name in ("*", op) and var in ("*", variant) and needle in message:
            if pred is None or pred(args, kwargs):
                return True
    return False
