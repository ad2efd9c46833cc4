// Note [GEMM epilogues]
// "linear + bias + ReLU/GELU/SiLU" and the SwiGLU gate silu(x @ W1) * (x @ W3) are a GEMM followed by a pass over its
// output. The fusion scheduler (python/strata/_inductor/fusion.py, Note [GEMM epilogue steps]) turns a float32 GEMM
// (linear, matmul, mm, addmm) whose only reader is one such pointwise node into one kernel step: oneDNN's matmul
// primitive with the bias as its bias argument and the pointwise op as a post-op (eltwise relu / gelu_erf /
// gelu_tanh / swish, or a binary mul by the other factor), applied to each output block while it is in registers.
// The primitive is built once per descriptor (sizes, strides, epilogue) and cached; oneDNN's primitive API is
// loaded at first use (backends/cpu/dnnl_runtime.h), the post-op functions with it. Results differ from eager's
// (oneDNN's sgemm, then the op's own kernel) in the last bits: the bias is added after the whole sum rather than as
// the initial C, and oneDNN's erf / tanh / sigmoid are its own polynomial approximations.
#include "compile/gemm_epilogue.h"

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "backends/cpu/dnnl_runtime.h"

#ifdef STRATA_HAVE_DNNL_PRIMITIVES
#include <dlfcn.h>
#endif

