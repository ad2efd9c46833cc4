// View ops: each computes new (sizes, strides, offset) over self's storage.
// They never touch data, so one implementation serves CPU and Meta (and any
// other device). Composite views are written in terms of the primitives so
// that autograd needs formulas only for the primitives.
#include <algorithm>
#include <numeric>

#include "core/shape.h"
#include "ops/op_list.h"
#include "ops/ops.h"

namespace strata {

namespace {

Tensor restride(const Tensor& self, DimVector sizes, DimVector strides, int64_t offset) {
  return make_view(self, std::move(sizes), std::move(strides), offset);
}

DimVector to_vec(IntArrayRef a) { return DimVector(a.begin(), a.end()); }

// self's offset moved by index steps of stride. Within a non-empty tensor this stays inside the storage; an
// empty tensor's strides are not bounded (as_strided accepts any for zero elements), so the product may
// overflow or land far past the storage, where even forming the data pointer overflows (found by
// fuzz/fuzz_geometry): such views read nothing and keep self's offset.
int64_t moved_offset(const Tensor& self, int64_t index, int64_t stride) {
  int64_t step = 0, off = 0;
  if (__builtin_mul_overflow(index, stride, &step) || __builtin_add_overflow(self.storage_offset(), step, &off))
    return self.storage_offset();
  const int64_t capacity = static_cast<int64_t>(self.impl()->storage()->nbytes() / self.element_size());
  if (off < 0 || off > capacity) return self.storage_offset();
  return off;
}

}  // namespace

DimVector infer_size(IntArrayRef shape, int64_t numel, const char* op) {
  DimVector res = to_vec(shape);
  int64_t infer = -1;
  int64_t prod = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      STRATA_CHECK(infer < 0, op, ": only one dimension can be inferred (shape ", shape_str(shape), ")");
      infer = static_cast<int64_t>(i);
    } else {
      STRATA_CHECK(shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in shape ", shape_str(shape));
      overflow |= __builtin_mul_overflow(prod, shape[i], &prod);
    }
  }
  if (infer >= 0) {
    STRATA_CHECK(prod != 0, op, ": cannot reshape tensor of 0 elements into shape ", shape_str(shape),
                 " because the unspecified dimension size -1 can be any value and is ambiguous");
    STRATA_CHECK(!overflow && numel % prod == 0, op, ": shape '", shape_str(shape), "' is invalid for input of size ",
                 numel);
    res[infer] = numel / prod;
  } else {
    STRATA_CHECK(!overflow && prod == numel, op, ": shape '", shape_str(shape), "' is invalid for input of size ",
                 numel);
  }
  return res;
}

