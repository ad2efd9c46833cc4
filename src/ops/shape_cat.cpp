// Joining, splitting and rearranging ops: cat, stack, split, chunk, flip,
// roll, repeat, tile, tril, triu. Most are views plus copy_ between views
// (copy_ handles dtype conversion, any strides and threading).
#include "ops/out_overlap.h"
#include "ops/shape_common.h"
#include "ops/tensor_iterator.h"

namespace strata {

STRATA_DEFINE_STUB(tri_stub, TriFn);

using namespace shape_detail;

namespace {

// A view of t restricted to [start, start + len) along dim.
Tensor narrow_view(const Tensor& t, int64_t dim, int64_t start, int64_t len) {
  DimVector sizes = to_vec(t.sizes());
  sizes[dim] = len;
  return make_view(t, std::move(sizes), to_vec(t.strides()), t.storage_offset() + start * t.stride(dim));
}

// torch's is_strides_like_channels_last(_3d) (suggest_memory_format): C fastest, then W, H (, D), N, size-1 dims
// aside. A row-major tensor never passes (its C stride is not the least).
bool strides_like_channels_last(const Tensor& t) {
  const int64_t nd = t.dim();
  if ((nd != 4 && nd != 5) || t.is_contiguous()) return false;
  IntArrayRef sz = t.sizes(), st = t.strides();
  if (st[1] == 0) return false;
  int64_t least = 0;
  auto visit = [&](int64_t d) {
    if (sz[d] == 0 || st[d] < least || (d == 0 && least == st[1])) return false;
    least = st[d] * (sz[d] > 1 ? sz[d] : 1);
    return true;
  };
  if (!visit(1)) return false;
  for (int64_t d = nd - 1; d >= 2; --d)
    if (!visit(d)) return false;
  return visit(0);
}

// The strides of a dense channels-last (channels-last-3d) tensor of these sizes.
DimVector channels_last_strides(IntArrayRef sizes) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  DimVector st(sizes.size());
  int64_t s = 1;
  st[1] = s;
  s *= std::max<int64_t>(sizes[1], 1);
  for (int64_t d = nd - 1; d >= 2; --d) {
    st[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  st[0] = s;
  return st;
}

ScalarType list_result_type(TensorList tensors) {
  ResultTypeState st;
  for (const Tensor& t : tensors) update_result_type_state(st, t);
  ScalarType r = result_type(st);
  return r == ScalarType::Undefined ? tensors[0].dtype() : r;
}

}  // namespace

Tensor cat_impl(TensorList tensors, int64_t dim, const OptT& out) {
  STRATA_CHECK_VALUE(!tensors.empty(), "cat(): expected a non-empty list of Tensors");
  if (has_out(out)) check_out_overlap("cat", *out, tensors);
  Device device = common_device(tensors, "cat");
  ScalarType dtype = list_result_type(tensors);
  // Legacy rule: 1-d empty tensors (shape (0,)) are skipped whatever the other shapes.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    STRATA_CHECK(tensors[i].dim() > 0, "cat(): zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    if (!ref && !skipped(tensors[i])) ref = &tensors[i];
  }
  if (!ref) ref = &tensors[0];
  const int64_t nd = ref->dim();
  dim = wrap_dim(dim, nd, "cat");
  DimVector sizes = to_vec(ref->sizes());
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t)) continue;
    STRATA_CHECK(t.dim() == nd, "cat(): Tensors must have same number of dimensions: got ", nd, " and ", t.dim(),
                 " (shapes ", ref->shape_str(), " and ", t.shape_str(), ")");
    for (int64_t d = 0; d < nd; ++d) {
      STRATA_CHECK(d == dim || t.size(d) == sizes[d], "cat(): Sizes of tensors must match except in dimension ", dim,
                   ". Expected size ", sizes[d], " but got size ", t.size(d), " for tensor number ", i,
                   " in the list (shapes ", ref->shape_str(), " and ", t.shape_str(), ")");
    }
    total += t.size(dim);
  }
  sizes[dim] = total;
  // Inputs all laid out channels-last give a channels-last result (torch's cat_compute_output_memory_format).
  bool channels_last = !has_out(out) && (nd == 4 || nd == 5);
  for (size_t i = 0; channels_last && i < tensors.size(); ++i)
    channels_last = skipped(tensors[i]) || strides_like_channels_last(tensors[i]);
  Tensor result = channels_last ? empty_strided(sizes, channels_last_strides(sizes), dtype, device)
                                : prepare_out(out, sizes, dtype, device, "cat", false);
  if (device.is_meta() || result.numel() == 0) return result;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t)) continue;
    const int64_t len = t.size(dim);
    if (len > 0) copy_(narrow_view(result, dim, offset, len), t);
    offset += len;
  }
  return result;
}
STRATA_IMPL_CPU_META(cat, cat_impl);

