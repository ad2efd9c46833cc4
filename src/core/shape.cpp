#include "core/shape.h"
#include "core/hot.h"

#include <algorithm>
#include <sstream>

namespace strata {

STRATA_HOT int64_t checked_numel(IntArrayRef sizes, const char* op) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    if (s < 0) {
      throw Error(str(op, ": Trying to create tensor with negative dimension ", s, ": ", shape_str(sizes)));
    }
    overflow |= __builtin_mul_overflow(n, s, &n);
  }
  // A zero anywhere makes the count 0 even if a partial product overflowed.
  for (int64_t s : sizes)
    if (s == 0) return 0;
  if (overflow) {
    throw Error(str(op, ": the number of elements of shape ", shape_str(sizes), " overflows int64"));
  }
  return n;
}

// contiguous_strides_into with torch's error where a stride overflows int64, which only the sizes of an
// empty tensor can make happen ([0, 27, 2**60]; found by fuzz/fuzz_geometry). Every new tensor's strides
// come from here (TensorImpl::assign_dims); the inline version in shape.h is left to callers whose
// sizes are known to fit.
void contiguous_strides_checked(IntArrayRef sizes, int64_t* out) {
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    out[i] = acc;
    if (i > 0 && __builtin_mul_overflow(acc, sizes[i] > 1 ? sizes[i] : 1, &acc)) [[unlikely]]
      throw Error(str("Stride calculation overflowed: sizes ", shape_str(sizes)));
  }
}

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector st(sizes.size());
  contiguous_strides_checked(sizes, st.data());
  return st;
}

STRATA_HOT bool is_contiguous_geometry(IntArrayRef sizes, IntArrayRef strides) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 0) return true;
    if (sizes[i] != 1 && strides[i] != expected) return false;
    if (__builtin_mul_overflow(expected, sizes[i], &expected)) [[unlikely]] {
      // Only an empty tensor's sizes can get here ([0, 27, 2**60]; a non-empty one's numel fits): it is
      // contiguous when a size left of here is 0, else the geometry is invalid anyway.
      return std::find(sizes.begin(), sizes.begin() + i, int64_t(0)) != sizes.begin() + i;
    }
  }
  return true;
}



int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;
  if (dim < -n || dim >= n) {
    throw IndexError(str(op ? op : "", op ? ": " : "", "Dimension out of range (expected to be in range of [", -n,
                         ", ", n - 1, "], but got ", dim, ")"));
  }
  return dim < 0 ? dim + n : dim;
}

uint64_t dims_to_mask(IntArrayRef dims, int64_t ndim, const char* op) {
  STRATA_CHECK(ndim <= 64, op, ": tensors with more than 64 dimensions are not supported");
  uint64_t mask = 0;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    STRATA_CHECK(!(mask & (uint64_t(1) << w)), op, ": dim ", w, " appears multiple times in the list of dims");
    mask |= uint64_t(1) << w;
  }
  return mask;
}

DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  DimVector out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      throw Error(str(op, ": The size of tensor a (", da, ") must match the size of tensor b (", db,
                      ") at non-singleton dimension ", i, "; shapes ", shape_str(a), " and ", shape_str(b),
                      " cannot be broadcast"));
    }
  }
  return out;
}

std::string shape_str(IntArrayRef s) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < s.size(); ++i) ss << (i ? ", " : "") << s[i];
  ss << "]";
  return ss.str();
}

}  // namespace strata
