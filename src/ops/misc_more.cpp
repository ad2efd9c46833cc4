// Structural ops written in terms of other ops (so autograd and the Meta
// device come from their parts): tensordot, addr, kron, block_diag, cross,
// trace, diff, rot90, fliplr/flipud, cartesian_prod, combinations, meshgrid,
// cdist, pdist, cosine_similarity, diag_embed/diag/diagflat, atleast_*d,
// broadcast_tensors, vander, and the factories tril_indices/triu_indices.
#include <algorithm>
#include <numeric>

#include "ops/out_overlap.h"
#include "ops/api/misc_more.h"
#include "ops/misc_more_common.h"
#include "ops/ops.h"

namespace strata {

using namespace misc_detail;

namespace {

Tensor wrapped(const Scalar& s, const Tensor& like) { return scalar_to_tensor(s, like.dtype(), like.device(), true); }

bool scalar_is(const Scalar& s, double v) { return s.to_double() == v; }

// ---- contractions -------------------------------------------------------------

Tensor tensordot_impl(const Tensor& self, const Tensor& other, IntArrayRef dims_self, IntArrayRef dims_other,
                      const OptT& out) {
  STRATA_CHECK(dims_self.size() == dims_other.size(), "tensordot: both dimension lists should have same length, "
               "but got ", dims_self.size(), " and ", dims_other.size());
  const uint64_t ma = dims_to_mask(dims_self, self.dim(), "tensordot");
  const uint64_t mb = dims_to_mask(dims_other, other.dim(), "tensordot");
  std::vector<int64_t> pa, pb, free_a_sizes, free_b_sizes;
  int64_t K = 1;
  for (size_t i = 0; i < dims_self.size(); ++i) {
    const int64_t da = wrap_dim(dims_self[i], self.dim(), "tensordot");
    const int64_t db = wrap_dim(dims_other[i], other.dim(), "tensordot");
    STRATA_CHECK(self.size(da) == other.size(db), "tensordot: contracted dimensions need to match, but first has "
                 "size ", self.size(da), " in dim ", da, " and second has size ", other.size(db), " in dim ", db);
    K *= self.size(da);
  }
  int64_t M = 1, N = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (ma >> d & 1) continue;
    pa.push_back(d);
    free_a_sizes.push_back(self.size(d));
    M *= self.size(d);
  }
  for (size_t i = 0; i < dims_self.size(); ++i) pa.push_back(wrap_dim(dims_self[i], self.dim()));
  for (size_t i = 0; i < dims_other.size(); ++i) pb.push_back(wrap_dim(dims_other[i], other.dim()));
  for (int64_t d = 0; d < other.dim(); ++d) {
    if (mb >> d & 1) continue;
    pb.push_back(d);
    free_b_sizes.push_back(other.size(d));
    N *= other.size(d);
  }
  Tensor a = reshape(permute(self, pa), DimVector{M, K});
  Tensor b = reshape(permute(other, pb), DimVector{K, N});
  std::vector<int64_t> sizes = free_a_sizes;
  sizes.insert(sizes.end(), free_b_sizes.begin(), free_b_sizes.end());
  return finish_out(reshape(mm(a, b), sizes), out, "tensordot");
}
STRATA_IMPL_COMPOSITE(tensordot, tensordot_impl);

Tensor addr_impl(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta, const Scalar& alpha,
                 const OptT& out) {
  STRATA_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  STRATA_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  Tensor prod = mul(unsqueeze(vec1, 1), unsqueeze(vec2, 0));
  if (!scalar_is(alpha, 1)) prod = mul(prod, wrapped(alpha, prod));
  Tensor r;
  if (scalar_is(beta, 0)) {
    // beta = 0 ignores self entirely (its NaNs too), but self still sets the shape and dtype.
    r = add(mul(zeros_like(self), wrapped(Scalar(int64_t(0)), self)), prod);
  } else {
    r = add(scalar_is(beta, 1) ? self : mul(self, wrapped(beta, self)), prod);
  }
  STRATA_CHECK(r.dim() == 2 && r.size(0) == vec1.size(0) && r.size(1) == vec2.size(0), "addr: self of shape ",
               self.shape_str(), " does not broadcast to the outer product's shape [", vec1.size(0), ", ",
               vec2.size(0), "]");
  return finish_out(r, out, "addr", &self);
}
STRATA_IMPL_COMPOSITE(addr, addr_impl);

Tensor kron_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  if (out && out->defined()) check_out_overlap("kron", *out, std::vector<Tensor>{self, other});
  const int64_t nd = std::max(self.dim(), other.dim());
  // Interleave: self's dim i at 2i, other's at 2i+1; the product's dim i is their merge.
  DimVector sa, sb, sr;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t ia = i - (nd - self.dim()), ib = i - (nd - other.dim());
    const int64_t a = ia >= 0 ? self.size(ia) : 1, b = ib >= 0 ? other.size(ib) : 1;
    sa.push_back(a);
    sa.push_back(1);
    sb.push_back(1);
    sb.push_back(b);
    sr.push_back(a * b);
  }
  Tensor r = reshape(mul(reshape(self, sa), reshape(other, sb)), sr);
  return finish_out(r, out, "kron");
}
STRATA_IMPL_COMPOSITE(kron, kron_impl);

