// CPU kernels of cummax/cummin, logcumsumexp and the selections (kthvalue,
// median, nanmedian, mode). Compiled once per ISA level. Inputs are
// contiguous [outer, n, inner]; see ops/order_stats.h for the contracts.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backends/cpu/loops.h"
#include "ops/order_stats.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Work per (outer, inner) line is about n elements.
int64_t line_grain(int64_t n) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)); }

// ---- cummax / cummin -------------------------------------------------------------
// Note [cummax scans]: a NaN always takes over (and keeps the later index), ties take the later index. Along a
// contiguous line (inner == 1) the running extremum changes rarely, so the update is a branch the predictor gets
// right, not a select: a select would chain every element's compare onto the previous one's. With inner > 1
// the scan walks whole rows of `inner` elements (row k reads row k-1's results), which vectorizes and reads
// memory in order instead of one strided column at a time.
template <typename O, bool Max>
STRATA_ALWAYS_INLINE bool cum_takes(O v, O best) {
  if constexpr (std::is_floating_point_v<O>) return std::isnan(v) || (Max ? v >= best : v <= best);
  else return Max ? v >= best : v <= best;
}

template <typename T, bool Max>
void cum_extremum_lines(const T* in, T* vals, int64_t* idx, int64_t outer, int64_t n, int64_t inner) {
  using O = opmath_t<T>;
  if (inner == 1) {
    parallel_for(0, outer, line_grain(n), [&, n](int64_t b, int64_t e) {  // n by value: the stores cannot change it
      for (int64_t line = b; line < e; ++line) {
        const T* __restrict x = in + line * n;
        T* __restrict vo = vals + line * n;
        int64_t* __restrict io = idx + line * n;
        O best = static_cast<O>(x[0]);
        int64_t bi = 0, k = 0;
        if constexpr (std::is_floating_point_v<O>) {
          // Until the first NaN one compare decides: !(v < best) is v >= best or v NaN (for cummax).
          for (; k < n; ++k) {
            const O v = static_cast<O>(x[k]);
            if (__builtin_expect(Max ? !(v < best) : !(v > best), 0)) {
              asm volatile("");  // keeps this a branch: the compiler would otherwise turn it into a select
              best = v;
              bi = k;
              if (std::isnan(v)) break;
            }
            vo[k] = static_cast<T>(best);
            io[k] = bi;
          }
        }
        // Integers, or after a NaN (then only a later NaN takes over).
        for (; k < n; ++k) {
          const O v = static_cast<O>(x[k]);
          if (__builtin_expect(cum_takes<O, Max>(v, best), 0)) {
            asm volatile("");
            best = v;
            bi = k;
          }
          vo[k] = static_cast<T>(best);
          io[k] = bi;
        }
      }
    });
    return;
  }
  // Blocks of columns of one outer slice; each block is scanned row by row.
  constexpr int64_t kCols = 256;
  const int64_t blocks = (inner + kCols - 1) / kCols;
  parallel_for(0, outer * blocks, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n * kCols, 1)),
               [&](int64_t b, int64_t e) {
    for (int64_t unit = b; unit < e; ++unit) {
      const int64_t o = unit / blocks, j0 = (unit % blocks) * kCols, j1 = std::min(inner, j0 + kCols);
      const int64_t base = o * n * inner;
      for (int64_t j = j0; j < j1; ++j) {
        vals[base + j] = in[base + j];
        idx[base + j] = 0;
      }
      for (int64_t k = 1; k < n; ++k) {
        const T* __restrict x = in + base + k * inner;
        const T* __restrict pv = vals + base + (k - 1) * inner;
        const int64_t* __restrict pi = idx + base + (k - 1) * inner;
        T* __restrict vo = vals + base + k * inner;
        int64_t* __restrict io = idx + base + k * inner;
        for (int64_t j = j0; j < j1; ++j) {
          const bool t = cum_takes<O, Max>(static_cast<O>(x[j]), static_cast<O>(pv[j]));
          vo[j] = t ? x[j] : pv[j];
          io[j] = t ? k : pi[j];
        }
      }
    }
  });
}

void cum_extremum_kernel(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                         int64_t inner, bool is_max) {
  visit_dtype(in.dtype(), [&]<typename T>() {
    auto f = is_max ? cum_extremum_lines<T, true> : cum_extremum_lines<T, false>;
    f(in.data_ptr<T>(), values.data_ptr<T>(), indices.data_ptr<int64_t>(), outer, n, inner);
  });
}

// ---- logcumsumexp ------------------------------------------------------------------
// log(e^a + e^b): nan if either is nan; equal infinities give themselves.
template <typename O>
STRATA_ALWAYS_INLINE O log_add_exp(O a, O b) {
  if (std::isnan(a) || std::isnan(b)) return a + b;
  const O lo = a < b ? a : b, hi = a < b ? b : a;
  if (lo == hi && !std::isfinite(lo)) return a;
  return hi + std::log1p(std::exp(lo - hi));
}

