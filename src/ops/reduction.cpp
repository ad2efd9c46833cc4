// Device-generic reductions: argument checks, result dtypes and shapes, the
// coalesced geometry (Note [Reduction geometry]), then the per-device stub.
// Registered for CPU and Meta; var/std/logsumexp are composites.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/variable.h"
#include "core/shape.h"
#include "ops/api/complex.h"
#include "ops/api/lapack.h"
#include "ops/api/math_more.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/reduce_common.h"

namespace strata {

STRATA_DEFINE_STUB(reduce_sum_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_nansum_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_mean_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_prod_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_max_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_min_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_all_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_any_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_count_nonzero_stub, ReduceFn);
STRATA_DEFINE_STUB(reduce_norm_stub, ReduceFn);
STRATA_DEFINE_STUB(arg_reduce_stub, ArgReduceFn);

namespace {

using OptT = std::optional<Tensor>;

uint64_t all_dims_mask(int64_t nd) { return nd >= 64 ? ~uint64_t(0) : (uint64_t(1) << nd) - 1; }

// Bitmask of the dims to reduce; None or [] means every dim. A 0-d tensor
// accepts dim 0 and -1 and has nothing to reduce.
uint64_t reduce_mask(const Tensor& self, OptIntArrayRef dim, const char* op) {
  int64_t nd = self.dim();
  if (!dim || dim->empty()) return all_dims_mask(nd);
  uint64_t m = dims_to_mask(*dim, nd, op);
  return nd == 0 ? 0 : m;
}

DimVector reduced_shape(const Tensor& self, uint64_t mask, bool keepdim) {
  DimVector s;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask & (uint64_t(1) << d)) {
      if (keepdim) s.push_back(1);
    } else {
      s.push_back(self.size(d));
    }
  }
  return s;
}

