// Function schemas in PyTorch's notation, e.g.
//   "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
// parsed once at registration. The Python binding parses arguments from them,
// the test database reads them, and registration checks that each kernel's C++
// signature agrees with them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/ivalue.h"

namespace strata {

enum class ArgType : uint8_t {
  Tensor,
  OptTensor,
  TensorList,
  Scalar,
  OptScalar,
  Int,
  OptInt,
  IntList,
  OptIntList,
  Float,
  OptFloat,
  Bool,
  OptBool,
  DType,
  OptDType,
  Str,
  OptStr,
  OptDevice,
  TensorTuple2,  // returns only
  TensorTuple3,  // returns only
};
const char* arg_type_name(ArgType t);

struct Argument {
  std::string name;
  ArgType type;
  std::optional<IValue> default_value;  // nullopt: required
  bool kwarg_only = false;
  bool is_write = false;  // Tensor(a!): written in place
  int list_size = 0;      // int[2]: a single int given for it is repeated
};

struct FunctionSchema {
  std::string name;      // "add" or "add_" or "myops::foo"
  std::string overload;  // after the dot, may be empty
  std::vector<Argument> args;
  std::vector<ArgType> returns;
  std::vector<std::string> return_names;  // "(Tensor values, Tensor indices)"
  std::string text;

  bool is_inplace() const { return !name.empty() && name.back() == '_'; }
  std::string full_name() const { return overload.empty() ? name : name + "." + overload; }
};

FunctionSchema parse_schema(const std::string& text);

}  // namespace strata
