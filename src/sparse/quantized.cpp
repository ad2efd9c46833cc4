#include "sparse/quantized.h"

#include <atomic>

#include "autograd/variable.h"
#include "core/error.h"
#include "dispatch/dispatcher.h"

namespace strata::sparse {

namespace {

std::atomic<QuantizedHandler> g_handler{nullptr};

const char* qdtype_name(QDtype q) {
  switch (q) {
    case QDtype::QInt8: return "qint8";
    case QDtype::QUInt8: return "quint8";
    case QDtype::QInt32: return "qint32";
  }
  return "?";
}

ScalarType repr_type(QDtype q) {
  switch (q) {
    case QDtype::QInt8: return ScalarType::Int8;
    case QDtype::QUInt8: return ScalarType::UInt8;
    case QDtype::QInt32: return ScalarType::Int32;
  }
  return ScalarType::Int8;
}

void quantized_fallback(const OperatorEntry& op, DispatchKeySet, Stack& stack) {
  if (QuantizedHandler h = g_handler.load(std::memory_order_acquire)) {
    if (h(op, stack)) return;
  }
  const auto& args = op.schema().args;
  const size_t base = stack.size() - args.size();
  std::string which, dt;
  for (size_t i = 0; i < args.size() && which.empty(); ++i) {
    const IValue& v = stack[base + i];
    if (v.is_tensor())
      if (QuantizedTensorImpl* q = maybe_quantized(v.to_tensor())) which = args[i].name, dt = qdtype_name(q->qdtype());
    if (v.is_tensor_list())
      for (const Tensor& t : v.to_tensor_list())
        if (QuantizedTensorImpl* q = maybe_quantized(t); q && which.empty()) which = args[i].name, dt = qdtype_name(q->qdtype());
  }
  throw NotImplementedError(str("Could not run '", op.schema().full_name(), "' with a quantized tensor (dtype strata.",
                                dt, ") for argument '", which, "': this op has no quantized implementation. Call ",
                                ".dequantize() first (docs/SPARSE.md, \"Quantized tensors\")."));
}

FallbackRegistrar g_quantized_layer(kQuantizedKey, KernelFunction::make_boxed(&quantized_fallback, "quantized"));

}  // namespace

QuantizedTensorImpl::QuantizedTensorImpl(Tensor int_repr, QDtype qdtype, double scale, int64_t zero_point,
                                         Tensor scales, Tensor zero_points, int64_t axis)
    : TensorImpl(int_repr.impl()->storage(), int_repr.storage_offset(), int_repr.sizes(), int_repr.strides(),
                 int_repr.dtype()),
      int_repr_(std::move(int_repr)),
      qdtype_(qdtype),
      scale_(scale),
      zero_point_(zero_point),
      scales_(std::move(scales)),
      zero_points_(std::move(zero_points)),
      axis_(axis) {
  set_key_set(int_repr_.key_set().add(kQuantizedKey));
}

QuantizedTensorImpl* maybe_quantized(const Tensor& t) {
  if (!t.defined() || !t.key_set().has(kQuantizedKey)) return nullptr;
  return dynamic_cast<QuantizedTensorImpl*>(t.impl());
}

Tensor make_quantized(Tensor int_repr, QDtype qdtype, double scale, int64_t zero_point, Tensor scales,
                      Tensor zero_points, int64_t axis) {
  STRATA_CHECK(!maybe_quantized(int_repr), "make_quantized: the integer representation must be a plain tensor");
  STRATA_CHECK(int_repr.dtype() == repr_type(qdtype), "make_quantized: strata.", qdtype_name(qdtype),
               " is stored as ", dtype_name(repr_type(qdtype)), ", got ", dtype_name(int_repr.dtype()));
  if (scales.defined()) {
    STRATA_CHECK(zero_points.defined() && scales.dim() == 1 && zero_points.dim() == 1,
                 "make_quantized: per-channel scales and zero points must be 1-D");
    STRATA_CHECK(axis >= 0 && axis < int_repr.dim(), "make_quantized: axis ", axis, " out of range for a ",
                 int_repr.dim(), "-d tensor");
    STRATA_CHECK(scales.size(0) == int_repr.size(axis) && zero_points.size(0) == int_repr.size(axis),
                 "make_quantized: expected ", int_repr.size(axis), " scales and zero points, got ", scales.size(0),
                 " and ", zero_points.size(0));
  }
  return Tensor(make_intrusive<QuantizedTensorImpl>(std::move(int_repr), qdtype, scale, zero_point, std::move(scales),
                                                    std::move(zero_points), axis));
}

Tensor detach_quantized(const Tensor& t) {
  QuantizedTensorImpl* q = maybe_quantized(t);
  STRATA_CHECK(q, "detach_quantized: expected a quantized tensor");
  return make_quantized(autograd::alias_without_history(q->int_repr()), q->qdtype(), q->scale(), q->zero_point(),
                        q->scales(), q->zero_points(), q->axis());
}

void set_quantized_handler(QuantizedHandler h) { g_handler.store(h, std::memory_order_release); }

}  // namespace strata::sparse