Tensor stack_impl(TensorList tensors, int64_t dim, const OptT& out) {
  STRATA_CHECK(!tensors.empty(), "stack(): expects a non-empty TensorList");
  if (has_out(out)) check_out_overlap("stack", *out, tensors);
  Device device = common_device(tensors, "stack");
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    STRATA_CHECK(std::equal(t.sizes().begin(), t.sizes().end(), first.sizes().begin(), first.sizes().end()),
                 "stack(): expects each tensor to be equal size, but got ", first.shape_str(), " at entry 0 and ",
                 t.shape_str(), " at entry ", i);
  }
  dim = wrap_dim(dim, first.dim() + 1, "stack");
  DimVector sizes = to_vec(first.sizes());
  sizes.insert(sizes.begin() + dim, static_cast<int64_t>(tensors.size()));
  Tensor result = prepare_out(out, sizes, list_result_type(tensors), device, "stack", false);
  if (device.is_meta() || result.numel() == 0) return result;
  DimVector slice_strides = to_vec(result.strides());
  const int64_t step = slice_strides[dim];
  slice_strides.erase(slice_strides.begin() + dim);
  for (size_t i = 0; i < tensors.size(); ++i) {
    copy_(make_view(result, to_vec(first.sizes()), slice_strides, result.storage_offset() + int64_t(i) * step),
          tensors[i]);
  }
  return result;
}
STRATA_IMPL_CPU_META(stack, stack_impl);

std::vector<Tensor> split_with_sizes_impl(const Tensor& self, IntArrayRef split_sizes, int64_t dim) {
  STRATA_CHECK(self.dim() > 0, "split_with_sizes(): expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, self.dim(), "split_with_sizes");
  int64_t sum = 0;
  for (int64_t s : split_sizes) {
    STRATA_CHECK(s >= 0, "split_with_sizes(): expects split_sizes have only non-negative entries, but got split_sizes=",
                 shape_str(split_sizes));
    sum += s;
  }
  STRATA_CHECK(sum == self.size(dim), "split_with_sizes(): expects split_sizes to sum exactly to ", self.size(dim),
               " (input tensor's size at dimension ", dim, "), but got split_sizes=", shape_str(split_sizes));
  std::vector<Tensor> parts;
  parts.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    parts.push_back(narrow_view(self, dim, start, s));
    start += s;
  }
  return parts;
}
STRATA_IMPL_CPU_META(split_with_sizes, split_with_sizes_impl);

std::vector<Tensor> split_sizes_impl(const Tensor& self, IntArrayRef split_sizes, int64_t dim) {
  return split_with_sizes_impl(self, split_sizes, dim);
}
STRATA_IMPL_CPU_META(split_sizes, split_sizes_impl);

