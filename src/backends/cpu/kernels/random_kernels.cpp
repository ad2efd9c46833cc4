// Random fills: torch's CPU transformations of mt19937 draws (see Note [CPU
// random streams] in core/generator.h). Raw words are drawn serially in
// element order; the transformations are elementwise (the vectorised normal:
// per block of 16) and run in parallel, so results do not depend on the
// number of threads. Compiled once per ISA level, with -ffp-contract=off (see
// CMakeLists.txt): where torch's compiled arithmetic fuses a multiply-add, the
// code says so with std::fma, and nowhere else.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "backends/cpu/loops.h"
#include "ops/creation_common.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Uniform [0, 1) from the low bits of a draw: 24 of a 32-bit draw as float,
// 53 of a 64-bit draw as double (16-bit types use the float one). Exact, so
// never 1.
template <typename T>
STRATA_ALWAYS_INLINE T unit(uint64_t bits) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(bits & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
  } else {
    return static_cast<float>(bits & 0xffffffu) * 0x1.0p-24f;
  }
}

// Draws one value per element (64-bit draws when `wide`) and writes f(draw)
// to o[i], through a small buffer of raw words that stays in L1. Serial: the
// draws are, and these transformations cost less than drawing.
template <typename T, typename F>
void fill_from_draws(CPUGenerator& g, T* o, int64_t n, bool wide, const F& f) {
  constexpr int64_t kChunk = 2048;
  uint32_t words[2 * kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    int64_t m = std::min(kChunk, n - start);
    T* dst = o + start;
    if (wide) {
      g.engine.fill(words, 2 * m);
      for (int64_t i = 0; i < m; ++i) dst[i] = f((uint64_t(words[2 * i]) << 32) | words[2 * i + 1]);
    } else {
      g.engine.fill(words, m);
      for (int64_t i = 0; i < m; ++i) dst[i] = f(uint64_t(words[i]));
    }
  }
}

template <typename T>
constexpr bool wide_draws = std::is_same_v<T, double>;

// Scalar libm, never the vectorised variants (libmvec) the compiler may
// substitute in a vectorised loop: those round differently.
[[gnu::noinline]] double libm_log(double x) { return std::log(x); }
[[gnu::noinline]] double libm_log1p(double x) { return std::log1p(x); }
[[gnu::noinline]] double libm_sin(double x) { return std::sin(x); }
[[gnu::noinline]] double libm_cos(double x) { return std::cos(x); }

// ---- normal ----------------------------------------------------------------
// torch has two normal paths. A contiguous output of >= 16 elements is first
// filled with uniforms; then each block of 16 maps (u[j], u[j + 8]) to two
// normals by Box-Muller, and a ragged tail recomputes the last 16 elements
// from 16 fresh uniforms. Anything else draws element by element from the
// double-precision scalar Box-Muller, which caches its second sample in the
// generator.

// float blocks: torch evaluates them with 8-lane Cephes-style approximations
// of log and sincos (single precision); these reproduce them operation for
// operation, fused multiply-adds included. Selections are written as
// arithmetic on 0/1 factors (exact here) so that the lane loops vectorise.
// x in [2^-24, 1] here (1 - u), a normal number: no clamping or special cases.
STRATA_ALWAYS_INLINE float cephes_log(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127) + 1.0f;
  // Mantissa in [0.5, 1); below sqrt(1/2) use 2m - 1 and one less exponent.
  x = std::bit_cast<float>((bits & ~0x7f800000u) | 0x3f000000u);
  float small = static_cast<float>(x < 0.707106781186547524f);
  float tmp = x * small;
  x = x - 1.0f;
  e = e - small;
  x = x + tmp;
  float z = x * x;
  float y = 7.0376836292e-2f;
  y = std::fma(y, x, -1.1514610310e-1f);
  y = std::fma(y, x, 1.1676998740e-1f);
  y = std::fma(y, x, -1.2420140846e-1f);
  y = std::fma(y, x, 1.4249322787e-1f);
  y = std::fma(y, x, -1.6668057665e-1f);
  y = std::fma(y, x, 2.0000714765e-1f);
  y = std::fma(y, x, -2.4999993993e-1f);
  y = std::fma(y, x, 3.3333331174e-1f);
  y = y * x;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = std::fma(z, -0.5f, y);
  x = x + y;
  return std::fma(e, 0.693359375f, x);
}

