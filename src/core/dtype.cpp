#include "core/dtype.h"

#include <atomic>

namespace strata {

std::string_view dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::UInt8: return "uint8";
    case ScalarType::Int8: return "int8";
    case ScalarType::Int16: return "int16";
    case ScalarType::Int32: return "int32";
    case ScalarType::Int64: return "int64";
    case ScalarType::Float16: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Float32: return "float32";
    case ScalarType::Float64: return "float64";
    case ScalarType::UInt16: return "uint16";
    case ScalarType::UInt32: return "uint32";
    case ScalarType::UInt64: return "uint64";
    case ScalarType::ComplexFloat: return "complex64";
    case ScalarType::ComplexDouble: return "complex128";
    default: return "undefined";
  }
}

std::string_view scalar_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "Bool";
    case ScalarType::UInt8: return "Byte";
    case ScalarType::Int8: return "Char";
    case ScalarType::Int16: return "Short";
    case ScalarType::Int32: return "Int";
    case ScalarType::Int64: return "Long";
    case ScalarType::Float16: return "Half";
    case ScalarType::BFloat16: return "BFloat16";
    case ScalarType::Float32: return "Float";
    case ScalarType::Float64: return "Double";
    case ScalarType::UInt16: return "UInt16";
    case ScalarType::UInt32: return "UInt32";
    case ScalarType::UInt64: return "UInt64";
    case ScalarType::ComplexFloat: return "ComplexFloat";
    case ScalarType::ComplexDouble: return "ComplexDouble";
    default: return "Undefined";
  }
}

ScalarType dtype_from_name(std::string_view n) {
  if (n.starts_with("strata.")) n.remove_prefix(7);
  if (n.starts_with("torch.")) n.remove_prefix(6);
  struct Alias {
    std::string_view name;
    ScalarType type;
  };
  static constexpr Alias aliases[] = {
      {"bool", ScalarType::Bool},       {"uint8", ScalarType::UInt8},     {"int8", ScalarType::Int8},
      {"int16", ScalarType::Int16},     {"short", ScalarType::Int16},     {"int32", ScalarType::Int32},
      {"int", ScalarType::Int32},       {"int64", ScalarType::Int64},     {"long", ScalarType::Int64},
      {"float16", ScalarType::Float16}, {"half", ScalarType::Float16},    {"bfloat16", ScalarType::BFloat16},
      {"float32", ScalarType::Float32}, {"float", ScalarType::Float32},   {"float64", ScalarType::Float64},
      {"double", ScalarType::Float64},  {"uint16", ScalarType::UInt16},   {"uint32", ScalarType::UInt32},
      {"uint64", ScalarType::UInt64},   {"complex64", ScalarType::ComplexFloat},
      {"cfloat", ScalarType::ComplexFloat},  {"complex128", ScalarType::ComplexDouble},
      {"cdouble", ScalarType::ComplexDouble},
  };
  for (const auto& a : aliases)
    if (a.name == n) return a.type;
  return ScalarType::Undefined;
}

// Rows/columns in enum order: b1 u1 i1 i2 i4 i8 f2 bf f4 f8 u2 u4 u8 c4 c8.
// ud (Undefined) marks the pairs torch refuses: the barebones unsigned types
// promote only with themselves and with floating types.
ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  if (a == ScalarType::Undefined || b == ScalarType::Undefined) return ScalarType::Undefined;
  constexpr auto b1 = ScalarType::Bool, u1 = ScalarType::UInt8, i1 = ScalarType::Int8, i2 = ScalarType::Int16,
                 i4 = ScalarType::Int32, i8 = ScalarType::Int64, f2 = ScalarType::Float16,
                 bf = ScalarType::BFloat16, f4 = ScalarType::Float32, f8 = ScalarType::Float64,
                 u2 = ScalarType::UInt16, u4 = ScalarType::UInt32, u8 = ScalarType::UInt64,
                 c4 = ScalarType::ComplexFloat, c8 = ScalarType::ComplexDouble, ud = ScalarType::Undefined;
  static constexpr ScalarType table[kNumScalarTypes][kNumScalarTypes] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8, ud, ud, ud, c4, c8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8, ud, ud, ud, c4, c8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8, ud, ud, ud, c4, c8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8, ud, ud, ud, c4, c8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8, ud, ud, ud, c4, c8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8, ud, ud, ud, c4, c8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8, f2, f2, f2, c4, c8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8, bf, bf, bf, c4, c8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8, f4, f4, f4, c4, c8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, c8, c8},
      /* u2 */ {ud, ud, ud, ud, ud, ud, f2, bf, f4, f8, u2, ud, ud, ud, ud},
      /* u4 */ {ud, ud, ud, ud, ud, ud, f2, bf, f4, f8, ud, u4, ud, ud, ud},
      /* u8 */ {ud, ud, ud, ud, ud, ud, f2, bf, f4, f8, ud, ud, u8, ud, ud},
      /* c4 */ {c4, c4, c4, c4, c4, c4, c4, c4, c4, c8, ud, ud, ud, c4, c8},
      /* c8 */ {c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, ud, ud, ud, c8, c8},
  };
  ScalarType r = table[static_cast<int>(a)][static_cast<int>(b)];
  STRATA_CHECK(r != ScalarType::Undefined, "Promotion for uint16, uint32, uint64 types is not supported, "
               "attempted to promote ", scalar_type_name(a), " and ", scalar_type_name(b));
  return r;
}

namespace {
std::atomic<ScalarType> g_default_dtype{ScalarType::Float32};
}
ScalarType default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }
void set_default_dtype(ScalarType t) {
  STRATA_CHECK_TYPE(t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16 ||
                        t == ScalarType::BFloat16,
                    "set_default_dtype: only floating-point types are supported as the default type, got ",
                    dtype_name(t));
  g_default_dtype.store(t);
}

}  // namespace strata
