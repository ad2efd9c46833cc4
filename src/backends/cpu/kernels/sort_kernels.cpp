// CPU sort and topk. Keys are widened to int64 (integers, bool) or double
// (floating types, exact for all of them), so the sorting code is instantiated
// twice, not once per dtype; values are moved as raw elements by index.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/nd_iter.h"
#include "backends/cpu/loops.h"
#include "ops/shape_stubs.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <typename K>
struct Item {
  K key;
  int64_t idx;
};

// NaN sorts as the greatest value (PyTorch's order).
template <typename K>
STRATA_ALWAYS_INLINE bool key_less(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) return a < b || (!std::isnan(a) && std::isnan(b));
  else return a < b;
}

// Note [Radix sort of integer keys]
// Integer (and bool) lines of 256+ items are sorted by an LSD radix sort on the
// key bytes: the sign bit flipped so that the unsigned order is the signed one,
// every bit inverted for descending. Each pass is stable, so equal keys keep
// their index order, as std::stable_sort does. One counting pass histograms all
// eight bytes; bytes that are equal across the line (most of them for small
// ranges) need no pass.
//
// Floating keys (doubles, exact for every floating dtype) take the same sort
// after the usual bit map: negative numbers have every bit inverted, the others
// the sign bit set, so the unsigned order is the numeric one. Before the map
// -0.0 becomes 0.0 and every NaN one key above +inf, so the order is exactly
// key_less's (the comparison sort's): -0.0 and 0.0 are equal and keep their
// index order, NaNs are the greatest and keep theirs; descending inverts all
// bits, which keeps equal keys in index order, as the comparison sort does.
STRATA_ALWAYS_INLINE uint64_t radix_key(int64_t k) { return static_cast<uint64_t>(k) ^ (uint64_t(1) << 63); }
STRATA_ALWAYS_INLINE uint64_t radix_key(double k) {
  if (std::isnan(k)) return ~uint64_t(0);
  uint64_t u = std::bit_cast<uint64_t>(k == 0.0 ? 0.0 : k);
  return (u >> 63) ? ~u : (u | (uint64_t(1) << 63));
}

template <typename K>
void radix_sort_items(std::vector<Item<K>>& buf, bool descending) {
  const size_t n = buf.size();
  const uint64_t flip = descending ? ~uint64_t(0) : 0;
  static thread_local std::vector<Item<K>> tmp;
  tmp.resize(n);
  std::vector<uint32_t> hist(8 * 256, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = radix_key(buf[i].key) ^ flip;
    for (int b = 0; b < 8; ++b) hist[b * 256 + ((k >> (8 * b)) & 0xff)]++;
  }
  Item<K>* src = buf.data();
  Item<K>* dst = tmp.data();
  for (int b = 0; b < 8; ++b) {
    uint32_t* h = hist.data() + b * 256;
    const uint64_t first = ((radix_key(src[0].key) ^ flip) >> (8 * b)) & 0xff;
    if (h[first] == n) continue;  // every key has this byte
    uint32_t pos = 0;
    for (int v = 0; v < 256; ++v) {
      const uint32_t c = h[v];
      h[v] = pos;
      pos += c;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t k = radix_key(src[i].key) ^ flip;
      dst[h[(k >> (8 * b)) & 0xff]++] = src[i];
    }
    std::swap(src, dst);
  }
  if (src != buf.data()) std::copy(src, src + n, buf.data());
}

// Instantiated per key type only (not per dtype).
template <typename K>
__attribute__((noinline)) void sort_items(std::vector<Item<K>>& buf, bool descending) {
  if (buf.size() >= 256 && buf.size() < (size_t(1) << 32)) {
    radix_sort_items(buf, descending);
    return;
  }
  if (descending) {
    std::stable_sort(buf.begin(), buf.end(), [](const Item<K>& a, const Item<K>& b) { return key_less(b.key, a.key); });
  } else {
    std::stable_sort(buf.begin(), buf.end(), [](const Item<K>& a, const Item<K>& b) { return key_less(a.key, b.key); });
  }
}

// Ties go to the lower index, so results do not depend on the algorithm.
template <typename K>
__attribute__((noinline)) void topk_items(std::vector<Item<K>>& buf, int64_t k, bool largest) {
  auto cmp = [largest](const Item<K>& a, const Item<K>& b) {
    bool lt = largest ? key_less(b.key, a.key) : key_less(a.key, b.key);
    bool gt = largest ? key_less(a.key, b.key) : key_less(b.key, a.key);
    return lt || (!gt && a.idx < b.idx);
  };
  std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), cmp);
}

// Geometry over every dim but `dim`, for three operands (values, indices, self).
struct Slices {
  NdGeom<3> g;
  int64_t count = 1;
};

Slices outer_slices(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim) {
  Slices s;
  int p = 0;
  const Tensor* ts[3] = {&values, &indices, &self};
  for (int d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    s.g.sizes[p] = values.size(d);
    for (int k = 0; k < 3; ++k) s.g.strides[k][p] = ts[k]->stride(d) * static_cast<int64_t>(ts[k]->element_size());
    s.count *= values.size(d);
    p++;
  }
  s.g.nd = p;
  return s;
}

template <typename K, typename T>
void load_keys(std::vector<Item<K>>& buf, const char* base, int64_t stride, int64_t n) {
  buf.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    T v = *reinterpret_cast<const T*>(base + i * stride);
    buf[i] = {static_cast<K>(static_cast<opmath_t<T>>(v)), i};
  }
}