// Sorts the n dims innermost-first by their stride in st[0] (stable: equal
// strides keep their order) and merges neighbours that are contiguous with
// each other in every one of the nst stride arrays; writes the result to the
// geometry's arrays. Fixed-size arrays: a tensor has at most 64 dims (the
// reduction mask is 64 bits).
void coalesce_into(int n, const int64_t* sizes, const int64_t* const* st, int nst, ReduceGeom::Dims& out_sizes,
                   ReduceGeom::Dims* const* out_st) {
  int order[64];
  for (int i = 0; i < n; ++i) {
    int j = i;
    while (j > 0 && st[0][order[j - 1]] > st[0][i]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = i;
  }
  for (int r = 0; r < n; ++r) {
    const int i = order[r];
    if (!out_sizes.empty()) {
      bool merge = true;
      for (int k = 0; k < nst; ++k) merge = merge && st[k][i] == out_st[k]->back() * out_sizes.back();
      if (merge) {
        out_sizes.back() *= sizes[i];
        continue;
      }
    }
    out_sizes.push_back(sizes[i]);
    for (int k = 0; k < nst; ++k) out_st[k]->push_back(st[k][i]);
  }
}

ReduceGeom make_geom(const Tensor& in, uint64_t mask) {
  ReduceGeom g;
  const int nd = static_cast<int>(in.dim());
  IntArrayRef sizes = in.sizes(), strides = in.strides();
  // Strides of the contiguous keepdim output (reduced dims have size 1).
  int64_t ostr[64];
  int64_t acc = 1;
  for (int d = nd - 1; d >= 0; --d) {
    ostr[d] = acc;
    if (!(mask & (uint64_t(1) << d))) acc *= std::max<int64_t>(sizes[d], 1);
  }
  int64_t rsz[64], rin[64], ksz[64], kin[64], kout[64];
  int nr = 0, nk = 0;
  g.nred = 1;
  for (int d = 0; d < nd; ++d) {
    const int64_t sz = sizes[d];
    if (mask & (uint64_t(1) << d)) {
      g.nred *= sz;
      if (sz == 1) continue;
      rsz[nr] = sz;
      rin[nr++] = strides[d];
    } else {
      if (sz == 1) continue;
      ksz[nk] = sz;
      kin[nk] = strides[d];
      kout[nk++] = ostr[d];
    }
  }
  const int64_t* rst[1] = {rin};
  ReduceGeom::Dims* rout[1] = {&g.red_in};
  coalesce_into(nr, rsz, rst, 1, g.red_sizes, rout);
  const int64_t* kst[2] = {kin, kout};
  ReduceGeom::Dims* kouts[2] = {&g.keep_in, &g.keep_out};
  coalesce_into(nk, ksz, kst, 2, g.keep_sizes, kouts);
  if (g.red_sizes.empty()) {
    g.red_sizes.push_back(1);
    g.red_in.push_back(0);
  }
  if (g.keep_sizes.empty()) {
    g.keep_sizes.push_back(1);
    g.keep_in.push_back(0);
    g.keep_out.push_back(0);
  }
  g.nout = 1;
  for (int64_t s : g.keep_sizes) g.nout *= s;
  return g;
}

Tensor run_reduce(const DispatchStub<ReduceFn>& stub, const Tensor& in, uint64_t mask, bool keepdim,
                  ScalarType out_dtype, const ReduceArgs& a = {}) {
  Tensor out = empty_tensor(reduced_shape(in, mask, keepdim), out_dtype, in.device());
  if (in.device().is_meta() || out.numel() == 0) return out;
  ReduceGeom g = make_geom(in, mask);
  stub(in.device().type, in, out, g, a);
  return out;
}

// max/min/amax/argmax... have no identity: reducing nothing is an error.
void check_nonempty(const char* op, const Tensor& in, uint64_t mask, bool dims_given) {
  if (in.numel() != 0) return;
  // torch's category differs by op: IndexError for argmax/argmin, RuntimeError for max/min/amax/amin.
  const std::string_view name(op);
  if (name == "argmax" || name == "argmin") {
    STRATA_CHECK_INDEX(dims_given, op, "(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                       "the reduction dim with the 'dim' argument. (input of shape ", in.shape_str(), ")");
  }
  STRATA_CHECK(dims_given, op, "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
               "reduction dim with the 'dim' argument. (input of shape ", in.shape_str(), ")");
  for (int64_t d = 0; d < in.dim(); ++d) {
    STRATA_CHECK_INDEX(!((mask >> d) & 1) || in.size(d) != 0, op, "(): Expected reduction dim ", d,
                       " to have non-zero size. (input of shape ", in.shape_str(), ")");
  }
}

ScalarType sum_natural_dtype(ScalarType t) {
  return is_floating_type(t) || is_complex_type(t) ? t : ScalarType::Int64;
}

Tensor cast_input(const Tensor& self, OptDType dtype) {
  return dtype && *dtype != self.dtype() ? to_dtype(self, *dtype) : self;
}

// Drops the size-1 dims of a keepdim result (a view).
Tensor squeeze_mask(const Tensor& t, uint64_t mask) {
  DimVector sz, st;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if ((mask >> d) & 1) continue;
    sz.push_back(t.size(d));
    st.push_back(t.stride(d));
  }
  return make_view(t, sz, st, t.storage_offset());
}

}  // namespace

// ---- sum / mean / prod ----------------------------------------------------------

Tensor sum_impl(const Tensor& self, OptIntArrayRef dim, bool keepdim, OptDType dtype) {
  Tensor in = cast_input(self, dtype);
  uint64_t mask = reduce_mask(in, dim, "sum");
  ScalarType natural = sum_natural_dtype(in.dtype());
  Tensor out = run_reduce(reduce_sum_stub, in, mask, keepdim, natural);
  return dtype && *dtype != natural ? to_dtype(out, *dtype) : out;
}
STRATA_IMPL_CPU_META(sum, sum_impl);

