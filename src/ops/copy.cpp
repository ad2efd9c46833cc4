// copy_, dtype/device conversion, clone, contiguous, fill_.
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

namespace strata {

// ops/tensor_iterator.cpp
void check_no_overlapping_write(const char* op, const Tensor& out, std::span<const Tensor> inputs);

STRATA_DEFINE_STUB(copy_stub, PointwiseFn);
STRATA_DEFINE_STUB(fill_stub, PointwiseFn);

namespace {

bool same_geometry(const Tensor& a, const Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.dtype() == b.dtype() &&
         std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end()) &&
         std::equal(a.strides().begin(), a.strides().end(), b.strides().begin(), b.strides().end());
}

// Copies between devices go through this hook (the CUDA backend sets it).
using CrossDeviceCopy = void (*)(const Tensor& dst, const Tensor& src);
CrossDeviceCopy g_cross_device_copy = nullptr;

}  // namespace

void set_cross_device_copy(CrossDeviceCopy fn) { g_cross_device_copy = fn; }

Tensor copy_impl(const Tensor& self, const Tensor& src, bool /*non_blocking*/) {
  if (self.is_same(src)) return self;
  if (self.device().is_meta()) {
    broadcast_shapes(self.sizes(), src.sizes(), "copy_");
    return self;
  }
  STRATA_CHECK(!src.device().is_meta(), "copy_: Cannot copy out of meta tensor; no data! (copying a ",
               src.describe(), " into a ", self.describe(), ")");
  if (self.device() != src.device() && !(src.dim() == 0 && src.device().is_cpu()) && !self.device().is_meta() &&
      !src.device().is_meta()) {
    STRATA_CHECK(g_cross_device_copy, "copy_: no copy routine from ", src.device().str(), " to ",
                 self.device().str());
    g_cross_device_copy(self, src);
    self.bump_version();
    return self;
  }
  Tensor s = src;
  if (src.impl()->storage() == self.impl()->storage() && !same_geometry(self, src)) {
    // Overlapping views of one storage: refused where torch refuses (Note
    // [Overlapping writes]); otherwise read from a snapshot.
    if (!self.device().is_meta()) check_no_overlapping_write("copy_", self, std::span<const Tensor>(&src, 1));
    s = clone(src);
  }
  if (same_geometry(self, s) && s.impl()->storage() == self.impl()->storage()) return self;
  TensorIterator::Config cfg;
  cfg.op = "copy_";
  cfg.out = self;
  cfg.inplace = true;
  cfg.promote_inputs = false;
  cfg.compute_dtype = self.dtype();
  // Broadcasting src to self is allowed; the other way round is not.
  DimVector b = broadcast_shapes(self.sizes(), s.sizes(), "copy_");
  STRATA_CHECK(std::equal(b.begin(), b.end(), self.sizes().begin(), self.sizes().end()), "copy_: source of shape ",
               s.shape_str(), " cannot be broadcast to destination shape ", self.shape_str());
  TensorIterator it(cfg, {s});
  if (!it.is_meta() && it.numel() > 0) copy_stub(it.device().type, it, PwArgs{});
  self.bump_version();
  return self;
}
STRATA_IMPL_CPU_META(copy_, copy_impl);

Tensor to_copy_impl(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor out = empty_tensor(self.sizes(), dtype.value_or(self.dtype()), device.value_or(self.device()));
  copy_(out, self, false);
  return out;
}
STRATA_IMPL_CPU_META(_to_copy, to_copy_impl);

Tensor clone_impl(const Tensor& self) {
  Tensor out = empty_tensor(self.sizes(), self.dtype(), self.device());
  copy_(out, self, false);
  return out;
}
STRATA_IMPL_CPU_META(clone, clone_impl);

Tensor contiguous_impl(const Tensor& self) { return self.is_contiguous() ? self : clone(self); }
STRATA_IMPL_COMPOSITE(contiguous, contiguous_impl);

namespace {
Tensor fill_unchecked(const Tensor& self, const Scalar& value, bool check_float8) {
  TensorIterator::Config cfg;
  cfg.op = "fill_";
  cfg.out = self;
  cfg.inplace = true;
  cfg.compute_dtype = self.dtype();
  TensorIterator it(cfg, {});
  PwArgs a;
  if (check_float8 && is_float8_type(self.dtype()) && !value.is_complex()) [[unlikely]] {
    // torch's range check of a scalar for the float8 dtypes: NaN passes, inf only where the format has one
    // (e5m2), anything else must lie in [lowest, max] (e8m0fnu is unsigned: lowest 2^-127, so 0 fails).
    const ScalarType t = self.dtype();
    const double v = value.to_double();
    const double max = t == ScalarType::Float8_e4m3fn     ? 448.0
                       : t == ScalarType::Float8_e4m3fnuz ? 240.0
                       : t == ScalarType::Float8_e8m0fnu  ? std::ldexp(1.0, 127)
                                                          : 57344.0;
    const double lowest = t == ScalarType::Float8_e8m0fnu ? std::ldexp(1.0, -127) : -max;
    const bool ok = std::isnan(v) || (std::isinf(v) ? t == ScalarType::Float8_e5m2 : (v >= lowest && v <= max));
    STRATA_CHECK(ok, "fill_: value ", value.repr(), " cannot be converted to type ", dtype_name(t),
                 " without overflow");
  }
  if (value.is_complex()) {
    STRATA_CHECK(is_complex_type(self.dtype()), "fill_: value ", value.repr(), " cannot be converted to type ",
                 dtype_name(self.dtype()), " without overflow");
    a.a = value.to_complex().real();
    a.b = value.to_complex().imag();
    a.c = 2;
  } else if (value.is_floating_point()) {
    STRATA_CHECK(is_floating_type(self.dtype()) || is_complex_type(self.dtype()) || std::isfinite(value.to_double()), "fill_: value ",
                 value.repr(), " cannot be converted to type ", dtype_name(self.dtype()), " without overflow");
    a.a = value.to_double();
    a.c = 0;
  } else {
    // Keep int64 values exact: pass them bit for bit.
    int64_t v = value.to_int();
    std::memcpy(&a.b, &v, sizeof v);
    a.c = 1;
  }
  if (!it.is_meta() && it.numel() > 0) fill_stub(it.device().type, it, a);
  self.bump_version();
  return self;
}
}  // namespace

Tensor fill_impl(const Tensor& self, const Scalar& value) { return fill_unchecked(self, value, true); }
STRATA_IMPL_CPU_META(fill_, fill_impl);

// zero_ writes zero bits whatever the dtype (torch's memset): no range check, so e8m0fnu (whose 0 bits mean
// 2^-127) can be zeroed though fill_(0) overflows it.
Tensor zero_impl(const Tensor& self) {
  if (is_float8_type(self.dtype())) return fill_unchecked(self, Scalar(int64_t(0)), false);
  return fill_(self, Scalar(int64_t(0)));
}
STRATA_IMPL_COMPOSITE(zero_, zero_impl);

bool any_nonzero(const Tensor& t) {
  if (t.numel() == 0 || t.device().is_meta()) return false;
  return to_device(any(t), Device(DeviceType::CPU)).item().to_bool();
}

}  // namespace strata
