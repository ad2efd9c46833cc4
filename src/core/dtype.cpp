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
    case ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case ScalarType::Float8_e5m2: return "float8_e5m2";
    case ScalarType::Float8_e4m3fnuz: return "float8_e4m3fnuz";
    case ScalarType::Float8_e5m2fnuz: return "float8_e5m2fnuz";
    case ScalarType::Float8_e8m0fnu: return "float8_e8m0fnu";
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
    case ScalarType::Float8_e4m3fn: return "Float8_e4m3fn";
    case ScalarType::Float8_e5m2: return "Float8_e5m2";
    case ScalarType::Float8_e4m3fnuz: return "Float8_e4m3fnuz";
    case ScalarType::Float8_e5m2fnuz: return "Float8_e5m2fnuz";
    case ScalarType::Float8_e8m0fnu: return "Float8_e8m0fnu";
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
      {"float8_e4m3fn", ScalarType::Float8_e4m3fn},     {"float8_e5m2", ScalarType::Float8_e5m2},
      {"float8_e4m3fnuz", ScalarType::Float8_e4m3fnuz}, {"float8_e5m2fnuz", ScalarType::Float8_e5m2fnuz},
      {"float8_e8m0fnu", ScalarType::Float8_e8m0fnu},
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
  STRATA_CHECK(!is_float8_type(a) && !is_float8_type(b), "Promotion for Float8 Types is not supported, attempted "
               "to promote ", scalar_type_name(a), " and ", scalar_type_name(b));
  constexpr int kN = static_cast<int>(ScalarType::ComplexDouble) + 1;
  constexpr auto b1 = ScalarType::Bool, u1 = ScalarType::UInt8, i1 = ScalarType::Int8, i2 = ScalarType::Int16,
                 i4 = ScalarType::Int32, i8 = ScalarType::Int64, f2 = ScalarType::Float16,
                 bf = ScalarType::BFloat16, f4 = ScalarType::Float32, f8 = ScalarType::Float64,
                 u2 = ScalarType::UInt16, u4 = ScalarType::UInt32, u8 = ScalarType::UInt64,
                 c4 = ScalarType::ComplexFloat, c8 = ScalarType::ComplexDouble, ud = ScalarType::Undefined;
  static constexpr ScalarType table[kN][kN] = {
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

// Note [Float8] conversions. Positive float8 bit patterns are ordered like
// their values, so a float32 is rounded by rounding its bits: for a result in
// the normal range, drop the low 23 - M mantissa bits to nearest even and
// rebias the exponent (a carry into the exponent is the right answer); below
// it, scale to units of the smallest subnormal and round with nearbyint.
namespace {
struct Float8Format {
  int mant;       // mantissa bits
  int bias;       // exponent bias
  uint8_t maxb;   // bits of the largest finite value
  bool fnuz;      // no -0, one NaN 0x80, overflow gives NaN
  bool has_inf;   // e5m2: 0x7c is inf, overflow gives inf; else (e4m3fn) overflow saturates
};
constexpr Float8Format float8_format(ScalarType t) {
  switch (t) {
    case ScalarType::Float8_e4m3fn: return {3, 7, 0x7e, false, false};
    case ScalarType::Float8_e5m2: return {2, 15, 0x7b, false, true};
    case ScalarType::Float8_e4m3fnuz: return {3, 8, 0x7f, true, false};
    default: return {2, 16, 0x7f, true, false};  // e5m2fnuz
  }
}

uint8_t e8m0_from_float(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t e = (u >> 23) & 0xff;
  if (e == 0xff) return 0xff;  // inf and NaN
  // Round to nearest even on the implied leading bit (1 for normal inputs, 0 for subnormal ones); rounding
  // 2^127 * (1.5 and up) up gives 0xff, the NaN, as torch does.
  const bool guard = u & 0x400000, round = u & 0x200000, sticky = u & 0x1fffff, lsb = e > 0;
  if (guard && (round || sticky || lsb)) ++e;
  return static_cast<uint8_t>(e);
}
}  // namespace

uint8_t float8_from_float(float f, ScalarType t) {
  if (t == ScalarType::Float8_e8m0fnu) return e8m0_from_float(f);
  const Float8Format fm = float8_format(t);
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return fm.fnuz ? 0x80 : static_cast<uint8_t>(sign | 0x7f);
  const float af = std::bit_cast<float>(a);
  // Smallest normal magnitude: 2^(1 - bias).
  const float min_normal = std::ldexp(1.0f, 1 - fm.bias);
  uint32_t r;
  if (af < min_normal) {
    // Units of the smallest subnormal, 2^(1 - bias - mant): exact scaling, then round half to even.
    r = static_cast<uint32_t>(std::nearbyint(std::ldexp(af, fm.bias - 1 + fm.mant)));
  } else if (a == 0x7f800000) {
    r = 0x100;  // inf: past every finite value
  } else {
    const int shift = 23 - fm.mant;
    const uint32_t rounded = (a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1)) >> shift;
    r = rounded - (static_cast<uint32_t>(127 - fm.bias) << fm.mant);
  }
  if (r > fm.maxb) {
    if (fm.fnuz) return 0x80;
    r = fm.has_inf ? 0x7c : fm.maxb;
  }
  if (fm.fnuz && r == 0) return 0;
  return static_cast<uint8_t>(sign | r);
}

float float8_to_float(uint8_t bits, ScalarType t) {
  // NaNs come out with torch's bit patterns: 0x7f800001 for the one NaN of
  // e8m0fnu and the fnuz formats, the NaN's own mantissa bits for e4m3fn, and
  // for e5m2 (the top byte of a float16) what float16 -> float32 gives.
  constexpr uint32_t kNaNOne = 0x7f800001;
  if (t == ScalarType::Float8_e8m0fnu) {
    if (bits == 0xff) return std::bit_cast<float>(kNaNOne);
    return bits == 0 ? std::ldexp(1.0f, -127) : std::bit_cast<float>(static_cast<uint32_t>(bits) << 23);
  }
  const Float8Format fm = float8_format(t);
  const bool neg = bits & 0x80;
  const uint32_t mag = bits & 0x7f, sign = neg ? 0x80000000u : 0u;
  if (fm.fnuz) {
    if (bits == 0x80) return std::bit_cast<float>(kNaNOne);
  } else if (fm.has_inf) {
    if (mag == 0x7c) return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    if (mag > 0x7c) return std::bit_cast<float>(sign | 0x7fc00000u | ((mag & 3u) << 21));
  } else if (mag == 0x7f) {
    return std::bit_cast<float>(sign | 0x7ff00000u);
  }
  const uint32_t e = mag >> fm.mant, m = mag & ((1u << fm.mant) - 1);
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), 1 - fm.bias - fm.mant)
                         : std::ldexp(static_cast<float>(m | (1u << fm.mant)), static_cast<int>(e) - fm.bias - fm.mant);
  return neg ? -v : v;
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