// x >= 0 here (2 pi u).
STRATA_ALWAYS_INLINE void cephes_sincos(float x, float& s, float& c) {
  int32_t j = static_cast<int32_t>(x * 1.27323954473516f);  // 4 / pi
  j = (j + 1) & ~1;
  float y = static_cast<float>(j);
  float sin_sign = 1.0f - 2.0f * static_cast<float>((j >> 2) & 1);
  float cos_sign = 1.0f - 2.0f * static_cast<float>(((~(j - 2)) >> 2) & 1);
  float sin_poly = static_cast<float>(((j >> 1) & 1) ^ 1);
  // x - y pi/4 in three parts (extended-precision reduction).
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  float z = x * x;
  float yc = std::fma(2.443315711809948e-5f, z, -1.388731625493765e-3f);
  yc = std::fma(yc, z, 4.166664568298827e-2f);
  yc = yc * z;
  yc = std::fma(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;
  float ys = std::fma(-1.9515295891e-4f, z, 8.3321608736e-3f);
  ys = std::fma(ys, z, -1.6666654611e-1f);
  ys = ys * z;
  ys = std::fma(ys, x, x);
  s = sin_sign * (sin_poly * ys + (1.0f - sin_poly) * yc);
  c = cos_sign * (sin_poly * yc + (1.0f - sin_poly) * ys);
}

void box_muller16(float* d, float mean, float sd) {
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  float lg[8], sn[8], cs[8];
  for (int j = 0; j < 8; ++j) lg[j] = cephes_log(1.0f - d[j]);
  for (int j = 0; j < 8; ++j) cephes_sincos(two_pi * d[j + 8], sn[j], cs[j]);
  for (int j = 0; j < 8; ++j) {
    float radius = std::sqrt(-2.0f * lg[j]);
    d[j] = std::fma(radius * cs[j], sd, mean);
    d[j + 8] = std::fma(radius * sn[j], sd, mean);
  }
}

// double blocks: libm.
void box_muller16(double* d, double mean, double sd) {
  for (int j = 0; j < 8; ++j) {
    double u1 = 1.0 - d[j];
    double u2 = d[j + 8];
    double radius = std::sqrt(-2.0 * libm_log(u1));
    double theta = 2.0 * std::numbers::pi * u2;
    d[j] = std::fma(radius * libm_cos(theta), sd, mean);
    d[j + 8] = std::fma(radius * libm_sin(theta), sd, mean);
  }
}

// 16-bit floats: float blocks, each drawing its own 16 uniforms (so a ragged
// tail draws 16 more after 16 per full block), rounded to T.
template <typename T>
void normal_blocks_reduced(CPUGenerator& g, T* o, int64_t n, double mean, double sd) {
  const float m = static_cast<float>(mean), s = static_cast<float>(sd);
  auto uni = [](uint64_t bits) { return unit<float>(bits); };
  int64_t full = n / 16 * 16;
  std::vector<float> buf(full);
  fill_from_draws(g, buf.data(), full, false, uni);
  parallel_for(0, full / 16, kGrainSize / 16, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      box_muller16(buf.data() + 16 * k, m, s);
      for (int64_t i = 16 * k; i < 16 * k + 16; ++i) o[i] = static_cast<T>(buf[i]);
    }
  });
  if (n % 16 != 0) {
    float tail[16];
    fill_from_draws(g, tail, 16, false, uni);
    box_muller16(tail, m, s);
    for (int i = 0; i < 16; ++i) o[n - 16 + i] = static_cast<T>(tail[i]);
  }
}

template <typename T>
void normal_blocks(CPUGenerator& g, T* o, int64_t n, double mean, double sd) {
  const T m = static_cast<T>(mean), s = static_cast<T>(sd);
  auto uni = [](uint64_t bits) { return static_cast<T>(unit<T>(bits)); };
  fill_from_draws(g, o, n, wide_draws<T>, uni);
  // Blocks of 16: kGrainSize elements per task, as other kernels.
  parallel_for(0, n / 16, kGrainSize / 16, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) box_muller16(o + 16 * k, m, s);
  });
  if (n % 16 != 0) {
    T tail[16];
    fill_from_draws(g, tail, 16, wide_draws<T>, uni);
    box_muller16(tail, m, s);
    std::copy(tail, tail + 16, o + n - 16);
  }
}

template <typename T>
void normal_scalar(CPUGenerator& g, T* o, int64_t n, double mean, double sd) {
  for (int64_t i = 0; i < n; ++i) {
    double z;
    if (g.next_double_normal) {
      z = std::fma(*g.next_double_normal, sd, mean);
      g.next_double_normal.reset();
    } else {
      double u1 = unit<double>(g.random64());
      double u2 = unit<double>(g.random64());
      double r = std::sqrt(-2.0 * libm_log1p(-u2));
      double theta = 2.0 * std::numbers::pi * u1;
      g.next_double_normal = r * libm_sin(theta);
      z = std::fma(r * libm_cos(theta), sd, mean);
    }
    o[i] = static_cast<T>(z);
  }
}