Tensor block_diag_impl(TensorList tensors) {
  if (tensors.empty()) return empty_tensor(DimVector{1, 0}, default_dtype(), Device());
  // The result dtype follows type promotion (a 0-d block counts by category only).
  ResultTypeState rts;
  for (const Tensor& t : tensors) update_result_type_state(rts, t);
  const ScalarType dt = result_type(rts);
  for (size_t i = 0; i < tensors.size(); ++i) {
    STRATA_CHECK(tensors[i].dim() <= 2, "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input ", i,
                 " has ", tensors[i].dim(), " dimensions");
    STRATA_CHECK(tensors[i].device() == tensors[0].device(), "torch.block_diag: input tensors must all be on the "
                 "same device. Input 0 is on device ", tensors[0].device().str(), " and input ", i, " is on device ",
                 tensors[i].device().str());
  }
  std::vector<Tensor> blocks;
  int64_t cols = 0;
  for (const Tensor& t : tensors) {
    const Tensor m = t.dim() == 2 ? t : reshape(t, DimVector{1, t.dim() == 0 ? 1 : t.size(0)});
    blocks.push_back(m);
    cols += m.size(1);
  }
  // Each block padded with zeros to the full width; the rows stacked.
  std::vector<Tensor> rows;
  int64_t left = 0;
  for (const Tensor& m : blocks) {
    const int64_t w = m.size(1);
    const Tensor mc = m.dtype() == dt ? m : to_dtype(m, dt);
    rows.push_back(pad(mc, std::vector<int64_t>{left, cols - left - w}, "constant", 0.0));
    left += w;
  }
  return cat(rows, 0);
}
STRATA_IMPL_COMPOSITE(block_diag, block_diag_impl);

Tensor cross_common(const Tensor& self, const Tensor& other, int64_t dim, const OptT& out, const char* op) {
  if (out && out->defined()) check_out_overlap(op, *out, std::vector<Tensor>{self, other});
  STRATA_CHECK(self.dim() == other.dim(), op, ": inputs must have the same number of dimensions, but got ",
               self.shape_str(), " and ", other.shape_str());
  std::vector<Tensor> b = broadcast_tensors(std::vector<Tensor>{self, other});
  const Tensor& a = b[0];
  const Tensor& c = b[1];
  dim = wrap_dim(dim, a.dim(), op);
  STRATA_CHECK(self.size(dim) == 3 && other.size(dim) == 3, op, ": inputs dimension ", dim,
               " must have length 3. Got ", self.size(dim), " and ", other.size(dim));
  auto comp = [&](const Tensor& t, int64_t i) { return narrow(t, dim, i, 1); };
  Tensor x = sub(mul(comp(a, 1), comp(c, 2)), mul(comp(a, 2), comp(c, 1)));
  Tensor y = sub(mul(comp(a, 2), comp(c, 0)), mul(comp(a, 0), comp(c, 2)));
  Tensor z = sub(mul(comp(a, 0), comp(c, 1)), mul(comp(a, 1), comp(c, 0)));
  return finish_out(cat(std::vector<Tensor>{x, y, z}, dim), out, op);
}