// Note [When is a view possible]
// Split the old dims into chunks that are contiguous among themselves (each
// dim's stride equals the next one's stride times its size). A new shape can
// reuse the storage iff its dims can be grouped into the same chunks in order,
// each new group having exactly its chunk's element count.
std::optional<DimVector> compute_view_strides(IntArrayRef old_sizes, IntArrayRef old_strides,
                                              IntArrayRef new_sizes) {
  const int64_t n_old = static_cast<int64_t>(old_sizes.size());
  const int64_t n_new = static_cast<int64_t>(new_sizes.size());
  // Empty or not, without the product: an empty tensor's other sizes may be huge (fuzz_geometry), while a
  // non-empty tensor's element count fits in int64, and so do the partial products below.
  const bool empty = std::find(old_sizes.begin(), old_sizes.end(), int64_t(0)) != old_sizes.end();
  if (empty || n_old == 0) {
    if (std::equal(old_sizes.begin(), old_sizes.end(), new_sizes.begin(), new_sizes.end())) return to_vec(old_strides);
    return contiguous_strides(new_sizes);
  }
  DimVector st(n_new);
  int64_t view_d = n_new - 1;
  int64_t chunk_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = n_old - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    bool chunk_ends = d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      st[view_d] = view_numel * chunk_stride;
      view_numel *= new_sizes[view_d];
      view_d--;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

Tensor view_impl(const Tensor& self, IntArrayRef size) {
  DimVector shape = infer_size(size, self.numel(), "view");
  auto st = compute_view_strides(self.sizes(), self.strides(), shape);
  STRATA_CHECK(st, "view: view size is not compatible with input tensor's size and stride (at least one dimension "
               "spans across two contiguous subspaces). Use .reshape(...) instead. (input shape ", self.shape_str(),
               ", strides ", shape_str(self.strides()), ", requested shape ", shape_str(shape), ")");
  return restride(self, std::move(shape), std::move(*st), self.storage_offset());
}
STRATA_IMPL_CPU_META(view, view_impl);

// Reinterprets the bytes as another dtype. With a different element size the
// last dim must be contiguous; it shrinks or grows by the size ratio.
Tensor view_dtype_impl(const Tensor& self, ScalarType dtype) {
  const int64_t old_es = static_cast<int64_t>(self.element_size());
  const int64_t new_es = static_cast<int64_t>(element_size(dtype));
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  int64_t offset = self.storage_offset();
  std::string_view from = dtype_name(self.dtype());
  std::string_view to = dtype_name(dtype);
  if (old_es != new_es) {
    STRATA_CHECK(self.dim() > 0, "view.dtype: self.dim() cannot be 0 to view ", from, " as ", to,
                 " (different element sizes)");
    STRATA_CHECK(strides.back() == 1, "view.dtype: self.stride(-1) must be 1 to view ", from, " as ", to,
                 " (different element sizes), but got ", strides.back());
    if (old_es > new_es) {
      int64_t r = old_es / new_es;
      for (size_t i = 0; i + 1 < strides.size(); ++i) strides[i] *= r;
      sizes.back() *= r;
      offset *= r;
    } else {
      int64_t r = new_es / old_es;
      STRATA_CHECK(sizes.back() % r == 0, "view.dtype: self.size(-1) must be divisible by ", r, " to view ", from,
                   " as ", to, " (different element sizes), but got ", sizes.back());
      STRATA_CHECK(offset % r == 0, "view.dtype: self.storage_offset() must be divisible by ", r, " to view ", from,
                   " as ", to, " (different element sizes), but got ", offset);
      for (size_t i = 0; i + 1 < strides.size(); ++i) {
        STRATA_CHECK(strides[i] % r == 0, "view.dtype: self.stride(", i, ") must be divisible by ", r, " to view ",
                     from, " as ", to, " (different element sizes), but got ", strides[i]);
        strides[i] /= r;
      }
      sizes.back() /= r;
      offset /= r;
    }
  }
  auto impl = make_intrusive<TensorImpl>(self.impl()->storage(), offset, std::move(sizes), std::move(strides), dtype);
  impl->set_key_set(self.key_set());
  return Tensor(std::move(impl));
}
STRATA_IMPL_CPU_META(view_dtype, view_dtype_impl);

Tensor reshape_impl(const Tensor& self, IntArrayRef shape) {
  DimVector s = infer_size(shape, self.numel(), "reshape");
  if (compute_view_strides(self.sizes(), self.strides(), s)) return view(self, s);
  return view(clone(self), s);
}
STRATA_IMPL_COMPOSITE(reshape, reshape_impl);

Tensor flatten_impl(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  const int64_t n = self.dim();
  int64_t s = wrap_dim(start_dim, n, "flatten"), e = wrap_dim(end_dim, n, "flatten");
  STRATA_CHECK(s <= e, "flatten: flatten() has invalid args: start_dim (", start_dim, ") cannot come after end_dim (",
               end_dim, ")");
  if (n == 0) return reshape(self, DimVector{1});
  if (s == e) return self;
  DimVector shape(self.sizes().begin(), self.sizes().begin() + s);
  // The merged size of an empty tensor's other dims may not fit in int64 (fuzz_geometry): refuse it; a zero
  // among the merged dims makes it 0.
  int64_t p = 1;
  bool overflow = false, zero = false;
  for (int64_t d = s; d <= e; ++d) {
    overflow |= __builtin_mul_overflow(p, self.sizes()[d], &p);
    zero |= self.sizes()[d] == 0;
  }
  if (zero) p = 0;
  STRATA_CHECK(zero || !overflow, "flatten(", self.describe(), ", start_dim=", start_dim, ", end_dim=", end_dim,
               "): the flattened size overflows int64");
  shape.push_back(p);
  shape.insert(shape.end(), self.sizes().begin() + e + 1, self.sizes().end());
  return reshape(self, shape);
}
STRATA_IMPL_COMPOSITE(flatten, flatten_impl);

Tensor unflatten_impl(const Tensor& self, int64_t dim, IntArrayRef sizes) {
  const int64_t n = self.dim();
  STRATA_CHECK(n > 0, "unflatten: cannot unflatten a 0-dim tensor");
  int64_t d = wrap_dim(dim, n, "unflatten");
  STRATA_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  int64_t size = self.sizes()[d];
  DimVector inner;
  try {
    inner = infer_size(sizes, size, "unflatten");
  } catch (const Error&) {
    throw Error(str("unflatten: Provided sizes ", shape_str(sizes), " don't multiply up to the size of dim ", dim,
                    " (", size, ") in the input tensor"));
  }
  DimVector shape(self.sizes().begin(), self.sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), self.sizes().begin() + d + 1, self.sizes().end());
  return view(self, shape);
}
STRATA_IMPL_COMPOSITE(unflatten, unflatten_impl);

