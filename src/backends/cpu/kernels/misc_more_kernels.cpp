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

void scatter_reduce_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                           ScatterReduce reduce, bool include_self) {
  const int64_t nd = out.dim();
  const int64_t n = index.numel();
  const int64_t dim_size = out.size(dim);
  // Row-major walk over index; the output offset replaces the index's
  // coordinate along dim by the index value.
  std::vector<int64_t> isz(index.sizes().begin(), index.sizes().end());
  std::vector<int64_t> ostr(out.strides().begin(), out.strides().end());
  std::vector<int64_t> sstr(src.strides().begin(), src.strides().end());
  std::vector<int64_t> targets(n), sources(n);
  const int64_t* idx = index.data_ptr<int64_t>();
  std::vector<int64_t> coord(nd, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = idx[i];
    if (v < 0 || v >= dim_size) {
      throw IndexError(str("scatter_reduce: index ", v, " is out of bounds for dimension ", dim, " with size ",
                           dim_size));
    }
    int64_t to = 0, so = 0;
    for (int64_t d = 0; d < nd; ++d) {
      to += (d == dim ? v : coord[d]) * ostr[d];
      so += coord[d] * sstr[d];
    }
    targets[i] = to;
    sources[i] = so;
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++coord[d] < isz[d]) break;
      coord[d] = 0;
    }
  }
  visit_dtype(out.dtype(), [&]<typename T>() {
    using A = Acc<T>;
    T* o = out.data_ptr<T>();
    const T* s = src.data_ptr<T>();
    const int64_t on = out.numel();
    std::vector<int64_t> count;
    if (reduce == ScatterReduce::Mean || !include_self) count.assign(on, 0);
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
      for (int64_t i = 0; i < n; ++i) o[targets[i]] = static_cast<T>(ident);
    }
    for (int64_t i = 0; i < n; ++i) {
      A cur = static_cast<A>(o[targets[i]]);
      const A x = static_cast<A>(s[sources[i]]);
      switch (reduce) {
        case ScatterReduce::Sum:
        case ScatterReduce::Mean:
          if constexpr (std::is_same_v<T, bool>) {
            cur = cur || x;
          } else {
            cur = cur + x;
          }
          break;
        case ScatterReduce::Prod:
          if constexpr (std::is_same_v<T, bool>) {
            cur = cur && x;
          } else {
            cur = cur * x;
          }
          break;
        case ScatterReduce::Amax:
          cur = (is_nan_value(cur) || is_nan_value(x)) ? (is_nan_value(cur) ? cur : x) : (x > cur ? x : cur);
          break;
        case ScatterReduce::Amin:
          cur = (is_nan_value(cur) || is_nan_value(x)) ? (is_nan_value(cur) ? cur : x) : (x < cur ? x : cur);
          break;
      }
      o[targets[i]] = static_cast<T>(cur);
      if (!count.empty()) ++count[targets[i]];
    }
    if (reduce == ScatterReduce::Mean) {
      if constexpr (!std::is_same_v<T, bool>) {
        // Only elements that received something are divided; self counts once when included.
        std::vector<char> done(on, 0);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t t = targets[i];
          if (done[t]) continue;
          done[t] = 1;
          const int64_t c = count[t] + (include_self ? 1 : 0);
          const A v = static_cast<A>(o[t]);
          if constexpr (std::is_integral_v<A>) {
            // Integer means round toward negative infinity, as torch's floor division.
            A q = v / A(c);
            if ((v % A(c) != 0) && ((v < 0) != (c < 0))) --q;
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