Tensor linalg_cross_impl(const Tensor& self, const Tensor& other, int64_t dim, const OptT& out) {
  return cross_common(self, other, dim, out, "linalg.cross");
}
STRATA_IMPL_COMPOSITE(linalg_cross, linalg_cross_impl);

Tensor cross_impl(const Tensor& self, const Tensor& other, OptInt dim, const OptT& out) {
  if (dim) return cross_common(self, other, *dim, out, "cross");
  // No dim: the first dim of size 3 (torch's deprecated default).
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.size(d) == 3 && d < other.dim() && other.size(d) == 3) return cross_common(self, other, d, out, "cross");
  }
  throw Error(str("cross: no dimension of size 3 in input (shapes ", self.shape_str(), " and ", other.shape_str(),
                  ")"));
}
STRATA_IMPL_COMPOSITE(cross, cross_impl);

Tensor trace_impl(const Tensor& self) {
  STRATA_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return sum(diagonal(self, 0, 0, 1));
}
STRATA_IMPL_COMPOSITE(trace, trace_impl);

// ---- differences, rotations, flips ----------------------------------------------

Tensor diff_impl(const Tensor& self, int64_t n, int64_t dim, const OptT& prepend, const OptT& append,
                 const OptT& out) {
  STRATA_CHECK(self.dim() >= 1, "diff expects input to be at least one-dimensional");
  STRATA_CHECK(n >= 0, "order must be non-negative but got ", n);
  dim = wrap_dim(dim, self.dim(), "diff");
  Tensor x = self;
  if ((prepend && prepend->defined()) || (append && append->defined())) {
    std::vector<Tensor> parts;
    for (const OptT* p : {&prepend, (const OptT*)nullptr, &append}) {
      if (!p) {
        parts.push_back(self);
        continue;
      }
      if (!*p || !(*p)->defined()) continue;
      const Tensor& t = **p;
      STRATA_CHECK(t.dim() == self.dim(), "diff expects prepend or append to be the same dimension as input (got ",
                   t.dim(), "-d for a ", self.dim(), "-d input)");
      for (int64_t d = 0; d < self.dim(); ++d) {
        STRATA_CHECK(d == dim || t.size(d) == self.size(d), "diff expects the shape of tensor to prepend or append "
                     "to match that of input except along the differencing dimension; input.size(", d, ") = ",
                     self.size(d), ", but got tensor.size(", d, ") = ", t.size(d));
      }
      parts.push_back(t);
    }
    x = cat(parts, dim);
  }
  for (int64_t i = 0; i < n && x.size(dim) > 0; ++i) {
    const int64_t len = x.size(dim) - 1;
    const Tensor hi = narrow(x, dim, 1, len), lo = narrow(x, dim, 0, len);
    x = x.dtype() == ScalarType::Bool ? logical_xor(hi, lo) : sub(hi, lo);
  }
  if (n == 0 && x.is_same(self)) x = clone(self);
  return finish_out(x, out, "diff");
}
STRATA_IMPL_COMPOSITE(diff, diff_impl);

Tensor rot90_impl(const Tensor& self, int64_t k, IntArrayRef dims) {
  STRATA_CHECK(dims.size() == 2, "expected total rotation dims == 2, but got dims = ", dims.size());
  STRATA_CHECK(self.dim() >= 2, "expected total dims >= 2, but got total dims = ", self.dim());
  const int64_t d0 = wrap_dim(dims[0], self.dim(), "rot90"), d1 = wrap_dim(dims[1], self.dim(), "rot90");
  STRATA_CHECK(d0 != d1, "expected rotation dims to be different, but got dim0 = ", d0, " and dim1 = ", d1);
  k = ((k % 4) + 4) % 4;
  switch (k) {
    case 1: return transpose(flip(self, std::vector<int64_t>{d1}), d0, d1);
    case 2: return flip(self, std::vector<int64_t>{d0, d1});
    case 3: return flip(transpose(self, d0, d1), std::vector<int64_t>{d1});
    default: return clone(self);
  }
}
STRATA_IMPL_COMPOSITE(rot90, rot90_impl);

Tensor fliplr_impl(const Tensor& self) {
  STRATA_CHECK(self.dim() >= 2, "Input must be >= 2-d.");
  return flip(self, std::vector<int64_t>{1});
}
STRATA_IMPL_COMPOSITE(fliplr, fliplr_impl);