Tensor transpose_impl(const Tensor& self, int64_t dim0, int64_t dim1) {
  const int64_t n = self.dim();
  int64_t a = wrap_dim(dim0, n, "transpose"), b = wrap_dim(dim1, n, "transpose");
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  if (n > 0) {
    std::swap(sizes[a], sizes[b]);
    std::swap(strides[a], strides[b]);
  }
  return restride(self, std::move(sizes), std::move(strides), self.storage_offset());
}
STRATA_IMPL_CPU_META(transpose, transpose_impl);

Tensor swapaxes_impl(const Tensor& self, int64_t a, int64_t b) { return transpose(self, a, b); }
STRATA_IMPL_COMPOSITE(swapaxes, swapaxes_impl);
STRATA_IMPL_COMPOSITE(swapdims, swapaxes_impl);

Tensor permute_impl(const Tensor& self, IntArrayRef dims) {
  const int64_t n = self.dim();
  STRATA_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: number of dims don't match in permute: input.dim() = ",
               n, " is not equal to len(dims) = ", dims.size());
  dims_to_mask(dims, n, "permute");
  DimVector sizes(n), strides(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    sizes[i] = self.sizes()[d];
    strides[i] = self.strides()[d];
  }
  return restride(self, std::move(sizes), std::move(strides), self.storage_offset());
}
STRATA_IMPL_CPU_META(permute, permute_impl);

Tensor movedim_impl(const Tensor& self, IntArrayRef source, IntArrayRef destination) {
  const int64_t n = self.dim();
  STRATA_CHECK(source.size() == destination.size(), "movedim: Invalid source or destination dims: source (",
               shape_str(source), " dims) should contain the same number of dims as destination (",
               shape_str(destination), " dims)");
  dims_to_mask(source, n, "movedim");
  uint64_t dst_mask = dims_to_mask(destination, n, "movedim");
  if (n == 0) return alias(self);
  DimVector order(n, -1);
  uint64_t used = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    int64_t s = wrap_dim(source[i], n, "movedim");
    order[wrap_dim(destination[i], n, "movedim")] = s;
    used |= uint64_t(1) << s;
  }
  int64_t next = 0;
  for (int64_t pos = 0; pos < n; ++pos) {
    if (dst_mask & (uint64_t(1) << pos)) continue;
    while (used & (uint64_t(1) << next)) next++;
    order[pos] = next++;
  }
  return permute(self, order);
}
STRATA_IMPL_COMPOSITE(movedim, movedim_impl);
STRATA_IMPL_COMPOSITE(moveaxis, movedim_impl);

Tensor t_impl(const Tensor& self) {
  STRATA_CHECK(self.dim() <= 2, "t: t() expects a tensor with <= 2 dimensions, but self is ", self.dim(), "D");
  return self.dim() == 2 ? transpose(self, 0, 1) : transpose(self, 0, 0);
}
STRATA_IMPL_COMPOSITE(t, t_impl);