// nansum is declared composite so that its gradient comes from the where/sum
// decomposition (NaN positions get none). Where no gradient can be asked for
// and the device has the fused kernel (CPU), it is one reduction pass instead
// of isnan + where + sum (three passes and two temporaries).
Tensor nansum_impl(const Tensor& self, OptIntArrayRef dim, bool keepdim, OptDType dtype) {
  STRATA_CHECK_T(NotImplementedError, !is_complex_type(self.dtype()), "nansum does not support complex inputs (got ",
                 self.describe(), ")");
  if (!is_floating_type(self.dtype())) return sum(self, dim, keepdim, dtype);
  const bool needs_grad = autograd::requires_grad(self) && autograd::grad_mode_enabled();
  if (needs_grad || self.device().type != DeviceType::CPU) {
    Tensor zero = scalar_to_tensor(Scalar(0.0), self.dtype(), self.device(), true);
    return sum(where(isnan(self), zero, self), dim, keepdim, dtype);
  }
  Tensor in = cast_input(self, dtype);
  uint64_t mask = reduce_mask(in, dim, "nansum");
  ScalarType natural = sum_natural_dtype(in.dtype());
  Tensor out = run_reduce(is_floating_type(in.dtype()) ? reduce_nansum_stub : reduce_sum_stub, in, mask, keepdim,
                          natural);
  return dtype && *dtype != natural ? to_dtype(out, *dtype) : out;
}
STRATA_IMPL_COMPOSITE(nansum, nansum_impl);

Tensor mean_impl(const Tensor& self, OptIntArrayRef dim, bool keepdim, OptDType dtype) {
  if (dtype) {
    STRATA_CHECK(is_floating_type(*dtype) || is_complex_type(*dtype), "mean(): could not infer output dtype. Optional dtype must be either a "
                 "floating point or complex dtype. Got: ", dtype_name(*dtype));
  } else {
    STRATA_CHECK(is_floating_type(self.dtype()) || is_complex_type(self.dtype()), "mean(): could not infer output dtype. Input dtype must be either "
                 "a floating point or complex dtype. Got: ", dtype_name(self.dtype()));
  }
  Tensor in = cast_input(self, dtype);
  uint64_t mask = reduce_mask(in, dim, "mean");
  return run_reduce(reduce_mean_stub, in, mask, keepdim, in.dtype());
}
STRATA_IMPL_CPU_META(mean, mean_impl);

Tensor prod_impl(const Tensor& self, OptInt dim, bool keepdim, OptDType dtype) {
  Tensor in = cast_input(self, dtype);
  uint64_t mask;
  if (dim) {
    int64_t d = *dim;
    mask = reduce_mask(in, IntArrayRef(&d, 1), "prod");
  } else {
    mask = all_dims_mask(in.dim());
  }
  ScalarType natural = sum_natural_dtype(in.dtype());
  Tensor out = run_reduce(reduce_prod_stub, in, mask, keepdim, natural);
  return dtype && *dtype != natural ? to_dtype(out, *dtype) : out;
}
STRATA_IMPL_CPU_META(prod, prod_impl);

// ---- max / min / amax / amin ------------------------------------------------------

Tensor max_impl(const Tensor& self) {
  uint64_t mask = all_dims_mask(self.dim());
  check_nonempty("max", self, mask, false);
  return run_reduce(reduce_max_stub, self, mask, false, self.dtype());
}
STRATA_IMPL_CPU_META(max, max_impl);

Tensor min_impl(const Tensor& self) {
  uint64_t mask = all_dims_mask(self.dim());
  check_nonempty("min", self, mask, false);
  return run_reduce(reduce_min_stub, self, mask, false, self.dtype());
}
STRATA_IMPL_CPU_META(min, min_impl);

Tensor amax_impl(const Tensor& self, IntArrayRef dim, bool keepdim) {
  uint64_t mask = reduce_mask(self, dim, "amax");
  check_nonempty("amax", self, mask, !dim.empty());
  return run_reduce(reduce_max_stub, self, mask, keepdim, self.dtype());
}
STRATA_IMPL_CPU_META(amax, amax_impl);