Tensor flipud_impl(const Tensor& self) {
  STRATA_CHECK(self.dim() >= 1, "Input must be >= 1-d.");
  return flip(self, std::vector<int64_t>{0});
}
STRATA_IMPL_COMPOSITE(flipud, flipud_impl);

// ---- grids and combinations -----------------------------------------------------

std::vector<Tensor> meshgrid_impl(TensorList tensors, std::string_view indexing) {
  STRATA_CHECK(!tensors.empty(), "meshgrid expects a non-empty TensorList");
  STRATA_CHECK_VALUE(indexing == "ij" || indexing == "xy", "torch.meshgrid: indexing must be one of \"xy\" or "
                     "\"ij\", but received: ", indexing);
  DimVector shape;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    STRATA_CHECK(t.dim() <= 1, "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: ", t.describe());
    STRATA_CHECK(t.dtype() == tensors[0].dtype(), "torch.meshgrid: Expected all tensors in the tensor list to have "
                 "the same dtype (got ", dtype_name(tensors[0].dtype()), " and ", dtype_name(t.dtype()), ")");
    STRATA_CHECK(t.device() == tensors[0].device(), "torch.meshgrid: Expected all tensors in the tensor list to "
                 "have the same device (got ", tensors[0].device().str(), " and ", t.device().str(), ")");
    shape.push_back(t.numel());
  }
  const bool swap = indexing == "xy" && tensors.size() >= 2;
  if (swap) std::swap(shape[0], shape[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t pos = i;
    if (swap && i < 2) pos = 1 - i;
    DimVector vs(shape.size(), 1);
    vs[pos] = shape[pos];
    out.push_back(expand(reshape(tensors[i], vs), shape));
  }
  return out;
}
STRATA_IMPL_COMPOSITE(meshgrid, meshgrid_impl);

Tensor cartesian_prod_impl(TensorList tensors) {
  STRATA_CHECK(!tensors.empty(), "cartesian_prod expects a non-empty TensorList");
  for (const Tensor& t : tensors)
    STRATA_CHECK(t.dim() == 1, "Expect a 1D vector, but got shape ", t.shape_str());
  if (tensors.size() == 1) return tensors[0];
  std::vector<Tensor> grids = meshgrid_impl(tensors, "ij");
  for (Tensor& g : grids) g = flatten(g);
  return stack(grids, 1);
}
STRATA_IMPL_COMPOSITE(cartesian_prod, cartesian_prod_impl);

// An int64 index tensor on `device` holding `v` (the Meta device gets only the shape).
Tensor index_tensor(const std::vector<int64_t>& v, Device device) {
  Tensor t = empty_tensor(DimVector{static_cast<int64_t>(v.size())}, ScalarType::Int64, Device());
  if (!v.empty()) std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  if (device.is_cpu()) return t;
  if (device.is_meta()) return empty_tensor(t.sizes(), ScalarType::Int64, device);
  return to_device(t, device);
}

// n choose r (with replacement: n + r - 1 choose r), or -1 when it exceeds `limit`.
int64_t count_combinations(int64_t n, int64_t r, bool with_replacement, int64_t limit) {
  const int64_t top = with_replacement ? n + r - 1 : n;
  if (r > top) return 0;
  __int128 c = 1;
  for (int64_t i = 1; i <= r; ++i) {
    c = c * (top - r + i) / i;  // exact: c is C(top - r + i, i) after each step
    if (c > limit) return -1;
  }
  return static_cast<int64_t>(c);
}