// ---- everything else ---------------------------------------------------------

template <typename T>
T from_int64(int64_t v) {
  if constexpr (is_float_v<T>) return static_cast<T>(static_cast<opmath_t<T>>(v));
  else return static_cast<T>(v);
}

template <typename T>
void random_fill(T* o, int64_t n, const RandomParams& p) {
  CPUGenerator& g = *p.gen;
  switch (p.kind) {
    case RandomKind::IntRange: {
      // bits % range + low; 64-bit draws for ranges of 2^28 and more (less
      // modulo bias), unless the op fixes the width.
      const uint64_t range = p.range;
      const int64_t low = p.low;
      bool wide = p.wide_draws.value_or(range == 0 || range >= (uint64_t(1) << 28));
      fill_from_draws(g, o, n, wide, [=](uint64_t bits) {
        uint64_t r = range == 0 ? bits : bits % range;
        return from_int64<T>(static_cast<int64_t>(r + static_cast<uint64_t>(low)));
      });
      return;
    }
    case RandomKind::Bernoulli: {
      // u < p with u a 53-bit double, whatever the output type.
      const double prob = p.a;
      fill_from_draws(g, o, n, true, [=](uint64_t bits) { return from_int64<T>(unit<double>(bits) < prob ? 1 : 0); });
      return;
    }
    default:
      break;
  }
  if constexpr (is_float_v<T>) {
    switch (p.kind) {
      case RandomKind::Uniform: {
        if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
          // 16-bit floats: a 24-bit float uniform, scaled in float (fused), rounded
          // once; a value rounding up to `to` becomes `from`, keeping [from, to).
          const float from = static_cast<float>(p.a), to = static_cast<float>(p.b), span = to - from;
          fill_from_draws(g, o, n, false, [=](uint64_t bits) {
            T r = static_cast<T>(std::fma(unit<float>(bits), span, from));
            return static_cast<float>(r) >= to ? static_cast<T>(from) : r;
          });
        } else {
          // from + u (to - from) with from and to in T, as one fused multiply-add.
          const T from = static_cast<T>(p.a), span = static_cast<T>(p.b) - from;
          fill_from_draws(g, o, n, wide_draws<T>, [=](uint64_t bits) { return std::fma(unit<T>(bits), span, from); });
        }
        return;
      }
      case RandomKind::Exponential: {
        // -1/lambda log(1 - u), u a 53-bit double.
        const double scale = -1.0 / p.a;
        fill_from_draws(g, o, n, true,
                        [=](uint64_t bits) { return static_cast<T>(scale * libm_log1p(-unit<double>(bits))); });
        return;
      }
      case RandomKind::Normal:
        if (!p.contiguous_layout || n < 16) normal_scalar(g, o, n, p.a, p.b);
        else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) normal_blocks(g, o, n, p.a, p.b);
        else normal_blocks_reduced(g, o, n, p.a, p.b);
        return;
      default:
        break;
    }
  }
  throw NotImplementedError(str("random: not implemented for dtype ", dtype_name(ScalarTypeOf<T>::value)));
}

void random_kernel(const Tensor& out, const RandomParams& p) {
  visit_dtype(out.dtype(), [&]<typename T>() { random_fill<T>(out.data_ptr<T>(), out.numel(), p); });
}

// Forward Fisher-Yates: position i swaps with i + (draw % (n - i)). Beyond
// 2^32 / 20 elements 32-bit draws would bias the modulo, so 64-bit draws feed
// the inside-out variant instead (torch's choice, kept for equal streams).
void randperm_kernel(const Tensor& out, int64_t n, CPUGenerator& g) {
  std::vector<int64_t> perm(n);
  if (n < int64_t(0xffffffffu / 20)) {
    for (int64_t i = 0; i < n; ++i) perm[i] = i;
    for (int64_t i = 0; i + 1 < n; ++i) {
      int64_t z = static_cast<int64_t>(g.random() % static_cast<uint64_t>(n - i));
      std::swap(perm[i], perm[i + z]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      int64_t z = static_cast<int64_t>(g.random64() % static_cast<uint64_t>(i + 1));
      perm[i] = perm[z];
      perm[z] = i;
    }
  }
  visit_dtype(out.dtype(), [&]<typename T>() {
    T* o = out.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = from_int64<T>(perm[i]);
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(random_stub, cpu::random_kernel);
STRATA_REGISTER_CPU_KERNEL(randperm_stub, cpu::randperm_kernel);

}  // namespace strata