Tensor amin_impl(const Tensor& self, IntArrayRef dim, bool keepdim) {
  uint64_t mask = reduce_mask(self, dim, "amin");
  check_nonempty("amin", self, mask, !dim.empty());
  return run_reduce(reduce_min_stub, self, mask, keepdim, self.dtype());
}
STRATA_IMPL_CPU_META(amin, amin_impl);

Tensor max_other_impl(const Tensor& self, const Tensor& other) { return maximum(self, other); }
STRATA_IMPL_COMPOSITE(max_other, max_other_impl);
Tensor min_other_impl(const Tensor& self, const Tensor& other) { return minimum(self, other); }
STRATA_IMPL_COMPOSITE(min_other, min_other_impl);

// ---- argmax / argmin and max.dim / min.dim ---------------------------------------

namespace {

// Shared by argmax/argmin (values not wanted) and max.dim/min.dim. dim = None
// reduces the flattened tensor.
Tensor2 arg_reduce(const char* op, const Tensor& self, OptInt dim, bool keepdim, bool is_max, bool want_values) {
  int64_t nd = self.dim();
  int64_t outer = 1, n = 1, inner = 1;
  uint64_t mask;
  if (dim) {
    int64_t d = wrap_dim(*dim, nd, op);
    mask = nd == 0 ? 0 : uint64_t(1) << d;
    check_nonempty(op, self, mask, true);
    for (int64_t i = 0; i < nd; ++i) (i < d ? outer : i == d ? n : inner) *= self.size(i);
  } else {
    mask = all_dims_mask(nd);
    check_nonempty(op, self, mask, false);
    n = self.numel();
  }
  DimVector shape = reduced_shape(self, mask, keepdim);
  Tensor values = want_values ? empty_tensor(shape, self.dtype(), self.device()) : Tensor();
  Tensor indices = empty_tensor(shape, ScalarType::Int64, self.device());
  if (self.device().is_meta() || indices.numel() == 0) return {values, indices};
  Tensor in = contiguous(self);
  arg_reduce_stub(in.device().type, in, values, indices, outer, n, inner, is_max);
  return {values, indices};
}

void check_not_bool(const char* op, const Tensor& self) {
  STRATA_CHECK(self.dtype() != ScalarType::Bool, op, "(): does not support bool input (got a ", self.describe(),
               ")");
}

}  // namespace

Tensor2 max_dim_impl(const Tensor& self, int64_t dim, bool keepdim) {
  return arg_reduce("max", self, dim, keepdim, true, true);
}
STRATA_IMPL_CPU_META(max_dim, max_dim_impl);

Tensor2 min_dim_impl(const Tensor& self, int64_t dim, bool keepdim) {
  return arg_reduce("min", self, dim, keepdim, false, true);
}
STRATA_IMPL_CPU_META(min_dim, min_dim_impl);

Tensor argmax_impl(const Tensor& self, OptInt dim, bool keepdim) {
  check_not_bool("argmax", self);
  return std::get<1>(arg_reduce("argmax", self, dim, keepdim, true, false));
}
STRATA_IMPL_CPU_META(argmax, argmax_impl);

Tensor argmin_impl(const Tensor& self, OptInt dim, bool keepdim) {
  check_not_bool("argmin", self);
  return std::get<1>(arg_reduce("argmin", self, dim, keepdim, false, false));
}
STRATA_IMPL_CPU_META(argmin, argmin_impl);

// ---- all / any / count_nonzero ---------------------------------------------------

namespace {
Tensor all_any(const char* op, const DispatchStub<ReduceFn>& stub, const Tensor& self, OptIntArrayRef dim,
               bool keepdim) {
  // Unlike sum, an explicit empty dim list reduces nothing here (as in torch).
  uint64_t mask = dim && dim->empty() ? 0 : reduce_mask(self, dim, op);
  Tensor out = run_reduce(stub, self, mask, keepdim, ScalarType::Bool);
  // Like torch, uint8 inputs give uint8 results.
  return self.dtype() == ScalarType::UInt8 ? to_dtype(out, ScalarType::UInt8) : out;
}
}  // namespace