Tensor combinations_impl(const Tensor& self, int64_t r, bool with_replacement) {
  STRATA_CHECK(self.dim() == 1, "Expect a 1D vector, but got shape ", self.shape_str());
  STRATA_CHECK(r >= 0, "Expect a non-negative number, but got ", r);
  if (r == 0) return empty_tensor(DimVector{0}, self.dtype(), self.device());
  const int64_t n = self.size(0);
  constexpr int64_t kMaxElements = int64_t(1) << 34;
  const int64_t count = count_combinations(n, r, with_replacement, kMaxElements / r);
  STRATA_CHECK(count >= 0, "combinations: the result for n = ", n, ", r = ", r, " would have more than ",
               kMaxElements, " elements");
  // Index tuples in lexicographic order: i1 < i2 < ... (or <= with replacement).
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(count * r));
  std::vector<int64_t> idx(r, 0);
  if (!with_replacement) std::iota(idx.begin(), idx.end(), 0);
  for (int64_t c = 0; c < count; ++c) {
    flat.insert(flat.end(), idx.begin(), idx.end());
    int64_t i = r - 1;
    while (i >= 0 && idx[i] == (with_replacement ? n - 1 : n - r + i)) --i;
    if (i < 0) break;
    ++idx[i];
    for (int64_t j = i + 1; j < r; ++j) idx[j] = with_replacement ? idx[i] : idx[j - 1] + 1;
  }
  return reshape(index_select(self, 0, index_tensor(flat, self.device())), DimVector{count, r});
}
STRATA_IMPL_COMPOSITE(combinations, combinations_impl);

Tensor tri_indices_common(int64_t row, int64_t col, int64_t offset, OptDType dtype, OptDevice device, bool lower,
                          const char* op) {
  STRATA_CHECK(row >= 0, op, ": row must be non-negative, got ", row);
  STRATA_CHECK(col >= 0, op, ": col must be non-negative, got ", col);
  const ScalarType dt = dtype.value_or(ScalarType::Int64);
  STRATA_CHECK(dt == ScalarType::Int64 || dt == ScalarType::Int32, op, ": expected dtype int32 or int64, but got ",
               dtype_name(dt));
  const Device dev = device.value_or(Device());
  // Entries of row i: the columns j in [lo(i), hi(i)).
  auto lo = [&](int64_t i) { return lower ? int64_t(0) : std::clamp<int64_t>(i + offset, 0, col); };
  auto hi = [&](int64_t i) { return lower ? std::clamp<int64_t>(i + offset + 1, 0, col) : col; };
  int64_t n = 0;
  for (int64_t i = 0; i < row; ++i) n += hi(i) - lo(i);
  if (dev.is_meta()) return empty_tensor(DimVector{2, n}, dt, dev);
  // Written straight into the result (its allocation fails cleanly when too large).
  Tensor r = empty_tensor(DimVector{2, n}, ScalarType::Int64, Device());
  int64_t* rows = r.data_ptr<int64_t>();
  int64_t* cols = rows + n;
  for (int64_t i = 0, k = 0; i < row; ++i) {
    for (int64_t j = lo(i); j < hi(i); ++j, ++k) {
      rows[k] = i;
      cols[k] = j;
    }
  }
  if (dt != ScalarType::Int64) r = to_dtype(r, dt);
  return dev.is_cpu() ? r : to_device(r, dev);
}

Tensor tril_indices_impl(int64_t row, int64_t col, int64_t offset, OptDType dtype, OptDevice device) {
  return tri_indices_common(row, col, offset, dtype, device, true, "tril_indices");
}
Tensor triu_indices_impl(int64_t row, int64_t col, int64_t offset, OptDType dtype, OptDevice device) {
  return tri_indices_common(row, col, offset, dtype, device, false, "triu_indices");
}
STRATA_IMPL_CPU_META(tril_indices, tril_indices_impl);
STRATA_IMPL_CPU_META(triu_indices, triu_indices_impl);

// ---- distances --------------------------------------------------------------------

void check_float_input(const Tensor& t, const char* op, const char* what) {
  STRATA_CHECK(is_floating_type(t.dtype()), op, " only supports floating-point dtypes, ", what, " got: ",
               dtype_name(t.dtype()));
}