namespace strata::compile {

#ifndef STRATA_HAVE_DNNL_PRIMITIVES

extern "C" int strata_gemm_epilogue(const int64_t*, void* const*) { return 1; }
bool gemm_epilogue_supported(const std::vector<int64_t>&) { return false; }

#else

namespace {

using Key = std::array<int64_t, kGemmFields>;
using cpu::dnnl_runtime::Api;

// The post-op entry points (not in dnnl_runtime's list), from the same library.
struct PostOps {
  decltype(&::dnnl_post_ops_create) create = nullptr;
  decltype(&::dnnl_post_ops_destroy) destroy = nullptr;
  decltype(&::dnnl_post_ops_append_eltwise) eltwise = nullptr;
  decltype(&::dnnl_post_ops_append_binary) binary = nullptr;
  decltype(&::dnnl_primitive_attr_set_post_ops) set = nullptr;
  bool ok = false;
};

const PostOps& post_ops() {
  static const PostOps p = [] {
    PostOps r;
    if (!cpu::dnnl_runtime::api().ok) return r;
    void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) return r;
    r.create = reinterpret_cast<decltype(r.create)>(dlsym(h, "dnnl_post_ops_create"));
    r.destroy = reinterpret_cast<decltype(r.destroy)>(dlsym(h, "dnnl_post_ops_destroy"));
    r.eltwise = reinterpret_cast<decltype(r.eltwise)>(dlsym(h, "dnnl_post_ops_append_eltwise"));
    r.binary = reinterpret_cast<decltype(r.binary)>(dlsym(h, "dnnl_post_ops_append_binary"));
    r.set = reinterpret_cast<decltype(r.set)>(dlsym(h, "dnnl_primitive_attr_set_post_ops"));
    r.ok = r.create && r.destroy && r.eltwise && r.binary && r.set;
    return r;
  }();
  return p;
}

struct Entry {
  const Api* api = nullptr;
  dnnl_primitive_t prim = nullptr;  // null: declined
  dnnl_memory_t ma = nullptr, mb = nullptr, mbias = nullptr, mmul = nullptr, mc = nullptr;
  ~Entry() {
    if (prim) api->dnnl_primitive_destroy(prim);
    for (dnnl_memory_t m : {ma, mb, mbias, mmul, mc})
      if (m) api->dnnl_memory_destroy(m);
  }
};

std::map<Key, std::unique_ptr<Entry>>& cache() {
  static auto* c = new std::map<Key, std::unique_ptr<Entry>>();  // outlives static destructors
  return *c;
}

bool build(const Api& a, const PostOps& po, const Key& k, Entry* e) {
  const int64_t m = k[kGemmM], n = k[kGemmN], kk = k[kGemmK];
  if (m <= 0 || n <= 0 || kk <= 0) return false;
  dnnl_dims_t ad = {m, kk}, bd = {kk, n}, cd = {m, n}, biasd = {1, n};
  dnnl_dims_t as = {k[kGemmARs], k[kGemmACs]}, bs = {k[kGemmBRs], k[kGemmBCs]}, cs = {n, 1}, biass = {n, 1};
  dnnl_memory_desc_t ma, mb, mc, mbias;
  if (a.dnnl_memory_desc_init_by_strides(&ma, 2, ad, dnnl_f32, as) != dnnl_success ||
      a.dnnl_memory_desc_init_by_strides(&mb, 2, bd, dnnl_f32, bs) != dnnl_success ||
      a.dnnl_memory_desc_init_by_strides(&mc, 2, cd, dnnl_f32, cs) != dnnl_success ||
      a.dnnl_memory_desc_init_by_strides(&mbias, 2, biasd, dnnl_f32, biass) != dnnl_success)
    return false;
  const bool bias = k[kGemmBias] != 0, mul = k[kGemmMul] != 0;
  dnnl_matmul_desc_t md;
  if (a.dnnl_matmul_desc_init(&md, &ma, &mb, bias ? &mbias : nullptr, &mc) != dnnl_success) return false;
  dnnl_post_ops_t ops = nullptr;
  if (po.create(&ops) != dnnl_success) return false;
  std::unique_ptr<dnnl_post_ops, decltype(po.destroy)> ops_guard(ops, po.destroy);
  dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
  switch (k[kGemmAct]) {
    case kActNone: break;
    case kActRelu: alg = dnnl_eltwise_relu; break;
    case kActGeluErf: alg = dnnl_eltwise_gelu_erf; break;
    case kActGeluTanh: alg = dnnl_eltwise_gelu_tanh; break;
    case kActSilu: alg = dnnl_eltwise_swish; break;  // x * sigmoid(alpha x), alpha 1
    default: return false;
  }
  if (alg != dnnl_alg_kind_undef && po.eltwise(ops, 1.0f, alg, alg == dnnl_eltwise_swish ? 1.0f : 0.0f, 0.0f) !=
                                        dnnl_success)
    return false;
  if (mul && po.binary(ops, dnnl_binary_mul, &mc) != dnnl_success) return false;
  dnnl_primitive_attr_t attr = nullptr;
  if (a.dnnl_primitive_attr_create(&attr) != dnnl_success) return false;
  std::unique_ptr<dnnl_primitive_attr, decltype(a.dnnl_primitive_attr_destroy)> attr_guard(
      attr, a.dnnl_primitive_attr_destroy);
  if (po.set(attr, ops) != dnnl_success) return false;
  dnnl_primitive_desc_t pd = nullptr;
  if (a.dnnl_primitive_desc_create(&pd, &md, attr, a.engine, nullptr) != dnnl_success) return false;
  std::unique_ptr<dnnl_primitive_desc, decltype(a.dnnl_primitive_desc_destroy)> pd_guard(
      pd, a.dnnl_primitive_desc_destroy);
  const char* impl = nullptr;
  if (a.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
  if (std::strstr(impl, "ref")) return false;  // a scalar reference loop: the two eager passes are faster
  if (a.dnnl_primitive_create(&e->prim, pd) != dnnl_success) {
    e->prim = nullptr;
    return false;
  }
  return a.dnnl_memory_create(&e->ma, &ma, a.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         a.dnnl_memory_create(&e->mb, &mb, a.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         a.dnnl_memory_create(&e->mc, &mc, a.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (!bias || a.dnnl_memory_create(&e->mbias, &mbias, a.engine, DNNL_MEMORY_NONE) == dnnl_success) &&
         (!mul || a.dnnl_memory_create(&e->mmul, &mc, a.engine, DNNL_MEMORY_NONE) == dnnl_success);
}

// The cached entry for k (built on first use; a declined layout is remembered). Called under the runtime's mutex.
Entry* entry_locked(const Key& k) {
  const Api& a = cpu::dnnl_runtime::api();
  const PostOps& po = post_ops();
  if (!a.ok || !po.ok || cpu::dnnl_runtime::disabled_by("STRATA_DNNL_MATMUL")) return nullptr;
  auto& c = cache();
  auto it = c.find(k);
  if (it == c.end()) {
    if (c.size() >= 256) c.clear();  // bounded: a program has few distinct GEMM layouts
    auto fresh = std::make_unique<Entry>();
    fresh->api = &a;
    if (!build(a, po, k, fresh.get())) {
      fresh = std::make_unique<Entry>();
      fresh->api = &a;
    }
    it = c.emplace(k, std::move(fresh)).first;
  }
  return it->second->prim ? it->second.get() : nullptr;
}

Key key_of(const int64_t* desc) {
  Key k;
  std::memcpy(k.data(), desc, sizeof(int64_t) * kGemmFields);
  return k;
}

}  // namespace

extern "C" int strata_gemm_epilogue(const int64_t* desc, void* const* bufs) {
  const Key k = key_of(desc);
  std::lock_guard<std::mutex> g(cpu::dnnl_runtime::mutex());
  Entry* e = entry_locked(k);
  if (!e) return 1;
  const Api& a = *e->api;
  int b = 0;
  void* pa = bufs[b++];
  void* pb = bufs[b++];
  void* pbias = k[kGemmBias] ? bufs[b++] : nullptr;
  void* pmul = k[kGemmMul] ? bufs[b++] : nullptr;
  void* pc = bufs[b];
  dnnl_exec_arg_t args[5];
  int nargs = 0;
  auto bind = [&](int arg, dnnl_memory_t mem, void* p) {
    args[nargs++] = {arg, mem};
    return a.dnnl_memory_set_data_handle(mem, p) == dnnl_success;
  };
  if (!bind(DNNL_ARG_SRC, e->ma, pa) || !bind(DNNL_ARG_WEIGHTS, e->mb, pb) || !bind(DNNL_ARG_DST, e->mc, pc) ||
      (pbias && !bind(DNNL_ARG_BIAS, e->mbias, pbias)) ||
      (pmul && !bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(k[kGemmAct] != kActNone ? 1 : 0) | DNNL_ARG_SRC_1, e->mmul, pmul)))
    return 1;
  if (a.dnnl_primitive_execute(e->prim, a.stream, nargs, args) != dnnl_success) return 1;
  return a.dnnl_stream_wait(a.stream) == dnnl_success ? 0 : 1;
}

bool gemm_epilogue_supported(const std::vector<int64_t>& desc) {
  if (desc.size() != static_cast<size_t>(kGemmFields)) return false;
  std::lock_guard<std::mutex> g(cpu::dnnl_runtime::mutex());
  return entry_locked(key_of(desc.data())) != nullptr;
}

#endif

}  // namespace strata::compile