Tensor all_impl(const Tensor& self, OptIntArrayRef dim, bool keepdim) {
  return all_any("all", reduce_all_stub, self, dim, keepdim);
}
STRATA_IMPL_CPU_META(all, all_impl);

Tensor any_impl(const Tensor& self, OptIntArrayRef dim, bool keepdim) {
  return all_any("any", reduce_any_stub, self, dim, keepdim);
}
STRATA_IMPL_CPU_META(any, any_impl);

Tensor count_nonzero_impl(const Tensor& self, OptIntArrayRef dim) {
  uint64_t mask = reduce_mask(self, dim, "count_nonzero");
  return run_reduce(reduce_count_nonzero_stub, self, mask, false, ScalarType::Int64);
}
STRATA_IMPL_CPU_META(count_nonzero, count_nonzero_impl);

// ---- norm -----------------------------------------------------------------------

Tensor norm_impl(const Tensor& self, const std::optional<Scalar>& p, OptIntArrayRef dim, bool keepdim,
                 OptDType dtype) {
  if (is_complex_type(self.dtype())) {  // the norm of |z| (real, as torch's)
    STRATA_CHECK(!dtype || is_complex_type(*dtype), "norm: dtype should be complex for complex input, but got ",
                 dtype_name(*dtype));
    return norm(abs(dtype ? to_dtype(self, *dtype) : self), p, dim, keepdim, std::nullopt);
  }
  STRATA_CHECK(is_floating_type(self.dtype()), "norm: Expected a floating point or complex tensor as input. Got ",
               dtype_name(self.dtype()));
  if (dtype) {
    STRATA_CHECK(is_floating_type(*dtype), "norm: dtype should be floating point, but got ", dtype_name(*dtype));
  }
  Tensor in = cast_input(self, dtype);
  ReduceArgs a;
  a.p = p ? p->to_double() : 2.0;
  uint64_t mask = reduce_mask(in, dim, "norm");
  if (std::isinf(a.p)) {
    for (int64_t d = 0; d < in.dim(); ++d) {
      STRATA_CHECK(!((mask >> d) & 1) || in.size(d) != 0, "norm: cannot compute the ", a.p > 0 ? "" : "-",
                         "inf norm on an empty tensor because the operation does not have an identity (input of "
                         "shape ", in.shape_str(), ")");
    }
  }
  return run_reduce(reduce_norm_stub, in, mask, keepdim, in.dtype(), a);
}
STRATA_IMPL_CPU_META(norm, norm_impl);

// norm(x, 'nuc'): the sum of the singular values over two dims (all of a 2-D
// input when dim is None), as torch.linalg.matrix_norm(ord='nuc'), whose
// messages these are; differentiable through _linalg_svd.
static Tensor nuclear_norm(const Tensor& self, OptIntArrayRef dim, bool keepdim, OptDType dtype) {
  const int64_t nd = self.dim();
  STRATA_CHECK(nd >= 2, "linalg.matrix_norm: The input tensor A must have at least 2 dimensions, but got a tensor "
               "of shape ", self.shape_str());
  std::vector<int64_t> dims;
  if (dim) {
    dims.assign(dim->begin(), dim->end());
  } else {
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
  }
  if (dims.size() != 2) {
    std::string got;
    for (int64_t d : dims) got += " " + std::to_string(d);
    STRATA_CHECK(false, "linalg.matrix_norm: dim must be a 2-tuple. Got", got);
  }
  const int64_t d0 = wrap_dim(dims[0], nd, "norm"), d1 = wrap_dim(dims[1], nd, "norm");
  STRATA_CHECK(d0 != d1, "linalg.matrix_norm: dims must be different. Got (", dims[0], ", ", dims[1], ")");
  ScalarType want = dtype ? *dtype : self.dtype();
  STRATA_CHECK(is_floating_type(self.dtype()), "linalg.matrix_norm: Expected a floating point or complex tensor as "
               "input. Got ", dtype_name(self.dtype()));
  STRATA_CHECK(want == ScalarType::Float32 || want == ScalarType::Float64,
               "linalg.matrix_norm: Low precision dtypes not supported. Got ", dtype_name(want));
  STRATA_CHECK(!(self.dtype() == ScalarType::Float64 && want == ScalarType::Float32),
               "linalg.matrix_norm: the dtype of the input (Double) should be convertible without narrowing to the "
               "specified dtype (Float)");
  Tensor in = cast_input(self, dtype);
  const int64_t src[2] = {d0, d1}, dst[2] = {-2, -1};
  Tensor s = std::get<1>(linalg_svd(movedim(in, src, dst), false, false));
  Tensor r = sum(s, std::vector<int64_t>{-1}, false);
  if (keepdim) r = unsqueeze(unsqueeze(r, std::min(d0, d1)), std::max(d0, d1));
  return r;
}