void logcumsumexp_kernel(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  visit_floating(in.dtype(), "logcumsumexp", [&]<typename T>() {
    // Accumulated in double for float32/float64, float for 16-bit floats.
    using A = std::conditional_t<is_reduced_float_v<T>, float, double>;
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    parallel_for(0, outer * inner, line_grain(n), [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        const int64_t o = line / inner, j = line % inner;
        const int64_t base = o * n * inner + j;
        A acc = -std::numeric_limits<A>::infinity();
        for (int64_t k = 0; k < n; ++k) {
          const int64_t p = base + k * inner;
          acc = log_add_exp<A>(acc, static_cast<A>(static_cast<opmath_t<T>>(x[p])));
          y[p] = static_cast<T>(acc);
        }
      }
    });
  });
}

// ---- selections ----------------------------------------------------------------------
// Keys widened to double (floating types, exact) or int64, so the selection
// code is instantiated twice rather than per dtype.
template <typename K>
struct Item {
  K key;
  int64_t idx;
};
// nan is the greatest value; ties by index, so results do not depend on the algorithm.
template <typename K>
STRATA_ALWAYS_INLINE bool item_less(const Item<K>& a, const Item<K>& b) {
  if constexpr (std::is_floating_point_v<K>) {
    const bool an = std::isnan(a.key), bn = std::isnan(b.key);
    if (an || bn) return an != bn ? bn : a.idx < b.idx;
  }
  return a.key < b.key || (a.key == b.key && a.idx < b.idx);
}
template <typename K>
STRATA_ALWAYS_INLINE bool same_value(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) return a == b || (std::isnan(a) && std::isnan(b));
  else return a == b;
}

// Picks the answer of one line (buf holds its keys and indices); returns the
// position in the original line. Instantiated per key type only.
template <typename K>
__attribute__((noinline)) int64_t select_line(std::vector<Item<K>>& buf, SelectKind kind, int64_t k) {
  const int64_t n = static_cast<int64_t>(buf.size());
  auto cmp = [](const Item<K>& a, const Item<K>& b) { return item_less(a, b); };
  int64_t count = n;  // elements taking part (non-nan for NanMedian)
  if (kind == SelectKind::Median || kind == SelectKind::NanMedian) {
    int64_t first_nan = -1, nans = 0;
    if constexpr (std::is_floating_point_v<K>) {
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(buf[i].key)) {
          if (first_nan < 0) first_nan = i;
          ++nans;
        }
      }
    }
    if (first_nan >= 0 && (kind == SelectKind::Median || nans == n)) return first_nan;
    count = n - nans;
    k = (count - 1) / 2;
  }
  if (kind == SelectKind::Mode) {
    std::sort(buf.begin(), buf.end(), cmp);
    int64_t best_count = 0, best_at = 0;
    for (int64_t i = 0; i < n;) {
      int64_t j = i + 1;
      while (j < n && same_value(buf[j].key, buf[i].key)) ++j;
      if (j - i > best_count) {
        best_count = j - i;
        best_at = j - 1;  // the run's last item: the value's last occurrence
      }
      i = j;
    }
    return buf[best_at].idx;
  }
  std::nth_element(buf.begin(), buf.begin() + k, buf.end(), cmp);
  return buf[k].idx;
}

void select_kernel(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                   int64_t inner, SelectKind kind, int64_t k) {
  visit_dtype(in.dtype(), [&]<typename T>() {
    using K = std::conditional_t<is_float_v<T>, double, int64_t>;
    const T* x = in.data_ptr<T>();
    T* v = values.data_ptr<T>();
    int64_t* ix = indices.data_ptr<int64_t>();
    parallel_for(0, outer * inner, line_grain(n), [&](int64_t b, int64_t e) {
      std::vector<Item<K>> buf;
      for (int64_t line = b; line < e; ++line) {
        const int64_t o = line / inner, j = line % inner;
        const T* src = x + o * n * inner + j;
        buf.resize(n);
        for (int64_t i = 0; i < n; ++i) buf[i] = {static_cast<K>(static_cast<opmath_t<T>>(src[i * inner])), i};
        const int64_t at = select_line(buf, kind, k);
        v[line] = src[at * inner];
        ix[line] = at;
      }
    });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(cum_extremum_stub, cpu::cum_extremum_kernel);
STRATA_REGISTER_CPU_KERNEL(logcumsumexp_stub, cpu::logcumsumexp_kernel);
STRATA_REGISTER_CPU_KERNEL(select_stub, cpu::select_kernel);

}  // namespace strata