// Calls f.template operator()<K, T>() with T the dtype's C++ type and K its key type.
template <typename F>
void visit_keyed(ScalarType t, F&& f) {
  visit_dtype(t, [&]<typename T>() {
    using K = std::conditional_t<is_float_v<T>, double, int64_t>;
    f.template operator()<K, T>();
  });
}

template <typename E, typename K>
void write_out(const std::vector<Item<K>>& buf, int64_t n, char* v, int64_t vs, char* ix, int64_t xs, const char* src,
               int64_t ss) {
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<E*>(v + i * vs) = *reinterpret_cast<const E*>(src + buf[i].idx * ss);
    *reinterpret_cast<int64_t*>(ix + i * xs) = buf[i].idx;
  }
}

// Runs op<K, T>(buf, line, stride, L) on every line of self along dim (it fills
// buf with the line's items in output order) and writes the first out_len
// items to values/indices.
template <typename Op>
void for_each_sorted_line(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim,
                          int64_t out_len, int64_t grain_div, const Op& op) {
  Slices s = outer_slices(values, indices, self, dim);
  const int64_t L = self.size(dim);
  const int64_t es = static_cast<int64_t>(self.element_size());
  const int64_t vs = values.stride(dim) * es, xs = indices.stride(dim) * 8, ss = self.stride(dim) * es;
  char* vb = static_cast<char*>(values.data_ptr());
  char* xb = static_cast<char*>(indices.data_ptr());
  const char* sb = static_cast<const char*>(self.data_ptr());
  visit_keyed(self.dtype(), [&]<typename K, typename T>() {
    int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1) / grain_div);
    parallel_for(0, s.count, grain, [&](int64_t b, int64_t e) {
      std::vector<Item<K>> buf;
      for_each_run_nd(s.g, b, e, [&](const int64_t* off, const int64_t*, int64_t n) {
        const int64_t last = std::max<int64_t>(s.g.nd - 1, 0);  // unused when nd == 0
        for (int64_t r = 0; r < n; ++r) {
          int64_t o0 = off[0], o1 = off[1], o2 = off[2];
          if (s.g.nd > 0) {
            o0 += r * s.g.strides[0][last];
            o1 += r * s.g.strides[1][last];
            o2 += r * s.g.strides[2][last];
          }
          op.template operator()<K, T>(buf, sb + o2, ss, L);
          write_out<T, K>(buf, out_len, vb + o0, vs, xb + o1, xs, sb + o2, ss);
        }
      });
    });
  });
}

void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim, bool descending) {
  for_each_sorted_line(values, indices, self, dim, self.size(dim), 8,
                       [&]<typename K, typename T>(std::vector<Item<K>>& buf, const char* p, int64_t ss, int64_t L) {
                         load_keys<K, T>(buf, p, ss, L);
                         sort_items(buf, descending);
                       });
}

// Note [Top k by a heap]
// For k much smaller than the line, one pass over the line with a heap of the
// k best so far, keyed by radix_key (one unsigned compare per element, NaN the
// greatest, -0.0 equal to 0.0, all bits inverted for the smallest), instead of
// building a 16-byte item per element and a partial sort with the NaN-aware
// comparator. An element enters only when its key beats the worst kept one;
// an equal key never does, since it has the higher index, so ties go to the
// lower index, as in topk_items: the same selection and order.
template <typename K, typename T>
void topk_line(std::vector<Item<K>>& buf, const char* base, int64_t stride, int64_t n, int64_t k, bool largest) {
  if (k == 0) {
    buf.clear();
    return;
  }
  if (k * 8 > n) {
    load_keys<K, T>(buf, base, stride, n);
    topk_items(buf, k, largest);
    return;
  }
  const uint64_t flip = largest ? 0 : ~uint64_t(0);
  auto key = [&](int64_t i) {
    const T v = *reinterpret_cast<const T*>(base + i * stride);
    return radix_key(static_cast<K>(static_cast<opmath_t<T>>(v))) ^ flip;
  };
  struct H {
    uint64_t u;
    int64_t i;
  };
  auto better = [](const H& a, const H& b) { return a.u > b.u || (a.u == b.u && a.i < b.i); };
  static thread_local std::vector<H> h;
  h.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) h[i] = {key(i), i};
  std::make_heap(h.begin(), h.end(), better);  // the worst kept item in front
  // Most elements lose to the worst kept one by a plain compare of values
  // (not better when <= it for largest, >= for smallest, NaN excepted); the
  // rest are decided on keys.
  using V = opmath_t<T>;
  auto val = [&](int64_t i) { return static_cast<V>(*reinterpret_cast<const T*>(base + i * stride)); };
  uint64_t worst = h.front().u;
  V wv = val(h.front().i);
  for (int64_t i = k; i < n; ++i) {
    const V v = val(i);
    if (largest ? v <= wv : v >= wv) continue;
    const uint64_t u = key(i);
    if (u > worst) {
      std::pop_heap(h.begin(), h.end(), better);
      h.back() = {u, i};
      std::push_heap(h.begin(), h.end(), better);
      worst = h.front().u;
      wv = val(h.front().i);
    }
  }
  std::sort_heap(h.begin(), h.end(), better);  // best first
  buf.resize(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) buf[j] = {K(0), h[j].i};
}

void topk_kernel(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t k, int64_t dim,
                 bool largest) {
  for_each_sorted_line(values, indices, self, dim, k, 4,
                       [&]<typename K, typename T>(std::vector<Item<K>>& buf, const char* p, int64_t ss, int64_t L) {
                         topk_line<K, T>(buf, p, ss, L, k, largest);
                       });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(sort_stub, cpu::sort_kernel);
STRATA_REGISTER_CPU_KERNEL(topk_stub, cpu::topk_kernel);

}  // namespace strata