std::vector<Tensor> split_impl(const Tensor& self, int64_t split_size, int64_t dim) {
  STRATA_CHECK(self.dim() > 0, "split(): expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, self.dim(), "split");
  const int64_t n = self.size(dim);
  STRATA_CHECK(split_size >= 0, "split(): expects split_size be non-negative, but got split_size=", split_size);
  STRATA_CHECK(split_size > 0 || n == 0, "split(): split_size can only be 0 if dimension size is 0, but got dimension size of ",
               n);
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> parts;
  parts.reserve(pieces);
  for (int64_t i = 0; i < pieces; ++i) {
    int64_t start = i * split_size;
    parts.push_back(narrow_view(self, dim, start, std::min(split_size, n - start)));
  }
  return parts;
}
STRATA_IMPL_CPU_META(split_Tensor, split_impl);

std::vector<Tensor> chunk_impl(const Tensor& self, int64_t chunks, int64_t dim) {
  STRATA_CHECK(self.dim() > 0, "chunk(): expects at least a 1-dimensional tensor");
  STRATA_CHECK(chunks > 0, "chunk(): expects `chunks` to be greater than 0, got: ", chunks);
  dim = wrap_dim(dim, self.dim(), "chunk");
  const int64_t n = self.size(dim);
  if (n == 0) {
    // An empty dim splits into `chunks` empty pieces.
    DimVector zeros(chunks, 0);
    return split_with_sizes_impl(self, zeros, dim);
  }
  return split_impl(self, (n + chunks - 1) / chunks, dim);
}
STRATA_IMPL_CPU_META(chunk, chunk_impl);

Tensor flip_impl(const Tensor& self, IntArrayRef dims) {
  uint64_t mask = dims_to_mask(dims, self.dim(), "flip");
  Tensor result = empty_tensor(self.sizes(), self.dtype(), self.device());
  if (self.device().is_meta() || self.numel() == 0) return result;
  // Read through a view with negated strides along the flipped dims.
  DimVector strides = to_vec(self.strides());
  int64_t offset = self.storage_offset();
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!(mask & (uint64_t(1) << d))) continue;
    offset += (self.size(d) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  copy_(result, make_view(self, to_vec(self.sizes()), std::move(strides), offset));
  return result;
}
STRATA_IMPL_CPU_META(flip, flip_impl);

namespace {

// dst = src rolled by shifts[i] (already in [0, size)) along dims[i], as 2^k block copies.
void roll_copy(const Tensor& dst, const Tensor& src, const DimVector& dims, const DimVector& shifts) {
  const size_t k = dims.size();
  for (uint64_t combo = 0; combo < (uint64_t(1) << k); ++combo) {
    Tensor d = dst, s = src;
    bool empty = false;
    for (size_t i = 0; i < k; ++i) {
      const int64_t n = src.size(dims[i]), sh = shifts[i];
      // Piece 0: dst[sh:] = src[:n-sh]; piece 1: dst[:sh] = src[n-sh:].
      if (combo & (uint64_t(1) << i)) {
        d = narrow_view(d, dims[i], 0, sh);
        s = narrow_view(s, dims[i], n - sh, sh);
      } else {
        d = narrow_view(d, dims[i], sh, n - sh);
        s = narrow_view(s, dims[i], 0, n - sh);
      }
      empty |= d.numel() == 0;
    }
    if (!empty) copy_(d, s);
  }
}

}  // namespace

Tensor roll_impl(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  if (dims.empty()) {
    STRATA_CHECK(shifts.size() == 1, "roll(): `shifts` required (one shift when no dims are given, got ",
                 shifts.size(), ")");
    // Roll the flattened tensor, then restore the shape.
    Tensor flat_src = contiguous(self);
    DimVector one{self.numel()};
    Tensor src = make_view(flat_src, one, DimVector{1}, flat_src.storage_offset());
    Tensor result = empty_tensor(self.sizes(), self.dtype(), self.device());
    if (self.device().is_meta() || self.numel() == 0) return result;
    Tensor dst = make_view(result, one, DimVector{1}, result.storage_offset());
    int64_t n = self.numel(), sh = ((shifts[0] % n) + n) % n;
    roll_copy(dst, src, DimVector{0}, DimVector{sh});
    return result;
  }
  STRATA_CHECK(shifts.size() == dims.size(), "roll(): shifts and dimensions must align. shifts: ", shifts.size(),
               ", dims:", dims.size());
  // Repeated dims add their shifts up.
  DimVector total(std::max<int64_t>(self.dim(), 1), 0);
  for (size_t i = 0; i < dims.size(); ++i) total[wrap_dim(dims[i], self.dim(), "roll")] += shifts[i];
  Tensor result = empty_tensor(self.sizes(), self.dtype(), self.device());
  if (self.device().is_meta() || self.numel() == 0) return result;
  if (self.dim() == 0) return copy_(result, self);
  DimVector rd, rs;
  for (int64_t d = 0; d < self.dim(); ++d) {
    int64_t n = self.size(d), sh = ((total[d] % n) + n) % n;
    if (sh != 0) {
      rd.push_back(d);
      rs.push_back(sh);
    }
  }
  // Beyond a few dims the 2^k blocks get small: roll in stages instead.
  constexpr size_t kMaxDimsPerPass = 4;
  Tensor src = self;
  while (rd.size() > kMaxDimsPerPass) {
    DimVector d1(rd.begin(), rd.begin() + kMaxDimsPerPass), s1(rs.begin(), rs.begin() + kMaxDimsPerPass);
    Tensor tmp = empty_tensor(self.sizes(), self.dtype(), self.device());
    roll_copy(tmp, src, d1, s1);
    src = tmp;
    rd.erase(rd.begin(), rd.begin() + kMaxDimsPerPass);
    rs.erase(rs.begin(), rs.begin() + kMaxDimsPerPass);
  }
  roll_copy(result, src, rd, rs);
  return result;
}
STRATA_IMPL_CPU_META(roll, roll_impl);

Tensor repeat_impl(const Tensor& self, IntArrayRef repeats) {
  const int64_t nd = static_cast<int64_t>(repeats.size());
  STRATA_CHECK(nd >= self.dim(), "repeat(): Number of dimensions of repeat dims can not be smaller than number of "
               "dimensions of tensor (repeats ", shape_str(repeats), " for a tensor of shape ", self.shape_str(), ")");
  const int64_t pad = nd - self.dim();
  DimVector in_sizes(nd, 1), in_strides(nd, 0), out_sizes(nd);
  for (int64_t d = 0; d < self.dim(); ++d) {
    in_sizes[pad + d] = self.size(d);
    in_strides[pad + d] = self.stride(d);
  }
  for (int64_t d = 0; d < nd; ++d) {
    STRATA_CHECK(repeats[d] >= 0, "repeat(): Trying to create tensor with negative dimension ", repeats[d],
                 " in repeats ", shape_str(repeats));
    STRATA_CHECK(!__builtin_mul_overflow(in_sizes[d], repeats[d], &out_sizes[d]), "repeat(): result size overflows");
  }
  Tensor result = empty_tensor(out_sizes, self.dtype(), self.device());
  if (self.device().is_meta() || result.numel() == 0) return result;
  // View the result as (r0, s0, r1, s1, ...) and copy self broadcast over the r dims.
  DimVector vs, dst_st, src_st;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t ostride = result.stride(d);
    if (repeats[d] != 1) {
      vs.push_back(repeats[d]);
      dst_st.push_back(ostride * in_sizes[d]);
      src_st.push_back(0);
    }
    if (in_sizes[d] != 1) {
      vs.push_back(in_sizes[d]);
      dst_st.push_back(ostride);
      src_st.push_back(in_strides[d]);
    }
  }
  STRATA_CHECK(vs.size() <= 64, "repeat(): too many dimensions");
  copy_(make_view(result, vs, dst_st, result.storage_offset()), make_view(self, vs, src_st, self.storage_offset()));
  return result;
}
STRATA_IMPL_CPU_META(repeat, repeat_impl);