Tensor cdist_impl(const Tensor& x1, const Tensor& x2, double p, OptStr compute_mode) {
  STRATA_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  STRATA_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  check_float_input(x1, "cdist", "X1");
  check_float_input(x2, "cdist", "X2");
  STRATA_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
               " X2: ", x2.size(-1));
  STRATA_CHECK(p >= 0, "cdist only supports non-negative p values");
  const std::string_view mode = compute_mode.value_or("use_mm_for_euclid_dist_if_necessary");
  STRATA_CHECK_VALUE(mode == "use_mm_for_euclid_dist_if_necessary" || mode == "use_mm_for_euclid_dist" ||
                         mode == "donot_use_mm_for_euclid_dist",
                     mode, " is not a valid value for compute_mode");
  const int64_t P = x1.size(-2), R = x2.size(-2);
  const bool use_mm =
      p == 2 && (mode == "use_mm_for_euclid_dist" ||
                 (mode == "use_mm_for_euclid_dist_if_necessary" && (P > 25 || R > 25)));
  if (use_mm) {
    // |a - b|^2 = |a|^2 + |b|^2 - 2 a.b: one GEMM instead of a (P, R, M) difference tensor.
    Tensor n1 = sum(mul(x1, x1), std::vector<int64_t>{-1}, true);
    Tensor n2 = sum(mul(x2, x2), std::vector<int64_t>{-1}, true);
    Tensor ab = matmul(x1, transpose(x2, -1, -2));
    Tensor d2 = add(sub(n1, ab, Scalar(2.0)), transpose(n2, -1, -2));
    // Clamped just above 0 (as torch does): rounding can make d2 slightly
    // negative, and sqrt's derivative at exactly 0 would be infinite; below the
    // clamp the gradient is 0, as for a point's distance to itself.
    return sqrt(clamp(d2, scalar_to_tensor(Scalar(1e-30), d2.dtype(), d2.device(), true), std::nullopt));
  }
  Tensor d = sub(unsqueeze(x1, -2), unsqueeze(x2, -3));
  return norm(d, Scalar(p), std::vector<int64_t>{-1}, false);
}
STRATA_IMPL_COMPOSITE(cdist, cdist_impl);

Tensor pdist_impl(const Tensor& self, double p) {
  STRATA_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  check_float_input(self, "pdist", "input");
  STRATA_CHECK(p >= 0, "pdist only supports non-negative p values");
  const int64_t n = self.size(0);
  std::vector<int64_t> is, js;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      is.push_back(i);
      js.push_back(j);
    }
  Tensor a = index_select(self, 0, index_tensor(is, self.device()));
  Tensor b = index_select(self, 0, index_tensor(js, self.device()));
  return norm(sub(a, b), Scalar(p), std::vector<int64_t>{-1}, false);
}
STRATA_IMPL_COMPOSITE(pdist, pdist_impl);

Tensor cosine_similarity_impl(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  std::vector<Tensor> b = broadcast_tensors(std::vector<Tensor>{x1, x2});
  const ScalarType dt = promote_types(x1.dtype(), x2.dtype());
  STRATA_CHECK(is_floating_type(dt), "cosine_similarity: expected common dtype to be floating point, yet common "
               "dtype is ", dtype_name(dt));
  Tensor a = b[0].dtype() == dt ? b[0] : to_dtype(b[0], dt);
  Tensor c = b[1].dtype() == dt ? b[1] : to_dtype(b[1], dt);
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "cosine_similarity");
  const std::vector<int64_t> d{dim};
  // Each side normalised by its own norm (clamped at eps) before the dot
  // product, which keeps the products in range for large inputs.
  Tensor e = scalar_to_tensor(Scalar(eps), dt, a.device(), true);
  Tensor na = clamp(norm(a, Scalar(2.0), d, true), e, std::nullopt);
  Tensor nc = clamp(norm(c, Scalar(2.0), d, true), e, std::nullopt);
  return sum(mul(div(a, na), div(c, nc)), d, false);
}
STRATA_IMPL_COMPOSITE(cosine_similarity, cosine_similarity_impl);

// ---- diagonals ----------------------------------------------------------------------

