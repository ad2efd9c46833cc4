// Note [Quantized tensors and the Quantized key]
// An affine-quantized tensor (torch.qint8 / quint8 / qint32) is a
// QuantizedTensorImpl: it wraps its integer representation (an int8, uint8 or
// int32 tensor, whose storage and geometry it shares, so element_size and
// storage are torch's) and the quantization parameters: one scale and zero
// point (per-tensor affine) or float64 scales and int64 zero points along one
// axis (per-channel affine). Its key set is the integer tensor's plus the
// Quantized key, above Sparse, so every op given one reaches quantized_fallback
// first; like the Sparse one it offers the call to a Python handler
// (python/strata/_quantized.py) and raises NotImplementedError naming the op
// and the layout for what it declines. The binding reports the quantized dtype
// (strata.qint8 ...) for tensor.dtype. See docs/SPARSE.md, "Quantized tensors".
#pragma once

#include "core/tensor.h"
#include "dispatch/dispatcher.h"

namespace strata::sparse {

inline constexpr DispatchKey kQuantizedKey = DispatchKey::Quantized;

enum class QDtype : int { QInt8 = 0, QUInt8 = 1, QInt32 = 2 };

class QuantizedTensorImpl : public TensorImpl {
 public:
  QuantizedTensorImpl(Tensor int_repr, QDtype qdtype, double scale, int64_t zero_point, Tensor scales,
                      Tensor zero_points, int64_t axis);
  const Tensor& int_repr() const { return int_repr_; }
  QDtype qdtype() const { return qdtype_; }
  bool per_channel() const { return scales_.defined(); }
  double scale() const { return scale_; }
  int64_t zero_point() const { return zero_point_; }
  const Tensor& scales() const { return scales_; }
  const Tensor& zero_points() const { return zero_points_; }
  int64_t axis() const { return axis_; }

 private:
  Tensor int_repr_;
  QDtype qdtype_;
  double scale_;
  int64_t zero_point_;
  Tensor scales_, zero_points_;  // per-channel only
  int64_t axis_;
};

QuantizedTensorImpl* maybe_quantized(const Tensor& t);
// Checks the integer dtype against qdtype and the per-channel parameters' shapes.
Tensor make_quantized(Tensor int_repr, QDtype qdtype, double scale, int64_t zero_point, Tensor scales,
                      Tensor zero_points, int64_t axis);
Tensor detach_quantized(const Tensor& t);

using QuantizedHandler = bool (*)(const OperatorEntry& op, Stack& stack);
void set_quantized_handler(QuantizedHandler h);

}  // namespace strata::sparse