Tensor select_impl(const Tensor& self, int64_t dim, int64_t index) {
  const int64_t n = self.dim();
  STRATA_CHECK_INDEX(n > 0, "select: select() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, n, "select");
  int64_t size = self.sizes()[d];
  STRATA_CHECK_INDEX(index >= -size && index < size, "select(): index ", index, " out of range for tensor of size ",
                     self.shape_str(), " at dimension ", d);
  if (index < 0) index += size;
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  int64_t offset = moved_offset(self, index, strides[d]);
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return restride(self, std::move(sizes), std::move(strides), offset);
}
STRATA_IMPL_CPU_META(select, select_impl);

Tensor slice_impl(const Tensor& self, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                  int64_t step) {
  const int64_t n = self.dim();
  STRATA_CHECK_INDEX(n > 0, "slice: slice() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, n, "slice");
  STRATA_CHECK_VALUE(step > 0, "slice: step must be greater than zero, got ", step);
  const int64_t size = self.sizes()[d];
  // Python's clamping: negative bounds count from the end, then clamp to [0, size].
  int64_t s = start.value_or(0), e = end.value_or(size);
  if (s < 0) s = std::max<int64_t>(s + size, 0);  // s >= INT64_MIN, size >= 0: no overflow
  if (e < 0) e = std::max<int64_t>(e + size, 0);
  s = std::min(s, size);
  e = std::clamp(e, s, size);
  const int64_t len = e == s ? 0 : 1 + (e - s - 1) / step;
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  int64_t offset = moved_offset(self, s, strides[d]);
  int64_t new_stride;
  // Only a slice of at most one element can overflow here; its stride is unused.
  if (__builtin_mul_overflow(strides[d], step, &new_stride)) new_stride = strides[d];
  sizes[d] = len;
  strides[d] = new_stride;
  return restride(self, std::move(sizes), std::move(strides), offset);
}
STRATA_IMPL_CPU_META(slice, slice_impl);

Tensor narrow_impl(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  STRATA_CHECK_INDEX(self.dim() > 0, "narrow: narrow() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, self.dim(), "narrow");
  int64_t size = self.sizes()[d];
  STRATA_CHECK_INDEX(start >= -size && start <= size, "narrow: start out of range (expected to be in range of [",
                     -size, ", ", size, "], but got ", start, ")");
  if (start < 0) start += size;
  STRATA_CHECK(length >= 0, "narrow: narrow(): length must be non-negative, got ", length);
  STRATA_CHECK(start <= size - length, "narrow: start (", start, ") + length (", length,
               ") exceeds dimension size (", size, ").");
  return slice(self, d, start, start + length, 1);
}
STRATA_IMPL_COMPOSITE(narrow, narrow_impl);

Tensor expand_impl(const Tensor& self, IntArrayRef size, bool /*implicit*/) {
  const int64_t n = self.dim();
  const int64_t m = static_cast<int64_t>(size.size());
  STRATA_CHECK(m >= n, "expand(", self.describe(), ", size=", shape_str(size), "): the number of sizes provided (", m,
               ") must be greater or equal to the number of dimensions in the tensor (", n, ")");
  DimVector sizes(m), strides(m);
  for (int64_t i = m - 1; i >= 0; --i) {
    int64_t j = i - (m - n);
    int64_t target = size[i];
    if (j < 0) {
      STRATA_CHECK(target >= 0, "expand: The expanded size of the tensor (", target,
                   ") isn't allowed in a leading, non-existing dimension ", i);
      sizes[i] = target;
      // A new leading dim repeats everything after it.
      strides[i] = 0;
      continue;
    }
    int64_t have = self.sizes()[j];
    if (target == -1) target = have;
    STRATA_CHECK(target >= 0, "expand: The expanded size of the tensor (", target, ") is negative at dimension ", i);
    if (have == target) {
      sizes[i] = have;
      strides[i] = self.strides()[j];
    } else {
      STRATA_CHECK(have == 1, "expand: The expanded size of the tensor (", target,
                   ") must match the existing size (", have, ") at non-singleton dimension ", i,
                   ".  Target sizes: ", shape_str(size), ".  Tensor sizes: ", self.shape_str());
      sizes[i] = target;
      strides[i] = 0;
    }
  }
  return restride(self, std::move(sizes), std::move(strides), self.storage_offset());
}
STRATA_IMPL_CPU_META(expand, expand_impl);

Tensor broadcast_to_impl(const Tensor& self, IntArrayRef size) { return expand(self, size); }
STRATA_IMPL_COMPOSITE(broadcast_to, broadcast_to_impl);

Tensor squeeze_dims_impl(const Tensor& self, IntArrayRef dims) {
  const int64_t n = self.dim();
  uint64_t mask = dims_to_mask(dims, n, "squeeze");
  DimVector sizes, strides;
  for (int64_t d = 0; d < n; ++d) {
    if ((mask & (uint64_t(1) << d)) && self.sizes()[d] == 1) continue;
    sizes.push_back(self.sizes()[d]);
    strides.push_back(self.strides()[d]);
  }
  return restride(self, std::move(sizes), std::move(strides), self.storage_offset());
}
STRATA_IMPL_CPU_META(squeeze_dims, squeeze_dims_impl);

Tensor squeeze_impl(const Tensor& self) {
  DimVector dims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.sizes()[d] == 1) dims.push_back(d);
  return squeeze(self, IntArrayRef(dims));
}
STRATA_IMPL_COMPOSITE(squeeze, squeeze_impl);

Tensor squeeze_dim_impl(const Tensor& self, int64_t dim) { return squeeze(self, IntArrayRef(&dim, 1)); }
STRATA_IMPL_COMPOSITE(squeeze_dim, squeeze_dim_impl);

Tensor unsqueeze_impl(const Tensor& self, int64_t dim) {
  const int64_t n = self.dim();
  int64_t d = wrap_dim(dim, n + 1, "unsqueeze");
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  // The new dim's stride is never stepped (size 1); an empty view's unbounded stride may overflow the
  // product (fuzz_geometry), and then the plain stride does as well.
  int64_t st = 1;
  if (d < n && __builtin_mul_overflow(sizes[d], strides[d], &st)) st = strides[d];
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return restride(self, std::move(sizes), std::move(strides), self.storage_offset());
}
STRATA_IMPL_CPU_META(unsqueeze, unsqueeze_impl);

// Note [as_strided bounds]
// The only view op whose geometry comes from the user: every element it can
// reach must lie inside the storage, else later reads would run off the end.
Tensor as_strided_impl(const Tensor& self, IntArrayRef size, IntArrayRef stride,
                       std::optional<int64_t> storage_offset) {
  STRATA_CHECK(size.size() == stride.size(), "as_strided: mismatch in length of strides and shape (size ",
               shape_str(size), ", stride ", shape_str(stride), ")");
  int64_t offset = storage_offset.value_or(self.storage_offset());
  STRATA_CHECK(offset >= 0, "as_strided: Tensor: invalid storage offset ", offset);
  for (int64_t s : stride)
    STRATA_CHECK(s >= 0, "as_strided: Negative strides are not supported at the moment, got strides: ",
                 shape_str(stride));
  int64_t numel = checked_numel(size, "as_strided");
  const int64_t es = static_cast<int64_t>(self.element_size());
  const int64_t nbytes = static_cast<int64_t>(self.impl()->storage()->nbytes());
  if (numel > 0) {
    // Index of the last reachable element + 1, in elements, overflow-checked.
    int64_t need = offset;
    bool overflow = false;
    for (size_t i = 0; i < size.size(); ++i) {
      int64_t span;
      overflow |= __builtin_mul_overflow(size[i] - 1, stride[i], &span);
      overflow |= __builtin_add_overflow(need, span, &need);
    }
    int64_t need_bytes = 0;
    overflow |= __builtin_add_overflow(need, int64_t(1), &need);
    overflow |= __builtin_mul_overflow(need, es, &need_bytes);
    STRATA_CHECK(!overflow && need_bytes <= nbytes, "as_strided: setStorage: sizes ", shape_str(size), ", strides ",
                 shape_str(stride), ", storage offset ", offset, ", and itemsize ", es, " requiring a storage size of ",
                 overflow ? std::string("more than int64 can hold") : std::to_string(need_bytes),
                 " are out of bounds for storage of size ", nbytes);
  } else {
    // Zero elements read nothing and take any offset, as in torch, as long as the data pointer can be formed
    // from it: offset * itemsize must not overflow (as_strided(x, [0], [1], 2**62) did; fuzz_geometry).
    int64_t offset_bytes = 0;
    STRATA_CHECK(!__builtin_mul_overflow(offset, es, &offset_bytes) && offset_bytes <= INT64_MAX - nbytes,
                 "as_strided: storage offset ", offset, " with itemsize ", es,
                 " is past any addressable storage (sizes ", shape_str(size), ")");
  }
  return restride(self, to_vec(size), to_vec(stride), offset);
}
STRATA_IMPL_CPU_META(as_strided, as_strided_impl);

Tensor diagonal_impl(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t n = self.dim();
  int64_t d1 = wrap_dim(dim1, n, "diagonal"), d2 = wrap_dim(dim2, n, "diagonal");
  STRATA_CHECK(n >= 2, "diagonal: diagonal() expects a tensor with at least 2 dimensions, but self is ", n, "D");
  STRATA_CHECK(d1 != d2, "diagonal: diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  int64_t off = self.storage_offset();
  int64_t len;
  // An empty tensor may carry unbounded strides (fuzz_geometry: strides[d1] + strides[d2] overflowed): the
  // offset moves as select's (moved_offset), and an overflowing diagonal stride, possible only when the view
  // has no elements (a non-empty view's strides are bounded by its storage), is replaced by one of the two;
  // it is never stepped.
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(sizes[d1], sizes[d2] - std::min(offset, sizes[d2])), 0);
    if (len > 0) off = moved_offset(self, offset, strides[d2]);
  } else {
    int64_t o = std::max(offset, -sizes[d1]);  // keeps -o from overflowing
    len = std::max<int64_t>(std::min(sizes[d1] + o, sizes[d2]), 0);
    if (len > 0) off = moved_offset(self, -offset, strides[d1]);  // len > 0: offset > -sizes[d1], -offset fits
  }
  int64_t st = 0;
  if (__builtin_add_overflow(strides[d1], strides[d2], &st)) {
    STRATA_CHECK(self.numel() == 0, "diagonal(", self.describe(), ", offset=", offset, ", dim1=", dim1,
                 ", dim2=", dim2, "): the diagonal's stride overflows int64");
    st = strides[d1];
  }
  for (int64_t d : {std::max(d1, d2), std::min(d1, d2)}) {
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
  }
  sizes.push_back(len);
  strides.push_back(st);
  return restride(self, std::move(sizes), std::move(strides), off);
}
STRATA_IMPL_CPU_META(diagonal, diagonal_impl);

Tensor unfold_impl(const Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  const int64_t n = self.dim();
  int64_t d = wrap_dim(dimension, n, "unfold");
  DimVector sizes = to_vec(self.sizes()), strides = to_vec(self.strides());
  // A 0-d tensor unfolds like a 1-element 1-d one.
  if (n == 0) {
    sizes = {1};
    strides = {1};
  }
  int64_t have = sizes[d];
  STRATA_CHECK(size >= 0 && size <= have, "unfold: maximum size for tensor at dimension ", d, " is ", have,
               " but size is ", size);
  STRATA_CHECK(step > 0, "unfold: step is ", step, " but must be > 0");
  int64_t st = strides[d];
  sizes[d] = (have - size) / step + 1;
  int64_t new_stride;
  if (__builtin_mul_overflow(st, step, &new_stride)) new_stride = st;  // only one window: unused
  strides[d] = new_stride;
  sizes.push_back(size);
  strides.push_back(st);
  if (n == 0) {
    sizes.erase(sizes.begin());
    strides.erase(strides.begin());
  }
  return restride(self, std::move(sizes), std::move(strides), self.storage_offset());
}
STRATA_IMPL_CPU_META(unfold, unfold_impl);

std::vector<Tensor> unbind_impl(const Tensor& self, int64_t dim) {
  STRATA_CHECK_INDEX(self.dim() > 0, "unbind: Dimension specified as ", dim, " but tensor has no dimensions");
  int64_t d = wrap_dim(dim, self.dim(), "unbind");
  std::vector<Tensor> out;
  out.reserve(self.sizes()[d]);
  for (int64_t i = 0; i < self.sizes()[d]; ++i) out.push_back(select(self, d, i));
  return out;
}
STRATA_IMPL_COMPOSITE(unbind, unbind_impl);

Tensor alias_impl(const Tensor& self) {
  return restride(self, to_vec(self.sizes()), to_vec(self.strides()), self.storage_offset());
}
STRATA_IMPL_CPU_META(alias, alias_impl);

Tensor view_as_impl(const Tensor& self, const Tensor& other) { return view(self, other.sizes()); }
STRATA_IMPL_COMPOSITE(view_as, view_as_impl);
Tensor expand_as_impl(const Tensor& self, const Tensor& other) { return expand(self, other.sizes()); }
STRATA_IMPL_COMPOSITE(expand_as, expand_as_impl);
Tensor reshape_as_impl(const Tensor& self, const Tensor& other) { return reshape(self, other.sizes()); }
STRATA_IMPL_COMPOSITE(reshape_as, reshape_as_impl);

}  // namespace strata