Tensor norm_str_impl(const Tensor& self, std::string_view p, OptIntArrayRef dim, bool keepdim, OptDType dtype) {
  STRATA_CHECK_VALUE(p == "fro" || p == "nuc", "norm: unknown norm type '", p, "' (expected a number, 'fro' or 'nuc')");
  if (p == "nuc") return nuclear_norm(self, dim, keepdim, dtype);
  return norm(self, Scalar(2.0), dim, keepdim, dtype);
}
STRATA_IMPL_COMPOSITE(norm_str, norm_str_impl);

// ---- var / std (composites) -------------------------------------------------------

namespace {

// Two-pass variance: mean, then the sum of squared deviations. 16-bit floats
// compute in float32.
Tensor2 var_mean_core(const char* op, const Tensor& self, OptIntArrayRef dim, double correction, bool keepdim,
                      bool take_sqrt) {
  STRATA_CHECK(is_floating_type(self.dtype()) || is_complex_type(self.dtype()), op,
               ": std and var only support floating point and complex dtypes (got ", dtype_name(self.dtype()), ")");
  ScalarType dt = self.dtype();
  if (is_complex_type(dt)) {
    // As torch: the variance of a complex tensor is real, E|x - mean|^2 =
    // var(real) + var(imag); the mean stays complex.
    Tensor v = add(std::get<0>(var_mean_core(op, real(self), dim, correction, keepdim, false)),
                   std::get<0>(var_mean_core(op, imag(self), dim, correction, keepdim, false)));
    return {take_sqrt ? sqrt(v) : v, mean(self, dim, keepdim)};
  }
  Tensor x = (dt == ScalarType::Float16 || dt == ScalarType::BFloat16) ? to_dtype(self, ScalarType::Float32) : self;
  uint64_t mask = reduce_mask(x, dim, op);
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if ((mask >> d) & 1) n *= x.size(d);
  Tensor m = mean(x, dim, true);
  Tensor dev = sub(x, m);
  Tensor v = sum(mul(dev, dev), dim, keepdim);
  double denom = std::max(0.0, static_cast<double>(n) - correction);
  v = div(v, scalar_to_tensor(Scalar(denom), ScalarType::Float64, Device(), true));
  if (take_sqrt) v = sqrt(v);
  if (!keepdim) m = squeeze_mask(m, mask);
  return {to_dtype(v, dt), to_dtype(m, dt)};
}

double correction_of(const std::optional<Scalar>& c) { return c ? c->to_double() : 1.0; }

}  // namespace

Tensor var_impl(const Tensor& self, OptIntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) {
  return std::get<0>(var_mean_core("var", self, dim, correction_of(correction), keepdim, false));
}
STRATA_IMPL_COMPOSITE(var, var_impl);
Tensor var_dim_impl(const Tensor& self, OptIntArrayRef dim, bool unbiased, bool keepdim) {
  return std::get<0>(var_mean_core("var", self, dim, unbiased ? 1 : 0, keepdim, false));
}
STRATA_IMPL_COMPOSITE(var_dim, var_dim_impl);
Tensor var_unbiased_impl(const Tensor& self, bool unbiased) {
  return std::get<0>(var_mean_core("var", self, std::nullopt, unbiased ? 1 : 0, false, false));
}
STRATA_IMPL_COMPOSITE(var_unbiased, var_unbiased_impl);

