// Random fills from Philox counters (see Note [Counter-based random numbers]
// in core/generator.h). Work is split by 128-bit block, never inside one, and
// each block's values depend only on its index: results do not depend on the
// number of threads. Compiled once per ISA level.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/loops.h"
#include "ops/creation_common.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

using philox::Block;

// Uniform [0, 1) in the compute type of T from one word (or two for double).
template <typename T>
STRATA_ALWAYS_INLINE opmath_t<T> unit(const Block& blk, int k) {
  if constexpr (std::is_same_v<T, double>) {
    return philox::u64_to_unit_double(philox::join64(blk.v[2 * k], blk.v[2 * k + 1]));
  } else if constexpr (std::is_same_v<T, Half>) {
    return philox::u32_to_unit_half(blk.v[k]);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return philox::u32_to_unit_bf16(blk.v[k]);
  } else {
    return philox::u32_to_unit_float(blk.v[k]);
  }
}

// Calls gen(block, out_pointer, count) for every block; count < V only for the last.
template <typename T, typename Gen>
void for_each_block(T* o, int64_t n, int V, const Gen& gen) {
  int64_t nblocks = static_cast<int64_t>(random_blocks_for(n, V));
  parallel_for(0, nblocks, kGrainSize / 4, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      int64_t first = blk * V;
      gen(blk, o + first, static_cast<int>(std::min<int64_t>(V, n - first)));
    }
  });
}

template <typename T>
void random_fill(T* o, int64_t n, const RandomParams& p) {
  using O = opmath_t<T>;
  const uint64_t seed = p.state.seed, off = p.state.offset;
  auto block = [seed, off](int64_t i) { return philox::block_at(seed, off, static_cast<uint64_t>(i)); };
  switch (p.kind) {
    case RandomKind::IntRange: {
      const int V = random_values_per_block(RandomKind::IntRange, ScalarType::Int64, p.range);
      const uint64_t range = p.range;
      const int64_t low = p.low;
      for_each_block(o, n, V, [&](int64_t bi, T* dst, int cnt) {
        Block blk = block(bi);
        for (int k = 0; k < cnt; ++k) {
          uint64_t bits = V == 4 ? blk.v[k] : philox::join64(blk.v[2 * k], blk.v[2 * k + 1]);
          // Wrapping arithmetic: low + offset stays in [low, low + range).
          uint64_t r = range == 0 ? bits : bits % range;
          int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + r);
          if constexpr (is_float_v<T>) dst[k] = static_cast<T>(static_cast<O>(v));
          else dst[k] = static_cast<T>(v);
        }
      });
      return;
    }
    case RandomKind::Normal: {
      if constexpr (is_float_v<T>) {
        const int V = std::is_same_v<T, double> ? 2 : 4;
        // Full float resolution for the 16-bit types too: the tails depend on it.
        using U = std::conditional_t<std::is_same_v<T, double>, double, float>;
        const O mean = static_cast<O>(p.a), sd = static_cast<O>(p.b);
        for_each_block(o, n, V, [&](int64_t bi, T* dst, int cnt) {
          Block blk = block(bi);
          O z[4] = {};
          // Box-Muller on pairs of uniforms; 1 - u keeps the log argument in (0, 1].
          for (int k = 0; k < V; k += 2) {
            O u1 = O(1) - unit<U>(blk, k), u2 = unit<U>(blk, k + 1);
            O r = std::sqrt(O(-2) * std::log(u1));
            O th = O(2 * M_PI) * u2;
            z[k] = r * std::cos(th);
            z[k + 1] = r * std::sin(th);
          }
          for (int k = 0; k < cnt; ++k) dst[k] = static_cast<T>(z[k] * sd + mean);
        });
        return;
      }
      break;
    }
    default: {
      const int V = std::is_same_v<T, double> ? 2 : 4;
      const RandomKind kind = p.kind;
      const double a = p.a, b = p.b;
      for_each_block(o, n, V, [&](int64_t bi, T* dst, int cnt) {
        Block blk = block(bi);
        for (int k = 0; k < cnt; ++k) {
          if (kind == RandomKind::Bernoulli) {
            // Full float (or double) resolution of p whatever the output type.
            using UB = std::conditional_t<std::is_same_v<T, double>, double, float>;
            dst[k] = static_cast<T>(static_cast<double>(unit<UB>(blk, k)) < a ? 1 : 0);
            continue;
          }
          if constexpr (is_float_v<T>) {
            O u = unit<T>(blk, k);
            if (kind == RandomKind::Uniform) {
              dst[k] = static_cast<T>(static_cast<O>(a) + (static_cast<O>(b) - static_cast<O>(a)) * u);
              continue;
            }
            if (kind == RandomKind::Exponential) {
              dst[k] = static_cast<T>(-std::log(O(1) - u) / static_cast<O>(a));
              continue;
            }
          }
        }
      });
      return;
    }
  }
  throw NotImplementedError(str("random: not implemented for dtype ", dtype_name(ScalarTypeOf<T>::value)));
}

void random_kernel(const Tensor& out, const RandomParams& p) {
  visit_dtype(out.dtype(), [&]<typename T>() { random_fill<T>(out.data_ptr<T>(), out.numel(), p); });
}

// Fisher-Yates: swap i with a uniform j in [0, i], j drawn from block i. The
// loop is inherently sequential; it is deterministic for a given state.
void randperm_kernel(const Tensor& out, int64_t n, GeneratorState st) {
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    Block blk = philox::block_at(st.seed, st.offset, static_cast<uint64_t>(i));
    uint64_t j = philox::join64(blk.v[0], blk.v[1]) % static_cast<uint64_t>(i + 1);
    std::swap(perm[i], perm[j]);
  }
  visit_dtype(out.dtype(), [&]<typename T>() {
    T* o = out.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (is_float_v<T>) o[i] = static_cast<T>(static_cast<opmath_t<T>>(perm[i]));
      else o[i] = static_cast<T>(perm[i]);
    }
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(random_stub, cpu::random_kernel);
STRATA_REGISTER_CPU_KERNEL(randperm_stub, cpu::randperm_kernel);

}  // namespace strata
