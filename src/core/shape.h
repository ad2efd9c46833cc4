// Shape arithmetic shared by every op: overflow-checked element counts,
// contiguous strides, dim wrapping and broadcasting.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace strata {

// Product of sizes; throws on negative sizes or int64 overflow. `op` names the
// caller in the message.
int64_t checked_numel(IntArrayRef sizes, const char* op = "tensor");
DimVector contiguous_strides(IntArrayRef sizes);
// The same into out[0, sizes.size()) (out may not overlap sizes). Inline: every new tensor runs it.
inline void contiguous_strides_into(IntArrayRef sizes, int64_t* out) {
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    out[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
}
bool is_contiguous_geometry(IntArrayRef sizes, IntArrayRef strides);

// Wraps a possibly negative dim into [0, ndim). A 0-d tensor accepts -1 and 0.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op = nullptr);
// Wraps a list of dims, rejecting repeats; returns a bitmask over dims.
uint64_t dims_to_mask(IntArrayRef dims, int64_t ndim, const char* op);

DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op = "broadcast");
std::string shape_str(IntArrayRef s);

}  // namespace strata
