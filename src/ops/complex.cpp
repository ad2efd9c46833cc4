// Complex numbers: real/imag/view_as_real/view_as_complex (views sharing the
// input's storage, as in torch), conjugation, angle, sgn, and construction
// from parts (complex, polar). Registered for CPU and Meta, or composite.
//
// Conjugation is physical: torch's lazy conjugate bit is not modelled, so
// conj() of a complex tensor is a copy with the imaginary part negated,
// resolve_conj() is the identity and is_conj() is always False.
#include "ops/op_list.h"
#include "core/shape.h"
#include "ops/api/complex.h"
#include "ops/ops.h"

namespace strata {

namespace {

DimVector to_dims(IntArrayRef a) { return DimVector(a.begin(), a.end()); }

// A view of self's storage with another element type (same version counter
// and view base as self's other views).
Tensor dtype_view(const Tensor& self, ScalarType dtype, DimVector sizes, DimVector strides, int64_t offset) {
  auto impl = make_intrusive<TensorImpl>(self.impl()->storage(), offset, std::move(sizes), std::move(strides), dtype);
  impl->set_key_set(self.key_set());
  impl->set_view_base(self.impl()->view_base() ? self.impl()->view_base() : self.impl_ptr());
  return Tensor(std::move(impl));
}

// complex64 viewed as float32 pairs: sizes + [2], strides * 2 + [1].
Tensor real_pairs(const Tensor& self) {
  DimVector sizes = to_dims(self.sizes()), strides = to_dims(self.strides());
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return dtype_view(self, to_real_value_type(self.dtype()), std::move(sizes), std::move(strides),
                    self.storage_offset() * 2);
}

// One component (0 real, 1 imaginary) of a complex tensor, as a real view.
Tensor component(const Tensor& self, int64_t which) {
  DimVector strides = to_dims(self.strides());
  for (auto& s : strides) s *= 2;
  return dtype_view(self, to_real_value_type(self.dtype()), to_dims(self.sizes()), std::move(strides),
                    self.storage_offset() * 2 + which);
}

}  // namespace

Tensor real_impl(const Tensor& self) {
  if (!is_complex_type(self.dtype())) return make_view(self, self.sizes(), self.strides(), self.storage_offset());
  return component(self, 0);
}
STRATA_IMPL_CPU_META(real, real_impl);

Tensor imag_impl(const Tensor& self) {
  STRATA_CHECK(is_complex_type(self.dtype()), "imag is not implemented for tensors with non-complex dtypes (got a ",
               self.describe(), ")");
  return component(self, 1);
}
STRATA_IMPL_CPU_META(imag, imag_impl);

Tensor view_as_real_impl(const Tensor& self) {
  STRATA_CHECK(is_complex_type(self.dtype()), "view_as_real is only supported for complex tensors (got a ",
               self.describe(), ")");
  return real_pairs(self);
}
STRATA_IMPL_CPU_META(view_as_real, view_as_real_impl);

Tensor view_as_complex_impl(const Tensor& self) {
  STRATA_CHECK(self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64,
               "view_as_complex is only supported for float and double tensors, but got a tensor of scalar type: ",
               scalar_type_name(self.dtype()));
  STRATA_CHECK(self.dim() > 0, "view_as_complex: Input tensor must have one or more dimensions");
  STRATA_CHECK(self.size(-1) == 2, "view_as_complex: Tensor must have a last dimension of size 2 (got shape ",
               self.shape_str(), ")");
  DimVector sizes = to_dims(self.sizes()), strides = to_dims(self.strides());
  sizes.pop_back();
  strides.pop_back();
  // An empty tensor's strides say nothing about its layout (NumPy gives 0s).
  if (self.numel() == 0) return dtype_view(self, to_complex_type(self.dtype()), sizes, contiguous_strides(sizes), 0);
  STRATA_CHECK(self.stride(-1) == 1, "view_as_complex: Tensor must have a last dimension with stride 1 (got strides ",
               shape_str(self.strides()), ")");
  for (auto& s : strides) {
    STRATA_CHECK(s % 2 == 0, "view_as_complex: Tensor must have a stride divisible by 2 for all but last dimension "
                 "(got strides ", shape_str(self.strides()), ")");
    s /= 2;
  }
  STRATA_CHECK(self.storage_offset() % 2 == 0, "view_as_complex: Tensor must have a storage_offset divisible by 2 "
               "(got ", self.storage_offset(), ")");
  return dtype_view(self, to_complex_type(self.dtype()), std::move(sizes), std::move(strides),
                    self.storage_offset() / 2);
}
STRATA_IMPL_CPU_META(view_as_complex, view_as_complex_impl);

Tensor conj_physical_impl(const Tensor& self) {
  Tensor out = clone(self);
  if (is_complex_type(self.dtype())) copy_(component(out, 1), neg(component(self, 1)), false);
  return out;
}
STRATA_IMPL_CPU_META(conj_physical, conj_physical_impl);

// Real tensors are their own conjugate (the same tensor comes back, as in torch).
Tensor conj_impl(const Tensor& self) { return is_complex_type(self.dtype()) ? conj_physical(self) : self; }
STRATA_IMPL_COMPOSITE(conj, conj_impl);

Tensor resolve_conj_impl(const Tensor& self) { return self; }
STRATA_IMPL_COMPOSITE(resolve_conj, resolve_conj_impl);

// angle(z) = atan2(imag, real); for real x, pi where x < 0, else 0 (NaN stays).
Tensor angle_impl(const Tensor& self) {
  if (is_complex_type(self.dtype())) return atan2(imag(self), real(self));
  Tensor x = is_floating_type(self.dtype()) ? self : to_dtype(self, default_dtype());
  // 0-d tensors of x's dtype, not wrapped numbers: two wrapped numbers alone
  // would promote to the default dtype inside the inner where. Made by full, so
  // that they hold their value on any device (a CUDA one too).
  Tensor pi = full({}, Scalar(3.14159265358979323846), x.dtype(), x.device());
  Tensor zero = full({}, Scalar(0.0), x.dtype(), x.device());
  return where(isnan(x), x, where(lt(x, zero), pi, zero));
}
STRATA_IMPL_COMPOSITE(angle, angle_impl);

// sgn(z) = z / |z| (0 at 0); sign for real tensors.
Tensor sgn_impl(const Tensor& self) {
  if (!is_complex_type(self.dtype())) return sign(self);
  Tensor a = abs(self);
  Tensor zero = scalar_to_tensor(Scalar(0.0), a.dtype(), a.device(), true);
  Tensor is_zero = eq(a, zero);
  Tensor safe = where(is_zero, scalar_to_tensor(Scalar(1.0), a.dtype(), a.device(), true), a);
  return where(is_zero, zeros_like(self), div(self, safe));
}
STRATA_IMPL_COMPOSITE(sgn, sgn_impl);

Tensor complex_impl(const Tensor& re, const Tensor& im) {
  ScalarType t = re.dtype();
  STRATA_CHECK((t == ScalarType::Float32 || t == ScalarType::Float64) && im.dtype() == t,
                    "complex: Expected both inputs to be Float or Double tensors but got ", scalar_type_name(t),
                    " and ", scalar_type_name(im.dtype()));
  STRATA_CHECK(re.device() == im.device(), "complex: expected real and imag on the same device, got ",
               re.device().str(), " and ", im.device().str());
  DimVector shape = broadcast_shapes(re.sizes(), im.sizes(), "complex");
  Tensor out = empty_tensor(shape, to_complex_type(t), re.device());
  copy_(component(out, 0), re, false);
  copy_(component(out, 1), im, false);
  return out;
}
STRATA_IMPL_CPU_META(complex, complex_impl);

Tensor polar_impl(const Tensor& r, const Tensor& theta) {
  ScalarType t = r.dtype();
  STRATA_CHECK((t == ScalarType::Float32 || t == ScalarType::Float64) && theta.dtype() == t,
                    "polar: Expected both inputs to be Float or Double tensors but got ", scalar_type_name(t), " and ",
                    scalar_type_name(theta.dtype()));
  return complex(mul(r, cos(theta)), mul(r, sin(theta)));
}
STRATA_IMPL_COMPOSITE(polar, polar_impl);

}  // namespace strata