Tensor std_impl(const Tensor& self, OptIntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) {
  return std::get<0>(var_mean_core("std", self, dim, correction_of(correction), keepdim, true));
}
STRATA_IMPL_COMPOSITE(std, std_impl);
Tensor std_dim_impl(const Tensor& self, OptIntArrayRef dim, bool unbiased, bool keepdim) {
  return std::get<0>(var_mean_core("std", self, dim, unbiased ? 1 : 0, keepdim, true));
}
STRATA_IMPL_COMPOSITE(std_dim, std_dim_impl);
Tensor std_unbiased_impl(const Tensor& self, bool unbiased) {
  return std::get<0>(var_mean_core("std", self, std::nullopt, unbiased ? 1 : 0, false, true));
}
STRATA_IMPL_COMPOSITE(std_unbiased, std_unbiased_impl);

Tensor2 var_mean_impl(const Tensor& self, OptIntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) {
  return var_mean_core("var_mean", self, dim, correction_of(correction), keepdim, false);
}
STRATA_IMPL_COMPOSITE(var_mean, var_mean_impl);
Tensor2 var_mean_dim_impl(const Tensor& self, OptIntArrayRef dim, bool unbiased, bool keepdim) {
  return var_mean_core("var_mean", self, dim, unbiased ? 1 : 0, keepdim, false);
}
STRATA_IMPL_COMPOSITE(var_mean_dim, var_mean_dim_impl);
Tensor2 var_mean_unbiased_impl(const Tensor& self, bool unbiased) {
  return var_mean_core("var_mean", self, std::nullopt, unbiased ? 1 : 0, false, false);
}
STRATA_IMPL_COMPOSITE(var_mean_unbiased, var_mean_unbiased_impl);

Tensor2 std_mean_impl(const Tensor& self, OptIntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) {
  return var_mean_core("std_mean", self, dim, correction_of(correction), keepdim, true);
}
STRATA_IMPL_COMPOSITE(std_mean, std_mean_impl);
Tensor2 std_mean_dim_impl(const Tensor& self, OptIntArrayRef dim, bool unbiased, bool keepdim) {
  return var_mean_core("std_mean", self, dim, unbiased ? 1 : 0, keepdim, true);
}
STRATA_IMPL_COMPOSITE(std_mean_dim, std_mean_dim_impl);
Tensor2 std_mean_unbiased_impl(const Tensor& self, bool unbiased) {
  return var_mean_core("std_mean", self, std::nullopt, unbiased ? 1 : 0, false, true);
}
STRATA_IMPL_COMPOSITE(std_mean_unbiased, std_mean_unbiased_impl);

// ---- logsumexp (composite) --------------------------------------------------------

Tensor logsumexp_impl(const Tensor& self, IntArrayRef dim, bool keepdim) {
  Tensor x = is_floating_type(self.dtype()) ? self : to_dtype(self, default_dtype());
  uint64_t mask = reduce_mask(x, dim, "logsumexp");
  bool empty_reduce = false;
  for (int64_t d = 0; d < x.dim(); ++d) empty_reduce |= ((mask >> d) & 1) && x.size(d) == 0;
  if (empty_reduce || x.numel() == 0) return log(sum(exp(x), dim, keepdim));
  // Shift by the max so exp cannot overflow; an infinite max is not a usable
  // shift (inf - inf), so those slices shift by 0.
  Tensor m = amax(x, dim, true);
  m = masked_fill(m, isinf(m), scalar_to_tensor(Scalar(0.0), m.dtype(), Device(), true));
  Tensor r = log(sum(exp(sub(x, m)), dim, keepdim));
  return add(r, keepdim ? m : squeeze_mask(m, mask));
}
STRATA_IMPL_COMPOSITE(logsumexp, logsumexp_impl);

}  // namespace strata