Tensor diag_embed_impl(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  STRATA_CHECK(self.dim() >= 1, "diag_embed: expected a tensor of at least 1 dimension, but got a 0-d tensor");
  const int64_t nd = self.dim() + 1;
  dim1 = wrap_dim(dim1, nd, "diag_embed");
  dim2 = wrap_dim(dim2, nd, "diag_embed");
  STRATA_CHECK(dim1 != dim2, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  const int64_t n = self.size(-1);
  const int64_t m = n + (offset >= 0 ? offset : -offset);
  // Build (m, m, *batch) with the diagonal scattered by index_put, then move
  // the two matrix dims to dim1 and dim2.
  std::vector<int64_t> rows(n), cols(n);
  for (int64_t i = 0; i < n; ++i) {
    rows[i] = offset >= 0 ? i : i - offset;
    cols[i] = offset >= 0 ? i + offset : i;
  }
  Tensor values = movedim(self, std::vector<int64_t>{-1}, std::vector<int64_t>{0});
  DimVector shape{m, m};
  for (int64_t d = 0; d + 1 < self.dim(); ++d) shape.push_back(self.size(d));
  Tensor base = zeros(shape, self.dtype(), self.device());
  Tensor r = index_put(base, std::vector<Tensor>{index_tensor(rows, self.device()), index_tensor(cols, self.device())},
                       values);
  return movedim(r, std::vector<int64_t>{0, 1}, std::vector<int64_t>{dim1, dim2});
}
STRATA_IMPL_COMPOSITE(diag_embed, diag_embed_impl);

Tensor diag_impl(const Tensor& self, int64_t diagonal_, const OptT& out) {
  STRATA_CHECK(self.dim() == 1 || self.dim() == 2, "diag(): Supports 1D or 2D tensors. Got ", self.dim(), "D");
  Tensor r = self.dim() == 1 ? diag_embed(self, diagonal_, 0, 1) : clone(diagonal(self, diagonal_, 0, 1));
  return finish_out(r, out, "diag");
}
STRATA_IMPL_COMPOSITE(diag, diag_impl);

Tensor diagflat_impl(const Tensor& self, int64_t offset) { return diag_embed(flatten(self), offset, 0, 1); }
STRATA_IMPL_COMPOSITE(diagflat, diagflat_impl);

// ---- shapes ---------------------------------------------------------------------------

Tensor atleast_1d_impl(const Tensor& self) { return self.dim() >= 1 ? self : reshape(self, DimVector{1}); }
Tensor atleast_2d_impl(const Tensor& self) {
  if (self.dim() >= 2) return self;
  return reshape(self, DimVector{1, self.dim() == 0 ? 1 : self.size(0)});
}
Tensor atleast_3d_impl(const Tensor& self) {
  switch (self.dim()) {
    case 0: return reshape(self, DimVector{1, 1, 1});
    case 1: return reshape(self, DimVector{1, self.size(0), 1});
    case 2: return unsqueeze(self, 2);
    default: return self;
  }
}
STRATA_IMPL_COMPOSITE(atleast_1d, atleast_1d_impl);
STRATA_IMPL_COMPOSITE(atleast_2d, atleast_2d_impl);
STRATA_IMPL_COMPOSITE(atleast_3d, atleast_3d_impl);

std::vector<Tensor> broadcast_tensors_impl(TensorList tensors) {
  DimVector shape;
  for (const Tensor& t : tensors) shape = broadcast_shapes(shape, t.sizes(), "broadcast_tensors");
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) {
    const bool same = std::equal(shape.begin(), shape.end(), t.sizes().begin(), t.sizes().end());
    out.push_back(same ? alias(t) : expand(t, shape));
  }
  return out;
}
STRATA_IMPL_COMPOSITE(broadcast_tensors, broadcast_tensors_impl);

Tensor vander_impl(const Tensor& x, OptInt N, bool increasing) {
  STRATA_CHECK(x.dim() == 1, "x must be a one-dimensional tensor.");
  const int64_t n = N.value_or(x.size(0));
  STRATA_CHECK(n >= 0, "N must be non-negative.");
  // Integers and bool compute in int64, as in torch.
  Tensor xs = is_floating_type(x.dtype()) ? x : to_dtype(x, ScalarType::Int64);
  if (n == 0) return empty_tensor(DimVector{x.size(0), 0}, xs.dtype(), x.device());
  // Columns 1, x, x^2, ... as a running product (no pow, so x = 0 has finite gradients).
  Tensor ones_col = ones(DimVector{x.size(0), 1}, xs.dtype(), x.device());
  Tensor r = ones_col;
  if (n > 1) {
    Tensor reps = expand(unsqueeze(xs, 1), DimVector{x.size(0), n - 1});
    r = cat(std::vector<Tensor>{ones_col, cumprod(reps, 1)}, 1);
  }
  return increasing ? r : flip(r, std::vector<int64_t>{1});
}
STRATA_IMPL_COMPOSITE(vander, vander_impl);

}  // namespace

}  // namespace strata
