// CPU kernels of decl/misc_more.def: sorted search (searchsorted, bucketize,
// isin) and scatter_reduce. Both loop over contiguous operands the op
// implementation prepared.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/loops.h"
#include "ops/misc_more_stubs.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return std::isnan(static_cast<float>(v));
  } else {
    return false;
  }
}

template <typename T>
auto value_of(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

void searchsorted_kernel(const Tensor& out, const Tensor& sorted, const Tensor& values, const Tensor& sorter,
                         bool right) {
  const int64_t m = sorted.dim() == 0 ? 1 : sorted.size(-1);
  const bool shared = sorted.dim() <= 1;
  const int64_t n = values.dim() == 0 ? 1 : values.size(-1);
  const int64_t total = values.numel();
  const int64_t* perm = sorter.defined() ? sorter.data_ptr<int64_t>() : nullptr;
  const bool out64 = out.dtype() == ScalarType::Int64;
  visit_dtype(values.dtype(), [&]<typename T>() {
    const T* s = sorted.data_ptr<T>();
    const T* v = values.data_ptr<T>();
    int64_t* o64 = out64 ? out.data_ptr<int64_t>() : nullptr;
    int32_t* o32 = out64 ? nullptr : out.data_ptr<int32_t>();
    parallel_for(0, total, 2048, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t row = shared ? 0 : i / n;
        const T* srow = s + row * m;
        const int64_t* prow = perm ? perm + row * m : nullptr;
        const T x = v[i];
        int64_t lo = 0, hi = m;
        while (lo < hi) {
          const int64_t mid = lo + (hi - lo) / 2;
          const T y = prow ? srow[prow[mid]] : srow[mid];
          // left: the first y >= x; right: the first y > x. Written as torch's
          // negated tests so that NaN (never >= or >) goes right, as in torch.
          const bool go_right = right ? !(value_of(y) > value_of(x)) : !(value_of(y) >= value_of(x));
          if (go_right) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        if (out64) {
          o64[i] = lo;
        } else {
          o32[i] = static_cast<int32_t>(lo);
        }
      }
    });
  });
}

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Calls f(out_offset, src_offset) for every element of index in row-major
// order; the output offset has the index value in place of the coordinate
// along dim. Offsets advance incrementally (no per-element loop over dims).
template <typename F>
void walk_scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, F&& f) {
  const int64_t nd = out.dim();
  const int64_t n = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t last = nd - 1;
  const int64_t inner = index.size(last);
  const int64_t os_last = last == dim ? 0 : out.stride(last), ss_last = src.stride(last);
  const int64_t os_dim = out.stride(dim);
  std::vector<int64_t> coord(nd, 0);
  int64_t base_o = 0, base_s = 0;  // offsets of the current row's first element (dim's term left out of base_o)
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t k = 0; k < inner; ++k) {
      f(base_o + k * os_last + idx[i + k] * os_dim, base_s + k * ss_last);
    }
    // Next row: carry through the outer dims.
    for (int64_t d = last - 1; d >= 0; --d) {
      const int64_t od = d == dim ? 0 : out.stride(d);
      if (++coord[d] < index.size(d)) {
        base_o += od;
        base_s += src.stride(d);
        break;
      }
      base_o -= od * (index.size(d) - 1);
      base_s -= src.stride(d) * (index.size(d) - 1);
      coord[d] = 0;
    }
  }
}

template <typename T, typename Op>
void scatter_reduce_loop(T* o, const T* s, const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                         std::vector<int64_t>& count, Op op) {
  if (count.empty()) {
    walk_scatter(out, dim, index, src, [&](int64_t to, int64_t so) { o[to] = op(o[to], s[so]); });
  } else {
    walk_scatter(out, dim, index, src, [&](int64_t to, int64_t so) {
      o[to] = op(o[to], s[so]);
      ++count[to];
    });
  }
}

void scatter_reduce_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                           ScatterReduce reduce, bool include_self) {
  const int64_t n = index.numel();
  const int64_t dim_size = out.size(dim);
  // Every index is checked before anything is written.
  const int64_t* idx = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= dim_size) {
      throw IndexError(str("scatter_reduce: index ", idx[i], " is out of bounds for dimension ", dim, " with size ",
                           dim_size));
    }
  }
  visit_dtype(out.dtype(), [&]<typename T>() {
    using A = Acc<T>;
    T* o = out.data_ptr<T>();
    const T* s = src.data_ptr<T>();
    const int64_t on = out.numel();
    std::vector<int64_t> count;
    if (reduce == ScatterReduce::Mean) count.assign(on, 0);
    if (!include_self) {
      // Scattered-to elements start from the reduction's identity instead of self.
      A ident{};
      if (reduce == ScatterReduce::Prod) ident = A(1);
      if (reduce == ScatterReduce::Amax) {
        ident = std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                     : std::numeric_limits<A>::lowest();
      }
      if (reduce == ScatterReduce::Amin) {
        ident = std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity()
                                                     : std::numeric_limits<A>::max();
      }
      walk_scatter(out, dim, index, src, [&](int64_t to, int64_t) { o[to] = static_cast<T>(ident); });
    }
    // NaN propagates through amax/amin (the first NaN met stays).
    auto pick = [](A cur, A x, bool greater) {
      if (is_nan_value(cur)) return cur;
      if (is_nan_value(x)) return x;
      return (greater ? x > cur : x < cur) ? x : cur;
    };
    switch (reduce) {
      case ScatterReduce::Sum:
      case ScatterReduce::Mean:
        scatter_reduce_loop(o, s, out, dim, index, src, count, [](T a, T b) {
          if constexpr (std::is_same_v<T, bool>) {
            return static_cast<T>(a || b);
          } else {
            return static_cast<T>(static_cast<A>(a) + static_cast<A>(b));
          }
        });
        break;
      case ScatterReduce::Prod:
        scatter_reduce_loop(o, s, out, dim, index, src, count, [](T a, T b) {
          if constexpr (std::is_same_v<T, bool>) {
            return static_cast<T>(a && b);
          } else {
            return static_cast<T>(static_cast<A>(a) * static_cast<A>(b));
          }
        });
        break;
      case ScatterReduce::Amax:
        scatter_reduce_loop(o, s, out, dim, index, src, count,
                            [&](T a, T b) { return static_cast<T>(pick(static_cast<A>(a), static_cast<A>(b), true)); });
        break;
      case ScatterReduce::Amin:
        scatter_reduce_loop(o, s, out, dim, index, src, count, [&](T a, T b) {
          return static_cast<T>(pick(static_cast<A>(a), static_cast<A>(b), false));
        });
        break;
    }
    if (reduce == ScatterReduce::Mean) {
      if constexpr (!std::is_same_v<T, bool>) {
        // Only elements that received something are divided; self counts once when included.
        for (int64_t t = 0; t < on; ++t) {
          if (count[t] == 0) continue;
          const int64_t c = count[t] + (include_self ? 1 : 0);
          const A v = static_cast<A>(o[t]);
          if constexpr (std::is_integral_v<A>) {
            // Integer means round toward negative infinity, as torch's floor division.
            const int64_t w = static_cast<int64_t>(v);
            int64_t q = w / c;
            if (w % c != 0 && w < 0) --q;
            o[t] = static_cast<T>(q);
          } else {
            o[t] = static_cast<T>(v / A(c));
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(searchsorted_stub, cpu::searchsorted_kernel);
STRATA_REGISTER_CPU_KERNEL(scatter_reduce_stub, cpu::scatter_reduce_kernel);

}  // namespace strata
