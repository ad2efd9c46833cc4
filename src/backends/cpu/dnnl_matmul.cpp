// Note [oneDNN matmul for bfloat16 results]
// Why: a bfloat16 product through dnnl_gemm_bf16bf16f32 (the GEMM routine, float32 C) needs a float32 result and a
// second pass that rounds it to bfloat16. With a short inner dimension that pass and the float32 round trip through
// memory are a large share of the call: 256x64 @ 64x4096 took 735 us against 672 us for the GEMM alone and 649 us in
// torch, whose oneDNN matmul primitive writes bfloat16 from its kernel. Computing C in L2-sized column blocks and
// rounding from there was slower (oneDNN's GEMM loses more on narrow N than the rounding costs: docs/BINDING.md,
// step 19). So bfloat16 results come from the matmul primitive with a bfloat16 destination, cached per layout.
//
// oneDNN's primitive API is loaded at first use (dnnl_runtime.h); a missing library means the GEMM-routine path.
// A start-up check compares a small product with a float reference, and a layout oneDNN would run only through its
// reference implementation is declined (remembered per layout). STRATA_DNNL_MATMUL=0 turns it off.
#include "backends/cpu/dnnl_matmul.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cpu/dnnl_runtime.h"
#include "core/dtype.h"

namespace strata::cpu::dnnl_matmul {

#ifndef STRATA_HAVE_DNNL_PRIMITIVES

bool gemm_bf16_out(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                   uint16_t*, int64_t, int64_t) {
  return false;
}

#else

namespace {

using dnnl_runtime::Api;

using Key = std::array<int64_t, 9>;

struct Entry {
  dnnl_primitive_t prim = nullptr;  // null: oneDNN declined this layout
  dnnl_memory_t ma = nullptr, mb = nullptr, mc = nullptr;
  const Api* api = nullptr;
  ~Entry() {
    if (prim) api->dnnl_primitive_destroy(prim);
    for (dnnl_memory_t m : {ma, mb, mc})
      if (m) api->dnnl_memory_destroy(m);
  }
};

std::map<Key, std::unique_ptr<Entry>>& cache() {
  static auto* c = new std::map<Key, std::unique_ptr<Entry>>();  // outlives static destructors
  return *c;
}

bool build(const Api& a, const Key& k, Entry* e) {
  const int64_t m = k[0], n = k[1], kk = k[2];
  dnnl_dims_t ad = {m, kk}, bd = {kk, n}, cd = {m, n};
  dnnl_dims_t as = {k[3], k[4]}, bs = {k[5], k[6]}, cs = {k[7], k[8]};
  dnnl_memory_desc_t ma, mb, mc;
  if (a.dnnl_memory_desc_init_by_strides(&ma, 2, ad, dnnl_bf16, as) != dnnl_success ||
      a.dnnl_memory_desc_init_by_strides(&mb, 2, bd, dnnl_bf16, bs) != dnnl_success ||
      a.dnnl_memory_desc_init_by_strides(&mc, 2, cd, dnnl_bf16, cs) != dnnl_success)
    return false;
  dnnl_matmul_desc_t md;
  if (a.dnnl_matmul_desc_init(&md, &ma, &mb, nullptr, &mc) != dnnl_success) return false;
  dnnl_primitive_desc_t pd = nullptr;
  if (a.dnnl_primitive_desc_create(&pd, &md, nullptr, a.engine, nullptr) != dnnl_success) return false;
  std::unique_ptr<dnnl_primitive_desc, decltype(a.dnnl_primitive_desc_destroy)> guard(pd,
                                                                                        a.dnnl_primitive_desc_destroy);
  const char* impl = nullptr;
  if (a.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
  // The reference implementation is a scalar loop: far slower than widening to float32 and using the GEMM.
  if (std::strstr(impl, "ref")) return false;
  if (a.dnnl_primitive_create(&e->prim, pd) != dnnl_success) {
    e->prim = nullptr;
    return false;
  }
  return a.dnnl_memory_create(&e->ma, &ma, a.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         a.dnnl_memory_create(&e->mb, &mb, a.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         a.dnnl_memory_create(&e->mc, &mc, a.engine, DNNL_MEMORY_NONE) == dnnl_success;
}

bool run_locked(const Api& a, const Key& k, const uint16_t* pa, const uint16_t* pb, uint16_t* pc) {
  auto& c = cache();
  auto it = c.find(k);
  if (it == c.end()) {
    if (c.size() >= 128) c.clear();  // bounded: distinct layouts are few in practice
    auto fresh = std::make_unique<Entry>();
    fresh->api = &a;
    if (!build(a, k, fresh.get())) {
      fresh = std::make_unique<Entry>();  // remembered as declined
      fresh->api = &a;
    }
    it = c.emplace(k, std::move(fresh)).first;
  }
  Entry* e = it->second.get();
  if (!e->prim) return false;
  if (a.dnnl_memory_set_data_handle(e->ma, const_cast<uint16_t*>(pa)) != dnnl_success ||
      a.dnnl_memory_set_data_handle(e->mb, const_cast<uint16_t*>(pb)) != dnnl_success ||
      a.dnnl_memory_set_data_handle(e->mc, pc) != dnnl_success)
    return false;
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->ma}, {DNNL_ARG_WEIGHTS, e->mb}, {DNNL_ARG_DST, e->mc}};
  if (a.dnnl_primitive_execute(e->prim, a.stream, 3, args) != dnnl_success) return false;
  return a.dnnl_stream_wait(a.stream) == dnnl_success;
}

float bf16_to_float(uint16_t h) { return BFloat16::from_bits(h); }
uint16_t float_to_bf16(float f) { return BFloat16(f).bits; }

bool self_check(const Api& a) {
  // Odd sizes, a transposed B (column-major) and a C with padded rows.
  const int64_t m = 5, n = 37, k = 19, ldc = 40;
  std::vector<uint16_t> va(m * k), vb(k * n), vc(m * ldc, 0x7fc0);  // C starts as NaN
  uint32_t r = 12345;
  auto rnd = [&] { return (r = r * 1664525u + 1013904223u, float(int(r >> 9) % 2001 - 1000) / 500.0f); };
  for (auto& v : va) v = float_to_bf16(rnd());
  for (auto& v : vb) v = float_to_bf16(rnd());
  Key key{m, n, k, k, 1, 1, k, ldc, 1};  // b[p, j] at j * k + p
  {
    std::lock_guard<std::mutex> g(dnnl_runtime::mutex());
    if (!run_locked(a, key, va.data(), vb.data(), vc.data())) return true;  // declined: never used, nothing wrong
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(bf16_to_float(va[i * k + p])) * bf16_to_float(vb[j * k + p]);
      const float got = bf16_to_float(vc[i * ldc + j]);
      if (!(std::fabs(got - want) <= 1e-2 * (1.0 + std::fabs(want)))) return false;
    }
  return true;
}

// The matmul primitive is used when the library is there, STRATA_DNNL_MATMUL is not 0, and the start-up check passes.
bool enabled() {
  static const bool on = [] {
    const Api& a = dnnl_runtime::api();
    if (!a.ok || dnnl_runtime::disabled_by("STRATA_DNNL_MATMUL")) return false;
    if (self_check(a)) return true;
    std::fprintf(stderr, "strata: warning: oneDNN's bfloat16 matmul gave a wrong result in the start-up check; "
                         "not using it\n");
    return false;
  }();
  return on;
}

}  // namespace

bool gemm_bf16_out(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                   int64_t b_rs, int64_t b_cs, uint16_t* c, int64_t c_rs, int64_t c_cs) {
  if (m <= 0 || n <= 0 || k <= 0) return false;
  if (!enabled()) return false;
  std::lock_guard<std::mutex> g(dnnl_runtime::mutex());
  return run_locked(dnnl_runtime::api(), Key{m, n, k, a_rs, a_cs, b_rs, b_cs, c_rs, c_cs}, a, b, c);
}

#endif

}  // namespace strata::cpu::dnnl_matmul
