// Factories and random ops (decl/creation.def). The *_like helpers exist only
// here and in Python: they are the plain factories called with a tensor's
// shape, dtype and device.
#pragma once

#include <optional>

#include "ops/op_list.h"

namespace strata {

inline Tensor empty(IntArrayRef size, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::empty>(size, dtype, device, std::optional<Tensor>());
}
inline Tensor empty_strided(IntArrayRef size, IntArrayRef stride, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::empty_strided>(size, stride, dtype, device);
}
inline Tensor zeros(IntArrayRef size, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::zeros>(size, dtype, device, std::optional<Tensor>());
}
inline Tensor ones(IntArrayRef size, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::ones>(size, dtype, device, std::optional<Tensor>());
}
inline Tensor full(IntArrayRef size, const Scalar& fill_value, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::full>(size, fill_value, dtype, device, std::optional<Tensor>());
}
inline Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, OptDType dtype = {},
                     OptDevice device = {}) {
  return call<OpId::arange>(start, end, step, dtype, device, std::optional<Tensor>());
}
inline Tensor arange(const Scalar& end, OptDType dtype = {}, OptDevice device = {}) {
  return arange(Scalar(int64_t(0)), end, Scalar(int64_t(1)), dtype, device);
}
inline Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, OptDType dtype = {},
                       OptDevice device = {}) {
  return call<OpId::linspace>(start, end, steps, dtype, device, std::optional<Tensor>());
}
inline Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base = 10.0,
                       OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::logspace>(start, end, steps, base, dtype, device, std::optional<Tensor>());
}
inline Tensor eye(int64_t n, OptInt m = {}, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::eye>(n, m, dtype, device, std::optional<Tensor>());
}

inline Tensor empty_like(const Tensor& t, OptDType dtype = {}) {
  return empty(t.sizes(), dtype.value_or(t.dtype()), t.device());
}
inline Tensor zeros_like(const Tensor& t, OptDType dtype = {}) {
  return zeros(t.sizes(), dtype.value_or(t.dtype()), t.device());
}
inline Tensor ones_like(const Tensor& t, OptDType dtype = {}) {
  return ones(t.sizes(), dtype.value_or(t.dtype()), t.device());
}
inline Tensor full_like(const Tensor& t, const Scalar& v, OptDType dtype = {}) {
  return full(t.sizes(), v, dtype.value_or(t.dtype()), t.device());
}

// ---- random (generator: id, nullopt = the default generator) ----------------
inline Tensor rand(IntArrayRef size, OptInt generator = {}, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::rand>(size, generator, dtype, device, std::optional<Tensor>());
}
inline Tensor randn(IntArrayRef size, OptInt generator = {}, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::randn>(size, generator, dtype, device, std::optional<Tensor>());
}
inline Tensor randint(int64_t low, int64_t high, IntArrayRef size, OptInt generator = {}, OptDType dtype = {},
                      OptDevice device = {}) {
  return call<OpId::randint>(low, high, size, generator, dtype, device, std::optional<Tensor>());
}
inline Tensor randperm(int64_t n, OptInt generator = {}, OptDType dtype = {}, OptDevice device = {}) {
  return call<OpId::randperm>(n, generator, dtype, device, std::optional<Tensor>());
}
inline Tensor rand_like(const Tensor& t, OptDType dtype = {}, OptInt generator = {}) {
  return rand(t.sizes(), generator, dtype.value_or(t.dtype()), t.device());
}
inline Tensor randn_like(const Tensor& t, OptDType dtype = {}, OptInt generator = {}) {
  return randn(t.sizes(), generator, dtype.value_or(t.dtype()), t.device());
}
inline Tensor randint_like(const Tensor& t, int64_t low, int64_t high, OptDType dtype = {}, OptInt generator = {}) {
  return randint(low, high, t.sizes(), generator, dtype.value_or(t.dtype()), t.device());
}
inline Tensor uniform_(const Tensor& self, double from = 0, double to = 1, OptInt generator = {}) {
  return call<OpId::uniform_>(self, from, to, generator);
}
inline Tensor normal_(const Tensor& self, double mean = 0, double std = 1, OptInt generator = {}) {
  return call<OpId::normal_>(self, mean, std, generator);
}
inline Tensor exponential_(const Tensor& self, double lambd = 1, OptInt generator = {}) {
  return call<OpId::exponential_>(self, lambd, generator);
}
inline Tensor random_(const Tensor& self, int64_t from = 0, OptInt to = {}, OptInt generator = {}) {
  return call<OpId::random_>(self, from, to, generator);
}
inline Tensor bernoulli_(const Tensor& self, double p = 0.5, OptInt generator = {}) {
  return call<OpId::bernoulli__float>(self, p, generator);
}
inline Tensor bernoulli_(const Tensor& self, const Tensor& p, OptInt generator = {}) {
  return call<OpId::bernoulli__Tensor>(self, p, generator);
}
// Each element is 1 with the probability held by `self` (dropout masks).
inline Tensor bernoulli(const Tensor& self, OptInt generator = {}) { return call<OpId::bernoulli>(self, generator); }
inline Tensor bernoulli(const Tensor& self, double p, OptInt generator = {}) {
  return call<OpId::bernoulli_p>(self, p, generator);
}
inline Tensor normal(const Tensor& mean, const Tensor& std, OptInt generator = {}) {
  return call<OpId::normal_Tensor_Tensor>(mean, std, generator, std::optional<Tensor>());
}
inline Tensor normal(double mean, double std, IntArrayRef size, OptInt generator = {}, OptDType dtype = {},
                     OptDevice device = {}) {
  return call<OpId::normal_float_float>(mean, std, size, generator, dtype, device, std::optional<Tensor>());
}
inline Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement = false, OptInt generator = {}) {
  return call<OpId::multinomial>(self, num_samples, replacement, generator, std::optional<Tensor>());
}

}  // namespace strata
