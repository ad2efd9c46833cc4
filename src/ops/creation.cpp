// Factories: empty, empty_strided, zeros, ones, full, arange, linspace,
// logspace, eye. Device-generic: Meta gets shapes and dtypes only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/shape.h"
#include "ops/creation_common.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

namespace strata {

STRATA_DEFINE_STUB(range_stub, RangeFn);

ScalarType factory_dtype(const char* op, OptDType dtype, const std::optional<Tensor>& out, ScalarType dflt) {
  if (out && out->defined()) {
    STRATA_CHECK(!dtype || *dtype == out->dtype(), op, ": dtype ", dtype_name(*dtype),
                 " does not match the dtype of the out= tensor (", dtype_name(out->dtype()), ")");
    return out->dtype();
  }
  return dtype.value_or(dflt);
}

Device factory_device(const char* op, OptDevice device, const std::optional<Tensor>& out) {
  if (out && out->defined()) {
    STRATA_CHECK(!device || device->type == out->device().type, op, ": device ", device->str(),
                 " does not match the device of the out= tensor (", out->device().str(), ")");
    return out->device();
  }
  return device.value_or(Device(DeviceType::CPU));
}

Tensor factory_alloc(const char* op, IntArrayRef size, ScalarType dtype, Device device) {
  for (int64_t s : size) STRATA_CHECK(s >= 0, op, ": Trying to create tensor with negative dimension ", s, ": ",
                                      shape_str(size));
  return empty_tensor(size, dtype, device);
}

Tensor finish_factory(const char* op, const Tensor& result, const std::optional<Tensor>& out) {
  if (!out || !out->defined()) return result;
  Tensor o = *out;
  if (!std::equal(o.sizes().begin(), o.sizes().end(), result.sizes().begin(), result.sizes().end())) {
    resize_out(o, result.sizes(), op);
  }
  copy_(o, result, false);
  return o;
}

namespace {

Tensor empty_impl(IntArrayRef size, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  ScalarType dt = factory_dtype("empty", dtype, out, default_dtype());
  Device dev = factory_device("empty", device, out);
  if (out && out->defined()) {
    Tensor o = *out;
    checked_numel(size, "empty");
    if (!std::equal(o.sizes().begin(), o.sizes().end(), size.begin(), size.end())) resize_out(o, size, "empty");
    return o;
  }
  return factory_alloc("empty", size, dt, dev);
}
STRATA_IMPL_CPU_META(empty, empty_impl);

Tensor empty_strided_impl(IntArrayRef size, IntArrayRef stride, OptDType dtype, OptDevice device) {
  STRATA_CHECK(size.size() == stride.size(), "empty_strided: mismatch in length of strides and shape (",
               size.size(), " sizes, ", stride.size(), " strides)");
  ScalarType dt = dtype.value_or(default_dtype());
  int64_t n = checked_numel(size, "empty_strided");
  // Storage must reach the furthest element: 1 + sum((size - 1) * stride).
  int64_t extent = n == 0 ? 0 : 1;
  for (size_t i = 0; i < size.size(); ++i) {
    STRATA_CHECK(stride[i] >= 0, "empty_strided: Storage size calculation overflowed with sizes=", shape_str(size),
                 " and strides=", shape_str(stride), " (negative strides are not supported)");
    int64_t term;
    if (n != 0) {
      STRATA_CHECK(!__builtin_mul_overflow(size[i] - 1, stride[i], &term) &&
                       !__builtin_add_overflow(extent, term, &extent),
                   "empty_strided: Storage size calculation overflowed with sizes=", shape_str(size),
                   " and strides=", shape_str(stride));
    }
  }
  Tensor base = empty_tensor(std::vector<int64_t>{extent}, dt, device.value_or(Device(DeviceType::CPU)));
  return make_view(base, DimVector(size.begin(), size.end()), DimVector(stride.begin(), stride.end()), 0);
}
STRATA_IMPL_CPU_META(empty_strided, empty_strided_impl);

Tensor full_common(const char* op, IntArrayRef size, const Scalar& v, OptDType dtype, OptDevice device,
                   const std::optional<Tensor>& out, ScalarType dflt) {
  ScalarType dt = factory_dtype(op, dtype, out, dflt);
  Tensor t = factory_alloc(op, size, dt, factory_device(op, device, out));
  // zeros writes zero bits (zero_), which e8m0fnu allows though the value 0 is below its range.
  if (std::string_view(op) == "zeros") zero_(t);
  else fill_(t, v);
  return finish_factory(op, t, out);
}

Tensor zeros_impl(IntArrayRef size, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  return full_common("zeros", size, Scalar(int64_t(0)), dtype, device, out, default_dtype());
}
STRATA_IMPL_CPU_META(zeros, zeros_impl);

Tensor ones_impl(IntArrayRef size, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  return full_common("ones", size, Scalar(int64_t(1)), dtype, device, out, default_dtype());
}
STRATA_IMPL_CPU_META(ones, ones_impl);

Tensor full_impl(IntArrayRef size, const Scalar& v, OptDType dtype, OptDevice device,
                 const std::optional<Tensor>& out) {
  // Like torch: the fill value's kind picks the dtype (bool, int64, default float).
  return full_common("full", size, v, dtype, device, out, v.natural_dtype());
}
STRATA_IMPL_CPU_META(full, full_impl);

Tensor arange_impl(const Scalar& start, const Scalar& end, const Scalar& step, OptDType dtype, OptDevice device,
                   const std::optional<Tensor>& out) {
  bool any_float = start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  ScalarType dt = factory_dtype("arange", dtype, out, any_float ? default_dtype() : ScalarType::Int64);
  STRATA_CHECK(dt != ScalarType::Bool, "arange: not implemented for 'Bool'");
  RangeParams p;
  p.kind = RangeParams::Arange;
  double size_d;
  if (is_integral_type(dt, false)) {
    // Integral results: the bounds and step are truncated to integers first (as torch does).
    p.istart = start.to_int();
    p.iend = end.to_int();
    p.istep = step.to_int();
    STRATA_CHECK(p.istep != 0, "arange: step must be nonzero");
    STRATA_CHECK((p.istep > 0 && p.iend >= p.istart) || (p.istep < 0 && p.iend <= p.istart),
                 "arange: upper bound and lower bound inconsistent with step sign (start=", start.repr(),
                 ", end=", end.repr(), ", step=", step.repr(), ")");
    size_d = std::ceil(static_cast<double>(p.iend - p.istart) / static_cast<double>(p.istep));
  } else {
    p.start = start.to_double();
    p.end = end.to_double();
    p.step = step.to_double();
    STRATA_CHECK(std::isfinite(p.start) && std::isfinite(p.end), "arange: unsupported range: ", start.repr(),
                 " -> ", end.repr());
    STRATA_CHECK(p.step != 0, "arange: step must be nonzero");
    STRATA_CHECK((p.step > 0 && p.end >= p.start) || (p.step < 0 && p.end <= p.start),
                 "arange: upper bound and lower bound inconsistent with step sign (start=", start.repr(),
                 ", end=", end.repr(), ", step=", step.repr(), ")");
    size_d = std::ceil((p.end - p.start) / p.step);
  }
  STRATA_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
               "arange: invalid size, possible overflow? (start=", start.repr(), ", end=", end.repr(),
               ", step=", step.repr(), ")");
  int64_t n = static_cast<int64_t>(size_d);
  Tensor t = factory_alloc("arange", std::vector<int64_t>{n}, dt, factory_device("arange", device, out));
  if (!t.device().is_meta() && n > 0) range_stub(t.device().type, t, p);
  return finish_factory("arange", t, out);
}
STRATA_IMPL_CPU_META(arange, arange_impl);

Tensor linspace_common(const char* op, RangeParams::Kind kind, const Scalar& start, const Scalar& end,
                       int64_t steps, double base, OptDType dtype, OptDevice device,
                       const std::optional<Tensor>& out) {
  STRATA_CHECK(steps >= 0, op, ": number of steps must be non-negative, got ", steps);
  ScalarType dt = factory_dtype(op, dtype, out, default_dtype());
  RangeParams p;
  p.kind = kind;
  p.steps = steps;
  p.base = base;
  p.start = start.to_double();
  p.end = end.to_double();
  p.istart = start.to_int();
  p.iend = end.to_int();
  Tensor t = factory_alloc(op, std::vector<int64_t>{steps}, dt, factory_device(op, device, out));
  if (!t.device().is_meta() && steps > 0) range_stub(t.device().type, t, p);
  return finish_factory(op, t, out);
}

Tensor linspace_impl(const Scalar& start, const Scalar& end, int64_t steps, OptDType dtype, OptDevice device,
                     const std::optional<Tensor>& out) {
  return linspace_common("linspace", RangeParams::Linspace, start, end, steps, 10.0, dtype, device, out);
}
STRATA_IMPL_CPU_META(linspace, linspace_impl);

Tensor logspace_impl(const Scalar& start, const Scalar& end, int64_t steps, double base, OptDType dtype,
                     OptDevice device, const std::optional<Tensor>& out) {
  return linspace_common("logspace", RangeParams::Logspace, start, end, steps, base, dtype, device, out);
}
STRATA_IMPL_CPU_META(logspace, logspace_impl);

Tensor eye_impl(int64_t n, OptInt m, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  int64_t cols = m.value_or(n);
  STRATA_CHECK(n >= 0, "eye: n must be greater or equal to 0, got ", n);
  STRATA_CHECK(cols >= 0, "eye: m must be greater or equal to 0, got ", cols);
  ScalarType dt = factory_dtype("eye", dtype, out, default_dtype());
  Tensor t = factory_alloc("eye", std::vector<int64_t>{n, cols}, dt, factory_device("eye", device, out));
  fill_(t, Scalar(int64_t(0)));
  int64_t d = std::min(n, cols);
  if (d > 0) fill_(make_view(t, DimVector{d}, DimVector{cols + 1}, 0), Scalar(int64_t(1)));
  return finish_factory("eye", t, out);
}
STRATA_IMPL_CPU_META(eye, eye_impl);

}  // namespace
}  // namespace strata