Tensor tile_impl(const Tensor& self, IntArrayRef dims) {
  DimVector reps = to_vec(dims);
  // Fewer reps than dims: the leading dims repeat once.
  if (static_cast<int64_t>(reps.size()) < self.dim()) reps.insert(reps.begin(), self.dim() - reps.size(), 1);
  return repeat(self, reps);
}
STRATA_IMPL_COMPOSITE(tile, tile_impl);

namespace {

Tensor tri_common(const Tensor& self, int64_t diagonal, const OptT& out, bool lower) {
  const char* op = lower ? "tril" : "triu";
  STRATA_CHECK(self.dim() >= 2, op, ": input tensor must have at least 2 dimensions, but got shape ",
               self.shape_str());
  const bool inplace = has_out(out) && out->is_same(self);
  // out= sharing memory with the input in another layout (tril(a.t(), out=a)): the kernel would zero
  // elements it has yet to read, so the result is computed into a fresh tensor and copied. The same
  // geometry (a.tril_(), tril(a, out=a[:])) is safe in place: each element reads only itself.
  if (has_out(out) && !inplace && !self.device().is_meta() && self.numel() > 0 && out->impl()->storage() &&
      out->impl()->storage() == self.impl()->storage()) {
    const bool same_layout = out->storage_offset() == self.storage_offset() && out->dtype() == self.dtype() &&
                             std::ranges::equal(out->sizes(), self.sizes()) &&
                             std::ranges::equal(out->strides(), self.strides());
    if (!same_layout) {
      Tensor fresh = tri_common(self, diagonal, std::nullopt, lower);
      Tensor result = prepare_out(out, self.sizes(), self.dtype(), self.device(), op);
      copy_(result, fresh);
      return result;
    }
  }
  Tensor result = inplace ? self : prepare_out(out, self.sizes(), self.dtype(), self.device(), op);
  if (inplace) result.bump_version();
  if (self.device().is_meta() || self.numel() == 0) return result;
  // Clamp so that row/col arithmetic in the kernel cannot overflow.
  const int64_t lim = self.size(-1 + self.dim()) + self.size(self.dim() - 2) + 1;
  diagonal = std::clamp(diagonal, -lim, lim);
  tri_stub(self.device().type, result, self, diagonal, lower);
  return result;
}

}  // namespace

Tensor tril_impl(const Tensor& self, int64_t diagonal, const OptT& out) { return tri_common(self, diagonal, out, true); }
STRATA_IMPL_CPU_META(tril, tril_impl);
Tensor triu_impl(const Tensor& self, int64_t diagonal, const OptT& out) {
  return tri_common(self, diagonal, out, false);
}
STRATA_IMPL_CPU_META(triu, triu_impl);

}  // namespace strata
