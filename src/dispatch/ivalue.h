// IValue: one boxed argument or result. Boxed kernels (profiler, tracer,
// fallbacks, the Python binding) see an op's arguments as a Stack of these.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace strata {

using TensorList = std::span<const Tensor>;
using OptIntArrayRef = std::optional<IntArrayRef>;

class IValue {
 public:
  using Storage = std::variant<std::monostate, Tensor, double, int64_t, bool, Scalar, std::vector<int64_t>,
                               std::vector<Tensor>, std::string, ScalarType, Device>;

  IValue() = default;
  IValue(std::nullopt_t) {}
  IValue(Tensor t) : v_(std::move(t)) {}
  IValue(double d) : v_(d) {}
  IValue(int64_t i) : v_(i) {}
  IValue(bool b) : v_(b) {}
  IValue(Scalar s) : v_(s) {}
  IValue(std::vector<int64_t> l) : v_(std::move(l)) {}
  IValue(IntArrayRef l) : v_(std::vector<int64_t>(l.begin(), l.end())) {}
  IValue(std::vector<Tensor> l) : v_(std::move(l)) {}
  IValue(TensorList l) : v_(std::vector<Tensor>(l.begin(), l.end())) {}
  IValue(std::string s) : v_(std::move(s)) {}
  IValue(std::string_view s) : v_(std::string(s)) {}
  IValue(ScalarType t) : v_(t) {}
  IValue(Device d) : v_(d) {}
  template <typename T>
  IValue(const std::optional<T>& o) {
    if (o) *this = IValue(*o);
  }

  bool is_none() const { return v_.index() == 0; }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_tensor_list() const { return std::holds_alternative<std::vector<Tensor>>(v_); }
  bool is_device() const { return std::holds_alternative<Device>(v_); }

  const Tensor& to_tensor() const { return get<Tensor>("Tensor"); }
  Tensor& to_tensor() { return std::get<Tensor>(v_); }
  double to_double() const {
    if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
    return get<double>("float");
  }
  int64_t to_int() const {
    if (auto* b = std::get_if<bool>(&v_)) return *b;
    return get<int64_t>("int");
  }
  bool to_bool() const { return get<bool>("bool"); }
  Scalar to_scalar() const {
    if (auto* s = std::get_if<Scalar>(&v_)) return *s;
    if (auto* d = std::get_if<double>(&v_)) return Scalar(*d);
    if (auto* i = std::get_if<int64_t>(&v_)) return Scalar(*i);
    if (auto* b = std::get_if<bool>(&v_)) return Scalar(*b);
    return get<Scalar>("Scalar");
  }
  const std::vector<int64_t>& to_int_list() const { return get<std::vector<int64_t>>("int[]"); }
  const std::vector<Tensor>& to_tensor_list() const { return get<std::vector<Tensor>>("Tensor[]"); }
  const std::string& to_string() const { return get<std::string>("str"); }
  ScalarType to_dtype() const { return get<ScalarType>("dtype"); }
  Device to_device() const { return get<Device>("Device"); }

  const Storage& raw() const { return v_; }

 private:
  template <typename T>
  const T& get(const char* what) const {
    if (auto* p = std::get_if<T>(&v_)) return *p;
    throw TypeError(str("IValue: expected ", what));
  }
  Storage v_;
};

using Stack = std::vector<IValue>;

}  // namespace strata
