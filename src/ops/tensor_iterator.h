// Note [TensorIterator]
// The shared front half of every elementwise op: it broadcasts the inputs,
// works out the compute and output dtypes by PyTorch's promotion rules,
// allocates or checks the output (out= and in-place), converts inputs whose
// dtype differs from the compute dtype, and flattens the geometry into as few
// dimensions as the strides allow. Backends then only run a loop over
// (data pointers, byte strides, shape). It is device-generic: on Meta the
// output is created and nothing runs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace strata {

struct ResultTypeState {
  ScalarType dim_result = ScalarType::Undefined;
  ScalarType zero_result = ScalarType::Undefined;
  ScalarType wrapped_result = ScalarType::Undefined;
};
void update_result_type_state(ResultTypeState& st, const Tensor& t);
void update_result_type_state(ResultTypeState& st, const Scalar& s);
ScalarType result_type(const ResultTypeState& st);
ScalarType result_type(std::initializer_list<Tensor> ts);
// Whether a value of type `from` can be written to `to` by an out= op
// (no float -> int, no int -> bool).
bool can_cast(ScalarType from, ScalarType to);

// Checks that all defined tensors share a device (0-d CPU tensors may join
// any device, as wrapped numbers). Returns that device.
Device common_device(std::span<const Tensor> ts, const char* op);

class TensorIterator {
 public:
  static constexpr int kMaxOperands = 8;

  struct Config {
    const char* op = "op";
    std::optional<Tensor> out;          // out= or self for in-place
    bool inplace = false;               // out aliases input 0: shape must not change
    bool promote_inputs = true;         // convert inputs to the common dtype
    bool int_to_float = false;          // integral common dtype -> default float (div, exp)
    std::optional<ScalarType> out_dtype;  // e.g. Bool for comparisons
    std::optional<ScalarType> compute_dtype;  // force (e.g. where: skip condition)
    int skip_promotion_of = -1;         // input excluded from promotion (where's condition)
  };

  TensorIterator(Config cfg, std::initializer_list<Tensor> inputs);
  // geo_ may point into this object.
  TensorIterator(const TensorIterator&) = delete;
  TensorIterator& operator=(const TensorIterator&) = delete;

  const Tensor& output() const { return out_; }
  // The result to hand back: the out= tensor (after casting into it when its
  // dtype differs from the op's) or the new output.
  Tensor finish();
  const Tensor& input(int i) const { return inputs_[i]; }
  int ninputs() const { return ninputs_; }
  int noperands() const { return ninputs() + 1; }
  ScalarType common_dtype() const { return common_; }
  ScalarType output_dtype() const { return out_.dtype(); }
  Device device() const { return device_; }
  bool is_meta() const { return device_.is_meta(); }
  int64_t numel() const { return numel_; }

  // Flattened geometry: operand 0 is the output.
  int ndim() const { return ndim_; }
  IntArrayRef shape() const { return IntArrayRef(geo_, static_cast<size_t>(ndim_)); }
  // Byte stride of operand `op` along flattened dim `d` (d = 0 innermost).
  int64_t stride_bytes(int op, int d) const { return strides(op)[d]; }
  char* data(int op) const { return data_[op]; }
  bool is_contiguous() const;

  // The loop a backend runs: f(char** ptrs, const int64_t* inner_strides, n)
  // is called for runs along the innermost dim, covering [begin, end) of the
  // linear index space. Used by the parallel CPU driver.
  template <typename F>
  void for_each_run(int64_t begin, int64_t end, F&& f) const;

 private:
  void compute_geometry(IntArrayRef broadcast);
  const int64_t* strides(int op) const { return geo_ + (op + 1) * geo_cap_; }
  int64_t* strides(int op) { return geo_ + (op + 1) * geo_cap_; }

  // Note [TensorIterator geometry storage]
  // The flattened shape and the byte strides of every operand live in one
  // buffer (shape first, then one row of geo_cap_ entries per operand). Up to
  // kInlineDims dims it is inside the object: a tiny elementwise op then costs
  // no heap allocation for its geometry (which used to be a dozen vectors, a
  // third of the whole C++ time of `a + b` on 4 floats).
  static constexpr int kInlineDims = 6;
  std::span<const Tensor> inputs() const { return std::span<const Tensor>(inputs_, static_cast<size_t>(ninputs_)); }

  Config cfg_;
  // Inline: a vector here was one more allocation per elementwise op.
  Tensor inputs_[kMaxOperands - 1];
  int ninputs_ = 0;
  Tensor out_, user_out_;
  ScalarType common_ = ScalarType::Undefined;
  Device device_;
  int64_t numel_ = 0;
  int ndim_ = 0;  // flattened, innermost first
  int geo_cap_ = kInlineDims;
  int64_t* geo_ = geo_inline_;
  int64_t geo_inline_[(kMaxOperands + 1) * kInlineDims];
  std::unique_ptr<int64_t[]> geo_heap_;
  char* data_[kMaxOperands] = {};
};

template <typename F>
void TensorIterator::for_each_run(int64_t begin, int64_t end, F&& f) const {
  const int nd = ndim();
  const int nop = noperands();
  if (nd == 0) {
    if (begin < end) {
      char* ptrs[kMaxOperands];
      int64_t st[kMaxOperands] = {};
      for (int o = 0; o < nop; ++o) ptrs[o] = data_[o];
      f(ptrs, st, int64_t(1));
    }
    return;
  }
  // One nd-dim index, inline for the common case.
  int64_t idx_inline[kInlineDims];
  std::unique_ptr<int64_t[]> idx_heap;
  int64_t* idx = idx_inline;
  if (nd > kInlineDims) {
    idx_heap.reset(new int64_t[nd]);
    idx = idx_heap.get();
  }
  const int64_t* shape = geo_;
  int64_t rem = begin;
  for (int d = 0; d < nd; ++d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
  }
  char* ptrs[kMaxOperands];
  int64_t inner[kMaxOperands];
  for (int o = 0; o < nop; ++o) {
    const int64_t* st = strides(o);
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * st[d];
    ptrs[o] = data_[o] + off;
    inner[o] = st[0];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min<int64_t>(shape[0] - idx[0], end - pos);
    f(ptrs, inner, n);
    pos += n;
    if (pos >= end) break;
    // Advance to the start of the next run: carry through the outer dims.
    for (int o = 0; o < nop; ++o) ptrs[o] -= idx[0] * strides(o)[0];
    idx[0] = 0;
    for (int d = 1; d < nd; ++d) {
      idx[d]++;
      for (int o = 0; o < nop; ++o) ptrs[o] += strides(o)[d];
      if (idx[d] < shape[d]) break;
      for (int o = 0; o < nop; ++o) ptrs[o] -= idx[d] * strides(o)[d];
      idx[d] = 0;
    }
  }
}

}  // namespace strata
